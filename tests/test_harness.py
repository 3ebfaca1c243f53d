"""The conformance harness (qref/harness, docs/conformance.md): xfail files, classification, the runner, the
report and the CLI. Real backends are used where one is needed (each test skips when its library is missing);
the "broken backends" here are test doubles that return hand-written codes, to check the harness's own logic.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from qref.conformance import Case, load_suite, write_suite
from qref.errors import QrefError
from qref.harness import classify, report, runner
from qref.harness.adapters._mlir import LOWERING_FAILURES
from qref.harness.families import Expectation, get_family
from qref.harness.model import Target, Unsupported
from qref.harness.xfail import Xfails, parse_xfails

F32 = np.float32


def f32_bits(*bits: int) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(F32)


# ---------------------------------------------------------------------------------------------------------
# xfail files
# ---------------------------------------------------------------------------------------------------------
def test_xfail_parse_and_errors():
    text = "# comment\n\njax.*  elements/int4/*  truncation,tie_rule  astype truncates\n"
    (e,) = parse_xfails(text, "f")
    assert (e.target, e.cases, e.classes, e.reason) == ("jax.*", "elements/int4/*", ("truncation", "tie_rule"),
                                                       "astype truncates")
    with pytest.raises(QrefError, match="reason is required"):
        parse_xfails("jax.* elements/* truncation\n", "f")
    with pytest.raises(QrefError, match="unknown mismatch class"):
        parse_xfails("jax.* elements/* truncaton oops\n", "f")
    (e,) = parse_xfails("t * tie_rule+wrap_around,* why\n")
    assert e.covers("anything")


def test_xfail_coverage_and_staleness():
    xf = Xfails(parse_xfails("t.a  c/x/*  tie_rule  r1\nt.a  c/x/*  truncation  r2\nt.b  c/*  *  r3\n"))
    assert xf.check("t.a", ("c/x/1",), {"tie_rule", "truncation"}) == (True, "r1; r2")
    assert xf.check("t.a", ("c/x/2",), {"tie_rule", "nan_sign_or_code"})[0] is False  # a class not covered
    assert xf.check("t.a", ("c/y/1",), {"tie_rule"})[0] is False  # no matching glob
    assert xf.check("t.b", ("c/z",), set()) == (False, "")  # a passing task: the entry matched but is unused
    assert [e.reason for e in xf.stale()] == ["r3"]


# ---------------------------------------------------------------------------------------------------------
# classification (hand-derived E4M3FN codes: 1.0 = 0x38, 1.125 = 0x39, 448 = 0x7E, NaN = 0x7F / 0xFF)
# ---------------------------------------------------------------------------------------------------------
def _e4m3_case(x: np.ndarray, codes: list[int]) -> Case:
    return Case(id="elements/t/x", family="elements", operation="encode", format="float8_e4m3fn",
                policy=None, inputs={"x": x}, expected={"codes": np.array(codes, dtype=np.uint8)},
                array_formats={"codes": "float8_e4m3fn"}, profiles=("spec",))


@pytest.mark.parametrize(("x", "spec_code", "got", "cls"), [
    (f32_bits(0x3F880000), 0x38, 0x39, "tie_rule"),  # 1.0625: the midpoint of 1.0 and 1.125, even is 1.0
    (f32_bits(0x3F8FFFFF), 0x39, 0x38, "truncation"),  # just below 1.125: nearest is 1.125
    (F32([464.0]), 0x7F, 0x7E, "saturation_nan_inf"),  # the overflow tie: NaN by default, 448 saturating
    (F32([-0.0]), 0x80, 0x00, "sign_of_zero"),
    (f32_bits(0x7FC00000), 0x7F, 0xFF, "nan_sign_or_code"),
    (F32([2.0 ** -10]), 0x01, 0x00, "subnormal_flush"),  # the smallest subnormal 2^-9 is 0x01; 2^-10 ties to 0
])
def test_classify_elements(x, spec_code, got, cls):
    if cls == "subnormal_flush":  # 2^-10 is the tie between 0 and 2^-9: round to even gives 0, so use 3 * 2^-11
        x = F32([3 * 2.0 ** -11])
    case = _e4m3_case(x, [spec_code])
    fam = get_family("elements")
    exp = fam.expectation(case, "spec")
    assert int(exp.outputs["codes"][0]) == spec_code  # qref agrees with the hand-derived code
    c = classify.compare(case, fam, exp, {"codes": np.array([got], np.uint8)}, "spec")
    assert (c.compared, c.mismatches, c.classes) == (1, 1, {cls: 1})
    assert c.examples[cls] == [("codes", 0)]


def test_classify_skips_unspecified_and_counts_as_bits():
    case = _e4m3_case(F32([1.0, 1.0]), [0x38, 0x38])
    fam = get_family("elements")
    exp = Expectation({"codes": np.array([0x38, 0x38], np.uint8)}, {"codes": np.array([False, True])})
    c = classify.compare(case, fam, exp, {"codes": np.array([0x38, 0x00], np.uint8)}, "spec")
    assert (c.compared, c.mismatches) == (1, 0)


def test_classify_double_rounding_float64():
    # 1 + 2^-4 + 2^-40: nearest E4M3FN is 1.125 (0x39); via float32 it becomes the tie 1.0625 -> 1.0 (0x38)
    x = np.array([1 + 2.0 ** -4 + 2.0 ** -40])
    case = Case(id="elements/t/x", family="elements", operation="encode", format="float8_e4m3fn", inputs={"x": x},
                expected={"codes": np.array([0x39], np.uint8)}, array_formats={"codes": "float8_e4m3fn"},
                profiles=("spec",))
    fam = get_family("elements")
    c = classify.compare(case, fam, fam.expectation(case, "spec"), {"codes": np.array([0x38], np.uint8)}, "spec")
    assert c.classes == {"double_rounding": 1}


# ---------------------------------------------------------------------------------------------------------
# the runner with test doubles
# ---------------------------------------------------------------------------------------------------------
def _double(name: str, codes_fn, profile: str | None = None, unsupported: str | None = None) -> Target:
    def run(cases):
        out = []
        for c in cases:
            if unsupported:
                out.append(Unsupported(unsupported))
            else:
                out.append({"codes": codes_fn(c)})
        return out

    return Target("double", name, "elements", "test double", profile, ("encode",),
                  lambda c: None if c.format["name"] == "float8_e4m3fn" else "only e4m3fn", run,
                  lambda c, i: "python -c 'print(0)'")


@pytest.fixture(scope="module")
def e4m3_cases():
    suite = load_suite()
    return list(suite.select("elements/float8_e4m3fn/f32/*"))


def test_runner_statuses(e4m3_cases):
    ok = _double("double.ok", lambda c: c.expected["codes"].copy())
    tasks = runner.select_tasks(ok, e4m3_cases)
    assert tasks and all(t.case.format["name"] == "float8_e4m3fn" for t in tasks)
    assert len({t.id for t in tasks}) == len(tasks)
    res = runner.run_target(ok, tasks)
    assert {r.status for r in res} == {"pass"}
    flipped = _double("double.bad", lambda c: c.expected["codes"] ^ np.uint8(0x80))  # every sign flipped
    res = runner.run_target(flipped, tasks)
    assert {r.status for r in res} == {"fail"}
    uns = runner.run_target(_double("double.none", None, unsupported="no such op"), tasks)
    assert {(r.status, r.reason) for r in uns} == {("unsupported", "no such op")}


def test_runner_detects_input_mutation(e4m3_cases):
    def evil(c):
        x = c.inputs["x"]
        x.setflags(write=True)
        x[...] = 0
        return c.expected["codes"].copy()

    tasks = runner.select_tasks(_double("double.evil", evil), e4m3_cases[:1])
    suite_case = tasks[0].case
    case = Case(id=suite_case.id, family="elements", operation="encode", format=suite_case.format,
                inputs={"x": np.array(suite_case.inputs["x"])}, expected=dict(suite_case.expected),
                array_formats=dict(suite_case.array_formats), profiles=suite_case.profiles)
    with pytest.raises(QrefError, match="modified the input arrays"):
        runner.run_target(_double("double.evil", evil), [runner.Task(case, [case])])


# ---------------------------------------------------------------------------------------------------------
# real backends on small selections (each in its own process, as qref run does)
# ---------------------------------------------------------------------------------------------------------
def test_ml_dtypes_run_report_and_json(tmp_path):
    pytest.importorskip("ml_dtypes", reason="ml_dtypes backend")
    res = runner.run(["ml_dtypes"], include=["elements/float8_e4m3fn/f32/*", "elements/int4/f32/*/ties",
                                             "elements/bfloat16/decode/*"], xfail_files=[], isolate=False)
    st = {r.task: r.status for r in res.results}
    # int4 astype is a C cast (truncate, wrap): the ml_dtypes profile models it
    assert st and all(v == "pass" for k, v in st.items() if "e4m3fn" in k or "int4" in k)
    # bfloat16 -> float32 keeps NaN payloads: the ml_dtypes profile's nan_payload="keep_raw" (elements.md §4); the
    # spec decodes every NaN to the quiet NaN of its sign, so the task passes and differs from the spec
    bad = [r for r in res.results if "bfloat16/decode" in r.task]
    assert bad and bad[0].status == "pass" and "nan_sign_or_code" in bad[0].vs_spec.classes
    rep = bad[0].vs_spec.repro["nan_sign_or_code"]
    # a standalone script (no qref) ending in the line printing the backend's bits and the spec's expected bits
    assert "bfloat16" in rep["command"] and "qref" not in rep["command"] and "python -c" not in rep["command"]
    assert rep["command"].splitlines()[-1] == "print(f'got {got:#010x} expected 0x7fc00000')"
    assert rep["prints"].endswith(" expected 0x7fc00000") and rep["prints"].startswith("got 0x7f")
    text = report.render(res)
    assert text == report.render(res) and "## 3. Discrepancies" in text and "(filtered run)" in text
    path = report.write_results(res, tmp_path)
    data = json.loads(path.read_text())
    assert data["results"] == sorted(data["results"], key=lambda r: (r["target"], r["task"]))


def test_cli_exit_codes(tmp_path, capsys):
    pytest.importorskip("ml_dtypes", reason="ml_dtypes backend")
    from qref.cli import main

    assert main(["run", "-b", "ml_dtypes", "--include", "elements/float8_e4m3fn/f32/*/ties", "-q",
                 "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").exists() and (tmp_path / "report.md").exists()
    # an encoder that drops the NaN sign (every ml_dtypes task conforms to its profile: ml_dtypes.txt lists none)
    (tmp_path / "enc.py").write_text("import numpy as np\nimport qref\n\n\ndef enc(x, fmt):\n"
                                     "    c = qref.encode(x, fmt)\n"
                                     "    return np.where(np.isnan(x), c & 0x7F, c).astype(c.dtype)\n")
    user = ["run", "--callable", f"{tmp_path / 'enc.py'}:enc", "--family", "elements", "--include",
            "elements/float8_e4m3fn/f32/nearest_even/nan/special", "-q"]
    assert main([*user, "--no-xfail"]) == 1
    assert "UNEXPECTED FAIL user.enc elements/float8_e4m3fn/f32" in capsys.readouterr().err
    # an xfail file covers it
    (tmp_path / "x.txt").write_text("user.enc  elements/float8_e4m3fn/*  nan_sign_or_code  the NaN sign is dropped\n")
    assert main([*user, "--xfail", str(tmp_path / "x.txt")]) == 0
    assert main(["run", "-b", "nosuch", "-q"]) == 2


@pytest.fixture(scope="module")
def uniform_suite(tmp_path_factory):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from harness_cases import uniform_cases

    out = tmp_path_factory.mktemp("usuite")
    write_suite(uniform_cases(), out / "s", overwrite=True)
    return str(out / "s")


@pytest.mark.parametrize(("backend", "target", "module"), [
    ("onnxruntime", "onnxruntime.qdq", "onnxruntime"),
    ("mlir", "mlir.quant", "torch_mlir"),
    ("stablehlo", "stablehlo.uniform", "torch_mlir"),
    ("iree", "iree.stablehlo_uniform", "iree.compiler"),
])
def test_uniform_targets_on_temporary_cases(uniform_suite, backend, target, module):
    """Every uniform adapter on hand-built cases (ties with odd zero points, per axis, blocked, fp8, all codes):
    each conforms to its own qref profile except where docs/conformance.md documents otherwise."""
    pytest.importorskip(module, reason=f"{backend} backend")
    res = runner.run([backend], uniform_suite, targets=[target], xfail_files=[])
    by = {r.task: r for r in res.results}
    ran = [r for r in res.results if r.status != "unsupported"]
    assert ran, [r.reason for r in res.results]
    for r in ran:
        assert not ("/float8_" in r.task and backend == "stablehlo"), r.task  # float storage: unsupported
        if "/float8_" in r.task and backend in ("iree", "mlir"):  # MLIR float storage (uniform.md §4.3)
            if backend == "iree":  # the integer lowering: x / s rounded to an integer, then converted
                assert r.status in ("pass", "fail"), (r.task, r.reason)
            else:  # lower-quant-ops emits arith.sitofp on the float storage type
                assert r.status == "crash" and "arith.sitofp" in r.reason, (r.task, r.reason)
            continue
        if r.status == "crash":  # a lowering failure of an op/type StableHLO accepts (odd-length i2/i4, ...)
            assert backend in ("stablehlo", "iree") and r.reason.startswith("CompileFailure: "), r.reason
            assert any(p in r.reason for p in LOWERING_FAILURES), r.reason
            continue
        if backend in ("stablehlo", "iree") and "/uint" in r.task:
            assert r.status in ("pass", "fail")  # u8 spelling: signless storage (uniform.md §4.2 item 10)
            if r.status == "fail":
                assert set(r.vs_profile.classes) <= {"signedness", "other"}
            continue
        assert r.status == "pass", (r.task, r.reason, r.vs_profile and r.vs_profile.classes)
    if backend == "onnxruntime":
        assert by["uniform/int8/blocked/onnx/grid"].status == "pass"
        # ONNX adds the zero point after rounding: against the spec (stablehlo) it differs on odd-zp ties
        r = by["uniform/int8/s0.5000_z-3/stablehlo/ties"]
        assert r.vs_spec is not None and "zero_point_order" in r.vs_spec.classes
    if backend == "mlir":
        r = by["uniform/int8/s0.5000_z-3/stablehlo/ties"]
        assert "truncation" in r.vs_spec.classes or "zero_point_order" in r.vs_spec.classes


# ---------------------------------------------------------------------------------------------------------
# the lookup family (qref/harness/families/lookup.py)
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def suite():
    return load_suite()


def test_lookup_expectation_rebuilds_a_profile_with_the_case_geometry(suite):
    """A case holding for the spec, predicted under another profile, equals the suite's case of that profile on the
    same input (same blocking: flattened for bitsandbytes, along the last axis for openvino / qwix)."""
    fam = get_family("lookup")
    spec = suite["lookup/nf4/b64/f32/midpoints_scaled/spec"]
    bnb = suite["lookup/nf4/b64/f32/midpoints_scaled/bitsandbytes"]
    exp = fam.expectation(spec, "bitsandbytes")
    assert set(exp.outputs) == {"codes", "scales"}
    for name in exp.outputs:
        assert (get_bits(exp.outputs[name]) == get_bits(bnb.expected[name])).all(), name
    # a 2-D input: flattened blocks (spec) and row blocks (qwix) are different tasks with their own scale shapes
    flat, rows = suite["lookup/nf4/b64/f32/axis2d/spec"], suite["lookup/nf4/b64/f32/axis2d/qwix"]
    assert fam.task_key(flat) != fam.task_key(rows)
    assert fam.expectation(flat, "qwix").outputs["scales"].shape == flat.expected["scales"].shape == (6,)
    assert "qwix" in rows.profiles and fam.expectation(rows, "qwix").outputs["scales"].shape == (4, 2)
    # a double-quantized case under a profile without double quantization keeps the case's (lut.md §5)
    dq = suite["lookup/nf4/b64/f32/large/bitsandbytes_dq"]
    e = fam.expectation(dq, "spec")
    assert {"codes", "scales", "dq_codes", "dq_scales", "dq_offset"} == set(e.outputs)


def get_bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def _lookup_double(name: str, fn) -> Target:
    def run(cases):
        return [fn(c) for c in cases]

    return Target("double", name, "lookup", "test double", "bitsandbytes", ("lookup_quantize", "lookup_dequantize"),
                  lambda c: None, run, lambda c, i: "python -c 'print(0)'")


def test_lookup_structural_classes(suite):
    """NaN blocks, flushed dequantized values and the double-quantization offset are classified from the codes."""
    fam = get_family("lookup")
    case = suite["lookup/nf4/b64/f32/special/bitsandbytes"]  # block 0 holds a NaN at element 5
    assert np.isnan(case.inputs["x"][5])
    codes = case.expected["codes"].copy()
    codes[3] ^= 1  # an element of the NaN block
    c = classify.compare(case, fam, fam.expectation(case, "bitsandbytes"), {"codes": codes}, "bitsandbytes")
    assert c.classes == {"nan_sign_or_code": 1}
    # float32 dequantize: block scale 1e-38 (a float32 subnormal) -> products flushed to zero are "subnormal flush"
    dq = suite["lookup/nf4/b64/f32/dequantize/codes/float32/spec"]
    sc = dq.inputs["scales"]
    blk = int(np.flatnonzero((sc != 0) & (np.abs(sc) < np.finfo(F32).tiny))[0])
    y = dq.expected["y"].copy()
    i = blk * 64 + 1  # code 1 (-0.696...) times the subnormal scale
    assert y[i] != 0
    y[i] = F32(-0.0)
    c = classify.compare(dq, fam, fam.expectation(dq, "spec"), {"y": y}, "spec")
    assert c.classes == {"subnormal_flush": 1}
    big = suite["lookup/nf4/b64/f32/large/bitsandbytes_dq"]
    off = big.expected["dq_offset"].copy()
    off.view(np.uint32)[0] += 1  # one ulp: the mean accumulated in another order
    got = dict(big.expected, dq_offset=off)
    c = classify.compare(big, fam, fam.expectation(big, "bitsandbytes"), got, "bitsandbytes")
    assert c.classes == {"reduction": 1}


def test_lookup_reduce_keeps_the_block_of_the_element(suite):
    fam = get_family("lookup")
    case = suite["lookup/nf4/b64/f32/partial/spec"]  # 135 elements: blocks of 64, 64 and 7
    small = fam.reduce(case, 130, "codes")
    assert small._slice == (128, 135) and small._index == 2 and small.inputs["x"].size == 7
    assert small.expected["codes"][2] == case.expected["codes"][130]
    assert fam.reduce(case, 1, "scales").expected["scales"][0] == case.expected["scales"][1]
    rows = suite["lookup/nf4/b64/f32/axis2d/openvino"]
    r = fam.reduce(rows, 2 * 96 + 70, "codes")
    assert r._slice == (2, 3) and r._index == 70 and r.inputs["x"].shape == (1, 96)
    whole = fam.reduce(suite["lookup/nf4/b64/f32/large/bitsandbytes_dq"], 0, "dq_offset")
    assert whole._slice is None and whole.inputs["x"].size == 16384


# ---------------------------------------------------------------------------------------------------------
# new backends on small selections of the committed suite (in process; each skips when its library is missing)
# ---------------------------------------------------------------------------------------------------------
def _by_task(res) -> dict:
    return {r.task: r for r in res.results}


def test_bitsandbytes_on_lookup_cases():
    pytest.importorskip("bitsandbytes", reason="bitsandbytes backend")
    res = runner.run(["bitsandbytes"], include=["lookup/nf4/b64/f32/*", "lookup/fp4_bnb/b64/f32/midpoints*",
                                                "lookup/dynamic8/b256/f32/random/*", "lookup/af4/b64/f32/zero/*"],
                     isolate=False)
    assert res.ok, runner.summary_line(res)
    by = _by_task(res)
    ran = [r for r in res.results if r.status == "pass"]
    assert len(ran) >= 10 and sum(r.vs_profile.compared for r in ran) > 20_000
    # the offset of compress_statistics: torch's float32 mean, an ulp from the exact mean (lut.md §5.3)
    assert by["lookup/nf4/b64/f32/large/spec"].status == "pass"
    dq = next(x for x in res.results if x.task == "lookup/nf4/b64/f32/large/bitsandbytes_dq")
    assert dq.status == "xfail" and set(dq.vs_profile.classes) == {"reduction"}
    assert by["lookup/af4/b64/f32/zero/spec"].status == "unsupported"
    # bitsandbytes' codes differ from the spec's exact nearest entry at float32 midpoints (tie rule, lut.md §3.3)
    assert "tie_rule" in by["lookup/nf4/b64/f32/midpoints/spec"].vs_spec.classes


def test_torchao_to_nf4_on_lookup_cases():
    pytest.importorskip("torchao", reason="torchao backend")
    res = runner.run(["torchao"], include=["lookup/nf4/b64/*/large/*", "lookup/nf4/b64/*/dequantize/*",
                                           "lookup/nf4/b64/f32/midpoints/*"], isolate=False)
    assert res.ok, runner.summary_line(res)
    by = _by_task(res)
    assert by["lookup/nf4/b64/f32/midpoints/spec"].status == "unsupported"  # 256 elements: not 64 * 256
    ok = [r for r in res.results if r.status == "pass"]
    assert {r.task for r in ok} >= {"lookup/nf4/b64/bf16/large/torchao", "lookup/nf4/b64/f16/large/torchao",
                                    "lookup/nf4/b64/f32/dequantize/double_quant/float32/torchao"}
    bad = by["lookup/nf4/b64/f32/large/torchao"]
    assert bad.status == "xfail" and bad.vs_profile.classes == {"reduction": 1}


def test_jax_block_quantizer():
    pytest.importorskip("jax", reason="jax backend")
    res = runner.run(["jax"], targets=["jax.block_quantize.jit"],
                     include=["block/mxfp8_e4m3/f32/*", "block/nvfp4/f32/*", "block/mxfp8_e4m3/f64/ties/*"],
                     isolate=False)
    assert res.ok, runner.summary_line(res)
    st = {r.task: r for r in res.results}
    passed = [r for r in res.results if r.status == "pass"]
    assert len(passed) >= 20 and all("/f32/" in r.task for r in passed)
    assert st["block/mxfp8_e4m3/f32/dequantize/codes/float32/ocp"].status == "unsupported"
    # float64 under jax_enable_x64: JAX computes in float64 and agrees with the spec, not with the jax profile
    f64 = st["block/mxfp8_e4m3/f64/ties/ocp"]
    assert f64.status == "xfail" and f64.vs_spec.ok and "tie_rule" in f64.vs_profile.classes


def test_qwix_int_eager_conforms_and_jit_contracts_an_fma():
    pytest.importorskip("qwix", reason="qwix backend")
    res = runner.run(["qwix"], targets=["qwix.int.*"], include=["uniform/int8/pt_s0.1_z3/f32/ties/*",
                                                                "uniform/int8/pa*"], isolate=False)
    assert res.ok, runner.summary_line(res)
    eager = [r for r in res.results if r.target == "qwix.int.eager" and r.status != "unsupported"]
    assert eager and all(r.status == "pass" for r in eager)
    jit = next(r for r in res.results if r.target == "qwix.int.jit" and "pt_s0.1_z3/f32/ties" in r.task)
    assert jit.status == "xfail" and set(jit.vs_profile.classes) == {"fma"}
    rep = jit.vs_profile.repro["fma"]
    assert "64 copies" in rep["note"] and "np.full(64," in rep["command"]


def test_qwix_nf4_and_mx():
    pytest.importorskip("qwix", reason="qwix backend")
    res = runner.run(["qwix"], targets=["qwix.nf4.jit", "qwix.mx.jit"],
                     include=["lookup/nf4/b64/f32/midpoints*", "lookup/nf4/b64/f32/random/*",
                              "block/mxfp8_e4m3/f32/random/*", "block/mxfp8_e4m3/f32/ties/*"], isolate=False)
    assert res.ok, runner.summary_line(res)
    by = {(r.target, r.task): r for r in res.results}
    assert by[("qwix.nf4.jit", "lookup/nf4/b64/f32/random/spec")].status == "pass"
    assert by[("qwix.nf4.jit", "lookup/nf4/b64/f32/midpoints/spec")].status == "pass"
    # XLA's x / absmax is x * fl(1 / absmax), as the qwix profile says: it conforms to the profile and differs
    # from the spec (a true division) where absmax is not a power of two
    sc = by[("qwix.nf4.jit", "lookup/nf4/b64/f32/midpoints_scaled/spec")]
    assert sc.status == "pass" and sc.vs_spec is not None and "scale_arithmetic" in sc.vs_spec.classes
    assert by[("qwix.mx.jit", "block/mxfp8_e4m3/f32/ties/ocp")].status == "pass"
    # qwix's MX scale 2^ceil(log2_T(amax * fl(1/448))) conforms to the qwix block profile, not to OCP's floor rule
    mx = by[("qwix.mx.jit", "block/mxfp8_e4m3/f32/random/ocp")]
    assert mx.status == "pass" and mx.vs_spec is not None and "scale_rule" in mx.vs_spec.classes


def test_torchao_to_mx_conforms_to_the_torchao_block_profiles():
    pytest.importorskip("torchao", reason="torchao backend")
    res = runner.run(["torchao"], targets=["torchao.to_mx.*", "torchao.to_dtype"],
                     include=["block/mxfp8_e4m3/f32/*", "block/mxfp4/bf16/*", "block/mxfp6_e2m3/f32/*"], isolate=False)
    assert res.ok, runner.summary_line(res)
    q = [r for r in res.results if r.target.startswith("torchao.to_mx") and r.status != "unsupported"]
    assert len(q) >= 20 and all(r.status == "pass" for r in q)
    # the E4M3 NaN code dequantizes with its mantissa kept (0x7FF00000): a NaN payload the profile does not model
    nan = next(r for r in res.results if r.target == "torchao.to_dtype"
               and r.task.startswith("block/mxfp8_e4m3/f32/dequantize/codes"))
    assert nan.status == "xfail" and set(nan.vs_profile.classes) == {"nan_sign_or_code"}
