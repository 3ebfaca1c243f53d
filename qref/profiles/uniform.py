"""Uniform (affine) profiles as data (spec: uniform.md §3, §4; profiles.md).

``UniformArithmetic`` is the typed, frozen record of every step a real system takes in quantize / dequantize
(uniform.md §3); each uniform ``Profile`` carries one as ``profile.rules``. Field values name
mechanisms (``divide``, ``nearest_away``, ``after_rounding``), never systems. This module imports only
qref.errors, qref.formats.policy and the profile base (one way: qref.schemes imports it, never the reverse).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import QrefError, check_choice, unknown_name
from ..formats.policy import EXPONENT_MODES, ROUNDING_MODES, STOCHASTIC_MODES
from .base import Profile, check_choices, register_profile

COMPUTE_DTYPES = ("expressed", "input", "float16", "bfloat16", "float32", "float64")
SCALE_OPS = ("divide", "reciprocal")
ZERO_POINT_STAGES = ("after_rounding", "after_rounding_float", "before_rounding", "fused")
CLAMPS = ("integer", "float")
CONVERSIONS = ("saturate", "storage", "int32")
NAN_RULES = ("unspecified", "zero")
ZERO_POINT_RANGES = ("check", "wrap")
SCALE_SOURCES = ("expressed", "float64")
DQ_SUBTRACT = ("expressed", "float32", "int64", "int32", "storage")
DQ_MULTIPLY = ("expressed", "float32", "float64", "at_least_float32")
DQ_FORMS = ("subtract", "multiply_add", "fma")
CONSTANT_RULES = ("round", "unspecified")
#: how q is formed from the input range [il, ih] of a FakeQuantize (uniform.md §2.8); "none": x / s + z
RANGE_FORMS = ("none", "scale_shift", "normalize")
ROUNDINGS = tuple(m for m in ROUNDING_MODES if m not in STOCHASTIC_MODES and m not in ("ml_dtypes", *EXPONENT_MODES))
#: the modes of the final rounding: the deterministic ones and P3109's stochastic ones (uniform.md §2.6)
FINAL_ROUNDINGS = (*ROUNDINGS, *STOCHASTIC_MODES)


@dataclass(frozen=True)
class UniformArithmetic:
    """Every step of uniform quantize/dequantize (uniform.md §3). Defaults are the ``stablehlo`` profile.

    compute: dtype of the scaling arithmetic: "expressed" (the scheme's expressed type), "input" (the input
        array's float dtype, as JAX libraries do), or a fixed "float16"/"bfloat16"/"float32"/"float64".
    input_dtypes: input dtypes the system accepts (None: any real dtype); others raise QrefError.
    scale_op: "divide" (x / s) or "reciprocal" (x * fl(1 / s), both roundings in the compute dtype).
    scale_source: "expressed" (a scale is a value of the expressed type: it is rounded to it first) or
        "float64" (the system keeps scales as float64 and rounds them straight to each step's dtype).
    zero_point: "after_rounding" (round(q) + z exactly, in integers), "after_rounding_float" (fl(round(q) +
        fl(z)) in the compute dtype), "before_rounding" (fl(q + z) in the compute dtype, then round) or "fused"
        (fl(x * fl(1/s) + z) with one rounding, an FMA; float32 only).
    clamp: "float" (clamp to [cast(lo), cast(hi)] in the compute dtype before rounding) or "integer"
        (saturate the rounded integer).
    rounding: the rounding of the final float value to an integer: a deterministic qref rounding mode, or
        stochastic_a / stochastic_b / stochastic_c (P3109) with ``stochastic_bits`` = N random bits per element,
        given to quantize as random_bits= or seed= (uniform.md §2.6). Default "nearest_even".
    conversion: where the float-to-integer conversion is defined: "saturate" (everywhere: it saturates),
        "storage" (only inside the full storage range, e.g. LLVM fptosi; outside: unspecified), "int32"
        (only inside int32, e.g. C++ static_cast<int32_t>; outside: unspecified).
    nan: a NaN input gives "unspecified" or the code of "zero" (a convert that maps NaN to 0).
    narrow_symmetric: clamp to [-hi, hi] instead of [lo, hi] (a symmetric clip).
    zero_point_range: zero points outside the storage range "check" (raise) or "wrap" (modulo 2^bits, as an
        MLIR integer attribute of the storage type does).
    constants: a zero point or storage bound that the compute dtype cannot hold exactly is "round"ed (RNE)
        or makes the affected results "unspecified" (a convert that is TBD there).
    dq_subtract: dtype of (code - z) in dequantize: a float dtype name, "expressed", "int64" (exact),
        "int32" (wraps) or "storage" (the storage type: overflow is unspecified).
    dq_multiply: dtype of the multiplication by the scale: "expressed", "float32", "float64",
        "at_least_float32" (numpy promotion of float32 with the expressed type).
    dq_form: "subtract" ((code - z) * s as above), "multiply_add" (fl32(fl32(code * s) + c) with the
        constant c = fl32(-z * s) computed in float64: a vector multiply-add without fusion, uniform.md §2.2) or
        "fma" (fl32(code * s + c), one rounding: a fused multiply-add with the same c).
    float_saturate: float storage only: overflow saturates to +-max (saturate=1) or follows the format's
        default (NaN for E4M3FN, Inf for E5M2: saturate=0).
    bf16_upcast: bfloat16 compute runs in float32 (a bfloat16 normalization pass): with scale_op="reciprocal"
        the scaled value is fl_bf16(fl32(x * fl32(1 / s))); with "divide" fl_bf16(fl32(x / s)).
    flush_subnormals: FTZ/DAZ when the compute dtype is float32 or bfloat16: x, s, fl(1 / s) and the
        dequantize product below 2^-126 in magnitude read as zeros of their sign (uniform.md §2.3).
    reciprocal_inf: "keep" (fl(1 / s) = Inf scales by Inf) or "one" (an infinite reciprocal becomes 1).
    simd_width: 0 (every element takes the fields above) or W > 0: a vector loop over whole groups of W
        elements and a scalar remainder loop (uniform.md §2.4). Per tensor, the flattened elements before
        floor(n / W) * W take the fields above; the remainder, and every element of a per-axis or blocked
        scheme, takes ``remainder_scale_op`` and ``remainder_rounding`` and dequantizes with dq_form "subtract".
    remainder_scale_op / remainder_rounding: the scalar loop's scale_op and rounding (simd_width > 0 only).
    remainder_compute: None (the scalar loop computes in ``compute``) or the compute dtype of the per-tensor
        scalar remainder only (a kernel whose tail loop works in double: fl64(x) / fl64(s)); per-axis and blocked
        schemes keep ``compute`` (simd_width > 0 only; uniform.md §2.4).
    stochastic_bits: N for the stochastic rounding modes (None otherwise).
    range_form: "none" (x / s + z as above) or a FakeQuantize with input range il = fl32((lo - z) * s), ih =
        fl32((hi - z) * s), n = hi - lo levels minus one and output range [lo, hi] (uniform.md §2.8):
        "scale_shift" (clamp x to [il, ih], t = fl32(fl32(x * isc) - fl32(il * isc)), isc = fl32(n / fl32(ih -
        il)): a precomputed input scale and shift, two roundings) or "normalize" (x <= il: lo, x > ih: hi, else
        t = fl32(fl32(fl32(x - il) / fl32(ih - il)) * n)); q = fl32(fl32(fl32(round(t) / n) * n) + lo). Needs
        compute "float32", a deterministic rounding, no vector loop, integer storage. A general float output
        range (ol, oh) is ``reference.fake_quantize`` with the profile's FakeQuantizeRule (FAKE_QUANTIZE_RULES).
    """

    compute: str = "expressed"
    input_dtypes: tuple[str, ...] | None = None
    scale_op: str = "divide"
    scale_source: str = "expressed"
    zero_point: str = "before_rounding"
    clamp: str = "float"
    rounding: str = "nearest_even"
    conversion: str = "storage"
    nan: str = "unspecified"
    narrow_symmetric: bool = False
    zero_point_range: str = "check"
    constants: str = "unspecified"
    dq_subtract: str = "storage"
    dq_multiply: str = "expressed"
    dq_form: str = "subtract"
    float_saturate: bool = True
    bf16_upcast: bool = False
    flush_subnormals: bool = False
    reciprocal_inf: str = "keep"
    simd_width: int = 0
    remainder_scale_op: str = "divide"
    remainder_rounding: str = "nearest_away"
    remainder_compute: str | None = None
    stochastic_bits: int | None = None
    range_form: str = "none"

    def __post_init__(self) -> None:
        check_choices({"compute dtype": (self.compute, COMPUTE_DTYPES), "scale_op": (self.scale_op, SCALE_OPS),
                       "scale_source": (self.scale_source, SCALE_SOURCES),
                       "zero_point stage": (self.zero_point, ZERO_POINT_STAGES), "clamp": (self.clamp, CLAMPS),
                       "rounding mode": (self.rounding, FINAL_ROUNDINGS), "conversion": (self.conversion, CONVERSIONS),
                       "nan rule": (self.nan, NAN_RULES),
                       "zero_point_range": (self.zero_point_range, ZERO_POINT_RANGES),
                       "constants rule": (self.constants, CONSTANT_RULES),
                       "dq_subtract": (self.dq_subtract, DQ_SUBTRACT), "dq_multiply": (self.dq_multiply, DQ_MULTIPLY),
                       "dq_form": (self.dq_form, DQ_FORMS), "reciprocal_inf": (self.reciprocal_inf, ("keep", "one")),
                       "remainder_scale_op": (self.remainder_scale_op, SCALE_OPS),
                       "remainder_rounding": (self.remainder_rounding, ROUNDINGS),
                       "range_form": (self.range_form, RANGE_FORMS)})
        if self.rounding in STOCHASTIC_MODES:
            n = self.stochastic_bits
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 62:
                raise QrefError(f"rounding={self.rounding!r} needs stochastic_bits=N (1..62 random bits per element, "
                                f"uniform.md §2.6), got {n!r}")
            if self.simd_width:
                raise QrefError("stochastic rounding with a vector loop (simd_width > 0) is not defined")
        elif self.stochastic_bits is not None:
            raise QrefError(f"stochastic_bits is for the stochastic rounding modes, got rounding={self.rounding!r}")
        if self.range_form != "none" and (self.compute != "float32" or self.simd_width
                                          or self.rounding not in ROUNDINGS):
            raise QrefError(f"range_form={self.range_form!r} (a FakeQuantize, uniform.md §2.8) is defined for "
                            "compute='float32', a deterministic rounding and no vector loop (simd_width=0)")
        if self.remainder_compute is not None:
            check_choice("remainder_compute", self.remainder_compute, COMPUTE_DTYPES)
        if self.input_dtypes is not None:
            object.__setattr__(self, "input_dtypes", tuple(self.input_dtypes))
        if self.zero_point == "fused" and (self.scale_op != "reciprocal" or self.compute != "float32"):
            raise QrefError("zero_point='fused' (an FMA) needs scale_op='reciprocal' and compute='float32'")
        if not isinstance(self.simd_width, int) or isinstance(self.simd_width, bool) or self.simd_width < 0:
            raise QrefError(f"simd_width must be an integer >= 0 (0: no vector loop), got {self.simd_width!r}")
        if self.dq_form == "multiply_add" and (self.dq_subtract not in ("int64", "int32")
                                               or self.dq_multiply not in ("float32", "float64")):
            raise QrefError("dq_form='multiply_add' is defined for integer subtraction (dq_subtract int64/int32) "
                            "and a float32/float64 multiply; set dq_form='subtract' otherwise")
        if self.dq_form == "fma" and (self.dq_subtract not in ("int64", "int32", "float32")
                                      or self.dq_multiply != "float32"):
            raise QrefError("dq_form='fma' is defined for a float32 multiply (dq_multiply='float32') of integer "
                            "codes; set dq_form='subtract' otherwise")

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; dq_form and the vector-loop fields are left out at their defaults, so the
        specs of schemes without a vector loop read exactly as before those fields existed."""
        d = dataclasses.asdict(self)
        if d["input_dtypes"] is not None:
            d["input_dtypes"] = list(d["input_dtypes"])
        for f in _OPTIONAL_FIELDS:
            if d[f] == _DEFAULTS[f]:
                del d[f]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UniformArithmetic:
        """Inverse of ``to_dict`` (specs written before a field existed take its default)."""
        ar = dict(d)
        if ar.get("input_dtypes") is not None:
            ar["input_dtypes"] = tuple(ar["input_dtypes"])
        return cls(**ar)

    def remainder(self, tail: bool = True) -> UniformArithmetic:
        """The scalar remainder loop's arithmetic (simd_width > 0, uniform.md §2.4): of the per-tensor tail
        (``tail``, which takes remainder_compute) or of every element of a per-axis / blocked scheme."""
        compute = self.remainder_compute if tail and self.remainder_compute is not None else self.compute
        return dataclasses.replace(self, scale_op=self.remainder_scale_op, rounding=self.remainder_rounding,
                                   compute=compute, remainder_compute=None,
                                   dq_form="subtract", simd_width=0)


ARITHMETIC_FIELDS = tuple(f.name for f in dataclasses.fields(UniformArithmetic))
_OPTIONAL_FIELDS = ("dq_form", "simd_width", "remainder_scale_op", "remainder_rounding", "remainder_compute",
                    "stochastic_bits", "range_form")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(UniformArithmetic)}

# ---------------------------------------------------------------------------------------------------------
# profiles (uniform.md §4): data, each with the system and version it reproduces
# ---------------------------------------------------------------------------------------------------------
_ONNX = UniformArithmetic(compute="expressed", scale_op="divide", zero_point="after_rounding", clamp="integer",
                          rounding="nearest_even", conversion="saturate", nan="unspecified", constants="round",
                          dq_subtract="float32", dq_multiply="at_least_float32")
_TFLITE_REF = UniformArithmetic(compute="float32", input_dtypes=("float32",), scale_op="divide",
                                zero_point="after_rounding", clamp="integer", rounding="nearest_away",
                                conversion="int32", nan="unspecified", constants="round", dq_subtract="int64",
                                dq_multiply="float64")
#: float32 kernels (PyTorch, XNNPACK, the StableHLO lowering): x * fl32(1 / s) with the zero point in one FMA,
#: saturated; float32 constants and a float32 dequantize. Their records below replace what differs.
_FLOAT32_FMA = UniformArithmetic(compute="float32", input_dtypes=("float32",), scale_op="reciprocal",
                                 zero_point="fused", clamp="integer", rounding="nearest_even", conversion="saturate",
                                 nan="unspecified", constants="round", dq_subtract="float32", dq_multiply="float32")
#: float32 kernels that widen float16 / bfloat16 inputs first (PyTorch's decomposed and fake-quantize ops)
_FLOAT32_WIDENED = dataclasses.replace(_FLOAT32_FMA, input_dtypes=("float32", "float16", "bfloat16"))
#: XLA:CPU's arithmetic in the input's dtype: x / s rewritten to x * fl(1 / s), the zero point added after
#: rounding in that dtype, bfloat16 computed in float32, float32 FTZ/DAZ, a saturating astype (NaN -> 0)
_XLA = UniformArithmetic(compute="input", scale_op="reciprocal", zero_point="after_rounding_float", clamp="integer",
                         rounding="nearest_even", conversion="saturate", nan="zero", constants="round",
                         dq_subtract="expressed", dq_multiply="expressed", bf16_upcast=True, flush_subnormals=True)
_TFLITE_TEST = "tests/test_uniform_tflite.py"
_BACKENDS = "tests/test_uniform_backends.py"


PROFILES: tuple[Profile, ...] = (
    Profile(
        "stablehlo", "uniform", "StableHLO specification (docs/spec.md, 'Quantization computations')",
        "q = round_nearest_even(clamp(lo, x / s + z, hi)) in the expressed type; NaN, and conversions the "
        "expressed type cannot hold exactly, are TBD (unspecified); dequantize subtracts in the storage type.",
        rules=UniformArithmetic(),
        sources=("openxla/stablehlo docs/spec.md §Quantization computations, §convert, §Errors",),
        status="spec",
        evidence=("specification: no code to run; the hand-derived examples of uniform.md §4.2 are "
                  "tests/test_uniform.py",),
    ),
    Profile(
        "stablehlo_lowering", "uniform", "StableHLO StablehloLegalizeQuantToMath (stablehlo 2026-08, IREE, "
        "reference interpreter)",
        "float32 input only; scale, zero point and storage bounds become float32 constants (RNE); "
        "q = round_nearest_even(clamp(x / s + z)); dequantize subtracts in int32 and multiplies in float32.",
        rules=dataclasses.replace(_FLOAT32_FMA, scale_op="divide", zero_point="before_rounding", clamp="float",
                                  conversion="storage", dq_subtract="int32"),
        sources=("openxla/stablehlo stablehlo/transforms/StablehloLegalizeQuantToMath.cpp",),
        package="iree-base-compiler", versions="==3.13.*", status="verified",
        evidence=(f"{_BACKENDS}::test_iree_stablehlo_uniform_quantize: IREE 3.13 compiles stablehlo."
                  "uniform_quantize, per tensor int8/ui8 and per axis, tie-heavy inputs (> 5,000 compared), "
                  "0 mismatches",
                  "tests/test_harness.py::test_uniform_targets_on_temporary_cases: the StableHLO interpreter "
                  "(torch-mlir 20261001) and IREE on the hand-built uniform cases, all pass"),
    ),
    Profile(
        "onnx", "uniform", "ONNX QuantizeLinear/DequantizeLinear opsets 19-25 (onnx 1.23.2 reference, "
        "onnxruntime 1.32)",
        "y = saturate(round_half_even(x / y_scale) + zero_point), division in the scale's type (or "
        "`precision`); fp8/fp4 outputs are a Cast with `saturate`; DequantizeLinear = (x - zp) * scale in "
        "float32 (float64 for float64 scales), then cast to the output type.",
        rules=_ONNX,
        sources=("onnx/defs QuantizeLinear-19..25, DequantizeLinear-19..25",
                 "onnx/reference/ops/op_quantize_linear.py, op_dequantize_linear.py"),
        package="onnx", versions="==1.23.2", status="verified",
        evidence=(f"{_BACKENDS}::test_onnx_reference_*: the onnx 1.23.2 reference, opsets 19/21/23/25, "
                  "int2..uint16, per axis, blocked, precision, fp8 saturate 0/1, DequantizeLinear f32/f16, "
                  "tie-heavy sampled inputs, 0 mismatches",
                  f"{_BACKENDS}::test_onnxruntime_*: onnxruntime 1.32.0 CPU int8/uint8/int16/uint16 with +-Inf "
                  "and huge values, per axis, blocked (> 10,000 compared), 0 mismatches",
                  "tests/test_uniform_onnx_interop.py: the 8 onnx backend node cases with a (1,) zero point "
                  "and a scalar scale, against their expected outputs and onnxruntime 1.32 (7 of 8: onnxruntime "
                  "has no float4e2m1 DequantizeLinear), 0 mismatches",
                  "tests/test_onnx_node_cases.py: all 27 QuantizeLinear / DequantizeLinear node cases onnx 1.23.2 "
                  "generates, inputs as the typed arrays onnx gives: 26 equal, 1 listed (float4e2m1 of -0: the "
                  "reference's + zero_point makes +0, uniform.md §1 (C5)); precision, output_dtype, blocked "
                  "axis -1, saturate 0/1, typed E8M0 / float16 / bfloat16 scales against the onnx reference"),
    ),
    Profile(
        "onnxruntime", "uniform", "onnxruntime 1.32 CPU QuantizeLinear/DequantizeLinear (int4..int16 outputs)",
        "As 'onnx', with float16 x and scale widened to float32 for the division (x / s, round half even, + z); "
        "ONNX's reference divides in float16. int2/uint2 (opset 25) divide in float16: use 'onnx' there.",
        rules=dataclasses.replace(_ONNX, compute="float32"),
        sources=("onnxruntime/core/providers/cpu/quantization/quantize_linear.cc",
                 "checked against onnxruntime 1.32.0 CPU (tests/test_uniform_backends.py)"),
        package="onnxruntime", versions="==1.32.0", status="verified",
        evidence=(f"{_BACKENDS}::test_onnxruntime_profile_float16_divides_in_float32: float16 x and scale, "
                  "int4..int16, tie-heavy sampled inputs (> 2,000 compared), 0 mismatches",),
    ),
    Profile(
        "mlir", "uniform", "MLIR quant dialect lower-quant-ops (LowerQuantOps.cpp, LLVM 2026)",
        "q = fptosi(x / s + sitofp(z)) in the expressed type: truncation toward zero; results outside the "
        "storage type are poison (unspecified); narrowed ranges are clamped in the integer domain; zero "
        "points wrap to the storage width; dequantize = (sitofp(q) - sitofp(z)) * s in the expressed type.",
        rules=dataclasses.replace(_ONNX, zero_point="before_rounding", rounding="toward_zero", conversion="storage",
                                  zero_point_range="wrap", dq_subtract="expressed", dq_multiply="expressed"),
        sources=("llvm-project mlir/lib/Dialect/Quant/Transforms/LowerQuantOps.cpp",
                 "mlir/test/Dialect/Quant/lower-quant-ops.mlir", "LLVM LangRef fptosi/fptoui"),
        package="torch-mlir", versions="==20261001", status="verified",
        evidence=("tests/test_harness.py::test_uniform_targets_on_temporary_cases[mlir]: upstream MLIR's "
                  "lower-quant-ops (torch-mlir 20261001) on the hand-built uniform cases (ties with odd zero "
                  "points, per axis, blocked, all codes), all pass",),
    ),
    Profile(
        "tflite", "uniform", "TFLite reference kernels (reference_ops::AffineQuantize / Dequantize; "
        "ai-edge-litert 2.3 BUILTIN_REF, and every per-axis QUANTIZE/DEQUANTIZE)",
        "q = clamp(static_cast<int32>(std::round(x / float(scale))) + z): round half away from zero in "
        "float32; outside int32 the cast is undefined; dequantize = float(double(scale) * (q - z)).",
        rules=_TFLITE_REF,
        sources=("tensorflow/lite/kernels/internal/reference/quantize.h",
                 "tensorflow/lite/kernels/internal/reference/dequantize.h"),
        package="ai-edge-litert", versions="==2.3.0", status="verified",
        evidence=(f"{_TFLITE_TEST}: ai-edge-litert 2.3.0 Interpreter, QUANTIZE/DEQUANTIZE flatbuffers, "
                  "OpResolverType.BUILTIN_REF, int8/uint8/int16, per tensor and per axis, ties and +-1..2 ulp at "
                  "20 scales, zero points at the extremes, huge/NaN/Inf inputs; sampled, 0 mismatches on the "
                  "specified elements (int32 overflow and NaN are unspecified: INT_MIN on x86-64)",),
    ),
    Profile(
        "tflite_optimized", "uniform", "TFLite optimized kernels (optimized_ops::AffineQuantize / Dequantize "
        "through NEON_2_SSE on x86-64; ai-edge-litert 2.3 BUILTIN_WITHOUT_DEFAULT_DELEGATES, and int16 "
        "QUANTIZE under the default interpreter)",
        "Per tensor: a vector loop over groups of 8 elements, q = clamp(cvt_rne(x * fl32(1 / s)) + z), "
        "dequantize fl32(fl32(q * s) + fl32(-z * double(s))); the last n mod 8 elements: q = clamp(round_half_away("
        "double(x) / double(s)) + z) (a double division, not the reference's float32 one), dequantize as 'tflite'; "
        "per-axis schemes run the reference loop ('tflite'). Outside int32 and NaN: unspecified (INT_MIN on "
        "x86-64).",
        rules=dataclasses.replace(_TFLITE_REF, scale_op="reciprocal", rounding="nearest_even", dq_form="multiply_add",
                                  simd_width=8, remainder_scale_op="divide", remainder_rounding="nearest_away",
                                  remainder_compute="float64"),
        sources=("tensorflow/lite/kernels/internal/optimized/optimized_ops.h AffineQuantize, Dequantize",
                 "tensorflow/lite/kernels/quantize.cc, dequantize.cc"),
        package="ai-edge-litert", versions="==2.3.0", status="verified",
        evidence=(f"{_TFLITE_TEST}: OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES and the default "
                  "interpreter's int16 path; ties at 20 scales in tensors whose length is not a multiple of 8, "
                  "every int8/uint8 code dequantized at 25 scales and odd zero points; sampled, 0 mismatches",),
    ),
    Profile(
        "tflite_xnnpack", "uniform", "TFLite's default interpreter on int8/uint8 per-tensor QUANTIZE / "
        "DEQUANTIZE (the XNNPACK delegate, ai-edge-litert 2.3, x86-64)",
        "q = clamp(round_half_even(x * fl32(1 / s)) + z), saturating (+-Inf -> the bounds); float32 FTZ/DAZ (a "
        "subnormal x reads 0, a scale above 2^126 scales by 0); NaN unspecified (gives the upper bound here); "
        "dequantize = fl32((q - z) * s). Not expressed: a scale below 2^-126 crashes the process; per-axis "
        "and int16 QUANTIZE are not delegated (use 'tflite', 'tflite_optimized').",
        rules=dataclasses.replace(_FLOAT32_FMA, zero_point="after_rounding", dq_subtract="int64",
                                  flush_subnormals=True),
        sources=("XNNPACK f32-qs8-vcvt / f32-qu8-vcvt, qs8-f32-vcvt microkernels (the TFLite XNNPACK delegate)",),
        package="ai-edge-litert", versions="==2.3.0", status="verified",
        evidence=(f"{_TFLITE_TEST}: OpResolverType.AUTO (XNNPACK delegate), int8/uint8 per tensor, ties at 20 "
                  "scales, zero points at the extremes, subnormal inputs, scales above 2^126, +-Inf and huge "
                  "inputs; sampled, 0 mismatches on the specified elements",),
    ),
    Profile(
        "pytorch", "uniform", "PyTorch 2.13 CPU quantize_per_tensor (qint8/quint8, FBGEMM, x86-64 with FMA)",
        "q = nearbyint(fma(x, 1.0f / float(scale), float(z))) then saturate: one rounding for x * inv + z; "
        "dequantize = (float(q) - float(z)) * float(scale) in float32.",
        rules=_FLOAT32_FMA,
        sources=("pytorch aten/src/ATen/native/quantized/AffineQuantizer.cpp, fbgemm QuantUtilsAvx2",
                 "checked against torch 2.13.0+cpu (tests/test_uniform_backends.py)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=(f"{_BACKENDS}::test_pytorch_quantize_per_tensor_and_channel, test_pytorch_dequantize: "
                  "qint8/quint8 tie-heavy sampled inputs (> 100,000 compared), 0 mismatches",),
    ),
    Profile(
        "pytorch_per_channel", "uniform", "PyTorch 2.13 CPU quantize_per_channel (and qint32 per tensor quantize)",
        "q = nearbyint(fl(fl(x * (1.0f / float(scale))) + float(z))) then saturate; dequantize = "
        "float((float(q) - float(z)) * double(scale)). qint32 per-tensor dequantize is 'pytorch' with "
        "dq_subtract='int32' (q - z wrapping in int32, then float32).",
        rules=dataclasses.replace(_FLOAT32_FMA, scale_source="float64", zero_point="before_rounding",
                                  dq_multiply="float64"),
        sources=("pytorch aten/src/ATen/native/quantized/affine_quantizer_base.cpp quantize_val",
                 "checked against torch 2.13.0+cpu (tests/test_uniform_backends.py)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=(f"{_BACKENDS}::test_pytorch_quantize_per_tensor_and_channel, test_pytorch_dequantize, "
                  "test_pytorch_qint32_per_tensor_dequantize_subtracts_in_int32: per channel and qint32, "
                  "tie-heavy sampled inputs, 0 mismatches",),
    ),
    Profile(
        "openvino", "uniform", "OpenVINO 2026.4 weight decompression folded at compile time (Convert, Subtract "
        "zero point, Multiply scale on constant u8/i8/u4/i4/u2 weights: the core's constant folding)",
        "dequantize = fl32(fl32(float(q) - float(z)) * s) with z and s float32 constants (the subtraction is exact "
        "for these widths); quantize = a folded FakeQuantize(x, fl32((lo - z) s), fl32((hi - z) s), lo, hi, "
        "levels 15 / 16 / 255 / 256, ranges per tensor or per axis): t = fl32(fl32(fl32(x - il) / fl32(ih - il)) * n), "
        "x <= il -> lo, x > ih -> hi, "
        "q = lo + nearbyint(t) (range_form 'normalize', uniform.md §2.8); float32 input.",
        rules=(UniformArithmetic(compute="float32", input_dtypes=("float32",), scale_op="divide",
                                 zero_point="after_rounding", clamp="integer", rounding="nearest_even",
                                 conversion="saturate", nan="unspecified", constants="round", dq_subtract="float32",
                                 dq_multiply="float32", range_form="normalize")),
        sources=("openvino src/plugins/intel_cpu (Convert, Eltwise Subtract / Multiply on f32)",
                 "openvino src/core/reference/include/openvino/reference/fake_quantize.hpp (constant folding)",
                 "checked against openvino 2026.4.1 CPU (tests/test_openvino_targets.py)"),
        package="openvino", versions="==2026.4.*", status="verified",
        evidence=("tests/test_openvino_targets.py: u8/i8/u4/i4 codes with odd zero points at the storage ends and "
                  "scales, per tensor and per axis, the codes a folded Constant; qref run --backend openvino "
                  "(openvino.decompress.constant): 0 mismatches",
                  "tests/test_openvino_targets.py::test_fake_quantize_forms: FakeQuantize on a Constant, every tie "
                  "(k + 1/2) s and its float32 neighbours, 4/8-bit and narrowed ranges: 0 mismatches; qref run "
                  "(openvino.fake_quantize.constant, 15/16/255/256 levels per tensor and per axis: 113 tasks pass, "
                  "35,064 values compared; blocks: 4 xfail tasks, 120 values, folded op by op, uniform.md §2.8 C8)",
                  "scripts/verify_openvino_fq.py (openvino 2026.4.1, AMD EPYC Zen 4): general float output ranges "
                  "(FAKE_QUANTIZE_RULES['openvino']) on a Constant, levels 3..65536, per tensor, per axis and "
                  "along several axes, ties and random: 276 configurations, 1,162,282 values, 0 mismatches"),
    ),
    Profile(
        "openvino_cpu", "uniform", "OpenVINO 2026.4 CPU plugin running the weight decompression on runtime codes "
        "(Convert, Subtract zero point, Multiply scale with a Parameter input)",
        "dequantize = fl32(float(q) * s + c) with one rounding, c = fl32(-z * s): the plugin fuses Subtract and "
        "Multiply into one multiply-add (an FMA: (q - z) = 0 gives the FMA's residue, -7.45e-9 for q = z = 3, "
        "s = fl32(0.1)); quantize = FakeQuantize(x, fl32((lo - z) s), fl32((hi - z) s), lo, hi) decomposed by "
        "Snippets: t = fl32(fl32(clamp(x, il, ih) * isc) - fl32(il * isc)), isc = fl32(n / fl32(ih - il)), "
        "q = lo + round_half_even(t) (range_form 'scale_shift', uniform.md §2.8); float32 input.",
        rules=(UniformArithmetic(compute="float32", input_dtypes=("float32",), scale_op="divide",
                                 zero_point="after_rounding", clamp="integer", rounding="nearest_even",
                                 conversion="saturate", nan="unspecified", constants="round", dq_subtract="int64",
                                 dq_multiply="float32", dq_form="fma", range_form="scale_shift")),
        sources=("openvino src/common/snippets/src/pass/fq_decomposition.cpp (FakeQuantizeDecomposition)",
                 "openvino src/plugins/intel_cpu: Convert, Subtract and Multiply fused into one Snippets subgraph "
                 "(runtime model layer type Subgraph), which emits a fused multiply-add on x86-64 with FMA",
                 "checked against openvino 2026.4.1 CPU (tests/test_openvino_targets.py)"),
        package="openvino", versions="==2026.4.*", status="verified",
        evidence=("tests/test_openvino_targets.py: every u8 code with zero points 3/127/200 and 4 scales, "
                  "Parameter input, against an independent float64 computation of the single rounding; qref run "
                  "--backend openvino (openvino.decompress.parameter): 0 mismatches",
                  "tests/test_openvino_targets.py::test_fake_quantize_forms: FakeQuantize on a Parameter, every tie "
                  "(k + 1/2) s and its float32 neighbours, 4/8/16-bit and narrowed ranges: 0 mismatches; qref run "
                  "(openvino.fake_quantize.parameter, per tensor / per axis / blocks: 151 tasks, 44,730 values): 0 "
                  "mismatches",
                  "scripts/verify_openvino_fq.py (openvino 2026.4.1, AMD EPYC Zen 4, also ONEDNN_MAX_CPU_ISA=AVX2): "
                  "general float output ranges (FAKE_QUANTIZE_RULES['openvino_cpu']: the recomposed output range, "
                  "the FMA output step) on a Parameter, levels 3..65536, per tensor, per axis and along several "
                  "axes, ties and random: 299 configurations, 1,127,423 values, 0 mismatches; with "
                  "ONEDNN_MAX_CPU_ISA=SSE41 the per-tensor graphs take output_step 'multiply_add' (uniform.md "
                  "§2.8 C9)"),
    ),
    Profile(
        "pytorch_fake_quantize", "uniform", "PyTorch 2.13 CPU fake_quantize_per_tensor_affine / "
        "fake_quantize_per_channel_affine (eager; torch.compile(fullgraph=True) cannot trace them)",
        "q = clamp(z + nearbyint(x * (1.0f / float(scale))), quant_min, quant_max): the product rounded to float32, "
        "rounded half to even, the zero point added as an integer, saturated (+-Inf to the bounds); the output is "
        "(q - z) * scale in float32 (float16 / bfloat16 inputs: widened to float32, the output rounded from that "
        "float32 product to their type). float64 inputs are outside the profile (uniform.md §4.4 F4). NaN: "
        "unspecified.",
        rules=dataclasses.replace(_FLOAT32_WIDENED, zero_point="after_rounding"),
        sources=("pytorch v2.13.0 aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp "
                 "(fake_quantize_tensor_cachemask_kernel, fake_quant_per_channel_cachemask_cpu)",
                 "checked against torch 2.13.0+cpu (tests/test_torch_quant_ops.py)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=("tests/test_torch_quant_ops.py::test_fake_quantize_per_tensor_and_channel, "
                  "test_fake_quantize_gradient_mask: ties at x / s = k + 1/2 and their neighbours, clamp "
                  "boundaries, NaN/Inf, subnormal scales, 8/4/16-bit ranges (1,160,642 outputs, 56,856 gradients); "
                  "0 mismatches on the specified elements (per channel: beyond int64 left out, uniform.md §4.4 F3)",
                  "tests/test_torch_quant_peer.py: PyTorch's own fake-quantize test cases, all equal",
                  "tests/test_torch_observers.py::test_fake_quantize_input_dtypes (float16 / bfloat16 inputs), "
                  "test_fake_quantize_module (FakeQuantize with its observers)",
                  "tests/test_torch_fake_quantize_grad.py: the gradient mask (uniform.md §4.4 F5) of both kernels "
                  "against an independent oracle, 8/4/16-bit ranges, ties and their one-ulp neighbours at the "
                  "clamp bounds, NaN/Inf, subnormal scales; qref run --backend torch on uniform/fake_quantize_grad/*: "
                  "codes and grad_mask, 0 mismatches"),
    ),
    Profile(
        "pytorch_decomposed", "uniform", "PyTorch 2.13 PT2E decomposed ops quantized_decomposed."
        "quantize_per_tensor / quantize_per_channel / dequantize_per_tensor / dequantize_per_channel (eager and "
        "Inductor CPU)",
        "q = clamp(round(x * fl32(1 / scale)) + z, quant_min, quant_max).to(dtype) in float32: the reciprocal of "
        "the scale rounded to float32, the product rounded, rounded half to even, the zero point added in "
        "float32; dequantize = (float(q) - z) * scale in float32 (out_dtype: in that type). NaN: unspecified.",
        rules=dataclasses.replace(_FLOAT32_WIDENED, zero_point="after_rounding_float", dq_subtract="expressed",
                                  dq_multiply="expressed"),
        sources=("pytorch v2.13.0 torch/ao/quantization/fx/_decomposed.py (quantize_per_tensor, "
                 "dequantize_per_tensor, quantize_per_channel, dequantize_per_channel)",
                 "pytorch v2.13.0 torch/_inductor/lowering.py (quantized_decomposed_* lowerings)",
                 "checked against torch 2.13.0+cpu (tests/test_torch_quant_ops.py)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=("tests/test_torch_quant_ops.py::test_decomposed_quantize_dequantize: eager and torch.compile, "
                  "int8/uint8/int16/int4 ranges, per tensor and per channel, ties, clamp boundaries, NaN/Inf, "
                  "subnormal scales; 0 mismatches on the specified elements",),
    ),
    Profile(
        "pytorch_decomposed_per_token", "uniform", "PyTorch 2.13 PT2E decomposed ops quantized_decomposed."
        "quantize_per_token / dequantize_per_token with float32 scales (eager and Inductor CPU)",
        "q = clamp(round(x * fl32(1 / s) + z), quant_min, quant_max).to(dtype) in float32: the zero point added "
        "before rounding; dequantize = (q - z) * s, (q - z) in int64 and the product in float32.",
        rules=dataclasses.replace(_FLOAT32_WIDENED, zero_point="before_rounding", dq_subtract="int64"),
        sources=("pytorch v2.13.0 torch/ao/quantization/fx/_decomposed.py (quantize_per_token, "
                 "dequantize_per_token)", "checked against torch 2.13.0+cpu (tests/test_torch_quant_ops.py)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=("tests/test_torch_quant_ops.py::test_decomposed_per_token: eager and torch.compile, ties, "
                  "clamp boundaries, NaN/Inf, subnormal scales; 0 mismatches on the specified elements",),
    ),
    Profile(
        "pytorch_decomposed_inductor", "uniform", "PyTorch 2.13 Inductor CPU code of quantized_decomposed."
        "quantize_per_tensor.tensor (scale and zero point as tensors; torch.compile)",
        "q = round_to_int(fma(x, fl32(1 / fl32(scale)), fl32(z))): one rounding of x * inv + z (an FMA), then "
        "rounded half to even and converted through int32 to the dtype, saturating to the dtype's range; "
        "quant_min / quant_max are not applied. Beyond int32, +-Inf and NaN: unspecified (int8: INT_MIN, so -128 "
        "for +Inf). bfloat16 inputs are converted to float32 (float16: the lowering asserts).",
        rules=dataclasses.replace(_FLOAT32_WIDENED, conversion="int32"),
        sources=("pytorch v2.13.0 torch/_inductor/lowering.py (quantized_decomposed_quantize_per_tensor_tensor: "
                 "ops.fma and ops.round_to_int on CPU)",
                 "checked against torch 2.13.0+cpu (qref run --backend torch_compile)"),
        package="torch", versions="==2.13.0", status="verified",
        evidence=("tests/test_torch_quant_ops.py::test_inductor_quantize_per_tensor_tensor: ties, clamp "
                  "boundaries, NaN/Inf, subnormal scales, int8/uint8 and an int4 range in torch.int8; 0 mismatches "
                  "on the specified elements",),
    ),
    Profile(
        "jax", "uniform", "JAX 0.10.2 on XLA:CPU: jnp.clip(jnp.round(x / s) + z, lo, hi).astype(storage)",
        "XLA rewrites x / broadcast(s) into x * broadcast(1 / s) (jit and eager alike, since eager ops are "
        "jitted): q = fl(round_half_even(x * fl(1/s)) + z) in the input's dtype (bfloat16: x * fl32(1/s) "
        "computed in float32 and rounded to bfloat16); astype saturates, NaN -> 0; float32 FTZ/DAZ.",
        rules=_XLA,
        sources=("XLA AlgebraicSimplifier (divide by broadcast)", "checked against jax 0.10.2 CPU"),
        package="jax", versions="==0.10.2", status="verified",
        evidence=(f"{_BACKENDS}::test_jax_jit_reciprocal_rewrite_and_full_divisor, "
                  "test_jax_adds_the_zero_point_in_the_input_dtype, test_jax_qwix_aqt_bfloat16_inputs, "
                  "test_xla_profiles_flush_subnormals_and_aqt_replaces_an_infinite_reciprocal: float32/float16/"
                  "bfloat16, tie-heavy sampled inputs (> 20,000 compared), 0 mismatches",),
    ),
    Profile(
        "jax_divide", "uniform", "JAX 0.10.2 on XLA:CPU with a full-shape divisor (no reciprocal rewrite)",
        "As 'jax' with a true division: XLA keeps x / s when s is not a broadcast.",
        rules=dataclasses.replace(_XLA, scale_op="divide", bf16_upcast=False),
        sources=("checked against jax 0.10.2 CPU",),
        package="jax", versions="==0.10.2", status="verified",
        evidence=(f"{_BACKENDS}::test_jax_jit_reciprocal_rewrite_and_full_divisor: a full-shape divisor under "
                  "jit, tie-heavy sampled inputs, 0 mismatches",),
    ),
    Profile(
        "mlx", "uniform", "MLX 0.32.4 (CPU): mx.clip(mx.round(x / s) + z, lo, hi).astype(storage), eager or mx.compile",
        "A true division in the input's dtype (no reciprocal rewrite, also under mx.compile with s and z captured: the "
        "C++ kernel it builds with g++ -O3 keeps x / c), round half to even, the zero point added in the input's "
        "dtype after rounding, then the clip; astype is a C++ static_cast (int32 storage: the float32 clip bound "
        "2^31 - 1 rounds to 2^31, outside int32, where the cast is undefined: x86 gives INT_MIN); float16 / "
        "bfloat16 arithmetic runs in float32 and rounds back (innocuous for a quotient); no FTZ; dequantize "
        "(q.astype(E) - z) * s in E.",
        rules=dataclasses.replace(_XLA, scale_op="divide", conversion="int32", nan="unspecified",
                                  flush_subnormals=False),
        sources=("mlx/backend/cpu/binary.cpp, compiled.cpp (CPU kernels, g++ -O3 for mx.compile)",
                 "checked against mlx 0.32.4 CPU"),
        package="mlx", versions="==0.32.4", status="verified",
        evidence=("tests/test_uniform_mlx.py::test_mlx_uniform_quantize_eager_and_compiled: float32/float16/"
                  "bfloat16, ties and their neighbours, zero points 0 / 3 / -3, eager and mx.compile with captured "
                  "constants, 0 mismatches",),
    ),
    Profile(
        "qwix", "uniform", "qwix 0.1.8 quantize_with_scale_zero_point / dequantize (jax 0.10.2, XLA:CPU)",
        "q = round_half_even(x * fl(1/s) + z) in the input's dtype (XLA rewrites qwix's divide; bfloat16 "
        "computes x * fl32(1/s) in float32), astype saturates (NaN -> 0); dequantize = (q - z) * s in the "
        "scale's dtype.",
        rules=dataclasses.replace(_XLA, zero_point="before_rounding"),
        sources=("qwix/_src/core/qarray.py, numerics.py", "checked against qwix 0.1.8"),
        package="qwix", versions="==0.1.8", status="verified",
        evidence=(f"{_BACKENDS}::test_qwix_quantize_with_scale_zero_point_and_calibration, "
                  "test_jax_qwix_aqt_bfloat16_inputs, test_xla_profiles_flush_subnormals_*: int8/int4, "
                  "tie-heavy sampled inputs (> 20,000 compared), 0 mismatches",),
    ),
    Profile(
        "aqt", "uniform", "AQT (aqtp 0.9.0) IntSymmetric numerics, aqt_quantizer.quantizer_make(bits)",
        "q = round_half_even(clip(x * reciprocal(s), -(2^(b-1) - 1), 2^(b-1) - 1)) in the input's dtype; "
        "no zero point; an infinite reciprocal is 1; astype (NaN -> 0); dequantize = q * s; float32 FTZ/DAZ.",
        rules=dataclasses.replace(_XLA, zero_point="before_rounding", clamp="float", narrow_symmetric=True,
                                  bf16_upcast=False, reciprocal_inf="one"),
        sources=("aqt/jax/v2/numerics/int_numerics.py, aqt_tensor.py, calibration.py",
                 "checked against aqtp 0.9.0"),
        package="aqtp", versions="==0.9.0", status="verified",
        evidence=(f"{_BACKENDS}::test_aqt_int8_and_int4, test_jax_qwix_aqt_bfloat16_inputs, "
                  "test_xla_profiles_flush_subnormals_and_aqt_replaces_an_infinite_reciprocal: int8/int4, "
                  "float32/bfloat16, sampled inputs, 0 mismatches",),
    ),
)
for _p in PROFILES:
    register_profile(_p, replace=True)

DEFAULT_PROFILE = "stablehlo"


#: calibration scale formulas by mechanism (uniform.md §5.2), the values of ``qref.calibrate(formula=...)``:
#: exact                   scale = RN_e(a / D) from the exact quotient (qref's own; "qref" is its old name)
#: reciprocal_tiny_to_one  in the input dtype: s = a * fl(1 / (qmax + 0.5)) (a division by a constant that XLA
#:                         rewrites); s < sqrt(tiny) becomes 1; minmax: s = (max - min) * fl(1 / (hi - lo)),
#:                         z = clamp(round_half_even(lo - min / s)) for int8 / int4
#: reciprocal_zero_to_one  in the input dtype: a == 0 becomes 1, s = a * fl(1 / (2^(b-1) - 0.5)); symmetric only
#: float32_divide_eps      float32: s = max(a / ((hi - lo) / 2), eps), z = 0 (signed), 128 (uint8) or the
#:                         midpoint; minmax: s = max((max - min) / (hi - lo), eps), z = clamp(lo - round(min / s))
#: divide_eps_balanced_zero_point  minmax only, in the input dtype (float32 / float64): s = max(fl((max - min) /
#:                         (hi - lo)), eps32); z = round_half_even(clamp(lo - min / s if (lo + min / s) + (hi + max
#:                         / s) > 0 else hi - max / s, lo, hi)): the zero point from the bound with the smaller error
CALIBRATION_FORMULAS = ("exact", "reciprocal_tiny_to_one", "reciprocal_zero_to_one", "float32_divide_eps",
                        "divide_eps_balanced_zero_point")
#: the calibration formula each system's observer takes, by uniform profile (their scale computations)
CALIBRATIONS = {"qref": "exact", "qwix": "reciprocal_tiny_to_one", "aqt": "reciprocal_zero_to_one",
                "pytorch": "float32_divide_eps", "pytorch_per_channel": "float32_divide_eps",
                "pytorch_decomposed_per_token": "divide_eps_balanced_zero_point"}


#: running statistics of a range observer (uniform.md §5.4)
RUNNING_UPDATES = ("extremes", "exponential_average")
#: the zero point of a symmetric range on unsigned storage (uniform.md §5.4)
UNSIGNED_SYMMETRIC_ZERO_POINTS = ("ceil_midpoint", "floor_midpoint")


@dataclass(frozen=True)
class RangeObserverRule:
    """How a range observer turns a sequence of batches into a scale and a zero point (uniform.md §5.4).

    statistic_dtype: every batch is converted to it (round to nearest even) before min / max, and the running
        statistic is kept in it ("float32").
    running: "extremes" (m = min(m, min b), M = max(M, max b)) or "exponential_average" (m = fl(m + fl(c *
        fl(min b - m))) with c rounded to statistic_dtype; the first batch sets (m, M) as it is).
    formula: the scale formula of the observed range (CALIBRATION_FORMULAS; "float32_divide_eps" with the floor
        ``eps``, the range extended to include 0).
    nan: "propagate": a NaN element makes the group's statistic, and its scale, NaN.
    unobserved: (scale, zero point) before any batch.
    zero_point_conversion: "int32": round(min / s) is converted to int32 before the zero point is formed; a
        non-finite quotient (an infinite or NaN scale) makes the zero point unspecified.
    package, versions: the system and versions the rule was checked against.
    """

    statistic_dtype: str = "float32"
    running: str = "extremes"
    formula: str = "float32_divide_eps"
    nan: str = "propagate"
    unobserved: tuple[float, int] = (1.0, 0)
    zero_point_conversion: str = "int32"
    package: str = ""
    versions: str = ""

    def __post_init__(self) -> None:
        check_choice("observer running update", self.running, RUNNING_UPDATES)
        check_choice("observer scale formula", self.formula, ("float32_divide_eps",))
        check_choice("observer statistic dtype", self.statistic_dtype, ("float32",))
        check_choice("observer NaN rule", self.nan, ("propagate",))
        check_choice("observer zero-point conversion", self.zero_point_conversion, ("int32",))


#: range observers by name (uniform.md §5.4): ``qref.analysis.calibrate.observe_range(rule=...)``
OBSERVER_RULES = {
    "pytorch_minmax_observer": RangeObserverRule(running="extremes", package="torch", versions="==2.13.0"),
    "pytorch_moving_average_observer": RangeObserverRule(running="exponential_average", package="torch",
                                                         versions="==2.13.0"),
}


HISTOGRAM_BINNINGS = ("float32_truncated_quotient",)
HISTOGRAM_GRIDS = ("fused_linspace", "unfused_linspace")
NORM_SUMS = ("cascade_lanes",)


@dataclass(frozen=True)
class HistogramObserverRule:
    """How a histogram observer turns batches into a scale and a zero point (uniform.md §5.5).

    bins: histogram bins (B). upsample_rate: each old bin is split into this many sub-bins when a wider range
        re-bins the running histogram. quantile_step: the step of the lower / upper quantiles of the search.
        target_bins: the bins of the destination grid of the L2 error (2^8: 8-bit storage).
    binning: "float32_truncated_quotient": x in [lo, hi] goes to bin trunc(fl32(fl32(fl32(x - lo) * B) /
        fl32(hi - lo))), the last bin closed; lo == hi widens the range to [min(lo-, lo - 1), max(hi+, hi + 1)]
        (lo-, hi+: the float32 neighbours).
    grid: "fused_linspace": the k-th of n points from a to b is fl32(fma(k, step, a)) for k < n // 2, else
        fl32(fma(-(n - 1 - k), step, b)), step = fl32(fl32(b - a) / (n - 1)); "unfused_linspace": the same
        with the product rounded first (fl32(a + fl32(k step))).
    norm_sum: "cascade_lanes": the float32 sum of the L2 errors: ``sum_lanes`` lanes, 4 interleaved vector
        accumulators over rows of 4 vectors, cascaded every 2^max(4, ceil(log2(rows)) // 4) rows, then the
        scalar tail and the lanes added in order.
    infinities: "drop": +-Inf elements of a batch are left out (a batch of only +-Inf is skipped).
    formula: the scale formula of the searched range (float32_divide_eps, as RangeObserverRule).
    unobserved: (scale, zero point) before any batch.
    package, versions: the system and versions the rule was checked against.
    """

    bins: int = 2048
    upsample_rate: int = 16
    quantile_step: float = 1e-5
    target_bins: int = 256
    binning: str = "float32_truncated_quotient"
    grid: str = "fused_linspace"
    norm_sum: str = "cascade_lanes"
    sum_lanes: int = 8
    infinities: str = "drop"
    formula: str = "float32_divide_eps"
    unobserved: tuple[float, int] = (1.0, 0)
    package: str = ""
    versions: str = ""

    def __post_init__(self) -> None:
        check_choice("histogram binning", self.binning, HISTOGRAM_BINNINGS)
        check_choice("histogram grid", self.grid, HISTOGRAM_GRIDS)
        check_choice("norm sum", self.norm_sum, NORM_SUMS)
        check_choice("observer infinities", self.infinities, ("drop",))
        check_choice("observer scale formula", self.formula, ("float32_divide_eps",))
        for name in ("bins", "upsample_rate", "target_bins", "sum_lanes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise QrefError(f"HistogramObserverRule.{name} must be a positive integer, got {v!r}")
        if not 0 < self.quantile_step < 0.5:
            raise QrefError(f"HistogramObserverRule.quantile_step must be in (0, 0.5), got {self.quantile_step!r}")


#: histogram observers by name (uniform.md §5.5): ``qref.analysis.calibrate.observe_histogram(rule=...)``
HISTOGRAM_OBSERVER_RULES = {
    "pytorch_histogram_observer": HistogramObserverRule(package="torch", versions="==2.13.0"),
    # the same without FMA: torch's kernels for CPUs below AVX2 (ATEN_CPU_CAPABILITY=default)
    "pytorch_histogram_observer_no_fma": HistogramObserverRule(grid="unfused_linspace", package="torch",
                                                               versions="==2.13.0"),
}

@dataclasses.dataclass(frozen=True)
class FakeQuantizeRule:
    """How a FakeQuantize(x, il, ih, ol, oh, levels) with a general float output range is computed (uniform.md
    §2.8, ``qref.schemes.uniform.reference.fake_quantize``); keyed by the uniform profile whose codes it extends.

    normalize_levels: the levels computed by the normalized form fl32(fl32(x - il) / fl32(ih - il)) * n with the
        output step fl32(fl32(fl32(r / n) * fl32(oh - ol)) + ol) (a constant folded by the core's reference);
        every other level count takes the scale_shift form.
    output_step: scale_shift's r * osc + ol, osc = fl32(fl32(oh - ol) / n): "fma" (one rounding) or
        "multiply_add" (fl32(fl32(r * osc) + ol)).
    recompose_ranges: (levels, m) pairs: for these levels the output range is first rewritten through the integer
        range [0, m]: scale = fl32(fl32(oh - ol) / m), shift = fl32(fl32(0 - fl32(m * ol)) / fl32(oh - ol)),
        ol' = fl32(fl32(0 - shift) * scale), oh' = fl32(fl32(m - shift) * scale) (a decomposition into a
        quantize to [0, m] and a dequantize, composed back into one FakeQuantize).
    recompose_axes: the recomposed range is used when the output ranges (ol, oh) vary only along the first
        ``recompose_axes`` axes of x; when they vary along a later axis the dequantize stays separate:
        y = fl32(fl32(q - shift) * scale), q = nearbyint(fl32(r * fl32(m / n))) (the u8 / u4 codes).
    normalize_max_axes: the normalized form needs ranges varying along at most this many axes (per tensor or per
        axis); ranges varying along more axes (blocks) take scale_shift.
    node_min_axis: levels outside normalize_levels with ranges varying along exactly one axis >= node_min_axis are
        outside the rule (QrefError: the plugin's FakeQuantize node computes them, or refuses them); None: no limit.
    identity_levels: levels for which a FakeQuantize with scalar ranges ol = il and oh = ih is removed from the
        graph (y = x: a quantize-dequantize pair of 16-bit codes taken as lossless).
    package, versions: the system and versions the rule was checked against.
    """

    normalize_levels: tuple[int, ...] = ()
    output_step: str = "fma"
    recompose_ranges: tuple[tuple[int, int], ...] = ()
    recompose_axes: int = 2
    normalize_max_axes: int = 1
    node_min_axis: int | None = None
    identity_levels: tuple[int, ...] = ()
    package: str = ""
    versions: str = ""

    def __post_init__(self) -> None:
        check_choice("FakeQuantize output step", self.output_step, ("fma", "multiply_add"))
        for lv, m in self.recompose_ranges:
            if not (isinstance(lv, int) and isinstance(m, int) and lv >= 3 and m >= 1):
                raise QrefError(f"recompose_ranges holds (levels >= 3, m >= 1) integer pairs, got {(lv, m)!r}")


#: FakeQuantize with general output ranges by uniform profile (uniform.md §2.8): the CPU plugin on a runtime
#: input (``openvino_cpu``: the low-precision transformations recompose the output range for 15 / 16 / 255 / 256
#: levels, the Snippets kernel fuses the output step into an FMA on AVX2 / AVX-512; "multiply_add" under
#: ONEDNN_MAX_CPU_ISA=SSE41) and a Constant (``openvino``: folded by the core's reference for the levels the
#: low-precision transformations support, else the decomposed graph folded op by op, unfused); both remove a
#: 65536-level FakeQuantize whose output range equals its input range (QDQ stripping)
FAKE_QUANTIZE_RULES = {
    "openvino_cpu": FakeQuantizeRule(output_step="fma",
                                     recompose_ranges=((15, 255), (16, 15), (255, 255), (256, 255)),
                                     identity_levels=(65536,), package="openvino", versions="==2026.4.*"),
    "openvino": FakeQuantizeRule(normalize_levels=(15, 16, 255, 256), output_step="multiply_add", node_min_axis=1,
                                 identity_levels=(65536,), package="openvino", versions="==2026.4.*"),
}


def calibration_formula(name: str) -> str:
    """The calibration mechanism ``name`` names: a mechanism of CALIBRATION_FORMULAS as it is, or the one the
    profile ``name`` (``qwix``, ``aqt``, ``pytorch``; ``qref`` for ``exact``) chooses."""
    if name in CALIBRATION_FORMULAS:
        return name
    if not isinstance(name, str) or name not in CALIBRATIONS:
        raise unknown_name("calibration formula", name, (*CALIBRATION_FORMULAS, *CALIBRATIONS))
    return CALIBRATIONS[name]


def rules_of(profile: Profile) -> UniformArithmetic:
    """The typed arithmetic record of a uniform profile (``profile.rules``)."""
    r = profile.rules
    if not isinstance(r, UniformArithmetic):
        raise QrefError(f"uniform profile {profile.key!r} has no UniformArithmetic rules")
    return r


__all__ = [
    "ARITHMETIC_FIELDS",
    "CALIBRATIONS",
    "CALIBRATION_FORMULAS",
    "CLAMPS",
    "COMPUTE_DTYPES",
    "CONSTANT_RULES",
    "CONVERSIONS",
    "DEFAULT_PROFILE",
    "DQ_FORMS",
    "DQ_MULTIPLY",
    "DQ_SUBTRACT",
    "FAKE_QUANTIZE_RULES",
    "FINAL_ROUNDINGS",
    "HISTOGRAM_BINNINGS",
    "HISTOGRAM_GRIDS",
    "HISTOGRAM_OBSERVER_RULES",
    "NAN_RULES",
    "NORM_SUMS",
    "OBSERVER_RULES",
    "PROFILES",
    "ROUNDINGS",
    "RUNNING_UPDATES",
    "SCALE_OPS",
    "SCALE_SOURCES",
    "UNSIGNED_SYMMETRIC_ZERO_POINTS",
    "ZERO_POINT_RANGES",
    "ZERO_POINT_STAGES",
    "FakeQuantizeRule",
    "HistogramObserverRule",
    "RangeObserverRule",
    "UniformArithmetic",
    "calibration_formula",
    "rules_of",
]
