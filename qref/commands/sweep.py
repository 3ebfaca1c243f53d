"""``qref sweep FMT``: every float32 (or 16-bit) input through FMT, compared with another implementation."""

from __future__ import annotations

import argparse

from ..analysis.sweep import AGAINST, SOURCES, sweep
from ._options import command, quiet_option


def _run(args: argparse.Namespace) -> int:
    options = {k: v for k, v in (("rounding", args.rounding), ("overflow", args.overflow), ("nan", args.nan),
                                 ("subnormals", args.subnormals), ("profile", args.profile)) if v is not None}
    result = sweep(args.format, against=args.against, source=args.source, workers=args.workers,
                   dask_address=args.dask, progress=not args.quiet, limit=args.limit, **options)
    print(result.summary())
    return 1 if result.mismatches else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "sweep", _run,
                "exhaustive sweep of all 2^32 float32 (or 2^16) inputs against another implementation", """
        Encode every input bit pattern of SOURCE into FORMAT with qref and with --against, in chunks on all cores
        (or a Dask cluster), and print mismatch counts by class. Exit code 1 if any mismatch.""")
    p.add_argument("format", help="target format, e.g. float8_e4m3fn")
    p.add_argument("--against", default="ml_dtypes", choices=AGAINST,
                   help="the other implementation (default ml_dtypes; 'reference' = qref's readable reference path)")
    p.add_argument("--source", default="float32", choices=sorted(SOURCES), help="input dtype (default float32)")
    p.add_argument("--rounding", help="rounding mode (default nearest_even)")
    p.add_argument("--overflow", help="overflow policy (default: the format's)")
    p.add_argument("--nan", help="NaN policy (default: the format's)")
    p.add_argument("--subnormals", help="keep or flush (default keep)")
    p.add_argument("--profile", help="element profile, e.g. ml_dtypes or mlx")
    p.add_argument("--workers", type=int, help="processes (default: all cores)")
    p.add_argument("--dask", metavar="ADDRESS", help="run the chunks on an existing Dask cluster")
    p.add_argument("--limit", type=int, help="sweep only the first N bit patterns")
    quiet_option(p, "no progress bar", short=False)


__all__ = ["register"]
