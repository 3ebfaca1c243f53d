"""Uniform (affine) quantization for the harness (spec: docs/spec/uniform.md).

Cases: ``uniform_quantize`` (input ``x`` -> integer codes; float storage: element codes) and
``uniform_dequantize`` (input codes -> values), with ``scheme`` = ``UniformScheme.to_spec()``;
``uniform_calibrate`` (batches ``x`` -> ``scale``, ``zero_point`` of a range observer, uniform.md §5.4: no
scheme; the case's params are the observer's rule, so it holds under every profile, like a recurrence of the
recipes); ``fake_quantize`` (inputs ``x``, ``input_low``, ``input_high``, ``output_low``, ``output_high``,
params ``levels`` -> float32 ``y``, uniform.md §2.8: no scheme; a profile's prediction is its FakeQuantizeRule).
The spec default is the ``stablehlo`` profile (uniform.md §4). qref's prediction of profile P on a case is the
same scheme (storage, scales, zero points, axis, blocks, expressed type) rebuilt with P's arithmetic. Mismatch
classes are named by the arithmetic change (uniform.md §3) that reproduces the backend's codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...core import decode, encode
from ...errors import QrefError
from ...formats import IntFormat, get_format
from ...schemes.base import QArray
from ...schemes.uniform import DEFAULT_PROFILE, UniformScheme, arithmetic_for
from ...schemes.uniform import from_spec as _from_spec
from ...schemes.uniform.gradient import fake_quantize_mask
from ...schemes.uniform.requantize import FORMS, requantize, requantize_arithmetic
from ..model import Unsupported, bits
from . import (
    Expectation,
    describe_value,
    distinct_alternatives,
    holds_for_spec_or,
    listed_for,
    task_hash,
    value_classes,
)

FAMILY = "uniform"
SPEC_PROFILE = DEFAULT_PROFILE
OPERATIONS = ("uniform_quantize", "uniform_dequantize", "uniform_requantize", "uniform_calibrate", "fake_quantize")
#: the inputs of a fake_quantize case after x: the ranges, in FakeQuantize's argument order (uniform.md §2.8)
FQ_RANGES = ("input_low", "input_high", "output_low", "output_high")

CLASS_SECTIONS = {
    "zero_point_order": "uniform.md §2.1", "fma": "uniform.md §3", "tie_rule": "uniform.md §2.1",
    "truncation": "uniform.md §2.1",
    "directed_rounding": "uniform.md §2.1", "scale_arithmetic": "uniform.md §3",
    "compute_precision": "uniform.md §3", "saturation": "uniform.md §2.1", "wrap_around": "uniform.md §2.1",
    "nan_sign_or_code": "uniform.md §4.2", "dequantize_arithmetic": "uniform.md §2.2",
    "saturation_nan_inf": "uniform.md §2.1", "signedness": "uniform.md §4.2", "int32_conversion": "uniform.md §4.2",
    "integer_lowering": "uniform.md §4.3",
    "requantize_form": "uniform.md §2.7",
    "fake_quantize_form": "uniform.md §2.8",
}

# arithmetic changes tried in order: (class, overrides)
_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fma", {"zero_point": "fused", "compute": "float32"}),
    ("zero_point_order", {"zero_point": "after_rounding"}), ("zero_point_order", {"zero_point": "before_rounding"}),
    ("zero_point_order", {"zero_point": "after_rounding_float"}),
    # rounded, the zero point added, then clamped as an integer (ONNX QuantizeLinear's order)
    ("zero_point_order", {"zero_point": "after_rounding", "clamp": "integer"}),
    ("tie_rule", {"rounding": "nearest_away"}), ("tie_rule", {"rounding": "nearest_toward_zero"}),
    ("truncation", {"rounding": "toward_zero"}),
    ("directed_rounding", {"rounding": "up"}), ("directed_rounding", {"rounding": "down"}),
    ("scale_arithmetic", {"scale_op": "reciprocal"}), ("scale_arithmetic", {"scale_op": "divide"}),
    ("scale_arithmetic", {"scale_source": "float64"}),
    ("compute_precision", {"compute": "float32"}), ("compute_precision", {"compute": "float64"}),
    ("compute_precision", {"compute": "float16"}),
    ("saturation", {"clamp": "integer"}), ("saturation", {"clamp": "float"}),
    ("nan_sign_or_code", {"nan": "zero"}),
    ("saturation_nan_inf", {"float_saturate": False}), ("saturation_nan_inf", {"float_saturate": True}),
    ("dequantize_arithmetic", {"dq_subtract": "int64"}), ("dequantize_arithmetic", {"dq_subtract": "float32"}),
    ("dequantize_arithmetic", {"dq_subtract": "expressed"}), ("dequantize_arithmetic", {"dq_multiply": "float32"}),
    ("dequantize_arithmetic", {"dq_multiply": "float64"}),
    ("dequantize_arithmetic", {"dq_form": "multiply_add", "dq_subtract": "int64", "dq_multiply": "float32"}),
    ("scale_arithmetic", {"simd_width": 8, "scale_op": "reciprocal", "rounding": "nearest_even",
                          "remainder_scale_op": "divide", "remainder_rounding": "nearest_away"}),
)


def relevant(case: Case, profile: str | None) -> bool:
    return holds_for_spec_or(case, profile, FAMILY, OPERATIONS, SPEC_PROFILE, holds)


def holds(case: Case, profile: str) -> bool:
    if case.operation == "uniform_calibrate":  # the params are the rule (uniform.md §5.4)
        return True
    return listed_for(case, profile)


def task_key(case: Case) -> str:
    if case.operation in ("uniform_calibrate", "fake_quantize"):
        return task_hash(case, None)
    sch = dict(case.scheme or {})
    geometry = {k: sch.get(k) for k in ("storage", "expressed", "scales", "zero_points", "scale_shape", "axis",
                                        "block_size", "storage_range")}
    if case.operation == "uniform_requantize":  # the output type is part of the task
        to = dict(case.params["to"])
        geometry["to"] = {k: to.get(k) for k in ("storage", "expressed", "scales", "zero_points", "scale_shape",
                                                 "axis", "block_size", "storage_range")}
    return task_hash(case, geometry)


def scheme_of(case: Case, profile: str | None = None, **overrides: Any) -> UniformScheme:
    """The case's scheme, with ``profile``'s arithmetic (and field overrides) when given."""
    spec = dict(case.scheme)
    if profile is not None or overrides:
        ar = arithmetic_for(profile or spec.get("profile"), **overrides).to_dict()
        spec["arithmetic"] = ar
        spec["profile"] = profile or spec.get("profile")
    return _from_spec(spec)


def to_scheme_of(case: Case, profile: str | None = None, **overrides: Any) -> UniformScheme:
    """The output scheme of a uniform_requantize case (``params["to"]``), with ``profile``'s arithmetic."""
    spec = dict(case.params["to"])
    if profile is not None or overrides:
        spec["arithmetic"] = arithmetic_for(profile or spec.get("profile"), **overrides).to_dict()
        spec["profile"] = profile or spec.get("profile")
    return _from_spec(spec)


