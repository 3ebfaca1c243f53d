"""Block-scaled schemes (spec: docs/spec/block.md): one package, dependencies one way.

    exponents, mx_reference, nvfp4_reference, affine   the readable definitions (block.md §3-§6)
    fast                                             fast paths: import the references, never the reverse
    mx, nvfp4                                        entry points: fast where it applies, else the reference
    scheme                                           BlockScheme(format, rules, profile): the builder, the
                                                     spec, quantize/dequantize
The algorithms take the kind's rules record (qref.profiles.block: MXRules, FloatScaleRules, AffineRules) and the
BlockFormat (qref.formats.block), never the scheme.
"""

from .scheme import (
    CHOICES,
    DEFAULT_PROFILE,
    FIELD_NAMES,
    KINDS,
    NAMED_SCHEMES,
    RULE_FIELDS,
    SPEC_KEYS,
    BlockFormat,
    BlockScheme,
)

__all__ = ["CHOICES", "DEFAULT_PROFILE", "FIELD_NAMES", "KINDS", "NAMED_SCHEMES", "RULE_FIELDS", "SPEC_KEYS",
           "BlockFormat", "BlockScheme"]
