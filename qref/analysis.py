"""Numeric error analysis: metrics, scheme comparison tables, per-channel / per-block breakdowns, clipping
counts (guide: docs/analysis.md).

Everything here works on the generic scheme contract (``scheme.quantize(x) -> QArray``, ``QArray.dequantize()``),
so it covers every family: casts, uniform (affine integer), block (MX, NVFP4, MLX affine) and lookup (NF4...).

Conventions (analysis.md §1). ``x`` is the reference, ``y`` its approximation, ``e = y - x``; all arithmetic is
float64 (every input dtype converts exactly). Pairs where x or y is NaN/Inf are left out of every metric; the
number of finite inputs that became non-finite (overflow to Inf/NaN) is reported as ``nonfinite``.

    MSE      = mean(e^2)                       RMSE = sqrt(MSE)
    SQNR_dB  = 10 log10(sum x^2 / sum e^2)     (+inf when e == 0 everywhere; -inf when x == 0 and e != 0)
    max_abs  = max |e|                         max_rel = max |e| / |x| over x != 0
    bias     = mean(e)                         cosine = <x, y> / (|x| |y|) (NaN when x or y is all zeros)
    KL       = sum_i p_i ln(p_i / q_i)         (nats) p, q: histograms of x and y on common bins, each bin's
                                               count + ``smoothing`` (default 0.5), normalized
    ulps     = |e| / ulp_F(x)                  ulp_F(x) = 2^(max(floor(log2|x|), emin) - M) for a float format F
                                               (1 for an integer format), times ``scale``
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import QrefError, unknown_name
from .formats import FloatFormat, Format, IntFormat, get_format
from .schemes.base import QArray, Scheme, normalize_axis

__all__ = [
    "Breakdown",
    "Comparison",
    "Counts",
    "Metrics",
    "Recipe",
    "Result",
    "Table",
    "block_breakdown",
    "block_view",
    "channel_breakdown",
    "compare",
    "cosine_similarity",
    "counts",
    "error_by_magnitude",
    "evaluate",
    "format_summary",
    "kl_divergence",
    "llm_like",
    "max_abs_error",
    "max_rel_error",
    "mean_error",
    "metrics",
    "mse",
    "parse_scheme",
    "rmse",
    "scale_exponents",
    "scale_values",
    "sqnr_db",
    "ulp",
    "ulp_error",
]


# ---------------------------------------------------------------------------------------------------------
# §1 elementwise metrics
# ---------------------------------------------------------------------------------------------------------
def _f64(a: object) -> np.ndarray:
    """a as float64 (exact for every float dtype, ml_dtypes included); a float64 array is returned as it is
    (callers never write to the result)."""
    arr = np.asarray(a)
    if arr.dtype.kind in "cOSUMm" or arr.dtype == np.bool_:
        raise QrefError(f"expected a real numeric array, got dtype {arr.dtype}")
    if arr.dtype == np.float64:
        return arr
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError):
        raise QrefError(f"expected a real numeric array, got dtype {arr.dtype}") from None


def _pair(x: object, y: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, finite-pair mask) as float64 arrays of the same shape."""
    xa, ya = _f64(x), _f64(y)
    if xa.shape != ya.shape:
        raise QrefError(f"x and y must have the same shape, got {xa.shape} and {ya.shape}")
    return xa, ya, np.isfinite(xa) & np.isfinite(ya)


