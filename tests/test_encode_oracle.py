"""Every rounding mode and overflow policy against the exact Fraction oracle (tests/oracle.py), on >= 10^5
inputs per format: every value and midpoint and the float64 and float32 neighbours (+-1..3 ulp) of each under
every mode, random float64 values over the whole range each under one mode (in turn), and specials. float32
inputs take qref's table path and float64 inputs the reference path, so both are checked."""

from __future__ import annotations

import itertools
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from oracle import Grid, oracle_encode, oracle_int, prepare, spec_of

import qref

DETERMINISTIC = ["nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "toward_max_magnitude", "up",
                 "down", "odd"]
FORMATS = [
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
    "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", "float16",
    "binary8p3se", "binary8p1se", "binary6p2ue", "binary5p5uf", "binary4p1sf", "float5_e2m2fnuz", "float8_e6m1",
]
N_INPUTS = 100_000


def overflow_policies(fmt: qref.FloatFormat) -> list[str]:
    return ["saturate", "saturate_propagate", "inf"] + (["nan"] if fmt.has_nan else [])


def inputs_for(name: str, n_total: int = N_INPUTS) -> tuple[np.ndarray, np.ndarray]:
    """(float64 inputs, which are boundary points): grid points, midpoints, neighbours (boundary points), then
    random values; deterministic."""
    fmt = qref.get_format(name)
    g = Grid(spec_of(fmt))
    pos = sorted(v for v in g.code_of if v > 0)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if len(pos) > 4096:  # 16-bit formats: a deterministic sample of the grid
        pos = [pos[i] for i in sorted(set(rng.integers(0, len(pos), 4096).tolist()) | {0, len(pos) - 1})]
    top = pos[-1]
    pos.append(top + (top - pos[-2]))
    mids = [(a + b) / 2 for a, b in itertools.pairwise(pos)]
    pts = np.array([float(p) for p in [*pos, *mids, pos[0] / 2, pos[0] / 3]
                    if Fraction(2) ** -1074 <= p < Fraction(2) ** 1023], dtype=np.float64)
    near = [pts]
    for direction in (np.inf, 0.0):
        y = pts.copy()
        for _ in range(3):
            y = np.nextafter(y, direction)
            near.append(y)
        y32 = pts[np.abs(pts) <= np.finfo(np.float32).max].astype(np.float32)
        near.append(np.nextafter(y32, np.float32(direction)).astype(np.float64))
    base = np.concatenate(near)
    lo = math.log2(max(float(fmt.min_value), 2.0**-1070)) - 3
    hi = min(math.log2(float(fmt.max_value)) + 2, 1023)
    n_rand = max(n_total // 2 - base.size, 1000)
    rand = np.exp2(rng.uniform(lo, hi, n_rand))
    x = np.concatenate([base, rand])
    x = np.concatenate([x, -x])
    on_boundary = np.tile(np.arange(x.size // 2) < base.size, 2)
    keep = np.isfinite(x)
    return x[keep], on_boundary[keep]


def frac(v: float) -> Fraction | str:
    return "-0" if v == 0 and math.copysign(1, v) < 0 else Fraction(v)


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_all_modes_and_policies_against_oracle(name: str) -> None:
    fmt = qref.get_format(name)
    g = Grid(spec_of(fmt))
    x, on_boundary = inputs_for(name)
    assert x.size >= N_INPUTS
    fracs = [frac(v) for v in x]
    prep = [prepare(g, f) for f in fracs]
    policies = overflow_policies(fmt)
    big = np.abs(x) >= float(fmt.max_value) / 2
    with np.errstate(over="ignore"):
        f32_ok = x.astype(np.float32).astype(np.float64) == x
    cyc = np.array([policies[i % len(policies)] for i in range(x.size)])
    # a random input is checked under one mode, in turn (work shared; every (mode, policy) pair still gets its share)
    turn = (np.arange(x.size) // len(policies)) % len(DETERMINISTIC)
    for m, mode in enumerate(DETERMINISTIC):
        for pol in policies:
            sel = np.flatnonzero(((cyc == pol) | big) & (on_boundary | (turn == m)))
            want = np.array([oracle_encode(g, fracs[i], mode, pol, prepared=prep[i]) for i in sel], dtype=np.uint64)
            got = qref.encode(x[sel], fmt, rounding=mode, overflow=pol).astype(np.uint64)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, mode, pol, [(x[sel][i].hex(), int(want[i]), int(got[i])) for i in bad[:5]])
            s32 = sel[f32_ok[sel]]  # the same inputs as float32: the table path
            got32 = qref.encode(x[s32].astype(np.float32), fmt, rounding=mode, overflow=pol).astype(np.uint64)
            assert np.array_equal(got32, want[f32_ok[sel]]), (name, mode, pol, "float32 path")


@pytest.mark.parametrize("name", FORMATS)
def test_specials_and_flush_against_oracle(name: str) -> None:
    fmt = qref.get_format(name)
    g = Grid(spec_of(fmt))
    specials = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0]
    for pol in overflow_policies(fmt):
        for v in specials:
            want = oracle_encode(g, v if v != 0 else frac(v), "nearest_even", pol)
            assert qref.encode(np.array([v]), fmt, overflow=pol)[0] == want, (name, pol, v)
    nan_rules = ["keep_sign", "positive", "max"] if fmt.has_nan else ["flipped_sign_zero", "zero", "max"]
    for rule in nan_rules:
        for v in (math.nan, -math.nan):
            assert qref.encode(np.array([v]), fmt, nan=rule)[0] == oracle_encode(g, v, nan=rule), (name, rule)
    if fmt.subnormals and fmt.zero:
        sub = np.array([float(fmt.min_value) * k for k in (1, 1.5, 2, 3, 0.5, 0.75)] +
                       [float(fmt.min_normal) * (1 - 2.0**-30)], dtype=np.float64)
        sub = np.concatenate([sub, -sub])
        want = [oracle_encode(g, Fraction(v), "nearest_even", subnormals="flush") for v in sub]
        assert list(qref.encode(sub, fmt, subnormals="flush")) == want


@pytest.mark.parametrize("name", ["float8_e5m2", "float8_e4m3fn", "float8_e4m3", "float8_e3m4",
                                  "float8_e8m0fnu", "binary6p2ue", "binary5p5uf", "float8_e6m1"])
def test_nan_code_unsigned_magnitude_and_absent_zero_against_oracle(name: str) -> None:
    """The policy fields nan_code, unsigned_negative="magnitude" and absent_zero (elements.md §2.4, §2.7) on
    boundary points, random values and specials, both signs; float32 inputs take the table path."""
    fmt = qref.get_format(name)
    g = Grid(spec_of(fmt))
    x, _ = inputs_for(name, 4000)
    x = np.concatenate([x, [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0]])
    options = [{}]
    if fmt.nan in ("ieee", "all_ones"):
        options.append({"nan_code": "all_ones"})
    if not fmt.signed:
        options += [{"unsigned_negative": "magnitude"}, {"unsigned_negative": "magnitude", "overflow": "saturate"}]
    if not fmt.zero and not fmt.signed:
        options += [{"absent_zero": "min"}, {"absent_zero": "min", "unsigned_negative": "magnitude"}]
    assert len(options) > 1
    for opt in options:
        pol = qref.CastPolicy(**opt)
        rp = pol.resolve(fmt)
        want = np.array([oracle_encode(g, frac(v) if math.isfinite(v) else v, "nearest_even", rp.overflow,
                                       rp.nan, unsigned_negative=pol.unsigned_negative,
                                       nan_code_rule=pol.nan_code, absent_zero=pol.absent_zero) for v in x],
                        dtype=np.uint64)
        got = qref.encode(x, fmt, profile=pol).astype(np.uint64)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (name, opt, [(x[i], int(want[i]), int(got[i])) for i in bad[:5]])
        with np.errstate(over="ignore"):
            ok32 = x.astype(np.float32).astype(np.float64) == x
        ok32 |= np.isnan(x)
        got32 = qref.encode(np.resize(x[ok32].astype(np.float32), 1 << 18), fmt, profile=pol).astype(np.uint64)
        assert np.array_equal(got32, np.resize(want[ok32], 1 << 18)), (name, opt, "float32 table path")


def test_new_policy_fields_reject_formats_they_do_not_fit() -> None:
    with pytest.raises(qref.QrefError, match="unsigned_negative='magnitude' is for unsigned formats"):
        qref.encode(np.array([1.0]), "float8_e4m3fn", profile=qref.CastPolicy(unsigned_negative="magnitude"))
    with pytest.raises(qref.QrefError, match=r"nan_code='all_ones'.*negative_zero"):
        qref.encode(np.array([1.0]), "float8_e4m3fnuz", profile=qref.CastPolicy(nan_code="all_ones"))
    with pytest.raises(qref.QrefError, match="absent_zero='min' is for unsigned formats without zero"):
        qref.encode(np.array([1.0]), "float8_e5m2", profile=qref.CastPolicy(absent_zero="min"))
    with pytest.raises(qref.QrefError, match="integer storage"):
        qref.encode(np.array([1.0]), "int8", profile=qref.CastPolicy(nan_code="all_ones"))
    with pytest.raises(qref.QrefError, match="NaN code"):
        qref.CastPolicy(nan_code="quiet")


@pytest.mark.parametrize("name", ["int8", "uint8", "int4", "uint4", "int2", "int16", "uint16", "int32",
                                  "int8<-127:127>", "uint4<1:14>"])
def test_integer_storage_against_oracle(name: str) -> None:
    fmt = qref.get_format(name)
    rng = np.random.default_rng(3)
    hi = float(2 ** (fmt.bits + 1))
    # every half-integer tie in (and just outside) the range; for wide storage, those near 0 and near the ends
    span = np.arange(-min(hi, 4096.0), min(hi, 4096.0) + 1) / 2
    ties = np.unique(np.concatenate([span, fmt.lo + span / 64, fmt.hi + span / 64]))
    ties = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30]
    x = np.concatenate([ties, np.round(rng.uniform(-hi, hi, 20000) * 4) / 4, specials])
    for mode in DETERMINISTIC:
        codes = qref.encode(x, fmt, rounding=mode)
        vals = qref.decode(codes, fmt, dtype=np.float64)
        want = [oracle_int(v if not math.isfinite(v) else Fraction(v), fmt.lo, fmt.hi, mode) for v in x]
        assert np.array_equal(vals, np.array(want, dtype=np.float64)), (name, mode)
        assert codes.dtype == fmt.code_dtype


def test_integer_wrap_and_64bit_inputs() -> None:
    big = np.array([2**63 - 1, -(2**63), 2**40 + 5, -(2**33) - 1, 255, 256, -129], dtype=np.int64)
    assert list(qref.encode(big, "int8", overflow="wrap").view(np.int8)) == [
        int(np.int64(v).astype(np.int8)) for v in big]
    assert list(qref.decode(qref.encode(big, "int8"), "int8", dtype=np.float64)) == [127, -128, 127, -128, 127,
                                                                                       127, -128]
    u = np.array([2**64 - 1, 2**53 + 1, 3], dtype=np.uint64)  # exact integer inputs round once
    assert list(qref.encode(u, "float32")) == [0x5F800000, 0x5A000000, 0x40400000]
    assert qref.encode(np.array([2.0**70 + 2.0**20]), "uint16", overflow="wrap")[0] == 0
    with pytest.raises(qref.QrefError, match="full storage range"):
        qref.encode([1.0], "int8<-127:127>", overflow="wrap")
