"""qref.mma against mmasim 2.1.1: GEMM throughput of the same instructions on the same operands, in one run.

    python benchmarks/mma.py                     # the table (M = N = 64, K = 256 by default)
    python benchmarks/mma.py --m 256 --n 256 --k 1024 --repeats 5
    python benchmarks/mma.py --only Hopper       # rows whose instruction name contains "Hopper"
    python benchmarks/mma.py --verify-all        # also: every one of the 4,999 instructions vs mmasim (mma.md §8)

Each row computes D = A @ B chained through C over K in the instruction's K steps (mma.md §7 C1): qref with
``qref.mma.matmul``, mmasim with its instruction object called once per K step on the whole (M, N) output (its
own fastest use: mmasim's ``__call__`` takes any M and N). Operands are seeded random values (bf16 / f16 / fp8 /
fp4 / tf32 / f64 as the instruction reads them; block scales near 1). Before timing both results are compared as
unsigned integers ("same"). numpy runs qref on one thread; ``--threads`` (default 1) sets PyTorch's intra-op
threads for mmasim, so the default compares one core with one core. Times are the best of ``--repeats``
alternating runs (wall clock; the machine may be shared: rerun before quoting); MMAC/s = million
multiply-accumulates (M N K) per second; ratio = qref / mmasim (issue 16's target: >= 1). No assertion is made
on the timings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import qref.mma as qm

ROWS = [
    "Hopper/wgmma/m64n8k32.f32.e4m3.e4m3",
    "Hopper/wgmma/m64n8k16.f32.bf16.bf16",
    "Ampere/mma/m16n8k16.f32.f16.f16.f32",
    "Ampere/mma/m16n8k8.f32.tf32.tf32.f32",
    "Ada Lovelace/mma/m16n8k32.f32.e4m3.e4m3.f32",
    "Blackwell/tcgen05.mma/m128n8k32.kind::f8f6f4.f32.e2m1.e2m1",
    "RTX Blackwell/mma.block_scale/m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0",
    "Blackwell/tcgen05.mma.block_scale/m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
    "CDNA3/mfma/f32_16x16x32_fp8_fp8",
    "CDNA3/mfma/f32_16x16x16_bf16",
    "CDNA2/mfma/f32_16x16x16bf16_1k",
    "CDNA1/mfma/f32_16x16x16f16",
    "CDNA3/mfma/f32_16x16x4_f32",
    "Hopper/mma/m16n8k4.f64.f64.f64.f64",
]


def _operands(ins: qm.Instruction, M: int, N: int, K: int, rng: np.random.Generator) -> tuple[Any, ...]:
    import test_mma_oracle as O

    A = O.finite(ins.a_format, rng.standard_normal((M, K)))
    B = O.finite(ins.b_format, rng.standard_normal((K, N)))
    sa = sb = None
    if ins.scaled:
        assert ins.block_size is not None and ins.scale_format is not None
        nb = K // ins.block_size
        sa = O.finite(ins.scale_format, np.exp2(rng.integers(-2, 3, size=(M, nb)).astype(np.float64)))
        sb = O.finite(ins.scale_format, np.exp2(rng.integers(-2, 3, size=(nb, N)).astype(np.float64)))
    return A, B, sa, sb


def _mmasim_gemm(ins: qm.Instruction, op: Any, tA: list[Any], tB: list[Any], tsa: list[Any], tsb: list[Any],
                 M: int, N: int) -> Any:
    import torch

    d = torch.zeros((M, N), dtype=torch.float64 if ins.d_format == "float64" else torch.float32)
    for j in range(len(tA)):
        d = op(tA[j], tB[j], d, tsa[j], tsb[j]) if ins.scaled else op(tA[j], tB[j], d)
    return d


def _steps(ins: qm.Instruction, A: np.ndarray, B: np.ndarray, sa: np.ndarray | None, sb: np.ndarray | None
           ) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """mmasim's operands per K step, converted once outside the timing (packing of mxf4 kinds included)."""
    import test_mma_oracle as O

    k, blk = ins.k, ins.block_size or ins.k
    pk = O.packed(ins)
    tA, tB, tsa, tsb = [], [], [], []
    for s in range(0, A.shape[1], k):
        tA.append(O.to_torch(A[:, s:s + k], ins.a_format, pk))
        b = B[s:s + k]
        tB.append(O.to_torch(np.ascontiguousarray(b.T), ins.b_format, True).T if pk else O.to_torch(b, ins.b_format))
        if ins.scaled:
            tsa.append(O.to_torch(sa[:, s // blk:(s + k) // blk], ins.scale_format))
            tsb.append(O.to_torch(sb[s // blk:(s + k) // blk], ins.scale_format))
    return tA, tB, tsa, tsb


def run_row(name: str, M: int, N: int, K: int, repeats: int) -> dict[str, Any]:
    import test_mma_oracle as O

    ins = qm.gemm.resolve(name)
    rng = np.random.default_rng(0)
    Kr = K - K % ins.k
    A, B, sa, sb = _operands(ins, M, N, Kr, rng)
    op = O.oracle(ins)
    steps = _steps(ins, A, B, sa, sb)
    q = qm.matmul(A, B, instruction=ins, scale_a=sa, scale_b=sb)
    o = O.from_torch(_mmasim_gemm(ins, op, *steps, M, N))
    same = bool((O.bits(q) == o).all())
    tq = to = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        qm.matmul(A, B, instruction=ins, scale_a=sa, scale_b=sb)
        tq = min(tq, time.perf_counter() - t)
        t = time.perf_counter()
        _mmasim_gemm(ins, op, *steps, M, N)
        to = min(to, time.perf_counter() - t)
    macs = M * N * Kr
    return {"instruction": name, "family": ins.arithmetic.variant, "M": M, "N": N, "K": Kr,
            "qref_mmac_s": macs / tq / 1e6, "mmasim_mmac_s": macs / to / 1e6, "ratio": to / tq, "same": same}


def verify_all() -> dict[str, Any]:
    """Every instruction's outputs vs its own mmasim object: the 9 patterns of tests/test_mma_oracle.py x 4 rows."""
    import test_mma_oracle as O

    t0, total, bad = time.perf_counter(), 0, []
    for idx, ins in enumerate(qm.instructions()):
        rng = np.random.default_rng(10_000 + idx)
        parts = [c for _, c in O.cases(ins, rng, 4)]
        cat = [np.concatenate([c[j] for c in parts]) if parts[0][j] is not None else None for j in range(5)]
        got, exp = O.bits(ins.dot(*cat)), O.run_oracle_dot(ins, *cat)
        total += got.size
        if (got != exp).any():
            bad.append((ins.name, int((got != exp).sum())))
    return {"instructions": len(qm.instructions()), "outputs": total, "mismatching": bad,
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--verify-all", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads for mmasim (default 1)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(args.threads)
    print(f"M = {args.m}, N = {args.n}, K = {args.k}; mmasim on {torch.get_num_threads()} PyTorch thread(s)")
    rows = []
    print(f"{'instruction':<82} {'family':<11} {'qref MMAC/s':>11} {'mmasim':>9} {'ratio':>7} same")
    for name in ROWS:
        if args.only and args.only not in name:
            continue
        r = run_row(name, args.m, args.n, args.k, args.repeats)
        rows.append(r)
        print(f"{name:<82} {r['family']:<11} {r['qref_mmac_s']:>11.1f} {r['mmasim_mmac_s']:>9.1f} "
              f"{r['ratio']:>6.1f}x {'yes' if r['same'] else 'NO'}")
    out: dict[str, Any] = {"rows": rows}
    if args.verify_all:
        out["verify_all"] = v = verify_all()
        print(f"verify-all: {v['instructions']} instructions, {v['outputs']} outputs, "
              f"{len(v['mismatching'])} mismatching, {v['seconds']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return rows


if __name__ == "__main__":
    main()
