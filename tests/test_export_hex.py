"""Hex vectors for hardware testbenches (docs/vectors.md §8.1): `qref export --hex` and `qref verify-hex`.

The exported words are checked against the committed suite's .npy files read here with numpy alone (manifest.json
parsed with json, arrays with np.load) and the hex parsed here; the flags against ml_dtypes' classification and
hand-written bit tables; the verifier by round trips, single flipped bits and malformed files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qref.cli import main
from qref.conformance import load_suite
from qref.conformance.export import export_hex, hex_reason, to_hex, verify_hex
from qref.errors import QrefError

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")

EXPORTED = (
    "elements/float8_e4m3fn/f32/nearest_even/saturate/overflow",
    "elements/float8_e4m3fn/f32/nearest_even/nan/special",
    "elements/float8_e4m3fn/f32/toward_zero/saturate/subnormal",
    "elements/float8_e5m2/f32/stochastic_a_n3/inf/grid_n3",
    "elements/float4_e2m1fn/f32/nearest_even/saturate/overflow",
    "elements/float6_e3m2fn/f32/nearest_even/saturate/special",
    "elements/float8_e8m0fnu/decode/float16",
    "elements/bfloat16/f32/nearest_even/saturate/ties",
    "uniform/int4/pt_s0.1_z-1/f32/ties/mlir",
    "uniform/int8/pt_s0.5_z-3/dequantize/stablehlo",
    "uniform/int8/axis1/f32/mixed/stablehlo",
    "block/mxfp8_e4m3/f32/zero/ocp",
    "block/nvfp4/f32/global_0.37/nonfinite/jax",
    "block/mlx_affine/b3_g64/f32/huge/mlx",
    "lookup/nf4/b64/f32/special/bitsandbytes_dq",
    "recipes/scaled_qdq/float8_e4m3fn/divide/ftz/s0.37/special",
)
SKIPPED = {
    "block/pack/lsb_first/b3": "bit packing",
    "gemm/mma/volta/mma/m8n8k4.f32.f16.f16.f32/special": "a matrix product",
    "recipes/delayed_scaling/float8_e4m3fn/max/l1/ftz/nan": "a recurrence",
}
ML = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
      "float4_e2m1fn": ml_dtypes.float4_e2m1fn, "float6_e3m2fn": ml_dtypes.float6_e3m2fn,
      "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
      "float32": np.float32}


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((COMMITTED / "manifest.json").read_text())


@pytest.fixture(scope="module")
def entries(manifest) -> dict:
    return {c["id"]: c for c in manifest["cases"]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    suite = load_suite(COMMITTED)
    out = tmp_path_factory.mktemp("hex")
    export_hex([suite[i] for i in (*EXPORTED, *SKIPPED)], out, "v1")
    return out


def _npy(entry_ref: dict) -> np.ndarray:
    """The array's stored words as uint64, C order (np.load of the suite file: unsigned bits, bools as 0/1)."""
    a = np.load(COMMITTED / entry_ref["file"], allow_pickle=False).reshape(-1)
    return a.astype(np.uint64)


def _bits(manifest: dict, ref: dict) -> int:
    if ref["dtype"] == "bool":
        return 1
    if "format" in ref:
        return manifest["formats"][ref["format"]]["bits"]
    return np.dtype(ref["storage"]).itemsize * 8


def _parse(path: Path) -> tuple[dict, list[tuple[str, str, int, int]], list[list[str]]]:
    """Header fields, columns (role, name, bits, digits) and data rows of a vector file, parsed here."""
    meta, cols, rows = {}, [], []
    for line in path.read_text(encoding="ascii").splitlines():
        if line.startswith("# column "):
            _, rest = line.split(": ", 1)
            role, name, _fmt, bits, digits = rest.split()
            cols.append((role, name, int(bits), int(digits)))
        elif line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1)
            meta.setdefault(k, v)
        elif line and not line.startswith("#"):
            rows.append(line.split(" "))
    return meta, cols, rows


