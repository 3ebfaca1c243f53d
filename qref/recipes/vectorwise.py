"""Vectorwise int8 (LLM.int8) and weight-only float matrix products (spec: docs/spec/matmul.md §13, §14).

``vectorwise_quant`` (§13.1), the int32 product (§13.2, §3), ``int8_mm_dequant`` (§13.3) and their composition
``vectorwise_int8_matmul`` follow a ``VectorwiseInt8Rules`` record (qref.profiles.matmul) bit for bit.
``weight_only_matmul`` (§14) dequantizes lookup codes exactly to float32 and returns the exact product with its
rigorous float32 any-order bound (qref.recipes.ops.exact_matmul).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import QrefError
from ..profiles.base import Profile, resolve_profile
from ..profiles.matmul import VectorwiseInt8Rules, WeightOnlyRules
from .ops import MatmulResult, exact_matmul

OUT_DTYPES = {"float16": np.float16, "float32": np.float32}


def vectorwise_rules(profile: str | Profile = "bitsandbytes_int8", **overrides: Any) -> VectorwiseInt8Rules:
    """The VectorwiseInt8Rules of matmul profile ``profile`` with field overrides (matmul.md §13); the family's
    spec default "exact" reads as ``vectorwise_spec`` (matmul.md §13.4)."""
    if profile == "exact":
        profile = "vectorwise_spec"
    rules = resolve_profile(profile, "matmul").profile.rules
    if not isinstance(rules, VectorwiseInt8Rules):
        raise QrefError(f"matmul profile {profile!r} is not a vectorwise int8 profile")
    return rules.replace(**overrides) if overrides else rules


def _float_rows(x: object, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind != "f" or a.ndim != 2:
        raise QrefError(f"{name} must be a 2-D float array, got {a.dtype} {a.shape}")
    return a.astype(np.float32)


def vectorwise_quant(x: object, rules: VectorwiseInt8Rules | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes int8, stats float32, unspecified rows) of per-row absmax int8 quantization (matmul.md §13.1).
    Rows whose maximum is 0 or not finite are unspecified (their codes hold 0)."""
    r = rules or VectorwiseInt8Rules()
    a = _float_rows(x, "x")
    stats = np.abs(a).max(axis=1).astype(np.float32)
    bad = ~np.isfinite(stats) | np.isnan(a).any(axis=1)
    if r.stats == "absmax_over_127_5":  # torchao: max(fl32(amax / 127.5), float32 eps)
        stats = np.maximum((stats / np.float32(127.5)).astype(np.float32), np.finfo(np.float32).eps)
    else:
        bad |= stats == 0
    s = np.where(bad, np.float32(1), stats)[:, None]
    with np.errstate(all="ignore"):
        if r.quant_multiplier == "reciprocal":  # torch: 1.0 / t == t.reciprocal()
            v = a * (np.float32(1) / s)
        elif r.quant_multiplier == "reciprocal_times_127":  # torch: 127.0 / t == t.reciprocal() * 127.0
            v = a * ((np.float32(1) / s) * np.float32(127))
        elif r.quant_multiplier == "reciprocal_multiply":
            v = a * (np.float32(127) / s)  # float32 multiplier, then a float32 product (matmul.md §13.1)
        else:
            v = (a.astype(np.float64) * 127 / s).astype(np.float32)  # 127 x exact in float64, one rounding
        q = np.rint(v) if r.rounding == "nearest_even" else np.sign(v) * np.floor(np.abs(v) + 0.5)
    q = np.where(bad[:, None], 0, np.clip(q, -128, 127)).astype(np.int8)
    return q, stats, bad


