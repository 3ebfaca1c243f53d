"""A labelled set of known causes: hand-built backend outputs, one per class of
qref.harness.classify.CLASSES and per confusable pair of classes, each computed here from the mechanism it stands
for with independent arithmetic (int64, fractions.Fraction, float64 on values exact in it, IEEE float32 numpy
operations one at a time, ml_dtypes for a plain cast), never with the qref code under test; the classifier
(``classify.compare``) must name the mechanism from the evidence of the task, not from a fixed order of classes.

Every case is registered with ``@labelled(classes)``; ``test_labelled_case`` compares it and checks the class counts,
``test_every_class_has_a_labelled_case`` that the registered classes cover ``CLASSES`` but for ``EXEMPT``.

Confusable pairs (two cases on the same inputs, or the same mechanism family, that the classifier must separate):
a rounding variant and a zero-point-order variant (the same code on some ties); a signed clamp and a zero point
order; wrap-around and clamping to other bounds; a NaN of another sign, a finite decoded value and an infinity
where the reference has NaN; x * fl(1/s) and the quotient in float64; a fused multiply-add and the zero point
added after rounding; flushing subnormal results and flushing inputs below the smallest normal; double rounding
through float32 and truncation; another MX scale rule and another zero-block rule; a table decision rule and a
table tie rule; an accumulation order within the any-order bound and a result outside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from harness_cases import dequantize_case, quantize_case

import qref
from qref.conformance import Case
from qref.conformance.cases.recipes import _acc_params, _result_arrays
from qref.harness import classify
from qref.harness.families import get_family
from qref.recipes import Accumulation, block_matmul
from qref.schemes.base import QArray
from qref.schemes.uniform.requantize import requantize

F32 = np.float32
F64 = np.float64
E4M3 = ml_dtypes.float8_e4m3fn

#: classes no hand-built output stands for: "crash" is the runner's (an exception or a failed compile), never
#: compare's
EXEMPT = {"crash": "the runner's class for a raised error or failed compile; compare never returns it"}


@dataclass
class Labelled:
    """A task, the backend's outputs and the class counts the classifier must give."""

    case: Case
    family: str
    profile: str
    got: dict[str, np.ndarray]
    want: dict[str, int]


LABELLED: dict[str, tuple[tuple[str, ...], Callable[[], Labelled]]] = {}


def labelled(*classes: str) -> Callable[[Callable[[], Labelled]], Callable[[], Labelled]]:
    """Register a builder whose case the classifier must label with exactly ``classes``."""
    def deco(fn: Callable[[], Labelled]) -> Callable[[], Labelled]:
        assert fn.__name__ not in LABELLED
        LABELLED[fn.__name__] = (classes, fn)
        return fn
    return deco


def _one(case: Case, family: str, profile: str, got: dict[str, np.ndarray], ref: dict[str, np.ndarray], cls: str,
         mask: dict[str, np.ndarray] | None = None) -> Labelled:
    """Every element where ``got`` differs from ``ref`` (as bits, outside ``mask``) must be labelled ``cls``."""
    n = 0
    for name, g in got.items():
        gb = np.asarray(g).view(f"u{np.asarray(g).dtype.itemsize}").reshape(-1)
        rb = np.asarray(ref[name]).view(f"u{np.asarray(ref[name]).dtype.itemsize}").reshape(-1)
        keep = ~np.asarray((mask or {}).get(name, np.zeros(gb.shape, bool))).reshape(-1)
        n += int(((gb != rb) & keep).sum())
    assert n > 0, "the mechanism must change at least one element"
    return Labelled(case, family, profile, got, {cls: n})


# ---- uniform quantize (uniform.md §2.1): x / s exact in float64, z odd --------------------------------------------
S, Z = 0.25, 7  # x / s is exact in float64 for every x below; z odd: half to even of x/s + z and of x/s differ


def _x() -> np.ndarray:
    """Ties, non-ties and values outside int8 / uint8, all multiples of s / 8 (x / s exact)."""
    t = np.arange(-40, 41) / 2.0  # every tie and integer of x / s in [-20, 20]
    off = np.array([0.125, 0.375, 0.625, -0.125, -0.375, -0.625, 1.875, -1.875, 3.125, -3.125])
    big = np.array([40.0, 60.0, 100.0, 150.0, 255.0, 300.0, -40.0, -60.0, -100.0])  # x / s beyond 127 / -128
    return ((np.concatenate([t, t + off[0], off, big])) * S).astype(F32)


def _even(v: np.ndarray) -> np.ndarray:
    return np.round(v)  # numpy rounds half to even (v is exact in float64)


def _away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _codes(n: np.ndarray, lo: int, hi: int, dtype: str = "uint8") -> np.ndarray:
    return (np.clip(n, lo, hi).astype(np.int64) & 0xFF).astype(dtype)


def _quantize(storage: str) -> tuple[Case, np.ndarray]:
    x = _x()
    case = quantize_case(f"{storage}/labels", storage, x, "stablehlo", scale=S, zero_point=Z)
    return case, x.astype(F64) / S


def _uniform(case: Case, got: np.ndarray, cls: str, profile: str = "stablehlo") -> Labelled:
    return _one(case, "uniform", profile, {"codes": got}, {"codes": case.expected["codes"]}, cls,
                {"codes": case.unspecified.get("codes")} if "codes" in case.unspecified else None)


def test_the_reference_is_round_half_even_of_x_over_s_plus_z():
    case, v = _quantize("int8")
    assert np.array_equal(case.expected["codes"], _codes(_even(v + Z), -128, 127))


def _rounding(cls: str, make: Callable[[np.ndarray], np.ndarray]) -> Callable[[], Labelled]:
    def build() -> Labelled:
        case, v = _quantize("int8")
        return _uniform(case, _codes(make(v), -128, 127), cls)
    build.__name__ = f"rounding_{cls}"
    return build


