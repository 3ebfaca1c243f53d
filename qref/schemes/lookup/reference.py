"""The readable definition of lookup quantization (spec: lut.md §3.2-§4): functions of the scheme's rules
(``LookupSchemeRules``), its table and its block geometry (block_size, axis; or the static scales), never of the
scheme object.

quantize: blocks of ``block_size`` elements (row-major, or along ``axis``; a short last block is a partial block)
scaled by their absmax (``scale_blocks``) or by static scales (``quantize_static``), then one table entry per
scaled value (``decide``: the rule, the NaN rule, stochastic rounding). dequantize: entry[code] * scale in the
compute dtype (``dequantize_blocks`` / ``dequantize_static``), rounded to the output dtype
(``dequantize_output``). The fast path (fast.py) computes the same functions and imports these; this module never
imports it.
"""

from __future__ import annotations

import math

import numpy as np

from ...core import arith as fp
from ...core.exact import as_source_array
from ...core.parallel import run_chunks
from ...errors import QrefError
from ...profiles.lookup import LookupSchemeRules
from ...tables import Table
from ..base import normalize_axis
from .decision import nan_code, stochastic_table_encode, table_encode

__all__ = [
    "blocks",
    "check_input",
    "decide",
    "dequantize_blocks",
    "dequantize_output",
    "dequantize_static",
    "entries",
    "layout_is_reshape",
    "quantize_absmax",
    "quantize_static",
    "scale_blocks",
    "scale_product",
    "sqrt_tiny",
    "static_params",
    "store_scales",
    "unblock",
]


def sqrt_tiny(dtype: str) -> np.float32:
    """sqrt(smallest normal of dtype) as qwix computes it in that dtype: 2^-63 (float32, bfloat16), 2^-7 (float16)."""
    return np.float32(2.0 ** -7 if dtype == "float16" else 2.0 ** -63)


def entries(rules: LookupSchemeRules, table: Table, cd: str, which: str = "table_dtype") -> np.ndarray:
    """Table entries as the decision (which="table_dtype") or the dequantization (which="dequant_table_dtype")
    sees them: float32, rounded to the compute dtype cd ("input") or to float16 (lut.md §3.1)."""
    v = table.values.astype(np.float32)
    rule = getattr(rules, which)
    target = cd if rule == "input" else rule
    return v if target == "float32" else fp.convert(v, fp.float_dtype(target)).astype(np.float32)


