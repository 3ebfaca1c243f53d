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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import QrefError
from ..formats import Format, IntFormat, get_format


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
    m = np.isfinite(xa)
    m &= np.isfinite(ya)  # in place: one mask-sized temporary less
    return xa, ya, m


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
        smoothing: float, a_counts: dict[Any, np.ndarray] | None = None) -> float:
    """kl_divergence on selected finite pairs. ``a_counts``: histograms of this same ``a`` already counted,
    by (bins, first edge, last edge) (compare() evaluates one x under several schemes; integer counts)."""
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
        key = (int(bins), float(edges[0]), float(edges[-1]))
        pc = None if a_counts is None else a_counts.get(key)
        if pc is None:
            pc = np.histogram(a, int(bins), range=(edges[0], edges[-1]))[0]
            if a_counts is not None:
                a_counts[key] = pc
        p = pc.astype(np.float64) + smoothing
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


#: elements per chunk of the metrics (float64 temporaries of 512 KiB each)
CHUNK = 1 << 16


def pairwise_split(n: int) -> int:
    """Where numpy's pairwise summation of n > 128 float elements splits them (numpy/_core/src/umath/
    loops_utils.h.src, ``pairwise_sum``: n2 = n / 2 rounded down to a multiple of 8): np.add.reduce of a
    contiguous float64 array is 0.0 + pairwise_sum of all of it, so sums of the two parts, each taken by
    np.add.reduce and added, give the whole array's sum bit for bit (a zero sum's sign aside, which the final
    0.0 + makes +0.0 either way; tests/test_perf_compare.py holds it to np.sum)."""
    n2 = n // 2
    return n2 - n2 % 8


def _chunk_sums(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float, float]:
    """(sum e^2, sum e, sum a^2, max |e|, max |e| / |a| over a != 0 (0 if none)) with e = b - a, for 1-D
    float64 a and b: every sum equal to np.sum of the whole array (numpy's pairwise tree, split by
    ``pairwise_split`` down to chunks of at most CHUNK elements), every temporary a chunk."""
    n = a.size
    size = min(n, CHUNK)
    e, t = np.empty(size), np.empty(size)
    maxima = [0.0, 0.0]

    def leaf(lo: int, hi: int) -> tuple[float, float, float]:
        k = hi - lo
        ec, tc = e[:k], t[:k]
        ac = a[lo:hi]
        np.subtract(b[lo:hi], ac, out=ec)
        se = float(np.add.reduce(ec))
        np.multiply(ec, ec, out=tc)
        see = float(np.add.reduce(tc))
        np.abs(ec, out=ec)
        maxima[0] = max(maxima[0], float(np.max(ec)))
        np.abs(ac, out=tc)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(ec, tc, out=ec)  # a == 0 gives Inf or NaN: left out below
        ec[tc == 0] = 0.0  # |e| / |a| >= 0: a zero changes no maximum
        maxima[1] = max(maxima[1], float(np.max(ec)))
        np.multiply(ac, ac, out=tc)
        return see, se, float(np.add.reduce(tc))

    def tree(lo: int, hi: int) -> tuple[float, float, float]:
        if hi - lo <= CHUNK:
            return leaf(lo, hi)
        mid = lo + pairwise_split(hi - lo)
        x, y = tree(lo, mid), tree(mid, hi)
        return x[0] + y[0], x[1] + y[1], x[2] + y[2]

    try:
        see, se, saa = tree(0, n)
    finally:
        tree = None  # type: ignore[assignment]  # break the closure's cycle: a and b are freed on return
    return see, se, saa, maxima[0], maxima[1]


def _finite_counts(xa: np.ndarray, ya: np.ndarray) -> tuple[int, int]:
    """(finite elements of xa, finite pairs) of two C-contiguous float64 arrays of one shape, counted CHUNK
    elements at a time."""
    xf, yf = xa.reshape(-1), ya.reshape(-1)
    fx = fp = 0
    for lo in range(0, xf.size, CHUNK):
        mx = np.isfinite(xf[lo:lo + CHUNK])
        fx += int(np.count_nonzero(mx))
        mx &= np.isfinite(yf[lo:lo + CHUNK])
        fp += int(np.count_nonzero(mx))
    return fx, fp


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
            where: object = None, bins: int | Sequence[float] = 128, smoothing: float = 0.5,
            _x_counts: dict[Any, np.ndarray] | None = None) -> Metrics:
    """All §1 metrics at once. fmt (optional): also the max / mean error in ulps of fmt (times scale).
    where (optional bool mask): only these elements (e.g. ``~qarray.unspecified``). bins, smoothing: for KL.
    _x_counts: a dict kept by the caller for one x across calls: x's KL histograms are counted once per set of
    edges (used only when every element of x takes part)."""
    xa, ya = _f64(x), _f64(y)
    if xa.shape != ya.shape:
        raise QrefError(f"x and y must have the same shape, got {xa.shape} and {ya.shape}")
    sc = np.broadcast_to(_f64(scale), xa.shape)
    m: np.ndarray | None = None
    if where is None and xa.flags.c_contiguous and ya.flags.c_contiguous:
        # finite x with non-finite y: the finite x less the finite pairs, counted in chunks; the pair mask only
        # when some pair is not finite (memory: no mask of the whole input, performance.md §6.2)
        fx, fp = _finite_counts(xa, ya)
        nonfinite, every = fx - fp, fp == xa.size
        if not every:
            m = np.isfinite(xa)
            m &= np.isfinite(ya)
    else:
        m = np.isfinite(xa)
        m &= np.isfinite(ya)
        if where is not None:
            w = np.broadcast_to(np.asarray(where, dtype=bool), xa.shape)
            xa, ya, m, sc = xa[w], ya[w], m[w], sc[w]
        nonfinite = int(np.count_nonzero(np.isfinite(xa))) - int(np.count_nonzero(m))
        every = bool(m.all())
    a, b = (xa.reshape(-1), ya.reshape(-1)) if every else (xa[m], ya[m])
    n = int(a.size)
    mu, mu_mean = None, None
    if fmt is not None:
        u = ulp_error(a, b, fmt, sc.reshape(-1) if every else sc[m])
        mu = float(np.max(u)) if n else 0.0
        mu_mean = float(np.mean(u)) if n else math.nan
    # the same expressions as mse / sqnr_db / max_abs_error / ... on (a, b), evaluated once (e = b - a), in
    # cache-sized chunks whose sums combine in numpy's own pairwise order (_chunk_sums)
    if n:
        see, se, saa, max_abs, max_rel = _chunk_sums(a, b)
        mse_ = see / n
        mean_e = se / n
        sqnr = _sqnr(saa, see)
    else:
        mse_, max_rel, max_abs, mean_e, sqnr = math.nan, 0.0, 0.0, math.nan, math.nan
    return Metrics(
        n=n, mse=mse_, rmse=math.sqrt(mse_) if n else math.nan,
        sqnr_db=sqnr,
        max_abs_error=max_abs, max_rel_error=max_rel, mean_error=mean_e,
        cosine=_cosine(a, b), kl=_kl(a, b, bins, None, smoothing, _x_counts if where is None and every else None),
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


__all__ = ["CHUNK", "Metrics", "cosine_similarity", "error_by_magnitude", "kl_divergence", "max_abs_error",
           "max_rel_error", "mean_error", "metrics", "mse", "pairwise_split", "rmse", "sqnr_db", "ulp", "ulp_error"]
