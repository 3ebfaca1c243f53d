"""Compatibility path of ``qref.interop.mlir`` (``qref.mlir.parse_type`` and ``from qref.mlir import ...`` keep
working)."""

from .interop.mlir import *  # noqa: F403
from .interop.mlir import __all__  # noqa: F401
