"""`qref export --layout` (block.md §9.1): the written files, read here with numpy alone and unpacked by hand from
the layouts' definitions, equal the committed suite's arrays (manifest.json + np.load); then the same files
through qref's own reader (the round trip) and the option's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qref.cli import main
from qref.errors import QrefError
from qref.interop.layout_export import read_layout_export

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")
GLOB = "block/mxfp6_e3m2/f32/*/ocp"


def _suite_arrays() -> dict[tuple[str, str], np.ndarray]:
    m = json.loads((COMMITTED / "manifest.json").read_text())
    out = {}
    for c in m["cases"]:
        if c["id"].startswith("block/mxfp6_e3m2/f32/") and c["id"].endswith("/ocp"):
            for side in ("inputs", "expected"):
                for k, a in c[side].items():
                    out[(c["id"], k)] = np.load(COMMITTED / a["file"])
    return out


def _by_hand(raw: bytes, layout: str, shape: tuple[int, ...]) -> np.ndarray:
    b = np.frombuffer(raw, np.uint8).astype(np.int64)
    if layout == "fp6_x4":  # four 6-bit codes in each little-endian 24-bit word
        words = b.reshape(-1, 3) @ np.array([1, 1 << 8, 1 << 16])
        codes = ((words[:, None] >> np.array([0, 6, 12, 18])) & 63).reshape(shape[0], -1)
        return codes[:, : shape[1]]
    if layout == "swizzled_128x4":  # 128x4 tiles row-tile-major, (r, c) at 16 (r mod 32) + 4 (r // 32) + c
        rows, cols = shape
        tc = -(-cols // 4)
        out = np.zeros(shape, np.int64)
        for r in range(rows):
            for c in range(cols):
                tile = (r // 128) * tc + c // 4
                out[r, c] = b[512 * tile + 16 * (r % 32) + 4 * ((r % 128) // 32) + c % 4]
        return out
    g = b.reshape(shape[0] // 8, shape[1] // 4, 32)  # trainium_mx_8x4: group (p // 8, f // 4), 4 (p mod 8) + f mod 4
    p, f = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return g[p // 8, f // 4, 4 * (p % 8) + f % 4]


@pytest.mark.parametrize("layout", ["fp6_x4", "swizzled_128x4", "trainium_mx_8x4"])
def test_export_layout_files(tmp_path: Path, layout: str) -> None:
    out = tmp_path / layout
    assert main(["export", str(COMMITTED), "--layout", layout, "--layout-out", str(out), "--cases", GLOB]) == 0
    want = _suite_arrays()
    lines = (out / "index.tsv").read_text().splitlines()
    assert lines, "no array was written"
    seen = set()
    for line in lines:
        rel, cid, name, lay, _fmt, _bits, shape_s, _dt, _sha = line.split("\t")
        shape = tuple(int(d) for d in shape_s.split(","))
        assert lay == layout and want[(cid, name)].shape == shape
        assert np.array_equal(_by_hand((out / rel).read_bytes(), layout, shape), want[(cid, name)].astype(np.int64))
        seen.add(name)
    assert seen == {"fp6_x4": {"codes"}, "swizzled_128x4": {"scales"}, "trainium_mx_8x4": {"codes"}}[layout]
    got = {(cid, name): codes for cid, name, codes in read_layout_export(out)}  # the round trip
    assert len(got) == len(lines)
    for key, codes in got.items():
        assert np.array_equal(codes.astype(np.int64), want[key].astype(np.int64))


def test_export_layout_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(COMMITTED), "--layout", "fp6_x4", "--cases", GLOB]) != 0
    assert "--layout LAYOUT and --layout-out OUT_DIR go together" in capsys.readouterr().err
    out = tmp_path / "o"
    assert main(["export", str(COMMITTED), "--layout", "fp6_x4", "--layout-out", str(out), "--cases", GLOB]) == 0
    rel = (out / "index.tsv").read_text().split("\t", 1)[0]
    data = bytearray((out / rel).read_bytes())
    data[0] ^= 1
    (out / rel).write_bytes(bytes(data))
    with pytest.raises(QrefError, match="sha256 differs"):
        list(read_layout_export(out))
