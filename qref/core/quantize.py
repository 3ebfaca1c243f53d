"""quantize = decode(encode(x)) in x's floating dtype (spec: elements.md §5)."""

from __future__ import annotations

import numpy as np

from ..errors import unknown_name
from ..formats import Format
from .decode import decode
from .encode import encode
from .exact import as_source_array


def result_dtype(x: np.ndarray) -> np.dtype:
    """x's dtype for floating inputs (float64/32/16, bfloat16, other ml_dtypes floats); float64 for integers."""
    return np.dtype(np.float64) if x.dtype.kind in "iu" else x.dtype


def quantize(x: object, fmt: str | Format, **options: object) -> np.ndarray:
    """decode(encode(x, fmt, **options), fmt, dtype=result_dtype(x)): the value x becomes in ``fmt``.

    The decoded value is exact in x's dtype for every format that dtype contains (e.g. any FP8/FP6/FP4 format in
    float32); otherwise it is rounded to nearest even (elements.md §4).
    """
    known = ("rounding", "overflow", "subnormals", "random_bits", "seed", "nan", "input_subnormals",
             "stochastic_bits", "source", "profile", "threads")
    bad = sorted(set(options) - set(known))
    if bad:
        raise unknown_name("quantize option", bad[0], known)
    arr = as_source_array(x)
    codes = encode(arr, fmt, **options)  # type: ignore[arg-type]
    return decode(codes, fmt, dtype=result_dtype(arr), threads=options.get("threads"))  # type: ignore[arg-type]


__all__ = ["quantize", "result_dtype"]
