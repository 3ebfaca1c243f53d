"""Backend adapters, one module per backend (docs/conformance.md §1).

Each module ``qref/harness/adapters/<backend>.py`` defines

    BACKEND: str                      its name (= the module name)
    DISTRIBUTIONS: tuple[str, ...]    the pip distributions whose versions the report records
    def targets() -> list[Target]     the APIs under test, per family; raises BackendMissing (with the reason)
                                      when the library is not installed

Every target calls the real library: no adapter re-implements the semantics it tests. Expectations come from
qref (the family modules in qref/harness/families/).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

from ...errors import unknown_name
from ..model import BackendMissing, Target

#: every backend, in report order
BACKENDS = ("ml_dtypes", "jax", "qwix", "aqt", "mlx", "iree", "mlir", "stablehlo", "onnxruntime", "onnx_reference",
            "bitsandbytes", "torchao", "litert", "openvino", "keras", "torch", "torch_compile")


def backend_module(name: str) -> ModuleType:
    if name not in BACKENDS:
        raise unknown_name("backend", name, (*BACKENDS, "all"))
    return importlib.import_module(f"{__name__}.{name}")


def load_targets(name: str) -> list[Target]:
    """The targets of backend ``name``; BackendMissing when its library is not installed."""
    return backend_module(name).targets()


def versions(name: str) -> dict[str, str]:
    """Installed versions of the backend's distributions ("missing" if absent)."""
    out = {}
    for dist in backend_module(name).DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def require(*modules: str, backend: str, hint: str) -> None:
    """Import ``modules`` or raise BackendMissing naming the pip package to install."""
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as exc:
            raise BackendMissing(f"{backend}: cannot import {m} ({exc}); install it with `{hint}`") from None


__all__ = ["BACKENDS", "BackendMissing", "backend_module", "load_targets", "require", "versions"]
