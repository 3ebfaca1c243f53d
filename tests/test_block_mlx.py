"""The ``mlx`` block profile equals real MLX (mx.quantize / mx.dequantize, pip mlx[cpu]) bit for bit: packed words,
scale bytes, affine scales and biases and dequantized values, on float32, float16 and bfloat16 inputs over the 13
distributions of test_block_cases (zeros, -0, tiny, huge, NaN/Inf, exact tie grids, random bit patterns ...).

Codes are compared as unsigned integers, scales and values as bit patterns; the only exceptions are spelled out:
elements qref marks unspecified (a NaN produced by arithmetic whose sign picks the code, C++ undefined behaviour
in the affine kernel) and NaN values, which compare by class (IEEE 754 §6.3 does not specify an arithmetic
NaN's sign)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_block_cases import DTYPES, distributions

import qref
from qref.interop.packing import pack, unpack
from qref.schemes.block.mx import lut_argmin

mx = pytest.importorskip("mlx.core", reason="the mlx profile is checked against MLX (pip install 'mlx[cpu]')")

BF16 = np.dtype(ml_dtypes.bfloat16)
MX_DTYPE = {np.dtype(np.float32): mx.float32, np.dtype(np.float16): mx.float16, BF16: mx.bfloat16}
ROWS, COLS = 16, 512


def to_mx(a: np.ndarray) -> mx.array:
    if a.dtype == BF16:
        return mx.array(a.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(a)


def from_mx(a: mx.array) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        return np.array(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.array(a)


def f64(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # random bit patterns hold signaling NaNs
        return np.asarray(a).astype(np.float64)


def value_mismatch(a: np.ndarray, b: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Where bit patterns differ, NaN == NaN of any sign, outside ``skip``."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    both_nan = np.isnan(f64(a)) & np.isnan(f64(b))
    ua, ub = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    return (ua != ub) & ~both_nan & ~skip


def stacked(dtype: np.dtype, seed: int) -> tuple[np.ndarray, list[str]]:
    d = distributions(dtype, ROWS, COLS, seed)
    return np.concatenate(list(d.values()), axis=0), list(d)


def report(bad: np.ndarray, names: list[str]) -> dict[str, int]:
    rows = bad.reshape(len(names), ROWS, -1).sum(axis=(1, 2))
    return {n: int(c) for n, c in zip(names, rows) if c}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4", "nvfp4_global_amax", "nvfp4_global_0.37"])
def test_fp_modes_equal_mlx(mode: str, dtype: np.dtype) -> None:
    x, names = stacked(dtype, seed=21)
    mlx_mode = mode.split("_")[0]
    name = {"mxfp4": "mxfp4", "mxfp8": "mxfp8_e4m3", "nvfp4": "nvfp4"}[mlx_mode]
    bits = 8 if mlx_mode == "mxfp8" else 4
    sch = qref.scheme(name, profile="mlx")
    gs = None
    if mode == "nvfp4_global_amax":
        a = np.abs(f64(x))
        gs = np.float32(np.max(a[np.isfinite(a)]))
    elif mode == "nvfp4_global_0.37":
        gs = np.float32(0.37)
    kw = {"mode": mlx_mode} if gs is None else {"mode": mlx_mode, "global_scale": mx.array(gs)}
    words, scales = (np.array(a) for a in mx.quantize(to_mx(x), **kw))
    q = sch.quantize(x, global_scale=gs)
    assert words.dtype == np.uint32 and scales.dtype == np.uint8
    # scale bytes: every one, no exception
    assert (scales == q.scales).all(), report(np.repeat(scales != q.scales, sch.block_size, axis=1), names)
    # element codes: MLX's packed words unpacked, against qref's codes, where specified
    codes = unpack(words, "mlx", bits=bits)
    bad = (codes != q.codes) & ~q.unspecified
    assert not bad.any(), report(bad, names)
    # packed words: qref's mlx layout of qref's codes, where no element is unspecified
    mine = pack(q, "mlx")
    per_word = 32 // bits
    word_unspec = q.unspecified.reshape(x.shape[0], -1, per_word).any(axis=-1)
    assert ((mine == words) | word_unspec).all()
    assert q.unspecified.sum() <= 0.01 * x.size  # only NaN-sign-dependent FP8 codes
    # dequantize: MLX on its own words and scales against qref on its own codes and scales
    for out in DTYPES:
        dkw = dict(kw, dtype=MX_DTYPE[out])
        ref = from_mx(mx.dequantize(mx.array(words), mx.array(scales), **dkw))
        mine_v = sch.dequantize(q, dtype=ref.dtype)  # MLX returns float32 for nvfp4 with a global scale
        assert not value_mismatch(mine_v, ref, q.unspecified).any(), report(
            value_mismatch(mine_v, ref, q.unspecified), names)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 8])
def test_affine_equals_mlx(bits: int, dtype: np.dtype) -> None:
    x, names = stacked(dtype, seed=22)
    for group in (32, 64, 128):
        sch = qref.scheme("mlx_affine", bits=bits, group_size=group, profile="mlx")
        words, scales, biases = mx.quantize(to_mx(x), bits=bits, group_size=group)
        w, s, b = np.array(words), from_mx(scales), from_mx(biases)
        q = sch.quantize(x)
        assert q.scales.dtype == s.dtype == dtype and q.biases.dtype == dtype
        nanless = np.zeros(s.shape, bool)
        assert not value_mismatch(q.scales, s, nanless).any(), (group, report(
            np.repeat(value_mismatch(q.scales, s, nanless), group, axis=1), names))
        assert not value_mismatch(q.biases, b, nanless).any(), group
        codes = unpack(w, "mlx", bits=bits)
        bad = (codes != q.codes) & ~q.unspecified
        assert not bad.any(), (group, report(bad, names))
        word_bits = np.repeat(q.unspecified, bits, axis=1).reshape(x.shape[0], -1, 32).any(axis=-1)
        assert ((pack(q, "mlx") == w) | word_bits).all()
        ref = from_mx(mx.dequantize(words, scales, biases, bits=bits, group_size=group, dtype=MX_DTYPE[dtype]))
        mine = sch.dequantize(q, dtype=dtype)
        assert not value_mismatch(mine, ref, q.unspecified).any(), (group, report(
            value_mismatch(mine, ref, q.unspecified), names))
    # unspecified codes (C++ UB: a NaN cast to an integer) come only from groups holding NaN or Inf and from
    # groups whose scale overflowed to Inf (max - min beyond float32 in the 1-bit kernel)
    open_groups = ~np.isfinite(f64(x)).reshape(x.shape[0], -1, 128).all(axis=-1) | ~np.isfinite(f64(q.scales))
    assert not (q.unspecified.reshape(x.shape[0], -1, 128).any(axis=-1) & ~open_groups).any()


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_lut_argmin_equals_core_rounding_in_range(dtype: np.dtype) -> None:
    """Within [-6, 6] MLX's first-index argmin is the core's nearest_toward_zero with -0 -> +0, on every float16
    and bfloat16 value (so qref runs the table argmin only beyond the maximum and on non-finite values)."""
    y = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    y = y[np.abs(f64(y)) <= 6]
    fmt = qref.get_format("float4_e2m1fn")
    core = qref.encode(y, fmt, rounding="nearest_toward_zero", overflow="saturate")
    core = np.where(core == 0x8, 0, core)
    assert (lut_argmin(y, fmt) == core).all()


def test_lut_argmin_equals_core_rounding_float32_sample() -> None:
    rng = np.random.default_rng(5)
    y = (rng.uniform(-6, 6, 200_000)).astype(np.float32)
    grid = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6], np.float32)
    y = np.concatenate([y, grid, -grid, np.nextafter(grid, np.float32(7)), np.nextafter(grid, np.float32(-7))])
    y = y[np.abs(y) <= 6]
    fmt = qref.get_format("float4_e2m1fn")
    core = qref.encode(y, fmt, rounding="nearest_toward_zero", overflow="saturate")
    assert (lut_argmin(y, fmt) == np.where(core == 0x8, 0, core)).all()


def test_affine_zero_extremes_keep_the_first_zeros_sign() -> None:
    """std::min/std::max keep the first of equal arguments: a group whose min (or max) is zero stores the sign of
    its first zero (bits = 1 stores bias = w_min): +0 then -0, -0 then +0, and -0 before positives."""
    g = 32
    rows = [np.array([0.0, -0.0] + [-0.0] * 30), np.array([-0.0, 0.0] + [0.0] * 30),
            np.array([-0.0, 1.0, 2.0] + [0.0] * 29), np.array([0.0, -1.0, -2.0] + [0.0] * 29),
            np.full(g, -0.0), np.zeros(g)]
    x = np.stack(rows).astype(np.float32)
    for bits in (1, 2, 4):
        out = mx.quantize(mx.array(x), group_size=g, bits=bits, mode="affine")
        q = qref.scheme("mlx_affine", bits=bits, group_size=g, profile="mlx").quantize(x)
        for name, ours, theirs in (("biases", q.biases, out[2]), ("scales", q.scales, out[1])):
            a = np.asarray(ours, np.float32).reshape(-1).view(np.uint32)
            b = np.array(theirs, dtype=np.float32).reshape(-1).view(np.uint32)
            assert np.array_equal(a, b), (bits, name, a, b)
