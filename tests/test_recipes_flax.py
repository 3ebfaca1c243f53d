"""The Dense-layer reference against flax.linen.Dense(dot_general_cls=Fp8DirectDotGeneralOp) on CPU
(docs/spec/recipes.md §8-§9): outputs, gradients, updated parameters and the fp8 meta variables (scales and
amax histories) over several training steps, compared as bit patterns.

XLA:CPU's dot accumulates in an implementation-defined order, so bit-for-bit agreement is claimed only where
the reference's tolerance is zero: ``test_dense_training_bit_exact`` uses inputs on which every dot is
provably exact (the reference asserts it), ``test_dense_training_random_within_tolerance`` uses random data
and checks the rigorous tolerances with parameters fed back from Flax at each step."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from qref.recipes import Fp8DotState, HybridRecipe, dense_fp8_step
from qref.recipes.exact import Dyadic, dyadic_compare_abs_diff
from qref.recipes.training import PRESETS, sgd

jax = pytest.importorskip("jax", reason="the Dense reference is checked against Flax on JAX")
jnp = pytest.importorskip("jax.numpy", reason="the Dense reference is checked against Flax on JAX")
nn = pytest.importorskip("flax.linen", reason="the Dense reference is checked against Flax")
fp8_ops = pytest.importorskip("flax.linen.fp8_ops", reason="the Dense reference is checked against Flax")

F32 = np.float32
META = "Fp8DirectDotGeneralOp_0"
B, K, N = 4, 32, 8
LR = 2.0**-20


def bits(a: object) -> np.ndarray:
    return np.asarray(a, dtype=F32).view(np.uint32)


def grid_values(fmt, lo: float, hi: float) -> np.ndarray:
    v = np.arange(256, dtype=np.uint8).view(fmt).astype(np.float64)
    return v[np.isfinite(v) & (v >= lo) & (v <= hi)]


def designed(rng: np.random.Generator, shape: tuple[int, ...], fmt, lo: float, hi: float, top: float,
             zeros: float = 0.1) -> np.ndarray:
    """Values of fmt with magnitudes in [lo, hi], random signs, some zeros, and one element equal to +-top:
    every product then has a coarse lowest bit and the dots below are exact in float32 in any order."""
    g = grid_values(fmt, lo, hi)
    v = rng.choice(g, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    v[rng.uniform(size=shape) < zeros] = 0.0
    v.reshape(-1)[rng.integers(v.size)] = top * rng.choice([-1.0, 1.0])
    return v.astype(F32)


def jit_contracts_multiply_add() -> bool:
    """Does XLA:CPU compute dot(x, k) * s + b under jit as one fma per output (it fuses the dot's epilogue)?
    Probed with the test's shapes: dot = 1 + 2^-8 and s = 1 + 2^-20 make the two readings differ."""
    x = np.zeros((B, K), ml_dtypes.float8_e4m3fn)
    k = np.zeros((K, N), ml_dtypes.float8_e4m3fn)
    x[0, :2] = [1.0, 2.0**-8]
    k[:2, 0] = 1.0
    s = np.array([1 + 2.0**-20], F32)
    f = jax.jit(lambda x, k, s, b: jax.lax.dot_general(x, k, (((1,), (0,)), ((), ())),
                                                       preferred_element_type=jnp.float32) * s + b)
    r = float(np.asarray(f(x, k, s, np.full(N, -1, F32)))[0, 0])
    two_roundings = float(F32(F32((1 + 2.0**-8) * (1 + 2.0**-20)) - F32(1)))
    return r != two_roundings


class FlaxDense:
    def __init__(self, jit: bool, history: int):
        self.model = nn.Dense(features=N, dot_general_cls=lambda: fp8_ops.Fp8DirectDotGeneralOp(
            amax_history_length=history))

        def step(variables, x, t):
            y, vjp = jax.vjp(lambda v, xx: self.model.apply(v, xx), variables, x)
            gv, gx = vjp(t)
            return y, gv, gx

        self.step = jax.jit(step) if jit else step

    def init(self, x: np.ndarray, kernel: np.ndarray, bias: np.ndarray):
        v = self.model.init(jax.random.PRNGKey(0), jnp.asarray(x))
        v = jax.tree_util.tree_map(lambda a: a, v)
        v["params"] = {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}
        return v


def meta_of(v) -> dict[str, np.ndarray]:
    return {k: np.asarray(a) for k, a in v["_overwrite_with_gradient"][META].items()}


def compare_step(ref, y, gv, gx, exact: bool) -> int:
    """Every output / gradient: bit for bit where tol == 0, within tol elsewhere; meta always bit for bit."""
    pairs = [(ref.y, np.asarray(y), ref.y_tol), (ref.grad_x, np.asarray(gx), ref.grad_x_tol),
             (ref.grad_kernel, np.asarray(gv["params"]["kernel"]), ref.grad_kernel_tol),
             (ref.grad_bias, np.asarray(gv["params"]["bias"]), ref.grad_bias_tol)]
    n = 0
    for ours, theirs, tol in pairs:
        assert ours.shape == theirs.shape
        z = tol == 0
        same = (bits(ours) == bits(theirs)) | ((ours == 0) & (theirs == 0))  # the sign of a zero sum is open
        assert same[z].all()
        if (~z).any():
            assert not exact
            ok = dyadic_compare_abs_diff(theirs[~z], Dyadic.from_floats(ours[~z]), tol[~z])
            assert ok.all()
        n += ours.size
    fm = meta_of(gv)
    for k, a in ref.state.to_flax().items():
        assert (bits(a) == bits(fm[k])).all(), k
    return n


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("history", [2, 1024])
def test_dense_training_bit_exact(jit: bool, history: int) -> None:
    rng = np.random.default_rng(0)
    e4, e5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
    kernel = designed(rng, (K, N), e4, 16, 448, 448, zeros=0.0)  # no zeros: SGD would make them tiny
    bias = (rng.integers(-64, 64, N) / 4).astype(F32)
    recipe = dataclasses.replace(PRESETS["flax_jit" if jit else "flax"], history_length=history,
                                 fuse_bias=jit and jit_contracts_multiply_add())
    flax = FlaxDense(jit, history)
    x0 = designed(rng, (B, K), e4, 16, 448, 448)
    variables = flax.init(x0, kernel, bias)
    state = Fp8DotState.init(recipe)
    fm = meta_of(variables)
    assert all((bits(a) == bits(fm[k])).all() for k, a in state.to_flax().items())
    params = (kernel, bias)
    compared = 0
    for t in range(3):
        x = designed(rng, (B, K), e4, 16, 448, 448 if t != 1 else 224)
        g = designed(rng, (B, N), e5, 16, 448, 448)  # the output gradient: loss = sum(y * g)
        y, gv, gx = flax.step(variables, jnp.asarray(x), jnp.asarray(g))
        ref = dense_fp8_step(x, params[0], params[1], g, state, recipe)
        assert ref.bit_exact, t  # every dot is provably exact on these inputs
        compared += compare_step(ref, y, gv, gx, exact=True)
        # SGD on the parameters; the meta variables are overwritten with their "gradients" (Flax's convention)
        new_k = sgd(params[0], ref.grad_kernel, LR)
        new_b = sgd(params[1], ref.grad_bias, LR)
        fk = np.asarray(variables["params"]["kernel"] - LR * gv["params"]["kernel"])
        fb = np.asarray(variables["params"]["bias"] - LR * gv["params"]["bias"])
        assert (bits(new_k) == bits(fk)).all() and (bits(new_b) == bits(fb)).all()
        params, state = (new_k, new_b), ref.state
        variables = {"params": {"kernel": jnp.asarray(fk), "bias": jnp.asarray(fb)},
                     "_overwrite_with_gradient": gv["_overwrite_with_gradient"]}
        if t >= 1:
            assert ref.scales[0][0] == 1.0 and ref.scales[2][0] == 2.0**-7  # 1 / (57344 / 448)
    assert compared == 3 * (B * N + B * K + K * N + N)


@pytest.mark.parametrize("jit", [False, True])
def test_dense_training_random_within_tolerance(jit: bool) -> None:
    """Random data: tolerances are nonzero; meta variables stay bit for bit (amaxes are exact maxima)."""
    rng = np.random.default_rng(1)
    recipe = HybridRecipe(history_length=4, division="reciprocal" if jit else "divide",
                          fuse_bias=jit and jit_contracts_multiply_add())
    flax = FlaxDense(jit, 4)
    kernel = (rng.standard_normal((K, N)) * 0.2).astype(F32)
    bias = (rng.standard_normal(N) * 0.1).astype(F32)
    variables = flax.init(np.ones((B, K), F32), kernel, bias)
    state = Fp8DotState.init(recipe)
    nonzero = 0
    for _t in range(4):
        x = (rng.standard_normal((B, K)) * 10.0 ** rng.uniform(-1, 1)).astype(F32)
        g = (rng.standard_normal((B, N)) * 1e-2).astype(F32)
        y, gv, gx = flax.step(variables, jnp.asarray(x), jnp.asarray(g))
        p = variables["params"]
        ref = dense_fp8_step(x, np.asarray(p["kernel"]), np.asarray(p["bias"]), g, state, recipe)
        compare_step(ref, y, gv, gx, exact=False)
        nonzero += int((ref.y_tol > 0).sum())
        # feed Flax's own update back to both sides (teacher forcing keeps the comparison per step)
        variables = {"params": jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, variables["params"], gv["params"]),
                     "_overwrite_with_gradient": gv["_overwrite_with_gradient"]}
        state = Fp8DotState.from_flax(meta_of(gv))
    assert nonzero > 0


