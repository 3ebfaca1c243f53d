"""Hex vectors read back (docs/vectors.md §8.1): ``verify_hex`` reads a device's results in either form of
hex.py's files and lists every mismatch field by field, elements the spec leaves unspecified not compared.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import QrefError
from .hex import _FLAG, _HEXCHARS, _MAX_HEX_FILE, _UNKNOWN, HEX_FLAGS, HEX_VERSION, HexColumn, _inside

__all__ = ["HexMismatch", "HexReport", "HexVectors", "read_hex_vectors", "verify_hex"]


@dataclass(frozen=True)
class HexVectors:
    """A parsed vector file: its header fields, columns and data rows (each a tuple of words as text)."""

    path: Path
    meta: Mapping[str, str]
    columns: tuple[HexColumn, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[int, ...]  # the file line number of each row

    @property
    def shape(self) -> tuple[int, ...]:
        s = self.meta.get("shape", "")
        return () if s == "scalar" else tuple(int(d) for d in s.split("x"))


@dataclass(frozen=True)
class HexMismatch:
    """One expected word the device got wrong: ``index`` is the element's C-order index in the case's array
    (``position`` its multi-index), ``file`` the results file's name, ``line`` its line."""

    case: str
    file: str
    line: int
    index: int
    position: tuple[int, ...]
    inputs: tuple[tuple[str, str], ...]
    column: str
    expected: str
    got: str
    flags: int

    def text(self) -> str:
        at = f" {list(self.position)}" if len(self.position) > 1 else ""
        ins = " ".join(f"{k}={v}" for k, v in self.inputs) or "-"
        names = ",".join(n for b, n in HEX_FLAGS.items() if self.flags & b) or "-"
        return (f"{self.case} {self.file} line {self.line}: element {self.index}{at}: inputs {ins}; "
                f"{self.column}: expected {self.expected} got {self.got}; flags {self.flags:02x} ({names})")


@dataclass
class HexReport:
    """The result of verify_hex: per compared file, counts; every mismatch."""

    files: list[str] = field(default_factory=list)
    compared: int = 0
    unspecified: int = 0
    mismatches: list[HexMismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.files) and not self.mismatches

    def summary(self) -> str:
        return (f"{len(self.files)} file(s), {self.compared} element(s) compared, {self.unspecified} unspecified "
                f"not compared, {len(self.mismatches)} mismatch(es)")


