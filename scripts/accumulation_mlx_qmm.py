"""The float stage of MLX's CPU quantized_matmul (affine 4-bit weights) against candidate records
(docs/accumulation.md, "MLX quantized_matmul").

Usage: PYTHONPATH=.:scripts python scripts/accumulation_mlx_qmm.py > docs/accumulation/mlx_qmm_f32.txt
Weights W[k, n] = s[n, g] q[n, k] + b[n, g] with power-of-two scales s and biases b = -8 s (exact in float32), so
the float stage is D = x @ W: the script compares MLX's D with qref.mma records applied to (x, W) bit for bit.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

import qref.mma as qm

RECORDS = {
    "fma x1": qm.KernelAccumulation(),
    "mul+add x1": qm.KernelAccumulation(products="rounded"),
    "fma x4 pairwise": qm.KernelAccumulation(lanes=4, reduction="pairwise"),
    "fma x8 halving": qm.KernelAccumulation(lanes=8, reduction="halving"),
    "mul+add x8 halving": qm.KernelAccumulation(lanes=8, reduction="halving", products="rounded"),
    "fma x16 halving": qm.KernelAccumulation(lanes=16, reduction="halving"),
    "mul+add x1 blocks = group": None,
    "fma x1 blocks = group": None,
}


def qmm(x: np.ndarray, q: np.ndarray, s: np.ndarray, group: int) -> np.ndarray:
    """mx.quantized_matmul(x, w, scales, biases, transpose=True, group_size=group, bits=4) on the CPU."""
    N, K = q.shape
    words = (q.reshape(N, K // 8, 8).astype(np.uint32) << (4 * np.arange(8, dtype=np.uint32))).sum(-1)
    y = mx.quantized_matmul(mx.array(x), mx.array(words.astype(np.uint32)), mx.array(s), mx.array(-8 * s),
                            transpose=True, group_size=group, bits=4, stream=mx.cpu)
    return np.array(y, np.float32)


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"mlx {mx.__version__} quantized_matmul (affine, bits 4), CPU")
    for group in (32, 64):
        recs = {k: v for k, v in RECORDS.items() if v is not None}
        recs["mul+add x1 blocks = group"] = qm.KernelAccumulation(products="rounded", block=group)
        recs["fma x1 blocks = group"] = qm.KernelAccumulation(block=group)
        print(f"\ngroup {group}: outputs differing from each record (of M x N)")
        print("M x N x K | " + " | ".join(recs))
        for M, N, K in ((1, 64, 256), (2, 64, 256), (16, 64, 256), (64, 64, 1024), (64, 32, 512)):
            x = rng.standard_normal((M, K)).astype(np.float32)
            q = rng.integers(0, 16, (N, K))
            s = np.exp2(rng.integers(-6, -2, (N, K // group))).astype(np.float32)
            W = (np.repeat(s, group, axis=1) * (q - 8)).T.astype(np.float32)
            D = qmm(x, q, s, group)
            row = [int((qm.matmul(x, W, instruction=qm.kernel(r)).view(np.uint32) != D.view(np.uint32)).sum())
                   for r in recs.values()]
            print(f"{M} x {N} x {K} | " + " | ".join(map(str, row)))


if __name__ == "__main__":
    main()