def test_reasons_and_index(exported, manifest):
    """Every selected case is exported or listed as skipped with its reason; index.txt says which."""
    index = (exported / "index.txt").read_text().splitlines()
    assert index[0].startswith("# qref hex export 1") and f"{len(EXPORTED)} cases exported, {len(SKIPPED)} skipped" \
        in index[0]
    for cid in EXPORTED:
        assert f"case {cid}" in index and (exported / cid / "case.txt").is_file()
    for cid, why in SKIPPED.items():
        line = next(x for x in index if x.startswith(f"skip {cid}: "))
        assert why in line and not (exported / cid).exists()


def test_words_are_the_suite_arrays(exported, manifest, entries):
    """Each column of each vector file, and each $readmemh file, holds the suite's words in C order, fixed width
    ceil(bits / 4) hex digits; every array of the case appears exactly once as a column."""
    for cid in EXPORTED:
        e = entries[cid]
        refs = {("in", k): r for k, r in e["inputs"].items()} | {("exp", k): r for k, r in e["expected"].items()}
        seen = set()
        for vec in sorted((exported / cid).glob("*.hex")):
            meta, cols, rows = _parse(vec)
            assert meta["case"] == cid and int(meta["lines"]) == len(rows)
            for j, (role, name, bits, digits) in enumerate(cols):
                if role == "flags":
                    continue
                ref = refs[(role, name)]
                assert bits == _bits(manifest, ref) and digits == math.ceil(bits / 4), (cid, name)
                assert meta["shape"] == ("x".join(map(str, ref["shape"])) or "scalar")
                words = [r[j] for r in rows]
                assert all(len(w) == digits for w in words), (cid, name)
                got = np.array([int(w, 16) for w in words], dtype=np.uint64)
                np.testing.assert_array_equal(got, _npy(ref), err_msg=f"{cid} {role} {name}")
                memh = (exported / cid / f"{role}.{name}.memh").read_text().split("\n")
                assert memh[-1] == "" and memh[:-1] == words
                seen.add((role, name))
        assert seen == set(refs), cid
        for name, ref in e["unspecified"].items():
            mask = (exported / cid / f"unspec.{name}.memh").read_text().split()
            np.testing.assert_array_equal(np.array([int(w) for w in mask], np.uint64), _npy(ref))


def _flags(exported: Path, cid: str, name: str) -> np.ndarray:
    for vec in sorted((exported / cid).glob("*.hex")):
        _, cols, rows = _parse(vec)
        for j, (role, n, _, _) in enumerate(cols):
            if role == "flags" and n == name:
                return np.array([int(r[j], 16) for r in rows], np.uint8)
    raise AssertionError(f"{cid}: no flags column for {name}")


def _ml_values(words: np.ndarray, fmt: str) -> np.ndarray:
    dt = np.dtype(ML[fmt])
    store = np.uint16 if dt.itemsize == 2 else np.uint32 if dt.itemsize == 4 else np.uint8
    with np.errstate(invalid="ignore"):
        return words.astype(store).view(dt).astype(np.float64)


@pytest.mark.parametrize("cid", [c for c in EXPORTED if c.startswith("elements/")])
def test_flags_of_element_casts_by_ml_dtypes(exported, manifest, entries, cid):
    """nan/inf/zero/subnormal of the expected code and out_of_range/inexact/saturated of the cast, recomputed
    with ml_dtypes' value of every code (docs/vectors.md §8.1 definitions)."""
    e = entries[cid]
    (name, ref), = e["expected"].items()
    src = "codes" if e["operation"] == "decode" else "x"
    sref = e["inputs"][src]
    v = _ml_values(_npy(sref), sref.get("format", sref["dtype"]))
    r = _ml_values(_npy(ref), ref.get("format", ref["dtype"]))
    dest = ref.get("format", ref["dtype"]) if e["operation"] != "quantize" else e["format"]
    fi = ml_dtypes.finfo(ML[dest])
    top, tiny = float(fi.max), float(fi.smallest_normal)
    want = np.zeros(r.shape, np.uint8)
    with np.errstate(invalid="ignore"):
        want[np.isnan(r)] |= 0x02
        want[np.isinf(r)] |= 0x04
        want[r == 0] |= 0x08
        if dest != "float8_e8m0fnu":
            want[(r != 0) & (np.abs(r) < tiny)] |= 0x10
        want[np.isfinite(v) & (np.abs(v) > top)] |= 0x20
        want[~np.isnan(v) & (np.isnan(r) | (r != v))] |= 0x40
        want[((v > top) & (r == top)) | ((v < -top) & (r == -top))] |= 0x80
    np.testing.assert_array_equal(_flags(exported, cid, name), want, err_msg=cid)


