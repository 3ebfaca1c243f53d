"""Fused dot-product-add algorithms of matrix units, one frozen record per family (spec: mma.md §3).

Each record computes d = DPA(a, b, c) for batches of inner products along the last axis; a long K is cut
into chunks of ``chunk`` terms, each chunk's result feeding the next chunk as c (mma.md §3.1). Field values
name mechanisms (fractional bits, chunk length, group size, rounding, zero exponent), never systems.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.arith import distill, fma64, two_sum
from ..errors import QrefError, check_choice
from .bits import (
    Parts,
    bits_to_float,
    decode,
    fma32,
    ilog2,
    operand_format,
    round_nearest_even,
    round_toward_zero,
    second_nan,
    shift_floor,
    shift_trunc,
)

ROUNDINGS = ("toward_zero", "nearest_even")
ZERO_SIGNS = ("positive", "value_sign")  # every zero is +0 / a nonzero sum rounded to zero keeps its sign
_NAN = {"float32": 0x7FFFFFFF, "float16": 0x7FFF}
_INF = {"float32": 0x7F800000, "float16": 0x7C00}
_SIGN = {"float32": 1 << 31, "float16": 1 << 15}
_EXCLUDED = -(1 << 20)  # exponent of a zero product that takes no part in the maximum (mma.md §3.4)


def _quiet(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Run an algorithm with IEEE overflow / invalid / underflow as values, not warnings (they are semantics)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return wrapper


def _check_int(family: str, **fields: tuple[int, int, int]) -> None:
    """Range constraints of mma.md §3 (C1 of each family): aligned terms stay below 2^62 in int64."""
    for name, (v, lo, hi) in fields.items():
        if not isinstance(v, int) or not lo <= v <= hi:
            raise QrefError(f"{family}: {name} must be an integer in [{lo}, {hi}], got {v!r}")


def _guard(sig: np.ndarray, shift: int, terms: int, family: str) -> None:
    """C1 of §3.2 / §3.4 at run time: |sig| 2^shift summed over ``terms`` terms must stay below 2^62."""
    top = int(np.abs(sig).max(initial=0))
    if top and top.bit_length() + max(shift, 0) + terms.bit_length() > 62:
        raise QrefError(f"{family}: frac_bits too large for these operand formats (aligned terms would exceed "
                        "2^62 in int64); lower frac_bits")


def _chunks(a: np.ndarray, chunk: int, what: str) -> tuple[int, int]:
    """(K, L): the inner length K of the operand ``a`` (..., K) and the chunk length L = min(K, chunk), which must
    divide K."""
    K = a.shape[-1]
    L = min(K, chunk)
    if L < 1 or K % L:
        raise QrefError(f"{what}: K = {K} is not a multiple of the chunk length {L}; pad K with zeros")
    return K, L


@dataclass
class _Products:
    """Products a_k * b_k (* scales) as integers: value = sig * 2^(e - frac) (mma.md §3.2)."""

    sig: np.ndarray
    e: np.ndarray
    frac: int
    neg: np.ndarray
    nan: np.ndarray
    inf: np.ndarray


def _products(pa: Parts, pb: Parts, scales: tuple[Parts, Parts] | None = None) -> _Products:
    sig = pa.sig * pb.sig
    e = pa.e + pb.e
    frac = pa.frac + pb.frac
    if scales is not None:
        sa, sb = scales
        sig = sig * sa.sig * sb.sig
        e = e + sa.e + sb.e
        frac += sa.frac + sb.frac
    parts = (pa, pb) + (scales or ())
    if not any(x.nan.any() or x.inf.any() for x in parts):  # no specials: no per-product flags to compute
        none = np.broadcast_to(np.False_, sig.shape)  # (the sign is still needed: TR's overflowing products)
        return _Products(sig, e, frac, np.broadcast_to(pa.neg ^ pb.neg, sig.shape), none, none)
    zero = (pa.sig == 0) & ~pa.nan & ~pa.inf | (pb.sig == 0) & ~pb.nan & ~pb.inf
    nan = pa.nan | pb.nan | (pa.inf & zero) | (pb.inf & zero)
    inf = (pa.inf | pb.inf) & ~nan
    if scales is not None:
        nan = nan | scales[0].nan | scales[1].nan
        inf = inf & ~nan
    shape = sig.shape
    return _Products(sig, e, frac, np.broadcast_to(pa.neg ^ pb.neg, shape), np.broadcast_to(nan, shape),
                     np.broadcast_to(inf, shape))


def _specials(bits: np.ndarray, nan: np.ndarray, pinf: np.ndarray, ninf: np.ndarray, fmt: str) -> np.ndarray:
    """NaN (canonical all-ones code) if any NaN, inf * 0 or +inf with -inf, else the infinity (mma.md §3.1 C3)."""
    nan = nan | (pinf & ninf)
    out = np.where(pinf, _INF[fmt], np.where(ninf, _INF[fmt] | _SIGN[fmt], bits))
    return np.where(nan, _NAN[fmt], out)


def _inf_flags(p: _Products, cp: Parts, sl: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nan = p.nan[..., sl].any(-1) | cp.nan
    pinf = (p.inf[..., sl] & ~p.neg[..., sl]).any(-1) | (cp.inf & ~cp.neg)
    ninf = (p.inf[..., sl] & p.neg[..., sl]).any(-1) | (cp.inf & cp.neg)
    return nan, pinf, ninf


def _expand(s: np.ndarray, K: int, what: str) -> tuple[np.ndarray, int]:
    nb = s.shape[-1]
    if nb < 1 or K % nb:
        raise QrefError(f"{what}: K = {K} is not a multiple of the number of scale blocks {nb}")
    return np.repeat(s, K // nb, axis=-1), K // nb


@dataclass(frozen=True)
class _Algorithm:
    family: ClassVar[str] = ""
    scaled: ClassVar[bool] = False
    whole_k: ClassVar[bool] = False  # True: dot consumes the whole K of a GEMM in one call (mma.md §10.3)

    @property
    def variant(self) -> str:
        """The family name of this parameterisation (GTR-FDPA for an interleaved two-stage sum)."""
        return "GTR-FDPA" if getattr(self, "interleave", 1) > 1 else self.family

    def describe(self) -> dict[str, object]:
        """The record's fields and family as a plain dict."""
        d: dict[str, object] = {"family": self.family}
        # every field and ClassVar (scaled), except whole_k: added for the kernel records after suite v1 (§10.3)
        d.update({k: getattr(self, k) for k in self.__dataclass_fields__ if k != "whole_k"})
        return d


