"""Block schemes: the OCP profile against an exact Fraction oracle written here, the clamp cases, the side-by-side
table of docs/spec/block.md §10, and the scheme API (axes, padding, errors, specs)."""

from __future__ import annotations

import bisect
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from test_block_cases import DTYPES, distributions

import qref
from qref.errors import QrefError

# ---------------------------------------------------------------------------------------------------------
# independent oracle: element value tables from the format definitions (OCP OFP8 / MX v1.0 §5.3), RNE by
# exact comparison, clamp to +-max (MX v1.0 §6.3), X = 2^(floor(log2 amax) - emax)
# ---------------------------------------------------------------------------------------------------------
# (exponent bits, mantissa bits, bias, codes that are not finite values) for each MX element format
FLOAT_ELEMENTS = {
    "mxfp8_e4m3": (4, 3, 7, {0x7F, 0xFF}),
    "mxfp8_e5m2": (5, 2, 15, {c for c in range(256) if (c >> 2) & 0x1F == 0x1F}),
    "mxfp6_e3m2": (3, 2, 3, set()),
    "mxfp6_e2m3": (2, 3, 1, set()),
    "mxfp4": (2, 1, 1, set()),
}


def float_table(E: int, M: int, bias: int, bad: set[int]) -> list[tuple[Fraction, int]]:
    """(value, code) of every finite code, from sign/exponent/mantissa (subnormals when e == 0)."""
    out = []
    for code in range(1 << (1 + E + M)):
        if code in bad:
            continue
        s, e, m = code >> (E + M), (code >> M) & ((1 << E) - 1), code & ((1 << M) - 1)
        v = Fraction(m, 1 << M) * Fraction(2) ** (1 - bias) if e == 0 else \
            (1 + Fraction(m, 1 << M)) * Fraction(2) ** (e - bias)
        out.append((-v if s else v, code))
    return out


def int8_table() -> list[tuple[Fraction, int]]:
    """MXINT8: k * 2^-6; the clamp to the max normal +-127/64 (MX v1.0 §6.3) never produces k = -128."""
    return [(Fraction(k, 64), k & 0xFF) for k in range(-127, 128)]


def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def oracle_block(vals: list[Fraction], negative: list[bool], table: list[tuple[Fraction, int]],
                 float_elem: bool) -> tuple[int, list[int]] | None:
    """(E8M0 byte, codes) for one finite block under OCP MX v1.0 §6.3 with RNE, or None if the spec leaves it
    open (amax = 0 or the scale exponent outside [-127, 127])."""
    top = max(c for _, c in table)
    sign = 1 << (top.bit_length() - 1) if float_elem else 0
    finite = [(v, c) for v, c in table if not (v == 0 and c == sign and float_elem)]  # one zero: +0
    vmax = max(v for v, _ in finite)
    emax = floor_log2(vmax)
    amax = max(abs(v) for v in vals)
    if amax == 0:
        return None
    e = floor_log2(amax) - emax
    if not -127 <= e <= 127:
        return None
    X = Fraction(2) ** e
    finite.sort()
    keys = [t for t, _ in finite]
    codes = []
    for v, neg in zip(vals, negative):
        p = max(min(v / X, vmax), -vmax)  # normal overflow clamps to the max normal, keeping the sign
        j = bisect.bisect_left(keys, p)
        cands = [finite[i] for i in (j - 1, j) if 0 <= i < len(finite)]
        best = min(abs(p - t) for t, _ in cands)
        cands = [(t, c) for t, c in cands if abs(p - t) == best]
        if len(cands) > 1:  # a tie: the even encoding (last bit 0)
            cands = [(t, c) for t, c in cands if c % 2 == 0]
        t, c = cands[0]
        if t == 0 and float_elem and neg:  # zero results keep the input's sign (IEEE 754 §6.3)
            c = sign
        codes.append(c)
    return e + 127, codes


def _fractions(x: np.ndarray) -> list[Fraction]:
    return [Fraction(float(v)) for v in x.astype(np.float64)]


