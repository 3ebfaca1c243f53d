"""Exports for consumers outside Python (docs/vectors.md §8), one module each:

    mlir         self-checking StableHLO files (the text from qref.interop.mlir.stablehlo)
    jsonl        JSON lines, TestFloat-like hex strings per array
    hex          hex vectors and $readmemh files for RTL testbenches and C models (§8.1)
    hex_verify   a device's hex results read back and compared field by field
"""

from .hex import (
    HEX_FLAGS,
    HEX_OPERATIONS,
    HEX_VERSION,
    HexColumn,
    case_dir,
    export_hex,
    hex_flags,
    hex_reason,
    to_hex,
)
from .hex_verify import (
    HexMismatch,
    HexReport,
    HexVectors,
    read_hex_vectors,
    verify_hex,
)
from .jsonl import (
    export_jsonl,
    to_jsonl,
)
from .mlir import (
    MLIR_TYPES,
    NotExpressible,
    export_mlir,
    mlir_expressible,
    mlir_reason,
    quantize_to_mlir,
    returning_module,
    to_mlir,
)

__all__ = [
    "HEX_FLAGS",
    "HEX_OPERATIONS",
    "HEX_VERSION",
    "MLIR_TYPES",
    "HexColumn",
    "HexMismatch",
    "HexReport",
    "HexVectors",
    "NotExpressible",
    "case_dir",
    "export_hex",
    "export_jsonl",
    "export_mlir",
    "hex_flags",
    "hex_reason",
    "mlir_expressible",
    "mlir_reason",
    "quantize_to_mlir",
    "read_hex_vectors",
    "returning_module",
    "to_hex",
    "to_jsonl",
    "to_mlir",
    "verify_hex",
]
