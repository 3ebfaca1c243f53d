"""Quantized integer matrix products (spec: docs/spec/matmul.md).

Y = requant(sum_k (A[m,k] - za)(B[k,n] - zb) + bias) as a pipeline of records: the operands (``IntOperand``:
storage and scale / zero-point granularity, matmul.md §2), the accumulation (``IntAccumulation``: int32 wrap,
saturation or exact, int16 pair sums, matmul.md §3), the bias (matmul.md §4) and the requantization
(``Requantization``: none, float multiply, gemmlowp / TFLite fixed point, dequantize-compute-quantize, the
StableHLO lowering's separately scaled zero-point offset, matmul.md §5). The rule records and the named profiles
are data in qref.profiles.matmul; this module is the readable reference: vectorized numpy on int64 (Python
integers in object arrays where a product needs more than 63 bits), no loop over elements.

    quantized_matmul(a, b, a_scale=..., b_scale=..., y_scale=..., profile="onnxruntime")   # codes + mask
    int_accumulate(a, b, a_zero_point, b_zero_point)                                          # int32 accumulator
    quantize_multiplier(m), multiply_by_quantized_multiplier(x, q, shift)                     # gemmlowp / TFLite
    matmul_integer_to_float(a, b, a_scale=..., b_scale=..., bias=...)       # float32 out (matmul.md §8)
    dynamic_quantize_matmul(x, b, b_scale=...)                              # A quantized on the fly (§9)
    matmul_nbits(x, codes, scales, zero_points, block_size=32)              # 4-bit blockwise B, bound (§10)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.arith import div, f64, fma_float32, mul, round_fractions, round_to
from ..core.exact import plain_integers, typed_numbers
from ..errors import QrefError, check_choice
from ..formats import get_format
from ..profiles import Profile, resolve_profile
from ..profiles.matmul import (
    DynamicQuantization,
    HybridMatmulRules,
    IntAccumulation,
    IntMatmulRules,
    NBitsCompute,
    Requantization,
)
from ..schemes.uniform import build_uniform
from .exact import Dyadic, acc_format

#: storage name -> (lowest, highest) value; 4-bit storages hold their values in int8 / uint8 arrays
STORAGES = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15), "int16": (-32768, 32767)}
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
    a = plain_integers(np.asarray(x))  # ONNX's int4 / uint4 / int2 / uint2 typed arrays (uniform.md §1 (C9))
    if a.dtype.kind not in "iu":
        raise QrefError(f"{name} must be an integer array of {storage} values, got dtype {a.dtype}")
    if a.ndim != 2:
        raise QrefError(f"{name} must be 2-D, got shape {a.shape}")
    lo, hi = STORAGES[storage]
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        raise QrefError(f"{name} holds values outside {storage} [{lo}, {hi}] (matmul.md §2 C1)")
    return a.astype(np.int64)


def _vector(x: object, name: str, length: int, axis_name: str) -> np.ndarray:
    v = typed_numbers(np.asarray(x))  # typed zero points and scales as ONNX gives them (uniform.md §1 (C9))
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


def _extend(x: np.ndarray, storage: str, extension: str) -> np.ndarray:
    """Values of unsigned storage as their bits sign-extended ("sign": uint8 200 -> -56, matmul.md §3.3), else as
    they are."""
    lo, hi = STORAGES[storage]
    if extension != "sign" or lo < 0:
        return x
    return np.where(x > hi // 2, x - (hi + 1), x)


def narrow(y: np.ndarray, output: str, narrowing: str) -> np.ndarray:
    """int64 values to the output storage: "clamp" to its range or "wrap" (its low bits, read in the storage's
    signedness; matmul.md §5.5)."""
    lo, hi = STORAGES[output]
    if narrowing == "clamp":
        return np.clip(y, lo, hi)
    return ((np.asarray(y, dtype=np.int64) - lo) & hi - lo) + lo


def int_accumulate(a: object, b: object, a_zero_point: object = 0, b_zero_point: object = 0, bias: object = None,
                   *, accumulation: IntAccumulation | None = None, a_storage: str = "uint8",
                   b_storage: str = "int8") -> tuple[np.ndarray, np.ndarray]:
    """The accumulator sum_k (A[m,k] - za)(B[k,n] - zb) + bias under ``accumulation`` (matmul.md §3, §4):
    (int64 values in the int32 range, or the exact sum with overflow "exact"; bool mask of unspecified elements:
    an exact sum outside int32)."""
    acc = accumulation or IntAccumulation()
    check_choice("a storage", a_storage, STORAGES)
    check_choice("b storage", b_storage, STORAGES)
    A = _extend(_int_matrix(a, "a", a_storage), a_storage, acc.unsigned_extension)
    B = _extend(_int_matrix(b, "b", b_storage), b_storage, acc.unsigned_extension)
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
    elif acc.product == "abs_sign_int8":
        if (a_storage, b_storage) != ("int8", "int8") or np.any(zb != 0):
            raise QrefError("product 'abs_sign_int8' multiplies raw int8 codes with b's zero point 0 (matmul.md "
                            "§3.4 C1)")
        # |a| wrap8(sign(a) b): exact except a < 0 with b = -128, where the product is 128 a instead of -128 a
        w = acc.product_width * (K // acc.product_width) if acc.product_width else K  # the vector loop's products
        total = A @ B + 256 * (np.where(A[:, :w] < 0, A[:, :w], 0) @ (B[:w] == -128).astype(np.int64)) \
            - za * B.sum(axis=0)
    else:
        total = (A - za) @ (B - zb)
    if bias_v is not None:
        total = total + bias_v
    unspecified = np.zeros(total.shape, dtype=bool)
    if acc.overflow == "wrap":
        total = wrap_int32(total)
    elif acc.overflow == "saturate":
        total = np.clip(total, INT32_MIN, INT32_MAX)
    elif acc.overflow == "exact":
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
    if req.association == "ab_float32_if_per_tensor" and b.ndim == 0:  # one multiplier: fl32(a_s b_s) first
        return div(mul(a, b, np.dtype(np.float32)).astype(dt), y, dt)
    if req.association in ("ab_then_y", "ab_float32_if_per_tensor"):
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
    return _exact_ratio(*(np.broadcast_to(v, shape) for v in (a, b, y)))


def _exact_ratio(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a b / y (float arrays of one shape) as the exact rational (num, den) of object arrays of Python ints."""
    (na, ea), (nb, eb), (ny, ey) = (_dyadic_parts(v) for v in (a, b, y))
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
    (31 - shift); "double_rounding_half_up" = (t + 2^(right - 1)) >> right with t = (wrap32(x 2^left) q + 2^30)
    >> 31 (a t beyond 2^31 - 1 - nudge gives 2^(31 - right)); "single_rounding_q15" = (x q15 + 2^(14 - shift))
    >> (15 - shift) with q15 = min((q + 2^15) >> 16, 2^15 - 1) and x the int64 accumulator.
    Returns (int64 values, unspecified: an int32
    overflow C leaves undefined)."""
    v = np.asarray(x, dtype=np.int64)
    qq, sh = np.asarray(q, dtype=np.int64), np.asarray(shift, dtype=np.int64)
    if form == "double_rounding_half_up":
        left, right = np.maximum(sh, 0), np.maximum(-sh, 0)
        t = (wrap_int32(v << left) * qq + (np.int64(1) << 30)) >> 31  # 32-bit lane shift wraps; 64-bit product
        nudge = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
        r = np.where(t > INT32_MAX - nudge, np.int64(1) << (31 - right), (t + nudge) >> right)
        return r, np.zeros(r.shape, dtype=bool)
    if form == "single_rounding_q15":  # TFLite's int64 overload: q reduced to Q15, one rounding half up
        q15 = np.where(qq < 0x7FFF0000, (qq + (1 << 15)) >> 16, 0x7FFF)
        total = 15 - sh
        if np.any(total < 1):
            raise QrefError("single_rounding_q15 takes multipliers below 2^14 (shift <= 14; TFLite asserts shift "
                            "< 8), matmul.md §5.3")
        r = (v * q15 + (np.int64(1) << (total - 1))) >> total
        return r, (r < INT32_MIN) | (r > INT32_MAX)
    if form == "single_rounding":
        total = 31 - sh
        r = (v * qq + (np.int64(1) << (total - 1))) >> total
        return r, (r < INT32_MIN) | (r > INT32_MAX)
    left, right = np.maximum(sh, 0), np.maximum(-sh, 0)
    shifted = v << left
    # x * (1 << left) overflows int32: undefined in C (matmul.md §5.3); any x != 0 does for left >= 32 (numpy's
    # shift by >= 64 gives 0, so the product itself cannot tell)
    bad = (shifted < INT32_MIN) | (shifted > INT32_MAX) | ((v != 0) & (left > 31))
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
    """float_bias "exact": (acc a_s b_s + bias) / y_s in real arithmetic, rounded once by ``req.rounding``
    (``_round_real``: float64 where that is provably the same, exact integers elsewhere)."""
    if req.multiplier_dtype != "exact":
        raise QrefError("float_bias 'exact' computes with the real scales: multiplier_dtype 'exact'")
    a = np.asarray(a_s, dtype=np.float64)
    a = a.reshape(-1, 1) if a.ndim else a
    acc, a, b, y, z = np.broadcast_arrays(acc, a, *(np.asarray(v, np.float64) for v in (b_s, y_s, bias)))
    with np.errstate(all="ignore"):
        p = acc * (a * b)  # a b: exact (float32 scales); one rounding each for p, p + z and the quotient
        v = (p + z) / y
        err = ((np.abs(p) + np.abs(z)) / y + np.abs(v)) * 2.0**-50

    def exact(mask: np.ndarray) -> np.ndarray:
        # acc a b / y + z / y = (acc na nb 2^(ea + eb) + nz 2^ez) / (ny 2^ey)
        (na, ea), (nb, eb), (ny, ey), (nz, ez) = (_dyadic_parts(w[mask]) for w in (a, b, y, z))
        lo = np.minimum(ea + eb, ez)
        one = _obj(np.ones(lo.shape, dtype=np.int64))
        num = (_obj(acc[mask]) * _obj(na) * _obj(nb) * (one << _obj(ea + eb - lo))
               + _obj(nz) * (one << _obj(ez - lo)))
        num2, den = _scaled(num, ny, lo - ey)
        return round_quotient(num2, den, req.rounding)

    return _round_real(v, err, exact, req.rounding, np.abs(acc) <= 2**53)


def _round_real(v: np.ndarray, err: np.ndarray, exact: Any, rounding: str, usable: np.ndarray | bool = True
                ) -> np.ndarray:
    """Integers round(t) by ``rounding`` (matmul.md §5.2) of reals t known as float64 approximations v with
    |t - v| <= err: taken from v where no rounding boundary (an integer for toward_zero, an odd multiple of 1/2
    otherwise) lies within err of v, else from ``exact(mask)``, the exact rounding at the masked elements (also
    where v is not finite or ``usable`` is False). |v| >= 2^50 gives +-2^50: the callers clip to +-2^40, and the
    exact result lies beyond that too. The fast path of the exact quotients: tests/test_matmul.py holds it
    equal to round_quotient on the whole array."""
    with np.errstate(invalid="ignore"):
        f = np.floor(v)
        d = v - f  # exact
        if rounding == "toward_zero":
            safe = ((d > err) & (1.0 - d > err)) | (v == 0)
            n = f + ((v < 0) & (d > 0))
        else:
            safe = np.abs(d - 0.5) > err
            n = f + (d > 0.5)
        ok = np.isfinite(v) & np.isfinite(err) & usable
        big = ok & (np.abs(v) >= 2.0**50)
        out = np.where(big, np.sign(v) * 2.0**50, np.where(ok & safe, n, 0.0)).astype(np.int64)
    redo = ~(ok & (safe | big))
    if redo.any():
        ex = np.asarray(exact(redo), dtype=object)
        out[redo] = np.minimum(np.maximum(ex, -(2**50)), 2**50).astype(np.int64)  # the same saturation
    return out


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
            n = _exact_product(acc, a_s, b_s, y_s, req)
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
            nan = np.isnan(v)  # 0 times a multiplier that overflowed to Inf: unspecified (matmul.md §5.2 C2)
            if nan.any():
                bad = bad | nan
                v = np.where(nan, 0, v).astype(v.dtype)
            if req.zero_point == "before_rounding":
                n = round_float(round_to(f64(v) + zy, dt), req.rounding)
            else:
                n = round_float(v, req.rounding) + zy
    else:
        raise QrefError(f"requantize_accumulator takes methods float_multiply and fixed_point, not {req.method!r}")
    return narrow(n, output, req.narrowing), bad


def _exact_product(acc: np.ndarray, a_s: np.ndarray, b_s: np.ndarray, y_s: np.ndarray, req: Requantization
                   ) -> np.ndarray:
    """round(acc m) by ``req.rounding`` in real arithmetic, m = a_s b_s / y_s exactly (multiplier_dtype "exact")
    or the float multiplier of ``output_multiplier``; the reference is round_quotient(acc num, den) of the
    rational m = num / den, which ``_round_real`` computes only where float64 cannot tell."""
    if req.multiplier_dtype == "exact":
        a = np.asarray(a_s, dtype=np.float64)
        parts = np.broadcast_arrays(acc, a.reshape(-1, 1) if a.ndim else a, np.asarray(b_s, np.float64),
                                    np.asarray(y_s, np.float64))
        acc, a, b, y = parts
        m = (a * b) / y  # a b exact (float32 scales), the quotient rounded once

        def ratio(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return _exact_ratio(a[mask], b[mask], y[mask])
        rel = 2.0**-50  # two roundings of 2^-53 each, with room
    else:
        acc, m = np.broadcast_arrays(acc, output_multiplier(a_s, b_s, y_s, req).astype(np.float64))

        def ratio(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            mn, me = _dyadic_parts(m[mask])
            return _scaled(mn, np.ones(me.shape, dtype=np.int64), me)
        rel = 2.0**-51  # one rounding (m is a float: exact)

    def exact(mask: np.ndarray) -> np.ndarray:
        num, den = ratio(mask)
        return round_quotient(_obj(acc[mask]) * num, den, req.rounding)

    with np.errstate(all="ignore"):
        v = acc * m
    return _round_real(v, np.abs(v) * rel, exact, req.rounding, np.abs(acc) <= 2**53)


def _round_ratio(num: np.ndarray, den: np.ndarray, dt: np.dtype) -> np.ndarray:
    """num / den (object arrays of positive Python ints: the multipliers, one per row / column) rounded once to
    ``dt`` (nearest even)."""
    n, d = np.broadcast_arrays(_obj(num), _obj(den))
    fr = [Fraction(int(x), int(y)) for x, y in zip(n.reshape(-1), d.reshape(-1))]
    return np.asarray(round_fractions(fr, dt), dtype=np.float64).reshape(n.shape).astype(dt)


def dequantized_dot(A: np.ndarray, B: np.ndarray, za: object, zb: object, a_s: object, b_s: object,
                    dot: str = "rounded_once") -> np.ndarray:
    """The float32 dot of the dequantized operands fl32((A - za) a_s), fl32((B - zb) b_s) (matmul.md §5.4):
    "rounded_once" (the exact dot rounded once to float32) or "sequential_float32" (each product rounded, summed
    from 0 in k order in float32). A (M, K), B (K, N) int64; za / a_s per tensor or per row, zb / b_s per tensor
    or per column."""
    check_choice("dot", dot, ("rounded_once", "sequential_float32"))
    f32 = np.dtype(np.float32)
    A, B = np.asarray(A, np.int64), np.asarray(B, np.int64)
    za, a_s = np.asarray(za), np.asarray(a_s)
    za = za.reshape(-1, 1) if za.ndim else za
    af = round_to(f64(A - za) * f64(a_s.reshape(-1, 1) if a_s.ndim else a_s), f32)
    bf = round_to(f64(B - np.asarray(zb)) * f64(np.asarray(b_s)), f32)
    if dot == "rounded_once":
        return Dyadic.from_floats(af).matmul(Dyadic.from_floats(bf)).round(get_format("float32")).astype(np.float32)
    d = np.zeros((af.shape[0], bf.shape[1]), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(af.shape[1]):  # the k order is part of the result; vectorized over (M, N)
            d = (d + (af[:, k:k + 1] * bf[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    return d


def _dequantize_dot(A: np.ndarray, B: np.ndarray, za: np.ndarray, zb: np.ndarray, a_s: np.ndarray,
                    b_s: np.ndarray, y_s: np.ndarray, zy: int, output: str, req: Requantization | None = None
                    ) -> np.ndarray:
    """matmul.md §5.4: fl32((q - z) s) per operand, the dot (rounded once, or "sequential_float32": products
    rounded, summed in k order in float32), uniform_quantize (the spec's: round(fl32(d / y_s)) + zy; with zero
    point "before_rounding": rint(clamp(fl32(fl32(d / y_s) + zy))), the lowering's)."""
    req = req or Requantization(method="dequantize_compute_quantize")
    d = dequantized_dot(A, B, za, zb, a_s, b_s, req.dot)
    if req.zero_point == "before_rounding":
        lo, hi = STORAGES[output]
        with np.errstate(over="ignore", invalid="ignore"):
            v = ((d / np.float32(y_s.reshape(-1)[0])).astype(np.float32) + np.float32(zy)).astype(np.float32)
        if not np.all(np.isfinite(v)):
            raise QrefError("the dequantized dot overflows float32 or is NaN (matmul.md §5.4: unspecified)")
        return round_float(np.clip(v, np.float32(lo), np.float32(hi)), req.rounding)
    sch = build_uniform(output, scale=float(y_s), zero_point=zy, profile="stablehlo")
    return np.asarray(sch.quantize(d).codes).astype(np.int64)


def _to_int32_toward(v: np.ndarray, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """A float array converted to int32 by ``rounding`` (float-to-int convert: toward zero); (int64 values,
    unspecified: outside the int32 range, where the conversion is undefined)."""
    bad = ~np.isfinite(v) | (np.abs(np.asarray(v, dtype=np.float64)) >= 2.0**31)
    return round_float(np.where(bad, 0.0, v), rounding), bad


def _zero_point_offset(A: np.ndarray, B: np.ndarray, za: np.ndarray, zb: np.ndarray, a_s: np.ndarray,
                       b_s: np.ndarray, y_s: np.ndarray, zy: int, pipe: QuantizedMatmul
                       ) -> tuple[np.ndarray, np.ndarray]:
    """matmul.md §5.5: raw = dot(A, B), offset = zb sum_k A + za sum_k B - K za zb (int32 wrap, operands
    extended by the accumulation's rule); y = round(fl(fl(raw) m)) + (zy - round(fl(fl(offset) m))) unless
    |m - 1| <= unit_tolerance (then y = raw + (zy - offset)); narrowed to the output storage."""
    req, acc = pipe.rules.requantization, pipe.rules.accumulation
    K = A.shape[1]
    raw, bad = int_accumulate(A, B, 0, 0, accumulation=acc, a_storage=pipe.a.storage, b_storage=pipe.b.storage)
    Ae = _extend(A, pipe.a.storage, acc.unsigned_extension)
    Be = _extend(B, pipe.b.storage, acc.unsigned_extension)
    off = zb * Ae.sum(axis=1, keepdims=True) + za * Be.sum(axis=0) - K * za * zb
    off = wrap_int32(off) if acc.overflow == "wrap" else off
    if req.multiplier_dtype == "exact":
        raise QrefError("zero_point_offset applies a float multiplier: multiplier_dtype float32 or float64")
    m = np.broadcast_to(output_multiplier(a_s, b_s, y_s, req), raw.shape)
    skip = np.abs(m.astype(np.float64) - 1) <= req.unit_tolerance
    dt = np.dtype(req.compute if req.compute != "exact" else "float64")
    mc = round_to(m, dt)
    t_raw, bad_r = _to_int32_toward(mul(round_to(f64(raw), dt), mc, dt), req.rounding)
    t_off, bad_o = _to_int32_toward(mul(round_to(f64(off), dt), mc, dt), req.rounding)
    y = np.where(skip, wrap_int32(raw + wrap_int32(zy - off)), wrap_int32(t_raw + wrap_int32(zy - t_off)))
    assert pipe.output is not None
    return narrow(y, pipe.output, req.narrowing), bad | (~skip & (bad_r | bad_o))


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
    if pipe.rules.per_axis_requantization is not None and np.size(b_scale) > 1:
        req = pipe.rules.per_axis_requantization  # a per-axis B takes another path (matmul.md §6.3)
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
    if req.method in ("dequantize_compute_quantize", "zero_point_offset"):
        if bias is not None:
            raise QrefError(f"{req.method} has no int32 bias (matmul.md §5.4 C2, §5.5 C1)")
        A, B = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        za = np.asarray(_zero_point(a_zero_point, "a_zero_point", pipe.a.storage, M, "row of a"))
        zb = _zero_point(b_zero_point, "b_zero_point", pipe.b.storage, N, "column of b")
        a_s = _scale(a_scale, "a_scale", M, "row of a")
        b_s = _scale(b_scale, "b_scale", N, "column of b")
        y_s = _scale(y_scale, "y_scale", 1, "tensor")
        zy = int(_zero_point(y_zero_point, "y_zero_point", pipe.output, 1, "tensor"))
        if req.method == "zero_point_offset":
            vals, bad = _zero_point_offset(A, B, za.reshape(-1, 1) if za.ndim else za, zb, a_s, b_s, y_s, zy,
                                           pipe)
            return MatmulOutput(vals, bad, acc)
        vals = _dequantize_dot(A, B, za.reshape(-1, 1) if za.ndim else za, zb, a_s, b_s, y_s, zy, pipe.output, req)
        return MatmulOutput(vals, np.zeros(vals.shape, dtype=bool), acc)
    vals, bad = requantize_accumulator(np.where(unspec, 0, acc), a_scale=a_scale, b_scale=b_scale,
                                       y_scale=y_scale, y_zero_point=y_zero_point, output=pipe.output,
                                       requantization=req, float_bias=float_bias,
                                       float_bias_stage=pipe.rules.float_bias)
    return MatmulOutput(vals, unspec | bad, acc)


# ---- float output: MatMulIntegerToFloat (matmul.md §8) ---------------------------------------------------------
@dataclass
class FloatMatmulOutput:
    """A float32 result: ``values`` (float32), ``unspecified`` (bool), the ``accumulator`` (int64) and, for the
    dynamically quantized operand (matmul.md §9), its ``a_codes``, ``a_scale`` and ``a_zero_point``."""

    values: np.ndarray
    unspecified: np.ndarray
    accumulator: np.ndarray
    a_codes: np.ndarray | None = None
    a_scale: float | None = None
    a_zero_point: int | None = None


def _float_bias(bias: object, n: int) -> np.ndarray | None:
    if bias is None:
        return None
    v = _vector(bias, "bias", n, "column of b")
    if v.dtype != np.float32:
        raise QrefError(f"the float output's bias is a float32 array (matmul.md §8 C2), got dtype {v.dtype}")
    return v


def float_output(acc: np.ndarray, *, a_scale: object, b_scale: object, bias: object = None,
                 requantization: Requantization | None = None, float_bias: str = "exact",
                 a_scale_form: str | None = None) -> np.ndarray:
    """The float32 output of the int32 accumulator (matmul.md §8): y = fl(fl(acc) * m) (+ bias, float32) with
    m = a_s * b_s in ``requantization.multiplier_dtype`` and the product in ``requantization.compute``; with
    compute "exact", y = fl32(acc a_s b_s + bias), one rounding. The sequential associations read y_s = 1:
    y = fl(fl(fl(acc) a_s) b_s) (+ bias); scale_form "reciprocal_round_trip" replaces the scales by
    fl32(1 / fl32(fl64(1 / s))), A's only when ``a_scale_form`` is None ("as_given": a dynamic quantization
    handed over the kernel's own A scale, matmul.md §15). ``float_bias`` "fused_multiply_add": y = fl32(fl32(acc) m +
    bias) with one rounding (matmul.md §15)."""
    req = requantization or Requantization(method="float_output")
    acc = np.asarray(acc, dtype=np.int64)
    M, N = acc.shape
    a_s = _scale(a_scale, "a_scale", 1, "tensor")
    b_s = _scale(b_scale, "b_scale", N, "column of b")
    bias_v = _float_bias(bias, N)
    f32 = np.dtype(np.float32)
    if req.compute == "exact":
        if req.multiplier_dtype != "exact":
            m = Dyadic.from_floats(np.broadcast_to(output_multiplier(a_s, b_s, np.float32(1), req), (1, N)))
        else:
            m = Dyadic.from_floats(np.broadcast_to(a_s, (1, N))) * Dyadic.from_floats(np.broadcast_to(b_s, (1, N)))
        d = Dyadic(acc.astype(object), 0) * Dyadic(np.broadcast_to(m.num, (M, N)), m.exp)
        if bias_v is not None:
            d = d + Dyadic.from_floats(np.broadcast_to(bias_v, (M, N)))
        return np.asarray(d.round(acc_format("float32")), dtype=np.float32)
    dt = np.dtype(req.compute)
    if req.multiplier_dtype == "exact":
        raise QrefError("an exact multiplier is used with compute 'exact' (matmul.md §8)")
    mdt = np.dtype(req.multiplier_dtype)
    a, b = np.asarray(a_s, np.float32), np.asarray(b_s, np.float32)
    if req.scale_form == "reciprocal_round_trip":
        b = scale_round_trip(b)
        a = a if a_scale_form == "as_given" else scale_round_trip(a)
    acc_c = round_to(f64(acc), dt)
    if req.association == "sequential_reciprocal_y":
        v = mul(mul(acc_c, a, dt), b, dt)
    else:
        m = mul(a, b, mdt)
        if float_bias == "fused_multiply_add" and bias_v is not None:
            if (dt, mdt) != (f32, f32):
                raise QrefError("float_bias 'fused_multiply_add' is a float32 fused multiply-add: compute and "
                                "multiplier_dtype float32 (matmul.md §15)")
            return np.asarray(fma_float32(acc_c, np.broadcast_to(m, (M, N)), np.broadcast_to(bias_v, (M, N))),
                              dtype=np.float32)
        v = mul(acc_c, round_to(m, dt), dt)
    if bias_v is not None:
        v = round_to(f64(v) + f64(bias_v), dt)
    return np.asarray(round_to(v, f32), dtype=np.float32)


def matmul_integer_to_float(a: object, b: object, *, a_scale: object, b_scale: object, a_zero_point: object = 0,
                            b_zero_point: object = 0, bias: object = None, a_storage: str = "uint8",
                            b_storage: str = "int8", profile: str | Profile | None = None,
                            rules: IntMatmulRules | None = None, a_scale_form: str | None = None
                            ) -> FloatMatmulOutput:
    """Y = fl(fl(sum_k (A - za)(B - zb)) * fl(a_s b_s)) + bias in float32 (matmul.md §8; com.microsoft
    MatMulIntegerToFloat): the accumulation of ``profile`` (default "exact") and its requantization record with
    method "float_output" (multiplier a_s * b_s, per tensor or per column of B) and the float32 bias added last
    (or fused: float_bias "fused_multiply_add", §15)."""
    r = rules or matmul_rules(profile)
    r = r.replace(method="float_output", bias="output")
    acc, unspec = int_accumulate(a, b, a_zero_point, b_zero_point, None, accumulation=r.accumulation,
                                 a_storage=a_storage, b_storage=b_storage)
    y = float_output(np.where(unspec, 0, acc), a_scale=a_scale, b_scale=b_scale, bias=bias,
                     requantization=r.requantization, float_bias=r.float_bias, a_scale_form=a_scale_form)
    return FloatMatmulOutput(y, unspec, acc)


# ---- dynamic quantization: DynamicQuantizeMatMul, PyTorch's dynamic Linear (matmul.md §9, §15) ----------------
@dataclass
class DynamicCodes:
    """A float32 tensor quantized on the fly (matmul.md §9, §15): ``codes`` (uint8), ``scale`` (s, float32),
    ``zero_point`` and ``kernel_scale`` (the scale the kernel quantizes with and scales the output by: s, or
    fl32(1 / fl32(1 / s_d)))."""

    codes: np.ndarray
    scale: np.float32
    zero_point: int
    kernel_scale: np.float32


def _dynamic_range(lo: np.float32, hi: np.float32, d: DynamicQuantization) -> tuple[float, np.float32, int]:
    """(s_d, s, z): the scale in float64 (s_d; = s with float32 arithmetic), the codes' scale and zero point of
    the range [lo, hi] (lo <= 0 <= hi, float32; matmul.md §9, §15)."""
    f = np.float32
    qmax = d.code_max
    with np.errstate(over="ignore", divide="ignore"):
        if d.scale_arithmetic == "float32":
            s = f(d.degenerate_scale) if hi == lo else f(f(hi - lo) / f(qmax))
            sd = float(s)
        else:
            sd = (float(hi) - float(lo)) / qmax
            if f(sd) == 0 or not np.isfinite(f(1) / f(sd)):
                sd = d.degenerate_scale
            if sd < d.min_scale:  # the floor: the range is widened in float32 to keep the zero point
                floor, org = f(d.min_scale), f(sd)
                sd = float(floor)
                if lo == 0:
                    hi = f(floor * f(qmax))
                elif hi == 0:
                    lo = f(-(floor * f(qmax)))
                else:
                    amp = f(floor / org)
                    lo, hi = f(lo * amp), f(hi * amp)
            s = f(sd)
    if not np.isfinite(s) or s == 0:
        raise QrefError("dynamic quantization: max - min overflows float32 or the scale underflows (matmul.md §9 "
                        "C1)")
    if d.zero_point_rule == "from_min":
        z0 = float(np.clip(f(f(0) - f(lo / s)), f(0), f(qmax)))
    else:
        z_min, z_max = 0.0 - float(lo) / sd, qmax - float(hi) / sd
        z0 = z_min if -abs(float(lo) / sd) < qmax - abs(float(hi) / sd) else z_max
        z0 = min(max(z0, 0.0), float(qmax))
    return sd, s, int(round_float(np.asarray(z0), "nearest_even"))


def dynamic_quantize(x: object, dq: DynamicQuantization | None = None) -> DynamicCodes:
    """A float32 tensor quantized on the fly to unsigned codes per tensor by ``dq`` (matmul.md §9, §15)."""
    d = dq or DynamicQuantization()
    v = np.asarray(x)
    if v.dtype != np.float32:
        raise QrefError(f"dynamic quantization takes a float32 tensor (matmul.md §9 C1), got dtype {v.dtype}")
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise QrefError("dynamic quantization takes a non-empty tensor of finite values (matmul.md §9 C1)")
    f = np.float32
    sd, s, zp = _dynamic_range(min(f(v.min()), f(0)), max(f(v.max()), f(0)), d)
    qmax = d.code_max
    k = s if d.kernel_scale == "scale" else f(f(1) / f(1.0 / sd))
    r = f(1) / k
    t = (v / k).astype(np.float32) if d.division == "divide" else (v * r).astype(np.float32)
    if d.zero_point_add == "after_rounding":
        t = np.clip(t, f(-zp), f(qmax - zp))
        codes = round_float(t, "nearest_even") + zp
    else:
        if d.zero_point_add == "fused":
            if d.division == "divide":
                raise QrefError("zero_point_add 'fused' is a fused multiply-add of the reciprocal (matmul.md §15)")
            t = fma_float32(v, np.broadcast_to(r, v.shape), np.broadcast_to(f(zp), v.shape))
        else:
            t = (t + f(zp)).astype(np.float32)
        codes = round_float(np.clip(t, f(0), f(qmax)), "nearest_even")
    return DynamicCodes(np.asarray(codes).astype(np.uint8), s, zp, k)


def dynamic_quantize_uint8(x: object, dq: DynamicQuantization | None = None) -> tuple[np.ndarray, np.float32, int]:
    """A float32 tensor quantized on the fly to uint8 per tensor (matmul.md §9): (codes, scale, zero point)."""
    r = dynamic_quantize(x, dq)
    return r.codes, r.scale, r.zero_point


def dynamic_quantize_matmul(a: object, b: object, *, b_scale: object, b_zero_point: object = 0, bias: object = None,
                            b_storage: str = "int8", profile: str | Profile | None = None,
                            dynamic: DynamicQuantization | None = None, rules: IntMatmulRules | None = None
                            ) -> FloatMatmulOutput:
    """A float32 A quantized to uint8 per tensor on the fly, then the float output (matmul.md §9, §15;
    com.microsoft DynamicQuantizeMatMul, PyTorch's quantized.linear_dynamic): ``dynamic`` (default: the rules'
    record), then ``matmul_integer_to_float`` with the quantization's output scale and zero point (§8)."""
    A = np.asarray(a)
    if A.ndim != 2:
        raise QrefError(f"a must be 2-D, got shape {A.shape}")
    r = rules or matmul_rules(profile)
    q = dynamic_quantize(A, dynamic or r.dynamic)
    form = "as_given" if (dynamic or r.dynamic).kernel_scale != "scale" else None
    out = matmul_integer_to_float(q.codes, b, a_scale=q.kernel_scale, b_scale=b_scale, a_zero_point=q.zero_point,
                                  b_zero_point=b_zero_point, bias=bias, a_storage="uint8", b_storage=b_storage,
                                  rules=r, a_scale_form=form)
    return FloatMatmulOutput(out.values, out.unspecified, out.accumulator, q.codes, q.scale, q.zero_point)


# ---- 4-bit blockwise weights: MatMulNBits (matmul.md §10) -----------------------------------------------------
NBITS_BLOCKS = (16, 32, 64, 128, 256)
U32 = 2.0**-24  # the unit roundoff of float32


@dataclass
class NBitsResult:
    """MatMulNBits under ``compute`` (matmul.md §10): ``exact`` (the exact result S as a Dyadic), ``value``
    (S rounded once to float32), ``bound`` (float64: |result - S| <= bound for every order, §10.3), ``lo`` /
    ``hi`` (float32: the least and greatest float32 within the bound) and, for "int8_blocks", ``a_codes``
    (M, n_blocks, block) and ``a_scales`` (M, n_blocks)."""

    exact: Dyadic
    value: np.ndarray
    bound: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    a_codes: np.ndarray | None = None
    a_scales: np.ndarray | None = None


def quantize_a_int8_blocks(a: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A (M, K) float32 quantized per block of ``block_size`` along K to int8 (matmul.md §10.2): (codes (M, nb,
    block) int64 with zeros past K, scales (M, nb) float32): s = fl32(amax / 127), q = round_half_even(fl32(a *
    fl32(127 / amax))); an all-zero block has s = 0 and codes 0."""
    f = np.float32
    M, K = a.shape
    nb = -(-K // block_size)
    ap = np.zeros((M, nb * block_size), np.float32)
    ap[:, :K] = a
    ab = ap.reshape(M, nb, block_size)
    amax = np.abs(ab).max(axis=-1).astype(np.float32)
    nz = amax != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(nz, (amax / f(127)).astype(np.float32), f(0)).astype(np.float32)
        r = np.where(nz, (f(127) / amax).astype(np.float32), f(0)).astype(np.float32)
    q = round_float((ab * r[..., None]).astype(np.float32), "nearest_even")
    return np.clip(q, -127, 127), s


def _nbits_weights(b_codes: object, scales: object, zero_points: object, K: int, block_size: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = np.asarray(b_codes)
    if q.ndim != 2 or q.shape[1] != K or q.dtype.kind not in "iu":
        raise QrefError(f"b_codes must be an (N, K) = (N, {K}) integer array of uint4 codes (matmul.md §10 C1)")
    if q.size and (int(q.min()) < 0 or int(q.max()) > 15):
        raise QrefError("b_codes hold uint4 values 0..15 (matmul.md §10 C1)")
    N = q.shape[0]
    nb = -(-K // block_size)
    s = np.asarray(scales)
    if s.shape != (N, nb) or s.dtype != np.float32 or not np.all(np.isfinite(s)):
        raise QrefError(f"scales must be finite float32 of shape (N, n_blocks) = ({N}, {nb}) (matmul.md §10 C2)")
    z = np.full((N, nb), 8, np.int64) if zero_points is None else np.asarray(zero_points).astype(np.int64)
    if z.shape != (N, nb) or (z.size and (int(z.min()) < 0 or int(z.max()) > 15)):
        raise QrefError(f"zero_points must be uint4 values of shape ({N}, {nb}) (matmul.md §10 C2)")
    return q.astype(np.int64), s, z


def _bounded_float_a(a: object, clause: str) -> np.ndarray:
    """The float A of a product compared within the bound of matmul.md §10.3: 2-D float32, finite, 1 <= K <=
    160,000 (where (K + 3) u32 <= 1e-2)."""
    A = np.asarray(a)
    if A.ndim != 2 or A.dtype != np.float32 or not np.all(np.isfinite(A)):
        raise QrefError(f"a must be a 2-D float32 array of finite values ({clause})")
    K = A.shape[1]
    if K == 0 or (K + 3) * U32 > 1e-2:
        raise QrefError(f"K = {K}: the bound of matmul.md §10.3 holds for 1 <= K <= 160,000")
    return A


def matmul_nbits(a: object, b_codes: object, scales: object, zero_points: object = None, bias: object = None, *,
                 block_size: int = 32, nbits: NBitsCompute | None = None) -> NBitsResult:
    """Y = A B^T with B[n, k] = (q[n, k] - z[n, k // block]) s[n, k // block] (matmul.md §10; com.microsoft
    MatMulNBits, 4 bits): the exact result of ``nbits.compute`` ("float32_dequantize": float A, exact B;
    "int8_blocks": A quantized per block to int8, §10.2), S rounded to float32 and the rigorous bound (§10.3)."""
    comp = nbits or NBitsCompute()
    if block_size not in NBITS_BLOCKS:
        raise QrefError(f"block_size must be one of {NBITS_BLOCKS} (matmul.md §10 C3), got {block_size}")
    A = _bounded_float_a(a, "matmul.md §10 C1")
    K = A.shape[1]
    q, s, z = _nbits_weights(b_codes, scales, zero_points, K, block_size)
    N = q.shape[0]
    nb = s.shape[1]
    bias_v = _float_bias(bias, N)
    blk = np.arange(K) // block_size
    d = q - z[:, blk]  # (N, K) exact integers
    codes = scl = None
    if comp.compute == "float32_dequantize":
        B = (d * f64(s[:, blk])).T  # exact in float64: a 5-bit integer times a float32
        S = Dyadic.from_floats(A).matmul(Dyadic.from_floats(B))
        mag = np.abs(f64(A)) @ np.abs(B)
        terms = K + 3  # K - 1 adds, a product and the dequantization rounding per term, the bias add
    else:
        codes, scl = quantize_a_int8_blocks(A, block_size)
        dp = np.zeros((N, nb * block_size), np.int64)
        dp[:, :K] = d
        qp = np.zeros((N, nb * block_size), np.int64)
        qp[:, :K] = q
        dots = np.einsum("mbk,nbk->mnb", codes, dp.reshape(N, nb, block_size))  # exact int32 block dots
        da = Dyadic.from_floats(scl)
        db = Dyadic.from_floats(s)
        prod = Dyadic(da.num[:, None, :] * db.num[None, :, :], da.exp + db.exp)  # s_a s_b, exact (M, N, nb)
        S = Dyadic(prod.num * dots.astype(object), prod.exp).sum(axis=2)
        absq = np.abs(codes).astype(np.float64)
        mag_k = (np.einsum("mbk,nbk->mnb", absq, np.abs(qp).reshape(N, nb, block_size).astype(np.float64))
                 + absq.sum(-1)[:, None, :] * z[None, :, :])  # sum_k |q_a| (|q_b| + z): both forms' terms
        mag = (mag_k * f64(scl)[:, None, :] * f64(s)[None, :, :]).sum(-1)
        terms = 2 * nb + 6  # per block: the scale product, the scaling, the zero-point term; the block sum; bias
    return _bounded(S, mag, terms, bias_v, codes, scl)


def _bounded(S: Dyadic, mag: np.ndarray, terms: int, bias_v: np.ndarray | None, codes: np.ndarray | None = None,
             scl: np.ndarray | None = None) -> NBitsResult:
    """The exact result S (+ bias), its float32 rounding and the interval of the bound 1.01 terms u mag (§10.3)."""
    if bias_v is not None:
        S = S + Dyadic.from_floats(np.broadcast_to(bias_v, S.shape))
        mag = mag + np.abs(f64(bias_v))
    bound = np.asarray(mag * (terms * U32 * 1.01) * (1 + 2.0**-40), dtype=np.float64)
    f32 = acc_format("float32")
    bd = Dyadic.from_floats(bound)
    value = np.asarray(S.round(f32), dtype=np.float32)
    lo = np.asarray((S + (-bd)).round(f32, rounding="up"), dtype=np.float32)
    hi = np.asarray((S + bd).round(f32, rounding="down"), dtype=np.float32)
    return NBitsResult(S, value, bound, lo, hi, codes, scl)


BNB4_TABLES = {"nf4": "nf4", "fp4": "fp4_bnb"}


def matmul_bnb4(a: object, b_codes: object, absmax: object, *, block_size: int = 64, quant_type: str = "nf4"
                ) -> NBitsResult:
    """Y = A B^T with B[n, k] = table[q[n, k]] absmax[(n K + k) // block] (matmul.md §12; com.microsoft
    MatMulBnb4: bitsandbytes' NF4 / FP4 tables, blocks over the flattened (N, K) weight): the exact result, its
    float32 rounding and the float32_dequantize bound of §10.3."""
    from ..tables import get_table

    if quant_type not in BNB4_TABLES:
        raise QrefError(f"quant_type must be one of {sorted(BNB4_TABLES)} (matmul.md §12 C1), got {quant_type!r}")
    if block_size < 16 or block_size & (block_size - 1):
        raise QrefError(f"block_size must be a power of two >= 16 (matmul.md §12 C1), got {block_size}")
    A = _bounded_float_a(a, "matmul.md §12 C2")
    K = A.shape[1]
    q = np.asarray(b_codes)
    if q.ndim != 2 or q.shape[1] != K or q.dtype.kind not in "iu" or (q.size and (q.min() < 0 or q.max() > 15)):
        raise QrefError(f"b_codes must be an (N, {K}) array of 4-bit codes (matmul.md §12 C2)")
    N = q.shape[0]
    nblk = -(-(N * K) // block_size)
    am = np.asarray(absmax)
    if am.shape != (nblk,) or am.dtype != np.float32 or not np.all(np.isfinite(am)):
        raise QrefError(f"absmax must be {nblk} finite float32 values (matmul.md §12 C2)")
    table = np.asarray(get_table(BNB4_TABLES[quant_type]).values, dtype=np.float32)
    scale = f64(am)[np.arange(N * K) // block_size].reshape(N, K)
    B = (f64(table)[q.astype(np.int64)] * scale).T  # exact in float64: two float32 significands
    S = Dyadic.from_floats(A).matmul(Dyadic.from_floats(B))
    return _bounded(S, np.abs(f64(A)) @ np.abs(B), K + 3, None)


# ---- QGemm: alpha, an int32 C, float or quantized output (matmul.md §11) ----------------------------------------
def qgemm(a: object, b: object, *, a_scale: object, b_scale: object, a_zero_point: object = 0, b_zero_point: object = 0,
          c: object = None, y_scale: object = None, y_zero_point: object = 0, alpha: float = 1.0,
          a_storage: str = "uint8", b_storage: str = "int8", output: str = "float32",
          profile: str | Profile | None = None, rules: IntMatmulRules | None = None
          ) -> MatmulOutput | FloatMatmulOutput:
    """com.microsoft QGemm (matmul.md §11): acc = sum_k (A - za)(B - zb) + C (int32, in the accumulator, §4), the
    scale alpha a_s b_s (/ y_s) applied as ``profile``'s requantization (§5.2, output a storage) or float output
    (§8, output "float32"); ``rules`` replace the profile's. alpha * a_s must be a float32 value (C1): it takes
    a_s's place in the multiplier."""
    al = np.float32(alpha)
    a_s = _scale(a_scale, "a_scale", 1, "tensor")
    folded = f64(al) * f64(a_s)
    if float(al) != float(alpha) or not al > 0 or float(np.float32(folded)) != float(folded):
        raise QrefError("alpha must be a positive float32 whose product with a_scale is a float32 value (matmul.md "
                        "§11 C1)")
    a_s2 = np.float32(folded)
    rules = rules or matmul_rules(profile)
    if output == "float32":
        if y_scale is not None:
            raise QrefError("a float32 output has no y_scale (matmul.md §11 C2)")
        rules = rules.replace(method="float_output")
        acc, unspec = int_accumulate(a, b, a_zero_point, b_zero_point, c, accumulation=rules.accumulation,
                                     a_storage=a_storage, b_storage=b_storage)
        y = float_output(np.where(unspec, 0, acc), a_scale=a_s2, b_scale=b_scale,
                         requantization=rules.requantization)
        return FloatMatmulOutput(y, unspec, acc)
    pipe = QuantizedMatmul(IntOperand(a_storage), IntOperand(b_storage), output, rules)
    return quantized_matmul(a, b, a_scale=a_s2, a_zero_point=a_zero_point, b_scale=b_scale, b_zero_point=b_zero_point,
                            y_scale=y_scale, y_zero_point=y_zero_point, bias=c, pipeline=pipe)


# ---- dynamic-range (hybrid) products: per-row int8 activations, int8 weights, float32 out (matmul.md §17) -------
@dataclass
class HybridOutput:
    """A hybrid product's result: ``values`` (float32 (M, N)), the activation ``codes`` (int64 (M, K)), their
    per-row ``scales`` (float32 (M,)) and ``zero_points`` (int64 (M,)), and the int32 ``accumulator``."""

    values: np.ndarray
    codes: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray
    accumulator: np.ndarray


def _round_codes(v: np.ndarray, dq: DynamicQuantization) -> np.ndarray:
    """v (float32 (M, K)) rounded to integers by ``dq.rounding``; with a vector rounding, the first
    vector_width * floor(K / vector_width) elements of every row by trunc(fl32(v + copysign(0.5, v))) (§17.1)."""
    r = round_float(v, dq.rounding)
    if dq.vector_rounding == "add_half_truncate":
        w = dq.vector_width * (v.shape[1] // dq.vector_width)
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.trunc((v[:, :w] + np.copysign(np.float32(0.5), v[:, :w])).astype(np.float32))
        r[:, :w] = t
    return r


def dynamic_quantize_rows(x: object, dq: DynamicQuantization) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A float32 (M, K) operand quantized per row to int8 (matmul.md §17.1): (codes int64 (M, K), scales float32
    (M,), zero points int64 (M,)). Every step is float32 unless the scaling says float64 (its zero point)."""
    if dq.storage != "int8" or dq.granularity != "per_row":
        raise QrefError("dynamic_quantize_rows quantizes per row to int8 (matmul.md §17.1); per-tensor uint8 is "
                        "dynamic_quantize_uint8 (§9)")
    v = np.asarray(x)
    if v.dtype != np.float32 or v.ndim != 2 or v.size == 0:
        raise QrefError(f"the activation is a non-empty (M, K) float32 array (matmul.md §17 C1), got {v.dtype} "
                        f"{v.shape}")
    if not np.all(np.isfinite(v)):
        raise QrefError("the activation holds finite values (matmul.md §17 C1: NaN / Inf rows are unspecified)")
    f = np.float32
    M = v.shape[0]
    z = np.zeros((M, 1), np.int64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if dq.scaling == "absmax_symmetric":
            R = np.max(np.abs(v), axis=1, keepdims=True)
            zero = R == 0
            s = np.where(zero, f(1), (R / f(127)).astype(f)).astype(f)
            inv = (f(127) / R).astype(f) if dq.division == "inverse_scale" else None
            lo_q, hi_q = -127, 127
        else:
            lo = np.minimum(v.min(axis=1, keepdims=True), f(0))
            hi = np.maximum(v.max(axis=1, keepdims=True), f(0))
            rng = (hi - lo).astype(f)
            zero = rng == 0
            lo_q, hi_q = -128, 127
            if dq.scaling == "min_max_float64_zero_point":
                s64 = rng.astype(np.float64) / 255.0
                a, b = lo.astype(np.float64) / s64, hi.astype(np.float64) / s64
                zd = np.where(128 + np.abs(a) < 127 + np.abs(b), -128 - a, 127 - b)
                zd = np.where(zero, 0.0, zd)
                z = np.where(zd <= -128, -128, np.where(zd >= 127, 127, round_float(np.clip(zd, -128, 127),
                                                                                      "nearest_away")))
                s = np.where(zero, f(1), s64.astype(f)).astype(f)
                inv = None
            else:  # min_max_inverse_scale
                c = np.where(zero, f(1), (f(255) / rng).astype(f)).astype(f)
                a, b = (lo * c).astype(f), (hi * c).astype(f)
                e = ((f(-128) + a).astype(f) + (b + f(127)).astype(f)).astype(f)
                zf = np.where(e > 0, (f(-128) - a).astype(f), (f(127) - b).astype(f))
                z = round_float(np.clip(zf, f(-128), f(127)), "nearest_even")
                s = (f(1) / c).astype(f)
                inv = c
        if not np.all(np.isfinite(s)) or np.any(s == 0):
            raise QrefError("a row's range overflows float32 or its scale underflows to 0 (matmul.md §17 C1)")
        if dq.division == "divide":
            q = (v / s).astype(f)
        elif dq.division == "reciprocal":
            q = (v * (f(1) / s).astype(f)).astype(f)
        else:
            if inv is None:
                raise QrefError("division 'inverse_scale' needs scaling absmax_symmetric or min_max_inverse_scale")
            q = (v * inv).astype(f)
    q = np.where(zero, f(0), q)
    codes = np.clip(_round_codes(q, dq).astype(np.int64) + z, lo_q, hi_q)
    return codes, s.reshape(-1), z.reshape(-1).astype(np.int64)


def hybrid_matmul(x: object, w: object, *, w_scale: object, bias: object = None,
                  rules: HybridMatmulRules | None = None, profile: str | Profile | None = None) -> HybridOutput:
    """Y = x W with x (M, K) float32 quantized per row on the fly and W (K, N) int8 codes of scale w_scale (one,
    or one per column) and zero point 0 (matmul.md §17):

        q, s, z = dynamic_quantize_rows(x)                                         # §17.1
        acc[m, n] = sum_k (q[m, k] - z[m]) W[k, n]                                 # §17.2, int32
        y = fl32(fl32(fl32(acc) * fl32(s[m] w_s[n])) + bias[n])                    # association ab_then_y
        y = fma(fl32(fl32(acc) * s[m]), w_s[n], bias[n])                           # sequential_reciprocal_y, fused
    """
    if rules is None:
        p = resolve_profile(profile or "litert_hybrid_symmetric", "matmul").profile
        if not isinstance(p.rules, HybridMatmulRules):
            raise QrefError(f"profile {p.name!r} is not a hybrid product profile (matmul.md §17.4)")
        rules = p.rules
    codes, s, z = dynamic_quantize_rows(x, rules.quantization)
    K = codes.shape[1]
    W = _int_matrix(w, "w", "int8")
    if W.shape[0] != K:
        raise QrefError(f"x is (M, K) = {codes.shape} and w must be (K, N) with K = {K}, got {W.shape}")
    N = W.shape[1]
    ws = _scale(w_scale, "w_scale", N, "column of w")
    bias_v = _float_bias(bias, N)
    acc, _ = int_accumulate(codes, W, z, 0, accumulation=rules.rules.accumulation, a_storage="int8",
                            b_storage="int8")
    req, f = rules.rules.requantization, np.float32
    if req.compute != "float32" or req.multiplier_dtype != "float32":
        raise QrefError("the hybrid output stage is float32 (compute and multiplier_dtype 'float32', §17.3)")
    s2, ws2 = s.reshape(-1, 1), np.broadcast_to(ws, (N,)).reshape(1, -1)
    acc_f = acc.astype(f)
    if req.association == "sequential_reciprocal_y":
        t = (acc_f * s2).astype(f)
    elif req.association == "ab_then_y":
        t, ws2 = acc_f, (s2 * ws2).astype(f)
    else:
        raise QrefError(f"the hybrid output stage takes association 'ab_then_y' or 'sequential_reciprocal_y', not "
                        f"{req.association!r} (matmul.md §17.3)")
    bias_b = np.zeros((1, N), f) if bias_v is None else bias_v.reshape(1, -1)
    with np.errstate(over="ignore", invalid="ignore"):
        if rules.rules.float_bias == "fused_multiply_add":
            y = fma_float32(t, ws2, np.broadcast_to(bias_b, t.shape))
        else:
            y = (t * ws2).astype(f)
            if bias_v is not None:
                y = (y + bias_b).astype(f)
    return HybridOutput(np.asarray(y, f), codes, s, z, acc)


__all__ = [
    "GRANULARITIES",
    "STORAGES",
    "DynamicCodes",
    "DynamicQuantization",
    "FloatMatmulOutput",
    "HybridMatmulRules",
    "HybridOutput",
    "IntAccumulation",
    "IntMatmulRules",
    "IntOperand",
    "MatmulOutput",
    "NBitsCompute",
    "NBitsResult",
    "QuantizedMatmul",
    "Requantization",
    "add_bias_in_accumulator_units",
    "dequantized_dot",
    "dynamic_quantize",
    "dynamic_quantize_matmul",
    "dynamic_quantize_rows",
    "dynamic_quantize_uint8",
    "exact_multiplier",
    "float_output",
    "hybrid_matmul",
    "int_accumulate",
    "matmul_bnb4",
    "matmul_integer_to_float",
    "matmul_nbits",
    "matmul_rules",
    "multiply_by_quantized_multiplier",
    "output_multiplier",
    "qgemm",
    "quantize_a_int8_blocks",
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
