"""Element conversion cases: encode, quantize and decode for every element format (docs/vectors.md §6).

For each format and source dtype, curated input tables (the categories below) are encoded under every
candidate policy (the deterministic rounding modes x the overflow policies, plus every registered element
profile); candidates that give identical codes on a category's inputs form one case, whose ``policy`` is the
first candidate in that order and whose ``equivalent`` / ``profiles`` list the others. So
"elements/float8_e4m3fn/f32/toward_zero/saturate/overflow" also holds for overflow="inf" (toward zero never
overflows to Inf), and the tie cases, which never overflow, hold for every overflow policy.

Categories (inputs of the source dtype, both signs, sorted by bit pattern):
  values       every finite nonzero value of the format
  ties         every midpoint between consecutive nonzero values
  near_values  each value +-1..3 ulp of the source dtype
  near_ties    each midpoint +-1..3 ulp of the source dtype
  overflow     max, the overflow midpoint max + q/2, the next binade value max + q (each +-1..3 ulp), larger
               powers of two, the source's largest finite value
  subnormal    the region around zero and the subnormal/normal boundary: min, min/2 (tie to zero), +-ulps,
               the largest subnormal/min normal midpoint, the source's own subnormals
  special      +-0, +-Inf, quiet and signalling NaNs of both signs with several payloads
  random       seeded random values in the format's range (|x| <= max: never overflows)
  random_bits  seeded random bit patterns of the source dtype (every class)
  exhaustive   all 65536 float16 / bfloat16 bit patterns
Formats wider than 8 bits (float16, bfloat16 targets) use windows of their code space (bottom, the
subnormal/normal boundary, around 1.0, top) instead of every value.
Knob categories vary one more policy field: subnormal_flush (subnormals="flush"), subnormal_input_zero
(input_subnormals="zero") and special_nan_<rule> (nan=<rule>). Stochastic cases (rounding stochastic_a/b/c with
N random bits) carry an explicit ``random_bits`` input: grid points a + (b - a) k/16 between neighbours with
random bits on both sides of each decision threshold, and random points with random bits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ...core.decode import decode
from ...core.encode import encode
from ...errors import QrefError
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...formats.policy import NAN_POLICIES, CastPolicy
from ...profiles import profiles
from .. import random as qrandom
from ..case import Case, policy_record

FAMILY = "elements"

# the float types of at most 16 bits that numpy or ml_dtypes define, in registry order, as the v1 cases were
# generated (a format registered later, such as float8_e5m3fnu, gets cases in an appended function)
MAIN = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
        "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "float16", "bfloat16")
P3109 = ("binary8p1se", "binary8p3se", "binary8p5sf", "binary4p2se", "binary8p4ue")
INTS = ("int8", "uint8", "int4", "uint4", "int8<-127:127>")
ALL_FORMATS = MAIN + P3109 + INTS

DETERMINISTIC = ("nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "toward_max_magnitude", "up",
                 "down", "odd")
STOCHASTIC = (("stochastic_a", 8), ("stochastic_b", 8), ("stochastic_c", 8), ("stochastic_a", 3),
              ("stochastic_b", 3), ("stochastic_c", 3))
FLOAT_OVERFLOWS = ("saturate", "saturate_propagate", "inf", "nan")
INT_OVERFLOWS = ("saturate", "wrap")
SOURCES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16"}
N_RANDOM = 2048
F64_CATEGORIES = ("ties", "near_ties", "near_values", "overflow")  # the committed float64-source categories
NEAREST_ONLY = ("random_bits",)  # committed under nearest_even (and the profiles) only
KNOB_ROUNDINGS = ("nearest_even", "up")  # committed roundings of the knob categories
STOCHASTIC_K = (0, 1, 7, 8, 9, 15)  # grid points k/16 of the stochastic cases
N_RANDOM_BITS = 1024
N_RANDOM_FULL = 1 << 16

# Sections of docs/spec/elements.md each kind of case checks (one place to update if the page is renumbered).
SPEC = {
    "formats": "elements.md §1.1",
    "int_formats": "elements.md §1.3",
    "grid": "elements.md §2.2",
    "round": "elements.md §2.3",
    "overflow": "elements.md §2.4",
    "stochastic": "elements.md §2.5",
    "ml_dtypes": "elements.md §2.6",
    "special": "elements.md §2.7",
    "subnormals": "elements.md §2.8",
    "int": "elements.md §2.9",
    "decode": "elements.md §4",
    "quantize": "elements.md §5",
    "profiles": "elements.md §6",
}

_UINT = {"float64": np.uint64, "float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}
_NPDT = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
_LAYOUT = {"float64": (11, 52), "float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7)}


# ---------------------------------------------------------------------------------------------------------
# source-dtype helpers (all bit manipulation on unsigned integers; float64 arithmetic only where exact)
# ---------------------------------------------------------------------------------------------------------
def _as_bits(values: np.ndarray, src: str) -> np.ndarray:
    """Bit patterns of the float64 ``values`` that ``src`` holds exactly (others are dropped)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if src == "float64":
        return v.view(np.uint64)
    with np.errstate(over="ignore"):
        y = v.astype(_NPDT[src])
    keep = y.astype(np.float64) == v
    return y[keep].view(_UINT[src])


