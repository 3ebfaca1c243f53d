"""Uniform quantize and dequantize, the entry points: chunks, vector loops, fast path or reference (spec:
docs/spec/uniform.md §2.4, §2.5; elements.md §2.11).

The definition is reference.py; fast.py computes the same for the configurations its shortcuts cover. This
module chooses between them and splits large inputs into rows on the thread pool and slices of about CHUNK
elements (every step is elementwise, scales and zero points sliced alike). Layering: validation <- reference
<- fast <- entry (this module) <- scheme.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...core.exact import ml_integer
from ...core.parallel import chunk_bounds, run_chunks
from ...errors import QrefError
from ...formats import FloatFormat, IntFormat
from ..base import QArray
from . import reference as ref
from .fast import dequantize_float, integer_tail_applies, integer_tail_fast, quantize_float32
from .reference import compute_dtype, dq_multiply_dtype, np_dtype, scale_in
from .validation import UniformRecord

__all__ = ["CHUNK", "dequantize", "dequantize_kernel", "dequantize_with_mask", "plain_codes", "quantize_codes",
           "quantize_simd"]

#: elements per slice of quantize's fast path (quantize_rows)
CHUNK = 1 << 18
_F32 = np.dtype(np.float32)

def _rows_view(arr: np.ndarray, S: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arr, S, Z) to split along axis 0: a contiguous array under one scale and zero point as its flat elements
    (any number of chunks), else as it is (elements.md §2.11)."""
    if arr.ndim > 1 and np.size(S) == 1 and np.size(Z) == 1 and arr.flags.c_contiguous:
        return arr.reshape(-1), np.reshape(S, ()), np.reshape(Z, ())
    return arr, S, Z


def _rows(a: np.ndarray, lo: int, hi: int, ndim: int) -> np.ndarray:
    """Rows lo:hi of scales / zero points that vary along axis 0 of an ndim-array, else a as it is."""
    return a[lo:hi] if np.ndim(a) == ndim and np.shape(a)[0] > 1 else a



