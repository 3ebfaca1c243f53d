"""The qwix profile against qwix's NF4 (quantize_api with tiled axes, jax CPU). Spec: docs/spec/lut.md §6.5."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_lookup_oracle import blocks_with_unit_absmax, tie_points

import qref
from qref.tables import NF4

jnp = pytest.importorskip("jax.numpy", reason="qwix runs on jax")
qarray = pytest.importorskip("qwix._src.core.qarray", reason="the qwix profile is checked against qwix")


def same(ours: np.ndarray, ref: np.ndarray) -> bool:
    o, r = np.asarray(ours, np.float32), np.asarray(ref, np.float32)
    no, nr = np.isnan(o), np.isnan(r)
    return bool((no == nr).all() and (o.view(np.uint32)[~no] == r.view(np.uint32)[~nr]).all())


def run(x: np.ndarray, block: int) -> None:
    """x of shape (rows, cols): qwix tiles axis 1 by block and keeps axis 0 channelwise."""
    q_ref = qarray.quantize_api(jnp.asarray(x), "nf4", channelwise_axes=(0,), tiled_axes={1: block})
    ref_codes = np.asarray(q_ref.qvalue).astype(np.uint8)
    sch = qref.scheme("nf4", block_size=block, profile="qwix", axis=1)
    q = sch.quantize(x)
    assert int((q.codes != ref_codes).sum()) == 0
    assert q.scales.shape == np.asarray(q_ref.scale).shape
    assert same(q.scales, np.asarray(q_ref.scale).astype(np.float32))
    ref = np.asarray(qarray.dequantize(q_ref)).astype(np.float32)
    assert same(q.dequantize(x.dtype.name).astype(np.float32), ref)


CAST = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.mark.parametrize("dt", list(CAST))
def test_qwix_random_and_ties(dt: str) -> None:
    rng = np.random.default_rng(0)
    run((rng.standard_normal((8, 256)) * 3).astype(CAST[dt]), 64)
    pts = tie_points(NF4, dt)
    x = blocks_with_unit_absmax(pts, 64)
    x = np.resize(x, (x.size // 256 + 1) * 256).reshape(-1, 256)
    run(x.astype(CAST[dt]), 64)


@pytest.mark.parametrize("dt", list(CAST))
def test_qwix_scaled_midpoints_take_the_reciprocal(dt: str) -> None:
    """Midpoints +-2 ulp times absmax values that are not powers of two: x / a and x * fl(1/a) differ here
    (lut.md §6.5: XLA rewrites qwix's divide)."""
    rng = np.random.default_rng(2)
    v = np.sort(NF4.values.astype(np.float64))
    mids = (v[1:] + v[:-1]) / 2
    n = 512
    a = rng.uniform(0.5, 4, size=(n, 1)) * np.exp2(rng.integers(-6, 6, size=(n, 1)))
    x = (mids[rng.integers(0, 15, size=(n, 64))] * a).astype(CAST[dt])
    uint = np.uint16 if x.itemsize == 2 else np.uint32
    x = (x.view(uint) + rng.integers(-2, 3, size=x.shape).astype(uint)).view(CAST[dt])
    x[:, 0] = a[:, 0].astype(CAST[dt])
    run(x.reshape(-1, 256), 64)


def test_qwix_edge_blocks() -> None:
    x = np.random.default_rng(1).standard_normal((4, 128)).astype(np.float32)
    x[0, :64] = 0                         # zero tile: scale 1, code 7
    x[1, 5] = np.nan                      # NaN tile: code 0
    x[2, 70] = np.inf                     # inf tile: code 0 at inf, 7 elsewhere
    x[3, :64] = np.float32(1e-25)         # absmax below sqrt(tiny): scale 1
    run(x, 64)


def test_qwix_float16_guard_is_sqrt_of_float16_tiny() -> None:
    """qwix's guard is sqrt(finfo(scale dtype).tiny): 2^-7 for float16 (lut.md §6.5)."""
    x = np.full((4, 64), 0.25, np.float16)
    x[0] = np.float16(2.0**-8)                       # below 2^-7: scale 1, every element -> code of 2^-8
    x[1] = np.float16(2.0**-7)                       # not below: scale 2^-7, code 15
    x[2] = np.float16(2.0**-7) - np.float16(2.0**-18)
    run(x, 64)
    q = qref.scheme("nf4", block_size=64, profile="qwix", axis=1).quantize(x)
    assert q.scales.reshape(-1)[:3].tolist() == [1.0, 2.0**-7, 1.0]


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_qwix_dequantize_flushes_subnormal_scales_and_products(dt: str) -> None:
    """XLA:CPU FTZ/DAZ: a subnormal scale or product dequantizes to a zero of the product's sign (lut.md §4)."""
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 16, size=(64, 64)).astype(np.uint8)
    e = rng.integers(-150, -100, size=(64, 1)).astype(np.float64)
    scales = (rng.uniform(1, 2, size=(64, 1)) * np.exp2(e)).astype(CAST[dt])
    ref = qarray.dequantize(qarray.QArray(jnp.asarray(codes).astype(jnp.uint4), jnp.asarray(scales), None, "nf4"))
    sch = qref.scheme("nf4", block_size=64, profile="qwix", axis=1)
    ours = sch.dequantize(qref.QArray(codes=codes, scheme=sch, scales=scales.astype(np.float32), axis=1,
                                      meta={"input_dtype": dt}), dt)
    uint = np.uint16 if dt == "bfloat16" else np.uint32
    assert (np.asarray(ours).view(uint) == np.asarray(ref).view(uint)).all()
    assert (np.asarray(ours).astype(np.float32) == 0).any()   # the flush happened on these inputs


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_qwix_flushes_the_reciprocal_of_a_huge_absmax(dt: str) -> None:
    """XLA:CPU FTZ: 1 / absmax below 2^-126 (absmax above 2^126) is 0, so every code is the code of 0 (lut.md §6.5);
    absmax = 2^126 exactly still scales."""
    x = np.zeros((3, 64), np.float32)
    x[:, 1:4] = np.float32(0.75) * np.float32(2.0**126)
    x[0, 0], x[1, 0], x[2, 0] = 2.0**126, 2.0**126 * (1 + 2.0**-7), 3e38  # the 2nd: 1 ulp above in bfloat16
    run(x.astype(CAST[dt]), 64)
    codes = qref.scheme("nf4", block_size=64, profile="qwix", axis=1).quantize(x.astype(CAST[dt])).codes
    assert (codes[1:] == 7).all() and codes[0, 0] == 15
