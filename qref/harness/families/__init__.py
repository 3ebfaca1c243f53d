"""Per-family knowledge the harness needs, one module per family of the suite (docs/conformance.md §1).

A family module defines:

    FAMILY: str                                   the family ("elements", "uniform", ...)
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

import hashlib
import importlib
import json
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...errors import QrefError, unknown_name
from ..model import Unsupported, bits


@dataclass
class Expectation:
    """Expected outputs (name -> array) and the elements left unspecified (name -> bool mask)."""

    outputs: dict[str, np.ndarray]
    unspecified: dict[str, np.ndarray] = field(default_factory=dict)


def task_hash(case: Case, geometry: object) -> str:
    """sha256 of the operation, the family's geometry, the params and every input's name, dtype, shape and bits:
    cases with equal hashes run the same backend computation (``task_key``)."""
    h = hashlib.sha256(json.dumps([case.operation, geometry, dict(case.params)], sort_keys=True,
                                  default=str).encode())
    for name in sorted(case.inputs):
        a = case.inputs[name]
        h.update(f"{name}:{a.dtype.name}:{a.shape}".encode())
        h.update(bits(a).tobytes())
    return h.hexdigest()


def describe_value(name: str, value: np.ndarray) -> str:
    """The first element of an output as text: ``name`` hex bits, and the value for a float array."""
    from ...conformance.text import float_text, hex_words

    v = np.asarray(value).reshape(-1)[:1]
    if v.dtype.kind == "f" or v.dtype.name == "bfloat16":
        with np.errstate(invalid="ignore"):
            return f"{name} {hex_words(v)[0]} ({float_text(float(v.astype(np.float64)[0]))})"
    return f"{name} {hex_words(v)[0]}"


def describe_plain_output(case: Case, name: str, value: np.ndarray) -> str:
    """A family's ``describe_output`` where the case adds nothing: ``describe_value(name, value)``."""
    return describe_value(name, value)


def distinct_alternatives(alts: Iterable[tuple[str, dict[str, Any]]], outputs: Callable[[dict[str, Any]], Any],
                          same: Callable[[dict[str, Any]], bool] = lambda ov: False
                          ) -> Iterator[tuple[str, Any]]:
    """``(class, outputs(overrides))`` for each ``(class, overrides)`` of ``alts`` in order: the first of equal
    override sets only, none that ``same`` says leaves the rules as they are, none ``outputs`` fails on."""
    seen = set()
    for cls, ov in alts:
        if same(ov):
            continue
        key = json.dumps(ov, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            out = outputs(ov)
        except Exception:
            continue
        yield cls, out


def listed_for(case: Case, profile: str) -> bool:
    """The case's expected outputs are ``profile``'s: it is one of the profiles the case lists (its one profile
    when it lists none)."""
    return profile in case.profiles or (not case.profiles and case.profile == profile)


def holds_for_spec_or(case: Case, profile: str | None, family: str, operations: tuple[str, ...],
                      spec_profile: str, holds: Callable[[Case, str], bool]) -> bool:
    """A family's ``relevant``: a case of its operations whose outputs hold for the spec profile or for the
    target's ``profile`` (``holds``: the family's own test)."""
    if case.family != family or case.operation not in operations:
        return False
    return holds(case, spec_profile) or (profile is not None and holds(case, profile))


def held_or_computed(case: Case, profile: str, holds: Callable[[Case, str], bool],
                     compute: Callable[[], Expectation], shown: Callable[[], str]) -> Expectation:
    """A family's ``expectation``: the case's own outputs where they hold for ``profile``, else ``compute()``; a
    profile that rejects the case (QrefError) makes it Unsupported, named as ``shown()`` gives it."""
    if holds(case, profile):
        return Expectation(dict(case.expected), dict(case.unspecified))
    try:
        return compute()
    except QrefError as exc:
        raise Unsupported(f"profile {shown()!r} does not accept this case ({exc})") from None


def family_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def get_family(name: str) -> ModuleType:
    names = family_names()
    if name not in names:
        raise unknown_name("harness family", name, names)
    return importlib.import_module(f"{__name__}.{name}")


def value_classes(case: Case, name: str, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The structural classes of mismatching elements of output ``name`` (``exp``, ``got``: their bits) read from
    the values of a float (or bfloat16) output: "nan_sign_or_code" where either is a NaN, else "sign_of_zero" where
    both are zeros; "" elsewhere, and everywhere for other outputs (an object array of ``exp``'s shape)."""
    out = np.full(exp.shape, "", dtype=object)
    dt = case.expected[name].dtype
    if dt.kind == "f" or dt.name == "bfloat16":
        with np.errstate(invalid="ignore"):
            ev, gv = exp.view(dt).astype(np.float64), got.view(dt).astype(np.float64)
        out[np.isnan(ev) | np.isnan(gv)] = "nan_sign_or_code"
        out[(ev == 0) & (gv == 0) & (out == "")] = "sign_of_zero"
    return out


def flushed(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray,
            scale_subnormal: np.ndarray | None = None) -> np.ndarray:
    """Where a float32 or bfloat16 dequantized value came out as a zero of its sign although the reference is a
    subnormal larger than the smallest one (FTZ: no rounding of the exact value gives zero), or its block scale is
    a float32 subnormal that the output dtype holds exactly (DAZ): bool per element. Other output dtypes (float16:
    a scale converted to it can underflow) and a reference equal to the smallest subnormal (a rounding difference
    can give zero there too) are left to the other classes."""
    dt = case.expected[name].dtype
    if dt.name not in ("float32", "bfloat16"):
        return np.zeros(exp.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        ev, gv = exp.view(dt).astype(np.float64), got.view(dt).astype(np.float64)
    fi = np.finfo(np.float32)
    least = float(fi.smallest_subnormal) * (2.0**16 if dt.name == "bfloat16" else 1.0)
    zero = (gv == 0) & (np.signbit(gv) == np.signbit(ev)) & (ev != 0) & np.isfinite(ev)
    small = (np.abs(ev) < float(fi.tiny)) & (np.abs(ev) > least)
    if scale_subnormal is not None:
        small = small | scale_subnormal[idx]
    return zero & small


__all__ = ["Expectation", "describe_plain_output", "describe_value", "distinct_alternatives", "family_names", "flushed",
           "get_family", "held_or_computed", "holds_for_spec_or", "listed_for", "task_hash",
           "value_classes"]
