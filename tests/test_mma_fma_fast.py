"""The whole-array FMA chain (qref.mma.algorithms._fma_chain_fast, mma.md §3.7) equals the reference chain (one
qref.core.arith fma at a time) bit for bit, and a GEMM that hands the chain its whole K equals the chain of
instruction-K steps through C (issue 35: the FMA rows of benchmarks/mma.py).

Operands: random, spread over wide exponent ranges (products absorbed, cancellations), float32 subnormals,
overflowing float32 sums, float64 values at the fast path's range limits and beyond it (the reference then runs),
Inf and NaN (the reference runs). The reference itself is held to mmasim by tests/test_mma.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import qref.mma as qm
from qref.mma.algorithms import _F64_SAFE, FMAChain, _fma_chain_fast

F = FMAChain()


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


def _spread(rng: np.random.Generator, shape: tuple[int, ...], lo: int, hi: int, dt: type) -> np.ndarray:
    return (rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi + 1, shape))).astype(dt)


def _cases(dt: type) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(35)
    M, N, K = 24, 20, 64
    out = []
    for lo, hi in ((0, 0), (-30, 30), (-60, 60)) + (((-140, -120), (60, 64)) if dt == np.float32 else
                                                     ((-150, 150), (-299, -280), (280, 299))):
        a, b = _spread(rng, (M, 1, K), lo, hi, dt), _spread(rng, (1, N, K), lo, hi, dt)
        c = _spread(rng, (M, N), lo, hi, dt)
        out.append((f"2^[{lo}, {hi}]", a, b, c))
    a, b = _spread(rng, (M, 1, K), -8, 8, dt), _spread(rng, (1, N, K), -8, 8, dt)
    a[..., K // 2:] = -a[..., : K // 2]
    b[..., K // 2:] = b[..., : K // 2]
    a[::3, :, 5] *= dt(1 + 2.0**-12)
    out.append(("cancelling halves", a, b, np.zeros((M, N), dt)))
    z = a.copy()
    z[::2] = 0.0
    z[1::4] = -0.0
    out.append(("zeros and -0", z, b, np.full((M, N), -0.0, dt)))
    return out


@pytest.mark.parametrize("dt,fd", [(np.float32, "float32"), (np.float64, "float64")])
def test_fast_chain_equals_the_reference(dt: type, fd: str) -> None:
    taken = 0
    for name, a, b, c in _cases(dt):
        want = FMAChain.reference(a, b, c, fd)
        fast = _fma_chain_fast(a, b, c, fd)
        got = F.dot(a, b, c, fd, fd, fd, fd)
        assert np.array_equal(_bits(got), _bits(want)), (fd, name)
        if fast is not None:
            taken += 1
            assert fast.dtype == want.dtype and np.array_equal(_bits(fast), _bits(want)), (fd, name)
    assert taken >= 4  # the fast path ran on most of these (the test compares it, not only the fallback)


def test_float32_overflow_and_subnormals_take_the_fast_path() -> None:
    a = np.full((2, 1, 8), 2.0**100, np.float32)
    b = np.full((1, 3, 8), 2.0**60, np.float32)
    b[..., 4:] = -b[..., 4:]
    c = np.zeros((2, 3), np.float32)
    fast = _fma_chain_fast(a, b, c, "float32")
    assert fast is not None and np.isinf(fast).all()  # the running sum overflows at k = 0 and stays +Inf
    assert np.array_equal(_bits(fast), _bits(FMAChain.reference(a, b, c, "float32")))
    s = np.full((2, 1, 8), 2.0**-140, np.float32)  # subnormal operands, products and sums
    t = np.full((1, 3, 8), 0.75, np.float32)
    fast = _fma_chain_fast(s, t, c, "float32")
    assert fast is not None and np.array_equal(_bits(fast), _bits(FMAChain.reference(s, t, c, "float32")))


def test_outside_the_fast_conditions_the_reference_runs() -> None:
    a = np.ones((2, 1, 4))
    b = np.ones((1, 2, 4))
    c = np.zeros((2, 2))
    for bad in (np.inf, np.nan, _F64_SAFE[1] * 4, _F64_SAFE[0] / 4):
        x = a.copy()
        x[0, 0, 1] = bad
        assert _fma_chain_fast(x, b, c, "float64") is None
        want = FMAChain.reference(x, b, c, "float64")
        assert np.array_equal(_bits(F.dot(x, b, c, "float64", "float64", "float64", "float64")), _bits(want))
    x = a.astype(np.float32)
    x[0, 0, 2] = np.nan
    assert _fma_chain_fast(x, b.astype(np.float32), c.astype(np.float32), "float32") is None


@pytest.mark.parametrize("name", ["CDNA3/mfma/f32_16x16x4_f32", "Hopper/mma/m16n8k4.f64.f64.f64.f64"])
def test_whole_k_gemm_equals_the_chain_of_instruction_steps(name: str) -> None:
    """matmul gives FMAChain the whole K (whole_k); the kernel's steps of k through C give the same bits."""
    ins = qm.get(*name.split("/"))
    dt = np.float32 if ins.d_format == "float32" else np.float64
    rng = np.random.default_rng(3)
    A, B = _spread(rng, (16, 64), -20, 20, dt), _spread(rng, (64, 16), -20, 20, dt)
    C = _spread(rng, (16, 16), -20, 20, dt)
    got = qm.matmul(A, B, C, instruction=ins)
    d = C
    for s in range(0, 64, ins.k):  # the chain of instructions, each from the reference fma
        d = FMAChain.reference(A[:, None, s:s + ins.k], B[s:s + ins.k].T[None], d, ins.d_format)
    assert np.array_equal(_bits(got), _bits(d))
    P = 16  # with promotion every 16 elements the chain restarts per promotion
    got = qm.matmul(A, B, instruction=ins, promote_every=P) if ins.d_format == "float32" else None
    if got is not None:
        acc = np.zeros((16, 16), np.float32)
        for s in range(0, 64, P):
            part = np.zeros((16, 16), dt)
            for t in range(s, s + P, ins.k):
                part = FMAChain.reference(A[:, None, t:t + ins.k], B[t:t + ins.k].T[None], part, ins.d_format)
            acc = (acc.astype(np.float64) + part.astype(np.float64)).astype(np.float32)
        assert np.array_equal(_bits(got), _bits(acc))


