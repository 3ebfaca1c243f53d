"""Arithmetic for block schemes: exact exponent helpers and emulated floating-point steps (spec: block.md §3).

Two kinds of helper live here:

- exact helpers on the bit patterns of positive finite values (``floor_log2``, ``ceil_log2``,
  ``ceil_log2_ratio``, ``round_half_up_exponent``): integer arithmetic on the exact triples of qref.core.exact,
  no floating-point logarithm;
- emulated steps in a *compute dtype* (float32, float16, bfloat16): ``op(a, b)`` returns the correctly rounded
  result in that dtype, optionally with the flush-to-zero / denormals-are-zero behaviour of XLA:CPU
  (``ftz=True``: operands and results whose magnitude is below 2^-126, the float32 normal range, become zeros of
  their sign). Each step is computed in float64 (exact for products, correctly rounded for quotients and sums of
  operands of at most 24 bits) and then rounded once to the compute dtype through the core (block.md §3.2).

``log2_float32`` is the one deliberately inexact helper: the correctly rounded float32 logarithm, which is what
``torch.log2`` returns on CPU (checked on 50 800 values next to powers of two, block.md §3.3); the torchao RCEIL
and microxcaling rules use it on purpose.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np

from ..core.encode import encode_flat
from ..core.exact import U64, bit_length, decompose
from ..errors import QrefError
from ..formats import get_format
from ..policy import CastPolicy

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F64 = np.dtype(np.float64)
COMPUTE_DTYPES = ("exact", "input", "float32", "float16", "bfloat16")
F32_MIN_NORMAL = 2.0**-126
FLT_MAX = float(np.finfo(np.float32).max)

_ROUND_POLICY = CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign")


def resolve_compute_dtype(name: str, x_dtype: np.dtype) -> np.dtype | None:
    """The dtype a scheme computes in: None for "exact"; for "input", x's dtype when it is float32, float16 or
    bfloat16 and float32 otherwise (float64 and integer inputs are first rounded to float32)."""
    if name == "exact":
        return None
    if name == "input":
        return x_dtype if x_dtype in (F32, F16, BF16) else F32
    return {"float32": F32, "float16": F16, "bfloat16": BF16}[name]


def round_to(v: np.ndarray, dtype: np.dtype, ftz: bool = False) -> np.ndarray:
    """v (any float/int array) rounded once to ``dtype`` by nearest-even (overflow to +-Inf, NaN kept).

    With ``ftz`` the value is first rounded to float32, flushed to a signed zero when it is a float32 subnormal,
    then rounded to ``dtype`` (XLA:CPU computes float16/bfloat16 arithmetic in float32 with FTZ)."""
    v = np.asarray(v)
    if ftz:
        v = flush(round_to(v, F32))
    if v.dtype == dtype:
        return v.copy()
    if dtype == F32 and v.dtype in (F64, F16, BF16):
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(F32)  # IEEE conversion: correctly rounded (exact from the 16-bit types)
    fmt = get_format(dtype.name)
    codes = encode_flat(np.ascontiguousarray(v).reshape(-1), fmt, _ROUND_POLICY.resolve(fmt))
    return codes.view(dtype).reshape(v.shape)


def f64(v: object) -> np.ndarray:
    """v as float64 (exact from every float dtype), without numpy's cast warnings for NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(v).astype(F64)


def flush(v: np.ndarray, min_normal: float = F32_MIN_NORMAL) -> np.ndarray:
    """Subnormal magnitudes (0 < |v| < min_normal, float32's 2^-126 by default) become zeros of the same sign
    (FTZ / DAZ)."""
    with np.errstate(invalid="ignore"):
        tiny = (np.abs(f64(v)) < min_normal) & (v != 0)
    if not tiny.any():
        return v
    return np.where(tiny, np.copysign(np.zeros((), v.dtype), v), v)


def _operand(a: object, ftz: bool) -> np.ndarray:
    arr = np.asarray(a)
    if ftz and arr.dtype.kind in "fV":
        arr = flush(arr)
    return f64(arr)


def div(a: object, b: object, dtype: np.dtype, ftz: bool = False) -> np.ndarray:
    """fl_dtype(a / b) (IEEE: x/0 = +-Inf, 0/0 = NaN); with ftz, DAZ on the operands and FTZ on the result."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return round_to(_operand(a, ftz) / _operand(b, ftz), dtype, ftz)


def mul(a: object, b: object, dtype: np.dtype, ftz: bool = False) -> np.ndarray:
    """fl_dtype(a * b); with ftz, DAZ on the operands and FTZ on the result."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, ftz) * _operand(b, ftz), dtype, ftz)


def sub(a: object, b: object, dtype: np.dtype) -> np.ndarray:
    """fl_dtype(a - b)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, False) - _operand(b, False), dtype)


def add(a: object, b: object, dtype: np.dtype) -> np.ndarray:
    """fl_dtype(a + b)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, False) + _operand(b, False), dtype)


def pow2(e: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """2^e as float64 (dtype None) or rounded to ``dtype`` (so 2^-25 is 0 in float16, 2^128 is Inf)."""
    v = np.ldexp(np.ones(np.shape(e)), np.clip(np.asarray(e, dtype=np.int64), -1100, 1100))
    return v if dtype is None else round_to(v, dtype)


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


def fl_in(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """v (float64, exact or correctly rounded) rounded to float32 and then, for a 16-bit ``dtype``, once more:
    how torch computes one elementwise operation on a 16-bit tensor on CPU (in float32, stored back)."""
    r = round_to(v, F32)
    return r if dtype == F32 else round_to(r, dtype)


def log2_float32(v: np.ndarray) -> np.ndarray:
    """The correctly rounded float32 log2 of float32 values (what torch.log2 gives on CPU); log2(0) = -Inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(np.asarray(v, dtype=F32).astype(F64)).astype(F32)
