"""Keras 3.15 quantized Dense on the JAX backend against qref's references (docs/spec/recipes.md §14-§15):
float8 training steps (delayed scaling, profile ``keras``) and the int8 forward (profile ``keras_int8``),
compared as bit patterns.

The float8 dots run in float32 on dequantized values, in an implementation-defined order; bit-for-bit
agreement is claimed where the reference's tolerance is zero (asserted: power-of-two scales and short exact
sums, or one-element dots)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["KERAS_BACKEND"] = "jax"

from qref.profiles.recipe import AbsmaxMultiplierRules
from qref.recipes import PRESETS, Fp8DotState, absmax_dense, absmax_quantize, dense_fp8_step, sgd

keras = pytest.importorskip("keras", reason="the Keras recipes are checked against Keras on JAX")
jax = pytest.importorskip("jax", reason="Keras runs on the JAX backend")
jnp = jax.numpy

F32 = np.float32
META = {"input": "inputs", "kernel": "kernel", "output_grad": "outputs_grad"}


def bits(a: object) -> np.ndarray:
    return np.asarray(a, dtype=F32).reshape(-1).view(np.uint32)


def assert_bits(name: str, got: object, exp: object) -> None:
    g, e = bits(got), bits(exp)
    bad = np.flatnonzero(g != e)
    assert bad.size == 0, f"{name}: {bad.size} of {g.size} differ; first at {bad[0]}: got {g[bad[0]]:#010x}, " \
                          f"expected {e[bad[0]]:#010x}"


def train(xs: list[np.ndarray], kernel: np.ndarray, bias: np.ndarray, gs: list[np.ndarray], lr: float,
          bit_exact: bool, einsum: bool = False) -> int:
    """Runs keras Dense (or EinsumDense("ab,bc->ac")) quantize('float8') and qref's reference side by side with
    SGD; loss = sum(y * G) so that dL/dy = G. Compares every value bit for bit; returns the number of steps."""
    assert keras.config.backend() == "jax"
    rc = PRESETS["keras"]
    n = kernel.shape[1]
    layer = keras.layers.EinsumDense("ab,bc->ac", output_shape=n, bias_axes="c") if einsum else \
        keras.layers.Dense(n)
    layer.build(xs[0].shape)
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    layer.quantize("float8")
    opt = keras.optimizers.SGD(lr)
    opt.build(layer.trainable_variables)
    names = [v.path.split("/")[-1] for v in layer.trainable_variables]
    state, k_ref, b_ref = Fp8DotState.init(rc), kernel, bias
    for t, (x, g) in enumerate(zip(xs, gs, strict=True)):
        tv = [v.value for v in layer.trainable_variables]

        def loss(tv, x, g=g):
            y, _ = layer.stateless_call(tv, [], x, training=True)
            return jnp.sum(y * g), y

        (g_tv, g_x), y = jax.grad(loss, argnums=(0, 1), has_aux=True)(tv, jnp.asarray(x))
        grads = dict(zip(names, g_tv, strict=True))
        opt.apply(g_tv, layer.trainable_variables)
        now = {v.path.split("/")[-1]: np.asarray(v.value) for v in layer.trainable_variables}

        ref = dense_fp8_step(x, k_ref, b_ref, g, state, rc)
        if bit_exact:
            assert ref.bit_exact, "inputs chosen so that every dot is exact"
        state = ref.state
        k_ref, b_ref = sgd(k_ref, ref.grad_kernel, lr), sgd(b_ref, ref.grad_bias, lr)
        assert_bits(f"step {t} y", y, ref.y)
        assert_bits(f"step {t} grad_x", g_x, ref.grad_x)
        assert_bits(f"step {t} grad_kernel", grads["kernel"], ref.grad_kernel)
        assert_bits(f"step {t} grad_bias", grads["bias"], ref.grad_bias)
        assert_bits(f"step {t} kernel", now["kernel"], k_ref)
        assert_bits(f"step {t} bias", now["bias"], b_ref)
        for ours, theirs in META.items():
            st = getattr(state, ours)
            assert_bits(f"step {t} {theirs}_scale", now[f"{theirs}_scale"], st.scale)
            assert_bits(f"step {t} {theirs}_amax_history", now[f"{theirs}_amax_history"], st.history)
    return len(xs)


@pytest.mark.parametrize("einsum", [False, True], ids=["Dense", "EinsumDense"])
def test_float8_dense_training_bit_exact(einsum):
    """4 steps, B=4, K=8, N=3: amaxes 3.5 (inputs), 0.875 (kernel), 7 (gradients) make every scale a power of
    two (448 / 3.5 = 2^7, 448 / 0.875 = 2^9, 57344 / 7 = 2^13), so every dot is exact; the kernel's amax does
    not grow (lr 2^-8). Steps 0 and 1 cast with scale 1, steps 2 and 3 with the scales of step 0's amaxes."""
    rng = np.random.default_rng(1)
    xs = [F32(rng.integers(-6, 7, (4, 8)) * 0.25) for _ in range(4)]
    gs = [F32(rng.integers(-6, 7, (4, 3))) for _ in range(4)]
    for x, g in zip(xs, gs, strict=True):
        x[0, 0], g[0, 0] = 3.5, 7.0
    k = F32(rng.integers(-6, 7, (8, 3)) * 0.125)
    k[0, 0] = 0.875
    b = F32([0.1, 0.2, -0.3])  # not bfloat16 values: Keras rounds the bias through bfloat16
    assert train(xs, k, b, gs, 2.0**-8, bit_exact=True, einsum=einsum) == 4


