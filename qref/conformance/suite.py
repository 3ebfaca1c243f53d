"""Suites on disk: write, load and verify (docs/vectors.md §3).

A suite is a directory:

    manifest.json                 cases, array references, sha256 of every file (sorted keys, no timestamps)
    schema.json                   the JSON Schema of manifest.json
    arrays/<h[:2]>/<h>.npy        one plain .npy per distinct array, named by the sha256 h of its bytes

Arrays are content-addressed, so identical inputs shared by many cases are stored once and a suite's bytes
depend only on its cases.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import math
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import QrefError, unknown_name
from ..formats import get_format
from .case import STORAGE, Case, format_record, from_storage, logical_dtype_name, plain, to_storage
from .npy import npy_bytes, read_npy
from .schema import (
    MAX_ARRAY_BYTES,
    MAX_MANIFEST_BYTES,
    SAFE_PATH_RE,
    SCHEMA,
    SCHEMA_VERSION,
    SUITE_KIND,
    validate_manifest,
)


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
# files inside a suite (docs/vectors.md §3.2)
# ---------------------------------------------------------------------------------------------------------
_SAFE_PATH = re.compile(SAFE_PATH_RE)
_OWNED = re.compile(r"^(manifest\.json|schema\.json|arrays/([0-9a-f]{2})/\2[0-9a-f]{62}\.npy)$")


def suite_file(root: Path, rel: str, where: str = "", *, max_bytes: int = MAX_ARRAY_BYTES + 4096
               ) -> tuple[Path, int]:
    """(path, size) of the regular file ``rel`` inside the suite ``root``, or a SuiteError: ``rel`` must be a
    safe relative path (no absolute path, no '..', no hidden names), no component may be a symlink that leaves
    the suite, the file must be a regular file (not a device, FIFO or directory) of at most ``max_bytes``."""
    where = where or rel
    if not isinstance(rel, str) or not _SAFE_PATH.match(rel):
        raise SuiteError(f"{where}: {rel!r} is not a path inside the suite (relative, '/'-separated names of "
                         "letters, digits and _.-, no '..', no absolute paths)")
    top = root.resolve()
    path = root / rel
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        raise SuiteError(f"{where}: file {rel} is missing from {root}") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission problem
        raise SuiteError(f"{where}: cannot resolve {rel} in {root}: {exc}") from None
    if not real.is_relative_to(top):
        raise SuiteError(f"{where}: {rel} is a symlink to {real}, outside the suite {root}; a suite holds its own "
                         "files (copy the file in or regenerate the suite)")
    st = real.stat()
    if not stat.S_ISREG(st.st_mode):
        raise SuiteError(f"{where}: {rel} is not a regular file (a directory, device or pipe); a suite holds "
                         "plain .npy and .json files")
    if st.st_size > max_bytes:
        raise SuiteError(f"{where}: {rel} is {st.st_size} bytes, above the {max_bytes}-byte limit for it")
    return real, st.st_size


def _read_bounded(path: Path, size: int, where: str) -> bytes:
    with path.open("rb") as f:
        data = f.read(size + 1)
    if len(data) != size:
        raise SuiteError(f"{where}: {path} changed size while it was read ({size} -> {len(data)} bytes)")
    return data


def _listed_files(root: Path) -> set[str] | None:
    """The files a suite's manifest lists (manifest.json, its ``files`` and every array reference): what qref
    owns in it; None when there is no readable manifest."""
    try:
        m = read_manifest(root)
    except QrefError:
        return None
    out = {"manifest.json", *m["files"]}
    for c in m["cases"]:
        for g in ("inputs", "expected", "unspecified"):
            out.update(r["file"] for r in c[g].values())
    return out


def _owned(root: Path, rel: str, listed: set[str]) -> bool:
    """Did qref write ``rel``: manifest.json / schema.json, or an array file the manifest lists, or one whose
    bytes hash to its name (content-addressed: what a gen that was stopped before its manifest left). A file
    merely named like a hash is the user's."""
    if not _OWNED.match(rel):
        return False
    if rel in ("manifest.json", "schema.json") or rel in listed:
        return True
    p = root / rel
    try:
        if p.stat().st_size > MAX_ARRAY_BYTES + 4096:
            return False
        return sha256(p.read_bytes()) == p.stem
    except OSError:
        return False


