"""LiteRT's dynamic-range (hybrid) FULLY_CONNECTED and int16 BATCH_MATMUL, bit for bit (matmul.md §17, §6.6).

FULLY_CONNECTED takes a float32 input, int8 weights (per tensor or per output channel, zero point 0), an optional
float32 bias and gives float32; the interpreter quantizes every input row on the fly. The expected values come
from the transcriptions below (numpy float32 / float64 and int64 steps, written from the kernels' observed
behaviour, independent of qref.recipes.qmatmul), compared with the interpreter as uint32 bits, then qref's
profiles are compared with the interpreter on the same problems:

- BUILTIN_REF and BUILTIN_WITHOUT_DEFAULT_DELEGATES, asymmetric_quantize_inputs false: s = fl32(R / 127),
  v = fl32(x * fl32(127 / R)); the first 8 floor(K / 8) elements of a row round as trunc(fl32(v + copysign(1/2,
  v))), the rest half away; the first 16 floor(K / 16) products are |q| int8(sign(q) w) (w = -128 with q < 0
  gives 128 q), the rest exact; y = fl32(fl32(fl32(acc) * fl32(s * w_s)) + bias);
- the same with asymmetric_quantize_inputs true: r = fl32(hi - lo), zero point in float64 from r / 255, s =
  fl32(r / 255), q = round(fl32(x * fl32(1 / s))) + z;
- AUTO (XNNPACK, either flag): c = fl32(255 / r), zero point in float32, q = rint(fl32(x c)) + z, y =
  fma(fl32(fl32(acc) * fl32(1 / c)), w_s, bias).

Inputs are tie-heavy: every row holds values at x = R (j + 1/2) / 127 and their float32 neighbours, zeros,
all-zero rows and 0.49999997 (which the vector loop rounds to 1 and std::round to 0) at every position.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert)")
pytest.importorskip("flatbuffers", reason="flatbuffer builder")

from qref.harness.adapters import litert as LA
from qref.recipes.qmatmul import IntOperand, QuantizedMatmul, hybrid_matmul, matmul_rules, quantized_matmul

F32, F64 = np.float32, np.float64
RNG = np.random.default_rng(2815)


# ---- independent transcriptions ---------------------------------------------------------------------------
def half_away(v: np.ndarray) -> np.ndarray:
    a = np.abs(v.astype(F64))
    f = np.floor(a)
    return np.sign(v) * (f + ((a - f) >= 0.5))


def vector_round(v: np.ndarray, width: int = 8) -> np.ndarray:
    """Half away, except the first width * floor(K / width) elements of a row: trunc(fl32(v + copysign(0.5, v)))."""
    out = half_away(v)
    n = width * (v.shape[1] // width)
    head = v[:, :n].astype(F32)
    out[:, :n] = np.trunc((head + np.copysign(F32(0.5), head)).astype(F32))
    return out


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl32(a * b + c), one rounding: a * b exact in float64, TwoSum for the error of the float64 sum, the float32
    rounding corrected where the float64 sum sits exactly halfway between two float32 values."""
    p, cc = a.astype(F64) * b.astype(F64), np.broadcast_to(c, a.shape).astype(F64)
    r = p + cc
    bb = r - p
    e = (p - (r - bb)) + (cc - bb)
    f = r.astype(F32)
    below = np.where(f.astype(F64) > r, np.nextafter(f, F32(-np.inf)), f)
    above = np.where(f.astype(F64) > r, f, np.nextafter(f, F32(np.inf)))
    tie = (r == (below.astype(F64) + above.astype(F64)) / 2) & (e != 0)
    return np.where(tie, np.where(e > 0, above, below), f)


