"""Packing codes into real storage layouts, and back (spec: docs/spec/block.md §9, §9.1).

Codes are unsigned integers of ``bits`` bits (two's complement bit patterns for signed storage). Layouts pack
along one axis (default the last), each row on its own:

lsb_first          a little-endian bit stream in bytes: code i occupies stream bits [i*b, i*b + b), stream bit
                   j is bit (j mod 8) of byte j // 8. For b = 4: code 2i in the low nibble of byte i
                   (= nibble_low_first); for b = 8 the identity.
msb_first          a big-endian bit stream in bytes: code i's most significant bit first, stream bit j is bit
                   7 - (j mod 8) of byte j // 8. For b = 4: code 2i in the high nibble (= nibble_high_first).
mlx                MLX's mx.quantize words: the lsb_first stream of a row in little-endian uint32 words (for
                   b = 4, code 8j + m is at bits [4m, 4m + 4) of word j; 3-, 5- and 6-bit codes straddle bytes).
nibble_low_first   4-bit codes, two per byte, code 2i in the low nibble (torchao float4_e2m1fn_x2, PyTorch,
                   OpenVINO u4/nf4, ONNX FLOAT4E2M1).
nibble_high_first  4-bit codes, two per byte, code 2i in the high nibble (bitsandbytes NF4/FP4).
ocp_mx_block       per MX block: the E8M0 scale byte, then the block's codes as an msb_first stream padded to a
                   byte: X | P_1 | ... | P_k in the order OCP MX v1.0 draws a block (needs a QArray with E8M0
                   scales). OCP MX v1.0 defines the encodings of X and of each P_i (sign, exponent, mantissa from
                   the most significant bit) but, as we read it, not how a block is laid out in memory; this
                   layout is qref's reading of the spec's block diagram, not a layout any library we checked uses.

A row whose bit count is not a multiple of the container (8 bits, or 32 for mlx) is padded with zero bits;
``unpack`` takes ``count`` (codes per row) to drop them (default: as many whole codes as the row holds).

Layouts of whole 2-D arrays (block.md §9.1), not of one axis:

swizzled_128x4     block-scale bytes (rows x cols: one row per output row, one column per K block) as cuBLAS /
                   cuDNN read them for MX and NVFP4: padded with zeros to a multiple of 128 rows and 4 columns,
                   cut into 128 x 4 tiles stored row-tile-major (tile (i, j) at 512 (i * ceil(cols/4) + j)); in a
                   tile, element (r, c) at byte 16 (r mod 32) + 4 (r // 32) + c. Flat uint8.
fp6_x4             6-bit codes, four in three bytes: the 24-bit little-endian word c0 | c1 << 6 | c2 << 12 |
                   c3 << 18 (= lsb_first with b = 6; AMD CDNA4 packs 32 FP6 in six dwords this way).
trainium_mx_8x4    a (P, F) array as the groups of 32 that share one MX scale on AWS Trainium 3 (8 partitions x 4
                   elements): (P / 8, F / 4, 32), element 4 (p mod 8) + (f mod 4) of group (p // 8, f // 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import QrefError, check_choice
from ..schemes.base import QArray, normalize_axis

LAYOUTS = ("mlx", "lsb_first", "msb_first", "nibble_low_first", "nibble_high_first", "ocp_mx_block",
           "swizzled_128x4", "fp6_x4", "trainium_mx_8x4")
_TILED = ("swizzled_128x4", "trainium_mx_8x4")


def _matrix(a: np.ndarray, layout: str) -> np.ndarray:
    if a.ndim != 2:
        raise QrefError(f"{layout} lays out a 2-D array (rows, cols), got shape {a.shape}")
    return a


def _swizzle_index(rows: int, cols: int) -> np.ndarray:
    """Flat position in the swizzled_128x4 layout of each element of a (rows, cols) array padded to (128, 4)
    multiples (block.md §9.1): tile-major, then 16 (r mod 32) + 4 (r // 32) + c inside a tile."""
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    tiles_c = cols // 4
    tile = (r // 128) * tiles_c + c // 4
    return tile * 512 + 16 * (r % 32) + 4 * ((r % 128) // 32) + c % 4


def _pack_tiled(c: np.ndarray, layout: str) -> np.ndarray:
    c = _matrix(c, layout)
    rows, cols = c.shape
    if layout == "swizzled_128x4":
        pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
        full = np.zeros((pr, pc), dtype=c.dtype)
        full[:rows, :cols] = c
        out = np.zeros(pr * pc, dtype=c.dtype)
        out[_swizzle_index(pr, pc)] = full
        return out
    if rows % 8 or cols % 4:
        raise QrefError(f"trainium_mx_8x4 needs rows a multiple of 8 and columns a multiple of 4, got {c.shape}")
    return c.reshape(rows // 8, 8, cols // 4, 4).transpose(0, 2, 1, 3).reshape(rows // 8, cols // 4, 32)


def _unpack_tiled(a: np.ndarray, layout: str, shape: tuple[int, int] | None) -> np.ndarray:
    if layout == "swizzled_128x4":
        if shape is None or len(shape) != 2:
            raise QrefError("unpack(..., 'swizzled_128x4') needs shape=(rows, cols) of the scale array")
        rows, cols = int(shape[0]), int(shape[1])
        pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
        if a.ndim != 1 or a.size != pr * pc:
            raise QrefError(f"a swizzled_128x4 array of {rows} x {cols} scales is flat with {pr * pc} bytes, got "
                            f"shape {a.shape}")
        return a[_swizzle_index(pr, pc)][:rows, :cols]
    if a.ndim != 3 or a.shape[-1] != 32:
        raise QrefError(f"trainium_mx_8x4 groups have shape (P / 8, F / 4, 32), got {a.shape}")
    g0, g1, _ = a.shape
    return a.reshape(g0, g1, 8, 4).transpose(0, 2, 1, 3).reshape(g0 * 8, g1 * 4)


def _bits_of(q: QArray) -> int:
    sch: Any = q.scheme
    for attr in ("element", "format", "storage", "storage_format"):
        fmt = getattr(sch, attr, None)
        if fmt is not None and hasattr(fmt, "bits"):
            return int(fmt.bits)
    raise QrefError(f"cannot tell the code width of a {type(sch).__name__} QArray; pass bits=")


def _asarray(x: object, what: str) -> np.ndarray:
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged lists, objects numpy cannot read
        raise QrefError(f"{what} must be an integer array, got {type(x).__name__} ({exc})") from None


def _count(v: object, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise QrefError(f"{what} must be a non-negative integer or None, got {v!r}")
    return int(v)


def _as_codes(codes: object, bits: int) -> np.ndarray:
    arr = _asarray(codes, "codes")
    if arr.dtype.kind not in "iu":
        raise QrefError(f"codes must be an integer array, got dtype {arr.dtype}")
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise QrefError(f"bits must be an integer in 1..32, got {bits!r}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(1 << (bits - 1)) or hi >= (1 << bits) or (arr.dtype.kind == "u" and hi >= (1 << bits)):
            raise QrefError(f"codes must fit in {bits} bits (found values in [{lo}, {hi}])")
    a64 = arr.astype(np.int64) & ((1 << bits) - 1)  # two's complement bit patterns of signed storage
    return a64.astype(np.uint64)


def _stream(codes: np.ndarray, bits: int, msb: bool) -> np.ndarray:
    """(..., n) codes -> (..., ceil(n * bits / 8)) uint8 bytes of the lsb_first or msb_first stream."""
    shifts = np.arange(bits - 1, -1, -1) if msb else np.arange(bits)
    bitarr = ((codes[..., None] >> shifts.astype(np.uint64)) & np.uint64(1)).astype(np.uint8)
    bitarr = bitarr.reshape((*codes.shape[:-1], codes.shape[-1] * bits))
    return np.packbits(bitarr, axis=-1, bitorder="big" if msb else "little")


def _unstream(data: np.ndarray, bits: int, count: int, msb: bool) -> np.ndarray:
    bitarr = np.unpackbits(data, axis=-1, bitorder="big" if msb else "little")
    bitarr = bitarr[..., : count * bits].reshape((*data.shape[:-1], count, bits)).astype(np.uint64)
    shifts = np.arange(bits - 1, -1, -1) if msb else np.arange(bits)
    vals = (bitarr << shifts.astype(np.uint64)).sum(axis=-1, dtype=np.uint64)
    return vals.astype(np.uint8 if bits <= 8 else (np.uint16 if bits <= 16 else np.uint32))


def pack(data: QArray | np.ndarray, layout: str, *, bits: int | None = None, axis: int | None = None
         ) -> np.ndarray:
    """Pack codes (or a QArray's codes) into ``layout`` along ``axis`` (default: the QArray's block axis, else -1).

    Returns uint8 bytes (uint32 words for "mlx"); the packed axis becomes ceil(n * bits / container) long.
    For "ocp_mx_block" the packed axis holds, per block, 1 scale byte + ceil(k * bits / 8) code bytes."""
    check_choice("packing layout", layout, LAYOUTS)
    scales = None
    block = None
    if isinstance(data, QArray):
        b = _bits_of(data) if bits is None else bits
        ax = (data.axis if data.axis is not None else -1) if axis is None else axis
        codes = data.codes
        if layout == "swizzled_128x4":  # the block scales, as stored bytes
            if data.scales is None or np.asarray(data.scales).dtype.kind not in "iu":
                raise QrefError("swizzled_128x4 lays out scale bytes; this QArray has no integer scale codes")
            codes, b = data.scales, 8
        if layout == "ocp_mx_block":
            sf = getattr(data.scheme, "scale_format", None)
            if data.scales is None or sf is None or getattr(sf, "name", "") != "float8_e8m0fnu":
                raise QrefError("ocp_mx_block packs MX QArrays (E8M0 scales); this QArray has none")
            scales = np.asarray(data.scales)
            block = int(data.scheme.block_size)  # type: ignore[attr-defined]
    else:
        if bits is None:
            raise QrefError("pack(codes, layout) needs bits= for a plain code array")
        if layout == "ocp_mx_block":
            raise QrefError("ocp_mx_block needs the QArray (it interleaves the block scales)")
        b, ax, codes = bits, -1 if axis is None else axis, data
    c = _as_codes(codes, b)
    if c.ndim == 0:
        raise QrefError("pack needs at least one dimension")
    if layout in _TILED:
        return _pack_tiled(c, layout).astype(np.uint8 if b <= 8 else np.uint16 if b <= 16 else np.uint32)
    if layout == "fp6_x4":
        if b != 6:
            raise QrefError(f"fp6_x4 packs 6-bit codes, got bits={b}")
        layout = "lsb_first"
    ax = normalize_axis(ax, c.ndim)
    c = np.moveaxis(c, ax, -1)
    if layout in ("nibble_low_first", "nibble_high_first") and b != 4:
        raise QrefError(f"{layout} packs 4-bit codes, got bits={b}; use lsb_first / msb_first for other widths")
    if layout == "ocp_mx_block":
        assert scales is not None and block is not None
        n = c.shape[-1]
        pad = (-n) % block
        if pad:
            c = np.concatenate([c, np.zeros((*c.shape[:-1], pad), dtype=c.dtype)], axis=-1)
        nb = c.shape[-1] // block
        cb = c.reshape((*c.shape[:-1], nb, block))
        body = _stream(cb, b, msb=True)
        sc = np.moveaxis(scales, ax, -1)
        if sc.shape != (*c.shape[:-1], nb):
            raise QrefError(f"the QArray's scales {scales.shape} do not match its codes {np.shape(codes)} in blocks of "
                            f"{block} along axis {ax}")
        sc = sc.astype(np.uint8)[..., None]
        out = np.concatenate([sc, body], axis=-1).reshape((*c.shape[:-1], nb * (1 + body.shape[-1])))
    elif layout == "mlx":
        by = _stream(c, b, msb=False)
        pad = (-by.shape[-1]) % 4
        if pad:
            by = np.concatenate([by, np.zeros((*by.shape[:-1], pad), dtype=np.uint8)], axis=-1)
        out = np.ascontiguousarray(by).view("<u4").astype(np.uint32)
    else:
        out = _stream(c, b, msb=layout in ("msb_first", "nibble_high_first"))
    return np.moveaxis(out, -1, ax)


def unpack(packed: object, layout: str, *, bits: int, count: int | None = None, axis: int = -1,
           block_size: int | None = None, shape: tuple[int, int] | None = None
           ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Inverse of ``pack``: codes (uint8/16/32) with ``count`` codes per row along ``axis`` (default: every whole
    code the row holds). For "ocp_mx_block" pass block_size and get (codes, scale bytes); for "swizzled_128x4"
    pass shape=(rows, cols) of the scale array."""
    check_choice("packing layout", layout, LAYOUTS)
    arr = _asarray(packed, "packed")
    if layout in _TILED:
        return _unpack_tiled(arr, layout, shape)
    if layout == "fp6_x4":
        if bits != 6:
            raise QrefError(f"fp6_x4 holds 6-bit codes, got bits={bits}")
        layout = "lsb_first"
    count = _count(count, "count")
    block_size = _count(block_size, "block_size")
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise QrefError(f"bits must be an integer in 1..32, got {bits!r}")
    if layout in ("nibble_low_first", "nibble_high_first") and bits != 4:
        raise QrefError(f"{layout} holds 4-bit codes, got bits={bits}")
    if arr.ndim == 0:
        raise QrefError("unpack needs at least one dimension")
    ax = normalize_axis(axis, arr.ndim)
    a = np.moveaxis(arr, ax, -1)
    if count is not None and layout != "ocp_mx_block":
        capacity = a.shape[-1] * (32 if layout == "mlx" else 8)
        if not isinstance(count, int) or count < 0 or count * bits > capacity:
            raise QrefError(f"count={count!r} codes of {bits} bits do not fit in a packed row of {capacity} bits")
    if layout == "mlx":
        if a.dtype != np.uint32:
            raise QrefError(f"mlx layout words are uint32, got {a.dtype}")
        by = np.ascontiguousarray(a.astype("<u4")).view(np.uint8)
        n = by.shape[-1] * 8 // bits if count is None else count
        out = _unstream(by, bits, n, msb=False)
    elif layout == "ocp_mx_block":
        if not block_size:
            raise QrefError(f"unpack(..., 'ocp_mx_block') needs block_size= (a positive integer), got {block_size}")
        if a.dtype != np.uint8:
            raise QrefError(f"ocp_mx_block bytes are uint8, got {a.dtype}")
        per = 1 + (block_size * bits + 7) // 8
        if a.shape[-1] % per:
            raise QrefError(f"ocp_mx_block rows hold whole blocks of {per} bytes; got {a.shape[-1]} bytes")
        nb = a.shape[-1] // per
        blk = a.reshape((*a.shape[:-1], nb, per))
        scales = blk[..., 0]
        codes = _unstream(np.ascontiguousarray(blk[..., 1:]), bits, block_size, msb=True)
        codes = codes.reshape((*a.shape[:-1], nb * block_size))
        if count is not None:
            codes = codes[..., :count]
        return np.moveaxis(codes, -1, ax), np.moveaxis(scales, -1, ax)
    else:
        if a.dtype != np.uint8:
            raise QrefError(f"{layout} bytes are uint8, got {a.dtype}")
        n = a.shape[-1] * 8 // bits if count is None else count
        out = _unstream(np.ascontiguousarray(a), bits, n, msb=layout in ("msb_first", "nibble_high_first"))
    return np.moveaxis(out, -1, ax)


__all__ = ["LAYOUTS", "pack", "unpack"]
