"""uniform.md §2.5: the fast float -> integer rounding equals the reference ``round_to_int`` (exact decomposition
and the core's round_to_quantum) on every float16 and bfloat16 value, on every tie and +-1..3 ulp around it over
the float32 and float64 integer range that has fractions, and on millions of random float32 / float64 patterns,
for every deterministic rounding mode."""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.profiles.uniform import ROUNDINGS
from qref.schemes.uniform import round_to_int
from qref.schemes.uniform.entry import dequantize_kernel
from qref.schemes.uniform.fast import integer_tail_applies, integer_tail_fast, round_to_int_fast
from qref.schemes.uniform.reference import integer_tail

MODES = list(ROUNDINGS)  # every mode a uniform scheme takes


def _near_ties(dt: type, top: int) -> np.ndarray:
    """k + 1/2 for k in a spread of integers up to 2^top (and their negatives), each +-0..3 ulp, plus the
    integers and +-1 ulp around them, +-0, +-Inf, NaN and the extremes."""
    info = np.finfo(dt)
    k = np.unique(np.concatenate([np.arange(0, 4096), np.exp2(np.arange(12, top)).astype(np.int64),
                                  np.exp2(np.arange(12, top)).astype(np.int64) - 1]))
    base = np.concatenate([k + 0.5, k.astype(np.float64)]).astype(dt)
    out = [base]
    lo, hi = base.copy(), base.copy()
    for _ in range(3):
        lo, hi = np.nextafter(lo, dt(-np.inf)), np.nextafter(hi, dt(np.inf))
        out += [lo, hi]
    v = np.concatenate(out)
    special = np.array([0.0, np.inf, np.nan, info.max, info.tiny, info.smallest_subnormal], dt)
    return np.concatenate([v, -v, special, -special])


def _random(dt: type, n: int, seed: int) -> np.ndarray:
    ui = np.uint32 if dt == np.float32 else np.uint64
    bits = np.random.default_rng(seed).integers(0, np.iinfo(ui).max, size=n, dtype=ui, endpoint=True)
    v = bits.view(dt)
    # and values of moderate magnitude, where the fraction matters
    mid = np.random.default_rng(seed + 1).uniform(-2.0**25, 2.0**25, size=n).astype(dt)
    return np.concatenate([v, mid])


def _same(x: np.ndarray, mode: str) -> None:
    with np.errstate(all="ignore"):
        n_ref, nan_ref = round_to_int(x, mode)
        n, nan = round_to_int_fast(x, mode)
    assert n.dtype == np.int64 and n.shape == x.shape
    assert np.array_equal(nan, nan_ref)
    bad = np.flatnonzero(n != n_ref)
    assert bad.size == 0, (mode, x.reshape(-1)[bad[:5]], n.reshape(-1)[bad[:5]], n_ref.reshape(-1)[bad[:5]])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_every_16_bit_value(mode: str, dt: type) -> None:
    _same(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt,top", [(np.float32, 26), (np.float64, 55)], ids=["float32", "float64"])
def test_ties_and_neighbours(mode: str, dt: type, top: int) -> None:
    _same(_near_ties(dt, top), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt,n", [(np.float32, 1 << 21), (np.float64, 1 << 19)], ids=["float32", "float64"])
def test_random_patterns(mode: str, dt: type, n: int) -> None:
    _same(_random(dt, n, 7), mode)


def test_uniform_schemes_take_integer_rounding_modes_only() -> None:
    assert "exponent_carry" not in MODES and len(MODES) == 8
    with pytest.raises(qref.QrefError, match="rounding mode"):
        qref.scheme("int8", scale=0.1, zero_point=0, rounding="exponent_carry")


def test_shapes_are_kept() -> None:
    x = np.array([[0.5, 1.5], [-2.5, np.nan]], np.float32)
    n, nan = round_to_int_fast(x, "nearest_even")
    assert n.tolist() == [[0, 2], [-2, 0]] and nan.tolist() == [[False, False], [False, True]]
    n, _ = round_to_int_fast(np.float32(2.5), "nearest_away")
    assert n.shape == () and int(n) == 3


# ---------------------------------------------------------------------------------------------------------
# the integer steps (uniform.md §2.5) against reference.integer_tail, field by field
# ---------------------------------------------------------------------------------------------------------
def _tail_inputs(dt: type, lo: int, hi: int) -> np.ndarray:
    """Integers and half-integers across and beyond the storage range +-0..2 ulp, the int32 and 2^62 edges,
    +-0, +-Inf, NaN, and random values."""
    k = np.arange(lo - 40, hi + 41, dtype=np.float64)
    base = np.concatenate([k, k + 0.5, [2.0**31, 2.0**31 - 128, 2.0**31 + 256, 2.0**62, 2.0**63, 1e30]])
    base = np.concatenate([base, -base]).astype(dt)
    out = [base]
    a, b = base.copy(), base.copy()
    for _ in range(2):
        a, b = np.nextafter(a, dt(-np.inf)), np.nextafter(b, dt(np.inf))
        out += [a, b]
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dt).max, -np.finfo(dt).max], dt)
    rnd = np.random.default_rng(11).uniform(2 * lo - 10, 2 * hi + 10, 4000).astype(dt)
    return np.concatenate([*out, special, rnd])


