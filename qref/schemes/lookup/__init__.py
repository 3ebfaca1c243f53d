"""Lookup (quantile) schemes (spec: docs/spec/lut.md): one package, dependencies one way.

    decision   the nearest-entry decisions on scaled values (lut.md §3.3-3.4): table_encode, nan_code; the
               stochastic rounding between neighbouring entries (lut.md §3.5): stochastic_table_encode
    fast       the fast path's decision tables and pair gather (lut.md §3.6, informative; equal to the reference)
    scheme     LookupScheme: blocks, scales, double quantization, dequantize (lut.md §3-7)

The emulated IEEE steps (rounding to a compute dtype, float32-computed 16-bit operations, the table argmin)
are qref.core.arith's; the tables are qref.tables'.
"""

from .decision import decision_points, nan_code, stochastic_table_encode, table_encode
from .scheme import DoubleQuant, DoubleQuantized, LookupScheme, from_spec, lookup_scheme, lookup_scheme_from_table

__all__ = ["DoubleQuant", "DoubleQuantized", "LookupScheme", "decision_points", "from_spec", "lookup_scheme",
           "lookup_scheme_from_table", "nan_code", "stochastic_table_encode", "table_encode"]
