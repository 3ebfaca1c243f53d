"""The ONNX reference evaluator (``onnx.reference.ReferenceEvaluator``) as a backend of its own
(qref/harness/adapters/onnx_reference.py), run for real on cases of the committed suite: what conforms to the
`onnx` uniform profile (the operator schema), and the defects it has that onnxruntime has not (hand-derived below).
"""

from __future__ import annotations

import numpy as np
import pytest

from qref.conformance import load_suite
from qref.harness import adapters, runner
from qref.harness.families import get_family

pytest.importorskip("onnx.reference", reason="onnx backend (pip install onnx)")


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def _run(include: list[str], target: str = "onnx_reference.qdq"):
    res = runner.run(["onnx_reference"], include=include, targets=[target], xfail_files=[], isolate=False)
    return {r.task: r for r in res.results}


def test_quantize_linear_conforms_per_tensor_per_axis_blocked_and_sub_byte():
    by = _run(["uniform/int8/axis1/*/stablehlo", "uniform/uint8/onnx_blocked/*/stablehlo",
               "uniform/int4/pt_s0.1_z-1/f32/grid/stablehlo", "uniform/uint2/pt_s0.25_z1/f32/grid/stablehlo",
               "uniform/float8_e4m3fn/onnx_s0.5/*", "uniform/float8_e5m2/onnx_s2/*",
               "uniform/uint4/pt_s1_3_z8/dequantize/stablehlo"])
    assert len(by) >= 10
    for task, r in by.items():
        assert r.status == "pass", (task, r.status, r.reason, r.vs_profile and r.vs_profile.classes)
        assert r.vs_profile.compared > 0
    # odd lengths of 4- and 2-bit storage (65 and 29 elements) and a partial ONNX block (100 = 3 * 32 + 4)
    assert by["uniform/int4/pt_s0.1_z-1/f32/grid/stablehlo"].size == 65
    assert by["uniform/uint2/pt_s0.25_z1/f32/grid/stablehlo"].size == 29


def test_int32_outputs_are_unsupported_by_the_schema_not_crashes():
    by = _run(["uniform/int32/pt_s1_z0/*"])
    q = by["uniform/int32/pt_s1_z0/f32/ties/stablehlo"]
    assert q.status == "unsupported" and "schema rejects" in q.reason and "int32" in q.reason
    assert by["uniform/int32/pt_s1_z0/dequantize/stablehlo"].status == "pass"  # DequantizeLinear takes int32


def test_out_of_int32_quotients_are_classified_as_the_int32_conversion(suite):
    """op_quantize_linear.py: np.rint(x / s).astype(np.int32), then + z and clip. uint8, s = 1, z = 0, x = 1e30:
    the schema saturates to 255; the cast gives INT_MIN (x86-64), clipped to 0."""
    cid = "uniform/uint8/pt_s1_z0/f32/range/stablehlo"
    r = _run([cid])[cid]
    assert r.status == "fail" and set(r.vs_profile.classes) == {"int32_conversion"}
    case = suite[cid]
    x = case.inputs["x"]
    i = int(np.nonzero(np.isfinite(x) & (x.astype(np.float64) > 2.0 ** 31))[0][0])
    tg = next(t for t in adapters.load_targets("onnx_reference") if t.name == "onnx_reference.qdq")
    (got,) = tg.run([case])
    assert int(got["codes"].reshape(-1)[i]) == 0
    exp = get_family("uniform").expectation(case, "onnx")
    assert int(exp.outputs["codes"].reshape(-1)[i]) == 255
    rep = r.vs_profile.repro["int32_conversion"]
    assert rep["prints"].startswith("got 0x") and "qref" not in rep["command"]


def test_float4_quantize_loses_the_sign_of_zero():
    cid = "uniform/float4_e2m1fn/onnx_s0.25/f32/special/onnx"
    r = _run([cid])[cid]
    assert r.status == "fail" and r.vs_profile.classes == {"sign_of_zero": 1}
    assert r.vs_profile.repro["sign_of_zero"]["prints"] == "got 0x0 expected 0x8"


def test_cast_to_e8m0_rounds_up_and_e4m3fn_conforms():
    res = runner.run(["onnx_reference"], include=["elements/float8_e8m0fnu/f32/nearest_even/saturate/ties",
                                                  "elements/float8_e4m3fn/f32/*/ties"],
                     targets=["onnx_reference.cast.*"], xfail_files=[], isolate=False)
    by = {(r.target, r.task): r for r in res.results}
    e8 = by[("onnx_reference.cast.nosaturate", "elements/float8_e8m0fnu/f32/nearest_even/saturate/ties")]
    assert e8.status == "fail" and "tie_rule" in e8.vs_spec.classes  # round_mode="up": 1.5 * 2^k -> 2^(k+1)
    e4 = [r for (t, task), r in by.items() if "float8_e4m3fn" in task and r.status != "unsupported"]
    assert e4 and all(r.status == "pass" for r in e4), [(r.task, r.vs_profile.classes) for r in e4]


def test_committed_xfail_file_covers_every_failure_and_none_is_stale():
    res = runner.run(["onnx_reference"], include=["uniform/*", "elements/float8_e8m0fnu/f32/*",
                                                  "elements/float16/*"], isolate=False)
    assert not res.unexpected, [(r.target, r.task, r.vs_profile and r.vs_profile.classes) for r in res.unexpected]
    assert any(r.status == "xfail" for r in res.results)
