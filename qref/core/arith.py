"""Emulated IEEE arithmetic, the one place for it (spec: elements.md §5; block.md §3.2; lut.md §1.1; recipes.md
§2.2; mma.md §3.7).

Every rounding to a float type goes through the core's encode; numpy's own ``astype`` is used only for the
conversions where it is the same function (exact widenings; the IEEE narrowing to float32). Contents:

- dtype maps: ``F64``, ``F32``, ``F16``, ``BF16``, ``FLOAT_DTYPES``, ``float_dtype``, ``dtype_name``,
  ``np_dtype``, ``f64``, the compute dtypes of the schemes (``COMPUTE_DTYPES``, ``resolve_compute_dtype``);
- rounding: ``round_to`` (RN_dtype, optional XLA:CPU flush-to-zero), ``convert``, ``round_values`` (any float
  format and rounding, on float64 carriers), ``round_fractions`` / ``fractions_to_float32`` (exact rationals),
  ``flush``, ``pow2``, ``in_float32`` / ``op_in_float32`` (torch/XLA: 16-bit arithmetic computed in float32);
- the basic operations ``add``, ``sub``, ``mul``, ``div`` in a compute dtype (with ``ftz``) and ``add_round``,
  ``mul_round`` on float64 carriers;
- ``two_sum``, ``two_prod``, ``distill``, ``round_odd_sum``, the fused multiply-adds ``fma_float32`` and ``fma64``;
- ``table_argmin``: the first entry of a value table nearest to x, with the distance rounded to a dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction

import ml_dtypes
import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, get_format
from ..formats.policy import CastPolicy
from .decode import decode
from .encode import encode, encode_flat

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F32_MIN_NORMAL = 2.0**-126
FLT_MAX = float(np.finfo(np.float32).max)

#: the compute / table dtypes of the lookup and block schemes, by name
FLOAT_DTYPES: dict[str, np.dtype] = {"float32": F32, "float16": F16, "bfloat16": BF16}

COMPUTE_DTYPES = ("exact", "input", "float32", "float16", "bfloat16")


def resolve_compute_dtype(name: str, x_dtype: np.dtype) -> np.dtype | None:
    """The dtype a scheme computes in: None for "exact"; for "input", x's dtype when it is float32, float16 or
    bfloat16 and float32 otherwise (float64 and integer inputs are first rounded to float32)."""
    if name == "exact":
        return None
    if name == "input":
        return x_dtype if x_dtype in (F32, F16, BF16) else F32
    return {"float32": F32, "float16": F16, "bfloat16": BF16}[name]


_ROUND_POLICY = CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign")

#: (source, target) dtype-name pairs where numpy's astype is used instead of the core's encode; both give the
#: same value (exact widening, or float32's one IEEE rounding) and differ only in a NaN's payload, which astype
#: keeps and encode replaces by the format's NaN of the same sign
NATIVE = {
    "widening": frozenset({("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"),
                           ("bfloat16", "float64"), ("float32", "float64")}),
    "to_float32": frozenset({("float64", "float32"), ("float16", "float32"), ("bfloat16", "float32")}),
}


# ---------------------------------------------------------------------------------------------------------
# dtype maps
# ---------------------------------------------------------------------------------------------------------
def float_dtype(name: str | np.dtype | type) -> np.dtype:
    """The numpy dtype for a compute/table dtype name (float32, float16, bfloat16)."""
    key = name if isinstance(name, str) else np.dtype(name).name
    if key not in FLOAT_DTYPES:
        raise QrefError(f"unsupported float dtype {key!r}; use one of {', '.join(FLOAT_DTYPES)}")
    return FLOAT_DTYPES[key]


def dtype_name(dt: np.dtype) -> str:
    """'float32' / 'float16' / 'bfloat16' for a numpy dtype, or raise."""
    for name, d in FLOAT_DTYPES.items():
        if np.dtype(dt) == d:
            return name
    raise QrefError(f"unsupported float dtype {np.dtype(dt)}; use float32, float16 or bfloat16")


def np_dtype(fmt: FloatFormat) -> np.dtype:
    """The numpy dtype of float64, float32, float16 or bfloat16."""
    return BF16 if fmt.name == "bfloat16" else np.dtype(fmt.name)


def f64(v: object) -> np.ndarray:
    """v as float64 (exact from every float dtype of at most 64 bits), without numpy's cast warnings for NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(v).astype(F64)


