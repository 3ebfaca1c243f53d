"""The committed element cases, recomputed by paths independent of the generator (docs/vectors.md §6):

- ml_dtypes astype (the real library) for every case whose expected codes claim to hold under the ml_dtypes
  profile, on every element of the case (float32, float16, bfloat16 and float64 sources);
- the exact Fraction oracle (tests/oracle.py, built from the manifest's format record, not from qref) on a
  sample of every encode / quantize / decode case, under the case's policy and under every ``equivalent``
  override the case claims;
- a full-oracle sweep of every element of every case (slow).
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import oracle
import pytest

import qref
from qref.conformance import Case, load_suite

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")

LAYOUT = {"float64": (11, 52), "float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7)}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def to_storage(a: np.ndarray) -> np.ndarray:
    """Bit patterns of any 1-, 2-, 4- or 8-byte array (ml_dtypes types included)."""
    return np.ascontiguousarray(a).view(UINT[a.dtype.itemsize * 8])


@pytest.fixture(scope="module")
def suite():
    return load_suite(COMMITTED)


@pytest.fixture(scope="module")
def cases(suite):
    return [c for c in suite if c.family == "elements"]


# ---- independent helpers ----------------------------------------------------------------------------------------
def ieee_value(bits: int, dtype: str, input_subnormals: str = "keep"):
    """Exact meaning of an IEEE bit pattern: Fraction, '-0', signed float nan, or +-inf."""
    eb, mb = LAYOUT[dtype]
    sign = bits >> (eb + mb)
    e = (bits >> mb) & ((1 << eb) - 1)
    f = bits & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    if e == (1 << eb) - 1:
        if f:
            return math.copysign(math.nan, -1.0 if sign else 1.0)
        return -math.inf if sign else math.inf
    if e == 0 and (f == 0 or input_subnormals == "zero"):
        return "-0" if sign else Fraction(0)
    v = Fraction(f if e == 0 else (1 << mb) | f) * Fraction(2) ** ((1 if e == 0 else e) - bias - mb)
    return -v if sign else v


def float_bits(v, dtype: str) -> int:
    """Bits of a code's meaning (from oracle.code_meaning) in an IEEE dtype: nearest even, quiet NaN keeping
    ``v``'s sign (passed as ('nan', sign))."""
    eb, mb = LAYOUT[dtype]
    width = 1 + eb + mb
    if isinstance(v, tuple) and v[0] == "nan":
        return ((1 if v[1] else 0) << (width - 1)) | (((1 << eb) - 1) << mb) | (1 << (mb - 1))
    if isinstance(v, tuple):
        x = math.inf if v[1] > 0 else -math.inf
    elif v == "-0":
        x = -0.0
    else:
        x = oracle.to_float64(v)
    arr = np.array([x], dtype=np.float64)
    with np.errstate(over="ignore"):
        y = arr.astype(np.float64 if dtype == "float64" else (ml_dtypes.bfloat16 if dtype == "bfloat16"
                                                               else np.dtype(dtype)))
    return int(y.view(UINT[width])[0])


@cache
def grid_of(record: tuple) -> oracle.Grid:
    rec = dict(record)
    return oracle.Grid(oracle.Spec(rec["exponent_bits"], rec["mantissa_bits"], rec["bias"], rec["signed"],
                                   rec["nan"], rec["inf"], rec["subnormals"], rec["zero"]))


def _record_key(fmt) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in dict(fmt).items()))


def int_code(x, fmt, pol, rbits) -> int:
    """Integer storage code (elements.md §2.9): round, then saturate to [min, max], wrap modulo 2^bits, or give 0
    out of range (overflow="zero"); int_cast="via_int32_x86[_checked]" is the x86-64 C cast of §2.6 (truncate;
    NaN, Inf, |x| >= 2^31 -> 0x80000000; checked: also 2^31 - 1 < x < 2^31)."""
    lo, hi, bits = fmt["min"], fmt["max"], fmt["bits"]
    cast = pol.get("int_cast", "direct")
    c_cast = cast != "direct"
    mode = pol["rounding"]
    wrap = pol["overflow"] == "wrap"
    zero = pol["overflow"] == "zero"
    if c_cast and wrap and (isinstance(x, float) or (x != "-0" and abs(x) >= 2**31)):
        return 0x80000000 % (1 << bits)
    if cast == "via_int32_x86_checked" and wrap and x != "-0" and 2**31 - 1 < x < 2**31:
        return 0x80000000 % (1 << bits)
    if isinstance(x, float):  # NaN or Inf
        v = 0 if (math.isnan(x) or wrap or zero) else (lo if x < 0 else hi)
        return v % (1 << bits)
    if x == "-0" or x == 0:
        return max(lo, min(0, hi)) % (1 << bits)
    if mode.startswith("stochastic"):
        a = abs(x)
        fl = math.floor(a)
        eta = a - fl
        n = pol["stochastic_bits"]
        up = {"stochastic_a": math.floor(eta * 2**n) + rbits >= 2**n,
              "stochastic_b": math.floor(eta * 2 ** (n + 1)) + 2 * rbits + 1 >= 2 ** (n + 1),
              "stochastic_c": oracle._rne(eta * 2**n) + rbits >= 2**n}[mode] and eta > 0
        v = (fl + up) * (-1 if x < 0 else 1)
    else:
        big = 1 << 200
        v = oracle.oracle_int(x, -big, big, mode)
    if zero and not lo <= v <= hi:
        v = 0
    if not wrap:
        v = min(max(v, lo), hi)
    return v % (1 << bits)


