"""Uniform (affine) schemes: hand-derived expectations and an exact-arithmetic oracle (spec: uniform.md).

The oracle below re-derives every profile from uniform.md §4 with fractions.Fraction: each float step is the
exact result rounded once to the step's format (``rn``), written here independently of qref's numpy code.
Codes are compared as integers.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.schemes.uniform import UniformScheme, fma32, round_to_int

F32 = np.float32
INT8 = (-128, 127)


# ---------------------------------------------------------------------------------------------------------
# exact oracle
# ---------------------------------------------------------------------------------------------------------
_FMT = {"float32": (24, -126, 127), "float64": (53, -1022, 1023), "float16": (11, -14, 15),
        "bfloat16": (8, -126, 127)}


def rn(v: Fraction, fmt: str = "float32") -> Fraction | float:
    """v rounded to nearest even in an IEEE format (P bits, emin, emax); overflow -> +-inf."""
    p, emin, emax = _FMT[fmt]
    if v == 0:
        return Fraction(0)
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, emin) - (p - 1)
    s = a / Fraction(2) ** q
    n = s.numerator // s.denominator
    r = s - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    out = n * Fraction(2) ** q
    if out >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, v)
    return out if v > 0 else -out


def rint(v: Fraction | float, mode: str) -> int:
    if isinstance(v, float):
        raise ValueError("non-finite")
    f = math.floor(v)
    r = v - f
    if mode == "even":
        return f + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2) else 0)
    if mode == "away":
        return f + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and v > 0) else 0) if v >= 0 else \
            -rint(-v, "away")
    if mode == "trunc":
        return math.trunc(v)
    raise AssertionError(mode)


def clamp(v, lo, hi):
    return max(lo, min(hi, v))


def oracle(profile: str, x: float, s: float, z: int, lo: int, hi: int, fmt: str = "float32") -> int | None:
    """Code of x under ``profile`` (uniform.md §4), None where the result is unspecified."""
    if math.isnan(x):
        return None if profile in ("stablehlo", "stablehlo_lowering", "onnx", "mlir", "tflite", "pytorch",
                                   "pytorch_per_channel") else clamp(0, lo, hi)
    X = Fraction(x) if math.isfinite(x) else x
    S = rn(Fraction(s), fmt)

    def div(a):
        if isinstance(a, float):
            return a  # +-inf / positive scale
        return rn(a / S, fmt)

    def inv_mul(a):
        inv = rn(1 / S, fmt)
        if isinstance(a, float):
            return a
        return rn(a * inv, fmt)

    def inv_mul_upcast(a):  # XLA:CPU bfloat16: fl_bf16(fl32(x * fl32(1 / s))) (bf16_upcast)
        if fmt != "bfloat16":
            return inv_mul(a)
        if isinstance(a, float):
            return a
        p32 = rn(a * rn(1 / S, "float32"), "float32")
        return p32 if isinstance(p32, float) else rn(p32, fmt)

    def to_int(q):  # +-inf -> huge
        return q if not isinstance(q, float) else (Fraction(10**30) if q > 0 else Fraction(-10**30))

    if profile in ("stablehlo", "stablehlo_lowering"):
        q = div(X)
        q = q if isinstance(q, float) else rn(q + z, fmt)
        q = clamp(to_int(q), lo, hi)
        return rint(q, "even")
    if profile == "onnx" or profile == "jax_divide":
        return clamp(rint(to_int(div(X)), "even") + z, lo, hi)
    if profile == "jax":
        return clamp(rint(to_int(inv_mul_upcast(X)), "even") + z, lo, hi)
    if profile == "mlir":
        q = div(X)
        q = q if isinstance(q, float) else rn(q + z, fmt)
        if isinstance(q, float):
            return None
        n = rint(q, "trunc")
        full = (-(2 ** 7), 2 ** 7 - 1) if lo < 0 else (0, 255)
        return clamp(n, lo, hi) if full[0] <= n <= full[1] else None
    if profile == "tflite":
        q = div(X)
        if isinstance(q, float):
            return None
        n = rint(q, "away")
        if not -(2**31) <= n < 2**31:
            return None
        return clamp(n + z, lo, hi)
    if profile == "pytorch":
        inv = rn(1 / S, fmt)
        q = to_int(X) if isinstance(X, float) else rn(X * inv + z, fmt)
        return clamp(rint(to_int(q), "even"), lo, hi)
    if profile in ("pytorch_per_channel", "qwix"):
        q = inv_mul_upcast(X) if profile == "qwix" else inv_mul(X)
        q = q if isinstance(q, float) else rn(q + z, fmt)
        return clamp(rint(to_int(q), "even"), lo, hi)
    if profile == "aqt":
        q = clamp(to_int(inv_mul(X)), -hi, hi)
        return rint(q, "even")
    raise AssertionError(profile)


ALL = ("stablehlo", "stablehlo_lowering", "onnx", "mlir", "tflite", "pytorch", "pytorch_per_channel", "jax",
       "jax_divide", "qwix", "aqt")


def near_ties(s: float, ks=range(-130, 131), dtype=F32) -> np.ndarray:
    """(k + 1/2) * s rounded to dtype, and the neighbours one ulp either side: tie-heavy inputs."""
    base = (np.asarray(ks, dtype=np.float64) + 0.5) * s
    b = base.astype(dtype)
    up = np.nextafter(b, dtype(np.inf))
    dn = np.nextafter(b, dtype(-np.inf))
    return np.concatenate([b, up, dn, np.asarray(ks, dtype=dtype) * dtype(s)])


def check_against_oracle(profile: str, x: np.ndarray, s: float, z: int, storage: str = "int8") -> int:
    zz = 0 if profile == "aqt" else z
    sch = qref.scheme(storage, scale=s, zero_point=zz, profile=profile)
    lo, hi = sch.storage_bounds
    q = sch.quantize(x)
    n = 0
    for i, v in enumerate(x.reshape(-1)):
        want = oracle(profile, float(v), s, zz, lo, hi)
        got_unspec = bool(q.unspecified.reshape(-1)[i])
        if want is None:
            assert got_unspec, (profile, float(v))
        else:
            assert not got_unspec, (profile, float(v))
            assert int(q.codes.reshape(-1)[i]) == want, (profile, float(v), s, zz, int(q.codes.reshape(-1)[i]),
                                                         want)
        n += 1
    return n


# ---------------------------------------------------------------------------------------------------------
# the headline difference and hand-derived tables
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("profile", "want"), [
    ("onnx", -127), ("stablehlo", -128), ("stablehlo_lowering", -128), ("mlir", -127), ("tflite", -128),
    ("pytorch", -128), ("pytorch_per_channel", -128), ("jax", -127), ("jax_divide", -127), ("qwix", -128),
])
def test_minus_124_5_with_zero_point_minus_3(profile, want):
    # x / s = -124.5 exactly (s = 0.5): ONNX rounds -124.5 -> -124 (even) then adds -3 -> -127; StableHLO adds
    # first: -127.5 -> -128 (even); MLIR truncates -127.5 -> -127; TFLite rounds half away -> -125 - 3 = -128.
    s = qref.scheme("int8", scale=0.5, zero_point=-3, profile=profile)
    q = s.quantize(np.array([-62.25], dtype=F32))
    assert int(q.codes[0]) == want
    assert q.codes.dtype == np.int8


def test_spec_worked_examples():
    # StableHLO's uniform_quantize example (docs/spec.md): [4.0, 15.0] with {0.1:-30, 0.5:-20} -> [10, 10]
    s = qref.scheme("int8", scale=[0.1, 0.5], zero_point=[-30, -20], axis=0, profile="stablehlo")
    assert s.quantize(np.array([4.0, 15.0], F32)).codes.tolist() == [10, 10]
    # uniform.md §4.2 (2): MLIR truncates 3.9 / 2 + 3 = 4.95 to 4, the rounding profiles give 5
    for p, want in (("mlir", 4), ("onnx", 5), ("stablehlo", 5), ("tflite", 5)):
        assert int(qref.scheme("int8", scale=2.0, zero_point=3, profile=p).quantize(
            np.array([3.9], F32)).codes[0]) == want
    # §4.2 (4): x = f32(-12.15), s = 0.1: x / s = -121.49999 -> -121, x * fl(1/s) = -121.5 -> -122
    x = np.array([-12.15], F32)
    assert x.view(np.uint32)[0] == 0xC1426666
    assert int(qref.scheme("int8", scale=0.1, profile="onnx").quantize(x).codes[0]) == -121
    assert int(qref.scheme("int8", scale=0.1, profile="jax").quantize(x).codes[0]) == -122
    # §4.2 (6): AQT clamps to +-127 before rounding
    a = qref.scheme("int8", scale=1.0, profile="aqt").quantize(np.array([127.6, -128.4], F32))
    assert a.codes.tolist() == [127, -127]


@pytest.mark.parametrize("z", [0, 1, -3, 4])
def test_exact_ties_hand_derived(z):
    # s = 1 makes x / s = x exact: every k + 1/2 is a tie.
    ks = np.arange(-6, 6)
    x = (ks + 0.5).astype(F32)
    onnx = qref.scheme("int8", scale=1.0, zero_point=z, profile="onnx").quantize(x).codes
    shlo = qref.scheme("int8", scale=1.0, zero_point=z, profile="stablehlo").quantize(x).codes
    mlir = qref.scheme("int8", scale=1.0, zero_point=z, profile="mlir").quantize(x).codes
    tfl = qref.scheme("int8", scale=1.0, zero_point=z, profile="tflite").quantize(x).codes
    for k, a, b, c, d in zip(ks, onnx, shlo, mlir, tfl):
        even_k = k if k % 2 == 0 else k + 1            # round_half_even(k + 0.5)
        assert a == even_k + z
        t = k + z                                      # (k + 0.5) + z = t + 0.5
        assert b == (t if t % 2 == 0 else t + 1)
        assert c == (t if t >= 0 else t + 1)           # truncation toward zero of t + 0.5
        assert d == (k + 1 if k >= 0 else k) + z       # half away from zero
    # the profiles differ exactly when z is odd (ONNX vs StableHLO)
    assert (onnx != shlo).any() == (z % 2 == 1)


@pytest.mark.parametrize("profile", ALL)
@pytest.mark.parametrize("s", [0.1, 1 / 3, 0.5, 0.013])
@pytest.mark.parametrize("z", [0, 3, -3])
def test_profiles_match_exact_oracle_near_ties(profile, s, z):
    x = near_ties(s)
    assert check_against_oracle(profile, x, s, z) == x.size


@pytest.mark.parametrize("profile", ALL)
def test_huge_tiny_nan_inf(profile):
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.4e38, -3.4e38, 1e-45, -1e-45, 0.0, -0.0, 2.0**-126],
                 dtype=F32)
    check_against_oracle(profile, x, 0.1, 3 if profile != "aqt" else 0)


def test_unspecified_cases_are_marked_not_valued():
    x = np.array([np.nan, np.inf, 1000.0, -1000.0, 1.0], dtype=F32)
    m = qref.scheme("int8", scale=1.0, profile="mlir").quantize(x)
    assert m.unspecified.tolist() == [True, True, True, True, False]   # fptosi poison outside i8
    t = qref.scheme("int8", scale=1.0, profile="tflite").quantize(np.array([3e9, 1000.0], F32))
    assert t.unspecified.tolist() == [True, False]                   # static_cast<int32> out of range
    assert int(t.codes[1]) == 127
    o = qref.scheme("int8", scale=1.0, profile="onnx").quantize(x)
    assert o.unspecified.tolist() == [True, False, False, False, False]
    assert o.codes[1:].tolist() == [127, 127, -128, 1]
    j = qref.scheme("int8", scale=1.0, zero_point=5, profile="jax").quantize(x)
    assert not j.unspecified.any() and int(j.codes[0]) == 0           # XLA convert: NaN -> 0


def test_unsigned_mlir_negative_is_poison():
    x = np.array([-0.5, -1.5, 0.9, 255.9, 256.0], dtype=F32)
    q = qref.scheme("uint8", scale=1.0, profile="mlir").quantize(x)
    # fptoui truncates: -0.5 -> 0 (fits), -1.5 -> -1 (poison), 255.9 -> 255, 256 -> poison
    assert q.unspecified.tolist() == [False, True, False, False, True]
    assert q.codes[[0, 2, 3]].tolist() == [0, 0, 255]


def test_narrowed_range_and_storage_widths():
    x = np.array([-200.0, -8.4, -2.5, 2.5, 7.6, 200.0], dtype=F32)
    cases = {
        "int8<-127:127>": [-127, -8, -2, 2, 8, 127],
        "int4": [-8, -8, -2, 2, 7, 7],
        "uint4": [0, 0, 0, 2, 8, 15],
        "int2": [-2, -2, -2, 1, 1, 1],
        "uint2": [0, 0, 0, 2, 3, 3],
        "int16": [-200, -8, -2, 2, 8, 200],
        "uint16": [0, 0, 0, 2, 8, 200],
    }
    for storage, want in cases.items():
        q = qref.scheme(storage, scale=1.0, profile="onnx").quantize(x)
        assert q.codes.tolist() == want, storage
    assert qref.scheme("int4", scale=1.0, profile="onnx").quantize(x).codes.dtype == np.int8
    assert qref.scheme("uint4", scale=1.0, profile="onnx").quantize(x).codes.dtype == np.uint8
    assert qref.scheme("int16", scale=1.0, profile="onnx").quantize(x).codes.dtype == np.int16
    assert qref.scheme("uint32", scale=1.0, profile="onnx").quantize(x).codes.dtype == np.uint32
    # 32-bit storage under StableHLO: 2^31 - 1 is not a float32: the clamp bound is TBD (unspecified)
    big = qref.scheme("int32", scale=1.0, profile="stablehlo").quantize(np.array([3e9, 5.0], F32))
    assert big.unspecified.tolist() == [True, False] and int(big.codes[1]) == 5


def test_16_bit_and_odd_zero_point_oracle():
    x = near_ties(0.1, ks=range(-40000, 40000, 997))
    for p in ("onnx", "stablehlo", "pytorch_per_channel", "tflite"):
        check_against_oracle(p, x, 0.1, -3, "int16")


def test_per_axis_on_a_non_last_axis():
    scales = [0.1, 0.5, 1 / 3, 2.0]
    zps = [0, 1, -3, 4]
    rng = np.random.default_rng(1)
    x = (rng.integers(-300, 300, size=(3, 4, 5)) / 4).astype(F32)  # many exact ties for s = 0.5 and 2.0
    for profile in ("onnx", "stablehlo", "mlir", "tflite"):
        q = qref.scheme("int8", scale=scales, zero_point=zps, axis=1, profile=profile).quantize(x)
        for idx in np.ndindex(x.shape):
            j = idx[1]
            want = oracle(profile, float(x[idx]), scales[j], zps[j], *INT8)
            assert (None if q.unspecified[idx] else int(q.codes[idx])) == want, (profile, idx)
    # negative axis counts from the back
    a = qref.scheme("int8", scale=scales, zero_point=zps, axis=-2, profile="onnx").quantize(x).codes
    b = qref.scheme("int8", scale=scales, zero_point=zps, axis=1, profile="onnx").quantize(x).codes
    assert (a == b).all()


def test_sub_channel_blocks_on_two_axes_and_onnx_blocked_remainder():
    rng = np.random.default_rng(2)
    x = (rng.integers(-400, 400, size=(5, 7)) / 8).astype(F32)
    S = np.array([[0.25, 0.5], [1 / 3, 0.1], [2.0, 0.125]])
    Z = np.array([[0, 1], [-3, 2], [5, -1]])
    q = qref.scheme("int8", scale=S, zero_point=Z, block_size={0: 2, 1: 4}, profile="stablehlo").quantize(x)
    for i, j in np.ndindex(x.shape):
        want = oracle("stablehlo", float(x[i, j]), S[i // 2, j // 4], int(Z[i // 2, j // 4]), *INT8)
        assert int(q.codes[i, j]) == want
    # ONNX blocked: axis=1, block 3: scale shape (5, ceil(7/3)=3), last block has one element
    S2 = np.arange(1, 16, dtype=np.float64).reshape(5, 3) / 8
    q2 = qref.scheme("int8", scale=S2, axis=1, block_size=3, profile="onnx").quantize(x)
    for i, j in np.ndindex(x.shape):
        assert int(q2.codes[i, j]) == oracle("onnx", float(x[i, j]), S2[i, j // 3], 0, *INT8)
    with pytest.raises(QrefError, match="needs 3 scale"):
        qref.scheme("int8", scale=S2[:, :2], axis=1, block_size=3).quantize(x)
    with pytest.raises(QrefError, match="list it in block_size"):
        qref.scheme("int8", scale=S, block_size={1: 4}).quantize(x[:3])


def test_expressed_float16_and_bfloat16_compute_in_that_type():
    # StableHLO computes x / s + z in the expressed type: with bfloat16, 1/3 rounds to 0.333984375
    x = np.array([1.0, 2.0, 3.0, 100.0], dtype=ml_dtypes.bfloat16)
    q = qref.scheme("int8", scale=1 / 3, zero_point=0, expressed="bfloat16", profile="stablehlo").quantize(x)
    s = rn(Fraction(1, 3), "bfloat16")
    want = [rint(clamp(rn(rn(Fraction(v) / s, "bfloat16") + 0, "bfloat16"), -128, 127), "even")
            for v in (1.0, 2.0, 3.0, 100.0)]
    assert q.codes.tolist() == want
    h = np.array([0.05, 0.15, 0.25, 12.35], dtype=np.float16)
    qh = qref.scheme("int8", scale=0.1, zero_point=1, expressed="float16", profile="onnx").quantize(h)
    sh = rn(Fraction(0.1), "float16")
    assert qh.codes.tolist() == [clamp(rint(rn(Fraction(float(v)) / sh, "float16"), "even") + 1, -128, 127)
                                 for v in h]


def test_onnx_float8_outputs_saturate_or_not():
    x = np.array([500.0, -500.0, 448.0, 460.0, 1.0, np.inf, np.nan], dtype=F32)
    sat = qref.scheme("float8_e4m3fn", scale=1.0, profile="onnx").quantize(x)
    nosat = qref.scheme("float8_e4m3fn", scale=1.0, profile="onnx", float_saturate=False).quantize(x)
    assert sat.codes.dtype == np.uint8
    # E4M3FN: 448 = 0x7E, NaN = 0x7F; 460 rounds to 448 (it is below the 464 midpoint)
    assert sat.codes.tolist() == [0x7E, 0xFE, 0x7E, 0x7E, 0x38, 0x7E, 0x7F]
    assert nosat.codes.tolist() == [0x7F, 0xFF, 0x7E, 0x7E, 0x38, 0x7F, 0x7F]
    e5 = qref.scheme("float8_e5m2", scale=2.0, profile="onnx", float_saturate=False).quantize(
        np.array([1e6, 3.0], F32))
    assert e5.codes.tolist() == [0x7C, 0x3E]  # +Inf, 1.5
    assert sat.dequantize().tolist()[:3] == [448.0, -448.0, 448.0]
    with pytest.raises(QrefError, match="zero point"):
        qref.scheme("float8_e4m3fn", scale=1.0, zero_point=2, profile="onnx").quantize(x)


def test_dequantize_profiles():
    codes = np.array([127, -128, 0, 5], dtype=np.int8)
    s = qref.scheme("int8", scale=0.1, zero_point=-1, profile="stablehlo")
    qa = qref.QArray(codes=codes, scheme=s)
    vals, bad = s.dequantize_with_mask(qa)
    # 127 - (-1) = 128 overflows i8 in StableHLO's storage-typed subtraction: implementation-defined
    assert bad.tolist() == [True, False, False, False]
    s32 = F32(0.1)
    assert vals[1:].tolist() == [F32(-127) * s32, F32(1) * s32, F32(6) * s32]
    low = qref.scheme("int8", scale=0.1, zero_point=-1, profile="stablehlo_lowering")
    v2, bad2 = low.dequantize_with_mask(qref.QArray(codes=codes, scheme=low))
    assert not bad2.any() and v2[0] == F32(128) * s32
    tfl = qref.scheme("int8", scale=0.1, zero_point=-1, profile="tflite")
    v3 = tfl.dequantize(qref.QArray(codes=codes, scheme=tfl))
    assert v3.tolist() == [F32(float(s32) * 128), F32(float(s32) * -127), F32(float(s32)), F32(float(s32) * 6)]
    pc = qref.scheme("int8", scale=1 / 3, zero_point=2, profile="pytorch_per_channel")
    v4 = pc.dequantize(qref.QArray(codes=codes, scheme=pc))
    assert v4.tolist() == [F32((125) * (1 / 3)), F32((-130) * (1 / 3)), F32(-2 / 3), F32(1.0)]
    assert v4.dtype == np.float32
    assert pc.dequantize(qref.QArray(codes=codes, scheme=pc), dtype=np.float64).dtype == np.float64


def test_round_trip_values_and_spec():
    sch = qref.scheme("int8<-127:127>", scale=[0.1, 0.2], zero_point=[1, -2], axis=0, profile="onnx",
                      expressed="float16")
    assert isinstance(sch, UniformScheme)
    assert qref.scheme_from_spec(sch.to_spec()) == sch
    b = qref.scheme("uint4", scale=np.ones((2, 3)), zero_point=np.full((2, 3), 8), block_size=(1, 4),
                    profile="mlir")
    assert qref.scheme_from_spec(b.to_spec()) == b
    q = sch.quantize(np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float16))
    assert q.scales.tolist() == [0.1, 0.2] and q.zero_points.tolist() == [1, -2]
    assert sch.dequantize(q).dtype == np.float16          # the scheme's default: the expressed type
    assert q.dequantize().dtype == np.float32             # QArray.dequantize's default (schemes.md contract)


def test_arithmetic_overrides_and_errors():
    s = qref.scheme("int8", scale=1.0, profile="onnx", rounding="nearest_away")
    assert s.quantize(np.array([2.5, -2.5], F32)).codes.tolist() == [3, -3]
    with pytest.raises(QrefError, match="scales must be finite"):
        qref.scheme("int8", scale=0.0)
    with pytest.raises(QrefError, match="outside the storage range"):
        qref.scheme("int8", scale=1.0, zero_point=200, profile="stablehlo")
    assert qref.scheme("int8", scale=1.0, zero_point=300, profile="mlir").quantize(
        np.array([0.0], F32)).codes.tolist() == [44]  # 300 wraps to 44 in i8, as an MLIR i8 attribute
    with pytest.raises(QrefError, match="float32 input only"):
        qref.scheme("int8", scale=1.0, profile="stablehlo_lowering").quantize(np.array([1.0]))
    with pytest.raises(QrefError, match="axis 1 of the input has size"):
        qref.scheme("int8", scale=[1.0, 2.0], axis=1).quantize(np.zeros((2, 3), F32))
    with pytest.raises(qref.UnknownNameError, match="did you mean"):
        qref.scheme("int8", scale=1.0, profile="stablehl")
    with pytest.raises(QrefError, match="needs scale"):
        qref.scheme("int8")
    with pytest.raises(qref.UnknownNameError):
        qref.scheme("int8", scale=1.0, rounding="nearest_evn")


def test_float_claims_and_cast_family_untouched():
    assert qref.scheme("float8_e4m3fn").family == "cast"
    assert qref.scheme("float8_e4m3fn", scale=2.0).family == "uniform"
    assert qref.scheme("int8", scale=2.0).family == "uniform"


def test_primitives():
    n, nan = round_to_int(np.array([2.5, -2.5, np.inf, -np.inf, np.nan, 1e300]), "nearest_even")
    assert n.tolist()[:2] == [2, -2] and n[2] == 2**62 and n[3] == -(2**62) and nan.tolist()[4]
    a = np.array([1 + 2**-23, 3.0], F32)
    b = np.array([1 - 2**-23, 1 / 3], F32)
    c = np.array([-1.0, 0.5], F32)
    want = [rn(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]
    assert fma32(a, b, c).tolist() == [float(w) for w in want]
