"""Default-policy encode equals ml_dtypes (an independent implementation) on every 16-bit input, every tie and
boundary, the subnormal/normal boundary swept over all float32 values between, and 2^22 random float32 patterns.

E8M0's spec default is nearest_even; ml_dtypes rounds its ties up, which the `ml_dtypes` profile reproduces.
float64 inputs: ml_dtypes 0.5-0.6 rounds them twice (via float32), 0.7 once. The plain name `ml_dtypes` resolves
to the record of the installed release (profiles.md §2), so these tests verify that record live; the record of
another release is held to its peer vectors in test_profile_peers.py.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from oracle import Grid, spec_of

import qref

FP_FORMATS = [
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
    "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", "float16",
]


def reference(x: np.ndarray, name: str) -> np.ndarray:
    """Codes from ml_dtypes (numpy for float16), as unsigned integers."""
    dt = np.float16 if name == "float16" else getattr(ml_dtypes, name)
    with np.errstate(all="ignore"):
        y = x.astype(dt)
    return y.view(np.uint8 if np.dtype(dt).itemsize == 1 else np.uint16)


def profile_for(name: str) -> str | None:
    return "ml_dtypes" if name == "float8_e8m0fnu" else None


def check(x: np.ndarray, name: str, *, profile: str | None = None) -> None:
    want = reference(x, name)
    got = qref.encode(x, name, profile=profile or profile_for(name))
    if name in ("float16", "bfloat16"):  # numpy keeps NaN payloads; qref emits the canonical NaN (§2.7)
        with np.errstate(invalid="ignore"):
            nan = np.isnan(x)
        assert np.isnan(qref.decode(got[nan], name)).all()
        want, got, x = want[~nan], got[~nan], x[~nan]
    bad = np.flatnonzero(want != got)
    assert bad.size == 0, (
        f"{name}: {bad.size} mismatches, e.g. " + ", ".join(
            f"x={x[i]!r} ({x[i:i+1].view(f'u{x.dtype.itemsize}')[0]:#x}) want {want[i]:#x} got {got[i]:#x}"
            for i in bad[:5]))


@pytest.mark.parametrize("name", FP_FORMATS)
@pytest.mark.parametrize("src", [np.float16, ml_dtypes.bfloat16])
def test_every_16bit_input(name: str, src: type) -> None:
    x = np.arange(1 << 16, dtype=np.uint16).view(src)
    if name == "float16" and src is np.float16:
        pytest.skip("identity cast: numpy returns the input bits, NaN payloads included")
    check(x, name)


def tie_and_boundary_inputs(name: str) -> np.ndarray:
    """Every value and midpoint of the format (and the virtual grid point above max), +-1..3 float32 ulp around
    each, both signs, +-0, +-Inf, NaN, huge values: computed from the format definition (tests/oracle.py)."""
    g = Grid(spec_of(qref.get_format(name)))
    pos = sorted(v for v in g.code_of if v > 0)
    top = pos[-1]
    nxt = top + (top - pos[-2]) if len(pos) > 1 else 2 * top
    pos = [*pos, nxt]
    points = [*pos, *((a + b) / 2 for a, b in itertools.pairwise(pos)), pos[0] / 2, pos[0] / 4, 3 * pos[0] / 4]
    f32max = Fraction(float(np.finfo(np.float32).max))
    f32 = np.array([float(p) for p in points if p <= f32max and Fraction(float(np.float32(float(p)))) == p],
                   dtype=np.float32)
    near = [f32]
    up, down = f32.copy(), f32.copy()
    for _ in range(3):
        up = np.nextafter(up, np.float32(np.inf))
        down = np.nextafter(down, np.float32(0))
        near += [up, down]
    x = np.concatenate(near)
    x = np.concatenate([x, -x, np.array([0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3e38, -3e38, 1e-45],
                                        dtype=np.float32)])
    return x[np.isfinite(x) | np.isnan(x) | np.isinf(x)]


@pytest.mark.parametrize("name", FP_FORMATS)
def test_ties_and_boundaries(name: str) -> None:
    x = tie_and_boundary_inputs(name)
    assert x.size > 100
    check(x, name)


@pytest.mark.parametrize("name", FP_FORMATS)
def test_subnormal_normal_boundary_sweep(name: str) -> None:
    """All float32 values between the largest subnormal (or 2^emin / 2 without subnormals) and the min normal."""
    fmt = qref.get_format(name)
    lo = float(fmt.min_normal - fmt.min_value) if fmt.subnormals else float(fmt.min_normal) / 2
    hi = float(fmt.min_normal)
    a = np.array([lo, hi], dtype=np.float32).view(np.uint32)
    bits = np.arange(a[0], a[1] + 1, dtype=np.uint32)
    x = bits.view(np.float32)
    assert x.size >= 2 and x[0] == np.float32(lo) and x[-1] == np.float32(hi)
    check(np.concatenate([x, -x]), name)


@pytest.mark.parametrize("name", FP_FORMATS)
def test_random_float32_bit_patterns(name: str) -> None:
    bits = np.random.default_rng(20261130).integers(0, 1 << 32, size=1 << 22, dtype=np.uint64).astype(np.uint32)
    check(bits.view(np.float32), name)


def float64_near_ties(name: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    ties = tie_and_boundary_inputs(name).astype(np.float64)
    ties = ties[np.isfinite(ties)]
    eps = np.ldexp(ties, -40) * rng.choice([-1.0, 1.0], ties.size)  # nudges far below float32's ulp
    rand = np.ldexp(rng.random(1 << 16) + 1, rng.integers(-140, 130, 1 << 16)) * rng.choice([-1, 1], 1 << 16)
    return np.concatenate([ties, ties + eps, rand])


@pytest.mark.parametrize("name", [n for n in FP_FORMATS if n != "float16"])
def test_ml_dtypes_profile_on_float64_near_ties(name: str) -> None:
    """float64 inputs next to every tie: the installed release's `ml_dtypes` record (elements.md §6)."""
    check(float64_near_ties(name), name, profile="ml_dtypes")


