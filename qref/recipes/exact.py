"""Exact arithmetic for the recipe ops (spec: docs/spec/recipes.md §2).

- ``Dyadic``: arrays of exact dyadic rationals ``num * 2^exp`` (Python integers in object arrays, one exponent
  per array), with exact products, exact matrix products and rounding to any float format through the core
  (``qref.core.encode.encode_exact`` on exact triples with a sticky bit, so every rounding mode is exact).
- The correctly rounded elementary steps on float64 carriers (``round_values``, ``add_round``, ``mul_round``,
  ``flush``) are qref.core.arith's.
- ``gamma``, ``bound_from_terms``: Higham's gamma_n = n u / (1 - n u) bounds, evaluated with upward rounding,
  and the exactness test that makes a bound zero (recipes.md §2.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..core.arith import f64
from ..core.decode import decode
from ..core.encode import encode_exact
from ..core.exact import FINITE, U64, ZERO, Exact, bit_length, decompose
from ..errors import QrefError
from ..formats import FloatFormat, get_format
from ..formats.policy import CastPolicy

ACC_FORMATS = ("float64", "float32", "float16", "bfloat16")
BIG = 1 << 40  # "infinite" exponent for the lowest set bit of zero

_to_int = np.frompyfunc(int, 1, 1)
_bit_length = np.frompyfunc(lambda v: int(v).bit_length(), 1, 1)


def acc_format(name: str | np.dtype | type) -> FloatFormat:
    """The FloatFormat of an accumulation / output dtype name (float64, float32, float16, bfloat16)."""
    key = name if isinstance(name, str) else np.dtype(name).name
    if key not in ACC_FORMATS:
        raise QrefError(f"unsupported accumulation/output dtype {key!r}; use one of {', '.join(ACC_FORMATS)}")
    fmt = get_format(key)
    assert isinstance(fmt, FloatFormat)
    return fmt


def significant_bits(v: np.ndarray) -> int:
    """The largest number of significant bits among the finite values of v (0 for none)."""
    flat = np.ascontiguousarray(f64(v)).reshape(-1)
    ex = decompose(flat[np.isfinite(flat) & (flat != 0)])
    if len(ex) == 0:
        return 0
    return int((bit_length(ex.sig) - bit_length(ex.sig & (~ex.sig + U64(1))) + 1).max())


def lsb_exponent(v: np.ndarray) -> np.ndarray:
    """Exponent of the lowest set bit of each finite nonzero value (value = odd * 2^lsb); BIG for 0 and
    non-finite values."""
    v = f64(v)
    flat = np.ascontiguousarray(v).reshape(-1)
    ex = decompose(flat)
    low = ex.sig & (~ex.sig + U64(1))
    lsb = ex.exp + bit_length(low) - 1
    return np.where(ex.cls == FINITE, lsb, BIG).reshape(v.shape)


# ---------------------------------------------------------------------------------------------------------
# dyadic arrays
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dyadic:
    """Exact values num * 2^exp (num: object array of Python ints, exp: one int for the whole array)."""

    num: np.ndarray
    exp: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.num.shape)

    @staticmethod
    def from_floats(x: object) -> Dyadic:
        """Exact dyadics of a float array; non-finite values are read as 0 (callers track them separately)."""
        v = f64(x)
        flat = np.ascontiguousarray(v).reshape(-1)
        ex = decompose(np.where(np.isfinite(flat), flat, 0.0))
        fin = ex.cls == FINITE
        if not fin.any():
            return Dyadic(np.zeros(v.shape, dtype=object) * 0, 0)
        e0 = int(ex.exp[fin].min())
        shift = np.where(fin, ex.exp - e0, 0).astype(object)
        num = np.where(fin, ex.sig.astype(object) << shift, 0).astype(object)
        num = np.where(ex.neg, -num, num).astype(object)
        return Dyadic(num.reshape(v.shape), e0)

    def with_exp(self, e: int) -> np.ndarray:
        """num scaled to the exponent e <= self.exp (exact)."""
        if e > self.exp:
            raise AssertionError("with_exp lowers exponents only")
        return self.num * (1 << (self.exp - e)) if e < self.exp else self.num

    def __add__(self, other: Dyadic) -> Dyadic:
        e = min(self.exp, other.exp)
        return Dyadic(self.with_exp(e) + other.with_exp(e), e)

    def __neg__(self) -> Dyadic:
        return Dyadic(-self.num, self.exp)

    def __mul__(self, other: Dyadic) -> Dyadic:
        return Dyadic(self.num * other.num, self.exp + other.exp)

    def abs(self) -> Dyadic:
        return Dyadic(np.abs(self.num), self.exp)

    def matmul(self, other: Dyadic) -> Dyadic:
        """Exact matrix product (numpy matmul rules on the object arrays)."""
        return Dyadic(np.matmul(self.num, other.num), self.exp + other.exp)

    def sum(self, axis: int) -> Dyadic:
        return Dyadic(np.sum(self.num, axis=axis), self.exp)

    def to_fractions(self) -> np.ndarray:
        scale = Fraction(2) ** self.exp
        out = np.empty(self.num.shape, dtype=object)
        out[...] = np.frompyfunc(lambda n: Fraction(n) * scale, 1, 1)(self.num)
        return out

    def exact_triples(self) -> Exact:
        """The core's exact triples with a sticky bit below 62 significant bits (rounds exactly in any mode)."""
        flat = self.num.reshape(-1)
        neg = np.asarray(flat < 0, dtype=bool)
        mag = np.abs(flat)
        bl = _bit_length(mag).astype(np.int64)
        sh = np.maximum(bl - 62, 0)
        sh_o = sh.astype(object)
        top = mag >> sh_o
        sticky = np.asarray((mag & ((1 << sh_o) - 1)) != 0, dtype=bool)
        top = np.where(sticky, top | 1, top)
        sig = top.astype(np.uint64)
        cls = np.where(bl == 0, ZERO, FINITE).astype(np.int8)
        return Exact(cls, neg, sig, (sh + self.exp).astype(np.int64), np.zeros(flat.shape, dtype=bool))

    def round(self, fmt: FloatFormat | str, rounding: str = "nearest_even") -> np.ndarray:
        """Values rounded once to ``fmt`` by ``rounding`` (overflow to +-Inf; exact zeros give +0), returned as
        float64 carriers."""
        f = acc_format(fmt) if isinstance(fmt, str) else fmt
        pol = CastPolicy(rounding=rounding, overflow="inf", nan="keep_sign").resolve(f)
        codes = encode_exact(self.exact_triples(), f, pol).astype(f.code_dtype)
        return decode(codes, f, dtype=np.float64).reshape(self.shape)

    def upper(self) -> np.ndarray:
        """float64 upper bounds of |values| (rounded toward +Inf)."""
        return self.abs().round(get_format("float64"), rounding="up")  # type: ignore[arg-type]

    def le_pow2(self, k: np.ndarray) -> np.ndarray:
        """|value| <= 2^k elementwise (k int64 array), exactly."""
        mag = np.abs(self.num)
        rel = np.asarray(k, dtype=np.int64) - self.exp
        big = rel > 4096
        relc = np.clip(rel, -1, 4096)
        pw = np.where(relc >= 0, 1 << np.maximum(relc, 0).astype(object), 0)
        ok = np.where(relc >= 0, mag <= pw, mag == 0)
        return np.asarray(ok, dtype=bool) | big


