"""Calibration: scales and zero points from data (spec: docs/spec/uniform.md §5).

``qref.calibrate(x, storage, method="absmax" | "minmax" | "percentile", axis=..., block_size=...,
formula=...)`` reduces x over each quantization group (the whole tensor, every index of ``axis``, or each
sub-channel block) and returns a ``Calibration`` (unpack it as ``scales, zero_points``; ``.scheme(profile=...)``
builds the matching UniformScheme). The statistic and the scale formula are separate choices:

statistic (``method``): absmax = max |x|; minmax = (min(min x, 0), max(max x, 0)); percentile = the
    ``percentile``-th percentile of |x| (symmetric) or of x at (100 - p, p) (``symmetric=False``), taken with
    numpy's ``method=percentile_method`` (default "higher": an element of the data, no arithmetic).
formula, by mechanism (qref/profiles/uniform.py: CALIBRATION_FORMULAS; a uniform profile's name picks the one
    its system takes, e.g. formula="qwix"): "exact" (default: scale = RN_e(a / D) from the exact quotient,
    uniform.md §5.2), "reciprocal_tiny_to_one" (a / (qmax + 0.5) in the input dtype evaluated as
    a * fl(1 / (qmax + 0.5)); scales < sqrt(tiny) become 1), "reciprocal_zero_to_one" (a == 0 -> 1, scale =
    a * fl(1 / (2^(b-1) - 0.5)) in the input dtype), "float32_divide_eps" (float32: scale = max(a / ((qmax -
    qmin) / 2), eps), zero point = qmin - round(min / scale)), "divide_eps_balanced_zero_point" (minmax, in the
    input dtype: the float32_divide_eps scale, the zero point from the bound with the smaller error).

``observe_range(batches, lo, hi, symmetric=..., rule=...)`` is a range observer (uniform.md §5.4): the running
min / max of a sequence of batches (extremes or an exponential average, in float32) and float32_divide_eps
parameters of it, as ``RangeObserverRule`` records (qref/profiles/uniform.py: OBSERVER_RULES) define.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..core.arith import convert, two_sum
from ..core.decode import decode
from ..core.encode import encode
from ..core.exact import as_source_array
from ..core.parallel import run_chunks, thread_limit
from ..errors import QrefError, check_choice, unknown_name
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..profiles.uniform import CALIBRATION_FORMULAS, calibration_formula
from ..schemes.base import normalize_axis
from ..schemes.uniform import DEFAULT_PROFILE, UniformScheme, build_uniform, cast, round_fraction, round_to_int
from ..schemes.uniform.validation import block_map, parse_block_size

METHODS = ("absmax", "minmax", "percentile")
FORMULAS = CALIBRATION_FORMULAS
NONFINITE = ("ignore", "error")
PERCENTILE_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
                      "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
                      "midpoint", "nearest")  # numpy's percentile methods


@dataclass(frozen=True)
class Calibration:
    """Result of qref.calibrate: scales (float64 values of the expressed type) and integer zero points, shaped
    for the granularity (() per tensor, (n,) per axis, the input's rank for blocks)."""

    scales: np.ndarray
    zero_points: np.ndarray
    storage: Format
    expressed: FloatFormat
    axis: int | None
    block_size: tuple[tuple[int, int], ...] | None
    method: str
    formula: str

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.scales
        yield self.zero_points

    def scheme(self, profile: str | None = DEFAULT_PROFILE, **options: Any) -> UniformScheme:
        """The UniformScheme with these scales and zero points (profile default "stablehlo")."""
        return build_uniform(self.storage, scale=self.scales, zero_point=self.zero_points, axis=self.axis,
                             block_size=None if self.block_size is None else dict(self.block_size),
                             profile=profile, expressed=self.expressed, **options)


def _groups(x: np.ndarray, axis: int | None, block_size: object) -> tuple[np.ndarray, tuple[int, ...],
                                                                         tuple[tuple[int, int], ...] | None]:
    """x reshaped to (*scale_shape, group_elements) with NaN padding for partial blocks."""
    nd = x.ndim
    if block_size is None:
        if axis is None:
            return x.reshape(-1), (), None
        a = normalize_axis(axis, nd)
        g = np.moveaxis(x, a, 0).reshape(x.shape[a], -1)
        return g, (x.shape[a],), None
    blocks = block_map(parse_block_size(block_size, axis, nd), nd)
    nb = [(-(-d // blocks[i])) if i in blocks else 1 for i, d in enumerate(x.shape)]
    bs = [blocks.get(i, d) for i, d in enumerate(x.shape)]
    pad = [(0, n * b - d) for n, b, d in zip(nb, bs, x.shape)]
    xf = x.astype(np.float64) if x.dtype != np.float64 else x
    if any(p[1] for p in pad):
        xf = np.pad(xf, pad, constant_values=np.nan)
    inter = []
    for n, b in zip(nb, bs):
        inter += [n, b]
    g = xf.reshape(inter)
    order = list(range(0, 2 * nd, 2)) + list(range(1, 2 * nd, 2))
    g = g.transpose(order).reshape(*nb, -1)
    return g, tuple(nb), tuple(sorted(blocks.items()))


def _stat_dtype(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float64 else x.astype(np.float64)  # exact for every float dtype


def calibrate(
    x: object,
    storage: str | Format = "int8",
    method: str = "absmax",
    *,
    axis: int | None = None,
    block_size: object = None,
    formula: str = "exact",
    expressed: str | Format | None = None,
    percentile: float = 99.99,
    percentile_method: str = "higher",
    symmetric: bool | None = None,
    nonfinite: str = "ignore",
    threads: int | None = None,
    _reference: bool = False,
) -> Calibration:
    """Scales and zero points for ``x`` in ``storage`` (uniform.md §5).

    method: "absmax" (symmetric, default), "minmax" (asymmetric) or "percentile". axis: per-axis
    calibration (one scale per index of this axis; default None = per tensor). block_size: an int (with axis,
    ONNX blocked), {axis: block} or a per-axis tuple (default None). formula: a mechanism of FORMULAS (default
    "exact") or a uniform profile whose system's formula to take ("qwix", "aqt", "pytorch"). expressed: the
    scale type (default: x's float dtype, float32 for integer input).
    percentile / percentile_method: for method="percentile" (defaults 99.99, "higher"). symmetric: for
    "percentile": True (default) takes |x|, False takes (100 - p, p) percentiles like minmax.
    nonfinite: "ignore" (default: NaN/Inf are left out of the statistics) or "error".
    threads: threads of the absmax / minmax reductions on a large x (default None: $QREF_NUM_THREADS, else every
    core; the statistics never depend on it, elements.md §2.11).
    An all-zero (or all-ignored) group gets scale 1 and the formula's zero point (uniform.md §5.3).
    ``_reference=True`` runs the readable reference path (float64 NaN-padded groups, numpy nan-reductions, one
    Fraction computation per group); the default fast path equals it bit for bit (tests/test_calibrate.py).
    """
    check_choice("calibration method", method, METHODS)
    formula = calibration_formula(formula)
    check_choice("nonfinite rule", nonfinite, NONFINITE)
    arr = as_source_array(x)
    fmt = get_format(storage)
    if not isinstance(fmt, IntFormat):
        raise QrefError(f"calibrate computes integer-storage parameters; {fmt.name} is not an integer format")
    if expressed is None:
        expressed = arr.dtype.name if (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16") else "float32"
    ex = get_format(expressed)
    if not isinstance(ex, FloatFormat):
        raise QrefError(f"expressed must be a float format, got {ex.name}")
    if arr.size == 0:
        raise QrefError("cannot calibrate an empty array")
    asym = method == "minmax" or (method == "percentile" and symmetric is False)
    if block_size is not None:
        parse_block_size(block_size, axis, arr.ndim)  # uniform.md §5.1: checked before any statistic
    if method == "percentile":
        if isinstance(percentile, bool) or not isinstance(percentile, (int, float, np.integer, np.floating)) \
                or not 0 <= float(percentile) <= 100:
            raise QrefError(f"percentile must be a number in [0, 100], got {percentile!r}")
        if not isinstance(percentile_method, str):
            raise QrefError(f"percentile_method must be one of numpy's method names, got {percentile_method!r}")
        check_choice("percentile method", percentile_method, PERCENTILE_METHODS)
    if nonfinite == "error":
        finite = np.isfinite(arr) if arr.dtype.kind != "O" else np.isfinite(_stat_dtype(arr))
        if not finite.all():
            raise QrefError(f"x has {int((~finite).sum())} NaN/Inf value(s); pass nonfinite='ignore' to leave "
                            "them out")
    if _reference:
        a, mn, mx, sshape, blocks = _stats_reference(arr, method, axis, block_size, asym, percentile,
                                                     percentile_method)
    else:
        with thread_limit(threads):
            a, mn, mx, sshape, blocks = _stats_fast(arr, method, axis, block_size, asym, percentile,
                                                    percentile_method)
    src_dt = arr.dtype if (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16") else np.dtype(np.float32)
    if formula == "exact":
        S, Z = (_exact_formula if _reference else _exact_formula_fast)(a, mn, mx, fmt, ex)
    elif formula == "reciprocal_zero_to_one" and asym:
        raise QrefError("the reciprocal_zero_to_one calibration (AQT's IntSymmetric) is symmetric (absmax); use "
                        "method='absmax'")
    elif formula == "divide_eps_balanced_zero_point":
        if not asym:
            raise QrefError("the divide_eps_balanced_zero_point calibration is asymmetric; use method='minmax'")
        if src_dt.name not in ("float32", "float64"):
            raise QrefError(f"the divide_eps_balanced_zero_point calibration is defined for float32 / float64 "
                            f"input (its arithmetic runs in the input dtype), not {src_dt.name}")
        with np.errstate(over="ignore", invalid="ignore"):
            S, Z = _divide_eps_balanced(mn, mx, fmt, src_dt)
    else:  # the frameworks' float arithmetic: overflow gives +-Inf (and Inf - Inf NaN), as their kernels do
        with np.errstate(over="ignore", invalid="ignore"):
            if formula == "reciprocal_tiny_to_one":
                S, Z = _reciprocal_tiny_to_one(a, mn, mx, fmt, src_dt)
            elif formula == "reciprocal_zero_to_one":
                S, Z = _reciprocal_zero_to_one(a, fmt, src_dt)
            else:
                S, Z = _float32_divide_eps(a, mn, mx, fmt, asym)
    ax_out = None if block_size is not None else axis
    return Calibration(S.reshape(sshape), Z.reshape(sshape).astype(np.int64), fmt, ex, ax_out, blocks, method,
                       formula)


def _stats_reference(arr: np.ndarray, method: str, axis: int | None, block_size: object, asym: bool,
                     percentile: float, percentile_method: str) -> tuple[Any, Any, Any, tuple[int, ...], Any]:
    """Reference statistics (uniform.md §5.1): float64 groups padded with NaN, numpy's nan-reductions."""
    x64 = _stat_dtype(arr)
    x64 = np.where(np.isfinite(x64), x64, np.nan)
    g, sshape, blocks = _groups(x64, axis, block_size)
    with np.errstate(invalid="ignore"), _quiet():
        if method == "absmax":
            a = np.nanmax(np.abs(g), axis=-1)
            mn = mx = None
        elif method == "minmax":
            mn, mx = np.nanmin(g, axis=-1), np.nanmax(g, axis=-1)
            a = None
        elif asym:
            mn = np.nanpercentile(g, 100 - percentile, axis=-1, method=percentile_method)
            mx = np.nanpercentile(g, percentile, axis=-1, method=percentile_method)
            a = None
        else:
            a = np.nanpercentile(np.abs(g), percentile, axis=-1, method=percentile_method)
            mn = mx = None
    return (*_finish_stats(a, mn, mx), sshape, blocks)


def _finish_stats(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None
                  ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Empty (all-NaN) groups -> 0; minmax ranges extended to include 0 (uniform.md §5.1)."""
    empty = np.isnan(a) if a is not None else np.isnan(mn)  # type: ignore[arg-type]
    if a is not None:
        return np.where(empty, 0.0, a), None, None
    assert mn is not None and mx is not None
    return None, np.minimum(np.where(empty, 0.0, mn), 0.0), np.maximum(np.where(empty, 0.0, mx), 0.0)


# ---------------------------------------------------------------------------------------------------------
# fast statistics: the same values as _stats_reference without float64 copies, padding or per-group loops
# ---------------------------------------------------------------------------------------------------------
def _native(arr: np.ndarray) -> np.ndarray:
    """The values of arr in a dtype numpy reduces quickly and exactly: float32/float64 as they are, 16-bit and
    smaller floats widened to float32, everything else (integers, Fractions) as _stat_dtype's float64."""
    if arr.dtype in (np.float32, np.float64):
        return arr
    if arr.dtype.kind in "fV" and arr.dtype.itemsize <= 2:
        return arr.astype(np.float32)
    return _stat_dtype(arr)


def _block_layout(shape: tuple[int, ...], axis: int | None, block_size: object
                  ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...] | None]:
    """(block per axis, blocks per axis, blocks record) of _groups' blocked granularity (same checks)."""
    nd = len(shape)
    blocks = block_map(parse_block_size(block_size, axis, nd), nd)
    nb = tuple((-(-d // blocks[i])) if i in blocks else 1 for i, d in enumerate(shape))
    bs = tuple(blocks.get(i, d) for i, d in enumerate(shape))
    return bs, nb, tuple(sorted(blocks.items()))


def _reduce_groups(x: np.ndarray, axis: int | None, block_size: object, fill: float
                   ) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...], Any]:
    """x as an array whose reduction over ``red`` axes gives one value per group (scale shape), partial blocks
    padded with ``fill`` (a value neutral for the reduction that follows)."""
    if block_size is None:
        if axis is None:
            return x.reshape(-1), (0,), (), None
        a = normalize_axis(axis, x.ndim)
        return x, tuple(i for i in range(x.ndim) if i != a), (x.shape[a],), None
    bs, nb, blocks = _block_layout(x.shape, axis, block_size)
    pad = [(0, n * b - d) for n, b, d in zip(nb, bs, x.shape)]
    if any(p[1] for p in pad):
        x = np.pad(x, pad, constant_values=fill)
    inter: list[int] = []
    for n, b in zip(nb, bs):
        inter += [n, b]
    return x.reshape(inter), tuple(range(1, 2 * x.ndim, 2)), nb, blocks


def _minmax_fast(v: np.ndarray, axis: int | None, block_size: object) -> tuple[np.ndarray, np.ndarray, Any]:
    """Per group (min over finite values and 0, max over finite values and 0), float64, and the groups.

    Non-finite values and padding are 0 here, which is what the reference's NaN-ignoring reductions followed by
    the extension of the range to 0 give (_finish_stats): one pass of min and one of max; only when some group
    holds NaN or Inf (its min or max is not finite) are the non-finite values replaced by 0 and the groups
    reduced again."""
    g, red, sshape, blocks = _reduce_groups(v, axis, block_size, 0.0)
    parts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def work(i: int, j: int) -> None:  # slices of g's axis 0 on the thread pool (elements.md §2.11)
        gc = g[i:j]
        with np.errstate(invalid="ignore"):
            lo, hi = np.min(gc, axis=red), np.max(gc, axis=red)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):  # a chunk's own second pass: the same
            gc = np.where(np.isfinite(gc), gc, np.zeros((), gc.dtype))  # values once clamped to 0 below
            lo, hi = np.min(gc, axis=red), np.max(gc, axis=red)
        parts[i] = lo, hi

    n0 = g.shape[0] if g.ndim else 1
    if g.ndim == 0:
        work(0, 1)
    else:
        run_chunks(work, n0, g.size // max(1, n0))
    order = [parts[i] for i in sorted(parts)]
    if len(order) == 1:
        lo, hi = order[0]
    elif 0 in red:  # min / max of the chunks' min / max: exact in any order
        lo, hi = np.minimum.reduce([p[0] for p in order]), np.maximum.reduce([p[1] for p in order])
    else:  # axis 0 is a group axis: the chunks' groups in order
        lo, hi = np.concatenate([p[0] for p in order]), np.concatenate([p[1] for p in order])
    lo64 = np.minimum(np.asarray(lo, np.float64).reshape(sshape), 0.0)
    hi64 = np.maximum(np.asarray(hi, np.float64).reshape(sshape), 0.0)
    return lo64, hi64, (sshape, blocks)


def _percentile_fast(v: np.ndarray, qs: tuple[float, ...], absolute: bool, axis: int | None, block_size: object,
                     pmethod: str) -> tuple[list[np.ndarray], tuple[int, ...], Any]:
    """np.nanpercentile of each group at each q (float64 results), as the reference computes it.

    A group without NaN, Inf or padding: numpy's nanpercentile of it is its percentile. For the methods that
    return one order statistic (_DISCRETE) at a rank k that depends only on the group length n (read from
    np.percentile of arange(n)), that element is taken directly: the group's max for k = n - 1 (the default
    99.99th percentile of groups of up to 10^4 elements), its min for k = 0, else np.partition (one group:
    after keeping only the values beyond a threshold read from a sample, when enough of them remain to hold
    rank k). Continuous methods call np.percentile on all such groups at once. Groups with ignored values
    (NaN/Inf, padding of partial blocks) go through np.nanpercentile one by one, like the reference."""
    with np.errstate(invalid="ignore"):
        finite = bool(np.isfinite(np.max(v)) and np.isfinite(np.min(v)))  # NaN propagates: all finite
    if pmethod in _DISCRETE and finite:
        bs_ok = block_size is None
        if not bs_ok:
            bs, nb, _ = _block_layout(v.shape, axis, block_size)
            bs_ok = all(n * b == d for n, b, d in zip(nb, bs, v.shape))
        if bs_ok:
            return _percentile_discrete(v, absolute, qs, axis, block_size, pmethod)
    x64 = v if v.dtype == np.float64 else v.astype(np.float64)
    x64 = x64 if finite else np.where(np.isfinite(x64), x64, np.nan)
    g, sshape, blocks = _groups(x64, axis, block_size)
    g = g.reshape(-1, g.shape[-1]) if g.ndim != 1 else g.reshape(1, -1)
    if absolute:
        g = np.abs(g)
    bad = np.isnan(g).any(axis=-1)
    good = g if not bad.any() else g[~bad]
    out = []
    for q in qs:
        res = np.empty(g.shape[0], dtype=np.float64)
        if good.shape[0]:
            vals = np.percentile(good, q, axis=-1, method=pmethod)
            if bad.any():
                res[~bad] = vals
            else:
                res[:] = vals
        if bad.any():
            with np.errstate(invalid="ignore"), _quiet():
                res[bad] = np.nanpercentile(g[bad], q, axis=-1, method=pmethod)
        out.append(res.reshape(sshape))
    return out, sshape, blocks


def _percentile_discrete(v: np.ndarray, absolute: bool, qs: tuple[float, ...], axis: int | None,
                         block_size: object, pmethod: str) -> tuple[list[np.ndarray], tuple[int, ...], Any]:
    """_percentile_fast for finite data in whole groups and a one-element method (see there); absolute: of
    |v| (the max of |v| is max(max v, -min v), without a temporary)."""
    g, red, sshape, blocks = _reduce_groups(v, axis, block_size, 0.0)
    n = v.size // max(int(np.prod(sshape, dtype=np.int64)), 1)
    out = []
    for q in qs:
        k = _rank(n, float(q), pmethod)
        if k == n - 1:
            res = np.maximum(np.max(g, axis=red), -np.min(g, axis=red)) if absolute else np.max(g, axis=red)
        elif k == 0:
            res = np.min(np.abs(g) if absolute else g, axis=red)
        else:
            rows = np.moveaxis(np.abs(g) if absolute else g, red, tuple(range(-len(red), 0))).reshape(-1, n)
            res = _kth_rows(rows, k) if rows.shape[0] > 1 else _kth_one(rows[0], k)
        out.append(np.asarray(res, np.float64).reshape(sshape))
    return out, sshape, blocks


@lru_cache(maxsize=64)
def _rank(n: int, q: float, pmethod: str) -> int:
    """The sorted index numpy's one-element percentile method picks in a group of n: np.percentile of
    arange(n) (a pure function of (n, q, method), cached: O(n) to evaluate)."""
    return int(np.percentile(np.arange(n, dtype=np.float64), q, method=pmethod))


def _kth_rows(rows: np.ndarray, k: int) -> np.ndarray:
    return np.partition(rows, k, axis=-1)[:, k]


def _kth_one(row: np.ndarray, k: int) -> Any:
    """The element of sorted index k of a 1-D array: partition of the values on the far side of a threshold t
    read from a strided sample, if they hold rank k (count checked), else of the whole row."""
    n = row.size
    step = 16
    if n >= 1 << 16:
        sample = np.sort(row[::step])
        top = k >= n // 2
        m = (n - k) if top else (k + 1)  # elements from rank k to the far end, inclusive
        j = min(sample.size - 1, (m + step - 1) // step * 2 + 8)
        t = sample[sample.size - 1 - j] if top else sample[j]
        keep = row[row >= t] if top else row[row <= t]
        if keep.size >= m:
            kk = keep.size - m if top else k
            return np.partition(keep, kk)[kk]
    return np.partition(row, k)[k]


# numpy's percentile methods whose result is one order statistic, at a rank that depends only on (n, q)
_DISCRETE = ("lower", "higher", "nearest", "inverted_cdf", "closest_observation")


def _stats_fast(arr: np.ndarray, method: str, axis: int | None, block_size: object, asym: bool,
                percentile: float, percentile_method: str) -> tuple[Any, Any, Any, tuple[int, ...], Any]:
    """_stats_reference's values (uniform.md §5.1) computed without its per-group float64 machinery."""
    v = _native(arr)
    if method == "absmax":  # max |x| = max(max x, -min x); 0 for an empty group, like the reference
        lo, hi, (sshape, blocks) = _minmax_fast(v, axis, block_size)
        return np.maximum(hi, -lo), None, None, sshape, blocks
    if method == "minmax":
        lo, hi, (sshape, blocks) = _minmax_fast(v, axis, block_size)
        return None, lo, hi, sshape, blocks
    if asym:
        (mn, mx), sshape, blocks = _percentile_fast(v, (100 - percentile, percentile), False, axis, block_size,
                                                    percentile_method)
        return (*_finish_stats(None, mn, mx), sshape, blocks)
    (a,), sshape, blocks = _percentile_fast(v, (percentile,), True, axis, block_size, percentile_method)
    return (*_finish_stats(a, None, None), sshape, blocks)


class _quiet:
    """Silence numpy's 'All-NaN slice' RuntimeWarning (all-NaN groups are handled explicitly)."""

    def __enter__(self) -> None:
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)


def _symmetric_zero(fmt: IntFormat) -> tuple[int, int]:
    """(zero point, D) of symmetric calibration: z = 0 (signed) or the midpoint ceil((lo + hi) / 2)
    (unsigned); D = min(hi - z, z - lo)."""
    lo, hi = fmt.lo, fmt.hi
    z = 0 if fmt.signed and lo <= 0 <= hi else (lo + hi + 1) // 2
    return z, min(hi - z, z - lo)


def _exact_formula(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                  ex: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Exact formulas (uniform.md §5.2): scale = RN_e(a / D); minmax: scale = RN_e((max - min) / (hi - lo)),
    z = clamp(lo - round_half_even(min / scale), lo, hi). One loop over groups (exact rationals)."""
    lo, hi = fmt.lo, fmt.hi
    if a is not None:
        z0, D = _symmetric_zero(fmt)
        if D <= 0:
            raise QrefError(f"{fmt.name} has no room for a symmetric range around {z0}")
        flat = a.reshape(-1)
        S = np.array([_rn(Fraction(float(v)) / D, ex) if v > 0 else 1.0 for v in flat], dtype=np.float64)
        return S.reshape(a.shape), np.full(a.shape, z0, dtype=np.int64)
    assert mn is not None and mx is not None
    S = np.empty(mn.size, dtype=np.float64)
    Z = np.empty(mn.size, dtype=np.int64)
    for i, (u, v) in enumerate(zip(mn.reshape(-1), mx.reshape(-1))):
        if v - u == 0:
            S[i], Z[i] = 1.0, min(max(0, lo), hi)
            continue
        s = _rn((Fraction(float(v)) - Fraction(float(u))) / (hi - lo), ex)
        r = Fraction(float(u)) / Fraction(s)
        n = math.floor(r)
        frac = r - n
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and n % 2):
            n += 1
        S[i], Z[i] = s, min(max(lo - n, lo), hi)
    return S.reshape(mn.shape), Z.reshape(mn.shape)


def _round_quotients(num: np.ndarray, den: float, ex: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """(RN_ex(num / den), hard) for float64 numerators num >= 0 and an integer den < 2^53.

    q = fl64(num / den) is the exact quotient rounded once; RN_ex is monotone, so when RN_ex(q - ulp) and
    RN_ex(q + ulp) (float64 neighbours of q) agree, the exact quotient, which lies within half an ulp of q,
    rounds to that same value. Where they differ (q on or next to a midpoint of ex) ``hard`` is True and the
    caller computes the exact Fraction result. float64 scales are q itself (IEEE division rounds once)."""
    with np.errstate(over="ignore", under="ignore"):
        q = num / den
    if ex.name == "float64":
        return q, np.zeros(q.shape, bool)
    dn, up = np.nextafter(q, -np.inf), np.nextafter(q, np.inf)
    if ex.name == "float32":  # numpy's float64 -> float32 cast is the hardware's one nearest-even rounding
        with np.errstate(over="ignore"):
            rd, ru = dn.astype(np.float32), up.astype(np.float32)
    else:
        rd, ru = _rn_array(dn, ex), _rn_array(up, ex)
    return np.asarray(rd, np.float64), np.asarray(rd != ru).reshape(q.shape)


def _exact_formula_fast(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                       ex: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """_exact_formula's results (uniform.md §5.2) in float64 arithmetic; the groups where float64 cannot decide
    the rounding (see _round_quotients: an inexact max - min, a quotient next to a midpoint of the expressed
    type, min / s next to a half-integer) are computed by _exact_formula itself."""
    lo, hi = fmt.lo, fmt.hi
    if a is not None:
        z0, D = _symmetric_zero(fmt)
        if D <= 0 or D >= 2**53:
            return _exact_formula(a, mn, mx, fmt, ex)
        flat = a.reshape(-1)
        pos = flat > 0
        S, hard = _round_quotients(np.where(pos, flat, 1.0), float(D), ex)
        S = np.where(pos, S, 1.0)
        hard &= pos
        if _out_of_range(S, pos & ~hard):
            return _exact_formula(a, mn, mx, fmt, ex)
        if hard.any():
            S[hard] = _exact_formula(flat[hard], None, None, fmt, ex)[0]
        return S.reshape(a.shape), np.full(a.shape, z0, dtype=np.int64)
    assert mn is not None and mx is not None
    span = hi - lo
    if span >= 2**53:
        return _exact_formula(a, mn, mx, fmt, ex)
    u, v = mn.reshape(-1), mx.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        d, err = two_sum(v, -u)  # d = fl(max - min), exact unless the error term is nonzero
    nz = d != 0
    hard = nz & ((err != 0) | ~np.isfinite(d))
    ok = nz & ~hard
    S, hs = _round_quotients(np.where(ok, d, 1.0), float(span), ex)
    hard |= ok & hs
    ok &= ~hs
    S = np.where(ok, S, 1.0)
    if _out_of_range(S, ok):
        return _exact_formula(a, mn, mx, fmt, ex)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(ok, u, 0.0) / S  # fl64(min / s): round_half_even(exact) = rint(r) away from half-integers
    rd, ru = np.rint(np.nextafter(r, -np.inf)), np.rint(np.nextafter(r, np.inf))
    hz = ok & ((rd != ru) | ~(np.abs(r) < 2.0**52))
    hard |= hz
    n = np.where(ok & ~hz, rd, 0.0).astype(np.int64)
    Z = np.where(nz, np.clip(lo - n, lo, hi), min(max(0, lo), hi)).astype(np.int64)
    if hard.any():
        Sh, Zh = _exact_formula(None, u[hard], v[hard], fmt, ex)
        S[hard], Z[hard] = Sh, Zh
    return S.reshape(mn.shape), Z.reshape(mn.shape)


def _rn_array(x: np.ndarray, ex: FloatFormat) -> np.ndarray:
    """float64 values x rounded once to ex (nearest_even, overflow to +-Inf) by qref's exact encode, as float64."""
    try:
        dt = np.dtype(ex.name)
    except TypeError:  # a format without a numpy dtype (tfloat32, P3109...)
        return decode(encode(x, ex, rounding="nearest_even", overflow="inf", nan="keep_sign"), ex,
                      dtype=np.float64)
    return convert(x, dt).astype(np.float64)


def _out_of_range(S: np.ndarray, ok: np.ndarray) -> bool:
    """True when some decided scale rounded to 0 or overflowed (the reference then raises its own error)."""
    return bool((ok & ((S == 0) | np.isinf(S))).any())


def _rn(v: Fraction, ex: FloatFormat) -> float:
    s = round_fraction(v, ex)
    if s == 0 or math.isinf(s):
        raise QrefError(f"scale {float(v)!r} underflows or overflows the expressed type {ex.name}")
    return s


def _reciprocal_tiny_to_one(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                  dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """s = a * fl(1 / (qmax + 0.5)) in the input dtype dt, s < sqrt(tiny) -> 1; minmax: s = (max - min) *
    fl(1 / (hi - lo)), z = clamp(round_half_even(lo - min / s)) (qwix 0.1.8 compute_scale_zero_point)."""
    tiny_sqrt = np.sqrt(np.asarray(_finfo_tiny(dt), dtype=dt))
    if a is not None:
        if not fmt.signed:
            raise QrefError("the reciprocal_tiny_to_one calibration (qwix) is for signed integer storage")
        # absmax / (qmax + 0.5): XLA turns the division by a constant into a multiplication by fl(1 / c)
        inv = np.asarray(np.ones((), dt) / cast(np.asarray(fmt.hi + 0.5), dt)).astype(dt)
        s = np.asarray(cast(a, dt) * inv).astype(dt)
        s = np.where(s < tiny_sqrt, np.ones((), dt), s)
        return s.astype(np.float64), np.zeros(s.shape, dtype=np.int64)
    assert mn is not None and mx is not None
    if (fmt.lo, fmt.hi) not in ((-128, 127), (-8, 7)):
        raise QrefError("the reciprocal_tiny_to_one minmax calibration (qwix) supports int8 and int4 only")
    mnc, mxc = cast(mn, dt), cast(mx, dt)
    inv = np.asarray(np.ones((), dt) / cast(np.asarray(float(fmt.hi - fmt.lo)), dt)).astype(dt)
    s = np.asarray(np.asarray(mxc - mnc).astype(dt) * inv).astype(dt)
    s = np.where(s < tiny_sqrt, np.ones((), dt), s)
    zf = np.asarray(cast(np.asarray(float(fmt.lo)), dt) - np.asarray(mnc / s).astype(dt)).astype(dt)
    n, nan = round_to_int(zf, "nearest_even")
    return s.astype(np.float64), np.clip(np.where(nan, 0, n), fmt.lo, fmt.hi)


def _reciprocal_zero_to_one(a: np.ndarray | None, fmt: IntFormat, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """a == 0 -> 1, scale = a * fl(1 / (2^(b-1) - 0.5)) in the input dtype (aqtp 0.9.0 AbsMaxCalibration with
    IntSymmetric(preserve_max_val=False))."""
    assert a is not None
    if not fmt.signed:
        raise QrefError("the reciprocal_zero_to_one calibration (AQT's IntSymmetric) is for signed storage")
    ac = cast(a, dt)
    ac = np.where(ac == 0, np.ones((), dt), ac)
    inv = np.asarray(np.ones((), dt) / cast(np.asarray(2.0 ** (fmt.bits - 1) - 0.5), dt)).astype(dt)
    s = np.asarray(ac * inv).astype(dt)  # XLA: division by a constant -> multiplication by fl(1 / c)
    return s.astype(np.float64), np.zeros(s.shape, dtype=np.int64)


def _float32_divide_eps(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                     asym: bool) -> tuple[np.ndarray, np.ndarray]:
    """float32: s = max(a / ((hi - lo) / 2), eps); minmax: s = max((max - min) / (hi - lo), eps), z = clamp(lo -
    round_half_even(min / s)) (torch.ao.quantization MinMaxObserver._calculate_qparams, torch 2.13)."""
    f32 = np.dtype(np.float32)
    eps = np.float32(np.finfo(np.float32).eps)
    lo, hi = fmt.lo, fmt.hi
    if not asym:
        assert a is not None
        half = np.float32(float(hi - lo) / 2)
        s = np.maximum(np.asarray(cast(a, f32) / half).astype(f32), eps)
        z = 0 if fmt.signed else (128 if (lo, hi) == (0, 255) else (lo + hi) // 2)
        return s.astype(np.float64), np.full(s.shape, z, dtype=np.int64)
    assert mn is not None and mx is not None
    span = np.float32(float(hi - lo))
    s = np.asarray((cast(mx, f32) - cast(mn, f32)) / span).astype(f32)
    s = np.maximum(s, eps)
    n, _ = round_to_int(np.asarray(cast(mn, f32) / s).astype(f32), "nearest_even")
    return s.astype(np.float64), np.clip(lo - n, lo, hi)


@dataclass(frozen=True)
class ObservedRange:
    """Result of observe_range: float32 scales and int64 zero points, one per group (shape () per tensor,
    (channels,) per axis), the running (min, max) statistic, and where the zero point is unspecified."""

    scales: np.ndarray
    zero_points: np.ndarray
    min_val: np.ndarray
    max_val: np.ndarray
    unspecified: np.ndarray


def _observer_rule(what: str, rules: dict[str, Any], rule: str, midpoint: str, lo: int, hi: int
                   ) -> tuple[Any, int, int]:
    """The observer's checked arguments (uniform.md §5.4): its rule record ``rules[rule]`` and the integer range
    (lo, hi), which must hold 0 with lo < hi; ``midpoint`` one of the unsigned symmetric zero points."""
    from ..profiles.uniform import UNSIGNED_SYMMETRIC_ZERO_POINTS

    if rule not in rules:
        raise unknown_name(what, rule, tuple(rules))
    check_choice("symmetric zero point", midpoint, UNSIGNED_SYMMETRIC_ZERO_POINTS)
    lo, hi = int(lo), int(hi)
    if not lo <= 0 <= hi or lo >= hi:
        raise QrefError(f"the observer's range [{lo}, {hi}] must hold 0 and have lo < hi")
    return rules[rule], lo, hi


def observe_range(batches: object, lo: int, hi: int, *, symmetric: bool, rule: str = "pytorch_minmax_observer",
                  axis: int | None = None, averaging_constant: float = 0.01, eps: float | None = None,
                  midpoint: str = "ceil_midpoint") -> ObservedRange:
    """A range observer's (scale, zero point) after the batches ``batches[0], batches[1], ...`` (uniform.md §5.4).

    Per group (the batch, or each index of ``axis`` of a batch): b = fl32(batch); running (m, M) = the first
    batch's (min b, max b), then ``rule.running``: extremes (min(m, min b), max(M, max b)) or
    exponential_average (m = fl32(m + fl32(c32 * fl32(min b - m))), c32 = fl32(averaging_constant)); NaN
    propagates. Then m0 = min(m, 0), M0 = max(M, 0) and (float32, eps = fl32(eps), default float32's eps):
    symmetric: s = max(fl32(max(-m0, M0) / ((hi - lo) / 2)), eps), z = 0 for signed storage (lo < 0), else the
    ceil or floor midpoint of [lo, hi] (``midpoint``); affine: s = max(fl32((M0 - m0) / (hi - lo)), eps),
    z = clamp(lo - round_half_even(fl32(m0 / s)), lo, hi); z is unspecified where m0 / s is not finite.
    No batch: s = 1, z = 0.
    """
    from ..profiles.uniform import OBSERVER_RULES

    r, lo, hi = _observer_rule("range observer rule", OBSERVER_RULES, rule, midpoint, lo, hi)
    xs = as_source_array(batches)
    if xs.dtype.kind != "f" and xs.dtype.name != "bfloat16":
        raise QrefError(f"observe_range takes float batches, got {xs.dtype}")
    f32 = np.dtype(np.float32)
    if xs.ndim < 1 or xs.shape[0] == 0:
        s0, z0 = r.unobserved
        return ObservedRange(np.full((), s0, f32), np.full((), z0, np.int64), np.full((), np.inf, f32),
                             np.full((), -np.inf, f32), np.zeros((), bool))
    if axis is not None:
        axis = normalize_axis(axis, xs.ndim - 1)
    if xs[0].size == 0:
        raise QrefError("observe_range needs non-empty batches (an empty batch is skipped by the observer)")
    x = convert(xs, f32) if xs.dtype != f32 else xs
    # (batches, groups, elements): a per-tensor group is the whole batch
    g = x.reshape(x.shape[0], 1, -1) if axis is None else np.moveaxis(x, axis + 1, 1).reshape(x.shape[0],
                                                                                          x.shape[axis + 1], -1)
    c32 = np.float32(averaging_constant)
    with np.errstate(all="ignore"):
        bmin, bmax = np.min(g, axis=-1), np.max(g, axis=-1)  # NaN propagates, as the observers' aminmax
        m, M = bmin[0], bmax[0]
        for t in range(1, g.shape[0]):  # the running statistic, one batch at a time
            if r.running == "extremes":
                m, M = np.minimum(m, bmin[t]), np.maximum(M, bmax[t])
            else:
                m = (m + (c32 * (bmin[t] - m)).astype(f32)).astype(f32)
                M = (M + (c32 * (bmax[t] - M)).astype(f32)).astype(f32)
        if np.any(m > M):
            raise QrefError("the observed minimum exceeds the maximum (the observer rejects it)")
        m0, M0 = np.minimum(m, f32.type(0)), np.maximum(M, f32.type(0))
        e = np.float32(np.finfo(np.float32).eps if eps is None else eps)
        if symmetric:
            a = np.maximum(-m0, M0)
            s = np.maximum((a / np.float32((hi - lo) / 2)).astype(f32), e)
            zv = 0 if lo < 0 else ((lo + hi + 1) // 2 if midpoint == "ceil_midpoint" else (lo + hi) // 2)
            z = np.full(s.shape, zv, np.int64)
            bad = np.zeros(s.shape, bool)
        else:
            s = np.maximum(((M0 - m0) / np.float32(hi - lo)).astype(f32), e)
            q = np.rint((m0 / s).astype(f32))
            bad = ~np.isfinite(q) | (np.abs(q) >= 2.0**31)
            z = np.clip(lo - np.where(bad, 0, q).astype(np.int64), lo, hi)
    shape = () if axis is None else (g.shape[1],)
    return ObservedRange(s.reshape(shape), z.reshape(shape), m.reshape(shape), M.reshape(shape), bad.reshape(shape))


@dataclass(frozen=True)
class ObservedHistogram:
    """Result of observe_histogram: the float32 scale and int64 zero point (shape ()), the running (min, max)
    and float32 histogram over it, and the range (search_min, search_max) the L2 search chose."""

    scales: np.ndarray
    zero_points: np.ndarray
    min_val: np.ndarray
    max_val: np.ndarray
    histogram: np.ndarray
    search_min: np.ndarray
    search_max: np.ndarray


_F32 = np.dtype(np.float32)


def _grid(a: np.float32, b: np.float32, n: int, grid: str = "fused_linspace") -> np.ndarray:
    """n float32 points from a to b (uniform.md §5.5 grid): step = fl32((b - a) / (n - 1)); point k = a + k step
    for k < n // 2, else b - (n - 1 - k) step, with one rounding ("fused_linspace": fl32(fma(k, step, a))) or
    two ("unfused_linspace": fl32(a + fl32(k step)))."""
    from ..core.arith import fma_float32

    a, b = np.float32(a), np.float32(b)
    with np.errstate(over="ignore", invalid="ignore"):
        step = np.float32((b - a) / np.float32(n - 1))
        k = np.arange(n)
        if grid == "fused_linspace":
            low = fma_float32(np.float32(step), k.astype(_F32), a)
            high = fma_float32(np.float32(-step), (n - 1 - k).astype(_F32), b)
        else:
            low = (a + (step * k.astype(_F32)).astype(_F32)).astype(_F32)
            high = (b - (step * (n - 1 - k).astype(_F32)).astype(_F32)).astype(_F32)
    return np.where(k < n // 2, low, high).astype(_F32)


def _bin_counts(x: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    """float32 counts of x over [lo, hi] in ``bins`` bins (uniform.md §5.5 binning "float32_truncated_quotient"):
    lo == hi widens the range to [min(next_below(lo), lo - 1), max(next_above(hi), hi + 1)] (float32 neighbours:
    float32 values, never collapsing to one value); x outside the range is left out; bin = trunc(fl32(fl32(fl32(x -
    lo) * bins) / fl32(hi - lo))), the last bin closed."""
    lo, hi = float(lo), float(hi)
    if lo == hi:
        lo = min(float(np.nextafter(np.float32(lo), np.float32(-np.inf))), lo - 1.0)
        hi = max(float(np.nextafter(np.float32(hi), np.float32(np.inf))), hi + 1.0)
    left, right = np.float32(lo), np.float32(hi)
    v = x[(x >= left) & (x <= right)]
    with np.errstate(over="ignore", invalid="ignore"):
        q = ((v - left).astype(_F32) * np.float32(bins)).astype(_F32) / np.float32(right - left)
    pos = np.minimum(q.astype(_F32).astype(np.int64), bins - 1)
    return np.bincount(pos, minlength=bins).astype(_F32)


def _cascade_rows(rows: np.ndarray) -> np.ndarray:
    """float32 sum over the first axis of ``rows`` (rows, ...): sequential sums of 2^p rows, p = max(4,
    ceil(log2(rows)) // 4), cascaded through 4 accumulator levels (uniform.md §5.5 norm_sum)."""
    size = rows.shape[0]
    p = max(4, (int(size - 1).bit_length() if size > 1 else 0) // 4)
    step, mask = 1 << p, (1 << p) - 1
    acc = [np.zeros(rows.shape[1:], _F32) for _ in range(4)]
    n_full = size // step
    if n_full:  # each chunk's sequential sum, from 0 (numpy's cumsum adds in order)
        chunks = np.cumsum(rows[: n_full * step].reshape(n_full, step, *rows.shape[1:]), axis=1, dtype=_F32)[:, -1]
    i = 0
    for c in range(n_full):  # the level cascade: one step per chunk of 2^p rows
        acc[0] = chunks[c]
        i += step
        for j in range(1, 4):
            acc[j] = (acc[j] + acc[j - 1]).astype(_F32)
            acc[j - 1] = np.zeros_like(acc[0])
            if i & (mask << (j * p)):
                break
    for r in rows[i:]:  # fewer than 2^p rows left (a loop over rows of 4 vectors)
        acc[0] = (acc[0] + r).astype(_F32)
    for j in range(1, 4):
        acc[0] = (acc[0] + acc[j]).astype(_F32)
    return acc[0]


def _cascade_sum(x: np.ndarray, lanes: int) -> np.float32:
    """The float32 sum of x in the order of uniform.md §5.5 norm_sum "cascade_lanes" (``lanes`` lanes)."""
    n = x.size
    width = lanes if n >= lanes else 1
    nv = n // width
    vec = x[: nv * width].reshape(nv, width)
    si = nv // 4
    part = _cascade_rows(vec[: si * 4].reshape(si, 4, width)) if si else np.zeros((4, width), _F32)
    p0 = part[0]
    for v in vec[si * 4:]:  # at most 3 vectors
        p0 = (p0 + v).astype(_F32)
    for k in range(1, 4):
        p0 = (p0 + part[k]).astype(_F32)
    acc = np.float32(0)
    tail = x[nv * width:] if width > 1 else np.zeros(0, _F32)
    for v in np.concatenate([tail, p0.reshape(-1)]) if width > 1 else p0.reshape(-1):
        acc = np.float32(acc + v)
    return acc


def _l2_norm(begin: Any, end: Any, density: np.ndarray) -> np.ndarray:
    """density * (end^3 - begin^3) / 3 in float32, in this order."""
    cube = (((end * end).astype(_F32) * end).astype(_F32) - ((begin * begin).astype(_F32) * begin).astype(_F32))
    return (density * (cube.astype(_F32) / np.float32(3)).astype(_F32)).astype(_F32)


def _l2_error(hist: np.ndarray, lo: float, hi: float, start: int, end: int, rule: Any) -> float:
    """The L2 error of quantizing the histogram over bins [start, end] to ``target_bins`` bins (uniform.md §5.5):
    float64 widths, then float32 per-bin errors summed in the cascade order."""
    bins, dst = rule.bins, rule.target_bins
    width = (hi - lo) / bins
    dwidth = width * (end - start + 1) / dst
    if dwidth == 0.0:
        return 0.0
    w32, d32, h32 = np.float32(width), np.float32(dwidth), np.float32(dwidth / 2)
    src_begin = (np.arange(-start, bins - start).astype(_F32) * w32).astype(_F32)
    src_end = (src_begin + w32).astype(_F32)
    d_begin = np.clip(np.floor_divide(src_begin, d32), 0, dst - 1).astype(_F32)
    d_end = np.clip(np.floor_divide(src_end, d32), 0, dst - 1).astype(_F32)
    density = (hist / w32).astype(_F32)
    begin_center = ((d_begin + np.float32(0.5)).astype(_F32) * d32).astype(_F32)
    norm = _l2_norm((src_begin - begin_center).astype(_F32), np.full(bins, h32), density)
    inner = ((d_end - d_begin).astype(_F32) - np.float32(1)).astype(_F32)
    norm = (norm + (inner * _l2_norm(-h32, h32, density)).astype(_F32)).astype(_F32)
    end_center = ((d_end * d32).astype(_F32) + h32).astype(_F32)
    norm = (norm + _l2_norm(-h32, (src_end - end_center).astype(_F32), density)).astype(_F32)
    return float(_cascade_sum(norm, rule.sum_lanes))


@lru_cache(maxsize=4)
def _quantile_steps(step: float) -> tuple[np.ndarray, np.ndarray]:
    """(alpha_k, beta_k): 0 and 1 moved by ``step`` k times in float64, one addition at a time."""
    n = math.ceil(1 / step) + 2
    alpha = np.cumsum(np.concatenate([[0.0], np.full(n, step)]))
    beta = np.cumsum(np.concatenate([[1.0], np.full(n, -step)]))
    return alpha, beta


def _search_range(hist: np.ndarray, lo: np.float32, hi: np.float32, rule: Any) -> tuple[np.float32, np.float32]:
    """The (min, max) of the L2 search over bin ranges (uniform.md §5.5, the loop's steps with neither bound moving
    skipped by binary search on the cumulative histogram)."""
    bins = rule.bins
    total = float(_cascade_sum(hist, rule.sum_lanes))
    csum = np.cumsum(hist.astype(np.float64)).astype(_F32)  # accumulated in float64, stored as float32
    alpha, beta = _quantile_steps(rule.quantile_step)
    with np.errstate(over="ignore"):
        ta, tb = (alpha * total).astype(_F32), (beta * total).astype(_F32)  # compared in float32
    first_ge = np.searchsorted(csum, ta, "left")  # first bin with csum >= alpha_k * total
    last_le = np.searchsorted(csum, tb, "right") - 1  # last bin with csum <= beta_k * total
    neg_tb, neg_beta = -tb, -beta
    s, e, ia, ib, best = 0, bins - 1, 0, 0, math.inf
    while alpha[ia] < beta[ib]:
        left = min(max(int(first_ge[ia + 1]), s), e)
        right = min(max(int(last_le[ib + 1]), s), e)
        if left == s and right == e:  # only beta moves until the right bin does
            if e == s:
                break
            k = max(int(np.searchsorted(neg_tb, -csum[e], "right")), ib + 1)  # first k: beta_k * total < csum[e]
            if k - 1 >= int(np.searchsorted(neg_beta, -alpha[ia], "left")):  # beta reaches alpha first
                break
            ib = k - 1
            continue
        if left - s > e - right:
            ns, ne, ia = left, e, ia + 1
        else:
            ns, ne, ib = s, right, ib + 1
        norm = _l2_error(hist, float(lo), float(hi), ns, ne, rule)
        if norm > best:
            break
        best, s, e = norm, ns, ne
    w = ((hi - lo).astype(_F32) / np.float32(bins)).astype(_F32)
    return (np.float32(lo + (w * np.float32(s)).astype(_F32)), np.float32(lo + (w * np.float32(e + 1)).astype(_F32)))


def _rebin(hist: np.ndarray, lo: np.float32, hi: np.float32, new_lo: np.float32, new_hi: np.float32, rule: Any
           ) -> np.ndarray:
    """The histogram over [lo, hi] moved to [new_lo, new_hi] (uniform.md §5.5): each bin split into
    ``upsample_rate`` equal parts whose float32 midpoints go to the new bin holding them (float32 sums, in order)."""
    bins, up = rule.bins, rule.upsample_rate
    if lo == hi:  # one value: its whole count goes to the bin of that value
        return (_bin_counts(np.array([lo], _F32), bins, new_lo, new_hi) * _cascade_sum(hist, rule.sum_lanes)
                ).astype(_F32)
    n = bins * up
    parts = (np.repeat(hist, up) / np.float32(up)).astype(_F32)
    size = ((hi - lo).astype(_F32) / np.float32(n)).astype(_F32)
    mids = (_grid(lo, hi, n + 1, rule.grid)[:-1] + (np.float32(0.5) * size).astype(_F32)).astype(_F32)
    edges = _grid(new_lo, new_hi, bins + 1, rule.grid)
    where = np.clip(np.searchsorted(edges, mids, "right") - 1, 0, bins - 1)
    out = np.zeros(bins, _F32)
    np.add.at(out, where, parts)  # in element order, float32
    return out


def observe_histogram(batches: object, lo: int, hi: int, *, symmetric: bool,
                      rule: str = "pytorch_histogram_observer", eps: float | None = None,
                      midpoint: str = "ceil_midpoint") -> ObservedHistogram:
    """A histogram observer's (scale, zero point) after the float32 batches ``batches[0], batches[1], ...``
    (uniform.md §5.5; a sequence of arrays of any sizes, or an array whose first axis is the batch).

    Per batch b (+-Inf left out): the first sets (m, M) = (min b, max b) and the B-bin float32 histogram of b
    over [m, M]; a later one widens (m, M), bins b over the new range and adds the old histogram re-binned
    (``upsample_rate`` parts per bin). Then the L2 search over bin ranges [s, e] (quantile steps alpha, beta;
    stop at the first error increase) gives (m + w s, m + w (e + 1)), w = fl32((M - m) / B), whose
    float32_divide_eps parameters (uniform.md §5.4) are the result. No batch: s = 1, z = 0.
    """
    from ..profiles.uniform import HISTOGRAM_OBSERVER_RULES

    r, lo, hi = _observer_rule("histogram observer rule", HISTOGRAM_OBSERVER_RULES, rule, midpoint, lo, hi)
    seq = list(batches) if isinstance(batches, (list, tuple)) else as_source_array(batches)
    arrays = [np.asarray(b) for b in seq]
    for t, b in enumerate(arrays):
        if b.dtype != _F32:
            raise QrefError(f"observe_histogram takes float32 batches, batch {t} is {b.dtype}; convert it with "
                            ".astype(np.float32)")
        if np.isnan(b).any():
            raise QrefError(f"batch {t} holds NaN: the histogram of a NaN range is not defined (torch's observer "
                            "raises); leave NaN out of the batches")
    hist = np.zeros(r.bins, _F32)
    mn, mx = np.float32(np.inf), np.float32(-np.inf)
    for b in arrays:
        x = b.reshape(-1)
        finite = x[np.abs(x) != np.inf]
        if finite.size == 0:
            continue
        bmin, bmax = finite.min(), finite.max()
        if np.isinf(mn):
            mn, mx, hist = bmin, bmax, _bin_counts(finite, r.bins, bmin, bmax)
            continue
        nm, nM = min(mn, bmin), max(mx, bmax)
        new = _bin_counts(finite, r.bins, nm, nM)
        hist = (hist + new if (nm == mn and nM == mx) else new + _rebin(hist, mn, mx, nm, nM, r)).astype(_F32)
        mn, mx = np.float32(nm), np.float32(nM)
    f0 = np.zeros((), _F32)
    if np.isinf(mn):
        s0, z0 = r.unobserved
        return ObservedHistogram(np.full((), s0, _F32), np.full((), z0, np.int64), np.full((), mn), np.full((), mx),
                                 hist, f0, f0)
    a, b = _search_range(hist, mn, mx, r)
    with np.errstate(all="ignore"):
        m0, M0 = np.minimum(a, np.float32(0)), np.maximum(b, np.float32(0))
        e = np.float32(np.finfo(np.float32).eps if eps is None else eps)
        if symmetric:
            s = np.maximum((np.maximum(-m0, M0) / np.float32((hi - lo) / 2)).astype(_F32), e)
            z = 0 if lo < 0 else ((lo + hi + 1) // 2 if midpoint == "ceil_midpoint" else (lo + hi) // 2)
        else:
            s = np.maximum(((M0 - m0) / np.float32(hi - lo)).astype(_F32), e)
            z = int(np.clip(lo - int(np.rint((m0 / s).astype(_F32))), lo, hi))
    return ObservedHistogram(np.full((), s, _F32), np.full((), z, np.int64), np.full((), mn), np.full((), mx), hist,
                             np.full((), a), np.full((), b))


def _divide_eps_balanced(mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat, dt: np.dtype
                         ) -> tuple[np.ndarray, np.ndarray]:
    """In the input dtype dt: s = max(fl((max - min) / (hi - lo)), eps32); d_lo = fl(min / s), d_hi = fl(max / s);
    z = round_half_even(clamp(fl(lo - d_lo) if fl(fl(lo + d_lo) + fl(hi + d_hi)) > 0 else fl(hi - d_hi), lo, hi))
    (uniform.md §5.2; torch 2.13 quantized_decomposed.choose_qparams_per_token_asymmetric)."""
    assert mn is not None and mx is not None
    lo, hi = dt.type(fmt.lo), dt.type(fmt.hi)
    m0, M0 = cast(mn, dt), cast(mx, dt)
    s = np.maximum(np.asarray((M0 - m0) / dt.type(fmt.hi - fmt.lo)).astype(dt), dt.type(np.finfo(np.float32).eps))
    dlo, dhi = np.asarray(m0 / s).astype(dt), np.asarray(M0 / s).astype(dt)
    err = np.asarray(np.asarray(lo + dlo).astype(dt) + np.asarray(hi + dhi).astype(dt)).astype(dt)
    z = np.where(err > 0, np.asarray(lo - dlo).astype(dt), np.asarray(hi - dhi).astype(dt))
    z = np.rint(np.clip(z, lo, hi))
    return s.astype(np.float64), z.astype(np.int64)


def _finfo_tiny(dt: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dt).tiny)


__all__ = ["FORMULAS", "METHODS", "Calibration", "ObservedHistogram", "ObservedRange", "calibrate", "observe_histogram",
           "observe_range"]
