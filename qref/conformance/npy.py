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

import ast
import math
from collections.abc import Sequence

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


def _header(data: bytes, where: str) -> tuple[str, bool, tuple[int, ...], int]:
    """(descr, fortran_order, shape, data offset) of .npy bytes, parsed as a Python literal of plain values;
    nothing is allocated from it."""
    if not data.startswith(b"\x93NUMPY"):
        raise QrefError(f"{where}: not a .npy file (bad magic bytes)")
    if len(data) < 10:
        raise QrefError(f"{where}: truncated .npy file ({len(data)} bytes, no header)")
    major = data[6]
    if major == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3) and len(data) >= 12:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise QrefError(f"{where}: unsupported .npy version {data[6]}.{data[7]} (qref writes 1.0)")
    if hlen > 4096 or start + hlen > len(data):
        raise QrefError(f"{where}: .npy header of {hlen} bytes is truncated or too long (qref writes < 128)")
    try:
        text = data[start:start + hlen].decode("latin1")
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise QrefError(f"{where}: unreadable .npy header ({type(exc).__name__})") from None
    if (not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}
            or not isinstance(header["descr"], str) or not isinstance(header["fortran_order"], bool)
            or not isinstance(header["shape"], tuple)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in header["shape"])):
        raise QrefError(f"{where}: malformed .npy header {text.strip()[:120]!r}")
    return header["descr"], header["fortran_order"], header["shape"], start + hlen


def read_npy(data: bytes, where: str, *, storage: str | None = None, shape: Sequence[int] | None = None
             ) -> np.ndarray:
    """Parse .npy bytes of a bool or integer array (never a pickle, never an object array). The header's dtype
    and shape are compared with ``storage`` / ``shape`` (the manifest's) and the data length with the header
    before any array exists; the result is a read-only view of ``data``. Errors name ``where``."""
    descr, fortran, got_shape, offset = _header(data, where)
    try:
        dt = np.dtype(descr)
    except (TypeError, ValueError):
        raise QrefError(f"{where}: .npy dtype {descr!r} is not a plain numeric dtype") from None
    if dt.kind not in "biu" or dt.hasobject or dt.fields is not None or dt.shape != ():
        raise QrefError(f"{where}: .npy dtype {descr!r}: suite arrays are bool or unsigned/signed integers")
    if storage is not None and dt.newbyteorder("=") != np.dtype(storage):
        raise QrefError(f"{where}: the file holds {dt}, the manifest says {storage}")
    if shape is not None and list(got_shape) != list(shape):
        raise QrefError(f"{where}: the file's shape is {list(got_shape)}, the manifest says {list(shape)}")
    n = math.prod(got_shape)
    if len(data) - offset != n * dt.itemsize:
        raise QrefError(f"{where}: truncated or padded .npy data: {len(data) - offset} bytes after the header, "
                        f"the header's {dt}{list(got_shape)} needs {n * dt.itemsize}")
    arr = np.frombuffer(data, dtype=dt, count=n, offset=offset)
    arr = arr.reshape(got_shape[::-1]).T if fortran else arr.reshape(got_shape)
    return arr


__all__ = ["ALIGN", "MAGIC", "npy_bytes", "read_npy"]
