"""Training recipes on one linear layer (recipes.md §13): each GEMM's operands in their reduction-last layouts,
held to the real code's peer vectors at the recipe level (TransformerEngine's blockwise reference, torchao's
float8 casts, TE's random Hadamard transform), the GEMMs exact with their bounds, and the stochastic operand
rounding held to its block scheme with the documented random-bit streams (recipes.md §13.3)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.core.encode import random_bits_from_seed
from qref.recipes.linear import (
    GEMMS,
    RECIPES,
    TE_WGRAD_SIGNS,
    OperandRule,
    TrainingRecipe,
    get_recipe,
    linear_step,
)
from qref.recipes.multiplier import TORCHAO_FLOAT8

PEERS = Path(__file__).parent / "peers"
DT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def _load(name: str) -> dict[str, np.ndarray]:
    with np.load(PEERS / name / "vectors.npz", allow_pickle=False) as z:
        return dict(z)


def _nan_equal(got: np.ndarray, want: np.ndarray, fmt: str) -> bool:
    f = qref.get_format(fmt)
    g = np.isnan(qref.decode(got, f, dtype=np.float32))
    w = np.isnan(qref.decode(want.astype(np.uint8), f, dtype=np.float32))
    return bool(((got == want) | (g & w)).all())


def _small(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((128, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) * 0.05).astype(np.float32)
    g = (rng.standard_normal((128, 128)) * 1e-3).astype(np.float32)
    return x, w, g


def test_te_block_scaling_operands_equal_the_te_reference() -> None:
    """fprop and dgrad operands of transformer_engine_float8_block_scaling: x and dy 1 x 128, w 128 x 128 (pow2,
    E4M3) equal TE's BlockwiseQuantizerReference codes and scale_inv on its 256 x 256 peer tensors."""
    z = _load("transformer_engine_blockwise")
    r = get_recipe("transformer_engine_float8_block_scaling")
    for t in ("float32__tiles_a__0", "bfloat16__tiles_c__0"):
        x = z[f"{t}__x"].view(DT[t.split("__")[0]])
        (rx, rw), (rdy, _) = r.fprop, r.dgrad
        _, ox = rx.quantize(x)
        _, ow = rw.quantize(x)
        _, odyt = rdy.quantize(x)
        assert _nan_equal(ox["codes"], z[f"{t}__t1x128_e4m3_pow2__codes"], "float8_e4m3fn")
        assert np.array_equal(ox["scales"].view(np.uint32), z[f"{t}__t1x128_e4m3_pow2__scale_inv"])
        assert _nan_equal(ow["codes"], z[f"{t}__t128x128_e4m3_pow2__codes"], "float8_e4m3fn")
        assert np.array_equal(ow["scales"].view(np.uint32), z[f"{t}__t128x128_e4m3_pow2__scale_inv"])
        assert np.array_equal(odyt["codes"], ox["codes"])


def test_torchao_rowwise_operands_equal_torchao() -> None:
    """torchao_float8_rowwise: the fprop operand x (rows along K) is torchao's dim -1 cast, and the wgrad operand
    xᵀ (rows along M) is torchao's dim 0 cast of x, transposed."""
    z = _load("torchao_float8")
    r = get_recipe("torchao_float8_rowwise")
    for t in ("float32__normal__0", "bfloat16__student_t__0"):
        x = z[f"{t}__x"].view(DT[t.split("__")[0]])
        _, o = r.fprop[0].quantize(x)
        assert _nan_equal(o["codes"], z[f"{t}__rowwise_e4m3_pow2_dim-1__codes"], "float8_e4m3fn")
        assert np.array_equal(o["scales"].reshape(-1).view(np.uint32),
                              z[f"{t}__rowwise_e4m3_pow2_dim-1__scale"].reshape(-1))
        _, ot = r.wgrad[1].quantize(np.ascontiguousarray(x.T))
        assert _nan_equal(ot["codes"].T, z[f"{t}__rowwise_e4m3_pow2_dim0__codes"], "float8_e4m3fn")
        assert np.array_equal(ot["scales"].reshape(-1).view(np.uint32),
                              z[f"{t}__rowwise_e4m3_pow2_dim0__scale"].reshape(-1))


