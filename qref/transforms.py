"""Hadamard and random-sign Hadamard transforms with a declared arithmetic (spec: docs/spec/transforms.md).

Along ``axis``, each contiguous group x of n = 2^m elements becomes (§1)

    y = c · H_n · D · x,     D = diag(signs),  c = 1/sqrt(n) (normalize=True) or 1,

and the inverse is x = c' · D · H_n · y with c' = 1/sqrt(n) (normalize=True) or 1/n, because H_n H_n = n I
and D D = I (§3). H_n is Sylvester's matrix in natural order, H_n[i, j] = (-1)^popcount(i & j) (§2).

``arithmetic`` (§4): "exact" rounds the exact real result once to the output dtype (nearest even, overflow to
+-Inf), also for odd m where c = sqrt(2) / 2^((m+1)/2) is irrational; "fma_sequential_float32" and
"dot_pairs_bfloat16" are the operation orders of two matrix-multiply kernels (§4.2, §4.3), the ones that
TransformerEngine's NVFP4 reference RHT (``x @ (diag(s) H / 4)`` with torch on CPU) ran on in the peer vectors.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .core.arith import fma_float32
from .core.encode import encode_exact
from .core.exact import FINITE, INF, NAN, U64, ZERO, Exact, decompose
from .errors import QrefError
from .formats import FloatFormat, get_format
from .formats.policy import CastPolicy
from .validators import check_alloc, check_dtype

__all__ = ["ARITHMETICS", "hadamard", "hadamard_matrix", "inverse_hadamard", "random_signs"]

ARITHMETICS = ("exact", "fma_sequential_float32", "dot_pairs_bfloat16")

_OUTPUT_DTYPES = {np.dtype(np.float64): np.uint64, np.dtype(np.float32): np.uint32,
                  np.dtype(np.float16): np.uint16, np.dtype(ml_dtypes.bfloat16): np.uint16}
_ROUND = CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign")
_bit_length = np.frompyfunc(int.bit_length, 1, 1)
_isqrt = np.frompyfunc(math.isqrt, 1, 1)


def _log2_size(n: object) -> int:
    """m with n = 2^m (C1)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 or int(n) & (int(n) - 1):
        raise QrefError(f"the Hadamard size n must be a power of two (1, 2, 4, ...), got {n!r}")
    return int(n).bit_length() - 1


def hadamard_matrix(n: int, dtype: object = np.int64) -> np.ndarray:
    """Sylvester's Hadamard matrix of size n (§2): H[i, j] = (-1)^popcount(i & j), i.e. H_1 = [1] and
    H_2k = [[H_k, H_k], [H_k, -H_k]]; symmetric, H H = n I. The order of ``scipy.linalg.hadamard``."""
    m = _log2_size(n)
    dt = check_dtype(dtype, "hadamard_matrix: dtype")
    check_alloc(3 * n * n, 8, f"hadamard_matrix({n})")
    ij = np.arange(n, dtype=np.int64)[:, None] & np.arange(n, dtype=np.int64)[None, :]
    parity = np.zeros((n, n), dtype=np.int64)
    for b in range(m):  # popcount parity, one bit plane at a time
        parity ^= (ij >> b) & 1
    return (1 - 2 * parity).astype(dt)


def random_signs(n: int, seed: int) -> np.ndarray:
    """The diagonal of D from a seed (§3.1): s_i = 1 - 2 b_i, b_i the top bit of the i-th word of
    ``np.random.PCG64(seed).random_raw(n)`` (a stream numpy keeps stable across versions); int8 +-1."""
    _log2_size(n)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise QrefError(f"seed must be a non-negative integer (the PCG64 seed of the signs), got {seed!r}")
    check_alloc(n, 8, f"random_signs({n})")
    top = np.asarray(np.random.PCG64(int(seed)).random_raw(n), dtype=U64) >> U64(63)
    return (1 - 2 * top.astype(np.int8)).astype(np.int8)


