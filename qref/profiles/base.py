"""Profiles: named, frozen records that reproduce one real system bit for bit (spec: profiles.md).

A profile is data, not a code path. It belongs to a family ("element" casts, "uniform", "block", "lookup",
"recipe"); the same name may exist in several families (e.g. ``mlx`` casts with ``to_fp8`` and quantizes blocks
with ``mx.quantize``). Each records the system it reproduces, the versions of that system (``package`` and a
PEP 440 ``versions`` specifier), how that claim was verified (``status`` and ``evidence``) and its sources.

Versioned records (profiles.md §2): where a system changed behaviour between releases there is one record per
version range, named ``NAME@TAG`` (``ml_dtypes@0.6``, ``ml_dtypes@0.7``); the plain ``NAME`` resolves to the
record whose range holds the installed version of ``package`` (``resolve_profile``), to the newest record when
the installed version is newer than every record (reported as *drift*), and to the newest record when the
package is not installed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import QrefError, UnknownNameError, check_choice, unknown_name
from ..formats import FloatFormat, Format, IntFormat
from ..formats.policy import CastPolicy

FAMILIES = ("element", "uniform", "block", "lookup", "recipe", "matmul")

# How a profile's claim was established (profiles.md §3).
STATUSES = (
    "spec",          # a specification: qref's reading of a normative document; there is no code to run
    "verified",      # run against the real code (installed from the lock) in CI's tests, bit for bit
    "peer_vectors",  # held bit for bit to committed vectors that the real code produced (script + commit recorded)
    "modelled",      # read from the system's source, never run: modelled, unverified
)


# Target and source classes a CastRule selects on (profiles.md §4).
TARGET_CLASSES = ("any", "float", "float_without_zero", "integer", "integer_sub_byte")
SOURCE_CLASSES = ("any", "extension", "native")


def is_extension_dtype(dtype: object) -> bool:
    """True for dtypes numpy does not implement itself: bfloat16 and every ml_dtypes type (profiles.md §4)."""
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        return False
    return dt.type.__module__.startswith("ml_dtypes")


@dataclass(frozen=True)
class CastRule:
    """``policy`` is the conversion for targets of ``target`` (a class of TARGET_CLASSES or a format name) from
    sources of ``source`` (a class of SOURCE_CLASSES or a dtype name such as "float64"); profiles.md §4."""

    policy: CastPolicy
    target: str = "any"
    source: str = "any"

    def matches(self, fmt: Format, source: object = None) -> bool:
        t = self.target
        if t == "float":
            ok = isinstance(fmt, FloatFormat)
        elif t == "float_without_zero":
            ok = isinstance(fmt, FloatFormat) and not fmt.zero
        elif t == "integer":
            ok = isinstance(fmt, IntFormat)
        elif t == "integer_sub_byte":
            ok = isinstance(fmt, IntFormat) and fmt.bits < 8
        else:
            ok = t == "any" or fmt.name == t
        if not ok or self.source == "any":
            return ok
        if source is None:
            return False
        if self.source in ("extension", "native"):
            return is_extension_dtype(source) == (self.source == "extension")
        try:
            return np.dtype(source).name == self.source  # type: ignore[call-overload]
        except TypeError:
            return False


@dataclass(frozen=True)
class Profile:
    """One real system's behaviour: ``cast`` (and ``cast_rules``) for element conversions, ``rules`` (the family's
    typed, frozen rules record: UniformArithmetic, BlockRules, LookupRules, HybridRules) for its schemes.

    ``version`` is the record's tag (``NAME@TAG``) when the system has several records; ``package`` the
    distribution whose installed version selects among them; ``versions`` the PEP 440 range this record
    reproduces (empty: no version claim, e.g. a specification).
    """

    name: str
    family: str
    system: str
    description: str
    cast: CastPolicy = field(default_factory=CastPolicy)
    rules: Any = None
    sources: tuple[str, ...] = ()
    package: str | None = None
    versions: str = ""
    version: str | None = None
    status: str = "modelled"
    evidence: tuple[str, ...] = ()
    cast_rules: tuple[CastRule, ...] = ()

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise unknown_name("profile family", self.family, FAMILIES)
        if self.status not in STATUSES:
            raise unknown_name("profile status", self.status, STATUSES)
        if "@" in self.name:
            raise QrefError(f"profile name {self.name!r}: give the version tag in version=, not in the name")
        try:
            SpecifierSet(self.versions)
        except InvalidSpecifier as e:
            raise QrefError(f"profile {self.name!r}: versions={self.versions!r} is not a PEP 440 specifier") from e
        if self.versions and not self.package:
            raise QrefError(f"profile {self.name!r}: versions= needs package= (the distribution it refers to)")
        if self.rules is not None and not (dataclasses.is_dataclass(self.rules) and
                                           type(self.rules).__dataclass_params__.frozen):  # type: ignore[attr-defined]
            raise QrefError(f"profile {self.name!r}: rules must be a frozen dataclass record, got "
                            f"{type(self.rules).__name__}")

    def cast_for(self, fmt: Format | None = None, source: object = None) -> CastPolicy:
        """The conversion policy into ``fmt`` from dtype ``source``: the first matching ``cast_rules`` entry,
        else ``cast`` (profiles.md §4). Without ``fmt`` (or ``source``) only rules that need none apply."""
        if fmt is not None:
            for r in self.cast_rules:
                if r.matches(fmt, source):
                    return r.policy
        return self.cast

    @property
    def key(self) -> str:
        """The record's unique name: ``NAME@TAG`` for versioned records, else ``NAME``."""
        return f"{self.name}@{self.version}" if self.version else self.name

    def covers(self, version: str) -> bool:
        """True when the installed ``version`` of ``package`` lies in this record's ``versions`` range."""
        if not self.versions:
            return True
        try:
            return Version(version) in SpecifierSet(self.versions)
        except InvalidVersion:
            return False

    def __hash__(self) -> int:
        return hash((self.key, self.family))


