"""Exact arithmetic helpers for lookup tables and schemes (spec: lut.md §1.3).

Every rounding to a float dtype goes through the core (``qref.core.encode``); this module only arranges the
exact operands:

- ``round_to(x, dtype)``: x (any float/integer array) rounded once to float32/float16/bfloat16 (nearest_even).
- ``fractions_to_float32(values)``: exact rationals rounded once to float32 (qref.core.arith.round_fractions).
- ``float_dtype(name)``: the numpy dtype of "float32" / "float16" / "bfloat16".
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import ml_dtypes
import numpy as np

from ..core.arith import convert, round_fractions
from ..errors import QrefError

FLOAT_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


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
    """x rounded once to ``dtype`` by nearest_even with overflow to +-Inf (qref.core.arith.convert)."""
    return convert(x, float_dtype(dtype if isinstance(dtype, str) else dtype_name(np.dtype(dtype))))


def fractions_to_float32(values: Iterable[Fraction | int | float]) -> np.ndarray:
    """Exact rationals rounded once to float32 (nearest_even, overflow to +-Inf)."""
    return round_fractions([Fraction(v) for v in values], np.float32)


def float32_bits(values: np.ndarray) -> tuple[int, ...]:
    """The float32 bit patterns of a float32 array, as Python ints."""
    return tuple(int(v) for v in np.asarray(values, dtype=np.float32).view(np.uint32).ravel())