def test_torchao_tensorwise_operands_equal_torchao() -> None:
    z = _load("torchao_float8")
    r = get_recipe("torchao_float8_tensorwise")
    t = "float32__normal__0"
    x = z[f"{t}__x"].view(np.float32)
    _, o = r.fprop[0].quantize(x)
    assert _nan_equal(o["codes"], z[f"{t}__tensorwise_e4m3__codes"], "float8_e4m3fn")
    _, og = r.dgrad[0].quantize(x)
    assert _nan_equal(og["codes"], z[f"{t}__tensorwise_e5m2__codes"], "float8_e5m2")


def test_nvfp4_wgrad_operand_is_te_rht_then_nvfp4() -> None:
    """The NVFP4 recipe's wgrad operand (RHT 16 with TE's signs along the reduction axis, then 1 x 16 NVFP4 under
    transformer_engine_reference) equals TE's NVFP4QuantizerRef(with_rht=True) columnwise codes and scales."""
    man = json.loads((PEERS / "transformer_engine_rht" / "manifest.json").read_text())
    assert man["commit"].startswith("d0067d0")
    z = _load("transformer_engine_rht")
    assert tuple(int(v) for v in z["signs"].reshape(-1)) == TE_WGRAD_SIGNS
    r = get_recipe("transformer_engine_nvfp4_block_scaling").with_rounding("nearest_even")
    keys = [k for k in z if k.endswith("__x")]
    n = 0
    for k in keys:
        t = k[: -len("__x")]
        codes_key = f"{t}__nvfp4_codes_t"
        if t.split("__")[1] in ("nan", "inf"):  # NaN / Inf tensors: the NaN code signs are unspecified
            continue
        x = z[k].view(DT[t.split("__")[0]])
        _, o = r.wgrad[1].quantize(np.ascontiguousarray(x.T))
        want = z[codes_key]
        got = np.asarray(o["qarray"].codes)
        assert got.shape == want.shape, (codes_key, got.shape, want.shape)
        assert np.array_equal(got, want), codes_key
        assert np.array_equal(np.asarray(o["qarray"].scales), z[f"{t}__nvfp4_scales_t"]), t
        n += got.size
    assert n == 36 * 64 * 128


def test_linear_step_gemms_are_exact_with_bounds() -> None:
    """With every cast 'none' the GEMMs are the exact products of the inputs: on multiples of 1/8 below 8 every
    float64 sum is exact, so the exact result equals numpy's float64 product bit for bit, and the float32 value is
    its one rounding; each result lies inside its bound; the layouts chain: dgrad is dy w, wgrad dyᵀ x."""
    rng = np.random.default_rng(1)
    x, w, g = (rng.integers(-63, 64, shape).astype(np.float32) / 8 for shape in ((8, 16), (4, 16), (8, 4)))
    none = OperandRule("none")
    r = TrainingRecipe("plain", fprop=(none, none), dgrad=(none, none), wgrad=(none, none))
    st = linear_step(x, w, g, r)
    for k, ref in st.reference.items():
        res = st.results[k]
        assert np.array_equal(res.correctly_rounded("float64").view(np.uint64), ref.view(np.uint64)), k
        assert np.array_equal(np.asarray(res.value, np.float32).view(np.uint32),
                              ref.astype(np.float32).view(np.uint32)), k
        assert res.within(res.value).all()
    assert st.reference["dgrad"].shape == (8, 16) and st.reference["wgrad"].shape == (4, 16)


def test_rht_leaves_the_wgrad_product() -> None:
    """A Hadamard transform on both wgrad operands (no cast) changes the product only by the transform's
    roundings: orthonormal, (H D a)·(H D b) = a·b."""
    x, w, g = _small(2)
    none = OperandRule("none")
    rht = OperandRule("none", hadamard=16, hadamard_signs=TE_WGRAD_SIGNS)
    r = TrainingRecipe("rht", fprop=(none, none), dgrad=(none, none), wgrad=(rht, rht))
    st = linear_step(x[:32, :8], w[:4, :8], g[:32, :4], r, gemm="float64")
    got, ref = st.results["wgrad"], st.reference["wgrad"]
    # a bound, not a bit claim: each transformed operand carries one float32 rounding (relative 2^-24,
    # transforms.md) and each float64 product of K terms at most K 2^-53 of sum |a||b| (the transform is exact in
    # exact arithmetic: H / 4 and the signs are exact), so |got - ref| <= (2^-23 + 2^-48 + K 2^-52) sum |a_k b_k|
    a, b = st.values["wgrad"]
    bound = (2.0**-23 + 2.0**-48 + a.shape[1] * 2.0**-52) * (np.abs(a) @ np.abs(b).T)
    assert (np.abs(got - ref) <= bound).all() and not np.array_equal(got, ref)
    assert not np.array_equal(st.values["wgrad"][0], np.ascontiguousarray(g[:32, :4].T).astype(np.float64))


