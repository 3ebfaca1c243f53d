"""ONNX Runtime's com.microsoft quantized matrix products (matmul.md §8-§10): MatMulIntegerToFloat and
DynamicQuantizeMatMul bit for bit, MatMulNBits (4-bit blockwise weights, accuracy_level 0 / 1 / 4) within the
rigorous bound of §10.3. Expected values come from independent numpy transcriptions of the formulas and from
exact (Fraction) arithmetic; >= 10^6 outputs are compared against the real onnxruntime."""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest

from qref.errors import QrefError
from qref.profiles.matmul import NBitsCompute
from qref.recipes import qmatmul as qm

ort = pytest.importorskip("onnxruntime")
helper = pytest.importorskip("onnx.helper")
from onnx import TensorProto as T  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

F = np.float32
U = 2.0**-24
OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
ONNX_T = {"uint8": T.UINT8, "int8": T.INT8, "float32": T.FLOAT}
COUNT: dict[str, int] = {}


def _session(nodes, inputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=OPSETS)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


# ---- independent transcriptions (numpy float32 arithmetic, as matmul.md §8 / §9 write them) ---------------------
def ref_float_output(a, b, za, zb, sa, sb, bias):
    acc = (a.astype(np.int64) - np.int64(za)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))
    m = (F(sa) * np.asarray(sb, F)).astype(F)  # one multiplier per column (or per tensor)
    y = (acc.astype(F) * m).astype(F)
    return y if bias is None else (y + bias).astype(F)


def ref_dynamic(x):
    lo, hi = min(F(x.min()), F(0)), max(F(x.max()), F(0))
    s = F(1) if hi == lo else F(F(hi - lo) / F(255))
    z = int(np.rint(np.clip(F(F(0) - F(lo / s)), 0, 255)))
    q = np.rint(np.clip((x / s).astype(F), F(-z), F(255 - z))).astype(np.int64) + z
    return q, s, z


def ref_bits(y):
    return np.asarray(y, F).view(np.uint32)


# ---- qref against the transcriptions and exact arithmetic ---------------------------------------------------------
def test_float_output_equals_the_transcription_and_exact_is_one_rounding() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (40, 300)).astype(np.uint8)
    b = rng.integers(-128, 128, (300, 24)).astype(np.int8)
    sb = rng.uniform(1e-4, 1e-2, 24).astype(F)
    zb = rng.integers(-128, 128, 24).astype(np.int8)
    bias = rng.standard_normal(24).astype(F)
    r = qm.matmul_integer_to_float(a, b, a_scale=F(0.0173), b_scale=sb, a_zero_point=200, b_zero_point=zb,
                                   bias=bias, profile="onnxruntime")
    assert np.array_equal(ref_bits(r.values), ref_bits(ref_float_output(a, b, 200, zb, F(0.0173), sb, bias)))
    e = qm.matmul_integer_to_float(a[:4], b, a_scale=F(0.0173), b_scale=sb, a_zero_point=200, b_zero_point=zb,
                                   bias=bias, profile="exact")
    acc = (a[:4].astype(np.int64) - 200) @ (b.astype(np.int64) - zb.astype(np.int64))
    for i in range(4):
        for j in range(24):
            v = Fraction(int(acc[i, j])) * Fraction(float(F(0.0173))) * Fraction(float(sb[j])) \
                + Fraction(float(bias[j]))
            y = e.values[i, j]
            up, down = np.nextafter(y, F(np.inf)), np.nextafter(y, F(-np.inf))
            err = abs(Fraction(float(y)) - v)  # one rounding: no float32 is nearer to the exact value
            assert err <= abs(Fraction(float(up)) - v) and err <= abs(Fraction(float(down)) - v)


