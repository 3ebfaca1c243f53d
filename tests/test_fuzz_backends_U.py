"""Regression tests for the differences a differential fuzz of the public quantization API against the real
backends found (shapes, layouts and values the other tests rarely use). Each test runs the real backend and
compares codes / scales as unsigned integers and values as bit patterns; one test per root cause."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import qref


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


# ---------------------------------------------------------------------------------------------------------
# bitsandbytes quantize_4bit: an input shorter than one block is one partial block (lut.md §3.2)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("table", ["nf4", "fp4_bnb"])
@pytest.mark.parametrize("n", [1, 7, 63])
def test_bnb_input_shorter_than_a_block_is_a_partial_block(table: str, n: int) -> None:
    """bitsandbytes stores the clamped absmax max(a, 1e-38) of a partial last block and divides it; an input of
    fewer than block_size elements is such a block (qref treated it as a full one: stored the tiny absmax)."""
    torch = pytest.importorskip("torch", reason="bitsandbytes runs on torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F = pytest.importorskip("bitsandbytes.functional", reason="the bitsandbytes profile is checked against it")
    rng = np.random.default_rng(n)
    x = (rng.integers(-40, 40, n) * np.float32(2.0**-140)).astype(np.float32)  # subnormal absmax < 1e-38
    x[0] = np.float32(3 * 2.0**-140)
    packed, st = F.quantize_4bit(torch.from_numpy(x), blocksize=64, quant_type=table.replace("_bnb", ""))
    b = packed.contiguous().view(torch.uint8).numpy().reshape(-1)
    ref_codes = np.stack([b >> 4, b & 15], axis=1).reshape(-1)[:n]
    q = qref.scheme(table, block_size=64, profile="bitsandbytes").quantize(x)
    assert (_bits(q.scales.reshape(-1)) == _bits(st.absmax.numpy().reshape(-1))).all()
    assert (q.codes == ref_codes).all()
    ref = F.dequantize_4bit(packed, st).numpy().reshape(-1)
    assert (_bits(q.dequantize().reshape(-1)) == _bits(ref)).all()


# ---------------------------------------------------------------------------------------------------------
# bad arguments: a QrefError naming the argument, not a numpy / Python traceback and not a silent acceptance
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("build", "word"), [
    (lambda: qref.scheme("int8", scale=0.1, profile=["onnx"]), "profile"),
    (lambda: qref.scheme("int8", scale=0.1, zero_point=np.inf), "zero points"),
    (lambda: qref.scheme("int8", scale=0.1, zero_point=-np.inf), "zero points"),
    (lambda: qref.scheme("int8", scale=0.1, axis=1.5), "axis"),
    (lambda: qref.scheme("int8", scale=0.1, axis="0"), "axis"),
    (lambda: qref.scheme("int8", scale=[0.1, 0.2], axis=True), "axis"),
    (lambda: qref.scheme("nf4", profile="torchao", block_size=np.nan), "block_size"),
    (lambda: qref.scheme("nf4", profile="torchao", block_size=[64]), "block_size"),
    (lambda: qref.scheme("nf4", profile="torchao", block_size=np.inf), "block_size"),
])
def test_bad_scheme_arguments_are_qref_errors(build, word: str) -> None:
    with pytest.raises(qref.QrefError, match=word):
        build()


@pytest.mark.parametrize("offset", [[0.1, 0.2], [], "0.1", {"a": 1}, complex(1, 1), True])
def test_bad_scale_offset_is_a_qref_error(offset: object) -> None:
    x = np.linspace(-1, 1, 64 * 256, dtype=np.float32)
    sch = qref.scheme("nf4", block_size=64, profile="bitsandbytes", double_quant=True)
    with pytest.raises(qref.QrefError, match="scale_offset"):
        sch.quantize(x, scale_offset=offset)
    assert sch.quantize(x, scale_offset=np.float32(0.5)).meta["double_quant"].offset == np.float32(0.5)


# ---------------------------------------------------------------------------------------------------------
# qwix NF4: a signaling-NaN input (its payload kept in the block scale) dequantizes without a RuntimeWarning
# ---------------------------------------------------------------------------------------------------------
def test_qwix_dequantize_of_a_signaling_nan_block_does_not_warn() -> None:
    jnp = pytest.importorskip("jax.numpy", reason="qwix runs on jax")
    qarray = pytest.importorskip("qwix._src.core.qarray", reason="the qwix profile is checked against qwix")
    x = np.random.default_rng(5).standard_normal((4, 128)).astype(np.float32)
    x[1, 63] = np.array(0x7F800001, np.uint32).view(np.float32)  # signaling NaN (a small array: XLA keeps it)
    ref = qarray.quantize_api(jnp.asarray(x), "nf4", channelwise_axes=(0,), tiled_axes={1: 64})
    q = qref.scheme("nf4", block_size=64, profile="qwix", axis=1).quantize(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mine = q.dequantize("float32")
    want = np.asarray(qarray.dequantize(ref)).astype(np.float32)
    assert (q.codes == np.asarray(ref.qvalue).astype(np.uint8)).all()
    nan = np.isnan(want)
    assert (np.isnan(mine) == nan).all() and nan[1, :64].all() and not nan[1, 64:].any()
    assert (_bits(mine[~nan]) == _bits(want[~nan])).all()


# ---------------------------------------------------------------------------------------------------------
# MLX affine dequantize: scales and biases in a non-native byte order hold the same values
# ---------------------------------------------------------------------------------------------------------
def test_mlx_affine_dequantize_takes_byte_swapped_scales() -> None:
    mx = pytest.importorskip("mlx.core", reason="the mlx profile is checked against MLX (pip install 'mlx[cpu]')")
    import dataclasses

    x = np.random.default_rng(9).standard_normal((4, 128)).astype(np.float32)
    w, s, b = mx.quantize(mx.array(x), bits=4, group_size=64)
    want = np.array(mx.dequantize(w, s, b, bits=4, group_size=64))
    sch = qref.scheme("mlx_affine", bits=4, group_size=64, profile="mlx")
    q = sch.quantize(x.astype(">f4"))
    q = dataclasses.replace(q, scales=q.scales.astype(">f4"), biases=q.biases.astype(">f4"))
    assert (_bits(sch.dequantize(q)) == _bits(want)).all()


def test_numpy_integer_sizes_are_integers() -> None:
    """block_size / group_size / bits from numpy arithmetic (np.int64) build the same scheme as Python ints."""
    x = np.random.default_rng(3).standard_normal((2, 128)).astype(np.float32)
    for name, kw in (("mxfp4", {"block_size": 32}), ("nf4", {"block_size": 64}),
                     ("mlx_affine", {"bits": 4, "group_size": 64})):
        a = qref.scheme(name, **kw)
        b = qref.scheme(name, **{k: np.int64(v) for k, v in kw.items()})
        assert a == b and (a.quantize(x).codes == b.quantize(x).codes).all()


@pytest.mark.parametrize("g", ["1.0", b"1", True, object()])
def test_global_scale_that_is_not_a_number_is_a_qref_error(g: object) -> None:
    x = np.ones((2, 32), np.float32)
    with pytest.raises(qref.QrefError, match="global_scale"):
        qref.scheme("nvfp4", profile="nvidia").quantize(x, global_scale=g)