# ties away from zero / truncated / rounded up / rounded, then the zero point added: the last differs from
# half-to-even(x/s + z) on every tie (z is odd), like a tie rule or a truncation on half of them
labelled("tie_rule")(_rounding("tie_rule", lambda v: _away(v + Z)))
labelled("truncation")(_rounding("truncation", lambda v: np.trunc(v + Z)))
labelled("directed_rounding")(_rounding("directed_rounding", lambda v: np.ceil(v + Z)))
labelled("zero_point_order")(_rounding("zero_point_order", lambda v: _even(v) + Z))


@labelled("signedness")
def signed_clamp_of_unsigned_storage() -> Labelled:
    """uint8 clamped to int8 and stored as its two's complement byte: not a zero point order."""
    case, v = _quantize("uint8")
    assert np.array_equal(case.expected["codes"], _codes(_even(v + Z), 0, 255))
    return _uniform(case, _codes(_even(v + Z), -128, 127), "signedness")


@labelled("wrap_around")
def wrap_around_is_not_a_clamp() -> Labelled:
    case, v = _quantize("int8")
    return _uniform(case, (_even(v + Z).astype(np.int64) & 0xFF).astype(np.uint8), "wrap_around")  # mod 2^8


@labelled("saturation")
def clamp_to_the_unsigned_bounds_is_not_a_wrap() -> Labelled:
    """int8 results clamped to [0, 255] (the uint8 bounds): the same bytes as wrap-around on 128..255, not below
    0 or above 255."""
    case, v = _quantize("int8")
    return _uniform(case, _codes(_even(v + Z), 0, 255), "saturation")


@labelled("zero_point_order", "signedness")
def two_mechanisms_in_one_task() -> Labelled:
    x = _x()
    x = x[x.astype(F64) / S + Z >= 0]  # no negative results: the two mechanisms touch disjoint elements
    case = quantize_case("uint8/labels2", "uint8", x, "stablehlo", scale=S, zero_point=Z)
    v = x.astype(F64) / S
    ref = case.expected["codes"]
    # rounded before the zero point is added (ties), and clamped at the int8 bound 127 (values above it)
    got = _codes(_even(v) + Z, -128, 127)
    return Labelled(case, "uniform", "stablehlo", {"codes": got},
                    {"zero_point_order": int(((got != ref) & (v + Z <= 127)).sum()),
                     "signedness": int(((got != ref) & (v + Z > 127)).sum())})


def _near_ties(s: np.float32, k: range = range(-60, 61)) -> np.ndarray:
    """float32 values at and next to (j + 1/2) s: x / s near the ties of the integer rounding."""
    b = ((np.asarray(k, F64) + 0.5) * F64(s)).astype(F32)
    return np.concatenate([b, np.nextafter(b, F32(np.inf)), np.nextafter(b, F32(-np.inf))]).astype(F32)


S01 = F32(0.1)  # 1 / s and x / s inexact in float32


def _s01_case(profile: str = "stablehlo", z: int = 0) -> tuple[Case, np.ndarray]:
    x = _near_ties(S01)
    case = quantize_case(f"int8/labels/s01/{profile}", "int8", x, profile, scale=float(S01), zero_point=z)
    return case, x


@labelled("scale_arithmetic")
def reciprocal_instead_of_division() -> Labelled:
    """fl32(x * fl32(1 / s)) where the reference takes fl32(x / s) (IEEE float32 operations, one at a time)."""
    case, x = _s01_case()
    assert np.array_equal(case.expected["codes"], _codes(_even((x / S01).astype(F32).astype(F64)), -128, 127))
    inv = F32(1) / S01
    return _uniform(case, _codes(_even((x * inv).astype(F32).astype(F64)), -128, 127), "scale_arithmetic")


@labelled("compute_precision")
def quotient_in_float64() -> Labelled:
    """x / s in float64 (here as good as the exact quotient, a Fraction rounded half to even) where the reference
    rounds it to float32 first, landing on ties."""
    case, x = _s01_case()
    exact = [round(Fraction(float(v)) / Fraction(float(S01))) for v in x]  # Python rounds a Fraction half to even
    assert np.array_equal(exact, _even(x.astype(F64) / F64(S01)))
    return _uniform(case, _codes(np.array(exact), -128, 127), "compute_precision")


def _qwix_fma() -> tuple[Case, np.ndarray, np.float32]:
    case, x = _s01_case("qwix", Z)  # qwix: x * fl(1/s), the zero point added in float32 before rounding
    inv = F32(1) / S01
    q = (x.astype(F64) * F64(inv)).astype(F32)  # the product of two float32 is exact in float64: one rounding
    assert np.array_equal(case.expected["codes"], _codes(_even((q + F32(Z)).astype(F32).astype(F64)), -128, 127))
    return case, x, inv


@labelled("fma")
def fused_multiply_add() -> Labelled:
    """fl32(x * fl(1/s) + z) rounded once (FMA contraction) where the reference rounds the product first."""
    case, x, inv = _qwix_fma()
    exact = x.astype(F64) * F64(inv) + Z
    assert all(Fraction(float(a)) * Fraction(float(inv)) + Z == Fraction(float(e)) for a, e in zip(x, exact))
    return _uniform(case, _codes(_even(exact.astype(F32).astype(F64)), -128, 127), "fma", "qwix")


@labelled("zero_point_order")
def zero_point_after_rounding_not_fma() -> Labelled:
    """The same task: round(fl32(x * fl(1/s))) + z, the confusable of the fused form."""
    case, x, inv = _qwix_fma()
    q = (x.astype(F64) * F64(inv)).astype(F32)
    return _uniform(case, _codes(_even(q.astype(F64)) + Z, -128, 127), "zero_point_order", "qwix")


@labelled("int32_conversion")
def rounded_quotient_through_int32() -> Labelled:
    """r = rint(x / s) converted to int32 (beyond it and +-Inf: INT_MIN, x86-64's cvtss2si), z added in int32, then
    clamped: 1e10 and +Inf give -128 where the reference saturates to 127."""
    x = np.array([1e10, np.inf, -1e10, -np.inf, 1.0, 3e9, -5.0], F32)
    case = quantize_case("int8/labels/int32", "int8", x, "stablehlo", scale=1.0, zero_point=3)
    r = np.rint(x.astype(F64))
    r32 = np.where(np.abs(r) >= 2.0**31, -(2**31), r).astype(np.int64)
    v = (r32 + 3 + 2**31) % 2**32 - 2**31
    assert np.array_equal(case.expected["codes"], _codes(r + 3, -128, 127))  # saturated (+-Inf clamp too)
    return _uniform(case, _codes(v, -128, 127), "int32_conversion")


