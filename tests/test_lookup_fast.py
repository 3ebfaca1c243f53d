"""The lookup fast path equals the readable reference (spec: lut.md §3.6).

The decision tables against the reference decision (``qref.schemes.lookup.reference.decide``): every 16-bit
pattern for the float16 / bfloat16 compute dtypes; for float32 every table-bucket boundary and every decision point
+-3 ulp, and 2^20 random float32 bit patterns plus 2^20 random values in [-1.1, 1.1], per profile and table. quantize
end to end (``_reference=True`` is the definition): random, every float16 / bfloat16 value as a normalized input,
NaN / Inf / -0 / zero / subnormal / huge blocks, axis layouts, double quantization, and 2^18 random float32 bit
patterns; dequantize for random codes and scales into every output dtype. Codes compare as unsigned integers,
floats as bit patterns."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.schemes.lookup import fast, reference
from qref.schemes.lookup.decision import decision_points

BF16 = np.dtype(ml_dtypes.bfloat16)
PROFILES = ("spec", "bitsandbytes", "torchao", "openvino", "qwix")
NAMES = ("nf4", "fp4_bnb", "af4", "dynamic8")


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same_decisions(s, v: np.ndarray, cd: str) -> None:
    got_c, got_u = fast.decide_fast(s.rules, s.table, v, cd)
    ref_c, ref_u = reference.decide(s.rules, s.table, v, cd)
    bad = np.flatnonzero((got_c.astype(np.uint64) != ref_c.astype(np.uint64)) | (got_u != ref_u))
    assert bad.size == 0, [(hex(int(_bits(v[i:i + 1])[0])), int(got_c[i]), int(ref_c[i])) for i in bad[:5]]


def _float32_cases(s, rng: np.random.Generator) -> np.ndarray:
    u16 = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    pts, lo = decision_points(s.table, s.midpoints)
    pts = np.concatenate([pts, pts + lo, s.table.values.astype(np.float64)]).astype(np.float32)
    near = (pts.view(np.int32)[:, None] + np.arange(-3, 4, dtype=np.int32)[None, :]).ravel().view(np.float32)
    parts = [u16, u16 | np.uint32(0xFFFF), u16 | np.uint32(0x8000), near.view(np.uint32), (-near).view(np.uint32),
             rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32),
             rng.uniform(-1.1, 1.1, 1 << 20).astype(np.float32).view(np.uint32)]
    v = np.concatenate(parts).view(np.float32)
    # the level-1 runs (65536 or 4096 floats) and the level-2 runs within split ones: their boundaries too
    lut, _, sh = fast.decision_luts(s.rules, s.table, "float32")
    first = np.arange(lut.size, dtype=np.uint32) << np.uint32(sh)
    split = np.flatnonzero((lut >= s.table.size) & (lut < np.iinfo(lut.dtype).max)).astype(np.uint32)
    sub = ((split[:, None] << np.uint32(sh)) | (np.arange(256, dtype=np.uint32) << np.uint32(sh - 8))).ravel()
    ends = [first, first | np.uint32((1 << sh) - 1), sub, sub | np.uint32((1 << (sh - 8)) - 1)]
    return np.concatenate([v, *(e.view(np.float32) for e in ends)])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("profile", PROFILES)
def test_decision_tables_equal_the_reference(profile: str, name: str) -> None:
    s = qref.scheme(name, profile=profile)
    rng = np.random.default_rng(abs(hash((profile, name))) % 2**32)
    if s.nan == "error":
        pytest.skip("nan='error' raises on the NaN patterns")
    _same_decisions(s, _float32_cases(s, rng), "float32")
    for cd, dt in (("float16", np.float16), ("bfloat16", BF16)):  # every 16-bit pattern
        v = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float32)
        _same_decisions(s, v, cd)


def _same_qarray(a, b) -> None:
    assert a.codes.dtype == b.codes.dtype and a.codes.shape == b.codes.shape
    assert np.array_equal(a.codes, b.codes)
    assert np.array_equal(_bits(np.asarray(a.scales, np.float32)), _bits(np.asarray(b.scales, np.float32)))
    assert np.asarray(a.scales).shape == np.asarray(b.scales).shape
    assert np.array_equal(a.unspecified, b.unspecified)
    assert a.meta.keys() == b.meta.keys() and a.meta["input_dtype"] == b.meta["input_dtype"]
    if "double_quant" in a.meta:
        da, db = a.meta["double_quant"], b.meta["double_quant"]
        assert np.array_equal(_bits(np.asarray(da.codes)), _bits(np.asarray(db.codes)))
        assert np.array_equal(_bits(np.asarray(da.scales, np.float32)), _bits(np.asarray(db.scales, np.float32)))
        assert np.array_equal(np.asarray(da.unspecified), np.asarray(db.unspecified))


def _special_blocks(B: int) -> np.ndarray:
    rng = np.random.default_rng(B)
    rows = [rng.standard_normal(B) for _ in range(12)]
    rows[0][:] = 0.0
    rows[1][:] = -0.0
    rows[2][3] = np.nan
    rows[3][5] = np.inf
    rows[4][0] = -np.inf
    rows[5] *= 1e-40  # subnormal absmax
    rows[6] *= 1e38  # huge absmax (float16 scale overflow, reciprocal underflow)
    rows[7][:] = 1e-45
    rows[8][::2] = -0.0
    rows[9] *= 70000.0
    rows[10][:] = np.nan
    rows[11][0] = 1.0  # planted absmax: s = x
    return np.stack(rows).astype(np.float32)


def _inputs(B: int, dt: np.dtype) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    normal = rng.standard_normal((256, 4 * B)).astype(np.float32)
    special = np.tile(_special_blocks(B), (1, 4))
    every16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(
        np.float16 if dt != BF16 else BF16).astype(np.float32)
    every16 = every16[np.isfinite(every16) & (np.abs(every16) <= 1)]
    pad = (-every16.size) % (B - 1)
    every16 = np.concatenate([every16, np.zeros(pad, np.float32)]).reshape(-1, B - 1)
    planted = np.concatenate([np.ones((every16.shape[0], 1), np.float32), every16], axis=1)  # s = x exactly
    out = [normal, special, planted]
    with np.errstate(over="ignore"):  # the huge block overflows float16 on purpose
        return [a.astype(dt) if dt != np.float32 else a for a in out]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("profile", PROFILES)
def test_quantize_equals_reference(profile: str, name: str) -> None:
    base = qref.scheme(name, profile=profile)
    dts = [np.dtype(np.float32), np.dtype(np.float16), BF16]
    for dt in dts:
        if (dt.name if dt != BF16 else "bfloat16") not in base.input_dtypes:
            continue
        for B in (64, 256):
            s = qref.scheme(name, profile=profile, block_size=B, double_quant=False,
                            **({} if profile in ("openvino", "qwix") else {"axis": None}))
            for x in _inputs(B, dt):
                _same_qarray(s.quantize(x), s.quantize(x, _reference=True))
                if s.axis is None:
                    _same_qarray(s.quantize(x.reshape(-1)), s.quantize(x.reshape(-1), _reference=True))


@pytest.mark.parametrize("profile", PROFILES)
def test_quantize_random_bit_patterns(profile: str) -> None:
    rng = np.random.default_rng(len(profile))
    x = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32).reshape(-1, 256)
    for name in NAMES:
        s = qref.scheme(name, profile=profile, double_quant=False)
        if s.nan == "error":
            continue
        _same_qarray(s.quantize(x), s.quantize(x, _reference=True))


@pytest.mark.parametrize("profile", ["bitsandbytes", "torchao"])
def test_double_quantization_equals_reference(profile: str) -> None:
    x = np.random.default_rng(1).standard_normal((256, 64 * 4)).astype(np.float32)
    x[3, :64] = 0
    s = qref.scheme("nf4", profile=profile, double_quant=True)
    a, b = s.quantize(x), s.quantize(x, _reference=True)
    _same_qarray(a, b)
    for dt in (np.float32, np.float16, BF16, np.float64):
        assert np.array_equal(_bits(s.dequantize(a, dtype=dt)), _bits(s.dequantize(a, dtype=dt, _reference=True)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("profile", PROFILES)
def test_dequantize_equals_reference(profile: str, name: str) -> None:
    s = qref.scheme(name, profile=profile, double_quant=False)
    rng = np.random.default_rng(5)
    B = s.block_size
    shape = (8, 4 * B)
    codes = rng.integers(0, s.table.size, shape).astype(s.table.storage_format.code_dtype)
    nb = codes.size // B
    sc = rng.standard_normal(nb).astype(np.float32) * np.float32(2.0) ** rng.integers(-140, 120, nb)
    sc[:6] = [0.0, -0.0, np.inf, np.nan, 1e-45, 3e38]
    scales = sc.reshape(8, 4) if s.axis is not None else sc
    q = qref.QArray(codes=codes, scheme=s, scales=scales, axis=s.axis,
                    unspecified=np.zeros(shape, bool), meta={"input_dtype": "float32"})
    for dt in (np.float32, np.float16, BF16, np.float64):
        a, b = s.dequantize(q, dtype=dt), s.dequantize(q, dtype=dt, _reference=True)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(_bits(a), _bits(b)), (profile, name, dt)
    bad = codes.copy()
    bad.flat[17] = s.table.size if s.table.size < 256 else 0
    if s.table.size < 256:
        q2 = qref.QArray(codes=bad, scheme=s, scales=scales, axis=s.axis, unspecified=np.zeros(shape, bool),
                         meta={"input_dtype": "float32"})
        with pytest.raises(qref.QrefError, match="out of range"):
            s.dequantize(q2)


@pytest.mark.parametrize("profile", PROFILES)
def test_odd_block_size(profile: str) -> None:
    """Block size 33: chunks of odd length take the one-code-at-a-time gather."""
    s = qref.scheme("nf4", profile=profile, block_size=33, double_quant=False)
    x = np.random.default_rng(2).standard_normal((31, 66)).astype(np.float32)
    a, b = s.quantize(x), s.quantize(x, _reference=True)
    _same_qarray(a, b)
    assert np.array_equal(_bits(s.dequantize(a)), _bits(s.dequantize(a, _reference=True)))


def test_ftz_dequantize_with_subnormal_entries() -> None:
    """qwix's FTZ/DAZ dequantize (lut.md §4) on a table holding float32 subnormals: the flushed entries and
    scales, the flushed product, in the fast path as in the definition."""
    t = np.array([-1, -1e-39, -0.0, 1e-40, 2**-126, 0.5, 1, 3e-39], np.float32)
    s = qref.scheme("lut", table=t, profile="qwix")
    rng = np.random.default_rng(9)
    codes = rng.integers(0, t.size, (16, 128)).astype(np.uint8)
    sc = (rng.standard_normal(32) * 2.0 ** rng.integers(-130, 10, 32)).astype(np.float32).reshape(16, 2)
    sc[0] = [1e30, -1e20]  # a subnormal entry times a large scale: normal unless the entry is flushed first
    q = qref.QArray(codes=codes, scheme=s, scales=sc, axis=s.axis, unspecified=np.zeros(codes.shape, bool),
                    meta={"input_dtype": "float32"})
    a, b = s.dequantize(q), s.dequantize(q, _reference=True)
    assert np.array_equal(_bits(a), _bits(b))
    assert (np.abs(a[a != 0]) >= 2.0**-126).all()


def _wide_scales(rng: np.random.Generator, n: int) -> np.ndarray:
    """n float32 scales +-[1, 2) 2^e, e uniform in [-149, 127] (subnormal to near float32's max)."""
    m = rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
    return np.ldexp(m, rng.integers(-149, 128, n)).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("profile", PROFILES)
def test_dequantize_several_chunks(profile: str, name: str) -> None:
    """Three-plus dequantize chunks (fast.DQ_CHUNK elements each): scales over the whole exponent range with
    zeros, Inf, NaN and FTZ-tiny blocks in every chunk (qwix flushes only blocks that can underflow), codes in
    every chunk; an out-of-range code in the last chunk still raises."""
    s = qref.scheme(name, profile=profile, double_quant=False)
    B = s.block_size
    rows = max(1, fast.DQ_CHUNK // B)
    nb = 3 * rows + 5  # a short last chunk
    rng = np.random.default_rng(11)
    per = 4 if s.axis is not None else 1
    shape = (nb // per, per * B) if nb % per == 0 else (nb, B)
    codes = rng.integers(0, s.table.size, shape).astype(s.table.storage_format.code_dtype)
    sc = _wide_scales(rng, nb)
    sc[rng.integers(0, nb, 40)] = np.float32(2.0**-120)  # products below 2^-126 for most entries
    sc[rng.integers(0, nb, 8)] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -2e-38, 3e38]
    scales = sc.reshape(shape[0], -1) if s.axis is not None else sc
    q = qref.QArray(codes=codes, scheme=s, scales=scales, axis=s.axis,
                    unspecified=np.zeros(shape, bool), meta={"input_dtype": "float32"})
    for dt in (np.float32, BF16):
        a, b = s.dequantize(q, dtype=dt), s.dequantize(q, dtype=dt, _reference=True)
        assert np.array_equal(_bits(a), _bits(b)), (profile, name, dt)
    if s.table.size < 256:
        bad = codes.copy()
        bad.flat[-3] = s.table.size
        q2 = qref.QArray(codes=bad, scheme=s, scales=scales, axis=s.axis, unspecified=np.zeros(shape, bool),
                         meta={"input_dtype": "float32"})
        with pytest.raises(qref.QrefError, match="out of range"):
            s.dequantize(q2)


@pytest.mark.parametrize("B", [33, 64])
def test_dequantize_wide_codes_and_odd_blocks(B: int) -> None:
    """uint16 codes (a 512-entry table: one code at a time) and an odd block size over several chunks, under
    the FTZ profile (qwix) and the spec profile."""
    rng = np.random.default_rng(B)
    vals = np.sort(rng.standard_normal(512).astype(np.float32))
    vals[:3] = [0.0, 1e-39, -2.0**-126]
    for profile in ("spec", "qwix"):
        for table in (vals, vals[:16]):
            s = qref.scheme("lut", table=table, profile=profile, block_size=B, axis=None)
            nb = 3 * max(1, fast.DQ_CHUNK // B) + 1
            codes = rng.integers(0, table.size, (nb, B)).astype(s.table.storage_format.code_dtype)
            sc = _wide_scales(rng, nb)
            q = qref.QArray(codes=codes, scheme=s, scales=sc, axis=None, unspecified=np.zeros(codes.shape, bool),
                            meta={"input_dtype": "float32"})
            a, b = s.dequantize(q), s.dequantize(q, _reference=True)
            assert np.array_equal(_bits(a), _bits(b)), (profile, table.size)
            bad = codes.copy()
            bad.flat[-1] = table.size
            q2 = qref.QArray(codes=bad, scheme=s, scales=sc, axis=None, unspecified=np.zeros(codes.shape, bool),
                             meta={"input_dtype": "float32"})
            with pytest.raises(qref.QrefError, match="out of range"):
                s.dequantize(q2)


@pytest.mark.parametrize("profile", PROFILES)
def test_quantize_several_chunks(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """quantize over many chunks (fast.CHUNK made small): the elements left to the reference decision and the
    zero blocks are gathered across chunks; normal data, scaled data near every decision point, special blocks."""
    monkeypatch.setattr(fast, "CHUNK", 1 << 10)
    rng = np.random.default_rng(3)
    for name in NAMES:
        s = qref.scheme(name, profile=profile, double_quant=False)
        B = s.block_size
        x = rng.standard_normal((48, 4 * B)).astype(np.float32)
        x[::7, :B] = 0.0
        x[5, 3] = np.inf
        x[9, 1] = np.nan
        pts = s.table.values.astype(np.float32)
        near = (pts.view(np.int32)[:, None] + np.arange(-2, 3, dtype=np.int32)[None, :]).ravel().view(np.float32)
        near = np.clip(np.nan_to_num(near), -1, 1)
        x[20:, :].flat[: near.size] = near  # rows from 20 on: the absmax 1 (or larger) keeps s near the entries
        x[20:, 0] = 1.0
        if s.nan == "error":
            x = np.nan_to_num(x, nan=0.0)
        _same_qarray(s.quantize(x), s.quantize(x, _reference=True))


def _certified_all_entries(a: np.ndarray, b: np.ndarray, w: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The argmin certificate against every entry (lut.md §3.6 L2), written out directly."""
    lo, hi = np.minimum(a, b).astype(np.float64)[:, None], np.maximum(a, b).astype(np.float64)[:, None]
    tw, tk = e[w][:, None], e[None, :]
    worst = np.full((a.size, e.size), np.inf)
    for s in (lo, hi, np.clip(tk, lo, hi), np.clip(tw, lo, hi)):
        g = np.abs(s - tk) * (1 - 2.0**-23) - np.abs(s - tw) * (1 + 2.0**-23) - 2.0**-147
        worst = np.minimum(worst, g - 2.0**-40 * (np.abs(s) + np.abs(tk) + np.abs(tw)))
    return (np.where(tk == tw, np.inf, worst) > 0).all(axis=1)


@pytest.mark.parametrize("name", ["dynamic8", "nf4", "fp4_bnb"])
def test_argmin_certificate_neighbours(name: str) -> None:
    """The argmin certificate checks only the winner's two neighbouring values (lut.md §3.6 L2): it certifies
    every run the all-entries certificate does, and on every run it certifies, the reference decides the winner
    at 65 points spread over the run (runs of 2^16 and 2^12 floats, |s| up to 2^40, where distances merge)."""
    s = qref.scheme(name, profile="torchao", double_quant=False)
    e = reference.entries(s.rules, s.table, "float32")
    rng = np.random.default_rng(17)
    for sh in (16, 12):
        mag = rng.integers(0x3F000000, 0x54000000, 4000, dtype=np.int64)  # |s| in [0.5, 2^41)
        pat = ((mag | (rng.integers(0, 2, mag.size) << 31)).astype(np.uint32) >> np.uint32(sh)) << np.uint32(sh)
        last = pat | np.uint32((1 << sh) - 1)
        c0, _ = reference.decide(s.rules, s.table, pat.view(np.float32), "float32")
        c1, _ = reference.decide(s.rules, s.table, last.view(np.float32), "float32")
        keep = c0 == c1
        a, b, w = (pat[keep] + 1).view(np.float32), (last[keep] - 1).view(np.float32), c0[keep]
        got = fast._argmin_certified(a, b, w, e)
        full = _certified_all_entries(a, b, w.astype(np.intp), e.astype(np.float64))
        assert (got | ~full).all()
        steps = (np.arange(65, dtype=np.uint64) * ((1 << sh) - 1) // 64).astype(np.uint32)
        pts = (pat[keep][got][:, None] + steps[None, :]).ravel()
        codes, _ = reference.decide(s.rules, s.table, pts.view(np.float32), "float32")
        assert (codes.reshape(-1, 65) == w[got][:, None]).all()
        assert got.sum() > 100 and (~got).sum() > 100  # both kinds of run occur
