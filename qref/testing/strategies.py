"""Hypothesis strategies for low-precision numerics (guide: docs/testing-backends.md §2).

``hypothesis.extra.numpy.from_dtype(float8_e4m3fn)`` raises, and uniformly random floats almost never land
on the inputs where conversions go wrong. These strategies aim at those inputs on purpose, compute every
special point from the format record through qref (``exact_value`` of adjacent codes, ``encode``), and are
built from ``sampled_from`` / ``integers`` / ``booleans`` draws so that hypothesis shrinks a failure to a
short, readable example:

- ``formats()``: named formats of the registry, then random custom ``FloatFormat`` records;
- ``codes(fmt)`` / ``code_arrays(fmt, shape)``: codes of a format (shrink toward code 0);
- ``values(fmt)`` / ``arrays(fmt, shape)``: inputs biased toward ties, +-1 ulp around ties, the
  subnormal/normal boundary, underflow, overflow edges, specials and -0 (``CATEGORIES``, weights as options;
  shrink toward 0, then 1, then the tie just above 1);
- ``blocks(scheme)``: blocks for block-scaled schemes (all-zero, tiny, huge, amax next to powers of two,
  element ties under a pinned scale, NaN/Inf inside);
- ``uniform_params(storage)``: scales, zero points and narrowed ranges for integer affine quantization;
- ``tables()``: lookup tables of 2^k float32 entries.

Every generated input is a value of the source dtype (float64, float32, float16 or bfloat16). Where a point
of the format is not representable in that dtype (a tie of float16 in bfloat16, 2^-127 in float16) the
nearest dtype value (or 0/Inf) is drawn instead; the category then only says where the point was aimed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from ..core.encode import encode
from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats import formats as _registry

__all__ = [
    "BLOCK_CATEGORIES",
    "CATEGORIES",
    "DEFAULT_BLOCK_WEIGHTS",
    "DEFAULT_WEIGHTS",
    "SOURCE_DTYPES",
    "TABLE_STYLES",
    "UniformParams",
    "arrays",
    "blocks",
    "code_arrays",
    "codes",
    "formats",
    "tables",
    "uniform_params",
    "values",
]

SOURCE_DTYPES = ("float32", "float64", "float16", "bfloat16")

CATEGORIES = (
    "zero",                # +-0
    "representable",       # values of the format (shrinks toward 1)
    "tie",                 # exact midpoints between adjacent values (shrinks toward the tie just above 1)
    "near_tie",            # a tie +-1 ulp of the source dtype
    "subnormal_boundary",  # min normal, largest/smallest subnormal, their midpoint, +-1 ulp
    "underflow",           # half the smallest value (the tie with zero), +-1 ulp, smaller values
    "overflow",            # max, next grid value above max, overflow tie +-1 ulp, 2 max, the dtype's max
    "special",             # +-Inf, quiet NaN, quiet NaN with a payload, signalling NaN
    "random",              # any finite value of the dtype with |x| <= 2 max
)
DEFAULT_WEIGHTS: Mapping[str, int] = {
    "zero": 1, "representable": 3, "tie": 4, "near_tie": 4, "subnormal_boundary": 2, "underflow": 1,
    "overflow": 2, "special": 1, "random": 2,
}

BLOCK_CATEGORIES = (
    "zero",       # an all-zero block (signs of the zeros drawn)
    "random",     # element-grid values times 2^s
    "ties",       # amax = element max * 2^s, the other elements exact element ties * 2^s
    "pow2_amax",  # amax = c * 2^j +- 1 ulp, c in {element max, 1, element overflow tie, next grid value...}
    "tiny",       # amax among the dtype's subnormals / min normal / 2^-127 * element max
    "huge",       # amax near the dtype's max or 2^127 * element max
    "nan",        # NaN at drawn positions
    "inf",        # +-Inf at drawn positions
)
DEFAULT_BLOCK_WEIGHTS: Mapping[str, int] = {
    "zero": 1, "random": 3, "ties": 3, "pow2_amax": 3, "tiny": 1, "huge": 1, "nan": 1, "inf": 1,
}

TABLE_STYLES = ("uniform", "quantile", "random", "adjacent")


# ---------------------------------------------------------------------------------------------------------
# helpers: dtypes, exact conversion, weighted choice
# ---------------------------------------------------------------------------------------------------------
def _source_dtype(dtype: object) -> np.dtype:
    if isinstance(dtype, str) and dtype == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise QrefError(f"dtype must be one of {', '.join(SOURCE_DTYPES)}, got {dtype!r}") from None
    if dt.name not in SOURCE_DTYPES:
        raise unknown_name("source dtype", dt.name, SOURCE_DTYPES)
    return dt


def _uint(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{8 * dt.itemsize}")


def _dtype_format(dt: np.dtype) -> FloatFormat:
    f = get_format(dt.name)
    assert isinstance(f, FloatFormat)
    return f


def _frac_to_float(v: Fraction | int | float) -> float:
    """Correctly rounded float64 (int / int true division rounds once); overflow gives +-inf."""
    if isinstance(v, float):
        return v
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _cast(v: float | np.ndarray, dt: np.dtype) -> np.ndarray:
    """float64 -> dt by nearest-even (exact when v is a value of dt); a 0-d or n-d array."""
    with np.errstate(all="ignore"):
        return np.asarray(v, dtype=np.float64).astype(dt)


def _from_bits(bits: int, dt: np.dtype) -> np.ndarray:
    return np.asarray(bits, dtype=_uint(dt)).view(dt)


def _bits(x: np.ndarray) -> int:
    return int(np.asarray(x).view(_uint(x.dtype)))


def _step(x: np.ndarray, n: int) -> np.ndarray:
    """x >= 0 moved by n ulps of its dtype (stays >= 0); Inf and NaN are returned unchanged."""
    if not np.isfinite(x):
        return x
    return _from_bits(max(_bits(x) + n, 0), x.dtype)


def _next_up(x: np.ndarray) -> np.ndarray:
    """The next value of x's dtype toward +Inf (finite x)."""
    if float(x) == 0:
        return _from_bits(1, x.dtype)
    return _from_bits(_bits(x) + (1 if float(x) > 0 else -1), x.dtype)


