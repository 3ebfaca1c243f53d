"""MLIR export: self-checking StableHLO files (docs/vectors.md §8).

Files in the style of openxla/stablehlo testdata: the inputs and the expected outputs are hex dense constants
(``dense<"0x...">``: the raw little-endian bytes of the elements, one byte per element for 4- and 6-bit types, so
NaN payloads and -0 survive), the operation is ``stablehlo.convert``, the result is read as bits with
``stablehlo.bitcast_convert`` (widened to ui8 for 4-bit types; f6 types, which have no integer type of their
width, are converted exactly to f32 first) and compared with ``check.expect_eq``. Run one with
``stablehlo-translate --interpret FILE``. Only cases that MLIR can express are exported: element encode / decode /
quantize of MLIR float types whose expected outputs hold under the spec's default policy (nearest_even, the
format's default overflow and NaN rules: the behaviour MLIR's APFloat-based conversions implement).
``returning_module`` rewrites a file so ``@main`` returns each checked pair instead (for tools without the
``check`` dialect, e.g. IREE or the StableHLO Python interpreter); the comparison then happens in the caller.
The operations' text comes from the one StableHLO writer, ``qref.interop.mlir.stablehlo``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ...core.decode import decode
from ...errors import QrefError
from ...formats.policy import CastPolicy
from ...interop.mlir import stablehlo as shlo
from ...interop.mlir.stablehlo import MLIR_TYPES, Body
from ...interop.mlir.stablehlo import WIDTH as _BITS
from ...interop.mlir.stablehlo import tensor as _tensor
from ..case import Case, policy_record, to_storage

__all__ = ["MLIR_TYPES", "NotExpressible", "export_mlir", "hex_dense", "mlir_expressible", "mlir_reason",
           "quantize_to_mlir", "returning_module", "to_mlir"]

_UINT_OF_WIDTH = {4: "ui4", 8: "ui8", 16: "ui16", 32: "ui32", 64: "ui64"}


def hex_dense(arr: np.ndarray) -> str:
    """The MLIR hex literal of an array: its storage bytes, little-endian, C order."""
    return shlo.hex_literal(to_storage(arr).tobytes())


def _const(b: Body, arr: np.ndarray, n: int | tuple[int, ...], t: str, prefix: str) -> str:
    """A hex dense constant of ``arr`` as a tensor of element type t (raw little-endian element bytes)."""
    return b.op(shlo.constant(hex_dense(arr), _tensor(n, t)), prefix)


def _cast(b: Body, name: str, value: str, n: int | tuple[int, ...], src: str, dst: str, prefix: str) -> str:
    """``stablehlo.NAME value`` from a tensor of element type src to one of dst (convert, bitcast_convert,
    uniform_quantize)."""
    return b.convert(name, value, n, src, dst, prefix)


_UNIFORM_STORAGE = {"int8": "i8", "uint8": "ui8", "int16": "i16", "uint16": "ui16"}


class NotExpressible(QrefError):
    """``to_mlir`` of a case MLIR cannot express; the message says why (mlir_reason)."""


def _uniform_reason(case: Case) -> str | None:
    sch = case.scheme or {}
    x = case.inputs.get("x")
    if case.operation != "uniform_quantize":
        return f"uniform operation {case.operation} (only uniform_quantize is exported)"
    if x is None or x.dtype != np.float32 or x.size == 0:
        return "the input is not a non-empty float32 tensor (StableHLO's quantize lowering takes float32)"
    if sch.get("expressed") != "float32":
        return f"expressed type {sch.get('expressed')} (StableHLO's lowering takes float32)"
    if case.array_formats.get("codes") not in _UNIFORM_STORAGE:
        return f"storage {case.array_formats.get('codes')} (exported: {', '.join(_UNIFORM_STORAGE)})"
    if sch.get("block_size"):
        return "sub-channel (blocked) scales: StableHLO's quant types are per tensor or per axis"
    if not {"stablehlo", "stablehlo_lowering"} & set(case.profiles):
        return "the expected codes do not hold under StableHLO's semantics (profiles stablehlo, stablehlo_lowering)"
    if not (~case.unspecified.get("codes", np.zeros(x.shape, bool))).any():
        return "every element is unspecified"
    return None


def mlir_reason(case: Case) -> str | None:
    """Why MLIR cannot express ``case`` (None when it can): exported are element encode / decode / quantize cases
    of MLIR float types, of any rank, valid under the default policy, and float32 uniform_quantize cases of
    8/16-bit integer storage, per tensor or per axis, of any rank, under StableHLO's semantics."""
    if case.family == "uniform":
        return _uniform_reason(case)
    if case.family != "elements":
        return f"family {case.family} (exported: elements and uniform)"
    if case.format is None or case.format["name"] not in MLIR_TYPES:
        return f"format {case.format['name'] if case.format else None} has no MLIR builtin type"
    if any(v.ndim == 0 or v.size == 0 for v in (*case.inputs.values(), *case.expected.values())):
        return "a scalar or empty array"
    if case.operation == "decode":
        return None if case.params.get("dtype") in MLIR_TYPES else f"decode to {case.params.get('dtype')}"
    if case.operation not in ("encode", "quantize") or set(case.inputs) != {"x"}:
        return f"operation {case.operation} (exported: encode, decode, quantize)"
    if case.inputs["x"].dtype.name not in MLIR_TYPES:
        return f"input dtype {case.inputs['x'].dtype.name} has no MLIR type"
    if not case.applies_to(policy_record(CastPolicy(), case.format["name"])):
        return "the expected codes do not hold under the default policy (MLIR's APFloat conversion: nearest_even)"
    return None


