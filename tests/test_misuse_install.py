"""Issue 30, the newcomer's paths: the expected-failure lists ship as package data (an installed qref, with no
source checkout, finds them), and ``QREF_UNPINNED=1 scripts/setup.sh`` installs torch unpinned."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_xfail_lists_resolve_from_an_installed_layout(tmp_path):
    """Copy the package as a wheel lays it out (symlinks followed, no conformance/ beside it) and ask it for the
    default xfail directory: it must be inside the package and hold every list of the checkout."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "qref", site / "qref", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("from qref.harness.xfail import default_xfail_dir; d = default_xfail_dir(); "
            "print(d); print(' '.join(sorted(p.name for p in d.glob('*.txt'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(site)})
    assert out.returncode == 0, out.stderr
    where, names = out.stdout.splitlines()
    assert Path(where).is_relative_to(site / "qref")
    assert names.split() == sorted(p.name for p in (REPO / "conformance" / "xfails").glob("*.txt"))
    assert names  # the lists exist


def test_pyproject_ships_the_xfail_lists():
    text = (REPO / "pyproject.toml").read_text()
    assert '"data/xfails/*.txt"' in text
    assert sorted(p.name for p in (REPO / "qref" / "data" / "xfails").glob("*.txt")) == \
        sorted(p.name for p in (REPO / "conformance" / "xfails").glob("*.txt"))


def test_setup_sh_unpinned_installs_torch_unpinned(tmp_path):
    """Run scripts/setup.sh against a stand-in venv whose python logs its arguments."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "log.txt"
    py = venv / "bin" / "python"
    py.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    (venv / "bin" / "activate").write_text(f"PATH={venv / 'bin'}:$PATH\n")
    for unpinned, torch in (("1", "torch"), ("0", "torch==2.13.0")):
        log.write_text("")
        r = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "QREF_VENV": str(venv), "QREF_UNPINNED": unpinned})
        assert r.returncode == 0, r.stderr
        installs = [ln.split() for ln in log.read_text().splitlines() if "install" in ln]
        torch_line = next(a for a in installs if any(w.startswith("torch") for w in a))
        assert [w for w in torch_line if w.startswith("torch")] == [torch]
        assert ("-c" in torch_line) == (unpinned == "0")