def test_hybrid_recipe_qdq_matches_flax_in_qdq_out_qdq() -> None:
    """Fp8DotGeneralOp's in_qdq (E4M3, forward) and out_qdq (E5M2, backward) against the recipe."""
    rng = np.random.default_rng(2)
    recipe = HybridRecipe(history_length=3)
    st_f = recipe.scaling("forward").init()
    st_g = recipe.scaling("grad").init()
    fs, fh = jnp.ones((1,), jnp.float32), jnp.zeros((3,), jnp.float32)
    gs, gh = jnp.ones((1,), jnp.float32), jnp.zeros((3,), jnp.float32)
    for t in range(12):
        x = (rng.standard_normal(40) * 10.0 ** rng.uniform(-3, 3)).astype(F32)
        g = (rng.standard_normal(40) * 10.0 ** rng.uniform(-6, 2)).astype(F32)
        ours, st_f = recipe.qdq_forward(x, st_f)
        theirs = fp8_ops.in_qdq(jnp.float32, jnp.float8_e4m3fn, jnp.asarray(x), fs, fh)
        _, (fs, fh) = fp8_ops.in_qdq_fwd(jnp.float32, jnp.float8_e4m3fn, jnp.asarray(x), fs, fh)
        assert (bits(ours) == bits(theirs)).all() and (bits(st_f.history) == bits(fh)).all()
        _, vjp = jax.vjp(lambda o, s, h: fp8_ops.out_qdq(jnp.float32, jnp.float8_e5m2, o, s, h),
                         jnp.zeros(40, jnp.float32), gs, gh)
        qg, gs, gh = vjp(jnp.asarray(g))
        ours_g, st_g = recipe.qdq_grad(g, st_g)
        assert (bits(ours_g) == bits(qg)).all(), t
        assert (bits(st_g.scale) == bits(gs)).all() and (bits(st_g.history) == bits(gh)).all()
