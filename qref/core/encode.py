"""encode: real values -> codes of a format (spec: elements.md §2, the readable reference path).

Fast paths (elements.md §2.10) are tables filled by this same reference path:
- 16-bit sources (float16, bfloat16): a 65536-entry table indexed by the input bits;
- float32 (float64) sources into formats with at most 6 (3) mantissa bits whose smallest quantum is >= 2^-132
  (2^-1025): the result depends only on the top 16 input bits and on whether the low 16 (48) bits are zero
  (they can only act as the sticky bit), so a 2 x 65536-entry table is exact for every deterministic mode;
- with one more bit of room (at most 5 (2) mantissa bits, smallest quantum >= 2^-131 (2^-1024)) bit 16 (48)
  is itself below the rounding bit, the sticky bit is OR-ed into it (rounding to odd there) and a 65536-entry
  table over the top 16 bits is exact (gather_top16_jam).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats.policy import STOCHASTIC_MODES, CastPolicy, ResolvedPolicy
from ..profiles import get_profile
from .exact import FINITE, INF, NAN, U64, ZERO, Exact, as_source_array, bit_length, decompose, from_ieee_bits
from .parallel import run_chunks, scratch, thread_limit
from .rounding import round_to_quantum

CHUNK = 1 << 16  # elements per chunk: keeps every temporary cache-resident and memory bounded


# ---------------------------------------------------------------------------------------------------------
# reference path on exact triples
# ---------------------------------------------------------------------------------------------------------
def _round_float(ex: Exact, fmt: FloatFormat, mode: str, rbits: np.ndarray | None, nbits: int | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Magnitude code (int64, before overflow/underflow handling) and E = floor(log2|x|) of finite inputs."""
    M = fmt.mantissa_bits
    E = ex.exp + bit_length(ex.sig) - 1
    q = np.maximum(E, fmt.qmin + M) - M
    base = ((q - fmt.qmin) << M) - fmt.code_offset
    if mode == "exponent_carry":  # elements.md §2.6: float32 exponent field + (first fraction bit)
        n_up, _ = round_to_quantum(ex.sig, ex.exp, q, ex.neg, "up", base)
        n_away, _ = round_to_quantum(ex.sig, ex.exp, q, ex.neg, "nearest_away", base)
        n = np.where(E >= -126, n_away, n_up)
    elif mode == "exponent_ceil":  # elements.md §2.6: float32 exponent field + (fraction != 0)
        n, _ = round_to_quantum(ex.sig, ex.exp, q, ex.neg, "toward_max_magnitude", base)
        n = np.where(E >= -126, n.astype(np.int64), (-126 - fmt.emin) - base)  # below 2^-126: the code of 2^-126
    else:
        n, _ = round_to_quantum(ex.sig, ex.exp, q, ex.neg, mode, base, rbits, nbits)
    return base + n.astype(np.int64), E


def _sign_over_top_bit(ex: Exact, fmt: FloatFormat) -> tuple[Exact, np.ndarray]:
    """unsigned_negative="sign_over_top_bit" (elements.md §2.4): the magnitudes to encode, with the finite ones of
    magnitude <= 2^(emin - 1) made zeros, and the mask of the codes whose top bit the sign is written over (the
    negative inputs that are not zeros then)."""
    fin = ex.cls == FINITE
    E = ex.exp + bit_length(ex.sig) - 1
    pow2 = (ex.sig & (ex.sig - U64(1))) == 0
    half = fmt.emin - 1  # 2^(emin - 1): half the smallest value
    tiny = fin & ((half > E) | ((half == E) & pow2))
    cls = np.where(tiny, ZERO, ex.cls).astype(np.int8)
    mag = Exact(cls, np.zeros_like(ex.neg), np.where(tiny, U64(0), ex.sig), ex.exp, ex.subnormal)
    return mag, ex.neg & (cls != ZERO)


