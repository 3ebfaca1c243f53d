"""Tools that measure what a scheme does to a tensor (docs/analysis.md), one module per seam:

- ``elementwise``: error metrics of y against x (MSE, SQNR, ULPs, KL, ...) and ``metrics``, all of them at once;
- ``breakdown``: where the error sits: per-channel / per-block statistics, saturation and flush counts, scales;
- ``data``: deterministic LLM-like test tensors;
- ``schemetext``: the compact scheme syntax ``NAME[:KEY=VALUE,...]`` (``parse_scheme`` -> ``SchemeBuilder``);
- ``comparison``: ``evaluate`` and ``compare`` (a ``Comparison`` table); ``render``: ``ReportTable``;
- ``calibrate``, ``sweep``, ``plot`` (matplotlib on first use): calibration, exhaustive sweeps, figures.
"""

from .breakdown import (
    Breakdown,
    Counts,
    block_breakdown,
    block_view,
    channel_breakdown,
    counts,
    format_summary,
    scale_exponents,
    scale_values,
)
from .comparison import (
    COLUMNS,
    EVALUATE_STAGES,
    Comparison,
    Result,
    compare,
    evaluate,
)
from .data import (
    LLM_KINDS,
    llm_like,
)
from .elementwise import (
    Metrics,
    cosine_similarity,
    error_by_magnitude,
    kl_divergence,
    max_abs_error,
    max_rel_error,
    mean_error,
    metrics,
    mse,
    rmse,
    sqnr_db,
    ulp,
    ulp_error,
)
from .render import (
    ReportTable,
)
from .schemetext import (
    SchemeBuilder,
    parse_scheme,
)

__all__ = [
    "COLUMNS",
    "EVALUATE_STAGES",
    "LLM_KINDS",
    "Breakdown",
    "Comparison",
    "Counts",
    "Metrics",
    "ReportTable",
    "Result",
    "SchemeBuilder",
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
