"""The bitsandbytes profile against bitsandbytes itself (CPU): quantize_4bit / dequantize_4bit (NF4, FP4),
compress_statistics (double quantization) and quantize_blockwise / dequantize_blockwise (dynamic8).
Spec: docs/spec/lut.md §6.2. Codes and floats are compared as unsigned integers (bit patterns)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_lookup_oracle import blocks_with_unit_absmax, tie_points

import qref

torch = pytest.importorskip("torch", reason="bitsandbytes runs on torch")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    F = pytest.importorskip("bitsandbytes.functional", reason="the bitsandbytes profile is checked against it")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
BLOCKS = (32, 64, 128, 256, 512, 1024, 2048, 4096)


def unpack_high_first(packed: torch.Tensor, n: int) -> tuple[np.ndarray, np.ndarray]:
    """bitsandbytes' bytes -> (codes, raw bytes): element 2i in the high nibble of byte i."""
    b = packed.contiguous().view(torch.uint8).numpy().reshape(-1)
    codes = np.empty(2 * b.size, dtype=np.uint8)
    codes[0::2] = b >> 4
    codes[1::2] = b & 0x0F
    return codes[:n], b


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def same_floats(ours: np.ndarray, ref: np.ndarray) -> bool:
    """Equal bit patterns, except that any NaN matches any NaN (payloads are unspecified, lut.md §4)."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    nan_o, nan_r = np.isnan(ours.astype(np.float32)), np.isnan(ref.astype(np.float32))
    return bool((nan_o == nan_r).all() and (bits(ours)[~nan_o] == bits(ref)[~nan_r]).all())


def to_torch(x: np.ndarray, dt: str) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(DTYPES[dt])


def ours_input(t: torch.Tensor) -> np.ndarray:
    import ml_dtypes

    a = t.float().numpy()
    return {torch.float32: a, torch.float16: a.astype(np.float16), torch.bfloat16: a.astype(ml_dtypes.bfloat16)}[
        t.dtype]


def inputs(kind: str, n_blocks: int, block: int, tail: int, seed: int, table: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = n_blocks * block + tail
    if kind == "normal":
        return (rng.standard_normal(n) * rng.uniform(1e-3, 1e3)).astype(np.float32)
    if kind == "ties":  # every midpoint and neighbour, in blocks whose absmax is 1
        pts = tie_points(qref.scheme(table, profile="bitsandbytes").table)
        x = blocks_with_unit_absmax(np.tile(pts, 1 + n // pts.size), block)
        return x[:n]
    x = rng.standard_normal(n).astype(np.float32)  # edge cases
    if n_blocks >= 4:
        x[:block] = 0                       # a zero block
        x[block + 3] = np.nan               # a NaN
        x[2 * block + 1], x[2 * block + 2] = np.inf, -np.inf
        x[3 * block:4 * block] = np.float32(1e-40)  # subnormal absmax: bitsandbytes' 1e-38 floor
    if tail:
        x[n_blocks * block:] = 0            # a zero partial block (stores 1e-38)
    return x


def check_4bit(x: np.ndarray, table: str, dt: str, block: int, compress: bool = False) -> None:
    t = to_torch(x, dt)
    packed, state = F.quantize_4bit(t, blocksize=block, quant_type=table.replace("_bnb", ""),
                                    compress_statistics=compress)
    ref_codes, raw = unpack_high_first(packed, x.size)
    sch = qref.scheme(table, block_size=block, profile="bitsandbytes", double_quant=compress)
    offset = float(state.offset) if compress else None
    q = sch.quantize(ours_input(t), scale_offset=offset)
    assert q.codes.dtype == np.uint8
    mism = int((q.codes != ref_codes).sum())
    assert mism == 0, f"{mism} code mismatches of {x.size}"
    if x.size % 2:
        assert raw[-1] & 0x0F == sch.pad_code
    if compress:
        dq = q.meta["double_quant"]
        assert (dq.codes == state.absmax.numpy()).all()
        assert same_floats(dq.scales, state.state2.absmax.numpy())
    else:
        assert same_floats(q.scales, state.absmax.numpy())
    ref = F.dequantize_4bit(packed, state).reshape(-1)
    ours = q.dequantize(dt).reshape(-1)
    ref_np = ref.float().numpy() if dt == "bfloat16" else ref.numpy()
    assert same_floats(ours.astype(np.float32) if dt == "bfloat16" else ours, ref_np)
    packing = pytest.importorskip("qref.interop.packing", reason="packing layouts live in qref.interop.packing")
    codes = q.codes if x.size % 2 == 0 else np.append(q.codes, sch.pad_code).astype(np.uint8)
    assert (packing.pack(codes, "nibble_high_first", bits=4) == raw).all()
    if x.size % 2 == 0 and x.ndim == 1:
        assert (packing.pack(q, "nibble_high_first") == raw).all()  # the QArray path finds 4-bit storage


@pytest.mark.parametrize("table", ["nf4", "fp4_bnb"])
@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("kind", ["normal", "ties", "edges"])
def test_quantize_4bit_all_block_sizes(table: str, dt: str, kind: str) -> None:
    for i, block in enumerate(BLOCKS):
        n_blocks = 5 if block <= 256 else 1
        for tail in (0, 7):
            check_4bit(inputs(kind, n_blocks, block, tail, 100 * i + tail, table), table, dt, block)


@pytest.mark.parametrize("n", [1, 2, 3, 63, 65, 127])
def test_quantize_4bit_tiny_and_odd_sizes(n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    for table in ("nf4", "fp4_bnb"):
        check_4bit(x, table, "float32", 64)


def test_quantize_4bit_two_dimensional_input_is_flattened_row_major() -> None:
    x = np.random.default_rng(1).standard_normal((48, 40)).astype(np.float32)
    t = torch.from_numpy(x)
    packed, state = F.quantize_4bit(t, blocksize=64, quant_type="nf4")
    q = qref.scheme("nf4", block_size=64, profile="bitsandbytes").quantize(x)
    assert q.codes.shape == x.shape
    assert (q.codes.reshape(-1) == unpack_high_first(packed, x.size)[0]).all()
    assert same_floats(q.dequantize(), F.dequantize_4bit(packed, state).numpy())


@pytest.mark.parametrize("table", ["nf4", "fp4_bnb"])
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_compress_statistics(table: str, dt: str) -> None:
    for n_blocks, block, tail in ((300, 64, 0), (600, 32, 0), (256, 64, 0), (40, 128, 0), (300, 64, 9)):
        x = inputs("normal", n_blocks, block, tail, n_blocks, table)
        x[:block] = 0
        if tail:
            x[-tail:] = 0  # a zero partial block: its stored absmax 1e-38 is what gets double-quantized
        check_4bit(x, table, dt, block, compress=True)


def test_exact_mean_is_usually_bitsandbytes_mean() -> None:
    """qref's default offset is the exact mean rounded once; torch's float32 mean differs by an ulp on some
    inputs (which is why quantize takes scale_offset=). Informational: the test only checks both are close."""
    x = np.random.default_rng(7).standard_normal(64 * 1000).astype(np.float32)
    _, state = F.quantize_4bit(torch.from_numpy(x), blocksize=64, quant_type="nf4", compress_statistics=True)
    q = qref.scheme("nf4", profile="bitsandbytes", double_quant=True).quantize(x)
    ours, ref = np.float32(q.meta["double_quant"].offset), np.float32(state.offset)
    assert abs(int(ours.view(np.int32)) - int(ref.view(np.int32))) <= 2


@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("block", [64, 256, 4096])
def test_quantize_blockwise_dynamic8(dt: str, block: int) -> None:
    rng = np.random.default_rng(block)
    x = (rng.standard_normal(3 * block + 11) * 10).astype(np.float32)
    x[:block] = 0  # zero block: code 0
    dyn = qref.scheme("dynamic8", profile="bitsandbytes").table.values
    grid = np.float32(-1) + (np.float32(2) * np.arange(65536, dtype=np.float32)) / np.float32(65535)
    near = np.concatenate([dyn, (dyn[:-1] + dyn[1:]) * np.float32(0.5), grid[::37]]).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, 2), np.nextafter(near, -2)]).astype(np.float32)
    sel = near[np.abs(near) <= 1][: block - 1]
    x[block:block + sel.size + 1] = np.concatenate([[1.0], sel])  # absmax 1: grid boundaries hit directly
    t = to_torch(x, dt)
    qb, st = F.quantize_blockwise(t, blocksize=block)
    q = qref.scheme("dynamic8", block_size=block, profile="bitsandbytes").quantize(ours_input(t))
    assert not q.unspecified.any()
    assert int((q.codes != qb.numpy()).sum()) == 0
    assert same_floats(q.scales, st.absmax.numpy())
    ref = F.dequantize_blockwise(qb, st)
    ours = q.dequantize(dt)
    assert same_floats(ours.astype(np.float32) if dt == "bfloat16" else ours,
                       ref.float().numpy() if dt == "bfloat16" else ref.numpy())


def test_grid_quantizer_is_not_exact_nearest() -> None:
    """bitsandbytes' CPU 8-bit quantizer (grid65536) and exact nearest disagree on some inputs (lut.md §3.3)."""
    x = np.random.default_rng(3).uniform(-1, 1, 4096).astype(np.float32)
    x[0] = 1.0
    qb, _ = F.quantize_blockwise(torch.from_numpy(x), blocksize=4096)
    grid = qref.scheme("dynamic8", block_size=4096, profile="bitsandbytes").quantize(x)
    exact = qref.scheme("dynamic8", block_size=4096, profile="spec").quantize(x)
    assert (grid.codes == qb.numpy()).all()
    diff = np.abs(exact.codes.astype(int) - qb.numpy().astype(int))
    assert diff.max() == 1 and diff.sum() > 0


