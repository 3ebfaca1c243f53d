"""Reference ops (docs/spec/recipes.md §2, §5-§6): exact results and error bounds checked with fractions.Fraction
written in the tests, declared accumulation orders checked against numpy float32/float16 arithmetic (IEEE, one
rounding per operation), and randomized bound verification over many summation orders."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.recipes import Accumulation, block_dot, block_matmul, exact_matmul, qdq_matmul
from qref.recipes.exact import Dyadic, gamma, growth

F32 = np.float32


def frac_matmul(a: np.ndarray, b: np.ndarray) -> list[list[Fraction]]:
    A = [[Fraction(float(v)) for v in row] for row in np.asarray(a, np.float64)]
    B = [[Fraction(float(v)) for v in row] for row in np.asarray(b, np.float64).T]
    return [[sum((x * y for x, y in zip(r, c)), Fraction(0)) for c in B] for r in A]


def fp8_operands(rng: np.random.Generator, M: int, K: int, N: int, fmt: str = "float8_e4m3fn",
                 spread: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    dt = getattr(ml_dtypes, fmt)
    a = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-spread, spread, (M, K))).astype(dt)
    b = (rng.standard_normal((K, N)) * 10.0 ** rng.uniform(-spread, spread, (K, N))).astype(dt)
    a = np.where(np.isfinite(a.astype(np.float64)), a, dt(0))
    b = np.where(np.isfinite(b.astype(np.float64)), b, dt(0))
    return a.astype(np.float64), b.astype(np.float64)


def orders_f32(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Several float32 summation orders of exact products (fp8 products are exact in float32)."""
    P = (a[:, :, None] * b[None, :, :]).astype(F32)  # exact: at most 8 significant bits
    K = P.shape[1]
    out = {}
    s = np.zeros(P[:, 0].shape, F32)
    for k in range(K):
        s = (s + P[:, k]).astype(F32)
    out["sequential"] = s
    s = np.zeros(P[:, 0].shape, F32)
    for k in reversed(range(K)):
        s = (s + P[:, k]).astype(F32)
    out["reverse"] = s
    Q = P.copy()
    while Q.shape[1] > 1:
        n2 = Q.shape[1] // 2
        sums = (Q[:, 0:2 * n2:2] + Q[:, 1:2 * n2:2]).astype(F32)
        Q = np.concatenate([sums, Q[:, 2 * n2:]], axis=1) if Q.shape[1] % 2 else sums
    out["pairwise"] = Q[:, 0]
    for t in range(3):
        perm = rng.permutation(K)
        s = np.zeros(P[:, 0].shape, F32)
        for k in perm:
            s = (s + P[:, k]).astype(F32)
        out[f"perm{t}"] = s
    lanes = np.zeros((8, *P[:, 0].shape), F32)  # 8 SIMD lanes, then a tree
    for k in range(K):
        lanes[k % 8] = (lanes[k % 8] + P[:, k]).astype(F32)
    while lanes.shape[0] > 1:
        h = lanes.shape[0] // 2
        lanes = (lanes[:h] + lanes[h:]).astype(F32)
    out["lanes8"] = lanes[0]
    out["numpy"] = (a.astype(F32) @ b.astype(F32)).astype(F32)
    return out


# ---------------------------------------------------------------------------------------------------------
# exact results and declared orders (recipes.md §2.1-2.2)
# ---------------------------------------------------------------------------------------------------------
def test_exact_matmul_exact_value_and_correct_rounding() -> None:
    rng = np.random.default_rng(0)
    a, b = fp8_operands(rng, 3, 24, 4, spread=8)
    r = exact_matmul(a, b, accumulation="exact")
    ref = frac_matmul(a, b)
    fr = r.exact.to_fractions()
    for i in range(3):
        for j in range(4):
            assert fr[i, j] == ref[i][j]
            v = Fraction(float(r.value[i, j]))
            # correctly rounded: no float32 is strictly closer
            for nb in (np.nextafter(r.value[i, j], F32(np.inf)), np.nextafter(r.value[i, j], F32(-np.inf))):
                assert abs(Fraction(float(nb)) - ref[i][j]) >= abs(v - ref[i][j])


