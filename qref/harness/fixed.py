"""Findings of a previous release that the locked release fixed (issue 29; docs/conformance/README.md).

A finding that disappears from a run is not dropped: it is recorded in ``conformance/fixed/<backend>.json`` (one
validated JSON file a backend, no pickle) and the backend's page lists it under "Fixed in a newer release". An
entry is one root cause as ``findings`` keys it, (backend, mechanism), with the previous version it was seen in,
the version that fixed it (the locked one), the targets and case ids where it showed and how it was seen.

File format::

    {"backend": "ml_dtypes", "fixed": [{"mechanism": "tie_rule", "kind": "spec", "seen_in": "0.6.0",
      "fixed_in": "0.7.0", "statement": "...", "targets": ["..."], "cases": ["..."], "evidence": "..."}]}

``record(previous, locked, ...)`` gives the entries of two runs' findings (e.g. the run that made an xfail entry
stale); ``python -m qref.harness.record_fixed --backend B --previous DIR --locked DIR --seen-in V --fixed-in V``
writes them (merged with the file's entries).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..errors import QrefError

#: the directory of the per-backend files: conformance/fixed of the source checkout qref is imported from (beside
#: the suite and the expected-failure files), else the copy installed with the package (qref/data/fixed)
FIXED_DIR = (Path(__file__).resolve().parents[2] / "conformance" / "fixed"
             if (Path(__file__).resolve().parents[2] / "conformance" / "fixed").is_dir()
             else Path(__file__).resolve().parents[1] / "data" / "fixed")
_KINDS = ("crash", "spec", "profile", "unspecified")
_VERSION = re.compile(r"^\d+(\.\d+)*([a-z]+\d*)?(\.post\d+|\.dev\d+)?$")
_FIELDS = ("mechanism", "kind", "seen_in", "fixed_in", "statement", "targets", "cases", "evidence")


@dataclass(frozen=True)
class FixedFinding:
    """One root cause of a previous release that the named release no longer shows."""

    backend: str
    mechanism: str  # the finding's mechanism: a class, "crash:<error>" or "unspecified:<input kind>"
    kind: str  # crash | spec | profile | unspecified
    seen_in: str  # the previous version it was seen in
    fixed_in: str  # the first version checked that no longer shows it (the locked one)
    statement: str  # the finding's statement in the previous release
    targets: tuple[str, ...]
    cases: tuple[str, ...]  # case ids where it showed (at most 12)
    evidence: str  # how it was seen: the runs compared

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("backend")
        d["targets"], d["cases"] = list(self.targets), list(self.cases)
        return d


def _check(backend: str, i: int, e: Any) -> FixedFinding:
    where = f"fixed/{backend}.json entry {i}"
    if not isinstance(e, dict) or set(e) != set(_FIELDS):
        got = sorted(e) if isinstance(e, dict) else type(e).__name__
        raise QrefError(f"{where}: an entry has exactly the keys {list(_FIELDS)}, got {got}")
    for k in ("mechanism", "kind", "seen_in", "fixed_in", "statement", "evidence"):
        if not isinstance(e[k], str) or not e[k].strip():
            raise QrefError(f"{where}: {k} must be a non-empty string")
    for k in ("targets", "cases"):
        if not isinstance(e[k], list) or not all(isinstance(x, str) and x for x in e[k]):
            raise QrefError(f"{where}: {k} must be a list of non-empty strings")
    if e["kind"] not in _KINDS:
        raise QrefError(f"{where}: kind must be one of {_KINDS}, got {e['kind']!r}")
    for k in ("seen_in", "fixed_in"):
        if not _VERSION.match(e[k]):
            raise QrefError(f"{where}: {k} must be a release version such as 0.6.0, got {e[k]!r}")
    if _key(e["seen_in"]) >= _key(e["fixed_in"]):
        raise QrefError(f"{where}: seen_in {e['seen_in']} must be an earlier release than fixed_in {e['fixed_in']}")
    if not e["targets"] or not all(t.startswith(backend + ".") for t in e["targets"]):
        raise QrefError(f"{where}: targets must be targets of {backend} ({backend}.<api>...), got {e['targets']}")
    return FixedFinding(backend, e["mechanism"], e["kind"], e["seen_in"], e["fixed_in"], e["statement"],
                        tuple(e["targets"]), tuple(e["cases"]), e["evidence"])


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:4])


def load_fixed(backend: str, root: str | Path | None = None) -> list[FixedFinding]:
    """The validated entries of ``<root>/<backend>.json`` ([] when there is no file); QrefError naming the entry
    and the field when the file is not of the format (module docstring)."""
    p = Path(root or FIXED_DIR) / f"{backend}.json"
    if not p.is_file():
        return []
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise QrefError(f"{p}: not JSON ({exc}); `python -m qref.harness.record_fixed` writes it") from None
    if not isinstance(data, dict) or set(data) != {"backend", "fixed"} or data["backend"] != backend \
            or not isinstance(data["fixed"], list):
        raise QrefError(f"{p}: expected {{\"backend\": {backend!r}, \"fixed\": [entries]}}")
    out = [_check(backend, i, e) for i, e in enumerate(data["fixed"])]
    keys = [(f.mechanism, f.seen_in) for f in out]
    if len(keys) != len(set(keys)):
        raise QrefError(f"{p}: a (mechanism, seen_in) pair is listed twice")
    return out


def record(previous: list[Any], locked: list[Any], backend: str, seen_in: str, fixed_in: str,
           evidence: str, exclude: tuple[str, ...] = ()) -> list[FixedFinding]:
    """The findings (qref.harness.findings.Finding) of ``backend`` in the previous release's run whose (backend,
    mechanism) the locked release's run no longer has: one entry each. ``exclude``: shell patterns of mechanisms
    not to record (a crash on a type or op the previous release does not have is unsupported there, not a fixed
    bug); QrefError when a pattern matches none of the previous run's findings (a typo would record it)."""
    now = {f.mechanism for f in locked if f.backend == backend}
    mine = [f for f in previous if f.backend == backend]
    for pat in exclude:
        if not any(fnmatchcase(f.mechanism, pat) for f in mine):
            raise QrefError(f"--exclude {pat!r} matches no mechanism of {backend}'s previous run "
                            f"({sorted({f.mechanism for f in mine})}); give a pattern of one of them")
    out = []
    for f in mine:
        if f.mechanism in now or any(fnmatchcase(f.mechanism, pat) for pat in exclude):
            continue
        out.append(FixedFinding(backend, f.mechanism, f.kind, seen_in, fixed_in, f.statement, tuple(f.targets),
                                tuple(f.tasks[:12]), evidence))
    return out


