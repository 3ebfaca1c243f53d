"""MLX's user-written uniform quantization against qref's ``mlx`` uniform profile (qref/profiles/uniform.py):
mx.clip(mx.round(x / s) + z, lo, hi).astype(mx.int8), eagerly with s and z arrays and under mx.compile with s and
z captured as Python numbers (the CPU kernel mx.compile builds keeps the division). The inputs are ties of x / s
and their float neighbours, where a reciprocal rewrite or another zero-point order would give other codes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qref

mx = pytest.importorskip("mlx.core", reason="MLX cross-check")


def _inputs(s: float, dt: type) -> np.ndarray:
    b = ((np.arange(-140, 141, dtype=np.float64) + 0.5) * s).astype(dt)
    up = np.nextafter(b.astype(np.float32), np.float32(np.inf)).astype(dt)
    down = np.nextafter(b.astype(np.float32), np.float32(-np.inf)).astype(dt)
    return np.concatenate([b, up, down, np.array([0.0, -0.0, 1e4, -1e4], dt)])


def _g(v, s_, z_):
    return mx.clip(mx.round(v / s_) + z_, -128, 127).astype(mx.int8)


def _mx(a: np.ndarray):
    return mx.array(a.view(np.uint16)).view(mx.bfloat16) if a.dtype == ml_dtypes.bfloat16 else mx.array(a)


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["float32", "float16", "bfloat16"])
def test_mlx_uniform_quantize_eager_and_compiled(dt: type) -> None:
    n = 0
    for s in (0.1, 0.013, 0.5):
        for z in (0, 3, -3):
            x = _inputs(s, dt)
            sx, zx = np.asarray(s).astype(np.float32).astype(dt), np.asarray(z).astype(np.float32).astype(dt)
            eager = np.array(_g(_mx(x), _mx(sx.reshape(1))[0], _mx(zx.reshape(1))[0]))
            runs = [eager]
            if (s, z) == (0.1, 3):  # mx.compile builds one C++ kernel per captured constant (g++): one a dtype
                sv = float(np.float32(s).astype(dt))
                runs.append(np.array(mx.compile(lambda v, sv=sv, z=z: _g(v, sv, z))(_mx(x))))
            want = qref.scheme("int8", scale=s, zero_point=z, profile="mlx").quantize(x)
            ok = ~want.unspecified
            for got in runs:
                bad = np.flatnonzero(got.astype(np.int64)[ok] != want.codes.astype(np.int64)[ok])
                assert bad.size == 0, f"s={s} z={z}: {bad.size} mismatches, first x {x[ok][bad[:3]]}"
            n += int(ok.sum())
    assert n > 5000
