"""An exact oracle for lookup quantization, written from docs/spec/lut.md with fractions only.

It does not import qref's lookup code: values are Fractions, rounding to float32/bfloat16/float16 is written
here (round half to even on the exact rational), and every decision rule follows its definition in lut.md §3.3:
nearest by exact distance, nearest by float32 midpoints, first argmin of rounded distances. The tests at the
bottom check the oracle itself against hand-computed cases.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

# (significand bits incl. the hidden one, minimum normal exponent) of the dtypes the quantizers round to
LAYOUT = {"float32": (24, -126), "bfloat16": (8, -126), "float16": (11, -14)}


def frac(x: float) -> Fraction:
    return Fraction(float(x))


def rnd(v: Fraction, dtype: str = "float32") -> Fraction:
    """v rounded to dtype by round-half-even (finite results only; raises on overflow), on the exact rational
    num / den with integers: e = floor(log2 |v|), quantum 2^(max(e, emin) - p + 1), the quotient's remainder
    compared with half the quantum."""
    v = Fraction(v)
    if v == 0:
        return Fraction(0)
    p, emin = LAYOUT[dtype]
    num, den = abs(v.numerator), v.denominator
    e = num.bit_length() - den.bit_length()  # floor(log2 |v|) is e or e - 1
    if (num << max(-e, 0)) < (den << max(e, 0)):
        e -= 1
    sh = max(e, emin) - (p - 1)
    big, small = (num, den << sh) if sh >= 0 else (num << -sh, den)
    k, rem = divmod(big, small)
    if 2 * rem > small or (2 * rem == small and k % 2 == 1):
        k += 1
    r = Fraction(k << sh) if sh >= 0 else Fraction(k, 1 << -sh)
    emax = {"float32": 127, "bfloat16": 127, "float16": 15}[dtype]
    if r > Fraction((2 ** p - 1) << (emax + 1), 2 ** p):  # the largest finite value (2 - 2^(1-p)) 2^emax
        raise OverflowError(v)
    return r if v > 0 else -r


def values_of(table_values: np.ndarray) -> list[Fraction]:
    return [frac(v) for v in np.asarray(table_values, dtype=np.float32)]


def sorted_entries(vals: list[Fraction]) -> list[tuple[Fraction, int]]:
    """(value, code) sorted by value, equal values by code."""
    return sorted((v, i) for i, v in enumerate(vals))


def pick(cands: list[tuple[Fraction, int]], tie: str) -> int:
    """A tie rule applied to candidates given as (value, code) in ascending (value, code) order."""
    if tie == "lower_value":
        return cands[0][1]
    if tie == "upper_value":
        return cands[-1][1]
    if tie == "lower_code":
        return min(c for _, c in cands)
    assert tie == "even_code"
    for _, c in cands:
        if c % 2 == 0:
            return c
    return cands[0][1]


def code_exact(s: Fraction, vals: list[Fraction], tie: str) -> int:
    """The entry nearest to s by exact distance; equidistant entries resolved by tie."""
    d = [abs(s - v) for v in vals]
    best = min(d)
    return pick(sorted((v, i) for i, v in enumerate(vals) if d[i] == best), tie)


@functools.cache
def _f32_points(vals: tuple[Fraction, ...]) -> tuple[list[tuple[Fraction, int]], list[Fraction]]:
    """(sorted entries, float32 midpoints between neighbours) of a table (computed once per table)."""
    srt = sorted_entries(list(vals))
    return srt, [rnd((srt[j][0] + srt[j + 1][0]) / 2) for j in range(len(srt) - 1)]


@functools.cache
def _decimal_points(vals: tuple[Fraction, ...]) -> tuple[list[tuple[Fraction, int]], list[Fraction]]:
    """(sorted entries, C-literal midpoints rounded to float32) of a table (computed once per table)."""
    srt = sorted_entries(list(vals))
    return srt, [rnd(Fraction(repr(float((srt[j][0] + srt[j + 1][0]) / 2)))) for j in range(len(srt) - 1)]


def code_f32_midpoints(s: Fraction, vals: list[Fraction], tie: str) -> int:
    """Decision points b_j = float32((v_j + v_(j+1)) / 2) between sorted entries; candidates are the entries
    between the last b_j < s and the first b_j > s."""
    srt, b = _f32_points(tuple(vals))
    low = sum(1 for m in b if m < s)
    high = sum(1 for m in b if m <= s)
    return pick(srt[low:high + 1], tie)


def code_decimal_midpoints(s: Fraction, vals: list[Fraction], tie: str) -> int:
    """Decision points written as C float literals: the exact midpoint (a float64 value for float32 entries),
    its shortest round-trip decimal repr(float(m)), rounded to float32 from that decimal (lut.md §3.3)."""
    srt, b = _decimal_points(tuple(vals))
    low = sum(1 for m in b if m < s)
    high = sum(1 for m in b if m <= s)
    return pick(srt[low:high + 1], tie)


def code_thresholds(s: Fraction, thr: list[Fraction], tie: str = "lower_value") -> int:
    low = sum(1 for m in thr if m < s)
    high = sum(1 for m in thr if m <= s)
    return low if tie == "lower_value" else high


def code_argmin(s: Fraction, vals: list[Fraction], dist_dtype: str, via_float32: bool = True) -> int:
    """First index of min |s - t_i| with the difference rounded to dist_dtype (through float32 first, as
    torch and XLA compute bfloat16 arithmetic)."""
    d = []
    for v in vals:
        r = rnd(s - v, "float32") if via_float32 else s - v
        if dist_dtype != "float32":
            r = rnd(r, dist_dtype)
        d.append(abs(r))
    return d.index(min(d))


def scaled(x: Fraction, a: Fraction, how: str, dtype: str = "float32") -> Fraction:
    """float32 (or dtype via float32) x / a, or x * fl(1 / a)."""
    r = rnd(x / a) if how == "divide" else rnd(x * rnd(Fraction(1) / a))
    return r if dtype == "float32" else rnd(r, dtype)


def f32_array(fracs: list[Fraction]) -> np.ndarray:
    return np.array([float(f) for f in fracs], dtype=np.float32)


def tie_points(table: Any, dtype: str = "float32") -> np.ndarray:
    """Every entry, exact midpoint (or its two float32 neighbours), float32 midpoint, each +-1 ulp, and the
    same negated; 0, -0, +-1. Values are in [-1, 1] so a block holding 1.0 scales them by exactly 1."""
    v = sorted(values_of(table.values))
    pts: list[float] = []
    for a, b in itertools.pairwise(v):
        m = (a + b) / 2
        r = rnd(m)
        pts += [float(r), float(rnd((a + b) / 2)), float(a)]
        if r != m:  # not representable: the float32 neighbours on both sides of the exact midpoint
            other = np.nextafter(np.float32(float(r)), np.float32(2 if r < m else -2))
            pts.append(float(other))
    base = np.array([*pts, 0.0, 1.0], dtype=np.float32)
    up, dn = np.nextafter(base, np.float32(2)), np.nextafter(base, np.float32(-2))
    allp = np.concatenate([base, up, dn, -base, -up, -dn, [np.float32(-0.0)]]).astype(np.float32)
    allp = allp[np.abs(allp) <= 1]
    if dtype != "float32":
        allp = allp.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16).astype(np.float32)
    return np.unique(allp)


def blocks_with_unit_absmax(pts: np.ndarray, block: int) -> np.ndarray:
    """pts laid out in blocks whose first element is 1.0 (absmax exactly 1)."""
    per = block - 1
    n = -(-pts.size // per)
    out = np.zeros((n, block), dtype=np.float32)
    out[:, 0] = 1.0
    flat = out[:, 1:].reshape(-1)
    flat[: pts.size] = pts
    out[:, 1:] = flat.reshape(n, per)
    return out.reshape(-1)


# ---- the oracle checks itself -------------------------------------------------------------------------------
def test_rnd_float32_matches_known_roundings() -> None:
    assert rnd(Fraction(1, 3)) == Fraction(11184811, 2**25)  # 0x3eaaaaab
    assert rnd(Fraction(1) + Fraction(1, 2**24)) == 1  # a tie goes to even
    assert rnd(Fraction(1) + Fraction(3, 2**24)) == 1 + Fraction(2, 2**23)
    assert rnd(Fraction(1, 2**150)) == 0  # half the smallest subnormal: tie to even (zero)
    assert rnd(Fraction(3, 2**151)) == Fraction(1, 2**149)
    assert rnd(Fraction(1, 3), "bfloat16") == Fraction(171, 512)
    assert rnd(Fraction(1, 3), "float16") == Fraction(1365, 4096)


def test_rnd_agrees_with_ieee_float32_division() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal(300).astype(np.float32)
    b = rng.uniform(0.1, 10, 300).astype(np.float32)
    ieee = a / b
    for x, y, z in zip(a, b, ieee, strict=True):
        assert rnd(frac(x) / frac(y)) == frac(z)


def test_rules_on_a_hand_made_table() -> None:
    vals = [Fraction(-1), Fraction(0), Fraction(1, 2), Fraction(1)]
    assert code_exact(Fraction(1, 4), vals, "lower_value") == 1
    assert code_exact(Fraction(1, 4), vals, "upper_value") == 2
    assert code_exact(Fraction(1, 4), vals, "even_code") == 2
    assert code_exact(Fraction(3, 4), vals, "even_code") == 2
    assert code_exact(Fraction(-1, 2), vals, "lower_code") == 0
    assert code_f32_midpoints(Fraction(1, 4), vals, "lower_value") == 1
    assert code_argmin(Fraction(1, 4), vals, "float32") == 1


def test_decimal_literal_points_differ_from_float32_midpoints_at_four_nf4_points() -> None:
    """The NF4 midpoints of float32 entries are float32 ties; their 16-17 digit decimals (OpenVINO's ConvertNF4
    literals, e.g. 0.1202552504837513f) round to the other neighbour at sorted positions 0, 8, 12 and 14."""
    from qref.tables import NF4

    srt = sorted_entries(values_of(NF4.values))
    mids = [(srt[j][0] + srt[j + 1][0]) / 2 for j in range(15)]
    lit = [rnd(Fraction(repr(float(m)))) for m in mids]
    f32 = [rnd(m) for m in mids]
    assert [j for j in range(15) if lit[j] != f32[j]] == [0, 8, 12, 14]
    assert lit[8] == rnd(Fraction("0.1202552504837513")) and lit[8] > mids[8] > f32[8]
