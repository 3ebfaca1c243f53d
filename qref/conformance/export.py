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

Hex vectors (docs/vectors.md §8.1), for RTL testbenches and C models: per case a directory with TestFloat-style
vector files (one line per element: input words, expected words, one flags byte per expected word) and
``$readmemh`` files (one word per line); ``verify_hex`` reads a device's results back in either form and lists
every mismatch field by field, elements the spec leaves unspecified not compared.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..core.decode import decode
from ..errors import QrefError
from ..formats import FloatFormat, IntFormat, get_format
from ..formats.policy import CastPolicy
from .case import Case, logical_dtype_name, plain, policy_record, to_storage

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
    from ..interop.mlir import format_type
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


def quantize_to_mlir(x: object, qtype: object, *, name: str = "uniform/user/quantize") -> str:
    """A self-checking StableHLO file quantizing a user's float32 tensor ``x`` to the uniform quant type ``qtype``
    (an MLIR type text such as ``!quant.uniform<i8:f32:0, {0.5,0.25}>`` or a UniformScheme), the expected codes
    computed by qref under StableHLO's semantics (uniform.md §2.1; vectors.md §8). The tensor is validated against
    the type first (a QrefError, never a file the interpreter rejects): float32, rank >= 1, non-empty, a per-axis
    type's axis inside the rank with one scale per element along it, storage i8/ui8/i16/ui16, no blocks."""
    from ..interop.mlir import parse_type
    from ..schemes.uniform import UniformScheme
    from .cases.uniform import SPEC, code_patterns

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
    from ..schemes.base import scheme_from_spec

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
        "id": case.id, "family": case.family, "operation": case.operation, "format": plain(case.format),
        "policy": plain(case.policy), "scheme": plain(case.scheme), "profile": case.profile,
        "params": plain(case.params), "tags": list(case.tags), "spec": list(case.spec),
        "equivalent": plain(case.equivalent), "profiles": list(case.profiles),
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


# ---------------------------------------------------------------------------------------------------------
# hex vectors for hardware testbenches (docs/vectors.md §8.1)
# ---------------------------------------------------------------------------------------------------------
HEX_VERSION = 1
#: Flag bits of an expected element (docs/vectors.md §8.1): bit value -> name.
HEX_FLAGS: dict[int, str] = {0x01: "unspecified", 0x02: "nan", 0x04: "inf", 0x08: "zero", 0x10: "subnormal",
                             0x20: "out_of_range", 0x40: "inexact", 0x80: "saturated"}
_FLAG = {v: k for k, v in HEX_FLAGS.items()}
#: Operations written as hex vectors: every output element has its input elements at the same index (block,
#: lookup and uniform scales, zero points and global scales travel as their own files).
HEX_OPERATIONS = frozenset({
    ("elements", "encode"), ("elements", "decode"), ("elements", "quantize"),
    ("uniform", "uniform_quantize"), ("uniform", "uniform_dequantize"), ("uniform", "uniform_requantize"),
    ("block", "block_quantize"), ("block", "block_dequantize"), ("block", "tile_quantize"),
    ("block", "stochastic_quantize"),
    ("lookup", "lookup_quantize"), ("lookup", "lookup_dequantize"), ("lookup", "stochastic_quantize"),
    ("recipes", "scaled_qdq"),
})
_HEX_SKIPPED = {
    "pack": "bit packing: the output is a byte stream, not one word per input element",
    "unpack": "bit unpacking: the input is a byte stream, not one word per output element",
    "mma": "a matrix product: each output depends on a row and a column of inputs, not on one element",
    "gemm": "a matrix product: each output depends on a row and a column of inputs, not on one element",
    "block_matmul": "a matrix product: each output depends on a row and a column of inputs, not on one element",
    "qdq_matmul": "a matrix product: each output depends on a row and a column of inputs, not on one element",
    "delayed_scaling": "a recurrence: each step's outputs depend on the whole amax history",
    "hadamard": "a transform: each output depends on a whole group of n inputs, not on one element",
}
_MAX_HEX_FILE = 1 << 30  # bytes; far above any committed case (a few MB)
_SEG_RE = re.compile(r"^[A-Za-z0-9_.:<>=+,@-]+$")
_HEXCHARS = frozenset("0123456789abcdefABCDEF")
_UNKNOWN = frozenset("xXzZ")


