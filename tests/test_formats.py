"""Format records: constants from the specs, every code's value from the definition, registry and errors."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from oracle import NAN, code_meaning, spec_of, to_float64

import qref
from qref.formats import FloatFormat

ML_DTYPES_FORMATS = [
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
    "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16",
]
P3109_SAMPLE = ["binary8p4se", "binary8p3sf", "binary8p1se", "binary8p8ue", "binary8p1uf", "binary4p2sf",
                "binary3p1ue", "binary6p3se", "binary12p5sf", "binary16p1se", "binary16p16ue"]
SMALL_FORMATS = [*ML_DTYPES_FORMATS, "float16", *P3109_SAMPLE, "float4_e1m2fn", "float8_e6m1", "float5_e2m2fnuz"]

# (max, min normal, min positive) from the specs: OCP OFP8 v1.0 tables, OCP MX v1.0 §5.3, IEEE 754,
# ml_dtypes/LLVM APFloat docs for the FNUZ and IEEE-style 8-bit formats.
SPEC_CONSTANTS = {
    "float8_e4m3fn": (448, 2**-6, 2**-9),
    "float8_e5m2": (57344, 2**-14, 2**-16),
    "float8_e4m3fnuz": (240, 2**-7, 2**-10),
    "float8_e5m2fnuz": (57344, 2**-15, 2**-17),
    "float8_e4m3b11fnuz": (30, 2**-10, 2**-13),
    "float8_e4m3": (240, 2**-6, 2**-9),
    "float8_e3m4": (15.5, 2**-2, 2**-6),
    "float6_e2m3fn": (7.5, 1, 0.125),
    "float6_e3m2fn": (28, 0.25, 0.0625),
    "float4_e2m1fn": (6, 1, 0.5),
    "float8_e8m0fnu": (2**127, 2**-127, 2**-127),
    "float16": (65504, 2**-14, 2**-24),
    "bfloat16": (Fraction(255, 128) * 2**127, 2**-126, 2**-133),
    "float32": ((2 - Fraction(1, 2**23)) * 2**127, 2**-126, 2**-149),
}


@pytest.mark.parametrize("name", sorted(SPEC_CONSTANTS))
def test_spec_constants(name: str) -> None:
    fmt = qref.get_format(name)
    mx, mn, mp = (Fraction(v) for v in SPEC_CONSTANTS[name])
    assert (fmt.max_value, fmt.min_normal, fmt.min_value) == (mx, mn, mp)


def test_special_codes_per_spec() -> None:
    g = qref.get_format
    # OCP OFP8: E4M3 NaN = S.1111.111, no Inf; E5M2 Inf = S.11111.00, NaN = S.11111.{01,10,11}
    assert (g("float8_e4m3fn").nan_code, g("float8_e4m3fn").inf_code) == (0x7F, None)
    assert (g("float8_e5m2").nan_code, g("float8_e5m2").inf_code, g("float8_e5m2").neg_inf_code) == (0x7E, 0x7C, 0xFC)
    assert g("float8_e4m3fnuz").nan_code == 0x80 and not g("float8_e4m3fnuz").has_negative_zero
    assert g("float8_e8m0fnu").nan_code == 0xFF and g("float8_e8m0fnu").code_dtype is np.uint8
    # P3109: NaN at 2^(K-1) (signed) or 2^K - 1 (unsigned); +Inf at 2^(K-1) - 1 / 2^K - 2, -Inf at 2^K - 1
    se, ue = g("binary8p3se"), g("binary8p3ue")
    assert (se.nan_code, se.inf_code, se.neg_inf_code) == (0x80, 0x7F, 0xFF)
    assert (ue.nan_code, ue.inf_code, ue.neg_inf_code) == (0xFF, 0xFE, None)
    assert (se.bias, ue.bias) == (16, 32)
    assert g("binary8p4sf").max_value == g("float8_e4m3fnuz").max_value


def test_p3109_equivalences() -> None:
    # binary8p4sf == E4M3FNUZ and binary8p3sf == E5M2FNUZ code for code
    for p3109, fnuz in (("binary8p4sf", "float8_e4m3fnuz"), ("binary8p3sf", "float8_e5m2fnuz")):
        a, b = qref.get_format(p3109), qref.get_format(fnuz)
        codes = [c for c in range(256) if c != 0x80]
        assert [a.exact_value(c) for c in codes] == [b.exact_value(c) for c in codes]


@pytest.mark.parametrize("name", SMALL_FORMATS)
def test_every_code_decodes_to_its_defined_value(name: str) -> None:
    fmt = qref.get_format(name)
    s = spec_of(fmt)
    codes = np.arange(1 << fmt.bits, dtype=fmt.code_dtype)
    got64 = qref.decode(codes, fmt, dtype=np.float64).view(np.uint64)
    for c in range(1 << fmt.bits):
        want = code_meaning(s, c)
        if want == NAN:
            exp_bits = np.float64(-math.nan if (c & fmt.sign_mask) else math.nan).view(np.uint64)
            assert fmt.classify(c) == "nan"
        elif isinstance(want, tuple):
            exp_bits = np.float64(math.inf * want[1]).view(np.uint64)
        elif want == "-0":
            exp_bits = np.float64(-0.0).view(np.uint64)
        else:
            assert fmt.exact_value(c) == want, (name, c)
            exp_bits = np.float64(to_float64(want)).view(np.uint64)
        assert got64[c] == exp_bits, (name, hex(c), want)


@pytest.mark.parametrize("name", [n for n in ML_DTYPES_FORMATS if n != "bfloat16"] + ["bfloat16"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_decode_matches_ml_dtypes(name: str, dtype: type) -> None:
    fmt = qref.get_format(name)
    codes = np.arange(1 << fmt.bits, dtype=fmt.code_dtype)
    # ml_dtypes warns on signaling-NaN payloads, and 0.7 on values beyond float16's range (they become +-Inf)
    with np.errstate(invalid="ignore", over="ignore"):
        want = codes.view(getattr(ml_dtypes, name)).astype(dtype)
    got = qref.decode(codes, fmt, dtype=dtype)
    ubits = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
    nan = np.isnan(want.astype(np.float32))
    # NaN: qref gives the canonical quiet NaN with the code's sign (elements.md §4); ml_dtypes keeps bfloat16
    # payloads when widening. Compare NaN-ness and sign there, every other value bit for bit.
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert np.array_equal(np.signbit(got.astype(np.float32)), np.signbit(want.astype(np.float32)))
    assert np.array_equal(got.view(ubits)[~nan], want.view(ubits)[~nan])
    if name != "bfloat16":
        assert np.array_equal(got.view(ubits), want.view(ubits))


@pytest.mark.parametrize("name", SMALL_FORMATS)
def test_every_code_reencodes_to_itself(name: str) -> None:
    fmt = qref.get_format(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    values = qref.decode(codes, fmt, dtype=np.float64)
    finite_in_f64 = np.array([not isinstance(fmt.exact_value(int(c)), float) and
                              abs(fmt.exact_value(int(c))) <= Fraction(np.finfo(np.float64).max) and
                              (fmt.exact_value(int(c)) == 0 or abs(fmt.exact_value(int(c))) >= Fraction(2) ** -1074)
                              for c in codes]) if fmt.emax > 1000 or fmt.qmin < -1074 else None
    back = qref.encode(values, fmt, overflow="saturate_propagate" if fmt.has_inf else None)
    nan = np.array([fmt.classify(int(c)) == "nan" for c in codes])
    sel = ~nan if finite_in_f64 is None else (~nan & finite_in_f64)
    assert np.array_equal(back[sel], codes[sel].astype(back.dtype))
    # all NaN codes map to the canonical NaN of their sign (elements.md §1.1)
    if nan.any():
        neg = (codes[nan] & fmt.sign_mask) != 0
        canon = np.where(neg & fmt.nan_has_sign, fmt.sign_mask | fmt.nan_code, fmt.nan_code)
        assert np.array_equal(back[nan], canon.astype(back.dtype))


def test_registry_names_and_aliases() -> None:
    assert qref.get_format("f8E4M3FN") is qref.get_format("float8_e4m3fn")
    assert qref.get_format("F8E5M2") is qref.get_format("float8_e5m2")  # case-insensitive fallback
    assert qref.get_format("bf16").name == "bfloat16"
    assert qref.get_format("i8").name == "int8" and qref.get_format("ui4").name == "uint4"
    assert qref.get_format(np.float16).name == "float16"
    assert "float8_e4m3fn" in qref.formats and "binary8p4se" in qref.formats
    assert len([n for n in qref.formats if n.startswith("binary")]) == 504  # K = 3..16, all P, s/u, e/f
    n8 = qref.get_format("int8<-127:127>")
    assert (n8.lo, n8.hi, n8.bits, n8.narrowed) == (-127, 127, 8, True)


def test_generic_and_custom_formats() -> None:
    e1m2 = qref.get_format("float4_e1m2fn")  # bias 2^(E-1) - 1 = 0
    assert [float(e1m2.exact_value(c)) for c in range(8)] == [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5]
    e1m2b1 = qref.get_format("float4_e1m2b1fn")  # explicit bias 1 (= P3109 binary4p3sf's values)
    assert [float(e1m2b1.exact_value(c)) for c in range(8)] == [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75]
    e6m1 = qref.get_format("float8_e6m1")  # IEEE-style 8-bit: bias 31, Inf at exponent all ones
    assert e6m1.bias == 31 and e6m1.inf_code == 0x7E
    custom = qref.float_format("my_e3m3", 3, 3, bias=2, nan="all_ones")
    assert custom.max_value == Fraction(14, 8) * 2 ** (7 - 2) and custom.nan_code == 0x3F
    assert qref.decode(qref.encode([100.0], custom, overflow="saturate"), custom)[0] == 56.0
    with pytest.raises(qref.QrefError, match="K=8 but"):
        qref.get_format("float8_e4m2")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"exponent_bits": 0, "mantissa_bits": 3, "bias": 1}, "exponent_bits >= 1"),
        ({"exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "nan": "ieee", "inf": "none"}, "go together"),
        ({"exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "nan": "negative_zero", "inf": "none",
          "signed": False}, "signed"),
        ({"exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "nan": "none", "inf": "none", "subnormals": False},
         "gap"),
        ({"exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "nan": "bogus", "inf": "none"}, "NaN encoding"),
    ],
)
def test_invalid_format_records(kwargs: dict, match: str) -> None:
    with pytest.raises(qref.QrefError, match=match):
        FloatFormat("bad", **kwargs)


def test_unknown_format_suggests_close_matches() -> None:
    with pytest.raises(qref.UnknownNameError, match="did you mean 'float8_e4m3fn'"):
        qref.get_format("float8_e4m3fnn")
    with pytest.raises(qref.QrefError, match="narrows integer storage only"):
        qref.get_format("float8_e4m3fn<-1:1>")
    with pytest.raises(qref.QrefError, match="outside the storage range"):
        qref.get_format("int4<-9:7>")


def test_value_tables_are_read_only() -> None:
    v = qref.get_format("float4_e2m1fn").values
    assert v.dtype == np.float64 and not v.flags.writeable
    assert list(v[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(qref.get_format("int4").values[6:10]) == [6, 7, -8, -7]


def test_value_tables_equal_decode_bit_for_bit() -> None:
    """FloatFormat.values (derived from the record: ldexp of magnitude_parts, specials from the encodings) is
    decode(every code, float64) bit for bit, NaN signs included, for every float format of at most 16 bits."""
    names = {n for n in qref.formats if (f := qref.get_format(n)).bits <= 16 and isinstance(f, qref.FloatFormat)}
    names |= {"float8_e4m3b11fnuz", "float5_e3m2b2fnu", "float12_e9m2fn", "float5_e4m0fnuz"}
    assert len(names) > 400
    for name in sorted(names):
        fmt = qref.get_format(name)
        want = qref.decode(np.arange(1 << fmt.bits, dtype=fmt.code_dtype), fmt, dtype=np.float64)
        assert np.array_equal(fmt.values.view(np.uint64), want.view(np.uint64)), name


def test_ecosystems_match_the_real_type_lists() -> None:
    """Each record's ``ecosystems`` agrees with the systems themselves: ml_dtypes' and numpy's type names, MLIR's
    builtin float spellings, ONNX's TensorProto data types (elements.md §1)."""
    import re

    ml_types = {n for n in dir(ml_dtypes) if re.fullmatch(r"(b?float|u?int)\d+(_e\d+m\d+\w*)?", n)}
    assert {n for n in ml_types if n in qref.formats} == set(qref.formats.defined_by("ml_dtypes"))
    numpy_names = {n for n in qref.formats
                   if n in ("float16", "float32", "float64") or re.fullmatch(r"u?int(8|16|32)", n)}
    assert set(qref.formats.defined_by("numpy")) == numpy_names and all(np.dtype(n).itemsize for n in numpy_names)
    from qref.interop.mlir.types import MLIR_FLOAT_NAMES

    assert set(qref.formats.defined_by("mlir", "float")) == set(MLIR_FLOAT_NAMES.values())
    assert set(qref.formats.defined_by("mlir", "int")) == {n for n in qref.formats if re.fullmatch(r"u?int\d+", n)}
    onnx = pytest.importorskip("onnx", reason="the ONNX check reads onnx.TensorProto")
    spelled = {"float32": "FLOAT", "float64": "DOUBLE", "float4_e2m1fn": "FLOAT4E2M1", "float8_e8m0fnu": "FLOAT8E8M0",
               "float6_e2m3fn": "FLOAT6E2M3", "float6_e3m2fn": "FLOAT6E3M2"}
    onnx_names = set(onnx.TensorProto.DataType.keys())
    tagged = {spelled.get(n, n.replace("_", "").upper()) for n in qref.formats.defined_by("onnx")}
    assert tagged <= onnx_names
    numeric = {n for n in onnx_names if re.fullmatch(r"(U?INT(2|4|8|16|32)|FLOAT\w*|DOUBLE|BFLOAT16)", n)}
    assert numeric == tagged
