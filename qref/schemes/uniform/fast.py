"""Uniform quantize and dequantize, the fast paths (spec: docs/spec/uniform.md §2.5, informative).

``integer_tail_fast(scheme, q, Z, unspecified)`` returns what ``reference.integer_tail`` (the definition:
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

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.arith import flush
from ...core.parallel import scratch
from ...formats import IntFormat
from ...profiles.uniform import ROUNDINGS as _ROUND_MODES
from .reference import reciprocal, scale_in, wrapped_zero_points
from .validation import UniformRecord

__all__ = ["BUFSIZE", "KCHUNK", "dequantize_float", "half_away_biased", "integer_tail_applies", "integer_tail_fast",
           "quantize_float32", "round_integral", "round_to_int_fast"]

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


def _round_in_place(qf: np.ndarray, mode: str) -> None:
    """qf rounded to integers under ``mode`` in place (``round_integral``, with numpy's own kernel where one
    exists)."""
    kernel = {"nearest_even": np.rint, "toward_zero": np.trunc, "down": np.floor, "up": np.ceil}.get(mode)
    if kernel is not None:
        kernel(qf, out=qf)
    else:
        qf[...] = round_integral(qf, mode)


def round_to_int_fast(q: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, nan) equal to ``reference.round_to_int(q, mode)``: int64, +-Inf and |q| >= 2^62 give +-2^62."""
    a = np.asarray(q)
    if a.dtype != np.float64 and a.dtype != np.float32:
        a = a.astype(np.float32) if a.dtype.itemsize <= 4 else a.astype(np.float64)
    nan = np.isnan(a)
    r = np.clip(np.where(nan, 0, round_integral(a, mode)), -_TWO62, _TWO62)
    return r.astype(np.int64), nan


def integer_tail_applies(s: UniformRecord, q: np.ndarray) -> bool:
    """The fast integer steps cover integer storage of <= 16 bits with float32 / float64 values."""
    return (isinstance(s.storage, IntFormat) and s.storage.bits <= 16
            and q.dtype in (np.dtype(np.float32), np.dtype(np.float64)))


def integer_tail_fast(s: UniformRecord, q: np.ndarray, Z: np.ndarray, unspecified: np.ndarray) -> np.ndarray:
    """Codes equal to ``reference.integer_tail(s, q, Z, unspecified)``; ``unspecified`` is updated in place alike."""
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


# ---------------------------------------------------------------------------------------------------------
# float32 quantize in one kernel (uniform.md §2.5): float32 input, float32 compute, integer storage <= 16 bits
# ---------------------------------------------------------------------------------------------------------
try:  # the clip ufunc itself: np.clip adds about 2 us of argument checks per call (numpy >= 2: _core)
    from numpy._core.umath import clip as _uclip
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.umath import clip as _uclip

#: elements per piece of ``quantize_float32``: its buffer (and the input and output slices) stay in L2
KCHUNK = 1 << 16
#: numpy's ufunc buffer (elements) inside the kernel, whose operands are all float32: with the default (8192),
#: a row of at most 4096 elements with a broadcast scale is copied through the buffer (numpy 2.x), 2-4x slower
BUFSIZE = 256
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_NEAREST = ("nearest_even", "nearest_away", "nearest_toward_zero")
_SIGN = np.uint32(0x80000000)
_HALF_PRED = np.uint32(0x3EFFFFFF)  # float32 0.5 - 2^-25, the predecessor of 1/2
_FTZ_SAFE = 2.0**124  # a float32 subnormal x times at most this (or over a scale >= 2^-124) stays below 1/4


