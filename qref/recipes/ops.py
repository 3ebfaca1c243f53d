"""Reference ops with explicit numerics (spec: docs/spec/recipes.md §2, §5-§7).

Every op here computes a sum of exactly known terms T_j (products of decoded elements, scales and inputs) and
returns a ``MatmulResult``:

- ``value``: the declared computation (``Accumulation``: "exact" = correctly rounded, "sequential", "pairwise",
  "blocked", or "any" = implementation-defined order, whose representative value is the correctly rounded one);
- ``exact``: the exact result (``Dyadic``), ``special``: NaN / +-Inf where the exact IEEE result is not finite;
- ``bound``: a rigorous bound on |computed - exact| for every computation the declared model allows (zero
  where every rounding is provably exact), derived in recipes.md §2.3;
- ``unspecified``: results the model does not define (possible overflow, libm-dependent steps).

``within(backend)`` / ``check(backend)`` compare a backend's output against that contract exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import add_round, f64, mul_round, np_dtype, round_values
from ..core.decode import decode
from ..core.encode import encode
from ..errors import QrefError, check_choice
from ..formats import FloatFormat, Format, get_format
from ..mma import as_mma_accumulation
from ..schemes.base import QArray
from .exact import (
    ACC_FORMATS,
    BIG,
    Dyadic,
    Level,
    acc_format,
    bound_from_terms,
    dyadic_compare_abs_diff,
    lsb_exponent,
    significant_bits,
)
from .scaling import DIVISIONS, _pow2_log_ratio, current_scale, scaled_quantize

ORDERS = ("exact", "any", "sequential", "pairwise", "blocked")
PRODUCTS = ("exact", "rounded")


# ---------------------------------------------------------------------------------------------------------
# accumulation models (recipes.md §2.1)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Accumulation:
    """How a sum of n products is accumulated (recipes.md §2.1).

    order: "exact" (the exact sum rounded once to dtype), "any" (implementation-defined order and tree, the
        default: the value reported is the correctly rounded one, the bound covers every order),
        "sequential" (s = 0; s = fl(s + p_k) for k = 0..n-1), "pairwise" (adjacent pairs summed level by level,
        an odd last element carried up unchanged), "blocked" (sequential within consecutive blocks of ``block``
        products, then sequential over the block sums).
    dtype: the accumulator format: "float32" (default), "float16", "bfloat16" or "float64".
    block: the block length of "blocked" (required there, unused elsewhere).
    products: "exact" (products enter the sum exactly, as with FMA or products exact in dtype; default) or
        "rounded" (each product is first rounded to dtype).
    ftz: flush subnormal operands and results of every step to zero (XLA:CPU); default False.
    """

    order: str = "any"
    dtype: str = "float32"
    block: int | None = None
    products: str = "exact"
    ftz: bool = False

    def __post_init__(self) -> None:
        check_choice("accumulation order", self.order, ORDERS)
        check_choice("product rounding", self.products, PRODUCTS)
        acc_format(self.dtype)
        if self.order == "blocked" and (not isinstance(self.block, int) or isinstance(self.block, bool)
                                        or self.block < 1):
                raise QrefError(f"order='blocked' needs block=<positive int>, got {self.block!r}")

    @property
    def format(self) -> FloatFormat:
        return acc_format(self.dtype)

    def depth(self, n: int) -> int:
        """The most roundings on one product's path for n products (recipes.md §2.3, table D)."""
        if n <= 0:
            return 0
        if self.order == "exact":
            return 1
        if self.order in ("any", "sequential"):
            return n
        if self.order == "pairwise":
            return max(1, int(np.ceil(np.log2(n)))) + (self.products == "rounded")
        assert self.block is not None
        b = min(self.block, n)
        return b + int(np.ceil(n / self.block)) - 1


def _as_accumulation(acc: Accumulation | str | None) -> Accumulation:
    """An Accumulation from None (the default), an order name ("exact", "any", "sequential", "pairwise"), or
    "<dtype>_<order>" such as "float32_sequential" or "bfloat16_pairwise"."""
    if acc is None:
        return Accumulation()
    if isinstance(acc, str):
        dt, sep, order = acc.partition("_")
        if sep and dt in ACC_FORMATS and order in ORDERS:
            return Accumulation(order=order, dtype=dt)
        return Accumulation(order=acc)
    if not isinstance(acc, Accumulation):
        raise QrefError(f"accumulation must be an Accumulation or an order name ({', '.join(ORDERS)}), got {acc!r}")
    return acc


