"""Scaling recipes (docs/spec/recipes.md §3-§4): amax, the scale formulas, scaled casts and delayed scaling,
against flax.linen.fp8_ops bit for bit (scales and histories compared as uint32 bit patterns, codes as integers)
and against exact arithmetic written in the tests."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.recipes import DelayedScaling, amax, compute_scale, current_scale, qdq, scaled_quantize

F32 = np.float32


def bits(a: object) -> np.ndarray:
    return np.asarray(a, dtype=F32).view(np.uint32)


def flax_ops():
    pytest.importorskip("jax", reason="flax.linen.fp8_ops runs on JAX")
    return pytest.importorskip("flax.linen.fp8_ops", reason="delayed scaling is checked against flax")


def amax_samples() -> np.ndarray:
    rng = np.random.default_rng(0)
    normal = (np.abs(rng.standard_normal(3000)) * 10.0 ** rng.uniform(-30, 30, 3000)).astype(F32)
    edges = np.array([0.0, -0.0, np.inf, np.nan, 448.0, 1.0, 3.0, 1e-30, 1.3e-36, 1.4e-36, 2e-36, 3.4e38,
                      float(np.finfo(F32).tiny), 65504.0, 57344.0, 1e38], dtype=F32)
    return np.concatenate([normal, edges])


# ---------------------------------------------------------------------------------------------------------
# compute_scale: Flax's formula (recipes.md §3.2)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt,fmax", [("float8_e4m3fn", 448.0), ("float8_e5m2", 57344.0)])
@pytest.mark.parametrize("jit", [False, True])
def test_compute_scale_matches_flax(fmt: str, fmax: float, jit: bool) -> None:
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    am = amax_samples()
    prev = np.array([1.0, 0.37, 1e-20, 3e5], dtype=F32)
    fn = jax.vmap(lambda a, s: F.compute_scale(a, s, jnp.float32(fmax)), in_axes=(0, None))
    if jit:
        fn = jax.jit(fn)
    compared = 0
    for p in prev:
        got = bits(compute_scale(am, fmt, formula="flax", prev_scale=p, ftz=True))
        ref = bits(np.asarray(fn(jnp.asarray(am), jnp.float32(p))))
        assert got.shape == ref.shape
        assert int((got != ref).sum()) == 0, (fmt, p, am[got != ref][:5], got[got != ref][:5], ref[got != ref][:5])
        compared += got.size
    assert compared == 4 * am.size


def test_compute_scale_subnormal_amax_differs_between_eager_and_jit() -> None:
    """C3: a float32-subnormal amax is unspecified: XLA:CPU eager reads it as 0 (keeps the scale), jit does not."""
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    a = jnp.float32(1e-40)
    eager = np.float32(F.compute_scale(a, jnp.float32(0.5), jnp.float32(448.0)))
    jitted = np.float32(jax.jit(F.compute_scale)(a, jnp.float32(0.5), jnp.float32(448.0)))
    assert eager == F32(0.5) and jitted == F32(0.0)
    assert compute_scale(F32(1e-40), "float8_e4m3fn", prev_scale=0.5, ftz=True) == F32(0.5)  # the eager reading
    assert compute_scale(F32(1e-40), "float8_e4m3fn", prev_scale=0.5, ftz=False) == F32(0.0)  # the IEEE one


def test_compute_scale_flax_is_not_amax_over_max() -> None:
    """1 / ((max / amax) / 1) differs from amax / max (the notes: about 27% of float32 amaxes)."""
    am = amax_samples()[:3000]
    flax = compute_scale(am, "float8_e4m3fn", formula="flax")
    direct = compute_scale(am, "float8_e4m3fn", formula="amax_over_max")
    frac = float((bits(flax) != bits(direct)).mean())
    assert 0.15 < frac < 0.4
    assert (bits(direct) == bits(am / F32(448))).all()  # IEEE division, one rounding


def test_compute_scale_margin_and_power_of_two_formulas_exact() -> None:
    am = amax_samples()
    am = am[np.isfinite(am) & (am > 1e-30) & (am < 1e30)]
    for margin in (0, 1, 3, -2):
        for formula in ("pow2_ceil", "pow2_floor"):
            got = compute_scale(am, "float8_e4m3fn", formula=formula, margin=margin).astype(np.float64)
            for a, s in zip(am[:400], got[:400]):
                r = Fraction(float(a)) / 448
                e = 0
                while Fraction(2) ** e < r:
                    e += 1
                while Fraction(2) ** (e - 1) >= r:
                    e -= 1
                # e = ceil(log2 r)
                if formula == "pow2_floor" and Fraction(2) ** e != r:
                    e -= 1
                assert Fraction(s) == Fraction(2) ** (e + margin), (a, formula, margin)
        flax_m = compute_scale(am, "float8_e4m3fn", formula="flax", margin=margin)
        expected = (F32(1) / ((F32(448) / am) / F32(2.0**margin))).astype(F32)
        assert (bits(flax_m) == bits(expected)).all()


def test_compute_scale_keeps_previous_scale() -> None:
    bad = np.array([0.0, -1.0, np.inf, -np.inf, np.nan], dtype=F32)
    prev = F32(0.92148)
    flax = compute_scale(bad, "float8_e4m3fn", prev_scale=prev)
    kept = F32(1) / (F32(1) / prev)
    assert (bits(flax) == bits(np.full(5, kept))).all()
    assert kept != prev  # the round trip 1 / (1 / s) is not the identity for this s
    for formula in ("amax_over_max", "pow2_ceil", "pow2_floor"):
        assert (compute_scale(bad, "float8_e4m3fn", formula=formula, prev_scale=prev) == prev).all()


def test_compute_scale_errors() -> None:
    with pytest.raises(QrefError, match="scale formula"):
        compute_scale(1.0, "float8_e4m3fn", formula="flaxx")
    with pytest.raises(QrefError, match="margin"):
        compute_scale(1.0, "float8_e4m3fn", margin=0.5)  # type: ignore[arg-type]
    with pytest.raises(QrefError, match="float element formats"):
        compute_scale(1.0, "int8")
    with pytest.raises(QrefError, match="accumulation/output dtype"):
        compute_scale(1.0, "float8_e4m3fn", dtype="float128")


# ---------------------------------------------------------------------------------------------------------
# amax and current scaling (recipes.md §3.1)
# ---------------------------------------------------------------------------------------------------------
def test_amax_granularities() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 7, 9)).astype(F32)
    assert amax(x) == np.abs(x).max()
    assert (amax(x, keep_axes=1) == np.abs(x).max(axis=(0, 2), keepdims=True)).all()
    assert (amax(x, keep_axes=(0, 2)) == np.abs(x).max(axis=1, keepdims=True)).all()
    b = amax(x, block=(2, 4))
    assert b.shape == (5, 7, 3)
    for j in range(3):
        assert (b[..., j] == np.abs(x[..., 4 * j:4 * j + 4]).max(axis=-1)).all()
    y = x.copy()
    y[0, 0, 0] = np.nan
    assert np.isnan(amax(y)) and amax(y, nan="ignore") == np.abs(x).reshape(-1)[1:].max()
    assert amax(np.zeros((0,), F32)) == 0
    with pytest.raises(QrefError, match="not both"):
        amax(x, keep_axes=0, block=(1, 2))
    with pytest.raises(QrefError, match="out of range"):
        amax(x, keep_axes=3)


def test_current_scale_per_block_and_axis() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 64)) * 10.0 ** rng.uniform(-3, 3, (4, 1))).astype(F32)
    s = current_scale(x, "float8_e4m3fn", block=(1, 32))
    assert s.shape == (4, 2)
    assert (bits(s) == bits((np.abs(x).reshape(4, 2, 32).max(-1) / F32(448)).astype(F32))).all()
    s_ax = current_scale(x, "float8_e4m3fn", keep_axes=0)
    assert s_ax.shape == (4, 1)
    q = scaled_quantize(x, qref.recipes.expand_scale(s, x.shape, block=(1, 32)), "float8_e4m3fn")
    assert q.dtype == np.uint8 and (q & 0x7F).max() <= 0x7E  # no NaN: every block fits after scaling


# ---------------------------------------------------------------------------------------------------------
# scaled casts vs flax quantize / qdq (recipes.md §3.3)
# ---------------------------------------------------------------------------------------------------------
def near_ties(fmt: str, scale: float) -> np.ndarray:
    v = qref.get_format(fmt).values.astype(np.float64)
    v = np.unique(v[np.isfinite(v) & (v >= 0)])
    mids = (v[:-1] + v[1:]) / 2
    base = (mids * scale).astype(F32)
    x = np.concatenate([base, np.nextafter(base, F32(np.inf)), np.nextafter(base, F32(0)),
                        np.array([np.inf, np.nan, 1e30, 0.0, -0.0], F32)])
    return np.concatenate([x, -x]).astype(F32)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("jit", [False, True])
def test_scaled_quantize_matches_flax_quantize(fmt: str, jit: bool) -> None:
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    dt = jnp.float8_e4m3fn if fmt == "float8_e4m3fn" else jnp.float8_e5m2
    division = "reciprocal" if jit else "divide"
    diffs = 0
    for scale in (0.37, 1 / 3, 0.1, 7.1, 1.0):
        s = F32(scale)
        x = near_ties(fmt, float(s))

        def fn(a, b):
            return F.quantize(a, dt, b, jnp.float32)
        if jit:
            fn = jax.jit(fn)
        ref = np.asarray(fn(jnp.asarray(x), jnp.asarray([s]))).view(np.uint8)
        got = scaled_quantize(x, s, fmt, division=division, ftz=True)
        assert got.dtype == np.uint8
        assert int((got != ref).sum()) == 0, (scale, x[got != ref][:4])
        other = scaled_quantize(x, s, fmt, division="divide" if jit else "reciprocal", ftz=True)
        diffs += int((other != ref).sum())
        qd = qdq(x, s, fmt, division=division, ftz=True)
        ref_qdq = np.asarray(jax.jit(lambda a, b: F.qdq(a, dt, b, jnp.float32))(jnp.asarray(x), jnp.asarray([s]))
                             if jit else F.qdq(jnp.asarray(x), dt, jnp.asarray([s]), jnp.float32))
        assert (bits(qd) == bits(ref_qdq)).all() | (np.isnan(qd) & np.isnan(ref_qdq)).all()
    assert diffs > 0  # the two division forms really differ on these inputs (XLA's rewrite under jit)


# ---------------------------------------------------------------------------------------------------------
# delayed scaling vs update_fp8_meta (recipes.md §4)
# ---------------------------------------------------------------------------------------------------------
def step_inputs(n: int = 14) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    xs = []
    for t in range(n):
        x = (rng.standard_normal((6, 5)) * 10.0 ** rng.uniform(-4, 4)).astype(F32)
        if t == 3:
            x[:] = 0  # zero amax: the previous scale is kept (through 1 / (1 / s))
        if t == 6:
            x[2, 2] = np.nan  # NaN amax stays in the ring for L steps
        if t == 8:
            x[0, 0] = np.inf
        if t == 10:
            x = x * F32(1e-35)  # tiny amax: max / amax overflows, the scale becomes 0
        xs.append(x)
    return xs


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("L", [1, 4, 1024])
@pytest.mark.parametrize("jit", [False, True])
def test_delayed_scaling_matches_flax_update_fp8_meta(fmt: str, L: int, jit: bool) -> None:
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    dt = jnp.float8_e4m3fn if fmt == "float8_e4m3fn" else jnp.float8_e5m2
    ds = DelayedScaling(fmt=fmt, history_length=L, ftz=True)
    st = ds.init()
    fscale, fhist = jnp.ones((1,), jnp.float32), jnp.zeros((L,), jnp.float32)

    def upd(x, s, h):
        return F.update_fp8_meta(x, dt, s, h)
    if jit:
        upd = jax.jit(upd)
    xs = step_inputs()
    for t, x in enumerate(xs):
        scale, st = ds.update(st, x)
        fscale, fhist = upd(jnp.asarray(x), fscale, fhist)
        assert (bits(scale) == bits(fscale)).all(), (t, scale, fscale)
        assert (bits(st.scale) == bits(fscale)).all()
        assert (bits(st.history) == bits(fhist)).all(), (t, st.history[:6], np.asarray(fhist)[:6])
        if t == 0:
            assert scale[0] == 1.0  # step 0 uses the initial scale
    assert len(xs) >= 10


def test_delayed_scaling_ring_and_most_recent() -> None:
    ds = DelayedScaling(history_length=3)
    st = ds.init()
    for a in (1.0, 2.0, 3.0, 4.0):
        st = ds.push(st, np.array([a], F32))
    assert st.history.tolist() == [4.0, 2.0, 3.0]  # roll(-1) then entry 0: the last 3 amaxes, 1.0 dropped
    mr = DelayedScaling(history_length=3, amax_compute="most_recent")
    assert mr.history_amax(st)[0] == 4.0 and ds.history_amax(st)[0] == 4.0
    st2 = ds.state([1.0], [1.0, 8.0, 2.0])
    assert mr.next_scale(st2)[0] == compute_scale(F32(1.0), "float8_e4m3fn")
    assert ds.next_scale(st2)[0] == compute_scale(F32(8.0), "float8_e4m3fn")
    with pytest.raises(QrefError, match="history_length"):
        DelayedScaling(history_length=0)
    with pytest.raises(QrefError, match="history has"):
        ds.state([1.0], [0.0, 0.0])
    with pytest.raises(QrefError, match="amax computation"):
        DelayedScaling(amax_compute="mean")


def test_delayed_quantize_codes() -> None:
    ds = DelayedScaling(history_length=2)
    st = ds.init()
    x = np.array([[1.0, -500.0, 3.3]], F32)
    codes, s, st = ds.quantize(st, x)
    assert s[0] == 1.0
    assert (codes == qref.encode(np.clip(x, -448, 448), "float8_e4m3fn")).all()
    codes2, s2, _ = ds.quantize(st, x)
    assert s2[0] == compute_scale(F32(500.0), "float8_e4m3fn")[()]
    assert codes2.dtype == np.uint8 and ml_dtypes.float8_e4m3fn  # decodable e4m3 codes
