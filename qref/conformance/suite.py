"""Suites on disk: write, load and verify (docs/vectors.md §3).

A suite is a directory:

    manifest.json                 cases, array references, sha256 of every file (sorted keys, no timestamps)
    schema.json                   the JSON Schema of manifest.json
    arrays/<h[:2]>/<h>.npy        one plain .npy per distinct array, named by the sha256 h of its bytes

Arrays are content-addressed, so identical inputs shared by many cases are stored once and a suite's bytes
depend only on its cases.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import QrefError, unknown_name
from .case import STORAGE, Case, _plain, format_record, from_storage, logical_dtype_name, to_storage
from .npy import npy_bytes, read_npy
from .schema import SCHEMA, SCHEMA_VERSION, SUITE_KIND, validate_manifest


class SuiteError(QrefError):
    """A suite that cannot be read: missing file, hash mismatch, malformed manifest, unknown schema version."""


def dumps_json(obj: Any) -> str:
    """JSON text of the schema: sorted keys, one-space indent, ASCII, trailing newline (byte-stable)."""
    return json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def _compact(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def dumps_manifest(m: Mapping[str, Any]) -> str:
    """The manifest's JSON text: sorted keys, one case (one format, one file) per line, ASCII, no timestamps;
    byte-stable and diff-friendly (a changed case is a changed line)."""
    lines = ["{"]
    keys = sorted(m)
    for n, k in enumerate(keys):
        v = m[k]
        end = "," if n < len(keys) - 1 else ""
        if isinstance(v, list) and v:
            items = ",\n".join("  " + _compact(x) for x in v)
            lines.append(f" {_compact(k)}: [\n{items}\n ]{end}")
        elif isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            items = ",\n".join(f"  {_compact(kk)}: {_compact(v[kk])}" for kk in sorted(v))
            lines.append(f" {_compact(k)}: {{\n{items}\n }}{end}")
        else:
            lines.append(f" {_compact(k)}: {_compact(v)}{end}")
    return "\n".join(lines) + "\n}\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------------------
class SuiteWriter:
    """Streams cases into a directory; ``close()`` writes manifest.json and schema.json."""

    def __init__(self, out: str | os.PathLike[str], *, name: str = "v1", families: Iterable[str] = (),
                 full: bool = False, overwrite: bool = False) -> None:
        self.out = Path(out)
        self.name = name
        self.families = list(families)
        self.full = full
        self._prepare(overwrite)
        self.cases: list[dict[str, Any]] = []
        self.formats: dict[str, dict[str, Any]] = {}
        self.ids: set[str] = set()
        self.arrays: dict[str, int] = {}

    def _prepare(self, overwrite: bool) -> None:
        out = self.out
        if out.exists() and not out.is_dir():
            raise SuiteError(f"{out} exists and is not a directory")
        if out.exists() and any(out.iterdir()):
            if not overwrite:
                raise SuiteError(f"{out} is not empty; pass overwrite=True (qref gen --force) to replace a suite")
            manifest = out / "manifest.json"
            unknown = sorted(p.name for p in out.iterdir() if p.name not in ("manifest.json", "schema.json", "arrays"))
            if not manifest.exists() or unknown:
                raise SuiteError(
                    f"refusing to overwrite {out}: it is not a qref suite"
                    + (f" (it holds {', '.join(unknown[:5])})" if unknown else " (no manifest.json)")
                )
            shutil.rmtree(out / "arrays", ignore_errors=True)
            manifest.unlink()
            (out / "schema.json").unlink(missing_ok=True)
        (out / "arrays").mkdir(parents=True, exist_ok=True)

    def _array(self, arr: np.ndarray, fmt: str | None) -> dict[str, Any]:
        data = npy_bytes(to_storage(arr))
        h = sha256(data)
        rel = f"arrays/{h[:2]}/{h}.npy"
        if h not in self.arrays:
            path = self.out / rel
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            self.arrays[h] = len(data)
        dtype = logical_dtype_name(arr)
        ref: dict[str, Any] = {"file": rel, "sha256": h, "dtype": dtype, "storage": STORAGE[dtype],
                               "shape": [int(s) for s in arr.shape]}
        if fmt is not None:
            ref["format"] = fmt
            self.formats.setdefault(fmt, format_record(fmt))
        return ref

    def add(self, case: Case) -> None:
        if case.id in self.ids:
            raise SuiteError(f"duplicate case id {case.id!r}")
        if self.families and case.family not in self.families:
            raise SuiteError(f"case {case.id!r} belongs to family {case.family!r}, not one of {self.families}")
        self.ids.add(case.id)
        fm = case.array_formats

        def refs(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
            return {k: self._array(v, fm.get(k)) for k, v in arrays.items()}

        fmt_name = None
        if case.format is not None:
            rec = _plain(case.format)
            fmt_name = rec["name"]
            if self.formats.setdefault(fmt_name, rec) != rec:
                raise SuiteError(f"case {case.id!r}: format {fmt_name!r} has a record that differs from an "
                                 "earlier case's")
        self.cases.append({
            "id": case.id, "family": case.family, "operation": case.operation,
            "format": fmt_name, "policy": _plain(case.policy), "scheme": _plain(case.scheme),
            "profile": case.profile, "params": _plain(case.params),
            "inputs": refs(case.inputs), "expected": refs(case.expected), "unspecified": refs(case.unspecified),
            "tags": list(case.tags), "spec": list(case.spec), "equivalent": _plain(case.equivalent),
            "profiles": list(case.profiles), "description": case.description,
        })

    def close(self) -> dict[str, Any]:
        schema_text = dumps_json(SCHEMA).encode("ascii")
        (self.out / "schema.json").write_bytes(schema_text)
        families = self.families or sorted({c["family"] for c in self.cases})
        manifest = {
            "suite": SUITE_KIND, "schema_version": SCHEMA_VERSION, "name": self.name,
            "generator": {"tool": "qref gen", "families": families, "full": self.full},
            "families": families,
            "formats": self.formats,
            "files": {"schema.json": {"sha256": sha256(schema_text)}},
            "summary": {"cases": len(self.cases), "arrays": len(self.arrays), "bytes": sum(self.arrays.values())},
            "cases": self.cases,
        }
        problems = validate_manifest(manifest)
        if problems:
            raise SuiteError("the generated manifest is invalid:\n  " + "\n  ".join(problems))
        (self.out / "manifest.json").write_bytes(dumps_manifest(manifest).encode("ascii"))
        return manifest


def write_suite(cases: Iterable[Case], out: str | os.PathLike[str], *, name: str = "v1",
                families: Iterable[str] = (), full: bool = False, overwrite: bool = False,
                on_case: Callable[[Case], None] | None = None) -> dict[str, Any]:
    """Write ``cases`` as a suite directory ``out`` and return the manifest (see module docstring)."""
    w = SuiteWriter(out, name=name, families=families, full=full, overwrite=overwrite)
    for c in cases:
        w.add(c)
        if on_case is not None:
            on_case(c)
    return w.close()


# ---------------------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------------------
def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and validate ``<suite>/manifest.json``; SuiteError with every problem found."""
    root = Path(path)
    mpath = root / "manifest.json" if root.is_dir() or not root.name.endswith(".json") else root
    if not mpath.exists():
        raise SuiteError(f"{mpath}: missing; a suite directory holds manifest.json (make one with `qref gen DIR`)")
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{mpath}: malformed manifest, not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{mpath}: malformed manifest, invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    if not isinstance(m, dict) or m.get("suite") != SUITE_KIND:
        raise SuiteError(f"{mpath}: malformed manifest, not a qref conformance manifest "
                         f"(expected \"suite\": \"{SUITE_KIND}\")")
    if m.get("schema_version") != SCHEMA_VERSION:
        raise SuiteError(f"{mpath}: schema_version {m.get('schema_version')!r} is not supported by this qref (it "
                         f"reads version {SCHEMA_VERSION}); use the qref release that wrote the suite")
    problems = validate_manifest(m)
    if problems:
        raise SuiteError(f"{mpath}: malformed manifest:\n  " + "\n  ".join(problems))
    return m


