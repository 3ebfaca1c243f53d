"""Mismatch counts of candidate records against a real matmul across shapes (docs/accumulation.md evidence).

Usage: PYTHONPATH=.:scripts python scripts/accumulation_shapes.py TARGET > docs/accumulation/shapes-TARGET.txt
Prints, per (M, N, K) of seeded standard-normal float32 operands, how many outputs of each record differ from
the library's (bits; 0 = the record reproduces every output of that shape)."""

from __future__ import annotations

import sys

import matmul_targets as T
import numpy as np

import qref.mma as qm

RECORDS = {
    "fma x1": qm.KernelAccumulation(),
    "mul+add x1": qm.KernelAccumulation(products="rounded"),
    "fma x4 pairwise": qm.KernelAccumulation(lanes=4, reduction="pairwise"),
    "fma x4 pairwise ftz": qm.KernelAccumulation(lanes=4, reduction="pairwise", subnormals="flush"),
    "fma x8 halving": qm.KernelAccumulation(lanes=8, reduction="halving"),
    "fma x16 pairwise": qm.KernelAccumulation(lanes=16, reduction="pairwise"),
    "fma x1 blocks 448 (halved ceil)": qm.KernelAccumulation(block=448, block_split="halve_remainder"),
    "fma x1 blocks 192 (short halved)": qm.KernelAccumulation(block=192, block_split="halve_short"),
    "fma x1 blocks 256": qm.KernelAccumulation(block=256),
    "fma x1 blocks 1024": qm.KernelAccumulation(block=1024),
}
SHAPES = [(16, 16, 64), (64, 64, 37), (64, 64, 200), (64, 64, 300), (64, 64, 1000), (200, 300, 64), (256, 256, 512)]


def main(target: str) -> None:
    fn = getattr(T, target)
    rng = np.random.default_rng(0)
    print(f"target {target}: outputs differing from each record (of M x N)")
    print("M x N x K | " + " | ".join(RECORDS))
    for M, N, K in SHAPES:
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        D = np.asarray(fn(A, B))
        row = [int((qm.matmul(A, B, instruction=qm.kernel(r)).view(np.uint32) != D.view(np.uint32)).sum())
               for r in RECORDS.values()]
        print(f"{M} x {N} x {K} | " + " | ".join(map(str, row)))


if __name__ == "__main__":
    main(sys.argv[1])
