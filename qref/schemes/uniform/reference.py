"""Uniform quantize and dequantize, the definition (spec: docs/spec/uniform.md §2.1, §2.2).

Functions of a ``UniformRecord`` (its storage, expressed type and ``UniformArithmetic`` rules) and of the
scales S and zero points Z already broadcastable against the input (``UniformRecord.expand``):

quantize (uniform.md §2.1), for each element with its scale s and zero point z:
    xc = cast(x, C)                         C = the compute dtype
    q  = xc / cast(s, C)                    or  xc * cast(1 / cast(s, C), C)        (scale_op)
    q  = q + cast(z, C)                     zero_point="before_rounding" (fused: one rounding with the multiply)
    q  = clamp(q, cast(lo, C), cast(hi, C)) clamp="float"
    n  = round(q)                           exact integer rounding of the float value (rounding mode)
    n  = n + z                              zero_point="after_rounding"; "after_rounding_float": fl_C(n + cast(z, C))
    n  = clamp(n, lo, hi)                   integer saturation / narrowed-range clamp
Float storage (ONNX fp8/fp4): q = xc / cast(s, C) is encoded with the core (saturating or not).
dequantize (uniform.md §2.2): (code - z) * s with the subtraction and the multiplication in the profile's dtypes.

``float_steps`` (steps 1-4) and ``integer_tail`` (steps 5-7) are the definition; fast.py computes the same for
the configurations its shortcuts cover and imports this module, never the reverse.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

import ml_dtypes
import numpy as np

from ...core.arith import convert, flush, fma_float32, round_fractions
from ...core.decode import decode
from ...core.encode import encode
from ...core.rounding import round_to_integer
from ...errors import QrefError
from ...formats import FloatFormat, IntFormat
from .validation import UniformRecord

__all__ = ["FLOAT_DTYPES", "cast", "compute_dtype", "dequantize_arrays", "dq_multiply_dtype", "fake_quantize",
           "float_steps", "fma32", "int_to_float", "integer_tail", "np_dtype", "quantize_arrays", "quantize_float",
           "range_steps", "reciprocal", "round_fraction", "round_to_int", "scale_in", "wrapped_zero_points"]

FLOAT_DTYPES = {
    "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
}


def np_dtype(fmt: FloatFormat) -> np.dtype:
    if fmt.name in FLOAT_DTYPES:
        return FLOAT_DTYPES[fmt.name]
    try:
        return np.dtype(getattr(ml_dtypes, fmt.name))
    except (AttributeError, TypeError):
        raise QrefError(f"expressed type {fmt.name} has no numpy/ml_dtypes dtype to compute in") from None


cast = convert  # one rounding from any source dtype (qref.core.arith.convert)


@lru_cache(maxsize=256)
def _cast_scalar(v: float | int, dt: np.dtype) -> np.ndarray:
    src = np.asarray(v, dtype=np.float64 if isinstance(v, float) else np.int64)
    out = cast(src, dt)
    out.setflags(write=False)  # cached: shared by every call
    return out


round_to_int = round_to_integer  # q rounded to an integer exactly, stochastic modes included (qref.core.rounding)


def round_fraction(v: Fraction, fmt: FloatFormat) -> float:
    """The exact rational v rounded to nearest-even in ``fmt`` (overflow to +-inf), as a Python float. Used for
    exact scale formulas and for decimal literals (mlir.py)."""
    return float(round_fractions([v], fmt)[0])


fma32 = fma_float32  # float32 fused multiply-add with one rounding (qref.core.arith.fma_float32)
_F32 = np.dtype(np.float32)
_FTZ_DTYPES = (_F32, np.dtype(ml_dtypes.bfloat16))
_ftz = flush  # XLA:CPU's FTZ/DAZ: float32/bfloat16 values below 2^-126 become zeros of their sign


def _keep(a: np.ndarray) -> np.ndarray:
    return a


_SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def int_to_float(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """cast(v, dt): numpy's conversion where every value is exact in dt (|v| <= 2^p, p the significand bits: by
    the integer dtype's range, or else by the values' range), else the core's correctly rounded ``cast``. A float
    v is cast as it is."""
    p = _SIGNIFICAND_BITS.get(dt.name)
    if v.dtype.kind in "iu" and p is not None:
        info = np.iinfo(v.dtype)
        if max(-int(info.min), int(info.max)) <= 1 << p:
            return v.astype(dt)
        if v.size and max(-int(v.min()), int(v.max())) <= 1 << p:
            return v.astype(dt)
    return cast(v, dt)


def _value_range(v: np.ndarray) -> tuple[int, int]:
    """(min, max) of an integer array: its dtype's range for 8-bit dtypes (no pass over it), else its values'."""
    if v.dtype.itemsize == 1 or v.size == 0:
        info = np.iinfo(v.dtype)
        return int(info.min), int(info.max)
    return int(v.min()), int(v.max())


def _difference_dtype(codes: np.ndarray, z: np.ndarray) -> np.dtype | None:
    """int16 or int32 when every code - z (codes of their integer dtype's range, z the zero points) fits it
    exactly; None otherwise (the int64 path)."""
    if codes.dtype.kind not in "iu" or codes.dtype.itemsize > 2 or z.size == 0:
        return None
    info = np.iinfo(codes.dtype)
    lo, hi = int(info.min) - int(z.max()), int(info.max) - int(z.min())
    for dt in (np.int16, np.int32):
        if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
            return np.dtype(dt)
    return None


def compute_dtype(r: UniformRecord, arr: np.ndarray) -> np.dtype:
    c = r.arithmetic.compute
    if c == "expressed":
        return np_dtype(r.expressed)
    if c == "input":
        if not (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16"):
            raise QrefError(f"profile {r.profile!r} computes in the input's dtype and needs a float "
                            f"input (float16/bfloat16/float32/float64), got {arr.dtype}")
        return arr.dtype
    return FLOAT_DTYPES[c]


def scale_in(r: UniformRecord, S: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Scales as dt values: via the expressed type (scale_source='expressed') or straight from float64."""
    if r.arithmetic.scale_source == "expressed":
        e = cast(S, np_dtype(r.expressed))
        if (e.astype(np.float64) == 0).any() or np.isinf(e.astype(np.float64)).any():
            raise QrefError(f"a scale rounds to 0 or Inf in the expressed type {r.expressed.name}")
        return cast(e, dt)
    return cast(S, dt)


def wrapped_zero_points(r: UniformRecord, Z: np.ndarray) -> np.ndarray:
    if r.arithmetic.zero_point_range != "wrap" or not isinstance(r.storage, IntFormat):
        return Z
    bits = r.storage.bits
    w = np.asarray(Z, dtype=np.int64) & ((1 << bits) - 1)
    if r.storage.signed:
        w = np.where(w >= (1 << (bits - 1)), w - (1 << bits), w)
    return w


def reciprocal(r: UniformRecord, inv: np.ndarray) -> np.ndarray:
    """fl(1 / s) under reciprocal_inf (uniform.md §2.1): an infinite reciprocal becomes 1 with "one"."""
    if r.arithmetic.reciprocal_inf == "one":
        return np.where(np.isinf(inv), np.ones((), inv.dtype), inv).astype(inv.dtype)
    return inv


def float_steps(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, _reference: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, Zb, unspecified): steps 1-4 of quantize (uniform.md §2.1) of ``arr`` with scales S and zero points Z
    broadcastable against it: q the scaled (zero point added before rounding, clamped) values in the compute
    dtype, Zb the (wrapped) int64 zero points, ``unspecified`` the mask so far. For float storage q is x / s
    only (its zero points are 0). Outside ``_reference`` numpy's conversions stand in for the core's where they
    are exact, and additions of zero are skipped (the same q but for the sign of a zero, uniform.md §2.5)."""
    A = r.arithmetic
    if A.range_form != "none":
        return range_steps(r, arr, S, Z)
    C = compute_dtype(r, arr)
    Z = wrapped_zero_points(r, Z)
    xc = arr if arr.dtype == C else cast(arr, C)  # read only below
    sc = scale_in(r, S, C)  # broadcastable against x: every step below is elementwise
    ftz = _ftz if A.flush_subnormals and C in _FTZ_DTYPES else _keep
    xc, sc = ftz(xc), ftz(sc)
    inv = None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if A.scale_op == "divide":
            q = np.asarray(xc / sc).astype(C, copy=False)
        elif A.bf16_upcast and np.dtype(ml_dtypes.bfloat16) == C:
            inv = reciprocal(r, ftz(np.asarray(np.float32(1) / sc.astype(np.float32)).astype(np.float32)))
            q = cast(np.asarray(xc.astype(np.float32) * inv).astype(np.float32, copy=False), C)
        else:
            inv = reciprocal(r, ftz(np.asarray(np.ones((), C) / sc).astype(C)))
            q = np.asarray(xc * inv).astype(C, copy=False)
    unspecified = np.zeros(arr.shape, dtype=bool)
    Zb = np.asarray(Z, dtype=np.int64)  # broadcastable against x; every step below is elementwise
    if isinstance(r.storage, FloatFormat):
        return q, Zb, unspecified
    lo, hi = r.storage_bounds
    if A.zero_point in ("before_rounding", "fused"):
        zc = cast(Zb, C) if _reference else int_to_float(Zb, C)  # equal: exact where numpy's is used
        if A.constants == "unspecified":
            inexact = zc.astype(np.float64) != Zb
            if _reference or inexact.any():
                unspecified |= np.broadcast_to(inexact, arr.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            if A.zero_point == "fused":
                assert inv is not None
                if not _reference and not np.any(zc) and C.name == "float32":
                    # fma(x, 1/s, 0) = fl32(x * (1/s)), the q above (one rounding of the exact product);
                    # only the sign of a zero can differ, which no integer code sees (uniform.md §2.5)
                    pass
                else:
                    q = fma32(xc, np.broadcast_to(inv, arr.shape), np.broadcast_to(zc, arr.shape))
            elif _reference or np.any(zc):
                q = np.asarray(q + zc).astype(C, copy=False)
            # else q + 0 = q but for the sign of a zero, which no integer code sees
    if A.clamp == "float":
        lo_c, hi_c = _cast_scalar(lo, C), _cast_scalar(hi, C)
        if A.constants == "unspecified":
            if float(lo_c) != lo:
                unspecified |= q.astype(np.float64) <= float(lo_c)
            if float(hi_c) != hi:
                unspecified |= q.astype(np.float64) >= float(hi_c)
        q = np.clip(q, lo_c, hi_c)
    return q, Zb, unspecified


def range_steps(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, 0, unspecified) of a FakeQuantize with input range [il, ih] and output range [lo, hi] (uniform.md §2.8):
    il = fl32((lo - z) * s), ih = fl32((hi - z) * s), n = hi - lo;
    scale_shift: t = fl32(fl32(clamp(x, il, ih) * isc) - fl32(il * isc)), isc = fl32(n / fl32(ih - il));
    normalize:   t = 0 (x <= il), n (x > ih), else fl32(fl32(fl32(x - il) / fl32(ih - il)) * n);
    q = fl32(fl32(fl32(round(t) / n) * n) + lo), an integer-valued float32 (the zero point is in il, ih)."""
    A = r.arithmetic
    if not isinstance(r.storage, IntFormat):
        raise QrefError(f"range_form={A.range_form!r} (a FakeQuantize, uniform.md §2.8) rounds to integer levels; "
                        f"{r.storage.name} is a float storage: use range_form='none'")
    lo, hi = r.storage_bounds
    f32 = np.float32
    s32 = scale_in(r, S, _F32).astype(np.float64)  # the float32 scale, exact in float64
    z = np.asarray(wrapped_zero_points(r, Z), dtype=np.int64).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        il = np.asarray((lo - z) * s32).astype(f32)  # (lo - z) * s is exact in float64: one rounding
        ih = np.asarray((hi - z) * s32).astype(f32)
        n = f32(hi - lo)
        x = cast(arr, _F32) if arr.dtype != _F32 else arr
        width = np.asarray(ih - il, dtype=f32)
        if A.range_form == "scale_shift":
            isc = np.asarray(n / width, dtype=f32)
            xc = np.minimum(np.maximum(x, il), ih)  # Maximum then Minimum: NaN stays NaN
            t = np.asarray(xc * isc, dtype=f32) - np.asarray(il * isc, dtype=f32)
        else:
            t = np.asarray(np.asarray((x - il).astype(f32) / width, dtype=f32) * n, dtype=f32)
            t = np.where(x <= il, f32(0), np.where(x > ih, n, t)).astype(f32)
        k, nan = round_to_int(np.asarray(t, dtype=f32), A.rounding)
        rk = np.where(nan, f32(0), k.astype(f32))
        q = np.asarray(np.asarray(np.asarray(rk / n, dtype=f32) * n, dtype=f32) + f32(lo), dtype=f32)
        q = np.where(nan, f32(np.nan), q).astype(f32)
    q = np.broadcast_to(q, arr.shape).copy()
    return q, np.zeros((), dtype=np.int64), np.zeros(arr.shape, dtype=bool)


def fake_quantize(x: np.ndarray, il: Any, ih: Any, ol: Any, oh: Any, levels: int, rule: Any) -> np.ndarray:
    """FakeQuantize(x, il, ih, ol, oh, levels) with a general float32 output range (uniform.md §2.8), float32 in and
    out, the ranges broadcast against x; ``rule`` a ``FakeQuantizeRule`` (qref.profiles.uniform) or the name of a
    profile in FAKE_QUANTIZE_RULES. With n = levels - 1:
    scale_shift: r = round_half_even(fl32(fl32(clamp(x, il, ih) * isc) - fl32(il * isc))), isc = fl32(n / fl32(ih -
    il)); y = r * osc + ol, osc = fl32(fl32(oh - ol) / n), fused or not (output_step), after recompose_ranges;
    normalize: x <= il: ol, x > ih: oh, else r = nearbyint(fl32(fl32(fl32(x - il) / fl32(ih - il)) * n)),
    y = fl32(fl32(fl32(r / n) * fl32(oh - ol)) + ol); identity_levels with scalar ranges ol = il, oh = ih: y = x.
    NaN inputs give unspecified outputs."""
    from ...profiles.uniform import FAKE_QUANTIZE_RULES, FakeQuantizeRule

    if isinstance(rule, str):
        if rule not in FAKE_QUANTIZE_RULES:
            raise QrefError(f"no FakeQuantize rule for profile {rule!r}; known: {sorted(FAKE_QUANTIZE_RULES)}")
        rule = FAKE_QUANTIZE_RULES[rule]
    if not isinstance(rule, FakeQuantizeRule):
        raise QrefError(f"rule must be a FakeQuantizeRule or a profile name, got {type(rule).__name__}")
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or not 3 <= int(levels) <= 2**32:
        raise QrefError(f"levels must be an integer from 3 to 2^32 (2 is binarization, not modelled), got {levels!r}")
    x = np.asarray(x)
    if x.dtype != _F32:
        raise QrefError(f"FakeQuantize is modelled for float32 inputs, got {x.dtype}: convert x to float32 first")
    f32 = np.float32
    il, ih, ol, oh = (np.asarray(v, dtype=np.float64).astype(f32) for v in (il, ih, ol, oh))
    try:
        shape = np.broadcast_shapes(x.shape, il.shape, ih.shape, ol.shape, oh.shape)
    except ValueError as e:
        raise QrefError(f"the ranges do not broadcast against x {x.shape}: {e}") from None
    if shape != x.shape:
        raise QrefError(f"the ranges broadcast x {x.shape} to {shape}: give ranges broadcastable to x's shape")
    if not np.all(il < ih):
        raise QrefError("FakeQuantize needs il < ih elementwise (uniform.md §2.8 C5): swap or widen the input range")
    levels = int(levels)
    if (levels in rule.identity_levels and all(v.size == 1 for v in (il, ih, ol, oh))
            and bool(np.all(il == ol)) and bool(np.all(ih == oh))):
        return x.copy()  # removed from the graph (§2.8 C7)
    axes = {x.ndim - v.ndim + i for v in (il, ih, ol, oh) for i, d in enumerate(v.shape) if d != 1}
    out_axes = {x.ndim - v.ndim + i for v in (ol, oh) for i, d in enumerate(v.shape) if d != 1}
    n = f32(levels - 1)
    m = dict(rule.recompose_ranges).get(levels)
    normalize = levels in rule.normalize_levels and len(axes) <= rule.normalize_max_axes
    if (not normalize and rule.node_min_axis is not None and levels not in rule.normalize_levels
            and len(axes) == 1 and min(axes) >= rule.node_min_axis):
        raise QrefError(f"FakeQuantize with {levels} levels and ranges varying along axis {min(axes)} is outside the "
                        f"rule (uniform.md §2.8 C8): the CPU plugin's FakeQuantize node computes it (axis 1) or "
                        f"refuses it (axis >= 2); use ranges per tensor, along axis 0 or along two or more axes")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if normalize:
            t = np.asarray(np.asarray((x - il).astype(f32) / np.asarray(ih - il, dtype=f32), dtype=f32) * n,
                           dtype=f32)
            r = np.rint(t).astype(f32)
            y = np.asarray(np.asarray(np.asarray(r / n, dtype=f32) * np.asarray(oh - ol, dtype=f32), dtype=f32) + ol,
                           dtype=f32)
            return np.where(x <= il, ol, np.where(x > ih, oh, y)).astype(f32)
        isc = np.asarray(n / np.asarray(ih - il, dtype=f32), dtype=f32)
        xc = np.minimum(np.maximum(x, il), ih)
        r = np.rint(np.asarray(xc * isc, dtype=f32) - np.asarray(il * isc, dtype=f32)).astype(f32)
        if m is not None:  # the output range through the integer range [0, m] (§2.8 C6)
            mf = f32(m)
            d = np.asarray(oh - ol, dtype=f32)
            scale = np.asarray(d / mf, dtype=f32)
            shift = np.asarray(np.asarray(f32(0) - np.asarray(mf * ol, dtype=f32), dtype=f32) / d, dtype=f32)
            if out_axes and max(out_axes) >= rule.recompose_axes:  # the dequantize stays separate
                q = np.rint(np.asarray(r * f32(mf / n), dtype=f32))  # the quantize output as u8 / u4 codes
                y = np.asarray(np.asarray(q - shift, dtype=f32) * scale, dtype=f32)
                return np.where(d != 0, y, ol).astype(f32)
            ol, oh = (np.where(d != 0, np.asarray(np.asarray(v - shift, dtype=f32) * scale, dtype=f32), w).astype(f32)
                      for v, w in ((f32(0), ol), (mf, oh)))
        osc = np.asarray(np.asarray(oh - ol, dtype=f32) / n, dtype=f32)
        if rule.output_step == "fma":
            return fma32(r, np.broadcast_to(osc, shape), np.broadcast_to(ol, shape))
        return np.asarray(np.asarray(r * osc, dtype=f32) + ol, dtype=f32)

def quantize_arrays(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(codes, unspecified) of ``arr`` with scales S and zero points Z broadcastable against it, the
    definition: ``float_steps`` then ``integer_tail`` (float storage: the core's encode)."""
    q, Zb, unspecified = float_steps(r, arr, S, Z)
    if isinstance(r.storage, FloatFormat):
        return quantize_float(r, q, unspecified, rbits), unspecified
    return integer_tail(r, q, Zb, unspecified, rbits), unspecified


def integer_tail(r: UniformRecord, q: np.ndarray, Z: np.ndarray, unspecified: np.ndarray,
                  random_bits: np.ndarray | None = None) -> np.ndarray:
    """Codes from the clamped float values q (uniform.md §2.1 steps 5-7): round, add the zero point after
    rounding, saturate, NaN and the unspecified placeholder; ``unspecified`` is updated in place. The
    definition; ``fast.integer_tail_fast`` computes the same (§2.5)."""
    A = r.arithmetic
    C = q.dtype
    lo, hi = r.storage_bounds
    zb = np.broadcast_to(Z, q.shape)
    n, nan = round_to_int(q, A.rounding, random_bits, A.stochastic_bits)
    full_lo, full_hi = r.storage.full_range
    if A.conversion == "int32":
        unspecified |= (n < -(2**31)) | (n > 2**31 - 1)
    if A.zero_point == "after_rounding":
        n = n + zb
    elif A.zero_point == "after_rounding_float":  # round(q) + z in C: an integer-valued float, rounded once
        zc = cast(np.asarray(zb, dtype=np.int64), C)
        if A.constants == "unspecified":
            unspecified |= zc.astype(np.float64) != zb
        q64 = np.asarray(q).astype(np.float64)
        rz = np.where(np.isinf(q64), q64, n.astype(np.float64))  # +-Inf stays Inf: -Inf + Inf is NaN
        with np.errstate(invalid="ignore"):
            n, nan_sum = round_to_int(cast(rz + zc.astype(np.float64), C), "nearest_even")
        nan = nan | nan_sum
    if A.zero_point.startswith("after_rounding") and A.conversion == "int32":
        unspecified |= (n < -(2**31)) | (n > 2**31 - 1)
    if A.conversion == "storage":
        unspecified |= (n < full_lo) | (n > full_hi)
    n = np.clip(n, lo, hi)
    if A.nan == "zero":
        n = np.where(nan, np.clip(0, lo, hi), n)
    else:
        unspecified |= nan
    placeholder = int(np.clip(0, lo, hi))
    return np.where(unspecified, placeholder, n).astype(r.codes_dtype)


def quantize_float(r: UniformRecord, q: np.ndarray, unspecified: np.ndarray, random_bits: np.ndarray | None = None
                    ) -> np.ndarray:
    A = r.arithmetic
    fmt = r.storage
    assert isinstance(fmt, FloatFormat)
    if any(z != 0 for z in r.zero_points):
        raise QrefError(f"float storage {fmt.name} takes zero points of 0 only (ONNX: the zero point of "
                        "float8/float4 outputs must be 0; MLIR's lowering has no float storage)")
    if r.storage_range is not None:
        raise QrefError(f"a narrowed float storage range {r.storage_range} has no defined quantize "
                        "(no system implements it); use the full range")
    overflow = "saturate" if A.float_saturate else None
    # ml_dtypes' conversion, the record the lock verifies (a fixed record: results never depend on what is
    # installed; uniform.md §2.1)
    stochastic: dict[str, Any] = {} if random_bits is None else {
        "random_bits": random_bits, "stochastic_bits": A.stochastic_bits}
    codes = encode(q, fmt, rounding=A.rounding, overflow=overflow, profile="ml_dtypes@0.7" if
                   not A.float_saturate else None, **stochastic)
    return codes.astype(r.codes_dtype)


def dq_multiply_dtype(r: UniformRecord) -> np.dtype:
    """The dtype of dequantize's multiplication by the scale (dq_multiply)."""
    E = np_dtype(r.expressed)
    mul = r.arithmetic.dq_multiply
    if mul == "expressed":
        return E
    if mul == "at_least_float32":
        return np.promote_types(np.float32, E) if E.name != "bfloat16" else np.dtype(np.float32)
    return FLOAT_DTYPES[mul]


def dequantize_arrays(r: UniformRecord, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray, dtype: object,
                       _reference: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, unspecified) of ``codes`` with scales S and zero points Z broadcastable against them;
    ``bad`` (q.unspecified, a copy) is updated in place. Outside ``_reference`` an integer code - z is taken
    in the narrowest integer dtype that holds every difference the dtypes allow (the same integers as
    int64, so int32's wrap is the identity; §2.5)."""
    A = r.arithmetic
    out_dt = np_dtype(r.expressed) if dtype is None else np.dtype(dtype)
    E = np_dtype(r.expressed)
    Zs = Z
    Z = np.broadcast_to(wrapped_zero_points(r, Z), codes.shape)
    if isinstance(r.storage, FloatFormat):
        d = decode(codes.astype(r.storage.code_dtype), r.storage, dtype=np.float32)
    else:
        sub = A.dq_subtract
        idt = None if _reference or sub not in ("int64", "int32", "storage") else _difference_dtype(
            codes, wrapped_zero_points(r, Zs))
        if idt is not None:  # every code - z exact in idt: the int64 difference, which int32 then keeps
            diff = np.subtract(codes, wrapped_zero_points(r, Zs).astype(idt), dtype=idt)
            if sub == "storage":
                lo, hi = r.storage.full_range
                dlo, dhi = _value_range(diff)
                if dlo < lo or dhi > hi:
                    bad |= (diff < lo) | (diff > hi)
            d = diff
        elif sub in ("int64", "int32", "storage"):
            diff = codes.astype(np.int64) - Z
            if sub == "int32":
                diff = ((diff + 2**31) % 2**32) - 2**31
            elif sub == "storage":
                lo, hi = r.storage.full_range
                bad |= (diff < lo) | (diff > hi)
            d = diff
        else:
            sd = E if sub == "expressed" else FLOAT_DTYPES[sub]
            with np.errstate(over="ignore", invalid="ignore"):
                zs = cast(np.asarray(wrapped_zero_points(r, Zs), np.int64), sd)  # the unbroadcast zero points
                d = np.asarray(int_to_float(codes, sd) - zs).astype(sd)
    md = dq_multiply_dtype(r)
    if A.dq_subtract == "storage" and A.constants == "unspecified" and (
            _reference or isinstance(r.storage, FloatFormat)
            or max(map(abs, _value_range(d))) > 1 << _SIGNIFICAND_BITS.get(md.name, 0)):
        with np.errstate(invalid="ignore"):  # float storage (NaN codes) takes the reference's int64 reading
            dm = int_to_float(np.asarray(d, dtype=np.int64), md)  # (every |d| <= 2^p is exact in md)
        bad |= dm.astype(np.float64) != np.asarray(d, dtype=np.float64)
    sm = scale_in(r, S, md)
    with np.errstate(over="ignore", invalid="ignore"):
        if A.dq_form == "multiply_add":  # fl32(fl32(q * s) + fl32(-z * double(s))) (uniform.md §2.2)
            s32 = np.asarray(scale_in(r, S, np.dtype(np.float32)))
            c = (-np.asarray(Z, np.float64) * s32.astype(np.float64)).astype(np.float32)
            p = np.asarray(codes.astype(np.float32) * s32).astype(np.float32)
            vals = cast(np.asarray(p + c).astype(np.float32), md)
        elif A.dq_form == "fma":  # fl32(q * s + fl32(-z * s)), one rounding (uniform.md §2.2)
            s32 = np.asarray(scale_in(r, S, np.dtype(np.float32)))
            c = (-np.asarray(Z, np.float64) * s32.astype(np.float64)).astype(np.float32)
            vals = cast(fma_float32(np.asarray(codes).astype(np.float32), s32, c), md)
        elif A.flush_subnormals and md in _FTZ_DTYPES:  # DAZ of the scale, FTZ of the float32 product
            p = np.asarray(int_to_float(np.asarray(d), np.dtype(np.float32))
                           * _ftz(np.asarray(sm).astype(np.float32)))
            vals = cast(_ftz(p.astype(np.float32)), md)
        else:
            vals = np.asarray(int_to_float(np.asarray(d), md) * sm).astype(md)
    return cast(vals, out_dt), bad
