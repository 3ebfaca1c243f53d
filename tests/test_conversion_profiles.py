"""Conversion-instruction element profiles (elements.md §6.1), modelled from the PTX ISA: each documented rule
checked on inputs whose results follow from it by hand (powers of two, one float32 ulp either side, range ends,
NaN and Inf). Device vectors are not captured here (no GPU in this environment)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import qref


def _f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _next(v: float, d: int) -> np.float32:
    return (np.array([v], np.float32).view(np.uint32) + np.uint32(d) if d > 0 else
            np.array([v], np.float32).view(np.uint32) - np.uint32(-d)).view(np.float32)[0]


def test_cvt_rn_satfinite_fp8() -> None:
    x = _f32(464.0, 463.99997, 1e30, np.inf, -np.inf, np.nan, 2.0 ** -10, 3 * 2.0 ** -10)
    got = qref.encode(x, "float8_e4m3fn", profile="ptx_cvt_rn_satfinite")
    # 464 is the tie between 448 (0x7E, even) and 480 (beyond max): saturated 448 either way; 2^-10 is the tie
    # between 0 and 2^-9 (even: 0); 3 * 2^-10 between 2^-9 (0x01) and 2^-8 (0x02, even)
    assert list(got) == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x00, 0x02]
    e5 = qref.encode(_f32(61440.0, 1e30, -np.inf), "float8_e5m2", profile="ptx_cvt_rn_satfinite")
    assert list(e5) == [0x7B, 0x7B, 0xFB]  # 57344 = 0x7B: no Inf under .satfinite


def test_cvt_ue8m0_rz_and_rp() -> None:
    one_up, one_down = _next(1.0, 1), _next(1.0, -1)
    x = np.array([1.0, one_up, one_down, 2.0 ** 127, 3e38, np.inf, 2.0 ** -127, 1e-40, np.nan], np.float32)
    rz = qref.encode(x, "float8_e8m0fnu", profile="ptx_cvt_rz_ue8m0")
    rp = qref.encode(x, "float8_e8m0fnu", profile="ptx_cvt_rp_ue8m0")
    assert list(rz) == [127, 127, 126, 254, 254, 254, 0, 0, 255]
    assert list(rp) == [127, 128, 127, 254, 254, 254, 0, 0, 255]


# cvt.rs (elements.md §6.2): expected results from the float32 bits (add R below the kept bits, truncate) and
# from exact arithmetic over each target's value set, written without qref


def _carry_f16(b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """f16 code of float32 bits b (f16 normal range) after adding R (13 bits) to the 13 discarded bits."""
    sign = (b >> 31) << 15
    e = ((b >> 23) & 0xFF).astype(np.int64) - 127 + 15
    mant = b & 0x7FFFFF
    base = sign | (e.astype(np.uint32) << 10) | (mant >> 13)
    return (base + (((mant & 0x1FFF) + r) >> 13)).astype(np.uint32)


def test_cvt_rs_f16_bf16_every_r() -> None:
    rng = np.random.default_rng(5)
    b = rng.integers(0x38800000, 0x477FE000, 6, dtype=np.uint32)  # |x| in [2^-14, 65504): f16 normals
    b = np.concatenate([b, b | np.uint32(1 << 31)])
    r = np.arange(1 << 13, dtype=np.uint32)
    bb, rr = np.repeat(b, r.size), np.tile(r, b.size)
    x = bb.view(np.float32)
    got = qref.encode(x, "float16", profile="ptx_cvt_rs_satfinite", random_bits=rr)
    assert np.array_equal(got.astype(np.uint32), _carry_f16(bb, rr))
    assert np.array_equal(qref.encode(x, "float16", profile="ptx_cvt_rs", random_bits=rr).astype(np.uint32),
                          _carry_f16(bb, rr))
    r16 = np.arange(0, 1 << 16, 7, dtype=np.uint32)
    bb, rr = np.repeat(b, r16.size), np.tile(r16, b.size)
    got = qref.encode(bb.view(np.float32), "bfloat16", profile="ptx_cvt_rs_satfinite", random_bits=rr)
    assert np.array_equal(got.astype(np.uint32), (bb >> 16) + (((bb & 0xFFFF) + rr) >> 16))


def test_cvt_rs_overflow_and_specials() -> None:
    top = np.array([0x477FE001, 0x7F7FFFFF], np.uint32).view(np.float32)  # just above f16 / bf16 max
    for fmt, xv, r, sat, inf in (("float16", top[0], 8191, 0x7BFF, 0x7C00), ("bfloat16", top[1], 65535, 0x7F7F,
                                                                               0x7F80)):
        x = np.array([xv, xv, np.inf, -np.inf], np.float32)
        rb = np.array([0, r, 0, 0], np.uint16)
        assert list(qref.encode(x, fmt, profile="ptx_cvt_rs_satfinite", random_bits=rb)) == [
            sat, sat, sat, sat | 0x8000]
        assert list(qref.encode(x, fmt, profile="ptx_cvt_rs", random_bits=rb)) == [sat, inf, inf, inf | 0x8000]
    x = np.array([np.nan, np.inf, 1e9], np.float32)
    got = qref.encode(x, "float8_e4m3fn", profile="ptx_cvt_rs_satfinite", random_bits=np.array([255, 255, 255]))
    assert list(got) == [0x7F, 0x7E, 0x7E]


def _values(e: int, m: int, bias: int, drop_top: int) -> list[Fraction]:
    """Nonnegative values of an E e M m format, without the top ``drop_top`` codes (NaN / Inf)."""
    vals = [Fraction(k, 1 << m) * Fraction(2) ** (1 - bias) for k in range(1 << m)]
    vals += [(1 + Fraction(f, 1 << m)) * Fraction(2) ** (ex - bias) for ex in range(1, 1 << e) for f in range(1 << m)]
    return vals[: len(vals) - drop_top]


X4 = (("float8_e4m3fn", 4, 3, 7, 1, 16), ("float8_e5m2", 5, 2, 15, 4, 16), ("float4_e2m1fn", 2, 1, 1, 0, 8),
      ("float6_e2m3fn", 2, 3, 1, 0, 16), ("float6_e3m2fn", 3, 2, 3, 0, 16))


def test_cvt_rs_x4_targets_exact() -> None:
    for name, e, m, bias, drop, n in X4:
        vals = _values(e, m, bias, drop)
        xs, want, rs = [], [], []
        for i in (0, 1, len(vals) // 2, len(vals) - 2):
            lo, hi = vals[i], vals[i + 1]
            for k in (0, 1, 5, 8, 15):  # eta = k / 16
                v = lo + (hi - lo) * Fraction(k, 16)
                thr = (1 << n) - k * (1 << n) // 16  # up iff R >= thr (R added to the discarded eta 2^N)
                for r in sorted({0, 1, thr - 1, thr, thr + 1, (1 << n) - 1, *range(0, 1 << n, 251)}):
                    if not 0 <= r < 1 << n:
                        continue
                    up = k > 0 and Fraction(k, 16) * (1 << n) + r >= (1 << n)
                    for s in (1, -1):
                        xs.append(s * float(v))
                        want.append(s * float(hi if up else lo))
                        rs.append(r)
        got = qref.encode(np.array(xs, np.float32), name, profile="ptx_cvt_rs_satfinite",
                          random_bits=np.array(rs, np.uint32))
        assert np.array_equal(qref.decode(got, name, dtype=np.float64), np.array(want)), name
        top = (1 << n) - 1
        big = qref.encode(np.array([float(vals[-1]) * 1.5, -1e30], np.float32), name,
                          profile="ptx_cvt_rs_satfinite", random_bits=np.array([top, top], np.uint32))
        assert list(qref.decode(big, name, dtype=np.float64)) == [float(vals[-1]), -float(vals[-1])], name


def test_cvt_rs_random_bits_split() -> None:
    from qref.interop.ptx import cvt_rs_random_bits

    rb = np.array([0xDEADBEEF, 0x12345678], np.uint32)
    txt = [format(int(v), "032b") for v in rb]  # bit 31 first: rbits[hi:lo] = txt[31 - hi : 32 - lo]

    def field(t: str, hi: int, lo: int) -> int:
        return int(t[31 - hi: 32 - lo], 2)

    for t, row in zip(txt, cvt_rs_random_bits(rb, "float16")):
        assert list(row) == [field(t, 28, 16), field(t, 12, 0)]
    for t, row in zip(txt, cvt_rs_random_bits(rb, "float8_e4m3fn")):
        assert list(row) == [field(t, 31, 16), field(t, 31, 16), field(t, 15, 0), field(t, 15, 0)]
    for t, row in zip(txt, cvt_rs_random_bits(rb, "float4_e2m1fn")):
        assert list(row) == [field(t, 31, 24), field(t, 15, 8), field(t, 23, 16), field(t, 7, 0)]
    with pytest.raises(qref.QrefError, match=r"cvt\.rs has no target"):
        cvt_rs_random_bits(rb, "float8_e8m0fnu")
    with pytest.raises(qref.QrefError, match=r"\[0, 2\^32\)"):
        cvt_rs_random_bits(np.array([-1]), "float16")
    # one cvt.rs.f16x2 end to end: a = 1 + 2^-11 + 2^-23 (discarded 13 bits 0x1001), b = -(1 + 2^-23) (0x0001)
    a, b = np.float32(1 + 2.0 ** -11 + 2.0 ** -23), np.float32(-(1 + 2.0 ** -23))
    r = cvt_rs_random_bits(np.array([(0x0FFF << 16) | 0x1FFE], np.uint32), "float16")[0]
    got = qref.encode(np.array([a, b]), "float16", profile="ptx_cvt_rs_satfinite", random_bits=r)
    assert list(got) == [0x3C01, 0xBC00]  # 0x1001 + 0x0FFF carries; 0x0001 + 0x1FFE does not
