"""Element conversions (encode, decode, quantize) for the harness (spec: docs/spec/elements.md).

Expectations come from the case when it holds under the profile (``profile in case.profiles``), otherwise from
qref itself: ``qref.encode(x, fmt, profile=P)`` (and ``decode`` for quantize cases), qref's prediction of P.
Mismatch classes are named by the policy change that reproduces the backend's code (elements.md §2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from ...conformance.case import Case
from ...conformance.cases.elements import policy_applies
from ...core.decode import decode
from ...core.encode import encode
from ...errors import QrefError
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...formats.policy import CastPolicy
from ...profiles import get_profile
from . import Expectation, task_hash

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

FAMILY = "elements"
SPEC_PROFILE = "spec"
OPERATIONS = ("encode", "decode", "quantize")

#: mismatch class -> the section of docs/spec/elements.md that defines the expected behaviour
CLASS_SECTIONS = {
    "tie_rule": "elements.md §2.3", "truncation": "elements.md §2.3", "directed_rounding": "elements.md §2.3",
    "saturation_nan_inf": "elements.md §2.4", "nan_sign_or_code": "elements.md §2.7",
    "sign_of_zero": "elements.md §2.7", "subnormal_flush": "elements.md §2.8", "double_rounding": "elements.md §2.1",
    "min_normal_flush": "elements.md §2.8",
    "wrap_around": "elements.md §2.9", "decode_value": "elements.md §4", "sign_dropped": "elements.md §2.2",
    "negative_input": "elements.md §2.7", "zero_input": "elements.md §2.7",
}

# single policy changes, in the order they are tried; a class is the first (or first pair) that reproduces
_ROUNDING_ALTS = (("tie_rule", {"rounding": "nearest_away"}), ("tie_rule", {"rounding": "nearest_toward_zero"}),
                  ("tie_rule", {"rounding": "exponent_carry"}), ("truncation", {"rounding": "toward_zero"}),
                  ("directed_rounding", {"rounding": "toward_max_magnitude"}),
                  ("directed_rounding", {"rounding": "up"}), ("directed_rounding", {"rounding": "down"}))
_OTHER_ALTS = (("saturation_nan_inf", {"overflow": "saturate"}), ("saturation_nan_inf", {"overflow": "inf"}),
               ("saturation_nan_inf", {"overflow": "nan"}), ("saturation_nan_inf", {"overflow": "saturate_propagate"}),
               ("wrap_around", {"overflow": "wrap"}),
               ("subnormal_flush", {"subnormals": "flush"}), ("subnormal_flush", {"input_subnormals": "zero"}),
               ("subnormal_flush", {"subnormals": "flush", "input_subnormals": "zero"}),
               ("double_rounding", {"source": "via_float32"}), ("double_rounding", {"source": "via_float16"}))
_NAN_ALTS = tuple(("nan_sign_or_code", {"nan": r}) for r in ("keep_sign", "positive", "flipped_sign_zero", "zero",
                                                                "max")) + tuple(
    ("nan_sign_or_code", {"nan_payload": r}) for r in ("keep_quiet", "keep_raw", "truncate"))


def fmt_of(case: Case) -> Format:
    return get_format(case.format["name"])


def _candidate(ov: dict[str, str], fmt: Format) -> bool:
    """Whether a variant is a mechanism an implementation of ``fmt`` could have: a cast through float16 only for
    a float format whose finite values float16 spans (the smallest subnormal 2^-24 up to 65504: the 8-bit
    formats of OpenVINO's Convert, elements.md §2.12), not E8M0 or another wide format, where it would only
    match by chance."""
    if ov.get("source") != "via_float16" or isinstance(fmt, IntFormat):
        return True
    return float(fmt.max_value) <= 65504.0 and float(fmt.min_value) >= 2.0**-24


def relevant(case: Case, profile: str | None) -> bool:
    if case.family != FAMILY or case.operation not in OPERATIONS:
        return False
    if case.operation == "decode":
        return True
    return SPEC_PROFILE in case.profiles or (profile is not None and profile in case.profiles)


def task_key(case: Case) -> str:
    return task_hash(case, case.format["name"])


def decode_payload(profile: str, fmt: Format, dtype: np.dtype) -> str:
    """The nan_payload ``profile`` decodes NaN codes of ``fmt`` into ``dtype`` with (elements.md §4): its policy
    into the dtype's format from the code format's dtype (profiles.md §4), "canonical" without one."""
    try:
        src: object = np.dtype(getattr(ml_dtypes, fmt.name)) if hasattr(ml_dtypes, fmt.name) else np.dtype(fmt.name)
        tgt = get_format(np.dtype(dtype).name)
    except (TypeError, QrefError):
        return "canonical"
    return get_profile(profile, "element").cast_for(tgt, src).nan_payload


def holds(case: Case, profile: str) -> bool:
    if case.operation == "decode":
        return decode_payload(profile, fmt_of(case), case.expected["y"].dtype) == "canonical"
    return profile in case.profiles


def _policy(case: Case, profile: str, **overrides: Any) -> CastPolicy | None:
    """The profile's policy for the case's format and input dtype (profiles.md §4) with ``overrides``; None when
    the changed policy is not a valid one."""
    x = case.inputs.get("x")
    base = get_profile(profile, "element").cast_for(fmt_of(case), None if x is None else x.dtype)
    try:
        return dataclasses.replace(base, **overrides)
    except QrefError:
        return None


def _outputs(case: Case, policy: CastPolicy, absolute: bool = False, profile: str = SPEC_PROFILE
             ) -> dict[str, np.ndarray]:
    fmt = fmt_of(case)
    if case.operation == "decode":
        (name,) = case.expected
        dt = case.expected[name].dtype
        with np.errstate(all="ignore"):
            return {name: decode(case.inputs["codes"], fmt, dtype=dt, nan_payload=decode_payload(profile, fmt, dt))}
    x = case.inputs["x"]
    if absolute:  # the sign ignored: negative inputs encoded as their magnitude
        x = (x.view(_UINT[x.dtype.itemsize]) & ~_UINT[x.dtype.itemsize](1 << (8 * x.dtype.itemsize - 1))).view(
            x.dtype)
    codes = encode(x, fmt, profile=policy)
    if case.operation == "encode":
        (name,) = case.expected
        return {name: codes.astype(case.expected[name].dtype)}
    (name,) = case.expected
    with np.errstate(all="ignore"):
        return {name: decode(codes, fmt, dtype=x.dtype, nan_payload=decode_payload(profile, fmt, x.dtype))}


def expectation(case: Case, profile: str) -> Expectation:
    """The outputs ``profile`` gives on the case's inputs: the case's own when it holds, else qref's."""
    if holds(case, profile):
        return Expectation({k: v for k, v in case.expected.items()}, dict(case.unspecified))
    pol = _policy(case, profile)
    assert pol is not None
    return Expectation(_outputs(case, pol, profile=profile))


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(class, outputs) for qref variants of ``profile``: single policy changes first, then pairs."""
    if case.operation == "decode":
        return
    fmt = fmt_of(case)
    singles = [a for a in (*_OTHER_ALTS, *_ROUNDING_ALTS, *_NAN_ALTS)
               if not (isinstance(fmt, IntFormat) and "nan" in a[1]) and _candidate(a[1], fmt)]
    seen: set[str] = set()
    for cls, ov in singles:
        pol = _policy(case, profile, **ov)
        key = repr(pol)
        if pol is None or key in seen or not policy_applies(pol, fmt):
            continue
        seen.add(key)
        yield cls, _outputs(case, pol, profile=profile)
    for cls_r, ov_r in _ROUNDING_ALTS:
        for cls_o, ov_o in _OTHER_ALTS:
            if not _candidate(ov_o, fmt):
                continue
            pol = _policy(case, profile, **ov_r, **ov_o)
            key = repr(pol)
            if pol is None or key in seen or not policy_applies(pol, fmt):
                continue
            seen.add(key)
            yield f"{cls_r}+{cls_o}", _outputs(case, pol, profile=profile)
    if isinstance(fmt, FloatFormat) and not fmt.signed:  # unsigned formats: negative inputs read as |x|
        base = _policy(case, profile)
        assert base is not None
        yield "negative_input", _outputs(case, base, absolute=True, profile=profile)
        for cls_r, ov_r in _ROUNDING_ALTS:
            pol = _policy(case, profile, **ov_r)
            if pol is not None and policy_applies(pol, fmt):
                yield f"{cls_r}+negative_input", _outputs(case, pol, absolute=True, profile=profile)


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Classes decided from the codes alone (object array, "" where none applies): NaN codes and signs, the sign
    of zero, and for decode a different value. ``idx``: flat indices of the elements, ``exp``/``got``: their
    bits."""
    out = np.full(exp.shape, "", dtype=object)
    fmt = fmt_of(case)
    if case.operation == "decode" or case.operation == "quantize":
        # float outputs: NaN vs anything or both NaN with different bits
        e = case.expected[name].dtype
        with np.errstate(invalid="ignore"):
            ev = exp.view(e).astype(np.float64)
            gv = got.view(e).astype(np.float64)
        nan = np.isnan(ev) | np.isnan(gv)
        if case.operation == "decode":  # NaN against a number is the value the code decodes to, not a NaN rule
            nan = np.isnan(ev) & np.isnan(gv)
        zero = (ev == 0) & (gv == 0)
        out[nan] = "nan_sign_or_code"
        out[zero & ~nan] = "sign_of_zero"
        out[(ev < 0) & (gv == -ev) & (out == "")] = "sign_dropped"
        if case.operation == "quantize":
            with np.errstate(invalid="ignore"):
                xv = case.inputs["x"].reshape(-1)[idx].astype(np.float64)
            out[np.isnan(xv)] = "nan_sign_or_code"
            out[np.isinf(xv) & (out == "")] = "saturation_nan_inf"
            if fmt.zero:  # below the smallest normal: rounded up to it (flushed before rounding) or subnormal
                tiny = np.abs(xv) < float(fmt.min_normal)
                up = np.abs(ev) == float(fmt.min_normal)
                out[(gv == 0) & up & tiny & (out == "")] = "min_normal_flush"
                out[(gv == 0) & (ev != 0) & tiny & (out == "")] = "subnormal_flush"
        if case.operation == "decode":
            out[(out == "") & (np.isinf(ev) != np.isinf(gv))] = "saturation_nan_inf"
            out[out == ""] = "decode_value"
        return out
    if isinstance(fmt, IntFormat):
        return out
    e64, g64 = exp.astype(np.int64), got.astype(np.int64)
    is_nan = np.vectorize(fmt.is_nan_code, otypes=[bool])
    nan_e, nan_g = is_nan(e64), is_nan(g64)
    out[nan_e & nan_g] = "nan_sign_or_code"
    with np.errstate(invalid="ignore"):
        xv = case.inputs["x"].reshape(-1)[idx].astype(np.float64)
    out[np.isnan(xv)] = "nan_sign_or_code"  # a NaN input: whatever came out, it is the NaN rule that differs
    if not fmt.zero:  # a format without zero (E8M0): the reference's rule for zero inputs differs
        out[(xv == 0) & (out == "")] = "zero_input"
    # overflow (|x| beyond the largest finite value) giving NaN or Inf or max where the reference gives another
    over = np.isinf(xv) | (np.abs(xv) > float(fmt.max_value))
    out[over & (nan_e != nan_g) & (out == "")] = "saturation_nan_inf"
    mm = fmt.magnitude_mask
    if fmt.zero:
        zero_e = (e64 & mm) == 0
        zero_g = (g64 & mm) == 0
        out[zero_e & zero_g & ~nan_e & ~nan_g] = "sign_of_zero"
    if fmt.signed:  # the magnitude right, the sign of a nonzero result lost
        sm = fmt.sign_mask
        lost = ((e64 & sm) != 0) & ((g64 & sm) == 0) & ((e64 & mm) == (g64 & mm)) & ((e64 & mm) != 0)
        out[lost & ~nan_e & ~nan_g & (out == "")] = "sign_dropped"
    if "x" in case.inputs:
        out[np.isinf(xv) & (out == "")] = "saturation_nan_inf"
        if fmt.zero:  # a nonzero result flushed to zero for an input below the smallest normal: the reference
            # is the smallest normal (the input rounds up to it: the flush tests the input before rounding) or a
            # subnormal (elements.md §2.8)
            tiny = np.abs(xv) < float(fmt.min_normal)
            flush = tiny & ((g64 & mm) == 0) & ((e64 & mm) != 0) & (out == "")
            with np.errstate(invalid="ignore"):
                ev = decode((e64 & mm).astype(fmt.code_dtype), fmt, dtype=np.float64)
            out[flush & (ev == float(fmt.min_normal))] = "min_normal_flush"
            out[flush & (out == "")] = "subnormal_flush"
    return out


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


def describe_input(case: Case, index: int) -> str:
    """The input element as text: hex bits and value."""
    from ...conformance.text import float_text, hex_words

    if case.operation == "decode":
        c = case.inputs["codes"].reshape(-1)[index : index + 1]
        return f"code {hex_words(c)[0]} of {case.format['name']}"
    x = case.inputs["x"].reshape(-1)[index : index + 1]
    with np.errstate(invalid="ignore"):
        value = float(x.astype(np.float64)[0])
    return f"{x.dtype.name} {hex_words(x)[0]} ({float_text(value)})"


def describe_output(case: Case, name: str, value: np.ndarray) -> str:
    """An output element as text: hex bits and value (codes decoded through the case's format)."""
    from ...conformance.text import float_text, hex_words

    v = np.asarray(value).reshape(-1)[:1]
    if name in case.array_formats:
        fmt = get_format(case.array_formats[name])
        val = decode(v.astype(fmt.code_dtype), fmt, dtype=np.float64)[0]
        text = str(int(val)) if isinstance(fmt, IntFormat) else float_text(float(val))
        return f"{hex_words(v)[0]} ({text})"
    with np.errstate(invalid="ignore"):
        value = float(v.astype(np.float64)[0])
    return f"{hex_words(v)[0]} ({float_text(value)})"


__all__ = ["CLASS_SECTIONS", "FAMILY", "OPERATIONS", "SPEC_PROFILE", "alternatives", "describe_input",
           "describe_output", "expectation", "fmt_of", "holds", "relevant", "spec_sections", "structural_class",
           "task_key"]
