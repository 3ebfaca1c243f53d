"""Quantization schemes built on the element core: cast, uniform (affine integer), block (MX, NVFP4, MLX
affine) and lookup (NF4...). Importing this package registers every family with ``qref.scheme``."""

from . import block, cast, lookup, tiles, uniform  # noqa: F401  (registration side effects)
from .base import QArray, Scheme, register_family, scheme, scheme_from_spec, scheme_names

__all__ = ["QArray", "Scheme", "register_family", "scheme", "scheme_from_spec", "scheme_names"]