def test_flags_hand_written_rows(exported):
    """Rows whose flags follow from the spec by hand (E4M3FN: max 448 = 0x43e00000 in float32, code 0x7e)."""
    def rows(cid: str) -> dict[str, str]:
        _, _, rs = _parse(exported / cid / "elements.hex")
        return {r[0]: " ".join(r[1:]) for r in rs}
    sat = rows("elements/float8_e4m3fn/f32/nearest_even/saturate/overflow")
    assert sat["43e00000"] == "7e 00"  # 448 exactly: exact, in range
    assert sat["43dfffff"] == "7e 40"  # just below 448: rounds to 448, inexact
    assert sat["43e00001"] == "7e e0"  # just above 448: out of range, inexact, saturated
    assert sat["c3e00001"] == "fe e0"
    special = rows("elements/float8_e4m3fn/f32/nearest_even/nan/special")
    assert special["7f800000"] == "7f 42"  # +Inf -> NaN (no Inf in E4M3FN): nan, inexact
    assert special["7fc00000"] == "7f 02"  # NaN -> NaN: nan only
    assert special["80000000"] == "80 08"  # -0 -> -0: zero
    sub = rows("elements/float8_e4m3fn/f32/toward_zero/saturate/subnormal")
    assert sub["3b000000"] == "01 10"  # 2^-9, the smallest subnormal, exact
    assert sub["3b000001"] == "01 50"  # just above it, truncated: subnormal, inexact
    assert sub["00000001"] == "00 48"  # float32's smallest subnormal -> +0: zero, inexact
    dec = rows("elements/float8_e8m0fnu/decode/float16")
    assert dec["7f"] == "3c00 00"  # 2^0 = 1.0 exactly
    assert dec["00"] == "0000 48"  # 2^-127 underflows float16 to +0
    assert dec["ff"] == "7e00 02"  # the E8M0 NaN
    assert dec["8f"] == "7c00 64"  # 2^16 > 65504: out of range, Inf, inexact


def test_unspecified_flags_follow_the_masks(exported, entries):
    for cid in EXPORTED:
        for name, ref in entries[cid]["unspecified"].items():
            fl = _flags(exported, cid, name)
            np.testing.assert_array_equal((fl & 1).astype(np.uint64), _npy(ref), err_msg=f"{cid} {name}")


