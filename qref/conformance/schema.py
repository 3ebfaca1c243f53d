"""The manifest's JSON Schema (draft 2020-12) and a dependency-free validator for it (docs/vectors.md §3).

``SCHEMA`` is the single source of truth: ``qref gen`` writes it next to the manifest as ``schema.json``, and
``validate_manifest`` interprets the subset of JSON Schema it uses (type, const, enum, pattern, minimum,
properties, required, additionalProperties, items, minItems, $ref into $defs), then adds the checks a schema
cannot express (unique ids, storage dtype of each logical dtype, file names derived from the hash).
"""

from __future__ import annotations

import re
from typing import Any

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

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _validate(v: Any, s: dict[str, Any], path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        _validate(v, SCHEMA["$defs"][name], path, out, limit)
        s = {k: x for k, x in s.items() if k != "$ref"}
    if "const" in s and v != s["const"]:
        out.append(f"{path}: expected {s['const']!r}, got {v!r}")
        return
    if "enum" in s and v not in s["enum"]:
        out.append(f"{path}: {v!r} is not one of {s['enum']}")
        return
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_TYPES[t](v) for t in types):
            out.append(f"{path}: expected {' or '.join(types)}, got {type(v).__name__} {str(v)[:60]!r}")
            return
    if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
        out.append(f"{path}: {v!r} does not match {s['pattern']}")
    if isinstance(v, int) and not isinstance(v, bool) and "minimum" in s and v < s["minimum"]:
        out.append(f"{path}: {v} is below the minimum {s['minimum']}")
    if isinstance(v, dict):
        for k in s.get("required", ()):
            if k not in v:
                out.append(f"{path}: missing required key {k!r}")
        if len(v) < s.get("minProperties", 0):
            out.append(f"{path}: needs at least {s['minProperties']} entr{'y' if s['minProperties'] == 1 else 'ies'}")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        names = s.get("propertyNames")
        for k, x in v.items():
            if names is not None and not re.search(names["pattern"], k):
                out.append(f"{path}: key {k!r} does not match {names['pattern']}")
            if k in props:
                _validate(x, props[k], f"{path}.{k}", out, limit)
            elif extra is False:
                out.append(f"{path}: unknown key {k!r} (allowed: {', '.join(props)})")
            elif isinstance(extra, dict):
                _validate(x, extra, f"{path}.{k}", out, limit)
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            _validate(x, s["items"], f"{path}[{i}]", out, limit)


def validate_manifest(m: Any, limit: int = 50) -> list[str]:
    """Problems of a parsed manifest against SCHEMA plus the cross-field rules; [] when valid."""
    out: list[str] = []
    if isinstance(m, dict) and m.get("suite") == SUITE_KIND and m.get("schema_version") != SCHEMA_VERSION:
        return [f"manifest: schema_version {m.get('schema_version')!r} is not supported by this qref (reads "
                f"version {SCHEMA_VERSION}); use the qref release that wrote the suite"]
    _validate(m, SCHEMA, "manifest", out, limit)
    if out:
        return out
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
        for group in ("inputs", "expected", "unspecified"):
            for name, a in c[group].items():
                if STORAGE[a["dtype"]] != a["storage"]:
                    out.append(f"{where}.{group}.{name}: dtype {a['dtype']} is stored as {STORAGE[a['dtype']]}, "
                               f"not {a['storage']}")
                if "format" in a and a["format"] not in m["formats"]:
                    out.append(f"{where}.{group}.{name}: format {a['format']!r} is not in manifest.formats")
                if a["file"] != f"arrays/{a['sha256'][:2]}/{a['sha256']}.npy":
                    out.append(f"{where}.{group}.{name}: file name must be arrays/<sha256[:2]>/<sha256>.npy")
        for name, a in c["unspecified"].items():
            if name not in c["expected"]:
                out.append(f"{where}.unspecified.{name}: no expected array of that name")
            elif a["dtype"] != "bool" or a["shape"] != c["expected"][name]["shape"]:
                out.append(f"{where}.unspecified.{name}: must be a bool mask shaped like expected.{name}")
        if len(out) >= limit:
            break
    return out
