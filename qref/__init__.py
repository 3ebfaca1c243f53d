"""qref: a bit-exact reference spec and simulator for low-precision numerics.

Element formats (FP8/FP6/FP4/E8M0/P3109/custom, integers) with every rounding and overflow policy:
``encode`` (values -> codes), ``decode`` (codes -> values), ``quantize`` (both). See docs/spec/.
"""

from . import mlir
from .calibrate import calibrate
from .core import decode, encode, quantize
from .errors import QrefError, UnknownNameError
from .formats import (
    FloatFormat,
    Format,
    IntFormat,
    float_format,
    formats,
    get_format,
    p3109_format,
    register_format,
)
from .policy import OVERFLOW_POLICIES, ROUNDING_MODES, CastPolicy
from .profiles import Profile, get_profile, profiles, register_profile
from .schemes import QArray, Scheme, scheme, scheme_from_spec

__version__ = "0.1.0"

__all__ = [
    "OVERFLOW_POLICIES",
    "ROUNDING_MODES",
    "CastPolicy",
    "FloatFormat",
    "Format",
    "IntFormat",
    "Profile",
    "QArray",
    "QrefError",
    "Scheme",
    "UnknownNameError",
    "__version__",
    "calibrate",
    "decode",
    "encode",
    "float_format",
    "formats",
    "get_format",
    "get_profile",
    "mlir",
    "p3109_format",
    "profiles",
    "quantize",
    "register_format",
    "register_profile",
    "scheme",
    "scheme_from_spec",
]
