"""Expected failures: conformance/xfails/<backend>.txt (docs/conformance.md §0).

One entry per line, fields separated by whitespace, the reason is the rest of the line (required):

    TARGET-GLOB  CASE-GLOB  CLASSES  [cpu:FEATURE | cpu:!FEATURE]  REASON
    jax.astype.*  elements/float4_e2m1fn/*  nan_sign_or_code  XLA converts NaN to -0 for both signs ...
    jax.astype.*  elements/float16/f64/*  double_rounding  cpu:!avx512_fp16  float64 -> float16 through float32 ...

CLASSES is a comma-separated list of mismatch classes (qref.harness.classify.CLASSES, "crash", or "a+b"
combinations) or "*". A failing task is an expected failure when every class by which it differs from the
target's reference (its profile, else the spec) is covered by an entry whose globs match the target and one of
the task's case ids. Entries are strict: one whose globs match tasks that ran, none of which needed it, is stale
and fails the run (delete it: the backend was fixed). Lines starting with '#' are comments.

An entry keyed by a CPU feature (``cpu:avx512_fp16``: only where the backend's code may use the feature;
``cpu:!avx512_fp16``: only where it may not, profiles.md §6) is inactive on other CPUs: it covers nothing there and
is never stale there. The features are the host's, cut to the baseline where ``qref run --cpu baseline`` pins the
backend (qref.profiles.cpu.effective_features).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import QrefError
from ..profiles.cpu import FEATURES, has_feature
from .classify import CLASSES


@dataclass
class XfailEntry:
    target: str
    cases: str
    classes: tuple[str, ...]
    reason: str
    where: str
    #: (feature, present): the entry applies only where the backend may (True) / may not (False) use the feature
    cpu: tuple[str, bool] | None = None
    matched: int = 0  # tasks that ran and matched the globs
    used: int = 0  # failing tasks it covered

    def active(self, features: frozenset[str] | None) -> bool:
        """Does the entry apply to a run whose backend may use ``features`` (None: no CPU condition known)?"""
        return self.cpu is None or features is None or has_feature(features, self.cpu[0]) == self.cpu[1]

    def matches(self, target: str, case_ids: tuple[str, ...]) -> bool:
        return fnmatch.fnmatchcase(target, self.target) and any(fnmatch.fnmatchcase(c, self.cases)
                                                                 for c in case_ids)

    @property
    def condition(self) -> str:
        """"" or the CPU condition as written (``cpu:!avx512_fp16``)."""
        return "" if self.cpu is None else f"cpu:{'' if self.cpu[1] else '!'}{self.cpu[0]}"

    def covers(self, cls: str) -> bool:
        return "*" in self.classes or cls in self.classes


@dataclass
class Xfails:
    entries: list[XfailEntry] = field(default_factory=list)

    def check(self, target: str, case_ids: tuple[str, ...], failing: set[str],
              features: frozenset[str] | None = None) -> tuple[bool, str]:
        """(expected, reason): every class in ``failing`` covered by a matching entry active for ``features``?"""
        hits = [e for e in self.entries if e.active(features) and e.matches(target, case_ids)]
        for e in hits:
            e.matched += 1
        if not failing or not hits:
            return False, ""
        need = set(failing)
        used = []
        for e in hits:
            got = {c for c in need if e.covers(c)}
            if got:
                used.append(e)
                need -= got
        if need:
            return False, ""
        for e in used:
            e.used += 1
        return True, "; ".join(dict.fromkeys(e.reason for e in used))

    def stale(self) -> list[XfailEntry]:
        """Entries that matched tasks that ran but covered none of them."""
        return [e for e in self.entries if e.matched and not e.used]


def parse_xfails(text: str, where: str = "<xfails>") -> list[XfailEntry]:
    out = []
    known = set(CLASSES) | {"*"}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        loc = f"{where}:{n}"
        if len(parts) < 4:
            raise QrefError(f"{loc}: an xfail entry is 'TARGET-GLOB CASE-GLOB CLASSES REASON' (the reason is "
                            f"required), got {raw.strip()!r}")
        target, cases, classes, reason = parts
        cpu = None
        if reason.startswith("cpu:"):
            cond, _, reason = reason.partition(" ")
            feat = cond[4:].lstrip("!")
            if any(f not in FEATURES for f in feat.split("|")) or not reason.strip():
                raise QrefError(f"{loc}: a CPU condition is 'cpu:FEATURE' or 'cpu:!FEATURE' (FEATURE 'a' or 'a|b': "
                                f"either) followed by the reason, FEATURE one of {', '.join(FEATURES)}; got {cond!r}")
            cpu = (feat, not cond[4:].startswith("!"))
        cl = tuple(c for c in classes.split(",") if c)
        bad = [c for c in cl if any(p not in known for p in c.split("+"))]
        if bad:
            raise QrefError(f"{loc}: unknown mismatch class(es) {bad}; known: {', '.join(sorted(known))}")
        out.append(XfailEntry(target, cases, cl, reason.strip(), loc, cpu))
    return out


def load_xfails(paths: list[str | os.PathLike[str]]) -> Xfails:
    entries: list[XfailEntry] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise QrefError(f"xfail file {path} does not exist")
        entries += parse_xfails(path.read_text(encoding="utf-8"), str(path))
    return Xfails(entries)


def default_xfail_dir() -> Path:
    """conformance/xfails of the source checkout qref is imported from, else the copy installed with the package
    (qref/data/xfails: package data, so an installed qref reports known differences as xfail, not as failures)."""
    here = Path(__file__).resolve().parents[2] / "conformance" / "xfails"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[1] / "data" / "xfails"


__all__ = ["XfailEntry", "Xfails", "default_xfail_dir", "load_xfails", "parse_xfails"]
