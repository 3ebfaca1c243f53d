"""``qref run --backend NAME|all``: run real backends on a conformance suite and report what conforms
(docs/conformance.md)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from ..harness.adapters import BACKENDS

    p = sub.add_parser(
        "run", help="run real backends (or your own implementation) on the suite",
        description="Run backends on a conformance suite; compare as unsigned bits with the spec default and each "
        "backend's qref profile; classify differences; write results.json and a markdown report. Exit status: 0 "
        "when everything conforms or is expected; 1 on unexpected failures or crashes (not covered by an xfail "
        "entry), stale xfail entries, or a backend that could not be run; 3 when the only differences are drift "
        "(the installed version is outside every record of its profile, or --record forced another version's "
        "record: profiles.md §2). Existing --out / --report files are refused unless --force, before the run "
        "starts.")
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
    p.add_argument("--suite", default=None, help="suite directory (default: $QREF_SUITE or conformance/v1)")
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
    p.add_argument("--force", action="store_true", help="overwrite existing --out / --report / --findings files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_run)


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

    records = {}
    for r in args.record:
        if "@" not in r:
            raise QrefError(f"--record {r!r}: give NAME@TAG, e.g. ml_dtypes@0.6 (qref profiles lists the records)")
        records[r.split("@", 1)[0]] = r
    xf = [] if args.no_xfail else args.xfail
    from ..conformance.suite import load_suite

    # a suite that does not verify (a damaged, missing or foreign file: vectors.md §3.2) is refused before the run
    load_suite(args.suite, verify=True)
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
        report.write_report(res, f"{args.out}/report.md")
    if args.report:
        report.write_report(res, args.report)
    if args.findings:
        from ..harness import findings

        findings.write_findings(res, args.findings)
    print(runner.summary_line(res))
    runner.print_failures(res, sys.stderr)
    if not res.ok:
        return 1
    return 3 if res.drifted else 0


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
                      name=f"user.{args.callable_.rpartition(':')[2]}")