STORAGES = ["int8", "uint8", "int4", "uint4", "int16", "uint16", "int8<-127:127>", "int2"]


def _tail_case(storage: str, dt: type, **fields: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    fmt = qref.get_format(storage)
    lo, hi = fmt.full_range
    zs = np.unique(np.array([lo, hi, 0, lo + 1, hi - 1, (lo + hi) // 2]).clip(lo, hi))
    s = qref.scheme(storage, scale=np.full(zs.size, 0.5), zero_point=zs, axis=0, profile="stablehlo")
    s = dataclasses.replace(s, arithmetic=dataclasses.replace(s.arithmetic, **fields))
    q = np.broadcast_to(_tail_inputs(dt, lo, hi), (zs.size, _tail_inputs(dt, lo, hi).size)).copy()
    return s, q, zs.reshape(-1, 1).astype(np.int64)


def _tails_agree(s: Any, q: np.ndarray, Z: np.ndarray) -> None:
    m_ref = np.zeros(q.shape, bool)
    m_fast = np.zeros(q.shape, bool)
    with np.errstate(all="ignore"):
        want = integer_tail(s, q, Z, m_ref)
        got = integer_tail_fast(s, q, Z, m_fast)
    assert got.dtype == want.dtype
    assert np.array_equal(m_fast, m_ref)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (q.reshape(-1)[bad[:5]], got.reshape(-1)[bad[:5]], want.reshape(-1)[bad[:5]])


@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("zero_point", ["after_rounding", "after_rounding_float", "before_rounding"])
@pytest.mark.parametrize("conversion", ["saturate", "storage", "int32"])
@pytest.mark.parametrize("nan", ["unspecified", "zero"])
def test_integer_tail_fields(rounding: str, zero_point: str, conversion: str, nan: str) -> None:
    for storage in ("int8", "uint4"):
        s, q, Z = _tail_case(storage, np.float32, rounding=rounding, zero_point=zero_point, conversion=conversion,
                             nan=nan)
        _tails_agree(s, q, Z)


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("zero_point", ["after_rounding", "after_rounding_float", "before_rounding"])
def test_integer_tail_storages(storage: str, dt: type, zero_point: str) -> None:
    s, q, Z = _tail_case(storage, dt, rounding="nearest_away", zero_point=zero_point, conversion="int32")
    _tails_agree(s, q, Z)
    s, q, Z = _tail_case(storage, dt, rounding="nearest_even", zero_point=zero_point, conversion="storage")
    _tails_agree(s, q, Z)


def test_integer_tail_covers_small_integer_storage_only() -> None:
    s = qref.scheme("int32", scale=0.5, zero_point=0, profile="stablehlo")
    assert not integer_tail_applies(s, np.zeros(3, np.float32))
    s = qref.scheme("int16", scale=0.5, zero_point=0, profile="stablehlo")
    assert integer_tail_applies(s, np.zeros(3, np.float32)) and not integer_tail_applies(s, np.zeros(3, np.float16))


# ---------------------------------------------------------------------------------------------------------
# quantize end to end: every profile, granularity and input dtype, fast against _reference=True
# ---------------------------------------------------------------------------------------------------------
def _e2e_inputs(dt: Any, shape: tuple[int, int], scale: np.ndarray) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    out: list[np.ndarray] = []
    grid = (np.arange(-300, 300) / 2.0)  # integers and ties of x / s for s = the scales below
    x = (grid[rng.integers(0, grid.size, shape)] * scale.reshape(-1, 1)).astype(dt)
    out.append(x)
    out.append(np.nextafter(x, np.asarray(np.inf, dt)) if dt != ml_dtypes.bfloat16 else x)
    bits = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    if dt == ml_dtypes.bfloat16 or dt == np.float16:
        out.append(bits.view(dt))  # every kind of 16-bit pattern: NaN, Inf, subnormals
    else:
        wide = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with np.errstate(invalid="ignore"):
            out.append(wide.astype(dt))
        out.append(rng.standard_normal(shape).astype(dt) * 40)
    return out


PROFILES = sorted(qref.profiles("uniform"))
#: the profiles that model quantize with the scale steps of uniform.md §2.1 (a profile of a dequantize-only system
#: accepts no input dtype: uniform.md §2.2); FakeQuantize profiles (range_form, §2.8) have no fast kernel: both
#: paths run reference.range_steps (tests/test_openvino_targets.py compares them)
QUANTIZING = [p for p in PROFILES if qref.profiles("uniform")[p].rules.input_dtypes != ()
              and qref.profiles("uniform")[p].rules.range_form == "none"]


@pytest.mark.parametrize("profile", QUANTIZING)
@pytest.mark.parametrize("granularity", ["per_tensor", "per_tensor_zero", "per_axis", "blocked"])
@pytest.mark.parametrize("storage", ["int8", "uint4"])
def test_quantize_fast_equals_reference(profile: str, granularity: str, storage: str) -> None:
    rows, cols = 8, 64
    scales = np.array([0.5, 0.1, 3e-3, 1.0, 0.25, 7.0, 1e-5, 0.3])
    lo, hi = qref.get_format(storage).full_range
    zps = np.array([0, lo, hi, 1, -1 if lo < 0 else 2, 3, 0, hi - 1]).clip(lo, hi)
    if granularity.startswith("per_tensor"):
        opts: dict[str, Any] = {"scale": 0.1, "zero_point": 0 if granularity.endswith("zero") else int(zps[3])}
    elif granularity == "per_axis":
        opts = {"scale": scales, "zero_point": zps, "axis": 0}
    else:
        opts = {"scale": np.repeat(scales, 2).reshape(8, 2), "zero_point": np.repeat(zps, 2).reshape(8, 2),
                "block_size": {0: 1, 1: 32}}
    try:
        s = qref.scheme(storage, profile=profile, **opts)
    except qref.QrefError as e:
        pytest.skip(f"{profile} has no {granularity} {storage}: {e}")
    dts = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
    A = s.arithmetic
    dts = [d for d in dts if A.input_dtypes is None or np.dtype(d).name in A.input_dtypes]
    n = 0
    for dt in dts:
        xs = _e2e_inputs(dt, (rows, cols), scales)
        if granularity.startswith("per_tensor"):  # a 0-d input and a length the vector loop does not divide
            xs += [xs[0][0, 0], xs[0].reshape(-1)[:61]]
        for x in xs:
            with np.errstate(all="ignore"):
                try:
                    want = s.quantize(x, _reference=True)
                except qref.QrefError:
                    continue
                got = s.quantize(x)
            assert got.codes.dtype == want.codes.dtype
            assert np.array_equal(got.unspecified, want.unspecified), (profile, dt)
            assert np.array_equal(got.codes, want.codes), (profile, dt)
            n += x.size
    assert n > 0


def test_convert_float64_to_float32_is_the_core_rounding() -> None:
    """core.arith.convert's float64 -> float32 shortcut (numpy's IEEE cast, NaN canonical with its sign) equals
    the core encode + decode it replaced, on 2^20 random float64 patterns, every float32 midpoint +-1 ulp
    neighbourhood sampled, and the overflow and subnormal edges."""
    from qref.core.arith import convert
    from qref.core.decode import decode
    from qref.core.encode import encode

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << 63, 1 << 20, dtype=np.uint64) | (rng.integers(0, 2, 1 << 20, dtype=np.uint64) << 63)
    f32 = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        mids = (f32.astype(np.float64) + np.nextafter(f32, np.float32(np.inf)).astype(np.float64)) / 2
    edges = np.array([3.4028235677973366e38, 3.4028235677973362e38, 3.402823669209385e38, 1e39, 2.0**-149,
                      2.0**-150, 2.0**-151, 1.5 * 2.0**-149, 2.0**-126 * (1 - 2.0**-24), np.inf, np.nan, 0.0])
    x = np.concatenate([bits.view(np.float64), mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                        edges, -edges])
    fmt = qref.get_format("float32")
    want = decode(encode(x, fmt, rounding="nearest_even", overflow="inf", nan="keep_sign"), fmt, dtype=np.float32)
    assert np.array_equal(convert(x, np.float32).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("conversion", ["saturate", "storage", "int32"])
def test_integer_tail_small_values_after_rounding_float(rounding: str, conversion: str) -> None:
    """Only values near the storage range (and NaN): the after_rounding_float sum takes its in-dtype branch."""
    for storage, dt in (("int8", np.float32), ("uint4", np.float64), ("int16", np.float32)):
        s, q, Z = _tail_case(storage, dt, rounding=rounding, zero_point="after_rounding_float", conversion=conversion)
        lo, hi = qref.get_format(storage).full_range
        small = q[:, np.isnan(q[0]) | (np.abs(q[0]) <= 2 * max(-lo, hi) + 50)]
        _tails_agree(s, np.ascontiguousarray(small), Z)


# ---------------------------------------------------------------------------------------------------------
# the float32 kernel (uniform_fast.quantize_float32) against the defining path, per tensor / axis / block
# ---------------------------------------------------------------------------------------------------------
F32_TINY = float(np.finfo(np.float32).tiny)
#: 16 scales: exact ties (powers of two), ordinary ones, the FTZ shortcut's edge (2^-124 and its float32
#: neighbours), float32 subnormals (the smallest: 1/s overflows), huge ones (x / s underflows)
KERNEL_SCALES = np.array([1.0, 0.5, 2.0**-10, 0.1, 3e-3, 7.0, 1e-5, 2.0**-124,
                          float(np.nextafter(np.float32(2.0**-124), np.float32(0))), 2.0**-125, 2.0**-130, 2.0**-149,
                          1e30, 3e38, 0.3, 1.5 * F32_TINY])


def _kernel_zero_points(storage: str, n: int) -> np.ndarray:
    lo, hi = qref.get_format(storage).full_range
    z = np.array([0, lo, hi, lo + 1, hi - 1, 1, -1, (lo + hi) // 2, 3, 0, hi, lo, -7, 5, 0, 2])
    return np.resize(z.clip(lo, hi), n)


def _kernel_inputs(scales: np.ndarray, cols: int, seed: int) -> dict[str, np.ndarray]:
    """float32 inputs of shape (len(scales), cols) for row scales ``scales``: q = x / s at integers and ties
    (exact for power-of-two scales) +-1..2 ulp, near the storage, int32 and 2^22..2^24 edges; every float16
    and bfloat16 pattern; random float32 bit patterns (NaN and Inf included, and with no NaN / Inf); random
    magnitudes 2^-8..2^18 times the scale (where rounding and saturation act) and float32 subnormals."""
    rng = np.random.default_rng(seed)
    rows = scales.size
    s32 = scales.astype(np.float32).astype(np.float64).reshape(-1, 1)
    k = np.concatenate([np.arange(-300, 301), np.arange(-70000, 70001, 997), [-(2**16) - 2, 2**16 + 1],
                        [2**e + d for e in (17, 22, 23, 24, 30, 31) for d in (-2, -1, 0, 1)]]).astype(np.float64)
    k = np.concatenate([k, -k[-24:]])
    v = np.concatenate([k, k + 0.5])
    out: dict[str, np.ndarray] = {}
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        base = (v.reshape(1, -1) * s32).astype(np.float32)
        lo_, hi_ = base.copy(), base.copy()
        parts = [base]
        for _ in range(2):
            lo_, hi_ = np.nextafter(lo_, np.float32(-np.inf)), np.nextafter(hi_, np.float32(np.inf))
            parts += [lo_, hi_]
        ties = np.concatenate(parts, axis=1)
        out["ties"] = np.resize(ties, (rows, cols)) if ties.shape[1] > cols else ties
        every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        for name, dt in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)):
            out[name] = np.resize(every.view(dt).astype(np.float32), (rows, cols))
        bits = rng.integers(0, 1 << 32, (rows, cols), dtype=np.uint64).astype(np.uint32)
        out["bits"] = bits.view(np.float32)
        finite = bits.copy()
        exp = (finite >> 23) & 0xFF
        finite[exp == 0xFF] &= np.uint32(0xBFFFFFFF)  # NaN / Inf patterns lose an exponent bit
        out["finite_bits"] = finite.view(np.float32)
        mag = np.exp2(rng.uniform(-8, 18, (rows, cols))) * rng.choice([-1.0, 1.0], (rows, cols))
        mid = (mag * s32).astype(np.float32)
        sub = rng.integers(0, 1 << 23, (rows, cols), dtype=np.uint32) | (rng.integers(0, 2, (rows, cols),
                                                                                        dtype=np.uint32) << 31)
        pick = rng.random((rows, cols)) < 1 / 16
        mid[pick] = sub[pick].view(np.float32)
        out["magnitudes"] = mid
    return out


def _kernel_agree(s: Any, x: np.ndarray, label: str, chunks: tuple[int, ...] = (1 << 16, 256)) -> int:
    """s.quantize(x) with the kernel's piece size at each of ``chunks`` equals s.quantize(x, _reference=True)
    (codes, mask); a QrefError raised by one is raised by both. Returns the elements compared."""
    import qref.schemes.uniform.fast as UF

    with np.errstate(all="ignore"):
        try:
            want = s.quantize(x, _reference=True)
        except qref.QrefError:
            with pytest.raises(qref.QrefError):
                s.quantize(x)
            return 0
        for c in chunks:
            old = UF.KCHUNK
            UF.KCHUNK = c
            try:
                got = s.quantize(x)
            finally:
                UF.KCHUNK = old
            assert got.codes.dtype == want.codes.dtype
            bad = np.flatnonzero((got.codes != want.codes) | (got.unspecified != want.unspecified))
            assert bad.size == 0, (label, c, x.reshape(-1)[bad[:4]], got.codes.reshape(-1)[bad[:4]],
                                   want.codes.reshape(-1)[bad[:4]], got.unspecified.reshape(-1)[bad[:4]],
                                   want.unspecified.reshape(-1)[bad[:4]])
    return x.size


def _kernel_schemes(profile: str, storage: str, granularity: str, cols: int) -> list[tuple[Any, Any]]:
    """(scheme, x -> the input for it) pairs: per tensor (several scale / zero point pairs, 1-D and 2-D),
    per axis 0 and 1, blocked (blocks dividing the axes: the split path; and a partial block: expand)."""
    rows = KERNEL_SCALES.size
    zps = _kernel_zero_points(storage, rows)
    out: list[tuple[Any, Any]] = []

    def make(**opts: Any) -> Any:
        try:
            return qref.scheme(storage, profile=profile, **opts)
        except qref.QrefError:  # a profile that takes zero points of 0 only, or scales its type cannot hold
            try:
                zero = np.zeros_like(opts["zero_point"])
                return qref.scheme(storage, profile=profile, **{**opts, "zero_point": zero})
            except qref.QrefError:
                return None

    if granularity == "per_tensor":
        for i in (0, 3, 7, 9, 11, 13):
            s = make(scale=float(KERNEL_SCALES[i]), zero_point=int(zps[i]))
            if s is not None:
                out += [(s, lambda x, i=i: x[i]), (s, lambda x: x[:4])]
    elif granularity == "per_axis":
        s = make(scale=KERNEL_SCALES, zero_point=zps, axis=0)
        if s is not None:
            out.append((s, lambda x: x))
        s = make(scale=KERNEL_SCALES, zero_point=zps, axis=1)
        if s is not None:
            out.append((s, lambda x: np.ascontiguousarray(x.T)))
    else:
        nb = 4
        sc = np.stack([KERNEL_SCALES * f for f in (1.0, 0.75, 0.625, 0.875)], axis=1)
        zb = np.stack([np.roll(zps, j) for j in range(nb)], axis=1)
        s = make(scale=sc, zero_point=zb, block_size={0: 1, 1: cols // nb})
        if s is not None:
            out.append((s, lambda x: x))
        s = make(scale=sc, zero_point=zb, block_size={0: 1, 1: cols // nb + 1})
        if s is not None:
            out.append((s, lambda x: x[:, : 3 * (cols // nb + 1) + 5]))
    return out


@pytest.mark.parametrize("profile", QUANTIZING)
@pytest.mark.parametrize("granularity", ["per_tensor", "per_axis", "blocked"])
def test_float32_kernel_int8(profile: str, granularity: str) -> None:
    """int8, every input class of ``_kernel_inputs`` (16 rows of 16384: every float16 / bfloat16 pattern at 4 of
    the 16 scales, 2^18 random bit patterns, 2^18 random magnitudes...), each at two piece sizes."""
    cols = 1 << 14
    xs = _kernel_inputs(KERNEL_SCALES, cols, 21)
    n = 0
    for s, take in _kernel_schemes(profile, "int8", granularity, cols):
        for label, x in xs.items():
            n += _kernel_agree(s, take(x), f"{profile} {granularity} {label}")
    assert n >= (1 << 18 if granularity == "per_tensor" else 1 << 20)


@pytest.mark.parametrize("profile", QUANTIZING)
@pytest.mark.parametrize("storage", ["uint8", "int16", "uint4", "int2", "int8<-127:127>", "int8<3:100>"])
def test_float32_kernel_storages(profile: str, storage: str) -> None:
    """The other integer storages, per axis and blocked, ties / magnitudes / bit patterns on 16 x 4096."""
    cols = 1 << 12
    xs = _kernel_inputs(KERNEL_SCALES, cols, 22)
    n = 0
    for gran in ("per_axis", "blocked"):
        for s, take in _kernel_schemes(profile, storage, gran, cols):
            for label in ("ties", "magnitudes", "bits", "finite_bits", "bfloat16"):
                n += _kernel_agree(s, take(xs[label]), f"{profile} {storage} {gran} {label}", (1 << 16, 64))
    assert n > 0


@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("zero_point", ["after_rounding", "after_rounding_float", "before_rounding", "fused"])
def test_float32_kernel_fields(rounding: str, zero_point: str) -> None:
    """Every rounding mode and zero point stage with each conversion, clamp, NaN rule, FTZ and scale op (the
    kernel's branches), per axis with zero points at the storage ends, one zero point, and none."""
    cols = 1 << 10
    xs = _kernel_inputs(KERNEL_SCALES, cols, 23)
    base = qref.scheme("int8", scale=KERNEL_SCALES, zero_point=_kernel_zero_points("int8", 16), axis=0,
                       profile="stablehlo_lowering")
    n = 0
    for conversion in ("saturate", "storage", "int32"):
        for clamp in ("float", "integer"):
            for flush in (False, True):
                for zps in (_kernel_zero_points("int8", 16), np.full(16, -5), np.zeros(16, np.int64)):
                    A = dataclasses.replace(base.arithmetic, rounding=rounding, zero_point=zero_point,
                                            conversion=conversion, clamp=clamp, flush_subnormals=flush,
                                            nan="zero" if flush else "unspecified",
                                            scale_op="reciprocal" if zero_point == "fused" or clamp == "float"
                                            else "divide")
                    s = dataclasses.replace(base, arithmetic=A, zero_points=tuple(int(z) for z in zps))
                    for label in ("ties", "magnitudes", "finite_bits", "bits", "bfloat16"):
                        n += _kernel_agree(s, xs[label], f"{conversion} {clamp} {flush} {zps[:3]} {label}",
                                           (1 << 16, 128))
    assert n > 0


def test_float32_kernel_takes_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel applies to every profile's float32 int8 scheme (but pytorch's fused multiply-add with a
    zero point); on ordinary data no piece leaves it; on the test inputs both the in-place pieces and the
    general integer steps (NaN, range flags) run."""
    import qref.schemes.uniform.fast as UF

    calls = []
    tail = UF.integer_tail_fast

    def counting(*a: Any) -> np.ndarray:
        calls.append(a[1].size)
        return tail(*a)

    monkeypatch.setattr(UF, "integer_tail_fast", counting)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 4096)) * 3).astype(np.float32)
    scales = np.abs(x).max(axis=1) / 127
    for profile in QUANTIZING:
        s = qref.scheme("int8", scale=scales, zero_point=np.zeros(64, np.int64), axis=0, profile=profile)
        S, Z = s.expand(x.shape)
        assert UF.quantize_float32(s.loop_schemes[1] if s.arithmetic.simd_width else s, x, S, Z) is not None
        calls.clear()
        assert np.array_equal(s.quantize(x).codes, s.quantize(x, _reference=True).codes)
        assert not calls, profile
        xs = _kernel_inputs(KERNEL_SCALES, 1024, 5)
        s = qref.scheme("int8", scale=KERNEL_SCALES[:8], zero_point=np.zeros(8, np.int64), axis=0, profile=profile)
        monkeypatch.setattr(UF, "KCHUNK", 256)
        mixed = np.concatenate([(rng.standard_normal((4, 1024)) * 20 * KERNEL_SCALES[:4, None]).astype(np.float32),
                                xs["bits"][4:8]])  # in range (clean pieces), and NaN in most pieces
        with np.errstate(all="ignore"):
            assert np.array_equal(s.quantize(mixed).codes, s.quantize(mixed, _reference=True).codes)
        monkeypatch.setattr(UF, "KCHUNK", 1 << 16)
        assert 0 < len(calls) < 32, (profile, len(calls))
    s = qref.scheme("int8", scale=0.1, zero_point=3, profile="pytorch")
    assert UF.quantize_float32(s, x, *s.expand(x.shape)) is None
    size = np.getbufsize()
    s = qref.scheme("int8", scale=0.1, zero_point=3, profile="onnx")
    s.dequantize(s.quantize(x))
    assert np.getbufsize() == size  # the kernels restore numpy's ufunc buffer size


# ---------------------------------------------------------------------------------------------------------
# the dequantize kernel (uniform_fast.dequantize_float) against the defining path
# ---------------------------------------------------------------------------------------------------------
def _bits_of(v: np.ndarray) -> np.ndarray:
    v = np.ascontiguousarray(v)
    return v.view(f"u{v.dtype.itemsize}")


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("storage", ["int8", "uint8", "int16", "uint4", "int8<-127:127>", "int2"])
def test_dequantize_kernel(profile: str, storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every code of the storage range (codes outside it are refused, schemes.md §1.1 C1) at each of 16 scales
    (subnormal, the FTZ edge, huge: products that overflow; int16: every code at one of them) with zero points
    at the storage ends, per tensor / axis 0 and 1 / blocked (split and partial), each output dtype, with and without
    an input mask, two piece sizes: values (as bit patterns) and masks equal the defining path's, through
    ``dequantize`` and ``dequantize_with_mask``."""
    import qref.schemes.uniform.fast as UF

    fmt = qref.get_format(storage)
    every = np.arange(fmt.lo, fmt.hi + 1).astype(fmt.storage_dtype)  # codes beyond are refused (schemes.md §1.1 C1)
    rows = KERNEL_SCALES.size
    cols = min(max(every.size, 512), 4096)  # int16: each code once over the 16 rows, the others at every scale
    codes = np.resize(every, (rows, cols))
    rng = np.random.default_rng(8)
    mask = rng.random(codes.shape) < 0.05
    zps = _kernel_zero_points(storage, rows)
    n = 0
    for gran in ("per_tensor", "per_axis", "blocked"):
        for s, take in _kernel_schemes(profile, storage, gran, cols):
            c = take(codes)
            m = take(mask)
            for unspecified in (None, m):
                qa = qref.QArray(codes=c, scheme=s, unspecified=unspecified)
                for out in (None, np.float64, np.float32, ml_dtypes.bfloat16):
                    with np.errstate(all="ignore"):
                        try:
                            v_ref, m_ref = s.dequantize_with_mask(qa, out, _reference=True)
                        except qref.QrefError:
                            continue
                        for chunk in (1 << 16, 100):
                            monkeypatch.setattr(UF, "KCHUNK", chunk)
                            v, mk = s.dequantize_with_mask(qa, out)
                            v2 = s.dequantize(qa, out)
                            assert v.dtype == v_ref.dtype == v2.dtype and np.array_equal(mk, m_ref), (gran, out)
                            bad = np.flatnonzero((_bits_of(v) != _bits_of(v_ref)) | (_bits_of(v2) != _bits_of(v_ref)))
                            assert bad.size == 0, (gran, out, chunk, c.reshape(-1)[bad[:4]], v.reshape(-1)[bad[:4]],
                                                   v_ref.reshape(-1)[bad[:4]])
                        monkeypatch.setattr(UF, "KCHUNK", 1 << 16)
                    n += c.size
    assert n > 0 and zps.size == rows


def test_dequantize_kernel_applies() -> None:
    """The kernel takes the benchmark's per-channel and per-tensor dequantize (pytorch_per_channel,
    onnxruntime uint8 with zero point 128, pytorch per tensor) and every profile's int8 per axis but
    tflite_optimized's multiply-add (per tensor) and the fused multiply-add of dq_form="fma" (OpenVINO's CPU
    plugin, uniform.md §2.2), which has no kernel: the reference computes it, and the kernel declines it."""
    rng = np.random.default_rng(9)
    codes = rng.integers(-128, 128, (64, 256)).astype(np.int8)
    sc = np.exp2(rng.uniform(-10, 0, 64))
    for profile in PROFILES:
        s = qref.scheme("int8", scale=sc, zero_point=np.zeros(64, np.int64), axis=0, profile=profile)
        if s.arithmetic.simd_width:
            s = s.loop_schemes[1]
        got = dequantize_kernel(s, qref.QArray(codes=codes, scheme=s), None)
        assert (got is None) == (s.arithmetic.dq_form == "fma"), profile
    s = qref.scheme("uint8", scale=sc, zero_point=np.full(64, 128), axis=0, profile="onnxruntime")
    assert dequantize_kernel(s, qref.QArray(codes=codes.view(np.uint8), scheme=s), None) is not None
    s = qref.scheme("int8", scale=0.05, zero_point=0, profile="pytorch")
    assert dequantize_kernel(s, qref.QArray(codes=codes, scheme=s), None) is not None
    s = qref.scheme("int8", scale=0.05, zero_point=3, profile="tflite_optimized")
    assert dequantize_kernel(s, qref.QArray(codes=codes, scheme=s), None) is None


def test_half_away_biased_every_float32_in_the_binades_it_meets() -> None:
    """The kernel's nearest_away (trunc of q + copysign(1/2 - 2^-25, q)) equals round_integral's on every
    float32 of |q| in [2^-3, 4) and [2^13, 2^18) (both signs: the kernel's values after the clamp are below
    2^17 + 2 in magnitude), on ties +-3 ulp up to 2^26 and on 2^21 random finite patterns. (Run once over all
    4,278,190,080 finite float32 values: 0 mismatches, 94 s.)"""
    from qref.schemes.uniform.fast import half_away_biased, round_integral

    def check(q: np.ndarray) -> None:
        want = round_integral(q, "nearest_away")
        got = q.copy()
        half_away_biased(got, np.empty(got.size, np.uint32))
        assert np.array_equal(np.trunc(got), want)

    for lo_e, hi_e in ((-3, 2), (13, 18)):
        start = np.float32(2.0**lo_e).view(np.uint32)
        stop = np.float32(2.0**hi_e).view(np.uint32)
        for b0 in range(int(start), int(stop), 1 << 22):
            bits = np.arange(b0, min(b0 + (1 << 22), int(stop)), dtype=np.uint32)
            check(bits.view(np.float32))
            check((bits | np.uint32(0x80000000)).view(np.float32))
    check(_near_ties(np.float32, 26)[np.isfinite(_near_ties(np.float32, 26))])
    rng = np.random.default_rng(2)
    fin = rng.integers(0, 0x7F800000, 1 << 20, dtype=np.uint32)
    check(np.concatenate([fin, fin | np.uint32(0x80000000)]).view(np.float32))


@pytest.mark.parametrize("profile", ["tflite", "tflite_optimized", "tflite_xnnpack", "onnx"])
def test_blocked_float32_takes_the_kernel_without_rebuilding_the_scheme(profile: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18's blocked row (blocks of 128 along axis 1, many scales): quantize runs ``quantize_float32`` once
    on the split blocks (tflite_optimized: its scalar loop's scheme, built once and kept), builds no scheme
    (each build validates every scale) after the first call, and converts the scale / zero point tuples to
    arrays once (kept read-only); the codes and
    mask equal the defining path's, on normals, ties, +-1 ulp and random bit patterns, also on a fresh scheme
    whose first call builds the caches. ``scale_array`` / ``zero_point_array`` stay writable copies."""
    import qref.schemes.uniform as U
    import qref.schemes.uniform.entry as E
    import qref.schemes.uniform.fast as UF

    rng = np.random.default_rng(31)
    rows, cols, block = 16, 2048, 128
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    bs = (np.abs(x).reshape(rows, -1, block).max(axis=2) / 127).astype(np.float64)
    zeros = np.zeros(bs.shape, np.int64)
    ties = ((rng.integers(-300, 300, x.shape) / 2.0) * np.repeat(bs, block, axis=1)).astype(np.float32)
    bits = rng.integers(0, 1 << 32, x.shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
    inputs = [x, ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)), bits]
    kernel_calls: list[tuple[int, ...]] = []
    kernel = UF.quantize_float32

    def spy(s: Any, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, out: Any = None) -> Any:
        kernel_calls.append(arr.shape)
        assert s.arithmetic.simd_width == 0 and S.shape == (rows, 1, cols // block, 1)
        done = kernel(s, arr, S, Z, out)
        assert done is not None
        return done

    monkeypatch.setattr(E, "quantize_float32", spy)
    builds = []
    post_init = U.UniformScheme.__post_init__

    def counting(self: Any) -> None:
        builds.append(1)
        post_init(self)

    for xi in inputs:
        s = qref.scheme("int8", scale=bs, zero_point=zeros, axis=1, block_size=block, profile=profile)
        monkeypatch.setattr(U.UniformScheme, "__post_init__", counting)
        with np.errstate(all="ignore"):
            want = s.quantize(xi, _reference=True)
            for k in range(3):
                builds.clear()
                kernel_calls.clear()
                got = s.quantize(xi)
                assert kernel_calls == [(rows, 1, cols // block, block)], (profile, k)
                assert k == 0 or not builds, (profile, k, len(builds))
                assert got.codes.dtype == want.codes.dtype and np.array_equal(got.codes, want.codes)
                assert np.array_equal(got.unspecified, want.unspecified)
        monkeypatch.setattr(U.UniformScheme, "__post_init__", post_init)
    if profile == "tflite_optimized":
        assert s.loop_schemes is s.loop_schemes and s.loop_schemes[1].arithmetic.rounding == "nearest_away"
    for cached in (s._scale_values, s._zero_point_values):
        assert not cached.flags.writeable
    assert s._scale_values is s._scale_values and s._zero_point_values is s._zero_point_values
    sa, za = s.scale_array, s.zero_point_array
    assert sa.flags.writeable and za.flags.writeable and np.array_equal(sa, bs) and np.array_equal(za, zeros)
    sa[...] = 1.0
    za[...] = 3
    assert np.array_equal(s.scale_array, bs) and np.array_equal(s.zero_point_array, zeros)
    assert np.array_equal(s.quantize(x).codes, s.quantize(x, _reference=True).codes)


# ---------------------------------------------------------------------------------------------------------
# the FakeQuantize forms (range_form "normalize" / "scale_shift", uniform.md §2.8) in the float32 kernel
# ---------------------------------------------------------------------------------------------------------
#: the profiles with a range form (OpenVINO FakeQuantize): float32 input only
RANGED = [p for p in PROFILES if qref.profiles("uniform")[p].rules.range_form != "none"]


def _range_edges(lo: int, hi: int, zps: np.ndarray, cols: int) -> np.ndarray:
    """Row i (scale KERNEL_SCALES[i], zero point zps[i]): each end of the input range il = fl32((lo - z) s),
    ih = fl32((hi - z) s) (exact float64 products rounded once, independent of the kernel) and +-1..3 ulp
    around it, tiled to ``cols``."""
    s32 = KERNEL_SCALES.astype(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        ends = np.stack([((lo - zps) * s32).astype(np.float32), ((hi - zps) * s32).astype(np.float32)], axis=1)
        parts = [ends]
        a, b = ends.copy(), ends.copy()
        for _ in range(3):
            a, b = np.nextafter(a, np.float32(-np.inf)), np.nextafter(b, np.float32(np.inf))
            parts += [a, b, np.nextafter(ends, np.float32(0))]
    return np.resize(np.concatenate(parts, axis=1), (KERNEL_SCALES.size, cols))


@pytest.mark.parametrize("profile", RANGED)
@pytest.mark.parametrize("storage", ["int8", "uint8", "int16", "uint4", "int8<-127:127>"])
def test_float32_kernel_range_forms(profile: str, storage: str) -> None:
    """FakeQuantize profiles: fast against ``_reference=True`` per tensor, per axis and blocked, on ties +-1..2 ulp,
    the input range's ends +-1..3 ulp, every bfloat16 pattern (specials), random bit patterns (NaN / Inf) and
    magnitudes, each at two piece sizes; codes compared as integers, masks alike."""
    cols = 1 << 11
    xs = _kernel_inputs(KERNEL_SCALES, cols, 23)
    n = 0
    for gran in ("per_tensor", "per_axis", "blocked"):
        for s, take in _kernel_schemes(profile, storage, gran, cols):
            labels = ("ties", "bits", "magnitudes", "bfloat16")
            for label in labels:
                n += _kernel_agree(s, take(xs[label]), f"{profile} {storage} {gran} {label}", (1 << 16, 64))
            if gran == "per_axis" and s.axis == 0:  # row i: scale i, zero point i
                lo, hi = s.storage_bounds
                zp = np.asarray(s.zero_point_array, dtype=np.int64).reshape(-1)
                x = _range_edges(lo, hi, np.broadcast_to(zp, KERNEL_SCALES.shape), cols)
                n += _kernel_agree(s, x, f"{profile} {storage} {gran} edges", (1 << 16, 64))
    assert n >= 1 << 16


@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("form", ["normalize", "scale_shift"])
def test_float32_kernel_range_form_fields(rounding: str, form: str) -> None:
    """Each range form with every rounding mode, conversion and NaN rule (the kernel's branches and its
    general-tail pieces), per axis with zero points at the storage ends and none, against ``_reference=True``."""
    cols = 1 << 9
    xs = _kernel_inputs(KERNEL_SCALES, cols, 24)
    zps = _kernel_zero_points("int8", 16)
    base = qref.scheme("int8", scale=KERNEL_SCALES, zero_point=zps, axis=0, profile="openvino")
    edges = _range_edges(-128, 127, zps, cols)
    n = 0
    for conversion in ("saturate", "storage", "int32"):
        for nan in ("zero", "unspecified"):
            A = dataclasses.replace(base.arithmetic, rounding=rounding, range_form=form, conversion=conversion,
                                    nan=nan)
            s = dataclasses.replace(base, arithmetic=A)
            for label, x in (("ties", xs["ties"]), ("bits", xs["bits"]), ("bfloat16", xs["bfloat16"]),
                             ("edges", edges)):
                n += _kernel_agree(s, x, f"{form} {rounding} {conversion} {nan} {label}", (1 << 16, 128))
    assert n >= 24 * 16 * cols
