"""Lookup (quantile) schemes (spec: docs/spec/lut.md): one package, dependencies one way.

    decision   the nearest-entry decisions on scaled values (lut.md §3.3-3.4): table_encode, nan_code; the
               stochastic rounding between neighbouring entries (lut.md §3.5): stochastic_table_encode
    reference  the readable definition: blocks, scales, decisions, dequantize (lut.md §3.2-§4, §7)
    fast       the fast path: decision tables, chunked quantize / dequantize (lut.md §3.6, informative; equal to
               the reference, which it imports; the reference never imports it)
    scheme     LookupScheme(name, table, geometry, rules): the builder, the spec, double quantization (lut.md §5)
               and the quantize / dequantize entry points (fast where it applies, else the reference)
The algorithms take the rules record (qref.profiles.lookup.LookupSchemeRules), the Table and the block geometry
(block_size, axis, or the static scales), never the scheme.

The emulated IEEE steps (rounding to a compute dtype, float32-computed 16-bit operations, the table argmin)
are qref.core.arith's; the tables are qref.tables'.
"""

from .decision import decision_points, nan_code, stochastic_table_encode, table_encode
from .scheme import DoubleQuant, DoubleQuantized, LookupScheme, from_spec, lookup_scheme, lookup_scheme_from_table

__all__ = ["DoubleQuant", "DoubleQuantized", "LookupScheme", "decision_points", "from_spec", "lookup_scheme",
           "lookup_scheme_from_table", "nan_code", "stochastic_table_encode", "table_encode"]
