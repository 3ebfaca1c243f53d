"""qref.testing: bit-exact assertions, the mismatch classes of the report, and assert_conforms against a real
library (ml_dtypes 0.6 astype). Expected codes are written from the format definitions (OCP OFP8 v1.0, OCP MX
v1.0), not taken from qref."""

from __future__ import annotations

import contextlib
import io
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import strategies as st

import qref
import qref.testing.strategies as qs
from qref.errors import QrefError, UnknownNameError
from qref.testing import (
    MISMATCH_CLASSES,
    CodeMismatchError,
    ConformanceError,
    assert_codes_equal,
    assert_conforms,
    assert_values_equal,
    compare_codes,
)

E4M3 = "float8_e4m3fn"
# OCP OFP8 E4M3 codes written from the definition S.EEEE.MMM, bias 7
ONE, ONE_125, MAX, NAN, NEG_NAN, NEG_ZERO = 0x38, 0x39, 0x7E, 0x7F, 0xFF, 0x80


# ---- what numpy.testing misses ------------------------------------------------------------------------------
def test_nan_code_difference_missed_by_numpy() -> None:
    expected = np.array([ONE, NAN], dtype=np.uint8)
    actual = np.array([ONE, NEG_NAN], dtype=np.uint8)  # -NaN where the reference keeps the sign: a NaN code diff
    # decoded to float32 (what a test usually compares), numpy sees two NaNs and passes
    np.testing.assert_array_equal(qref.decode(actual, E4M3), qref.decode(expected, E4M3))
    with pytest.raises(CodeMismatchError) as info:
        assert_codes_equal(actual, expected, E4M3)
    assert info.value.report.counts == {"nan_code": 1}
    assert "0x7f nan" in str(info.value) and "0xff -nan" in str(info.value)
    with pytest.raises(CodeMismatchError):
        assert_codes_equal(actual, expected, E4M3, nan="same_sign")
    assert_codes_equal(actual, expected, E4M3, nan="any_nan_code")  # the explicit, lenient policy


def test_signed_zero_difference_missed_by_numpy() -> None:
    expected = np.array([NEG_ZERO], dtype=np.uint8)  # -0.0 -> 0x80 (sign kept, OCP OFP8)
    actual = np.array([0x00], dtype=np.uint8)
    np.testing.assert_array_equal(qref.decode(actual, E4M3), qref.decode(expected, E4M3))  # -0.0 == 0.0
    # the same on ml_dtypes arrays: numpy compares values, and -0 == +0
    as_fp8 = lambda c: c.view(ml_dtypes.float8_e4m3fn)  # noqa: E731
    np.testing.assert_array_equal(as_fp8(actual), as_fp8(expected))
    with pytest.raises(CodeMismatchError) as info:
        assert_codes_equal(as_fp8(actual), as_fp8(expected), E4M3)  # arrays of the format's dtype are accepted
    assert info.value.report.counts == {"signed_zero": 1}


def test_equal_nans_are_not_a_false_alarm() -> None:
    # float8 arrays under ml_dtypes 0.6: numpy.testing reports identical NaN codes as different (0.7 does not)
    a = np.array([NAN], dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    assert_codes_equal(a, a.copy(), E4M3)


def test_assert_values_equal_compares_bit_patterns() -> None:
    a = np.array([0.0, 1.0], dtype=np.float32)
    b = np.array([-0.0, 1.0], dtype=np.float32)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(CodeMismatchError, match="signed_zero"):
        assert_values_equal(a, b)
    q = np.array([0x7FC00000], dtype=np.uint32).view(np.float32)
    p = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)  # a NaN payload
    np.testing.assert_array_equal(q, p)
    with pytest.raises(CodeMismatchError, match="nan_code"):
        assert_values_equal(p, q)
    assert_values_equal(p, q, nan="any_nan_code")
    bf = np.array([1.0, -0.0], dtype=ml_dtypes.bfloat16)
    assert_values_equal(bf, bf.copy())
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_values_equal(a, a.astype(np.float64))
    with pytest.raises(QrefError, match="floating arrays"):
        assert_values_equal(np.array([1]), np.array([1]))


