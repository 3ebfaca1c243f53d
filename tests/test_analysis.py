"""qref.analysis: metrics against closed forms, breakdowns, counts, the compact scheme syntax, compare and the CLI.

Statistical checks state their bound next to the assertion (5 standard deviations of the estimator, derived in the
comment); everything else is exact: expected values are worked out by hand from the definitions in
docs/analysis.md and the scheme specs, never taken from the implementation's output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qref
from qref import analysis as A
from qref.analysis.render import _fmt_cell
from qref.analysis.schemetext import _absmax_fast
from qref.cli import main
from qref.errors import QrefError, UnknownNameError


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------------------
# §1 metrics: closed forms
# ---------------------------------------------------------------------------------------------------------
def test_uniform_noise_of_uniform_input_has_mse_step_squared_over_12() -> None:
    # x ~ U(-100 D, 100 D) quantized by int8 with scale D (a power of two: x / D is exact, no clipping): the error
    # e = y - x is uniform on [-D/2, D/2], E[e^2] = D^2 / 12, Var(e^2) = D^4 / 80 - D^4 / 144 = D^4 / 180, so the
    # sample MSE over n elements has standard deviation D^2 / sqrt(180 n). Bound: 5 standard deviations.
    D = 2.0**-7
    n = 1_000_000
    x = rng(1).uniform(-100 * D, 100 * D, n).astype(np.float32)
    s = qref.scheme("int8", scale=D, zero_point=0)
    y = s.quantize(x).dequantize(dtype=np.float64)
    sigma = D**2 / math.sqrt(180 * n)
    assert abs(A.mse(x, y) - D**2 / 12) < 5 * sigma
    assert abs(A.rmse(x, y) - D / math.sqrt(12)) < 5 * sigma / (2 * D / math.sqrt(12))  # delta method
    # bias: E[e] = 0, sd(mean) = (D / sqrt(12)) / sqrt(n)
    assert abs(A.mean_error(x, y)) < 5 * D / math.sqrt(12 * n)
    # round to nearest: |e| <= D / 2 exactly (deterministic)
    assert A.max_abs_error(x, y) <= D / 2
    m = A.metrics(x, y)
    assert m.n == n and m.nonfinite == 0 and m.mse == A.mse(x, y)


def test_sqnr_of_known_signals() -> None:
    # exact: signal 3^2 + 4^2 = 25, noise 0.03^2 + 0.04^2 = 0.0025 -> 10 log10(1e4) = 40 dB
    x = np.array([3.0, -4.0])
    y = x + np.array([0.03, -0.04])
    assert A.sqnr_db(x, y) == pytest.approx(40.0, abs=1e-9)
    assert A.sqnr_db(x, x) == math.inf
    assert A.sqnr_db(np.zeros(3), np.array([0.0, 1.0, 0.0])) == -math.inf
    # full-scale sine through symmetric int8 (scale A / 127, step D = A / 127): uniform-noise model gives
    # SQNR = 10 log10((A^2 / 2) / (D^2 / 12)) = 10 log10(6 * 127^2) = 49.86 dB (the "6.02 b + 1.76" rule with
    # 254 steps). The noise of a sine with an irrational frequency follows the model to well under 0.1 dB at
    # n = 200000 (relative sd of the noise power ~ sqrt(0.8 / n) = 0.2 %, 0.01 dB); bound 0.1 dB.
    A_ = 3.0
    t = np.arange(200_000)
    x = (A_ * np.sin(2 * np.pi * t * (math.sqrt(5) - 1) / 2 / 37)).astype(np.float32)
    cal = qref.calibrate(x, "int8")
    y = cal.scheme().quantize(x).dequantize(dtype=np.float64)
    expected = 10 * math.log10((float(np.abs(x).max()) ** 2 / 2) / ((cal.scales.item()) ** 2 / 12))
    assert A.sqnr_db(x, y) == pytest.approx(expected, abs=0.1)
    assert 10 * math.log10(6 * 127**2) == pytest.approx(49.86, abs=0.01)


def test_max_errors_bias_cosine_closed_forms() -> None:
    x = np.array([2.0, 0.0, -4.0, 1.0])
    y = np.array([2.5, 1.0, -4.0, 0.75])
    assert A.max_abs_error(x, y) == 1.0
    assert A.max_rel_error(x, y) == 0.25  # 0.5 / 2 and 0.25 / 1; x == 0 is left out
    assert A.mean_error(x, y) == (0.5 + 1.0 + 0.0 - 0.25) / 4
    v = rng(2).standard_normal(1000)
    assert A.cosine_similarity(v, 3 * v) == pytest.approx(1.0, abs=1e-15)
    assert A.cosine_similarity(v, -v) == pytest.approx(-1.0, abs=1e-15)
    assert A.cosine_similarity([1.0, 0.0], [0.0, 2.0]) == 0.0
    assert math.isnan(A.cosine_similarity([0.0, 0.0], [1.0, 2.0]))


def test_kl_divergence_closed_forms() -> None:
    v = rng(3).standard_normal(10_000)
    assert A.kl_divergence(v, v) == 0.0
    assert A.kl_divergence(v, v, smoothing=0) == 0.0
    # two bins [0, 1), [1, 2]: P = (2, 2) / 4, Q = (1, 3) / 4
    x = np.array([0.1, 0.2, 1.1, 1.2])
    y = np.array([0.1, 1.1, 1.2, 1.3])
    kl0 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert A.kl_divergence(x, y, bins=[0.0, 1.0, 2.0], smoothing=0) == pytest.approx(kl0, rel=1e-15)
    # smoothing 0.5: P = (2.5, 2.5) / 5, Q = (1.5, 3.5) / 5
    kl5 = 0.5 * math.log(0.5 / 0.3) + 0.5 * math.log(0.5 / 0.7)
    assert A.kl_divergence(x, y, bins=[0.0, 1.0, 2.0]) == pytest.approx(kl5, rel=1e-15)
    # an empty Q bin without smoothing: infinite
    assert A.kl_divergence(x, np.full(4, 1.5), bins=[0.0, 1.0, 2.0], smoothing=0) == math.inf
    # Gibbs: KL >= 0
    for seed in range(5):
        a, b = rng(seed).standard_normal((2, 500))
        assert A.kl_divergence(a, b, bins=20) >= 0
    with pytest.raises(QrefError, match="increasing"):
        A.kl_divergence(x, y, bins=[1.0, 0.0])
    with pytest.raises(QrefError, match="smoothing"):
        A.kl_divergence(x, y, smoothing=-1)


def test_ulp_values() -> None:
    f = "float8_e4m3fn"  # M = 3, emin = -6
    got = A.ulp([1.0, 1.5, 448.0, 0.015625, 0.001, 0.0, -3.0, 1000.0], f)
    assert got.tolist() == [2.0**-3, 2.0**-3, 2.0**5, 2.0**-9, 2.0**-9, 2.0**-9, 2.0**-2, 2.0**6]
    assert A.ulp([5.0], "int8").tolist() == [1.0]
    assert A.ulp([5.0], "int8", scale=0.5).tolist() == [0.5]
    # scaled: ulp_s(x) = s * ulp(x / s)
    assert A.ulp([3.0], f, scale=4.0).tolist() == [4.0 * 2.0**-4]
    assert A.ulp([1.0], "float8_e5m2").tolist() == [0.25]


def test_round_to_nearest_cast_is_within_half_an_ulp_and_ties_are_exactly_half() -> None:
    fmt = qref.get_format("float8_e4m3fn")
    vals = np.unique(np.abs(fmt.values[np.isfinite(fmt.values)]))  # 0 .. 448
    mids = (vals[:-1] + vals[1:]) / 2  # exact in float64 (and float32)
    x = np.concatenate([rng(4).uniform(-448, 448, 100_000), mids, -mids, vals]).astype(np.float32)
    s = qref.scheme("float8_e4m3fn")
    y = s.quantize(x).dequantize(dtype=np.float64)
    u = A.ulp_error(x, y, "float8_e4m3fn")
    assert u.max() <= 0.5
    k = 100_000
    assert np.all(u[k:k + 2 * mids.size] == 0.5)
    assert np.all(u[k + 2 * mids.size:] == 0)
    m = A.metrics(x, y, fmt="float8_e4m3fn")
    assert m.max_ulp == 0.5


def test_nonfinite_pairs_are_left_out_and_overflows_counted() -> None:
    x = np.array([1.0, 2.0, np.inf, np.nan, 3.0])
    y = np.array([1.5, np.nan, np.inf, 1.0, 3.0])
    m = A.metrics(x, y)
    assert m.n == 2 and m.nonfinite == 1
    assert m.mse == 0.25 / 2
    assert A.max_abs_error(x, y) == 0.5
    m = A.metrics(x, y, where=[True, True, True, True, False])
    assert m.n == 1 and m.mse == 0.25
    m = A.metrics(x, y, where=[False, True, True, True, False])  # no finite pair left: NaN, not +inf
    assert m.n == 0 and math.isnan(m.sqnr_db) and math.isnan(m.mse)
    assert math.isnan(A.sqnr_db([np.nan], [1.0]))
    with pytest.raises(QrefError, match="same shape"):
        A.mse(np.zeros(3), np.zeros(4))
    with pytest.raises(QrefError, match="real numeric"):
        A.mse(np.array(["a"]), np.array(["b"]))


def test_error_by_magnitude_bins() -> None:
    x = np.array([1.0, 1.0, 4.0, 4.0, 0.0])
    y = x + np.array([0.1, -0.1, 0.4, 0.4, 5.0])
    edges, rms, cnt = A.error_by_magnitude(x, y, bins=[0.5, 2.0, 8.0])
    assert cnt.tolist() == [2, 2]
    assert rms == pytest.approx([0.1, 0.4], rel=1e-12)
    _, rel, _ = A.error_by_magnitude(x, y, bins=[0.5, 2.0, 8.0], relative=True)
    assert rel == pytest.approx([0.1, 0.1], rel=1e-12)
    edges, rms, cnt = A.error_by_magnitude(rng(5).standard_normal(1000), rng(6).standard_normal(1000), bins=10)
    assert edges.size == 11 and cnt.sum() == 1000


# ---------------------------------------------------------------------------------------------------------
# §2 breakdowns
# ---------------------------------------------------------------------------------------------------------
def test_channel_breakdown_closed_form() -> None:
    x = np.ones((3, 4))
    c = np.array([0.5, 0.25, 0.0])
    y = x + c[:, None]
    b = A.channel_breakdown(x, y, axis=0)
    assert b.mse.tolist() == (c**2).tolist()
    assert b.count.tolist() == [4, 4, 4]
    assert b.sqnr_db[:2] == pytest.approx(10 * np.log10(1 / c[:2] ** 2), abs=1e-12)
    assert b.sqnr_db[2] == math.inf
    assert b.worst() == pytest.approx(10 * math.log10(4.0), abs=1e-12)
    assert b.worst("mse") == 0.25
    b1 = A.channel_breakdown(x.T, y.T, axis=1)
    assert b1.mse.tolist() == b.mse.tolist()


def test_block_breakdown_layout_and_partial_blocks() -> None:
    x = np.arange(1, 71, dtype=np.float64).reshape(1, 70).repeat(2, axis=0)
    e = np.zeros_like(x)
    e[1, 64:] = 1.0  # only row 1's last (partial, 6-element) block has errors
    b = A.block_breakdown(x, x + e, block_size=32, axis=-1)
    assert b.count.tolist() == [[32, 32, 6], [32, 32, 6]]
    assert b.mse[1, 2] == 1.0 and b.mse[0].tolist() == [0, 0, 0]
    assert b.amax[0].tolist() == [32.0, 64.0, 70.0]
    sig = sum(v * v for v in range(65, 71))
    assert b.sqnr_db[1, 2] == pytest.approx(10 * math.log10(sig / 6), abs=1e-12)
    # blocks along axis 0: the input's shape with that axis replaced by the block count
    bt = A.block_breakdown(x.T, (x + e).T, block_size=32, axis=0)
    assert bt.mse.shape == (3, 2) and bt.mse.T.tolist() == b.mse.tolist()
    assert A.block_view(np.arange(5), 2).tolist() == [[0, 1], [2, 3], [4, 0]]
    with pytest.raises(QrefError, match="block_size"):
        A.block_view(np.arange(5), 0)


# ---------------------------------------------------------------------------------------------------------
# §3 counts
# ---------------------------------------------------------------------------------------------------------
def test_counts_cast_saturating_and_overflowing() -> None:
    # E4M3FN: max 448, next level inward 416 -> half step 16: inputs past 464 are clipped, 448..464 round to 448.
    # Smallest subnormal 2^-9: 1e-5 rounds to zero (flushed); 0 is not counted as flushed.
    x = np.array([500.0, 448.0, 460.0, 470.0, -1000.0, 1e-5, 0.0, 1.0], dtype=np.float32)
    sat = qref.scheme("float8_e4m3fn", overflow="saturate")
    c = A.counts(x, sat.quantize(x))
    assert (c.saturated, c.clipped, c.flushed, c.nonfinite, c.unspecified) == (5, 3, 1, 0, 0)
    # the default E4M3FN overflow is NaN (ml_dtypes): 500, 470 and -1000 become NaN
    c = A.counts(x, qref.scheme("float8_e4m3fn").quantize(x))
    assert (c.saturated, c.clipped, c.nonfinite) == (2, 0, 3)


def test_counts_uniform_int8() -> None:
    # scale 1, zero point 0, storage [-128, 127]: extreme levels 127 and -128; clipped = more than 0.5 beyond
    x = np.array([127.0, 127.4, 127.6, 200.0, -128.0, -128.6, -129.0, 0.3, -127.0], dtype=np.float32)
    s = qref.scheme("int8", scale=1.0, zero_point=0)
    c = A.counts(x, s.quantize(x))
    assert (c.saturated, c.clipped, c.flushed) == (7, 4, 1)
    # narrowed int8<-127:127>: -127 is the bottom level: all four negatives saturate, and -128 (1.0 past it)
    # joins -128.6 and -129 among the clipped
    s = qref.scheme("int8<-127:127>", scale=1.0, zero_point=0)
    c = A.counts(x, s.quantize(x))
    assert (c.saturated, c.clipped) == (8, 5)


def test_counts_mx_floor_clips_ceil_does_not() -> None:
    # OCP MX floor: X = 2^(floor(log2 amax) - emax) = 2^(2 - 2) = 1 for amax 7.5 -> 7.5 > 6 + 1 clipped to 6.
    # ceil / rceil: X = 2 -> 3.75 rounds to 4, nothing saturates.
    x = np.ones(32, dtype=np.float32)
    x[0] = 7.5
    cf = A.counts(x, qref.scheme("mxfp4").quantize(x))
    assert (cf.saturated, cf.clipped) == (1, 1)
    for rule in ("ceil", "rceil"):
        c = A.counts(x, qref.scheme("mxfp4", scale_rule=rule).quantize(x))
        assert (c.saturated, c.clipped) == (0, 0), rule
    q = qref.scheme("mxfp4").quantize(x)
    assert A.scale_exponents(q).tolist() == [0.0]
    assert A.scale_exponents(qref.scheme("mxfp4", scale_rule="ceil").quantize(x)).tolist() == [1.0]


@pytest.mark.parametrize("sign", [1, -1])
def test_counts_mlx_affine_clips_at_the_far_end(sign: int) -> None:
    # MLX affine 4-bit group of 64 (block.md §6): min -1, max 0.95 -> edge = -1 (|min| > |max|),
    # s = 1.95 / 15 = 0.13, q0 = rint(-1 / 0.13) = -8 -> s = 0.125, bias = -1: levels -1 + 0.125 k, top 0.875.
    # 0.95 is 0.075 > 0.0625 (half a step) past the top level: clipped. sign = -1 mirrors it (negative scale).
    x = np.zeros((1, 64), dtype=np.float32)
    x[0, 0], x[0, 1] = sign * -1.0, sign * 0.95
    q = qref.scheme("mlx_affine", bits=4, group_size=64).quantize(x)
    y = q.dequantize(dtype=np.float64)
    assert y[0, 1] == pytest.approx(sign * 0.875, abs=1e-7)
    c = A.counts(x, q)
    assert (c.saturated, c.clipped, c.flushed) == (2, 1, 0)


def test_counts_lookup_nf4() -> None:
    # NF4 absmax blocks: the absmax element maps to +-1 (saturated, never clipped)
    x = rng(7).standard_normal(256).astype(np.float32)
    q = qref.scheme("nf4", block_size=64).quantize(x)
    c = A.counts(x, q)
    assert c.clipped == 0
    n_extreme = sum(int(np.count_nonzero(np.abs(b) == np.abs(b).max())) for b in x.reshape(4, 64))
    assert c.saturated >= n_extreme


# ---------------------------------------------------------------------------------------------------------
# §5 compact syntax and recipes
# ---------------------------------------------------------------------------------------------------------
def test_parse_scheme_syntax() -> None:
    r = A.parse_scheme("int8<-127:127>:axis=0")
    assert (r.name, r.opts, r.label) == ("int8<-127:127>", {"axis": 0}, "int8<-127:127>:axis=0")
    r = A.parse_scheme(" nf4:block_size=64, profile=bitsandbytes ,double_quant=true,label=NF4 bnb")
    assert r.name == "nf4"
    assert r.opts == {"block_size": 64, "profile": "bitsandbytes", "double_quant": True}
    assert r.label == "NF4 bnb"
    assert A.parse_scheme("float8_e4m3fn:scale=0.5").opts == {"scale": 0.5}
    assert A.parse_scheme("mxfp4:nan=none").opts == {"nan": None}
    assert A.parse_scheme("mxfp4").opts == {}
    with pytest.raises(QrefError, match="KEY=VALUE"):
        A.parse_scheme("int8:axis")
    with pytest.raises(UnknownNameError, match="mxfp4"):
        A.parse_scheme("mxfp5")
    with pytest.raises(QrefError, match="option name"):
        A.parse_scheme("int8:1x=2")
    with pytest.raises(QrefError):
        A.parse_scheme(":axis=0")


def test_recipes_build_the_documented_schemes() -> None:
    x = (rng(8).standard_normal((8, 64)) * [[10.0 ** (i % 4 - 2)] for i in range(8)]).astype(np.float32)
    # per-channel FP8: s = fl32(amax_row / 448), ONNX QuantizeLinear with saturation
    s, kw = A.parse_scheme("float8_e4m3fn:axis=0").build(x)
    expect = (np.abs(x.astype(np.float64)).max(axis=1) / 448).astype(np.float32)
    assert s.family == "uniform" and s.profile == "onnx" and s.axis == 0 and kw == {}
    assert np.array_equal(np.array(s.scales), expect.astype(np.float64))
    # integer recipes are qref.calibrate + .scheme()
    s, _ = A.parse_scheme("int8:axis=0").build(x)
    ref = qref.calibrate(x, "int8", axis=0).scheme()
    assert np.array_equal(s.quantize(x).codes, ref.quantize(x).codes)
    s, _ = A.parse_scheme("int4:block_size=16,method=minmax").build(x)
    ref = qref.calibrate(x, "int4", method="minmax", axis=-1, block_size=16).scheme()
    assert s == ref
    s, _ = A.parse_scheme("int8:scale=0.5,zero_point=3").build(x)
    assert s == qref.scheme("int8", scale=0.5, zero_point=3, profile="stablehlo")
    with pytest.raises(QrefError, match="takes a number"):
        A.parse_scheme("int8:scale=absmax").build(x)
    # block schemes: axis goes to quantize
    s, kw = A.parse_scheme("mxfp4:axis=0,scale_rule=rceil").build(x)
    assert s.scale_rule == "rceil" and kw == {"axis": 0}
    assert A.parse_scheme("mxfp4:axis=0").quantize(x).scales.shape == (1, 64)
    # plain cast, float block scaling, lookup with an axis
    assert A.parse_scheme("float8_e5m2").build(x)[0].family == "cast"
    assert A.parse_scheme("float8_e4m3fn:block_size=32").build(x)[0].family == "block"
    assert A.parse_scheme("nf4:block_size=16,axis=1").build(x)[0].axis == 1
    with pytest.raises(QrefError, match="scale="):
        A.parse_scheme("float8_e4m3fn:scale=rms").build(x)


# ---------------------------------------------------------------------------------------------------------
# §6 compare
# ---------------------------------------------------------------------------------------------------------
def test_compare_table() -> None:
    x = (rng(9).standard_t(5, (16, 128)) * 0.02).astype(np.float32)
    cast = qref.scheme("float8_e4m3fn")
    t = A.compare(x, ["mxfp4", "int8:axis=0", cast, "nf4:block_size=64"])
    assert len(t) == 4
    assert t.column("scheme") == ["mxfp4", "int8:axis=0", "float8_e4m3fn", "nf4:block_size=64"]
    assert t.columns == A.COLUMNS
    # the cast row equals the metrics of a decode, computed here directly
    y = qref.decode(qref.encode(x, "float8_e4m3fn"), "float8_e4m3fn", dtype=np.float64)
    r = t.row("float8_e4m3fn")
    assert r["mse"] == A.mse(x, y) and r["sqnr_db"] == A.sqnr_db(x, y) and r["bits"] == 8
    assert r["worst_channel_db"] == A.channel_breakdown(x, y, 0).worst()
    assert r["worst_block_db"] == A.block_breakdown(x, y, 32, -1).worst()
    # bits per element: MX 4 + 8 / 32; NF4 4 + 32 / 64; int8 per channel 8 + 16 * 32 / 2048
    assert t.row("mxfp4")["bits"] == 4.25
    assert t.row("nf4:block_size=64")["bits"] == 4.5
    assert t.row("int8:axis=0")["bits"] == 8 + 16 * 32 / x.size
    assert t.row("int8:axis=0")["sqnr_db"] > t.row("mxfp4")["sqnr_db"]
    d = t.as_dict()
    assert list(d) == list(A.COLUMNS) and len(d["mse"]) == 4
    text = str(t)
    assert text.splitlines()[0].startswith("scheme") and len(text.splitlines()) == 6
    assert t.to_markdown().count("\n") == 5
    assert t.to_csv().splitlines()[0] == ",".join(A.COLUMNS)
    srt = t.sorted("sqnr_db")
    assert srt.column("sqnr_db") == sorted(t.column("sqnr_db"), reverse=True)
    assert isinstance(srt, A.Comparison) and srt.details is t.details
    sel = t.select("scheme", "bits")
    assert sel.columns == ("scheme", "bits") and set(sel.rows[0]) == {"scheme", "bits"}
    with pytest.raises(UnknownNameError):
        t.select("sqnr")
    with pytest.raises(UnknownNameError):
        t.row("mxfp5")


def test_compare_labels_mapping_duplicates_callables() -> None:
    x = rng(10).standard_normal(256).astype(np.float32)
    t = A.compare(x, {"a": "mxfp4", "b": qref.scheme("mxfp4")})
    assert t.column("scheme") == ["a", "b"]
    assert t.row("a")["mse"] == t.row("b")["mse"]
    assert t.row("a")["worst_channel_db"] is None  # 1-D input: no channel breakdown
    t = A.compare(x, ["mxfp4", "mxfp4", lambda v: qref.calibrate(v, "int8").scheme()])
    assert t.column("scheme") == ["mxfp4", "mxfp4#2", "int8[stablehlo]"]
    with pytest.raises(QrefError, match="at least one"):
        A.compare(x, [])
    with pytest.raises(QrefError, match="cannot compare"):
        A.compare(x, [3])
    t = A.compare(x, ["mxfp4"], block_size=None, channel_axis=None)
    assert t.rows[0]["worst_block_db"] is None


def test_compare_leaves_unspecified_elements_out() -> None:
    # a NaN in an OCP MX block: the block's scale is NaN and its elements are unspecified (block.md)
    x = rng(11).standard_normal(64).astype(np.float32)
    x[3] = np.nan
    t = A.compare(x, ["mxfp8_e4m3"])
    r = t.rows[0]
    res = t.details["mxfp8_e4m3"]
    n_unspec = int(np.count_nonzero(res.qarray.unspecified))
    assert r["unspecified"] == n_unspec > 0
    keep = ~res.qarray.unspecified
    assert r["mse"] == A.mse(x[keep], res.y[keep])


def test_to_pandas() -> None:
    pd = pytest.importorskip("pandas", reason="pandas is optional: Table.to_pandas")
    t = A.compare(rng(12).standard_normal(64).astype(np.float32), ["mxfp4"])
    df = t.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == list(A.COLUMNS)


def test_format_summary() -> None:
    t = A.format_summary(["float8_e4m3fn", "float4_e2m1fn", "int8"])
    e4 = t.row("float8_e4m3fn")
    assert (e4["max"], e4["min_normal"], e4["min_positive"], e4["finite_values"]) == (448.0, 2.0**-6, 2.0**-9, 254)
    assert e4["binades"] == pytest.approx(math.log2(448 * 2**9))
    assert t.row("float4_e2m1fn")["finite_values"] == 16
    assert t.row("int8")["finite_values"] == 256


# ---------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------
def test_cli_compare(tmp_path, capsys) -> None:
    x = (rng(13).standard_normal((8, 64)) * 0.1).astype(np.float32)
    f = tmp_path / "w.npy"
    np.save(f, x)
    assert main(["compare", str(f), "--schemes", "mxfp4", "int8:axis=0", "--columns", "scheme,bits,sqnr_db"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# ") and "(8, 64)" in out[0]
    assert out[1].split() == ["scheme", "bits", "sqnr_db"]
    assert [line.split()[0] for line in out[3:]] == ["mxfp4", "int8:axis=0"]
    expect = A.compare(x, ["mxfp4"]).rows[0]["sqnr_db"]
    assert out[3].split()[2] == _fmt_cell(expect)
    assert main(["compare", str(f), "--schemes", "mxfp4", "--format", "csv", "--sort", "sqnr_db"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == ",".join(A.COLUMNS)
    np.savez(tmp_path / "t.npz", a=x, b=x)
    assert main(["compare", str(tmp_path / "t.npz"), "--key", "b", "--schemes", "nvfp4"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "t.npz"), "--schemes", "nvfp4"]) == 2
    assert "--key" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing.npy")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["compare", str(f), "--schemes", "int8:axis"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_cli_compare_default_schemes(tmp_path, capsys) -> None:
    from qref.commands.compare import DEFAULT_SCHEMES

    f = tmp_path / "w.npy"
    np.save(f, (rng(14).standard_normal((4, 128)) * 0.05).astype(np.float32))
    assert main(["compare", str(f), "--block-size", "none", "--channel-axis", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[3:]] == list(DEFAULT_SCHEMES)


def test_cli_compare_plot(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (optional extra 'notebooks')")
    f = tmp_path / "w.npy"
    np.save(f, (rng(15).standard_normal((4, 64)) * 0.05).astype(np.float32))
    png = tmp_path / "out.png"
    assert main(["compare", str(f), "--schemes", "mxfp4", "nvfp4", "--plot", str(png), "--dpi", "40"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_equal_the_single_metric_functions() -> None:
    """metrics() computes every value once; each equals the stand-alone function bit for bit (finite and
    non-finite pairs, zeros in x, a 2-D input)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    x[3, :5] = 0.0
    for y in (x + rng.standard_normal(x.shape).astype(np.float32) * 1e-2,
              np.where(rng.random(x.shape) < 0.01, np.inf, x * 1.01)):
        m = A.metrics(x, y)
        assert m.mse == A.mse(x, y) and m.sqnr_db == A.sqnr_db(x, y)
        assert m.max_abs_error == A.max_abs_error(x, y) and m.max_rel_error == A.max_rel_error(x, y)
        assert m.mean_error == A.mean_error(x, y) and m.cosine == A.cosine_similarity(x, y)
        assert m.kl == A.kl_divergence(x, y)