def _unsigned_sign_rules(ex: Exact, fmt: FloatFormat, rp: ResolvedPolicy, rbits: np.ndarray | None
                         ) -> np.ndarray | None:
    """The codes under the unsigned_negative rules that act on the sign bit of every input (elements.md §2.4):
    "min_by_sign_bit" (0x00 for every input with the sign bit set) and "sign_over_top_bit"; None for the others."""
    rule = rp.policy.unsigned_negative
    if rule not in ("min_by_sign_bit", "sign_over_top_bit"):
        return None
    if rp.policy.input_subnormals == "zero":
        ex = ex.flush_subnormal_inputs()
    plain = ResolvedPolicy(replace(rp.policy, unsigned_negative="zero"), rp.overflow, rp.nan)  # positive inputs
    if rule == "min_by_sign_bit":
        pos = Exact(ex.cls, np.zeros_like(ex.neg), ex.sig, ex.exp, ex.subnormal)
        return np.where(ex.neg, U64(0), encode_float_exact(pos, fmt, plain, rbits))
    mag, top = _sign_over_top_bit(ex, fmt)
    return encode_float_exact(mag, fmt, plain, rbits) | np.where(top, U64(1 << (fmt.bits - 1)), U64(0))


def encode_float_exact(ex: Exact, fmt: FloatFormat, rp: ResolvedPolicy, rbits: np.ndarray | None = None
                       ) -> np.ndarray:
    """Codes (uint64) of exact triples in a float format under a resolved policy (elements.md §2.4-2.7)."""
    pol = rp.policy
    signed_rule = _unsigned_sign_rules(ex, fmt, rp, rbits)
    if signed_rule is not None:
        return signed_rule
    if pol.input_subnormals == "zero":
        ex = ex.flush_subnormal_inputs()
    if pol.unsigned_negative == "magnitude":  # the sign bit is ignored (elements.md §2.4)
        ex = Exact(ex.cls, np.zeros_like(ex.neg), ex.sig, ex.exp, ex.subnormal)
    M = fmt.mantissa_bits
    sign = np.where(ex.neg, U64(fmt.sign_mask), U64(0))
    out = np.zeros(len(ex), dtype=U64)
    nan_code = None if not fmt.has_nan else U64(fmt.nan_code if pol.nan_code == "canonical" else
                                                 fmt.sign_mask - 1 if fmt.signed else (1 << fmt.bits) - 1)
    # unsigned formats: a negative nonzero value or -Inf (§2.4): P3109 clamps at 0; NaN without zero; or 0x00
    neg_code = U64(0) if pol.unsigned_negative == "min" or (fmt.zero and pol.unsigned_negative == "zero") \
        else nan_code

    def nan_with_sign(neg: np.ndarray) -> np.ndarray:
        assert nan_code is not None
        return (np.where(neg, U64(fmt.sign_mask), U64(0)) | nan_code) if fmt.nan_has_sign else np.full(
            neg.shape, nan_code, dtype=U64)

    maxc = U64(fmt.max_finite_code)
    over_inf = U64(fmt.inf_code) if fmt.has_inf else maxc  # P3109: a finite format saturates infinities

    # -- finite nonzero ----------------------------------------------------------------------------------
    fin = ex.cls == FINITE
    if fin.any():
        code, E = _round_float(ex, fmt, rp.rounding, rbits, pol.stochastic_bits)
        if not fmt.zero:
            code = np.maximum(code, 0)  # a format without zero clamps values below its minimum to the minimum
        if pol.subnormals == "flush" and fmt.subnormals:
            code = np.where((code > 0) & (code < (1 << M)), 0, code)
        ovf = (fmt.emax < E) | (code > fmt.max_finite_code)
        mag = np.where(ovf, 0, code).astype(U64)
        if rp.overflow in ("saturate", "saturate_propagate", "saturate_finite"):
            ovf_code = np.full(len(ex), maxc, dtype=U64)
        elif rp.overflow == "inf":
            r = rp.rounding
            toward_zero = np.full(len(ex), r == "toward_zero")
            if r == "up":
                toward_zero = ex.neg.copy()
            elif r == "down":
                toward_zero = ~ex.neg
            ovf_code = np.where(toward_zero, maxc, over_inf)
        else:  # "nan"
            ovf_code = nan_with_sign(ex.neg)
        mag = np.where(ovf, ovf_code, mag)
        is_nan_result = ovf & (rp.overflow == "nan")
        if fmt.signed:
            keep_sign = (mag != 0) | fmt.has_negative_zero
            val = np.where(is_nan_result, ovf_code, np.where(keep_sign, sign | mag, mag))
        else:
            below = ex.neg
            val = np.where(below, neg_code, mag)
            if not fmt.zero and pol.absent_zero == "nan_below_min":  # §2.7: |x| < the smallest value (2^emin)
                val = np.where(~below & (fmt.emin > E), nan_code, val)
        out = np.where(fin, val, out)

    # -- zeros -------------------------------------------------------------------------------------------
    zero = ex.cls == ZERO
    if zero.any():
        if not fmt.zero:  # elements.md §2.7: the NaN code, or the smallest code (absent_zero="min")
            zval = np.full(len(ex), U64(0) if pol.absent_zero == "min" else nan_code, dtype=U64)
        elif fmt.has_negative_zero:
            zval = sign
        else:
            zval = np.zeros(len(ex), dtype=U64)
        out = np.where(zero, zval, out)

    # -- infinities ----------------------------------------------------------------------------------------
    inf = ex.cls == INF
    if inf.any():
        if rp.overflow == "saturate":
            mag_i = np.full(len(ex), maxc, dtype=U64)
        elif rp.overflow in ("saturate_propagate", "inf"):
            mag_i = np.full(len(ex), over_inf, dtype=U64)
        else:
            mag_i = None
        if mag_i is None:
            ival = nan_with_sign(ex.neg)
        elif fmt.signed:
            ival = sign | mag_i
        else:
            ival = mag_i
        if not fmt.signed:  # -Inf is below an unsigned range
            ival = np.where(ex.neg, neg_code, ival)
        out = np.where(inf, ival, out)

    # -- NaN -----------------------------------------------------------------------------------------------
    isnan = ex.cls == NAN
    if isnan.any():
        rule = rp.nan
        if rule == "error":
            raise QrefError(f"NaN input while encoding to {fmt.name} with nan='error'")
        if rule == "keep_sign":
            nval = nan_with_sign(ex.neg)
        elif rule == "positive":
            nval = np.full(len(ex), nan_code, dtype=U64)
        elif rule == "flipped_sign_zero":
            nval = np.where(ex.neg, U64(0), U64(fmt.sign_mask))
        elif rule == "zero":
            nval = np.zeros(len(ex), dtype=U64)
        else:  # "max"
            nval = (sign if fmt.signed else U64(0)) | maxc
        if rule in ("keep_sign", "positive") and pol.nan_payload != "canonical" and fmt.nan == "ieee" \
                and ex.payload is not None:
            nval = _with_payload(nval, ex.payload, fmt, pol.nan_payload)
        out = np.where(isnan, nval, out)
    return out


