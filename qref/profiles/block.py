"""Block profiles as typed records (spec: block.md §8, profiles.md): one record per real system.

A block profile's ``rules`` is one frozen ``BlockRules``: the rules of each scheme kind the system offers (``mx``:
``MXRules``, ``float_scale``: ``FloatScaleRules``, ``affine``: ``AffineRules``; None: the system has no such
schemes; a ``BlockScheme`` holds one of them as its ``rules``), what the system offers per kind (``Support``:
element formats, block sizes, bits; a combination outside it is an error rather than a guess) and the fields that
depend on the element format (``ElementRules``: MLX's FP4 argmin). Every field value names a mechanism (block.md §2
defines each one); the allowed values are the tuples below (``CHOICES``), checked with the constraints between one
record's fields in the records' ``__post_init__``; the defaults are the ``ocp`` profile's. This module holds data
only: it imports the profile base and the format records, never qref.schemes (the schemes read these records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from ..errors import QrefError
from ..formats.policy import NAN_POLICIES, OVERFLOW_POLICIES, ROUNDING_MODES, STOCHASTIC_MODES, CastPolicy
from .base import Profile, check_rule, register_profile

# the allowed values of every rule field (block.md §2 defines each one); the records check them in __post_init__
SCALE_RULES = ("floor", "ceil", "even", "rceil", "floor_log2_float32", "floor_log2_in_dtype", "rceil_log2_float32",
               "floor_plus_one", "float32_exponent_field", "rceil_log2_via_ln_in_dtype")
ZERO_BLOCKS = ("min_scale", "unit_scale", "min_normal_amax")
SCALE_RANGES = ("clamp", "clamp_nan", "wrap")
NONFINITE_BLOCKS = ("nan_scale", "nan255_inf_e128", "nan255_inf254", "zero_divisor", "nan_wraps_inf_divisor",
                    "exponent_bits_wrap", "nonfinite_divisor")
BYTE0_DIVISORS = ("exact", "float32_min_normal", "one", "folded_stand_in")
GLOBAL_SCALE_RULES = ("exact", "amax_encode_reciprocal", "tensor_scale_clamped", "input_dtype_encode",
                      "prescaled_divide", "input_dtype_clip")
TINY_QUOTIENTS = ("keep", "one_below_sqrt_min_normal")
NAN_BLOCKS_FLOAT32 = ("propagate", "unspecified")
GLOBAL_SCALE_GRANULARITIES = ("tensor", "row", "tile_64")
COMPUTE_DTYPES = ("exact", "input", "float32", "float16", "bfloat16")  # the dtypes of qref.core.arith
CHOICES: dict[str, tuple[str | None, ...]] = {
    "compute_dtype": COMPUTE_DTYPES,
    "dequant": ("exact", "in_dtype"),
    "pad": ("zero", "error"),
    "rounding": ROUNDING_MODES,
    "scale_arith": ("divide", "reciprocal"),
    "quotient_arith": ("divide", "reciprocal"),
    "overflow": OVERFLOW_POLICIES,
    "nan": (None, *NAN_POLICIES),
    "zero_sign": ("keep", "positive", "scaled_zero_positive"),
    "out_of_range": ("encode", "lut_argmin"),
    "element_exponent": ("exact", "floor_log2_in_dtype"),
    "round_arith": ("exact", "in_dtype"),
    "scale_rule": SCALE_RULES,
    "zero_block": ZERO_BLOCKS,
    "scale_range": SCALE_RANGES,
    "nonfinite_block": NONFINITE_BLOCKS,
    "byte0_divisor": BYTE0_DIVISORS,
    "divisor_out_of_range": ("divide", "nan_block"),
    "dequant_nan_scale": ("nan", "power"),
    "global_scale_rule": GLOBAL_SCALE_RULES,
    "amax_nan": ("propagate", "skip"),
    "global_scale_granularity": GLOBAL_SCALE_GRANULARITIES,
    "tiny_quotient": TINY_QUOTIENTS,
    "nan_block_float32": NAN_BLOCKS_FLOAT32,
}
_SECTION = "block.md §2"
_FLOAT_LOG_RULES = ("floor_log2_float32", "floor_log2_in_dtype", "rceil_log2_float32", "float32_exponent_field",
                    "rceil_log2_via_ln_in_dtype")
_FLOAT_NONFINITE = ("zero_divisor", "nan_wraps_inf_divisor", "exponent_bits_wrap", "nonfinite_divisor")
#: the MX rules that read the quotient r = amax / M (block.md §4.2), which tiny_quotient may replace
_QUOTIENT_RULES = ("rceil", "rceil_log2_float32", "float32_exponent_field", "rceil_log2_via_ln_in_dtype")
_STEP_ROUNDINGS = ("nearest_away", "toward_zero", "nearest_even", "stochastic_a", "stochastic_b")


def _values(rec: object) -> dict[str, Any]:
    return {f.name: getattr(rec, f.name) for f in fields(rec)}  # type: ignore[arg-type]


def _flag(rec: object, name: str) -> None:
    if not isinstance(getattr(rec, name), bool):
        raise QrefError(f"{type(rec).__name__}.{name} must be True or False, got {getattr(rec, name)!r}")


@dataclass(frozen=True)
class AffineRules:
    """The rules of affine groups (float scale and bias per group, block.md §6); the fields every block kind has.

    compute_dtype: exact | input | float32 | float16 | bfloat16 (the dtype of quotients and scaled values).
        Default "exact".
    dequant: exact (rounded once) | in_dtype (scale rounded to the output dtype, then the product). Default "exact".
    pad: zero (a short last block is padded with +0) | error. Default "zero".
    min_ndim: the fewest input dimensions accepted (MLX: 2), >= 1. Default 1.
    unspecified_open_cases: mark the cases OCP leaves open (zero, tiny, huge and non-finite blocks) as
        unspecified. Default True.
    rounding: a core rounding mode (qref.formats.policy.ROUNDING_MODES); affine groups take nearest_even or a
        stochastic mode (stochastic_a / b / c, P3109: each scaled value rounded with N random bits, block.md §13).
        Default "nearest_even".
    stochastic_bits: N, random bits per element of a stochastic rounding (1..32); None for the deterministic
        modes. Default None.
    """

    kind: ClassVar[str] = "affine"

    compute_dtype: str = "exact"
    dequant: str = "exact"
    pad: str = "zero"
    min_ndim: int = 1
    unspecified_open_cases: bool = True
    rounding: str = "nearest_even"
    stochastic_bits: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in CHOICES:
                check_rule(self, f.name, CHOICES[f.name], _SECTION)
        for f in fields(self):
            if f.type in ("bool", bool):
                _flag(self, f.name)
        if isinstance(self.min_ndim, bool) or not isinstance(self.min_ndim, int) or self.min_ndim < 1:
            raise QrefError(f"{type(self).__name__}.min_ndim must be an integer >= 1, got {self.min_ndim!r}")
        b = self.stochastic_bits
        if self.stochastic:
            if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 32:
                raise QrefError(f"rounding={self.rounding!r} needs stochastic_bits=N, 1..32 random bits per "
                                f"element (block.md §13), got {b!r}")
        elif b is not None:
            raise QrefError(f"stochastic_bits={b!r} is for the stochastic rounding modes (stochastic_a/b/c, "
                            f"block.md §13); rounding={self.rounding!r} takes none: drop it")
        self._check()

    def _check(self) -> None:
        """The constraints between this kind's fields (block.md §6)."""
        if self.rounding != "nearest_even" and not self.stochastic:
            raise QrefError(f"affine groups round the float32 quotient with rint (nearest_even, block.md §6) or "
                            f"a stochastic mode (§13), not {self.rounding!r}")

    @property
    def stochastic(self) -> bool:
        """True for the stochastic rounding modes (block.md §13)."""
        return self.rounding in STOCHASTIC_MODES

    @property
    def exact(self) -> bool:
        """True when the steps are exact (compute_dtype "exact"), not floating-point arithmetic."""
        return self.compute_dtype == "exact"

    def values(self) -> dict[str, Any]:
        """The record as a dict of its fields."""
        return _values(self)


