"""One layer of input checks for qref's public entry points (types, ranges, shapes against a scheme, sizes against
a memory budget), run before any allocation. Each check raises a QrefError that says what was wrong and how to fix
it; entry points call these instead of writing their own."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import QrefError

#: bytes one array qref allocates for a call may take (default 8 GiB; $QREF_MEMORY_BUDGET in bytes overrides it)
DEFAULT_MEMORY_BUDGET = 8 << 30


def memory_budget() -> int:
    """The budget in bytes: $QREF_MEMORY_BUDGET when set (a positive integer), else DEFAULT_MEMORY_BUDGET."""
    env = os.environ.get("QREF_MEMORY_BUDGET")
    if env:
        try:
            v = int(env)
        except ValueError:
            raise QrefError(f"QREF_MEMORY_BUDGET={env!r} is not an integer number of bytes") from None
        if v > 0:
            return v
    return DEFAULT_MEMORY_BUDGET


def check_alloc(elements: int, itemsize: int, what: str) -> None:
    """Refuse an allocation of ``elements`` items of ``itemsize`` bytes above the memory budget."""
    need = int(elements) * int(itemsize)
    budget = memory_budget()
    if need > budget:
        raise QrefError(f"{what} needs {elements} elements ({need / 2**30:.1f} GiB), above qref's memory budget of "
                        f"{budget / 2**30:.1f} GiB (set QREF_MEMORY_BUDGET=<bytes> to raise it, or use a smaller "
                        "size)")


def check_int(value: object, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as a Python int (not a bool, float or string) within [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise QrefError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise QrefError(f"{name} = {v} is outside {rng}")
    return v


def check_number_array(value: object, name: str) -> np.ndarray:
    """A real number or array of them (no strings, bytes, booleans or objects) as a float64 array."""
    if isinstance(value, (str, bytes)):
        raise QrefError(f"{name} must be a number or an array of numbers, got the string {value!r} (write "
                        f"{name}=0.1, not {name}='0.1')")
    a = np.asarray(value)
    if a.dtype.kind not in "iuf":
        raise QrefError(f"{name} must be a number or an array of numbers, got {type(value).__name__} of dtype "
                        f"{a.dtype}")
    return a.astype(np.float64)


def check_codes(codes: object, lo: int, hi: int, where: str) -> np.ndarray:
    """Integer codes within the storage range [lo, hi] (schemes.md §1.1 C1): float codes are refused, not
    truncated; a code outside the range has no meaning under the scheme."""
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise QrefError(f"{where}: codes must be integers (the storage values quantize returned), got dtype "
                        f"{c.dtype}; a float code is not a code (do not cast values to codes)")
    if c.size:
        cmin, cmax = int(c.min()), int(c.max())
        if cmin < lo or cmax > hi:
            raise QrefError(f"{where}: codes must lie in the storage range [{lo}, {hi}], got values in "
                            f"[{cmin}, {cmax}]")
    return c


def check_spec(spec: object, family: str, required: Iterable[str]) -> dict[str, Any]:
    """A scheme spec (a mapping) holding every ``required`` key, for ``scheme_from_spec``."""
    if not isinstance(spec, Mapping):
        raise QrefError(f"scheme_from_spec takes the mapping Scheme.to_spec() returns, got {type(spec).__name__} "
                        f"{spec!r} (for a name use qref.scheme(name, ...))")
    missing = [k for k in required if k not in spec]
    if missing:
        raise QrefError(f"scheme_from_spec: a {family} spec needs the keys {', '.join(missing)} (missing); pass the "
                        "whole mapping Scheme.to_spec() returns")
    return dict(spec)


def check_outside(path: str | os.PathLike[str], suite: str | os.PathLike[str], option: str) -> None:
    """Refuse an output path inside (or equal to) the suite directory a command reads: a command never writes
    into or over its input."""
    out = Path(path).resolve()
    root = Path(suite).resolve()
    if out == root or out.is_relative_to(root) or root.is_relative_to(out):
        raise QrefError(f"{option} {path}: inside the suite {suite} this command reads (or holding it); a command "
                        "never writes into or over its input: choose a path outside the suite")


def check_dtype(dtype: object, name: str, kinds: str = "iuf") -> np.dtype:
    """A numeric numpy dtype (kinds: numpy kind letters)."""
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise QrefError(f"{name}={dtype!r} is not a numpy dtype") from None
    if dt.kind not in kinds:
        raise QrefError(f"{name}={dtype!r} ({dt}) is not a numeric dtype; use e.g. np.int64 or np.float32")
    return dt


def prod(shape: Iterable[int]) -> int:
    return math.prod(int(s) for s in shape)


__all__ = ["DEFAULT_MEMORY_BUDGET", "check_alloc", "check_codes", "check_dtype", "check_int", "check_number_array",
           "check_outside", "check_spec", "memory_budget", "prod"]