def float32_bits(values: np.ndarray) -> tuple[int, ...]:
    """The float32 bit patterns of a float32 array, as Python ints."""
    return tuple(int(v) for v in np.asarray(values, dtype=np.float32).view(np.uint32).ravel())


# ---------------------------------------------------------------------------------------------------------
# rounding to a float type
# ---------------------------------------------------------------------------------------------------------
def flush(v: np.ndarray, min_normal: float = F32_MIN_NORMAL) -> np.ndarray:
    """FTZ / DAZ: v_i -> copysign(0, v_i) where 0 < |v_i| < min_normal (float32's 2^-126 by default)."""
    v = np.asarray(v)
    with np.errstate(invalid="ignore"):
        if v.dtype in (F32, F64) and float(v.dtype.type(min_normal)) == min_normal:
            a = np.abs(v)  # the threshold is exact in v's dtype: the comparison is the same as in float64
            tiny = a < v.dtype.type(min_normal)
            if not tiny.any():  # no zero and no tiny value: nothing to flush (two passes fewer)
                return v
            tiny &= a != 0
        else:
            tiny = (np.abs(f64(v)) < min_normal) & (v != 0)
    if not tiny.any():
        return v
    return np.where(tiny, np.copysign(np.zeros((), v.dtype), v), v)


def round_to(v: object, dtype: object, ftz: bool = False, *, native: str = "to_float32") -> np.ndarray:
    """RN_dtype(v): v (any float/int array) rounded once to ``dtype`` by nearest-even, overflow to +-Inf, NaN
    kept with its sign (the core's encode; ``native`` names the dtype pairs done by astype, see NATIVE).

    ftz (XLA:CPU, block.md §3.2): v is first rounded to float32 and flushed (``flush``), then rounded to dtype."""
    v = np.asarray(v)
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    if ftz:
        v = flush(round_to(v, F32, native=native))
    if v.dtype == dt:
        return v.copy()
    if (v.dtype.name, dt.name) in NATIVE[native]:
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(dt)
    fmt = get_format(dt.name)
    codes = encode_flat(np.ascontiguousarray(v).reshape(-1), fmt, _ROUND_POLICY.resolve(fmt))
    return codes.view(dt).reshape(v.shape)


def convert(x: object, dtype: object) -> np.ndarray:
    """x rounded once to ``dtype`` (float64/32/16, bfloat16 or an ml_dtypes float) by nearest_even, overflow to
    +-Inf, NaN kept with its sign: numpy's ``astype`` without its double rounding (e.g. float64 -> bfloat16).
    ``round_to`` with astype for the exact widenings only; float64 -> float32 is IEEE's conversion (one
    nearest-even rounding) with NaN made canonical, as the core makes it (tests/test_uniform_fast.py)."""
    arr = np.asarray(x)
    if arr.dtype == F64 and np.dtype(dtype) == F32:  # type: ignore[call-overload]
        with np.errstate(invalid="ignore", over="ignore"):
            out = arr.astype(F32)
        nan = np.isnan(out)
        if nan.any():
            out[nan] = np.copysign(np.float32(np.nan), out[nan])
        return out
    return round_to(arr, dtype, native="widening")


def round_values(v: np.ndarray, fmt: FloatFormat, rounding: str = "nearest_even", ftz: bool = False
                 ) -> np.ndarray:
    """float64 array of v rounded once to ``fmt`` by ``rounding`` (overflow to +-Inf, NaN kept); ftz: results
    below the format's smallest normal become zeros of their sign (recipes.md §2.2)."""
    v = np.asarray(v, dtype=np.float64)
    if fmt.name in ("float64", "float32") and rounding == "nearest_even":
        out = f64(round_to(v, fmt.name))
    else:
        codes = encode(v, fmt, rounding=rounding, overflow="inf", nan="keep_sign")
        out = decode(codes, fmt, dtype=np.float64)
    return flush(out, float(fmt.min_normal)) if ftz else out