def _user_files(root: Path, listed: set[str] | None = None) -> list[str]:
    """Entries under a suite directory that qref did not write (``_owned``): anything else, and every symlink
    (never followed)."""
    if listed is None:
        listed = _listed_files(root) or set()
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        d = Path(dirpath)
        for name in [*dirnames, *filenames]:
            p = d / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                found.append(rel + " (a symlink)")
            elif p.is_dir():
                if rel != "arrays" and not re.fullmatch(r"arrays/[0-9a-f]{2}", rel):
                    found.append(rel + "/")
            elif not (p.is_file() and _owned(root, rel, listed)):
                found.append(rel)
    return sorted(found)


def _remove_owned(root: Path, listed: set[str]) -> list[str]:
    """Delete the files qref wrote under ``root`` (those its manifest listed, ``listed``; never following a
    symlink) and the directories left empty; returns what remains."""
    for dirpath, _dirs, filenames in os.walk(root, topdown=False, followlinks=False):
        d = Path(dirpath)
        for name in filenames:
            p = d / name
            rel = p.relative_to(root).as_posix()
            if not p.is_symlink() and _owned(root, rel, listed):
                p.unlink()
        if d != root and not d.is_symlink():
            with contextlib.suppress(OSError):
                d.rmdir()
    with contextlib.suppress(OSError):
        root.rmdir()
    return _user_files(root) if root.exists() else []


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) and SIGTERM until the block ends, so a swap of directories is never left half done;
    then raise KeyboardInterrupt (SIGINT) or call the SIGTERM handler that was installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {s_: signal.signal(s_, lambda n, f: got.append(n)) for s_ in sigs}
    try:
        yield
    finally:
        for s_, h in old.items():
            signal.signal(s_, h)
        if signal.SIGTERM in got and callable(old[signal.SIGTERM]):
            old[signal.SIGTERM](signal.SIGTERM, None)
        if got:
            raise KeyboardInterrupt