def decide(rules: LookupSchemeRules, table: Table, s: np.ndarray, cd: str, rbits: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(codes int64, unspecified bool) of scaled values s (float32 array holding cd values) under the rules'
    decision (lut.md §3.3-§3.5); rbits: the random integers of a stochastic rounding, one per element of s."""
    nan = np.isnan(s)
    sv = np.where(nan, np.float32(0), s).astype(np.float32)
    if rules.rounding != "deterministic":
        assert rbits is not None and rules.stochastic_bits is not None
        codes = stochastic_table_encode(sv, entries(rules, table, cd), rules.rounding, rules.stochastic_bits, rbits)
    else:
        if cd != "float32":
            sv = sv.astype(fp.FLOAT_DTYPES[cd])  # exact: s already holds values of the compute dtype
        dist = cd if rules.distance_dtype == "input" else "float32"
        codes = table_encode(sv, table, rule=rules.rule, midpoints=rules.midpoints, tie=rules.tie,
                             distance_dtype=dist, entries=entries(rules, table, cd))
    unspec = np.zeros(s.shape, bool)
    if nan.any():
        if rules.nan == "error":
            raise QrefError("NaN scaled value (a NaN in the block, inf/inf or 0/0) with nan='error'")
        codes = np.where(nan, nan_code(table, rules.nan), codes)
        if rules.nan == "unspecified" or rules.rule == "grid65536":
            unspec |= nan  # grid65536: bitsandbytes converts NaN to uint16 (undefined behaviour)
    return codes, unspec


def blocks(x: np.ndarray, block_size: int, axis: int | None) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(blocks (nb, B) padded with 0, valid count per block, block-scale shape with axis last) (lut.md §3.2)."""
    B = block_size
    if axis is None:
        flat = x.reshape(-1)
        n = flat.size
        B = min(B, max(n, 1))  # one partial block holds every element: padding beyond it changes nothing
        nb = -(-n // B)
        pad = np.zeros(nb * B, dtype=flat.dtype)
        pad[:n] = flat
        valid = np.full(nb, B, dtype=np.int64)
        if nb and n % B:
            valid[-1] = n % B
        return pad.reshape(nb, B), valid, (nb,)
    ax = normalize_axis(axis, x.ndim)
    moved = np.moveaxis(x, ax, -1)
    L = moved.shape[-1]
    B = min(B, max(L, 1))  # memory bounded by the input, not by block_size (lut.md §3.2)
    rows = moved.reshape(math.prod(moved.shape[:-1]), L)
    per = -(-L // B)
    pad = np.zeros((rows.shape[0], per * B), dtype=x.dtype)
    pad[:, :L] = rows
    valid = np.full(per, B, dtype=np.int64)
    if per and L % B:
        valid[-1] = L % B
    return pad.reshape(-1, B), np.tile(valid, rows.shape[0]), (*moved.shape[:-1], per)


def unblock(arr: np.ndarray, shape: tuple[int, ...], axis: int | None) -> np.ndarray:
    """Per-element block array back to the input's shape (drops the padding)."""
    if axis is None:
        return arr.reshape(-1)[: math.prod(shape)].reshape(shape)
    ax = normalize_axis(axis, len(shape))
    mshape = tuple(np.moveaxis(np.empty(shape, dtype=np.uint8), ax, -1).shape)
    rows = arr.reshape(math.prod(mshape[:-1]), arr.size // max(1, math.prod(mshape[:-1])))[:, : mshape[-1]]
    return np.moveaxis(rows.reshape(mshape), -1, ax)


def layout_is_reshape(block_size: int | None, axis: int | None, shape: tuple[int, ...]) -> bool:
    """True when the blocks are a plain (n / B, B) reshape of the C-order data: no padding, no transpose."""
    B = block_size
    if B is None or not shape or math.prod(shape) == 0:
        return False
    if axis is None:
        return math.prod(shape) % B == 0
    return normalize_axis(axis, len(shape)) == len(shape) - 1 and shape[-1] % B == 0


def check_input(rules: LookupSchemeRules, x: object, name: str, profile: str) -> tuple[np.ndarray, np.ndarray, str]:
    """(input array, its values rounded to the compute dtype held in float32, compute dtype name) (lut.md §3.1:
    input_dtypes, numel_multiple, compute_dtype); name, profile: the scheme's, for the messages."""
    arr = as_source_array(x)
    if arr.dtype.kind in "iub":
        raise QrefError(f"{name}: lookup quantization takes float input, got {arr.dtype}")
    dt = "float64" if arr.dtype == np.float64 else fp.dtype_name(arr.dtype)
    if dt not in rules.input_dtypes:
        raise QrefError(f"profile {profile!r} takes {', '.join(rules.input_dtypes)} input, got {dt}"
                        + ("; convert it to float32 first" if dt == "float64" else ""))
    if arr.size % rules.numel_multiple:
        raise QrefError(f"profile {profile!r} needs the element count to be a multiple of "
                        f"{rules.numel_multiple}, got {arr.size}")
    if rules.compute_dtype == "input" and dt == "float64":
        raise QrefError(f"profile {profile!r} computes in the input dtype; float64 is not supported")
    cd = dt if rules.compute_dtype == "input" else rules.compute_dtype
    if arr.dtype == np.float32 and cd == "float32":
        return arr, arr, cd  # the conversion would be a copy
    return arr, np.asarray(fp.convert(arr, fp.float_dtype(cd)), dtype=np.float32), cd


def scale_blocks(rules: LookupSchemeRules, b: np.ndarray, partial: np.ndarray, cd: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, stored, zero) of blocks b (nb, B) (lut.md §3.2): the scaled values before the decision, the block
    scales to store, and which blocks are all zero. partial: bool per block (a short last block)."""
    absmax = np.max(np.abs(b), axis=1) if b.size else np.zeros(0, np.float32)
    div = absmax
    if rules.scale_min is not None:
        smin = sqrt_tiny(cd) if rules.scale_min == "sqrt_tiny" else np.float32(rules.scale_min)
        repl = np.float32(smin if rules.scale_min_rule == "clamp" else 1.0)
        div = np.where(absmax < smin, fp.convert(np.array([repl]), fp.float_dtype(cd))[0], absmax)
        div = div.astype(np.float32)
    stored = {"all": div, "none": absmax, "partial": np.where(partial, div, absmax)}[rules.store_guarded]
    dcol = div[:, None]
    if rules.scaling == "reciprocal":
        r = fp.op_in_float32(1, dcol, np.divide, "float32" if rules.bf16_upcast and cd == "bfloat16" else cd)
        if rules.ftz and cd != "float16":  # FTZ: 1/a of an absmax above 2^126 is a float32 subnormal -> 0
            r = fp.flush(r)
        s = fp.op_in_float32(b, r, np.multiply, cd)
        if rules.partial_scaling == "divide" and partial.any():
            s = np.where(partial[:, None], fp.op_in_float32(b, dcol, np.divide, cd), s)
    else:
        s = fp.op_in_float32(b, dcol, np.divide, cd)
    zero = absmax == 0
    if rules.zero_block == "zero_code" and zero.any():
        s = np.where(zero[:, None], np.float32(0), s)
    if rules.clamp:
        s = np.clip(s, np.float32(-1), np.float32(1))
    return s, stored, zero


def store_scales(rules: LookupSchemeRules, stored: np.ndarray) -> np.ndarray:
    """The stored block scales rounded once to scale_dtype (overflow to +-Inf), float32 (lut.md §3.2)."""
    if rules.scale_dtype != "float32":
        stored = fp.convert(stored, fp.float_dtype(rules.scale_dtype))
    return stored.astype(np.float32)


def quantize_absmax(rules: LookupSchemeRules, table: Table, block_size: int, axis: int | None, x32: np.ndarray,
                    cd: str, rbits: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """(codes in x32's shape (the table's code dtype), unspecified, stored block scales, their shape with axis
    last) of absmax blocks (lut.md §3.2); x32: float32 values of the compute dtype cd; rbits: the random integers
    of a stochastic rounding, in x32's shape."""
    xb, valid, sshape = blocks(x32, block_size, axis)
    rball = None if rbits is None else blocks(rbits, block_size, axis)[0]  # each element keeps its own R
    parts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
        b = xb[lo:hi]
        # partial: shorter than block_size itself (a block narrowed to a short input stays partial, lut.md §3.2)
        s, st, zero = scale_blocks(rules, b, valid[lo:hi] < block_size, cd)
        c, u = decide(rules, table, s.reshape(-1), cd, None if rball is None else rball[lo:hi].reshape(-1))
        c, u = c.reshape(b.shape), u.reshape(b.shape)
        if rules.zero_block == "code0":
            c = np.where(zero[:, None], 0, c)
            u = np.where(zero[:, None], False, u)
        parts[lo] = (c, u, st)

    run_chunks(work, xb.shape[0], xb.shape[1])
    order = [parts[lo] for lo in sorted(parts)]
    codes, unspec, stored = (order[0][i] if len(order) == 1 else np.concatenate([p[i] for p in order])
                             for i in range(3))
    return (unblock(codes, x32.shape, axis).astype(table.storage_format.code_dtype), unblock(unspec, x32.shape, axis),
            stored, sshape)


def static_params(static_scales: tuple[float, ...], static_zero_points: tuple[float, ...] | None,
                  axis: int | None, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(scales, zero points) float32, shaped to broadcast against data of ``shape`` (lut.md §7)."""
    sc = np.asarray(static_scales, np.float32)
    zp = np.zeros_like(sc) if static_zero_points is None else np.asarray(static_zero_points, np.float32)
    if axis is None:
        return sc.reshape(()), zp.reshape(())
    ax = normalize_axis(axis, len(shape))
    if shape[ax] != sc.size:
        raise QrefError(f"{sc.size} static scales for axis {ax} of length {shape[ax]}")
    bshape = [1] * len(shape)
    bshape[ax] = sc.size
    return sc.reshape(bshape), zp.reshape(bshape)


def quantize_static(rules: LookupSchemeRules, table: Table, static_scales: tuple[float, ...],
                    static_zero_points: tuple[float, ...] | None, axis: int | None, x32: np.ndarray, cd: str,
                    rbits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(codes, unspecified) of x32 under static scales: s = fl_cd(fl_cd(x / scale) + zp) (lut.md §7)."""
    sc, zp = static_params(static_scales, static_zero_points, axis, x32.shape)
    s = fp.op_in_float32(x32, fp.convert(sc, fp.float_dtype(cd)), np.divide, cd)
    if static_zero_points is not None:
        s = fp.op_in_float32(s, fp.convert(zp, fp.float_dtype(cd)), np.add, cd)
    if rules.clamp:
        s = np.clip(s, np.float32(-1), np.float32(1))
    codes, unspec = decide(rules, table, s.reshape(-1), cd, None if rbits is None else rbits.reshape(-1))
    return codes.reshape(x32.shape), unspec.reshape(x32.shape)


def scale_product(rules: LookupSchemeRules, t: np.ndarray, a: np.ndarray, cd: str) -> np.ndarray:
    """fl_cd(t * a) with the rules' FTZ/DAZ (lut.md §4); t: (blocks, B) entries, a: (blocks, 1) scales."""
    if rules.ftz and cd in ("float32", "bfloat16"):  # DAZ of t and a, FTZ of the float32 product (§4)
        return fp.mul(t, a, fp.resolve_compute_dtype(cd, fp.F32), ftz=True).astype(np.float32)
    return fp.op_in_float32(t, a, np.multiply, cd)


def _entries_of(rules: LookupSchemeRules, table: Table, codes: np.ndarray, cd: str) -> np.ndarray:
    if codes.size and (codes.min() < 0 or codes.max() >= table.size):
        raise QrefError(f"codes out of range for table {table.name!r} ({table.size} entries)")
    return entries(rules, table, cd, "dequant_table_dtype")[codes]


def dequantize_static(rules: LookupSchemeRules, table: Table, static_scales: tuple[float, ...],
                      static_zero_points: tuple[float, ...] | None, axis: int | None, raw: np.ndarray, cd: str
                      ) -> np.ndarray:
    """fl_cd(fl_cd(entry[code] - zp) * scale): float32 values of cd (lut.md §7)."""
    codes = raw.astype(np.int64)
    t = _entries_of(rules, table, codes, cd)
    sc, zp = static_params(static_scales, static_zero_points, axis, codes.shape)
    if static_zero_points is not None:
        t = fp.op_in_float32(t, fp.convert(zp, fp.float_dtype(cd)), np.subtract, cd)
    return fp.op_in_float32(t, fp.convert(sc, fp.float_dtype(cd)), np.multiply, cd)


def dequantize_blocks(rules: LookupSchemeRules, table: Table, block_size: int, axis: int | None, raw: np.ndarray,
                      per_block: np.ndarray, cd: str) -> np.ndarray:
    """fl_cd(entry[code] * a) per block (lut.md §4): float32 values of cd before the output rounding; per_block:
    the float32 block scales in block order."""
    codes = raw.astype(np.int64)
    t = _entries_of(rules, table, codes, cd)
    tb = blocks(t, block_size, axis)[0]
    if per_block.size != tb.shape[0]:
        raise QrefError(f"{per_block.size} block scales for {tb.shape[0]} blocks")
    return unblock(scale_product(rules, tb, per_block[:, None], cd), codes.shape, axis)


def dequantize_output(rules: LookupSchemeRules, v: np.ndarray, shape: tuple[int, ...], out_dt: np.dtype,
                      block_size: int | None) -> np.ndarray:
    """The values of cd rounded to the output dtype (lut.md §4)."""
    if out_dt in (np.dtype(np.float32), np.dtype(np.float64)):
        return v.astype(out_dt)
    out = fp.convert(v, fp.float_dtype(fp.dtype_name(out_dt)))
    if (fp.dtype_name(out_dt) in rules.dequant_flush and len(shape) and shape[-1] % 2 == 0
            and (block_size or 0) < 2048):  # lut.md §4: DAZ of the output conversion's float32 input
        out = np.where(np.abs(v) < np.float32(2.0**-126), np.where(np.signbit(v), -0.0, 0.0), out).astype(out_dt)
    return out