# ---------------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulResult:
    """Result of a reference op: the declared value, the exact result, a rigorous error bound (module doc).

    value: the declared computation's result as ``out_dtype`` values.
    exact: exact finite results (positions where the exact result is not finite hold 0; see ``special``).
    special: float64 NaN / +-Inf where the exact IEEE result is not finite (0 elsewhere); is_special marks them.
    bound: float64, for every finite exact result: |computed - exact| <= bound for every computation the op's
        model allows; 0 means deterministic: every such computation returns ``value`` itself (the exact result,
        or its one deterministic rounding after an exact accumulation); +Inf: the model may overflow.
    unspecified: results the model leaves undefined (possible overflow, libm-dependent or UB steps).
    meta: the op's intermediate data (quantized operands, scales, the accumulation used).
    """

    value: np.ndarray
    exact: Dyadic
    special: np.ndarray
    is_special: np.ndarray
    bound: np.ndarray
    unspecified: np.ndarray
    out_dtype: str
    meta: dict[str, Any] = field(default_factory=dict)

    def correctly_rounded(self, dtype: str | None = None) -> np.ndarray:
        """The exact result rounded once (nearest even) to ``dtype`` (default: out_dtype)."""
        fmt = acc_format(dtype or self.out_dtype)
        v = np.where(self.is_special, self.special, self.exact.round(fmt))
        return v.astype(np_dtype(fmt))

    def within(self, backend: object) -> np.ndarray:
        """Elementwise: does ``backend`` satisfy the contract (recipes.md §2.3)? Unspecified results pass;
        special results must match (NaN with NaN, +-Inf with the same infinity); a zero bound needs backend ==
        value (+-0 equal); other finite results need |backend - exact| <= bound, decided in exact arithmetic."""
        b = f64(backend)
        if b.shape != self.value.shape:
            raise QrefError(f"backend result has shape {b.shape}, the reference {self.value.shape}")
        ok = np.zeros(b.shape, dtype=bool)
        sp = self.is_special
        ok |= sp & np.isnan(self.special) & np.isnan(b)
        ok |= sp & np.isinf(self.special) & (b == self.special)
        fin = ~sp & np.isfinite(b)
        infb = np.isinf(self.bound)
        ok |= fin & infb
        det = ~sp & (self.bound == 0)  # deterministic: every conforming computation returns value
        ok |= det & (b == f64(self.value))
        cmp = fin & ~infb & ~det
        if cmp.any():
            d = dyadic_compare_abs_diff(np.where(cmp, b, 0.0), self.exact_masked(cmp), np.where(cmp, self.bound, 0.0))
            ok |= cmp & d
        ok |= ~sp & ~np.isfinite(b) & infb
        return ok | self.unspecified

    def exact_masked(self, mask: np.ndarray) -> Dyadic:
        return Dyadic(np.where(mask, self.exact.num, 0).astype(object), self.exact.exp)

    def check(self, backend: object, what: str = "backend") -> int:
        """Raise QrefError listing the first results outside the contract; return the number of results
        compared (those not unspecified)."""
        ok = self.within(backend)
        bad = np.argwhere(~ok)
        if bad.size:
            b = f64(backend)
            cr = self.correctly_rounded("float64")
            lines = []
            for idx in bad[:5]:
                t = tuple(idx)
                ex = float(cr[t])
                lines.append(f"  at {t}: {what} {b[t]!r}, exact ~{ex!r}, bound {self.bound[t]!r}, "
                             f"|diff| ~{abs(b[t] - ex)!r}")
            raise QrefError(f"{bad.shape[0]} of {ok.size} results outside the reference bound:\n" + "\n".join(lines))
        return int((~self.unspecified).sum())

    @property
    def max_bound(self) -> float:
        fin = ~self.unspecified & ~self.is_special
        return float(self.bound[fin].max()) if fin.any() else 0.0


# ---------------------------------------------------------------------------------------------------------
# exact products and the generic matmul (recipes.md §2.2)
# ---------------------------------------------------------------------------------------------------------
def _special(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is_special, value): NaN / +-Inf where the exact IEEE dot product of a (.., M, K) and b (.., K, N) is
    not finite (any NaN, 0 * Inf, or infinities of both signs), decided by counting (no summation order)."""

    def f(m: np.ndarray) -> np.ndarray:
        return m.astype(np.float64)

    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    zero_a, zero_b = a == 0, b == 0
    nz_a, nz_b = ~zero_a & ~nan_a, ~zero_b & ~nan_b
    pos_a, pos_b = ~np.signbit(a), ~np.signbit(b)
    ones_b = np.ones(b.shape)
    ones_a = np.ones(a.shape)
    has_nan = (f(nan_a) @ ones_b + ones_a @ f(nan_b) + f(inf_a) @ f(zero_b) + f(zero_a) @ f(inf_b)) > 0
    pos = (f(inf_a & pos_a) @ f(nz_b & pos_b) + f(inf_a & ~pos_a) @ f(nz_b & ~pos_b)
           + f(nz_a & pos_a) @ f(inf_b & pos_b) + f(nz_a & ~pos_a) @ f(inf_b & ~pos_b)) > 0
    neg = (f(inf_a & pos_a) @ f(nz_b & ~pos_b) + f(inf_a & ~pos_a) @ f(nz_b & pos_b)
           + f(nz_a & pos_a) @ f(inf_b & ~pos_b) + f(nz_a & ~pos_a) @ f(inf_b & pos_b)) > 0
    nan_out = has_nan | (pos & neg)
    val = np.where(nan_out, np.nan, np.where(pos, np.inf, np.where(neg, -np.inf, 0.0)))
    return nan_out | pos | neg, val


def _lsb_rows_cols(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A lower bound on the lowest set bit of every product a[m, k] b[k, n]: min_k lsb(a) + min_k lsb(b)."""
    la = lsb_exponent(a).min(axis=-1, initial=BIG)[..., :, None]
    lb = lsb_exponent(b).min(axis=-2, initial=BIG)[..., None, :]
    return np.minimum(la + lb, BIG)


@dataclass(frozen=True)
class _Limits:
    precision: int
    emin: int
    qmin: int
    max_value: Fraction
    min_normal: Fraction


def _limits(*fmts: FloatFormat) -> _Limits:
    """The tightest of several formats: fewest bits, largest smallest quantum, smallest max."""
    return _Limits(min(f.precision for f in fmts), max(f.emin for f in fmts), max(f.qmin for f in fmts),
                   min(f.max_value for f in fmts), max(f.min_normal for f in fmts))


def _emulate(a: np.ndarray, b: np.ndarray, acc: Accumulation, exact: Dyadic, special: np.ndarray,
             is_special: np.ndarray) -> np.ndarray:
    """The declared accumulation's value (float64 carriers of dtype values) of a @ b (recipes.md §2.1)."""
    fmt = acc.format
    if acc.order in ("exact", "any"):
        return np.where(is_special, special, exact.round(fmt))
    if significant_bits(a) + significant_bits(b) > 53:
        raise QrefError("the deterministic orders form products in float64: operands must have at most 53 "
                        "significant bits together (float32 and narrower); use order='exact' or 'any'")
    ftz = acc.ftz

    def prod(k: int) -> np.ndarray:
        p = a[..., :, k, None] * b[..., k, None, :]
        return round_values(p, fmt, ftz=ftz) if acc.products == "rounded" else p

    K = a.shape[-1]
    out_shape = np.broadcast_shapes((*a.shape[:-1], 1), (*b.shape[:-2], 1, b.shape[-1]))
    with np.errstate(invalid="ignore", over="ignore"):
        if acc.order == "sequential":
            s = np.zeros(out_shape)
            for k in range(K):
                s = add_round(s, prod(k), fmt, ftz)
            return s
        if acc.order == "pairwise":
            if K == 0:
                return np.zeros(out_shape)
            P = np.stack([prod(k) for k in range(K)], axis=-1)
            if K == 1:
                return round_values(P[..., 0], fmt, ftz=ftz)
            while P.shape[-1] > 1:
                n2 = P.shape[-1] // 2
                sums = add_round(P[..., 0:2 * n2:2], P[..., 1:2 * n2:2], fmt, ftz)
                P = np.concatenate([sums, P[..., 2 * n2:]], axis=-1) if P.shape[-1] % 2 else sums
            return P[..., 0]
        assert acc.block is not None
        total = np.zeros(out_shape)
        for start in range(0, K, acc.block):
            part = np.zeros(out_shape)
            for k in range(start, min(start + acc.block, K)):
                part = add_round(part, prod(k), fmt, ftz)
            total = add_round(total, part, fmt, ftz)
        return total