@dataclass
class Suite:
    """A loaded suite: iterate it for Cases (arrays read lazily, each file's sha256 checked when read)."""

    root: Path
    manifest: dict[str, Any]
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._index = {c["id"]: i for i, c in enumerate(self.manifest["cases"])}

    @property
    def ids(self) -> list[str]:
        return [c["id"] for c in self.manifest["cases"]]

    def __len__(self) -> int:
        return len(self.manifest["cases"])

    def __iter__(self) -> Iterator[Case]:
        for entry in self.manifest["cases"]:
            yield self._case(entry)

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._index

    def __getitem__(self, case_id: str) -> Case:
        if case_id not in self._index:
            raise unknown_name("case id", case_id, self._index, hint=f"suite {self.root}")
        return self._case(self.manifest["cases"][self._index[case_id]])

    def entry(self, case_id: str) -> dict[str, Any]:
        """The raw manifest entry of a case."""
        if case_id not in self._index:
            raise unknown_name("case id", case_id, self._index, hint=f"suite {self.root}")
        return self.manifest["cases"][self._index[case_id]]

    def select(self, pattern: str | None = None, *, family: str | None = None, operation: str | None = None,
               format: str | None = None, tags: Iterable[str] = (), policy: Mapping[str, Any] | None = None,
               profile: str | None = None) -> Iterator[Case]:
        """Cases whose id matches the glob ``pattern`` and the given fields: ``tags`` all present, ``policy``
        (possibly partial) satisfied directly or through an ``equivalent`` override, ``profile`` among the
        case's ``profiles``."""
        want_tags = set(tags)
        for entry in self.manifest["cases"]:
            if pattern is not None and not fnmatch.fnmatchcase(entry["id"], pattern):
                continue
            if family is not None and entry["family"] != family:
                continue
            if operation is not None and entry["operation"] != operation:
                continue
            if format is not None and entry["format"] != format:
                continue
            if not want_tags <= set(entry["tags"]):
                continue
            if profile is not None and profile not in entry["profiles"]:
                continue
            if policy is not None and not _applies(entry, policy):
                continue
            yield self._case(entry)

    def read_array(self, ref: Mapping[str, Any], where: str = "") -> np.ndarray:
        """The logical-dtype array of a manifest array reference, after checking the file's sha256."""
        path = self.root / ref["file"]
        where = where or ref["file"]
        if not path.exists():
            raise SuiteError(f"{where}: file {ref['file']} is missing from {self.root}")
        data = path.read_bytes()
        got = sha256(data)
        if got != ref["sha256"]:
            raise SuiteError(f"{where}: sha256 mismatch for {ref['file']}: manifest {ref['sha256'][:16]}..., "
                             f"file {got[:16]}... (the file was modified or corrupted; regenerate or re-download)")
        arr = read_npy(data, f"{where} ({ref['file']})")
        if arr.dtype != np.dtype(ref["storage"]) or list(arr.shape) != list(ref["shape"]):
            raise SuiteError(f"{where}: {ref['file']} holds {arr.dtype}{list(arr.shape)}, the manifest says "
                             f"{ref['storage']}{ref['shape']}")
        return from_storage(arr, ref["dtype"])

    def _case(self, entry: Mapping[str, Any]) -> Case:
        cid = entry["id"]

        def arrays(group: str) -> dict[str, np.ndarray]:
            return {k: self.read_array(r, f"case {cid} {group}.{k}") for k, r in entry[group].items()}

        fm = {k: r["format"] for g in ("inputs", "expected") for k, r in entry[g].items() if "format" in r}
        return Case(
            id=cid, family=entry["family"], operation=entry["operation"], inputs=arrays("inputs"),
            expected=arrays("expected"),
            format=None if entry["format"] is None else self.manifest["formats"][entry["format"]],
            policy=entry["policy"], scheme=entry["scheme"],
            profile=entry["profile"], params=entry["params"], unspecified=arrays("unspecified"),
            array_formats=fm, tags=tuple(entry["tags"]), spec=tuple(entry["spec"]),
            equivalent=tuple(entry["equivalent"]), profiles=tuple(entry["profiles"]),
            description=entry["description"],
        )