def test_every_recipe_runs_and_declares_its_rules() -> None:
    x, w, g = _small(3)
    for name, r in RECIPES.items():
        stoch = any(op.rounding.startswith("stochastic") for gm in (r.fprop, r.dgrad, r.wgrad) for op in gm)
        if stoch:
            with pytest.raises(qref.QrefError, match="stochastic"):
                linear_step(x, w, g, r, gemm="float64")
            r = r.with_rounding("nearest_even")
        st = linear_step(x, w, g, r, gemm="float64")
        for k, ref in st.reference.items():
            rel = np.linalg.norm(st.results[k] - ref) / np.linalg.norm(ref)
            assert 1e-4 < rel < 0.3, (name, k, rel)  # quantized (not exact), and not broken
        assert r.source and r.status in ("peer_vectors", "modelled")
    with pytest.raises(qref.QrefError, match="training recipe"):
        get_recipe("nope")
    with pytest.raises(qref.QrefError, match="shapes do not chain"):
        linear_step(x, w[:, :64], g, RECIPES["torchao_float8_rowwise"])


# ---------------------------------------------------------------------------------------------------------
# GEMMs on a matrix-unit model (recipes.md §13.2)
# ---------------------------------------------------------------------------------------------------------
HOPPER_E4M3 = "Hopper/wgmma/m64n8k32.f32.e4m3.e4m3"
HOPPER_E5M2_E4M3 = "Hopper/wgmma/m64n8k32.f32.e5m2.e4m3"
MXF8 = "RTX Blackwell/mma.block_scale/m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0"
NVF4 = "RTX Blackwell/mma.block_scale/m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"
MMA_CASES = {
    "deepseek_v3_fp8": HOPPER_E4M3,
    "transformer_engine_float8_block_scaling": "Blackwell/tcgen05.mma/m64n8k32.kind::f8f6f4.f32.e4m3.e4m3",
    "torchao_float8_tensorwise": {"fprop": HOPPER_E4M3, "dgrad": HOPPER_E5M2_E4M3, "wgrad": HOPPER_E5M2_E4M3},
    "torchao_float8_rowwise": HOPPER_E4M3,
    "transformer_engine_mxfp8_block_scaling": MXF8,
    "transformer_engine_nvfp4_block_scaling": NVF4,
}


def _llm(rng: np.random.Generator, shape: tuple[int, int], scale: float) -> np.ndarray:
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal((shape[0], 1)))
    x[rng.random(shape) < 0.003] *= 50.0  # outliers
    return (x * scale).astype(np.float32)


@pytest.fixture(scope="module")
def mma_steps() -> dict[str, object]:
    rng = np.random.default_rng(11)
    x, w, g = _llm(rng, (128, 128), 1.0), _llm(rng, (128, 128), 0.05), _llm(rng, (128, 128), 1e-3)
    out = {}
    for name, model in MMA_CASES.items():
        r = get_recipe(name).with_rounding("nearest_even")
        out[name] = linear_step(x, w, g, r, mma=model)
    return out


def _rows(scales: np.ndarray, tile: tuple[int | None, int | None], rows: int) -> np.ndarray:
    """Per-tile scales (row tiles, K tiles) repeated to one row each."""
    rep = rows if tile[0] is None else tile[0]
    return np.repeat(np.asarray(scales), rep, axis=0)[:rows]


