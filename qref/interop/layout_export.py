"""Suite arrays written in the storage layouts of block.md §9.1 (``qref export --layout``), and read back.

For each case and each of its code arrays that the layout fits (block.md §9.1):

swizzled_128x4   2-D block-scale arrays (name containing "scale", codes of at most 8 bits): flat bytes, padded
                 to 128-row x 4-column tiles.
fp6_x4           arrays of a 6-bit format, packed along the last axis four codes in three bytes.
trainium_mx_8x4  2-D element-code arrays (not scales) with rows a multiple of 8 and columns a multiple of 4:
                 (rows / 8, cols / 4, 32) groups.

Each array becomes the raw file ``<case id>/<array>.<layout>.bin`` under the output directory; ``index.tsv`` has
one line per file: path, case id, array, layout, format, bits, shape (comma-separated), dtype of the bytes,
sha256. ``read_layout_export`` unpacks every file listed back to codes (the round trip).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import QrefError, check_choice
from ..formats import get_format
from .packing import pack, unpack

EXPORT_LAYOUTS = ("swizzled_128x4", "fp6_x4", "trainium_mx_8x4")
INDEX = "index.tsv"


def _fits(name: str, a: np.ndarray, bits: int, layout: str) -> bool:
    scale = "scale" in name
    if layout == "swizzled_128x4":
        return scale and a.ndim == 2 and bits <= 8
    if layout == "fp6_x4":
        return bits == 6 and a.ndim >= 1
    return not scale and a.ndim == 2 and a.shape[0] % 8 == 0 and a.shape[1] % 4 == 0 and a.size > 0


def _arrays(case: Any) -> Iterator[tuple[str, np.ndarray, str]]:
    for side in (case.inputs, case.expected):
        for name, a in side.items():
            fmt = case.array_formats.get(name)
            if fmt is not None:
                yield name, np.asarray(a), fmt


def export_layout(cases: Iterable[Any], out_dir: str | os.PathLike[str], layout: str) -> int:
    """Write every fitting code array of ``cases`` (objects with id, inputs, expected, array_formats) in
    ``layout`` under ``out_dir`` plus ``index.tsv``; returns the number of files written."""
    check_choice("export layout", layout, EXPORT_LAYOUTS)
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for case in cases:
        for name, a, fmt in _arrays(case):
            bits = get_format(fmt).bits
            if not _fits(name, a, bits, layout):
                continue
            packed = np.ascontiguousarray(pack(a.astype(np.uint64), layout, bits=bits))
            rel = f"{case.id}/{name}.{layout}.bin"
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            data = packed.astype(packed.dtype.newbyteorder("<")).tobytes()
            path.write_bytes(data)
            shape = ",".join(str(d) for d in a.shape)
            lines.append("\t".join((rel, case.id, name, layout, fmt, str(bits), shape, packed.dtype.name,
                                    hashlib.sha256(data).hexdigest())))
    (root / INDEX).write_text("".join(line + "\n" for line in lines))
    return len(lines)


def read_layout_export(out_dir: str | os.PathLike[str]) -> Iterator[tuple[str, str, np.ndarray]]:
    """(case id, array name, codes) for every file of an ``export_layout`` directory, unpacked from its bytes
    (checked against the index's sha256)."""
    root = Path(out_dir)
    for line in (root / INDEX).read_text().splitlines():
        rel, cid, name, layout, _fmt, bits_s, shape_s, dtype, digest = line.split("\t")
        data = (root / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise QrefError(f"{root / rel}: sha256 differs from {INDEX}; the file was changed after export")
        shape = tuple(int(d) for d in shape_s.split(","))
        bits = int(bits_s)
        raw = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.dtype(dtype))
        if layout == "swizzled_128x4":
            codes = unpack(raw, layout, bits=bits, shape=(shape[0], shape[1]))
        elif layout == "trainium_mx_8x4":
            codes = unpack(raw.reshape(shape[0] // 8, shape[1] // 4, 32), layout, bits=bits)
        else:
            per_row = -(-shape[-1] * bits // 8)
            codes = unpack(raw.reshape(*shape[:-1], per_row), layout, bits=bits, count=shape[-1])
        yield cid, name, np.asarray(codes).reshape(shape)


__all__ = ["EXPORT_LAYOUTS", "export_layout", "read_layout_export"]
