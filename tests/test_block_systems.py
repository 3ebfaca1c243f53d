"""The jax and torchao block profiles against the real quantizers on CPU, bit for bit (codes and scale bytes as
unsigned integers, dequantized values as bit patterns), over the distributions of test_block_cases.

- JAX 0.10.2: jax._src.cudnn.scaled_matmul_stablehlo.quantize under jax.jit (mxfp8, nvfp4 with and without a
  global scale; float64 inputs under JAX's default jax_enable_x64 off). Op-by-op (eager) XLA:CPU results
  depend on the array shape (LLVM may vectorize a division as a multiplication by the reciprocal), so the
  profile reproduces the jitted form.
- torchao 0.18: mx_formats.to_mx with FLOOR, CEIL, EVEN, RCEIL for every MX float element, to_dtype, and
  nvfp4_quantize (single level and with a per-tensor scale).
"""

from __future__ import annotations

import logging

import ml_dtypes
import numpy as np
import pytest
from test_block_cases import DTYPES, distributions

import qref
from qref.interop.packing import unpack

BF16 = np.dtype(ml_dtypes.bfloat16)


def stacked(dtype: np.dtype, seed: int, rows: int = 16, cols: int = 256) -> tuple[np.ndarray, list[str]]:
    d = distributions(dtype, rows, cols, seed)
    return np.concatenate(list(d.values()), axis=0), list(d)


def where(bad: np.ndarray, names: list[str]) -> dict[str, int]:
    per = bad.reshape(len(names), -1).sum(axis=1)
    return {n: int(c) for n, c in zip(names, per) if c}


def value_mismatch(a: np.ndarray, b: np.ndarray, skip: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return (a.view(f"u{a.dtype.itemsize}") != b.view(f"u{b.dtype.itemsize}")) & ~both_nan & ~skip


# ---------------------------------------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [*DTYPES, np.dtype(np.float64)], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4", "nvfp4_global", "nvfp4_global_zero"])
def test_jax_profile_equals_jax_quantize_under_jit(mode: str, dtype: np.dtype) -> None:
    """nvfp4_global_zero: gs = 0 makes x * fl32(1 / gs) NaN for zeros (0 * inf): XLA's reduction keeps or drops
    those NaNs by shape, so those blocks are unspecified like blocks holding an input NaN."""
    jax = pytest.importorskip("jax", reason="the jax profile is checked against jax (pip install jax)")
    jnp = jax.numpy
    smq = pytest.importorskip("jax._src.cudnn.scaled_matmul_stablehlo", reason="jax's block quantizer")
    x, names = stacked(dtype, seed=31)
    gs = {"nvfp4_global": np.float32(0.37), "nvfp4_global_zero": np.float32(0.0)}.get(mode)
    if mode == "mxfp8":
        cfg = jax.nn.get_scaled_dot_general_config("mxfp8")
        sch = qref.scheme("mxfp8_e4m3", profile="jax")
    else:
        cfg = jax.nn.get_scaled_dot_general_config("nvfp4", None if gs is None else jnp.array([gs], jnp.float32))
        sch = qref.scheme("nvfp4", profile="jax")
    # JAX's default (jax_enable_x64 off): a float64 input becomes float32 on entry (the profile's model)
    with jax.enable_x64(False), np.errstate(over="ignore", invalid="ignore"):
        xq, sq = jax.jit(lambda a: smq.quantize(a, cfg))(jnp.asarray(x))
    codes = np.asarray(xq).view(np.uint8)
    scales = np.asarray(sq).view(np.uint8)
    q = sch.quantize(x, global_scale=gs)
    # scales of blocks holding NaN are unspecified: XLA:CPU's max reduction keeps or drops a NaN depending on the
    # array's shape (this stacked input drops some; each distribution alone keeps them)
    sbad = (scales != q.scales) & ~q.meta["scales_unspecified"]
    assert not sbad.any(), where(np.repeat(sbad, sch.block_size, axis=1), names)
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32)
    # gs = 0: x * fl32(1 / 0) is NaN for x = 0 and (DAZ) float32 subnormals
    nan = np.isnan(x32) | ((np.abs(x32) < 2.0**-126) if gs == 0 else False)
    nan_blocks = nan.reshape(x.shape[0], -1, sch.block_size).any(axis=-1)
    assert (q.meta["scales_unspecified"] == nan_blocks).all()
    bad = (codes != q.codes) & ~q.unspecified
    assert not bad.any(), where(bad, names)


