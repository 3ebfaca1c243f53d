"""PyTorch CPU quantized matrix products (matmul.md §6.7) against independent arithmetic: torch._int_mm against
numpy int64 sums taken modulo 2^32, torch.ops.quantized.linear under every engine against a float32 transcription
of each engine's requantization written here (and against qref's profile of the engine), and torch._scaled_mm
against the exact product of its dequantized operands. >= 10^6 outputs per pipeline, edge-heavy operands (storage
ends, power-of-two multipliers: every tie, odd output zero points)."""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from qref.recipes import qmatmul as qm

torch = pytest.importorskip("torch")
from qref.harness.adapters.torch import ENGINES, int_mm, qdq_scaled_mm, qlinear  # noqa: E402
from qref.profiles.cpu import host_cpu  # noqa: E402

#: CPU variant onednn_int8_amx_kernels (qref.profiles.cpu): oneDNN's AMX int8 kernels, not modelled
AMX_ONEDNN = host_cpu().has("amx_int8") and "ONEDNN_MAX_CPU_ISA" not in os.environ
#: CPU variant torch_scaled_mm_onednn_fp8: with AVX512-FP16 torch._scaled_mm on CPU is oneDNN's float8 matmul
ONEDNN_FP8 = host_cpu().has("avx512_fp16") and torch.backends.cpu.get_cpu_capability() == "AVX512" and \
    "ONEDNN_MAX_CPU_ISA" not in os.environ

torch.set_num_threads(1)
VNNI = "avx512_vnni" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + 2**31) % 2**32) - 2**31


def edgy(rng: np.random.Generator, shape: tuple[int, int], lo: int, hi: int, dtype: type) -> np.ndarray:
    """Half the values at the storage ends, the rest uniform."""
    v = rng.integers(lo, hi + 1, shape)
    ends = rng.random(shape) < 0.5
    v = np.where(ends, np.where(rng.random(shape) < 0.5, lo, hi), v)
    return v.astype(dtype)


# ---- torch._int_mm ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("za, zb", [(0, 0), (-128, 127), (77, "per_column")])
def test_int_mm_million_outputs(za, zb):
    rng = np.random.default_rng(1)
    a = edgy(rng, (1024, 96), -128, 127, np.int8)
    b = edgy(rng, (96, 1024), -128, 127, np.int8)
    zbv = rng.integers(-128, 128, 1024).astype(np.int8) if zb == "per_column" else np.int8(zb)
    got = int_mm(torch, a, b, np.int8(za), zbv)
    exp = wrap32((a.astype(np.int64) - za) @ (b.astype(np.int64) - zbv.astype(np.int64)))
    assert got.dtype == np.int32 and got.size >= 10**6
    np.testing.assert_array_equal(got.astype(np.int64), exp)


