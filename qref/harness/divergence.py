"""What each backend returns where the spec leaves the result unspecified (docs/conformance/divergence.md).

The comparison skips elements the spec leaves unspecified (NaN or out-of-range values converted to integer
storage, LLVM poison, C++ undefined casts, StableHLO "TBD"): no backend can be wrong there. Users porting a model
between backends still meet exactly these inputs, so the runner records, per task, what the backend returned at
those elements (``TaskResult.unspecified``: input kind -> behaviour -> count, from the family's ``divergence``),
and this module renders one table per input kind: targets x storage types. Information, not pass/fail.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .runner import RunResults

#: input kinds in page order (uniform family: uniform.md §4.2 items 7 and 8)
KINDS = ("NaN", "+Inf", "-Inf", "above the storage range", "below the storage range",
         "(q - z) outside the storage type", "other")


def table(res: RunResults) -> dict[str, dict[tuple[str, str], dict[str, int]]]:
    """kind -> (target, storage) -> behaviour -> element count, over every task of the run."""
    out: dict[str, dict[tuple[str, str], dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for r in res.results:
        if r.status == "variant":  # a CPU variant of an unpinned backend: its counts depend on the host
            continue
        for key, behaviours in (r.unspecified or {}).items():
            kind, storage = key.split("|", 1)
            for b, n in behaviours.items():
                out[kind][(r.target, storage)][b] += n
    return out


#: behaviours with a name (the rest are codes or values, listed when few, else counted together)
NAMED = ("saturates", "wraps", "lo", "hi", "z", "0", "exact")


def _cell(behaviours: dict[str, int]) -> str:
    if not behaviours:
        return ""
    named = {b: n for b, n in behaviours.items() if b in NAMED}
    raw = {b: n for b, n in behaviours.items() if b not in NAMED}
    if len(raw) > 2:
        named[f"{len(raw)} other codes"] = sum(raw.values())
    else:
        named.update(raw)
    items = sorted(named.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) == 1:
        return items[0][0]
    if len(items) > 2:  # the two most frequent; the rest counted (a table row stays readable)
        items = [*items[:2], (f"{len(items) - 2} more", sum(n for _, n in items[2:]))]
    return ", ".join(f"{b} ({n})" for b, n in items)


def render(res: RunResults, header: str, findings: Sequence[Any] = ()) -> str:
    """docs/conformance/divergence.md (``header``: the generated-file line of the findings pages; ``findings``:
    the implementation-defined findings, linked from their input kind's table)."""
    data = table(res)
    L = [header, "", "# Divergence where the spec leaves the result unspecified", "",
         f"Suite `{res.suite}`. The conformance comparison skips the elements the spec leaves unspecified (uniform "
         "quantization: NaN, infinities and values outside the storage range converted to integers, where "
         "StableHLO says TBD, LLVM gives poison and C++ casts are undefined; a dequantize whose (q - z) leaves the "
         "storage type). No backend is wrong there, and they do not agree: each table below says what every "
         "target returned for one kind of input, per storage type. Information, not pass/fail: a model that "
         "meets these inputs gives different codes on different backends.", "",
         "Behaviours: *saturates* = the storage bound on the input's side (hi above the range and for +Inf, lo "
         "below and for -Inf); *wraps* = round(x / s) + z modulo 2^bits; *lo* / *hi* = a storage bound (for a "
         "finite input on the other side, the opposite one); *z* = the zero point; *0* = code 0; *exact* = "
         "(q - z) * s computed without overflow; otherwise the code or value returned (*N other codes*: N "
         "distinct codes, none of the above). Counts (in parentheses) are elements of the suite when a target "
         "returned more than one behaviour. Elements count where the spec or the target's own qref profile "
         "leaves the result unspecified.", ""]
    if not data:
        return "\n".join([*L, "No task of this run has unspecified elements.", ""])
    for kind in [k for k in KINDS if k in data] + sorted(k for k in data if k not in KINDS):
        cells = data[kind]
        targets = sorted({t for t, _ in cells})
        every = sorted({s for _, s in cells}, key=_storage_order)
        L += [f"## {kind}", ""]
        for k in range(0, len(every), 4):  # at most four storage types a table: no row over 300 characters
            storages = every[k : k + 4]
            L += ["| target | " + " | ".join(f"`{s}`" for s in storages) + " |", "|---|" + "---|" * len(storages)]
            for t in targets:
                row = [_cell(cells.get((t, s), {})) or "-" for s in storages]
                if any(c != "-" for c in row):
                    L.append(f"| `{t}` | " + " | ".join(row) + " |")
            L.append("")
        links = [f for f in findings if getattr(f, "mechanism", "") == f"unspecified:{kind}"]
        if links:
            L += ["Findings (with a reproducer each): " + ", ".join(f"[{f.id}]({f.backend}.md#{f.id.lower()})"
                                                                    for f in links) + ".", ""]
        L.append("")
    return "\n".join(L)


def _storage_order(name: str) -> tuple[int, int, str]:
    m = re.match(r"(u?)int(\d+)", name)
    return (0, int(m.group(2)), name) if m else (1, 0, name)


__all__ = ["KINDS", "NAMED", "render", "table"]
