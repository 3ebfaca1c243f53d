"""Profiles: named, frozen sets of policies that reproduce one real system bit for bit (spec: profiles.md).

A profile is data, not a code path. It belongs to a family ("element" casts, "uniform", "block", "lookup",
"recipe"); the same name may exist in several families (e.g. ``mlx`` casts with ``to_fp8`` and quantizes blocks
with ``mx.quantize``). Each records the system and version it reproduces and the sources it was read from.
Family modules register their profiles with ``register_profile``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import QrefError, unknown_name
from .policy import CastPolicy

FAMILIES = ("element", "uniform", "block", "lookup", "recipe")


@dataclass(frozen=True)
class Profile:
    """One real system's behaviour: ``cast`` for element conversions, ``params`` for the family's schemes."""

    name: str
    family: str
    system: str
    description: str
    cast: CastPolicy = field(default_factory=CastPolicy)
    params: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise unknown_name("profile family", self.family, FAMILIES)
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __hash__(self) -> int:
        return hash((self.name, self.family))


_PROFILES: dict[tuple[str, str], Profile] = {}


def register_profile(profile: Profile, *, replace: bool = False) -> Profile:
    key = (profile.family, profile.name)
    if key in _PROFILES and not replace:
        raise QrefError(f"profile {profile.name!r} is already registered in family {profile.family!r}")
    _PROFILES[key] = profile
    return profile


def get_profile(name: str | Profile, family: str = "element") -> Profile:
    """The profile ``name`` of ``family`` (default: element casts)."""
    if isinstance(name, Profile):
        return name
    try:
        return _PROFILES[(family, name)]
    except KeyError:
        pass
    others = [f for (f, n) in _PROFILES if n == name]
    hint = f"{name!r} exists in famil{'ies' if len(others) > 1 else 'y'} {', '.join(others)}" if others else ""
    raise unknown_name(f"{family} profile", name, [n for (f, n) in _PROFILES if f == family], hint=hint)


def profiles(family: str | None = None) -> dict[str, Profile]:
    """All registered profiles of ``family`` (or all, keyed 'family/name')."""
    if family is None:
        return {f"{f}/{n}": p for (f, n), p in sorted(_PROFILES.items())}
    return {n: p for (f, n), p in sorted(_PROFILES.items()) if f == family}


# ---- element (cast) profiles: elements.md §6 ------------------------------------------------------------------
for _p in (
    Profile(
        "spec", "element", "qref specification",
        "Correct rounding from the exact input (nearest_even), each format's ecosystem overflow and NaN rules.",
        CastPolicy(), sources=("docs/spec/elements.md",),
    ),
    Profile(
        "ml_dtypes", "element", "ml_dtypes 0.6.0 astype",
        "float64 inputs are rounded to float32 first (double rounding; float16, numpy's own type, rounds once); "
        "E8M0 rounds ties up and float32 subnormals up; integer storage truncates and wraps (a C cast on x86-64; "
        "int1/2/4 also give 0 for 2^31 - 1 < x < 2^31); everything else as 'spec'.",
        CastPolicy(rounding="ml_dtypes", source="via_float32"),
        sources=("ml_dtypes/include/float8.h ConvertImpl", "ml_dtypes PR 398 (E8M0 ties)", "PR 401 (float64)"),
    ),
    Profile(
        "saturating", "element", "OCP OFP8 v1.0 saturating conversion; ONNX Cast saturate=1",
        "nearest_even; finite overflow and +-Inf clamp to +-max; NaN stays NaN.",
        CastPolicy(overflow="saturate"),
        sources=("OCP OFP8 v1.0 §5 (conversion)", "onnx/reference/ops/op_cast.py saturate_cast"),
    ),
    Profile(
        "mlx", "element", "MLX 0.32 mx.to_fp8 (float8_e4m3fn)",
        "nearest_even; overflow and +-Inf saturate to +-448; NaN becomes +-448 by its sign bit.",
        CastPolicy(overflow="saturate", nan="max"),
        sources=("mlx/backend/cpu/quantized.cpp", "checked against mlx 0.32.4 CPU"),
    ),
):
    register_profile(_p)
