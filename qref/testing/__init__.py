"""The testing kit for backends: bit-exact assertions (``assertions``), hypothesis strategies (``strategies``)
and the pytest plugin (``pytest_plugin``); see docs/testing-backends.md."""

from .assertions import (
    MISMATCH_CLASSES,
    NAN_POLICIES,
    CodeMismatchError,
    ConformanceError,
    Mismatch,
    MismatchReport,
    assert_codes_equal,
    assert_conforms,
    assert_values_equal,
    compare_codes,
)

__all__ = [
    "MISMATCH_CLASSES",
    "NAN_POLICIES",
    "CodeMismatchError",
    "ConformanceError",
    "Mismatch",
    "MismatchReport",
    "assert_codes_equal",
    "assert_conforms",
    "assert_values_equal",
    "compare_codes",
]
