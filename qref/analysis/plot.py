"""Plots of formats, quantization error and block scales (matplotlib, an optional extra; guide: docs/analysis.md §7).

``pip install 'qref[notebooks]'`` (or just matplotlib) enables this module; matplotlib is imported when a
function is first called, and a missing install raises a QrefError saying so. Functions draw on an ``ax`` you
pass, or on a new ``matplotlib.figure.Figure`` (not registered with pyplot, so nothing accumulates in scripts
and tests); single-panel functions return the Axes (``ax.figure`` is its figure), multi-panel ones the Figure.
Save with ``fig.savefig("out.png")``; in a notebook, a Figure as a cell's last expression is displayed.

    number_line(fmt, log=False)             every finite value of a format on a line (log: positive magnitudes)
    format_grid(fmts, log=True)             number lines of several formats stacked on one axis (dynamic range)
    value_histogram(x, fmt=..., scale=...)  histogram of a tensor with the format's levels (times scale) on it
    error_vs_magnitude(x, ys)               rms error against |x| on log-spaced bins, one line per scheme
    comparison_bars(table, "sqnr_db")       one bar per row of an analysis.compare table
    scale_heatmap(q)                        log2 of every block / channel scale of a QArray as an image
    scale_rule_comparison(x, rules)         side by side: scaled block amax per MX scale rule, SQNR, clipping
    compare_figure(x, table)                the `qref compare --plot` figure (bars + error vs magnitude)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..schemes.base import QArray, normalize_axis
from .breakdown import block_view, scale_exponents, scale_values
from .comparison import Comparison, evaluate
from .elementwise import error_by_magnitude

__all__ = [
    "compare_figure",
    "comparison_bars",
    "error_vs_magnitude",
    "format_grid",
    "new_figure",
    "number_line",
    "scale_heatmap",
    "scale_rule_comparison",
    "value_histogram",
]

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")


def _mpl() -> Any:
    """The matplotlib module, imported lazily with a clear error when it is missing."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401  (checks the full install)
    except ImportError:
        raise QrefError("qref.plot needs matplotlib, an optional extra: pip install 'qref[notebooks]' "
                        "(or pip install matplotlib)") from None
    return matplotlib


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None,
               sharex: bool = False, sharey: bool = False, **subplot_kw: Any) -> tuple[Any, Any]:
    """(Figure, axes) without pyplot: axes is one Axes for 1x1, else a 2-D array (squeeze=False)."""
    _mpl()
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize or (6.4 * ncols if ncols > 1 else 6.4, 3.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=sharex, sharey=sharey, subplot_kw=subplot_kw or None)
    return fig, (axes[0, 0] if nrows == ncols == 1 else axes)


def _axes(ax: Any, figsize: tuple[float, float] = (6.4, 3.2)) -> Any:
    if ax is not None:
        return ax
    _, a = new_figure(figsize=figsize)
    return a


def _format_values(fmt: Format) -> tuple[np.ndarray, list[str]]:
    """(finite values, their classes) of a format of at most 16 bits, sorted, -0 dropped."""
    if fmt.bits > 16:
        raise QrefError(f"{fmt.name} has 2^{fmt.bits} codes; number lines are drawn for formats of at most 16 bits")
    vals = np.asarray(fmt.values, dtype=np.float64)
    codes = np.arange(vals.size)
    keep = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))
    if isinstance(fmt, IntFormat):
        keep &= (vals >= fmt.lo) & (vals <= fmt.hi)
    vals, codes = vals[keep], codes[keep]
    order = np.argsort(vals, kind="stable")
    vals, codes = vals[order], codes[order]
    classes = [fmt.classify(int(c)) if isinstance(fmt, FloatFormat) else ("zero" if v == 0 else "normal")
               for c, v in zip(codes, vals)]
    return vals, classes


_CLASS_COLORS = {"normal": "#1f77b4", "subnormal": "#ff7f0e", "zero": "#2ca02c"}


