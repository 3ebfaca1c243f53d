"""Regressions found by differential fuzzing of qref's matrix products against the real backends (mma.md §7, §12).

- numpy's OpenBLAS SkylakeX small-matrix kernel (mma.md §12.1): the tail path of the last N mod 16 columns runs
  only for N mod 16 <= 8 (else every column is the sequential FMA chain), and in it the last M mod 4 rows of the
  last (N mod 16) mod 4 columns reduce their 16 lanes by halving, not by adjacent pairs; checked against numpy
  itself where its OpenBLAS core is SkylakeX;
- a GEMM with K = 0 is a QrefError (mma.md §7), not a ValueError from inside the K loop.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import qref.mma as qm
from qref.errors import QrefError
from qref.mma.cpu_profiles import NUMPY_OPENBLAS_SKYLAKEX_1T, PROFILES

sys.path.insert(0, str(Path(__file__).parent))
from test_cpu_gemm_profiles import _openblas_core

# (M, N, K): the small kernel (M N K <= 10^6, K >= 32) at row remainders M mod 4 = 1..3 and column remainders
# N mod 16 = 1..15 (9..15: no tail path); each failed before the fix (1 to 20 outputs each)
_SHAPES = ((2, 2, 32), (3, 3, 64), (5, 19, 33), (15, 17, 100), (6, 22, 48), (7, 25, 40), (5, 31, 64), (11, 29, 447))


def _bits(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).copy()
    u[np.isnan(x)] = 0x7FC00000
    return u


def test_numpy_small_kernel_edges_equal_numpy() -> None:
    """The fitted record equals numpy @ at the small kernel's row and column remainders (mma.md §12.1)."""
    core = _openblas_core()
    prof = NUMPY_OPENBLAS_SKYLAKEX_1T
    if core != "SkylakeX" or np.__version__ != prof.version.split()[-1]:
        pytest.skip(f"OpenBLAS core {core!r} / numpy {np.__version__}: the profile's kernel is not the one here")
    rng = np.random.default_rng(20261207)
    total = 0
    for M, N, K in _SHAPES:
        A = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-8, 8, (M, K)))).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        A[0, : K // 2] = -A[0, K // 2: 2 * (K // 2)]  # a cancelling row: its result is the order's rounding error
        B[: K // 2, :] = B[K // 2: 2 * (K // 2), :]
        for p in (prof, PROFILES[1]):  # the single-threaded and threaded records share the small kernel
            want = p.dispatch.matmul(A, B)
            got = A @ B
            bad = np.argwhere(_bits(want) != _bits(got))
            assert bad.size == 0, (p.name, (M, N, K), bad[:5].tolist())
        total += M * N
    assert total >= 400


def test_small_kernel_paths() -> None:
    """paths(): tail only for N mod 16 in 1..8; the edge block is the last M mod 4 rows x (N mod 16) mod 4 cols."""
    d = NUMPY_OPENBLAS_SKYLAKEX_1T.dispatch
    rows = slice(0, 5)
    assert d.paths(5, 19, 64) == [(rows, slice(0, 16), d.small), (rows, slice(16, 19), d.small_tail),
                                  (slice(4, 5), slice(16, 19), d.small_edge)]
    assert d.paths(5, 25, 64) == [(rows, slice(0, 25), d.small)]  # t = 9 > tail_max
    assert d.paths(8, 20, 64) == [(slice(0, 8), slice(0, 16), d.small), (slice(0, 8), slice(16, 20), d.small_tail)]
    assert d.paths(6, 22, 31) == [(slice(0, 6), slice(0, 22), d.small)]  # K < tail_min_k
    assert d.paths(3, 2, 32) == [(slice(0, 3), slice(0, 2), d.small_tail), (slice(0, 3), slice(0, 2), d.small_edge)]


def test_edge_record_is_halving() -> None:
    """The tail and edge records on K = 16 terms, one per lane: 2^24 at lane 0, 1 at lanes 2 and 3 (mma.md §10.2).

    Adjacent pairs: l0 + l1 = 2^24, l2 + l3 = 2, then 2^24 + 2 (exact). Halving: l0 + l2 = 2^24 + 1 -> 2^24 (tie
    to even), l1 + l3 = 1, then 2^24 + 1 -> 2^24."""
    d = NUMPY_OPENBLAS_SKYLAKEX_1T.dispatch
    a = np.zeros((1, 16), np.float32)
    a[0, 0], a[0, 2], a[0, 3] = 2.0**24, 1.0, 1.0
    b = np.ones((16, 1), np.float32)
    assert qm.matmul(a, b, instruction=qm.kernel(d.small_tail))[0, 0] == np.float32(2.0**24 + 2)
    assert qm.matmul(a, b, instruction=qm.kernel(d.small_edge))[0, 0] == np.float32(2.0**24)


@pytest.mark.parametrize("p", PROFILES, ids=[p.name for p in PROFILES])
def test_k_zero_is_a_qref_error(p: object) -> None:
    with pytest.raises(QrefError, match="K = 0"):
        p.dispatch.matmul(np.zeros((3, 0), np.float32), np.zeros((0, 3), np.float32))  # type: ignore[attr-defined]
    with pytest.raises(QrefError, match="K = 0"):
        qm.matmul(np.zeros((2, 0), np.float32), np.zeros((0, 2), np.float32),
                  instruction=qm.kernel(qm.KernelAccumulation()))


# ---- quantized matmul requantization (matmul.md §5.2, §5.3) --------------------------------------------------
def test_overflowed_float_multiplier_times_zero_is_unspecified() -> None:
    """a_s = b_s = 1e30, y_s = 1e-30: m = fl32(fl32(a_s b_s) / y_s) = Inf. acc > 0 -> +Inf -> the high bound, acc < 0
    -> the low bound, acc = 0 -> NaN: unspecified (matmul.md §5.2 C2), where qref used to return a code from the
    NaN's integer cast. The specified elements equal ONNX Runtime's QLinearMatMul (clamp, then cvtps2dq)."""
    from qref.recipes import qmatmul as Q

    a = np.array([[0], [1], [-1], [5]], np.int8)
    b = np.ones((1, 3), np.int8)
    pipe = Q.QuantizedMatmul(Q.IntOperand("int8"), Q.IntOperand("int8"), "int8", Q.matmul_rules("onnxruntime"))
    s = (np.float32(1e30), np.float32(1e30), np.float32(1e-30))
    r = Q.quantized_matmul(a, b, a_scale=s[0], b_scale=s[1], y_scale=s[2], y_zero_point=np.int8(3), pipeline=pipe)
    assert r.unspecified.tolist() == [[True] * 3] + [[False] * 3] * 3
    assert r.values[1:].tolist() == [[127] * 3, [-128] * 3, [127] * 3]
    ort = pytest.importorskip("onnxruntime")
    from test_matmul import _model

    feeds = {"a": a, "a_scale": np.array(s[0]), "a_zero_point": np.array(0, np.int8), "b": b,
             "b_scale": np.array(s[1]), "b_zero_point": np.array(0, np.int8), "y_scale": np.array(s[2]),
             "y_zero_point": np.array(3, np.int8)}
    sess = ort.InferenceSession(_model("QLinearMatMul", feeds, "int8").SerializeToString(),
                                providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)[0].astype(np.int64)
    assert np.array_equal(got[1:], r.values[1:])


def test_left_shift_beyond_63_is_unspecified() -> None:
    """gemmlowp's double rounding with shift >= 32 overflows int32 for any acc != 0 (undefined in C, matmul.md §5.3);
    numpy's int64 shift by >= 64 gives 0, which hid the overflow: m = 1e58 (shift 193) looked like a defined 0."""
    from qref.recipes import qmatmul as Q

    x = np.array([0, 1, -1, 7])
    for shift in (32, 63, 64, 193):
        _, bad = Q.multiply_by_quantized_multiplier(x, np.full(4, 1 << 30), np.full(4, shift))
        assert bad.tolist() == [False, True, True, True], shift
    pipe = Q.QuantizedMatmul(Q.IntOperand("int8"), Q.IntOperand("int8"), "int8", Q.matmul_rules("gemmlowp"))
    r = Q.quantized_matmul(x.reshape(4, 1).astype(np.int8), np.ones((1, 2), np.int8), a_scale=np.float32(1e19),
                           b_scale=np.float32(1e19), y_scale=np.float32(1e-20), pipeline=pipe)
    assert r.unspecified.tolist() == [[False, False]] + [[True, True]] * 3
    assert r.values[0].tolist() == [0, 0]


def test_onnxruntime_sgemm_keeps_a_negative_zero_sum() -> None:
    """MLAS stores the first K block's sum (store 'first_block', mma.md §12): products of -1e-30 and 1e-30 round to
    -0 in every FMA and the result stays -0 (qref gave +0 + -0 = +0); exact -0 products summed from the +0 lanes
    give +0. Checked against onnxruntime's MatMul on one thread where the profile's version is installed."""
    from qref.mma.cpu_profiles import ORT_MLAS_1T

    rec = ORT_MLAS_1T.dispatch
    tiny = np.full((2, 300), -1e-30, np.float32), np.full((300, 3), 1e-30, np.float32)
    negzero = np.full((2, 5), -0.0, np.float32), np.ones((5, 3), np.float32)
    assert (_bits(rec.matmul(*tiny)) == 0x80000000).all()
    assert (_bits(rec.matmul(*negzero)) == 0).all()
    ort = pytest.importorskip("onnxruntime")
    import os
    import platform

    from qref.profiles.cpu import host_cpu

    if not ort.__version__.startswith(ORT_MLAS_1T.version.split()[-1]) or platform.machine() != "x86_64" or \
            not host_cpu().has("avx512f"):
        pytest.skip(f"onnxruntime {ort.__version__} on {platform.machine()} without AVX-512F: not the profile's "
                    "kernel")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import matmul_targets as T

    os.environ["QREF_ORT_THREADS"] = "1"
    try:
        for A, B in (tiny, negzero, (np.full((4, 129), -1e-30, np.float32), np.full((129, 4), 1e-30, np.float32))):
            assert np.array_equal(_bits(T.ort_f32(A, B)), _bits(rec.matmul(A, B))), A.shape
    finally:
        del os.environ["QREF_ORT_THREADS"]


def _tiny(M: int, K: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """Products -1e-60: every FMA from +0 rounds them to -0 (an exact sum of zero sign -)."""
    return np.full((M, K), -1e-30, np.float32), np.full((K, N), 1e-30, np.float32)


def test_zero_signs_of_the_numpy_and_torch_paths() -> None:
    """Zero signs by path (mma.md §10.1 zero_padding, §12 single_product), exact: numpy's small kernel keeps -0
    (K = 2..31, no tail), its tail pads the last 16-term group with +0 products (K mod 16 != 0: +0; K = 48: -0),
    its K = 1 call is +0 + fl(a b) = +0; torch's K = 1 call stores fl(a b) = -0. Then against the libraries where
    the profiles' kernels are the ones here."""
    from qref.mma.cpu_profiles import TORCH_MKL_AVX512, TORCH_MKL_AVX512_SPR
    from qref.profiles.cpu import host_cpu

    np_d, t_d = NUMPY_OPENBLAS_SKYLAKEX_1T.dispatch, TORCH_MKL_AVX512.dispatch
    want = {(3, 5, 2): 0x80000000, (3, 5, 31): 0x80000000, (3, 3, 33): 0, (3, 3, 48): 0x80000000, (5, 19, 65): 0,
            (4, 4, 1): 0}
    for (M, N, K), sign in want.items():
        got = _bits(np_d.matmul(*_tiny(M, K, N)))
        cols = slice(16, N) if N > 16 else slice(0, N)  # (5, 19, 65): the tail columns
        assert (got[:, cols] == sign).all(), (M, N, K, got)
    assert (_bits(np_d.matmul(*_tiny(5, 65, 19)))[:, :16] == 0x80000000).all()  # the small columns keep -0
    assert (_bits(t_d.matmul(*_tiny(16, 1, 16))) == 0x80000000).all()
    assert (_bits(t_d.matmul(np.full((16, 1), -0.0, np.float32), np.ones((1, 16), np.float32))) == 0x80000000).all()
    assert (_bits(t_d.matmul(*_tiny(16, 2, 16))) == 0).all()  # K = 2: the block is added to a zeroed D
    if _openblas_core() == "SkylakeX" and np.__version__ == NUMPY_OPENBLAS_SKYLAKEX_1T.version.split()[-1]:
        for M, N, K in want:
            A, B = _tiny(M, K, N)
            assert np.array_equal(_bits(A @ B), _bits(np_d.matmul(A, B))), (M, N, K)
    s_d = TORCH_MKL_AVX512_SPR.dispatch  # the Intel AVX512-FP16 / AMX record stores the first block: -0 at K = 2
    assert (_bits(s_d.matmul(*_tiny(16, 2, 16))) == 0x80000000).all()
    torch = pytest.importorskip("torch")
    cpu = host_cpu()
    if cpu.vendor == "GenuineIntel" and cpu.has("avx512_fp16") and cpu.has("amx_tile"):
        t_d = s_d  # MKL's kernel on this CPU (TORCH_MKL_AVX512_SPR.selected_by)
    elif cpu.vendor != "AuthenticAMD":
        return  # no record of MKL's kernel on this CPU
    if f"torch {torch.__version__}" == TORCH_MKL_AVX512.version and \
            torch.backends.cpu.get_cpu_capability() == "AVX512":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for A, B in (_tiny(16, 1, 16), _tiny(16, 2, 16), (np.full((16, 1), -0.0, np.float32),
                                                            np.ones((1, 16), np.float32))):
                got = torch.matmul(torch.from_numpy(A), torch.from_numpy(B)).numpy()
                assert np.array_equal(_bits(got), _bits(t_d.matmul(A, B))), A.shape
        finally:
            torch.set_num_threads(threads)


def test_torch_odd_k_between_192_and_384_is_refused() -> None:
    """The torch profile does not model an odd K in (192, 384) (its evidence says so): dispatch refuses it with a
    QrefError (mma.md §12; the harness reads it as unsupported) instead of returning other bits (fuzzing found
    16 x 16 x 193: all 256 outputs differ from torch 2.13 on cancelling operands)."""
    from qref.mma.cpu_profiles import TORCH_MKL_AVX512

    d = TORCH_MKL_AVX512.dispatch
    for K in (193, 301, 383):
        with pytest.raises(QrefError, match=f"odd K = {K}"):
            d.matmul(np.ones((16, K), np.float32), np.ones((K, 16), np.float32))
    for K in (191, 192, 194, 384, 385):  # even, or outside the range: modelled
        assert d.matmul(np.ones((16, K), np.float32), np.ones((K, 16), np.float32))[0, 0] == K