def _by_hand(name: str, step: object, g: str) -> np.ndarray:
    """The GEMM built directly with qref.mma.matmul from the recipe's quantized operands (independent of
    linear_step's mapping code): codes, scales and the epilogue / promotion as recipes.md §13.2 states them."""
    import ml_dtypes as mld

    import qref.mma as qm

    model = MMA_CASES[name]
    ins = qm.get(*(model[g] if isinstance(model, dict) else model).split("/"))
    ra, rb = getattr(step.recipe, g)
    oa, ob = step.operands[g]
    if ra.cast == "block":
        qa, qb = oa["qarray"], ob["qarray"]
        A = np.asarray(qa.codes).view(getattr(mld, ins.a_format))
        B = np.ascontiguousarray(np.asarray(qb.codes).T).view(getattr(mld, ins.b_format))
        sdt = mld.float8_e8m0fnu if ins.scale_format == "float8_e8m0fnu" else mld.float8_e4m3fn
        sa = _rows(qa.scales, ra.tile, A.shape[0]).view(sdt)
        sb = np.ascontiguousarray(_rows(qb.scales, rb.tile, B.shape[1]).T).view(sdt)
        d = qm.matmul(A, B, instruction=ins, scale_a=sa, scale_b=sb)
        if qa.global_scale is None:
            return d
        inv = np.float32(1) / np.float32(6 * 448)
        f = np.float32(np.float32(qa.global_scale) * inv) * np.float32(np.float32(qb.global_scale) * inv)
        return (d * np.float32(f)).astype(np.float32)
    A = oa["codes"].view(getattr(mld, ins.a_format))
    B = np.ascontiguousarray(ob["codes"].T).view(getattr(mld, ins.b_format))

    def dequant_scale(rule: OperandRule, o: dict[str, np.ndarray], rows: int) -> np.ndarray:
        per_tile = o["scales"] if rule.cast == "division" else np.float32(1) / o["multipliers"]
        return _rows(per_tile.astype(np.float32), rule.tile, rows)

    da, db = dequant_scale(ra, oa, A.shape[0]), dequant_scale(rb, ob, B.shape[1])
    if ra.tile[1] is None:  # whole-K scales: after the unit, RN32(D * RN32(da db))
        d = qm.matmul(A, B, instruction=ins)
        return (d * (da[:, :1] * db[:, :1].T)).astype(np.float32)
    t = ra.tile[1]
    return qm.matmul(A, B, instruction=ins, promote_every=t, promote_scale_a=da,
                     promote_scale_b=np.ascontiguousarray(db.T))


@pytest.mark.parametrize("name", list(MMA_CASES))
def test_mma_gemms_equal_qref_mma_matmul_and_lie_within_their_bound(name: str, mma_steps: dict) -> None:
    """Each GEMM of linear_step(mma=...) equals qref.mma.matmul called by hand on the same codes and scales (bit
    for bit), and lies within its declared bound of the exact result of the operands as the unit reads them;
    the bound is no vacuous over-estimate (some error reaches 1/1000 of it) and the unit is not exact here."""
    from fractions import Fraction

    st = mma_steps[name]
    n = 0
    for g in GEMMS:
        res = st.results[g]
        want = _by_hand(name, st, g)
        assert np.array_equal(res.value.view(np.uint32), want.view(np.uint32)), (name, g)
        assert not res.unspecified.any() and not res.is_special.any()
        assert res.within(res.value).all()
        exact = res.correctly_rounded("float64")
        err = np.abs(res.value.astype(np.float64) - exact)
        assert (err > 0).any() and (err / np.where(res.bound > 0, res.bound, 1)).max() > 1e-3, (name, g)
        # independent of the dyadic arithmetic: a sample of results against Fractions of the operand values (where
        # the unit reads the values linear_step reports: division casts and power-of-two multipliers, C2)
        if name in ("deepseek_v3_fp8", "transformer_engine_float8_block_scaling", "torchao_float8_rowwise"):
            ua, ub = st.values[g]
            for i, j in ((0, 0), (5, 77), (127, 127)):
                ex = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(ua[i], ub[j]))
                assert abs(Fraction(float(res.value[i, j])) - ex) <= Fraction(float(res.bound[i, j]))
        n += res.value.size
    assert n == 3 * 128 * 128


