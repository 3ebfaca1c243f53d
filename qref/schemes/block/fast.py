"""Fast paths of the block quantizers (spec: block.md §4.10, §5.5; performance notes: docs/performance.md).

The readable reference (mx_reference.quantize_mx_reference, nvfp4_reference.quantize_float_scaled_reference
and the two dequantize references) stays the definition; this module imports it, never the reverse, and
mx.py / nvfp4.py dispatch. A fast path runs only for configurations where it computes the same function, and
inside them only for the blocks where its shortcuts are exact; it hands every other block back (``slow``) and
the dispatcher recomputes it with the reference (rows are independent). tests/test_block_fastpath.py checks
fast == reference, exhaustively where the domain allows it.

Shortcuts (each one's exactness condition is in the docstring of the function that uses it):
- amax on bit patterns (Workspace.amax_bits): for non-NaN IEEE values |x| orders like the unsigned integer
  (bits << 1), so a block's maximum is one integer max-reduction; NaN and Inf blocks show up as maxima >= the
  Inf pattern and go to the reference.
- scale exponents from the bits of amax (floor_ceil_log2, fast_scale_exponent), per chunk of blocks, int32.
- power-of-two scaling in float32: y = x * 2^-e_div, one IEEE multiplication (mx_plan says when it equals the
  reference's y or encodes like it).
- elements through a code table indexed by the float32 bits of y: the code depends only on the bits above the
  element's rounding bit and on whether the bits below are all zero (sticky_low), so
  key = 2 * (bits >> low) + [bits mod 2^low != 0] indexes a 2^(33 - low)-entry table built by the reference
  element step itself (sticky_key computes key with four integer operations).
- 16-bit inputs: the code is a function of (divisor exponent or scale code, 16-bit pattern); RowTable holds one
  65536-entry row per parameter, built on first use by the float32 route, so each element costs one addition
  and one gather.
- dequantize: every rule maps (scale code, element code) to a value; the reference on the full grid is a table.

``FAST_PATH = False`` (module global) switches every fast path off (benchmarks, debugging).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...core import arith as fp
from ...core.decode import decode, target_format
from ...core.encode import CHUNK, take_via
from ...core.parallel import scratch
from ...formats import FloatFormat, IntFormat
from ...formats.block import BlockFormat
from ...profiles.block import FloatScaleRules, KindRules, MXRules, ScaledRules
from .mx_reference import (
    _scale_exponent,
    apply_zero_sign,
    element_policy,
    encode_elements,
    encode_exact_shifted,
    mx_block_scales,
    mx_row_flags,
)
from .nvfp4_reference import encode_scale, nvidia_block_scales, torchao_block_scales

FAST_PATH = True

U16, U32 = np.dtype(np.uint16), np.dtype(np.uint32)
_INF2 = {fp.F32: np.uint32(0xFF000000), fp.F16: np.uint16(0xF800), fp.BF16: np.uint16(0xFF00)}  # Inf bits << 1
_NEAREST = ("nearest_even", "nearest_away", "nearest_toward_zero", "ml_dtypes")


# ---------------------------------------------------------------------------------------------------------
# bit-level helpers
# ---------------------------------------------------------------------------------------------------------
ELEMENT_CHUNK = CHUNK  # elements per inner chunk: the buffers (4 bytes per element each) stay in L2


def rows_per_chunk(k: int) -> int:
    return max(1, ELEMENT_CHUNK // max(k, 1))


BLOCK_CHUNK = 16384  # blocks per outer chunk: per-block temporaries stay at or below 64 KiB


def block_chunks(nb: int, k: int) -> list[tuple[int, int]]:
    """[b0, b1) ranges of at most BLOCK_CHUNK blocks and about 2^18 elements.

    Small temporaries matter: arrays of 128 KiB and more are mapped fresh from the OS by malloc and pay a page
    fault per 4 KiB on first touch, which costs more than the arithmetic on them."""
    B = max(1, min(BLOCK_CHUNK, (1 << 18) // max(k, 1)))
    return [(b0, min(nb, b0 + B)) for b0 in range(0, nb, B)]


class Workspace:
    """Buffers reused by every chunk of a call, and kept for the thread across calls (parallel.scratch):
    (bits << 1) for the amax, scaled values y, keys."""

    def __init__(self, xb: np.ndarray, k: int) -> None:
        self.k = k
        self.R = rows_per_chunk(k)
        n = min(xb.shape[0], self.R) * k
        self.ut = U32 if xb.dtype.itemsize == 4 else U16
        self.shift = scratch("block.shift", n, self.ut)
        self.half = scratch("block.half", n // 2 + 1, self.ut)
        self.y = scratch("block.y", n, np.float32)
        self.keys = scratch("block.keys", n, U32)
        self.idx = scratch("block.idx", n, np.intp)
        self.starts = np.arange(0, n, k)

    def rows(self, b0: int, b1: int) -> list[tuple[int, int]]:
        return [(r0, min(b1, r0 + self.R)) for r0 in range(b0, b1, self.R)]

    def amax_bits(self, xc: np.ndarray) -> np.ndarray:
        """Per row of a chunk xc (float32 / float16 / bfloat16, shape (rows, k)): max of (bits << 1), unsigned
        of the same width (a new small array).

        (bits << 1) drops the sign; for non-NaN values it orders like |x| (IEEE magnitudes are monotone in their
        bit patterns), so (max >> 1) is the bit pattern of max |x|. A row holding NaN has a maximum above the
        Inf pattern (Inf << 1), a row with Inf and no NaN exactly that pattern. The row maximum is a reduceat,
        or for 16-bit patterns and blocks shorter than 32 (where reduceat's cost per segment dominates) a
        pairwise tree over even / odd positions: log2(k) elementwise maxima."""
        k = self.k
        out = np.empty(xc.shape[0], dtype=self.ut)
        bits = xc.view(self.ut)
        one = self.ut.type(1)
        tree = k > 1 and (k & (k - 1)) == 0 and (self.ut.itemsize == 2 or k < 32)
        for r0, r1 in self.rows(0, xc.shape[0]):
            n = (r1 - r0) * k
            t = self.shift[:n]
            np.left_shift(bits[r0:r1].reshape(-1), one, out=t)
            if not tree:
                # no out=: numpy 2.4's reduceat holds the GIL with an out argument (performance.md §6.3.2)
                out[r0:r1] = np.maximum.reduceat(t, self.starts[: r1 - r0])
                continue
            src, spare = t, self.half
            while n > 2 * (r1 - r0):  # ping-pong between two buffers (no overlapping operands)
                n //= 2
                np.maximum(src[0:2 * n:2], src[1:2 * n:2], out=spare[:n])
                src, spare = spare, src
            np.maximum(src[0:n:2], src[1:n:2], out=out[r0:r1])
        return out

    def scaled(self, xr: np.ndarray, p: np.ndarray) -> np.ndarray:
        """fl32(x * p) for rows xr (any of the three dtypes, widened exactly) and per-row factors p."""
        y = self.y[: xr.size]
        np.multiply(to_float32(xr), p[:, None], out=y.reshape(xr.shape))
        return y

    def key(self, n: int) -> np.ndarray:
        return self.keys[:n]


def to_float32(x: np.ndarray) -> np.ndarray:
    """float16 / bfloat16 / float32 values as float32 (exact)."""
    if x.dtype == fp.F32:
        return x
    if x.dtype == fp.BF16:  # bfloat16 is the top half of float32
        return (x.view(U16).astype(U32) << U32.type(16)).view(np.float32)
    return x.astype(np.float32)


def round_float32_to(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Non-NaN float32 values rounded to float16 / bfloat16 by nearest-even, as the 16-bit patterns.

    bfloat16: the classic integer rounding (u + 0x7FFF + bit 16 of u) >> 16, which is round-to-nearest-even at
    bit 16 for every non-NaN pattern (bfloat16 shares float32's exponent range, so subnormals and overflow to
    Inf follow from the carry). float16: numpy's IEEE conversion (checked on every float16 x 2^e in the tests)."""
    if dtype == fp.F16:
        with np.errstate(over="ignore"):
            return y.astype(np.float16).view(U16)
    u = y.view(U32)
    r = (u >> U32.type(16)) & U32.type(1)
    r += U32.type(0x7FFF)
    r += u
    return (r >> U32.type(16)).astype(U16)


def pow2_float32(e: np.ndarray) -> np.ndarray:
    """2^e as float32 for integer e in [-126, 127] (normal range: the bit pattern (e + 127) << 23)."""
    return ((np.asarray(e) + 127).astype(U32) << U32.type(23)).view(np.float32)


def sticky_key(yb: np.ndarray, low: int, out: np.ndarray) -> np.ndarray:
    """key = 2 * (yb >> low) + [yb mod 2^low != 0] for uint32 patterns yb, into ``out`` (uint32).

    With m = 2^(low-1) - 1, t = (yb & m) + m is at most 2m < 2^low and has bit low-1 set exactly when
    yb & m != 0; so (yb | t) >> (low - 1) = 2 * (yb >> low) + (bit low-1 of yb OR [yb & m != 0])."""
    m = U32.type((1 << (low - 1)) - 1)
    np.bitwise_and(yb, m, out=out)
    out += m
    np.bitwise_or(out, yb, out=out)
    np.right_shift(out, U32.type(low - 1), out=out)
    return out


def key_representatives(low: int) -> np.ndarray:
    """One float32 value per key: (key >> 1) << low, plus 1 in the lowest bit for sticky keys."""
    key = np.arange(1 << (33 - low), dtype=np.uint64)
    bits = ((key >> np.uint64(1)) << np.uint64(low)) | (key & np.uint64(1))
    return bits.astype(U32).view(np.float32)


def sticky_low(rules: ScaledRules, f: BlockFormat) -> int | None:
    """The number of low float32 bits of y that act only as a sticky bit for the element step, or None.

    A float element with M mantissa bits rounds y (exponent E) at the quantum 2^q, q = max(E, qmin + M) - M
    >= E - M, so its rounding bit 2^(q-1) sits at float32 bit q - 1 - (E - 23) >= 22 - M of a normal y, and at
    bit q - 1 + 149 >= qmin + 148 of a subnormal one (element_scale_exp shifts the subnormal case). An integer
    element (saturating) rounds at 2^-1: for |y'| < 2^(Emax + 1), Emax = floor(log2 max|code|), that is bit
    22 - E >= 22 - Emax; larger values saturate whatever the low bits. Bits below the rounding bit only
    decide ties and directed rounding through 'any bit set', which the sticky flag keeps."""
    fmt, ses = f.element, f.element_scale_exp
    if isinstance(fmt, FloatFormat):
        if not fmt.zero:
            return None
        low = min(22 - fmt.mantissa_bits, fmt.qmin + ses + 148)
    elif isinstance(fmt, IntFormat):
        if rules.overflow != "saturate":
            return None
        emax = max(fmt.hi, -fmt.lo).bit_length() - 1
        low = min(22 - emax, ses + 148)
    else:  # pragma: no cover - BlockScheme validates the element
        return None
    low = min(low, 23)
    return low if low >= 14 else None  # tables of at most 2^19 entries


def _underflow_safe(rules: ScaledRules, f: BlockFormat) -> bool:
    """Exact scaling (compute_dtype 'exact') may be replaced by a float32 product that rounds tiny results
    (|y| < 2^-126) when every such y encodes to a signed zero either way: nearest rounding and a half element
    quantum above 2^-126. Then fl32(y) (a zero of y's sign, or a value of magnitude <= 2^-126) and y give the
    same code."""
    fmt = f.element
    if rules.rounding not in _NEAREST:
        return False
    qmin = fmt.qmin if isinstance(fmt, FloatFormat) else 0
    return qmin + f.element_scale_exp - 1 > -126


def floor_ceil_log2(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(floor(log2 v), ceil(log2 v)) of positive finite float32 / float16 / bfloat16 values, exactly.

    On the float32 bits (16-bit values widen exactly): a normal v = (1 + f 2^-23) 2^(E - 127) has floor E - 127
    and ceil one more unless f = 0; the rare float32 subnormals use frexp (exact: v = m 2^ex, m in [0.5, 1),
    floor = ex - 1, ceil = floor + [m != 0.5])."""
    u = to_float32(np.ascontiguousarray(v)).view(U32)
    fl = (u >> U32.type(23)).astype(np.int32) - 127
    ce = fl + ((u & U32.type(0x7FFFFF)) != 0)
    sub = u < U32.type(0x800000)
    if sub.any():
        m, ex = np.frexp(u[sub].view(np.float32))
        fl[sub] = ex - 1
        ce[sub] = ex - 1 + (m != 0.5)
    return fl, ce


@lru_cache(maxsize=256)
def element_constants(f: BlockFormat) -> tuple[float, int]:
    """(element maximum as a float, its emax): BlockFormat computes them as Fractions on every access."""
    return float(f.element_max), f.element_emax


def fast_scale_exponent(rules: MXRules, f: BlockFormat, amax: np.ndarray, C: np.dtype | None, ftz: bool
                        ) -> tuple[np.ndarray, np.ndarray]:
    """mx_reference._scale_exponent for finite amax >= 0, with native float arithmetic where it is exact.

    floor / ceil: floor_ceil_log2. rceil with a compute dtype: r = fl_C(amax / M) by one IEEE division in C
    (float32: correctly rounded; float16 / bfloat16: numpy and ml_dtypes divide in float32 and round once more,
    which is innocuous as 24 >= 2p + 2 for p = 11 and 8 bits), or r = fl_C(amax * fl(1/M)) for float32 and
    float16 (the product of two float16 values is exact in float32); then ceil(log2 r). Every other rule (and
    the float reciprocal in bfloat16, whose float32 constant would round twice, and tiny_quotient) runs the
    reference."""
    rule = rules.scale_rule
    M, emax = element_constants(f)
    if ftz or amax.dtype not in (fp.F32, fp.F16, fp.BF16) or rules.tiny_quotient != "keep":
        return _scale_exponent(rules, f, amax, C, ftz)
    if rule in ("floor", "ceil"):
        zero = amax == 0
        fl, ce = floor_ceil_log2(np.where(zero, np.ones((), amax.dtype), amax))
        return np.where(zero, 0, (fl if rule == "floor" else ce) - emax), zero
    if rule == "rceil" and C is not None and amax.dtype == C and float(np.asarray(M, dtype=C)) == M:
        if rules.quotient_arith == "divide":
            r = np.divide(amax, np.asarray(M, dtype=C))
        elif C in (fp.F32, fp.F16):  # the constant is rounded to C itself here (block.md §4.2)
            r = np.multiply(amax, fp.round_to(np.float64(1 / M), C))
        else:
            return _scale_exponent(rules, f, amax, C, ftz)
        zero = r == 0
        return np.where(zero, 0, floor_ceil_log2(np.where(zero, np.ones((), C), r))[1]), zero
    return _scale_exponent(rules, f, amax, C, ftz)


def finite_block_scales(rules: MXRules, f: BlockFormat, amax: np.ndarray, C: np.dtype | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(byte, e_div, scale_nan, rows_unspec, scales_unspec) of blocks without NaN or Inf: the reference's own
    mx_block_scales and mx_row_flags (every rule of block.md §4.2-4.6 written once there) on the fast scale
    exponent."""
    none = np.zeros(amax.shape[0], dtype=bool)
    sc = mx_block_scales(rules, f, amax, none, none, C, False, fast_scale_exponent)
    rows, scales_unspec = mx_row_flags(rules, f, sc)
    return sc.byte, sc.e_div, sc.scale_nan, rows, scales_unspec


# ---------------------------------------------------------------------------------------------------------
# MX (block.md §4.10)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)  # hashed by identity (plans are cached)
class MXPlan:
    """How the fast MX path runs a (scheme, input dtype): mode "f32" (y = fl32(x * 2^-e_div), key table) or
    "t16" (y rounded to the 16-bit compute dtype, 65536-entry table); e_lo..e_hi the divisor exponents whose
    scaling is exact in the compute dtype; y_limit the largest per-block fl32(amax * 2^-e_div) the table
    covers (Inf: no limit)."""

    C: np.dtype | None
    mode: str
    low: int
    table: np.ndarray
    e_lo: int
    e_hi: int
    y_limit: float
    src: np.dtype

    def codes_of(self, y: np.ndarray, out: np.ndarray, keys: np.ndarray, idx: np.ndarray | None = None
                 ) -> np.ndarray:
        """Element codes of float32 scaled values y (this plan's table step), into ``out``."""
        key = sticky_key(y.view(U32), self.low, keys[: y.size]) if self.mode == "f32" else \
            round_float32_to(y, self.C)
        return take_via(self.table, key, out, idx)


class RowTable:
    """Codes of every 16-bit input pattern x under each of n per-block parameters, built row by row on first
    use: row i holds fn(i, x32) for the 65536 patterns x (x32: their exact float32 values). A 16-bit input
    then costs one index addition and one gather per element, codes = rows[i * 65536 + x], which is the same
    function as fn, tabulated."""

    def __init__(self, n: int, src: np.dtype, code_dtype: np.dtype,
                 fn: Callable[[int, np.ndarray, np.ndarray], None]) -> None:
        self.rows = np.empty(n << 16, dtype=code_dtype)  # untouched pages cost no memory
        self.built = np.zeros(n, dtype=bool)
        self.x32 = to_float32(np.arange(1 << 16, dtype=np.uint16).view(src))
        self.fn = fn
        self.lock = threading.Lock()  # chunks on the thread pool share the table (elements.md §2.11)

    def ensure(self, used: np.ndarray) -> None:
        """Build the rows listed in ``used`` (row numbers). One thread at a time: fn may use a shared scratch
        buffer, and a row is read only once it is marked built, after it is complete."""
        need = np.zeros(self.built.size, dtype=bool)
        need[used] = True
        with self.lock, np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            need &= ~self.built
            for i in np.flatnonzero(need):
                self.fn(int(i), self.x32, self.rows[i << 16:(i + 1) << 16])
            self.built |= need

    def gather(self, x16: np.ndarray, row: np.ndarray, idx: np.ndarray, out: np.ndarray) -> np.ndarray:
        """rows[row[i] * 65536 + x16[i, j]] for a (r, k) block of 16-bit patterns and per-row row numbers."""
        base = row.astype(np.intp) << 16
        np.add(x16.view(U16), base[:, None], out=idx.reshape(x16.shape))
        return np.take(self.rows, idx, out=out, mode="wrap")  # every index is below the table size


@lru_cache(maxsize=8)  # at most 8 x 16.6 MB even if every row of every plan gets built
def mx_rows16(plan: MXPlan) -> RowTable:
    """Row i: plan.codes_of(fl32(x * 2^-(e_lo + i))) (every 16-bit x; the divisor exponent e_lo + i)."""
    keys = np.empty(1 << 16, dtype=U32)

    def fn(i: int, x32: np.ndarray, out: np.ndarray) -> None:
        plan.codes_of(x32 * pow2_float32(np.array([-(i + plan.e_lo)]))[0], out, keys)

    return RowTable(plan.e_hi - plan.e_lo + 1, plan.src, plan.table.dtype, fn)


def _pow2_exact_range(rules: MXRules, f: BlockFormat, C: np.dtype) -> tuple[int, int]:
    """The exponents e with fl_C(2^e) = 2^e (and fl_C(1 / 2^e) = 2^-e for scale_arith 'reciprocal') and 2^-e a
    normal float32: there x / fl_C(2^e) and x * fl_C(1/2^e) are both fl_C(x * 2^-e)."""
    e = np.arange(-200, 201)
    ok = fp.pow2(e, C).astype(np.float64) == fp.pow2(e, None)
    if rules.scale_arith == "reciprocal":
        ok &= fp.pow2(-e, C).astype(np.float64) == fp.pow2(-e, None)
    ok &= (e >= -126) & (e <= 126)
    good = e[ok]
    assert good.size and (np.diff(good) == 1).all()  # an interval
    return int(good[0]), int(good[-1])


@lru_cache(maxsize=64)
def mx_plan(rules: MXRules, f: BlockFormat, dtype: np.dtype) -> MXPlan | None:
    """The fast plan for MX scheme ``s`` on inputs of ``dtype``, or None where only the reference applies.

    Covered: float32 / float16 / bfloat16 inputs; compute dtype 'exact' (then y = fl32(x * 2^-e_div) stands for
    the exact x * 2^-e_div: equal when no tiny result is rounded, and otherwise the same code by
    _underflow_safe; the reference's exact path does not apply lut_argmin), float32 (y is the reference's
    fl32(x / 2^e_div) itself), or the input's own 16-bit dtype. Not covered: flush_subnormals,
    flush_subnormal_blocks, the scaled-integer element step on float32 (§4.7.1), other dtype pairs,
    scaled_zero_positive with exact scaling."""
    if not isinstance(rules, MXRules) or (
            rules.flush_subnormals or rules.flush_subnormal_blocks or rules.byte0_divisor == "folded_stand_in"
            or dtype not in (fp.F32, fp.F16, fp.BF16)):
        return None
    C = fp.resolve_compute_dtype(rules.compute_dtype, dtype)
    if C is None or C == fp.F32:
        if rules.element_exponent != "exact" or rules.round_arith != "exact":
            return None  # the scaled-integer step (block.md §4.7.1) reads more of y than its rounding bits
        low = sticky_low(rules, f)
        if low is None:
            return None
        reps = key_representatives(low)
        if C is None:
            if not _underflow_safe(rules, f) or rules.zero_sign == "scaled_zero_positive":
                return None
            with np.errstate(invalid="ignore", over="ignore"):
                table = encode_exact_shifted(reps, np.full(reps.size, -f.element_scale_exp, dtype=np.int64),
                                             f.element, element_policy(rules, f))
            table = apply_zero_sign(rules, f, table.astype(f.element.code_dtype))
            limit = float(fp.FLT_MAX)  # fl32(amax * p) must stay finite: exact y is never Inf
            e_lo, e_hi = -126, 126
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                table, _ = encode_elements(rules, f, reps)
            limit = lut_table_limit(rules, f)
            e_lo, e_hi = _pow2_exact_range(rules, f, C)
        mode = "f32"
    elif dtype == C:
        low = 0
        vals = np.arange(1 << 16, dtype=np.uint16).view(C)
        with np.errstate(invalid="ignore", over="ignore"):
            table, _ = encode_elements(rules, f, vals)
        limit = np.inf
        e_lo, e_hi = _pow2_exact_range(rules, f, C)
        mode = "t16"
    else:
        return None
    table = np.ascontiguousarray(table, dtype=f.element.code_dtype)
    table.setflags(write=False)
    return MXPlan(C, mode, low, table, e_lo, e_hi, limit, np.dtype(dtype))


def quantize_mx_fast(rules: MXRules, f: BlockFormat, xb: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """(out, slow): quantize_mx_reference through the fast plan, or None when no plan applies (block.md §4.10);
    the rows ``slow`` are left for the reference (mx.quantize_mx_blocks recomputes them).

    Blocks leave the fast path when they hold NaN or Inf, get a NaN
    scale, a special or folded divisor, a divisor exponent outside the plan's exact range, or a scaled amax
    beyond the plan's limit. Work runs in chunks of blocks so that every temporary stays small."""
    if not FAST_PATH or xb.ndim != 2 or xb.shape[0] == 0 or xb.shape[1] == 0:
        return None
    plan = mx_plan(rules, f, xb.dtype)
    if plan is None:
        return None
    nb, k = xb.shape
    C = plan.C
    xb = np.ascontiguousarray(xb)
    inf2 = _INF2[xb.dtype]
    codes = np.empty((nb, k), dtype=f.element.code_dtype)
    scales = np.empty(nb, dtype=np.uint8)
    unspec = np.zeros((nb, k), dtype=bool)
    scales_unspec = np.empty(nb, dtype=bool)
    slow = np.empty(nb, dtype=bool)
    work = Workspace(xb, k)
    t16 = mx_rows16(plan) if xb.dtype.itemsize == 2 else None
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for b0, b1 in block_chunks(nb, k):
            # ---- amax and non-finite blocks on the bit patterns --------------------------------------------
            a2 = work.amax_bits(xb[b0:b1])
            nan_blk = a2 > inf2
            inf_blk = a2 == inf2
            nonfinite = nan_blk | inf_blk
            a2[nonfinite] = 0  # the reference's amax skips NaN and Inf
            amax = (a2 >> a2.dtype.type(1)).view(xb.dtype)
            if C is not None and xb.dtype != C:  # float32 compute on 16-bit input: exact widening
                amax = amax.astype(C)
            # the reference's per-block steps (block.md §4.2-4.6), non-finite branches included
            sc = mx_block_scales(rules, f, amax, nan_blk, inf_blk, C, False, fast_scale_exponent)
            byte, e_div = sc.byte, sc.e_div
            fast = ~(nonfinite | sc.scale_nan | sc.folded) & np.isnan(sc.special)
            rows, sunspec = mx_row_flags(rules, f, sc)
            # ---- which blocks the fast path computes -----------------------------------------------------
            fast &= (e_div >= plan.e_lo) & (e_div <= plan.e_hi)
            p = pow2_float32(np.where(fast, -e_div, 0))
            if plan.y_limit < np.inf:
                fast &= to_float32(amax) * p <= np.float32(plan.y_limit)
            # ---- elements ------------------------------------------------------------------------------
            if t16 is not None:  # 16-bit input: the tabulated function of (e, x)
                row = np.where(fast, e_div - plan.e_lo, 0)
                t16.ensure(row)
                for r0, r1 in work.rows(b0, b1):
                    t16.gather(xb[r0:r1], row[r0 - b0:r1 - b0], work.idx[: (r1 - r0) * k],
                               codes[r0:r1].reshape(-1))
            else:
                for r0, r1 in work.rows(b0, b1):
                    y = work.scaled(xb[r0:r1], p[r0 - b0:r1 - b0])
                    plan.codes_of(y, codes[r0:r1].reshape(-1), work.keys, work.idx)
            if rows.any():
                unspec[b0:b1][rows] = True
            scales[b0:b1] = byte
            scales_unspec[b0:b1] = sunspec
            slow[b0:b1] = ~fast
    return {"codes": codes, "scales": scales, "unspecified": unspec, "scales_unspecified": scales_unspec}, slow


# ---------------------------------------------------------------------------------------------------------
# float-scaled blocks (NVFP4, block.md §5.5)
# ---------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def element_key_table(rules: ScaledRules, f: BlockFormat) -> tuple[int, np.ndarray] | None:
    """(low, table) with table[key(y)] = mx_reference.encode_elements(s, y) for float32 y wherever the element rule
    is the core's (|y| <= element max, or any y without lut_argmin); None if no sticky split exists."""
    low = sticky_low(rules, f)
    if low is None or rules.element_exponent != "exact" or rules.round_arith != "exact":
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        table, _ = encode_elements(rules, f, key_representatives(low))
    table = np.ascontiguousarray(table, dtype=f.element.code_dtype)
    table.setflags(write=False)
    return low, table


@lru_cache(maxsize=64)
def element_table16(rules: ScaledRules, f: BlockFormat, dtype: np.dtype, widen: bool) -> np.ndarray:
    """encode_elements(s, y) of every 16-bit pattern y of ``dtype`` (widened to float32 first with ``widen``,
    as the reference does before its float32 steps): exact for every y, lut_argmin included."""
    vals = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        table, _ = encode_elements(rules, f, vals.astype(np.float32) if widen else vals)
    table = np.ascontiguousarray(table, dtype=f.element.code_dtype)
    table.setflags(write=False)
    return table


def lut_table_limit(rules: ScaledRules, f: BlockFormat) -> float:
    """The largest |y| for which element_key_table's entry is the element code: the element maximum M, or 2M
    for E2M1 with lut_argmin: for float32 y in (6, 12] MLX's argmin picks 6 (code 7; -6, code 15, for
    negative y) as the core's saturating rounding does, because y - 6 and y - 4 are exact (Sterbenz, and y - 4
    in (4, 8] keeps y's quantum) so |y - 6| < |y - 4| < every other distance (checked on every such float32
    in tests/test_block_fastpath.py)."""
    M = float(f.element_max)
    if rules.out_of_range != "lut_argmin":
        return np.inf
    return 2 * M if f.element.name == "float4_e2m1fn" and f.element_scale_exp == 0 else M


@lru_cache(maxsize=8)
def scale_rows16(rules: ScaledRules, f: BlockFormat, T: np.dtype) -> RowTable:
    """Row b (a scale code with a positive decoded value d): element_table16(s, T)[fl_T(x / d)] for every
    16-bit x of T (the mlx rule without a global scale; divide_in gives fl_T)."""
    d_all = to_float32(decode(np.arange(1 << f.scale.bits), f.scale, dtype=T))
    table = element_table16(rules, f, T, True)

    def fn(b: int, x32: np.ndarray, out: np.ndarray) -> None:
        y = divide_in(x32, d_all[b], T, np.empty(x32.size, dtype=np.float32))
        np.take(table, round_float32_to(y, T), out=out)

    return RowTable(1 << f.scale.bits, T, f.element.code_dtype, fn)


def divide_in(x32: np.ndarray, d32: np.ndarray, T: np.dtype, out: np.ndarray) -> np.ndarray:
    """fl_T(x / d) for float32 views x32, d32 of T values, into float32 ``out``: one IEEE float32 division, then
    (16-bit T) one more rounding to T — innocuous, as 24 >= 2p + 2 for p = 11 and 8 bits."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        np.divide(x32, d32, out=out)
    if T != fp.F32:
        bits = round_float32_to(out.reshape(-1), T)
        out.reshape(-1)[...] = to_float32(bits.view(T))
    return out


def quantize_float_scaled_fast(rules: FloatScaleRules, f: BlockFormat, xb: np.ndarray, global_scale: np.float32 | None
                               ) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """(out, slow): quantize_float_scaled_reference for the rules mlx, nvidia and torchao on float32, float16 and
    bfloat16 inputs, the rows ``slow`` left to the reference (nvfp4.quantize_float_scaled_blocks recomputes
    them), or None (block.md §5.5).

    Per block, the reference's own steps on amax (read from the bit patterns): mlx r = fl_T(amax / M) (native
    float32, see divide_in), the scale code and d = decode(code, T); nvidia / torchao the reference's
    nvidia_block_scales / torchao_block_scales, giving a factor c. Per element: mlx y = fl_T(x / d) [then
    fl32(y * enc) with a global scale]; nvidia / torchao y = fl32(x * c) (one IEEE float32 multiplication, as
    the reference's emulated fl32). The element code comes from a table: scale_rows16 for 16-bit inputs under
    mlx without a global scale, else element_key_table on float32 y, whose elements beyond lut_table_limit
    take the reference's encode_elements. Blocks holding NaN or Inf, mlx blocks whose scale decodes to 0 and
    nvidia / torchao blocks whose factor is infinite run the reference."""
    rule = rules.global_scale_rule
    if (not FAST_PATH or rule not in ("input_dtype_encode", "amax_encode_reciprocal", "tensor_scale_clamped")
            or xb.ndim != 2 or xb.shape[0] == 0 or xb.shape[1] == 0 or xb.dtype not in (fp.F32, fp.F16, fp.BF16)
            or rules.flush_subnormals
            or rules.unspecified_open_cases or (rule == "amax_encode_reciprocal" and global_scale is None)
            or (global_scale is not None and np.isnan(global_scale))):
        return None
    keyed = element_key_table(rules, f)
    if keyed is None:
        return None
    low, ktable = keyed
    T = fp.resolve_compute_dtype("input", xb.dtype) if rule == "input_dtype_encode" else fp.F32
    M, _ = element_constants(f)
    S = float(f.scale.max_value)
    limit = np.float32(lut_table_limit(rules, f))
    nb, k = xb.shape
    xb = np.ascontiguousarray(xb)
    gs_out = enc = None
    if global_scale is not None:
        gs_out = np.float32(global_scale)
        if rule == "input_dtype_encode":
            enc = fp.div(np.float32(M * S), gs_out, fp.F32)
    rows16 = scale_rows16(rules, f, T) if rule == "input_dtype_encode" and T != fp.F32 and enc is None else None
    codes = np.empty((nb, k), dtype=f.element.code_dtype)
    scales = np.empty(nb, dtype=f.scale.code_dtype)
    slow = np.empty(nb, dtype=bool)
    work = Workspace(xb, k)
    far_y = []
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        for b0, b1 in block_chunks(nb, k):
            a2 = work.amax_bits(xb[b0:b1])
            nonfinite = a2 >= _INF2[xb.dtype]
            a2[nonfinite] = 0
            amax32 = to_float32((a2 >> a2.dtype.type(1)).view(xb.dtype))
            # ---- per block: the reference's steps, in native float32 where that is exact -------------------
            fast = ~nonfinite
            if rule == "input_dtype_encode":
                # r = fl_T(amax / M) and sv = fl32(r * enc): one IEEE float32 operation each (divide_in for T)
                r = divide_in(amax32, np.float32(M), T, np.empty(b1 - b0, dtype=np.float32))
                sv = r if enc is None else r * enc
                byte = encode_scale(rules, f, sv, nan="max")
                d32 = to_float32(decode(byte, f.scale, dtype=T))
                fast &= d32 > 0
                factor = np.where(fast, d32, np.float32(1))
                # the y of the block's largest element: every step is monotone, no |y| of the block exceeds it
                ymax = divide_in(amax32, factor, T, np.empty(b1 - b0, dtype=np.float32))
                if enc is not None:
                    ymax *= enc
            else:
                byte, factor = (nvidia_block_scales(rules, f, amax32, gs_out) if rule == "amax_encode_reciprocal"
                                else torchao_block_scales(rules, f, amax32, gs_out))
                fast &= np.isfinite(factor)  # an infinite factor (tiny global scale): 0 * inf is NaN, the reference
                factor = np.where(fast, factor, np.float32(1)).astype(np.float32)
                ymax = amax32 * factor
            far_rows = fast & ~(ymax <= limit)  # rows where some |y| may lie beyond the table's domain
            scales[b0:b1] = byte
            slow[b0:b1] = ~fast
            # ---- elements ------------------------------------------------------------------------------
            row = np.where(fast, byte, 0)
            if rows16 is not None:
                rows16.ensure(row)
            for r0, r1 in work.rows(b0, b1):
                n = (r1 - r0) * k
                out = codes[r0:r1].reshape(-1)
                if rows16 is not None:
                    rows16.gather(xb[r0:r1], row[r0 - b0:r1 - b0], work.idx[:n], out)
                    continue
                y = work.y[:n]
                y2 = y.reshape(r1 - r0, k)
                if rule == "input_dtype_encode":
                    divide_in(to_float32(xb[r0:r1]), factor[r0 - b0:r1 - b0, None], T, y2)
                    if enc is not None:
                        np.multiply(y, enc, out=y)
                else:
                    np.multiply(to_float32(xb[r0:r1]), factor[r0 - b0:r1 - b0, None], out=y2)
                take_via(ktable, sticky_key(y.view(U32), low, work.key(n)), out, work.idx)
                fr = far_rows[r0 - b0:r1 - b0]
                if fr.any():
                    far_y.append((r0 + np.flatnonzero(fr), y2[fr].copy()))
    for rows, yf in far_y:  # beyond the table: the reference's encode_elements (MLX's table argmin)
        far = ~(np.abs(yf) <= limit)
        sub = codes[rows]
        sub[far] = encode_elements(rules, f, yf[far])[0]
        codes[rows] = sub
    return {"codes": codes, "scales": scales, "unspecified": np.zeros((nb, k), dtype=bool),
            "scales_unspecified": np.zeros(nb, dtype=bool), "global_scale": gs_out}, slow


# ---------------------------------------------------------------------------------------------------------
# dequantize (block.md §4.10, §5.5)
# ---------------------------------------------------------------------------------------------------------
_DEQ_TABLES: dict[tuple[object, ...], np.ndarray] = {}
_DEQ_TABLES_MAX = 64


def dequantize_fast(rules: KindRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray, global_scale: object,
                    dtype: object,
                    reference: Callable[..., np.ndarray]) -> np.ndarray | None:
    """Block dequantization as a table of the reference: every rule of block.md §4.8 / §5.4 maps (scale code,
    element code) [and the per-call global scale] to one output value, so the reference evaluated once on
    the 2^scale_bits x 2^element_bits grid gives table[scale << bits | code], and the output is one gather.
    Runs for element and scale codes of at most 8 bits that are in range; None otherwise."""
    if not FAST_PATH or codes.ndim != 2 or codes.size == 0:
        return None
    fmt = f.element
    bits = fmt.bits
    sbits = f.scale.bits if f.scale is not None else 0
    if (rules.kind == "affine" or bits > 8 or sbits != 8 or codes.dtype.kind not in "iu"
            or scales.dtype.kind not in "iu"):
        return None
    if (codes.dtype.itemsize > 1 or bits < 8 or codes.dtype.kind == "i") and (
            int(codes.min()) < 0 or int(codes.max()) >= (1 << bits)):
        return None
    if scales.dtype != np.uint8 and (int(scales.min()) < 0 or int(scales.max()) > 255):
        return None
    dt, _ = target_format(dtype)
    g = None if global_scale is None else np.float32(np.asarray(global_scale, dtype=np.float32).reshape(-1)[0])
    key = (rules, f, dt, None if g is None else g.tobytes())
    table = _DEQ_TABLES.get(key)
    if table is None:
        grid_codes = np.tile(np.arange(1 << bits, dtype=fmt.code_dtype), (256, 1))
        grid_scales = np.arange(256, dtype=np.uint8)
        with np.errstate(all="ignore"):
            if global_scale is None:
                table = reference(rules, f, grid_codes, grid_scales, dt)
            else:
                table = reference(rules, f, grid_codes, grid_scales, dt, global_scale)
        table = np.ascontiguousarray(table).reshape(-1)
        table.setflags(write=False)
        while len(_DEQ_TABLES) >= _DEQ_TABLES_MAX:  # drop the oldest (tables are at most 512 KiB)
            _DEQ_TABLES.pop(next(iter(_DEQ_TABLES), None), None)
        _DEQ_TABLES[key] = table
    nb, k = codes.shape
    out = np.empty((nb, k), dtype=table.dtype)
    R = rows_per_chunk(k)
    idx = scratch("block.dequantize_idx", min(nb, R) * k, np.intp)
    sc = scales.reshape(-1).astype(U32) << U32.type(bits)
    for r0 in range(0, nb, R):
        r1 = min(nb, r0 + R)
        i = idx[: (r1 - r0) * k]
        np.add(codes[r0:r1], sc[r0:r1, None], out=i.reshape(r1 - r0, k), casting="unsafe")
        np.take(table, i, out=out[r0:r1].reshape(-1), mode="wrap")  # every index is below the table size
    return out


__all__ = [
    "BLOCK_CHUNK",
    "ELEMENT_CHUNK",
    "FAST_PATH",
    "MXPlan",
    "RowTable",
    "Workspace",
    "block_chunks",
    "dequantize_fast",
    "divide_in",
    "element_constants",
    "element_key_table",
    "element_table16",
    "fast_scale_exponent",
    "finite_block_scales",
    "floor_ceil_log2",
    "key_representatives",
    "lut_table_limit",
    "mx_plan",
    "mx_rows16",
    "pow2_float32",
    "quantize_float_scaled_fast",
    "quantize_mx_fast",
    "round_float32_to",
    "rows_per_chunk",
    "scale_rows16",
    "sticky_key",
    "sticky_low",
    "to_float32",
]