def test_int_mm_wraps_and_shapes():
    """The int32 accumulator wraps modulo 2^32 (K = 131,073 products of 2^14 and -16,256); no shape constraint on
    CPU (K = 1, odd K, M = 1, N = 1)."""
    K = 131073
    a = np.full((2, K), -128, np.int8)
    a[1] = 127
    b = np.full((K, 1), -128, np.int8)
    got = torch._int_mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert [int(v) for v in got[:, 0]] == [((K * s + 2**31) % 2**32) - 2**31 for s in (16384, -16256)]
    rng = np.random.default_rng(2)
    for m, k, n in ((16, 1, 16), (9, 7, 5), (1, 65, 33), (33, 65, 1)):
        x, y = edgy(rng, (m, k), -128, 127, np.int8), edgy(rng, (k, n), -128, 127, np.int8)
        got = torch._int_mm(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        np.testing.assert_array_equal(got, x.astype(np.int64) @ y.astype(np.int64))


# ---- torch.ops.quantized.linear ------------------------------------------------------------------------------
def expected_linear(engine: str, a, za, a_s, b, zb, b_s, y_s, zy):
    """The engine's requantization transcribed: int32 accumulator (exact here), m = fl32(fl32(a_s * w_s) / y_s)
    (qnnpack: fl32(fl32(a_s * w_s) * fl32(1 / y_s)); onednn: three float32 products with the scales' reciprocal
    round trip),
    v = fl32(fl32(acc) * m); fbgemm / x86 / qnnpack: rint(v) + zy; onednn: rint(fl32(v + zy)); clamp to uint8."""
    acc = wrap32((a.astype(np.int64) - za) @ (b.astype(np.int64) - np.asarray(zb, np.int64)))
    return expected_linear_acc(engine, acc, a_s, b_s, y_s, zy)


def expected_linear_acc(engine: str, acc, a_s, b_s, y_s, zy, combined: bool = False):
    """expected_linear from the int32 accumulator; ``combined``: oneDNN's non-VNNI kernels apply fl32(a_s' w_s')
    as one product."""
    f32 = np.float32
    ab = (f32(a_s) * np.asarray(b_s, f32)).astype(f32)
    # qnnpack: generate_requantization_scales multiplies by fl32(1 / y_s)
    m = (ab * (f32(1) / f32(y_s))).astype(f32) if engine == "qnnpack" else ab / f32(y_s)
    v = (acc.astype(f32) * m.astype(f32)).astype(f32)
    if engine == "onednn":  # scales held as fl32(1.0 / s), inverted back; acc * a_s, * w_s, * fl32(1 / y_s)
        back = [(f32(1) / (1.0 / np.asarray(x, np.float64)).astype(f32)).astype(f32) for x in (a_s, b_s)]
        if combined:
            v = (acc.astype(f32) * (back[0] * back[1]).astype(f32)).astype(f32)
        else:
            v = (acc.astype(f32) * back[0]).astype(f32)
            v = (v * back[1]).astype(f32)
        v = (v * f32(1.0 / np.float64(y_s))).astype(f32)
    before = np.rint((v + f32(zy)).astype(f32)).astype(np.int64)  # onednn: zy added in float32, then rounded
    n = before if engine == "onednn" else np.rint(v).astype(np.int64) + zy
    return np.clip(n, 0, 255)


def _linear_inputs(seed: int, engine: str, per_channel: bool, m_exp: int, M=1024, K=33, N=1024):
    rng = np.random.default_rng(seed)
    a = edgy(rng, (M, K), 0, 255, np.uint8)
    b = edgy(rng, (K, N), -128, 127, np.int8)
    za = int(rng.integers(0, 256))
    zb = (np.zeros(N, np.int64) if engine == "onednn" else rng.integers(-128, 128, N)) if per_channel else \
        np.int64(0 if engine == "onednn" else 3)
    # a_s * w_s / y_s a power of two (every .5 a tie) or a non-dyadic ratio; y scale keeps outputs in range
    if m_exp is None:
        b_s = (rng.uniform(1, 2, N) * 2.0**-9).astype(np.float32) if per_channel else np.float32(0.0123)
        a_s, y_s = np.float32(0.0371), np.float32(0.611)
    else:
        b_s = np.full(N, 2.0**-4, np.float32) if per_channel else np.float32(2.0**-4)
        a_s, y_s = np.float32(2.0**-8), np.float32(2.0 ** (m_exp - 12))  # m = 2^-m_exp
        a = (za + rng.integers(-3, 4, (M, K))).clip(0, 255).astype(np.uint8)
        b = (np.asarray(zb).reshape(1, -1) + rng.integers(-3, 4, (K, N))).clip(-128, 127).astype(np.int8)
    zy = int(rng.integers(0, 128)) * 2 + 1  # odd: adding it before or after the rounding differs on ties
    return {"a": a, "a_scale": a_s, "a_zero_point": np.uint8(za), "b": b, "b_scale": b_s,
            "b_zero_point": np.asarray(zb).astype(np.int8), "y_scale": y_s, "y_zero_point": np.uint8(zy)}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("m_exp", [None, 1, 2])
def test_quantized_linear_engines(engine, per_channel, m_exp):
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"torch built without {engine}")
    ins = _linear_inputs(7, engine, per_channel, m_exp)
    got = qlinear(torch, engine, ins)
    i = ins
    exp = expected_linear(engine, i["a"], int(i["a_zero_point"]), i["a_scale"], i["b"],
                          i["b_zero_point"].astype(np.int64), i["b_scale"], i["y_scale"], int(i["y_zero_point"]))
    assert got.size >= 10**6
    np.testing.assert_array_equal(got.astype(np.int64), exp)
    # qref's profile of the engine gives the same codes
    r = qm.quantized_matmul(i["a"], i["b"], a_scale=i["a_scale"], a_zero_point=i["a_zero_point"],
                            b_scale=i["b_scale"], b_zero_point=i["b_zero_point"], y_scale=i["y_scale"],
                            y_zero_point=i["y_zero_point"],
                            pipeline=qm.QuantizedMatmul(qm.IntOperand("uint8"), qm.IntOperand("int8"), "uint8",
                                                        qm.matmul_rules(f"torch_{engine}")))
    np.testing.assert_array_equal(r.values, exp)
    if m_exp is not None:  # ties present: the zero-point stage is visible
        other = expected_linear("fbgemm" if engine == "onednn" else "onednn", i["a"], int(i["a_zero_point"]),
                                i["a_scale"], i["b"], i["b_zero_point"].astype(np.int64), i["b_scale"],
                                i["y_scale"], int(i["y_zero_point"]))
        assert (other != exp).sum() > 1000