def test_float8_dense_training_one_element_dots():
    """6 steps of a 1 x 1 Dense on random values: non-power-of-two scales (each dot is one product, so the
    result is defined); the scales and amax histories follow the recipe with its one-step lag."""
    rng = np.random.default_rng(2)
    xs = [F32(rng.normal(size=(1, 1)) * 3) for _ in range(6)]
    gs = [F32(rng.normal(size=(1, 1)) * 1e-3) for _ in range(6)]
    assert train(xs, F32([[0.7]]), F32([0.3]), gs, 0.1, bit_exact=False) == 6


def test_keras_and_flax_recipes_differ():
    """The same inputs under the keras and flax presets: step 1 casts with scale 1 under Keras (the stored
    scale) and with the scale of step 0's amax under Flax."""
    x, k, g = F32([[3.0, -1.0]]), F32([[0.5], [0.25]]), F32([[2.0]])
    out = {}
    for name in ("keras", "flax"):
        rc = PRESETS[name]
        s0 = dense_fp8_step(x, k, None, g, Fp8DotState.init(rc), rc)
        out[name] = dense_fp8_step(x, k, None, g, s0.state, rc).scales
    assert float(out["keras"][0][0]) == 1.0
    assert float(out["flax"][0][0]) == float(F32(1) / (F32(448) / F32(3)))


# keras 3.15.1 quantize('int8') reads its kernel variable with np.array(variable), which numpy 2 warns about
@pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")
def test_int8_dense_forward_bit_exact():
    """Dense.quantize('int8'): kernel codes and per-column scales (computed by Keras in numpy at quantize
    time) and the forward output (per-row input scales, int32 dot, y = fl(acc) / fl(s_k s_x) + bias)."""
    rng = np.random.default_rng(0)
    x = F32(rng.normal(size=(6, 64)) * 2)
    x[1] = 0.0  # a zero row: amax 0, scale 127 / 1e-7
    x[2, :4] = [1e30, -1e-30, 0.5, np.float32(2.0**-149)]
    k = F32(rng.normal(size=(64, 7)) * 0.1)
    k[:, 3] = 0.0
    b = F32(rng.normal(size=7))
    layer = keras.layers.Dense(7)
    layer.build(x.shape)
    layer.kernel.assign(k)
    layer.bias.assign(b)
    layer.quantize("int8")
    qk, sk = absmax_quantize(k, 0)
    assert np.array_equal(np.asarray(layer._kernel.value), qk)
    assert_bits("kernel_scale", layer.kernel_scale.value, sk.reshape(-1))
    assert_bits("y", layer(x), absmax_dense(x, k, b))


def test_absmax_quantize_float32_ops():
    """The scale and codes against numpy's float32 operations (each correctly rounded), including a tie."""
    x = F32([[0.3, -1.7, 0.85, 1.0, 0.0]])
    q, s = absmax_quantize(x, -1, AbsmaxMultiplierRules())
    exp_s = F32(127) / (F32(1.7) + F32(1e-7))
    assert bits(s)[0] == bits(exp_s)[0]
    assert q.tolist() == [np.clip(np.round(x[0] * exp_s), -127, 127).astype(np.int8).tolist()]
    q2, s2 = absmax_quantize(F32([[2.5, 127.0, -0.5]]), -1, AbsmaxMultiplierRules(epsilon=0.0))
    assert float(s2[0, 0]) == 1.0 and q2.tolist() == [[2, 127, 0]]  # half to even


