"""The rounding primitive every conversion reuses (spec: elements.md §2.3).

round_to_quantum(sig, exp, q) = sig * 2^(exp - q) rounded to an integer n under a rounding mode, computed with
unsigned 64-bit integer arithmetic only. With d = q - exp:
    floor  = sig >> d,  rem = sig mod 2^d,  half = 2^(d-1),   eta = rem / 2^d  (the discarded fraction)
and the mode decides whether to add one (the increment). ``parity_base`` gives the parity of a candidate:
parity(n) = (parity_base + n) mod 2, so "even" can mean the last bit of the *encoding* (P3109: for P = 1 the
parity of the exponent field).
"""

from __future__ import annotations

import numpy as np

from .exact import ONE, U64, decompose

_Z = U64(0)


def _shr(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """x >> s for non-negative int64 shift counts; 0 when s >= 64."""
    return np.where(s >= 64, _Z, x >> np.minimum(s, 63).astype(U64))


def _low_bits(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """x mod 2^s for 0 <= s (all of x when s >= 64)."""
    sc = np.minimum(s, 64).astype(U64)
    mask = np.where(sc >= 64, ~_Z, (ONE << np.minimum(sc, 63)) - ONE)
    return x & mask


def _scaled_floor(rem: np.ndarray, d: np.ndarray, nbits: int) -> tuple[np.ndarray, np.ndarray]:
    """(floor(rem * 2^nbits / 2^d), remainder bit count sh = d - nbits) for 0 <= rem < 2^d."""
    sh = d - nbits
    up = np.where(sh < 0, rem << np.clip(-sh, 0, 63).astype(U64), _Z)
    return np.where(sh >= 0, _shr(rem, sh), up), sh


def round_to_quantum(
    sig: np.ndarray,
    exp: np.ndarray,
    q: np.ndarray | int,
    neg: np.ndarray,
    mode: str,
    parity_base: np.ndarray | int = 0,
    random_bits: np.ndarray | None = None,
    nbits: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (n, inexact): n = round_mode(sig * 2^(exp - q)) as uint64, inexact = (n_floor * 2^q != x).

    The caller guarantees the exact left-shift case fits (sig * 2^(exp - q) < 2^64). Modes: see
    policy.ROUNDING_MODES ("ml_dtypes" is mapped by the caller). Stochastic modes need random_bits (uint64
    values in [0, 2^nbits)) and nbits (P3109 §4.7: A: floor(eta 2^N) + R >= 2^N; B: floor(eta 2^(N+1)) + 2R + 1
    >= 2^(N+1); C: RNE(eta 2^N) + R >= 2^N).
    """
    d = np.asarray(q, dtype=np.int64) - exp
    left = d <= 0
    n = np.where(left, sig << np.clip(-d, 0, 63).astype(U64), _shr(sig, np.maximum(d, 0)))
    dr = np.maximum(d, 0)
    rem = np.where(left, _Z, _low_bits(sig, dr))
    inexact = rem != _Z
    if mode == "toward_zero":
        return n, inexact
    if mode == "toward_max_magnitude":
        return n + inexact.astype(U64), inexact
    if mode == "up":
        return n + (inexact & ~neg).astype(U64), inexact
    if mode == "down":
        return n + (inexact & neg).astype(U64), inexact
    odd = ((np.asarray(parity_base, dtype=np.int64) + n.astype(np.int64)) & 1).astype(bool)
    if mode == "odd":
        return n + (inexact & ~odd).astype(U64), inexact
    if mode.startswith("nearest"):
        in_range = (dr > 0) & (dr <= 64)
        half = np.where(in_range, ONE << (np.clip(dr, 1, 64) - 1).astype(U64), _Z)
        above = in_range & (rem > half)
        tie = in_range & (rem == half)
        if mode == "nearest_even":
            inc = above | (tie & odd)
        elif mode == "nearest_away":
            inc = above | tie
        elif mode == "nearest_toward_zero":
            inc = above
        else:
            raise AssertionError(mode)
        return n + inc.astype(U64), inexact
    if mode.startswith("stochastic"):
        assert random_bits is not None and nbits is not None
        r = random_bits.astype(U64)
        if mode == "stochastic_a":
            t, _ = _scaled_floor(rem, dr, nbits)
            inc = t + r >= U64(1 << nbits)
        elif mode == "stochastic_b":
            t, _ = _scaled_floor(rem, dr, nbits + 1)
            inc = t + (r << ONE) + ONE >= U64(1 << (nbits + 1))
        elif mode == "stochastic_c":
            t, sh = _scaled_floor(rem, dr, nbits)
            below = _low_bits(rem, np.maximum(sh, 0))
            in_range = (sh > 0) & (sh <= 64)
            half = np.where(in_range, ONE << (np.clip(sh, 1, 64) - 1).astype(U64), _Z)
            t = t + (in_range & ((below > half) | ((below == half) & ((t & ONE) == ONE)))).astype(U64)
            inc = t + r >= U64(1 << nbits)
        else:
            raise AssertionError(mode)
        return n + (inc & inexact).astype(U64), inexact
    raise AssertionError(mode)


_TWO62 = float(2**62)


def round_to_integer(q: np.ndarray, mode: str, random_bits: np.ndarray | None = None, nbits: int | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(n, nan): n = q (any float array) rounded to an integer under ``mode`` exactly (int64; |q| >= 2^62 and
    +-Inf give +-2^62, which saturates any storage), nan = isnan(q). A stochastic mode takes ``random_bits``
    (N-bit integers broadcast to q's shape) and ``nbits`` = N, applied to the magnitude (P3109; elements.md
    §2.5)."""
    q64 = np.asarray(q).astype(np.float64)  # exact for every float dtype used here
    nan = np.isnan(q64)
    c = np.clip(np.where(nan, 0.0, q64), -_TWO62, _TWO62).reshape(-1)
    ex = decompose(c)
    rb = None if random_bits is None else np.broadcast_to(np.asarray(random_bits), q64.shape).reshape(-1)
    n, _ = round_to_quantum(ex.sig, ex.exp, 0, ex.neg, mode, 0, rb, nbits)
    v = n.astype(np.int64)
    v = np.where(ex.neg, -v, v)
    return v.reshape(q64.shape), nan


__all__ = ["round_to_integer", "round_to_quantum"]
