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
    dt = "bfloat16" if x.dtype == ml_dtypes.bfloat16 else "float32"
    assert same(q.dequantize(dt).astype(np.float32), ref)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_qwix_random_and_ties(dt: str) -> None:
    rng = np.random.default_rng(0)
    cast = (lambda a: a.astype(ml_dtypes.bfloat16)) if dt == "bfloat16" else (lambda a: a)
    run(cast((rng.standard_normal((8, 256)) * 3).astype(np.float32)), 64)
    pts = tie_points(NF4, dt)
    x = blocks_with_unit_absmax(pts, 64)
    x = np.resize(x, (x.size // 256 + 1) * 256).reshape(-1, 256)
    run(cast(x), 64)


def test_qwix_edge_blocks() -> None:
    x = np.random.default_rng(1).standard_normal((4, 128)).astype(np.float32)
    x[0, :64] = 0                         # zero tile: scale 1, code 7
    x[1, 5] = np.nan                      # NaN tile: code 0
    x[2, 70] = np.inf                     # inf tile: code 0 at inf, 7 elsewhere
    x[3, :64] = np.float32(1e-25)         # absmax below sqrt(tiny): scale 1
    run(x, 64)