def _requantize_outputs(case: Case, profile: str | None, form: str | None = None) -> Expectation:
    """uniform.md §2.7: the case's codes requantized under ``profile`` (its requantize arithmetic, or ``form``)."""
    frm, to = scheme_of(case, profile), to_scheme_of(case, profile)
    ar = requantize_arithmetic(to.profile, **({"form": form} if form else {}))
    name = next(iter(case.expected))  # the codes (a grad_mask follows them)
    exp = case.expected[name]
    codes = _signed_codes(case.inputs["codes"], frm)
    with np.errstate(all="ignore"):
        q = requantize(codes.astype(frm.codes_dtype), frm, to, ar)
    st = to.storage
    assert isinstance(st, IntFormat)
    out = (np.asarray(q.codes).astype(np.int64) & ((1 << st.bits) - 1)).astype(np.uint64).astype(exp.dtype)
    return Expectation({name: out}, {name: np.asarray(q.unspecified, dtype=bool)})


def _requantize_signless(case: Case, profile: str) -> dict[str, np.ndarray]:
    """uniform.md §4.2 (10) for requantize: unsigned storage held in the signless integer of its width (MLIR's
    u8 spelling): input codes >= 2^(b-1) read as negative, results saturated to the signed range."""
    frm, to = scheme_of(case, profile), to_scheme_of(case, profile)
    fs, ts = frm.storage, to.storage
    assert isinstance(fs, IntFormat) and isinstance(ts, IntFormat)
    if fs.signed and ts.signed:
        raise ValueError("no unsigned storage")
    codes = _signed_codes(case.inputs["codes"], frm).astype(np.int64)
    if not fs.signed:
        codes = np.where(codes >= 1 << (fs.bits - 1), codes - (1 << fs.bits), codes)
        frm = _from_spec(dict(frm.to_spec(), storage=f"int{fs.bits}", type_spelling=None))
    with np.errstate(all="ignore"):
        q = requantize(codes, frm, to, requantize_arithmetic(to.profile))
    n = np.asarray(q.codes).astype(np.int64)
    if not ts.signed:
        n = np.clip(n, -(1 << (ts.bits - 1)), (1 << (ts.bits - 1)) - 1)
    name = next(iter(case.expected))  # the codes (a grad_mask follows them)
    dt = case.expected[name].dtype
    return {name: (n & ((1 << ts.bits) - 1)).astype(np.uint64).astype(dt)}