def _with_payload(nval: np.ndarray, payload: np.ndarray, fmt: FloatFormat, rule: str) -> np.ndarray:
    """NaN codes ``nval`` (canonical, sign set where kept) with the fraction rebuilt from the left-aligned source
    ``payload`` (elements.md §2.7): P = its top M bits; "keep_quiet": P | quiet bit; "keep_raw": P, 1 where P = 0;
    "truncate": P, the Inf code where P = 0. A zero payload (a NaN without payload bits) keeps the canonical NaN."""
    M = fmt.mantissa_bits
    p = payload >> U64(64 - M)
    quiet = U64(1 << (M - 1))
    if rule == "keep_quiet":
        frac = p | quiet
    elif rule == "keep_raw":
        frac = np.where(p == 0, U64(1), p)
    else:  # "truncate": a plain bit truncation, P = 0 is the exponent field alone: Inf
        frac = p
    return np.where(payload == 0, nval, (nval & ~U64((1 << M) - 1)) | frac)


def encode_int_exact(ex: Exact, fmt: IntFormat, rp: ResolvedPolicy, rbits: np.ndarray | None = None
                     ) -> np.ndarray:
    """Codes (uint64 storage bit patterns) of exact triples in integer storage (elements.md §2.9)."""
    pol = rp.policy
    if pol.input_subnormals == "zero":
        ex = ex.flush_subnormal_inputs()
    c_cast = pol.int_cast != "direct"  # the C conversion through int32 on x86-64 (elements.md §2.9)
    mode = rp.rounding
    E = ex.exp + bit_length(ex.sig) - 1
    big = E >= 62
    exp = np.where(big, 0, ex.exp)  # keeps the left shift in range; big values are handled below
    n, inexact = round_to_quantum(ex.sig, exp, 0, ex.neg, mode, 0, rbits, pol.stochastic_bits)
    mask = U64((1 << fmt.bits) - 1)
    if rp.overflow == "wrap":
        # n mod 2^64 is exact for integer-valued inputs when shifts >= 64 give 0: x is a multiple of 2^64
        nw = np.where(big, np.where(ex.exp >= 64, U64(0), ex.sig << np.clip(ex.exp, 0, 63).astype(U64)), n)
        val = np.where(ex.neg, (~nw + U64(1)), nw) & mask
        val = np.where(ex.cls == FINITE, val, U64(0))
        if c_cast:  # the x86-64 conversion to int32 gives 0x80000000 for NaN, +-Inf and |x| >= 2^31
            indefinite = (ex.cls == NAN) | (ex.cls == INF) | ((ex.cls == FINITE) & (E >= 31))
            if pol.int_cast == "via_int32_x86_checked":  # also 2^31 - 1 < x < 2^31 (elements.md §2.9)
                indefinite |= (ex.cls == FINITE) & ~ex.neg & ~big & (n == U64(2**31 - 1)) & inexact
            val = np.where(indefinite, U64(0x80000000) & mask, val)
    else:
        lo, hi = fmt.lo, fmt.hi
        pos_over = (~ex.neg) & (big | (n > U64(max(hi, 0))))
        neg_over = ex.neg & (big | (n > U64(max(-lo, 0))))
        v = np.where(ex.neg, -(n.astype(np.int64)), n.astype(np.int64))
        inf = ex.cls == INF
        if rp.overflow == "zero":  # out of range (and +-Inf) -> 0 (elements.md §2.9)
            v = np.where(pos_over | neg_over | (v < lo) | (v > hi) | inf, 0, v)
        else:
            v = np.where(pos_over, hi, np.where(neg_over, lo, v))
            v = np.clip(v, lo, hi)  # narrowed ranges also clamp from the other side (e.g. negatives into uint)
            v = np.where(inf, np.where(ex.neg, lo, hi), v)
        v = np.where(ex.cls == ZERO, np.clip(0, lo, hi), v)
        val = v.astype(U64) & mask
    isnan = ex.cls == NAN
    if isnan.any():
        if rp.nan == "error":
            raise QrefError(f"NaN input while encoding to {fmt.name} with nan='error'")
        if not (c_cast and rp.overflow == "wrap"):
            val = np.where(isnan, U64(0), val)
    return val