# ---------------------------------------------------------------------------------------------------------
# torchao
# ---------------------------------------------------------------------------------------------------------
def _torch():
    logging.getLogger("torchao").setLevel(logging.ERROR)
    torch = pytest.importorskip("torch", reason="the torchao profiles are checked against torchao")
    pytest.importorskip("torchao", reason="the torchao profiles are checked against torchao (pip install torchao)")
    return torch


def _t(torch, a: np.ndarray):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _n(torch, a) -> np.ndarray:
    if a.dtype == torch.bfloat16:
        return a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return a.numpy()


MX_ELEMENTS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4"]
SCALING = {"FLOOR": ("torchao_floor", {}), "CEIL": ("torchao_floor", {"scale_rule": "ceil"}),
           "EVEN": ("torchao_floor", {"scale_rule": "even"}), "RCEIL": ("torchao_rceil", {})}


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("scaling", list(SCALING))
def test_torchao_mx_profiles_equal_to_mx(scaling: str, dtype: np.dtype) -> None:
    torch = _torch()
    mxt = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor", reason="torchao mx_formats")
    cfg = pytest.importorskip("torchao.prototype.mx_formats.config", reason="torchao mx_formats")
    const = pytest.importorskip("torchao.prototype.mx_formats.constants", reason="torchao mx_formats")
    tdt = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2, "mxfp6_e3m2": const.DTYPE_FP6_E3M2,
           "mxfp6_e2m3": const.DTYPE_FP6_E2M3, "mxfp4": torch.float4_e2m1fn_x2}
    x, names = stacked(dtype, seed=32)
    profile, over = SCALING[scaling]
    for name in MX_ELEMENTS:
        sch = qref.scheme(name, profile=profile, **over)
        s, d = mxt.to_mx(_t(torch, x), tdt[name], 32, getattr(cfg.ScaleCalculationMode, scaling))
        scales = s.view(torch.uint8).numpy()
        raw = d.view(torch.uint8).numpy()
        codes = unpack(raw, "nibble_low_first", bits=4) if name == "mxfp4" else raw
        q = sch.quantize(x)
        assert (scales == q.scales).all(), (name, where(np.repeat(scales != q.scales, 32, axis=1), names))
        bad = (codes != q.codes) & ~q.unspecified
        assert not bad.any(), (name, where(bad, names))
        ref = _n(torch, mxt.to_dtype(d, s, tdt[name], 32, _t(torch, x).dtype))
        mine = sch.dequantize(q, dtype=dtype)
        assert not value_mismatch(mine, ref, q.unspecified).any(), (name, where(
            value_mismatch(mine, ref, q.unspecified), names))


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("pts", [None, 0.37, "amax", 0.0, 2.0**-126, 1e-40])
def test_torchao_nvfp4_equals_nvfp4_quantize(pts: object, dtype: np.dtype) -> None:
    """Tiny per-tensor scales make fl32(1 / pts) infinite: 0 * inf is NaN, whose code torchao takes from the
    NaN's sign bit, so those elements are unspecified (block.md §5.2)."""
    torch = _torch()
    nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor", reason="torchao nvfp4")
    x, names = stacked(dtype, seed=33)
    if pts == "amax":
        with np.errstate(invalid="ignore"):
            a = np.abs(x.astype(np.float64))
        g = nv.per_tensor_amax_to_scale(torch.tensor(np.float32(np.max(a[np.isfinite(a)]))))
        pts_v = np.float32(g.item())
    else:
        pts_v = None if pts is None else np.float32(pts)
    sch = qref.scheme("nvfp4", profile="torchao_floor")
    s, d = nv.nvfp4_quantize(_t(torch, x), 16, None if pts_v is None else torch.tensor(pts_v))
    scales = s.view(torch.uint8).numpy().reshape(q_shape := (x.shape[0], x.shape[1] // 16))
    codes = unpack(d.view(torch.uint8).numpy(), "nibble_low_first", bits=4)
    q = sch.quantize(x, global_scale=pts_v)
    assert q.scales.shape == q_shape
    assert (scales == q.scales).all(), where(np.repeat(scales != q.scales, 16, axis=1), names)
    bad = (codes != q.codes) & ~q.unspecified
    assert not bad.any(), where(bad, names)
    # torchao's dequantize: fl32(P * fl32(pts * s)) (or P * s), then to the dtype
    t = nv.NVFP4Tensor(d, s.view(x.shape[0], -1), 16, _t(torch, x).dtype,
                       None if pts_v is None else torch.tensor(pts_v))
    ref = _n(torch, t.dequantize(_t(torch, x).dtype))
    mine = sch.dequantize(q, dtype=dtype)
    assert not value_mismatch(mine, ref, q.unspecified).any(), where(value_mismatch(mine, ref, q.unspecified), names)
