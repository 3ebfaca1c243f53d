"""Your own backend through the harness: qref.harness.check and `qref run --callable` on deliberately wrong
implementations (tests/data/user_backend_e4m3.py); the report names the defect (docs/user-backends.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qref.cli import main
from qref.errors import QrefError
from qref.harness import render
from qref.harness.user import check, load_callable

DATA = Path(__file__).parent / "data"
FILE = DATA / "user_backend_e4m3.py"
INC = ["elements/float8_e4m3fn/f32/*"]


def test_saturating_encoder_is_found_against_the_spec_and_passes_a_saturating_reference() -> None:
    fn = load_callable(f"{FILE}:saturating_e4m3")
    res = check(fn, "elements", include=INC)
    assert not res.ok
    fails = [r for r in res.results if r.status == "fail"]
    assert fails and all("saturation_nan_inf" in r.vs_profile.classes for r in fails)
    assert "saturation" in render(res).lower()
    ok = check(fn, "elements", policy={"overflow": "saturate"}, include=INC)
    assert ok.ok, [(r.task, r.vs_profile.classes) for r in ok.results if r.status != "pass"]
    assert check(fn, "elements", profile="saturating", include=INC).ok


def test_truncating_encoder_is_classified_as_truncation() -> None:
    fn = load_callable(f"{FILE}:truncating_e4m3")
    res = check(fn, "elements", policy={"overflow": "saturate"}, include=INC)
    classes = {c for r in res.results if r.vs_profile for c in r.vs_profile.classes}
    assert "truncation" in classes, classes
    assert not res.ok


def test_other_formats_are_unsupported_not_failures() -> None:
    fn = load_callable(f"{FILE}:saturating_e4m3")
    res = check(fn, "elements", include=["elements/float8_e5m2/f32/*"])
    assert res.results and {r.status for r in res.results} == {"unsupported"}


def test_cli_callable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--callable", f"{FILE}:saturating_e4m3", "--family", "elements", "-q"]
    argv += [a for p in INC for a in ("--include", p)]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 1
    assert "saturation" in (tmp_path / "a" / "report.md").read_text().lower()
    assert main([*argv, "--policy", "overflow=saturate"]) == 0
    capsys.readouterr()
    assert main(["run", "--callable", f"{FILE}:saturating_e4m3"]) == 2
    assert "--callable needs --family" in capsys.readouterr().err
    with pytest.raises(QrefError, match="MODULE:FUNCTION"):
        load_callable("no_colon_here")


def test_module_callable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    sys.modules.pop("user_backend_e4m3", None)
    fn = load_callable("user_backend_e4m3:saturating_e4m3")
    x = np.array([500.0, 1.0], np.float32)
    assert list(fn(x, "float8_e4m3fn")) == list(np.array([448, 1], np.float32).astype(
        ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_findings_and_bug_report_of_a_user_backend(tmp_path: Path) -> None:
    from qref.harness import findings, report

    res = check(load_callable(f"{FILE}:saturating_e4m3"), "elements", include=INC)
    fs = findings.findings(res)
    assert [(f.kind, f.mechanism) for f in fs] == [("spec", "saturation_nan_inf")]
    f = fs[0]
    assert f.backend == "user" and f.formats == ["float8_e4m3fn"] and len(f.tasks) == 3
    text = findings.bug_report(res, f)
    assert text.startswith("Title: [user]") and "elements.md §2.4" in text and "Got:" in text
    report.write_results(res, tmp_path)
    again = report.load_results(tmp_path / "results.json")
    assert findings.bug_report(again, findings.findings(again)[0]) == text
    written = findings.write_findings(res, str(tmp_path / "f"))
    assert "saturation" in Path(written[0]).read_text() or "1 spec finding" in Path(written[0]).read_text()
