"""End to end: a two-layer MLX model quantized with mlx.nn.quantize(model, mode="mxfp8", quantize_input=True)
(QQLinear layers: MLX quantizes the weights with mx.quantize and every activation row inside mx.qqmm) against
qref's emulation (qref.scheme("mxfp8_e4m3", profile="mlx") for the weights, qref.recipes.mlx_qqmm for each layer;
docs/spec/recipes.md §7.3). On x86-64, where MLX 0.32's CPU build runs the scalar loops, the whole forward pass
is reproduced bit for bit; everywhere it lies within the reference's rigorous bound layer by layer."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import qref
from qref.interop.packing import unpack
from qref.recipes import mlx_qqmm

mx = pytest.importorskip("mlx.core", reason="MLX QQLinear (mlx.nn.quantize(..., quantize_input=True)) is under test")
nn = pytest.importorskip("mlx.nn", reason="MLX QQLinear is under test")

F32 = np.float32
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _model(rng: np.random.Generator):
    model = nn.Sequential(nn.Linear(64, 96, bias=False), nn.ReLU(), nn.Linear(96, 32, bias=False))
    ws = [(rng.standard_normal((96, 64)) * 0.2).astype(F32), (rng.standard_normal((32, 96)) * 0.05).astype(F32)]
    ws[0][3, :32] *= 1e-3  # a group of small weights: its own scale
    model.layers[0].weight = mx.array(ws[0])
    model.layers[2].weight = mx.array(ws[1])
    nn.quantize(model, mode="mxfp8", quantize_input=True)
    model.eval()  # QQLinear keeps quantized weights in eval mode
    return model, ws


def test_qqlinear_model_matches_qref_emulation():
    rng = np.random.default_rng(20261206)
    model, ws = _model(rng)
    assert [type(m).__name__ for m in model.layers] == ["QQLinear", "ReLU", "QQLinear"]
    sch = qref.scheme("mxfp8_e4m3", profile="mlx")
    qw = []
    for layer, w in zip((model.layers[0], model.layers[2]), ws):
        q = sch.quantize(w, axis=1)
        codes = unpack(np.asarray(layer.weight), "mlx", bits=8, count=w.shape[1]).astype(np.uint8)
        np.testing.assert_array_equal(codes, np.asarray(q.codes).astype(np.uint8))  # mx.quantize bit for bit
        np.testing.assert_array_equal(np.asarray(layer.scales).astype(np.uint8), np.asarray(q.scales).astype(np.uint8))
        qw.append(q)
    compared = 0
    for trial in range(4):
        x = (rng.standard_normal((1, 64)) * 10.0 ** rng.uniform(-2, 2, (1, 2)).repeat(32, 1)).astype(F32)
        if trial == 3:
            x[0, :32] = 0.0  # an all-zero group
        got = np.asarray(model(mx.array(x)))
        r1 = mlx_qqmm(x, qw[0])
        h = np.maximum(np.asarray(model.layers[0](mx.array(x))), F32(0))
        assert r1.within(np.asarray(model.layers[0](mx.array(x)))).all()
        r2 = mlx_qqmm(h, qw[1])
        assert r2.within(got).all()
        if X86:  # the scalar loops bit for bit, layer after layer
            e1 = mlx_qqmm(x, qw[0], order="mlx_cpu").value
            e2 = mlx_qqmm(np.maximum(e1, F32(0)), qw[1], order="mlx_cpu").value
            np.testing.assert_array_equal(e2.view(np.uint32), got.view(np.uint32))
        compared += got.size
    assert compared == 4 * 32
