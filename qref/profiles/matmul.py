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
from .base import Profile, register_profile

OVERFLOWS = ("wrap", "saturate", "exact")
PAIR_SUMS = (None, "saturating_int16")
METHODS = ("none", "float_multiply", "fixed_point", "dequantize_compute_quantize")
MULTIPLIER_DTYPES = ("float32", "float64", "exact")
ASSOCIATIONS = ("ab_then_y", "a_then_b_over_y")
COMPUTE_DTYPES = ("float32", "float64", "exact")
ZERO_POINT_STAGES = ("after_rounding", "before_rounding")
ROUNDINGS = ("nearest_even", "nearest_away", "nearest_up", "toward_zero")
FIXED_POINT_FORMS = ("double_rounding", "single_rounding")
BIAS_STAGES = ("accumulator",)


@dataclass(frozen=True)
class IntAccumulation:
    """How sum_k (A - za)(B - zb) (+ bias) is accumulated (matmul.md §3).

    overflow: "wrap" (the int32 accumulator wraps modulo 2^32: two's complement adds), "saturate" (every partial
        sum, in k order, saturates to the int32 range) or "exact" (the exact sum, held in int64; a result outside
        int32 is unspecified).
    pair_sum: None (every product enters the int32 sum) or "saturating_int16" (u8 x s8 operands: the raw
        products of adjacent pairs a[2i] b[2i] + a[2i+1] b[2i+1] are summed with int16 saturation before the
        int32 sum, as x86 vpmaddubsw does; zero points are corrected afterwards in int32, matmul.md §3.2).
    """

    overflow: str = "wrap"
    pair_sum: str | None = None

    def __post_init__(self) -> None:
        check_choice("overflow", self.overflow, OVERFLOWS)
        if self.pair_sum not in PAIR_SUMS:
            raise QrefError(f"pair_sum must be None or 'saturating_int16', got {self.pair_sum!r}")