@dataclass(frozen=True)
class _ScaledElementRules(AffineRules):
    """The fields of the kinds that divide elements by a block scale and encode them (MX, float-scaled).

    flush_subnormals: XLA:CPU FTZ/DAZ in the compute steps. Default False.
    scale_arith: divide (x / X) | reciprocal (x * fl(1/X)). Default "divide".
    quotient_arith (rceil rules): divide (fl(amax / max_elem)) | reciprocal (fl(amax * fl(1/max_elem))).
        Default "divide".
    overflow, nan: the element CastPolicy's (overflow "saturate" = the OCP clamp; nan None = the format's
        default; qref.formats.policy.OVERFLOW_POLICIES, NAN_POLICIES). Defaults "saturate", None.
    zero_sign: keep | positive (every -0 result becomes +0, MLX FP4) | scaled_zero_positive (a scaled value
        that is exactly -0 gives +0, a negative value that rounds to zero keeps -0: sign(x) * floor(|x| + 1/2)).
        Default "keep".
    out_of_range: encode | lut_argmin (scaled values beyond the element max or non-finite take MLX's table
        argmin: the first code at the smallest distance, computed in the scaled values' dtype). Default "encode".
    element_exponent: exact | floor_log2_in_dtype (the scaled-integer element step's exponent is
        floor(fl_T(log2 |y|)), block.md §4.7.1). Default "exact".
    round_arith: exact | in_dtype (the step's |m| + 1/2 and |m| - 1/2 are rounded in the compute dtype,
        block.md §4.7.1). Default "exact".
    tiny_quotient (compute dtype): keep | one_below_sqrt_min_normal (a quotient r = fl_T(amax / M) below
        fl_T(sqrt(min normal of T)), 2^-63 in float32 / bfloat16 and 2^-7 in float16, is replaced by 1 before the
        scale rule reads it; zero blocks included, block.md §4.2, §5.2). Default "keep".
    nan_block_float32 (compute dtype): propagate | unspecified (with a float32 compute dtype, the scale and codes
        of a block holding NaN are unspecified: XLA:CPU's vectorized float32 max reduction propagates or drops
        the NaN depending on the array's shape, block.md §4.5). Default "propagate".
    """

    flush_subnormals: bool = False
    scale_arith: str = "divide"
    quotient_arith: str = "divide"
    overflow: str = "saturate"
    nan: str | None = None
    zero_sign: str = "keep"
    out_of_range: str = "encode"
    element_exponent: str = "exact"
    round_arith: str = "exact"
    tiny_quotient: str = "keep"
    nan_block_float32: str = "propagate"

    def _check(self) -> None:
        if self.exact and (self.tiny_quotient != "keep" or self.nan_block_float32 != "propagate"):
            raise QrefError("tiny_quotient and nan_block_float32 describe floating-point arithmetic: set "
                            "compute_dtype='input', 'float32', ... (block.md §4.2, §4.5)")
        if self.stochastic and self.out_of_range == "lut_argmin":
            raise QrefError("out_of_range='lut_argmin' (MLX's FP4 table argmin) is a nearest rule; stochastic "
                            "rounding takes out_of_range='encode' (block.md §13, C3)")
        if self.exact and (self.element_exponent != "exact" or self.round_arith != "exact"):
            raise QrefError("element_exponent and round_arith describe floating-point arithmetic: set "
                            "compute_dtype='input', 'float32', ... (block.md §4.7.1)")
        if (self.element_exponent != "exact" or self.round_arith != "exact") and self.rounding not in _STEP_ROUNDINGS:
            raise QrefError(f"the scaled-integer element step (element_exponent / round_arith, block.md §4.7.1) "
                            f"rounds {', '.join(_STEP_ROUNDINGS)}, not {self.rounding!r}")