def mlir_expressible(case: Case) -> bool:
    """True when ``mlir_reason(case)`` is None."""
    return mlir_reason(case) is None


def _read_bits(b: Body, value: str, n: int | tuple[int, ...], t: str) -> tuple[str, str]:
    """(SSA value, type) holding the bits of ``value`` (tensor of float type t) as unsigned integers; f6 types,
    which have no integer of their width, are converted exactly to f32 first."""
    width = _BITS[t]
    if width not in _UINT_OF_WIDTH:
        value = _cast(b, "convert", value, n, t, "f32", "f")
        t, width = "f32", 32
    ut = _UINT_OF_WIDTH[width]
    bits = _cast(b, "bitcast_convert", value, n, t, ut, "bits")
    if width < 8:  # widen sub-byte integers: some backends cannot return packed i4 tensors
        bits = _cast(b, "convert", bits, n, ut, "ui8", "bits")
        ut = "ui8"
    return bits, ut


def _expected_bits(arr: np.ndarray, fmt_name: str | None, t: str) -> np.ndarray:
    """The expected array in the representation _read_bits produces."""
    if fmt_name is not None and _BITS[t] not in _UINT_OF_WIDTH:
        return decode(arr, fmt_name, dtype=np.float32)
    return arr


def to_mlir(case: Case, suite_name: str = "", *, per_axis: str = "type") -> str:
    """The self-checking StableHLO file of a case; NotExpressible (a QrefError saying why, mlir_reason) when
    MLIR cannot express it. per_axis (uniform per-axis cases): "type" quantizes to the per-axis
    ``!quant.uniform<..:axis, {...}>`` type; "slices" slices the input along the axis, quantizes each slice to
    its per-tensor type and concatenates the codes (the same values by StableHLO's definition of per-axis
    quantization; for tools whose lowering has no per-axis support, e.g. StablehloLegalizeQuantToMath)."""
    if per_axis not in ("type", "slices"):
        raise QrefError(f"to_mlir: per_axis must be 'type' or 'slices', got {per_axis!r}")
    why = mlir_reason(case)
    if why is not None:
        raise NotExpressible(f"case {case.id}: not exported to MLIR: {why}")
    if case.family == "uniform":
        return _uniform_to_mlir(case, suite_name, per_axis)
    fname = case.format["name"]
    ft = MLIR_TYPES[fname]
    b = Body()
    checks: list[tuple[str, str, str]] = []
    if case.operation == "decode":
        codes = case.inputs["codes"]
        n = codes.shape
        dt = MLIR_TYPES[case.params["dtype"]]
        width = _BITS[ft]
        if width in _UINT_OF_WIDTH:  # codes as unsigned integers, bitcast to the format
            ut = "ui8" if width < 8 else _UINT_OF_WIDTH[width]
            c = _const(b, codes, n, ut, "codes")
            if width < 8:
                c = _cast(b, "convert", c, n, ut, _UINT_OF_WIDTH[width], "codes")
                ut = _UINT_OF_WIDTH[width]
            c = _cast(b, "bitcast_convert", c, n, ut, ft, "codes")
        else:  # f6: no integer type of that width; a hex constant of the format itself (one byte per element)
            c = _const(b, codes, n, ft, "codes")
        y = _cast(b, "convert", c, n, ft, dt, "y")
        got, ut = _read_bits(b, y, n, dt)
        exp = case.expected["y"]
    else:
        x = case.inputs["x"]
        n = x.shape
        st = MLIR_TYPES[x.dtype.name]
        xv = _const(b, x, n, st, "x")
        y = _cast(b, "convert", xv, n, st, ft, "y")
        if case.operation == "encode":
            got, ut = _read_bits(b, y, n, ft)
            exp = _expected_bits(case.expected["codes"], fname, ft)
        else:
            back = _cast(b, "convert", y, n, ft, st, "q")
            got, ut = _read_bits(b, back, n, st)
            exp = case.expected["y"]
    e = _const(b, exp, n, ut, "expected")
    checks.append((got, e, _tensor(n, ut)))
    pol = " ".join(f"{k}={v}" for k, v in (case.policy or {}).items() if v is not None)
    head = [
        "// RUN: stablehlo-translate --interpret %s",
        f"// qref conformance case {case.id}" + (f" (suite {suite_name})" if suite_name else ""),
        f"// operation: {case.operation}; {case.description}",
        f"// policy: {pol or '-'}; spec: {', '.join(case.spec)}",
        "// Expected values are qref's reference results as hex constants (raw little-endian element bytes).",
        "",
    ]
    return "\n".join(head + shlo.checking_module(b.lines, checks))


