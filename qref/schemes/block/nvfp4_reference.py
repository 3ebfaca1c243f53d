"""Float-scaled blocks: NVFP4 (E2M1 elements, E4M3 block scales, optional float32 global scale) and any element
format with a non-power-of-two scale format (spec: block.md §5).

Each ``global_scale_rule`` is one documented formula (block.md §5.2); ``M`` is the element maximum (6 for E2M1),
``S`` the scale format maximum (448 for E4M3), fl32 / fl_T round to float32 / the input dtype:

exact                   s = scale_fmt(amax / M); y = x / s        (exact quotients; no global scale)
amax_encode_reciprocal  (TransformerEngine)
         S_enc = fl32(M S / g) (g = 0 or S_enc = 0: 1); s = e4m3(fl32(amax * fl32(S_enc * fl32(1/M))));
         y = fl32(x * min(fl32(1 / fl32(s * fl32(1/S_enc))), FLT_MAX))
tensor_scale_clamped  (torchao)
         s = e4m3(clamp(fl32(fl32(amax / M) [/ pts]), 2^-6, S)); y = fl32(x * fl32([fl32(1/pts)] / s))
input_dtype_encode  (MLX)
         s = to_fp8(fl_T(amax / M) [* fl32(M S / g)]); y = fl_T(x / s) [* fl32(M S / g)]
prescaled_divide  (JAX)
         x' = fl32(x / gs) (gs = 1 by default); s = e4m3(clip(fl32(amax' / M), 0, S)); y = fl32(x' / s);
         under jit XLA turns each division into a multiplication by the float32 reciprocal and folds the two
         element multiplications: y = fl32(x * fl32(fl32(1/gs) * fl32(1/s))) (scale_arith and quotient_arith
         = "reciprocal")
"""

from __future__ import annotations

import numpy as np

from ...core import arith as fp
from ...core.decode import decode, target_format
from ...core.encode import encode_flat
from ...errors import QrefError
from ...formats.block import BlockFormat
from ...formats.policy import CastPolicy
from ...profiles.block import GLOBAL_SCALE_RULES, FloatScaleRules
from .mx_reference import encode_elements, tiny_quotient_one


def _block_amax(x: np.ndarray, nan: str) -> np.ndarray:
    """max |x| per row in float64; nan="propagate" (torch.amax, mx.max, jnp.max) or "ignore" (PTX max)."""
    a = np.abs(fp.f64(x))
    if a.shape[1] == 0:
        return np.zeros(a.shape[0])
    if nan == "ignore":
        return np.where(np.isnan(a), -np.inf, a).max(axis=1).clip(min=0)
    return a.max(axis=1)


def encode_scale(rules: FloatScaleRules, f: BlockFormat, v: np.ndarray, nan: str | None = None) -> np.ndarray:
    """Scale codes of float values v: nearest-even, saturating (block.md §5.1)."""
    fmt = f.scale
    pol = CastPolicy(rounding="nearest_even", overflow="saturate", nan=nan).resolve(fmt)
    return encode_flat(np.ascontiguousarray(v).reshape(-1), fmt, pol).reshape(np.shape(v))


def tensor_amax(x: np.ndarray, skip_nan: bool = True) -> np.float32:
    """max |x| over the whole tensor, NaN skipped (0 when every element is NaN or there is none; with
    skip_nan=False a NaN makes it NaN), rounded to float32 (the global amax of NVIDIA and MLX). float32 / float16 /
    bfloat16 inputs without NaN: one integer maximum of the bit patterns."""
    arr = np.asarray(x)
    if arr.size and arr.dtype in (fp.F32, fp.F16, fp.BF16):
        # (bits << 1) orders non-NaN magnitudes; a maximum at or below Inf's pattern means no NaN was present
        ut = np.uint32 if arr.dtype.itemsize == 4 else np.uint16
        top = int(np.max(np.ascontiguousarray(arr).view(ut) << ut(1)))
        inf2 = {4: 0xFF000000, 2: 0xF800 if arr.dtype == fp.F16 else 0xFF00}[arr.dtype.itemsize]
        if top <= inf2:
            return np.float32(np.array([top >> 1], dtype=ut).view(arr.dtype)[0])
    with np.errstate(invalid="ignore"):  # signaling NaN patterns
        a = np.abs(np.asarray(x, dtype=np.float64))
    if not skip_nan and np.isnan(a).any():
        return np.float32(np.nan)
    a = a[~np.isnan(a)]
    return np.float32(a.max() if a.size else 0.0)