def write_fixed(backend: str, entries: list[FixedFinding], root: str | Path | None = None) -> Path:
    """Merge ``entries`` into ``<root>/<backend>.json`` (an entry with the same mechanism and seen_in is
    replaced), validate the result and return the path."""
    p = Path(root or FIXED_DIR) / f"{backend}.json"
    old = {(f.mechanism, f.seen_in): f for f in load_fixed(backend, p.parent)}
    for e in entries:
        old[(e.mechanism, e.seen_in)] = e
    rows = sorted(old.values(), key=lambda f: (_key(f.fixed_in), f.kind, f.mechanism))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"backend": backend, "fixed": [f.to_json() for f in rows]}, indent=1) + "\n",
                 encoding="utf-8")
    load_fixed(backend, p.parent)
    return p


def render(entries: list[FixedFinding]) -> list[str]:
    """Markdown lines of a backend page's "Fixed in a newer release" section ([] when there are none)."""
    if not entries:
        return []
    out = ["## Fixed in a newer release", "",
           "Findings of a previous release that the locked one no longer shows (conformance/fixed/"
           f"{entries[0].backend}.json): kept, marked with the version that fixed them.", ""]
    for f in entries:
        out += [f"- **fixed in {f.fixed_in}** (seen in {f.seen_in}; {f.kind}, mechanism {f.mechanism}): "
                f"{f.statement}", f"  targets: {', '.join(f'`{t}`' for t in f.targets)}; cases: "
                + ", ".join(f"`{c}`" for c in f.cases[:4]) + (f" and {len(f.cases) - 4} more" if len(f.cases) > 4
                                                            else "") + f"; seen by: {f.evidence}"]
    return [*out, ""]


__all__ = ["FIXED_DIR", "FixedFinding", "load_fixed", "record", "render", "write_fixed"]
