"""Quantized integer matrix product profiles as data (spec: matmul.md §3-§6; profiles.md).

``IntAccumulation`` (matmul.md §3), ``Requantization`` (matmul.md §5) and ``IntMatmulRules`` (both, and where a
bias enters, matmul.md §4) are the typed, frozen records of every step a real system takes in
Y = requant(sum_k (A[m,k] - za)(B[k,n] - zb) + bias). Each matmul ``Profile`` carries one ``IntMatmulRules`` as
``profile.rules``. Field values name mechanisms (``wrap``, ``saturating_int16``, ``fixed_point``), never systems.
The operations live in qref.recipes.qmatmul; this module imports only qref.errors and the profile base.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import QrefError, check_choice
from .base import Profile, check_choices, register_profile

OVERFLOWS = ("wrap", "saturate", "exact", "int64")
PAIR_SUMS = (None, "saturating_int16", "saturating_int16_shifted_a")
METHODS = ("none", "float_multiply", "fixed_point", "dequantize_compute_quantize", "zero_point_offset",
           "float_output")
MULTIPLIER_DTYPES = ("float32", "float64", "exact")
ASSOCIATIONS = ("ab_then_y", "a_then_b_over_y", "ab_float32_if_per_tensor", "ab_times_reciprocal_y",
                "sequential_reciprocal_y", "sequential_ab_reciprocal_y")
SEQUENTIAL = ("sequential_reciprocal_y", "sequential_ab_reciprocal_y")
SCALE_FORMS = ("as_given", "reciprocal_round_trip")
COMPUTE_DTYPES = ("float32", "float64", "exact")
ZERO_POINT_STAGES = ("after_rounding", "before_rounding")
ROUNDINGS = ("nearest_even", "nearest_away", "nearest_up", "toward_zero")
FIXED_POINT_FORMS = ("double_rounding", "single_rounding", "double_rounding_half_up", "single_rounding_q15")
UNSIGNED_EXTENSIONS = ("zero", "sign")
PRODUCTS = ("exact", "abs_sign_int8")
NARROWINGS = ("clamp", "wrap")
DOTS = ("rounded_once", "sequential_float32")
BIAS_STAGES = ("accumulator", "output")
FLOAT_BIASES = ("exact", "float_accumulator", "int32_accumulator", "after_operand_scales", "fused_multiply_add")
DYNAMIC_SCALINGS = ("min_max_with_zero", "absmax_symmetric", "min_max_float64_zero_point", "min_max_inverse_scale")
DYNAMIC_DIVISIONS = ("divide", "reciprocal", "inverse_scale")
DYNAMIC_SCALE_ARITHMETICS = ("float32", "float64")
DYNAMIC_ZERO_POINT_RULES = ("from_min", "smaller_error")
DYNAMIC_ZERO_POINT_ADDS = ("after_rounding", "fused", "before_rounding")
DYNAMIC_KERNEL_SCALES = ("scale", "float64_reciprocal_inverted")
DYNAMIC_STORAGES = ("uint8", "int8")
DYNAMIC_GRANULARITIES = ("per_tensor", "per_row")
VECTOR_ROUNDINGS = (None, "add_half_truncate")
NBITS_COMPUTES = ("float32_dequantize", "int8_blocks")


@dataclass(frozen=True)
class IntAccumulation:
    """How sum_k (A - za)(B - zb) (+ bias) is accumulated (matmul.md §3).

    overflow: "wrap" (the int32 accumulator wraps modulo 2^32: two's complement adds), "saturate" (every partial
        sum, in k order, saturates to the int32 range) or "exact" (the exact sum, held in int64; a result outside
        int32 is unspecified) or "int64" (an int64 accumulator: the exact sum, defined beyond int32; TFLite's
        int16 kernels).
    pair_sum: None (every product enters the int32 sum) or "saturating_int16" (u8 x s8 operands: the raw
        products of adjacent pairs a[2i] b[2i] + a[2i+1] b[2i+1] are summed with int16 saturation before the
        int32 sum, as x86 vpmaddubsw does; zero points are corrected afterwards in int32, matmul.md §3.2) or
        "saturating_int16_shifted_a" (as "saturating_int16"; an int8 A is first shifted by +128 into uint8 and
        the shift corrected in int32 with the zero points: s8 x s8 run on the u8 x s8 instruction, §3.2).
    unsigned_extension: how an unsigned storage value enters the int32 arithmetic: "zero" (its value) or "sign"
        (its bits sign-extended, as a signless integer: uint8 200 is -56; zero points keep their values,
        matmul.md §3.3).
    product: "exact" (a[k] b[k]) or "abs_sign_int8" (|a| times b with a's sign moved onto it in int8: -b wraps, so
        b = -128 with a < 0 gives |a| (-128) = 128 a instead of -128 a; x86 pabsb / psignb / pmaddubsw on raw
        int8 codes, zero point 0 for b, matmul.md §3.4).
    product_width: with "abs_sign_int8", the vector width w: the first w floor(K / w) products of every dot take
        that rule, the rest (the scalar tail) are exact (0: every product).
    """

    overflow: str = "wrap"
    pair_sum: str | None = None
    unsigned_extension: str = "zero"
    product: str = "exact"
    product_width: int = 0

    def __post_init__(self) -> None:
        check_choice("overflow", self.overflow, OVERFLOWS)
        if self.pair_sum not in PAIR_SUMS:
            raise QrefError(f"pair_sum must be one of {PAIR_SUMS}, got {self.pair_sum!r}")
        check_choice("unsigned_extension", self.unsigned_extension, UNSIGNED_EXTENSIONS)
        check_choice("product", self.product, PRODUCTS)
        if self.product_width < 0 or (self.product == "exact" and self.product_width):
            raise QrefError("product_width is the vector width of product 'abs_sign_int8' (>= 0; 0 with 'exact')")


@dataclass(frozen=True)
class Requantization:
    """How the int32 accumulator becomes output codes (matmul.md §5).

    method: "none" (the int32 accumulator is the output, §5.1), "float_multiply" (y = clamp(round(acc * m) + zy)
        with m = a_s b_s / y_s in floating point, §5.2), "fixed_point" (m quantized to an int32 Q31 multiplier
        and a shift; SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, or one rounding, §5.3) or
        "dequantize_compute_quantize" (both operands dequantized to float32, dotted, the dot quantized, §5.4) or
        "zero_point_offset" (the raw-operand dot and the zero-point offset scaled and rounded separately, then
        y = round(dot m) + zy - round(offset m) in int32, §5.5) or
        "float_output" (float32 out: y = fl(fl(acc) * m) with m = a_s b_s and no output scale; a float bias is
        added to the result, bias stage "output", §8).
    multiplier_dtype: the dtype m is computed in ("float32", "float64", or "exact": the real quotient).
    association: "ab_then_y" (m = (a_s * b_s) / y_s), "a_then_b_over_y" (m = a_s * (b_s / y_s)) or
        "ab_float32_if_per_tensor" (with one b scale, a_s * b_s is rounded to float32 before the division in
        multiplier_dtype; with per-column b scales as "ab_then_y", matmul.md §5.3),
        "ab_times_reciprocal_y" (m = (a_s * b_s) * (1 / y_s), each step rounded) or "sequential_reciprocal_y"
        (no single multiplier: v = ((acc * a_s) * b_s) * (1 / y_s), every product and 1 / y_s rounded to the
        compute dtype; with method float_output, y_s = 1: y = fl(fl(fl(acc) * a_s) * b_s), matmul.md §15, §16,
        §17.3) or "sequential_ab_reciprocal_y" (v = (acc * fl(a_s * b_s)) * (1 / y_s); matmul.md §5.2).
    scale_form: "as_given" (a_s and b_s enter as they are) or "reciprocal_round_trip" (held as reciprocals
        fl32(fl64(1 / s)) and inverted back in float32: s' = fl32(1 / fl32(1 / s)), matmul.md §5.2).
    compute: the dtype of acc * m ("float32": acc is first converted to float32, nearest even; "float64": acc is
        exact in float64, one rounding of the product; "exact": no rounding before the final one).
    zero_point: "after_rounding" (round(acc * m) + zy in integers) or "before_rounding" (fl(acc * m + zy) in the
        compute dtype, then round).
    rounding: the rounding of the final value to an integer (float_multiply, dequantize_compute_quantize).
    fixed_point: "double_rounding" (gemmlowp: SaturatingRoundingDoublingHighMul, RoundingDivideByPOT),
        "single_rounding" (one rounding of acc * q / 2^(31 - shift), half up) or "double_rounding_half_up"
        ((acc 2^left * q + 2^30) >> 31 in 64 bits, then a rounding right shift half up: both roundings toward
        +inf on ties; the left shift wraps in int32, matmul.md §5.3) or "single_rounding_q15" (the Q31
        multiplier reduced to Q15, (q + 2^15) >> 16 saturated to 2^15 - 1, then one rounding half up of the
        int64 acc * q15 / 2^(15 - shift): TFLite's int64-accumulator MultiplyByQuantizedMultiplier, §5.3).
    unit_tolerance: a multiplier with |m - 1| <= unit_tolerance (m in the multiplier dtype) is not applied: the
        accumulator passes unscaled (zero_point_offset, §5.5; 0: only m = 1 exactly, which changes nothing).
    narrowing: how the int32 result becomes the output storage: "clamp" (saturate to its range) or "wrap" (keep
        its low bits, modulo 2^bits, §5.5).
    dot: the float dot of method dequantize_compute_quantize: "rounded_once" (the exact dot of the dequantized
        operands rounded once to float32, the spec) or "sequential_float32" (every product rounded to float32,
        summed from 0 in k order in float32, no fused multiply-add; §5.4).
    """

    method: str = "float_multiply"
    multiplier_dtype: str = "float32"
    association: str = "ab_then_y"
    compute: str = "float32"
    zero_point: str = "after_rounding"
    rounding: str = "nearest_even"
    fixed_point: str = "double_rounding"
    unit_tolerance: float = 0.0
    narrowing: str = "clamp"
    scale_form: str = "as_given"
    dot: str = "rounded_once"

    def __post_init__(self) -> None:
        check_choices({"method": (self.method, METHODS), "multiplier_dtype": (self.multiplier_dtype, MULTIPLIER_DTYPES),
                       "association": (self.association, ASSOCIATIONS), "compute": (self.compute, COMPUTE_DTYPES),
                       "zero_point": (self.zero_point, ZERO_POINT_STAGES), "rounding": (self.rounding, ROUNDINGS),
                       "fixed_point": (self.fixed_point, FIXED_POINT_FORMS), "narrowing": (self.narrowing, NARROWINGS),
                       "dot": (self.dot, DOTS), "scale_form": (self.scale_form, SCALE_FORMS)})
        if not 0 <= self.unit_tolerance < 1:
            raise QrefError(f"unit_tolerance must lie in [0, 1), got {self.unit_tolerance!r}")
        if (self.association in SEQUENTIAL or self.scale_form != "as_given") and (
                self.method not in ("float_multiply", "float_output") or "exact" in (self.compute,
                                                                                     self.multiplier_dtype)):
            raise QrefError("the sequential associations and scale_form 'reciprocal_round_trip' are "
                            "float_multiply / float_output steps in a float compute and multiplier dtype "
                            "(matmul.md §5.2, §15)")
        if self.zero_point == "before_rounding" and self.compute == "exact":
            raise QrefError("zero_point='before_rounding' adds in the compute dtype; with compute='exact' the "
                            "stage makes no difference: use 'after_rounding'")

    def to_dict(self) -> dict[str, Any]:
        return _without_defaults(self, ("unit_tolerance", "narrowing", "scale_form", "dot"))


def _without_defaults(record: Any, later: tuple[str, ...]) -> dict[str, Any]:
    """asdict without the fields added after conformance v1 while they hold their defaults (so v1's case params,
    which record the rules, stay as generated)."""
    d = dataclasses.asdict(record)
    defaults = {f.name: f.default for f in dataclasses.fields(record)}
    return {k: v for k, v in d.items() if k not in later or v != defaults[k]}


@dataclass(frozen=True)
class DynamicQuantization:
    """How a float32 operand is quantized on the fly (matmul.md §9 and §15 per tensor to uint8; §17.1 per row to
    int8).

    scaling: "min_max_with_zero" (uint8: lo = min(0, min x), hi = max(0, max x), in float32; the scale and zero
        point by the fields below), "absmax_symmetric" (int8: R = max |x|, s = fl32(R / 127), z = 0, codes in
        [-127, 127]; R = 0: s = 1, codes 0), "min_max_float64_zero_point" (int8: r = fl32(hi - lo), s64 = r / 255 in
        float64, the zero point -128 - lo / s64 or 127 - hi / s64 (the one whose |qmin| + |lo / s64| vs |qmax| +
        |hi / s64| error is smaller), clamped, rounded half away; s = fl32(s64); hi == lo: s = 1, z = 0, codes 0)
        or "min_max_inverse_scale" (int8: c = fl32(255 / fl32(hi - lo)) (c = 1 when hi == lo), in float32 a = lo c,
        b = hi c, z = rint(clamp(fl32(-128 - a) if fl32(fl32(-128 + a) + fl32(b + 127)) > 0 else fl32(127 - b)));
        s = fl32(1 / c)).
    division: how x meets the scale k: "divide" (v = fl32(x / k)), "reciprocal" (v = fl32(x * fl32(1 / k))) or
        "inverse_scale" (int8: v = fl32(x * inv) with the inverse computed in one rounding from the range:
        fl32(127 / R), or c).
    storage: the code storage ("uint8": §9, §15; "int8": §17.1). granularity: "per_tensor" or "per_row" (one scale
        and zero point per row of the (M, K) operand, int8 only).
    The uint8 scaling's fields (matmul.md §9, §15):
    code_max: the largest code (255; 127: PyTorch's reduce_range, 7-bit codes).
    scale_arithmetic: "float32" (s = fl32(fl32(hi - lo) / code_max); s = degenerate_scale when hi == lo) or
        "float64" (s_d = (hi - lo) / code_max in float64; s_d = degenerate_scale when fl32(s_d) is 0 or
        1 / fl32(s_d) overflows; below min_scale, s_d = min_scale and lo, hi scaled in float32 by
        fl32(min_scale / fl32(s_d)); the codes' scale is s = fl32(s_d)).
    degenerate_scale: the scale of a zero range (1.0; PyTorch 0.1). min_scale: the floor of s_d (0: none).
    zero_point_rule: "from_min" (z = round_half_even(clamp(fl32(0 - fl32(lo / s)), 0, code_max)), float32) or
        "smaller_error" (float64 with s_d: z_min = -lo / s_d, z_max = code_max - hi / s_d; z_min when
        -|lo / s_d| < code_max - |hi / s_d| else z_max; clamped, nearest even).
    zero_point_add: "after_rounding" (q = clamp(round(v) + z)), "fused" (q = clamp(round(fl32(x r + z))), one
        rounding: a fused multiply-add) or "before_rounding" (q = clamp(round(fl32(v + z)))).
    kernel_scale: the scale k the kernel quantizes with and scales the float output by: "scale" (s) or
        "float64_reciprocal_inverted" (fl32(1 / fl32(1 / s_d)): a kernel handed the reciprocal of the float64
        scale, inverted back in float32).
    The int8 scalings' rounding (matmul.md §17.1):
    rounding: of v to an integer ("nearest_even" or "nearest_away"); codes = clamp(round(v) + z).
    vector_rounding: None, or "add_half_truncate": in every row the first vector_width * floor(K / vector_width)
        elements round as trunc(fl32(v + copysign(0.5, v))) (a vector loop; 0.49999997 becomes 1), the rest by
        ``rounding`` (the loop's scalar tail).
    """

    scaling: str = "min_max_with_zero"
    division: str = "divide"
    storage: str = "uint8"
    granularity: str = "per_tensor"
    code_max: int = 255
    scale_arithmetic: str = "float32"
    degenerate_scale: float = 1.0
    min_scale: float = 0.0
    zero_point_rule: str = "from_min"
    zero_point_add: str = "after_rounding"
    kernel_scale: str = "scale"
    rounding: str = "nearest_even"
    vector_rounding: str | None = None
    vector_width: int = 0

    def __post_init__(self) -> None:
        check_choices({"scaling": (self.scaling, DYNAMIC_SCALINGS), "division": (self.division, DYNAMIC_DIVISIONS),
                       "storage": (self.storage, DYNAMIC_STORAGES),
                       "granularity": (self.granularity, DYNAMIC_GRANULARITIES),
                       "scale_arithmetic": (self.scale_arithmetic, DYNAMIC_SCALE_ARITHMETICS),
                       "zero_point_rule": (self.zero_point_rule, DYNAMIC_ZERO_POINT_RULES),
                       "zero_point_add": (self.zero_point_add, DYNAMIC_ZERO_POINT_ADDS),
                       "kernel_scale": (self.kernel_scale, DYNAMIC_KERNEL_SCALES),
                       "rounding": (self.rounding, ("nearest_even", "nearest_away"))})
        if self.code_max not in (255, 127):
            raise QrefError(f"code_max must be 255 (8-bit codes) or 127 (reduce_range), got {self.code_max!r}")
        if not (self.degenerate_scale > 0 and 0 <= self.min_scale < 1):
            raise QrefError(f"degenerate_scale must be positive and min_scale in [0, 1), got "
                            f"{self.degenerate_scale!r}, {self.min_scale!r}")
        if self.kernel_scale != "scale" and self.scale_arithmetic != "float64":
            raise QrefError("kernel_scale 'float64_reciprocal_inverted' needs scale_arithmetic 'float64' "
                            "(matmul.md §15)")
        if self.vector_rounding not in VECTOR_ROUNDINGS:
            raise QrefError(f"vector_rounding must be one of {VECTOR_ROUNDINGS}, got {self.vector_rounding!r}")
        if (self.vector_rounding is None) != (self.vector_width == 0) or self.vector_width < 0:
            raise QrefError("vector_rounding and vector_width go together: a rounding with a width >= 1, or None "
                            f"with 0 (got {self.vector_rounding!r}, {self.vector_width!r})")
        if (self.storage == "uint8") != (self.scaling == "min_max_with_zero"):
            raise QrefError(f"scaling {self.scaling!r} does not produce {self.storage} codes: min_max_with_zero "
                            "is the uint8 scaling (matmul.md §9), the others int8 (§17.1)")
        if self.division == "inverse_scale" and self.scaling not in ("absmax_symmetric", "min_max_inverse_scale"):
            raise QrefError("division 'inverse_scale' uses the inverse computed from the range: scaling "
                            "'absmax_symmetric' or 'min_max_inverse_scale' (matmul.md §17.1)")
        uint8_only = {"code_max": 255, "scale_arithmetic": "float32", "degenerate_scale": 1.0, "min_scale": 0.0,
                      "zero_point_rule": "from_min", "zero_point_add": "after_rounding", "kernel_scale": "scale"}
        int8_only = {"granularity": "per_tensor", "rounding": "nearest_even", "vector_rounding": None}
        if self.storage == "int8":
            bad = sorted(k for k, v in uint8_only.items() if getattr(self, k) != v)
            if bad:
                raise QrefError(f"{bad} select the uint8 scaling (matmul.md §9, §15); an int8 scaling takes its "
                                "scale and zero point from ``scaling`` (§17.1)")
        else:
            bad = sorted(k for k, v in int8_only.items() if getattr(self, k) != v)
            if bad:
                raise QrefError(f"{bad} select the per-row int8 quantization (matmul.md §17.1); the uint8 scaling is "
                                "per tensor, rounded to nearest even (§9)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class IntMatmulRules:
    """The rules of a quantized integer matmul (matmul.md §3-§5): accumulation, where the bias enters
    ("accumulator": an int32 bias added to the accumulator under its overflow rule, §4; "output": a float32 bias
    added to the float32 output of method "float_output", §8) and requantization..

    float_bias: "exact" (real arithmetic: (acc a_s b_s + bias) / y_s rounded once; needs compute "exact"),
        "float_accumulator" (added to fl(acc) before the multiplier, in the compute dtype: per tensor
        fl(fl(acc) + bias * fl(1 / fl(a_s b_s))) with one rounding, a fused multiply-add; per column
        fl(fl(acc) + fl(bias / fl(a_s b_s[n])))), "int32_accumulator" (round_half_even(fl32(bias *
        fl32(1 / fl32(a_s b_s)))) added to the int32 accumulator) or "after_operand_scales" (added to
        fl(fl(fl(acc) a_s) b_s), before the 1 / y_s product: association "sequential_reciprocal_y") or
        "fused_multiply_add" (method "float_output": the bias added in the rounding of the last product, y =
        fl32(fl32(acc) m + bias) or fl32(t b_s + bias) with one rounding, a fused multiply-add, matmul.md §8,
        §15, §17.3).
    dynamic: how a float32 A is quantized on the fly (``DynamicQuantization``, matmul.md §9, §15).
    per_axis_requantization: None (``requantization`` applies to every granularity) or the requantization that
        replaces it when B has per-column scales (a lowering that matches only per-tensor operands and decomposes
        the others, matmul.md §6.3).
    """

    accumulation: IntAccumulation = field(default_factory=IntAccumulation)
    requantization: Requantization = field(default_factory=Requantization)
    bias: str = "accumulator"
    float_bias: str = "exact"
    dynamic: DynamicQuantization = field(default_factory=lambda: DynamicQuantization())
    per_axis_requantization: Requantization | None = None

    def __post_init__(self) -> None:
        check_choice("bias", self.bias, BIAS_STAGES)
        check_choice("float_bias", self.float_bias, FLOAT_BIASES)

    def replace(self, **overrides: Any) -> IntMatmulRules:
        """A copy with fields of the accumulation or requantization record overridden by name."""
        acc_f = {f.name for f in dataclasses.fields(IntAccumulation)}
        req_f = {f.name for f in dataclasses.fields(Requantization)}
        dyn_f = {f.name for f in dataclasses.fields(DynamicQuantization)}
        bad = set(overrides) - acc_f - req_f - dyn_f - {"bias", "float_bias"}
        if bad:
            raise QrefError(f"unknown matmul rule field(s) {sorted(bad)}; fields: {sorted(acc_f | req_f | dyn_f)}")
        acc = dataclasses.replace(self.accumulation, **{k: v for k, v in overrides.items() if k in acc_f})
        req = dataclasses.replace(self.requantization, **{k: v for k, v in overrides.items() if k in req_f})
        dyn = dataclasses.replace(self.dynamic, **{k: v for k, v in overrides.items() if k in dyn_f})
        return IntMatmulRules(acc, req, overrides.get("bias", self.bias),
                              overrides.get("float_bias", self.float_bias), dyn, self.per_axis_requantization)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; ``float_bias``, ``dynamic`` and ``per_axis_requantization`` (added after suite v1)
        only when not default."""
        d = {"accumulation": _without_defaults(self.accumulation, ("unsigned_extension", "product", "product_width")),
             "requantization": self.requantization.to_dict(), "bias": self.bias}
        if self.float_bias != "exact":
            d["float_bias"] = self.float_bias
        if self.dynamic != DynamicQuantization():
            d["dynamic"] = self.dynamic.to_dict()
        if self.per_axis_requantization is not None:
            d["per_axis_requantization"] = self.per_axis_requantization.to_dict()
        return d


@dataclass(frozen=True)
class HybridMatmulRules:
    """A dynamic-range ("hybrid") product: float32 activations quantized per row, int8 weights, float32 out
    (matmul.md §17): ``quantization`` (the activation's, §17.1), ``rules`` (the integer accumulation and the float
    output stage: requantization method "float_output" with its association, bias stage "output" and
    float_bias "exact" (added after rounding: fl32(y + bias)) or "fused_multiply_add", §17.2-§17.3)."""

    quantization: DynamicQuantization = field(default_factory=lambda: DynamicQuantization(
        scaling="absmax_symmetric", division="inverse_scale", storage="int8", granularity="per_row",
        rounding="nearest_away"))
    rules: IntMatmulRules = field(default_factory=lambda: IntMatmulRules(
        IntAccumulation(overflow="wrap"), Requantization(method="float_output"), bias="output"))

    def __post_init__(self) -> None:
        if self.quantization.storage != "int8" or self.quantization.granularity != "per_row":
            raise QrefError("a hybrid product quantizes its activations per row to int8 (matmul.md §17.1)")
        if self.rules.requantization.method != "float_output" or self.rules.bias != "output":
            raise QrefError("a hybrid product has a float32 output: requantization method 'float_output', bias "
                            "stage 'output' (matmul.md §17.2)")
        if self.rules.dynamic != DynamicQuantization():
            raise QrefError("a hybrid product's activation quantization is its ``quantization`` field; leave "
                            "rules.dynamic at its default (matmul.md §17.1)")
        if self.rules.float_bias not in ("exact", "fused_multiply_add"):
            raise QrefError("a hybrid product adds its float32 bias after the scaling ('exact': fl32(y + bias)) or "
                            "in the last product's rounding ('fused_multiply_add'), matmul.md §17.3")

    def to_dict(self) -> dict[str, Any]:
        return {"quantization": self.quantization.to_dict(), "rules": self.rules.to_dict()}


@dataclass(frozen=True)
class NBitsCompute:
    """How a float32 A times 4-bit blockwise weights B is computed (matmul.md §10).

    compute: "float32_dequantize" (B dequantized to float32, one rounding of (q - z) s; a float32 dot in an
        implementation-defined order) or "int8_blocks" (A quantized per block of K to int8: s_a = fl32(amax /
        127), q_a = round_half_even(fl32(a * fl32(127 / amax))); exact int32 dots per block, scaled and summed in
        float32 in an implementation-defined order).
    Neither sum order is pinned: results are compared within the rigorous bound of §10.3.
    """

    compute: str = "float32_dequantize"

    def __post_init__(self) -> None:
        check_choice("compute", self.compute, NBITS_COMPUTES)


#: the int32 accumulator wrapping modulo 2^32 (two's complement adds, matmul.md §3.1): most integer kernels
_WRAP = IntAccumulation(overflow="wrap")
#: the releases the records below were verified on (one place per system to bump)
_TORCH_2_13 = {"package": "torch", "versions": ">=2.13,<2.14", "status": "verified"}
_LITERT_2_3 = {"package": "ai-edge-litert", "versions": ">=2.3,<2.4", "status": "verified"}
_ORT_EVIDENCE = (
    "tests/test_matmul.py against onnxruntime 1.32.0 CPUExecutionProvider (AMD EPYC, AVX-512 VNNI): MatMulInteger "
    "and QLinearMatMul, u8/s8 operands, per-tensor and per-column B scales and zero points, >= 10^6 outputs bit "
    "for bit; int32 wrap-around and u8 x s8 pairs at 255 x -128 (no int16 saturation on VNNI)",
    "qref run --backend onnxruntime --family matmul: every matmul task passes",
    "tests/test_matmul_ortx.py against onnxruntime 1.32.0 (com.microsoft, AMD EPYC, AVX-512 VNNI): "
    "MatMulIntegerToFloat (u8 x s8/u8, s8 x s8; per-tensor and per-column scales and zero points, float bias; "
    "accumulators beyond 2^24) 295,765 outputs, DynamicQuantizeMatMul (ties of x / s, one-signed and all-zero A) "
    "515,840 outputs bit for bit with method float_output (matmul.md §8, §9); QGemm (alpha, int32 C, float32 and "
    "u8/s8 outputs) 161,906 outputs bit for bit (matmul.md §11); MatMulNBits accuracy_level 0 / 1 / 4 "
    "(blocks 16-128, with and without zero points, K not a multiple of the block) 931,200 outputs within the bound "
    "of matmul.md §10.3; MatMulBnb4 (NF4, FP4, blocks 16-256 straddling rows) 61,404 outputs within the bound "
    "(matmul.md §12)",
)
_REF_EVIDENCE = (
    "tests/test_matmul.py against onnx 1.23.2 onnx.reference.ReferenceEvaluator (numpy 2.4: int32 * float32 "
    "promotes to float64): QLinearMatMul and MatMulInteger bit for bit",
    "qref run --backend onnx_reference --family matmul",
)
_XLA_EVIDENCE = (
    "tests/test_matmul_xla.py against jax / jaxlib 0.10.2 XLA:CPU (AMD EPYC Zen 4) in fresh processes, native and "
    "with XLA_FLAGS=--xla_cpu_max_isa=AVX2: jax.lax.dot_general(int8 / uint8, preferred_element_type=jnp.int32) "
    "plus int32 zero-point terms, eager and jitted, u8/s8 x u8/s8 at K = 33,100 (sums beyond int32), bit for bit "
    "against Python-int sums modulo 2^32; the same bits under both ISAs",
    "qref run --backend jax --target 'jax.matmul_integer.*' (native and --cpu baseline): 37 matmul_integer tasks, "
    "264,446 outputs per target, 0 mismatches",
)
_SHLO_EVIDENCE = (
    "tests/test_matmul_xla.py against the StableHLO interpreter of torch-mlir 20261001 (eval_module) and IREE 3.13 "
    "(iree-compile llvm-cpu): dot_general on per-tensor !quant.uniform i8 / u8 operands, 30,720 requantized "
    "outputs per backend (16 regimes: m = 2^-k truncations, m within 0.001 of 1, m > 1, non-dyadic m, zero points "
    "at the storage ends, results beyond the storage range) and i32 accumulator results at K = 66,000 (int32 "
    "wrap), bit for bit against an independent transcription of the pass and this record",
    "qref run --backend stablehlo --backend iree --target '*matmul*': 28 tasks the verifier accepts, 5,592 outputs "
    "per backend, 0 mismatches (the other 102 are refused: dot_general C15, per-row lhs, bias)",
    "tests/test_stablehlo_per_axis.py: dot_general with a per-axis rhs and a per-tensor result (i8 and i32 "
    "results, K = 1 .. 300, tie-heavy float32 dots) bit for bit against an independent transcription of the "
    "decomposition (dequantize, float32 dot in k order, quantize with the zero point before rounding) and this "
    "record's per_axis_requantization, on both backends",
)
_LITERT_EVIDENCE = (
    "tests/test_matmul_litert.py against ai-edge-litert 2.3.0's Interpreter (AMD EPYC Zen 4, AVX-512 VNNI): "
    "one-operator FULLY_CONNECTED / BATCH_MATMUL flatbuffers, per-tensor and per-channel int8 weights, "
    "accumulators set through the bias at every tie and near tie, >= 10^6 outputs bit for bit",
    "qref run --backend litert",
)

_TORCH_EVIDENCE = "tests/test_matmul_torch.py against torch 2.13.0+cpu (AMD EPYC, AVX-512 VNNI)"
_TORCH_RUN = (_TORCH_EVIDENCE, "qref run --backend torch --family matmul")
_TORCH_FLOAT = IntMatmulRules(_WRAP, Requantization(), float_bias="float_accumulator")
TORCH_PROFILES = (
    Profile("torch_int_mm", "matmul", "torch 2.13 CPU torch._int_mm (int8 x int8 -> int32)",
            "The int32 accumulator of int8 x int8 products, wrapping modulo 2^32; no requantization.",
            rules=IntMatmulRules(_WRAP, Requantization(method="none")),
            sources=("aten/src/ATen/native/LinearAlgebra.cpp _int_mm_out_cpu", "docs/spec/matmul.md §6.7"),
            **_TORCH_2_13,
            evidence=(_TORCH_EVIDENCE + ": _int_mm bit for bit, int32 wrap-around at K = 131,073",
                      "qref run --backend torch --family matmul")),
    Profile("torch_fbgemm", "matmul", "torch 2.13 CPU quantized.linear, engine fbgemm (fbgemm u8 x s8 GEMM, "
            "ReQuantizeOutput) on x86-64 with AVX-512 VNNI",
            "int32 accumulator of raw u8 x s8 products (vpdpbusd: no int16 pair saturation) with the zero points "
            "corrected in int32 (wrap); multiplier fl32(fl32(a_s * w_s) / y_s); fl32(float(acc) * multiplier), "
            "_mm512_cvtps_epi32 (nearest even), + zy, clamp. A float32 bias enters in accumulator units before the "
            "multiplier: fl(fl(acc) + bias * fl(1 / fl(a_s w_s))) fused (per tensor), fl(fl(acc) + fl(bias / "
            "fl(a_s w_s[n]))) (per channel).",
            rules=_TORCH_FLOAT,
            sources=("aten/src/ATen/native/quantized/cpu/qlinear.cpp PackedLinearWeight::apply_impl",
                     "fbgemm src/QuantUtilsAvx512.cc requantizeOutputProcessingGConvAvx512 / QuantUtilsAvx2.cc "
                     "requantizeOutputProcessingAvx2", "docs/spec/matmul.md §6.7"),
            **_TORCH_2_13,
            evidence=_TORCH_RUN),
    Profile("torch_x86", "matmul", "torch 2.13 CPU quantized.linear, engine x86 (linear runs fbgemm's kernels)",
            "As torch_fbgemm.", rules=_TORCH_FLOAT,
            sources=("aten/src/ATen/native/quantized/cpu/qlinear_prepack.cpp (x86 engine: fbgemm for linear)",
                     "docs/spec/matmul.md §6.7"),
            **_TORCH_2_13,
            evidence=_TORCH_RUN),
    Profile("torch_onednn", "matmul", "torch 2.13 CPU quantized.linear, engine onednn (oneDNN int8 matmul "
            "through ideep, symmetric weights)",
            "int32 accumulator (wrap); PyTorch hands ideep the reciprocals of the scales (fl32(1.0 / s) from "
            "double), inverted back in float32; oneDNN scales float(acc) by the source scale, then the weight "
            "scale, then fl32(1 / y_s), each product rounded to float32; the output zero point is added in "
            "float32 before the rounding (nearest even), clamp. A float32 bias is added after the source and "
            "weight scale products.",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(association="sequential_reciprocal_y",
                                                scale_form="reciprocal_round_trip", zero_point="before_rounding"),
                                 float_bias="after_operand_scales"),
            sources=("aten/src/ATen/native/quantized/cpu/qlinear.cpp PackedLinearWeightsOnednn::apply_impl",
                     "aten/src/ATen/native/quantized/cpu/qlinear_prepack.cpp (weight scales stored as 1 / s)",
                     "docs/spec/matmul.md §6.7"),
            **_TORCH_2_13,
            evidence=_TORCH_RUN),
    Profile("torch_int_mm_avx2", "matmul", "torch 2.13 CPU torch._int_mm on x86-64 without AVX-512 VNNI (oneDNN's "
            "AVX2 / AVX-512 core s8s8 kernels)",
            "The s8 A operand is shifted by +128 into u8, u8 x s8 pairs summed with int16 saturation (vpmaddubsw), "
            "the shift corrected in int32 (- 128 colsum(B)), wrap. 127 x 127 pairs: (255 x 127) x 2 saturates.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16_shifted_a"),
                                 Requantization(method="none")),
            sources=("oneDNN src/cpu/x64 gemm s8s8s32 (u8 shift with compensation)", "docs/spec/matmul.md §3.2, "
                     "§6.7"),
            **_TORCH_2_13,
            evidence=(_TORCH_EVIDENCE + " with ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE): _int_mm bit for bit "
                      "(>= 10^6 edge-heavy outputs, zero points corrected in int32)",)),
    Profile("torch_fbgemm_avx2", "matmul", "torch 2.13 CPU quantized.linear, engines fbgemm / x86, on x86-64 "
            "without AVX-512 VNNI (fbgemm's AVX2 / AVX-512 u8 x s8 kernels)",
            "As torch_fbgemm, but adjacent u8 x s8 products are summed with int16 saturation (vpmaddubsw) before "
            "the int32 sum; the zero points are corrected in int32 afterwards.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16"), Requantization(),
                                 float_bias="float_accumulator"),
            sources=("fbgemm src/GenerateKernelU8S8S32ACC32.cc (vpmaddubsw, vpmaddwd)", "docs/spec/matmul.md §3.2, "
                     "§6.7"),
            **_TORCH_2_13,
            evidence=(_TORCH_EVIDENCE + " with FBGEMM_ENABLE_INSTRUCTIONS=AVX2 (and AVX512): quantized.linear bit "
                      "for bit, per tensor and per channel",)),
    Profile("torch_onednn_avx2", "matmul", "torch 2.13 CPU quantized.linear, engine onednn, on x86-64 without "
            "AVX-512 VNNI (oneDNN's AVX2 / AVX-512 core int8 kernels)",
            "As torch_onednn, but adjacent u8 x s8 products are summed with int16 saturation (vpmaddubsw), and the "
            "source and weight scales are applied as one product: fl(fl(acc) * fl(a_s' w_s')), then the bias, "
            "then * fl32(1 / y_s).",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16"),
                                 Requantization(association="sequential_ab_reciprocal_y",
                                                scale_form="reciprocal_round_trip", zero_point="before_rounding"),
                                 float_bias="after_operand_scales"),
            sources=("oneDNN src/cpu/x64 int8 brgemm / gemm kernels", "docs/spec/matmul.md §3.2, §6.7"),
            **_TORCH_2_13,
            evidence=(_TORCH_EVIDENCE + " with ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE): quantized.linear bit "
                      "for bit, per tensor and per channel",)),
    Profile("torch_qnnpack", "matmul", "torch 2.13 CPU quantized.linear, engine qnnpack (PyTorch QNNPACK q8gemm, "
            "fp32 requantization)",
            "int32 accumulator of (a - za)(w - zw) (wrap); requantization scale fl32(fl32(w_s * a_s) * fl32(1 / "
            "y_s)) (generate_requantization_scales); fl32(float(acc) * scale), nearest even, + zy, clamp. A float32 "
            "bias is quantized to int32 (rint(fl32(bias * fl32(1 / fl32(a_s w_s))))) into the accumulator.",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(association="ab_times_reciprocal_y"),
                                 float_bias="int32_accumulator"),
            sources=("aten/src/ATen/native/quantized/cpu/qlinear.cpp PackedLinearWeightsQnnp::apply_impl",
                     "aten/src/ATen/native/quantized/cpu/qnnpack/src/q8gemm/", "docs/spec/matmul.md §6.7"),
            **_TORCH_2_13,
            evidence=_TORCH_RUN),
)