def test_mma_gemm_is_exact_where_the_unit_sums_exactly() -> None:
    """Values ±256 / ±448 with a 448 in every 1 x 128 tile, 128 x 1 tile and 128 x 128 block: every DeepSeek
    scale is 1, every code exact, every wgmma product a multiple of 2^12 and every sum below 2^25, so Hopper's
    13-bit truncating unit loses nothing: the declared bound is 0 and the value equals the exact product (numpy's
    float64 matmul of integers below 2^53, computed here). Spread the exponents and the unit truncates."""
    rng = np.random.default_rng(3)
    n = 128
    ij = np.add.outer(np.arange(n), np.arange(n)) % n == 0

    def tensor() -> np.ndarray:
        v = rng.choice([-448.0, -256.0, 256.0, 448.0], (n, n))
        return np.where(ij, 448.0, v).astype(np.float32)

    x, w, g = tensor(), tensor(), tensor()
    for name in ("deepseek_v3_fp8", "deepseek_v3_1_fp8"):
        st = linear_step(x, w, g, get_recipe(name), mma=HOPPER_E4M3)
        for k, ref in st.reference.items():
            res = st.results[k]
            assert (res.bound == 0).all(), (name, k)
            assert np.array_equal(res.value.astype(np.float64), ref), (name, k)  # every sum is exact here
    x2 = (x * np.exp2(rng.integers(-12, 12, (n, n)))).astype(np.float32)
    st = linear_step(x2, w, g, get_recipe("deepseek_v3_fp8"), mma={"fprop": HOPPER_E4M3})
    res = st.results["fprop"]
    assert (res.bound > 0).all() and res.within(res.value).all()
    assert (res.value != res.correctly_rounded()).any()  # the unit truncates (F = 13)


def _rn32(v: object) -> np.float32:
    """One rounding of an exact Fraction to float32 (nearest even), by integer arithmetic."""
    from fractions import Fraction

    f = Fraction(v)
    if f == 0:
        return np.float32(0.0)
    s = -1 if f < 0 else 1
    f = abs(f)
    e = f.numerator.bit_length() - f.denominator.bit_length()
    while Fraction(2) ** e > f:
        e -= 1
    while Fraction(2) ** (e + 1) <= f:
        e += 1
    q = max(e, -126) - 23  # the float32 quantum
    m = f / Fraction(2) ** q
    r = m.numerator // m.denominator
    rem = m - r
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r % 2):
        r += 1
    return np.float32(s * float(Fraction(r) * Fraction(2) ** q))


def test_deepseek_fprop_on_hopper_equals_mmasim_promoted_every_128() -> None:
    """Cross-check with the independent oracle: the fprop GEMM of deepseek_v3_1_fp8 on Hopper's wgmma equals
    mmasim 2.1.1's instruction chained over each 128 of K, promoted as acc = RN32(s_a s_b D + acc) (computed here
    with Fractions) from the recipe's own codes and scales."""
    from fractions import Fraction

    pytest.importorskip("mmasim")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import test_recipes_mma as TM

    import qref.mma as qm

    ins = qm.get(*HOPPER_E4M3.split("/"))
    rng = np.random.default_rng(4)
    x, w, g = _llm(rng, (128, 256), 1.0), _llm(rng, (16, 256), 0.05), _llm(rng, (128, 16), 1e-3)
    for name in ("deepseek_v3_fp8", "deepseek_v3_1_fp8"):
        st = linear_step(x, w, g, get_recipe(name), mma={"fprop": ins})
        oa, ob = st.operands["fprop"]
        A = oa["codes"].view(ml_dtypes.float8_e4m3fn)
        B = np.ascontiguousarray(ob["codes"].T).view(ml_dtypes.float8_e4m3fn)
        sa, sb = oa["scales"], np.repeat(ob["scales"], 128, axis=0)[:16]  # (128, 2) and (16, 2)
        acc = np.zeros((128, 16), np.float32)
        for p in range(2):
            d = TM._mmasim_chain(ins, A[:, 128 * p:128 * (p + 1)], B[128 * p:128 * (p + 1)])
            for i in range(128):
                for j in range(16):
                    s = _rn32(Fraction(float(sa[i, p])) * Fraction(float(sb[j, p])))
                    acc[i, j] = _rn32(Fraction(float(s)) * Fraction(float(d[i, j])) + Fraction(float(acc[i, j])))
        got = st.results["fprop"].value
        assert np.array_equal(got.view(np.uint32), acc.view(np.uint32)), name


