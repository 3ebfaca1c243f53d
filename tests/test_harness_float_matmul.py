"""The matrix family's float32 matmul targets (mma.md §12.2): held bit for bit to their fitted CPU GEMM profile,
within the §10.4 bound of the exact sum, and reported as drift (not failure) when the library's order differs from
the record but the bound holds.

The cases' expected values are checked against an independent exact sum (math.fsum of the float64 products:
exact for float32 operands, one final rounding); the perturbed records are fitted records with one field changed
(lanes, K block), so the real library no longer matches them bit for bit.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import qref.mma as qm
from qref.conformance.cases.matmul import build_float_matmul_cases
from qref.errors import QrefError
from qref.harness.families import matmul as fam
from qref.harness.model import Target
from qref.harness.runner import Task, resolve_target, run_target
from qref.mma.cpu_profiles import MLX_CPU, ORT_MLAS_1T, PROFILES

CASES = list(build_float_matmul_cases())
SMALL = [c for c in CASES if c.expected["y"].size * c.params["k"] <= 10**5]  # the drift tests classify every task


def test_expected_is_the_correctly_rounded_exact_sum() -> None:
    for c in CASES:
        A, B, y = c.inputs["a"], c.inputs["b"], c.expected["y"]
        fin = np.isfinite(A).all(axis=1)[:, None] & np.isfinite(B).all(axis=0)[None, :]
        for i, j in [(0, 0), (A.shape[0] - 1, B.shape[1] - 1), (A.shape[0] // 2, 1)]:
            if not fin[i, j]:
                continue
            exact = math.fsum(float(x) * float(z) for x, z in zip(A[i], B[:, j]))
            assert y[i, j] == np.float32(exact) or abs(float(y[i, j]) - exact) <= abs(exact) * 2.0**-24, c.id
            assert c.expected["y_lo"][i, j] <= exact <= c.expected["y_hi"][i, j], c.id
        # every fitted record lands inside [y_lo, y_hi] (the bound holds for any order of <= K + 2 roundings)
        for p in PROFILES:
            with np.errstate(all="ignore"):
                got = p.dispatch.matmul(A, B).astype(np.float64)
            lo, hi = c.expected["y_lo"], c.expected["y_hi"]
            ok = (np.isnan(lo) & np.isnan(got)) | ((lo <= got) & (got <= hi))
            assert ok.all(), (c.id, p.name, np.argwhere(~ok)[:3])


def _ort_target(profile: str) -> Target:
    pytest.importorskip("onnxruntime")
    from qref.harness.adapters import onnxruntime as ad

    return dataclasses.replace(ad.float_matmul_target(), profile=profile)


def _mlx_target(profile: str) -> Target:
    pytest.importorskip("mlx.core")
    from qref.harness.adapters import mlx as ad

    return dataclasses.replace(ad._float_matmul_target(), profile=profile)


def _run(tg: Target, cases: list = CASES) -> list:
    tg, drift = resolve_target(tg)
    assert drift == ""
    return run_target(tg, [Task(c, [c]) for c in cases])


def _kernel_detected(profile_name: str) -> str | None:
    """None where the fitted kernel of ``profile_name`` runs here, else why not (the bit-for-bit part is then not
    checked: only that nothing is reported as a failure within the bound)."""
    import platform

    from qref.profiles.cpu import host_cpu

    if platform.machine() not in ("x86_64", "AMD64"):
        return f"{platform.machine()} is not x86-64"
    if profile_name == ORT_MLAS_1T.name:
        import onnxruntime as ort

        if not ort.__version__.startswith("1.32"):
            return f"onnxruntime {ort.__version__} is not the fitted 1.32"
        if not host_cpu().has("avx512f"):
            return "no AVX-512F: MLAS runs its AVX2 kernel (CPU variant mlas_sgemm_without_avx512)"
    if profile_name == MLX_CPU.name:
        import mlx.core as mx

        if mx.__version__ != "0.32.4":
            return f"mlx {mx.__version__} is not the fitted 0.32.4"
    return None


@pytest.mark.parametrize("which", ["onnxruntime", "mlx"])
def test_fitted_profile_passes_bit_for_bit(which: str) -> None:
    prof = ORT_MLAS_1T if which == "onnxruntime" else MLX_CPU
    tg = (_ort_target if which == "onnxruntime" else _mlx_target)(prof.name)
    rs = _run(tg)
    assert len(rs) == len(CASES)
    assert all(r.vs_spec.ok for r in rs), [(r.task, r.vs_spec.classes) for r in rs if not r.vs_spec.ok]
    why = _kernel_detected(prof.name)
    if why:
        assert {r.status for r in rs} <= {"pass", "drift"}
        pytest.skip(f"{prof.name}: {why}; only the bound was checked")
    assert [r.status for r in rs] == ["pass"] * len(CASES), [(r.task, r.status, r.reason) for r in rs]
    assert sum(r.vs_profile.compared for r in rs) == sum(c.expected["y"].size for c in CASES)


@pytest.mark.parametrize("which,change", [("onnxruntime", {"lanes": 4, "reduction": "pairwise"}),
                                          ("onnxruntime", {"products": "rounded"}),
                                          ("mlx", {"lanes": 8, "reduction": "halving"}),
                                          ("mlx", {"products": "fused"})])
def test_perturbed_record_is_drift_not_failure(which: str, change: dict) -> None:
    base = ORT_MLAS_1T if which == "onnxruntime" else MLX_CPU
    why = _kernel_detected(base.name) if which == "onnxruntime" else None
    blocked = dataclasses.replace(base.dispatch.blocked, **change)
    name = f"test-perturbed-{which}-{'-'.join(f'{k}-{v}' for k, v in change.items())}"
    pert = dataclasses.replace(base, name=name, dispatch=dataclasses.replace(base.dispatch, blocked=blocked))
    if fam.cpu_gemm_profile(name) is None:
        fam.register_cpu_gemm_profile(pert)
    tg = (_ort_target if which == "onnxruntime" else _mlx_target)(name)
    rs = _run(tg, SMALL)
    statuses = {r.status for r in rs}
    assert "fail" not in statuses and "crash" not in statuses, [(r.task, r.status, r.reason) for r in rs]
    drifted = [r for r in rs if r.status == "drift"]
    if why is None:  # the library is the fitted kernel: every random case differs from the perturbed record
        assert len(drifted) >= 3, [(r.task, r.status) for r in rs]
    for r in drifted:
        assert name in r.reason and base.version in r.reason and "mma.md §10.4" in r.reason
        assert set(r.vs_profile.classes) <= {"accumulation_order", "other"}
        assert r.vs_spec.ok


def test_outside_the_bound_is_a_failure_not_drift() -> None:
    """A product in float16 (mx.matmul on float16 operands, widened back) is outside the float32 bound: fail."""
    mx = pytest.importorskip("mlx.core")
    tg = _mlx_target(MLX_CPU.name)

    def run(cases: list) -> list:
        return [{"y": np.array(mx.matmul(mx.array(c.inputs["a"]).astype(mx.float16),
                                         mx.array(c.inputs["b"]).astype(mx.float16), stream=mx.cpu)
                               .astype(mx.float32), np.float32)} for c in cases]

    tg = dataclasses.replace(tg, name="mlx.matmul_float16_widened", run=run)
    rs = _run(tg, SMALL)
    random = [r for r in rs if "/random_" in r.task]
    assert random and all(r.status == "fail" for r in random), [(r.task, r.status) for r in random]
    assert all("outside_bound" in r.vs_spec.classes for r in random)


def test_register_refuses_committed_names_and_other_types() -> None:
    with pytest.raises(QrefError, match="committed"):
        fam.register_cpu_gemm_profile(ORT_MLAS_1T)
    with pytest.raises(QrefError, match="CpuGemmProfile"):
        fam.register_cpu_gemm_profile(qm.KernelAccumulation())


def test_jax_dot_general_without_a_record_is_held_to_the_bound_never_drift() -> None:
    """XLA:CPU's dot_general fits no record (its order depends on the shape: docs/accumulation.md): a target for it
    names no profile, so the spec's bound is its reference: pass or fail, never drift."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def run(cases: list) -> list:
        with jax.default_device(jax.devices("cpu")[0]):
            return [{"y": np.asarray(jax.lax.dot_general(jnp.asarray(c.inputs["a"]), jnp.asarray(c.inputs["b"]),
                                                         (((1,), (0,)), ((), ()))), np.float32)} for c in cases]

    tg = Target("jax", "jax.dot_general_float", "matmul", "jax.lax.dot_general, float32", None, ("float_matmul",),
                lambda case: None, run, lambda case, i: "")
    rs = _run(tg)
    assert [r.status for r in rs] == ["pass"] * len(CASES), [(r.task, r.status, r.vs_spec.classes) for r in rs]
    assert fam.drift_note(CASES[0], "spec") == ""
