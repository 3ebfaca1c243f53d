"""qref.transforms (docs/spec/transforms.md): Sylvester matrices against scipy, the exact arithmetic against an
oracle of Fractions (one rounding proven by comparing the result's rounding interval with the exact value, by
squares where 1/sqrt(n) is irrational), the two kernel orders on hand-derived cases, signs, axes, inverses, errors.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import scipy.linalg

from qref.errors import QrefError
from qref.transforms import ARITHMETICS, hadamard, hadamard_matrix, inverse_hadamard, random_signs

BF16 = np.dtype(ml_dtypes.bfloat16)
UINT = {np.dtype(np.float64): np.uint64, np.dtype(np.float32): np.uint32, np.dtype(np.float16): np.uint16,
        BF16: np.uint16}
LAYOUT = {np.dtype(np.float64): (11, 52), np.dtype(np.float32): (8, 23), np.dtype(np.float16): (5, 10),
          BF16: (8, 7)}


# ---------------------------------------------------------------------------------------------------------
# the oracle: is c the nearest-even rounding of the real number v (given exactly, or as sign * sqrt(sq))?
# ---------------------------------------------------------------------------------------------------------
def _magnitude(bits: int, dt: np.dtype) -> Fraction:
    """Exact value of a finite non-negative bit pattern of dt (from the IEEE layout, not from numpy)."""
    e, m = LAYOUT[dt]
    bias = (1 << (e - 1)) - 1
    ef, f = bits >> m, bits & ((1 << m) - 1)
    if ef == 0:
        return Fraction(f, 1 << m) * Fraction(2) ** (1 - bias)
    return (1 + Fraction(f, 1 << m)) * Fraction(2) ** (ef - bias)


def _cmp(a: Fraction, sq: Fraction | None, v: Fraction | None) -> int:
    """sign(a - |value|) with |value| = sqrt(sq) (a >= 0: compare squares) or |v|."""
    if sq is not None:
        return (a * a > sq) - (a * a < sq)
    assert v is not None
    return (a > abs(v)) - (a < abs(v))


def check_rounded(bits: int, dt: np.dtype, negative: bool, v: Fraction | None = None,
                  sq: Fraction | None = None) -> None:
    """Assert that the pattern ``bits`` of dt is RNE(value), value = v or (-1)^negative sqrt(sq), overflow to
    Inf: |value| lies inside the pattern's rounding interval (a midpoint only when the pattern is even)."""
    e, m = LAYOUT[dt]
    width = 1 + e + m
    sign = bits >> (width - 1)
    mag = bits & ((1 << (width - 1)) - 1)
    inf = ((1 << e) - 1) << m
    zero_value = (v == 0) if v is not None else (sq == 0)
    if zero_value:
        assert mag == 0, f"{bits:#x} for an exact zero"
        return
    assert sign == int(negative), f"{bits:#x}: sign {sign}, value negative {negative}"
    top = _magnitude(inf - 1, dt)
    ulp_top = top - _magnitude(inf - 2, dt)
    over = top + ulp_top / 2  # RNE overflow threshold: values >= max + ulp/2 round to Inf (max is odd)
    if mag == inf:
        assert _cmp(over, sq, v) <= 0, f"{bits:#x} is Inf below the overflow threshold"
        return
    assert mag < inf, f"{bits:#x} is NaN for a finite value"
    c = _magnitude(mag, dt)
    lo = (c + _magnitude(mag - 1, dt)) / 2 if mag > 0 else Fraction(0)
    hi = (c + _magnitude(mag + 1, dt)) / 2 if mag + 1 < inf else over
    even = mag % 2 == 0
    r_lo, r_hi = _cmp(lo, sq, v), _cmp(hi, sq, v)
    assert r_lo < 0 or (r_lo == 0 and even), f"{bits:#x}: the value lies below its rounding interval"
    assert r_hi > 0 or (r_hi == 0 and even), f"{bits:#x}: the value lies above its rounding interval"


def exact_value(x: np.ndarray, n: int, s: np.ndarray, j: int, inverse: bool) -> Fraction:
    """S_j = sum_i M_ji x_i with M = H D (forward) or D H (inverse), from scipy's matrix and Fractions."""
    H = scipy.linalg.hadamard(n)
    if inverse:
        return int(s[j]) * sum(int(H[j, i]) * Fraction(float(x[i])) for i in range(n))
    return sum(int(H[j, i]) * int(s[i]) * Fraction(float(x[i])) for i in range(n))