def _avx512_bf16() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


@pytest.mark.parametrize(("n", "block"), [(4096, 64), (4095, 64), (4096, 2048)])
def test_bfloat16_dequantize_subnormal_results(n: int, block: int) -> None:
    """bfloat16 outputs below 2^-126 (lut.md §6.2): the AVX512-BF16 kernel (even length, block < 2048) converts a
    float32 product below 2^-126 to zero, including products that would round up to 2^-126; the fallback paths
    (odd length; block >= 2048) and dequantize_blockwise keep bfloat16 subnormals."""
    if not _avx512_bf16():
        pytest.skip("the bfloat16 conversion path of bitsandbytes' CPU kernel depends on AVX512-BF16")
    rng = np.random.default_rng(12)
    x = (rng.uniform(-1, 1, n) * 2.0**-125).astype(np.float32)
    t = to_torch(x, "bfloat16")
    t[:2] = torch.tensor([0x00B1, 0x0080], dtype=torch.int16).view(torch.bfloat16)  # a product just below 2^-126
    for quant in ("nf4", "fp4"):
        packed, state = F.quantize_4bit(t, blocksize=block, quant_type=quant)
        sch = qref.scheme(quant if quant == "nf4" else "fp4_bnb", block_size=block, profile="bitsandbytes")
        q = sch.quantize(ours_input(t))
        ref = F.dequantize_4bit(packed, state).reshape(-1).view(torch.int16).numpy().view(np.uint16)
        assert (q.dequantize("bfloat16").view(np.uint16) == ref).all(), quant
    qb, st = F.quantize_blockwise(t, blocksize=256)
    sch = qref.scheme("dynamic8", block_size=256, profile="bitsandbytes")
    q = sch.quantize(ours_input(t))
    ref = F.dequantize_blockwise(qb, st).reshape(-1).view(torch.int16).numpy().view(np.uint16)
    assert (q.dequantize("bfloat16").view(np.uint16) == ref).all()