def test_conversion_ties_round_to_even() -> None:
    # odd accumulators in (2^24, 2^25) are ties of the float32 conversion: nearest even
    acc = np.array([[2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**25 + 2, 2**25 + 6, 2**24 - 1]], np.int64)
    want = [2**24, 2**24 + 4, -(2**24), 2**25, 2**25 + 8, 2**24 - 1]
    assert qm.float_output(acc, a_scale=F(1), b_scale=F(1))[0].tolist() == want
    # through the operation: K = 259 products of (0 - 255)(-128 - 127) = 65,025: acc = 16,841,475, a tie between
    # 16,841,474 (= 2 x odd) and 16,841,476 (= 4 x 4,210,369: the even significand)
    a = np.zeros((1, 260), np.uint8)
    a[0, 259] = 255
    b = np.full((260, 1), -128, np.int8)
    b[259] = 126
    r = qm.matmul_integer_to_float(a, b, a_scale=F(1), b_scale=F(1), a_zero_point=255, b_zero_point=127,
                                   profile="onnxruntime")
    assert int(r.accumulator[0, 0]) == 16_841_475 and float(r.values[0, 0]) == 16_841_476


def test_dynamic_quantization_formula_and_ties() -> None:
    rng = np.random.default_rng(2)
    for _ in range(200):
        x = (rng.standard_normal((7, 33)) * rng.uniform(1e-3, 1e3) + rng.uniform(-3, 3)).astype(F)
        q, s, z = qm.dynamic_quantize_uint8(x)
        rq, rs, rz = ref_dynamic(x)
        assert (float(s), z) == (float(rs), rz) and np.array_equal(q.astype(np.int64), rq)
    # s = 2^-4 exactly (max - min = 255 / 16): x / s = k + 1/2 rounds to even; -min / s = 100.5 -> zero point 100
    x = np.array([-100.5, 154.5, 0.5, 1.5, 2.5, -0.5], np.float64) / 16
    q, s, z = qm.dynamic_quantize_uint8(x.astype(F))
    assert float(s) == 2.0**-4 and z == 100
    assert q.tolist() == [0, 254, 100, 102, 102, 100]  # 154.5 -> 154 (even) + 100
    q, s, z = qm.dynamic_quantize_uint8(np.zeros((2, 3), F))
    assert (float(s), z, int(q.max())) == (1.0, 0, 0)
    with pytest.raises(QrefError):
        qm.dynamic_quantize_uint8(np.array([1.0, np.nan], F))
    with pytest.raises(QrefError):
        qm.dynamic_quantize_uint8(np.array([1.0], np.float64))


def test_int8_blocks_of_a() -> None:
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((5, 77)) * 3).astype(F)
    a[1, :32] = 0
    codes, scales = qm.quantize_a_int8_blocks(a, 32)
    assert codes.shape == (5, 3, 32) and scales.shape == (5, 3)
    for m in range(5):
        for blk in range(3):
            v = a[m, 32 * blk:32 * blk + 32]
            amax = F(np.abs(v).max())
            if amax == 0:
                assert scales[m, blk] == 0 and not codes[m, blk].any()
                continue
            assert scales[m, blk] == F(amax / F(127))
            want = [int(np.rint(F(float(t) * float(F(F(127) / amax))))) for t in v]  # float32 products
            assert codes[m, blk, :v.size].tolist() == want