def check_exact(x: np.ndarray, y: np.ndarray, n: int, s: np.ndarray, normalize: bool, inverse: bool) -> int:
    """Check every element of y = hadamard(x, n, ...) (rows of n along the last axis, finite x)."""
    u = UINT[y.dtype]
    xs, ys = x.reshape(-1, n), y.reshape(-1, n).view(u)
    checked = 0
    for r in range(xs.shape[0]):
        for j in range(n):
            S = exact_value(xs[r], n, s, j, inverse)
            b = int(ys[r, j])
            if not normalize:
                check_rounded(b, y.dtype, S < 0, v=S / n if inverse else S)
            elif (n.bit_length() - 1) % 2 == 0:
                check_rounded(b, y.dtype, S < 0, v=S / (1 << ((n.bit_length() - 1) // 2)))
            else:
                check_rounded(b, y.dtype, S < 0, sq=S * S / n)
            checked += 1
    return checked


def design(rng: np.random.Generator, rows: int, n: int, dt: np.dtype, spread: int) -> np.ndarray:
    """Values of dt with exponents over +-spread, zeros, and near-ties of the output grids."""
    x = rng.standard_normal((rows, n)) * 2.0 ** rng.integers(-spread, spread + 1, (rows, n))
    x[0] = 0.0
    x[1, ::2] = 1.0
    x[1, 1::2] = 2.0**-24  # sums 1 +- k 2^-24: float32 midpoints
    x[2] = rng.choice([1.0, -1.0, 0.5, 2.0**-11, 2.0**-8], n)
    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(dt) if dt == BF16 else x.astype(dt)


# ---------------------------------------------------------------------------------------------------------
def test_matrix_is_scipy_sylvester() -> None:
    for n in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        H = hadamard_matrix(n)
        assert np.array_equal(H, scipy.linalg.hadamard(n))
        assert np.array_equal(H, H.T) and np.array_equal(H @ H, n * np.eye(n, dtype=np.int64))
    assert hadamard_matrix(4, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("dt", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16],
                         ids=lambda d: d.name)
def test_exact_is_one_rounding(n: int, dt: np.dtype) -> None:
    rng = np.random.default_rng(n * 7 + dt.itemsize)
    spread = {8: 60, 4: 30, 2: 6}[dt.itemsize] if dt != BF16 else 60
    x = design(rng, 6, n, dt, spread)
    s = random_signs(n, 5).astype(np.int64)
    checked = 0
    for out in (dt, np.dtype(np.float32), np.dtype(np.float16)):
        y = hadamard(x, n, signs=s, dtype=out)
        assert y.dtype == out and y.shape == x.shape
        checked += check_exact(x.astype(np.float64) if dt != BF16 else x.astype(np.float32), y, n, s, True, False)
    assert checked == 3 * x.size


@pytest.mark.parametrize("n", [2, 8, 16, 128])
@pytest.mark.parametrize("normalize", [True, False])
def test_exact_inverse_and_unnormalized(n: int, normalize: bool) -> None:
    rng = np.random.default_rng(n)
    x = design(rng, 4, n, np.dtype(np.float32), 40)
    s = random_signs(n, 11).astype(np.int64)
    for inverse in (False, True):
        y = hadamard(x, n, signs=s, normalize=normalize, inverse=inverse)
        assert check_exact(x.astype(np.float64), y, n, s, normalize, inverse) == x.size


def test_exact_subnormal_and_overflow_results() -> None:
    """Results in float32's subnormal range and beyond its maximum (one rounding, overflow to Inf)."""
    rng = np.random.default_rng(3)
    tiny = (rng.standard_normal((8, 8)) * 2.0**-140).astype(np.float32)
    big = (rng.choice([-1.0, 1.0], (8, 8)) * 3.0e38).astype(np.float32)
    for x, n in ((tiny, 8), (tiny, 4), (big, 8), (big, 2)):
        for normalize in (True, False):
            y = hadamard(x, n, normalize=normalize)
            assert check_exact(x.astype(np.float64), y, n, np.ones(n, np.int64), normalize, False) == x.size
    y = hadamard(big, 2, normalize=False)
    assert np.isinf(y).any() and np.isfinite(y).any()
    assert (hadamard(tiny, 8) != 0).any() and (np.abs(hadamard(tiny, 8)) < 2.0**-126).any()


def test_exact_float64_wide_exponent_spread() -> None:
    """float64 groups spanning 2^-1074 .. 2^1000: the exact sum has ~2100 bits; one rounding to float32 and
    float64."""
    x = np.array([2.0**1000, -(2.0**-1074), 2.0**-500, 3.0, 2.0**1000, 2.0**-1074, -(2.0**-1074), 1.0])
    for out in (np.float64, np.float32, np.float16):
        for n in (2, 8):
            y = hadamard(x, n, dtype=out)
            assert check_exact(x, y, n, np.ones(n, np.int64), True, False) == x.size
    # the sticky bit decides: 2^1000 +- 2^947 (half an ulp of 2^1000) +- 2^-1074, unnormalized H_4
    x = np.array([2.0**1000, 2.0**947, 2.0**-1074, 0.0])
    y = hadamard(x, 4, normalize=False)
    assert check_exact(x, y, 4, np.ones(4, np.int64), False, False) == 4
    assert y.tolist() == [2.0**1000 + 2.0**948, 2.0**1000 - 2.0**947, 2.0**1000, 2.0**1000 - 2.0**947]


def test_exact_irrational_near_ties() -> None:
    """S / sqrt(2) for integers S < 2^53 whose quotient lies within 2^-10 ulp above a float64 midpoint (found by
    an integer search: isqrt(S^2 2^21) ends in binary 1000000000 after an even bit): only the exact comparison
    rounds them up."""
    x = np.array([[s, 0.0] for s in (5164570208161144, 4974838495542123, 8466739392276493)])
    y = hadamard(x, 2)
    assert check_exact(x, y, 2, np.ones(2, np.int64), True, False) == x.size


def test_composition_order() -> None:
    """y = c H D x: D first (signs multiply the input), H second; the inverse applies D last."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 32))
    s = random_signs(16, 2)
    assert (hadamard(x, 16, signs=s) == hadamard(x * np.tile(s, 2), 16)).all()
    assert (inverse_hadamard(x, 16, signs=s) == np.tile(s, 2) * inverse_hadamard(x, 16)).all()
    # against a float64 matmul of the same matrices where the products are exact and the sums are small integers
    xi = rng.integers(-50, 50, (5, 16)).astype(np.float64)
    H = scipy.linalg.hadamard(16)
    assert (hadamard(xi, 16, signs=s) == xi @ (H @ np.diag(s)).T / 4).all()
    assert (inverse_hadamard(xi, 16, signs=s) == xi @ (np.diag(s) @ H).T / 4).all()


def test_round_trip() -> None:
    """(§5) inverse(forward(x)) == x bit for bit when the forward result is exact in its dtype (here: float32
    inputs with a small exponent spread, n = 4^k, forward into float64); otherwise within the two roundings."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 64)) * 2.0 ** rng.integers(-8, 8, (64, 64))).astype(np.float32)
    s = random_signs(16, 9)
    for n, sg in ((4, None), (16, s), (64, None)):
        y = hadamard(x, n, signs=sg, dtype=np.float64)
        back = inverse_hadamard(y, n, signs=sg, dtype=np.float32)
        assert (back.view(np.uint32) == x.view(np.uint32)).all()
        y_u = hadamard(x, n, signs=sg, normalize=False, dtype=np.float64)
        assert (inverse_hadamard(y_u, n, signs=sg, normalize=False, dtype=np.float32) == x).all()
    # n = 2 4^k: y is rounded (irrational scale); the round trip in float64 is within 2 ulps of each input group's
    # 2-norm: |x' - x| <= ||delta_y||_2 + ulp/2 with ||delta_y||_2 <= 2^-53 ||y||_2 = 2^-53 ||x||_2
    x64 = x.astype(np.float64)
    for n in (2, 32):
        back = inverse_hadamard(hadamard(x64, n), n)
        norm = np.sqrt((x64.reshape(-1, n) ** 2).sum(axis=1, keepdims=True))
        err = np.abs(back - x64).reshape(-1, n)
        assert (err <= 2.0**-51 * norm).all()
        assert (back != x64).any()  # the rounding of y is visible: the bound, not equality, is the property


def test_axis_and_groups() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 3, 2)).astype(np.float32)
    s = random_signs(16, 1)
    y = hadamard(x, 16, axis=0, signs=s)
    assert y.shape == x.shape
    assert (y == np.moveaxis(hadamard(np.moveaxis(x, 0, -1), 16, signs=s), -1, 0)).all()
    assert (y[:16] == hadamard(x[:16], 16, axis=0, signs=s)).all()  # contiguous groups of n, transformed alone
    assert (y[16:] == hadamard(x[16:], 16, axis=-3, signs=s)).all()
    assert (hadamard(x, 1, axis=1) == x).all()  # H_1 = [1]


def test_seeded_signs() -> None:
    """random_signs: the top bit of PCG64(seed).random_raw(n) (computed here from numpy directly)."""
    for seed in (0, 1, 12345):
        raw = np.random.PCG64(seed).random_raw(64)
        want = np.array([1 - 2 * (int(w) >> 63) for w in raw], dtype=np.int8)
        assert (random_signs(64, seed) == want).all()
        assert set(np.unique(want)) == {-1, 1}
    x = np.arange(32, dtype=np.float64)
    assert (hadamard(x, 32, seed=7) == hadamard(x, 32, signs=random_signs(32, 7))).all()


def test_nonfinite_and_zero_signs() -> None:
    """A NaN poisons its group; Inf terms of one sign give that Inf, of both signs NaN; a zero result is -0
    only when every term is -0."""
    x = np.zeros(8, np.float32)
    x[2] = np.nan
    y = hadamard(np.concatenate([x, np.ones(8, np.float32)]), 8)
    assert np.isnan(y[:8]).all() and np.isfinite(y[8:]).all()
    x = np.ones(4, np.float32)
    x[1] = np.inf  # column 1 of H_4 is (+, -, +, -)
    y = hadamard(x, 4)
    assert (y == np.array([np.inf, -np.inf, np.inf, -np.inf], np.float32)).all()
    x[3] = -np.inf  # column 3: (+, -, -, +); terms: row 0 +Inf -Inf, row 1 -Inf +Inf, row 2 +Inf +Inf, row 3 -Inf -Inf
    y = hadamard(x, 4)
    assert np.isnan(y[[0, 1]]).all() and (y[[2, 3]] == np.array([np.inf, -np.inf], np.float32)).all()
    z = np.full(4, -0.0, np.float32)
    y = hadamard(z, 4)
    assert np.signbit(y).tolist() == [True, False, False, False]  # row 0 is all +1: every term -0
    y = hadamard(z, 4, signs=np.array([1, -1, 1, 1]))
    assert not np.signbit(y).any()
    s = np.array([1, -1, 1, -1])  # row 1 of H_4: forward row 1 of H D is all +1; inverse row 0 of D H is
    assert np.signbit(hadamard(z, 4, signs=s)).tolist() == [False, True, False, False]
    assert np.signbit(inverse_hadamard(z, 4, signs=s)).tolist() == [True, False, False, False]
    x = np.zeros(4, np.float32)
    x[1] = np.inf  # inverse: x_j = s_j sum_i H_ji y_i; term j = s_j H_j1 Inf
    assert (inverse_hadamard(x, 4, signs=s) == np.array([np.inf, np.inf, np.inf, np.inf], np.float32)).all()
    assert np.signbit(hadamard(np.array([1.0, -1.0, 0.0, 0.0]), 4)).tolist() == [False, False, False, False]


def test_fma_sequential_float32_order() -> None:
    """Hand-derived: acc = +0, acc = fma(x_i, c_ji, acc) for ascending i, a zero result stored as +0."""
    t = np.float32(2.0**-24)
    x = np.array([1.0, t, t, 0.0], np.float32)
    y = hadamard(x, 4, normalize=False, arithmetic="fma_sequential_float32")
    # row 0: 1 + 2^-24 is a tie -> 1 (even), again -> 1; exact: 1 + 2^-23 (representable)
    assert y[0] == np.float32(1.0)
    assert hadamard(x, 4, normalize=False)[0] == np.float32(1.0) + np.float32(2.0**-23)
    # row 1 (+, -, +, -): 1 - 2^-24 is exact, + 2^-24 -> 1
    assert y[1] == np.float32(1.0)
    # fused: x = (2^-148, 2^-149, 0, 0), c = 1/2: acc = 2^-149, then fma gives RN(1.5 2^-149) = 2^-148 (tie to
    # even); an unfused product 2^-150 would round to 0 first and leave 2^-149
    x = np.array([2.0**-148, 2.0**-149, 0.0, 0.0], np.float32)
    assert hadamard(x, 4, arithmetic="fma_sequential_float32")[0] == np.float32(2.0**-148)
    # n = 2: the coefficient is RN32(1/sqrt(2)) = 0x3F3504F3 (0.70710677), rounded once
    y = hadamard(np.array([1.0, 0.0], np.float32), 2, arithmetic="fma_sequential_float32")
    assert (y.view(np.uint32) == 0x3F3504F3).all()
    z = np.full(4, -0.0, np.float32)
    assert not np.signbit(hadamard(z, 4, arithmetic="fma_sequential_float32")).any()
    assert np.signbit(hadamard(z, 4))[0]


def test_dot_pairs_bfloat16_order() -> None:
    """Hand-derived: pairs (2k+1, 2k) in float32, DAZ inputs, FTZ after each step and on the bfloat16 result."""
    M = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    x = np.array([M, 0.0, M, -M], dtype=ml_dtypes.bfloat16)
    y = hadamard(x, 4, normalize=False, arithmetic="dot_pairs_bfloat16").astype(np.float64)
    # row 0: acc = 0 + x1 = 0, + x0 = M, + x3 = 0, + x2 = M -> M; in ascending order M + M overflows first
    assert y[0] == M
    seq = np.float32(0)
    with np.errstate(over="ignore"):
        for v in (M, 0.0, M, -M):
            seq = np.float32(seq + np.float32(v))
    assert np.isinf(seq)
    # n = 2: the coefficient is RN_bf16(1/sqrt(2)) = 0x3F35 (0.70703125; 0x3F36 is 0.7109375)
    y = hadamard(np.array([1.0, 0.0], dtype=ml_dtypes.bfloat16), 2, arithmetic="dot_pairs_bfloat16")
    assert (y.view(np.uint16) == 0x3F35).all()
    sub = np.array([2.0**-130, 0.0, 0.0, 0.0], dtype=ml_dtypes.bfloat16)  # a bfloat16 subnormal: read as 0
    assert (hadamard(sub, 4, normalize=False, arithmetic="dot_pairs_bfloat16").astype(np.float32) == 0).all()
    assert (hadamard(sub, 4, normalize=False).astype(np.float32) != 0).all()
    small = np.array([2.0**-126, 0.0, 0.0, 0.0], dtype=ml_dtypes.bfloat16)  # normal in, 2^-127 out: flushed
    assert (hadamard(small, 4, arithmetic="dot_pairs_bfloat16").astype(np.float32) == 0).all()
    assert (hadamard(small, 4).astype(np.float32) == np.float32(2.0**-127)).all()


@pytest.mark.parametrize("bad", [0, 3, 12, -4, 2.0, True, "16"])
def test_bad_size(bad: object) -> None:
    with pytest.raises(QrefError, match="power of two"):
        hadamard(np.zeros(48, np.float32), bad)  # type: ignore[arg-type]
    with pytest.raises(QrefError, match="power of two"):
        hadamard_matrix(bad)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    x = np.zeros((4, 16), np.float32)
    with pytest.raises(QrefError, match="multiple of n"):
        hadamard(x, 8, axis=0)
    with pytest.raises(QrefError, match="length n = 16"):
        hadamard(x, 16, signs=np.ones(8))
    for s in (np.zeros(16), np.full(16, 2), np.full(16, 0.5)):
        with pytest.raises(QrefError, match=r"\+1 and -1"):
            hadamard(x, 16, signs=s)
    with pytest.raises(QrefError, match="not both"):
        hadamard(x, 16, signs=np.ones(16), seed=1)
    for seed in (-1, 1.5, True):
        with pytest.raises(QrefError, match="seed"):
            hadamard(x, 16, seed=seed)
    for arr in (np.zeros(16, np.int32), np.zeros(16, bool), np.zeros(16, complex), np.zeros(16, object),
                np.zeros(16, ml_dtypes.float8_e4m3fn)):
        with pytest.raises(QrefError, match="float64, float32, float16 or bfloat16"):
            hadamard(arr, 16)
    with pytest.raises(QrefError, match="masked array"):
        hadamard(np.ma.masked_array(np.ones(16, np.float32)), 16)
    big = np.arange(16, dtype=">f4")
    assert (hadamard(big, 16) == hadamard(np.arange(16, dtype=np.float32), 16)).all()
    with pytest.raises(QrefError, match="dtype must be"):
        hadamard(x, 16, dtype=np.int32)
    with pytest.raises(QrefError, match="unknown arithmetic"):
        hadamard(x, 16, arithmetic="fast")
    with pytest.raises(QrefError, match="float32 matmul"):
        hadamard(x.astype(np.float64), 16, arithmetic="fma_sequential_float32")
    with pytest.raises(QrefError, match="bfloat16 matmul"):
        hadamard(x, 16, arithmetic="dot_pairs_bfloat16")
    with pytest.raises(QrefError, match="at least 2"):
        hadamard(x.astype(ml_dtypes.bfloat16), 1, arithmetic="dot_pairs_bfloat16")
    with pytest.raises(QrefError, match="out of range"):
        hadamard(x, 16, axis=2)
    with pytest.raises(QrefError, match="at least one dimension"):
        hadamard(np.float32(1.0), 1)
    assert ARITHMETICS == ("exact", "fma_sequential_float32", "dot_pairs_bfloat16")
