"""analysis.md §1-§3 computed in cache-sized chunks (qref compare's speed) give the values of the whole-array
expressions bit for bit: the metrics' sums combine chunks in numpy's own pairwise order, the breakdowns reduce
each group alone, and counts measure clipping on the saturated elements only. The whole-array expressions are
written out here as they stood before the chunking and are the definition."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import qref
from qref import analysis as A
from qref.analysis import breakdown as B
from qref.analysis import elementwise as E


def _pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values over 60 binades (so that the order of a sum shows in its last bits), zeros in x, exact y == x."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
    b = a + rng.standard_normal(n) * np.exp2(rng.integers(-40, 20, n))
    a[rng.random(n) < 0.01] = 0.0
    b[rng.random(n) < 0.01] = 0.0
    same = rng.random(n) < 0.05
    b[same] = a[same]
    return a, b


def _whole(a: np.ndarray, b: np.ndarray) -> tuple[float, ...]:
    """The whole-array expressions (the stand-alone metric functions)."""
    e = b - a
    nz = a != 0
    max_rel = float(np.max(np.abs(e[nz]) / np.abs(a[nz]))) if nz.any() else 0.0
    return float(np.mean(e * e)), float(np.mean(e)), float(np.sum(a * a)), float(np.max(np.abs(e))), max_rel


SIZES = [1, 7, 8, 129, 1000, E.CHUNK - 1, E.CHUNK, E.CHUNK + 1, 3 * E.CHUNK + 12345, (1 << 21) + 77]


@pytest.mark.parametrize("chunk", [E.CHUNK, 1000, 136])
def test_chunked_sums_equal_numpy_sums(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E, "CHUNK", chunk)
    for k, n in enumerate(SIZES):
        a, b = _pair(n, k)
        see, se, saa, mabs, mrel = E._chunk_sums(a, b)
        got = (see / n, se / n, saa, mabs, mrel)
        want = _whole(a, b)
        assert [v.hex() for v in got] == [v.hex() for v in want], (chunk, n)


def test_chunked_sums_detect_another_order() -> None:
    """The check above can fail: sequential chunk sums (not numpy's tree) differ from np.sum on these data."""
    rng = np.random.default_rng(3)
    e = rng.standard_normal(3 * E.CHUNK + 12345)
    seq = 0.0
    for i in range(0, e.size, E.CHUNK):
        seq += float(np.add.reduce(e[i:i + E.CHUNK]))
    assert seq != float(np.sum(e))


def test_metrics_equal_the_single_functions_on_large_inputs() -> None:
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((700, 1000)) * np.exp2(rng.integers(-20, 20, (700, 1000)))).astype(np.float32)
    x[5, :7] = 0.0
    for y in (x + (rng.standard_normal(x.shape) * 1e-3).astype(np.float32),
              np.where(rng.random(x.shape) < 0.001, np.inf, x * np.float32(1.01))):
        m = A.metrics(x, y)
        assert m.mse == A.mse(x, y) and m.sqnr_db == A.sqnr_db(x, y)
        assert m.max_abs_error == A.max_abs_error(x, y) and m.max_rel_error == A.max_rel_error(x, y)
        assert m.mean_error == A.mean_error(x, y)
        keep = rng.random(x.shape) < 0.9
        mk = A.metrics(x, y, where=keep)
        assert mk.mse == A.mse(x[keep], y[keep]) and mk.max_rel_error == A.max_rel_error(x[keep], y[keep])