def exact_matmul(a: object, b: object, *, accumulation: Accumulation | str | None = None,
                 out_dtype: str = "float32", post_scale: object = None, meta: dict[str, Any] | None = None
                 ) -> MatmulResult:
    """a @ b (numpy matmul rules, 2-D or batched) of exactly given float values under ``accumulation``
    (default: Accumulation(order="any", dtype="float32")), rounded to ``out_dtype`` (default "float32").

    post_scale: optional scale s (broadcast to the result) applied after the sum as fl_out(acc * s) (Flax's
    dequantize; recipes.md §2.4): the exact result is then s * sum_k a_k b_k and the bound covers that extra
    rounding (none when s is a power of two). The exact result's zero sign is +0 (sign of zero results is
    unspecified in the contract)."""
    acc = _as_accumulation(accumulation)
    av, bv = f64(a), f64(b)
    if av.ndim < 2 or bv.ndim < 2 or av.shape[-1] != bv.shape[-2]:
        raise QrefError(f"exact_matmul takes (..., M, K) @ (..., K, N) operands, got {av.shape} and {bv.shape}")
    K = av.shape[-1]
    out_fmt = acc_format(out_dtype)
    is_sp, sp = _special(av, bv)
    da, db = Dyadic.from_floats(av), Dyadic.from_floats(bv)
    ex = da.matmul(db)
    abs_sum = da.abs().matmul(db.abs())
    lsb = _lsb_rows_cols(av, bv)
    depth = acc.depth(K) + (1 if out_fmt.precision < acc.format.precision or
                                 out_fmt.max_value < acc.format.max_value else 0)
    ftz = acc.ftz
    if acc.order in ("exact", "any"):  # one rounding, straight to the output format
        value = np.where(is_sp, sp, ex.round(out_fmt))
    else:
        value = _emulate(av, bv, acc, ex, sp, is_sp)
        if out_fmt.name != acc.format.name:
            value = round_values(value, out_fmt, ftz=ftz)
    lim = _limits(acc.format, out_fmt)
    bound, overflow = bound_from_terms([Level(abs_sum, lsb)], lim, depth, n_tiny=2 * K + 2, ftz=ftz)
    if post_scale is not None:
        s = np.broadcast_to(f64(post_scale), ex.shape)
        if not np.isfinite(s).all() or (s == 0).any():
            raise QrefError("post_scale must be finite and nonzero")
        deterministic = bound == 0  # exact accumulator: fl(acc * s) is the same for every computation
        ds = Dyadic.from_floats(s)
        ex = ex * ds
        abs_sum = abs_sum * ds.abs()
        lsb = np.minimum(lsb + lsb_exponent(s), BIG)
        pow2 = (np.frexp(np.abs(s))[0] == 0.5)
        depth = depth + (0 if pow2.all() else 1)
        with np.errstate(invalid="ignore", over="ignore"):
            value = round_values(value * s, out_fmt, ftz=ftz)
            sp = np.where(is_sp, sp * np.sign(s), sp)
        bound, overflow2 = bound_from_terms([Level(abs_sum, lsb)], lim, depth, n_tiny=2 * K + 3, ftz=ftz)
        overflow = (overflow | overflow2) & ~deterministic
        bound = np.where(deterministic, 0.0, bound)
    bound = np.where(is_sp, 0.0, bound)
    unspec = overflow & ~is_sp
    m = {"accumulation": acc, "depth": depth}
    if meta:
        m.update(meta)
    return MatmulResult(value.astype(np_dtype(out_fmt)), ex, sp, is_sp, bound, unspec, out_fmt.name, m)


# ---------------------------------------------------------------------------------------------------------
# qdq_matmul (recipes.md §5)
# ---------------------------------------------------------------------------------------------------------
def qdq_matmul(a: object, b: object, *, a_format: str = "float8_e4m3fn", b_format: str = "float8_e4m3fn",
               a_scale: object = None, b_scale: object = None, formula: str = "amax_over_max",
               compute_dtype: str = "float32", division: str = "divide",
               accumulation: Accumulation | str | None = None, out_dtype: str = "float32", ftz: bool = False
               ) -> MatmulResult:
    """Scaled-FP8 matmul: q_a = cast(clip(a / s_a)), q_b likewise, y = fl_out(sum_k q_a q_b * fl(s_a s_b)).

    a: (M, K), b: (K, N). a_format / b_format: element formats (default float8_e4m3fn). a_scale / b_scale:
    per-tensor scalars, or per-row (M, 1) / per-column (1, N) arrays; None computes current scaling per
    tensor with ``formula`` (default "amax_over_max"). compute_dtype, division, ftz: the scaled cast
    (recipes.md §3.3; defaults float32, "divide", False). accumulation: the declared accumulation of the
    products decode(q_a) decode(q_b) (default order "any" in float32; "exact", "sequential", "pairwise",
    "blocked" declare a backend's order; a matrix-unit instruction - ``qref.mma.get(...)``, "arch/instruction/
    qualifier" or ``qref.mma.MMAAccumulation`` - computes the sum as that unit does, mma.md §7.2). The scale
    product fl_compute(s_a s_b) multiplies the sum in out_dtype (Flax's out_dq). meta holds the codes and scales."""
    check_choice("division", division, DIVISIONS)
    av, bv = np.asarray(a), np.asarray(b)
    if av.ndim != 2 or bv.ndim != 2 or av.shape[1] != bv.shape[0]:
        raise QrefError(f"qdq_matmul takes (M, K) and (K, N) operands, got {av.shape} and {bv.shape}")
    sa = _operand_scale(av, a_scale, a_format, formula, compute_dtype, ftz, "a", (av.shape[0], 1))
    sb = _operand_scale(bv, b_scale, b_format, formula, compute_dtype, ftz, "b", (1, bv.shape[1]))
    qa = scaled_quantize(av, sa, a_format, compute_dtype=compute_dtype, division=division, ftz=ftz)
    qb = scaled_quantize(bv, sb, b_format, compute_dtype=compute_dtype, division=division, ftz=ftz)
    va = decode(qa, a_format, dtype=np.float64)
    vb = decode(qb, b_format, dtype=np.float64)
    with np.errstate(over="ignore"):
        s = round_values(round_values(f64(sa) * f64(sb), acc_format(compute_dtype), ftz=ftz),
                         acc_format(out_dtype), ftz=ftz)
    meta = {"a_codes": qa, "b_codes": qb, "a_scale": sa, "b_scale": sb}
    mma_acc = _mma_accumulation(accumulation)
    if mma_acc is not None:  # a matrix-unit instruction accumulates the codes (mma.md §7.2)
        _check_mma_formats(mma_acc, a_format, b_format)
        return _mma_result(va, vb, mma_acc.run(qa, qb), s, out_dtype, mma_acc, meta)
    acc = _as_accumulation(accumulation)
    return exact_matmul(va, vb, accumulation=replace_ftz(acc, ftz), out_dtype=out_dtype, post_scale=s,
                        meta=meta)


