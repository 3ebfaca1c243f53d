"""The float stage of MLX's CPU quantized_matmul held bit for bit to its fitted profile (mma.md §12.1,
``mlx-0.32.4-cpu-quantized-matmul-f32``): x @ W with W = s q + b the dequantized 4-bit weight, a sequential sum of
rounded products, where the fitted build runs (mlx 0.32.4, x86-64); elsewhere the test is skipped with the reason.

Scales are powers of two and b = -8 s, so W is exact in float32 and the float stage alone decides the bits.
>= 10^6 outputs: 1000 x 1000 at K = 32 plus shapes up to K = 2048 (M = 1 included); operands random, spread over
2^-20 .. 2^20, cancelling, with zeros and -0.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest

from qref.mma.cpu_profiles import MLX_CPU_QMM as PROF

mx = pytest.importorskip("mlx.core")


def _qmm(x: np.ndarray, q: np.ndarray, s: np.ndarray, group: int) -> np.ndarray:
    N, K = q.shape
    words = (q.reshape(N, K // 8, 8).astype(np.uint32) << (4 * np.arange(8, dtype=np.uint32))).sum(-1)
    y = mx.quantized_matmul(mx.array(x), mx.array(words.astype(np.uint32)), mx.array(s), mx.array(-8 * s),
                            transpose=True, group_size=group, bits=4, stream=mx.cpu)
    return np.array(y, np.float32)


def test_quantized_matmul_float_stage_equals_its_profile() -> None:
    if mx.__version__ != PROF.version.split()[-1] or platform.machine() != "x86_64":
        pytest.skip(f"mlx {mx.__version__} on {platform.machine()}: not the fitted build")
    rng = np.random.default_rng(5)
    total = 0
    for M, N, K, group, spread in ((1000, 1000, 32, 32, 20), (64, 64, 1024, 64, 4), (1, 128, 2048, 128, 12),
                                   (8, 40, 512, 32, 20)):
        x = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread + 1, (M, K)))).astype(np.float32)
        x[rng.random((M, K)) < 0.02] = 0.0
        x[rng.random((M, K)) < 0.01] = -0.0
        q = rng.integers(0, 16, (N, K))
        x[1::5, K // 2:] = -x[1::5, : K // 2]  # cancelling halves (with the repeated codes below)
        q[:, K // 2:] = q[:, : K // 2]
        s = np.exp2(rng.integers(-6, -2, (N, K // group))).astype(np.float32)
        W = (np.repeat(s, group, axis=1) * (q - 8)).T.astype(np.float32)
        D = _qmm(x, q, s, group)
        bad = np.argwhere(PROF.dispatch.matmul(x, W).view(np.uint32) != D.view(np.uint32))
        assert bad.size == 0, (PROF.name, x.shape, W.shape, bad[:5])
        total += D.size
    assert total >= 10**6