def _sel(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    xa, ya, m = _pair(x, y)
    # all finite: the same values (C order, 1-D) as the boolean selection, without a copy
    return (xa.reshape(-1), ya.reshape(-1)) if m.all() else (xa[m], ya[m])


def mse(x: object, y: object) -> float:
    """Mean squared error mean((y - x)^2) over finite pairs (NaN when there are none)."""
    a, b = _sel(x, y)
    return float(np.mean((b - a) ** 2)) if a.size else math.nan


def rmse(x: object, y: object) -> float:
    """sqrt(MSE)."""
    return math.sqrt(mse(x, y))


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def sqnr_db(x: object, y: object) -> float:
    """Signal-to-quantization-noise ratio 10 log10(sum x^2 / sum (y - x)^2) in dB (+inf for y == x; NaN when no
    finite pair is left)."""
    a, b = _sel(x, y)
    if a.size == 0:
        return math.nan
    return _sqnr(float(np.sum(a * a)), float(np.sum((b - a) ** 2)))


def max_abs_error(x: object, y: object) -> float:
    """max |y - x| over finite pairs (0 for none)."""
    a, b = _sel(x, y)
    return float(np.max(np.abs(b - a))) if a.size else 0.0


def max_rel_error(x: object, y: object) -> float:
    """max |y - x| / |x| over finite pairs with x != 0 (0 for none)."""
    a, b = _sel(x, y)
    nz = a != 0
    return float(np.max(np.abs(b[nz] - a[nz]) / np.abs(a[nz]))) if nz.any() else 0.0


def mean_error(x: object, y: object) -> float:
    """Bias mean(y - x) over finite pairs (NaN for none)."""
    a, b = _sel(x, y)
    return float(np.mean(b - a)) if a.size else math.nan


def cosine_similarity(x: object, y: object) -> float:
    """<x, y> / (|x| |y|) over finite pairs; NaN when x or y is all zeros."""
    return _cosine(*_sel(x, y))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return math.nan
    return float(np.dot(a, b) / (na * nb))


def kl_divergence(x: object, y: object, *, bins: int | Sequence[float] = 128,
                  range: tuple[float, float] | None = None, smoothing: float = 0.5) -> float:
    """KL(P || Q) in nats of the value histograms of x (P) and y (Q) over common bins.

    bins: a bin count (default 128, equal width over ``range``) or explicit edges. range: (lo, hi); default the
    min and max of the finite values of x and y together. smoothing: pseudo-count added to every bin of both
    histograms before normalizing (default 0.5, the Jeffreys prior), so that a bin empty in Q gives a finite
    value; 0 gives the plain histogram KL (+inf when some bin has P > 0 and Q = 0). Identical inputs give 0.
    """
    return _kl(*_sel(x, y), bins, range, smoothing)


def _kl(a: np.ndarray, b: np.ndarray, bins: int | Sequence[float], range: tuple[float, float] | None,
        smoothing: float) -> float:
    """kl_divergence on selected finite pairs."""
    if smoothing < 0:
        raise QrefError(f"smoothing must be >= 0, got {smoothing}")
    if a.size == 0:
        return math.nan
    if isinstance(bins, (int, np.integer)):
        if bins < 1:
            raise QrefError(f"bins must be >= 1, got {bins}")
        lo, hi = range if range is not None else (float(min(a.min(), b.min())), float(max(a.max(), b.max())))
        if hi <= lo:
            hi = lo + 1.0
        edges = np.linspace(lo, hi, int(bins) + 1)
    else:
        edges = np.asarray(bins, dtype=np.float64)
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise QrefError("bins given as edges must be a strictly increasing 1-D sequence of >= 2 values")
    if isinstance(bins, (int, np.integer)):  # numpy's equal-width path: the counts of the same edges, no sort
        p = np.histogram(a, int(bins), range=(edges[0], edges[-1]))[0].astype(np.float64) + smoothing
        q = np.histogram(b, int(bins), range=(edges[0], edges[-1]))[0].astype(np.float64) + smoothing
    else:
        p = np.histogram(a, edges)[0].astype(np.float64) + smoothing
        q = np.histogram(b, edges)[0].astype(np.float64) + smoothing
    if p.sum() == 0 or q.sum() == 0:
        return math.nan
    p /= p.sum()
    q /= q.sum()
    pos = p > 0
    if np.any(pos & (q == 0)):
        return math.inf
    return float(np.sum(p[pos] * np.log(p[pos] / q[pos])))


def ulp(x: object, fmt: str | Format, scale: object = 1.0) -> np.ndarray:
    """Unit in the last place of ``fmt`` at each |x| / scale, times scale (float64 array).

    Float formats: 2^(max(floor(log2 |v|), emin) - M) with v = x / scale (also above the largest finite value:
    the spacing of the top binade continued); v == 0 gives 2^(emin - M). Integer formats: 1 (times scale).
    """
    f = get_format(fmt)
    xa = _f64(x)
    s = _f64(scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.abs(xa / s)
    if isinstance(f, IntFormat):
        return np.broadcast_to(np.abs(s), v.shape).astype(np.float64)
    m = f.mantissa_bits
    _, e = np.frexp(np.where(np.isfinite(v) & (v > 0), v, 1.0))
    e = np.where(v > 0, e.astype(np.int64) - 1, f.emin)  # floor(log2 v) exactly
    e = np.maximum(e, f.emin)
    return np.ldexp(np.abs(s) * np.ones_like(v), (e - m).astype(np.int64))


def ulp_error(x: object, y: object, fmt: str | Format, scale: object = 1.0) -> np.ndarray:
    """|y - x| in ulps of ``fmt`` at x (see ``ulp``), elementwise; NaN where x or y is not finite."""
    xa, ya, m = _pair(x, y)
    with np.errstate(invalid="ignore"):
        err = np.abs(ya - xa) / ulp(np.where(m, xa, 0.0), fmt, scale)
    return np.where(m, err, np.nan)


@dataclass(frozen=True)
class Metrics:
    """Every §1 metric of one (x, y) pair; ``n`` finite pairs used, ``nonfinite`` finite x with non-finite y,
    ``max_ulp``/``mean_ulp`` only when a format was given."""

    n: int
    mse: float
    rmse: float
    sqnr_db: float
    max_abs_error: float
    max_rel_error: float
    mean_error: float
    cosine: float
    kl: float
    nonfinite: int
    max_ulp: float | None = None
    mean_ulp: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def metrics(x: object, y: object, *, fmt: str | Format | None = None, scale: object = 1.0,
            where: object = None, bins: int | Sequence[float] = 128, smoothing: float = 0.5) -> Metrics:
    """All §1 metrics at once. fmt (optional): also the max / mean error in ulps of fmt (times scale).
    where (optional bool mask): only these elements (e.g. ``~qarray.unspecified``). bins, smoothing: for KL."""
    xa, ya, m = _pair(x, y)
    sc = np.broadcast_to(_f64(scale), xa.shape)
    if where is not None:
        w = np.broadcast_to(np.asarray(where, dtype=bool), xa.shape)
        xa, ya, m, sc = xa[w], ya[w], m[w], sc[w]
    nonfinite = int(np.count_nonzero(np.isfinite(xa) & ~np.isfinite(ya)))
    every = bool(m.all())
    a, b = (xa.reshape(-1), ya.reshape(-1)) if every else (xa[m], ya[m])
    e = b - a
    n = int(a.size)
    ee = e * e
    mse_ = float(np.mean(ee)) if n else math.nan
    mu, mu_mean = None, None
    if fmt is not None:
        u = ulp_error(a, b, fmt, sc.reshape(-1) if every else sc[m])
        mu = float(np.max(u)) if n else 0.0
        mu_mean = float(np.mean(u)) if n else math.nan
    # the same expressions as mse / sqnr_db / max_abs_error / ... on (a, b), evaluated once (e = b - a)
    if n:
        ae = np.abs(e)
        max_abs, mean_e = float(np.max(ae)), float(np.mean(e))
        nz = a != 0
        if nz.all():
            buf = np.abs(a)
            max_rel = float(np.max(np.divide(ae, buf, out=buf)))
        else:
            max_rel = float(np.max(ae[nz] / np.abs(a[nz]))) if nz.any() else 0.0
            buf = np.empty_like(a)
        del ae, nz
        sig = float(np.sum(np.multiply(a, a, out=buf)))
        sqnr = _sqnr(sig, float(np.sum(ee)))
        del buf
    else:
        max_rel, max_abs, mean_e, sqnr = 0.0, 0.0, math.nan, math.nan
    del e, ee
    return Metrics(
        n=n, mse=mse_, rmse=math.sqrt(mse_) if n else math.nan,
        sqnr_db=sqnr,
        max_abs_error=max_abs, max_rel_error=max_rel, mean_error=mean_e,
        cosine=_cosine(a, b), kl=_kl(a, b, bins, None, smoothing),
        nonfinite=nonfinite, max_ulp=mu, mean_ulp=mu_mean,
    )


def error_by_magnitude(x: object, y: object, *, bins: int | Sequence[float] = 48, relative: bool = False
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, rms error per bin, count per bin) of |y - x| grouped by |x| on log-spaced bins.

    bins: a count (default 48, log-spaced between the smallest nonzero and the largest |x|) or explicit edges.
    relative: report rms(|e| / |x|) instead of rms(|e|). Empty bins give NaN; x == 0 is left out.
    """
    a, b = _sel(x, y)
    mag = np.abs(a)
    nz = mag > 0
    mag, err = mag[nz], np.abs(b - a)[nz]
    if relative:
        err = err / mag
    if isinstance(bins, (int, np.integer)):
        if mag.size == 0:
            return np.array([1.0, 2.0]), np.array([math.nan]), np.array([0])
        lo, hi = float(mag.min()), float(mag.max())
        edges = np.geomspace(lo, hi * (1 + 1e-12) if hi > lo else lo * 2, int(bins) + 1)
    else:
        edges = np.asarray(bins, dtype=np.float64)
    idx = np.clip(np.searchsorted(edges, mag, side="right") - 1, 0, edges.size - 2)
    inside = (mag >= edges[0]) & (mag <= edges[-1])
    cnt = np.bincount(idx[inside], minlength=edges.size - 1)
    ss = np.bincount(idx[inside], weights=err[inside] ** 2, minlength=edges.size - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rms = np.sqrt(ss / cnt)
    return edges, np.where(cnt > 0, rms, np.nan), cnt


# ---------------------------------------------------------------------------------------------------------
# §2 breakdowns
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Breakdown:
    """Per-group error statistics: arrays with one entry per channel (shape (n,)) or per block (the input's
    shape with ``axis`` reduced to the number of blocks, the layout of a block scheme's scales)."""

    kind: str  # "channel" or "block"
    axis: int
    block_size: int | None
    count: np.ndarray
    mse: np.ndarray
    sqnr_db: np.ndarray
    max_abs_error: np.ndarray
    mean_error: np.ndarray
    amax: np.ndarray

    def worst(self, metric: str = "sqnr_db") -> float:
        """The worst group: the minimum SQNR, or the maximum of an error metric (NaN groups skipped)."""
        a = np.asarray(getattr(self, metric), dtype=np.float64)
        a = a[~np.isnan(a)]
        if a.size == 0:
            return math.nan
        return float(a.min() if metric == "sqnr_db" else a.max())


def _group_stats(xg: np.ndarray, yg: np.ndarray, valid: np.ndarray) -> dict[str, np.ndarray]:
    """Reductions over the last axis of grouped arrays, using only ``valid`` elements."""
    contiguous = all(a.flags.c_contiguous for a in (xg, yg, valid))
    if contiguous and valid.all():  # the same arrays (and memory order) np.where would build, without the masks
        e, xs = yg - xg, xg
        cnt = np.full(xg.shape[:-1], xg.shape[-1], dtype=np.int64)
    else:
        e = np.where(valid, yg - xg, 0.0)
        xs = np.where(valid, xg, 0.0)
        cnt = valid.sum(axis=-1)
    sig = np.sum(xs * xs, axis=-1)
    noise = np.sum(e * e, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mse_ = noise / cnt
        mean_ = np.sum(e, axis=-1) / cnt
        sq = 10.0 * np.log10(sig / noise)
    sq = np.where(noise == 0, np.inf, np.where(sig == 0, -np.inf, sq))
    sq = np.where(cnt == 0, np.nan, sq)
    return {"count": cnt, "mse": np.where(cnt > 0, mse_, np.nan), "sqnr_db": sq,
            "max_abs_error": np.max(np.abs(e), axis=-1, initial=0.0),
            "mean_error": np.where(cnt > 0, mean_, np.nan), "amax": np.max(np.abs(xs), axis=-1, initial=0.0)}


def channel_breakdown(x: object, y: object, axis: int = 0) -> Breakdown:
    """Error statistics per index of ``axis`` (default 0: the output channels of a (out, in) weight)."""
    xa, ya, m = _pair(x, y)
    if xa.ndim == 0:
        raise QrefError("a per-channel breakdown needs an array with at least one dimension")
    ax = normalize_axis(axis, xa.ndim)
    n = xa.shape[ax]

    def g(a: np.ndarray) -> np.ndarray:
        return np.moveaxis(a, ax, 0).reshape(n, -1)

    st = _group_stats(g(xa), g(ya), g(m))
    return Breakdown("channel", ax, None, **st)


def block_view(a: object, block_size: int, axis: int = -1, pad: float = 0.0) -> np.ndarray:
    """``a`` split into blocks of ``block_size`` consecutive elements along ``axis``: shape (*other dims in
    order, n_blocks, block_size) with ``axis`` moved last (a short last block padded with ``pad``). This is the
    blocking of the block family (block.md §2) and of lookup schemes with an axis."""
    arr = np.asarray(a)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise QrefError(f"block_size must be an integer >= 1, got {block_size!r}")
    ax = normalize_axis(axis, arr.ndim)
    moved = np.moveaxis(arr, ax, -1)
    L = moved.shape[-1]
    k = int(block_size)
    extra = (-L) % k
    if extra:
        fill = np.full((*moved.shape[:-1], extra), pad, dtype=np.result_type(moved.dtype, np.asarray(pad).dtype))
        moved = np.concatenate([moved.astype(fill.dtype), fill], axis=-1)
    return moved.reshape(*moved.shape[:-1], -1, k)


def block_breakdown(x: object, y: object, block_size: int = 32, axis: int = -1) -> Breakdown:
    """Error statistics per block of ``block_size`` consecutive elements along ``axis`` (default 32 along the
    last axis, the OCP MX block). Arrays have the input's shape with ``axis`` replaced by the block count."""
    xa, ya, m = _pair(x, y)
    if xa.ndim == 0:
        xa, ya, m = xa.reshape(1), ya.reshape(1), m.reshape(1)
    ax = normalize_axis(axis, xa.ndim)
    st = _group_stats(block_view(xa, block_size, ax), block_view(ya, block_size, ax),
                      block_view(m, block_size, ax, pad=False).astype(bool))
    st = {k: np.moveaxis(v, -1, ax) for k, v in st.items()}
    return Breakdown("block", ax, int(block_size), **st)


# ---------------------------------------------------------------------------------------------------------
# §3 saturation, clipping, flushing (generic over scheme families)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Counts:
    """Element counts of a quantized tensor (analysis.md §3).

    saturated: the element's code is an extreme level of the element format (its largest or smallest finite
        value: +-max of a float format, lo/hi of integer storage, the first/last table entry). None when the
        element format is not known (formats over 16 bits).
    clipped: saturated and the input lies outward of the extreme level by more than half the spacing to the
        next level inward: outside the interval that would round to it if the grid went on (the range was too
        small, not just rounding).
    flushed: x finite and nonzero, y == 0.
    nonfinite: x finite, y NaN or Inf.  unspecified: elements the scheme marks unspecified.
    """

    n: int
    saturated: int | None
    clipped: int | None
    flushed: int
    nonfinite: int
    unspecified: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _element_table(scheme: Scheme) -> tuple[np.ndarray, bool] | None:
    """(value of each code index, codes_are_values) of the scheme's element codes, or None if unknown."""
    fam = getattr(scheme, "family", None)
    fmt: Any = None
    if fam == "cast":
        fmt = getattr(scheme, "format", None)
    elif fam == "uniform":
        fmt = getattr(scheme, "storage", None)
        if isinstance(fmt, IntFormat):
            return np.empty(0), True  # uniform integer codes are the storage values themselves
    elif fam == "block":
        fmt = getattr(scheme, "element", None)
    elif fam == "lookup":
        table = getattr(scheme, "table", None)
        return (np.asarray(table.values, dtype=np.float64), False) if table is not None else None
    if isinstance(fmt, (FloatFormat, IntFormat)) and fmt.bits <= 16:
        return np.asarray(fmt.values, dtype=np.float64), False
    return None


def _lut(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """table[codes] for integer codes within the table (chunked gather, no intp copy of the codes)."""
    from .core.decode import _gather_codes

    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise QrefError(f"element codes must be integers, got dtype {c.dtype}")
    if c.size and not (c.dtype.kind == "u" and (1 << (8 * c.dtype.itemsize)) <= table.size):
        lo, hi = int(c.min()), int(c.max())
        if lo < 0 or hi >= table.size:
            raise QrefError(f"element codes must lie in [0, {table.size}); found values in [{lo}, {hi}]")
    return _gather_codes(c, table)


def counts(x: object, q: QArray, y: object | None = None) -> Counts:
    """Saturation / clipping / flush / overflow counts of ``q = scheme.quantize(x)`` (analysis.md §3).

    ``y`` (optional) is q.dequantize(float64) if already computed. Clipping needs the outward direction of an
    extreme code; it is measured by dequantizing once more with every saturated code moved one level inward
    (this works for any scheme, including affine groups with negative scales); that spacing also gives the
    half-step threshold of ``clipped``."""
    xa = _f64(x)
    ya = _f64(q.dequantize(dtype=np.float64) if y is None else y)
    fin = np.isfinite(xa)
    unspec = np.zeros(xa.shape, bool) if q.unspecified is None else np.asarray(q.unspecified, bool)
    ok = fin & ~unspec
    flushed = int(np.count_nonzero(ok & (xa != 0) & (ya == 0)))
    nonfinite = int(np.count_nonzero(ok & ~np.isfinite(ya)))
    info = _element_table(q.scheme)
    sat: int | None = None
    clip: int | None = None
    if info is not None:
        codes = np.asarray(q.codes)
        table, are_values = info
        if are_values:
            st = q.scheme.storage  # type: ignore[attr-defined]
            lo, hi = st.lo, st.hi
            if getattr(getattr(q.scheme, "arithmetic", None), "narrow_symmetric", False):
                lo = -hi
            ev = codes.astype(np.int64)
            top, bot = ev == hi, (ev == lo) & (lo != hi)
            inner = np.where(top, hi - 1, np.where(bot, lo + 1, ev))
        else:
            finite = np.isfinite(table)
            levels = np.unique(table[finite])
            lo, hi = float(levels[0]), float(levels[-1])
            # per code (a lookup table over the code space instead of per-element value comparisons)
            is_top, is_bot = table == hi, (table == lo) & (lo != hi)
            # the code of the next level inward (first code holding that value)
            idx = np.arange(table.size)
            up = levels[-2] if levels.size > 1 else levels[-1]
            dn = levels[1] if levels.size > 1 else levels[0]
            code_up = int(idx[finite & (table == up)][0])
            code_dn = int(idx[finite & (table == dn)][0])
            # float formats: keep the sign bit of the saturated code (the inward neighbour of -max is -(max-1ulp))
            inward = np.where(is_top, code_up, np.where(is_bot, code_dn, idx))
            top, bot = _lut(is_top, codes), _lut(is_bot, codes)
            inner = _lut(inward.astype(codes.dtype), codes)
        sat_mask = (top | bot) & ok
        sat = int(np.count_nonzero(sat_mask))
        if sat:
            q_in = dataclasses.replace(q, codes=inner.astype(codes.dtype))
            y_in = _f64(q_in.dequantize(dtype=np.float64))
            with np.errstate(invalid="ignore"):
                step = ya - y_in  # outward step: the spacing to the next level inward, signed
                beyond = (xa - ya) * np.sign(step) > np.abs(step) / 2
            clip = int(np.count_nonzero(sat_mask & beyond))
        else:
            clip = 0
    return Counts(n=int(xa.size), saturated=sat, clipped=clip, flushed=flushed, nonfinite=nonfinite,
                  unspecified=int(np.count_nonzero(unspec)))


# ---------------------------------------------------------------------------------------------------------
# §4 scales of a QArray
# ---------------------------------------------------------------------------------------------------------
def scale_values(q: QArray) -> np.ndarray:
    """The real value of every scale of ``q`` as float64 (E8M0 / E4M3 scale bytes decoded; NaN scale codes
    give NaN). Block schemes: shape of the input with the block axis replaced by the block count."""
    if q.scales is None:
        raise QrefError(f"{getattr(q.scheme, 'name', type(q.scheme).__name__)} has no scales (a plain cast)")
    s = np.asarray(q.scales)
    fmt = getattr(q.scheme, "scale_format", None)
    if isinstance(fmt, FloatFormat) and s.dtype.kind == "u":
        from .core.decode import decode

        return decode(s, fmt, dtype=np.float64)
    return s.astype(np.float64)


def scale_exponents(q: QArray) -> np.ndarray:
    """log2 of |scale| for every scale of ``q`` (integers for E8M0 MX scales: byte - 127); -inf for a zero
    scale, NaN for a NaN scale."""
    v = np.abs(scale_values(q))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(v)


def format_summary(names: Iterable[str | Format]) -> Table:
    """One row per format: bits, E, M, bias, the largest finite value, the smallest normal and positive values,
    the dynamic range in binades log2(max / min positive), the count of finite values and the NaN / Inf
    encodings (elements.md §1). Integer formats: lo, hi and 2^bits values."""
    rows: list[dict[str, Any]] = []
    for n in names:
        f = get_format(n)
        if isinstance(f, FloatFormat):
            finite = None
            if f.bits <= 16:
                v = np.asarray(f.values)
                finite = int(np.count_nonzero(np.isfinite(v)))
            mx, mn, mnorm = float(f.max_value), float(f.min_value), float(f.min_normal)
            rows.append({"format": f.name, "bits": f.bits, "E": f.exponent_bits, "M": f.mantissa_bits,
                         "bias": f.bias, "max": mx, "min_normal": mnorm, "min_positive": mn,
                         "binades": math.log2(float(f.max_value / f.min_value)), "finite_values": finite,
                         "nan": f.nan, "inf": f.inf})
        else:
            rows.append({"format": f.name, "bits": f.bits, "E": None, "M": None, "bias": None, "max": float(f.hi),
                         "min_normal": None, "min_positive": 1.0, "binades": math.log2(f.hi) if f.hi > 0 else None,
                         "finite_values": f.hi - f.lo + 1, "nan": "none", "inf": "none"})
    return Table(rows, ("format", "bits", "E", "M", "bias", "max", "min_normal", "min_positive", "binades",
                        "finite_values", "nan", "inf"))


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


# ---------------------------------------------------------------------------------------------------------
# §5 compact scheme syntax and recipes
# ---------------------------------------------------------------------------------------------------------
_SPEC_RE = re.compile(r"^\s*(?P<name>[^:<\s]+(?:<[^>]*>)?)\s*(?::(?P<opts>.*))?$")


def _value(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


@dataclass(frozen=True)
class Recipe:
    """A scheme to be built from the data (analysis.md §5): ``name`` plus ``options``; ``build(x)`` gives
    (scheme, quantize keyword arguments). ``label`` names the row in a comparison (default: the spec text)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()
    label: str = ""

    @property
    def opts(self) -> dict[str, Any]:
        return dict(self.options)

    def build(self, x: object) -> tuple[Scheme, dict[str, Any]]:
        """(scheme, quantize kwargs) for input ``x`` (calibrating scales where the recipe asks for it)."""
        from .schemes.base import scheme as make
        from .schemes.base import scheme_names

        opts = self.opts
        if self.name in scheme_names():
            axis = opts.pop("axis", None)
            s = make(self.name, **opts)
            if axis is None:
                return s, {}
            if getattr(s, "family", None) == "block":
                return s, {"axis": axis}
            return make(self.name, axis=axis, **opts), {}
        fmt = get_format(self.name)
        if isinstance(fmt, IntFormat):
            return _int_recipe(x, fmt, opts), {}
        if "block_size" in opts:
            axis = opts.pop("axis", None)
            return make(fmt, **opts), ({} if axis is None else {"axis": axis})
        if "scale" in opts or "axis" in opts:
            return _float_scaled_recipe(x, fmt, opts), {}
        return make(fmt, **opts), {}

    def quantize(self, x: object) -> QArray:
        s, kw = self.build(x)
        return s.quantize(x, **kw)


def _int_recipe(x: object, fmt: IntFormat, opts: dict[str, Any]) -> Scheme:
    """Integer storage: qref.calibrate(x, fmt, method, axis=, block_size=, formula=).scheme(profile, ...); with
    scale=<number> (and zero_point=, default 0): that fixed uniform scheme, no calibration."""
    from .calibrate import calibrate
    from .schemes.base import scheme as make

    if "scale" in opts:
        sc = opts.pop("scale")
        if not isinstance(sc, (int, float)) or isinstance(sc, bool):
            raise QrefError(f"scale={sc!r}: an integer format takes a number, or no scale (calibrated from x)")
        return make(fmt, scale=float(sc), zero_point=opts.pop("zero_point", 0),
                    profile=opts.pop("profile", "stablehlo"), **opts)

    cal_keys = ("method", "axis", "block_size", "formula", "percentile", "percentile_method", "symmetric",
                "expressed")
    cal = {k: opts.pop(k) for k in cal_keys if k in opts}
    if "group_size" in opts:
        cal["block_size"] = opts.pop("group_size")
    if "block_size" in cal and "axis" not in cal and isinstance(cal["block_size"], int):
        cal["axis"] = -1
    profile = opts.pop("profile", "stablehlo")
    return calibrate(x, fmt, **cal).scheme(profile=profile, **opts)


def _absmax_fast(arr: np.ndarray, axis: int | None) -> np.ndarray | None:
    """max |x| (float64) per tensor or per index of axis as max(max x, -min x) on a float32/float64 array
    without temporaries; None (use the general formula) for other dtypes, empty groups or non-finite values."""
    if arr.dtype not in (np.float32, np.float64) or arr.size == 0 or (arr.ndim == 0 and axis is not None):
        return None
    red = None if axis is None else tuple(i for i in range(arr.ndim) if i != normalize_axis(axis, arr.ndim))
    with np.errstate(invalid="ignore"):
        lo, hi = np.min(arr, axis=red), np.max(arr, axis=red)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return None
    return np.maximum(np.asarray(hi, np.float64), -np.asarray(lo, np.float64))


def _float_scaled_recipe(x: object, fmt: FloatFormat, opts: dict[str, Any]) -> Scheme:
    """Float element with a scale: s = fl32(amax / max(fmt)) per tensor or per index of ``axis`` (scale=absmax,
    the default when axis is given), or a fixed scale=<number>; built as the uniform float-storage scheme
    (ONNX QuantizeLinear to fp8/fp4 with saturate=1: profile "onnx" unless given)."""
    from .schemes.base import scheme as make

    mode = opts.pop("scale", "absmax")
    axis = opts.pop("axis", None)
    profile = opts.pop("profile", "onnx")
    if isinstance(mode, (int, float)) and not isinstance(mode, bool):
        scale: Any = np.float32(mode)
    elif mode == "absmax":
        amax = _absmax_fast(np.asarray(x), axis)
        if amax is None:
            arr = _f64(x)
            finite = np.where(np.isfinite(arr), np.abs(arr), 0.0)
            if axis is None:
                amax = np.asarray(finite.max() if finite.size else 0.0)
            else:
                ax = normalize_axis(axis, arr.ndim)
                amax = np.moveaxis(finite, ax, 0).reshape(arr.shape[ax], -1).max(axis=1)
        s = amax / float(fmt.max_value)
        s = np.where(s > 0, s, 1.0)  # an all-zero group gets scale 1 (as qref.calibrate)
        scale = np.maximum(s.astype(np.float32), np.finfo(np.float32).smallest_subnormal)
    else:
        raise QrefError(f"scale={mode!r}: use scale=absmax (per tensor, or per index of axis=) or a number")
    return make(fmt, scale=scale, axis=axis, profile=profile, **opts)


def parse_scheme(text: str) -> Recipe:
    """Parse the compact scheme syntax ``NAME[:KEY=VALUE[,KEY=VALUE...]]`` (analysis.md §5).

    NAME: a scheme name (mxfp4, mxfp8_e4m3, mxfp6_e2m3, nvfp4, mlx_affine, nf4, af4, fp4_bnb...) or a format
    (float8_e4m3fn, float8_e5m2, int8, int4, int8<-127:127>...). VALUE: an int, float, true/false, none, or a
    bare word. ``label=TEXT`` names the table row. Examples: "float8_e4m3fn" (plain cast), "float8_e4m3fn:axis=0"
    (per-channel absmax-scaled FP8), "int8:axis=0", "int4:block_size=128", "mxfp4:scale_rule=rceil",
    "nf4:block_size=64,profile=bitsandbytes".
    """
    if not isinstance(text, str):
        raise QrefError(f"a scheme spec is a string such as 'int8:axis=0', got {type(text).__name__}")
    m = _SPEC_RE.match(text)
    if not m or not m["name"]:
        raise QrefError(f"cannot parse scheme spec {text!r}; expected NAME[:KEY=VALUE,...] e.g. 'int8:axis=0'")
    name = m["name"]
    opts: list[tuple[str, Any]] = []
    label = text.strip()
    if m["opts"] is not None and m["opts"].strip():
        for part in m["opts"].split(","):
            if "=" not in part:
                raise QrefError(f"scheme spec {text!r}: option {part.strip()!r} is not KEY=VALUE")
            k, v = part.split("=", 1)
            k = k.strip()
            if not k.isidentifier():
                raise QrefError(f"scheme spec {text!r}: bad option name {k!r}")
            if k == "label":
                label = v.strip()
            else:
                opts.append((k, _value(v)))
    _check_name(name)
    return Recipe(name, tuple(opts), label)


def _check_name(name: str) -> None:
    from .schemes.base import scheme_names

    if name in scheme_names():
        return
    try:
        get_format(name)
    except QrefError:
        from .formats import formats

        raise unknown_name("scheme or format", name, [*scheme_names(), *formats.all_names()]) from None


# ---------------------------------------------------------------------------------------------------------
# §6 compare
# ---------------------------------------------------------------------------------------------------------
SchemeLike = Scheme | Recipe | str | Callable[[np.ndarray], Scheme]


def _bits_per_element(q: QArray) -> float | None:
    """Storage bits per element: element bits + side data (scales, zero points, biases, global scale) spread
    over the elements. Scale bytes count 8, float side arrays their dtype's width, uniform scales the
    expressed type's width; zero points count only when some are nonzero."""
    s = q.scheme
    fam = getattr(s, "family", None)
    n = max(int(np.asarray(q.codes).size), 1)
    if fam == "cast":
        return float(s.format.bits)  # type: ignore[attr-defined]
    if fam == "uniform":
        ex = s.expressed.bits  # type: ignore[attr-defined]
        side = len(s.scales) * ex  # type: ignore[attr-defined]
        if any(z != 0 for z in s.zero_points):  # type: ignore[attr-defined]
            side += len(s.zero_points) * s.storage.bits  # type: ignore[attr-defined]
        return s.storage.bits + side / n  # type: ignore[attr-defined]
    if fam == "block":
        elem = s.element.bits  # type: ignore[attr-defined]
    elif fam == "lookup":
        elem = s.table.storage_format.bits  # type: ignore[attr-defined]
    else:
        return None
    side = 0
    dq = q.meta.get("double_quant")
    arrays = [q.zero_points, q.biases, q.global_scale]
    if dq is not None and hasattr(dq, "codes"):
        arrays += [np.asarray(dq.codes), getattr(dq, "scales", None), getattr(dq, "offset", None)]
    else:
        arrays.append(q.scales)
    for a in arrays:
        if a is not None:
            a = np.asarray(a)
            side += a.size * a.dtype.itemsize * 8
    return elem + side / n


@dataclass
class Result:
    """Everything compare() computed for one scheme; ``y`` is the dequantized tensor (float64)."""

    label: str
    scheme: Scheme
    qarray: QArray
    y: np.ndarray
    metrics: Metrics
    counts: Counts
    channels: Breakdown | None
    blocks: Breakdown | None
    bits_per_element: float | None

    def row(self) -> dict[str, Any]:
        m, c = self.metrics, self.counts
        return {
            "scheme": self.label,
            "family": getattr(self.scheme, "family", "?"),
            "bits": self.bits_per_element,
            "sqnr_db": m.sqnr_db,
            "mse": m.mse,
            "rmse": m.rmse,
            "max_abs": m.max_abs_error,
            "max_rel": m.max_rel_error,
            "bias": m.mean_error,
            "cosine": m.cosine,
            "kl": m.kl,
            "worst_channel_db": None if self.channels is None else self.channels.worst(),
            "worst_block_db": None if self.blocks is None else self.blocks.worst(),
            "saturated": c.saturated,
            "clipped": c.clipped,
            "flushed": c.flushed,
            "nonfinite": c.nonfinite,
            "unspecified": c.unspecified,
        }


COLUMNS = ("scheme", "family", "bits", "sqnr_db", "mse", "rmse", "max_abs", "max_rel", "bias", "cosine", "kl",
           "worst_channel_db", "worst_block_db", "saturated", "clipped", "flushed", "nonfinite", "unspecified")


def _fmt_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0:
            return "0"
        if v == int(v) and abs(v) < 1e6:
            return str(int(v))
        if len(repr(v)) <= 8:
            return repr(v)
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(v)


@dataclass
class Table:
    """A plain table: ``rows`` (one dict per row, keys = ``columns``). ``as_dict()`` gives {column: [values]},
    ``to_pandas()`` a DataFrame (pandas optional), ``to_text()`` / ``to_markdown()`` / ``to_csv()`` formatted
    text; ``str(table)`` is ``to_text()`` and notebooks render it as markdown. The first column is the key."""

    rows: list[dict[str, Any]]
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = tuple(self.rows[0]) if self.rows else ()

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def row(self, key: str) -> dict[str, Any]:
        """The row whose first column equals ``key``."""
        k0 = self.columns[0]
        for r in self.rows:
            if r[k0] == key:
                return r
        raise unknown_name("row", key, [str(r[k0]) for r in self.rows])

    def column(self, name: str) -> list[Any]:
        if name not in self.columns:
            raise unknown_name("column", name, self.columns)
        return [r.get(name) for r in self.rows]

    def as_dict(self) -> dict[str, list[Any]]:
        return {c: self.column(c) for c in self.columns}

    def _like(self, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> Table:
        return dataclasses.replace(self, rows=rows, columns=columns)

    def select(self, *columns: str) -> Table:
        """The same rows with only ``columns`` (in that order)."""
        for c in columns:
            if c not in self.columns:
                raise unknown_name("column", c, self.columns)
        return self._like([{c: r.get(c) for c in columns} for r in self.rows], tuple(columns))

    def sorted(self, by: str, descending: bool = True) -> Table:
        """Rows ordered by column ``by`` (None and NaN last)."""
        if by not in self.columns:
            raise unknown_name("column", by, self.columns)
        bad = [r for r in self.rows if r.get(by) is None or (isinstance(r.get(by), float) and math.isnan(r[by]))]
        good = [r for r in self.rows if not any(r is b for b in bad)]
        return self._like(sorted(good, key=lambda r: r[by], reverse=descending) + bad, self.columns)

    def to_pandas(self) -> Any:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise QrefError("to_pandas() needs pandas (pip install pandas); as_dict() gives plain columns") from None
        return pd.DataFrame(self.as_dict(), columns=list(self.columns))

    def _cells(self) -> list[list[str]]:
        return [[_fmt_cell(r.get(c)) for c in self.columns] for r in self.rows]

    def to_text(self) -> str:
        cells = self._cells()
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(self.columns, widths)))
        out = [line, "  ".join("-" * w for w in widths)]
        for row in cells:
            out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
        return "\n".join(out)

    def to_markdown(self) -> str:
        out = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(row) + " |" for row in self._cells()]
        return "\n".join(out)

    def to_csv(self) -> str:
        def cell(v: Any) -> str:
            return "" if v is None else repr(v) if isinstance(v, float) else str(v)

        return "\n".join([",".join(self.columns)] + [",".join(cell(r.get(c)) for c in self.columns)
                                                       for r in self.rows])

    def __str__(self) -> str:
        return self.to_text()

    def _repr_markdown_(self) -> str:  # notebooks render the table
        return self.to_markdown()


@dataclass
class Comparison(Table):
    """compare()'s table: one row per scheme (columns ``COLUMNS``) and ``details`` (label -> Result)."""

    details: dict[str, Result] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = COLUMNS


def _as_recipe(item: SchemeLike, x: np.ndarray) -> tuple[str, Scheme, dict[str, Any]]:
    if isinstance(item, str):
        item = parse_scheme(item)
    if isinstance(item, Recipe):
        s, kw = item.build(x)
        return item.label or item.name, s, kw
    if isinstance(item, Scheme):
        name = getattr(item, "name", None) or type(item).__name__
        prof = getattr(item, "profile", None)
        return (f"{name}[{prof}]" if prof else str(name)), item, {}
    if callable(item):
        s = item(x)
        if not isinstance(s, Scheme):
            raise QrefError(f"a scheme factory must return a Scheme, got {type(s).__name__}")
        return _as_recipe(s, x)
    raise QrefError(f"cannot compare {item!r}: give a Scheme, a spec string such as 'int8:axis=0', a Recipe or "
                    "a callable x -> Scheme")


def evaluate(x: object, item: SchemeLike, *, label: str | None = None,
             quantize_kwargs: Mapping[str, Any] | None = None, channel_axis: int | None = 0,
             block_size: int | None = 32, block_axis: int = -1, bins: int | Sequence[float] = 128,
             smoothing: float = 0.5, progress: bool = False) -> Result:
    """Quantize ``x`` with one scheme and compute its metrics, counts and breakdowns (one row of compare).
    quantize_kwargs: extra arguments of ``scheme.quantize`` (e.g. axis= of a block scheme). progress: a tqdm
    bar on stderr over the six stages (build, quantize, dequantize, metrics, counts, breakdowns)."""
    from .sweep import progress_bar

    arr = np.asarray(x)
    if label is not None or isinstance(item, str):
        text = label or item
    else:
        text = (item.label or item.name) if isinstance(item, Recipe) else type(item).__name__
    bar = progress_bar(len(EVALUATE_STAGES), str(text), "stage", progress, leave=True)

    def stage(name: str) -> None:
        if bar is not None:
            bar.set_postfix_str(name, refresh=False)
            bar.update(1)

    try:
        lab, s, kw = _as_recipe(item, arr)
        stage("built")
        q = s.quantize(arr, **{**kw, **(quantize_kwargs or {})})
        stage("quantized")
        y = np.asarray(q.dequantize(dtype=np.float64), dtype=np.float64)
        stage("dequantized")
        unspec = None if q.unspecified is None else np.asarray(q.unspecified, bool)
        keep = None if unspec is None or not unspec.any() else ~unspec
        xa = _f64(arr)
        m = metrics(xa, y, where=keep, bins=bins, smoothing=smoothing)
        stage("metrics")
        c = counts(xa, q, y)
        stage("counts")
        yk = y if keep is None else np.where(keep, y, np.nan)  # unspecified elements are left out of breakdowns
        ch = channel_breakdown(xa, yk, channel_axis) if channel_axis is not None and xa.ndim >= 2 else None
        bl = block_breakdown(xa, yk, block_size, block_axis) if block_size is not None and xa.ndim >= 1 else None
        stage("done")
    finally:
        if bar is not None:
            bar.close()
    return Result(label or lab, s, q, y, m, c, ch, bl, _bits_per_element(q))


EVALUATE_STAGES = ("built", "quantized", "dequantized", "metrics", "counts", "done")


def compare(x: object, schemes: Iterable[SchemeLike] | Mapping[str, SchemeLike], *, channel_axis: int | None = 0,
            block_size: int | None = 32, block_axis: int = -1, bins: int | Sequence[float] = 128,
            smoothing: float = 0.5, progress: bool = False) -> Comparison:
    """One table row per scheme: metrics (§1), worst channel / block SQNR (§2), counts (§3), bits per element.

    schemes: Scheme objects, compact spec strings (``"int8:axis=0"``, ``"mxfp4"``, ``"nf4:block_size=64"``,
    see ``parse_scheme``), Recipes, callables x -> Scheme, or a mapping label -> any of those.
    channel_axis: axis of the per-channel breakdown (default 0; None: none; 1-D input: none).
    block_size / block_axis: the per-block breakdown's blocks (default 32 consecutive elements along the last
    axis, whatever the scheme's own blocks; None: none). bins / smoothing: KL histogram options (§1).
    Elements a scheme marks unspecified are left out of its metrics and counted in ``unspecified``.
    progress: one tqdm bar per scheme on stderr (``qref compare`` turns it on at a terminal).
    """
    arr = np.asarray(x)
    items = list(schemes.items()) if isinstance(schemes, Mapping) else [(None, s) for s in schemes]
    if not items:
        raise QrefError("compare needs at least one scheme")
    rows: list[dict[str, Any]] = []
    details: dict[str, Result] = {}
    for lab, item in items:
        r = evaluate(arr, item, label=lab, channel_axis=channel_axis, block_size=block_size,
                     block_axis=block_axis, bins=bins, smoothing=smoothing, progress=progress)
        base, k = r.label, 2
        while r.label in details:
            r.label = f"{base}#{k}"
            k += 1
        details[r.label] = r
        rows.append(r.row())
    return Comparison(rows, COLUMNS, details)