@dataclass(frozen=True)
class MXRules(_ScaledElementRules):
    """The rules of MX schemes (E8M0 scales), block.md §3-4.

    scale_rule: floor | ceil | even | rceil | floor_log2_float32 | floor_log2_in_dtype | rceil_log2_float32 |
        floor_plus_one (floor + 1: a scale twice OCP's) | float32_exponent_field (the exponent field of
        fl32(amax / M): a float32 scale of which only the exponent is read) | rceil_log2_via_ln_in_dtype
        (ceil(fl_T(fl_T(ln r) * fl_K(1 / fl_T(ln 2)))), K = float16 for float16 else float32: jnp.log2 under
        XLA's constant folding, block.md §3.3). Default "floor".
    zero_block: min_scale (byte 0) | unit_scale (byte 127) | min_normal_amax (the rule on 2^-126).
        Default "min_scale".
    scale_range: clamp | clamp_nan (above 127: NaN scale) | wrap (byte = e + 127 mod 256). Default "clamp_nan".
    nonfinite_block: nan_scale | nan255_inf_e128 | nan255_inf254 | zero_divisor | nan_wraps_inf_divisor |
        exponent_bits_wrap | nonfinite_divisor (NaN / Inf blocks: byte 255, elements divided by NaN / +Inf)
        (block.md §4.5). Default "nan_scale".
    byte0_divisor: exact (2^-127) | float32_min_normal (2^-126) | one (1) | folded_stand_in (2^-15 in float16,
        else 2^-127). Default "exact".
    flush_subnormal_blocks: blocks whose floor(log2 amax) is below -126 become zeros of their elements' signs
        before scaling (block.md §4.6). Default False.
    amax_floor (compute dtype): amax = max(amax, fl_C(amax_floor)) before the rule, a finite number >= 0 (0:
        none). Default 0.
    divisor_out_of_range: divide (x / 0 and x / Inf as IEEE) | nan_block (a divisor 2^e_div that is 0 or Inf in
        the compute dtype makes the block NaN: byte 255). Default "divide".
    dequant_nan_scale: nan | power (byte 255 dequantizes as 2^128, MLX). Default "nan".
    """

    kind: ClassVar[str] = "mx"

    scale_rule: str = "floor"
    zero_block: str = "min_scale"
    scale_range: str = "clamp_nan"
    nonfinite_block: str = "nan_scale"
    byte0_divisor: str = "exact"
    flush_subnormal_blocks: bool = False
    amax_floor: float = 0.0
    divisor_out_of_range: str = "divide"
    dequant_nan_scale: str = "nan"

    def _check(self) -> None:
        super()._check()
        if self.exact and (self.nonfinite_block in _FLOAT_NONFINITE or self.flush_subnormals):
            raise QrefError(f"nonfinite_block={self.nonfinite_block!r} and flush_subnormals describe "
                            "floating-point arithmetic; they need compute_dtype 'input', 'float32', ...")
        if self.exact and self.scale_rule in _FLOAT_LOG_RULES:
            raise QrefError(f"scale_rule={self.scale_rule!r} takes a floating-point logarithm: set "
                            "compute_dtype='float32' or 'input'")
        a = self.amax_floor
        if not (isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) and a >= 0):
            raise QrefError(f"amax_floor must be a finite number >= 0, got {a!r}")
        if a and self.exact:
            raise QrefError("amax_floor (block.md §4.2: amax = max(amax, fl_C(amax_floor))) is an MX rule in a "
                            "compute dtype: compute_dtype 'float32' or 'input'")
        if self.flush_subnormal_blocks and self.scale_rule not in ("floor", "floor_log2_float32",
                                                                   "floor_log2_in_dtype"):
            raise QrefError("flush_subnormal_blocks is an MX rule that reads the block's floor(log2 amax): it takes "
                            "scale_rule 'floor', 'floor_log2_float32' or 'floor_log2_in_dtype' (block.md §4.6)")
        if self.tiny_quotient != "keep" and self.scale_rule not in _QUOTIENT_RULES:
            raise QrefError(f"tiny_quotient={self.tiny_quotient!r} replaces the quotient r = amax / M that the rceil "
                            f"rules read ({', '.join(_QUOTIENT_RULES)}), not scale_rule={self.scale_rule!r} "
                            "(block.md §4.2)")
        if self.exact and self.divisor_out_of_range != "divide":
            raise QrefError("divisor_out_of_range describes floating-point arithmetic: set compute_dtype='input', "
                            "'float32', ... (block.md §4.6)")


@dataclass(frozen=True)
class FloatScaleRules(_ScaledElementRules):
    """The rules of float-scaled schemes (NVFP4: E4M3 block scales, optional global scale), block.md §5.

    global_scale_rule: exact | amax_encode_reciprocal | tensor_scale_clamped | input_dtype_encode |
        prescaled_divide | input_dtype_clip (no global scale: s = scale_fmt(clip(r, -S, S)) of r = fl_T(amax / M)
        per quotient_arith, NaN kept; y = fl_T(x / s) per scale_arith) (block.md §5.2). Default "exact".
    amax_nan (amax_encode_reciprocal only): propagate (a NaN input makes the block and tensor amax NaN:
        torch.amax) | skip (NaN skipped: PTX max). Default "propagate".
    global_scale_granularity (amax_encode_reciprocal only): tensor | row | tile_64 (the outer amax per tensor,
        per row or per 1 x 64 tile, block.md §5.2.1). Default "tensor".
    """

    kind: ClassVar[str] = "float_scale"

    global_scale_rule: str = "exact"
    amax_nan: str = "propagate"
    global_scale_granularity: str = "tensor"

    def _check(self) -> None:
        super()._check()
        if self.global_scale_granularity != "tensor" and self.global_scale_rule != "amax_encode_reciprocal":
            raise QrefError(f"global_scale_granularity={self.global_scale_granularity!r} (block.md §5.2.1) takes the "
                            "outer amax per row or per 1 x 64 tile: global_scale_rule 'amax_encode_reciprocal'")
        if self.tiny_quotient != "keep" and self.global_scale_rule != "input_dtype_clip":
            raise QrefError(f"tiny_quotient={self.tiny_quotient!r} is modelled for global_scale_rule="
                            "'input_dtype_clip' (block.md §5.2)")
        if self.global_scale_rule == "input_dtype_clip" and self.exact:
            raise QrefError("global_scale_rule='input_dtype_clip' computes in the input dtype: set "
                            "compute_dtype='input' (block.md §5.2)")
        if self.amax_nan == "skip" and self.global_scale_rule != "amax_encode_reciprocal":
            raise QrefError("amax_nan='skip' is modelled for global_scale_rule='amax_encode_reciprocal' only "
                            "(block.md §5.2); the other rules take the NaN-propagating maximum")