def test_mma_mapping_errors_name_the_fix() -> None:
    rng = np.random.default_rng(6)
    x, w, g = _llm(rng, (128, 128), 1.0), _llm(rng, (128, 128), 0.05), _llm(rng, (128, 128), 1e-3)
    ds = get_recipe("deepseek_v3_fp8")
    with pytest.raises(qref.QrefError, match="pick the instruction of those formats"):
        linear_step(x, w, g, ds, mma="Hopper/wgmma/m64n8k32.f32.e5m2.e5m2")
    with pytest.raises(qref.QrefError, match="block-cast operands"):
        linear_step(x, w, g, ds, mma=MXF8)
    with pytest.raises(qref.QrefError, match="block_scale instruction"):
        linear_step(x, w, g, get_recipe("transformer_engine_mxfp8_block_scaling"), mma=HOPPER_E4M3)
    with pytest.raises(qref.QrefError, match="not a multiple of the scale tile"):
        linear_step(x[:, :64], w[:, :64], g, ds, mma={"fprop": HOPPER_E4M3})
    with pytest.raises(qref.QrefError, match="promotes every 128"):
        import qref.mma as qm

        linear_step(x, w, g, ds, mma=qm.MMAAccumulation(qm.get(*HOPPER_E4M3.split("/")), promote_every=64))
    with pytest.raises(qref.QrefError, match="gemm='exact'"):
        linear_step(x, w, g, ds, mma=HOPPER_E4M3, gemm="float64")
    with pytest.raises(qref.QrefError, match="not GEMMs"):
        linear_step(x, w, g, ds, mma={"forward": HOPPER_E4M3})
    with pytest.raises(qref.QrefError, match=r"a qref\.mma Instruction"):
        linear_step(x, w, g, ds, mma=3)
    none = OperandRule("none")
    plain = TrainingRecipe("plain", fprop=(none, none), dgrad=(none, none), wgrad=(none, none))
    bf = x.astype(ml_dtypes.bfloat16)
    with pytest.raises(qref.QrefError, match="NVIDIA fused families"):
        linear_step(bf, w.astype(ml_dtypes.bfloat16), g.astype(ml_dtypes.bfloat16), plain,
                    mma={"fprop": "CDNA3/mfma/f32_32x32x8_bf16"})


