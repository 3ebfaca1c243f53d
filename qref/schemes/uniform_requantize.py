"""Compatibility path: requantization lives in ``qref.schemes.uniform.requantize``."""

from .uniform.requantize import (
    FORMS,
    RULES,
    RequantizeArithmetic,
    check,
    merged_constants,
    requantize,
    requantize_arithmetic,
)

__all__ = ["FORMS", "RULES", "RequantizeArithmetic", "check", "merged_constants", "requantize",
           "requantize_arithmetic"]
