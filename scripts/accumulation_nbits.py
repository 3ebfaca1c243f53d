"""The float stage of ONNX Runtime's MatMulNBits (4-bit weights, float32 compute) against candidate records
(docs/accumulation.md, "MatMulNBits").

Usage: PYTHONPATH=.:scripts python scripts/accumulation_nbits.py > docs/accumulation/nbits_f32.txt
The weights are W[k, n] = (q[n, k] - 8) * s[n, k // block] with power-of-two scales, so the dequantized weight is
exact in float32 and the float stage is D = A @ W: the script compares ORT's D with qref.mma records applied to
(A, W) bit for bit. Order rows: A = +big at k = 0, -big at k = j, `small` elsewhere, W = ones (q = 9, s = 1): the
number of small products that survive shows which terms met +big before -big. intra_op_num_threads = 1 (and 2).
"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import qref.mma as qm
from qref.mma.cpu_profiles import ORT_MLAS_1T

THREADS = int(os.environ.get("QREF_ORT_THREADS", "1"))


def nbits(A: np.ndarray, q: np.ndarray, s: np.ndarray, block: int, level: int) -> np.ndarray:
    """MatMulNBits (bits 4, no zero points: 8) of float32 A (M, K) and codes q (N, K), scales s (N, K / block)."""
    M, K = A.shape
    N = q.shape[0]
    nb = -(-K // block)
    qq = np.zeros((N, nb * block), np.uint8)
    qq[:, :K] = q
    qq = qq.reshape(N, nb, block)
    packed = (qq[..., 0::2] | (qq[..., 1::2] << 4)).astype(np.uint8)
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=K, N=N, bits=4,
                            block_size=block, accuracy_level=level)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
                          initializer=[numpy_helper.from_array(packed, "b"),
                                       numpy_helper.from_array(s.astype(np.float32).reshape(-1), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    o = ort.SessionOptions()
    o.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {"a": A})[0], np.float32)


RECORDS = {
    "fma x1": qm.KernelAccumulation(),
    "mul+add x1": qm.KernelAccumulation(products="rounded"),
    "fma x1 blocks 128": qm.KernelAccumulation(block=128),
    "fma x1 blocks = quant block": None,  # filled per block size
    "fma x4 pairwise": qm.KernelAccumulation(lanes=4, reduction="pairwise"),
    "fma x8 halving": qm.KernelAccumulation(lanes=8, reduction="halving"),
    "fma x16 pairwise": qm.KernelAccumulation(lanes=16, reduction="pairwise"),
    "fma x16 halving": qm.KernelAccumulation(lanes=16, reduction="halving"),
    "fma x16 halving, blocks = quant block": None,
}


def records(block: int) -> dict[str, qm.KernelAccumulation]:
    out = {k: v for k, v in RECORDS.items() if v is not None}
    out["fma x1 blocks = quant block"] = qm.KernelAccumulation(block=block)
    out["fma x16 halving, blocks = quant block"] = qm.KernelAccumulation(lanes=16, reduction="halving", block=block)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"onnxruntime {ort.__version__} MatMulNBits (bits 4), intra_op_num_threads = {THREADS}")
    for level in (0, 1):
        for block in (32, 128):
            recs = records(block)
            print(f"\naccuracy_level {level}, block {block}: outputs differing from each record (of M x N)")
            print("M x N x K | ORT MatMul profile (onnxruntime-1.32-mlas-sgemm-1-thread) | " + " | ".join(recs))
            for M, N, K in ((1, 64, 256), (16, 64, 256), (64, 64, 256), (64, 64, 1024), (64, 32, 1000)):
                A = rng.standard_normal((M, K)).astype(np.float32)
                q = rng.integers(0, 16, (N, K))
                s = np.exp2(rng.integers(-6, -2, (N, -(-K // block)))).astype(np.float32)
                W = ((q - 8) * np.repeat(s, block, axis=1)[:, :K]).T.astype(np.float32)
                D = nbits(A, q, s, block, level)
                row = []
                try:
                    row.append(int((ORT_MLAS_1T.dispatch.matmul(A, W).view(np.uint32) != D.view(np.uint32)).sum()))
                except Exception:
                    row.append("-")
                row += [int((qm.matmul(A, W, instruction=qm.kernel(r)).view(np.uint32) != D.view(np.uint32)).sum())
                        for r in recs.values()]
                print(f"{M} x {N} x {K} | " + " | ".join(map(str, row)))
            K = 256
            big, small = np.float32(2.0**30), np.float32(2.0**-4)
            A = np.full((K - 1, K), small, np.float32)
            A[:, 0] = big
            A[np.arange(K - 1), np.arange(1, K)] = -big
            q = np.full((16, K), 9)
            s = np.ones((16, K // block), np.float32)
            D = nbits(A, q, s, block, level)[:, 0]
            counts = np.rint(D / small).astype(int)
            print(f"order, K = {K}, +big at k = 0, -big at k = j (j = 1..{K - 1}), surviving small products:")
            print("  " + " ".join(map(str, counts)))


if __name__ == "__main__":
    main()
