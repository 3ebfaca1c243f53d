"""Uniform quantization written as JAX users write it (``jnp.clip(jnp.round(x / s) + z, lo, hi).astype(storage)``,
``(q.astype(E) - z) * s``), eager and under ``jax.jit``: the targets ``jax.uniform.eager`` / ``jax.uniform.jit``
(qref/harness/adapters/jax.py) run for real on cases of the committed suite.
"""

from __future__ import annotations

import numpy as np
import pytest

from qref.conformance import load_suite
from qref.harness import adapters, runner
from qref.harness.families import get_family

pytest.importorskip("jax", reason="jax backend (pip install jax)")

CASES = ["uniform/int8/pt_s0.1_z3/*/ties/stablehlo", "uniform/int8/axis1/*/stablehlo",
         "uniform/int8/blocks/*/stablehlo", "uniform/uint8/onnx_blocked/*/stablehlo",
         "uniform/int4/pt_s0.1_z-1/f32/grid/stablehlo", "uniform/uint2/pt_s0.25_z1/f32/grid/stablehlo",
         "uniform/int8<-127:127>/pt_s1_3_z0/f32/ties/stablehlo", "uniform/uint4/pt_s1_3_z8/dequantize/stablehlo"]


@pytest.fixture(scope="module")
def result():
    return runner.run(["jax"], include=CASES, targets=["jax.uniform.eager", "jax.uniform.jit", "jax.uniform.closed"],
                      xfail_files=[], isolate=False)


def test_user_written_quantization_conforms_to_the_jax_profile_eager_and_jit(result):
    ran = [r for r in result.results if r.status != "unsupported"]
    # closed: s and z closed over by jax.jit (compile-time constants), as users write it
    assert {r.target for r in ran} == {"jax.uniform.eager", "jax.uniform.jit", "jax.uniform.closed"}
    assert len(ran) >= 3 * 10, [r.task for r in ran]
    for r in ran:
        assert r.status == "pass", (r.target, r.task, r.reason, r.vs_profile and r.vs_profile.classes)
        assert r.vs_profile.compared > 0
    sizes = {r.task: r.size for r in ran}
    assert sizes["uniform/int4/pt_s0.1_z-1/f32/grid/stablehlo"] == 65  # odd-length 4-bit storage
    assert sizes["uniform/uint8/onnx_blocked/f32/mixed/stablehlo"] == 600  # 100 = 3 blocks of 32 + a partial one


def test_the_spec_difference_is_the_reciprocal_rewrite_in_both_modes(result):
    """XLA:CPU computes x / s as x * fl(1 / s) eagerly too (jnp.divide is itself jitted with its broadcast)."""
    for t in ("jax.uniform.eager", "jax.uniform.jit", "jax.uniform.closed"):
        classes = set()
        for r in result.results:
            if r.target == t and r.vs_spec is not None:
                classes |= set(r.vs_spec.classes)
        assert classes & {"scale_arithmetic", "zero_point_order", "tie_rule", "truncation", "directed_rounding"}, t


@pytest.mark.parametrize("target", ["jax.uniform.eager", "jax.uniform.jit"])
def test_hand_derived_reciprocal_tie(target):
    """uniform.md §4.2 item 4: s = f32(0.1), fl32(1 / s) = 10; x = f32(-12.15) = 0xC1426666: x / s = -121.49999
    -> -121 (jax_divide), x * 10 = -121.5 -> -122 (even; the jax profile). XLA:CPU rewrites the division when s
    is broadcast to x's shape: 8 copies give -122; a one-element x (the broadcast of a scalar to [1] is a reshape)
    keeps the division and gives -121 (measured with jax 0.10.2)."""
    from qref.conformance import Case
    from qref.schemes.uniform import arithmetic_for

    spec = {"storage": "int8", "expressed": "float32", "scales": [0.1], "zero_points": [0], "scale_shape": [],
            "axis": None, "block_size": None, "storage_range": None, "profile": "jax",
            "arithmetic": arithmetic_for("jax").to_dict()}
    fam = get_family("uniform")
    tg = next(t for t in adapters.load_targets("jax") if t.name == target)
    for n, want in ((8, -122), (1, -121)):
        x = np.full(n, 0xC1426666, np.uint32).view(np.float32)
        case = Case(id="uniform/int8/hand/jax", family="uniform", operation="uniform_quantize", inputs={"x": x},
                    expected={"codes": np.full(n, -122, np.int8).view(np.uint8)}, scheme=spec, profile="jax",
                    array_formats={"codes": "int8"}, profiles=("jax",))
        (got,) = tg.run([case])
        assert (got["codes"].view(np.int8) == want).all(), (n, got)
        assert int(fam.expectation(case, "jax_divide").outputs["codes"].view(np.int8)[0]) == -121
        script = tg.snippet(case, 0)
        assert "jnp.round(v / s)" in script and "qref" not in script


def test_snippets_reproduce_a_per_axis_element():
    suite = load_suite()
    case = suite["uniform/int8/axis1/f32/random/stablehlo"]
    tg = next(t for t in adapters.load_targets("jax") if t.name == "jax.uniform.jit")
    (got,) = tg.run([case])
    i = 200
    out: dict[str, object] = {}
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(tg.snippet(case, i), out)
    assert int(buf.getvalue().strip(), 16) == int(got["codes"].reshape(-1).view(np.uint8)[i])


@pytest.mark.parametrize(("target", "want"), [("jax.uniform.scalar", -121), ("jax.uniform.one_element", -121),
                                              ("jax.uniform.closed_scalar", -122), ("jax.uniform.closed_python", -122)])
def test_programs_as_users_write_them_divide_or_fold(target, want):
    """The tie of test_hand_derived_reciprocal_tie (x = f32(-12.15), s = f32(0.1): x / s = -121.49999 -> -121,
    x * fl32(1 / s) = x * 10 = -121.5 -> -122) as users write it: a 0-d or one-element x with s and z passed in
    keeps the division (no broadcast; profile jax_divide); s and z closed over as Python numbers are folded
    into x * fl(1 / s) for a 0-d x and a vector alike (profile jax)."""
    from qref.conformance import Case
    from qref.schemes.uniform import arithmetic_for

    tg = next(t for t in adapters.load_targets("jax") if t.name == target)
    spec = {"storage": "int8", "expressed": "float32", "scales": [0.1], "zero_points": [0], "scale_shape": [],
            "axis": None, "block_size": None, "storage_range": None, "profile": tg.profile,
            "arithmetic": arithmetic_for(tg.profile).to_dict()}
    x = np.full(4, 0xC1426666, np.uint32).view(np.float32)
    case = Case(id="uniform/int8/hand/jax", family="uniform", operation="uniform_quantize", inputs={"x": x},
                expected={"codes": np.full(4, want, np.int8).view(np.uint8)}, scheme=spec, profile=tg.profile,
                array_formats={"codes": "int8"}, profiles=(tg.profile,))
    assert tg.supports(case) is None
    (got,) = tg.run([case])
    assert (got["codes"].view(np.int8) == want).all(), got
    assert int(get_family("uniform").expectation(case, tg.profile).outputs["codes"].view(np.int8)[0]) == want