@pytest.mark.parametrize("order", ["sequential", "pairwise", "blocked"])
def test_declared_orders_match_float32_arithmetic(order: str) -> None:
    rng = np.random.default_rng(1)
    for trial in range(6):
        a, b = fp8_operands(rng, 4, 37 + trial, 5)
        ords = orders_f32(a, b, rng)
        acc = Accumulation(order, block=8) if order == "blocked" else f"float32_{order}"
        got = exact_matmul(a, b, accumulation=acc).value
        if order == "blocked":
            P = (a[:, :, None] * b[None, :, :]).astype(F32)
            tot = np.zeros(P[:, 0].shape, F32)
            for s0 in range(0, P.shape[1], 8):
                part = np.zeros(P[:, 0].shape, F32)
                for k in range(s0, min(s0 + 8, P.shape[1])):
                    part = (part + P[:, k]).astype(F32)
                tot = (tot + part).astype(F32)
            ref = tot
        else:
            ref = ords[order]
        assert (got.view(np.uint32) == ref.view(np.uint32)).all()


def test_float16_sequential_with_rounded_products() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 40)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((40, 2)).astype(np.float16).astype(np.float64)
    r = exact_matmul(a, b, accumulation=Accumulation("sequential", "float16", products="rounded"), out_dtype="float16")
    s = np.zeros((3, 2), np.float16)
    for k in range(40):
        p = (a[:, k:k + 1].astype(np.float16) * b[k:k + 1, :].astype(np.float16)).astype(np.float16)
        s = (s + p).astype(np.float16)
    assert (r.value.view(np.uint16) == s.view(np.uint16)).all()
    assert r.within(s).all()


# ---------------------------------------------------------------------------------------------------------
# error bounds (recipes.md §2.3): randomized verification with exact fractions
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_any_order_bound_holds_for_many_orders(fmt: str) -> None:
    rng = np.random.default_rng(3)
    checked = nonzero = zero_bounds = 0
    for trial in range(25):
        K = int(rng.integers(1, 90))
        a, b = fp8_operands(rng, 3, K, 3, fmt, spread=float(rng.uniform(0, 6)))
        r = exact_matmul(a, b)
        ref = frac_matmul(a, b)
        for name, v in orders_f32(a, b, rng).items():
            for i in range(3):
                for j in range(3):
                    err = abs(Fraction(float(v[i, j])) - ref[i][j])
                    bd = Fraction(float(r.bound[i, j]))
                    assert err <= bd, (trial, name, i, j, err, bd)
                    if bd == 0:
                        zero_bounds += 1
                        assert v[i, j] == r.value[i, j] or v[i, j] == 0 == r.value[i, j]
                    checked += 1
            assert r.within(v).all(), name
        nonzero += int((r.bound > 0).sum())
    assert checked == 1800 and nonzero > 50 and zero_bounds > 50, (nonzero, zero_bounds)


def test_bound_formula_is_gamma_times_abs_sum() -> None:
    rng = np.random.default_rng(4)
    a, b = fp8_operands(rng, 2, 50, 2, spread=5)
    r = exact_matmul(a, b)
    abs_sum = frac_matmul(np.abs(a), np.abs(b))
    g = (1 + Fraction(1, 2**24)) ** 50 - 1  # (1 + u)^n - 1 <= gamma_n = n u / (1 - n u)
    assert g <= Fraction(50, 2**24 - 50)
    for i in range(2):
        for j in range(2):
            bd = Fraction(float(r.bound[i, j]))
            if bd:
                exact_bound = g * abs_sum[i][j]
                assert exact_bound <= bd <= exact_bound * (1 + Fraction(1, 2**48))
    assert gamma(50, 24) >= float(Fraction(50, 2**24 - 50)) and gamma(2**24, 24) == np.inf
    assert np.isfinite(growth(2**9, 8))  # bfloat16, 512 terms: gamma is undefined, (1 + u)^n - 1 is not


def test_bound_zero_exactly_when_every_partial_sum_fits() -> None:
    # integers whose sums stay below 2^24: every order is exact
    a = np.array([[2.0**20, 3.0, -1.0, 5.0]])
    b = np.array([[1.0], [1.0], [1.0], [1.0]])
    r = exact_matmul(a, b)
    assert r.bound[0, 0] == 0 and r.value[0, 0] == 2.0**20 + 7
    # 2^24 + 1 needs 25 bits: not exact in float32
    a2 = np.array([[2.0**24, 1.0]])
    r2 = exact_matmul(a2, np.ones((2, 1)))
    assert r2.bound[0, 0] > 0
    assert r2.within(np.array([[2.0**24]], F32)).all()