def _signed_both(bits: np.ndarray, src: str) -> np.ndarray:
    """The patterns and their negations (sign bit flipped), deduplicated and sorted."""
    sign = _UINT[src](1 << (np.dtype(_UINT[src]).itemsize * 8 - 1))
    return np.unique(np.concatenate([bits, bits ^ sign]))


def _neighbors(bits: np.ndarray, src: str, ks: tuple[int, ...] = (1, 2, 3)) -> np.ndarray:
    """Patterns +-k ulp of the source dtype away in magnitude (same sign, finite, no crossing of zero)."""
    ut = _UINT[src]
    ebits, mbits = _LAYOUT[src]
    width = 1 + ebits + mbits
    sign = bits & ut(1 << (width - 1))
    mag = (bits & ut((1 << (width - 1)) - 1)).astype(np.int64) if width < 64 else (bits & ut((1 << 63) - 1))
    inf_mag = ((1 << ebits) - 1) << mbits
    out = []
    for k in ks:
        if width < 64:
            up, dn = mag + k, mag - k
            out.append(((up.astype(ut)) | sign)[up < inf_mag])
            out.append(((dn.astype(ut)) | sign)[dn >= 0])
        else:
            up_ok = mag < np.uint64(inf_mag - k)
            dn_ok = mag >= np.uint64(k)
            out.append(((mag + np.uint64(k)) | sign)[up_ok])
            out.append(((mag - np.uint64(k)) | sign)[dn_ok])
    return np.concatenate(out).astype(ut) if out else bits[:0]


def _src_specials(src: str) -> np.ndarray:
    ebits, mbits = _LAYOUT[src]
    width = 1 + ebits + mbits
    s = 1 << (width - 1)
    inf = ((1 << ebits) - 1) << mbits
    quiet = 1 << (mbits - 1)
    pats = [0, inf, inf | quiet, inf | 1, inf | quiet | 1, inf | ((1 << mbits) - 1), inf | (quiet >> 1)]
    return np.unique(np.array([p | sg for p in pats for sg in (0, s)], dtype=_UINT[src]))


def _src_tiny(src: str) -> np.ndarray:
    """The source's smallest subnormals, largest subnormals and smallest normals (positive)."""
    mbits = _LAYOUT[src][1]
    mn = 1 << mbits
    return np.array([1, 2, 3, mn - 1, mn - 2, mn, mn + 1, mn >> 1, (mn >> 1) + 1], dtype=_UINT[src])


def _src_max(src: str) -> np.ndarray:
    ebits, mbits = _LAYOUT[src]
    top = (((1 << ebits) - 1) << mbits) - 1
    return np.array([top, top - 1, top - 2], dtype=_UINT[src])


def _src_array(bits: np.ndarray, src: str) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=_UINT[src]).view(_NPDT[src])


# ---------------------------------------------------------------------------------------------------------
# the format's value tables
# ---------------------------------------------------------------------------------------------------------
def _windows(fmt: FloatFormat) -> np.ndarray:
    """Magnitude codes to tabulate: all for <= 8-bit formats, else 64-code windows (bottom, the
    subnormal/normal boundary, around 1.0, top)."""
    top = fmt.max_finite_code
    if fmt.bits <= 8:
        return np.arange(0, top + 1, dtype=np.int64)
    m1 = 1 << fmt.mantissa_bits
    one = fmt.bias << fmt.mantissa_bits  # the code of 1.0
    parts = [np.arange(0, 64), np.arange(m1 - 32, m1 + 32), np.arange(one - 32, one + 32), np.arange(top - 63, top + 1)]
    return np.unique(np.clip(np.concatenate(parts), 0, top)).astype(np.int64)


def _positive_values(fmt: FloatFormat) -> np.ndarray:
    """Positive finite values (float64, exact, ascending) of the tabulated magnitude codes; 0 excluded."""
    mags = _windows(fmt)
    v = decode(mags.astype(fmt.code_dtype), fmt, dtype=np.float64)
    return v[v > 0]


def _quantum_at_max(fmt: FloatFormat) -> float:
    sig, exp = fmt.magnitude_parts(fmt.max_finite_code)
    e = exp + sig.bit_length() - 1
    return float(2.0 ** (e - fmt.mantissa_bits))


def _min_normal_mid(fmt: FloatFormat) -> list[float]:
    """The largest subnormal, min normal and their midpoint (formats with subnormals)."""
    if not (fmt.subnormals and fmt.mantissa_bits > 0):
        return []
    mn = float(fmt.min_normal)
    q = float(fmt.min_value)
    return [mn - q, mn, mn - q / 2]


# ---------------------------------------------------------------------------------------------------------
# categories: name -> positive points (float64) or source bit patterns
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Category:
    name: str
    bits: np.ndarray  # source bit patterns
    tags: tuple[str, ...]
    spec: tuple[str, ...]
    description: str