# ---------------------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------------------
class SuiteWriter:
    """Streams cases into a temporary sibling directory of ``out``; ``close()`` writes manifest.json and
    schema.json there and only then swaps it in for ``out`` (docs/vectors.md §5.1). ``abort()`` (also on any
    exception in ``write_suite``/``generate``, Ctrl-C included) removes the temporary directory and leaves
    ``out`` as it was.

    ``overwrite``: replace an existing suite. The old suite is removed only after the new one is in place, and
    only if qref wrote every file in it: a directory holding anything else (a user file under arrays/, a
    symlink) is refused before any work starts."""

    def __init__(self, out: str | os.PathLike[str], *, name: str = "v1", families: Iterable[str] = (),
                 full: bool = False, overwrite: bool = False, generator: Mapping[str, Any] | None = None
                 ) -> None:
        self.out = Path(out)
        self.name = name
        self.families = list(families)
        self.full = full
        self.generator_extra = dict(generator or {})
        self.leftover: Path | None = None
        check_suite_target(self.out, overwrite)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.removed = remove_leftovers(self.out)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.qref-tmp-{os.getpid()}-", dir=self.out.parent))
        umask = os.umask(0o022)
        os.umask(umask)
        self.tmp.chmod(0o777 & ~umask)  # mkdtemp makes it 0700; the suite gets a plain directory's mode
        (self.tmp / "arrays").mkdir()
        self.overwrite = overwrite
        self.cases: list[dict[str, Any]] = []
        self.formats: dict[str, dict[str, Any]] = {}
        self.ids: set[str] = set()
        self.arrays: dict[str, int] = {}

    def _array(self, arr: np.ndarray, fmt: str | None) -> dict[str, Any]:
        data = npy_bytes(to_storage(arr))
        h = sha256(data)
        rel = f"arrays/{h[:2]}/{h}.npy"
        if h not in self.arrays:
            path = self.tmp / rel
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
            rec = plain(case.format)
            fmt_name = rec["name"]
            if self.formats.setdefault(fmt_name, rec) != rec:
                raise SuiteError(f"case {case.id!r}: format {fmt_name!r} has a record that differs from an "
                                 "earlier case's")
        self.cases.append({
            "id": case.id, "family": case.family, "operation": case.operation,
            "format": fmt_name, "policy": plain(case.policy), "scheme": plain(case.scheme),
            "profile": case.profile, "params": plain(case.params),
            "inputs": refs(case.inputs), "expected": refs(case.expected), "unspecified": refs(case.unspecified),
            "tags": list(case.tags), "spec": list(case.spec), "equivalent": plain(case.equivalent),
            "profiles": list(case.profiles), "description": case.description,
        })

    def abort(self) -> None:
        """Remove the temporary directory; ``out`` is untouched."""
        shutil.rmtree(self.tmp, ignore_errors=True)

    def close(self) -> dict[str, Any]:
        try:
            manifest = self._finish()
        except BaseException:
            self.abort()
            raise
        self._swap()
        return manifest

    def _finish(self) -> dict[str, Any]:
        if not self.cases:
            raise SuiteError(f"no cases to write to {self.out} (the selection is empty); the previous contents "
                             "are untouched")
        schema_text = dumps_json(SCHEMA).encode("ascii")
        (self.tmp / "schema.json").write_bytes(schema_text)
        families = self.families or sorted({c["family"] for c in self.cases})
        manifest = {
            "suite": SUITE_KIND, "schema_version": SCHEMA_VERSION, "name": self.name,
            "generator": {"tool": "qref gen", "families": families, "full": self.full, **self.generator_extra},
            "families": families,
            "formats": self.formats,
            "files": {"schema.json": {"sha256": sha256(schema_text)}},
            "summary": {"cases": len(self.cases), "arrays": len(self.arrays), "bytes": sum(self.arrays.values())},
            "cases": self.cases,
        }
        problems = validate_manifest(manifest)
        if problems:
            raise SuiteError("the generated manifest is invalid:\n  " + "\n  ".join(problems))
        (self.tmp / "manifest.json").write_bytes(dumps_manifest(manifest).encode("ascii"))
        return manifest

    def _swap(self) -> None:
        out = self.out
        with _deferred_interrupt():
            if out.is_symlink() or out.exists():
                try:
                    check_suite_target(out, self.overwrite)  # again: files may have appeared meanwhile
                    listed = _listed_files(out) or set()
                except SuiteError:
                    self.abort()
                    raise
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.qref-old-", dir=out.parent))
                old.rmdir()
                out.rename(old)
                try:
                    self.tmp.rename(out)
                except BaseException:
                    old.rename(out)
                    self.abort()
                    raise
                left = _remove_owned(old, listed)
                if left:
                    self.leftover = old
            else:
                self.tmp.rename(out)