def sse_dot(q: np.ndarray, W: np.ndarray, width: int = 16) -> np.ndarray:
    """sum_k q[m, k] W[k, n], the first width floor(K / width) products as |q| times int8(sign(q) W): the
    negation of -128 wraps to -128."""
    n = width * (q.shape[1] // width)
    signed = np.where(q[:, :n, None] < 0, -W[None, :n, :], W[None, :n, :])
    wrapped = (signed + 128) % 256 - 128
    head = np.einsum("mk,mkn->mn", np.abs(q[:, :n]), wrapped)
    return head + q[:, n:] @ W[n:]


def tfl_symmetric(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    R = np.max(np.abs(x), axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(R == 0, F32(1), (R / F32(127)).astype(F32)).astype(F32)
        v = np.where(R == 0, F32(0), (x * (F32(127) / R).astype(F32)).astype(F32))
    return np.clip(vector_round(v), -127, 127).astype(np.int64), s, np.zeros_like(R, dtype=np.int64)


def tfl_asymmetric(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = np.minimum(F32(0), x.min(1, keepdims=True))
    hi = np.maximum(F32(0), x.max(1, keepdims=True))
    r = (hi - lo).astype(F32)
    zero = r == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        s64 = r.astype(F64) / 255.0
        a, b = lo.astype(F64) / s64, hi.astype(F64) / s64
        zd = np.nan_to_num(np.where(128 + np.abs(a) < 127 + np.abs(b), -128 - a, 127 - b))
        z = np.where(zero, 0, np.clip(half_away(zd), -128, 127)).astype(np.int64)
        s = np.where(zero, F32(1), s64.astype(F32)).astype(F32)
        v = np.where(zero, F32(0), (x * (F32(1) / s).astype(F32)).astype(F32))
    return np.clip(vector_round(v) + z, -128, 127).astype(np.int64), s, z


def xnn_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = np.minimum(F32(0), x.min(1, keepdims=True))
    hi = np.maximum(F32(0), x.max(1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(lo == hi, F32(1), (F32(255) / (hi - lo).astype(F32)).astype(F32)).astype(F32)
    a, b = (lo * c).astype(F32), (hi * c).astype(F32)
    use_min = ((F32(-128) + a).astype(F32) + (b + F32(127)).astype(F32)).astype(F32) > 0
    zf = np.where(use_min, (F32(-128) - a).astype(F32), (F32(127) - b).astype(F32))
    z = np.rint(np.clip(zf, -128, 127)).astype(np.int64)
    q = np.clip(np.rint((x * c).astype(F32)) + z, -128, 127).astype(np.int64)
    return q, (F32(1) / c).astype(F32), z


def expected(kind: str, asym: bool, x: np.ndarray, w: np.ndarray, ws: np.ndarray, bias: np.ndarray | None
             ) -> np.ndarray:
    """y for w (N, K) int8, ws (1,) or (N,) float32."""
    N = w.shape[0]
    b = np.zeros(N, F32) if bias is None else bias
    W = w.astype(np.int64).T
    if kind == "xnnpack":
        q, s, z = xnn_quantize(x)
        acc = (q - z) @ W
        t = (acc.astype(F32) * s).astype(F32)
        return fma_f32(t, np.broadcast_to(ws, t.shape), np.broadcast_to(b, t.shape))
    q, s, z = tfl_asymmetric(x) if asym else tfl_symmetric(x)
    acc = sse_dot(q, W) - z * W.sum(axis=0)[None, :]
    y = (acc.astype(F32) * (s * ws[None, :]).astype(F32)).astype(F32)
    return (y + b).astype(F32)


# ---- the models ---------------------------------------------------------------------------------------------
def hybrid_fc(w: np.ndarray, ws: np.ndarray, bias: np.ndarray | None, asym: bool, M: int) -> bytes:
    N, K = w.shape
    tensors = [("x", "float32", (M, K), None, [], []),
               ("w", "int8", (N, K), w, ws, np.zeros(ws.size, np.int64))]
    if bias is not None:
        tensors.append(("bias", "float32", (N,), bias, [], []))
    tensors.append(("y", "float32", (M, N), None, [], []))
    return LA.model_bytes("fully_connected", tensors, [0], [0, 1, 2 if bias is not None else -1],
                          asymmetric_quantize_inputs=asym)


def activations(M: int, K: int) -> np.ndarray:
    e = RNG.integers(-20, 20, (M, 1))
    R = (RNG.uniform(1, 2, (M, 1)) * np.exp2(e)).astype(F32)
    j = RNG.integers(-127, 127, (M, K))
    x = (R.astype(F64) * (j + 0.5) / 127).astype(F32)
    sel = RNG.random((M, K))
    away = np.where(RNG.random((M, K)) < 0.5, -np.inf, np.inf).astype(F32)
    x = np.where(sel < 0.3, np.nextafter(x, away), x)
    x = np.where(sel > 0.8, (RNG.standard_normal((M, K)) * R).astype(F32), x).astype(F32)
    x[:, 0] = np.where(RNG.random(M) < 0.5, R[:, 0], -R[:, 0])
    x[RNG.random((M, K)) < 0.05] = 0
    planted = RNG.random(M) < 0.1  # rows [127, +-0.49999997 ...]: scale 1, v = 0.49999997 at every position
    x[planted] = np.where(RNG.random((int(planted.sum()), K)) < 0.5, F32(0.49999997), F32(-0.49999997))
    x[planted, 0] = 127
    x[RNG.random(M) < 0.02] = 0  # all-zero rows: scale 1, codes 0
    return x


def problems():
    for M, K, N in ((1024, 16, 64), (700, 13, 50), (512, 40, 96), (333, 7, 33), (2, 1, 5), (1, 8, 3)):
        for per_channel, with_bias in itertools.product((False, True), (False, True)):
            w = RNG.integers(-128, 128, (N, K)).astype(np.int8)
            w[RNG.random((N, K)) < 0.05] = -128  # outside TFLite's symmetric weights: the SSE product rule
            ws = RNG.uniform(0.001, 0.02, N if per_channel else 1).astype(F32)
            bias = (RNG.standard_normal(N) * 3).astype(F32) if with_bias else None
            yield activations(M, K), w, ws, bias


PROBLEMS = list(problems())
KINDS = ("ref", "optimized", "xnnpack")
PROFILE = {("ref", False): "litert_hybrid_symmetric", ("optimized", False): "litert_hybrid_symmetric",
           ("ref", True): "litert_hybrid_asymmetric", ("optimized", True): "litert_hybrid_asymmetric",
           ("xnnpack", False): "litert_hybrid_xnnpack", ("xnnpack", True): "litert_hybrid_xnnpack"}


@pytest.mark.parametrize("kind", KINDS)
def test_hybrid_fully_connected_bit_for_bit(kind: str) -> None:
    """>= 10^6 float32 outputs per kernel choice (both flags), transcription and qref profile = interpreter."""
    n = 0
    for asym in (False, True):
        for x, w, ws, bias in PROBLEMS:
            y, ops = LA.invoke(hybrid_fc(w, ws, bias, asym, x.shape[0]), [x], kind)
            assert ("DELEGATE" in ops) == (kind == "xnnpack")
            want = expected(kind, asym, x, w, ws, bias)
            assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), (kind, asym, x.shape, ws.size,
                                                                             int((y != want).sum()))
            got = hybrid_matmul(x, w.T, w_scale=ws, bias=bias, profile=PROFILE[(kind, asym)]).values
            assert np.array_equal(got.view(np.uint32), y.view(np.uint32)), (kind, asym, int((got != y).sum()))
            n += y.size
    assert n >= 10**6


def test_vector_loop_rounding_positions() -> None:
    """0.49999997 (scale 1) becomes 1 in the first 8 floor(K / 8) positions of a row and 0 in the tail, under
    both builtin kernels and both flags; std::round alone (half away on the exact value) would give 0 everywhere,
    the add-half rounding alone 1 everywhere."""
    for K in (3, 8, 13, 16, 21):
        x = np.full((2, K), F32(0.49999997), F32)
        x[1] = -x[1]
        x[:, 0] = 127
        for asym in (False, True):
            if asym:
                x[:, 1] = -128  # scale 255 / 255 = 1, zero point 0
            buf = hybrid_fc(np.eye(K, dtype=np.int8), np.ones(1, F32), None, asym, 2)
            for kind in ("ref", "optimized"):
                y, _ = LA.invoke(buf, [x], kind)
                head = 8 * (K // 8)
                first = 2 if asym else 1
                assert np.all(np.abs(y[:, first:head]) == 1) and np.all(y[:, max(head, first):] == 0), (K, asym,
                                                                                                      kind, y)


def test_weight_minus_128_in_the_vector_products() -> None:
    """A weight of -128 times a negative code: |q| (-128) in the first 16 floor(K / 16) positions (the SSE
    kernel's sign transfer wraps -(-128)), the exact product in the tail; XNNPACK exact everywhere."""
    for K in (8, 16, 17, 33, 40):
        x = np.full((1, K), F32(-1), F32)
        x[0, 0] = -127  # codes -127 and -1
        w = np.diag(np.full(K, -128)).astype(np.int8)
        buf = hybrid_fc(w, np.ones(1, F32), None, False, 1)
        head = 16 * (K // 16)
        want = np.where(np.arange(K) < head, -1, 1) * np.array([127] + [1] * (K - 1)) * 128
        for kind in ("ref", "optimized"):
            y, _ = LA.invoke(buf, [x], kind)
            np.testing.assert_array_equal(y[0], want.astype(F32))
        y, _ = LA.invoke(buf, [x], "xnnpack")
        assert np.all(y[0] > 0)


def test_asymmetric_zero_point_is_float64_and_rounding_after_zero_point() -> None:
    """A row whose float64 zero point is 19.50000086 (float32 arithmetic: 19.4999924) gets z = 20; a value with
    fl32(x / s) = -25.499998 at z = -35 gives q = -60 (rounded before the zero point is added: fl32(-35 +
    -25.499998) would be -60.5 -> -61)."""
    rows = np.array([[-454295.1875, 413158.21875, 168125.0, -0.0, 132353.71875, 0.0, 363078.4375, -0.0,
                      -262918.875, 461449.4375, -0.0, -159182.171875, -633151.5, -55445.4765625, -173490.6875,
                      205684.828125],
                     [11.31508731842041, -3.4747118949890137, 0.0, -3.118330955505371, 0.0, -11.315086364746094,
                      -6.637589931488037, 2.4055700302124023, 9.666826248168945, -5.746638774871826,
                      19.86822509765625, -6.904876232147217, 0.0, 8.06311321258545, -7.528542518615723, 0.0]], F32)
    y, _ = LA.invoke(hybrid_fc(np.eye(16, dtype=np.int8), np.ones(1, F32), None, True, 2), [rows], "ref")
    q, s, z = tfl_asymmetric(rows)
    assert z[:, 0].tolist() == [20, -35]
    assert q[0, 12] == -128 and q[1, 3] == -60
    np.testing.assert_array_equal(y, ((q - z).astype(F32) * s).astype(F32))


# ---- int16 BATCH_MATMUL ---------------------------------------------------------------------------------------
def q31(m: float) -> tuple[int, int]:
    f, e = math.frexp(m)
    q = math.floor(f * 2**31 + 0.5)
    if q == 2**31:
        q, e = q // 2, e + 1
    return q, e


def q15_requant(acc: np.ndarray, m: float) -> np.ndarray:
    """int64 acc times m: Q31 multiplier reduced to Q15 (rounded half up, at most 2^15 - 1), one rounding."""
    q, e = q31(m)
    r = (q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF
    total = 15 - e
    return (acc * r + (1 << (total - 1))) >> total


def bmm16(a: np.ndarray, b: np.ndarray, a_s: F32, b_s: F32, y_s: F32) -> bytes:
    ins = {"a": a, "b": b, "a_scale": a_s, "a_zero_point": np.array(0), "b_scale": b_s,
           "b_zero_point": np.array(0), "y_scale": y_s, "y_zero_point": np.array(0)}
    return LA.model_bytes("batch_matmul", *LA.tensor_specs("batch_matmul", ins, ("int16", "int16", "int16")))


def test_int16_batch_matmul_q15_single_rounding() -> None:
    """acc = a0 + a1 b1 sweeps (K = 2); K = 4 rows of -32768 squared sum to 2^32 (beyond int32: an int64
    accumulator); m = double(fl32(a_s b_s)) / y_s, checked against scales whose float64 product differs."""
    a = np.stack(np.meshgrid(np.arange(-32768, 32768, 37), np.arange(-32768, 32768, 8197)), -1)
    a = a.reshape(-1, 2).astype(np.int16)
    b = np.stack([np.ones(64, np.int64), RNG.integers(-32768, 32768, 64)]).astype(np.int16)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    n = differ = 0
    for j in range(4):
        a_s, b_s, y_s = (2.0 ** RNG.uniform(-12, -4, 3)).astype(F32)
        m = float(F64(F32(a_s * b_s)) / F64(y_s))
        want = np.clip(q15_requant(acc, m), -32768, 32767)
        buf = bmm16(a, b, a_s, b_s, y_s)
        pipe = QuantizedMatmul(IntOperand("int16"), IntOperand("int16"), "int16",
                               matmul_rules("litert_batch_matmul_int16"))
        mine = quantized_matmul(a, b, a_scale=a_s, b_scale=b_s, y_scale=y_s, pipeline=pipe).values
        np.testing.assert_array_equal(mine, want)
        for kind in KINDS:
            y, ops = LA.invoke(buf, [a, b], kind)
            assert "DELEGATE" not in ops
            assert np.array_equal(y.astype(np.int64), want), (kind, j, int((y != want).sum()))
            n += y.size
        q, e = q31(m)
        t = 31 - e
        differ += int((np.clip((acc * q + (1 << (t - 1))) >> t, -32768, 32767) != want).sum())  # Q31 single rounding
    assert n >= 10**6 and differ > 0
    # sums beyond int32
    big = np.full((1, 4), -32768, np.int16)
    y, _ = LA.invoke(bmm16(big, big.T.copy(), F32(2.0**-10), F32(2.0**-10), F32(1.0)), [big, big.T.copy()], "ref")
    assert int(y[0, 0]) == 4096  # 2^32 * 2^-20; an int32 accumulator wraps 2^32 to 0
    mine = quantized_matmul(big, big.T.copy(), a_scale=F32(2.0**-10), b_scale=F32(2.0**-10), y_scale=F32(1.0),
                            pipeline=QuantizedMatmul(IntOperand("int16"), IntOperand("int16"), "int16",
                                                     matmul_rules("litert_batch_matmul_int16")))
    assert int(mine.values[0, 0]) == 4096


def test_int16_batch_matmul_multiplier_is_the_float32_scale_product() -> None:
    """Scales whose product rounds differently in float32 and float64 separate m = double(fl32(a_s b_s)) / y_s
    from the float64 product: the interpreter follows the float32 product."""
    a = np.arange(-32768, 32768, 3, dtype=np.int64).reshape(-1, 1).astype(np.int16)
    b = np.ones((1, 1), np.int16)
    acc = a.astype(np.int64)
    found = 0
    for _ in range(20000):
        a_s, b_s = RNG.uniform(0.5, 1, 2).astype(F32)
        y_s = F32(RNG.uniform(0.25, 0.5))
        m32 = float(F64(F32(a_s * b_s)) / F64(y_s))
        m64 = float(F64(a_s) * F64(b_s) / F64(y_s))
        if (q31(m32)[0] + (1 << 15)) >> 16 == (q31(m64)[0] + (1 << 15)) >> 16:
            continue  # the same Q15 multiplier
        w32, w64 = (np.clip(q15_requant(acc, m), -32768, 32767) for m in (m32, m64))
        assert not np.array_equal(w32, w64)
        y, _ = LA.invoke(bmm16(a, b, a_s, b_s, y_s), [a, b], "ref")
        assert np.array_equal(y.astype(np.int64), w32)
        found += 1
        if found == 3:
            break
    assert found == 3


# ---- the harness targets ----------------------------------------------------------------------------------------
def test_harness_targets_pass_their_profile() -> None:
    """The litert.fully_connected_hybrid.* and litert.batch_matmul_int16.* targets on the suite's hybrid and int16
    cases equal their profiles bit for bit; the int8 targets refuse them."""
    from qref.conformance.cases.matmul import build_hybrid_cases
    from qref.harness.families import matmul as fam
    from qref.harness.model import bits

    cases = list(build_hybrid_cases())
    ran = refused = 0
    for t in LA.targets():
        mine = [c for c in cases if c.operation in t.operations and t.supports(c) is None]
        if "hybrid" not in t.name and "int16" not in t.name:
            refused += len(cases) - len(mine)
            assert not [c for c in mine if c.operation == "hybrid_matmul" or c.params["a_storage"] == "int16"]
            continue
        for c, got in zip(mine, t.run(mine)):
            assert not isinstance(got, BaseException), f"{t.name} {c.id}: {got}"
            want = fam.expectation(c, t.profile).outputs["y"]
            np.testing.assert_array_equal(bits(got["y"]), bits(want), err_msg=f"{t.name} {c.id}")
            ran += 1
    assert ran >= 5 * 20 + 2 * 6 and refused > 0
