"""The conformance suite machinery: Case checks, byte-stable .npy, write/load/verify, errors, random streams,
the JSON Schema, the CLI (docs/vectors.md)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qref.cli import main
from qref.conformance import (
    SCHEMA,
    Case,
    SuiteError,
    load_suite,
    validate_manifest,
    verify_suite,
    write_suite,
)
from qref.conformance import random as qrandom
from qref.conformance.cases import family_names
from qref.conformance.npy import npy_bytes
from qref.conformance.suite import dumps_json
from qref.errors import QrefError
from qref.formats.policy import CastPolicy

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"


def _cases() -> list[Case]:
    x = np.array([1.0, -0.0, np.nan, 448.5, 2.0**-9], dtype=np.float32)
    return [
        Case(id="elements/test/a", family="elements", operation="encode", format="float8_e4m3fn",
             policy=CastPolicy(overflow="saturate"), inputs={"x": x},
             expected={"codes": np.array([0x38, 0x80, 0x7F, 0x7E, 0x01], dtype=np.uint8)},
             array_formats={"codes": "float8_e4m3fn"}, tags=("boundary",), spec=("elements.md §2.3",),
             equivalent=({"overflow": "saturate_propagate"},), profiles=("saturating",), description="toy"),
        Case(id="elements/test/b", family="elements", operation="quantize", format="bfloat16",
             policy=CastPolicy(), inputs={"x": x.astype(ml_dtypes.bfloat16), "w": np.arange(3, dtype=np.int8)},
             expected={"y": np.ones(5, dtype=np.float64), "z": np.zeros((2, 3), dtype=np.uint16)},
             unspecified={"y": np.array([0, 0, 1, 0, 0], dtype=bool)}, params={"axis": 1}),
    ]


def _write(tmp: Path) -> Path:
    out = tmp / "suite"
    write_suite(_cases(), out, families=["elements"])
    return out


# ---- Case --------------------------------------------------------------------------------------------------
def test_case_resolves_policy_and_format():
    c = _cases()[0]
    assert c.format["name"] == "float8_e4m3fn" and c.format["nan"] == "all_ones"
    assert dict(c.policy) == {"rounding": "nearest_even", "overflow": "saturate", "nan": "keep_sign",
                              "subnormals": "keep", "input_subnormals": "keep", "source": "exact",
                              "stochastic_bits": None}
    assert c.applies_to({"overflow": "saturate_propagate"}) and c.applies_to({"rounding": "nearest_even"})
    assert not c.applies_to({"overflow": "nan"})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"id": "Elements/x"}, "id is"),
    ({"id": "uniform/x"}, "must start with the family"),
    ({"inputs": {"x": np.zeros(2, ml_dtypes.float8_e4m3fn)}}, "not allowed in a conformance case"),
    ({"expected": {}}, "at least one expected"),
    ({"unspecified": {"nope": np.zeros(5, bool)}}, "no expected array"),
    ({"unspecified": {"codes": np.zeros(4, bool)}}, "bool mask of shape"),
    ({"array_formats": {"x": "float8_e4m3fn"}}, "unsigned integer array"),
    ({"tags": ("Tie",)}, "lower_snake_case"),
    ({"policy": {"rounding": "nearest_even"}}, "policy lacks"),
])
def test_case_rejects_bad_fields(kwargs, message):
    base = {"id": "elements/x", "family": "elements", "operation": "encode", "format": "float8_e4m3fn",
            "inputs": {"x": np.zeros(5, np.float32)}, "expected": {"codes": np.zeros(5, np.uint8)}}
    with pytest.raises(QrefError, match=message):
        Case(**{**base, **kwargs})


def test_expected_from_qarray():
    from qref.conformance import expected_from_qarray
    from qref.schemes import QArray

    q = QArray(codes=np.array([-1, 2], np.int8), scheme=None, scales=np.array([0.5], np.float32),  # type: ignore
               unspecified=np.array([False, True]))
    f = expected_from_qarray(q, code_format="int8")
    assert f["expected"]["codes"].dtype == np.uint8 and list(f["expected"]["codes"]) == [255, 2]
    assert f["array_formats"] == {"codes": "int8"} and list(f["unspecified"]["codes"]) == [False, True]
    c = Case(id="uniform/t", family="uniform", operation="uniform_quantize",
             inputs={"x": np.array([-0.5, 1.0], np.float32)}, **f)
    assert set(c.expected) == {"codes", "scales"}


# ---- .npy ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arr", [np.arange(5, dtype=np.uint32), np.zeros((2, 3), np.uint8), np.array(7, np.int64),
                                 np.array([True, False]), np.zeros(0, np.uint16), np.arange(6, dtype=">u2")])
def test_npy_bytes_are_standard_and_aligned(arr):
    data = npy_bytes(arr)
    got = np.load(io.BytesIO(data), allow_pickle=False)
    assert got.shape == arr.shape and np.array_equal(got, arr) and got.dtype == arr.dtype.newbyteorder("<")
    header_len = int.from_bytes(data[8:10], "little")
    assert data[:8] == b"\x93NUMPY\x01\x00" and (10 + header_len) % 64 == 0
    assert data[10 + header_len - 1:10 + header_len] == b"\n"


def test_npy_header_text_is_fixed():
    """The exact bytes (not numpy's writer): a numpy upgrade cannot change the corpus."""
    data = npy_bytes(np.array([1, 2], dtype=np.uint32))
    header = "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }"
    assert data[10:10 + len(header)] == header.encode()
    assert data.endswith(b"\x01\x00\x00\x00\x02\x00\x00\x00") and len(data) == 128 + 8


# ---- write / load / verify ------------------------------------------------------------------------------------
def test_round_trip(tmp_path):
    out = _write(tmp_path)
    suite = load_suite(out)
    assert suite.ids == ["elements/test/a", "elements/test/b"]
    for orig, got in zip(_cases(), suite):
        assert orig.same_as(got), orig.id
    b = suite["elements/test/b"]
    assert b.inputs["x"].dtype == ml_dtypes.bfloat16 and b.expected["z"].shape == (2, 3)
    assert np.isnan(suite["elements/test/a"].inputs["x"][2])
    assert [c.id for c in suite.select(policy={"overflow": "saturate_propagate"})] == ["elements/test/a"]
    assert [c.id for c in suite.select("*/b")] == ["elements/test/b"]
    assert [c.id for c in suite.select(profile="saturating", tags=["boundary"])] == ["elements/test/a"]
    assert verify_suite(out).ok


def test_writing_twice_is_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_suite(_cases(), a)
    write_suite(_cases(), b)
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_shared_arrays_are_stored_once(tmp_path):
    x = np.arange(4, dtype=np.float32)
    cases = [Case(id=f"elements/t/{i}", family="elements", operation="encode", inputs={"x": x},
                  expected={"codes": np.full(4, i, np.uint8)}) for i in range(3)]
    m = write_suite(cases, tmp_path / "s")
    assert m["summary"]["arrays"] == 4
    assert len({c["inputs"]["x"]["file"] for c in m["cases"]}) == 1


def test_refuses_to_overwrite_and_duplicates(tmp_path):
    out = _write(tmp_path)
    with pytest.raises(SuiteError, match="not empty"):
        write_suite(_cases(), out)
    write_suite(_cases()[:1], out, overwrite=True)
    assert load_suite(out).ids == ["elements/test/a"] and verify_suite(out).ok
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(SuiteError, match="files qref did not write"):
        write_suite(_cases(), tmp_path / "other", overwrite=True)
    with pytest.raises(SuiteError, match="duplicate case id"):
        write_suite(_cases() + _cases()[:1], tmp_path / "dup")


def _first_array(out: Path) -> tuple[str, Path]:
    m = json.loads((out / "manifest.json").read_text())
    ref = m["cases"][0]["inputs"]["x"]
    return ref["file"], out / ref["file"]


def test_verify_catches_a_flipped_byte(tmp_path):
    out = _write(tmp_path)
    rel, path = _first_array(out)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    rep = verify_suite(out)
    assert not rep.ok and any("sha256 mismatch" in p and rel in p for p in rep.problems), rep.problems
    with pytest.raises(SuiteError, match="sha256 mismatch"):
        load_suite(out)["elements/test/a"]
    assert main(["verify", str(out)]) == 1


def test_verify_catches_a_missing_file(tmp_path):
    out = _write(tmp_path)
    rel, path = _first_array(out)
    path.unlink()
    rep = verify_suite(out)
    assert any(rel in p and "missing" in p for p in rep.problems), rep.problems
    with pytest.raises(SuiteError, match="is missing"):
        load_suite(out)["elements/test/a"]


def test_verify_catches_an_unlisted_file_and_schema_edits(tmp_path):
    out = _write(tmp_path)
    (out / "arrays" / "stray.npy").write_bytes(b"x")
    (out / "schema.json").write_text("{}")
    problems = verify_suite(out).problems
    assert any("stray.npy: not listed" in p for p in problems), problems
    assert any(p.startswith("schema.json: sha256 mismatch") for p in problems), problems
    assert verify_suite(out, strict=False).problems == [p for p in problems if "stray" not in p]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t[: len(t) // 2], "invalid JSON at line"),
    (lambda t: "[1, 2]", "not a qref conformance manifest"),
    (lambda t: t.replace("\"schema_version\": 1", "\"schema_version\": 2"), "schema_version 2 is not supported"),
    (lambda t: t.replace('"operation":"encode"', '"operation":7'),
     r"cases\[0\]\.operation: 7 is not of type 'string'"),
    (lambda t: t.replace('"sha256":"', '"sha256":"zz', 1), "does not match"),
    (lambda t: t.replace('"tags":["boundary"]', '"tags":["boundary"],"color":"red"'), "'color' was unexpected"),
    (lambda t: t.replace('"id":"elements/test/b"', '"id":"elements/test/a"'), "duplicate id"),
    (lambda t: t.replace('"format":"float8_e4m3fn","id"', '"format":"float9","id"'), "not in manifest.formats"),
    (lambda t: t.replace('"dtype":"float32","file"', '"dtype":"float16","file"', 1), "is stored as uint16"),
])
def test_malformed_manifests_are_reported_clearly(tmp_path, edit, message):
    out = _write(tmp_path)
    mpath = out / "manifest.json"
    text = mpath.read_text()
    new = edit(text)
    assert new != text
    mpath.write_text(new)
    with pytest.raises(SuiteError, match=message):
        load_suite(out)
    rep = verify_suite(out)
    assert not rep.ok and any(__import__("re").search(message, p) for p in rep.problems), rep.problems


