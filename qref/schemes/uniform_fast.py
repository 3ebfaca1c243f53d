"""The integer steps of uniform quantize on floats and int32 (spec: docs/spec/uniform.md §2.5, informative).

``integer_tail_fast(scheme, q, Z, unspecified)`` returns what ``UniformScheme._integer_tail`` (the definition:
exact decomposition, the core's ``round_to_quantum``, int64) returns, for integer storage of at most 16 bits and
float32 / float64 values q. Why each step is exact:

    r = round_integral(q, mode)         t = trunc|q| and f = |q| - t are exact (f is the fractional part), so
                                        r = sign(q) (t + inc(f, t)) is exact: f > 0 only where t + 1 fits;
                                        nearest_even is np.rint (IEEE roundToIntegralTiesToEven)
    int32 checks on r                   r is an integer-valued float: r > 2^31 - 1 <=> r >= 2^31, exact
    rc = clip(r, W_lo, W_hi)            W = [full_lo - max z - 1, full_hi - min z + 1]: every r outside W gives
                                        the same saturated code and the same storage-range flag as W's end
                                        (|W| < 2^18: exact in float32), so n = int32(rc) + z cannot overflow
    after_rounding_float                fl_C(fl64(r + z)) as the definition forms it (float64 sum, one rounding
                                        to C by numpy's correctly rounded cast); r + z in C when every |r| + |z|
                                        < 2^p (integers: the sum is exact in both)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..formats import IntFormat

if TYPE_CHECKING:
    from .uniform import UniformScheme

_TWO31 = float(2**31)
_TWO62 = float(2**62)


def round_integral(a: np.ndarray, mode: str) -> np.ndarray:
    """a (float32 or float64) rounded to an integer-valued float of the same dtype under ``mode``; NaN and
    +-Inf stay."""
    with np.errstate(invalid="ignore"):
        if mode == "nearest_even":
            return np.rint(a)
        if mode == "toward_zero":
            return np.trunc(a)
        if mode == "up":
            return np.ceil(a)
        if mode == "down":
            return np.floor(a)
        if mode in ("nearest_away", "nearest_toward_zero"):
            # rint, then move the exact ties (|a - rint(a)| = 1/2, exact) away from / toward zero
            r = np.array(np.rint(a))  # an array also for 0-d a (assigned below)
            tie = np.abs(a - r) == 0.5
            if tie.any():
                half = np.copysign(a.dtype.type(0.5), a[tie])
                r[tie] = a[tie] + half if mode == "nearest_away" else a[tie] - half
            return r
        m = np.abs(a)
        t = np.trunc(m)
        f = m - t
        if mode == "nearest_away":
            inc = f >= 0.5
        elif mode == "nearest_toward_zero":
            inc = f > 0.5
        elif mode == "toward_max_magnitude":
            inc = f > 0
        elif mode == "odd":
            inc = (f > 0) & (np.fmod(t, 2) == 0)
        else:
            raise AssertionError(mode)
        return np.copysign(t + inc, a)


def round_to_int_fast(q: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, nan) equal to ``uniform.round_to_int(q, mode)``: int64, +-Inf and |q| >= 2^62 give +-2^62."""
    a = np.asarray(q)
    if a.dtype != np.float64 and a.dtype != np.float32:
        a = a.astype(np.float32) if a.dtype.itemsize <= 4 else a.astype(np.float64)
    nan = np.isnan(a)
    r = np.clip(np.where(nan, 0, round_integral(a, mode)), -_TWO62, _TWO62)
    return r.astype(np.int64), nan


def integer_tail_applies(s: UniformScheme, q: np.ndarray) -> bool:
    """The fast integer steps cover integer storage of <= 16 bits with float32 / float64 values."""
    return (isinstance(s.storage, IntFormat) and s.storage.bits <= 16
            and q.dtype in (np.dtype(np.float32), np.dtype(np.float64)))