def test_determinism(exported, tmp_path):
    """A second export (through the CLI, --format hex --out) is byte-identical, file for file."""
    out = tmp_path / "again"
    suite = load_suite(COMMITTED)
    export_hex([suite[i] for i in (*EXPORTED, *SKIPPED)], out, "v1")
    files = sorted(p.relative_to(exported) for p in exported.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for f in files:
        assert (exported / f).read_bytes() == (out / f).read_bytes(), f
    cli = tmp_path / "cli"
    assert main(["export", str(COMMITTED), "--format", "hex", "--out", str(cli), "--cases", EXPORTED[0]]) == 0
    for f in (exported / EXPORTED[0]).iterdir():
        assert (cli / EXPORTED[0] / f.name).read_bytes() == f.read_bytes()


def test_round_trip_verifies(exported, tmp_path, capsys):
    """The export as its own results: 0 mismatches; every element is compared once per results file except
    the unspecified ones."""
    res = tmp_path / "res"
    shutil.copytree(exported, res)
    rep = verify_hex(exported, res)
    assert rep.ok and not rep.mismatches
    n_hex = len(list(exported.rglob("*.hex")))
    n_memh = len(list(exported.rglob("exp.*.memh")))
    assert len(rep.files) == n_hex + n_memh
    assert rep.unspecified > 0
    assert main(["verify-hex", str(exported), str(res)]) == 0
    assert "OK: " in capsys.readouterr().out


def _flip(path: Path, line_no: int, column: int) -> tuple[str, str]:
    """Flip the lowest bit of a word (column of a data line, 0-based) in place; (old, new)."""
    lines = path.read_text().split("\n")
    data = [i for i, x in enumerate(lines) if x and not x.startswith("#")]
    i = data[line_no]
    f = lines[i].split(" ")
    old = f[column]
    f[column] = f"{int(old, 16) ^ 1:0{len(old)}x}"
    lines[i] = " ".join(f)
    path.write_text("\n".join(lines))
    return old, f[column]


def test_one_flipped_bit_is_one_mismatch(exported, tmp_path, capsys):
    cid = "block/mxfp8_e4m3/f32/zero/ocp"
    res = tmp_path / "r" / cid
    res.mkdir(parents=True)
    shutil.copy(exported / cid / "elements.hex", res / "elements.hex")
    old, new = _flip(res / "elements.hex", 37, 1)  # element 37 of x (3x32): row 1, column 5; codes
    rep = verify_hex(exported, tmp_path / "r")
    assert len(rep.mismatches) == 1
    m = rep.mismatches[0]
    assert (m.case, m.file, m.index, m.position, m.column, m.expected, m.got) == (
        cid, "elements.hex", 37, (1, 5), "exp codes", old, new)
    assert main(["verify-hex", str(exported), str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "element 37 [1, 5]" in out and f"expected {old} got {new}" in out and "FAIL" in out


def test_flipped_bits_in_readmemh_results_and_unspecified_elements(exported, tmp_path):
    """A results file in $readmemh form: one word per line; a wrong word where the spec leaves the element
    unspecified is not a mismatch, elsewhere it is; Verilog x digits are a mismatch."""
    cid = "block/mxfp8_e4m3/f32/zero/ocp"  # every scale of this case is unspecified
    ref = exported / cid / "exp.scales.memh"
    got = tmp_path / "exp.scales.memh"
    got.write_text("ff\n7f\n00\n")
    rep = verify_hex(ref, got)
    assert rep.ok and rep.compared == 0 and rep.unspecified == 3
    codes = (exported / cid / "exp.codes.memh").read_text().split("\n")
    codes[4] = "x" + codes[4][1:]
    codes[90] = f"{int(codes[90], 16) ^ 0x80:02x}"
    (tmp_path / "exp.codes.memh").write_text("\n".join(codes))
    rep = verify_hex(exported / cid / "exp.codes.memh", tmp_path / "exp.codes.memh")
    assert [(m.index, m.position, m.line) for m in rep.mismatches] == [(4, (0, 4), 5), (90, (2, 26), 91)]
    assert rep.mismatches[0].got.startswith("x")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t, None),  # the control: unedited, it verifies
    (lambda t: _replace_row(t, 3, "43e00001 7e0 e0"), "3 hex digits"),
    (lambda t: _replace_row(t, 3, "43e00001 g1 e0"), "not hexadecimal"),
    (lambda t: _replace_row(t, 3, "43e00001 7e e0 00"), "4 fields"),
    (lambda t: _replace_row(t, 3, "43e00002 7e e0"), "input x"),
    (lambda t: _replace_row(t, 3, ""), "data lines"),
])
def test_malformed_results_are_errors(exported, tmp_path, capsys, edit, message):
    cid = "elements/float8_e4m3fn/f32/nearest_even/saturate/overflow"
    text = (exported / cid / "elements.hex").read_text()
    got = tmp_path / "elements.hex"
    got.write_text(edit(text))
    if message is None:
        assert verify_hex(exported / cid / "elements.hex", got).ok
        return
    with pytest.raises(QrefError, match=message):
        verify_hex(exported / cid / "elements.hex", got)
    assert main(["verify-hex", str(exported / cid / "elements.hex"), str(got)]) == 2
    assert "qref verify-hex: error:" in capsys.readouterr().err


def _replace_row(text: str, k: int, new: str) -> str:
    lines = text.split("\n")
    data = [i for i, x in enumerate(lines) if x and not x.startswith("#")]
    if new:
        lines[data[k]] = new
    else:
        del lines[data[k]]
    return "\n".join(lines)


