"""N-D tile block scaling (block.md §12): the 1-D case is the block scheme itself, a tile is the block of its
elements gathered one tile at a time (an explicit loop over tiles here, not the scheme's reshapes), scales are
laid out per tile, and TransformerEngine's 32 x 32 MXFP8 reference agrees on its peer vectors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.schemes.tiles import TiledScheme

PEERS = Path(__file__).parent / "peers"

# (scheme name, build options): every block kind and the profiles that change block rules
SCHEMES: list[tuple[str, dict[str, Any]]] = [
    ("mxfp8_e4m3", {"profile": "ocp"}),
    ("mxfp8_e4m3", {"profile": "nvidia"}),
    ("mxfp4", {"profile": "microxcaling"}),
    ("mxfp6_e3m2", {"profile": "torchao_rceil"}),
    ("mxint8", {"profile": "ocp"}),
    ("nvfp4", {"profile": "nvidia"}),
    ("nvfp4", {"profile": "ocp"}),
    ("mlx_affine", {"profile": "mlx", "bits": 4}),
]


def _inputs(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Normal values at mixed magnitudes, with zeros of both signs, subnormals, a NaN and infinities sprinkled."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, size=shape))
    flat = x.reshape(-1)
    k = flat.size
    flat[rng.integers(0, k, 8)] = 0.0
    flat[rng.integers(0, k, 8)] = -0.0
    flat[rng.integers(0, k, 4)] = 1e-41
    return x.astype(dtype)


def _with_nonfinite(x: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = x.copy().reshape(-1)
    y[rng.integers(0, y.size, 2)] = np.nan
    y[rng.integers(0, y.size, 2)] = np.inf
    y[rng.integers(0, y.size, 2)] = -np.inf
    return y.reshape(x.shape)


def _fields(q: qref.QArray) -> dict[str, Any]:
    return {"codes": q.codes, "scales": q.scales, "biases": q.biases, "global_scale": q.global_scale,
            "unspecified": q.unspecified, "scales_unspecified": q.meta["scales_unspecified"]}


def _assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in a:
        if a[key] is None or b[key] is None:
            assert a[key] is None and b[key] is None, key
            continue
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.shape == y.shape, (key, x.shape, y.shape)
        if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
            x, y = x.astype(np.float64), y.astype(np.float64)
            assert np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x), np.signbit(y)), key
        else:
            assert np.array_equal(x, y), key


@pytest.mark.parametrize("name,opts", SCHEMES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("nonfinite", [False, True], ids=["finite", "nonfinite"])
def test_one_dimensional_tiles_are_the_block_scheme(name: str, opts: dict[str, Any], dtype: Any,
                                                    nonfinite: bool) -> None:
    """block_shape=(k,) and (1, k) give exactly what block_size=k along the last axis gives (§12 C4)."""
    block = qref.scheme(name, **opts)
    k = block.block_size
    x = _inputs(dtype, (6, 4 * k), 1)
    if nonfinite:
        x = _with_nonfinite(x, 2)
    with np.errstate(all="ignore"):
        want = block.quantize(x, axis=-1)
        for shape in [(k,), (1, k)]:
            tiled = qref.scheme(name, block_shape=shape, **opts)
            assert isinstance(tiled, TiledScheme) and tiled.block == block
            got = tiled.quantize(x)
            _assert_same(_fields(got), _fields(want))
            _assert_same({"v": tiled.dequantize(got)}, {"v": block.dequantize(want)})


def _loop_reference(block: Any, x: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...], gs: Any = None
                    ) -> dict[str, Any]:
    """Each tile's elements gathered by an explicit loop over tile origins (row-major within the tile), quantized
    as one block of the block scheme, and put back element by element (the definition in block.md §12)."""
    m = len(axes)
    others = [a for a in range(x.ndim) if a not in axes]
    grid = [-(-x.shape[a] // t) for a, t in zip(axes, shape)]
    codes = np.zeros(x.shape, np.int64)
    unspec = np.zeros(x.shape, bool)
    scale_shape = [x.shape[a] if a not in axes else grid[axes.index(a)] for a in range(x.ndim)]
    scales: np.ndarray | None = None
    biases: np.ndarray | None = None
    for outer in itertools.product(*[range(x.shape[a]) for a in others]):
        for g in itertools.product(*[range(n) for n in grid]):
            idx: list[tuple[tuple[int, ...], int]] = []
            vals: list[Any] = []
            for j, inner in enumerate(itertools.product(*[range(t) for t in shape])):
                pos = [0] * x.ndim
                for a, o in zip(others, outer):
                    pos[a] = o
                for i in range(m):
                    pos[axes[i]] = g[i] * shape[i] + inner[i]
                if all(pos[a] < x.shape[a] for a in axes):
                    idx.append((tuple(pos), j))
                    vals.append(x[tuple(pos)])
                else:
                    vals.append(x.dtype.type(0))
            q = block.quantize(np.array([vals], dtype=x.dtype), axis=-1, global_scale=gs)
            spos = [0] * x.ndim
            for a, o in zip(others, outer):
                spos[a] = o
            for i in range(m):
                spos[axes[i]] = g[i]
            if scales is None:
                scales = np.zeros(scale_shape, np.asarray(q.scales).dtype)
                biases = None if q.biases is None else np.zeros(scale_shape, np.asarray(q.biases).dtype)
            scales[tuple(spos)] = q.scales.reshape(-1)[0]
            if biases is not None:
                biases[tuple(spos)] = q.biases.reshape(-1)[0]
            for p, j in idx:
                codes[p] = q.codes.reshape(-1)[j]
                unspec[p] = q.unspecified.reshape(-1)[j]
    return {"codes": codes, "scales": scales, "biases": biases, "unspecified": unspec}


CASES = [  # (input shape, block_shape, axes); 32 elements per tile (MLX affine groups are 32, 64 or 128)
    ((8, 16), (4, 8), None),
    ((9, 10), (4, 8), None),            # partial tiles on both axes
    ((3, 8, 6), (4, 8), None),          # a batch axis, a partial tile along the last
    ((6, 5, 8), (4, 8), (0, 2)),        # tiles over non-adjacent axes
    ((8, 6), (8, 4), (1, 0)),           # axes given in the other order: block_shape[0] runs along axis 1
    ((4, 6, 8), (2, 4, 4), None),       # rank-3 tiles
]


LOOP_SCHEMES = [SCHEMES[0], SCHEMES[2], SCHEMES[4], ("nvfp4", {"profile": "ocp"})]


@pytest.mark.parametrize("name,opts", LOOP_SCHEMES, ids=lambda v: str(v))
@pytest.mark.parametrize("shape,block_shape,axes", CASES, ids=lambda v: str(v))
def test_tiles_equal_the_per_tile_loop(name: str, opts: dict[str, Any], shape: tuple[int, ...],
                                       block_shape: tuple[int, ...], axes: tuple[int, ...] | None) -> None:
    tiled = qref.scheme(name, block_shape=block_shape, pad="zero", **opts)
    x = _inputs(np.float32, shape, 3)
    ax = tuple(range(len(shape) - len(block_shape), len(shape))) if axes is None else axes
    # NVFP4's two-level scale reads the tensor amax: both sides are given it, so the loop's one-tile calls agree
    gs = np.float32(np.abs(x).max()) if tiled.block.global_scale_rule != "exact" else None
    q = tiled.quantize(x, axes=axes, global_scale=gs)
    want = _loop_reference(tiled.block, x, block_shape, ax, gs)
    for key in ("codes", "scales", "biases", "unspecified"):
        if want[key] is None:
            assert getattr(q, key) is None
        else:
            assert np.array_equal(np.asarray(getattr(q, key)), want[key]), key
    v = tiled.dequantize(q)
    assert v.shape == x.shape


def test_mlx_affine_tiles_equal_the_per_tile_loop() -> None:
    """Affine groups (scales and biases per tile): MLX takes groups of 32, 64 or 128 along the last axis."""
    tiled = qref.scheme("mlx_affine", profile="mlx", bits=4, block_shape=(2, 32))
    x = _inputs(np.float32, (6, 64), 8)
    q = tiled.quantize(x)
    want = _loop_reference(tiled.block, x, (2, 32), (0, 1))
    for key in ("codes", "scales", "biases", "unspecified"):
        assert np.array_equal(np.asarray(getattr(q, key)), want[key]), key
    assert q.scales.shape == (3, 2)


def test_nvidia_16x16_nvfp4_tiles_equal_the_per_tile_loop() -> None:
    """The NVFP4 training recipe's 16 x 16 weight tiles under the two-level nvidia rule, the tensor amax given."""
    tiled = qref.scheme("nvfp4", profile="nvidia", block_shape=(16, 16))
    x = _inputs(np.float32, (32, 48), 9)
    gs = np.float32(np.abs(x).max())
    q = tiled.quantize(x, global_scale=gs)
    want = _loop_reference(tiled.block, x, (16, 16), (0, 1), gs)
    for key in ("codes", "scales", "unspecified"):
        assert np.array_equal(np.asarray(getattr(q, key)), want[key]), key


