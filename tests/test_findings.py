"""Findings are root causes: one per mechanism in one backend (qref/harness/findings.py).

Run results are built by hand (the shapes ``qref run`` writes): the same class in two targets, two families, two
formats and both comparisons must give one finding whose spec difference and profile status are fields; two
crashes that differ only in numbers and element types are one crash group; what a backend returns where the spec
leaves the result unspecified is a finding of its own kind. The pages never carry a line over the limit.
"""

from __future__ import annotations

import pytest

from qref.harness import findings
from qref.harness.model import Comparison, TaskResult
from qref.harness.reproducer import MAX_LINE, code_lines, layout, wrap
from qref.harness.runner import RunResults, TargetInfo


def _cmp(classes: dict[str, int]) -> Comparison:
    n = sum(classes.values())
    return Comparison(compared=10, mismatches=n, classes=dict(classes),
                      examples={c: [("codes", 0)] for c in classes},
                      repro={c: {"case": "x", "command": "print(1)", "prints": "got 0x1 expected 0x2", "spec": "s"}
                             for c in classes})


def _res() -> RunResults:
    res = RunResults(suite="v1", suite_cases=10, backends=["b", "c"], versions={"b": {"b": "1.0"}})
    res.targets = [TargetInfo("b", "b.eager", "elements", "api", "saturating"),
                   TargetInfo("b", "b.jit", "uniform", "api", "onnx"),
                   TargetInfo("c", "c.run", "uniform", "api", None)]
    res.results = [
        # tie rule: vs the spec in both targets (two families, two formats), vs the profile in one
        TaskResult("b.eager", "elements", "elements/float8_e4m3fn/a", ("a",), "xfail", "r", _cmp({"tie_rule": 2}),
                   _cmp({"tie_rule": 2}), 4),
        TaskResult("b.jit", "uniform", "uniform/int8/b", ("b",), "pass", "", _cmp({}), _cmp({"tie_rule": 3}), 4),
        # a difference from qref's profile only
        TaskResult("b.jit", "uniform", "uniform/uint8/c", ("c",), "fail", "", _cmp({"saturation": 1}), _cmp({}), 4),
        # two crashes differing in numbers and the element type
        TaskResult("c.run", "uniform", "uniform/int4/d", ("d",), "crash", "E: failed on tensor<10xi4> at 3"),
        TaskResult("c.run", "uniform", "uniform/int2/e", ("e",), "crash", "E: failed on tensor<7x2xi2> at 12"),
        # unspecified elements: NaN to integer storage
        TaskResult("c.run", "uniform", "uniform/int8/f", ("f",), "pass", "", _cmp({}), _cmp({}), 4,
                   unspecified={"NaN|int8": {"saturates": 3}, "NaN|uint8": {"0": 2}}),
    ]
    return res


def test_one_finding_per_backend_and_mechanism():
    fs = findings.findings(_res())
    pairs = [(f.backend, f.mechanism) for f in fs]
    assert len(pairs) == len(set(pairs)) == 4
    tie = next(f for f in fs if f.mechanism == "tie_rule")
    assert tie.kind == "spec" and tie.family == "elements, uniform"
    assert tie.formats == ["float8_e4m3fn", "int8"] and tie.targets == ["b.eager", "b.jit"]
    assert tie.spec_elements == 5 and "not modelled" in tie.profile and "expected-failure" in tie.profile
    gap = next(f for f in fs if f.mechanism == "saturation")
    assert gap.kind == "profile" and gap.spec_elements == 0 and "unexpected" in gap.profile
    assert gap.record == "`onnx` record: clamp = integer (spec: float)"  # the mechanism as the record names it
    crash = next(f for f in fs if f.kind == "crash")
    assert crash.tasks == ["uniform/int2/e", "uniform/int4/d"] and len(crash.errors) == 2
    unspec = next(f for f in fs if f.kind == "unspecified")
    assert unspec.mechanism == "unspecified:NaN" and unspec.elements == 5
    assert "int8: saturates" in unspec.statement and "uint8: 0" in unspec.statement


def test_every_finding_cites_its_upstream_clause_and_marks_qref_choices():
    fs = findings.findings(_res())
    assert all(f.citation for f in fs)
    tie = next(f for f in fs if f.mechanism == "tie_rule")
    assert "OFP8" in tie.citation and "StableHLO" in tie.citation and tie.choice == ""
    unspec = next(f for f in fs if f.kind == "unspecified")
    assert "unspecified" in unspec.choice