@dataclass(frozen=True)
class Requantization:
    """How the int32 accumulator becomes output codes (matmul.md §5).

    method: "none" (the int32 accumulator is the output, §5.1), "float_multiply" (y = clamp(round(acc * m) + zy)
        with m = a_s b_s / y_s in floating point, §5.2), "fixed_point" (m quantized to an int32 Q31 multiplier
        and a shift; SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, or one rounding, §5.3) or
        "dequantize_compute_quantize" (both operands dequantized to float32, dotted, the dot quantized, §5.4).
    multiplier_dtype: the dtype m is computed in ("float32", "float64", or "exact": the real quotient).
    association: "ab_then_y" (m = (a_s * b_s) / y_s) or "a_then_b_over_y" (m = a_s * (b_s / y_s)).
    compute: the dtype of acc * m ("float32": acc is first converted to float32, nearest even; "float64": acc is
        exact in float64, one rounding of the product; "exact": no rounding before the final one).
    zero_point: "after_rounding" (round(acc * m) + zy in integers) or "before_rounding" (fl(acc * m + zy) in the
        compute dtype, then round).
    rounding: the rounding of the final value to an integer (float_multiply, dequantize_compute_quantize).
    fixed_point: "double_rounding" (gemmlowp: SaturatingRoundingDoublingHighMul, RoundingDivideByPOT) or
        "single_rounding" (one rounding of acc * q / 2^(31 - shift), half up).
    """

    method: str = "float_multiply"
    multiplier_dtype: str = "float32"
    association: str = "ab_then_y"
    compute: str = "float32"
    zero_point: str = "after_rounding"
    rounding: str = "nearest_even"
    fixed_point: str = "double_rounding"

    def __post_init__(self) -> None:
        check_choice("method", self.method, METHODS)
        check_choice("multiplier_dtype", self.multiplier_dtype, MULTIPLIER_DTYPES)
        check_choice("association", self.association, ASSOCIATIONS)
        check_choice("compute", self.compute, COMPUTE_DTYPES)
        check_choice("zero_point", self.zero_point, ZERO_POINT_STAGES)
        check_choice("rounding", self.rounding, ROUNDINGS)
        check_choice("fixed_point", self.fixed_point, FIXED_POINT_FORMS)
        if self.zero_point == "before_rounding" and self.compute == "exact":
            raise QrefError("zero_point='before_rounding' adds in the compute dtype; with compute='exact' the "
                            "stage makes no difference: use 'after_rounding'")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class IntMatmulRules:
    """The rules of a quantized integer matmul (matmul.md §3-§5): accumulation, where the bias enters
    ("accumulator": an int32 bias added to the accumulator under its overflow rule, §4) and requantization."""

    accumulation: IntAccumulation = field(default_factory=IntAccumulation)
    requantization: Requantization = field(default_factory=Requantization)
    bias: str = "accumulator"

    def __post_init__(self) -> None:
        check_choice("bias", self.bias, BIAS_STAGES)

    def replace(self, **overrides: Any) -> IntMatmulRules:
        """A copy with fields of the accumulation or requantization record overridden by name."""
        acc_f = {f.name for f in dataclasses.fields(IntAccumulation)}
        req_f = {f.name for f in dataclasses.fields(Requantization)}
        bad = set(overrides) - acc_f - req_f - {"bias"}
        if bad:
            raise QrefError(f"unknown matmul rule field(s) {sorted(bad)}; fields: {sorted(acc_f | req_f)}")
        acc = dataclasses.replace(self.accumulation, **{k: v for k, v in overrides.items() if k in acc_f})
        req = dataclasses.replace(self.requantization, **{k: v for k, v in overrides.items() if k in req_f})
        return IntMatmulRules(acc, req, overrides.get("bias", self.bias))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_ORT_EVIDENCE = (
    "tests/test_matmul.py against onnxruntime 1.32.0 CPUExecutionProvider (AMD EPYC, AVX-512 VNNI): MatMulInteger "
    "and QLinearMatMul, u8/s8 operands, per-tensor and per-column B scales and zero points, >= 10^6 outputs bit "
    "for bit; int32 wrap-around and u8 x s8 pairs at 255 x -128 (no int16 saturation on VNNI)",
    "qref run --backend onnxruntime --family matmul: every matmul task passes",
)
_REF_EVIDENCE = (
    "tests/test_matmul.py against onnx 1.23.2 onnx.reference.ReferenceEvaluator (numpy 2.4: int32 * float32 "
    "promotes to float64): QLinearMatMul and MatMulInteger bit for bit",
    "qref run --backend onnx_reference --family matmul",
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
            "even), + zy in int32.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"), Requantization()),
            sources=("onnxruntime/core/providers/cpu/quantization/quantize_linear_matmul.cc",
                     "onnxruntime/core/mlas/lib/requantize.cpp (MlasRequantizeOutput)", "docs/spec/matmul.md §6.1"),
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
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"),
                                 Requantization(compute="float64", zero_point="before_rounding")),
            sources=("onnx/reference/ops/op_qlinear_matmul.py", "onnx/reference/ops/op_matmul_integer.py",
                     "docs/spec/matmul.md §6.2"),
            package="onnx", versions=">=1.23,<1.24", status="verified", evidence=_REF_EVIDENCE),
    Profile("gemmlowp", "matmul", "gemmlowp fixedpoint.h output pipeline (OutputStageQuantizeDownInt32ByFixedPoint)",
            "int32 wrap; m = fl64(a_s * b_s) / y_s quantized to Q31 (frexp, round half away); "
            "RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << left_shift, q), right_shift) + zy, clamp.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"),
                                 Requantization(method="fixed_point", multiplier_dtype="float64")),
            sources=("gemmlowp/fixedpoint/fixedpoint.h", "tensorflow/lite/kernels/internal/common.h "
                     "MultiplyByQuantizedMultiplier", "docs/spec/matmul.md §5.3"), status="modelled"),
    Profile("tflite_single_rounding", "matmul", "TFLite reference kernels built with TFLITE_SINGLE_ROUNDING",
            "As gemmlowp, but acc * q is rounded once: (acc * q + 2^(30 - shift)) >> (31 - shift), shift <= 30.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"),
                                 Requantization(method="fixed_point", multiplier_dtype="float64",
                                                fixed_point="single_rounding")),
            sources=("tensorflow/lite/kernels/internal/common.cc MultiplyByQuantizedMultiplier",
                     "docs/spec/matmul.md §5.3"), status="modelled"),
    Profile("dequantize_dot", "matmul", "StableHLO dot_general on quantized tensors (spec: dequantize, dot, quantize)",
            "Operands dequantized to float32 ((q - z) * s rounded), the float dot correctly rounded to float32, "
            "uniform_quantize of the result (x / y_s rounded to float32, nearest even, + zy, clamp).",
            rules=IntMatmulRules(IntAccumulation(overflow="exact"),
                                 Requantization(method="dequantize_compute_quantize")),
            sources=("https://openxla.org/stablehlo/spec#dot_general", "docs/spec/matmul.md §5.4"), status="spec"),
)

