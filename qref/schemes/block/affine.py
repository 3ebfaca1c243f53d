"""MLX affine groups: unsigned b-bit codes with a float scale and bias per group (spec: block.md §6).

``mx.quantize(w, group_size, bits, mode="affine")`` on CPU (MLX 0.32.4) runs a C++ loop in float32 on the
input converted to float32; this module follows it step by step in numpy float32 (block.md §6):

    w_max, w_min = max, min of the group (NaN skipped: std::max / std::min keep the first argument)
    b >= 2:  s = max((w_max - w_min) / (2^b - 1), 1e-7)        (std::max: a NaN quotient stays NaN)
             if |w_min| > |w_max|: (s, edge) = (s, w_min) else (-s, w_max)
             q0 = rint(edge / s); if q0 != 0: s = edge / q0, bias = edge else bias = 0
    b == 1:  s = max(w_max - w_min, 1e-7), bias = w_min
    q = min(max(rint((w - bias) / s), 0), 2^b - 1)    (stochastic rounding: the P3109 rounding of the float32
                                                        quotient with R in place of rint, block.md §13)
    scale and bias are stored rounded to the input dtype.

A NaN q (a NaN element, or a group whose scale became NaN through Inf) is cast to an integer in C++, which is
undefined behaviour: such codes are unspecified (qref writes 0). dequantize (MLX's composed ops, in the scales'
dtype T): v = fl_T(fl_T(q * s) + bias).
"""

from __future__ import annotations

import numpy as np

from ...core import arith as fp
from ...core.rounding import round_to_integer
from ...formats.block import BlockFormat
from ...profiles.block import AffineRules

_F = np.float32


def _cmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """std::max(a, b) = (a < b) ? b : a."""
    with np.errstate(invalid="ignore"):
        return np.where(a < b, b, a)


def _cmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """std::min(a, b) = (b < a) ? b : a."""
    with np.errstate(invalid="ignore"):
        return np.where(b < a, b, a)


def _first_zero_sign(v: np.ndarray, w: np.ndarray, nan: np.ndarray) -> np.ndarray:
    """std::min / std::max keep the first of equal arguments: a group extreme that is zero carries the sign of the
    group's first zero (+0 and -0 compare equal; numpy's reductions do not say which one they return)."""
    zero = (w == 0) & ~nan
    first = np.argmax(zero, axis=1) if w.shape[1] else np.zeros(w.shape[0], dtype=np.intp)
    neg = np.signbit(w[np.arange(w.shape[0]), first]) if w.shape[1] else np.zeros(w.shape[0], dtype=bool)
    return np.where(v == 0, np.where(neg, _F(-0.0), _F(0.0)), v).astype(_F)


def quantize_affine_blocks(rules: AffineRules, f: BlockFormat, xb: np.ndarray,
                           rbits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Codes (uint8, (n_groups, g)), scales and biases (input dtype, (n_groups,)), unspecified mask; rbits:
    (n_groups, g) random integers of a stochastic rounding (block.md §13)."""
    nb, k = xb.shape
    T = fp.resolve_compute_dtype("input", xb.dtype)
    w = fp.round_to(xb, T).astype(_F)
    bits = f.element.bits
    n_bins = _F((1 << bits) - 1)
    eps = _F(1e-7)
    nan = np.isnan(w)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w_max = np.where(nan, _F(-np.inf), w).max(axis=1) if k else np.zeros(nb, _F)
        w_min = np.where(nan, _F(np.inf), w).min(axis=1) if k else np.zeros(nb, _F)
        w_max, w_min = _first_zero_sign(w_max, w, nan), _first_zero_sign(w_min, w, nan)
        if bits == 1:
            scale = _cmax((w_max - w_min).astype(_F), eps).astype(_F)
            bias = w_min
        else:
            mask = np.abs(w_min) > np.abs(w_max)
            scale = _cmax(((w_max - w_min) / n_bins).astype(_F), eps).astype(_F)
            scale = np.where(mask, scale, -scale).astype(_F)
            edge = np.where(mask, w_min, w_max).astype(_F)
            q0 = np.rint(edge / scale).astype(_F)
            nz = q0 != 0
            scale = np.where(nz, edge / np.where(nz, q0, _F(1)), scale).astype(_F)
            bias = np.where(nz, edge, _F(0)).astype(_F)
        quot = ((w - bias[:, None]) / scale[:, None]).astype(_F)
        if rbits is None:
            q = np.rint(quot).astype(_F)
        else:  # the exact stochastic rounding of the float32 quotient; |n| <= 2^62 is exact in float64
            n, nan_q = round_to_integer(quot, rules.rounding, rbits, rules.stochastic_bits)
            q = np.where(nan_q, np.nan, n.astype(np.float64))
        q = _cmin(_cmax(q, _F(0)), n_bins)
    unspec = np.isnan(q)
    codes = np.where(unspec, 0, q).astype(np.uint8)
    return {"codes": codes, "scales": fp.round_to(scale, T), "biases": fp.round_to(bias, T),
            "unspecified": unspec, "scales_unspecified": np.zeros(nb, dtype=bool)}


def dequantize_affine(rules: AffineRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray, biases: np.ndarray,
                      dtype: np.dtype) -> np.ndarray:
    """fl_T(fl_T(q * s) + bias) in the scales' dtype T (MLX's dequantize), then rounded to dtype."""
    q = fp.f64(codes)
    T = scales.dtype
    v = fp.add(fp.mul(q, scales[:, None], T), biases[:, None], T)
    return fp.round_to(v, np.dtype(dtype))


__all__ = ["dequantize_affine", "quantize_affine_blocks"]
