"""The pytest11 entry point ``qref`` (``pytest -p qref.pytest_plugin``); the plugin lives in
``qref.testing.pytest_plugin``."""

from .testing.pytest_plugin import *  # noqa: F403
from .testing.pytest_plugin import __all__  # noqa: F401
