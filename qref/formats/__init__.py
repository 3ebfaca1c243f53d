"""Data layer: element-format records (``records``) and the cast policy (``policy``); spec: elements.md §1-§2.

Records import only ``qref.errors``; everything above (core, profiles, schemes) reads them, never the reverse.
"""

from .policy import (
    DEFAULT_POLICY,
    INPUT_SUBNORMAL_POLICIES,
    INT_CASTS,
    NAN_POLICIES,
    OVERFLOW_POLICIES,
    ROUNDING_MODES,
    SOURCE_POLICIES,
    STOCHASTIC_MODES,
    SUBNORMAL_POLICIES,
    CastPolicy,
    ResolvedPolicy,
)
from .records import (
    ECOSYSTEMS,
    INF_ENCODINGS,
    NAN_ENCODINGS,
    FloatFormat,
    Format,
    IntFormat,
    float_format,
    formats,
    get_format,
    p3109_format,
    register_format,
)

__all__ = [
    "DEFAULT_POLICY",
    "ECOSYSTEMS",
    "INF_ENCODINGS",
    "INPUT_SUBNORMAL_POLICIES",
    "INT_CASTS",
    "NAN_ENCODINGS",
    "NAN_POLICIES",
    "OVERFLOW_POLICIES",
    "ROUNDING_MODES",
    "SOURCE_POLICIES",
    "STOCHASTIC_MODES",
    "SUBNORMAL_POLICIES",
    "CastPolicy",
    "FloatFormat",
    "Format",
    "IntFormat",
    "ResolvedPolicy",
    "float_format",
    "formats",
    "get_format",
    "p3109_format",
    "register_format",
]
