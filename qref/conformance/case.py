"""The Case record: one operation on one category of inputs with its expected outputs (docs/vectors.md §2).

A case holds numpy arrays in their *logical* dtype (float64/32/16, bfloat16, bool, signed or unsigned integers);
the suite stores floats as unsigned bit patterns of the same width, so a file never needs a custom dtype. Codes
of an element format are unsigned integers; ``array_formats`` names the format of such arrays.

Everything else is JSON-able data: ``format`` (the element format record), ``policy`` (a *resolved* cast policy:
every knob explicit), ``scheme`` (``Scheme.to_spec()``), ``profile`` (the profile the case was built from),
``params`` (any other operation parameter), and the claims a consumer selects on: ``tags``, ``spec`` (the
sections of docs/spec/ the case checks), ``equivalent`` (policy overrides under which the same expected outputs
hold) and ``profiles`` (every profile under which they hold).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats.policy import CastPolicy, ResolvedPolicy

#: Logical dtype name -> storage dtype of its .npy file (floats as unsigned bit patterns, little-endian).
STORAGE: dict[str, str] = {
    "float64": "uint64", "float32": "uint32", "float16": "uint16", "bfloat16": "uint16", "bool": "bool",
    **{f"uint{b}": f"uint{b}" for b in (8, 16, 32, 64)},
    **{f"int{b}": f"int{b}" for b in (8, 16, 32, 64)},
}
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")

#: Standard tags (docs/vectors.md §2); families may add their own lower-case tags.
TAGS = ("tie", "boundary", "subnormal", "overflow", "underflow", "special", "random", "exhaustive", "stochastic",
        "values", "profile", "edge")
#: Operations used so far; new ones follow the same lower_snake_case pattern.
OPERATIONS = ("encode", "decode", "quantize", "dequantize", "uniform_quantize", "uniform_dequantize",
              "uniform_requantize",
              "block_quantize", "block_dequantize", "lookup_quantize", "lookup_dequantize", "pack", "unpack",
              "delayed_scaling", "scaled_qdq", "block_matmul", "qdq_matmul", "mma", "gemm", "tile_quantize",
              "stochastic_quantize", "hadamard", "uniform_calibrate")

ID_RE = re.compile(r"^[a-z][a-z0-9_]*(/[A-Za-z0-9_.:<>=+,@-]+)+$")
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
WORD_RE = re.compile(r"^[a-z][a-z0-9_]*$")
POLICY_KEYS = ("rounding", "overflow", "nan", "subnormals", "input_subnormals", "source", "stochastic_bits")


def logical_dtype_name(arr: np.ndarray) -> str:
    """The logical dtype name of an array, or a QrefError naming the allowed ones."""
    dt = arr.dtype
    name = "bfloat16" if dt == np.dtype(ml_dtypes.bfloat16) else dt.name
    if name not in STORAGE:
        raise QrefError(
            f"array dtype {dt} is not allowed in a conformance case; use float64/float32/float16/bfloat16, bool, "
            "or (u)int8..64 (codes of other formats are unsigned integers: arr.view(np.uint8))"
        )
    return name


def numpy_dtype(name: str) -> np.dtype:
    """numpy dtype of a logical dtype name."""
    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    if name not in STORAGE:
        raise QrefError(f"unknown array dtype {name!r}; known: {', '.join(STORAGE)}")
    return np.dtype(name)


def to_storage(arr: np.ndarray) -> np.ndarray:
    """The array as stored: floats viewed as unsigned bits of the same width, C order, little-endian."""
    name = logical_dtype_name(arr)
    out = np.ascontiguousarray(arr).view(np.dtype(STORAGE[name]))
    return out.astype(out.dtype.newbyteorder("<"), copy=False)


def from_storage(arr: np.ndarray, name: str) -> np.ndarray:
    """Inverse of to_storage: the logical-dtype view of stored bits."""
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("="), copy=False).view(numpy_dtype(name))


def format_record(fmt: Format | str) -> dict[str, Any]:
    """The defining fields of an element format (elements.md §1), enough to decode codes without qref."""
    f = get_format(fmt)
    if isinstance(f, IntFormat):
        return {"name": f.name, "kind": "int", "bits": f.bits, "signed": f.signed, "min": f.lo, "max": f.hi,
                "aliases": list(f.aliases)}
    assert isinstance(f, FloatFormat)
    return {"name": f.name, "kind": "float", "bits": f.bits, "exponent_bits": f.exponent_bits,
            "mantissa_bits": f.mantissa_bits, "bias": f.bias, "signed": f.signed, "subnormals": f.subnormals,
            "zero": f.zero, "nan": f.nan, "inf": f.inf, "aliases": list(f.aliases)}


def policy_record(policy: CastPolicy | ResolvedPolicy, fmt: Format | str) -> dict[str, Any]:
    """A cast policy with every knob explicit: the format defaults (overflow, nan) filled in (elements.md §2)."""
    rp = policy if isinstance(policy, ResolvedPolicy) else policy.resolve(get_format(fmt))
    p = rp.policy
    rec = {"rounding": p.rounding, "overflow": rp.overflow, "nan": rp.nan, "subnormals": p.subnormals,
           "input_subnormals": p.input_subnormals, "source": p.source, "stochastic_bits": p.stochastic_bits}
    if p.int_cast != "direct":  # recorded only when it is not the default, so other records stay as they were
        rec["int_cast"] = p.int_cast
    if p.unsigned_negative != "zero":  # likewise (elements.md §2.4 C7)
        rec["unsigned_negative"] = p.unsigned_negative
    if p.nan_code != "canonical":  # likewise (elements.md §2.7)
        rec["nan_code"] = p.nan_code
    if p.absent_zero != "nan":  # likewise (elements.md §2.7)
        rec["absent_zero"] = p.absent_zero
    if p.nan_payload != "canonical":  # likewise (elements.md §2.7)
        rec["nan_payload"] = p.nan_payload
    return rec


def _freeze(m: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(m or {}))


def _check_arrays(where: str, arrays: Mapping[str, Any]) -> Mapping[str, np.ndarray]:
    out = {}
    for name, a in arrays.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise QrefError(f"{where}: array name {name!r} must be lower_snake_case")
        arr = np.asarray(a)
        logical_dtype_name(arr)
        arr = np.ascontiguousarray(arr)
        arr.setflags(write=False)
        out[name] = arr
    return MappingProxyType(out)


@dataclass(frozen=True, eq=False)
class Case:
    """One conformance case (docs/vectors.md §2). Build with numpy arrays and qref objects; the constructor
    checks the fields and converts ``format`` (Format or name), ``policy`` (CastPolicy, resolved against
    ``format``) and ``scheme`` (a Scheme, via ``to_spec()``) to plain JSON-able dicts.

    id: "<family>/<...>", unique in the suite, stable across releases (e.g.
        "elements/float8_e4m3fn/f32/nearest_even/saturate/ties").
    family: the cases/<family>.py module that built it. operation: "encode", "decode", "block_quantize"...
    inputs / expected: name -> array. unspecified: expected-array name -> bool mask of elements whose result
        the spec leaves undefined (consumers skip them). array_formats: array name -> element format name of
        arrays holding codes.
    equivalent: policy overrides (e.g. {"overflow": "inf"}) under which every expected output is the same.
    profiles: every registered profile under which every expected output is the same.
    """

    id: str
    family: str
    operation: str
    inputs: Mapping[str, np.ndarray]
    expected: Mapping[str, np.ndarray]
    format: Any = None
    policy: Any = None
    scheme: Any = None
    profile: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    unspecified: Mapping[str, np.ndarray] = field(default_factory=dict)
    array_formats: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    spec: tuple[str, ...] = ()
    equivalent: tuple[Mapping[str, Any], ...] = ()
    profiles: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        where = f"case {self.id!r}"
        if not isinstance(self.id, str) or not ID_RE.match(self.id):
            raise QrefError(f"{where}: an id is '<family>/<part>/...' with letters, digits and _.:<>=+,- only")
        if not WORD_RE.match(str(self.family)) or not self.id.startswith(self.family + "/"):
            raise QrefError(f"{where}: the id must start with the family name {self.family!r} and a '/'")
        if not isinstance(self.operation, str) or not WORD_RE.match(self.operation):
            raise QrefError(f"{where}: operation must be lower_snake_case (e.g. {', '.join(OPERATIONS[:4])})")
        fmt = self.format
        if fmt is not None and not isinstance(fmt, Mapping):
            fmt = format_record(fmt)
            object.__setattr__(self, "format", fmt)
        pol = self.policy
        if isinstance(pol, (CastPolicy, ResolvedPolicy)):
            if fmt is None:
                raise QrefError(f"{where}: a CastPolicy is resolved against the case's format; give format=")
            pol = policy_record(pol, fmt["name"])
        elif pol is not None:
            pol = dict(pol)
            missing = [k for k in POLICY_KEYS if k not in pol]
            if missing:
                raise QrefError(f"{where}: policy lacks {missing}; pass a CastPolicy or a full resolved record")
        sch = self.scheme
        if sch is not None and not isinstance(sch, Mapping):
            to_spec = getattr(sch, "to_spec", None)
            if to_spec is None:
                raise QrefError(f"{where}: scheme must be a Scheme (with to_spec()) or its spec dict")
            sch = to_spec()
        object.__setattr__(self, "format", _freeze(fmt) if fmt is not None else None)
        object.__setattr__(self, "policy", _freeze(pol) if pol is not None else None)
        object.__setattr__(self, "scheme", _freeze(sch) if sch is not None else None)
        object.__setattr__(self, "params", _freeze(self.params))
        if not self.expected:
            raise QrefError(f"{where}: a case needs at least one expected output")
        object.__setattr__(self, "inputs", _check_arrays(where + " inputs", self.inputs))
        object.__setattr__(self, "expected", _check_arrays(where + " expected", self.expected))
        overlap = set(self.inputs) & set(self.expected)
        if overlap:
            raise QrefError(f"{where}: names {sorted(overlap)} are both inputs and expected outputs")
        unspec = _check_arrays(where + " unspecified", self.unspecified)
        for name, m in unspec.items():
            if name not in self.expected:
                raise QrefError(f"{where}: unspecified[{name!r}] has no expected array of that name")
            if m.dtype != np.bool_ or m.shape != self.expected[name].shape:
                raise QrefError(f"{where}: unspecified[{name!r}] must be a bool mask of shape "
                                f"{self.expected[name].shape}, got {m.dtype} {m.shape}")
        object.__setattr__(self, "unspecified", unspec)
        names = set(self.inputs) | set(self.expected)
        afm = dict(self.array_formats)
        for name, f in afm.items():
            if name not in names:
                raise QrefError(f"{where}: array_formats names {name!r}, which is not an input or output")
            arr = self.inputs.get(name, self.expected.get(name))
            if arr is None or arr.dtype.kind != "u":
                raise QrefError(f"{where}: {name!r} holds codes of {f}, so it must be an unsigned integer array")
            afm[name] = get_format(f).name
        object.__setattr__(self, "array_formats", MappingProxyType(afm))
        for t in self.tags:
            if not WORD_RE.match(t):
                raise QrefError(f"{where}: tag {t!r} must be lower_snake_case (standard tags: {', '.join(TAGS)})")
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "spec", tuple(self.spec))
        object.__setattr__(self, "equivalent", tuple(_freeze(e) for e in self.equivalent))
        object.__setattr__(self, "profiles", tuple(self.profiles))

    # ---- consumers ------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of elements of the first expected output."""
        return int(next(iter(self.expected.values())).size)

    def applies_to(self, policy: Mapping[str, Any]) -> bool:
        """True when every expected output holds under ``policy`` (a resolved policy record or a partial one):
        it equals this case's policy, or this policy with one of the ``equivalent`` overrides applied, on the
        keys ``policy`` gives."""
        if self.policy is None:
            return False
        for cand in (dict(self.policy), *({**self.policy, **e} for e in self.equivalent)):
            if all(cand.get(k) == v for k, v in policy.items()):
                return True
        return False

    def same_as(self, other: Case) -> bool:
        """Field-by-field equality with arrays compared as bit patterns."""
        def arrays_equal(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
            return a.keys() == b.keys() and all(
                a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                and np.array_equal(to_storage(a[k]), to_storage(b[k])) for k in a)

        scalars = ("id", "family", "operation", "profile", "tags", "spec", "profiles", "description")
        return (all(getattr(self, f) == getattr(other, f) for f in scalars)
                and all(plain(getattr(self, f)) == plain(getattr(other, f))
                        for f in ("format", "policy", "scheme", "params", "array_formats", "equivalent"))
                and arrays_equal(self.inputs, other.inputs) and arrays_equal(self.expected, other.expected)
                and arrays_equal(self.unspecified, other.unspecified))

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}:{v.dtype}{list(v.shape)}" for k, v in {**self.inputs, **self.expected}.items())
        return f"Case({self.id!r}, {self.operation}, {shapes})"


