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
def _fmt(fmt: str) -> FloatFormat:
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
    f = _fmt(fmt)
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


def float_bits(x: np.ndarray) -> np.ndarray:
    """Bit patterns of a float16/float32/float64 array as int64 (float64: via uint64 wrap)."""
    return x.view(f"u{x.dtype.itemsize}").astype(np.int64)


# -------------------------------------------------------------------------------------------------------------
# IEEE fused multiply-add without fma in numpy (mma.md §3.7)
# -------------------------------------------------------------------------------------------------------------
def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and the exact error t = a + b - s (Knuth; exact barring overflow)."""
    s = a + b
    bb = s - a
    t = (a - (s - bb)) + (b - bb)
    return s, t


def round_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RO(a + b) in float64: the exact sum if representable, else the neighbour with an odd last bit."""
    s, t = two_sum(a, b)
    even = (s.view(np.int64) & 1) == 0
    fix = (t != 0) & even & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(t > 0, np.inf, -np.inf)), s)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = x * 134217729.0  # Veltkamp: 2^27 + 1
    hi = c - (c - x)
    return hi, x - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p = fl(a * b) and e = a * b - p exactly (Dekker; |a|, |b| in [1, 2))."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _fma_inf(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The infinite result of fma(a, b, c) with a non-finite operand (NaN cases are overridden later)."""
    pinf = np.isinf(a) | np.isinf(b)
    neg = np.signbit(a) ^ np.signbit(b)
    inf = np.array(np.inf, a.dtype)
    return np.where(pinf, np.where(neg, -inf, inf), c)


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


def _nan_select(a: np.ndarray, b: np.ndarray, c: np.ndarray, quiet: int, default: int,
                r: np.ndarray) -> np.ndarray:
    """IEEE specials of fma(a, b, c) as bits: the first NaN of a, b, c (quietened), else the default NaN for
    an invalid operation (inf * 0, inf - inf), else the bits of r (mma.md §3.7 C3)."""
    ab, bb, cb = (float_bits(v) for v in (a, b, c))
    inv = (np.isinf(a) & (b == 0)) | (np.isinf(b) & (a == 0))
    prod_inf = (np.isinf(a) | np.isinf(b)) & ~inv & ~np.isnan(a) & ~np.isnan(b)
    prod_neg = np.signbit(a) ^ np.signbit(b)
    inv |= prod_inf & np.isinf(c) & (prod_neg != np.signbit(c))
    out = float_bits(r)
    out = np.where(inv, default, out)
    out = np.where(np.isnan(c), cb | quiet, out)
    out = np.where(np.isnan(b), bb | quiet, out)
    out = np.where(np.isnan(a), ab | quiet, out)
    return out


@np.errstate(all="ignore")
def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RNE(a * b + c) in float32 with one rounding (mma.md §3.7 C2): a * b is exact in float64, the sum is
    rounded to odd in float64 (53 >= 24 + 2 bits), then once to float32."""
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    s, t = two_sum(a64 * b64, c64)
    fin = np.isfinite(s)  # finite operands never overflow in float64
    sb = s.view(np.int64)
    fix = (t != 0) & ((sb & 1) == 0)  # round to odd: step the even result toward the error
    r = (sb + np.where(fix, np.where((t > 0) == (s > 0), 1, -1), 0)).view(np.float64).astype(np.float32)
    if fin.all():
        return r
    r = np.where(fin, r, _fma_inf(a, b, c))
    bits = _nan_select(a, b, c, 0x400000, 0xFFC00000, r)
    return bits.astype(np.uint32).view(np.float32)


def _round_to_grid(terms: list[np.ndarray], g: np.ndarray) -> np.ndarray:
    """RNE(sum of exact float64 terms) onto the grid 2^g, returned scaled by 2^-1074 / 2^g (mma.md §3.7 C4).

    Repeated two_sum passes make the terms non-overlapping (h on top, the rest r below ulp(h)); h / 2^g rounds
    to an integer n (RNE) except at an exact tie, which r's sign decides. Needs |sum| < 2^52 2^g."""
    x = list(terms)
    for _ in range(len(x) + 1):
        for k in range(1, len(x)):
            x[k], x[k - 1] = two_sum(x[k], x[k - 1])
    h, rest = x[-1], x[0]
    for t in x[1:-1]:
        rest = rest + t
    q = np.ldexp(h, -g)
    n = np.rint(q)
    y = q - n
    tie = np.abs(y) == 0.5
    n = np.where(tie & (rest != 0) & ((rest > 0) == (y > 0)), n + np.sign(y), n)
    out = np.ldexp(n, -1074)
    return np.where(out == 0, np.copysign(0.0, h), out)