def test_onednn_needs_symmetric_weights():
    ins = _linear_inputs(3, "fbgemm", False, None, M=4, N=4)
    with pytest.raises(RuntimeError, match="symmetric"):
        qlinear(torch, "onednn", ins)


@pytest.mark.parametrize("engine", ("fbgemm", "x86"))
def test_fbgemm_u8s8_pairs_not_saturated_on_vnni(engine):
    """u8 255 x s8 -128 pairs (-65,280: beyond int16): AVX2 vpmaddubsw would saturate each pair sum to -32,768
    (matmul.md §3.2); with AVX-512 VNNI (vpdpbusd) fbgemm sums them exactly."""
    if not VNNI:
        pytest.skip("the CPU has no AVX-512 VNNI: fbgemm's AVX2 kernels saturate pairs (onnxruntime_avx2's rule)")
    K, N = 64, 4
    a = np.full((4, K), 255, np.uint8)
    b = np.full((K, N), -128, np.int8)
    ins = {"a": a, "a_scale": np.float32(1.0), "a_zero_point": np.uint8(0), "b": b, "b_scale": np.float32(2.0**-16),
           "b_zero_point": np.int8(0), "y_scale": np.float32(1.0), "y_zero_point": np.uint8(255)}
    got = qlinear(torch, engine, ins)
    # exact: 64 * -32,640 * 2^-16 = -31.875 -> -32 + 255 = 223; saturated pairs: 32 * -32,768 * 2^-16 -> 239
    assert (got == 223).all()


# ---- torch._scaled_mm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fa", ["float8_e4m3fn", "float8_e5m2"])
def test_scaled_mm_dequantizes_operands_first(fa):
    """K = 1: y = fl32(fl32(q_a s_a) * fl32(q_b s_b)) (operands dequantized to float32 before a float32 GEMM),
    checked against float64 products (exact for float32 factors) rounded once; not fl32(q_a q_b fl32(s_a s_b))."""
    if ONEDNN_FP8:
        pytest.skip("CPU variant torch_scaled_mm_onednn_fp8: with AVX512-FP16 torch._scaled_mm runs oneDNN's float8 "
                    "matmul (not modelled); ATEN_CPU_CAPABILITY=avx2 gives the dequantizing path this test checks")
    rng = np.random.default_rng(5)
    M = N = 1024
    a = rng.standard_normal((M, 1)).astype(np.float32) * 3
    b = rng.standard_normal((1, N)).astype(np.float32)
    qa, qb, _, _, y = qdq_scaled_mm(torch, a, b, fa, "float8_e4m3fn", np.float32(0.0137), np.float32(0.0291))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for q, x, s, f in ((qa, a, 0.0137, fa), (qb, b, 0.0291, "float8_e4m3fn")):  # the codes: ml_dtypes' casts
        t = getattr(ml_dtypes, f)
        mx = np.float32(ml_dtypes.finfo(t).max)
        ref = np.clip(x / np.float32(s), -mx, mx).astype(t).view(np.uint8)
        np.testing.assert_array_equal(q.view(torch.uint8).numpy(), ref)
    da = (qa.float().numpy().astype(np.float64) * np.float64(np.float32(0.0137))).astype(np.float32)
    db = (qb.float().numpy().astype(np.float64) * np.float64(np.float32(0.0291))).astype(np.float32)
    exp = (da.astype(np.float64) @ db.astype(np.float64)).astype(np.float32)
    assert y.numel() >= 10**6
    np.testing.assert_array_equal(y.numpy().view(np.uint32), exp.view(np.uint32))
    s = np.float32(np.float64(np.float32(0.0137)) * np.float64(np.float32(0.0291)))
    post = ((qa.float().numpy().astype(np.float64) @ qb.float().numpy().astype(np.float64)).astype(np.float32)
            .astype(np.float64) * np.float64(s)).astype(np.float32)
    assert (post != exp).sum() > 1000