# ---------------------------------------------------------------------------------------------------------
# breakdowns: the whole-array _group_stats as it stood
# ---------------------------------------------------------------------------------------------------------
def _group_stats_whole(xg: np.ndarray, yg: np.ndarray, valid: np.ndarray) -> dict[str, np.ndarray]:
    contiguous = all(a.flags.c_contiguous for a in (xg, yg, valid))
    if contiguous and valid.all():
        e, xs = yg - xg, xg
        cnt = np.full(xg.shape[:-1], xg.shape[-1], dtype=np.int64)
    else:
        e = np.where(valid, yg - xg, 0.0)
        xs = np.where(valid, xg, 0.0)
        cnt = valid.sum(axis=-1)
    sig = np.sum(xs * xs, axis=-1)
    noise = np.sum(e * e, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mse_ = noise / cnt
        mean_ = np.sum(e, axis=-1) / cnt
        sq = 10.0 * np.log10(sig / noise)
    sq = np.where(noise == 0, np.inf, np.where(sig == 0, -np.inf, sq))
    sq = np.where(cnt == 0, np.nan, sq)
    return {"count": cnt, "mse": np.where(cnt > 0, mse_, np.nan), "sqnr_db": sq,
            "max_abs_error": np.max(np.abs(e), axis=-1, initial=0.0),
            "mean_error": np.where(cnt > 0, mean_, np.nan), "amax": np.max(np.abs(xs), axis=-1, initial=0.0)}


def _same_breakdown(got: B.Breakdown, want: B.Breakdown) -> None:
    for f in ("count", "mse", "sqnr_db", "max_abs_error", "mean_error", "amax"):
        g, w = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        assert g.shape == w.shape and g.dtype == w.dtype, f
        assert np.array_equal(g.view(np.uint64) if g.dtype == np.float64 else g,
                              w.view(np.uint64) if w.dtype == np.float64 else w), f


@pytest.mark.parametrize("rows_chunk", [1 << 16, 100, 7])
def test_breakdowns_equal_the_whole_array_stats(rows_chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    a, b = _pair(300 * 520, 5)
    x, y = a.reshape(300, 520), b.reshape(300, 520)
    y_nan = y.copy()
    y_nan[rng.random(y.shape) < 0.02] = np.nan
    y_nan[7] = np.nan  # a channel with no valid element
    cases = []
    for yy in (y, y_nan):
        for ax in (0, 1):
            cases.append(("channel", yy, ax, None))
        for bs, ax in ((32, -1), (7, -1), (32, 0), (520, 1)):
            cases.append(("block", yy, ax, bs))
    for kind, yy, ax, bs in cases:
        monkeypatch.setattr(B, "_ROWS_CHUNK", rows_chunk)
        got = B.channel_breakdown(x, yy, ax) if kind == "channel" else B.block_breakdown(x, yy, bs, ax)
        monkeypatch.setattr(B, "_group_stats", _group_stats_whole)
        want = B.channel_breakdown(x, yy, ax) if kind == "channel" else B.block_breakdown(x, yy, bs, ax)
        monkeypatch.undo()
        _same_breakdown(got, want)


# ---------------------------------------------------------------------------------------------------------
# counts: clipping as it stood (every element, int64 inward codes)
# ---------------------------------------------------------------------------------------------------------
def _counts_whole(x: np.ndarray, q: qref.QArray) -> tuple[int, int, int, int]:
    """(saturated, clipped, flushed, nonfinite) by the whole-array expressions."""
    xa = np.asarray(x, np.float64)
    ya = np.asarray(q.dequantize(dtype=np.float64), np.float64)
    ok = np.isfinite(xa) & ~(np.zeros(xa.shape, bool) if q.unspecified is None else np.asarray(q.unspecified))
    flushed = int(np.count_nonzero(ok & (xa != 0) & (ya == 0)))
    nonfinite = int(np.count_nonzero(ok & ~np.isfinite(ya)))
    table, are_values = B._element_table(q.scheme)
    codes = np.asarray(q.codes)
    if are_values:
        st = q.scheme.storage
        lo, hi = st.lo, st.hi
        if getattr(q.scheme.arithmetic, "narrow_symmetric", False):
            lo = -hi
        ev = codes.astype(np.int64)
        top, bot = ev == hi, (ev == lo) & (lo != hi)
        inner = np.where(top, hi - 1, np.where(bot, lo + 1, ev))
    else:
        finite = np.isfinite(table)
        levels = np.unique(table[finite])
        lo_v, hi_v = float(levels[0]), float(levels[-1])
        is_top, is_bot = table == hi_v, (table == lo_v) & (lo_v != hi_v)
        idx = np.arange(table.size)
        code_up = int(idx[finite & (table == levels[-2])][0])
        code_dn = int(idx[finite & (table == levels[1])][0])
        inward = np.where(is_top, code_up, np.where(is_bot, code_dn, idx))
        top, bot = is_top[codes], is_bot[codes]
        inner = inward[codes]
    sat = (top | bot) & ok
    y_in = np.asarray(dataclasses.replace(q, codes=inner.astype(codes.dtype)).dequantize(dtype=np.float64))
    with np.errstate(invalid="ignore"):
        step = ya - y_in
        beyond = (xa - ya) * np.sign(step) > np.abs(step) / 2
    return int(np.count_nonzero(sat)), int(np.count_nonzero(sat & beyond)), flushed, nonfinite


@pytest.mark.parametrize("spec", ["int4:block_size=32", "int8:axis=0", "int8<-127:127>:axis=0", "uint4:block_size=16,"
                                  "method=minmax", "float8_e4m3fn:axis=0", "mxfp4", "nvfp4", "nf4:block_size=64"])
def test_counts_clipping_equals_the_whole_array_rule(spec: str) -> None:
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 256)) * np.where(rng.random((64, 256)) < 0.02, 50, 1)).astype(np.float32)
    x[3, :40] *= np.float32(1e-6)  # values that flush to zero
    s, kw = A.parse_scheme(spec).build(x)
    # a scheme calibrated on a quieter tensor clips the loud one
    s_quiet, _ = A.parse_scheme(spec).build(np.clip(x, -1, 1))
    x_special = x.copy()
    x_special[5, :3] = [np.nan, np.inf, -np.inf]
    x_special[6, :2] = [3e38, -3e38]
    for sch in (s, s_quiet):
        for xx in (x, x_special):
            with np.errstate(all="ignore"):
                q = sch.quantize(xx, **kw)
                c = B.counts(xx, q)
                want = _counts_whole(xx, q)
            assert (c.saturated, c.clipped, c.flushed, c.nonfinite) == want, spec
    if spec.startswith(("int", "uint", "float8")):  # calibrated on the quiet tensor: the loud one clips
        assert B.counts(x, s_quiet.quantize(x, **kw)).clipped > 0


