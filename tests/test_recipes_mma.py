"""Recipes with a matrix-unit instruction as their accumulation, against mmasim 2.1.1 chained over K (mma.md §7.2)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_mma_oracle as O

import qref
import qref.mma as qm
from qref.errors import QrefError
from qref.recipes.ops import block_matmul, qdq_matmul

torch = O.torch


def _mmasim_chain(ins: qm.Instruction, A: np.ndarray, B: np.ndarray, sa: np.ndarray | None = None,
                  sb: np.ndarray | None = None) -> np.ndarray:
    """D = C = 0; D = mmasim(A[:, s], B[s, :], D) for each K step s of the instruction, tile by tile."""
    op = O.oracle(ins)
    M, K = A.shape
    N = B.shape[1]
    out = np.zeros((M, N), np.uint32)
    blk = ins.block_size or ins.k
    for i in range(0, M, ins.m):
        for j in range(0, N, ins.n):
            d = torch.zeros((ins.m, ins.n), dtype=torch.float32)
            for s in range(0, K, ins.k):
                args = [O.to_torch(A[i:i + ins.m, s:s + ins.k], ins.a_format),
                        O.to_torch(B[s:s + ins.k, j:j + ins.n], ins.b_format), d]
                if ins.scaled:
                    args += [O.to_torch(sa[i:i + ins.m, s // blk:(s + ins.k) // blk], ins.scale_format),
                             O.to_torch(sb[s // blk:(s + ins.k) // blk, j:j + ins.n], ins.scale_format)]
                d = op(*args)
            out[i:i + ins.m, j:j + ins.n] = O.from_torch(d)
    return out.view(np.float32)


def _llm_like(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal((shape[0], 1)))
    x[rng.random(shape) < 0.002] *= 60.0  # outliers
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_qdq_matmul_with_hopper_fp8_equals_mmasim_chained_over_k(fmt: str) -> None:
    t = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}[fmt]
    ins = qm.get("Hopper", "wgmma", f"m64n16k32.f32.{t}.{t}")
    rng = np.random.default_rng(0)
    a, b = _llm_like(rng, (64, 256)), _llm_like(rng, (256, 32)).T.copy().T
    r = qdq_matmul(a, b, a_format=fmt, b_format=fmt, accumulation=ins)
    A = r.meta["a_codes"].view(O._dtype(fmt))
    B = r.meta["b_codes"].view(O._dtype(fmt))
    d = _mmasim_chain(ins, A, B)
    s = np.float32(np.float32(r.meta["a_scale"]) * np.float32(r.meta["b_scale"]))
    want = d * s  # Flax's out_dq: fl32(D * fl32(s_a s_b))
    assert (O.bits(r.value) == O.bits(want)).all()
    assert r.meta["instruction"] == ins.name and (r.bound == 0).all()
    # the instruction truncates: the exact result differs somewhere (F = 13), the exact accumulation does not
    assert (r.value != qdq_matmul(a, b, a_format=fmt, b_format=fmt, accumulation="exact").value).any()


def test_qdq_matmul_promotion_every_128_equals_mmasim_partial_chains() -> None:
    """DeepSeek-V3's recipe: partial wgmma chains over 128 elements, each added into an FP32 accumulator."""
    ins = qm.get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3")
    rng = np.random.default_rng(1)
    a, b = _llm_like(rng, (64, 512)), _llm_like(rng, (512, 8))
    r = qdq_matmul(a, b, accumulation=qm.MMAAccumulation(ins, promote_every=128))
    A = r.meta["a_codes"].view(O._dtype("float8_e4m3fn"))
    B = r.meta["b_codes"].view(O._dtype("float8_e4m3fn"))
    acc = np.zeros((64, 8), np.float32)
    for p in range(0, 512, 128):
        acc = acc + _mmasim_chain(ins, A[:, p:p + 128], B[p:p + 128])
    s = np.float32(np.float32(r.meta["a_scale"]) * np.float32(r.meta["b_scale"]))
    assert (O.bits(r.value) == O.bits(acc * s)).all()


def test_block_matmul_with_block_scaled_instruction_equals_mmasim() -> None:
    ins = qm.get("RTX Blackwell", "mma.block_scale", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0")
    rng = np.random.default_rng(2)
    x, w = _llm_like(rng, (16, 128)), _llm_like(rng, (8, 128))
    sch = qref.scheme("mxfp8_e4m3")
    qa, qw = sch.quantize(x), sch.quantize(w)  # w as (N, K) quantized along K: the transposed layout
    r = block_matmul(qa, qw, accumulation=ins)
    A = qa.codes.view(O._dtype("float8_e4m3fn"))
    B = qw.codes.T.copy().view(O._dtype("float8_e4m3fn"))
    sa = qa.scales.view(O._dtype("float8_e8m0fnu"))
    sb = np.ascontiguousarray(qw.scales.T).view(O._dtype("float8_e8m0fnu"))
    assert (O.bits(r.value) == O.bits(_mmasim_chain(ins, A, B, sa, sb))).all()
    with pytest.raises(QrefError, match="multiplies"):
        block_matmul(qref.scheme("mxfp4").quantize(x), qref.scheme("mxfp4").quantize(w), accumulation=ins)


def test_qdq_matmul_instruction_formats_must_match() -> None:
    ins = qm.get("Hopper", "wgmma", "m64n8k32.f32.e5m2.e5m2")
    with pytest.raises(QrefError, match="multiplies"):
        qdq_matmul(np.ones((64, 32), np.float32), np.ones((32, 8), np.float32), accumulation=ins)
    one_a, one_b = np.ones((64, 32), np.float32), np.ones((32, 8), np.float32)
    r = qdq_matmul(one_a, one_b, accumulation="Hopper/wgmma/m64n8k32.f32.e4m3.e4m3")
    assert (r.value == qdq_matmul(one_a, one_b, accumulation="exact").value).all()  # 32 equal products: exact
