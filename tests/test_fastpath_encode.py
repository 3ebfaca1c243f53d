"""The encode/decode gather fast paths equal the reference path (elements.md §2.10, §4): the sticky-jam table
over the top 16 source bits, the chunked 16-bit table gather and the chunked decode gather."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.core.decode import exact_parts
from qref.core.encode import (
    GATHER_CHUNK,
    _top16_jam_table,
    _top16_table,
    build_policy,
    encode_exact,
    gather_top16,
    gather_top16_jam,
    top16_jam_eligible,
    top16_table_eligible,
)
from qref.core.exact import from_ieee_bits

# (format, jam-eligible from float32, from float64): M <= 5 (2) and qmin >= -131 (-1024); integers in [-64, 63]
ELIGIBILITY = [("float8_e4m3fn", True, False), ("float8_e5m2", True, True), ("float4_e2m1fn", True, True),
               ("float6_e3m2fn", True, True), ("float8_e8m0fnu", True, True), ("float8_e3m4", True, False),
               ("binary8p6se", True, False), ("binary8p7se", False, False), ("binary13p6ue", False, False),
               ("binary13p5se", True, False), ("int4", True, False), ("int7", True, False), ("uint6", True, False),
               ("uint7", False, False)]
OPTIONS = [{}, {"rounding": "toward_zero"}, {"rounding": "odd", "overflow": "saturate"},
           {"rounding": "nearest_away", "subnormals": "flush"}, {"rounding": "up"}, {"rounding": "down"}]
SOURCES = {"float32": (np.uint32, np.float32, 16, 8, 23), "float64": (np.uint64, np.float64, 48, 11, 52)}


def _policy(fmt, options):
    if isinstance(fmt, qref.IntFormat):
        options = {k: v for k, v in options.items() if k != "subnormals"}
    return options, qref.CastPolicy(**options).resolve(fmt)


@pytest.mark.parametrize(("name", "jam32", "jam64"), ELIGIBILITY)
def test_jam_eligibility(name: str, jam32: bool, jam64: bool) -> None:
    assert len(_jam_cases()) >= 90
    fmt = qref.get_format(name)
    rp = qref.CastPolicy().resolve(fmt)
    assert top16_jam_eligible(fmt, rp, "float32") == jam32
    assert top16_jam_eligible(fmt, rp, "float64") == jam64
    assert not jam32 or top16_table_eligible(fmt, rp, "float32")
    stoch = qref.CastPolicy(rounding="stochastic_a", stochastic_bits=8).resolve(fmt)
    assert not top16_jam_eligible(fmt, stoch, "float32")


def _midpoints_and_neighbours(fmt, view, fdt) -> np.ndarray:
    """Every midpoint between consecutive finite values of fmt (and the values themselves) as source floats,
    with the source neighbours +-1 and +-2 ulp, both signs."""
    if isinstance(fmt, qref.IntFormat):
        v = np.arange(fmt.lo, fmt.hi + 1, dtype=np.float64)
    else:
        v = np.asarray(fmt.values, dtype=np.float64)
        v = np.unique(v[np.isfinite(v)])
    with np.errstate(over="ignore"):  # beyond float32 (E8M0's top values): +-Inf inputs, also covered
        pts = np.concatenate([v, (v[1:] + v[:-1]) / 2, [v[-1] * 2, v[-1] + (v[-1] - v[-2]) / 2]]).astype(fdt)
    pts = np.concatenate([pts, -pts])
    out = [pts]
    for k in (1, 2):
        up, dn = pts.copy(), pts.copy()
        for _ in range(k):
            up, dn = np.nextafter(up, fdt(np.inf)), np.nextafter(dn, fdt(-np.inf))
        out += [up, dn]
    return np.concatenate(out).view(view)


def _jam_cases() -> list[tuple[str, dict, str]]:
    """(format, options, source) of ELIGIBILITY x OPTIONS x sources that take the jam path (the others take the
    2 x 65536 table, tests/test_api.py)."""
    out = []
    for name, _, _ in ELIGIBILITY:
        fmt = qref.get_format(name)
        for options in OPTIONS:
            opts, rp = _policy(fmt, options)
            out += [(name, opts, src) for src in ("float32", "float64") if top16_jam_eligible(fmt, rp, src)]
    return out


@pytest.mark.parametrize(("name", "options", "src"), _jam_cases())
def test_jam_path_equals_reference_path(name: str, options: dict, src: str) -> None:
    """Every top-16 pattern with low parts 0, 1, 10...0, 10...01, 11...1, every value, midpoint and their +-1, 2
    ulp neighbours, and 2^18 random patterns: the public encode (jam path) equals the reference path."""
    fmt = qref.get_format(name)
    options, rp = _policy(fmt, options)
    assert top16_jam_eligible(fmt, rp, src)
    view, fdt, low, ebits, mbits = SOURCES[src]
    hi = np.arange(1 << 16, dtype=view) << view(low)
    lows = [view(0), view(1), view(1 << (low - 1)), view((1 << (low - 1)) | 1), view((1 << low) - 1)]
    rnd = np.random.default_rng(hash(name) % 2**32).integers(0, np.iinfo(view).max, 1 << 18, dtype=view,
                                                              endpoint=True)
    bits = np.concatenate([hi | lo for lo in lows] + [rnd, _midpoints_and_neighbours(fmt, view, fdt)])
    ref = encode_exact(from_ieee_bits(bits, ebits, mbits), fmt, rp).astype(fmt.code_dtype)
    fast = qref.encode(bits.view(fdt), fmt, **options)
    assert fast.dtype == ref.dtype
    assert np.array_equal(fast, ref), int(np.count_nonzero(fast != ref))
    assert _top16_jam_table.cache_info().currsize >= 1


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu", "int4"])
@pytest.mark.parametrize("profile", [None, "ml_dtypes"])
def test_jam_equals_two_table_gather_on_random_patterns(name: str, profile: str | None) -> None:
    """2^22 random float32 bit patterns per format and policy: the jam gather equals the 2 x 65536 gather."""
    fmt = qref.get_format(name)
    pol = build_policy(profile, fmt, np.dtype(np.float32))
    for options in ({}, {"rounding": "toward_zero"}, {"rounding": "up", "overflow": "saturate"}):
        rp = pol.with_options(**options).resolve(fmt)
        bits = np.random.default_rng(1).integers(0, 2**32, 1 << 22, dtype=np.uint32)
        two = gather_top16(bits, _top16_table(fmt, rp, "float32"), 16)
        jam = gather_top16_jam(bits, _top16_jam_table(fmt, rp, "float32"), 16)
        assert np.array_equal(jam, two)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu", "int8",
                                  "float6_e2m3fn"])
def test_16bit_chunked_gather_exhaustive(name: str) -> None:
    """Every float16 and bfloat16 pattern (repeated past a gather chunk), default and ml_dtypes
    profile: the chunked gather equals the reference path and, for ml_dtypes formats, ml_dtypes itself."""
    fmt = qref.get_format(name)
    reps = GATHER_CHUNK // (1 << 16) + 2
    pats = np.tile(np.arange(1 << 16, dtype=np.uint16), reps)
    assert pats.size > GATHER_CHUNK
    for dt, (eb, mb) in ((np.dtype(np.float16), (5, 10)), (np.dtype(ml_dtypes.bfloat16), (8, 7))):
        rp = qref.CastPolicy().resolve(fmt)
        ref = encode_exact(from_ieee_bits(pats[: 1 << 16], eb, mb), fmt, rp).astype(fmt.code_dtype)
        fast = qref.encode(pats.view(dt), fmt)
        assert np.array_equal(fast, np.tile(ref, reps))
        if hasattr(ml_dtypes, name):
            mine = qref.encode(pats.view(dt), fmt, profile="ml_dtypes")
            theirs = pats.view(dt).astype(getattr(ml_dtypes, name)).view(fmt.code_dtype)
            assert np.array_equal(mine, theirs)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu",
                                  "float6_e3m2fn", "bfloat16", "int8", "uint4"])
def test_decode_chunked_gather_every_code(name: str) -> None:
    """Every code in several integer dtypes (and repeated past a gather chunk) decodes as the reference path;
    out-of-range codes still raise."""
    fmt = qref.get_format(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    for dtype in (np.float32, np.float64, np.float16):
        tgt = qref.get_format(np.dtype(dtype).name)
        rp = qref.CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign").resolve(tgt)
        ref = encode_exact(exact_parts(codes, fmt), tgt, rp).astype(tgt.code_dtype)
        for cdt in (fmt.code_dtype, np.int64, np.uint16):
            c = np.tile(codes.astype(cdt), max(1, 2 * GATHER_CHUNK >> fmt.bits) + 1)
            got = qref.decode(c, fmt, dtype=dtype)
            assert got.shape == c.shape
            assert np.array_equal(got.view(tgt.code_dtype), np.tile(ref, c.size // ref.size))
    assert qref.decode(np.array(3, dtype=np.uint8), fmt).shape == ()
    with pytest.raises(qref.QrefError, match="must lie in"):
        qref.decode(np.array([0, 1 << fmt.bits], dtype=np.int64), fmt)
    if fmt.bits < 8:
        with pytest.raises(qref.QrefError, match="must lie in"):
            qref.decode(np.array([1 << fmt.bits], dtype=np.uint8), fmt)
    with pytest.raises(qref.QrefError, match="must lie in"):
        qref.decode(np.array([-1], dtype=np.int8), fmt)
