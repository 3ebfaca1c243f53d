"""Exports for consumers outside Python (docs/vectors.md §8).

MLIR: self-checking StableHLO files in the style of openxla/stablehlo testdata: the inputs and the expected
outputs are hex dense constants (``dense<"0x...">``: the raw little-endian bytes of the elements, one byte per
element for 4- and 6-bit types, so NaN payloads and -0 survive), the operation is ``stablehlo.convert``, the
result is read as bits with ``stablehlo.bitcast_convert`` (widened to ui8 for 4-bit types; f6 types, which have
no integer type of their width, are converted exactly to f32 first) and compared with ``check.expect_eq``. Run one with
``stablehlo-translate --interpret FILE``. Only cases that MLIR can express are exported: element encode / decode /
quantize of MLIR float types whose expected outputs hold under the spec's default policy (nearest_even, the
format's default overflow and NaN rules: the behaviour MLIR's APFloat-based conversions implement).
``returning_module`` rewrites a file so ``@main`` returns each checked pair instead (for tools without the
``check`` dialect, e.g. IREE or the StableHLO Python interpreter); the comparison then happens in the caller.

JSON lines: one case per line, TestFloat-like: every array as a list of fixed-width hex strings of its bits
(big-endian digits: float32 1.0 is "3f800000"), unspecified masks as strings of '0'/'1'.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..core.decode import decode
from ..errors import QrefError
from ..policy import CastPolicy
from .case import Case, _plain, policy_record, to_storage

#: qref format name -> MLIR builtin type.
MLIR_TYPES = {
    "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2", "float8_e4m3fnuz": "f8E4M3FNUZ",
    "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e4m3b11fnuz": "f8E4M3B11FNUZ", "float8_e4m3": "f8E4M3",
    "float8_e3m4": "f8E3M4", "float6_e2m3fn": "f6E2M3FN", "float6_e3m2fn": "f6E3M2FN", "float4_e2m1fn": "f4E2M1FN",
    "float8_e8m0fnu": "f8E8M0FNU", "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
}
_UINT_OF_WIDTH = {4: "ui4", 8: "ui8", 16: "ui16", 32: "ui32", 64: "ui64"}
_BITS = {"f8E4M3FN": 8, "f8E5M2": 8, "f8E4M3FNUZ": 8, "f8E5M2FNUZ": 8, "f8E4M3B11FNUZ": 8, "f8E4M3": 8, "f8E3M4": 8,
         "f6E2M3FN": 6, "f6E3M2FN": 6, "f4E2M1FN": 4, "f8E8M0FNU": 8, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def _hex_dense(arr: np.ndarray) -> str:
    """The MLIR hex literal of an array: its storage bytes, little-endian, C order."""
    return "0x" + to_storage(arr).tobytes().hex().upper()


def _tensor(n: int | tuple[int, ...], t: str) -> str:
    """``tensor<4xf32>`` / ``tensor<2x3xf32>`` / ``tensor<f32>`` of a size or a shape."""
    dims = (n,) if isinstance(n, int) else tuple(n)
    return "tensor<" + "".join(f"{d}x" for d in dims) + t + ">"


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


class _Body:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def op(self, text: str, prefix: str = "v") -> str:
        self.n += 1
        name = f"%{prefix}{self.n}"
        self.lines.append(f"    {name} = {text}")
        return name


def _read_bits(b: _Body, value: str, n: int | tuple[int, ...], t: str) -> tuple[str, str]:
    """(SSA value, type) holding the bits of ``value`` (tensor of float type t) as unsigned integers; f6 types,
    which have no integer of their width, are converted exactly to f32 first."""
    width = _BITS[t]
    if width not in _UINT_OF_WIDTH:
        value = b.op(f"stablehlo.convert {value} : ({_tensor(n, t)}) -> {_tensor(n, 'f32')}", "f")
        t, width = "f32", 32
    ut = _UINT_OF_WIDTH[width]
    bits = b.op(f"stablehlo.bitcast_convert {value} : ({_tensor(n, t)}) -> {_tensor(n, ut)}", "bits")
    if width < 8:  # widen sub-byte integers: some backends cannot return packed i4 tensors
        bits = b.op(f"stablehlo.convert {bits} : ({_tensor(n, ut)}) -> {_tensor(n, 'ui8')}", "bits")
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
    b = _Body()
    checks: list[tuple[str, str, str]] = []
    if case.operation == "decode":
        codes = case.inputs["codes"]
        n = codes.shape
        dt = MLIR_TYPES[case.params["dtype"]]
        width = _BITS[ft]
        if width in _UINT_OF_WIDTH:  # codes as unsigned integers, bitcast to the format
            ut = "ui8" if width < 8 else _UINT_OF_WIDTH[width]
            c = b.op(f'stablehlo.constant dense<"{_hex_dense(codes)}"> : {_tensor(n, ut)}', "codes")
            if width < 8:
                c = b.op(f"stablehlo.convert {c} : ({_tensor(n, ut)}) -> {_tensor(n, _UINT_OF_WIDTH[width])}", "codes")
                ut = _UINT_OF_WIDTH[width]
            c = b.op(f"stablehlo.bitcast_convert {c} : ({_tensor(n, ut)}) -> {_tensor(n, ft)}", "codes")
        else:  # f6: no integer type of that width; a hex constant of the format itself (one byte per element)
            c = b.op(f'stablehlo.constant dense<"{_hex_dense(codes)}"> : {_tensor(n, ft)}', "codes")
        y = b.op(f"stablehlo.convert {c} : ({_tensor(n, ft)}) -> {_tensor(n, dt)}", "y")
        got, ut = _read_bits(b, y, n, dt)
        exp = case.expected["y"]
    else:
        x = case.inputs["x"]
        n = x.shape
        st = MLIR_TYPES[x.dtype.name]
        xv = b.op(f'stablehlo.constant dense<"{_hex_dense(x)}"> : {_tensor(n, st)}', "x")
        y = b.op(f"stablehlo.convert {xv} : ({_tensor(n, st)}) -> {_tensor(n, ft)}", "y")
        if case.operation == "encode":
            got, ut = _read_bits(b, y, n, ft)
            exp = _expected_bits(case.expected["codes"], fname, ft)
        else:
            back = b.op(f"stablehlo.convert {y} : ({_tensor(n, ft)}) -> {_tensor(n, st)}", "q")
            got, ut = _read_bits(b, back, n, st)
            exp = case.expected["y"]
    e = b.op(f'stablehlo.constant dense<"{_hex_dense(exp)}"> : {_tensor(n, ut)}', "expected")
    checks.append((got, e, _tensor(n, ut)))
    pol = " ".join(f"{k}={v}" for k, v in (case.policy or {}).items() if v is not None)
    head = [
        "// RUN: stablehlo-translate --interpret %s",
        f"// qref conformance case {case.id}" + (f" (suite {suite_name})" if suite_name else ""),
        f"// operation: {case.operation}; {case.description}",
        f"// policy: {pol or '-'}; spec: {', '.join(case.spec)}",
        "// Expected values are qref's reference results as hex constants (raw little-endian element bytes).",
        "",
        "module @qref_case {",
        "  func.func public @main() {",
    ]
    tail = [f"    check.expect_eq {g}, {x} : {t}" for g, x, t in checks] + ["    func.return", "  }", "}", ""]
    return "\n".join(head + b.lines + tail)


def _i64s(v: Iterable[int]) -> str:
    return "array<i64: " + ", ".join(str(int(i)) for i in v) + ">"


def _uniform_to_mlir(case: Case, suite_name: str, per_axis: str = "type") -> str:
    """stablehlo.uniform_quantize of the case's input to its !quant.uniform type (qref.mlir.format_type; per
    tensor or per axis, any rank), the codes read with bitcast_convert. Elements the case marks unspecified are
    left out: a 1-D case drops them, an N-D case ANDs both sides with a 0x00/0xFF.. mask (check.expect_eq has no
    mask). Unsigned storage is spelled ui8/ui16 (StableHLO's lowering reads u8 as signless)."""
    from ..mlir import format_type
    from ..schemes.base import scheme_from_spec

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
    b = _Body()
    xv = b.op(f'stablehlo.constant dense<"{_hex_dense(x)}"> : {_tensor(shape, "f32")}', "x")
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
            sl = b.op(f'"stablehlo.slice"({xv}) {{start_indices = {_i64s(lo)}, limit_indices = {_i64s(hi)}, '
                      f'strides = {_i64s([1] * len(shape))}}} : ({_tensor(shape, "f32")}) -> {_tensor(sub, "f32")}',
                      "x")
            qi = b.op(f"stablehlo.uniform_quantize {sl} : ({_tensor(sub, 'f32')}) -> {_tensor(sub, qti)}", "q")
            parts.append(b.op(f"stablehlo.bitcast_convert {qi} : ({_tensor(sub, qti)}) -> {_tensor(sub, it)}",
                              "codes"))
        types = ", ".join(_tensor(tuple(1 if d == axis else n for d, n in enumerate(shape)), it) for _ in parts)
        got = b.op(f'"stablehlo.concatenate"({", ".join(parts)}) {{dimension = {axis} : i64}} : ({types}) -> '
                   f"{_tensor(shape, it)}", "codes")
    else:
        q = b.op(f"stablehlo.uniform_quantize {xv} : ({_tensor(shape, 'f32')}) -> {_tensor(shape, qt)}", "q")
        got = b.op(f"stablehlo.bitcast_convert {q} : ({_tensor(shape, qt)}) -> {_tensor(shape, it)}", "codes")
    exp = np.ascontiguousarray(codes)
    if masked:
        ones = np.array(-1 if it.startswith("i") else np.iinfo(exp.dtype).max).astype(exp.dtype)
        mask = np.where(keep, ones, exp.dtype.type(0)).astype(exp.dtype)
        m = b.op(f'stablehlo.constant dense<"{_hex_dense(mask)}"> : {_tensor(shape, it)}', "mask")
        got = b.op(f"stablehlo.and {got}, {m} : {_tensor(shape, it)}", "codes")
        exp = exp & mask
    e = b.op(f'stablehlo.constant dense<"{_hex_dense(exp)}"> : {_tensor(shape, it)}', "expected")
    omitted = int((~keep).sum())
    head = [
        "// RUN: stablehlo-translate --interpret %s",
        f"// qref conformance case {case.id}" + (f" (suite {suite_name})" if suite_name else ""),
        f"// operation: {case.operation}; profiles: {', '.join(case.profiles)}; spec: {', '.join(case.spec)}",
        f"// {omitted} element(s) the spec leaves unspecified are "
        + ("masked out of the comparison." if masked else "omitted."),
        "",
        "module @qref_case {",
        "  func.func public @main() {",
    ]
    tail = [f"    check.expect_eq {got}, {e} : {_tensor(shape, it)}", "    func.return", "  }", "}", ""]
    return "\n".join(head + b.lines + tail)


_CHECK_RE = re.compile(r"^(\s*)check\.expect_eq (%\w+), (%\w+) : (\S+)\s*$")


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


def _hex_list(arr: np.ndarray) -> list[str]:
    bits = to_storage(arr).reshape(-1)
    if bits.dtype.kind == "i":
        bits = bits.view(f"u{bits.dtype.itemsize}")
    width = bits.dtype.itemsize * 2
    return [f"{int(v):0{width}x}" for v in bits]


def to_jsonl(case: Case) -> str:
    """One JSON line for a case (see module docstring); keys sorted, no spaces."""
    def arrays(group: dict[str, np.ndarray]) -> dict[str, Any]:
        out = {}
        for k, v in group.items():
            d: dict[str, Any] = {"dtype": v.dtype.name, "shape": list(v.shape), "hex": _hex_list(v)}
            if k in case.array_formats:
                d["format"] = case.array_formats[k]
            out[k] = d
        return out

    obj = {
        "id": case.id, "family": case.family, "operation": case.operation, "format": _plain(case.format),
        "policy": _plain(case.policy), "scheme": _plain(case.scheme), "profile": case.profile,
        "params": _plain(case.params), "tags": list(case.tags), "spec": list(case.spec),
        "equivalent": _plain(case.equivalent), "profiles": list(case.profiles),
        "inputs": arrays(dict(case.inputs)), "expected": arrays(dict(case.expected)),
        "unspecified": {k: "".join("1" if b else "0" for b in m.reshape(-1)) for k, m in case.unspecified.items()},
    }
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def export_jsonl(cases: Iterable[Case], path: str | os.PathLike[str]) -> int:
    """Write one line per case to ``path``; returns the number of lines."""
    n = 0
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="ascii", newline="\n") as f:
        for case in cases:
            f.write(to_jsonl(case) + "\n")
            n += 1
    return n


__all__ = ["MLIR_TYPES", "NotExpressible", "export_jsonl", "export_mlir", "mlir_expressible", "mlir_reason",
           "returning_module", "to_jsonl", "to_mlir"]