# ---------------------------------------------------------------------------------------------------------
# matrix-unit instructions as the accumulation (mma.md §7.2)
# ---------------------------------------------------------------------------------------------------------
def _mma_accumulation(acc: object) -> Any:
    return as_mma_accumulation(acc)


def _check_mma_formats(mma_acc: Any, a_format: str, b_format: str) -> None:
    ins = mma_acc.instruction
    if (ins.a_format, ins.b_format) != (get_format(a_format).name, get_format(b_format).name):
        raise QrefError(f"{ins.name} multiplies {ins.a_format} x {ins.b_format}; the operands are {a_format} x "
                        f"{b_format}: pick an instruction of those formats or quantize to its formats")


def _mma_result(va: np.ndarray, vb: np.ndarray, d: np.ndarray, s: object, out_dtype: str, mma_acc: Any,
                meta: dict[str, Any]) -> MatmulResult:
    """value = fl_out(D * s) with D the instruction model's GEMM; exact / special as the exact op; bound 0:
    the model defines one result (mma.md §7.2 C2)."""
    ref = exact_matmul(va, vb, accumulation="exact", out_dtype=out_dtype, post_scale=s, meta=meta)
    fmt = acc_format(out_dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        v = d.astype(np.float64) if s is None else d.astype(np.float64) * f64(s)
        value = round_values(v, fmt).astype(np_dtype(fmt))
    m = dict(ref.meta)
    m.update({"accumulation": mma_acc, "instruction": mma_acc.instruction.name, "mma_d": d})
    zero = np.zeros(value.shape)
    return MatmulResult(value, ref.exact, ref.special, ref.is_special, zero, zero.astype(bool), fmt.name, m)


def _operand_scale(x: np.ndarray, scale: object, fmt: str, formula: str, dtype: str, ftz: bool, nm: str,
                   per: tuple[int, int]) -> np.ndarray:
    """A per-tensor () or per-row/column scale array for qdq_matmul (current scaling when None)."""
    if scale is None:
        return current_scale(x, fmt, formula=formula, dtype=dtype, ftz=ftz).reshape(())
    s = np.asarray(scale)
    if s.size == 1:
        return s.reshape(())
    if s.shape != per:
        raise QrefError(f"{nm}_scale of shape {s.shape}: give a scalar or {per} scales (per "
                        f"{'row' if nm == 'a' else 'column'}); block scales along K need block_matmul")
    return s


def replace_ftz(acc: Accumulation, ftz: bool) -> Accumulation:
    from dataclasses import replace

    return replace(acc, ftz=acc.ftz or ftz)


# ---------------------------------------------------------------------------------------------------------
# block-scaled dot products (recipes.md §6; OCP MX v1.0 §6)
# ---------------------------------------------------------------------------------------------------------
def _block_values(q: QArray) -> np.ndarray:
    """Exact float64 values P_i * (effective block scale) of a block QArray, in q's shape.

    The effective scale of each block is what the scheme's dequantize multiplies an element of value 1 by
    (E8M0: 2^(byte - 127); NVFP4: the E4M3 scale times the global-scale factor of the scheme's rule), so the
    values are those of the scheme's dequantize without its final rounding."""
    sch: Any = q.scheme
    if getattr(sch, "family", None) != "block" or getattr(sch, "kind", None) not in ("mx", "float_scale"):
        raise QrefError("block_dot / block_matmul take MX or float-scaled (NVFP4) block QArrays from "
                        "qref.scheme('mxfp8' | 'mxfp4' | 'nvfp4' | ...)")
    elem = sch.element
    one = np.asarray(Fraction(1) / Fraction(2) ** sch.element_scale_exp)
    one_code = encode(np.asarray(float(one)), elem)
    if decode(one_code, elem, dtype=np.float64) * 2.0**sch.element_scale_exp != 1.0:  # pragma: no cover
        raise QrefError(f"element format {elem.name} cannot represent 1; cannot read block scales")
    unit = QArray(codes=np.full(q.codes.shape, one_code, dtype=q.codes.dtype), scheme=sch, scales=q.scales,
                  global_scale=q.global_scale, axis=q.axis, meta=dict(q.meta))
    fs = sch.dequantize(unit, dtype=np.float64)
    p = decode(q.codes, elem, dtype=np.float64) * 2.0**sch.element_scale_exp
    with np.errstate(invalid="ignore", over="ignore"):
        return p * fs


def _kn(q: QArray, side: str) -> tuple[np.ndarray, int]:
    """(values as (M, K) for the left operand or (K, N) for the right, block size)."""
    v = _block_values(q)
    if q.codes.ndim != 2 or q.axis is None:
        raise QrefError(f"{side} operand: block_matmul takes 2-D QArrays quantized along the contraction axis")
    k = int(q.scheme.block_size)  # type: ignore[attr-defined]
    if side == "lhs":
        if q.axis != 1:
            raise QrefError("lhs QArray must be quantized along axis 1 (shape (M, K), blocks along K)")
        return v, k
    if q.axis == 0:
        return v, k
    return v.T, k  # (N, K) quantized along K: the transposed layout


def block_matmul(a: QArray, b: QArray, *, accumulation: Accumulation | str | None = None,
                 out_dtype: str = "float32") -> MatmulResult:
    """DotGeneral of two block-scaled QArrays (OCP MX v1.0 §6.2): sum over blocks of X_A X_B sum_i P_i^A P_i^B.

    a: (M, K) quantized along axis 1; b: (K, N) quantized along axis 0, or (N, K) quantized along axis 1 (the
    transposed layout, as MLX and cuBLAS store weights). Both need the same block size with blocks aligned on
    K. accumulation: default order "any" in float32 (OCP leaves order and precision implementation-defined);
    "blocked" with block=None uses the block size (block dots, then their sum); a block-scaled matrix-unit
    instruction computes it as that unit does (mma.md §7.2 C3). A NaN scale or element makes the result NaN.
    The exact result is sum_k (P_k X) (Q_k Y); the bound covers every accumulation order."""
    va, ka = _kn(a, "lhs")
    vb, kb = _kn(b, "rhs")
    if ka != kb:
        raise QrefError(f"block sizes differ ({ka} and {kb}); OCP MX §6.2 needs aligned blocks of the same size")
    if va.shape[1] != vb.shape[0]:
        raise QrefError(f"contraction lengths differ: {va.shape[1]} and {vb.shape[0]}")
    mma_acc = _mma_accumulation(accumulation)
    if mma_acc is not None:  # a block-scaled matrix-unit instruction (mma.md §7.2)
        return _block_mma(a, b, va, vb, ka, out_dtype, mma_acc)
    acc = _as_accumulation(accumulation)
    if acc.order == "blocked" and acc.block is None:  # pragma: no cover - Accumulation validates block
        acc = Accumulation("blocked", acc.dtype, ka, acc.products, acc.ftz)
    return exact_matmul(va, vb, accumulation=acc, out_dtype=out_dtype, meta={"block_size": ka})


def _block_mma(a: QArray, b: QArray, va: np.ndarray, vb: np.ndarray, k: int, out_dtype: str, mma_acc: Any
               ) -> MatmulResult:
    """block_matmul with a block-scaled instruction: element codes and E8M0 scale bytes go to the unit as they
    are (mma.md §7.2 C3); the result is rounded to out_dtype."""
    ins = mma_acc.instruction
    for q, nm in ((a, "lhs"), (b, "rhs")):
        sch: Any = q.scheme
        if sch.kind != "mx" or sch.element_scale_exp != 0 or q.global_scale is not None:
            raise QrefError(f"{nm}: an MMA instruction takes MX block QArrays (E8M0 scales, no global scale)")
    if not ins.scaled or ins.block_size != k or ins.scale_format != "float8_e8m0fnu":
        raise QrefError(f"{ins.name}: block_matmul needs a block-scaled instruction with ue8m0 scales per {k}")
    fa, fb = a.scheme.element.name, b.scheme.element.name  # type: ignore[attr-defined]
    _check_mma_formats(mma_acc, fa, fb)
    bc, bs = (b.codes, b.scales) if b.axis == 0 else (b.codes.T, np.asarray(b.scales).T)
    d = mma_acc.run(a.codes, bc, np.asarray(a.scales), bs)
    return _mma_result(va, vb, d, None, out_dtype, mma_acc, {"block_size": k})


def block_dot(a: QArray, b: QArray, *, accumulation: Accumulation | str | None = None,
              out_dtype: str = "float32") -> MatmulResult:
    """Dot(A, B) of two 1-D block QArrays of the same length (OCP MX v1.0 §6.1); a result of shape ()."""
    if a.codes.ndim != 1 or b.codes.ndim != 1:
        raise QrefError("block_dot takes 1-D QArrays; use block_matmul for matrices")
    va = _block_values(a)[None, :]
    vb = _block_values(b)[:, None]
    if a.scheme.block_size != b.scheme.block_size:  # type: ignore[attr-defined]
        raise QrefError("block sizes differ; OCP MX §6.1 needs blocks of the same size")
    if va.shape[1] != vb.shape[0]:
        raise QrefError(f"lengths differ: {va.shape[1]} and {vb.shape[0]}")
    r = exact_matmul(va, vb, accumulation=accumulation, out_dtype=out_dtype)
    return MatmulResult(r.value.reshape(()), Dyadic(r.exact.num.reshape(()), r.exact.exp), r.special.reshape(()),
                        r.is_special.reshape(()), r.bound.reshape(()), r.unspecified.reshape(()), r.out_dtype,
                        r.meta)


# ---------------------------------------------------------------------------------------------------------
# jax.lax.scaled_dot on XLA:CPU (recipes.md §7.1)
# ---------------------------------------------------------------------------------------------------------
def _bf16() -> FloatFormat:
    f = get_format("bfloat16")
    assert isinstance(f, FloatFormat)
    return f


def _operand_values(x: object, fmt: str | Format | None, what: str) -> tuple[np.ndarray, Format]:
    """(float64 values, format) of an ml_dtypes array (or integer codes with an explicit format)."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu":
        if fmt is None:
            raise QrefError(f"{what}: integer codes need their format (pass {what}_format=...)")
        f = get_format(fmt)
        return decode(arr, f, dtype=np.float64), f
    try:
        f = get_format(arr.dtype.name)
    except QrefError:
        raise QrefError(f"{what}: expected an ml_dtypes low-precision array (float8_e4m3fn, float4_e2m1fn, "
                        f"float8_e8m0fnu, ...) or integer codes with a format, got dtype {arr.dtype}") from None
    return decode(arr.view(f.code_dtype), f, dtype=np.float64), f


def jax_scaled_dot(lhs: object, rhs: object, lhs_scale: object = None, rhs_scale: object = None, *,
                   preferred_element_type: str = "float32", lhs_format: str | None = None,
                   rhs_format: str | None = None, lhs_scale_format: str | None = None,
                   rhs_scale_format: str | None = None, ftz: bool = True) -> MatmulResult:
    """Emulation of jax.lax.scaled_dot on XLA:CPU (JAX 0.10.2, recipes.md §7.1).

    lhs (M, K) and rhs (K, N) are ml_dtypes arrays of the element format (or integer codes with
    lhs_format / rhs_format); lhs_scale (M, K / B) and rhs_scale (K / B, N) hold one scale per block of B
    consecutive K (E8M0 for MX, E4M3 for NVFP4). Block QArrays are accepted as lhs ((M, K), axis 1) and rhs
    ((K, N), axis 0) with the scales taken from them. XLA's decomposition: a = bf16(fl32(bf16(P) *
    bf16(X))), b likewise, y = dot(a, b) with bf16 x bf16 products accumulated to preferred_element_type
    (float32 default, or bfloat16) in an implementation-defined order. ftz (default True): XLA:CPU flushes
    subnormals (a scale byte 0 = 2^-127 becomes 0). The exact result is sum_k a_k b_k; the bound covers any
    order (depth K, and one more rounding for bfloat16 output)."""
    if isinstance(lhs, QArray) or isinstance(rhs, QArray):
        if not (isinstance(lhs, QArray) and isinstance(rhs, QArray)) or lhs_scale is not None or rhs_scale is not None:
            raise QrefError("pass two block QArrays (scales come from them) or four arrays")
        for q in (lhs, rhs):
            if q.global_scale is not None:
                raise QrefError("jax.lax.scaled_dot has no global scale; quantize without one (or fold it into "
                                "the result)")
        la, lb = lhs.scheme, rhs.scheme  # type: ignore[union-attr]
        lhs_v = decode(lhs.codes, la.element, dtype=np.float64)  # type: ignore[attr-defined]
        rhs_v = decode(rhs.codes, lb.element, dtype=np.float64)  # type: ignore[attr-defined]
        ls = decode(lhs.scales, la.scale_format, dtype=np.float64)  # type: ignore[attr-defined]
        rs = decode(rhs.scales, lb.scale_format, dtype=np.float64)  # type: ignore[attr-defined]
        if lhs.axis != 1 or rhs.axis != 0:
            raise QrefError("QArray operands: lhs (M, K) quantized along axis 1, rhs (K, N) along axis 0")
    else:
        lhs_v, _ = _operand_values(lhs, lhs_format, "lhs")
        rhs_v, _ = _operand_values(rhs, rhs_format, "rhs")
        if lhs_scale is None or rhs_scale is None:
            raise QrefError("jax_scaled_dot needs lhs_scale and rhs_scale")
        ls, _ = _operand_values(lhs_scale, lhs_scale_format, "lhs_scale")
        rs, _ = _operand_values(rhs_scale, rhs_scale_format, "rhs_scale")
    if lhs_v.ndim != 2 or rhs_v.ndim != 2 or lhs_v.shape[1] != rhs_v.shape[0]:
        raise QrefError(f"jax_scaled_dot takes (M, K) and (K, N) operands, got {lhs_v.shape} and {rhs_v.shape}")
    M, K = lhs_v.shape
    N = rhs_v.shape[1]
    if ls.shape[0] != M or rs.shape[1] != N or ls.shape[1] == 0 or K % ls.shape[1] or rs.shape[0] != ls.shape[1]:
        raise QrefError(f"scale shapes {ls.shape} and {rs.shape} do not match operands {lhs_v.shape}, "
                        f"{rhs_v.shape} (need (M, K/B) and (K/B, N))")
    B = K // ls.shape[1]
    bf, f32 = _bf16(), acc_format("float32")

    def combine(v: np.ndarray, s: np.ndarray) -> np.ndarray:
        vb = round_values(v, bf, ftz=ftz)
        sb = round_values(s, bf, ftz=ftz)
        with np.errstate(invalid="ignore", over="ignore"):
            return round_values(round_values(vb * sb, f32, ftz=ftz), bf, ftz=ftz)

    a = combine(lhs_v, np.repeat(ls, B, axis=1))
    b = combine(rhs_v, np.repeat(rs, B, axis=0))
    out = check_choice("preferred_element_type", preferred_element_type, ("float32", "bfloat16"))
    r = exact_matmul(a, b, accumulation=Accumulation("any", "float32", ftz=ftz), out_dtype=out)
    r.meta.update({"lhs_bf16": a, "rhs_bf16": b, "block_size": B})
    return r


# ---------------------------------------------------------------------------------------------------------
# MLX quantized_matmul and qqmm on CPU (recipes.md §7.2-7.3)
# ---------------------------------------------------------------------------------------------------------
MLX_DTYPES = ("float32", "float16", "bfloat16")
MLX_ORDERS = ("any", "mlx_cpu")


def _mlx_mode(q: QArray) -> tuple[str, int]:
    sch: Any = q.scheme
    kind = getattr(sch, "kind", None)
    if getattr(sch, "family", None) != "block":
        raise QrefError("mlx_quantized_matmul takes a block QArray (mxfp4, mxfp8_e4m3, nvfp4 or mlx_affine)")
    k = int(sch.block_size)
    if kind == "mx" and sch.element.name == "float4_e2m1fn" and k == 32:
        return "mxfp4", k
    if kind == "mx" and sch.element.name == "float8_e4m3fn" and k == 32:
        return "mxfp8", k
    if kind == "float_scale" and sch.element.name == "float4_e2m1fn" and k == 16 and \
            sch.scale_format.name == "float8_e4m3fn":
        if q.global_scale is not None:
            raise QrefError("MLX quantized_matmul takes no global scale: quantize nvfp4 without one")
        return "nvfp4", k
    if kind == "affine":
        return "affine", k
    raise QrefError(f"MLX has no quantized_matmul mode for {sch.name} with block size {k}")


def _mlx_scale_values(q: QArray, mode: str, T: FloatFormat) -> np.ndarray:
    """MLX's scales as T values: MX bytes b -> the bfloat16 with bits (b << 7) (b = 0: 2^-127, 255: +Inf),
    NVFP4 E4M3 bytes -> their value; then cast to T (recipes.md §7.2)."""
    s = np.asarray(q.scales)
    if mode in ("mxfp4", "mxfp8"):
        b = s.astype(np.int64)
        v = np.where(b == 255, np.inf, np.ldexp(1.0, np.where(b == 0, -127, b - 127)))
    elif mode == "nvfp4":
        v = decode(s.astype(np.uint8), "float8_e4m3fn", dtype=np.float64)
    else:
        v = f64(s)
    return round_values(v, T)


def _mlx_weights(q: QArray, mode: str, T: FloatFormat, transpose: bool) -> tuple[np.ndarray, ...]:
    """(element values or codes (N, K), per-element scale_T, per-element bias_T) laid out as (K, N)."""
    sch: Any = q.scheme
    codes = np.asarray(q.codes)
    if codes.ndim != 2:
        raise QrefError("the quantized weight must be a 2-D QArray")
    ax = q.axis if q.axis is not None else 1
    if ax != 1:
        raise QrefError("MLX quantizes along the last axis: the weight QArray must be quantized along axis 1")
    k = int(sch.block_size)
    sv = np.repeat(_mlx_scale_values(q, mode, T), k, axis=1)[:, :codes.shape[1]]
    if mode == "affine":
        e = codes.astype(np.float64)
        bv = np.repeat(round_values(f64(q.biases), T), k, axis=1)[:, :codes.shape[1]]
    else:
        e = decode(codes, sch.element, dtype=np.float64)
        bv = np.zeros_like(e)
    if transpose:  # w is (N, K): y = x @ w.T
        return e.T, sv.T, bv.T
    return e, sv, bv  # w is (K, N) with groups along N


def mlx_quantized_matmul(x: object, w: QArray, *, transpose: bool = True, order: str = "any") -> MatmulResult:
    """Emulation of mx.quantized_matmul(x, w_packed, scales[, biases], transpose, group_size, bits, mode) on
    the MLX 0.32 CPU backend (recipes.md §7.2).

    x: (M, K) float32 / float16 / bfloat16 (T); w: a block QArray of the weight, (N, K) quantized along axis 1
    for transpose=True (x @ w.T, the default) or (K, N) quantized along axis 1 (groups along N) for
    transpose=False; modes mxfp4, mxfp8 (E4M3), nvfp4 (without global scale) and affine. The exact result is
    sum_k x_k w_k with w_k = P_k * scale_T (affine: scale_T * q_k + bias_T), scale_T the scale cast to T as
    MLX does. order: "any" (value = correctly rounded; bound over MLX's CPU code paths: the scalar loops in T
    and the SIMD loops in float32 lanes) or "mlx_cpu" (the scalar fp loop bit for bit: per group gsum =
    fl_T(gsum + fl_T(x w)), then sum = fl_T(sum + fl_T(scale gsum)); fp modes only)."""
    check_choice("order", order, MLX_ORDERS)
    xv = np.asarray(x)
    T = acc_format(xv.dtype if xv.dtype.kind in "fV" else np.float64)
    if T.name not in MLX_DTYPES:
        raise QrefError(f"MLX quantized_matmul takes float32, float16 or bfloat16 inputs, got {T.name}")
    if xv.ndim != 2:
        raise QrefError(f"x must be 2-D (M, K), got shape {xv.shape}")
    mode, g = _mlx_mode(w)
    e, sv, bv = _mlx_weights(w, mode, T, transpose)
    K = e.shape[0]
    if xv.shape[1] != K:
        raise QrefError(f"x has {xv.shape[1]} columns but the weight contracts over {K}")
    x64 = f64(xv)
    r = 1 if T.name == "float32" else 2  # T ops of float16/bfloat16 run in float then round to T
    G = K // g if transpose else K
    if mode == "affine":
        wterm = sv * e
        terms_a, terms_b = [x64, x64], [wterm, bv]
        depth = max(2 + r + r * K, 3 + K + 16)
    else:
        terms_a, terms_b = [x64], [e * sv]
        depth = max(2 + r * (g + G), 3 + g + G + 16) if transpose else max(2 + r * K, 3 + K + 16)
    # exact result and special values
    wv = (sv * e + bv) if mode == "affine" else e * sv
    unspec = np.zeros((xv.shape[0], e.shape[1]), dtype=bool)
    nonfin_w = ~np.isfinite(sv) | ~np.isfinite(bv) | ~np.isfinite(e)
    if nonfin_w.any():
        unspec |= (np.ones_like(x64) @ nonfin_w.astype(np.float64)) > 0
    is_sp, sp = _special(x64, np.where(nonfin_w, 0.0, wv))
    ex = Dyadic.from_floats(np.zeros(unspec.shape))
    abs_sum = ex
    lsb = np.full(unspec.shape, BIG)
    inner: list[Level] = []
    for ta, tb in zip(terms_a, terms_b):
        tbf = np.where(nonfin_w, 0.0, tb)
        da, db = Dyadic.from_floats(ta), Dyadic.from_floats(tbf)
        ex = ex + da.matmul(db)
        abs_sum = abs_sum + da.abs().matmul(db.abs())
        lsb = np.minimum(lsb, _lsb_rows_cols(ta, tbf))
    if mode != "affine" and transpose:  # MLX sums x * P per group before scaling: those sums are a level too
        eb = np.where(nonfin_w, 0.0, e)
        Gn = K // g
        xg = x64.reshape(x64.shape[0], Gn, g).transpose(1, 0, 2)  # (G, M, g)
        egr = eb.reshape(Gn, g, eb.shape[1])  # (G, g, N)
        dxg, deg = Dyadic.from_floats(xg), Dyadic.from_floats(egr)
        gabs = dxg.abs().matmul(deg.abs())  # (G, M, N)
        glsb = np.minimum(lsb_exponent(xg).min(axis=-1, initial=BIG)[..., None]
                          + lsb_exponent(egr).min(axis=-2, initial=BIG)[..., None, :], BIG)
        inner.append(Level(Dyadic(np.moveaxis(gabs.num, 0, -1), gabs.exp), np.moveaxis(glsb, 0, -1)))
    bound, overflow = bound_from_terms([Level(abs_sum, lsb), *inner], T, depth, n_tiny=4 * K + 4)
    unspec |= overflow
    bound = np.where(is_sp, 0.0, bound)
    if order == "mlx_cpu":
        if mode == "affine":
            raise QrefError("order='mlx_cpu' reproduces the fp modes' scalar loop; affine takes order='any'")
        value = _mlx_fp_loop(x64, e, sv, T, g, transpose)
    else:
        value = np.where(is_sp, sp, ex.round(T))
    value = np.where(unspec & ~np.isfinite(value), np.nan, value)
    return MatmulResult(value.astype(np_dtype(T)), ex, sp, is_sp & ~unspec, np.where(unspec, np.inf, bound), unspec,
                        T.name, {"mode": mode, "group_size": g, "depth": depth, "transpose": transpose})


def _mlx_fp_loop(x: np.ndarray, e: np.ndarray, sv: np.ndarray, T: FloatFormat, g: int, transpose: bool
                 ) -> np.ndarray:
    """MLX CPU fp_qmm_t / fp_qmm scalar loops in T (every T op = one rounding of the float32 result to T)."""
    M, K = x.shape
    N = e.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        if transpose:
            total = np.zeros((M, N))
            for start in range(0, K, g):
                gsum = np.zeros((M, N))
                for k in range(start, start + g):
                    p = mul_round(x[:, k:k + 1], e[k:k + 1, :], T)
                    gsum = round_values(add_round(gsum, p, acc_format("float32")), T)
                t = mul_round(sv[start:start + 1, :], gsum, T)
                total = round_values(add_round(total, t, acc_format("float32")), T)
            return total
        total = np.zeros((M, N))
        for k in range(K):
            xs = mul_round(x[:, k:k + 1], sv[k:k + 1, :], T)
            t = mul_round(xs, e[k:k + 1, :], T)
            total = round_values(add_round(total, t, acc_format("float32")), T)
        return total


def _mlx_qqmm_quantize(x: np.ndarray, mode: str, T: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """MLX CPU qqmm's fp_quantize_dequantize of x (recipes.md §7.3): (xhat as float64 values in T, unspecified)."""
    M, K = x.shape
    g = 16 if mode == "nvfp4" else 32
    f32 = acc_format("float32")
    xg = x.reshape(M, K // g, g)
    nan = np.isnan(xg)
    with np.errstate(invalid="ignore"):
        am = np.where(nan, -np.inf, np.abs(xg)).max(axis=-1)  # std::max skips NaN
    M_el = 6.0 if mode in ("mxfp4", "nvfp4") else 448.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = round_values(am / M_el, f32)
    unspec = nan.any(axis=-1)
    if mode == "nvfp4":
        sc = decode(encode(np.where(np.isnan(s), 0.0, s), "float8_e4m3fn", rounding="nearest_even",
                           overflow="saturate"), "float8_e4m3fn", dtype=np.float64)
    else:
        fin = np.isfinite(s)
        pos = fin & (s > 0)
        n = np.zeros(s.shape, dtype=np.int64)
        if pos.any():
            n[pos] = _pow2_log_ratio(s[pos], Fraction(1), ceil=True)  # exact ceil(log2 s)
        n = np.clip(n, -127, 127)
        byte = np.where(~fin, 255, n + 127).astype(np.int64)
        sc = np.where(byte == 255, np.inf, np.ldexp(1.0, np.where(byte == 0, -127, byte - 127)))
    scb = np.repeat(sc, g, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w_el = np.where(scb == 0, 0.0, round_values(xg.reshape(M, K) / scb.reshape(M, K), f32)).reshape(M, K)
    if mode == "mxfp8":
        out = decode(encode(w_el, "float8_e4m3fn", rounding="nearest_even", overflow="saturate", nan="max"),
                     "float8_e4m3fn", dtype=np.float64)
    else:
        c = encode(np.abs(np.where(np.isnan(w_el), 0.0, w_el)), "float4_e2m1fn", rounding="nearest_even",
                   overflow="saturate")
        mag = decode(c, "float4_e2m1fn", dtype=np.float64)
        mag = np.where(np.isnan(w_el), 6.0, mag)  # to_fp4_e2m1(NaN) = 0x7 (+6)
        out = np.where(np.signbit(w_el) & ~np.isnan(w_el), -mag, mag)
    with np.errstate(invalid="ignore", over="ignore"):
        xhat = round_values(round_values(scb.reshape(M, K) * out, f32), T)
    return xhat, np.repeat(unspec, g, axis=-1).reshape(M, K)


def mlx_qqmm(x: object, w: QArray, *, order: str = "any") -> MatmulResult:
    """Emulation of mx.qqmm(x, w_packed, scales, mode=...) on the MLX 0.32.4 CPU backend (recipes.md §7.3).

    The CPU kernel takes a quantized weight and a single row x (1, K): it quantize-dequantizes x per group
    (amax over the group, NaN skipped; s = fl32(amax / 6 or 448); nvfp4: s = e4m3(s) saturating; mxfp8 /
    mxfp4: byte = clamp(ceil(log2 s), -127, 127) + 127 computed exactly (non-finite s: 255; s = 0: any byte,
    the group is zero); elements e4m3 (saturating RNE) or e2m1 (RNE, saturating) of fl32(x / X); xhat =
    fl_T(X * element)) and then runs quantized_matmul(xhat, w). Global scales are not used on CPU.
    meta["xhat"] holds the dequantized x; groups containing a NaN are unspecified (MLX maps NaN elements to
    +-max, which qref does not promise)."""
    xv = np.asarray(x)
    T = acc_format(xv.dtype if xv.dtype.kind in "fV" else np.float64)
    if T.name not in MLX_DTYPES:
        raise QrefError(f"qqmm takes float32, float16 or bfloat16 inputs, got {T.name}")
    if xv.ndim != 2 or xv.shape[0] != 1:
        raise QrefError(f"MLX's CPU qqmm supports a single row x of shape (1, K); got {xv.shape}")
    mode, g = _mlx_mode(w)
    if mode == "affine":
        raise QrefError("qqmm takes nvfp4, mxfp8 or mxfp4 weights, not affine")
    if xv.shape[1] % g:
        raise QrefError(f"K = {xv.shape[1]} is not a multiple of the group size {g}")
    xhat, unspec_x = _mlx_qqmm_quantize(f64(xv), mode, T)
    r = mlx_quantized_matmul(xhat.astype(np_dtype(T)), w, transpose=True, order=order)
    un = r.unspecified | (unspec_x.any(axis=1, keepdims=True) & np.ones(r.value.shape, dtype=bool))
    meta = dict(r.meta)
    meta["xhat"] = xhat.astype(np_dtype(T))
    meta["xhat_unspecified"] = unspec_x
    return MatmulResult(np.where(un, np.asarray(np.nan, dtype=r.value.dtype), r.value), r.exact, r.special,
                        r.is_special & ~un, np.where(un, np.inf, r.bound), un, r.out_dtype, meta)


__all__ = [
    "Accumulation",
    "MatmulResult",
    "block_dot",
    "block_matmul",
    "exact_matmul",
    "jax_scaled_dot",
    "mlx_qqmm",
    "mlx_quantized_matmul",
    "qdq_matmul",
]
