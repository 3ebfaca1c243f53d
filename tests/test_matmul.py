"""Quantized integer matmul (matmul.md): the accumulator against Python integers, the gemmlowp / TFLite fixed-point
functions against a straightforward Python-int transcription on every edge multiplier, the float requantizations
against independent numpy / Fraction implementations, bad input, and ONNX Runtime / the ONNX reference evaluator
bit for bit (>= 10^6 outputs against onnxruntime, matmul.md §6.1)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from qref.errors import QrefError
from qref.recipes import qmatmul as qm

I32 = (-(2**31), 2**31 - 1)


# ---- a transcription of gemmlowp fixedpoint.h / TFLite common.h with Python ints ------------------------------
def srdhm(a: int, b: int) -> int:
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    t = ab + nudge
    return int(t / (1 << 31)) if abs(t) < 2**52 else (abs(t) // (1 << 31)) * (1 if t >= 0 else -1)


def rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > threshold else 0)


def qmul(m: float, single: bool) -> tuple[int, int]:
    if m == 0:
        return 0, 0
    f, s = math.frexp(m)
    q = int(Fraction(f) * 2**31 + Fraction(1, 2)) if f >= 0 else None  # std::round: half away (f > 0)
    assert q is not None
    if q == 2**31:
        q //= 2
        s += 1
    if s < -31:
        return 0, 0
    if single and s > 30:
        return 2**31 - 1, 30
    return q, s


def mbqm(x: int, q: int, s: int, single: bool) -> int:
    if single:
        total = 31 - s
        return (x * q + (1 << (total - 1))) >> total
    left, right = max(s, 0), max(-s, 0)
    return rdbpot(srdhm(x * (1 << left), q), right)


EDGE_X = [0, 1, -1, 2, -2, 3, 1000, -1000, 2**24 + 1, -(2**24) - 1, 2**30, -(2**30), 2**31 - 1, -(2**31), 12345678,
          -87654321]
EDGE_M = [2.0**-31, 2.0**-32, 2.0**-31 * 1.5, 2.0**-33, 3 * 2.0**-33, 0.5, 0.75, 1 - 2.0**-24, 1 - 2.0**-33,
          1 - 2.0**-40, 1.0, 1 + 2.0**-23, 0.1, 1 / 3, 2.0**-10 * 3, 2.0**-20, 1e-9, 0.0]


def test_srdhm_and_rdbpot_equal_the_transcription() -> None:
    rng = np.random.default_rng(3)
    a = np.array(EDGE_X + list(rng.integers(*I32, 200, endpoint=True)), np.int64)
    b = np.array([2**31 - 1, 2**30, 1, -(2**31), 1 << 29, 1518500250, *rng.integers(0, 2**31, 20)], np.int64)
    A, B = np.meshgrid(a, b, indexing="ij")
    got = qm.saturating_rounding_doubling_high_mul(A, B)
    want = np.array([[srdhm(int(x), int(y)) for y in b] for x in a])
    assert np.array_equal(got, want)
    for e in range(32):
        assert np.array_equal(qm.rounding_divide_by_pot(a, e), [rdbpot(int(x), e) for x in a]), e


@pytest.mark.parametrize("single", [False, True])
def test_fixed_point_multiplier_equals_the_transcription(single: bool) -> None:
    form = "single_rounding" if single else "double_rounding"
    ms = np.array([*EDGE_M, *(2.0**k for k in range(-35, 1))], np.float64)
    q, s = qm.quantize_multiplier(ms, form)
    want = [qmul(float(m), single) for m in ms]
    assert [(int(a), int(b)) for a, b in zip(q, s)] == want
    xs = np.array(EDGE_X, np.int64)
    for (qq, ss), m in zip(want, ms):
        got, bad = qm.multiply_by_quantized_multiplier(xs, qq, ss, form)
        exp = []
        for x in xs:
            x = int(x)
            if not single and not I32[0] <= x * (1 << max(ss, 0)) <= I32[1]:
                exp.append(None)
                continue
            exp.append(mbqm(x, qq, ss, single))
        ok = np.array([e is not None for e in exp])
        assert np.array_equal(bad[ok], np.zeros(ok.sum(), bool)) or single, m
        assert np.array_equal(got[ok], [e for e in exp if e is not None]), m


def _py_acc(a, b, za, zb, overflow, pairs=False):
    M, K = a.shape
    N = b.shape[1]
    za = np.broadcast_to(np.asarray(za).reshape(-1, 1) if np.ndim(za) else za, (M, 1))
    zb = np.broadcast_to(zb, (N,))
    out = np.zeros((M, N), object)
    for i in range(M):
        for j in range(N):
            if pairs:
                s = 0
                for k in range(0, K, 2):
                    p = int(a[i, k]) * int(b[k, j]) + (int(a[i, k + 1]) * int(b[k + 1, j]) if k + 1 < K else 0)
                    s += max(-32768, min(32767, p))
                s += -int(zb[j]) * int(a[i].astype(int).sum()) - int(za[i, 0]) * int(b[:, j].astype(int).sum()) \
                    + K * int(za[i, 0]) * int(zb[j])
            else:
                s = 0
                for k in range(K):
                    s += (int(a[i, k]) - int(za[i, 0])) * (int(b[k, j]) - int(zb[j]))
                    if overflow == "saturate":
                        s = max(I32[0], min(I32[1], s))
            if overflow == "wrap":
                s = (s + 2**31) % 2**32 - 2**31
            out[i, j] = s
    return out


@pytest.mark.parametrize("overflow", ["wrap", "saturate", "exact"])
def test_accumulator_equals_python_ints(overflow: str) -> None:
    rng = np.random.default_rng(7)
    for M, K, N in ((3, 1, 2), (2, 7, 3), (4, 20000, 2)):
        a = np.where(rng.random((M, K)) < 0.7, 0, rng.integers(0, 256, (M, K))).astype(np.uint8)
        b = np.where(rng.random((K, N)) < 0.7, -128, rng.integers(-128, 128, (K, N))).astype(np.int8)
        za, zb = 255, rng.integers(-128, 128, N).astype(np.int8)
        if K > 100 and overflow == "saturate":
            continue
        acc, bad = qm.int_accumulate(a, b, za, zb, accumulation=qm.IntAccumulation(overflow=overflow))
        want = _py_acc(a, b, za, zb, overflow)
        assert np.array_equal(acc.astype(object), want)
        if overflow == "exact":
            assert np.array_equal(bad, (want < I32[0]) | (want > I32[1]))


def test_int16_pair_sums_equal_python_ints() -> None:
    rng = np.random.default_rng(8)
    for K in (1, 2, 7, 64):
        a = np.where(rng.random((5, K)) < 0.5, 255, rng.integers(0, 256, (5, K))).astype(np.uint8)
        b = np.where(rng.random((K, 4)) < 0.5, -128, rng.integers(-128, 128, (K, 4))).astype(np.int8)
        acc, _ = qm.int_accumulate(a, b, 3, -5, accumulation=qm.IntAccumulation(pair_sum="saturating_int16"))
        assert np.array_equal(acc.astype(object), _py_acc(a, b, 3, -5, "wrap", pairs=True))
    acc, _ = qm.int_accumulate(np.full((1, 2), 255, np.uint8), np.full((2, 1), -128, np.int8),
                               accumulation=qm.IntAccumulation(pair_sum="saturating_int16"))
    assert int(acc[0, 0]) == -32768  # 2 x 255 x -128 = -65,280 saturates


def _ort_like(acc, m32, zy, lo, hi):
    v = acc.astype(np.float32) * np.float32(m32)
    return np.clip(np.rint(v).astype(np.int64) + zy, lo, hi)


def _onnx_ref_like(acc, m32, zy, lo, hi):
    d = acc.astype(np.int32) * np.asarray(m32, np.float32)  # numpy 2: int32 * float32 -> float64
    d = d + np.asarray(zy, np.uint8 if lo == 0 else np.int8)
    return np.clip(np.rint(d), lo, hi).astype(np.int64)


def test_float_requantization_against_independent_arithmetic() -> None:
    rng = np.random.default_rng(9)
    acc = np.concatenate([rng.integers(-(2**31), 2**31, 4000), rng.integers(-5000, 5000, 4000),
                          np.arange(-1000, 1000), [2**24 + 1, -(2**24) - 3, 2**31 - 1, -(2**31)]]).reshape(1, -1)
    for a_s, b_s, y_s, zy in ((0.5, 1.0, 1.0, 3), (0.013, 0.027, 0.31, 128), (2.0**-20, 0.7, 3e-5, 0),
                              (1.0, 1.0, 1.0, 255)):
        a_s, b_s, y_s = np.float32(a_s), np.float32(b_s), np.float32(y_s)
        m32 = np.float32(np.float32(a_s * b_s) / y_s)
        n = acc.shape[1]
        bs = np.full(n, b_s, np.float32)
        got = qm.requantize_accumulator(acc, a_scale=a_s, b_scale=bs, y_scale=y_s, y_zero_point=zy, output="uint8",
                                        requantization=qm.matmul_rules("onnxruntime").requantization)[0]
        assert np.array_equal(got, _ort_like(acc, m32, zy, 0, 255))
        got = qm.requantize_accumulator(acc, a_scale=a_s, b_scale=bs, y_scale=y_s, y_zero_point=zy, output="uint8",
                                        requantization=qm.matmul_rules("onnx_reference").requantization)[0]
        assert np.array_equal(got, _onnx_ref_like(acc, m32, zy, 0, 255))
        got = qm.requantize_accumulator(acc, a_scale=a_s, b_scale=bs, y_scale=y_s, y_zero_point=zy, output="uint8",
                                        requantization=qm.matmul_rules("exact").requantization)[0]
        mf = Fraction(float(a_s)) * Fraction(float(b_s)) / Fraction(float(y_s))
        want = [min(255, max(0, round(int(x) * mf) + zy)) for x in acc[0]]  # round(): half to even
        assert got[0].tolist() == want


def test_bad_input_is_refused_before_work() -> None:
    a, b = np.zeros((2, 3), np.uint8), np.zeros((3, 4), np.int8)
    with pytest.raises(QrefError, match="outside uint8"):
        qm.int_accumulate(np.full((2, 3), 300), b)
    with pytest.raises(QrefError, match=r"\(K, N\)"):
        qm.int_accumulate(a, np.zeros((4, 4), np.int8))
    with pytest.raises(QrefError, match="one per column"):
        qm.int_accumulate(a, b, 0, np.zeros(3, np.int8))
    with pytest.raises(QrefError, match="float32 values"):
        qm.quantized_matmul(a, b, a_scale=0.1, b_scale=np.float32(1), y_scale=np.float32(1))
    with pytest.raises(QrefError, match="u8 x s8"):
        qm.int_accumulate(a.astype(np.int8), b, a_storage="int8",
                          accumulation=qm.IntAccumulation(pair_sum="saturating_int16"))
    with pytest.raises(QrefError, match="integer array"):
        qm.int_accumulate(a.astype(np.float32), b)


# ---- real backends -------------------------------------------------------------------------------------------
def _edge_operands(rng, M, K, N, ca, cb):
    lo_a, hi_a = qm.STORAGES[ca]
    lo_b, hi_b = qm.STORAGES[cb]
    pa = np.array([lo_a, hi_a, lo_a + 1, hi_a - 1, (lo_a + hi_a) // 2])
    pb = np.array([lo_b, hi_b, lo_b + 1, hi_b - 1, (lo_b + hi_b) // 2])
    a = np.where(rng.random((M, K)) < 0.5, rng.choice(pa, (M, K)), rng.integers(lo_a, hi_a + 1, (M, K)))
    b = np.where(rng.random((K, N)) < 0.5, rng.choice(pb, (K, N)), rng.integers(lo_b, hi_b + 1, (K, N)))
    return a.astype(np.dtype(ca)), b.astype(np.dtype(cb))


def _model(op, feeds, out):
    from onnx import TensorProto, helper

    t = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "float32": TensorProto.FLOAT,
         "int32": TensorProto.INT32}
    vi = [helper.make_tensor_value_info(n, t[v.dtype.name], list(v.shape)) for n, v in feeds.items()]
    M, N = feeds["a"].shape[0], feeds["b"].shape[1]
    g = helper.make_graph([helper.make_node(op, list(feeds), ["y"])], "g", vi,
                          [helper.make_tensor_value_info("y", t[out], [M, N])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_onnxruntime_bit_for_bit_on_a_million_outputs() -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    pytest.importorskip("onnx", reason="onnx is not installed")
    rng = np.random.default_rng(2026)
    total = 0
    combos = (("uint8", "int8", "uint8"), ("uint8", "uint8", "uint8"), ("int8", "int8", "int8"))
    for it in range(18):
        ca, cb, co = combos[it % 3]
        M, K, N = 256, int(rng.integers(1, 80)), 256
        a, b = _edge_operands(rng, M, K, N, ca, cb)
        lo_a, hi_a = qm.STORAGES[ca]
        lo_b, hi_b = qm.STORAGES[cb]
        lo_y, hi_y = qm.STORAGES[co]
        za = np.array(rng.choice([lo_a, hi_a, rng.integers(lo_a, hi_a + 1)]), np.dtype(ca))
        per_col = it % 2 == 0
        zb = (rng.integers(lo_b, hi_b + 1, N) if per_col else np.array(rng.integers(lo_b, hi_b + 1))).astype(cb)
        zy = np.array(rng.integers(lo_y, hi_y + 1), np.dtype(co))
        if it % 3 == 0:  # power-of-two multipliers: exact ties
            a_s, b_s, y_s = np.float32(2.0 ** -int(rng.integers(6, 14))), np.float32(1), np.float32(1)
        else:
            a_s, b_s, y_s = (np.float32(rng.uniform(1e-3, 0.05)), np.float32(rng.uniform(1e-3, 0.05)),
                             np.float32(rng.uniform(0.01, 1)))
        bs = (np.full(N, b_s, np.float32) * rng.uniform(0.5, 2, N).astype(np.float32)).astype(np.float32) \
            if per_col else np.array(b_s, np.float32)
        feeds = {"a": a, "a_scale": np.array(a_s, np.float32), "a_zero_point": za, "b": b, "b_scale": bs,
                 "b_zero_point": zb, "y_scale": np.array(y_s, np.float32), "y_zero_point": zy}
        s = ort.InferenceSession(_model("QLinearMatMul", feeds, co).SerializeToString(),
                                 providers=["CPUExecutionProvider"])
        got = s.run(None, feeds)[0].astype(np.int64)
        pipe = qm.QuantizedMatmul(qm.IntOperand(ca), qm.IntOperand(cb), co, qm.matmul_rules("onnxruntime"))
        want = qm.quantized_matmul(a, b, a_scale=a_s, a_zero_point=za, b_scale=bs, b_zero_point=zb, y_scale=y_s,
                                   y_zero_point=zy, pipeline=pipe).values
        assert np.array_equal(got, want), (it, int((got != want).sum()))
        total += got.size
        if it % 3 == 1:  # MatMulInteger on the same operands (int32 wrap included for the long K)
            f2 = {"a": a, "b": b, "a_zero_point": za, "b_zero_point": zb}
            s2 = ort.InferenceSession(_model("MatMulInteger", f2, "int32").SerializeToString(),
                                      providers=["CPUExecutionProvider"])
            acc, _ = qm.int_accumulate(a, b, za, zb, a_storage=ca, b_storage=cb)
            assert np.array_equal(s2.run(None, f2)[0].astype(np.int64), acc)
            total += acc.size
    # u8 x s8 pairs at 255 x -128 and a wrapping accumulator: no int16 saturation on this CPU's kernel
    a, b = np.full((4, 33100), 255, np.uint8), np.full((33100, 4), -128, np.int8)
    f2 = {"a": a, "b": b, "a_zero_point": np.array(0, np.uint8), "b_zero_point": np.array(127, np.int8)}
    s2 = ort.InferenceSession(_model("MatMulInteger", f2, "int32").SerializeToString(),
                              providers=["CPUExecutionProvider"])
    assert np.array_equal(s2.run(None, f2)[0], qm.int_accumulate(a, b, 0, 127)[0])
    assert total >= 10**6


def test_onnx_reference_evaluator_bit_for_bit() -> None:
    pytest.importorskip("onnx", reason="onnx is not installed")
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(11)
    for it in range(6):
        ca, cb, co = (("uint8", "int8", "uint8"), ("int8", "int8", "int8"))[it % 2]
        a, b = _edge_operands(rng, 32, 40, 48, ca, cb)
        za, zb = np.array(3, ca), np.array(-1 if cb == "int8" else 1, cb)
        zy = np.array(rng.integers(*qm.STORAGES[co]), co)
        bs = np.array(2.0**-7, np.float32) if it < 3 else np.array(0.0137, np.float32)
        feeds = {"a": a, "a_scale": np.array(0.5, np.float32), "a_zero_point": za, "b": b, "b_scale": bs,
                 "b_zero_point": zb, "y_scale": np.array(0.75, np.float32), "y_zero_point": zy}
        got = ReferenceEvaluator(_model("QLinearMatMul", feeds, co)).run(None, feeds)[0].astype(np.int64)
        pipe = qm.QuantizedMatmul(qm.IntOperand(ca), qm.IntOperand(cb), co, qm.matmul_rules("onnx_reference"))
        want = qm.quantized_matmul(a, b, a_scale=np.float32(0.5), a_zero_point=za, b_scale=bs, b_zero_point=zb,
                                   y_scale=np.float32(0.75), y_zero_point=zy, pipeline=pipe).values
        assert np.array_equal(got, want), it


def _tie_heavy_requant_inputs(rng: np.random.Generator, M: int, N: int):
    """Accumulators, float32 scales and biases where acc m often lands on or next to a rounding boundary
    (dyadic multipliers with halves, non-dyadic thirds, huge and tiny products)."""
    acc = np.concatenate([rng.integers(-(2**31), 2**31, M * N // 2), rng.integers(-40, 40, M * N - M * N // 2)])
    rng.shuffle(acc)
    acc = acc.reshape(M, N)
    acc[0, :4] = [2**31 - 1, -(2**31), 0, 1]
    pick = np.float32([0.5, 0.25, 1.0, 3.0, 0.75, 2.0**-31, 2.0**20, 1.0 / 3.0, 0.1, 7.0])
    a = rng.choice(pick, M).astype(np.float32)
    b = rng.choice(pick, N).astype(np.float32)
    y = np.float32(rng.choice(pick))
    bias = rng.choice(np.float32([0.5, -0.5, 1.5, 0.0, 1e-30, 3.0, 2.0**-40]), N).astype(np.float32)
    return acc, a, b, y, bias


def _near_boundary_requant_inputs(rng: np.random.Generator, M: int, N: int):
    """Full-significand scales a, b in [1, 2) and y = Y 2^-40 (Y odd, 24 bits) with accumulators solved so that
    acc a b / y lies within 1 / D of a half-integer or an integer, D = Y 2^6 (m = A B / D): relative distances
    near 2^-79, far below float64's, where only the exact quotient decides (D odd-part inverse mod D)."""
    A = rng.integers(2**23, 2**24, M) | 1
    B = rng.integers(2**23, 2**24, N) | 1
    Y = int(rng.integers(2**23, 2**24)) | 1
    a = (A * 2.0**-23).astype(np.float32)
    b = (B * 2.0**-23).astype(np.float32)
    y = np.float32(Y * 2.0**-40)  # m = A B 2^-46 / (Y 2^-40) = A B / (Y 2^6)
    D = Y * 2**6
    acc = np.zeros((M, N), dtype=np.int64)
    for i in range(M):
        for j in range(N):
            P = int(A[i]) * int(B[j])
            want = (D // 2 + 1, D // 2 - 1, 1, D - 1)[(i + j) % 4]  # next to a half-integer, an integer
            k = want * pow(P, -1, D) % D  # k P = want (mod D): t = k P / D = integer + want / D
            acc[i, j] = k if (i * N + j) % 3 else -k
    return acc, a, b, y


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "nearest_up", "toward_zero"])
def test_exact_requantization_fast_path_equals_round_quotient(rounding: str) -> None:
    """requantize_accumulator's exact compute takes the float64 product where it provably rounds the same and
    the exact quotient elsewhere (_round_real); the definition is round_quotient of the exact rationals on the
    whole array (matmul.md §5.2). Also the float_bias 'exact' stage, against Fractions."""
    rng = np.random.default_rng(21)
    lo, hi = -(1 << 50), 1 << 50  # _round_real's saturation (the callers clip to 2^40)
    for trial in range(8):
        acc, a, b, y, bias = _tie_heavy_requant_inputs(rng, 12, 96)
        if trial >= 6:  # within 2^-79 (relative) of a boundary: the error margin decides
            acc, a, b, y = _near_boundary_requant_inputs(rng, 8, 64)
        for mdt in ("exact", "float32", "float64"):
            req = qm.Requantization(compute="exact", multiplier_dtype=mdt, rounding=rounding)
            got = qm._exact_product(acc, a, b, y, req)
            if mdt == "exact":
                num, den = qm.exact_multiplier(a, b, y)
            else:
                mn, me = qm._dyadic_parts(qm.output_multiplier(a, b, y, req))
                num, den = qm._scaled(mn, np.ones(me.shape, dtype=np.int64), me)
            want = qm.round_quotient(qm._obj(acc) * num, qm._obj(np.broadcast_to(den, acc.shape)), rounding)
            assert np.array_equal(got, np.clip(want, lo, hi).astype(np.int64)), (trial, mdt)
            full = qm.requantize_accumulator(acc, a_scale=a, b_scale=b, y_scale=y, y_zero_point=3, output="int16",
                                             requantization=req)[0]
            assert np.array_equal(full, np.clip(got + 3, -(2**15), 2**15 - 1)), (trial, mdt)
        if trial < 2:  # the biased stage: Fractions per element (slow: a few hundred)
            req = qm.Requantization(compute="exact", multiplier_dtype="exact", rounding=rounding)
            got = qm._exact_with_bias(acc[:3], a[:3], b, y, bias, req)
            for i in range(3):
                for j in range(acc.shape[1]):
                    t = (int(acc[i, j]) * Fraction(float(a[i])) * Fraction(float(b[j])) + Fraction(float(bias[j]))
                         ) / Fraction(float(y))
                    fl = math.floor(t)
                    r = t - fl
                    if rounding == "toward_zero":
                        n = fl + (1 if (r and t < 0) else 0)
                    elif r != Fraction(1, 2):
                        n = fl + (1 if r > Fraction(1, 2) else 0)
                    else:
                        n = fl + {"nearest_even": fl % 2, "nearest_away": int(t >= 0), "nearest_up": 1}[rounding]
                    assert int(got[i, j]) == min(max(n, lo), hi), (i, j, t)
