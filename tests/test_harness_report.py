"""CI checks of the committed conformance report (docs/conformance.md):

1. every backend is run on the committed suite with the committed expected-failure files: no unexpected failure,
   no crash, no stale entry, and the regenerated report is byte-identical to the committed one;
2. every reproducer command in the committed report is run and prints the "got" bits it documents (so each
   documented discrepancy is real and reproducible by a reader).

Both need every backend installed (CI installs them all; locally a missing one skips with its name) and take a
few minutes: they are marked slow.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "conformance.md"
MODULES = {"ml_dtypes": "ml_dtypes", "jax": "jax", "qwix": "qwix", "mlx": "mlx.core", "iree": "iree.compiler",
           "mlir": "torch_mlir", "stablehlo": "torch_mlir", "onnxruntime": "onnxruntime",
           "bitsandbytes": "bitsandbytes", "torchao": "torchao"}
FINDINGS = ROOT / "docs" / "conformance"
REGENERATE = "qref run --backend all --report docs/conformance.md --findings docs/conformance --force"

pytestmark = pytest.mark.slow


def _require_all() -> None:
    for backend, module in MODULES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            pytest.skip(f"backend {backend} is not installed ({module}); CI installs every backend")


@pytest.fixture(scope="module")
def run_result():
    _require_all()
    from qref.harness import runner

    return runner.run("all")


def test_committed_report_is_current(run_result):
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


def test_committed_findings_are_current(run_result, tmp_path):
    """docs/conformance/: one finding per root cause, regenerated from the same run and compared byte for byte."""
    from qref.harness import findings

    written = findings.write_findings(run_result, str(tmp_path))
    names = sorted(Path(p).name for p in written)
    assert sorted(p.name for p in FINDINGS.glob("*.md")) == names, f"regenerate with `{REGENERATE}`"
    for n in names:
        assert (tmp_path / n).read_text() == (FINDINGS / n).read_text(), f"{n} is out of date: `{REGENERATE}`"
    fs = findings.findings(run_result)
    assert len({f.id for f in fs}) == len(fs), "finding ids are unique"
    assert all(f.statement and f.tasks for f in fs)


def _sections(text: str) -> list[tuple[str, str, str, str]]:
    out = []
    for sec in re.split(r"^### 3\.\d+ ", text, flags=re.M)[1:]:
        title = sec.splitlines()[0]
        got = re.search(r"^- got: (?:\w+ )?(0x[0-9A-F]+)", sec, re.M)
        cmd = re.search(r"^  ```\n  (python -c .*)\n  ```", sec, re.M)
        note = re.search(r"^- note: (.*)$", sec, re.M)
        if got and cmd:
            out.append((title, got.group(1), cmd.group(1), note.group(1) if note else ""))
    return out


def _run_reproducer(cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", re.sub(r"^python ", f"{Path(sys.executable)} ", cmd)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_every_reproducer_prints_the_documented_bits():
    _require_all()
    text = DOC.read_text(encoding="utf-8")
    sections = _sections(text)
    assert len(sections) == len(re.findall(r"^### 3\.\d+ ", text, flags=re.M)), "a section lacks a reproducer"
    # the commands are independent processes (each imports its library): run a few at a time
    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        runs = list(pool.map(_run_reproducer, [cmd for _, _, cmd, _ in sections]))
    bad = []
    for (title, got, _cmd, note), r in zip(sections, runs):
        lines = r.stdout.strip().splitlines()
        if r.returncode != 0 or not lines:
            bad.append(f"{title}: the command failed: {r.stderr.strip()[-400:]}")
            continue
        ran = int(lines[-1], 16)
        if "depends on the surrounding elements" in note:
            continue  # documented: the element alone gives other bits (the note says how to reproduce it)
        if ran != int(got, 16):
            bad.append(f"{title}: documented got {got}, the command printed {lines[-1]}")
    assert not bad, "\n".join(bad)
