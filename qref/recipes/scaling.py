"""Scaling for FP8 recipes: amax, current scaling formulas, scaled casts and delayed scaling (spec:
docs/spec/recipes.md §3-§4).

A scaled cast stores ``q = cast(clip(x / s, -max, max))`` and represents ``x ~ decode(q) * s``. The scale ``s``
comes from an amax (max |x| over a tensor, an axis or a block) by one of the formulas below, each evaluated in
a declared float dtype (float32 by default) with every step rounded to nearest even:

flax           s = fl(1 / fl(fl(max / amax) / 2^margin)); if amax <= 0 or amax is not finite the previous
               scale is kept as fl(1 / fl(1 / s_prev))     (flax.linen.fp8_ops.compute_scale, recipes.md §3.2)
amax_over_max  s = fl(amax / max) * 2^margin; amax <= 0 or non-finite: s_prev   (qwix / AQT fp8 calibration)
pow2_ceil      s = 2^(ceil(log2(amax / max)) + margin), exact: the smallest power of two with amax / s <= max
pow2_floor     s = 2^(floor(log2(amax / max)) + margin), exact (OCP MX's X; amax / s may exceed max: clip)

``DelayedScaling`` is the amax-history recipe of Flax ``fp8_ops`` / TransformerEngine: a ring of the last L
amaxes (index 0 the most recent), the scale of step t computed from the history *before* step t's amax is
pushed (so step 0 uses the initial scale 1), and the kept-scale rules above for zero and non-finite amaxes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import f64, flush, np_dtype, round_values
from ..core.decode import decode
from ..core.encode import encode
from ..core.exact import bit_length, decompose
from ..errors import QrefError, check_choice
from ..formats import FloatFormat, Format, get_format
from .exact import acc_format

FORMULAS = ("flax", "amax_over_max", "pow2_ceil", "pow2_floor")
DIVISIONS = ("divide", "reciprocal", "broadcast_reciprocal")
AMAX_COMPUTE = ("max", "most_recent")
NAN_AMAX = ("propagate", "ignore")


def _elem_format(fmt: str | Format) -> FloatFormat:
    f = get_format(fmt)
    if not isinstance(f, FloatFormat):
        raise QrefError(f"scaled casts take float element formats (e.g. float8_e4m3fn), got {f.name}")
    return f


def _dtype_fmt(dtype: str | np.dtype | type) -> FloatFormat:
    return acc_format(dtype)


# ---------------------------------------------------------------------------------------------------------
# amax (recipes.md §3.1)
# ---------------------------------------------------------------------------------------------------------
def amax(x: object, *, keep_axes: int | tuple[int, ...] | None = None, block: tuple[int, int] | None = None,
         nan: str = "propagate") -> np.ndarray:
    """max |x| per tensor (default), per ``keep_axes`` (one amax per index of those axes, reduced over the
    others, keepdims) or per ``block=(axis, size)`` (blocks of ``size`` consecutive elements along ``axis``;
    a short last block is padded with zeros, which never change a maximum).

    The result is exact and has x's dtype (float64 for integer input). nan="propagate" (default: jnp.max,
    np.max: a NaN anywhere in the group gives NaN) or "ignore" (NaN skipped; an all-NaN group gives 0)."""
    check_choice("NaN amax rule", nan, NAN_AMAX)
    arr = np.asarray(x)
    if arr.dtype.kind not in "fV":
        arr = arr.astype(np.float64)
    a = np.abs(arr)
    if nan == "ignore":
        a = np.where(np.isnan(a), np.zeros((), a.dtype), a)
    if block is not None:
        if keep_axes is not None:
            raise QrefError("give keep_axes= or block=, not both (block scales already keep every other axis)")
        ax, k = block
        ax = _axis(ax, a.ndim)
        if not isinstance(k, int) or k < 1:
            raise QrefError(f"block size must be a positive integer, got {k!r}")
        moved = np.moveaxis(a, ax, -1)
        n = moved.shape[-1]
        pad = (-n) % k
        if pad:
            moved = np.concatenate([moved, np.zeros((*moved.shape[:-1], pad), dtype=moved.dtype)], axis=-1)
        r = moved.reshape(*moved.shape[:-1], -1, k)
        out = r.max(axis=-1) if r.size else np.zeros(r.shape[:-1], dtype=a.dtype)
        return np.moveaxis(out, -1, ax)
    if keep_axes is None:
        return np.asarray(a.max() if a.size else np.zeros((), a.dtype))
    keep = (keep_axes,) if isinstance(keep_axes, int) else tuple(keep_axes)
    keep = tuple(_axis(k, a.ndim) for k in keep)
    red = tuple(i for i in range(a.ndim) if i not in keep)
    return a.max(axis=red, keepdims=True) if red else a.copy()


def _axis(ax: int, ndim: int) -> int:
    if not -ndim <= ax < ndim:
        raise QrefError(f"axis {ax} is out of range for an array of {ndim} dimension(s)")
    return ax % ndim


# ---------------------------------------------------------------------------------------------------------
# scale formulas (recipes.md §3.2)
# ---------------------------------------------------------------------------------------------------------
def _pow2_log_ratio(a: np.ndarray, m: Fraction, ceil: bool) -> np.ndarray:
    """floor or ceil of log2(a / m) exactly, for positive finite float64 a and a positive rational m."""
    flat = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    ex = decompose(flat)
    L = bit_length(ex.sig)
    ea = ex.exp + L - 1  # floor(log2 a)
    em = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** em > m:
        em -= 1  # floor(log2 m)
    # a = A 2^ea with A = sig / 2^(L-1) in [1, 2); m = B 2^em with B = nb / db in [1, 2): compare exactly,
    # A < B  <=>  sig * db < nb * 2^(L-1)   (Python integers in object arrays)
    B = m / Fraction(2) ** em
    lhs = ex.sig.astype(object) * B.denominator
    rhs = B.numerator * (np.ones(flat.shape, dtype=object) << (L - 1).astype(object))
    less = np.asarray(lhs < rhs, dtype=bool)
    equal = np.asarray(lhs == rhs, dtype=bool)
    out = ea - em - less + (ceil & ~equal)
    return out.reshape(np.shape(a))


def compute_scale(amax: object, fmt: str | Format, *, formula: str = "flax", margin: int = 0,
                  prev_scale: object = 1.0, dtype: str = "float32", ftz: bool = False) -> np.ndarray:
    """The scale for a given amax (recipes.md §3.2), as ``dtype`` values (default float32).

    formula: see the module docstring (default "flax"). margin: integer; the scale is multiplied by 2^margin
    (default 0). prev_scale: the scale kept when amax is zero, negative, NaN or infinite (default 1.0; "flax"
    keeps fl(1 / fl(1 / prev))). dtype: the float dtype of every step (default "float32", Flax's meta dtype).
    ftz: XLA:CPU flush-to-zero / denormals-are-zero on each step's operands and results (default False).
    With ftz, a float32-subnormal amax is unspecified: XLA:CPU reads it as 0 in eager comparisons and as
    nonzero under jit (recipes.md §3.2, C3)."""
    check_choice("scale formula", formula, FORMULAS)
    if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
        raise QrefError(f"margin must be an integer (a power-of-two factor 2^margin), got {margin!r}")
    f = _elem_format(fmt)
    dt = _dtype_fmt(dtype)
    a = round_values(f64(amax), dt)  # amax is stored in the meta dtype first (Flax: .astype(history dtype))
    prev = round_values(np.broadcast_to(f64(prev_scale), a.shape), dt)
    M = float(f.max_value)
    if ftz:
        a_in, prev = flush(a, float(dt.min_normal)), flush(prev, float(dt.min_normal))
    else:
        a_in = a
    ok = (a_in > 0) & np.isfinite(a_in)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if formula == "flax":
            q = round_values(M / a_in, dt, ftz=ftz)
            sf = round_values(q / float(2.0**margin), dt, ftz=ftz)  # division by 2^margin (exact unless tiny)
            keep = round_values(1.0 / prev, dt, ftz=ftz)
            sf = np.where(ok, sf, keep)
            out = round_values(1.0 / sf, dt, ftz=ftz)
        elif formula == "amax_over_max":
            s = round_values(round_values(a_in / M, dt, ftz=ftz) * float(2.0**margin), dt, ftz=ftz)
            out = np.where(ok, s, prev)
        else:
            e = np.zeros(a.shape, dtype=np.int64)
            if ok.any():
                e[ok] = _pow2_log_ratio(a_in[ok], f.max_value, ceil=formula == "pow2_ceil")
            s = round_values(np.ldexp(1.0, np.clip(e + margin, -2000, 2000)), dt, ftz=ftz)
            out = np.where(ok, s, prev)
    return out.astype(np_dtype(dt))


def current_scale(x: object, fmt: str | Format, *, formula: str = "amax_over_max", margin: int = 0,
                  keep_axes: int | tuple[int, ...] | None = None, block: tuple[int, int] | None = None,
                  dtype: str = "float32", nan: str = "propagate", ftz: bool = False) -> np.ndarray:
    """Current (just-in-time) scaling: compute_scale(amax(x, ...), ...) per tensor, per keep_axes or per
    block, with prev_scale = 1 for all-zero or non-finite groups. Defaults: formula "amax_over_max", margin 0,
    per tensor, float32, NaN propagates into the amax (the group then gets scale 1)."""
    am = amax(x, keep_axes=keep_axes, block=block, nan=nan)
    return compute_scale(am, fmt, formula=formula, margin=margin, prev_scale=1.0, dtype=dtype, ftz=ftz)


def expand_scale(scale: object, shape: tuple[int, ...], block: tuple[int, int] | None = None) -> np.ndarray:
    """Broadcast per-tensor / keepdims per-axis scales to ``shape``; block scales (from ``block=(axis,
    size)``) are repeated ``size`` times along the axis and cut to the axis length."""
    s = np.asarray(scale)
    if block is None:
        try:
            return np.broadcast_to(s, shape)
        except ValueError:
            raise QrefError(f"scale of shape {s.shape} does not broadcast to {shape}") from None
    ax, k = block
    ax = _axis(ax, len(shape))
    rep = np.repeat(s, k, axis=ax)
    return np.take(rep, np.arange(shape[ax]), axis=ax)


# ---------------------------------------------------------------------------------------------------------
# scaled casts (recipes.md §3.3)
# ---------------------------------------------------------------------------------------------------------
def scaled_quantize(x: object, scale: object, fmt: str | Format, *, compute_dtype: str = "float32",
                    division: str = "divide", clip: bool = True, rounding: str = "nearest_even",
                    overflow: str | None = None, ftz: bool = False) -> np.ndarray:
    """Codes of cast(clip(x / s, -max, max)) (flax.linen.fp8_ops.quantize, recipes.md §3.3).

    x is first rounded to ``compute_dtype`` (default float32; Flax casts the input to the kernel's dtype), s too.
    division: "divide" (fl(x / s): eager JAX) or "reciprocal" (fl(x * fl(1 / s)): XLA rewrites x / broadcast(s)
    under jit) or "broadcast_reciprocal" ("reciprocal" when s has fewer elements than x, i.e. is broadcast, else
    "divide": XLA:CPU rewrites x / broadcast(s) even eagerly, but a broadcast onto one element is degenerate and
    stays a division, recipes.md §14.1) (default "divide"). clip: clip to +-max in compute_dtype before the cast
    (NaN stays NaN, +-Inf becomes +-max) (default True). rounding / overflow: the element cast's CastPolicy
    (defaults nearest_even and the format's default; after clipping only NaN can be out of range). ftz: XLA:CPU
    flush of subnormal operands and results of the division (default False)."""
    check_choice("division", division, DIVISIONS)
    f = _elem_format(fmt)
    cd = _dtype_fmt(compute_dtype)
    xv = round_values(f64(x), cd)
    if division == "broadcast_reciprocal":
        division = "reciprocal" if np.size(scale) < xv.size else "divide"
    sv = round_values(np.broadcast_to(f64(scale), xv.shape), cd)
    if ftz:
        xv, sv = flush(xv, float(cd.min_normal)), flush(sv, float(cd.min_normal))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if division == "divide":
            y = round_values(xv / sv, cd, ftz=ftz)
        else:
            r = round_values(1.0 / sv, cd, ftz=ftz)
            y = round_values(xv * r, cd, ftz=ftz)
    if clip:
        M = float(f.max_value)
        y = np.clip(y, -M, M)
    return encode(y, f, rounding=rounding, overflow=overflow)


def scaled_dequantize(codes: object, fmt: str | Format, scale: object, *, dtype: str = "float32",
                      ftz: bool = False) -> np.ndarray:
    """fl_dtype(decode(codes) * fl_dtype(s)) (flax.linen.fp8_ops.dequantize), as ``dtype`` values."""
    f = _elem_format(fmt)
    dt = _dtype_fmt(dtype)
    v = decode(codes, f, dtype=np.float64)
    sv = round_values(np.broadcast_to(f64(scale), v.shape), dt)
    if ftz:
        sv = flush(sv, float(dt.min_normal))
    with np.errstate(invalid="ignore", over="ignore"):
        out = round_values(v * sv, dt, ftz=ftz)
    return out.astype(np_dtype(dt))


def qdq(x: object, scale: object, fmt: str | Format, *, compute_dtype: str = "float32", out_dtype: str | None = None,
        division: str = "divide", ftz: bool = False) -> np.ndarray:
    """scaled_dequantize(scaled_quantize(x, s), s) in ``out_dtype`` (default: x's dtype) (fp8_ops.qdq)."""
    arr = np.asarray(x)
    od = out_dtype if out_dtype is not None else (arr.dtype.name if arr.dtype.kind in "fV" else "float64")
    codes = scaled_quantize(arr, scale, fmt, compute_dtype=compute_dtype, division=division, ftz=ftz)
    return scaled_dequantize(codes, fmt, scale, dtype=od, ftz=ftz)


# ---------------------------------------------------------------------------------------------------------
# delayed scaling (recipes.md §4)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScalingState:
    """The meta variables of one delayed-scaled tensor: ``scale`` (shape (1,)) and ``history`` (shape (L,),
    index 0 the most recent amax), both in the recipe's dtype (Flax: float32 'input_scale' /
    'input_amax_history' in the '_overwrite_with_gradient' collection)."""

    scale: np.ndarray
    history: np.ndarray

    def __post_init__(self) -> None:
        s = np.asarray(self.scale)
        h = np.asarray(self.history)
        if s.shape != (1,) or h.ndim != 1 or h.size < 1:
            raise QrefError(f"ScalingState takes scale of shape (1,) and a 1-D history, got {s.shape} and {h.shape}")
        s.setflags(write=False)
        h.setflags(write=False)
        object.__setattr__(self, "scale", s)
        object.__setattr__(self, "history", h)


@dataclass(frozen=True)
class DelayedScaling:
    """Delayed scaling from an amax history (recipes.md §4). Defaults reproduce flax.linen.fp8_ops 0.12.8.

    fmt: the element format (default "float8_e4m3fn"; Flax uses float8_e5m2 for gradients).
    history_length: L, the ring length (default 1024, Flax's amax_history_length).
    amax_compute: "max" (the maximum of the whole history, Flax) or "most_recent" (history[0],
        TransformerEngine's alternative) (default "max").
    margin: scales are multiplied by 2^margin (default 0).
    formula: one of FORMULAS (default "flax").
    dtype: the dtype of scales, histories and the scale arithmetic (default "float32").
    ftz: XLA:CPU flush of subnormal operands/results in the scale arithmetic (default False; a float32-subnormal
        amax is unspecified under XLA, recipes.md §3.2 C3).
    nan: "propagate" (a NaN anywhere in the tensor makes its amax NaN, jnp.max) or "ignore" (default
        "propagate")."""

    fmt: str = "float8_e4m3fn"
    history_length: int = 1024
    amax_compute: str = "max"
    margin: int = 0
    formula: str = "flax"
    dtype: str = "float32"
    ftz: bool = False
    nan: str = "propagate"
    _fmt: FloatFormat = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fmt", _elem_format(self.fmt))
        check_choice("amax computation", self.amax_compute, AMAX_COMPUTE)
        check_choice("scale formula", self.formula, FORMULAS)
        check_choice("NaN amax rule", self.nan, NAN_AMAX)
        _dtype_fmt(self.dtype)
        if not isinstance(self.history_length, int) or isinstance(self.history_length, bool) or \
                self.history_length < 1:
            raise QrefError(f"history_length must be a positive integer, got {self.history_length!r}")

    @property
    def _np(self) -> np.dtype:
        return np_dtype(_dtype_fmt(self.dtype))

    def init(self) -> ScalingState:
        """The initial state: scale 1, history all zeros (Flax's ones_init / zeros_init)."""
        return ScalingState(np.ones(1, dtype=self._np), np.zeros(self.history_length, dtype=self._np))

    def state(self, scale: object, history: object) -> ScalingState:
        """A state from given values (e.g. read back from a Flax variable collection)."""
        h = np.asarray(history, dtype=self._np).reshape(-1)
        if h.size != self.history_length:
            raise QrefError(f"history has {h.size} entries; this recipe's history_length is {self.history_length}")
        return ScalingState(np.asarray(scale, dtype=self._np).reshape(1), h)

    def history_amax(self, state: ScalingState) -> np.ndarray:
        """max(history) (NaN propagates) or history[0]."""
        h = state.history
        return np.asarray(h.max() if self.amax_compute == "max" else h[0]).reshape(1)

    def next_scale(self, state: ScalingState) -> np.ndarray:
        """The scale of the coming step: compute_scale(history amax, prev_scale=state.scale)."""
        return compute_scale(self.history_amax(state), self._fmt, formula=self.formula, margin=self.margin,
                             prev_scale=state.scale, dtype=self.dtype, ftz=self.ftz).reshape(1)

    def push(self, state: ScalingState, x: object, scale: np.ndarray | None = None) -> ScalingState:
        """roll(history, -1) with entry 0 replaced by amax(x) (Flax compute_amax_history): the ring keeps the
        last L amaxes, index 0 the newest; entries 1..L-1 are older ones in a rotated order."""
        a = round_values(f64(amax(x, nan=self.nan)), _dtype_fmt(self.dtype)).astype(self._np)
        h = np.roll(state.history, -1)
        h[0] = a
        return ScalingState(state.scale if scale is None else np.asarray(scale, dtype=self._np).reshape(1), h)

    def update(self, state: ScalingState, x: object) -> tuple[np.ndarray, ScalingState]:
        """One step (Flax update_fp8_meta): the new scale from the history before x, then x's amax pushed.
        Returns (scale to use for x, new state)."""
        s = self.next_scale(state)
        return s, self.push(state, x, s)

    def quantize(self, state: ScalingState, x: object, *, compute_dtype: str = "float32",
                 division: str = "divide") -> tuple[np.ndarray, np.ndarray, ScalingState]:
        """(codes, scale, new state): update, then scaled_quantize x with the new scale (Flax in_q)."""
        s, new = self.update(state, x)
        codes = scaled_quantize(x, s, self._fmt, compute_dtype=compute_dtype, division=division, ftz=self.ftz)
        return codes, s, new

    def with_options(self, **changes: Any) -> DelayedScaling:
        return replace(self, **changes)


__all__ = ["AMAX_COMPUTE", "DIVISIONS", "FORMULAS", "NAN_AMAX", "DelayedScaling", "ScalingState", "amax",
           "compute_scale", "current_scale", "expand_scale", "qdq", "scaled_dequantize", "scaled_quantize"]
