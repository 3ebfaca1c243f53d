"""Peer vectors of TransformerEngine's per-tensor current-scaling reference (``ref_per_tensor_cs_cast``), on CPU.

    python scripts/peers/transformer_engine_current_scaling.py --src /path/to/TransformerEngine \\
        --out tests/peers/transformer_engine_current_scaling

``--src`` is a clean git checkout of github.com/NVIDIA/TransformerEngine (its commit is recorded).
``tests/pytorch/references/ref_per_tensor_cs.py`` and the ``quantize_scale_calc.py`` it imports are imported
unmodified from the checkout's ``tests/pytorch`` directory. They need torch, and two names of the CUDA package
``transformer_engine.pytorch`` (the ``DType`` enum and its map to torch dtypes), which cannot be installed here:
this script puts a module holding just those two names in ``sys.modules`` before the import. Each tensor is cast
with ``ref_per_tensor_cs_cast(x, fp8_dtype, return_transpose=False, force_pow_2_scales, amax_epsilon)`` for
E4M3 and E5M2, with and without power-of-two scales, and with an epsilon on the tiny tensors.

Inputs: the tensor designs of ``transformer_engine_blockwise.py`` (imported from the same folder, its own seed):
float32 and bfloat16 256 x 256 tensors of mixed kinds (normal, log-uniform, FP8 ties, boundaries; tiny, huge,
zeros, subnormal; one-hot, Student-t, an outlier), +-1 ulp, a 136 x 200 tensor, NaN and Inf tensors.
Outputs: FP8 codes (uint8) and the float32 bits of scale_inv. Nothing of TE is copied: only its outputs.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformer_engine_blockwise import design_tensors, torch_of

# (name, fp8 dtype, force_pow_2_scales, amax_epsilon, tensors it runs on: all, or a tag part)
CONFIGS = (
    ("e4m3", "e4m3", False, 0.0, ""),
    ("e5m2", "e5m2", False, 0.0, ""),
    ("e4m3_pow2", "e4m3", True, 0.0, ""),
    ("e5m2_pow2", "e5m2", True, 0.0, ""),
    ("e4m3_eps", "e4m3", False, 2.0**-100, "tiles_b"),
)


def _shim() -> None:
    """transformer_engine.pytorch's DType and TE_DType_To_Torch, the two names ref_per_tensor_cs imports."""
    import torch

    class DType(enum.Enum):
        kFloat8E4M3 = 7
        kFloat8E5M2 = 8

    te = types.ModuleType("transformer_engine")
    pt = types.ModuleType("transformer_engine.pytorch")
    const = types.ModuleType("transformer_engine.pytorch.constants")
    pt.DType = DType  # type: ignore[attr-defined]
    const.TE_DType_To_Torch = {DType.kFloat8E4M3: torch.float8_e4m3fn,  # type: ignore[attr-defined]
                               DType.kFloat8E5M2: torch.float8_e5m2}
    te.pytorch = pt  # type: ignore[attr-defined]
    pt.constants = const  # type: ignore[attr-defined]
    sys.modules.update({"transformer_engine": te, "transformer_engine.pytorch": pt,
                        "transformer_engine.pytorch.constants": const})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of NVIDIA/TransformerEngine")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True, check=True).stdout.strip():
        raise SystemExit(f"{src} has local changes; run the recorded code unmodified")
    import torch

    _shim()
    sys.path.insert(0, str(src / "tests" / "pytorch"))
    ref = importlib.import_module("references.ref_per_tensor_cs")
    dtypes = sys.modules["transformer_engine.pytorch"].DType  # type: ignore[attr-defined]
    qdt = {"e4m3": dtypes.kFloat8E4M3, "e5m2": dtypes.kFloat8E5M2}
    # one kind over the whole tensor as well: the per-tensor amax of tiny, subnormal, zero and huge tensors
    tensors = design_tensors(np.random.default_rng(a.seed), whole=("tiny", "subnormal", "zeros", "huge"))
    arrays: dict[str, np.ndarray] = {}
    for tag, xbits, dtype in tensors:
        x = torch_of(xbits, dtype)
        arrays[f"{tag}__x"] = xbits
        for name, fp8, pow2, eps, only in CONFIGS:
            if only not in tag:
                continue
            qx, sx, _, _ = ref.ref_per_tensor_cs_cast(x, qdt[fp8], return_transpose=False, force_pow_2_scales=pow2,
                                                      amax_epsilon=eps)
            arrays[f"{tag}__{name}__codes"] = qx.view(torch.uint8).numpy().copy()
            arrays[f"{tag}__{name}__scale_inv"] = sx.contiguous().view(torch.int32).numpy().view(np.uint32).copy()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "NVIDIA/TransformerEngine (pure-PyTorch per-tensor current-scaling reference)",
        "repository": "https://github.com/NVIDIA/TransformerEngine", "commit": commit,
        "entry": "tests/pytorch/references/ref_per_tensor_cs.py ref_per_tensor_cs_cast(x, fp8_dtype, "
                 "return_transpose=False, force_pow_2_scales, amax_epsilon) with transformer_engine.pytorch's "
                 "DType / TE_DType_To_Torch given by a shim (the CUDA package is not installable here)",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "device": "cpu",
        "seed": a.seed, "tensors": [t for t, _, _ in tensors],
        "shapes": {t: list(b.shape) for t, b, _ in tensors},
        "configs": [{"name": n, "quant_dtype": "float8_e4m3fn" if f == "e4m3" else "float8_e5m2",
                     "force_pow_2_scales": p, "amax_epsilon": e, "tensors": f"those with {o!r} in the name" if o
                     else "all"} for n, f, p, e, o in CONFIGS],
        "arrays": {"{tensor}__x": "input bits (float32: uint32, bfloat16: uint16)",
                   "{tensor}__{config}__codes": "FP8 codes (uint8), the input's shape",
                   "{tensor}__{config}__scale_inv": "float32 bits of scale_inv = 1 / scale, shape (1,)"},
        "sha256": digest, "generator": "scripts/peers/transformer_engine_current_scaling.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tensors)} tensors, {len(arrays)} arrays, {digest[:12]} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
