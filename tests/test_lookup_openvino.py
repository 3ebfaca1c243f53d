"""The openvino lookup profile against OpenVINO's NF4 conversion (CPU) and NNCF's NF4 weights, bit for bit.
Spec: lut.md §6.4.

OpenVINO quantizes to ``nf4`` with ``ConvertNF4::quantize`` (a tree of strict ``>`` comparisons against 15 C
float literals) in two places, both run here: an ``nf4`` Constant built from float values (the path weight
compression takes) and a runtime ``Convert(f32 -> nf4)`` on the CPU plugin. ``Convert(nf4 -> f32)`` is the
dequantization table. The inputs are already scaled values: qref's profile is applied with a static scale of 1,
so the comparison isolates the decision rule, the NaN/Inf rule and the table. Codes are compared as integers.

The per-group scaling is NNCF's (``nncf.compress_weights(mode=NF4)``; nncf is not in qref's lock): it is held to
peer vectors that NNCF and OpenVINO produced (tests/peers/openvino, scripts/peers/openvino.py): codes, float16
scales and the weights the CPU plugin decompresses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import qref
from qref.interop.packing import pack
from qref.tables import NF4

F32 = np.float32
PEERS = Path(__file__).parent / "peers" / "openvino"


@pytest.fixture(scope="module")
def ov() -> object:
    return pytest.importorskip("openvino", reason="OpenVINO cross-check")


def _decision_points() -> np.ndarray:
    v = np.sort(NF4.values.astype(F32))
    return ((v[:-1] + v[1:]) * F32(0.5)).astype(F32)


def inputs() -> np.ndarray:
    """Every float32 within 3000 ulp of each of the 15 float32 midpoints, 10^5 uniform values in [-1.2, 1.2],
    the entries themselves, and NaN/+-Inf/+-0/subnormal/huge values; odd length (a half-filled last byte)."""
    mids = _decision_points()
    near = (mids.view(np.int32)[:, None] + np.arange(-3000, 3001, dtype=np.int32)[None, :]).view(F32).ravel()
    rng = np.random.default_rng(26)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 1.0, -1.0,
                         1.0000001, -1.0000001, 2.0, -2.0], F32)
    return np.concatenate([near, rng.uniform(-1.2, 1.2, 100_001).astype(F32), NF4.values.astype(F32), specials])


def _unpack(raw: np.ndarray, n: int) -> np.ndarray:
    codes = np.empty(raw.size * 2, np.int64)
    codes[0::2], codes[1::2] = raw & 15, raw >> 4  # element 2i in the low nibble
    return codes[:n]


def constant_codes(ov: object, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, packed bytes) of an nf4 Constant made from float values."""
    c = ov.op.Constant(ov.Type.nf4, ov.Shape([x.size]), x.tolist())
    raw = np.frombuffer(c.get_data().tobytes(), np.uint8)
    return _unpack(raw, x.size), raw


def runtime_convert(ov: object, x: np.ndarray) -> np.ndarray:
    """Convert(f32 -> nf4) then Convert(nf4 -> f32), compiled for the CPU plugin."""
    from openvino import opset13 as ops

    p = ops.parameter([x.size], ov.Type.f32)
    model = ov.Model([ops.convert(ops.convert(p, ov.Type.nf4), ov.Type.f32)], [p], "nf4")
    return np.asarray(ov.Core().compile_model(model, "CPU")([x])[0])


def qref_codes(x: np.ndarray, **overrides: object) -> qref.QArray:
    sch = qref.scheme("nf4", profile="openvino", scale="static", static_scales=(1.0,), axis=None, **overrides)
    return sch.quantize(x)


def test_nf4_constant_is_the_openvino_decision(ov: object) -> None:
    x = inputs()
    got, raw = constant_codes(ov, x)
    q = qref_codes(x)
    assert not q.unspecified.any()
    bad = np.flatnonzero(got != q.codes.astype(np.int64))
    assert bad.size == 0, (x[bad[:5]], got[bad[:5]], q.codes[bad[:5]])
    assert x.size > 190_000
    assert np.array_equal(pack(q.codes, "nibble_low_first", bits=4), raw)  # OpenVINO's byte layout


def test_runtime_convert_on_cpu_is_the_same_decision_and_table(ov: object) -> None:
    x = inputs()
    y = runtime_convert(ov, x)
    q = qref_codes(x)
    want = NF4.values.astype(F32)[q.codes.astype(np.int64)]
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


def test_dequantize_table_is_the_nf4_table(ov: object) -> None:
    """nf4 -> f32 of every code is qref's NF4 table, bit for bit."""
    from openvino import opset13 as ops

    codes = np.arange(16, dtype=np.int64)
    c = ov.op.Constant(ov.Type.nf4, ov.Shape([16]), NF4.values.astype(F32).tolist())
    assert np.array_equal(constant_codes(ov, NF4.values.astype(F32))[0], codes)
    y = np.asarray(ov.Core().compile_model(ov.Model([ops.convert(c, ov.Type.f32)], [], "t"), "CPU")({})[0])
    assert np.array_equal(y.view(np.uint32), NF4.values.astype(F32).view(np.uint32))


def test_decimal_literal_midpoints_are_needed(ov: object) -> None:
    """With plain float32 midpoints qref would differ from OpenVINO exactly at the 4 decision points where the
    decimal literal rounds to the other float32 neighbour: the inputs 1 ulp around -0.848, 0.1203, 0.5017,
    0.8615."""
    x = inputs()
    got, _ = constant_codes(ov, x)
    q = qref_codes(x, midpoints="float32")
    bad = np.unique(x[np.flatnonzero(got != q.codes.astype(np.int64))])
    assert bad.size == 4
    mids = _decision_points()
    near = [int(np.abs(mids.view(np.int32).astype(np.int64) - int(b.view(np.int32))).min()) for b in bad]
    assert max(near) <= 1


@pytest.mark.parametrize("name", ["nncf_nf4_g32.npz", "nncf_nf4_g64.npz", "nncf_nf4_g128.npz",
                                  "nncf_nf4_g64_float16.npz"])
def test_nncf_peer_vectors(name: str) -> None:
    """NNCF 3.4 NF4 weights: a = max(absmax, 2^-23) per group of the last axis, codes of fl32(w / a), scales
    float16(a), decompressed fl32(fl16(entry) * fl16(a)) (uniform, planted-midpoint, zero, tiny and
    float16-overflowing groups; float32 weights, and float16 weights behind a Convert)."""
    manifest = json.loads((PEERS / "manifest.json").read_text())
    meta = manifest["files"][name]
    group = meta["group_size"]
    with np.load(PEERS / name, allow_pickle=False) as z:
        w = z["weights"].view(F32 if meta["dtype"] == "float32" else np.float16)
        codes, scales, dq = z["codes"], z["scales"].view(np.float16), z["dequantized"].view(F32)
    q = qref.scheme("nf4", profile="openvino", block_size=group).quantize(w)
    assert not q.unspecified.any()
    assert np.array_equal(q.codes.reshape(codes.shape).astype(np.int64), codes.astype(np.int64))
    got_s = np.asarray(q.scales, F32).reshape(scales.shape)
    assert np.array_equal(got_s.view(np.uint32), scales.astype(F32).view(np.uint32))
    with np.errstate(invalid="ignore"):
        v = q.dequantize(np.float32)
    assert np.array_equal(v.view(np.uint32), dq.view(np.uint32))
    assert codes.size == w.size > 30_000
    assert np.isinf(scales).any() or np.isinf(w).any()  # float16 overflow: of the scale, or of the weights
