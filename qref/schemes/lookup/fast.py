"""Fast path of the lookup quantizer (spec: lut.md §3.6, informative): the same results as the readable
reference (reference.py: ``decide``, ``quantize_absmax``, ``dequantize_blocks``), proven equal by
tests/test_lookup_fast.py. Functions of the rules, the table and the block size, like the reference's.

- 16-bit compute dtypes (float16, bfloat16): the decision is a table over every 16-bit pattern, filled by the
  reference decision itself (NaN patterns excepted: they go to the reference).
- float32: a table over the top 16 bits of the float32 pattern (sign, exponent, 7 fraction bits). Each such
  bucket is a run of 65536 consecutive float32 values; when the reference decision gives the same code at both
  ends of the run, the bucket holds that code, else a sentinel, and elements in a sentinel bucket (a decision
  point inside the run, or an Inf/NaN pattern) are decided by the reference. This rests on lut.md §3.6 (L1):
  every deterministic rule's code is constant between two values where it agrees (the chosen entry's value is
  monotone in s and equal values keep their code); argmin runs also need a certificate (L2). Tables of more
  than 255 entries use the top 20 bits instead (argmin: refined from the 16-bit runs).
- The data is processed in chunks of ``CHUNK`` (quantize) or ``DQ_CHUNK`` (dequantize) elements, whole blocks:
  bounded intermediates, and few enough numpy calls that their per-call overhead stays small.

Imports the reference (it decides what the tables leave open); the scheme calls in here, the reference never does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable

import numpy as np

from ...core import arith as fp
from ...core.encode import take_via
from ...core.parallel import run_chunks, scratch
from ...errors import QrefError
from ...profiles.lookup import LookupSchemeRules
from ...tables import Table
from . import reference

CHUNK = 1 << 18  # elements per quantize chunk: bounded temporaries (a few MiB), few Python-level steps
DQ_CHUNK = 1 << 16  # elements per dequantize chunk: codes, pair indices and values of one chunk stay in L2
_U16 = np.arange(1 << 16, dtype=np.uint32)
_LUTS: dict[Hashable, tuple[np.ndarray, np.ndarray, int]] = {}
_PAIRS: dict[Hashable, np.ndarray] = {}

Decide = Callable[[np.ndarray, str], tuple[np.ndarray, np.ndarray]]


def _sentinel(size: int) -> tuple[np.dtype, int]:
    dt = np.dtype(np.uint8) if size < 0xFF else np.dtype(np.uint16)
    return dt, int(np.iinfo(dt).max)


def decision_lut(key: Hashable, size: int, cd: str, decide: Decide, argmin_entries: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """The decision tables of one scheme's rule in compute dtype cd (cached under key).

    Returns (level 1, level 2, sh). Level 1: index = the 16-bit pattern (float16 / bfloat16) or the float32
    pattern >> sh (sh = 16; 12 for float32 with tables of more than 255 entries); value v = the
    code (v < size), the sentinel (the dtype's max: the reference decides), or, for a float32 run with a decision
    point inside, size + j: block j of level 2. Level 2 (256 entries per block): index = the next 8 bits of the
    pattern; value = the code of that run of 2^(sh - 8) floats, or the sentinel.
    argmin_entries: the entries of an ``argmin`` rule (float32 distances), whose code is not monotone everywhere
    (merged distances far from the table): a float32 run then keeps its code only where ``_argmin_certified``
    proves no distance can merge with the winner's (lut.md §3.6 L2)."""

    def agree(lo_pat: np.ndarray, hi_pat: np.ndarray, c_lo: np.ndarray) -> np.ndarray:
        if argmin_entries is None:
            return np.ones(lo_pat.size, bool)
        # the run's two ends are decided by the reference (code c_lo at both): the certificate covers the
        # values strictly inside, so a tie at an end (a midpoint on a run boundary) does not void the run
        one = np.uint32(1)
        return _argmin_certified((lo_pat + one).view(np.float32), (hi_pat - one).view(np.float32), c_lo,
                                 argmin_entries)

    k = (key, cd)
    hit = _LUTS.get(k)
    if hit is not None:
        return hit
    dt, sent = _sentinel(size)
    level2 = np.zeros(0, dt)
    sh = 16  # level 1 is indexed by the pattern >> sh
    if cd == "float16":
        v = _U16.astype(np.uint16).view(np.float16).astype(np.float32)
        special = np.isnan(v)
        codes, unspec = decide(np.where(special, np.float32(0), v), cd)
        lut = np.where(special | unspec, sent, codes).astype(dt)
    else:  # float32 runs; bfloat16 patterns are the 16-bit runs' first values
        if cd == "float32" and size > 0xFF and argmin_entries is None:
            sh = 12  # 8-bit tables: 2^20 runs of 4096 floats keep the split runs rare (argmin: refined below)
        first = np.arange(1 << (32 - sh), dtype=np.uint32) << np.uint32(sh)
        last = first | np.uint32((1 << sh) - 1)
        special = (first >> np.uint32(23)) & np.uint32(0xFF) == np.uint32(0xFF)  # Inf or NaN inside
        codes, unspec = _ends(first, special, decide, cd)
        bad = special | unspec
        lut = np.where(bad, sent, codes).astype(dt)
        if cd == "float32":
            hi_codes, hi_unspec = _ends(last, special, decide, cd)
            same = ~bad & (hi_codes == codes) & ~hi_unspec
            cert = np.zeros(same.size, bool)
            cert[same] = agree(first[same], last[same], codes[same])
            lut = np.where(cert, lut, sent).astype(dt)  # agreeing ends without a certificate: the reference
            split = ~bad & ~same
            if size > 0xFF and argmin_entries is not None:  # refine to 2^20 runs of 4096 floats (as nearest has)
                h16 = np.flatnonzero(split).astype(np.uint32)
                lut = np.repeat(lut, 16)  # a certified 16-bit run is certified on its 16 parts; sentinels stay
                sh = 12
                first = ((h16[:, None] << np.uint32(16)) | (np.arange(16, dtype=np.uint32) << np.uint32(12))).ravel()
                last = first | np.uint32(0xFFF)
                no = np.zeros(first.size, bool)  # a split run has no Inf / NaN pattern
                codes, unspec = _ends(first, no, decide, cd)
                hi_codes, hi_unspec = _ends(last, no, decide, cd)
                same = ~unspec & ~hi_unspec & (hi_codes == codes)
                cert = np.zeros(same.size, bool)
                cert[same] = agree(first[same], last[same], codes[same])
                run = first >> np.uint32(12)
                lut[run] = np.where(cert, codes, sent).astype(dt)
                split = np.zeros(lut.size, bool)
                split[run] = ~unspec & ~same
            h = np.flatnonzero(split).astype(np.uint32)
            if h.size > sent - size:  # more split runs than level-2 block numbers: the smallest |s| get them
                mag = np.argsort(h & np.uint32((1 << (31 - sh)) - 1), kind="stable")  # (scaled values: |s| <= 1)
                lut[h[mag[sent - size:]]] = sent  # the reference decides the rest
                h = np.sort(h[mag[:sent - size]])
            if h.size:
                sub = ((h[:, None] << np.uint32(sh)) | (np.arange(256, dtype=np.uint32) << np.uint32(sh - 8))).ravel()
                sub_last = sub | np.uint32((1 << (sh - 8)) - 1)
                no = np.zeros(sub.size, bool)
                c_lo, u_lo = _ends(sub, no, decide, cd)
                c_hi, u_hi = _ends(sub_last, no, decide, cd)
                ok = ~(u_lo | u_hi | (c_lo != c_hi))
                ok[ok] = agree(sub[ok], sub_last[ok], c_lo[ok])
                level2 = np.where(ok, c_lo, sent).astype(dt)
                lut[h] = (size + np.arange(h.size)).astype(dt)
    lut.setflags(write=False)
    level2.setflags(write=False)
    out = (lut, level2, sh)
    _LUTS[k] = out
    return out


def _ends(patterns: np.ndarray, special: np.ndarray, decide: Decide, cd: str) -> tuple[np.ndarray, np.ndarray]:
    """The reference decision at the float32 values with these bit patterns (0 where special)."""
    return decide(np.where(special, np.float32(0), patterns.view(np.float32)), cd)


def _argmin_certified(a: np.ndarray, b: np.ndarray, w: np.ndarray, entries: np.ndarray) -> np.ndarray:
    """For runs of float32 values between a and b (decision_lut passes a run without its two ends, which the
    reference itself decides as code w) under argmin with float32 distances: True where, for every s in
    [a, b] and every entry t_k != t_w, h_k(s) = |s - t_k| (1 - 2^-23) - |s - t_w| (1 + 2^-23) > 2^-147. Then
    fl32|s - t_k| > fl32|s - t_w| (a float32 subtraction errs by at most 2^-24 relatively or 2^-150
    absolutely), so w wins on the whole run. h_k is piecewise linear in s: its minimum lies at a, b, t_k or t_w
    (clipped to the run); evaluated in float64 with the margin 2^-40 (|s| + |t_k| + |t_w|) for float64's own
    rounding. With finite entries only the nearest distinct values t_l < t_w < t_r are checked: h_r(s) > 0
    gives s < t_r, and then h_k(s) = h_r(s) + (t_k - t_r)(1 - 2^-23) > 0 for every t_k > t_r (t_l likewise)."""
    e = entries.astype(np.float64)
    neighbours = bool(np.isfinite(e).all())
    if neighbours:  # the two neighbouring values of each winner (NaN: none on that side)
        u = np.unique(e)
        j = np.searchsorted(u, e[w.astype(np.intp)])
        ext = np.concatenate([[np.nan], u, [np.nan]])
        cand = np.stack([ext[j], ext[j + 2]], axis=1)  # u[j - 1], u[j + 1]
    else:
        cand = np.broadcast_to(e[None, :], (a.size, e.size))
    out = np.empty(a.size, bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(0, a.size, 2048):  # blocks of runs, to bound the (runs x entries) temporaries
            lo = np.minimum(a[i:i + 2048], b[i:i + 2048]).astype(np.float64)[:, None]
            hi = np.maximum(a[i:i + 2048], b[i:i + 2048]).astype(np.float64)[:, None]
            tw = e[w[i:i + 2048].astype(np.intp)][:, None]
            tk = cand[i:i + 2048]
            worst = np.full(np.broadcast_shapes(lo.shape, tk.shape), np.inf)
            for s in (lo, hi, np.clip(tk, lo, hi), np.clip(tw, lo, hi)):
                g = np.abs(s - tk) * (1 - 2.0**-23) - np.abs(s - tw) * (1 + 2.0**-23) - 2.0**-147
                g -= 2.0**-40 * (np.abs(s) + np.abs(tk) + np.abs(tw))
                worst = np.minimum(worst, g)
            worst = np.where(tk == tw, np.inf, worst)  # an equal entry: the same distance, the reference's order
            if neighbours:
                worst = np.where(np.isnan(tk), np.inf, worst)  # no neighbour on that side
            out[i:i + 2048] = (worst > 0).all(axis=1)
    return out


def lookup_chunk(s: np.ndarray, cd: str, luts: tuple[np.ndarray, np.ndarray, int], size: int,
                 codes_out: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Codes of the flat float32 chunk s (values of cd) from the decision tables into codes_out; returns the
    positions (in s) left to the reference decision (the sentinel). idx: an intp scratch buffer of s.size."""
    lut, level2, sh = luts
    if cd == "float16":
        np.copyto(idx, s.astype(np.float16).view(np.uint16), casting="unsafe")
    else:
        np.right_shift(s.view(np.uint32), sh, out=idx, casting="unsafe")
    sent = 0xFF if lut.dtype == np.uint8 else 0xFFFF
    if lut.dtype == codes_out.dtype:
        np.take(lut, idx, out=codes_out)
        c = codes_out
    else:
        c = np.take(lut, idx)
        np.copyto(codes_out, c, casting="unsafe")
    if not level2.size:
        return np.flatnonzero(c == sent)
    pos = np.flatnonzero(c >= size)
    if not pos.size:
        return pos
    v = c[pos].astype(np.intp)
    two = v < sent
    p2 = pos[two]
    sub = (s[p2].view(np.uint32) >> np.uint32(sh - 8)) & np.uint32(0xFF)
    c2 = level2[(v[two] - size) * 256 + sub]
    codes_out[p2] = c2
    return np.concatenate([pos[~two], p2[c2 == sent]])


def ftz_blocks(entries: np.ndarray, scales: np.ndarray) -> np.ndarray | None:
    """For FTZ dequantize (lut.md §4) of flushed entries t and flushed block scales a: True for the blocks where
    some fl32(t * a) can be a nonzero value below 2^-126, i.e. a != 0 and |a| * min |t != 0| < 2^-126 (exact in
    float64: a product of two float32). Elsewhere every product is 0, +-Inf, NaN or at least 2^-126 in magnitude
    (rounding is monotone and 2^-126 is a float32), so the flush leaves it as it is. None when no block needs it."""
    nz = np.abs(entries.astype(np.float64))
    nz = nz[nz > 0]  # neither zeros nor NaN
    if not nz.size:
        return None
    with np.errstate(invalid="ignore"):  # a signaling-NaN scale (a NaN input's payload) warns in the cast
        a = np.abs(scales.astype(np.float64))
        tiny = (a != 0) & (a * nz.min() < 2.0**-126)  # NaN scales: False (NaN products are not flushed)
    return tiny if tiny.any() else None


def pair_table(key: Hashable, entries: np.ndarray) -> np.ndarray | None:
    """uint64 table T with T[c0 + 256 c1] = the float32 bit patterns of (entries[c0], entries[c1]) in memory
    order: a gather of a little-endian uint16 view of two uint8 codes yields both values. None on a
    big-endian machine or for tables of more than 256 entries."""
    if sys.byteorder != "little" or entries.size > 256:
        return None
    t = _PAIRS.get(key)
    if t is None:
        n = entries.size
        e = entries.astype(np.float32).view(np.uint32).astype(np.uint64)
        c0 = np.arange(256 * (n - 1) + n) % 256
        c1 = np.arange(256 * (n - 1) + n) // 256
        ok = c0 < n
        t = np.where(ok, e[np.minimum(c0, n - 1)] | (e[np.minimum(c1, n - 1)] << np.uint64(32)), 0).astype(np.uint64)
        t.setflags(write=False)
        _PAIRS[key] = t
    return t


__all__ = ["CHUNK", "DQ_CHUNK", "Decide", "decide_fast", "decision_lut", "decision_luts", "dequantize_fast",
           "ftz_blocks", "lookup_chunk", "pair_table", "quantize_absmax_fast"]


def decision_luts(rules: LookupSchemeRules, table: Table, cd: str) -> tuple[np.ndarray, np.ndarray, int]:
    """decision_lut of the rules' deterministic decision on ``table`` in compute dtype cd (lut.md §3.6)."""
    key = (table, rules.rule, rules.midpoints, rules.tie, rules.distance_dtype, rules.table_dtype, rules.nan)

    def decide(s: np.ndarray, c: str) -> tuple[np.ndarray, np.ndarray]:
        return reference.decide(rules, table, s, c)

    return decision_lut(key, table.size, cd, decide,
                        reference.entries(rules, table, cd) if rules.rule == "argmin" else None)


def decide_fast(rules: LookupSchemeRules, table: Table, s: np.ndarray, cd: str) -> tuple[np.ndarray, np.ndarray]:
    """reference.decide (deterministic) through the decision tables (lut.md §3.6): (codes, unspecified) of flat s."""
    luts = decision_luts(rules, table, cd)
    codes = np.empty(s.size, table.storage_format.code_dtype)
    unspec = np.zeros(s.size, bool)
    idx = np.empty(min(CHUNK, s.size), np.intp)
    for i in range(0, s.size, CHUNK):  # chunks, not elements
        c = s[i:i + CHUNK]
        amb = lookup_chunk(c, cd, luts, table.size, codes[i:i + c.size], idx[: c.size])
        if amb.size:
            rc, ru = reference.decide(rules, table, c[amb], cd)
            codes[i + amb], unspec[i + amb] = rc, ru
    return codes, unspec


def quantize_absmax_fast(rules: LookupSchemeRules, table: Table, block_size: int, axis: int | None,
                         x32: np.ndarray, cd: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """reference.quantize_absmax (deterministic) for a reshape layout (reference.layout_is_reshape), chunked, with
    the table decision (lut.md §3.6)."""
    B = block_size
    x2 = x32.reshape(-1, B)
    nb = x2.shape[0]
    code_dt = table.storage_format.code_dtype
    codes = np.empty(x2.shape, dtype=code_dt)
    unspec = np.zeros(x2.shape, dtype=bool)
    stored = np.empty(nb, np.float32)
    lut = decision_luts(rules, table, cd)
    rows = max(1, CHUNK // B)
    no_partial = np.zeros(rows, dtype=bool)
    flat_codes = codes.reshape(-1)
    found: dict[int, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}

    def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
        idx = np.empty(min(rows, hi - lo) * B, dtype=np.intp)
        mine: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
        for r0 in range(lo, hi, rows):  # chunks of blocks, not elements
            r1 = min(hi, r0 + rows)
            s, st, zero = reference.scale_blocks(rules, x2[r0:r1], no_partial[: r1 - r0], cd)
            stored[r0:r1] = st
            sf = s.reshape(-1)
            amb = lookup_chunk(sf, cd, lut, table.size, flat_codes[r0 * B:r1 * B], idx[: sf.size])
            if amb.size:
                mine[0].append(amb + r0 * B)
                mine[1].append(sf[amb])
            if rules.zero_block == "code0" and zero.any():
                mine[2].append(np.flatnonzero(zero) + r0)
        found[lo] = mine

    run_chunks(work, nb, B)
    amb_pos = [a for lo in sorted(found) for a in found[lo][0]]
    amb_val = [a for lo in sorted(found) for a in found[lo][1]]
    zero_rows = [a for lo in sorted(found) for a in found[lo][2]]
    if amb_pos:  # the elements the table leaves to the reference decision
        pos = np.concatenate(amb_pos)
        c, u = reference.decide(rules, table, np.concatenate(amb_val), cd)
        flat_codes[pos] = c
        unspec.reshape(-1)[pos] = u
    if zero_rows:
        zr = np.concatenate(zero_rows)
        codes[zr] = 0
        unspec[zr] = False
    sshape = (nb,) if axis is None else (*x32.shape[:-1], x32.shape[-1] // B)
    return codes.reshape(x32.shape), unspec.reshape(x32.shape), stored, sshape


def dequantize_fast(rules: LookupSchemeRules, table: Table, block_size: int, raw: np.ndarray,
                    per_block: np.ndarray, cd: str) -> np.ndarray:
    """reference.dequantize_blocks for uint8/uint16 codes in a reshape layout (lut.md §3.6): chunks of whole
    blocks; 8-bit codes gathered two at a time through a table of value pairs (an intp index, mode="clip" after
    the range check), then one float32 multiply by the block scale in place. FTZ (lut.md §4): the flushed
    entries and scales are the operands; the flush of the product runs only on the blocks where it can act."""
    B = block_size
    n = raw.size
    nb = n // B
    size = table.size
    if per_block.size != nb:
        raise QrefError(f"{per_block.size} block scales for {nb} blocks")
    entries = reference.entries(rules, table, cd, "dequant_table_dtype")
    flat = raw.reshape(-1)
    out = np.empty(n, np.float32)
    plain = cd == "float32"  # one float32 multiply per element (with ftz: of flushed operands, flushed)
    tiny = None
    if plain and rules.ftz:  # lut.md §4: DAZ of t and a, FTZ of the float32 product
        entries, per_block = fp.flush(entries), fp.flush(per_block)
        tiny = ftz_blocks(entries, per_block)
    pairs = pair_table((table, entries.tobytes()), entries) if raw.dtype == np.uint8 else None
    if B % 2:
        pairs = None  # chunks of odd length: one code at a time
    check = raw.dtype != np.uint8 or size < 256  # a uint8 code always indexes a 256-entry table
    rows = max(1, DQ_CHUNK // B)

    def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
        idx = scratch("lookup.dequantize_idx", min(rows, hi - lo) * B // (1 if pairs is None else 2), np.intp)
        for r0 in range(lo, hi, rows):  # chunks of blocks, not elements
            r1 = min(hi, r0 + rows)
            c = flat[r0 * B:r1 * B]
            if check and int(c.max()) >= size:
                raise QrefError(f"codes out of range for table {table.name!r} ({size} entries)")
            o = out[r0 * B:r1 * B]
            if pairs is not None:
                take_via(pairs, c.view(np.uint16), o.view(np.uint64), idx)
            else:
                take_via(entries, c, o, idx)
            o2 = o.reshape(r1 - r0, B)
            a = per_block[r0:r1, None]
            if not plain:
                o2[...] = reference.scale_product(rules, o2, a, cd)
                continue
            np.multiply(o2, a, out=o2)  # one float32 multiply: fl32(t * a)
            if tiny is not None:
                t = np.flatnonzero(tiny[r0:r1])
                if t.size:  # FTZ of the product on the blocks where it can be below 2^-126
                    sub = o2[t]
                    np.copysign(np.float32(0), sub, out=sub, where=np.abs(sub) < np.float32(2.0**-126))
                    o2[t] = sub

    with np.errstate(over="ignore", invalid="ignore"):
        run_chunks(work, nb, B)
    return out.reshape(raw.shape)
