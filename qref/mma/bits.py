"""Integer views of operands and the output roundings of matrix units (spec: mma.md §2, §4).

Every finite operand is split into a signed integer significand and an exponent:
value = sig * 2^(e - frac), e = max(unbiased exponent, 1 - bias) (subnormals keep the minimum exponent),
frac = the format's mantissa bits. All alignment, truncation and rounding below is exact int64 arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import ml_dtypes
import numpy as np

from ..core.arith import fma_float32
from ..errors import QrefError
from ..formats import FloatFormat, get_format

#: operand formats a matrix unit reads; "ue4m3" is float8_e4m3fn storage whose sign bit is ignored (mma.md §2.1)
OPERAND_FORMATS = (
    "float64", "float32", "tf32", "float16", "bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn", "float8_e8m0fnu", "ue4m3",
)
_STORAGE = {"tf32": "float32", "ue4m3": "float8_e4m3fn"}


def storage_dtype(fmt: str) -> np.dtype:
    """The numpy dtype an operand of format ``fmt`` is passed in (tf32 as float32, ue4m3 as float8_e4m3fn)."""
    name = _STORAGE.get(fmt, fmt)
    if name in ("float64", "float32", "float16"):
        return np.dtype(name)
    return np.dtype(getattr(ml_dtypes, name))


@cache
def operand_format(fmt: str) -> FloatFormat:
    """The FloatFormat of an operand format name (tf32 and ue4m3 read through their storage formats)."""
    f = get_format(_STORAGE.get(fmt, fmt))
    assert isinstance(f, FloatFormat)
    return f


@dataclass
class Parts:
    """Integer view of an operand array (mma.md §2.1): value = sig * 2^(e - frac) where finite."""

    sig: np.ndarray  # int64, signed (the sign of zero is in ``neg``)
    e: np.ndarray  # int64
    frac: int
    neg: np.ndarray  # bool
    nan: np.ndarray  # bool
    inf: np.ndarray  # bool

    @property
    def zero(self) -> np.ndarray:
        return (self.sig == 0) & ~self.nan & ~self.inf


def check_operand(x: object, fmt: str, what: str) -> np.ndarray:
    """``x`` as a numpy array of the storage dtype of ``fmt``; anything else raises QrefError."""
    want = storage_dtype(fmt)
    arr = np.asarray(x)
    if arr.dtype != want:
        how = f"np.asarray(x, dtype=np.{want})" if want.name in ("float64", "float32", "float16") else \
            f"np.asarray(x).astype(ml_dtypes.{want})"
        raise QrefError(f"{what}: expected a numpy array of dtype {want} (format {fmt}), got {arr.dtype}; "
                        f"convert it first ({how}; tf32 operands are float32, ue4m3 scales float8_e4m3fn)")
    return arr


def codes(x: np.ndarray) -> np.ndarray:
    """The storage codes of x as uint64 (fp4/fp6 sit in the low bits of a byte)."""
    return x.view(f"u{x.dtype.itemsize}").astype(np.uint64)


def decode(x: np.ndarray, fmt: str) -> Parts:
    """Split x (storage dtype of ``fmt``) into integer significand, exponent and class (mma.md §2.1).

    tf32 clears the 13 low mantissa bits of float32 (truncation toward zero); ue4m3 ignores the sign bit;
    float8_e8m0fnu is 2^(code - 127) with code 0xFF NaN.
    """
    f = operand_format(fmt)
    E, M, bits = f.exponent_bits, f.mantissa_bits, f.bits
    c = codes(x) & np.uint64((1 << bits) - 1)
    if fmt == "tf32":
        c = c & np.uint64(0xFFFFE000)
    if fmt == "ue4m3":
        c = c & np.uint64(0x7F)
    sign = (c >> np.uint64(bits - 1)) & np.uint64(1) if f.signed else np.zeros_like(c)
    mag = c & np.uint64((1 << (bits - 1)) - 1) if f.signed else c
    ef = ((mag >> np.uint64(M)) & np.uint64((1 << E) - 1)).astype(np.int64)
    fr = (mag & np.uint64((1 << M) - 1)).astype(np.int64)
    if not f.zero:  # E8M0: every code is a power of two
        sig = np.ones(c.shape, np.int64)
        e = ef - f.bias
    else:
        sig = np.where(ef == 0, fr, fr | (1 << M))
        e = np.where(ef == 0, 1 - f.bias, ef - f.bias).astype(np.int64)
    top = (1 << E) - 1
    if f.nan == "ieee":
        nan = (ef == top) & (fr != 0)
        inf = (ef == top) & (fr == 0)
    elif f.nan == "all_ones":
        nan = mag == np.uint64((1 << (bits - 1 if f.signed else bits)) - 1)
        inf = np.zeros(c.shape, bool)
    elif f.nan == "negative_zero":
        nan = c == np.uint64(1 << (bits - 1))
        inf = np.zeros(c.shape, bool)
    else:
        nan = np.zeros(c.shape, bool)
        inf = np.zeros(c.shape, bool)
    special = nan | inf
    sig = np.where(special, 0, sig)
    neg = sign.astype(bool)
    return Parts(np.where(neg, -sig, sig), e, M, neg, nan, inf)


# -------------------------------------------------------------------------------------------------------------
# exact shifts (mma.md §2.2)
# -------------------------------------------------------------------------------------------------------------
def shift_trunc(v: np.ndarray, sh: np.ndarray) -> np.ndarray:
    """trunc(v * 2^sh) for int64 v and integer sh (toward zero; |v| * 2^sh must stay below 2^63)."""
    sh = np.asarray(sh, np.int64)
    left = np.left_shift(v, np.clip(sh, 0, 62))
    a = np.right_shift(np.abs(v), np.clip(-sh, 0, 63))
    return np.where(sh >= 0, left, np.where(v < 0, -a, a))


def shift_floor(v: np.ndarray, sh: np.ndarray) -> np.ndarray:
    """floor(v * 2^sh) for int64 v and integer sh (toward -inf)."""
    sh = np.asarray(sh, np.int64)
    return np.where(sh >= 0, np.left_shift(v, np.clip(sh, 0, 62)), np.right_shift(v, np.clip(-sh, 0, 63)))


def shift_rne(a: np.ndarray, sh: np.ndarray) -> np.ndarray:
    """round_half_even(a * 2^-sh) for int64 a >= 0 (a < 2^61) and integer sh."""
    sh = np.asarray(sh, np.int64)
    s = np.clip(sh, 1, 62)
    q = np.right_shift(a, s)
    r = a - np.left_shift(q, s)
    half = np.left_shift(np.int64(1), s - 1)
    up = (r > half) | ((r == half) & ((q & 1) == 1))
    return np.where(sh <= 0, np.left_shift(a, np.clip(-sh, 0, 62)), q + up)


def ilog2(a: np.ndarray) -> np.ndarray:
    """floor(log2 a) for int64 0 < a < 2^53 (0 for a == 0)."""
    _, ex = np.frexp(np.maximum(a, 1).astype(np.float64))
    return ex.astype(np.int64) - 1


# -------------------------------------------------------------------------------------------------------------
# output roundings (mma.md §2.4)
# -------------------------------------------------------------------------------------------------------------
OUT_BITS = {"float32": (8, 23, 127), "float16": (5, 10, 15)}


def _pack(neg: np.ndarray, En: np.ndarray, q: np.ndarray, fmt: str, P: int, signed_zero: bool = False
          ) -> np.ndarray:
    """Bits of (-1)^neg * q * 2^(En - P) where q < 2^(P+1) has P fractional bits kept (q < 2^P: subnormal);
    a zero q is +0 unless ``signed_zero`` (then a negative value that rounded to zero gives -0)."""
    E, M, bias = OUT_BITS[fmt]
    normal = q >= (1 << P)
    field = np.where(normal, En + bias, 0)
    mant = np.left_shift(np.where(normal, q - (1 << P), q), M - P)
    over = En > bias
    field = np.where(over, (1 << E) - 1, field)
    mant = np.where(over, 0, mant)
    bits = np.left_shift(field, M) | mant
    return (bits | np.where(neg & ((bits != 0) | signed_zero), 1 << (E + M), 0)).astype(np.int64)


def round_toward_zero(S: np.ndarray, unit: np.ndarray, fmt: str, P: int, signed_zero: bool = False
                      ) -> np.ndarray:
    """Bits of S * 2^unit truncated to P fractional bits in ``fmt`` (subnormals kept, overflow to inf).

    mma.md §2.4 'toward_zero': q = trunc(|S| * 2^(unit - En + P)), En = max(floor(log2 |S| 2^unit), emin).
    """
    _, _M, bias = OUT_BITS[fmt]
    a = np.abs(S)
    En = np.where(a == 0, 1 - bias, np.maximum(ilog2(a) + unit, 1 - bias))
    sh = En - P - unit
    q = np.where(sh > 0, np.right_shift(a, np.clip(sh, 0, 63)), np.left_shift(a, np.clip(-sh, 0, 62)))
    return _pack(S < 0, En, q, fmt, P, signed_zero)


def round_nearest_even(S: np.ndarray, unit: np.ndarray, fmt: str, signed_zero: bool = False) -> np.ndarray:
    """Bits of RNE(S * 2^unit) in ``fmt`` (subnormals kept, overflow to inf) (mma.md §2.4 'nearest_even');
    signed_zero: a negative S that rounds to zero gives -0 (else +0)."""
    _, M, bias = OUT_BITS[fmt]
    a = np.abs(S)
    En = np.where(a == 0, 1 - bias, np.maximum(ilog2(a) + unit, 1 - bias))
    q = shift_rne(a, En - M - unit)
    carry = q >= (1 << (M + 1))
    q = np.where(carry, q >> 1, q)
    return _pack(S < 0, En + carry, q, fmt, M, signed_zero)


def bits_to_float(bits: np.ndarray, fmt: str) -> np.ndarray:
    """View int64 bit patterns as ``fmt`` values (float32 / float16 / float64)."""
    u = {"float32": np.uint32, "float16": np.uint16, "float64": np.uint64}[fmt]
    return bits.astype(u).view(fmt)


# -------------------------------------------------------------------------------------------------------------
# IEEE host arithmetic (mma.md §3.7, §3.9); the fused multiply-adds themselves are qref.core.arith's
# -------------------------------------------------------------------------------------------------------------
def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RNE(a * b + c) in float32 with one rounding and IEEE NaN results (mma.md §3.7 C2, C3):
    qref.core.arith.fma_float32 with nan="ieee_first"."""
    return fma_float32(a, b, c, nan="ieee_first")


def second_nan(r: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """r = x op y with the NaN rule of the reference's host arithmetic (mma.md §3.9 C2): when both operands are
    NaN the result is y's NaN, quietened (numpy's own kernels return x's)."""
    both = np.isnan(x) & np.isnan(y)
    if not both.any():
        return r
    u = f"u{r.dtype.itemsize}"
    quiet = {2: 0x200, 4: 0x400000, 8: 1 << 51}[r.dtype.itemsize]
    yq = (np.broadcast_to(y, r.shape).astype(r.dtype).view(u) | np.array(quiet, u)).view(r.dtype)
    return np.where(both, yq, r)


__all__ = ["OPERAND_FORMATS", "OUT_BITS", "Parts", "bits_to_float", "check_operand", "codes", "decode", "fma32",
           "ilog2", "operand_format", "round_nearest_even", "round_toward_zero", "second_nan", "shift_floor",
           "shift_rne", "shift_trunc", "storage_dtype"]
