"""PyTorch quantize / dequantize / fake-quantize ops (uniform family), shared by the ``torch`` (eager) and
``torch_compile`` targets.

Placeholder of the module layout: ``targets(backend, compiled)`` returns the quantization targets of one backend.
"""

from __future__ import annotations

from ..model import Target


def targets(backend: str, compiled: bool) -> list[Target]:
    """The quantization-op targets of ``backend`` (``compiled``: run under torch.compile, Inductor CPU)."""
    return []
