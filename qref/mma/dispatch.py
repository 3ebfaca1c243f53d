"""A CPU GEMM whose accumulation depends on the problem's shape: one record per kernel path (spec: mma.md §12).

Level-3 BLAS libraries pick a kernel by size: a small-matrix kernel below a bound on M N K (no K blocking), the
blocked kernel above it, and in the small kernel a different order for the last N mod w output columns (the
micro-kernel's tail). ``GemmDispatch`` holds one ``KernelAccumulation`` per path, named by the mechanism that
selects it; ``matmul`` computes D with each output from its path's record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import QrefError
from .accumulate import KernelAccumulation, kernel
from .gemm import matmul


@dataclass(frozen=True)
class GemmDispatch:
    """Kernel paths of one CPU GEMM (mma.md §12).

    blocked: the record of the blocked (large) kernel. small: the small-matrix kernel's record, used when
    M N K <= small_max_mnk (None: no small path). small_tail: the record of the last N mod tail_width columns
    of D in the small path when K >= tail_min_k (None: as ``small``). vectors: whether M == 1 or N == 1 (a
    matrix-vector call) is modelled by the same records; False makes ``matmul`` refuse them. min_rows_cols: M or
    N below it takes a kernel this dispatch does not model (refused). column_blocks: (n_max, block) pairs: when
    N < K and N <= n_max (the first such pair), the blocked record's K block is ``block`` (a kernel whose K
    stride grows as its N stride shrinks to the problem's N).
    """

    blocked: KernelAccumulation
    small: KernelAccumulation | None = None
    small_max_mnk: int = 0
    small_tail: KernelAccumulation | None = None
    tail_width: int = 1
    tail_min_k: int = 0
    vectors: bool = False
    min_rows_cols: int = 2
    column_blocks: tuple[tuple[int, int], ...] = ()

    def paths(self, M: int, N: int, K: int) -> list[tuple[slice, KernelAccumulation]]:
        """(column slice of D, record) pairs for an (M, K) x (K, N) product."""
        if (M == 1 or N == 1) and not self.vectors:
            raise QrefError(f"GemmDispatch: a {M} x {N} output is a matrix-vector call, which this profile does not "
                            "model (a different kernel); use M, N >= 2")
        if self.small is None or self.small_max_mnk < M * N * K:
            for n_max, block in self.column_blocks:
                if N < K and n_max >= N:
                    return [(slice(0, N), replace(self.blocked, block=block))]
            return [(slice(0, N), self.blocked)]
        if self.small_tail is None or self.tail_min_k > K or N % self.tail_width == 0:
            return [(slice(0, N), self.small)]
        cut = N - N % self.tail_width
        return [(slice(0, cut), self.small), (slice(cut, N), self.small_tail)] if cut else \
            [(slice(0, N), self.small_tail)]

    def matmul(self, A: np.ndarray, B: np.ndarray, a_format: str = "float32", b_format: str | None = None,
               d_format: str = "float32") -> np.ndarray:
        """D = A @ B with every output computed by its path's record (mma.md §12 C1)."""
        A, B = np.asarray(A), np.asarray(B)
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            raise QrefError(f"GemmDispatch.matmul takes A (M, K) and B (K, N), got {A.shape} and {B.shape}")
        M, K = A.shape
        N = B.shape[1]
        parts = []
        for cols, rec in self.paths(M, N, K):
            parts.append(matmul(A, np.ascontiguousarray(B[:, cols]),
                                instruction=kernel(rec, a_format, b_format, d_format)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


__all__ = ["GemmDispatch"]