# PyTorch's dynamic quantized Linear (quantized.linear_dynamic, matmul.md §15): quant_utils::ChooseQuantizationParams
#: (float64 scale, the 0.1 scale of a zero range, the 6.1e-5 floor, the smaller-error zero point; reduce_range: 7 bits)
_TORCH_DYN = DynamicQuantization(division="reciprocal", scale_arithmetic="float64", degenerate_scale=0.1,
                                 min_scale=float.fromhex("0x1.ffb48p-15"), zero_point_rule="smaller_error",
                                 zero_point_add="fused", code_max=127)
_TORCH_DYN_ONEDNN = dataclasses.replace(_TORCH_DYN, zero_point_add="before_rounding",
                                        kernel_scale="float64_reciprocal_inverted")
_FBGEMM_DYN = IntMatmulRules(_WRAP, Requantization(method="float_output"), bias="output",
                             float_bias="fused_multiply_add", dynamic=_TORCH_DYN)
_ONEDNN_DYN = IntMatmulRules(_WRAP,
                             Requantization(method="float_output", association="sequential_reciprocal_y",
                                            scale_form="reciprocal_round_trip"), bias="output",
                             dynamic=_TORCH_DYN_ONEDNN)
_TORCH_DYN_EVIDENCE = (_TORCH_EVIDENCE + ": tests/test_matmul_torch_dynamic.py, quantized.linear_dynamic under each "
                       "engine, reduce_range True and False, per-tensor and per-channel int8 weights, float bias, "
                       ">= 10^6 float32 outputs per engine bit for bit (as uint32)",
                       "qref run --backend torch --target 'torch.linear_dynamic.*'")