def _nbits_exact(a, q, s, z, block, compute):
    """S with Fractions (small problems)."""
    M, K = a.shape
    N = q.shape[0]
    zz = np.full(s.shape, 8) if z is None else z
    out = np.empty((M, N), object)
    if compute == "int8_blocks":
        codes, sc = qm.quantize_a_int8_blocks(a, block)
    for m in range(M):
        for n in range(N):
            t = Fraction(0)
            for k in range(K):
                bk = (int(q[n, k]) - int(zz[n, k // block])) * Fraction(float(s[n, k // block]))
                ak = Fraction(float(a[m, k])) if compute == "float32_dequantize" else \
                    int(codes[m, k // block, k % block]) * Fraction(float(sc[m, k // block]))
                t += ak * bk
            out[m, n] = t
    return out


@pytest.mark.parametrize("compute", ["float32_dequantize", "int8_blocks"])
def test_nbits_exact_result_and_bound(compute: str) -> None:
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((3, 45)) * 2).astype(F)
    q = rng.integers(0, 16, (5, 45))
    s = rng.uniform(0.01, 0.1, (5, 3)).astype(F)
    z = rng.integers(0, 16, (5, 3))
    r = qm.matmul_nbits(a, q, s, z, block_size=16, nbits=NBitsCompute(compute))
    S = _nbits_exact(a, q, s, z, 16, compute)
    assert all(Fraction(x) == y for x, y in zip(r.exact.to_fractions().reshape(-1), S.reshape(-1)))
    ex = np.array([float(v) for v in S.reshape(-1)]).reshape(S.shape)
    assert np.all(r.lo <= ex + np.abs(ex) * 1e-15) and np.all(ex - np.abs(ex) * 1e-15 <= r.hi)
    # the bound rejects an all-zero output: 0 lies outside [lo, hi] wherever |S| is not tiny
    assert np.mean((r.lo > 0) | (r.hi < 0)) > 0.9


def test_nbits_bad_input() -> None:
    a = np.ones((2, 20), F)
    with pytest.raises(QrefError):
        qm.matmul_nbits(a, np.full((3, 20), 16), np.ones((3, 2), F), block_size=16)
    with pytest.raises(QrefError):
        qm.matmul_nbits(a, np.zeros((3, 20), np.uint8), np.ones((3, 1), F), block_size=16)
    with pytest.raises(QrefError):
        qm.matmul_nbits(a, np.zeros((3, 20), np.uint8), np.ones((3, 2), F), block_size=24)


# ---- against onnxruntime ----------------------------------------------------------------------------------------
def _mitf_session(at: str, bt: str, bias: bool):
    names = ["a", "b", "sa", "sb", "za", "zb"] + (["bias"] if bias else [])
    types = [at, bt, "float32", "float32", at, bt] + (["float32"] if bias else [])
    vi = [helper.make_tensor_value_info(n, ONNX_T[t], None) for n, t in zip(names, types)]
    return _session([helper.make_node("MatMulIntegerToFloat", names, ["y"], domain="com.microsoft")], vi)


RANGES = {"uint8": (0, 256), "int8": (-128, 128)}


@pytest.mark.parametrize("at,bt", [("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8")])
def test_matmul_integer_to_float_bit_for_bit(at: str, bt: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{at}{bt}".encode()))
    total = 0
    for trial in range(10):
        M, K, N = int(rng.integers(1, 160)), int(rng.integers(1, 1200)), int(rng.integers(1, 200))
        a = rng.integers(*RANGES[at], (M, K)).astype(at)
        b = rng.integers(*RANGES[bt], (K, N)).astype(bt)
        if trial == 0:  # large accumulators: storage ends against zero points at the other end
            a[:] = RANGES[at][0]
            b[:] = RANGES[bt][0]
        per_col = trial % 2 == 0
        za = np.array(RANGES[at][1] - 1 if trial == 0 else rng.integers(*RANGES[at]), at)
        zb = (rng.integers(*RANGES[bt], N) if per_col else np.array(rng.integers(*RANGES[bt]))).astype(bt)
        if trial == 0:
            zb[...] = RANGES[bt][1] - 1
        sa = F(rng.uniform(1e-3, 1))
        sb = (rng.uniform(1e-4, 1e-1, N) if per_col else np.array(rng.uniform(1e-4, 1e-1))).astype(F)
        bias = rng.standard_normal(N).astype(F) * 100 if trial % 3 else None
        feeds = {"a": a, "b": b, "sa": np.array(sa), "sb": sb, "za": za, "zb": zb}
        if bias is not None:
            feeds["bias"] = bias
        y = _mitf_session(at, bt, bias is not None).run(None, feeds)[0]
        want = ref_float_output(a, b, za, zb, sa, sb, bias)
        got_q = qm.matmul_integer_to_float(a, b, a_scale=sa, b_scale=sb, a_zero_point=za, b_zero_point=zb, bias=bias,
                                           a_storage=at, b_storage=bt, profile="onnxruntime").values
        assert np.array_equal(ref_bits(y), ref_bits(want)), (trial, M, K, N)
        assert np.array_equal(ref_bits(got_q), ref_bits(want)), (trial, M, K, N)
        total += y.size
    COUNT[f"mitf_{at}{bt}"] = total


def _dq_session(bt: str, bias: bool):
    names = ["a", "b", "sb", "zb"] + (["bias"] if bias else [])
    types = ["float32", bt, "float32", bt] + (["float32"] if bias else [])
    vi = [helper.make_tensor_value_info(n, ONNX_T[t], None) for n, t in zip(names, types)]
    return _session([helper.make_node("DynamicQuantizeMatMul", names, ["y"], domain="com.microsoft")], vi)


@pytest.mark.parametrize("bt", ["int8", "uint8"])
def test_dynamic_quantize_matmul_bit_for_bit(bt: str) -> None:
    rng = np.random.default_rng(7 if bt == "int8" else 8)
    total = 0
    for trial in range(24):
        M, K, N = int(rng.integers(1, 200)), int(rng.integers(1, 400)), int(rng.integers(1, 200))
        x = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-3, 3) + rng.uniform(-2, 2)).astype(F)
        if trial % 6 == 1:
            x = np.abs(x)
        if trial % 6 == 2:
            x = -np.abs(x)
        if trial % 6 == 3:  # s = 2^-4: every element a tie of x / s
            k = rng.integers(0, 255, (M, K))
            x = ((k - 127 + 0.5) / 16).astype(F)
            x.reshape(-1)[:2] = (-127 / 16, 128 / 16)
        if trial == 4:
            x[:] = 0
        b = rng.integers(*RANGES[bt], (K, N)).astype(bt)
        zb = np.array(rng.integers(*RANGES[bt]), bt)
        sb = np.array(rng.uniform(1e-3, 1e-1), F)
        bias = rng.standard_normal(N).astype(F) if trial % 2 else None
        feeds = {"a": x, "b": b, "sb": sb, "zb": zb}
        if bias is not None:
            feeds["bias"] = bias
        y = _dq_session(bt, bias is not None).run(None, feeds)[0]
        q, s, z = ref_dynamic(x)
        want = ref_float_output(q, b, z, zb, s, sb, bias)
        got_q = qm.dynamic_quantize_matmul(x, b, b_scale=sb, b_zero_point=zb, bias=bias, b_storage=bt,
                                           profile="onnxruntime").values
        assert np.array_equal(ref_bits(y), ref_bits(want)), (trial, M, K, N)
        assert np.array_equal(ref_bits(got_q), ref_bits(want)), (trial, M, K, N)
        total += y.size
    COUNT[f"dq_{bt}"] = total


def _pack(q, z, block):
    N, K = q.shape
    nb = -(-K // block)
    qp = np.zeros((N, nb * block), np.uint8)
    qp[:, :K] = q
    qp = qp.reshape(N, nb, block)
    b = (qp[..., 0::2] | (qp[..., 1::2] << 4)).astype(np.uint8)
    if z is None:
        return b, None
    zz = np.zeros((N, nb + nb % 2), np.uint8)
    zz[:, :nb] = z
    return b, (zz[:, 0::2] | (zz[:, 1::2] << 4)).astype(np.uint8).reshape(-1)


def _nbits_session(K, N, block, level, q, s, z):
    b, zp = _pack(q, z, block)
    inits = [nh.from_array(b, "b"), nh.from_array(s.reshape(-1), "s")] + ([nh.from_array(zp, "z")] if z is not None
                                                                          else [])
    node = helper.make_node("MatMulNBits", ["a", "b", "s"] + (["z"] if z is not None else []), ["y"],
                            domain="com.microsoft", K=K, N=N, bits=4, block_size=block, accuracy_level=level)
    return _session([node], [helper.make_tensor_value_info("a", T.FLOAT, None)], inits)


def _independent_bound(a, q, s, z, block, level):
    """(S, bound) in float64 from independent code: S's float64 error (<= K 2^-53 of the magnitude) is added."""
    K = q.shape[1]
    zz = np.full(s.shape, 8) if z is None else z.astype(np.int64)
    blk = np.arange(K) // block
    d = q.astype(np.int64) - zz[:, blk]
    if level in (0, 1):
        B = d * s[:, blk].astype(np.float64)
        S = a.astype(np.float64) @ B.T
        mag = np.abs(a.astype(np.float64)) @ np.abs(B.T)
        c = K + 3
    else:
        M = a.shape[0]
        nb = s.shape[1]
        ap = np.zeros((M, nb * block), F)
        ap[:, :K] = a
        amax = np.abs(ap.reshape(M, nb, block)).max(-1).astype(F)
        with np.errstate(divide="ignore"):
            r = np.where(amax > 0, F(127) / np.where(amax > 0, amax, 1), 0).astype(F)
        sa = np.where(amax > 0, amax / F(127), 0).astype(F)
        qa = np.rint((ap.reshape(M, nb, block) * r[..., None]).astype(F)).reshape(M, -1)[:, :K]
        A = qa * sa[:, blk].astype(np.float64)
        B = d * s[:, blk].astype(np.float64)
        S = A @ B.T
        mag = (np.abs(qa) * sa[:, blk]) @ ((np.abs(q) + zz[:, blk]) * s[:, blk]).T
        c = 2 * nb + 6
    return S, mag * (c * U * 1.01) + np.abs(mag) * K * 2.0**-52


@pytest.mark.parametrize("level", [0, 1, 4])
def test_matmul_nbits_within_the_bound(level: int) -> None:
    rng = np.random.default_rng(10 + level)
    total = 0
    for block in (16, 32, 64, 128):
        for use_z in (True, False):
            for M in (1, 96):
                K = int(rng.integers(block, 5 * block)) | 1  # odd: never a multiple of the block
                N = 400
                nb = -(-K // block)
                a = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-2, 2)).astype(F)
                q = rng.integers(0, 16, (N, K)).astype(np.uint8)
                s = (rng.uniform(0.5, 2, (N, nb)) * 2.0**-5).astype(F)
                z = rng.integers(0, 16, (N, nb)).astype(np.uint8) if use_z else None
                y = _nbits_session(K, N, block, level, q, s, z).run(None, {"a": a})[0].astype(np.float64)
                S, bound = _independent_bound(a, q, s, z, block, level)
                assert np.all(np.abs(y - S) <= bound), (block, use_z, M, float(np.max(np.abs(y - S) / bound)))
                assert np.mean(np.abs(S) > bound) > 0.9  # the bound would reject an all-zero output
                if M == 1:  # qref's own interval (exact S, Dyadic) on the GEMV problems
                    r = qm.matmul_nbits(a, q, s, z, block_size=block, nbits=NBitsCompute(
                        "float32_dequantize" if level < 4 else "int8_blocks"))
                    assert np.all((r.lo <= y) & (y <= r.hi))
                total += y.size
    COUNT[f"nbits_l{level}"] = total


def _qgemm_session(at: str, bt: str, ot: str, alpha: float, has_c: bool):
    names = ["a", "sa", "za", "b", "sb", "zb"] + (["c"] if has_c else [""]) + (["sy", "zy"] if ot != "float32" else [])
    types = [at, "float32", at, bt, "float32", bt, None, "float32", ot]
    vi = [helper.make_tensor_value_info(n, T.INT32 if n == "c" else ONNX_T[t], None) for n, t in zip(names, types)
          if n]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("QGemm", names, ["y"], domain="com.microsoft", alpha=alpha)
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", ONNX_T[ot], None)])
    return ort.InferenceSession(helper.make_model(g, opset_imports=OPSETS).SerializeToString(),
                                providers=["CPUExecutionProvider"])


def ref_qgemm_requant(acc, m, zy, lo, hi):
    """MlasRequantizeOutput (matmul.md §6.1): fl32(fl32(acc) * m), clamp to [lo - zy, hi - zy], nearest even, + zy."""
    v = (acc.astype(F) * m).astype(F)
    return np.rint(np.clip(v, F(lo - zy), F(hi - zy))).astype(np.int64) + zy


QGEMM_COMBOS = [("uint8", "int8", "float32"), ("int8", "int8", "float32"), ("uint8", "int8", "uint8"),
                ("uint8", "uint8", "uint8"), ("int8", "int8", "int8")]


@pytest.mark.parametrize("at,bt,ot", QGEMM_COMBOS)
def test_qgemm_bit_for_bit(at: str, bt: str, ot: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{at}{bt}{ot}".encode()))
    total = 0
    for trial in range(8):
        M, K, N = int(rng.integers(1, 128)), int(rng.integers(1, 600)), int(rng.integers(1, 128))
        a = rng.integers(*RANGES[at], (M, K)).astype(at)
        b = rng.integers(*RANGES[bt], (K, N)).astype(bt)
        pc = trial % 2 == 0
        za = np.array(rng.integers(*RANGES[at]), at)
        zb = (rng.integers(*RANGES[bt], N) if pc else np.array(rng.integers(*RANGES[bt]))).astype(bt)
        sa = np.array(rng.uniform(0.01, 0.1), F)
        sb = (rng.uniform(0.01, 0.1, N) if pc else np.array(rng.uniform(0.01, 0.1))).astype(F)
        alpha = (1.0, 0.5, 2.0, 0.25)[trial % 4]
        c = rng.integers(-(10**5), 10**5, N).astype(np.int32) if trial % 3 else None
        feeds = {"a": a, "sa": sa, "za": za, "b": b, "sb": sb, "zb": zb}
        if c is not None:
            feeds["c"] = c
        acc = (a.astype(np.int64) - np.int64(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
        if c is not None:
            acc = acc + c
        m = ((F(alpha) * sa) * sb).astype(F)  # ComputeOutputScale: alpha * a_scale * b_scale[i] (/ y_scale)
        if ot == "float32":
            want = (acc.astype(F) * m).astype(F)
            sy = zy = None
        else:
            sy, zy = np.array(rng.uniform(1, 50), F), np.array(rng.integers(*RANGES[ot]), ot)
            feeds.update(sy=sy, zy=zy)
            want = ref_qgemm_requant(acc, (m / sy).astype(F), int(zy), RANGES[ot][0], RANGES[ot][1] - 1)
        y = _qgemm_session(at, bt, ot, alpha, c is not None).run(None, feeds)[0]
        r = qm.qgemm(a, b, a_scale=sa, b_scale=sb, a_zero_point=za, b_zero_point=zb, c=c, y_scale=sy,
                     y_zero_point=0 if zy is None else zy, alpha=alpha, a_storage=at, b_storage=bt, output=ot,
                     profile="onnxruntime")
        if ot == "float32":
            assert np.array_equal(ref_bits(y), ref_bits(want)) and np.array_equal(ref_bits(r.values), ref_bits(want))
        else:
            assert np.array_equal(y.astype(np.int64), want) and np.array_equal(r.values, want), trial
        total += y.size
    COUNT[f"qgemm_{at}{bt}{ot}"] = total


def test_int8_blocks_leave_the_float32_bound() -> None:
    """accuracy_level 4 is not a float32 computation: its results leave the float32_dequantize bound (so the two
    bounds tell the modes apart), and stay within the int8_blocks bound."""
    rng = np.random.default_rng(20)
    K, N, block = 200, 64, 32
    a = rng.standard_normal((8, K)).astype(F)
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    s = (rng.uniform(0.5, 2, (N, 7)) * 2.0**-5).astype(F)
    y = _nbits_session(K, N, block, 4, q, s, None).run(None, {"a": a})[0].astype(np.float64)
    S0, b0 = _independent_bound(a, q, s, None, block, 0)
    S4, b4 = _independent_bound(a, q, s, None, block, 4)
    assert np.mean(np.abs(y - S0) > b0) > 0.5 and np.all(np.abs(y - S4) <= b4)


def test_harness_targets_pass_on_the_suite_cases() -> None:
    """The onnxruntime targets of matmul.md §8-§10 run the suite's cases (built in memory) and pass; an all-zero
    backend output fails the matmul_nbits cases."""
    import dataclasses

    from qref.conformance.cases.matmul import build_bnb4_cases, build_float_cases, build_qgemm_cases
    from qref.harness import runner
    from qref.harness.adapters import onnxruntime as ad

    cases = [*build_float_cases(), *build_qgemm_cases(), *build_bnb4_cases()]
    targets = {t.name: t for t in ad.ms_matmul_targets()}
    assert set(targets) == {"onnxruntime.matmul_integer_to_float", "onnxruntime.dynamic_quantize_matmul",
                            "onnxruntime.qgemm", "onnxruntime.matmul_nbits.l0", "onnxruntime.matmul_nbits.l1",
                            "onnxruntime.matmul_nbits.l4", "onnxruntime.matmul_bnb4"}
    for tg in targets.values():
        res = runner.run_target(tg, runner.select_tasks(tg, cases))
        assert res and all(r.status == "pass" for r in res), (tg.name, [r.status for r in res])

    def zeros(cs):
        return [{"y": np.zeros_like(c.expected["y"])} for c in cs]

    tg = dataclasses.replace(targets["onnxruntime.matmul_nbits.l0"], run=zeros)
    res = runner.run_target(tg, runner.select_tasks(tg, cases))
    assert all(r.status == "fail" for r in res)


def test_reproducer_snippets_are_standalone() -> None:
    """Each target's snippet (numpy + onnxruntime only) prints the element's bits: equal to the case's expected
    value (bit-defined operations) or within [y_lo, y_hi] (matmul_nbits)."""
    import subprocess
    import sys

    from qref.conformance.cases.matmul import build_bnb4_cases, build_float_cases, build_qgemm_cases
    from qref.harness.adapters import onnxruntime as ad

    cases = [c for c in [*build_float_cases(), *build_qgemm_cases(), *build_bnb4_cases()]
             if "onnxruntime" in c.profiles]
    for tg in ad.ms_matmul_targets():
        mine = [c for c in cases if c.operation in tg.operations]
        picks = mine[:1] + [c for c in mine if c.params.get("output") not in ("float32", None)][:1]
        for c in picks:
            i = c.expected["y"].size // 2 + 1
            code = tg.snippet(c, i)
            assert "qref" not in code
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            got = int(out.stdout.strip().splitlines()[-1], 16)
            y = c.expected["y"].reshape(-1)
            if y.dtype.kind == "f":
                g = np.array([got], np.uint32).view(F)[0]
                if "y_lo" in c.expected:
                    assert c.expected["y_lo"].reshape(-1)[i] <= g <= c.expected["y_hi"].reshape(-1)[i], c.id
                else:
                    assert got == int(y.view(np.uint32)[i]), c.id
            else:
                assert got == int(y.astype(np.int64)[i]) & 0xFF, c.id


def test_matmul_bnb4_within_the_bound() -> None:
    """MatMulBnb4 (matmul.md §12): NF4 and FP4, blocks over the flattened weight straddling rows; ORT within the
    bound of qref's exact result, and within an independent float64 bound; the bound rejects an all-zero output."""
    from qref.tables import get_table

    rng = np.random.default_rng(30)
    total = 0
    for qt, tname, code in (("nf4", "nf4", 1), ("fp4", "fp4_bnb", 0)):
        table = np.asarray(get_table(tname).values, F).astype(np.float64)
        for block in (16, 64, 256):
            for M in (1, 33):
                K, N = int(rng.integers(block // 2, 3 * block)) | 1, 301
                q = rng.integers(0, 16, (N, K)).astype(np.uint8)
                nblk = -(-(N * K) // block)
                am = rng.uniform(0.1, 3, nblk).astype(F)
                a = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-2, 2)).astype(F)
                flat = np.concatenate([q.reshape(-1), np.zeros((N * K) % 2, np.uint8)])
                packed = ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8)
                node = helper.make_node("MatMulBnb4", ["a", "b", "absmax"], ["y"], domain="com.microsoft", K=K, N=N,
                                        block_size=block, quant_type=code)
                s = _session([node], [helper.make_tensor_value_info("a", T.FLOAT, None)],
                             [nh.from_array(packed, "b"), nh.from_array(am, "absmax")])
                y = s.run(None, {"a": a})[0].astype(np.float64)
                B = table[q.astype(np.int64)] * am.astype(np.float64)[np.arange(N * K) // block].reshape(N, K)
                S = a.astype(np.float64) @ B.T
                mag = np.abs(a.astype(np.float64)) @ np.abs(B.T)
                bound = mag * ((K + 3) * U * 1.01) + mag * K * 2.0**-52
                assert np.all(np.abs(y - S) <= bound), (qt, block, M)
                assert np.mean(np.abs(S) > bound) > 0.9
                if M == 1:
                    r = qm.matmul_bnb4(a, q, am, block_size=block, quant_type=qt)
                    assert np.all((r.lo <= y) & (y <= r.hi))
                total += y.size
    COUNT["bnb4"] = total

def test_outputs_compared_against_onnxruntime() -> None:
    """>= 10^6 outputs across the operations above (run in this module's order)."""
    if len(COUNT) < 14:
        pytest.skip("run with the whole module")
    print(COUNT, sum(COUNT.values()))
    assert sum(COUNT.values()) >= 10**6, COUNT