ScaledRules = MXRules | FloatScaleRules  # the kinds that divide elements by a block scale and encode them
KindRules = MXRules | FloatScaleRules | AffineRules
RULES_OF_KIND: dict[str, type[AffineRules]] = {"mx": MXRules, "float_scale": FloatScaleRules, "affine": AffineRules}
KINDS = tuple(RULES_OF_KIND)


@dataclass(frozen=True)
class Support:
    """What a system offers for one scheme kind; None: no restriction (block.md §2, C1)."""

    elements: tuple[str, ...] | None = None
    block_sizes: tuple[int, ...] | None = None
    bits: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ElementRules:
    """Fields that a system sets for one element format, over its kind's rules (None: not overridden)."""

    element: str
    rounding: str | None = None
    zero_sign: str | None = None
    out_of_range: str | None = None

    def values(self) -> dict[str, Any]:
        return {k: v for k, v in _values(self).items() if k != "element" and v is not None}


@dataclass(frozen=True)
class BlockRules:
    """Everything one block profile says (``profile.rules``)."""

    mx: MXRules | None = None
    float_scale: FloatScaleRules | None = None
    affine: AffineRules | None = None
    mx_support: Support = Support()
    float_scale_support: Support = Support()
    affine_support: Support = Support()
    element_overrides: tuple[ElementRules, ...] = ()

    def kind(self, kind: str) -> MXRules | FloatScaleRules | AffineRules | None:
        """The rules of scheme kind ``kind`` ("mx", "float_scale", "affine"), None where the system has none."""
        return {"mx": self.mx, "float_scale": self.float_scale, "affine": self.affine}[kind]

    def support(self, kind: str) -> Support:
        return {"mx": self.mx_support, "float_scale": self.float_scale_support, "affine": self.affine_support}[kind]

    def for_element(self, element: str) -> dict[str, Any]:
        """The element-dependent field values for element format ``element`` (empty when none)."""
        out: dict[str, Any] = {}
        for r in self.element_overrides:
            if r.element == element:
                out.update(r.values())
        return out


def rules_of(profile: Profile) -> BlockRules:
    """The typed rules of a block profile."""
    r = profile.rules
    if not isinstance(r, BlockRules):
        raise TypeError(f"block profile {profile.key!r} has no BlockRules")
    return r


_FP_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn")
_SYSTEM = {"unspecified_open_cases": False}
_NVFP4 = Support(elements=("float4_e2m1fn",), block_sizes=(16,))

# torchao's FLOOR and RCEIL share the NVFP4 rules
_TORCHAO_NVFP4 = FloatScaleRules(global_scale_rule="tensor_scale_clamped", compute_dtype="float32", pad="error",
                                 unspecified_open_cases=False)
_TE_NVFP4 = FloatScaleRules(global_scale_rule="amax_encode_reciprocal", amax_nan="skip", compute_dtype="float32",
                            pad="error", unspecified_open_cases=False)
#: torchao 0.18 mx_formats (to_mx FLOOR, nvfp4_quantize); its RCEIL mode replaces the MX scale rule
_TORCHAO = BlockRules(
    mx=MXRules(**_SYSTEM, scale_range="clamp", nonfinite_block="nan255_inf_e128", byte0_divisor="float32_min_normal",
               compute_dtype="float32", dequant="in_dtype", pad="error"),
    float_scale=_TORCHAO_NVFP4, mx_support=Support(elements=_FP_ELEMENTS), float_scale_support=_NVFP4)

_TE_EVIDENCE_NOTE = ("the CUDA kernels (core_nvfp4.cuh, the MXFP8 cast) need a Blackwell GPU and were not run; "
                     "TransformerEngine's pure-PyTorch references ran on CPU (tests/test_block_peers.py)")

