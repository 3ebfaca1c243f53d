"""Peer check: vectors generated from PyTorch's own quantization test cases (scripts/gen_torch_quant_cases.py,
tests/data/torch_quant_cases.json, torch 2.13.0's outputs) under qref's torch uniform profiles, bit for bit: the
fake-quantized outputs and gradients ('pytorch_fake_quantize'), quantize_per_tensor codes and dequantized values
('pytorch'; qint32: 'pytorch_per_channel', and its dequantize subtracting in int32, uniform.md §4.3), and the PT2E
decomposed round trip ('pytorch_decomposed'; choose_qparams.tensor against qref.calibrate's 'pytorch' minmax
formula, uniform.md §5.2). No torch needed: the expected values are the file's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import qref
from qref.schemes.uniform import arithmetic_for

DATA = Path(__file__).parent / "data" / "torch_quant_cases.json"
CASES = json.loads(DATA.read_text())["cases"]
F32 = np.float32


def f32(words: list[str]) -> np.ndarray:
    return np.array([int(w, 16) for w in words], np.uint32).view(F32)


def storage_of(lo: int, hi: int) -> str:
    return {(-128, 127): "int8", (0, 255): "uint8", (-(2**31), 2**31 - 1): "int32"}.get((lo, hi), f"int32<{lo}:{hi}>")


def _scheme(storage: str, scale, zp, profile: str, axis=None, **overrides):
    sch = qref.scheme(storage, scale=scale, zero_point=zp, axis=axis, profile=profile)
    return dataclasses.replace(sch, arithmetic=arithmetic_for(profile, **overrides)) if overrides else sch


def test_file_covers_the_ops():
    ops = {c["op"] for c in CASES}
    assert ops == {"fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine", "quantize_per_tensor",
                   "decomposed"}
    assert len(CASES) == 63


@pytest.mark.parametrize("case", [c for c in CASES if c["op"].startswith("fake")], ids=lambda c: c["name"])
def test_fake_quantize(case):
    x = f32(case["x"]).reshape(case["shape"])
    lo, hi = case["quant_min"], case["quant_max"]
    if case["axis"] is None:
        s = float(np.float32(case["scale"][0]))
        sch = _scheme(storage_of(lo, hi), s, case["zero_point"][0], "pytorch_fake_quantize")
    else:
        s = f32(case["scale"]).astype(np.float64).tolist()
        sch = _scheme(storage_of(lo, hi), s, case["zero_point"], "pytorch_fake_quantize", axis=case["axis"])
    q = sch.quantize(x)
    assert not np.asarray(q.unspecified).any()
    y = sch.dequantize(q).astype(F32)
    assert (y.view(np.uint32) == f32(case["y"]).reshape(x.shape).view(np.uint32)).all(), case["name"]
    if "grad" in case:  # the mask: the unclamped z + round(x * fl32(1 / s)) inside [quant_min, quant_max]
        wide = _scheme("int32", s, 0, "pytorch_fake_quantize")
        r = np.asarray(wide.quantize(x).codes).astype(np.int64) + case["zero_point"][0]
        mask = ((r >= lo) & (r <= hi)).astype(F32)
        assert (mask == f32(case["grad"]).reshape(x.shape)).all(), case["name"]


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] == "quantize_per_tensor"], ids=lambda c: c["name"])
def test_quantize_per_tensor_and_dequantize(case):
    x = f32(case["x"]).reshape(case["shape"])
    storage = {"quint8": "uint8", "qint8": "int8", "qint32": "int32"}[case["dtype"]]
    profile = "pytorch_per_channel" if storage == "int32" else "pytorch"  # qint32: the unfused per-element path
    sch = _scheme(storage, case["scale"][0], case["zero_point"][0], profile)
    q = sch.quantize(x)
    codes = np.asarray(case["codes"], np.int64).reshape(x.shape)
    assert (np.asarray(q.codes).astype(np.int64) == codes).all(), case["name"]
    dq = sch if storage != "int32" else _scheme(storage, case["scale"][0], case["zero_point"][0], "pytorch",
                                                dq_subtract="int32")
    y = dq.dequantize(qref.QArray(codes=codes.astype(dq.codes_dtype), scheme=dq)).astype(F32)
    assert (y.view(np.uint32) == f32(case["y"]).reshape(x.shape).view(np.uint32)).all(), case["name"]


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] == "decomposed"], ids=lambda c: c["name"])
def test_decomposed_round_trip(case):
    x = f32(case["x"]).reshape(case["shape"])
    lo, hi = case["quant_min"], case["quant_max"]
    storage = storage_of(lo, hi)
    cal = qref.calibrate(x, storage=storage, method="minmax", formula="pytorch")
    scales, zps = cal
    assert np.float32(np.asarray(scales).reshape(-1)[0]).view(np.uint32) == f32(case["scale"]).view(np.uint32)[0]
    assert int(np.asarray(zps).reshape(-1)[0]) == case["zero_point"][0]
    sch = _scheme(storage, case["scale64"][0], case["zero_point"][0], "pytorch_decomposed")
    q = sch.quantize(x)
    codes = np.asarray(case["codes"], np.int64).reshape(x.shape)
    assert (np.asarray(q.codes).astype(np.int64) == codes).all(), case["name"]
    y = sch.dequantize(qref.QArray(codes=codes.astype(sch.codes_dtype), scheme=sch)).astype(F32)
    assert (y.view(np.uint32) == f32(case["y"]).reshape(x.shape).view(np.uint32)).all(), case["name"]