_DYN_SRC = ("aten/src/ATen/native/quantized/cpu/qlinear_dynamic.cpp (apply_dynamic_impl)",
            "aten/src/ATen/native/quantized/cpu/QuantUtils.h (ChooseQuantizationParams)", "docs/spec/matmul.md §15")
TORCH_DYNAMIC_PROFILES = (
    Profile("torch_fbgemm_dynamic", "matmul", "torch 2.13 CPU quantized.linear_dynamic, engines fbgemm and x86, "
            "reduce_range=True (as torch.ao.nn.quantized.dynamic.Linear calls it)",
            "A: lo = min(0, min x), hi = max(0, max x); s_d = (hi - lo) / 127 in float64 (0.1 for a zero range, "
            "floored at fl32(6.1e-5)); z from min or max by the smaller error, nearest even; q = rint(fl32(x "
            "fl32(1 / s) + z)) (one rounding, FMA), clamped to [0, 127]; int32 accumulator (wrap); y = fl32(fl32(acc) "
            "fl32(s w_s) + bias) with one rounding (FMA), per tensor and per channel.",
            rules=_FBGEMM_DYN, sources=(*_DYN_SRC, "fbgemm src/QuantUtilsAvx2.cc (QuantizeAvx2, LEGACY FMA)",
                                        "fbgemm include/fbgemm/OutputProcessing-inl.h (ReQuantizeForFloat)"),
            **_TORCH_2_13, evidence=_TORCH_DYN_EVIDENCE),
    Profile("torch_fbgemm_dynamic_8bit", "matmul", "torch 2.13 CPU quantized.linear_dynamic, engines fbgemm and x86, "
            "reduce_range=False", "As torch_fbgemm_dynamic with 8-bit codes (s_d = (hi - lo) / 255, [0, 255]).",
            rules=dataclasses.replace(_FBGEMM_DYN, dynamic=dataclasses.replace(_TORCH_DYN, code_max=255)),
            sources=_DYN_SRC, **_TORCH_2_13,
            evidence=_TORCH_DYN_EVIDENCE),
    Profile("torch_qnnpack_dynamic", "matmul", "torch 2.13 CPU quantized.linear_dynamic, engine qnnpack "
            "(reduce_range ignored: 8-bit codes)",
            "A quantized as torch_fbgemm_dynamic_8bit (at::quantize_per_tensor: fl32(x fl32(1 / s) + z), one "
            "rounding); y = fl32(fl32(fl32(acc) fl32(s w_s)) + bias): two roundings (q8gemm_dq).",
            rules=IntMatmulRules(_WRAP, Requantization(method="float_output"),
                                 bias="output", dynamic=dataclasses.replace(_TORCH_DYN, code_max=255)),
            sources=(*_DYN_SRC, "aten/src/ATen/native/quantized/cpu/qnnpack/src/q8gemm/ (dq kernels)"),
            **_TORCH_2_13, evidence=_TORCH_DYN_EVIDENCE),
    Profile("torch_onednn_dynamic", "matmul", "torch 2.13 CPU quantized.linear_dynamic, engine onednn (ideep "
            "matmul with source quantization), reduce_range=True",
            "qparams as torch_fbgemm_dynamic; ideep is handed the reciprocal of the float64 scale and oneDNN "
            "inverts it back: a' = fl32(1 / fl32(1 / s_d)); q = rint(fl32(fl32(x fl32(1 / a')) + z)) (two "
            "roundings), "
            "[0, 127]; y = fl32(fl32(fl32(fl32(acc) a') w') + bias), w' = fl32(1 / fl32(1 / w_s)).",
            rules=_ONEDNN_DYN, sources=(*_DYN_SRC, "aten/src/ATen/native/quantized/cpu/qlinear_prepack.cpp "
                                        "(weight scales stored as 1 / s)"),
            **_TORCH_2_13, evidence=_TORCH_DYN_EVIDENCE),
    Profile("torch_onednn_dynamic_8bit", "matmul", "torch 2.13 CPU quantized.linear_dynamic, engine onednn, "
            "reduce_range=False", "As torch_onednn_dynamic with 8-bit codes.",
            rules=dataclasses.replace(_ONEDNN_DYN, dynamic=dataclasses.replace(_TORCH_DYN_ONEDNN, code_max=255)),
            sources=_DYN_SRC, **_TORCH_2_13,
            evidence=_TORCH_DYN_EVIDENCE),
)