_TMP = re.compile(r"^\.(?P<name>.+)\.qref-tmp-(?P<pid>[0-9]+)-[A-Za-z0-9_]+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_leftovers(out: Path) -> list[Path]:
    """Remove the temporary siblings ``.<out>.qref-tmp-<pid>-*`` that a gen killed by SIGKILL (or a power loss)
    left: only those whose process is gone and that hold nothing but what a SuiteWriter writes (arrays/<h[:2]>/
    <h>.npy, manifest.json, schema.json). Returns what was removed."""
    removed = []
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        return removed
    for d in parent.iterdir():
        m = _TMP.match(d.name)
        if not m or m.group("name") != out.name or d.is_symlink() or not d.is_dir():
            continue
        pid = int(m.group("pid"))
        if pid == os.getpid() or _alive(pid):
            continue
        ok = True
        for dirpath, dirnames, filenames in os.walk(d, followlinks=False):
            rel_dir = Path(dirpath).relative_to(d).as_posix()
            for name in filenames + [n for n in dirnames if (Path(dirpath) / n).is_symlink()]:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not _OWNED.match(rel) or (Path(dirpath) / name).is_symlink():
                    ok = False
        if ok:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def check_suite_target(out: Path, overwrite: bool) -> None:
    """Refuse a suite output directory that cannot be written or replaced (before any work starts)."""
    if out.is_symlink():
        raise SuiteError(f"{out} is a symlink; give the real directory (qref never writes through a symlink)")
    if not out.exists():
        return
    if not out.is_dir():
        raise SuiteError(f"{out} exists and is not a directory")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise SuiteError(f"{out} is not empty; pass overwrite=True (qref gen --force) to replace a suite")
    user = _user_files(out)
    if user:
        raise SuiteError(f"refusing to replace {out}: it holds files qref did not write ({', '.join(user[:5])}"
                         + (f" and {len(user) - 5} more" if len(user) > 5 else "") + "); move them away first")


def write_suite(cases: Iterable[Case], out: str | os.PathLike[str], *, name: str = "v1",
                families: Iterable[str] = (), full: bool = False, overwrite: bool = False,
                on_case: Callable[[Case], None] | None = None) -> dict[str, Any]:
    """Write ``cases`` as a suite directory ``out`` (atomically: see SuiteWriter) and return the manifest."""
    w = SuiteWriter(out, name=name, families=families, full=full, overwrite=overwrite)
    try:
        for c in cases:
            w.add(c)
            if on_case is not None:
                on_case(c)
    except BaseException:
        w.abort()
        raise
    return w.close()


# ---------------------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------------------
_VALID: dict[str, bool] = {}  # sha256 of manifest.json bytes -> validated (the same bytes validate the same)


def validated_manifests() -> tuple[str, ...]:
    """The sha256 of each manifest's bytes this process has validated (handed to a child process, which then
    skips validating the same bytes again: trust_validated)."""
    return tuple(_VALID)


def trust_validated(keys: Iterable[str]) -> None:
    """Count the manifests whose bytes have these sha256 as validated (a parent process validated them).
    read_manifest still hashes the bytes it reads: a manifest that changed since is validated in full."""
    _VALID.update(dict.fromkeys(keys, True))


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and validate ``<suite>/manifest.json`` (schema + LOAD_RULES + semantic rules, schema.py); a
    SuiteError naming the file and every problem found."""
    root = Path(path)
    is_file = not root.is_dir() and root.name.endswith(".json")
    mpath = root if is_file else root / "manifest.json"
    try:
        real, size = suite_file(root.parent if is_file else root, mpath.name, str(mpath),
                                max_bytes=MAX_MANIFEST_BYTES)
    except SuiteError as exc:
        if not mpath.exists() and not mpath.is_symlink():
            raise SuiteError(f"{mpath}: missing; a suite directory holds manifest.json (make one with "
                             "`qref gen DIR`)") from None
        raise SuiteError(str(exc)) from None
    data = _read_bounded(real, size, str(mpath))
    key = sha256(data)
    try:
        m = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{mpath}: malformed manifest, not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{mpath}: malformed manifest, invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    except RecursionError:
        raise SuiteError(f"{mpath}: malformed manifest, nested too deeply to parse (a qref manifest is about 6 "
                         "levels deep)") from None
    if not isinstance(m, dict) or m.get("suite") != SUITE_KIND:
        raise SuiteError(f"{mpath}: malformed manifest, not a qref conformance manifest "
                         f"(expected \"suite\": \"{SUITE_KIND}\")")
    if m.get("schema_version") != SCHEMA_VERSION:
        raise SuiteError(f"{mpath}: schema_version {m.get('schema_version')!r} is not supported by this qref (it "
                         f"reads version {SCHEMA_VERSION}); use the qref release that wrote the suite")
    if key not in _VALID:
        problems = validate_manifest(m)
        if problems:
            raise SuiteError(f"{mpath}: malformed manifest:\n  " + "\n  ".join(problems))
        _VALID[key] = True
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
        """The logical-dtype array of a manifest array reference. The file must be a regular file inside the
        suite (suite_file); its sha256 is checked, then its .npy header against the manifest's storage dtype and
        shape, before the (read-only) array is made from the bytes (docs/vectors.md §3.2)."""
        where = where or str(ref.get("file"))
        storage, shape = ref["storage"], ref["shape"]
        nbytes = math.prod(shape) * np.dtype(storage).itemsize
        path, size = suite_file(self.root, ref["file"], where, max_bytes=min(nbytes, MAX_ARRAY_BYTES) + 4096)
        data = _read_bounded(path, size, where)
        got = sha256(data)
        if got != ref["sha256"]:
            raise SuiteError(f"{where}: sha256 mismatch for {ref['file']}: manifest {ref['sha256'][:16]}..., "
                             f"file {got[:16]}... (the file was modified or corrupted; regenerate or re-download)")
        try:
            arr = read_npy(data, f"{where} ({ref['file']})", storage=storage, shape=shape)
        except SuiteError:
            raise
        except QrefError as exc:
            raise SuiteError(str(exc)) from None
        return from_storage(arr, ref["dtype"])

    def case_problems(self, case_id: str) -> list[str]:
        """Every problem of one case's files (the per-case part of verify_suite); [] when it verifies."""
        entry = self.entry(case_id)
        out = []
        for g in ("inputs", "expected", "unspecified"):
            for k, r in entry[g].items():
                try:
                    self.read_array(r, f"case {case_id} {g}.{k}")
                except QrefError as exc:
                    out.append(str(exc))
        return out

    def verify_case(self, case_id: str) -> Case:
        """The case, after checking every one of its files; a SuiteError naming the file and the problem
        otherwise (for consumers that load a subset of a suite; reading a case always does these checks)."""
        return self[case_id]

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


def load_suite(path: str | os.PathLike[str] | None = None, *, verify: bool = False) -> Suite:
    """Open a suite directory (default: ``default_suite_path()``). The manifest is always checked in full
    (read_manifest: schema, bounds, semantic rules); every array file is checked when a case is read
    (read_array). ``verify=True`` also checks every listed file now (verify_suite; files the manifest does not list
    are left to ``qref verify``: they are never read) and raises a SuiteError listing each problem, so a caller
    never runs on a suite that does not verify."""
    root = Path(path) if path is not None else default_suite_path()
    if not root.is_dir():
        raise SuiteError(f"{root}: not a directory; a suite is a directory with manifest.json")
    if verify:
        rep = verify_suite(root, strict=False)
        if not rep.ok:
            raise SuiteError(f"{root}: the suite does not verify ({len(rep.problems)} problem(s)):\n  "
                             + "\n  ".join(rep.problems[:20]))
        return Suite(root, read_manifest(root))
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


def verify_suite(path: str | os.PathLike[str], *, strict: bool = True, limit: int = 100,
                 recompute: bool = False) -> VerifyReport:
    """Check a suite: the manifest (read_manifest), every file of ``files``, every reference of every array file
    (inside the suite, regular, within the size bounds, sha256, .npy header dtype and shape: read_array), the
    ``summary`` (cases, distinct arrays, bytes), and (``strict``) no file, directory or symlink the manifest does
    not list. ``recompute``: also recompute the expected outputs of element cases from their inputs and policy
    (recompute_problems), which catches an edit of an array made consistent with its hash. Collects every
    problem (at most ``limit``)."""
    root = Path(path)
    rep = VerifyReport(root)
    try:
        if not root.is_dir():
            raise SuiteError(f"{root}: not a directory; a suite is a directory with manifest.json")
        m = read_manifest(root)
    except SuiteError as exc:
        rep.problems.append(str(exc))
        return rep
    suite = Suite(root, m)
    rep.cases = len(m["cases"])
    listed: dict[str, dict[str, Any]] = {}
    others: list[dict[str, Any]] = []  # every further reference to a file: each is checked against the file too
    seen: set[tuple[Any, ...]] = set()
    for c in m["cases"]:
        for g in ("inputs", "expected", "unspecified"):
            for k, r in c[g].items():
                ref = {**r, "_where": f"case {c['id']} {g}.{k}"}
                sig = (r["file"], r["sha256"], r["dtype"], r["storage"], tuple(r["shape"]))
                if r["file"] not in listed:
                    listed[r["file"]] = ref
                elif sig not in seen:
                    others.append(ref)
                seen.add(sig)
    for rel, info in m["files"].items():
        try:
            p, size = suite_file(root, rel, f"files.{rel}", max_bytes=MAX_MANIFEST_BYTES)
            data = _read_bounded(p, size, rel)
        except SuiteError as exc:
            rep.problems.append(str(exc))
            continue
        if sha256(data) != info["sha256"]:
            rep.problems.append(f"{rel}: sha256 mismatch (the file was modified)")
        elif rel == "schema.json" and data != dumps_json(SCHEMA).encode("ascii"):
            rep.problems.append("schema.json: differs from this qref's schema for version "
                                f"{SCHEMA_VERSION}")
    if "schema.json" not in m["files"]:
        rep.problems.append("manifest.files: schema.json is not listed (every suite carries its schema)")
    for rel, ref in sorted(listed.items()):
        if len(rep.problems) >= limit:
            rep.problems.append(f"... stopped after {limit} problems")
            return rep
        try:
            suite.read_array(ref, ref["_where"])
        except QrefError as exc:
            rep.problems.append(str(exc))
            continue
        rep.files += 1
        rep.bytes += (root / rel).stat().st_size
    for ref in others:  # the same file read as another dtype, storage, shape or hash by a later case
        if len(rep.problems) >= limit:
            break
        try:
            suite.read_array(ref, ref["_where"])
        except QrefError as exc:
            rep.problems.append(str(exc))
    want = {"cases": len(m["cases"]), "arrays": len(listed), "bytes": rep.bytes}
    if not rep.problems and m.get("summary") != want:
        rep.problems.append(f"manifest.summary {m.get('summary')} does not match the suite: {want} (the manifest was "
                            "edited; regenerate the suite)")
    if recompute:
        rep.problems.extend(recompute_problems(suite, limit - len(rep.problems)))
    if strict:
        known = set(listed) | set(m["files"]) | {"manifest.json"}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            d = Path(dirpath)
            for name in sorted([*dirnames, *filenames]):
                p = d / name
                rel = p.relative_to(root).as_posix()
                if p.is_symlink():
                    if rel not in known:
                        rep.problems.append(f"{rel}: a symlink the manifest does not list (remove it)")
                elif not p.is_dir() and rel not in known:
                    rep.problems.append(f"{rel}: not listed in the manifest (remove it or regenerate the suite)")
    return rep


def recompute_problems(suite: Suite, limit: int = 100) -> list[str]:
    """Element cases (elements.md §2, §4) whose expected outputs differ from qref's on their inputs: encode (codes
    of x under the case's policy, random_bits for the stochastic modes), decode (values of the codes in
    params.dtype) and quantize (decode of encode). Compared as bits."""
    from ..core.decode import decode
    from ..core.encode import encode
    from ..formats.policy import CastPolicy

    out: list[str] = []
    for entry in suite.manifest["cases"]:
        if entry["family"] != "elements" or len(out) >= limit:
            continue
        try:
            case = suite._case(entry)
            fmt = get_format(case.format["name"])
            if format_record(fmt) != case.format:
                raise QrefError(f"format {case.format['name']!r} of the suite is not this qref's format of that "
                                "name")
            (name,) = case.expected
            want = case.expected[name]
            with np.errstate(all="ignore"):
                if case.operation == "decode":
                    got = decode(case.inputs["codes"], fmt, dtype=want.dtype)
                else:
                    pol = CastPolicy(**case.policy)
                    x = case.inputs["x"]
                    codes = encode(x, fmt, profile=pol, random_bits=case.inputs.get("random_bits"))
                    got = codes if case.operation == "encode" else decode(codes, fmt, dtype=x.dtype)
            g, w = np.asarray(got), np.asarray(want)
            gb = g.view(f"u{g.dtype.itemsize}").astype(np.uint64)
            wb = w.view(f"u{w.dtype.itemsize}").astype(np.uint64)
            if g.shape != w.shape or not np.array_equal(gb, wb):
                n = int(np.sum(gb != wb)) if g.shape == w.shape else -1
                out.append(f"case {entry['id']}: expected.{name} differs from the outputs recomputed from its inputs "
                           f"and policy ({'shape' if n < 0 else f'{n} element(s)'}): the arrays were edited")
        except QrefError as exc:
            out.append(f"case {entry['id']}: cannot recompute: {exc}")
    return out


__all__ = ["Suite", "SuiteError", "SuiteWriter", "VerifyReport", "check_suite_target", "default_suite_path",
           "dumps_json", "dumps_manifest", "load_suite", "read_manifest", "recompute_problems", "remove_leftovers",
           "sha256", "suite_file", "trust_validated", "validated_manifests", "verify_suite", "write_suite"]