def test_malformed_readmemh_and_references(exported, tmp_path):
    cid = "elements/float4_e2m1fn/f32/nearest_even/saturate/overflow"
    ref = exported / cid / "exp.codes.memh"
    words = ref.read_text().split()
    for bad, message in ((["10", *words[1:]], "2 hex digits"), (words[:-1], "data lines"),
                         (["// device", *words], "comments"), (["@0", *words], "address")):
        p = tmp_path / "exp.codes.memh"
        p.write_text("\n".join(bad) + "\n")
        with pytest.raises(QrefError, match=message):
            verify_hex(ref, p)
    not_ref = tmp_path / "plain.hex"
    not_ref.write_text("00 01\n")
    with pytest.raises(QrefError, match="not a qref hex vector file"):
        verify_hex(not_ref, not_ref)
    with pytest.raises(QrefError, match="not ASCII"):
        (tmp_path / "u.hex").write_bytes("# qref hex vectors 1 \u00e9\n".encode())
        verify_hex(tmp_path / "u.hex", tmp_path / "u.hex")


def test_results_directories_are_confined(exported, tmp_path):
    """A results directory is walked without following links; its files must have a reference of the same
    relative path inside the export."""
    res = tmp_path / "res"
    res.mkdir()
    with pytest.raises(QrefError, match="no results files"):
        verify_hex(exported, res)
    cid = EXPORTED[0]
    (res / "x").mkdir()
    os.symlink(exported / cid, res / "x" / "link")
    with pytest.raises(QrefError, match="symbolic link"):
        verify_hex(exported, res)
    (res / "x" / "link").unlink()
    (res / "x" / "elements.hex").write_text("")
    with pytest.raises(QrefError, match="does not exist"):
        verify_hex(exported, res)
    with pytest.raises(QrefError, match="must be a file too"):
        verify_hex(exported, res / "x" / "elements.hex")


def test_to_hex_refuses_cases_without_an_element_wise_form():
    suite = load_suite(COMMITTED)
    for cid, why in SKIPPED.items():
        assert why in hex_reason(suite[cid])
        with pytest.raises(QrefError, match="no hex vectors"):
            to_hex(suite[cid])


def test_cli_export_hex_reports_skips(tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["export", str(COMMITTED), "--hex", str(out), "--cases", "block/pack/lsb_first/b3*"]) == 0
    text = capsys.readouterr().out
    assert "wrote hex vectors of 0 cases" in text and "bit packing" in text
    assert main(["export", str(COMMITTED), "--hex", str(out), "--cases", "block/pack/lsb_first/b3*"]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["export", str(COMMITTED), "--format", "hex"]) == 2
    assert "needs --out" in capsys.readouterr().err


def test_results_of_another_case_and_links_in_the_output_are_refused(exported, tmp_path):
    a, b = EXPORTED[0], EXPORTED[1]
    got = tmp_path / "elements.hex"
    got.write_text((exported / b / "elements.hex").read_text())
    with pytest.raises(QrefError, match=f"results of case {b}"):
        verify_hex(exported / a / "elements.hex", got)
    out = tmp_path / "out"
    (out / "elements" / "float8_e4m3fn" / "f32" / "nearest_even" / "saturate").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(victim, out / "elements" / "float8_e4m3fn" / "f32" / "nearest_even" / "saturate" / "overflow")
    with pytest.raises(QrefError, match="symbolic link"):
        export_hex([load_suite(COMMITTED)[a]], out, "v1")
    assert not any(victim.iterdir())


ELEMENT_WISE = {  # written here from the spec pages, not read from the exporter
    ("elements", "encode"), ("elements", "decode"), ("elements", "quantize"), ("uniform", "uniform_quantize"),
    ("uniform", "uniform_dequantize"), ("uniform", "uniform_requantize"), ("block", "block_quantize"),
    ("block", "block_dequantize"), ("block", "tile_quantize"), ("block", "stochastic_quantize"),
    ("lookup", "lookup_quantize"), ("lookup", "lookup_dequantize"), ("lookup", "stochastic_quantize"),
    ("recipes", "scaled_qdq"),
}


def _section(text: str) -> str:
    return text.split("### 8.1 Hex vectors", 1)[1].split("\n## 9.", 1)[0]


