"""Core primitives: exact input triples, the rounding primitive, encode and decode (spec: elements.md)."""

from .decode import decode
from .encode import encode
from .quantize import quantize

__all__ = ["decode", "encode", "quantize"]