def _float_categories(fmt: FloatFormat, src: str, full: bool, label: str) -> list[Category]:
    pos = _positive_values(fmt)
    ties = (pos[:-1] + pos[1:]) / 2
    if fmt.bits > 8:  # only midpoints of neighbouring codes inside one window
        mags = _windows(fmt)
        mags = mags[decode(mags.astype(fmt.code_dtype), fmt, dtype=np.float64) > 0]
        ties = ties[np.diff(mags) == 1]
    vmax = float(fmt.max_value)
    q = _quantum_at_max(fmt)
    vmin = float(fmt.min_value)
    both = lambda b: _signed_both(b, src)  # noqa: E731
    vb = both(_as_bits(pos, src))
    tb = both(_as_bits(ties, src))
    edges = _as_bits(np.array([vmax, vmax + q / 2, vmax + q]), src)
    big = _as_bits(np.array([2 * vmax, 4 * vmax, vmax + 2 * q, 2.0 ** (fmt.emax + 1), 2.0 ** (fmt.emax + 2),
                             2.0 ** (fmt.emax + 8), 2.0 ** (fmt.emax + 40)]), src)
    ovf = both(np.concatenate([edges, _neighbors(edges, src), big, _src_max(src)]))
    low = np.array([vmin, vmin / 2, vmin / 4, 3 * vmin / 4, 3 * vmin / 2, 2 * vmin, *_min_normal_mid(fmt),
                    float(fmt.min_normal), vmin * 2.0 ** -8])
    lowb = _as_bits(low, src)
    sub = both(np.concatenate([lowb, _neighbors(lowb, src), _src_tiny(src)]))
    m = fmt.mantissa_bits
    raw = qrandom.floats_in_binades(f"{label}/random", 2 * (N_RANDOM_FULL if full else N_RANDOM), src,
                                    fmt.emin - m - 2, fmt.emax)
    rv = _src_array(raw, src).astype(np.float64)
    rnd = raw[np.abs(rv) <= vmax][: N_RANDOM_FULL if full else N_RANDOM]
    rbits = qrandom.float_bits(f"{label}/random_bits", N_RANDOM_FULL if full else N_RANDOM_BITS, src)
    r, o, s, g = SPEC["round"], SPEC["overflow"], SPEC["special"], SPEC["grid"]
    return [
        Category("values", vb, ("values", "boundary"), (g, r), "every finite nonzero value of the format"),
        Category("ties", tb, ("tie",), (r,), "every midpoint between neighbouring nonzero values"),
        Category("near_values", both(_neighbors(vb, src)), ("boundary",), (r,),
                 "every value +-1..3 ulp of the source dtype"),
        Category("near_ties", both(_neighbors(tb, src)), ("tie", "boundary"), (r,),
                 "every midpoint +-1..3 ulp of the source dtype"),
        Category("overflow", ovf, ("overflow", "boundary"), (g, r, o),
                 "max, max + q/2, max + q (+-1..3 ulp), larger powers of two, the source's max"),
        Category("subnormal", sub, ("subnormal", "underflow", "boundary"), (g, r, s),
                 "around zero and the subnormal/normal boundary, the source's own subnormals"),
        Category("special", _src_specials(src), ("special",), (o, s), "+-0, +-Inf, NaNs of both signs"),
        Category("random", rnd, ("random",), (r,), "seeded random values with |x| <= max"),
        Category("random_bits", rbits, ("random",), (r, o, s), "seeded random bit patterns of the source dtype"),
    ]


def _int_categories(fmt: IntFormat, src: str, full: bool, label: str) -> list[Category]:
    lo, hi = fmt.lo, fmt.hi
    vals = np.arange(lo, hi + 1, dtype=np.float64)
    vals = vals[vals != 0]
    ties = np.arange(lo, hi, dtype=np.float64) + 0.5
    vb = _as_bits(vals, src)
    tb = _as_bits(ties, src)
    edges = _as_bits(np.array([hi, hi + 0.5, hi + 1, lo, lo - 0.5, lo - 1]), src)
    k = fmt.bits
    big = _as_bits(np.array([2.0 ** k, 2.0 ** k + 1, 2.0 ** k + 3, 2.0 ** (k + 1) + 5, -(2.0 ** k) - 3, 1000.0,
                             -1000.0, 3 * 2.0 ** 20 + 7, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, 2.0 ** 64, 2.0 ** 70,
                             -(2.0 ** 70)]), src)
    ovf = np.unique(np.concatenate([edges, _neighbors(edges, src), big, _signed_both(_src_max(src), src)]))
    lowb = _as_bits(np.array([0.25, 0.5, 0.75, 1.5, 2.0 ** -20]), src)
    sub = _signed_both(np.concatenate([lowb, _neighbors(lowb, src), _src_tiny(src)]), src)
    raw = qrandom.floats_in_binades(f"{label}/random", 2 * (N_RANDOM_FULL if full else N_RANDOM), src, -3, k + 1)
    rv = _src_array(raw, src).astype(np.float64)
    rnd = raw[(rv >= lo) & (rv <= hi)][: N_RANDOM_FULL if full else N_RANDOM]
    rbits = qrandom.float_bits(f"{label}/random_bits", N_RANDOM_FULL if full else N_RANDOM_BITS, src)
    i = SPEC["int"]
    return [
        Category("values", np.unique(vb), ("values", "boundary"), (i,), "every nonzero integer in range"),
        Category("ties", np.unique(tb), ("tie",), (i,), "every half-integer between in-range integers"),
        Category("near_values", np.unique(_neighbors(vb, src)), ("boundary",), (i,),
                 "every integer +-1..3 ulp of the source dtype"),
        Category("near_ties", np.unique(_neighbors(tb, src)), ("tie", "boundary"), (i,),
                 "every half-integer +-1..3 ulp of the source dtype"),
        Category("overflow", ovf, ("overflow", "boundary"), (i,),
                 "the range ends +-0.5 and +-1 (+-ulps), integers beyond the storage width, the source's max"),
        Category("subnormal", sub, ("underflow", "boundary"), (i,), "|x| < 2 and the source's subnormals"),
        Category("special", _src_specials(src), ("special",), (i,), "+-0, +-Inf, NaNs of both signs"),
        Category("random", rnd, ("random",), (i,), "seeded random values in [min, max]"),
        Category("random_bits", rbits, ("random",), (i,), "seeded random bit patterns of the source dtype"),
    ]


