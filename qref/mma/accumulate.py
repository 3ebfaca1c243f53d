"""Accumulation orders of CPU GEMM kernels as frozen records (spec: mma.md §10).

A ``KernelAccumulation`` computes d = c + sum_k a_k b_k the way a CPU kernel's inner loop does: the products
are spread over ``lanes`` accumulators (term k into lane k mod L), each lane updated by a fused multiply-add or
by a rounded product and a rounded add in the ``accumulator`` format; the lanes are combined by a reduction
tree of a given shape; K may be cut into blocks of ``block`` terms whose partial sums are added, in order, into
a ``block_accumulator`` (a wider one is the promotion of a narrow accumulator every ``block`` products).
``order`` = "pairwise" sums the rounded products by an adjacent-pairs tree instead of lanes.

It is a matrix-unit arithmetic (``qref.mma.algorithms._Algorithm``) that consumes the whole K at once, so
``qref.mma.kernel(record, ...)`` makes it an ``Instruction`` accepted wherever a unit is (``qref.mma.matmul``,
``linear_step(..., mma=...)``, ``qdq_matmul(..., accumulation=...)``). One rounding core: every rounding is
``qref.core.arith``'s (``convert``, ``round_odd_sum``, ``fma64``). Vectorized over the outputs; the loop runs
over K steps only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.arith import convert, flush, fma64, round_odd_sum
from ..errors import QrefError, check_choice, unknown_name
from ..profiles.base import check_choices
from .algorithms import _Algorithm, _quiet
from .bits import OPERAND_FORMATS, storage_dtype
from .isa import Instruction

ACCUMULATORS = ("float16", "bfloat16", "float32", "float64")
PRODUCTS = ("fused", "rounded")
REDUCTIONS = ("sequential", "pairwise", "halving")
ORDERS = ("lanes", "pairwise")
SUBNORMALS = ("keep", "flush")
BLOCK_SPLITS = ("fixed", "halve_remainder", "halve_short")
_MIN_NORMAL = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126, "float64": 2.0**-1022}


def _dt(fmt: str) -> np.dtype:
    return storage_dtype(fmt)


def _values(x: np.ndarray, fmt: str) -> np.ndarray:
    """Operand values as float64 (exact: every operand format up to float64 widens exactly)."""
    if fmt == "tf32":
        x = (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.asarray(x).astype(np.float64)


@dataclass(frozen=True)
class KernelAccumulation(_Algorithm):
    """A CPU kernel's accumulation order (mma.md §10.1).

    lanes L: term k goes to lane k mod L; lane 0 starts at c (or at 0 inside blocks), the others at +0.
    products: "fused" lane = RN_acc(a_k b_k + lane) (FMA); "rounded" lane = RN_acc(lane + RN_acc(a_k b_k)).
    reduction: how the L lane sums become one: "sequential" ((l0 + l1) + l2) + ...; "pairwise" adjacent pairs
        level by level; "halving" l_i + l_(i + L/2) for i < L/2, repeated (a SIMD horizontal sum), each add
        RN_acc.
    block B: K is cut into blocks of B terms; each block is summed from zero (lanes + reduction) into P_b and
        out = RN_bacc(out + P_b) in block order, out starting at c (``block_accumulator`` bacc, default the
        accumulator; a wider one promotes the narrow accumulator every B products).
    block_split: "fixed" (blocks of B, the last one shorter) or "halve_remainder" (a remaining r with B < r < 2B
        is cut into ceil(h / u) u terms and the rest, h = ceil(r / 2) or floor(r / 2) (``block_half``),
        u = ``block_unroll``: a level-3 BLAS's K loop); "halve_short": only a whole K in (B, 2B) is halved.
    order: "lanes" (the above) or "pairwise" (products rounded to the accumulator, summed by an adjacent-pairs
        tree per block, c added last).
    subnormals: "flush" sets subnormal operands and every subnormal intermediate to a signed zero.
    zero_padding: the last group of L terms of each block is completed with +0 x +0 products, each going through
        its lane's update (a masked vector load of zeros): it only turns a lane holding -0 into +0.
    The result is RN_d(out) in the output format d.
    """

    accumulator: str = "float32"
    lanes: int = 1
    products: str = "fused"
    reduction: str = "sequential"
    block: int | None = None
    block_accumulator: str | None = None
    block_split: str = "fixed"
    block_unroll: int = 1
    block_half: str = "ceil"
    order: str = "lanes"
    subnormals: str = "keep"
    nan_output: str = "canonical"
    zero_padding: bool = False
    family: ClassVar[str] = "KERNEL"
    whole_k: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_choices({"accumulator": (self.accumulator, ACCUMULATORS), "products": (self.products, PRODUCTS),
                       "reduction": (self.reduction, REDUCTIONS), "order": (self.order, ORDERS),
                       "subnormals": (self.subnormals, SUBNORMALS), "block split": (self.block_split, BLOCK_SPLITS),
                       "block half": (self.block_half, ("ceil", "floor"))})
        if self.block_accumulator is not None:
            check_choice("block accumulator", self.block_accumulator, ACCUMULATORS)
        if not isinstance(self.lanes, int) or not 1 <= self.lanes <= 256:
            raise QrefError(f"KernelAccumulation: lanes must be an integer in [1, 256], got {self.lanes!r}")
        if self.reduction == "halving" and self.lanes & (self.lanes - 1):
            raise QrefError(f"KernelAccumulation: reduction 'halving' needs a power-of-two lane count, got "
                            f"{self.lanes}; use 'sequential' or 'pairwise'")
        if self.block is not None and (not isinstance(self.block, int) or self.block < 1):
            raise QrefError(f"KernelAccumulation: block must be a positive integer or None, got {self.block!r}")
        if not isinstance(self.block_unroll, int) or self.block_unroll < 1:
            raise QrefError(f"KernelAccumulation: block_unroll must be a positive integer, got {self.block_unroll!r}")
        if self.order == "pairwise" and (self.lanes != 1 or self.products != "rounded"):
            raise QrefError("KernelAccumulation: order 'pairwise' sums rounded products in one tree; give "
                            "lanes=1, products='rounded'")

    # -- one rounding core: qref.core.arith -------------------------------------------------------------
    def _rn(self, x: np.ndarray, fmt: str) -> np.ndarray:
        """RN_fmt(x) of float64 x, returned as float64 (flushed when subnormals = "flush")."""
        r = x if fmt == "float64" else convert(x, _dt(fmt)).astype(np.float64)
        return flush(r, _MIN_NORMAL[fmt]) if self.subnormals == "flush" else r

    def _add(self, x: np.ndarray, y: np.ndarray, fmt: str) -> np.ndarray:
        """RN_fmt(x + y) of float64 values exact in fmt: round-to-odd in float64, then one rounding."""
        return self._rn(x + y if fmt == "float64" else round_odd_sum(x, y), fmt)

    def _fma(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
        """RN_fmt(a b + c), one rounding (a b exact in float64 for operands up to float32)."""
        if fmt == "float64":
            return self._rn(fma64(a, b, c), fmt)
        return self._rn(round_odd_sum(a * b, c), fmt)

    def _reduce(self, lanes: list[np.ndarray], fmt: str) -> np.ndarray:
        if self.reduction == "sequential":
            s = lanes[0]
            for x in lanes[1:]:
                s = self._add(s, x, fmt)
            return s
        if self.reduction == "halving":
            while len(lanes) > 1:
                h = len(lanes) // 2
                lanes = [self._add(lanes[i], lanes[i + h], fmt) for i in range(h)]
            return lanes[0]
        return self._pairs(lanes, fmt)

    def _pairs(self, xs: list[np.ndarray], fmt: str) -> np.ndarray:
        while len(xs) > 1:
            nxt = [self._add(xs[i], xs[i + 1], fmt) for i in range(0, len(xs) - 1, 2)]
            if len(xs) % 2:
                nxt.append(xs[-1])
            xs = nxt
        return xs[0]

    def _block_sum(self, a: np.ndarray, b: np.ndarray, start: np.ndarray | None) -> np.ndarray:
        """The sum of one block's terms (a, b float64 (..., n)), lane 0 starting at ``start`` (else +0)."""
        fmt = self.accumulator
        n = a.shape[-1]
        shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
        if self.order == "pairwise":
            prods = [self._rn(a[..., k] * b[..., k], fmt) for k in range(n)]
            s = self._pairs([np.broadcast_to(p, shape) for p in prods], fmt)
            return s if start is None else self._add(start, s, fmt)
        L = min(self.lanes, max(n, 1))
        lanes = [np.zeros(shape) for _ in range(L)]
        if start is not None:
            lanes[0] = np.broadcast_to(start, shape).astype(np.float64)
        for k in range(n):
            j = k % L
            if self.products == "fused":
                lanes[j] = self._fma(a[..., k], b[..., k], lanes[j], fmt)
            else:
                lanes[j] = self._add(lanes[j], self._rn(a[..., k] * b[..., k], fmt), fmt)
        if self.zero_padding:  # RN(+0 x +0 + lane) = RN(lane + +0): -0 -> +0, every other value unchanged
            for j in range(n % L, L if n % L else 0):
                lanes[j] = self._add(lanes[j], np.zeros(shape), fmt)
        return self._reduce(lanes, fmt)

    @_quiet
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: str, fb: str, fc: str, fd: str,
            scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, fs: str | None = None
            ) -> np.ndarray:
        """d (...) = RN_d(c + sum_k a_k b_k) in this kernel's order (mma.md §10.2)."""
        for nm, f in (("a", fa), ("b", fb)):
            if f not in OPERAND_FORMATS or f in ("float8_e8m0fnu", "ue4m3"):
                raise QrefError(f"KernelAccumulation: operand {nm} format {f!r} is not a float element format")
        if fd not in ACCUMULATORS:
            raise QrefError(f"KernelAccumulation: output format {fd!r}; use one of {', '.join(ACCUMULATORS)}")
        av, bv = _values(a, fa), _values(b, fb)
        if self.subnormals == "flush":
            av, bv = flush(av, _MIN_NORMAL[self.accumulator]), flush(bv, _MIN_NORMAL[self.accumulator])
        cv = _values(c, fc)
        K = av.shape[-1]
        if self.block is None:
            out = self._block_sum(av, bv, self._rn(cv, self.accumulator))
            return convert(out, _dt(fd)) if fd != "float64" else out
        bacc = self.block_accumulator or self.accumulator
        out = np.broadcast_to(self._rn(cv, bacc), np.broadcast_shapes(av.shape[:-1], bv.shape[:-1])).copy()
        for i, j in self.blocks(K):
            P = self._block_sum(av[..., i:j], bv[..., i:j], None)
            out = self._add(out, self._rn(P, bacc), bacc)
        return convert(out, _dt(fd)) if fd != "float64" else out

    def blocks(self, K: int) -> list[tuple[int, int]]:
        """The K blocks [i, j) in order (mma.md §10.1 block_split)."""
        B = self.block or max(K, 1)
        out, i = [], 0
        while i < K:
            r = K - i
            u = self.block_unroll
            half = (r + 1) // 2 if self.block_half == "ceil" else r // 2
            halve = self.block_split == "halve_remainder" or (self.block_split == "halve_short" and i == 0)
            n = B if r >= 2 * B or not halve else r if r <= B else (half + u - 1) // u * u
            out.append((i, i + min(n, r)))
            i += min(n, r)
        return out

    def name(self) -> str:
        """A short mechanism name: e.g. 'fma x8 lanes halving, blocks of 256, float32'."""
        if self.order == "pairwise":
            s = "pairwise tree of rounded products"
        else:
            op = "fma" if self.products == "fused" else "mul+add"
            s = f"{op} x{self.lanes} lane" + ("s" if self.lanes > 1 else "")
            if self.lanes > 1:
                s += f" ({self.reduction} reduction)"
        if self.block:
            s += f", blocks of {self.block}"
            if self.block_split != "fixed":
                s += f" (a remainder in (B, 2B) halved ({self.block_half}), unroll {self.block_unroll})"
            s += f" summed in {self.block_accumulator or self.accumulator}"
        s += f", {self.accumulator} accumulator"
        if self.subnormals == "flush":
            s += ", subnormals flushed"
        return s