def expected_from_qarray(q: Any, *, code_format: str | None = None, scale_format: str | None = None
                         ) -> dict[str, dict[str, Any]]:
    """Case fields from a ``QArray`` (schemes.md): ``expected`` holds "codes" (signed integer codes become the
    unsigned storage bit patterns of ``code_format``'s width, e.g. int4 -8 -> 0x8), and "scales", "zero_points",
    "biases", "global_scale" where present; ``unspecified`` holds q.unspecified as the "codes" mask;
    ``array_formats`` names the element format of the codes (``code_format``) and of scale codes
    (``scale_format``, e.g. "float8_e8m0fnu").

        Case(id=..., family="block", operation="block_quantize", scheme=s, profile="ocp", inputs={"x": x},
             **expected_from_qarray(s.quantize(x), code_format="float4_e2m1fn", scale_format="float8_e8m0fnu"))
    """
    codes = np.asarray(q.codes)
    if codes.dtype.kind == "i":
        codes = codes.view(f"u{codes.dtype.itemsize}")
        if code_format is not None and get_format(code_format).bits < 8 * codes.itemsize:
            codes = codes & codes.dtype.type((1 << get_format(code_format).bits) - 1)
    expected: dict[str, Any] = {"codes": codes}
    for name in ("scales", "zero_points", "biases", "global_scale"):
        v = getattr(q, name, None)
        if v is not None:
            expected[name] = np.asarray(v)
    formats = {}
    if code_format is not None:
        formats["codes"] = code_format
    if scale_format is not None and "scales" in expected:
        formats["scales"] = scale_format
    unspec = {} if getattr(q, "unspecified", None) is None else {"codes": np.asarray(q.unspecified, dtype=bool)}
    return {"expected": expected, "unspecified": unspec, "array_formats": formats}


def plain(x: Any) -> Any:
    """Mappings and sequences as plain dicts/lists (for comparisons and JSON)."""
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


__all__ = ["FLOAT_DTYPES", "ID_RE", "NAME_RE", "OPERATIONS", "POLICY_KEYS", "STORAGE", "TAGS", "WORD_RE", "Case",
           "expected_from_qarray", "format_record", "from_storage", "logical_dtype_name", "numpy_dtype", "plain",
           "policy_record", "to_storage"]
