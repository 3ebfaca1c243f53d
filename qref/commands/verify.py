"""``qref verify DIR``: check a suite's manifest, schema and every file's sha256 (docs/vectors.md §3)."""

from __future__ import annotations

import argparse
import sys

from ._options import command, suite_argument


def _run(args: argparse.Namespace) -> int:
    from ..conformance.suite import verify_suite

    rep = verify_suite(args.suite, strict=not args.allow_extra, recompute=args.recompute)
    if rep.ok:
        print(f"ok: {rep.root}: {rep.cases} cases, {rep.files} array files ({rep.bytes / 1e6:.1f} MB), "
              "schema, summary, sha256 of every reference checked"
              + ("; element cases recomputed from their inputs" if args.recompute else ""))
        return 0
    print(f"FAILED: {rep.root}: {len(rep.problems)} problem(s)", file=sys.stderr)
    for p in rep.problems:
        print(f"  {p}", file=sys.stderr)
    return 1


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "verify", _run, "check a suite: manifest schema, file presence and sha256", """
        Check a conformance suite directory: manifest.json against the JSON Schema, schema.json, every reference of
        every array file (present, the manifest's sha256, dtype and shape), the summary, and no unlisted files;
        --recompute also recomputes the expected outputs of the element cases from their inputs and policy (a
        consistent edit of an array and its hash is caught). Exit status 0 when everything holds, 1 with one line
        per problem otherwise.""")
    suite_argument(p)
    p.add_argument("--allow-extra", action="store_true", help="do not report files the manifest does not list")
    p.add_argument("--recompute", action="store_true", help="recompute the element cases' expected outputs from "
                   "their inputs and policy and compare them as bits")


__all__ = ["register"]
