"""Training recipes on one linear layer (recipes.md §13): each GEMM's operands in their reduction-last layouts,
held to the real code's peer vectors at the recipe level (TransformerEngine's blockwise reference, torchao's
float8 casts, TE's random Hadamard transform), the GEMMs exact with their bounds, and the declared-but-not-
emulated stochastic rounding refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.recipes.linear import RECIPES, TE_WGRAD_SIGNS, OperandRule, TrainingRecipe, get_recipe, linear_step

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
    # a bound, not a bit claim: each transformed operand carries one float32 rounding (transforms.md)
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-9)
    assert not np.array_equal(st.values["wgrad"][0], np.ascontiguousarray(g[:32, :4].T).astype(np.float64))


def test_every_recipe_runs_and_declares_its_rules() -> None:
    x, w, g = _small(3)
    for name, r in RECIPES.items():
        stoch = any(op.rounding == "stochastic" for gm in (r.fprop, r.dgrad, r.wgrad) for op in gm)
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
