"""Compatibility path: the hypothesis strategies live in ``qref.testing.strategies`` (``import qref.strategies as
qs`` keeps working)."""

from .testing.strategies import *  # noqa: F403
from .testing.strategies import __all__  # noqa: F401
