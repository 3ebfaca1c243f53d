"""The manifest's JSON Schema (draft 2020-12) and its validator (docs/vectors.md §3, §3.2).

``SCHEMA`` is the interchange schema: ``qref gen`` writes it next to the manifest as ``schema.json`` (its bytes
are part of the committed suite). ``validate_manifest`` checks a parsed manifest with the ``jsonschema`` library
against ``SCHEMA`` *and* ``LOAD_RULES`` (the bounds a reader needs: safe relative paths in ``files``, at most
64-bit formats, known policy values, bounded shapes, nesting depth), then adds the checks a schema cannot
express (unique ids, storage dtype of each logical dtype, file names derived from the hash, format records equal
to qref's, policies and schemes that qref can rebuild, array sizes within ``MAX_ARRAY_BYTES``).
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import QrefError
from ..formats.policy import (
    ABSENT_ZERO,
    INT_CASTS,
    NAN_CODES,
    NAN_PAYLOADS,
    NAN_POLICIES,
    OVERFLOW_POLICIES,
    ROUNDING_MODES,
    UNSIGNED_NEGATIVE,
)
from .case import ID_RE, NAME_RE, POLICY_KEYS, STORAGE, WORD_RE

SCHEMA_VERSION = 1
SUITE_KIND = "qref-conformance"
SHA_RE = r"^[0-9a-f]{64}$"
FILE_RE = r"^arrays/[0-9a-f]{2}/[0-9a-f]{64}\.npy$"

_ARRAY = {
    "type": "object",
    "description": "One .npy file: 'file' (relative to the suite directory) holds 'storage' values of shape "
                   "'shape'; floats are stored as unsigned bit patterns of the same width.",
    "required": ["file", "sha256", "dtype", "storage", "shape"],
    "additionalProperties": False,
    "properties": {
        "file": {"type": "string", "pattern": FILE_RE},
        "sha256": {"type": "string", "pattern": SHA_RE},
        "dtype": {"enum": list(STORAGE)},
        "storage": {"enum": sorted(set(STORAGE.values()))},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "format": {"type": "string", "description": "element format of the codes this array holds"},
    },
}
_FORMAT = {
    "type": "object",
    "description": "The defining fields of an element format (elements.md §1): float formats give exponent_bits, "
                   "mantissa_bits, bias, signed, subnormals, zero, nan, inf; integer formats signed, min, max.",
    "required": ["name", "kind", "bits"],
    "properties": {
        "name": {"type": "string"}, "kind": {"enum": ["float", "int"]}, "bits": {"type": "integer", "minimum": 1},
        "exponent_bits": {"type": "integer", "minimum": 1}, "mantissa_bits": {"type": "integer", "minimum": 0},
        "bias": {"type": "integer"}, "signed": {"type": "boolean"}, "subnormals": {"type": "boolean"},
        "zero": {"type": "boolean"}, "nan": {"enum": ["ieee", "all_ones", "negative_zero", "none"]},
        "inf": {"enum": ["ieee", "top", "none"]}, "min": {"type": "integer"}, "max": {"type": "integer"},
        "aliases": {"type": "array", "items": {"type": "string"}},
    },
}
_ARRAYS = {"type": "object", "propertyNames": {"pattern": NAME_RE.pattern},
           "additionalProperties": {"$ref": "#/$defs/array"}}
_POLICY = {
    "type": ["object", "null"],
    "description": "A resolved cast policy (elements.md §2): every knob explicit.",
    "required": list(POLICY_KEYS),
    "additionalProperties": False,
    "properties": {
        "rounding": {"type": "string"}, "overflow": {"type": "string"}, "nan": {"type": "string"},
        "subnormals": {"enum": ["keep", "flush"]}, "input_subnormals": {"enum": ["keep", "zero"]},
        "source": {"enum": ["exact", "via_float32"]},
        "stochastic_bits": {"type": ["integer", "null"], "minimum": 1},
        "int_cast": {"type": "string", "description": "integer storage only, recorded when not 'direct' "
                                                      "(elements.md §2.9)"},
        "unsigned_negative": {"enum": list(UNSIGNED_NEGATIVE), "description": "unsigned formats, recorded when "
                                                                             "not 'zero' (elements.md §2.4)"},
        "nan_code": {"enum": list(NAN_CODES), "description": "recorded when not 'canonical' (elements.md §2.7)"},
        "absent_zero": {"enum": list(ABSENT_ZERO), "description": "formats without zero, recorded when not 'nan' "
                                                                 "(elements.md §2.7)"},
        "nan_payload": {"enum": list(NAN_PAYLOADS), "description": "recorded when not 'canonical' "
                                                                  "(elements.md §2.7)"},
    },
}
_CASE = {
    "type": "object",
    "required": ["id", "family", "operation", "format", "policy", "scheme", "profile", "params", "inputs",
                 "expected", "unspecified", "tags", "spec", "equivalent", "profiles", "description"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": ID_RE.pattern},
        "family": {"type": "string", "pattern": WORD_RE.pattern},
        "operation": {"type": "string", "pattern": WORD_RE.pattern},
        "format": {"type": ["string", "null"], "description": "a key of manifest.formats"},
        "policy": {"$ref": "#/$defs/policy"},
        "scheme": {"type": ["object", "null"]},
        "profile": {"type": ["string", "null"]},
        "params": {"type": "object"},
        "inputs": {"$ref": "#/$defs/arrays"},
        "expected": {"$ref": "#/$defs/arrays", "minProperties": 1},
        "unspecified": {"$ref": "#/$defs/arrays"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": WORD_RE.pattern}},
        "spec": {"type": "array", "items": {"type": "string"}},
        "equivalent": {"type": "array", "items": {"type": "object"}},
        "profiles": {"type": "array", "items": {"type": "string"}},
        "description": {"type": "string"},
    },
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://qref.invalid/conformance/manifest-v1.schema.json",
    "title": "qref conformance suite manifest",
    "description": "manifest.json of a qref conformance suite (docs/vectors.md).",
    "type": "object",
    "required": ["suite", "schema_version", "name", "generator", "families", "formats", "files", "summary",
                 "cases"],
    "additionalProperties": False,
    "properties": {
        "suite": {"const": SUITE_KIND},
        "schema_version": {"const": SCHEMA_VERSION},
        "name": {"type": "string"},
        "generator": {"type": "object", "required": ["tool", "families", "full"],
                      "properties": {"tool": {"type": "string"}, "full": {"type": "boolean"},
                                     "families": {"type": "array", "items": {"type": "string"}}}},
        "families": {"type": "array", "items": {"type": "string", "pattern": WORD_RE.pattern}},
        "formats": {"type": "object", "additionalProperties": {"$ref": "#/$defs/format"}},
        "files": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["sha256"], "properties": {"sha256": {"type": "string", "pattern": SHA_RE}}}},
        "summary": {"type": "object", "required": ["cases", "arrays", "bytes"],
                    "properties": {k: {"type": "integer", "minimum": 0} for k in ("cases", "arrays", "bytes")}},
        "cases": {"type": "array", "items": {"$ref": "#/$defs/case"}},
    },
    "$defs": {"array": _ARRAY, "arrays": _ARRAYS, "format": _FORMAT, "policy": _POLICY, "case": _CASE},
}

#: Reader bounds (docs/vectors.md §3.2). A manifest or file beyond them is refused before it is read or allocated.
MAX_DEPTH = 32                  # JSON nesting depth of manifest.json (the suite's own manifests reach 6)
MAX_MANIFEST_BYTES = 1 << 30    # manifest.json size
MAX_ARRAY_BYTES = 1 << 30       # one .npy file's data (prod(shape) * itemsize)
MAX_RANK = 32                   # numpy's own limit is 64
MAX_BITS = 64                   # element formats of at most 64 bits
#: A path inside the suite: '/'-separated names of letters, digits and _.- that do not start with '.' (so no
#: '..', no hidden names, no absolute paths, no drive letters or backslashes).
SAFE_PATH_RE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}){0,7}$"

#: Constraints a reader adds to SCHEMA (merged into a copy for validation; schema.json stays byte-stable).
LOAD_RULES: dict[str, Any] = {
    "properties": {
        "files": {"propertyNames": {"pattern": SAFE_PATH_RE}, "maxProperties": 1024},
    },
    "$defs": {
        "array": {"properties": {"shape": {"maxItems": MAX_RANK, "items": {"maximum": MAX_ARRAY_BYTES}}}},
        "format": {"properties": {
            "bits": {"maximum": MAX_BITS}, "exponent_bits": {"maximum": MAX_BITS},
            "mantissa_bits": {"maximum": MAX_BITS}, "bias": {"minimum": -(1 << 20), "maximum": 1 << 20},
            "min": {"minimum": -(1 << 64), "maximum": 1 << 64}, "max": {"minimum": -(1 << 64), "maximum": 1 << 64},
            "name": {"maxLength": 200}}},
        "policy": {"properties": {
            "rounding": {"enum": list(ROUNDING_MODES)}, "overflow": {"enum": list(OVERFLOW_POLICIES)},
            "nan": {"enum": list(NAN_POLICIES)}, "stochastic_bits": {"maximum": 32},
            "int_cast": {"enum": list(INT_CASTS)}}},
    },
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = _merge(SCHEMA, LOAD_RULES)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def json_depth(obj: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), counted iteratively; stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            d += 1
            deepest = max(deepest, d)
            if d > limit:
                return d
            stack.extend((x, d) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _where(path: Any) -> str:
    out = "manifest"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _schema_problems(m: Any, limit: int) -> list[str]:
    out = []
    errors: Iterator[Any] = _validator().iter_errors(m)
    for e in errors:
        msg = e.message if len(e.message) <= 300 else e.message[:300] + "..."
        if e.validator == "pattern" and e.validator_value == SAFE_PATH_RE:
            msg = (f"{e.instance!r} is not a path inside the suite (relative, '/'-separated names of letters, "
                   "digits and _.- not starting with '.': no '..', no absolute paths)")
        out.append(f"{_where(e.absolute_path)}: {msg}")
        if len(out) >= limit:
            break
    return sorted(out)


@functools.lru_cache(maxsize=4096)
def _format_problem(text: str) -> str | None:
    from ..formats import get_format

    rec = json.loads(text)
    try:
        f = get_format(rec["name"])
    except QrefError:
        f = None
    if f is not None:
        from .case import format_record

        want = {k: v for k, v in format_record(f).items() if k != "aliases"}
        got = {k: v for k, v in rec.items() if k != "aliases"}
        if f.name == rec["name"] and got != want:
            diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            return f"the record of {rec['name']} differs from qref's in {', '.join(diff)}"
        return None
    if rec["kind"] == "float":
        need = ("exponent_bits", "mantissa_bits", "bias", "signed", "subnormals", "zero", "nan", "inf")
        missing = [k for k in need if k not in rec]
        if missing:
            return f"a float format record needs {', '.join(missing)}"
        if rec["bits"] != rec["exponent_bits"] + rec["mantissa_bits"] + int(rec["signed"]):
            return "bits must equal exponent_bits + mantissa_bits + (1 if signed)"
        return None
    missing = [k for k in ("signed", "min", "max") if k not in rec]
    if missing:
        return f"an integer format record needs {', '.join(missing)}"
    lo, hi = (-(1 << (rec["bits"] - 1)), (1 << (rec["bits"] - 1)) - 1) if rec["signed"] else (0, (1 << rec["bits"]) - 1)
    if not lo <= rec["min"] <= rec["max"] <= hi:
        return f"min/max must satisfy {lo} <= min <= max <= {hi} for {rec['bits']}-bit storage"
    return None


@functools.lru_cache(maxsize=4096)
def _policy_problem(text: str, fmt_name: str | None) -> str | None:
    from ..formats import get_format
    from ..formats.policy import CastPolicy
    from .case import policy_record

    rec = json.loads(text)
    try:
        pol = CastPolicy(**rec)
        if fmt_name is not None:
            f = get_format(fmt_name)
            again = policy_record(pol, f)
            if again != rec:
                diff = sorted(k for k in rec if again.get(k) != rec.get(k))
                return f"resolves differently for {f.name} in {', '.join(diff)}"
    except QrefError as exc:
        return str(exc)
    return None


@functools.lru_cache(maxsize=4096)
def _scheme_problem(text: str) -> str | None:
    from ..schemes.base import scheme_from_spec

    try:
        scheme_from_spec(json.loads(text))
    except QrefError as exc:
        return f"qref cannot rebuild the scheme: {exc}"
    except (TypeError, KeyError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        return f"qref cannot rebuild the scheme: {type(exc).__name__}: {exc}"
    return None


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def validate_manifest(m: Any, limit: int = 50) -> list[str]:
    """Problems of a parsed manifest against SCHEMA + LOAD_RULES (jsonschema) and the cross-field and semantic
    rules of docs/vectors.md §3.2; [] when valid."""
    if isinstance(m, dict) and m.get("suite") == SUITE_KIND and m.get("schema_version") != SCHEMA_VERSION:
        return [f"manifest: schema_version {m.get('schema_version')!r} is not supported by this qref (reads "
                f"version {SCHEMA_VERSION}); use the qref release that wrote the suite"]
    depth = json_depth(m)
    if depth > MAX_DEPTH:
        return [f"manifest: nested more than {MAX_DEPTH} levels deep (a qref manifest needs about 6)"]
    out = _schema_problems(m, limit)
    if out:
        return out
    for name, rec in m["formats"].items():
        if rec["name"] != name:
            out.append(f"manifest.formats.{name}: the record names {rec['name']!r}")
        problem = _format_problem(_canon(rec))
        if problem:
            out.append(f"manifest.formats.{name}: {problem}")
    seen: set[str] = set()
    for i, c in enumerate(m["cases"]):
        where = f"manifest.cases[{i}] ({c['id']})"
        if c["id"] in seen:
            out.append(f"{where}: duplicate id")
        seen.add(c["id"])
        if not c["id"].startswith(c["family"] + "/"):
            out.append(f"{where}: id must start with the family {c['family']!r}")
        if c["format"] is not None and c["format"] not in m["formats"]:
            out.append(f"{where}: format {c['format']!r} is not in manifest.formats")
        if c["family"] not in m["families"]:
            out.append(f"{where}: family {c['family']!r} is not listed in manifest.families")
        if c["policy"] is not None:
            fmt = c["format"] if c["format"] in m["formats"] and "name" in m["formats"][c["format"]] else None
            known = fmt is not None and _format_problem(_canon(m["formats"][fmt])) is None
            problem = _policy_problem(_canon(c["policy"]), m["formats"][fmt]["name"] if known else None)
            if problem:
                out.append(f"{where}.policy: {problem}")
        if c["scheme"] is not None:
            problem = _scheme_problem(_canon(c["scheme"]))
            if problem:
                out.append(f"{where}.scheme: {problem}")
        for group in ("inputs", "expected", "unspecified"):
            for name, a in c[group].items():
                if STORAGE[a["dtype"]] != a["storage"]:
                    out.append(f"{where}.{group}.{name}: dtype {a['dtype']} is stored as {STORAGE[a['dtype']]}, "
                               f"not {a['storage']}")
                if "format" in a and a["format"] not in m["formats"]:
                    out.append(f"{where}.{group}.{name}: format {a['format']!r} is not in manifest.formats")
                if a["file"] != f"arrays/{a['sha256'][:2]}/{a['sha256']}.npy":
                    out.append(f"{where}.{group}.{name}: file name must be arrays/<sha256[:2]>/<sha256>.npy")
                nbytes = math.prod(a["shape"]) * np.dtype(a["storage"]).itemsize
                if nbytes > MAX_ARRAY_BYTES:
                    out.append(f"{where}.{group}.{name}: shape {a['shape']} is {nbytes} bytes, above the "
                               f"{MAX_ARRAY_BYTES}-byte limit of one array")
        for name, a in c["unspecified"].items():
            if name not in c["expected"]:
                out.append(f"{where}.unspecified.{name}: no expected array of that name")
            elif a["dtype"] != "bool" or a["shape"] != c["expected"][name]["shape"]:
                out.append(f"{where}.unspecified.{name}: must be a bool mask shaped like expected.{name}")
        if len(out) >= limit:
            break
    return out


__all__ = ["FILE_RE", "LOAD_RULES", "MAX_ARRAY_BYTES", "MAX_BITS", "MAX_DEPTH", "MAX_MANIFEST_BYTES", "MAX_RANK",
           "SAFE_PATH_RE", "SCHEMA", "SCHEMA_VERSION", "SHA_RE", "SUITE_KIND", "json_depth", "validate_manifest"]