@labelled("integer_lowering")
def float_storage_rounded_to_an_integer_first() -> Labelled:
    """E4M3FN storage: rint(x / s + z) converted to the format, where the reference encodes x / s (1.25 is an
    E4M3 value, 0x3A; the lowering gives 1.0, 0x38)."""
    x = np.array([1.25, 2.5, 0.375, -1.75, 3.0, 10.0, 0.0], F32)
    case = quantize_case("float8_e4m3fn/labels/lowering", "float8_e4m3fn", x, "stablehlo", scale=1.0, zero_point=0)
    assert np.array_equal(case.expected["codes"], x.astype(E4M3).view(np.uint8))
    return _uniform(case, np.rint(x).astype(E4M3).view(np.uint8), "integer_lowering")


@labelled("other")
def a_code_no_variant_explains() -> Labelled:
    """One code replaced by 0x5A (90): no rounding, clamp or zero-point change of x / s in [-8, 8] + 7 gives it."""
    x = (np.arange(-32, 33) * 0.25).astype(F32)
    case = quantize_case("int8/labels/other", "int8", x, "stablehlo", scale=0.25, zero_point=7)
    got = _codes(_even(x.astype(F64) / 0.25 + 7), -128, 127)
    got[3] = 0x5A
    return _uniform(case, got, "other")


@labelled("sign_of_zero")
def minus_zero_to_plus_zero() -> Labelled:
    """Float storage: -0 encoded as +0 is the sign of zero, not compute precision."""
    x = np.array([-0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 3.0], F32)
    case = quantize_case("float8_e4m3fn/labels", "float8_e4m3fn", x, "stablehlo", scale=1.0, zero_point=0)
    ref = case.expected["codes"]
    # E4M3FN codes (OCP FP8 v1.0): -0 = 0x80, +0 = 0x00, 1.0 = 0x38, 0.5 = 0x30, 3.0 = 0x44; the sign bit 0x80
    assert ref.tolist() == [0x80, 0x00, 0x38, 0xB8, 0x30, 0xB0, 0x44]
    return _uniform(case, np.array([0x00, 0x00, 0x38, 0xB8, 0x30, 0xB0, 0x44], np.uint8), "sign_of_zero")


# ---- uniform dequantize and requantize (uniform.md §2.2, §2.7) ------------------------------------------------------
@labelled("dequantize_arithmetic")
def dequantize_as_two_products() -> Labelled:
    """fl32(fl32(q s) - fl32(z s)) where the reference computes fl32((q - z) s)."""
    s, z = S01, 3
    codes = np.arange(-128, 128)
    case = dequantize_case("int8/labels/dq", "int8", codes, "stablehlo", scale=float(s), zero_point=z)
    ref = ((codes - z).astype(F32) * s).astype(F32)
    assert np.array_equal(case.expected["y"].view(np.uint32), ref.view(np.uint32))
    got = ((codes.astype(F32) * s).astype(F32) - (F32(z) * s).astype(F32)).astype(F32)
    return _one(case, "uniform", "stablehlo", {"y": got}, {"y": ref}, "dequantize_arithmetic",
                {"y": case.unspecified["y"]})


@labelled("requantize_form")
def requantize_merged() -> Labelled:
    """int8 (s1, 0) -> int8 (s2, 1) with s1 / s2 = 3/2 up to float32 rounding: the merged form rint(fl32(fl32(q
    fl32(fl64(s1 / s2))) + 1)) where the reference (stablehlo) dequantizes, then quantizes: rint(fl32(fl32(fl32(q s1) /
    s2) + 1)). The scales were found by a search for a pair where the two differ (checked below)."""
    s1, s2 = F32(0.21831637620925903), F32(0.14554424583911896)
    codes = np.arange(-128, 128)
    frm = qref.scheme("int8", scale=float(s1), zero_point=0, profile="stablehlo")
    to = qref.scheme("int8", scale=float(s2), zero_point=1, profile="stablehlo")
    y = (codes.astype(F32) * s1).astype(F32)
    ref = _codes(_even(((y / s2).astype(F32) + F32(1)).astype(F32).astype(F64)), -128, 127)
    q = requantize(codes.astype(np.int8), frm, to)
    assert not np.asarray(q.unspecified).any()
    case = Case(id="uniform/requantize/labels", family="uniform", operation="uniform_requantize",
                scheme=frm.to_spec(), profile="stablehlo", params={"to": to.to_spec()},
                inputs={"codes": codes.astype(np.int8).view(np.uint8)},
                expected={"result": _codes(np.asarray(q.codes), -128, 127)},
                array_formats={"codes": "int8", "result": "int8"}, profiles=("stablehlo",))
    assert np.array_equal(case.expected["result"], ref)
    m = F32(F64(s1) / F64(s2))
    got = _codes(_even(((codes.astype(F32) * m).astype(F32) + F32(1)).astype(F32).astype(F64)), -128, 127)
    return _one(case, "uniform", "stablehlo", {"result": got}, {"result": ref}, "requantize_form")


# ---- element conversions (elements.md §2) -------------------------------------------------------------------------
def _encode(x: np.ndarray, fmt: str, codes: np.ndarray | list[int]) -> Case:
    return Case(id=f"elements/{fmt}/labels", family="elements", operation="encode", format=fmt, policy=None,
                inputs={"x": x}, expected={"codes": np.asarray(codes, np.uint8)}, array_formats={"codes": fmt},
                profiles=("spec",))


def _elements(case: Case, got: np.ndarray | list[int], cls: str) -> Labelled:
    fam = get_family("elements")
    assert np.array_equal(fam.expectation(case, "spec").outputs["codes"], case.expected["codes"])
    return _one(case, "elements", "spec", {"codes": np.asarray(got, np.uint8)}, dict(case.expected), cls)


