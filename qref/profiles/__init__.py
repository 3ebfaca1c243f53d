"""Profiles: named, frozen records that reproduce one real system bit for bit (spec: profiles.md).

The record and its registry live in ``base``; each profile kind (element casts, uniform, block, lookup,
recipe) registers its records from its own module on import. Profiles are data: they import ``qref.errors``
and ``qref.formats`` only, never an operation (core, schemes).
"""

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