def test_plain_name_resolves_to_the_installed_release() -> None:
    import importlib.metadata

    installed = importlib.metadata.version("ml_dtypes")
    res = qref.resolve_profile("ml_dtypes")
    assert res.installed == installed and not res.drift and res.profile.covers(installed)


def test_float64_to_float16_matches_numpy() -> None:
    """numpy rounds float64 -> float16 once, as qref's default and the `ml_dtypes` profile do (float16 is numpy's
    own type: no float32 step, elements.md §2.6)."""
    check(float64_near_ties("float16"), "float16")
    check(float64_near_ties("float16"), "float16", profile="ml_dtypes")


def test_float64_inputs_are_rounded_once() -> None:
    """The documented ml_dtypes double-rounding example (notes/elements.md): correct answer 1.125."""
    x = np.array([1.0625000000009663])
    assert qref.encode(x, "float8_e4m3fn")[0] == 0x39  # 1.125
    assert qref.encode(x, "float8_e4m3fn", profile="ml_dtypes@0.6")[0] == 0x38  # 1.0: via float32
    assert qref.encode(x, "float8_e4m3fn", profile="ml_dtypes@0.7")[0] == 0x39  # rounded once
    assert qref.encode(x, "float8_e4m3fn", profile="ml_dtypes")[0] == reference(x, "float8_e4m3fn")[0]
    y = np.array([1.0 + 2**-8 + 2**-30])  # bfloat16 tie + tiny: correct 0x3F81, via float32 0x3F80
    assert qref.encode(y, "bfloat16")[0] == 0x3F81
    assert qref.encode(y, "bfloat16", profile="ml_dtypes@0.6")[0] == 0x3F80
    assert qref.encode(y, "bfloat16", profile="ml_dtypes")[0] == reference(y, "bfloat16")[0]


def test_e8m0_default_is_ties_to_even() -> None:
    """E8M0 ties (1.5 * 2^e) go to the even exponent code by default; ml_dtypes rounds them up."""
    e = np.arange(-126, 127)
    ties = np.ldexp(1.5, e).astype(np.float32)
    got = qref.encode(ties, "float8_e8m0fnu").astype(int)
    lo = e + 127
    assert np.array_equal(got, np.where(lo % 2 == 0, lo, lo + 1))
    for rec in ("ml_dtypes@0.6", "ml_dtypes@0.7"):
        assert np.array_equal(qref.encode(ties, "float8_e8m0fnu", profile=rec).astype(int), np.minimum(lo + 1, 255))
    # the float32 subnormal zone: ml_dtypes 0.6 (2^-127, 2^-126) -> 0x01; 0.7 nearest, ties (1.5 * 2^-127) away
    sub = np.array([2**-127, 1.2 * 2**-127, 1.5 * 2**-127, 1.9 * 2**-127, 2**-140], dtype=np.float32)
    assert list(qref.encode(sub, "float8_e8m0fnu", profile="ml_dtypes@0.6")) == [0, 1, 1, 1, 0]
    assert list(qref.encode(sub, "float8_e8m0fnu", profile="ml_dtypes@0.7")) == [0, 0, 1, 1, 0]
    assert list(qref.encode(sub, "float8_e8m0fnu")) == [0, 0, 0, 1, 0]


@pytest.mark.parametrize("name", ["int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "int32"])
def test_integer_storage_ml_dtypes_profile_is_a_c_cast(name: str) -> None:
    """numpy / ml_dtypes astype into integers: truncation, wrap modulo 2^bits, and the x86-64 integer indefinite
    value for NaN, +-Inf and |x| >= 2^31 (elements.md §2.6) — every float16 and bfloat16 input, and float32 /
    float64 random values and edges."""
    dt = np.dtype(getattr(ml_dtypes, name, None) or name)
    bits = qref.get_format(name).bits
    rng = np.random.default_rng(11)
    edges = np.array([2.0**31, -(2.0**31), 2.0**31 - 128, -(2.0**31) + 128, 3e9, -3e9, 1e10, np.inf, -np.inf, np.nan,
                      -0.0, 0.5, -0.5, 255.5, -129.9])
    # float64 around +-(2^31 - 1) and +-2^31: ml_dtypes' int1/2/4 treat 2^31 - 1 < x < 2^31 as out of range
    near = np.array([2.0**31 - 1, 2.0**31, -(2.0**31), -(2.0**31) - 1]).view(np.uint64)
    edges = np.concatenate([edges, (near[:, None] + np.arange(-64, 65).astype(np.uint64)).view(np.float64).ravel()])
    rand = np.concatenate([rng.standard_normal(1 << 16) * 10.0 ** rng.integers(0, 10, 1 << 16), edges])
    for x in (np.arange(1 << 16, dtype=np.uint16).view(np.float16), np.arange(1 << 16, dtype=np.uint16).view(
            ml_dtypes.bfloat16), rand.astype(np.float32), rand):
        with np.errstate(all="ignore"):
            want = x.astype(dt).view(f"u{dt.itemsize}").astype(np.int64) & ((1 << bits) - 1)
        got = qref.encode(x, name, profile="ml_dtypes").astype(np.int64)
        bad = got != want
        assert not bad.any(), (name, x.dtype, x[bad][:5], got[bad][:5], want[bad][:5])