def check_ocp(name: str, x: np.ndarray) -> int:
    """Compare qref's ocp profile with the oracle on every block of x (2-D, blocks along the last axis).
    Returns the number of blocks compared."""
    sch = qref.scheme(name, profile="ocp")
    q = sch.quantize(x)
    if name == "mxint8":
        table, float_elem = int8_table(), False
    else:
        table, float_elem = float_table(*FLOAT_ELEMENTS[name]), True
    k = 32
    compared = 0
    xb = x.reshape(-1, k)
    cb = q.codes.reshape(-1, k)
    sb = q.scales.reshape(-1)
    ub = q.unspecified.reshape(-1, k)
    sub = q.meta["scales_unspecified"].reshape(-1)
    for i in range(xb.shape[0]):
        blk = xb[i]
        if not np.isfinite(blk.astype(np.float64)).all():
            assert ub[i].all() and sub[i] and sb[i] == 255
            continue
        res = oracle_block(_fractions(blk), list(np.signbit(blk.astype(np.float64))), table, float_elem)
        if res is None:
            assert sub[i]
            if np.all(blk.astype(np.float64) == 0):  # zero blocks: codes are still the zeros of the inputs
                assert not ub[i].any()
            continue
        byte, codes = res
        assert not ub[i].any() and not sub[i]
        assert int(sb[i]) == byte, (name, i, blk, int(sb[i]), byte)
        assert [int(c) for c in cb[i]] == codes, (name, i, blk, cb[i].tolist(), codes)
        compared += 1
    return compared


MX_NAMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8")


@pytest.mark.parametrize("name", MX_NAMES)
@pytest.mark.parametrize("dtype", [*DTYPES, np.dtype(np.float64)], ids=lambda d: np.dtype(d).name)
def test_ocp_matches_exact_oracle(name: str, dtype: np.dtype) -> None:
    src = DTYPES[0] if dtype == np.float64 else dtype
    total = 0
    for arr in distributions(src, rows=4, cols=128, seed=11).values():
        x = arr.astype(np.float64) if dtype == np.float64 else arr
        total += check_ocp(name, x)
    assert total > 100


def test_ocp_float64_inputs_are_rounded_once() -> None:
    # 1.0625000000009663 lies just above the E4M3 midpoint 1.0625 between 1.0 and 1.125: the exact answer is 1.125
    x = np.zeros((1, 32))
    x[0, 0] = 1.0625000000009663
    x[0, 1] = 448.0
    q = qref.scheme("mxfp8_e4m3").quantize(x)
    assert int(q.scales[0, 0]) == 127 and int(q.codes[0, 0]) == 0x39  # 1.125 = 0 0111 001


# ---- the clamp cases (MX v1.0 §6.3: normal overflow clamps to the max normal) ----------------------------
@pytest.mark.parametrize("amax", [448.5, 464.0, 470.0, 480.0, 500.0, 511.9])
@pytest.mark.parametrize("k", [-20, 0, 7])
def test_e4m3_amax_between_448_and_512_clamps(amax: float, k: int) -> None:
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = amax * 2.0**k
    x[0, 1] = -amax * 2.0**k
    x[0, 2] = 3.0 * 2.0**k
    q = qref.scheme("mxfp8_e4m3", profile="ocp").quantize(x)
    assert int(q.scales[0, 0]) == 127 + k  # floor(log2 amax) = 8 = emax: X = 2^k
    assert int(q.codes[0, 0]) == 0x7E and int(q.codes[0, 1]) == 0xFE  # +-448
    assert int(q.codes[0, 2]) == 0x44  # 3.0 = 0 1000 100 exact
    assert q.dequantize()[0, 0] == np.float32(448 * 2.0**k)


@pytest.mark.parametrize(("amax", "expect"), [(6.5, 6.0), (7.0, 6.0), (7.99, 6.0), (5.0, 4.0), (5.5, 6.0),
                                              (3.5, 3.0), (1.75, 1.5), (0.875, 0.75)])
def test_e2m1_block_max_above_1_5_times_2k_clamps(amax: float, expect: float) -> None:
    x = np.zeros((2, 32), np.float32)
    x[0, 0] = amax
    x[1, 5] = -amax * 2.0**-30
    q = qref.scheme("mxfp4", profile="ocp").quantize(x)
    v = q.dequantize(np.float64)
    assert v[0, 0] == expect and v[1, 5] == -expect * 2.0**-30


