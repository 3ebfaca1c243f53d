"""qref.mma.matmul: a whole GEMM from one instruction (mma.md §7), against mmasim 2.1.1 and the tile model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_mma_oracle as O

import qref.mma as qm
from qref.errors import QrefError
from qref.mma.bits import fma32

torch = O.torch


def _chain_mmasim(ins: qm.Instruction, A: np.ndarray, B: np.ndarray, C: np.ndarray, sa: np.ndarray | None = None,
                  sb: np.ndarray | None = None) -> np.ndarray:
    op = O.oracle(ins)
    out = np.zeros(C.shape, np.uint32 if ins.d_format == "float32" else np.uint16)
    for i in range(0, A.shape[0], ins.m):
        for j in range(0, B.shape[1], ins.n):
            d = O.to_torch(C[i:i + ins.m, j:j + ins.n], ins.c_format)
            for s in range(0, A.shape[1], ins.k):
                args = [O.to_torch(A[i:i + ins.m, s:s + ins.k], ins.a_format),
                        O.to_torch(B[s:s + ins.k, j:j + ins.n], ins.b_format), d]
                if ins.scaled:
                    blk = ins.block_size
                    args += [O.to_torch(sa[i:i + ins.m, s // blk:(s + ins.k) // blk], ins.scale_format),
                             O.to_torch(sb[s // blk:(s + ins.k) // blk, j:j + ins.n], ins.scale_format)]
                d = op(*args)
            out[i:i + ins.m, j:j + ins.n] = O.from_torch(d)
    return out


@pytest.mark.parametrize("name", ["Ampere/mma/m16n8k16.f32.bf16.bf16.f32", "Hopper/wgmma/m64n8k16.f16.f16.f16",
                                  "CDNA3/mfma/f32_16x16x32_bf8_fp8", "CDNA2/mfma/f32_16x16x16bf16_1k",
                                  "Ada Lovelace/mma/m16n8k32.f32.e4m3.e5m2.f32"])
def test_matmul_equals_mmasim_tiles_chained_through_c(name: str) -> None:
    ins = qm.gemm.resolve(name)
    rng = np.random.default_rng(4)
    M, N, K = 2 * ins.m, 2 * ins.n, 4 * ins.k
    A = O.random_codes(rng, ins.a_format, (M, K), 0.005)
    B = O.random_codes(rng, ins.b_format, (K, N), 0.005)
    C = O.random_codes(rng, ins.c_format, (M, N), 0.005)
    got = O.bits(qm.matmul(A, B, C, instruction=ins))
    assert (got == _chain_mmasim(ins, A, B, C)).all()


def test_promotion_and_promotion_scales() -> None:
    """promote_every = P: partial chains from zero, acc = fl32(acc + D_p) or fma32(fl32(sa sb), D_p, acc)."""
    ins = qm.get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3")
    rng = np.random.default_rng(5)
    A = O.finite("float8_e4m3fn", rng.standard_normal((64, 256)) * 8)
    B = O.finite("float8_e4m3fn", rng.standard_normal((256, 16)) * 8)
    C = rng.standard_normal((64, 16)).astype(np.float32)
    parts = [qm.matmul(A[:, p:p + 128], B[p:p + 128], instruction=ins) for p in (0, 128)]
    want = (C + parts[0]) + parts[1]
    got = qm.matmul(A, B, C, instruction=ins, promote_every=128, k_tile=64)
    assert (O.bits(got) == O.bits(want)).all()
    sa = rng.random((64, 2)).astype(np.float32)
    sb = rng.random((2, 16)).astype(np.float32)
    want = fma32(sa[:, 1:2] * sb[1:2], parts[1], fma32(sa[:, :1] * sb[:1], parts[0], C))
    got = qm.matmul(A, B, C, instruction=ins, promote_every=128, promote_scale_a=sa, promote_scale_b=sb)
    assert (O.bits(got) == O.bits(want)).all()
    # F = 13 chains lose bits that the FP32 promotion keeps: the two differ on LLM-sized K
    assert (qm.matmul(A, B, instruction=ins) != qm.matmul(A, B, instruction=ins, promote_every=32)).any()


def test_block_scaled_matmul_equals_tiles() -> None:
    ins = qm.get("Blackwell", "tcgen05.mma.block_scale", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")
    rng = np.random.default_rng(6)
    A = O.random_codes(rng, "float4_e2m1fn", (128, 128))
    B = O.random_codes(rng, "float4_e2m1fn", (128, 8))
    sa = O.finite("ue4m3", rng.random((128, 8)) * 4)
    sb = O.finite("ue4m3", rng.random((8, 8)) * 4)
    d = ins(A[:, :64], B[:64], np.zeros((128, 8), np.float32), sa[:, :4], sb[:4])
    d = ins(A[:, 64:], B[64:], d, sa[:, 4:], sb[4:])
    assert (O.bits(qm.matmul(A, B, instruction=ins, scale_a=sa, scale_b=sb)) == O.bits(d)).all()


def test_dask_tiles_equal_local() -> None:
    distributed = pytest.importorskip("dask.distributed")
    ins = qm.get("Ampere", "mma", "m16n8k8.f32.tf32.tf32.f32")
    rng = np.random.default_rng(8)
    A = rng.standard_normal((32, 64)).astype(np.float32)
    B = rng.standard_normal((64, 24)).astype(np.float32)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        got = qm.matmul(A, B, instruction=ins, tile=(16, 8), dask_address=lc.scheduler_address)
    assert (O.bits(got) == O.bits(qm.matmul(A, B, instruction=ins))).all()


def test_matmul_errors() -> None:
    ins = qm.get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3")
    A = np.zeros((64, 96), O._dtype("float8_e4m3fn"))
    B = np.zeros((96, 8), O._dtype("float8_e4m3fn"))
    with pytest.raises(QrefError, match="K tile"):
        qm.matmul(A, B, instruction=ins, k_tile=64)
    with pytest.raises(QrefError, match="multiple of the instruction"):
        qm.matmul(A, B, instruction=ins, k_tile=48)
    with pytest.raises(QrefError, match="promote_every"):
        qm.matmul(A, B, instruction=ins, promote_every=48)
    with pytest.raises(QrefError, match="arch/instruction/qualifier"):
        qm.matmul(A, B, instruction="Hopper wgmma")
    v = qm.get("Volta", "mma", "m8n8k4.f32.f16.f16.f16")
    with pytest.raises(QrefError, match="C == D"):
        qm.matmul(np.zeros((8, 8), np.float16), np.zeros((8, 8), np.float16), instruction=v)


def test_gemm_case_builder_expected_equals_mmasim() -> None:
    """The (not yet registered) gemm conformance family: every golden d of the mma operation equals mmasim."""
    from qref.conformance.cases import gemm as _gemm
    from qref.mma.bits import storage_dtype

    n = 0
    for case in _gemm.build_cases(False):
        p = case.params
        ins = qm.get(p["arch"], p["instruction"], p["qualifier"])
        fmts = {"a": ins.a_format, "b": ins.b_format, "c": p.get("c_format", ins.c_format),
                "scale_a": ins.scale_format, "scale_b": ins.scale_format}
        ops = {k: np.ascontiguousarray(v).view(storage_dtype(fmts[k])) for k, v in case.inputs.items()}
        d = O.bits(np.asarray(case.expected["d"]))
        if case.operation == "mma":
            exp = O.run_oracle_dot(ins, ops["a"], ops["b"], ops["c"], ops.get("scale_a"), ops.get("scale_b"))
        else:
            P = p["promote_every"]
            if P is None:
                exp = _chain_mmasim(ins, ops["a"], ops["b"], ops["c"], ops.get("scale_a"), ops.get("scale_b"))
            else:
                continue  # promotion: covered by test_promotion_and_promotion_scales
        assert (d == exp).all(), case.id
        n += d.size
    assert n > 3000
