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
PAIR_SUMS = (None, "saturating_int16", "saturating_int16_shifted_a")
METHODS = ("none", "float_multiply", "fixed_point", "dequantize_compute_quantize")
MULTIPLIER_DTYPES = ("float32", "float64", "exact")
ASSOCIATIONS = ("ab_then_y", "a_then_b_over_y", "ab_times_reciprocal_y", "sequential_reciprocal_y",
                "sequential_ab_reciprocal_y")
SEQUENTIAL = ("sequential_reciprocal_y", "sequential_ab_reciprocal_y")
SCALE_FORMS = ("as_given", "reciprocal_round_trip")
COMPUTE_DTYPES = ("float32", "float64", "exact")
ZERO_POINT_STAGES = ("after_rounding", "before_rounding")
ROUNDINGS = ("nearest_even", "nearest_away", "nearest_up", "toward_zero")
FIXED_POINT_FORMS = ("double_rounding", "single_rounding")
BIAS_STAGES = ("accumulator",)
FLOAT_BIASES = ("exact", "float_accumulator", "int32_accumulator", "after_operand_scales")


@dataclass(frozen=True)
class IntAccumulation:
    """How sum_k (A - za)(B - zb) (+ bias) is accumulated (matmul.md §3).

    overflow: "wrap" (the int32 accumulator wraps modulo 2^32: two's complement adds), "saturate" (every partial
        sum, in k order, saturates to the int32 range) or "exact" (the exact sum, held in int64; a result outside
        int32 is unspecified).
    pair_sum: None (every product enters the int32 sum) or "saturating_int16" (u8 x s8 operands: the raw
        products of adjacent pairs a[2i] b[2i] + a[2i+1] b[2i+1] are summed with int16 saturation before the
        int32 sum, as x86 vpmaddubsw does; zero points are corrected afterwards in int32, matmul.md §3.2) or
        "saturating_int16_shifted_a" (as "saturating_int16"; an int8 A is first shifted by +128 into uint8 and
        the shift corrected in int32 with the zero points: s8 x s8 run on the u8 x s8 instruction, §3.2).
    """

    overflow: str = "wrap"
    pair_sum: str | None = None

    def __post_init__(self) -> None:
        check_choice("overflow", self.overflow, OVERFLOWS)
        if self.pair_sum not in PAIR_SUMS:
            raise QrefError(f"pair_sum must be one of {PAIR_SUMS}, got {self.pair_sum!r}")


@dataclass(frozen=True)
class Requantization:
    """How the int32 accumulator becomes output codes (matmul.md §5).

    method: "none" (the int32 accumulator is the output, §5.1), "float_multiply" (y = clamp(round(acc * m) + zy)
        with m = a_s b_s / y_s in floating point, §5.2), "fixed_point" (m quantized to an int32 Q31 multiplier
        and a shift; SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, or one rounding, §5.3) or
        "dequantize_compute_quantize" (both operands dequantized to float32, dotted, the dot quantized, §5.4).
    multiplier_dtype: the dtype m is computed in ("float32", "float64", or "exact": the real quotient).
    association: "ab_then_y" (m = (a_s * b_s) / y_s), "a_then_b_over_y" (m = a_s * (b_s / y_s)) or
        "ab_times_reciprocal_y" (m = (a_s * b_s) * (1 / y_s), each step rounded) or "sequential_reciprocal_y"
        (no single multiplier: v = ((acc * a_s) * b_s) * (1 / y_s), every product and 1 / y_s rounded to the
        compute dtype) or "sequential_ab_reciprocal_y" (v = (acc * fl(a_s * b_s)) * (1 / y_s); matmul.md §5.2).
    scale_form: "as_given" (a_s and b_s enter as they are) or "reciprocal_round_trip" (held as reciprocals
        fl32(fl64(1 / s)) and inverted back in float32: s' = fl32(1 / fl32(1 / s)), matmul.md §5.2).
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
    scale_form: str = "as_given"

    def __post_init__(self) -> None:
        check_choice("method", self.method, METHODS)
        check_choice("multiplier_dtype", self.multiplier_dtype, MULTIPLIER_DTYPES)
        check_choice("association", self.association, ASSOCIATIONS)
        check_choice("compute", self.compute, COMPUTE_DTYPES)
        check_choice("zero_point", self.zero_point, ZERO_POINT_STAGES)
        check_choice("rounding", self.rounding, ROUNDINGS)
        check_choice("fixed_point", self.fixed_point, FIXED_POINT_FORMS)
        check_choice("scale_form", self.scale_form, SCALE_FORMS)
        if (self.association in SEQUENTIAL or self.scale_form != "as_given") and (
                self.method != "float_multiply" or "exact" in (self.compute, self.multiplier_dtype)):
            raise QrefError("the sequential associations and scale_form 'reciprocal_round_trip' are "
                            "float_multiply steps in a float compute and multiplier dtype (matmul.md §5.2)")
        if self.zero_point == "before_rounding" and self.compute == "exact":
            raise QrefError("zero_point='before_rounding' adds in the compute dtype; with compute='exact' the "
                            "stage makes no difference: use 'after_rounding'")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; ``scale_form`` (added after suite v1) only when it is not "as_given", so the
        rules recorded in v1's case params keep their bytes."""
        d = dataclasses.asdict(self)
        if d["scale_form"] == "as_given":
            del d["scale_form"]
        return d