def _edge_heavy(n: int, seed: int) -> np.ndarray:
    """n float32 values: random over 2^-30 .. 2^30 with both signs, plus zeros, subnormals, huge values, Inf, NaN
    and every float32 bit pattern's neighbours of a few binade edges."""
    rng = np.random.default_rng(seed)
    x = (rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-30, 30, n))).astype(F32)
    edge = F32([0.0, -0.0, 1e-45, -1e-40, 1.17e-38, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 448.0, 57344.0])
    x[: edge.size] = edge
    x[edge.size : edge.size + 4096] = np.arange(0x3F800000 - 2048, 0x3F800000 + 2048, dtype=np.uint32).view(F32)
    return x


def test_quantize_and_dequantize_million_values():
    """keras.quantizers.quantize_and_dequantize on 10^6 values per float8 format and scale: x * fl(1 / s) (the
    broadcast division XLA rewrites), clip, round to nearest even, times s, flush-to-zero (recipes.md §14)."""
    from qref.recipes.scaling import scaled_dequantize, scaled_quantize

    x = _edge_heavy(10**6, 3)
    for fmt in ("float8_e4m3fn", "float8_e5m2"):
        for s in (F32(0.37), F32(1 / 3), F32(2.0**-7)):
            got = keras.quantizers.quantize_and_dequantize(x, np.asarray(s), fmt, "float32")
            codes = scaled_quantize(x, s, fmt, compute_dtype="float32", division="reciprocal", ftz=True)
            exp = scaled_dequantize(codes, fmt, s, dtype="float32", ftz=True)
            g, e = np.asarray(got, F32), np.asarray(exp, F32)
            nan = np.isnan(e)
            assert np.array_equal(np.isnan(g), nan), f"{fmt} s={s}: NaN positions differ"
            assert_bits(f"{fmt} s={s}", g[~nan], e[~nan])


def test_abs_max_quantize_million_values():
    """keras.quantizers.abs_max_quantize (the backend path Dense int8 uses for its inputs) on 10^6 values in
    rows of 1000, per row: codes and scales bit for bit (recipes.md §15)."""
    x = _edge_heavy(10**6, 4)
    x = np.where(np.isfinite(x), x, F32(0.5)).reshape(1000, 1000)  # the int8 cast of NaN / Inf is undefined
    x[7] = 0.0
    x[8] = F32(1e-45)
    q, s = keras.quantizers.abs_max_quantize(x, axis=-1)
    eq, es = absmax_quantize(x, -1)
    assert np.array_equal(np.asarray(q), eq)
    assert_bits("scale", s, es)


def test_float8_dense_cast_divides_by_a_broadcast_reciprocal():
    """A Dense with K = N = 1 whose step-2 input rows lie where x / s and x * fl(1 / s) give different E4M3 codes
    (s = the stored scale of step 2, from step 0's amax 3): Keras casts the 2 x 1 input as x * fl(1 / s) and the
    one-element kernel as k / s (recipes.md §14.1, division "broadcast_reciprocal"). Gradient rows 2^-10 and
    2^-11 keep the two-term kernel gradient one rounding of exact products."""
    import ml_dtypes

    from qref.recipes.scaling import scaled_quantize

    s = F32([1]) / (F32(448) / F32(3))  # fl(1 / fl(448 / 3)): the scale of amax 3 (§3.2)
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    grid = np.sort(grid[np.isfinite(grid) & (grid > 0) & (grid < 448)])
    mid = F32((grid[:-1] + grid[1:]) / 2 * float(s[0]))
    cand = np.concatenate([mid, np.nextafter(mid, F32(np.inf)), np.nextafter(mid, F32(-np.inf))])
    div = scaled_quantize(cand, s, "float8_e4m3fn", division="divide", ftz=True)
    rec = scaled_quantize(cand, s, "float8_e4m3fn", division="reciprocal", ftz=True)
    differ = cand[div != rec]
    x2 = differ[np.argsort(np.abs(np.log2(differ)))[:2]].reshape(2, 1)  # the two nearest 1
    assert differ.size >= 2
    xs = [F32([[3.0], [-1.0]]), F32([[1.0], [0.5]]), x2]
    gs = [F32([[2.0**-10], [2.0**-11]])] * 3
    assert train(xs, F32([[0.7]]), F32([0.3]), gs, 0.1, bit_exact=False) == 3
    rc = PRESETS["keras"]
    st = Fp8DotState.init(rc)
    for x, g in zip(xs, gs, strict=True):
        r = dense_fp8_step(x, F32([[0.7]]), None, g, st, rc)
        st = r.state
    assert bits(r.scales[0])[0] == bits(s)[0]
    assert not np.array_equal(r.codes[0].reshape(-1), scaled_quantize(x2, s, "float8_e4m3fn", ftz=True).reshape(-1))