def encode_exact(ex: Exact, fmt: Format, rp: ResolvedPolicy, rbits: np.ndarray | None = None) -> np.ndarray:
    if isinstance(fmt, IntFormat):
        return encode_int_exact(ex, fmt, rp, rbits)
    return encode_float_exact(ex, fmt, rp, rbits)


# ---------------------------------------------------------------------------------------------------------
# tables (fast paths) and the public entry point
# ---------------------------------------------------------------------------------------------------------
_F32 = get_format("float32")
_TO_F32 = CastPolicy().resolve(_F32)
_F16 = get_format("float16")
_TO_F16 = CastPolicy().resolve(_F16)


#: inputs of at most this many elements take the reference path while their table is not built yet
SMALL = 64
_BUILT: set[tuple[Format, ResolvedPolicy]] = set()  # (format, policy) pairs whose tables have been built


@lru_cache(maxsize=256)
def _table16(fmt: Format, rp: ResolvedPolicy, src: str) -> np.ndarray:
    """Codes of all 65536 float16 / bfloat16 bit patterns."""
    _BUILT.add((fmt, rp))
    bits = np.arange(1 << 16, dtype=np.uint16)
    ebits, mbits = (5, 10) if src == "float16" else (8, 7)
    codes = encode_exact(from_ieee_bits(bits, ebits, mbits), fmt, rp).astype(fmt.code_dtype)
    codes.setflags(write=False)
    return codes


