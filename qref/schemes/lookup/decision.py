"""Nearest-entry decisions of the lookup quantizer (spec: lut.md §3.3).

``table_encode(s, table, rule=..., ...)`` maps already scaled values ``s`` to codes. Three rules:

- ``"nearest"``: the entry nearest to s. Candidates come from the decision points between neighbouring sorted
  entries: their exact midpoints (``midpoints="exact"``), their float32 midpoints fl32((a + b) / 2)
  (``"float32"``: bitsandbytes' bucketize bounds), the midpoints written as C float literals
  (``"decimal_literal"``: the shortest decimal that round-trips the float64 midpoint, rounded to float32 from
  that decimal; the literals of OpenVINO's ConvertNF4, which differ from ``"float32"`` by one ulp on 4 of the 15
  NF4 points: the midpoints are float32 ties, and the 16-17 digit decimal lands on either side; lut.md §3.3), or
  the table's explicit thresholds when it has them. A value on a decision point is a tie, resolved by ``tie``:
  ``"lower_value"`` (bitsandbytes, OpenVINO: searchsorted side='left'), ``"upper_value"``, ``"lower_code"``
  (the smaller code: exact argmin's first index) or ``"even_code"`` (the even code; the lower value when neither
  or both candidates are even).
- ``"argmin"``: the first index of argmin_i |s - t_i| with the difference rounded to ``distance_dtype`` before
  the comparison (torchao, qwix, MLX): rounding can merge distances, and merged ones go to the lower code.
- ``"grid65536"``: bitsandbytes' CPU 8-bit quantizer: s is clamped to [-1, 1], mapped to a 65536-point grid
  i = trunc(float32((s + 1) * 0.5 * 65535 + 0.5)), and grid point i takes the code of the first float32
  midpoint not below float32(-1 + float32(2i / 65535)). Off by one code from exact nearest on some inputs.

NaN inputs are not handled here: the caller applies the scheme's NaN rule (``nan_code``).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from ...core import arith as fp
from ...errors import QrefError, check_choice
from ...profiles.lookup import MIDPOINTS, NAN_RULES, RULES, TIES
from ...tables import Table


def decision_points(table: Table, midpoints: str) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) float64 arrays, ascending: decision point j between sorted entries j and j + 1 is exactly
    hi_j + lo_j (lo_j = 0 unless midpoints='exact' and the float64 sum was inexact)."""
    check_choice("midpoints", midpoints, MIDPOINTS)
    if table.threshold_values is not None:
        hi = table.threshold_values.astype(np.float64)
        return hi, np.zeros_like(hi)
    v = table.values[table.order]
    if midpoints == "float32":
        hi = ((v[:-1] + v[1:]) * np.float32(0.5)).astype(np.float32).astype(np.float64)
        return hi, np.zeros_like(hi)
    if midpoints == "decimal_literal":
        return _decimal_literals(table), np.zeros(table.size - 1)
    s, e = fp.two_sum(v[:-1].astype(np.float64), v[1:].astype(np.float64))
    return s * 0.5, e * 0.5  # halving is exact: float64 has ample range below float32's


@lru_cache(maxsize=16)
def _decimal_literals(table: Table) -> np.ndarray:
    """Decision points as C float literals (lut.md §3.3): m = (a + b) / 2 exactly in float64 (a, b float32),
    written as repr(m) (the shortest round-trip decimal) and rounded once to float32 from that decimal."""
    v = table.values[table.order].astype(np.float64)
    mids = (v[:-1] + v[1:]) * 0.5  # exact: a + b of two float32 values fits in float64
    out = fp.round_fractions([Fraction(repr(float(m))) for m in mids], np.float32).astype(np.float64)
    out.setflags(write=False)
    return out


