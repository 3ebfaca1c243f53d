"""qref.transforms held to TransformerEngine's NVFP4 reference RHT (transforms.md §6): tests/peers/
transformer_engine_rht (vectors.npz + manifest.json, written by scripts/peers/transformer_engine_rht.py from TE
commit d0067d0, torch 2.13.0 on CPU).

Compared per tensor (40 tensors of 64 x 128, float32 and bfloat16): the 8192 transformed elements with TE's sign
vector and without signs, and the 8192 NVFP4 codes, 512 scale bytes and the global amax of the columnwise
quantization after the RHT. The kernel orders (fma_sequential_float32, dot_pairs_bfloat16) equal the reference
on every element (a NaN result compared as NaN: the sign of an arithmetic NaN is unspecified); "exact" differs
from it within the summation error bound (test_exact_differs_within_the_kernel_bound states the counts).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.transforms import hadamard, hadamard_matrix

DIR = Path(__file__).parent / "peers" / "transformer_engine_rht"
DT = {"float32": (np.dtype(np.float32), np.uint32), "bfloat16": (np.dtype(ml_dtypes.bfloat16), np.uint16)}
KERNEL = {"float32": "fma_sequential_float32", "bfloat16": "dot_pairs_bfloat16"}
MANIFEST = json.loads((DIR / "manifest.json").read_text())
TENSORS = MANIFEST["tensors"]


@pytest.fixture(scope="module")
def z() -> dict[str, np.ndarray]:
    raw = (DIR / "vectors.npz").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == MANIFEST["sha256"], "vectors.npz does not match its manifest"
    with np.load(DIR / "vectors.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _x(z: dict[str, np.ndarray], tensor: str) -> np.ndarray:
    return z[f"{tensor}__x"].view(DT[tensor.split("__")[0]][0])


def _rht(z: dict[str, np.ndarray], tensor: str, signed: bool, arithmetic: str) -> np.ndarray:
    """qref's transform of x along axis 0 (TE transforms x.T along its last axis), as x.T's bit patterns."""
    signs = z["signs"] if signed else None
    with np.errstate(all="ignore"):
        y = hadamard(_x(z, tensor), 16, axis=0, signs=signs, arithmetic=arithmetic)
    return np.ascontiguousarray(y.T).view(DT[tensor.split("__")[0]][1])


def _same(got: np.ndarray, want: np.ndarray, dt: np.dtype) -> np.ndarray:
    g, w = got.view(dt).astype(np.float32), want.view(dt).astype(np.float32)
    return (got == want) | (np.isnan(g) & np.isnan(w))


def test_vectors_record_the_run(z: dict[str, np.ndarray]) -> None:
    assert MANIFEST["commit"] == "d0067d0da6cb01811b8072a7d304f0e00344ce2b" and MANIFEST["device"] == "cpu"
    assert MANIFEST["torch"].startswith("2.13.0") and len(TENSORS) == 40
    assert "avx512_bf16" in MANIFEST["cpu"]["flags"]  # the bfloat16 kernel's dot-product instruction
    assert all(a.dtype.kind == "u" for k, a in z.items() if "__" in k)


def test_reference_matrix_is_signs_times_sylvester(z: dict[str, np.ndarray]) -> None:
    """TE builds diag(s) @ H_16 (Sylvester) and computes x_mat @ (diag(s) H / 4): y_j = sum_i x_i s_i H_ij / 4,
    i.e. y = H D x / 4 (H symmetric): D first, then H."""
    s = z["signs"].astype(np.int64)
    assert set(s.tolist()) == {-1, 1} and s.shape == (16,)
    assert (z["matrix"] == np.diag(s) @ hadamard_matrix(16)).all()
    assert (z["matrix_nosign"] == hadamard_matrix(16)).all()


@pytest.mark.parametrize("signed", [True, False], ids=["signs", "nosign"])
@pytest.mark.parametrize("tensor", TENSORS)
def test_kernel_order_equals_reference(z: dict[str, np.ndarray], tensor: str, signed: bool) -> None:
    dtype = tensor.split("__")[0]
    want = z[f"{tensor}__rht_t{'' if signed else '_nosign'}"]
    got = _rht(z, tensor, signed, KERNEL[dtype])
    same = _same(got, want, DT[dtype][0])
    assert want.shape == (128, 64) and same.all(), f"{(~same).sum()} of {same.size} differ"


def _ordinal(bits: np.ndarray, width: int) -> np.ndarray:
    b = bits.astype(np.int64)
    mag = b & ((1 << (width - 1)) - 1)
    return np.where(b >> (width - 1) == 1, -mag, mag)


def test_exact_differs_within_the_kernel_bound(z: dict[str, np.ndarray]) -> None:
    """"exact" (one rounding) against the reference's kernel sums: every finite difference is within
    gamma_16 * sum|terms| + one ulp of the larger result + the underflow terms (16 * 2^-149 for float32; 16 *
    2^-125 for bfloat16, whose kernel flushes subnormals); an overflow on one side only happens where
    sum|terms| reaches the dtype's maximum. Measured on the 327,680 elements per dtype (both sign variants):
    float32 147,882 differ (45 %; 99,377 by 1 ulp, 4,291 only in the sign of zero), bfloat16 11,007 (3.4 %;
    5,185 by 1 ulp, 4,203 only in the sign of zero)."""
    counts = {"float32": 0, "bfloat16": 0}
    for tensor in TENSORS:
        dtype = tensor.split("__")[0]
        dt = DT[dtype][0]
        x = _x(z, tensor).astype(np.float64).T.reshape(-1, 16)
        if not np.isfinite(x).all():
            for signed in (True, False):
                want = z[f"{tensor}__rht_t{'' if signed else '_nosign'}"]
                counts[dtype] += int((~_same(_rht(z, tensor, signed, "exact"), want, dt)).sum())
            continue
        p = 24 if dtype == "float32" else 8
        fmax = float(np.finfo(np.float32).max if dtype == "float32" else ml_dtypes.finfo(ml_dtypes.bfloat16).max)
        floor = 16 * 2.0 ** (-149 if dtype == "float32" else -125)
        gamma = 16 * 2.0**-24 / (1 - 16 * 2.0**-24)
        for signed in (True, False):
            want = z[f"{tensor}__rht_t{'' if signed else '_nosign'}"]
            got = _rht(z, tensor, signed, "exact")
            counts[dtype] += int((~_same(got, want, dt)).sum())
            a, b = got.view(dt).astype(np.float64).reshape(-1, 16), want.view(dt).astype(np.float64).reshape(-1, 16)
            terms = np.abs(x).sum(axis=1, keepdims=True) / 4 * (1 + 2.0**-40)
            fin = np.isfinite(a) & np.isfinite(b)
            bound = gamma * terms + 2.0 ** (1 - p) * np.maximum(np.abs(a), np.abs(b)) + floor
            with np.errstate(invalid="ignore"):
                assert (np.abs(a - b)[fin] <= np.broadcast_to(bound, a.shape)[fin]).all(), tensor
            assert (np.broadcast_to(terms, a.shape)[~fin] >= fmax * (1 - 2.0**-7)).all(), tensor
    assert counts["float32"] > 100_000 and counts["bfloat16"] > 5_000, counts  # the kernel orders are needed


@pytest.mark.parametrize("tensor", TENSORS)
def test_nvfp4_after_rht_equals_reference(z: dict[str, np.ndarray], tensor: str) -> None:
    """The columnwise NVFP4 quantization of TE's with_rht=True quantizer is the transformer_engine_reference
    NVFP4 profile (block.md §8) of qref's kernel-order RHT of x.T: every code, every scale byte that is not a NaN
    of unspecified sign, and the global amax (of the transformed tensor); the rowwise amax is the amax of x."""
    dtype = tensor.split("__")[0]
    dt = DT[dtype][0]
    y = _rht(z, tensor, True, KERNEL[dtype]).view(dt)
    sch = qref.scheme("nvfp4", profile="transformer_engine_reference")
    with np.errstate(all="ignore"):
        q = sch.quantize(y)
    unspec = q.meta["scales_unspecified"]
    assert (q.codes == z[f"{tensor}__nvfp4_codes_t"]).all()
    assert (q.scales[~unspec] == z[f"{tensor}__nvfp4_scales_t"][~unspec]).all()
    assert unspec.any() == ("nan" in tensor)
    g = np.asarray(q.global_scale, np.float32).reshape(1)
    want_g = z[f"{tensor}__nvfp4_global_amax_col"].view(np.float32)
    assert (g.view(np.uint32) == want_g.view(np.uint32)).all() or (np.isnan(g) & np.isnan(want_g)).all()
    x = _x(z, tensor).astype(np.float32)
    with np.errstate(invalid="ignore"):
        amax_row = np.float32(np.abs(x).max())
    row: Any = z[f"{tensor}__nvfp4_global_amax_row"].view(np.float32)[0]
    assert row == amax_row or (np.isnan(row) and np.isnan(amax_row))
    if "nan" not in tensor and "inf" not in tensor:
        assert want_g[0] != row or tensor.split("__")[1] == "zeros"  # the RHT changes the amax
