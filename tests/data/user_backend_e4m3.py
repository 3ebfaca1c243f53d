"""Deliberately wrong E4M3FN encoders for the user-backend walk-through (docs/user-backends.md)."""

import ml_dtypes
import numpy as np


def saturating_e4m3(x, fmt):
    """Clips to +-448 before ml_dtypes' cast: saturates where the spec gives NaN (E4M3FN overflow)."""
    if fmt != "float8_e4m3fn":
        raise NotImplementedError(f"only float8_e4m3fn, not {fmt}")
    with np.errstate(invalid="ignore"):
        return np.clip(x.astype(np.float64), -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def truncating_e4m3(operation, inputs, spec):
    """Drops the float32 mantissa bits below E4M3's 3 (rounds toward zero): the general calling convention."""
    if operation != "encode" or spec["format"]["name"] != "float8_e4m3fn":
        raise NotImplementedError("encode to float8_e4m3fn only")
    x = inputs["x"].astype(np.float32)
    b = x.view(np.uint32) & np.uint32(0xFFF00000)
    with np.errstate(invalid="ignore"):
        y = np.clip(b.view(np.float32), -448, 448)
    return {"codes": np.where(np.isnan(x), 0x7F, y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))}
