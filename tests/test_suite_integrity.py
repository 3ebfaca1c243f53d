"""Suite integrity (docs/vectors.md §3.2, §5.1): every corruption of a suite on disk is refused by name, by
``verify_suite``, by ``load_suite(verify=True)`` and when the damaged case is read, with a SuiteError (never a
MemoryError, RecursionError or a silent pass); ``qref gen`` replaces a suite atomically and never touches files
it did not write; command outputs are checked before the work starts.

Each ``CORRUPTIONS`` entry changes a freshly written suite in place and returns the id of the case whose data
it damaged ("" for the manifest or the suite as a whole, UNLISTED for an entry no manifest names: `qref verify`
reports it, a load ignores it); ``outcome`` classifies what the loader does with it."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import pickle
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from qref.cli import main
from qref.conformance import Case, SuiteError, load_suite, verify_suite, write_suite
from qref.conformance.npy import npy_bytes
from qref.errors import QrefError
from qref.formats.policy import CastPolicy

gen_mod = importlib.import_module("qref.conformance.generate")  # the package exports a function of that name
CASE_A = "elements/t/a"
UNLISTED = "<unlisted>"  # an entry the manifest does not list: qref verify reports it; a load never reads it


def _cases() -> list[Case]:
    x = np.array([1.0, -0.0, np.nan, 448.5, 2.0**-9, 3.0], dtype=np.float32)
    return [
        Case(id=CASE_A, family="elements", operation="encode", format="float8_e4m3fn",
             policy=CastPolicy(), inputs={"x": x},
             expected={"codes": np.array([0x38, 0x80, 0x7F, 0x7E, 0x01, 0x44], dtype=np.uint8)},
             array_formats={"codes": "float8_e4m3fn"}, description="a"),
        Case(id="elements/t/b", family="elements", operation="encode", format="float8_e5m2",
             policy=CastPolicy(), inputs={"x": x[:2]},
             expected={"codes": np.array([0x3C, 0x80], dtype=np.uint8)}, array_formats={"codes": "float8_e5m2"},
             description="b"),
    ]


def _suite(tmp: Path) -> Path:
    out = tmp / "suite"
    write_suite(_cases(), out, families=["elements"])
    return out


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _save(root: Path, m: dict) -> None:
    (root / "manifest.json").write_text(json.dumps(m))


def _ref(root: Path, group: str = "inputs", name: str = "x", case: int = 0) -> tuple[dict, Path]:
    m = _manifest(root)
    r = m["cases"][case][group][name]
    return r, root / r["file"]


def _replace_file(p: Path, data: bytes) -> None:
    p.chmod(0o644)
    p.write_bytes(data)


def _retarget(root: Path, data: bytes, shape: list[int] | None = None) -> None:
    """Put ``data`` in place of case A's input and update the manifest's sha256 (and shape) to match, so only
    the content checks can catch it."""
    m = _manifest(root)
    r = m["cases"][0]["inputs"]["x"]
    _replace_file(root / r["file"], data)
    r["sha256"] = hashlib.sha256(data).hexdigest()
    newrel = f"arrays/{r['sha256'][:2]}/{r['sha256']}.npy"
    (root / newrel).parent.mkdir(exist_ok=True)
    (root / r["file"]).rename(root / newrel)
    r["file"] = newrel
    if shape is not None:
        r["shape"] = shape
    _save(root, m)


def _npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    h = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode("latin1")


def c_truncate(root: Path) -> str:
    _, p = _ref(root)
    _replace_file(p, p.read_bytes()[:-3])
    return CASE_A


def c_truncate_header(root: Path) -> str:
    _, p = _ref(root)
    _replace_file(p, p.read_bytes()[:20])
    return CASE_A


def c_empty(root: Path) -> str:
    _, p = _ref(root)
    _replace_file(p, b"")
    return CASE_A


def c_flip(root: Path) -> str:
    _, p = _ref(root, "expected", "codes")
    b = bytearray(p.read_bytes())
    b[-1] ^= 0x01
    _replace_file(p, bytes(b))
    return CASE_A


def c_delete(root: Path) -> str:
    _, p = _ref(root)
    p.unlink()
    return CASE_A


def object_npy(items: list) -> bytes:
    """An .npy file of dtype object (a version 1.0 header with descr "|O", then pickled data), built without
    ``allow_pickle``: a loader must refuse it from its header (numpy's own load does: "Object arrays cannot be
    loaded when allow_pickle=False")."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|O", "fortran_order": False, "shape": (len(items),)})
    return buf.getvalue() + pickle.dumps(items, protocol=3)


def c_pickle(root: Path) -> str:
    _retarget(root, object_npy([{"a": 1}, 2]))
    return CASE_A


def c_pickle_same_name(root: Path) -> str:
    _, p = _ref(root)
    _replace_file(p, object_npy([{"a": 1}]))
    return CASE_A


def c_wrong_dtype(root: Path) -> str:
    _retarget(root, npy_bytes(np.arange(6, dtype=np.uint16)))
    return CASE_A


def c_wrong_shape(root: Path) -> str:
    _retarget(root, npy_bytes(np.arange(12, dtype=np.uint32).reshape(2, 6)))
    return CASE_A


def c_huge_header(root: Path) -> str:
    _retarget(root, _npy_header("<u4", (1 << 40, 1 << 20)) + b"\0" * 64)
    return CASE_A


def c_huge_header_and_manifest(root: Path) -> str:
    _retarget(root, _npy_header("<u4", (1 << 40, 1 << 20)) + b"\0" * 64, shape=[1 << 40, 1 << 20])
    return CASE_A


def c_object_descr(root: Path) -> str:
    _retarget(root, _npy_header("|O", (6,)) + b"\0" * 48)
    return CASE_A


def c_bad_header_literal(root: Path) -> str:
    h = b"{'descr': '<u4', 'fortran_order': False, 'shape': (__import__('os').getpid(),), }"
    h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
    _retarget(root, b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + b"\0" * 24)
    return CASE_A


def c_nested_header(root: Path) -> str:
    h = b"{'descr': '<u4', 'fortran_order': False, 'shape': " + b"(" * 2000 + b")" * 2000 + b", }\n"
    _retarget(root, b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h)
    return CASE_A


def c_symlink_dev_zero(root: Path) -> str:
    _, p = _ref(root)
    p.unlink()
    p.symlink_to("/dev/zero")
    return CASE_A


def c_symlink_outside(root: Path) -> str:
    _, p = _ref(root)
    outside = root.parent / "outside.npy"
    outside.write_bytes(p.read_bytes())  # the same bytes: only the location is wrong
    p.unlink()
    p.symlink_to(outside)
    return CASE_A


def c_fifo(root: Path) -> str:
    _, p = _ref(root)
    p.unlink()
    os.mkfifo(p)
    return CASE_A


def c_directory(root: Path) -> str:
    _, p = _ref(root)
    p.unlink()
    p.mkdir()
    return CASE_A


def c_arrays_symlink(root: Path) -> str:
    outside = root.parent / "outside_arrays"
    (root / "arrays").rename(outside)
    (root / "arrays").symlink_to(outside)
    return CASE_A


def c_path_traversal(root: Path) -> str:
    m = _manifest(root)
    m["files"]["../../../etc/passwd"] = {"sha256": "0" * 64}
    _save(root, m)
    return ""


def c_absolute_path(root: Path) -> str:
    m = _manifest(root)
    m["files"]["/etc/hostname"] = {"sha256": "0" * 64}
    _save(root, m)
    return ""


def c_files_dev_zero(root: Path) -> str:
    m = _manifest(root)
    m["files"]["/dev/zero"] = {"sha256": "0" * 64}
    _save(root, m)
    return ""


def c_files_symlink_dev_zero(root: Path) -> str:
    (root / "zero").symlink_to("/dev/zero")
    m = _manifest(root)
    m["files"]["zero"] = {"sha256": "0" * 64}
    _save(root, m)
    return ""


def c_array_file_traversal(root: Path) -> str:
    m = _manifest(root)
    m["cases"][0]["inputs"]["x"]["file"] = "../suite/" + m["cases"][0]["inputs"]["x"]["file"]
    _save(root, m)
    return ""


def c_manifest_dev_zero(root: Path) -> str:
    (root / "manifest.json").unlink()
    (root / "manifest.json").symlink_to("/dev/zero")
    return ""


def c_manifest_truncated(root: Path) -> str:
    p = root / "manifest.json"
    p.write_bytes(p.read_bytes()[:100])
    return ""


def c_manifest_deleted(root: Path) -> str:
    (root / "manifest.json").unlink()
    return ""


def c_manifest_binary(root: Path) -> str:
    (root / "manifest.json").write_bytes(b"\xff\xfe\x00garbage")
    return ""


def c_nested_json(root: Path) -> str:
    text = (root / "manifest.json").read_text()
    deep = "[" * 100_000 + "]" * 100_000
    (root / "manifest.json").write_text(text.replace('"params":{}', '"params":{"k":' + deep + "}", 1))
    return ""


def c_nested_json_moderate(root: Path) -> str:
    m = _manifest(root)
    v: object = 1
    for _ in range(500):
        v = {"k": v}
    m["cases"][0]["params"] = {"k": v}
    _save(root, m)
    return ""


def c_format_bits(root: Path) -> str:
    m = _manifest(root)
    m["formats"]["float8_e4m3fn"]["bits"] = 10**9
    _save(root, m)
    return ""


def c_format_fields(root: Path) -> str:
    m = _manifest(root)
    m["formats"]["float8_e4m3fn"]["bias"] = 3
    _save(root, m)
    return ""


def c_policy_bogus(root: Path) -> str:
    m = _manifest(root)
    m["cases"][0]["policy"]["rounding"] = "bogus_mode"
    _save(root, m)
    return ""


def c_policy_unresolved(root: Path) -> str:
    m = _manifest(root)
    m["cases"][0]["policy"]["overflow"] = "wrap"  # not a float overflow policy
    _save(root, m)
    return ""


def c_scheme_bogus(root: Path) -> str:
    m = _manifest(root)
    m["cases"][0]["scheme"] = {"family": "bogus"}
    _save(root, m)
    return ""


def c_shape_huge(root: Path) -> str:
    m = _manifest(root)
    m["cases"][0]["inputs"]["x"]["shape"] = [1 << 30, 1 << 30]
    _save(root, m)
    return ""


def c_unlisted_file(root: Path) -> str:
    (root / "arrays" / "notes.txt").write_text("mine")
    return UNLISTED


def c_unlisted_symlink(root: Path) -> str:
    (root / "arrays" / "link").symlink_to("/etc")
    return UNLISTED


def c_schema_edit(root: Path) -> str:
    p = root / "schema.json"
    p.write_text(p.read_text().replace("qref conformance suite manifest", "edited"))
    return ""


def c_schema_missing_from_files(root: Path) -> str:
    m = _manifest(root)
    del m["files"]["schema.json"]
    _save(root, m)
    return ""


CORRUPTIONS: dict[str, Callable[[Path], str]] = {
    name[2:]: fn for name, fn in sorted(globals().items()) if name.startswith("c_") and callable(fn)
}


def outcome(fn: Callable[[Path], str], tmp: Path) -> tuple[str, str]:
    """('clear' | 'other' | 'wrong', detail) for one corruption: clear = verify_suite reports it, and
    load_suite(verify=True) and reading the damaged case raise QrefError."""
    root = _suite(tmp)
    case_id = fn(root)
    try:
        rep = verify_suite(root)
        if rep.ok:
            return "wrong", "verify_suite says ok"
        detail = rep.problems[0]
        if case_id == UNLISTED:
            load_suite(root, verify=True)  # never read, so no reason to refuse a run
            return "clear", detail
        try:
            load_suite(root, verify=True)
            return "wrong", "load_suite(verify=True) accepted it"
        except QrefError:
            pass
        if case_id:
            try:
                _ = load_suite(root)[case_id]
                return "wrong", "the damaged case was read"
            except QrefError:
                pass
    except BaseException as exc:  # counting every other outcome is the point
        return "other", f"{type(exc).__name__}: {str(exc)[:100]}"
    return "clear", detail


class _Hang(Exception):
    pass


def _alarm(*_a: object) -> None:
    raise _Hang("a suite read blocked (a device or FIFO was opened)")


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_is_refused_by_name(tmp_path, name):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)  # /dev/zero or a FIFO must never block a read
    try:
        kind, detail = outcome(CORRUPTIONS[name], tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert kind == "clear", (name, kind, detail)


def test_problems_name_the_file_and_the_reason(tmp_path):
    cases = {
        "path_traversal": r"\.\./\.\./\.\./etc/passwd.* not a path inside the suite",
        "files_dev_zero": r"/dev/zero.* not a path inside the suite",
        "symlink_dev_zero": r"arrays/.*\.npy.*(outside the suite|not a regular file)",
        "symlink_outside": r"outside the suite",
        "huge_header": r"shape is \[1099511627776, 1048576\], the manifest says \[6\]",
        "huge_header_and_manifest": r"shape\[0\]: 1099511627776 is greater than the maximum of 1073741824",
        "shape_huge": r"is 4611686018427387904 bytes, above the 1073741824-byte limit",
        "pickle": r"dtype '\|O'.*bool or unsigned/signed integers",
        "nested_json": r"nested",
        "nested_json_moderate": r"nested more than 32 levels",
        "format_bits": r"formats\.float8_e4m3fn\.bits: 1000000000 is greater than the maximum of 64",
        "policy_bogus": r"policy\.rounding: 'bogus_mode' is not one of",
        "truncate": r"sha256 mismatch",
        "delete": r"missing",
    }
    for name, pattern in cases.items():
        sub = tmp_path / name
        sub.mkdir()
        root = _suite(sub)
        CORRUPTIONS[name](root)
        problems = verify_suite(root).problems
        assert any(__import__("re").search(pattern, p) for p in problems), (name, problems)


def test_dev_zero_in_files_is_never_opened(tmp_path, monkeypatch):
    root = _suite(tmp_path)
    c_files_dev_zero(root)
    opened = []
    real_open = Path.open

    def spy(self, *a, **k):
        opened.append(str(self))
        return real_open(self, *a, **k)

    monkeypatch.setattr(Path, "open", spy)
    t0 = time.monotonic()
    assert not verify_suite(root).ok
    assert time.monotonic() - t0 < 10
    assert not any("/dev/zero" in p for p in opened)


def test_verify_true_refuses_and_case_level_checks(tmp_path):
    root = _suite(tmp_path)
    s = load_suite(root, verify=True)
    assert s.verify_case(CASE_A).id == CASE_A and s.case_problems(CASE_A) == []
    c_flip(root)
    with pytest.raises(SuiteError, match="does not verify"):
        load_suite(root, verify=True)
    s = load_suite(root)  # the manifest is fine: a lazy load works, the damaged case does not
    assert s["elements/t/b"].id == "elements/t/b"
    assert any("sha256 mismatch" in p for p in s.case_problems(CASE_A))
    with pytest.raises(SuiteError, match="sha256 mismatch"):
        s.verify_case(CASE_A)


def test_arrays_are_read_only_views_and_never_loaded_with_numpy(tmp_path, monkeypatch):
    root = _suite(tmp_path)

    def no_load(*a, **k):
        raise AssertionError("np.load must not be used on suite files")

    monkeypatch.setattr(np, "load", no_load)
    c = load_suite(root)[CASE_A]
    assert not c.inputs["x"].flags.writeable
    assert c.expected["codes"].tolist() == [0x38, 0x80, 0x7F, 0x7E, 0x01, 0x44]


# ---- atomic writes (docs/vectors.md §5.1) ----------------------------------------------------------------------
def _fake_families(monkeypatch, cases: list[Case], interrupt_after: int | None = None) -> None:
    def build(name: str, full: bool = False):
        for n, c in enumerate(cases):
            if interrupt_after is not None and n == interrupt_after:
                raise KeyboardInterrupt
            yield c

    monkeypatch.setattr(gen_mod, "family_names", lambda: ["elements"])
    monkeypatch.setattr(gen_mod, "build_family", build)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_interrupted_force_leaves_the_old_suite(tmp_path, monkeypatch, capsys):
    root = _suite(tmp_path)
    before = _tree(root)
    _fake_families(monkeypatch, _cases()[:1] * 3, interrupt_after=1)
    assert main(["gen", str(root), "--force", "-q"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "qref gen: interrupted" and "Traceback" not in err
    assert _tree(root) == before and verify_suite(root).ok
    assert [p.name for p in tmp_path.iterdir() if "qref-tmp" in p.name] == []


def test_force_replaces_only_when_complete(tmp_path, monkeypatch):
    root = _suite(tmp_path)
    _fake_families(monkeypatch, _cases()[1:])
    assert main(["gen", str(root), "--force", "-q"]) == 0
    assert load_suite(root, verify=True).ids == ["elements/t/b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["suite"]  # no temporary or old directory left


def test_failed_generation_keeps_the_old_suite(tmp_path, monkeypatch):
    root = _suite(tmp_path)
    before = _tree(root)
    bad = [*_cases(), _cases()[0]]  # a duplicate id fails half-way
    _fake_families(monkeypatch, bad)
    assert main(["gen", str(root), "--force", "-q"]) == 2
    assert _tree(root) == before


def test_user_files_under_arrays_are_never_deleted(tmp_path, monkeypatch):
    root = _suite(tmp_path)
    mine = root / "arrays" / "my_notes.txt"
    mine.write_text("keep me")
    _fake_families(monkeypatch, _cases())
    assert main(["gen", str(root), "--force", "-q"]) == 2
    assert mine.read_text() == "keep me" and verify_suite(root, strict=False).ok


def test_arrays_symlink_is_never_followed(tmp_path, monkeypatch):
    root = _suite(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious.npy").write_bytes(b"data")
    c_arrays_symlink(root)
    target = root / "arrays"
    assert target.is_symlink()
    _fake_families(monkeypatch, _cases())
    assert main(["gen", str(root), "--force", "-q"]) == 2
    assert (outside / "precious.npy").read_bytes() == b"data"
    assert target.is_symlink() and (tmp_path / "outside_arrays").is_dir()


def test_partial_suite_of_the_old_writer_can_be_replaced(tmp_path, monkeypatch):
    """What an interrupted `gen --force` of the old writer left (arrays, no manifest) is qref's own: --force
    replaces it."""
    root = _suite(tmp_path)
    (root / "manifest.json").unlink()
    _fake_families(monkeypatch, _cases())
    assert main(["gen", str(root), "--force", "-q"]) == 0
    assert verify_suite(root).ok


def test_empty_family_and_format_selections_are_errors(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["gen", str(out), "--families", ","]) == 2
    assert "names no family" in capsys.readouterr().err and not out.exists()
    assert main(["gen", str(out), "--formats", " , "]) == 2
    assert "names no format" in capsys.readouterr().err and not out.exists()
    assert main(["gen", str(out), "--formats", "float8_e4m3fnn"]) == 2
    assert "did you mean" in capsys.readouterr().err and not out.exists()


def test_gen_selects_one_format(tmp_path, monkeypatch):
    _fake_families(monkeypatch, _cases())
    out = tmp_path / "s"
    assert main(["gen", str(out), "--formats", "f8E5M2", "-q"]) == 0
    s = load_suite(out, verify=True)
    assert s.ids == ["elements/t/b"] and s.manifest["generator"]["formats"] == ["float8_e5m2"]
    assert main(["gen", str(tmp_path / "t"), "--formats", "int4", "-q"]) == 2  # no case of int4: an error


def test_run_outputs_are_checked_before_the_run(tmp_path, monkeypatch, capsys):
    from qref.harness import runner

    def no_run(*a, **k):
        raise AssertionError("the run must not start")

    monkeypatch.setattr(runner, "run", no_run)
    existing = tmp_path / "results"
    existing.write_text("previous results")
    assert main(["run", "--backend", "ml_dtypes", "--out", str(existing)]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    d = tmp_path / "d"
    d.mkdir()
    (d / "results.json").write_text("{}")
    assert main(["run", "--backend", "ml_dtypes", "--out", str(d)]) == 2
    assert "--force" in capsys.readouterr().err
    rep = tmp_path / "report.md"
    rep.write_text("old report")
    assert main(["run", "--backend", "ml_dtypes", "--report", str(rep)]) == 2
    assert "--force" in capsys.readouterr().err and rep.read_text() == "old report"
    assert main(["run", "--backend", "ml_dtypes", "--report", str(tmp_path / "f" / "x.md"), "--out",
                 str(existing / "sub")]) == 2  # a parent that is a file


def test_export_refuses_to_overwrite(tmp_path, capsys):
    root = _suite(tmp_path)
    j = tmp_path / "out.jsonl"
    j.write_text("mine\n")
    assert main(["export", str(root), "--jsonl", str(j)]) == 2
    assert "--force" in capsys.readouterr().err and j.read_text() == "mine\n"
    assert main(["export", str(root), "--jsonl", str(j), "--force"]) == 0
    assert len(j.read_text().splitlines()) == 2
    m = tmp_path / "mlir"
    m.mkdir()
    (m / "keep.txt").write_text("x")
    assert main(["export", str(root), "--mlir", str(m)]) == 2


def test_ctrl_c_in_any_command_prints_one_line(monkeypatch, capsys):
    import qref.commands.table as table

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(table, "_run", interrupted)
    import qref.cli

    real = qref.cli.build_parser

    def build():
        p = real()
        for action in p._subparsers._group_actions:  # type: ignore[union-attr]
            action.choices["table"].set_defaults(func=interrupted)
        return p

    monkeypatch.setattr(qref.cli, "build_parser", build)
    assert main(["table", "float8_e4m3fn"]) == 130
    assert capsys.readouterr().err == "qref table: interrupted\n"


def test_run_refuses_a_suite_that_does_not_verify(tmp_path, monkeypatch, capsys):
    """One flipped byte: `qref run` stops before any backend runs (it reported 0 cases and exit 0 before)."""
    from qref.harness import runner

    def no_run(*a, **k):
        raise AssertionError("the run must not start")

    monkeypatch.setattr(runner, "run", no_run)
    root = _suite(tmp_path)
    c_flip(root)
    assert main(["run", "--backend", "ml_dtypes", "--suite", str(root)]) == 2
    err = capsys.readouterr().err
    assert "does not verify" in err and "sha256 mismatch" in err


def test_written_suite_has_a_plain_directory_mode(tmp_path):
    root = _suite(tmp_path)
    umask = os.umask(0o022)
    os.umask(umask)
    assert (root.stat().st_mode & 0o777) == 0o777 & ~umask