def test_tiled_nvfp4_two_level_reads_the_tensor_amax() -> None:
    """The global scale of a tiled NVFP4 scheme is the tensor's (padding adds only zeros): equal to the 1-D
    scheme's on the same input."""
    x = _inputs(np.float32, (32, 48), 4)
    tiled = qref.scheme("nvfp4", profile="nvidia", block_shape=(4, 16))
    flat = qref.scheme("nvfp4", profile="nvidia")
    assert np.array_equal(tiled.quantize(x).global_scale, flat.quantize(x).global_scale)


def test_mx_tile_scale_is_floor_log2_of_the_tile_amax() -> None:
    """OCP MX scale byte of each 8 x 8 tile: floor(log2(max |x| over the tile)) - emax(E4M3)=8, plus 127 — computed
    from the tile maxima with numpy's frexp, independently of the block code."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((32, 40)) * np.exp2(rng.integers(-30, 30, (32, 40)))).astype(np.float32)
    q = qref.scheme("mxfp8_e4m3", profile="ocp", block_shape=(8, 8)).quantize(x)
    amax = np.abs(x).reshape(4, 8, 5, 8).max(axis=(1, 3)).astype(np.float64)
    _, e = np.frexp(amax)
    assert np.array_equal(q.scales.astype(np.int64), (e - 1) - 8 + 127)


def test_partial_tiles_follow_the_pad_rule() -> None:
    x = _inputs(np.float32, (10, 10), 6)
    with pytest.raises(qref.QrefError, match="not a multiple of its tile extent"):
        qref.scheme("mxfp8_e4m3", profile="ocp", block_shape=(4, 4), pad="error").quantize(x)
    padded = np.zeros((12, 12), np.float32)
    padded[:10, :10] = x
    s = qref.scheme("mxfp8_e4m3", profile="ocp", block_shape=(4, 4), pad="zero")
    a, b = s.quantize(x), s.quantize(padded)
    assert np.array_equal(a.codes, b.codes[:10, :10]) and np.array_equal(a.scales, b.scales)


def test_spec_round_trip_and_bad_input() -> None:
    s = qref.scheme("mxfp4", profile="ocp", block_shape=(16, 2))
    assert qref.scheme_from_spec(s.to_spec()) == s
    assert json.loads(json.dumps(s.to_spec())) == s.to_spec()
    for bad in [(), (0, 4), (2.0, 4), "32", (True, 32)]:
        with pytest.raises(qref.QrefError, match="block_shape"):
            qref.scheme("mxfp4", block_shape=bad)
    with pytest.raises(qref.QrefError, match="takes block sizes"):  # C2: the innermost extent
        qref.scheme("nvfp4", profile="nvidia", block_shape=(16, 32))
    assert qref.scheme("nvfp4", profile="nvidia", block_shape=(16, 16)).block.block_size == 256
    with pytest.raises(qref.QrefError, match="contradicts"):
        qref.scheme("mxfp4", block_shape=(4, 8), block_size=16)
    with pytest.raises(qref.QrefError, match="block schemes"):
        qref.scheme("nf4", block_shape=(4, 8))
    x = _inputs(np.float32, (8, 8), 7)
    with pytest.raises(qref.QrefError, match="tiles 2 axes"):
        s.quantize(x[0])
    with pytest.raises(qref.QrefError, match="repeats"):
        s.quantize(x, axes=(1, -1))
    q = s.quantize(x)
    q.scales = q.scales[:, :1]
    with pytest.raises(qref.QrefError, match="do not fit"):
        s.dequantize(q)


def _te() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    d = PEERS / "transformer_engine"
    with np.load(d / "vectors.npz", allow_pickle=False) as z:
        return json.loads((d / "manifest.json").read_text()), dict(z)


def test_nvidia_32x32_tiles_equal_te_mxfp8_reference() -> None:
    """TransformerEngine's _mxfp8_2d_quantize_reference (32 x 32 tiles) on its finite peer tensors: every code and
    scale byte equal (tests/test_block_peers.py holds the same vectors with the tiles built by hand)."""
    man, z = _te()
    dts = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
    s = qref.scheme("mxfp8_e4m3", profile="nvidia", block_shape=(32, 32))
    n = 0
    for t in man["tensors"]:
        if t.split("__")[1] in ("nan", "inf"):
            continue
        x = z[f"{t}__x"].view(dts[t.split("__")[0]])
        q = s.quantize(x)
        assert np.array_equal(q.codes, z[f"{t}__mxfp8_codes"]), t
        assert np.array_equal(q.scales, z[f"{t}__mxfp8_scales"]), t
        n += x.size
    assert n == 36 * 64 * 128