@pytest.mark.parametrize("seed", range(10, 22))
def test_onednn_scale_steps(seed):
    """oneDNN's three float32 products and the scales' reciprocal round trip decide near-ties that one float32
    multiplier fl32(fl32(a_s w_s) / y_s) rounds the other way (12 seeds; several of them hold such elements)."""
    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("torch built without onednn")
    if AMX_ONEDNN:
        pytest.skip("CPU variant onednn_int8_amx_kernels: oneDNN's AMX int8 kernels apply the scales otherwise (not "
                    "modelled); ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI checks the VNNI kernels of the profile")
    ins = _linear_inputs(seed, "onednn", seed % 2 == 1, None, M=512, N=512)
    got = qlinear(torch, "onednn", ins)
    i = ins
    exp = expected_linear("onednn", i["a"], int(i["a_zero_point"]), i["a_scale"], i["b"],
                          i["b_zero_point"].astype(np.int64), i["b_scale"], i["y_scale"], int(i["y_zero_point"]))
    np.testing.assert_array_equal(got.astype(np.int64), exp)


# ---- float32 bias (matmul.md §4.1) -----------------------------------------------------------------------------
def _round_half_even(fr: Fraction) -> int:
    q, r = divmod(fr.numerator, fr.denominator)
    twice = 2 * r
    return q + (1 if twice > fr.denominator or (twice == fr.denominator and q % 2) else 0)


def fl32(x: Fraction | float) -> float:
    """x rounded once to float32 (nearest even) through an exact Fraction."""
    x = Fraction(x)
    if x == 0:
        return 0.0
    e = math.floor(math.log2(abs(x)))
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 23)
    return float(_round_half_even(x / ulp) * ulp)