def test_missing_manifest_and_directory(tmp_path):
    with pytest.raises(SuiteError, match="not a directory"):
        load_suite(tmp_path / "nope")
    with pytest.raises(SuiteError, match=r"manifest\.json: missing"):
        load_suite(tmp_path)
    with pytest.raises(QrefError, match="unknown case id"):
        load_suite(_write(tmp_path))["elements/test/c"]


# ---- schema ---------------------------------------------------------------------------------------------------
def test_manifest_matches_the_json_schema_with_a_real_validator(tmp_path):
    import jsonschema

    out = _write(tmp_path)
    m = json.loads((out / "manifest.json").read_text())
    schema = json.loads((out / "schema.json").read_text())
    assert schema == json.loads(dumps_json(SCHEMA))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(m, schema)
    assert validate_manifest(m) == []
    bad = json.loads(json.dumps(m))
    bad["cases"][0]["inputs"]["x"]["shape"] = [-1]
    bad["cases"][1]["color"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    problems = validate_manifest(bad)
    assert any("cases[0].inputs.x.shape[0]: -1 is less than the minimum of 0" in p for p in problems), problems
    assert any("cases[1]: Additional properties are not allowed ('color' was unexpected)" in p for p in problems)


# ---- random streams -------------------------------------------------------------------------------------------
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


def _pcg64_xsl_rr(label: str, n: int) -> list[int]:
    """PCG64 (XSL-RR 128/64) written from the PCG paper, seeded as random.py documents."""
    d = hashlib.sha256(label.encode()).digest()
    state, inc = int.from_bytes(d[:16], "little"), int.from_bytes(d[16:], "little") | 1
    out = []
    for _ in range(n):
        state = (state * _PCG_MULT + inc) % (1 << 128)
        x = ((state >> 64) ^ state) % (1 << 64)
        r = state >> 122
        out.append(((x >> r) | (x << ((64 - r) % 64))) % (1 << 64))
    return out


def test_random_streams_are_the_documented_pcg64():
    for label in ("elements/float8_e4m3fn/f32/random", "x", ""):
        assert [int(v) for v in qrandom.raw(label, 40)] == _pcg64_xsl_rr(label, 40)


def test_random_transforms():
    raw = [int(v) for v in qrandom.raw("t", 1000)]
    assert [int(v) for v in qrandom.bits("t", 1000, 5)] == [v >> 59 for v in raw]
    assert [int(v) for v in qrandom.below("t", 1000, 10)] == [((v >> 32) * 10) >> 32 for v in raw]
    fb = qrandom.floats_in_binades("t", 4000, "float32", -130, 5)
    v = np.abs(fb.view(np.float32).astype(np.float64))
    assert np.isfinite(v).all() and v.max() < 2.0**6 and (v < 2.0**-126).any()
    e = np.floor(np.log2(v[v >= 2.0**-126]))
    assert e.min() >= -126 and e.max() == 5
    assert fb.dtype == np.uint32 and qrandom.float_bits("t", 3, "bfloat16").dtype == np.uint16


# ---- registry and CLI -----------------------------------------------------------------------------------------
def test_family_registry(tmp_path, capsys):
    names = family_names()
    assert names[0] == "elements"
    assert main(["gen", str(tmp_path / "x"), "--families", "elemnts"]) == 2
    assert "unknown case family 'elemnts'" in capsys.readouterr().err and not (tmp_path / "x").exists()
    from qref.conformance.cases import build_family

    with pytest.raises(QrefError, match="did you mean 'elements'"):
        build_family("elemnts")


def test_cli_verify_show_export_on_a_small_suite(tmp_path, capsys):
    out = _write(tmp_path)
    assert main(["verify", str(out)]) == 0
    assert "ok:" in capsys.readouterr().out
    assert main(["show", "--suite", str(out), "elements/test/a"]) == 0
    text = capsys.readouterr().out
    assert "0x43E04000" in text and "448.5" in text and "0x7E" in text and "448.0" in text and "-nan" not in text
    assert "rounding=nearest_even" in text and "overflow=saturate_propagate" in text
    assert main(["show", "--suite", str(out), "elements/test/b"]) == 0
    assert "*" in capsys.readouterr().out  # the unspecified element is marked
    assert main(["show", "--suite", str(out), "elements/*"]) == 0
    assert capsys.readouterr().out.split() == ["elements/test/a", "elements/test/b"]
    assert main(["show", "--suite", str(out), "elements/test/x"]) == 2
    assert "unknown case id" in capsys.readouterr().err
    assert main(["export", str(out), "--jsonl", str(tmp_path / "s.jsonl")]) == 0
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(lines) == 2 and first["inputs"]["x"]["hex"] == ["3f800000", "80000000", "7fc00000", "43e04000",
                                                                  "3b000000"]
    assert first["expected"]["codes"]["hex"] == ["38", "80", "7f", "7e", "01"]
    assert json.loads(lines[1])["unspecified"] == {"y": "00100"}
    assert main(["export", str(out)]) == 2
    assert "nothing to export" in capsys.readouterr().err


def test_cli_gen_refuses_a_non_empty_directory(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    assert main(["gen", str(tmp_path), "-q"]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.skipif(not COMMITTED.is_dir(), reason="the committed corpus conformance/v1 is not in this checkout")
def test_committed_corpus_verifies(tmp_path):
    rep = verify_suite(COMMITTED)
    assert rep.ok, rep.problems[:10]
    assert rep.cases > 1000 and rep.bytes < 50e6
    copy = tmp_path / "v1"
    shutil.copytree(COMMITTED, copy)
    assert verify_suite(copy).ok


def test_vectors_md_counts_match_the_committed_suite():
    """docs/vectors.md states the committed suite's case count, size and cases per family; they must be the
    manifest's (the README and the docs disagreed: 4,046 vs 4,474)."""
    import collections
    import re

    text = (COMMITTED.parents[1] / "docs" / "vectors.md").read_text()
    m = re.search(r"`conformance/v1/` \(([\d,]+) cases, (\d+) MB of arrays: ([^)]*)\)", text.replace("\n  ", " "))
    assert m, "docs/vectors.md no longer states the suite's counts in the expected sentence"
    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    families = collections.Counter(c["family"] for c in manifest["cases"])
    stated = {name: int(n.replace(",", "")) for name, n in re.findall(r"([a-z_]+) ([\d,]+)", m[3])}
    assert int(m[1].replace(",", "")) == manifest["summary"]["cases"]
    assert int(m[2]) == round(manifest["summary"]["bytes"] / 1e6)
    assert stated == dict(families), (stated, dict(families))


def test_run_refuses_to_overwrite_the_divergence_page(tmp_path, capsys):
    """--findings writes DIR/divergence.md too: an existing one is refused (before any backend runs), like the
    per-backend pages."""
    d = tmp_path / "findings"
    d.mkdir()
    (d / "divergence.md").write_text("mine")
    assert main(["run", "--backend", "ml_dtypes", "--findings", str(d)]) == 2
    assert "divergence.md" in capsys.readouterr().err and (d / "divergence.md").read_text() == "mine"
