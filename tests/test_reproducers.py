"""Every reproducer script in the committed reports runs without qref and prints the bits it documents.

The scripts are read from docs/conformance/*.md (one page per backend) and docs/conformance.md (per target); each
runs in its own process, from an empty directory, with ``sys.modules['qref'] = None`` so that ``import qref``
raises, and must print exactly its documented ``got 0x.. expected 0x..`` line. A backend that is not installed
is skipped with its name. A script that sets no environment variable runs in a fork of one process that
imported its backend first (tests/repro_forkserver.py; ``QREF_REPRO_FRESH=1``: every script in a fresh
interpreter). Scripts have at most ``reproducer.MAX_LINES`` lines and import neither qref nor the
committed suite.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from qref.conformance.case import Case
from qref.harness import reproducer
from qref.harness.adapters._common import array_literal
from qref.harness.runner import standalone

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "conformance").glob("*.md"))
REPORT = ROOT / "docs" / "conformance.md"
MODULES = {"ml_dtypes": "ml_dtypes", "jax": "jax", "qwix": "qwix", "aqt": "aqt.jax.v2.aqt_dot_general",
           "mlx": "mlx.core", "iree": "iree.compiler",
           "mlir": "torch_mlir", "stablehlo": "torch_mlir", "onnxruntime": "onnxruntime",
           "onnx_reference": "onnx.reference",
           "bitsandbytes": "bitsandbytes", "torchao": "torchao", "litert": "ai_edge_litert.interpreter",
           "openvino": "openvino", "keras": "keras", "torch": "torch", "torch_compile": "torch"}
RUN = "import sys; sys.modules['qref'] = None; exec(open(sys.argv[1]).read())"


def _installed(backend: str) -> bool:
    os.environ.setdefault("KERAS_BACKEND", "jax")  # as the keras adapter runs it (keras 3 defaults to TensorFlow)
    try:
        importlib.import_module(MODULES[backend])
    except ImportError:
        return False
    return True


def _all() -> list[tuple[str, reproducer.Documented]]:
    """(backend, reproducer) of every page and of the per-target report, each distinct script once."""
    out, seen = [], set()
    for p in PAGES:
        for d in reproducer.documented(p.read_text(encoding="utf-8")):
            if (d.script, d.prints) not in seen:
                seen.add((d.script, d.prints))
                out.append((p.stem, d))
    for d in reproducer.documented(REPORT.read_text(encoding="utf-8")):
        backend = re.sub(r"^3\.\d+ ", "", d.title).split(".", 1)[0]
        if (d.script, d.prints) not in seen:
            seen.add((d.script, d.prints))
            out.append((backend, d))
    return out


def _run(script: str, tmp: Path, k: int) -> subprocess.CompletedProcess:
    path = tmp / f"repro_{k}.py"
    path.write_text(script + "\n", encoding="utf-8")
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", RUN, str(path)], capture_output=True, text=True, cwd=tmp, env=env,
                          timeout=600)


def _run_forked(module: str, scripts: list[str], tmp: Path, jobs: int) -> list[subprocess.CompletedProcess]:
    """Each script in its own forked child of one process that imported ``module`` first (repro_forkserver.py:
    the same program, from its own directory, without qref; the backend's import is paid once)."""
    paths = []
    for k, script in enumerate(scripts):
        d = tmp / f"fork_{k}"
        d.mkdir()
        paths.append(d / "repro.py")
        paths[-1].write_text(script + "\n", encoding="utf-8")
    env = {k_: v for k_, v in os.environ.items() if k_ != "PYTHONPATH"}
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("repro_forkserver.py")), module, str(jobs),
                        *map(str, paths)], capture_output=True, text=True, cwd=tmp, env=env, timeout=3600)
    assert r.returncode == 0, r.stderr[-2000:]
    return [subprocess.CompletedProcess([str(p)], rc, out, err)
            for p, (rc, out, err) in zip(paths, json.loads(r.stdout.strip().splitlines()[-1]))]


def test_reports_have_reproducers_in_the_standalone_form():
    found = _all()
    assert len(found) > 50, f"only {len(found)} reproducers found in docs/conformance*"
    assert "python -c" not in "".join(p.read_text(encoding="utf-8") for p in PAGES), "a one-liner is left"
    for backend, d in found:
        lines = d.script.splitlines()
        assert reproducer.code_lines(d.script) <= reproducer.MAX_LINES, f"{d.title}: {len(lines)} lines"
        assert not re.search(r"\bqref\b|load_suite", d.script), f"{d.title}: the script uses qref"
        assert backend in MODULES, d.title
        assert d.script == reproducer.layout(d.script), f"{d.title}: not laid out (MLIR on one line?)"
        if d.prints.startswith("got ") and "expected" in d.prints:
            assert lines[-1].startswith("print(f'got {got:#0") and "expected 0x" in lines[-1], d.title


