"""Where the error sits: per-channel / per-block breakdowns, saturation / clipping / flush counts and the
scales of a QArray (analysis.md §2-§4)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..schemes.base import QArray, Scheme, normalize_axis
from .elementwise import _f64, _pair
from .render import ReportTable


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
    """Reductions over the last axis of grouped arrays, using only ``valid`` elements. The groups are taken
    in chunks of rows (each row's reductions alone: the same sums as over the whole array at once), so that
    every temporary stays cache-sized."""
    shape, k = xg.shape[:-1], xg.shape[-1]
    rows = math.prod(shape)
    x2, y2, v2 = (a.reshape(rows, k) for a in (xg, yg, valid))
    sig, noise, esum, emax, xmax = (np.empty(rows) for _ in range(5))
    cnt = np.empty(rows, dtype=np.int64)
    contiguous = all(a.flags.c_contiguous for a in (xg, yg, valid))
    # other memory orders: one chunk, the arrays np.where builds in that order (their sums follow the order)
    step = max(1, _ROWS_CHUNK // max(k, 1)) if contiguous else max(rows, 1)
    for r0 in range(0, rows, step):
        r = slice(r0, r0 + step)
        xc, yc, vc = _f64(x2[r]), y2[r], v2[r]  # x may be float32 / float16: float64 per chunk (exact)
        if contiguous and vc.all():  # the same values np.where would build, without the masks
            e, xs = yc - xc, xc
            cnt[r] = k
        else:
            e = np.where(vc, yc - xc, 0.0)
            xs = np.where(vc, xc, 0.0)
            cnt[r] = vc.sum(axis=-1)
        np.sum(xs * xs, axis=-1, out=sig[r])
        np.max(np.abs(xs), axis=-1, initial=0.0, out=xmax[r])
        np.sum(e, axis=-1, out=esum[r])
        np.sum(e * e, axis=-1, out=noise[r])
        np.max(np.abs(e, out=e), axis=-1, initial=0.0, out=emax[r])  # e is a new array: overwritten last
    sig, noise, esum, emax, xmax, cnt = (a.reshape(shape) for a in (sig, noise, esum, emax, xmax, cnt))
    with np.errstate(divide="ignore", invalid="ignore"):
        mse_ = noise / cnt
        mean_ = esum / cnt
        sq = 10.0 * np.log10(sig / noise)
    sq = np.where(noise == 0, np.inf, np.where(sig == 0, -np.inf, sq))
    sq = np.where(cnt == 0, np.nan, sq)
    return {"count": cnt, "mse": np.where(cnt > 0, mse_, np.nan), "sqnr_db": sq, "max_abs_error": emax,
            "mean_error": np.where(cnt > 0, mean_, np.nan), "amax": xmax}


_ROWS_CHUNK = 1 << 16  # elements per chunk of rows in _group_stats


def _pair_x(x: object, y: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_pair without the float64 copy of a float16 / float32 x (_group_stats widens it chunk by chunk: the
    same values; memory, performance.md §6)."""
    xa = np.asarray(x)
    if xa.dtype not in (np.float16, np.float32):
        return _pair(x, y)
    ya = _f64(y)
    if xa.shape != ya.shape:
        raise QrefError(f"x and y must have the same shape, got {xa.shape} and {ya.shape}")
    m = np.isfinite(xa)
    m &= np.isfinite(ya)
    return xa, ya, m


def channel_breakdown(x: object, y: object, axis: int = 0) -> Breakdown:
    """Error statistics per index of ``axis`` (default 0: the output channels of a (out, in) weight)."""
    xa, ya, m = _pair_x(x, y)
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
    xa, ya, m = _pair_x(x, y)
    if xa.ndim == 0:
        xa, ya, m = xa.reshape(1), ya.reshape(1), m.reshape(1)
    ax = normalize_axis(axis, xa.ndim)
    st = _group_stats(block_view(xa, block_size, ax), block_view(ya, block_size, ax),
                      block_view(m, block_size, ax, pad=False).astype(bool))
    st = {k: np.moveaxis(v, -1, ax) for k, v in st.items()}
    return Breakdown("block", ax, int(block_size), **st)


# ---------------------------------------------------------------------------------------------------------
# §3 saturation, clipping, flushing (generic over every kind of scheme)
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
    from ..core.decode import gather_codes

    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise QrefError(f"element codes must be integers, got dtype {c.dtype}")
    if c.size and not (c.dtype.kind == "u" and (1 << (8 * c.dtype.itemsize)) <= table.size):
        lo, hi = int(c.min()), int(c.max())
        if lo < 0 or hi >= table.size:
            raise QrefError(f"element codes must lie in [0, {table.size}); found values in [{lo}, {hi}]")
    return gather_codes(c, table)


def counts(x: object, q: QArray, y: object | None = None) -> Counts:
    """Saturation / clipping / flush / overflow counts of ``q = scheme.quantize(x)`` (analysis.md §3).

    ``y`` (optional) is q.dequantize(float64) if already computed. Clipping needs the outward direction of an
    extreme code; it is measured by dequantizing once more with every saturated code moved one level inward
    (this works for any scheme, including affine groups with negative scales); that spacing also gives the
    half-step threshold of ``clipped``. Memory: x is read in float64 chunks, and y is dropped (when not given)
    before the second dequantization (performance.md §6)."""
    xa = np.asarray(x)
    _f64(xa.reshape(-1)[:0])  # the dtype check, on no elements
    ya = _f64(q.dequantize(dtype=np.float64) if y is None else y)
    unspec = np.zeros(xa.shape, bool) if q.unspecified is None else np.asarray(q.unspecified, bool)
    # ok = finite x, specified; the counts in chunks of _ROWS_CHUNK elements (integer counts: any order)
    xf, yf, uf = (np.broadcast_to(a, xa.shape).reshape(-1) for a in (xa, ya, unspec))
    okf = np.empty(xf.size, dtype=bool)
    flushed = nonfinite = 0
    for i in range(0, xf.size, _ROWS_CHUNK):
        sl = slice(i, i + _ROWS_CHUNK)
        o = okf[sl]
        xc = _f64(xf[sl])  # exact
        np.isfinite(xc, out=o)
        o &= ~uf[sl]
        flushed += int(np.count_nonzero(o & (xc != 0) & (yf[sl] == 0)))
        nonfinite += int(np.count_nonzero(o & ~np.isfinite(yf[sl])))
    ok = okf.reshape(xa.shape)
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
            top, bot = codes == hi, (codes == lo) & (lo != hi)
            if codes.dtype.kind in "iu" and lo < hi and np.iinfo(codes.dtype).min <= lo and \
                    hi <= np.iinfo(codes.dtype).max:
                inner = codes.copy()  # hi - 1 and lo + 1 lie in [lo, hi]: the codes' dtype holds them
                inner[top] = hi - 1
                inner[bot] = lo + 1
            else:
                ev = codes.astype(np.int64)
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
        del top, bot, ok, okf
        sat = int(np.count_nonzero(sat_mask))
        if sat:
            at = np.flatnonzero(sat_mask)  # only the saturated elements can be clipped
            del sat_mask
            ys = ya.reshape(-1)[at]
            del ya, yf  # y's full array is not needed below
            q_in = dataclasses.replace(q, codes=inner.astype(codes.dtype, copy=False))
            del inner
            y_in = _f64(q_in.dequantize(dtype=np.float64)).reshape(-1)[at]
            with np.errstate(invalid="ignore"):
                step = ys - y_in  # outward step: the spacing to the next level inward, signed
                beyond = (_f64(xa.reshape(-1)[at]) - ys) * np.sign(step) > np.abs(step) / 2
            clip = int(np.count_nonzero(beyond))
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
        from ..core.decode import decode

        return decode(s, fmt, dtype=np.float64)
    return s.astype(np.float64)


def scale_exponents(q: QArray) -> np.ndarray:
    """log2 of |scale| for every scale of ``q`` (integers for E8M0 MX scales: byte - 127); -inf for a zero
    scale, NaN for a NaN scale."""
    v = np.abs(scale_values(q))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(v)


def format_summary(names: Iterable[str | Format]) -> ReportTable:
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
    return ReportTable(rows, ("format", "bits", "E", "M", "bias", "max", "min_normal", "min_positive", "binades",
                        "finite_values", "nan", "inf"))


__all__ = ["Breakdown", "Counts", "block_breakdown", "block_view", "channel_breakdown", "counts", "format_summary",
           "scale_exponents", "scale_values"]
