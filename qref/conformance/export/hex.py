"""Hex vectors export (docs/vectors.md §8.1), for RTL testbenches and C models: per case a directory with
TestFloat-style vector files (one line per element: input words, expected words, one flags byte per expected
word) and ``$readmemh`` files (one word per line). hex_verify.py reads a device's results back.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import QrefError
from ...formats import FloatFormat, IntFormat, get_format
from ..case import Case, logical_dtype_name, plain, to_storage

__all__ = ["HEX_FLAGS", "HEX_OPERATIONS", "HEX_VERSION", "HexColumn", "case_dir", "export_hex", "hex_flags",
           "hex_reason", "to_hex"]

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
    "uniform_calibrate": "a reduction: each scale and zero point depends on every element of its run's batches",
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
