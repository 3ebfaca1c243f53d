"""Byte-stable .npy files (NPY format version 1.0, written by qref itself; docs/vectors.md §3).

numpy's own writer may change its header text or padding between versions; the suite must be byte-identical
across numpy versions, so qref writes the header itself:

    b"\\x93NUMPY" 0x01 0x00 <uint16 little-endian header length> header
    header = "{'descr': '<u4', 'fortran_order': False, 'shape': (12,), }" + spaces + "\\n"
             padded so that the data starts at a multiple of 64 bytes
    data   = the array's bytes, C order, little-endian

Any .npy reader (numpy.load with allow_pickle=False, cnpy, libnpy...) reads these files.
"""

from __future__ import annotations

import io

import numpy as np

from ..errors import QrefError

MAGIC = b"\x93NUMPY\x01\x00"
ALIGN = 64


def _descr(dt: np.dtype) -> str:
    if dt == np.bool_:
        return "|b1"
    if dt.kind not in "iu":
        raise QrefError(f"stored arrays are integers or bool, got {dt}")
    return ("|" if dt.itemsize == 1 else "<") + dt.kind + str(dt.itemsize)


def npy_bytes(arr: np.ndarray) -> bytes:
    """The .npy file of an integer or bool array, byte for byte independent of the numpy version."""
    dt = arr.dtype
    descr = _descr(dt)
    shape = tuple(int(s) for s in arr.shape)
    shape_text = "()" if not shape else "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    pad = -(len(MAGIC) + 2 + len(header) + 1) % ALIGN
    header_bytes = (header + " " * pad + "\n").encode("latin1")
    data = np.ascontiguousarray(arr).astype(dt.newbyteorder("<") if dt.itemsize > 1 else dt, copy=False).tobytes()
    return MAGIC + len(header_bytes).to_bytes(2, "little") + header_bytes + data


def read_npy(data: bytes, where: str) -> np.ndarray:
    """Parse .npy bytes with numpy (allow_pickle=False); errors name ``where``."""
    if not data.startswith(b"\x93NUMPY"):
        raise QrefError(f"{where}: not a .npy file (bad magic bytes)")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise QrefError(f"{where}: unreadable .npy file: {exc}") from None
