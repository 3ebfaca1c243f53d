"""An exact-arithmetic oracle for element conversion, written independently of qref's core.

It works on fractions.Fraction values and Python integers only, follows the spec text (docs/spec/elements.md
§2, P3109 RoundToPrecision / Saturate / Encode) step by step, and builds each format's value table from the
format *definition* (E, M, bias and the special-code style), not from qref's encoder or decoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

NAN = "nan"


@dataclass(frozen=True)
class Spec:
    """The defining fields of a format, copied from the spec (not from qref's derived properties)."""

    E: int
    M: int
    bias: int
    signed: bool = True
    nan: str = "ieee"  # ieee | all_ones | negative_zero | none
    inf: str = "ieee"  # ieee | top | none
    subnormals: bool = True
    zero: bool = True

    @property
    def K(self) -> int:
        return int(self.signed) + self.E + self.M


def spec_of(fmt) -> Spec:
    return Spec(fmt.exponent_bits, fmt.mantissa_bits, fmt.bias, fmt.signed, fmt.nan, fmt.inf, fmt.subnormals,
                fmt.zero)


def code_meaning(s: Spec, code: int):
    """Value of a code from the definition: Fraction, -0 as ('-0'), 'nan', ('inf', sign)."""
    sign_bit = 1 << (s.K - 1) if s.signed else 0
    neg = bool(code & sign_bit)
    mag = code & ((1 << (s.E + s.M)) - 1)
    e, f = mag >> s.M, mag & ((1 << s.M) - 1)
    all_e = (1 << s.E) - 1
    all_mag = (1 << (s.E + s.M)) - 1
    if s.nan == "ieee" and e == all_e:
        return NAN if f else ("inf", -1 if neg else 1)
    if s.nan == "all_ones" and mag == all_mag:
        return NAN
    if s.nan == "negative_zero" and code == sign_bit:
        return NAN
    if s.inf == "top" and mag == all_mag - (1 if s.nan == "all_ones" else 0):
        return ("inf", -1 if neg else 1)
    if s.subnormals and e == 0:
        v = Fraction(f, 1 << s.M) * Fraction(2) ** (1 - s.bias)
    else:
        v = (1 + Fraction(f, 1 << s.M)) * Fraction(2) ** (e - s.bias)
    if s.zero and mag == 0:
        return "-0" if neg else Fraction(0)
    return -v if neg else v


class Grid:
    """All finite values of a format, with the code of each."""

    def __init__(self, s: Spec):
        self.s = s
        self.code_of: dict[Fraction, int] = {}
        self.neg_zero = None
        self.nan_codes: list[int] = []
        self.inf_codes: dict[int, int] = {}
        for c in range(1 << s.K):
            v = code_meaning(s, c)
            if v == NAN:
                self.nan_codes.append(c)
            elif isinstance(v, tuple):
                self.inf_codes[v[1]] = c
            elif v == "-0":
                self.neg_zero = c
            else:
                assert v not in self.code_of, (s, c, v)
                self.code_of[v] = c
        self.max = max(self.code_of)
        self.min_pos = min(v for v in self.code_of if v > 0)


def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    assert Fraction(2) ** e <= a < Fraction(2) ** (e + 1)
    return e


def _rne(v: Fraction) -> int:
    f = math.floor(v)
    d = v - f
    return f + (1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and f % 2) else 0)


def _prepare(s: Spec, a: Fraction) -> tuple[int, Fraction, int, Fraction, bool]:
    """P3109 RoundToPrecision's decomposition of |x| = a > 0 (unbounded exponent): e, quantum, floor, eta, odd."""
    emin = (1 if s.subnormals else 0) - s.bias
    e = max(floor_log2(a), emin)
    quantum = Fraction(2) ** (e - s.M)
    S = a / quantum
    fl = math.floor(S)
    eta = S - fl
    # "even" is the last bit of the encoding; for P = 1 that is the parity of the exponent field
    lo_odd = fl % 2 == 1 if s.M >= 1 or fl == 0 else (e + s.bias) % 2 == 1
    return e, quantum, fl, eta, lo_odd


