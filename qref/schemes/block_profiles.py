"""Block profiles as data (spec: block.md §8): one record per real system, each field value documented there.

params["mx"], params["float_scale"] (NVFP4 and other float scale formats) and params["affine"] hold BlockScheme
field values; params["support"] lists what the system offers (element formats, block sizes, bits) so that a
combination the system does not have is an error instead of a guess; params["element_overrides"] holds fields
that depend on the element format (MLX's FP4 argmin, microxcaling's symmetric MXINT8).
"""

from __future__ import annotations

from ..policy import CastPolicy
from ..profiles import Profile, register_profile

_FP_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn")

_OCP_MX = {
    "scale_rule": "floor", "zero_block": "min_scale", "scale_range": "clamp_nan", "nonfinite_block": "nan_scale",
    "byte0_divisor": "exact", "rounding": "nearest_even", "overflow": "saturate", "compute_dtype": "exact",
    "scale_arith": "divide", "quotient_arith": "divide", "flush_subnormals": False, "dequant": "exact",
    "dequant_nan_scale": "nan", "pad": "zero", "unspecified_open_cases": True,
}
_SYSTEM = {"unspecified_open_cases": False}

_MLX_FP4 = {"rounding": "nearest_toward_zero", "zero_sign": "positive", "out_of_range": "lut_argmin"}

