"""Abs-max int8 layers whose scales are multipliers (spec: docs/spec/recipes.md §15).

``absmax_quantize``: s = fl(qmax / fl(amax + eps)) per group, q = clip(round_half_even(fl(x s)), -qmax, qmax).
``absmax_dense``: y = fl(fl(acc) / fl(s_k s_x)) [+ bias] with acc the exact integer dot of the codes; the
kernel has one scale per output column (amax over axis 0), the input one per row (amax over the last axis).
Every step is one float32 rounding (round to nearest even); a float64 operation on float32 operands followed
by one rounding to float32 is correctly rounded for +, -, *, / (53 >= 2 * 24 + 2).
"""

from __future__ import annotations

import numpy as np

from ..core.arith import f64, round_values
from ..errors import QrefError
from ..profiles.recipe import AbsmaxMultiplierRules
from .exact import acc_format

__all__ = ["absmax_dense", "absmax_quantize"]


def absmax_quantize(x: object, axis: int | tuple[int, ...] | None, rules: AbsmaxMultiplierRules | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(codes int8, scale) with s = fl(qmax / fl(amax + eps)) (amax over ``axis``, keepdims; None: the whole
    tensor) and q = clip(round_half_even(fl(x s)), -qmax, qmax)."""
    r = rules if rules is not None else AbsmaxMultiplierRules()
    fmt = acc_format(r.dtype)
    xv = round_values(f64(x), fmt)
    if xv.size == 0:
        raise QrefError("absmax_quantize needs a non-empty array")
    if not 1 <= r.qmax <= 127:
        raise QrefError(f"qmax must be in 1..127 for int8 codes, got {r.qmax}")
    am = np.abs(xv).max(axis=axis, keepdims=True) if axis is not None else np.abs(xv).max(keepdims=True)
    eps = round_values(np.float64(r.epsilon), fmt)
    with np.errstate(all="ignore"):
        d = round_values(am + eps, fmt)
        s = round_values(float(r.qmax) / d, fmt)
        y = round_values(xv * s, fmt)
        q = np.clip(np.round(y), -r.qmax, r.qmax)  # np.round: half to even; NaN stays NaN
    if np.isnan(q).any():
        raise QrefError("absmax_quantize got a NaN (in x or its scale); the int8 cast of NaN is undefined")
    return q.astype(np.int8), s.astype(np.dtype(r.dtype))


def absmax_dense(x: object, kernel: object, bias: object | None = None,
                 rules: AbsmaxMultiplierRules | None = None) -> np.ndarray:
    """The int8 Dense forward: q_k, s_k = absmax_quantize(kernel, kernel_axis); q_x, s_x =
    absmax_quantize(x, input_axis); acc = q_x @ q_k exactly (int64); y = fl(fl(acc) / fl(s_k s_x)); y =
    fl(y + bias). x: (..., K), kernel: (K, N), bias: (N,) or None. Returns ``rules.dtype`` values."""
    r = rules if rules is not None else AbsmaxMultiplierRules()
    fmt = acc_format(r.dtype)
    kv = np.asarray(kernel)
    xv = np.asarray(x)
    if kv.ndim != 2 or xv.ndim < 1 or xv.shape[-1] != kv.shape[0]:
        raise QrefError(f"x (..., K) and kernel (K, N) do not match: {xv.shape} and {kv.shape}")
    qk, sk = absmax_quantize(kv, r.kernel_axis, r)
    qx, sx = absmax_quantize(xv, r.input_axis, r)
    acc = np.matmul(qx.astype(np.int64), qk.astype(np.int64))
    with np.errstate(all="ignore"):
        sk_row = f64(sk).reshape(-1)
        m = round_values(sk_row * f64(sx), fmt)
        y = round_values(round_values(acc.astype(np.float64), fmt) / m, fmt)
        if bias is not None:
            bv = round_values(f64(bias), fmt)
            if bv.shape != (kv.shape[1],):
                raise QrefError(f"bias must have shape ({kv.shape[1]},), got {bv.shape}")
            y = round_values(y + bv, fmt)
    return y.astype(np.dtype(r.dtype))
