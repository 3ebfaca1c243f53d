"""Regenerating the committed corpus reproduces it byte for byte (docs/vectors.md §5).

If this fails after an intended semantic change, regenerate with `qref gen conformance/v1 --force` and review the
manifest diff (one line per case) before committing; once a suite version is released it never changes, and a
semantic change makes a new version (conformance/v2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qref.cli import main

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


@pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")
def test_regenerating_reproduces_the_committed_corpus(tmp_path):
    out = tmp_path / "v1"
    assert main(["gen", str(out), "-q"]) == 0
    want, got = _files(COMMITTED), _files(out)
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    changed_lines = []
    if (COMMITTED / "manifest.json").read_bytes() != (out / "manifest.json").read_bytes():
        a = (COMMITTED / "manifest.json").read_text().splitlines()
        b = (out / "manifest.json").read_text().splitlines()
        changed_lines = [f"-{x[:160]}\n+{y[:160]}" for x, y in zip(a, b) if x != y][:5]
        if len(a) != len(b):
            changed_lines.append(f"manifest has {len(b)} lines, committed {len(a)}")
    assert not (missing or extra or changed_lines), (
        "the generator no longer reproduces conformance/v1 "
        f"({len(missing)} committed files not generated, {len(extra)} new files); first manifest differences:\n"
        + "\n".join(changed_lines) + "\nmissing: " + ", ".join(missing[:5]) + "\nextra: " + ", ".join(extra[:5])
    )
    differing = [name for name, p in want.items() if p.read_bytes() != got[name].read_bytes()]
    assert not differing, f"files differ: {differing[:10]}"
