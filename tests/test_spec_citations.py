"""Traceability: every ``NAME.md §N`` citation in the code, tests, notebooks and docs names an existing page
(docs/spec/NAME.md or docs/NAME.md) and a section of it that exists (a ``##``/``###``/``####`` heading numbered
N). The committed suite's own manifest is data, not cited text, and is left out."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"([A-Za-z0-9_\-]+)\.md\s*§\s*(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", re.M)


@cache
def _sections(page: str) -> frozenset[str] | None:
    for path in (ROOT / "docs" / "spec" / f"{page}.md", ROOT / "docs" / f"{page}.md"):
        if path.exists():
            return frozenset(HEADING.findall(path.read_text()))
    return None


def _files() -> list[Path]:
    out = []
    for sub in ("qref", "tests", "docs", "benchmarks", "scripts"):
        out += [p for p in (ROOT / sub).rglob("*") if p.suffix in (".py", ".md", ".ipynb")]
    return [*sorted(out), ROOT / "README.md"]


def _citations() -> list[tuple[str, str, str]]:
    found = []
    for path in _files():
        for m in CITATION.finditer(path.read_text()):
            found.append((str(path.relative_to(ROOT)), m.group(1), m.group(2)))
    return found


def test_the_checker_reads_headings() -> None:
    assert {"4", "4.7", "4.7.1", "12"} <= set(_sections("block") or ())
    assert _sections("no_such_page") is None


def test_every_citation_resolves() -> None:
    cites = _citations()
    assert len(cites) > 1000
    bad = [f"{f}: {page}.md §{sec}" for f, page, sec in cites
           if (secs := _sections(page)) is None or sec not in secs]
    assert not bad, f"{len(bad)} of {len(cites)} citations do not resolve:\n" + "\n".join(bad[:40])