@labelled("sign_dropped")
def negative_results_come_out_positive() -> Labelled:
    x = np.array([-1.0, -0.5, 1.0, -3.0], F32)
    case = _encode(x, "float8_e4m3fn", x.astype(E4M3).view(np.uint8))
    return _elements(case, np.abs(x).astype(E4M3).view(np.uint8), "sign_dropped")


# E8M0 (OCP MX v1.0 §5.4): code = log2(x) + 127 for a power of two, 0xFF NaN; no zero, no sign
E8M0_X = np.array([-2.0, 4.0, -0.5, 0.25, 0.0], F32)
E8M0_REF = [0xFF, 129, 0xFF, 125, 0xFF]  # negative and zero inputs: NaN (elements.md §2.7)


@labelled("negative_input")
def negative_input_to_e8m0_as_its_magnitude() -> Labelled:
    return _elements(_encode(E8M0_X, "float8_e8m0fnu", E8M0_REF), [128, 129, 126, 125, 0xFF], "negative_input")


@labelled("zero_input")
def zero_input_to_e8m0_as_the_smallest_code() -> Labelled:
    return _elements(_encode(E8M0_X, "float8_e8m0fnu", E8M0_REF), [0xFF, 129, 0xFF, 125, 0x00], "zero_input")


# E4M3FN subnormals are k 2^-9 (k = 1..7), the smallest normal 2^-6 (code 0x08); 7.75 2^-9 rounds up to 2^-6
TINY = np.array([3 * 2.0**-9, -5 * 2.0**-9, 7.75 * 2.0**-9, 2.0**-6, 1.0, 2.0**-8], F32)
TINY_REF = [0x03, 0x85, 0x08, 0x08, 0x38, 0x02]


@labelled("subnormal_flush")
def subnormal_results_flushed() -> Labelled:
    """Subnormal results set to a zero of their sign; 7.75 2^-9 (the result is the smallest normal) kept."""
    ref = np.array(TINY_REF, np.uint8)
    mag = ref & 0x7F
    return _elements(_encode(TINY, "float8_e4m3fn", TINY_REF),
                     np.where((mag > 0) & (mag < 8), ref & 0x80, ref), "subnormal_flush")


@labelled("subnormal_flush", "min_normal_flush")
def inputs_below_the_smallest_normal_flushed() -> Labelled:
    """Inputs below 2^-6 flushed before rounding: the subnormal results and 7.75 2^-9 (its result normal) zero."""
    case = _encode(TINY, "float8_e4m3fn", TINY_REF)
    xin = np.where(np.abs(TINY) < 2.0**-6, np.copysign(0.0, TINY), TINY).astype(F32)
    got = xin.astype(E4M3).view(np.uint8)
    lab = _elements(case, got, "subnormal_flush")
    lab.want = {"subnormal_flush": 3, "min_normal_flush": 1}
    return lab


# float64 inputs (E4M3FN: 1.0 = 0x38, 1.125 = 0x39, 1.25 = 0x3A; 1 + 1/16 and 1 + 3/16 are ties)
F64_X = np.array([1 + 1 / 16 + 2.0**-40, 1 + 3 / 16 - 2.0**-40, 1.1, -(1 + 1 / 16 + 2.0**-40), 1.3], F64)
F64_REF = [0x39, 0x39, 0x39, 0xB9, 0x3A]  # nearest of the float64 value: none is a tie


@labelled("double_rounding")
def rounded_to_float32_first() -> Labelled:
    """fl32(x) is the tie 1 + 1/16 (to even: 1.0) or 1 + 3/16 (to even: 1.25); 1.1 and 1.3 stay."""
    got = F64_X.astype(F32).astype(E4M3).view(np.uint8)
    assert got.tolist() == [0x38, 0x3A, 0x39, 0xB8, 0x3A]
    return _elements(_encode(F64_X, "float8_e4m3fn", F64_REF), got, "double_rounding")


@labelled("truncation")
def truncated_float64_inputs() -> Labelled:
    """The same inputs truncated toward zero: 1.1 -> 1.0 tells it from double rounding."""
    return _elements(_encode(F64_X, "float8_e4m3fn", F64_REF), [0x38, 0x39, 0x38, 0xB8, 0x3A], "truncation")


@labelled("saturation_nan_inf")
def overflow_saturates_where_the_reference_gives_nan() -> Labelled:
    """E4M3FN overflow: NaN (0x7F / 0xFF) in the reference, +-448 (0x7E / 0xFE) in the backend."""
    x = np.array([1000.0, -1000.0, np.inf, 1.0], F32)
    return _elements(_encode(x, "float8_e4m3fn", [0x7F, 0xFF, 0x7F, 0x38]), [0x7E, 0xFE, 0x7E, 0x38],
                     "saturation_nan_inf")


def _e8m0_decode(got: int, cls: str) -> Callable[[], Labelled]:
    def build() -> Labelled:
        # E8M0 (OCP MX v1.0 §5.4): code 127 is 2^0 = 1.0 (0x3F800000), code 255 is NaN
        case = Case(id="elements/float8_e8m0fnu/labels", family="elements", operation="decode",
                    format="float8_e8m0fnu", inputs={"codes": np.array([127, 255], np.uint8)},
                    expected={"y": np.array([0x3F800000, 0x7FC00000], np.uint32).view(F32)},
                    array_formats={"codes": "float8_e8m0fnu"}, profiles=("spec",))
        exp = get_family("elements").expectation(case, "spec")
        assert exp.outputs["y"].view(np.uint32)[0] == 0x3F800000 and np.isnan(exp.outputs["y"][1])
        return Labelled(case, "elements", "spec", {"y": np.array([0x3F800000, got], np.uint32).view(F32)}, {cls: 1})
    build.__name__ = f"decode_nan_{cls}"
    return build


labelled("nan_sign_or_code")(_e8m0_decode(0xFFC00000, "nan_sign_or_code"))  # a NaN: its sign differs
labelled("decode_value")(_e8m0_decode(0x7F000000, "decode_value"))  # 2^127: a number where the reference has NaN
labelled("saturation_nan_inf")(_e8m0_decode(0x7F800000, "saturation_nan_inf"))  # +Inf where it has NaN


