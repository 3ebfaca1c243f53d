"""Profiles: named, frozen records that reproduce one real system bit for bit (spec: profiles.md).

The record and its registry live in ``base``; each profile kind (element casts, uniform, block, lookup,
recipe) registers its records from its own module on import. Profiles are data: they import ``qref.errors``
and ``qref.formats`` only, never an operation (core, schemes).

The package is callable: ``qref.profiles(family)`` is ``base.profiles(family)`` (the documented API), while
``qref.profiles`` stays this package, so its modules import by their dotted names
(``import qref.profiles.uniform``).
"""

import sys
import types

from . import block, element, lookup, matmul, recipe, uniform  # noqa: F401  (register their records)
from .base import (
    FAMILIES,
    SOURCE_CLASSES,
    STATUSES,
    TARGET_CLASSES,
    CastRule,
    Profile,
    Resolution,
    get_profile,
    installed_version,
    is_extension_dtype,
    profiles,
    records,
    register_profile,
    resolve_profile,
)


class _CallablePackage(types.ModuleType):
    """The package ``qref.profiles``, called as its registry function ``profiles``."""

    def __call__(self, family: str | None = None) -> dict[str, Profile]:
        """``profiles(family)``: the registered records of ``family`` keyed by ``NAME[@TAG]`` (every family's,
        keyed 'family/key', when ``family`` is None)."""
        return profiles(family)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = [
    "FAMILIES",
    "SOURCE_CLASSES",
    "STATUSES",
    "TARGET_CLASSES",
    "CastRule",
    "Profile",
    "Resolution",
    "get_profile",
    "installed_version",
    "is_extension_dtype",
    "profiles",
    "records",
    "register_profile",
    "resolve_profile",
]
