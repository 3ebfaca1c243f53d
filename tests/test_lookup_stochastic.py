"""Stochastic rounding in lookup schemes (spec: lut.md §3.5): P3109 StochasticA/B/C(N) between the two
neighbouring table values, against the formulas evaluated independently in Fractions, the exact expectation over
every random value, seeds, the random bits' element order, and the errors."""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import numpy as np
import pytest

import qref
from qref.core.encode import random_bits_from_seed
from qref.errors import QrefError
from qref.schemes.lookup.scheme import from_spec

MODES = ("stochastic_a", "stochastic_b", "stochastic_c")
DYADIC = np.array([-1, -0.5, -0.25, 0, 0.125, 0.5, 1, 0.75], np.float32)  # neighbour gaps are powers of two


def _rne(t: Fraction) -> int:
    fl = math.floor(t)
    frac = t - fl
    return fl + 1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1) else fl


def _oracle(entries: np.ndarray):
    """code(s, r, mode, n) by lut.md §3.5 in exact rationals, written from the spec (no qref code)."""
    vals = sorted({Fraction(float(e)) for e in entries})
    code = {v: min(i for i, e in enumerate(entries) if Fraction(float(e)) == v) for v in vals}

    def f(s: float, r: int, mode: str, n: int) -> int:
        if math.isinf(s):
            return code[vals[-1]] if s > 0 else code[vals[0]]
        x = Fraction(s)
        if x <= vals[0]:
            return code[vals[0]]
        if x >= vals[-1]:
            return code[vals[-1]]
        j = bisect.bisect_right(vals, x) - 1
        lo, hi = vals[j], vals[j + 1]
        eta = (x - lo) / (hi - lo)
        if mode == "stochastic_a":
            up = math.floor(eta * 2**n) + r >= 2**n
        elif mode == "stochastic_b":
            up = math.floor(eta * 2 ** (n + 1)) + 2 * r + 1 >= 2 ** (n + 1)
        else:
            up = _rne(eta * 2**n) + r >= 2**n
        return code[hi] if up else code[lo]

    return f


def _static(name: str, **kw: object) -> qref.schemes.lookup.LookupScheme:
    """A static scale of 1: the scaled value is the input itself (s = fl32(x / 1) = x)."""
    if name == "dyadic":
        return qref.scheme("lut", table=DYADIC, scale="static", static_scales=(1.0,), **kw)
    return qref.scheme(name, scale="static", static_scales=(1.0,), **kw)


