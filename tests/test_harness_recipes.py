"""The recipes family of the harness (qref/harness/families/recipes.py): the comparison of matrix products (the
interval of float32_any results, NaN / Inf / +-0 rules, the classes), expectations per profile, and the JAX and
MLX targets on the committed suite's cases (docs/spec/recipes.md §2)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from qref.conformance import load_suite
from qref.harness import runner
from qref.harness.classify import CLASSES, compare
from qref.harness.families import Expectation, get_family
from qref.harness.model import Unsupported

FAM = get_family("recipes")
F32 = np.float32


@pytest.fixture(scope="module")
def suite():
    return load_suite()


@pytest.fixture(scope="module")
def any_cases(suite):
    return [c for c in suite.select(family="recipes") if c.operation in ("block_matmul", "qdq_matmul")
            and c.params["compare"] == "bound"]


def _cmp(case, y, exp=None):
    exp = exp or Expectation(dict(case.expected), dict(case.unspecified))
    got = {"y": np.asarray(y, dtype=F32).reshape(case.expected["y"].shape)}
    return compare(case, FAM, exp, got, "spec")


def test_classes_are_named():
    for cls in ("accumulation_order", "operand_rounding", "outside_bound", "subnormal_flush", "scale_arithmetic"):
        assert cls in CLASSES and CLASSES[cls][1]


def test_expected_value_and_both_interval_ends_conform(any_cases):
    assert len(any_cases) >= 40
    for c in any_cases:
        for name in ("y", "y_lo", "y_hi"):
            assert _cmp(c, c.expected[name]).ok, (c.id, name)


def test_one_step_outside_the_interval_fails_as_outside_bound(any_cases):
    hit = 0
    for c in any_cases:
        hi = c.expected["y_hi"].copy()
        un = c.unspecified.get("y", np.zeros(hi.shape, bool))
        fin = np.isfinite(hi) & ~un & (np.abs(hi) < np.finfo(F32).max)
        if not fin.any():
            continue
        y = c.expected["y"].copy()
        i = tuple(np.argwhere(fin)[0])
        y[i] = np.nextafter(hi[i], F32(np.inf))
        r = _cmp(c, y)
        assert r.mismatches == 1 and set(r.classes) <= {"outside_bound", "operand_rounding", "subnormal_flush",
                                                        "scale_arithmetic"}, (c.id, r.classes)
        hit += 1
    assert hit >= 40


def test_an_all_zero_result_fails_on_every_case_with_nonzero_results(any_cases):
    """A bound loose enough to accept zeros where the exact result is not near zero would be a defect."""
    checked = 0
    for c in any_cases:
        lo, hi = c.expected["y_lo"].astype(np.float64), c.expected["y_hi"].astype(np.float64)
        un = c.unspecified.get("y", np.zeros(lo.shape, bool))
        with np.errstate(invalid="ignore"):
            away = ~un & ((lo > 0) | (hi < 0) | np.isnan(c.expected["y"]))
        if not away.any():
            continue
        r = _cmp(c, np.zeros(lo.shape, F32))
        assert not r.ok and r.mismatches >= int(away.sum()), c.id
        checked += 1
    assert checked >= 40


def test_nan_inf_and_signed_zero_rules(suite):
    c = next(suite.select("recipes/block_matmul/mxfp8_e5m2/ocp/nan/float32_any"))  # E5M2 has +-Inf codes
    y = c.expected["y"].copy()
    nan = np.isnan(y)
    inf = np.isinf(y)
    assert nan.any() and inf.any()
    other_nan = y.copy()
    other_nan[nan] = -np.abs(np.float32("nan"))  # any NaN (sign, payload) matches a NaN result
    other_nan.view(np.uint32)[nan] |= 0x1
    assert _cmp(c, other_nan).ok
    bad = y.copy()
    bad[nan] = np.inf  # a number (or an infinity) where the exact result is NaN
    assert dict(_cmp(c, bad).classes) == {"nan_sign_or_code": int(nan.sum())}
    bad = y.copy()
    bad[inf] = -y[inf]  # the wrong infinity
    assert set(_cmp(c, bad).classes) == {"saturation_nan_inf"}
    z = next(suite.select("recipes/block_matmul/mxfp8_e4m3/ocp/zero/float32_any"))
    for cid in (z.id, z.id.replace("float32_any", "exact")):  # +0 and -0 equal (bound 0 and bit-defined)
        zc = next(suite.select(cid))
        y = zc.expected["y"].copy()
        zero = y == 0
        assert zero.any()
        y[zero] = np.where(np.signbit(y[zero]), F32(0.0), F32(-0.0))
        assert _cmp(zc, y).ok, cid


def test_bit_defined_cases_compare_bits_and_name_the_order(suite):
    c = next(suite.select("recipes/block_matmul/mxfp8_e4m3/ocp/random/exact"))
    assert c.params["compare"] == "bits"
    y = c.expected["y"].copy()
    y.view(np.uint32)[0, 0] ^= 1  # one ulp: within the any-order bound of a random dot, but not these bits
    r = _cmp(c, y)
    assert r.mismatches == 1 and set(r.classes) == {"accumulation_order"}, r.classes


def test_scaled_cast_expectations_per_profile(suite):
    flax = next(suite.select("recipes/scaled_qdq/float8_e4m3fn/divide/ftz/s0.37/ties"))
    ieee = next(suite.select("recipes/scaled_qdq/float8_e4m3fn/divide/ieee/s0.37/ties"))
    assert FAM.holds(flax, "flax") and not FAM.holds(flax, "spec") and FAM.holds(ieee, "spec")
    assert FAM.relevant(flax, "flax") and not FAM.relevant(ieee, "flax") and not FAM.relevant(flax, None)
    spec = FAM.expectation(flax, "spec")  # recomputed: IEEE arithmetic on the same inputs = the ieee case
    for k in ("codes", "y"):
        np.testing.assert_array_equal(spec.outputs[k].view(f"u{spec.outputs[k].itemsize}"),
                                      ieee.expected[k].view(f"u{ieee.expected[k].itemsize}"))
    jit = FAM.expectation(flax, "flax_jit")
    assert (jit.outputs["codes"] != flax.expected["codes"]).any()  # x * fl(1 / s) moves ties
    r = compare(flax, FAM, Expectation(dict(flax.expected)), jit.outputs, "flax")
    assert set(r.classes) == {"scale_arithmetic"}
    bm = next(suite.select("recipes/block_matmul/mxfp4/ocp/random/float32_any"))
    with pytest.raises(Unsupported):
        FAM.expectation(bm, "flax")


def _run(backend: str, targets: list[str], include: list[str]):
    return runner.run([backend], targets=targets, include=include, isolate=False)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax backend (pip install jax)")
def test_jax_targets_on_the_committed_cases():
    inc = ["recipes/block_matmul/mxfp8_e4m3/ocp/*", "recipes/block_matmul/nvfp4/*/*random/*",
           "recipes/qdq_matmul/float8_e5m2_x_float8_e4m3fn/*", "recipes/scaled_qdq/float8_e4m3fn/*/s0.37/*"]
    r = _run("jax", ["jax.scaled_dot.jit", "jax.fp8_dot.*", "jax.scaled_cast.*"], inc)
    assert r.ok, runner.summary_line(r)
    by = {}
    for x in r.results:
        by.setdefault(x.target, set()).add(x.status)
    assert by["jax.scaled_dot.jit"] >= {"pass", "xfail", "unsupported"}  # nvidia two-level: no global scale
    assert "pass" in by["jax.fp8_dot.eager"] and "pass" in by["jax.scaled_cast.jit"]
    anys = [x for x in r.results if x.task.endswith("float32_any") and x.target == "jax.scaled_dot.jit"
            and x.status == "pass"]
    assert anys and all(x.vs_profile.compared > 0 for x in anys)


@pytest.mark.skipif(importlib.util.find_spec("mlx") is None, reason="mlx backend (pip install 'mlx[cpu]')")
def test_mlx_targets_on_the_committed_cases():
    r = _run("mlx", ["mlx.quantized_matmul", "mlx.qqmm"], ["recipes/block_matmul/mxfp4/*",
                                                            "recipes/block_matmul/mxfp8_e5m2/ocp/random/*"])
    assert r.ok, runner.summary_line(r)
    st = {(x.target, x.status) for x in r.results}
    assert {("mlx.quantized_matmul", "pass"), ("mlx.quantized_matmul", "xfail"), ("mlx.qqmm", "pass"),
            ("mlx.quantized_matmul", "unsupported")} <= st
    nan = [x for x in r.results if x.target == "mlx.quantized_matmul" and "/nan/float32_any" in x.task]
    assert nan and nan[0].status == "xfail" and set(nan[0].vs_profile.classes) == {"nan_sign_or_code"}


def test_a_user_callable_in_float64_conforms_on_float32_any_only():
    """qref run --callable ... --family recipes: a block_matmul computed in float64 and rounded once is within every
    float32_any interval, and differs from bit-defined accumulations only by accumulation order."""
    import ml_dtypes

    from qref.harness.user import check

    def fn(op, inputs, spec):
        if op != "block_matmul" or "lhs_global_scale" in inputs:
            raise NotImplementedError(op)
        B = spec["params"]["block_size"]
        el = getattr(ml_dtypes, spec["scheme"]["element"])
        sc = ml_dtypes.float8_e8m0fnu if spec["scheme"]["kind"] == "mx" else ml_dtypes.float8_e4m3fn
        a = inputs["lhs_codes"].view(el).astype(np.float64) * np.repeat(
            inputs["lhs_scales"].view(sc).astype(np.float64), B, axis=1)
        b = inputs["rhs_codes"].view(el).astype(np.float64) * np.repeat(
            inputs["rhs_scales"].view(sc).astype(np.float64), B, axis=0)
        with np.errstate(all="ignore"):
            return {"y": (a @ b).astype(F32)}

    res = check(fn, "recipes", include=["recipes/block_matmul/mxfp4/ocp/random/*"])
    st = {r.task.rsplit("/", 1)[1]: r for r in res.results}
    assert st["float32_any"].status == "pass"
    for k in ("exact", "float32_blocked_b32"):
        assert st[k].status in ("pass", "fail") and set(st[k].vs_profile.classes) <= {"accumulation_order"}
