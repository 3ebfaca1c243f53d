"""MLX quantized_matmul and qqmm on the CPU backend against the reference (docs/spec/recipes.md §7.2-7.3).

The weights come from mx.quantize itself (unpacked from MLX's uint32 words into a QArray), so the test checks
the matmul emulation, not the quantizer. Every result must lie within the reference's rigorous bound (exact
arithmetic on the difference); the scalar-loop emulation (order="mlx_cpu") must match bit for bit on x86-64,
where MLX 0.32's CPU build runs the scalar fp loops."""

from __future__ import annotations

import platform

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.interop.packing import unpack
from qref.recipes import mlx_qqmm, mlx_quantized_matmul

mx = pytest.importorskip("mlx.core", reason="MLX quantized_matmul / qqmm are the backends under test")

F32 = np.float32
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
MODES = {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}
SCHEME = {"mxfp4": "mxfp4", "mxfp8": "mxfp8_e4m3", "nvfp4": "nvfp4"}
X86 = platform.machine().lower() in ("x86_64", "amd64")


def to_np(a) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        return np.asarray(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.asarray(a)


def mx_weight(w: np.ndarray, mode: str, dt: str, bits: int | None = None, group: int | None = None):
    """(mx packed weight, mx scales, mx biases or None, QArray with MLX's codes and scales)."""
    wm = mx.array(w.astype(np.float32)).astype(getattr(mx, dt))
    if mode == "affine":
        wq, sc, bi = mx.quantize(wm, group_size=group, bits=bits, mode="affine")
        codes = unpack(np.asarray(wq), "mlx", bits=bits, count=w.shape[1]).astype(np.uint8)
        sch = qref.scheme("mlx_affine", bits=bits, group_size=group)
        q = qref.QArray(codes=codes, scheme=sch, scales=to_np(sc), biases=to_np(bi), axis=1)
        return wq, sc, bi, q
    g, b = MODES[mode]
    wq, sc = mx.quantize(wm, group_size=g, bits=b, mode=mode)[:2]
    codes = unpack(np.asarray(wq), "mlx", bits=b, count=w.shape[1]).astype(np.uint8)
    sch = qref.scheme(SCHEME[mode], profile="mlx")
    q = qref.QArray(codes=codes, scheme=sch, scales=np.asarray(sc).astype(np.uint8), axis=1)
    return wq, sc, None, q


def weights(rng: np.random.Generator, N: int, K: int) -> np.ndarray:
    return (rng.standard_normal((N, K)) * 10.0 ** rng.uniform(-1, 1, (N, 1))).astype(F32)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("transpose", [True, False])
def test_quantized_matmul_within_bound(mode: str, dt: str, transpose: bool) -> None:
    rng = np.random.default_rng(0)
    M, K, N = 3, 128, 64
    g, bits = MODES[mode]
    compared = exact_emul = 0
    for _trial in range(2):
        w = weights(rng, N, K) if transpose else weights(rng, K, N)  # transpose=False: (K, N), groups along N
        wq, sc, _, q = mx_weight(w, mode, dt)
        x = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-1, 1)).astype(F32).astype(DTYPES[dt])
        y = mx.quantized_matmul(mx.array(x.astype(F32)).astype(getattr(mx, dt)), wq, sc, transpose=transpose,
                                group_size=g, bits=bits, mode=mode)
        got = to_np(y)
        r = mlx_quantized_matmul(x, q, transpose=transpose)
        ok = r.within(got)
        assert ok.all(), (np.argwhere(~ok)[:3], got[~ok][:3], r.value[~ok][:3], r.bound[~ok][:3])
        assert r.value.dtype == got.dtype
        compared += int((~r.unspecified).sum())
        emul = mlx_quantized_matmul(x, q, transpose=transpose, order="mlx_cpu")
        assert r.within(emul.value).all()  # the scalar loop is one of the computations the bound covers
        if X86:
            same = emul.value.view(np.uint16 if emul.value.itemsize == 2 else np.uint32) == \
                got.view(np.uint16 if got.itemsize == 2 else np.uint32)
            assert same.all(), (int((~same).sum()), emul.value[~same][:3], got[~same][:3])
            exact_emul += same.size
    assert compared == 2 * M * N


