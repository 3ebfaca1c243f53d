"""Deterministic random inputs for conformance cases (docs/vectors.md §4).

Only the raw output of the PCG64 bit generator is used (``random_raw``: the 64-bit XSL-RR output of the
128-bit PCG state, fixed by the algorithm); numpy's distribution methods (``Generator.integers``, ``random``...)
may change their streams between versions and are never called. The generator state comes from a text label,
not from numpy's SeedSequence:

    state = int.from_bytes(sha256(label)[:16], "little"),   inc = int.from_bytes(sha256(label)[16:], "little") | 1

and every transform below is qref's own integer arithmetic on the raw words, so a label gives the same values
on every machine and numpy version. Give each stream its own label (e.g. the case id).
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..errors import QrefError

U64 = np.uint64


def raw(label: str, n: int) -> np.ndarray:
    """n raw 64-bit words of the PCG64 stream named ``label``."""
    digest = hashlib.sha256(label.encode("utf-8")).digest()
    bg = np.random.PCG64(0)
    bg.state = {
        "bit_generator": "PCG64",
        "state": {"state": int.from_bytes(digest[:16], "little"), "inc": int.from_bytes(digest[16:], "little") | 1},
        "has_uint32": 0,
        "uinteger": 0,
    }
    return np.asarray(bg.random_raw(int(n)), dtype=U64).reshape(-1)


def bits(label: str, n: int, nbits: int) -> np.ndarray:
    """n integers in [0, 2^nbits): the top ``nbits`` bits of each raw word (uint64)."""
    if not 1 <= nbits <= 64:
        raise QrefError(f"nbits must be in 1..64, got {nbits}")
    return raw(label, n) >> U64(64 - nbits)


def below(label: str, n: int, bound: int) -> np.ndarray:
    """n integers in [0, bound) for 1 <= bound <= 2^32: (top 32 bits * bound) >> 32 (int64).

    Not exactly uniform (a bias below 2^-32 per value); exactly reproducible."""
    if not 1 <= bound <= 1 << 32:
        raise QrefError(f"bound must be in 1..2^32, got {bound}")
    top = raw(label, n) >> U64(32)
    return ((top * U64(bound)) >> U64(32)).astype(np.int64)


def float_bits(label: str, n: int, dtype: str) -> np.ndarray:
    """n uniformly random bit patterns of an IEEE dtype ('float64', 'float32', 'float16', 'bfloat16'), every
    class included (NaN, Inf, zeros, subnormals), as the unsigned integer type of the same width."""
    width = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}[dtype]
    return bits(label, n, width).astype(np.dtype(f"uint{width}"))


LAYOUT = {"float64": (11, 52), "float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7)}


def floats_in_binades(label: str, n: int, dtype: str, emin: int, emax: int) -> np.ndarray:
    """n bit patterns of ``dtype`` with random sign, a random unbiased exponent e in [emin, emax] and random
    mantissa bits: |x| = (1 + f / 2^m) * 2^e, as unsigned bits. Exponents below the dtype's normal range give
    its subnormals by truncating the significand ((2^m + f) >> shift); exponents above it are clamped to the
    largest finite binade."""
    ebits, mbits = LAYOUT[dtype]
    width = 1 + ebits + mbits
    bias = (1 << (ebits - 1)) - 1
    w = raw(label, 2 * n).reshape(n, 2)
    sign = (w[:, 0] >> U64(63)).astype(np.int64)
    e = emin + ((((w[:, 0] >> U64(31)) & U64(0xFFFFFFFF)) * U64(emax - emin + 1)) >> U64(32)).astype(np.int64)
    f = w[:, 1] >> U64(64 - mbits)
    field = e + bias
    field = np.minimum(field, (1 << ebits) - 2)  # stay finite
    normal = field >= 1
    shift = np.clip(1 - field, 0, 63).astype(U64)
    sub = ((U64(1) << U64(mbits)) | f) >> shift
    mag = np.where(normal, (np.maximum(field, 1).astype(U64) << U64(mbits)) | f, np.where(shift > mbits, U64(0), sub))
    out = (sign.astype(U64) << U64(width - 1)) | mag
    return out.astype(np.dtype(f"uint{width}"))


__all__ = ["LAYOUT", "U64", "below", "bits", "float_bits", "floats_in_binades", "raw"]
