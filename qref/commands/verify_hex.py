"""``qref verify-hex REFERENCE RESULTS``: a device's results against hex vectors from ``qref export --hex``
(docs/vectors.md §8.1); mismatches field by field, exit status 0 (none) or 1 (some)."""

from __future__ import annotations

import argparse

from ._options import command


def _run(args: argparse.Namespace) -> int:
    from ..conformance.export import verify_hex

    report = verify_hex(args.reference, args.results)
    for m in report.mismatches[:args.max_errors]:
        print(m.text())
    if len(report.mismatches) > args.max_errors:
        print(f"... {len(report.mismatches) - args.max_errors} more mismatch(es) (--max-errors {args.max_errors})")
    print(("OK: " if report.ok else "FAIL: ") + report.summary())
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "verify-hex", _run,
                "compare a device's results with hex vectors from qref export --hex", """
        Compare results with the reference written by qref export --hex. REFERENCE and RESULTS are both files or
        both directories; a results directory mirrors the export's layout and every *.hex and exp.<array>.memh file
        in it is compared with the reference file of the same relative path. A results .hex file keeps the
        reference's lines and input columns with the device's words in the expected columns (flags may be left out);
        a results .memh file holds one word per line. Elements flagged unspecified are not compared. Exit status 0:
        no mismatch; 1: mismatches (listed with case, file, line, element, inputs, expected, got, flags); 2:
        malformed input. Example: qref verify-hex /tmp/hex /tmp/results""")
    p.add_argument("reference", metavar="REFERENCE", help="the export directory (or one of its files)")
    p.add_argument("results", metavar="RESULTS", help="the results directory (or one results file)")
    p.add_argument("--max-errors", type=int, default=20, metavar="N", help="print at most N mismatches "
                   "(all are counted; default 20)")


__all__ = ["register"]
