"""qref: a bit-exact reference spec and simulator for low-precision numerics.

Element formats (FP8/FP6/FP4/E8M0/P3109/custom, integers) with every rounding and overflow policy:
``encode`` (values -> codes), ``decode`` (codes -> values), ``quantize`` (both). See docs/spec/.
"""

from . import analysis, conformance, mlir, mma, profiles, recipes, transforms
from .analysis import plot
from .analysis.calibrate import calibrate
from .core import decode, encode, quantize
from .errors import QrefError, UnknownNameError
from .formats import FloatFormat, Format, IntFormat, float_format, formats, get_format, p3109_format, register_format
from .formats.policy import OVERFLOW_POLICIES, ROUNDING_MODES, CastPolicy
from .interop.packing import LAYOUTS, pack, unpack
from .mma.probe import probe_matmul
from .profiles import CastRule, Profile, get_profile, register_profile, resolve_profile
from .schemes import QArray, Scheme, scheme, scheme_from_spec
from .schemes.block import BlockScheme
from .schemes.lookup import DoubleQuantized, LookupScheme, lookup_scheme_from_table
from .schemes.uniform.requantize import RequantizeArithmetic, requantize
from .tables import Table, dynamic_map, get_table, lloyd_max_table, nf_table, quantile_table, register_table

__version__ = "0.1.0"

__all__ = [
    "LAYOUTS",
    "OVERFLOW_POLICIES",
    "ROUNDING_MODES",
    "BlockScheme",
    "CastPolicy",
    "CastRule",
    "DoubleQuantized",
    "FloatFormat",
    "Format",
    "IntFormat",
    "LookupScheme",
    "Profile",
    "QArray",
    "QrefError",
    "RequantizeArithmetic",
    "Scheme",
    "Table",
    "UnknownNameError",
    "__version__",
    "analysis",
    "calibrate",
    "conformance",
    "decode",
    "dynamic_map",
    "encode",
    "float_format",
    "formats",
    "get_format",
    "get_profile",
    "get_table",
    "lloyd_max_table",
    "lookup_scheme_from_table",
    "mlir",
    "mma",
    "nf_table",
    "p3109_format",
    "pack",
    "plot",
    "probe_matmul",
    "profiles",
    "quantile_table",
    "quantize",
    "recipes",
    "register_format",
    "register_profile",
    "register_table",
    "requantize",
    "resolve_profile",
    "scheme",
    "scheme_from_spec",
    "transforms",
    "unpack",
]
