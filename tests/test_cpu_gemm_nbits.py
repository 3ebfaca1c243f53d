"""The float stage of ONNX Runtime's MatMulNBits held bit for bit to its fitted profile (mma.md §12.1,
``onnxruntime-1.32-mlas-nbits-f32``): D = A @ W with W = (q - 8) s the dequantized 4-bit weight, one sequential FMA
chain per output, no K blocks, where the fitted kernel runs (onnxruntime 1.32 on x86-64 with AVX-512F); elsewhere
only the bound of mma.md §10.4 is checked and the test says so.

Scales are powers of two, so W is exact in float32 and the float stage alone decides the bits. >= 10^6 outputs per
(accuracy_level, threads): 1000 x 1000 at K = 32 (block 16) plus blocked shapes up to K = 4096; operands random,
spread over 2^-20 .. 2^20 (products absorbed by others: the order shows), cancelling, with zeros and -0.
"""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

import qref.mma as qm
from qref.errors import QrefError
from qref.mma.cpu_profiles import ORT_MLAS_NBITS_F32 as PROF

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def _nbits(A: np.ndarray, q: np.ndarray, s: np.ndarray, block: int, level: int, threads: int) -> np.ndarray:
    from onnx import TensorProto, helper, numpy_helper

    M, K = A.shape
    N = q.shape[0]
    nb = -(-K // block)
    qq = np.zeros((N, nb * block), np.uint8)
    qq[:, :K] = q
    qq = qq.reshape(N, nb, block)
    packed = (qq[..., 0::2] | (qq[..., 1::2] << 4)).astype(np.uint8)  # element 2i in the low nibble
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=K, N=N, bits=4,
                            block_size=block, accuracy_level=level)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
                          initializer=[numpy_helper.from_array(packed, "b"),
                                       numpy_helper.from_array(s.astype(np.float32).reshape(-1), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    sess = ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {"a": A})[0], np.float32)


def _problems(seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """(A, q, s, block): random, spread, cancelling and zero-bearing operands."""
    rng = np.random.default_rng(seed)
    out = []
    for M, N, K, block, spread in ((1000, 1000, 32, 16, 20), (64, 64, 1000, 32, 4), (16, 48, 4096, 128, 12),
                                   (8, 40, 300, 64, 20), (2, 17, 256, 32, 0)):
        A = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread + 1, (M, K)))).astype(np.float32)
        A[rng.random((M, K)) < 0.02] = 0.0
        A[rng.random((M, K)) < 0.01] = -0.0
        A[1::5, K // 2:] = -A[1::5, : K - K // 2][:, : K // 2]  # cancelling halves on every fifth row
        q = rng.integers(0, 16, (N, K))
        q[:, K // 2:] = q[:, : K - K // 2][:, : K // 2]
        s = np.exp2(rng.integers(-6, -2, (N, -(-K // block)))).astype(np.float32)
        out.append((A, q, s, block))
    return out


def _weight(q: np.ndarray, s: np.ndarray, block: int) -> np.ndarray:
    K = q.shape[1]
    return ((q - 8) * np.repeat(s, block, axis=1)[:, :K]).T.astype(np.float32)


def _fitted_kernel_here() -> str | None:
    from qref.profiles.cpu import host_cpu

    if not ort.__version__.startswith("1.32"):
        return f"onnxruntime {ort.__version__} is not the fitted 1.32"
    if platform.machine() not in ("x86_64", "AMD64") or not host_cpu().has("avx512f"):
        return f"{platform.machine()} without AVX-512F: MLAS runs another kernel"
    return None


@pytest.mark.parametrize("level,threads", [(0, 1), (1, 2)])
def test_matmul_nbits_float_stage_equals_its_profile(level: int, threads: int) -> None:
    why = _fitted_kernel_here()
    total = 0
    for A, q, s, block in _problems(10 * level + threads):
        D = _nbits(A, q, s, block, level, threads)
        W = _weight(q, s, block)
        if why:  # the bound of mma.md §10.4 on a corner, against math.fsum (exact products, one rounding)
            bound = qm.matmul_bound(A[:4], W[:, :4], instruction=qm.kernel(qm.KernelAccumulation())).bound
            for i in range(min(4, A.shape[0])):
                for j in range(min(4, W.shape[1])):
                    exact = math.fsum(float(x) * float(y) for x, y in zip(A[i], W[:, j]))
                    assert abs(float(D[i, j]) - exact) <= bound[i, j] * (1 + 2.0**-40)
            continue
        want = PROF.dispatch.matmul(A, W)
        bad = np.argwhere(want.view(np.uint32) != D.view(np.uint32))
        assert bad.size == 0, (PROF.name, level, threads, A.shape, W.shape, bad[:5])
        total += D.size
    if why:
        pytest.skip(f"{why}: only the bound was checked")
    assert total >= 10**6


def test_m1_is_not_modelled() -> None:
    """M = 1 is a matrix-vector kernel the profile refuses (mma.md §12 paths)."""
    A = np.ones((1, 64), np.float32)
    with pytest.raises(QrefError, match="matrix-vector"):
        PROF.dispatch.matmul(A, np.ones((64, 8), np.float32))
