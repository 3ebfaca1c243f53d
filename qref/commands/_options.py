"""What the subcommands share: ``command`` registers one (its parser, with ``args.func`` set), and the options
several commands take (the suite, ``--force``, ``-q``) are added here, each command passing its own help text
(``qref <cmd> --help`` is what the docs quote). ``cli.py`` skips this module: its name starts with ``_``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["SUITE_DIR_HELP", "command", "force_option", "quiet_option", "suite_argument", "suite_option"]

#: the help of the positional DIR of the commands that read a suite they are given (export, verify)
SUITE_DIR_HELP = "suite directory (e.g. conformance/v1)"


def command(sub: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], help: str,
            description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (``qref name --help`` prints ``description``; ``qref --help`` lists it
    with ``help``); parsing it sets ``args.func = run``. ``kwargs`` go to ``add_parser`` (epilog, formatter)."""
    p = sub.add_parser(name, help=help, description=description, **kwargs)
    p.set_defaults(func=run)
    return p


def suite_argument(p: argparse.ArgumentParser) -> None:
    """The positional ``DIR``: the suite the command reads."""
    p.add_argument("suite", metavar="DIR", help=SUITE_DIR_HELP)


def suite_option(p: argparse.ArgumentParser, help: str, metavar: str | None = None) -> None:
    """``--suite DIR`` (default None: the command's own default, which ``help`` states)."""
    p.add_argument("--suite", metavar=metavar, default=None, help=help)


def force_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--force``: overwrite what the command would otherwise refuse to overwrite (``help`` says what)."""
    p.add_argument("--force", action="store_true", help=help)


def quiet_option(p: argparse.ArgumentParser, help: str, short: bool = True) -> None:
    """``-q`` / ``--quiet`` (``--quiet`` alone when ``short`` is False)."""
    p.add_argument(*(("-q", "--quiet") if short else ("--quiet",)), action="store_true", help=help)