def _signed(x: np.ndarray, neg: bool) -> np.ndarray:
    """x with its sign bit set to ``neg`` (bit operation: keeps NaN payloads)."""
    dt = x.dtype
    b = _bits(x) & ~(1 << (8 * dt.itemsize - 1))
    if neg:
        b |= 1 << (8 * dt.itemsize - 1)
    return _from_bits(b, dt)


def _weighted(weights: Mapping[str, float], order: Sequence[str], defaults: Mapping[str, int],
              available: Sequence[str], what: str, only: Sequence[str] | None = None
              ) -> st.SearchStrategy[str]:
    """sampled_from a list where each category appears weight times, in ``order`` (shrinks to the first).
    ``only``: keep just these categories."""
    if only is not None:
        if isinstance(only, str):
            only = (only,)
        for k in only:
            if k not in order:
                raise unknown_name(f"{what} category", k, order)
        available = [c for c in available if c in only]
    w = dict(defaults)
    for k, v in weights.items():
        if k not in order:
            raise unknown_name(f"{what} category", k, order)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v:
            raise QrefError(f"weight of {what} category {k!r} must be a number >= 0, got {v!r}")
        w[k] = v
    pos = [w[c] for c in order if c in available and w[c] > 0]
    if not pos:
        raise QrefError(f"every {what} category has weight 0 (or is unavailable for this format); "
                        f"give at least one of {', '.join(c for c in order if c in available)} a weight > 0")
    unit = min(pos)
    seq: list[str] = []
    for c in order:
        if c in available and w[c] > 0:
            seq += [c] * max(1, round(w[c] / unit))
    return st.sampled_from(seq)


# ---------------------------------------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------------------------------------
_CUSTOM_STYLES = ("none", "ieee", "fn", "fnuz", "fnuz_inf", "unsigned", "unsigned_no_zero")


def _build_custom(style: str, E: int, M: int, bias_offset: int) -> FloatFormat:
    signed = not style.startswith("unsigned")
    default_bias = (1 << (E - 1)) if style.startswith("fnuz") else (1 << (E - 1)) - 1
    nan, inf = {
        "none": ("none", "none"), "ieee": ("ieee", "ieee"), "fn": ("all_ones", "none"),
        "fnuz": ("negative_zero", "none"), "fnuz_inf": ("negative_zero", "top"),
        "unsigned": ("all_ones", "none"), "unsigned_no_zero": ("all_ones", "none"),
    }[style]
    no_zero = style == "unsigned_no_zero"
    bias = default_bias + bias_offset
    return FloatFormat(f"custom_e{E}m{M}b{bias}_{style}", E, M, bias, signed=signed, subnormals=not no_zero,
                       zero=not no_zero, nan=nan, inf=inf, source="qref.strategies.formats (random custom)")  # type: ignore[arg-type]


@st.composite
def _custom_float(draw: Any, max_bits: int) -> FloatFormat:
    style = draw(st.sampled_from(_CUSTOM_STYLES))
    signed = not style.startswith("unsigned")
    e_lo = 2 if style == "ieee" else 1
    m_lo = 1 if style == "ieee" else 0
    room = max_bits - int(signed)
    if room < e_lo + m_lo:
        reject()
    E = draw(st.integers(e_lo, min(8, room - m_lo)))
    M = draw(st.integers(m_lo, min(10, room - E)))
    bias_offset = draw(st.integers(-2, 2))
    try:
        return _build_custom(style, E, M, bias_offset)
    except QrefError:
        reject()
        raise AssertionError from None  # unreachable: reject() raises


def formats(*, named: bool = True, custom: bool = True, ints: bool = False, max_bits: int = 16,
            min_bits: int = 1) -> st.SearchStrategy[Format]:
    """Formats of ``min_bits``..``max_bits`` bits (defaults 1..16), from three groups drawn 2 : 1 : 2:
    the registry's named formats other than P3109 (in registration order, so float8_e4m3fn first), the P3109
    family binary{K}p{P}{s|u}{e|f}, and random custom FloatFormat records (every special-value style, E <= 8,
    M <= 10, bias = default +- 2). ``ints=True`` adds int1..int32 / uint1..uint32 to the named group and
    random narrowed integer ranges to the custom one. Shrinks to float8_e4m3fn."""
    if not 1 <= min_bits <= max_bits:
        raise QrefError(f"need 1 <= min_bits <= max_bits, got min_bits={min_bits}, max_bits={max_bits}")
    groups: list[st.SearchStrategy[Format]] = []
    if named:
        fits = [f for f in _registry.values() if min_bits <= f.bits <= max_bits
                and (isinstance(f, FloatFormat) or ints)]
        p3109 = [f for f in fits if f.name.startswith("binary")]
        rest = [f for f in fits if not f.name.startswith("binary")]
        groups += [st.sampled_from(rest)] * 2 if rest else []
        groups += [st.sampled_from(p3109)] if p3109 else []
    if custom:
        made: st.SearchStrategy[Format] = _custom_float(max_bits)
        if ints:
            made = st.one_of(made, _narrowed_int(max_bits))
        groups += [made.filter(lambda f: f.bits >= min_bits)] * 2
    if not groups:
        raise QrefError(f"formats(): nothing to draw (named={named}, custom={custom}, "
                        f"bits {min_bits}..{max_bits})")
    return st.sampled_from(groups).flatmap(lambda g: g)