def _signed_codes(codes: np.ndarray, sch: UniformScheme) -> np.ndarray:
    """Suite codes (unsigned bit patterns) as storage values of ``sch`` (sign-extended for signed storage)."""
    st = sch.storage
    if isinstance(st, IntFormat) and codes.dtype.kind == "u" and st.signed:
        codes = codes.view(f"i{codes.dtype.itemsize}")
        if st.bits < 8 * codes.dtype.itemsize:  # sign-extend narrow codes held in a wider integer
            shift = 8 * codes.dtype.itemsize - st.bits
            codes = (codes << shift) >> shift
    return codes


def _outputs(case: Case, sch: UniformScheme) -> Expectation:
    if case.operation == "uniform_requantize":
        return _requantize_outputs(case, sch.profile)
    name = next(iter(case.expected))  # a fake-quantize case's grad_mask follows its codes
    exp = case.expected[name]
    if case.operation == "uniform_quantize":
        with np.errstate(all="ignore"):
            q = sch.quantize(case.inputs["x"])
        codes = np.asarray(q.codes)
        out = codes.view(exp.dtype) if codes.dtype.itemsize == exp.dtype.itemsize else codes.astype(exp.dtype)
        st = sch.storage
        if exp.dtype.kind == "u" and isinstance(st, IntFormat) and st.bits < 8 * exp.dtype.itemsize:
            out = out & exp.dtype.type((1 << st.bits) - 1)  # narrow codes as the suite stores them
        res = Expectation({name: out}, {name: np.asarray(q.unspecified, dtype=bool)})
        if "grad_mask" in case.expected:  # uniform.md §4.4 F5
            with np.errstate(all="ignore"):
                res.outputs["grad_mask"] = fake_quantize_mask(case.inputs["x"], sch)
        return res
    (cname,) = case.inputs
    codes = _signed_codes(case.inputs[cname], sch)
    with np.errstate(all="ignore"):
        vals, bad = sch.dequantize_with_mask(QArray(codes=codes, scheme=sch), dtype=exp.dtype)
    return Expectation({name: np.asarray(vals)}, {name: np.asarray(bad, dtype=bool)})


def fake_quantize_outputs(case: Case, rule: Any) -> Expectation:
    """uniform.md §2.8: y = FakeQuantize(x, input_low, input_high, output_low, output_high, levels) under ``rule``
    (a FakeQuantizeRule or the name of a profile in FAKE_QUANTIZE_RULES; QrefError for a profile without one);
    NaN inputs give unspecified y."""
    from ...schemes.uniform.reference import fake_quantize

    x = case.inputs["x"]
    with np.errstate(all="ignore"):
        y = fake_quantize(x, *(case.inputs[k] for k in FQ_RANGES), int(case.params["levels"]), rule)
    return Expectation({"y": y}, {"y": np.isnan(x)})


