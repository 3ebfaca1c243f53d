"""LiteRT's quantized FULLY_CONNECTED and BATCH_MATMUL against independent transcriptions of their
requantization, bit for bit (matmul.md §6.6).

Each test writes one-operator .tflite flatbuffers (qref.harness.adapters.litert) and runs them with the
interpreter's three kernel choices: BUILTIN_REF, BUILTIN_WITHOUT_DEFAULT_DELEGATES (the optimized kernels: ruy
for FULLY_CONNECTED) and AUTO (XNNPACK). The accumulators are set through the operands: FULLY_CONNECTED with K = 1,
a = -128..127 (zero point 0) and unit weights gives acc = bias[n] + a[m], so with biases placed at (k + 1/2) / m
every row sweeps the ties and near ties of column n; BATCH_MATMUL (no bias) takes K = 2 and acc = (a0 - za) +
(a1 - za) b1[n]. Expected values come from the formulas below, written here with Python integers / numpy int64
and IEEE float64 / float32 arithmetic, independent of qref.recipes.qmatmul:

- reference kernels: y = round_half_away(fl64(double(acc) * m)) + zy, m = double(a_s) double(w_s) / double(y_s);
- optimized FULLY_CONNECTED (ruy): q, shift = QuantizeMultiplier(m) (frexp, Q31 half away, 2^31 carry), with
  m = double(fl32(a_s w_s)) / y_s per tensor, a_s w_s / y_s in double per channel; t = (acc 2^left q + 2^30) >>
  31, y = (t + 2^(right - 1)) >> right;
- XNNPACK: y = rint(fl32(fl32(acc) * fl32(fl32(a_s w_s) / y_s))) + zy;
- BATCH_MATMUL (reference and optimized): gemmlowp RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc
  2^left, q), right), m = double(fl32(a_s b_s)) / y_s.

Finally the qref profiles (litert_reference, litert_optimized, litert_xnnpack, litert_batch_matmul) are run
through qref.quantized_matmul on the same problems and compared with the interpreter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert)")
pytest.importorskip("flatbuffers", reason="flatbuffer builder")

from qref.harness.adapters import litert as LA
from qref.recipes.qmatmul import IntOperand, QuantizedMatmul, matmul_rules, quantized_matmul

F32, F64 = np.float32, np.float64
RNG = np.random.default_rng(28)
SWEEP = np.arange(-128, 128, dtype=np.int8).reshape(-1, 1)


# ---- independent transcriptions ---------------------------------------------------------------------------
def q31(m: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier with Python floats and ints."""
    if m == 0:
        return 0, 0
    f, e = math.frexp(m)
    q = math.floor(f * 2**31 + 0.5)  # f 2^31 and + 1/2 are exact: round half away (f > 0)
    if q == 2**31:
        q, e = q // 2, e + 1
    if e < -31:
        q, e = 0, 0
    return q, e


