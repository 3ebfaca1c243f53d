"""Reproducer scripts in the reports (docs/conformance.md, docs/conformance/*.md): how a finding's standalone
script is shown, and how a test reads every script back with the bits it documents.

A script uses the backend's own API, numpy and ml_dtypes only (no qref), builds its input as literal bits and
prints ``got 0x.. expected 0x..``: the backend's result and the reference's expected bits, written in by qref when
the report was made (runner.standalone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the most lines a reproducer script may have (tests/test_reproducers.py checks it)
MAX_LINES = 30

_BLOCK = re.compile(r"^```python\n(.*?)\n```\n\nPrints: `(got 0x[0-9a-f]+ expected 0x[0-9a-f]+)`", re.M | re.S)


@dataclass(frozen=True)
class Documented:
    """One reproducer as documented: the heading it belongs to, the script and the line it prints."""

    title: str
    script: str
    prints: str
    note: str


def block(rep: dict[str, str]) -> list[str]:
    """Markdown lines showing a reproducer: the script as a ``python`` block and the line it prints; or why
    there is none."""
    if not rep.get("command"):
        return ["No standalone reproducer (the input it needs is too large to write out): run the case with "
                f"`qref run --include '{rep.get('case', '')}' --no-xfail`.", ""]
    return ["```python", rep["command"], "```", "", f"Prints: `{rep.get('prints', '')}`", ""]


def documented(text: str) -> list[Documented]:
    """Every reproducer of a report page, with the heading (### ...) above it and the note of its section."""
    out = []
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^###+ (.*)$", text, re.M)]
    for m in _BLOCK.finditer(text):
        title = next((h for pos, h in reversed(heads) if pos < m.start()), "")
        start = next((pos for pos, _h in reversed(heads) if pos < m.start()), 0)
        note = re.search(r"^- note: (.*)$", text[start : m.start()], re.M)
        out.append(Documented(title, m.group(1), m.group(2), note.group(1) if note else ""))
    return out