def _decide(mode: str, eta: Fraction, lo_odd: bool, negative: bool, a: Fraction, s: Spec,
            rbits: int | None, nbits: int | None) -> bool:
    half = Fraction(1, 2)
    if mode == "exponent_carry":  # the float32-bit rule of exponent-only formats (elements.md §2.6)
        assert not s.zero and s.M == 0, "exponent_carry is for exponent-only formats without zero"
        mode = "nearest_away" if floor_log2(a) >= -126 else "up"
    if mode == "nearest_even":
        return eta > half or (eta == half and lo_odd)
    if mode == "nearest_away":
        return eta >= half
    if mode == "nearest_toward_zero":
        return eta > half
    if mode == "toward_zero":
        return False
    if mode == "toward_max_magnitude":
        return eta > 0
    if mode == "up":
        return eta > 0 and not negative
    if mode == "down":
        return eta > 0 and negative
    if mode == "odd":
        return eta > 0 and not lo_odd
    N, R = nbits, rbits
    assert N is not None and R is not None
    if mode == "stochastic_a":
        up = math.floor(eta * 2**N) + R >= 2**N
    elif mode == "stochastic_b":
        up = math.floor(eta * 2 ** (N + 1)) + 2 * R + 1 >= 2 ** (N + 1)
    elif mode == "stochastic_c":
        up = _rne(eta * 2**N) + R >= 2**N
    else:
        raise AssertionError(mode)
    return up and eta > 0


def round_magnitude(s: Spec, a: Fraction, negative: bool, mode: str, rbits: int | None = None,
                    nbits: int | None = None, prepared=None) -> Fraction:
    """P3109 RoundToPrecision of |x| = a > 0 with unbounded exponent range (elements.md §2.3)."""
    _, quantum, fl, eta, lo_odd = prepared or _prepare(s, a)
    return (fl + (1 if _decide(mode, eta, lo_odd, negative, a, s, rbits, nbits) else 0)) * quantum