# ---------------------------------------------------------------------------------------------------------
# candidate policies and grouping
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    policy: CastPolicy
    profile: str | None = None  # set for profile candidates
    segment: str = ""  # "<rounding>/<overflow>" or "profile/<name>"


def _overflows(fmt: Format) -> tuple[str, ...]:
    if isinstance(fmt, IntFormat):
        return INT_OVERFLOWS if not fmt.narrowed else ("saturate",)
    return tuple(o for o in FLOAT_OVERFLOWS if o != "nan" or fmt.has_nan)


def policy_applies(policy: CastPolicy, fmt: Format) -> bool:
    """The policy resolves for fmt (elements.md §2: e.g. no overflow="nan" for a format without NaN)."""
    try:
        policy.resolve(fmt)
    except QrefError:
        return False
    return True


def _grid(fmt: Format, roundings: tuple[str, ...], **knobs: object) -> list[Candidate]:
    out = []
    for r in roundings:
        for o in _overflows(fmt):
            pol = CastPolicy(rounding=r, overflow=o, **knobs)  # type: ignore[arg-type]
            if policy_applies(pol, fmt):
                out.append(Candidate(pol, None, f"{r}/{o}"))
    return out


# the element profiles the v1 cases were generated with: a profile registered later gets cases of its own in an
# appended function, so that the committed cases (and their equivalent-profile lists) keep their bytes
V1_PROFILES = ("spec", "ml_dtypes@0.6", "ml_dtypes@0.7", "saturating", "mlx")


def _profile_candidates(fmt: Format, src: str, names: tuple[str, ...] = V1_PROFILES) -> list[Candidate]:
    """The policies of the element profiles ``names`` (default: the v1 ones) for ``fmt`` from ``src``
    (profiles.md §4), named ``NAME[@TAG]``."""
    pols = [(p.cast_for(fmt, _NPDT[src]), key) for key, p in profiles("element").items() if key in names]
    # stochastic profiles (cvt.rs, elements.md §6.2) need random bits: their cases are _cvt_rs_cases'
    return [Candidate(pol, key, f"profile/{key}") for pol, key in pols
            if policy_applies(pol, fmt) and pol.stochastic_bits is None]


def _stochastic_grid(fmt: Format) -> list[Candidate]:
    out = []
    for mode, n in STOCHASTIC:
        for o in _overflows(fmt):
            pol = CastPolicy(rounding=mode, overflow=o, stochastic_bits=n)
            if policy_applies(pol, fmt):
                out.append(Candidate(pol, None, f"{mode}_n{n}/{o}"))
    return out


def _encode_all(x: np.ndarray, fmt: Format, cands: list[Candidate], rbits: dict[int, np.ndarray] | None = None
                ) -> list[np.ndarray]:
    outs = []
    for c in cands:
        n = c.policy.stochastic_bits
        rb = None if n is None or rbits is None else rbits[n]
        outs.append(encode(x, fmt, profile=c.policy, random_bits=rb))
    return outs


