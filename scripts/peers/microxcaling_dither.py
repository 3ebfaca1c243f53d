"""Peer vectors of microxcaling's ``round="dither"``: its MX quantizer run on CPU with known uniforms (block.md §13.3).

    python scripts/peers/microxcaling_dither.py --src /path/to/microxcaling --out tests/peers/microxcaling_dither

microxcaling rounds with ``sign(A) * floor(|A| + torch.rand_like(A))`` (``mx/elemwise_ops.py``
``_round_mantissa``). ``torch.rand_like`` returns k * 2^-N with N = 24 (float32), 8 (bfloat16), 11 (float16)
(ATen's ``uniform_real_distribution``); this script replaces it, for the one call a quantization makes, by
R * 2^-N with R drawn here (numpy, seeded) and stored beside the input, so the vectors hold every bit that
decided the result. Inputs are the block designs of ``microxcaling.py`` (the same file, imported), blocks of 32
along the last axis (rows of 64, so microxcaling's internal layout is the input's C order; the script asserts the
shape). Everything is stored as unsigned bit patterns in one compressed .npz; ``manifest.json`` records the
commit, torch version, options and the npz's sha256. Nothing of microxcaling is copied: only its outputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from microxcaling import DTYPES, FORMATS, TORCH_DTYPES, K, clean_commit, design, run_mx

DITHER_BITS = {"float32": 24, "bfloat16": 8, "float16": 11}  # torch.rand's random bits per dtype


def run_dither(bits: np.ndarray, dtype: str, fmt: str, flush: bool, r: np.ndarray) -> np.ndarray:
    """quantize_mx_op(round="dither") on ``bits`` (viewed as ``dtype``) along the last axis, with the uniforms
    R * 2^-N in place of torch.rand_like's (microxcaling.run_mx does the rest)."""
    import mx.elemwise_ops as ew
    import torch

    n = DITHER_BITS[dtype]
    want_dtype = torch.float32 if dtype == "float32" else TORCH_DTYPES[dtype]
    calls = []
    real = torch.rand_like

    def rand_like(a: torch.Tensor, **kw: object) -> torch.Tensor:
        if a.numel() != r.size or a.dtype != want_dtype:
            raise SystemExit(f"unexpected dither tensor {tuple(a.shape)} {a.dtype} for {r.shape} {dtype}")
        calls.append(a.shape)
        u = torch.from_numpy(np.ldexp(r.astype(np.float64), -n).reshape(a.shape))  # exact in dtype: n bits
        return u.to(a.dtype)

    ew.torch.rand_like = rand_like
    try:
        y = run_mx(bits, dtype, fmt, "dither", flush, -1)
    finally:
        ew.torch.rand_like = real
    if len(calls) != 1:
        raise SystemExit(f"expected one torch.rand_like call, saw {len(calls)}")
    return y


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of microsoft/microxcaling")
    ap.add_argument("--out", required=True, help="output directory (vectors.npz + manifest.json)")
    ap.add_argument("--seed", type=int, default=20261203)
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    commit = clean_commit(src)
    sys.path.insert(0, str(src))
    import torch

    rng = np.random.default_rng(a.seed)
    arrays: dict[str, np.ndarray] = {}
    configs = []
    for i, dtype in enumerate(DTYPES):
        x, _ = design(dtype, a.seed + i, False)
        x1 = x.reshape(-1, 2 * K)
        arrays[f"{dtype}__x"] = x1
        for fmt in FORMATS:
            for flush in (False, True):
                r = rng.integers(0, 1 << DITHER_BITS[dtype], size=x1.shape, dtype=np.uint32)
                tag = f"{dtype}__{fmt}__{int(flush)}"
                arrays[f"{tag}__r"] = r
                arrays[f"{tag}__y"] = run_dither(x1, dtype, fmt, flush, r)
                configs.append({"dtype": dtype, "elem_format": fmt, "mx_flush_fp32_subnorms": flush})
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "microsoft/microxcaling", "repository": "https://github.com/microsoft/microxcaling",
        "commit": commit, "entry": "mx.mx_ops.quantize_mx_op(A, MxSpecs(), elem_format, block_size=32, "
                                   "axes=[-1], round='dither') with custom_cuda=False (PyTorch on CPU), "
                                   "torch.rand_like replaced by R * 2^-N",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0],
        "seed": a.seed, "block_size": K, "formats": list(FORMATS), "dtypes": list(DTYPES),
        "dither_bits": DITHER_BITS,
        "arrays": {"{dtype}__x": "input bits (rows of 64: two blocks per row, blocks along axis -1)",
                   "{dtype}__{fmt}__{flush}__r": "R (uint32, the input's shape): the uniform is R * 2^-N",
                   "{dtype}__{fmt}__{flush}__y": "output bits of quantize_mx_op"},
        "configs": len(configs), "sha256": digest,
        "generator": "scripts/peers/microxcaling_dither.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    n = sum(v.size for k, v in arrays.items() if k.endswith("__y"))
    print(f"{len(configs)} configurations, {n} output elements, {digest[:12]} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
