"""Case builders, one module per family (docs/vectors.md §5).

Contract: ``qref/conformance/cases/<family>.py`` defines

    def build_cases(full: bool) -> Iterable[Case]

yielding Cases whose ``family`` is the module name and whose ids start with "<family>/". ``full=False`` yields
exactly the committed corpus (keep it small and fast); ``full=True`` may add large exhaustive sets. Builders are
deterministic: inputs come from curated tables or qref.conformance.random (labelled PCG64 streams), expected
outputs from qref's reference implementation. Adding a family = adding its module; nothing here changes.
Generation visits families in ``FAMILY_ORDER``, then any other module alphabetically.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator

from ...errors import QrefError, unknown_name
from ..case import Case

FAMILY_ORDER = ("elements", "uniform", "block", "lookup", "recipes", "gemm")


def family_names() -> list[str]:
    """Families with a builder module, in generation order."""
    present = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    return [f for f in FAMILY_ORDER if f in present] + sorted(present - set(FAMILY_ORDER))


def build_family(name: str, full: bool = False) -> Iterator[Case]:
    """The cases of one family, checked to belong to it (an unknown family name raises at once)."""
    names = family_names()
    if name not in names:
        raise unknown_name("case family", name, names)
    module = importlib.import_module(f"{__name__}.{name}")
    return _checked(name, module.build_cases(full))


def _checked(name: str, cases: Iterable[Case]) -> Iterator[Case]:
    for case in cases:
        if not isinstance(case, Case):
            raise QrefError(f"cases/{name}.py yielded {type(case).__name__}, not a Case")
        if case.family != name:
            raise QrefError(f"cases/{name}.py yielded case {case.id!r} of family {case.family!r}")
        yield case


__all__ = ["FAMILY_ORDER", "build_family", "family_names"]
