"""qwix's quantized dot_general and AQT's int8 dot_general with a dequantized float32 output (matmul.md §16), eager,
jitted with the scales as arguments and jitted with the scales as constants, against an independent
transcription written here (int64 sums, numpy float32 steps) and against qref's profiles: float32 outputs compared
as uint32, >= 10^6 outputs per target.

The operands are edge-heavy: int8 storage ends, accumulators beyond 2^24 (the int32 -> float32 conversion
rounds), non-dyadic per-tensor and per-column scales (the two scale products and the single multiplier
fl32(a_s b_s) round differently in about a third of the outputs)."""

from __future__ import annotations

import numpy as np
import pytest

from qref.recipes.qmatmul import matmul_integer_to_float

pytest.importorskip("jax")
pytest.importorskip("qwix")
pytest.importorskip("aqt.jax.v2.aqt_dot_general")
from qref.harness.adapters.aqt import PROFILES as AQT_PROFILES
from qref.harness.adapters.aqt import aqt_int8_dot
from qref.harness.adapters.qwix import DOT_PROFILES, qwix_int8_dot

f32 = np.float32
MODES = ("eager", "jit", "jit_constant_scales")


def operands(rng: np.random.Generator, M: int, K: int, N: int, lo: int = -128, hi: int = 127):
    a = rng.integers(lo, hi + 1, (M, K))
    b = rng.integers(-128, 128, (K, N))
    ends = rng.random((M, K)) < 0.4
    a = np.where(ends, np.where(rng.random((M, K)) < 0.5, lo, hi), a)
    b = np.where(rng.random((K, N)) < 0.4, np.where(rng.random((K, N)) < 0.5, -128, 127), b)
    return a, b.astype(np.int8)


def expected(a, b, za, a_s, b_s, folded: bool) -> np.ndarray:
    """fl32(fl32(fl32(acc) a_s) b_s), or fl32(fl32(acc) fl32(a_s b_s)) where XLA folds constant scales."""
    acc = (a.astype(np.int64) - za) @ b.astype(np.int64)
    acc = ((acc + 2**31) % 2**32) - 2**31
    fa = acc.astype(f32)
    b_s = np.asarray(b_s, f32)
    if folded:
        return (fa * (f32(a_s) * b_s).astype(f32)).astype(f32)
    return ((fa * f32(a_s)).astype(f32) * b_s).astype(f32)


def problems(rng: np.random.Generator, asymmetric: bool):
    """(a, b, za, a_s, b_s) with >= 10^6 outputs in all."""
    for M, K, N, per_col in ((1024, 32, 1024, True), (128, 1100, 128, True), (256, 64, 256, False), (256, 1, 64, True),
                             (1, 65, 33, True), (1, 65, 33, False)):
        if asymmetric:
            a, b = operands(rng, M, K, N, 0, 255)
            a, za = a.astype(np.uint8), 128
        else:
            a, b = operands(rng, M, K, N)
            a, za = a.astype(np.int8), 0
        b_s = (np.abs(rng.standard_normal(N)) * 0.01 + 1e-3).astype(f32) if per_col else f32(0.0371)
        yield a, b, za, f32(0.0173 if K > 1 else 0.7), b_s


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["qwix", "aqt"])
def test_int8_dot_bit_exact(backend, mode):
    rng = np.random.default_rng(17 + MODES.index(mode))
    profile = (DOT_PROFILES if backend == "qwix" else AQT_PROFILES)[mode]
    total = 0
    for asym in ((False, True) if backend == "qwix" else (False,)):
        for a, b, za, a_s, b_s in problems(rng, asym):
            if backend == "qwix":
                got = qwix_int8_dot(a, b, a_s, b_s, np.asarray(za, a.dtype), np.int8(0), mode)
            else:
                got = aqt_int8_dot(a, b, a_s, b_s, mode)
            # XLA folds the constant scales, except for one row of A with per-column B scales (matmul.md §16)
            folded = mode == "jit_constant_scales" and not (a.shape[0] == 1 and np.size(b_s) > 1)
            want = expected(a, b, za, a_s, b_s, folded=folded)
            assert got.dtype == np.float32 and got.shape == want.shape
            bad = got.view(np.uint32) != want.view(np.uint32)
            assert not bad.any(), (backend, mode, int(bad.sum()), got[bad][:3], want[bad][:3])
            r = matmul_integer_to_float(a, b, a_scale=a_s, b_scale=b_s, a_zero_point=np.asarray(za, a.dtype),
                                        a_storage=a.dtype.name, b_storage="int8",
                                        profile=profile if folded or mode != "jit_constant_scales" else
                                        f"{backend}_int8_dot")
            assert r.values.tobytes() == want.tobytes()
            total += got.size
    assert total >= 10**6


def test_orders_differ():
    """The sequential and folded orders are distinguishable on these operands (the comparison can fail)."""
    rng = np.random.default_rng(3)
    a, b, za, a_s, b_s = next(problems(rng, False))
    seq, fold = expected(a, b, za, a_s, b_s, False), expected(a, b, za, a_s, b_s, True)
    assert 0.1 < np.mean(seq.view(np.uint32) != fold.view(np.uint32)) < 0.9
