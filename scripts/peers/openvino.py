"""Peer vectors for qref's ``openvino`` lookup profile: NF4 weights as NNCF writes them for OpenVINO.

Run in an environment with nncf and openvino (an oracle environment: nncf is not in qref's lock), e.g.

    pip install --target /tmp/nncf --no-deps nncf==3.4.0 ...   # the list: manifest 'oracle_environment'
    PYTHONPATH=/tmp/nncf .venv/bin/python scripts/peers/openvino.py tests/peers/openvino

For each group size, a float32 weight matrix (for group size 64 also a float16 one; rows spanning 10^-4..10^2, half
of the elements planted exactly on absmax * the float32 NF4 midpoints, plus all-zero, tiny, subnormal and
float16-overflowing rows) is compressed by ``nncf.compress_weights(mode=NF4, group_size=G, ratio=1,
all_layers=True)``. Saved per file (npz, no object arrays): the weights (float32 or float16 bits), the nf4 codes
(unpacked, uint8), the float16 scales (bits) and the decompressed weights computed by the CPU plugin (float32 bits),
with a JSON manifest of versions and inputs.
"""

from __future__ import annotations

import json
import logging
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

# this file is named like the package it drives: keep its own folder off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROWS, COLS = 96, 384
GROUPS = (32, 64, 128)
FLOAT16_GROUPS = (64,)  # float16 weights (a Constant f16 -> Convert f32 decompression pattern)
SEED = 2026


def nf4_midpoints() -> np.ndarray:
    """The float32 midpoints of the sorted NF4 entries (bitsandbytes' float32 table, the same in OpenVINO)."""
    entries = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                        -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                        0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                        0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)
    return ((entries[:-1] + entries[1:]) * np.float32(0.5)).astype(np.float32)


def weights(group: int, rng: np.random.Generator) -> np.ndarray:
    w = (rng.standard_normal((ROWS, COLS)) * 10.0 ** rng.uniform(-4, 2, (ROWS, 1))).astype(np.float32)
    g = w.reshape(ROWS, COLS // group, group)
    amax = np.abs(g).max(-1, keepdims=True)
    mids = nf4_midpoints()
    planted = (mids[rng.integers(0, 15, g.shape)] * amax).astype(np.float32)
    mask = (rng.random(g.shape) < 0.5) & (np.abs(planted) < amax)
    mask[..., 0] = False  # keep each group's absmax element
    w = np.where(mask, planted, g).reshape(ROWS, COLS).astype(np.float32)
    w[0] = 0.0                                                  # all-zero groups
    w[1] = (rng.standard_normal(COLS) * 1e-8).astype(np.float32)  # absmax below 2^-23: guarded
    w[2] = (rng.standard_normal(COLS) * 1e5).astype(np.float32)   # float16 scale overflows to Inf
    w[3] = (rng.standard_normal(COLS) * 1e-5).astype(np.float32)  # float16-subnormal scales
    w[4] = np.float32(1e-45)                                    # float32-subnormal weights
    w[5, :group] = 0.0                                          # one zero group in a normal row
    return w


def compress(w: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes uint8 (rows, groups, group), float16 scales (rows, groups, 1), CPU-decompressed float32 weights)."""
    import nncf
    import openvino as ov
    from openvino import opset13 as ops

    p = ops.parameter([1, w.shape[1]], ov.Type.f32, name="x")
    wt = ops.constant(w) if w.dtype == np.float32 else ops.convert(ops.constant(w), ov.Type.f32)
    model = ov.Model([ops.matmul(p, wt, transpose_a=False, transpose_b=True)], [p], "m")
    cm = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.NF4, group_size=group, ratio=1.0,
                               all_layers=True)
    codes = scale = dq = None
    for op in cm.get_ordered_ops():
        if op.get_type_name() == "Constant" and op.get_output_element_type(0) == ov.Type.nf4:
            raw = np.frombuffer(op.get_data().tobytes(), np.uint8)
            c = np.empty(raw.size * 2, np.uint8)
            c[0::2], c[1::2] = raw & 15, raw >> 4  # element 2i in the low nibble
            codes = c[: w.size].reshape(w.shape[0], -1, group)
        elif op.get_type_name() == "Constant" and op.get_friendly_name().endswith("/scale"):
            scale = np.array(op.get_data()).astype(np.float16)
        elif op.get_type_name() == "Convert" and op.get_output_element_type(0) == ov.Type.f32:
            dq = op
    assert codes is not None and scale is not None and dq is not None
    out = ov.Core().compile_model(ov.Model([dq.output(0)], [], "w"), "CPU")({})[0]
    return codes, scale, np.asarray(out, dtype=np.float32).reshape(w.shape)


def main(out_dir: str) -> None:
    import nncf

    nncf.set_log_level(logging.ERROR)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    files = {}
    for dtype, groups in (("float32", GROUPS), ("float16", FLOAT16_GROUPS)):
        for g in groups:
            w = weights(g, rng)
            with np.errstate(over="ignore", invalid="ignore"):
                if dtype == "float16":
                    w = w.astype(np.float16)
                codes, scale, dq = compress(w, g)
            name = f"nncf_nf4_g{g}.npz" if dtype == "float32" else f"nncf_nf4_g{g}_{dtype}.npz"
            bits = w.view(np.uint32 if dtype == "float32" else np.uint16)
            np.savez_compressed(out / name, weights=bits, codes=codes, scales=scale.view(np.uint16),
                                dequantized=dq.view(np.uint32))
            files[name] = {"group_size": g, "dtype": dtype, "shape": [ROWS, COLS], "codes_shape": list(codes.shape),
                           "scales_shape": list(scale.shape)}
    manifest = {
        "producer": "scripts/peers/openvino.py",
        "versions": {p: version(p) for p in ("nncf", "openvino", "numpy")},
        "call": "nncf.compress_weights(model, mode=NF4, group_size=G, ratio=1.0, all_layers=True) on a MatMul "
                "with a float32 constant weight (rows x cols, transpose_b); decompressed weights: the float32 "
                "Convert of the compressed subgraph compiled for the CPU plugin",
        "oracle_environment": "qref's .venv plus pip install --target DIR --no-deps nncf==3.4.0 joblib==1.6.0 "
                              "narwhals==2.29.0 pydot==4.0.1 safetensors==0.8.0 scikit-learn==1.9.1 "
                              "tabulate==0.10.0 threadpoolctl==3.8.0; PYTHONPATH=DIR",
        "seed": SEED,
        "arrays": {"weights": "float32 bits (uint32), or float16 bits (uint16) for dtype float16",
                   "codes": "nf4 codes, unpacked (uint8), (rows, groups, G)",
                   "scales": "float16 bits (uint16), (rows, groups, 1)",
                   "dequantized": "float32 bits (uint32), (rows, cols)"},
        "files": files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/peers/openvino")