def expectation(case: Case, profile: str) -> Expectation:
    if holds(case, profile):
        return Expectation(dict(case.expected), dict(case.unspecified))
    if case.operation == "fake_quantize":
        if profile == SPEC_PROFILE:  # the spec defines y by a system's rule only (uniform.md §2.8 C10)
            name = next(iter(case.expected))
            return Expectation(dict(case.expected), {name: np.ones(case.expected[name].shape, bool)})
        try:
            return fake_quantize_outputs(case, profile)
        except QrefError as exc:
            raise Unsupported(f"profile {profile!r} has no FakeQuantize rule for this case ({exc})") from None
    return _outputs(case, scheme_of(case, profile))


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(class, outputs): for requantize the other form (uniform.md §2.7) and signless storage; for integer quantize
    first the conversion through int32 (``_int32_alternatives``), then arithmetic variants of ``profile``
    (uniform.md §3), then integer wrap-around and saturation at the signed bounds of the storage width."""
    if case.operation == "uniform_calibrate":  # no variant names a class yet
        return
    if case.operation == "fake_quantize":
        yield from _fake_quantize_alternatives(case, profile)
        return
    if case.operation == "uniform_requantize":  # the other requantize form (uniform.md §2.7)
        mine = requantize_arithmetic(profile).form
        for form in FORMS:
            if form != mine:
                try:
                    yield "requantize_form", _requantize_outputs(case, profile, form).outputs
                except Exception:
                    continue
        try:
            signless = _requantize_signless(case, profile)
        except Exception:
            return
        yield "signedness", signless
        return
    st = get_format(case.scheme["storage"])
    quantize_int = case.operation == "uniform_quantize" and isinstance(st, IntFormat) and st.bits < 32
    if quantize_int:  # first: on the elements it changes, a clamp variant can give the same codes by accident
        yield from _int32_alternatives(case, profile)
    base = arithmetic_for(profile).to_dict()
    yield from distinct_alternatives(_ALTS, lambda ov: _outputs(case, scheme_of(case, profile, **ov)).outputs,
                                     lambda ov: all(base.get(k) == v for k, v in ov.items()))
    if not isinstance(st, IntFormat):  # float storage lowered as integer storage (uniform.md §4.3); last
        try:
            lowered = _integer_lowering(case, profile)
        except Exception:
            lowered = None
        if lowered is not None:
            yield "integer_lowering", lowered
    if case.operation == "uniform_dequantize":
        if isinstance(st, IntFormat) and not st.signed:  # codes read as the signed type of their width
            (cname,) = case.inputs
            c = case.inputs[cname].astype(np.int64) & ((1 << st.bits) - 1)
            signed = np.where(c >= 1 << (st.bits - 1), c - (1 << st.bits), c)
            sch = scheme_of(case, profile)
            spec = dict(sch.to_spec(), storage="int32", zero_points=list(sch.zero_points))  # codes read signed
            try:
                alt = _from_spec(spec)
                name = next(iter(case.expected))
                with np.errstate(all="ignore"):
                    vals, _ = alt.dequantize_with_mask(QArray(codes=signed, scheme=alt),
                                                       dtype=case.expected[name].dtype)
                yield "signedness", {name: np.asarray(vals)}
            except Exception:
                pass
        return
    if not quantize_int:
        return
    spec = dict(case.scheme)
    wide = dict(spec, storage="int32" if st.bits < 32 else "int64", storage_range=None,
                arithmetic=arithmetic_for(profile, conversion="saturate").to_dict())
    try:
        with np.errstate(all="ignore"):
            n = np.asarray(_from_spec(wide).quantize(case.inputs["x"]).codes).astype(np.int64)
    except Exception:
        return
    name = next(iter(case.expected))  # the codes (a grad_mask follows them)
    dt = case.expected[name].dtype
    mod = n & ((1 << st.bits) - 1)
    yield "wrap_around", {name: _as(mod, dt, st.bits)}
    lo, hi = -(1 << (st.bits - 1)), (1 << (st.bits - 1)) - 1
    if not st.signed:  # an unsigned storage saturated as the signed type of its width (a signless i8)
        yield "signedness", {name: _as(np.clip(n, lo, hi) & ((1 << st.bits) - 1), dt, st.bits)}
    else:
        yield "saturation", {name: _as(np.clip(n, 0, (1 << st.bits) - 1), dt, st.bits)}


def _fake_quantize_alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """uniform.md §2.8: the profile's FakeQuantizeRule with the other output step (class fma), then the other
    profiles' rules (the other form: normalize / scale_shift, recomposed output range or not)."""
    from ...profiles.uniform import FAKE_QUANTIZE_RULES

    rule = FAKE_QUANTIZE_RULES.get(profile)
    alts: list[tuple[str, Any]] = []
    if rule is not None:
        other = "multiply_add" if rule.output_step == "fma" else "fma"
        alts.append(("fma", dataclasses.replace(rule, output_step=other)))
        alts.append(("fake_quantize_form", dataclasses.replace(rule, recompose_ranges=())))
    alts += [("fake_quantize_form", r) for name, r in FAKE_QUANTIZE_RULES.items() if name != profile]
    seen: list[np.ndarray] = []  # the profile's own y first: an alternative equal to it explains nothing
    if rule is not None:
        seen.append(fake_quantize_outputs(case, rule).outputs["y"].view(np.uint32))
    for cls, r in alts:
        try:
            y = fake_quantize_outputs(case, r).outputs["y"]
        except QrefError:
            continue
        if any(np.array_equal(y.view(np.uint32), s) for s in seen):
            continue
        seen.append(y.view(np.uint32))
        yield cls, {"y": y}


