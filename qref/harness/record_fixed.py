"""Record the findings of a previous release that the locked release fixed (qref/harness/fixed.py):
``python -m qref.harness.record_fixed --backend B --previous DIR --locked DIR --seen-in V --fixed-in V`` compares
the findings of two ``qref run --out`` directories and writes conformance/fixed/<backend>.json."""

from __future__ import annotations

from .findings import findings
from .fixed import FIXED_DIR, record, write_fixed
from .report import load_results


def main(argv: list[str] | None = None) -> int:
    """Record the findings of the previous release's run (``--previous``, a ``qref run --out`` directory) that
    the locked release's run (``--locked``) no longer has."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m qref.harness.record_fixed", description=main.__doc__)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--previous", required=True, help="results of the previous release's run")
    ap.add_argument("--locked", required=True, help="results of the locked release's run")
    ap.add_argument("--seen-in", required=True)
    ap.add_argument("--fixed-in", required=True)
    ap.add_argument("--evidence", default="")
    ap.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                    help="a shell pattern of mechanisms of the previous run not to record, e.g. a crash on a type "
                         "the previous release does not have (unsupported there, not fixed); say why in --evidence")
    ap.add_argument("--root", default=None, help=f"directory of the files (default {FIXED_DIR})")
    a = ap.parse_args(argv)
    prev, now = load_results(a.previous), load_results(a.locked)
    ev = a.evidence or (f"`qref run --backend {a.backend}` with {a.backend} {a.seen_in} and {a.fixed_in}, "
                        "the findings compared")
    got = record(findings(prev), findings(now), a.backend, a.seen_in, a.fixed_in, ev, tuple(a.exclude))
    p = write_fixed(a.backend, got, a.root)
    print(f"{len(got)} finding(s) of {a.backend} {a.seen_in} fixed in {a.fixed_in}: {p}")
    return 0


__all__ = ["main"]


if __name__ == "__main__":
    raise SystemExit(main())
