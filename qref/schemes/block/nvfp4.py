"""Float-scaled blocks (NVFP4 and any non-power-of-two scale format): the entry points, which dispatch between
the fast path and the reference (spec: block.md §5, §5.5).

The definition is nvfp4_reference.py (its named steps are re-exported here); fast.py computes the same
function where its shortcuts are exact and hands the other blocks back. Layering: nvfp4_reference <- fast <-
nvfp4 (this module) <- scheme.
"""

from __future__ import annotations

import numpy as np

from ...errors import QrefError
from ...formats.block import BlockFormat
from ...profiles.block import FloatScaleRules
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

__all__ = [
    "GLOBAL_SCALE_RULES", "dequantize_float_scaled", "dequantize_float_scaled_reference", "encode_scale",
    "nvidia_block_scales", "quantize_float_scaled_blocks", "quantize_float_scaled_reference", "tensor_amax",
    "torchao_block_scales",
]


def group_amax(xb: np.ndarray, blocks_per_row: int, granularity: str, skip_nan: bool) -> np.ndarray:
    """The outer amax of each block's row ("row": a token) or 1 x 64 tile ("tile_64"), repeated per block
    (block.md §5.2.1): max |x| over the group, NaN skipped (skip_nan) or propagated, rounded to float32."""
    with np.errstate(invalid="ignore"):
        a = np.abs(np.asarray(xb, dtype=np.float64))
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a).max(axis=1) if a.shape[1] else np.zeros(a.shape[0])
    if not skip_nan:
        a = np.where(nan.any(axis=1), np.nan, a)
    per = blocks_per_row if granularity == "row" else 64 // xb.shape[1]
    if blocks_per_row % per:
        raise QrefError(f"global_scale_granularity={granularity!r}: {blocks_per_row} blocks per row do not make "
                        f"whole groups of {per}")
    grp = a.reshape(-1, per)
    with np.errstate(invalid="ignore"):
        m = grp.max(axis=1) if not skip_nan else np.where(np.isnan(grp), 0.0, grp).max(axis=1)
    return np.repeat(m, per).astype(np.float32)


def quantize_float_scaled_blocks(rules: FloatScaleRules, f: BlockFormat, xb: np.ndarray,
                                 global_scale: np.float32 | np.ndarray | None,
                                 rbits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Quantize a (n_blocks, k) array with float block scales (block.md §5): the fast path where it applies,
    the reference (quantize_float_scaled_reference) for every other configuration and for the blocks the fast
    path hands back. rbits: (n_blocks, k) random integers of a stochastic rounding (block.md §13): the
    reference only."""
    if rbits is not None or np.ndim(global_scale):  # random bits, or an outer amax per block: the reference
        return quantize_float_scaled_reference(rules, f, xb, global_scale, rbits)
    done = fast.quantize_float_scaled_fast(rules, f, xb, global_scale)
    if done is None:
        return quantize_float_scaled_reference(rules, f, xb, global_scale)
    out, slow = done
    if slow.any():
        ref = quantize_float_scaled_reference(rules, f, xb[slow], global_scale)
        for name in ("codes", "scales", "unspecified", "scales_unspecified"):
            out[name][slow] = ref[name]
    return out


def _reference_for_table(rules: FloatScaleRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray, dtype: np.dtype,
                         global_scale: object = None) -> np.ndarray:
    return dequantize_float_scaled_reference(rules, f, codes, scales, global_scale, dtype)


def dequantize_float_scaled(rules: FloatScaleRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray,
                            global_scale: object,
                            dtype: np.dtype) -> np.ndarray:
    """Values of (n_blocks, k) codes with float-format block scale codes (block.md §5.4): the reference,
    tabulated over every (scale code, element code) pair where that is small (fast.dequantize_fast)."""
    if np.ndim(global_scale) and np.size(global_scale) > 1:  # an outer scale per block (§5.2.1)
        return dequantize_float_scaled_reference(rules, f, codes, scales, global_scale, dtype)
    out = fast.dequantize_fast(rules, f, codes, scales, global_scale, dtype, _reference_for_table)
    return dequantize_float_scaled_reference(rules, f, codes, scales, global_scale, dtype) if out is None else out
