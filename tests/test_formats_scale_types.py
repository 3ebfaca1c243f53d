"""UE4M3, UE5M3 and the Gaudi E4M3 bias family: every code against an independent decode (elements.md §1.2).

The oracle is written here from each defining document's bit-field definition in exact Fraction arithmetic (not
from qref's records): value = 2^(e - bias) (1 + m / 8) for a nonzero exponent field e, 2^(1 - bias) m / 8 for
e = 0; UE4M3 / UE5M3: unsigned, no Inf, NaN only at the all-ones code; Gaudi E4M3: signed, IEEE-style (exponent
field 15: Inf for m = 0, NaN otherwise). Each code's value is compared with qref's decode (float64, exact here)
and ``exact_value``; every value is encoded back to its code; every midpoint of neighbouring codes rounds to the
code with the even mantissa (nearest_even), one ulp above the max saturates or overflows as the format says.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import qref

NAN = "nan"
INF = "inf"


def _oracle(code: int, bias: int, signed: bool, ieee: bool, bits: int) -> Fraction | str:
    neg = signed and bool(code >> (bits - 1) & 1)
    e, m = (code >> 3) & ((1 << (bits - 3 - int(signed))) - 1), code & 7
    top = (1 << (bits - 3 - int(signed))) - 1
    if ieee and e == top:
        return NAN if m else ("-" if neg else "") + INF  # type: ignore[return-value]
    if not ieee and e == top and m == 7:
        return NAN
    v = Fraction(m, 8) * Fraction(2) ** (1 - bias) if e == 0 else (1 + Fraction(m, 8)) * Fraction(2) ** (e - bias)
    return -v if neg else v


CASES = {  # name -> (bias, signed, IEEE-style specials, bits, max)
    "float7_e4m3fnu": (7, False, False, 7, 448),
    "float8_e5m3fnu": (15, False, False, 8, 114688),
    "float8_e4m3b3": (3, True, True, 8, 3840),
    "float8_e4m3": (7, True, True, 8, 240),
    "float8_e4m3b11": (11, True, True, 8, 15),
    "float8_e4m3b15": (15, True, True, 8, Fraction(15, 16)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_code_decodes_as_the_document_defines(name: str) -> None:
    bias, signed, ieee, bits, mx = CASES[name]
    fmt = qref.get_format(name)
    assert fmt.bits == bits and fmt.max_value == mx
    codes = np.arange(1 << bits, dtype=np.uint16 if bits > 8 else np.uint8)
    got = qref.decode(codes, fmt, dtype=np.float64)
    for c in range(1 << bits):
        want = _oracle(c, bias, signed, ieee, bits)
        if want == NAN:
            assert math.isnan(got[c]) and math.isnan(fmt.exact_value(c)), c
        elif isinstance(want, str):
            assert got[c] == (-math.inf if want.startswith("-") else math.inf), c
        else:
            assert Fraction(float(got[c])) == want == fmt.exact_value(c), (c, got[c], want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_value_encodes_back_and_midpoints_round_to_even(name: str) -> None:
    bias, signed, ieee, bits, mx = CASES[name]
    fmt = qref.get_format(name)
    finite = [(c, v) for c in range(1 << bits) if not isinstance(v := _oracle(c, bias, signed, ieee, bits), str)
              and not (v == 0 and c != 0 and signed and c >> (bits - 1))]  # -0 (a Fraction has no sign)
    vals = np.array([float(v) for _, v in finite])
    assert np.array_equal(qref.encode(vals, fmt).astype(np.int64), [c for c, _ in finite])
    pos = sorted((v, c) for c, v in finite if v >= 0)
    mids = np.array([float((a + b) / 2) for (a, _), (b, _) in itertools.pairwise(pos)])
    even = [ca if ca % 2 == 0 else cb for (_, ca), (_, cb) in itertools.pairwise(pos)]
    assert np.array_equal(qref.encode(mids, fmt, rounding="nearest_even").astype(np.int64), even)
    above = np.array([float(mx + Fraction(2) ** (math.floor(math.log2(mx)) - 3))])  # one ulp above max
    sat = int(qref.encode(above, fmt, overflow="saturate")[0])
    assert _oracle(sat, bias, signed, ieee, bits) == mx
    default = int(qref.encode(above, fmt)[0])
    assert _oracle(default, bias, signed, ieee, bits) == (INF if ieee else NAN)


def test_unsigned_scale_formats_clamp_negatives_and_have_no_sign_bit() -> None:
    """UE4M3 / UE5M3 are unsigned: no -0 and no negative codes; a negative input encodes to 0 (elements.md
    §2.4); their NaN is the all-ones code only (UE4M3 0x7F in 7 bits: the scale byte's bit 7 is zero)."""
    for name, nan in (("ue4m3", 0x7F), ("ue5m3", 0xFF)):
        fmt = qref.get_format(name)
        assert not fmt.signed and fmt.nan_code == nan and not fmt.has_inf
        assert int(qref.encode(np.array([-3.0]), fmt)[0]) == 0
        assert int(qref.encode(np.array([np.nan]), fmt)[0]) == nan


def test_ue5m3_against_ml_dtypes() -> None:
    """ml_dtypes 0.7 defines UE5M3 as float8_e5m3fnu: it is the oracle for every code's value and for the
    conversion of every float16 and bfloat16 value, midpoints +-1 float32 ulp and NaN/Inf, under the
    ml_dtypes@0.7 element profile (elements.md §6)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(ml_dtypes.float8_e5m3fnu)
    codes = np.arange(256, dtype=np.uint8)
    want = codes.view(dt).astype(np.float64)
    got = qref.decode(codes, "ue5m3", dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    u16 = np.arange(1 << 16, dtype=np.uint16)
    vals = want[np.isfinite(want)]
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    m32 = mids.view(np.uint32)
    near = np.concatenate([m32, m32 + 1, m32 - 1]).view(np.float32)
    for x in (u16.view(np.float16), u16.view(ml_dtypes.bfloat16), near, -near,
              np.array([np.inf, -np.inf, np.nan, 2e5, 114688, 122880, 122879], np.float32)):
        ref = x.astype(dt).view(np.uint8)
        mine = qref.encode(x, "ue5m3", profile="ml_dtypes@0.7").astype(np.uint8)
        bad = mine != ref
        assert not bad.any(), (x[bad][:8], mine[bad][:8], ref[bad][:8])
