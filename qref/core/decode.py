"""decode: codes -> values (spec: elements.md §4).

decode(c, fmt, dtype) = the exact value of c rounded to ``dtype`` by nearest_even with overflow to +-Inf
(exact for every format whose values the dtype holds). NaN codes give the dtype's quiet NaN carrying the code's
sign bit (as ml_dtypes), or under ``nan_payload`` the code's fraction field shifted into the top fraction bits of
the dtype's NaN (elements.md §4); Inf codes give +-Inf. For formats of at most 16 bits this is a cached table
lookup.
"""

from __future__ import annotations

from functools import lru_cache

import ml_dtypes
import numpy as np

from ..errors import QrefError
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats.policy import NAN_PAYLOADS, CastPolicy
from .encode import CHUNK, GATHER_CHUNK, encode_exact, take_via
from .exact import FINITE, INF, NAN, U64, ZERO, Exact, nan_payload
from .parallel import run_chunks, scratch, thread_limit

_TARGET_POLICY = CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign")


def exact_parts(codes: np.ndarray, fmt: Format) -> Exact:
    """Exact triples (class, sign, sig, exp) of codes of ``fmt`` (uint64 input)."""
    c = codes.astype(U64, copy=False)
    if isinstance(fmt, IntFormat):
        b = fmt.bits
        neg = ((c >> U64(b - 1)) & U64(1)).astype(bool) if fmt.signed else np.zeros(c.shape, bool)
        mag = np.where(neg, (U64(1 << b) - c), c)
        cls = np.where(mag == 0, ZERO, FINITE).astype(np.int8)
        return Exact(cls, neg, mag, np.zeros(c.shape, np.int64), np.zeros(c.shape, bool))
    M = fmt.mantissa_bits
    mag = c & U64(fmt.magnitude_mask)
    neg = (c & U64(fmt.sign_mask)) != 0 if fmt.signed else np.zeros(c.shape, bool)
    e = (mag >> U64(M)).astype(np.int64)
    f = mag & U64((1 << M) - 1)
    if fmt.subnormals:
        sig = np.where(e == 0, f, f | U64(1 << M))
        exp = np.where(e == 0, fmt.qmin, e - fmt.bias - M).astype(np.int64)
    else:
        sig = f | U64(1 << M)
        exp = (e - fmt.bias - M).astype(np.int64)
    cls = np.full(c.shape, FINITE, dtype=np.int8)
    if fmt.zero:
        cls[mag == 0] = ZERO
    if fmt.nan == "ieee":
        top = U64(fmt.inf_code)
        cls[(mag & top) == top] = NAN
        cls[mag == top] = INF
    else:
        if fmt.inf_code is not None:
            cls[mag == U64(fmt.inf_code)] = INF
        if fmt.nan == "all_ones":
            cls[mag == U64(fmt.magnitude_mask)] = NAN
        elif fmt.nan == "negative_zero":
            cls[c == U64(fmt.sign_mask)] = NAN
    sig = np.where(cls == FINITE, sig, U64(0))
    payload = nan_payload(cls, f, M if fmt.nan in ("ieee", "all_ones") else 0)  # the FNUZ NaN: no payload bits
    return Exact(cls, neg, sig, exp, np.zeros(c.shape, bool), payload)