def oracle_encode(grid: Grid, x, mode: str = "nearest_even", overflow: str | None = None, nan: str | None = None,
                  subnormals: str = "keep", rbits: int | None = None, nbits: int | None = None,
                  prepared=None, unsigned_negative: str = "zero", nan_code_rule: str = "canonical",
                  absent_zero: str = "nan") -> int:
    """Code of x (a Fraction, or float nan/inf, or the string '-0') under the policy (elements.md §2.4-2.7);
    unsigned_negative: what a negative nonzero value or -Inf gives in an unsigned format ("zero" or "nan"; "min":
    the code of the smallest value, +0 or E8M0's 2^-127; or "magnitude": the sign is dropped first);
    nan_code_rule: "canonical" or "all_ones" (which NaN code);
    absent_zero: what 0 gives in a format without zero ("nan" or "min"; "nan_below_min": 0 and every magnitude below
    the smallest value give NaN)."""
    s = grid.s
    if unsigned_negative == "magnitude" and not s.signed:  # elements.md §2.4: the sign bit is ignored
        if isinstance(x, float):
            x = abs(x)
        elif x == "-0":
            x = Fraction(0)
        else:
            x = abs(x)
    sign_bit = 1 << (s.K - 1) if s.signed else 0
    has_nan, has_inf = bool(grid.nan_codes), bool(grid.inf_codes)
    overflow = overflow or ("inf" if has_inf else "nan" if has_nan else "saturate")
    nan = nan or ("keep_sign" if has_nan else "flipped_sign_zero")
    max_code = grid.code_of[grid.max]

    def nan_code(negative: bool) -> int:
        """The canonical NaN (elements.md §1.1): IEEE quiet NaN, all-ones magnitude, or the -0 code."""
        if nan_code_rule == "all_ones" or s.nan == "all_ones":
            pos = (1 << (s.E + s.M)) - 1
        elif s.nan == "ieee":
            pos = (((1 << s.E) - 1) << s.M) | (1 << (s.M - 1))
        else:
            pos = sign_bit
        if negative and s.signed and s.nan in ("ieee", "all_ones"):
            return pos | sign_bit
        return pos

    def zero_code(negative: bool) -> int:
        if not s.zero:
            return grid.code_of[grid.min_pos] if absent_zero == "min" else nan_code(False)
        if negative and grid.neg_zero is not None:
            return grid.neg_zero
        return 0

    def negative_code() -> int:
        """A negative nonzero value or -Inf in an unsigned format (elements.md §2.4)."""
        if unsigned_negative == "min":
            return 0 if s.zero else grid.code_of[grid.min_pos]
        return 0 if s.zero and unsigned_negative == "zero" else nan_code(False)

    def signed_code(c: int, negative: bool) -> int:
        return (c | sign_bit) if negative else c

    if isinstance(x, float) and math.isnan(x):
        neg = math.copysign(1.0, x) < 0
        if nan == "keep_sign":
            return nan_code(neg)
        if nan == "positive":
            return nan_code(False)
        if nan == "flipped_sign_zero":
            return zero_code(not neg)
        if nan == "zero":
            return 0
        if nan == "max":
            return signed_code(max_code, neg) if s.signed else max_code
        raise AssertionError(nan)
    if isinstance(x, float) and math.isinf(x):
        neg = x < 0
        if neg and not s.signed:
            return negative_code()
        if overflow == "nan":
            return nan_code(neg)
        if overflow == "saturate" or not has_inf:
            return signed_code(max_code, neg)
        return grid.inf_codes[-1 if neg else 1]
    if x == "-0" or x == 0:
        neg = x == "-0"
        return zero_code(neg and s.signed)
    neg = x < 0
    if neg and not s.signed:
        return negative_code()
    if not s.zero and absent_zero == "nan_below_min" and abs(x) < grid.min_pos:
        return nan_code(False)  # elements.md §2.7: below the smallest value, before rounding
    r = round_magnitude(s, abs(x), neg, mode, rbits, nbits, prepared)
    if r > grid.max:
        if overflow == "nan":
            return nan_code(neg)
        to_zero = mode == "toward_zero" or (mode == "up" and neg) or (mode == "down" and not neg)
        if overflow in ("saturate", "saturate_propagate") or not has_inf or to_zero:
            return signed_code(max_code, neg)
        return grid.inf_codes[-1 if neg else 1]
    if r < grid.min_pos:
        if not s.zero:
            return grid.code_of[grid.min_pos]  # no zero: clamp to the minimum
        if r == 0:
            return zero_code(neg)
    if subnormals == "flush" and s.subnormals and r < Fraction(2) ** (1 - s.bias):
        return zero_code(neg)
    c = grid.code_of[r]
    return signed_code(c, neg) if s.signed else c


def oracle_int(x, lo: int, hi: int, mode: str = "nearest_even", rbits=None, nbits=None) -> int:
    """Integer value of x rounded and clamped to [lo, hi]; NaN -> 0 (elements.md §2.9)."""
    if isinstance(x, float) and math.isnan(x):
        return 0
    if isinstance(x, float) and math.isinf(x):
        return lo if x < 0 else hi
    if x == "-0" or x == 0:
        return min(max(0, lo), hi)
    a = abs(x)
    fl = math.floor(a)
    eta = a - fl
    neg = x < 0
    half = Fraction(1, 2)
    up = {
        "nearest_even": eta > half or (eta == half and fl % 2 == 1),
        "nearest_away": eta >= half,
        "nearest_toward_zero": eta > half,
        "toward_zero": False,
        "toward_max_magnitude": eta > 0,
        "up": eta > 0 and not neg,
        "down": eta > 0 and neg,
        "odd": eta > 0 and fl % 2 == 0,
    }[mode]
    n = fl + up
    v = -n if neg else n
    return min(max(v, lo), hi)


_F64_OVERFLOW = (2 - Fraction(1, 2**53)) * Fraction(2) ** 1023  # midpoint of max float64 and 2^1024


def to_float64(v: Fraction) -> float:
    """Fraction -> float64 rounded to nearest even, overflowing to +-inf (IEEE 754 §7.4)."""
    if abs(v) >= _F64_OVERFLOW:
        return math.inf if v > 0 else -math.inf
    return float(v)  # Fraction.__float__ divides integers: correctly rounded


def prepare(grid: Grid, x):
    """Precompute the mode-independent part of oracle_encode for a finite nonzero Fraction x (else None)."""
    if isinstance(x, Fraction) and x != 0:
        return _prepare(grid.s, abs(x))
    return None