def _emit(fmt: Format, src_key: str, cat_name: str, cands: list[Candidate], outs: list[np.ndarray],
          inputs: dict[str, np.ndarray], tags: tuple[str, ...], spec: tuple[str, ...], description: str
          ) -> Iterator[Case]:
    """One case per group of candidates with identical codes (first candidate = the case's policy)."""
    groups: dict[bytes, list[int]] = {}
    for i, o in enumerate(outs):
        groups.setdefault(o.tobytes(), []).append(i)
    for members in groups.values():
        rep = cands[members[0]]
        rep_rec = policy_record(rep.policy, fmt)
        equivalent: list[dict[str, object]] = []
        for i in members[1:]:
            rec = policy_record(cands[i].policy, fmt)
            diff = {k: v for k, v in rec.items() if rep_rec.get(k) != v}
            if diff and diff not in equivalent:
                equivalent.append(diff)
        prof = tuple(dict.fromkeys(cands[i].profile for i in members if cands[i].profile))
        all_tags = tags + (("profile",) if rep.profile else ()) + (
            ("stochastic",) if rep.policy.stochastic_bits else ())
        extra_spec = (SPEC["ml_dtypes"],) if (rep.policy.rounding == "exponent_carry" or
                                               rep.policy.int_cast != "direct") else ()
        extra_spec += (SPEC["profiles"],) if rep.profile else ()
        yield Case(
            id=f"{FAMILY}/{fmt.name}/{src_key}/{rep.segment}/{cat_name}",
            family=FAMILY, operation="encode", format=fmt, policy=rep.policy, profile=rep.profile,
            inputs=inputs, expected={"codes": outs[members[0]]}, array_formats={"codes": fmt.name},
            tags=tuple(dict.fromkeys(all_tags)), spec=tuple(dict.fromkeys(spec + extra_spec)),
            equivalent=tuple(equivalent), profiles=prof, description=description,
        )


def _categories(fmt: Format, src: str, full: bool, label: str) -> list[Category]:
    if isinstance(fmt, IntFormat):
        return _int_categories(fmt, src, full, label)
    assert isinstance(fmt, FloatFormat)
    return _float_categories(fmt, src, full, label)


def _encode_cases(fmt: Format, src_key: str, full: bool, profile_names: tuple[str, ...] = V1_PROFILES,
                  roundings: tuple[str, ...] = DETERMINISTIC) -> Iterator[Case]:
    """The curated categories of one (format, source dtype) under the deterministic grid and the profiles."""
    src = SOURCES[src_key]
    label = f"{FAMILY}/{fmt.name}/{src_key}"
    cats = _categories(fmt, src, full, label)
    if src_key == "f64" and not full:  # float64 sources matter where double rounding would differ
        cats = [c for c in cats if c.name in F64_CATEGORIES]
    cands = _grid(fmt, roundings) + _profile_candidates(fmt, src, profile_names)
    xs = [_src_array(c.bits, src) for c in cats]
    allx = np.concatenate(xs)
    outs_all = _encode_all(allx, fmt, cands)
    start = 0
    for cat, x in zip(cats, xs):
        sl = slice(start, start + x.size)
        start += x.size
        keep = [i for i, c in enumerate(cands)
                if full or cat.name not in NEAREST_ONLY or c.profile or c.policy.rounding == "nearest_even"]
        yield from _emit(fmt, src_key, cat.name, [cands[i] for i in keep], [outs_all[i][sl] for i in keep],
                         {"x": x}, cat.tags, cat.spec, f"encode {src} -> {fmt.name}: {cat.description}")
    if isinstance(fmt, FloatFormat) and src_key == "f32":
        yield from _knob_cases(fmt, src_key, cats, full)
        default = Candidate(CastPolicy(), None, "")
        yield from _quantize_case(fmt, src_key, cats, cands, default)