def _applies(entry: Mapping[str, Any], policy: Mapping[str, Any]) -> bool:
    base = entry["policy"]
    if base is None:
        return False
    return any(all(c.get(k) == v for k, v in policy.items())
               for c in (base, *({**base, **e} for e in entry["equivalent"])))


def load_suite(path: str | os.PathLike[str] | None = None) -> Suite:
    """Open a suite directory (default: the committed corpus, see ``default_suite_path``); arrays are read and
    hash-checked lazily as cases are accessed. Raises SuiteError for a missing or malformed manifest or an
    unknown schema version."""
    root = Path(path) if path is not None else default_suite_path()
    if not root.is_dir():
        raise SuiteError(f"{root}: not a directory; a suite is a directory with manifest.json")
    return Suite(root, read_manifest(root))


def default_suite_path() -> Path:
    """$QREF_SUITE, else conformance/v1 of the source checkout qref is imported from."""
    env = os.environ.get("QREF_SUITE")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2] / "conformance" / "v1"
    if here.is_dir():
        return here
    raise SuiteError("no suite given and none found: pass a suite directory, set QREF_SUITE, or run "
                     "`qref gen DIR` to generate one")


# ---------------------------------------------------------------------------------------------------------
# verifying
# ---------------------------------------------------------------------------------------------------------
@dataclass
class VerifyReport:
    root: Path
    cases: int = 0
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_suite(path: str | os.PathLike[str], *, strict: bool = True, limit: int = 100) -> VerifyReport:
    """Check a suite: manifest against the schema, schema.json, every array file present with the manifest's
    sha256, dtype and shape, and (``strict``) no file the manifest does not list. Collects every problem."""
    root = Path(path)
    rep = VerifyReport(root)
    try:
        m = read_manifest(root)
    except SuiteError as exc:
        rep.problems.append(str(exc))
        return rep
    suite = Suite(root, m)
    rep.cases = len(m["cases"])
    listed: dict[str, dict[str, Any]] = {}
    for c in m["cases"]:
        for g in ("inputs", "expected", "unspecified"):
            for k, r in c[g].items():
                listed.setdefault(r["file"], {**r, "_where": f"case {c['id']} {g}.{k}"})
    for rel, info in m["files"].items():
        p = root / rel
        if not p.exists():
            rep.problems.append(f"{rel}: missing")
        elif sha256(p.read_bytes()) != info["sha256"]:
            rep.problems.append(f"{rel}: sha256 mismatch (the file was modified)")
        elif rel == "schema.json" and p.read_bytes() != dumps_json(SCHEMA).encode("ascii"):
            rep.problems.append("schema.json: differs from this qref's schema for version "
                                f"{SCHEMA_VERSION}")
    for rel, ref in sorted(listed.items()):
        if len(rep.problems) >= limit:
            rep.problems.append(f"... stopped after {limit} problems")
            return rep
        try:
            arr = suite.read_array(ref, ref["_where"])
        except QrefError as exc:
            rep.problems.append(str(exc))
            continue
        rep.files += 1
        rep.bytes += (root / rel).stat().st_size
        del arr
    if strict:
        known = set(listed) | set(m["files"]) | {"manifest.json"}
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and rel not in known:
                rep.problems.append(f"{rel}: not listed in the manifest (remove it or regenerate the suite)")
    return rep