def _signs(signs: object, seed: object, n: int) -> np.ndarray:
    if signs is not None and seed is not None:
        raise QrefError("give either signs= (the +-1 diagonal of D) or seed= (signs drawn by random_signs), not both")
    if seed is not None:
        return random_signs(n, seed).astype(np.int64)  # type: ignore[arg-type]
    if signs is None:
        return np.ones(n, dtype=np.int64)
    s = np.asarray(signs)
    if s.shape != (n,):
        raise QrefError(f"signs must be a vector of length n = {n}, got shape {s.shape}")
    if s.dtype.kind not in "iuf" or not np.isin(s, (-1, 1)).all():
        raise QrefError("signs must hold only +1 and -1 (the diagonal of D)")
    return s.astype(np.int64)


def _check_float(x: object, name: str) -> np.ndarray:
    if isinstance(x, np.ma.MaskedArray):
        raise QrefError(f"{name} is a masked array (the mask would be lost): pass {name}.filled(v)")
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and not arr.dtype.isnative:  # '>f4' on a little-endian machine: same values
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype not in _OUTPUT_DTYPES:
        raise QrefError(f"{name} must be a float64, float32, float16 or bfloat16 array, got dtype {arr.dtype} "
                        "(convert integers or other formats first, e.g. x.astype(np.float32))")
    return arr


def hadamard(x: object, n: int, *, axis: int = -1, signs: object = None, seed: object = None,
             normalize: bool = True, inverse: bool = False, arithmetic: str = "exact", dtype: object = None
             ) -> np.ndarray:
    """The (random-sign) Hadamard transform of each contiguous group of n elements along ``axis`` (§1).

    forward: y = c H D x;  inverse=True: x = c' D H y  (c = 1/sqrt(n) or 1, c' = 1/sqrt(n) or 1/n by
    ``normalize``). ``signs``: the +-1 diagonal of D (default all +1), or ``seed`` for ``random_signs(n, seed)``.
    ``dtype``: the output dtype (default: the input's). ``arithmetic``: one of ARITHMETICS (§4).
    """
    m = _log2_size(n)
    arr = _check_float(x, "x")
    if arr.ndim == 0:
        raise QrefError("x must have at least one dimension (the transformed axis)")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise QrefError(f"axis {axis!r} is out of range for an array of {arr.ndim} dimensions")
    if arr.shape[axis] % n:
        raise QrefError(f"the length {arr.shape[axis]} of axis {axis} is not a multiple of n = {n}; pad it first")
    out_dt = np.dtype(arr.dtype if dtype is None else dtype)
    if out_dt not in _OUTPUT_DTYPES:
        raise QrefError(f"dtype must be float64, float32, float16 or bfloat16, got {out_dt}")
    if arithmetic not in ARITHMETICS:
        raise QrefError(f"unknown arithmetic {arithmetic!r}; known: {', '.join(ARITHMETICS)}")
    s = _signs(signs, seed, n)
    moved = np.moveaxis(arr, axis, -1)
    rows = moved.reshape(-1, n)
    if arithmetic == "exact":
        out = _exact(rows, m, s, normalize, inverse, out_dt)
    else:
        out = _kernel(rows, m, s, normalize, inverse, arithmetic, out_dt)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def inverse_hadamard(y: object, n: int, **options: object) -> np.ndarray:
    """``hadamard(y, n, inverse=True, **options)``: x = c' D H y (§1, round trip §5)."""
    return hadamard(y, n, inverse=True, **options)  # type: ignore[arg-type]


