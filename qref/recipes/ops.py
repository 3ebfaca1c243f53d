"""Reference ops with explicit numerics (spec: docs/spec/recipes.md §2, §5-§7).

Every op here computes a sum of exactly known terms T_j (products of decoded elements, scales and inputs) and
returns a ``MatmulResult``:

- ``value``: the declared computation (``Accumulation``: "exact" = correctly rounded, "sequential", "pairwise",
  "blocked", or "any" = implementation-defined order, whose representative value is the correctly rounded one);
- ``exact``: the exact result (``Dyadic``), ``special``: NaN / +-Inf where the exact IEEE result is not finite;
- ``bound``: a rigorous bound on |computed - exact| for every computation the declared model allows (zero
  where every rounding is provably exact), derived in recipes.md §2.3;
- ``unspecified``: results the model does not define (possible overflow, libm-dependent steps).

``within(backend)`` / ``check(backend)`` compare a backend's output against that contract exactly. The
emulations of specific libraries built on these ops are their own modules: xla_cpu.py (``jax_scaled_dot``) and
mlx_cpu.py (``mlx_quantized_matmul``, ``mlx_qqmm``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import add_round, f64, np_dtype, round_values
from ..core.decode import decode
from ..core.encode import encode
from ..errors import QrefError, check_choice
from ..formats import FloatFormat, get_format
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
from .scaling import DIVISIONS, current_scale, scaled_quantize

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
    dequantize; recipes.md §3.3): the exact result is then s * sum_k a_k b_k and the bound covers that extra
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


__all__ = ["Accumulation", "MatmulResult", "block_dot", "block_matmul", "exact_matmul", "qdq_matmul"]