def number_line(fmt: str | Format, *, log: bool = False, ax: Any = None, signed: bool = True,
                label: bool = True) -> Any:
    """Every finite value of ``fmt`` as a tick on a number line (normal, subnormal and zero in three colors).

    log=False: linear axis over [-max, max] (``signed=False``: [0, max]). log=True: the positive values on a
    log2 axis (zero cannot be drawn). The title gives the count of finite values, the max, the smallest normal
    and the smallest positive value. Returns the Axes; ax.collections holds one LineCollection per class."""
    f = get_format(fmt)
    vals, classes = _format_values(f)
    cls = np.array(classes)
    if log or not signed:
        sel = vals > 0 if log else vals >= 0
        vals, cls = vals[sel], cls[sel]
    a = _axes(ax, (7.0, 1.8))
    for c in ("normal", "subnormal", "zero"):
        v = vals[cls == c]
        if v.size:
            a.vlines(v, 0, 0.7, colors=_CLASS_COLORS[c], linewidth=0.8, label=f"{c} ({v.size})")
    if log:
        a.set_xscale("log", base=2)
    a.set_ylim(0, 1)
    a.set_yticks([])
    if label:
        pos = vals[vals > 0]
        desc = f"{f.name}: {int(np.isfinite(np.asarray(f.values)).sum())} finite codes"
        if pos.size:
            desc += f", max {pos.max():g}, min positive {pos.min():g}"
        if isinstance(f, FloatFormat):
            desc += f", min normal {float(f.min_normal):g}"
        a.set_title(desc, fontsize=9)
        a.legend(loc="upper right", fontsize=7, frameon=False, ncol=3, borderaxespad=0.1)
    a.set_xlabel("|value| (log2 axis)" if log else "value")
    return a


def format_grid(formats: Sequence[str | Format], *, log: bool = True, row_height: float = 0.55) -> Any:
    """One number line per format, stacked on a shared x axis (log=True: positive values on a log2 axis, which
    shows each format's dynamic range and where its subnormals sit). Returns the Figure."""
    fmts = [get_format(f) for f in formats]
    if not fmts:
        raise QrefError("format_grid needs at least one format")
    fig, axes = new_figure(len(fmts), 1, figsize=(9.0, row_height * len(fmts) + 0.9), sharex=True)
    for a, f in zip(axes[:, 0], fmts):
        number_line(f, log=log, ax=a, label=False)
        a.set_ylabel(f.name, rotation=0, ha="right", va="center", fontsize=8)
        a.set_xlabel("")
    axes[-1, 0].set_xlabel("|value| (log2 axis)" if log else "value")
    return fig


def value_histogram(x: object, *, fmt: str | Format | None = None, levels: object = None, scale: float = 1.0,
                    bins: int = 200, ax: Any = None, log: bool = True, max_levels: int = 512) -> Any:
    """Histogram of the values of ``x`` with a format's levels (``fmt.values * scale``) or explicit ``levels``
    drawn as thin vertical lines (only those inside the data's range, at most ``max_levels``, evenly
    thinned). log: logarithmic count axis. Returns the Axes (ax.patches: the bars; ax.collections: levels)."""
    xa = np.asarray(x, dtype=np.float64).ravel()
    xa = xa[np.isfinite(xa)]
    a = _axes(ax)
    a.hist(xa, bins=bins, color="#9ecae1", edgecolor="none", log=log, label="x")
    lv = None
    if levels is not None:
        lv = np.asarray(levels, dtype=np.float64).ravel()
    elif fmt is not None:
        lv = _format_values(get_format(fmt))[0] * float(scale)
    if lv is not None and xa.size:
        lo, hi = xa.min(), xa.max()
        pad = 0.05 * max(hi - lo, 1e-300)
        lv = np.unique(lv[np.isfinite(lv) & (lv >= lo - pad) & (lv <= hi + pad)])
        if lv.size > max_levels:
            lv = lv[np.linspace(0, lv.size - 1, max_levels).astype(int)]
        if lv.size:
            a.vlines(lv, 0, 1, transform=a.get_xaxis_transform(), colors="#d62728", linewidth=0.5, alpha=0.7,
                     label=f"levels ({lv.size})")
        a.legend(fontsize=7, frameon=False)
    a.set_xlabel("value")
    a.set_ylabel("count")
    return a