PROFILES = (
    Profile(
        "ocp", "block", "OCP Microscaling Formats (MX) v1.0",
        "The spec's conversion (§6.3): X = 2^(floor(log2 amax) - emax_elem), P_i = RNE(V_i / X) with normal "
        "overflow clamped to the element max. Cases the spec leaves open are marked unspecified; qref's choice "
        "for them: zero blocks X = 2^-127, exponents below -127 clamp, above 127 and NaN/Inf blocks give a NaN "
        "scale. Float scale formats (float_scale): qref's exact single-level rule, s = RNE(amax / max_elem).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(mx=MXRules(), float_scale=FloatScaleRules()),
        sources=("OCP Microscaling Formats (MX) v1.0 §5.3-5.4, §6.3", "docs/spec/block.md §4"),
        status="spec",
        evidence=("tests/test_block.py: an exact Fraction oracle written in the test, all six MX names x float32, "
                  "float16, bfloat16, float64 inputs x 13 distributions: 0 mismatches",),
    ),
    Profile(
        "microxcaling", "block",
        "microsoft/microxcaling (the MX spec authors' PyTorch emulator) quantize_mx_op, commit 7bc4195 "
        "(2024-08-19), torch 2.13 CPU",
        "Computes in the input dtype T (float32, bfloat16, float16; 16-bit operations are float32 ones rounded "
        "to T): shared_exp = floor(fl_T(log2(amax + 2^-126 [amax == 0]))) - emax, above 127 NaN, below -127 "
        "clamped; y = x / fl_T(2^shared_exp) (a divisor that is 0 or Inf in T makes the block NaN); the element "
        "step is its scaled-integer rounding in T: p = max(floor(fl_T(log2 |y|)), emin), m = y * 2^(mbits - p), "
        "sign(m) * floor(fl_T(|m| + 1/2)) for 'nearest' (ties away; 'floor' truncates, 'even' subtracts the "
        "fl_T(|m| - 1/2)-is-even mask), clamped to +-max_norm (MXINT8 +-127/64); NaN/Inf make the block NaN; "
        "short blocks padded with zeros. Options: rounding='toward_zero' ('floor') or 'nearest_even' ('even'), "
        "rounding='stochastic_a' with stochastic_bits=N ('dither': floor(fl_T(|m| + u)) with torch.rand_like's "
        "u = R 2^-N, N = 24 / 8 / 11 for float32 / bfloat16 / float16; block.md §13.3), "
        "flush_subnormal_blocks=True (mx_flush_fp32_subnorms). Not expressible: MXINT8 elements that round to "
        "-0 (int8 codes have no -0; qref gives +0).",
        CastPolicy(rounding="nearest_away", overflow="saturate"),
        rules=BlockRules(mx=MXRules(
            **_SYSTEM, scale_rule="floor_log2_in_dtype", zero_block="min_normal_amax", rounding="nearest_away",
            compute_dtype="input", zero_sign="scaled_zero_positive", element_exponent="floor_log2_in_dtype",
            round_arith="in_dtype", divisor_out_of_range="nan_block")),
        sources=("github.com/microsoft/microxcaling mx/mx_ops.py _shared_exponents, _quantize_mx, quantize_mx_op",
                 "mx/elemwise_ops.py _round_mantissa, _quantize_elemwise_core", "mx/formats.py",
                 "scripts/peers/microxcaling.py (runs it)"),
        status="peer_vectors",
        evidence=("tests/test_block_peers.py against tests/peers/microxcaling (quantize_mx_op at commit 7bc41952, "
                  "torch 2.13.0 CPU): 6 MX formats x round nearest/floor/even x mx_flush_fp32_subnorms off/on x "
                  "float32/bfloat16/float16 x axis -1, axis 0 and a padded length, 2 260 224 output values, bit "
                  "for bit; the only differences are MXINT8 -0 outputs (not expressible), asserted exactly",
                  "tests/test_block_peers.py against tests/peers/microxcaling_dither (round='dither' with "
                  "torch.rand_like replaced by R 2^-N, scripts/peers/microxcaling_dither.py): 6 MX formats x "
                  "flush off/on x float32/bfloat16/float16, 633 600 values as rounding='stochastic_a', bit for bit "
                  "but the MXINT8 -0 outputs",
                  "scripts/peers/microxcaling.py --full (every block scale, not committed): 12 061 440 values, "
                  "156 329 differences, all MXINT8 -0 (before this record: 173 915 differences on 4 020 480 "
                  "float32/bfloat16 values of the flush-off configurations)"),
    ),
    Profile(
        "torchao_floor", "block", "torchao 0.18 mx_formats to_mx(scaling_mode=FLOOR); nvfp4_quantize",
        "byte = clamp(E(amax) - emax, -127, 128) + 127 on float32 bits (NaN amax: 255; Inf: E = 128); elements "
        "x / max(2^(byte-127), 2^-126) in float32, clamp +-max, RNE. NVFP4: s = e4m3(clamp(fl32(amax / 6) "
        "[/ pts], 2^-6, 448)), x * fl32([1/pts] / s), RNE.",
        CastPolicy(overflow="saturate"),
        rules=_TORCHAO,
        sources=("torchao/prototype/mx_formats/mx_tensor.py to_mx, get_fp_scale, to_dtype",
                 "torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize", "torchao/prototype/custom_fp_utils.py"),
        package="torchao", versions=">=0.18,<0.19", status="verified",
        evidence=("tests/test_block_systems.py against the installed torchao 0.18.0 (torch 2.13 CPU): to_mx FLOOR "
                  "(and CEIL, EVEN by override) x five MX float elements, to_dtype, nvfp4_quantize single level, "
                  "pts 0.37, pts from the amax, over the 13 block distributions: 0 mismatches",),
    ),
    Profile(
        "torchao_rceil", "block", "torchao 0.18 mx_formats to_mx(scaling_mode=RCEIL), eager fallback",
        "byte = clamp(ceil(float32 log2(fl32(amax / max))), -127, 127) + 127 (NaN: 255, Inf: 254); elements "
        "x * 2^(127-byte) (byte 0: x * 1, byte 254 from Inf: x * 2^-127), clamp +-max, RNE. NVFP4 as "
        "torchao_floor.",
        CastPolicy(overflow="saturate"),
        rules=replace(_TORCHAO, mx=replace(_TORCHAO.mx, scale_rule="rceil_log2_float32",
                                           nonfinite_block="nan255_inf254", byte0_divisor="one",
                                           scale_arith="reciprocal")),
        sources=("torchao/prototype/mx_formats/mx_tensor.py _to_mx_rceil",
                 "checked against torch 2.13 CPU: torch.log2 float32 is correctly rounded"),
        package="torchao", versions=">=0.18,<0.19", status="verified",
        evidence=("tests/test_block_systems.py against the installed torchao 0.18.0 (torch 2.13 CPU): to_mx RCEIL "
                  "x five MX float elements, to_dtype, over the 13 block distributions: 0 mismatches",),
    ),
    Profile(
        "mlx", "block", "MLX 0.32.4 mx.quantize / mx.dequantize on CPU",
        "mxfp4/mxfp8: r = fl_T(amax / max) in the input dtype T, e = ceil(log2 r) exactly (r = 0: e = 0), "
        "byte = e + 127 mod 256 (no clamp), elements fl_T(x / 2^e); NaN/Inf blocks: byte 128 (float32) or 0 "
        "(float16/bfloat16) and x / 0. FP8 elements: to_fp8 (RNE, saturating, NaN -> +-448); FP4 elements: "
        "first-index argmin over the E2M1 table (ties to the smaller magnitude, -0 -> +0, non-finite -> 0). "
        "nvfp4: s = to_fp8(fl_T(amax / 6) [* fl32(2688 / g)]). affine: the C++ float32 kernel.",
        CastPolicy(overflow="saturate", nan="max"),
        rules=BlockRules(
            mx=MXRules(**_SYSTEM, scale_rule="rceil", zero_block="unit_scale", scale_range="wrap",
                       nonfinite_block="zero_divisor", compute_dtype="input", nan="max", dequant="in_dtype",
                       dequant_nan_scale="power", pad="error", min_ndim=2),
            float_scale=FloatScaleRules(global_scale_rule="input_dtype_encode", compute_dtype="input",
                                        pad="error", min_ndim=2, unspecified_open_cases=False),
            affine=AffineRules(compute_dtype="float32", dequant="in_dtype", pad="error", min_ndim=2,
                               unspecified_open_cases=False),
            mx_support=Support(elements=("float8_e4m3fn", "float4_e2m1fn"), block_sizes=(32,)),
            float_scale_support=_NVFP4,
            affine_support=Support(block_sizes=(32, 64, 128), bits=(1, 2, 3, 4, 5, 6, 8)),
            element_overrides=(ElementRules("float4_e2m1fn", rounding="nearest_toward_zero", zero_sign="positive",
                                            out_of_range="lut_argmin"),)),
        sources=("mlx 0.32.4 (pip mlx[cpu]) mx.quantize / mx.dequantize, checked bit for bit (tests/test_block_mlx.py)",
                 "mlx/backend/cpu/quantized.cpp (affine kernel)", "mlx/ops.cpp fp_quantize / fp_dequantize"),
        package="mlx", versions=">=0.32,<0.33", status="verified",
        evidence=("tests/test_block_mlx.py against the installed mlx 0.32.4 CPU: mxfp4, mxfp8, nvfp4 (no global "
                  "scale, the tensor amax, 0.37), affine bits 1-8 x groups 32/64/128 on float32, float16, "
                  "bfloat16 over 13 distributions (packed words, scales, biases, dequantized values): about 8 "
                  "million codes, 0 mismatches",),
    ),
    Profile(
        "jax", "block", "JAX 0.10.2 jax._src.cudnn.scaled_matmul_stablehlo.quantize on XLA:CPU, under jit",
        "mxfp8: s = fl_T(amax / 448), byte = ceil on the float32 bits of s saturating at 254 (NaN -> 0, Inf -> "
        "255), elements x * 2^(127-byte) (jit's reciprocal; byte 0: 2^127, or 2^15 for float16), clip, RNE. "
        "nvfp4: x / gs, s = e4m3(clip(amax / 6, 0, 448)), x * fl32(1 / s). XLA:CPU flushes float32 subnormals "
        "(FTZ/DAZ). scale_arith='divide' gives the eager (op-by-op) results. float64 inputs are rounded to float32 "
        "first, as JAX's default (jax_enable_x64 off) does on entry; under jax_enable_x64 JAX computes in float64 "
        "(not modelled).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(
            mx=MXRules(**_SYSTEM, scale_rule="rceil", scale_range="clamp", nonfinite_block="nan_wraps_inf_divisor",
                       byte0_divisor="folded_stand_in", compute_dtype="input", flush_subnormals=True,
                       scale_arith="reciprocal", quotient_arith="reciprocal", pad="error"),
            float_scale=FloatScaleRules(global_scale_rule="prescaled_divide", compute_dtype="input",
                                        flush_subnormals=True, scale_arith="reciprocal", quotient_arith="reciprocal",
                                        pad="error", unspecified_open_cases=False),
            mx_support=Support(elements=("float8_e4m3fn",), block_sizes=(32,)), float_scale_support=_NVFP4),
        sources=("jax/_src/cudnn/scaled_matmul_stablehlo.py quantize, cast_to_e8m0_with_rounding_up, "
                 "e8m0_to_dtype", "jax.nn.get_scaled_dot_general_config", "checked on jax 0.10.2 CPU"),
        package="jax", versions=">=0.10.2,<0.11", status="verified",
        evidence=("tests/test_block_systems.py against the installed jax 0.10.2 (XLA:CPU, jit): mxfp8, nvfp4 with "
                  "no global scale, 0.37 and 0, on float32, float16, bfloat16, float64 over the 13 block "
                  "distributions: 0 mismatches outside the unspecified blocks",),
    ),
    Profile(
        "qwix", "block", "qwix 0.1.8 qarray.quantize_api(x, 'mxfp8' | 'mxfp4' | 'nvfp4') / dequantize (jax 0.10.2, "
        "XLA:CPU, under jax.jit)",
        "In the input dtype T (float64 rounded to float32 first, JAX's default): r = fl_T(amax * fl_K(1/M)) "
        "(K = float16 for float16, float32 otherwise: XLA folds the division by the constant); r < "
        "fl_T(sqrt(min normal of T)) (2^-63; float16 2^-7) -> r = 1, so zero and tiny blocks get scale 1. "
        "mxfp8/mxfp4: e = ceil(fl_T(fl_T(ln r) * fl_K(1 / fl_T(ln 2)))) (jnp.log2 folded), scale 2^e "
        "(byte e + 127), elements fl_T(x * 2^-e) clipped to +-M and cast RNE; NaN blocks: scale NaN (byte 255), "
        "every element NaN; Inf blocks: scale Inf (byte 255), elements x * 0. nvfp4 (no global scale): s = "
        "e4m3(clip(r, -448, 448)) (NaN stays NaN; an Inf block gets 448), elements fl_T(x * fl_K(1 / s)). "
        "float32: XLA:CPU FTZ/DAZ, and the max reduction may drop a NaN by shape (NaN blocks unspecified). "
        "dequantize: fl_T(P * s) in the output dtype with the scale held in it (FTZ/DAZ: byte 0 reads as 0 in "
        "float32 / bfloat16; a float16 scale above 65504 is Inf).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(
            mx=MXRules(**_SYSTEM, scale_rule="rceil_log2_via_ln_in_dtype", tiny_quotient="one_below_sqrt_min_normal",
                       scale_range="clamp", nonfinite_block="nonfinite_divisor", nan_block_float32="unspecified",
                       compute_dtype="input", flush_subnormals=True, scale_arith="reciprocal",
                       quotient_arith="reciprocal", dequant="in_dtype", pad="error"),
            float_scale=FloatScaleRules(global_scale_rule="input_dtype_clip", tiny_quotient="one_below_sqrt_min_normal",
                                        nan_block_float32="unspecified", compute_dtype="input",
                                        flush_subnormals=True, scale_arith="reciprocal", quotient_arith="reciprocal",
                                        pad="error", unspecified_open_cases=False),
            mx_support=Support(elements=("float8_e4m3fn", "float4_e2m1fn"), block_sizes=(32,)),
            float_scale_support=_NVFP4),
        sources=("qwix 0.1.8 qwix/_src/core/qarray.py calibrate, compute_scale_zero_point, "
                 "quantize_with_scale_zero_point, dequantize", "qwix/_src/core/numerics.py convert_to, "
                 "get_symmetric_bound", "the optimized HLO of jax.jit(quantize_api) on jax 0.10.2 CPU (the folded "
                 "reciprocal constants, the float32 arithmetic of bfloat16)"),
        package="qwix", versions="==0.1.8", status="verified",
        evidence=("tests/test_block_qwix.py against the installed qwix 0.1.8 (jax 0.10.2, XLA:CPU, jit): every "
                  "positive float16 / bfloat16 amax and float32 amax within 6000 ulps of each power of two of the "
                  "scale range, random blocks with ties, zeros, tiny and huge amax, Inf and NaN, float32 / "
                  "bfloat16 / float16, jitted and eager: 12.7 + 11.0 million codes and their scale bytes, 0 "
                  "mismatches outside the unspecified NaN blocks; dequantize on every (scale byte, code) pair into "
                  "float32 / float16 / bfloat16: 0 mismatches",
                  "qref run --backend qwix --target 'qwix.mx*' over conformance/v1: 99 tasks pass, 8 xfail (a NaN "
                  "code times the NaN scale in dequantize: which NaN XLA:CPU returns, unspecified by IEEE 754)",),
    ),
    Profile(
        "nvidia", "block", "NVIDIA NVFP4 two-level scaling (TransformerEngine) and MXFP8 RCEIL (cuBLAS)",
        "NVFP4: S_enc = 2688 / g (g = tensor amax), s = e4m3(fl32(amax * fl32(S_enc / 6))), elements "
        "x * fl32(1 / (s / S_enc)) in float32, RNE saturating; dequantize e2m1 * (s * g / 2688). MX: "
        "byte = cvt.rp.satfinite.ue8m0(fl32(amax * fl32(1 / max))) (exact ceil), elements x * exp2f_rcp(byte) = "
        "x * 2^(127-byte) (byte 0: x * 2^127; byte 254: x * 2^-127).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(
            mx=MXRules(**_SYSTEM, scale_rule="rceil", scale_range="clamp", nonfinite_block="nan255_inf254",
                       compute_dtype="float32", scale_arith="reciprocal", quotient_arith="reciprocal", pad="error"),
            float_scale=_TE_NVFP4, mx_support=Support(elements=_FP_ELEMENTS), float_scale_support=_NVFP4),
        sources=("TransformerEngine transformer_engine/common/cast/nvfp4/core_nvfp4.cuh, dequantize_nvfp4.cuh",
                 "transformer_engine/common/util/ptx.cuh exp2f_rcp, ptx_arch_spec.cuh float_to_e8m0",
                 "cuBLAS documentation: block scaling factors (cvt.rp.satfinite.ue8m0x2.f32)",
                 _TE_EVIDENCE_NOTE),
        status="modelled",
        evidence=("read from the CUDA sources (TE commit d0067d0); the kernels were not run (they need a Blackwell "
                  "GPU)",
                  "tests/test_block_peers.py against tests/peers/transformer_engine (TE's pure-PyTorch references "
                  "run on CPU, commit d0067d0): NVFP4 codes rowwise and columnwise, scale bytes and global amax "
                  "equal on 38 finite and Inf tensors (622 592 codes) except the 33 195 codes of scaled values "
                  "that are exactly -0 (the reference's comparisons give +0, the kernel's cvt keeps -0); MXFP8 "
                  "codes and scale bytes equal on 32 x 32 tiles of the finite tensors (294 912 codes); NaN and Inf "
                  "blocks differ where the references' source differs from the kernels' (block.md §5.2, §4.5)",
                  "fixed against the kernel source and the reference: byte-0 MX blocks are multiplied by "
                  "exp2f_rcp(0) = 2^127, not by 1 (2070 of the reference's codes differed before)"),
    ),
    Profile(
        "transformer_engine_reference", "block",
        "TransformerEngine's pure-PyTorch references (commit d0067d0, torch 2.13 CPU): NVFP4QuantizerRef (1 x 16 "
        "tiles, no RHT) and the MXFP8 tile reference of tests/pytorch/test_mxfp8_2d_quantize.py",
        "NVFP4 as 'nvidia' with the reference's torch arithmetic: torch.max and torch.amax propagate a NaN into "
        "the tensor and block amax (every scale NaN, every code 0), a scaled value that is exactly -0 gets code "
        "0, NaN elements code 0, and widths that are not a multiple of 16 are padded with zeros. MXFP8 (per block: "
        "the reference's 32 x 32 tile is one block of 1024): byte from the float32 bits of fl32(amax / 448) "
        "with the ceil rule (exact ceil, clamped: rceil with a division), a NaN amax wraps to byte 0 (then "
        "x / 2^-127), an Inf amax gives byte 255 (x / Inf), elements fl32(x / 2^(byte - 127)) cast by torch to "
        "float8_e4m3fn (RNE, saturating: torch 2.13 maps |y| > 464 and +-Inf to +-448).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(
            mx=MXRules(**_SYSTEM, scale_rule="rceil", scale_range="clamp", nonfinite_block="exponent_bits_wrap",
                       compute_dtype="float32", pad="error"),
            float_scale=FloatScaleRules(global_scale_rule="amax_encode_reciprocal", compute_dtype="float32",
                                        zero_sign="scaled_zero_positive", nan="zero", unspecified_open_cases=False),
            mx_support=Support(elements=("float8_e4m3fn",)), float_scale_support=_NVFP4),
        sources=("TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py "
                 "(NVFP4QuantizerRef._quantize_blockwise_reference, cast_to_fp4x2)",
                 "tests/pytorch/test_mxfp8_2d_quantize.py (_float_to_e8m0, _e8m0_to_scale_inv, "
                 "_mxfp8_2d_quantize_reference)", "scripts/peers/transformer_engine.py (runs them)"),
        status="peer_vectors",
        evidence=("tests/test_block_peers.py against tests/peers/transformer_engine (commit d0067d0, torch 2.13.0 "
                  "CPU): 40 tensors (float32 and bfloat16, 9 distributions +-1 ulp, a NaN and an Inf tensor each): "
                  "NVFP4 codes rowwise and columnwise (655 360), scale bytes, global amax; MXFP8 codes (327 680) "
                  "and scale bytes of 32 x 32 tiles; 0 mismatches outside the unspecified NaN signs",),
    ),
)