def _i64s(v: Iterable[int]) -> str:
    return "array<i64: " + ", ".join(str(int(i)) for i in v) + ">"


def _uniform_to_mlir(case: Case, suite_name: str, per_axis: str = "type") -> str:
    """stablehlo.uniform_quantize of the case's input to its !quant.uniform type (qref.mlir.format_type; per
    tensor or per axis, any rank), the codes read with bitcast_convert. Elements the case marks unspecified are
    left out: a 1-D case drops them, an N-D case ANDs both sides with a 0x00/0xFF.. mask (check.expect_eq has no
    mask). Unsigned storage is spelled ui8/ui16 (StableHLO's lowering reads u8 as signless)."""
    from ...interop.mlir import format_type
    from ...schemes.base import scheme_from_spec

    spec = dict(case.scheme or {})
    st = case.array_formats["codes"]
    it = _UNIFORM_STORAGE[st]
    if st.startswith("u"):
        spec["type_spelling"] = it
    qt = format_type(scheme_from_spec(spec))
    x = case.inputs["x"]
    codes = case.expected["codes"]
    keep = ~case.unspecified.get("codes", np.zeros(x.shape, bool))
    masked = x.ndim > 1 and not keep.all()
    if x.ndim == 1:
        x, codes = x[keep], codes[keep]
    shape = x.shape
    b = Body()
    xv = _const(b, x, shape, "f32", "x")
    axis = spec.get("axis")
    if per_axis == "slices" and axis is not None:
        parts = []
        for i in range(shape[axis]):
            one = {**spec, "scales": [spec["scales"][i]], "zero_points": [spec["zero_points"][i]], "scale_shape": [],
                   "axis": None}
            qti = format_type(scheme_from_spec(one))
            sub = tuple(1 if d == axis else n for d, n in enumerate(shape))
            lo = [i if d == axis else 0 for d in range(len(shape))]
            hi = [i + 1 if d == axis else n for d, n in enumerate(shape)]
            attrs = (f"{{start_indices = {_i64s(lo)}, limit_indices = {_i64s(hi)}, "
                     f"strides = {_i64s([1] * len(shape))}}}")
            sl = b.op(shlo.generic("slice", (xv,), attrs, (_tensor(shape, "f32"),), _tensor(sub, "f32")), "x")
            qi = _cast(b, "uniform_quantize", sl, sub, "f32", qti, "q")
            parts.append(_cast(b, "bitcast_convert", qi, sub, qti, it, "codes"))
        types = tuple(_tensor(tuple(1 if d == axis else n for d, n in enumerate(shape)), it) for _ in parts)
        got = b.op(shlo.generic("concatenate", parts, f"{{dimension = {axis} : i64}}", types, _tensor(shape, it)),
                   "codes")
    else:
        q = _cast(b, "uniform_quantize", xv, shape, "f32", qt, "q")
        got = _cast(b, "bitcast_convert", q, shape, qt, it, "codes")
    exp = np.ascontiguousarray(codes)
    if masked:
        ones = np.array(-1 if it.startswith("i") else np.iinfo(exp.dtype).max).astype(exp.dtype)
        mask = np.where(keep, ones, exp.dtype.type(0)).astype(exp.dtype)
        m = _const(b, mask, shape, it, "mask")
        got = b.op(shlo.elementwise("and", (got, m), _tensor(shape, it)), "codes")
        exp = exp & mask
    e = _const(b, exp, shape, it, "expected")
    omitted = int((~keep).sum())
    head = [
        "// RUN: stablehlo-translate --interpret %s",
        f"// qref conformance case {case.id}" + (f" (suite {suite_name})" if suite_name else ""),
        f"// operation: {case.operation}; profiles: {', '.join(case.profiles)}; spec: {', '.join(case.spec)}",
        f"// {omitted} element(s) the spec leaves unspecified are "
        + ("masked out of the comparison." if masked else "omitted."),
        "",
    ]
    return "\n".join(head + shlo.checking_module(b.lines, [(got, e, _tensor(shape, it))]))


