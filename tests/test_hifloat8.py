"""HiFloat8 (elements.md §1.4): every code against a decode written here from arXiv 2409.16626's field
definition (a bit-string prefix parse in Fractions), and every rounding mode at every midpoint."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

import qref
from qref.core import hifloat8 as hif8

DOTS = (("11", 4, 1), ("10", 3, 2), ("01", 2, 3), ("001", 1, 3), ("0001", 0, 3))  # prefix, D, M


def _oracle(code: int) -> Fraction | str:
    b = format(code, "08b")
    s, rest = b[0], b[1:]
    if code == 0:
        return Fraction(0)
    if code == 0x80:
        return "nan"
    if rest == "1101111":
        return "-inf" if s == "1" else "inf"
    sign = -1 if s == "1" else 1
    for prefix, d, m in DOTS:
        if rest.startswith(prefix):
            ef, mf = rest[len(prefix):len(prefix) + d], rest[len(prefix) + d:]
            assert len(mf) == m
            e = 0 if d == 0 else (-1 if ef[0] == "1" else 1) * int("1" + ef[1:], 2)
            return sign * Fraction(2) ** e * (1 + Fraction(int(mf, 2), 2 ** m))
    assert rest.startswith("0000")
    return sign * Fraction(2) ** (int(rest[4:], 2) - 23)


def test_every_code_decodes_as_defined() -> None:
    got = hif8.decode(np.arange(256, dtype=np.uint8), np.float64)
    for c in range(256):
        want = _oracle(c)
        if want == "nan":
            assert np.isnan(got[c])
        elif isinstance(want, str):
            assert got[c] == (np.inf if want == "inf" else -np.inf)
        else:
            assert Fraction(float(got[c])) == want, (hex(c), got[c], want)
    finite = sorted(v for c in range(256) if not isinstance(v := _oracle(c), str))
    assert finite[-1] == 2 ** 15 and min(v for v in finite if v > 0) == Fraction(2) ** -22
    assert len(set(finite)) == 253  # 256 codes: one zero, one NaN, two infinities


def _pos() -> list[tuple[Fraction, int]]:
    return sorted((v, c) for c in range(0x80) if not isinstance(v := _oracle(c), str))


@pytest.mark.parametrize("rounding", hif8.ROUNDINGS)
def test_values_and_midpoints_round_as_the_mode_says(rounding: str) -> None:
    pos = _pos()
    vals = np.array([float(v) for v, _ in pos] + [-float(v) for v, _ in pos[1:]])
    codes = [c for _, c in pos] + [c | 0x80 for _, c in pos[1:]]
    assert np.array_equal(hif8.encode(vals, rounding=rounding).astype(int), codes)
    for (lo, clo), (hi, chi) in itertools.pairwise(pos):
        mid = (lo + hi) / 2
        for x, want_near in ((mid, None), (mid + (hi - lo) / 8, chi), (mid - (hi - lo) / 8, clo)):
            got = int(hif8.encode(np.array([float(x)]), rounding=rounding)[0])
            if rounding == "toward_zero":
                want = clo
            elif want_near is not None:
                want = want_near
            elif rounding == "nearest_away":
                want = chi
            else:
                want = clo if clo % 2 == 0 else chi
            assert got == want, (rounding, float(x), hex(got), hex(want))
            neg = int(hif8.encode(np.array([-float(x)]), rounding=rounding)[0])
            assert neg == (want | 0x80 if want else 0)


def test_specials_and_overflow() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 40960.0, 40959.0, 1e9, -0.0, 2.0 ** -23, 2.0 ** -24], np.float32)
    sat = hif8.encode(x)
    assert list(sat) == [0x80, 0x6E, 0xEE, 0x6E, 0x6E, 0x6E, 0x00, 0x01, 0x00]
    inf = hif8.encode(x, overflow="inf")
    assert list(inf) == [0x80, 0x6F, 0xEF, 0x6F, 0x6E, 0x6F, 0x00, 0x01, 0x00]
    assert list(hif8.encode(x, rounding="toward_zero", overflow="inf")[3:6]) == [0x6E, 0x6E, 0x6E]
    with pytest.raises(qref.QrefError):
        hif8.encode(x, rounding="up")
    with pytest.raises(qref.QrefError):
        hif8.decode(np.array([256]))