def test_kl_equal_width_bins_count_like_explicit_edges() -> None:
    """The equal-width histogram path gives the counts of np.histogram on the same edges, values exactly on
    edges and at both ends included."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal(20000)
    edges = np.linspace(a.min(), a.max(), 129)
    a = np.concatenate([a, edges, edges[:1], edges[-1:]])
    b = np.round(a * 4) / 4
    lo, hi = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    e = np.linspace(lo, hi, 129)
    for v in (a, b):
        assert np.array_equal(np.histogram(v, 128, range=(e[0], e[-1]))[0], np.histogram(v, e)[0])
    p = np.histogram(a, e)[0] + 0.5
    q = np.histogram(b, e)[0] + 0.5
    p, q = p / p.sum(), q / q.sum()
    assert A.kl_divergence(a, b) == float(np.sum(p * np.log(p / q)))


def test_compare_progress_bar_per_scheme(capsys) -> None:
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    t = A.compare(x, ["mxfp4", "int8:axis=0"], progress=True)
    err = capsys.readouterr().err
    assert len(t) == 2 and "mxfp4" in err and "int8:axis=0" in err and f"{len(A.EVALUATE_STAGES)}/" in err
    A.compare(x, ["mxfp4"])
    assert capsys.readouterr().err == ""


def test_float_scaled_recipe_absmax_fast_equals_the_finite_formula() -> None:
    """max(max x, -min x) equals max over finite |x| (float64) per tensor and per axis; non-finite inputs take
    the general formula (None)."""
    rng = np.random.default_rng(0)
    for x in (rng.standard_normal((64, 33)).astype(np.float32), rng.standard_normal((5, 7, 9)),
              np.zeros((3, 4), np.float32), -np.ones((2, 3), np.float32)):
        for ax in (None, 0, 1, -1):
            got = _absmax_fast(x, ax)
            arr = x.astype(np.float64)
            fin = np.where(np.isfinite(arr), np.abs(arr), 0.0)
            want = np.asarray(fin.max()) if ax is None else np.moveaxis(fin, ax, 0).reshape(arr.shape[ax], -1).max(1)
            assert got is not None and got.shape == want.shape and np.array_equal(got, want)
    assert _absmax_fast(np.array([1.0, np.nan], np.float32), None) is None
    assert _absmax_fast(np.array([1, 2]), None) is None


def test_counts_refuses_codes_outside_the_element_table() -> None:
    import dataclasses

    x = np.linspace(-1, 1, 64, dtype=np.float32)
    q = qref.scheme("mxfp4").quantize(x)
    bad = dataclasses.replace(q, codes=np.full(q.codes.shape, 16, dtype=q.codes.dtype))
    with pytest.raises(QrefError, match=r"element codes must lie in \[0, 16\)"):
        A.counts(x, bad, np.zeros(x.shape))
