"""MLX quantized_matmul and qqmm on CPU, emulated with explicit numerics (spec: docs/spec/recipes.md §7.2-7.3).

Library-specific emulations built on the generic ops (qref/recipes/ops.py): the same ``MatmulResult`` contract
(exact result, rigorous bound, unspecified mask).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import add_round, f64, mul_round, np_dtype, round_values
from ..core.decode import decode
from ..core.encode import encode
from ..errors import QrefError, check_choice
from ..formats import FloatFormat
from ..schemes.base import QArray
from .exact import (
    BIG,
    Dyadic,
    Level,
    acc_format,
    bound_from_terms,
    lsb_exponent,
)
from .ops import (
    MatmulResult,
    _lsb_rows_cols,
    _special,
)
from .scaling import _pow2_log_ratio

# ---------------------------------------------------------------------------------------------------------
# MLX quantized_matmul and qqmm on CPU (recipes.md §7.2-7.3)
# ---------------------------------------------------------------------------------------------------------
MLX_DTYPES = ("float32", "float16", "bfloat16")
MLX_ORDERS = ("any", "mlx_cpu")


def _mlx_mode(q: QArray) -> tuple[str, int]:
    sch: Any = q.scheme
    kind = getattr(sch, "kind", None)
    if getattr(sch, "family", None) != "block":
        raise QrefError("mlx_quantized_matmul takes a block QArray (mxfp4, mxfp8_e4m3, nvfp4 or mlx_affine)")
    k = int(sch.block_size)
    if kind == "mx" and sch.element.name == "float4_e2m1fn" and k == 32:
        return "mxfp4", k
    if kind == "mx" and sch.element.name == "float8_e4m3fn" and k == 32:
        return "mxfp8", k
    if kind == "float_scale" and sch.element.name == "float4_e2m1fn" and k == 16 and \
            sch.scale_format.name == "float8_e4m3fn":
        if q.global_scale is not None:
            raise QrefError("MLX quantized_matmul takes no global scale: quantize nvfp4 without one")
        return "nvfp4", k
    if kind == "affine":
        return "affine", k
    raise QrefError(f"MLX has no quantized_matmul mode for {sch.name} with block size {k}")


def _mlx_scale_values(q: QArray, mode: str, T: FloatFormat) -> np.ndarray:
    """MLX's scales as T values: MX bytes b -> the bfloat16 with bits (b << 7) (b = 0: 2^-127, 255: +Inf),
    NVFP4 E4M3 bytes -> their value; then cast to T (recipes.md §7.2)."""
    s = np.asarray(q.scales)
    if mode in ("mxfp4", "mxfp8"):
        b = s.astype(np.int64)
        v = np.where(b == 255, np.inf, np.ldexp(1.0, np.where(b == 0, -127, b - 127)))
    elif mode == "nvfp4":
        v = decode(s.astype(np.uint8), "float8_e4m3fn", dtype=np.float64)
    else:
        v = f64(s)
    return round_values(v, T)


def _mlx_weights(q: QArray, mode: str, T: FloatFormat, transpose: bool) -> tuple[np.ndarray, ...]:
    """(element values or codes (N, K), per-element scale_T, per-element bias_T) laid out as (K, N)."""
    sch: Any = q.scheme
    codes = np.asarray(q.codes)
    if codes.ndim != 2:
        raise QrefError("the quantized weight must be a 2-D QArray")
    ax = q.axis if q.axis is not None else 1
    if ax != 1:
        raise QrefError("MLX quantizes along the last axis: the weight QArray must be quantized along axis 1")
    k = int(sch.block_size)
    sv = np.repeat(_mlx_scale_values(q, mode, T), k, axis=1)[:, :codes.shape[1]]
    if mode == "affine":
        e = codes.astype(np.float64)
        bv = np.repeat(round_values(f64(q.biases), T), k, axis=1)[:, :codes.shape[1]]
    else:
        e = decode(codes, sch.element, dtype=np.float64)
        bv = np.zeros_like(e)
    if transpose:  # w is (N, K): y = x @ w.T
        return e.T, sv.T, bv.T
    return e, sv, bv  # w is (K, N) with groups along N


def mlx_quantized_matmul(x: object, w: QArray, *, transpose: bool = True, order: str = "any") -> MatmulResult:
    """Emulation of mx.quantized_matmul(x, w_packed, scales[, biases], transpose, group_size, bits, mode) on
    the MLX 0.32 CPU backend (recipes.md §7.2).

    x: (M, K) float32 / float16 / bfloat16 (T); w: a block QArray of the weight, (N, K) quantized along axis 1
    for transpose=True (x @ w.T, the default) or (K, N) quantized along axis 1 (groups along N) for
    transpose=False; modes mxfp4, mxfp8 (E4M3), nvfp4 (without global scale) and affine. The exact result is
    sum_k x_k w_k with w_k = P_k * scale_T (affine: scale_T * q_k + bias_T), scale_T the scale cast to T as
    MLX does. order: "any" (value = correctly rounded; bound over MLX's CPU code paths: the scalar loops in T
    and the SIMD loops in float32 lanes) or "mlx_cpu" (the scalar fp loop bit for bit: per group gsum =
    fl_T(gsum + fl_T(x w)), then sum = fl_T(sum + fl_T(scale gsum)); fp modes only)."""
    check_choice("order", order, MLX_ORDERS)
    xv = np.asarray(x)
    T = acc_format(xv.dtype if xv.dtype.kind in "fV" else np.float64)
    if T.name not in MLX_DTYPES:
        raise QrefError(f"MLX quantized_matmul takes float32, float16 or bfloat16 inputs, got {T.name}")
    if xv.ndim != 2:
        raise QrefError(f"x must be 2-D (M, K), got shape {xv.shape}")
    mode, g = _mlx_mode(w)
    e, sv, bv = _mlx_weights(w, mode, T, transpose)
    K = e.shape[0]
    if xv.shape[1] != K:
        raise QrefError(f"x has {xv.shape[1]} columns but the weight contracts over {K}")
    x64 = f64(xv)
    r = 1 if T.name == "float32" else 2  # T ops of float16/bfloat16 run in float then round to T
    G = K // g if transpose else K
    if mode == "affine":
        wterm = sv * e
        terms_a, terms_b = [x64, x64], [wterm, bv]
        depth = max(2 + r + r * K, 3 + K + 16)
    else:
        terms_a, terms_b = [x64], [e * sv]
        depth = max(2 + r * (g + G), 3 + g + G + 16) if transpose else max(2 + r * K, 3 + K + 16)
    # exact result and special values
    wv = (sv * e + bv) if mode == "affine" else e * sv
    unspec = np.zeros((xv.shape[0], e.shape[1]), dtype=bool)
    nonfin_w = ~np.isfinite(sv) | ~np.isfinite(bv) | ~np.isfinite(e)
    if nonfin_w.any():
        unspec |= (np.ones_like(x64) @ nonfin_w.astype(np.float64)) > 0
    is_sp, sp = _special(x64, np.where(nonfin_w, 0.0, wv))
    ex = Dyadic.from_floats(np.zeros(unspec.shape))
    abs_sum = ex
    lsb = np.full(unspec.shape, BIG)
    inner: list[Level] = []
    for ta, tb in zip(terms_a, terms_b):
        tbf = np.where(nonfin_w, 0.0, tb)
        da, db = Dyadic.from_floats(ta), Dyadic.from_floats(tbf)
        ex = ex + da.matmul(db)
        abs_sum = abs_sum + da.abs().matmul(db.abs())
        lsb = np.minimum(lsb, _lsb_rows_cols(ta, tbf))
    if mode != "affine" and transpose:  # MLX sums x * P per group before scaling: those sums are a level too
        eb = np.where(nonfin_w, 0.0, e)
        Gn = K // g
        xg = x64.reshape(x64.shape[0], Gn, g).transpose(1, 0, 2)  # (G, M, g)
        egr = eb.reshape(Gn, g, eb.shape[1])  # (G, g, N)
        dxg, deg = Dyadic.from_floats(xg), Dyadic.from_floats(egr)
        gabs = dxg.abs().matmul(deg.abs())  # (G, M, N)
        glsb = np.minimum(lsb_exponent(xg).min(axis=-1, initial=BIG)[..., None]
                          + lsb_exponent(egr).min(axis=-2, initial=BIG)[..., None, :], BIG)
        inner.append(Level(Dyadic(np.moveaxis(gabs.num, 0, -1), gabs.exp), np.moveaxis(glsb, 0, -1)))
    bound, overflow = bound_from_terms([Level(abs_sum, lsb), *inner], T, depth, n_tiny=4 * K + 4)
    unspec |= overflow
    bound = np.where(is_sp, 0.0, bound)
    if order == "mlx_cpu":
        if mode == "affine":
            raise QrefError("order='mlx_cpu' reproduces the fp modes' scalar loop; affine takes order='any'")
        value = _mlx_fp_loop(x64, e, sv, T, g, transpose)
    else:
        value = np.where(is_sp, sp, ex.round(T))
    value = np.where(unspec & ~np.isfinite(value), np.nan, value)
    return MatmulResult(value.astype(np_dtype(T)), ex, sp, is_sp & ~unspec, np.where(unspec, np.inf, bound), unspec,
                        T.name, {"mode": mode, "group_size": g, "depth": depth, "transpose": transpose})


def _mlx_fp_loop(x: np.ndarray, e: np.ndarray, sv: np.ndarray, T: FloatFormat, g: int, transpose: bool
                 ) -> np.ndarray:
    """MLX CPU fp_qmm_t / fp_qmm scalar loops in T (every T op = one rounding of the float32 result to T)."""
    M, K = x.shape
    N = e.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        if transpose:
            total = np.zeros((M, N))
            for start in range(0, K, g):
                gsum = np.zeros((M, N))
                for k in range(start, start + g):
                    p = mul_round(x[:, k:k + 1], e[k:k + 1, :], T)
                    gsum = round_values(add_round(gsum, p, acc_format("float32")), T)
                t = mul_round(sv[start:start + 1, :], gsum, T)
                total = round_values(add_round(total, t, acc_format("float32")), T)
            return total
        total = np.zeros((M, N))
        for k in range(K):
            xs = mul_round(x[:, k:k + 1], sv[k:k + 1, :], T)
            t = mul_round(xs, e[k:k + 1, :], T)
            total = round_values(add_round(total, t, acc_format("float32")), T)
        return total


def _mlx_qqmm_quantize(x: np.ndarray, mode: str, T: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """MLX CPU qqmm's fp_quantize_dequantize of x (recipes.md §7.3): (xhat as float64 values in T, unspecified)."""
    M, K = x.shape
    g = 16 if mode == "nvfp4" else 32
    f32 = acc_format("float32")
    xg = x.reshape(M, K // g, g)
    nan = np.isnan(xg)
    with np.errstate(invalid="ignore"):
        am = np.where(nan, -np.inf, np.abs(xg)).max(axis=-1)  # std::max skips NaN
    M_el = 6.0 if mode in ("mxfp4", "nvfp4") else 448.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = round_values(am / M_el, f32)
    unspec = nan.any(axis=-1)
    if mode == "nvfp4":
        sc = decode(encode(np.where(np.isnan(s), 0.0, s), "float8_e4m3fn", rounding="nearest_even",
                           overflow="saturate"), "float8_e4m3fn", dtype=np.float64)
    else:
        fin = np.isfinite(s)
        pos = fin & (s > 0)
        n = np.zeros(s.shape, dtype=np.int64)
        if pos.any():
            n[pos] = _pow2_log_ratio(s[pos], Fraction(1), ceil=True)  # exact ceil(log2 s)
        n = np.clip(n, -127, 127)
        byte = np.where(~fin, 255, n + 127).astype(np.int64)
        sc = np.where(byte == 255, np.inf, np.ldexp(1.0, np.where(byte == 0, -127, byte - 127)))
    scb = np.repeat(sc, g, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w_el = np.where(scb == 0, 0.0, round_values(xg.reshape(M, K) / scb.reshape(M, K), f32)).reshape(M, K)
    if mode == "mxfp8":
        out = decode(encode(w_el, "float8_e4m3fn", rounding="nearest_even", overflow="saturate", nan="max"),
                     "float8_e4m3fn", dtype=np.float64)
    else:
        c = encode(np.abs(np.where(np.isnan(w_el), 0.0, w_el)), "float4_e2m1fn", rounding="nearest_even",
                   overflow="saturate")
        mag = decode(c, "float4_e2m1fn", dtype=np.float64)
        mag = np.where(np.isnan(w_el), 6.0, mag)  # to_fp4_e2m1(NaN) = 0x7 (+6)
        out = np.where(np.signbit(w_el) & ~np.isnan(w_el), -mag, mag)
    with np.errstate(invalid="ignore", over="ignore"):
        xhat = round_values(round_values(scb.reshape(M, K) * out, f32), T)
    return xhat, np.repeat(unspec, g, axis=-1).reshape(M, K)


def mlx_qqmm(x: object, w: QArray, *, order: str = "any") -> MatmulResult:
    """Emulation of mx.qqmm(x, w_packed, scales, mode=...) on the MLX 0.32.4 CPU backend (recipes.md §7.3).

    The CPU kernel takes a quantized weight and a single row x (1, K): it quantize-dequantizes x per group
    (amax over the group, NaN skipped; s = fl32(amax / 6 or 448); nvfp4: s = e4m3(s) saturating; mxfp8 /
    mxfp4: byte = clamp(ceil(log2 s), -127, 127) + 127 computed exactly (non-finite s: 255; s = 0: any byte,
    the group is zero); elements e4m3 (saturating RNE) or e2m1 (RNE, saturating) of fl32(x / X); xhat =
    fl_T(X * element)) and then runs quantized_matmul(xhat, w). Global scales are not used on CPU.
    meta["xhat"] holds the dequantized x; groups containing a NaN are unspecified (MLX maps NaN elements to
    +-max, which qref does not promise)."""
    xv = np.asarray(x)
    T = acc_format(xv.dtype if xv.dtype.kind in "fV" else np.float64)
    if T.name not in MLX_DTYPES:
        raise QrefError(f"qqmm takes float32, float16 or bfloat16 inputs, got {T.name}")
    if xv.ndim != 2 or xv.shape[0] != 1:
        raise QrefError(f"MLX's CPU qqmm supports a single row x of shape (1, K); got {xv.shape}")
    mode, g = _mlx_mode(w)
    if mode == "affine":
        raise QrefError("qqmm takes nvfp4, mxfp8 or mxfp4 weights, not affine")
    if xv.shape[1] % g:
        raise QrefError(f"K = {xv.shape[1]} is not a multiple of the group size {g}")
    xhat, unspec_x = _mlx_qqmm_quantize(f64(xv), mode, T)
    r = mlx_quantized_matmul(xhat.astype(np_dtype(T)), w, transpose=True, order=order)
    un = r.unspecified | (unspec_x.any(axis=1, keepdims=True) & np.ones(r.value.shape, dtype=bool))
    meta = dict(r.meta)
    meta["xhat"] = xhat.astype(np_dtype(T))
    meta["xhat_unspecified"] = unspec_x
    return MatmulResult(np.where(un, np.asarray(np.nan, dtype=r.value.dtype), r.value), r.exact, r.special,
                        r.is_special & ~un, np.where(un, np.inf, r.bound), un, r.out_dtype, meta)


__all__ = ["MLX_DTYPES", "MLX_ORDERS", "mlx_qqmm", "mlx_quantized_matmul"]