def half_away(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    f = np.floor(ax)
    return (np.sign(x) * (f + ((ax - f) >= 0.5))).astype(np.int64)


def ref_requant(acc: np.ndarray, m: np.ndarray) -> np.ndarray:
    return half_away(acc.astype(F64) * m)


def ruy_requant(acc: np.ndarray, m: np.ndarray) -> np.ndarray:
    qs = [q31(float(v)) for v in np.broadcast_to(m, acc.shape[-1:])]
    q = np.array([v[0] for v in qs], np.int64)
    e = np.array([v[1] for v in qs], np.int64)
    left, right = np.maximum(e, 0), np.maximum(-e, 0)
    t = ((acc << left) * q + (1 << 30)) >> 31
    return np.where(right > 0, (t + (np.int64(1) << np.maximum(right - 1, 0))) >> right, t)


def gemmlowp_requant(acc: np.ndarray, m: float) -> np.ndarray:
    q, e = q31(m)
    left, right = max(e, 0), max(-e, 0)
    ab = (acc << left) * q
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    s = ab + nudge
    high = np.where(s >= 0, s >> 31, -((-s) >> 31))  # truncation toward zero
    mask = (1 << right) - 1
    rem, thr = high & mask, (mask >> 1) + (high < 0)
    return (high >> right) + (rem > thr)


def xnn_requant(acc: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.rint(acc.astype(F32) * scale).astype(np.int64)


def clamp(v: np.ndarray, storage: str) -> np.ndarray:
    info = np.iinfo(storage)
    return np.clip(v, info.min, info.max)


# ---- models -----------------------------------------------------------------------------------------------
def fc(a: np.ndarray, w_t: np.ndarray, bias: np.ndarray | None, a_s: float, za: int, w_s: np.ndarray, y_s: float,
       zy: int, storage: str = "int8", bias_type: str | None = None) -> bytes:
    """FULLY_CONNECTED; w_t is (K, N) (the weights transposed); w_s one scale or one per output channel."""
    ins = {"a": a, "b": w_t, "a_scale": F32(a_s), "a_zero_point": np.array(za), "b_scale": np.asarray(w_s, F32),
           "b_zero_point": np.zeros(np.size(w_s), np.int64), "y_scale": F32(y_s), "y_zero_point": np.array(zy)}
    if bias is not None:
        ins["bias"] = bias
    tensors, inputs, op_in = LA.tensor_specs("fully_connected", ins, (storage, "int8", storage))
    if bias_type is not None:
        tensors = [(n, bias_type if n == "bias" else t, sh, d if n != "bias" else d.astype(bias_type), s, z)
                   for n, t, sh, d, s, z in tensors]
    return LA.model_bytes("fully_connected", tensors, inputs, op_in)


def bmm(a: np.ndarray, b: np.ndarray, a_s: float, za: int, b_s: float, zb: int, y_s: float, zy: int) -> bytes:
    ins = {"a": a, "b": b, "a_scale": F32(a_s), "a_zero_point": np.array(za), "b_scale": F32(b_s),
           "b_zero_point": np.array(zb), "y_scale": F32(y_s), "y_zero_point": np.array(zy)}
    tensors, inputs, op_in = LA.tensor_specs("batch_matmul", ins, ("int8", "int8", "int8"))
    return LA.model_bytes("batch_matmul", tensors, inputs, op_in)


def near_tie_biases(m: np.ndarray, zy: int, lo: int = -100, hi: int = 100) -> np.ndarray:
    k = RNG.integers(lo, hi, m.size) - zy
    return np.clip(np.round((k + 0.5) / m), -(2**31) + 200, 2**31 - 200).astype(np.int64)


def fc_problems(per_channel: bool, count: int, n: int = 1024) -> list[dict]:
    """Sweeps (acc = bias[n] + a[m]) at random float32 scales; about half the columns near a tie, the rest
    exactly at dyadic ties (m = 2^-e and 3 2^-e)."""
    out = []
    for j in range(count):
        a_s, y_s = (2.0 ** RNG.uniform(-10, 0, 2)).astype(F32)
        w_s = (2.0 ** RNG.uniform(-10, -2, n if per_channel else 1)).astype(F32)
        zy = int(RNG.integers(-20, 21))
        if j % 4 == 3:  # dyadic: every second accumulator is a tie
            a_s, y_s = F32(2.0 ** -int(RNG.integers(0, 6)) * (3 if j % 8 == 3 else 1)), F32(1.0)
            w_s = (2.0 ** -RNG.integers(1, 8, w_s.size)).astype(F32)
        m64 = F64(a_s) * w_s.astype(F64) / F64(y_s)
        m = np.broadcast_to(m64, (n,))
        out.append({"a_s": float(a_s), "w_s": w_s if per_channel else w_s.reshape(()), "y_s": float(y_s), "zy": zy,
                    "bias": near_tie_biases(m, zy)})
    return out


def fc_run(p: dict, kind: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    n = p["bias"].size
    buf = fc(SWEEP, np.ones((1, n), np.int8), p["bias"], p["a_s"], 0, p["w_s"], p["y_s"], p["zy"])
    y, ops = LA.invoke(buf, [SWEEP], kind)
    acc = p["bias"][None, :] + SWEEP.astype(np.int64)
    return y.astype(np.int64), acc, ops


# ---- FULLY_CONNECTED ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_reference_kernels_requantize_in_double_ties_away(per_channel: bool) -> None:
    n = 0
    for p in fc_problems(per_channel, 4):
        y, acc, _ = fc_run(p, "ref")
        m = F64(p["a_s"]) * np.asarray(p["w_s"], F32).astype(F64) / F64(p["y_s"])
        exp = clamp(ref_requant(acc, m) + p["zy"], "int8")
        assert np.array_equal(y, exp), f"{int((y != exp).sum())} mismatches"
        n += y.size
    assert n >= 10**6


@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_optimized_kernels_are_ruy_double_rounding_half_up(per_channel: bool) -> None:
    n = 0
    for p in fc_problems(per_channel, 4):
        y, acc, _ = fc_run(p, "optimized")
        w = np.asarray(p["w_s"], F32)
        ab = w.astype(F64) * F64(p["a_s"]) if per_channel else F64(F32(F32(p["a_s"]) * w))  # fl32(a_s w_s)
        exp = clamp(ruy_requant(acc, ab / F64(p["y_s"])) + p["zy"], "int8")
        assert np.array_equal(y, exp), f"{int((y != exp).sum())} mismatches"
        # the tie rule is visible: the reference kernels' rounding differs on these sweeps
        assert not np.array_equal(exp, clamp(ref_requant(acc, ab / F64(p["y_s"])) + p["zy"], "int8"))
        n += y.size
    assert n >= 10**6


@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_default_interpreter_is_xnnpack_fp32(per_channel: bool) -> None:
    n = 0
    for p in fc_problems(per_channel, 4):
        y, acc, ops = fc_run(p, "xnnpack")
        assert "DELEGATE" in ops
        scale = (F32(p["a_s"]) * np.asarray(p["w_s"], F32)).astype(F32) / F32(p["y_s"])
        exp = clamp(xnn_requant(acc, scale.astype(F32)) + p["zy"], "int8")
        assert np.array_equal(y, exp), f"{int((y != exp).sum())} mismatches"
        n += y.size
    assert n >= 10**6


def test_per_tensor_multiplier_rounds_the_scale_product_to_float32_in_the_optimized_kernels() -> None:
    """Near ties separate m = double(fl32(a_s w_s)) / y_s from a_s w_s / y_s in double (per tensor, ruy)."""
    differ = 0
    for p in fc_problems(False, 6, n=512):
        y, acc, _ = fc_run(p, "optimized")
        w = F32(p["w_s"])
        m32 = F64(F32(F32(p["a_s"]) * w)) / F64(p["y_s"])
        m64 = F64(p["a_s"]) * F64(w) / F64(p["y_s"])
        assert np.array_equal(y, clamp(ruy_requant(acc, np.full(1, m32)) + p["zy"], "int8"))
        differ += int((clamp(ruy_requant(acc, np.full(1, m64)) + p["zy"], "int8") != y).sum())
    assert differ > 0


def test_multiplier_edges() -> None:
    """m near 2^-31 (and below 2^-32: q = 0), near and at 1, the Q31 carry (m in [1 - 2^-32, 1)), m > 1."""
    steps = [1 + k * 2.0**-23 for k in range(6)] + [1 - k * 2.0**-24 for k in range(1, 6)]
    carry = next((a, b, y) for a in steps for b in steps for y in steps if 1 - 2.0**-32 <= a * b / y < 1)
    cases = [(2.0**-16, 2.0**-15, 1.0), (3 * 2.0**-17, 2.0**-16, 1.0), (2.0**-20, 2.0**-20, 2.0**-3),
             (1 - 2.0**-24, 1.0, 1.0), (1.0, 1.0, 1.0), (1 + 2.0**-23, 1.0, 1.0), carry, (1.37, 2.71, 0.93)]
    n = 0
    for a_s, w_s, y_s in cases:
        a_s, w_s, y_s = F32(a_s), F32(w_s), F32(y_s)
        m = F64(a_s) * F64(w_s) / F64(y_s)
        bias = (np.linspace(-(2.0**31) + 256, 2.0**31 - 256, 64) if m < 1e-6 else
                near_tie_biases(np.full(64, m), 0)).astype(np.int64)
        p = {"a_s": float(a_s), "w_s": np.asarray(w_s).reshape(()), "y_s": float(y_s), "zy": 0, "bias": bias}
        m32 = F64(F32(a_s * w_s)) / F64(y_s)
        for kind in ("ref", "optimized", "xnnpack"):
            y, acc, _ = fc_run(p, kind)
            if kind == "ref":
                exp = ref_requant(acc, m)
            elif kind == "optimized":
                exp = ruy_requant(acc, np.full(1, m32))
            else:
                exp = xnn_requant(acc, F32(F32(a_s * w_s) / y_s))
            assert np.array_equal(y, clamp(exp, "int8")), (kind, float(m))
            n += y.size
    assert q31(float(F64(F32(carry[0])) * F64(F32(carry[1])) / F64(F32(carry[2]))))[1] == 1  # the carry happened
    assert n > 90_000


def test_int16x8_fully_connected() -> None:
    """int16 activations (zero point 0): with TFLite's int64 bias every kernel choice computes the reference
    requantization (double, ties away); with an int32 bias the optimized kernels run ruy (the reference kernel:
    next test)."""
    a = (np.arange(-128, 128, dtype=np.int64) * 255).reshape(-1, 1).astype(np.int16)
    n = 0
    for a_s, w_s, y_s in ((0.5, 1.0, 1.0), (0.75 * 2.0**-4, 1.0, 1.0), (0.0173, 0.0091, 0.000731)):
        a_s, w_s, y_s = F32(a_s), F32(w_s), F32(y_s)
        m = F64(a_s) * F64(w_s) / F64(y_s)
        bias = near_tie_biases(np.full(256, m), 0, -30000, 30000)
        acc = bias[None, :] + a.astype(np.int64)
        w = np.ones((1, 256), np.int8)
        buf64 = fc(a, w, bias, float(a_s), 0, np.asarray(w_s), float(y_s), 0, "int16", "int64")
        for kind in ("ref", "optimized", "xnnpack"):
            y, ops = LA.invoke(buf64, [a], kind)
            assert "DELEGATE" not in ops
            assert np.array_equal(y.astype(np.int64), clamp(ref_requant(acc, m), "int16")), kind
            n += y.size
        buf32 = fc(a, w, bias, float(a_s), 0, np.asarray(w_s), float(y_s), 0, "int16", "int32")
        y, _ = LA.invoke(buf32, [a], "optimized")
        m32 = F64(F32(a_s * w_s)) / F64(y_s)
        assert np.array_equal(y.astype(np.int64), clamp(ruy_requant(acc, np.full(1, m32)), "int16"))
    assert n > 500_000


def test_int16x8_reference_kernel_reads_an_int32_bias_as_int64() -> None:
    """BUILTIN_REF, int16 x int8 with an int32 bias tensor (accepted at prepare): column n gets the int64 made of
    int32 elements 2n (low word) and 2n + 1 (high word); columns n >= N/2 read past the bias buffer. A double
    beyond int32 converts to INT32_MIN (x86 cvttsd2si): -32768 after the clamp."""
    a = np.arange(-4, 4, dtype=np.int16).reshape(-1, 1)
    bias = np.array([100, 0, 300, 0, 1000, 0, 7, 0], np.int64)
    y, _ = LA.invoke(fc(a, np.ones((1, 8), np.int8), bias, 1.0, 0, np.asarray(F32(1.0)), 1.0, 0, "int16", "int32"),
                     [a], "ref")
    assert np.array_equal(y[:, :4].astype(np.int64), a.astype(np.int64) + bias[0::2][None, :])
    y, _ = LA.invoke(fc(a, np.ones((1, 8), np.int8), bias + 1, 1.0, 0, np.asarray(F32(1.0)), 1.0, 0, "int16",
                        "int32"), [a], "ref")
    assert np.all(y[:, :4] == -32768)  # high word 1: 2^32 + ... beyond int32 -> INT32_MIN


def test_weight_zero_points_and_uint8() -> None:
    """A per-tensor int8 weight zero point and uint8 x uint8 (per tensor) are honoured by the three kernel
    choices' formulas; per-channel int8 weight zero points are ignored by the builtin kernels and refused by
    XNNPACK's prepare."""
    rng = np.random.default_rng(5)
    M, K, N = 64, 40, 48
    for st, zb in (("int8", 13), ("uint8", 131)):
        info = np.iinfo(st)
        a = rng.integers(info.min, info.max + 1, (M, K)).astype(st)
        w_t = rng.integers(info.min, info.max + 1, (K, N)).astype(st)
        bias = rng.integers(-5000, 5000, N).astype(np.int64)
        a_s, w_s, y_s, za, zy = F32(0.0173), F32(0.0041), F32(0.0931), int(info.min) + 100, int(info.min) + 120
        ins = {"a": a, "b": w_t, "a_scale": a_s, "a_zero_point": np.array(za), "b_scale": w_s,
               "b_zero_point": np.array(zb), "y_scale": y_s, "y_zero_point": np.array(zy), "bias": bias}
        buf = LA.model_bytes("fully_connected", *LA.tensor_specs("fully_connected", ins, (st, st, st)))
        acc = (a.astype(np.int64) - za) @ (w_t.astype(np.int64) - zb) + bias
        m, m32 = F64(a_s) * F64(w_s) / F64(y_s), F64(F32(a_s * w_s)) / F64(y_s)
        exp = {"ref": ref_requant(acc, m), "optimized": ruy_requant(acc, np.full(1, m32)),
               "xnnpack": xnn_requant(acc, F32(F32(a_s * w_s) / y_s)) if st == "uint8" else ruy_requant(
                   acc, np.full(1, m32))}  # XNNPACK declines an int8 weight zero point: the optimized kernel runs
        for kind, e in exp.items():
            y, ops = LA.invoke(buf, [a], kind)
            assert np.array_equal(y.astype(np.int64), clamp(e + zy, st)), (st, kind)
            assert ("DELEGATE" in ops) == (kind == "xnnpack" and st == "uint8")
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    w_t = rng.integers(-128, 128, (K, N)).astype(np.int8)
    zb = rng.integers(-100, 100, N)
    ins = {"a": a, "b": w_t, "a_scale": F32(0.02), "a_zero_point": np.array(3), "b_scale": np.full(N, F32(0.01)),
           "b_zero_point": zb, "y_scale": F32(0.5), "y_zero_point": np.array(-2)}
    buf = LA.model_bytes("fully_connected", *LA.tensor_specs("fully_connected", ins, ("int8", "int8", "int8")))
    acc0 = (a.astype(np.int64) - 3) @ w_t.astype(np.int64)  # the zero points ignored
    y, _ = LA.invoke(buf, [a], "ref")
    assert np.array_equal(y.astype(np.int64), clamp(ref_requant(acc0, np.full(N, F64(F32(0.02)) * F64(F32(0.01)) /
                                                                     0.5)) - 2, "int8"))
    with pytest.raises(RuntimeError, match="zero-point"):
        LA.invoke(buf, [a], "xnnpack")


# ---- BATCH_MATMUL -------------------------------------------------------------------------------------------
def bmm_problem() -> tuple[np.ndarray, np.ndarray]:
    a = np.stack(np.meshgrid(np.arange(-128, 128), np.arange(-128, 128, 16)), -1).reshape(-1, 2).astype(np.int8)
    b = np.stack([np.ones(256, np.int64), np.arange(256) - 128]).astype(np.int8)
    return a, b


@pytest.mark.parametrize("zb", [0, 5])
def test_batch_matmul_builtin_kernels_are_gemmlowp(zb: int) -> None:
    a, b = bmm_problem()
    n = differ = 0
    for j in range(6):
        a_s, y_s = (2.0 ** RNG.uniform(-12, -6, 2)).astype(F32)
        b_s = F32(2.0 ** RNG.uniform(-3, 3))
        if j < 2:
            a_s, b_s, y_s = F32(2.0 ** -(4 + j)), F32(1.0 if j else 0.75), F32(1.0)
        za, zy = int(RNG.integers(-5, 6)), int(RNG.integers(-5, 6))
        acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        m = float(F64(F32(a_s * b_s)) / F64(y_s))
        exp = clamp(gemmlowp_requant(acc, m) + zy, "int8")
        buf = bmm(a, b, float(a_s), za, float(b_s), zb, float(y_s), zy)
        for kind in ("ref", "optimized"):
            y, _ = LA.invoke(buf, [a, b], kind)
            assert np.array_equal(y.astype(np.int64), exp), (kind, j, int((y != exp).sum()))
            n += y.size
        differ += int((clamp(ruy_requant(acc, np.full(1, m)) + zy, "int8") != exp).sum())
    assert n >= 10**6 and differ > 0


def test_batch_matmul_default_interpreter_delegates_zero_point_0_to_xnnpack() -> None:
    a, b = bmm_problem()
    n = 0
    for _ in range(3):
        a_s, y_s = (2.0 ** RNG.uniform(-12, -6, 2)).astype(F32)
        b_s = F32(2.0 ** RNG.uniform(-3, 3))
        za, zy = int(RNG.integers(-5, 6)), int(RNG.integers(-5, 6))
        acc = (a.astype(np.int64) - za) @ b.astype(np.int64)
        y, ops = LA.invoke(bmm(a, b, float(a_s), za, float(b_s), 0, float(y_s), zy), [a, b], "xnnpack")
        assert "DELEGATE" in ops
        assert np.array_equal(y.astype(np.int64), clamp(xnn_requant(acc, F32(F32(a_s * b_s) / y_s)) + zy, "int8"))
        n += y.size
    _, ops = LA.invoke(bmm(a, b, 0.01, 0, 0.5, 3, 0.7, 0), [a, b], "xnnpack")
    assert "DELEGATE" not in ops  # a nonzero b zero point stays on the builtin kernel
    assert n > 400_000


# ---- the qref profiles ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "profile"), [("ref", "litert_reference"), ("optimized", "litert_optimized"),
                                               ("xnnpack", "litert_xnnpack")])
def test_qref_fully_connected_profiles_equal_the_interpreter(kind: str, profile: str) -> None:
    n = 0
    for per_channel in (False, True):
        for p in fc_problems(per_channel, 2, n=512):
            y, _, _ = fc_run(p, kind)
            pipe = QuantizedMatmul(IntOperand("int8"), IntOperand("int8", "per_column" if per_channel else
                                                                  "per_tensor"), "int8", matmul_rules(profile))
            r = quantized_matmul(SWEEP, np.ones((1, p["bias"].size), np.int8), a_scale=F32(p["a_s"]),
                                 b_scale=p["w_s"], y_scale=F32(p["y_s"]), y_zero_point=p["zy"], bias=p["bias"],
                                 pipeline=pipe)
            assert np.array_equal(y.astype(np.int64), r.values)
            n += y.size
    assert n >= 500_000


def test_qref_batch_matmul_profile_equals_the_interpreter() -> None:
    a, b = bmm_problem()
    pipe = QuantizedMatmul(IntOperand("int8"), IntOperand("int8"), "int8", matmul_rules("litert_batch_matmul"))
    for a_s, b_s, y_s, za, zb, zy in ((0.0173, 0.75, 0.931, 3, -2, 1), (2.0**-5, 0.75, 1.0, 0, 0, -1)):
        a_s, b_s, y_s = F32(a_s), F32(b_s), F32(y_s)
        y, _ = LA.invoke(bmm(a, b, float(a_s), za, float(b_s), zb, float(y_s), zy), [a, b], "ref")
        r = quantized_matmul(a, b, a_scale=a_s, a_zero_point=za, b_scale=b_s, b_zero_point=zb, y_scale=y_s,
                             y_zero_point=zy, pipeline=pipe)
        assert np.array_equal(y.astype(np.int64), r.values)