# source dtype -> (exponent bits, mantissa bits, low sticky bits, unsigned view)
_TOP16 = {"float32": (8, 23, 16, np.uint32), "float64": (11, 52, 48, np.uint64)}


def top16_table_eligible(fmt: Format, rp: ResolvedPolicy, src: str = "float32") -> bool:
    """True when a table over the top 16 source bits + a sticky flag is exact (elements.md §2.10).

    The low ``low`` bits must lie strictly below the rounding bit for every input: for normals the rounding bit
    is bit (mantissa - M - 1), so M <= mantissa - low - 1; for source subnormals q - exp >= low + 1 needs
    qmin >= 1 - bias_src - mantissa + low + 1.
    """
    ebits, mbits, low, _ = _TOP16[src]
    if rp.rounding in STOCHASTIC_MODES or rp.policy.input_subnormals != "keep":
        return False
    if isinstance(fmt, IntFormat):  # |x| < 64 for every unsaturated value: rounding bit >= bit 17 of float32
        return src == "float32" and fmt.bits <= 7 and rp.overflow == "saturate"
    src_qmin = 2 - (1 << (ebits - 1)) - mbits
    return fmt.mantissa_bits <= mbits - low - 1 and fmt.qmin >= src_qmin + low + 1


@lru_cache(maxsize=256)
def _top16_table(fmt: Format, rp: ResolvedPolicy, src: str) -> np.ndarray:
    """Codes for source bits (hi16 << low) | sticky, at index 2 * hi16 + (low bits != 0)."""
    _BUILT.add((fmt, rp))
    ebits, mbits, low, view = _TOP16[src]
    hi = np.arange(1 << 16, dtype=view) << view(low)
    bits = np.stack([hi, hi | view(1)], axis=1).reshape(-1)
    codes = encode_exact(from_ieee_bits(bits, ebits, mbits), fmt, rp).astype(fmt.code_dtype)
    codes.setflags(write=False)
    return codes


def _random_bits(shape: tuple[int, ...], nbits: int, random_bits: object, seed: object) -> np.ndarray:
    if random_bits is not None and seed is not None:
        raise QrefError("give random_bits= or seed=, not both (the seed would be ignored)")
    if random_bits is None:
        return random_bits_from_seed(int(np.prod(shape, dtype=np.int64)), nbits, _check_seed(seed))
    else:
        r = np.asarray(random_bits)
        if r.dtype.kind not in "iu":
            raise QrefError(f"random_bits must be an integer array, got dtype {r.dtype}")
        if r.size and (r.min() < 0 or r.max() >= (1 << nbits)):
            raise QrefError(f"random_bits must lie in [0, 2^{nbits}) for stochastic_bits={nbits}")
        try:
            r = np.broadcast_to(r, shape)
        except ValueError:
            raise QrefError(f"random_bits of shape {r.shape} does not broadcast to the input shape {shape}") from None
        return r.astype(U64).reshape(-1)


def _check_seed(seed: object) -> int:
    if seed is None:
        raise QrefError("stochastic rounding needs random_bits=<array of N-bit integers> or seed=<int>")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise QrefError(f"seed must be a non-negative integer (the PCG64 seed of the random bits), got {seed!r}")
    return int(seed)


def random_bits_from_seed(count: int, nbits: int, seed: object, start: int = 0) -> np.ndarray:
    """count N-bit integers: the top N bits of PCG64(seed).random_raw() (a stream stable across numpy versions),
    from its ``start``-th output on (PCG64.advance: a chunk of x takes its own stream positions, elements.md
    §2.11)."""
    gen = np.random.PCG64(seed)
    if start:
        gen.advance(start)
    raw = gen.random_raw(count)
    return (np.asarray(raw, dtype=U64) >> U64(64 - nbits)).reshape(-1)


def build_policy(
    profile: str | CastPolicy | None = None, fmt: Format | None = None, source_dtype: object = None,
    **options: object
) -> CastPolicy:
    """A CastPolicy from a profile (name or record) plus explicit options (None = keep the profile's); a named
    profile's policy is the one it gives for ``fmt`` from ``source_dtype`` (profiles.md §4)."""
    if profile is None:
        base = CastPolicy()
    elif isinstance(profile, CastPolicy):
        base = profile
    else:
        base = get_profile(profile).cast_for(fmt, source_dtype)
    return base.with_options(**options)


