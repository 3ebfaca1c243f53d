"""Findings: one per root cause (backend, family, comparison, mechanism), deduplicated across a backend's targets
(eager / jit), formats and cases (docs/conformance/README.md).

A *spec finding* is a way the backend differs from the spec (listed even where qref's profile of the backend
reproduces it: a profile models the behaviour, it does not make it conform). A *profile gap* is a way the
backend differs from qref's own profile of it (an expected failure documents it, or it is unexpected). A *crash*
finding groups the crashes of a backend by their first error line. Each finding has an id
(``<backend>-<kind>-<class>[-<family>]``), a one-sentence statement, the spec section, counts, the affected cases
and the reproducer of its smallest task.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .classify import CLASSES, class_order, class_title
from .model import TaskResult
from .runner import RunResults

KINDS = ("spec", "profile", "crash")


@dataclass
class Finding:
    id: str
    backend: str
    family: str
    kind: str  # spec | profile | crash
    mechanism: str  # the class (or "crash")
    statement: str
    spec: str
    targets: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    elements: int = 0
    expected: bool = False  # every task is covered by an expected-failure entry (profile gaps)
    repro: dict[str, str] = field(default_factory=dict)
    reference: str = "spec"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("id", "backend", "family", "kind", "mechanism", "statement", "spec",
                                              "targets", "formats", "tasks", "elements", "expected", "repro",
                                              "reference")}


def _format_of(task: str) -> str:
    parts = task.split("/")
    return parts[1] if len(parts) > 1 else task


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def findings(res: RunResults) -> list[Finding]:
    """Every finding of a run, sorted by backend (report order), kind, mechanism and family."""
    info = {t.name: t for t in res.targets}
    groups: dict[tuple[str, str, str, str], list[tuple[TaskResult, str]]] = defaultdict(list)
    for r in res.results:
        t = info.get(r.target)
        if t is None or r.status == "unsupported":
            continue
        if r.status == "crash" or (r.status == "xfail" and r.reason.endswith(")") and "(crash:" in r.reason):
            groups[(t.backend, r.family, "crash", "crash")].append((r, "crash"))
            continue
        if r.vs_spec is not None:
            for cls in r.vs_spec.classes:
                groups[(t.backend, r.family, "spec", cls)].append((r, "vs_spec"))
        if t.profile and r.vs_profile is not None:
            for cls in r.vs_profile.classes:
                groups[(t.backend, r.family, "profile", cls)].append((r, "vs_profile"))
    order = {b: i for i, b in enumerate(res.backends)}
    out = []
    for (backend, family, kind, cls), members in groups.items():
        rs = [r for r, _ in members]
        attr = members[0][1]
        tnames = sorted({r.target for r in rs})
        formats = sorted({_format_of(r.task) for r in rs})
        elements = 0 if kind == "crash" else sum(getattr(r, attr).classes.get(cls, 0) for r in rs)
        best = min(members, key=lambda m: (m[0].size, m[0].task, m[0].target))
        repro = {} if kind == "crash" else dict(getattr(best[0], best[1]).repro.get(cls, {}))
        meaning = CLASSES.get(cls.split("+")[0], (cls, ""))[1]
        if "+" in cls:
            meaning = "; ".join(CLASSES.get(c, (c, ""))[1] for c in cls.split("+"))
        fmt_text = ", ".join(formats[:4]) + (f" and {len(formats) - 4} more" if len(formats) > 4 else "")
        profiles = sorted({info[n].profile for n in tnames if info[n].profile})
        if kind == "crash":
            reasons = sorted({r.reason for r in rs})
            statement = (f"{backend} fails to run {len(rs)} {family} task(s) it is expected to support "
                         f"({fmt_text}): {reasons[0]}")
            ref = "-"
        elif kind == "spec":
            statement = f"{backend} ({family}; {fmt_text}) differs from the spec: {meaning}"
            ref = "spec"
        else:
            statement = (f"qref's profile {', '.join('`' + p + '`' for p in profiles)} of {backend} does not model "
                         f"this ({family}, {fmt_text}): {meaning}")
            ref = ", ".join(profiles)
        f = Finding(
            id=f"{backend}-{kind}-{_slug(class_title(cls)) if kind != 'crash' else 'crash'}-{family}",
            backend=backend, family=family, kind=kind, mechanism=cls, statement=statement,
            spec=repro.get("spec", "") or "", targets=tnames, formats=formats,
            tasks=sorted({r.task for r in rs}), elements=elements,
            expected=all(r.status in ("xfail", "pass") for r in rs), repro=repro, reference=ref)
        out.append(f)
    out.sort(key=lambda f: (order.get(f.backend, len(order)), KINDS.index(f.kind), class_order(f.mechanism),
                            f.family))
    return out


def _fold(items: list[str], n: int = 6) -> str:
    shown = ", ".join(f"`{x}`" for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def bug_report(res: RunResults, f: Finding) -> str:
    """A ready-to-file report of one finding: title, versions, statement, reproducer, expected with the spec
    citation."""
    versions = res.versions.get(f.backend, {})
    L = [f"Title: [{f.backend}] {f.statement}", "",
         "Versions: " + (", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "-"),
         f"Targets: {', '.join(f.targets)}", f"Affected: {len(f.tasks)} task(s), {f.elements} element(s); formats "
         f"{', '.join(f.formats)}", ""]
    if f.repro:
        L += [f"Input: {f.repro.get('input', '')}",
              f"Expected ({'the spec' if f.kind == 'spec' else f.reference}, {f.spec}): {f.repro.get('expected', '')}",
              f"Got: {f.repro.get('got', '')}", "", "Reproduce:", "", "    " + f.repro.get("command", "")]
        if f.repro.get("note"):
            L += ["", f"Note: {f.repro['note']}"]
    L += ["", f"Cases (qref suite {res.suite}): {', '.join(f.tasks[:12])}" + (" ..." if len(f.tasks) > 12 else "")]
    return "\n".join(L) + "\n"


def render_summary(res: RunResults, fs: list[Finding]) -> str:
    """docs/conformance/README.md: backend x family, with the number of findings of each kind."""
    fams = sorted({t.family for t in res.targets})
    by: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in fs:
        by[(f.backend, f.family)].append(f)
    unsupported: dict[tuple[str, str], int] = defaultdict(int)
    ran: dict[tuple[str, str], int] = defaultdict(int)
    info = {t.name: t for t in res.targets}
    for r in res.results:
        key = (info[r.target].backend, r.family)
        if r.status == "unsupported":
            unsupported[key] += 1
        else:
            ran[key] += 1
    L = ["<!-- generated by `qref run --backend all --report docs/conformance.md`: do not edit by hand -->", "",
         "# Conformance findings", "",
         f"Suite `{res.suite}` ({res.suite_cases} cases). One finding per root cause: (backend, family, comparison, "
         "mechanism), deduplicated across a backend's targets (eager / jit), formats and cases. *Spec findings* "
         "are ways the backend differs from the spec (listed also where qref's profile reproduces them); *profile "
         "gaps* are ways it differs from qref's own profile of it; *crashes* are runs that failed on tasks the "
         "backend claims. Per backend: one page below. `qref report --backend NAME --finding ID` prints a "
         "ready-to-file report. The full per-target report is [../conformance.md](../conformance.md).", "",
         "| backend | " + " | ".join(fams) + " |", "|---|" + "---|" * len(fams)]
    for b in res.backends:
        if b in res.skipped:
            L.append(f"| {b} | " + " | ".join("skipped" for _ in fams) + " |")
            continue
        cells = []
        for fam in fams:
            if not ran[(b, fam)] and not unsupported[(b, fam)]:
                cells.append("-")
                continue
            fl = by[(b, fam)]
            n = {k: sum(f.kind == k for f in fl) for k in KINDS}
            if not any(n.values()):
                text = "conforms"
            else:
                text = ", ".join(f"{v} {k if k != 'profile' else 'gap'}{'s' if v > 1 else ''}"
                                 for k, v in n.items() if v)
            if unsupported[(b, fam)]:
                text += f"; {unsupported[(b, fam)]} unsupported"
            cells.append(text)
        L.append(f"| [{b}]({b}.md) | " + " | ".join(cells) + " |")
    L += ["", f"{len(fs)} findings in all: {sum(f.kind == 'spec' for f in fs)} spec findings, "
          f"{sum(f.kind == 'profile' for f in fs)} profile gaps, {sum(f.kind == 'crash' for f in fs)} crash "
          "groups.", ""]
    return "\n".join(L)


def render_backend(res: RunResults, backend: str, fs: list[Finding]) -> str:
    """docs/conformance/<backend>.md: every finding of one backend."""
    mine = [f for f in fs if f.backend == backend]
    versions = res.versions.get(backend, {})
    L = ["<!-- generated by `qref run --backend all --report docs/conformance.md`: do not edit by hand -->", "",
         f"# {backend}: conformance findings", "",
         "Versions: " + (", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "-") + ". Targets: "
         + ", ".join(f"`{t.name}` ({t.family}, profile {t.profile or 'none'})" for t in res.targets
                     if t.backend == backend) + ".", ""]
    if backend in res.skipped:
        return "\n".join([*L, f"Skipped: {res.skipped[backend]}", ""])
    if not mine:
        return "\n".join([*L, "No findings: every task that ran conforms to the spec.", ""])
    for kind, title in (("spec", "Spec findings"), ("profile", "Profile gaps"), ("crash", "Crashes")):
        part = [f for f in mine if f.kind == kind]
        if not part:
            continue
        L += [f"## {title}", ""]
        for f in part:
            L += [f"### {f.id}", "", f.statement + ".", "",
                  f"- spec: {f.spec or '-'}; reference: {f.reference}"
                  + ("; covered by expected-failure entries" if f.expected and kind != "spec" else ""),
                  f"- {len(f.tasks)} task(s), {f.elements} element(s), formats: {', '.join(f.formats)}; targets: "
                  + ", ".join(f"`{t}`" for t in f.targets),
                  f"- cases: {_fold(f.tasks)}"]
            if f.repro:
                L += [f"- input: {f.repro.get('input', '')}; expected: {f.repro.get('expected', '')}; got: "
                      f"{f.repro.get('got', '')}", "", "  ```", f"  {f.repro.get('command', '')}", "  ```"]
            L.append("")
    return "\n".join(L)


def write_findings(res: RunResults, out_dir: str) -> list[str]:
    """Write docs/conformance/README.md and one page per backend into ``out_dir``; the paths written."""
    from pathlib import Path

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    fs = findings(res)
    written = [d / "README.md"]
    (d / "README.md").write_text(render_summary(res, fs), encoding="utf-8")
    for b in res.backends:
        p = d / f"{b}.md"
        p.write_text(render_backend(res, b, fs), encoding="utf-8")
        written.append(p)
    return [str(p) for p in written]