# ---- the report: every class, from hand-written cases ----------------------------------------------------
CASES = [  # (class, format, input, expected code, actual code), expected codes from the definitions
    ("tie_rule", E4M3, np.float32(1.0625), ONE, ONE_125),          # 1 + 2^-4: midpoint of 1 and 1.125
    ("off_by_one_ulp", E4M3, np.float32(1.07), ONE, ONE_125),      # not a tie
    ("saturate_vs_nan", E4M3, np.float32(480.0), NAN, MAX),        # OCP non-saturating vs saturating
    ("nan_input", E4M3, np.float32(np.nan), NAN, MAX),             # MLX to_fp8: NaN -> +448
    ("sign", E4M3, np.float32(1.0), ONE, 0x80 | ONE),
    ("subnormal_flush", E4M3, np.float32(2.0**-9), 0x01, 0x00),    # min subnormal 2^-9 flushed
    ("double_rounding", E4M3, np.float64(1.0625000000009663), ONE_125, ONE),  # ml_dtypes via float32
    ("nan_vs_number", E4M3, np.float32(20.0), NAN, 0x5A),          # 0x5A = 1.25 * 2^4 = 20
    ("other", E4M3, np.float32(1.0), ONE, 0x50),
    ("saturate_vs_inf", "float8_e5m2", np.float32(1e6), 0x7C, 0x7B),  # +Inf vs max 57344
    ("inf_vs_nan", "float8_e5m2", np.float32(1e6), 0x7C, 0x7E),
    ("nan_code", "float8_e5m2", np.float32(np.nan), 0x7E, 0x7F),
    ("signed_zero", "float8_e5m2", np.float32(-0.0), 0x80, 0x00),
    ("range_edge", "int8", np.float32(200.0), 127, -56),            # saturate vs wrap (200 - 256)
    ("tie_rule", "int8", np.float32(2.5), 2, 3),
]


