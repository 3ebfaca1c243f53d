"""Lookup (quantile) profiles as data (spec: lut.md §3.1, §6; profiles.md).

``LookupRules`` is the typed, frozen record of everything a lookup profile sets: the ``LookupScheme`` geometry,
its ``LookupSchemeRules`` as one field ``scheme`` (lut.md §3.1; the record a ``LookupScheme`` holds as its
``rules``, with the allowed values checked in ``__post_init__``) plus the builder's rules (which table variant,
double quantization, per-scheme rules). Each lookup ``Profile`` carries one as ``profile.rules``. Field values name
mechanisms, never systems. This module imports only qref.errors and the profile base (one-way dependencies:
qref.schemes imports the choice tuples from here, never the reverse).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import QrefError, check_choice
from .base import Profile, check_rule, register_profile

SCHEME_NAMES = ("nf4", "af4", "fp4_bnb", "dynamic8", "lut")
SCALE_MODES = ("absmax", "static")
SCALINGS = ("reciprocal", "divide")
PARTIAL_SCALINGS = ("same", "divide")
COMPUTE_DTYPES = ("float32", "float16", "bfloat16", "input")
TABLE_DTYPES = ("float32", "input", "float16")
SCALE_DTYPES = ("float32", "float16")
SCALE_MIN_RULES = ("clamp", "one")
STORE_GUARDED = ("all", "partial", "none")
ZERO_BLOCKS = ("compute", "zero_code", "code0")
DQ_KINDS = ("lookup", "int8_absmax")
DQ_COMPUTE = ("float32", "input")
RULES = ("nearest", "argmin", "grid65536")
MIDPOINTS = ("exact", "float32", "decimal_literal")
TIES = ("lower_value", "upper_value", "lower_code", "even_code")
NAN_RULES = ("max_value", "min_value", "first_index", "unspecified", "error")
ROUNDINGS = ("deterministic", "stochastic_a", "stochastic_b", "stochastic_c")  # lut.md §3.5
INPUT_DTYPES = ("float64", "float32", "float16", "bfloat16")
ENTRY_DIGITS = (4,)  # NF4 entries written with 4 decimal digits (the only rounded variant shipped)
CHOICES: dict[str, tuple[str, ...]] = {  # the allowed values of every LookupSchemeRules choice (lut.md §3.1)
    "scaling": SCALINGS, "partial_scaling": PARTIAL_SCALINGS, "compute_dtype": COMPUTE_DTYPES,
    "table_dtype": TABLE_DTYPES, "dequant_table_dtype": TABLE_DTYPES, "scale_dtype": SCALE_DTYPES,
    "scale_min_rule": SCALE_MIN_RULES, "store_guarded": STORE_GUARDED, "rule": RULES, "midpoints": MIDPOINTS,
    "tie": TIES, "distance_dtype": ("float32", "input"), "nan": NAN_RULES, "zero_block": ZERO_BLOCKS,
    "rounding": ROUNDINGS,
}


def check_stochastic(rounding: str, bits: object) -> None:
    """lut.md §3.5 (C8): a stochastic rounding needs stochastic_bits = N in 1..62; a deterministic one none."""
    if rounding != "deterministic":
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 62:
            raise QrefError(f"rounding={rounding!r} needs stochastic_bits=N (1..62 random bits per element, "
                            f"lut.md §3.5), got {bits!r}")
    elif bits is not None:
        raise QrefError(f"stochastic_bits is for the stochastic roundings (stochastic_a/b/c), got "
                        f"rounding={rounding!r}")


@dataclass(frozen=True)
class DoubleQuantRule:
    """How a profile quantizes its block scales (lut.md §5.1).

    kind: "lookup" (absmax - mean quantized by the lookup scheme ``inner`` in blocks of ``block_size``) or
    "int8_absmax" (int8 per ``block_size`` scales, factor 256 / (2 max|absmax - mean|)); compute: "float32" or
    "input" (the input's dtype).
    """

    kind: str
    block_size: int
    inner: str | None = None
    compute: str = "float32"

    def __post_init__(self) -> None:
        check_choice("double quantization kind", self.kind, DQ_KINDS)
        check_choice("double quantization compute", self.compute, DQ_COMPUTE)
        if self.kind == "lookup":
            check_choice("inner lookup scheme", self.inner, SCHEME_NAMES)
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise QrefError(f"double quantization block_size must be a positive integer, got {self.block_size!r}")


@dataclass(frozen=True)
class LookupSchemeRules:
    """The rules one lookup scheme follows (lut.md §3.1 gives each field's meaning; the values each field
    accepts are checked here, with the allowed values in the error).

    scaling: reciprocal (s = x * fl(1 / a)) | divide (s = x / a). Default "divide".
    partial_scaling: same | divide (the partial last block divides). Default "same".
    compute_dtype: float32 | float16 | bfloat16 | input (the dtype every operation rounds to). Default "float32".
    table_dtype, dequant_table_dtype: float32 | input | float16 (entries cast to the input dtype or to float16
        for the decision / for dequantization; table_dtype other than float32 needs rule="argmin").
        Default "float32".
    scale_dtype: float32 | float16 (the stored block scales are rounded to it). Default "float32".
    scale_min: None | a number > 0 | "sqrt_tiny" (sqrt of the compute dtype's smallest normal): the small-absmax
        guard threshold. Default None.
    scale_min_rule: clamp | one (what a guarded absmax becomes). Default "clamp".
    store_guarded: all | partial | none (which blocks store the guarded absmax). Default "none".
    clamp: clip s to [-1, 1]. Default False.
    rule: nearest | argmin | grid65536 (the decision, lut.md §3.3). Default "nearest".
    midpoints: exact | float32 | decimal_literal. Default "exact".
    tie: lower_value | upper_value | lower_code | even_code. Default "even_code".
    distance_dtype: float32 | input. Default "float32".
    nan: max_value | min_value | first_index | unspecified | error (the code of NaN scaled values).
        Default "unspecified".
    zero_block: compute | zero_code | code0. Default "zero_code".
    input_dtypes: the accepted input dtypes, a tuple of float64 | float32 | float16 | bfloat16. Default all four.
    numel_multiple: the element count must be a multiple of it (an integer >= 1). Default 1.
    dequant_flush: output dtypes (of float64 | float32 | float16 | bfloat16) into which a float32 result below
        2^-126 converts to a zero of its sign (lut.md §4). Default ().
    bf16_upcast: bfloat16 computes s = fl_bf16(fl32(x * fl32(1 / a))) with scaling="reciprocal". Default False.
    ftz: float32/bfloat16 FTZ/DAZ (XLA:CPU). Default False.
    rounding: deterministic | stochastic_a | stochastic_b | stochastic_c (lut.md §3.5). Default "deterministic".
    stochastic_bits: N in 1..62 with a stochastic rounding, None otherwise. Default None.
    """

    scaling: str = "divide"
    partial_scaling: str = "same"
    compute_dtype: str = "float32"
    table_dtype: str = "float32"
    dequant_table_dtype: str = "float32"
    scale_dtype: str = "float32"
    scale_min: float | str | None = None
    scale_min_rule: str = "clamp"
    store_guarded: str = "none"
    clamp: bool = False
    rule: str = "nearest"
    midpoints: str = "exact"
    tie: str = "even_code"
    distance_dtype: str = "float32"
    nan: str = "unspecified"
    zero_block: str = "zero_code"
    input_dtypes: tuple[str, ...] = INPUT_DTYPES
    numel_multiple: int = 1
    dequant_flush: tuple[str, ...] = ()
    bf16_upcast: bool = False
    ftz: bool = False
    rounding: str = "deterministic"
    stochastic_bits: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name in CHOICES:
                check_rule(self, f.name, CHOICES[f.name], "lut.md §3.1")
            elif f.type in ("bool", bool) and not isinstance(getattr(self, f.name), bool):
                raise QrefError(f"{type(self).__name__}.{f.name} must be True or False, got "
                                f"{getattr(self, f.name)!r}")
        check_stochastic(self.rounding, self.stochastic_bits)
        for name in ("input_dtypes", "dequant_flush"):
            v = getattr(self, name)
            if isinstance(v, str) or not isinstance(v, (tuple, list)):
                raise QrefError(f"{type(self).__name__}.{name} must be a tuple of dtype names (of "
                                f"{', '.join(INPUT_DTYPES)}), got {v!r}")
            object.__setattr__(self, name, tuple(v))
            for d in getattr(self, name):
                if d not in INPUT_DTYPES:
                    raise QrefError(f"{type(self).__name__}.{name} holds {d!r}; allowed values: "
                                    f"{', '.join(INPUT_DTYPES)} (lut.md §3.1)")
        sm = self.scale_min
        if isinstance(sm, str):
            check_rule(self, "scale_min", (None, "sqrt_tiny"), "lut.md §3.1")
        elif sm is not None and not (isinstance(sm, (int, float)) and not isinstance(sm, bool) and sm > 0):
            raise QrefError(f"scale_min must be None, a positive float or 'sqrt_tiny', got {sm!r}")
        if self.table_dtype != "float32" and self.rule != "argmin":
            raise QrefError("table_dtype='input' is only meaningful with rule='argmin' (torchao)")
        n = self.numel_multiple
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise QrefError(f"numel_multiple must be a positive integer, got {n!r}")

    def values(self) -> dict[str, Any]:
        """The record as a dict of its fields."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


SCHEME_FIELDS = tuple(f.name for f in dataclasses.fields(LookupSchemeRules))


@dataclass(frozen=True)
class LookupRules:
    """A lookup profile (lut.md §6): the scheme's geometry (block_size, axis, scale: lut.md §3.1), its
    ``LookupSchemeRules`` as one record (``scheme``: meaning, defaults and allowed values there), and the
    builder's rules:

    entry_digits: None (the table as shipped) or 4: NF4 entries are the 4-decimal-digit literals rounded to
        float32 (cast to the input dtype where ``scheme.table_dtype="input"``).
    double_quant: the double quantization of the block scales (None: the profile has none).
    double_quant_default: whether schemes of this profile double-quantize unless told otherwise.
    numel_multiple_blocks: with double quantization, the element count must be a multiple of
        block_size * numel_multiple_blocks (one scale block of full data blocks).
    per_scheme: ((scheme name, LookupRules), ...): complete rules that replace these for one scheme name.
    """

    block_size: int | None = 64
    axis: int | None = None
    scale: str = "absmax"
    scheme: LookupSchemeRules = LookupSchemeRules()
    entry_digits: int | None = None
    double_quant: DoubleQuantRule | None = None
    double_quant_default: bool = False
    numel_multiple_blocks: int | None = None
    per_scheme: tuple[tuple[str, LookupRules], ...] = ()

    def __post_init__(self) -> None:
        check_rule(self, "scale", SCALE_MODES, "lut.md §3.1")
        if not isinstance(self.scheme, LookupSchemeRules):
            raise QrefError(f"LookupRules.scheme must be a LookupSchemeRules, got {type(self.scheme).__name__}")
        if self.entry_digits is not None:
            check_choice("entry_digits", str(self.entry_digits), tuple(str(d) for d in ENTRY_DIGITS))
        for name, sub in self.per_scheme:
            check_choice("lookup scheme", name, SCHEME_NAMES)
            if not isinstance(sub, LookupRules) or sub.per_scheme:
                raise QrefError(f"per_scheme[{name!r}] must be a LookupRules without per_scheme rules of its own")

    def for_scheme(self, name: str) -> LookupRules:
        """The rules for scheme ``name``: its per_scheme entry, else these."""
        return dict(self.per_scheme).get(name, self)

    def scheme_rules(self) -> LookupSchemeRules:
        """The LookupSchemeRules of these rules (lut.md §3.1): ``scheme``."""
        return self.scheme

    def replace(self, **changes: Any) -> LookupRules:
        """A copy with fields of this record and of its ``scheme`` (LookupSchemeRules fields) changed."""
        return replace_split(self, "scheme", SCHEME_FIELDS, changes)


def replace_split(record: Any, inner: str, inner_fields: tuple[str, ...], changes: dict[str, Any]) -> Any:
    """``dataclasses.replace`` of a record holding a rules record as field ``inner``: the changes named in
    inner_fields go to that record (``replace(record.inner, ...)``), the others to the record itself."""
    mine = {k: v for k, v in changes.items() if k not in inner_fields}
    sub = {k: v for k, v in changes.items() if k in inner_fields}
    if sub:
        mine[inner] = dataclasses.replace(mine.get(inner, getattr(record, inner)), **sub)
    return dataclasses.replace(record, **mine)


def rules_of(profile: Profile) -> LookupRules:
    """The typed rules of a lookup profile (``profile.rules``)."""
    r = profile.rules
    if not isinstance(r, LookupRules):
        raise QrefError(f"lookup profile {profile.key!r} has no LookupRules")
    return r


# ---------------------------------------------------------------------------------------------------------
# profiles (lut.md §6)
# ---------------------------------------------------------------------------------------------------------
_FLOATS = ("float32", "float16", "bfloat16")
_BNB = LookupRules(
    block_size=64, double_quant=DoubleQuantRule("lookup", 256, inner="dynamic8"), scheme=LookupSchemeRules(
        scaling="reciprocal", partial_scaling="divide", scale_min=1e-38, scale_min_rule="clamp",
        store_guarded="partial", clamp=True, rule="nearest", midpoints="float32", tie="lower_value",
        nan="max_value", zero_block="compute", input_dtypes=_FLOATS, dequant_flush=("bfloat16",)))
_BNB_8BIT = _BNB.replace(  # quantize_blockwise: the CPU 65536-point grid quantizer
    rule="grid65536", scaling="reciprocal", partial_scaling="same", scale_min=None, store_guarded="none",
    clamp=True, zero_block="code0", nan="unspecified", block_size=4096, dequant_flush=())
_OPENVINO = LookupSchemeRules(  # ConvertNF4 (the CPU plugin's dequantization table differs: dequant_table_dtype)
    scaling="divide", scale_min=2.0**-23, scale_min_rule="clamp", store_guarded="all", scale_dtype="float16",
    dequant_table_dtype="float16", rule="nearest", midpoints="decimal_literal", tie="lower_value", nan="min_value",
    zero_block="compute", clamp=False, input_dtypes=_FLOATS)
_BNB_EVIDENCE = ("tests/test_lookup_bnb.py: bitsandbytes 0.50.2 + torch 2.13.0 CPU quantize_4bit / "
                 "dequantize_4bit (nf4, fp4; float32/float16/bfloat16; partial blocks; compress_statistics) and "
                 "quantize_blockwise (dynamic8), tie-heavy sampled inputs, 0 mismatches",)

PROFILES: tuple[Profile, ...] = (
    Profile(
        "spec", "lookup", "qref specification (lut.md §3)",
        "s = float32(x / absmax) per block; the nearest entry by exact distance, ties to the even code; an "
        "all-zero block takes the code nearest 0; NaN (NaN inputs, inf/inf) is unspecified.",
        rules=LookupRules(),
        sources=("docs/spec/lut.md",),
        status="spec",
        evidence=("specification; tests/test_lookup_oracle.py holds it to an exact Fraction oracle",),
    ),
    Profile(
        "bitsandbytes", "lookup", "bitsandbytes 0.50.2 CPU quantize_4bit / dequantize_4bit / quantize_blockwise",
        "quantize_4bit: s = clamp(x * float32(1 / max(absmax, 1e-38)), -1, 1) (the partial last block divides "
        "and stores the clamped absmax); code = bucketize(s, float32 midpoints of the sorted table): ties to "
        "the lower value; NaN -> the largest entry's code. double_quant (compress_statistics): absmax - mean "
        "quantized with dynamic8 in blocks of 256. dynamic8 (quantize_blockwise): the CPU 65536-point grid "
        "quantizer, zero blocks -> code 0, block size 4096.",
        rules=dataclasses.replace(_BNB, per_scheme=(("dynamic8", _BNB_8BIT),)),
        sources=("bitsandbytes/backends/default/ops.py quantize_4bit (the CPU kernel)",
                 "csrc/cpu_ops.cpp quantize_cpu_impl, build_quantize_lut, dequantizeBlockwise4bitCpu",
                 "bitsandbytes/functional.py quantize_4bit (compress_statistics)",
                 "checked against bitsandbytes 0.50.2 + torch 2.13.0 CPU"),
        package="bitsandbytes", versions="==0.50.2", status="verified", evidence=_BNB_EVIDENCE,
    ),
    Profile(
        "torchao", "lookup", "torchao 0.18.0 to_nf4 (NF4Tensor)",
        "Table: the 4-digit NF4 literals cast to the input dtype; s = x / absmax in the input dtype; code = "
        "first argmin of |s - t| rounded to the input dtype (NaN, 0/0, inf/inf -> code 0); always double "
        "quantized: int8 per 256 scales, factor 256 / (2 max|absmax - mean|); numel a multiple of "
        "block_size * 256.",
        rules=LookupRules(
            block_size=64, entry_digits=4, double_quant=DoubleQuantRule("int8_absmax", 256, compute="input"),
            double_quant_default=True, numel_multiple_blocks=256, scheme=LookupSchemeRules(
                scaling="divide", compute_dtype="input", table_dtype="input", dequant_table_dtype="input",
                rule="argmin", distance_dtype="input", nan="first_index", zero_block="compute", clamp=False,
                input_dtypes=_FLOATS)),
        sources=("torchao/quantization/quantize_/workflows/nf4/nf4_tensor.py (from_tensor, "
                 "double_quantize_scalers, quantize_tensor_nearest, get_original_weight)",
                 "checked against torchao 0.18.0 + torch 2.13.0 CPU"),
        package="torchao", versions="==0.18.0", status="verified",
        evidence=("tests/test_lookup_torchao.py: torchao 0.18.0 to_nf4 and get_original_weight, float32/float16/"
                  "bfloat16, tie-heavy sampled inputs, 0 mismatches",),
    ),
    Profile(
        "openvino", "lookup", "OpenVINO 2026.4 NF4 weights as NNCF 3.4 compress_weights(mode=NF4, group_size) "
        "writes them (ConvertNF4, src/core/src/type/nf4.cpp), decompressed on the CPU plugin",
        "Groups of block_size along the last axis; a = max(absmax, 2^-23) (float32 eps); code = "
        "ConvertNF4::quantize(fl32(x / a)): strict '>' against its 15 C float literals (the float64 midpoints "
        "as shortest decimals rounded to float32 from the decimal; 4 are 1 ulp from the float32 midpoints): ties "
        "to the lower value; NaN -> code 0, +-Inf -> the end codes; the scale is stored as float16(a) (above "
        "65504: Inf); dequantize = fl32(fl16(entry) * fl16(a)) (the CPU plugin runs the float16 multiply in "
        "float32: exact).",
        rules=LookupRules(block_size=64, axis=-1, scheme=_OPENVINO),
        sources=("openvino src/core/src/type/nf4.cpp ConvertNF4::quantize / dequantize",
                 "nncf/quantization/algorithms/weight_compression (NF4 scale and normalisation)",
                 "checked against openvino 2026.4.1 CPU and nncf 3.4.0 (tests/test_lookup_openvino.py)"),
        package="openvino", versions="==2026.4.*", status="peer_vectors",
        evidence=("tests/test_lookup_openvino.py (live, openvino 2026.4.1): ConvertNF4 through an nf4 Constant "
                  "and a runtime Convert f32 -> nf4 -> f32 on CPU, every float32 within 3000 ulp of the 15 "
                  "decision points, 10^5 uniform values, NaN/+-Inf/subnormals (190,047 values): 0 mismatches (8 "
                  "before the decimal-literal midpoints); the nf4 -> f32 table exact",
                  "tests/test_lookup_openvino.py::test_nncf_peer_vectors: tests/peers/openvino (scripts/peers/"
                  "openvino.py: nncf 3.4.0 + openvino 2026.4.1, float32 weights with group sizes 32/64/128 and "
                  "float16 weights with 64, planted midpoints, zero/tiny/huge groups; 147,456 weights, 2,592 "
                  "scales): codes, float16 scales and CPU-decompressed weights, 0 mismatches (the profile before: "
                  "6,792 codes, 2,033 scales and 133,499 decompressed values differed)"),
    ),
    Profile(
        "openvino_cpu", "lookup", "OpenVINO 2026.4 CPU plugin running Convert(nf4 -> f16) * f16 scale on a runtime "
        "(Parameter) nf4 tensor",
        "As 'openvino' (the same decision rule and float16 scales), but the plugin decompresses an nf4 tensor "
        "that is a graph input with the float32 table: dequantize = fl32(entry_f32 * fl16(a)) (the entry is not "
        "rounded to float16 first, as the folded / NNCF-compressed constant path does).",
        rules=LookupRules(block_size=64, axis=-1,
                          scheme=dataclasses.replace(_OPENVINO, dequant_table_dtype="float32")),
        sources=("openvino src/plugins/intel_cpu (Convert from nf4)",
                 "checked against openvino 2026.4.1 CPU (tests/test_openvino_targets.py)"),
        package="openvino", versions="==2026.4.*", status="verified",
        evidence=("tests/test_openvino_targets.py: every nf4 code at float16 scales, nf4 Parameter input: "
                  "fl32(entry_f32 * s), 0 mismatches; qref run --backend openvino (openvino.nf4.parameter)",),
    ),
    Profile(
        "qwix", "lookup", "qwix 0.1.8 quantize_api(x, 'nf4', tiled_axes={axis: block_size}) on jax 0.10.2 XLA:CPU",
        "scale = absmax per tile, 1 when below sqrt(tiny) of the input dtype (float16: 2^-7, else 2^-63); "
        "s = x * fl(1/scale) in the input dtype (XLA rewrites qwix's divide by the broadcast scale; bfloat16 "
        "computes x * fl32(1/scale) in float32); code = first argmin of |buckets - s| in float32 (NaN -> code "
        "0); dequantize buckets[code] * scale in the input dtype with float32 FTZ/DAZ (XLA:CPU).",
        rules=LookupRules(
            block_size=64, axis=-1, scheme=LookupSchemeRules(
                scaling="reciprocal", bf16_upcast=True, compute_dtype="input", scale_min="sqrt_tiny",
                scale_min_rule="one", store_guarded="all", rule="argmin", distance_dtype="float32",
                nan="first_index", dequant_table_dtype="input", ftz=True, zero_block="compute", clamp=False,
                input_dtypes=_FLOATS)),
        sources=("qwix/_src/core/qarray.py (calibrate, compute_scale_zero_point, quantize_with_scale_zero_point)",
                 "qwix/_src/core/numerics.py (fp_to_nf4, nf4_to_fp)", "XLA AlgebraicSimplifier (divide by broadcast)",
                 "checked against qwix 0.1.8 + jax 0.10.2 CPU"),
        package="qwix", versions="==0.1.8", status="verified",
        evidence=("tests/test_lookup_qwix.py: qwix 0.1.8 + jax 0.10.2 quantize_api nf4 and dequantize, float32/"
                  "float16/bfloat16, tie-heavy sampled inputs, subnormal and huge absmax, 0 mismatches",),
    ),
)
for _p in PROFILES:
    register_profile(_p, replace=True)


__all__ = [
    "CHOICES",
    "COMPUTE_DTYPES",
    "DQ_COMPUTE",
    "DQ_KINDS",
    "ENTRY_DIGITS",
    "INPUT_DTYPES",
    "MIDPOINTS",
    "NAN_RULES",
    "PARTIAL_SCALINGS",
    "PROFILES",
    "ROUNDINGS",
    "RULES",
    "SCALE_DTYPES",
    "SCALE_MIN_RULES",
    "SCALE_MODES",
    "SCALINGS",
    "SCHEME_FIELDS",
    "SCHEME_NAMES",
    "STORE_GUARDED",
    "TABLE_DTYPES",
    "TIES",
    "ZERO_BLOCKS",
    "DoubleQuantRule",
    "LookupRules",
    "LookupSchemeRules",
    "check_stochastic",
    "replace_split",
    "rules_of",
]