@np.errstate(all="ignore")
def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RNE(a * b + c) in float64 with one rounding (mma.md §3.7 C4).

    Finite operands: a = ma 2^ea, b = mb 2^eb with ma, mb in [1, 2); ma * mb = uh + ul exactly (Dekker);
    c' = c 2^-(ea+eb) (c clamped to a sticky stand-in when it lies more than 2^-160 below the product or the
    product lies that far below c); (th, tl) = two_sum(c', uh); v = RO(tl + ul); z = RN(th + v) 2^(ea+eb)
    (Boldo-Melquiond three-term sum). Results at or below 2^-1022: the exact th + tl + ul rounded once onto the
    grid 2^-1074 (``_round_to_grid``; ldexp does not round subnormal results to nearest)."""
    fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    az, bz, cz = (np.where(fin, v, 1.0) for v in (a, b, c))
    pz = (az == 0) | (bz == 0)
    ma, ea = np.frexp(np.where(pz, 1.0, np.abs(az)))
    mb, eb = np.frexp(np.where(pz, 1.0, np.abs(bz)))
    ma, mb = ma * 2.0, mb * 2.0
    ep = (ea - 1 + eb - 1).astype(np.int64)
    _, ec = np.frexp(cz)
    ec = ec.astype(np.int64) - 1
    cnz = cz != 0
    # product far below c: keep its sign only
    tiny_p = ~pz & cnz & (ep + 1 < ec - 160)
    ma = np.where(tiny_p, 1.0, ma)
    mb = np.where(tiny_p, 1.0, mb)
    ep = np.where(tiny_p, ec - 160, ep)
    # c far below the product: a sticky stand-in of the same sign
    tiny_c = ~pz & cnz & (ec < ep - 160)
    sign_c = np.where(np.signbit(cz), -1.0, 1.0)
    csc = np.where(tiny_c, sign_c * 2.0 ** -160, np.ldexp(cz, np.clip(-ep, -2000, 2000)))
    sign_p = np.where(np.signbit(az) ^ np.signbit(bz), -1.0, 1.0)
    uh, ul = two_prod(ma, mb)
    uh, ul = uh * sign_p, ul * sign_p
    uh = np.where(pz, 0.0, uh)
    ul = np.where(pz, 0.0, ul)
    ep = np.where(pz, 0, ep)
    csc = np.where(pz, cz, csc)
    th, tl = two_sum(csc, uh)
    v = round_odd_sum(tl, ul)
    z = th + v
    r = np.ldexp(z, ep)  # exact unless the result is subnormal or overflows
    sub = (np.abs(r) <= 2.0 ** -1022) & ~pz
    if sub.any():  # round the exact th + tl + ul once onto the subnormal grid 2^-1074 (2^(-1074 - ep) here)
        r = np.where(sub, _round_to_grid([ul, tl, th], np.where(sub, -1074 - ep, 0)), r)
    # exact zeros: x + (-x) = +0; a zero product keeps IEEE signed-zero addition with c
    r = np.where((z == 0) & ~pz, 0.0, r)
    r = np.where(pz, (sign_p * 0.0) + cz, r)
    if fin.all():
        return r
    r = np.where(fin, r, _fma_inf(a, b, c))
    bits = _nan_select(a, b, c, 1 << 51, -(1 << 51), r)  # default NaN 0xFFF8000000000000
    return bits.view(np.float64)
