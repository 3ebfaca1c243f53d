"""uniform.md §2.5: blocked schemes quantize and dequantize with their blocks as axes of their own (scales and
zero points one per block instead of broadcast to the tensor) and dequantize takes code - z in a narrow integer
dtype; both must give exactly what the defining path (``_reference=True``: ``expand``'s full-size scales, int64
differences) gives: codes and unspecified masks equal, values equal as bit patterns, for every profile."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.schemes.base import QArray

PROFILES = sorted(qref.profiles("uniform"))
#: the profiles that model quantize (dequantize-only systems accept no input dtype: uniform.md §2.2)
QUANTIZING = [p for p in PROFILES if qref.profiles("uniform")[p].rules.input_dtypes != ()]
STORAGES = ["int8", "uint4", "int4", "int16", "uint8", "int8<-127:127>"]


def _bits(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    return v.view(f"u{v.dtype.itemsize}")


def _scheme(storage: str, profile: str, shape: tuple[int, ...], blocks: dict[int, int], seed: int) -> Any:
    rng = np.random.default_rng(seed)
    sshape = tuple(-(-d // blocks.get(i, d)) for i, d in enumerate(shape))
    lo, hi = qref.get_format(storage).full_range
    scales = np.exp2(rng.uniform(-20, 6, sshape)) * rng.choice([1.0, 1.1, 0.3, 7.0], sshape)
    zps = rng.integers(lo, hi, sshape, endpoint=True)
    zps.reshape(-1)[: min(zps.size, 4)] = 0
    try:
        return qref.scheme(storage, scale=scales, zero_point=zps, block_size=blocks, profile=profile)
    except qref.QrefError:
        return qref.scheme(storage, scale=scales, zero_point=np.zeros(sshape, np.int64), block_size=blocks,
                           profile=profile)


def _inputs(dt: Any, shape: tuple[int, ...], s: Any, seed: int) -> list[np.ndarray]:
    """Integers and ties of x / s (and 1 ulp above), random bit patterns (NaN, Inf, subnormals), normals."""
    rng = np.random.default_rng(seed)
    S, _ = s.expand(shape)
    grid = rng.integers(-600, 600, shape) / 2.0
    with np.errstate(over="ignore"):  # float16 / bfloat16: large scales overflow to Inf (inputs as well)
        x = (grid * S).astype(dt)
        normals = (rng.standard_normal(shape) * 300 * S).astype(dt)
    out = [x]
    if dt in (np.float32, np.float64, np.float16):
        out.append(np.nextafter(x, np.asarray(np.inf, dt)))
    if np.dtype(dt).itemsize == 2:
        out.append(rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16).view(dt))
    else:
        w = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            out.append(w.astype(dt))
    out.append(normals)
    return out


CASES = [((8, 64), {0: 1, 1: 32}), ((6, 4, 24), {1: 2, 2: 8}), ((64, 12), {0: 16}), ((5, 7), {1: 7}),
         ((8, 50), {0: 1, 1: 32})]  # the last: a partial block (the expand path on both sides)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("storage", STORAGES)
def test_blocked_quantize_and_dequantize_equal_the_reference(profile: str, storage: str) -> None:
    n = 0
    for k, (shape, blocks) in enumerate(CASES):
        try:
            s = _scheme(storage, profile, shape, blocks, k)
        except qref.QrefError as e:
            pytest.skip(f"{profile} has no blocked {storage}: {e}")
        assert (s.split_blocks(shape) is None) == (k == len(CASES) - 1)
        A = s.arithmetic
        for dt in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
            if A.input_dtypes is not None and np.dtype(dt).name not in A.input_dtypes:
                continue
            for x in _inputs(dt, shape, s, 10 + k):
                with np.errstate(all="ignore"):
                    try:
                        want = s.quantize(x, _reference=True)
                    except qref.QrefError:
                        continue
                    got = s.quantize(x)
                assert got.codes.dtype == want.codes.dtype and got.codes.shape == want.codes.shape
                assert np.array_equal(got.unspecified, want.unspecified), (profile, dt, shape)
                assert np.array_equal(got.codes, want.codes), (profile, dt, shape)
                n += x.size
        # dequantize every code of the storage range (codes beyond it are refused, schemes.md §1.1 C1), with masks
        rng = np.random.default_rng(k)
        cdt = s.codes_dtype
        lo, hi = s.code_bounds()
        codes = rng.integers(lo, hi, shape, endpoint=True).astype(cdt)
        codes.reshape(-1)[:2] = [lo, hi]
        for unspec in (None, rng.random(shape) < 0.1):
            qa = qref.QArray(codes=codes, scheme=s, unspecified=unspec)
            for out in (None, np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
                with np.errstate(all="ignore"):
                    v_ref, m_ref = s.dequantize_with_mask(qa, out, _reference=True)
                    v, m = s.dequantize_with_mask(qa, out)
                assert v.dtype == v_ref.dtype and v.shape == v_ref.shape
                assert np.array_equal(m, m_ref), (profile, storage, shape, out)
                assert np.array_equal(_bits(v), _bits(v_ref)), (profile, storage, shape, out)
                n += v.size
    assert n > 0


@pytest.mark.parametrize("profile", ["stablehlo", "onnx", "tflite", "pytorch_per_channel", "mlir", "qwix"])
def test_per_tensor_and_per_axis_dequantize_equal_the_reference(profile: str) -> None:
    """The narrow code - z is not limited to blocks: per tensor and per axis, int8 and int16 codes."""
    rng = np.random.default_rng(4)
    for storage in ("int8", "uint8", "int16", "uint4"):
        lo, hi = qref.get_format(storage).full_range
        for opts in ({"scale": 0.37, "zero_point": hi}, {"scale": np.exp2(rng.uniform(-30, 30, 16)),
                                                          "zero_point": rng.integers(lo, hi, 16), "axis": 0}):
            try:
                s = qref.scheme(storage, profile=profile, **opts)
            except qref.QrefError:
                continue
            lo_c, hi_c = s.code_bounds()  # the storage range (schemes.md §1.1 C1)
            codes = rng.integers(lo_c, hi_c, (16, 33), endpoint=True).astype(s.codes_dtype)
            qa = qref.QArray(codes=codes, scheme=s)
            for out in (None, np.float64, np.float16):
                with np.errstate(all="ignore"):
                    v_ref, m_ref = s.dequantize_with_mask(qa, out, _reference=True)
                    v, m = s.dequantize_with_mask(qa, out)
                assert np.array_equal(m, m_ref) and np.array_equal(_bits(v), _bits(v_ref)), (profile, storage)


def test_split_blocks_shapes() -> None:
    s = qref.scheme("int4", scale=np.ones((4, 3)), block_size={0: 2, 1: 4})
    shp, S, Z = s.split_blocks((8, 12))
    assert shp == (4, 2, 3, 4) and S.shape == (4, 1, 3, 1) and Z.shape == (4, 1, 3, 1)
    assert s.split_blocks((8, 11)) is None  # partial block
    assert qref.scheme("int8", scale=0.5).split_blocks((4, 4)) is None  # per tensor


@pytest.mark.parametrize("profile", QUANTIZING)
def test_quantize_in_slices_equals_the_reference(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """quantize's fast path takes slices of CHUNK elements along the first axis (per tensor, per axis on the
    first or another axis, blocked); with a small CHUNK every input below is cut into several slices, some of
    them partial, and the codes and masks equal the defining path's on the whole."""
    import qref.schemes.uniform.entry as E

    monkeypatch.setattr(E, "CHUNK", 100)
    rng = np.random.default_rng(12)
    shape = (37, 24)
    cases: list[dict[str, Any]] = [
        {"scale": 0.07, "zero_point": 3},
        {"scale": np.exp2(rng.uniform(-8, 2, 37)), "zero_point": rng.integers(-20, 20, 37), "axis": 0},
        {"scale": np.exp2(rng.uniform(-8, 2, 24)), "zero_point": rng.integers(-20, 20, 24), "axis": 1},
        {"scale": np.exp2(rng.uniform(-8, 2, (37, 3))), "zero_point": rng.integers(-20, 20, (37, 3)),
         "block_size": {0: 1, 1: 8}},
        {"scale": np.exp2(rng.uniform(-8, 2, (37, 3))), "zero_point": rng.integers(-20, 20, (37, 3)),
         "block_size": {0: 1, 1: 9}},  # a partial block: expand's full-size scales, sliced alike
    ]
    n = 0
    for opts in cases:
        for storage in ("int8", "uint8", "int4"):
            o = dict(opts)
            lo, hi = qref.get_format(storage).full_range
            o["zero_point"] = np.clip(o["zero_point"], lo, hi)
            try:
                s = qref.scheme(storage, profile=profile, **o)
            except qref.QrefError:
                try:
                    s = qref.scheme(storage, profile=profile, **{**o, "zero_point": np.zeros_like(o["zero_point"])})
                except qref.QrefError:
                    continue
            for dt in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
                if s.arithmetic.input_dtypes is not None and np.dtype(dt).name not in s.arithmetic.input_dtypes:
                    continue
                for x in _inputs(dt, shape, s, 3):
                    with np.errstate(all="ignore"):
                        try:
                            want = s.quantize(x, _reference=True)
                        except qref.QrefError:
                            continue
                        got = s.quantize(x)
                    assert np.array_equal(got.unspecified, want.unspecified), (profile, storage, opts.keys())
                    assert np.array_equal(got.codes, want.codes), (profile, storage, dt, opts.keys())
                    n += x.size
            # dequantize in slices: every code of the storage range (schemes.md §1.1 C1), with a mask
            lo_c, hi_c = s.code_bounds()
            codes = rng.integers(lo_c, hi_c, shape, endpoint=True).astype(s.codes_dtype)
            qa = qref.QArray(codes=codes, scheme=s, unspecified=rng.random(shape) < 0.1)
            for out in (None, np.float64, ml_dtypes.bfloat16):
                with np.errstate(all="ignore"):
                    v_ref, m_ref = s.dequantize_with_mask(qa, out, _reference=True)
                    v, m = s.dequantize_with_mask(qa, out)
                assert v.dtype == v_ref.dtype and np.array_equal(m, m_ref), (profile, storage, opts.keys())
                assert np.array_equal(_bits(v), _bits(v_ref)), (profile, storage, out, opts.keys())
    assert n > 0


@pytest.mark.parametrize("profile", ["stablehlo", "onnx", "mlir"])
@pytest.mark.parametrize("storage", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_float_storage_dequantize_equals_the_reference(profile: str, storage: str) -> None:
    """Every code of a float storage type (NaN codes included) dequantizes as the reference does, masks too (the
    harness reads these under the stablehlo profile, whose integer-difference check must not read NaN codes)."""
    s = qref.scheme(storage, scale=0.5, profile=profile)
    fmt = qref.get_format(storage)
    codes = np.arange(1 << fmt.bits, dtype=np.uint8)
    q = QArray(codes=codes, scheme=s)
    for dt in (np.float32, np.float16):
        v, m = s.dequantize_with_mask(q, dtype=dt)
        rv, rm = s.dequantize_with_mask(q, dtype=dt, _reference=True)
        assert np.array_equal(v.view(f"u{v.itemsize}"), rv.view(f"u{rv.itemsize}")) and np.array_equal(m, rm)
