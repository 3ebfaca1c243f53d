"""Conformance vectors: the Case record, suites on disk (write / load / verify), the generator, exports
(docs/vectors.md).

    from qref.conformance import load_suite
    suite = load_suite("conformance/v1")
    for case in suite.select("elements/float8_e4m3fn/f32/*", policy={"rounding": "nearest_even"}):
        got = my_backend_cast(case.inputs["x"])            # numpy float32 in, uint8 codes out
        assert (got == case.expected["codes"]).all(), case.id
"""

from .case import Case, expected_from_qarray, format_record, policy_record
from .generate import generate
from .schema import SCHEMA, SCHEMA_VERSION, validate_manifest
from .suite import Suite, SuiteError, VerifyReport, load_suite, verify_suite, write_suite

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "Case",
    "Suite",
    "SuiteError",
    "VerifyReport",
    "expected_from_qarray",
    "format_record",
    "generate",
    "load_suite",
    "policy_record",
    "validate_manifest",
    "verify_suite",
    "write_suite",
]