def test_mma_unscaled_bfloat16_operands_after_the_transform() -> None:
    """Cast "none" hands the (transformed) bfloat16 operand itself to a bf16 unit: the wgrad GEMM with a 16-point
    Hadamard transform equals qref.mma.matmul on the transformed operands, within its bound."""
    import qref.mma as qm

    rng = np.random.default_rng(8)
    x, w, g = (rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    none, rht = OperandRule("none"), OperandRule("none", hadamard=16, hadamard_signs=TE_WGRAD_SIGNS)
    r = TrainingRecipe("rht", fprop=(none, none), dgrad=(none, none), wgrad=(rht, rht))
    ins = qm.get("Hopper", "wgmma", "m64n8k16.f32.bf16.bf16")
    st = linear_step(x, w, g, r, mma={"wgrad": ins})
    oa, ob = st.operands["wgrad"]
    want = qm.matmul(oa["values"], np.ascontiguousarray(ob["values"].T), instruction=ins)
    res = st.results["wgrad"]
    assert res.meta["mapping"] == "unscaled" and np.array_equal(res.value.view(np.uint32), want.view(np.uint32))
    assert res.within(res.value).all() and (res.bound > 0).any()
    assert not np.array_equal(oa["values"], np.ascontiguousarray(g.T))  # the transform was applied


def _random_codes(rng: np.random.Generator, shape: tuple[int, ...], fmt: str, pattern: str) -> np.ndarray:
    """Finite operand codes of ``fmt`` (storage dtype) in one of the adversarial patterns."""
    import qref.mma as qm
    from qref.mma.bits import operand_format, storage_dtype

    f = operand_format(fmt)
    dt = storage_dtype(fmt)
    codes = rng.integers(0, 1 << f.bits, shape).astype(np.uint8 if f.bits <= 8 else np.uint16)
    v = qref.decode(codes, f, dtype=np.float64)
    v = np.where(np.isfinite(v), v, 0.0)
    if pattern == "narrow":  # exponents within a few binades: aligned sums, often exact
        v = np.sign(v) * np.exp2(rng.integers(0, 3, shape))
    elif pattern == "cancel":  # pairs that cancel, plus a small remainder
        v[..., 1::2] = -v[..., 0::2]
        v[..., -1] = np.exp2(-3.0)
    elif pattern == "dominant":  # one large term first, then small ones (c dominates later chunks)
        v[..., :1] = 2.0 ** (3 if f.bits <= 4 else 8)
        v[..., 1:] = np.clip(np.abs(v[..., 1:]), 0, 1) * np.sign(v[..., 1:])
    del qm
    out = qref.encode(v, f)
    return np.ascontiguousarray(out).view(dt) if out.dtype.itemsize == dt.itemsize else out.astype(dt)


@pytest.mark.parametrize("pattern", ["random", "narrow", "cancel", "dominant"])
def test_declared_unit_bound_holds_against_fractions(pattern: str) -> None:
    """mma.md §7.3 on adversarial operands of every NVIDIA fused family (T-FDPA at F = 13 and 25, ST-FDPA with
    E8M0 scales, GST-FDPA with UE4M3 and E8M0 scales, with and without promotion): |unit - exact| <= bound with the
    exact sum in Fractions, and bound 0 only where the unit returns the exact sum."""
    from fractions import Fraction

    import qref.mma as qm
    from qref.mma.bits import storage_dtype

    rng = np.random.default_rng(["random", "narrow", "cancel", "dominant"].index(pattern))
    cases = [("Hopper/wgmma/m64n8k32.f32.e4m3.e4m3", None), ("Hopper/wgmma/m64n8k32.f32.e5m2.e4m3", 64),
             ("Blackwell/tcgen05.mma/m64n8k32.kind::f8f6f4.f32.e4m3.e4m3", None),
             ("Hopper/wgmma/m64n8k16.f32.bf16.bf16", None), (MXF8, None), (NVF4, None),
             ("RTX Blackwell/mma.block_scale/m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0", 64)]
    n_checked = n_exact = 0
    for name, promote in cases:
        ins = qm.get(*name.split("/"))
        M, K, N = 8, 128, 8
        A = _random_codes(rng, (M, K), ins.a_format, pattern)
        B = np.ascontiguousarray(_random_codes(rng, (N, K), ins.b_format, pattern).T)
        kw: dict = {}
        sa_v = np.ones((M, K))
        sb_v = np.ones((K, N))
        if ins.scaled:
            nb = K // ins.block_size
            if ins.scale_format == "float8_e8m0fnu":
                ca, cb = rng.integers(100, 150, (M, nb)), rng.integers(100, 150, (nb, N))
            else:
                ca, cb = rng.integers(0, 0x7F, (M, nb)), rng.integers(0, 0x7F, (nb, N))
            sdt = storage_dtype(ins.scale_format)
            kw = {"scale_a": ca.astype(np.uint8).view(sdt), "scale_b": cb.astype(np.uint8).view(sdt)}
            sf = qref.get_format("float8_e8m0fnu" if ins.scale_format == "float8_e8m0fnu" else "float8_e4m3fn")
            sa_v = np.repeat(np.abs(qref.decode(ca.astype(np.uint8), sf, dtype=np.float64)), ins.block_size, 1)
            sb_v = np.repeat(np.abs(qref.decode(cb.astype(np.uint8), sf, dtype=np.float64)), ins.block_size, 0)
        ps = {}
        if promote:
            ps = {"promote_scale_a": (rng.random((M, K // promote)) + 0.5).astype(np.float32),
                  "promote_scale_b": np.exp2(rng.integers(-3, 3, (K // promote, N))).astype(np.float32)}
        d = qm.matmul(A, B, instruction=ins, promote_every=promote, **kw, **ps)
        ub = qm.matmul_bound(A, B, instruction=ins, promote_every=promote, **kw, **ps)
        fa = qref.get_format(str(storage_dtype(ins.a_format)))
        fb = qref.get_format(str(storage_dtype(ins.b_format)))
        av = qref.decode(np.ascontiguousarray(A).view(f"u{A.dtype.itemsize}"), fa, dtype=np.float64) * sa_v
        bv = qref.decode(np.ascontiguousarray(B).view(f"u{B.dtype.itemsize}"), fb, dtype=np.float64) * sb_v
        P = promote or K
        for i in range(M):
            for j in range(N):
                ex = Fraction(0)
                for p in range(0, K, P):
                    part = sum(Fraction(float(av[i, k])) * Fraction(float(bv[k, j])) for k in range(p, p + P))
                    if promote:
                        part *= Fraction(float(ps["promote_scale_a"][i, p // P])) * \
                            Fraction(float(ps["promote_scale_b"][p // P, j]))
                    ex += part
                b = ub.bound[i, j]
                if not np.isfinite(b):
                    continue
                diff = abs(Fraction(float(d[i, j])) - ex)
                assert diff <= Fraction(float(b)), (name, pattern, i, j, float(diff), b)
                n_checked += 1
                n_exact += int(b == 0)
    assert n_checked >= 300  # (random bfloat16 operands may overflow: bound +Inf, not checked)
    if pattern == "narrow":
        assert n_exact > 50  # the exactness rule recognises aligned sums


def test_stochastic_operands_use_their_documented_streams() -> None:
    """NVFP4 recipe (dy rounded StochasticA(8) in dgrad and wgrad): each stochastic operand equals the block scheme
    quantized with the bits random_bits_from_seed(size, 8, 8 * seed + j) (j = 2 * GEMM index + side) in the
    transformed operand's C order; the deterministic operands equal the nearest_even recipe's; the same seed
    gives the same step, another seed another one."""
    x, w, g = _small(5)
    r = get_recipe("transformer_engine_nvfp4_block_scaling")
    seed = 11
    st = linear_step(x, w, g, r, gemm="float64", seed=seed)
    det = linear_step(x, w, g, r.with_rounding("nearest_even"), gemm="float64")
    layouts = {"fprop": (x, w), "dgrad": (g, np.ascontiguousarray(w.T)),
               "wgrad": (np.ascontiguousarray(g.T), np.ascontiguousarray(x.T))}
    n_sto = 0
    for gi, name in enumerate(("fprop", "dgrad", "wgrad")):
        for side, (rule, a) in enumerate(zip(getattr(r, name), layouts[name])):
            got = st.values[name][side]
            if not rule.rounding.startswith("stochastic"):
                assert np.array_equal(got, det.values[name][side]), (name, side)
                continue
            if rule.hadamard is not None:
                a = qref.transforms.hadamard(a, rule.hadamard, signs=np.asarray(rule.hadamard_signs),
                                             arithmetic="fma_sequential_float32")
            sch = qref.scheme("nvfp4", profile="transformer_engine_reference", block_size=16, rounding="stochastic_a",
                              stochastic_bits=8)
            bits = random_bits_from_seed(a.size, 8, 8 * seed + 2 * gi + side).reshape(a.shape)
            q = sch.quantize(a, random_bits=bits)
            assert np.array_equal(got, sch.dequantize(q, dtype=np.float64)), (name, side)
            assert not np.array_equal(got, det.values[name][side])
            n_sto += 1
    assert n_sto == 2
    again = linear_step(x, w, g, r, gemm="float64", seed=seed)
    other = linear_step(x, w, g, r, gemm="float64", seed=seed + 1)
    assert np.array_equal(again.values["dgrad"][0], st.values["dgrad"][0])
    assert not np.array_equal(other.values["dgrad"][0], st.values["dgrad"][0])
    with pytest.raises(qref.QrefError, match="seed must be"):
        linear_step(x, w, g, r, gemm="float64", seed=-1)
    with pytest.raises(qref.QrefError, match="block casts"):
        OperandRule("multiplier", multiplier=TORCHAO_FLOAT8, rounding="stochastic_a", stochastic_bits=8)
    with pytest.raises(qref.QrefError, match="stochastic_bits"):
        OperandRule("block", "float4_e2m1fn", (1, 16), block_scheme="nvfp4", rounding="stochastic_a")