def _integer_lowering(case: Case, profile: str) -> dict[str, np.ndarray]:
    """Float storage through an integer lowering: quantize rounds fl32(fl32(x / s) + z), clamped to the format's
    +-max, to an integer (half to even) and converts that integer to the format; dequantize truncates the decoded
    code to an int32 (Inf and NaN: INT_MIN, x86-64's undefined conversion), then (n - z) * s in float32."""
    sch = scheme_of(case, profile)
    fmt = sch.storage
    name = next(iter(case.expected))  # the codes (a grad_mask follows them)
    exp = case.expected[name]
    if case.operation == "uniform_quantize":
        x = case.inputs["x"]
        S, Z = sch.expand(x.shape)
        with np.errstate(all="ignore"):
            v = (x.astype(np.float32) / np.asarray(S, np.float32)).astype(np.float32) + np.asarray(Z, np.float32)
            v = np.clip(v, np.float32(-fmt.max_value), np.float32(fmt.max_value))
            codes = encode(np.rint(v), fmt)
        return {name: np.asarray(codes).astype(exp.dtype)}
    (cname,) = case.inputs
    codes = case.inputs[cname]
    S, Z = sch.expand(codes.shape)
    with np.errstate(all="ignore"):
        d = decode(codes, fmt, dtype=np.float64)
        # float -> int32 out of range (Inf, NaN): x86-64's INT_MIN
        n = np.where(np.abs(d) < 2.0**31, np.trunc(d) + 0.0, -(2.0**31)).astype(np.float32)  # an integer: no -0
        y = ((n - np.asarray(Z, np.float32)) * np.asarray(S, np.float32)).astype(np.float32)
    return {name: y.astype(exp.dtype)}


def _int32_alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """("int32_conversion", outputs) for each undefined value of the conversion (see ``_through_int32``): INT_MIN
    (x86-64's float -> int32 conversion) and, for bfloat16 inputs only, 0 (ml_dtypes' bfloat16 -> int32 cast;
    elsewhere a 0 + z would pass for other mechanisms, e.g. a signless clamp giving z)."""
    name = next(iter(case.expected))  # the codes (a grad_mask follows them)
    dt = case.expected[name].dtype
    bits_ = get_format(case.scheme["storage"]).bits
    bf16 = case.inputs["x"].dtype.name == "bfloat16"
    for undefined in (-(1 << 31), 0) if bf16 else (-(1 << 31),):
        conv = _through_int32(case, profile, undefined)
        if conv is None:
            return
        try:
            base = _outputs(case, scheme_of(case, profile)).outputs[name]
        except Exception:
            return
        bad, v = conv
        yield "int32_conversion", {name: np.where(bad.reshape(base.shape), _as(v, dt, bits_).reshape(base.shape),
                                                  base)}


