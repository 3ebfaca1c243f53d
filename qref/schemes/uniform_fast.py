"""Compatibility path: the uniform fast paths live in ``qref.schemes.uniform.fast``."""

from .uniform.fast import (
    BUFSIZE,
    KCHUNK,
    dequantize_float,
    half_away_biased,
    integer_tail_applies,
    integer_tail_fast,
    quantize_float32,
    round_integral,
    round_to_int_fast,
)

__all__ = ["BUFSIZE", "KCHUNK", "dequantize_float", "half_away_biased", "integer_tail_applies", "integer_tail_fast",
           "quantize_float32", "round_integral", "round_to_int_fast"]
