"""LiteRT's QUANTIZE / DEQUANTIZE as harness targets (``litert.qdq.{ref,optimized,xnnpack}``, uniform family) and
its float16 conversions (``litert.half.*``, element family): the adapter's one-operator flatbuffers run in
ai-edge-litert's Interpreter on cases of the committed suite and conform to the tflite, tflite_optimized and
tflite_xnnpack profiles (uniform.md §4.3); what the kernels lack is unsupported with the reason.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from qref.conformance import Case, load_suite
from qref.harness import adapters, runner

pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT backend (pip install ai-edge-litert)")

CASES = ["uniform/int8/pt_s0.1_z3/f32/*/stablehlo", "uniform/uint8/pt_s0.1_z127/f32/ties/stablehlo",
         "uniform/int16/pt_s0.1_z-3/f32/ties/stablehlo", "uniform/int8/axis1/*/stablehlo",
         "uniform/int4/pt_s0.1_z-1/f32/ties/stablehlo", "uniform/int8/pt_s0.1_z3/dequantize/stablehlo",
         "uniform/uint4/pt_s1_3_z8/dequantize/stablehlo", "uniform/int8/blocks/*/stablehlo",
         "elements/float16/decode/float32", "elements/float16/f32/nearest_even/inf/*"]


@pytest.fixture(scope="module")
def result():
    return runner.run(["litert"], include=CASES, targets=["litert.qdq.*", "litert.half.*"], isolate=False)


def _status(result, target: str) -> dict[str, str]:
    return {r.task: r.status for r in result.results if r.target == target}


def test_each_kernel_choice_conforms_to_its_profile(result):
    """ref = tflite, optimized = tflite_optimized (int4: the reference kernel, an xfail), xnnpack = tflite_xnnpack
    on int8/uint8 per tensor; nothing fails unexpectedly and every ran task compared elements."""
    assert not result.unexpected, [(r.target, r.task, r.reason) for r in result.unexpected]
    ran = [r for r in result.results if r.status in ("pass", "xfail") and r.target.startswith("litert.qdq")]
    assert {r.target for r in ran} == {"litert.qdq.ref", "litert.qdq.optimized", "litert.qdq.xnnpack"}
    assert all(r.vs_profile.compared > 0 for r in ran)
    ref, opt, xnn = (_status(result, f"litert.qdq.{k}") for k in ("ref", "optimized", "xnnpack"))
    assert ref["uniform/int16/pt_s0.1_z-3/f32/ties/stablehlo"] == "pass"
    assert opt["uniform/int16/pt_s0.1_z-3/f32/ties/stablehlo"] == "pass"  # the double-precision tail
    assert opt["uniform/int4/pt_s0.1_z-1/f32/ties/stablehlo"] == "xfail"  # 4-bit: the reference kernel
    assert ref["uniform/int4/pt_s0.1_z-1/f32/ties/stablehlo"] == "pass"
    assert xnn["uniform/int8/pt_s0.1_z3/f32/ties/stablehlo"] == "pass"
    assert xnn["uniform/int16/pt_s0.1_z-3/f32/ties/stablehlo"] == "unsupported"  # not delegated
    assert ref["uniform/int8/blocks/f32/mixed/stablehlo"] == "unsupported"


def test_unsupported_reasons_name_what_tflite_lacks(result):
    reasons = {r.reason for r in result.results if r.status == "unsupported"}
    assert any("sub-channel blocks" in r for r in reasons)
    assert any("XNNPACK does not take" in r for r in reasons)
    assert any("affine-quantized output" in r for r in reasons)  # float32 -> float16 outside XNNPACK


def test_half_targets(result):
    """DEQUANTIZE float16 -> float32 keeps NaN payloads (an xfail vs the spec's quiet NaN); XNNPACK's float32 ->
    float16 QUANTIZE rounds as the spec except NaN payloads."""
    ref = _status(result, "litert.half.ref")
    assert ref["elements/float16/decode/float32"] == "xfail"
    xnn = _status(result, "litert.half.xnnpack")
    assert set(xnn.values()) <= {"pass", "xfail", "unsupported"} and "pass" in xnn.values()


def _case(op: str, arr: np.ndarray, storage: str, s: float, z: int, axis=None) -> Case:
    from qref.schemes.uniform import arithmetic_for

    n = 1 if axis is None else len(np.atleast_1d(s))
    spec = {"storage": storage, "expressed": "float32", "scales": list(np.atleast_1d(s).astype(float)),
            "zero_points": [int(v) for v in np.atleast_1d(z)], "scale_shape": [] if axis is None else [n],
            "axis": axis, "block_size": None, "storage_range": None, "profile": "tflite",
            "arithmetic": arithmetic_for("tflite").to_dict()}
    if op == "uniform_quantize":
        return Case(id=f"uniform/{storage}/hand/tflite", family="uniform", operation=op, inputs={"x": arr},
                    expected={"codes": np.zeros(arr.shape, np.uint8 if storage != "int16" else np.uint16)},
                    scheme=spec, profile="tflite", array_formats={"codes": storage}, profiles=("tflite",))
    return Case(id=f"uniform/{storage}/hand/tflite", family="uniform", operation=op, inputs={"codes": arr},
                expected={"y": np.zeros(arr.shape, np.float32)}, scheme=spec, profile="tflite",
                array_formats={"codes": storage}, profiles=("tflite",))


def _target(name: str):
    return next(t for t in adapters.load_targets("litert") if t.name == name)


def test_hand_derived_ties_and_the_optimized_tail():
    """s = 1: 2.5 and -0.5 round half away in the reference kernel (3, -1); the optimized kernel rounds the first
    8 elements half even (2, 0) and its tail divides in double, half away (3, -1). s = fl32(0.013), x =
    fl32(-1.6315): fl32(x / s) = -125.5 -> -126 (reference); fl64(x) / fl64(s) = -125.49999... -> -125 (tail)."""
    x = np.array([2.5, -0.5] * 4 + [2.5, -0.5], np.float32)
    c = _case("uniform_quantize", x, "int8", 1.0, 0)
    (ref,) = _target("litert.qdq.ref").run([c])
    (opt,) = _target("litert.qdq.optimized").run([c])
    assert ref["codes"].view(np.int8).tolist() == [3, -1] * 5
    assert opt["codes"].view(np.int8).tolist() == [2, 0] * 4 + [3, -1]
    c = _case("uniform_quantize", np.array([-1.6315], np.float32), "int8", 0.013, 0)
    assert _target("litert.qdq.ref").run([c])[0]["codes"].view(np.int8).tolist() == [-126]
    assert _target("litert.qdq.optimized").run([c])[0]["codes"].view(np.int8).tolist() == [-125]


def test_clamp_boundaries_nan_and_inf_saturate_or_are_unspecified():
    """+-Inf and huge values: XNNPACK saturates to the storage bounds; the builtin kernels' int32 cast is
    undefined there (INT_MIN on x86-64, then clamped: the lower bound)."""
    x = np.array([np.inf, -np.inf, 3e38, -3e38, 127.4, 127.5, -128.5, -129.0], np.float32)
    c = _case("uniform_quantize", x, "int8", 1.0, 0)
    (xnn,) = _target("litert.qdq.xnnpack").run([c])
    assert xnn["codes"].view(np.int8).tolist() == [127, -128, 127, -128, 127, 127, -128, -128]
    (ref,) = _target("litert.qdq.ref").run([c])
    assert ref["codes"].view(np.int8).tolist()[4:] == [127, 127, -128, -128]
    assert ref["codes"].view(np.int8).tolist()[:4] == [-128] * 4  # INT_MIN + 0, clamped


def test_snippet_is_standalone_and_prints_the_bits():
    suite = load_suite()
    case = suite["uniform/int8/pt_s0.1_z3/f32/ties/stablehlo"]
    tg = _target("litert.qdq.ref")
    script = tg.snippet(case, 5)
    assert "qref" not in script
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    (got,) = tg.run([case])
    assert int(out.strip().splitlines()[-1], 16) == int(got["codes"].reshape(-1)[5])