def _nearest(s: np.ndarray, table: Table, midpoints: str, tie: str) -> np.ndarray:
    hi, lo = decision_points(table, midpoints)
    order = table.order
    # sorted positions of the decision points' upper neighbours; with exact midpoints, equal entries (e.g. +0
    # twice) form one candidate group: the point between them is no decision point
    keep = np.ones(hi.size, dtype=bool)
    if midpoints == "exact" and table.threshold_values is None:
        v = table.values[order].astype(np.float64)
        keep = v[:-1] != v[1:]
    hi, lo = hi[keep], lo[keep]
    starts = np.concatenate([[0], np.nonzero(keep)[0] + 1])  # first sorted position of each group
    ends = np.concatenate([starts[1:] - 1, [table.size - 1]])  # last sorted position of each group
    x = s.astype(np.float64)
    a = np.searchsorted(hi, x, side="left")
    b = np.searchsorted(hi, x, side="right")
    neg = np.concatenate([[0], np.cumsum(lo < 0)])
    nonpos = np.concatenate([[0], np.cumsum(lo <= 0)])
    low = starts[a + (neg[b] - neg[a])]         # first candidate: after the decision points strictly below x
    high = ends[a + (nonpos[b] - nonpos[a])]    # last candidate: before the first decision point above x
    if tie == "lower_value":
        idx = low
    elif tie == "upper_value":
        idx = high
    else:
        idx = low.copy()
        span = int((high - low).max()) if x.size else 0
        if tie == "lower_code":
            best = order[low]
            for d in range(1, span + 1):
                cand = np.minimum(low + d, table.size - 1)
                take = (low + d <= high) & (order[cand] < best)
                best = np.where(take, order[cand], best)
                idx = np.where(take, cand, idx)
        else:  # even_code: the first candidate (by value) with an even code, else the lower value
            found = (order[low] % 2) == 0
            for d in range(1, span + 1):
                cand = np.minimum(low + d, table.size - 1)
                take = ~found & (low + d <= high) & ((order[cand] % 2) == 0)
                idx = np.where(take, cand, idx)
                found |= take
    return order[idx]


@lru_cache(maxsize=16)
def _grid_lut(table: Table) -> np.ndarray:
    if not table.is_sorted:
        raise QrefError(f"rule 'grid65536' needs a table sorted ascending; {table.name!r} is not")
    v = table.values
    mids = (np.float32(0.5) * (v[:-1] + v[1:])).astype(np.float32)
    i = np.arange(65536, dtype=np.float32)
    grid = (np.float32(-1.0) + (np.float32(2.0) * i) / np.float32(65535)).astype(np.float32)
    lut = np.searchsorted(mids, grid, side="left").astype(np.int64)
    lut.setflags(write=False)
    return lut


def _grid(s: np.ndarray, table: Table) -> np.ndarray:
    v = np.clip(s.astype(np.float32), np.float32(-1), np.float32(1))
    g = ((v + np.float32(1)) * np.float32(0.5)).astype(np.float32)
    g = (g * np.float32(65535) + np.float32(0.5)).astype(np.float32)
    return _grid_lut(table)[g.astype(np.int64)]


def table_encode(
    s: np.ndarray,
    table: Table,
    *,
    rule: str = "nearest",
    midpoints: str = "exact",
    tie: str = "even_code",
    distance_dtype: str = "float32",
    entries: np.ndarray | None = None,
) -> np.ndarray:
    """Codes (int64) of scaled values s (float32/float16/bfloat16, no NaN) under a decision rule.

    Defaults (rule="nearest", midpoints="exact", tie="even_code") are the spec profile's. entries: the table
    values as the rule sees them (rule="argmin" with tables cast to the input dtype); default table.values.
    """
    check_choice("lookup rule", rule, RULES)
    s = np.asarray(s)
    if s.dtype.kind != "f" and s.dtype.name != "bfloat16":
        raise QrefError(f"table_encode expects scaled float values, got dtype {s.dtype}")
    if s.dtype == np.float64:
        raise QrefError("table_encode works on float32/float16/bfloat16 scaled values; round float64 input to "
                        "float32 first (qref.encode(x, 'float32'))")
    flat = s.reshape(-1)
    if np.isnan(flat.astype(np.float32)).any():
        raise QrefError("table_encode: NaN has no nearest entry; the scheme's nan rule decides its code")
    if rule == "nearest":
        check_choice("tie rule", tie, TIES)
        codes = _nearest(flat, table, midpoints, tie)
    elif rule == "argmin":
        codes = fp.table_argmin(flat, table.values if entries is None else entries, fp.float_dtype(distance_dtype),
                                 subtract="float32", nan_distance="first")
    else:
        codes = _grid(flat, table)
    return codes.reshape(s.shape)


