"""Kernel accumulation records (mma.md §10) against exact arithmetic and an independent implementation.

The reference here is written from the spec alone: Python Fractions, one rounding per step by an integer
round-to-nearest-even helper (``_rn``), scalar loops over a few outputs. Nothing is copied from qref.
"""

from __future__ import annotations

import itertools
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import qref.mma as qm
from qref.errors import QrefError
from qref.mma.bound import kernel_depth

FMT = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127), "float64": (53, -1022, 1023)}
DT = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def _rn(x: Fraction, fmt: str, flush: bool = False) -> Fraction:
    """Round x to nearest even in fmt (precision p, minimum normal exponent emin; overflow not used here)."""
    p, emin, _ = FMT[fmt]
    if x == 0:
        return Fraction(0)
    s = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    q = a / Fraction(2) ** (e - p + 1)
    n = q.numerator // q.denominator
    r = q - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    v = s * n * Fraction(2) ** (e - p + 1)
    if flush and abs(v) < Fraction(2) ** emin:
        return Fraction(0)
    return v


def _ref(a: list[Fraction], b: list[Fraction], c: Fraction, r: qm.KernelAccumulation, fd: str) -> Fraction:
    """The record's order on one output, one rounding per step (mma.md §10.2), scalars only."""
    acc = r.accumulator
    fl = r.subnormals == "flush"
    rn = lambda x, f=acc: _rn(x, f, fl)  # noqa: E731
    if fl:
        a = [x if abs(x) >= Fraction(2) ** FMT[acc][1] else Fraction(0) for x in a]
        b = [x if abs(x) >= Fraction(2) ** FMT[acc][1] else Fraction(0) for x in b]
    K = len(a)

    def block_sum(ks: list[int], start: Fraction | None) -> Fraction:
        if r.order == "pairwise":
            xs = [rn(a[k] * b[k]) for k in ks]
            while len(xs) > 1:
                xs = [rn(xs[i] + xs[i + 1]) for i in range(0, len(xs) - 1, 2)] + ([xs[-1]] if len(xs) % 2 else [])
            return xs[0] if start is None else rn(start + xs[0])
        L = min(r.lanes, len(ks))
        lanes = [Fraction(0)] * L
        if start is not None:
            lanes[0] = start
        for i, k in enumerate(ks):
            j = i % L
            lanes[j] = rn(a[k] * b[k] + lanes[j]) if r.products == "fused" else rn(lanes[j] + rn(a[k] * b[k]))
        if r.reduction == "sequential":
            s = lanes[0]
            for x in lanes[1:]:
                s = rn(s + x)
            return s
        if r.reduction == "halving":
            while len(lanes) > 1:
                h = len(lanes) // 2
                lanes = [rn(lanes[i] + lanes[i + h]) for i in range(h)]
            return lanes[0]
        while len(lanes) > 1:
            lanes = [rn(lanes[i] + lanes[i + 1]) for i in range(0, len(lanes) - 1, 2)] + (
                [lanes[-1]] if len(lanes) % 2 else [])
        return lanes[0]

    if r.block is None:
        out = block_sum(list(range(K)), rn(c))
    else:
        bacc = r.block_accumulator or acc
        out = rn(c, bacc)
        for i in range(0, K, r.block):
            out = _rn(out + _rn(block_sum(list(range(i, min(K, i + r.block))), None), bacc, fl), bacc, fl)
    return _rn(out, fd)


RECORDS = [
    qm.KernelAccumulation(),
    qm.KernelAccumulation(lanes=4, reduction="halving"),
    qm.KernelAccumulation(lanes=3, reduction="sequential", products="rounded"),
    qm.KernelAccumulation(lanes=8, reduction="pairwise"),
    qm.KernelAccumulation(lanes=2, block=7),
    qm.KernelAccumulation(accumulator="float16", block=5, block_accumulator="float32"),
    qm.KernelAccumulation(accumulator="bfloat16", lanes=4, reduction="halving", products="rounded"),
    qm.KernelAccumulation(order="pairwise", products="rounded"),
    qm.KernelAccumulation(order="pairwise", products="rounded", block=6, accumulator="float16"),
    qm.KernelAccumulation(accumulator="float64", lanes=2),
    qm.KernelAccumulation(subnormals="flush", lanes=2, accumulator="float16"),
]


