"""Exact arithmetic helpers for lookup tables and schemes (spec: lut.md §1.3).

Every rounding to a float dtype goes through the core (``qref.core.encode``); this module only arranges the
exact operands:

- ``round_to(x, dtype)``: x (any float/integer array) rounded once to float32/float16/bfloat16 (nearest_even).
- ``fractions_to_float32(values)``: exact rationals rounded once to float32 (an exact triple with a sticky bit,
  handed to ``encode_exact``).
- ``fma_float32(a, b, c)``: float32(a * b + c) with a single rounding (what a fused multiply-add computes).
- ``float_dtype(name)``: the numpy dtype of "float32" / "float16" / "bfloat16".
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import ml_dtypes
import numpy as np

from ..core.encode import encode, encode_exact
from ..core.exact import FINITE, U64, ZERO, Exact
from ..errors import QrefError
from ..formats import get_format
from ..policy import CastPolicy

FLOAT_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
_VIEW = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}
_F32 = get_format("float32")
_F32_POLICY = CastPolicy().resolve(_F32)


def float_dtype(name: str | np.dtype | type) -> np.dtype:
    """The numpy dtype for a compute/table dtype name (float32, float16, bfloat16)."""
    key = name if isinstance(name, str) else np.dtype(name).name
    if key not in FLOAT_DTYPES:
        raise QrefError(f"unsupported float dtype {key!r}; use one of {', '.join(FLOAT_DTYPES)}")
    return FLOAT_DTYPES[key]


def dtype_name(dt: np.dtype) -> str:
    """'float32' / 'float16' / 'bfloat16' for a numpy dtype, or raise."""
    for name, d in FLOAT_DTYPES.items():
        if np.dtype(dt) == d:
            return name
    raise QrefError(f"unsupported float dtype {np.dtype(dt)}; use float32, float16 or bfloat16")


def round_to(x: np.ndarray, dtype: str | np.dtype) -> np.ndarray:
    """x rounded once to ``dtype`` by nearest_even with overflow to +-Inf (through qref.encode)."""
    name = dtype if isinstance(dtype, str) else dtype_name(np.dtype(dtype))
    dt = float_dtype(name)
    x = np.asarray(x)
    if x.dtype == dt:
        return x
    if x.dtype.kind == "f" and x.dtype.itemsize < dt.itemsize and name == "float32":
        return x.astype(dt)  # widening is exact
    if name == "float32" and x.dtype == np.dtype(ml_dtypes.bfloat16):
        return x.astype(dt)  # exact
    return np.asarray(encode(x, name)).astype(_VIEW[name]).view(dt)


def fractions_to_float32(values: Iterable[Fraction | int | float]) -> np.ndarray:
    """Exact rationals rounded once to float32 (nearest_even, overflow to +-Inf), via the core.

    Each |v| = p/q becomes an exact triple: a 62/63-bit significand floor(p 2^k / q) whose last bit is or-ed with
    the remainder's sticky bit, which rounds exactly like p/q to any format of fewer than 61 bits.
    """
    vals = [Fraction(v) for v in values]
    n = len(vals)
    cls = np.full(n, FINITE, dtype=np.int8)
    neg = np.zeros(n, dtype=bool)
    sig = np.zeros(n, dtype=U64)
    exp = np.zeros(n, dtype=np.int64)
    for i, v in enumerate(vals):  # table-sized inputs only (a few hundred entries)
        if v == 0:
            cls[i] = ZERO
            continue
        neg[i] = v < 0
        p, q = abs(v.numerator), v.denominator
        k = 62 - (p.bit_length() - q.bit_length())
        num, den = (p << k, q) if k >= 0 else (p, q << -k)
        m, r = divmod(num, den)
        sig[i] = U64(m | int(r != 0))
        exp[i] = -k
    ex = Exact(cls, neg, sig, exp, np.zeros(n, dtype=bool))
    return encode_exact(ex, _F32, _F32_POLICY).astype(np.uint32).view(np.float32)


def fma_float32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32(a * b + c) rounded once (a fused multiply-add), for table-sized float32 arrays."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float32), np.asarray(b, np.float32), np.asarray(c, np.float32))
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
             for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
    return fractions_to_float32(exact).reshape(a.shape)


def float32_bits(values: np.ndarray) -> tuple[int, ...]:
    """The float32 bit patterns of a float32 array, as Python ints."""
    return tuple(int(v) for v in np.asarray(values, dtype=np.float32).view(np.uint32).ravel())
