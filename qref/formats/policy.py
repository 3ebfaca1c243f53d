"""Conversion policies: how a real number becomes a code (spec: elements.md §2).

Every option is explicit; ``None`` means "the format's ecosystem default", which is documented per format in
elements.md §3 and equals ml_dtypes' observed behaviour for every format ml_dtypes has.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ..errors import QrefError, check_choice
from .records import FloatFormat, Format, IntFormat

Rounding = Literal[
    "nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "toward_max_magnitude", "up", "down",
    "odd", "stochastic_a", "stochastic_b", "stochastic_c", "exponent_carry", "exponent_ceil",
]
ROUNDING_MODES: tuple[str, ...] = (
    "nearest_even",          # P3109 NearestTiesToEven / IEEE roundTiesToEven
    "nearest_away",          # P3109 NearestTiesToAway / IEEE roundTiesToAway
    "nearest_toward_zero",   # nearest, ties to the smaller magnitude (MLX's FP4 argmin)
    "toward_zero",           # P3109 TowardZero (truncation)
    "toward_max_magnitude",  # P3109 TowardMaxMagnitude (away from zero)
    "up",                    # P3109 TowardPositive (ceiling)
    "down",                  # P3109 TowardNegative (floor)
    "odd",                   # P3109 ToOdd (round to odd / von Neumann)
    "stochastic_a",          # P3109 StochasticA(N): floor(eta 2^N) + R >= 2^N
    "stochastic_b",          # P3109 StochasticB(N): floor(eta 2^(N+1)) + 2R + 1 >= 2^(N+1)
    "stochastic_c",          # P3109 StochasticC(N): RNE(eta 2^N) + R >= 2^N
    "exponent_carry",        # float32 bits: exponent field + carry of the first fraction bit (elements.md §2.6)
    "exponent_ceil",         # float32 bits: exponent field + (fraction != 0) (elements.md §2.6)
)
EXPONENT_MODES = ("exponent_carry", "exponent_ceil")  # the float32-bit rules of exponent-only formats
STOCHASTIC_MODES = ("stochastic_a", "stochastic_b", "stochastic_c")
OVERFLOW_POLICIES = ("saturate", "saturate_propagate", "inf", "nan", "wrap", "zero", "saturate_finite")
SUBNORMAL_POLICIES = ("keep", "flush")
INPUT_SUBNORMAL_POLICIES = ("keep", "zero")
NAN_POLICIES = ("keep_sign", "positive", "flipped_sign_zero", "zero", "max", "error")
SOURCE_POLICIES = ("exact", "via_float32", "via_float16")
# what a negative value becomes in an unsigned format (elements.md §2.4)
UNSIGNED_NEGATIVE = ("zero", "nan", "magnitude", "min", "sign_over_top_bit", "min_by_sign_bit")
NAN_CODES = ("canonical", "all_ones")  # which NaN code a NaN result is written as (elements.md §2.7)
NAN_PAYLOADS = (  # what a NaN input's payload becomes in a target with several NaN codes (elements.md §2.7)
    "canonical",   # dropped: the canonical quiet NaN of the sign
    "keep_quiet",  # the source fraction's top bits that fit, quiet bit set (x86 cvt*, compiler-rt, APFloat)
    "keep_raw",    # the top bits as they are; all zero: the lowest fraction bit is set (numpy's float -> half)
    "truncate",    # the top bits as they are; all zero: the Inf code (a plain bit truncation)
)
ABSENT_ZERO = ("nan", "min", "nan_below_min")  # what +-0 (and values below the minimum) become without zero (§2.7)
INT_CASTS = (
    "direct",                 # the policies act on the exact value (elements.md §2.9)
    "via_int32_x86",          # x86-64 cvtt to int32 first: NaN, +-Inf, |trunc x| >= 2^31 -> 0x80000000; then overflow
    "via_int32_x86_checked",  # as via_int32_x86, and any x > 2^31 - 1 before truncation is out of int32 range
)


@dataclass(frozen=True)
class CastPolicy:
    """All knobs of an element conversion (elements.md §2). None = the format's default (§3).

    rounding: one of ROUNDING_MODES (default "nearest_even").
    overflow: "saturate" (P3109 SatFinite: finite overflow and +-Inf -> +-max), "saturate_propagate"
        (SatPropagate: finite overflow -> +-max, +-Inf stays +-Inf), "inf" (OvfInf: overflow -> +-Inf,
        except directed roundings toward zero give +-max), "nan" (overflow and +-Inf -> NaN), "wrap" (integer
        storage only: modulo 2^bits), "zero" (integer storage only: out-of-range values, NaN and +-Inf give 0),
        "saturate_finite" (formats with NaN and without Inf: finite overflow -> +-max, +-Inf -> NaN).
        None: "inf" if the format has Inf, else "nan" if it has NaN, else "saturate"; integers "saturate"
        ("wrap" under an int_cast other than "direct", unless the storage range is narrowed).
    nan: what a NaN input becomes. "keep_sign" (the NaN code with the input's sign where the format has
        one per sign), "positive" (the positive NaN code), "flipped_sign_zero" (formats without NaN: zero with
        the opposite sign, as ml_dtypes), "zero" (+0), "max" (+-max finite by the NaN's sign bit, as MLX
        to_fp8), "error" (raise). None: "keep_sign" with NaN, "flipped_sign_zero" without; integers "zero".
    subnormals: "keep" or "flush" (a nonzero result that is subnormal after rounding becomes zero of its sign).
    input_subnormals: "keep" or "zero" (subnormal inputs of the source dtype are read as zero of their sign).
    source: "exact" (the input's exact value is rounded once) or "via_float32" (float64 inputs are first
        rounded to float32 by nearest_even, as ml_dtypes does for float formats; integers are converted directly)
        or "via_float16" (float inputs of any other float dtype are first rounded to float16 by nearest_even,
        overflow to +-Inf, NaN keeping its sign; float64 to float32 first; float targets only: elements.md §2.12).
    stochastic_bits: N, the number of random bits per element for the stochastic modes.
    unsigned_negative: unsigned formats only: a negative nonzero value or -Inf becomes "zero" ([P3109] clamps at
        0; NaN in a format without zero) or "nan" (the NaN code, as ml_dtypes 0.7's float8_e5m3fnu); "magnitude":
        the sign bit is ignored, every negative input (-0, -Inf and -NaN included) is encoded as its magnitude;
        "min": a negative nonzero value or -Inf becomes the smallest code, 0x00 (+0 with a zero, 2^-127 in E8M0;
        -NaN stays NaN, -0 follows absent_zero); "min_by_sign_bit": every input with the sign bit set (-0, -Inf
        and -NaN included) becomes 0x00; "sign_over_top_bit" (formats without zero): the magnitude's code with the
        top code bit set (E8M0: code | 0x80, so -1 -> 0xFF, -2^-127 -> 0x80, -4 -> 0x81), except magnitudes at
        most half the smallest value (2^-128 in E8M0), which are a zero (absent_zero applies).
    nan_code: which code a NaN result is written as where the format has several: "canonical" (default: the
        format's canonical quiet NaN, e.g. E5M2 0x7E / 0xFE) or "all_ones" (exponent and fraction all ones,
        E5M2 0x7F / 0xFF; the same code where the canonical NaN is all ones already, E4M3FN, E8M0).
    nan_payload: what a NaN input's payload (its source fraction field, left-aligned) becomes in a target with
        IEEE-style NaN codes (several per sign: float16, bfloat16, float32, float64, E5M2, E4M3, E3M4...); with
        P = the payload's top M bits (M = the target's mantissa bits; a wider target gets the whole payload,
        shifted up): "canonical" (default: the canonical quiet NaN, the payload is dropped), "keep_quiet"
        (fraction P | quiet bit), "keep_raw" (fraction P; P = 0: 1, so the result stays a NaN), "truncate"
        (fraction P; P = 0: the Inf code of the sign). Only NaN inputs carry a payload: NaN results of overflow,
        Inf or zero, and NaN inputs without payload bits (the FNUZ / E8M0 NaN, exact rationals) stay canonical;
        targets with a single NaN code per sign (E4M3FN, FNUZ, E8M0) are unchanged. Needs nan_code="canonical".
    absent_zero: formats without zero (E8M0) only: what +-0 becomes: "nan" (default: the NaN code) or "min"
        (the smallest code, 2^-127 in E8M0); "nan_below_min": +-0 and every value of magnitude below the smallest
        value (|x| < 2^-127 in E8M0, before rounding) become the NaN code.
    int_cast: integer storage only: "direct" (default) or the C conversion through int32 on x86-64
        ("via_int32_x86", "via_int32_x86_checked"; elements.md §2.9): rounding must be "toward_zero"; NaN,
        +-Inf and values outside int32 give the int32 indefinite value 0x80000000 before the overflow policy.
    """

    rounding: str = "nearest_even"
    overflow: str | None = None
    nan: str | None = None
    subnormals: str = "keep"
    input_subnormals: str = "keep"
    source: str = "exact"
    stochastic_bits: int | None = None
    int_cast: str = "direct"
    unsigned_negative: str = "zero"
    nan_code: str = "canonical"
    absent_zero: str = "nan"
    nan_payload: str = "canonical"

    def __post_init__(self) -> None:
        check_choice("rounding mode", self.rounding, ROUNDING_MODES)
        if self.overflow is not None:
            check_choice("overflow policy", self.overflow, OVERFLOW_POLICIES)
        if self.nan is not None:
            check_choice("NaN policy", self.nan, NAN_POLICIES)
        check_choice("subnormal policy", self.subnormals, SUBNORMAL_POLICIES)
        check_choice("input subnormal policy", self.input_subnormals, INPUT_SUBNORMAL_POLICIES)
        check_choice("source policy", self.source, SOURCE_POLICIES)
        check_choice("integer cast", self.int_cast, INT_CASTS)
        check_choice("unsigned negative policy", self.unsigned_negative, UNSIGNED_NEGATIVE)
        check_choice("NaN code", self.nan_code, NAN_CODES)
        check_choice("absent zero policy", self.absent_zero, ABSENT_ZERO)
        check_choice("NaN payload policy", self.nan_payload, NAN_PAYLOADS)
        if self.nan_payload != "canonical" and self.nan_code != "canonical":
            raise QrefError(f"nan_payload={self.nan_payload!r} writes the NaN code from the input's payload and "
                            f"nan_code={self.nan_code!r} writes a fixed one: keep one of them at 'canonical'")
        if self.int_cast != "direct" and self.rounding != "toward_zero":
            raise QrefError(f"int_cast={self.int_cast!r} is a truncating C conversion; it needs "
                            f"rounding='toward_zero', got {self.rounding!r}")
        if self.rounding not in STOCHASTIC_MODES and self.stochastic_bits is not None:
            raise QrefError(f"stochastic_bits={self.stochastic_bits!r} is for the stochastic rounding modes "
                            f"({', '.join(STOCHASTIC_MODES)}); rounding={self.rounding!r} is deterministic and "
                            "takes none: drop stochastic_bits or choose a stochastic mode")
        if self.rounding in STOCHASTIC_MODES:
            n = self.stochastic_bits
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 32:
                raise QrefError(
                    f"rounding={self.rounding!r} needs stochastic_bits=N, the number of random bits per element "
                    f"(1..32), got {n!r}"
                )

    def with_options(self, **changes: object) -> CastPolicy:
        """A copy with the given fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def resolve(self, fmt: Format) -> ResolvedPolicy:
        """Fill the format defaults and check that the policy makes sense for ``fmt``."""
        overflow = self.overflow or fmt.default_overflow
        if isinstance(fmt, IntFormat):
            if self.int_cast != "direct":
                if fmt.bits > 16 and not (fmt.bits == 32 and fmt.signed):
                    raise QrefError(f"int_cast={self.int_cast!r} models the C conversion into storage of at most "
                                    f"16 bits (and int32); {fmt.name} is not covered")
                overflow = self.overflow or ("saturate" if fmt.narrowed else "wrap")
            if overflow not in ("saturate", "wrap", "zero"):
                raise QrefError(f"overflow={overflow!r} is for float formats; integer storage takes 'saturate', "
                                "'wrap' or 'zero'")
            if overflow == "wrap" and fmt.narrowed:
                raise QrefError(f"overflow='wrap' needs the full storage range; {fmt.name} is narrowed")
            if overflow == "zero" and not fmt.lo <= 0 <= fmt.hi:
                raise QrefError(f"overflow='zero' needs 0 in the storage range; {fmt.name} is [{fmt.lo}, {fmt.hi}]")
            if self.rounding in EXPONENT_MODES:
                raise QrefError(f"rounding={self.rounding!r} is for exponent-only float formats, not integer storage")
            if (self.nan_code, self.absent_zero, self.nan_payload) != ("canonical", "nan", "canonical"):
                raise QrefError(f"nan_code, nan_payload and absent_zero are for float formats; integer storage "
                                f"({fmt.name}) has no NaN code and always has a zero: leave them at 'canonical', "
                                "'canonical' and 'nan'")
            nan = self.nan or "zero"
            if nan not in ("zero", "error"):
                raise QrefError(f"nan={nan!r} is not available for integer storage (use 'zero' or 'error')")
            return ResolvedPolicy(self, overflow, nan)
        assert isinstance(fmt, FloatFormat)
        if overflow in ("wrap", "zero"):
            raise QrefError(f"overflow={overflow!r} is for integer storage; float formats take 'saturate', "
                            "'saturate_propagate', 'inf' or 'nan'")
        if self.int_cast != "direct":
            raise QrefError(f"int_cast={self.int_cast!r} is for integer storage; {fmt.name} is a float format")
        if self.rounding in EXPONENT_MODES and (fmt.mantissa_bits != 0 or fmt.zero):
            raise QrefError(f"rounding={self.rounding!r} is the float32-bit rule of exponent-only formats "
                            f"(float8_e8m0fnu); {fmt.name} has a significand or a zero")
        if self.unsigned_negative == "nan" and (fmt.signed or not fmt.has_nan):
            raise QrefError(f"unsigned_negative='nan' is for unsigned formats with a NaN code; {fmt.name} is "
                            + ("signed" if fmt.signed else "without NaN"))
        if self.unsigned_negative == "sign_over_top_bit" and (fmt.signed or fmt.zero):
            raise QrefError(f"unsigned_negative='sign_over_top_bit' is for unsigned formats without zero "
                            f"(float8_e8m0fnu); {fmt.name} " + ("is signed" if fmt.signed else "has a zero"))
        if self.unsigned_negative in ("magnitude", "min", "min_by_sign_bit") and fmt.signed:
            raise QrefError(f"unsigned_negative={self.unsigned_negative!r} is for unsigned formats; {fmt.name} is "
                            "signed")
        if self.nan_code == "all_ones" and fmt.nan not in ("ieee", "all_ones"):
            raise QrefError(f"nan_code='all_ones' is for formats whose NaN codes include the all-ones pattern "
                            f"(IEEE-style and 'all_ones' NaN); {fmt.name} has NaN encoding {fmt.nan!r}")
        if self.absent_zero != "nan" and (fmt.zero or fmt.signed):
            raise QrefError(f"absent_zero={self.absent_zero!r} is for unsigned formats without zero "
                            f"(float8_e8m0fnu); {fmt.name} " + ("has a zero" if fmt.zero else "is signed"))
        if overflow == "saturate_finite" and (fmt.has_inf or not fmt.has_nan):
            raise QrefError(f"overflow='saturate_finite' (+-Inf -> NaN) is for formats with NaN and without Inf; "
                            f"{fmt.name} " + ("has Inf" if fmt.has_inf else "has no NaN"))
        if overflow == "nan" and not fmt.has_nan:
            raise QrefError(f"overflow='nan' but {fmt.name} has no NaN; use 'saturate'")
        nan = self.nan or ("keep_sign" if fmt.has_nan else "flipped_sign_zero")
        if fmt.has_nan and nan in ("flipped_sign_zero", "zero"):
            raise QrefError(f"nan={nan!r} is for formats without NaN; {fmt.name} has a NaN code")
        if not fmt.has_nan and nan in ("keep_sign", "positive"):
            raise QrefError(f"nan={nan!r} needs a NaN code, and {fmt.name} has none; use 'flipped_sign_zero', "
                            "'zero', 'max' or 'error'")
        return ResolvedPolicy(self, overflow, nan)


@dataclass(frozen=True)
class ResolvedPolicy:
    """A CastPolicy with the format defaults filled in."""

    policy: CastPolicy
    overflow: str
    nan: str

    @property
    def rounding(self) -> str:
        return self.policy.rounding


DEFAULT_POLICY = CastPolicy()


__all__ = ["ABSENT_ZERO", "DEFAULT_POLICY", "EXPONENT_MODES", "INPUT_SUBNORMAL_POLICIES", "INT_CASTS", "NAN_CODES",
           "NAN_PAYLOADS", "NAN_POLICIES", "OVERFLOW_POLICIES", "ROUNDING_MODES", "SOURCE_POLICIES",
           "STOCHASTIC_MODES", "SUBNORMAL_POLICIES", "UNSIGNED_NEGATIVE", "CastPolicy", "ResolvedPolicy", "Rounding"]
