"""Correctly rounded arithmetic helpers built on the core (spec: elements.md §5): conversions between float
dtypes with one rounding, exact rationals rounded to a dtype, and a float32 fused multiply-add."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from ..formats import FloatFormat, get_format
from .decode import decode
from .encode import encode

_WIDENING = {  # source dtype name -> target dtype names it converts into exactly
    "float16": {"float32", "float64"}, "bfloat16": {"float32", "float64"}, "float32": {"float64"},
}


def convert(x: object, dtype: object) -> np.ndarray:
    """x rounded once to ``dtype`` (float64/32/16, bfloat16 or an ml_dtypes float) by nearest_even, overflow to
    +-Inf, NaN kept with its sign: numpy's ``astype`` without its double rounding (e.g. float64 -> bfloat16)."""
    arr = np.asarray(x)
    dt = np.dtype(dtype)
    src = "bfloat16" if arr.dtype.name == "bfloat16" else arr.dtype.name
    if arr.dtype == dt or dt.name in _WIDENING.get(src, ()):
        return arr.astype(dt)
    if src == "float64" and dt == np.float32:  # IEEE conversion: one nearest-even rounding; NaN made canonical
        with np.errstate(invalid="ignore", over="ignore"):
            out = arr.astype(np.float32)
        nan = np.isnan(out)
        if nan.any():
            out[nan] = np.copysign(np.float32(np.nan), out[nan])
        return out
    fmt = get_format(dt.name)
    return decode(encode(arr, fmt, rounding="nearest_even", overflow="inf", nan="keep_sign"), fmt, dtype=dt)


def round_fractions(values: Iterable[Fraction | int] | np.ndarray, dtype: object = np.float64) -> np.ndarray:
    """Exact rationals rounded once to ``dtype`` (nearest_even, overflow to +-Inf). ``dtype`` may also be any
    float format (e.g. "tfloat32"): the rounded values are then returned as float64 (exact for formats whose
    values float64 holds)."""
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=object).reshape(-1)
    name = dtype.name if isinstance(dtype, FloatFormat) else dtype
    try:
        dt = np.dtype(name)
    except TypeError:  # a format without a numpy dtype (tfloat32, P3109...)
        fmt = get_format(name)
        codes = encode(arr, fmt, rounding="nearest_even", overflow="inf", nan="keep_sign")
        return decode(codes, fmt, dtype=np.float64)
    return convert(arr, dt)


def fma_float32(a: object, b: object, c: object) -> np.ndarray:
    """float32 fma(a, b, c) = RN32(a * b + c) with a single rounding, vectorized.

    a * b is exact in float64 (24 + 24 <= 53 bits); the sum is formed in float64 with round-to-odd (TwoSum error
    term), which makes the final float64 -> float32 rounding correct (53 >= 24 + 2)."""
    a32, b32, c32 = np.broadcast_arrays(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                        np.asarray(c, np.float32))
    p = a32.astype(np.float64) * b32.astype(np.float64)
    c64 = c32.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c64
        bb = s - p
        e = (p - (s - bb)) + (c64 - bb)
        fin = np.isfinite(s) & np.isfinite(e)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        s = np.where(fin & (e != 0) & even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return convert(s, np.float32)