def _butterfly(v: np.ndarray, m: int) -> np.ndarray:
    """H_n v along the last axis by m stages of (a + b, a - b) pairs (Sylvester order, exact for integers)."""
    r, n = v.shape
    for k in range(m):
        h = 1 << k
        w = v.reshape(r, n // (2 * h), 2, h)
        a, b = w[:, :, 0, :], w[:, :, 1, :]
        v = np.stack([a + b, a - b], axis=2).reshape(r, n)
    return v


def _exact(rows: np.ndarray, m: int, s: np.ndarray, normalize: bool, inverse: bool, out_dt: np.dtype
           ) -> np.ndarray:
    """§4.1: the exact sums S_j = sum_i M_ji N_i of integers N_i = +-sig_i 2^(exp_i - e0) (Python integers in
    object arrays), the scale 2^f or sqrt(2) 2^f applied exactly, one rounding by the core encoder."""
    r, n = rows.shape
    ex = decompose(rows.reshape(-1))
    cls = ex.cls.reshape(r, n)
    neg = ex.neg.reshape(r, n)
    fin = cls == FINITE
    exp = ex.exp.reshape(r, n)
    e0 = np.where(fin, exp, np.iinfo(np.int64).max).min(axis=1, keepdims=True)
    e0 = np.where(fin.any(axis=1, keepdims=True), e0, 0)
    shift = np.where(fin, exp - e0, 0)
    mag = ex.sig.reshape(r, n).astype(object) << shift.astype(object)
    vals = np.where(neg, -mag, mag)

    def apply_m(v: np.ndarray) -> np.ndarray:
        """M v along the last axis, M = H D (forward) or D H (inverse), in v's integer arithmetic."""
        sv = s[None, :].astype(v.dtype)
        return _butterfly(v, m) * sv if inverse else _butterfly(v * sv, m)

    acc = apply_m(vals)
    # scale: forward / normalized inverse 2^(-m/2); unnormalized forward 1; unnormalized inverse 2^-m
    if normalize:
        f, irr = -((m + 1) // 2), m % 2 == 1  # 2^(-m/2) = sqrt(2) 2^(-(m+1)/2) for odd m
    else:
        f, irr = (-m if inverse else 0), False
    a = np.abs(acc)
    nz = a != 0
    bl = _bit_length(a).astype(np.int64)
    if irr:  # |y| = sqrt(2 a^2) 2^(e0+f): q = isqrt(floor(2 a^2 / 4^t)) has 63 bits; sticky 1 (irrational)
        big = 2 * a * a
        lb = _bit_length(big).astype(np.int64)
        t = (lb - 125) // 2
        tt = (2 * np.abs(t)).astype(object)
        z = np.where(t >= 0, big >> tt, big << tt)
        q = _isqrt(z)
        sig = np.where(nz, q | 1, 0)
        e_out = e0 + f + t
    else:  # |y| = a 2^(e0+f): the top 63 bits of a, or-ed with a sticky bit for the rest
        sh = np.maximum(bl - 63, 0)
        sho = sh.astype(object)
        top = a >> sho
        sig = top | ((a - (top << sho)) != 0).astype(object)
        e_out = e0 + f + sh
    out_cls = np.where(nz, FINITE, ZERO).astype(np.int8)
    out_neg = acc < 0

    def count(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """#{i: M_ji > 0 and p_i} + #{i: M_ji < 0 and q_i} = (sum p + sum q + (M (p - q))_j) / 2."""
        pi, qi = p.astype(np.int64), q.astype(np.int64)
        return ((pi + qi).sum(axis=1, keepdims=True) + apply_m(pi - qi)) // 2

    # zeros: -0 only when every term M_ji x_i is -0 (IEEE 754 §6.3 for a sum of zeros), else +0
    zero = cls == ZERO
    out_neg = np.where(nz, out_neg, count(zero & neg, zero & ~neg) == n)
    # non-finite: NaN in the group, or Inf terms of both signs -> NaN; Inf terms of one sign -> that Inf
    inf = cls == INF
    up = count(inf & ~neg, inf & neg) > 0
    down = count(inf & neg, inf & ~neg) > 0
    nan = (cls == NAN).any(axis=1, keepdims=True) | (up & down)
    out_cls = np.where(up | down, INF, out_cls)
    out_neg = np.where(up | down, down, out_neg)
    out_cls = np.where(nan, NAN, out_cls).astype(np.int8)
    out_neg = np.where(nan, False, out_neg)
    finite_out = out_cls == FINITE
    res = Exact(out_cls.reshape(-1), out_neg.reshape(-1).astype(bool),
                np.where(finite_out, sig, 0).reshape(-1).astype(U64),
                np.where(finite_out, e_out, 0).reshape(-1).astype(np.int64), np.zeros(r * n, dtype=bool))
    return _round_exact(res, out_dt).reshape(r, n)


def _round_exact(ex: Exact, out_dt: np.dtype) -> np.ndarray:
    fmt = get_format(out_dt.name)
    assert isinstance(fmt, FloatFormat)
    codes = encode_exact(ex, fmt, _ROUND.resolve(fmt))
    return codes.astype(_OUTPUT_DTYPES[out_dt]).view(out_dt)


def _to_dtype(v: np.ndarray, out_dt: np.dtype) -> np.ndarray:
    """One nearest-even rounding of float values to out_dt (exact triples, no double rounding)."""
    if v.dtype == out_dt:
        return v
    return _round_exact(decompose(v.reshape(-1)), out_dt).reshape(v.shape)


def _ftz32(v: np.ndarray) -> np.ndarray:
    """float32 subnormals -> zero of the same sign."""
    return np.where(np.abs(v) < np.float32(2.0**-126), np.copysign(np.float32(0), v), v).astype(np.float32)


def _coefficient(m: int, normalize: bool, inverse: bool, dt: np.dtype) -> np.floating:
    """RN_dt(c) with one rounding: c = 2^(-m/2) (normalize), 2^-m (unnormalized inverse) or 1; for odd m,
    RN(1/sqrt(2)) from the exact path (hadamard of (1, 0)) times 2^-((m-1)/2), exact in the normal range."""
    if not normalize:
        return dt.type(2.0**-m if inverse else 1.0)
    if m % 2 == 0:
        return dt.type(2.0 ** (-m // 2))
    half = _exact(np.array([[1.0, 0.0]]), 1, np.ones(2, dtype=np.int64), True, False, dt)[0, 0]
    return dt.type(half * dt.type(2.0 ** (-(m - 1) // 2)))


def _kernel(rows: np.ndarray, m: int, s: np.ndarray, normalize: bool, inverse: bool, arithmetic: str,
            out_dt: np.dtype) -> np.ndarray:
    """§4.2 / §4.3: y_j = sum over i of x_i C[i, j] with C = (H D)^T c (forward) or (D H)^T c' (inverse)
    rounded to the kernel's element type, summed in the kernel's order."""
    n = 1 << m
    mat = hadamard_matrix(n) * (s[:, None] if inverse else s[None, :])  # rows j: y_j = sum_i mat[j, i] x_i
    r = rows.shape[0]
    if arithmetic == "fma_sequential_float32":
        if rows.dtype != np.float32:
            raise QrefError(f"arithmetic='fma_sequential_float32' models a float32 matmul; x is {rows.dtype}")
        c = _coefficient(m, normalize, inverse, np.dtype(np.float32))
        coef = (mat.T * c).astype(np.float32)  # coef[i, j] = M_ji RN32(c): exact sign flips
        acc = np.zeros((r, n), np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(n):  # ascending i, one fused multiply-add each (MKL sgemm, §4.2)
                acc = fma_float32(np.broadcast_to(rows[:, i:i + 1], (r, n)), np.broadcast_to(coef[i], (r, n)), acc)
            acc = (acc + np.float32(0)).astype(np.float32)  # the kernel's store: a zero sum is +0
        return _to_dtype(acc, out_dt)
    if rows.dtype != ml_dtypes.bfloat16:
        raise QrefError(f"arithmetic='dot_pairs_bfloat16' models a bfloat16 matmul; x is {rows.dtype}")
    if n < 2:
        raise QrefError("arithmetic='dot_pairs_bfloat16' sums pairs of elements: n must be at least 2")
    cb = _coefficient(m, normalize, inverse, np.dtype(ml_dtypes.bfloat16))
    coef = (mat.T * np.float32(cb)).astype(np.float32)  # bfloat16 entries, held exactly in float32
    xs = _ftz32(rows.astype(np.float32))  # DAZ: bfloat16 subnormal inputs read as zero
    acc = np.zeros((r, n), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(n // 2):  # VDPBF16PS: lane pair (2k+1, 2k), odd element first, FTZ after each step
            for i in (2 * k + 1, 2 * k):
                acc = _ftz32(fma_float32(np.broadcast_to(xs[:, i:i + 1], (r, n)),
                                         np.broadcast_to(coef[i], (r, n)), acc))
    y = _to_dtype(acc, np.dtype(ml_dtypes.bfloat16))
    y32 = y.astype(np.float32)
    y = np.where(np.abs(y32) < np.float32(2.0**-126), np.copysign(np.float32(0), y32), y32).astype(
        ml_dtypes.bfloat16)  # FTZ of the bfloat16 result
    return _to_dtype(y, out_dt)
