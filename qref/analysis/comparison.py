"""Scheme comparison (analysis.md §6): ``evaluate`` one scheme on a tensor, ``compare`` several into a
``Comparison`` table (one row per scheme, columns ``COLUMNS``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.parallel import thread_limit
from ..errors import QrefError
from ..schemes.base import QArray, Scheme
from .breakdown import Breakdown, Counts, block_breakdown, channel_breakdown, counts
from .elementwise import Metrics, _f64, metrics
from .render import ReportTable
from .schemetext import SchemeBuilder, parse_scheme

# ---------------------------------------------------------------------------------------------------------
# §6 compare
# ---------------------------------------------------------------------------------------------------------
SchemeLike = Scheme | SchemeBuilder | str | Callable[[np.ndarray], Scheme]


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
    """Everything compare() computed for one scheme; ``y`` is the dequantized tensor (float64), computed from
    the QArray when read (not held: a comparison of many schemes keeps one QArray per scheme, not a float64
    copy of the tensor per scheme)."""

    label: str
    scheme: Scheme
    qarray: QArray
    metrics: Metrics
    counts: Counts
    channels: Breakdown | None
    blocks: Breakdown | None
    bits_per_element: float | None

    @property
    def y(self) -> np.ndarray:
        """qarray.dequantize(dtype=float64)."""
        return np.asarray(self.qarray.dequantize(dtype=np.float64), dtype=np.float64)

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


@dataclass
class Comparison(ReportTable):
    """compare()'s table: one row per scheme (columns ``COLUMNS``) and ``details`` (label -> Result)."""

    details: dict[str, Result] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = COLUMNS


def _as_recipe(item: SchemeLike, x: np.ndarray) -> tuple[str, Scheme, dict[str, Any]]:
    if isinstance(item, str):
        item = parse_scheme(item)
    if isinstance(item, SchemeBuilder):
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
    raise QrefError(f"cannot compare {item!r}: give a Scheme, a spec string such as 'int8:axis=0', a SchemeBuilder or "
                    "a callable x -> Scheme")


def evaluate(x: object, item: SchemeLike, *, label: str | None = None,
             quantize_kwargs: Mapping[str, Any] | None = None, channel_axis: int | None = 0,
             block_size: int | None = 32, block_axis: int = -1, bins: int | Sequence[float] = 128,
             smoothing: float = 0.5, progress: bool = False, threads: int | None = None,
             _x_counts: dict[Any, np.ndarray] | None = None) -> Result:
    """Quantize ``x`` with one scheme and compute its metrics, counts and breakdowns (one row of compare).
    quantize_kwargs: extra arguments of ``scheme.quantize`` (e.g. axis= of a block scheme). progress: a tqdm
    bar on stderr over the six stages (build, quantize, dequantize, metrics, counts, breakdowns). threads:
    threads of the quantize / dequantize / calibration kernels (default None: $QREF_NUM_THREADS, else every
    core; the row never depends on it, elements.md §2.11). _x_counts: x's KL histograms, kept by compare()
    across schemes. Memory: x as float64 and the dequantized tensor (float64) at most, each freed before the
    counts' second dequantization (performance.md §6)."""
    with thread_limit(threads):
        return _evaluate(x, item, label, quantize_kwargs, channel_axis, block_size, block_axis, bins, smoothing,
                         progress, _x_counts)


