"""Exceptions raised by qref. Every error says what was wrong and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class QrefError(ValueError):
    """Base class of qref's errors (a ValueError, so generic handlers still catch it)."""


class UnknownNameError(QrefError, KeyError):
    """An unknown format, scheme, profile or option name."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


def unknown_name(kind: str, name: object, choices: Iterable[str], hint: str = "") -> UnknownNameError:
    """Build an UnknownNameError listing the closest known names."""
    choices = sorted(set(choices))
    close = difflib.get_close_matches(str(name), choices, n=5, cutoff=0.5)
    msg = f"unknown {kind} {name!r}"
    if close:
        msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
    elif len(choices) <= 24:
        msg += f"; known: {', '.join(choices)}"
    if hint:
        msg += f" ({hint})"
    return UnknownNameError(msg)


def check_choice(kind: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise an UnknownNameError."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise unknown_name(kind, value, choices)
    return value


__all__ = ["QrefError", "UnknownNameError", "check_choice", "unknown_name"]