# qwix / AQT int8 dot with a dequantized float32 output (matmul.md §16)
_SEQ_FLOAT = IntMatmulRules(_WRAP,
                            Requantization(method="float_output", association="sequential_reciprocal_y"),
                            bias="output")
_JAX_DOT_EVIDENCE = ("tests/test_matmul_qwix_aqt.py against qwix 0.1.8 / aqtp 0.9.0 on jax / jaxlib 0.10.2 XLA:CPU: "
                     "int8 x int8 (and an asymmetric int8 A for qwix), per-tensor A and per-column B scales, "
                     "accumulators beyond 2^24, >= 10^6 float32 outputs per target bit for bit (as uint32)",
                     "qref run --backend qwix --backend aqt --family matmul")
JAX_DOT_PROFILES = (
    Profile("qwix_int8_dot", "matmul", "qwix 0.1.8 quantized dot_general (_fast_dot_general) on int8 QArrays, "
            "XLA:CPU, eager or jitted with the scales as arguments",
            "acc = int32 dot of the raw codes minus the int32 dot of A's zero point with B (wrap); y = "
            "fl32(fl32(fl32(acc) a_s) b_s): jnp.multiply by the lhs scale, then by the rhs scale.",
            rules=_SEQ_FLOAT, sources=("qwix/_src/core/dot_general.py (_fast_dot_general)", "docs/spec/matmul.md §16"),
            package="qwix", versions="==0.1.8", status="verified", evidence=_JAX_DOT_EVIDENCE),
    Profile("aqt_int8_dot", "matmul", "AQT (aqtp 0.9.0) int8 x int8 dot_general with DequantMode.OUTPUT "
            "(_qtensor_dot_general, QTensor.dequant), XLA:CPU, eager or jitted with the scales as arguments",
            "acc = lax.dot_general(int8, int8, preferred_element_type=int32) (wrap); dequant: fl32(acc), then "
            "ret *= s for each output scale in order (lhs, then rhs): fl32(fl32(fl32(acc) a_s) b_s).",
            rules=_SEQ_FLOAT, sources=("aqt/jax/v2/aqt_dot_general.py (_qtensor_dot_general)",
                                       "aqt/jax/v2/aqt_tensor.py (QTensor.dequant)", "docs/spec/matmul.md §16"),
            package="aqtp", versions="==0.9.0", status="verified", evidence=_JAX_DOT_EVIDENCE),
    Profile("xla_folded_scales", "matmul", "jaxlib 0.10.2 XLA:CPU under jax.jit with the dequantization scales "
            "as compile-time constants (qwix / AQT int8 dots whose scales are closed over)",
            "XLA's algebraic simplifier folds (x * c1) * c2 into x * (c1 * c2) for constants c1, c2: y = "
            "fl32(fl32(acc) fl32(a_s b_s)), one multiplier (the scales' product rounded once).",
            rules=IntMatmulRules(_WRAP, Requantization(method="float_output"),
                                 bias="output"),
            sources=("xla/hlo/transforms/simplifiers/algebraic_simplifier.cc (multiply of constants)",
                     "docs/spec/matmul.md §16"),
            package="jaxlib", versions=">=0.10,<0.11", status="verified", evidence=_JAX_DOT_EVIDENCE),
)