def _evaluate(x: object, item: SchemeLike, label: str | None, quantize_kwargs: Mapping[str, Any] | None,
              channel_axis: int | None, block_size: int | None, block_axis: int, bins: int | Sequence[float],
              smoothing: float, progress: bool, _x_counts: dict[Any, np.ndarray] | None) -> Result:
    from .sweep import progress_bar

    arr = np.asarray(x)
    if label is not None or isinstance(item, str):
        text = label or item
    else:
        text = (item.label or item.name) if isinstance(item, SchemeBuilder) else type(item).__name__
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
        if unspec is not None and keep is None and unspec.ndim:  # all False: the same mask without its bytes
            q.unspecified = np.broadcast_to(np.False_, unspec.shape)
        del unspec  # (keep holds the mask where it is needed)
        xa = _f64(arr)  # this scheme's float64 x, for the metrics only (performance.md §6)
        m = metrics(xa, y, where=keep, bins=bins, smoothing=smoothing, _x_counts=_x_counts)
        del xa  # the breakdowns widen x chunk by chunk
        stage("metrics")
        if keep is not None:  # unspecified elements are left out of breakdowns
            np.copyto(y, np.nan, where=~keep)
        ch = channel_breakdown(arr, y, channel_axis) if channel_axis is not None and arr.ndim >= 2 else None
        bl = block_breakdown(arr, y, block_size, block_axis) if block_size is not None and arr.ndim >= 1 else None
        del y
        c = counts(arr, q)  # dequantizes again: x and y held as float64 no longer
        stage("counts")
        stage("done")
    finally:
        if bar is not None:
            bar.close()
    return Result(label or lab, s, q, m, c, ch, bl, _bits_per_element(q))


EVALUATE_STAGES = ("built", "quantized", "dequantized", "metrics", "counts", "done")


def compare(x: object, schemes: Iterable[SchemeLike] | Mapping[str, SchemeLike], *, channel_axis: int | None = 0,
            block_size: int | None = 32, block_axis: int = -1, bins: int | Sequence[float] = 128,
            smoothing: float = 0.5, progress: bool = False, threads: int | None = None,
            keep: bool = True) -> Comparison:
    """One table row per scheme: metrics (§1), worst channel / block SQNR (§2), counts (§3), bits per element.

    schemes: Scheme objects, compact spec strings (``"int8:axis=0"``, ``"mxfp4"``, ``"nf4:block_size=64"``,
    see ``parse_scheme``), SchemeBuilders, callables x -> Scheme, or a mapping label -> any of those.
    channel_axis: axis of the per-channel breakdown (default 0; None: none; 1-D input: none).
    block_size / block_axis: the per-block breakdown's blocks (default 32 consecutive elements along the last
    axis, whatever the scheme's own blocks; None: none). bins / smoothing: KL histogram options (§1).
    Elements a scheme marks unspecified are left out of its metrics and counted in ``unspecified``.
    progress: one tqdm bar per scheme on stderr (``qref compare`` turns it on at a terminal).
    threads: threads of every kernel (default None: $QREF_NUM_THREADS, else every core; the table never depends
    on it, elements.md §2.11). keep: keep each scheme's Result (QArray, breakdowns) in ``details`` (default);
    False: the rows only, each Result dropped once its row is made (``details`` empty; ``qref compare``
    without ``--plot``). Memory: one QArray per scheme is kept (none with keep=False), and one scheme's float64
    x and y at a time (performance.md §6.2).
    """
    arr = np.asarray(x)
    items = list(schemes.items()) if isinstance(schemes, Mapping) else [(None, s) for s in schemes]
    if not items:
        raise QrefError("compare needs at least one scheme")
    rows: list[dict[str, Any]] = []
    details: dict[str, Result] = {}
    labels: set[str] = set()
    x_counts: dict[Any, np.ndarray] = {}  # x's KL histograms, counted once for every scheme
    for lab, item in items:
        r = evaluate(arr, item, label=lab, channel_axis=channel_axis, block_size=block_size,
                     block_axis=block_axis, bins=bins, smoothing=smoothing, progress=progress, threads=threads,
                     _x_counts=x_counts)
        base, k = r.label, 2
        while r.label in labels:
            r.label = f"{base}#{k}"
            k += 1
        labels.add(r.label)
        if keep:
            details[r.label] = r
        rows.append(r.row())
        del r  # keep=False: this scheme's QArray and breakdowns are freed before the next scheme runs
    return Comparison(rows, COLUMNS, details)


__all__ = ["COLUMNS", "EVALUATE_STAGES", "Comparison", "Result", "SchemeLike", "compare", "evaluate"]
