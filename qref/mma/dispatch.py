"""A CPU GEMM whose accumulation depends on the problem's shape: one record per kernel path (spec: mma.md §12).

Level-3 BLAS libraries pick a kernel by size: a small-matrix kernel below a bound on M N K (no K blocking), the
blocked kernel above it, and in the small kernel a different order for the last N mod w output columns (the
micro-kernel's tail). ``GemmDispatch`` holds one ``KernelAccumulation`` per path, named by the mechanism that
selects it; ``matmul`` computes D with each output from its path's record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import QrefError, check_choice
from .accumulate import KernelAccumulation, kernel
from .bits import storage_dtype
from .gemm import matmul

STORES = ("add_to_zeroed", "first_block")
SINGLE_PRODUCTS = ("rounded", "rounded_plus_zero")
_ROUNDED = KernelAccumulation(products="rounded")


@dataclass(frozen=True)
class GemmDispatch:
    """Kernel paths of one CPU GEMM (mma.md §12).

    blocked: the record of the blocked (large) kernel. small: the small-matrix kernel's record, used when
    M N K <= small_max_mnk (None: no small path). small_tail: the record of the last N mod tail_width columns
    of D in the small path when K >= tail_min_k (None: as ``small``). vectors: whether M == 1 or N == 1 (a
    matrix-vector call) is modelled by the same records; False makes ``matmul`` refuse them. min_rows_cols: M or
    N below it takes a kernel this dispatch does not model (refused). column_blocks: (n_max, block) pairs: when
    N < K and N <= n_max (the first such pair), the blocked record's K block is ``block`` (a kernel whose K
    stride grows as its N stride shrinks to the problem's N). tail_max: the tail path runs only when
    N mod tail_width <= tail_max (None: any remainder; a larger one runs the whole D with ``small``).
    small_edge: in the tail path, the record of the last M mod edge_rows rows of the last t mod edge_columns
    columns, t = N mod tail_width (the remainders of the micro-kernel's row and column register blocks).
    single_product: K = 1 runs another path (None: the paths above): "rounded" (D = fl(a b), stored as it is)
    or "rounded_plus_zero" (D = +0 + fl(a b): -0 becomes +0).
    unfitted_odd_k: (lo, hi): an odd K with lo < K < hi is cut by a rule no record here reproduces (refused).
    store: how D receives the K blocks' sums: "add_to_zeroed" (D is set to +0, then every block's sum is added:
    a -0 sum becomes +0) or "first_block" (the first block's sum is stored as it is and later ones added: the
    chain starts from -0, the identity of IEEE addition).
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
    tail_max: int | None = None
    small_edge: KernelAccumulation | None = None
    edge_rows: int = 1
    edge_columns: int = 1
    store: str = "add_to_zeroed"
    single_product: str | None = None
    unfitted_odd_k: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_choice("store", self.store, STORES)
        if self.single_product is not None:
            check_choice("single_product", self.single_product, SINGLE_PRODUCTS)
        if self.store == "first_block" and (self.blocked.block is None or self.small is not None):
            raise QrefError("GemmDispatch: store 'first_block' is a blocked kernel's (a blocked record with K blocks "
                            "and no small path): its -0 start enters as the first block add (mma.md §12)")

    def paths(self, M: int, N: int, K: int) -> list[tuple[slice, slice, KernelAccumulation]]:
        """(row slice, column slice of D, record) triples for an (M, K) x (K, N) product (mma.md §12); later
        triples overwrite the outputs of earlier ones."""
        if (M == 1 or N == 1) and not self.vectors:
            raise QrefError(f"GemmDispatch: a {M} x {N} output is a matrix-vector call, which this profile does not "
                            "model (a different kernel); use M, N >= 2")
        if self.unfitted_odd_k is not None and K % 2 and self.unfitted_odd_k[0] < K < self.unfitted_odd_k[1]:
            lo, hi = self.unfitted_odd_k
            raise QrefError(f"GemmDispatch: an odd K = {K} in ({lo}, {hi}) is cut by a rule this profile does not "
                            "model (mma.md §12); use an even K or one outside that range")
        if K == 1 and self.single_product is not None:
            return [(slice(0, M), slice(0, N), _ROUNDED)]
        if self.small is None or self.small_max_mnk < M * N * K:
            for n_max, block in self.column_blocks:
                if N < K and n_max >= N:
                    return [(slice(0, M), slice(0, N), replace(self.blocked, block=block))]
            return [(slice(0, M), slice(0, N), self.blocked)]
        t = N % self.tail_width
        if self.small_tail is None or self.tail_min_k > K or t == 0 or (self.tail_max is not None
                                                                         and t > self.tail_max):
            return [(slice(0, M), slice(0, N), self.small)]
        rows = slice(0, M)
        out = [(rows, slice(0, N - t), self.small)] if t < N else []
        out.append((rows, slice(N - t, N), self.small_tail))
        er, ec = M % self.edge_rows, t % self.edge_columns
        if self.small_edge is not None and er and ec:
            out.append((slice(M - er, M), slice(N - ec, N), self.small_edge))
        return out

    def matmul(self, A: np.ndarray, B: np.ndarray, a_format: str = "float32", b_format: str | None = None,
               d_format: str = "float32") -> np.ndarray:
        """D = A @ B with every output computed by its path's record (mma.md §12 C1)."""
        A, B = np.asarray(A), np.asarray(B)
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            raise QrefError(f"GemmDispatch.matmul takes A (M, K) and B (K, N), got {A.shape} and {B.shape}")
        M, K = A.shape
        N = B.shape[1]
        out: np.ndarray | None = None
        for rows, cols, rec in self.paths(M, N, K):
            ins = kernel(rec, a_format, b_format, d_format)
            m = rows.stop - rows.start
            # the start of D: -0 (the identity of IEEE addition) where the sums are stored as they are
            keep = self.store == "first_block" or (K == 1 and self.single_product == "rounded")
            C = np.full((m, cols.stop - cols.start), -0.0 if keep else 0.0, storage_dtype(ins.c_format))
            part = matmul(np.ascontiguousarray(A[rows]), np.ascontiguousarray(B[:, cols]), C, instruction=ins)
            if out is None and (rows, cols) == (slice(0, M), slice(0, N)):
                out = part
                continue
            if out is None:
                out = np.empty((M, N), part.dtype)
            out[rows, cols] = part
        assert out is not None
        return out


__all__ = ["GemmDispatch"]