@dataclass(frozen=True, kw_only=True)
class _TruncatedOutput(_Algorithm):
    """The output stage T-FDPA and GST-FDPA share (mma.md §3.2): the exact aligned sum rounded once to the
    output, toward zero at ``output_frac_bits`` or to nearest even; zero results +0 (or the sign of a nonzero
    sum: ``zero_sign``); NaN results the all-ones code (``nan_output``). Keyword-only, after each family's own
    parameters."""

    output_rounding: str = "toward_zero"
    output_frac_bits: int = 23
    nan_output: str = "all_ones"
    zero_sign: str = "positive"

    def _check(self, **ranges: tuple[int, int, int]) -> None:
        """C1 of the family (``ranges``: name -> (value, lo, hi)) and the output stage's choices."""
        check_choice("output rounding", self.output_rounding, ROUNDINGS)
        _check_int(self.family, **ranges, output_frac_bits=(self.output_frac_bits, 1, 23))
        check_choice("zero sign", self.zero_sign, ZERO_SIGNS)

    def _round(self, S: np.ndarray, unit: np.ndarray, fd: str) -> np.ndarray:
        sz = self.zero_sign == "value_sign"
        if self.output_rounding == "toward_zero":
            return round_toward_zero(S, unit, fd, self.output_frac_bits, sz)
        return round_nearest_even(S, unit, fd, sz)