# ---- MX blocks (block.md §4) --------------------------------------------------------------------------------------
def _mx(x: np.ndarray, e: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """MXFP8 E4M3 codes and E8M0 scale bytes of blocks of 32 with scale exponents ``e``: x / 2^e is exact, then
    cast to E4M3 (ml_dtypes, nearest even; no element reaches 448 here)."""
    xb = x.reshape(-1, 32).astype(F64) / np.exp2(np.asarray(e, F64))[:, None]
    assert np.abs(xb).max() <= 448
    return xb.astype(F32).astype(E4M3).view(np.uint8).reshape(-1), (np.asarray(e) + 127).astype(np.uint8)


def _mx_case() -> tuple[Case, np.ndarray]:
    """Two blocks: amax 3.0 (floor(log2 3) = 1: scale 2^(1 - 8), OCP's rule; ceil: 2^(2 - 8)) and all zeros (OCP:
    the smallest scale 2^-127, byte 0)."""
    b1 = np.arange(-24, 8) / 8.0
    b1[0] = 3.0
    x = np.concatenate([b1, np.zeros(32)]).astype(F32)
    codes, scales = _mx(x, [1 - 8, -127])
    sch = qref.scheme("mxfp8_e4m3", profile="ocp")
    case = Case(id="block/mxfp8_e4m3/labels", family="block", operation="block_quantize", scheme=sch.to_spec(),
                profile="ocp", inputs={"x": x}, expected={"codes": codes, "scales": scales},
                array_formats={"codes": "float8_e4m3fn", "scales": "float8_e8m0fnu"}, profiles=("ocp",))
    exp = get_family("block").expectation(case, "ocp")
    assert all(np.array_equal(exp.outputs[k], case.expected[k]) for k in ("codes", "scales"))
    return case, x


@labelled("scale_rule")
def mx_scale_by_ceil() -> Labelled:
    case, x = _mx_case()
    codes, scales = _mx(x, [2 - 8, -127])
    return _one(case, "block", "spec", {"codes": codes, "scales": scales}, dict(case.expected), "scale_rule")


@labelled("zero_block")
def mx_zero_block_unit_scale() -> Labelled:
    """The all-zero block with scale 2^0 (byte 127) instead of 2^-127; its codes are 0 either way."""
    case, x = _mx_case()
    codes, scales = _mx(x, [1 - 8, 0])
    return _one(case, "block", "spec", {"codes": codes, "scales": scales}, dict(case.expected), "zero_block")


# ---- lookup tables (lut.md §3.3, §5.3) -----------------------------------------------------------------------------
def _nf4() -> tuple[object, np.ndarray]:
    sch = qref.scheme("nf4", block_size=64, profile="spec")
    return sch, np.array(sch.table.bits, np.uint32).view(F32)


def _lookup_case(sch: object, x: np.ndarray) -> Case:
    q = sch.quantize(x)
    return Case(id="lookup/nf4/labels", family="lookup", operation="lookup_quantize", scheme=sch.to_spec(),
                profile="spec", profiles=("spec",), inputs={"x": x},
                expected={"codes": np.asarray(q.codes), "scales": np.asarray(q.scales, F32)},
                unspecified={"codes": np.zeros(x.size, bool)})


@labelled("decision_rule")
def lookup_grid65536() -> Labelled:
    """One block with absmax 1 (s = x) of inputs 1e-5 .. 3e-5 from the exact midpoints of the NF4 entries (none on
    one): the reference takes the nearest entry; bitsandbytes' CPU grid maps s to i = trunc(fl32(fl32(fl32(fl32(s
    + 1) 0.5) 65535) + 0.5)) and counts the float32 midpoints below fl32(-1 + fl32(2i / 65535))."""
    sch, t = _nf4()
    mid = (t[:-1].astype(F64) + t[1:]) / 2  # exact: float32 entries
    x = (mid[:, None] + np.array([-3e-5, -2e-5, -1e-5, 1e-5, 2e-5, 3e-5])[None, :]).astype(F32).reshape(-1)
    x = np.concatenate([[1.0], x[np.abs(x) <= 1][:63]]).astype(F32)
    assert x.size == 64 and not np.isin(x.astype(F64), mid).any()
    case = _lookup_case(sch, x)
    assert np.array_equal(case.expected["codes"], np.searchsorted(mid, x.astype(F64)))  # the nearest entry
    s = np.clip(x, F32(-1), F32(1))
    h = ((s + F32(1)).astype(F32) * F32(0.5)).astype(F32)
    i = np.trunc(((h * F32(65535)).astype(F32) + F32(0.5)).astype(F32)).astype(np.int64)
    g = (F32(-1) + (F32(2) * i.astype(F32) / F32(65535)).astype(F32)).astype(F32)
    got = (mid.astype(F32)[None, :] < g[:, None]).sum(axis=1).astype(np.uint8)
    return _one(case, "lookup", "spec", {"codes": got}, {"codes": case.expected["codes"]}, "decision_rule")


@labelled("tie_rule")
def lookup_ties_to_the_lower_code() -> Labelled:
    """Inputs on the exact midpoints that float32 holds: the reference takes the even code, the backend the lower
    (the first index of the exact argmin)."""
    sch, t = _nf4()
    mid = (t[:-1].astype(F64) + t[1:]) / 2
    on = mid[mid.astype(F32).astype(F64) == mid].astype(F32)
    assert on.size
    x = np.zeros(64, F32)
    x[0] = 1.0
    x[1 : 1 + on.size] = on
    x[20:25] = [0.5, -0.3, 0.7, -0.9, 0.1]
    case = _lookup_case(sch, x)
    d = np.abs(x.astype(F64)[:, None] - t.astype(F64)[None, :])  # exact: the inputs and entries are float32
    got = np.argmin(d, axis=1).astype(np.uint8)  # the first index of the smallest distance
    return _one(case, "lookup", "spec", {"codes": got}, {"codes": case.expected["codes"]}, "tie_rule")


@labelled("reduction")
def double_quantization_offset_summed_in_float32() -> Labelled:
    """bitsandbytes' double quantization: the offset is the mean of the 256 block scales; the reference rounds the
    exact mean once, the backend sums in float32 in order and divides by 256."""
    sch = qref.scheme("nf4", block_size=64, profile="bitsandbytes", double_quant=True)
    am = np.random.default_rng(5).uniform(0.5, 1.0, 256).astype(F32)
    x = np.zeros((256, 64), F32)
    x[:, 0] = am
    x = x.reshape(-1)
    q = sch.quantize(x)
    dq = q.meta["double_quant"]
    off = F32(dq.offset)
    exact = sum(Fraction(float(v)) for v in am) / 256
    assert all(abs(Fraction(float(off)) - exact) <= abs(Fraction(float(n)) - exact)
               for n in (np.nextafter(off, F32(0)), np.nextafter(off, F32(2))))
    case = Case(id="lookup/nf4/labels/dq", family="lookup", operation="lookup_quantize", scheme=sch.to_spec(),
                profile="bitsandbytes", profiles=("bitsandbytes",), inputs={"x": x},
                expected={"codes": np.asarray(q.codes), "dq_codes": np.asarray(dq.codes),
                          "dq_scales": np.asarray(dq.scales, F32), "dq_offset": np.array([off], F32)})
    s = F32(0)
    for v in am:  # one float32 addition at a time
        s = F32(s + v)
    got = np.array([F32(s / F32(256))], F32)
    return _one(case, "lookup", "bitsandbytes", {"dq_offset": got}, {"dq_offset": case.expected["dq_offset"]},
                "reduction")


# ---- integer matrix products (matmul.md §3-§5, §17) ----------------------------------------------------------------
def _mm(op: str, a: np.ndarray, b: np.ndarray, a_st: str, b_st: str, out: str | None = None,
        **ins: np.ndarray) -> Case:
    """A matmul case listed for no profile: the family recomputes each profile's expectation with qref."""
    M, K = a.shape
    N = b.shape[1]
    inputs = {"a": a, "b": b, "a_zero_point": np.asarray(ins.pop("za", 0)).astype(a.dtype),
              "b_zero_point": np.asarray(ins.pop("zb", 0)).astype(b.dtype), **ins}
    dt = np.int32 if op == "matmul_integer" else (np.uint8 if out == "uint8" else np.int8)
    return Case(id=f"matmul/{op}/labels", family="matmul", operation=op, profile="none", profiles=("none",),
                inputs=inputs, expected={"y": np.zeros((M, N), dt)},
                params={"a_storage": a_st, "b_storage": b_st, "output": out, "m": M, "k": K, "n": N})


def _matmul(case: Case, profile: str, ref: np.ndarray, got: np.ndarray, cls: str) -> Labelled:
    exp = get_family("matmul").expectation(case, profile)
    assert np.array_equal(np.asarray(exp.outputs["y"]).view(f"u{ref.dtype.itemsize}"),
                          np.asarray(ref).view(f"u{ref.dtype.itemsize}"))
    return _one(case, "matmul", profile, {"y": got}, {"y": ref}, cls)


@labelled("pair_saturation")
def u8_s8_pairs_saturate_in_int16() -> Labelled:
    """255 127 + 255 127 = 64770 saturates to 32767 (x86 vpmaddubsw) where onnxruntime's reference sums in int32."""
    a = np.array([[255, 255], [255, 1], [3, 4]], np.uint8)
    b = np.array([[127], [127]], np.int8)
    p = a.astype(np.int64)[:, :, None] * b.astype(np.int64)[None]
    got = np.clip(p[:, 0] + p[:, 1], -(2**15), 2**15 - 1).astype(np.int32)
    return _matmul(_mm("matmul_integer", a, b, "uint8", "int8"), "onnxruntime", p.sum(axis=1).astype(np.int32), got,
                   "pair_saturation")


@labelled("accumulator_overflow")
def int32_sum_saturates_instead_of_wrapping() -> Labelled:
    """33,100 products 255 x 255 = 2,152,327,500 > 2^31 - 1: onnxruntime wraps, the backend saturates."""
    K = 33100
    a = np.full((2, K), 255, np.uint8)
    a[1] = 1
    b = np.full((K, 1), 255, np.uint8)
    ex = a.astype(np.int64) @ b.astype(np.int64)
    ref = ((ex + 2**31) % 2**32 - 2**31).astype(np.int32)
    got = np.clip(ex, -(2**31), 2**31 - 1).astype(np.int32)
    return _matmul(_mm("matmul_integer", a, b, "uint8", "uint8"), "onnxruntime", ref, got, "accumulator_overflow")


@labelled("unsigned_extension")
def uint8_codes_sign_extended() -> Labelled:
    a = np.array([[200, 3], [100, 5]], np.uint8)
    b = np.array([[1], [2]], np.int8)
    sa = a.astype(np.int64)
    sa = np.where(sa >= 128, sa - 256, sa)  # 200 read as -56
    return _matmul(_mm("matmul_integer", a, b, "uint8", "int8"), "onnxruntime",
                   (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32),
                   (sa @ b.astype(np.int64)).astype(np.int32), "unsigned_extension")


ONE = F32(1)


def _qlinear(a: np.ndarray, b: np.ndarray, sa: np.float32, sb: np.float32, sy: np.float32) -> Case:
    return _mm("qlinear_matmul", a, b, "int8", "int8", "int8", a_scale=sa, b_scale=sb, y_scale=sy,
               y_zero_point=np.int8(0))


def _f32_requantize(acc: np.ndarray, m: np.float32) -> np.ndarray:
    """rne(fl32(fl32(acc) m)) clamped to int8 (acc below 2^24: exact in float32)."""
    return np.clip(_even((acc.astype(F32) * m).astype(F32).astype(F64)), -128, 127).astype(np.int8)


@labelled("narrowing")
def int8_output_keeps_the_low_byte() -> Labelled:
    a = np.array([[100], [50], [-100], [1]], np.int8)
    b = np.array([[100]], np.int8)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    return _matmul(_qlinear(a, b, ONE, ONE, ONE), "onnxruntime", np.clip(acc, -128, 127).astype(np.int8),
                   (acc & 0xFF).astype(np.uint8).view(np.int8), "narrowing")


@labelled("requantize_method")
def gemmlowp_fixed_point_double_rounding() -> Labelled:
    """m = 0.1875 = 0.75 2^-2 as the Q31 multiplier round(0.75 2^31) and a right shift by 2, each rounded (gemmlowp's
    SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT): acc = 13 gives 9.75 -> 10 -> 2.5 -> 3 where
    the float multiply gives rne(2.4375) = 2. acc m is never a tie here (3 acc / 16)."""
    a = np.arange(1, 41, dtype=np.int8).reshape(-1, 1)
    b = np.array([[1]], np.int8)
    acc = (a.astype(np.int64) @ b.astype(np.int64)).ravel()
    ref = np.array([round(Fraction(int(v) * 3, 16)) for v in acc], np.int8).reshape(-1, 1)
    v = (acc * round(0.75 * 2**31) + (1 << 30)) >> 31  # positive: the nudge is + 2^30
    v = (v + 2) >> 2  # remainder > 1 (of 4) rounds up
    return _matmul(_qlinear(a, b, F32(0.1875), ONE, ONE), "onnxruntime", ref,
                   np.clip(v, -128, 127).astype(np.int8).reshape(-1, 1), "requantize_method")


@labelled("multiplier_arithmetic")
def multiplier_associated_as_a_times_b_over_y() -> Labelled:
    """m = fl32(a_s fl32(b_s / y_s)) where onnxruntime takes fl32(fl32(a_s b_s) / y_s): one ulp apart, and acc =
    +-919 crosses a half. The scales were found by a search where the float64 multiplier and a float64 product do
    not give the same codes (so only the association explains them)."""
    sa, sb, sy = F32(0.066273532807827), F32(0.07242605835199356), F32(0.11167434602975845)
    a = np.array([[127] * 7 + [30], [-127] * 7 + [-30], [5] * 8, [100] * 8], np.int8)
    b = np.ones((8, 1), np.int8)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    ref = _f32_requantize(acc, F32(F32(sa * sb) / sy))
    got = _f32_requantize(acc, F32(sa * F32(sb / sy)))
    return _matmul(_qlinear(a, b, sa, sb, sy), "onnxruntime", ref, got, "multiplier_arithmetic")


@labelled("bias_stage")
def float_bias_rounded_to_accumulator_units() -> Labelled:
    """u8 x s8 -> u8, dyadic scales (a_s b_s = 2^-12, m = 2^-1), biases (j + 1/2) 2^-12: the exact profile adds the
    bias in real arithmetic, the backend first rounds it to an int32 in accumulator units (half to even)."""
    rng = np.random.default_rng(2)
    a = rng.integers(125, 132, (6, 9)).astype(np.uint8)
    b = rng.integers(-3, 4, (9, 8)).astype(np.int8)
    bias = ((np.arange(-4, 4) + 0.5) * 2.0**-12).astype(F32)
    case = _mm("qlinear_matmul", a, b, "uint8", "int8", "uint8", za=128, a_scale=F32(2.0**-8), b_scale=F32(2.0**-4),
               y_scale=F32(2.0**-11), y_zero_point=np.uint8(129), bias=bias)
    acc = (a.astype(np.int64) - 128) @ b.astype(np.int64)
    ab, ys = Fraction(1, 2**12), Fraction(1, 2**11)

    def rhe(f: Fraction) -> int:
        return round(f)  # Python rounds a Fraction half to even

    bq = [rhe(Fraction(float(v)) / ab) for v in bias]
    ref = np.array([[rhe((int(acc[m, n]) * ab + Fraction(float(bias[n]))) / ys) for n in range(8)]
                    for m in range(6)]) + 129
    got = np.array([[rhe((int(acc[m, n]) + bq[n]) * ab / ys) for n in range(8)] for m in range(6)]) + 129
    return _matmul(case, "exact", np.clip(ref, 0, 255).astype(np.uint8), np.clip(got, 0, 255).astype(np.uint8),
                   "bias_stage")


def _hybrid(x: np.ndarray, w: np.ndarray) -> Case:
    M, K = x.shape
    N = w.shape[1]
    return Case(id="matmul/hybrid_matmul/labels", family="matmul", operation="hybrid_matmul", profile="none",
                profiles=("none",), inputs={"a": x, "b": w, "b_scale": np.ones(N, F32)},
                expected={"y": np.zeros((M, N), F32)},
                params={"a_storage": "float32", "b_storage": "int8", "output": "float32", "m": M, "k": K, "n": N})


@labelled("product_rule")
def sign_moved_onto_minus_128_wraps() -> Labelled:
    """Rows whose absmax is 127 (scale 1, codes = x), K = 16 (one 16-wide vector block): |q| times w with q's sign
    moved onto w in int8 (x86 pabsb / psignb), so q < 0 with w = -128 gives |q| (-128) instead of |q| 128."""
    x = np.zeros((3, 16), F32)
    x[0, :2], x[1, :2], x[2, :2] = [-127, 1], [127, 2], [-127, -127]
    w = np.zeros((16, 2), np.int8)
    w[:2] = [[-128, 5], [1, -128]]
    q, w64 = x.astype(np.int64), w.astype(np.int64)
    moved = np.where(q[:, :, None] < 0, -w64[None], w64[None])
    moved = (moved + 128) % 256 - 128  # int8: -(-128) wraps to -128
    return _matmul(_hybrid(x, w), "exact", (q @ w64).astype(F32), (np.abs(q)[:, :, None] * moved).sum(axis=1)
                   .astype(F32), "product_rule")


@labelled("activation_quantization")
def rows_quantized_asymmetrically() -> Labelled:
    """Rows of integers in [0, 255] with max 255: min/max quantization (scale 255 / 255 = 1, zero point -128) keeps
    them exactly (y = x w in int64), where the reference's symmetric absmax (s = fl32(255 / 127), codes
    round-half-away(fl32(x fl32(127 / 255)))) rounds them."""
    x = np.array([[255.0, 1.0, 0.0, 2.0], [255.0, 100.0, 37.0, 200.0], [3.0, 255.0, 254.0, 128.0]], F32)
    w = np.array([[1, -2], [3, 4], [-5, 6], [7, -8]], np.int8)
    R = np.abs(x).max(axis=1, keepdims=True).astype(F32)
    v = (x * (F32(127) / R).astype(F32)).astype(F32).astype(F64)
    acc = _away(v).astype(np.int64) @ w.astype(np.int64)
    ref = (acc.astype(F32) * (R / F32(127)).astype(F32)).astype(F32)  # fl32(fl32(acc) fl32(s 1))
    return _matmul(_hybrid(x, w), "exact", ref, (x.astype(np.int64) @ w.astype(np.int64)).astype(F32),
                   "activation_quantization")


# ---- block-scaled matrix products (recipes.md §2, §7.1) ------------------------------------------------------------
def _block_matmul(lv: np.ndarray, le: np.ndarray, rv: np.ndarray, re_: np.ndarray, acc: Accumulation) -> Case:
    """MXFP8 E4M3 operands (values exact in E4M3, scale exponents per block of 32 along K)."""
    sch = qref.scheme("mxfp8_e4m3", profile="ocp")
    lc, rc = (np.asarray(v, F32).astype(E4M3).view(np.uint8) for v in (lv, rv))
    ls, rs = ((np.asarray(e) + 127).astype(np.uint8) for e in (le, re_))
    r = block_matmul(QArray(codes=lc, scheme=sch, scales=ls, axis=1), QArray(codes=rc, scheme=sch, scales=rs, axis=0),
                     accumulation=acc, out_dtype="float32")
    exp, un = _result_arrays(r, acc.order == "any")
    return Case(id="recipes/block_matmul/labels", family="recipes", operation="block_matmul", scheme=sch.to_spec(),
                profile="ocp", profiles=("ocp",),
                params={"block_size": 32, "lhs_axis": 1, "rhs_axis": 0, "accumulation": _acc_params(acc),
                        "out_dtype": "float32", "zero_sign": "either", "nan_sign": "either",
                        "compare": "bound" if acc.order == "any" else "bits"},
                inputs={"lhs_codes": lc, "lhs_scales": ls, "rhs_codes": rc, "rhs_scales": rs}, expected=exp,
                unspecified=un, array_formats={"lhs_codes": "float8_e4m3fn", "rhs_codes": "float8_e4m3fn",
                                               "lhs_scales": "float8_e8m0fnu", "rhs_scales": "float8_e8m0fnu"})


def _cancelling() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction, np.float32]:
    """Products 2^16, 2^-9, -2^16 (then zeros): exact sum 2^-9; in float32 in order 2^16 + 2^-9 rounds to 2^16
    (25 bits apart), so the sum is 0."""
    K = 32
    lv = np.ones((2, K))
    lv[:, :3] = [256.0, 2.0**-9, -256.0]
    rv = np.zeros((K, 1))
    rv[:3, 0] = [256.0, 1.0, 256.0]
    prods = [Fraction(float(p)) * Fraction(float(q)) for p, q in zip(lv[0], rv[:, 0])]
    s = F32(0)
    for p in prods:
        s = F32(s + F32(float(p)))  # every product is a float32 value
    return lv, np.zeros((2, 1), int), rv, np.zeros((1, 1), int), sum(prods), s