def _read_text(path: Path, where: str) -> str:
    """A regular file's text (ASCII), refused when it is a link, not a regular file or larger than 1 GiB."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise QrefError(f"{where}: {path} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise QrefError(f"{where}: {path} is a symbolic link; not followed")
    if not stat.S_ISREG(st.st_mode):
        raise QrefError(f"{where}: {path} is not a regular file")
    if st.st_size > _MAX_HEX_FILE:
        raise QrefError(f"{where}: {path} is {st.st_size} bytes, over the {_MAX_HEX_FILE}-byte limit")
    with open(path, "rb") as f:
        data = f.read(_MAX_HEX_FILE + 1)
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise QrefError(f"{where}: {path} byte {exc.start}: not ASCII text") from None


_COLUMN_RE = re.compile(r"^# column (\d+): (in|exp|flags) ([a-z_][a-z0-9_]*) (\S+) (\d+) (\d+)$")
_META_RE = re.compile(r"^# ([a-z_]+): (.*)$")


def read_hex_vectors(path: str | os.PathLike[str]) -> HexVectors:
    """Parse a reference vector file written by export_hex (header, columns, rows); a QrefError naming the line
    for anything malformed."""
    p = Path(path)
    text = _read_text(p, "vector file")
    meta: dict[str, str] = {}
    cols: list[HexColumn] = []
    rows: list[tuple[str, ...]] = []
    lines: list[int] = []
    first = True
    for ln, line in enumerate(text.split("\n"), 1):
        if first:
            if not line.startswith(f"# qref hex vectors {HEX_VERSION} "):
                raise QrefError(f"{p} line 1: not a qref hex vector file (version {HEX_VERSION})")
            first = False
            continue
        if line.startswith("#"):
            m = _COLUMN_RE.match(line)
            if m:
                k, role, name, fmt, bits, digits = m.groups()
                if int(k) != len(cols) + 1 or int(digits) != (int(bits) + 3) // 4 or not 1 <= int(bits) <= 64:
                    raise QrefError(f"{p} line {ln}: malformed column header {line!r}")
                cols.append(HexColumn(role, name, fmt, int(bits), int(digits)))
            elif (m := _META_RE.match(line)) is not None:
                meta.setdefault(m[1], m[2])
            continue
        if not line:
            continue
        rows.append(_fields(line, cols, p, ln, reference=True))
        lines.append(ln)
    if not cols or "case" not in meta or "lines" not in meta:
        raise QrefError(f"{p}: the header lacks its case, lines or column lines")
    if len(rows) != int(meta["lines"]):
        raise QrefError(f"{p}: {len(rows)} data lines, the header says {meta['lines']}")
    return HexVectors(p, meta, tuple(cols), tuple(rows), tuple(lines))


def _check_word(word: str, col: HexColumn, where: str, unknown_ok: bool) -> None:
    if len(word) != col.digits:
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: {len(word)} hex digits, the column has "
                        f"{col.digits} ({col.bits} bits)")
    if not set(word) <= _HEXCHARS:
        if unknown_ok and set(word) <= _HEXCHARS | _UNKNOWN:
            return
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: not hexadecimal")
    if int(word, 16) >> col.bits:
        raise QrefError(f"{where}: {col.role} {col.name} is {word!r}: wider than {col.bits} bits")


def _fields(line: str, cols: list[HexColumn], p: Path, ln: int, reference: bool) -> tuple[str, ...]:
    """The words of one data line, checked against the columns; a results line may leave out the flags."""
    words = line.split()
    n_data = sum(c.role != "flags" for c in cols)
    if len(words) != len(cols) and (reference or len(words) != n_data):
        want = f"{len(cols)}" if reference else f"{n_data} (or {len(cols)} with the flags)"
        raise QrefError(f"{p} line {ln}: {len(words)} fields, expected {want}")
    for w, c in zip(words, cols):
        _check_word(w, c, f"{p} line {ln}", unknown_ok=not reference and c.role == "exp")
    return tuple(words)


def _unravel(i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(i, shape)) if shape else ()


def _compare(ref: HexVectors, got_rows: list[tuple[str, ...]], got_lines: list[int], results: Path,
             rel: str, report: HexReport, only: str | None = None) -> None:
    """Compare the expected columns (only ``only`` when given) of ``got_rows`` with the reference."""
    if len(got_rows) != len(ref.rows):
        raise QrefError(f"{results}: {len(got_rows)} data lines, the reference {ref.path} has {len(ref.rows)}")
    cols = ref.columns
    ins = [k for k, c in enumerate(cols) if c.role == "in"]
    flag_of = {c.name: k for k, c in enumerate(cols) if c.role == "flags"}
    exp = [k for k, c in enumerate(cols) if c.role == "exp" and (only is None or c.name == only)]
    case = ref.meta["case"]
    for i, (want, got, ln) in enumerate(zip(ref.rows, got_rows, got_lines)):
        if only is None:
            for k in ins:
                if int(got[k], 16) != int(want[k], 16):
                    raise QrefError(f"{results} line {ln}: input {cols[k].name} is {got[k]}, the reference has "
                                    f"{want[k]} (a results file keeps the reference's input columns and order)")
        for k in exp:
            g = got[k] if only is None else got[0]
            fl = int(want[flag_of[cols[k].name]], 16)
            if fl & _FLAG["unspecified"]:
                report.unspecified += 1
                continue
            report.compared += 1
            if set(g) & _UNKNOWN or int(g, 16) != int(want[k], 16):
                report.mismatches.append(HexMismatch(
                    case, Path(rel).name, ln, i, _unravel(i, ref.shape), tuple((cols[j].name, want[j]) for j in ins),
                    f"{cols[k].role} {cols[k].name}", want[k], g.lower(), fl))
    report.files.append(rel)


def _verify_hex_file(ref_path: Path, results: Path, rel: str, report: HexReport) -> None:
    ref = read_hex_vectors(ref_path)
    text = _read_text(results, "results file")
    rows, lines = [], []
    for ln, line in enumerate(text.split("\n"), 1):
        if line.startswith("# case: ") and line[8:].strip() != ref.meta["case"]:
            raise QrefError(f"{results} line {ln}: results of case {line[8:].strip()}, the reference {ref.path} is "
                            f"case {ref.meta['case']}")
        if line.startswith("#") or not line.strip():
            continue
        rows.append(_fields(line, list(ref.columns), results, ln, reference=False))
        lines.append(ln)
    _compare(ref, rows, lines, results, rel, report)


def _memh_source(ref_memh: Path) -> tuple[HexVectors, str]:
    """(the vector file holding the expected array of exp.<name>.memh, name), found through the case's
    case.txt."""
    m = re.match(r"^exp\.([a-z_][a-z0-9_]*)\.memh$", ref_memh.name)
    if m is None:
        raise QrefError(f"{ref_memh}: results in $readmemh form are compared against an exp.<array>.memh file")
    side = _read_text(ref_memh.parent / "case.txt", "case sidecar")
    for line in side.split("\n"):
        parts = line.split()
        if len(parts) == 6 and parts[0] == "vectors" and re.match(r"^[a-z_][a-z0-9_]*\.hex$", parts[1]):
            vec = read_hex_vectors(ref_memh.parent / parts[1])
            if any(c.role == "exp" and c.name == m[1] for c in vec.columns):
                return vec, m[1]
    raise QrefError(f"{ref_memh.parent / 'case.txt'}: no vector file lists the expected array {m[1]}")


def _verify_memh_file(ref_memh: Path, results: Path, rel: str, report: HexReport) -> None:
    ref, name = _memh_source(ref_memh)
    col = next(c for c in ref.columns if c.role == "exp" and c.name == name)
    text = _read_text(results, "results file")
    rows, lines = [], []
    for ln, line in enumerate(text.split("\n"), 1):
        word = line.strip()
        if not word:
            continue
        if word.startswith(("//", "@")):
            raise QrefError(f"{results} line {ln}: comments and @address records are not read; one word per line")
        _check_word(word, col, f"{results} line {ln}", unknown_ok=True)
        rows.append((word,))
        lines.append(ln)
    _compare(ref, rows, lines, results, rel, report, only=name)


def _is_results_name(name: str) -> bool:
    return name.endswith(".hex") or bool(re.match(r"^exp\.[a-z_][a-z0-9_]*\.memh$", name))


def _walk(root: Path) -> Iterator[str]:
    """Relative paths of the result files under root, sorted; links are refused, not followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                raise QrefError(f"{os.path.join(dirpath, d)} is a symbolic link; not followed")
        for f in filenames:
            if _is_results_name(f):
                found.append(os.path.relpath(os.path.join(dirpath, f), root))
    yield from sorted(found)