# ---- side-by-side table (block.md §10) ---------------------------------------------------------------------
def _vals(name: str, profile: str, values: list[float], **kw: object) -> list[float]:
    x = np.zeros((1, 32), np.float32)
    x[0, : len(values)] = values
    sch = qref.scheme(name, profile=profile, **kw)
    return [float(v) for v in sch.quantize(x).dequantize(np.float32)[0, : len(values)]]


def test_side_by_side_table() -> None:
    row = [7.0, 3.5, 1.25]
    assert _vals("mxfp4", "ocp", row) == [6, 4, 1]
    assert _vals("mxfp4", "microxcaling", row) == [6, 4, 1.5]  # 1.25 is a tie: away from zero
    assert _vals("mxfp4", "torchao_floor", row) == [6, 4, 1]
    assert _vals("mxfp4", "torchao_rceil", row) == [8, 4, 1]
    assert _vals("mxfp4", "nvidia", row) == [8, 4, 1]
    assert _vals("mxfp4", "mlx", row) == [6, 3, 1]
    ties = [0.25, 0.75, 1.75, 2.5, 3.5, 5.0, 6.0]
    assert _vals("mxfp4", "ocp", ties) == [0, 1, 2, 2, 4, 4, 6]
    assert _vals("mxfp4", "microxcaling", ties) == [0.5, 1, 2, 3, 4, 6, 6]
    assert _vals("mxfp4", "mlx", ties) == [0, 0.5, 1.5, 2, 3, 4, 6]
    assert _vals("mxfp8_e4m3", "ocp", [470.0])[0] == 448
    for p in ("torchao_rceil", "mlx", "jax", "nvidia"):
        assert _vals("mxfp8_e4m3", p, [470.0])[0] == 480, p


def test_zero_block_scales_per_profile() -> None:
    x = np.zeros((2, 32), np.float32)
    expect = {"ocp": 0, "torchao_floor": 0, "torchao_rceil": 0, "mlx": 127, "jax": 0, "nvidia": 0,
              "microxcaling": 0}
    for p, b in expect.items():
        q = qref.scheme("mxfp8_e4m3", profile=p).quantize(x)
        assert (q.scales == b).all(), p
    # microxcaling's 2^-126 stand-in gives MXINT8 (emax 0) the exponent -126
    assert (qref.scheme("mxint8", profile="microxcaling").quantize(x).scales == 1).all()
    q = qref.scheme("mxfp8_e4m3").quantize(x)
    assert q.meta["scales_unspecified"].all() and not q.unspecified.any()


def test_nonfinite_blocks_ocp() -> None:
    x = np.ones((3, 32), np.float32)
    x[0, 3] = np.nan
    x[1, 4] = -np.inf
    q = qref.scheme("mxfp4").quantize(x)
    assert q.scales.tolist() == [[255], [255], [125]]  # amax 1 = 2^0, emax 2: X = 2^-2
    assert q.unspecified[:2].all() and not q.unspecified[2].any()
    v = q.dequantize()
    assert np.isnan(v[:2]).all() and (v[2] == 1).all()


def test_negative_zero_and_tiny_negatives_keep_sign() -> None:
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [-0.0, -1e-3, 4.0, -0.2]
    q = qref.scheme("mxfp4").quantize(x)
    assert q.codes[0, :4].tolist() == [0x8, 0x8, 0x6, 0x8]
    qm = qref.scheme("mxfp4", profile="mlx").quantize(x)
    assert qm.codes[0, :4].tolist() == [0x0, 0x0, 0x6, 0x0]