def test_float32_midpoint_of_the_float64_sum_takes_the_round_to_odd_step() -> None:
    """c = 2^30 + 2^7, a b = 2^6 (1 - 2^-46): RN64(a b + c) = 2^30 + 2^7 + 2^6 is a float32 midpoint whose exact
    value lies below it, so RN32 gives 2^30 + 2^7 while rounding RN64's tie to even would give 2^30 + 2^8."""
    a = np.full((1, 1, 1), np.float32(2.0**6 * (1 + 2.0**-23)))
    b = np.full((1, 1, 1), np.float32(1 - 2.0**-23))
    c = np.full((1, 1), np.float32(2.0**30 + 2.0**7))
    fast = _fma_chain_fast(a, b, c, "float32")
    assert fast is not None and float(fast[0, 0]) == 2.0**30 + 2.0**7
    assert float(np.float32(float(a[0, 0, 0]) * float(b[0, 0, 0]) + float(c[0, 0]))) == 2.0**30 + 2.0**8
    assert np.array_equal(_bits(fast), _bits(FMAChain.reference(a, b, c, "float32")))


def test_two_sum_into_buffers_is_exact_and_equals_the_plain_form() -> None:
    """core.arith.two_sum with out= / tmp= buffers (the FMA chain's form) gives the bits of the plain form, and
    s + t == a + b exactly (Fractions) on random float64 pairs of every magnitude relation and sign."""
    from fractions import Fraction

    from qref.core.arith import two_sum

    rng = np.random.default_rng(5)
    a = rng.standard_normal(4000) * np.exp2(rng.integers(-60, 60, 4000))
    b = rng.standard_normal(4000) * np.exp2(rng.integers(-60, 60, 4000))
    s0, t0 = two_sum(a, b)
    s, t, bb = np.empty_like(a), np.empty_like(a), np.empty_like(a)
    two_sum(a, b, out=(s, t), tmp=bb)
    assert np.array_equal(s.view(np.int64), s0.view(np.int64)) and np.array_equal(t.view(np.int64), t0.view(np.int64))
    for i in range(0, 4000, 7):
        assert Fraction(float(s[i])) + Fraction(float(t[i])) == Fraction(float(a[i])) + Fraction(float(b[i]))
        assert s[i] == a[i] + b[i]
