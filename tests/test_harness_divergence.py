"""The divergence view (qref/harness/divergence.py, docs/conformance/divergence.md): what each backend returns
where the spec leaves the result unspecified, recorded by the runner from real backends (no doubles)."""

from __future__ import annotations

import pytest

from qref.harness import divergence, runner
from qref.harness.families.uniform import _quantize_behaviour

SPECIAL = ["uniform/int8/pt_s0.1_z3/f32/special/stablehlo", "uniform/int8/pt_s0.5_z-3/f32/special/stablehlo"]


@pytest.mark.parametrize(("q", "v", "z", "kind", "want"), [
    (127, 1e30, 0, "above the storage range", "saturates"),
    (-128, 1e30, 0, "above the storage range", "lo"),  # the opposite bound (an INT_MIN conversion clamped)
    (44, 300.0, 0, "above the storage range", "wraps"),  # 300 mod 256 = 44
    (0, float("nan"), 3, "NaN", "0"),
    (3, float("nan"), 3, "NaN", "z"),
    (-128, float("nan"), 3, "NaN", "lo"),
    (-128, float("-inf"), 0, "-Inf", "saturates"),
    (17, 1000.0, 0, "above the storage range", "17"),
])
def test_quantize_behaviour_names(q, v, z, kind, want):
    assert _quantize_behaviour(q, v, z, -128, 127, 8, kind) == want


def test_nan_divergence_of_jax_and_the_onnx_reference_evaluator():
    """NaN to int8: JAX's convert gives 0 whatever z; ONNX's reference casts rint(NaN) to int32 (INT_MIN on x86-64),
    adds z in int32 and clips: z = 3 -> -128 (lo), z = -3 -> INT_MIN - 3 wraps to 2^31 - 3 -> 127 (hi)."""
    pytest.importorskip("jax", reason="jax backend")
    pytest.importorskip("onnx.reference", reason="onnx backend")
    res = runner.run(["jax", "onnx_reference"], include=SPECIAL, targets=["jax.uniform.jit", "onnx_reference.qdq"],
                     xfail_files=[], isolate=False)
    by = {(r.target, r.task): r for r in res.results}
    assert by[("jax.uniform.jit", SPECIAL[0])].unspecified["NaN|int8"] == {"0": 6}
    assert by[("onnx_reference.qdq", SPECIAL[0])].unspecified["NaN|int8"] == {"lo": 6}
    assert by[("onnx_reference.qdq", SPECIAL[1])].unspecified["NaN|int8"] == {"hi": 6}
    t = divergence.table(res)
    assert t["NaN"][("onnx_reference.qdq", "int8")] == {"lo": 6, "hi": 6}
    page = divergence.render(res, "<!-- header -->")
    assert "## NaN" in page and "| `onnx_reference.qdq` | hi (6), lo (6) |" in page
    assert "| `jax.uniform.jit` | 0 |" in page


def test_int32_conversion_is_named_before_a_clamp_variant_that_happens_to_agree():
    """uint8, s = 1, z = 0: x / s >= 2^31 converted to int32 is INT_MIN, clipped to 0 (ONNX's numpy reference).
    Under the spec profile a clamp-order variant also gives 0 there; the class must be the conversion."""
    import numpy as np

    from qref.conformance.suite import load_suite
    from qref.harness import classify
    from qref.harness.families import uniform as fam

    case = load_suite("conformance/v1").verify_case("uniform/uint8/pt_s1_z0/f32/range/stablehlo")
    (name,) = case.expected
    x = case.inputs["x"].astype(np.float64).reshape(-1)
    exp = fam.expectation(case, "stablehlo")
    got = np.asarray(exp.outputs[name]).reshape(-1).copy()
    big = x >= 2.0**31
    assert big.sum() >= 4 and not (got[big] == 0).any()
    got[big] = 0  # INT_MIN + 0 clipped to [0, 255]
    comp = classify.compare(case, fam, exp, {name: got.reshape(exp.outputs[name].shape)}, "stablehlo")
    assert comp.classes == {"int32_conversion": int(big.sum())}


def test_float_storage_through_the_integer_lowering_is_one_class():
    """A float-storage dequantize computed as IREE does (the f8E4M3FN code truncated to an int32, then (n - z) * s;
    uniform.md §4.3): code 0x39 = 1.125 at s = 0.5 gives 0.5, not 0.5625; Inf / NaN codes aside, every mismatch is
    "integer_lowering", not a spread of rounding classes."""
    import numpy as np

    from qref.conformance.suite import load_suite
    from qref.harness import classify
    from qref.harness.families import uniform as fam

    case = load_suite("conformance/v1").verify_case("uniform/float8_e4m3fn/mlir_s0.5/dequantize/stablehlo_lowering")
    codes = case.inputs["codes"].astype(np.int64)
    v = np.array(_e4m3_values(codes))  # exact decoded values
    finite = np.isfinite(v)
    got = np.where(finite, np.trunc(np.where(finite, v, 0)) * 0.5, np.float32(case.expected["y"][0])).astype(
        np.float32)
    exp = fam.expectation(case, "stablehlo_lowering")
    assert got[0x39] == 0.5 and exp.outputs["y"][0x39] == np.float32(0.5625)
    got = np.where(finite, got, exp.outputs["y"]).astype(np.float32)  # keep the NaN codes as expected
    comp = classify.compare(case, fam, exp, {"y": got + np.float32(0)}, "stablehlo_lowering")
    assert set(comp.classes) <= {"integer_lowering", "sign_of_zero"} and comp.classes["integer_lowering"] > 100


def _e4m3_values(codes):
    """E4M3FN decoded by its definition (bias 7, 3 mantissa bits, S.1111.111 NaN), independent of qref."""
    out = []
    for c in codes.tolist():
        s, e, m = (c >> 7) & 1, (c >> 3) & 0xF, c & 7
        if e == 15 and m == 7:
            out.append(float("nan"))
            continue
        mag = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        out.append(-mag if s else mag)
    return out


def test_crashes_differing_in_small_float_types_or_shapes_are_one_group():
    """The same MLIR verifier error on f8E5M2, f8E4M3FN and f4E2M1FN tensors of any length is one crash group."""
    from qref.harness.findings import _crash_key
    from qref.harness.model import TaskResult

    def crash(msg: str) -> TaskResult:
        return TaskResult("mlir.quant", "uniform", "t", ("t",), "crash", f"CompileFailure: mlir: {msg}")

    keys = {_crash_key(crash(f"'arith.sitofp' op operand #0 must be signless-fixed-width-integer-like, but got "
                             f"'tensor<{n}x{t}>'")) for n, t in ((28, "f8E5M2"), (764, "f8E4M3FN"), (50, "f4E2M1FN"))}
    assert len(keys) == 1
    assert _crash_key(crash("'quant.scast' op result #0 must be ..., but got 'tensor<16xf4E2M1FN>'")) not in keys
    sizes = {_crash_key(crash(f"'stream.tensor.sizeof' op failed to calculate total byte count: 'tensor<{s}>' does "
                              "not have integral number of total bytes")) for s in ("10xi2", "15x7xi2", "3x5x7xi4")}
    assert len(sizes) == 1  # one root cause whatever the rank