# scale rules of 2025-26 hardware and libraries, modelled from their documents (block.md §4.2, §8)
PROFILES_2026 = (
    Profile(
        "trainium3", "block", "AWS Trainium 3 NKI nki.isa.quantize_mx (MXFP8 / MXFP4)",
        "A block scale twice the OCP sample algorithm's: e = floor(log2 amax) - emax + 1 (scale_rule "
        "'floor_plus_one'), so no element needs the saturating clamp; blocks of 32 = 8 partitions x 4 elements "
        "(qref.pack layout 'trainium_mx_8x4'). Zero, tiny, huge and non-finite blocks as 'ocp' (the document does "
        "not say: marked unspecified).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(mx=MXRules(scale_rule="floor_plus_one"),
                         mx_support=Support(elements=("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"),
                                            block_sizes=(32,))),
        sources=("AWS Neuron documentation: NKI ISA nki.isa.quantize_mx (Trainium 3), MX quantization",),
        status="modelled",
        evidence=("modelled from the document; no Trainium device here. tests/test_block_scale_rules.py checks the "
                  "rule against an exact oracle written from the description",),
    ),
    Profile(
        "gfx950", "block", "AMD CDNA4 (gfx950) v_cvt_scalef32_* with a float32 scale from fl32(amax / M)",
        "The scaled conversions read only the exponent field of their float32 scale operand: a scale computed "
        "as r = fl32(amax / M) acts as 2^(exponent field of r - 127) (scale_rule 'float32_exponent_field'), the "
        "mantissa dropped; elements fl32(x / 2^e) saturate (they can reach 2 M). A zero or subnormal r reads as "
        "2^-127 (exponent field 0).",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(mx=MXRules(scale_rule="float32_exponent_field", compute_dtype="float32",
                                    scale_range="clamp"),
                         mx_support=Support(elements=_FP_ELEMENTS, block_sizes=(32,))),
        sources=("AMD Instinct CDNA4 ISA reference (gfx950): V_CVT_SCALEF32_PK_FP8_F32, V_CVT_SCALEF32_PK_FP4_F32 "
                 "and the other V_CVT_SCALEF32_* (the scale operand's exponent only)",),
        status="modelled",
        evidence=("modelled from the ISA document; no gfx950 here. tests/test_block_scale_rules.py checks the rule "
                  "against an oracle on the float32 bits",),
    ),
    Profile(
        "deepseek_ue8m0", "block", "DeepSeek-V3.1 act_quant with scale_fmt='ue8m0' (1 x 128 blocks, E4M3 elements)",
        "amax = max(amax, fl32(1e-4)) (amax_floor), s = fl32(amax / 448), e = ceil(fl32(log2 s)) "
        "(scale_rule 'rceil_log2_float32'), y = fl32(x / 2^e), E4M3 by nearest even, saturating; the UE8M0 byte "
        "e + 127. A zero block takes the floor's scale 2^-22.",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(mx=MXRules(scale_rule="rceil_log2_float32", compute_dtype="float32", amax_floor=1e-4,
                                    scale_range="clamp", pad="error", unspecified_open_cases=False),
                         mx_support=Support(elements=("float8_e4m3fn",), block_sizes=(128,))),
        sources=("deepseek-ai/DeepSeek-V3 inference/kernel.py act_quant_kernel (scale_fmt 'ue8m0'; V3.1)",
                 "qref.recipes.multiplier.DEEPSEEK_V3_1 (the same cast as a recipe, recipes.md §12.2)"),
        status="modelled",
        evidence=("tests/test_block_scale_rules.py against an oracle written from the kernel's steps (float32 "
                  "numpy and ml_dtypes' E4M3 cast)",),
    ),
    *(Profile(
        f"transformer_engine_nvfp4_{tag}", "block",
        f"TransformerEngine NVFP4 with the outer (second-level) scale per {what}",
        f"As 'nvidia' (amax_encode_reciprocal: S_enc = fl32(M S / g), s = e4m3(fl32(amax * fl32(S_enc / M))), "
        f"y = fl32(x * fl32(1 / fl32(s / S_enc)))) with g the amax of each {what} instead of the tensor's "
        f"(global_scale_granularity '{gran}'); the QArray's global_scale holds g per block.",
        CastPolicy(overflow="saturate"),
        rules=BlockRules(float_scale=FloatScaleRules(global_scale_rule="amax_encode_reciprocal", amax_nan="skip",
                                                     compute_dtype="float32", pad="error",
                                                     unspecified_open_cases=False, global_scale_granularity=gran),
                         float_scale_support=_NVFP4),
        sources=(f"TransformerEngine NVFP4 recipe: outer scales per {what} (NVFP4BlockScaling options, "
                 "core_nvfp4.cuh)",),
        status="modelled",
        evidence=("tests/test_block_scale_rules.py against the §5.2 formulas evaluated per group in the test",),
    ) for tag, what, gran in (("per_token", "row (token)", "row"), ("1x64", "1 x 64 tile", "tile_64"))),
)

for _p in PROFILES + PROFILES_2026:
    register_profile(_p, replace=True)


__all__ = [
    "BYTE0_DIVISORS",
    "CHOICES",
    "COMPUTE_DTYPES",
    "GLOBAL_SCALE_GRANULARITIES",
    "GLOBAL_SCALE_RULES",
    "KINDS",
    "NONFINITE_BLOCKS",
    "PROFILES",
    "PROFILES_2026",
    "RULES_OF_KIND",
    "SCALE_RANGES",
    "SCALE_RULES",
    "ZERO_BLOCKS",
    "AffineRules",
    "BlockRules",
    "ElementRules",
    "FloatScaleRules",
    "KindRules",
    "MXRules",
    "ScaledRules",
    "Support",
    "rules_of",
]
