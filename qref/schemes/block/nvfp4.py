"""Float-scaled blocks (NVFP4 and any non-power-of-two scale format): the entry points, which dispatch between
the fast path and the reference (spec: block.md §5, §5.5).

The definition is nvfp4_reference.py (its named steps are re-exported here); fast.py computes the same
function where its shortcuts are exact and hands the other blocks back. Layering: nvfp4_reference <- fast <-
nvfp4 (this module) <- scheme.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import fast
from .nvfp4_reference import (
    GLOBAL_SCALE_RULES,
    dequantize_float_scaled_reference,
    encode_scale,
    nvidia_block_scales,
    quantize_float_scaled_reference,
    tensor_amax,
    torchao_block_scales,
)

if TYPE_CHECKING:
    from .scheme import BlockScheme

__all__ = [
    "GLOBAL_SCALE_RULES", "dequantize_float_scaled", "dequantize_float_scaled_reference", "encode_scale",
    "nvidia_block_scales", "quantize_float_scaled_blocks", "quantize_float_scaled_reference", "tensor_amax",
    "torchao_block_scales",
]


def quantize_float_scaled_blocks(s: BlockScheme, xb: np.ndarray, global_scale: np.float32 | None,
                                 rbits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Quantize a (n_blocks, k) array with float block scales (block.md §5): the fast path where it applies,
    the reference (quantize_float_scaled_reference) for every other configuration and for the blocks the fast
    path hands back. rbits: (n_blocks, k) random integers of a stochastic rounding (block.md §13): the
    reference only."""
    if rbits is not None:
        return quantize_float_scaled_reference(s, xb, global_scale, rbits)
    done = fast.quantize_float_scaled_fast(s, xb, global_scale)
    if done is None:
        return quantize_float_scaled_reference(s, xb, global_scale)
    out, slow = done
    if slow.any():
        ref = quantize_float_scaled_reference(s, xb[slow], global_scale)
        for name in ("codes", "scales", "unspecified", "scales_unspecified"):
            out[name][slow] = ref[name]
    return out


def _reference_for_table(s: BlockScheme, codes: np.ndarray, scales: np.ndarray, dtype: np.dtype,
                         global_scale: object = None) -> np.ndarray:
    return dequantize_float_scaled_reference(s, codes, scales, global_scale, dtype)


def dequantize_float_scaled(s: BlockScheme, codes: np.ndarray, scales: np.ndarray, global_scale: object,
                            dtype: np.dtype) -> np.ndarray:
    """Values of (n_blocks, k) codes with float-format block scale codes (block.md §5.4): the reference,
    tabulated over every (scale code, element code) pair where that is small (fast.dequantize_fast)."""
    out = fast.dequantize_fast(s, codes, scales, global_scale, dtype, _reference_for_table)
    return dequantize_float_scaled_reference(s, codes, scales, global_scale, dtype) if out is None else out
