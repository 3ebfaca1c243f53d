"""Multiplier casts (recipes.md §12) against the peer vectors of the real code: TransformerEngine's blockwise FP8
quantizer reference (1 x 128 and 128 x 128 tiles, power-of-two scales, eps, partial tiles, the transpose) and
torchao 0.18's float8 training casts (tensorwise and rowwise along either axis, power-of-two scales). Codes and
scale bits compared as unsigned integers; NaN codes as NaN (their sign is unspecified)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.recipes.linear import get_recipe
from qref.recipes.multiplier import TORCHAO_FLOAT8, TRANSFORMER_ENGINE_BLOCKWISE, MultiplierCast, MultiplierRules

PEERS = Path(__file__).parent / "peers"
DT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def _load(name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    d = PEERS / name
    with np.load(d / "vectors.npz", allow_pickle=False) as z:
        return json.loads((d / "manifest.json").read_text()), dict(z)


def _same_scales(got: np.ndarray, want_bits: np.ndarray) -> bool:
    """float32 scales equal as bit patterns; a NaN scale equals any NaN (its sign and payload are unspecified)."""
    g = np.ascontiguousarray(got, dtype=np.float32).reshape(-1)
    w = np.ascontiguousarray(want_bits, dtype=np.uint32).reshape(-1)
    nan = np.isnan(g) & np.isnan(w.view(np.float32))
    return bool(g.size == w.size and ((g.view(np.uint32) == w) | nan).all())


def _same_codes(got: np.ndarray, want: np.ndarray, fmt: str) -> tuple[int, int]:
    """(elements, mismatches) with NaN codes of either sign equal."""
    f = qref.get_format(fmt)
    g = np.isnan(qref.decode(got, f, dtype=np.float32))
    w = np.isnan(qref.decode(want.astype(np.uint8), f, dtype=np.float32))
    bad = (got != want) & ~(g & w)
    return got.size, int(bad.sum())


@pytest.fixture(scope="module")
def te() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return _load("transformer_engine_blockwise")


@pytest.fixture(scope="module")
def tao() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return _load("torchao_float8")


def _te_cast(cfg: dict[str, Any]) -> MultiplierCast:
    rules = MultiplierRules(eps=float(np.float32(cfg["eps"])), pow2="frexp" if cfg["pow_2_scales"] else "none")
    return MultiplierCast(qref.get_format(cfg["quant_dtype"]), tuple(cfg["quant_tile_shape"]), rules)


def test_te_blockwise_reference(te: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    man, z = te
    n = scales = 0
    for cfg in man["configs"]:
        cast = _te_cast(cfg)
        for t in man["shapes"]:
            key = f"{t}__{cfg['name']}__codes"
            if key not in z:
                continue
            x = z[f"{t}__x"].view(DT[t.split("__")[0]])
            pairs = [(x, "")] + ([(np.ascontiguousarray(x.T), "_t")] if cfg["return_transpose"] else [])
            for xx, sfx in pairs:
                with np.errstate(all="ignore"):
                    q = cast.quantize(xx)
                k, bad = _same_codes(q["codes"], z[f"{t}__{cfg['name']}__codes{sfx}"], cfg["quant_dtype"])
                assert bad == 0, (t, cfg["name"], sfx, bad)
                want_s = z[f"{t}__{cfg['name']}__scale_inv{sfx}"]
                assert q["scales"].shape == want_s.shape and _same_scales(q["scales"], want_s), (t, cfg["name"], sfx)
                n += k
                scales += want_s.size
    assert n > 3_000_000 and scales > 10_000


def test_te_mechanisms_are_needed(te: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    """Each rule, switched off, breaks agreement somewhere: the input-dtype maximum for infinite multipliers
    (bfloat16 subnormal tiles) and frexp's power of two (against the exact floor log2, which a NaN tile shows)."""
    man, z = te
    cfg = next(c for c in man["configs"] if c["name"] == "t1x128_e4m3")
    x = z["bfloat16__tiles_b__0__x"].view(ml_dtypes.bfloat16)
    keep = MultiplierCast(qref.get_format("float8_e4m3fn"), (1, 128), MultiplierRules(infinite_multiplier="keep"))
    with np.errstate(all="ignore"):
        s = keep.quantize(x)["scales"].view(np.uint32)
    assert (s != z[f"bfloat16__tiles_b__0__{cfg['name']}__scale_inv"]).any()
    cfg = next(c for c in man["configs"] if c["name"] == "t1x128_e4m3_pow2")
    x = z["float32__nan__0__x"].view(np.float32)
    log2 = MultiplierCast(qref.get_format("float8_e4m3fn"), (1, 128), MultiplierRules(pow2="log2_float32"))
    with np.errstate(all="ignore"):
        s = log2.quantize(x)["scales"].view(np.uint32)
    assert (s != z[f"float32__nan__0__{cfg['name']}__scale_inv"]).any()