def round_fractions(values: Iterable[Fraction | int] | np.ndarray, dtype: object = np.float64) -> np.ndarray:
    """Exact rationals rounded once to ``dtype`` (nearest_even, overflow to +-Inf). ``dtype`` may also be any
    float format (e.g. "tfloat32"): the rounded values are then returned as float64 (exact for formats whose
    values float64 holds)."""
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=object).reshape(-1)
    name = dtype.name if isinstance(dtype, FloatFormat) else dtype
    try:
        dt = np.dtype(name)
    except TypeError:  # a format without a numpy dtype (tfloat32, P3109...)
        fmt = get_format(name)
        codes = encode(arr, fmt, rounding="nearest_even", overflow="inf", nan="keep_sign")
        return decode(codes, fmt, dtype=np.float64)
    return convert(arr, dt)


def fractions_to_float32(values: Iterable[Fraction | int | float]) -> np.ndarray:
    """Exact rationals rounded once to float32 (nearest_even, overflow to +-Inf): round_fractions to float32."""
    return round_fractions([Fraction(v) for v in values], np.float32)


def pow2(e: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """2^e as float64 (dtype None) or rounded to ``dtype`` (so 2^-25 is 0 in float16, 2^128 is Inf)."""
    v = np.ldexp(np.ones(np.shape(e)), np.clip(np.asarray(e, dtype=np.int64), -1100, 1100))
    return v if dtype is None else round_to(v, dtype)


def in_float32(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """RN_dtype(RN_32(v)): v (float64, exact or correctly rounded) rounded to float32 and then, for a 16-bit
    ``dtype``, once more: how torch computes one elementwise operation on a 16-bit tensor on CPU."""
    r = round_to(v, F32)
    return r if dtype == F32 else round_to(r, dtype)


def op_in_float32(a: object, b: object, fn: Callable[..., np.ndarray], dtype: str) -> np.ndarray:
    """RN_dtype(fn_32(a, b)) as float32: fn computed in float32 (IEEE, one rounding), then rounded to dtype
    (float32 / float16 / bfloat16): what torch and XLA compute for 16-bit tensors. a, b hold values of dtype."""
    with np.errstate(all="ignore"):
        r = np.asarray(fn(np.asarray(a, np.float32), np.asarray(b, np.float32)), dtype=np.float32)
    return r if dtype == "float32" else convert(r, float_dtype(dtype)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------------
# basic operations in a compute dtype (block.md §3.2): computed in float64 (exact for products, correctly
# rounded for quotients and sums of operands of at most 24 bits), then rounded once to the dtype
# ---------------------------------------------------------------------------------------------------------
def _operand(a: object, ftz: bool) -> np.ndarray:
    arr = np.asarray(a)
    if ftz and arr.dtype.kind in "fV":
        arr = flush(arr)
    return f64(arr)


def div(a: object, b: object, dtype: np.dtype, ftz: bool = False) -> np.ndarray:
    """fl_dtype(a / b) (IEEE: x/0 = +-Inf, 0/0 = NaN); with ftz, DAZ on the operands and FTZ on the result."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return round_to(_operand(a, ftz) / _operand(b, ftz), dtype, ftz)


def mul(a: object, b: object, dtype: np.dtype, ftz: bool = False) -> np.ndarray:
    """fl_dtype(a * b); with ftz, DAZ on the operands and FTZ on the result."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, ftz) * _operand(b, ftz), dtype, ftz)


def sub(a: object, b: object, dtype: np.dtype) -> np.ndarray:
    """fl_dtype(a - b)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, False) - _operand(b, False), dtype)


def add(a: object, b: object, dtype: np.dtype) -> np.ndarray:
    """fl_dtype(a + b)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(_operand(a, False) + _operand(b, False), dtype)


# ---------------------------------------------------------------------------------------------------------
# error-free transformations and round-to-odd (mma.md §3.7; recipes.md §2.2)
# ---------------------------------------------------------------------------------------------------------
def two_sum(a: np.ndarray, b: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None,
            tmp: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) with s = fl(a + b) and t = a + b - s exactly (Knuth's TwoSum; exact barring overflow):
    bb = s - a, t = (a - (s - bb)) + (b - bb). out: (s, t) buffers to write (neither may be a or b), tmp: a
    buffer for bb (default: new arrays); the same operations in the same order either way."""
    if out is None:
        s = a + b
        bb = s - a
        return s, (a - (s - bb)) + (b - bb)
    s, t = out
    bb = np.empty_like(s) if tmp is None else tmp
    np.add(a, b, out=s)
    np.subtract(s, a, out=bb)
    np.subtract(s, bb, out=t)
    np.subtract(a, t, out=t)
    np.subtract(b, bb, out=bb)
    np.add(t, bb, out=t)
    return s, t


def distill(terms: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(h, r) with h + r ~ sum of the float64 terms, h = fl(sum) and |r| below ulp(h): n + 1 passes of two_sum
    over the n terms make them non-overlapping (h the top one, r the sum of the others, mma.md §3.6 C1)."""
    x = list(terms)
    for _ in range(len(x) + 1):
        for k in range(1, len(x)):
            x[k], x[k - 1] = two_sum(x[k], x[k - 1])
    h, rest = x[-1], x[0]
    for t in x[1:-1]:
        rest = rest + t
    return h, rest


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = x * 134217729.0  # Veltkamp: 2^27 + 1
    hi = c - (c - x)
    return hi, x - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p = fl(a * b) and e = a * b - p exactly (Dekker; |a|, |b| in [1, 2))."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def round_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RO(a + b) in float64: the exact sum if representable, else the neighbour of s = fl(a + b) toward the
    TwoSum error with an odd last bit; rounding RO(a + b) once to a format of precision p <= 51 is RN(a + b)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s, t = two_sum(a, b)
        even = (s.view(np.int64) & 1) == 0
        fix = (t != 0) & even & np.isfinite(s)
        return np.where(fix, np.nextafter(s, np.where(t > 0, np.inf, -np.inf)), s)


def add_round(a: np.ndarray, b: np.ndarray, fmt: FloatFormat, ftz: bool = False) -> np.ndarray:
    """RN_fmt(a + b) for exact float64 carriers a, b: round_values(RO(a + b), fmt) (recipes.md §2.2); ftz:
    operands and result below fmt's smallest normal flushed."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if ftz:
        a, b = flush(a, float(fmt.min_normal)), flush(b, float(fmt.min_normal))
    if fmt.name == "float64":
        with np.errstate(invalid="ignore", over="ignore"):
            s = a + b
        return flush(s, float(fmt.min_normal)) if ftz else s
    return round_values(round_odd_sum(a, b), fmt, ftz=ftz)


def mul_round(a: np.ndarray, b: np.ndarray, fmt: FloatFormat, ftz: bool = False) -> np.ndarray:
    """RN_fmt(a * b) for float64 carriers whose product is exact in float64 (significands of at most 53 bits
    together; the callers pass float32/float16/bfloat16 and narrower values)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if ftz:
        a, b = flush(a, float(fmt.min_normal)), flush(b, float(fmt.min_normal))
    with np.errstate(invalid="ignore", over="ignore"):
        return round_values(a * b, fmt, ftz=ftz)


# ---------------------------------------------------------------------------------------------------------
# fused multiply-add (mma.md §3.7)
# ---------------------------------------------------------------------------------------------------------
def float_bits(x: np.ndarray) -> np.ndarray:
    """Bit patterns of a float16/float32/float64 array as int64 (float64: via uint64 wrap)."""
    return x.view(f"u{x.dtype.itemsize}").astype(np.int64)


def _fma_inf(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The infinite result of fma(a, b, c) with a non-finite operand (NaN cases are overridden later)."""
    pinf = np.isinf(a) | np.isinf(b)
    neg = np.signbit(a) ^ np.signbit(b)
    inf = np.array(np.inf, a.dtype)
    return np.where(pinf, np.where(neg, -inf, inf), c)


def _nan_select(a: np.ndarray, b: np.ndarray, c: np.ndarray, quiet: int, default: int,
                r: np.ndarray) -> np.ndarray:
    """IEEE specials of fma(a, b, c) as bits: the first NaN of a, b, c (quietened), else the default NaN for
    an invalid operation (inf * 0, inf - inf), else the bits of r (mma.md §3.7 C3)."""
    ab, bb, cb = (float_bits(v) for v in (a, b, c))
    inv = (np.isinf(a) & (b == 0)) | (np.isinf(b) & (a == 0))
    prod_inf = (np.isinf(a) | np.isinf(b)) & ~inv & ~np.isnan(a) & ~np.isnan(b)
    prod_neg = np.signbit(a) ^ np.signbit(b)
    inv |= prod_inf & np.isinf(c) & (prod_neg != np.signbit(c))
    out = float_bits(r)
    out = np.where(inv, default, out)
    out = np.where(np.isnan(c), cb | quiet, out)
    out = np.where(np.isnan(b), bb | quiet, out)
    out = np.where(np.isnan(a), ab | quiet, out)
    return out


FMA_NAN_RULES = ("canonical", "ieee_first")


@np.errstate(all="ignore")
def fma_float32(a: object, b: object, c: object, *, nan: str = "canonical") -> np.ndarray:
    """float32 fma(a, b, c) = RN32(a * b + c) with a single rounding, vectorized (mma.md §3.7 C2).

    a * b is exact in float64 (24 + 24 <= 53 bits); RO(a * b + c) in float64 (round_odd_sum) makes the final
    float64 -> float32 rounding correct (53 >= 24 + 2). NaN results: "canonical" (float32's NaN with the sign
    numpy's float64 arithmetic gives), "ieee_first" (the first NaN operand quietened, else the default NaN
    0xFFC00000: mma.md §3.7 C3); infinite results are the same under both."""
    if nan == "canonical":
        a, b, c = np.broadcast_arrays(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                      np.asarray(c, np.float32))
    elif nan == "ieee_first":  # operands as given (float32 or narrower), NaN bits read in their own width
        a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    else:
        raise QrefError(f"unknown fma NaN rule {nan!r}; use one of {', '.join(FMA_NAN_RULES)}")
    s = round_odd_sum(f64(a) * f64(b), f64(c))
    if nan == "canonical":
        return convert(s, np.float32)
    r = s.astype(np.float32)
    fin = np.isfinite(s)  # finite operands never overflow in float64
    if fin.all():
        return r
    r = np.where(fin, r, _fma_inf(a, b, c))
    bits = _nan_select(a, b, c, 0x400000, 0xFFC00000, r)
    return bits.astype(np.uint32).view(np.float32)


def _round_to_grid(terms: list[np.ndarray], g: np.ndarray) -> np.ndarray:
    """RNE(sum of exact float64 terms) onto the grid 2^g, returned scaled by 2^-1074 / 2^g (mma.md §3.7 C4).

    Repeated two_sum passes make the terms non-overlapping (h on top, the rest r below ulp(h)); h / 2^g rounds
    to an integer n (RNE) except at an exact tie, which r's sign decides. Needs |sum| < 2^52 2^g."""
    h, rest = distill(terms)
    q = np.ldexp(h, -g)
    n = np.rint(q)
    y = q - n
    tie = np.abs(y) == 0.5
    n = np.where(tie & (rest != 0) & ((rest > 0) == (y > 0)), n + np.sign(y), n)
    out = np.ldexp(n, -1074)
    return np.where(out == 0, np.copysign(0.0, h), out)


@np.errstate(all="ignore")
def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RNE(a * b + c) in float64 with one rounding (mma.md §3.7 C4).

    Finite operands: a = ma 2^ea, b = mb 2^eb with ma, mb in [1, 2); ma * mb = uh + ul exactly (Dekker);
    c' = c 2^-(ea+eb) (c clamped to a sticky stand-in when it lies more than 2^-160 below the product or the
    product lies that far below c); (th, tl) = two_sum(c', uh); v = RO(tl + ul); z = RN(th + v) 2^(ea+eb)
    (Boldo-Melquiond three-term sum). Results at or below 2^-1022: the exact th + tl + ul rounded once onto the
    grid 2^-1074 (``_round_to_grid``; ldexp does not round subnormal results to nearest)."""
    fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    az, bz, cz = (np.where(fin, v, 1.0) for v in (a, b, c))
    pz = (az == 0) | (bz == 0)
    ma, ea = np.frexp(np.where(pz, 1.0, np.abs(az)))
    mb, eb = np.frexp(np.where(pz, 1.0, np.abs(bz)))
    ma, mb = ma * 2.0, mb * 2.0
    ep = (ea - 1 + eb - 1).astype(np.int64)
    _, ec = np.frexp(cz)
    ec = ec.astype(np.int64) - 1
    cnz = cz != 0
    # product far below c: keep its sign only
    tiny_p = ~pz & cnz & (ep + 1 < ec - 160)
    ma = np.where(tiny_p, 1.0, ma)
    mb = np.where(tiny_p, 1.0, mb)
    ep = np.where(tiny_p, ec - 160, ep)
    # c far below the product: a sticky stand-in of the same sign
    tiny_c = ~pz & cnz & (ec < ep - 160)
    sign_c = np.where(np.signbit(cz), -1.0, 1.0)
    csc = np.where(tiny_c, sign_c * 2.0 ** -160, np.ldexp(cz, np.clip(-ep, -2000, 2000)))
    sign_p = np.where(np.signbit(az) ^ np.signbit(bz), -1.0, 1.0)
    uh, ul = two_prod(ma, mb)
    uh, ul = uh * sign_p, ul * sign_p
    uh = np.where(pz, 0.0, uh)
    ul = np.where(pz, 0.0, ul)
    ep = np.where(pz, 0, ep)
    csc = np.where(pz, cz, csc)
    th, tl = two_sum(csc, uh)
    v = round_odd_sum(tl, ul)
    z = th + v
    r = np.ldexp(z, ep)  # exact unless the result is subnormal or overflows
    sub_ = (np.abs(r) <= 2.0 ** -1022) & ~pz
    if sub_.any():  # round the exact th + tl + ul once onto the subnormal grid 2^-1074 (2^(-1074 - ep) here)
        r = np.where(sub_, _round_to_grid([ul, tl, th], np.where(sub_, -1074 - ep, 0)), r)
    # exact zeros: x + (-x) = +0; a zero product keeps IEEE signed-zero addition with c
    r = np.where((z == 0) & ~pz, 0.0, r)
    r = np.where(pz, (sign_p * 0.0) + cz, r)
    if fin.all():
        return r
    r = np.where(fin, r, _fma_inf(a, b, c))
    bits = _nan_select(a, b, c, 1 << 51, -(1 << 51), r)  # default NaN 0xFFF8000000000000
    return bits.view(np.float64)


# ---------------------------------------------------------------------------------------------------------
# nearest entry of a value table (block.md §4.7 lut_argmin; lut.md §3.3 rule "argmin")
# ---------------------------------------------------------------------------------------------------------
ARGMIN_ROWS = 1 << 14  # rows per chunk: rows x table entries temporaries stay a few MB


def table_argmin(x: np.ndarray, values: np.ndarray, dtype: object, *, subtract: str = "float64",
                 nan_distance: str = "never") -> np.ndarray:
    """i(x) = the first index i minimizing |d_i|, d_i = x - values[i] rounded to ``dtype`` (int64, per x).

    subtract "float64": d_i = RN_dtype(x - v_i) computed exactly (block.md §4.7: MLX); "float32":
    d_i = RN_dtype(RN_32(x - v_i)), x and v_i as float32 (lut.md §3.3: torch, qwix, MLX). nan_distance "never":
    NaN distances never win (an all-NaN row gives index 0); "first": numpy's argmin, where the first NaN wins."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    flat = np.asarray(x).reshape(-1)
    out = np.empty(flat.shape, dtype=np.int64)
    if subtract == "float32":
        xs, t = flat.astype(np.float32), np.asarray(values).astype(np.float32)
    else:
        xs, t = flat, np.asarray(values)
    for start in range(0, flat.size, ARGMIN_ROWS):
        xr = xs[start:start + ARGMIN_ROWS, None]
        if subtract == "float32":
            d = xr - t[None, :]
            if dt != F32:
                d = convert(d, dt).astype(np.float32)
            dist = np.abs(d)
        else:
            dist = np.abs(f64(sub(xr, t[None, :], dt)))
        if nan_distance == "never":
            dist = np.where(np.isnan(dist), np.inf, dist)
        out[start:start + ARGMIN_ROWS] = np.argmin(dist, axis=1)
    return out.reshape(np.shape(x))


__all__ = ["ARGMIN_ROWS", "BF16", "COMPUTE_DTYPES", "F16", "F32", "F32_MIN_NORMAL", "F64", "FLOAT_DTYPES", "FLT_MAX",
           "FMA_NAN_RULES", "NATIVE", "add", "add_round", "convert", "distill", "div", "dtype_name", "f64",
           "float32_bits", "float_bits", "float_dtype", "flush", "fma64", "fma_float32", "fractions_to_float32",
           "in_float32", "mul", "mul_round", "np_dtype", "op_in_float32", "pow2", "resolve_compute_dtype",
           "round_fractions", "round_odd_sum", "round_to", "round_values", "sub", "table_argmin", "two_prod",
           "two_sum"]