def test_special_results_by_counting() -> None:
    inf, nan = np.inf, np.nan
    a = np.array([[inf, 1.0], [inf, -inf], [0.0, 1.0], [nan, 0.0], [1.0, 2.0]])
    b = np.array([[1.0], [2.0]])
    r = exact_matmul(a, b)
    assert r.value[0, 0] == np.inf and np.isnan(r.value[1, 0]) and r.value[2, 0] == 2.0 and np.isnan(r.value[3, 0])
    r0 = exact_matmul(np.array([[inf]]), np.array([[0.0]]))
    assert np.isnan(r0.value[0, 0])
    assert r.within(np.array([[inf], [nan], [2.0], [nan], [5.0]])).all()
    assert not r.within(np.array([[-inf], [nan], [2.0], [1.0], [5.0]]))[[0, 3], 0].any()


def test_overflow_is_unspecified() -> None:
    a = np.array([[3e38, 3e38, -3e38]])
    r = exact_matmul(a, np.ones((3, 1)))
    assert r.unspecified[0, 0] and np.isinf(r.bound[0, 0])
    assert r.within(np.array([[np.inf]])).all()


def test_check_reports_violations() -> None:
    r = exact_matmul(np.array([[1.0, 2.0**-30]]), np.ones((2, 1)))
    assert r.check(np.array([[1.0]], F32)) == 1
    with pytest.raises(QrefError, match="outside the reference bound"):
        r.check(np.array([[1.5]], F32))


def test_dyadic_roundtrip_and_rounding_modes() -> None:
    x = np.array([1.5, -2.0**-140, 3e38, 0.0, -7.25])
    d = Dyadic.from_floats(x)
    assert [float(f) for f in d.to_fractions()] == x.tolist()
    big = Dyadic(np.array([(1 << 200) + 1, -((1 << 100) + 3)], dtype=object), -150)
    up = big.round(qref.get_format("float32"), rounding="up")
    down = big.round(qref.get_format("float32"), rounding="down")
    fr = big.to_fractions()
    for i in range(2):
        assert Fraction(float(down[i])) <= fr[i] <= Fraction(float(up[i]))


# ---------------------------------------------------------------------------------------------------------
# qdq_matmul (recipes.md §5)
# ---------------------------------------------------------------------------------------------------------
def test_qdq_matmul_definition() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 32)).astype(F32)
    w = (rng.standard_normal((32, 3)) * 0.1).astype(F32)
    r = qdq_matmul(x, w, accumulation="sequential")
    sa = F32(np.abs(x).max() / F32(448))
    sb = F32(np.abs(w).max() / F32(448))
    qa = np.clip(x / sa, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    qb = np.clip(w / sb, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert (r.meta["a_codes"] == qa.view(np.uint8)).all() and (r.meta["b_codes"] == qb.view(np.uint8)).all()
    acc = np.zeros((4, 3), F32)
    for k in range(32):
        acc = (acc + qa[:, k:k + 1].astype(F32) * qb[k:k + 1, :].astype(F32)).astype(F32)
    ref = (acc * F32(sa * sb)).astype(F32)
    assert (r.value.view(np.uint32) == ref.view(np.uint32)).all()
    r_any = qdq_matmul(x, w)
    assert r_any.within(ref).all() and r_any.max_bound > 0
    exact = frac_matmul(qa.astype(np.float64), qb.astype(np.float64))
    s = Fraction(float(F32(sa * sb)))
    for i in range(4):
        for j in range(3):
            if r_any.bound[i, j] == 0:  # deterministic: exact accumulator, one rounding by the scale
                assert ref[i, j] == r_any.value[i, j]
            else:
                assert abs(Fraction(float(ref[i, j])) - s * exact[i][j]) <= Fraction(float(r_any.bound[i, j]))


def test_qdq_matmul_per_row_scales_and_errors() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 16)).astype(F32)
    w = rng.standard_normal((16, 2)).astype(F32)
    sa = (np.abs(x).max(axis=1, keepdims=True) / F32(448)).astype(F32)
    r = qdq_matmul(x, w, a_scale=sa, b_scale=F32(0.01), b_format="float8_e5m2")
    assert r.value.shape == (3, 2)
    with pytest.raises(QrefError, match="block scales along K"):
        qdq_matmul(x, w, a_scale=np.ones((3, 16), F32))
    with pytest.raises(QrefError, match="operands"):
        qdq_matmul(x, w.T)
    with pytest.raises(QrefError, match="accumulation order"):
        Accumulation("random")
    with pytest.raises(QrefError, match="block="):
        Accumulation("blocked")