def quantize_float_scaled_reference(rules: FloatScaleRules, f: BlockFormat, xb: np.ndarray,
                                    global_scale: np.float32 | None,
                                    rbits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The readable reference of quantize_float_scaled_blocks (block.md §5), in float64 and the core; rbits:
    (n_blocks, k) random integers of a stochastic rounding (block.md §13)."""
    nb = xb.shape[0]
    rule = rules.global_scale_rule
    M = float(f.element_max)
    S = float(f.scale.max_value)
    f32 = fp.F32
    ftz = rules.flush_subnormals
    gs_out = None
    if rule == "exact":
        if global_scale is not None:
            raise QrefError("global_scale_rule='exact' has no global scale; use another rule (block.md §5.2)")
        x64 = _exact_input(rules, f, xb)
        amax = _block_amax(x64, "propagate")
        with np.errstate(invalid="ignore"):
            byte = encode_scale(rules, f,
                                amax / M)  # float64 quotient: correctly rounded, then rounded once more (§5.3)
        d = decode(byte, f.scale, dtype=np.float64)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            # a scale that rounds to zero keeps the elements' signs: y = +-0 (tiny blocks are unspecified below)
            y = np.where(d == 0, x64 * 0.0, x64 / np.where(d == 0, 1.0, d))
    elif rule == "amax_encode_reciprocal":
        xc = fp.round_to(xb, f32)
        gs_out = np.asarray(global_scale, dtype=f32) if np.ndim(global_scale) else np.float32(global_scale)
        byte, coef = nvidia_block_scales(rules, f, _block_amax(xc,
                                                               "ignore" if rules.amax_nan == "skip" else "propagate"),
                                         gs_out)
        y = fp.mul(xc, coef[:, None], f32)
    elif rule == "tensor_scale_clamped":
        xc = fp.round_to(xb, f32)
        gs_out = None if global_scale is None else np.float32(global_scale)
        byte, r = torchao_block_scales(rules, f, _block_amax(xc, "propagate"), gs_out)
        y = fp.mul(xc, r[:, None], f32)
    elif rule == "input_dtype_encode":
        T = fp.resolve_compute_dtype("input", xb.dtype)
        xT = fp.round_to(xb, T)
        amax = _block_amax(xT, "propagate").astype(T)
        r = fp.div(amax, M, T)
        if global_scale is not None:
            gs_out = np.float32(global_scale)
            enc = fp.div(np.float32(M * S), gs_out, f32)
            sv = fp.mul(r, enc, f32)
        else:
            sv = r
        byte = encode_scale(rules, f, sv, nan="max")
        d = decode(byte, f.scale, dtype=T)
        y = fp.div(xT, d[:, None], T)
        # MLX multiplies by the float32 encode scale (1.0 without a global scale): y and the table distances
        # are float32 from here on
        y = fp.mul(y, enc, f32) if global_scale is not None else fp.round_to(y, f32)
    elif rule == "prescaled_divide":
        T = fp.resolve_compute_dtype("input", xb.dtype)
        gs_out = np.float32(1.0 if global_scale is None else global_scale)
        xT = fp.round_to(xb, T)
        if rules.scale_arith == "divide":
            xc = fp.div(xT, gs_out, f32, ftz)
        else:  # XLA under jit: x / broadcast(gs) -> x * broadcast(fl32(1 / gs))
            xc = fp.mul(xT, fp.div(1.0, gs_out, f32, ftz), f32, ftz)
        amax = _block_amax(xc, "propagate").astype(f32)
        # quotient_arith="reciprocal": x / CONST -> x * fl32(1 / CONST)
        sv = (fp.div(amax, M, f32, ftz) if rules.quotient_arith == "divide"
              else fp.mul(amax, np.float32(1.0 / M), f32, ftz))
        with np.errstate(invalid="ignore"):
            sv = np.where(np.isnan(sv), sv, np.clip(sv, 0.0, S)).astype(f32)
        byte = encode_scale(rules, f, sv)
        d = decode(byte, f.scale, dtype=f32)
        if rules.scale_arith == "divide":
            y = fp.div(xc, d[:, None], f32, ftz)
        else:  # XLA folds (x * fl32(1/gs)) * fl32(1/s) into x * fl32(fl32(1/gs) * fl32(1/s))
            r = fp.mul(fp.div(1.0, gs_out, f32, ftz), fp.div(1.0, d, f32, ftz), f32, ftz)
            y = fp.mul(xT, r[:, None], f32, ftz)
    elif rule == "input_dtype_clip":
        if global_scale is not None:
            raise QrefError("global_scale_rule='input_dtype_clip' has no global scale (block.md §5.2)")
        T = fp.resolve_compute_dtype("input", xb.dtype)
        xT = fp.round_to(xb, T)
        K = fp.F16 if T == fp.F16 else f32  # where XLA:CPU keeps a folded constant or a reciprocal
        amax = _block_amax(xT, "propagate").astype(T)
        r = (fp.div(amax, M, T, ftz) if rules.quotient_arith == "divide"
             else fp.mul(amax, fp.round_to(np.float64(1.0 / M), K), T, ftz))
        r = tiny_quotient_one(rules, r, T)
        with np.errstate(invalid="ignore"):
            sv = np.where(np.isnan(fp.f64(r)), fp.f64(r), np.clip(fp.f64(r), -S, S))
        byte = encode_scale(rules, f, sv)
        d = decode(byte, f.scale, dtype=T)
        if rules.scale_arith == "divide":
            y = fp.div(xT, d[:, None], T, ftz)
        else:  # x * fl_K(1 / s): XLA:CPU's reciprocal, float32 for bfloat16 inputs
            y = fp.mul(xT, fp.div(1.0, d, K, ftz)[:, None], T, ftz)
    else:  # pragma: no cover - validated in BlockScheme
        raise AssertionError(rule)
    codes, unspec = encode_elements(rules, f, y, rbits)
    dv = decode(byte, f.scale, dtype=np.float64)
    unspec |= np.isnan(dv)[:, None]  # a NaN scale makes every value of the block NaN
    scales_unspec = np.zeros(nb, dtype=bool)
    if rule == "prescaled_divide":  # XLA:CPU's max reduction may drop a NaN depending on the shape (block.md §5.2):
        # a NaN input, or one made by x * fl32(1 / gs) (0 * inf, inf * 0)
        nan_blk = np.isnan(fp.f64(xb)).any(axis=1) | np.isnan(fp.f64(xc)).any(axis=1)
        unspec |= nan_blk[:, None]
        scales_unspec |= nan_blk
    if (rule == "amax_encode_reciprocal" and rules.amax_nan == "propagate") or rule == "input_dtype_clip":
        scales_unspec |= np.isnan(dv)  # a NaN scale code: the sign of an arithmetic NaN is unspecified (§4.7)
    if rules.nan_block_float32 == "unspecified" and fp.resolve_compute_dtype("input", xb.dtype) == f32:
        # XLA:CPU's float32 max reduction may drop a NaN depending on the array's shape (§4.5, §5.2)
        nan_blk = np.isnan(fp.f64(xb)).any(axis=1)
        unspec |= nan_blk[:, None]
        scales_unspec |= nan_blk
    if rule == "tensor_scale_clamped":  # 0 * inf (tiny per-tensor scale): torchao's E2M1 cast reads the NaN sign (§5.2)
        unspec |= np.isnan(fp.f64(y))
    if rule == "exact":  # qref's own rule leaves non-finite and tiny blocks open (block.md §5.3)
        x64 = fp.f64(xb)
        open_blk = ~np.isfinite(x64).all(axis=1) | ((dv == 0) & (_block_amax(x64, "ignore") > 0))
        unspec |= open_blk[:, None]
        scales_unspec = open_blk | (dv == 0)
    return {"codes": codes, "scales": byte.astype(f.scale.code_dtype), "unspecified": unspec,
            "scales_unspecified": scales_unspec, "global_scale": gs_out}


def nvidia_block_scales(rules: FloatScaleRules, f: BlockFormat, amax: np.ndarray, g: np.float32) -> tuple[np.ndarray,
                                                                                                          np.ndarray]:
    """(scale codes, element factor coef) of the nvidia rule for block amaxes (NaN ignored) and the tensor amax
    g: S_enc = fl32(M S / g) (1 if g = 0 or S_enc = 0), s = e4m3(fl32(amax * fl32(S_enc * fl32(1/M)))),
    coef = min(fl32(1 / fl32(s * fl32(1/S_enc))), FLT_MAX); the elements are y = fl32(x * coef) (§5.2)."""
    f32 = fp.F32
    M = float(f.element_max)
    S = float(f.scale.max_value)
    s_enc = fp.div(np.float32(M * S), g, f32)
    s_enc = np.minimum(s_enc, np.float32(fp.FLT_MAX))
    # amax_nan="propagate": a NaN tensor amax stays NaN (every scale NaN); g is one value or one per block (§5.2.1)
    one = (np.asarray(g) == 0) | (s_enc == 0) | (np.isnan(s_enc) & (rules.amax_nan == "skip"))
    s_enc = np.where(one, np.float32(1.0), s_enc).astype(f32)
    k_m = fp.mul(s_enc, np.float32(1.0 / M), f32)
    byte = encode_scale(rules, f, fp.mul(amax, k_m, f32))
    d = decode(byte, f.scale, dtype=f32)
    s_dec = fp.div(1.0, s_enc, f32)
    coef = np.minimum(fp.div(1.0, fp.mul(d, s_dec, f32), f32), np.float32(fp.FLT_MAX))
    return byte, coef


def torchao_block_scales(rules: FloatScaleRules, f: BlockFormat, amax: np.ndarray, pts: np.float32 | None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(scale codes, element factor r) of the torchao rule for block amaxes (NaN propagates) and the optional
    per-tensor scale pts: s = e4m3(clamp(fl32(fl32(amax / M) [/ pts]), 2^-6, S)), r = fl32([fl32(1/pts)] / s);
    the elements are y = fl32(x * r) (§5.2)."""
    f32 = fp.F32
    M = float(f.element_max)
    S = float(f.scale.max_value)
    bs = fp.div(amax, M, f32)
    if pts is not None:
        bs = fp.div(bs, pts, f32)
    lo = float(f.scale.min_normal)
    with np.errstate(invalid="ignore"):
        sv = np.where(np.isnan(bs), bs, np.clip(bs, lo, S)).astype(f32)
    byte = encode_scale(rules, f, sv)
    d = decode(byte, f.scale, dtype=f32)
    num = np.float32(1.0) if pts is None else fp.div(1.0, pts, f32)
    return byte, fp.div(num, d, f32)


def _exact_input(rules: FloatScaleRules, f: BlockFormat, xb: np.ndarray) -> np.ndarray:
    """The input as float64 for the exact rule, which needs p_in + p_scale + p_elem + 2 <= 53 bits so that the
    float64 quotient rounds like the exact one (block.md §5.3)."""
    if xb.dtype == np.float64 or xb.dtype.kind in "iu":
        raise QrefError(
            "global_scale_rule='exact' quantizes float32, float16 and bfloat16 inputs exactly; round float64 or "
            "integer inputs to float32 first (x.astype(np.float32)) or pick a profile with a compute dtype"
        )
    p_in = {2: 11, 4: 24}[xb.dtype.itemsize] if xb.dtype != fp.BF16 else 8
    p = p_in + f.scale.precision + f.element.precision + 2
    if p > 53:
        raise QrefError(f"exact float-scaled quantization needs {p} <= 53 bits of float64 headroom")
    return fp.f64(xb)


def dequantize_float_scaled_reference(rules: FloatScaleRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray,
                                      global_scale: object, dtype: np.dtype) -> np.ndarray:
    """Values of (n_blocks, k) codes with float-format block scale codes (block.md §5.4):

    exact / jax / qwix: P * s [* gs] rounded once;  nvidia: fl32(P * fl32(fl32(s * g) * fl32(1/(M S))));
    torchao: fl32(P * fl32(pts * s)) (without pts: P * s);  mlx: fl32(P * fl32(s * fl32(g / (M S))))
    (without g: fl_dtype(P * s)); float32 results are then rounded to dtype."""
    dt, _ = target_format(dtype)
    rule = rules.global_scale_rule
    f32 = fp.F32
    p = decode(codes, f.element, dtype=np.float64)
    d = decode(scales, f.scale, dtype=np.float64)[:, None]
    MS = np.float32(float(f.element_max) * float(f.scale.max_value))
    g = None if global_scale is None else (np.asarray(global_scale, dtype=f32).reshape(-1, 1)
                                           if np.size(global_scale) > 1 else np.float32(global_scale))
    with np.errstate(invalid="ignore", over="ignore"):
        single = rule in ("tensor_scale_clamped", "input_dtype_encode") and g is None
        if rule in ("exact", "prescaled_divide", "input_dtype_clip") or single:
            v = p * d if g is None or rule != "prescaled_divide" else p * d * np.float64(g)
            return fp.round_to(v, dt)
        if rule == "amax_encode_reciprocal":
            fs = fp.mul(fp.mul(d, g, f32), np.float32(1.0 / float(MS)), f32)
            return fp.round_to(fp.mul(p, fs, f32), dt)
        if rule == "tensor_scale_clamped":
            return fp.round_to(fp.mul(p, fp.mul(g, d, f32), f32), dt)
        inv = fp.div(g, MS, f32)  # mlx
        return fp.round_to(fp.mul(p, fp.mul(d, inv, f32), f32), dt)


__all__ = [
    "GLOBAL_SCALE_RULES",
    "dequantize_float_scaled_reference",
    "encode_scale",
    "nvidia_block_scales",
    "quantize_float_scaled_reference",
    "tensor_amax",
    "torchao_block_scales",
]
