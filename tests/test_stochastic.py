"""Stochastic rounding (P3109 modes A, B, C with N random bits): formulas, reproducibility, unbiasedness."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from oracle import Grid, oracle_encode, spec_of

import qref
from qref.core.encode import random_bits_from_seed

MODES = ["stochastic_a", "stochastic_b", "stochastic_c"]


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu", "binary8p1se",
                                  "bfloat16", "int8"])
@pytest.mark.parametrize("nbits", [1, 3, 8, 13, 23, 32])
def test_matches_p3109_formulas(name: str, nbits: int) -> None:
    fmt = qref.get_format(name)
    rng = np.random.default_rng(nbits)
    if isinstance(fmt, qref.IntFormat):
        x = np.concatenate([np.arange(-300, 300) / 4, rng.uniform(-200, 200, 2000)])
    else:
        lo, hi = math.log2(float(fmt.min_value)) - 2, math.log2(float(fmt.max_value)) + 1
        x = np.exp2(rng.uniform(lo, hi, 3000)) * rng.choice([-1, 1], 3000)
        vals = fmt.values[np.isfinite(fmt.values)] if fmt.bits <= 8 else np.array([1.0, 1.5])
        x = np.concatenate([x, vals, np.nextafter(vals, np.inf), (vals[1:] + vals[:-1]) / 2])
    x = x[np.isfinite(x)]
    r = (np.asarray(rng.bit_generator.random_raw(x.size), dtype=np.uint64) >> np.uint64(64 - nbits))
    g = Grid(spec_of(fmt)) if isinstance(fmt, qref.FloatFormat) else None
    for mode in MODES:
        got = qref.encode(x, fmt, rounding=mode, stochastic_bits=nbits, random_bits=r, overflow="saturate")
        if g is None:
            vals = qref.decode(got, fmt, dtype=np.float64)
            want = [_int_oracle(Fraction(v), mode, int(ri), nbits, fmt) for v, ri in zip(x, r)]
            assert np.array_equal(vals, np.array(want, dtype=np.float64)), (name, mode)
            continue
        xs = [Fraction(v) if v else ("-0" if np.signbit(v) else Fraction(0)) for v in x]
        want = [oracle_encode(g, v, mode, "saturate", rbits=int(ri), nbits=nbits) for v, ri in zip(xs, r)]
        bad = np.flatnonzero(got.astype(np.int64) != np.array(want))
        assert bad.size == 0, (name, mode, [(x[i].hex(), int(r[i]), want[i], int(got[i])) for i in bad[:5]])


def _int_oracle(x: Fraction, mode: str, R: int, N: int, fmt: qref.IntFormat) -> int:
    a = abs(x)
    fl = math.floor(a)
    eta = a - fl
    if mode == "stochastic_a":
        up = math.floor(eta * 2**N) + R >= 2**N
    elif mode == "stochastic_b":
        up = math.floor(eta * 2 ** (N + 1)) + 2 * R + 1 >= 2 ** (N + 1)
    else:
        t = eta * 2**N
        f = math.floor(t)
        rne = f + (1 if t - f > Fraction(1, 2) or (t - f == Fraction(1, 2) and f % 2) else 0)
        up = rne + R >= 2**N
    n = fl + (1 if up and eta > 0 else 0)
    v = -n if x < 0 else n
    return min(max(v, fmt.lo), fmt.hi)


def test_seeded_bits_are_reproducible_and_documented() -> None:
    x = np.linspace(-3, 3, 1001)
    a = qref.encode(x, "float4_e2m1fn", rounding="stochastic_a", stochastic_bits=8, seed=1234)
    b = qref.encode(x, "float4_e2m1fn", rounding="stochastic_a", stochastic_bits=8, seed=1234)
    assert np.array_equal(a, b)
    # the seed path is exactly "top N bits of PCG64(seed).random_raw()" (elements.md §2.5)
    raw = np.random.PCG64(1234).random_raw(x.size)
    assert np.array_equal(random_bits_from_seed(x.size, 8, 1234), np.asarray(raw, np.uint64) >> np.uint64(56))
    c = qref.encode(x, "float4_e2m1fn", rounding="stochastic_a", stochastic_bits=8,
                    random_bits=random_bits_from_seed(x.size, 8, 1234))
    assert np.array_equal(a, c)


@pytest.mark.parametrize("mode", MODES)
def test_bias_over_all_random_values_is_below_2_to_minus_n(mode: str) -> None:
    """Averaged over all 2^N values of R the probability of rounding up is eta within 2^-N (exactly
    floor(eta 2^N) / 2^N for mode A): E2M1 between 1 and 1.5 and between 1.5 and 2 (ulp 0.5)."""
    N = 6
    x = np.array([1.0 + k / 128 for k in range(128)] * (1 << N))
    r = np.repeat(np.arange(1 << N), 128)
    v = qref.quantize(x, "float4_e2m1fn", rounding=mode, stochastic_bits=N, random_bits=r).reshape(1 << N, 128)
    xs = x[:128]
    lo = np.where(xs < 1.5, 1.0, 1.5)
    eta = (xs - lo) / 0.5
    p_up = (v.mean(axis=0) - lo) / 0.5
    assert np.all(np.abs(p_up - eta) <= 2.0**-N), (mode, np.max(np.abs(p_up - eta)))
    if mode == "stochastic_a":
        assert np.array_equal(p_up, np.floor(eta * 2**N) / 2**N)


@pytest.mark.parametrize("mode", MODES)
def test_unbiased_within_statistical_bound(mode: str) -> None:
    """E[quantize(x)] = x up to the 2^-N truncation of eta; checked with 2^20 seeded draws per value."""
    N, n = 16, 1 << 20
    for xv in (1.1, 2.7, -0.3, 5.25, 0.6):
        v = qref.quantize(np.full(n, xv), "float4_e2m1fn", rounding=mode, stochastic_bits=N, seed=99)
        vals = np.unique(v)
        assert vals.size <= 2
        ulp = float(vals.max() - vals.min()) if vals.size == 2 else 0.0
        p = (abs(xv) - min(abs(vals))) / ulp if ulp else 0.0
        sigma = ulp * math.sqrt(max(p * (1 - p), 1e-12) / n)
        assert abs(v.mean() - xv) <= 6 * sigma + ulp * 2.0**-N, (mode, xv, v.mean())


def test_stochastic_errors() -> None:
    with pytest.raises(qref.QrefError, match="stochastic_bits"):
        qref.encode([1.0], "float8_e4m3fn", rounding="stochastic_a", seed=1)
    with pytest.raises(qref.QrefError, match=r"random_bits=.*or seed"):
        qref.encode([1.0], "float8_e4m3fn", rounding="stochastic_a", stochastic_bits=4)
    with pytest.raises(qref.QrefError, match=r"\[0, 2\^4\)"):
        qref.encode([1.0], "float8_e4m3fn", rounding="stochastic_a", stochastic_bits=4, random_bits=[16])
    with pytest.raises(qref.QrefError, match="broadcast"):
        qref.encode([1.0, 2.0], "float8_e4m3fn", rounding="stochastic_a", stochastic_bits=4, random_bits=[1, 2, 3])
    with pytest.raises(qref.QrefError, match="only used by stochastic"):
        qref.encode([1.0], "float8_e4m3fn", seed=3)
