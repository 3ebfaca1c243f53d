"""Per-family knowledge the harness needs, one module per case family (docs/conformance.md §1).

A family module defines:

    FAMILY: str                                   the case family ("elements", "uniform", ...)
    SPEC_PROFILE: str                             the profile whose expectations are the spec's defaults
    def relevant(case, profile) -> bool           does the case's expectation hold under the spec default or
                                                  ``profile`` (so a backend modelled by ``profile`` is tested on it)
    def task_key(case) -> str                     cases with the same key run the same backend computation
    def holds(case, profile) -> bool              the case's expected outputs are ``profile``'s
    def expectation(case, profile) -> Expectation qref's prediction of ``profile`` on the case's inputs
    def alternatives(case, profile) -> Iterator[(class, Expectation-like outputs)]
                                                  qref variants of ``profile`` that name a mismatch class
    def spec_sections(case) -> tuple[str, ...]    the spec sections the case checks

Adding a family = adding its module here and its targets to the adapters; nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from ...errors import unknown_name


@dataclass
class Expectation:
    """Expected outputs (name -> array) and the elements left unspecified (name -> bool mask)."""

    outputs: dict[str, np.ndarray]
    unspecified: dict[str, np.ndarray] = field(default_factory=dict)


def family_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def get_family(name: str) -> ModuleType:
    names = family_names()
    if name not in names:
        raise unknown_name("harness family", name, names)
    return importlib.import_module(f"{__name__}.{name}")
