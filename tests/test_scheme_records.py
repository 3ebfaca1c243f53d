"""Block and lookup schemes hold their rules as one record (issue 34): few fields, the allowed values checked in
the records with errors that list them, keyword overrides through ``replace(rules, ...)``, the committed specs
unchanged, and the composed block-format records.

Expected values come from the spec pages (block.md §2, lut.md §3.1, OCP MX v1.0 Table 1 / §5.4, NVIDIA's
NVFP4) and from the committed suite's manifest, never from the code under test.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

import qref
from qref.errors import QrefError
from qref.formats import get_format
from qref.formats.block import NAMED_SCHEMES, BlockFormat
from qref.profiles.block import AffineRules, FloatScaleRules, MXRules
from qref.profiles.lookup import LookupSchemeRules
from qref.schemes.base import scheme_from_spec
from qref.schemes.block import BlockScheme
from qref.schemes.lookup import LookupScheme

MANIFEST = Path(__file__).resolve().parents[1] / "conformance" / "v1" / "manifest.json"

# block.md §2: the values of each rule (written from the spec page's table)
BLOCK_VALUES = {
    "scale_rule": ("floor", "ceil", "even", "rceil", "floor_log2_float32", "floor_log2_in_dtype",
                   "rceil_log2_float32", "floor_plus_one", "float32_exponent_field"),
    "zero_block": ("min_scale", "unit_scale", "min_normal_amax"),
    "scale_range": ("clamp", "clamp_nan", "wrap"),
    "byte0_divisor": ("exact", "float32_min_normal", "one", "folded_stand_in"),
    "nonfinite_block": ("nan_scale", "nan255_inf_e128", "nan255_inf254", "zero_divisor", "nan_wraps_inf_divisor",
                        "exponent_bits_wrap"),
    "global_scale_rule": ("exact", "amax_encode_reciprocal", "tensor_scale_clamped", "input_dtype_encode",
                          "prescaled_divide"),
    "amax_nan": ("propagate", "skip"),
    "global_scale_granularity": ("tensor", "row", "tile_64"),
    "compute_dtype": ("exact", "input", "float32", "float16", "bfloat16"),
    "scale_arith": ("divide", "reciprocal"),
    "quotient_arith": ("divide", "reciprocal"),
    "zero_sign": ("keep", "positive", "scaled_zero_positive"),
    "out_of_range": ("encode", "lut_argmin"),
    "element_exponent": ("exact", "floor_log2_in_dtype"),
    "round_arith": ("exact", "in_dtype"),
    "divisor_out_of_range": ("divide", "nan_block"),
    "dequant": ("exact", "in_dtype"),
    "dequant_nan_scale": ("nan", "power"),
    "pad": ("zero", "error"),
}
# lut.md §3.1
LOOKUP_VALUES = {
    "scaling": ("reciprocal", "divide"),
    "partial_scaling": ("same", "divide"),
    "compute_dtype": ("float32", "float16", "bfloat16", "input"),
    "table_dtype": ("float32", "input", "float16"),
    "scale_dtype": ("float32", "float16"),
    "scale_min_rule": ("clamp", "one"),
    "store_guarded": ("all", "partial", "none"),
    "rule": ("nearest", "argmin", "grid65536"),
    "midpoints": ("exact", "float32", "decimal_literal"),
    "tie": ("lower_value", "upper_value", "lower_code", "even_code"),
    "nan": ("max_value", "min_value", "first_index", "unspecified", "error"),
    "zero_block": ("compute", "zero_code", "code0"),
    "rounding": ("deterministic", "stochastic_a", "stochastic_b", "stochastic_c"),
}
BLOCK_RECORDS = (MXRules, FloatScaleRules, AffineRules)


def _owner(field: str) -> type | None:
    for cls in BLOCK_RECORDS:
        if field in {f.name for f in dataclasses.fields(cls)}:
            return cls
    return None


def test_schemes_have_few_fields_and_one_rules_record() -> None:
    # before issue 34: BlockScheme 35 fields, LookupScheme 32 (each rule copied into the scheme)
    block = {f.name: f for f in dataclasses.fields(BlockScheme)}
    lookup = {f.name: f for f in dataclasses.fields(LookupScheme)}
    assert len(block) <= 10 and len(lookup) <= 12, (sorted(block), sorted(lookup))
    assert isinstance(qref.scheme("mxfp4").rules, MXRules)
    assert isinstance(qref.scheme("nvfp4").rules, FloatScaleRules)
    assert isinstance(qref.scheme("mlx_affine").rules, AffineRules)
    assert isinstance(qref.scheme("nf4").rules, LookupSchemeRules)
    rule_names = {f.name for cls in BLOCK_RECORDS for f in dataclasses.fields(cls)}
    assert not rule_names & set(block), "a rule copied into BlockScheme"
    assert not {f.name for f in dataclasses.fields(LookupSchemeRules)} & set(lookup)


@pytest.mark.parametrize("field", sorted(BLOCK_VALUES))
def test_block_rule_errors_list_the_allowed_values(field: str) -> None:
    cls = _owner(field)
    assert cls is not None, field
    with pytest.raises(QrefError) as err:
        cls(**{field: "no_such_value"})
    msg = str(err.value)
    assert f"{cls.__name__}.{field}='no_such_value'" in msg and "block.md §2" in msg
    for v in BLOCK_VALUES[field]:
        assert repr(v) in msg, (field, v, msg)
    for v in BLOCK_VALUES[field]:  # every allowed value is accepted by the record alone (some need other rules)
        try:
            cls(**{field: v})
        except QrefError as e:
            assert "is not allowed" not in str(e), (field, v, e)


@pytest.mark.parametrize("field", sorted(LOOKUP_VALUES))
def test_lookup_rule_errors_list_the_allowed_values(field: str) -> None:
    with pytest.raises(QrefError) as err:
        LookupSchemeRules(**{field: "no_such_value"})
    msg = str(err.value)
    assert f"LookupSchemeRules.{field}='no_such_value'" in msg and "lut.md §3.1" in msg
    for v in LOOKUP_VALUES[field]:
        assert repr(v) in msg, (field, v, msg)


def test_docstrings_list_exactly_the_accepted_values() -> None:
    for field, values in BLOCK_VALUES.items():
        cls = _owner(field)
        declaring = next(c for c in cls.__mro__ if field in inspect.get_annotations(c))
        doc = inspect.getdoc(declaring) or ""
        assert f"{field}" in doc, (declaring.__name__, field)
        for v in values:
            assert v in doc, (declaring.__name__, field, v)
    doc = inspect.getdoc(LookupSchemeRules) or ""
    for field, values in LOOKUP_VALUES.items():
        assert field in doc
        for v in values:
            assert v in doc, (field, v)


def test_constraints_between_rules_name_the_fix() -> None:
    with pytest.raises(QrefError, match="compute_dtype"):
        MXRules(scale_rule="rceil_log2_float32")  # a float32 logarithm under exact arithmetic (block.md §2, C3)
    with pytest.raises(QrefError, match="amax_encode_reciprocal"):
        FloatScaleRules(amax_nan="skip")  # C7
    with pytest.raises(QrefError, match="floor"):
        MXRules(flush_subnormal_blocks=True, scale_rule="ceil")  # C7
    with pytest.raises(QrefError, match="stochastic_bits"):
        AffineRules(rounding="stochastic_a")
    with pytest.raises(QrefError, match="nearest_even"):
        AffineRules(rounding="toward_zero")
    with pytest.raises(QrefError, match="True or False"):
        MXRules(flush_subnormals=1)  # type: ignore[arg-type]
    with pytest.raises(QrefError, match="argmin"):
        LookupSchemeRules(table_dtype="input")  # rule "nearest"
    with pytest.raises(QrefError, match="stochastic_bits"):
        LookupSchemeRules(rounding="stochastic_b")


def test_keyword_overrides_replace_the_profiles_rules() -> None:
    jax = qref.scheme("mxfp8_e4m3", profile="jax")
    s = qref.scheme("mxfp8_e4m3", profile="jax", scale_arith="divide")
    assert s.rules == dataclasses.replace(jax.rules, scale_arith="divide") and s.profile == "jax"
    assert jax.rules.scale_arith == "reciprocal" and s.scale_arith == "divide"  # read through the scheme
    with pytest.raises(QrefError, match=re.escape("MXRules.scale_rule='bogus'")):
        qref.scheme("mxfp4", scale_rule="bogus")
    with pytest.raises(QrefError, match="not a rule of float_scale schemes"):
        qref.scheme("nvfp4", scale_rule="ceil")
    assert qref.scheme("nvfp4", scale_rule="floor").rules == qref.scheme("nvfp4").rules  # the default: accepted
    nf4 = qref.scheme("nf4", profile="bitsandbytes", tie="even_code")
    assert nf4.rules.tie == "even_code" and nf4.rules.scaling == "reciprocal"
    with pytest.raises(QrefError, match=re.escape("LookupSchemeRules.tie='nearest'")):
        qref.scheme("nf4", tie="nearest")
    r = qref.scheme("nf4").replace(tie="lower_code", block_size=32)
    assert r.rules.tie == "lower_code" and r.block_size == 32


def test_named_schemes_are_composed_block_formats() -> None:
    # OCP MX v1.0 Table 1: element formats, E8M0 scales, k = 32; MXINT8 elements are 8-bit integers scaled by
    # 2^-6 (max 127/64); NVFP4: E2M1 elements, E4M3 scales, blocks of 16
    e8m0 = "float8_e8m0fnu"
    want = {"mxfp8_e4m3": ("float8_e4m3fn", e8m0, 32, 0), "mxfp8_e5m2": ("float8_e5m2", e8m0, 32, 0),
            "mxfp6_e3m2": ("float6_e3m2fn", e8m0, 32, 0), "mxfp6_e2m3": ("float6_e2m3fn", e8m0, 32, 0),
            "mxfp4": ("float4_e2m1fn", e8m0, 32, 0), "mxint8": ("int8<-127:127>", e8m0, 32, -6),
            "nvfp4": ("float4_e2m1fn", "float8_e4m3fn", 16, 0)}
    for name, (el, sc, k, ses) in want.items():
        rec = NAMED_SCHEMES[name]
        assert (rec.element, rec.scale, rec.block_size, rec.element_scale_exp) == (el, sc, k, ses)
        f = qref.scheme(name).format
        assert isinstance(f, BlockFormat) and f.name == name
        assert (f.element.name, f.scale.name, f.block_size, f.element_scale_exp) == (el, sc, k, ses)
    assert qref.scheme("mxint8").format.element_max == Fraction(127, 64)
    assert qref.scheme("mxfp8_e4m3").format.element_emax == 8  # 448 = 1.75 * 2^8
    assert qref.scheme("mxfp4").format.element_emax == 2  # 6 = 1.5 * 2^2
    a = qref.scheme("mlx_affine", bits=3, group_size=32).format
    assert (a.element.name, a.scale, a.block_size) == ("uint3", None, 32)
    with pytest.raises(QrefError, match="block_size"):
        BlockFormat("x", get_format("float4_e2m1fn"), 0, None)


def test_committed_specs_rebuild_byte_for_byte() -> None:
    """Every block and lookup scheme spec of the committed suite rebuilds to a scheme whose spec is the same."""
    specs: list[dict] = []

    def walk(o: object) -> None:
        if isinstance(o, dict):
            if o.get("family") in ("block", "lookup") and ("kind" in o or "table" in o):
                specs.append(o)
                return
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads(MANIFEST.read_text())["cases"])
    unique = {json.dumps(s, sort_keys=True): s for s in specs}
    assert len(unique) > 50
    for text, spec in unique.items():
        s = scheme_from_spec(spec)
        assert json.dumps(s.to_spec(), sort_keys=True) == text
