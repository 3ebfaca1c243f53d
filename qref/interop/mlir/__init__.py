"""MLIR quant types <-> qref schemes (mlir-types.md): ``parser.parse_type`` (the parser) and
``types.format_type`` (the records and the printer)."""

from .parser import parse_type
from .types import AnyType, CalibratedType, MlirParseError, QuantileType, format_float, format_type

__all__ = ["AnyType", "CalibratedType", "MlirParseError", "QuantileType", "format_float", "format_type",
           "parse_type"]