_CHECK_RE = re.compile(r"^(\s*)check\.expect_eq (%\w+), (%\w+) : (\S+)\s*$")


def quantize_to_mlir(x: object, qtype: object, *, name: str = "uniform/user/quantize") -> str:
    """A self-checking StableHLO file quantizing a user's float32 tensor ``x`` to the uniform quant type ``qtype``
    (an MLIR type text such as ``!quant.uniform<i8:f32:0, {0.5,0.25}>`` or a UniformScheme), the expected codes
    computed by qref under StableHLO's semantics (uniform.md §2.1; vectors.md §8). The tensor is validated against
    the type first (a QrefError, never a file the interpreter rejects): float32, rank >= 1, non-empty, a per-axis
    type's axis inside the rank with one scale per element along it, storage i8/ui8/i16/ui16, no blocks."""
    from ...interop.mlir import parse_type
    from ...schemes.uniform import UniformScheme
    from ..cases.uniform import SPEC, code_patterns

    sch = parse_type(qtype, "stablehlo") if isinstance(qtype, str) else qtype
    if not isinstance(sch, UniformScheme):
        raise QrefError(f"quantize_to_mlir takes a !quant.uniform type (text or UniformScheme), got "
                        f"{type(sch).__name__}")
    arr = np.asarray(x)
    if arr.dtype != np.float32 or arr.ndim == 0 or arr.size == 0:
        raise QrefError(f"quantize_to_mlir: x must be a non-empty float32 tensor of rank >= 1 (StableHLO's "
                        f"uniform_quantize lowering takes float32), got dtype {arr.dtype}, shape {arr.shape}")
    if sch.axis is not None and not -arr.ndim <= sch.axis < arr.ndim:
        raise QrefError(f"quantize_to_mlir: the type quantizes along axis {sch.axis}, but x has rank {arr.ndim}: "
                        "give a tensor with that axis or a type whose axis is inside the tensor's rank")
    spec = sch.to_spec()
    spec["profile"] = "stablehlo"
    from ...schemes.base import scheme_from_spec

    sch = scheme_from_spec(spec)  # the type under StableHLO's arithmetic
    q = sch.quantize(arr)  # checks the scales against the shape (one per element along the axis)
    case = Case(id=name, family="uniform", operation="uniform_quantize", inputs={"x": arr},
                expected={"codes": code_patterns(q.codes, sch.storage.name)}, scheme=sch.to_spec(),
                unspecified={} if q.unspecified is None else {"codes": np.asarray(q.unspecified, dtype=bool)},
                array_formats={"codes": sch.storage.name}, profile="stablehlo", profiles=("stablehlo",),
                spec=(SPEC["quantize"],))
    why = mlir_reason(case)
    if why is not None:
        raise QrefError(f"quantize_to_mlir: StableHLO cannot express this export: {why}")
    return to_mlir(case)


def returning_module(text: str) -> str:
    """Rewrite an exported file so @main returns (actual, expected) for each check.expect_eq instead of
    checking; for tools without the StableHLO ``check`` dialect."""
    pairs: list[tuple[str, str, str]] = []
    out = []
    for line in text.splitlines():
        m = _CHECK_RE.match(line)
        if m:
            pairs.append((m[2], m[3], m[4]))
            continue
        out.append(line)
    values = [v for a, e, _ in pairs for v in (a, e)]
    types = [t for _, _, t in pairs for _ in (0, 1)]
    text = "\n".join(out) + "\n"
    text = text.replace("func.func public @main() {", f"func.func public @main() -> ({', '.join(types)}) {{", 1)
    return text.replace("    func.return\n", f"    func.return {', '.join(values)} : {', '.join(types)}\n", 1)


def _safe_path(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_./-]", "_", case_id)


def export_mlir(cases: Iterable[Case], out: str | os.PathLike[str], suite_name: str = "",
                skipped: Counter[str] | None = None) -> list[Path]:
    """Write <out>/<case id>.mlir for every case MLIR can express; returns the paths written. ``skipped``
    (optional) counts the other cases by reason (mlir_reason)."""
    root = Path(out)
    written = []
    for case in cases:
        why = mlir_reason(case)
        if why is not None:
            if skipped is not None:
                skipped[why] += 1
            continue
        text = to_mlir(case, suite_name)
        p = root / (_safe_path(case.id) + ".mlir")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        written.append(p)
    return written
