"""Stochastic rounding in uniform schemes (uniform.md §2.6): P3109's StochasticA/B/C(N) of the final float value,
against the formulas in exact rational arithmetic, their exact expectations over all 2^N random values, seeds,
float storage, and the errors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import qref
from qref.core.encode import random_bits_from_seed

N = 6


def _expected(v: Fraction, r: int, mode: str, n: int) -> int:
    """P3109 §4.7 on |v| (sign applied after), exactly."""
    a = abs(v)
    fl = math.floor(a)
    eta = a - fl
    if mode == "stochastic_a":
        inc = math.floor(eta * 2**n) + r >= 2**n
    elif mode == "stochastic_b":
        inc = math.floor(eta * 2 ** (n + 1)) + 2 * r + 1 >= 2 ** (n + 1)
    else:
        t = eta * 2**n
        rne = math.floor(t + Fraction(1, 2)) if t - math.floor(t) != Fraction(1, 2) else (
            math.floor(t) + (math.floor(t) % 2))
        inc = rne + r >= 2**n
    m = fl + (1 if inc and eta != 0 else 0)
    return -m if v < 0 else m


def _values() -> np.ndarray:
    rng = np.random.default_rng(4)
    v = rng.uniform(-60, 60, 3000).astype(np.float32)
    k = np.arange(-20, 20, dtype=np.float32)
    grid = np.concatenate([k, k + 0.5, k + 0.25, k + 1 / 64, k + 63 / 64, k + 1 / 128])
    return np.concatenate([v, grid.astype(np.float32)])


@pytest.mark.parametrize("mode", ["stochastic_a", "stochastic_b", "stochastic_c"])
def test_formula(mode: str) -> None:
    s = qref.scheme("int8", scale=1.0, zero_point=0, profile="stablehlo", rounding=mode, stochastic_bits=N)
    x = _values()
    r = np.random.default_rng(5).integers(0, 2**N, x.size)
    got = s.quantize(x, random_bits=r).codes.astype(np.int64)
    want = np.array([max(-128, min(127, _expected(Fraction(float(v)), int(b), mode, N))) for v, b in zip(x, r)])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode,bias", [("stochastic_a", Fraction(1, 2**N)), ("stochastic_b", Fraction(1, 2**(N + 1))),
                                       ("stochastic_c", Fraction(1, 2**(N + 1)))])
def test_expectation_over_every_random_value(mode: str, bias: Fraction) -> None:
    """The mean over all 2^N random values is within the mode's resolution of the value (A: in [v - 2^-N, v];
    B and C: |mean - v| <= 2^-(N+1)), so the rounding is unbiased up to N bits."""
    s = qref.scheme("int16", scale=1.0, zero_point=0, profile="stablehlo", rounding=mode, stochastic_bits=N)
    v = np.array([0.3, -0.3, 2.7, 5.5, -7.125, 100.015625, 0.0, 3.0, 1 / 3], np.float32)
    xs = np.repeat(v[None, :], 2**N, axis=0)
    rb = np.repeat(np.arange(2**N)[:, None], v.size, axis=1)
    codes = s.quantize(xs, random_bits=rb).codes.astype(np.int64)
    for j, val in enumerate(v):
        mean = Fraction(int(codes[:, j].sum()), 2**N)
        d = mean - Fraction(float(val))
        assert abs(d) <= bias, (mode, float(val), float(d))
        if mode == "stochastic_a":  # never above |v| in magnitude
            assert abs(mean) <= abs(Fraction(float(val)))


def test_seed_is_the_pcg64_stream_and_reproducible() -> None:
    s = qref.scheme("uint8", scale=0.1, zero_point=7, profile="onnx", rounding="stochastic_c", stochastic_bits=12)
    x = np.random.default_rng(6).uniform(-5, 20, (64, 33)).astype(np.float32)
    a, b = s.quantize(x, seed=99), s.quantize(x, seed=99)
    assert np.array_equal(a.codes, b.codes)
    c = s.quantize(x, random_bits=random_bits_from_seed(x.size, 12, 99).reshape(x.shape))
    assert np.array_equal(a.codes, c.codes)
    assert not np.array_equal(a.codes, s.quantize(x, seed=100).codes)


def test_float_storage_rounds_stochastically_with_the_core() -> None:
    s = qref.scheme("float8_e4m3fn", scale=0.5, zero_point=0, profile="onnx", rounding="stochastic_a",
                    stochastic_bits=8)
    x = np.random.default_rng(7).uniform(-300, 300, 4000).astype(np.float32)
    r = np.random.default_rng(8).integers(0, 256, x.size)
    got = s.quantize(x, random_bits=r).codes
    want = qref.encode(x / np.float32(0.5), "float8_e4m3fn", rounding="stochastic_a", stochastic_bits=8,
                       random_bits=r, overflow="saturate")
    assert np.array_equal(got, want)


def test_errors_and_spec() -> None:
    with pytest.raises(qref.QrefError, match="stochastic_bits"):
        qref.scheme("int8", scale=1.0, zero_point=0, rounding="stochastic_a")
    with pytest.raises(qref.QrefError, match="stochastic_bits is for"):
        qref.scheme("int8", scale=1.0, zero_point=0, stochastic_bits=4)
    s = qref.scheme("int8", scale=1.0, zero_point=0, rounding="stochastic_b", stochastic_bits=4)
    x = np.ones(3, np.float32)
    with pytest.raises(qref.QrefError, match="random_bits"):
        s.quantize(x)
    with pytest.raises(qref.QrefError, match=r"\[0, 2\^4\)"):
        s.quantize(x, random_bits=np.array([0, 1, 16]))
    with pytest.raises(qref.QrefError, match="for stochastic rounding"):
        qref.scheme("int8", scale=1.0, zero_point=0).quantize(x, seed=1)
    assert qref.scheme_from_spec(s.to_spec()) == s
    assert "stochastic_bits" not in qref.scheme("int8", scale=1.0, zero_point=0).to_spec()["arithmetic"]