def integer_tail_fast(s: UniformScheme, q: np.ndarray, Z: np.ndarray, unspecified: np.ndarray) -> np.ndarray:
    """Codes equal to ``s._integer_tail(q, Z, unspecified)``; ``unspecified`` is updated in place alike."""
    A = s.arithmetic
    C = q.dtype
    lo, hi = s.storage_bounds
    full_lo, full_hi = s.storage.full_range
    r = np.asarray(round_integral(q, A.rounding))
    nan = np.isnan(r)
    any_nan = bool(nan.any())  # the NaN steps below change nothing when there is none
    Z32 = np.asarray(Z, dtype=np.int32)
    # max |r| over the non-NaN r (NaN when every r is NaN, 0 for none), without an |r| array
    amax = max(float(np.fmax.reduce(r, axis=None)), -float(np.fmin.reduce(r, axis=None))) if r.size else 0.0
    # the int32 checks below can only flag values beyond +-(2^31 - 2^17): skipped when no r is (NaN ignored)
    wide = A.conversion == "int32" and r.size > 0 and amax >= _TWO31 - 2**17
    if wide:
        unspecified |= (r < -_TWO31) | (r >= _TWO31)
    if A.zero_point == "after_rounding_float":
        big = amax  # NaN ignored; Inf gives Inf
        zmax = float(np.abs(Z).max()) if Z.size else 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            if big + zmax < 2.0 ** (np.finfo(C).nmant + 1):
                # integers below 2^p: r + z is exact in C, so it equals fl_C(fl64(r + z)) (an integer already);
                # r + 0 = r but for the sign of a zero, which no integer code sees
                if Z.any():
                    r = np.asarray(r + Z.astype(C))
            else:
                r64 = np.clip(r.astype(np.float64), -_TWO62, _TWO62)
                r64 = np.where(np.isinf(q), q, r64)  # +-Inf stays Inf: -Inf + Inf is NaN
                r = np.asarray(np.rint((r64 + Z.astype(np.float64)).astype(C)))
        nan = nan | np.isnan(r)
        any_nan = bool(nan.any())
        if A.conversion == "int32":
            unspecified |= (r < -_TWO31) | (r >= _TWO31)
        if A.constants == "unspecified":  # the zero point as a C value (exact for |z| < 2^16 in float32)
            inexact = Z.astype(C).astype(np.float64) != Z
            if inexact.any():
                unspecified |= np.broadcast_to(inexact, q.shape)
        zadd = None
    elif A.zero_point == "after_rounding":
        zadd = Z32 if Z.any() else None  # adding zero points 0 changes no integer
        if wide:  # r + z outside int32, exactly in float64
            with np.errstate(invalid="ignore"):
                r64 = r.astype(np.float64) + Z.astype(np.float64)
            unspecified |= (r64 < -_TWO31) | (r64 >= _TWO31)
    else:
        zadd = None
    if zadd is None and A.conversion != "storage":
        # no zero point to add and no storage-range flag: clip(clip(r, W), lo, hi) = clip(r, lo, hi) ([lo, hi]
        # lies in W), straight to the codes' dtype, which holds [lo, hi]
        if not r.flags.writeable or r is q:
            r = r.copy()
        if any_nan:
            np.copyto(r, 0, where=nan)
        np.clip(r, lo, hi, out=r)
        n = r.astype(s.codes_dtype)
        zero = n.dtype.type(np.clip(0, lo, hi))
        if any_nan:
            if A.nan == "zero":
                np.copyto(n, zero, where=nan)
            else:
                unspecified |= nan
        if unspecified.any():
            np.copyto(n, zero, where=unspecified)  # the placeholder code
        return n
    zmin, zmax = (int(Z.min()), int(Z.max())) if zadd is not None and Z.size else (0, 0)
    w_lo, w_hi = full_lo - zmax - 1, full_hi - zmin + 1
    # the narrowest integer dtype that holds every W value plus any zero point
    bound = max(-w_lo, w_hi) + max(-zmin, zmax, 0)
    idt = np.dtype(np.int16) if bound < 2**15 else np.dtype(np.int32)
    if not r.flags.writeable or r is q:
        r = r.copy()
    if any_nan:
        np.copyto(r, 0, where=nan)
    np.clip(r, w_lo, w_hi, out=r)
    n = r.astype(idt)
    if zadd is not None:
        n += zadd.astype(idt)
    if A.conversion == "storage":
        unspecified |= (n < full_lo) | (n > full_hi)
    np.clip(n, lo, hi, out=n)
    if not any_nan:
        pass
    elif A.nan == "zero":
        np.copyto(n, idt.type(np.clip(0, lo, hi)), where=nan)
    else:
        unspecified |= nan
    if unspecified.any():
        np.copyto(n, idt.type(np.clip(0, lo, hi)), where=unspecified)  # the placeholder code
    return n.astype(s.codes_dtype, copy=False)