for _p in PROFILES:
    register_profile(_p)


# ---- vectorwise int8 (LLM.int8) and weight-only float products (matmul.md §8, §9) --------------------------
QUANT_MULTIPLIERS = ("reciprocal_times_127", "reciprocal_multiply", "divide", "reciprocal")
VW_STATS = ("absmax", "absmax_over_127_5")
DEQUANT_ASSOCIATIONS = ("stats_product_first", "left_to_right")
WEIGHT_DEQUANTS = ("float32_product",)
FLOAT_ORDERS = ("any",)


@dataclass(frozen=True)
class VectorwiseInt8Rules:
    """Row-wise absmax int8 quantization of both operands, an int32 product and a float epilogue (matmul.md §8).

    stats: the per-row statistic stored and used in the epilogue: "absmax" (s = max |x|, the codes span
        [-127, 127]) or "absmax_over_127_5" (s = max(fl32(max |x| / 127.5), float32 eps), torchao's symmetric
        choose_qparams_affine; codes are clamped to [-128, 127]) (matmul.md §8.1).
    quant_multiplier: "reciprocal" (m = fl32(1 / s): torch's 1.0 / t, scale "absmax_over_127_5"),
        "reciprocal_times_127" (m = fl32(fl32(1 / absmax) * 127): torch evaluates the scalar
        quotient 127.0 / t as t.reciprocal() * 127.0; q = round(fl32(x * m))), "reciprocal_multiply"
        (m = fl32(127 / absmax), one rounding) or "divide" (q = round(fl32(127 x / absmax)) with one rounding), per
        row of the operand (matmul.md §8.1).
    rounding: the rounding of the scaled value to int8 (matmul.md §8.1).
    accumulation: the int32 accumulation of the int8 x int8 products (matmul.md §3, §8.2).
    dequant_association: "stats_product_first" (y = fl32(fl32(fl32(acc) * fl32(rs * cs)) * c)) or
        "left_to_right" (fl32(fl32(fl32(acc) * rs) * cs) * c) (matmul.md §8.3).
    dequant_constant: the float32 constant c standing for 1 / 127^2, as a float (matmul.md §8.3): the decimal
        literal 6.200124e-05 rounded to float32, or the float32 nearest 1 / 16129; 1.0 where the stats are the
        scales themselves ("absmax_over_127_5": the product by 1 is exact).
    output: the dtype the float32 epilogue is rounded to (nearest even; "float16": the input's dtype).
    """

    quant_multiplier: str = "reciprocal_times_127"
    stats: str = "absmax"
    rounding: str = "nearest_even"
    accumulation: IntAccumulation = field(default_factory=lambda: IntAccumulation(overflow="wrap"))
    dequant_association: str = "stats_product_first"
    dequant_constant: float = 6.200124e-05
    output: str = "float16"

    def __post_init__(self) -> None:
        check_choice("quant_multiplier", self.quant_multiplier, QUANT_MULTIPLIERS)
        check_choice("stats", self.stats, VW_STATS)
        check_choice("rounding", self.rounding, ("nearest_even", "nearest_away"))
        check_choice("dequant_association", self.dequant_association, DEQUANT_ASSOCIATIONS)
        check_choice("output", self.output, ("float16", "float32", "bfloat16"))
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
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class WeightOnlyRules:
    """A float activation times lookup-quantized weights (matmul.md §9).

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
        check_choice("weight_dequant", self.weight_dequant, WEIGHT_DEQUANTS)
        check_choice("order", self.order, FLOAT_ORDERS)
        check_choice("accumulation_dtype", self.accumulation_dtype, ("float32",))
        check_choice("output", self.output, ("float32",))

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
                     "docs/spec/matmul.md §8"),
            package="bitsandbytes", versions="==0.50.2", status="verified", evidence=_BNB_INT8_EVIDENCE),
    Profile("vectorwise_spec", "matmul", "matmul.md §8 read with one rounding per step (the spec default of the "
            "vectorwise operation)",
            "m = fl32(127 / absmax) (one rounding), q = rint(fl32(x * m)); an exact int32 sum; y = fl_out(fl32(fl32("
            "fl32(acc) * fl32(rs * cs)) * fl32(1 / 127^2))).",
            rules=VectorwiseInt8Rules(quant_multiplier="reciprocal_multiply", dequant_constant=float.fromhex(
                "0x1.040c2p-14")),
            sources=("docs/spec/matmul.md §8.4",), status="spec"),
    Profile("torchao_int8_dynamic", "matmul", "torchao 0.18 Int8DynamicActivationInt8WeightConfig (PerRow, "
            "symmetric) on CPU, float32 activations",
            "Per row (activation rows and weight rows): s = max(fl32(max |x| / 127.5), eps), q = clamp(rint(fl32(x * "
            "fl32(1 / s))), -128, 127); acc = int32 sum (u8 x s8 torch._int_mm with the +128 shift compensated on "
            "VNNI CPUs without AMX: exact); y = fl32(fl32(fl32(acc) * sx) * sw).",
            rules=VectorwiseInt8Rules(quant_multiplier="reciprocal", stats="absmax_over_127_5",
                                      dequant_association="left_to_right", dequant_constant=1.0, output="float32"),
            sources=("torchao/quantization/quantize_/workflows/int8/int8_tensor.py (linear)",
                     "torchao/quantization/quant_primitives.py (choose_qparams_affine, quantize_affine)",
                     "torchao/kernel/intmm.py _int_scaled_matmul_cpu", "docs/spec/matmul.md §8.4"),
            package="torchao", versions="==0.18.0", status="verified",
            evidence=("tests/test_matmul_bnb.py against torchao 0.18 + torch 2.13.0 CPU: Int8Tensor qdata, scale "
                      "and the Linear output bit for bit",)),
    Profile("weight_only_any", "matmul", "float activations times 4-bit lookup weights dequantized to float32, "
            "accumulated in float32 in an implementation-defined order",
            "w = fl32(table[code] * absmax) (bitsandbytes' dequantize_4bit); y within the recipes.md §2.3 bound "
            "of the exact sum for float32 accumulation in any order, rounded to float32.",
            rules=WeightOnlyRules(),
            sources=("bitsandbytes/backends/default/ops.py gemm_4bit (dequantize_4bit, then linear)",
                     "docs/spec/matmul.md §9"), status="spec"),
)

for _p in VECTORWISE_PROFILES:
    register_profile(_p)
