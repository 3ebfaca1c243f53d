"""Element (cast) profiles as data (spec: elements.md §6, profiles.md §4).

Each record gives the conversion policy of one system; ``cast_rules`` select another policy by target format
class and source dtype where the system's conversion differs by type (ml_dtypes: its own E8M0 routine, numpy's C
cast for numpy's own dtypes, its own integer conversion for its own types).
"""

from __future__ import annotations

from ..formats.policy import CastPolicy
from .base import CastRule, Profile, register_profile

_C_CAST = CastPolicy(rounding="toward_zero", int_cast="via_int32_x86")  # numpy's float -> int astype on x86-64

# JAX 0.10.2 on XLA:CPU (--xla_cpu_max_isa=AVX2, the harness's pin), measured on every NaN of the 16-bit sources and
# float32 / float64 NaNs with one payload bit at each position and 20,000 random payloads
# (tests/test_nan_payload.py): LLVM's fptrunc / fpext keep the payload and quiet it (vcvtps2ph, cvtss2sd,
# compiler-rt); bfloat16 -> float32 is a bit shift (not quieted); float16 / bfloat16 -> float8_e5m2 give +NaN 0x7F for
# every NaN; float32 -> bfloat16, float64 -> float16 / bfloat16, -> the other float8 types, and every float8 -> wider
# decode give the canonical NaN.
_JAX_PAYLOAD_RULES = (
    CastRule(CastPolicy(nan="positive", nan_code="all_ones"), target="float8_e5m2", source="float16"),
    CastRule(CastPolicy(nan="positive", nan_code="all_ones"), target="float8_e5m2", source="bfloat16"),
    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float16", source="float32"),
    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float16", source="bfloat16"),
    CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="bfloat16"),
    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float32", source="float16"),
    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float32", source="float64"),
    *(CastRule(CastPolicy(nan_payload="keep_quiet"), target="float64", source=s)
      for s in ("float16", "bfloat16", "float32")),
)

# ONNX Runtime 1.32 Cast, measured on every float16 / bfloat16 NaN code (tests/test_nan_payload.py): float16 ->
# float32 keeps the payload and quiets it (the vectorized F16C path), bfloat16 -> float32 is a bit shift. Not
# modelled: float32 -> float16 keeps the quieted payload in the vectorized part and gives 0x7E00 in the scalar tail.
_ORT_DECODE_RULES = (
    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float32", source="float16"),
    CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="bfloat16"),
)

