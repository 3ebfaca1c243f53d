"""``qref gen OUT``: generate a conformance suite (docs/vectors.md §5)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import QrefError
from ._options import command, force_option, quiet_option


def _split(values: list[str] | None, what: str, one: str) -> list[str] | None:
    """Comma/repeat lists of names; None when the option was not given, a QrefError when it names nothing."""
    if values is None:
        return None
    names = [f.strip() for part in values for f in part.split(",") if f.strip()]
    if not names:
        raise QrefError(f"--{what} {','.join(values)!r} names no {one}; give at least one name or omit "
                        "the option")
    return names


class Terminated(KeyboardInterrupt):
    """SIGTERM during gen: unwinds like Ctrl-C, so the temporary directory is removed and OUT is untouched."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run(args: argparse.Namespace) -> int:
    from ..conformance.generate import generate
    from ..conformance.suite import check_suite_target

    families = _split(args.families, "families", "family")
    formats = _split(args.formats, "formats", "format")
    check_suite_target(Path(args.out), args.force)  # before the work: refuse early
    start = time.monotonic()
    try:
        with _terminate_as_interrupt():
            m = generate(args.out, families=families, full=args.full, overwrite=args.force, formats=formats,
                         progress=None if args.quiet else sys.stderr)
    except Terminated:
        print("qref gen: terminated (SIGTERM); OUT holds the old suite (or, if the swap had begun, the complete "
              "new one)", file=sys.stderr)
        return 143
    s = m["summary"]
    if not args.quiet:
        print(f"wrote {args.out}: {s['cases']} cases, {s['arrays']} arrays, {s['bytes'] / 1e6:.1f} MB of arrays "
              f"({', '.join(m['families']) or 'no families'}; {time.monotonic() - start:.1f} s)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from ..conformance.cases import family_names

    p = command(sub, "gen", _run, "generate a conformance suite (golden vectors) into a directory", """
        Generate a conformance suite: manifest.json, schema.json and content-addressed .npy arrays. With no options
        it writes exactly the committed corpus conformance/v1 (deterministic, byte-identical across runs, machines
        and numpy versions). The suite is written into a temporary sibling directory and swapped in only when
        complete: an error or Ctrl-C leaves OUT as it was. Example: qref gen /tmp/v1 && qref verify /tmp/v1""")
    p.add_argument("out", metavar="OUT", help="output directory (must be empty unless --force)")
    p.add_argument("--families", action="append", metavar="F[,F...]",
                   help=f"only these families (known: {', '.join(family_names())})")
    p.add_argument("--formats", action="append", metavar="FMT[,FMT...]",
                   help="only the cases of these element formats (e.g. float8_e4m3fn; any alias)")
    p.add_argument("--full", action="store_true",
                   help="add the large exhaustive sets that are not committed (every rounding mode on all 16-bit "
                   "sources for every format, larger random sets)")
    force_option(p, "replace an existing suite in OUT (only once the new one is complete; a directory holding "
                 "files qref did not write is refused)")
    quiet_option(p, "no progress bar or summary")


__all__ = ["Terminated", "register"]
