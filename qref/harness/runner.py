"""Run backends on a suite: select cases, run each target in batches, compare, classify, apply xfails
(docs/conformance.md §1).

For each target (one backend API for one family) the runner keeps the cases whose expected outputs hold under
the spec default or under the target's profile (``families.<family>.relevant``), groups cases with identical
inputs into one *task* (the backend computes them once), runs every supported task through the target in one
batch, and compares the outputs as unsigned bits with two expectations: the target's reference (its qref profile,
else the spec default) and the spec default. Differences are classified (classify.py). A task whose reference
comparison fails is "fail" unless an xfail entry covers every class ("xfail"); a task the backend cannot express
is "unsupported" (never a pass); an exception while running a supported task is "crash".

Profiles are versioned (profiles.md §2): a target's profile name resolves to the record of the installed version;
when the installed version is outside every record's range, the newest record is the reference and a failing task
is "drift" (a new behaviour to study), not "fail". A target whose profile is a fitted CPU GEMM record (mma.md §12.2)
drifts where its result holds the spec's bound but not the record's bits (the family's ``drift_note``). A backend
whose process fails is an error, never a skip.

The CPU is part of the result (profiles.md §6): the run records the host CPU; ``cpu="baseline"`` pins every backend
whose generated code depends on it (qref.profiles.cpu.PINS) to x86-64-v3, so the run gives the same bits on every
supported x86-64 CPU; xfail entries keyed by a CPU feature apply where the backend may (or may not) use it.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import hashlib
import inspect
import multiprocessing as mp
import os
import resource
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..conformance.case import Case
from ..conformance.suite import Suite, load_suite, trust_validated, validated_manifests
from ..core.parallel import cores
from ..errors import QrefError, check_choice
from ..profiles import resolve_profile
from ..profiles.cpu import CPU_MODES, PINS, CpuInfo, cpu_variants, effective_features, host_cpu
from . import adapters
from .classify import compare
from .families import Expectation, get_family
from .model import PROFILE_FAMILY, BackendMissing, Comparison, Target, TaskResult, Unsupported, bits, first_line
from .xfail import Xfails, default_xfail_dir, load_xfails

STATUSES = ("pass", "fail", "xfail", "unsupported", "crash", "drift", "variant")


@dataclass
class Task:
    """Cases with identical inputs for one target; ``case`` is the representative (a case holding for the spec
    default when there is one, so `qref show` prints the spec's expectation)."""

    case: Case
    cases: list[Case]

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.cases)


@dataclass
class TargetInfo:
    backend: str
    name: str
    family: str
    api: str
    profile: str | None
    notes: str = ""
    drift: str = ""  # set when the installed version is outside every record of the profile (profiles.md §2)

    def to_json(self) -> dict[str, Any]:
        d = {"backend": self.backend, "name": self.name, "family": self.family, "api": self.api,
             "profile": self.profile, "notes": self.notes}
        if self.drift:
            d["drift"] = self.drift
        return d


@dataclass
class RunResults:
    """Everything a report needs: per-target task results, skipped backends, versions, xfail bookkeeping."""

    suite: str
    suite_cases: int
    backends: list[str]
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # backends whose run failed as a whole
    targets: list[TargetInfo] = field(default_factory=list)
    results: list[TaskResult] = field(default_factory=list)
    stale_xfails: list[str] = field(default_factory=list)
    filtered: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # per backend; never written to the report
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # per backend, its process's (and compilers') CPU
    #: the host CPU and the mode ("native": every backend as built for it; "baseline": PINS applied)
    cpu: CpuInfo | None = None
    cpu_mode: str = "native"

    @property
    def unexpected(self) -> list[TaskResult]:
        return [r for r in self.results if r.status in ("fail", "crash")]

    @property
    def drifted(self) -> list[TaskResult]:
        return [r for r in self.results if r.status == "drift"]

    @property
    def ok(self) -> bool:
        return not self.unexpected and not self.stale_xfails and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "suite_cases": self.suite_cases, "backends": self.backends,
            "versions": {k: dict(sorted(v.items())) for k, v in sorted(self.versions.items())},
            "skipped": dict(sorted(self.skipped.items())),
            **({"errors": dict(sorted(self.errors.items()))} if self.errors else {}),
            "targets": [t.to_json() for t in sorted(self.targets, key=lambda t: t.name)],
            "results": [r.to_json() for r in sorted(self.results, key=lambda r: (r.target, r.task))],
            "stale_xfails": sorted(self.stale_xfails), "filtered": self.filtered,
            "cpu": None if self.cpu is None else self.cpu.to_json(), "cpu_mode": self.cpu_mode,
        }

    def features(self, backend: str) -> frozenset[str] | None:
        """The ISA features ``backend``'s code could use in this run (None: the CPU is not known)."""
        return None if self.cpu is None else effective_features(backend, self.cpu, self.cpu_mode)