# ---- NVFP4 -------------------------------------------------------------------------------------------------
def test_nvfp4_profiles_on_a_small_block() -> None:
    x = np.zeros((1, 16), np.float32)
    x[0, :4] = [0.05, 0.75, 1.75, -0.01]
    # single level: s = e4m3(1.75 / 6 = 0.2917) = 0.28125 (0x29); torchao clamps tiny scales to 2^-6
    for p in ("mlx", "jax", "torchao_floor"):
        assert int(qref.scheme("nvfp4", profile=p).quantize(x).scales[0, 0]) == 0x29, p
    y = np.full((1, 16), 0.05, np.float32)
    assert int(qref.scheme("nvfp4", profile="torchao_floor").quantize(y).scales[0, 0]) == 0x08
    assert int(qref.scheme("nvfp4", profile="mlx").quantize(y).scales[0, 0]) == 0x04
    q = qref.scheme("nvfp4").quantize(x)  # nvidia: g = 1.75, S_enc = 2688 / 1.75 = 1536
    assert q.global_scale == np.float32(1.75)
    assert int(q.scales[0, 0]) == 0x7E  # 1.75 * 1536 / 6 = 448
    v = q.dequantize(np.float32)[0, :4]
    # TransformerEngine's dequantize: fl32(P * fl32(fl32(s * g) * fl32(1 / 2688)))
    f = np.float32(np.float32(448) * np.float32(1.75)) * np.float32(1 / 2688)
    assert v.tolist() == [0.0, float(np.float32(3) * f), float(np.float32(6) * f), -0.0]


def test_nvfp4_two_level_tie_depends_on_the_order_of_operations() -> None:
    # global scale 0.37 (not a power of two): x = 1.75 * 0.37 * 1.25 style ties split the systems
    x = np.zeros((1, 16), np.float32)
    x[0, 0] = -0.578125
    x[0, 1] = 2.75
    a = qref.scheme("nvfp4", profile="jax").quantize(x, global_scale=np.float32(0.37)).codes[0, 0]
    b = qref.scheme("nvfp4", profile="jax", scale_arith="divide",
                    quotient_arith="divide").quantize(x, global_scale=np.float32(0.37)).codes[0, 0]
    assert (int(a), int(b)) == (0xB, 0xA)  # jit: x * (1/gs * 1/s) rounds past the tie to -1.5; eager: -1.0


def test_nvfp4_exact_rule() -> None:
    x = np.array([[6.0, 3.0, 0.75, 0.25] + [0.0] * 12], np.float32)
    q = qref.scheme("nvfp4", profile="ocp").quantize(x)
    assert int(q.scales[0, 0]) == 0x38  # 1.0
    assert q.codes[0, :4].tolist() == [7, 5, 2, 0]
    with pytest.raises(QrefError, match="float64"):
        qref.scheme("nvfp4", profile="ocp").quantize(x.astype(np.float64))


# ---- API ---------------------------------------------------------------------------------------------------
def test_blocks_along_any_axis() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 3, 5)).astype(np.float32)
    sch = qref.scheme("mxfp8_e5m2")
    q0 = sch.quantize(x, axis=0)
    assert q0.codes.shape == x.shape and q0.scales.shape == (2, 3, 5) and q0.axis == 0
    qt = sch.quantize(np.moveaxis(x, 0, -1), axis=-1)
    assert (np.moveaxis(qt.codes, -1, 0) == q0.codes).all()
    assert (np.moveaxis(qt.scales, -1, 0) == q0.scales).all()
    assert (q0.dequantize().view(np.uint32) == np.moveaxis(qt.dequantize(), -1, 0).view(np.uint32)).all()


def test_padding_and_errors_per_profile() -> None:
    x = np.arange(40, dtype=np.float32).reshape(1, 40) / 7
    q = qref.scheme("mxfp4").quantize(x)  # ocp pads with +0
    full = np.concatenate([x, np.zeros((1, 24), np.float32)], axis=1)
    qf = qref.scheme("mxfp4").quantize(full)
    assert q.codes.shape == (1, 40) and q.scales.shape == (1, 2)
    assert (q.codes == qf.codes[:, :40]).all() and (q.scales == qf.scales).all()
    assert q.dequantize().shape == (1, 40)
    for p in ("mlx", "torchao_floor", "torchao_rceil", "nvidia"):
        with pytest.raises(QrefError, match="not a multiple of block_size 32"):
            qref.scheme("mxfp4", profile=p).quantize(x)
    with pytest.raises(QrefError, match="at least 2"):
        qref.scheme("mxfp4", profile="mlx").quantize(np.ones(32, np.float32))