def _operands(rng: np.random.Generator, fmt: str, M: int, N: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Random values with a wide exponent spread, cancellation and a few subnormals."""
    lo = -12 if fmt in ("float16", "float8_e4m3fn") else -30
    def one(shape: tuple[int, int]) -> np.ndarray:
        x = rng.standard_normal(shape) * np.exp2(rng.integers(lo, 8, shape))
        x[rng.random(shape) < 0.05] = 0.0
        return x.astype(DT.get(fmt, ml_dtypes.float8_e4m3fn))
    A, B = one((M, K)), one((K, N))
    B[:, 0] = np.asarray(-np.asarray(A[0], np.float64), B.dtype)  # row 0 x column 0 cancels
    return A, B


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name())
@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "float16"])
def test_record_equals_independent_fraction_reference(rec: qm.KernelAccumulation, fmt: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{rec.name()} {fmt}".encode()))
    M, N, K = 3, 4, 37
    if rec.accumulator == "float64" and fmt != "float32":
        pytest.skip("one float64 case suffices")
    if rec.accumulator == "float16" and fmt != "float16":
        pytest.skip("float32 / bfloat16 operands overflow a float16 accumulator (the reference has no overflow)")
    A, B = _operands(rng, fmt, M, N, K)
    fd = "float32" if rec.accumulator != "float64" else "float64"
    got = qm.matmul(A, B, instruction=qm.kernel(rec, fmt, d_format=fd))
    for i, j in itertools.product(range(M), range(N)):
        a = [Fraction(float(x)) for x in A[i].astype(np.float64)]
        b = [Fraction(float(x)) for x in B[:, j].astype(np.float64)]
        want = _ref(a, b, Fraction(0), rec, fd)
        assert Fraction(float(got[i, j])) == want, (i, j, float(got[i, j]), float(want))


def test_exactly_representable_partials_equal_the_exact_sum() -> None:
    """Integer operands whose every partial sum is exact in float32: every order gives the exact int64 sum."""
    rng = np.random.default_rng(3)
    A = rng.integers(-64, 64, (20, 96)).astype(np.float32)
    B = rng.integers(-64, 64, (96, 30)).astype(np.float32)
    exact = A.astype(np.int64) @ B.astype(np.int64)
    for rec in RECORDS:
        if rec.accumulator in ("float16", "bfloat16"):
            continue
        got = qm.matmul(A, B, instruction=qm.kernel(rec))
        assert np.array_equal(got.astype(np.int64), exact), rec.name()


def test_order_is_visible_in_one_hot_cancellation() -> None:
    """big at k=0, -big at k=1, 1 at k=2..: the lane structure decides how many 1s survive (counted by hand)."""
    K = 16
    a = np.ones((1, K), np.float32)
    a[0, 0], a[0, 1] = 2.0**30, -(2.0**30)
    b = np.ones((K, 1), np.float32)
    seq = qm.matmul(a, b, instruction=qm.kernel(qm.KernelAccumulation()))
    assert seq[0, 0] == 14.0  # big - big first, then 14 ones
    # lanes=2: lane 0 = big + 7 ones (each lost below half an ulp of 2^30), lane 1 = -big + 7 ones: 0
    assert qm.matmul(a, b, instruction=qm.kernel(qm.KernelAccumulation(lanes=2)))[0, 0] == 0.0
    # lanes=4: l0 = big, l1 = -big, l2 = 4 ones, l3 = 4 ones; halving (l0+l2)+(l1+l3) = 0, sequential = 8
    assert qm.matmul(a, b, instruction=qm.kernel(qm.KernelAccumulation(lanes=4, reduction="halving")))[0, 0] == 0.0
    assert qm.matmul(a, b, instruction=qm.kernel(qm.KernelAccumulation(lanes=4)))[0, 0] == 8.0


def test_bound_holds_and_depth() -> None:
    rng = np.random.default_rng(5)
    A, B = _operands(rng, "float32", 30, 40, 200)
    exact = np.array([[sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(A[i], B[:, j]))
                       for j in range(0, 40, 7)] for i in range(0, 30, 7)], dtype=object)
    for rec in RECORDS[:6]:
        ins = qm.kernel(rec)
        d = qm.matmul(A, B, instruction=ins)
        bd = qm.matmul_bound(A, B, instruction=ins).bound
        for ii, i in enumerate(range(0, 30, 7)):
            for jj, j in enumerate(range(0, 40, 7)):
                assert abs(Fraction(float(d[i, j])) - exact[ii, jj]) <= Fraction(float(bd[i, j])), rec.name()
    assert kernel_depth(qm.KernelAccumulation(), 10) == 12
    assert kernel_depth(qm.KernelAccumulation(lanes=4, reduction="halving"), 16) == 4 + 2 + 2


def test_accepted_where_a_unit_is() -> None:
    """linear_step(mma=kernel(...)) and qdq_matmul(accumulation=kernel(...)) run the record."""
    from qref.recipes import get_recipe, linear_step, qdq_matmul

    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((8, 32)).astype(np.float32)
    rec = qm.KernelAccumulation(lanes=4, reduction="halving")
    r = qdq_matmul(x, w.T, accumulation=qm.kernel(rec, "float8_e4m3fn"))
    codes_a, codes_b = r.meta["a_codes"], r.meta["b_codes"]
    f8 = ml_dtypes.float8_e4m3fn
    ins = qm.kernel(rec, "float8_e4m3fn")
    d = qm.matmul(np.asarray(codes_a).view(f8), np.asarray(codes_b).view(f8), instruction=ins)
    assert np.array_equal(r.meta["mma_d"], d)
    g = rng.standard_normal((16, 8)).astype(np.float32)
    st = linear_step(x, w, g, get_recipe("torchao_float8_tensorwise"), mma={"fprop": qm.kernel(rec, "float8_e4m3fn")})
    res = st.results["fprop"]
    assert res.meta["instruction"] == "custom/kernel/" + rec.name()
    assert np.isfinite(res.bound).all() and (res.bound > 0).any()


def test_bad_records_raise() -> None:
    with pytest.raises(QrefError, match="power-of-two"):
        qm.KernelAccumulation(lanes=3, reduction="halving")
    with pytest.raises(QrefError, match="accumulator"):
        qm.KernelAccumulation(accumulator="float8")
    with pytest.raises(QrefError, match="pairwise"):
        qm.KernelAccumulation(order="pairwise")
