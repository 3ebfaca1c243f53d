"""``qref export DIR --mlir OUT --jsonl FILE --hex OUT``: a suite as self-checking StableHLO files, JSON lines and
hex vectors for hardware testbenches (docs/vectors.md §8)."""

from __future__ import annotations

import argparse
from collections import Counter

from ..errors import QrefError
from ._options import command, force_option, suite_argument

_FORMATS = {"mlir": "mlir", "jsonl": "jsonl", "hex": "hex"}


def _run(args: argparse.Namespace) -> int:
    from ..conformance.export import export_hex, export_jsonl, export_mlir
    from ..conformance.outputs import check_output_dir, check_output_file
    from ..conformance.suite import load_suite

    if args.format is not None:  # the spelling: --format hex --out DIR
        if args.out is None:
            raise QrefError(f"--format {args.format} needs --out (a directory; a file for jsonl)")
        if getattr(args, args.format):
            raise QrefError(f"give --format {args.format} --out PATH or --{args.format} PATH, not both")
        setattr(args, args.format, args.out)
    elif args.out is not None:
        raise QrefError("--out needs --format mlir|jsonl|hex")
    if (args.layout is None) != (args.layout_out is None):
        raise QrefError("--layout LAYOUT and --layout-out OUT_DIR go together: give both")
    if not args.mlir and not args.jsonl and not args.hex and not args.layout:
        raise QrefError("nothing to export: give --mlir OUT_DIR, --jsonl OUT_FILE, --hex OUT_DIR and/or "
                        "--layout LAYOUT --layout-out OUT_DIR")
    from ..validators import check_outside

    for opt in ("mlir", "jsonl", "hex", "layout_out"):  # never into or over the suite this command reads
        if getattr(args, opt):
            check_outside(getattr(args, opt), args.suite, f"--{opt.replace('_', '-')}")
    if args.mlir:
        check_output_dir(args.mlir, "--mlir", args.force)
    if args.jsonl:
        check_output_file(args.jsonl, "--jsonl", args.force)
    if args.hex:
        check_output_dir(args.hex, "--hex", args.force)
    if args.layout_out:
        check_output_dir(args.layout_out, "--layout-out", args.force)
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
    if args.hex:
        hskipped: Counter[str] = Counter()
        dirs = export_hex(cases(), args.hex, suite.manifest["name"], skipped=hskipped)
        print(f"wrote hex vectors of {len(dirs)} cases under {args.hex} (index.txt lists them); "
              f"{sum(hskipped.values())} cases without an element-wise form were skipped" + (":" if hskipped else ""))
        for why, n in hskipped.most_common():
            print(f"  {n:6d}  {why}")
    if args.layout:
        from ..interop.layout_export import export_layout

        n = export_layout(cases(), args.layout_out, args.layout)
        print(f"wrote {n} arrays in the {args.layout} layout under {args.layout_out} (index.tsv lists them)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "export", _run,
                "export a suite as self-checking StableHLO .mlir files, JSON lines and/or hex vectors", """
        Export the cases of a suite for consumers outside Python: --mlir writes one self-checking StableHLO file per
        case MLIR can express (hex constants, check.expect_eq; run with stablehlo-translate --interpret), --jsonl
        writes one JSON object per case with every array as hex strings (TestFloat-like), --hex writes per case
        TestFloat-style vector files (input words, expected words, flags) and $readmemh files for RTL testbenches
        (check results with qref verify-hex). Example: qref export conformance/v1 --hex /tmp/hex --cases
        'elements/float8_e4m3fn/*'""")
    suite_argument(p)
    p.add_argument("--mlir", metavar="OUT_DIR", help="directory for the .mlir files (<case id>.mlir)")
    p.add_argument("--jsonl", metavar="OUT_FILE", help="JSON-lines file, one case per line")
    p.add_argument("--hex", metavar="OUT_DIR", help="directory for hex vectors (<case id>/, index.txt; "
                   "docs/vectors.md §8.1)")
    p.add_argument("--format", choices=sorted(_FORMATS), default=None,
                   help="the same as --mlir/--jsonl/--hex with the path given by --out")
    p.add_argument("--out", metavar="PATH", default=None, help="output path of --format")
    p.add_argument("--layout", choices=("swizzled_128x4", "fp6_x4", "trainium_mx_8x4"), default=None,
                   help="write the code arrays this storage layout fits (block.md §9.1: 2-D scales swizzled "
                   "128x4, 6-bit codes four in three bytes, element codes in Trainium 8x4 groups) as raw files "
                   "under --layout-out, with index.tsv")
    p.add_argument("--layout-out", metavar="OUT_DIR", default=None, help="directory for --layout")
    p.add_argument("--cases", metavar="GLOB", default=None, help="only case ids matching this glob pattern")
    force_option(p, "overwrite an existing --jsonl file / non-empty --mlir or --hex directory")


__all__ = ["register"]
