"""Issue 30, the command line: nothing passes silently (a run that checks nothing exits non-zero and says what
happened to every matched case; a user function's sys.exit is its failure), nothing is lost (a command never
writes into or over the suite it reads and owns only the files its manifest lists; an interrupted or killed gen
leaves the old suite intact and its leftovers are removed by the next gen), and `qref verify` checks every
reference, the summary and (--recompute) the element cases' outputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import qref
from qref.cli import main
from qref.conformance import Case, write_suite
from qref.formats.policy import CastPolicy

REPO = Path(__file__).resolve().parents[1]
X = np.array([1.0, 1.0625, -0.0, 500.0, 17.0, -3.25], dtype=np.float32)


def _cases() -> list[Case]:
    sat = CastPolicy(overflow="saturate")
    return [
        Case(id="elements/float8_e4m3fn/f32/a", family="elements", operation="encode", format="float8_e4m3fn",
             policy=CastPolicy(), inputs={"x": X}, expected={"codes": qref.encode(X, "float8_e4m3fn")},
             array_formats={"codes": "float8_e4m3fn"}, profiles=("spec",)),
        Case(id="elements/float8_e4m3fn/f32/one", family="elements", operation="encode", format="float8_e4m3fn",
             policy=CastPolicy(), inputs={"x": X[1:2]}, expected={"codes": qref.encode(X[1:2], "float8_e4m3fn")},
             array_formats={"codes": "float8_e4m3fn"}, profiles=("spec",)),
        Case(id="elements/float8_e4m3fn/f32/sat", family="elements", operation="encode", format="float8_e4m3fn",
             policy=sat, inputs={"x": X * 4}, expected={"codes": qref.encode(X * 4, "float8_e4m3fn", profile=sat)},
             array_formats={"codes": "float8_e4m3fn"}, profiles=("saturating",)),
        Case(id="elements/float8_e4m3fn/decode/float32", family="elements", operation="decode",
             format="float8_e4m3fn", inputs={"codes": np.arange(8, dtype=np.uint8)},
             expected={"y": qref.decode(np.arange(8, dtype=np.uint8), "float8_e4m3fn", dtype=np.float32)},
             params={"dtype": "float32"}, array_formats={"codes": "float8_e4m3fn"}),
    ]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    write_suite(_cases(), root, families=["elements"])
    return root


def _user(tmp_path: Path, body: str) -> str:
    f = tmp_path / "mine.py"
    f.write_text("import sys\nimport numpy as np\n" + body)
    return f"{f}:f"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


ENCODER = "import qref\ndef f(x, fmt):\n    return qref.encode(x, fmt)\n"


# ---- silent passes ------------------------------------------------------------------------------------------------
def test_callable_sys_exit_is_a_failure_of_the_function(tmp_path, suite, capsys):
    spec = _user(tmp_path, "def f(x, fmt):\n    sys.exit(0)\n")
    rc, _out, err = _run(capsys, "run", "--callable", spec, "--family", "elements", "--suite", str(suite), "-q")
    assert rc == 1
    assert "sys.exit(0)" in err and "CRASH" in err


@pytest.mark.parametrize("extra", [["--include", "nomatch/*"], ["--exclude", "*"]])
def test_run_that_runs_nothing_exits_nonzero(tmp_path, suite, capsys, extra):
    rc, out, err = _run(capsys, "run", "--callable", _user(tmp_path, ENCODER), "--family", "elements", "--suite",
                        str(suite), "-q", *extra)
    assert rc == 1 and "no task ran" in err
    assert "matched 0 of 4 cases" in out


def test_callable_with_a_family_the_suite_lacks_exits_nonzero(tmp_path, suite, capsys):
    spec = _user(tmp_path, "def f(op, inputs, spec):\n    return {}\n")
    rc, _out, err = _run(capsys, "run", "--callable", spec, "--family", "uniform", "--suite", str(suite), "-q")
    assert rc == 1 and "no task ran" in err


def test_run_on_an_empty_manifest_exits_nonzero(tmp_path, suite, capsys):
    m = json.loads((suite / "manifest.json").read_text())
    m["cases"], m["summary"] = [], {"arrays": 0, "bytes": 0, "cases": 0}
    (suite / "manifest.json").write_text(json.dumps(m))
    shutil.rmtree(suite / "arrays")
    rc, _out, _err = _run(capsys, "run", "--callable", _user(tmp_path, ENCODER), "--family", "elements", "--suite",
                        str(suite), "-q")
    assert rc != 0


def test_run_with_a_target_that_matches_nothing_exits_nonzero(suite, capsys):
    rc, _out, err = _run(capsys, "run", "--backend", "ml_dtypes", "--target", "nomatch.*", "--suite", str(suite),
                        "--no-xfail", "-q")
    assert rc == 1 and "no task ran" in err


def test_run_says_what_happened_to_every_matched_case(tmp_path, suite, capsys):
    """4 cases; --exclude drops one; of the 3 matched the encoder runs the 2 spec ones, the decode case is not
    asked of a 2-parameter encoder (unsupported), and none is left unexplained."""
    rc, out, err = _run(capsys, "run", "--callable", _user(tmp_path, ENCODER), "--family", "elements", "--suite",
                        str(suite), "-q", "--exclude", "*/one")
    assert rc == 0, err
    line = next(s for s in out.splitlines() if "the selection matched" in s)
    assert "matched 3 of 4 cases (1 skipped by the filters" in line
    assert line.endswith("1 ran, 0 unsupported, 2 not run")
    # every matched case is in exactly one bucket
    nums = [int(w) for w in line.split(":")[-1].replace(",", " ").split() if w.isdigit()]
    assert sum(nums) == 3
    assert "saturating" in out  # the case whose outputs are the saturating profile's
    assert "decode" in out  # the decode case: not an operation a 2-parameter encoder is asked for


def test_run_explains_a_policy_variant_case_no_profile_lists(tmp_path, capsys):
    """The issue's MLX example: elements/float8_e4m3fn/f32/nearest_even/saturate/special_nan_max has exactly the
    mlx profile's policy (nan='max') but lists no profile: the generator's per-knob cases are built apart from
    the profile cases, and MLX runs the same inputs as elements/float8_e4m3fn/f32/profile/mlx/special. The run
    now says so instead of dropping the case silently."""
    pol = CastPolicy(overflow="saturate", nan="max")
    x = np.array([np.nan, -np.nan, 1e6, 1.0], np.float32)
    root = tmp_path / "s"
    write_suite([Case(id="elements/float8_e4m3fn/f32/nearest_even/saturate/special_nan_max", family="elements",
                      operation="encode", format="float8_e4m3fn", policy=pol, inputs={"x": x},
                      expected={"codes": qref.encode(x, "float8_e4m3fn", profile=pol)},
                      array_formats={"codes": "float8_e4m3fn"}),
                 *_cases()[:1]], root, families=["elements"])
    rc, out, err = _run(capsys, "run", "--callable", _user(tmp_path, ENCODER), "--family", "elements", "--suite",
                        str(root), "-q")
    assert rc == 0, err
    assert "matched 2 of 2 cases" in out and "1 ran, 0 unsupported, 1 not run" in out
    assert "no recorded profile" in out


def test_callable_module_that_fails_to_import_is_a_qref_error(tmp_path, suite, capsys):
    for body in ("raise RuntimeError('boom')\n", "def f(:\n", "import no_such_module_qref\n", "sys.exit(3)\n"):
        rc, _out, err = _run(capsys, "run", "--callable", _user(tmp_path, body), "--family", "elements", "--suite",
                            str(suite), "-q")
        assert rc == 2 and "Traceback" not in err and "--callable" in err, (body, err)


def test_callable_report_of_a_one_element_input_has_a_script(tmp_path, suite, capsys):
    spec = _user(tmp_path, "def f(x, fmt):\n    return np.zeros(x.shape, np.uint8)\n")
    report = tmp_path / "r.md"
    rc, _out, _err = _run(capsys, "run", "--callable", spec, "--family", "elements", "--suite", str(suite), "-q",
                        "--include", "*/one", "--report", str(report), "--no-xfail")
    assert rc == 1
    text = report.read_text()
    assert "too large to write out" not in text
    from qref.harness.reproducer import documented

    (rep,) = documented(text)
    got = subprocess.run([sys.executable, "-c", rep.script], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    # 1.0625 is a tie between 1.0 (0x38) and 1.125 (0x39) in E4M3: nearest_even gives 0x38; the function gives 0
    assert got.stdout.split() == ["got", "0x00", "expected", "0x38"]


# ---- data lost or overwritten ------------------------------------------------------------------------------------
def test_gen_force_keeps_a_user_file_that_looks_like_a_hash(suite, capsys):
    h = "ab" + "0" * 62
    mine = suite / "arrays" / "ab" / f"{h}.npy"
    mine.parent.mkdir(exist_ok=True)
    mine.write_bytes(b"my data")
    with pytest.raises(qref.QrefError, match="did not write"):
        write_suite(_cases(), suite, families=["elements"], overwrite=True)
    assert mine.read_bytes() == b"my data"


@pytest.mark.parametrize("opt", ["--jsonl", "--hex", "--mlir"])
def test_export_refuses_to_write_into_its_own_input(suite, capsys, opt):
    before = {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    target = suite / "manifest.json" if opt == "--jsonl" else suite
    rc, _out, err = _run(capsys, "export", str(suite), opt, str(target), "--force")
    assert rc == 2 and "inside the suite" in err
    assert {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()} == before


def test_run_refuses_outputs_inside_the_suite(tmp_path, suite, capsys):
    rc, _out, err = _run(capsys, "run", "--callable", _user(tmp_path, ENCODER), "--family", "elements", "--suite",
                        str(suite), "-q", "--report", str(suite / "manifest.json"), "--force")
    assert rc == 2 and "inside the suite" in err


def _leftovers(root: Path) -> list[Path]:
    return sorted(root.parent.glob(f".{root.name}.qref-*"))


def _gen_and_signal(root: Path, sig: int) -> subprocess.CompletedProcess[str] | int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "qref", "gen", str(root), "--force", "--families", "elements",
                          "--formats", "float8_e4m3fn", "-q"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _leftovers(root) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert p.poll() is None, f"gen ended before it could be signalled: {p.communicate()}"
    time.sleep(0.3)
    p.send_signal(sig)
    try:
        _out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    return p.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupted_or_killed_gen_keeps_the_old_suite(suite, sig):
    before = {p.relative_to(suite): p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    rc, err = _gen_and_signal(suite, sig)
    assert rc != 0 and "Traceback" not in err, err
    assert {p.relative_to(suite): p.read_bytes() for p in suite.rglob("*") if p.is_file()} == before
    assert qref.conformance.verify_suite(suite).ok
    if sig == signal.SIGKILL:
        assert _leftovers(suite)  # a killed process cleans nothing up ...
    else:
        assert not _leftovers(suite)
    write_suite(_cases(), suite, families=["elements"], overwrite=True)  # ... the next gen removes what it left
    assert not _leftovers(suite)


def test_gen_leaves_a_live_gens_temporary_directory_alone(suite):
    live = suite.parent / f".{suite.name}.qref-tmp-{os.getppid()}-abc123"
    (live / "arrays").mkdir(parents=True)
    write_suite(_cases(), suite, families=["elements"], overwrite=True)
    assert live.is_dir()


# ---- verify ----------------------------------------------------------------------------------------------------
def _manifest(suite: Path) -> dict:
    return json.loads((suite / "manifest.json").read_text())


def _save(suite: Path, m: dict) -> None:
    from qref.conformance.suite import dumps_manifest

    (suite / "manifest.json").write_text(dumps_manifest(m))


def test_verify_checks_every_reference_of_a_shared_file(suite, capsys):
    m = _manifest(suite)
    # point the second case's input at the first case's file with the first case's hash, but another shape
    first = m["cases"][0]["inputs"]["x"]
    m["cases"][1]["inputs"]["x"] = {**first, "shape": [3, 2]}
    _save(suite, m)
    rc, _out, err = _run(capsys, "verify", str(suite))
    assert rc == 1 and "case elements/float8_e4m3fn/f32/one" in err


def test_verify_checks_the_summary(suite, capsys):
    m = _manifest(suite)
    m["summary"]["cases"] += 1
    _save(suite, m)
    rc, _out, err = _run(capsys, "verify", str(suite))
    assert rc == 1 and "summary" in err


def test_verify_recompute_catches_a_consistent_edit(suite, capsys):
    from qref.conformance.npy import npy_bytes
    from qref.conformance.suite import sha256

    m = _manifest(suite)
    ref = m["cases"][0]["expected"]["codes"]
    codes = np.load(suite / ref["file"])
    codes[0] ^= 1
    data = npy_bytes(codes)
    h = sha256(data)
    new = f"arrays/{h[:2]}/{h}.npy"
    (suite / new).parent.mkdir(exist_ok=True)
    (suite / new).write_bytes(data)
    (suite / ref["file"]).unlink()
    ref.update(file=new, sha256=h)
    _save(suite, m)
    rc, _out, err = _run(capsys, "verify", str(suite))
    assert rc == 0, err  # the hash is consistent: only recomputing sees it
    rc, _out, err = _run(capsys, "verify", str(suite), "--recompute")
    assert rc == 1 and "elements/float8_e4m3fn/f32/a" in err and "1 element" in err
