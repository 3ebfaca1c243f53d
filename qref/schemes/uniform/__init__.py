"""Uniform (affine) quantization (spec: docs/spec/uniform.md): one package, dependencies one way.

    validation      UniformRecord: the fields and their checks, block geometry, the one block-size parser
    reference       the definition: quantize's float steps and integer tail, float storage, dequantize
    fast            fast paths: import the reference, never the reverse (uniform.md §2.5)
    entry           entry points: chunks of rows, vector loops, fast where it applies, else the reference
    scheme          UniformScheme (quantize / dequantize), build_uniform, to_spec / from_spec
    requantize      codes of one uniform scheme to another (uniform.md §2.7)
"""

from ...profiles.uniform import DEFAULT_PROFILE, UniformArithmetic
from .entry import CHUNK
from .reference import cast, fma32, round_fraction, round_to_int
from .scheme import UniformScheme, build_uniform, from_spec
from .validation import UniformRecord, arithmetic_for, parse_block_size

__all__ = ["CHUNK", "DEFAULT_PROFILE", "UniformArithmetic", "UniformRecord", "UniformScheme", "arithmetic_for",
           "build_uniform", "cast", "fma32", "from_spec", "parse_block_size", "round_fraction", "round_to_int"]