def int8_product(qa: np.ndarray, qb: np.ndarray, rules: VectorwiseInt8Rules | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(acc int32, unspecified) of qa @ qb.T (qb: (N, K), one row per output column) under the rules'
    accumulation (matmul.md §13.2, §3.1)."""
    r = rules or VectorwiseInt8Rules()
    s = qa.astype(np.int64) @ qb.astype(np.int64).T
    ov = r.accumulation.overflow
    out32 = (s < -(2**31)) | (s > 2**31 - 1)
    if ov == "wrap":
        return ((s + 2**31) % 2**32 - 2**31).astype(np.int32), np.zeros(s.shape, bool)
    if ov == "saturate":  # partial sums in k order saturate (matmul.md §3.1)
        acc = np.zeros(s.shape, np.int64)
        pa, pb = qa.astype(np.int64), qb.astype(np.int64)
        for k in range(qa.shape[1]):
            acc = np.clip(acc + pa[:, k:k + 1] * pb[None, :, k], -(2**31), 2**31 - 1)
        return acc.astype(np.int32), np.zeros(s.shape, bool)
    return np.where(out32, 0, s).astype(np.int32), out32


def int8_mm_dequant(acc: object, row_stats: object, col_stats: object,
                    rules: VectorwiseInt8Rules | None = None) -> np.ndarray:
    """The float epilogue of matmul.md §13.3: acc (M, N) int32, row_stats (M,), col_stats (N,) float32."""
    r = rules or VectorwiseInt8Rules()
    a = np.asarray(acc)
    if a.dtype != np.int32 or a.ndim != 2:
        raise QrefError(f"acc must be a 2-D int32 array, got {a.dtype} {a.shape}")
    rs = np.asarray(row_stats, np.float32).reshape(-1, 1)
    cs = np.asarray(col_stats, np.float32).reshape(1, -1)
    c = np.float32(r.dequant_constant)
    with np.errstate(all="ignore"):
        f = a.astype(np.float32)  # int32 -> float32, nearest even
        y = (f * (rs * cs)) * c if r.dequant_association == "stats_product_first" else ((f * rs) * cs) * c
        return y.astype(OUT_DTYPES.get(r.output, np.float32)) if r.output != "bfloat16" else _bf16(y)


def _bf16(y: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return y.astype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class VectorwiseResult:
    """Every stage of matmul.md §13: codes and stats of both operands, the int32 accumulator, the output, and the
    unspecified mask of the output (rows with no scale, int32 results outside the range with overflow exact)."""

    a_codes: np.ndarray
    a_stats: np.ndarray
    b_codes: np.ndarray
    b_stats: np.ndarray
    acc: np.ndarray
    y: np.ndarray
    unspecified: np.ndarray


def vectorwise_int8_matmul(a: object, b: object, rules: VectorwiseInt8Rules | str | None = None
                           ) -> VectorwiseResult:
    """y = a @ b.T through matmul.md §13: a (M, K), b (N, K) float arrays (float16 in bitsandbytes)."""
    r = vectorwise_rules(rules) if isinstance(rules, str) else (rules or VectorwiseInt8Rules())
    qa, sa, ba = vectorwise_quant(a, r)
    qb, sb, bb = vectorwise_quant(b, r)
    if qa.shape[1] != qb.shape[1]:
        raise QrefError(f"a has K = {qa.shape[1]}, b has K = {qb.shape[1]}")
    acc, ua = int8_product(qa, qb, r)
    y = int8_mm_dequant(acc, sa, sb, r)
    uns = ua | ba[:, None] | bb[None, :]
    return VectorwiseResult(qa, sa, qb, sb, acc, y, uns)


def dequantize_codes(codes: object, absmax: object, table: str, block_size: int) -> np.ndarray:
    """w = fl32(table[code] * absmax[block]) over the flattened codes (lut.md; matmul.md §14)."""
    from ..tables import get_table

    c = np.asarray(codes)
    if c.dtype.kind not in "iu" or c.min(initial=0) < 0 or c.max(initial=0) > 15:
        raise QrefError("codes must be integer 4-bit codes in [0, 15]")
    vals = np.asarray(get_table(table).bits, np.uint32).view(np.float32)
    flat = vals[c.reshape(-1).astype(np.int64)]
    am = np.asarray(absmax, np.float32).reshape(-1)
    blk = np.arange(flat.size) // int(block_size)
    if blk[-1] >= am.size if flat.size else False:
        raise QrefError(f"{flat.size} codes need {blk[-1] + 1} absmax values, got {am.size}")
    return (flat * am[blk]).astype(np.float32).reshape(c.shape)


def weight_only_matmul(x: object, codes: object, absmax: object, *, table: str, block_size: int,
                       rules: WeightOnlyRules | None = None) -> MatmulResult:
    """x (M, K) float32 times W^T, W (N, K) = dequantize_codes(codes, absmax): the exact product, its float32
    rounding and the rigorous bound of a float32 accumulation in any order (matmul.md §14)."""
    r = rules or WeightOnlyRules()
    w = dequantize_codes(codes, absmax, table, block_size)
    xv = np.asarray(x, np.float32)
    return exact_matmul(xv, w.T, accumulation=f"{r.accumulation_dtype}_{r.order}", out_dtype=r.output)


__all__ = ["OUT_DTYPES", "VectorwiseResult", "dequantize_codes", "int8_mm_dequant", "int8_product",
           "vectorwise_int8_matmul", "vectorwise_quant", "vectorwise_rules", "weight_only_matmul"]