def expected_bias(engine: str, acc: int, bias: float, a_s: float, w_s: float, y_s: float, zy: int,
                  per_tensor: bool) -> int:
    """One output with a float32 bias, every rounding spelled out on Fractions: fbgemm per tensor fl(fl(acc) + bias
    * fl(1 / fl(a_s w_s))) (one rounding: a fused multiply-add), per channel fl(fl(acc) + fl(bias / fl(a_s w_s)));
    qnnpack rint(fl(bias * fl(1 / fl(a_s w_s)))) into the int32 accumulator; onednn fl(fl(fl(acc a') w') + bias)
    * fl(1 / y_s) with a' = fl(1 / fl(1 / a_s)), zy added in float32 before the rounding."""
    F = Fraction
    ab = fl32(F(a_s) * F(w_s))
    if engine in ("fbgemm", "x86"):
        m = fl32(F(ab) / F(y_s))
        x = fl32(F(fl32(acc)) + F(bias) * F(fl32(1 / F(ab)))) if per_tensor else \
            fl32(F(fl32(acc)) + F(fl32(F(bias) / F(ab))))
        return min(255, max(0, _round_half_even(F(fl32(F(x) * F(m)))) + zy))
    if engine == "qnnpack":
        q = _round_half_even(F(fl32(F(bias) * F(fl32(1 / F(ab))))))
        m = fl32(F(ab) * F(fl32(1 / F(y_s))))
        return min(255, max(0, _round_half_even(F(fl32(F(fl32(acc + q)) * F(m)))) + zy))
    back = [fl32(1 / F(float(np.float32(1.0 / np.float64(s))))) for s in (a_s, w_s)]
    v = fl32(F(fl32(F(fl32(acc)) * F(back[0]))) * F(back[1]))
    v = fl32(F(fl32(F(v) + F(bias))) * F(float(np.float32(1.0 / np.float64(y_s)))))
    return min(255, max(0, _round_half_even(F(fl32(F(v) + zy)))))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_linear_float_bias(engine, per_channel):
    """quantized.linear with a float32 bias against the Fraction transcription on near-ties of the bias in
    accumulator units (m = 1: the output is the rounded sum), 4 x 1024 outputs per engine."""
    rng = np.random.default_rng(21)
    M, K, N = 4, 9, 1024
    za, zy = 100, 101
    a = (za + rng.integers(-1, 2, (M, K))).astype(np.uint8)
    b = rng.integers(-3, 4, (K, N)).astype(np.int8)
    a_s = float(np.float32(0.0371))
    w_s = float(np.float32(0.0123))
    ab = np.float32(np.float32(a_s) * np.float32(w_s))
    near = np.where(rng.random(N) < 0.5, 0, rng.uniform(-1e-6, 1e-6, N))
    bias = ((rng.integers(-60, 60, N) + 0.5 + near) * float(ab)).astype(np.float32)
    ins = {"a": a, "a_scale": np.float32(a_s), "a_zero_point": np.uint8(za), "b": b,
           "b_scale": np.full(N, w_s, np.float32) if per_channel else np.float32(w_s),
           "b_zero_point": np.zeros(N, np.int8) if per_channel else np.int8(0), "y_scale": ab,
           "y_zero_point": np.uint8(zy)}
    got = qlinear(torch, engine, ins, bias)
    acc = (a.astype(np.int64) - za) @ b.astype(np.int64)
    exp = np.array([[expected_bias(engine, int(acc[m, n]), float(bias[n]), a_s, w_s, float(ab), zy, not per_channel)
                     for n in range(N)] for m in range(M)])
    np.testing.assert_array_equal(got.astype(np.int64), exp)
    r = qm.quantized_matmul(a, b, a_scale=ins["a_scale"], a_zero_point=za, b_scale=ins["b_scale"],
                            b_zero_point=ins["b_zero_point"], y_scale=ab, y_zero_point=zy, bias=bias,
                            pipeline=qm.QuantizedMatmul(qm.IntOperand("uint8"), qm.IntOperand("int8"), "uint8",
                                                        qm.matmul_rules(f"torch_{engine}")))
    np.testing.assert_array_equal(r.values, exp)


# ---- CPUs without AVX-512 VNNI: the ISA masked (matmul.md §3.2) ------------------------------------------------
_MASKED = """
import sys, numpy as np, torch
from qref.harness.adapters.torch import int_mm, qlinear
torch.set_num_threads(1)
d = dict(np.load(sys.argv[1]))
op = str(d.pop("op"))
y = int_mm(torch, d["a"], d["b"], d["a_zero_point"], d["b_zero_point"]) if op == "int_mm" else qlinear(torch, op, d)
np.save(sys.argv[2], y)
"""