def _matches(case_id: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if include and not any(fnmatch.fnmatchcase(case_id, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(case_id, p) for p in exclude)


class CaseCache:
    """Cases of a suite loaded once per family (arrays read and hash-checked once)."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self._by_family: dict[str, list[Case]] = {}

    def family(self, name: str) -> list[Case]:
        if name not in self._by_family:
            self._by_family[name] = list(self.suite.select(family=name))
        return self._by_family[name]


def select_tasks(target: Target, cases: Iterable[Case], include: Sequence[str] = (),
                 exclude: Sequence[str] = ()) -> list[Task]:
    """The target's tasks: relevant cases (holding for the spec or the target's profile) grouped by inputs."""
    fam = get_family(target.family)
    groups: dict[str, list[Case]] = {}
    for c in cases:
        if c.operation not in target.operations or not fam.relevant(c, target.profile):
            continue
        if not _matches(c.id, include, exclude):
            continue
        groups.setdefault(fam.task_key(c), []).append(c)
    tasks = []
    for members in groups.values():
        rep = next((c for c in members if fam.holds(c, fam.SPEC_PROFILE)), members[0])
        tasks.append(Task(rep, members))
    return tasks


def _expectation(fam: Any, task: Task, profile: str) -> Expectation:
    holder = next((c for c in task.cases if fam.holds(c, profile)), None)
    if holder is not None:
        return Expectation(dict(holder.expected), dict(holder.unspecified))
    return fam.expectation(task.case, profile)


def _check_outputs(case: Case, got: Any) -> None:
    """Outputs must be a non-empty subset of the case's (a backend may not produce, e.g., a global scale: only
    what it produces is compared), each of the expected shape and width."""
    if not isinstance(got, dict) or not got or not set(got) <= set(case.expected):
        raise QrefError(f"adapter returned outputs {sorted(got) if isinstance(got, dict) else type(got)}, the "
                        f"case expects {sorted(case.expected)}")
    for k, v in got.items():
        e = case.expected[k]
        if v.shape != e.shape or v.dtype.itemsize != e.dtype.itemsize:
            raise QrefError(f"adapter returned {v.dtype}{list(v.shape)} for {k!r}, expected {e.dtype}{list(e.shape)}")


def _replicated(case: Case, i: int, k: int, copies: bool = True) -> Case:
    """The case reduced to element i repeated k times (uniform cases: that element per tensor, alone unless the
    target's snippets write copies)."""
    if case.family == "uniform":
        from .adapters._common import single_element_case

        one = single_element_case(case, i)
        if k == 1 or not copies:
            return one
        return Case(id=one.id, family=one.family, operation=one.operation,
                    inputs={n: np.repeat(a, k) for n, a in one.inputs.items()},
                    expected={n: np.repeat(a, k) for n, a in one.expected.items()}, scheme=one.scheme,
                    profile=one.profile, array_formats=dict(one.array_formats), profiles=one.profiles)
    one = {n: np.repeat(a.reshape(-1)[i : i + 1], k) for n, a in case.inputs.items()}
    exp = {n: np.repeat(a.reshape(-1)[i : i + 1], k) for n, a in case.expected.items()}
    return Case(id=case.id, family=case.family, operation=case.operation, inputs=one, expected=exp,
                format=case.format, policy=case.policy, scheme=case.scheme, profile=case.profile,
                params=case.params, array_formats=dict(case.array_formats), profiles=case.profiles)


def _whole(case: Case, index: int) -> Case:
    """A copy of the case (attributes for the reproducer set on the copy, not on the suite's case)."""
    c = copy.copy(case)
    object.__setattr__(c, "_index", index)
    object.__setattr__(c, "_slice", None)
    return c


def _reproducers(target: Target, fam: Any, picks: list[tuple[TaskResult, Task, str, str, dict[str, Any],
                                                               Expectation]]) -> None:
    """Fill ``repro`` of each picked (result, task, comparison attr, class, outputs, expectation): the example
    as text and a command calling the backend on that one input. The input is run alone first (then as 64
    copies, which takes a vectorized path); the command is written for the first form that gives the same bits
    as in the case, else it is marked as depending on the surrounding elements."""
    todo = []
    for res, task, attr, cls, got, exp in picks:
        cmp_: Comparison = getattr(res, attr)
        name, i = cmp_.examples[cls][0]
        want = int(bits(np.asarray(got[name]).reshape(-1)[i : i + 1])[0])
        todo.append([res, task, attr, cls, got, exp, name, i, want, None, ""])
    reduce = getattr(fam, "reduce", None)
    for k in (1, 64):
        pending = [t for t in todo if t[9] is None]
        if not pending:
            break
        if reduce is None:
            small = [_replicated(t[1].case, t[7], k, target.copies) for t in pending]
        elif k == 1:
            small = [reduce(t[1].case, t[7], t[6]) for t in pending]
        else:  # the reduced case is not enough (the backend needs more elements, or gives other bits): all of it
            small = [_whole(t[1].case, t[7]) for t in pending]
        try:
            outs = target.run(small)
        except Exception as exc:
            outs = [exc] * len(small)
        for t, c1, o in zip(pending, small, outs):
            if isinstance(o, BaseException) or t[6] not in o:
                continue
            j = getattr(c1, "_index", 0)
            if int(bits(np.asarray(o[t[6]]).reshape(-1)[j : j + 1])[0]) == t[8]:
                t[9] = c1
                t[10] = "" if k == 1 or reduce is not None else \
                    f"the element alone gives other bits; {k} copies of it reproduce"
    sections = getattr(fam, "CLASS_SECTIONS", {})
    for res, task, attr, cls, got, exp, name, i, _want, c1, note in todo:
        case = task.case
        if c1 is not None and not getattr(fam, "WHOLE_SNIPPETS", True) and getattr(c1, "_slice", 0) is None:
            c1 = None  # the whole case reproduces, but the family's snippets write one output element's problem
        if c1 is None:
            c1, j = case, i
            note = ("this element gives other bits alone and as 64 copies: the backend's result depends on the "
                    "surrounding elements; reproduce with the whole case (`qref run --backend "
                    f"{target.backend} --target {target.name} --include '{case.id}' --no-xfail`)")
        else:
            j = getattr(c1, "_index", 0)
        object.__setattr__(c1, "_output", name)  # which output the snippet prints (multi-output families)
        try:
            snippet = target.snippet(c1, j)
        except Exception as exc:
            snippet = f"(no snippet: {first_line(exc)})"
        cmp_ = getattr(res, attr)
        script, prints = standalone(snippet, case, name, int(bits(np.asarray(got[name]).reshape(-1)[i : i + 1])[0]),
                                    int(bits(exp.outputs[name].reshape(-1)[i : i + 1])[0]))
        cmp_.repro[cls] = {
            "case": case.id, "index": str(i), "output": name,
            "input": _describe_input(fam, case, i, name),
            "expected": fam.describe_output(case, name, exp.outputs[name].reshape(-1)[i : i + 1]),
            "got": fam.describe_output(case, name, np.asarray(got[name]).reshape(-1)[i : i + 1]),
            "spec": sections.get(cls.split("+")[0]) or ", ".join(fam.spec_sections(case)),
            "command": script, "prints": prints, "note": note,
        }


#: the longest reproducer script written (characters); a longer one (an input of thousands of elements) is
#: replaced by the qref command that runs the case
MAX_SCRIPT = 6000


def standalone(snippet: str, case: Case, output: str, got: int, expected: int) -> tuple[str, str]:
    """(script, what it prints): the adapter's snippet (the backend's own API, numpy and ml_dtypes, inputs as
    literal bits; its last statement ``print(hex(EXPR))``) with that statement replaced by one printing
    ``got 0x.. expected 0x..``, the expected bits written in as a literal (computed by qref now). Codes of a
    narrow format keep only the format's bits. ("", "") when the snippet has no such statement or is too long."""
    from ..formats import get_format

    e = case.expected[output]
    width = 8 * e.dtype.itemsize
    fmt = case.array_formats.get(output)
    if fmt is not None:
        width = min(width, get_format(fmt).bits)
    expected &= (1 << width) - 1
    k = snippet.rfind("print(hex(")
    if k < 0 or not snippet.rstrip().endswith("))") or len(snippet) > MAX_SCRIPT:
        return "", ""
    head, expr = snippet[:k].rstrip(), snippet[k + len("print(hex("):].rstrip()[:-2]
    head = head[:-1].rstrip() if head.endswith(";") else head
    n = 2 + (width + 3) // 4
    lines = [*head.splitlines(), f"got = int({expr})", f"print(f'got {{got:#0{n}x}} expected {expected:#0{n}x}')"]
    return "\n".join(lines), f"got {got:#0{n}x} expected {expected:#0{n}x}"


def _describe_input(fam: Any, case: Case, index: int, output: str) -> str:
    """The input behind element ``index`` of ``output`` (families whose outputs are not per input element, e.g.
    per-block scales, take the output name)."""
    fn = fam.describe_input
    if "output" in inspect.signature(fn).parameters:
        return str(fn(case, index, output=output))
    return str(fn(case, index))


def run_target(target: Target, tasks: list[Task], host_variants: bool = False) -> list[TaskResult]:
    """Run one target on its tasks: pass when every specified element matches the reference, else fail (xfail
    entries are applied afterwards, by ``judge``). host_variants: tasks a CPU variant touches will be reported as
    variants (the backend is not pinned, ``mark_variants``): they are not taken as the examples of a class."""
    fam = get_family(target.family)
    out: list[TaskResult] = []
    runnable: list[Task] = []
    for t in tasks:
        reason = target.supports(t.case)
        if reason:
            out.append(TaskResult(target.name, target.family, t.id, t.ids, "unsupported", reason,
                                  size=t.case.size))
        else:
            runnable.append(t)
    if not runnable:
        return out
    before = [_digest(t.case) for t in runnable]
    try:
        outputs = target.run([t.case for t in runnable])
    except Exception as exc:  # a whole-batch failure is reported per task
        outputs = [exc] * len(runnable)
    for k, t in enumerate(runnable):  # a backend writing into the suite's arrays would corrupt every comparison
        if _digest(t.case) != before[k]:
            raise QrefError(f"target {target.name} modified the input arrays of case {t.id}: the adapter must "
                            "pass copies to the backend")
    if len(outputs) != len(runnable):
        raise QrefError(f"target {target.name} returned {len(outputs)} results for {len(runnable)} cases")
    best: dict[tuple[str, str, str], Any] = {}
    compared: list[tuple[TaskResult, Task, Any, Expectation, Expectation]] = []
    for t, got in zip(runnable, outputs):
        res = TaskResult(target.name, target.family, t.id, t.ids, "pass", size=t.case.size)
        if isinstance(got, Unsupported):
            res.status, res.reason = "unsupported", str(got)
            out.append(res)
            continue
        if not isinstance(got, BaseException):
            try:
                _check_outputs(t.case, got)
            except QrefError as exc:
                got = exc
        if isinstance(got, BaseException):
            res.status, res.reason = "crash", first_line(got)
            out.append(res)
            continue
        ref = target.reference
        try:
            exp_ref = _expectation(fam, t, ref)
            exp_spec = exp_ref if ref == fam.SPEC_PROFILE else _expectation(fam, t, fam.SPEC_PROFILE)
        except Unsupported as exc:  # qref's profile (or the spec) does not accept the case: nothing to compare
            res.status, res.reason = "unsupported", str(exc)
            out.append(res)
            continue
        res.vs_profile = compare(t.case, fam, exp_ref, got, ref)
        if ref == fam.SPEC_PROFILE:
            res.vs_spec = res.vs_profile
        else:
            # elements the target's own profile leaves undefined (LLVM poison, TBD) say nothing about the spec
            for name, m in exp_ref.unspecified.items():
                if name in exp_spec.outputs:
                    prev = exp_spec.unspecified.get(name)
                    exp_spec.unspecified[name] = np.asarray(m, bool) | (False if prev is None else np.asarray(prev))
            res.vs_spec = compare(t.case, fam, exp_spec, got, fam.SPEC_PROFILE)
        diverge = getattr(fam, "divergence", None)
        if diverge is not None:  # where the spec or the target's profile leaves the result unspecified
            res.unspecified = diverge(t.case, got, {k: np.asarray(v, bool) for k, v in exp_spec.unspecified.items()})
        if not res.vs_profile.ok:
            res.status = "fail"
            drift = getattr(fam, "drift_note", None)  # a fitted record's bits differ, the spec's bound holds
            why = drift(t.case, ref) if drift is not None and res.vs_spec.ok and ref != fam.SPEC_PROFILE else ""
            if why:
                res.status, res.reason = "drift", why
        out.append(res)
        compared.append((res, t, got, exp_ref, exp_spec))
    ties = _truncation_first(fam, target.reference, compared)
    for res, t, got, exp_ref, exp_spec in compared:  # relabelled ties show their class last (not a clear example)
        if host_variants and any(v.touches(res.target, c) for v in cpu_variants(res.target) for c in res.cases):
            continue
        _offer(best, res, t, "vs_profile", got, exp_ref, (id(res), "vs_profile") in ties)
        if res.vs_spec is not res.vs_profile:
            _offer(best, res, t, "vs_spec", got, exp_spec, (id(res), "vs_spec") in ties)
    _reproducers(target, fam, [best[k][:6] for k in sorted(best)])
    return out


def _truncation_first(fam: Any, ref: str, compared: list[tuple[TaskResult, Task, Any, Expectation, Expectation]]
                      ) -> set[tuple[int, str]]:
    """On exact ties truncation toward zero and a tie rule (half toward zero) give the same code: where the target
    truncates on other tasks of the same format (a class "truncation..." that no tie rule explains), classify its
    tie-rule mismatches again with truncation tried first, so they get the target's mechanism (elements.md §2.3)."""
    def fmt(r: TaskResult) -> str:
        return r.task.split("/")[1] if r.task.count("/") else r.task

    seen = {(attr, fmt(r)) for r, *_ in compared for attr in ("vs_profile", "vs_spec")
            if any(c.split("+")[0] == "truncation" for c in getattr(r, attr).classes)}
    done: set[tuple[int, str]] = set()
    for r, t, got, exp_ref, exp_spec in compared:
        same = r.vs_spec is r.vs_profile
        for attr, exp, profile in (("vs_profile", exp_ref, ref), ("vs_spec", exp_spec, fam.SPEC_PROFILE)):
            if (attr, fmt(r)) not in seen or (same and attr == "vs_spec"):
                continue
            if any(c.split("+")[0] == "tie_rule" for c in getattr(r, attr).classes):
                setattr(r, attr, compare(t.case, fam, exp, got, profile, prefer=("truncation",)))
                done |= {(id(r), "vs_profile"), (id(r), "vs_spec")} if same else {(id(r), attr)}
        if same:
            r.vs_spec = r.vs_profile
    return done


def _digest(case: Case) -> bytes:
    """sha256 of a case's input arrays (to catch an adapter that lets a backend write into them)."""
    h = hashlib.sha256()
    for name in sorted(case.inputs):
        h.update(np.ascontiguousarray(case.inputs[name]).tobytes())
    return h.digest()


def judge(results: list[TaskResult], xfails: Xfails, features: frozenset[str] | None = None) -> None:
    """Apply expected failures: a failing or crashing task whose every class is covered (by entries active for the
    backend's CPU ``features``) becomes "xfail"."""
    for r in results:
        if r.status == "unsupported":
            continue
        failing = {"crash"} if r.status == "crash" else (set(r.vs_profile.classes) if r.vs_profile else set())
        expected, why = xfails.check(r.target, r.cases, failing if r.status in ("fail", "crash", "drift") else set(),
                                     features)
        if expected:
            r.reason = why if r.status in ("fail", "drift") else f"{why} (crash: {r.reason})"
            r.status = "xfail"


def host_dependent(backend: str, mode: str) -> bool:
    """Does what ``backend`` computes in a run of ``mode`` depend on the host CPU (not pinned: profiles.md §6)?"""
    return not (mode == "baseline" and backend in PINS)


def mark_variants(results: list[TaskResult], backend: str, mode: str) -> None:
    """Tasks touched by a CPU variant of their target whose outcome depends on the host (the backend is not
    pinned in this run) get the status "variant" (after ``judge``): they pass where the variant does not apply and
    fail, crash or cannot run by the variant's classes (covered by ``cpu:``-keyed xfail entries) where it does, so
    they are reported in the report's §4, not counted among the host-independent results. A task that fails
    unexpectedly, or differs by a class no touching variant names, keeps its status."""
    if not host_dependent(backend, mode):
        return
    for r in results:
        if r.status in ("fail", "crash"):
            continue
        hit = [v for v in cpu_variants(r.target) if any(v.touches(r.target, c) for c in r.cases)]
        named = {c for v in hit for c in v.classes}
        if r.status == "unsupported" or (r.status == "xfail" and "(crash:" in r.reason):
            shows = {"unsupported" if r.status == "unsupported" else "crash"}
        else:
            shows = set(r.vs_profile.classes) if r.vs_profile is not None and r.status != "pass" else set()
        if hit and shows <= named:
            r.host_status = r.status
            r.status, r.reason = "variant", "; ".join(f"{v.name} ({v.condition})" for v in hit)


def resolve_target(tg: Target, records: Mapping[str, str] | None = None) -> tuple[Target, str]:
    """The target with its profile resolved to a record key (``NAME@TAG`` for versioned profiles) and the drift
    note ("" when the installed version is covered). ``records`` forces a record per profile name, e.g.
    {"ml_dtypes": "ml_dtypes@0.6"} (profiles.md §2)."""
    if tg.profile is None:
        return tg, ""
    if tg.family == "matmul":  # a fitted CPU GEMM profile (qref.mma.cpu_profiles, mma.md §12.2): not versioned here
        from .families.matmul import cpu_gemm_profile

        if cpu_gemm_profile(tg.profile) is not None:
            return tg, ""
    name = (records or {}).get(tg.profile.split("@", 1)[0], tg.profile)
    res = resolve_profile(name, PROFILE_FAMILY[tg.family])
    return dataclasses.replace(tg, profile=res.profile.key), (res.note if res.drift else "")


PIN_ENV = "QREF_LLVM_TARGET"  # "CPU;FEATURES": read by adapters that JIT-compile with LLVM (mlir.py)


def apply_pin(name: str) -> None:
    """Pin backend ``name``'s code generation to the baseline (profiles.md §6) in this process, before the backend
    is imported: its environment variables, and the LLVM target for adapters that JIT-compile."""
    pin = PINS.get(name)
    if pin is None:
        return
    for key, value in pin.env:
        if key == "XLA_FLAGS" and "jax" in sys.modules and os.environ.get(key) != value:
            raise QrefError(f"cannot pin {name} to the baseline ISA: jax is already imported in this process; run "
                            "with isolate=True (each backend in its own process)")
        os.environ[key] = value
    if pin.llvm_target is not None:
        os.environ[PIN_ENV] = ";".join(pin.llvm_target)


def run_backend(name: str, suite_path: str | None, include: Sequence[str], exclude: Sequence[str],
                targets: Sequence[str], records: Mapping[str, str] | None = None, cpu: str = "native",
                validated: Sequence[str] = ()) -> tuple[list[TargetInfo], list[TaskResult], str | None]:
    """Run every (selected) target of one backend: (targets, results, skip reason). Used in a child process.
    Only a missing backend is a skip; any other failure (a suite that does not load, an adapter error) raises.
    cpu: "native" or "baseline" (the backend's pin applied first). validated: the sha256 of manifests the parent
    process validated (suite.validated_manifests): the same bytes are not validated again here."""
    if cpu == "baseline":
        apply_pin(name)
    try:
        tgts = adapters.load_targets(name)
    except BackendMissing as exc:
        return [], [], str(exc)
    trust_validated(validated)
    cache = CaseCache(load_suite(suite_path))
    infos, results = [], []
    for tg in tgts:
        if targets and not any(fnmatch.fnmatchcase(tg.name, p) for p in targets):
            continue
        tg, drift = resolve_target(tg, records)
        prelude = PINS[name].prelude if cpu == "baseline" and name in PINS else ""
        if prelude:  # a reproducer of a pinned run pins the backend the same way
            tg = dataclasses.replace(tg, snippet=lambda c, i, f=tg.snippet, p=prelude: p + "\n" + f(c, i))
        infos.append(TargetInfo(tg.backend, tg.name, tg.family, tg.api, tg.profile, tg.notes, drift))
        mine = run_target(tg, select_tasks(tg, cache.family(tg.family), include, exclude), host_dependent(name, cpu))
        if drift:  # the reference is a record for another version: its differences are drift, not failures
            for r in mine:
                if r.status == "fail":
                    r.status, r.reason = "drift", drift
        results.extend(mine)
    return infos, results, None


BackendArgs = tuple[str, str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...], dict[str, str], str,
                    tuple[str, ...]]


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished subprocesses (a compiler the backend runs, e.g.
    iree-compile)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _child(args: BackendArgs) -> Any:
    """run_backend in a child process, with the (wall, CPU) seconds it took there."""
    t0, c0 = time.monotonic(), _cpu_seconds()
    out = run_backend(*args)
    return (*out, (time.monotonic() - t0, _cpu_seconds() - c0))


