"""Deterministic LLM-like test tensors (analysis.md §4): weights, heavy tails, activations with outliers."""

from __future__ import annotations

import math

import numpy as np

from ..errors import QrefError, unknown_name

# ---------------------------------------------------------------------------------------------------------
# §4 deterministic LLM-like test tensors
# ---------------------------------------------------------------------------------------------------------
LLM_KINDS = ("normal", "student_t", "activations")


def llm_like(kind: str, shape: tuple[int, ...] | None = None, *, seed: int = 0, std: float = 0.02, df: float = 4.0,
             outlier_channels: int = 6, outlier_scale: float = 30.0) -> np.ndarray:
    """A float32 tensor shaped like LLM weights or activations, generated deterministically from ``seed``.

    kind "normal": weights N(0, std^2) (default shape (256, 2048): rows of a 2048-wide projection).
    kind "student_t": heavy-tailed weights, Student-t with ``df`` degrees of freedom scaled to standard deviation
        ``std`` (t / sqrt(df / (df - 2)) * std; default shape (32, 8192): rows of an 8192-wide down projection).
    kind "activations": (tokens, hidden) = default (128, 2048): x[t, c] = s_t z[t, c] with z ~ N(0, 1) and a
        per-token scale s_t ~ LogNormal(0, 0.5); ``outlier_channels`` fixed hidden channels (chosen from the seed)
        carry a systematic outlier feature x[t, c] = sign_c * outlier_scale * s_t * (1 + z[t, c] / 4), the
        pattern LLM.int8() (arXiv 2208.07339) describes.
    """
    r = np.random.default_rng(seed)
    if kind == "normal":
        shp = shape or (256, 2048)
        return (r.standard_normal(shp) * std).astype(np.float32)
    if kind == "student_t":
        if df <= 2:
            raise QrefError(f"df must be > 2 for a finite variance, got {df}")
        shp = shape or (32, 8192)
        return (r.standard_t(df, shp) / math.sqrt(df / (df - 2)) * std).astype(np.float32)
    if kind == "activations":
        shp = shape or (128, 2048)
        if len(shp) != 2:
            raise QrefError(f"activations are (tokens, hidden), got shape {shp}")
        t, h = shp
        z = r.standard_normal(shp)
        s = r.lognormal(0.0, 0.5, (t, 1))
        x = s * z
        k = min(outlier_channels, h)
        ch = r.choice(h, size=k, replace=False)
        sign = r.choice([-1.0, 1.0], size=k)
        x[:, ch] = sign * outlier_scale * s * (1 + z[:, ch] / 4)
        return x.astype(np.float32)
    raise unknown_name("LLM-like tensor kind", kind, LLM_KINDS)


__all__ = ["LLM_KINDS", "llm_like"]
