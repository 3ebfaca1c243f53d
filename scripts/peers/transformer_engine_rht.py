"""Peer vectors of TransformerEngine's NVFP4 random Hadamard transform (RHT), run on CPU (transforms.md §6).

    python scripts/peers/transformer_engine_rht.py --src /path/to/TransformerEngine \
        --out tests/peers/transformer_engine_rht

``--src`` is a clean git checkout of github.com/NVIDIA/TransformerEngine (its commit is recorded). The reference
``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py`` is loaded unmodified, with the stand-ins of
``scripts/peers/transformer_engine.py`` (whose input designs this script reuses), and run with torch on CPU:

- ``NVFP4QuantizerRef(..., quant_tile_shape=(1, 16), with_rht=True)._apply_rht(x.T.contiguous())``: the
  transformed tensor, with the default ``with_random_sign_mask=True`` and with ``False``;
- ``NVFP4QuantizerRef(dtype=E2M1, rowwise=True, columnwise=True, quant_tile_shape=(1, 16), with_rht=True)
  .quantize(x)``: the columnwise (x.T, after the RHT) E2M1 codes, E4M3 scale bytes and both global amaxes;
- ``get_wgrad_sign_vector()`` and ``_build_hadamard_matrix(16, cpu, float32, True)``: the signs and the matrix.

The transform is ``x_mat @ (H * (1 / sqrt(16)))`` in the input dtype, so its rounding is the one of torch's CPU
matmul kernel (MKL sgemm for float32, oneDNN for bfloat16): the manifest records the torch build and the CPU
flags it ran with. Nothing of TE is copied: only the outputs its code produced.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _base() -> Any:
    """scripts/peers/transformer_engine.py (input designs, bit helpers, the module loader)."""
    spec = importlib.util.spec_from_file_location("qref_peer_transformer_engine", HERE / "transformer_engine.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    return sorted(f for f in flags if f.startswith(("avx", "fma", "amx")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of NVIDIA/TransformerEngine")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--rows", type=int, default=64, help="rows per tensor (a multiple of 16)")
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True, check=True).stdout.strip():
        raise SystemExit(f"{src} has local changes; run the recorded code unmodified")
    import torch

    base = _base()
    ref = base._stub_modules(src)
    e2m1 = ref.reference_utils.Fp4Formats.E2M1
    rng = np.random.default_rng(a.seed)
    arrays: dict[str, np.ndarray] = {
        "signs": ref.get_wgrad_sign_vector().numpy().astype(np.int8),
        "matrix": ref.NVFP4QuantizerRef._build_hadamard_matrix(16, torch.device("cpu"), torch.float32, True)
        .numpy().astype(np.int8),
        "matrix_nosign": ref.NVFP4QuantizerRef._build_hadamard_matrix(16, torch.device("cpu"), torch.float32, False)
        .numpy().astype(np.int8),
    }
    tensors = []
    for dtype in ("float32", "bfloat16"):
        for kind in base.KINDS:
            for nudge in (False, True):
                v = base.design(rng, a.rows, 128, kind)
                tensors.append((f"{dtype}__{kind}__{int(nudge)}", base.to_bits(v, dtype, rng, nudge), dtype))
        for special in ("nan", "inf"):
            v = rng.standard_normal((a.rows, 128))
            v[3, 5] = np.nan if special == "nan" else np.inf
            v[7, 100] = -np.inf if special == "inf" else 1.0
            tensors.append((f"{dtype}__{special}__0", base.to_bits(v, dtype, rng, False), dtype))

    def bits(t: Any) -> np.ndarray:
        return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16).numpy().view(
            np.uint32 if t.dtype == torch.float32 else np.uint16).copy()

    for tag, xbits, dtype in tensors:
        x = base.torch_of(xbits, dtype)
        arrays[f"{tag}__x"] = xbits
        for mask, suffix in ((True, ""), (False, "_nosign")):
            q = ref.NVFP4QuantizerRef(dtype=e2m1, quant_tile_shape=(1, 16), with_rht=True,
                                      with_random_sign_mask=mask)
            arrays[f"{tag}__rht_t{suffix}"] = bits(q._apply_rht(x.t().contiguous()))
        qz = ref.NVFP4QuantizerRef(dtype=e2m1, rowwise=True, columnwise=True, quant_tile_shape=(1, 16),
                                   with_rht=True).quantize(x)
        arrays[f"{tag}__nvfp4_codes_t"] = base.unpack_fp4(qz.data_t)
        arrays[f"{tag}__nvfp4_scales_t"] = qz.scale_t.view(torch.uint8).numpy().copy()
        arrays[f"{tag}__nvfp4_global_amax_col"] = qz.global_amax_col.numpy().view(np.uint32).copy()
        arrays[f"{tag}__nvfp4_global_amax_row"] = qz.global_amax_row.numpy().view(np.uint32).copy()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "NVIDIA/TransformerEngine (pure-PyTorch NVFP4 reference, random Hadamard transform)",
        "repository": "https://github.com/NVIDIA/TransformerEngine", "commit": commit,
        "rht_entry": "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py NVFP4QuantizerRef(dtype=E2M1, "
                     "quant_tile_shape=(1, 16), with_rht=True, with_random_sign_mask=True|False)._apply_rht(x.T)",
        "nvfp4_entry": "NVFP4QuantizerRef(dtype=E2M1, rowwise=True, columnwise=True, quant_tile_shape=(1, 16), "
                       "with_rht=True).quantize(x): columnwise outputs (the RHT applies to x.T only)",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "device": "cpu",
        "torch_blas": " ".join(line.strip() for line in torch.__config__.show().splitlines()
                               if "Math Kernel Library" in line or "MKL-DNN" in line),
        "cpu": {"machine": platform.machine(), "flags": _cpu_flags(),
                "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "seed": a.seed, "tensors": [t for t, _, _ in tensors], "shape": [a.rows, 128],
        "arrays": {"signs": "get_wgrad_sign_vector() as int8 (the diagonal of D)",
                   "matrix[_nosign]": "_build_hadamard_matrix(16, cpu, float32, True|False) as int8 (diag(s) H)",
                   "{tensor}__x": "input bits (float32: uint32, bfloat16: uint16), (rows, 128)",
                   "{tensor}__rht_t[_nosign]": "bits of _apply_rht(x.T), (128, rows), input dtype",
                   "{tensor}__nvfp4_codes_t": "E2M1 codes of the RHT'd x.T, one per element, (128, rows)",
                   "{tensor}__nvfp4_scales_t": "E4M3 scale bytes per 16-element block of the RHT'd x.T",
                   "{tensor}__nvfp4_global_amax_col|row": "the reference's global amaxes (float32 bits)"},
        "sha256": digest, "generator": "scripts/peers/transformer_engine_rht.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tensors)} tensors, {digest[:12]} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
