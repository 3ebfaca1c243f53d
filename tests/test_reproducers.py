"""Every reproducer script in the committed reports runs without qref and prints the bits it documents.

The scripts are read from docs/conformance/*.md (one page per backend) and docs/conformance.md (per target); each
runs in its own process, from an empty directory, with ``sys.modules['qref'] = None`` so that ``import qref``
raises, and must print exactly its documented ``got 0x.. expected 0x..`` line. A backend that is not installed
is skipped with its name. Each runs as reproducer.run_scripts runs it: in a fork of one process that imported
its backend under the environment the script sets first (``QREF_REPRO_FRESH=1``: every script in a fresh
interpreter). In a session that also runs tests/test_harness_report.py with every backend installed, that
test's regeneration of the pages runs the same scripts the same way and compares the captured lines; conftest.py
then skips the per-backend runs here (QREF_REPRO_ALL=1 runs them anyway). Scripts have at most
``reproducer.MAX_LINES`` lines and import neither qref nor the committed suite.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
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
MODULES = reproducer.PRELOAD


def _installed(backend: str) -> bool:
    os.environ.setdefault("KERAS_BACKEND", "jax")  # as the keras adapter runs it (keras 3 defaults to TensorFlow)
    try:
        importlib.import_module(MODULES[backend].split(",")[0])
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
def test_every_reproducer_runs_without_qref_and_prints_the_documented_bits(backend):
    mine = [d for b, d in _all() if b == backend]
    if not mine:
        pytest.skip(f"no reproducer of {backend} in the committed reports")
    if not _installed(backend):
        pytest.skip(f"backend {backend} is not installed ({MODULES[backend]}); CI installs every backend")
    # each script in its own process: a fork of one process that imported the backend under the environment the
    # script sets (reproducer.run_scripts), or with QREF_REPRO_FRESH=1 a fresh interpreter for every script
    fresh = os.environ.get("QREF_REPRO_FRESH") == "1"
    got = reproducer.run_scripts([d.script for d in mine], None if fresh else [MODULES[backend]] * len(mine))
    runs = [subprocess.CompletedProcess([d.title], rc, out, err) for d, (rc, out, err) in zip(mine, got)]
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


@pytest.mark.parametrize("module", [None, "ml_dtypes"])
def test_qref_is_not_importable_in_the_reproducer_process(module):
    """Neither in a fresh interpreter nor in a fork of the preloading process (whose own directory, qref/harness,
    is not on the path either)."""
    [(rc, _, err), (rc2, _, err2)] = reproducer.run_scripts(["import qref", "import runner"], [module] * 2)
    assert rc != 0 and "ModuleNotFoundError" in err
    assert rc2 != 0 and "ModuleNotFoundError" in err2


def test_env_prologue_takes_plain_assignments_before_the_imports_only():
    pin = "import os; os.environ['XLA_FLAGS'] = '--xla_cpu_max_isa=AVX2'"
    assert reproducer.env_prologue(pin + "\nimport numpy as np\nprint(1)") == (("XLA_FLAGS", "--xla_cpu_max_isa=AVX2"),)
    assert reproducer.env_prologue("import os\nos.environ['A'] = 'x'\nimport torch") == (("A", "x"),)
    assert reproducer.env_prologue("import numpy as np\nprint(1)") == ()
    assert reproducer.env_prologue("import numpy\nimport os; os.environ['A'] = 'x'") is None  # after an import
    assert reproducer.env_prologue("import os\nos.environ.update(A='x')") is None
    assert reproducer.env_prologue("import os\nprint(os.environ['HOME'])") is None


def test_forked_and_fresh_runs_print_the_same():
    """A script that sets a variable before its imports sees it in the forked run as in a fresh interpreter; a
    failing script gives its exit status and traceback; a NameError stays one (fresh namespace per script)."""
    scripts = ["import os; os.environ['QREF_T'] = '7'\nimport os, numpy as np\nprint(os.environ['QREF_T'], "
               "np.float32(1.5).view(np.uint32))",
               "import numpy as np\nraise SystemExit(3)",
               "import numpy as np\nprint(undefined_name)",
               "import sys\nimport numpy\nprint(sorted(m for m in sys.modules if m.startswith('qref')))"]
    forked = reproducer.run_scripts(scripts, ["numpy"] * len(scripts))
    fresh = reproducer.run_scripts(scripts, None)
    assert [r[0] for r in forked] == [r[0] for r in fresh] == [0, 3, 1, 0]
    assert forked[0][1] == fresh[0][1] == "7 1069547520\n"
    assert "NameError" in forked[2][2] and "NameError" in fresh[2][2]
    assert forked[3][1] == fresh[3][1] == "['qref']\n"  # the blocked entry only


@pytest.mark.parametrize("a", [np.array([1.5, -0.0, np.nan], np.float32), np.arange(-3, 3, dtype=np.int8).reshape(2, 3),
                               np.array([0x7F7F, 0x0001], np.uint16).view(np.float16),
                               np.array([2**40 + 1], np.int64)])
def test_array_literal_round_trips_bits(a):
    import ml_dtypes

    b = eval(array_literal(a), {"np": np, "ml_dtypes": ml_dtypes})
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()


def test_standalone_prints_got_and_expected_with_the_format_width():
    case = Case(id="elements/uint4/x", family="elements", operation="encode",
                inputs={"x": np.array([1.5], np.float32)}, expected={"codes": np.array([2], np.uint8)},
                array_formats={"codes": "uint4"})
    snippet = "import numpy as np\nx = np.array([1.5], np.float32)\nprint(hex(int(np.trunc(x[0])) & 0xF))"
    script, prints = standalone(snippet, case, "codes", 1, 0x12)  # 0x12: only the format's 4 bits are kept
    assert prints == "got 0x1 expected 0x2"
    [(rc, out, err)] = reproducer.run_scripts([script])
    assert rc == 0 and out.strip() == prints, err
    assert standalone("print(1)", case, "codes", 1, 2) == ("", "")