def test_the_summary_lists_the_top_findings_by_severity_one_line_each():
    res = _res()
    fs = findings.findings(res)
    text = findings.render_summary(res, fs)
    top = [ln for ln in text.split("## Per backend")[0].splitlines() if ln.startswith("- **")]
    assert len(top) == len(fs)
    assert top[0].startswith("- **crash**") and top[-1].startswith("- **impl.-defined**")
    assert "4 findings in all (4 distinct backend and mechanism pairs)" in text
    for b in res.backends:
        page = findings.render_backend(res, b, fs)
        assert max(len(ln) for ln in page.splitlines()) <= MAX_LINE


def test_wrap_keeps_tables_and_code_and_breaks_prose():
    prose = "- " + " ".join(["word"] * 200)
    text = wrap("\n".join([prose, "| a | " + "b" * 400 + " |", "```python", "x = '" + "c" * 400 + "'", "```"]))
    lines = text.splitlines()
    assert all(len(ln) <= MAX_LINE for ln in lines if not ln.startswith(("|", "x =")))
    assert " ".join(ln.strip() for ln in lines[: lines.index(next(ln for ln in lines if ln.startswith("|")))]) \
        == prose


def test_layout_writes_mlir_one_operation_a_line_and_keeps_the_program():
    import ast

    script = ("import numpy as np\nm = compile_str('module { func.func @f(%x: tensor<1xi8>) -> tensor<1xi8> { "
              "%y = arith.addi %x, %x : tensor<1xi8> return %y : tensor<1xi8> }}', target='x')\n"
              "a = np.frombuffer(bytes.fromhex('" + "ab" * 300 + "'), np.uint8)\nprint(hex(a[0]))")
    out = layout(script)
    assert max(len(ln) for ln in out.splitlines()) <= 120
    assert any(ln.strip().startswith("%y = arith.addi") for ln in out.splitlines())
    assert code_lines(out) == code_lines(script) == 4
    tree = ast.parse(out)
    hexarg = tree.body[2].value.args[0].args[0]  # the literal, joined back by Python
    assert hexarg.value == "ab" * 300


@pytest.mark.parametrize(("reason", "kind"), [
    ("iree-compile: failed to legalize operation 'chlo.broadcast_divide' that was explicitly marked illegal",
     "crash"),
    ("jnp.float6_e2m3fn exists but XLA:CPU rejects it (INVALID_ARGUMENT: Invalid XLA PrimitiveType)", "crash"),
    ("mlir: LLVM Translation failed for operation: builtin.unrealized_conversion_cast", "crash"),
    ("ONNX Cast has no float8_e3m4 type", "unsupported"),  # the adapter: no such type
    ("mlir: 'quant.qcast' op operand #0 must be scalar or tensor of floating-point", "unsupported"),  # verifier
    ("onnxruntime: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
     "QuantizeLinear(23) node with name ''", "unsupported"),  # no kernel registered: not claimed
])
def test_one_rule_tells_a_crash_from_unsupported(reason, kind):
    assert findings.failure_kind(reason) == kind


def test_an_unsupported_task_that_is_a_crash_by_the_rule_joins_a_crash_group():
    res = _res()
    res.results.append(TaskResult("c.run", "uniform", "uniform/int3/g", ("g",), "unsupported",
                                  "E: failed to legalize operation 'x.y' that was explicitly marked illegal"))
    res.results.append(TaskResult("c.run", "uniform", "uniform/int3/h", ("h",), "unsupported", "no such type"))
    fs = findings.findings(res)
    crashes = [f for f in fs if f.kind == "crash"]
    assert len(crashes) == 2
    new = next(f for f in crashes if f.tasks == ["uniform/int3/g"])
    assert "1 of its target runs reported as unsupported" in new.statement


