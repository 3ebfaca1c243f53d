"""``qref export DIR --mlir OUT --jsonl FILE``: a suite as self-checking StableHLO files and JSON lines
(docs/vectors.md §8)."""

from __future__ import annotations

import argparse
from collections import Counter

from ..errors import QrefError


def _run(args: argparse.Namespace) -> int:
    from ..conformance.export import export_jsonl, export_mlir
    from ..conformance.outputs import check_output_dir, check_output_file
    from ..conformance.suite import load_suite

    if not args.mlir and not args.jsonl:
        raise QrefError("nothing to export: give --mlir OUT_DIR and/or --jsonl OUT_FILE")
    if args.mlir:
        check_output_dir(args.mlir, "--mlir", args.force)
    if args.jsonl:
        check_output_file(args.jsonl, "--jsonl", args.force)
    suite = load_suite(args.suite)

    def cases():  # re-read per export: keeps memory bounded
        return suite.select(args.cases)

    if args.mlir:
        skipped: Counter[str] = Counter()
        paths = export_mlir(cases(), args.mlir, suite.manifest["name"], skipped=skipped)
        print(f"wrote {len(paths)} MLIR files under {args.mlir}; {sum(skipped.values())} cases MLIR cannot express "
              "were skipped" + (":" if skipped else ""))
        for why, n in skipped.most_common(8):
            print(f"  {n:6d}  {why}")
    if args.jsonl:
        n = export_jsonl(cases(), args.jsonl)
        print(f"wrote {n} cases to {args.jsonl}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="export a suite as self-checking StableHLO .mlir files and/or JSON lines",
        description="Export the cases of a suite for consumers outside Python: --mlir writes one self-checking "
        "StableHLO file per case MLIR can express (hex constants, check.expect_eq; run with "
        "stablehlo-translate --interpret), --jsonl writes one JSON object per case with every array as hex "
        "strings (TestFloat-like). Example: qref export conformance/v1 --mlir /tmp/mlir --cases "
        "'elements/float8_e4m3fn/*'",
    )
    p.add_argument("suite", metavar="DIR", help="suite directory (e.g. conformance/v1)")
    p.add_argument("--mlir", metavar="OUT_DIR", help="directory for the .mlir files (<case id>.mlir)")
    p.add_argument("--jsonl", metavar="OUT_FILE", help="JSON-lines file, one case per line")
    p.add_argument("--cases", metavar="GLOB", default=None, help="only case ids matching this glob pattern")
    p.add_argument("--force", action="store_true", help="overwrite an existing --jsonl file / non-empty --mlir "
                   "directory")
    p.set_defaults(func=_run)