def oracle_codes(case: Case, pol: dict, idx: np.ndarray) -> list[int]:
    """Codes of the sampled elements of an encode / quantize case under ``pol``, from the oracle."""
    fmt = case.format
    x = case.inputs["x"]
    src = x.dtype.name
    bits = to_storage(x).reshape(-1)
    rb = case.inputs.get("random_bits")
    out = []
    for i in idx:
        b = int(bits[i])
        s = src
        if pol["source"] == "via_float32" and src == "float64" and fmt["kind"] != "int":
            with np.errstate(over="ignore"):  # float64 -> float32 by numpy: nearest even, overflow to Inf
                b = int(np.array([b], np.uint64).view(np.float64).astype(np.float32).view(np.uint32)[0])
            s = "float32"
        xv = ieee_value(b, s, pol["input_subnormals"])
        r = None if rb is None else int(rb.reshape(-1)[i])
        if fmt["kind"] == "int":
            out.append(int_code(xv, fmt, pol, r))
        else:
            out.append(oracle.oracle_encode(grid_of(_record_key(fmt)), xv, pol["rounding"], pol["overflow"],
                                            pol["nan"], pol["subnormals"], r, pol["stochastic_bits"],
                                            unsigned_negative=pol.get("unsigned_negative", "zero")))
    return out


def meaning(fmt, code: int):
    if fmt["kind"] == "int":
        v = code - (1 << fmt["bits"]) if fmt["signed"] and code >> (fmt["bits"] - 1) else code
        return Fraction(v)
    g = grid_of(_record_key(fmt))
    v = oracle.code_meaning(g.s, code)
    if v == oracle.NAN:
        return ("nan", bool(fmt["signed"] and code >> (fmt["bits"] - 1)))
    return v