@pytest.mark.parametrize("bits,group", [(4, 64), (8, 32), (3, 32), (2, 128)])
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_quantized_matmul_affine_within_bound(bits: int, group: int, dt: str) -> None:
    rng = np.random.default_rng(1)
    M, K, N = 2, 256, 32
    w = weights(rng, N, K)
    wq, sc, bi, q = mx_weight(w, "affine", dt, bits=bits, group=group)
    x = rng.standard_normal((M, K)).astype(F32).astype(DTYPES[dt])
    y = mx.quantized_matmul(mx.array(x.astype(F32)).astype(getattr(mx, dt)), wq, sc, bi, transpose=True,
                            group_size=group, bits=bits, mode="affine")
    got = to_np(y)
    r = mlx_quantized_matmul(x, q)
    assert r.check(got, "mlx") == M * N


def test_scale_cast_to_float16() -> None:
    """MLX casts the E8M0 scale to the input dtype: 2^-30 underflows float16, so those groups contribute 0."""
    w = np.zeros((1, 64), F32)
    w[0, :32] = 2.0**-30
    w[0, 32:] = 1.0
    wq, sc, _, q = mx_weight(w, "mxfp8", "float16")
    x = np.ones((1, 64), np.float16)
    got = to_np(mx.quantized_matmul(mx.array(x), wq, sc, transpose=True, group_size=32, bits=8, mode="mxfp8"))
    r = mlx_quantized_matmul(x, q)
    assert got[0, 0] == 32.0 and r.value[0, 0] == 32.0 and r.within(got).all()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_qqmm_within_bound(mode: str, dt: str) -> None:
    rng = np.random.default_rng(2)
    K, N = 128, 48
    g, bits = MODES[mode]
    for _trial in range(3):
        w = weights(rng, N, K)
        wq, sc, _, q = mx_weight(w, mode, dt)
        x = (rng.standard_normal((1, K)) * 10.0 ** rng.uniform(-3, 3, (1, K // g)).repeat(g, 1)).astype(F32)
        x = x.astype(DTYPES[dt])
        y = mx.qqmm(mx.array(x.astype(F32)).astype(getattr(mx, dt)), wq, sc, group_size=g, bits=bits, mode=mode)
        got = to_np(y)
        r = mlx_qqmm(x, q)
        assert r.check(got, "mlx qqmm") == int((~r.unspecified).sum())
        if X86:
            emul = mlx_qqmm(x, q, order="mlx_cpu")
            fin = ~emul.unspecified
            assert (emul.value[fin].astype(np.float64) == got[fin].astype(np.float64)).all()


@pytest.mark.parametrize("mode", ["mxfp8", "mxfp4"])
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_qqmm_input_quantizer_bit_exact(mode: str, dt: str) -> None:
    """With an identity weight (exact in MX), qqmm returns MLX's quantize-dequantized x itself."""
    rng = np.random.default_rng(3)
    K = 64
    g, bits = MODES[mode]
    wq, sc, _, q = mx_weight(np.eye(K, dtype=F32), mode, dt)
    groups = []
    for scale in (1.0, 1e-3, 37.0, 2.0**-20, 1e-40, 1e-38, 1e4 if dt == "float16" else 1e30):
        groups.append((rng.standard_normal(K) * scale).astype(F32))
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.25, -0.75, 0.0, -0.0] * 6, F32)[:K]
    groups.append(ties)
    compared = 0
    for xv in groups:
        x = xv.reshape(1, K).astype(DTYPES[dt])
        got = to_np(mx.qqmm(mx.array(x.astype(F32)).astype(getattr(mx, dt)), wq, sc, group_size=g, bits=bits,
                            mode=mode))
        r = mlx_qqmm(x, q)
        xhat = r.meta["xhat"]
        ok = ~r.meta["xhat_unspecified"][0] & ~r.unspecified[0]  # float16: x * 256 may overflow inside MLX
        compared += int(ok.sum())
        assert (xhat[0][ok].astype(np.float64) == got[0][ok].astype(np.float64)).all(), (xhat[0][:8], got[0][:8])
        assert r.within(got).all()
    assert compared >= 5 * K


def test_errors() -> None:
    q = mx_weight(np.ones((4, 32), F32), "mxfp8", "float32")[3]
    with pytest.raises(qref.QrefError, match="single row"):
        mlx_qqmm(np.ones((2, 32), F32), q)
    with pytest.raises(qref.QrefError, match="float32, float16 or bfloat16"):
        mlx_quantized_matmul(np.ones((1, 32)), q)
    with pytest.raises(qref.QrefError, match="order"):
        mlx_quantized_matmul(np.ones((1, 32), F32), q, order="simd")
    qa = mx_weight(np.ones((4, 64), F32), "affine", "float32", bits=4, group=64)[3]
    with pytest.raises(qref.QrefError, match="fp modes"):
        mlx_quantized_matmul(np.ones((1, 64), F32), qa, order="mlx_cpu")
