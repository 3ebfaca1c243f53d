"""bitsandbytes LLM.int8 and 4-bit weight-only products on CPU against qref (docs/spec/matmul.md §13, §14).

Expected values are computed here independently: exact integer sums (int64 / Python ints) and the float32 steps
of the bitsandbytes source written out in numpy, plus exact rationals (fractions) for the 4-bit bound check.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from qref.recipes.vectorwise import vectorwise_int8_matmul, weight_only_matmul

torch = pytest.importorskip("torch", reason="bitsandbytes runs on torch")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    F = pytest.importorskip("bitsandbytes.functional", reason="the bitsandbytes_int8 profile is checked against it")
    import bitsandbytes as bnb


def _f16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) * rng.uniform(0.01, 5, (shape[0], 1))).astype(np.float16)


def _independent(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """The stages of matmul.md §13 written from the bitsandbytes 0.50.2 source (not from qref)."""
    def quant(x):
        s = np.abs(x.astype(np.float32)).max(axis=1)
        m = (np.float32(1.0) / s) * np.float32(127.0)  # torch: 127.0 / t == t.reciprocal() * 127.0
        return np.rint(x.astype(np.float32) * m[:, None]).astype(np.int8), s

    qa, sa = quant(a)
    qb, sb = quant(b)
    acc = qa.astype(np.int64) @ qb.astype(np.int64).T
    acc32 = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    y = (acc32.astype(np.float32) * (sa[:, None] * sb[None, :])) * np.float32(6.200124e-05)
    with np.errstate(over="ignore"):
        return qa, sa, qb, sb, acc32, y.astype(np.float16)


def _bnb(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ca, sa, _ = F.int8_vectorwise_quant(torch.from_numpy(a))
        cb, sb, _ = F.int8_vectorwise_quant(torch.from_numpy(b))
        acc = F.int8_linear_matmul(ca, cb)
        y = F.int8_mm_dequant(acc, sa, sb)
        st = bnb.MatmulLtState()
        st.is_training = False
        y2 = bnb.matmul(torch.from_numpy(a), torch.from_numpy(b), state=st)
    return ca.numpy(), sa.numpy(), cb.numpy(), sb.numpy(), acc.numpy(), y.numpy(), y2.numpy()


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and np.array_equal(x.view(f"u{x.dtype.itemsize}"), y.view(f"u{y.dtype.itemsize}"))


def test_llm_int8_bit_for_bit_million_outputs():
    rng = np.random.default_rng(28)
    a, b = _f16(rng, (1024, 256)), _f16(rng, (1024, 256))  # 1,048,576 outputs
    got = _bnb(a, b)
    ind = _independent(a, b)
    r = vectorwise_int8_matmul(a, b, "bitsandbytes_int8")
    ours = (r.a_codes, r.a_stats, r.b_codes, r.b_stats, r.acc, r.y)
    for g, i, o in zip(got[:6], ind, ours, strict=True):
        assert _same(g, i)
        assert _same(o, i)
    assert _same(got[6], ind[5])  # bnb.matmul (MatMul8bitLt) is the same pipeline
    assert got[5].size >= 10**6


def test_the_quant_multiplier_is_reciprocal_times_127():
    """fl32(fl32(1 / s) * 127) differs from fl32(127 / s) for some float16 s; the codes follow the former."""
    s = np.arange(15360, 23552, dtype=np.uint16).view(np.float16).astype(np.float32)  # [1, 256)
    one = np.float32(127) / s
    two = (np.float32(1) / s) * np.float32(127)
    k = np.flatnonzero(one != two)
    assert k.size
    # x = s * 63.5 / 127 rounded to float16: pick rows where the two multipliers round x m to different codes
    rows = []
    for i in k:
        x = np.float16(s[i] / 2)
        if np.rint(np.float32(x) * one[i]) != np.rint(np.float32(x) * two[i]):
            rows.append((s[i], x))
    assert rows, "no float16 row separates the two multipliers"
    a = np.array([[sv, x] for sv, x in rows[:64]], np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q, _, _ = F.int8_vectorwise_quant(torch.from_numpy(a))
    m2 = (np.float32(1) / a[:, 0].astype(np.float32)) * np.float32(127)
    assert np.array_equal(q.numpy()[:, 1], np.rint(a[:, 1].astype(np.float32) * m2).astype(np.int8))


def test_dequant_constant_is_not_one_over_127_squared():
    """int8_mm_dequant multiplies by fl32(6.200124e-05), 1.8e-5 relative above 1 / 16129 (matmul.md §13.3)."""
    acc = torch.tensor([[16129]], dtype=torch.int32)
    one = torch.ones(1, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = torch.ops.bitsandbytes.int8_mm_dequant.default(acc, one, one, dtype=torch.float32)
    c = Fraction(float(np.float32(6.200124e-05)))
    assert Fraction(float(y.item())) == Fraction(float(np.float32(Fraction(16129) * c)))
    assert abs(c * 16129 - 1) > Fraction(17, 10**6)


def test_int32_accumulator_wraps():
    K = 133200  # 127^2 K > 2^31 - 1
    a = np.ones((1, K), np.float16)
    b = np.ones((1, K), np.float16)
    got = _bnb(a, b)
    assert int(got[4][0, 0]) == 127 * 127 * K - 2**32
    assert int(vectorwise_int8_matmul(a, b).acc[0, 0]) == 127 * 127 * K - 2**32


def _pack(codes: np.ndarray) -> object:
    c = codes.reshape(-1).astype(np.uint8)
    return torch.from_numpy((c[0::2] << 4) | c[1::2]).reshape(-1, 1)


@pytest.mark.parametrize("qt,table", [("nf4", "nf4"), ("fp4", "fp4_bnb")])
def test_matmul_4bit_within_the_bound(qt, table):
    rng = np.random.default_rng(9)
    M, K, N, B = 64, 1024, 256, 64  # 16,384 outputs per type (a bound check: the bits are held elsewhere)
    x = rng.standard_normal((M, K)).astype(np.float32)
    codes = rng.integers(0, 16, (N, K)).astype(np.uint8)
    absmax = rng.uniform(0.01, 4, N * K // B).astype(np.float32)
    st = F.QuantState(absmax=torch.from_numpy(absmax), shape=torch.Size([N, K]), blocksize=B, quant_type=qt,
                      dtype=torch.float32, code=F.get_4bit_type(qt, device="cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = bnb.matmul_4bit(torch.from_numpy(x), _pack(codes).t(), st).numpy()
        w = F.dequantize_4bit(_pack(codes), st).numpy()
    r = weight_only_matmul(x, codes, absmax, table=table, block_size=B)
    assert r.within(y).all()
    # the weights: qref's dequantization equals bitsandbytes' exactly
    vals = np.asarray(F.get_4bit_type(qt, device="cpu").numpy(), np.float32)
    assert np.array_equal(w, (vals[codes] * absmax[np.arange(N * K).reshape(N, K) // B]).astype(np.float32))
    # an exact spot check of the bound: |y - S| <= bound with S in rationals
    i, j = 3, 17
    S = sum(Fraction(float(x[i, k])) * Fraction(float(w[j, k])) for k in range(K))
    assert abs(Fraction(float(y[i, j])) - S) <= Fraction(float(r.bound[i, j]))
    # the bound is not vacuous: an all-zero output fails, and so does y perturbed by 2^-8 relative
    assert not r.within(np.zeros_like(y)).all()
    assert not r.within(y * np.float32(1 + 2.0**-8)).all()


def test_cpu_packed_gemv_rounds_to_bfloat16():
    """The CPU-packed gemv_4bit kernel (AVX512-BF16) rounds x and absmax to bfloat16: outside the float32 bound."""
    if not F.has_avx512bf16():
        pytest.skip("the CPU-packed kernel needs AVX512-BF16")
    rng = np.random.default_rng(3)
    K, N, B = 512, 64, 64
    x = rng.standard_normal((1, K)).astype(np.float32)
    codes = rng.integers(0, 16, (N, K)).astype(np.uint8)
    absmax = rng.uniform(0.5, 2, N * K // B).astype(np.float32)
    st = F.QuantState(absmax=torch.from_numpy(absmax), shape=torch.Size([N, K]), blocksize=B, quant_type="nf4",
                      dtype=torch.float32, code=F.get_4bit_type("nf4", device="cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw, st = F._convert_weight_packed_for_cpu(_pack(codes), st)
        y = F.gemv_4bit(torch.from_numpy(x), pw, state=st).float().numpy()
    r = weight_only_matmul(x, codes, absmax, table="nf4", block_size=B)
    assert not r.within(y).all()
    assert np.array_equal(y.view(np.uint32) & 0xFFFF, np.zeros_like(y.view(np.uint32)))  # bfloat16 values


# ---- torchao 0.18 (CPU) ---------------------------------------------------------------------------------------
def _tq():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("torchao.quantization", reason="the torchao_int8_dynamic profile is checked "
                                   "against it")


def _torchao_independent(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """torchao's symmetric PerRow int8 pipeline written from its source (quant_primitives.py, int8_tensor.py)."""
    def quant(x):
        s = np.maximum(np.abs(x).max(axis=1) / np.float32(127.5), np.finfo(np.float32).eps).astype(np.float32)
        inv = (np.float32(1) / s).astype(np.float32)  # 1.0 / scale is scale.reciprocal()
        return np.clip(np.rint(x * inv[:, None]), -128, 127).astype(np.int8), s

    qa, sa = quant(a)
    qb, sb = quant(b)
    acc = (qa.astype(np.int64) @ qb.astype(np.int64).T).astype(np.int32)  # |acc| < 2^31 here
    y = (acc.astype(np.float32) * sa[:, None]) * sb[None, :]
    return qa, sa, qb, sb, y


