"""Exponent helpers of the block schemes (spec: block.md §3); the emulated IEEE steps in a compute dtype
(``div``, ``mul``, ``round_to`` with XLA:CPU's flush-to-zero, block.md §3.2) and the compute dtypes
(``resolve_compute_dtype``) are qref.core.arith's.

- exact helpers on the bit patterns of positive finite values (``floor_log2``, ``ceil_log2``,
  ``ceil_log2_ratio``, ``round_half_up_exponent``): integer arithmetic on the exact triples of qref.core.exact,
  no floating-point logarithm;
- torch's logarithms ``log2_float32`` and ``log2_in`` (block.md §3.3);
- JAX's ``jnp.log2`` under XLA's constant folding, ``log2_via_ln`` (block.md §3.3).

``log2_float32`` is the one deliberately inexact helper: the correctly rounded float32 logarithm, which is what
``torch.log2`` returns on CPU (checked on 50 800 values next to powers of two, block.md §3.3); the torchao RCEIL
and microxcaling rules use it on purpose.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...core.arith import F16, F32, F64, in_float32, round_to
from ...core.exact import U64, bit_length, decompose
from ...errors import QrefError


# ---------------------------------------------------------------------------------------------------------
# exact exponent helpers (block.md §3.1)
# ---------------------------------------------------------------------------------------------------------
def _parts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ex = decompose(np.ascontiguousarray(v).reshape(-1))
    return ex.sig, ex.exp, bit_length(ex.sig)


def floor_log2(v: np.ndarray) -> np.ndarray:
    """floor(log2 v) exactly, for positive finite v (int64)."""
    _, exp, L = _parts(v)
    return (exp + L - 1).reshape(np.shape(v))


def ceil_log2(v: np.ndarray) -> np.ndarray:
    """ceil(log2 v) exactly, for positive finite v (int64)."""
    sig, exp, L = _parts(v)
    not_pow2 = (sig & (sig - U64(1))) != 0
    return (exp + L - 1 + not_pow2).reshape(np.shape(v))


def dyadic(value: Fraction) -> tuple[int, int]:
    """(m, mu) with value = m * 2^mu and m odd (value a positive dyadic rational)."""
    num, den = value.numerator, value.denominator
    if value <= 0 or den & (den - 1):
        raise QrefError(f"{value} is not a positive dyadic rational")
    mu = -(den.bit_length() - 1)
    while num % 2 == 0:
        num //= 2
        mu += 1
    return num, mu


def ceil_log2_ratio(v: np.ndarray, divisor: Fraction) -> np.ndarray:
    """ceil(log2(v / divisor)) exactly, for positive finite v and a positive dyadic divisor (int64).

    With v = A 2^alpha and divisor = m 2^mu (m odd): A/m = 2^(L_A - L_m) (f/g) with f, g in [1, 2), so
    ceil(log2(A/m)) = L_A - L_m + [f > g], and f > g  <=>  A > m 2^(L_A - L_m) (or A 2^(L_m - L_A) > m)."""
    m, mu = dyadic(divisor)
    sig, exp, LA = _parts(v)
    Lm = m.bit_length()
    d = LA - Lm
    mm = U64(m)
    left = np.where(d >= 0, mm << np.clip(d, 0, 63).astype(U64), U64(0))
    right = np.where(d < 0, sig << np.clip(-d, 0, 63).astype(U64), U64(0))
    greater = np.where(d >= 0, sig > left, right > mm)
    return (d + greater + exp - mu).reshape(np.shape(v))


def round_half_up_exponent(v: np.ndarray, mbits: int) -> np.ndarray:
    """floor(log2 v') where v' is v rounded to mbits fraction bits, ties away from zero (torchao EVEN):
    floor(log2 v) + 1 exactly when the top mbits + 2 significant bits of v are all ones."""
    sig, exp, L = _parts(v)
    keep = mbits + 2
    sh = L - keep
    top = np.where(sh >= 0, sig >> np.clip(sh, 0, 63).astype(U64), sig << np.clip(-sh, 0, 63).astype(U64))
    carry = top >= U64((1 << keep) - 1)
    return (exp + L - 1 + carry).reshape(np.shape(v))


def log2_in(v: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """log2 of v computed as torch does on CPU in ``dtype`` (block.md §3.3): the correctly rounded float32 log2
    of v rounded to float32, then rounded once more to a 16-bit dtype (torch evaluates 16-bit elementwise
    functions in float32); dtype None or float32: log2_float32."""
    out = log2_float32(round_to(np.asarray(v), F32))
    return out if dtype is None or dtype == F32 else round_to(out, dtype)


def log2_float32(v: np.ndarray) -> np.ndarray:
    """The correctly rounded float32 log2 of float32 values (what torch.log2 gives on CPU); log2(0) = -Inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(np.asarray(v, dtype=F32).astype(F64)).astype(F32)


def log2_via_ln(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """log2 of positive values v of ``dtype`` (float32, float16 or bfloat16) as jnp.log2 computes it under jax.jit
    on XLA:CPU (block.md §3.3): jnp.log2(v) = log(v) / log(2) in ``dtype``, and XLA folds the division by the
    constant fl_T(ln 2) into a multiplication by its reciprocal, rounded to float16 for float16 and to float32
    otherwise (16-bit arithmetic runs in float32, each result rounded to the dtype):

        fl_T(fl_T(ln v) * fl_K(1 / fl_T(ln 2))),   K = float16 for float16, else float32

    with ln the correctly rounded float32 logarithm (XLA's own differs from it by an ulp on some values, never
    where the ceiling of the result changes: block.md §3.3)."""
    T = np.dtype(dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        ln = round_to(np.log(np.asarray(v, dtype=F64)), F32)
    L = round_to(ln, T)
    ln2 = float(round_to(np.float64(np.log(2.0)), T))
    inv = round_to(np.float64(1.0 / ln2), F16 if T == F16 else F32)
    return in_float32(L.astype(F64) * np.float64(inv), T)


__all__ = [
    "ceil_log2",
    "ceil_log2_ratio",
    "dyadic",
    "floor_log2",
    "log2_float32",
    "log2_in",
    "log2_via_ln",
    "round_half_up_exponent",
]
