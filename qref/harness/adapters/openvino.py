"""OpenVINO (CPU plugin). Placeholder of the module layout; targets are added by issue 31."""

from __future__ import annotations

from ..model import Target
from . import require

BACKEND = "openvino"
DISTRIBUTIONS = ("openvino",)


def targets() -> list[Target]:
    require("openvino", backend=BACKEND, hint="pip install openvino")
    return []