def encode(
    x: object,
    fmt: str | Format,
    *,
    rounding: str | None = None,
    overflow: str | None = None,
    subnormals: str | None = None,
    random_bits: object = None,
    seed: object = None,
    nan: str | None = None,
    input_subnormals: str | None = None,
    stochastic_bits: int | None = None,
    source: str | None = None,
    profile: str | CastPolicy | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Codes of ``x`` in ``fmt`` as unsigned integers (uint8 for <= 8 bits, then uint16/uint32/uint64).

    Every option defaults to the profile's value (``profile=None``: rounding="nearest_even", overflow and nan
    = the format's ecosystem default, subnormals="keep", input_subnormals="keep", source="exact"); see
    CastPolicy and elements.md §2 for each value. Stochastic modes take N = ``stochastic_bits`` random bits per
    element from ``random_bits`` (integers in [0, 2^N), broadcast to x) or, if absent, from ``seed``.
    threads: threads for a large x (default None: $QREF_NUM_THREADS, else every core; 1: the calling thread;
    the codes never depend on it, elements.md §2.11).
    """
    f = get_format(fmt)
    arr = as_source_array(x)
    pol = build_policy(profile, f, arr.dtype, rounding=rounding, overflow=overflow, subnormals=subnormals, nan=nan,
                       input_subnormals=input_subnormals, source=source, stochastic_bits=stochastic_bits)
    rp = pol.resolve(f)
    shape = arr.shape
    flat = arr.reshape(-1)
    if flat.dtype.kind == "O" and isinstance(f, IntFormat) and rp.overflow == "wrap":
        flat = _reduce_rationals(flat, f.bits)
    via32 = pol.source == "via_float32" and flat.dtype == np.float64 and isinstance(f, FloatFormat)
    # elements.md §2.12: a float input of another float dtype rounded to float16 first (float64 via float32)
    via16 = (pol.source == "via_float16" and isinstance(f, FloatFormat) and flat.dtype != np.float16
             and (flat.dtype.kind == "f" or flat.dtype.name == "bfloat16"))
    rbits, seeded, nbits = None, None, 0
    if pol.rounding in STOCHASTIC_MODES:
        assert pol.stochastic_bits is not None
        nbits = pol.stochastic_bits
        if random_bits is None:
            seeded = _check_seed(seed)  # each chunk draws its own positions of the stream (elements.md §2.11)
        else:
            rbits = _random_bits(shape, nbits, random_bits, seed)
    elif random_bits is not None or seed is not None:
        raise QrefError(f"random_bits/seed are only used by stochastic rounding, not rounding={pol.rounding!r}")
    out = np.empty(flat.shape, dtype=f.code_dtype)

    def work(lo: int, hi: int) -> None:
        part = src = flat[lo:hi]
        if via32:
            part = encode_exact(decompose(part), _F32, _TO_F32).astype(np.uint32).view(np.float32)
        elif via16:  # float64: to float32 first (elements.md §2.12)
            if part.dtype == np.float64:
                part = encode_exact(decompose(part), _F32, _TO_F32).astype(np.uint32).view(np.float32)
            part = encode_exact(decompose(part), _F16, _TO_F16).astype(np.uint16).view(np.float16)
        rb = rbits[lo:hi] if rbits is not None else (
            None if seeded is None else random_bits_from_seed(hi - lo, nbits, seeded, lo))
        encode_flat(part, f, rp, rb, out=out[lo:hi])
        if (via32 or via16) and pol.nan_payload != "canonical":  # elements.md §2.7: a NaN's payload rule acts from
            isn = np.isnan(src)                                   # the input to the target, past the intermediate
            if isn.any():
                out[lo:hi][isn] = encode_exact(decompose(src[isn]), f, rp)

    with thread_limit(threads):
        run_chunks(work, flat.size)
    return out.reshape(shape)


def _reduce_rationals(flat: np.ndarray, bits: int) -> np.ndarray:
    """Exact rationals v -> sign(v) * (|v| mod 2^bits): the same code under overflow="wrap" for every rounding
    mode (2^bits is an even integer: ties, parity and the direction toward zero are kept; elements.md §2.9), and
    within the 63 bits the exact triples hold."""
    from fractions import Fraction

    m = 1 << bits
    out = np.empty(flat.shape, dtype=object)
    for i, v in enumerate(flat):  # exact rationals are Python objects, one element at a time
        f = Fraction(v)
        a = abs(f)
        if a >= m:
            a -= (a.numerator // a.denominator // m) * m
        out[i] = -a if f < 0 else a
    return out


def encode_flat(flat: np.ndarray, f: Format, rp: ResolvedPolicy, rbits: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
    """encode on a flat array with a resolved policy: table paths where exact, chunked reference otherwise; the
    codes go to ``out`` (f.code_dtype, flat's size) where given, else to a new array, which is returned."""
    dt = flat.dtype
    # tables cover every input pattern, NaN included: nan="error" must raise only on a NaN input (reference path).
    # A few elements take the reference path (the tables are made by it, so the codes are the same) unless the
    # table is built already: a first small call does not pay for a 65536-entry table (~0.3 s), which e.g. runs
    # past Hypothesis's 200 ms deadline in a user's @given test
    tables = rbits is None and rp.nan != "error" and (flat.size > SMALL or (f, rp) in _BUILT)
    if tables and rp.policy.input_subnormals == "keep" and dt.itemsize == 2 and dt.kind in "fV":
        src = "float16" if dt == np.float16 else ("bfloat16" if dt.name == "bfloat16" else None)
        if src is not None:
            return gather16(flat.view(np.uint16), _table16(f, rp, src), out)
    if tables and dt in (np.float32, np.float64) and top16_table_eligible(f, rp, dt.name):
        view, low = _TOP16[dt.name][3], _TOP16[dt.name][2]
        if top16_jam_eligible(f, rp, dt.name):
            return gather_top16_jam(flat.view(view), _top16_jam_table(f, rp, dt.name), low, out)
        return gather_top16(flat.view(view), _top16_table(f, rp, dt.name), low, out)
    out = np.empty(flat.shape, dtype=f.code_dtype) if out is None else out
    for start in range(0, flat.size, CHUNK):
        sl = slice(start, start + CHUNK)
        ex = decompose(flat[sl])
        out[sl] = encode_exact(ex, f, rp, None if rbits is None else rbits[sl])
    return out


GATHER_CHUNK = 1 << 18  # elements per gather chunk (measured best: fewer Python-level calls, buffers in L3)


def _out(bits: np.ndarray, table: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    return np.empty(bits.shape, dtype=table.dtype) if out is None else out


def take_via(table: np.ndarray, index: np.ndarray, out: np.ndarray, buf: np.ndarray | None) -> np.ndarray:
    """table[index] into ``out`` for indices in [0, table.size), cast first into the intp buffer ``buf`` where
    given: np.take casts an index of any other dtype into a new intp array (fresh pages) on every call."""
    if buf is not None:
        i = buf[: index.size].reshape(index.shape)
        np.copyto(i, index, casting="unsafe")  # in [0, table.size): exact in intp
        index = i
    return np.take(table, index, out=out, mode="clip")  # in range: no per-index check


def gather16(bits: np.ndarray, table: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """table[bits] for 16-bit patterns (into ``out`` where given), in chunks through one intp buffer kept for
    the thread (parallel.scratch): np.take on a uint16 index would allocate (and fault in) an intp copy of the
    whole index array first."""
    out = _out(bits, table, out)
    flat, o = bits.reshape(-1), out.reshape(-1)
    idx = scratch("encode.idx", min(flat.size, GATHER_CHUNK), np.intp)
    for start in range(0, flat.size, GATHER_CHUNK):
        take_via(table, flat[start:start + GATHER_CHUNK], o[start:start + GATHER_CHUNK], idx)
    return out


def top16_jam_eligible(fmt: Format, rp: ResolvedPolicy, src: str = "float32") -> bool:
    """True when bit ``low`` of the source (the lowest of the top 16) also lies strictly below the rounding bit
    for every input (elements.md §2.10): then the low ``low`` bits can be OR-ed into it (rounding to odd at bit
    ``low``, exact under every deterministic mode) and a 65536-entry table over the top 16 bits is exact."""
    if not top16_table_eligible(fmt, rp, src):
        return False
    ebits, mbits, low, _ = _TOP16[src]
    if isinstance(fmt, IntFormat):  # [lo, hi] within [-64, 63]: values with |x| >= 64 saturate whatever their
        return fmt.hi < 64 and fmt.lo >= -64  # low bits; below, the rounding bit (2^-1) is at bit >= 17
    src_qmin = 2 - (1 << (ebits - 1)) - mbits
    return fmt.mantissa_bits <= mbits - low - 2 and fmt.qmin >= src_qmin + low + 2


@lru_cache(maxsize=256)
def _top16_jam_table(fmt: Format, rp: ResolvedPolicy, src: str) -> np.ndarray:
    """Codes of the source bits hi16 << low, for every hi16: the sticky-free half of _top16_table (bit ``low``
    of hi16 << low plays the sticky bit when it is set)."""
    codes = np.ascontiguousarray(_top16_table(fmt, rp, src)[0::2])
    codes.setflags(write=False)
    return codes


def gather_top16_jam(bits: np.ndarray, table: np.ndarray, low: int, out: np.ndarray | None = None) -> np.ndarray:
    """table[(bits | sticky(low bits) << low) >> low] with sticky = [low bits != 0], in cache-sized chunks.

    ((bits & (2^low - 1)) + (2^low - 1)) has bit ``low`` set exactly when the low bits are nonzero; OR-ed into
    bits it jams the sticky bit into bit ``low`` (rounding to odd there)."""
    ut = bits.dtype.type
    out = _out(bits, table, out)
    n = min(bits.size, GATHER_CHUNK)
    t, idx = scratch("encode.bits", n, bits.dtype), scratch("encode.idx", n, np.intp)
    mask = ut((1 << low) - 1)
    for start in range(0, bits.size, GATHER_CHUNK):
        b = bits[start:start + GATHER_CHUNK]
        w = t[: b.size]
        np.bitwise_and(b, mask, out=w)
        w += mask
        w |= b
        w >>= ut(low)
        take_via(table, w, out[start:start + GATHER_CHUNK], idx)  # w < 2^16
    return out


def gather_top16(bits: np.ndarray, table: np.ndarray, low: int, out: np.ndarray | None = None) -> np.ndarray:
    """table[2 * (bits >> low) + (low bits != 0)], in cache-sized chunks (into ``out`` where given)."""
    ut = bits.dtype.type
    out = _out(bits, table, out)
    n = min(bits.size, GATHER_CHUNK)
    idx, sticky = scratch("encode.idx", n, np.intp), scratch("encode.sticky", n, bool)
    w = scratch("encode.bits", n, bits.dtype)
    for start in range(0, bits.size, GATHER_CHUNK):
        b = bits[start:start + GATHER_CHUNK]
        i, st, ww = idx[: b.size], sticky[: b.size], w[: b.size]
        np.right_shift(b, ut(low - 1), out=ww)
        np.bitwise_and(ww, ut(0x1FFFE), out=ww)
        np.copyto(i, ww, casting="unsafe")  # < 2^17: exact in intp
        np.not_equal(np.bitwise_and(b, ut((1 << low) - 1), out=ww), 0, out=st)
        i += st
        np.take(table, i, out=out[start:start + GATHER_CHUNK], mode="clip")  # in range: no per-index check
    return out


def stochastic_random_bits(shape: tuple[int, ...], nbits: int, random_bits: object = None, seed: object = None
                           ) -> np.ndarray:
    """The N-bit random integers of a stochastic rounding, flat in C order (elements.md §2.4): ``random_bits``
    checked (integers in [0, 2^N), broadcast to ``shape``) or made from ``seed`` by ``random_bits_from_seed``."""
    return _random_bits(shape, nbits, random_bits, seed)


__all__ = ["CHUNK", "GATHER_CHUNK", "SMALL", "build_policy", "encode", "encode_exact", "encode_flat",
           "encode_float_exact", "encode_int_exact", "gather16", "gather_top16", "gather_top16_jam",
           "random_bits_from_seed", "stochastic_random_bits", "take_via", "top16_jam_eligible", "top16_table_eligible"]
