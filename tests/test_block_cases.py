"""Seeded input distributions shared by the block tests (no tests here; imported by tests/test_block_*.py).

Each distribution returns a (rows, cols) array of the requested dtype; cols is a multiple of 128 so that every
block size (16, 32, 64, 128) divides it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BF16)

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def _finfo(dtype: np.dtype) -> ml_dtypes.finfo:
    return ml_dtypes.finfo(dtype)


def _cast(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, dtype=np.float64).astype(np.float32).astype(dtype)


def _grid_blocks(rng: np.random.Generator, rows: int, cols: int, block: int, top: float, grid: np.ndarray,
                 kmin: int, kmax: int) -> np.ndarray:
    """Blocks whose amax is top * 2^k (so scales are exact powers of two under every rule that hits it) and whose
    other values are grid points (midpoints and representable values) times 2^k, random signs."""
    nb = rows * cols // block
    k = rng.integers(kmin, kmax, size=(nb, 1))
    vals = rng.choice(grid, size=(nb, block)) * rng.choice([-1.0, 1.0], size=(nb, block))
    vals[:, 0] = top * rng.choice([-1.0, 1.0], size=nb)
    perm = rng.permuted(np.tile(np.arange(block), (nb, 1)), axis=1)
    vals = np.take_along_axis(vals, perm, axis=1)
    return (vals * np.exp2(k)).reshape(rows, cols)


def e4m3_grid() -> np.ndarray:
    v = np.array(sorted({float(x) for x in
                         np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
                         if np.isfinite(x) and x >= 0}))
    mids = (v[1:] + v[:-1]) / 2
    return np.concatenate([v, mids])


def distributions(dtype: np.dtype, rows: int = 8, cols: int = 256, seed: int = 0) -> dict[str, np.ndarray]:
    """Named input arrays: normal, uniform, zero blocks, -0 blocks, tiny, huge, NaN/Inf, FP4 and FP8 tie grids,
    log-uniform, outliers, random bit patterns, amax next to powers of two."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    fi = _finfo(dtype)
    tiny = float(fi.smallest_normal)
    big = float(fi.max)
    shape = (rows, cols)
    out: dict[str, np.ndarray] = {}
    out["normal"] = rng.standard_normal(shape)
    out["uniform"] = rng.uniform(-1, 1, shape)
    z = rng.standard_normal(shape)
    z.reshape(-1, 16)[::2] = 0.0  # every other 16-block is all zero (whole 32-blocks too, row ends)
    z[: rows // 2, : cols // 2] = 0.0
    out["zero_blocks"] = z
    nz = np.full(shape, -0.0)
    nz.reshape(-1, 16)[1::4] = rng.uniform(-1, 1, (rows * cols // 64, 16)) * tiny
    nz.reshape(-1, 16)[2::4] = rng.choice([-0.0, 0.0, 1.0, -2.0], size=(rows * cols // 64, 16))
    out["negative_zero"] = nz
    out["tiny"] = rng.choice([-1, 1], shape) * tiny * np.exp2(rng.uniform(-12, 3, shape))
    out["huge"] = rng.choice([-1, 1], shape) * big * rng.uniform(0.05, 1.0, shape)
    nf = rng.standard_normal(shape)
    spots = rng.random(shape)
    nf[spots < 0.02] = np.nan
    nf[(spots >= 0.02) & (spots < 0.03)] = -np.nan
    nf[(spots >= 0.03) & (spots < 0.04)] = np.inf
    nf[(spots >= 0.04) & (spots < 0.05)] = -np.inf
    out["nonfinite"] = nf
    fp4_grid = np.concatenate([E2M1, (E2M1[1:] + E2M1[:-1]) / 2])
    out["ties_fp4"] = _grid_blocks(rng, rows, cols, 16, 6.0, fp4_grid, -6, 8)
    out["ties_fp8"] = _grid_blocks(rng, rows, cols, 16, 448.0, e4m3_grid(), -10, 6)
    lo, hi = np.log2(tiny) - 5, np.log2(big) - 1
    out["loguniform"] = rng.choice([-1, 1], shape) * np.exp2(rng.uniform(max(lo, -60), min(hi, 60), shape))
    ol = rng.standard_normal(shape) * 0.01
    ol.reshape(-1, 16)[:, 3] = rng.choice([-1, 1], rows * cols // 16) * rng.uniform(100, 2000, rows * cols // 16)
    out["outliers"] = ol
    nbits = dtype.itemsize * 8
    raw = rng.integers(0, 1 << nbits, size=shape, dtype=np.uint64).astype(f"u{dtype.itemsize}")
    out["random_bits"] = raw.view(dtype)
    # amax next to M * 2^k (M = 6, 448): the scale rule's rounding boundary
    edge = rng.standard_normal(shape) * 0.1
    m = rng.choice([6.0, 448.0, 1.0, 3.0], size=rows * cols // 16)
    kk = rng.integers(-8, 8, size=rows * cols // 16)
    eps = float(fi.eps)
    nudge = 1 + rng.choice([-2, -1, 0, 1, 2], size=rows * cols // 16) * eps
    edge.reshape(-1, 16)[:, 5] = m * np.exp2(kk) * nudge
    out["pow2_edges"] = edge
    return {name: (a if a.dtype == dtype else _cast(a, dtype)) for name, a in out.items()}
