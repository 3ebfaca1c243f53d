"""CI checks of the committed conformance report (docs/conformance.md):

1. every backend is run on the committed suite with the committed expected-failure files, the backends whose code
   depends on the CPU pinned to x86-64-v3 (`--cpu baseline`, profiles.md §6: the report is the same on every
   supported x86-64 CPU; tests/test_cpu.py checks what the pins hide): no unexpected failure,
   no crash, no stale entry, and the regenerated report is byte-identical to the committed one;
2. the findings pages (docs/conformance/*.md) are regenerated from the same run and compared byte for byte.

Capturing the findings' "Prints:" lines runs every reproducer script without qref, as
tests/test_reproducers.py does; where this test runs in the same session, conftest.py skips those runs there.

Both need every backend installed (CI installs them all; locally a missing one skips with its name) and take a
few minutes: they are marked slow.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

import pytest

from qref.harness.reproducer import PRELOAD

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "conformance.md"
# what each backend imports: the reproducers' preload table, first module (the same backends, one table)
MODULES = {b: m.split(",")[0] for b, m in PRELOAD.items()}
FINDINGS = ROOT / "docs" / "conformance"
REGENERATE = "qref run --backend all --cpu baseline --report docs/conformance.md --findings docs/conformance --force"

pytestmark = pytest.mark.slow


def _require_all() -> None:
    os.environ.setdefault("KERAS_BACKEND", "jax")  # as the keras adapter runs it (keras 3 defaults to TensorFlow)
    for backend, module in MODULES.items():
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"backend {backend} is not installed ({module}); CI installs every backend")
        importlib.import_module(module)  # installed: an import error fails (conftest skips the reproducer runs)


def test_committed_report_and_findings_are_current(tmp_path, monkeypatch):
    """One run of every backend (test workers do not share a fixture: two tests would each run it), then the
    report and the findings pages, each compared byte for byte with the committed ones."""
    _require_all()
    from qref.harness import runner

    res = runner.run("all", cpu="baseline")
    _check_report(res)
    _check_findings(res, tmp_path, monkeypatch)


def _check_report(run_result):
    from qref.harness import report

    res = run_result
    problems = [f"{r.status} {r.target} {r.task}: {r.reason or (r.vs_profile and r.vs_profile.classes)}"
                for r in res.unexpected] + res.stale_xfails
    assert not res.skipped, f"backends skipped: {res.skipped}"
    assert not problems, "unexpected failures or stale xfail entries:\n" + "\n".join(problems[:40])
    text = report.render(res)
    committed = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if text != committed:
        have = report.versions_line(res)
        line = next((ln for ln in committed.splitlines() if "Versions:" in ln), "")
        hint = ("the installed backend versions differ from the committed report's header line:\n"
                f"  installed: {have}\n  committed: {line}\nCI installs the pinned set; " if have not in line
                else "")
        pytest.fail(f"docs/conformance.md is out of date ({hint}the suite, an adapter, a profile or an xfail "
                    f"file changed). Regenerate it with `{REGENERATE}`, review the diff and commit it.")


def _check_findings(run_result, tmp_path, monkeypatch):
    """docs/conformance/: one finding per root cause, regenerated from the same run and compared byte for byte.

    Writing the pages runs every reproducer to capture its "Prints:" line. A script the committed pages already
    show is not run again here: its documented line is replayed, because tests/test_reproducers.py runs every
    committed script and holds it to exactly that line. Every other script (a new one, or a candidate the
    generation tried and set aside) runs for real, so a page whose scripts or choices changed still differs."""
    from qref.harness import findings, reproducer

    known: dict[str, str] = {}
    for page in [*FINDINGS.glob("*.md"), DOC]:
        for d in reproducer.documented(page.read_text(encoding="utf-8")):
            known.setdefault(d.script, d.prints)
    real = reproducer.capture

    def replay(scripts: list[str], *args, **kwargs) -> list[str]:
        new = [x for x in dict.fromkeys(scripts) if x and x not in known]
        ran = dict(zip(new, real(new, *args, **kwargs))) if new else {}
        return [known[x] if x in known else ran.get(x, "") for x in scripts]

    monkeypatch.setattr(reproducer, "capture", replay)
    written = findings.write_findings(run_result, str(tmp_path))
    names = sorted(Path(p).name for p in written)
    assert sorted(p.name for p in FINDINGS.glob("*.md")) == names, f"regenerate with `{REGENERATE}`"
    for n in names:
        assert (tmp_path / n).read_text() == (FINDINGS / n).read_text(), f"{n} is out of date: `{REGENERATE}`"
    fs = findings.findings(run_result)
    assert len({f.id for f in fs}) == len(fs), "finding ids are unique"
    pairs = [(f.backend, f.mechanism) for f in fs]
    assert len(set(pairs)) == len(pairs), "two findings with the same backend and mechanism"
    assert all(f.statement and f.tasks for f in fs)