def quantize_codes(r: UniformRecord, arr: np.ndarray, rbits: np.ndarray | None, _reference: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(codes, unspecified) of ``quantize`` for a scheme without a vector loop."""
    A = r.arithmetic
    if A.input_dtypes == ():
        raise QrefError(f"profile {r.profile!r} models dequantize only (the system it reproduces does not quantize "
                        "with this arithmetic: uniform.md §2.2); quantize with another profile")
    if A.input_dtypes is not None and arr.dtype.name not in A.input_dtypes:
        raise QrefError(f"profile {r.profile!r} accepts {', '.join(A.input_dtypes)} input only, got "
                        f"{arr.dtype} (convert it first, as the system would require)")
    split = None if _reference else r.split_blocks(arr.shape)
    if split is None:
        S, Z = r.expand(arr.shape)
        codes, unspecified = quantize_chunks(r, arr, S, Z, rbits, _reference)
    else:  # blocks as axes of their own: scales and zero points stay one per block (uniform.md §2.5)
        shp, S, Z = split
        codes, unspecified = quantize_chunks(r, arr.reshape(shp), S, Z,
                                                   None if rbits is None else rbits.reshape(shp), _reference)
        codes, unspecified = codes.reshape(arr.shape), unspecified.reshape(arr.shape)
    return codes, unspecified


def quantize_chunks(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                     _reference: bool) -> tuple[np.ndarray, np.ndarray]:
    """quantize_rows on chunks of rows (axis 0; the flat elements under one scale) on the thread pool:
    every step is elementwise, scales and zero points sliced alike (elements.md §2.11)."""
    if _reference or arr.ndim == 0:
        return quantize_rows(r, arr, S, Z, rbits, _reference)
    a, S1, Z1 = _rows_view(arr, S, Z)
    rb = None if rbits is None else rbits.reshape(a.shape)
    per_row = a.size // max(1, a.shape[0])
    if len(chunk_bounds(a.shape[0], per_row)) == 1:
        return quantize_rows(r, arr, S, Z, rbits, _reference)
    codes = np.empty(a.shape, dtype=r.codes_dtype)
    unspecified = np.zeros(a.shape, dtype=bool)  # written only where a piece is not clean (fast.py)

    def work(lo: int, hi: int) -> None:  # each chunk writes its rows in place (no copy of its codes and mask)
        quantize_rows(r, a[lo:hi], _rows(S1, lo, hi, a.ndim), _rows(Z1, lo, hi, a.ndim),
                      None if rb is None else rb[lo:hi], False, out=(codes[lo:hi], unspecified[lo:hi]))

    run_chunks(work, a.shape[0], per_row)
    return codes.reshape(arr.shape), unspecified.reshape(arr.shape)


def quantize_rows(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                   _reference: bool, out: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """quantize_arrays over slices of about CHUNK elements along the first axis (scales and zero points
    sliced alike where they vary along it): every step is elementwise, so each slice's codes are those of
    the whole; the slices' temporaries stay in cache. The defining path (``_reference``) takes the whole.
    out: C-contiguous (codes, unspecified) of arr's shape, the mask all False, written in place and returned."""
    if not _reference and rbits is None and arr.dtype == _F32 and compute_dtype(r, arr) == _F32:
        done = quantize_float32(r, arr, S, Z, out)  # float32 in one kernel (fast.py), else None
        if done is not None:
            return done
    rows = arr.shape[0] if arr.ndim else 1
    step = max(1, CHUNK // max(1, arr.size // max(rows, 1)))
    if _reference or arr.ndim == 0 or step >= rows:
        c, u = quantize_arrays(r, arr, S, Z, rbits, _reference)
        if out is None:
            return c, u
        out[0][...] = c
        out[1][...] = u
        return out
    codes = np.empty(arr.shape, dtype=r.codes_dtype) if out is None else out[0]
    unspecified = np.empty(arr.shape, dtype=bool) if out is None else out[1]
    along = np.ndim(S) == arr.ndim and np.shape(S)[0] > 1
    for r0 in range(0, rows, step):
        sl = slice(r0, r0 + step)
        c, u = quantize_arrays(r, arr[sl], S[sl] if along else S, Z[sl] if along else Z,
                                     None if rbits is None else rbits[sl], False)
        codes[sl] = c
        unspecified[sl] = u
    return codes, unspecified


def quantize_arrays(r: UniformRecord, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                    _reference: bool) -> tuple[np.ndarray, np.ndarray]:
    """(codes, unspecified) of ``arr`` with scales S and zero points Z broadcastable against it: the reference's
    float steps, then its integer tail or ``fast.integer_tail_fast`` where that applies (uniform.md §2.5)."""
    if _reference:
        return ref.quantize_arrays(r, arr, S, Z, rbits)
    q, Zb, unspecified = ref.float_steps(r, arr, S, Z, _reference=False)
    if isinstance(r.storage, FloatFormat):
        return ref.quantize_float(r, q, unspecified, rbits), unspecified
    if rbits is not None or not integer_tail_applies(r, q):
        return ref.integer_tail(r, q, Zb, unspecified, rbits), unspecified
    return integer_tail_fast(r, q, Zb, unspecified), unspecified


def quantize_simd(r: UniformRecord, arr: np.ndarray, _reference: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(codes, unspecified) of a profile with a vector loop (simd_width > 0, uniform.md §2.4): the vector loop's
    elements are the flat prefix of a per-tensor scheme (one scale: each loop quantizes its own part alone);
    everything else is the scalar loop's (per-axis and blocked scales: the array as it is)."""
    body, rem = r.loop_schemes
    n = arr.size
    k = n // r.arithmetic.simd_width * r.arithmetic.simd_width if r.granularity == "per_tensor" else 0
    if k == 0:
        return quantize_codes(rem, arr, None, _reference)
    flat = arr.reshape(-1)
    parts = [quantize_codes(loop, part, None, _reference) for loop, part in ((body, flat[:k]), (rem, flat[k:]))
             if part.size]
    codes = np.concatenate([c.reshape(-1) for c, _ in parts]).reshape(arr.shape)
    unspecified = np.concatenate([u.reshape(-1) for _, u in parts]).reshape(arr.shape)
    return codes, unspecified


def plain_codes(r: UniformRecord, q: QArray) -> QArray:
    """q with codes given as ONNX types them made plain (uniform.md §1 (C9)): ml_dtypes int2/int4/uint2/uint4
    values in the storage dtype, an array of the float storage's own ml_dtypes type viewed as its codes."""
    c = np.asarray(q.codes)
    if ml_integer(c.dtype):
        return dataclasses.replace(q, codes=c.astype(r.codes_dtype))
    if c.dtype.kind in "fV" and isinstance(r.storage, FloatFormat) and c.dtype.name == r.storage.name:
        return dataclasses.replace(q, codes=c.view(r.codes_dtype))
    return q


def dequantize(r: UniformRecord, q: QArray, dtype: object, _reference: bool) -> np.ndarray:
    """dequantize's values (uniform.md §2.2): the kernel where it applies, else ``dequantize_with_mask``'s."""
    if not _reference:
        if r.arithmetic.simd_width and r.granularity != "per_tensor":  # the scalar loop's, everywhere
            rem = r.loop_schemes[1]
            return dequantize(rem, q, dtype, False)
        vals = dequantize_kernel(r, q, dtype)
        if vals is not None:
            return vals
    return dequantize_with_mask(r, q, dtype, _reference)[0]


def dequantize_kernel(r: UniformRecord, q: QArray, dtype: object) -> np.ndarray | None:
    """dequantize's values by ``fast.dequantize_float`` (blocks as axes of their own where they divide
    the axes), or None where it does not apply; where it applies the unspecified mask gains nothing."""
    codes = np.asarray(q.codes)
    if r.arithmetic.simd_width or not isinstance(r.storage, IntFormat) or codes.dtype.kind not in "iu":
        return None
    split = r.split_blocks(codes.shape)
    if split is None:
        c = codes
        S, Z = r.expand(codes.shape)
    else:
        shp, S, Z = split
        c = codes.reshape(shp)
    md = dq_multiply_dtype(r)
    out_dt = np_dtype(r.expressed) if dtype is None else np.dtype(dtype)  # type: ignore[call-overload]
    E = np_dtype(r.expressed)
    c1, S1, Z1 = _rows_view(c, S, Z)
    per_row = c1.size // max(1, c1.shape[0]) if c1.ndim else 1
    if c1.ndim == 0 or len(chunk_bounds(c1.shape[0], per_row)) == 1:
        vals = dequantize_float(r, c, S, Z, out_dt, md, scale_in(r, S, md), E)
        return None if vals is None else vals.reshape(codes.shape)
    if dequantize_float(r, c1, S1, Z1, out_dt, md, scale_in(r, S1, md), E, check_only=True) is None:
        return None  # the kernel's conditions (codes' range, finite scales) hold on the whole, so on each chunk
    out = np.empty(c1.shape, dtype=out_dt)

    def work(lo: int, hi: int) -> None:  # rows (elements.md §2.11)
        Sr = _rows(S1, lo, hi, c1.ndim)
        v = dequantize_float(r, c1[lo:hi], Sr, _rows(Z1, lo, hi, c1.ndim), out_dt, md, scale_in(r, Sr, md),
                             E, out=out[lo:hi])
        assert v is not None

    run_chunks(work, c1.shape[0], per_row)
    return out.reshape(codes.shape)


def dequantize_with_mask(r: UniformRecord, q: QArray, dtype: object, _reference: bool
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(values, unspecified) of dequantize (uniform.md §2.2): vector and scalar loops (§2.4), the kernel, or the
    reference on chunks of rows (blocks as axes of their own where they divide the axes)."""
    A = r.arithmetic
    codes = np.asarray(q.codes)
    if A.simd_width:
        body, rem = r.loop_schemes
        if not _reference and r.granularity != "per_tensor":  # the scalar loop's, everywhere (tail)
            return dequantize_with_mask(rem, q, dtype, False)
        tail = r.tail(codes.shape)
        vb, bb = dequantize_with_mask(body, q, dtype, _reference)
        vr, br = dequantize_with_mask(rem, q, dtype, _reference)
        return np.where(tail, vr, vb), np.where(tail, br, bb)
    bad = np.zeros(codes.shape, dtype=bool) if q.unspecified is None else np.asarray(q.unspecified).copy()
    if not _reference:
        vals = dequantize_kernel(r, q, dtype)
        if vals is not None:
            return vals, bad
    split = None if _reference else r.split_blocks(codes.shape)
    if split is None:
        S, Z = r.expand(codes.shape)
        if _reference:
            return ref.dequantize_arrays(r, codes, S, Z, bad, dtype, _reference)
        return dequantize_chunks(r, codes, S, Z, bad, dtype)
    shp, S, Z = split  # blocks as axes of their own (see quantize)
    vals, bad = dequantize_chunks(r, codes.reshape(shp), S, Z, bad.reshape(shp), dtype)
    return vals.reshape(codes.shape), bad.reshape(codes.shape)


def dequantize_chunks(r: UniformRecord, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray,
                      dtype: object) -> tuple[np.ndarray, np.ndarray]:
    """dequantize_rows on chunks of rows on the thread pool, as quantize_chunks (elements.md §2.11);
    ``bad`` (contiguous) is updated in place."""
    if codes.ndim == 0:
        return dequantize_rows(r, codes, S, Z, bad, dtype)
    c1, S1, Z1 = _rows_view(codes, S, Z)
    per_row = c1.size // max(1, c1.shape[0])
    if len(chunk_bounds(c1.shape[0], per_row)) == 1 or not bad.flags.c_contiguous:
        return dequantize_rows(r, codes, S, Z, bad, dtype)
    b1 = bad.reshape(c1.shape)
    vals = np.empty(c1.shape, dtype=np_dtype(r.expressed) if dtype is None else np.dtype(dtype))  # type: ignore[call-overload]

    def work(lo: int, hi: int) -> None:
        dequantize_rows(r, c1[lo:hi], _rows(S1, lo, hi, c1.ndim), _rows(Z1, lo, hi, c1.ndim), b1[lo:hi],
                        dtype, vals[lo:hi])

    run_chunks(work, c1.shape[0], per_row)
    return vals.reshape(codes.shape), bad


def dequantize_rows(r: UniformRecord, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray,
                    dtype: object, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """reference.dequantize_arrays over slices of about CHUNK elements along the first axis, as quantize_chunks
    (into ``out`` where given)."""
    rows = codes.shape[0] if codes.ndim else 1
    step = max(1, CHUNK // max(1, codes.size // max(rows, 1)))
    if codes.ndim == 0 or step >= rows:
        v, b = ref.dequantize_arrays(r, codes, S, Z, bad, dtype)
        if out is not None:
            out[...] = v
        return v, b
    along = np.ndim(S) == codes.ndim and np.shape(S)[0] > 1
    vals: np.ndarray | None = out
    for r0 in range(0, rows, step):
        sl = slice(r0, r0 + step)
        v, _ = ref.dequantize_arrays(r, codes[sl], S[sl] if along else S, Z[sl] if along else Z, bad[sl], dtype)
        if vals is None:
            vals = np.empty(codes.shape, dtype=v.dtype)
        vals[sl] = v
    assert vals is not None
    return vals, bad
