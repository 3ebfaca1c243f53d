"""JSON lines export (docs/vectors.md §8): one case per line, TestFloat-like: every array as a list of
fixed-width hex strings of its bits (big-endian digits: float32 1.0 is "3f800000"), unspecified masks as strings
of '0'/'1'.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..case import Case, plain, to_storage

__all__ = ["export_jsonl", "to_jsonl"]


def _hex_list(arr: np.ndarray) -> list[str]:
    bits = to_storage(arr).reshape(-1)
    if bits.dtype.kind == "i":
        bits = bits.view(f"u{bits.dtype.itemsize}")
    width = bits.dtype.itemsize * 2
    return [f"{int(v):0{width}x}" for v in bits]


def to_jsonl(case: Case) -> str:
    """One JSON line for a case (see module docstring); keys sorted, no spaces."""
    def arrays(group: dict[str, np.ndarray]) -> dict[str, Any]:
        out = {}
        for k, v in group.items():
            d: dict[str, Any] = {"dtype": v.dtype.name, "shape": list(v.shape), "hex": _hex_list(v)}
            if k in case.array_formats:
                d["format"] = case.array_formats[k]
            out[k] = d
        return out

    obj = {
        "id": case.id, "family": case.family, "operation": case.operation, "format": plain(case.format),
        "policy": plain(case.policy), "scheme": plain(case.scheme), "profile": case.profile,
        "params": plain(case.params), "tags": list(case.tags), "spec": list(case.spec),
        "equivalent": plain(case.equivalent), "profiles": list(case.profiles),
        "inputs": arrays(dict(case.inputs)), "expected": arrays(dict(case.expected)),
        "unspecified": {k: "".join("1" if b else "0" for b in m.reshape(-1)) for k, m in case.unspecified.items()},
    }
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def export_jsonl(cases: Iterable[Case], path: str | os.PathLike[str]) -> int:
    """Write one line per case to ``path``; returns the number of lines."""
    n = 0
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for case in cases:
            f.write(to_jsonl(case) + "\n")
            n += 1
    return n
