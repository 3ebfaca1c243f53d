"""``qref run --backend NAME|all``: run real backends on a conformance suite and report what conforms
(docs/conformance.md)."""

from __future__ import annotations

import argparse
import sys

from ._options import command, force_option, quiet_option, suite_option


def register(sub: argparse._SubParsersAction) -> None:
    from ..harness.adapters import BACKENDS

    p = command(sub, "run", _run, "run real backends (or your own implementation) on the suite", """
        Run backends on a conformance suite; compare as unsigned bits with the spec default and each backend's qref
        profile; classify differences; write results.json and a markdown report; say what happened to every case the
        selection matched (ran, unsupported with the reason, not run and why, skipped by the filters). Exit status:
        0 when everything conforms or is expected; 1 on unexpected failures or crashes (not covered by an xfail
        entry), stale xfail entries, a backend that could not be run, or when no task ran (nothing was checked); 3
        when the only differences are drift (the installed version is outside every record of its profile, or
        --record forced another version's record: profiles.md §2). Existing --out / --report files are refused
        unless --force, before the run starts.""")
    p.add_argument("--backend", "-b", action="append", default=[], metavar="NAME",
                   help=f"backend to run (repeatable): {', '.join(BACKENDS)} or all")
    p.add_argument("--callable", dest="callable_", default=None, metavar="MODULE:FUNCTION",
                   help="your own implementation instead of a backend: MODULE:FUNCTION or path/to/file.py:FUNCTION, "
                   "called as FUNCTION(operation, inputs, spec) -> outputs (or FUNCTION(x, format) -> codes for "
                   "element encoders; docs/user-backends.md); needs --family")
    p.add_argument("--family", choices=("elements", "uniform", "block", "lookup", "matmul", "recipes"), default=None,
                   help="the family --callable implements")
    p.add_argument("--profile", default=None, metavar="NAME",
                   help="with --callable: the reference profile record of the family (default: the spec)")
    p.add_argument("--policy", action="append", default=[], metavar="KEY=VALUE",
                   help="with --callable --family elements: the reference cast policy, e.g. overflow=saturate "
                   "(repeatable; fields of qref.CastPolicy)")
    suite_option(p, "suite directory (default: $QREF_SUITE or conformance/v1)")
    p.add_argument("--include", action="append", default=[], metavar="PATTERN", help="case-id glob to include")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help="case-id glob to exclude")
    p.add_argument("--target", action="append", default=[], metavar="PATTERN",
                   help="target-name glob to run (e.g. 'jax.astype.*'; default: every target of the backends)")
    p.add_argument("--xfail", action="append", default=None, metavar="FILE",
                   help="expected-failure file (repeatable; default: conformance/xfails/<backend>.txt)")
    p.add_argument("--no-xfail", action="store_true", help="ignore every expected-failure file")
    p.add_argument("--record", action="append", default=[], metavar="NAME@TAG",
                   help="compare against this profile record instead of the installed version's (repeatable, "
                   "e.g. ml_dtypes@0.6); differences from a record that does not cover the installed version "
                   "are drift")
    p.add_argument("--cpu", choices=("native", "baseline"), default="native",
                   help="native (default): every backend as built for this CPU (the report records the CPU); "
                   "baseline: pin the backends whose generated code depends on the CPU (XLA, the MLIR JIT) to "
                   "x86-64-v3, so the results are the same on every supported x86-64 CPU (how docs/conformance.md "
                   "is made; profiles.md §6)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="run up to N backends at the same time, each in its own process (default: all the cores "
                   "this process may use; 1: one after the other); results.json, the report and the findings are "
                   "the same for every N")
    p.add_argument("--out", default=None, metavar="DIR", help="write DIR/results.json and DIR/report.md")
    p.add_argument("--report", default=None, metavar="FILE", help="write the markdown report to FILE "
                   "(docs/conformance.md for the committed one)")
    p.add_argument("--findings", default=None, metavar="DIR", help="write the findings (one per root cause): "
                   "DIR/README.md, DIR/divergence.md and one page per backend (docs/conformance/ for the committed "
                   "ones)")
    force_option(p, "overwrite existing --out / --report / --findings files")
    quiet_option(p, "no progress lines")


def _run(args: argparse.Namespace) -> int:
    from ..conformance.outputs import check_output_dir, check_output_file
    from ..harness import report, runner

    # the outputs are checked before the run (which can take minutes), so a bad path loses nothing
    if args.out:
        check_output_dir(args.out, "--out", args.force, ("results.json", "report.md"))
    if args.report:
        check_output_file(args.report, "--report", args.force)
    if args.findings:
        from ..harness.adapters import BACKENDS

        check_output_dir(args.findings, "--findings", args.force, ("README.md", "divergence.md",
                                                                      *(f"{b}.md" for b in BACKENDS)))
    from ..errors import QrefError
    from ..validators import check_outside

    records = {}
    for r in args.record:
        if "@" not in r:
            raise QrefError(f"--record {r!r}: give NAME@TAG, e.g. ml_dtypes@0.6 (qref profiles lists the records)")
        records[r.split("@", 1)[0]] = r
    xf = [] if args.no_xfail else args.xfail
    from ..conformance.suite import load_suite

    # a suite that does not verify (a damaged, missing or foreign file: vectors.md §3.2) is refused before the run
    suite = load_suite(args.suite, verify=True)
    for opt in ("out", "report", "findings"):  # a command never writes into or over the suite it reads
        if getattr(args, opt):
            check_outside(getattr(args, opt), suite.root, f"--{opt}")
    if args.callable_ is not None:
        res = _run_callable(args, xf)
    else:
        if not args.backend:
            raise QrefError("qref run needs --backend NAME (or all), or --callable MODULE:FUNCTION --family F")
        if args.family or args.profile or args.policy:
            raise QrefError("--family, --profile and --policy go with --callable; a backend's targets name their "
                            "own profiles (use --record NAME@TAG to force a record)")
        backends = "all" if "all" in args.backend else args.backend
        res = runner.run(backends, args.suite, include=args.include, exclude=args.exclude, xfail_files=xf,
                         targets=args.target, progress=None if args.quiet else sys.stderr, records=records,
                         cpu=args.cpu, jobs=args.jobs)
    if args.out:
        report.write_results(res, args.out)
        report.write_report(res, f"{args.out}/report.md", link_findings=bool(args.findings))
    if args.report:
        report.write_report(res, args.report, link_findings=bool(args.findings))
    if args.findings:
        from ..harness import findings

        findings.write_findings(res, args.findings)
    print(runner.summary_line(res))
    ran = account(res, suite, args.include, args.exclude, args.family if args.callable_ is not None else None)
    runner.print_failures(res, sys.stderr)
    if not ran:
        print("qref run: error: no task ran, nothing was checked (see the lines above for what the selection "
              "matched); widen --include / --target / --family or check the suite", file=sys.stderr)
        return 1
    if not res.ok:
        return 1
    return 3 if res.drifted else 0


def account(res: object, suite: object, include: list[str], exclude: list[str], family: str | None,
            stream: object = None) -> int:
    """Print what happened to every case the selection matched: run (in how many tasks, by status), unsupported
    (with the reasons), not run (no selected target is asked for it, and why), skipped by the filters. Returns the
    number of tasks that ran (pass, fail, xfail, crash, drift or variant: anything but unsupported)."""
    import fnmatch
    from collections import Counter

    out = stream if stream is not None else sys.stdout
    cases = suite.manifest["cases"]  # type: ignore[attr-defined]

    def kept(cid: str) -> bool:
        if include and not any(fnmatch.fnmatchcase(cid, p) for p in include):
            return False
        return not any(fnmatch.fnmatchcase(cid, p) for p in exclude)

    matched = [c for c in cases if kept(c["id"]) and (family is None or c["family"] == family)]
    status: dict[str, set[str]] = {}
    reasons: Counter[str] = Counter()
    ran = 0
    for r in res.results:  # type: ignore[attr-defined]
        ran += r.status != "unsupported"
        for cid in r.cases:
            status.setdefault(cid, set()).add(r.status)
        if r.status == "unsupported":
            reasons[f"{r.target}: {r.reason}"] += len(r.cases)
    run_ids = [c for c in matched if status.get(c["id"], set()) - {"unsupported"}]
    unsup = [c for c in matched if status.get(c["id"]) == {"unsupported"}]
    left = [c for c in matched if c["id"] not in status]
    fams = {t.family for t in res.targets}  # type: ignore[attr-defined]
    refs = sorted({str(t.profile) for t in res.targets})  # type: ignore[attr-defined]
    by_id = {c["id"]: c for c in cases}
    ops = {(by_id[i]["family"], by_id[i]["operation"]) for i in status if i in by_id}  # what the targets ran
    why: Counter[str] = Counter()
    for c in left:
        listed = ", ".join(c["profiles"]) or (str(c["profile"]) if c["profile"] else "")
        if c["family"] not in fams:
            why[f"no selected target runs the {c['family']} family"] += 1
        elif (c["family"], c["operation"]) not in ops and not listed:
            why[f"{c['family']}/{c['operation']}: no selected target runs {c['operation']}"] += 1
        elif listed:
            why[f"{c['family']}/{c['operation']}: its expected outputs are those of {listed}, not of a selected "
                f"target's reference (the spec or one of the {len(refs)} profiles the selected targets name)"] += 1
        else:
            why[f"{c['family']}/{c['operation']}: its expected outputs are no recorded profile's (a policy variant; "
                "a profile with the same policy has cases of its own, e.g. */profile/<name>/*)"] += 1
    filt = len(cases) - len(matched)
    print(f"qref run: the selection matched {len(matched)} of {len(cases)} cases ({filt} skipped by the filters"
          f"{' and --family' if family else ''}): {len(run_ids)} ran, {len(unsup)} unsupported, {len(left)} not run",
          file=out)
    for text, n in reasons.most_common(10):
        print(f"  {n:6d} unsupported: {text}", file=out)
    for text, n in why.most_common(10):
        print(f"  {n:6d} not run: {text}", file=out)
    return ran


def _run_callable(args: argparse.Namespace, xfail_files: list[str] | None) -> object:
    from ..errors import QrefError
    from ..harness import user

    if args.backend:
        raise QrefError("give --backend or --callable, not both")
    if args.family is None:
        raise QrefError(f"--callable needs --family (one of {', '.join(user.OPERATIONS)})")
    policy = None
    if args.policy:
        policy = {}
        for kv in args.policy:
            key, sep, value = kv.partition("=")
            if not sep:
                raise QrefError(f"--policy {kv!r}: give KEY=VALUE, e.g. overflow=saturate")
            policy[key] = int(value) if value.isdigit() else value
    fn = user.load_callable(args.callable_)
    return user.check(fn, args.family, profile=args.profile, policy=policy, suite=args.suite,
                      include=args.include, exclude=args.exclude, xfail_files=xfail_files or [],
                      name=f"user.{args.callable_.rpartition(':')[2]}", origin=args.callable_)


__all__ = ["account", "register"]