@dataclass(frozen=True)
class HexColumn:
    """One column of a hex vector file: role "in" (an input), "exp" (an expected output) or "flags" (the
    flags byte of the expected array ``name``); ``format`` is the element format or logical dtype name; ``bits``
    the word width, written as ``digits`` = ceil(bits / 4) hex digits."""

    role: str
    name: str
    format: str
    bits: int
    digits: int

    def header(self, k: int) -> str:
        return f"# column {k}: {self.role} {self.name} {self.format} {self.bits} {self.digits}"


def hex_reason(case: Case) -> str | None:
    """Why ``case`` has no element-wise hex form (None when it has): the operation is not one of
    HEX_OPERATIONS, or no input shares its shape with an expected output."""
    if (case.family, case.operation) not in HEX_OPERATIONS:
        return _HEX_SKIPPED.get(case.operation, f"operation {case.operation} of family {case.family} "
                                "(exported: " + ", ".join(sorted({o for _, o in HEX_OPERATIONS})) + ")")
    if not {a.shape for a in case.inputs.values()} & {a.shape for a in case.expected.values()}:
        return "no input has the shape of an expected output"
    return None


def _fmt_name(case: Case, name: str, arr: np.ndarray) -> str:
    return case.array_formats.get(name) or logical_dtype_name(arr)


def _bits_of(fmt: str) -> int:
    return 1 if fmt == "bool" else get_format(fmt).bits


def _words(arr: np.ndarray, bits: int, where: str) -> np.ndarray:
    """The array's elements as uint64 words of ``bits`` bits, C order: float bit patterns, unsigned codes, and
    signed integers in two's complement of ``bits`` bits (a value that does not fit is a QrefError)."""
    s = to_storage(arr).reshape(-1)
    if s.dtype == np.bool_:
        return s.astype(np.uint64)
    if s.dtype.kind == "i":
        v = s.astype(np.int64)
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if v.size and (v.min() < lo or v.max() > hi):
            raise QrefError(f"{where}: values outside the {bits}-bit two's complement range")
        return v.astype(np.uint64) & np.uint64((1 << bits) - 1)
    w = s.astype(np.uint64)
    if bits < 64 and w.size and int(w.max()) >> bits:
        raise QrefError(f"{where}: a word wider than {bits} bits (max {int(w.max()):#x})")
    return w


def _hex_chars(words: np.ndarray, digits: int) -> np.ndarray:
    """(n, digits) uint8 ASCII lower-case hex digits of uint64 words, most significant first."""
    text = words.astype(">u8").tobytes().hex().encode("ascii")
    return np.frombuffer(text, np.uint8).reshape(-1, 16)[:, 16 - digits:]


def _text_rows(cols: list[np.ndarray], n: int) -> bytes:
    """Rows of space-separated character columns, each ending in a newline."""
    parts: list[np.ndarray] = []
    for i, c in enumerate(cols):
        if i:
            parts.append(np.full((n, 1), ord(" "), np.uint8))
        parts.append(c)
    parts.append(np.full((n, 1), ord("\n"), np.uint8))
    return np.ascontiguousarray(np.concatenate(parts, axis=1)).tobytes()


@cache
def _class_table(fmt: str) -> np.ndarray | None:
    """nan/inf/zero/subnormal flag bits of every code of a float format of at most 16 bits (None: not a float
    format or wider)."""
    f = get_format(fmt) if fmt != "bool" else None
    if not isinstance(f, FloatFormat) or f.bits > 16:
        return None
    return _classify_words(np.arange(1 << f.bits, dtype=np.uint64), f)