def test_no_line_of_the_generated_docs_is_over_the_limit():
    for p in [*PAGES, REPORT]:
        long = [i + 1 for i, ln in enumerate(p.read_text(encoding="utf-8").splitlines())
                if len(ln) > reproducer.MAX_LINE]
        assert not long, f"{p.name}: lines {long[:10]} are over {reproducer.MAX_LINE} characters"


def test_every_finding_has_a_reproducer_and_spec_findings_print_a_difference():
    """Every finding of the pages (crash groups and implementation-defined results included) shows a script; a
    difference from the spec prints got != expected (its Prints line was captured by running it). A case too large
    to write out is reproduced on a smaller input its adapter builds (``script_case``), so no finding is left
    without a script (issue 29)."""
    missing: list[str] = []
    for p in PAGES:
        if p.stem in ("README", "divergence"):
            continue
        text = p.read_text(encoding="utf-8")
        spec_part = text.split("## Differences from the spec", 1)[1].split("\n## ", 1)[0] \
            if "## Differences from the spec" in text else ""
        for sec in re.split(r"^### ", text, flags=re.M)[1:]:
            head = sec.split("\n", 1)[0]
            if "No standalone reproducer: none was written." in sec:  # a known gap, stated on the page
                missing.append(f"{p.stem}:{head}")
                continue
            assert "```python" in sec, f"{p.name} {head}: no reproducer"
        # a section whose page says the difference needs the whole case (the element alone gives the expected
        # bits) points at `qref run` for it; every other spec reproducer must print the difference
        spec_part = "".join(sec for sec in re.split(r"(?=^### )", spec_part, flags=re.M)
                            if "the difference needs the whole case" not in " ".join(sec.split()))
        for d in reproducer.documented(spec_part):
            got, _, exp = d.prints.removeprefix("got ").partition(" expected ")
            assert got != exp, f"{p.name} {d.title}: the reproducer prints got == expected ({d.prints})"
    assert not missing, f"findings without a standalone reproducer: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(MODULES))
def test_every_reproducer_runs_without_qref_and_prints_the_documented_bits(backend, tmp_path):
    mine = [d for b, d in _all() if b == backend]
    if not mine:
        pytest.skip(f"no reproducer of {backend} in the committed reports")
    if not _installed(backend):
        pytest.skip(f"backend {backend} is not installed ({MODULES[backend]}); CI installs every backend")
    jobs = max(2, min(4, os.cpu_count() or 2))
    # a script that sets environment variables before its imports (a CPU pin) runs in a fresh process; the others
    # in forks of one process that imported the backend (QREF_REPRO_FRESH=1: every script in a fresh process)
    fresh = [os.environ.get("QREF_REPRO_FRESH") == "1" or "os.environ" in d.script for d in mine]
    runs: list[subprocess.CompletedProcess | None] = [None] * len(mine)
    forked = [k for k, f in enumerate(fresh) if not f]
    if forked:
        for k, r in zip(forked, _run_forked(MODULES[backend], [mine[k].script for k in forked], tmp_path, jobs)):
            runs[k] = r
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for k, r in zip([k for k, f in enumerate(fresh) if f],
                        pool.map(lambda k: _run(mine[k].script, tmp_path, k), [k for k, f in enumerate(fresh) if f])):
            runs[k] = r
    bad = []
    for d, r in zip(mine, runs):
        lines = r.stdout.strip().splitlines()
        if r.returncode != 0 or not lines:
            bad.append(f"{d.title}: the script failed: {r.stderr.strip()[-400:]}")
        elif "depends on the surrounding elements" in d.note:
            assert lines[-1].split(" expected ")[1] == d.prints.split(" expected ")[1], d.title
        elif lines[-1] != d.prints:
            bad.append(f"{d.title}: documented `{d.prints}`, the script printed `{lines[-1]}`")
    assert not bad, "\n".join(bad)


def test_qref_is_not_importable_in_the_reproducer_process(tmp_path):
    r = _run("import qref", tmp_path, 0)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr


@pytest.mark.parametrize("a", [np.array([1.5, -0.0, np.nan], np.float32), np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
                               np.array([0x7F7F, 0x0001], np.uint16).view(np.float16),
                               np.array([2**40 + 1], np.int64)])
def test_array_literal_round_trips_bits(a):
    import ml_dtypes

    b = eval(array_literal(a), {"np": np, "ml_dtypes": ml_dtypes})
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()


def test_standalone_prints_got_and_expected_with_the_format_width(tmp_path):
    case = Case(id="elements/uint4/x", family="elements", operation="encode",
                inputs={"x": np.array([1.5], np.float32)}, expected={"codes": np.array([2], np.uint8)},
                array_formats={"codes": "uint4"})
    snippet = "import numpy as np\nx = np.array([1.5], np.float32)\nprint(hex(int(np.trunc(x[0])) & 0xF))"
    script, prints = standalone(snippet, case, "codes", 1, 0x12)  # 0x12: only the format's 4 bits are kept
    assert prints == "got 0x1 expected 0x2"
    r = _run(script, tmp_path, 1)
    assert r.stdout.strip() == prints, r.stderr
    assert standalone("print(1)", case, "codes", 1, 2) == ("", "")