# ---------------------------------------------------------------------------------------------------------
# block_dot / block_matmul (recipes.md §6; OCP MX v1.0 §6)
# ---------------------------------------------------------------------------------------------------------
def test_block_dot_is_ocp_formula() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(64).astype(F32)
    y = (rng.standard_normal(64) * 100).astype(F32)
    sch = qref.scheme("mxfp8_e4m3")
    qa, qb = sch.quantize(x), sch.quantize(y)
    r = block_dot(qa, qb, accumulation="exact")
    # OCP MX v1.0 §6.1: Dot = sum over blocks X_A X_B sum_i P_i^A P_i^B, written from the codes
    pa = [Fraction(float(v)) for v in qref.decode(qa.codes, "float8_e4m3fn", dtype=np.float64)]
    pb = [Fraction(float(v)) for v in qref.decode(qb.codes, "float8_e4m3fn", dtype=np.float64)]
    tot = Fraction(0)
    for blk in range(2):
        xa = Fraction(2) ** (int(qa.scales[blk]) - 127)
        xb = Fraction(2) ** (int(qb.scales[blk]) - 127)
        tot += xa * xb * sum(pa[i] * pb[i] for i in range(32 * blk, 32 * blk + 32))
    assert r.exact.to_fractions()[()] == tot
    assert r.value.shape == () and Fraction(float(r.value)) == Fraction(float(F32(float(tot))))


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "nvfp4", "mxint8", "mxfp6_e2m3"])
def test_block_matmul_exact_and_bound(name: str) -> None:
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((3, 64)) * 10.0 ** rng.uniform(-2, 2, (3, 64))).astype(F32)
    b = (rng.standard_normal((64, 4)) * 10.0 ** rng.uniform(-2, 2, (64, 4))).astype(F32)
    sch = qref.scheme(name)
    qa = sch.quantize(a, axis=1)
    qb = sch.quantize(b, axis=0)
    r = block_matmul(qa, qb)
    if name == "nvfp4":  # two-level NVIDIA scaling: effective block scale fl32(fl32(s g) * fl32(1 / 2688))
        def vals(q: qref.QArray, ax: int) -> np.ndarray:
            p = qref.decode(q.codes, "float4_e2m1fn", dtype=np.float64)
            d = qref.decode(q.scales, "float8_e4m3fn", dtype=np.float32)
            fs = (((d * np.float32(q.global_scale)).astype(F32)) * F32(1 / 2688)).astype(F32)
            return p * np.repeat(fs.astype(np.float64), 16, axis=ax)

        va, vb = vals(qa, 1), vals(qb, 0)
    else:  # MX: the dequantized values are exact in float64
        va = qa.dequantize(np.float64)
        vb = qb.dequantize(np.float64)
    ref = frac_matmul(va, vb)
    fr = r.exact.to_fractions()
    for i in range(3):
        for j in range(4):
            assert fr[i, j] == ref[i][j]
    for v in orders_f32(va, vb, rng).values():
        if name in ("mxint8", "nvfp4"):
            continue  # products need more than float32's bits for the float32 simulation here
        assert r.within(v).all()
    # the transposed (N, K) layout gives the same result
    qbt = sch.quantize(b.T.copy(), axis=1)
    rt = block_matmul(qa, qbt)
    assert (rt.exact.to_fractions() == fr).all()


def test_block_matmul_errors() -> None:
    a = np.ones((2, 64), F32)
    qa = qref.scheme("mxfp8_e4m3").quantize(a, axis=1)
    qb = qref.scheme("nvfp4").quantize(np.ones((64, 2), F32), axis=0)
    with pytest.raises(QrefError, match="block sizes differ"):
        block_matmul(qa, qb)
    with pytest.raises(QrefError, match="axis 1"):
        block_matmul(qref.scheme("mxfp4").quantize(a, axis=0), qa)
    with pytest.raises(QrefError, match="MX or float-scaled"):
        block_matmul(qref.scheme("float8_e4m3fn").quantize(a), qa)
    with pytest.raises(QrefError, match="1-D"):
        block_dot(qa, qa)


def test_block_matmul_nan_scale_gives_nan() -> None:
    a = np.ones((1, 32), F32)
    a[0, 3] = np.nan
    sch = qref.scheme("mxfp8_e4m3")
    qa = sch.quantize(a, axis=1)
    qb = sch.quantize(np.ones((32, 1), F32), axis=0)
    r = block_matmul(qa, qb)
    assert np.isnan(r.value[0, 0]) and r.within(np.array([[np.nan]])).all()
