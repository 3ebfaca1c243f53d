"""Exact values as integer triples (spec: elements.md §2.1).

Every finite input is read exactly as value = (-1)^neg * sig * 2^exp with an unsigned 64-bit ``sig``; no
floating-point arithmetic touches it, so float64, float32, float16, bfloat16 and 64-bit integer inputs are
all rounded once, from their exact value.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import QrefError

FINITE, ZERO, INF, NAN = 0, 1, 2, 3

U64 = np.uint64
ONE = np.uint64(1)

# IEEE layouts of the source dtypes read bit by bit: (exponent bits, mantissa bits, unsigned view dtype)
_LAYOUTS: dict[np.dtype, tuple[int, int, type]] = {
    np.dtype(np.float64): (11, 52, np.uint64),
    np.dtype(np.float32): (8, 23, np.uint32),
    np.dtype(np.float16): (5, 10, np.uint16),
    np.dtype(ml_dtypes.bfloat16): (8, 7, np.uint16),
}


@dataclass
class Exact:
    """Flat arrays describing each element: class (FINITE/ZERO/INF/NAN), sign, and |x| = sig * 2^exp.

    ``subnormal`` marks inputs that are subnormal in their source dtype (for input_subnormals="zero").
    ``payload``: the fraction field of NaN inputs left-aligned in 64 bits (bit 63 = the top fraction bit, the
    IEEE quiet bit), 0 elsewhere and for NaNs without fraction bits; None = no payloads (every NaN canonical);
    read by the nan_payload policies (elements.md §2.7).
    """

    cls: np.ndarray  # int8
    neg: np.ndarray  # bool
    sig: np.ndarray  # uint64, 0 unless FINITE
    exp: np.ndarray  # int64
    subnormal: np.ndarray  # bool
    payload: np.ndarray | None = None  # uint64, left-aligned NaN fraction

    def __len__(self) -> int:
        return len(self.cls)

    def take(self, sl: slice) -> Exact:
        return Exact(self.cls[sl], self.neg[sl], self.sig[sl], self.exp[sl], self.subnormal[sl],
                     None if self.payload is None else self.payload[sl])

    def flush_subnormal_inputs(self) -> Exact:
        """Read source subnormals as zeros of the same sign (DAZ)."""
        sub = self.subnormal
        if not sub.any():
            return self
        return Exact(np.where(sub, ZERO, self.cls).astype(np.int8), self.neg, np.where(sub, U64(0), self.sig),
                     self.exp, np.zeros_like(sub), self.payload)


def from_ieee_bits(bits: np.ndarray, ebits: int, mbits: int) -> Exact:
    """Decompose IEEE 754 bit patterns (any unsigned dtype) with the given field widths."""
    b = bits.astype(U64, copy=False)
    neg = ((b >> U64(ebits + mbits)) & ONE).astype(bool)
    e = ((b >> U64(mbits)) & U64((1 << ebits) - 1)).astype(np.int64)
    f = b & U64((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    top = (1 << ebits) - 1
    cls = np.full(b.shape, FINITE, dtype=np.int8)
    cls[(e == 0) & (f == 0)] = ZERO
    cls[(e == top) & (f == 0)] = INF
    cls[(e == top) & (f != 0)] = NAN
    sub = (e == 0) & (f != 0)
    sig = np.where(e == 0, f, f | U64(1 << mbits))
    exp = np.where(e == 0, 1 - bias - mbits, e - bias - mbits).astype(np.int64)
    sig = np.where(cls == FINITE, sig, U64(0))
    return Exact(cls, neg, sig, exp, sub, nan_payload(cls, f, mbits))


def nan_payload(cls: np.ndarray, frac: np.ndarray, mbits: int) -> np.ndarray:
    """The fraction fields ``frac`` (uint64, ``mbits`` wide) of the NaN elements left-aligned in 64 bits, 0 for
    the others (Exact.payload)."""
    if mbits == 0:
        return np.zeros(cls.shape, dtype=U64)
    return np.where(cls == NAN, frac << U64(64 - mbits), U64(0))


def from_integers(x: np.ndarray) -> Exact:
    """Decompose signed or unsigned integers (up to 64 bits) exactly."""
    if x.dtype.kind == "u":
        neg = np.zeros(x.shape, dtype=bool)
        mag = x.astype(U64)
    else:
        x64 = x.astype(np.int64)
        neg = x64 < 0
        u = x64.view(U64)
        mag = np.where(neg, ~u + ONE, u)  # two's complement magnitude; exact for INT64_MIN
    cls = np.where(mag == 0, ZERO, FINITE).astype(np.int8)
    return Exact(cls, neg, mag, np.zeros(x.shape, dtype=np.int64), np.zeros(x.shape, dtype=bool))


def from_fractions(values: np.ndarray) -> Exact:
    """Exact triples of rationals (Fraction / int objects), with a sticky bit.

    |v| = p/q becomes sig = floor(p 2^k / q) | [remainder != 0] with 63 significant bits, exp = -k: the or-ed
    sticky bit lies at least two positions below the rounding bit of any format of at most 61 bits of
    precision, so it rounds exactly like p/q in every mode (stochastic modes see eta truncated to 61 bits).
    """
    from fractions import Fraction

    flat = values.reshape(-1)
    n = flat.size
    cls = np.full(n, FINITE, dtype=np.int8)
    neg = np.zeros(n, dtype=bool)
    sig = np.zeros(n, dtype=U64)
    exp = np.zeros(n, dtype=np.int64)
    for i, v in enumerate(flat):  # exact rationals: Python integers, one element at a time
        f = Fraction(v)
        if f == 0:
            cls[i] = ZERO
            continue
        neg[i] = f < 0
        p, q = abs(f.numerator), f.denominator
        k = 62 - (p.bit_length() - q.bit_length())
        m, r = divmod(p << k, q) if k >= 0 else divmod(p, q << -k)
        sig[i] = U64(m | int(r != 0))
        exp[i] = -k
    return Exact(cls, neg, sig, exp, np.zeros(n, dtype=bool))


def _is_rational(v: object) -> bool:
    from fractions import Fraction

    return isinstance(v, (Fraction, int)) and not isinstance(v, bool)


def source_kind(x: np.ndarray) -> str:
    """'ieee' for float64/32/16/bfloat16, 'int' for integers, 'mlfloat' for other ml_dtypes floats, 'fraction'
    for object arrays of fractions.Fraction / int (exact rationals)."""
    dt = x.dtype
    if dt.kind == "O" and all(_is_rational(v) for v in x.reshape(-1)):
        return "fraction"
    if dt in _LAYOUTS:
        return "ieee"
    if dt.kind in "iu":
        return "int"
    if dt.kind == "b":
        raise QrefError("boolean input: convert it to a number first (e.g. x.astype(np.float32))")
    if dt.kind == "V" or dt.kind == "f" or ml_float(dt):
        if ml_float(dt):
            return "mlfloat"
        raise QrefError(f"unsupported floating input dtype {dt} (use float64, float32, float16 or bfloat16)")
    raise QrefError(
        f"expected a real numeric array (float64/32/16, bfloat16 or integers), got dtype {dt}"
        + (" (complex values have no single rounding; pass x.real and x.imag separately)" if dt.kind == "c" else "")
    )


def ml_integer(dt: np.dtype) -> bool:
    """True for ml_dtypes' sub-byte integer dtypes (int2, int4, uint2, uint4: numpy kind 'V', one byte each)."""
    if dt.kind != "V" or dt.itemsize != 1:
        return False
    try:
        ml_dtypes.iinfo(dt)
    except (ValueError, TypeError, KeyError):
        return False
    return True