def _inputs(entries: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Random values over the table's range and beyond, every entry and its float32 neighbours, the
    midpoints, points lo + k (hi - lo) / 2^n (eta on the rounding's own grid, and on its half-steps), zeros,
    subnormals, infinities."""
    v = np.unique(entries.astype(np.float32))
    lo, hi = v[:-1].astype(np.float64), v[1:].astype(np.float64)
    parts = [rng.uniform(-1.2, 1.2, 1500), v, np.nextafter(v, np.float32(-2)), np.nextafter(v, np.float32(2)),
             (lo + hi) / 2, [0.0, -0.0, 1e-45, -1e-45, 1e-38, np.inf, -np.inf, 3.0, -3.0, 1e30]]
    m = min(n, 24)  # float32 holds no finer grid
    k = rng.integers(0, 2 ** (m + 1) + 1, (lo.size, 6))
    parts.append((lo[:, None] + k * (hi - lo)[:, None] / 2 ** (m + 1)).ravel())
    return np.concatenate([np.asarray(p, np.float64).ravel() for p in parts]).astype(np.float32)


@pytest.mark.parametrize("name", ["nf4", "af4", "fp4_bnb", "dynamic8", "dyadic"])
@pytest.mark.parametrize("n", [1, 6, 23, 62])
@pytest.mark.parametrize("mode", MODES)
def test_formula_in_exact_arithmetic(name: str, n: int, mode: str) -> None:
    s = _static(name, rounding=mode, stochastic_bits=n)
    rng = np.random.default_rng(n * 7 + MODES.index(mode))
    x = _inputs(s.table.values, n, rng)
    r = rng.integers(0, 2**n, x.size, dtype=np.uint64) if n < 62 else \
        rng.integers(0, 2**62, x.size, dtype=np.int64).astype(np.uint64)
    # every value also with R = 0 and R = 2^N - 1 (the extreme random values)
    xs = np.concatenate([x, x, x])
    rs = np.concatenate([r, np.zeros(x.size, np.uint64), np.full(x.size, 2**n - 1, np.uint64)])
    got = s.quantize(xs, random_bits=rs).codes.astype(np.int64)
    f = _oracle(s.table.values)
    want = np.array([f(float(a), int(b), mode, n) for a, b in zip(xs, rs)])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(xs[i]), int(rs[i]), int(got[i]), int(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("mode", MODES)
def test_expectation_is_exact_on_the_grid(mode: str) -> None:
    """Over all 2^N random values the mean rounded value equals s exactly when eta is a multiple of 2^-N
    (every mode is unbiased there), here on a table whose gaps are powers of two."""
    n = 5
    s = _static("dyadic", rounding=mode, stochastic_bits=n)
    v = np.unique(DYADIC).astype(np.float64)
    k = np.arange(2**n + 1)
    x = (v[:-1, None] + k[None, :] * (v[1:] - v[:-1])[:, None] / 2**n).ravel().astype(np.float32)
    xs = np.repeat(x[None, :], 2**n, axis=0)
    rb = np.repeat(np.arange(2**n)[:, None], x.size, axis=1)
    vals = DYADIC[s.quantize(xs, random_bits=rb).codes.astype(np.int64)]
    for j in range(x.size):
        mean = sum(Fraction(float(t)) for t in vals[:, j]) / 2**n
        assert mean == Fraction(float(x[j])), (mode, float(x[j]), mean)


@pytest.mark.parametrize("mode", MODES)
def test_expectation_bounds_on_nf4(mode: str) -> None:
    """NF4 gaps are not dyadic: over all 2^N random values P(up) is floor(eta 2^N) / 2^N (A),
    ceil(floor(eta 2^(N+1)) / 2) / 2^N (B), RNE(eta 2^N) / 2^N (C), so the mean lies within (hi - lo) 2^-N of
    s (A: never above it), (hi - lo) 2^-(N+1) for B and C."""
    n = 6
    s = _static("nf4", rounding=mode, stochastic_bits=n)
    x = np.random.default_rng(11).uniform(-1, 1, 40).astype(np.float32)
    xs = np.repeat(x[None, :], 2**n, axis=0)
    rb = np.repeat(np.arange(2**n)[:, None], x.size, axis=1)
    vals = s.table.values[s.quantize(xs, random_bits=rb).codes.astype(np.int64)]
    tv = sorted({Fraction(float(t)) for t in s.table.values})
    for j in range(x.size):
        xf = Fraction(float(x[j]))
        i = bisect.bisect_right(tv, xf) - 1
        lo, hi = tv[i], tv[i + 1]
        eta = (xf - lo) / (hi - lo)
        p = {"stochastic_a": Fraction(math.floor(eta * 2**n), 2**n),
             "stochastic_b": Fraction(-(-math.floor(eta * 2 ** (n + 1)) // 2), 2**n),
             "stochastic_c": Fraction(_rne(eta * 2**n), 2**n)}[mode]
        mean = sum(Fraction(float(t)) for t in vals[:, j]) / 2**n
        assert mean == lo + p * (hi - lo)
        bound = (hi - lo) / 2 ** (n if mode == "stochastic_a" else n + 1)
        assert abs(mean - xf) <= bound
        if mode == "stochastic_a":
            assert mean <= xf  # A rounds eta down on the 2^-N grid


def test_blocks_and_axis_keep_the_input_order_of_random_bits() -> None:
    """With absmax blocks along axis 0 (a partial last block), R[i, j] belongs to x[i, j]: each block's
    absmax is planted at 1, so s = x and the oracle applies element by element."""
    n = 8
    s = qref.scheme("nf4", block_size=16, axis=0, rounding="stochastic_c", stochastic_bits=n)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (40, 5)).astype(np.float32)
    x[0::16, :] = 1.0  # rows 0, 16, 32 start the three blocks (the last holds 8 rows)
    r = rng.integers(0, 2**n, x.shape)
    q = s.quantize(x, random_bits=r)
    assert np.array_equal(q.scales, np.ones((3, 5), np.float32))
    f = _oracle(s.table.values)
    want = np.array([[f(float(x[i, j]), int(r[i, j]), "stochastic_c", n) for j in range(5)] for i in range(40)])
    assert np.array_equal(q.codes.astype(np.int64), want)
    # broadcast random bits: one value per column
    rc = rng.integers(0, 2**n, (1, 5))
    q2 = s.quantize(x, random_bits=rc)
    want2 = np.array([[f(float(x[i, j]), int(rc[0, j]), "stochastic_c", n) for j in range(5)] for i in range(40)])
    assert np.array_equal(q2.codes.astype(np.int64), want2)


@pytest.mark.parametrize("profile", ["spec", "bitsandbytes", "torchao", "openvino", "qwix"])
def test_seed_is_the_pcg64_stream_in_input_order(profile: str) -> None:
    s = qref.scheme("nf4", profile=profile, rounding="stochastic_a", stochastic_bits=12)
    x = np.random.default_rng(6).standard_normal((64, 256)).astype(np.float32)
    a, b = s.quantize(x, seed=99), s.quantize(x, seed=99)
    assert np.array_equal(a.codes, b.codes)
    c = s.quantize(x, random_bits=random_bits_from_seed(x.size, 12, 99).reshape(x.shape))
    assert np.array_equal(a.codes, c.codes) and np.array_equal(a.scales, c.scales)
    assert not np.array_equal(a.codes, s.quantize(x, seed=100).codes)
    det = qref.scheme("nf4", profile=profile)
    assert np.array_equal(a.scales, det.quantize(x).scales)  # the scales do not depend on the rounding


def test_nan_follows_the_scheme_rule_and_double_quant_stays_deterministic() -> None:
    x = np.random.default_rng(2).standard_normal(64 * 256).astype(np.float32)
    x[5] = np.nan
    for profile, code in (("bitsandbytes", 15), ("qwix", 0)):
        s = qref.scheme("nf4", profile=profile, rounding="stochastic_b", stochastic_bits=4)
        q = s.quantize(x, seed=1)
        assert q.codes[5] == code
    s = qref.scheme("nf4", profile="bitsandbytes", double_quant=True, rounding="stochastic_b", stochastic_bits=4)
    d = qref.scheme("nf4", profile="bitsandbytes", double_quant=True)
    y = np.nan_to_num(x)
    qa, qd = s.quantize(y, seed=1), d.quantize(y)
    assert np.array_equal(qa.meta["double_quant"].codes, qd.meta["double_quant"].codes)
    assert np.array_equal(qa.meta["double_quant"].dequantize().view(np.uint32),
                          qd.meta["double_quant"].dequantize().view(np.uint32))


def test_spec_round_trip_and_defaults() -> None:
    s = qref.scheme("af4", rounding="stochastic_c", stochastic_bits=9)
    assert from_spec(s.to_spec()) == s
    d = qref.scheme("af4").to_spec()
    assert "rounding" not in d and "stochastic_bits" not in d  # deterministic specs read as before
    assert qref.scheme("af4").rounding == "deterministic" and qref.scheme("af4").stochastic_bits is None


def test_errors_say_what_to_do() -> None:
    s = qref.scheme("nf4", rounding="stochastic_a", stochastic_bits=4)
    x = np.ones((2, 64), np.float32)
    with pytest.raises(QrefError, match="needs random_bits="):
        s.quantize(x)
    with pytest.raises(QrefError, match=r"\[0, 2\^4\)"):
        s.quantize(x, random_bits=np.full(x.shape, 16))
    with pytest.raises(QrefError, match=r"\[0, 2\^4\)"):
        s.quantize(x, random_bits=np.full(x.shape, -1))
    with pytest.raises(QrefError, match="does not broadcast"):
        s.quantize(x, random_bits=np.zeros(3, np.int64))
    with pytest.raises(QrefError, match="integer array"):
        s.quantize(x, random_bits=np.zeros(x.shape))
    with pytest.raises(QrefError, match="non-negative integer"):
        s.quantize(x, seed=-1)
    with pytest.raises(QrefError, match="deterministically"):
        qref.scheme("nf4").quantize(x, seed=1)
    with pytest.raises(QrefError, match="deterministically"):
        qref.scheme("nf4").quantize(x, random_bits=np.zeros(x.shape, np.int64))
    with pytest.raises(QrefError, match="needs stochastic_bits"):
        qref.scheme("nf4", rounding="stochastic_b")
    with pytest.raises(QrefError, match="needs stochastic_bits"):
        qref.scheme("nf4", rounding="stochastic_b", stochastic_bits=63)
    with pytest.raises(QrefError, match="stochastic_bits is for"):
        qref.scheme("nf4", stochastic_bits=8)
    with pytest.raises(QrefError, match="rounding"):
        qref.scheme("nf4", rounding="dither")
