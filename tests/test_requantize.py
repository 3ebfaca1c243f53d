"""Requantize (uniform.md §2.7): StableHLO uniform_quantize of a quantized operand.

Expected codes come from exact arithmetic written here (fractions.Fraction, each float step rounded once with
tests/test_uniform.rn), never from qref's numpy code: the spec's compose form (dequantize in f32, then quantize
in f32: stablehlo profile) and StablehloLegalizeQuantToMath's merged form (stablehlo_lowering profile). Every
code of int8, uint8 and int4 and windows of int16 / int32 codes, for scale / zero-point pairs with exact ratio
ties, inexact ratios, zero points at the storage ends and saturation in both directions.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_uniform import clamp, rint, rn

import qref
from qref.errors import QrefError
from qref.schemes.uniform_requantize import RequantizeArithmetic, requantize, requantize_arithmetic

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "int16": (-32768, 32767),
          "int32": (-(1 << 31), (1 << 31) - 1), "int8<-127:127>": (-127, 127)}


def compose_oracle(q: int, s1: float, z1: int, st1: str, s2: float, z2: int, st2: str) -> int | None:
    """[SHLO] dequantize then quantize, all in f32 (stablehlo profile); None where unspecified."""
    flo, fhi = RANGES[st1.split("<")[0]]
    d = q - z1
    if not flo <= d <= fhi:
        return None  # (q - z) leaves the storage type: implementation-defined ([SHLO] §Errors)
    dv = rn(Fraction(d))
    if dv != d:
        return None  # convert(i32 -> f32) inexact: TBD in the spec (qref: unspecified)
    v = rn(dv * rn(Fraction(s1)))
    u = rn(v / rn(Fraction(s2)))
    w = rn(u + rn(Fraction(z2)))
    lo, hi = RANGES[st2]
    if Fraction(hi) != rn(Fraction(hi)) and w >= rn(Fraction(hi)):
        return None  # the clamp bound 2^31 - 1 is no f32 (it reads 2^31): TBD at and above it (uniform.md §4.2 (6))
    return rint(clamp(w, Fraction(lo), Fraction(hi)), "even")


def merged_oracle(q: int, s1: float, z1: int, s2: float, z2: int, st2: str, same: bool = False) -> int | None:
    """StablehloLegalizeQuantToMath requantize: q * f32(s1 / s2) + f32(z2 - z1 * (s1 / s2)) in f32."""
    if same:
        return q
    m64 = rn(Fraction(s1) / Fraction(s2), "float64")
    m = rn(m64, "float32")
    c = rn(rn(Fraction(z2) - rn(Fraction(z1) * m64, "float64"), "float64"), "float32")
    t = rn(rn(rn(Fraction(q)) * m) + c)
    lo, hi = RANGES[st2]
    if st2 != "int32":
        t = clamp(t, rn(Fraction(lo)), rn(Fraction(hi)))
    n = rint(t, "even")
    return n if lo <= n <= hi else None


def _codes(storage: str) -> np.ndarray:
    lo, hi = RANGES[storage]
    if hi - lo < 256:
        return np.arange(lo, hi + 1)
    return np.unique(np.concatenate([np.arange(lo, lo + 64), np.arange(-64, 65), np.arange(hi - 63, hi + 1),
                                     np.array([(1 << 24) + 1, (1 << 24) + 3, -(1 << 25) - 3]) if hi > 1 << 30
                                     else np.array([], np.int64)]))


PAIRS = [  # (from storage, s1, z1, to storage, s2, z2)
    ("int8", 1.0, 0, "int8", 2.0, 0),  # exact ties (ratio 1/2)
    ("int8", 0.1, -1, "int8", 0.4, 0),  # ratio 1/4: compose moves ties, merged keeps them
    ("int8", 0.1, 3, "int8", 0.3, -1),
    ("int8", 0.5, -3, "int8", 0.2, 5),  # ratio 2.5: ties and saturation both ways
    ("int8", 0.7, -128, "int8", 0.35, 127),  # zero points at the ends
    ("int8", 1 / 3, -1, "int8", 0.1, 3),
    ("int8", 0.1, 3, "int8", 0.1, 4),
    ("int8", 0.25, 7, "int8", 0.75, -5),  # ratio 1/3 of exact float scales
    ("int8", 0.013, 0, "int8<-127:127>", 0.1, 0),
    ("int8", 0.25, 0, "uint8", 1.0, 128),
    ("uint8", 0.1, 127, "int8", 0.05, -3),
    ("uint8", 0.5, 0, "uint8", 1.5, 255),
    ("int8", 0.5, 0, "int4", 2.0, -1),
    ("int4", 0.1, -1, "int8", 0.03, 2),
    ("int4", 0.5, 7, "int4", 0.25, -8),
    ("int16", 0.1, -3, "int8", 1 / 3, 1),
    ("int8", 0.5, 0, "int32", 2.0**-20, 0),
    ("int32", 0.001, 0, "int8", 0.5, 0),
    ("int32", 1.0, 5, "int32", 0.5, -7),
]


@pytest.mark.parametrize("st1,s1,z1,st2,s2,z2", PAIRS)
def test_every_code_against_the_exact_forms(st1, s1, z1, st2, s2, z2):
    codes = _codes(st1)
    for profile, form in (("stablehlo", "compose"), ("stablehlo_lowering", "merged")):
        frm = qref.scheme(st1, scale=s1, zero_point=z1, profile=profile)
        to = qref.scheme(st2, scale=s2, zero_point=z2, profile=profile)
        assert requantize_arithmetic(profile).form == form
        out = requantize(codes.astype(frm.codes_dtype), frm, to)
        got = out.codes.astype(np.int64)
        lo, hi = to.storage_bounds
        for q, g, u in zip(codes.tolist(), got.tolist(), out.unspecified.tolist()):
            exp = compose_oracle(q, s1, z1, st1, s2, z2, st2) if form == "compose" else \
                merged_oracle(q, s1, z1, s2, z2, st2)
            if exp is None:
                assert u and g == clamp(0, lo, hi), (profile, q)
            else:
                assert not u and g == exp, (profile, q, g, exp)


def test_forms_differ_where_the_spec_moves_ties():
    """uniform.md §2.7: s1 = 0.1, z1 = -1, s2 = 0.4: compose and merged differ on exactly these int8 codes."""
    codes = np.arange(-128, 128)
    diff = [q for q in codes.tolist()
            if (a := compose_oracle(q, 0.1, -1, "int8", 0.4, 0, "int8")) is not None
            and a != merged_oracle(q, 0.1, -1, 0.4, 0, "int8")]
    assert diff == [-115, -43, -27, 25, 41, 113]
    frm = qref.scheme("int8", scale=0.1, zero_point=-1)
    to = qref.scheme("int8", scale=0.4)
    qa = requantize(codes.astype(np.int8), frm, to)
    a = qa.codes.astype(np.int64)
    b = requantize(codes.astype(np.int8), frm, to, RequantizeArithmetic(form="merged")).codes.astype(np.int64)
    assert sorted((codes[(a != b) & ~qa.unspecified]).tolist()) == diff
    assert codes[qa.unspecified].tolist() == [127]  # 127 - (-1) = 128 leaves i8
    assert a[25 + 128] == 7 and b[25 + 128] == 6  # the spec text's example
    top = qref.requantize(qref.QArray(codes=codes.astype(np.int8), scheme=frm), frm, to,
                          qref.RequantizeArithmetic(form="merged"))  # the public name, QArray input
    assert np.array_equal(top.codes, b)


def test_spec_example_per_axis():
    """[SHLO] uniform_quantize example: [10, 10] with {0.1:-30, 0.5:-20} -> {0.1:-20, 0.2:-30} gives [20, 45]."""
    for profile in ("stablehlo", "stablehlo_lowering"):
        frm = qref.scheme("int8", scale=[0.1, 0.5], zero_point=[-30, -20], axis=0, profile=profile)
        to = qref.scheme("int8", scale=[0.1, 0.2], zero_point=[-20, -30], axis=0, profile=profile)
        assert requantize(np.array([10, 10], np.int8), frm, to).codes.tolist() == [20, 45]


@pytest.mark.parametrize("axis_from,axis_to", [(1, 1), (None, 1), (1, None)])
def test_per_axis_every_code(axis_from, axis_to):
    p1 = ((0.1, 0.5, 1 / 3), (-30, -20, 0))
    p2 = ((0.1, 0.2, 0.25), (-20, -30, 5))
    codes = np.broadcast_to(np.arange(-128, 128)[:, None], (256, 3))
    for profile, form in (("stablehlo", "compose"), ("stablehlo_lowering", "merged")):
        def sch(p, ax, profile=profile):
            if ax is None:
                return qref.scheme("int8", scale=0.3, zero_point=2, profile=profile), (0.3,) * 3, (2,) * 3
            return qref.scheme("int8", scale=list(p[0]), zero_point=list(p[1]), axis=ax, profile=profile), *p
        frm, S1, Z1 = sch(p1, axis_from)
        to, S2, Z2 = sch(p2, axis_to)
        out = requantize(codes.astype(np.int8), frm, to)
        for j in range(3):
            for i, q in enumerate(range(-128, 128)):
                exp = compose_oracle(q, S1[j], Z1[j], "int8", S2[j], Z2[j], "int8") if form == "compose" else \
                    merged_oracle(q, S1[j], Z1[j], S2[j], Z2[j], "int8")
                if exp is None:
                    assert out.unspecified[i, j]
                else:
                    assert not out.unspecified[i, j] and int(out.codes[i, j]) == exp, (profile, q, j)


def test_identical_types_copy_in_the_merged_form():
    """int32 codes above 2^24 are not f32 values: the merged form would round them, the same-type shortcut keeps
    them (StablehloLegalizeQuantToMath: 'Skip requantization when input and result have the same type')."""
    codes = np.array([(1 << 24) + 1, -(1 << 30) - 1, 5], np.int32)
    sch = qref.scheme("int32", scale=0.5, zero_point=0, profile="stablehlo_lowering")
    assert requantize(codes, sch, sch).codes.tolist() == codes.tolist()
    other = qref.scheme("int32", scale=0.5, zero_point=1, profile="stablehlo_lowering")
    got = requantize(codes, sch, other).codes.tolist()
    assert got == [merged_oracle(int(q), 0.5, 0, 0.5, 1, "int32") for q in codes]
    assert got[0] == 1 << 24  # f32(2^24 + 1) = 2^24, and 2^24 + 1 rounds back to 2^24 (even)


def test_unspecified_input_stays_unspecified():
    frm = qref.scheme("int8", scale=0.5)
    to = qref.scheme("int8", scale=1.0)
    q = qref.QArray(codes=np.array([4, 6], np.int8), scheme=frm, unspecified=np.array([True, False]))
    out = requantize(q, frm, to)
    assert out.unspecified.tolist() == [True, False] and out.codes.tolist() == [0, 3]


def test_constraints():
    a = qref.scheme("int8", scale=0.5)
    with pytest.raises(QrefError, match="C2"):
        requantize(np.zeros(2, np.int8), a, qref.scheme("int8", scale=0.5, expressed="float16"))
    with pytest.raises(QrefError, match="C1"):
        requantize(np.zeros(2, np.int8), a, qref.scheme("float8_e4m3fn", scale=0.5, profile="onnx"))
    pa0 = qref.scheme("int8", scale=[0.1, 0.2], zero_point=[0, 0], axis=0, profile="stablehlo_lowering")
    pa1 = qref.scheme("int8", scale=[0.1, 0.2], zero_point=[0, 0], axis=1, profile="stablehlo_lowering")
    with pytest.raises(QrefError, match="C4"):
        requantize(np.zeros((2, 2), np.int8), pa0, pa1)
    # the spec form takes any pair of axes
    sp0 = qref.scheme("int8", scale=[0.1, 0.2], zero_point=[0, 0], axis=0)
    sp1 = qref.scheme("int8", scale=[0.1, 0.2], zero_point=[0, 0], axis=1)
    assert requantize(np.array([[10, 10], [10, 10]], np.int8), sp0, sp1).codes.tolist() == [[10, 5], [20, 10]]
    with pytest.raises(QrefError, match="outside"):
        requantize(np.array([200], np.int16), a, a)
    with pytest.raises(QrefError):
        requantize(np.zeros(3, np.int8), pa0, pa0)  # 3 elements on an axis with 2 scales (C3)
    with pytest.raises(QrefError):
        RequantizeArithmetic(form="fused")


def test_suite_cases_match_the_oracles():
    """The committed uniform_requantize cases against the exact forms (per tensor and per axis)."""
    from qref.conformance.suite import load_suite
    from qref.harness.families.uniform import scheme_of, to_scheme_of

    suite = load_suite()
    cases = [c for c in suite.select(family="uniform") if c.operation == "uniform_requantize"]
    assert len(cases) >= 30
    checked = 0
    for case in cases:
        frm, to = scheme_of(case), to_scheme_of(case)
        st1, st2 = case.scheme["storage"], case.params["to"]["storage"]
        shape = case.inputs["codes"].shape
        S1, Z1 = (np.broadcast_to(a, shape).reshape(-1) for a in frm.expand(shape))
        S2, Z2 = (np.broadcast_to(a, shape).reshape(-1) for a in to.expand(shape))
        b1, b2 = frm.storage.bits, to.storage.bits
        raw = case.inputs["codes"].reshape(-1).astype(np.int64)
        vals = np.where(frm.storage.signed & (raw >= 1 << (b1 - 1)), raw - (1 << b1), raw)
        exp = case.expected["result"].reshape(-1).astype(np.int64)
        mask = case.unspecified.get("result", np.zeros(shape, bool)).reshape(-1)
        same = (frm.storage.name, frm.scales, frm.zero_points, frm.axis) == \
            (to.storage.name, to.scales, to.zero_points, to.axis)
        for i, q in enumerate(vals.tolist()):
            s1, z1, s2, z2 = float(S1[i]), int(Z1[i]), float(S2[i]), int(Z2[i])
            o = [compose_oracle(q, s1, z1, st1, s2, z2, st2) if p == "stablehlo" else
                 merged_oracle(q, s1, z1, s2, z2, st2, same) for p in case.profiles]
            assert len(set(o)) == 1, (case.id, i)
            if o[0] is None:
                assert mask[i], (case.id, i)
            else:
                assert not mask[i] and exp[i] == (o[0] & ((1 << b2) - 1)), (case.id, i, exp[i], o[0])
            checked += 1
    assert checked > 9000


def test_stablehlo_interpreter_runs_the_requantize_cases():
    """The StableHLO reference interpreter (StablehloLegalizeQuantToMath's requantize) on every committed
    requantize case claimed by stablehlo_lowering, except u8 storage (signless: uniform.md §4.2 (10)) and per axis
    off the last axis (the interpreter fails: conformance/xfails/stablehlo.txt): bit exact on every element."""
    pytest.importorskip("torch_mlir._mlir_libs._stablehlo", reason="the StableHLO interpreter (torch-mlir)")
    from qref.conformance.suite import load_suite
    from qref.harness.adapters._common import codes_as
    from qref.harness.adapters.stablehlo import evaluate, uniform_module

    cases = [c for c in load_suite().select(family="uniform") if c.operation == "uniform_requantize"
             and "stablehlo_lowering" in c.profiles and "uint8" not in c.id and "axis0-axis0" not in c.id]
    assert len(cases) >= 15
    n = 0
    for case in cases:
        (y,) = evaluate(uniform_module(case))
        got = codes_as(case, "result", y)
        assert (got == case.expected["result"]).all(), case.id
        n += got.size
    assert n > 4000