def _run_isolated(args: BackendArgs) -> Any:
    """One backend in a fresh spawned process of its own: libraries cannot disturb one another (a pool of one
    process per backend, so a backend that kills its process fails alone)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(_child, args).result()


def default_jobs() -> int:
    """All the cores this process may run on (the default of ``run(jobs=)`` and ``qref run --jobs``)."""
    return cores()


#: CPU seconds a backend's run takes on conformance/v1 (measured, --cpu baseline, 2-core Zen 4): with --jobs > 1
#: the longest start first (longest-processing-time order), so that a long backend started last does not run
#: alone at the end; unknown backends count 0 (started last, in their order). Only the start order depends on it.
EXPECTED_SECONDS = {"jax": 117.0, "iree": 75.0, "litert": 71.0, "qwix": 52.0, "torch": 51.0, "torch_compile": 37.0,
                    "stablehlo": 22.0, "onnxruntime": 16.0, "mlir": 16.0, "onnx_reference": 14.0, "openvino": 12.0,
                    "mlx": 10.0, "bitsandbytes": 10.0, "torchao": 9.0, "aqt": 9.0, "keras": 7.0}


def start_order(names: Sequence[str]) -> list[int]:
    """Indices of ``names`` in the order their runs start with --jobs > 1: longest expected first
    (``EXPECTED_SECONDS``), ties in the given order."""
    return sorted(range(len(names)), key=lambda i: -EXPECTED_SECONDS.get(names[i], 0.0))


def _backend_runs(argsets: list[BackendArgs], isolate: bool, jobs: int) -> Iterator[Any]:
    """The outcome of each backend's run, in the order of ``argsets``: (targets, results, skip reason, seconds),
    or the exception that ended it. With isolate and jobs > 1 up to ``jobs`` backend processes run at the same
    time (each still alone in its process), started longest first (``start_order``); the outcomes are taken in
    the order of ``argsets``, so the run is the same as a serial one."""
    def one(args: BackendArgs) -> Any:
        try:
            return _run_isolated(args) if isolate else _child(args)
        except Exception as exc:
            return exc

    if not isolate or jobs <= 1 or len(argsets) <= 1:
        for args in argsets:
            yield one(args)
        return
    with ThreadPoolExecutor(max_workers=min(jobs, len(argsets))) as threads:
        order = start_order([a[0] for a in argsets])
        started = {i: threads.submit(one, argsets[i]) for i in order}
        futures = [started[i] for i in range(len(argsets))]
        try:
            for fut in futures:
                yield fut.result()
        finally:  # a consumer that stops early (an interrupt) does not start the backends still queued
            for fut in futures:
                fut.cancel()


def _offer(best: dict[tuple[str, str, str], Any], res: TaskResult, task: Task, attr: str, got: dict[str, Any],
           exp: Expectation, last: bool = False) -> None:
    """Keep, per (comparison, class, format or scheme), the smallest task (then the first id), tasks marked
    ``last`` only when no other has the class: the examples the report and the findings show (a finding shows the
    one of its most frequent format)."""
    fmt = res.task.split("/")[1] if res.task.count("/") else res.task
    for cls in getattr(res, attr).classes:
        key = (attr, cls, fmt)
        cur = best.get(key)
        if cur is None or (last, res.size, res.task) < (cur[6], cur[0].size, cur[0].task):
            best[key] = (res, task, attr, cls, got, exp, last)


def run(backends: Sequence[str] | str = "all", suite: str | os.PathLike[str] | Suite | None = None, *,
        include: Sequence[str] = (), exclude: Sequence[str] = (), xfail_files: Sequence[str | os.PathLike[str]]
        | None = None, targets: Sequence[str] = (), progress: TextIO | None = None, isolate: bool = True,
        records: Mapping[str, str] | None = None, cpu: str = "native", jobs: int | None = None) -> RunResults:
    """Run ``backends`` ("all" or names) on ``suite`` (default: the committed corpus).

    isolate: run each backend in its own (spawned) process (default; in one process torch-mlir's StableHLO
    interpreter gives wrong uniform_quantize results after the upstream-MLIR ExecutionEngine has run).
    include / exclude: case-id globs. xfail_files: None = conformance/xfails/<backend>.txt of each backend that
    has one; [] = no expected failures. targets: target-name globs to restrict to (default all). records: force
    a profile record per profile name ({"ml_dtypes": "ml_dtypes@0.6"}); differences from a record that does not
    cover the installed version are reported as drift (profiles.md §2). cpu: "native" (default: every backend as
    built for this CPU) or "baseline" (the backends in qref.profiles.cpu.PINS pinned to x86-64-v3: the same bits on
    every supported x86-64 CPU; how docs/conformance.md is made; profiles.md §6). jobs: how many backends run at
    the same time, each in its own process (default: every core, ``default_jobs()``; 1: one after the other;
    isolate=False runs them one after the other in this process); the results are the same for every value.
    """
    check_choice("CPU mode", cpu, CPU_MODES)
    if jobs is None:
        jobs = default_jobs()
    if not isinstance(jobs, int) or jobs < 1:
        raise QrefError(f"jobs={jobs!r}: give a number of backends to run at the same time, 1 or more")
    names = list(adapters.BACKENDS) if backends == "all" or backends == ["all"] else list(backends)
    for n in names:
        adapters.backend_module(n)  # unknown names raise with close matches
    s = suite if isinstance(suite, Suite) else load_suite(suite)
    if xfail_files is None:
        d = default_xfail_dir()
        xfail_files = [d / f"{n}.txt" for n in names if (d / f"{n}.txt").exists()]
    xf = load_xfails(list(xfail_files))
    res = RunResults(suite=str(s.manifest.get("name", Path(s.root).name)), suite_cases=len(s), backends=names,
                     filtered=bool(include or exclude or targets), cpu=host_cpu(), cpu_mode=cpu)
    argsets = [(n, str(s.root), tuple(include), tuple(exclude), tuple(targets), dict(records or {}), cpu,
                validated_manifests()) for n in names]
    for n, outcome in zip(names, _backend_runs(argsets, isolate, jobs)):
        res.versions[n] = adapters.versions(n)
        if isinstance(outcome, Exception):  # never a skip: the backend could not be run (exit status 1)
            res.errors[n] = f"the backend's run failed: {first_line(outcome)}"
            if progress is not None:
                print(f"qref run: {n}: ERROR: {res.errors[n]}", file=progress)
            continue
        infos, results, skipped, seconds = outcome
        if skipped:
            res.skipped[n] = skipped
            if progress is not None:
                print(f"qref run: {n}: skipped: {skipped}", file=progress)
            continue
        judge(results, xf, res.features(n))
        mark_variants(results, n, cpu)
        res.targets.extend(infos)
        res.results.extend(results)
        res.seconds[n], res.cpu_seconds[n] = seconds
        if progress is not None:
            for info in infos:
                mine = [r for r in results if r.target == info.name]
                counts = {s_: sum(r.status == s_ for r in mine) for s_ in STATUSES}
                print(f"qref run: {info.name}: {len(mine)} tasks: " +
                      ", ".join(f"{v} {k}" for k, v in counts.items() if v), file=progress)
            print(f"qref run: {n}: {res.seconds[n]:.1f} s ({res.cpu_seconds[n]:.1f} s CPU)", file=progress)
    res.stale_xfails = [f"{e.where}: {e.target} {e.cases} {','.join(e.classes)} (matched {e.matched} task(s) that "
                        "ran; none failed with these classes: the entry is stale, delete it)" for e in xf.stale()]
    return res


def summary_line(r: RunResults) -> str:
    counts = {s_: sum(x.status == s_ for x in r.results) for s_ in STATUSES}
    return ("qref run: " + ", ".join(f"{v} {k}" for k, v in counts.items()) +
            f"; {len(r.stale_xfails)} stale xfail entries" + (f"; skipped: {', '.join(r.skipped)}" if r.skipped
                                                                 else "") +
            (f"; ERRORS: {', '.join(r.errors)}" if r.errors else ""))


def print_failures(r: RunResults, stream: TextIO = sys.stderr, limit: int = 50) -> None:
    for x in r.unexpected[:limit]:
        cmp_: Comparison | None = x.vs_profile
        detail = x.reason if x.status == "crash" else ", ".join(f"{k} {v}" for k, v in (cmp_.classes.items()
                                                                                       if cmp_ else []))
        print(f"UNEXPECTED {x.status.upper()} {x.target} {x.task}: {detail}", file=stream)
    for s_ in r.stale_xfails:
        print(f"STALE XFAIL {s_}", file=stream)
    for n, why in sorted(r.errors.items()):
        print(f"ERROR {n}: {why}", file=stream)
    drifted = r.drifted
    if drifted:
        notes = sorted({t.drift for t in r.targets if t.drift})
        print(f"DRIFT {len(drifted)} task(s) differ from a record made for another version: " + "; ".join(notes),
              file=stream)


__all__ = [
    "EXPECTED_SECONDS",
    "MAX_SCRIPT",
    "PIN_ENV",
    "STATUSES",
    "BackendArgs",
    "CaseCache",
    "RunResults",
    "TargetInfo",
    "Task",
    "apply_pin",
    "default_jobs",
    "host_dependent",
    "judge",
    "mark_variants",
    "print_failures",
    "resolve_target",
    "run",
    "run_backend",
    "run_target",
    "select_tasks",
    "standalone",
    "start_order",
    "summary_line",
]
