"""The 2025-26 block scale rules (block.md §4.2) against oracles written here from each document's steps.

trainium3 (floor_plus_one): e = floor(log2 amax) - emax + 1 exactly (Fractions), y = x / 2^e exact, E4M3 / E2M1
by nearest even. gfx950 (float32_exponent_field): r = fl32(amax / M) in numpy float32, e = its exponent field
- 127, y = fl32(x / 2^e), clamp to +-M, nearest even. deepseek_ue8m0: a = max(amax, fl32(1e-4)),
s = fl32(a / 448), e = ceil(fl32(log2 s)) (log2 in float64 rounded to float32), y = fl32(x / 2^e), E4M3.
Element codes come from ml_dtypes' casts (RNE) after an explicit clamp; scales are compared as E8M0 bytes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import qref

ELEMS = {"mxfp8_e4m3": (ml_dtypes.float8_e4m3fn, 448.0, 8), "mxfp4": (ml_dtypes.float4_e2m1fn, 6.0, 2)}


def _inputs(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mags = 2.0 ** rng.integers(-30, 30, (64, 1))
    x = rng.standard_normal((64, k)) * mags
    x[0] = 0.0
    x[1, :] = 448.0 * 2.0 ** rng.integers(-3, 3)  # powers of two times the max
    x[2, 0] = 2.0 ** -120
    return x.astype(np.float32)


def _codes(y: np.ndarray, dt: type, m: float) -> np.ndarray:
    return np.clip(y, -m, m).astype(dt).view(np.uint8)


@pytest.mark.parametrize("name", sorted(ELEMS))
def test_trainium3_scale_is_twice_ocp(name: str) -> None:
    dt, m, emax = ELEMS[name]
    x = _inputs(32, 1)
    q = qref.scheme(name, profile="trainium3").quantize(x)
    ocp = qref.scheme(name, profile="ocp").quantize(x)
    amax = np.abs(x).max(axis=1)
    nz = amax > 0
    e = np.array([math.floor(math.log2(Fraction(float(a)))) - emax + 1 if a > 0 else -127 for a in amax])
    assert np.array_equal(q.scales.ravel().astype(int), e + 127)
    assert np.array_equal(q.scales.ravel()[nz].astype(int), ocp.scales.ravel()[nz].astype(int) + 1)
    y = (x.astype(np.float64) / 2.0 ** e[:, None]).astype(np.float32)  # exact: a power of two
    assert np.array_equal(q.codes[nz], _codes(y, dt, m)[nz])


@pytest.mark.parametrize("name", sorted(ELEMS))
def test_gfx950_reads_the_exponent_field_of_the_float32_scale(name: str) -> None:
    dt, m, _ = ELEMS[name]
    x = _inputs(32, 2)
    q = qref.scheme(name, profile="gfx950").quantize(x)
    r = (np.abs(x).max(axis=1) / np.float32(m)).astype(np.float32)
    e = ((r.view(np.uint32) >> 23) & 0xFF).astype(np.int64) - 127
    assert np.array_equal(q.scales.ravel().astype(int), e + 127)
    y = (x / (2.0 ** e[:, None]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(q.codes, _codes(y, dt, m))


def test_deepseek_ue8m0_act_quant() -> None:
    x = _inputs(128, 3)
    x[3] = 1e-6  # below the amax floor
    q = qref.scheme("mxfp8_e4m3", block_size=128, profile="deepseek_ue8m0").quantize(x)
    a = np.maximum(np.abs(x).max(axis=1), np.float32(1e-4))
    s = (a / np.float32(448)).astype(np.float32)
    e = np.ceil(np.log2(s.astype(np.float64)).astype(np.float32)).astype(np.int64)
    assert np.array_equal(q.scales.ravel().astype(int), e + 127)
    y = (x / (2.0 ** e[:, None]).astype(np.float32)).astype(np.float32)
    assert np.array_equal(q.codes, _codes(y, ml_dtypes.float8_e4m3fn, 448.0))
    assert int(q.scales[0, 0]) == 127 - 22  # the zero block: the floor's scale 2^ceil(log2(fl32(1e-4) / 448))


def test_new_fields_are_checked() -> None:
    with pytest.raises(qref.QrefError, match="amax_floor"):
        qref.scheme("mxfp8_e4m3", amax_floor=1e-4)  # the exact arithmetic of 'ocp' takes no floor
    with pytest.raises(qref.QrefError, match="amax_floor must be"):
        qref.scheme("mxfp8_e4m3", compute_dtype="float32", amax_floor=-1.0)
    with pytest.raises(qref.QrefError, match="logarithm"):
        qref.scheme("mxfp8_e4m3", scale_rule="float32_exponent_field")


def _ue5m3_values() -> list[Fraction]:
    """Every finite UE5M3 value from its definition (unsigned E5M3, bias 15, subnormals, 0xFF NaN)."""
    out = []
    for c in range(255):
        e, m = c >> 3, c & 7
        out.append(Fraction(m, 8) * Fraction(2) ** -14 if e == 0 else (1 + Fraction(m, 8)) * Fraction(2) ** (e - 15))
    return out


def _rne(v: Fraction, table: list[Fraction]) -> int:
    """Index of the nearest table value to v >= 0 (ties to the even index), saturating at the top."""
    if v >= table[-1]:
        return len(table) - 1
    i = max(j for j, t in enumerate(table) if t <= v)
    lo, hi = table[i], table[i + 1]
    if v - lo != hi - v:
        return i if v - lo < hi - v else i + 1
    return i if i % 2 == 0 else i + 1


def test_nvfp4_ue5m3_exact_rule_against_fractions() -> None:
    """nvfp4_ue5m3 under 'ocp' (the exact single-level rule, block.md §5.3): s = RNE_UE5M3(amax / 6),
    P = RNE_E2M1(x / s) saturating at 6; scale codes and element magnitudes from Fractions."""
    ue5 = _ue5m3_values()
    e2m1 = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((24, 16)) * 2.0 ** rng.integers(-8, 18, (24, 1))).astype(np.float32)
    q = qref.scheme("nvfp4_ue5m3", profile="ocp").quantize(x)
    for b in range(24):
        vals = [Fraction(float(v)) for v in x[b]]
        sc = _rne(max(abs(v) for v in vals) / 6, ue5)
        assert int(q.scales[b, 0]) == sc
        mags = [_rne(abs(v) / ue5[sc], e2m1) for v in vals]
        assert [int(c) & 7 for c in q.codes[b]] == mags


def test_nvfp4_ue4m3_scale_bytes_equal_nvfp4() -> None:
    """Block scales are positive: UE4M3 (E4M3 with sign bit 0) stores the same bytes and codes as nvfp4."""
    x = _inputs(64, 5)[:, :64]
    for prof in ("nvidia", "torchao_floor", "ocp"):
        a = qref.scheme("nvfp4_ue4m3", profile=prof).quantize(x)
        b = qref.scheme("nvfp4", profile=prof).quantize(x)
        assert np.array_equal(a.scales, b.scales) and np.array_equal(a.codes, b.codes), prof


@pytest.mark.parametrize(("profile", "group"), [("transformer_engine_nvfp4_per_token", 128),
                                                ("transformer_engine_nvfp4_1x64", 64)])
def test_transformer_engine_nvfp4_outer_scale_per_group(profile: str, group: int) -> None:
    """NVFP4 with the outer amax g per row (token) or per 1 x 64 tile (block.md §5.2.1): the §5.2
    amax_encode_reciprocal formulas evaluated per group here in numpy float32 and ml_dtypes' casts."""
    f32 = np.float32
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((6, 128)) * 2.0 ** rng.integers(-12, 12, (6, 2)).repeat(64, axis=1)).astype(f32)
    x[5] = 0.0
    q = qref.scheme("nvfp4", profile=profile).quantize(x)
    g = np.abs(x).reshape(6, -1, group).max(axis=2).repeat(group // 16, axis=1)  # per block
    with np.errstate(divide="ignore"):
        s_enc = (f32(6 * 448) / g).astype(f32)
    s_enc = np.where((g == 0) | (s_enc == 0), f32(1), s_enc).astype(f32)
    amax = np.abs(x).reshape(6, 8, 16).max(axis=2)
    sv = (amax * (s_enc * f32(1 / 6)).astype(f32)).astype(f32)
    sc = np.clip(sv, 0, 448).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(q.scales, sc.view(np.uint8)) and np.array_equal(q.global_scale, g)
    d = sc.astype(f32)
    with np.errstate(divide="ignore"):
        coef = np.minimum((f32(1) / (d * (f32(1) / s_enc).astype(f32)).astype(f32)).astype(f32),
                          f32(np.finfo(f32).max))
    y = (x.reshape(6, 8, 16) * coef[..., None]).astype(f32).reshape(6, 128)
    assert np.array_equal(q.codes, np.clip(y, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF)
    back = qref.scheme("nvfp4", profile=profile).dequantize(q)
    p = q.codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(f32).reshape(6, 8, 16)
    fs = ((d * g).astype(f32) * f32(1 / 2688)).astype(f32)
    assert np.array_equal(back.view(np.uint32), (p * fs[..., None]).astype(f32).reshape(6, 128).view(np.uint32))


def test_nvfp4_ue5m3_dequantize_is_exact() -> None:
    """ocp dequantize of every E2M1 code under every finite UE5M3 scale: value(P) * value(S), rounded once to
    float32 (block.md §5.4), from the Fraction tables written here."""
    ue5 = _ue5m3_values()
    e2m1 = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]
    sch = qref.scheme("nvfp4_ue5m3", profile="ocp")
    codes = np.tile(np.arange(16, dtype=np.uint8), (255, 1))
    scales = np.arange(255, dtype=np.uint8).reshape(255, 1)
    got = sch.dequantize(qref.QArray(codes=codes, scheme=sch, scales=scales, axis=1), np.float32)
    mag = np.array([[float(e2m1[c & 7] * ue5[s]) for c in range(16)] for s in range(255)], np.float32)
    want = np.where(np.arange(16) & 8, -mag, mag).astype(np.float32)  # -0 for the negative zero code
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