def kernel(record: KernelAccumulation, a_format: str = "float32", b_format: str | None = None,
           d_format: str = "float32", name: str | None = None) -> Instruction:
    """``record`` as an ``Instruction`` (m = n = k = 1, the whole K per call: mma.md §10.3), accepted wherever a
    unit is: ``qref.mma.matmul(A, B, instruction=kernel(r))``, ``linear_step(..., mma=kernel(r, 'bfloat16'))``,
    ``qdq_matmul(..., accumulation=kernel(r, 'float8_e4m3fn'))``."""
    if not isinstance(record, KernelAccumulation):
        raise QrefError(f"kernel() takes a KernelAccumulation, got {type(record).__name__}")
    b_format = b_format or a_format
    for nm, f in (("a_format", a_format), ("b_format", b_format)):
        if f not in OPERAND_FORMATS:
            raise unknown_name(nm, f, OPERAND_FORMATS)
    if d_format not in ACCUMULATORS:
        raise unknown_name("d_format", d_format, ACCUMULATORS)
    return Instruction("custom", "kernel", name or record.name(), 1, 1, 1, a_format, b_format, d_format, d_format,
                       record, source="qref.mma.accumulate (mma.md §10)", status="spec", evidence=())


__all__ = ["ACCUMULATORS", "ORDERS", "PRODUCTS", "REDUCTIONS", "SUBNORMALS", "KernelAccumulation", "kernel"]