PROFILES = (
    Profile("exact", "matmul", "matmul.md §5.2 read with real arithmetic (the spec default of the matmul family)",
            "The exact sum (a result outside int32 is unspecified); y = clamp(round_half_even(acc * a_s * b_s / "
            "y_s) + zy) with the real quotient and one rounding.",
            rules=IntMatmulRules(IntAccumulation(overflow="exact"),
                                 Requantization(multiplier_dtype="exact", compute="exact")),
            sources=("docs/spec/matmul.md §5.2",
                     "https://onnx.ai/onnx/operators/onnx__QLinearMatMul.html"), status="spec"),
    Profile("onnxruntime", "matmul", "ONNX Runtime 1.32 CPU (MLAS) MatMulInteger / QLinearMatMul on x86-64 with "
            "AVX-512 VNNI",
            "int32 accumulator wrapping (vpdpbusd: u8 x s8 quadruples summed into int32 without int16 "
            "saturation); output scale fl32(fl32(a_s * b_s) / y_s); MlasRequantizeOutput: fl32(float(acc) * "
            "scale) (acc converted to float32 first), clamped to [lo - zy, hi - zy], _mm512_cvtps_epi32 (nearest "
            "even), + zy in int32. Float outputs (com.microsoft MatMulIntegerToFloat, DynamicQuantizeMatMul): "
            "fl32(fl32(fl32(acc) * fl32(a_s * b_s)) + bias) (MLAS_QGEMM_SCALE_BIAS_OUTPUT_PROCESSOR); QGemm: "
            "a_s replaced by fl32(alpha * a_s), C in the int32 accumulator.",
            rules=IntMatmulRules(_WRAP, Requantization()),
            sources=("onnxruntime/core/providers/cpu/quantization/quantize_linear_matmul.cc",
                     "onnxruntime/core/mlas/lib/requantize.cpp (MlasRequantizeOutput)", "docs/spec/matmul.md §6.1",
                     "onnxruntime/contrib_ops/cpu/quantization/dynamic_quantize_matmul.cc",
                     "onnxruntime/core/mlas/lib/qpostprocessor.cpp", "docs/spec/matmul.md §8.1, §9.1, §10, §11",
                     "onnxruntime/contrib_ops/cpu/quantization/qgemm.cc"),
            package="onnxruntime", versions=">=1.32,<1.33", status="verified", evidence=_ORT_EVIDENCE),
    Profile("onnxruntime_avx2", "matmul", "ONNX Runtime CPU (MLAS) u8 x s8 GEMM kernels on x86-64 without VNNI "
            "(AVX2 / AVX-512BW vpmaddubsw)",
            "As onnxruntime, but adjacent u8 x s8 products are summed with int16 saturation (vpmaddubsw) before "
            "the int32 sum; the reason quantizers use reduce_range (7-bit activations) on such CPUs.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16"), Requantization()),
            sources=("onnxruntime/core/mlas/lib/qgemm_kernel_avx2.cpp", "docs/spec/matmul.md §3.2"),
            package="onnxruntime", versions=">=1.32,<1.33", status="modelled",
            evidence=("read from MLAS; this machine's CPU has AVX-512 VNNI, whose kernel ORT selects by cpuid "
                      "(no session option masks it), so the record is not run here",)),
    Profile("onnx_reference", "matmul", "onnx 1.23 reference evaluator (onnx/reference/ops/op_qlinear_matmul.py, "
            "op_matmul_integer.py) on numpy 2",
            "int32 numpy matmul (wraps); m = fl32(fl32(a_s * b_s) / y_s); D = fl64(acc * m) (numpy 2 promotes "
            "int32 * float32 to float64); D += zy in float64; np.rint (nearest even); clip.",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(compute="float64", zero_point="before_rounding")),
            sources=("onnx/reference/ops/op_qlinear_matmul.py", "onnx/reference/ops/op_matmul_integer.py",
                     "docs/spec/matmul.md §6.2"),
            package="onnx", versions=">=1.23,<1.24", status="verified", evidence=_REF_EVIDENCE),
    Profile("gemmlowp", "matmul", "gemmlowp fixedpoint.h output pipeline (OutputStageQuantizeDownInt32ByFixedPoint)",
            "int32 wrap; m = fl64(a_s * b_s) / y_s quantized to Q31 (frexp, round half away); "
            "RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << left_shift, q), right_shift) + zy, clamp.",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(method="fixed_point", multiplier_dtype="float64")),
            sources=("gemmlowp/fixedpoint/fixedpoint.h", "tensorflow/lite/kernels/internal/common.h "
                     "MultiplyByQuantizedMultiplier", "docs/spec/matmul.md §5.3"), status="modelled"),
    Profile("tflite_single_rounding", "matmul", "TFLite reference kernels built with TFLITE_SINGLE_ROUNDING",
            "As gemmlowp, but acc * q is rounded once: (acc * q + 2^(30 - shift)) >> (31 - shift), shift <= 30.",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(method="fixed_point", multiplier_dtype="float64",
                                                fixed_point="single_rounding")),
            sources=("tensorflow/lite/kernels/internal/common.cc MultiplyByQuantizedMultiplier",
                     "docs/spec/matmul.md §5.3"), status="modelled"),
    Profile("litert_reference", "matmul", "LiteRT (ai-edge-litert 2.3) reference kernels (BUILTIN_REF): "
            "FULLY_CONNECTED and BATCH_MATMUL on int8 operands",
            "int32 accumulator; the output multiplier a_s * b_s / y_s in double (float32 scales widened), "
            "double(acc) * m rounded once in double, then half away from zero (TfLiteRound), + zy in integers, "
            "clamp: no Q31 multiplier (matmul.md §6.6).",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(multiplier_dtype="float64", compute="float64",
                                                rounding="nearest_away")),
            sources=("docs/spec/matmul.md §6.6", "tests/test_matmul_litert.py"),
            **_LITERT_2_3, evidence=_LITERT_EVIDENCE),
    Profile("litert_optimized", "matmul", "LiteRT (ai-edge-litert 2.3) optimized kernels "
            "(BUILTIN_WITHOUT_DEFAULT_DELEGATES: ruy's x86-64 AVX-512 8-bit kernel) FULLY_CONNECTED and BATCH_MATMUL",
            "int32 accumulator; per-tensor multiplier double(fl32(a_s * b_s)) / y_s, per-channel a_s * b_s / y_s "
            "in double; QuantizeMultiplier (frexp, Q31 half away, 2^31 carry); (acc 2^left * q + 2^30) >> 31 in "
            "64 bits, then (t + 2^(right - 1)) >> right: both roundings half up (matmul.md §6.6).",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(method="fixed_point", multiplier_dtype="float64",
                                                association="ab_float32_if_per_tensor",
                                                fixed_point="double_rounding_half_up")),
            sources=("ruy/kernel_avx512.cc (apply_multiplier, rounding_right_shift)",
                     "tensorflow/lite/kernels/kernel_util.cc GetQuantizedConvolutionMultipler",
                     "docs/spec/matmul.md §6.6"),
            **_LITERT_2_3, evidence=_LITERT_EVIDENCE),
    Profile("litert_xnnpack", "matmul", "LiteRT (ai-edge-litert 2.3) default interpreter (AUTO): int8 "
            "FULLY_CONNECTED / BATCH_MATMUL delegated to XNNPACK (qs8 / qc8 GEMM, fp32 requantization)",
            "int32 accumulator; scale fl32(fl32(a_s * b_s) / y_s); fl32(float(acc) * scale) (acc to float32 "
            "first), clamp, round half even (magic bias), + zy in integers (matmul.md §6.6).",
            rules=IntMatmulRules(_WRAP, Requantization()),
            sources=("XNNPACK src/qs8-gemm (fp32 requantization)", "docs/spec/matmul.md §6.6"),
            **_LITERT_2_3, evidence=_LITERT_EVIDENCE),
    Profile("litert_batch_matmul", "matmul", "LiteRT (ai-edge-litert 2.3) BATCH_MATMUL on int8 operands, "
            "reference and optimized kernels (BUILTIN_REF, BUILTIN_WITHOUT_DEFAULT_DELEGATES)",
            "int32 accumulator (zero points of both operands subtracted); m = double(fl32(a_s * b_s)) / y_s; "
            "QuantizeMultiplier (frexp, Q31 half away, 2^31 carry); gemmlowp's RoundingDivideByPOT("
            "SaturatingRoundingDoublingHighMul(acc 2^left, q), right): TFLite built without TFLITE_SINGLE_ROUNDING "
            "(matmul.md §6.6).",
            rules=IntMatmulRules(_WRAP,
                                 Requantization(method="fixed_point", multiplier_dtype="float64",
                                                association="ab_float32_if_per_tensor")),
            sources=("tensorflow/lite/kernels/internal/common.cc MultiplyByQuantizedMultiplier (double rounding)",
                     "tensorflow/lite/kernels/batch_matmul.cc", "docs/spec/matmul.md §6.6"),
            **_LITERT_2_3, evidence=_LITERT_EVIDENCE),
    Profile("dequantize_dot", "matmul", "StableHLO dot_general on quantized tensors (spec: dequantize, dot, quantize)",
            "Operands dequantized to float32 ((q - z) * s rounded), the float dot correctly rounded to float32, "
            "uniform_quantize of the result (x / y_s rounded to float32, nearest even, + zy, clamp).",
            rules=IntMatmulRules(IntAccumulation(overflow="exact"),
                                 Requantization(method="dequantize_compute_quantize")),
            sources=("https://openxla.org/stablehlo/spec#dot_general", "docs/spec/matmul.md §5.4"), status="spec"),
    Profile("xla_cpu", "matmul", "XLA:CPU (jaxlib 0.10) integer dot_general: s8 / u8 operands converted to s32, "
            "an s32 dot, int32 jnp ops",
            "The int32 accumulator wraps modulo 2^32 (K = 33,100 products of 65,025 wrap); no requantization "
            "(int32 out); the same bits with XLA_FLAGS=--xla_cpu_max_isa=AVX2.",
            rules=IntMatmulRules(_WRAP, Requantization(method="none")),
            sources=("jax.lax.dot_general (preferred_element_type=jnp.int32): HLO convert to s32, dot",
                     "docs/spec/matmul.md §6.4"),
            package="jaxlib", versions=">=0.10,<0.11", status="verified", evidence=_XLA_EVIDENCE),
    Profile("stablehlo_lowering", "matmul", "StableHLO dot_general on per-tensor !quant.uniform operands lowered by "
            "StablehloLegalizeQuantToMath (the StableHLO interpreter of torch-mlir, IREE 3.13)",
            "Storage bits sign-extended to int32 (u8 storage is read as a signless i8); raw = dot(lhs, rhs) and "
            "offset = zb sum(lhs) + za sum(rhs) - K za zb in wrapping int32; m = fl32(fl64(fl64(a_s b_s) / y_s)); "
            "when |m - 1| > 0.001: y = trunc(fl32(fl32(raw) m)) + (zy - trunc(fl32(fl32(offset) m))), else "
            "y = raw + (zy - offset), in wrapping int32; the int32 result converted to the storage by keeping its "
            "low bits (no clamp). A per-axis rhs with a per-tensor result is decomposed instead: fl32((A - za) a_s), "
            "fl32(B b_s[n]), a float32 dot in k order (products rounded, no FMA), y = rint(clamp(fl32(fl32(d / y_s) "
            "+ zy))) (matmul.md §6.3).",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", unsigned_extension="sign"),
                                 Requantization(method="zero_point_offset", multiplier_dtype="float64",
                                                compute="float32", rounding="toward_zero", unit_tolerance=0.001,
                                                narrowing="wrap"),
                                 per_axis_requantization=Requantization(
                                     method="dequantize_compute_quantize", dot="sequential_float32",
                                     zero_point="before_rounding")),
            sources=("stablehlo/transforms/StablehloLegalizeQuantToMath.cpp (matchAndRewriteDotLikeOp, "
                     "calculateZeroPointOffset)", "docs/spec/matmul.md §5.5, §6.3"),
            package="iree-base-compiler", versions="==3.13.*", status="verified", evidence=_SHLO_EVIDENCE),
    *TORCH_PROFILES,
    *TORCH_DYNAMIC_PROFILES,
    *JAX_DOT_PROFILES,
)