def nan_code(table: Table, nan: str) -> int:
    """The code a NaN scaled value gets under a NaN rule (lut.md §3.4)."""
    check_choice("NaN rule", nan, NAN_RULES)
    if nan == "max_value":
        return int(table.order[-1])
    if nan == "min_value":
        return int(table.order[0])
    return 0  # first_index (argmin over all-NaN distances), unspecified (reported as code 0)


# ---------------------------------------------------------------------------------------------------------
# stochastic rounding between neighbouring entries (lut.md §3.5)
# ---------------------------------------------------------------------------------------------------------
def _scaled_ints(v: np.ndarray) -> np.ndarray:
    """Exact integers v * 2^149 (object array of Python ints) of finite float32 values v: every float32 value
    is a multiple of 2^-149 (the smallest subnormal), so these are exact."""
    bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.int64)
    e = (bits >> 23) & 0xFF
    mant = (bits & 0x7FFFFF) | np.where(e > 0, 1 << 23, 0)
    shift = np.maximum(e, 1) - 1  # value = mant * 2^(max(e, 1) - 150)
    mag = mant.astype(object) << shift.astype(object)
    return np.where(bits >> 31 == 1, -mag, mag)


def stochastic_table_encode(s: np.ndarray, entries: np.ndarray, mode: str, nbits: int,
                            random_bits: np.ndarray) -> np.ndarray:
    """Codes (int64) of scaled values s (float32 array holding values of the compute dtype, no NaN) under
    P3109 stochastic rounding between the two neighbouring table values (lut.md §3.5).

    v_0 < ... < v_m: the distinct entries (``entries``: the table as the decision sees it). s <= v_0 -> v_0,
    s >= v_m -> v_m; else v_j <= s < v_(j+1) and eta = (s - v_j) / (v_(j+1) - v_j), computed exactly (integers
    scaled by 2^149); R = random_bits (N = nbits-bit integers, s's shape):
        A: up iff floor(eta 2^N) + R >= 2^N
        B: up iff floor(eta 2^(N+1)) + 2R + 1 >= 2^(N+1)
        C: up iff RNE(eta 2^N) + R >= 2^N
    and the code is that of v_(j+1) if up else v_j; a value held by several codes takes the lowest of them.
    """
    flat = np.asarray(s, dtype=np.float32).reshape(-1)
    r = np.asarray(random_bits).astype(np.uint64).reshape(-1)
    if r.size != flat.size:
        raise QrefError(f"{r.size} random values for {flat.size} scaled values")
    ent = np.asarray(entries, dtype=np.float32)
    order = np.argsort(ent, kind="stable")
    sv = ent[order].astype(np.float64)
    first = np.concatenate([[True], sv[1:] != sv[:-1]])
    vals, codes = sv[first], order[first]  # distinct values ascending, each with its lowest code
    x = flat.astype(np.float64)
    j = np.clip(np.searchsorted(vals, x, side="right") - 1, 0, vals.size - 1)
    out = codes[j].astype(np.int64)
    inner = np.flatnonzero((x > vals[0]) & (x < vals[-1]) & (x != vals[j]))
    if inner.size == 0:
        return out.reshape(np.shape(s))
    ji = j[inner]
    iv = _scaled_ints(vals.astype(np.float32))
    lo = iv[ji]
    num = (_scaled_ints(flat[inner]) - lo) << (nbits + 1)  # (s - v_j) 2^(N+1), exact
    width = iv[ji + 1] - lo
    f_obj = num // width                                     # floor(eta 2^(N+1)) in [0, 2^(N+1))
    exact = (num - f_obj * width) == 0
    f = f_obj.astype(np.uint64)
    R = r[inner]
    one, n2 = np.uint64(1), np.uint64(1 << nbits)
    if mode == "stochastic_a":
        up = (f >> one) + R >= n2
    elif mode == "stochastic_b":
        up = f + (R << one) + one >= np.uint64(1 << (nbits + 1))
    elif mode == "stochastic_c":
        k = f >> one
        odd_f = (f & one) == one
        rne = k + (odd_f & (~exact.astype(bool) | ((k & one) == one))).astype(np.uint64)
        up = rne + R >= n2
    else:
        raise QrefError(f"unknown stochastic rounding mode {mode!r}")
    out[inner] = np.where(up, codes[ji + 1], codes[ji])
    return out.reshape(np.shape(s))


__all__ = ["decision_points", "nan_code", "stochastic_table_encode", "table_encode"]
