"""``qref gen OUT``: generate a conformance suite (docs/vectors.md §5)."""

from __future__ import annotations

import argparse
import sys
import time


def _run(args: argparse.Namespace) -> int:
    from ..conformance.generate import generate

    families = None
    if args.families:
        families = [f for part in args.families for f in part.split(",") if f]
    start = time.monotonic()
    m = generate(args.out, families=families, full=args.full, overwrite=args.force,
                 progress=None if args.quiet else sys.stderr)
    s = m["summary"]
    if not args.quiet:
        print(f"wrote {args.out}: {s['cases']} cases, {s['arrays']} arrays, {s['bytes'] / 1e6:.1f} MB of arrays "
              f"({', '.join(m['families']) or 'no families'}; {time.monotonic() - start:.1f} s)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from ..conformance.cases import family_names

    p = sub.add_parser(
        "gen", help="generate a conformance suite (golden vectors) into a directory",
        description="Generate a conformance suite: manifest.json, schema.json and content-addressed .npy arrays. "
        "With no options it writes exactly the committed corpus conformance/v1 (deterministic, byte-identical "
        "across runs, machines and numpy versions). Example: qref gen /tmp/v1 && qref verify /tmp/v1",
    )
    p.add_argument("out", metavar="OUT", help="output directory (must be empty unless --force)")
    p.add_argument("--families", action="append", metavar="F[,F...]",
                   help=f"only these case families (known: {', '.join(family_names())})")
    p.add_argument("--full", action="store_true",
                   help="add the large exhaustive sets that are not committed (every rounding mode on all 16-bit "
                   "sources for every format, larger random sets)")
    p.add_argument("--force", action="store_true", help="replace an existing suite in OUT")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=_run)
