"""jax.lax.scaled_dot on XLA:CPU, emulated with explicit numerics (spec: docs/spec/recipes.md §7.1).

A library-specific emulation built on the generic ops (qref/recipes/ops.py): the same ``MatmulResult`` contract
(exact result, rigorous bound, unspecified mask).
"""

from __future__ import annotations

import numpy as np

from ..core.arith import round_values
from ..core.decode import decode
from ..errors import QrefError, check_choice
from ..formats import FloatFormat, Format, get_format
from ..schemes.base import QArray
from .exact import (
    acc_format,
)
from .ops import (
    Accumulation,
    MatmulResult,
    exact_matmul,
)


# ---------------------------------------------------------------------------------------------------------
# jax.lax.scaled_dot on XLA:CPU (recipes.md §7.1)
# ---------------------------------------------------------------------------------------------------------
def _bf16() -> FloatFormat:
    f = get_format("bfloat16")
    assert isinstance(f, FloatFormat)
    return f


def _operand_values(x: object, fmt: str | Format | None, what: str) -> tuple[np.ndarray, Format]:
    """(float64 values, format) of an ml_dtypes array (or integer codes with an explicit format)."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu":
        if fmt is None:
            raise QrefError(f"{what}: integer codes need their format (pass {what}_format=...)")
        f = get_format(fmt)
        return decode(arr, f, dtype=np.float64), f
    try:
        f = get_format(arr.dtype.name)
    except QrefError:
        raise QrefError(f"{what}: expected an ml_dtypes low-precision array (float8_e4m3fn, float4_e2m1fn, "
                        f"float8_e8m0fnu, ...) or integer codes with a format, got dtype {arr.dtype}") from None
    return decode(arr.view(f.code_dtype), f, dtype=np.float64), f


def jax_scaled_dot(lhs: object, rhs: object, lhs_scale: object = None, rhs_scale: object = None, *,
                   preferred_element_type: str = "float32", lhs_format: str | None = None,
                   rhs_format: str | None = None, lhs_scale_format: str | None = None,
                   rhs_scale_format: str | None = None, ftz: bool = True) -> MatmulResult:
    """Emulation of jax.lax.scaled_dot on XLA:CPU (JAX 0.10.2, recipes.md §7.1).

    lhs (M, K) and rhs (K, N) are ml_dtypes arrays of the element format (or integer codes with
    lhs_format / rhs_format); lhs_scale (M, K / B) and rhs_scale (K / B, N) hold one scale per block of B
    consecutive K (E8M0 for MX, E4M3 for NVFP4). Block QArrays are accepted as lhs ((M, K), axis 1) and rhs
    ((K, N), axis 0) with the scales taken from them. XLA's decomposition: a = bf16(fl32(bf16(P) *
    bf16(X))), b likewise, y = dot(a, b) with bf16 x bf16 products accumulated to preferred_element_type
    (float32 default, or bfloat16) in an implementation-defined order. ftz (default True): XLA:CPU flushes
    subnormals (a scale byte 0 = 2^-127 becomes 0). The exact result is sum_k a_k b_k; the bound covers any
    order (depth K, and one more rounding for bfloat16 output)."""
    if isinstance(lhs, QArray) or isinstance(rhs, QArray):
        if not (isinstance(lhs, QArray) and isinstance(rhs, QArray)) or lhs_scale is not None or rhs_scale is not None:
            raise QrefError("pass two block QArrays (scales come from them) or four arrays")
        for q in (lhs, rhs):
            if q.global_scale is not None:
                raise QrefError("jax.lax.scaled_dot has no global scale; quantize without one (or fold it into "
                                "the result)")
        la, lb = lhs.scheme, rhs.scheme  # type: ignore[union-attr]
        lhs_v = decode(lhs.codes, la.element, dtype=np.float64)  # type: ignore[attr-defined]
        rhs_v = decode(rhs.codes, lb.element, dtype=np.float64)  # type: ignore[attr-defined]
        ls = decode(lhs.scales, la.scale_format, dtype=np.float64)  # type: ignore[attr-defined]
        rs = decode(rhs.scales, lb.scale_format, dtype=np.float64)  # type: ignore[attr-defined]
        if lhs.axis != 1 or rhs.axis != 0:
            raise QrefError("QArray operands: lhs (M, K) quantized along axis 1, rhs (K, N) along axis 0")
    else:
        lhs_v, _ = _operand_values(lhs, lhs_format, "lhs")
        rhs_v, _ = _operand_values(rhs, rhs_format, "rhs")
        if lhs_scale is None or rhs_scale is None:
            raise QrefError("jax_scaled_dot needs lhs_scale and rhs_scale")
        ls, _ = _operand_values(lhs_scale, lhs_scale_format, "lhs_scale")
        rs, _ = _operand_values(rhs_scale, rhs_scale_format, "rhs_scale")
    if lhs_v.ndim != 2 or rhs_v.ndim != 2 or lhs_v.shape[1] != rhs_v.shape[0]:
        raise QrefError(f"jax_scaled_dot takes (M, K) and (K, N) operands, got {lhs_v.shape} and {rhs_v.shape}")
    M, K = lhs_v.shape
    N = rhs_v.shape[1]
    if ls.shape[0] != M or rs.shape[1] != N or ls.shape[1] == 0 or K % ls.shape[1] or rs.shape[0] != ls.shape[1]:
        raise QrefError(f"scale shapes {ls.shape} and {rs.shape} do not match operands {lhs_v.shape}, "
                        f"{rhs_v.shape} (need (M, K/B) and (K/B, N))")
    B = K // ls.shape[1]
    bf, f32 = _bf16(), acc_format("float32")

    def combine(v: np.ndarray, s: np.ndarray) -> np.ndarray:
        vb = round_values(v, bf, ftz=ftz)
        sb = round_values(s, bf, ftz=ftz)
        with np.errstate(invalid="ignore", over="ignore"):
            return round_values(round_values(vb * sb, f32, ftz=ftz), bf, ftz=ftz)

    a = combine(lhs_v, np.repeat(ls, B, axis=1))
    b = combine(rhs_v, np.repeat(rs, B, axis=0))
    out = check_choice("preferred_element_type", preferred_element_type, ("float32", "bfloat16"))
    r = exact_matmul(a, b, accumulation=Accumulation("any", "float32", ftz=ftz), out_dtype=out)
    r.meta.update({"lhs_bf16": a, "rhs_bf16": b, "block_size": B})
    return r


__all__ = ["jax_scaled_dot"]