def _knob_cases(fmt: FloatFormat, src_key: str, cats: list[Category], full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    by = {c.name: c for c in cats}
    sub = _src_array(np.unique(np.concatenate([by["subnormal"].bits, by["random"].bits[:256]])), src)
    knobs: list[tuple[str, dict[str, object], np.ndarray, tuple[str, ...], tuple[str, ...], str]] = []
    if fmt.subnormals and fmt.zero:
        knobs.append(("subnormal_flush", {"subnormals": "flush"}, sub, ("subnormal", "underflow"),
                      (SPEC["subnormals"],), "results that are subnormal after rounding become zero"))
    knobs.append(("subnormal_input_zero", {"input_subnormals": "zero"}, sub, ("subnormal",),
                  (SPEC["subnormals"],), "subnormal inputs of the source dtype are read as zero"))
    special = _src_array(by["special"].bits, src)
    default_nan = "keep_sign" if fmt.has_nan else "flipped_sign_zero"
    for rule in NAN_POLICIES:
        if rule in ("error", default_nan):
            continue
        knobs.append((f"special_nan_{rule}", {"nan": rule}, special, ("special",), (SPEC["special"],),
                      f"NaN inputs under nan={rule!r}"))
    for name, knob, x, tags, spec, desc in knobs:
        cands = _grid(fmt, DETERMINISTIC if full else KNOB_ROUNDINGS, **knob)
        if not cands:
            continue
        outs = _encode_all(x, fmt, cands)
        yield from _emit(fmt, src_key, name, cands, outs, {"x": x}, tags, spec, f"encode {src} -> {fmt.name}: {desc}")


def _quantize_case(fmt: FloatFormat, src_key: str, cats: list[Category], cands: list[Candidate],
                   default: Candidate) -> Iterator[Case]:
    """quantize = decode(encode(x)) in the source dtype, on every curated category, default policy only."""
    src = SOURCES[src_key]
    x = _src_array(np.concatenate([c.bits for c in cats if c.name != "random_bits"]), src)
    pols = [c.policy for c in cands]
    ys = [decode(encode(x, fmt, profile=p), fmt, dtype=x.dtype) for p in pols]
    target = decode(encode(x, fmt, profile=default.policy), fmt, dtype=x.dtype)
    members = [i for i, y in enumerate(ys) if y.view(_UINT[src]).tobytes() == target.view(_UINT[src]).tobytes()]
    rep = cands[members[0]]
    rep_rec = policy_record(rep.policy, fmt)
    equivalent: list[dict[str, object]] = []
    for i in members[1:]:
        diff = {k: v for k, v in policy_record(cands[i].policy, fmt).items() if rep_rec[k] != v}
        if diff and diff not in equivalent:
            equivalent.append(diff)
    yield Case(
        id=f"{FAMILY}/{fmt.name}/{src_key}/{rep.segment}/quantize", family=FAMILY, operation="quantize",
        format=fmt, policy=rep.policy, profile=rep.profile, inputs={"x": x}, expected={"y": target},
        tags=("boundary", "tie", "overflow", "special", "random"), spec=(SPEC["quantize"], SPEC["round"]),
        equivalent=tuple(equivalent), profiles=tuple(dict.fromkeys(cands[i].profile for i in members
                                                                   if cands[i].profile)),
        description=f"quantize {src} through {fmt.name} (decode(encode(x)) in {src}) on every curated input",
    )


def _exhaustive_cases(fmt: Format, src_key: str, full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    x = np.arange(1 << 16, dtype=np.uint16).view(_NPDT[src])
    if full:
        cands = _grid(fmt, DETERMINISTIC)
    else:  # committed: the default overflow (ml_dtypes, MLIR) and saturation (OCP saturating, ONNX saturate=1)
        cands = [c for c in _grid(fmt, ("nearest_even",)) if c.policy.overflow in (fmt.default_overflow, "saturate")]
    cands += _profile_candidates(fmt, src)
    outs = _encode_all(x, fmt, cands)
    spec = (SPEC["int"],) if isinstance(fmt, IntFormat) else (SPEC["round"], SPEC["overflow"], SPEC["special"])
    yield from _emit(fmt, src_key, "exhaustive", cands, outs, {"x": x}, ("exhaustive",), spec,
                     f"encode every {src} bit pattern to {fmt.name}")


def _stochastic_cases(fmt: Format, full: bool) -> Iterator[Case]:
    """Grid points between neighbours with random bits around each decision threshold, and random points."""
    src = "float32"
    label = f"{FAMILY}/{fmt.name}/f32/stochastic"
    if isinstance(fmt, IntFormat):
        pos = np.arange(0, fmt.hi + 2, dtype=np.float64)
        negs = np.arange(0, -fmt.lo + 2, dtype=np.float64)
        pairs_pos = np.stack([pos[:-1], pos[1:]], axis=1)
        pairs_neg = -np.stack([negs[:-1], negs[1:]], axis=1)
        pairs = np.concatenate([pairs_pos, pairs_neg])
        sel = np.unique(np.r_[0:4, len(pairs_pos) - 3:len(pairs_pos), len(pairs_pos):len(pairs_pos) + 4,
                              len(pairs) - 3:len(pairs)])
        pairs = pairs[np.clip(sel, 0, len(pairs) - 1)]
    else:
        assert isinstance(fmt, FloatFormat)
        pos = _positive_values(fmt)
        grid = np.concatenate([[0.0] if fmt.zero else [], pos, [float(fmt.max_value) + _quantum_at_max(fmt)]])
        idx = np.arange(len(grid) - 1)
        if len(idx) > 24:
            mn = float(fmt.min_normal)
            i_mn = int(np.searchsorted(grid, mn))
            i_one = int(np.searchsorted(grid, 1.0))
            want = np.r_[0:6, i_mn - 3:i_mn + 3, i_one - 3:i_one + 3, len(idx) - 6:len(idx)]
            idx = np.unique(np.clip(want, 0, len(idx) - 1))
        pairs = np.stack([grid[idx], grid[idx + 1]], axis=1)
        pairs = np.concatenate([pairs, -pairs])
    cands = _stochastic_grid(fmt)
    for n in sorted({c.policy.stochastic_bits for c in cands if c.policy.stochastic_bits}):
        # eta = k/16 + j/(4 * 2^N): exact grid points and points a quarter, half and three quarters of an N-bit
        # step past them (where the P3109 variants A, B and C differ); numerators over 64 * 2^N
        kj = np.array([(k, j) for k in STOCHASTIC_K for j in range(4)])
        num = kj[:, 0] * (1 << n) * 4 + kj[:, 1] * 16
        den = 64 * (1 << n)
        pts = pairs[:, :1] + (pairs[:, 1:] - pairs[:, :1]) * (num / den)  # exact: few bits beyond the format's
        pts = pts.reshape(-1)
        fl = np.tile((num * (1 << n)) // den, len(pairs))  # floor(eta 2^N)
        with np.errstate(over="ignore"):  # float16 targets: drop the finest points (not exact in float32)
            exact = pts.astype(np.float32).astype(np.float64) == pts
        pts, fl = pts[exact], fl[exact]
        xb = _as_bits(pts, src)
        thr = (1 << n) - fl  # stochastic_a rounds away from zero iff R >= 2^N - floor(eta 2^N)
        rs = np.stack([np.zeros_like(thr), np.full_like(thr, (1 << n) - 1), thr - 1, thr, thr + 1], axis=1)
        rs = np.clip(rs, 0, (1 << n) - 1)
        x = _src_array(np.repeat(xb, 5), src)
        rb = rs.reshape(-1).astype(np.uint8 if n <= 8 else np.uint16)
        sub = [c for c in cands if c.policy.stochastic_bits == n]
        outs = _encode_all(x, fmt, sub, {n: rb})
        yield from _emit(fmt, "f32", f"grid_n{n}", sub, outs, {"x": x, "random_bits": rb},
                         ("stochastic", "boundary"),
                         (SPEC["int"] if isinstance(fmt, IntFormat) else SPEC["stochastic"],),
                         f"points a + (b - a) eta between neighbours of {fmt.name} (eta = k/16 + j/2^(N+2)), random "
                         "bits 0, 2^N - 1 and around the threshold 2^N - floor(eta 2^N)")
        count = N_RANDOM_FULL if full else 1024
        if isinstance(fmt, IntFormat):
            raw = qrandom.floats_in_binades(f"{label}/random", 2 * count, src, -3, fmt.bits + 1)
            v = _src_array(raw, src).astype(np.float64)
            raw = raw[(v >= fmt.lo) & (v <= fmt.hi)][:count]
        else:
            assert isinstance(fmt, FloatFormat)
            raw = qrandom.floats_in_binades(f"{label}/random", 2 * count, src, fmt.emin - fmt.mantissa_bits - 2,
                                            fmt.emax + 1)
            raw = raw[: count]
        x = _src_array(raw, src)
        rb = qrandom.bits(f"{label}/random_bits_n{n}", x.size, n).astype(np.uint8 if n <= 8 else np.uint16)
        outs = _encode_all(x, fmt, sub, {n: rb})
        spec = (SPEC["int"],) if isinstance(fmt, IntFormat) else (SPEC["stochastic"], SPEC["overflow"])
        yield from _emit(fmt, "f32", f"random_n{n}", sub, outs, {"x": x, "random_bits": rb}, ("stochastic", "random"),
                         spec, f"seeded random values and random bits, {fmt.name}")


def _decode_cases(fmt: Format) -> Iterator[Case]:
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    dtypes = ["float32"] + (["float64", "float16", "bfloat16"] if fmt.bits <= 8 else [])
    for dt in dtypes:
        y = decode(codes, fmt, dtype=_NPDT[dt])
        yield Case(
            id=f"{FAMILY}/{fmt.name}/decode/{dt}", family=FAMILY, operation="decode", format=fmt,
            params={"dtype": dt}, inputs={"codes": codes}, expected={"y": y}, array_formats={"codes": fmt.name},
            tags=("exhaustive", "special"),
            spec=(SPEC["decode"], SPEC["formats"] if fmt.kind == "float" else SPEC["int_formats"]),
            description=f"decode every code of {fmt.name} to {dt} (nearest_even to {dt}; NaN keeps its sign)",
        )


def build_cases(full: bool) -> Iterator[Case]:
    """Every element case; ``full`` adds exhaustive 16-bit sources under every rounding mode for every format
    and larger random sets."""
    for name in ALL_FORMATS:
        fmt = get_format(name)
        yield from _decode_cases(fmt)
        yield from _encode_cases(fmt, "f32", full)
        if name in MAIN or full:
            yield from _encode_cases(fmt, "f64", full)
        for src_key in ("f16", "bf16"):
            if (name in MAIN or full) and fmt.name != SOURCES[src_key]:
                yield from _exhaustive_cases(fmt, src_key, full)
        yield from _stochastic_cases(fmt, full)
    yield from _scale_type_cases(full)
    yield from _cvt_rs_cases()


# the scale and element formats of 2025-26 (elements.md §1.2), appended after the v1 cases: every code decoded,
# float32 inputs encoded under the grid and every element profile registered when they were added (the ONNX ones
# included; a profile registered later would change their equivalent-profile lists)
FORMATS_2026 = ("float7_e4m3fnu", "float8_e5m3fnu", "float8_e4m3b3", "float8_e4m3b11", "float8_e4m3b15")
PROFILES_2026 = ("spec", "ml_dtypes@0.6", "ml_dtypes@0.7", "saturating", "mlx", "onnx@1.23", "onnx_no_saturate@1.23",
                 "openvino", "ptx_cvt_rn_satfinite", "ptx_cvt_rp_ue8m0", "ptx_cvt_rz_ue8m0", "torch@2.13")


def _scale_type_cases(full: bool) -> Iterator[Case]:
    for name in FORMATS_2026:
        fmt = get_format(name)
        yield from _decode_cases(fmt)
        yield from _encode_cases(fmt, "f32", full, profile_names=PROFILES_2026, roundings=KNOB_ROUNDINGS)


# PTX cvt.rs (elements.md §6.2), appended after the 2026 formats: per target, float32 points a + (b - a) k/16
# between neighbours with random bits 0, 2^N - 1 and around the carry threshold 2^N - floor(eta 2^N), and seeded
# random values with random bits, under the stochastic element profiles
CVT_RS_PROFILES = ("ptx_cvt_rs_satfinite", "ptx_cvt_rs")
CVT_RS_FORMATS = ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float16",
                  "bfloat16")


def _cvt_rs_cases() -> Iterator[Case]:
    every = profiles("element")
    for name in CVT_RS_FORMATS:
        fmt = get_format(name)
        assert isinstance(fmt, FloatFormat)
        cands = [Candidate(every[k].cast_for(fmt, np.float32), k, f"profile/{k}") for k in CVT_RS_PROFILES
                 if k != "ptx_cvt_rs" or name in ("float16", "bfloat16")]
        n = cands[0].policy.stochastic_bits
        assert n is not None and all(c.policy.stochastic_bits == n for c in cands)
        grid = np.concatenate([[0.0], _positive_values(fmt), [float(fmt.max_value) + _quantum_at_max(fmt)]])
        i_one = int(np.searchsorted(grid, 1.0))
        idx = np.unique(np.clip(np.r_[0:4, i_one - 2:i_one + 2, len(grid) - 4:len(grid) - 1], 0, len(grid) - 2))
        lo, hi = grid[idx][:, None], grid[idx + 1][:, None]
        k = np.array(STOCHASTIC_K)
        pts = (lo + (hi - lo) * (k / 16.0)).reshape(-1)  # exact: 4 bits beyond the format's
        fl = np.tile(k * (1 << n) // 16, len(idx))
        thr = (1 << n) - fl  # the sum floor(eta 2^N) + R carries iff R >= thr
        rs = np.clip(np.stack([np.zeros_like(thr), np.full_like(thr, (1 << n) - 1), thr - 1, thr, thr + 1], 1),
                     0, (1 << n) - 1)
        xs = np.repeat(np.concatenate([pts, -pts]), 5).astype(np.float32)
        rb = np.concatenate([rs, rs]).reshape(-1).astype(np.uint16 if n > 8 else np.uint8)
        assert np.array_equal(pts.astype(np.float32).astype(np.float64), pts)
        big = min(float(fmt.max_value) * 4, float(np.finfo(np.float32).max))
        specials = np.array([np.inf, -np.inf, np.nan, big], np.float32)
        x = np.concatenate([xs, specials])
        rb = np.concatenate([rb, np.full(specials.size, (1 << n) - 1, rb.dtype)])
        outs = _encode_all(x, fmt, cands, {n: rb})
        yield from _emit(fmt, "f32", "cvt_rs_grid", cands, outs, {"x": x, "random_bits": rb},
                         ("stochastic", "boundary"), (SPEC["stochastic"], SPEC["overflow"], "elements.md §6.2"),
                         f"PTX cvt.rs to {name}: points a + (b - a) k/16 between neighbours, random bits 0, "
                         "2^N - 1 and around the carry threshold; +-Inf, NaN, 4 max (float32 max for bfloat16)")
        label = f"{FAMILY}/{name}/f32/cvt_rs"
        raw = qrandom.floats_in_binades(f"{label}/random", 1024, "float32", fmt.emin - fmt.mantissa_bits - 2,
                                        fmt.emax + 1)
        x = _src_array(raw, "float32")
        rb = qrandom.bits(f"{label}/random_bits_n{n}", x.size, n).astype(np.uint16 if n > 8 else np.uint8)
        outs = _encode_all(x, fmt, cands, {n: rb})
        yield from _emit(fmt, "f32", "cvt_rs_random", cands, outs, {"x": x, "random_bits": rb},
                         ("stochastic", "random"), (SPEC["stochastic"], SPEC["overflow"], "elements.md §6.2"),
                         f"PTX cvt.rs to {name}: seeded random values and random bits")


__all__ = ["ALL_FORMATS", "CVT_RS_FORMATS", "CVT_RS_PROFILES", "DETERMINISTIC", "F64_CATEGORIES", "FAMILY",
           "FLOAT_OVERFLOWS", "FORMATS_2026", "INTS", "INT_OVERFLOWS", "KNOB_ROUNDINGS", "MAIN", "NEAREST_ONLY",
           "N_RANDOM", "N_RANDOM_BITS", "N_RANDOM_FULL", "P3109", "SOURCES", "SPEC", "STOCHASTIC", "STOCHASTIC_K",
           "V1_PROFILES", "Candidate", "Category", "build_cases", "policy_applies"]
