"""A labelled set of known causes: hand-built backend outputs, one per class and per confusable pair of classes,
each computed here with exact arithmetic (float64 on values exact in it, int64) from the mechanism it stands for;
the classifier (qref.harness.classify.compare) must name the mechanism from the evidence of the task, not from a
fixed order of classes. Confusable pairs: a rounding variant and a zero-point-order variant give the same code on
some ties and not on others; a signed clamp and a zero point order give the same code on some codes; a NaN sign
and a finite decoded value are both "not the reference's NaN".
"""

from __future__ import annotations

import numpy as np
import pytest
from harness_cases import quantize_case

from qref.conformance import Case
from qref.harness import classify
from qref.harness.families import get_family

F32 = np.float32
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


def _codes(n: np.ndarray, lo: int, hi: int, dtype: str) -> np.ndarray:
    return (np.clip(n, lo, hi).astype(np.int64) & 0xFF).astype(dtype)


def _label(case: Case, got: np.ndarray) -> dict[str, int]:
    fam = get_family("uniform")
    exp = fam.expectation(case, "stablehlo")
    c = classify.compare(case, fam, exp, {"codes": got}, "stablehlo")
    assert c.mismatches > 0
    return c.classes


def _quantize(storage: str) -> tuple[Case, np.ndarray]:
    x = _x()
    case = quantize_case(f"{storage}/labels", storage, x, "stablehlo", scale=S, zero_point=Z)
    return case, x.astype(np.float64) / S


def test_the_reference_is_round_half_even_of_x_over_s_plus_z():
    case, v = _quantize("int8")
    assert np.array_equal(case.expected["codes"], _codes(_even(v + Z), -128, 127, "uint8"))


@pytest.mark.parametrize(("cls", "make"), [
    ("tie_rule", lambda v: _away(v + Z)),  # ties away from zero
    ("truncation", lambda v: np.trunc(v + Z)),
    ("directed_rounding", lambda v: np.ceil(v + Z)),
    # rounded, then the zero point added: differs from half-to-even(x/s + z) on every tie (z is odd), like a tie
    # rule or a truncation on half of them
    ("zero_point_order", lambda v: _even(v) + Z),
])
def test_rounding_and_zero_point_order_are_told_apart(cls, make):
    case, v = _quantize("int8")
    assert _label(case, _codes(make(v), -128, 127, "uint8")) == {cls: pytest.approx(_n(case, make, v))}


def _n(case: Case, make, v: np.ndarray) -> int:
    got = _codes(make(v), -128, 127, "uint8")
    return int((got != case.expected["codes"]).sum())


def test_a_signed_clamp_of_unsigned_storage_is_signedness_not_zero_point_order():
    case, v = _quantize("uint8")
    ref = _codes(_even(v + Z), 0, 255, "uint8")
    assert np.array_equal(case.expected["codes"], ref)
    got = _codes(_even(v + Z), -128, 127, "uint8")  # clamped to int8, stored as its two's complement byte
    assert _label(case, got) == {"signedness": int((got != ref).sum())}


def test_wrap_around_is_not_a_clamp():
    case, v = _quantize("int8")
    n = _even(v + Z).astype(np.int64)
    got = (n & 0xFF).astype(np.uint8)  # modulo 2^8
    assert _label(case, got) == {"wrap_around": int((got != case.expected["codes"]).sum())}


def test_two_mechanisms_in_one_task_get_one_label_each():
    x = _x()
    x = x[x.astype(np.float64) / S + Z >= 0]  # no negative results: the two mechanisms touch disjoint elements
    case = quantize_case("uint8/labels2", "uint8", x, "stablehlo", scale=S, zero_point=Z)
    v = x.astype(np.float64) / S
    ref = case.expected["codes"]
    # rounded before the zero point is added (ties), and clamped at the int8 bound 127 (values above it)
    got = _codes(_even(v) + Z, -128, 127, "uint8")
    assert _label(case, got) == {"zero_point_order": int(((got != ref) & (v + Z <= 127)).sum()),
                                 "signedness": int(((got != ref) & (v + Z > 127)).sum())}


# ---- decode: a NaN of another sign vs a finite value where the reference has NaN ------------------------------
def _e8m0_decode(codes: list[int], y: list[int]) -> Case:
    return Case(id="elements/float8_e8m0fnu/labels", family="elements", operation="decode",
                format="float8_e8m0fnu", inputs={"codes": np.array(codes, np.uint8)},
                expected={"y": np.array(y, np.uint32).view(F32)}, array_formats={"codes": "float8_e8m0fnu"},
                profiles=("spec",))


@pytest.mark.parametrize(("got", "cls"), [
    (0xFFC00000, "nan_sign_or_code"),  # a NaN: its sign differs
    (0x7F000000, "decode_value"),  # 2^127: a finite value where the reference has NaN (the code 0xFF)
    (0x7F800000, "saturation_nan_inf"),  # +Inf where the reference has NaN
])
def test_decode_nan_vs_a_finite_value(got, cls):
    # E8M0 (OCP MX v1.0 §5.4): code 127 is 2^0 = 1.0 (0x3F800000), code 255 is NaN
    case = _e8m0_decode([127, 255], [0x3F800000, 0x7FC00000])
    fam = get_family("elements")
    exp = fam.expectation(case, "spec")
    assert exp.outputs["y"].view(np.uint32)[0] == 0x3F800000 and np.isnan(exp.outputs["y"][1])
    c = classify.compare(case, fam, exp, {"y": np.array([0x3F800000, got], np.uint32).view(F32)}, "spec")
    assert c.classes == {cls: 1}


# ---- the sign of zero vs compute precision (float storage: -0 encoded as +0) ----------------------------------
def test_minus_zero_to_plus_zero_is_the_sign_of_zero():
    x = np.array([-0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 3.0], F32)
    case = quantize_case("float8_e4m3fn/labels", "float8_e4m3fn", x, "stablehlo", scale=1.0, zero_point=0)
    ref = case.expected["codes"]
    # E4M3FN codes (OCP FP8 v1.0): -0 = 0x80, +0 = 0x00, 1.0 = 0x38, 0.5 = 0x30, 3.0 = 0x44; the sign bit 0x80
    assert ref.tolist() == [0x80, 0x00, 0x38, 0xB8, 0x30, 0xB0, 0x44]
    got = np.array([0x00, 0x00, 0x38, 0xB8, 0x30, 0xB0, 0x44], np.uint8)
    assert _label(case, got) == {"sign_of_zero": 1}