def test_zero_groups() -> None:
    st = B._group_stats(np.zeros((0, 4)), np.zeros((0, 4)), np.ones((0, 4), bool))
    assert st["count"].shape == (0,)
    st = B._group_stats(np.zeros((3, 0)), np.zeros((3, 0)), np.ones((3, 0), bool))
    assert st["count"].tolist() == [0, 0, 0] and all(math.isnan(v) for v in st["mse"])


# ---------------------------------------------------------------------------------------------------------
# compare's memory (performance.md §6.2): finite pairs counted in chunks, keep=False, the CLI's heap bound
# ---------------------------------------------------------------------------------------------------------
def test_metrics_counts_nonfinite_pairs_in_chunks() -> None:
    """n, nonfinite, cosine and KL equal the whole-array expressions (one finite-pair mask) when non-finite
    values sit in the first, a middle and the short last chunk, in x, in y and in both."""
    rng = np.random.default_rng(11)
    n = 3 * E.CHUNK + 12345
    x = rng.standard_normal(n)
    y = x + rng.standard_normal(n) * 1e-3
    for at_x, at_y in (([], []), ([3], []), ([], [E.CHUNK + 5, n - 1]), ([2 * E.CHUNK, n - 2], [7, 2 * E.CHUNK])):
        xs, ys = x.copy(), y.copy()
        xs[at_x] = np.nan
        ys[at_y] = np.inf
        mask = np.isfinite(xs) & np.isfinite(ys)
        m = A.metrics(xs, ys)
        assert m.n == int(mask.sum())
        assert m.nonfinite == int(np.isfinite(xs).sum()) - int(mask.sum())
        a, b = xs[mask], ys[mask]
        assert m.cosine == float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert m.kl == A.kl_divergence(a, b)
        assert m.mse == A.mse(xs, ys)


SCHEMES5 = ("float8_e4m3fn:axis=0", "mxfp4", "nvfp4", "nf4:block_size=64", "int4:block_size=128")


def _rows_hex(t: object) -> list[tuple[object, ...]]:
    return [tuple(v.hex() if isinstance(v, float) else v for v in r.values()) for r in t.rows]  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", [(48, 96), (512, 1024)])
def test_compare_keep_false_gives_the_same_rows(shape: tuple[int, int]) -> None:
    """keep=False (qref compare without --plot) drops each scheme's Result; the rows are those of keep=True,
    bit for bit, on a small input and on one above the thread threshold."""
    x = np.random.default_rng(5).standard_normal(shape, dtype=np.float32)
    x[0, :3] = [0.0, 1e6, -1e6]  # clipped / saturated elements
    full = A.compare(x, SCHEMES5)
    lean = A.compare(x, SCHEMES5, keep=False)
    assert lean.details == {} and len(full.details) == 5
    assert _rows_hex(lean) == _rows_hex(full)


def test_cli_compare_prints_the_api_table(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """`qref compare` (keep=False, glibc's heap bounded) prints the table of analysis.compare with keep=True."""
    from pathlib import Path

    from qref.cli import main
    from qref.commands.compare import bound_heap

    x = np.random.default_rng(6).standard_normal((64, 256), dtype=np.float32)
    path = Path(str(tmp_path)) / "w.npy"
    np.save(path, x)
    assert main(["compare", str(path), "-q", "--format", "csv", "--schemes", *SCHEMES5]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == A.compare(x, SCHEMES5).to_csv().splitlines()
    import platform

    if platform.libc_ver()[0] == "glibc":
        assert bound_heap()
