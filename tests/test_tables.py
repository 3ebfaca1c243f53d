"""Lookup tables: shipped constants, builders, records (spec: docs/spec/lut.md §1-2)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as st
from test_lookup_oracle import frac, rnd

import qref
from qref.errors import QrefError, UnknownNameError
from qref.schemes.lookup.decision import table_encode
from qref.tables import (
    AF4,
    DYNAMIC8,
    FP4_BNB,
    NF4,
    NF4_TORCHAO,
    Table,
    dynamic_map,
    get_table,
    linspace_float32,
    lloyd_max_table,
    nf_table,
    qlora_offset,
    quantile_table,
    register_table,
    tables,
)

# lut.md / QLoRA Appendix E: NF4 as float32 hex, code order
NF4_HEX = [
    "bf800000", "bf3239b1", "bf066b30", "beca32a0", "be91a24d", "be3d353f", "bdba7871", "00000000", "3da2faff",
    "3e24cae3", "3e7c04dd", "3ead033a", "3ee1a4b8", "3f1007ab", "3f3913b3", "3f800000",
]
# the decimal literals bitsandbytes, OpenVINO and qwix ship (shortest repr of the float32 values)
NF4_DEC = [
    "-1.0", "-0.6961928009986877", "-0.5250730514526367", "-0.39491748809814453", "-0.28444138169288635",
    "-0.18477343022823334", "-0.09105003625154495", "0.0", "0.07958029955625534", "0.16093020141124725",
    "0.24611230194568634", "0.33791524171829224", "0.44070982933044434", "0.5626170039176941", "0.7229568362236023",
    "1.0",
]
# arXiv 2306.06965 / bitsandbytes get_4bit_type('af4'): ascending literals, stored descending
AF4_DEC = [
    "-1.0", "-0.69441008", "-0.51243739", "-0.3736951", "-0.25607552", "-0.14982478", "-0.04934812", "0.0",
    "0.04273164", "0.12934483", "0.21961274", "0.31675666", "0.42563882", "0.55496234", "0.72424863", "1.0",
]
FP4_NUM = (0, 0.0625, 8, 12, 4, 6, 2, 3, 0, -0.0625, -8, -12, -4, -6, -2, -3)
TORCHAO_DEC = [
    "-1.0000", "-0.6962", "-0.5251", "-0.3949", "-0.2844", "-0.1848", "-0.0911", "0.0000", "0.0796", "0.1609",
    "0.2461", "0.3379", "0.4407", "0.5626", "0.7230", "1.0000",
]


def _bits(values: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(values, np.float32).view(np.uint32)]


# ---- shipped constants equal the published float32 bit patterns ---------------------------------------------
def test_nf4_constants_equal_published_hex_and_decimals() -> None:
    assert NF4.hex == tuple(NF4_HEX)
    assert _bits(NF4.values) == _bits(np.array([float(d) for d in NF4_DEC], dtype=np.float32))
    assert NF4.values.dtype == np.float32 and NF4.storage == "uint4" and NF4.is_sorted
    assert NF4.values[7] == 0 and NF4.values[0] == -1 and NF4.values[15] == 1


def test_af4_constants_are_the_float32_literals_descending() -> None:
    lit = np.array([float(d) for d in AF4_DEC], dtype=np.float64)[::-1]
    assert _bits(AF4.values) == _bits(np.array([rnd(Fraction(d)) for d in map(float, lit)], dtype=np.float32))
    assert AF4.values[0] == 1 and AF4.values[15] == -1 and not AF4.is_sorted


def test_fp4_bnb_constants_are_v_over_12_rounded_to_float32() -> None:
    expected = [float(rnd(Fraction(v) / 12)) for v in FP4_NUM]
    assert _bits(FP4_BNB.values) == _bits(np.array(expected, dtype=np.float32))
    assert FP4_BNB.bits[8] == 0  # the Python literal -0 in bitsandbytes is the integer 0: code 8 is +0
    magnitudes = sorted({abs(frac(v)) for v in FP4_BNB.values})
    assert magnitudes == [rnd(Fraction(m)) for m in (0, Fraction(1, 192), Fraction(1, 6), Fraction(1, 4),
                                                     Fraction(1, 3), Fraction(1, 2), Fraction(2, 3), 1)]


def test_torchao_table_is_the_four_digit_literals() -> None:
    assert _bits(NF4_TORCHAO.values) == _bits(np.array([rnd(Fraction(d)) for d in TORCHAO_DEC], dtype=np.float32))


def test_dynamic8_constants() -> None:
    v = DYNAMIC8.values
    assert v.size == 256 and DYNAMIC8.storage == "uint8" and DYNAMIC8.is_sorted
    assert DYNAMIC8.hex[0] == "bf7e3333" and float(v[0]) == float(np.float32(-0.99296874))
    assert v[127] == 0 and v[255] == 1 and (np.diff(v) > 0).all()
    assert dynamic_map().bits == DYNAMIC8.bits


def test_openvino_thresholds_are_the_float32_midpoints_of_nf4() -> None:
    # ConvertNF4::quantize literals (openvino src/core/src/type/nf4.cpp), ascending
    lit = [-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
           -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
           0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
           0.5016634166240692, 0.6427869200706482, 0.8614784181118011]
    v = [frac(x) for x in NF4.values]
    mids = [rnd((v[i] + v[i + 1]) / 2) for i in range(15)]
    assert [rnd(Fraction(x)) for x in lit] == mids


# ---- builders -------------------------------------------------------------------------------------------------
def test_nf_table_float32_recipe_reproduces_nf4_bit_for_bit() -> None:
    assert nf_table(4).bits == NF4.bits
    assert nf_table(4, 0.9677083, recipe="float32").bits == NF4.bits


def test_nf_table_float64_recipe_differs_by_up_to_6_ulp() -> None:
    t64 = nf_table(4, recipe="float64")
    ulps = np.abs(t64.values.view(np.int32).astype(np.int64) - NF4.values.view(np.int32).astype(np.int64))
    assert ulps.tolist() == [0, 2, 0, 0, 1, 0, 6, 0, 4, 2, 1, 2, 1, 1, 2, 0]  # lut.md §2.1
    assert (np.abs(t64.values - NF4.values) < 1e-6).all()


def test_qlora_offset_rule() -> None:
    assert qlora_offset(4) == Fraction(1, 2) * (Fraction(29, 30) + Fraction(31, 32))
    f = np.float32(float(qlora_offset(4))).view(np.uint32)
    assert int(f) - int(np.float32(0.9677083).view(np.uint32)) == 1  # the shipped literal is one ulp below
    assert nf_table(4, float(qlora_offset(4))).bits != NF4.bits


@pytest.mark.parametrize("bits", [2, 3, 5, 8])
def test_nf_table_other_sizes(bits: int) -> None:
    t = nf_table(bits)
    v = t.values
    assert v.size == 2**bits and v[0] == -1 and v[-1] == 1 and (np.diff(v) > 0).all()
    assert (v == 0).sum() == 1 and (v > 0).sum() == 2 ** (bits - 1)


def test_linspace_float32_edge_values() -> None:
    assert linspace_float32(0.0, 1.0, 1).tolist() == [0.0]
    v = linspace_float32(0.9677083, 0.5, 9)
    assert v[0] == np.float32(0.9677083) and v[-1] == np.float32(0.5)
    assert [int(b) for b in v.view(np.uint32)] == [1064811451, 1063830596, 1062849740, 1061868885, 1060888030,
                                                   1059907174, 1058926319, 1057945463, 1056964608]


def test_linspace_float32_matches_torch() -> None:
    torch = pytest.importorskip("torch", reason="torch.linspace is the reference for linspace_float32")
    rng = np.random.default_rng(3)
    for steps in [*range(2, 40), 65, 129, 257, 1000]:
        for _ in range(3):
            a, b = (float(v) for v in rng.uniform(-3, 3, 2))
            ref = torch.linspace(a, b, steps, dtype=torch.float32).numpy()
            assert _bits(linspace_float32(a, b, steps)) == _bits(ref), (a, b, steps)


def _bnb():
    pytest.importorskip("torch", reason="bitsandbytes needs torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("bitsandbytes.functional", reason="bitsandbytes is the NF4 / dynamic map source")


@pytest.mark.parametrize("offset", [0.9677083, 0.99, 0.95, 0.9])
def test_nf_table_matches_bitsandbytes_create_normal_map(offset: float) -> None:
    F = _bnb()
    m = F.create_normal_map(offset=offset, use_extra_value=True).numpy()
    nz = np.concatenate([m[:7], [0], m[-8:]]).astype(np.float32)  # 7 negatives, 241 zeros, 8 positives
    assert _bits(nf_table(4, offset).values) == _bits(nz)


def test_bitsandbytes_tables_are_the_shipped_constants() -> None:
    F = _bnb()
    assert _bits(F.get_4bit_type("nf4", device="cpu").numpy()) == list(NF4.bits)
    assert _bits(F.get_4bit_type("fp4", device="cpu").numpy()) == list(FP4_BNB.bits)
    assert _bits(F.get_4bit_type("af4", device="cpu", blocksize=64).numpy()) == list(AF4.bits)
    assert _bits(F.create_dynamic_map().numpy()) == list(DYNAMIC8.bits)


@pytest.mark.parametrize(("signed", "e", "k"), [(True, 7, 8), (False, 7, 8), (True, 4, 8), (True, 5, 8)])
def test_dynamic_map_matches_bitsandbytes(signed: bool, e: int, k: int) -> None:
    F = _bnb()
    ref = np.sort(F.create_dynamic_map(signed=signed, max_exponent_bits=e, total_bits=k).numpy())
    assert _bits(dynamic_map(signed, e, k).values) == _bits(ref)


# ---- quantile and Lloyd-Max tables ------------------------------------------------------------------------
N = 10**6


def test_edges_table_from_samples_has_equal_counts_within_2() -> None:
    """Bound: with thresholds at the sample quantiles j/K every bin holds n/K samples within 2 (interpolated
    order statistics and the float32 rounding of a threshold move at most one sample across each edge)."""
    x = np.random.default_rng(1234).standard_normal(N).astype(np.float32)
    for bits in (2, 4, 8):
        t = quantile_table(bits, x, method="edges", normalize=False)
        counts = np.bincount(table_encode(x, t, tie="lower_value"), minlength=t.size)
        assert np.abs(counts - N / t.size).max() < 2, (bits, counts.min(), counts.max())


def test_edges_table_from_distribution_counts_within_6_sigma() -> None:
    """Bound: fresh samples fall in each of the K equal-mass bins Binomial(n, 1/K): |count - n/K| <= 6 sigma,
    sigma = sqrt(n (1/K)(1 - 1/K)) (242 for K = 16); seeded, so the check is deterministic."""
    t = quantile_table(4, st.norm(), method="edges", normalize=False)
    y = np.random.default_rng(99).standard_normal(N).astype(np.float32)
    counts = np.bincount(table_encode(y, t, tie="lower_value"), minlength=16)
    sigma = np.sqrt(N / 16 * (15 / 16))
    assert np.abs(counts - N / 16).max() <= 6 * sigma


def test_points_table_counts_match_the_midpoint_masses() -> None:
    """bitsandbytes-style quantile points: bin j holds mass F(m_j) - F(m_(j-1)) (m = midpoints), not 1/K; the
    sample counts agree with those masses within 6 sigma."""
    t = quantile_table(4, st.norm(), method="points", normalize=False)
    v = t.values.astype(np.float64)
    edges = np.concatenate([[-np.inf], (v[:-1] + v[1:]) / 2, [np.inf]])
    p = np.diff(st.norm.cdf(edges))
    y = np.random.default_rng(5).standard_normal(N).astype(np.float32)
    counts = np.bincount(table_encode(y, t), minlength=16)
    assert (np.abs(counts - N * p) <= 6 * np.sqrt(N * p * (1 - p))).all()
    assert p.min() < 0.9 / 16  # the outer bins are visibly light: points are not equal-mass edges


def test_quantile_points_from_samples_follow_np_quantile() -> None:
    x = np.random.default_rng(2).standard_normal(5000)
    t = quantile_table(3, x, method="points")
    q = np.quantile(x, np.linspace(1 / 16, 15 / 16, 8))
    assert _bits(t.values) == _bits(np.array([float(rnd(frac(v))) for v in q / np.abs(q).max()], np.float32))
    assert t.thresholds is None and np.abs(t.values).max() == 1


def test_quantile_edges_normalized_keep_thresholds_inside() -> None:
    t = quantile_table(4, st.norm(), method="edges")
    assert t.thresholds is not None and len(t.thresholds) == 15 and np.abs(t.values).max() == 1
    thr = t.threshold_values
    assert (thr > t.values[:-1]).all() and (thr < t.values[1:]).all()


def test_lloyd_max_normal_matches_closed_form_and_max_1960() -> None:
    t1 = lloyd_max_table(1, st.norm())
    # the iteration stops at its convergence threshold: a bound on the closed form, not a bit claim
    assert np.abs(t1.values - np.array([-1, 1]) * np.sqrt(2 / np.pi)).max() <= 1e-6 * np.sqrt(2 / np.pi)
    # Max (1960), Table I: optimal levels for N(0, 1) as printed; each printed value is the level rounded to its
    # last printed digit, so the level lies within half a unit of that digit (the bound below, per value)
    t2 = lloyd_max_table(2, st.norm())
    printed2, unit2 = np.array([-1.510, -0.4528, 0.4528, 1.510]), np.array([1e-3, 1e-4, 1e-4, 1e-3])
    assert (np.abs(t2.values - printed2) <= unit2 / 2).all(), t2.values
    t3 = lloyd_max_table(3, st.norm())
    printed3, unit3 = np.array([0.2451, 0.7560, 1.344, 2.152]), np.array([1e-4, 1e-4, 1e-3, 1e-3])
    assert (np.abs(t3.values[4:] - printed3) <= unit3 / 2).all(), t3.values


def test_lloyd_max_has_lower_mse_than_quantile_points() -> None:
    y = np.random.default_rng(11).standard_normal(200_000).astype(np.float32)
    lm = lloyd_max_table(4, y)
    qp = quantile_table(4, y, method="points", normalize=False)

    def mse(t: Table) -> float:
        return float(np.mean((t.values[table_encode(y, t)].astype(np.float64) - y) ** 2))

    assert mse(lm) < mse(qp)
    other = lloyd_max_table(2, st.laplace())  # a non-normal distribution goes through scipy's expect()
    assert other.size == 4 and (np.diff(other.values) > 0).all()


# ---- records, registry, errors -------------------------------------------------------------------------------
def test_registry_and_spec_round_trip() -> None:
    assert {"nf4", "af4", "fp4_bnb", "dynamic8", "nf4_torchao"} <= set(tables())
    assert get_table("nf4") is NF4 and get_table(NF4) is NF4
    with pytest.raises(UnknownNameError, match="nf4"):
        get_table("nf5")
    for t in (NF4, DYNAMIC8, quantile_table(3, st.norm(), method="edges")):
        assert Table.from_spec(t.to_spec()) == t
    with pytest.raises(QrefError, match="already registered"):
        register_table(NF4)


def test_table_validation_errors() -> None:
    with pytest.raises(QrefError, match="storage uint4 holds 16"):
        Table("x", (0, 0x3F800000), "uint4")
    with pytest.raises(QrefError, match="finite"):
        Table.from_values("x", np.array([0, np.nan], np.float32))
    with pytest.raises(QrefError, match="not exactly a float32"):
        Table.from_values("x", [0.0, 0.1])
    assert Table.from_values("x", [0.0, 0.1], exact=False).values[1] == np.float32(0.1)
    with pytest.raises(QrefError, match="power of two"):
        Table.from_values("x", [0.0, 0.5, 1.0])
    t = Table.from_values("x", [-1.0, 0.0, 1.0], storage="int8<-1:1>")
    assert t.storage_min == -1 and t.size == 3
    with pytest.raises(QrefError, match="ascending"):
        Table.from_values("x", [1.0, 0.0], thresholds=[0.5])
    with pytest.raises(QrefError, match="thresholds"):
        Table.from_values("x", [0.0, 1.0], thresholds=[0.25, 0.5])
    f4 = Table.from_values("e2m1_lut", np.linspace(-1, 1, 16, dtype=np.float32), storage="float4_e2m1fn")
    f8 = Table.from_values("e4m3_lut", np.linspace(-1, 1, 256, dtype=np.float32), storage="float8_e4m3fn")
    assert f4.storage_min == 0 and f8.size == 256
    with pytest.raises(QrefError, match="at most 16 bits"):
        Table.from_values("x", [0.0, 1.0], storage="float32")
    assert NF4.code_of(1.0) == 15 and NF4.exact_values()[0] == -1
    with pytest.raises(QrefError, match="no entry"):
        NF4.code_of(0.5)


def test_public_exports() -> None:
    assert qref.scheme("nf4").table is NF4
