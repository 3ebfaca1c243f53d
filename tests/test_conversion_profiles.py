"""Conversion-instruction element profiles (elements.md §6.1), modelled from the PTX ISA: each documented rule
checked on inputs whose results follow from it by hand (powers of two, one float32 ulp either side, range ends,
NaN and Inf). Device vectors are not captured here (no GPU in this environment)."""

from __future__ import annotations

import numpy as np

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