@dataclass(frozen=True)
class TruncatedFusedDot(_TruncatedOutput):
    """T-FDPA (mma.md §3.2): per chunk, every product a_k b_k and c is aligned to the largest exponent and
    truncated to ``frac_bits`` fractional bits, the aligned terms are summed exactly, and the sum is rounded
    once to the output (``output_rounding``; ``output_frac_bits`` kept for toward_zero). Zero terms take the
    exponent ``zero_exponent``; zero results are +0; NaN results are the all-ones code (``nan_output``).

    d = round(sum_k trunc(a_k b_k 2^(F - e_max)) 2^(e_max - F)),  e_max = max(e(a_k b_k), e(c)).
    """

    frac_bits: int
    chunk: int
    zero_exponent: int
    family: ClassVar[str] = "T-FDPA"

    def __post_init__(self) -> None:
        self._check(frac_bits=(self.frac_bits, 1, 48), chunk=(self.chunk, 1, 256))

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d (..., ) of inner products of a, b (..., K) plus c (...), chunk by chunk (mma.md §3.1)."""
        K, L = _chunks(a, self.chunk, self.family)
        scales = None
        if self.scaled:
            assert scale_a is not None and scale_b is not None and fs is not None
            sa, _blk = _expand(scale_a, K, self.family)
            sb, _ = _expand(scale_b, K, self.family)
            scales = (decode(sa, fs), decode(sb, fs))
        p = _products(decode(a, fa), decode(b, fb), scales)
        F = self.frac_bits
        _guard(p.sig, F - p.frac, L + 1, self.family)
        out = c
        fcur = fc
        for i in range(0, K, L):
            sl = slice(i, i + L)
            cp = decode(out, fcur)
            sig = p.sig[..., sl]
            e = np.where(sig == 0, self.zero_exponent, p.e[..., sl])
            ec = np.where(cp.sig == 0, self.zero_exponent, cp.e)
            emax = np.maximum(e.max(-1), ec)
            S = shift_trunc(sig, e - emax[..., None] + (F - p.frac)).sum(-1)
            S = S + shift_trunc(cp.sig, ec - emax + (F - cp.frac))
            bits = self._round(S, emax - F, fd)
            bits = _specials(bits, *_inf_flags(p, cp, sl), fd)
            out = bits_to_float(bits, fd)
            fcur = fd
        return out


@dataclass(frozen=True)
class ScaledTruncatedFusedDot(TruncatedFusedDot):
    """ST-FDPA (mma.md §3.3): T-FDPA whose products carry their block scales, a_k b_k sa_(k/B) sb_(k/B), before
    the alignment (scale exponents add to the product exponent; a NaN scale makes the result NaN)."""

    family: ClassVar[str] = "ST-FDPA"
    scaled: ClassVar[bool] = True


@dataclass(frozen=True)
class GroupScaledFusedDot(_TruncatedOutput):
    """GST-FDPA (mma.md §3.4): products are summed exactly in groups of ``group_size``; each group sum p_g is
    multiplied by its block's scale product s_g and aligned on the scale exponent alone (not on |p_g|):
    term_g = trunc(p_g s_g 2^(F - e_max)), e_max = max(e(s_g), e(c)); a group whose products are all zero, or
    whose scale is zero, takes ``zero_exponent``. Output as T-FDPA."""

    group_size: int
    frac_bits: int
    chunk: int
    zero_exponent: int
    family: ClassVar[str] = "GST-FDPA"
    scaled: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self._check(group_size=(self.group_size, 1, 64), frac_bits=(self.frac_bits, 1, 36),
                    chunk=(self.chunk, 1, 256))

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d of inner products with per-block scales (mma.md §3.4)."""
        assert scale_a is not None and scale_b is not None and fs is not None
        K, L = _chunks(a, self.chunk, self.family)
        G = self.group_size
        if L % G:
            raise QrefError(f"{self.family}: chunk {L} is not a multiple of the group size {G}")
        sa, blk = _expand(scale_a, K, self.family)
        if blk % G:
            raise QrefError(f"{self.family}: block size {blk} is not a multiple of the group size {G}")
        sb, _ = _expand(scale_b, K, self.family)
        pa, pb = decode(a, fa), decode(b, fb)
        p = _products(pa, pb)
        # exact group sums in units of 2^(emin_a + emin_b - frac) (mma.md §3.4 C2)
        e0 = int(_min_exp(fa) + _min_exp(fb))
        P = np.left_shift(p.sig, np.clip(p.e - e0, 0, 62))
        shp = (*P.shape[:-1], K // G, G)
        Pg = P.reshape(shp)
        psum = Pg.sum(-1)
        allzero = ~Pg.any(-1)
        gshape = psum.shape
        none = np.zeros(gshape, bool)
        gnan = p.nan.reshape(shp).any(-1) if p.nan.any() else none  # FP4 operands have no NaN / Inf
        has_inf = p.inf.any()
        ginf_p = (p.inf & ~p.neg).reshape(shp).any(-1) if has_inf else none
        ginf_n = (p.inf & p.neg).reshape(shp).any(-1) if has_inf else none
        ssa, ssb = decode(sa[..., ::G], fs), decode(sb[..., ::G], fs)
        ssig = ssa.sig * ssb.sig
        se = ssa.e + ssb.e
        sfrac = ssa.frac + ssb.frac
        gnan = gnan | ssa.nan | ssb.nan
        ez = allzero | (ssig == 0)
        se = np.where(ez, self.zero_exponent, se)
        val = psum * ssig  # value = val * 2^(se + e0 - p.frac - sfrac)
        F = self.frac_bits
        _guard(val, F + e0 - p.frac - sfrac, L // G + 1, self.family)
        out, fcur = c, fc
        ng = L // G
        for i in range(0, K // G, ng):
            sl = slice(i, i + ng)
            cp = decode(out, fcur)
            ec = np.where(cp.sig == 0, self.zero_exponent, cp.e)
            e = se[..., sl]
            emax = np.maximum(e.max(-1), ec)
            S = shift_trunc(val[..., sl], e - emax[..., None] + (F + e0 - p.frac - sfrac)).sum(-1)
            S = S + shift_trunc(cp.sig, ec - emax + (F - cp.frac))
            bits = self._round(S, emax - F, fd)
            nan = gnan[..., sl].any(-1) | cp.nan
            pinf = ginf_p[..., sl].any(-1) | (cp.inf & ~cp.neg)
            ninf = ginf_n[..., sl].any(-1) | (cp.inf & cp.neg)
            out = bits_to_float(_specials(bits, nan, pinf, ninf, fd), fd)
            fcur = fd
        return out


def _min_exp(fmt: str) -> int:
    f = operand_format(fmt)
    return 1 - f.bias if f.zero else -f.bias


@dataclass(frozen=True)
class TwoStageFusedDot(_Algorithm):
    """TR-FDPA / GTR-FDPA (mma.md §3.5): two-stage sum. Stage 1: the products of each of ``interleave``
    interleaved groups (k mod interleave) are aligned to the group's largest exponent and truncated to
    ``frac_bits`` (F), summed exactly, and the group sums are floored onto the largest group exponent at F bits.
    Stage 2: the dot sum (floored to ``sum_frac_bits`` + 1 bits) and c (floored to F bits, or dropped when
    more than F + 1 binades below: ``addend_below_window`` = "zero") are aligned to e_max = max(e_dot, e_c)
    and added; the sum is normalized, floored to ``sum_frac_bits`` (F2) fractional bits and rounded to
    nearest even in float32. Zero products take no part in the maximum; a product of magnitude >= 2^128
    becomes infinite (``product_overflow`` = "inf")."""

    frac_bits: int
    sum_frac_bits: int
    chunk: int
    interleave: int = 1
    addend_below_window: str = "floor"
    product_overflow: str = "inf"
    output_rounding: str = "nearest_even"
    nan_output: str = "all_ones"
    zero_sign: str = "value_sign"
    family: ClassVar[str] = "TR-FDPA"

    def __post_init__(self) -> None:
        _check_int(self.family, frac_bits=(self.frac_bits, 1, 40), sum_frac_bits=(self.sum_frac_bits, self.frac_bits,
                   40), chunk=(self.chunk, 1, 256), interleave=(self.interleave, 1, 8))
        check_choice("addend below window", self.addend_below_window, ("floor", "zero"))
        check_choice("product overflow", self.product_overflow, ("inf",))
        check_choice("output rounding", self.output_rounding, ("nearest_even",))
        check_choice("zero sign", self.zero_sign, ZERO_SIGNS)

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d of inner products (mma.md §3.5); fd must be float32."""
        if fd != "float32":
            raise QrefError(f"{self.family}: the output format must be float32, got {fd}")
        K, L = _chunks(a, self.chunk, self.family)
        I = self.interleave
        if L % I:
            raise QrefError(f"{self.family}: chunk {L} is not a multiple of the interleave {I}")
        p = _products(decode(a, fa), decode(b, fb))
        pz = p.sig == 0
        over = ~pz & (ilog2(np.abs(p.sig)) + p.e - p.frac >= 128)
        inf = p.inf | (over & ~p.nan)
        p = _Products(p.sig, p.e, p.frac, p.neg, p.nan, inf)
        e_all = np.where(pz | inf | p.nan, _EXCLUDED, p.e)
        F, F2 = self.frac_bits, self.sum_frac_bits
        out, fcur = c, fc
        for i in range(0, K, L):
            sl = slice(i, i + L)
            cp = decode(out, fcur)
            eg, Sg = [], []
            for g in range(I):
                gs = slice(i + g, i + L, I)
                e = e_all[..., gs]
                em = e.max(-1)
                sig = np.where(inf[..., gs], 0, p.sig[..., gs])
                Sg.append(shift_trunc(sig, e - em[..., None] + (F - p.frac)).sum(-1))
                eg.append(em)
            edot = np.maximum.reduce(eg) if I > 1 else eg[0]
            D = sum(shift_floor(S, em - edot) for S, em in zip(Sg, eg)) if I > 1 else Sg[0]
            cspecial = cp.nan | cp.inf
            ec = np.where(cspecial, -1, cp.e)  # a NaN / Inf addend carries exponent -1 (mma.md §3.5 C4)
            emax = np.maximum(edot, ec)
            D2 = shift_floor(D, edot - emax + (F2 + 1 - F))
            C2 = np.left_shift(shift_floor(cp.sig, ec - emax + (F - cp.frac)), F2 + 1 - F)
            if self.addend_below_window == "zero":
                drop = ec < emax - F - 1
                C2 = np.where(drop, 0, C2)
                cp = Parts(cp.sig, cp.e, cp.frac, cp.neg, cp.nan & ~drop, cp.inf & ~drop)
            T = D2 + C2  # units 2^(emax - F2 - 1)
            unit = emax - F2 - 1
            En = np.where(T == 0, -126, np.maximum(ilog2(np.abs(T)) + unit, -126))
            R = shift_floor(T, unit - (En - F2))
            bits = round_nearest_even(R, En - F2, "float32", signed_zero=self.zero_sign == "value_sign")
            out = bits_to_float(_specials(bits, *_inf_flags(p, cp, sl), "float32"), "float32")
            fcur = fd
        return out


@dataclass(frozen=True)
class ExactFusedDot(_Algorithm):
    """E-FDPA (mma.md §3.6): per chunk, the exact sum of the products and c, rounded once to nearest even in
    float32 (overflow to inf). Non-finite sums are the float64 sequential sum c + p_0 + ... cast to float32
    (IEEE NaN propagation: the first NaN operand, else the default NaN)."""

    chunk: int
    output_rounding: str = "nearest_even"
    nan_output: str = "ieee_propagate"
    family: ClassVar[str] = "E-FDPA"

    def __post_init__(self) -> None:
        _check_int(self.family, chunk=(self.chunk, 1, 64))

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d of inner products (mma.md §3.6)."""
        K, L = _chunks(a, self.chunk, self.family)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(all="ignore"):
            prod = second_nan(a64 * b64, a64, b64)
        out = c.astype(np.float32)
        for i in range(0, K, L):
            terms = [prod[..., k] for k in range(i, i + L)] + [out.astype(np.float64)]
            out = exact_sum_f32(terms)
        return out


def host_sum(terms: list[np.ndarray]) -> np.ndarray:
    """The float64 sum of the terms in the order of the reference's host reduction (mma.md §3.9 C3): fewer than
    4 terms sequentially; otherwise 4 accumulators (term k into accumulator k mod 4, sequentially) combined in
    order, where a NaN meeting a NaN keeps the later accumulator's. Only the NaN payload depends on this."""
    if len(terms) < 4:
        acc = terms[0]
        for t in terms[1:]:
            acc = acc + t
        return acc
    accs = []
    for j in range(4):
        a = terms[j]
        for t in terms[j + 4::4]:
            a = a + t
        accs.append(a)
    out = accs[0]
    for a in accs[1:]:
        out = second_nan(out + a, out, a)
    return out


def exact_sum_f32(terms: list[np.ndarray]) -> np.ndarray:
    """RNE_float32(sum of float64 terms), exactly (mma.md §3.6 C1): repeated two_sum passes give a
    non-overlapping expansion h + r; h rounds to float32 unless h is a float32 tie, where r's sign decides."""
    with np.errstate(all="ignore"):
        naive = host_sum(terms)
    fin = np.isfinite(naive)
    x = [np.where(fin, t, 0.0) for t in terms]
    h, r = distill(x)
    x32 = h.astype(np.float32)
    y = h - x32.astype(np.float64)
    up = np.nextafter(x32, np.float32(np.inf)).astype(np.float64) - x32.astype(np.float64)
    dn = x32.astype(np.float64) - np.nextafter(x32, np.float32(-np.inf)).astype(np.float64)
    tie = ((y > 0) & (2 * y == up)) | ((y < 0) & (-2 * y == dn))
    away = tie & (r != 0) & ((r > 0) == (y > 0)) & np.isfinite(x32)
    x32 = np.where(away, np.nextafter(x32, np.where(y > 0, np.float32(np.inf), np.float32(-np.inf))), x32)
    return np.where(fin, x32, naive.astype(np.float32))


def _round_odd(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """RO(s + t) for s = fl(x + y), t its exact error: s, or its neighbour toward t where t != 0 and s is even."""
    fix = (t != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(t > 0, np.inf, -np.inf)), s)


#: elements of the products (and their Dekker errors) the float64 fast chain computes at once (bounded memory)
_FAST_ELEMS = 1 << 20
#: elements of the products the float64 fast chain computes at once (cache-sized)
_FAST_STEP_ELEMS = 1 << 16
#: the operand range of the float64 fast chain: every product, Dekker error and sum of it stays normal in float64
_F64_SAFE = (2.0**-300, 2.0**300)


def _fma_chain_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, fd: str) -> np.ndarray | None:
    """The FMA chain of mma.md §3.7 over the whole K in one pass of whole-array float64 steps, or None where its
    conditions do not hold (then the per-element reference path runs): finite operands and, for float64, every
    nonzero |a|, |b|, |c| in [2^-300, 2^300] (no overflow, no subnormal intermediate: Dekker's product and the
    three-term sum are exact there). float32: a b is exact in float64 and RN32(RO(a b + c)) is the fused result
    (53 >= 24 + 2; a running sum that overflows float32 becomes +-Inf and stays it, as IEEE's fma gives).
    float64: a b = p + e (Dekker), (th, tl) = TwoSum(c, p), RN(th + RO(tl + e)) (Boldo-Melquiond). Held equal to
    the reference loop bit for bit by tests/test_mma_fma_fast.py."""
    if fd not in ("float32", "float64") or a.ndim != b.ndim or a.ndim < 2:
        return None
    A, B, C = np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
    if not (np.isfinite(A).all() and np.isfinite(B).all() and np.isfinite(C).all()):
        return None
    if fd == "float64":
        lo, hi = _F64_SAFE
        for x in (A, B, C):
            m = np.abs(x)
            if ((m != 0) & ((m < lo) | (m > hi))).any():
                return None
    with np.errstate(all="ignore"):  # float32 overflow to +-Inf is the result (the docstring)
        return _fast_loop(A, B, C, fd)


def _fast_loop(A: np.ndarray, B: np.ndarray, C: np.ndarray, fd: str) -> np.ndarray:
    shape = np.broadcast_shapes(A.shape[:-1], B.shape[:-1], C.shape)
    out = np.array(np.broadcast_to(C, shape), np.float64)
    if fd == "float32":
        # RN32(s) of s = RN64(p + c) is RN32(p + c) unless s is a float32 midpoint (its 29 low bits 1 << 28 in the
        # normal range) or below 2^-126 (subnormal spacing): only steps with such an element take the TwoSum and
        # the round-to-odd neighbour (RO(p + c), 53 >= 24 + 2)
        c32 = out.astype(np.float32)
        for k in range(A.shape[-1]):
            p = A[..., k] * B[..., k]
            s = p + c32
            if ((s.view(np.int64) & 0x1FFFFFFF == 0x10000000) | (np.abs(s) < 2.0**-126)).any():
                c = c32.astype(np.float64)
                bb = s - p
                t = (p - (s - bb)) + (c - bb)
                s = _round_odd(s, t)
            c32 = s.astype(np.float32)
        return c32
    split = 134217729.0  # Veltkamp: 2^27 + 1
    # K first, C order: the products of step k are contiguous (the operand arrays are small: K x M, K x N)
    A, B = np.ascontiguousarray(np.moveaxis(A, -1, 0)), np.ascontiguousarray(np.moveaxis(B, -1, 0))
    ca, cb = A * split, B * split
    Ah, Bh = ca - (ca - A), cb - (cb - B)
    Al, Bl = A - Ah, B - Bh
    K = A.shape[0]
    per = max(1, _FAST_STEP_ELEMS // max(1, out.size))  # the products and their errors of this many steps at once
    for k0 in range(0, K, per):
        ks = slice(k0, min(K, k0 + per))
        ah, al, bh, bl = Ah[ks], Al[ks], Bh[ks], Bl[ks]
        P = np.multiply(A[ks], B[ks], order="C")
        E = np.multiply(ah, bh, order="C")  # a b = P + E exactly (Dekker): ((ah bh - P) + ah bl + al bh) + al bl
        E -= P
        E += np.multiply(ah, bl, order="C")
        E += np.multiply(al, bh, order="C")
        E += np.multiply(al, bl, order="C")
        out = _bm_steps(out, P, E)
    return out


def _bm_steps(out: np.ndarray, P: np.ndarray, E: np.ndarray) -> np.ndarray:
    """_bm_step for each step j of (P[j], E[j]) in turn, each step over all outputs at once into reused buffers
    (the same operations; RO by the integer neighbour, see _round_odd_fast)."""
    out = np.array(out, np.float64)
    th, bb, tl, v, ve = (np.empty_like(out) for _ in range(5))
    d, nz = np.empty(out.shape, np.int64), np.empty(out.shape, bool)
    vi = v.view(np.int64)
    for j in range(P.shape[0]):
        p, e = P[j], E[j]
        two_sum(out, p, out=(th, tl), tmp=bb)
        two_sum(tl, e, out=(v, ve), tmp=bb)
        _round_odd_fast(vi, ve, d, nz)  # v = RO(v + ve)
        np.add(th, v, out=out)
    return out


def _round_odd_fast(vi: np.ndarray, ve: np.ndarray, d: np.ndarray, nz: np.ndarray) -> None:
    """_round_odd in place on the int64 view ``vi`` of a finite float64 v = fl(x + y), ve its exact error:
    where ve != 0 the result is the odd one of v and its neighbour toward ve, i.e. the bit pattern
    (vi + s) | 1 with s = 0 for ve of v's sign (v or the next one away from zero) and s = -1 for the opposite
    sign (v or the next one toward zero; v != 0 there: a sum rounded to zero is exact). d, nz: scratch."""
    np.not_equal(ve, 0.0, out=nz)
    np.bitwise_xor(vi, ve.view(np.int64), out=d)
    np.right_shift(d, 63, out=d)  # 0: the same sign, -1: opposite signs
    np.add(d, vi, out=d)
    np.bitwise_or(d, 1, out=d)
    np.copyto(vi, d, where=nz)


@dataclass(frozen=True)
class FMAChain(_Algorithm):
    """FMA chain (mma.md §3.7): c = fma(a_k, b_k, c) for k = 0..K-1, each an IEEE fused multiply-add rounded
    to nearest even in the operand format (float32 or float64). A chain of steps is one chain over their K, so a
    GEMM gives it the whole K at once (``whole_k``, mma.md §10.3)."""

    output_rounding: str = "nearest_even"
    nan_output: str = "ieee_propagate"
    family: ClassVar[str] = "FMA"
    whole_k: ClassVar[bool] = True

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d of inner products (mma.md §3.7): the whole-array fast chain where it applies, else the reference."""
        fast = _fma_chain_fast(a, b, c, fd)
        return fast if fast is not None else self.reference(a, b, c, fd)

    @staticmethod
    def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, fd: str) -> np.ndarray:
        """The chain one fma at a time (qref.core.arith's fma64 / fma_float32 with IEEE NaN results)."""
        f = fma64 if fd == "float64" else fma32
        out = c
        for k in range(a.shape[-1]):
            out = f(a[..., k], b[..., k], out)
        return out


@dataclass(frozen=True)
class FlushedMulAdd(_Algorithm):
    """FTZ multiply-add (mma.md §3.8): subnormal inputs and c flush to +0; products are float32 products
    of the 16-bit operands with subnormal results flushed to a signed zero; ``adder_width`` products are
    summed pairwise in float32 (flushing) and added to c: c = ftz(c + ftz(p0 + p1)) (width 2) or
    c = ftz(c + ftz(ftz(p0 + p1) + ftz(p2 + p3))) (width 4)."""

    adder_width: int
    flush_subnormals: str = "inputs_and_results"
    nan_output: str = "ieee_propagate"
    family: ClassVar[str] = "FTZ-MUL-ADD"

    def __post_init__(self) -> None:
        if self.adder_width not in (2, 4):
            raise QrefError(f"{self.family}: adder_width must be 2 or 4, got {self.adder_width}")

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d of inner products (mma.md §3.8)."""
        K = a.shape[-1]
        P = self.adder_width
        if K % P:
            raise QrefError(f"{self.family}: K = {K} is not a multiple of the adder width {P}")
        tiny = np.float32(2.0 ** -126)

        def flush_in(x: np.ndarray, t: float) -> np.ndarray:
            return np.where(np.abs(x) < t, np.zeros_like(x), x)

        def ftz(x: np.ndarray) -> np.ndarray:
            return np.where(np.abs(x) < tiny, x * np.float32(0.0), x)

        t_in = 2.0 ** (-14 if fa == "float16" else -126)
        a32 = flush_in(a, t_in).astype(np.float32)
        b32 = flush_in(b, t_in).astype(np.float32)
        def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return ftz(second_nan(x + y, x, y))

        with np.errstate(all="ignore"):
            prod = ftz(second_nan(a32 * b32, a32, b32))
            out = flush_in(c, tiny).astype(np.float32)
            for i in range(0, K, P):
                s = add(prod[..., i], prod[..., i + 1])
                if P == 4:
                    s = add(s, add(prod[..., i + 2], prod[..., i + 3]))
                out = add(out, s)
        return out


ALGORITHMS = (TruncatedFusedDot, ScaledTruncatedFusedDot, GroupScaledFusedDot, TwoStageFusedDot, ExactFusedDot,
              FMAChain, FlushedMulAdd)


__all__ = ["ALGORITHMS", "ROUNDINGS", "ZERO_SIGNS", "ExactFusedDot", "FMAChain", "FlushedMulAdd",
           "GroupScaledFusedDot", "ScaledTruncatedFusedDot", "TruncatedFusedDot", "TwoStageFusedDot", "exact_sum_f32",
           "host_sum"]