@pytest.mark.parametrize(("cls", "fmt", "x", "e", "a"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_mismatch_classes(cls: str, fmt: str, x: np.generic, e: int, a: int) -> None:
    f = qref.get_format(fmt)
    dt = np.int8 if isinstance(f, qref.IntFormat) else f.code_dtype
    rep = compare_codes(np.array([a], dtype=dt), np.array([e], dtype=dt), fmt, inputs=np.array([x]))
    assert rep is not None and rep.counts == {cls: 1}
    assert rep.first[0].cls == cls


def test_every_class_is_covered_and_reported() -> None:
    assert {c[0] for c in CASES} == set(MISMATCH_CLASSES)
    x = np.array([1.0625, 480.0, np.nan, 1.0625, 3.0], dtype=np.float32)
    expected = np.array([ONE, NAN, NAN, ONE, 0x44], dtype=np.uint8)
    actual = np.array([ONE_125, MAX, MAX, ONE_125, 0x44], dtype=np.uint8)
    with pytest.raises(CodeMismatchError) as info:
        assert_codes_equal(actual, expected, E4M3, inputs=x, max_report=2)
    rep = info.value.report
    assert (rep.compared, rep.mismatched) == (5, 4)
    assert list(rep.counts.items()) == [("tie_rule", 2), ("nan_input", 1), ("saturate_vs_nan", 1)]
    assert len(rep.first) == 2 and rep.first[0].index == (0,)
    text = str(info.value)
    assert "codes differ at 4 of 5 compared elements (float8_e4m3fn, nan='exact')" in text
    assert "0x3f880000 1.0625" in text and "0x38 1.0" in text and "0x39 1.125" in text
    assert "first 2 of 4:" in text
    # where= skips elements (e.g. those a scheme marks unspecified)
    assert_codes_equal(actual, expected, E4M3, where=np.array([False, False, False, False, True]))


def test_bad_arguments() -> None:
    with pytest.raises(QrefError, match="assert_values_equal"):
        assert_codes_equal(np.array([1.0], np.float32), np.array([1], np.uint8), E4M3)
    with pytest.raises(QrefError, match=r"\[0, 2\^8\)"):
        assert_codes_equal(np.array([256]), np.array([1]), E4M3)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_codes_equal(np.array([1, 2]), np.array([1]), E4M3)
    with pytest.raises(UnknownNameError, match="any_nan_code"):
        assert_codes_equal(np.array([1]), np.array([1]), E4M3, nan="any_nan")
    assert_codes_equal(np.array([-1, 5], np.int8), np.array([255, 5], np.uint8), "int8")  # storage or codes


# ---- assert_conforms against a real library: ml_dtypes 0.6 astype ------------------------------------------
def ml_dtypes_cast(fmt: str):
    dt = getattr(ml_dtypes, fmt)

    def cast(x: np.ndarray) -> np.ndarray:
        return x.astype(dt)

    cast.__name__ = f"ml_dtypes_astype_{fmt}"
    return cast


@pytest.mark.parametrize("fmt", [E4M3, "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn", "float8_e4m3fnuz"])
def test_ml_dtypes_conforms_from_float32(fmt: str) -> None:
    # elements.md: ml_dtypes astype from float32 is round-to-nearest-even with each format's default overflow
    assert_conforms(ml_dtypes_cast(fmt), fmt, max_examples=150, seed=1)


def via_float32_cast(fmt: str):
    """float64 -> float32 -> fmt, as ml_dtypes 0.5-0.6 cast float64 (0.7 rounds once)."""
    dt = getattr(ml_dtypes, fmt)

    def cast(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32).astype(dt)

    cast.__name__ = f"via_float32_astype_{fmt}"
    return cast


def test_double_rounding_from_float64_is_found_and_shrunk() -> None:
    with pytest.raises(ConformanceError) as info:
        assert_conforms(via_float32_cast(E4M3), E4M3, dtype=np.float64, max_examples=300, seed=1,
                        inputs=qs.arrays(E4M3, dtype=np.float64, weights={"near_tie": 1, "tie": 1}))
    err = info.value
    assert err.example.shape == (1,) and err.example.dtype == np.float64
    assert "double_rounding" in err.report
    # the counterexample sits 1 float64 ulp from a tie: rounded to float32 first, it becomes the tie
    x = float(err.example[0])
    x32 = float(np.float32(x))
    assert x32 != x and abs(x32 - x) == np.spacing(abs(x))
    # the ml_dtypes 0.6 record models the double rounding (source="via_float32"); the installed release's record
    # models ml_dtypes itself
    assert_conforms(via_float32_cast(E4M3), E4M3, profile="ml_dtypes@0.6", dtype=np.float64, max_examples=150,
                    seed=1)
    assert_conforms(ml_dtypes_cast(E4M3), E4M3, profile="ml_dtypes", dtype=np.float64, max_examples=150, seed=1)


def test_e8m0_ties_found_and_ml_dtypes_profile_passes() -> None:
    """Inputs drawn from the tie category only: every difference is ml_dtypes' ties-up rule (ml_dtypes PR 398).
    The shrunk example is a tie 1.5 * 2^e between two exponent codes; nearest-even keeps the even one."""
    with pytest.raises(ConformanceError) as info:
        assert_conforms(ml_dtypes_cast("float8_e8m0fnu"), "float8_e8m0fnu", max_examples=300, seed=3,
                        categories=["tie"])
    err = info.value
    assert "tie_rule" in err.report
    (x,) = err.example.tolist()
    m, e = math.frexp(x)  # x = 0.75 * 2^e = 1.5 * 2^(e - 1)
    assert m == 0.75
    lo = e - 1 + 127  # code of 2^(e-1)
    want = lo if lo % 2 == 0 else lo + 1
    assert f"[0x{want:02x}]" in err.reproducer.lower() and f"gives [0x{want ^ 1:02x}]" in err.reproducer.lower()
    assert_conforms(ml_dtypes_cast("float8_e8m0fnu"), "float8_e8m0fnu", profile="ml_dtypes", max_examples=150,
                    seed=3)


def test_reproducer_runs_and_prints_the_reference_codes() -> None:
    with pytest.raises(ConformanceError) as info:
        assert_conforms(ml_dtypes_cast("float8_e8m0fnu"), "float8_e8m0fnu", max_examples=300, seed=3)
    err = info.value
    line = err.reproducer
    assert "\n" not in line
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(line, {})
    want = qref.encode(err.example, "float8_e8m0fnu")  # whatever example the search shrank to
    assert out.getvalue().strip() == str([int(c) for c in want])


def test_conforms_with_scheme_objects_policies_and_errors() -> None:
    sch = qref.scheme(E4M3, profile="saturating")
    with pytest.raises(ConformanceError, match="saturate_vs_nan"):
        assert_conforms(ml_dtypes_cast(E4M3), sch, max_examples=200, seed=0)
    assert_conforms(ml_dtypes_cast(E4M3), E4M3, profile=qref.CastPolicy(), max_examples=50, seed=0)
    with pytest.raises(QrefError, match="profile=None"):
        assert_conforms(ml_dtypes_cast(E4M3), sch, profile="spec")

    def broken(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("kernel not implemented for this shape")

    with pytest.raises(ConformanceError, match="raised RuntimeError: kernel not implemented"):
        assert_conforms(broken, E4M3, max_examples=10, seed=0)

    def as_dict(x: np.ndarray) -> dict[str, np.ndarray]:
        return {"codes": x.astype(ml_dtypes.float8_e4m3fn)}

    assert_conforms(as_dict, E4M3, max_examples=30, seed=0, shape=st.integers(1, 4))


def test_seed_makes_the_search_reproducible() -> None:
    found = []
    for _ in range(2):
        with pytest.raises(ConformanceError) as info:
            assert_conforms(ml_dtypes_cast("float8_e8m0fnu"), "float8_e8m0fnu", max_examples=300, seed=11)
        found.append(info.value.reproducer)
    assert found[0] == found[1]


def test_uniform_scheme_targets_use_scaled_inputs() -> None:
    """Two qref uniform profiles that differ at ties with an odd zero point (uniform notes: ONNX rounds x / s,
    then adds z; StableHLO adds z, then rounds): the kit's scaled inputs find such a tie."""
    try:
        shlo = qref.scheme("int8", scale=0.1, zero_point=3, profile="stablehlo")
        onnx = qref.scheme("int8", scale=0.1, zero_point=3, profile="onnx")
    except QrefError as exc:
        pytest.skip(f"the uniform family or its profiles are not available: {exc}")
    with pytest.raises(ConformanceError) as info:
        assert_conforms(lambda x: onnx.quantize(x).codes, shlo, seed=0, max_examples=300)
    x = info.value.example
    assert x.shape == (1,) and x.dtype == np.float32
    q = Fraction(float(x[0])) / Fraction(float(np.float32(0.1)))  # x / s in float32 is exact here
    assert q.denominator == 2  # an exact tie
    n = math.floor(q)
    even = lambda a, b: a if a % 2 == 0 else b  # noqa: E731
    shlo_code, onnx_code = even(n + 3, n + 4), even(n, n + 1) + 3
    assert shlo_code != onnx_code
    assert f"[{_hex8(shlo_code)}]; <lambda>(x) gives [{_hex8(onnx_code)}]" in info.value.reproducer


def _hex8(v: int) -> str:
    return f"0x{v % 256:02x}"
