"""Records shared by the harness: targets (one backend API under test), tasks (one distinct input set of the
suite) and outcomes (docs/conformance.md §"How to read this report").

A *target* is one way of calling one backend, e.g. ``jax.astype.jit`` (``x.astype(jnp.float8_e4m3fn)`` under
``jax.jit``) or ``onnxruntime.cast.saturate1``. It belongs to a family, names the qref profile that models it
(or None: the spec's default is then its reference) and runs batches of cases through the real library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..conformance.case import Case, to_storage
from ..errors import QrefError

#: family -> the kind of qref profile that models its backends (qref/profiles/base.py FAMILIES)
PROFILE_FAMILY = {"elements": "element", "uniform": "uniform", "block": "block", "lookup": "lookup",
                  "recipes": "recipe", "matmul": "matmul"}


class Unsupported(QrefError):
    """The backend has no way to run this case (no such type, op or mode); reported as "unsupported"."""


class BackendMissing(QrefError):
    """The backend's Python package is not installed (the backend is skipped with this reason)."""


Outputs = Mapping[str, np.ndarray]
#: run(cases) -> one item per case: the outputs (name -> array, the names and dtypes of case.expected) or the
#: exception (Unsupported, or anything else: a crash)
RunFn = Callable[[Sequence[Case]], list["Outputs | BaseException"]]
#: snippet(case, index) -> a one-line shell command (python -c ...) printing the backend's result for element
#: ``index`` of the case's inputs, in the form the report shows (hex bits)
SnippetFn = Callable[[Case, int], str]


@dataclass(frozen=True)
class Target:
    """One backend API under test for one family.

    name: "<backend>.<api>[.<variant>]", stable (used in xfail files and the report). api: how it is called, in
    words/code (``x.astype(ml_dtypes.<format>)``). profile: the qref profile of the family that models it (None:
    the spec default is its reference). supports(case) -> None or the reason it cannot run the case.
    """

    backend: str
    name: str
    family: str
    api: str
    profile: str | None
    operations: tuple[str, ...]
    supports: Callable[[Case], str | None]
    run: RunFn
    snippet: SnippetFn
    notes: str = ""
    #: uniform family: the reproducer may run k copies of one element per tensor (the snippet writes them when the
    #: case holds copies); other families always may
    copies: bool = False

    @property
    def reference(self) -> str:
        """The profile the target is expected to conform to: its own, else the spec default."""
        return self.profile or "spec"


@dataclass
class Comparison:
    """One backend output compared with one expectation (codes and values compared as unsigned bits)."""

    compared: int = 0
    mismatches: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    #: class -> first mismatching elements: (array name, flat index)
    examples: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    #: class -> a described reproducer of its first example (filled by the runner): input, expected, got,
    #: spec section, command
    repro: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_json(self) -> dict[str, Any]:
        return {"compared": self.compared, "mismatches": self.mismatches,
                "classes": dict(sorted(self.classes.items())),
                "examples": {k: [list(e) for e in v] for k, v in sorted(self.examples.items())},
                "repro": {k: dict(sorted(v.items())) for k, v in sorted(self.repro.items())}}


@dataclass
class TaskResult:
    """The outcome of one target on one task (a distinct input set; ``cases`` = every suite case sharing it that
    holds under the spec default or the target's profile)."""

    target: str
    family: str
    task: str  # the representative case id
    cases: tuple[str, ...]
    status: str  # pass | fail | xfail | unsupported | crash
    reason: str = ""  # unsupported / crash message, or the xfail reason
    vs_profile: Comparison | None = None
    vs_spec: Comparison | None = None
    size: int = 0
    #: what the backend returned where the spec leaves the result unspecified: "kind|storage" -> behaviour ->
    #: element count (divergence.py)
    unspecified: dict[str, dict[str, int]] = field(default_factory=dict)
    #: for status "variant" (a CPU variant of an unpinned backend, profiles.md §6): the status on this host
    host_status: str = ""

    def to_json(self) -> dict[str, Any]:
        d = {"target": self.target, "family": self.family, "task": self.task, "cases": list(self.cases),
             "status": self.status, "reason": self.reason, "size": self.size,
             "vs_profile": None if self.vs_profile is None else self.vs_profile.to_json(),
             "vs_spec": None if self.vs_spec is None else self.vs_spec.to_json()}
        if self.host_status:
            d["host_status"] = self.host_status
        if self.unspecified:
            d["unspecified"] = {k: dict(sorted(v.items())) for k, v in sorted(self.unspecified.items())}
        return d


def bits(a: np.ndarray) -> np.ndarray:
    """The array as unsigned integers of its width (floats as bit patterns, signed integers two's complement)."""
    s = to_storage(np.asarray(a))
    if s.dtype == np.bool_:
        return s.view(np.uint8)
    if s.dtype.kind == "i":
        return s.view(f"u{s.dtype.itemsize}")
    return s


def first_line(exc: BaseException, limit: int = 300) -> str:
    """A one-line description of an exception (type and the first meaningful line of its message)."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = next((ln for ln in lines if "error:" in ln), lines[0] if lines else "")
    msg = f"{type(exc).__name__}: {keep}" if keep else type(exc).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


__all__ = ["PROFILE_FAMILY", "BackendMissing", "Comparison", "Outputs", "RunFn", "SnippetFn", "Target", "TaskResult",
           "Unsupported", "bits", "first_line"]
