"""Bit-exact assertions for backend tests (guide: docs/testing-backends.md §3).

- ``assert_codes_equal(actual, expected, fmt)``: codes compared as unsigned integers, with a NaN policy, and a
  TestFloat-style report: input bits, expected code and value, got code and value, the class of each mismatch
  (``MISMATCH_CLASSES``), a count per class and the first ``max_report`` lines.
- ``assert_values_equal(actual, expected)``: float arrays compared as bit patterns of their dtype (catches -0
  versus +0 and NaN codes, which ``numpy.testing.assert_array_equal`` treats as equal).
- ``assert_conforms(fn, target)``: drives a backend function with ``qref.strategies`` through hypothesis and
  reports the minimal counterexample with a one-line reproducer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as dc_fields
from typing import Any

import numpy as np
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

from ..core.decode import exact_parts
from ..core.encode import encode
from ..core.exact import INF, NAN, ZERO, plain_integers
from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats.policy import CastPolicy

__all__ = [
    "MISMATCH_CLASSES",
    "NAN_POLICIES",
    "CodeMismatchError",
    "ConformanceError",
    "Mismatch",
    "MismatchReport",
    "assert_codes_equal",
    "assert_conforms",
    "assert_values_equal",
    "compare_codes",
]

NAN_POLICIES = ("exact", "same_sign", "any_nan_code")
"""exact: NaN codes must be equal; same_sign: any NaN code equals any NaN code of the same sign;
any_nan_code: any NaN code equals any NaN code."""

MISMATCH_CLASSES = (
    "nan_code",          # both NaN, different codes (payload or sign)
    "nan_input",         # the input is NaN and the results differ (NaN -> max, NaN -> zero ...)
    "signed_zero",       # +0 versus -0
    "sign",              # same magnitude, opposite signs
    "saturate_vs_inf",   # +-max finite versus +-Inf (overflow policy)
    "saturate_vs_nan",   # +-max finite versus NaN (overflow policy)
    "inf_vs_nan",        # Inf versus NaN (overflow / Inf policy)
    "subnormal_flush",   # zero versus a subnormal (flush to zero)
    "tie_rule",          # the input is an exact tie between the two codes (tie-breaking rule)
    "double_rounding",   # float64 input whose float32 rounding is a tie between the two codes
    "off_by_one_ulp",    # adjacent codes of the same sign, input not a tie
    "range_edge",        # integer storage: one side is the range's lo/hi (saturation or narrowed range)
    "nan_vs_number",     # NaN versus a number, input not NaN
    "other",
)


class CodeMismatchError(AssertionError):
    """Raised by assert_codes_equal / assert_values_equal; ``report`` holds the structured mismatch data."""

    def __init__(self, report: MismatchReport) -> None:
        super().__init__(str(report))
        self.report = report


@dataclass(frozen=True)
class Mismatch:
    """One mismatching element: its index, input (bits and value, if inputs were given), both codes, class."""

    index: tuple[int, ...]
    input: str | None
    expected: int
    actual: int
    expected_value: str
    actual_value: str
    cls: str


@dataclass(frozen=True)
class MismatchReport:
    """All mismatches of one comparison: counts per class (``MISMATCH_CLASSES``) and the first lines."""

    what: str
    format: Format
    nan: str
    compared: int
    mismatched: int
    counts: Mapping[str, int]
    first: tuple[Mismatch, ...]

    def __str__(self) -> str:
        head = (f"{self.what} differ at {self.mismatched} of {self.compared} compared elements "
                f"({self.format.name}, nan={self.nan!r})")
        lines = [head, "  class                count"]
        lines += [f"  {c:<18} {n:>7}" for c, n in self.counts.items()]
        lines.append(f"first {len(self.first)} of {self.mismatched}:")
        rows = [("index", "input (bits value)", "expected", "got", "class")]
        rows += [(_index_str(m.index), m.input or "-", f"{_hex(m.expected, self.format)} {m.expected_value}",
                  f"{_hex(m.actual, self.format)} {m.actual_value}", m.cls) for m in self.first]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------
def _asarray(x: object, what: str) -> np.ndarray:
    """x as an array; ml_dtypes int2/int4/uint2/uint4 (ONNX's typed codes and zero points) as int8/uint8 values
    (uniform.md §1 (C9))."""
    try:
        return plain_integers(np.asarray(x))
    except Exception as exc:  # pragma: no cover - depends on the foreign array type
        raise QrefError(f"{what}: cannot read it as an array ({exc})") from exc


def _float_dtype_format(dt: np.dtype) -> FloatFormat | None:
    if dt.kind not in "fV":
        return None
    try:
        f = get_format(dt.name)
    except QrefError:
        return None
    return f if isinstance(f, FloatFormat) else None


def _as_codes(x: object, fmt: Format, what: str) -> np.ndarray:
    """Codes of fmt as uint64: integer arrays (range-checked), or arrays of fmt's own float dtype (viewed)."""
    arr = _asarray(x, what)
    if arr.dtype.kind == "b":
        raise QrefError(f"{what}: got a boolean array; pass codes (unsigned integers) of {fmt.name}")
    if arr.dtype.kind in "iu":
        a64 = arr.astype(np.int64)
        if isinstance(fmt, IntFormat) and arr.dtype.kind == "i":
            lo = -(1 << (fmt.bits - 1)) if fmt.signed else 0
            if a64.size and (a64.min() < lo or a64.max() >= (1 << fmt.bits)):
                raise QrefError(f"{what}: values outside {fmt.name}'s storage range")
            return (a64 % (1 << fmt.bits)).astype(np.uint64)
        if a64.size and (a64.min() < 0 or arr.astype(np.uint64).max() >= (1 << fmt.bits)):
            raise QrefError(f"{what}: codes must lie in [0, 2^{fmt.bits}) for {fmt.name}; found "
                            f"[{arr.min()}, {arr.max()}]")
        return arr.astype(np.uint64)
    own = _float_dtype_format(arr.dtype)
    if own is not None and own == fmt:
        return arr.view(f"uint{8 * arr.dtype.itemsize}").astype(np.uint64)
    raise QrefError(
        f"{what}: got a {arr.dtype} array for format {fmt.name}; pass codes (unsigned integers, e.g. from "
        f"qref.encode or arr.view(np.uint8)) or an array of {fmt.name}'s own dtype; to compare float values "
        "bit for bit use assert_values_equal")


def _check_nan_policy(nan: str) -> str:
    if nan not in NAN_POLICIES:
        raise unknown_name("NaN comparison policy", nan, NAN_POLICIES)
    return nan


# ---------------------------------------------------------------------------------------------------------
# comparison and classification (vectorized over the mismatching elements)
# ---------------------------------------------------------------------------------------------------------
def _equal(e: np.ndarray, a: np.ndarray, fmt: Format, nan: str) -> np.ndarray:
    eq = e == a
    if nan == "exact" or isinstance(fmt, IntFormat) or not fmt.has_nan:
        return eq
    ne, na = exact_parts(e, fmt), exact_parts(a, fmt)
    both = (ne.cls == NAN) & (na.cls == NAN)
    if nan == "same_sign":
        both &= ne.neg == na.neg
    return eq | both


def _candidates(x: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(nearest ties-toward-zero, nearest ties-away) codes of x: different exactly when x is a tie."""
    kw: dict[str, Any] = {"overflow": "saturate"}
    if isinstance(fmt, FloatFormat) and not fmt.has_nan:
        kw["nan"] = "zero"
    lo = encode(x, fmt, rounding="nearest_toward_zero", **kw).astype(np.uint64)
    hi = encode(x, fmt, rounding="nearest_away", **kw).astype(np.uint64)
    return lo, hi


def _is_tie_between(x: np.ndarray, e: np.ndarray, a: np.ndarray, fmt: Format) -> np.ndarray:
    lo, hi = _candidates(x, fmt)
    return (lo != hi) & (((e == lo) & (a == hi)) | ((e == hi) & (a == lo)))


def _classify(e: np.ndarray, a: np.ndarray, fmt: Format, x: np.ndarray | None) -> np.ndarray:
    """Class index (into MISMATCH_CLASSES) of each mismatching pair (flat uint64 arrays)."""
    n = len(e)
    out = np.full(n, MISMATCH_CLASSES.index("other"), dtype=np.int64)
    done = np.zeros(n, dtype=bool)

    def put(mask: np.ndarray, name: str) -> None:
        m = mask & ~done
        out[m] = MISMATCH_CLASSES.index(name)
        done[m] = True

    x_nan = np.zeros(n, bool)
    x_fin = np.zeros(n, bool)
    if x is not None:
        if x.dtype.kind in "fV":
            with np.errstate(invalid="ignore"):
                xf = x.astype(np.float64)
            x_nan, x_fin = np.isnan(xf), np.isfinite(xf)
        else:
            x_fin = np.ones(n, bool)
    if isinstance(fmt, IntFormat):
        ve = np.where(exact_parts(e, fmt).neg, -((1 << fmt.bits) - e.astype(np.int64)), e.astype(np.int64))
        va = np.where(exact_parts(a, fmt).neg, -((1 << fmt.bits) - a.astype(np.int64)), a.astype(np.int64))
        put(x_nan, "nan_input")
        if x is not None and x_fin.any():
            tie = np.zeros(n, bool)
            tie[x_fin] = _is_tie_between(x[x_fin], e[x_fin], a[x_fin], fmt)
            put(tie, "tie_rule")
        put(np.abs(ve - va) == 1, "off_by_one_ulp")
        put((ve == -va) & (ve != 0), "sign")
        put(np.isin(ve, (fmt.lo, fmt.hi)) | np.isin(va, (fmt.lo, fmt.hi)), "range_edge")
        return out
    pe, pa = exact_parts(e, fmt), exact_parts(a, fmt)
    nan_e, nan_a = pe.cls == NAN, pa.cls == NAN
    inf_e, inf_a = pe.cls == INF, pa.cls == INF
    zero_e, zero_a = pe.cls == ZERO, pa.cls == ZERO
    mag_e, mag_a = e & np.uint64(fmt.magnitude_mask), a & np.uint64(fmt.magnitude_mask)
    fin_e, fin_a = ~(nan_e | inf_e), ~(nan_a | inf_a)
    max_e = fin_e & (mag_e == fmt.max_finite_code)
    max_a = fin_a & (mag_a == fmt.max_finite_code)
    M = fmt.mantissa_bits
    sub_e = fin_e & ~zero_e & fmt.subnormals & ((mag_e >> np.uint64(M)) == 0)
    sub_a = fin_a & ~zero_a & fmt.subnormals & ((mag_a >> np.uint64(M)) == 0)
    put(nan_e & nan_a, "nan_code")
    put(x_nan, "nan_input")
    put(zero_e & zero_a, "signed_zero")
    put((mag_e == mag_a) & (pe.neg != pa.neg) & ~nan_e & ~nan_a, "sign")
    put((max_e & inf_a) | (inf_e & max_a), "saturate_vs_inf")
    put((max_e & nan_a) | (nan_e & max_a), "saturate_vs_nan")
    put((inf_e & nan_a) | (nan_e & inf_a), "inf_vs_nan")
    put((zero_e & sub_a) | (sub_e & zero_a), "subnormal_flush")
    if x is not None and x_fin.any():
        tie = np.zeros(n, bool)
        tie[x_fin] = _is_tie_between(x[x_fin], e[x_fin], a[x_fin], fmt)
        put(tie, "tie_rule")
        if x.dtype == np.float64:
            x32 = encode(x[x_fin], "float32", overflow="inf").view(np.float32)
            dr = np.zeros(n, bool)
            dr[x_fin] = _is_tie_between(x32, e[x_fin], a[x_fin], fmt)
            put(dr, "double_rounding")
    same_sign = (pe.neg == pa.neg) & fin_e & fin_a
    diff = np.where(mag_e > mag_a, mag_e - mag_a, mag_a - mag_e)
    put(same_sign & (diff == 1), "off_by_one_ulp")
    put(nan_e ^ nan_a, "nan_vs_number")
    return out


# ---------------------------------------------------------------------------------------------------------
# display
# ---------------------------------------------------------------------------------------------------------
def _hex(code: int, fmt: Format) -> str:
    return f"0x{code:0{(fmt.bits + 3) // 4}x}"


def _index_str(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def _value_str(code: int, fmt: Format) -> str:
    v = fmt.exact_value(code)
    neg = isinstance(fmt, FloatFormat) and bool(code & fmt.sign_mask)
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan" if neg else "nan"
        return repr(v)
    if v == 0:
        if isinstance(fmt, IntFormat):
            return "0"
        return "-0.0" if neg else "0.0"
    if isinstance(fmt, IntFormat):
        return str(int(v))
    try:
        f = float(v)
    except OverflowError:
        return str(v)
    return repr(f) if f == v else str(v)


def _input_str(x: np.ndarray) -> str:
    """'0x3f880000 1.0625' for floats (bits of the input's dtype), the value for integers."""
    dt = x.dtype
    if dt.kind in "iu":
        return str(int(x))
    bits = int(x.view(f"uint{8 * dt.itemsize}"))
    with np.errstate(invalid="ignore"):
        f = float(x.astype(np.float64))
    if math.isnan(f):
        sign_bit = bits >> (8 * dt.itemsize - 1)
        val = "-nan" if sign_bit else "nan"
    else:
        val = repr(f)
    return f"0x{bits:0{2 * dt.itemsize}x} {val}"


# ---------------------------------------------------------------------------------------------------------
# public assertions
# ---------------------------------------------------------------------------------------------------------
def compare_codes(actual: object, expected: object, fmt: str | Format, *, nan: str = "exact",
                  inputs: object = None, where: object = None, max_report: int = 10,
                  what: str = "codes") -> MismatchReport | None:
    """The MismatchReport of comparing codes (None when equal); see assert_codes_equal."""
    __tracebackhide__ = True  # pytest shows the caller's line, not qref's internals
    f = get_format(fmt)
    _check_nan_policy(nan)
    a = _as_codes(actual, f, "actual")
    e = _as_codes(expected, f, "expected")
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shapes differ: actual {a.shape}, expected {e.shape}")
    mask = np.ones(e.shape, bool) if where is None else np.broadcast_to(np.asarray(where, bool), e.shape)
    bad = mask & ~_equal(e, a, f, nan)
    if not bad.any():
        return None
    x = None
    if inputs is not None:
        xin = _asarray(inputs, "inputs")
        try:
            x = np.broadcast_to(xin, e.shape)
        except ValueError:
            raise QrefError(f"inputs of shape {xin.shape} do not broadcast to the codes' shape "
                            f"{e.shape}") from None
    idx = np.nonzero(bad)
    eb, ab = e[idx], a[idx]
    xb = None if x is None else x[idx]
    cls = _classify(eb, ab, f, xb)
    counts_arr = np.bincount(cls, minlength=len(MISMATCH_CLASSES))
    order = sorted((i for i in range(len(MISMATCH_CLASSES)) if counts_arr[i]),
                   key=lambda i: (-counts_arr[i], i))
    counts = {MISMATCH_CLASSES[i]: int(counts_arr[i]) for i in order}
    first = []
    for j in range(min(max_report, len(eb))):
        first.append(Mismatch(
            index=tuple(int(ix[j]) for ix in idx), input=None if xb is None else _input_str(xb[j]),
            expected=int(eb[j]), actual=int(ab[j]), expected_value=_value_str(int(eb[j]), f),
            actual_value=_value_str(int(ab[j]), f), cls=MISMATCH_CLASSES[cls[j]]))
    return MismatchReport(what, f, nan, int(mask.sum()), len(eb), counts, tuple(first))


def assert_codes_equal(actual: object, expected: object, fmt: str | Format, *, nan: str = "exact",
                       inputs: object = None, where: object = None, max_report: int = 10) -> None:
    """Assert that two arrays of codes of ``fmt`` are equal as unsigned integers.

    actual / expected: integer arrays (codes in [0, 2^bits); signed storage values for integer formats) or
    arrays of the format's own ml_dtypes dtype (viewed as codes); anything with ``__array__`` (MLX, JAX).
    nan (default "exact"): "exact" | "same_sign" | "any_nan_code" (see NAN_POLICIES). inputs: the input array
    (same shape or broadcastable), used to show input bits and to recognise ties, NaN inputs and double
    rounding. where: a boolean mask of the elements to compare (e.g. ~qarray.unspecified). max_report: the
    number of mismatch lines shown (default 10). Raises CodeMismatchError (an AssertionError) with a report:
    per-class counts (MISMATCH_CLASSES) and the first lines (index, input bits, expected, got, class).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not qref's internals
    report = compare_codes(actual, expected, fmt, nan=nan, inputs=inputs, where=where, max_report=max_report)
    if report is not None:
        raise CodeMismatchError(report)


def assert_values_equal(actual: object, expected: object, *, nan: str = "exact", inputs: object = None,
                        where: object = None, max_report: int = 10) -> None:
    """Assert that two float arrays of the same dtype (float64/32/16, bfloat16 or an ml_dtypes float type) are
    equal bit for bit: -0 differs from +0, and NaNs are compared by ``nan`` (default "exact": same bits).
    Other options as in assert_codes_equal."""
    __tracebackhide__ = True  # pytest shows the caller's line, not qref's internals
    a, e = _asarray(actual, "actual"), _asarray(expected, "expected")
    if a.dtype != e.dtype:
        raise AssertionError(f"values: dtypes differ: actual {a.dtype}, expected {e.dtype} (a bit-exact "
                             "comparison needs the same dtype; cast explicitly if the difference is "
                             "intended)")
    f = _float_dtype_format(a.dtype)
    if f is None:
        raise QrefError(f"assert_values_equal compares floating arrays; got dtype {a.dtype} (use "
                        "assert_codes_equal for codes)")
    report = compare_codes(a, e, f, nan=nan, inputs=inputs, where=where, max_report=max_report,
                           what=f"values ({a.dtype} bit patterns)")
    if report is not None:
        raise CodeMismatchError(report)


# ---------------------------------------------------------------------------------------------------------
# assert_conforms
# ---------------------------------------------------------------------------------------------------------
class ConformanceError(AssertionError):
    """A backend disagrees with qref. ``example``: the minimal input found; ``report``: the mismatch report
    of that input (text); ``reproducer``: one line of Python that shows both results."""

    def __init__(self, message: str, example: np.ndarray, report: str, reproducer: str) -> None:
        super().__init__(message)
        self.example = example
        self.report = report
        self.reproducer = reproducer


@dataclass(frozen=True)
class _Target:
    label: str                                 # e.g. "float8_e4m3fn (profile 'spec')"
    fmt: Format                                # the element format of the codes
    reference: Callable[[np.ndarray], Any]     # x -> codes array or QArray
    expr: str                                  # Python expression computing the reference from x
    scheme: Any = None


_QARRAY_FIELDS = ("codes", "scales", "zero_points", "biases", "global_scale")


def _format_expr(fmt: Format) -> str:
    try:
        if get_format(fmt.name) == fmt:
            return repr(fmt.name)
    except QrefError:
        pass
    cls = type(fmt).__name__
    args = ", ".join(f"{fl.name}={getattr(fmt, fl.name)!r}" for fl in dc_fields(fmt)
                     if fl.init and fl.name not in ("aliases", "source"))
    return f"qref.{cls}({args})"


def _profile_expr(profile: str | CastPolicy) -> str:
    if isinstance(profile, CastPolicy):
        args = ", ".join(f"{fl.name}={getattr(profile, fl.name)!r}" for fl in dc_fields(profile)
                         if getattr(profile, fl.name) != fl.default)
        return f"qref.CastPolicy({args})"
    return repr(profile)


def _resolve_target(target: object, profile: str | CastPolicy | None) -> _Target:
    from ..schemes import Scheme
    from ..schemes import scheme as build_scheme
    from ..schemes.cast import CastScheme

    if isinstance(target, Scheme):
        if profile is not None:
            raise QrefError("assert_conforms: a Scheme object already carries its profile; pass profile=None")
        sch: Any = target
    else:
        fmt: Format | None
        try:
            fmt = get_format(target)  # type: ignore[arg-type]
        except QrefError:
            fmt = None
        if fmt is not None:
            prof = "spec" if profile is None else profile
            label = f"{fmt.name} (profile {_profile_expr(prof)})"
            return _Target(label, fmt, lambda x: encode(x, fmt, profile=prof),
                           f"qref.encode(x, {_format_expr(fmt)}, profile={_profile_expr(prof)})")
        if not isinstance(target, str):
            raise QrefError(f"assert_conforms: target must be a format, a scheme name or a Scheme, got "
                            f"{type(target).__name__}")
        sch = build_scheme(target, **({} if profile is None else {"profile": profile}))
    if isinstance(sch, CastScheme):
        label = f"{sch.format.name} (profile {_profile_expr(sch.profile or sch.policy)})"
        return _Target(label, sch.format, lambda x: encode(x, sch.format, profile=sch.policy),
                       f"qref.encode(x, {_format_expr(sch.format)}, "
                       f"profile={_profile_expr(sch.profile or sch.policy)})", sch)
    from .strategies import block_params

    try:
        _, ef = block_params(sch, 1, None)  # the element (or storage) format of the codes
    except QrefError as exc:
        raise QrefError(f"assert_conforms: cannot find the element format of scheme {sch!r}: {exc}") from None
    expr = f"{sch!r}.quantize(x)"
    try:
        expr = f"qref.scheme_from_spec({sch.to_spec()!r}).quantize(x)"
        if build_scheme(sch.name, profile=sch.profile) == sch:
            expr = f"qref.scheme({sch.name!r}, profile={sch.profile!r}).quantize(x)"
    except Exception:  # the scheme needs more than name and profile (or has no to_spec): the longer form
        pass
    name = getattr(sch, "name", type(sch).__name__)
    prof = getattr(sch, "profile", None)
    return _Target(f"{name} (profile {prof!r})", ef, sch.quantize, expr, sch)


def _fields_of(out: object) -> dict[str, Any]:
    if isinstance(out, Mapping):
        return dict(out)
    if all(hasattr(out, k) for k in ("codes", "scheme")):  # a QArray
        return {k: getattr(out, k) for k in _QARRAY_FIELDS if getattr(out, k, None) is not None}
    if isinstance(out, (tuple, list)):
        raise QrefError("assert_conforms: the backend function returned a tuple; return the codes array, "
                        f"or a dict with keys among {', '.join(_QARRAY_FIELDS)}")
    return {"codes": out}


def _compare_outputs(got: object, ref: object, target: _Target, x: np.ndarray, nan: str,
                     max_report: int, fields: tuple[str, ...] | None) -> list[str]:
    g, r = _fields_of(got), _fields_of(ref)
    problems: list[str] = []
    unspecified = getattr(ref, "unspecified", None)
    for key in g:
        if fields is not None and key not in fields:
            continue
        if key not in r:
            problems.append(f"{key}: the backend returned it but the reference has none")
            continue
        if key == "codes":
            where = None if unspecified is None else ~np.asarray(unspecified, bool)
            codes = _asarray(g[key], "codes")
            ref_codes = np.asarray(r[key])
            if codes.shape != ref_codes.shape:
                problems.append(f"codes: shape {codes.shape}, expected {ref_codes.shape}")
                continue
            rep = compare_codes(codes, ref_codes, target.fmt, nan=nan, where=where, max_report=max_report,
                                inputs=x if x.shape == codes.shape else None)
        else:
            gv, rv = _asarray(g[key], key), np.asarray(r[key])
            side_unspec = getattr(ref, "meta", {}).get(f"{key}_unspecified")
            side_where = None if side_unspec is None else ~np.asarray(side_unspec, bool)
            if gv.shape != rv.shape:
                problems.append(f"{key}: shape {gv.shape}, expected {rv.shape}")
                continue
            if rv.dtype.kind in "iu" and gv.dtype.kind in "iu":
                sf = getattr(target.scheme, "scale_format", None) if key == "scales" else None
                fmt = get_format(sf) if sf is not None else get_format(f"uint{8 * rv.dtype.itemsize}")
                if isinstance(fmt, IntFormat) and rv.dtype.kind == "i":
                    fmt = get_format(f"int{8 * rv.dtype.itemsize}")
                rep = compare_codes(gv, rv, fmt, nan=nan, max_report=max_report, what=key, where=side_where)
            elif gv.dtype != rv.dtype:
                problems.append(f"{key}: dtype {gv.dtype}, expected {rv.dtype}")
                continue
            else:
                ff = _float_dtype_format(rv.dtype)
                if ff is None:
                    problems.append(f"{key}: cannot compare dtype {rv.dtype}")
                    continue
                rep = compare_codes(gv, rv, ff, nan=nan, max_report=max_report, where=side_where,
                                    what=f"{key} ({rv.dtype} bits)")
        if rep is not None:
            problems.append(str(rep))
    return problems


_RAISED = "the backend raised "


def _reduce(x: np.ndarray, problems: Callable[[np.ndarray], list[str]], blocked: bool) -> np.ndarray:
    """After hypothesis' shrinking: the first single row (block) of x that still fails the same way, then, for
    element-wise targets, the first single element. Loops over at most 64 + 64 candidates."""
    raised = any(p.startswith(_RAISED) for p in problems(x))

    def still_fails(c: np.ndarray) -> bool:
        found = problems(c)
        return bool(found) and any(p.startswith(_RAISED) for p in found) == raised

    if x.ndim >= 1 and x.shape[0] > 1:
        for i in range(x.shape[0]):
            if still_fails(x[i:i + 1]):
                x = x[i:i + 1]
                break
    if not blocked and x.size > 1:
        flat = x.reshape(-1)
        for k in range(flat.size):
            if still_fails(flat[k:k + 1]):
                return flat[k:k + 1].copy()
    return x


def _array_expr(x: np.ndarray) -> str:
    """Python source that rebuilds x bit for bit."""
    dt = x.dtype
    dname = "ml_dtypes.bfloat16" if dt.name == "bfloat16" else f"np.{dt.name}"
    if dt.kind in "iu":
        return f"np.array({x.tolist()!r}, dtype={dname})"
    with np.errstate(invalid="ignore"):  # signalling NaNs
        x64 = x.astype(np.float64)
    if not np.isnan(x64).any():
        body = repr(x64.tolist()).replace("inf", "np.inf")
        return f"np.array({body}, dtype={dname})"
    u = f"uint{8 * dt.itemsize}"
    bits = [f"0x{int(b):0{2 * dt.itemsize}x}" for b in x.view(u).reshape(-1)]
    shape = "" if x.ndim == 1 else f".reshape{x.shape!r}"
    return f"np.array([{', '.join(bits)}], dtype=np.{u}).view({dname}){shape}"


def _short(codes: object, fmt: Format) -> str:
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        try:
            arr = _as_codes(arr, fmt, "codes")
        except QrefError:
            return f"array of dtype {arr.dtype}, shape {arr.shape}"
    if arr.size <= 16:
        return "[" + ", ".join(_hex(int(c) % (1 << fmt.bits), fmt) for c in arr.reshape(-1)) + "]"
    return f"array of shape {arr.shape}"


def assert_conforms(fn: Callable[[np.ndarray], Any], target: object, *,
                    profile: str | CastPolicy | None = None,
                    inputs: SearchStrategy[np.ndarray] | None = None, dtype: object = np.float32,
                    shape: object = None, weights: Mapping[str, float] | None = None,
                    categories: Sequence[str] | None = None, max_examples: int = 200,
                    nan: str = "exact", seed: int | None = None, fields: tuple[str, ...] | None = None,
                    max_report: int = 10, name: str | None = None) -> None:
    """Drive ``fn`` (numpy input array -> backend result) with generated inputs and compare every result with
    qref bit for bit; on a difference, raise ConformanceError with the minimal counterexample (hypothesis'
    shrinking, then the first single block, or for element-wise targets the first single element, that still
    fails the same way), its mismatch report and a one-line reproducer.

    target: a format (name or record; reference ``qref.encode(x, fmt, profile=profile)``, profile default
    "spec"), a scheme name (``qref.scheme(name, profile=profile)``) or a Scheme object (profile=None).
    fn returns codes (an integer array, an array of the format's ml_dtypes dtype, or anything with
    ``__array__``), or, for schemes with side data, a QArray or a dict with keys among codes / scales /
    zero_points / biases / global_scale (only the keys returned are compared; ``fields`` narrows them further;
    integer side data compare as integers, float side data as bit patterns of the same dtype). Elements the
    reference marks ``unspecified`` are not compared, nor side data its ``meta["<key>_unspecified"]`` marks
    (e.g. ``meta["scales_unspecified"]`` of block schemes).
    inputs: a strategy of input arrays; default ``qref.strategies.arrays(fmt, shape, dtype=dtype,
    weights=weights, categories=categories)`` for casts and ``qref.strategies.blocks(scheme, dtype=dtype,
    weights=weights, categories=categories)`` for schemes with an integer block size (for a scheme with one
    scale, e.g. a per-tensor uniform scheme, the arrays are multiplied by it: ``arrays(..., scale=s)``).
    max_examples (default 200), seed (default None: hypothesis' own randomness; an int makes the search
    reproducible), nan (default "exact", see NAN_POLICIES), max_report (default 10).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not qref's internals
    from . import strategies as qs

    _check_nan_policy(nan)
    tgt = _resolve_target(target, profile)
    label = name or getattr(fn, "__name__", None) or repr(fn)
    bs = getattr(tgt.scheme, "block_size", None)
    inputs_are_blocks = tgt.scheme is not None and getattr(tgt.scheme, "family", "cast") != "cast" and \
        isinstance(bs, int) and not isinstance(bs, bool)
    if inputs is None:
        if inputs_are_blocks:
            inputs = qs.blocks(tgt.scheme, dtype=dtype, weights=weights, categories=categories)
        else:  # a single scale (uniform per-tensor schemes): inputs near scale * the storage's points
            scales = getattr(tgt.scheme, "scales", None)
            one = float(scales[0]) if isinstance(scales, tuple) and len(scales) == 1 else None
            inputs = qs.arrays(tgt.fmt, shape, dtype=dtype, weights=weights, categories=categories,
                               scale=one)

    def problems(x: np.ndarray) -> list[str]:
        with np.errstate(all="ignore"):  # IEEE flags (a signalling NaN's "invalid") are not results
            try:
                got = fn(x.copy())
            except Exception as exc:
                return [f"the backend raised {type(exc).__name__}: {exc}"]
            ref = tgt.reference(x.copy())
        return _compare_outputs(got, ref, tgt, x, nan, max_report, fields)

    cfg = settings(max_examples=max_examples, database=None, deadline=None,
                   suppress_health_check=list(HealthCheck))
    try:
        example = find(inputs, lambda x: bool(problems(x)), settings=cfg,
                       random=None if seed is None else random.Random(seed))
    except NoSuchExample:
        return
    example = _reduce(example, problems, blocked=inputs_are_blocks)
    report = "\n".join(problems(example))
    got_codes = None
    with np.errstate(all="ignore"):
        try:
            got = fn(example.copy())
            got_codes = _fields_of(got).get("codes")
            got_txt = _short(got_codes, tgt.fmt) if got_codes is not None else "?"
        except Exception as exc:
            got_txt = f"raises {type(exc).__name__}"
        ref = tgt.reference(example.copy())
    ref_codes = _fields_of(ref).get("codes")
    expr_suffix = "" if isinstance(ref, np.ndarray) else ".codes"
    if ref_codes is not None and got_codes is not None and np.size(ref_codes) > 16:
        diff = compare_codes(got_codes, ref_codes, tgt.fmt, nan=nan, max_report=1)
        if diff is not None:
            m = diff.first[0]
            got_txt = f"{_hex(m.actual, tgt.fmt)} at {_index_str(m.index)}"
            ref_txt = f"{_hex(m.expected, tgt.fmt)} at {_index_str(m.index)}"
        else:
            ref_txt, got_txt = "codes equal", "the same codes (see the side data above)"
    else:
        ref_txt = _short(ref_codes, tgt.fmt)
    repro = (f"import numpy as np, ml_dtypes, qref; x = {_array_expr(example)}; "
             f"print({tgt.expr}{expr_suffix})  # {ref_txt}; {label}(x) gives {got_txt}")
    msg = (f"{label} does not conform to {tgt.label}; minimal counterexample after shrinking "
           f"({example.dtype}, shape {example.shape}):\n{report}\nreproduce: {repro}")
    raise ConformanceError(msg, example, report, repro)