def dyadic_compare_abs_diff(value: np.ndarray, exact: Dyadic, bound: np.ndarray) -> np.ndarray:
    """|value - exact| <= bound exactly, elementwise (value, bound: finite float arrays)."""
    dv = Dyadic.from_floats(value)
    db = Dyadic.from_floats(bound)
    diff = (dv + (-exact)).abs()
    e = min(diff.exp, db.exp)
    return np.asarray(diff.with_exp(e) <= db.with_exp(e), dtype=bool)


# ---------------------------------------------------------------------------------------------------------
# bounds
# ---------------------------------------------------------------------------------------------------------
def gamma(n: int | np.ndarray, p: int) -> np.ndarray:
    """Higham's gamma_n = n u / (1 - n u) with u = 2^-p, rounded up to float64; +Inf when n u >= 1."""
    n_arr = np.asarray(n, dtype=np.int64)
    flat = n_arr.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    for i, nv in enumerate(flat.tolist()):  # a handful of distinct depths, not elements
        den = (1 << p) - nv
        if nv <= 0:
            out[i] = 0.0
        elif den <= 0:
            out[i] = np.inf
        else:
            fr = Fraction(nv, den)
            g = float(fr)
            out[i] = g if Fraction(g) >= fr else np.nextafter(g, np.inf)
    return out.reshape(n_arr.shape)


@lru_cache(maxsize=256)
def _growth_one(n: int, p: int) -> float:
    if n <= 0:
        return 0.0
    num = (((1 << p) + 1) ** n) - (1 << (p * n))  # (1 + 2^-p)^n - 1 = num / 2^(p n), exactly
    fr = Fraction(num, 1 << (p * n))
    g = float(fr)
    return g if Fraction(g) >= fr else float(np.nextafter(g, np.inf))


