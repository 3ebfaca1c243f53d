"""Text of stored case arrays: storage bits as hex words and floats exactly (``qref show``, harness reports)."""

from __future__ import annotations

import math

import numpy as np

from .case import to_storage


def hex_words(v: np.ndarray) -> list[str]:
    """Each element's storage bits (``to_storage``) as fixed-width hex, ``0x..`` (booleans as 0 / 1)."""
    bits = to_storage(v).reshape(-1)
    if bits.dtype == np.bool_:
        return ["1" if b else "0" for b in bits]
    width = bits.dtype.itemsize * 2
    if bits.dtype.kind == "i":
        bits = bits.view(f"u{bits.dtype.itemsize}")
    return [f"0x{int(b):0{width}X}" for b in bits]


def float_text(x: float) -> str:
    """A float64 exactly (its repr), NaN with its sign (``nan`` / ``-nan``)."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return repr(x)


__all__ = ["float_text", "hex_words"]
