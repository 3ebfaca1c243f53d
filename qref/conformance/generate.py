"""``qref gen``: build every family's cases and write a suite (docs/vectors.md §5).

With the defaults it writes exactly the committed corpus conformance/v1; the bytes depend only on qref's code
(no timestamps, no machine or numpy-version dependence: see npy.py, random.py and suite.dumps_manifest).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from ..errors import QrefError
from ..formats import get_format
from .case import Case
from .cases import build_family, family_names
from .suite import SuiteWriter


class Progress:
    """A tqdm progress bar over the families on a terminal (stderr), with the current family and its case count;
    a line per family otherwise, or nothing."""

    def __init__(self, families: list[str], stream: TextIO | None = sys.stderr, width: int = 24) -> None:
        self.families = families
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.family = ""
        self.count = 0
        self.bar: Any = None
        if self.tty:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(families), desc="qref gen", unit="family", file=stream, dynamic_ncols=True)

    def begin(self, family: str) -> None:
        self.family, self.count = family, 0
        if self.bar is not None:
            self.bar.set_postfix_str(f"{family}: 0 cases")

    def case(self, case: Case) -> None:
        self.count += 1
        if self.bar is not None and self.count % 50 == 0:
            self.bar.set_postfix_str(f"{self.family}: {self.count} cases")

    def end(self) -> None:
        if self.stream is not None and not self.tty:
            print(f"qref gen: {self.family}: {self.count} cases ({time.monotonic() - self.start:.1f} s)",
                  file=self.stream)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.family}: {self.count} cases", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _matches_format(case: Case, want: set[str]) -> bool:
    names = set(case.array_formats.values())
    if case.format is not None:
        names.add(case.format["name"])
    for key in ("format", "storage", "element", "scale_format", "code_format"):
        v = (case.scheme or {}).get(key)
        if isinstance(v, str):
            names.add(v)
    return bool(names & want)


def generate(out: str | os.PathLike[str], *, families: Iterable[str] | None = None, full: bool = False,
             overwrite: bool = False, name: str = "v1", progress: TextIO | None = None,
             formats: Iterable[str] | None = None) -> dict[str, Any]:
    """Generate a suite into ``out``: ``families`` (default all, in generation order; an empty selection is an
    error), ``formats`` (default all: only cases of these element formats, by any name of the format), ``full``
    adds the large sets that are not committed. Writes atomically (SuiteWriter: a temporary sibling swapped in
    when complete; on any error or Ctrl-C ``out`` is left as it was). Returns the manifest."""
    known = family_names()
    if families is not None:
        families = list(families)
        if not families:
            raise QrefError(f"no family selected; choose from {', '.join(known)} (or omit the option for all)")
    chosen = known if families is None else [f for f in known if f in set(families)]
    for f in families or ():
        if f not in known:
            build_family(f)  # raises the unknown-name error with close matches
    want: set[str] | None = None
    extra: dict[str, Any] = {}
    if formats is not None:
        fl = list(formats)
        if not fl:
            raise QrefError("no format selected (e.g. --formats float8_e4m3fn), or omit the option for all")
        want = {get_format(f).name for f in fl}  # unknown names raise with close matches
        extra["formats"] = sorted(want)
    prog = Progress(chosen, progress)
    writer = SuiteWriter(out, name=name, families=chosen, full=full, overwrite=overwrite, generator=extra)
    try:
        for fam in chosen:
            prog.begin(fam)
            for case in build_family(fam, full):
                if want is not None and not _matches_format(case, want):
                    continue
                writer.add(case)
                prog.case(case)
            prog.end()
        if want is not None and not writer.cases:
            raise QrefError(f"no case of {', '.join(sorted(want))} in the families {', '.join(chosen)}")
    except BaseException:
        writer.abort()
        raise
    finally:
        prog.close()
    return writer.close()


__all__ = ["Progress", "generate"]