def target_format(dtype: object) -> tuple[np.dtype, FloatFormat]:
    """(numpy dtype, float format) of a decode target, or a QrefError naming the allowed dtypes."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise QrefError(f"dtype must be a numpy floating dtype, got {dtype!r}") from None
    try:
        fmt = get_format(dt.name)
    except QrefError:
        fmt = None
    if not isinstance(fmt, FloatFormat) or (dt.kind not in "fV"):
        raise QrefError(f"cannot decode into dtype {dt}: use float64, float32, float16, bfloat16 or an ml_dtypes "
                        "float type")
    return dt, fmt


def _target_policy(nan_payload: str) -> CastPolicy:
    if nan_payload not in NAN_PAYLOADS:
        raise QrefError(f"nan_payload must be one of {', '.join(NAN_PAYLOADS)}; got {nan_payload!r}")
    return _TARGET_POLICY if nan_payload == "canonical" else CastPolicy(
        rounding="nearest_even", overflow="inf", nan="keep_sign", nan_payload=nan_payload)


@lru_cache(maxsize=512)
def _table(fmt: Format, dtype: np.dtype, nan_payload: str = "canonical") -> np.ndarray:
    _, tgt = target_format(dtype)
    codes = np.arange(1 << fmt.bits, dtype=U64)
    bits = encode_exact(exact_parts(codes, fmt), tgt, _target_policy(nan_payload).resolve(tgt))
    table = bits.astype(tgt.code_dtype).view(dtype)
    table.setflags(write=False)
    return table


def check_codes(codes: object, fmt: Format) -> np.ndarray:
    """Codes as an unsigned integer array, checked to lie in [0, 2^bits)."""
    try:
        arr = np.asarray(codes)
    except ValueError as exc:  # a ragged nested list
        raise QrefError(f"codes must be a rectangular integer array: {exc}") from None
    if arr.dtype.kind not in "iu":
        try:
            same = arr.dtype == np.dtype(getattr(ml_dtypes, fmt.name))
        except (AttributeError, TypeError):
            same = False
        if same:
            return arr.view(fmt.code_dtype)
        raise QrefError(
            f"codes must be an integer array (got dtype {arr.dtype}); to decode an ml_dtypes array pass "
            "arr.view(np.uint8) or an array of that format's own dtype"
        )
    if arr.size and not (arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= fmt.bits):  # else in range by type
        lo = 0 if arr.dtype.kind == "u" else int(arr.min())
        hi = int(arr.max())
        if lo < 0 or hi >= (1 << fmt.bits):
            raise QrefError(f"codes must lie in [0, 2^{fmt.bits}) for {fmt.name}; found values in [{lo}, {hi}]")
    return arr


def gather_codes(codes: np.ndarray, table: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """table[codes] for checked codes, in chunks through one intp buffer kept for the thread (parallel.scratch;
    no intp copy of the input); into ``out`` (contiguous, codes' shape) where given."""
    out = np.empty(codes.shape, dtype=table.dtype) if out is None else out
    flat, o = codes.reshape(-1), out.reshape(-1)
    idx = scratch("decode.idx", min(flat.size, GATHER_CHUNK), np.intp)
    for start in range(0, flat.size, GATHER_CHUNK):  # codes checked to lie in [0, 2^bits), bits <= 16
        take_via(table, flat[start:start + GATHER_CHUNK], o[start:start + GATHER_CHUNK], idx)
    return out


def decode(codes: object, fmt: str | Format, *, dtype: object = np.float32, threads: int | None = None,
           nan_payload: str = "canonical") -> np.ndarray:
    """Values of ``codes`` (unsigned integers) of ``fmt`` as ``dtype`` (default float32); see module docstring.
    threads: threads for many codes (default None: $QREF_NUM_THREADS, else every core; elements.md §2.11).
    nan_payload: the NaN of a NaN code with fraction bits (CastPolicy.nan_payload, elements.md §4): "canonical"
    (default: the dtype's quiet NaN of the code's sign), "keep_quiet" (the fraction shifted into the top fraction
    bits, quiet bit set), "keep_raw" / "truncate" (shifted, not quieted: the same NaN into a wider dtype)."""
    f = get_format(fmt)
    arr = check_codes(codes, f)
    dt, tgt = target_format(dtype)
    pol = _target_policy(nan_payload)
    flat = arr.reshape(-1)
    if f.bits <= 16:
        table = _table(f, dt, nan_payload)
        vals = np.empty(flat.shape, dtype=table.dtype)

        def gather(lo: int, hi: int) -> None:
            gather_codes(flat[lo:hi], table, vals[lo:hi])

        with thread_limit(threads):
            run_chunks(gather, flat.size)
        return vals.reshape(arr.shape)
    out = np.empty(flat.shape, dtype=tgt.code_dtype)
    rp = pol.resolve(tgt)

    def work(lo: int, hi: int) -> None:
        for start in range(lo, hi, CHUNK):
            sl = slice(start, min(hi, start + CHUNK))
            out[sl] = encode_exact(exact_parts(flat[sl], f), tgt, rp)

    with thread_limit(threads):
        run_chunks(work, flat.size)
    return out.view(dt).reshape(arr.shape)


__all__ = ["check_codes", "decode", "exact_parts", "gather_codes", "target_format"]
