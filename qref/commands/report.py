"""``qref report --backend NAME [--finding ID]``: the findings of one backend (one per root cause), or one of them
as a ready-to-file bug report (title, versions, reproducer, expected with the spec citation)."""

from __future__ import annotations

import argparse

from ._options import command, suite_option


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "report", _run,
                "a backend's findings, or one as a ready-to-file bug report", """
        List the findings of a backend (one per root cause: backend, family, comparison, mechanism) or print one as
        a bug report. Reads a previous run (--results DIR/results.json from `qref run --out DIR`) or runs the
        backend now.""")
    p.add_argument("--backend", "-b", required=True, metavar="NAME", help="the backend")
    p.add_argument("--finding", default=None, metavar="ID", help="print this finding as a bug report")
    p.add_argument("--results", default=None, metavar="FILE", help="results.json of a previous `qref run --out`")
    suite_option(p, "suite directory when running now (default: the committed one)")


def _run(args: argparse.Namespace) -> int:
    from ..errors import QrefError, unknown_name
    from ..harness import findings, report, runner

    if args.results:
        res = report.load_results(args.results)
        if args.backend not in res.backends:
            raise QrefError(f"{args.results} holds no run of {args.backend} (it ran {', '.join(res.backends)})")
    else:
        res = runner.run([args.backend], args.suite)
    fs = [f for f in findings.findings(res) if f.backend == args.backend]
    if args.finding is None:
        if not fs:
            print(f"{args.backend}: no findings")
        for f in fs:
            print(f"{f.id:60s} {len(f.tasks):4d} task(s)  {f.statement}")
        return 0
    match = [f for f in fs if f.id == args.finding]
    if not match:
        raise unknown_name("finding", args.finding, [f.id for f in fs])
    print(findings.bug_report(res, match[0]), end="")
    return 0


__all__ = ["register"]