for _p in PROFILES:
    register_profile(_p)


# ---- vectorwise int8 (LLM.int8) and weight-only float products (matmul.md §13, §14) --------------------------
QUANT_MULTIPLIERS = ("reciprocal_times_127", "reciprocal_multiply", "divide", "reciprocal")
VW_STATS = ("absmax", "absmax_over_127_5")
DEQUANT_ASSOCIATIONS = ("stats_product_first", "left_to_right")
WEIGHT_DEQUANTS = ("float32_product",)
FLOAT_ORDERS = ("any",)


@dataclass(frozen=True)
class VectorwiseInt8Rules:
    """Row-wise absmax int8 quantization of both operands, an int32 product and a float epilogue (matmul.md §13).

    stats: the per-row statistic stored and used in the epilogue: "absmax" (s = max |x|, the codes span
        [-127, 127]) or "absmax_over_127_5" (s = max(fl32(max |x| / 127.5), float32 eps), torchao's symmetric
        choose_qparams_affine; codes are clamped to [-128, 127]) (matmul.md §13.1).
    quant_multiplier: "reciprocal" (m = fl32(1 / s): torch's 1.0 / t, scale "absmax_over_127_5"),
        "reciprocal_times_127" (m = fl32(fl32(1 / absmax) * 127): torch evaluates the scalar
        quotient 127.0 / t as t.reciprocal() * 127.0; q = round(fl32(x * m))), "reciprocal_multiply"
        (m = fl32(127 / absmax), one rounding) or "divide" (q = round(fl32(127 x / absmax)) with one rounding), per
        row of the operand (matmul.md §13.1).
    rounding: the rounding of the scaled value to int8 (matmul.md §13.1).
    accumulation: the int32 accumulation of the int8 x int8 products (matmul.md §3, §13.2).
    dequant_association: "stats_product_first" (y = fl32(fl32(fl32(acc) * fl32(rs * cs)) * c)) or
        "left_to_right" (fl32(fl32(fl32(acc) * rs) * cs) * c) (matmul.md §13.3).
    dequant_constant: the float32 constant c standing for 1 / 127^2, as a float (matmul.md §13.3): the decimal
        literal 6.200124e-05 rounded to float32, or the float32 nearest 1 / 16129; 1.0 where the stats are the
        scales themselves ("absmax_over_127_5": the product by 1 is exact).
    output: the dtype the float32 epilogue is rounded to (nearest even; "float16": the input's dtype).
    """

    quant_multiplier: str = "reciprocal_times_127"
    stats: str = "absmax"
    rounding: str = "nearest_even"
    accumulation: IntAccumulation = field(default_factory=lambda: _WRAP)
    dequant_association: str = "stats_product_first"
    dequant_constant: float = 6.200124e-05
    output: str = "float16"

    def __post_init__(self) -> None:
        check_choices({"quant_multiplier": (self.quant_multiplier, QUANT_MULTIPLIERS), "stats": (self.stats, VW_STATS),
                       "rounding": (self.rounding, ("nearest_even", "nearest_away")),
                       "dequant_association": (self.dequant_association, DEQUANT_ASSOCIATIONS),
                       "output": (self.output, ("float16", "float32", "bfloat16"))})
        if not (0 < self.dequant_constant <= 1):
            raise QrefError(f"dequant_constant must lie in (0, 1], got {self.dequant_constant!r}")

    def replace(self, **overrides: Any) -> VectorwiseInt8Rules:
        acc_f = {f.name for f in dataclasses.fields(IntAccumulation)}
        acc = dataclasses.replace(self.accumulation, **{k: v for k, v in overrides.items() if k in acc_f})
        rest = {k: v for k, v in overrides.items() if k not in acc_f}
        bad = set(rest) - {f.name for f in dataclasses.fields(self)}
        if bad:
            raise QrefError(f"unknown vectorwise int8 rule field(s) {sorted(bad)}")
        return dataclasses.replace(self, accumulation=acc, **rest)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; the accumulation's fields added after suite v1 only when not at their defaults."""
        d = dataclasses.asdict(self)
        d["accumulation"] = _without_defaults(self.accumulation, ("product", "product_width"))
        return d


