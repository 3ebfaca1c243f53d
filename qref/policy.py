"""Transitional path of ``qref.formats.policy`` (CastPolicy moved there); remove once no module imports it."""

from .formats.policy import CastPolicy

__all__ = ["CastPolicy"]
