"""Keras 3 on the JAX backend. Placeholder of the module layout; targets are added by issue 31."""

from __future__ import annotations

from ..model import Target
from . import require

BACKEND = "keras"
DISTRIBUTIONS = ("keras",)


def targets() -> list[Target]:
    require("keras", backend=BACKEND, hint="pip install keras")
    return []