def _ys(ys: Any) -> list[tuple[str, np.ndarray]]:
    if isinstance(ys, Comparison):
        return [(k, r.y) for k, r in ys.details.items()]
    if isinstance(ys, Mapping):
        return [(str(k), np.asarray(v.dequantize(dtype=np.float64) if isinstance(v, QArray) else v))
                for k, v in ys.items()]
    raise QrefError("ys must be a Comparison (analysis.compare) or a mapping label -> dequantized array / QArray")


def error_vs_magnitude(x: object, ys: Any, *, relative: bool = False, bins: int = 40, ax: Any = None) -> Any:
    """RMS error (or relative error) of each approximation against |x| on log-spaced bins (one line per scheme;
    ``ys``: an analysis.compare table or a mapping label -> array / QArray). Returns the Axes."""
    xa = np.asarray(x, dtype=np.float64)
    a = _axes(ax)
    xs = np.abs(xa[np.isfinite(xa) & (xa != 0)])
    if xs.size == 0:
        raise QrefError("x has no finite nonzero values to bin by magnitude")
    edges = np.geomspace(xs.min(), xs.max() * (1 + 1e-12), bins + 1) if xs.max() > xs.min() else \
        np.array([xs.min() / 2, xs.min() * 2])
    centers = np.sqrt(edges[:-1] * edges[1:])
    for i, (lab, y) in enumerate(_ys(ys)):
        _, rms, _ = error_by_magnitude(xa, y, bins=edges, relative=relative)
        rms = np.where(rms > 0, rms, np.nan)  # exact bins cannot be drawn on the log axis
        a.plot(centers, rms, marker=".", markersize=3, linewidth=1, color=_PALETTE[i % len(_PALETTE)], label=lab)
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("|x|")
    a.set_ylabel("rms relative error" if relative else "rms |error|")
    a.legend(fontsize=7, frameon=False, ncol=2)
    return a


def comparison_bars(table: Comparison, metric: str = "sqnr_db", *, ax: Any = None) -> Any:
    """Horizontal bars of one column of an analysis.compare table (one bar per scheme). Returns the Axes."""
    vals = [float("nan") if v is None else float(v) for v in table.column(metric)]
    labels = table.column("scheme")
    a = _axes(ax, (6.4, 0.35 * len(labels) + 1.0))
    finite = [v for v in vals if math.isfinite(v)]
    cap = (max(finite) * 1.1 if finite and max(finite) > 0 else 1.0)
    shown = [cap if math.isinf(v) and v > 0 else (0.0 if not math.isfinite(v) else v) for v in vals]
    pos = np.arange(len(labels))
    a.barh(pos, shown, color=[_PALETTE[i % len(_PALETTE)] for i in range(len(labels))])
    for p, v in zip(pos, vals):
        a.text(shown[p], p, f" {v:.4g}", va="center", fontsize=7)
    a.set_yticks(pos, labels=labels, fontsize=8)
    a.invert_yaxis()
    a.set_xlabel(metric)
    return a


