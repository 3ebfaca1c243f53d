"""Compatibility path of ``qref.interop.mlir`` (``qref.mlir.parse_type`` and ``from qref.mlir import ...`` keep
working), and the public export of a user's tensor as a self-checking StableHLO file (``quantize_to_mlir``)."""

from .conformance.export import quantize_to_mlir
from .interop.mlir import *  # noqa: F403
from .interop.mlir import __all__ as _names

__all__ = [*_names, "quantize_to_mlir"]
