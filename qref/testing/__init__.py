"""The testing kit for backends: bit-exact assertions (``assertions``), hypothesis strategies (``strategies``)
and the pytest plugin (``pytest_plugin``); see docs/testing-backends.md."""

from .assertions import *  # noqa: F403
from .assertions import __all__  # noqa: F401  (the kit's API is the assertions')