def _through_int32(case: Case, profile: str, undefined: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The codes when the rounded quotient r = round(x / s) is converted to int32 before the zero point is added
    and the result clamped to the storage range (ONNX's numpy reference: ``np.rint(x / s).astype(np.int32) + z``;
    TFLite's reference kernels): r outside int32, +-Inf and NaN become ``undefined`` (the conversion is undefined
    behaviour: INT_MIN on x86-64, 0 through ml_dtypes' bfloat16 cast), and ``undefined`` + z wraps in int32.
    (affected elements, their codes), or None when no element is affected (then it is the profile itself)."""
    spec = dict(case.scheme)
    sch = scheme_of(case, profile)
    # the rounded quotient alone: the scheme with zero points 0, saturated to int32 (2^31 - 1 is no float32, so
    # that code means the quotient left int32; -2^31 converts to INT_MIN either way)
    wide = dict(spec, storage="int32", storage_range=None,
                zero_points=np.zeros_like(np.asarray(spec["zero_points"], np.int64)).tolist(),
                arithmetic=arithmetic_for(profile, conversion="saturate", clamp="integer",
                                          zero_point="after_rounding").to_dict())
    x = case.inputs["x"]
    try:
        with np.errstate(all="ignore"):
            r = np.asarray(_from_spec(wide).quantize(x).codes).astype(np.int64).reshape(x.shape)
    except Exception:
        return None
    _, Z = sch.expand(x.shape)
    z = np.broadcast_to(np.asarray(Z, np.int64), x.shape)
    with np.errstate(invalid="ignore"):
        bad = (r >= (1 << 31) - 1) | (r <= -(1 << 31)) | np.isnan(x.astype(np.float64))
    if not bad.any():
        return None
    r32 = np.where(bad, undefined, r)
    v = (r32 + z + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 addition wraps
    lo, hi = sch.storage_bounds
    return bad, np.clip(v, lo, hi)


def _as(v: np.ndarray, dt: np.dtype, bits_: int) -> np.ndarray:
    u = v.astype(np.uint64) & np.uint64((1 << bits_) - 1)
    width = dt.itemsize
    return u.astype(f"u{width}").view(dt)


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    out = np.full(exp.shape, "", dtype=object)
    if case.operation in ("uniform_requantize", "uniform_calibrate"):
        return out
    if case.operation == "fake_quantize":  # y: float32 values
        with np.errstate(invalid="ignore"):
            xv = case.inputs["x"].reshape(-1)[idx].astype(np.float64)
            ev, gv = exp.view(np.float32).astype(np.float64), got.view(np.float32).astype(np.float64)
        out[np.isnan(xv) | np.isnan(gv)] = "nan_sign_or_code"
        out[(ev == 0) & (gv == 0) & (out == "")] = "sign_of_zero"
        return out
    if case.operation == "uniform_quantize" and "x" in case.inputs:
        with np.errstate(invalid="ignore"):
            xv = case.inputs["x"].reshape(-1)[idx].astype(np.float64)
        out[np.isnan(xv)] = "nan_sign_or_code"
        st = get_format(case.scheme["storage"])
        if not isinstance(st, IntFormat):  # float storage: +0 for -0 (or the reverse)
            with np.errstate(all="ignore"):
                ev = np.asarray(decode(np.asarray(exp).astype(np.uint8), st.name), np.float64)
                gv = np.asarray(decode(np.asarray(got).astype(np.uint8), st.name), np.float64)
            out[(ev == 0) & (gv == 0) & (out == "")] = "sign_of_zero"
    else:  # uniform_dequantize: float values
        out = value_classes(case, name, exp, got)
    return out


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


def describe_input(case: Case, index: int) -> str:
    from ...conformance.text import float_text, hex_words

    if case.operation == "uniform_calibrate":
        return _describe_run(case, index)
    if case.operation == "fake_quantize":
        return _describe_fake_quantize(case, index)
    sch = scheme_of(case)
    (cname,) = case.inputs
    a = case.inputs[cname]
    v = a.reshape(-1)[index : index + 1]
    s, z = element_params(case, index)
    with np.errstate(invalid="ignore"):
        val = float_text(float(v.astype(np.float64)[0])) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" \
            else str(int(v[0]))
    if case.operation == "uniform_requantize":  # the code as a value of its storage type
        val = str(int(_signed_codes(v, sch)[0]))
    text = f"{a.dtype.name} {hex_words(v)[0]} ({val}) with scale {s!r}, zero point {z} ({sch.storage.name})"
    if case.operation == "uniform_requantize":
        to = to_scheme_of(case)
        S, Z = to.expand(a.shape)
        s2 = float(np.broadcast_to(S, a.shape).reshape(-1)[index])
        z2 = int(np.broadcast_to(Z, a.shape).reshape(-1)[index])
        text += f" to scale {s2!r}, zero point {z2} ({to.storage.name})"
    return text


def _describe_fake_quantize(case: Case, index: int) -> str:
    """x[index] (bits and value) with its ranges and the levels (uniform.md §2.8)."""
    from ...conformance.text import float_text, hex_words

    x = case.inputs["x"]
    v = x.reshape(-1)[index : index + 1]
    r = [float(np.broadcast_to(case.inputs[k], x.shape).reshape(-1)[index]) for k in FQ_RANGES]
    with np.errstate(invalid="ignore"):
        val = float_text(float(v.astype(np.float64)[0]))
    return (f"float32 {hex_words(v)[0]} ({val}) with input range [{float_text(r[0])}, {float_text(r[1])}], "
            f"output range [{float_text(r[2])}, {float_text(r[3])}], {int(case.params['levels'])} levels")


def _describe_run(case: Case, index: int) -> str:
    """The run behind element ``index`` of a uniform_calibrate output: its batches' min and max."""
    from ...conformance.text import float_text

    p = case.params
    x = case.inputs["x"]
    shape = case.expected["scale"].shape
    pos = np.unravel_index(index, shape)
    run = x[pos[0]].astype(np.float64)
    if p["axis"] is not None:
        run = np.take(run, int(pos[1]), axis=int(p["axis"]) + 1)
    with np.errstate(invalid="ignore"):
        mm = [f"[{float_text(float(np.min(b)))}, {float_text(float(np.max(b)))}]" for b in run]
    ch = "" if p["axis"] is None else f", channel {int(pos[1])}"
    return (f"run {int(pos[0])}{ch}: batch ranges {' '.join(mm)} ({p['running']}, "
            f"{'symmetric' if p['symmetric'] else 'affine'} {p['storage']} {list(p['storage_range'])})")


def element_params(case: Case, index: int) -> tuple[float, int]:
    """(scale, zero point) of element ``index`` of the case's input."""
    sch = scheme_of(case)
    (cname,) = case.inputs
    shape = case.inputs[cname].shape
    S, Z = sch.expand(shape)
    S = np.broadcast_to(S, shape).reshape(-1)
    Z = np.broadcast_to(Z, shape).reshape(-1)
    return float(S[index]), int(Z[index])


def describe_output(case: Case, name: str, value: np.ndarray) -> str:
    from ...conformance.text import float_text, hex_words

    if case.operation == "uniform_calibrate" or name == "grad_mask":
        return describe_value(name, value)
    if case.operation == "fake_quantize":  # y float32
        v = np.asarray(value).reshape(-1)[:1]
        with np.errstate(invalid="ignore"):
            return f"{hex_words(v)[0]} ({float_text(float(v.astype(np.float64)[0]))})"
    v = np.asarray(value).reshape(-1)[:1]
    if case.operation in ("uniform_quantize", "uniform_requantize"):
        st = get_format((case.params["to"] if case.operation == "uniform_requantize" else case.scheme)["storage"])
        if isinstance(st, IntFormat):
            u = int(bits(v)[0]) & ((1 << st.bits) - 1)
            val = u - (1 << st.bits) if st.signed and u >= 1 << (st.bits - 1) else u
            return f"{hex_words(v)[0]} ({val})"
        return f"{hex_words(v)[0]}"
    with np.errstate(invalid="ignore"):
        value = float(v.astype(np.float64)[0])
    return f"{hex_words(v)[0]} ({float_text(value)})"


def divergence(case: Case, got: dict[str, np.ndarray], unspecified: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """What the backend returned at the elements the spec leaves unspecified: "kind|storage" -> behaviour ->
    count (docs/conformance/divergence.md; kinds and behaviours are described there). Integer storage only."""
    if case.operation in ("uniform_requantize", "uniform_calibrate", "fake_quantize"):
        return {}
    name = next(iter(case.expected))  # the codes (a fake-quantize case's grad_mask follows them)
    mask = unspecified.get(name)
    if mask is None or name not in got or not np.asarray(mask).any():
        return {}
    sch = scheme_of(case)
    st = sch.storage
    if not isinstance(st, IntFormat):
        return {}
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    m = np.asarray(mask, bool).reshape(shape)
    S, Z = sch.expand(shape)
    s = np.broadcast_to(np.asarray(S, np.float64), shape)[m]
    z = np.broadcast_to(np.asarray(Z, np.int64), shape)[m]
    lo, hi = sch.storage_bounds
    label = sch.storage.name
    out: dict[str, dict[str, int]] = {}

    def add(kind: str, behaviour: str) -> None:
        d = out.setdefault(f"{kind}|{label}", {})
        d[behaviour] = d.get(behaviour, 0) + 1

    g = np.asarray(got[name]).reshape(shape)[m]
    if case.operation == "uniform_quantize":
        u = bits(g).astype(np.int64) & ((1 << st.bits) - 1)
        q = np.where(st.signed & (u >= 1 << (st.bits - 1)), u - (1 << st.bits), u)
        with np.errstate(all="ignore"):
            x = case.inputs["x"].reshape(shape)[m].astype(np.float64)
            v = x / s + z
        for xi, vi, qi, zi in zip(x, v, q, z):
            if np.isnan(xi):
                kind = "NaN"
            elif np.isinf(xi):
                kind = "+Inf" if xi > 0 else "-Inf"
            elif vi > hi:
                kind = "above the storage range"
            elif vi < lo:
                kind = "below the storage range"
            else:
                kind = "other"
            add(kind, _quantize_behaviour(int(qi), float(vi), int(zi), lo, hi, st.bits, kind))
        return out
    # dequantize: (q - z) leaves the storage type
    c = storage_values_of(case).reshape(shape)[m].astype(np.int64)
    dt = case.expected[name].dtype
    wrapped_d = ((c - z - lo) % (1 << st.bits)) + lo  # (q - z) wrapped into the storage type

    def products(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(q - z) * s without overflow: rounded once from float64, and in the output type step by step."""
        with np.errstate(all="ignore"):
            once = (d.astype(np.float64) * s).astype(np.float32).astype(dt)
            steps = d.astype(np.float64).astype(dt) * s.astype(np.float32).astype(dt)
        return bits(np.asarray(once)), bits(np.asarray(steps, dt))

    e1, e2 = products(c - z)
    w1, w2 = products(wrapped_d)
    for gi, a1, a2, b1, b2, gv in zip(bits(g), e1, e2, w1, w2, g):
        if gi in (a1, a2):
            b = "exact"
        elif gi in (b1, b2):
            b = "wraps"
        else:
            with np.errstate(invalid="ignore"):
                b = f"{float(np.asarray(gv).astype(np.float64))!r}"
        add("(q - z) outside the storage type", b)
    return out


def _quantize_behaviour(q: int, v: float, z: int, lo: int, hi: int, width: int, kind: str) -> str:
    if kind != "NaN" and not np.isnan(v):
        side = hi if v > 0 and kind in ("+Inf", "above the storage range") else \
            (lo if kind in ("-Inf", "below the storage range") else None)
        if side is not None and q == side:
            return "saturates"
        if np.isfinite(v):
            r = int(np.rint(v))
            w = ((r - lo) % (1 << width)) + lo
            if q == w:
                return "wraps"
    if q == lo:
        return "lo"
    if q == hi:
        return "hi"
    if q == z and z != 0:
        return "z"
    if q == 0:
        return "0"
    return str(q)


def storage_values_of(case: Case) -> np.ndarray:
    """The codes input of a dequantize case as integer values of its storage type (sign-extended)."""
    (cname,) = case.inputs
    st = get_format(case.scheme["storage"])
    v = case.inputs[cname].astype(np.int64) & ((1 << st.bits) - 1)
    return np.where(st.signed & (v >= 1 << (st.bits - 1)), v - (1 << st.bits), v)


__all__ = ["CLASS_SECTIONS", "FAMILY", "FQ_RANGES", "OPERATIONS", "SPEC_PROFILE", "alternatives", "describe_input",
           "describe_output", "divergence", "element_params", "expectation", "fake_quantize_outputs", "holds",
           "relevant", "scheme_of", "spec_sections", "storage_values_of", "structural_class", "task_key",
           "to_scheme_of"]
