"""Threaded chunks (elements.md §2.11): every threaded path gives the bytes of one thread, at the threshold and
one element (block, row) either side of it, with chunk ends that a flat split would put inside a block, padded
blocks, per-axis scales along either axis, and stochastic rounding from a seed (the chunks' random bits are the
stream's own positions, checked against numpy's PCG64 directly)."""

from __future__ import annotations

import dataclasses
import os
import signal

import numpy as np
import pytest

import qref
from qref.core import parallel
from qref.core.encode import random_bits_from_seed
from qref.errors import QrefError

T = parallel.THRESHOLD
THREADS = (2, 3, 7)  # 7 > the chunks the threshold allows: chunk counts of 2 and 3 and the cap


def _x(n: int, seed: int = 0, dtype: object = np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(dtype)
    x[:: 997] = 0  # zeros, a NaN and infinities cross some chunk boundaries
    x[5] = np.nan
    x[n // 2] = np.inf
    x[-3] = -np.inf
    return x


def _parts(q: qref.QArray) -> list[bytes]:
    out = []
    for f in dataclasses.fields(q):
        v = getattr(q, f.name)
        if isinstance(v, np.ndarray):
            out.append(np.ascontiguousarray(v).tobytes())
    for k in sorted(q.meta):
        v = q.meta[k]
        if isinstance(v, np.ndarray):
            out.append(np.ascontiguousarray(v).tobytes())
    return out


def _chunks(units: int, unit_elements: int, threads: int) -> int:
    return len(parallel.chunk_bounds(units, unit_elements, threads))


# ---------------------------------------------------------------------------------------------------------
# the helper
# ---------------------------------------------------------------------------------------------------------
def test_chunk_bounds_cover_in_order() -> None:
    assert parallel.chunk_bounds(T - 1, 1, 8) == [(0, T - 1)]  # below the threshold: one chunk
    assert parallel.chunk_bounds(T, 1, 1) == [(0, T)]
    for units, per in ((T, 1), (T + 1, 1), (3 * T + 5, 1), (T // 32 + 1, 32), (1000, 4096)):
        for t in (2, 3, 7, 64):
            b = parallel.chunk_bounds(units, per, t)
            assert b[0][0] == 0 and b[-1][1] == units
            assert all(lo < hi for lo, hi in b) and all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))
            assert len(b) == min(t, units, units * per // parallel.MIN_CHUNK)


def test_thread_count_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.ENV, "3")
    assert parallel.resolve_threads() == 3
    assert parallel.resolve_threads(5) == 5
    with parallel.thread_limit(2):
        assert parallel.resolve_threads() == 2
    monkeypatch.delenv(parallel.ENV)
    assert parallel.resolve_threads() == parallel.cores()
    monkeypatch.setenv(parallel.ENV, "zero")
    with pytest.raises(QrefError, match="QREF_NUM_THREADS"):
        parallel.resolve_threads()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(QrefError, match="threads"):
            qref.encode(np.zeros(4, np.float32), "float8_e4m3fn", threads=bad)  # type: ignore[arg-type]


def test_seed_stream_positions() -> None:
    """A chunk's random bits are PCG64(seed)'s outputs at its own positions (numpy's stream, read whole)."""
    raw = np.random.PCG64(11).random_raw(5000)
    for start, count in ((0, 10), (1, 999), (4093, 907)):
        assert np.array_equal(random_bits_from_seed(count, 6, 11, start), raw[start:start + count] >> np.uint64(58))


def test_errors_raise_from_a_chunk() -> None:
    x = np.zeros(3 * T, np.float32)
    x[-1] = np.nan  # in the last chunk
    with pytest.raises(QrefError, match="NaN input"):
        qref.encode(x, "float8_e4m3fn", nan="error", threads=3)


# ---------------------------------------------------------------------------------------------------------
# encode / decode / quantize
# ---------------------------------------------------------------------------------------------------------
ENCODE = [
    ("float8_e4m3fn", np.float32, {}),  # jammed top-16 table
    ("float6_e3m2fn", np.float32, {}),
    ("float8_e5m2", np.float64, {}),  # float64: reference chunks
    ("bfloat16", np.float32, {}),  # 7 mantissa bits: the reference path
    ("float8_e4m3fn", np.float16, {}),  # 65536-entry table
    ("int8", np.float32, {"overflow": "saturate"}),
    ("float8_e4m3fn", np.float64, {"source": "via_float32"}),
    ("float8_e4m3fn", np.float32, {"rounding": "stochastic_a", "stochastic_bits": 8, "seed": 3}),
    ("float8_e5m2", np.float32, {"rounding": "stochastic_c", "stochastic_bits": 5, "seed": 2**40}),
]


@pytest.mark.parametrize("n", [T - 1, T, T + 1])
@pytest.mark.parametrize("fmt,dtype,kw", ENCODE, ids=[f"{f}-{np.dtype(d).name}-{'-'.join(k)}" for f, d, k in ENCODE])
def test_encode_decode(n: int, fmt: str, dtype: object, kw: dict[str, object]) -> None:
    x = _x(n, dtype=dtype)
    if fmt == "int8":
        x = np.nan_to_num(x, nan=0.0, posinf=1e4, neginf=-1e4)  # int storage: NaN/Inf have no code here
    one = qref.encode(x, fmt, threads=1, **kw)
    back = qref.decode(one, fmt, dtype=np.float32, threads=1)
    for t in THREADS:
        assert qref.encode(x, fmt, threads=t, **kw).tobytes() == one.tobytes()
        assert qref.decode(one, fmt, dtype=np.float32, threads=t).tobytes() == back.tobytes()
    if n > T:
        assert _chunks(n, 1, 2) == 2


def test_stochastic_random_bits_array_and_wide_codes() -> None:
    x = _x(3 * parallel.MIN_CHUNK + 17)
    r = np.random.default_rng(4).integers(0, 1 << 8, x.size)
    one = qref.encode(x, "float8_e4m3fn", rounding="stochastic_b", stochastic_bits=8, random_bits=r, threads=1)
    seeded = qref.encode(x, "float8_e4m3fn", rounding="stochastic_b", stochastic_bits=8, seed=9, threads=1)
    assert _chunks(x.size, 1, 3) == 3
    for t in THREADS:
        assert qref.encode(x, "float8_e4m3fn", rounding="stochastic_b", stochastic_bits=8, random_bits=r,
                           threads=t).tobytes() == one.tobytes()
        assert qref.encode(x, "float8_e4m3fn", rounding="stochastic_b", stochastic_bits=8, seed=9,
                           threads=t).tobytes() == seeded.tobytes()
    # the seeded stream is the random_bits array of the whole stream's top bits
    whole = np.random.PCG64(9).random_raw(x.size) >> np.uint64(56)
    assert qref.encode(x, "float8_e4m3fn", rounding="stochastic_b", stochastic_bits=8,
                       random_bits=whole, threads=3).tobytes() == seeded.tobytes()
    c32 = qref.encode(x, "float32", threads=1)  # 32-bit codes: decode's reference chunks
    assert qref.decode(c32, "float32", threads=3).tobytes() == qref.decode(c32, "float32", threads=1).tobytes()
    assert qref.quantize(x, "float8_e4m3fn", threads=3).tobytes() == qref.quantize(x, "float8_e4m3fn",
                                                                                   threads=1).tobytes()


# ---------------------------------------------------------------------------------------------------------
# schemes
# ---------------------------------------------------------------------------------------------------------
def _same_scheme_bytes(s: object, x: np.ndarray, qkw: dict[str, object] | None = None,
                       dkw: dict[str, object] | None = None) -> qref.QArray:
    one = s.quantize(x, threads=1, **(qkw or {}))  # type: ignore[attr-defined]
    v1 = s.dequantize(one, threads=1, **(dkw or {}))  # type: ignore[attr-defined]
    for t in THREADS:
        q = s.quantize(x, threads=t, **(qkw or {}))  # type: ignore[attr-defined]
        assert _parts(q) == _parts(one)
        assert s.dequantize(one, threads=t, **(dkw or {})).tobytes() == v1.tobytes()  # type: ignore[attr-defined]
    return one


BLOCK = [
    ("mxfp8_e4m3", {}), ("mxfp4", {}), ("mxfp6_e2m3", {"scale_rule": "rceil"}), ("mxint8", {}),
    ("nvfp4", {}), ("nvfp4", {"profile": "nvidia"}), ("mlx_affine", {"bits": 4, "group_size": 64}),
    ("mxfp4", {"rounding": "stochastic_a", "stochastic_bits": 8}),
]


@pytest.mark.parametrize("blocks_delta", [-1, 0, 1])
@pytest.mark.parametrize("name,kw", BLOCK, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in k.items())}" for n, k in BLOCK])
def test_block_schemes(blocks_delta: int, name: str, kw: dict[str, object]) -> None:
    """Whole blocks per chunk: a row of T / k + delta blocks (an odd count for one of the deltas: half its
    elements would end inside a block), its last block padded where the profile pads; and axis=0 (blocks down
    the columns) with a padded last block."""
    s = qref.scheme(name, **kw)
    k = s.block_size
    nb = T // k + blocks_delta
    x = _x(nb * k - (0 if s.pad == "error" else 5)).reshape(1, -1)
    qkw = {"seed": 5} if s.stochastic else {}
    _same_scheme_bytes(s, x, qkw)
    assert _chunks(nb, k, 2) == (1 if nb * k < T else 2)
    if s.pad != "error":
        xt = _x(k * 7 * (T // (k * 7) + 1)).reshape(k * 7, -1)[:-3]
        _same_scheme_bytes(s, xt, {"axis": 0, **qkw})


def test_tiled_scheme() -> None:
    s = qref.scheme("mxfp4", block_shape=(8, 8), block_size=64)
    x = _x(8 * 13 * 8 * (T // (64 * 13) + 2)).reshape(-1, 8 * 13)[:-3, :-5]  # partial tiles on both axes
    _same_scheme_bytes(s, x)


def test_uniform_schemes() -> None:
    """Rows of a per-axis scale (axis 0: sliced scales; axis 1: broadcast), one scale (flat elements), blocked
    scales, float storage, the vector loop of a SIMD profile, and stochastic rounding."""
    x = np.nan_to_num(_x(515 * 517), nan=0.0, posinf=9.0, neginf=-9.0).reshape(515, 517)
    cases = [
        qref.calibrate(x, "int8", axis=0, threads=1).scheme(),
        qref.calibrate(x, "uint8", method="minmax", axis=1, threads=1).scheme(),
        qref.calibrate(x, "int8", threads=1).scheme(),
        qref.calibrate(x, "int4", axis=1, block_size=47, threads=1).scheme(),  # a partial last block
        qref.calibrate(x, "int8", threads=1).scheme(profile="tflite_optimized"),
        qref.scheme("float8_e4m3fn", scale=np.full(515, 0.25, np.float32), axis=0, profile="onnx"),
    ]
    for s in cases:
        one = _same_scheme_bytes(s, x)
        v1, m1 = s.dequantize_with_mask(one, threads=1)
        for t in THREADS:
            v, m = s.dequantize_with_mask(one, threads=t)
            assert v.tobytes() == v1.tobytes() and m.tobytes() == m1.tobytes()
        ref = s.quantize(x, _reference=True, threads=1)  # the defining steps, on one thread
        assert _parts(ref) == _parts(one)
    st = dataclasses.replace(cases[0], arithmetic=dataclasses.replace(cases[0].arithmetic, rounding="stochastic_a",
                                                                     stochastic_bits=6))
    _same_scheme_bytes(st, x, {"seed": 1})


LOOKUP = [("nf4", {"block_size": 64}), ("nf4", {"block_size": 64, "profile": "bitsandbytes"}),
          ("af4", {"block_size": 64}), ("dynamic8", {"block_size": 256}),
          ("nf4", {"block_size": 64, "rounding": "stochastic_a", "stochastic_bits": 8})]


@pytest.mark.parametrize("name,kw", LOOKUP)
def test_lookup_schemes(name: str, kw: dict[str, object]) -> None:
    s = qref.scheme(name, **kw)
    x = np.nan_to_num(_x(T + 3 * s.block_size), nan=0.0, posinf=9.0, neginf=-9.0)
    x[64:128] = 0  # an all-zero block
    qkw = {"seed": 3} if s.rounding != "deterministic" else {}
    one = _same_scheme_bytes(s, x, qkw)
    assert _parts(s.quantize(x, _reference=True, threads=1, **qkw)) == _parts(one)


def test_cast_scheme() -> None:
    _same_scheme_bytes(qref.scheme("float8_e5m2"), _x(T + 1))


# ---------------------------------------------------------------------------------------------------------
# calibration and compare
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": 1}, {"method": "minmax"}, {"method": "minmax", "axis": 0},
                                {"axis": 1, "block_size": 100}, {"axis": 0, "block_size": 64, "method": "minmax"}])
def test_calibrate(kw: dict[str, object]) -> None:
    x = _x(513 * 1030).reshape(513, 1030)  # NaN and +-Inf inside some chunks, none in others
    one = qref.calibrate(x, "int8", threads=1, **kw)
    ref = qref.calibrate(x, "int8", _reference=True, **kw)
    for t in THREADS:
        c = qref.calibrate(x, "int8", threads=t, **kw)
        assert c.scales.tobytes() == one.scales.tobytes() == ref.scales.tobytes()
        assert c.zero_points.tobytes() == one.zero_points.tobytes() == ref.zero_points.tobytes()


def test_compare() -> None:
    x = np.nan_to_num(_x(520 * 512), nan=0.0, posinf=9.0, neginf=-9.0).reshape(520, 512)
    schemes = ["float8_e4m3fn:axis=0", "mxfp4", "nvfp4", "int8:axis=0", "nf4:block_size=64"]
    one = qref.analysis.compare(x, schemes, threads=1)
    two = qref.analysis.compare(x, schemes, threads=3)
    assert repr(one.rows) == repr(two.rows)  # every float by its shortest round-trip text (NaN included)
    for lab, r in one.details.items():
        assert _parts(r.qarray) == _parts(two.details[lab].qarray)
        assert r.y.tobytes() == two.details[lab].y.tobytes()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_its_own_pool() -> None:
    """A child forked after the pool started (the harness runs backends in processes) has none of its threads:
    it must start its own pool, not wait forever on the parent's (it hung before the fork hook)."""
    x = _x(2 * T)
    want = qref.encode(x, "float8_e4m3fn", threads=2)  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        signal.alarm(60)  # a hang ends the child with SIGALRM instead of the test run
        ok = qref.encode(x, "float8_e4m3fn", threads=2).tobytes() == want.tobytes()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_block_row_tables_built_by_concurrent_chunks() -> None:
    """16-bit inputs gather from per-scheme row tables built on first use; chunks that build rows at the same
    time must not share a half-built row or scratch buffer (a race that gave wrong codes before the lock)."""
    import qref.schemes.block.fast as bf

    v = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    v = v[np.isfinite(v)].astype(np.float32)
    f = np.array([1.0, -0.75, 0.5, -0.3, 0.1234, 2.0**-4, -(2.0**-9), 0.0, -0.0, 2.0**-20, 0.999, -0.01, 0.49, 0.26,
                  -0.126, 1e-30] + [0.5] * 16)
    with np.errstate(over="ignore", under="ignore"):
        x = (v[:, None].astype(np.float64) * f[None, :]).astype(np.float32).astype(np.float16)  # every amax
    s = qref.scheme("mxfp8_e4m3", profile="ocp")
    want = s.quantize(x, threads=1)
    for t in (2, 3):
        bf.mx_rows16.cache_clear()  # fresh tables: the chunks build their rows concurrently
        assert _parts(s.quantize(x, threads=t)) == _parts(want)


def test_block_outer_scale_per_row_across_pieces() -> None:
    """An outer amax per row (block.md §5.2.1) over more than one piece (parallel.PIECE elements) of a chunk:
    every row's outer scale and codes equal those of that row quantized alone (one piece), on 1 and 2 threads.
    Before the pieces wrote into shared per-block outputs, only the first piece's outer scales were kept."""
    s = qref.scheme("nvfp4", profile="nvidia", global_scale_granularity="row")
    rows = 2 * parallel.PIECE // 4096 + 3
    x = _x(rows * 4096).reshape(rows, 4096)
    x[5] *= 1e4  # rows of different outer amax
    for t in (1, 2):
        q = s.quantize(x, threads=t)
        assert q.global_scale.shape == (rows, 4096 // 16)
        for r in (0, 5, rows // 2, rows - 1):
            alone = s.quantize(x[r:r + 1])
            assert q.global_scale[r].tobytes() == alone.global_scale[0].tobytes()
            assert q.codes[r].tobytes() == alone.codes[0].tobytes()
            assert q.scales[r].tobytes() == alone.scales[0].tobytes()


def test_scratch_is_kept_per_thread_and_site() -> None:
    """parallel.scratch: the same memory for the same thread and site (a smaller request is a view of it), other
    memory for another site and for another thread, and a fresh array above SCRATCH_MAX."""
    a = parallel.scratch("test.a", 1000, np.float32)
    assert a.shape == (1000,) and a.dtype == np.float32
    b = parallel.scratch("test.a", 500, np.int64)
    assert b.shape == (500,) and b.dtype == np.int64 and np.shares_memory(a, b)
    assert not np.shares_memory(a, parallel.scratch("test.b", 1000, np.float32))
    grown = parallel.scratch("test.a", 4000, np.float32)  # larger than the kept buffer: a new one is kept
    assert not np.shares_memory(a, grown) and np.shares_memory(grown, parallel.scratch("test.a", 10, np.uint8))
    big = parallel.SCRATCH_MAX // 8 + 1
    assert not np.shares_memory(parallel.scratch("test.big", big, np.float64),
                                parallel.scratch("test.big", big, np.float64))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(parallel.scratch, "test.a", 1000, np.float32).result()
    assert not np.shares_memory(other, parallel.scratch("test.a", 1000, np.float32))


@pytest.mark.parametrize("threads", [1, 2])
def test_results_never_share_scratch(threads: int) -> None:
    """A result is never a view of a kept scratch buffer: a second call (other input, same paths) leaves the
    first call's outputs as they were (encode from float32 / float16, decode, block and uniform quantize)."""
    n = T + 3 * 32
    x1, x2 = _x(n, 1), _x(n, 2)
    calls = [
        lambda x: qref.encode(x, "float8_e4m3fn", threads=threads),
        lambda x: qref.encode(x.astype(np.float16), "float4_e2m1fn", threads=threads),
        lambda x: qref.decode(qref.encode(x, "float8_e5m2"), "float8_e5m2", threads=threads),
        lambda x: qref.scheme("mxfp8_e4m3", profile="mlx").quantize(x.reshape(-1, 32), threads=threads),
        lambda x: qref.scheme("nvfp4", profile="nvidia").quantize(x.reshape(-1, 32), threads=threads),
        lambda x: qref.calibrate(x1.reshape(-1, 32), "int8", axis=0, threads=1).scheme().quantize(
            x.reshape(-1, 32), threads=threads),
    ]
    for call in calls:
        first = call(x1)
        kept = _parts(first) if isinstance(first, qref.QArray) else [first.tobytes()]
        call(x2)
        assert (_parts(first) if isinstance(first, qref.QArray) else [first.tobytes()]) == kept
