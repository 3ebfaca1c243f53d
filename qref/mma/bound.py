"""A rigorous bound on how far a matrix unit's GEMM lies from the exact result (spec: mma.md §7.3).

For the fused truncating families (T-FDPA, ST-FDPA, GST-FDPA: every NVIDIA FP8 / FP6 / FP4 and block-scaled
instruction) with an FP32 D, ``matmul_bound`` gives per output element a float64 bound B with
|matmul(A, B, ...) - sum_k a_k b_k| <= B, from the operands alone (no model run), and B = 0 where every step of the
unit is provably exact. Per chunk j of L elements (terms: the products or group sums of the chunk and c):

    E_j   = max(exponents of the nonzero terms, exponent of c (bounded by the running magnitude), zero_exponent)
    trunc = 0 if every term and c are multiples of 2^(E_j - F), else n_j 2^(E_j - F)     (n_j terms, each < 1 unit)
    out   = 0 if the exact running sum has at most P + 1 bits above its lowest possible bit, else
            2^-P A_j + 2^(-126 - P)  (toward_zero with P bits; half of it for nearest_even)
    A_j   = A_(j-1) + err_(j-1) + sum |terms of chunk j|     (|S| <= A_j: truncation and RZ shrink magnitudes)

Promotion (mma.md §7 C2, C3) adds per partial result D_p: |s32 - s| A_p + |s32| err_p + one float32 rounding of
the accumulation (2^-24 times its magnitude, plus 2^-150 for the subnormal range), none where provably exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import QrefError
from .accumulate import KernelAccumulation
from .algorithms import GroupScaledFusedDot, ScaledTruncatedFusedDot, TruncatedFusedDot
from .bits import decode
from .isa import Instruction

_SAFETY = 1.0 + 2.0**-30  # covers the float64 roundings of the bound's own sums (< 2^20 nonnegative terms)
_BIG = 1 << 20


@dataclass(frozen=True)
class UnitBound:
    """Per output element: ``bound`` (float64; +Inf where the unit may overflow or an operand is not finite),
    ``magnitude`` (sum of |terms|, float64, rounded up) and ``exact`` (bound == 0: the unit returns the exact
    result)."""

    bound: np.ndarray
    magnitude: np.ndarray
    low: np.ndarray  # where exact: a lower bound on the lowest set bit of the exact result (int64)

    @property
    def exact(self) -> np.ndarray:
        return self.bound == 0


def _parts(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(value float64, exponent e (int64), lowest set bit (int64; _BIG for zero), finite) of operand codes."""
    p = decode(np.asarray(x), fmt)
    sig = np.abs(p.sig)
    val = np.where(p.neg, -1.0, 1.0) * np.ldexp(sig.astype(np.float64), (p.e - p.frac).astype(np.int64))
    low = np.where(sig == 0, _BIG, p.e - p.frac + _ctz(sig))
    return val, p.e, low, ~(p.nan | p.inf)


def _ctz(v: np.ndarray) -> np.ndarray:
    v = np.where(v == 0, 1, v).astype(np.int64)
    return np.log2((v & -v).astype(np.float64)).astype(np.int64)