def test_prints_are_captured_by_running_the_scripts_and_a_non_reproducing_one_is_replaced():
    fs = findings.findings(_res())
    tie = next(f for f in fs if f.mechanism == "tie_rule")
    tie.repro = {"case": "a", "command": "print('got 0x1 expected 0x1')", "prints": "got 0x1 expected 0x2"}
    tie.candidates = [{"case": "b", "command": "import sys; sys.exit(3)"},
                      {"case": "c", "command": "print('got 0x3 expected 0x2')", "prints": "written by hand"}]
    gap = next(f for f in fs if f.mechanism == "saturation")
    gap.repro = {"case": "d", "command": "print('got 0x5 expected 0x5')", "prints": ""}
    gap.candidates = []
    findings.capture_prints([tie, gap])
    assert tie.repro["case"] == "c" and tie.repro["prints"] == "got 0x3 expected 0x2"
    assert gap.repro["prints"] == "got 0x5 expected 0x5" and "needs the whole case" in gap.repro["note"]


def test_the_committed_pages_hold_one_finding_per_backend_and_mechanism():
    """docs/conformance/<backend>.md: each finding's "- mechanism:" line (its class or crash key) once a page."""
    import re
    from pathlib import Path

    pages = [p for p in sorted((Path(__file__).resolve().parents[1] / "docs" / "conformance").glob("*.md"))
             if p.stem not in ("README", "divergence")]
    assert pages
    total = 0
    for p in pages:
        text = p.read_text(encoding="utf-8")
        ids = re.findall(r"^### (\S+)", text, re.M)
        mechs = [m.split(";")[0] for m in re.findall(r"^- mechanism: (.*)$", text, re.M)]
        assert len(ids) == len(set(ids)), f"{p.name}: a finding id twice"
        dup = sorted({m for m in mechs if mechs.count(m) > 1})
        assert not dup, f"{p.name}: two findings with the mechanism {dup}"
        total += len(mechs)
    assert total > 50


def test_a_finding_whose_first_example_has_no_script_takes_the_first_that_has():
    res = _res()
    r0 = res.results[0]
    r0.vs_spec.repro["tie_rule"] = {"case": "a", "command": "", "prints": "", "index": "0", "output": "codes"}
    fs = findings.findings(res)
    tie = next(f for f in fs if f.mechanism == "tie_rule")
    assert tie.repro["command"] == "print(1)" and tie.unwritten == []


def test_sparse_input_writes_a_mostly_zero_array_bit_for_bit():
    import ml_dtypes
    import numpy as np

    from qref.harness.adapters._common import array_literal
    from qref.harness.reproducer import _runs, sparse_input

    assert _runs([0, 64, 128, 130, 131, 132, 500]) == "0:129:64, 130:133, 500"
    x = np.zeros((64, 256), ml_dtypes.bfloat16)
    x[:, 0] = np.arange(1, 65)
    x[3] = np.linspace(-1, 1, 256)
    x[9, 7] = -0.0  # a zero of sign bit 1 is not 0 bits
    stmts = sparse_input("x", x, array_literal)
    assert len(stmts) == 2 and stmts[0] == "x = np.zeros((64, 256), ml_dtypes.bfloat16)"
    ns = {"np": np, "ml_dtypes": ml_dtypes}
    exec("\n".join(stmts), ns)
    assert ns["x"].dtype == x.dtype and ns["x"].shape == x.shape and ns["x"].tobytes() == x.tobytes()
    dense = np.arange(100, dtype=np.float32)
    assert sparse_input("d", dense, array_literal) == [f"d = {array_literal(dense)}"]


def test_torchao_script_case_keeps_every_block_absmax_and_the_element_block():
    from types import SimpleNamespace

    import numpy as np

    from qref.harness.adapters import torchao

    x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    x[0, 5], x[1, 70], x[2, :64] = np.nan, -np.inf, 0  # a NaN block, an Inf block, a zero block
    case = SimpleNamespace(operation="lookup_quantize", scheme={"block_size": 64}, inputs={"x": x})
    red = torchao.script_case("torchao.to_nf4", case, 64 * 5 + 3, "codes")
    x, y = case.inputs["x"].reshape(-1, 64), red.inputs["x"].reshape(-1, 64)
    with np.errstate(invalid="ignore"):
        ax, ay = np.max(np.abs(x.astype(np.float64)), 1), np.max(np.abs(y.astype(np.float64)), 1)
    assert np.array_equal(ax, ay, equal_nan=True) and np.isnan(ax).any()
    assert y[5].tobytes() == x[5].tobytes()
    assert np.count_nonzero(y[6]) <= 1 and np.count_nonzero(y) < 64 + 256
    assert torchao.script_case("torchao.to_mx.floor", case, 0, "codes") is None