def _image(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:
        return v.reshape(1, 1)
    if v.ndim == 1:
        return v.reshape(-1, 1)
    return v.reshape(-1, v.shape[-1])


def scale_heatmap(q: QArray | np.ndarray, *, ax: Any = None, title: str | None = None, cmap: str = "viridis",
                  colorbar: bool = True, **imshow_kw: Any) -> Any:
    """log2 of every scale of a QArray (scale_exponents: the E8M0 exponent of MX blocks) as an image:
    rows = all leading dimensions, columns = the last dimension (blocks along the last axis for block schemes).
    An ndarray is drawn as given (e.g. a difference of two exponent maps). Returns the Axes (ax.images[0])."""
    vals = scale_exponents(q) if isinstance(q, QArray) else np.asarray(q, dtype=np.float64)
    img = _image(np.where(np.isfinite(vals), vals, np.nan))
    a = _axes(ax, (6.4, 4.0))
    im = a.imshow(img, aspect="auto", interpolation="nearest", cmap=cmap, **imshow_kw)
    if colorbar:
        a.figure.colorbar(im, ax=a, label="log2 scale")
    if title is None and isinstance(q, QArray):
        title = f"{getattr(q.scheme, 'name', '')}: log2(scale) per block"
    if title:
        a.set_title(title, fontsize=9)
    a.set_xlabel("block (last axis)" if img.shape[1] > 1 else "")
    a.set_ylabel("row")
    return a


MX_RULES = ("floor", "ceil", "even", "rceil")


def scale_rule_comparison(x: object, rules: Sequence[str] = MX_RULES, *, scheme: str = "mxfp4", axis: int = -1,
                          bins: int = 60, **options: Any) -> Any:
    """Side-by-side MX scale rules (block.md §4): for each rule, the distribution of the scaled block maximum
    amax / X (X the block's decoded E8M0 scale) against the element format's max; values past the max are
    clipped (floor can clip, ceil and rceil cannot). Panel titles give SQNR, clipped and flushed counts.
    options go to qref.scheme (e.g. profile="torchao_rceil"). Returns the Figure (one column per rule)."""
    from ..schemes.base import scheme as make

    xa = np.asarray(x)
    if xa.ndim == 0:
        raise QrefError("scale_rule_comparison needs an array with at least one dimension")
    fig, axes = new_figure(2, len(rules), figsize=(3.2 * len(rules), 5.2))
    tops = []
    rows = []
    for rule in rules:
        s = make(scheme, scale_rule=rule, **options)
        k = int(getattr(s, "block_size", 0) or 0)
        if getattr(s, "kind", None) != "mx" or not k:
            raise QrefError(f"{scheme} is not an MX block scheme; scale rules are MX parameters (block.md §4)")
        r = evaluate(xa, s, label=rule, quantize_kwargs={"axis": axis}, block_size=k, block_axis=axis)
        X = scale_values(r.qarray)
        amax = np.moveaxis(np.abs(block_view(np.asarray(xa, np.float64), k, axis)).max(axis=-1), -1,
                           normalize_axis(axis, xa.ndim))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (amax / X).ravel()
        ratio = ratio[np.isfinite(ratio) & (amax.ravel() > 0)]
        tops.append(ratio.max() if ratio.size else 1.0)
        rows.append((rule, s, r, ratio))
    hi = max(tops) * 1.05
    sqnrs = [r.blocks.sqnr_db[np.isfinite(r.blocks.sqnr_db)] if r.blocks is not None else np.array([])
             for _, _, r, _ in rows]
    allq = np.concatenate(sqnrs) if sqnrs else np.array([])
    qbins = np.linspace(allq.min(), allq.max(), bins + 1) if allq.size and allq.max() > allq.min() else bins
    for j, (rule, s, r, ratio) in enumerate(rows):
        a = axes[0, j]
        emax = float(s.element_max) * 2.0 ** int(getattr(s, "element_scale_exp", 0))
        a.hist(ratio, bins=np.linspace(0, hi, bins + 1), color=_PALETTE[j % len(_PALETTE)])
        a.axvline(emax, color="k", linestyle="--", linewidth=1)
        a.axvspan(emax, hi, color="#d62728", alpha=0.08)
        c = r.counts
        a.set_title(f"{rule}: SQNR {r.metrics.sqnr_db:.2f} dB\nclipped {c.clipped}, flushed {c.flushed}",
                    fontsize=8)
        a.set_xlabel("block amax / scale")
        if j == 0:
            a.set_ylabel("blocks")
        b = axes[1, j]
        b.hist(sqnrs[j], bins=qbins, color=_PALETTE[j % len(_PALETTE)])
        b.set_xlabel("per-block SQNR (dB)")
        if j == 0:
            b.set_ylabel("blocks")
    fig.suptitle(f"{scheme}: scale rules (dashed: element max {float(rows[0][1].element_max):g})", fontsize=10)
    return fig


def compare_figure(x: object, table: Comparison, *, metric: str = "sqnr_db") -> Any:
    """Two panels for a compare table: bars of ``metric`` and rms error against |x|. Returns the Figure."""
    n = len(table)
    fig, axes = new_figure(1, 2, figsize=(13.0, max(3.2, 0.35 * n + 1.2)))
    comparison_bars(table, metric, ax=axes[0, 0])
    error_vs_magnitude(x, table, ax=axes[0, 1])
    return fig
