"""PyTorch under ``torch.compile`` (Inductor, CPU): the element casts and quantization ops of the ``torch``
backend, each compiled, so that a difference between eager and compiled code is a finding of its own."""

from __future__ import annotations

from ..model import Target
from . import _torch_casts, _torch_quant, require

BACKEND = "torch_compile"
DISTRIBUTIONS = ("torch",)


def targets() -> list[Target]:
    require("torch", backend=BACKEND, hint="pip install torch")
    return _torch_casts.targets(BACKEND, compiled=True) + _torch_quant.targets(BACKEND, compiled=True)


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