PROFILES = (
    Profile(
        "spec", "element", "qref specification",
        "Correct rounding from the exact input (nearest_even), each format's ecosystem overflow and NaN rules.",
        CastPolicy(), sources=("docs/spec/elements.md",), status="spec",
    ),
    Profile(
        "ml_dtypes", "element", "ml_dtypes 0.5-0.6 astype",
        "float64 inputs are rounded to float32 first (double rounding; float16, numpy's own type, rounds once); "
        "E8M0 takes the float32 exponent field plus the first fraction bit (ties up; float32 subnormals up); "
        "integer storage truncates and wraps (the C cast through int32 on x86-64; int1/2/4 also give the "
        "indefinite value for 2^31 - 1 < x < 2^31); everything else as 'spec'.",
        CastPolicy(source="via_float32"),
        sources=("ml_dtypes/include/float8.h ConvertImpl", "ml_dtypes PR 398 (E8M0 ties)", "PR 401 (float64)"),
        package="ml_dtypes", versions=">=0.5,<0.7", version="0.6", status="peer_vectors",
        evidence=("tests/test_encode_ml_dtypes.py against tests/peers/ml_dtypes_0.6 (vectors ml_dtypes 0.6.0 "
                  "produced: every float16/bfloat16 input x 15 formats, ties +-1..3 ulp, float64 near ties, "
                  "integer edges): 0 mismatches",),
        cast_rules=(
            CastRule(CastPolicy(), target="float16"),  # numpy's own float64 -> float16 cast rounds once
            CastRule(CastPolicy(rounding="exponent_carry", source="via_float32"), target="float_without_zero"),
            CastRule(CastPolicy(rounding="toward_zero", int_cast="via_int32_x86_checked"),
                     target="integer_sub_byte"),
            CastRule(_C_CAST, target="integer"),
        ),
    ),
    Profile(
        "ml_dtypes", "element", "ml_dtypes 0.7 astype",
        "float64 inputs are rounded once; E8M0 rounds to nearest with ties away from zero (float32 subnormals "
        "too); integer storage from an ml_dtypes type (bfloat16, float8...) or into int2/int4/uint2/uint4 "
        "truncates and gives 0 for NaN, +-Inf and values outside the storage range; numpy's own casts (float16/"
        "32/64 into int8..int32) stay the C cast through int32 on x86-64 (truncate, wrap); everything else as "
        "'spec'; float8_e5m3fnu (UE5M3) gives NaN for negative nonzero values and -Inf; bfloat16 -> float32 (a "
        "bit shift) keeps NaN payloads (nan_payload='keep_raw'). Not modelled: numpy's own float32 / float64 -> "
        "float16 astype keeps truncated payloads (keep_raw), float64 -> float32 keeps and quiets them.",
        CastPolicy(),
        sources=("ml_dtypes 0.7.0 include/ml_dtypes/float8.h, intn.h", "checked against ml_dtypes 0.7.0"),
        package="ml_dtypes", versions=">=0.7,<0.8", version="0.7", status="verified",
        evidence=("tests/test_encode_ml_dtypes.py against the installed ml_dtypes 0.7.0: every float16/bfloat16 "
                  "input x 15 formats, every tie +-1..3 ulp, the subnormal/normal boundary, 2^22 random float32 "
                  "per format, float64 near ties, integer storage edges: 0 mismatches",),
        cast_rules=(
            CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="bfloat16"),  # a bit shift
            CastRule(CastPolicy(rounding="nearest_away"), target="float_without_zero"),
            CastRule(CastPolicy(unsigned_negative="nan"), target="float8_e5m3fnu"),
            CastRule(CastPolicy(rounding="toward_zero", overflow="zero"), target="integer_sub_byte"),
            CastRule(CastPolicy(rounding="toward_zero", overflow="zero"), target="integer", source="extension"),
            CastRule(_C_CAST, target="integer"),
        ),
    ),
    Profile(
        "saturating", "element", "OCP OFP8 v1.0 saturating conversion; ONNX Cast saturate=1",
        "nearest_even; finite overflow and +-Inf clamp to +-max; NaN stays NaN.",
        CastPolicy(overflow="saturate"),
        sources=("OCP OFP8 v1.0 §5 (conversion)", "onnx/reference/ops/op_cast.py saturate_cast"), status="spec",
    ),
    Profile(
        "onnx", "element", "ONNX Cast / CastLike opsets 19-25, saturate=1 (onnx 1.23.2 reference)",
        "float8 targets: nearest_even, finite overflow and +-Inf clamp to +-max, NaN stays NaN (saturate=1, the "
        "default); float16/bfloat16/float32/float64 targets: nearest_even, +-Inf on overflow; float4e2m1: "
        "nearest_even, overflow saturates, NaN becomes +-0 by the opposite sign (the reference's ml_dtypes "
        "astype); float8e8m0 (round_mode='up', saturate=1): float64 inputs are rounded to float32 first, then the "
        "float32 exponent field + (fraction != 0) of the magnitude (the sign bit is ignored; rounding="
        "'exponent_ceil': up, and every float32 subnormal gives 2^-126, 0x01), finite values past 2^127 clamp to "
        "2^127 (0xFE), +-Inf and NaN give 0xFF (overflow='saturate_finite'), +-0 -> 2^-127 (0x00); integer "
        "targets: truncation, "
        "0 for NaN, +-Inf and out-of-range values (the reference's ml_dtypes 0.7 astype: ONNX leaves "
        "out-of-range values undefined).",
        CastPolicy(overflow="saturate"),
        sources=("onnx/defs Cast-19..25 (the float8 and float8e8m0 tables)", "onnx/reference/ops/op_cast.py",
                 "onnx/numpy_helper.py saturate_cast, to_float8e8m0"),
        package="onnx", versions="==1.23.2", version="1.23", status="verified",
        evidence=("tests/test_onnx_node_cases.py: every Cast / CastLike node case of onnx 1.23.2's backend "
                  "generators against its expected output",),
        cast_rules=(
            CastRule(CastPolicy(), target="float16"),
            CastRule(CastPolicy(), target="bfloat16"),
            CastRule(CastPolicy(), target="float32"),
            CastRule(CastPolicy(), target="float64"),
            CastRule(CastPolicy(rounding="exponent_ceil", overflow="saturate_finite", unsigned_negative="magnitude",
                                absent_zero="min", source="via_float32"), target="float8_e8m0fnu"),
            CastRule(CastPolicy(rounding="toward_zero", overflow="zero"), target="integer"),
        ),
    ),
    Profile(
        "onnx_no_saturate", "element", "ONNX Cast / CastLike opsets 19-25, saturate=0 (onnx 1.23.2 reference)",
        "As 'onnx' but float8 targets take the format's own overflow: +-Inf for E5M2, NaN for E4M3FN and the "
        "FNUZ types (the second table of the Cast operator); float4e2m1 still saturates (no Inf or NaN); "
        "float8e8m0 as 'onnx' but finite values past 2^127 give 0xFF (NaN) too.",
        CastPolicy(),
        sources=("onnx/defs Cast-19..25 (saturate=0 table)", "onnx/reference/ops/op_cast.py"),
        package="onnx", versions="==1.23.2", version="1.23", status="verified",
        evidence=("tests/test_onnx_node_cases.py: the saturate=0 Cast / CastLike node cases of onnx 1.23.2",
                  "tests/test_element_profiles_P.py: the reference's Cast to FLOAT8E8M0 (saturate 0 and 1) from "
                  "float32 (every top-16-bit pattern x 8 low halves, the ties 1.5 * 2^k +-1 ulp, 2^18 random), "
                  "every float16 / bfloat16, float64 (those +-2^-40, 2^16 random): 0 mismatches for both profiles",),
        cast_rules=(
            CastRule(CastPolicy(rounding="exponent_ceil", overflow="nan", unsigned_negative="magnitude",
                                absent_zero="min", source="via_float32"), target="float8_e8m0fnu"),
            CastRule(CastPolicy(rounding="toward_zero", overflow="zero"), target="integer"),
        ),
    ),
    # conversion instructions, modelled from NVIDIA's PTX ISA (no GPU here: status "modelled"); elements.md §6.1
    Profile(
        "ptx_cvt_rn_satfinite", "element", "PTX cvt.rn.satfinite.{e4m3x2,e5m2x2,e2m1x2,e2m3x2,e3m2x2}.f32 (sm_89+ / "
        "sm_100+)",
        "Round to nearest even; .satfinite: finite overflow and +-Inf become +-max finite; NaN stays NaN where the "
        "target has one (the canonical 0x7F for E4M3, 0x7E / 0x7F for E5M2 by qref's NaN code); FP4/FP6 targets "
        "have none (their NaN result is not defined by the document: qref's flipped-sign zero).",
        CastPolicy(overflow="saturate"),
        sources=("NVIDIA PTX ISA 8.7 §9.7.9.21 cvt (.satfinite, .e4m3x2, .e5m2x2, .e2m1x2, .e2m3x2, .e3m2x2)",),
        status="modelled",
        evidence=("tests/test_conversion_profiles.py: the documented rules on boundary inputs; no GPU here to "
                  "capture device vectors",),
    ),
    *(Profile(
        f"ptx_cvt_{mode}_ue8m0", "element", f"PTX cvt.{mode}.satfinite.ue8m0x2.f32 (sm_100+)",
        f"The E8M0 byte of a float32: rounded {what} to a power of two, saturating at 2^127 (byte 254); NaN gives "
        "0xFF; values below 2^-127 give byte 0 (.satfinite keeps the result finite).",
        CastPolicy(rounding=rnd, overflow="saturate"),
        sources=("NVIDIA PTX ISA 8.7 §9.7.9.21 cvt (.ue8m0x2 with .rz / .rp, .satfinite)",),
        status="modelled",
        evidence=("tests/test_conversion_profiles.py: the documented rules on powers of two +-1 ulp, the "
                  "range ends and NaN; no GPU here",),
    ) for mode, what, rnd in (("rz", "toward zero", "toward_zero"), ("rp", "up", "up"))),
    # cvt.rs: stochastic rounding with the instruction's rbits operand: R added at the positions just below the
    # kept precision of |x|, then truncation = P3109 StochasticA(N) (elements.md §6.2)
    Profile(
        "ptx_cvt_rs_satfinite", "element", "PTX cvt.rs{.relu}.satfinite.{e4m3x4,e5m2x4,e2m1x4,e2m3x4,e3m2x4}.f32 and "
        "cvt.rs{.relu}.satfinite.{f16x2,bf16x2}.f32 (sm_100a / sm_103a)",
        "Stochastic rounding by the element's random bits R from rbits (N = 13 for f16: the 13 LSBs of a 16-bit "
        "half; 16 for bf16: a 16-bit half; 16 for the FP8/FP6 x4 targets: a and b take rbits[31:16], e and f "
        "rbits[15:0]; 8 for e2m1x4: one byte each; qref.interop.ptx.cvt_rs_random_bits splits rbits): round away "
        "from zero iff floor(eta 2^N) + R >= 2^N (R added below the kept bits, then truncation; P3109 "
        "StochasticA(N)); .satfinite: overflow and +-Inf become +-max finite; NaN stays NaN (canonical NaN for "
        "FP8/f16/bf16; FP4/FP6: qref's flipped-sign zero). .relu (negative results to +0) is not a policy field.",
        CastPolicy(rounding="stochastic_a", overflow="saturate", stochastic_bits=16),
        sources=("NVIDIA PTX ISA 9.0, instruction cvt: its rbits paragraph (which bits feed which operand), .rs, "
                 ".satfinite, .relu",),
        status="modelled",
        evidence=("tests/test_conversion_profiles.py: results checked against exact arithmetic (Fraction) and the "
                  "float32 bit-carry form for every R of chosen inputs; no sm_100 GPU here to capture device "
                  "vectors; the alignment of R (just below the kept bits) is qref's reading: the document's "
                  "figure of the rbits semantics is not in the text qref holds",),
        cast_rules=(
            CastRule(CastPolicy(rounding="stochastic_a", overflow="saturate", stochastic_bits=13), target="float16"),
            CastRule(CastPolicy(rounding="stochastic_a", overflow="saturate", stochastic_bits=8),
                     target="float4_e2m1fn"),
        ),
    ),
    Profile(
        "ptx_cvt_rs", "element", "PTX cvt.rs{.relu}.{f16x2,bf16x2}.f32 without .satfinite (sm_100a / sm_103a)",
        "As ptx_cvt_rs_satfinite (StochasticA with N = 13 for f16, 16 for bf16) with the target's own overflow: "
        "a value rounded past max becomes +-Inf, +-Inf stays +-Inf, NaN stays NaN.",
        CastPolicy(rounding="stochastic_a", stochastic_bits=16),
        sources=("NVIDIA PTX ISA 9.0, instruction cvt: its rbits paragraph, .rs",),
        status="modelled",
        evidence=("tests/test_conversion_profiles.py: the float32 bit-carry form for every R of chosen inputs; "
                  "no sm_100 GPU here",),
        cast_rules=(CastRule(CastPolicy(rounding="stochastic_a", stochastic_bits=13), target="float16"),),
    ),
    Profile(
        "torch", "element", "PyTorch 2.13 CPU tensor.to(float8 dtype), eager and torch.compile (Inductor CPU)",
        "float64 inputs are rounded to float32 first (the float8 constructors take a float: double rounding); "
        "float8_e4m3fn saturates finite overflow and +-Inf to +-448 (NaN stays NaN with its sign); float8_e5m2: "
        "nearest_even, +-Inf on overflow, every NaN written 0x7F / 0xFF (nan_code='all_ones'); the FNUZ types: "
        "their NaN 0x80 for overflow, +-Inf and NaN; float8_e8m0fnu takes the float32 exponent field plus the "
        "first fraction bit (ties up; float32 subnormals: (2^-127, 2^-126) -> 2^-126) of the magnitude (the sign "
        "bit is ignored: unsigned_negative='magnitude'), and +-0 gives 0x00, 2^-127 (absent_zero='min'). A "
        "float8_e4m3fn / float8_e5m2 NaN code decoded to float32 / float64 / float16 keeps its fraction, quieted "
        "(nan_payload='keep_quiet': E4M3FN 0x7F -> 0x7FF00000). Not modelled (xfail entries): the NaN the FNUZ and "
        "E8M0 NaN codes decode to, and the +NaN 0x7FC0 of every decode into bfloat16.",
        CastPolicy(source="via_float32"),
        sources=("torch 2.13.0 torch/headeronly/util/Float8_e4m3fn.h fp8e4m3fn_from_fp32_value",
                 "Float8_e5m2.h, Float8_e4m3fnuz.h, Float8_e5m2fnuz.h, Float8_e8m0fnu.h fp8e8m0fnu_from_fp32_value",
                 "aten/src/ATen/cpu/vec/vec512/vec512_float8.h cvtfp32_fp8e4m3, cvtfp32_fp8e5m2 (AVX-512 path)"),
        package="torch", versions=">=2.13,<2.14", version="2.13", status="verified",
        evidence=("scripts/verify_torch_casts.py against torch 2.13.0+cpu, eager and torch.compile: every "
                  "float16/bfloat16 input, every float32 value and tie of the format +-2 ulp, 10^6 random float32 and "
                  "float64 bit patterns, float64 ties +-2^-40 (double rounding), every decode code, per format: "
                  "0 mismatches beyond the unmodelled rule D3 (elements.md §6.5)",
                  "qref sweep F --against torch --profile torch for the five float8 formats: all 2^32 float32, "
                  "2^16 float16 and 2^16 bfloat16 inputs, 0 mismatches (performance.md §3)",),
        cast_rules=(
            *(CastRule(CastPolicy(nan_payload="keep_quiet"), target=t, source=s)  # c10's float8 -> float32 decode
              for t in ("float32", "float64", "float16") for s in ("float8_e4m3fn", "float8_e5m2")),
            CastRule(CastPolicy(overflow="saturate", source="via_float32"), target="float8_e4m3fn"),
            CastRule(CastPolicy(nan_code="all_ones", source="via_float32"), target="float8_e5m2"),
            CastRule(CastPolicy(rounding="exponent_carry", source="via_float32", unsigned_negative="magnitude",
                                absent_zero="min"), target="float_without_zero"),
        ),
    ),
    Profile(
        "openvino", "element", "OpenVINO 2026.4 Convert to f8e4m3 / f8e5m2 (CPU plugin and the core's constant "
        "folding alike)",
        "Convert from f32 / bf16 / f64 to f8e4m3 and f8e5m2 rounds to float16 first (nearest_even; |x| >= 65520: "
        "+-Inf, then NaN for E4M3FN and Inf for E5M2; float64 goes to float32 first), then to the 8-bit type "
        "(nearest_even): double rounding. f4e2m1: NaN -> +-6 by its sign bit (nan='max'); f8e8m0: every input with "
        "the sign bit set (-0, -Inf, -NaN included) -> 0x00 (unsigned_negative='min_by_sign_bit'), +0 -> 0x00, "
        "nearest_even, finite overflow and +Inf -> 0xFE, +NaN -> 0xFF; float64 (the folded Constant: the plugin "
        "has no f64 -> f4e2m1 / f8e8m0) rounds through float32 first. E5M2 NaN payloads (elements.md §2.7): from "
        "f32 / bf16 the top bits are truncated (nan_payload='truncate': a payload in the dropped bits gives Inf), "
        "from f16 / f64 kept and quieted (keep_quiet); f8e5m2 -> f32 / bf16 shifts them (keep_raw), -> f16 / f64 "
        "quiets them. Every other target (float16...) as 'spec'. Not modelled (xfail entries): the folded "
        "constant's f16 -> E5M2 NaN (truncate), f32 -> E5M2 of the 4096 float32 values just below 2^-17, 2^-16, "
        "2^-15 (the code of twice the power; the CPU plugin with AVX512-FP16 rounds them as this profile), the "
        "decoding of E5M2 Inf into f64 and of the E8M0 0x00 by the folded Convert.",
        CastPolicy(),
        sources=("openvino src/plugins/intel_cpu/src/nodes/common/cpu_convert.cpp (f32 -> f16 by vcvtps2ph, "
                 "then f16 -> f8)", "checked against openvino 2026.4.1 CPU (tests/test_openvino_targets.py)"),
        package="openvino", versions="==2026.4.*", status="verified",
        evidence=("tests/test_openvino_targets.py::test_convert_to_f8_rounds_through_float16: every float16 "
                  "midpoint (exact, +-1 ulp of float32, +-2^-40 relative in float64), every bfloat16 value, "
                  "Parameter and Constant, against ml_dtypes casts through float32 and float16: 0 mismatches "
                  "beyond the listed E5M2 rule (> 300,000 inputs per format); the same codes with the plugin's ISA "
                  "limited to AVX2 / SSE4.1; qref run --backend openvino (openvino.convert.*): 0 failures",
                  "tests/test_element_profiles_P.py: Convert to f8e8m0 and f4e2m1, Parameter and Constant, from "
                  "float32 (every top-16-bit pattern x 8 low halves, the E8M0 ties +-1 ulp, 2^18 random), every "
                  "float16 / bfloat16, float64 (Constant): 0 mismatches; 10^6 random float32 once by hand: 0",),
        cast_rules=(
            CastRule(CastPolicy(source="via_float16"), target="float8_e4m3fn"),
            CastRule(CastPolicy(source="via_float16", nan_payload="keep_quiet"), target="float8_e5m2",
                     source="float64"),
            CastRule(CastPolicy(source="via_float16", nan_payload="keep_quiet"), target="float8_e5m2",
                     source="float16"),
            CastRule(CastPolicy(source="via_float16", nan_payload="truncate"), target="float8_e5m2"),
            CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="float8_e5m2"),
            CastRule(CastPolicy(nan_payload="keep_raw"), target="bfloat16", source="float8_e5m2"),
            CastRule(CastPolicy(nan_payload="keep_quiet"), target="float16", source="float8_e5m2"),
            CastRule(CastPolicy(nan_payload="keep_quiet"), target="float64", source="float8_e5m2"),
            CastRule(CastPolicy(nan="max", source="via_float32"), target="float4_e2m1fn"),
            CastRule(CastPolicy(overflow="saturate", unsigned_negative="min_by_sign_bit", absent_zero="min",
                                source="via_float32"), target="float8_e8m0fnu"),
        ),
    ),
    Profile(
        "stablehlo", "element", "stablehlo.convert in the StableHLO reference interpreter (llvm::APFloat; "
        "torch-mlir 20261001's StableHLO)",
        "Every target as 'spec' (nearest_even, the format's overflow and NaN) but for these rules. "
        "float8_e8m0fnu: APFloat rounds "
        "ties away from zero (1.5 * 2^k -> 2^(k+1)), gives 0x00 (2^-127) for +-0, and a negative input the code of "
        "its magnitude with the sign written over the top code bit (unsigned_negative='sign_over_top_bit': "
        "-2^-127 -> 0x80, -1 -> 0xFF, -4 -> 0x81, -1.5 -> 0x80, -Inf and -NaN -> 0xFF), except magnitudes <= "
        "2^-128, which APFloat rounds to a zero (0x00). NaN payloads are kept and quieted (nan_payload="
        "'keep_quiet', encode and decode). Not modelled (xfail entries): the FNUZ NaN decoded as +NaN, 0xFF of "
        "E8M0 decoded as +Inf, NaN / Inf into FP4 / FP6.",
        CastPolicy(nan_payload="keep_quiet"),
        sources=("llvm-project llvm/lib/Support/APFloat.cpp (convert, the E8M0 semantics)",
                 "stablehlo/reference/Element.cpp (convert through APFloat)"),
        package="torch-mlir", versions="==20261001", status="verified",
        evidence=("qref run --backend stablehlo: the stablehlo.convert target's float8_e8m0fnu encode cases "
                  "(float16, bfloat16, float32 sources: values, ties, specials, every 16-bit input) against this "
                  "record (docs/conformance.md)",
                  "tests/test_element_profiles_P.py: float32 (every top-16-bit pattern x 8 low halves, the ties "
                  "1.5 * 2^k +-1 ulp, 2^18 random), every float16 / bfloat16, float64 (those "
                  "+-2^-40, 2^16 random) through the interpreter: 0 mismatches (before sign_over_top_bit: 379,127 "
                  "of 1,527,336 float32 inputs, every one negative); 10^6 random float32 once by hand: 0",),
        cast_rules=(CastRule(CastPolicy(rounding="nearest_away", unsigned_negative="sign_over_top_bit",
                                        absent_zero="min"), target="float8_e8m0fnu"),),
    ),
    Profile(
        "mlir", "element", "MLIR arith.truncf / arith.extf lowered to LLVM, f8E8M0FNU truncf expanded by "
        "arith-expand (torch-mlir 20261001's MLIR; the E8M0 rule is IREE 3.13's too: profile 'iree')",
        "Every target as 'spec' but for these rules. float8_e8m0fnu: float64 inputs are rounded to float32 "
        "first (fptrunc), "
        "then the expansion keeps the float32 exponent field (rounding toward zero: 1.7014115e38 -> 0xFD, "
        "1.9 -> 0x7F), ignores the sign bit and gives 0x00 (2^-127) for +-0; NaN and +-Inf give 0xFF. NaN "
        "payloads: float32 / float64 -> float16 and float16 -> float32 keep and quiet them (nan_payload="
        "'keep_quiet'), bfloat16 -> float32 shifts them (keep_raw), the bf16 truncf expansion gives +NaN 0x7FC0 "
        "(nan='positive'). Not modelled (xfail entries): the f4E2M1FN truncf's sign and tie rules, the extf flush of "
        "2^-127 into bfloat16 / float16.",
        CastPolicy(),
        sources=("llvm-project mlir/lib/Dialect/Arith/Transforms/ExpandOps.cpp (truncf to f8E8M0FNU)",),
        package="torch-mlir", versions="==20261001", status="verified",
        evidence=("qref run --backend mlir and --backend iree: the mlir.arith and iree.arith targets' "
                  "float8_e8m0fnu encode cases against this record (docs/conformance.md)",),
        cast_rules=(CastRule(CastPolicy(rounding="toward_zero", unsigned_negative="magnitude", absent_zero="min",
                                        source="via_float32"), target="float8_e8m0fnu"),
                    # llvm fptrunc / fpext (vcvtps2ph, cvtsd2ss...): the payload kept and quieted; the bf16 truncf
                    # expansion: +NaN 0x7FC0; bf16 extf: a bit shift
                    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float16", source="float32"),
                    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float16", source="float64"),
                    CastRule(CastPolicy(nan="positive"), target="bfloat16", source="float32"),
                    CastRule(CastPolicy(nan_payload="keep_quiet"), target="float32", source="float16"),
                    CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="bfloat16")),
    ),
    Profile(
        "iree", "element", "IREE 3.13 arith.truncf / arith.extf in a linalg.generic, iree-compile llvm-cpu "
        "(generic CPU)",
        "As 'mlir' for float8_e8m0fnu (the same arith-expand rule); NaN inputs (IREE's own f16 / bf16 / float8 "
        "emulation): float16 targets write the all-ones NaN of the sign (0x7FFF / 0xFFFF: nan_code='all_ones'), "
        "bfloat16 targets +NaN 0x7FC0 (nan='positive'), float8_e5m2 / float8_e4m3 / float8_e3m4 +NaN 0x7F "
        "(nan='positive', nan_code='all_ones'); bfloat16 -> float32 extf shifts the payload (nan_payload="
        "'keep_raw'). Not modelled (xfail entries): the float8 emulation's flush of values that round up to the "
        "smallest normal, float16 subnormal results flushed, the +NaN 0x7FC00000 every float8 NaN decodes to, the "
        "f4E2M1FN and f8E8M0FNU rules listed there.",
        CastPolicy(),
        sources=("iree compiler/src/iree/compiler/Codegen (arith.truncf / extf emulation of f16, bf16, f8 types)",
                 "measured: iree-base-compiler / iree-base-runtime 3.13.0, llvm-cpu, local-task"),
        package="iree-base-compiler", versions="==3.13.*", status="verified",
        evidence=("qref run --backend iree: the iree.arith target's float8_e8m0fnu encode cases against this record",
                  "tests/test_nan_payload.py: every NaN of float16 / bfloat16 and float32 / float64 NaNs with one "
                  "payload bit at each position and 2,000 random payloads into float16, bfloat16 and the IEEE float8 "
                  "types, and every bfloat16 NaN code decoded to float32: 0 mismatches",),
        cast_rules=(CastRule(CastPolicy(rounding="toward_zero", unsigned_negative="magnitude", absent_zero="min",
                                        source="via_float32"), target="float8_e8m0fnu"),
                    CastRule(CastPolicy(nan_code="all_ones"), target="float16"),
                    CastRule(CastPolicy(nan="positive"), target="bfloat16"),
                    *(CastRule(CastPolicy(nan="positive", nan_code="all_ones"), target=t)
                      for t in ("float8_e5m2", "float8_e4m3", "float8_e3m4")),
                    CastRule(CastPolicy(nan_payload="keep_raw"), target="float32", source="bfloat16")),
    ),
    Profile(
        "onnxruntime", "element", "ONNX Runtime 1.32 Cast (CPUExecutionProvider), saturate=1 on float8 targets "
        "(FLOAT8E8M0: opset 24, round_mode='up', the default)",
        "float64 inputs are rounded to float32 first (double rounding); float8 targets: nearest_even, finite "
        "overflow and +-Inf clamp to +-max, NaN stays NaN with its sign; float8_e5m2 writes every NaN as 0x7F / "
        "0xFF (nan_code='all_ones'); float8_e8m0fnu: the value rounded up to a power of two (1.0000001 -> 2, "
        "2^-128 -> 2^-127), clamped to 2^127 (+Inf too), +-0, every negative value and -Inf give 0x00 (2^-127: "
        "absent_zero='min', unsigned_negative='min'), NaN of either sign 0xFF; float16 / bfloat16 targets (no "
        "saturate attribute): nearest_even, +-Inf on overflow; Cast float16 -> float32 keeps and quiets NaN "
        "payloads (nan_payload='keep_quiet'), bfloat16 -> float32 shifts them (keep_raw). Not modelled (xfail "
        "entries): the NaN payloads Cast to float16 keeps from float32 (0x7FA00000 -> 0x7F00 vectorized, 0x7E00 in "
        "the scalar tail).",
        CastPolicy(overflow="saturate", source="via_float32"),
        sources=("onnx Cast-24/25 (saturate, round_mode)", "measured: onnxruntime 1.32 Cast on the "
                 "CPUExecutionProvider"),
        package="onnxruntime", versions="==1.32.*", status="verified",
        evidence=("tests/test_element_profiles_W.py against the installed onnxruntime", "float32, float16, "
                  "bfloat16 and float64 sources x the five float8 targets (saturate=1): every 16-bit input, every "
                  "float32 value and tie of the format +-2 ulp, 2 x 10^6 random float32 patterns, float64 values "
                  "and ties +-2^-40 and +-2^-30 (relative) and 10^6 random float64 patterns: 0 mismatches",
                  "qref run --backend onnxruntime: the onnxruntime.cast.saturate target against this record",),
        cast_rules=(
            *_ORT_DECODE_RULES,
            CastRule(CastPolicy(overflow="saturate", nan_code="all_ones", source="via_float32"),
                     target="float8_e5m2"),
            CastRule(CastPolicy(rounding="up", overflow="saturate", unsigned_negative="min", absent_zero="min",
                                source="via_float32"), target="float8_e8m0fnu"),
            *(CastRule(CastPolicy(source="via_float32"), target=t) for t in ("float16", "bfloat16", "float32")),
        ),
    ),
    Profile(
        "onnxruntime_no_saturate", "element", "ONNX Runtime 1.32 Cast (CPUExecutionProvider), saturate=0 on "
        "float8 targets (FLOAT8E8M0: round_mode='up'); Cast to float16 / bfloat16",
        "float64 inputs are rounded to float32 first (double rounding); nearest_even with the format's own "
        "overflow (E5M2: +-Inf; E4M3FN and FNUZ: NaN); float8_e5m2 writes every NaN as 0x7F / 0xFF "
        "(nan_code='all_ones'); from bfloat16, NaN of either sign gives the positive NaN (E4M3FN 0x7F, E5M2 0x7F); "
        "float8_e8m0fnu: rounded up to a power of two, 0xFF (NaN) for +-0, negative values, +-Inf, values that "
        "round past 2^127 and positive values below 2^-127 (absent_zero='nan_below_min': 2^-128 -> 0xFF, "
        "2^-127 -> 0x00). Not modelled (xfail entries): float8_e4m3fn gives 448 (0x7E) on [480, 496) where "
        "nearest_even overflows to NaN (NaN on (464, 480)); float8_e5m2 gives NaN 0x7F / 0xFF, not Inf, on "
        "[61440, 65536) (values that round up to 2^16; larger ones give Inf): |x| after the float32 rounding, "
        "both signs, every source dtype, bit slips of ORT's float8.h (E4M3FN: the truncated code 0x7F is "
        "cleared to 0x7E before rounding; E5M2: the Inf code 0x7C is OR-ed into the truncated 0x7B); NaN "
        "payloads kept by Cast to float16 (vectorized). NaN payloads decoded as 'onnxruntime'.",
        CastPolicy(source="via_float32"),
        sources=("onnx Cast-24/25 (saturate, round_mode)", "measured: onnxruntime 1.32 Cast on the "
                 "CPUExecutionProvider"),
        package="onnxruntime", versions="==1.32.*", status="verified",
        evidence=("tests/test_element_profiles_W.py against the installed onnxruntime", "float32, float16, "
                  "bfloat16 and float64 sources x the five float8 targets (saturate=0), float16 and bfloat16 "
                  "targets: every 16-bit input, every float32 value and tie of the format +-2 ulp, 2 x 10^6 random "
                  "float32 patterns, float64 values and ties +-2^-40 and +-2^-30 (relative), 10^6 random float64 "
                  "patterns: 0 mismatches beyond the rules listed as not modelled",
                  "qref run --backend onnxruntime: the onnxruntime.cast.nosaturate target against this record",
                  "tests/test_element_profiles_P.py: the two unmodelled ranges pinned (0x7E / 0x7F with the sign "
                  "there, the profile everywhere else) from float32, float16, bfloat16 and float64",),
        cast_rules=(
            *_ORT_DECODE_RULES,
            CastRule(CastPolicy(nan="positive", nan_code="all_ones", source="via_float32"), target="float8_e5m2",
                     source="bfloat16"),
            CastRule(CastPolicy(nan_code="all_ones", source="via_float32"), target="float8_e5m2"),
            CastRule(CastPolicy(nan="positive", source="via_float32"), target="float8_e4m3fn", source="bfloat16"),
            CastRule(CastPolicy(rounding="up", absent_zero="nan_below_min", source="via_float32"),
                     target="float8_e8m0fnu"),
        ),
    ),
    Profile(
        "jax", "element", "JAX 0.10.2 x.astype(jnp.float8_e8m0fnu) and x.astype(integer dtype) on XLA:CPU (eager "
        "and jax.jit)",
        "Every target as 'spec' but for these rules. float8_e8m0fnu: float32 / float16 / bfloat16 inputs take "
        "the float32 "
        "exponent field plus the first fraction bit (rounding='exponent_carry': ties up, 1.5 * 2^127 -> NaN; "
        "float32 subnormals (2^-127, 2^-126) -> 0x01, (0, 2^-127] -> 0x00, as ml_dtypes 0.5-0.6); float64 "
        "inputs are rounded once by the same rule (nearest, ties up, for |x| >= 2^-126; up in [2^-127, 2^-126)) "
        "and every positive float64 below 2^-127 gives NaN (absent_zero='nan_below_min'); +-0, negative values, "
        "+-Inf and NaN give 0xFF. Integer targets (int2..int32, uint2..uint32): truncation toward zero, "
        "saturation at the storage range (+-Inf too), NaN -> 0 (XLA's convert). NaN payloads (elements.md §2.7): "
        "float32 / bfloat16 -> float16 and the widening casts keep the payload and quiet it (nan_payload="
        "'keep_quiet'), bfloat16 -> float32 shifts it (keep_raw); float16 / bfloat16 -> float8_e5m2 give +NaN 0x7F "
        "for every NaN (nan='positive', nan_code='all_ones'). The other formats' differences (FNUZ NaN, float4 NaN "
        "sign, float64 -> float16 / bfloat16 through float32) stay xfail entries.",
        CastPolicy(),
        sources=("measured: jax 0.10.2 / jaxlib XLA:CPU convert to f8E8M0FNU",),
        package="jax", versions="==0.10.2", status="verified",
        evidence=("qref sweep float8_e8m0fnu --against jax --profile jax: all 2^32 float32, 2^16 float16 and 2^16 "
                  "bfloat16 inputs, 0 mismatches, the same with XLA_FLAGS=--xla_cpu_max_isa=AVX2 (AMD EPYC Zen 4)",
                  "float64: every E8M0 value and midpoint, +-2^-40 and +-2^-30 (relative), 2^-127 (1 +- small), "
                  "10^6 random float64 patterns, eager and jax.jit: 0 mismatches; tests/test_element_profiles_W.py",
                  "qref run --backend jax (--cpu baseline and native): the jax.astype.* float8_e8m0fnu cases pass",
                  "integer targets: float32 (every top-16-bit pattern x 8 low halves, 10^6 random), every float16 "
                  "/ bfloat16, float64 (4.8 x 10^6) into int2/4/8/16/32 and uint2/4/8/16/32, eager and jax.jit: "
                  "0 mismatches; tests/test_element_profiles_P.py",
                  "NaN payloads: tests/test_nan_payload.py against jax 0.10.2 (every NaN of float16 / bfloat16 / the "
                  "float8 types, float32 / float64 NaNs with one payload bit at each position and 20,000 random "
                  "payloads, every cast among them): 0 mismatches (float64 -> float16 under the AVX2 pin: "
                  "canonical; natively keep_quiet)",),
        cast_rules=(
            CastRule(CastPolicy(rounding="exponent_carry", absent_zero="nan_below_min"), target="float8_e8m0fnu",
                     source="float64"),
            CastRule(CastPolicy(rounding="exponent_carry"), target="float8_e8m0fnu"),
            CastRule(CastPolicy(rounding="toward_zero", overflow="saturate"), target="integer"),
            *_JAX_PAYLOAD_RULES,
        ),
    ),
    Profile(
        "mlx", "element", "MLX 0.32 mx.to_fp8 (float8_e4m3fn)",
        "nearest_even; overflow and +-Inf saturate to +-448; NaN becomes +-448 by its sign bit.",
        CastPolicy(overflow="saturate", nan="max"),
        sources=("mlx/backend/cpu/quantized.cpp", "checked against mlx 0.32.4 CPU"),
        package="mlx", versions=">=0.32,<0.33", status="verified",
        evidence=("qref run --backend mlx (mx.to_fp8 target) on the committed suite; tests/test_harness.py",),
    ),
)

for _p in PROFILES:
    register_profile(_p)


__all__ = ["PROFILES"]