def test_docs_counts_and_examples_match_the_export(manifest, exported, tmp_path):
    """docs/vectors.md §8.1: the exported / skipped counts per the manifest; one case per (family, operation)
    confirms hex_reason agrees; the header example and the mismatch line are what the code writes."""
    raw = _section((COMMITTED.parents[1] / "docs" / "vectors.md").read_text())
    doc = " ".join(raw.split())
    kinds: dict[tuple[str, str], str] = {}
    fam: dict[str, int] = {}
    skip = {"matrix": 0, "delayed_scaling": 0, "pack": 0, "unpack": 0, "hadamard": 0, "uniform_calibrate": 0,
            "fake_quantize": 0}
    for c in manifest["cases"]:
        k = (c["family"], c["operation"])
        kinds.setdefault(k, c["id"])
        if k in ELEMENT_WISE:
            fam[c["family"]] = fam.get(c["family"], 0) + 1
        else:
            matrix = c["family"] == "matmul" or c["operation"] in ("gemm", "mma", "block_matmul", "qdq_matmul")
            skip["matrix" if matrix else c["operation"]] += 1
    n = sum(fam.values())
    assert (f"Of the committed suite's {len(manifest['cases'])} cases, {n} are exported (elements {fam['elements']}, "
            f"uniform {fam['uniform']}, block {fam['block']}, lookup {fam['lookup']}, recipes {fam['recipes']}) and "
            f"{sum(skip.values())} skipped ({skip['matrix']} matrix products, {skip['delayed_scaling']} "
            f"delayed_scaling, {skip['pack']} pack, {skip['unpack']} unpack, {skip['hadamard']} hadamard, "
            f"{skip['uniform_calibrate']} uniform_calibrate, {skip['fake_quantize']} fake_quantize)") in doc
    suite = load_suite(COMMITTED)
    for k, cid in kinds.items():
        assert (hex_reason(suite[cid]) is None) == (k in ELEMENT_WISE), cid
    block = raw.split("```\n# qref hex vectors 1", 1)[1].split("```", 1)[0]
    real = (exported / EXPORTED[0] / "elements.hex").read_text().split("\n")
    shown = ["# qref hex vectors 1" + block.split("\n", 1)[0], *block.split("\n")[1:-1]]
    assert shown[:-1] == real[:len(shown) - 1] and shown[-1] == "..."
    res = tmp_path / "r" / "block/mxfp8_e4m3/f32/zero/ocp"
    res.mkdir(parents=True)
    src = exported / "block/mxfp8_e4m3/f32/zero/ocp" / "elements.hex"
    lines = src.read_text().split("\n")
    data = [i for i, x in enumerate(lines) if x and not x.startswith("#")]
    f = lines[data[37]].split(" ")
    f[1] = "01"
    lines[data[37]] = " ".join(f)
    (res / "elements.hex").write_text("\n".join(lines))
    rep = verify_hex(exported, tmp_path / "r")
    assert f"```\n{rep.mismatches[0].text()}\nFAIL: {rep.summary()}\n```" in raw


@pytest.mark.parametrize("cid", [c for c in EXPORTED if not c.startswith("elements/")])
def test_flags_of_scheme_outputs(exported, entries, cid):
    """Block, uniform, lookup and recipe outputs: nan/inf/zero/subnormal of float words by ml_dtypes, none for
    integer codes, no cast flags (20/40/80), 01 exactly where the mask is set."""
    e = entries[cid]
    for name, ref in e["expected"].items():
        fmt = ref.get("format", ref["dtype"])
        want = np.zeros(math.prod(ref["shape"]), np.uint8)
        if fmt in ML:
            r = _ml_values(_npy(ref), fmt)
            with np.errstate(invalid="ignore"):
                want[np.isnan(r)] |= 0x02
                want[np.isinf(r)] |= 0x04
                want[r == 0] |= 0x08
                if fmt != "float8_e8m0fnu":
                    want[(r != 0) & (np.abs(r) < float(ml_dtypes.finfo(ML[fmt]).smallest_normal))] |= 0x10
        else:
            assert fmt.startswith(("int", "uint")), (cid, name, fmt)
        if name in e["unspecified"]:
            want |= _npy(e["unspecified"][name]).astype(np.uint8)
        np.testing.assert_array_equal(_flags(exported, cid, name), want, err_msg=f"{cid} {name}")
