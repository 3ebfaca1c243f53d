"""Generate peer-check vectors from PyTorch's own quantization test cases (torch 2.13 CPU) into
tests/data/torch_quant_cases.json; tests/test_torch_quant_peer.py runs them under qref's torch profiles.

The case parameters are those of PyTorch's tests (read at pytorch/pytorch commit 0257d565beb3, the stored copy of
test/quantization/core/test_workflow_ops.py and test_quantized_tensor.py; this script is its own generator, no
upstream code):

- fake_quantize_per_tensor_affine "cachemask": X = randn(4, 8) and randn(4, 16)[:, ::2], qint8 / quint8, scale and
  zero point from MinMaxObserver(dtype) on 0.75 X (so that some values clip), quant_min / quant_max the observer's;
- fake_quantize_per_tensor_affine "half precision numerics": scale 0.1, zero point 0, [0, 255], X = randn(5, 5)
  through float16, X = 2^15 + 0.01, and scale 10 with X = 2^-24 (float32 here: the targets are float32);
- fake_quantize_per_channel_affine "cachemask": X = randn(4, 8), axis 1, PerChannelMinMaxObserver(1, dtype) on
  0.75 X; "half precision numerics": scale = |randn(5)|, zero point = int(randn(5)), axis 1, [0, 255], X = randn(4, 5);
- quantize_per_tensor / dequantize "qtensor quant dequant": r = rand(3, 2, 4, 5) * 4 - 2, scale 0.2, zero point 2,
  quint8 / qint8 / qint32;
- quantized_decomposed.choose_qparams.tensor + quantize_per_tensor + dequantize_per_tensor (the PT2E decomposed
  round trip): X = randn(5, 10), int8 [-128, 127] and uint8 [0, 255], eps = float32 eps.

Vectors: float32 arrays as hex words of their bits, codes as ints. Run:
``PYTHONPATH=$PWD python scripts/gen_torch_quant_cases.py`` (seeded: the same file each run on torch 2.13.0).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # (registers torch.ops.quantized_decomposed)

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "torch_quant_cases.json"


def hexf(a: Any) -> list[str]:
    """float32 values as hex words of their bits."""
    v = np.ascontiguousarray(np.asarray(a, np.float32)).reshape(-1).view(np.uint32)
    return [f"{int(w):08x}" for w in v]


def t32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).contiguous().numpy()


def fake_per_tensor(cases: list[dict[str, Any]], name: str, x: torch.Tensor, s: float, z: int, lo: int, hi: int
                    ) -> None:
    x = x.contiguous()
    xg = x.clone().requires_grad_(True)
    y = torch.fake_quantize_per_tensor_affine(xg, s, z, lo, hi)
    y.backward(torch.ones_like(xg))
    cases.append({"name": name, "op": "fake_quantize_per_tensor_affine", "shape": list(x.shape),
                  "x": hexf(t32(x)), "scale": [float(s)], "zero_point": [int(z)], "axis": None,
                  "quant_min": lo, "quant_max": hi, "y": hexf(t32(y)), "grad": hexf(t32(xg.grad))})


def fake_per_channel(cases: list[dict[str, Any]], name: str, x: torch.Tensor, s: torch.Tensor, z: torch.Tensor,
                     axis: int, lo: int, hi: int) -> None:
    x = x.contiguous()
    y = torch.fake_quantize_per_channel_affine(x, s, z, axis, lo, hi)
    cases.append({"name": name, "op": "fake_quantize_per_channel_affine", "shape": list(x.shape),
                  "x": hexf(t32(x)), "scale": hexf(s.to(torch.float32)), "zero_point": [int(v) for v in z],
                  "axis": axis, "quant_min": lo, "quant_max": hi, "y": hexf(t32(y))})


def main() -> None:
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cases: list[dict[str, Any]] = []
    for dtype in (torch.qint8, torch.quint8):
        for k, x in enumerate((torch.randn(4, 8), torch.randn(4, 16)[:, ::2])):
            obs = torch.ao.quantization.MinMaxObserver(dtype=dtype)
            obs(x * 0.75)
            s, z = obs.calculate_qparams()
            fake_per_tensor(cases, f"fake_per_tensor_cachemask/{dtype}/{k}", x, float(s), int(z), obs.quant_min,
                            obs.quant_max)
            obc = torch.ao.quantization.PerChannelMinMaxObserver(1, dtype=dtype)
            obc(x * 0.75)
            sc, zc = obc.calculate_qparams()
            fake_per_channel(cases, f"fake_per_channel_cachemask/{dtype}/{k}", x, sc.to(torch.float32),
                             zc.to(torch.int32), 1, obc.quant_min, obc.quant_max)
    for i in range(20):
        fake_per_tensor(cases, f"fake_per_tensor_half_numerics/{i}", torch.randn(5, 5).to(torch.float16).float(),
                        0.1, 0, 0, 255)
    fake_per_tensor(cases, "fake_per_tensor_half_numerics/overflow", torch.tensor([2.0**15 + 0.01]), 0.1, 0, 0, 255)
    fake_per_tensor(cases, "fake_per_tensor_half_numerics/underflow", torch.tensor([2.0**-24]), 10.0, 0, 0, 255)
    scale = torch.randn(5).abs()
    zero = torch.randn(5).abs().to(torch.int32)  # upstream: int(randn(5)); a negative one is outside [0, 255]
    for i in range(20):
        fake_per_channel(cases, f"fake_per_channel_half_numerics/{i}", torch.randn(4, 5).to(torch.float16).float(),
                         scale, zero, 1, 0, 255)
    r = torch.rand(3, 2, 4, 5, dtype=torch.float32) * 4 - 2
    for dtype in (torch.quint8, torch.qint8, torch.qint32):
        q = torch.quantize_per_tensor(r, 0.2, 2, dtype)
        cases.append({"name": f"qtensor_quant_dequant/{dtype}", "op": "quantize_per_tensor",
                      "dtype": str(dtype).split(".")[1], "shape": list(r.shape), "x": hexf(r), "scale": [0.2],
                      "zero_point": [2], "codes": [int(v) for v in q.int_repr().reshape(-1)],
                      "y": hexf(q.dequantize())})
    qd = torch.ops.quantized_decomposed
    for dtype, lo, hi in ((torch.int8, -128, 127), (torch.uint8, 0, 255)):
        for i in range(5):
            x = torch.randn(5, 10)
            s, z = qd.choose_qparams.tensor(x, lo, hi, torch.finfo(torch.float32).eps, dtype)
            c = qd.quantize_per_tensor(x, float(s), int(z), lo, hi, dtype)
            y = qd.dequantize_per_tensor(c, float(s), int(z), lo, hi, dtype)
            cases.append({"name": f"decomposed_round_trip/{dtype}/{i}", "op": "decomposed", "dtype": str(dtype)
                          .split(".")[1], "shape": list(x.shape), "x": hexf(x), "scale": hexf(s.to(torch.float32)),
                          "scale64": [float(s)], "zero_point": [int(z)], "quant_min": lo, "quant_max": hi,
                          "codes": [int(v) for v in c.reshape(-1)], "y": hexf(y)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"torch": torch.__version__, "cases": cases}, indent=0) + "\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()
