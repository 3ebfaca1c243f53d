"""The ``qwix`` block profile equals real qwix 0.1.8 (qarray.quantize_api(x, 'mxfp8' | 'mxfp4' | 'nvfp4') and
qarray.dequantize under jax.jit, jax 0.10.2, XLA:CPU) bit for bit: element codes and scale bytes compared as
unsigned integers on float32, float16 and bfloat16 inputs, dequantized values as bit patterns.

The inputs: the 13 distributions of test_block_cases (zeros, -0, tiny, huge, NaN/Inf, exact tie grids, random bit
patterns, amax next to M * 2^k ...), random blocks whose amax spans the whole range of the dtype with elements on
the element format's tie grid, every positive float16 / bfloat16 amax and the float32 amax next to M * 2^k over
the scale range (the scale rule's rounding boundaries, block.md §3.3), and every (scale byte, code) pair for
dequantize. qwix's scales are floats (2^e, E4M3 values, NaN, Inf): stored as E8M0 / E4M3 bytes with ml_dtypes,
as the harness adapter does (exact for those values; NaN and Inf become the NaN byte). The only exceptions are
the elements and scales qref marks unspecified (NaN signs, float32 blocks holding NaN: XLA:CPU's max reduction
drops the NaN depending on the array's shape)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_block_cases import DTYPES, E2M1, distributions, e4m3_grid

import qref

jax = pytest.importorskip("jax", reason="the qwix profile is checked against qwix on JAX (pip install qwix)")
pytest.importorskip("qwix", reason="the qwix profile is checked against qwix (pip install qwix)")
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
from qwix._src.core import qarray  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
#: qref scheme -> (qwix qtype, tile, the scale format of the bytes, element maximum)
SCHEMES = {"mxfp8_e4m3": ("mxfp8", 32, "float8_e8m0fnu", 448.0), "mxfp4": ("mxfp4", 32, "float8_e8m0fnu", 6.0),
           "nvfp4": ("nvfp4", 16, "float8_e4m3fn", 6.0)}
_FNS: dict[tuple[str, int], object] = {}


def qwix_quantize(name: str, x: np.ndarray, jit: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(codes as uint8, scale bytes) of qwix's quantize_api on a 2-D x tiled along axis 1, under jax.jit or eager
    (op by op)."""
    qt, tile, sf, _ = SCHEMES[name]
    key = (qt, tile)
    if key not in _FNS:
        _FNS[key] = jax.jit(lambda v: qarray.quantize_api(v, qt, tiled_axes={1: tile}, channelwise_axes=(0,)))
    fn = _FNS[key] if jit else (lambda v: qarray.quantize_api(v, qt, tiled_axes={1: tile}, channelwise_axes=(0,)))
    q = fn(jnp.asarray(x))  # type: ignore[operator]
    codes = np.asarray(q.qvalue).view(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        scales = np.asarray(q.scale).astype(np.float32).astype(getattr(ml_dtypes, sf)).view(np.uint8)
    return codes, scales.reshape(x.shape[0], -1)


def mismatches(name: str, x: np.ndarray, jit: bool = True) -> tuple[int, int, int]:
    """(code mismatches, scale mismatches, elements compared) of qref's qwix profile against qwix on x."""
    q = qref.scheme(name, profile="qwix").quantize(x)
    codes, scales = qwix_quantize(name, x, jit)
    ours = np.asarray(q.codes).astype(np.uint8)
    bad_codes = (ours != codes) & ~np.asarray(q.unspecified, dtype=bool)
    sunspec = np.asarray(q.meta["scales_unspecified"], dtype=bool).reshape(scales.shape)
    bad_scales = (np.asarray(q.scales).astype(np.uint8).reshape(scales.shape) != scales) & ~sunspec
    return int(bad_codes.sum()), int(bad_scales.sum()), x.size


def random_blocks(dtype: np.dtype, name: str, rows: int, seed: int) -> np.ndarray:
    """Blocks whose amax spans the dtype's range (2^-70 .. the dtype's max, with zero, tiny and huge rows), the
    elements on the element format's tie grid scaled by a power of two, a few zeros, Infs and NaNs."""
    _, tile, _, M = SCHEMES[name]
    rng = np.random.default_rng(seed)
    fi = ml_dtypes.finfo(dtype)
    lo, hi = int(np.log2(float(fi.smallest_subnormal))), int(np.log2(float(fi.max)))
    grid = np.concatenate([E2M1, (E2M1[1:] + E2M1[:-1]) / 2]) if M == 6.0 else e4m3_grid()
    vals = rng.choice(grid, (rows, tile)) * rng.choice([-1.0, 1.0], (rows, tile))
    k = rng.integers(lo - 3, hi - int(np.log2(M)) + 2, size=(rows, 1))
    x = vals * np.exp2(k.astype(np.float64))
    x[rng.random((rows, tile)) < 0.05] = 0.0
    x[rng.random(rows) < 0.05] = 0.0  # zero blocks
    spots = rng.random((rows, tile))
    x[spots < 0.002] = np.inf
    x[(spots >= 0.002) & (spots < 0.004)] = -np.inf
    x[(spots >= 0.004) & (spots < 0.006)] = np.nan
    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_qwix_quantize_distributions(name: str, dtype: np.dtype) -> None:
    d = distributions(dtype, 16, 512, seed=3)
    got = {k: mismatches(name, v) for k, v in d.items()}
    assert {k: v[:2] for k, v in got.items() if v[:2] != (0, 0)} == {}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_qwix_quantize_random_blocks(name: str, dtype: np.dtype) -> None:
    x = random_blocks(np.dtype(dtype), name, 4096, seed=11)
    assert mismatches(name, x)[:2] == (0, 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_qwix_eager_equals_the_jit_profile(name: str, dtype: np.dtype) -> None:
    """Eager (op by op) qwix gives the jitted results: each jnp op with a Python constant compiles with the constant
    folded, so the profile's reciprocal constants hold op by op too (one profile, no qwix_eager)."""
    _, tile, _, M = SCHEMES[name]
    x = np.concatenate([random_blocks(np.dtype(dtype), name, 1024, seed=7), amax_blocks(np.dtype(dtype), M, tile)])
    assert mismatches(name, x, jit=False)[:2] == (0, 0)


def amax_blocks(dtype: np.dtype, M: float, tile: int) -> np.ndarray:
    """One block per amax: every positive finite float16 / bfloat16 value, or the float32 values within 64 ulps
    of M * 2^k (k over the scale range) and of 2^k; the amax sits in element 0, the others are amax / 3."""
    if dtype.itemsize == 2:
        top = int(np.array(np.inf, dtype=dtype).view(np.uint16))
        a = np.arange(1, top, dtype=np.uint16).view(dtype)
    else:
        ks = np.arange(-150, 128)
        with np.errstate(over="ignore"):
            centres = np.concatenate([np.exp2(ks) * M, np.exp2(ks)]).astype(np.float32)
        centres = centres[np.isfinite(centres) & (centres > 0)].view(np.uint32).astype(np.int64)
        bits = (centres[:, None] + np.arange(-64, 65)[None, :]).reshape(-1)
        bits = np.unique(bits[(bits > 0) & (bits < 0x7F800000)])
        a = bits.astype(np.uint32).view(np.float32)
    x = np.repeat((a.astype(np.float64) / 3)[:, None], tile, axis=1)
    x[:, 0] = a.astype(np.float64)
    x[1::2, 1] *= -1
    return x.astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_qwix_scale_rule_boundaries(name: str, dtype: np.dtype) -> None:
    """The scale rule at its rounding boundaries (block.md §3.3): every 16-bit amax, float32 amax next to M * 2^k."""
    _, tile, _, M = SCHEMES[name]
    x = amax_blocks(np.dtype(dtype), M, tile)
    assert mismatches(name, x)[:2] == (0, 0)


@pytest.mark.parametrize("out", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_qwix_dequantize_every_pair(name: str, out: np.dtype) -> None:
    """qarray.dequantize(QArray(codes, scale in the output dtype)) over every (scale byte, code) pair, as bit
    patterns; NaN results compare by class (a NaN code times the NaN scale: which NaN operand XLA:CPU returns
    depends on the array's shape, conformance/xfails/qwix.txt)."""
    qt, tile, sf, _ = SCHEMES[name]
    s = qref.scheme(name, profile="qwix")
    ef = s.format.element
    per = np.resize(np.arange(1 << ef.bits, dtype=np.uint8), max(1 << ef.bits, tile)).reshape(-1, tile)
    codes = np.tile(per, (256, 1))  # every code under every scale byte
    nb = codes.shape[0]
    rows = np.repeat(np.arange(256, dtype=np.uint8), per.shape[0])
    out = np.dtype(out)
    with np.errstate(over="ignore", invalid="ignore"):
        sc = rows.view(getattr(ml_dtypes, sf)).astype(np.float32).astype(out)
    f = jax.jit(lambda v, t: qarray.dequantize(qarray.QArray(v, t, None, qt)))
    y = np.asarray(f(jnp.asarray(codes.view(getattr(ml_dtypes, ef.name))), jnp.asarray(sc.reshape(nb, 1))))
    q = qref.QArray(codes=codes, scheme=s, scales=rows.reshape(nb, 1), axis=-1)
    ours = np.asarray(s.dequantize(q, dtype=out))
    assert ours.dtype == y.dtype
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(ours.astype(np.float64)) & np.isnan(y.astype(np.float64))
    w = f"u{out.itemsize}"
    bad = (ours.view(w) != y.view(w)) & ~both_nan
    assert int(bad.sum()) == 0, list(zip(*np.nonzero(bad)))[:5]


def test_qwix_profile_rules_are_the_qwix_mechanisms() -> None:
    """The record's fields (block.md §8): each a mechanism read from qwix's source and XLA's optimized HLO."""
    mx = qref.scheme("mxfp4", profile="qwix").rules
    assert (mx.scale_rule, mx.tiny_quotient, mx.nonfinite_block, mx.quotient_arith) == (
        "rceil_log2_via_ln_in_dtype", "one_below_sqrt_min_normal", "nonfinite_divisor", "reciprocal")
    nv = qref.scheme("nvfp4", profile="qwix").rules
    assert (nv.global_scale_rule, nv.tiny_quotient) == ("input_dtype_clip", "one_below_sqrt_min_normal")