def _tao_cast(cfg: dict[str, Any], ndim: int) -> MultiplierCast:
    if cfg["scaling_granularity"] == "TENSORWISE":
        tile: tuple[int | None, ...] = (None,) * ndim
    else:
        tile = (1, None) if cfg["axiswise_dim"] == -1 else (None, 1)
    rules = MultiplierRules(eps=TORCHAO_FLOAT8.eps, floor_dtype="float64", infinite_multiplier="keep",
                            stored="multiplier", pow2="log2_float32" if cfg["round_scales_to_power_of_2"] else "none")
    assert TORCHAO_FLOAT8.pow2 == "none" and rules.floor_dtype == TORCHAO_FLOAT8.floor_dtype
    return MultiplierCast(qref.get_format(cfg["float8_dtype"]), tile, rules)


def test_torchao_float8_casts(tao: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    man, z = tao
    n = scales = 0
    tensors = sorted({k.split("__x")[0] for k in z if k.endswith("__x")})
    for cfg in man["configs"]:
        for t in tensors:
            key = f"{t}__{cfg['name']}__codes"
            if key not in z:
                continue
            x = z[f"{t}__x"].view(DT[t.split("__")[0]])
            cast = _tao_cast(cfg, x.ndim)
            with np.errstate(all="ignore"):
                q = cast.quantize(x)
            k, bad = _same_codes(q["codes"], z[key], cfg["float8_dtype"])
            assert bad == 0, (t, cfg["name"], bad)
            want_s = z[f"{t}__{cfg['name']}__scale"].reshape(-1)
            assert _same_scales(q["scales"], want_s), (t, cfg["name"])
            n += k
            scales += want_s.size
    assert n > 3_000_000 and scales > 1000


def test_torchao_pow2_floors_the_rounded_logarithm() -> None:
    """torchao's exp2(floor(RN32(log2 res))): for res just below 2^k the rounded logarithm is k, so the scale is
    2^k (> fp8_max / amax) and the largest element is clamped; the exact floor would give 2^(k-1)."""
    amax = np.nextafter(np.float32(0.4375), np.float32(1))  # 448 / amax = RN32: 1024 - 2^-14, log2 rounds to 10
    x = np.array([[amax, 0.25]], np.float32)
    cast = MultiplierCast(qref.get_format("float8_e4m3fn"), (None, None),
                          MultiplierRules(eps=1e-12, floor_dtype="float64", infinite_multiplier="keep",
                                          stored="multiplier", pow2="log2_float32"))
    q = cast.quantize(x)
    assert np.float32(448) / amax < 1024
    assert q["multipliers"].item() == 1024.0 and q["codes"][0, 0] == 0x7E  # amax * 1024 > 448: clamped to 448


def test_rules_and_shapes() -> None:
    with pytest.raises(qref.QrefError, match="power-of-two"):
        MultiplierRules(pow2="ceil")
    with pytest.raises(qref.QrefError, match="eps"):
        MultiplierRules(eps=-1.0)
    with pytest.raises(qref.QrefError, match="tile"):
        MultiplierCast(qref.get_format("float8_e4m3fn"), (0, 128))
    c = MultiplierCast(qref.get_format("float8_e4m3fn"), (1, 128), TRANSFORMER_ENGINE_BLOCKWISE)
    with pytest.raises(qref.QrefError, match="rank"):
        c.quantize(np.zeros(5, np.float32))
    with pytest.raises(qref.QrefError, match="input"):
        c.quantize(np.zeros((2, 4), np.int32))
    x = np.random.default_rng(0).standard_normal((3, 200)).astype(np.float32)
    q = c.quantize(x)
    assert q["codes"].shape == (3, 200) and q["scales"].shape == (3, 2)
    v = c.dequantize(q["codes"], q["scales"])
    assert np.all(np.abs(v - x) <= np.abs(x) * 2.0**-3 + 1e-30)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("pow2", [False, True])
def test_torchao_amax_to_scale_live(fmt: str, pow2: bool) -> None:
    """The installed torchao's amax_to_scale on 2^20 random float32 amaxes, every fp8_max * 2^k +-2 ulp, zero,
    the smallest subnormals, Inf and NaN: every scale bit pattern equal (NaN as NaN)."""
    torch = pytest.importorskip("torch")
    fu = pytest.importorskip("torchao.float8.float8_utils", reason="torchao float8 live cross-check")
    rng = np.random.default_rng(9)
    rand = (rng.integers(0, 0x7F800000, 1 << 20, dtype=np.uint64).astype(np.uint32)).view(np.float32)
    m = float(qref.get_format(fmt).max_value)
    with np.errstate(over="ignore"):
        grid = (m * np.exp2(np.arange(-160.0, 128.0))).astype(np.float32)
    grid = grid[np.isfinite(grid) & (grid > 0)]
    near = [grid]
    a, b = grid.copy(), grid.copy()
    for _ in range(2):
        a, b = np.nextafter(a, np.float32(0)), np.nextafter(b, np.float32(np.inf))
        near += [a, b]
    special = np.array([0.0, 1e-45, 3e-45, 1e-12, 9.9999998e-13, np.inf, np.nan, 3.4028235e38], np.float32)
    amax = np.concatenate([rand, *near, special])
    tdt = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[fmt]
    with np.errstate(all="ignore"):
        want = fu.amax_to_scale(torch.from_numpy(amax.astype(np.float64)), tdt, pow2).numpy()
    cast = MultiplierCast(qref.get_format(fmt), (1, None), MultiplierRules(
        eps=1e-12, floor_dtype="float64", infinite_multiplier="keep", stored="multiplier",
        pow2="log2_float32" if pow2 else "none"))
    with np.errstate(all="ignore"):
        got = cast.multipliers(amax.reshape(-1, 1))
    assert _same_scales(got, want.astype(np.float32).view(np.uint32))


@pytest.fixture(scope="module")
def te_cs() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return _load("transformer_engine_current_scaling")


def test_te_current_scaling_reference(te_cs: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    """The per-tensor multiplier cast (tile (None, None), TE's rules with eps and frexp powers of two) equals TE's
    ref_per_tensor_cs_cast (tests/peers/transformer_engine_current_scaling) on every code and scale_inv."""
    man, z = te_cs
    assert man["commit"].startswith("d0067d0")
    n = 0
    for cfg in man["configs"]:
        rules = MultiplierRules(eps=float(np.float32(cfg["amax_epsilon"])), infinite_multiplier="float32_max",
                                clamp=False, pow2="frexp" if cfg["force_pow_2_scales"] else "none")
        cast = MultiplierCast(qref.get_format(cfg["quant_dtype"]), (None, None), rules)
        for t in man["shapes"]:
            key = f"{t}__{cfg['name']}__codes"
            if key not in z:
                continue
            x = z[f"{t}__x"].view(DT[t.split("__")[0]])
            with np.errstate(all="ignore"):
                q = cast.quantize(x)
            k, bad = _same_codes(q["codes"], z[key], cfg["quant_dtype"])
            assert bad == 0, (t, cfg["name"], bad)
            assert _same_scales(q["scales"], z[f"{t}__{cfg['name']}__scale_inv"]), (t, cfg["name"])
            n += k
    assert n > 3_500_000
    # the mechanism is needed: with the blockwise reference's input-dtype maximum the bfloat16 tiny tensors differ
    blockwise = MultiplierCast(qref.get_format("float8_e4m3fn"), (None, None), TRANSFORMER_ENGINE_BLOCKWISE)
    x = z["bfloat16__tiles_b_subnormal__0__x"].view(ml_dtypes.bfloat16)
    assert not _same_scales(blockwise.quantize(x)["scales"], z["bfloat16__tiles_b_subnormal__0__e4m3__scale_inv"])
    # and the cast without a clamp: a NaN amax gives the multiplier 0.5 under pow2, and E5M2 overflows to Inf
    clamped = MultiplierCast(qref.get_format("float8_e5m2"), (None, None),
                             MultiplierRules(infinite_multiplier="float32_max", pow2="frexp"))
    x = z["bfloat16__nan__0__x"].view(ml_dtypes.bfloat16)
    with np.errstate(all="ignore"):
        assert _same_codes(clamped.quantize(x)["codes"], z["bfloat16__nan__0__e5m2_pow2__codes"], "float8_e5m2")[1]


def test_te_current_scaling_recipe_operands(te_cs: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    """transformer_engine_float8_current_scaling's operands are those casts: x and w E4M3 (fprop), dy E5M2
    (dgrad, wgrad), each per tensor with TE's default rules."""
    _, z = te_cs
    r = get_recipe("transformer_engine_float8_current_scaling")
    for g, side, fmt in (("fprop", 0, "e4m3"), ("fprop", 1, "e4m3"), ("dgrad", 0, "e5m2"), ("wgrad", 0, "e5m2")):
        for t in ("float32__tiles_a__1", "bfloat16__tiles_c__0"):
            x = z[f"{t}__x"].view(DT[t.split("__")[0]])
            _, out = getattr(r, g)[side].quantize(x)
            assert np.array_equal(out["codes"], z[f"{t}__{fmt}__codes"]), (g, side, t)
            assert _same_scales(out["scales"], z[f"{t}__{fmt}__scale_inv"]), (g, side, t)