@labelled("accumulation_order")
def bit_defined_sum_in_another_order() -> Labelled:
    lv, le, rv, re_, exact, seq = _cancelling()
    case = _block_matmul(lv, le, rv, re_, Accumulation("exact", "float32"))
    assert exact == Fraction(1, 512) and float(case.expected["y"][0, 0]) == 2.0**-9 and seq == 0
    return _one(case, "recipes", "spec", {"y": np.full((2, 1), seq, F32)}, dict(case.expected),
                "accumulation_order")


@labelled("outside_bound")
def any_order_result_outside_the_bound() -> Labelled:
    """The same products, any float32 order allowed: exact + 1 is outside every order's bound."""
    lv, le, rv, re_, exact, _ = _cancelling()
    case = _block_matmul(lv, le, rv, re_, Accumulation("any", "float32"))
    got = np.full((2, 1), F32(float(exact + 1)), F32)
    assert (got[:, 0] > case.expected["y_hi"][:, 0]).all()
    return _one(case, "recipes", "spec", {"y": got}, dict(case.expected), "outside_bound")


@labelled("operand_rounding")
def operand_times_scale_overflows_float32() -> Labelled:
    """448 2^127 times 1 2^-127 is 448 exactly; each operand times its scale first (XLA's scaled_dot
    decomposition) overflows float32: +Inf."""
    K = 32
    lv = np.ones((2, K))
    lv[0, 0] = 448.0
    rv = np.zeros((K, 1))
    rv[0, 0] = 1.0
    case = _block_matmul(lv, np.array([[127], [0]]), rv, np.array([[-127]]), Accumulation("exact", "float32"))
    assert case.expected["y"][0, 0] == 448.0
    got = case.expected["y"].copy()
    got[0, 0] = np.inf  # fl32(448 * 2^127) = +Inf (beyond 2^128)
    return _one(case, "recipes", "spec", {"y": got}, dict(case.expected), "operand_rounding")


# ---- the tests ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(LABELLED))
def test_labelled_case(name):
    classes, build = LABELLED[name]
    lab = build()
    assert set(lab.want) == set(classes)
    fam = get_family(lab.family)
    exp = fam.expectation(lab.case, lab.profile)
    c = classify.compare(lab.case, fam, exp, lab.got, lab.profile)
    assert c.mismatches == sum(lab.want.values())
    assert c.classes == lab.want


def test_every_class_has_a_labelled_case():
    covered = {c for classes, _ in LABELLED.values() for c in classes}
    assert covered <= set(classify.CLASSES)
    assert set(EXEMPT) <= set(classify.CLASSES)
    missing = set(classify.CLASSES) - covered - set(EXEMPT)
    assert not missing, f"classes without a labelled case: {sorted(missing)} (add one here)"