def verify_hex(reference: str | os.PathLike[str], results: str | os.PathLike[str]) -> HexReport:
    """Compare a device's results with an export_hex reference (docs/vectors.md §8.1). Both paths are files, or
    both directories: then every ``*.hex`` and ``exp.<array>.memh`` file under ``results`` is compared with the
    file of the same relative path under ``reference``. A results ``.hex`` file keeps the reference's lines and
    input columns with the device's words in the expected columns (the flags may be left out); a results
    ``.memh`` file holds one word per line. Elements flagged unspecified are not compared; words with Verilog
    x/z digits are mismatches. Malformed input (wrong field count, width, line count, non-hex) is a QrefError."""
    ref, res = Path(reference), Path(results)
    report = HexReport()
    if res.is_dir() and not res.is_symlink():
        if not ref.is_dir() or ref.is_symlink():
            raise QrefError(f"{ref}: results {res} is a directory, so the reference must be the export directory")
        rels = list(_walk(res))
        if not rels:
            raise QrefError(f"{res}: no results files (*.hex or exp.<array>.memh) under it")
        pairs = [(_inside(ref, r), _inside(res, r), r) for r in rels]
    else:
        if ref.is_dir():
            raise QrefError(f"{ref}: results {res} is a file, so the reference must be a file too")
        pairs = [(ref, res, res.name)]
    for rp, gp, rel in pairs:
        if rp.name.endswith(".hex"):
            _verify_hex_file(rp, gp, rel, report)
        else:
            _verify_memh_file(rp, gp, rel, report)
    return report
