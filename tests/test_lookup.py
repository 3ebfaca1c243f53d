"""Lookup schemes against the exact oracle (spec: docs/spec/lut.md §3-7). No torch needed."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_lookup_oracle import (
    blocks_with_unit_absmax,
    code_argmin,
    code_decimal_midpoints,
    code_exact,
    code_f32_midpoints,
    frac,
    rnd,
    scaled,
    tie_points,
    values_of,
)

import qref
import qref.testing.strategies as qs
from qref.errors import QrefError, UnknownNameError
from qref.schemes.lookup import DoubleQuant, LookupScheme, lookup_scheme_from_table
from qref.schemes.lookup.decision import table_encode
from qref.tables import AF4, DYNAMIC8, FP4_BNB, NF4, NF4_TORCHAO, Table

BF16 = ml_dtypes.bfloat16


def u32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


# ---- the schemes and their tables ----------------------------------------------------------------------------
def test_named_schemes_expose_their_tables() -> None:
    for name, table in (("nf4", NF4), ("af4", AF4), ("fp4_bnb", FP4_BNB), ("dynamic8", DYNAMIC8)):
        s = qref.scheme(name, block_size=64, profile="bitsandbytes")
        assert isinstance(s, LookupScheme) and s.table is table and s.table.values.dtype == np.float32
    assert qref.scheme("nf4", profile="torchao").table is NF4_TORCHAO
    assert qref.scheme("dynamic8", profile="bitsandbytes").block_size == 4096
    assert qref.scheme("nf4").profile == "spec" and qref.scheme("nf4").block_size == 64
    assert qref.scheme("lut", table="af4").table is AF4
    assert qref.scheme("lut", table=AF4).table is AF4
    t = qref.scheme("lut", table=np.array([-1, -0.5, 0.5, 1], np.float32)).table
    assert t.storage == "uint2" and t.values.tolist() == [-1, -0.5, 0.5, 1]


def test_scheme_errors_are_clear() -> None:
    with pytest.raises(QrefError, match="needs table="):
        qref.scheme("lut")
    with pytest.raises(QrefError, match="has its own table"):
        qref.scheme("nf4", table="af4")
    with pytest.raises(UnknownNameError, match="tie"):
        qref.scheme("nf4", tye="lower_value")
    with pytest.raises(UnknownNameError, match="bitsandbytes"):
        qref.scheme("nf4", profile="bitsandbites")
    with pytest.raises(UnknownNameError, match="lower_value"):
        qref.scheme("nf4", tie="lower")
    with pytest.raises(QrefError, match="block_size"):
        qref.scheme("nf4", block_size=0)
    with pytest.raises(QrefError, match="no double quantization"):
        qref.scheme("nf4", profile="qwix", double_quant=True)
    with pytest.raises(QrefError, match="float64"):
        qref.scheme("nf4", profile="bitsandbytes").quantize(np.zeros(4))
    with pytest.raises(QrefError, match="multiple of 16384"):
        qref.scheme("nf4", profile="torchao").quantize(np.zeros(64, np.float32))
    with pytest.raises(QrefError, match="float input"):
        qref.scheme("nf4").quantize(np.zeros(4, np.int32))
    with pytest.raises(QrefError, match="sorted"):
        qref.scheme("lut", table="af4", rule="grid65536")
    with pytest.raises(QrefError, match="scale_offset"):
        qref.scheme("nf4").quantize(np.zeros(4, np.float32), axis=0)


def test_spec_round_trip_and_pad_code() -> None:
    for s in (qref.scheme("nf4", profile="bitsandbytes", double_quant=True), qref.scheme("nf4", profile="torchao"),
              qref.scheme("fp4_bnb", profile="qwix"), lookup_scheme_from_table([-1, 0, 1], "int8<-1:1>")):
        assert qref.scheme_from_spec(s.to_spec()) == s
    assert qref.scheme("nf4", profile="bitsandbytes").pad_code == 7
    assert qref.scheme("fp4_bnb", profile="bitsandbytes").pad_code == 0


# ---- decisions on tie-heavy inputs against the oracle ----------------------------------------------------
PROFILE_RULES = {
    "spec": lambda s, vals: code_exact(s, vals, "even_code"),
    "bitsandbytes": lambda s, vals: code_f32_midpoints(s, vals, "lower_value"),
    "openvino": lambda s, vals: code_decimal_midpoints(s, vals, "lower_value"),
    "qwix": lambda s, vals: code_argmin(s, vals, "float32"),
}


@pytest.mark.parametrize("profile", sorted(PROFILE_RULES))
@pytest.mark.parametrize("table", ["nf4", "af4", "fp4_bnb"])
def test_profiles_on_every_midpoint_and_neighbour(profile: str, table: str) -> None:
    sch = qref.scheme(table, block_size=64, profile=profile, axis=None)
    pts = tie_points(sch.table)
    x = blocks_with_unit_absmax(pts, 64)
    q = sch.quantize(x)
    vals = values_of(sch.table.values)
    expected = [PROFILE_RULES[profile](frac(v), vals) for v in x]
    assert q.codes.dtype == np.uint8 and q.codes.tolist() == expected
    assert (u32(q.scales) == u32(np.ones(x.size // 64))).all()
    assert not q.unspecified.any()


@pytest.mark.parametrize("tie", ["lower_value", "upper_value", "lower_code", "even_code"])
@pytest.mark.parametrize("midpoints", ["exact", "float32"])
@pytest.mark.parametrize("table", [NF4, AF4, FP4_BNB])
def test_tie_rules_against_oracle(table: Table, midpoints: str, tie: str) -> None:
    pts = tie_points(table)
    got = table_encode(pts, table, rule="nearest", midpoints=midpoints, tie=tie)
    vals = values_of(table.values)
    if midpoints == "exact":
        expected = [code_exact(frac(v), vals, tie) for v in pts]
    else:
        expected = [code_f32_midpoints(frac(v), vals, tie) for v in pts]
    assert got.tolist() == expected


def test_fp4_bnb_zero_and_ties_go_by_value_not_code() -> None:
    t = FP4_BNB
    z = np.array([0.0, -0.0], np.float32)
    assert table_encode(z, t, midpoints="float32", tie="lower_value").tolist() == [0, 0]  # +0 (code 0) first
    assert table_encode(z, t, midpoints="float32", tie="upper_value").tolist() == [8, 8]
    seven_twelfths = np.array([float(rnd((frac(t.values[5]) + frac(t.values[2])) / 2))], np.float32)
    assert table_encode(seven_twelfths, t, midpoints="float32", tie="lower_value").tolist() == [5]  # 1/2 < 2/3
    assert table_encode(seven_twelfths, t, midpoints="float32", tie="lower_code").tolist() == [2]


def test_argmin_rule_with_rounded_distances() -> None:
    pts = tie_points(NF4_TORCHAO)
    vals = values_of(NF4_TORCHAO.values)
    got = table_encode(pts, NF4_TORCHAO, rule="argmin", distance_dtype="float32")
    assert got.tolist() == [code_argmin(frac(v), vals, "float32") for v in pts]
    pb = tie_points(NF4_TORCHAO, "bfloat16")
    tb = NF4_TORCHAO.values.astype(BF16).astype(np.float32)
    got = table_encode(pb.astype(BF16), NF4_TORCHAO, rule="argmin", distance_dtype="bfloat16", entries=tb)
    assert got.tolist() == [code_argmin(frac(v), values_of(tb), "bfloat16") for v in pb]


def test_torchao_profile_float32_and_bfloat16_on_ties() -> None:
    sch = qref.scheme("nf4", profile="torchao", double_quant=False)
    for dt in ("float32", "bfloat16"):
        pts = tie_points(NF4_TORCHAO, dt)
        x = blocks_with_unit_absmax(pts, 64)
        xin = x.astype(BF16) if dt == "bfloat16" else x
        q = sch.quantize(xin)
        vals = [rnd(v, dt) for v in values_of(NF4_TORCHAO.values)]
        assert q.codes.tolist() == [code_argmin(frac(v), vals, dt) for v in x]


def test_reciprocal_and_division_scaling_against_oracle() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64 * 20 + 37) * rng.uniform(1e-3, 1e3)).astype(np.float32)
    vals = values_of(NF4.values)
    for profile, how in (("bitsandbytes", "reciprocal"), ("spec", "divide")):
        q = qref.scheme("nf4", block_size=64, profile=profile).quantize(x)
        exp_codes, exp_scales = [], []
        for b in range(-(-x.size // 64)):
            blk = [frac(v) for v in x[b * 64:(b + 1) * 64]]
            a = max(abs(v) for v in blk)
            exp_scales.append(float(a))
            h = "divide" if (profile == "bitsandbytes" and len(blk) < 64) else how  # bnb: partial divides
            for v in blk:
                s = max(Fraction(-1), min(Fraction(1), scaled(v, a, h)))
                exp_codes.append(PROFILE_RULES[profile](s, vals))
        assert q.codes.tolist() == exp_codes
        assert (u32(q.scales) == u32(np.array(exp_scales))).all()
        deq = q.dequantize()
        exp = [rnd(frac(NF4.values[c]) * frac(exp_scales[i // 64])) for i, c in enumerate(exp_codes)]
        assert (u32(deq) == u32(np.array([float(e) for e in exp]))).all()
        deq16 = q.dequantize("bfloat16")
        assert deq16.dtype == BF16
        assert (deq16.astype(np.float32) == np.array([float(rnd(e, "bfloat16")) for e in exp], np.float32)).all()


# ---- edge cases per profile (lut.md §3.4 table) ------------------------------------------------------------
def edge_input() -> np.ndarray:
    """Blocks of 64: [0] zeros, [1] a NaN, [2] +inf and -inf among finite values, [3] subnormal values only,
    [4] -0 and +0 with 0.5, [5] a partial block of 10 zeros."""
    x = np.zeros(64 * 5 + 10, np.float32)
    x[64:128] = 0.25
    x[64 + 3] = np.nan
    x[128:192] = -0.5
    x[128 + 5], x[128 + 6] = np.inf, -np.inf
    x[192:256] = np.float32(1e-40)
    x[256 + 1], x[256 + 2] = -0.0, 0.5
    return x


EDGE = {
    # profile: (zero-block scale, zero-block code, NaN-block code, inf-position code, code of the other
    #           elements of the inf block, subnormal-block code, partial zero block scale)
    "spec": (0.0, 7, None, None, 7, 15, 0.0),
    "bitsandbytes": (0.0, 7, 15, 15, 7, 7, float(np.float32(1e-38))),
    "openvino": (2.0**-23, 7, 0, 0, 7, 7, 2.0**-23),  # NNCF: a = max(absmax, 2^-23), stored in float16
    "torchao": (0.0, 0, 0, 0, 7, 15, 0.0),
    "qwix": (1.0, 7, 0, 0, 7, 7, 1.0),
}


@pytest.mark.parametrize("profile", sorted(EDGE))
def test_edge_blocks(profile: str) -> None:
    zs, zc, nanc, infc, infother, subc, pzs = EDGE[profile]
    table = "nf4"
    kw = {"double_quant": False} if profile == "torchao" else {}
    sch = qref.scheme(table, block_size=64, profile=profile, axis=None, numel_multiple=1, **kw)
    x = edge_input()
    q = sch.quantize(x)
    c, sc = q.codes, q.scales
    assert sc[0] == zs and (c[:64] == zc).all()
    assert np.isnan(sc[1])
    if nanc is None:
        assert q.unspecified[64:128].all()
    else:
        assert (c[64:128] == nanc).all() and not q.unspecified[64:128].any()
    assert np.isposinf(sc[2])
    if infc is None:
        assert q.unspecified[128 + 5] and q.unspecified[128 + 6]
    else:
        assert c[128 + 5] == infc and c[128 + 6] == infc
    others = np.delete(c[128:192], [5, 6])
    assert (others == infother).all()
    assert (c[192:256] == subc).all()
    assert c[256 + 1] == 7 and c[256 + 2] == 15
    assert sc[5] == np.float32(pzs) and (c[320:] == zc).all()
    assert q.unspecified.sum() == (0 if profile != "spec" else 66)


def test_dynamic8_bitsandbytes_zero_block_is_code_zero() -> None:
    q = qref.scheme("dynamic8", profile="bitsandbytes", block_size=64).quantize(np.zeros(100, np.float32))
    assert (q.codes == 0).all() and (q.scales == 0).all()
    d = q.dequantize()
    assert (d == 0).all()


def test_nan_error_rule() -> None:
    sch = qref.scheme("nf4", nan="error")
    with pytest.raises(QrefError, match="NaN"):
        sch.quantize(np.array([1.0, np.nan], np.float32))


# ---- blocks along an axis, partial blocks, static scales ------------------------------------------------------
def test_axis_blocks_match_per_row_flat_blocks() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5, 100)).astype(np.float32)
    sch = qref.scheme("nf4", block_size=32, axis=1)
    q = sch.quantize(x)
    assert q.codes.shape == x.shape and q.scales.shape == (3, 1, 100)
    flat = qref.scheme("nf4", block_size=32)
    for i in range(3):
        for k in range(100):
            col = x[i, :, k]
            r = flat.quantize(col)
            assert q.codes[i, :, k].tolist() == r.codes.tolist()
            assert u32(q.scales[i, :, k]).tolist() == u32(r.scales).tolist()
    assert (u32(q.dequantize()) == u32(np.stack([flat.quantize(x[i, :, k]).dequantize()
                                                  for i in range(3) for k in range(100)]).reshape(3, 100, 5)
                                          .transpose(0, 2, 1))).all()
    q2 = qref.scheme("nf4", block_size=32, axis=-1).quantize(x)
    assert q2.scales.shape == (3, 5, 4)


def test_static_scheme_is_mlir_quantile_semantics() -> None:
    # !quant.uniform<!quant.quantile<ui4:f16, {nf4}>:f32, 0.5:3> (lut.md §7)
    sch = lookup_scheme_from_table(NF4.values.astype(np.float64), "uint4", quantile_type="float16", scales=0.5,
                                   zero_points=3)
    entries = values_of(NF4.values.astype(np.float16).astype(np.float32))
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(500) * 2).astype(np.float32)
    x[:10] = [(float(e) - 3) * 0.5 for e in entries[:10]]
    q = sch.quantize(x)
    exp = [code_exact(rnd(rnd(frac(v) / Fraction(1, 2)) + 3), entries, "even_code") for v in x]
    assert q.codes.tolist() == exp
    d = q.dequantize()
    assert (u32(d) == u32(np.array([float(rnd((entries[c] - 3) * Fraction(1, 2))) for c in exp]))).all()


def test_static_per_axis_and_signed_storage() -> None:
    vals = [-2.0, -1.875, -1.75, -1.625, -1.5, -1.375, -1.25, -1.125, -1.0, -0.875, -0.75, -0.625, -0.5, -0.375,
            -0.25, -0.125]
    sch = lookup_scheme_from_table(vals, "int4", scales=(1.0, 2.0), axis=1)
    assert sch.table.storage_min == -8
    x = np.array([[-2.0, -4.0], [-0.1, -0.4], [5.0, -0.2]], np.float32)
    q = sch.quantize(x)
    assert q.codes.tolist() == [[0, 0], [15, 14], [15, 15]]  # index = storage value + 8
    assert q.dequantize().tolist() == [[-2.0, -4.0], [-0.125, -0.5], [-0.125, -0.25]]
    with pytest.raises(QrefError, match="static scales"):
        sch.quantize(np.zeros((2, 3), np.float32))
    with pytest.raises(QrefError, match="entries but storage"):
        lookup_scheme_from_table([0.0, 1.0], "uint4")
    three = lookup_scheme_from_table([-1.0, 0.0, 1.0], "int8<-1:1>")
    codes = three.quantize(np.array([-0.6, 0.4, 0.5, 2.0], np.float32)).codes
    assert codes.tolist() == [0, 1, 2, 2]  # 0.5: a tie, to the even code


# ---- double quantization ---------------------------------------------------------------------------------
def test_double_quant_exact_mean_and_reconstruction() -> None:
    rng = np.random.default_rng(12)
    x = rng.standard_normal(64 * 600).astype(np.float32)
    sch = qref.scheme("nf4", profile="bitsandbytes", double_quant=True)
    q = sch.quantize(x)
    dq = q.meta["double_quant"]
    a = [frac(v) for v in q.scales]
    assert frac(dq.offset) == rnd(sum(a) / len(a))
    assert dq.codes.dtype == np.uint8 and dq.codes.size == 600 and dq.scales.shape == (3,)
    u = [rnd(v - frac(dq.offset)) for v in a]
    for b in range(3):
        assert frac(dq.scales[b]) == max(abs(v) for v in u[b * 256:(b + 1) * 256])
    rec = dq.dequantize()
    exp = [rnd(rnd(frac(DYNAMIC8.values[c]) * frac(dq.scales[i // 256])) + frac(dq.offset))
           for i, c in enumerate(dq.codes)]
    assert (u32(rec) == u32(np.array([float(e) for e in exp]))).all()
    deq = q.dequantize()
    expd = [rnd(frac(NF4.values[c]) * frac(rec[i // 64])) for i, c in enumerate(q.codes)]
    assert (u32(deq) == u32(np.array([float(e) for e in expd]))).all()
    q2 = sch.quantize(x, scale_offset=0.5)
    assert q2.meta["double_quant"].offset == np.float32(0.5)


def test_torchao_int8_double_quant_oracle() -> None:
    rng = np.random.default_rng(13)
    x = (rng.standard_normal(16384 * 2) * 0.02).astype(np.float32)
    q = qref.scheme("nf4", profile="torchao").quantize(x)
    dq = q.meta["double_quant"]
    a = [frac(v) for v in q.scales]
    off = frac(dq.offset)
    assert off == rnd(sum(a) / len(a))
    assert dq.codes.dtype == np.int8 and dq.scales.shape == (2,)
    for b in range(2):
        u = [rnd(v - off) for v in a[b * 256:(b + 1) * 256]]
        fac = rnd(256 / rnd(2 * max(abs(v) for v in u)))
        assert frac(dq.scales[b]) == fac
        for i, v in enumerate(u):
            p = rnd(v * fac)
            n = round(p)  # Python round: half to even
            assert dq.codes[b * 256 + i] == max(-128, min(127, n))
    with pytest.raises(QrefError, match="multiple of 256"):
        DoubleQuant("int8_absmax", 256)  # fine to build
        from qref.schemes.lookup.scheme import _double_quantize

        _double_quantize(DoubleQuant("int8_absmax", 256), np.ones(100, np.float32), None, "float32")


def test_dequantize_checks_codes() -> None:
    sch = qref.scheme("nf4")
    q = sch.quantize(np.ones(8, np.float32))
    q.codes = q.codes + 16
    with pytest.raises(QrefError, match="out of range"):
        q.dequantize()


def test_vectorized_on_a_million_elements() -> None:
    x = np.random.default_rng(0).standard_normal(10**6).astype(np.float32)
    for profile in ("spec", "bitsandbytes", "qwix"):
        q = qref.scheme("nf4", profile=profile).quantize(x)
        assert q.codes.shape == x.shape and q.scales.size == -(-(10**6) // 64)


def test_spec_page_examples() -> None:
    """docs/spec/lut.md §8."""
    x = np.array([1, 0.5, -0.3, 0], np.float32)
    assert qref.scheme("nf4", profile="bitsandbytes").quantize(x).codes.tolist() == [15, 12, 4, 7]
    m = np.float32(NF4.values[8]) / np.float32(2)
    assert int(m.view(np.uint32)) == 0x3D22FAFF
    tie = np.array([1, m], np.float32)
    got = {p: int(qref.scheme("nf4", profile=p, axis=None).quantize(tie).codes[1])
           for p in ("bitsandbytes", "qwix", "spec")}
    assert got == {"bitsandbytes": 7, "qwix": 7, "spec": 8}
    s = np.array([float(rnd((frac(FP4_BNB.values[5]) + frac(FP4_BNB.values[2])) / 2))], np.float32)
    assert table_encode(s, FP4_BNB, midpoints="float32", tie="lower_value").tolist() == [5]
    assert table_encode(s, FP4_BNB, midpoints="float32", tie="lower_code").tolist() == [2]


def test_scale_offset_needs_double_quant_and_thresholds_need_nearest() -> None:
    with pytest.raises(QrefError, match="double_quant=True"):
        qref.scheme("nf4").quantize(np.ones(4, np.float32), scale_offset=1.0)
    import scipy.stats as sps

    from qref.tables import quantile_table

    t = quantile_table(4, sps.norm(), method="edges")
    with pytest.raises(QrefError, match="thresholds"):
        qref.scheme("lut", table=t, rule="argmin")
    q = qref.scheme("lut", table=t, block_size=16).quantize(np.linspace(-1, 1, 32, dtype=np.float32))
    assert (np.diff(q.codes.astype(int)) >= 0).all()


@settings(max_examples=60, deadline=None)
@given(qs.tables(k=st.integers(1, 4), unsorted=True, duplicates=True),
       st.lists(st.floats(-1.5, 1.5, width=32), min_size=1, max_size=20),
       st.sampled_from(["lower_value", "upper_value", "lower_code", "even_code"]))
def test_any_table_any_tie_rule_matches_the_oracle(table: np.ndarray, xs: list[float], tie: str) -> None:
    t = Table.from_values("h", np.asarray(table, np.float32), storage=f"uint{max(1, (len(table) - 1).bit_length())}")
    mids = [float(rnd((a + b) / 2)) for a, b in zip(sorted(values_of(t.values))[:-1], sorted(values_of(t.values))[1:],
                                                   strict=True)]
    x = np.array(xs + mids, np.float32)
    got = table_encode(x, t, rule="nearest", midpoints="exact", tie=tie)
    assert got.tolist() == [code_exact(frac(v), values_of(t.values), tie) for v in x]
    got = table_encode(x, t, rule="nearest", midpoints="float32", tie=tie)
    assert got.tolist() == [code_f32_midpoints(frac(v), values_of(t.values), tie) for v in x]
    got = table_encode(x, t, rule="argmin")
    assert got.tolist() == [code_argmin(frac(v), values_of(t.values), "float32") for v in x]


@pytest.mark.parametrize("profile", ["spec", "bitsandbytes", "qwix", "openvino"])
def test_empty_and_scalar_inputs(profile: str) -> None:
    for shape in ((0,), (2, 0), (0, 3)):
        q = qref.scheme("nf4", profile=profile).quantize(np.zeros(shape, np.float32))
        assert q.codes.shape == shape and q.dequantize().shape == shape
    sch = qref.scheme("nf4", profile=profile)
    if sch.axis is not None:  # blocks along an axis: a 0-d input has none
        with pytest.raises(QrefError, match="axis"):
            sch.quantize(np.float32(0.5))
        return
    q = sch.quantize(np.float32(0.5))
    assert q.codes.shape == () and int(q.codes) == 15 and float(q.dequantize()) == 0.5
