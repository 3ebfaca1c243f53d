"""Findings a previous release showed and the locked one fixed (qref/harness/fixed.py): the committed files
validate, ``record`` keeps exactly the (backend, mechanism) pairs that disappeared, a malformed entry is refused
with the field named, and the backend page lists the entries under "Fixed in a newer release"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qref.errors import QrefError
from qref.harness import findings, fixed
from qref.harness.adapters import BACKENDS, backend_module
from qref.harness.reproducer import MAX_LINE
from tests.test_findings import _res


def _entry(**kw):
    e = {"mechanism": "tie_rule", "kind": "spec", "seen_in": "0.6.0", "fixed_in": "0.7.0", "statement": "s",
         "targets": ["b.eager"], "cases": ["elements/float8_e4m3fn/a"], "evidence": "two runs"}
    e.update(kw)
    return e


_LOCK = Path(__file__).resolve().parents[1] / "requirements" / "lock.txt"
_COMMITTED = sorted(fixed.FIXED_DIR.glob("*.json"))


def _locked() -> dict[str, str]:
    """requirements/lock.txt's pins, by normalized distribution name."""
    out = {}
    for ln in _LOCK.read_text(encoding="utf-8").splitlines():
        name, sep, version = ln.split(";")[0].split("#")[0].strip().partition("==")
        if sep:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return out


def test_fixed_files_are_committed():
    # issue 29's runs (aqt, keras and torch_compile: no finding of the previous releases run was fixed; mlir /
    # stablehlo: no earlier torch-mlir wheel for this Python)
    recorded = {"ml_dtypes", "onnxruntime", "onnx_reference", "mlx", "bitsandbytes", "qwix", "iree", "torch"}
    assert {p.stem for p in _COMMITTED} >= recorded, [p.name for p in _COMMITTED]


@pytest.mark.parametrize("path", _COMMITTED, ids=lambda p: p.stem)
def test_every_committed_file_validates_and_names_versions(path):
    assert path.stem in BACKENDS, path.name
    entries = fixed.load_fixed(path.stem)
    assert entries, f"{path.name}: an empty file records nothing"
    lock = _locked()
    pins = [lock[d] for d in (re.sub(r"[-_.]+", "-", d).lower() for d in backend_module(path.stem).DISTRIBUTIONS)
            if d in lock]
    assert pins, f"{path.stem}: none of its distributions is pinned in {_LOCK.name}"
    for e in entries:
        assert fixed._key(e.seen_in) < fixed._key(e.fixed_in)
        # fixed in a release no newer than the lock (the locked one when recorded), seen in an older one
        assert any(fixed._key(e.fixed_in) <= fixed._key(v) for v in pins), (e.mechanism, e.fixed_in, pins)
        assert e.seen_in in e.evidence and e.fixed_in in e.evidence, (e.mechanism, e.evidence)
        assert e.cases and all(c.count("/") >= 2 for c in e.cases), e.cases


def test_record_keeps_the_mechanisms_the_locked_run_no_longer_has():
    prev = findings.findings(_res())
    res = _res()
    res.results = [r for r in res.results if r.task != "uniform/uint8/c"]  # the saturation gap is gone
    now = findings.findings(res)
    got = fixed.record(prev, now, "b", "1.0", "1.1", "runs")
    assert [(f.mechanism, f.kind, f.fixed_in) for f in got] == [("saturation", "profile", "1.1")]
    assert got[0].cases == ("uniform/uint8/c",) and got[0].targets == ("b.jit",)


def test_record_leaves_out_the_excluded_mechanisms_and_refuses_a_pattern_that_matches_none():
    prev = findings.findings(_res())
    every = {f.mechanism for f in fixed.record(prev, [], "b", "1.0", "1.1", "runs")}
    got = {f.mechanism for f in fixed.record(prev, [], "b", "1.0", "1.1", "runs", exclude=("satur*",))}
    assert "saturation" in every and got == every - {"saturation"}
    with pytest.raises(QrefError, match="matches no mechanism"):
        fixed.record(prev, [], "b", "1.0", "1.1", "runs", exclude=("crash:*",))


@pytest.mark.parametrize(("change", "field"), [
    ({"seen_in": "0.7.0"}, "earlier release"), ({"fixed_in": "latest"}, "fixed_in"), ({"kind": "bug"}, "kind"),
    ({"targets": ["c.run"]}, "targets"), ({"statement": ""}, "statement"), ({"extra": 1}, "exactly the keys"),
])
def test_a_malformed_entry_is_refused_with_the_field_named(tmp_path, change, field):
    (tmp_path / "b.json").write_text(json.dumps({"backend": "b", "fixed": [_entry(**change)]}))
    with pytest.raises(QrefError, match=field):
        fixed.load_fixed("b", tmp_path)


def test_write_merges_and_the_page_lists_the_fixed_findings(tmp_path):
    prev = findings.findings(_res())
    got = fixed.record(prev, [], "b", "1.0", "1.1", "runs")
    p = fixed.write_fixed("b", got, tmp_path)
    fixed.write_fixed("b", got[:1], tmp_path)  # the same entry again: replaced, not doubled
    back = fixed.load_fixed("b", tmp_path)
    assert p.name == "b.json" and len(back) == len(got) == 2
    lines = fixed.render(back)
    assert lines[0] == "## Fixed in a newer release"
    assert sum(ln.startswith("- **fixed in 1.1** (seen in 1.0") for ln in lines) == 2
    assert max(len(ln) for ln in lines) <= MAX_LINE
