"""Public API behaviour: errors, dtypes, shapes, profiles, fast paths equal the reference path, CLI table."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.core.encode import _top16_table, encode_exact, top16_table_eligible
from qref.core.exact import decompose, from_ieee_bits


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: qref.encode([1.0], "float8_e4m3fm"), "did you mean 'float8_e4m3fn'"),
        (lambda: qref.encode([1.0], "float8_e4m3fn", rounding="nearest"), "did you mean 'nearest_even'"),
        (lambda: qref.encode([1.0], "float8_e4m3fn", overflow="clamp"), "unknown overflow policy"),
        (lambda: qref.encode([1.0], "float4_e2m1fn", overflow="nan"), "has no NaN; use 'saturate'"),
        (lambda: qref.encode([1.0], "float8_e4m3fn", overflow="wrap"), "for integer storage"),
        (lambda: qref.encode([1.0], "int8", overflow="inf"), "integer storage takes"),
        (lambda: qref.encode([1.0], "float8_e4m3fn", nan="zero"), "formats without NaN"),
        (lambda: qref.encode([1.0], "float4_e2m1fn", nan="keep_sign"), "needs a NaN code"),
        (lambda: qref.encode(np.array([True]), "float8_e4m3fn"), "boolean input"),
        (lambda: qref.encode(np.array(["1.0"]), "float8_e4m3fn"), "real numeric array"),
        (lambda: qref.encode(np.array([1 + 2j]), "float8_e4m3fn"), "complex"),
        (lambda: qref.encode([[1.0], [2.0, 3.0]], "float8_e4m3fn"), "cannot read the input|Python objects"),
        (lambda: qref.encode([np.nan], "float8_e4m3fn", nan="error"), "NaN input"),
        (lambda: qref.decode(np.array([256]), "float8_e4m3fn"), r"lie in \[0, 2\^8\)"),
        (lambda: qref.decode(np.array([-1]), "float4_e2m1fn"), r"lie in \[0, 2\^4\)"),
        (lambda: qref.decode(np.array([1.0]), "float8_e4m3fn"), "integer array"),
        (lambda: qref.decode(np.array([1]), "float8_e4m3fn", dtype=np.int32), "cannot decode into"),
        (lambda: qref.encode([1.0], "float8_e4m3fn", profile="ml_dtype"), "did you mean 'ml_dtypes'"),
        (lambda: qref.get_profile("ocp"), "element profile"),
    ],
)
def test_bad_input_raises_clear_errors(call, match: str) -> None:
    with pytest.raises(qref.QrefError, match=match):
        call()


@pytest.mark.parametrize("src", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float4_e2m1fn", "float16", "int8"])
def test_nan_error_raises_only_on_a_nan_input(src: str, fmt: str) -> None:
    """elements.md §2.7: nan="error" raises for a NaN input and encodes everything else (every source and path)."""
    dt = np.dtype(ml_dtypes.bfloat16) if src == "bfloat16" else np.dtype(src)
    x = np.array([1.0, -3.5, 0.0, 1e-3], dt)
    assert (qref.encode(x, fmt, nan="error") == qref.encode(x, fmt)).all()
    with pytest.raises(qref.QrefError, match="NaN input"):
        qref.encode(np.array([1.0, np.nan], dt), fmt, nan="error")


def test_output_dtypes_and_shapes() -> None:
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
    assert qref.encode(x, "float8_e4m3fn").shape == (2, 3, 4)
    assert qref.encode(x, "float8_e4m3fn").dtype == np.uint8
    assert qref.encode(x, "float16").dtype == np.uint16
    assert qref.encode(x, "float32").dtype == np.uint32
    assert qref.encode(x, "binary12p5se").dtype == np.uint16
    assert qref.encode(np.float32(1.5), "float4_e2m1fn").shape == ()
    assert qref.quantize(x, "float8_e5m2").dtype == np.float32
    assert qref.quantize(x.astype(np.float64), "float8_e5m2").dtype == np.float64
    assert qref.quantize(x.astype(ml_dtypes.bfloat16), "float4_e2m1fn").dtype == ml_dtypes.bfloat16
    assert qref.quantize(np.arange(5), "float4_e2m1fn").dtype == np.float64
    assert qref.quantize(x.astype(ml_dtypes.float8_e5m2), "float4_e2m1fn").dtype == ml_dtypes.float8_e5m2
    assert qref.decode(np.array([0x38], np.uint8), "float8_e4m3fn", dtype=ml_dtypes.float8_e5m2)[0] == 1.0
    assert qref.decode(np.array([1, 2], np.uint8).view(ml_dtypes.float4_e2m1fn), "float4_e2m1fn")[1] == 1.0


def test_quantize_equals_decode_of_encode_for_ml_dtypes_sources() -> None:
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 100
    for src in (x, x.astype(np.float16), x.astype(ml_dtypes.bfloat16), x.astype(np.float64)):
        q = qref.quantize(src, "float8_e4m3fn")
        assert q.dtype == src.dtype
        want = qref.decode(qref.encode(src, "float8_e4m3fn"), "float8_e4m3fn", dtype=src.dtype)
        assert np.array_equal(q.view(f"u{q.itemsize}"), want.view(f"u{want.itemsize}"))


def test_decode_of_wide_formats_rounds_to_the_dtype() -> None:
    """binary16p1se spans 2^+-16383: decode to float32 rounds to nearest even with overflow to inf (§4)."""
    fmt = qref.get_format("binary16p1se")
    codes = np.array([fmt.bias + 200, fmt.bias - 200, fmt.bias + 127, 0x7FFE], dtype=np.uint16)
    v = qref.decode(codes, fmt, dtype=np.float32)
    assert v[0] == np.inf and v[1] == 0 and v[2] == np.float32(2.0**127) and v[3] == np.inf


TABLE_FORMATS = ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float6_e3m2fn", "float8_e8m0fnu", "float8_e3m4",
                 "binary8p1se", "int4", "uint7", "int7"]
TABLE_OPTIONS = [{}, {"rounding": "toward_zero"}, {"rounding": "odd", "overflow": "saturate"},
                 {"rounding": "nearest_away", "subnormals": "flush"}, {"rounding": "up"}]


@pytest.mark.parametrize("name", TABLE_FORMATS)
@pytest.mark.parametrize("options", TABLE_OPTIONS)
@pytest.mark.parametrize("src", ["float32", "float64"])
def test_top16_table_path_equals_reference_path(name: str, options: dict, src: str) -> None:
    """The table indexed by (top 16 bits, low bits != 0) equals the reference path: checked on every top-16
    pattern with low parts 0, 1, 100...0 and 11...1, and on random patterns (elements.md §2.10)."""
    fmt = qref.get_format(name)
    if isinstance(fmt, qref.IntFormat) and options.get("subnormals"):
        options = {k: v for k, v in options.items() if k != "subnormals"}
    rp = qref.CastPolicy(**options).resolve(fmt)
    eligible = top16_table_eligible(fmt, rp, src)
    assert eligible == (src == "float32" or (isinstance(fmt, qref.FloatFormat) and fmt.mantissa_bits <= 3))
    if not eligible:
        return
    view, low, ebits, mbits = (np.uint32, 16, 8, 23) if src == "float32" else (np.uint64, 48, 11, 52)
    hi = np.arange(1 << 16, dtype=view) << view(low)
    lows = [view(0), view(1), view(1 << (low - 1)), view((1 << low) - 1)]
    rnd = np.random.default_rng(5).integers(0, np.iinfo(view).max, 1 << 18, dtype=view, endpoint=True)
    bits = np.concatenate([hi | lo for lo in lows] + [rnd])
    ref = encode_exact(from_ieee_bits(bits, ebits, mbits), fmt, rp).astype(fmt.code_dtype)
    fast = qref.encode(bits.view(np.float32 if src == "float32" else np.float64), fmt, **options)
    assert np.array_equal(fast, ref)
    assert _top16_table.cache_info().currsize >= 1


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", "int8"])
def test_16bit_table_path_equals_reference_path(name: str) -> None:
    fmt = qref.get_format(name)
    for src in (np.float16, ml_dtypes.bfloat16):
        x = np.arange(1 << 16, dtype=np.uint16).view(src)
        ref = encode_exact(decompose(x), fmt, qref.CastPolicy(rounding="toward_zero").resolve(fmt))
        assert np.array_equal(qref.encode(x, fmt, rounding="toward_zero"), ref.astype(fmt.code_dtype))


def test_input_subnormals_zero() -> None:
    tiny = np.array([1e-45, -1e-45, 1e-39, 2.0**-126], dtype=np.float32)  # float32 subnormals, then a normal
    assert list(qref.encode(tiny, "float32", input_subnormals="zero")) == [0, 0x80000000, 0, 0x00800000]
    assert list(qref.encode(tiny, "float32")) == list(tiny.view(np.uint32))


def test_profiles_registry() -> None:
    assert set(qref.profiles("element")) >= {"spec", "ml_dtypes@0.6", "ml_dtypes@0.7", "saturating", "mlx"}
    assert qref.get_profile("ml_dtypes").name == "ml_dtypes"  # the installed release's record (profiles.md §2)
    mlx = qref.get_profile("mlx")
    x = np.array([np.nan, -np.nan, np.inf, 500.0], np.float32)
    assert list(qref.encode(x, "float8_e4m3fn", profile=mlx)) == [0x7E, 0xFE, 0x7E, 0x7E]
    # explicit options override the profile
    assert qref.encode(x, "float8_e4m3fn", profile="mlx", nan="keep_sign")[0] == 0x7F


def test_cast_scheme_round_trip() -> None:
    s = qref.scheme("float6_e3m2fn", rounding="toward_zero")
    q = s.quantize(np.array([1.3, -7.9, 100.0]))
    assert list(q.dequantize(np.float64)) == [1.25, -7.0, 28.0]
    assert qref.scheme_from_spec(s.to_spec()) == s


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qref", *args], capture_output=True, text=True, check=False)


def test_cli_table() -> None:
    r = run_cli("table", "float4_e2m1fn")
    assert r.returncode == 0
    lines = [ln.split() for ln in r.stdout.splitlines() if not ln.startswith("#")][1:]
    assert [ln[2] for ln in lines] == ["0.0", "0.5", "1.0", "1.5", "2.0", "3.0", "4.0", "6.0",
                                       "-0.0", "-0.5", "-1.0", "-1.5", "-2.0", "-3.0", "-4.0", "-6.0"]
    assert lines[1][:2] == ["1", "0x1"] and lines[1][3] == "subnormal"
    r = run_cli("table", "f8E5M2", "--csv")
    rows = r.stdout.splitlines()
    assert "124,0x7C,inf,inf" in rows and "125,0x7D,nan,nan" in rows and len(rows) == 2 + 1 + 256
    r = run_cli("table", "float8_e4m3fx")
    assert r.returncode == 2 and "did you mean" in r.stderr
    assert "table" in run_cli("--help").stdout