def growth(n: int | np.ndarray, p: int) -> np.ndarray:
    """(1 + u)^n - 1 with u = 2^-p, rounded up to float64: the bound on |prod_{i<=n} (1 + delta_i) - 1| for
    |delta_i| <= u (Higham, Lemma 3.1 before its last step). It is <= gamma_n when n u < 1 and stays finite
    (and meaningful: below 2^n u-ish growth) when n u >= 1, where gamma_n is undefined."""
    n_arr = np.asarray(n, dtype=np.int64)
    flat = [_growth_one(int(v), p) for v in n_arr.reshape(-1).tolist()]  # a few distinct depths
    return np.asarray(flat, dtype=np.float64).reshape(n_arr.shape)


def _up_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        r = a * b
    return np.where(r > 0, np.nextafter(r, np.inf), r)


def _up_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        r = a + b
    return np.where(r > 0, np.nextafter(r, np.inf), r)


@dataclass(frozen=True)
class Level:
    """One level of exact quantities a computation rounds (recipes.md §2.3).

    abs_sum: sum |T_j| of the terms summed at this level (exact; trailing axes beyond the result's rank are
    independent sums, e.g. one per group); lsb: a lower bound on the lowest set bit exponent of every T_j of
    each sum (int64, BIG when all are zero)."""

    abs_sum: Dyadic
    lsb: np.ndarray


def _reduce(a: np.ndarray, ndim: int, how: str) -> np.ndarray:
    axes = tuple(range(ndim, a.ndim))
    if not axes:
        return a
    return a.all(axis=axes) if how == "all" else a.any(axis=axes)


def bound_from_terms(levels: list[Level], fmt: FloatFormat, depth: int | np.ndarray, *, n_tiny: int = 0,
                     ftz: bool = False, p: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(bound, overflow) for a result computed by rounding sums and products of exact terms.

    levels[0] holds the result's own terms T_j (the exact result is sum T_j); further levels hold the
    intermediate sums the computation forms (e.g. MLX's per-group sums before scaling). depth: the most
    roundings to precision p (default: fmt's) on any term's path, for every order the op allows. Below,
    g_D = (1 + u)^D - 1 (``growth``; <= gamma_D = D u / (1 - D u) whenever D u < 1).

    bound = 0 where every rounding is provably exact: at every level all terms are multiples of 2^q (q = lsb),
    sum|T_j| <= 2^(q + p) (every partial sum then has at most p significant bits), q >= the format's smallest
    quantum (2^emin with ftz) and sum|T_j| <= max. Otherwise (Higham, Lemma 3.1 / eq. 4.4)
        bound = g_D sum_j |T_j| + (1 + g_D) n_tiny eta,
    where the second term appears only if some level has q < emin (an operation may then land below the
    smallest normal): eta = half the smallest subnormal (or the smallest normal with ftz) per operation.
    overflow where (1 + g_D) sum|T_j| plus that term may exceed the largest finite value at some level; the
    bound is +Inf there (the backend may overflow)."""
    prec = fmt.precision if p is None else p
    top = levels[0]
    ndim = top.abs_sum.num.ndim
    qmin = fmt.emin if ftz else fmt.qmin
    big = float(fmt.max_value)
    g = growth(depth, prec)
    exact = np.ones(top.abs_sum.shape, dtype=bool)
    tiny_possible = np.zeros(top.abs_sum.shape, dtype=bool)
    ups = []
    for lev in levels:
        up = lev.abs_sum.upper()
        q = np.asarray(lev.lsb, dtype=np.int64)
        fits = (lev.abs_sum.le_pow2(q + prec) & (q >= qmin) & (up <= big)) | (up == 0)
        exact &= _reduce(fits, ndim, "all")
        tiny_possible |= _reduce((q < fmt.emin) & (up > 0), ndim, "any")
        ups.append(up)
    eta = float(fmt.min_normal) if ftz else float(Fraction(2) ** (fmt.qmin - 1))
    under = np.where(tiny_possible, _up_mul(np.full(exact.shape, float(n_tiny) * eta), 1.0 + g), 0.0)
    overflow = np.zeros(exact.shape, dtype=bool)
    for up in ups:
        worst = _up_add(_up_mul(1.0 + g, up), np.broadcast_to(under.reshape(under.shape + (1,) * (up.ndim - ndim)),
                                                                up.shape))
        overflow |= _reduce(~(worst <= big), ndim, "any")
    overflow &= ~exact
    bound = np.where(exact, 0.0, _up_add(_up_mul(g, ups[0]), under))
    return np.where(overflow, np.inf, bound), overflow


__all__ = ["ACC_FORMATS", "BIG", "Dyadic", "Level", "acc_format", "bound_from_terms", "dyadic_compare_abs_diff",
           "gamma", "growth", "lsb_exponent", "significant_bits"]