@dataclass(frozen=True)
class WeightOnlyRules:
    """A float activation times lookup-quantized weights (matmul.md §14).

    weight_dequant: "float32_product" (w = fl32(table[code] * absmax), the lookup profile's dequantization).
    order: "any" (the float accumulation's order and tree are implementation-defined: a result conforms within
        the rigorous bound of recipes.md §2.3 around the exact sum).
    accumulation_dtype: the accumulator format the bound assumes; output: the result's dtype.
    """

    weight_dequant: str = "float32_product"
    order: str = "any"
    accumulation_dtype: str = "float32"
    output: str = "float32"

    def __post_init__(self) -> None:
        check_choices({"weight_dequant": (self.weight_dequant, WEIGHT_DEQUANTS), "order": (self.order, FLOAT_ORDERS),
                       "accumulation_dtype": (self.accumulation_dtype, ("float32",)),
                       "output": (self.output, ("float32",))})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_BNB_INT8_EVIDENCE = (
    "tests/test_matmul_bnb.py against bitsandbytes 0.50.2 + torch 2.13.0 CPU (AMD EPYC, AVX-512: "
    "int8_linear_matmul is torch._int_mm): int8_vectorwise_quant, int8_linear_matmul, int8_mm_dequant and "
    "bnb.matmul (MatmulLtState is_training=False, threshold 0) bit for bit on >= 10^6 outputs",
    "qref run --backend bitsandbytes --family matmul",
)

VECTORWISE_PROFILES = (
    Profile("bitsandbytes_int8", "matmul", "bitsandbytes 0.50.2 LLM.int8 (threshold 0) on CPU: "
            "int8_vectorwise_quant, int8_linear_matmul, int8_mm_dequant",
            "Per row: absmax in float32, m = fl32(fl32(1 / absmax) * 127) (torch's 127.0 / t is t.reciprocal() * "
            "127.0), q = rint(fl32(x * m)) to int8; int8 x int8 products "
            "summed in int32 (torch._int_mm with AVX-512); y = fl16(fl32(fl32(fl32(acc) * fl32(rs * cs)) * "
            "fl32(6.200124e-05))) (the decimal constant is not 1 / 127^2 = 6.2000124e-05: 1.8e-5 relative).",
            rules=VectorwiseInt8Rules(),
            sources=("bitsandbytes/backends/default/ops.py int8_vectorwise_quant, int8_mm_dequant",
                     "bitsandbytes/backends/cpu/ops.py int8_linear_matmul (torch._int_mm)",
                     "docs/spec/matmul.md §13"),
            package="bitsandbytes", versions="==0.50.2", status="verified", evidence=_BNB_INT8_EVIDENCE),
    Profile("vectorwise_spec", "matmul", "matmul.md §13 read with one rounding per step (the spec default of the "
            "vectorwise operation)",
            "m = fl32(127 / absmax) (one rounding), q = rint(fl32(x * m)); an exact int32 sum; y = fl_out(fl32(fl32("
            "fl32(acc) * fl32(rs * cs)) * fl32(1 / 127^2))).",
            rules=VectorwiseInt8Rules(quant_multiplier="reciprocal_multiply", dequant_constant=float.fromhex(
                "0x1.040c2p-14")),
            sources=("docs/spec/matmul.md §13.4",), status="spec"),
    Profile("torchao_int8_dynamic", "matmul", "torchao 0.18 Int8DynamicActivationInt8WeightConfig (PerRow, "
            "symmetric) on CPU, float32 activations",
            "Per row (activation rows and weight rows): s = max(fl32(max |x| / 127.5), eps), q = clamp(rint(fl32(x * "
            "fl32(1 / s))), -128, 127); acc = int32 sum (u8 x s8 torch._int_mm with the +128 shift compensated on "
            "VNNI CPUs without AMX: exact); y = fl32(fl32(fl32(acc) * sx) * sw).",
            rules=VectorwiseInt8Rules(quant_multiplier="reciprocal", stats="absmax_over_127_5",
                                      dequant_association="left_to_right", dequant_constant=1.0, output="float32"),
            sources=("torchao/quantization/quantize_/workflows/int8/int8_tensor.py (linear)",
                     "torchao/quantization/quant_primitives.py (choose_qparams_affine, quantize_affine)",
                     "torchao/kernel/intmm.py _int_scaled_matmul_cpu", "docs/spec/matmul.md §13.4"),
            package="torchao", versions="==0.18.0", status="verified",
            evidence=("tests/test_matmul_bnb.py against torchao 0.18 + torch 2.13.0 CPU: Int8Tensor qdata, scale "
                      "and the Linear output bit for bit",)),
    Profile("weight_only_any", "matmul", "float activations times 4-bit lookup weights dequantized to float32, "
            "accumulated in float32 in an implementation-defined order",
            "w = fl32(table[code] * absmax) (bitsandbytes' dequantize_4bit); y within the recipes.md §2.3 bound "
            "of the exact sum for float32 accumulation in any order, rounded to float32.",
            rules=WeightOnlyRules(),
            sources=("bitsandbytes/backends/default/ops.py gemm_4bit (dequantize_4bit, then linear)",
                     "docs/spec/matmul.md §14"), status="spec"),
)