@contextlib.contextmanager
def _kernel_state() -> Iterator[None]:
    """Floating-point exceptions ignored (Inf / NaN are values here) and numpy's ufunc buffer at BUFSIZE,
    both restored on exit (numpy 2 restores the buffer size with the error state, numpy 1 does not)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        old = np.setbufsize(BUFSIZE)
        try:
            yield
        finally:
            np.setbufsize(old)


def _pieces(shape: tuple[int, ...], sshape: tuple[int, ...], chunk: int
            ) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """(index into x, index into the scales) of pieces of at most ``chunk`` elements where possible: whole
    trailing axes, a slice of the next one, each leading index alone. Scales (rank 0 or x's rank) are indexed
    alike where they vary along an axis, so that each piece's scales broadcast against it as the whole's do."""
    nd = len(shape)
    inner, k = 1, nd
    while k > 0 and inner * shape[k - 1] <= chunk:
        inner *= shape[k - 1]
        k -= 1
    if k == 0:
        yield (), ()
        return
    a = k - 1
    step = max(1, chunk // inner)
    sfull = sshape if len(sshape) == nd else (1,) * nd
    per = len(sshape) == nd
    for lead in np.ndindex(*shape[:a]):
        slead = tuple(i if sfull[j] > 1 else 0 for j, i in enumerate(lead)) if per else ()
        for r0 in range(0, shape[a], step):
            sl = slice(r0, r0 + step)
            yield (*lead, sl), ((*slead, sl if sfull[a] > 1 else slice(None)) if per else ())


_PY_ROUND = {"nearest_even": round, "toward_zero": math.trunc, "down": math.floor, "up": math.ceil}


def half_away_biased(q: np.ndarray, scratch: np.ndarray) -> None:
    """q += copysign(1/2 - 2^-25, q) in place (float32; ``scratch``: uint32 of q's size), so that trunc(q) is
    q rounded to nearest, ties away from zero, for every finite float32 q (uniform.md §2.5). With f the
    fraction of |q| = k + f and u = ulp(q): f < 1/2 gives f <= 1/2 - u (u >= 2^-23 for |q| >= 1; for |q| < 1/2
    the sum is at most 1 - 2^-24) and a sum below k + 1 - u, which rounds below k + 1; f >= 1/2 gives a sum of
    at least k + 1 - 2^-25, which rounds to k + 1 or above (u > 2^-24, or u = 2^-24 and the tie at q = 1/2
    goes to the even 1) and stays below k + 2; |q| >= 2^23: an integer, and 1/2 - 2^-25 < u / 2 leaves it."""
    np.bitwise_and(q.view(np.uint32), _SIGN, out=scratch)
    np.bitwise_or(scratch, _HALF_PRED, out=scratch)
    np.add(q, scratch.view(_F32), out=q)


def _round_scalar(v: float, mode: str) -> float:
    """round_integral of one finite float32 value (a Python float, exact): Python's round is half-even."""
    f = _PY_ROUND.get(mode)
    return float(f(v)) if f is not None else float(round_integral(np.array([v], dtype=_F32), mode)[0])


def quantize_float32(s: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray,
                     out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, unspecified) equal to ``reference.quantize_arrays(s, arr, S, Z, None)`` for float32 arr and float32
    compute, integer storage of at most 16 bits and a deterministic rounding mode; None where it does not apply
    (the caller takes the general path). out: C-contiguous (codes, unspecified) of arr's shape to write into,
    the mask all False (np.zeros: pages that are never touched where every piece is clean). Pieces of KCHUNK
    elements; each piece runs the float steps in one
    float32 buffer (scale, zero point before rounding, float clamp: the definition's operations), then takes
    max / min of the result: a piece without NaN whose rounded extremes raise no range flag (so its
    unspecified mask is all False) is clamped, rounded and narrowed in place; any other piece takes
    ``integer_tail_fast`` (the proven general steps). Why each shortcut is exact:

    FTZ of x skipped     nearest rounding only, every scale >= 2^-124 (divide) or every |1/s| <= 2^124
                         (multiply): a subnormal x gives |q| <= 1/4 - 2^-25 instead of 0, then q + z (|z| <=
                         2^16, ulp(z) <= 2^-7) lies within 1/4 of z and rounds to z as 0 + z does; clamps keep
                         that; so every rounded r, and all that follows from r, is the same
    clamp before round   round is monotone and fixes integers: round(clip(q, a, b)) = clip(round(q), a, b) for
                         integer a <= b; with a zero point added after rounding, clip(r, lo - z, hi - z) + z =
                         clip(r + z, lo, hi) (one z), or W = [lo - max z - 1, hi - min z + 1] keeps r + z's
                         saturated value (several; then a second clamp): and every value is now |v| <= 2^17, so
                         r + z is exact in float32 (after_rounding and after_rounding_float agree)
    range flags          monotone rounding: every r lies in [round(min q), round(max q)]; the piece is clean
                         when those (plus the extreme zero points) raise no int32 / storage-range flag
    nearest_away         trunc(fl(q + copysign(1/2 - 2^-25, q))) for finite q (uniform.md §2.5: below a tie the
                         sum stays below the next integer, at or above it reaches it); the sign by bit masks
    trunc                numpy's float -> integer cast truncates; values are integers in [lo, hi] or, for
                         toward_zero / nearest_away with no zero point after rounding, in (lo - 1, hi + 1)
    """
    A = s.arithmetic
    if (arr.dtype != _F32 or arr.ndim == 0 or arr.size == 0 or not isinstance(s.storage, IntFormat)
            or s.storage.bits > 16 or A.rounding not in _ROUND_MODES):
        return None
    if A.range_form != "none":
        return _range_float32(s, arr, S, Z, out)
    Zb = np.asarray(wrapped_zero_points(s, Z), dtype=np.int64)
    if A.zero_point == "fused" and Zb.any():
        return None  # the fused multiply-add: the general path
    if Zb.size and int(np.abs(Zb).max()) > 1 << 16:
        return None
    lo, hi = s.storage_bounds
    full_lo, full_hi = s.storage.full_range
    sc = scale_in(s, S, _F32)
    flush_x = False
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if A.flush_subnormals:
            sc = flush(sc)
        if A.scale_op == "divide":
            mul, op = sc, np.divide
            ok = bool(np.all(sc >= _F32.type(2.0**-124)))
        else:
            mul = reciprocal(s, flush(np.asarray(np.ones((), _F32) / sc).astype(_F32)) if A.flush_subnormals
                                else np.asarray(np.ones((), _F32) / sc).astype(_F32))
            op = np.multiply
            ok = bool(np.all(np.abs(mul) <= _F32.type(_FTZ_SAFE)))
        flush_x = A.flush_subnormals and not (ok and A.rounding in _NEAREST)
    zc = Zb.astype(_F32)
    z_before = A.zero_point == "before_rounding" and bool(Zb.any())
    z_after = A.zero_point in ("after_rounding", "after_rounding_float") and bool(Zb.any())
    zmin, zmax = (int(Zb.min()), int(Zb.max())) if z_after else (0, 0)
    one_z = zmin == zmax
    if not z_after:
        c_lo, c_hi = lo, hi
    elif one_z:
        c_lo, c_hi = lo - zmin, hi - zmin
    else:
        c_lo, c_hi = full_lo - zmax - 1, full_hi - zmin + 1
    clamp_lo, clamp_hi = _F32.type(c_lo), _F32.type(c_hi)
    f_lo, f_hi = _F32.type(lo), _F32.type(hi)
    skip_clamp = A.clamp == "float" and not z_after  # q is in [lo, hi] (or NaN) already
    mode = A.rounding
    cast_truncates = mode in ("toward_zero", "nearest_away") and not z_after
    shape = arr.shape
    x = arr
    if np.ndim(mul) == 0 and np.ndim(Zb) == 0 and arr.flags.c_contiguous:
        x = arr.reshape(-1)  # one scale: the flat elements
    if out is not None:
        codes, unspecified = out[0].reshape(x.shape), out[1].reshape(x.shape)  # views (C-contiguous)
    else:
        codes = np.empty(x.shape, dtype=s.codes_dtype)
        unspecified = np.zeros(x.shape, dtype=bool)
    sshape = np.shape(mul) if np.ndim(mul) == x.ndim else ()
    mul = np.asarray(mul)
    zc = np.broadcast_to(zc, sshape) if sshape else zc.reshape(())
    Zb = np.broadcast_to(Zb, sshape) if sshape else Zb.reshape(())
    pieces = list(_pieces(x.shape, sshape, KCHUNK))
    size = max(math.prod(x[ix].shape) for ix, _ in pieces[:2])
    buf = scratch("uniform.buf", size, _F32)  # kept for the thread across calls (parallel.scratch)
    bits = scratch("uniform.bits", size, np.uint32) if mode == "nearest_away" else None
    # a range flag needs a value outside the storage range (or int32): none after the float clamp to [lo, hi]
    check_range = A.conversion != "saturate" and not skip_clamp
    with _kernel_state():
        for ix, six in pieces:
            xp = x[ix]
            if flush_x:
                xp = flush(xp)
            n = xp.size
            qf = buf[:n]
            q = qf.reshape(xp.shape)
            op(xp, mul[six], out=q)
            if z_before:
                np.add(q, zc[six], out=q)
            if A.clamp == "float":
                _uclip(q, f_lo, f_hi, out=q)
            mx = float(np.maximum.reduce(qf))
            clean = mx == mx  # no NaN (max propagates it)
            if clean and check_range:
                mn = float(np.minimum.reduce(qf))
                if A.conversion == "int32":
                    clean = mn > -(2.0**30) and mx < 2.0**30
                else:
                    clean = (math.isfinite(mn) and math.isfinite(mx) and _round_scalar(mn, mode) + zmin >= full_lo
                             and _round_scalar(mx, mode) + zmax <= full_hi)
            if not clean:
                codes[ix] = integer_tail_fast(s, q, Zb[six], unspecified[ix])
                continue
            if not skip_clamp:
                _uclip(qf, clamp_lo, clamp_hi, out=qf)
            if mode == "nearest_away":
                assert bits is not None
                half_away_biased(qf, bits[:n])
                if not cast_truncates:
                    np.trunc(qf, out=qf)
            elif mode != "toward_zero" or not cast_truncates:  # the cast truncates: toward_zero is done
                _round_in_place(qf, mode)
            if z_after:
                np.add(q, zc[six], out=q)
                if not one_z:
                    _uclip(qf, f_lo, f_hi, out=qf)
            np.copyto(codes[ix], q, casting="unsafe")
    return codes.reshape(shape), unspecified.reshape(shape)


def _range_float32(s: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray,
                   out: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, unspecified) equal to ``reference.range_steps`` then ``integer_tail`` (a FakeQuantize, uniform.md
    §2.8) for float32 arr, in pieces of KCHUNK elements: the same float32 operations in the same order
    (il, ih, width = fl32(ih - il), isc = fl32(n / width) and fl32(il * isc) computed once per scale as the
    definition does; per element scale_shift t = fl32(fl32(min(max(x, il), ih) * isc) - fl32(il * isc)),
    normalize t = fl32(fl32(fl32(x - il) / width) * n), then 0 where x <= il, n where x > ih), then
    q = fl32(fl32(fl32(clip(round(t), -2^62, 2^62) / n) * n) + lo): round_integral is the definition's
    round_to_int (+-Inf and |t| >= 2^62 give +-2^62, exact in float32), and NaN stays NaN through every step as
    the definition puts it back. A piece whose q has no NaN and lies in [lo, hi] gives codes = q (q is an
    integer there and the tail with zero point 0 changes nothing and flags nothing); any other piece takes
    ``integer_tail_fast`` with zero point 0, as the definition's tail."""
    A = s.arithmetic
    lo, hi = s.storage_bounds
    f32 = np.float32
    s32 = scale_in(s, S, _F32).astype(np.float64)  # the float32 scale, exact in float64
    z = np.asarray(wrapped_zero_points(s, Z), dtype=np.int64).astype(np.float64)
    shift = A.range_form == "scale_shift"
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        il = np.asarray((lo - z) * s32).astype(f32)  # (lo - z) * s exact in float64: one rounding
        ih = np.asarray((hi - z) * s32).astype(f32)
        n = f32(hi - lo)
        width = np.asarray(ih - il, dtype=f32)
        if shift:
            isc = np.asarray(n / width, dtype=f32)
            a, b = isc, np.asarray(il * isc, dtype=f32)
        else:
            a, b = width, width
    pshape = np.broadcast_shapes(il.shape, ih.shape, a.shape, b.shape)
    if len(pshape) > arr.ndim:
        return None  # parameters that widen x: the general path
    params = [np.broadcast_to(v, pshape) for v in (il, ih, a, b)]
    shape = arr.shape
    x = arr
    if all(d == 1 for d in pshape) and arr.flags.c_contiguous:
        x = arr.reshape(-1)  # one range: the flat elements
        params = [v.reshape(()) for v in params]
    else:
        full = (1,) * (arr.ndim - len(pshape)) + pshape
        params = [v.reshape(full) for v in params]
    il, ih, a, b = params
    if out is not None:
        codes, unspecified = out[0].reshape(x.shape), out[1].reshape(x.shape)
    else:
        codes = np.empty(x.shape, dtype=s.codes_dtype)
        unspecified = np.zeros(x.shape, dtype=bool)
    sshape = il.shape if il.ndim == x.ndim else ()
    pieces = list(_pieces(x.shape, sshape, KCHUNK))
    size = max(math.prod(x[ix].shape) for ix, _ in pieces[:2])
    buf = scratch("uniform.buf", size, _F32)  # kept for the thread across calls (parallel.scratch)
    mask = scratch("uniform.mask", size, bool)
    z0 = np.zeros((), dtype=np.int64)
    mode = A.rounding
    f_lo, big = f32(lo), f32(2.0**62)
    with _kernel_state():
        for ix, six in pieces:
            xp = x[ix]
            nel = xp.size
            qf = buf[:nel]
            t = qf.reshape(xp.shape)
            if shift:
                np.maximum(xp, il[six], out=t)  # Maximum then Minimum: NaN stays NaN
                np.minimum(t, ih[six], out=t)
                np.multiply(t, a[six], out=t)
                np.subtract(t, b[six], out=t)
            else:
                m = mask[:nel].reshape(xp.shape)
                np.subtract(xp, il[six], out=t)
                np.divide(t, a[six], out=t)
                np.multiply(t, n, out=t)
                np.greater(xp, ih[six], out=m)  # x <= il wins over x > ih (the definition's nesting)
                np.copyto(t, n, where=m)
                np.less_equal(xp, il[six], out=m)
                np.copyto(t, f32(0), where=m)
            _round_in_place(qf, mode)
            _uclip(qf, -big, big, out=qf)  # round_to_int's +-2^62 (NaN stays)
            np.divide(qf, n, out=qf)
            np.multiply(qf, n, out=qf)
            np.add(qf, f_lo, out=qf)
            mx = float(np.maximum.reduce(qf))
            if mx == mx and mx <= hi and float(np.minimum.reduce(qf)) >= lo:
                np.copyto(codes[ix], t, casting="unsafe")  # integers in [lo, hi]
            else:
                codes[ix] = integer_tail_fast(s, t, z0, unspecified[ix])
    return codes.reshape(shape), unspecified.reshape(shape)


def dequantize_float(s: UniformRecord, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, out_dt: np.dtype,
                     md: np.dtype, sm: np.ndarray, expressed_dt: np.dtype, check_only: bool = False,
                     out: np.ndarray | None = None) -> np.ndarray | None:
    """The values of ``reference.dequantize_arrays(s, codes, S, Z, ...)`` (uniform.md §2.2) where its
    unspecified mask gains nothing, computed in pieces of KCHUNK elements; None where it does not apply.
    ``md`` is the multiply's dtype, ``sm`` the scales in it and ``expressed_dt`` the expressed type's dtype.
    Applies to integer codes of at most 16 bits with zero points |z| <= 2^16, the subtract form, a float32 /
    float64 multiply and output, finite scales, and a subtraction in float32 / float64 or in integers that cannot
    leave the storage range. Exact: code - z is an integer below 2^17 in magnitude, exact in every such dtype
    (and int32 does not wrap), so the value is fl_md(d * s) rounded once to the output dtype, as the definition
    computes it; FTZ (float32 multiply): the scale is flushed, and |d| * s >= 2^-126 for d != 0 and a normal s,
    so the product's flush changes nothing."""
    A = s.arithmetic
    if (not isinstance(s.storage, IntFormat) or codes.dtype.kind not in "iu" or codes.dtype.itemsize > 2
            or codes.ndim == 0 or codes.size == 0 or A.dq_form != "subtract"
            or md not in (_F32, _F64) or out_dt not in (_F32, _F64)):
        return None
    Zw = np.asarray(wrapped_zero_points(s, Z), dtype=np.int64)
    if Zw.size and int(np.abs(Zw).max()) > 1 << 16:
        return None
    sub = A.dq_subtract
    if sub == "storage":
        info = np.iinfo(codes.dtype)
        full_lo, full_hi = s.storage.full_range
        zlo, zhi = int(Zw.min()), int(Zw.max())
        # by the dtype's range, else by the codes' (some code - z may leave the storage range: the general path
        # flags it)
        if ((int(info.min) - zhi < full_lo or int(info.max) - zlo > full_hi)
                and (int(codes.min()) - zhi < full_lo or int(codes.max()) - zlo > full_hi)):
            return None
    elif sub not in ("int64", "int32") and (expressed_dt if sub == "expressed" else np.dtype(sub)) not in (_F32, _F64):
        return None
    sm = np.asarray(sm, dtype=md)
    if A.flush_subnormals and md == _F32:
        sm = flush(sm)
    if not np.isfinite(sm).all():
        return None
    if check_only:  # it applies: an empty array (the caller computes in chunks)
        return codes[:0]
    zf = Zw.astype(md)
    z_any = bool(Zw.any())
    values = np.empty(codes.shape, dtype=out_dt) if out is None else out  # out: contiguous, codes' shape
    c, v = codes, values
    if sm.ndim == 0 and zf.ndim == 0 and codes.flags.c_contiguous:
        c, v = codes.reshape(-1), values.reshape(-1)
    sshape = sm.shape if sm.ndim == c.ndim else ()
    sm = sm if sshape else sm.reshape(())
    zf = np.broadcast_to(zf, sshape) if sshape else zf.reshape(())
    pieces = list(_pieces(c.shape, sshape, KCHUNK))
    direct = md == out_dt
    buf = None if direct else scratch("uniform.dequantize_buf", max(math.prod(c[ix].shape) for ix, _ in pieces[:2]), md)
    with _kernel_state():
        for ix, six in pieces:
            cp = c[ix]
            d = v[ix] if buf is None else buf[:cp.size].reshape(cp.shape)
            np.copyto(d, cp, casting="unsafe")  # the codes as md values: exact
            if z_any:
                np.subtract(d, zf[six], out=d)  # code - z: exact
            np.multiply(d, sm[six], out=d)  # the one rounding of the product
            if buf is not None:
                np.copyto(v[ix], d, casting="same_kind")  # RNE to the output dtype (exact widening)
    return values

