"""Bit-accurate models of matrix units (MMA): NVIDIA mma / wgmma / tcgen05.mma, AMD mfma (spec: mma.md).

``get(arch, instruction, qualifier)`` returns an ``Instruction`` record: ``.m .n .k``, ``model(A, B, C)`` /
``model(A, B, C, scale_a, scale_b)`` for one tile and ``model.dot(a, b, c)`` for batched inner products.
The arithmetic is one frozen record per algorithm family (``algorithms``); ``matmul`` composes an instruction
into a whole GEMM as a kernel runs it (K tiling through C, promotion into FP32, block scales);
``KernelAccumulation`` / ``kernel`` model CPU kernels' accumulation orders (lanes, FMA, blocks; mma.md §10).
"""

from __future__ import annotations

from .accumulate import KernelAccumulation, kernel
from .algorithms import (
    ALGORITHMS,
    ExactFusedDot,
    FlushedMulAdd,
    FMAChain,
    GroupScaledFusedDot,
    ScaledTruncatedFusedDot,
    TruncatedFusedDot,
    TwoStageFusedDot,
)
from .bound import UnitBound, matmul_bound, scaled_bound
from .dispatch import GemmDispatch
from .gemm import MMAAccumulation, as_mma_accumulation, matmul
from .isa import ARCHS, KINDS, Instruction, custom, get, instructions

__all__ = [
    "ALGORITHMS",
    "ARCHS",
    "KINDS",
    "ExactFusedDot",
    "FMAChain",
    "FlushedMulAdd",
    "GemmDispatch",
    "GroupScaledFusedDot",
    "Instruction",
    "KernelAccumulation",
    "MMAAccumulation",
    "ScaledTruncatedFusedDot",
    "TruncatedFusedDot",
    "TwoStageFusedDot",
    "UnitBound",
    "as_mma_accumulation",
    "custom",
    "get",
    "instructions",
    "kernel",
    "matmul",
    "matmul_bound",
    "scaled_bound",
]
