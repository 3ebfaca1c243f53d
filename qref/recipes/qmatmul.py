"""Quantized integer matrix products (spec: docs/spec/matmul.md).

Y = requant(sum_k (A[m,k] - za)(B[k,n] - zb) + bias) as a pipeline of records: the operands (``IntOperand``:
storage and scale / zero-point granularity, matmul.md §2), the accumulation (``IntAccumulation``: int32 wrap,
saturation or exact, int16 pair sums, matmul.md §3), the bias (matmul.md §4) and the requantization
(``Requantization``: none, float multiply, gemmlowp / TFLite fixed point, dequantize-compute-quantize, matmul.md
§5). The rule records and the named profiles are data in qref.profiles.matmul; this module is the readable
reference: vectorized numpy on int64 (Python integers in object arrays where a product needs more than 63 bits),
no loop over elements.

    quantized_matmul(a, b, a_scale=..., b_scale=..., y_scale=..., profile="onnxruntime")   # codes + mask
    int_accumulate(a, b, a_zero_point, b_zero_point)                                          # int32 accumulator
    quantize_multiplier(m), multiply_by_quantized_multiplier(x, q, shift)                     # gemmlowp / TFLite
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import div, f64, mul, round_fractions, round_to
from ..errors import QrefError, check_choice
from ..formats import get_format
from ..profiles import Profile, resolve_profile
from ..profiles.matmul import IntAccumulation, IntMatmulRules, Requantization
from ..schemes.uniform import build_uniform
from .exact import Dyadic

#: storage name -> (lowest, highest) value; 4-bit storages hold their values in int8 / uint8 arrays
STORAGES = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}
GRANULARITIES = ("per_tensor", "per_row", "per_column")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
MAX_K = 1 << 31
SPEC = "matmul.md"
#: elements per temporary of the pair-sum path (rows of A are taken in chunks that stay below it)
CHUNK = 1 << 22


@dataclass(frozen=True)
class IntOperand:
    """One operand of a quantized matmul (matmul.md §2): its storage (int8, uint8, int4, uint4; 4-bit values in
    int8 / uint8 arrays) and the granularity of its scale and zero point ("per_tensor"; "per_row" for A: one per
    row m; "per_column" for B: one per output channel n)."""

    storage: str = "int8"
    granularity: str = "per_tensor"

    def __post_init__(self) -> None:
        check_choice("storage", self.storage, STORAGES)
        check_choice("granularity", self.granularity, GRANULARITIES)

    @property
    def range(self) -> tuple[int, int]:
        return STORAGES[self.storage]


@dataclass(frozen=True)
class QuantizedMatmul:
    """The whole pipeline (matmul.md §1): operands ``a`` and ``b``, the ``output`` storage (None with
    requantization method "none": the int32 accumulator is the output) and the ``rules`` (accumulation, bias,
    requantization)."""

    a: IntOperand = field(default_factory=lambda: IntOperand("uint8"))
    b: IntOperand = field(default_factory=lambda: IntOperand("int8"))
    output: str | None = "uint8"
    rules: IntMatmulRules = field(default_factory=IntMatmulRules)

    def __post_init__(self) -> None:
        if self.a.granularity == "per_column" or self.b.granularity == "per_row":
            raise QrefError("A is quantized per tensor or per row, B per tensor or per column (matmul.md §2 C2)")
        none = self.rules.requantization.method == "none"
        if none != (self.output is None):
            raise QrefError("requantization method 'none' returns the int32 accumulator (output=None); the other "
                            "methods need an output storage (matmul.md §5 C1)")
        if self.output is not None:
            check_choice("output storage", self.output, STORAGES)


@dataclass
class MatmulOutput:
    """The result: ``values`` (int64: output values, or the int32 accumulator for method "none"), ``unspecified``
    (bool: where the spec or the profile leaves the element undefined) and the ``accumulator`` (int64)."""

    values: np.ndarray
    unspecified: np.ndarray
    accumulator: np.ndarray


def matmul_rules(profile: str | Profile | None = None, **overrides: Any) -> IntMatmulRules:
    """The rules of matmul profile ``profile`` (default "exact", the spec default) with field overrides."""
    p = resolve_profile(profile or "exact", "matmul").profile
    rules = p.rules
    assert isinstance(rules, IntMatmulRules)
    return rules.replace(**overrides) if overrides else rules


# ---- checks (matmul.md §2) -----------------------------------------------------------------------------------
def _int_matrix(x: object, name: str, storage: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise QrefError(f"{name} must be an integer array of {storage} values, got dtype {a.dtype}")
    if a.ndim != 2:
        raise QrefError(f"{name} must be 2-D, got shape {a.shape}")
    lo, hi = STORAGES[storage]
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        raise QrefError(f"{name} holds values outside {storage} [{lo}, {hi}] (matmul.md §2 C1)")
    return a.astype(np.int64)


def _vector(x: object, name: str, length: int, axis_name: str) -> np.ndarray:
    v = np.asarray(x)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if v.ndim != 1 or v.shape[0] != length:
        raise QrefError(f"{name} must be a scalar or have {length} elements (one per {axis_name}), got shape "
                        f"{v.shape} (matmul.md §2 C2)")
    return v


def _zero_point(z: object, name: str, storage: str, length: int, axis_name: str) -> np.ndarray:
    v = _vector(0 if z is None else z, name, length, axis_name)
    if v.dtype.kind not in "iu" and not (v.dtype.kind == "f" and np.all(v == np.round(v))):
        raise QrefError(f"{name} must hold integers, got dtype {v.dtype}")
    lo, hi = STORAGES[storage]
    vi = v.astype(np.int64)
    if vi.size and (int(vi.min()) < lo or int(vi.max()) > hi):
        raise QrefError(f"{name} must lie in the {storage} range [{lo}, {hi}] (matmul.md §2 C3)")
    return vi


def _scale(s: object, name: str, length: int, axis_name: str) -> np.ndarray:
    if s is None:
        raise QrefError(f"{name} is required by this requantization method (matmul.md §5)")
    v = _vector(s, name, length, axis_name)
    with np.errstate(all="ignore"):
        v64 = v.astype(np.float64)
        v32 = v64.astype(np.float32)
    if not np.all(np.isfinite(v64)) or not np.all(v64 > 0):
        raise QrefError(f"{name} must be positive and finite (matmul.md §2 C4)")
    if not np.array_equal(v32.astype(np.float64), v64):
        raise QrefError(f"{name} must hold float32 values (scales are float32, matmul.md §2 C4)")
    return v32


# ---- accumulation (matmul.md §3, §4) -----------------------------------------------------------------------
def wrap_int32(x: np.ndarray) -> np.ndarray:
    """x modulo 2^32 in [-2^31, 2^31) (two's complement int32 adds), int64 in and out."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _pair_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_i sat16(a[m,2i] b[2i,n] + a[m,2i+1] b[2i+1,n]) (matmul.md §3.2), int64, rows of A in chunks."""
    M, K = a.shape
    N = b.shape[1]
    if K % 2:
        a = np.concatenate([a, np.zeros((M, 1), np.int64)], axis=1)
        b = np.concatenate([b, np.zeros((1, N), np.int64)], axis=0)
    ae, ao, be, bo = a[:, 0::2], a[:, 1::2], b[0::2, :], b[1::2, :]
    half = ae.shape[1]
    out = np.zeros((M, N), dtype=np.int64)
    rows = max(1, CHUNK // max(1, half * N))
    for r0 in range(0, M, rows):  # chunks of rows (a bounded temporary), not elements
        sl = slice(r0, r0 + rows)
        p = ae[sl, :, None] * be[None, :, :] + ao[sl, :, None] * bo[None, :, :]
        out[sl] = np.clip(p, INT16_MIN, INT16_MAX).sum(axis=1)
    return out


def int_accumulate(a: object, b: object, a_zero_point: object = 0, b_zero_point: object = 0, bias: object = None,
                   *, accumulation: IntAccumulation | None = None, a_storage: str = "uint8",
                   b_storage: str = "int8") -> tuple[np.ndarray, np.ndarray]:
    """The accumulator sum_k (A[m,k] - za)(B[k,n] - zb) + bias under ``accumulation`` (matmul.md §3, §4):
    (int64 values in the int32 range, or the exact sum with overflow "exact"; bool mask of unspecified elements:
    an exact sum outside int32)."""
    acc = accumulation or IntAccumulation()
    check_choice("a storage", a_storage, STORAGES)
    check_choice("b storage", b_storage, STORAGES)
    A = _int_matrix(a, "a", a_storage)
    B = _int_matrix(b, "b", b_storage)
    M, K = A.shape
    if B.shape[0] != K:
        raise QrefError(f"a is (M, K) = {A.shape} and b must be (K, N) with K = {K}, got {B.shape}")
    if K == 0 or K > MAX_K:
        raise QrefError(f"K = {K}: a quantized matmul sums 1 to 2^31 products (matmul.md §3 C1)")
    N = B.shape[1]
    za = _zero_point(a_zero_point, "a_zero_point", a_storage, M, "row of a")
    za = za.reshape(-1, 1) if za.ndim else za
    zb = _zero_point(b_zero_point, "b_zero_point", b_storage, N, "column of b")
    bias_v = None
    if bias is not None:
        bv = _vector(bias, "bias", N, "column of b")
        if bv.dtype.kind not in "iu":
            raise QrefError(f"bias must be an int32 array (matmul.md §4 C1), got dtype {bv.dtype}")
        bias_v = bv.astype(np.int64)
        if bias_v.size and (int(bias_v.min()) < INT32_MIN or int(bias_v.max()) > INT32_MAX):
            raise QrefError("bias must hold int32 values (matmul.md §4 C1)")
    if acc.pair_sum == "saturating_int16_shifted_a" and a_storage == "int8":
        A, za = A + 128, za + 128  # s8 A as u8 (A + 128); A - za is unchanged (matmul.md §3.2)
        a_storage = "uint8"
    if acc.pair_sum in ("saturating_int16", "saturating_int16_shifted_a"):
        if (a_storage, b_storage) != ("uint8", "int8"):
            raise QrefError("pair_sum='saturating_int16' models u8 x s8 pair instructions: a must be uint8 and b "
                            f"int8, got {a_storage} x {b_storage} (matmul.md §3.2 C1)")
        if acc.overflow == "saturate":
            raise QrefError("pair_sum='saturating_int16' with overflow='saturate' is not a modelled kernel")
        s = _pair_sums(A, B)  # raw operands; the zero points are corrected in int32 afterwards
        total = s - zb * A.sum(axis=1, keepdims=True) - za * B.sum(axis=0) + K * za * zb
    elif acc.overflow == "saturate":
        Ad, Bd = A - za, B - zb
        total = np.zeros((M, N), dtype=np.int64)
        for k in range(K):  # the partial sums in k order: saturation makes the order part of the result
            total = np.clip(total + Ad[:, k, None] * Bd[None, k, :], INT32_MIN, INT32_MAX)
    else:
        total = (A - za) @ (B - zb)
    if bias_v is not None:
        total = total + bias_v
    unspecified = np.zeros(total.shape, dtype=bool)
    if acc.overflow == "wrap":
        total = wrap_int32(total)
    elif acc.overflow == "saturate":
        total = np.clip(total, INT32_MIN, INT32_MAX)
    else:
        unspecified = (total < INT32_MIN) | (total > INT32_MAX)
    return total, unspecified


# ---- rounding of exact quotients and floats (matmul.md §5.2) ---------------------------------------------------
def round_quotient(num: np.ndarray, den: np.ndarray, rounding: str) -> np.ndarray:
    """num / den (den > 0; int64 or object arrays of Python ints) rounded to an integer by ``rounding``."""
    q = num // den
    r = num - q * den  # 0 <= r < den
    twice = 2 * r
    if rounding == "toward_zero":
        up = (r != 0) & (num < 0)
    else:
        tie = twice == den
        if rounding == "nearest_even":
            tie_up = (q % 2) == 1
        elif rounding == "nearest_away":
            tie_up = num >= 0
        else:  # nearest_up
            tie_up = np.ones(np.shape(q), dtype=bool)
        up = (twice > den) | (tie & tie_up)
    return q + np.asarray(up, dtype=bool).astype(q.dtype if q.dtype != object else np.int64)


def round_float(x: np.ndarray, rounding: str) -> np.ndarray:
    """A float array rounded to integers by ``rounding`` (values beyond +-2^40 clipped first: every output
    range is far inside), returned as int64."""
    v = np.clip(np.asarray(x, dtype=np.float64), -(2.0**40), 2.0**40)
    f = np.floor(v)
    d = v - f  # exact: the fraction of a float is a float
    if rounding == "toward_zero":
        up = (d != 0) & (v < 0)
    else:
        tie = d == 0.5
        fi = f.astype(np.int64)
        tie_up = {"nearest_even": (fi % 2) == 1, "nearest_away": v >= 0,
                  "nearest_up": np.ones(v.shape, dtype=bool)}[rounding]
        up = (d > 0.5) | (tie & tie_up)
    return f.astype(np.int64) + up.astype(np.int64)


# ---- the output multiplier (matmul.md §5.2) --------------------------------------------------------------------
def _dyadic_parts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(integer significand, exponent) with v = n * 2^e exactly (finite float arrays)."""
    fr, ex = np.frexp(np.asarray(v, dtype=np.float64))
    return (fr * 2.0**53).astype(np.int64), ex.astype(np.int64) - 53


def output_multiplier(a_scale: np.ndarray, b_scale: np.ndarray, y_scale: np.ndarray, req: Requantization
                      ) -> np.ndarray:
    """m = a_s b_s / y_s in ``req.multiplier_dtype`` with ``req.association`` (matmul.md §5.2): a float32 or
    float64 array broadcast as (M, 1) x (1, N) (or a scalar); for "exact", a pair of object arrays (num, den)."""
    a = np.asarray(a_scale, dtype=np.float32)
    a = a.reshape(-1, 1) if a.ndim else a
    b, y = np.asarray(b_scale, dtype=np.float32), np.asarray(y_scale, dtype=np.float32)
    if req.multiplier_dtype == "exact":
        raise QrefError("the exact multiplier is a rational: use exact_multiplier")
    dt = np.dtype(req.multiplier_dtype)
    if req.association == "ab_then_y":
        return div(mul(a, b, dt), y, dt)
    if req.association in ("sequential_reciprocal_y", "sequential_ab_reciprocal_y"):
        raise QrefError(f"association {req.association!r} has no single multiplier: use sequential_scale")
    if req.scale_form == "reciprocal_round_trip":
        a, b = scale_round_trip(a), scale_round_trip(b)
    if req.association == "ab_times_reciprocal_y":
        return mul(mul(a, b, dt), div(np.ones((), dt), y, dt), dt)
    return mul(a, div(b, y, dt), dt)


def scale_round_trip(s: np.ndarray) -> np.ndarray:
    """fl32(1 / fl32(fl64(1 / s))): a float32 scale held as its reciprocal (computed in float64, stored as float32)
    and inverted back in float32 (scale_form "reciprocal_round_trip", matmul.md §5.2)."""
    r = (1.0 / np.asarray(s, dtype=np.float64)).astype(np.float32)
    return (np.float32(1) / r).astype(np.float32)


def sequential_scale(acc: np.ndarray, a_scale: np.ndarray, b_scale: np.ndarray, y_scale: np.ndarray,
                     req: Requantization, float_bias: np.ndarray | None = None) -> np.ndarray:
    """v = fl(fl(fl(acc) * a_s) * b_s) * fl(1 / y_s) in ``req.compute`` (association "sequential_reciprocal_y";
    "sequential_ab_reciprocal_y": fl(fl(acc) * fl(a_s * b_s)) * fl(1 / y_s);
    1 / y_s in ``req.multiplier_dtype``; matmul.md §5.2), a_s per row (M, 1), b_s per column; a float bias is
    added before the 1 / y_s product (float_bias "after_operand_scales", matmul.md §4.1)."""
    dt, mdt = np.dtype(req.compute), np.dtype(req.multiplier_dtype)
    a = np.asarray(a_scale, dtype=np.float32)
    a = a.reshape(-1, 1) if a.ndim else a
    b = np.asarray(b_scale, dtype=np.float32)
    if req.scale_form == "reciprocal_round_trip":
        a, b = scale_round_trip(a), scale_round_trip(b)
    ry = div(np.ones((), mdt), np.asarray(y_scale, dtype=np.float32), mdt)
    if req.association == "sequential_ab_reciprocal_y":
        v = mul(round_to(f64(acc), dt), mul(a, b, dt), dt)
    else:
        v = mul(mul(round_to(f64(acc), dt), a, dt), b, dt)
    if float_bias is not None:
        v = round_to(f64(v) + f64(float_bias), dt)
    return mul(v, ry, dt)


def exact_multiplier(a_scale: np.ndarray, b_scale: np.ndarray, y_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a_s b_s / y_s as the exact rational (num, den) of object arrays of Python ints (den > 0), broadcast as
    (M, 1) x (1, N) like ``output_multiplier``."""
    a = np.asarray(a_scale, dtype=np.float64)
    a = a.reshape(-1, 1) if a.ndim else a
    b, y = np.asarray(b_scale, dtype=np.float64), np.asarray(y_scale, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape, y.shape)
    (na, ea), (nb, eb), (ny, ey) = (_dyadic_parts(np.broadcast_to(v, shape)) for v in (a, b, y))
    return _scaled(_obj(na) * _obj(nb), ny, ea + eb - ey)


def _obj(v: object) -> np.ndarray:
    """An object array of Python ints (a Python int or a 0-d result becomes a 0-d array)."""
    out = np.empty(np.shape(v), dtype=object)
    out[...] = v if isinstance(v, int) else np.asarray(v).astype(object)
    return out


def _scaled(num: np.ndarray, den: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(num 2^max(e, 0), den 2^max(-e, 0)) as object arrays of Python ints (num * 2^e / den, exactly)."""
    n, d = _obj(num), _obj(den)
    e = np.asarray(e, dtype=np.int64)
    one = _obj(np.ones(e.shape, dtype=np.int64))
    return n * (one << _obj(np.maximum(e, 0))), d * (one << _obj(np.maximum(-e, 0)))


# ---- fixed point (matmul.md §5.3) --------------------------------------------------------------------------------
def quantize_multiplier(m: object, form: str = "double_rounding") -> tuple[np.ndarray, np.ndarray]:
    """A real multiplier m >= 0 (float64) as (q, shift) with m ~ q 2^(shift - 31), q an int32 Q31 significand:
    frexp, q = round_half_away(f 2^31), q = 2^31 -> (2^30, shift + 1), shift < -31 -> (0, 0); with
    "single_rounding" also shift > 30 -> (2^31 - 1, 30) (TFLite QuantizeMultiplier; matmul.md §5.3 C1)."""
    v = np.asarray(m, dtype=np.float64)
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise QrefError("a quantized multiplier takes finite values >= 0 (matmul.md §5.3 C1)")
    fr, sh = np.frexp(v)
    q = np.floor(fr * 2.0**31 + 0.5).astype(np.int64)  # fr * 2^31 is exact; its ties round away (fr >= 0)
    sh = sh.astype(np.int64)
    carry = q == (1 << 31)
    q = np.where(carry, q // 2, q)
    sh = np.where(carry, sh + 1, sh)
    small = sh < -31
    q, sh = np.where(small, 0, q), np.where(small, 0, sh)
    if form == "single_rounding":
        big = sh > 30
        q, sh = np.where(big, (1 << 31) - 1, q), np.where(big, 30, sh)
    return q, sh


def saturating_rounding_doubling_high_mul(a: object, b: object) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values (int64 arrays): (a b + nudge) / 2^31 truncated,
    nudge 2^30 (a b >= 0) or 1 - 2^30; a = b = -2^31 gives 2^31 - 1."""
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    ab = x * y
    t = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(t >= 0, t >> 31, -((-t) >> 31))
    return np.where((x == INT32_MIN) & (y == INT32_MIN), INT32_MAX, high)


def rounding_divide_by_pot(x: object, exponent: object) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero (0 <= exponent <= 31)."""
    v, e = np.asarray(x, dtype=np.int64), np.asarray(exponent, dtype=np.int64)
    if np.any(e < 0) or np.any(e > 31):
        raise QrefError("RoundingDivideByPOT takes exponents 0..31 (matmul.md §5.3 C2)")
    mask = (np.int64(1) << e) - 1
    rem = v & mask
    threshold = (mask >> 1) + (v < 0)
    return (v >> e) + (rem > threshold)


def multiply_by_quantized_multiplier(x: object, q: object, shift: object, form: str = "double_rounding"
                                     ) -> tuple[np.ndarray, np.ndarray]:
    """x q 2^(shift - 31) in integers (matmul.md §5.3): "double_rounding" = RoundingDivideByPOT(
    SaturatingRoundingDoublingHighMul(x 2^left, q), right); "single_rounding" = (x q + 2^(30 - shift)) >>
    (31 - shift). Returns (int64 values, unspecified: an int32 overflow C leaves undefined)."""
    v = np.asarray(x, dtype=np.int64)
    qq, sh = np.asarray(q, dtype=np.int64), np.asarray(shift, dtype=np.int64)
    if form == "single_rounding":
        total = 31 - sh
        r = (v * qq + (np.int64(1) << (total - 1))) >> total
        return r, (r < INT32_MIN) | (r > INT32_MAX)
    left, right = np.maximum(sh, 0), np.maximum(-sh, 0)
    shifted = v << left
    bad = (shifted < INT32_MIN) | (shifted > INT32_MAX)  # x * (1 << left) overflows int32: undefined in C
    out = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(wrap_int32(shifted), qq), right)
    return out, bad


# ---- float bias (matmul.md §4.1) ---------------------------------------------------------------------------------
def _float_bias(bias: object, n: int) -> np.ndarray:
    v = _vector(bias, "bias", n, "column of b")
    if v.dtype.kind != "f":
        raise QrefError(f"a float bias is a float32 array, got dtype {v.dtype}")
    v64 = v.astype(np.float64)
    if not np.all(np.isfinite(v64)) or not np.array_equal(v64.astype(np.float32).astype(np.float64), v64):
        raise QrefError("a float bias holds finite float32 values (matmul.md §4.1)")
    return v64.astype(np.float32)


def _ab(a_s: np.ndarray, b_s: np.ndarray) -> np.ndarray:
    """fl32(a_s b_s) broadcast (M, 1) x (N,) (a per tensor: (N,) or ())."""
    a = a_s.reshape(-1, 1) if np.ndim(a_s) else a_s
    return mul(a, b_s, np.dtype(np.float32))


def add_bias_in_accumulator_units(acc: np.ndarray, bias: np.ndarray, a_s: np.ndarray, b_s: np.ndarray,
                                  dt: np.dtype) -> np.ndarray:
    """float_bias "float_accumulator" (matmul.md §4.1): x = fl(fl(acc) + bias * fl(1 / fl32(a_s b_s))) rounded once
    (a fused multiply-add) where a_s b_s is one value (per tensor), else fl(fl(acc) + fl(bias / fl32(a_s b_s[n]))),
    in ``dt``."""
    ab = _ab(a_s, b_s)
    acc_c = round_to(f64(acc), dt)
    if np.size(ab) == 1:
        rcp = div(np.ones((), dt), ab, dt)
        prod = Dyadic.from_floats(np.broadcast_to(f64(bias), acc.shape).copy()) * \
            Dyadic.from_floats(np.broadcast_to(f64(rcp), acc.shape).copy())
        exact = Dyadic.from_floats(f64(acc_c)) + prod
        return exact.round(get_format(dt.name)).astype(dt)
    return round_to(f64(acc_c) + f64(div(bias, ab, dt)), dt)


def quantize_bias(bias: np.ndarray, a_s: np.ndarray, b_s: np.ndarray) -> np.ndarray:
    """float_bias "int32_accumulator": round_half_even(fl32(bias * fl32(1 / fl32(a_s b_s)))), clamped to int32
    (matmul.md §4.1), int64."""
    f32 = np.dtype(np.float32)
    q = mul(bias, div(np.ones((), f32), _ab(a_s, b_s), f32), f32)
    return np.clip(round_float(np.clip(q.astype(np.float64), -(2.0**31), 2.0**31), "nearest_even"), INT32_MIN,
                   INT32_MAX)


def _exact_with_bias(acc: np.ndarray, a_s: np.ndarray, b_s: np.ndarray, y_s: np.ndarray, bias: np.ndarray,
                     req: Requantization) -> np.ndarray:
    """float_bias "exact": (acc a_s b_s + bias) / y_s in real arithmetic, rounded once by ``req.rounding``."""
    if req.multiplier_dtype != "exact":
        raise QrefError("float_bias 'exact' computes with the real scales: multiplier_dtype 'exact'")
    a = np.asarray(a_s, dtype=np.float64)
    a = a.reshape(-1, 1) if a.ndim else a
    shape = acc.shape
    (na, ea), (nb, eb), (ny, ey), (nz, ez) = (_dyadic_parts(np.broadcast_to(np.asarray(v, np.float64), shape))
                                              for v in (a, b_s, y_s, bias))
    # acc a b / y + z / y = (acc na nb 2^(ea + eb) + nz 2^ez) / (ny 2^ey)
    lo = np.minimum(ea + eb, ez)
    one = _obj(np.ones(shape, dtype=np.int64))
    num = _obj(acc) * _obj(na) * _obj(nb) * (one << _obj(ea + eb - lo)) + _obj(nz) * (one << _obj(ez - lo))
    num2, den = _scaled(num, ny, lo - ey)
    return round_quotient(num2, den, req.rounding)


# ---- requantization (matmul.md §5) -------------------------------------------------------------------------------
def requantize_accumulator(acc: np.ndarray, *, a_scale: object, b_scale: object, y_scale: object,
                           y_zero_point: object = 0, output: str = "uint8", requantization: Requantization | None
                           = None, float_bias: object = None, float_bias_stage: str = "exact"
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Output codes of the int32 accumulator ``acc`` (M, N) by ``requantization`` (method float_multiply or
    fixed_point; matmul.md §5.2, §5.3), with an optional float32 bias per column entering at
    ``float_bias_stage`` (matmul.md §4.1): (int64 values in the output range, unspecified mask)."""
    req = requantization or Requantization()
    acc = np.asarray(acc, dtype=np.int64)
    M, N = acc.shape
    check_choice("output storage", output, STORAGES)
    a_s = _scale(a_scale, "a_scale", M, "row of a")
    b_s = _scale(b_scale, "b_scale", N, "column of b")
    y_s = _scale(y_scale, "y_scale", 1, "tensor")
    zy = int(_zero_point(y_zero_point, "y_zero_point", output, 1, "tensor"))
    lo, hi = STORAGES[output]
    bad = np.zeros(acc.shape, dtype=bool)
    fb = None if float_bias is None else _float_bias(float_bias, N)
    if fb is not None:
        if req.method != "float_multiply":
            raise QrefError("a float bias enters a float_multiply requantization (matmul.md §4.1 C1)")
        if float_bias_stage == "int32_accumulator":
            acc = wrap_int32(acc + quantize_bias(fb, a_s, b_s))
            fb = None
        elif (float_bias_stage == "exact") != (req.compute == "exact"):
            raise QrefError(f"float_bias {float_bias_stage!r} with compute {req.compute!r}: the exact stage is "
                            "real arithmetic, the others float steps (matmul.md §4.1 C2)")
        elif float_bias_stage == "after_operand_scales" and not req.association.startswith("sequential"):
            raise QrefError("float_bias 'after_operand_scales' enters between the sequential scale products: "
                            "association 'sequential_reciprocal_y' (matmul.md §4.1 C3)")
    if req.method == "fixed_point":
        if req.multiplier_dtype == "exact":
            raise QrefError("fixed_point quantizes a float multiplier: multiplier_dtype float32 or float64")
        m = np.broadcast_to(output_multiplier(a_s, b_s, y_s, req).astype(np.float64), acc.shape)
        q, sh = quantize_multiplier(m, req.fixed_point)
        v, bad = multiply_by_quantized_multiplier(acc, q, sh, req.fixed_point)
        n = v + zy
    elif req.method == "float_multiply":
        if req.compute == "exact" and fb is not None:
            n = _exact_with_bias(acc, a_s, b_s, y_s, fb, req)
            n = np.clip(n, -(1 << 40), 1 << 40).astype(np.int64) + zy
        elif req.compute == "exact":
            if req.multiplier_dtype == "exact":
                num, den = exact_multiplier(a_s, b_s, y_s)
            else:
                mn, me = _dyadic_parts(output_multiplier(a_s, b_s, y_s, req))
                num, den = _scaled(mn, np.ones(me.shape, dtype=np.int64), me)
            n = round_quotient(_obj(acc) * num, _obj(np.broadcast_to(den, acc.shape)), req.rounding)
            n = np.clip(n, -(1 << 40), 1 << 40).astype(np.int64) + zy
        else:
            dt = np.dtype(req.compute)
            if req.multiplier_dtype == "exact":
                num, den = exact_multiplier(a_s, b_s, y_s)  # the real multiplier rounded once to the compute dtype
                m = _round_ratio(num, den, dt)
            elif not req.association.startswith("sequential"):
                m = round_to(output_multiplier(a_s, b_s, y_s, req), dt)
            if req.association.startswith("sequential"):
                v = sequential_scale(acc, a_s, b_s, y_s, req, fb)
            elif fb is not None:  # float_accumulator: the bias in accumulator units, added to fl(acc)
                v = mul(add_bias_in_accumulator_units(acc, fb, a_s, b_s, dt), m, dt)
            else:
                v = mul(round_to(f64(acc), dt), m, dt)
            if req.zero_point == "before_rounding":
                n = round_float(round_to(f64(v) + zy, dt), req.rounding)
            else:
                n = round_float(v, req.rounding) + zy
    else:
        raise QrefError(f"requantize_accumulator takes methods float_multiply and fixed_point, not {req.method!r}")
    return np.clip(n, lo, hi), bad


def _round_ratio(num: np.ndarray, den: np.ndarray, dt: np.dtype) -> np.ndarray:
    """num / den (object arrays of positive Python ints: the multipliers, one per row / column) rounded once to
    ``dt`` (nearest even)."""
    n, d = np.broadcast_arrays(_obj(num), _obj(den))
    fr = [Fraction(int(x), int(y)) for x, y in zip(n.reshape(-1), d.reshape(-1))]
    return np.asarray(round_fractions(fr, dt), dtype=np.float64).reshape(n.shape).astype(dt)


def _dequantize_dot(A: np.ndarray, B: np.ndarray, za: np.ndarray, zb: np.ndarray, a_s: np.ndarray,
                    b_s: np.ndarray, y_s: np.ndarray, zy: int, output: str) -> np.ndarray:
    """matmul.md §5.4: fl32((q - z) s) per operand, the dot rounded once to float32, uniform_quantize."""
    f32 = np.dtype(np.float32)
    af = round_to(f64(A - za) * f64(a_s.reshape(-1, 1) if a_s.ndim else a_s), f32)
    bf = round_to(f64(B - zb) * f64(b_s), f32)
    d = Dyadic.from_floats(af).matmul(Dyadic.from_floats(bf)).round(get_format("float32"))
    sch = build_uniform(output, scale=float(y_s), zero_point=zy, profile="stablehlo")
    return np.asarray(sch.quantize(d.astype(np.float32)).codes).astype(np.int64)


def quantized_matmul(a: object, b: object, *, a_scale: object = None, a_zero_point: object = 0,
                     b_scale: object = None, b_zero_point: object = 0, y_scale: object = None,
                     y_zero_point: object = 0, bias: object = None, pipeline: QuantizedMatmul | None = None,
                     profile: str | Profile | None = None, **overrides: Any) -> MatmulOutput:
    """Y = requant(sum_k (A - za)(B - zb) + bias) (matmul.md §1): ``pipeline`` gives the operand storages, the
    output storage and the rules; ``profile`` (a matmul profile: "exact", "onnxruntime", "onnx_reference",
    "gemmlowp", ...) and ``overrides`` (rule fields by name) replace its rules. Granularity follows the shapes
    of the scales and zero points (a scalar: per tensor; M values: per row of A; N values: per column of B)."""
    pipe = pipeline or QuantizedMatmul()
    if profile is not None or overrides:
        rules = matmul_rules(profile, **overrides) if profile is not None else pipe.rules.replace(**overrides)
        pipe = dataclasses.replace(pipe, rules=rules,
                                   output=None if rules.requantization.method == "none" else pipe.output or "uint8")
    req = pipe.rules.requantization
    float_bias = bias if bias is not None and np.asarray(bias).dtype.kind == "f" else None
    if float_bias is not None:
        if req.method != "float_multiply":
            raise QrefError("a float bias enters a float_multiply requantization (matmul.md §4.1 C1)")
        bias = None
    acc, unspec = int_accumulate(a, b, a_zero_point, b_zero_point, bias, accumulation=pipe.rules.accumulation,
                                 a_storage=pipe.a.storage, b_storage=pipe.b.storage)
    if req.method == "none":
        return MatmulOutput(acc, unspec, acc)
    assert pipe.output is not None
    M, N = acc.shape
    if req.method == "dequantize_compute_quantize":
        if bias is not None:
            raise QrefError("dequantize_compute_quantize has no int32 bias (matmul.md §5.4 C2)")
        A, B = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        za = np.asarray(_zero_point(a_zero_point, "a_zero_point", pipe.a.storage, M, "row of a"))
        zb = _zero_point(b_zero_point, "b_zero_point", pipe.b.storage, N, "column of b")
        a_s = _scale(a_scale, "a_scale", M, "row of a")
        b_s = _scale(b_scale, "b_scale", N, "column of b")
        y_s = _scale(y_scale, "y_scale", 1, "tensor")
        zy = int(_zero_point(y_zero_point, "y_zero_point", pipe.output, 1, "tensor"))
        vals = _dequantize_dot(A, B, za.reshape(-1, 1) if za.ndim else za, zb, a_s, b_s, y_s, zy, pipe.output)
        return MatmulOutput(vals, np.zeros(vals.shape, dtype=bool), acc)
    vals, bad = requantize_accumulator(np.where(unspec, 0, acc), a_scale=a_scale, b_scale=b_scale,
                                       y_scale=y_scale, y_zero_point=y_zero_point, output=pipe.output,
                                       requantization=req, float_bias=float_bias,
                                       float_bias_stage=pipe.rules.float_bias)
    return MatmulOutput(vals, unspec | bad, acc)


__all__ = [
    "GRANULARITIES",
    "STORAGES",
    "IntAccumulation",
    "IntMatmulRules",
    "IntOperand",
    "MatmulOutput",
    "QuantizedMatmul",
    "Requantization",
    "add_bias_in_accumulator_units",
    "exact_multiplier",
    "int_accumulate",
    "matmul_rules",
    "multiply_by_quantized_multiplier",
    "output_multiplier",
    "quantize_bias",
    "quantize_multiplier",
    "quantized_matmul",
    "requantize_accumulator",
    "round_float",
    "round_quotient",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "scale_round_trip",
    "sequential_scale",
    "wrap_int32",
]
