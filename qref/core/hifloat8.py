"""HiFloat8 (HiF8), Huawei's tapered-precision 8-bit float (spec: elements.md §1.4; arXiv 2409.16626).

A code is sign | dot | exponent | mantissa with a prefix-coded dot field that sets the exponent width D and so
the mantissa width M (8 bits in all):

    dot   11    10    01    001   0001  0000 (denormal)
    D     4     3     2     1     0     -
    M     1     2     3     3     3     3

The exponent field is sign-magnitude with an implicit leading 1 of the magnitude: its first bit is the sign of
E (1: negative), the other D - 1 bits follow the implicit 1, so |E| in [2^(D-1), 2^D - 1] (D = 0: E = 0).
value = (-1)^s 2^E (1 + m / 2^M). Denormal: value = (-1)^s 2^(m - 23) for m = 1..7. Specials: 0x00 is the
only zero, 0x80 the only NaN, 0x6F / 0xEF (D = 4, E = 15, m = 1) are +-Inf; max finite 2^15 (0x6E), min 2^-22.

Not a FloatFormat (the field widths depend on the value): ``decode`` and ``encode`` here work from the value
table. Rounding modes: ``nearest_away`` (the paper's TA, ties away from zero: HiF8's conversion rule),
``nearest_even`` (ties to the code whose last bit is 0), ``toward_zero``; overflow ``saturate`` (to +-2^15)
or ``inf`` (TA / RNE carry past 2^15 gives +-Inf; toward_zero saturates). The paper's hybrid rounding is not
modelled.
"""

from __future__ import annotations

import numpy as np

from ..errors import QrefError, check_choice
from .exact import as_source_array

ROUNDINGS = ("nearest_away", "nearest_even", "toward_zero")
OVERFLOWS = ("saturate", "inf")
NAN_CODE = 0x80
INF_CODE = 0x6F
MAX_CODE = 0x6E


def _field_value(code: int) -> float:
    """The value of one code from the field definition (module docstring), as a float64 (exact)."""
    if code == 0:
        return 0.0
    if code == NAN_CODE:
        return float("nan")
    sign = -1.0 if code & 0x80 else 1.0
    body = code & 0x7F  # 7 bits: dot | exponent | mantissa
    if body == INF_CODE:
        return sign * float("inf")
    if body >> 5 == 0b11:
        d, m_bits, rest = 4, 1, body & 0x1F
    elif body >> 5 == 0b10:
        d, m_bits, rest = 3, 2, body & 0x1F
    elif body >> 5 == 0b01:
        d, m_bits, rest = 2, 3, body & 0x1F
    elif body >> 4 == 0b001:
        d, m_bits, rest = 1, 3, body & 0x0F
    elif body >> 3 == 0b0001:
        d, m_bits, rest = 0, 3, body & 0x07
    else:  # 0000: denormal
        m = body & 0x07
        return sign * 2.0 ** (m - 23)
    m = rest & ((1 << m_bits) - 1)
    ebits = rest >> m_bits
    if d == 0:
        e = 0
    else:
        neg_e = (ebits >> (d - 1)) & 1
        mag = (1 << (d - 1)) | (ebits & ((1 << (d - 1)) - 1))
        e = -mag if neg_e else mag
    return sign * 2.0**e * (1 + m / (1 << m_bits))


VALUES = np.array([_field_value(c) for c in range(256)], dtype=np.float64)  # index = code
VALUES.setflags(write=False)
_POS_CODES = np.array(sorted((c for c in range(1, 0x80) if c != INF_CODE), key=lambda c: VALUES[c]),
                      dtype=np.int64)  # positive finite codes by value (0x00 handled as zero)
_POS = np.concatenate([[0.0], VALUES[_POS_CODES]])
_POS_CODE = np.concatenate([[0], _POS_CODES])


def decode(codes: object, dtype: object = np.float32) -> np.ndarray:
    """Values of HiF8 codes (uint8, or integers in [0, 256)) as ``dtype`` (exact in float32 and float64)."""
    c = np.asarray(codes)
    if c.dtype.kind not in "iu" or (c.size and (int(c.min()) < 0 or int(c.max()) > 255)):
        raise QrefError("HiFloat8 codes are integers in [0, 256) (e.g. a uint8 array)")
    return VALUES[c.astype(np.int64)].astype(dtype)


def encode(x: object, *, rounding: str = "nearest_away", overflow: str = "saturate") -> np.ndarray:
    """HiF8 codes (uint8) of x (float64/32/16/bfloat16 or integers; read exactly), elements.md §1.4.

    |x| is placed between neighbouring magnitudes lo < hi of the table; nearest_* pick the nearer one (ties:
    away from zero, or the code with last bit 0), toward_zero takes lo. Above 2^15 the next step is Inf:
    overflow="inf" rounds there as to any neighbour, "saturate" gives 2^15. NaN -> 0x80; zero and values
    that round to zero -> 0x00 (one zero); the sign bit is set for the other negative results."""
    check_choice("HiFloat8 rounding", rounding, ROUNDINGS)
    check_choice("HiFloat8 overflow", overflow, OVERFLOWS)
    arr = as_source_array(x)
    with np.errstate(invalid="ignore"):
        a = np.abs(np.asarray(arr, dtype=np.float64).reshape(-1))  # exact: every accepted dtype fits float64
    neg = np.signbit(np.asarray(arr, dtype=np.float64).reshape(-1))
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    top = _POS[-1]  # 2^15
    inf_step = 1.5 * top  # where the Inf code sits in the sequence of magnitudes
    table = np.concatenate([_POS, [inf_step]])
    codes_t = np.concatenate([_POS_CODE, [INF_CODE]])
    i = np.clip(np.searchsorted(table, a, side="right") - 1, 0, table.size - 2)  # lo = table[i] <= a
    lo, hi = table[i], table[i + 1]
    exact_hi = a >= hi  # a >= 1.5 * 2^15 (Inf's position) or beyond
    if rounding == "toward_zero":
        up = np.zeros(a.shape, dtype=bool)
    else:
        mid = (lo + hi) / 2  # exact: the table values have at most 4 significant bits
        tie = a == mid
        up = a > mid
        if rounding == "nearest_away":
            up |= tie
        else:
            up |= tie & (codes_t[i] & 1 == 1)
    idx = np.where(up | exact_hi, i + 1, i)
    code = codes_t[idx]
    if overflow == "saturate" or rounding == "toward_zero":
        code = np.where(code == INF_CODE, MAX_CODE, code)
    code = np.where(np.isinf(a) & (overflow == "inf"), INF_CODE, code)
    code = np.where((code != 0) & neg, code | 0x80, code)
    code = np.where(nan, NAN_CODE, code)
    return code.astype(np.uint8).reshape(np.shape(arr))


__all__ = ["INF_CODE", "MAX_CODE", "NAN_CODE", "OVERFLOWS", "ROUNDINGS", "VALUES", "decode", "encode"]