for _p in VECTORWISE_PROFILES:
    register_profile(_p)


# ---- dynamic-range (hybrid) products and int16 BATCH_MATMUL of LiteRT (matmul.md §17, §6.6) ---------------------
_HYBRID_EVIDENCE = (
    "tests/test_matmul_hybrid.py against ai-edge-litert 2.3.0's Interpreter (AMD EPYC Zen 4, AVX-512): "
    "FULLY_CONNECTED float32 x int8 weights (per tensor, per channel; with and without bias; "
    "asymmetric_quantize_inputs false and true) under BUILTIN_REF, BUILTIN_WITHOUT_DEFAULT_DELEGATES and AUTO "
    "(XNNPACK), >= 10^6 float32 outputs per kernel compared as uint32, 0 mismatches; planted ties of x / s at every "
    "row position (the 8-wide vector loop and its scalar tail), weights -128 (the 16-wide sign-transfer products)",
    "qref run --backend litert --target 'litert.fully_connected_hybrid*': every hybrid_matmul task passes",
)
_LITERT_TFL_SOURCES = ("tensorflow/lite/kernels/fully_connected.cc (EvalHybrid)",
                       "tensorflow/lite/kernels/internal/optimized/sse_tensor_utils.cc "
                       "(SseMatrixBatchVectorMultiplyAccumulate)",
                       "tensorflow/lite/kernels/internal/reference/portable_tensor_utils.cc "
                       "(SymmetricQuantizeFloats, AsymmetricQuantizeFloats, MatrixBatchVectorMultiplyAccumulate)",
                       "docs/spec/matmul.md §17")


def _tfl_hybrid(scaling: str, division: str) -> HybridMatmulRules:
    return HybridMatmulRules(
        DynamicQuantization(scaling=scaling, division=division, storage="int8", granularity="per_row",
                            rounding="nearest_away", vector_rounding="add_half_truncate", vector_width=8),
        IntMatmulRules(IntAccumulation(overflow="wrap", product="abs_sign_int8", product_width=16),
                       Requantization(method="float_output"), bias="output"))


HYBRID_PROFILES = (
    Profile("litert_hybrid_symmetric", "matmul", "LiteRT (ai-edge-litert 2.3) dynamic-range FULLY_CONNECTED "
            "(float32 input, int8 weights, asymmetric_quantize_inputs false), BUILTIN_REF and "
            "BUILTIN_WITHOUT_DEFAULT_DELEGATES (the same tensor_utils code)",
            "Per row: R = max |x|, s = fl32(R / 127), v = fl32(x * fl32(127 / R)); elements 0..8 floor(K / 8) - 1 "
            "round as trunc(fl32(v + copysign(0.5, v))) (the 8-wide loop), the tail half away (std::round); "
            "codes clamped to [-127, 127]; int32 dot whose first 16 floor(K / 16) products are |q| int8(sign(q) w) "
            "(SSE pabsb / psignb: w = -128 with q < 0 gives 128 q), the tail exact; y = fl32(fl32(fl32(acc) * "
            "fl32(s * w_s[n])) + bias[n]) (no FMA).",
            rules=_tfl_hybrid("absmax_symmetric", "inverse_scale"), sources=_LITERT_TFL_SOURCES,
            **_LITERT_2_3, evidence=_HYBRID_EVIDENCE),
    Profile("litert_hybrid_asymmetric", "matmul", "LiteRT (ai-edge-litert 2.3) dynamic-range FULLY_CONNECTED with "
            "asymmetric_quantize_inputs true, BUILTIN_REF and BUILTIN_WITHOUT_DEFAULT_DELEGATES",
            "Per row: lo = min(0, min x), hi = max(0, max x); r = fl32(hi - lo); s64 = r / 255 (float64); zero "
            "point from min or max by the smaller error, in float64, half away; s = fl32(s64); v = fl32(x * "
            "fl32(1 / s)); q = clamp(round(v) + z, -128, 127) with the 8-wide loop's add-half rounding; acc = "
            "sum q w - z sum w (int32, the products as litert_hybrid_symmetric's); y as litert_hybrid_symmetric.",
            rules=_tfl_hybrid("min_max_float64_zero_point", "reciprocal"), sources=_LITERT_TFL_SOURCES,
            **_LITERT_2_3, evidence=_HYBRID_EVIDENCE),
    Profile("litert_hybrid_xnnpack", "matmul", "LiteRT (ai-edge-litert 2.3) default interpreter (AUTO): "
            "dynamic-range FULLY_CONNECTED delegated to XNNPACK (qd8-f32-qc8w GEMM), whatever "
            "asymmetric_quantize_inputs says",
            "Per row, float32: c = fl32(255 / fl32(hi - lo)), zero point rint(clamp(...)) from lo c, hi c; q = "
            "clamp(rint(fl32(x c)) + z, -128, 127); acc = sum (q - z) w (int32); y = fma(fl32(fl32(acc) * "
            "fl32(1 / c)), w_s[n], bias[n]) (one rounding of the last product and the bias).",
            rules=HybridMatmulRules(
                DynamicQuantization(scaling="min_max_inverse_scale", division="inverse_scale", storage="int8",
                                    granularity="per_row", rounding="nearest_even"),
                IntMatmulRules(_WRAP,
                               Requantization(method="float_output", association="sequential_reciprocal_y"),
                               bias="output", float_bias="fused_multiply_add")),
            sources=("XNNPACK src/xnnpack/quantization.h (xnn_f32_qd8_asymmetric_quantization_params)",
                     "XNNPACK src/qd8-f32-qc8w-gemm", "docs/spec/matmul.md §17"),
            **_LITERT_2_3, evidence=_HYBRID_EVIDENCE),
    Profile("litert_batch_matmul_int16", "matmul", "LiteRT (ai-edge-litert 2.3) BATCH_MATMUL on int16 operands "
            "(zero points 0), every kernel choice (XNNPACK does not take it)",
            "int64 accumulator (no wrap); m = double(fl32(a_s * b_s)) / y_s; QuantizeMultiplier (Q31); the Q31 "
            "multiplier reduced to Q15 ((q + 2^15) >> 16, at most 2^15 - 1); y = (acc q15 + 2^(14 - shift)) >> "
            "(15 - shift): one rounding half up; clamp to int16.",
            rules=IntMatmulRules(IntAccumulation(overflow="int64"),
                                 Requantization(method="fixed_point", multiplier_dtype="float64",
                                                association="ab_float32_if_per_tensor",
                                                fixed_point="single_rounding_q15")),
            sources=("tensorflow/lite/kernels/internal/common.h MultiplyByQuantizedMultiplier(int64_t, ...)",
                     "tensorflow/lite/kernels/batch_matmul.cc", "docs/spec/matmul.md §6.6"),
            **_LITERT_2_3,
            evidence=("tests/test_matmul_hybrid.py against ai-edge-litert 2.3.0: int16 BATCH_MATMUL under "
                      "BUILTIN_REF, BUILTIN_WITHOUT_DEFAULT_DELEGATES and AUTO, >= 10^6 outputs bit for bit, sums "
                      "beyond int32",)),
)

for _p in HYBRID_PROFILES:
    register_profile(_p)

HYBRID_SPEC = Profile(
    "hybrid_spec", "matmul", "matmul.md §17 read with one scalar rounding per step (the spec default of the "
    "hybrid operation)",
    "Per row: R = max |x|, s = fl32(R / 127), v = fl32(x * fl32(127 / R)), q = round_half_away(v) clamped to "
    "[-127, 127] at every position; int32 dot; y = fl32(fl32(fl32(acc) * fl32(s * w_s[n])) + bias[n]).",
    rules=HybridMatmulRules(), sources=("docs/spec/matmul.md §17.4",), status="spec")
register_profile(HYBRID_SPEC)


__all__ = ["ASSOCIATIONS", "BIAS_STAGES", "COMPUTE_DTYPES", "DEQUANT_ASSOCIATIONS", "DOTS", "DYNAMIC_DIVISIONS",
           "DYNAMIC_GRANULARITIES", "DYNAMIC_KERNEL_SCALES", "DYNAMIC_SCALE_ARITHMETICS", "DYNAMIC_SCALINGS",
           "DYNAMIC_STORAGES", "DYNAMIC_ZERO_POINT_ADDS", "DYNAMIC_ZERO_POINT_RULES", "FIXED_POINT_FORMS",
           "FLOAT_BIASES", "FLOAT_ORDERS", "HYBRID_PROFILES", "HYBRID_SPEC", "JAX_DOT_PROFILES", "METHODS",
           "MULTIPLIER_DTYPES", "NARROWINGS", "NBITS_COMPUTES", "OVERFLOWS", "PAIR_SUMS", "PRODUCTS", "PROFILES",
           "QUANT_MULTIPLIERS", "ROUNDINGS", "SCALE_FORMS", "SEQUENTIAL", "TORCH_DYNAMIC_PROFILES", "TORCH_PROFILES",
           "UNSIGNED_EXTENSIONS", "VECTORWISE_PROFILES", "VECTOR_ROUNDINGS", "VW_STATS", "WEIGHT_DEQUANTS",
           "ZERO_POINT_STAGES", "DynamicQuantization", "HybridMatmulRules", "IntAccumulation", "IntMatmulRules",
           "NBitsCompute", "Requantization", "VectorwiseInt8Rules", "WeightOnlyRules"]