@dataclass(frozen=True)
class IntMatmulRules:
    """The rules of a quantized integer matmul (matmul.md §3-§5): accumulation, where the bias enters
    ("accumulator": an int32 bias added to the accumulator under its overflow rule, §4), where a float32 bias
    enters (``float_bias``, §4.1) and requantization.

    float_bias: "exact" (real arithmetic: (acc a_s b_s + bias) / y_s rounded once; needs compute "exact"),
        "float_accumulator" (added to fl(acc) before the multiplier, in the compute dtype: per tensor
        fl(fl(acc) + bias * fl(1 / fl(a_s b_s))) with one rounding, a fused multiply-add; per column
        fl(fl(acc) + fl(bias / fl(a_s b_s[n])))), "int32_accumulator" (round_half_even(fl32(bias *
        fl32(1 / fl32(a_s b_s)))) added to the int32 accumulator) or "after_operand_scales" (added to
        fl(fl(fl(acc) a_s) b_s), before the 1 / y_s product: association "sequential_reciprocal_y").
    """

    accumulation: IntAccumulation = field(default_factory=IntAccumulation)
    requantization: Requantization = field(default_factory=Requantization)
    bias: str = "accumulator"
    float_bias: str = "exact"

    def __post_init__(self) -> None:
        check_choice("bias", self.bias, BIAS_STAGES)
        check_choice("float_bias", self.float_bias, FLOAT_BIASES)

    def replace(self, **overrides: Any) -> IntMatmulRules:
        """A copy with fields of the accumulation or requantization record overridden by name."""
        acc_f = {f.name for f in dataclasses.fields(IntAccumulation)}
        req_f = {f.name for f in dataclasses.fields(Requantization)}
        bad = set(overrides) - acc_f - req_f - {"bias", "float_bias"}
        if bad:
            raise QrefError(f"unknown matmul rule field(s) {sorted(bad)}; fields: {sorted(acc_f | req_f)}")
        acc = dataclasses.replace(self.accumulation, **{k: v for k, v in overrides.items() if k in acc_f})
        req = dataclasses.replace(self.requantization, **{k: v for k, v in overrides.items() if k in req_f})
        return IntMatmulRules(acc, req, overrides.get("bias", self.bias),
                              overrides.get("float_bias", self.float_bias))

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; ``float_bias`` (added after suite v1) only when it is not "exact"."""
        d = {"accumulation": dataclasses.asdict(self.accumulation), "requantization": self.requantization.to_dict(),
             "bias": self.bias}
        if self.float_bias != "exact":
            d["float_bias"] = self.float_bias
        return d


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

_TORCH_EVIDENCE = "tests/test_matmul_torch.py against torch 2.13.0+cpu (AMD EPYC, AVX-512 VNNI)"
_TORCH_FLOAT = IntMatmulRules(IntAccumulation(overflow="wrap"), Requantization(), float_bias="float_accumulator")
TORCH_PROFILES = (
    Profile("torch_int_mm", "matmul", "torch 2.13 CPU torch._int_mm (int8 x int8 -> int32)",
            "The int32 accumulator of int8 x int8 products, wrapping modulo 2^32; no requantization.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"), Requantization(method="none")),
            sources=("aten/src/ATen/native/LinearAlgebra.cpp _int_mm_out_cpu", "docs/spec/matmul.md §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
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
                     "requantizeOutputProcessingAvx2", "docs/spec/matmul.md §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE, "qref run --backend torch --family matmul")),
    Profile("torch_x86", "matmul", "torch 2.13 CPU quantized.linear, engine x86 (linear runs fbgemm's kernels)",
            "As torch_fbgemm.", rules=_TORCH_FLOAT,
            sources=("aten/src/ATen/native/quantized/cpu/qlinear_prepack.cpp (x86 engine: fbgemm for linear)",
                     "docs/spec/matmul.md §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE, "qref run --backend torch --family matmul")),
    Profile("torch_onednn", "matmul", "torch 2.13 CPU quantized.linear, engine onednn (oneDNN int8 matmul "
            "through ideep, symmetric weights)",
            "int32 accumulator (wrap); PyTorch hands ideep the reciprocals of the scales (fl32(1.0 / s) from "
            "double), inverted back in float32; oneDNN scales float(acc) by the source scale, then the weight "
            "scale, then fl32(1 / y_s), each product rounded to float32; the output zero point is added in "
            "float32 before the rounding (nearest even), clamp. A float32 bias is added after the source and "
            "weight scale products.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"),
                                 Requantization(association="sequential_reciprocal_y",
                                                scale_form="reciprocal_round_trip", zero_point="before_rounding"),
                                 float_bias="after_operand_scales"),
            sources=("aten/src/ATen/native/quantized/cpu/qlinear.cpp PackedLinearWeightsOnednn::apply_impl",
                     "aten/src/ATen/native/quantized/cpu/qlinear_prepack.cpp (weight scales stored as 1 / s)",
                     "docs/spec/matmul.md §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE, "qref run --backend torch --family matmul")),
    Profile("torch_int_mm_avx2", "matmul", "torch 2.13 CPU torch._int_mm on x86-64 without AVX-512 VNNI (oneDNN's "
            "AVX2 / AVX-512 core s8s8 kernels)",
            "The s8 A operand is shifted by +128 into u8, u8 x s8 pairs summed with int16 saturation (vpmaddubsw), "
            "the shift corrected in int32 (- 128 colsum(B)), wrap. 127 x 127 pairs: (255 x 127) x 2 saturates.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16_shifted_a"),
                                 Requantization(method="none")),
            sources=("oneDNN src/cpu/x64 gemm s8s8s32 (u8 shift with compensation)", "docs/spec/matmul.md §3.2, "
                     "§6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE + " with ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE): _int_mm bit for bit "
                      "(>= 10^6 edge-heavy outputs, zero points corrected in int32)",)),
    Profile("torch_fbgemm_avx2", "matmul", "torch 2.13 CPU quantized.linear, engines fbgemm / x86, on x86-64 "
            "without AVX-512 VNNI (fbgemm's AVX2 / AVX-512 u8 x s8 kernels)",
            "As torch_fbgemm, but adjacent u8 x s8 products are summed with int16 saturation (vpmaddubsw) before "
            "the int32 sum; the zero points are corrected in int32 afterwards.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap", pair_sum="saturating_int16"), Requantization(),
                                 float_bias="float_accumulator"),
            sources=("fbgemm src/GenerateKernelU8S8S32ACC32.cc (vpmaddubsw, vpmaddwd)", "docs/spec/matmul.md §3.2, "
                     "§6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
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
            sources=("oneDNN src/cpu/x64 int8 brgemm / gemm kernels", "docs/spec/matmul.md §3.2, §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE + " with ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE): quantized.linear bit "
                      "for bit, per tensor and per channel",)),
    Profile("torch_qnnpack", "matmul", "torch 2.13 CPU quantized.linear, engine qnnpack (PyTorch QNNPACK q8gemm, "
            "fp32 requantization)",
            "int32 accumulator of (a - za)(w - zw) (wrap); requantization scale fl32(fl32(w_s * a_s) * fl32(1 / "
            "y_s)) (generate_requantization_scales); fl32(float(acc) * scale), nearest even, + zy, clamp. A float32 "
            "bias is quantized to int32 (rint(fl32(bias * fl32(1 / fl32(a_s w_s))))) into the accumulator.",
            rules=IntMatmulRules(IntAccumulation(overflow="wrap"),
                                 Requantization(association="ab_times_reciprocal_y"),
                                 float_bias="int32_accumulator"),
            sources=("aten/src/ATen/native/quantized/cpu/qlinear.cpp PackedLinearWeightsQnnp::apply_impl",
                     "aten/src/ATen/native/quantized/cpu/qnnpack/src/q8gemm/", "docs/spec/matmul.md §6.3"),
            package="torch", versions=">=2.13,<2.14", status="verified",
            evidence=(_TORCH_EVIDENCE, "qref run --backend torch --family matmul")),
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
    *TORCH_PROFILES,
)

for _p in PROFILES:
    register_profile(_p)