def _classify_words(w: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Flag bits nan / inf / zero / subnormal of codes of ``f`` (elements.md §1.1), in FloatFormat.classify's
    order of precedence: a NaN code is nothing else, an infinity is not zero."""
    mant = np.uint64((1 << f.mantissa_bits) - 1)
    mag = w & np.uint64(f.magnitude_mask)
    top = np.uint64(((1 << f.exponent_bits) - 1) << f.mantissa_bits)
    if f.nan == "ieee":
        nan = ((mag & top) == top) & ((mag & mant) != 0)
    elif f.nan == "all_ones":
        nan = mag == np.uint64(f.magnitude_mask)
    elif f.nan == "negative_zero":
        nan = w == np.uint64(f.sign_mask)
    else:
        nan = np.zeros(w.shape, bool)
    inf = ~nan & (mag == np.uint64(f.inf_code)) if f.inf_code is not None else np.zeros(w.shape, bool)
    zero = ~nan & ~inf & (mag == 0) if f.zero else np.zeros(w.shape, bool)
    sub = (~nan & ~inf & (mag != 0) & ((mag >> np.uint64(f.mantissa_bits)) == 0) if f.subnormals
           else np.zeros(w.shape, bool))
    out = np.zeros(w.shape, np.uint8)
    for m, bit in ((nan, 0x02), (inf, 0x04), (zero, 0x08), (sub, 0x10)):
        out[m] |= bit
    return out


def _values(arr: np.ndarray, fmt: str) -> np.ndarray | None:
    """Exact float64 values of an array (floats of numpy dtypes, or codes of a format of at most 16 bits); None
    where that is not exact."""
    if arr.dtype.kind == "f" or logical_dtype_name(arr) == "bfloat16":
        with np.errstate(invalid="ignore"):  # signalling NaNs become quiet NaNs; still NaN
            return arr.reshape(-1).astype(np.float64)
    f = get_format(fmt) if fmt != "bool" else None
    if isinstance(f, IntFormat) and f.bits <= 16:
        return f.values[to_storage(arr).reshape(-1).astype(np.int64)]
    if isinstance(f, FloatFormat) and f.bits <= 16 and f.emax < 1024 and f.emin - f.mantissa_bits >= -1074:
        return f.values[to_storage(arr).reshape(-1).astype(np.int64)]
    return None


def _cast_flags(case: Case, name: str) -> np.ndarray | None:
    """out_of_range / inexact / saturated bits of an element cast (family elements): the source value v (x, or
    the value of the input code for decode) against the result r (the expected code's or y's value) and the
    destination D (the code format for encode, the element format for quantize, y's dtype for decode), whose
    range [lo, hi] is [-max, max] (max: the largest finite value) for a float format and the integer range for
    an integer format: out_of_range: v finite and outside [lo, hi]; inexact: v not NaN and r != v (a NaN r
    counts); saturated: v > hi and r == hi, or v < lo and r == lo (infinite v included). None where values are
    not exact."""
    if case.family != "elements" or case.operation not in ("encode", "decode", "quantize"):
        return None
    src = "codes" if case.operation == "decode" else "x"
    if src not in case.inputs:
        return None
    x, r = case.inputs[src], case.expected[name]
    dest = _fmt_name(case, name, r) if case.operation != "quantize" else case.format["name"]
    d = get_format(dest) if dest != "bool" else None
    v, rv = _values(x, _fmt_name(case, src, x)), _values(r, _fmt_name(case, name, r))
    if v is None or rv is None or v.shape != rv.shape:
        return None
    if isinstance(d, FloatFormat):
        lo, hi = -float(d.max_value), float(d.max_value)
    elif isinstance(d, IntFormat):
        lo, hi = float(d.lo), float(d.hi)
    else:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        nan_in = np.isnan(v)
        oor = np.isfinite(v) & ((v < lo) | (v > hi))
        inexact = ~nan_in & (np.isnan(rv) | (rv != v))
        sat = ((v > hi) & (rv == hi)) | ((v < lo) & (rv == lo))
    out = np.zeros(v.shape, np.uint8)
    for m, bit in ((oor, 0x20), (inexact, 0x40), (sat, 0x80)):
        out[m] |= bit
    return out


def hex_flags(case: Case, name: str) -> np.ndarray:
    """The flags byte of every element of expected array ``name`` (C order; docs/vectors.md §8.1): 01
    unspecified (the case's mask), 02 nan / 04 inf / 08 zero / 10 subnormal (the class of the expected code in
    its float format; none for integer formats), 20 out_of_range / 40 inexact / 80 saturated (element casts
    only: _cast_flags)."""
    arr = case.expected[name]
    fmt = _fmt_name(case, name, arr)
    out = np.zeros(arr.size, np.uint8)
    f = get_format(fmt) if fmt != "bool" else None
    if isinstance(f, FloatFormat):
        w = _words(arr, f.bits, f"case {case.id} expected {name}")
        table = _class_table(fmt)
        out |= table[w.astype(np.int64)] if table is not None else _classify_words(w, f)
    cast = _cast_flags(case, name)
    if cast is not None:
        out |= cast
    m = case.unspecified.get(name)
    if m is not None:
        out[m.reshape(-1)] |= 0x01
    return out


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _ascii(text: str) -> str:
    return text.replace("\u00a7", "section ").encode("ascii", "backslashreplace").decode("ascii")


def _meta(case: Case, suite_name: str) -> list[str]:
    """key: value lines naming the case (shared by case.txt and every vector file's header)."""
    pol = " ".join(f"{k}={v}" for k, v in (case.policy or {}).items() if v is not None)
    def js(v: Any) -> str:
        return json.dumps(plain(v), sort_keys=True, separators=(",", ":"), ensure_ascii=True) if v else "-"
    return [
        f"case: {case.id}", f"suite: {suite_name or '-'}", f"family: {case.family}",
        f"operation: {case.operation}", f"format: {case.format['name'] if case.format else '-'}",
        f"policy: {pol or '-'}", f"scheme: {js(case.scheme)}", f"params: {js(case.params)}",
        f"profile: {case.profile or '-'}", f"profiles: {' '.join(case.profiles) or '-'}",
        f"spec: {_ascii('; '.join(case.spec)) or '-'}", f"description: {_ascii(case.description) or '-'}",
    ]


def _groups(case: Case) -> list[tuple[str, tuple[int, ...], list[tuple[str, str, np.ndarray]]]]:
    """(group name, shape, [(role, array name, array)]) per distinct array shape: inputs then expected, in the
    case's order. The group of the largest shape holding an input and an expected array is "elements"; each
    other group is named after its first array."""
    by: dict[tuple[int, ...], list[tuple[str, str, np.ndarray]]] = {}
    for role, arrays in (("in", case.inputs), ("exp", case.expected)):
        for k, a in arrays.items():
            by.setdefault(a.shape, []).append((role, k, a))
    both = [s for s, g in by.items() if {r for r, _, _ in g} == {"in", "exp"}]
    main = max(both, key=lambda s: int(np.prod(s)))  # first of the largest, in insertion order
    out = []
    for s, g in by.items():
        out.append(("elements" if s == main else g[0][1], s, g))
    return out


def case_dir(case_id: str) -> str:
    """The relative directory of a case in a hex export: its id, each path segment checked (no '.', '..')."""
    segs = case_id.split("/")
    if any(s in ("", ".", "..") or not _SEG_RE.match(s) for s in segs):
        raise QrefError(f"case id {case_id!r}: not usable as a directory (segments of letters, digits, _.:<>=+,@-)")
    return case_id


def to_hex(case: Case, suite_name: str = "") -> dict[str, bytes]:
    """The hex-vector files of one case (docs/vectors.md §8.1): relative file name -> bytes. ``case.txt`` (the
    sidecar: metadata, the vector files, every $readmemh file with its width), ``<group>.hex`` (TestFloat-style
    lines) and ``in.<name>.memh`` / ``exp.<name>.memh`` / ``unspec.<name>.memh`` (one word per line).
    A QrefError (saying why, hex_reason) for a case without an element-wise form."""
    why = hex_reason(case)
    if why is not None:
        raise QrefError(f"case {case.id}: no hex vectors: {why}")
    files: dict[str, bytes] = {}
    meta = _meta(case, suite_name)
    side = [f"# qref hex case {HEX_VERSION} (docs/vectors.md section 8.1)", *meta,
            "# vectors FILE GROUP LINES SHAPE COLUMNS", ]
    memh = ["# memh FILE ROLE ARRAY FORMAT BITS DIGITS WORDS SHAPE"]
    flag_legend = ", ".join(f"{b:02x} {n}" for b, n in HEX_FLAGS.items())
    for gname, shape, members in _groups(case):
        n = int(np.prod(shape))
        cols: list[HexColumn] = []
        chars: list[np.ndarray] = []
        flags: list[tuple[HexColumn, np.ndarray]] = []
        for role, name, arr in members:
            fmt = _fmt_name(case, name, arr)
            bits = _bits_of(fmt)
            col = HexColumn(role, name, fmt, bits, (bits + 3) // 4)
            w = _words(arr, bits, f"case {case.id} {role} {name}")
            c = _hex_chars(w, col.digits)
            cols.append(col)
            chars.append(c)
            files[f"{role}.{name}.memh"] = _text_rows([c], n)
            memh.append(f"memh {role}.{name}.memh {role} {name} {fmt} {bits} {col.digits} {n} "
                        f"{_shape_text(shape)}")
            if role == "exp":
                fl = hex_flags(case, name)
                flags.append((HexColumn("flags", name, "flags", 8, 2), _hex_chars(fl.astype(np.uint64), 2)))
                m = case.unspecified.get(name)
                if m is not None:
                    files[f"unspec.{name}.memh"] = _text_rows([_hex_chars(m.reshape(-1).astype(np.uint64), 1)], n)
                    memh.append(f"memh unspec.{name}.memh unspec {name} bool 1 1 {n} {_shape_text(shape)}")
        cols += [c for c, _ in flags]
        chars += [c for _, c in flags]
        head = [f"# qref hex vectors {HEX_VERSION} (docs/vectors.md section 8.1)", *(f"# {m}" for m in meta),
                f"# group: {gname}", f"# shape: {_shape_text(shape)}", f"# lines: {n}",
                *(c.header(k) for k, c in enumerate(cols, 1)), f"# flags: {flag_legend}"]
        body = _text_rows(chars, n) if n else b""
        files[f"{gname}.hex"] = ("\n".join(head) + "\n").encode("ascii") + body
        side.append(f"vectors {gname}.hex {gname} {n} {_shape_text(shape)} {len(cols)}")
    files["case.txt"] = ("\n".join(side + memh) + "\n").encode("ascii")
    return dict(sorted(files.items()))


def export_hex(cases: Iterable[Case], out: str | os.PathLike[str], suite_name: str = "",
               skipped: Counter[str] | None = None) -> list[Path]:
    """Write <out>/<case id>/ (to_hex) for every case with an element-wise form and <out>/index.txt (one line
    per case: "case ID" or "skip ID: REASON"); returns the case directories written. ``skipped`` (optional)
    counts the other cases by reason."""
    root = Path(out)
    written: list[Path] = []
    index: list[str] = []
    for case in cases:
        why = hex_reason(case)
        if why is not None:
            if skipped is not None:
                skipped[why] += 1
            index.append(f"skip {case.id}: {why}")
            continue
        d = _inside(root, case_dir(case.id))  # never written through a link
        d.mkdir(parents=True, exist_ok=True)
        for name, data in to_hex(case, suite_name).items():
            if (d / name).is_symlink():
                raise QrefError(f"{d / name} is a symbolic link; not written through")
            (d / name).write_bytes(data)
        written.append(d)
        index.append(f"case {case.id}")
    root.mkdir(parents=True, exist_ok=True)
    if (root / "index.txt").is_symlink():
        raise QrefError(f"{root / 'index.txt'} is a symbolic link; not written through")
    head = (f"# qref hex export {HEX_VERSION} (docs/vectors.md section 8.1): suite {suite_name or '-'}; "
            f"{len(written)} cases exported, {len(index) - len(written)} skipped")
    (root / "index.txt").write_bytes(("\n".join([head, *index]) + "\n").encode("ascii", "backslashreplace"))
    return written


@dataclass(frozen=True)
class HexVectors:
    """A parsed vector file: its header fields, columns and data rows (each a tuple of words as text)."""

    path: Path
    meta: Mapping[str, str]
    columns: tuple[HexColumn, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[int, ...]  # the file line number of each row

    @property
    def shape(self) -> tuple[int, ...]:
        s = self.meta.get("shape", "")
        return () if s == "scalar" else tuple(int(d) for d in s.split("x"))


@dataclass(frozen=True)
class HexMismatch:
    """One expected word the device got wrong: ``index`` is the element's C-order index in the case's array
    (``position`` its multi-index), ``file`` the results file's name, ``line`` its line."""

    case: str
    file: str
    line: int
    index: int
    position: tuple[int, ...]
    inputs: tuple[tuple[str, str], ...]
    column: str
    expected: str
    got: str
    flags: int

    def text(self) -> str:
        at = f" {list(self.position)}" if len(self.position) > 1 else ""
        ins = " ".join(f"{k}={v}" for k, v in self.inputs) or "-"
        names = ",".join(n for b, n in HEX_FLAGS.items() if self.flags & b) or "-"
        return (f"{self.case} {self.file} line {self.line}: element {self.index}{at}: inputs {ins}; "
                f"{self.column}: expected {self.expected} got {self.got}; flags {self.flags:02x} ({names})")


@dataclass
class HexReport:
    """The result of verify_hex: per compared file, counts; every mismatch."""

    files: list[str] = field(default_factory=list)
    compared: int = 0
    unspecified: int = 0
    mismatches: list[HexMismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.files) and not self.mismatches

    def summary(self) -> str:
        return (f"{len(self.files)} file(s), {self.compared} element(s) compared, {self.unspecified} unspecified "
                f"not compared, {len(self.mismatches)} mismatch(es)")


def _read_text(path: Path, where: str) -> str:
    """A regular file's text (ASCII), refused when it is a link, not a regular file or larger than 1 GiB."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise QrefError(f"{where}: {path} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise QrefError(f"{where}: {path} is a symbolic link; not followed")
    if not stat.S_ISREG(st.st_mode):
        raise QrefError(f"{where}: {path} is not a regular file")
    if st.st_size > _MAX_HEX_FILE:
        raise QrefError(f"{where}: {path} is {st.st_size} bytes, over the {_MAX_HEX_FILE}-byte limit")
    with open(path, "rb") as f:
        data = f.read(_MAX_HEX_FILE + 1)
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise QrefError(f"{where}: {path} byte {exc.start}: not ASCII text") from None


_COLUMN_RE = re.compile(r"^# column (\d+): (in|exp|flags) ([a-z_][a-z0-9_]*) (\S+) (\d+) (\d+)$")
_META_RE = re.compile(r"^# ([a-z_]+): (.*)$")


def read_hex_vectors(path: str | os.PathLike[str]) -> HexVectors:
    """Parse a reference vector file written by export_hex (header, columns, rows); a QrefError naming the line
    for anything malformed."""
    p = Path(path)
    text = _read_text(p, "vector file")
    meta: dict[str, str] = {}
    cols: list[HexColumn] = []
    rows: list[tuple[str, ...]] = []
    lines: list[int] = []
    first = True
    for ln, line in enumerate(text.split("\n"), 1):
        if first:
            if not line.startswith(f"# qref hex vectors {HEX_VERSION} "):
                raise QrefError(f"{p} line 1: not a qref hex vector file (version {HEX_VERSION})")
            first = False
            continue
        if line.startswith("#"):
            m = _COLUMN_RE.match(line)
            if m:
                k, role, name, fmt, bits, digits = m.groups()
                if int(k) != len(cols) + 1 or int(digits) != (int(bits) + 3) // 4 or not 1 <= int(bits) <= 64:
                    raise QrefError(f"{p} line {ln}: malformed column header {line!r}")
                cols.append(HexColumn(role, name, fmt, int(bits), int(digits)))
            elif (m := _META_RE.match(line)) is not None:
                meta.setdefault(m[1], m[2])
            continue
        if not line:
            continue
        rows.append(_fields(line, cols, p, ln, reference=True))
        lines.append(ln)
    if not cols or "case" not in meta or "lines" not in meta:
        raise QrefError(f"{p}: the header lacks its case, lines or column lines")
    if len(rows) != int(meta["lines"]):
        raise QrefError(f"{p}: {len(rows)} data lines, the header says {meta['lines']}")
    return HexVectors(p, meta, tuple(cols), tuple(rows), tuple(lines))


def _check_word(word: str, col: HexColumn, where: str, unknown_ok: bool) -> None:
    if len(word) != col.digits:
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: {len(word)} hex digits, the column has "
                        f"{col.digits} ({col.bits} bits)")
    if not set(word) <= _HEXCHARS:
        if unknown_ok and set(word) <= _HEXCHARS | _UNKNOWN:
            return
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: not hexadecimal")
    if int(word, 16) >> col.bits:
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: wider than {col.bits} bits")


def _fields(line: str, cols: list[HexColumn], p: Path, ln: int, reference: bool) -> tuple[str, ...]:
    """The words of one data line, checked against the columns; a results line may leave out the flags."""
    words = line.split()
    n_data = sum(c.role != "flags" for c in cols)
    if len(words) != len(cols) and (reference or len(words) != n_data):
        want = f"{len(cols)}" if reference else f"{n_data} (or {len(cols)} with the flags)"
        raise QrefError(f"{p} line {ln}: {len(words)} fields, expected {want}")
    for w, c in zip(words, cols):
        _check_word(w, c, f"{p} line {ln}", unknown_ok=not reference and c.role == "exp")
    return tuple(words)


def _unravel(i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(i, shape)) if shape else ()


def _compare(ref: HexVectors, got_rows: list[tuple[str, ...]], got_lines: list[int], results: Path,
             rel: str, report: HexReport, only: str | None = None) -> None:
    """Compare the expected columns (only ``only`` when given) of ``got_rows`` with the reference."""
    if len(got_rows) != len(ref.rows):
        raise QrefError(f"{results}: {len(got_rows)} data lines, the reference {ref.path} has {len(ref.rows)}")
    cols = ref.columns
    ins = [k for k, c in enumerate(cols) if c.role == "in"]
    flag_of = {c.name: k for k, c in enumerate(cols) if c.role == "flags"}
    exp = [k for k, c in enumerate(cols) if c.role == "exp" and (only is None or c.name == only)]
    case = ref.meta["case"]
    for i, (want, got, ln) in enumerate(zip(ref.rows, got_rows, got_lines)):
        if only is None:
            for k in ins:
                if int(got[k], 16) != int(want[k], 16):
                    raise QrefError(f"{results} line {ln}: input {cols[k].name} is {got[k]}, the reference has "
                                    f"{want[k]} (a results file keeps the reference's input columns and order)")
        for k in exp:
            g = got[k] if only is None else got[0]
            fl = int(want[flag_of[cols[k].name]], 16)
            if fl & _FLAG["unspecified"]:
                report.unspecified += 1
                continue
            report.compared += 1
            if set(g) & _UNKNOWN or int(g, 16) != int(want[k], 16):
                report.mismatches.append(HexMismatch(
                    case, Path(rel).name, ln, i, _unravel(i, ref.shape), tuple((cols[j].name, want[j]) for j in ins),
                    f"{cols[k].role} {cols[k].name}", want[k], g.lower(), fl))
    report.files.append(rel)


def _verify_hex_file(ref_path: Path, results: Path, rel: str, report: HexReport) -> None:
    ref = read_hex_vectors(ref_path)
    text = _read_text(results, "results file")
    rows, lines = [], []
    for ln, line in enumerate(text.split("\n"), 1):
        if line.startswith("# case: ") and line[8:].strip() != ref.meta["case"]:
            raise QrefError(f"{results} line {ln}: results of case {line[8:].strip()}, the reference {ref.path} is "
                            f"case {ref.meta['case']}")
        if line.startswith("#") or not line.strip():
            continue
        rows.append(_fields(line, list(ref.columns), results, ln, reference=False))
        lines.append(ln)
    _compare(ref, rows, lines, results, rel, report)


def _memh_source(ref_memh: Path) -> tuple[HexVectors, str]:
    """(the vector file holding the expected array of exp.<name>.memh, name), found through the case's
    case.txt."""
    m = re.match(r"^exp\.([a-z_][a-z0-9_]*)\.memh$", ref_memh.name)
    if m is None:
        raise QrefError(f"{ref_memh}: results in $readmemh form are compared against an exp.<array>.memh file")
    side = _read_text(ref_memh.parent / "case.txt", "case sidecar")
    for line in side.split("\n"):
        parts = line.split()
        if len(parts) == 6 and parts[0] == "vectors" and re.match(r"^[a-z_][a-z0-9_]*\.hex$", parts[1]):
            vec = read_hex_vectors(ref_memh.parent / parts[1])
            if any(c.role == "exp" and c.name == m[1] for c in vec.columns):
                return vec, m[1]
    raise QrefError(f"{ref_memh.parent / 'case.txt'}: no vector file lists the expected array {m[1]}")


def _verify_memh_file(ref_memh: Path, results: Path, rel: str, report: HexReport) -> None:
    ref, name = _memh_source(ref_memh)
    col = next(c for c in ref.columns if c.role == "exp" and c.name == name)
    text = _read_text(results, "results file")
    rows, lines = [], []
    for ln, line in enumerate(text.split("\n"), 1):
        word = line.strip()
        if not word:
            continue
        if word.startswith(("//", "@")):
            raise QrefError(f"{results} line {ln}: comments and @address records are not read; one word per line")
        _check_word(word, col, f"{results} line {ln}", unknown_ok=True)
        rows.append((word,))
        lines.append(ln)
    _compare(ref, rows, lines, results, rel, report, only=name)


def _is_results_name(name: str) -> bool:
    return name.endswith(".hex") or bool(re.match(r"^exp\.[a-z_][a-z0-9_]*\.memh$", name))


def _inside(root: Path, rel: str) -> Path:
    """root / rel, refused when any component is a symbolic link or the path leaves root."""
    p = root
    for part in Path(rel).parts:
        if part in ("..", ".") or os.path.isabs(part):
            raise QrefError(f"{rel}: not a path inside {root}")
        p = p / part
        if p.is_symlink():
            raise QrefError(f"{p} is a symbolic link; not followed")
    return p


def _walk(root: Path) -> Iterator[str]:
    """Relative paths of the result files under root, sorted; links are refused, not followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                raise QrefError(f"{os.path.join(dirpath, d)} is a symbolic link; not followed")
        for f in filenames:
            if _is_results_name(f):
                found.append(os.path.relpath(os.path.join(dirpath, f), root))
    yield from sorted(found)


def verify_hex(reference: str | os.PathLike[str], results: str | os.PathLike[str]) -> HexReport:
    """Compare a device's results with an export_hex reference (docs/vectors.md §8.1). Both paths are files, or
    both directories: then every ``*.hex`` and ``exp.<array>.memh`` file under ``results`` is compared with the
    file of the same relative path under ``reference``. A results ``.hex`` file keeps the reference's lines and
    input columns with the device's words in the expected columns (the flags may be left out); a results
    ``.memh`` file holds one word per line. Elements flagged unspecified are not compared; words with Verilog
    x/z digits are mismatches. Malformed input (wrong field count, width, line count, non-hex) is a QrefError."""
    ref, res = Path(reference), Path(results)
    report = HexReport()
    if res.is_dir() and not res.is_symlink():
        if not ref.is_dir() or ref.is_symlink():
            raise QrefError(f"{ref}: results {res} is a directory, so the reference must be the export directory")
        rels = list(_walk(res))
        if not rels:
            raise QrefError(f"{res}: no results files (*.hex or exp.<array>.memh) under it")
        pairs = [(_inside(ref, r), _inside(res, r), r) for r in rels]
    else:
        if ref.is_dir():
            raise QrefError(f"{ref}: results {res} is a file, so the reference must be a file too")
        pairs = [(ref, res, res.name)]
    for rp, gp, rel in pairs:
        if rp.name.endswith(".hex"):
            _verify_hex_file(rp, gp, rel, report)
        else:
            _verify_memh_file(rp, gp, rel, report)
    return report


__all__ = ["HEX_FLAGS", "HEX_OPERATIONS", "HEX_VERSION", "MLIR_TYPES", "HexColumn", "HexMismatch", "HexReport",
           "HexVectors", "NotExpressible", "case_dir", "export_hex", "export_jsonl", "export_mlir", "hex_flags",
           "hex_reason", "mlir_expressible", "mlir_reason", "read_hex_vectors", "returning_module", "to_hex",
           "to_jsonl", "to_mlir", "verify_hex"]