PROFILES = (
    Profile(
        "ocp", "block", "OCP Microscaling Formats (MX) v1.0",
        "The spec's conversion (§6.3): X = 2^(floor(log2 amax) - emax_elem), P_i = RNE(V_i / X) with normal "
        "overflow clamped to the element max. Cases the spec leaves open are marked unspecified; qref's choice "
        "for them: zero blocks X = 2^-127, exponents below -127 clamp, above 127 and NaN/Inf blocks give a NaN "
        "scale. Float scale formats (float_scale): qref's exact single-level rule, s = RNE(amax / max_elem).",
        CastPolicy(overflow="saturate"),
        params={
            "mx": dict(_OCP_MX),
            "float_scale": {"global_scale_rule": "exact", "rounding": "nearest_even", "overflow": "saturate",
                            "compute_dtype": "exact", "dequant": "exact", "pad": "zero",
                            "unspecified_open_cases": True},
        },
        sources=("OCP Microscaling Formats (MX) v1.0 §5.3-5.4, §6.3", "docs/spec/block.md §4"),
    ),
    Profile(
        "microxcaling", "block", "microsoft/microxcaling (the MX spec authors' PyTorch emulator), float32",
        "shared_exp = floor(float32 log2(amax + 2^-126 [amax == 0])) - emax; above 127 NaN, below -127 clamp; "
        "elements rounded to nearest with ties AWAY from zero (its default 'nearest'), clamped to +-max_norm; "
        "MXINT8 clamps to +-127/64; NaN/Inf make the block NaN; short blocks padded with zeros.",
        CastPolicy(rounding="nearest_away", overflow="saturate"),
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_rule": "floor_log2_float32", "zero_block": "min_normal_amax",
                   "rounding": "nearest_away", "compute_dtype": "float32", "zero_sign": "scaled_zero_positive"},
        },
        sources=("github.com/microsoft/microxcaling mx/mx_ops.py _shared_exponents, _quantize_mx",
                 "mx/elemwise_ops.py _round_mantissa, _quantize_elemwise_core", "mx/formats.py"),
    ),
    Profile(
        "torchao_floor", "block", "torchao 0.18 mx_formats to_mx(scaling_mode=FLOOR); nvfp4_quantize",
        "byte = clamp(E(amax) - emax, -127, 128) + 127 on float32 bits (NaN amax: 255; Inf: E = 128); elements "
        "x / max(2^(byte-127), 2^-126) in float32, clamp +-max, RNE. NVFP4: s = e4m3(clamp(fl32(amax / 6) "
        "[/ pts], 2^-6, 448)), x * fl32([1/pts] / s), RNE.",
        CastPolicy(overflow="saturate"),
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_range": "clamp", "nonfinite_block": "nan255_inf_e128",
                   "byte0_divisor": "float32_min_normal", "compute_dtype": "float32", "dequant": "in_dtype",
                   "pad": "error"},
            "float_scale": {"global_scale_rule": "torchao", "compute_dtype": "float32", "rounding": "nearest_even",
                            "overflow": "saturate", "dequant": "exact", "pad": "error",
                            "unspecified_open_cases": False},
            "support": {"mx": {"elements": _FP_ELEMENTS}, "float_scale": {"elements": ("float4_e2m1fn",),
                                                                         "block_sizes": (16,)}},
        },
        sources=("torchao/prototype/mx_formats/mx_tensor.py to_mx, get_fp_scale, to_dtype",
                 "torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize", "torchao/prototype/custom_fp_utils.py"),
    ),
    Profile(
        "torchao_rceil", "block", "torchao 0.18 mx_formats to_mx(scaling_mode=RCEIL), eager fallback",
        "byte = clamp(ceil(float32 log2(fl32(amax / max))), -127, 127) + 127 (NaN: 255, Inf: 254); elements "
        "x * 2^(127-byte) (byte 0: x * 1, byte 254 from Inf: x * 2^-127), clamp +-max, RNE. NVFP4 as "
        "torchao_floor.",
        CastPolicy(overflow="saturate"),
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_rule": "rceil_log2_float32", "scale_range": "clamp",
                   "nonfinite_block": "nan255_inf254", "byte0_divisor": "one", "compute_dtype": "float32",
                   "scale_arith": "reciprocal", "dequant": "in_dtype", "pad": "error"},
            "float_scale": {"global_scale_rule": "torchao", "compute_dtype": "float32", "rounding": "nearest_even",
                            "overflow": "saturate", "dequant": "exact", "pad": "error",
                            "unspecified_open_cases": False},
            "support": {"mx": {"elements": _FP_ELEMENTS}, "float_scale": {"elements": ("float4_e2m1fn",),
                                                                         "block_sizes": (16,)}},
        },
        sources=("torchao/prototype/mx_formats/mx_tensor.py _to_mx_rceil",
                 "checked against torch 2.13 CPU: torch.log2 float32 is correctly rounded"),
    ),
    Profile(
        "mlx", "block", "MLX 0.32.4 mx.quantize / mx.dequantize on CPU",
        "mxfp4/mxfp8: r = fl_T(amax / max) in the input dtype T, e = ceil(log2 r) exactly (r = 0: e = 0), "
        "byte = e + 127 mod 256 (no clamp), elements fl_T(x / 2^e); NaN/Inf blocks: byte 128 (float32) or 0 "
        "(float16/bfloat16) and x / 0. FP8 elements: to_fp8 (RNE, saturating, NaN -> +-448); FP4 elements: "
        "first-index argmin over the E2M1 table (ties to the smaller magnitude, -0 -> +0, non-finite -> 0). "
        "nvfp4: s = to_fp8(fl_T(amax / 6) [* fl32(2688 / g)]). affine: the C++ float32 kernel.",
        CastPolicy(overflow="saturate", nan="max"),
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_rule": "rceil", "zero_block": "unit_scale", "scale_range": "wrap",
                   "nonfinite_block": "mlx", "compute_dtype": "input", "nan": "max", "dequant": "in_dtype",
                   "dequant_nan_scale": "power", "pad": "error", "min_ndim": 2},
            "float_scale": {"global_scale_rule": "mlx", "compute_dtype": "input", "rounding": "nearest_even",
                            "overflow": "saturate", "dequant": "exact", "pad": "error", "min_ndim": 2,
                            "unspecified_open_cases": False},
            "affine": {"dequant": "in_dtype", "pad": "error", "min_ndim": 2, "compute_dtype": "float32",
                       "unspecified_open_cases": False},
            "support": {"mx": {"elements": ("float8_e4m3fn", "float4_e2m1fn"), "block_sizes": (32,)},
                        "float_scale": {"elements": ("float4_e2m1fn",), "block_sizes": (16,)},
                        "affine": {"block_sizes": (32, 64, 128), "bits": (1, 2, 3, 4, 5, 6, 8)}},
            "element_overrides": {"float4_e2m1fn": dict(_MLX_FP4)},
        },
        sources=("mlx 0.32.4 (pip mlx[cpu]) mx.quantize / mx.dequantize, checked bit for bit (tests/test_block_mlx.py)",
                 "mlx/backend/cpu/quantized.cpp (affine kernel)", "mlx/ops.cpp fp_quantize / fp_dequantize"),
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
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_rule": "rceil", "scale_range": "clamp", "nonfinite_block": "jax",
                   "byte0_divisor": "jax", "compute_dtype": "input", "flush_subnormals": True,
                   "scale_arith": "reciprocal", "quotient_arith": "reciprocal", "pad": "error"},
            "float_scale": {"global_scale_rule": "jax", "compute_dtype": "input", "flush_subnormals": True,
                            "scale_arith": "reciprocal", "quotient_arith": "reciprocal",
                            "rounding": "nearest_even", "overflow": "saturate",
                            "dequant": "exact", "pad": "error", "unspecified_open_cases": False},
            "support": {"mx": {"elements": ("float8_e4m3fn",), "block_sizes": (32,)},
                        "float_scale": {"elements": ("float4_e2m1fn",), "block_sizes": (16,)}},
        },
        sources=("jax/_src/cudnn/scaled_matmul_stablehlo.py quantize, cast_to_e8m0_with_rounding_up, "
                 "e8m0_to_dtype", "jax.nn.get_scaled_dot_general_config", "checked on jax 0.10.2 CPU"),
    ),
    Profile(
        "nvidia", "block", "NVIDIA NVFP4 two-level scaling (TransformerEngine) and MXFP8 RCEIL (cuBLAS)",
        "NVFP4: S_enc = 2688 / g (g = tensor amax), s = e4m3(fl32(amax * fl32(S_enc / 6))), elements "
        "x * fl32(1 / (s / S_enc)) in float32, RNE saturating; dequantize e2m1 * (s * g / 2688). MX: "
        "byte = cvt.rp.satfinite.ue8m0(fl32(amax / max)) (exact ceil), elements x * 2^(127-byte) (byte 0: x * 1).",
        CastPolicy(overflow="saturate"),
        params={
            "mx": {**_OCP_MX, **_SYSTEM, "scale_rule": "rceil", "scale_range": "clamp",
                   "nonfinite_block": "nan255_inf254", "byte0_divisor": "one", "compute_dtype": "float32",
                   "scale_arith": "reciprocal", "quotient_arith": "reciprocal", "pad": "error"},
            "float_scale": {"global_scale_rule": "nvidia", "compute_dtype": "float32", "rounding": "nearest_even",
                            "overflow": "saturate", "dequant": "exact", "pad": "error",
                            "unspecified_open_cases": False},
            "support": {"mx": {"elements": _FP_ELEMENTS},
                        "float_scale": {"elements": ("float4_e2m1fn",), "block_sizes": (16,)}},
        },
        sources=("TransformerEngine transformer_engine/common/cast/nvfp4/core_nvfp4.cuh, dequantize_nvfp4.cuh",
                 "cuBLAS documentation: block scaling factors (cvt.rp.satfinite.ue8m0x2.f32)",
                 "not run here: no Blackwell GPU; the formulas are read from the sources"),
    ),
)

for _p in PROFILES:
    register_profile(_p, replace=True)
