"""A whole GEMM as a kernel computes it from one matrix-unit instruction (spec: mma.md §7).

D = C; for each K step of the instruction's k: D = MMA(A[:, step], B[step, :], D) (accumulation through C);
with ``promote_every`` = P the chain restarts from zero every P elements of K and each partial D is added to
an FP32 accumulator: acc = fl32(acc + D_p) (or acc = fma32(fl32(sa_p sb_p), D_p, acc) with promotion scales),
which is the promotion of partial sums into FP32 registers of DeepSeek-V3's FP8 GEMM.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import QrefError
from ..validators import check_alloc, check_int
from .bits import check_operand, fma32, storage_dtype
from .isa import Instruction, get

_ELEMS = 1 << 21  # int64 work arrays of at most ~2M elements per step (memory stays bounded)


def resolve(instruction: Instruction | str | tuple[str, str, str]) -> Instruction:
    """An Instruction from a record, "arch/instruction/qualifier" or (arch, instruction, qualifier)."""
    if isinstance(instruction, Instruction):
        return instruction
    if isinstance(instruction, str):
        parts = instruction.split("/")
        if len(parts) != 3:
            raise QrefError(f"instruction {instruction!r}: write 'arch/instruction/qualifier', e.g. "
                            "'Hopper/wgmma/m64n8k32.f32.e4m3.e4m3'")
        return get(*parts)
    if isinstance(instruction, tuple) and len(instruction) == 3:
        return get(*instruction)
    raise QrefError(f"instruction must be an Instruction, 'arch/instruction/qualifier' or a 3-tuple, got "
                    f"{instruction!r}")


def _rows(M: int, N: int, k: int) -> Iterator[slice]:
    step = max(1, _ELEMS // max(1, N * k))
    for i in range(0, M, step):
        yield slice(i, min(M, i + step))


def _chain(ins: Instruction, A: np.ndarray, B: np.ndarray, D: np.ndarray, sa: np.ndarray | None,
           sb: np.ndarray | None, k0: int, k1: int) -> np.ndarray:
    """D = MMA(..., MMA(A[:, k0:k0+k], B[k0:k0+k], D)) over K = k0..k1 (mma.md §7 C1)."""
    k = (k1 - k0) if ins.arithmetic.whole_k else ins.k  # a kernel record takes the whole K (mma.md §10.3)
    blk = ins.block_size or k
    out = np.empty(D.shape, storage_dtype(ins.d_format))
    for rs in _rows(A.shape[0], B.shape[1], k):
        d = D[rs]
        for s in range(k0, k1, k):
            a = A[rs, None, s:s + k]
            b = B[s:s + k].T[None, :, :]
            if ins.scaled:
                assert sa is not None and sb is not None
                d = ins.dot(a, b, d, sa[rs, None, s // blk:(s + k) // blk], sb[s // blk:(s + k) // blk].T[None])
            else:
                d = ins.dot(a, b, d)
        out[rs] = d
    return out


def matmul(A: object, B: object, C: object = None, *, instruction: Instruction | str | tuple[str, str, str],
           scale_a: object = None, scale_b: object = None, k_tile: int | None = None,
           promote_every: int | None = None, promote_scale_a: object = None, promote_scale_b: object = None,
           tile: tuple[int, int] | None = None, dask_address: str | None = None) -> np.ndarray:
    """D (M, N) = A (M, K) @ B (K, N) + C computed with ``instruction`` as a kernel does (mma.md §7).

    K is cut into instruction-K steps accumulated through C in the D format. k_tile (a multiple of the
    instruction's k; default k) is the kernel's K tile: promotion boundaries must fall on it. promote_every
    (a multiple of k_tile): restart the chain from a zero C every promote_every elements and add each partial
    result into a float32 accumulator initialised with C (acc = fl32(acc + D_p)); promote_scale_a (M,
    K / promote_every) and promote_scale_b (K / promote_every, N), float32, make it acc = fma32(fl32(sa sb),
    D_p, acc). scale_a (M, K / block) / scale_b (K / block, N): the instruction's block scales.
    dask_address computes output tiles (tile=(tm, tn), default 128 x 128) as tasks on a Dask cluster (the
    mechanism of ``qref sweep --dask``)."""
    ins = resolve(instruction)
    A = check_operand(A, ins.a_format, f"matmul with {ins.name}: A")
    B = check_operand(B, ins.b_format, f"matmul with {ins.name}: B")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise QrefError(f"matmul takes A (M, K) and B (K, N), got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    if K == 0:
        raise QrefError(f"matmul with {ins.name}: K = 0 (A {A.shape}, B {B.shape}); a GEMM sums at least one "
                        "product per output (mma.md §7): give A at least one column")
    k = ins.k
    kt = k if k_tile is None else check_int(k_tile, "k_tile", 1)
    # the chain keeps a few float64 / uint64 arrays of the operands' and the result's size (mma.md §7)
    check_alloc(16 * (M * K + K * N + M * N), 1, f"matmul with {ins.name} of A {A.shape} and B {B.shape}")
    if kt % k:
        raise QrefError(f"k_tile = {kt} must be a multiple of the instruction's k = {k}")
    if K % kt:
        raise QrefError(f"K = {K} is not a multiple of the K tile {kt}; pad A's columns and B's rows with zeros")
    P = promote_every
    if P is not None and (P % kt or P <= 0):
        raise QrefError(f"promote_every = {P} must be a positive multiple of the K tile {kt}")
    if C is None:
        C = np.zeros((M, N), storage_dtype(ins.c_format if P is None else "float32"))
    Cf = np.asarray(C)
    if Cf.shape != (M, N):
        raise QrefError(f"C must have shape {(M, N)}, got {Cf.shape}")
    sa = sb = None
    if ins.scaled:
        assert ins.block_size is not None and ins.scale_format is not None
        sa = check_operand(scale_a, ins.scale_format, "scale_a")
        sb = check_operand(scale_b, ins.scale_format, "scale_b")
        nb = K // ins.block_size
        if sa.shape != (M, nb) or sb.shape != (nb, N):
            raise QrefError(f"scale_a must be {(M, nb)} and scale_b {(nb, N)}, got {sa.shape} and {sb.shape}")
    elif scale_a is not None or scale_b is not None:
        raise QrefError(f"{ins.name} takes no block scales; use a block_scale instruction")
    if dask_address is not None:
        tile = tile or (max(ins.m, 128), max(ins.n, 128))
        return _matmul_dask(A, B, Cf, ins, sa, sb, kt, P, promote_scale_a, promote_scale_b, tile, dask_address)
    if tile is not None:
        raise QrefError("tile=(tm, tn) splits the GEMM over a Dask cluster: give dask_address too (locally the "
                        "output is computed in row blocks already)")
    return _matmul_local(A, B, Cf, ins, sa, sb, P, promote_scale_a, promote_scale_b)


def _matmul_local(A: np.ndarray, B: np.ndarray, C: np.ndarray, ins: Instruction, sa: np.ndarray | None,
                  sb: np.ndarray | None, P: int | None, psa: object, psb: object) -> np.ndarray:
    M, K = A.shape
    N = B.shape[1]
    if P is None:
        if ins.k < K and ins.c_format != ins.d_format:
            raise QrefError(f"{ins.name}: C is {ins.c_format} and D {ins.d_format}; a chain over K needs C == D "
                            "(or use promote_every = k)")
        C = check_operand(C, ins.c_format, "C")
        return _chain(ins, A, B, C, sa, sb, 0, K)
    acc = check_operand(C, "float32", "C (the float32 accumulator with promote_every)").copy()
    npromo = K // P
    scales = None
    if psa is not None or psb is not None:
        pa = check_operand(psa, "float32", "promote_scale_a")
        pb = check_operand(psb, "float32", "promote_scale_b")
        if pa.shape != (M, npromo) or pb.shape != (npromo, N):
            raise QrefError(f"promote_scale_a must be {(M, npromo)} and promote_scale_b {(npromo, N)}")
        scales = (pa, pb)
    zero = np.zeros((M, N), storage_dtype(ins.c_format))
    for j in range(npromo):
        part = _chain(ins, A, B, zero, sa, sb, j * P, (j + 1) * P).astype(np.float32)
        with np.errstate(all="ignore"):
            if scales is None:
                acc = acc + part
            else:
                s = scales[0][:, j:j + 1] * scales[1][j:j + 1, :]
                acc = fma32(np.broadcast_to(s, part.shape), part, acc)
    return acc


def _tile_task(args: tuple[Any, ...]) -> tuple[tuple[int, int], np.ndarray]:
    (i, j), A, B, C, ins, sa, sb, P, psa, psb = args
    return (i, j), _matmul_local(A, B, C, ins, sa, sb, P, psa, psb)


def _matmul_dask(A: np.ndarray, B: np.ndarray, C: np.ndarray, ins: Instruction, sa: np.ndarray | None,
                 sb: np.ndarray | None, kt: int, P: int | None, psa: object, psb: object, tile: tuple[int, int],
                 address: str) -> np.ndarray:
    """Output tiles as independent tasks on a Dask cluster (mma.md §7 C4: tiles do not interact)."""
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - optional extra
        raise QrefError("dask_address needs the optional extra: pip install 'qref[dask]'") from exc
    M, N = C.shape
    tm, tn = tile
    pa = None if psa is None else np.asarray(psa)
    pb = None if psb is None else np.asarray(psb)
    tasks = []
    for i in range(0, M, tm):
        for j in range(0, N, tn):
            r, c = slice(i, i + tm), slice(j, j + tn)
            tasks.append(((i, j), A[r], B[:, c], C[r, c], ins, None if sa is None else sa[r],
                          None if sb is None else sb[:, c], P, None if pa is None else pa[r],
                          None if pb is None else pb[:, c]))
    out: np.ndarray | None = None
    with Client(address) as client:
        for fut in as_completed(client.map(_tile_task, tasks, pure=False)):
            (i, j), d = fut.result()
            if out is None:
                out = np.empty((M, N), d.dtype)
            out[i:i + d.shape[0], j:j + d.shape[1]] = d
    assert out is not None
    return out


@dataclass(frozen=True)
class MMAAccumulation:
    """An accumulation that is a matrix-unit instruction (mma.md §7.2): the recipes' ``accumulation=``.

    instruction: the model; promote_every / k_tile: as ``matmul``. The recipes pass the quantized operands'
    codes (and, for block_matmul, the E8M0 block scales) to ``matmul`` and apply their post-scale after it."""

    instruction: Instruction
    promote_every: int | None = None
    k_tile: int | None = None

    def run(self, a_codes: np.ndarray, b_codes: np.ndarray, scale_a: np.ndarray | None = None,
            scale_b: np.ndarray | None = None) -> np.ndarray:
        """D of codes A (M, K), B (K, N) (integer storage codes of the instruction's operand formats)."""
        ins = self.instruction
        a = np.ascontiguousarray(a_codes).view(storage_dtype(ins.a_format))
        b = np.ascontiguousarray(b_codes).view(storage_dtype(ins.b_format))
        sa = sb = None
        if ins.scaled:
            assert ins.scale_format is not None and scale_a is not None and scale_b is not None
            sa = np.ascontiguousarray(scale_a).view(storage_dtype(ins.scale_format))
            sb = np.ascontiguousarray(scale_b).view(storage_dtype(ins.scale_format))
        return matmul(a, b, instruction=ins, scale_a=sa, scale_b=sb, promote_every=self.promote_every,
                      k_tile=self.k_tile)


def as_mma_accumulation(acc: object) -> MMAAccumulation | None:
    """An MMAAccumulation from an Instruction, an "arch/instruction/qualifier" string or an MMAAccumulation;
    None for anything else (the recipes' own Accumulation models)."""
    if isinstance(acc, MMAAccumulation):
        return acc
    if isinstance(acc, Instruction):
        return MMAAccumulation(acc)
    if isinstance(acc, str) and acc.count("/") == 2:
        return MMAAccumulation(resolve(acc))
    return None


__all__ = ["MMAAccumulation", "as_mma_accumulation", "matmul", "resolve"]