def _masked(tmp_path, env: dict[str, str], op: str, ins: dict[str, np.ndarray]) -> np.ndarray:
    import os
    import subprocess
    import sys

    src, out = tmp_path / "in.npz", tmp_path / "out.npy"
    np.savez(src, op=np.array(op), **{k: np.asarray(v) for k, v in ins.items()})
    script = tmp_path / "run.py"
    script.write_text(_MASKED)
    e = {**os.environ, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    subprocess.run([sys.executable, str(script), str(src), str(out)], check=True, env=e, capture_output=True)
    return np.load(out)


def pair_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_i sat16(a[2i] b[2i] + a[2i+1] b[2i+1]) over adjacent k (K padded with a zero), int64."""
    a, b = a.astype(np.int64), b.astype(np.int64)
    if a.shape[1] % 2:
        a, b = np.pad(a, ((0, 0), (0, 1))), np.pad(b, ((0, 1), (0, 0)))
    p = np.einsum("mk,kn->mkn", a[:, 0::2], b[0::2]) + np.einsum("mk,kn->mkn", a[:, 1::2], b[1::2])
    return np.clip(p, -(2**15), 2**15 - 1).sum(axis=1)


@pytest.mark.skipif(not VNNI, reason="the ISA masks are checked on an AVX-512 VNNI CPU (exact there)")
@pytest.mark.parametrize("isa", ["AVX2", "AVX512_CORE"])
def test_int_mm_without_vnni_saturates_shifted_pairs(tmp_path, isa):
    """oneDNN's s8 x s8 on vpmaddubsw: A + 128 as u8, int16 pair saturation, - 128 colsum(B) in int32
    (saturating_int16_shifted_a); the harness's zero-point corrections then apply. 1024 x 1024 outputs."""
    rng = np.random.default_rng(8)
    a = edgy(rng, (1024, 64), -128, 127, np.int8)
    b = edgy(rng, (64, 1024), -128, 127, np.int8)
    za, zb = np.int8(5), rng.integers(-128, 128, 1024).astype(np.int8)
    got = _masked(tmp_path, {"ONEDNN_MAX_CPU_ISA": isa}, "int_mm",
                  {"a": a, "b": b, "a_zero_point": za, "b_zero_point": zb})
    raw = pair_sums(a.astype(np.int64) + 128, b) - 128 * b.astype(np.int64).sum(axis=0)
    K = a.shape[1]
    exp = wrap32(raw - zb.astype(np.int64) * a.astype(np.int64).sum(axis=1, keepdims=True)
                 - int(za) * b.astype(np.int64).sum(axis=0) + K * int(za) * zb.astype(np.int64))
    assert got.size >= 10**6 and (exp != wrap32((a.astype(np.int64) - za) @ (b.astype(np.int64) - zb))).mean() > 0.5
    np.testing.assert_array_equal(got.astype(np.int64), exp)
    r = qm.quantized_matmul(a, b, a_zero_point=za, b_zero_point=zb,
                            pipeline=qm.QuantizedMatmul(qm.IntOperand("int8"), qm.IntOperand("int8"), None,
                                                        qm.matmul_rules("torch_int_mm_avx2")))
    np.testing.assert_array_equal(r.values, exp)


@pytest.mark.skipif(not VNNI, reason="the ISA masks are checked on an AVX-512 VNNI CPU (exact there)")
@pytest.mark.parametrize("engine, env", [("fbgemm", {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}),
                                         ("x86", {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX512"}),
                                         ("onednn", {"ONEDNN_MAX_CPU_ISA": "AVX2"})])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_linear_without_vnni_saturates_pairs(tmp_path, engine, env, per_channel):
    """fbgemm's and oneDNN's AVX2 / AVX-512 (no VNNI) u8 x s8 kernels: raw pairs saturate to int16, zero points
    corrected in int32 after; then each engine's requantization. 1024 x 1024 outputs."""
    ins = _linear_inputs(20, engine, per_channel, None)  # seed 20: near-ties where the scale products differ
    ins["b"] = edgy(np.random.default_rng(10), ins["b"].shape, -128, 127, np.int8)  # edge pairs: 255 x -128
    got = _masked(tmp_path, env, engine, ins)
    profile = "torch_onednn_avx2" if engine == "onednn" else "torch_fbgemm_avx2"
    i = ins
    zb = np.asarray(i["b_zero_point"]).astype(np.int64)
    za = int(i["a_zero_point"])
    K = i["a"].shape[1]
    acc = wrap32(pair_sums(i["a"], i["b"]) - zb * i["a"].astype(np.int64).sum(axis=1, keepdims=True)
                 - za * i["b"].astype(np.int64).sum(axis=0) + K * za * zb)
    exp = expected_linear_acc(engine, acc, i["a_scale"], i["b_scale"], i["y_scale"], int(i["y_zero_point"]),
                              combined=True)
    exact = expected_linear(engine, i["a"], za, i["a_scale"], i["b"], zb, i["b_scale"], i["y_scale"],
                            int(i["y_zero_point"]))
    assert got.size >= 10**6 and (exp != exact).sum() > 1000
    np.testing.assert_array_equal(got.astype(np.int64), exp)
    r = qm.quantized_matmul(i["a"], i["b"], a_scale=i["a_scale"], a_zero_point=i["a_zero_point"],
                            b_scale=i["b_scale"], b_zero_point=i["b_zero_point"], y_scale=i["y_scale"],
                            y_zero_point=i["y_zero_point"],
                            pipeline=qm.QuantizedMatmul(qm.IntOperand("uint8"), qm.IntOperand("int8"), "uint8",
                                                        qm.matmul_rules(profile)))
    np.testing.assert_array_equal(r.values, exp)
