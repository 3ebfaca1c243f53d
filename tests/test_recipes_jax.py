"""block_matmul and the jax.lax.scaled_dot emulation against JAX on CPU (docs/spec/recipes.md §6, §7.1).

XLA:CPU accumulates the dot in an implementation-defined order: results are compared with the reference's
rigorous bound (exact arithmetic on the difference), and bit for bit wherever the bound is zero."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.recipes import block_matmul, jax_scaled_dot

jax = pytest.importorskip("jax", reason="jax.lax.scaled_dot is the backend under test")
jnp = pytest.importorskip("jax.numpy", reason="jax.lax.scaled_dot is the backend under test")

F32 = np.float32
ELEM = {"mxfp8_e4m3": ml_dtypes.float8_e4m3fn, "mxfp8_e5m2": ml_dtypes.float8_e5m2,
        "mxfp4": ml_dtypes.float4_e2m1fn, "nvfp4": ml_dtypes.float4_e2m1fn}
SCALE = {"mxfp8_e4m3": ml_dtypes.float8_e8m0fnu, "mxfp8_e5m2": ml_dtypes.float8_e8m0fnu,
         "mxfp4": ml_dtypes.float8_e8m0fnu, "nvfp4": ml_dtypes.float8_e4m3fn}


def as_jax_operands(q: qref.QArray, name: str) -> tuple[np.ndarray, np.ndarray]:
    return q.codes.astype(np.uint8).view(ELEM[name]), np.asarray(q.scales).astype(np.uint8).view(SCALE[name])


def scaled_dot(lhs, rhs, ls, rs, out="float32"):
    fn = jax.jit(lambda a, b, c, d: jax.lax.scaled_dot(a, b, lhs_scale=c, rhs_scale=d,
                                                       preferred_element_type=getattr(jnp, out)))
    return np.asarray(fn(lhs, rhs, ls, rs)).astype(np.float64)


def operands(rng: np.random.Generator, M: int, K: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-2, 2, (M, 1))).astype(F32)
    b = (rng.standard_normal((K, N)) * 10.0 ** rng.uniform(-2, 2, (1, N))).astype(F32)
    # rows / columns of small integers: their block dots are exact in float32, so the bound is zero there
    a[0] = rng.integers(-8, 9, K)
    b[:, 0] = rng.integers(-8, 9, K)
    return a, b


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "nvfp4"])
def test_block_matmul_agrees_with_scaled_dot(name: str) -> None:
    rng = np.random.default_rng(0)
    sch = qref.scheme(name, profile="ocp")  # single-level NVFP4: scaled_dot has no global scale
    compared = zero = 0
    for K in (32, 96, 256):
        a, b = operands(rng, 5, K, 4)
        qa, qb = sch.quantize(a, axis=1), sch.quantize(b, axis=0)
        r = block_matmul(qa, qb)
        (la, sa), (lb, sb) = as_jax_operands(qa, name), as_jax_operands(qb, name)
        got = scaled_dot(la, lb, sa, sb)
        assert r.within(got).all(), (name, K, np.argwhere(~r.within(got))[:3])
        z = r.bound == 0
        assert (got[z] == r.value[z].astype(np.float64)).all()  # bit exact where the bound is zero
        compared += got.size
        zero += int(z.sum())
        assert z[0, 0]
    assert compared == 5 * 4 * 3 and zero >= 3


def random_codes(rng: np.random.Generator, shape: tuple[int, ...], dt) -> np.ndarray:
    bits = ml_dtypes.finfo(dt).bits
    return rng.integers(0, 1 << bits, shape).astype(np.uint8).view(dt)


@pytest.mark.parametrize("elem,scale,block", [
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu, 32),
    (ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, 16),
])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_jax_scaled_dot_emulation_all_codes(elem, scale, block, out: str) -> None:
    """Every element code (NaN and Inf included) and scale bytes across the range, including byte 0 (2^-127,
    flushed by XLA:CPU) and 255 (NaN)."""
    rng = np.random.default_rng(1)
    M, K, N = 6, 4 * block, 5
    lhs, rhs = random_codes(rng, (M, K), elem), random_codes(rng, (K, N), elem)
    if scale is ml_dtypes.float8_e8m0fnu:
        lb = rng.integers(100, 150, (M, K // block))
        rb = rng.integers(100, 150, (K // block, N))
        lb[0, 0], lb[1, 0], rb[0, 1], lb[2, 1] = 0, 255, 254, 1  # flushed, NaN, huge, smallest normal
        ls, rs = lb.astype(np.uint8).view(scale), rb.astype(np.uint8).view(scale)
    else:
        ls = (rng.integers(0, 0x7F, (M, K // block))).astype(np.uint8).view(scale)
        rs = (rng.integers(0, 0x7F, (K // block, N))).astype(np.uint8).view(scale)
    r = jax_scaled_dot(lhs, rhs, ls, rs, preferred_element_type=out)
    got = scaled_dot(lhs, rhs, ls, rs, out)
    ok = r.within(got)
    assert ok.all(), (np.argwhere(~ok)[:3], got[~ok][:3])
    assert r.value.dtype == (np.float32 if out == "float32" else ml_dtypes.bfloat16)
    z = (r.bound == 0) & ~r.is_special
    assert (got[z] == r.value.astype(np.float64)[z]).all()


def test_scaled_dot_flushes_byte0_scale() -> None:
    a = np.ones((1, 32), ml_dtypes.float8_e4m3fn)
    b = np.ones((32, 1), ml_dtypes.float8_e4m3fn)
    for byte, expect_zero in ((0, True), (1, False)):
        ls = np.array([[byte]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
        rs = np.array([[187]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
        r = jax_scaled_dot(a, b, ls, rs)
        got = scaled_dot(a, b, ls, rs)
        assert (r.value[0, 0] == 0) == expect_zero and r.within(got).all()
    r_ieee = jax_scaled_dot(a, b, np.array([[0]], np.uint8).view(ml_dtypes.float8_e8m0fnu),
                            np.array([[187]], np.uint8).view(ml_dtypes.float8_e8m0fnu), ftz=False)
    assert r_ieee.value[0, 0] == 32 * 2.0 ** (60 - 127)


def test_jax_scaled_dot_takes_qarrays() -> None:
    rng = np.random.default_rng(2)
    a, b = operands(rng, 3, 64, 2)
    sch = qref.scheme("mxfp8_e4m3")
    qa, qb = sch.quantize(a, axis=1), sch.quantize(b, axis=0)
    r1 = jax_scaled_dot(qa, qb)
    (la, sa), (lb, sb) = as_jax_operands(qa, "mxfp8_e4m3"), as_jax_operands(qb, "mxfp8_e4m3")
    r2 = jax_scaled_dot(la, lb, sa, sb)
    assert (r1.value == r2.value).all() and (r1.bound == r2.bound).all()
    with pytest.raises(qref.QrefError, match="global scale"):
        jax_scaled_dot(qref.scheme("nvfp4").quantize(a, axis=1), qref.scheme("nvfp4").quantize(b, axis=0))
    with pytest.raises(qref.QrefError, match="scale shapes"):
        jax_scaled_dot(la, lb, sa, sb[:1])