def test_scheme_errors() -> None:
    with pytest.raises(QrefError, match="supports"):
        qref.scheme("mxfp6_e3m2", profile="mlx")
    with pytest.raises(QrefError, match="block sizes"):
        qref.scheme("mxfp4", profile="mlx", block_size=64)
    with pytest.raises(QrefError, match="no float_scale rules"):
        qref.scheme("nvfp4", profile="microxcaling")
    with pytest.raises(qref.UnknownNameError, match="scale_rule"):
        qref.scheme("mxfp4", scale_rul="floor")
    with pytest.raises(qref.UnknownNameError, match="ceil"):
        qref.scheme("mxfp4", scale_rule="cei")
    with pytest.raises(QrefError, match="bits"):
        qref.scheme("mlx_affine", bits=7)
    with pytest.raises(QrefError, match="block_size"):
        qref.scheme("mxfp4", block_size=0)
    with pytest.raises(QrefError, match="global scale"):
        qref.scheme("mxfp4").quantize(np.ones((1, 32)), global_scale=1.0)
    with pytest.raises(qref.UnknownNameError):
        qref.get_profile("ocpp", "block")


def test_generic_format_with_block_size() -> None:
    sch = qref.scheme("float8_e4m3fn", block_size=32, scale_format="float8_e8m0fnu")
    named = qref.scheme("mxfp8_e4m3")
    assert sch.kind == "mx" and sch.element == named.element and sch.profile == "ocp"
    x = distributions(DTYPES[0], 2, 128, 5)["normal"]
    assert (sch.quantize(x).codes == named.quantize(x).codes).all()
    fs = qref.scheme("float4_e2m1fn", block_size=16, scale_format="float8_e4m3fn")
    assert fs.kind == "float_scale" and fs.global_scale_rule == "exact"
    assert qref.scheme("float6_e2m3fn", block_size=8).scale_format.name == "float8_e8m0fnu"


def test_spec_round_trip_and_overrides() -> None:
    for name, kw in [("mxfp4", {"profile": "mlx"}), ("mxint8", {"profile": "microxcaling"}),
                     ("nvfp4", {"profile": "jax", "scale_arith": "divide"}),
                     ("mlx_affine", {"bits": 3, "group_size": 128}), ("mxfp8_e5m2", {"profile": "torchao_rceil"}),
                     ("float4_e2m1fn", {"block_size": 16, "scale_format": "float8_e4m3fn", "profile": "nvidia"})]:
        sch = qref.scheme(name, **kw)
        spec = sch.to_spec()
        assert qref.scheme_from_spec(spec) == sch
        assert spec["family"] == "block"
    s = qref.scheme("mxfp4", profile="ocp", rounding="nearest_away")
    assert s.rounding == "nearest_away" and s.scale_rule == "floor"
    assert qref.scheme("mxint8").element.name == "int8<-127:127>"


def test_profiles_are_registered() -> None:
    names = set(qref.profiles("block"))
    assert {"ocp", "microxcaling", "torchao_floor", "torchao_rceil", "mlx", "jax", "nvidia"} <= names
    for p in qref.profiles("block").values():
        assert p.sources and p.description


def test_scale_rules_side_by_side() -> None:
    # amax = 448 * 16 * (1 + 2^-23): exact rceil gives 2^5, the float32 log2 of torchao gives 2^4
    a = np.float32(448 * 16) * np.float32(1 + 2**-23)
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = a
    exp = {"floor": 12 - 8, "ceil": 13 - 8, "even": 12 - 8, "rceil": 5}
    for rule, e in exp.items():
        s = qref.scheme("mxfp8_e4m3", scale_rule=rule)
        assert int(s.quantize(x).scales[0, 0]) == 127 + e, rule
    tr = qref.scheme("mxfp8_e4m3", profile="torchao_rceil")
    assert int(tr.quantize(x).scales[0, 0]) == 127 + 4
    # EVEN rounds amax to the element's mantissa width first: 448 * 2^-8 * 1.99 -> 2^1
    x[0, 0] = np.float32(1.99)
    assert int(qref.scheme("mxfp8_e4m3", scale_rule="even").quantize(x).scales[0, 0]) == 127 + 1 - 8