def plain_integers(a: np.ndarray) -> np.ndarray:
    """An ml_dtypes sub-byte integer array (int2/int4/uint2/uint4, as ONNX hands them out) as the int8 / uint8
    array of the same values (schemes.md §1); any other array as it is."""
    if ml_integer(a.dtype):
        return a.astype(np.int8 if ml_dtypes.iinfo(a.dtype).min < 0 else np.uint8)
    return a


def typed_numbers(a: np.ndarray) -> np.ndarray:
    """The values of a typed array as plain numpy numbers (schemes.md §1): ml_dtypes' sub-byte integers as
    int8/uint8, ml_dtypes' floats (float8_*, float6_*, float4_e2m1fn, float8_e8m0fnu, bfloat16) as float64
    (each exact there); numpy's own dtypes as they are."""
    if ml_integer(a.dtype):
        return plain_integers(a)
    if ml_float(a.dtype):
        return a.astype(np.float64)
    return a


def ml_float(dt: np.dtype) -> bool:
    try:
        ml_dtypes.finfo(dt)
    except (ValueError, TypeError, KeyError):
        return False
    return dt.kind == "V" or dt.type.__module__.startswith("ml_dtypes")


def as_source_array(x: object) -> np.ndarray:
    """np.asarray with a clear error for non-numeric input; Python floats become float64, ints int64."""
    if isinstance(x, np.ma.MaskedArray):  # schemes.md §1: refused, np.asarray would drop the mask silently
        raise QrefError("masked arrays are not accepted (the mask would be lost): pass x.filled(v) for a fill "
                        "value or x.compressed() for the unmasked elements, and re-apply the mask to the result")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - numpy raises various types
        raise QrefError(f"cannot read the input as an array: {exc}") from exc
    arr = plain_integers(arr)  # ml_dtypes int2/int4/uint2/uint4: their values as int8/uint8
    if arr.dtype.kind in "fiu" and not arr.dtype.isnative:  # '>f4' on a little-endian machine: same values
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype.kind == "O" and not all(_is_rational(v) for v in arr.reshape(-1)):
        raise QrefError("expected a real numeric array; got Python objects (mixed or non-numeric values; exact "
                        "rationals must all be fractions.Fraction or int)")
    source_kind(arr)
    return arr


def decompose(x: np.ndarray) -> Exact:
    """Exact triples of a flat array of any supported input dtype."""
    kind = source_kind(x)
    if kind == "fraction":
        return from_fractions(x)
    if kind == "int":
        return from_integers(x)
    if kind == "mlfloat":
        x = x.astype(np.float32)  # every ml_dtypes float is a subset of float32: exact
    ebits, mbits, view = _LAYOUTS[x.dtype]
    return from_ieee_bits(x.view(view), ebits, mbits)


def bit_length(sig: np.ndarray) -> np.ndarray:
    """floor(log2(sig)) + 1 for uint64 (0 for 0), exactly."""
    if sig.size == 0 or sig.max() < U64(1 << 53):  # float64 holds sig exactly: frexp's exponent is exact
        return np.frexp(sig.astype(np.float64))[1].astype(np.int64)
    s = sig.copy()
    n = np.zeros(s.shape, dtype=np.int64)
    for k in (32, 16, 8, 4, 2, 1):
        big = s >= U64(1 << k)
        s = np.where(big, s >> U64(k), s)
        n += big * k
    return n + (s > 0)


__all__ = ["ONE", "U64", "Exact", "as_source_array", "bit_length", "decompose", "from_fractions", "from_ieee_bits",
           "from_integers", "ml_float", "ml_integer", "nan_payload", "plain_integers", "source_kind", "typed_numbers"]