@st.composite
def _narrowed_int(draw: Any, max_bits: int) -> IntFormat:
    bits = draw(st.integers(2, min(max_bits, 32)))
    signed = draw(st.booleans())
    base = get_format(f"{'int' if signed else 'uint'}{bits}")
    assert isinstance(base, IntFormat)
    lo0, hi0 = base.full_range
    lo = draw(st.integers(lo0, hi0))
    hi = draw(st.integers(lo, hi0))
    return get_format(f"{base.name}<{lo}:{hi}>")  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------
# codes
# ---------------------------------------------------------------------------------------------------------
_CODE_CLASSES = ("zero", "subnormal", "normal", "inf", "nan", "in_range", "outside_narrowed_range")


@lru_cache(maxsize=256)
def _codes_of_classes(fmt: Format, classes: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(c for c in range(1 << fmt.bits) if fmt.classify(c) in classes)


def codes(fmt: str | Format, *, classes: Sequence[str] | None = None) -> st.SearchStrategy[int]:
    """Codes of ``fmt`` as Python ints in [0, 2^bits) (shrink toward 0). ``classes`` keeps only codes
    whose ``fmt.classify(code)`` is listed ('zero', 'subnormal', 'normal', 'inf', 'nan'; integers 'zero',
    'in_range', 'outside_narrowed_range'); classes need formats of at most 16 bits."""
    f = get_format(fmt)
    if classes is None:
        return st.integers(0, (1 << f.bits) - 1)
    for c in classes:
        if c not in _CODE_CLASSES:
            raise unknown_name("code class", c, _CODE_CLASSES)
    if f.bits > 16:
        raise QrefError(f"codes(classes=...) enumerates the code space; {f.name} has {f.bits} bits (max 16)")
    found = _codes_of_classes(f, tuple(classes))
    if not found:
        raise QrefError(f"{f.name} has no codes of class(es) {', '.join(classes)}")
    return st.sampled_from(found)


def _shape_strategy(shape: object) -> st.SearchStrategy[tuple[int, ...]]:
    if shape is None:
        return st.lists(st.integers(1, 8), min_size=1, max_size=2).map(tuple)
    if isinstance(shape, st.SearchStrategy):
        return shape.map(lambda s: (s,) if isinstance(s, int) else tuple(s))
    if isinstance(shape, int):
        return st.just((shape,))
    if isinstance(shape, tuple) and all(isinstance(s, int) and s >= 0 for s in shape):
        return st.just(shape)
    raise QrefError(f"shape must be an int, a tuple of ints, a strategy or None, got {shape!r}")


def code_arrays(fmt: str | Format, shape: object = None, *, classes: Sequence[str] | None = None
                ) -> st.SearchStrategy[np.ndarray]:
    """Arrays of codes of ``fmt`` in its code dtype (uint8 for <= 8 bits ...); ``shape`` as in ``arrays``."""
    f = get_format(fmt)
    elem = codes(f, classes=classes)

    @st.composite
    def build(draw: Any) -> np.ndarray:
        shp = draw(_shape_strategy(shape))
        n = math.prod(shp)
        return np.array(draw(st.lists(elem, min_size=n, max_size=n)), dtype=f.code_dtype).reshape(shp)

    return build()


# ---------------------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ladder:
    """The non-negative finite values of a format as a ladder of magnitude codes 0..top (value increasing)."""

    fmt: Format
    top: int       # largest magnitude code with a finite value
    one: int       # magnitude code of the largest value <= 1 (or the smallest value)
    bottom: int    # smallest magnitude code of a nonzero value

    def value(self, k: int) -> Fraction:
        if isinstance(self.fmt, IntFormat):
            return Fraction(k)
        v = self.fmt.exact_value(k)
        assert isinstance(v, Fraction)
        return v


@lru_cache(maxsize=256)
def _ladder(fmt: Format) -> _Ladder:
    if isinstance(fmt, IntFormat):
        return _Ladder(fmt, max(fmt.hi, 0), 1 if fmt.hi >= 1 else 0, 1)
    one = int(encode(np.float64(1.0), fmt, rounding="toward_zero", overflow="saturate")) & fmt.magnitude_mask
    return _Ladder(fmt, fmt.max_finite_code, one, 1 if fmt.zero else 0)


def _points(fmt: Format, dt: np.dtype) -> dict[str, list[np.ndarray]]:
    """The fixed lists of the boundary categories, as 0-d arrays of dt (non-negative; a sign is drawn)."""
    return _points_cached(fmt, dt.name)


@lru_cache(maxsize=512)
def _points_cached(fmt: Format, dtname: str) -> dict[str, list[np.ndarray]]:
    dt = _source_dtype(dtname)
    lad = _ladder(fmt)
    cast = lambda v: _cast(_frac_to_float(v), dt)  # noqa: E731
    around = lambda x: [_step(x, -1), _step(x, 1)]  # noqa: E731
    dmax = _from_bits(_dtype_format(dt).max_finite_code, dt)
    tiny = _from_bits(1, dt)
    out: dict[str, list[np.ndarray]] = {}
    vmax = lad.value(lad.top)
    if isinstance(fmt, IntFormat):
        hi, lo = Fraction(fmt.hi), Fraction(fmt.lo)
        tie_hi, tie_lo = cast(hi + Fraction(1, 2)), cast(-lo + Fraction(1, 2))
        out["overflow"] = [cast(hi), cast(hi + 1), tie_hi, *around(tie_hi), cast(-lo), cast(-lo + 1), tie_lo,
                           *around(tie_lo), cast(2 * max(hi, -lo, Fraction(1))), dmax]
    else:
        vmin = lad.value(lad.bottom)
        ulp_top = vmax - lad.value(lad.top - 1) if lad.top > lad.bottom else vmax
        next_up = vmax + ulp_top
        tie_top = cast(vmax + ulp_top / 2)
        out["overflow"] = [cast(vmax), cast(next_up), tie_top, *around(tie_top), cast(2 * vmax), dmax]
        half_min = cast(vmin / 2)
        out["underflow"] = [half_min, *around(half_min), cast(vmin / 4), cast(3 * vmin / 4), tiny]
        mn = cast(fmt.min_normal)
        sub = []
        if fmt.subnormals and fmt.mantissa_bits > 0:
            largest_sub = lad.value((1 << fmt.mantissa_bits) - 1)
            mid = cast((largest_sub + fmt.min_normal) / 2)
            sub = [cast(largest_sub), mid, *around(mid), cast(vmin)]
        out["subnormal_boundary"] = [mn, *around(mn), *sub]
    fdt = _dtype_format(dt)
    inf_c, nan_c, high = fdt.inf_code, fdt.nan_code, 1 << (fdt.mantissa_bits - 2)
    assert inf_c is not None and nan_c is not None
    # +Inf, quiet NaN, quiet NaN with the top payload bit (kept by truncating conversions), signalling NaN
    out["special"] = [_from_bits(inf_c, dt), _from_bits(nan_c, dt), _from_bits(nan_c | high, dt),
                      _from_bits(inf_c | 1, dt)]
    return out


def _available(fmt: Format) -> tuple[str, ...]:
    if isinstance(fmt, IntFormat):
        return ("zero", "representable", "tie", "near_tie", "overflow", "special", "random")
    lad = _ladder(fmt)
    cats = ["representable", "subnormal_boundary", "underflow", "overflow", "special", "random"]
    if fmt.zero:
        cats.append("zero")
    if lad.top > 0:
        cats += ["tie", "near_tie"]
    return tuple(cats)


def _ladder_index(lad: _Ladder, lo: int, hi: int) -> st.SearchStrategy[int]:
    """A code in [lo, hi] drawn as an offset from ``lad.one`` (shrinks to the code nearest 1)."""
    center = min(max(lad.one, lo), hi)
    return st.integers(lo - center, hi - center).map(lambda d: center + d)


@st.composite
def _value(draw: Any, fmt: Format, dt: np.dtype, choice: st.SearchStrategy[str], sign: str,
           specials: tuple[int, ...]) -> tuple[str, np.ndarray]:
    cat = draw(choice)
    lad = _ladder(fmt)
    pts = _points(fmt, dt)
    own_neg: bool | None = None  # integer points carry their own sign (the range is not symmetric)
    if cat == "zero":
        x = np.zeros((), dt)
    elif cat == "representable":
        if isinstance(fmt, IntFormat):
            k = draw(st.integers(max(fmt.lo, 1 if fmt.hi >= 1 else fmt.lo), fmt.hi))
            x = _cast(float(abs(k)), dt)
            own_neg = k < 0
        else:
            x = _cast(_frac_to_float(lad.value(draw(_ladder_index(lad, lad.bottom, lad.top)))), dt)
    elif cat in ("tie", "near_tie"):
        if isinstance(fmt, IntFormat):
            k = draw(st.integers(fmt.lo, fmt.hi - 1)) if fmt.hi > fmt.lo else fmt.lo
            t = _cast(abs(k + 0.5), dt)
            own_neg = k + 0.5 < 0
        else:
            k = draw(_ladder_index(lad, 0, lad.top - 1))
            t = _cast(_frac_to_float((lad.value(k) + lad.value(k + 1)) / 2), dt)
        if cat == "near_tie":
            t = _step(t, draw(st.sampled_from((1, -1))))
        x = t
    elif cat == "special":
        x = pts["special"][draw(st.sampled_from(specials))]
    elif cat == "random":
        fdt = _dtype_format(dt)
        hi = min(_frac_to_float(2 * max(lad.value(lad.top), Fraction(1))), _frac_to_float(fdt.max_value))
        hi_d = _cast(hi, dt)
        if float(hi_d) > hi:
            hi_d = _step(hi_d, -1)
        width = 64 if dt == np.float64 else 16 if dt == np.float16 else 32
        x = _cast(draw(st.floats(0, float(hi_d), width=width)), dt)
    else:
        x = pts[cat][draw(st.integers(0, len(pts[cat]) - 1))]
    if sign == "positive":
        neg = False
    elif sign == "negative":
        neg = True
    else:
        neg = own_neg if own_neg is not None else draw(st.booleans())
    return cat, _signed(x, neg)


def _special_indices(allow_nan: bool, allow_infinity: bool) -> tuple[int, ...]:
    return tuple(i for i, ok in enumerate((allow_infinity, allow_nan, allow_nan, allow_nan)) if ok)


def _value_strategy(fmt: str | Format, dtype: object, weights: Mapping[str, float] | None, sign: str,
                    allow_nan: bool, allow_infinity: bool, categories: Sequence[str] | None
                    ) -> st.SearchStrategy[tuple[str, np.ndarray]]:
    f = get_format(fmt)
    dt = _source_dtype(dtype)
    if sign not in ("both", "positive", "negative"):
        raise unknown_name("sign option", sign, ("both", "positive", "negative"))
    specials = _special_indices(allow_nan, allow_infinity)
    avail = [c for c in _available(f) if c != "special" or specials]
    choice = _weighted(weights or {}, CATEGORIES, DEFAULT_WEIGHTS, avail, "value", categories)
    return _value(f, dt, choice, sign, specials)


def values(fmt: str | Format, *, dtype: object = np.float32, weights: Mapping[str, float] | None = None,
           categories: Sequence[str] | None = None, sign: str = "both", allow_nan: bool = True,
           allow_infinity: bool = True, labeled: bool = False) -> st.SearchStrategy[Any]:
    """Scalars of ``dtype`` (a numpy scalar; default float32) aimed at where conversions to ``fmt`` go wrong.

    A category (``CATEGORIES``) is drawn with ``weights`` (merged over ``DEFAULT_WEIGHTS``; 0 turns a
    category off; ``categories`` keeps only the listed ones, default all), then a point of it, then the
    sign (``sign``: "both" (default), "positive", "negative").
    ``allow_nan`` / ``allow_infinity`` (default True) keep NaNs / Infs among the specials. ``labeled=True``
    draws (category, value) pairs. Shrinks toward +0, then 1, then the tie just above 1, then the lowest
    boundary point of a category.
    """
    strat = _value_strategy(fmt, dtype, weights, sign, allow_nan, allow_infinity, categories)
    if labeled:
        return strat.map(lambda cv: (cv[0], cv[1][()]))
    return strat.map(lambda cv: cv[1][()])


def arrays(fmt: str | Format, shape: object = None, *, dtype: object = np.float32,
           weights: Mapping[str, float] | None = None, categories: Sequence[str] | None = None,
           sign: str = "both", allow_nan: bool = True, allow_infinity: bool = True, scale: float | None = None,
           labeled: bool = False) -> st.SearchStrategy[Any]:
    """Arrays of ``dtype`` whose elements are drawn by ``values`` (same options). ``shape``: an int, a tuple,
    a strategy of either, or None (default: 1 to 64 elements, 1-D or 2-D with up to 8 rows; elements are
    drawn first so that shrinking deletes them: shrinks toward shape (1,)). ``scale`` (default None): every
    value is multiplied by it in float64 and rounded to ``dtype`` once, so that x / scale lands near the
    format's points (uniform quantization: ``arrays("int8", scale=0.1)``). ``labeled=True`` draws
    (categories array of str, values array)."""
    f = get_format(fmt)
    dt = _source_dtype(dtype)
    elem = _value_strategy(f, dt, weights, sign, allow_nan, allow_infinity, categories)

    @st.composite
    def build(draw: Any) -> Any:
        if shape is None:  # the element list comes first, so shrinking can delete elements
            items = draw(st.lists(elem, min_size=1, max_size=64))
            n = len(items)
            if draw(st.booleans()):  # 2-D: rows among the divisors of n (up to 8)
                rows = draw(st.sampled_from([d for d in range(1, min(n, 8) + 1) if n % d == 0]))
                shp: tuple[int, ...] = (rows, n // rows)
            else:
                shp = (n,)
        else:
            shp = draw(_shape_strategy(shape))
            n = math.prod(shp)
            items = draw(st.lists(elem, min_size=n, max_size=n))
        arr = np.array([v for _, v in items], dtype=dt).reshape(shp)
        if scale is not None:
            with np.errstate(all="ignore"):
                wide = arr.astype(np.float64) * float(scale)
            arr = _cast(wide, dt) if dt != np.float64 else wide
            arr = arr.reshape(shp)
        if labeled:
            return np.array([c for c, _ in items], dtype=object).reshape(shp), arr
        return arr

    return build()


# ---------------------------------------------------------------------------------------------------------
# blocks
# ---------------------------------------------------------------------------------------------------------
_BLOCK_SIZE_ATTRS = ("block_size", "group_size")
_ELEMENT_ATTRS = ("element_format", "element", "elements", "elem_format", "data_format", "format", "fmt",
                  "storage")


def block_params(scheme: object, block_size: int | None, element_format: str | Format | None
                 ) -> tuple[int, Format]:
    """(block size, element format) of a block scheme (name or record); explicit arguments win."""
    if isinstance(scheme, str):
        from ..schemes import scheme as build_scheme

        scheme = build_scheme(scheme)
    bs, ef = block_size, element_format
    if scheme is not None:
        if bs is None:
            bs = next((getattr(scheme, a) for a in _BLOCK_SIZE_ATTRS
                       if isinstance(getattr(scheme, a, None), int)), None)
        if ef is None:
            for a in _ELEMENT_ATTRS:
                v = getattr(scheme, a, None)
                if isinstance(v, (FloatFormat, IntFormat)) or (isinstance(v, str) and v):
                    try:
                        ef = get_format(v)
                        break
                    except QrefError:
                        continue
    if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
        raise QrefError(
            f"blocks(): no block size found (scheme {type(scheme).__name__} has "
            f"none of {', '.join(_BLOCK_SIZE_ATTRS)}); pass block_size=N (e.g. 32 for MX, 16 for NVFP4)")
    if ef is None:
        raise QrefError("blocks(): no element format found on the scheme; pass element_format=... "
                        "(e.g. 'float4_e2m1fn' for MXFP4 / NVFP4, 'float8_e4m3fn' for MXFP8)")
    return bs, get_format(ef)


@lru_cache(maxsize=128)
def _element_grid(ef: Format) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """(positive values ordered nearest-1 first, ties ordered the same way, max, overflow tie, next grid
    value above max) of an element format, in float64 (element formats of at most 16 bits)."""
    if isinstance(ef, IntFormat):
        top = max(ef.hi, 1)
        v = np.arange(1, top + 1, dtype=np.float64)
        t = np.arange(0, top, dtype=np.float64) + 0.5
        return _nearest_one_first(v), _nearest_one_first(t), float(top), top + 0.5, top + 1.0
    lad = _ladder(ef)
    vals = [lad.value(k) for k in range(lad.bottom, lad.top + 1)]
    ties = [(lad.value(k) + lad.value(k + 1)) / 2 for k in range(0, lad.top)]
    vmax = vals[-1]
    ulp = vmax - vals[-2] if len(vals) > 1 else vmax
    f = np.array([_frac_to_float(x) for x in vals])
    t = np.array([_frac_to_float(x) for x in ties]) if ties else f[:1]
    return (_nearest_one_first(f[f > 0]), _nearest_one_first(t[t > 0]), _frac_to_float(vmax),
            _frac_to_float(vmax + ulp / 2), _frac_to_float(vmax + ulp))


def _nearest_one_first(v: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        key = np.abs(np.log2(v))
    order = np.lexsort((v, key))
    return v[order]


@st.composite
def _block(draw: Any, bs: int, ef: Format, dt: np.dtype, choice: st.SearchStrategy[str]
           ) -> tuple[str, np.ndarray]:
    """One block. Elements are a fill value plus a list of (position, value) overrides, and the negative
    positions a list too: shrinking deletes overrides, so a failing block shrinks to one or two odd elements."""
    cat = draw(choice)
    grid, ties, emax_v, etie, enext = _element_grid(ef)
    fdt = _dtype_format(dt)
    dmax = _from_bits(fdt.max_finite_code, dt)
    pos_st = st.integers(0, bs - 1)

    def filled(values: st.SearchStrategy[float], min_overrides: int = 0) -> np.ndarray:
        m = np.full(bs, draw(values), dtype=np.float64)
        for p, v in draw(st.lists(st.tuples(pos_st, values), min_size=min_overrides, max_size=bs)):
            m[p] = v
        return m

    def finish(mag64: np.ndarray, amax: np.ndarray | None = None, pos: int = 0) -> np.ndarray:
        out = _cast(mag64, dt)
        if amax is not None:
            out[pos] = amax
        neg = np.zeros(bs, dtype=bool)
        neg[draw(st.lists(pos_st, max_size=bs))] = True
        sign_bits = np.where(neg, 1 << (8 * dt.itemsize - 1), 0).astype(_uint(dt))
        return (out.view(_uint(dt)) | sign_bits).view(dt)

    elem = st.one_of(st.sampled_from(list(grid)), st.sampled_from(list(ties)), st.floats(0, emax_v))
    if cat == "zero":
        return cat, finish(np.zeros(bs))
    if cat == "random":
        s = draw(st.integers(-8, 8))
        return cat, finish(filled(elem) * 2.0**s)
    if cat == "ties":
        s = draw(st.integers(-8, 8))
        pos = draw(pos_st)
        m = filled(st.sampled_from(list(ties)))
        m[pos] = emax_v
        return cat, finish(m * 2.0**s)
    if cat in ("nan", "inf"):  # a random block with specials at drawn positions
        s = draw(st.integers(-8, 8))
        m = filled(elem) * 2.0**s
        m[draw(st.lists(pos_st, min_size=1, max_size=bs, unique=True))] = np.nan if cat == "nan" else np.inf
        return cat, finish(m)
    pos = draw(pos_st)
    if cat == "pow2_amax":
        c = draw(st.sampled_from((emax_v, 1.0, etie, enext, 2.0 ** math.floor(math.log2(emax_v) + 1))))
        j = draw(st.integers(-10, 10))
        amax = _step(_cast(c * 2.0**j, dt), draw(st.sampled_from((0, -1, 1))))
        amax = amax if np.isfinite(amax) else dmax
    elif cat == "tiny":
        mn = _from_bits(1 << fdt.mantissa_bits, dt)
        pts = [_from_bits(1, dt), _from_bits(3, dt), mn, _step(mn, -1), _step(mn, 1),
               _cast(2.0**-127 * emax_v, dt), _cast(2.0**-127, dt)]
        amax = pts[draw(st.integers(0, len(pts) - 1))]
        amax = amax if float(amax) > 0 else _from_bits(1, dt)
    else:  # "huge"
        pts = [dmax, _step(dmax, -1), _cast(2.0**127 * emax_v, dt), _cast(2.0 ** fdt.emax, dt),
               _cast(2.0**127 * etie, dt)]
        amax = pts[draw(st.integers(0, len(pts) - 1))]
        amax = dmax if not np.isfinite(amax) else amax
    m = filled(st.floats(0, 1)) * float(amax)  # the other elements: fractions of amax (rounded: <= amax)
    return cat, finish(np.minimum(m, float(amax)), amax, pos)


def blocks(scheme: object = None, *, block_size: int | None = None,
           element_format: str | Format | None = None,
           n_blocks: int | st.SearchStrategy[int] | None = None, dtype: object = np.float32,
           weights: Mapping[str, float] | None = None, categories: Sequence[str] | None = None,
           labeled: bool = False) -> st.SearchStrategy[Any]:
    """Arrays of shape (n_blocks, block_size), one block per row, each block drawn from ``BLOCK_CATEGORIES``
    (``weights`` merged over ``DEFAULT_BLOCK_WEIGHTS``; ``categories`` keeps only the listed ones).

    ``block_size`` and ``element_format`` come from the scheme's attributes when present (block_size /
    group_size; element_format / element / format ...) and can be given explicitly. ``n_blocks``: an int or a
    strategy (None: 1..3, shrinks to 1). ``labeled=True`` draws (tuple of categories, array). For the
    "ties" category the block's amax is element max * 2^s, so every usual scale rule (OCP floor, MLX/JAX
    ceil of amax / max) picks the scale 2^s and the other elements sit exactly on element ties.
    """
    bs, ef = block_params(scheme, block_size, element_format)
    if ef.bits > 16:
        raise QrefError(f"blocks(): element format {ef.name} has {ef.bits} bits; element grids need <= 16")
    dt = _source_dtype(dtype)
    choice = _weighted(weights or {}, BLOCK_CATEGORIES, DEFAULT_BLOCK_WEIGHTS, BLOCK_CATEGORIES, "block",
                       categories)
    nb = n_blocks if isinstance(n_blocks, st.SearchStrategy) else (
        st.integers(1, 3) if n_blocks is None else st.just(n_blocks))
    one = _block(bs, ef, dt, choice)

    @st.composite
    def build(draw: Any) -> Any:
        if n_blocks is None:
            items = draw(st.lists(one, min_size=1, max_size=3))
        else:
            n = draw(nb)
            items = draw(st.lists(one, min_size=n, max_size=n))
        arr = np.stack([b for _, b in items]) if items else np.zeros((0, bs), dt)
        return (tuple(c for c, _ in items), arr) if labeled else arr

    return build()


# ---------------------------------------------------------------------------------------------------------
# uniform (affine integer) parameters
# ---------------------------------------------------------------------------------------------------------
SCALE_CATEGORIES = ("one", "power_of_two", "awkward", "subnormal", "tiny_normal", "huge", "random")
ZERO_POINT_CATEGORIES = ("zero", "odd", "edge", "random")
RANGE_CATEGORIES = ("full", "symmetric", "subrange")
_AWKWARD = (0.1, 1 / 3, 0.2, 0.7, 1 / 255, 1 / 127, 0.01, 3.0, 1 / 6, 0.3, 1e-3, 12.7)
_STORAGES = ("int8", "uint8", "int4", "uint4", "int16", "int2", "uint2", "uint16", "int32")


@dataclass(frozen=True)
class UniformParams:
    """Affine quantization parameters: q = clamp(round(x / scale) + zero_point, storage.lo, storage.hi).

    storage: the IntFormat, narrowed when ``storage.narrowed`` (e.g. int8<-127:127>); scale: a scale_dtype
    scalar, or an array of them with ``axis`` (per-axis); zero_point: int (or int64 array); categories:
    what each part was aimed at (scale, zero point, range).
    """

    storage: IntFormat
    scale: Any
    zero_point: Any
    axis: int | None
    categories: tuple[str, str, str]

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``qref.scheme(params.storage.name, **params.kwargs())``."""
        out: dict[str, Any] = {"scale": self.scale, "zero_point": self.zero_point}
        if self.axis is not None:
            out["axis"] = self.axis
        return out


def _scale_points(dt: np.dtype) -> dict[str, list[np.ndarray]]:
    f = _dtype_format(dt)
    mn = _from_bits(1 << f.mantissa_bits, dt)
    dmax = _from_bits(f.max_finite_code, dt)
    return {
        "awkward": [_cast(v, dt) for v in _AWKWARD],
        "subnormal": [_from_bits(1, dt), _from_bits(3, dt), _step(mn, -1),
                      _from_bits(1 << (f.mantissa_bits - 1), dt)],
        "tiny_normal": [mn, _step(mn, 1), _cast(2.0 * float(mn), dt)],
        "huge": [dmax, _step(dmax, -1), _cast(2.0 ** (f.emax // 2), dt),
                 _cast(2.0 ** (f.emax - 1) * 1.5, dt)],
    }


@st.composite
def _uniform(draw: Any, storage: st.SearchStrategy[IntFormat], dt: np.dtype,
             channels: st.SearchStrategy[int] | None, narrow: bool, scale_choice: st.SearchStrategy[str],
             zp_choice: st.SearchStrategy[str]) -> UniformParams:
    base = draw(storage)
    lo0, hi0 = base.lo, base.hi
    rcat = draw(st.sampled_from(RANGE_CATEGORIES if narrow else ("full",)))
    if rcat == "symmetric" and lo0 == -hi0 - 1:
        lo, hi = lo0 + 1, hi0
    elif rcat == "subrange":
        lo = draw(st.integers(lo0, hi0))
        hi = draw(st.integers(lo, hi0))
    else:
        rcat, lo, hi = "full", lo0, hi0
    plain = f"{'int' if base.signed else 'uint'}{base.bits}"
    fmt = get_format(plain if (lo, hi) == base.full_range else f"{plain}<{lo}:{hi}>")
    assert isinstance(fmt, IntFormat)
    pts = _scale_points(dt)

    def one_scale() -> tuple[str, np.ndarray]:
        c = draw(scale_choice)
        if c == "one":
            return c, _cast(1.0, dt)
        if c == "power_of_two":
            return c, _cast(2.0 ** draw(st.integers(-20, 20)), dt)
        if c == "random":
            width = 64 if dt == np.float64 else 16 if dt == np.float16 else 32
            v = draw(st.floats(0, float(_from_bits(_dtype_format(dt).max_finite_code, dt)), width=width,
                               exclude_min=True, allow_subnormal=True))
            return c, _cast(v, dt)
        return c, pts[c][draw(st.integers(0, len(pts[c]) - 1))]

    def one_zp() -> tuple[str, int]:
        c = draw(zp_choice)
        if c == "zero":
            z = 0
        elif c == "odd":
            z = draw(st.sampled_from((3, -3, 1, -1, 5, 7, -7, 127, -127, 15)))
        elif c == "edge":
            z = draw(st.sampled_from((lo, hi, lo + 1, hi - 1, (lo + hi) // 2)))
        else:
            z = draw(st.integers(lo, hi))
        return c, min(max(z, lo), hi)

    if channels is None:
        sc, scale = one_scale()
        zc, zp = one_zp()
        return UniformParams(fmt, scale[()], zp, None, (sc, zc, rcat))
    n = draw(channels)
    scales = [one_scale() for _ in range(n)]
    zps = [one_zp() for _ in range(n)]
    cats = ("+".join(sorted({c for c, _ in scales})), "+".join(sorted({c for c, _ in zps})), rcat)
    return UniformParams(fmt, np.array([s for _, s in scales], dtype=dt),
                         np.array([z for _, z in zps], np.int64), 0, cats)


def uniform_params(storage: str | Format | st.SearchStrategy[Any] | None = None, *,
                   scale_dtype: object = np.float32,
                   per_axis: bool = False, channels: int | st.SearchStrategy[int] | None = None,
                   narrow: bool = True, scale_weights: Mapping[str, float] | None = None,
                   zero_point_weights: Mapping[str, float] | None = None) -> st.SearchStrategy[UniformParams]:
    """Integer affine parameters (``UniformParams``) for ``storage`` (a name, IntFormat, a strategy of
    them, or None = one of int8, uint8, int4, uint4, int16, int2, uint2, uint16, int32).

    Scales (``SCALE_CATEGORIES``, scale_dtype values, default float32): 1, powers of two, awkward decimals
    (0.1, 1/3, 1/255 ...), subnormal, near the min normal, huge, random positive. Zero points
    (``ZERO_POINT_CATEGORIES``): 0, odd values (3, -3, 127 ...), range edges, random; always inside the range.
    Ranges (``narrow=True``): full, symmetric (lo + 1, as int8<-127:127>), random sub-range.
    ``per_axis=True`` gives arrays of ``channels`` (an int or a strategy; None: 1..4) scales / zero points
    with axis=0. Shrinks to scale 1, zero point 0, full range.
    """
    if storage is None:
        stor = st.sampled_from([get_format(n) for n in _STORAGES])
    elif isinstance(storage, st.SearchStrategy):
        stor = storage.map(get_format)
    else:
        stor = st.just(get_format(storage))
    stor = stor.map(_check_int_storage)
    dt = _source_dtype(scale_dtype)
    sc = _weighted(scale_weights or {}, SCALE_CATEGORIES, dict.fromkeys(SCALE_CATEGORIES, 1),
                   SCALE_CATEGORIES, "scale")
    zc = _weighted(zero_point_weights or {}, ZERO_POINT_CATEGORIES, dict.fromkeys(ZERO_POINT_CATEGORIES, 1),
                   ZERO_POINT_CATEGORIES, "zero point")
    ch = None
    if per_axis:
        ch = channels if isinstance(channels, st.SearchStrategy) else (
            st.integers(1, 4) if channels is None else st.just(channels))
    return _uniform(stor, dt, ch, narrow, sc, zc)


def _check_int_storage(f: Format) -> IntFormat:
    if not isinstance(f, IntFormat):
        raise QrefError("uniform_params(): storage must be an integer format (int8, uint4, "
                        f"int8<-127:127> ...), got {f.name}")
    return f


# ---------------------------------------------------------------------------------------------------------
# lookup tables
# ---------------------------------------------------------------------------------------------------------
def _uniform_table(n: int) -> np.ndarray:
    return np.array([2 * i / (n - 1) - 1 for i in range(n)]) if n > 1 else np.zeros(1)


def _quantile_table(n: int) -> np.ndarray:
    d = 1 / (2 * n)
    nd = statistics.NormalDist()
    q = np.array([nd.inv_cdf(d + (1 - 2 * d) * i / (n - 1)) for i in range(n)]) if n > 1 else np.zeros(1)
    return q / np.max(np.abs(q)) if n > 1 else q


@st.composite
def _table(draw: Any, ks: st.SearchStrategy[int], dt: np.dtype, style_choice: st.SearchStrategy[str],
           unsorted: bool, duplicates: bool) -> tuple[str, np.ndarray]:
    k = draw(ks)
    n = 1 << k
    style = draw(style_choice)
    if style == "uniform":
        t = _cast(_uniform_table(n), dt)
    elif style == "quantile":
        t = _cast(_quantile_table(n), dt)
    elif style == "random":
        width = 64 if dt == np.float64 else 32 if dt in (np.float32, np.dtype(ml_dtypes.bfloat16)) else 16
        vals = draw(st.lists(st.floats(-1, 1, width=width), min_size=n, max_size=n,
                             unique_by=lambda v: float(_cast(v, dt))))
        t = np.sort(_cast(np.array(vals, dtype=np.float64), dt))
        if len(np.unique(t)) < n:
            reject()
    else:  # "adjacent": a uniform table where one pair of neighbours is 1 ulp apart
        t = _cast(_uniform_table(n), dt)
        if n > 1:
            i = draw(st.integers(0, n - 2))
            t[i + 1] = _next_up(t[i])
    if duplicates and n > 1 and draw(st.booleans()):
        i = draw(st.integers(0, n - 2))
        t[i + 1] = t[i]
    if unsorted and n > 1:
        perm = draw(st.permutations(list(range(n))))
        t = t[np.array(perm)]
    return style, t


def tables(k: int | Sequence[int] | st.SearchStrategy[int] | None = None, *, dtype: object = np.float32,
           styles: Sequence[str] = TABLE_STYLES, unsorted: bool = False, duplicates: bool = False,
           labeled: bool = False) -> st.SearchStrategy[Any]:
    """Lookup tables of 2^k entries of ``dtype`` (default float32) in [-1, 1], sorted ascending and
    distinct by default. ``k``: an int, a list of ints or a strategy (None: 1..4, shrinks to 1). Styles
    (``TABLE_STYLES``, shrink to the first): uniform (linspace(-1, 1)), quantile (normal quantiles scaled to
    max 1, NF4-like), random (distinct random entries), adjacent (uniform with one pair 1 ulp apart, so their
    midpoint is not a value of the dtype). ``unsorted=True`` may permute the entries; ``duplicates=True`` may
    repeat one entry. ``labeled=True`` draws (style, table)."""
    for s in styles:
        if s not in TABLE_STYLES:
            raise unknown_name("table style", s, TABLE_STYLES)
    if not styles:
        raise QrefError("tables(): styles is empty")
    if k is None:
        ks: st.SearchStrategy[int] = st.integers(1, 4)
    elif isinstance(k, int):
        ks = st.just(k)
    elif isinstance(k, st.SearchStrategy):
        ks = k
    else:
        ks = st.sampled_from(list(k))
    ks = ks.map(_check_k)
    dt = _source_dtype(dtype)
    strat = _table(ks, dt, st.sampled_from([s for s in TABLE_STYLES if s in styles]), unsorted, duplicates)
    return strat if labeled else strat.map(lambda st_t: st_t[1])


def _check_k(k: int) -> int:
    if not isinstance(k, int) or not 0 <= k <= 16:
        raise QrefError(f"tables(): k must be an integer in 0..16 (2^k entries), got {k!r}")
    return k
