"""qref.pack / qref.unpack: round trips for every width and layout, the layouts' bit orders spelled out by hand,
and the mlx layout against MLX's own words."""

from __future__ import annotations

import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.interop.packing import LAYOUTS, pack, unpack


@pytest.mark.parametrize("layout", ["mlx", "lsb_first", "msb_first"])
@pytest.mark.parametrize("bits", [*list(range(1, 17)), 24, 31, 32])
def test_round_trip_every_width(layout: str, bits: int) -> None:
    rng = np.random.default_rng(bits)
    for n in (1, 7, 32, 33, 96, 257):
        codes = rng.integers(0, 1 << bits, size=(3, n), dtype=np.uint64).astype(np.uint32)
        packed = pack(codes, layout, bits=bits)
        container = 32 if layout == "mlx" else 8
        assert packed.shape == (3, -(-n * bits // container))
        assert packed.dtype == (np.uint32 if layout == "mlx" else np.uint8)
        back = unpack(packed, layout, bits=bits, count=n)
        assert (back.astype(np.uint64) == codes).all()
        if (n * bits) % container == 0:  # no padding: the default count recovers every code
            assert (unpack(packed, layout, bits=bits).astype(np.uint64) == codes).all()


@pytest.mark.parametrize("layout", ["nibble_low_first", "nibble_high_first"])
def test_round_trip_nibbles(layout: str) -> None:
    codes = np.arange(16, dtype=np.uint8).repeat(3)[None, :]
    for n in (1, 2, 47, 48):
        packed = pack(codes[:, :n], layout, bits=4)
        assert packed.shape == (1, (n + 1) // 2)
        assert (unpack(packed, layout, bits=4, count=n) == codes[:, :n]).all()


def test_bit_orders_by_hand() -> None:
    c = np.array([0x1, 0x2, 0x3, 0xF], dtype=np.uint8)
    assert pack(c, "nibble_low_first", bits=4).tolist() == [0x21, 0xF3]  # element 2i in the low nibble
    assert pack(c, "nibble_high_first", bits=4).tolist() == [0x12, 0x3F]  # bitsandbytes
    assert (pack(c, "lsb_first", bits=4) == pack(c, "nibble_low_first", bits=4)).all()
    assert (pack(c, "msb_first", bits=4) == pack(c, "nibble_high_first", bits=4)).all()
    # 3-bit codes 1, 2, 3 in a little-endian stream: 001 | 010 << 3 | 011 << 6 = 0b11_010_001
    assert pack(np.array([1, 2, 3]), "lsb_first", bits=3).tolist() == [0b11010001, 0b0]
    assert pack(np.array([1, 2, 3]), "msb_first", bits=3).tolist() == [0b00101001, 0b10000000]
    # mlx: 8 four-bit codes per little-endian word, code 8j + m at bits [4m, 4m + 4)
    w = pack(np.arange(8, dtype=np.uint8), "mlx", bits=4)
    assert w.dtype == np.uint32 and w.tolist() == [0x76543210]
    # 6-bit codes: 4 per 3 bytes, a 32-bit word holds 5 and a third
    w6 = pack(np.full(16, 0x3F, dtype=np.uint8), "mlx", bits=6)
    assert w6.tolist() == [0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF]
    assert pack(np.array([0xAB]), "lsb_first", bits=8).tolist() == [0xAB]


def test_signed_codes_pack_as_twos_complement() -> None:
    v = np.array([-1, -8, 7, 0], dtype=np.int8)
    p = pack(v, "nibble_low_first", bits=4)
    assert p.tolist() == [0x8F, 0x07]
    assert unpack(p, "nibble_low_first", bits=4).tolist() == [0xF, 0x8, 0x7, 0x0]


def test_pack_along_an_axis() -> None:
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 64, size=(64, 3), dtype=np.uint8)
    p = pack(codes, "mlx", bits=6, axis=0)
    assert p.shape == (12, 3)
    assert (p == pack(codes.T, "mlx", bits=6).T).all()
    assert (unpack(p, "mlx", bits=6, axis=0) == codes).all()


def test_pack_qarray_uses_its_width_and_axis() -> None:
    x = np.random.default_rng(2).standard_normal((64, 4)).astype(np.float32)
    q = qref.scheme("mxfp6_e2m3").quantize(x, axis=0)
    p = pack(q, "lsb_first")
    assert p.shape == (48, 4)
    assert (unpack(p, "lsb_first", bits=6, axis=0) == q.codes).all()


def test_ocp_mx_block_layout() -> None:
    x = np.random.default_rng(3).standard_normal((2, 40)).astype(np.float32)
    q = qref.scheme("mxfp4").quantize(x)  # pads the row to 2 blocks of 32
    p = pack(q, "ocp_mx_block")
    assert p.shape == (2, 2 * (1 + 16)) and p.dtype == np.uint8
    assert p[0, 0] == q.scales[0, 0] and p[0, 17] == q.scales[0, 1]
    assert p[0, 1] == (int(q.codes[0, 0]) << 4) | int(q.codes[0, 1])  # P_1 in the high nibble, MSB first
    codes, scales = unpack(p, "ocp_mx_block", bits=4, block_size=32, count=40)
    assert (codes == q.codes).all() and (scales == q.scales).all()
    q6 = qref.scheme("mxfp6_e3m2").quantize(x[:, :32])
    c6, s6 = unpack(pack(q6, "ocp_mx_block"), "ocp_mx_block", bits=6, block_size=32)
    assert (c6 == q6.codes).all() and (s6 == q6.scales).all()
    with pytest.raises(QrefError, match="E8M0"):
        pack(qref.scheme("nvfp4").quantize(x[:, :32]), "ocp_mx_block")


def test_errors() -> None:
    with pytest.raises(qref.UnknownNameError, match="nibble_low_first"):
        pack(np.zeros(4, np.uint8), "nibble_low", bits=4)
    with pytest.raises(QrefError, match="fit in 3 bits"):
        pack(np.array([8]), "lsb_first", bits=3)
    with pytest.raises(QrefError, match="needs bits"):
        pack(np.zeros(4, np.uint8), "lsb_first")
    with pytest.raises(QrefError, match="4-bit"):
        pack(np.zeros(4, np.uint8), "nibble_high_first", bits=2)
    with pytest.raises(QrefError, match="integer array"):
        pack(np.zeros(4, np.float32), "lsb_first", bits=4)
    with pytest.raises(QrefError, match="do not fit"):
        unpack(np.zeros(2, np.uint8), "lsb_first", bits=4, count=5)
    with pytest.raises(QrefError, match="uint32"):
        unpack(np.zeros(2, np.uint8), "mlx", bits=4)
    assert set(LAYOUTS) >= {"mlx", "nibble_low_first", "nibble_high_first", "lsb_first", "msb_first"}


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 8])
def test_mlx_layout_equals_mlx_words(bits: int) -> None:
    mx = pytest.importorskip("mlx.core", reason="compares with MLX's packing (pip install 'mlx[cpu]')")
    rng = np.random.default_rng(bits)
    for group in (32, 64, 128):
        w = rng.standard_normal((4, 256)).astype(np.float32)
        words, scales, biases = mx.quantize(mx.array(w), bits=bits, group_size=group)
        words = np.array(words)
        codes = unpack(words, "mlx", bits=bits)
        assert codes.shape == w.shape
        assert (pack(codes, "mlx", bits=bits) == words).all()
        # and each code is what MLX dequantizes: q * scale + bias
        v = np.array(mx.dequantize(mx.array(words), scales, biases, bits=bits, group_size=group))
        s = np.repeat(np.array(scales), group, axis=1)
        b = np.repeat(np.array(biases), group, axis=1)
        assert (v == codes.astype(np.float32) * s + b).all()