def sample(case: Case, k: int) -> np.ndarray:
    n = case.size
    if n <= k:
        return np.arange(n)
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    return np.unique(np.concatenate([np.linspace(0, n - 1, k // 2).astype(np.int64),
                                     rng.choice(n, k - k // 2, replace=False)]))


def check_case(case: Case, k: int | None, k_equivalent: int | None) -> list[str]:
    """Mismatch lines (case, element, input, expected, oracle) for one case."""
    bad: list[str] = []
    if case.operation == "decode":
        idx = np.arange(case.size) if k is None else sample(case, k)
        codes = case.inputs["codes"].reshape(-1)
        y = to_storage(case.expected["y"]).reshape(-1)
        dt = case.params["dtype"]
        for i in idx:
            want = float_bits(meaning(case.format, int(codes[i])), dt)
            if int(y[i]) != want:
                bad.append(f"{case.id}[{i}]: code 0x{int(codes[i]):X}: suite 0x{int(y[i]):X}, oracle 0x{want:X}")
        return bad
    policies = [dict(case.policy)] + [{**case.policy, **e} for e in case.equivalent]
    for j, pol in enumerate(policies):
        kk = k if j == 0 else k_equivalent
        idx = np.arange(case.size) if kk is None else sample(case, kk)
        got = oracle_codes(case, pol, idx)
        xb = to_storage(case.inputs["x"]).reshape(-1)
        if case.operation == "encode":
            exp = case.expected["codes"].reshape(-1)
            want = got
        else:  # quantize: the decoded value in the source dtype
            exp = to_storage(case.expected["y"]).reshape(-1)
            want = [float_bits(meaning(case.format, c), case.inputs["x"].dtype.name) for c in got]
        for i, w in zip(idx, want):
            if int(exp[i]) != w:
                over = {kk2: v for kk2, v in pol.items() if case.policy[kk2] != v}
                bad.append(f"{case.id}{' with ' + str(over) if over else ''}[{i}]: x=0x{int(xb[i]):X}: "
                           f"suite 0x{int(exp[i]):X}, oracle 0x{w:X}")
    return bad


# ---- tests --------------------------------------------------------------------------------------------------------
def test_coverage(cases):
    """Every format x rounding x overflow of the issue is present, with each category."""
    encode = [c for c in cases if c.operation == "encode"]
    fmts = {c.format["name"] for c in encode}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                 "float8_e4m3", "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu",
                 "float16", "bfloat16", "binary8p3se", "int8", "uint4"):
        assert name in fmts
        got = {(p["rounding"], p["overflow"]) for c in encode if c.format["name"] == name
               for p in [dict(c.policy)] + [{**c.policy, **e} for e in c.equivalent]}
        for r in ("nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "toward_max_magnitude",
                  "up", "down", "odd"):
            assert (r, "saturate") in got, (name, r)
    cats = {c.id.rsplit("/", 1)[1] for c in encode}
    assert {"values", "ties", "near_values", "near_ties", "overflow", "subnormal", "special", "random",
            "random_bits", "exhaustive", "grid_n8", "random_n8", "subnormal_flush", "special_nan_max"} <= cats
    decode = {c.format["name"] for c in cases if c.operation == "decode"}
    assert fmts <= decode
    tags = {t for c in cases for t in c.tags}
    assert {"tie", "boundary", "subnormal", "overflow", "special", "random", "exhaustive", "stochastic"} <= tags
    for c in cases:
        assert c.spec and all(s.startswith("elements.md §") for s in c.spec)
        if c.operation != "decode":
            assert set(c.policy) - {"int_cast", "unsigned_negative"} == {
                "rounding", "overflow", "nan", "subnormals", "input_subnormals", "source", "stochastic_bits"}
            assert c.policy["overflow"] and c.policy["nan"]


def test_ml_dtypes_reproduces_every_claimed_case(cases):
    """ml_dtypes astype on every element of every case whose codes claim the installed ml_dtypes' record."""
    record = qref.get_profile("ml_dtypes").key
    checked = elements = 0
    failures = []
    payload_only: dict[str, int] = {}
    for c in cases:
        name = c.format["name"]
        mlt = getattr(ml_dtypes, name, None) if name not in ("float16", "bfloat16") else (
            np.float16 if name == "float16" else ml_dtypes.bfloat16)
        if mlt is None or c.format["kind"] != "float":
            continue
        if c.operation == "decode":
            codes = c.inputs["codes"]
            dt = np.dtype(ml_dtypes.bfloat16 if c.params["dtype"] == "bfloat16" else c.params["dtype"])
            with np.errstate(over="ignore", invalid="ignore"):  # ml_dtypes 0.7 warns on values beyond float16
                got = codes.view(mlt).astype(dt)
            want = c.expected["y"]
        elif c.operation == "encode" and record in c.profiles:
            x = c.inputs["x"]
            with np.errstate(over="ignore", invalid="ignore"):
                got = x.astype(mlt)
            want = c.expected["codes"].view(mlt)
        else:
            continue
        g, w = to_storage(got).reshape(-1), to_storage(want).reshape(-1)
        checked += 1
        elements += g.size
        diff = g != w
        if diff.any() and name in ("float16", "bfloat16"):
            # numpy / ml_dtypes keep NaN payloads (and signalling bits) between IEEE types; the spec gives the
            # canonical quiet NaN of the sign (elements.md §2.7, §4): such elements differ in payload only
            gf, wf = got.reshape(-1).astype(np.float32), want.reshape(-1).astype(np.float32)
            same_nan = np.isnan(gf) & np.isnan(wf) & (np.signbit(gf) == np.signbit(wf))
            payload_only[c.id] = int((diff & same_nan).sum())
            diff &= ~same_nan
        if diff.any():
            i = int(np.flatnonzero(diff)[0])
            failures.append(f"{c.id}: {int(diff.sum())} mismatches, first at {i}: ml_dtypes 0x{int(g[i]):X} "
                            f"suite 0x{int(w[i]):X}")
    assert not failures, "\n".join(failures[:20])
    assert checked > 200 and elements > 1_500_000, (checked, elements)
    assert 0 < sum(payload_only.values()) < 5000, payload_only


def test_oracle_on_a_sample_of_every_case(cases):
    """The Fraction oracle on a sample of every case, under its policy and each claimed equivalent policy."""
    failures: list[str] = []
    for c in cases:
        failures += check_case(c, 24, 6)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:30])


@pytest.mark.slow
def test_oracle_on_every_element_of_every_small_case(cases):
    """Every element of every non-exhaustive case under its own policy (the equivalents on a sample)."""
    failures: list[str] = []
    for c in cases:
        if "exhaustive" in c.tags and c.operation == "encode":
            continue
        failures += check_case(c, None if c.size <= 4096 else 512, 16)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:30])


def test_cited_spec_sections_exist(cases):
    page = COMMITTED.parents[1] / "docs" / "spec" / "elements.md"
    if not page.exists():
        pytest.skip("docs/spec/elements.md is not in this checkout")
    import re

    sections = set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", page.read_text(encoding="utf-8"), flags=re.M))
    cited = {s.split("§", 1)[1] for c in cases for s in c.spec}
    assert cited and cited <= sections, sorted(cited - sections)


def test_oracle_helpers_are_sane():
    assert ieee_value(0x3F800000, "float32") == 1
    assert ieee_value(0x00000001, "float32") == Fraction(1, 2**149)
    assert ieee_value(0x00000001, "float32", "zero") == 0 and ieee_value(0x80000001, "float32", "zero") == "-0"
    assert float_bits(("nan", True), "float32") == 0xFFC00000 and float_bits(Fraction(3, 2), "bfloat16") == 0x3FC0
    assert float_bits(Fraction(2) ** 127, "float16") == 0x7C00 and float_bits("-0", "float64") == 1 << 63