def _chain_bound(ins: Instruction, av: np.ndarray, ae: np.ndarray, al: np.ndarray, bv: np.ndarray,
                 be: np.ndarray, bl: np.ndarray, sa: tuple[np.ndarray, ...] | None,
                 sb: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(err, magnitude, lowest bit q of the exact sum (or -_BIG when not exact)) of one chain from C = 0."""
    ar = ins.arithmetic
    F = ar.frac_bits
    L = min(ins.k, ar.chunk)
    P = ar.output_frac_bits if ar.output_rounding == "toward_zero" else 23
    half = 1.0 if ar.output_rounding == "toward_zero" else 0.5
    group = isinstance(ar, GroupScaledFusedDot)
    G = ar.group_size if group else 1
    M, K = av.shape
    N = bv.shape[1]
    blk = ins.block_size or K
    err = np.zeros((M, N))
    amag = np.zeros((M, N))
    q = np.full((M, N), _BIG, np.int64)  # lowest possible set bit of the exact running sum
    exact = np.ones((M, N), bool)
    for s in range(0, K, L):
        ks = slice(s, s + L)
        pv = np.abs(av[:, ks, None]) * np.abs(bv[None, ks, :])  # (M, L, N), exact
        nz = pv != 0
        pe = ae[:, ks, None] + be[None, ks, :]
        pl = al[:, ks, None] + bl[None, ks, :]
        if sa is not None and sb is not None:
            j = np.arange(s, s + L) // blk
            sav, sae, sal = (t[:, j, None] for t in sa)
            sbv, sbe, sbl = (t[j, :][None] for t in sb)
            pv = pv * np.abs(sav) * np.abs(sbv)
            nz = pv != 0
            pl = pl + sal + sbl
            pe = pe + sae + sbe if not group else np.broadcast_to(sae + sbe, pe.shape)
        T = pv.sum(axis=1)
        e_terms = np.where(nz, pe, -_BIG).max(axis=1)
        q_terms = np.where(nz, pl, _BIG).min(axis=1)
        with np.errstate(divide="ignore"):
            prev = amag + err
            e_c = np.where(prev > 0, np.maximum(np.floor(np.log2(np.where(prev > 0, prev, 1.0))), -126), -_BIG)
        E = np.maximum(np.maximum(e_terms, e_c.astype(np.int64)), ar.zero_exponent)
        n_terms = (L // G if group else L) + 1
        q_new = np.minimum(q, q_terms)
        aligned = exact & (q_new >= E - F)
        trunc = np.where(aligned, 0.0, n_terms * np.ldexp(1.0, E - F))
        amag = amag + err + T
        # the exact running sum is a multiple of 2^q_new of magnitude <= amag: representable with P + 1 bits
        fits = aligned & (amag < np.ldexp(1.0, np.minimum(q_new + P + 1, 1000))) & (q_new >= -126 - P)
        out = np.where(fits, 0.0, half * (np.ldexp(amag, -P) + 2.0 ** (-126 - P)))
        err = err + trunc + out
        exact = fits
        q = q_new
    return err, amag, np.where(exact, q, -_BIG)


def matmul_bound(A: object, B: object, *, instruction: Instruction, scale_a: object = None, scale_b: object = None,
                 promote_every: int | None = None, promote_scale_a: object = None, promote_scale_b: object = None
                 ) -> UnitBound:
    """Bound on |matmul(A, B, instruction=..., ...) - exact| per element (mma.md §7.3), C = 0. A (M, K) and B
    (K, N) in the instruction's storage dtypes, scales as ``matmul`` takes them. Families T-FDPA, ST-FDPA,
    GST-FDPA with FP32 D; others raise QrefError."""
    ins = instruction
    ar = ins.arithmetic
    if isinstance(ar, KernelAccumulation):
        return kernel_bound(A, B, ar, ins)
    if not isinstance(ar, (TruncatedFusedDot, GroupScaledFusedDot)) or ins.d_format != "float32":
        raise QrefError(f"{ins.name}: an error bound is declared for the NVIDIA fused families (T-FDPA, ST-FDPA, "
                        f"GST-FDPA) with an FP32 D; this is {ar.family} with a {ins.d_format} D (use its exact "
                        "model result and compare bit for bit instead)")
    av, ae, al, af = _parts(np.asarray(A), ins.a_format)
    bv, be, bl, bf = _parts(np.asarray(B), ins.b_format)
    sa = sb = None
    fin_a, fin_b = af.all(axis=1), bf.all(axis=0)
    if isinstance(ar, (ScaledTruncatedFusedDot, GroupScaledFusedDot)):
        assert ins.scale_format is not None
        pa, pb = _parts(np.asarray(scale_a), ins.scale_format), _parts(np.asarray(scale_b), ins.scale_format)
        sa, sb = pa[:3], pb[:3]
        fin_a, fin_b = fin_a & pa[3].all(axis=1), fin_b & pb[3].all(axis=0)
    M, K = av.shape
    N = bv.shape[1]
    Pp = promote_every or K
    blk = ins.block_size or 1
    err_tot = np.zeros((M, N))
    mag = np.zeros((M, N))
    acc_mag = np.zeros((M, N))
    q_acc = np.full((M, N), _BIG, np.int64)
    exact = np.ones((M, N), bool)
    for p in range(0, K, Pp):
        ks = slice(p, p + Pp)
        bs = slice(p // blk, (p + Pp) // blk)
        e_p, A_p, q_p = _chain_bound(ins, av[:, ks], ae[:, ks], al[:, ks], bv[ks], be[ks], bl[ks],
                                     None if sa is None else tuple(t[:, bs] for t in sa),
                                     None if sb is None else tuple(t[bs] for t in sb))
        if promote_every is None:
            err_tot, mag, exact, q_acc = e_p, A_p, q_p > -_BIG, q_p
            break
        j = p // Pp
        if promote_scale_a is not None:
            psa, psb = np.asarray(promote_scale_a, np.float64), np.asarray(promote_scale_b, np.float64)
            s = psa[:, j, None] * psb[None, j, :]
            s32 = s.astype(np.float32).astype(np.float64)
            with np.errstate(divide="ignore"):
                ls = np.where(s32 == 0, 0, np.frexp(s32)[1] - 53 + _ctz_float(s32))
        else:
            s = s32 = np.ones((M, N))
            ls = np.zeros((M, N), np.int64)
        term = np.abs(s) * A_p
        new_mag = acc_mag + np.abs(s32) * (A_p + e_p)
        q_new = np.minimum(q_acc, np.where(q_p > -_BIG, q_p + ls, -_BIG))
        ok = exact & (q_p > -_BIG) & (s32 == s) & (q_new >= -149) & \
            (mag + term < np.ldexp(1.0, np.minimum(q_new + 24, 1000)))
        rnd = np.ldexp(new_mag + err_tot, -24) + 2.0**-150
        err_tot = np.where(ok, 0.0, err_tot + np.abs(s32) * e_p + np.abs(s32 - s) * A_p + rnd)
        mag = mag + term
        acc_mag = new_mag
        q_acc, exact = q_new, ok
    bound = np.where(exact, 0.0, err_tot * _SAFETY)
    overflow = (mag + bound) * (1 + 2.0**-20) >= 2.0**128
    bound = np.where(overflow | ~(fin_a[:, None] & fin_b[None, :]), np.inf, bound)
    return UnitBound(bound, mag * _SAFETY, np.where(exact, q_acc, -_BIG))


def scaled_bound(ub: UnitBound, factor: object, factor32: object) -> UnitBound:
    """The bound of RN32(D · f32) against f · exact (mma.md §7.3): f the exact factor (float64), f32 the float32
    factor the epilogue multiplies by. |RN32(D f32) - f X| <= |f32| err + |f32 - f| A + 2^-24 |f32| (A + err) +
    2^-150; 0 where D is exact, f32 = f is a power of two and f X neither underflows nor overflows."""
    f = np.broadcast_to(np.asarray(factor, np.float64), ub.bound.shape)
    f32 = np.broadcast_to(np.asarray(factor32, np.float64), ub.bound.shape)
    A, err = ub.magnitude, ub.bound
    with np.errstate(invalid="ignore", over="ignore"):
        m, e = np.frexp(np.abs(f32))
        pow2 = (m == 0.5)
        low = np.where(ub.exact & pow2, ub.low + e - 1, -_BIG)
        ok = ub.exact & (f32 == f) & pow2 & (low >= -149) & (A * np.abs(f32) < 2.0**127)
        b = np.abs(f32) * err + np.abs(f32 - f) * A + np.ldexp(np.abs(f32) * (A + err), -24) + 2.0**-150
        b = np.where(np.isfinite(err), b * _SAFETY, np.inf)
        mag = A * np.abs(f) * _SAFETY
        b = np.where((mag + b) * (1 + 2.0**-20) >= 2.0**128, np.inf, b)
    return UnitBound(np.where(ok, 0.0, b), mag, np.where(ok, low, -_BIG))


def _ctz_float(x: np.ndarray) -> np.ndarray:
    """Position of the lowest set bit of a float64's 53-bit significand (0 for x = 0)."""
    m, _ = np.frexp(np.abs(x))
    sig = (m * 2.0**53).astype(np.int64)
    return _ctz(sig)


__all__ = ["UnitBound", "matmul_bound", "scaled_bound"]


_UNIT = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126), "float64": (53, -1022)}


