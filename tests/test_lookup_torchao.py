"""The torchao profile against torchao's to_nf4 (NF4Tensor, CPU). Spec: docs/spec/lut.md §6.3."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from test_lookup_oracle import blocks_with_unit_absmax, tie_points

import qref
from qref.tables import NF4_TORCHAO

torch = pytest.importorskip("torch", reason="torchao runs on torch")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    tq = pytest.importorskip("torchao.quantization", reason="the torchao profile is checked against to_nf4")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def same(ours: np.ndarray, ref: np.ndarray) -> bool:
    o, r = np.asarray(ours, np.float32), np.asarray(ref, np.float32)
    no, nr = np.isnan(o), np.isnan(r)
    return bool((no == nr).all() and (o.view(np.uint32)[~no] == r.view(np.uint32)[~nr]).all())


def run(x: np.ndarray, dt: str) -> None:
    t = torch.from_numpy(x).to(DTYPES[dt])
    nf = tq.to_nf4(t, block_size=64, scaler_block_size=256)
    b = nf.quantized_data.numpy()
    ref_codes = np.empty(2 * b.size, np.uint8)
    ref_codes[0::2], ref_codes[1::2] = b >> 4, b & 15
    xin = t.float().numpy()
    xin = {"float32": xin, "bfloat16": xin.astype(ml_dtypes.bfloat16), "float16": xin.astype(np.float16)}[dt]
    q = qref.scheme("nf4", block_size=64, profile="torchao").quantize(xin, scale_offset=float(nf.scaler_mean))
    assert int((q.codes.reshape(-1) != ref_codes).sum()) == 0
    dq = q.meta["double_quant"]
    assert (dq.codes == nf.quantized_scalers.numpy()).all()
    assert same(dq.scales, nf.quantization_factor.float().numpy())
    ref = nf.get_original_weight().float().numpy().reshape(-1)
    assert same(q.dequantize(dt).astype(np.float32).reshape(-1), ref)


def test_torchao_table_literals() -> None:
    ref = torch.tensor([-1.0000, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0000, 0.0796, 0.1609,
                        0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0000], dtype=torch.float32)
    x = torch.zeros(16384)
    assert (tq.to_nf4(x).nf4.numpy().view(np.uint32) == ref.numpy().view(np.uint32)).all()
    assert (NF4_TORCHAO.values.view(np.uint32) == ref.numpy().view(np.uint32)).all()


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_to_nf4_random(dt: str) -> None:
    rng = np.random.default_rng(0)
    for n in (16384, 16384 * 3):
        run((rng.standard_normal(n) * 0.02).astype(np.float32), dt)


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_to_nf4_ties_and_edges(dt: str) -> None:
    pts = tie_points(NF4_TORCHAO, "float32" if dt == "float32" else dt)
    x = np.resize(blocks_with_unit_absmax(pts, 64), 16384).astype(np.float32)
    x[-64:] = 0                      # a zero block: 0/0 -> code 0
    x[-128] = np.nan                 # a NaN block: code 0
    x[-192], x[-193] = np.inf, 0.5   # inf: code 0 at inf/inf, 7 elsewhere
    x[-256:-200] = np.float32(1e-30)
    run(x, dt)
