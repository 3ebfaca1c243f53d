"""MX block quantization: the entry points, which dispatch between the fast path and the reference (spec:
block.md §4, §4.10).

The definition is mx_reference.py (its named steps are re-exported here); fast.py computes the same function
for the configurations and blocks where its shortcuts are exact and hands the other blocks back. Layering:
mx_reference <- fast <- mx (this module) <- scheme.
"""

from __future__ import annotations

import numpy as np

from ...formats.block import BlockFormat
from ...profiles.block import MXRules
from . import fast
from .mx_reference import (
    E8M0_BIAS,
    MXScales,
    _scale_exponent,
    apply_zero_sign,
    dequantize_mx_reference,
    element_policy,
    encode_elements,
    encode_exact_shifted,
    integer_step_values,
    lut_argmin,
    min_normal_amax_exponent,
    mx_block_scales,
    mx_element_codes,
    mx_row_flags,
    quantize_mx_reference,
)

__all__ = [
    "E8M0_BIAS", "MXScales", "_scale_exponent", "apply_zero_sign", "dequantize_mx", "dequantize_mx_reference",
    "element_policy", "encode_elements", "encode_exact_shifted", "integer_step_values", "lut_argmin",
    "min_normal_amax_exponent", "mx_block_scales", "mx_element_codes", "mx_row_flags", "quantize_mx_blocks",
    "quantize_mx_reference",
]


def quantize_mx_blocks(rules: MXRules, f: BlockFormat, xb: np.ndarray, rbits: np.ndarray | None = None) -> dict[str,
                                                                                                                np.ndarray]:
    """Quantize a (n_blocks, k) array. Returns codes (n_blocks, k), scales (uint8 E8M0 bytes, n_blocks),
    unspecified (n_blocks, k) and scales_unspecified (n_blocks): the fast path where it applies, the reference
    (quantize_mx_reference) for every other configuration and for the blocks the fast path hands back.
    rbits: (n_blocks, k) random integers of a stochastic rounding (block.md §13): the reference only."""
    if rbits is not None:
        return quantize_mx_reference(rules, f, xb, rbits)
    done = fast.quantize_mx_fast(rules, f, xb)
    if done is None:
        return quantize_mx_reference(rules, f, xb)
    out, slow = done
    if slow.any():
        ref = quantize_mx_reference(rules, f, xb[slow])
        for name in out:
            out[name][slow] = ref[name]
    return out


def dequantize_mx(rules: MXRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Values of (n_blocks, k) codes with E8M0 scale bytes (n_blocks,) as ``dtype`` (block.md §4.8): the
    reference, tabulated over every (scale byte, code) pair where that is small (fast.dequantize_fast)."""
    out = fast.dequantize_fast(rules, f, codes, scales, None, dtype, dequantize_mx_reference)
    return dequantize_mx_reference(rules, f, codes, scales, dtype) if out is None else out