def kernel_depth(ar: KernelAccumulation, K: int) -> int:
    """The most roundings on one product's path through a kernel record for K terms (mma.md §10.4)."""
    B = min(ar.block or K, K) if K else 1
    if ar.order == "pairwise":
        inner = 1 + max(B - 1, 0).bit_length()
    else:
        L = min(ar.lanes, B)
        red = L - 1 if ar.reduction == "sequential" else max(L - 1, 0).bit_length()
        inner = -(-B // L) + red + (ar.products == "rounded")
    nblocks = len(ar.blocks(K)) if ar.block else 0
    return inner + nblocks + 2  # + the block partial's rounding to the block accumulator + the output rounding


def kernel_bound(A: object, B: object, ar: KernelAccumulation, ins: Instruction) -> UnitBound:
    """Bound on |matmul(A, B, instruction=kernel(ar)) - exact| (mma.md §10.4): with n = kernel_depth, u the
    largest unit roundoff of the accumulator, block accumulator and output, and eta the largest subnormal
    spacing among them: gamma_n sum_k |a_k b_k| + n K eta (+Inf where an operand is not finite)."""
    av = np.asarray(A).astype(np.float64)
    bv = np.asarray(B).astype(np.float64)
    K = av.shape[1]
    fmts = [ar.accumulator, ar.block_accumulator or ar.accumulator, ins.d_format]
    u = max(2.0 ** -_UNIT[f][0] for f in fmts)
    eta = max(2.0 ** (_UNIT[f][1] - _UNIT[f][0] + 1) for f in fmts)
    n = kernel_depth(ar, K)
    with np.errstate(all="ignore"):
        mag = np.abs(av) @ np.abs(bv)
        gamma = n * u / (1 - n * u) if n * u < 1 else np.inf
        bound = (gamma * mag + n * max(K, 1) * eta) * _SAFETY
        fin = np.isfinite(av).all(axis=1)[:, None] & np.isfinite(bv).all(axis=0)[None, :]
        if ar.subnormals == "flush":  # flushed operands (|x| < tiny) and flushed intermediates (each < tiny)
            tiny = 2.0 ** _UNIT[ar.accumulator][1]
            sa, sb = (np.abs(av) < tiny) * tiny, (np.abs(bv) < tiny) * tiny
            bound = bound + (sa @ np.abs(bv) + np.abs(av) @ sb + n * max(K, 1) * tiny) * _SAFETY
    bound = np.where(fin & np.isfinite(mag), bound, np.inf)
    return UnitBound(bound, mag, np.full(bound.shape, -_BIG, np.int64))