_PROFILES: dict[tuple[str, str], Profile] = {}


def register_profile(profile: Profile, *, replace: bool = False) -> Profile:
    key = (profile.family, profile.key)
    if key in _PROFILES and not replace:
        raise QrefError(f"profile {profile.key!r} is already registered in family {profile.family!r}")
    _PROFILES[key] = profile
    return profile


@functools.cache
def installed_version(package: str) -> str | None:
    """The installed version of distribution ``package`` (None when it is not installed); read once per process."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tag_key(p: Profile) -> Version:
    try:
        return Version(p.version or "0")
    except InvalidVersion:
        return Version("0")


def records(name: str, family: str) -> list[Profile]:
    """Every record of profile ``name`` in ``family`` (versioned ones oldest first)."""
    out = [p for (f, _), p in _PROFILES.items() if f == family and p.name == name]
    return sorted(out, key=_tag_key)


@dataclass(frozen=True)
class Resolution:
    """How a plain profile name was resolved: the record, the installed version, and whether it is drift
    (installed version outside every record's range: the newest record is used as the reference)."""

    profile: Profile
    installed: str | None
    drift: bool

    @property
    def note(self) -> str:
        p = self.profile
        if not p.package:
            return ""
        if self.installed is None:
            return f"{p.package} not installed: using {p.key} ({p.versions or 'any version'})"
        if self.drift:
            return (f"{p.package} {self.installed} is outside every verified record of {p.name!r}: comparing "
                    f"against {p.key} ({p.versions}); differences are drift")
        return f"{p.package} {self.installed}: {p.key} ({p.versions})"


def resolve_profile(name: str | Profile, family: str = "element", installed: str | None = None) -> Resolution:
    """Resolve ``name`` (``NAME`` or ``NAME@TAG``) in ``family`` against the installed version (profiles.md §2).

    ``installed`` overrides the installed version of the record's package (for tests and drift reports).
    """
    if isinstance(name, Profile):
        v = installed if installed is not None else (installed_version(name.package) if name.package else None)
        return Resolution(name, v, bool(name.package and v is not None and not name.covers(v)))
    if not isinstance(name, str):
        raise QrefError(f"profile must be a profile name (e.g. 'ml_dtypes', 'ml_dtypes@0.6') or a Profile record, "
                        f"got {type(name).__name__} {name!r}")
    if "@" in name:
        p = _PROFILES.get((family, name))
        if p is None:
            base = name.split("@", 1)[0]
            tags = [q.key for q in records(base, family)]
            raise unknown_name(f"{family} profile", name, tags or _names(family))
        v = installed if installed is not None else (installed_version(p.package) if p.package else None)
        return Resolution(p, v, bool(p.package and v is not None and not p.covers(v)))
    recs = records(name, family)
    if not recs:
        others = sorted({f for (f, _), p in _PROFILES.items() if p.name == name})
        hint = f"{name!r} exists in famil{'ies' if len(others) > 1 else 'y'} {', '.join(others)}" if others else ""
        raise unknown_name(f"{family} profile", name, _names(family), hint=hint)
    if len(recs) == 1 and not recs[0].package:
        return Resolution(recs[0], None, False)
    pkg = recs[0].package
    v = installed if installed is not None else (installed_version(pkg) if pkg else None)
    if v is None:
        return Resolution(recs[-1], None, False)
    for p in reversed(recs):
        if p.covers(v):
            return Resolution(p, v, False)
    return Resolution(recs[-1], v, True)


def _names(family: str) -> list[str]:
    names = {p.name for (f, _), p in _PROFILES.items() if f == family}
    keys = {p.key for (f, _), p in _PROFILES.items() if f == family}
    return sorted(names | keys)


def get_profile(name: str | Profile, family: str = "element") -> Profile:
    """The profile ``name`` of ``family`` (default: element casts); a plain versioned name resolves to the
    installed version's record (``resolve_profile``)."""
    return resolve_profile(name, family).profile


def profiles(family: str | None = None) -> dict[str, Profile]:
    """All registered records of ``family`` (one of FAMILIES) keyed by ``NAME[@TAG]`` (or of every family, keyed
    'family/key'); another name is an UnknownNameError with the close matches."""
    if family is not None and family not in FAMILIES:
        raise unknown_name("profile family", family, FAMILIES)
    if family is None:
        return {f"{f}/{n}": p for (f, n), p in sorted(_PROFILES.items())}
    return {n: p for (f, n), p in sorted(_PROFILES.items()) if f == family}



def check_rule(record: object, field: str, allowed: tuple[object, ...], section: str) -> None:
    """A QrefError (an UnknownNameError) when ``record.field`` is not one of ``allowed``: it names the record,
    the field, the value given and every allowed value, and the spec section that defines them."""
    value = getattr(record, field)
    if value in allowed and (value is None or isinstance(value, (str, bool, int))):
        return
    raise UnknownNameError(f"{type(record).__name__}.{field}={value!r} is not allowed; allowed values: "
                           f"{', '.join(repr(a) for a in allowed)} ({section})")


def check_choices(choices: Mapping[str, tuple[object, tuple[str, ...]]]) -> None:
    """``check_choice`` on each entry of ``choices`` (what the value is -> (value, its allowed names)), in order:
    a record's ``__post_init__`` lists its choice fields once instead of a call per field."""
    for kind, (value, allowed) in choices.items():
        check_choice(kind, value, allowed)


__all__ = ["FAMILIES", "SOURCE_CLASSES", "STATUSES", "TARGET_CLASSES", "CastRule", "Profile", "Resolution",
           "check_choices", "check_rule", "get_profile", "installed_version", "is_extension_dtype", "profiles",
           "records", "register_profile", "resolve_profile"]