def test_torchao_int8_dynamic_bit_for_bit_million_outputs():
    tq = _tq()
    from torchao.quantization.quantize_.common.quantize_tensor_kwargs import (
        _choose_quant_func_and_quantize_tensor,
    )

    rng = np.random.default_rng(5)
    M, K, N = 1024, 256, 1024  # 1,048,576 outputs
    a = (rng.standard_normal((M, K)) * rng.uniform(0.01, 10, (M, 1))).astype(np.float32)
    a[0] = 0  # an all-zero row: scale eps, codes 0
    a[1, :4] = (127.5, -127.5, 0.5, 1.5)
    a[1, 4:] = 0
    b = (rng.standard_normal((N, K)) * 0.05).astype(np.float32)
    lin = torch.nn.Linear(K, N, bias=False)
    lin.weight.data = torch.from_numpy(b.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.quantize_(lin, tq.Int8DynamicActivationInt8WeightConfig())
        xa = _choose_quant_func_and_quantize_tensor(torch.from_numpy(a), lin.weight.act_quant_kwargs)
        with torch.no_grad():
            y = lin(torch.from_numpy(a)).numpy()
    qa, sa, qb, sb, yi = _torchao_independent(a, b)
    assert np.array_equal(xa.qdata.numpy(), qa) and np.array_equal(xa.scale.numpy().reshape(-1), sa)
    assert np.array_equal(lin.weight.qdata.numpy(), qb) and np.array_equal(lin.weight.scale.numpy().reshape(-1), sb)
    assert np.array_equal(y.view(np.uint32), yi.view(np.uint32))
    assert list(qa[1, :4]) == [127, -128, 0, 2]  # 127.5 -> 128 clamped; -127.5 -> -128; ties to even
    r = vectorwise_int8_matmul(a, b, "torchao_int8_dynamic")
    assert np.array_equal(r.y.view(np.uint32), yi.view(np.uint32)) and np.array_equal(r.a_codes, qa)


def test_torchao_int8_weight_only_within_the_bound():
    tq = _tq()
    from qref.recipes.ops import exact_matmul

    rng = np.random.default_rng(6)
    M, K, N = 32, 512, 1024  # 32,768 outputs (a bound check)
    x = rng.standard_normal((M, K)).astype(np.float32)
    c = rng.integers(-128, 128, (N, K)).astype(np.int8)
    s = rng.uniform(1e-3, 1e-2, N).astype(np.float32)
    w = tq.Int8Tensor(torch.from_numpy(c), torch.from_numpy(s.reshape(N, 1)), [1, K], torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = torch.nn.functional.linear(torch.from_numpy(x), w).numpy()
    r = exact_matmul(x, c.astype(np.float32).T, accumulation="float32_any", post_scale=s.reshape(1, -1))
    assert r.within(y).all()
    i, j = 7, 11
    S = sum(Fraction(float(x[i, k])) * int(c[j, k]) for k in range(K)) * Fraction(float(s[j]))
    assert abs(Fraction(float(y[i, j])) - S) <= Fraction(float(r.bound[i, j]))
    assert not r.within(np.zeros_like(y)).all()
    assert not r.within(y * np.float32(1 + 2.0**-8)).all()


def test_torchao_int4_weight_only_needs_mslk():
    tq = _tq()
    try:
        import mslk  # noqa: F401
    except ImportError:
        lin = torch.nn.Linear(256, 64, bias=False)
        with pytest.raises(ImportError, match="mslk"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tq.quantize_(lin, tq.Int4WeightOnlyConfig())
    else:
        pytest.skip("mslk is installed")


def test_int8_linear_matmul_below_avx512_is_a_float32_product():
    """A CPU variant (matmul.md §13.4): with torch's CPU capability below AVX512 bitsandbytes' int8_linear_matmul is
    matmul(A.float(), B.float().t()).to(int32): exact up to 2^24, float32-rounded beyond, -2^31 past int32."""
    import os
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('ignore'); import torch, bitsandbytes.functional as F\n"
            "for K in (1024, 1100, 133200):\n"
            "    a = torch.full((1, K), 127, dtype=torch.int8); b = a.clone(); b[0, 0] = 126\n"
            "    print(int(F.int8_linear_matmul(a, b)[0, 0]))\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"},
                         capture_output=True, text=True, timeout=300).stdout.split()
    got = [int(v) for v in out[-3:]]
    assert got[0] == 1024 * 16129 - 127  # below 2^24: exact
    exact = 1100 * 16129 - 127  # odd and beyond 2^24: no float32 holds it
    assert got[1] != exact and got[1] % 2 == 0 and abs(got[1] - exact) <= 1100 * 2
    assert got[2] == -(2**31)  # beyond int32: the float -> int32 conversion gives INT_MIN, not the wrapped sum
