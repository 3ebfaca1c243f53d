"""The ``qref`` command line. Each subcommand lives in ``qref/commands/<name>.py`` and exposes
``register(subparsers)``; this module discovers them, so families add commands without editing this file."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from .errors import QrefError


def build_parser() -> argparse.ArgumentParser:
    from . import __version__, commands

    parser = argparse.ArgumentParser(
        prog="qref",
        description="qref: bit-exact reference for low-precision numerics (formats, schemes, golden vectors, "
        "backend conformance).",
    )
    parser.add_argument("--version", action="version", version=f"qref {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{mod.name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except QrefError as exc:
        print(f"qref {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `qref table ... | head`
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback; every command leaves its outputs as they were
        print(f"qref {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a file the command could not read or write: say which, no traceback
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"qref {args.command}: error:{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


__all__ = ["build_parser", "main"]