def test_mlx_wraps_tiny_scales_and_jax_clamps() -> None:
    x = np.full((1, 32), 1e-40, np.float32)
    q = qref.scheme("mxfp4", profile="mlx").quantize(x)
    assert int(q.scales[0, 0]) == (-135 + 127) % 256  # e = ceil(log2(1e-40 / 6)) = -135 wraps to 248
    assert q.codes[0, 0] == 6  # the elements use the true exponent: 1e-40 / 2^-135 = 4.36 -> 4
    x16 = np.full((1, 32), 1e-7, np.float16)
    assert int(qref.scheme("mxfp4", profile="mlx").quantize(x16).scales[0, 0]) == 127  # fl16(amax/6) = 0


def test_bfloat16_and_float16_inputs_dequantize_in_dtype() -> None:
    x = distributions(DTYPES[2], 2, 64, 8)["normal"]
    q = qref.scheme("mxfp8_e4m3", profile="mlx").quantize(x)
    v = q.dequantize(ml_dtypes.bfloat16)
    assert v.dtype == ml_dtypes.bfloat16 and v.shape == x.shape
    assert q.meta["input_dtype"] == "bfloat16"


SYSTEM_WORDS = {"mlx", "jax", "nvidia", "torchao", "ml_dtypes", "microxcaling", "transformer", "engine", "te",
                "xla", "cuda", "cublas", "torch", "pytorch", "onnx", "tflite", "qwix", "aqt"}


def _walk(v: object) -> list[object]:
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return [x for f in dataclasses.fields(v) for x in _walk(getattr(v, f.name))]
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _walk(e)]
    return [v]


def test_block_profile_records_are_typed_and_name_mechanisms() -> None:
    """Every block profile holds one BlockRules record whose field values name mechanisms, never systems; every
    kind it offers builds a scheme; verified and peer_vectors records cite a test file that exists."""
    from pathlib import Path

    from qref.profiles.block import BlockRules, rules_of

    root = Path(__file__).parent.parent
    recs = qref.profiles("block")
    assert {"ocp", "microxcaling", "nvidia", "transformer_engine_reference"} <= set(recs)
    for key, prof in recs.items():
        rules = rules_of(prof)
        assert isinstance(rules, BlockRules) and rules is prof.rules, key
        for v in _walk(rules):
            if isinstance(v, str) and not v.startswith(("float", "int", "uint")):
                assert not set(v.split("_")) & SYSTEM_WORDS, (key, v)
        for kind, name in (("mx", "mxfp8_e4m3"), ("float_scale", "nvfp4"), ("affine", "mlx_affine")):
            if rules.kind(kind) is not None:  # every profile with MX rules offers E4M3, with float rules NVFP4
                k = (rules.support(kind).block_sizes or (None,))[0]  # a system's own block size (DeepSeek: 128)
                kw = {"block_size": k} if k is not None and kind != "affine" else {}
                assert qref.scheme(name, profile=prof.name, **kw).kind == kind
        if prof.status in ("verified", "peer_vectors"):
            tests = [w for e in prof.evidence for w in e.replace(",", " ").split() if w.startswith("tests/")]
            assert tests and all((root / t.rstrip(":")).exists() for t in tests), (key, tests)
        assert prof.status != "verified" or prof.package, key


def test_microxcaling_scaled_integer_step_examples() -> None:
    """block.md §4.7.1: the round-half step and the element exponent in float32 (values checked against
    microxcaling's quantize_mx_op by tests/test_block_peers.py)."""
    def vals(name: str, x1: float, amax: float, **kw: object) -> tuple[float, float]:
        x = np.zeros((1, 32), np.float32)
        x[0, 0], x[0, 1] = amax, x1
        out = {}
        for p in ("microxcaling", "ocp"):
            extra = dict(kw) if p == "microxcaling" else {"rounding": kw.get("rounding", "nearest_away")}
            s = qref.scheme(name, profile=p, **extra)
            out[p] = float(s.dequantize(s.quantize(x))[0, 1])
        return out["microxcaling"], out["ocp"]

    assert vals("mxfp4", float(np.float32(0.25 - 2.0**-26)), 6.0) == (0.5, 0.0)
    mxx, exact = vals("mxint8", -float(np.float32(2.0**-7 - 2.0**-31)), 1.5)
    assert mxx == -2.0**-6 and exact == 0.0
    assert vals("mxfp8_e4m3", float(np.float32(8 * (1 - 2.0**-24))), 400.0, rounding="toward_zero") == (7.0, 7.5)
