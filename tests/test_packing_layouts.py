"""The 2-D block-scale layouts and FP6's three-byte packing (block.md §9.1): against live oracles and round trips.

swizzled_128x4: torchao 0.18's ``to_blocked`` (the layout cuBLAS and cuDNN take for MX / NVFP4 scale factors),
run here on the same scale bytes, for shapes with and without padding. fp6_x4: the 24-bit little-endian word of
four 6-bit codes computed with Python integers. trainium_mx_8x4: the group and slot of each element from its
(partition, element) indices. Every layout round-trips through unpack.
"""

from __future__ import annotations

import numpy as np
import pytest

import qref

SHAPES = [(128, 4), (1, 1), (130, 5), (256, 12), (384, 8), (7, 33)]


@pytest.mark.parametrize("shape", SHAPES)
def test_swizzled_128x4_is_torchao_to_blocked(shape: tuple[int, int]) -> None:
    torch = pytest.importorskip("torch")
    utils = pytest.importorskip("torchao.prototype.mx_formats.utils")
    scales = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    want = utils.to_blocked(torch.from_numpy(scales)).numpy().reshape(-1)
    got = qref.pack(scales, "swizzled_128x4", bits=8)
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    assert np.array_equal(qref.unpack(got, "swizzled_128x4", bits=8, shape=shape), scales)


def test_swizzled_128x4_packs_a_qarrays_scale_bytes() -> None:
    """An MX QArray's E8M0 scale bytes (128 rows x 8 blocks of 32) go through the layout as they are."""
    x = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32)
    q = qref.scheme("mxfp8_e4m3").quantize(x)
    got = qref.pack(q, "swizzled_128x4")
    assert np.array_equal(qref.unpack(got, "swizzled_128x4", bits=8, shape=(128, 8)), np.asarray(q.scales))


def test_swizzled_128x4_refuses_what_it_cannot_lay_out() -> None:
    with pytest.raises(qref.QrefError, match="2-D"):
        qref.pack(np.zeros((2, 2, 2), np.uint8), "swizzled_128x4", bits=8)
    with pytest.raises(qref.QrefError, match="shape="):
        qref.unpack(np.zeros(512, np.uint8), "swizzled_128x4", bits=8)
    with pytest.raises(qref.QrefError, match="512 bytes"):
        qref.unpack(np.zeros(511, np.uint8), "swizzled_128x4", bits=8, shape=(3, 3))


def test_fp6_x4_is_the_little_endian_24_bit_word() -> None:
    codes = np.random.default_rng(2).integers(0, 64, (5, 40), dtype=np.uint8)
    got = qref.pack(codes, "fp6_x4", bits=6)
    want = []
    for row in codes.tolist():
        out = []
        for g in range(0, len(row), 4):
            w = sum(int(c) << (6 * j) for j, c in enumerate(row[g:g + 4]))
            out += [w & 0xFF, (w >> 8) & 0xFF, w >> 16]
        want.append(out)
    assert np.array_equal(got, np.array(want, np.uint8))
    assert np.array_equal(qref.unpack(got, "fp6_x4", bits=6), codes)
    with pytest.raises(qref.QrefError, match="6-bit"):
        qref.pack(codes & 15, "fp6_x4", bits=4)


def test_trainium_mx_8x4_groups() -> None:
    x = np.arange(16 * 12, dtype=np.uint8).reshape(16, 12)
    got = qref.pack(x, "trainium_mx_8x4", bits=8)
    assert got.shape == (2, 3, 32)
    p, f = np.indices(x.shape)
    assert np.array_equal(got[p // 8, f // 4, 4 * (p % 8) + f % 4], x)
    assert np.array_equal(qref.unpack(got, "trainium_mx_8x4", bits=8), x)
    with pytest.raises(qref.QrefError, match="multiple of 8"):
        qref.pack(x[:12], "trainium_mx_8x4", bits=8)
