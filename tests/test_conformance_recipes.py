"""The committed recipe cases, recomputed by paths independent of the generator (docs/vectors.md, recipes.md):

- delayed_scaling: Flax 0.12.8 ``update_fp8_meta`` on CPU (eager and jit; XLA:CPU flushes subnormals) on every
  ``ftz`` case with amax_compute "max", and a numpy float32 re-statement of recipes.md §3.2 / §4 (IEEE, or with
  the flush written here) on every case;
- scaled_qdq: Flax ``quantize`` / ``qdq`` (eager for division "divide", under jax.jit for "reciprocal": XLA's
  rewrite) on every ``ftz`` case, and numpy float32 arithmetic with ml_dtypes casts on every case;
- block_matmul and qdq_matmul: exact Fraction arithmetic written here: operands decoded with ml_dtypes, the exact
  result S, one rounding to float32 ("exact"), the sequential / pairwise / blocked orders step by step, the bound
  of recipes.md §2.3 re-derived from its formula, ``exact``, ``exact_rounded``, ``y_lo`` and ``y_hi``; and the
  block cases against ``jax.lax.scaled_dot`` on CPU within the stored bound (bit for bit where it is zero).
Codes are compared as unsigned integers, float results as bit patterns except that NaN matches NaN (sign and payload
open) and, in matmul results, +0 matches -0 (recipes.md §2.1).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_uniform import rn as round_nearest

from qref.conformance import Case, load_suite

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")

F32 = np.float32
ML = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
      "float4_e2m1fn": ml_dtypes.float4_e2m1fn, "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu}
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
P32, EMIN32, QMIN32 = 24, -126, -149
MAX32 = Fraction(2**128 - 2**104)
BIG = 1 << 40


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return list(load_suite(COMMITTED).select(family="recipes"))


def by_op(cases: list[Case], op: str) -> list[Case]:
    return [c for c in cases if c.operation == op]


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def same_f32(got: np.ndarray, want: np.ndarray, zero_sign: bool = True) -> np.ndarray:
    """Elementwise: equal bit patterns, NaN matching NaN; with zero_sign=False, +0 matching -0."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    ok = (bits(got) == bits(want)) | (np.isnan(got) & np.isnan(want))
    if not zero_sign:
        ok |= (got == 0) & (want == 0)
    return ok


def same_codes(got: np.ndarray, want: np.ndarray, fmt: str) -> np.ndarray:
    """Codes equal as unsigned integers, any NaN code matching any NaN code (the sign of an arithmetic NaN is
    open, IEEE 754 §6.3; the cases' params say nan_sign "either")."""
    got, want = np.asarray(got, np.uint8), np.asarray(want, np.uint8)
    nan = np.isnan(got.view(ML[fmt]).astype(np.float64)) & np.isnan(want.view(ML[fmt]).astype(np.float64))
    return (got == want) | nan


# ---------------------------------------------------------------------------------------------------------
# coverage
# ---------------------------------------------------------------------------------------------------------
def test_recipe_cases_cover_the_issue(cases):
    ops = {c.operation for c in cases}
    assert ops == {"delayed_scaling", "scaled_qdq", "block_matmul", "qdq_matmul", "hadamard"}
    ds = by_op(cases, "delayed_scaling")
    assert {(c.format["name"], c.params["history_length"]) for c in ds} == {
        (f, L) for f in FP8_MAX for L in (1, 4, 16)}
    assert {c.id.rsplit("/", 1)[1] for c in ds} >= {"zero", "nan", "inf", "tiny", "growing", "shrinking", "mixed"}
    assert all(c.inputs["amax"].size >= 12 for c in ds)
    sq = by_op(cases, "scaled_qdq")
    assert {(c.params["division"], c.params["ftz"]) for c in sq} == {
        (d, z) for d in ("divide", "reciprocal") for z in (True, False)}
    assert any("tie" in c.tags for c in sq)
    bm = by_op(cases, "block_matmul")
    assert {(c.scheme["name"], c.profile) for c in bm} == {
        ("mxfp8_e4m3", "ocp"), ("mxfp8_e5m2", "ocp"), ("mxfp4", "ocp"), ("nvfp4", "ocp"), ("nvfp4", "nvidia")}
    assert {c.id.split("/")[-2] for c in bm} >= {"random", "exact", "ties", "zero", "nan", "overflow", "tiny", "wide"}
    assert {c.params["accumulation"]["order"] for c in bm} == {"exact", "blocked", "any"}
    qm = by_op(cases, "qdq_matmul")
    assert {c.params["accumulation"]["order"] for c in qm} == {"exact", "sequential", "pairwise", "any"}
    for c in bm + qm:  # non-bit-defined results carry the bound and say so
        anyo = c.params["accumulation"]["order"] == "any"
        assert anyo == ("bound" in c.expected) == (c.params["compare"] == "bound")
        assert ("within the bound" in c.description) == anyo
    # some zero bounds (bit-defined under any order), some positive, some unspecified, some specials
    anys = [c for c in bm + qm if "bound" in c.expected]
    b = np.concatenate([c.expected["bound"].ravel() for c in anys])
    assert (b == 0).sum() > 200 and ((b > 0) & np.isfinite(b)).sum() > 200 and np.isinf(b).sum() > 50
    assert sum(int(c.expected["exact_rounded"].sum()) for c in anys) > 50


# ---------------------------------------------------------------------------------------------------------
# delayed scaling (recipes.md §3.2, §4)
# ---------------------------------------------------------------------------------------------------------
def flush(v: np.ndarray | np.float32, on: bool) -> np.ndarray:
    v = np.asarray(v, F32)
    if not on:
        return v
    return np.where((np.abs(v) < np.finfo(F32).tiny) & (v != 0), np.copysign(F32(0), v), v).astype(F32)


def numpy_delayed(amax: np.ndarray, L: int, fmax: float, ftz: bool, most_recent: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """recipes.md §4 with Flax's formula (§3.2) in numpy float32 scalars (IEEE; ftz flushes every operand and
    result here)."""
    scale, hist = F32(1), np.zeros(L, F32)
    scales, hists = [], []
    one, M = F32(1), F32(fmax)
    with np.errstate(all="ignore"):
        for a in amax:
            am = hist[0] if most_recent else (F32(np.nan) if np.isnan(hist).any() else hist.max())
            am = flush(am, ftz)
            keep = flush(one / flush(scale, ftz), ftz)
            sf = flush(flush(M / am, ftz) / one, ftz)
            if not (am > 0 and np.isfinite(am)):
                sf = keep
            scale = flush(one / sf, ftz)[()]
            hist = np.roll(hist, -1)
            hist[0] = np.abs(F32(a))
            scales.append(scale)
            hists.append(hist.copy())
    return np.asarray(scales, F32), np.stack(hists)


def test_delayed_scaling_numpy_restatement(cases):
    n = 0
    for c in by_op(cases, "delayed_scaling"):
        p = c.params
        assert p["formula"] == "flax" and p["margin"] == 0 and p["dtype"] == "float32" and p["nan"] == "propagate"
        assert (c.inputs["scale0"] == 1).all() and (c.inputs["history0"] == 0).all()
        s, h = numpy_delayed(c.inputs["amax"], p["history_length"], FP8_MAX[c.format["name"]], p["ftz"],
                             p["amax_compute"] == "most_recent")
        assert same_f32(c.expected["scales"], s).all(), (c.id, c.expected["scales"], s)
        assert same_f32(c.expected["histories"], h).all(), c.id
        n += 1
    assert n >= 100


def flax_ops():
    pytest.importorskip("jax", reason="flax.linen.fp8_ops runs on JAX")
    return pytest.importorskip("flax.linen.fp8_ops", reason="the recipe cases are checked against flax")


def test_delayed_scaling_matches_flax_update_fp8_meta(cases):
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    jitted = jax.jit(F.update_fp8_meta, static_argnums=1)
    steps = 0
    for c in by_op(cases, "delayed_scaling"):
        p = c.params
        if not p["ftz"] or p["amax_compute"] != "max":
            continue  # Flax: XLA:CPU flushes subnormals; history max only
        dt = jnp.float8_e4m3fn if c.format["name"] == "float8_e4m3fn" else jnp.float8_e5m2
        for fn in (F.update_fp8_meta, jitted):
            scale, hist = jnp.asarray(c.inputs["scale0"]), jnp.asarray(c.inputs["history0"])
            for t, a in enumerate(c.inputs["amax"]):
                scale, hist = fn(jnp.asarray([a], jnp.float32), dt, scale, hist)
                assert same_f32(np.asarray(scale), c.expected["scales"][t:t + 1]).all(), (c.id, t)
                assert same_f32(np.asarray(hist), c.expected["histories"][t]).all(), (c.id, t)
                steps += 1
    assert steps >= 2 * 40 * 20


# ---------------------------------------------------------------------------------------------------------
# scaled casts (recipes.md §3.3)
# ---------------------------------------------------------------------------------------------------------
def numpy_scaled_qdq(x: np.ndarray, s: np.ndarray, fmt: str, division: str, ftz: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    x, s = flush(x, ftz), flush(s, ftz)
    with np.errstate(all="ignore"):
        y = flush(x / s, ftz) if division == "divide" else flush(x * flush(F32(1) / s, ftz), ftz)
        y = np.clip(y, -F32(FP8_MAX[fmt]), F32(FP8_MAX[fmt]))
        q = y.astype(ML[fmt])
        back = flush(q.astype(F32) * s, ftz)
    return q.view(np.uint8), back


def test_scaled_qdq_numpy_and_ml_dtypes(cases):
    n = 0
    for c in by_op(cases, "scaled_qdq"):
        p = c.params
        assert p["compute_dtype"] == "float32" and p["clip"] and c.policy["rounding"] == "nearest_even"
        q, y = numpy_scaled_qdq(c.inputs["x"], c.inputs["scale"], c.format["name"], p["division"], p["ftz"])
        ok = same_codes(q, c.expected["codes"], c.format["name"])
        assert ok.all(), (c.id, c.inputs["x"][~ok][:4])
        assert same_f32(c.expected["y"], y).all(), c.id
        n += c.inputs["x"].size
    assert n > 20000


def test_scaled_qdq_matches_flax(cases):
    F = flax_ops()
    import jax
    import jax.numpy as jnp

    jq = jax.jit(F.quantize, static_argnums=(1, 3))
    jqdq = jax.jit(F.qdq, static_argnums=(1, 3))
    n = 0
    for c in by_op(cases, "scaled_qdq"):
        if not c.params["ftz"]:
            continue
        dt = jnp.float8_e4m3fn if c.format["name"] == "float8_e4m3fn" else jnp.float8_e5m2
        x, s = jnp.asarray(c.inputs["x"]), jnp.asarray(c.inputs["scale"])
        quant, qdq = (F.quantize, F.qdq) if c.params["division"] == "divide" else (jq, jqdq)
        got = np.asarray(quant(x, dt, s, jnp.float32)).view(np.uint8)
        ok = same_codes(got, c.expected["codes"], c.format["name"])
        assert ok.all(), (c.id, c.inputs["x"][~ok][:4])
        assert same_f32(np.asarray(qdq(x, dt, s, jnp.float32)), c.expected["y"]).all(), c.id
        n += got.size
    assert n > 10000


# ---------------------------------------------------------------------------------------------------------
# exact arithmetic for the matmul cases (recipes.md §2)
# ---------------------------------------------------------------------------------------------------------
def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > a else e


def to_f32(x: Fraction, mode: str = "even") -> float:
    """x rounded to float32: "even" (nearest, ties to even, overflow to +-Inf; a nonzero x rounding to 0 keeps
    its sign), "ceil" or "floor" (directed; overflow saturates toward the finite side)."""
    if x == 0:
        return 0.0
    q = max(floor_log2(abs(x)), EMIN32) - P32 + 1
    t = x / Fraction(2) ** q
    n = math.floor(t)
    r = t - n
    if mode == "even":
        n += 1 if (r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2)) else 0
    elif mode == "ceil":
        n += 1 if r > 0 else 0
    v = n * Fraction(2) ** q
    if abs(v) > MAX32:
        if mode == "even" or (mode == "ceil" and v > 0) or (mode == "floor" and v < 0):
            return math.copysign(math.inf, v)
        return float(math.copysign(MAX32, v))
    return math.copysign(float(v), x) if v == 0 else float(v)


Val = Fraction | float  # exact finite values, or NaN / +-Inf as floats


def rn(v: Val) -> Val:
    return v if isinstance(v, float) else Fraction(to_f32(v)) if math.isfinite(to_f32(v)) else to_f32(v)


def add(a: Val, b: Val) -> Val:
    """fl32(a + b) with IEEE special values."""
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    return rn(a + b)


def mul(a: Val, b: Val) -> Val:
    if isinstance(a, float) or isinstance(b, float):
        return float(a) * float(b)
    return a * b


def vals(x: np.ndarray) -> list:
    """float64 values as exact Fractions, NaN / +-Inf kept as floats."""
    return [Fraction(float(v)) if math.isfinite(v) else float(v) for v in np.asarray(x, np.float64).ravel()]


def lsb(v: Fraction) -> int:
    n, d = v.numerator, v.denominator
    return (abs(n) & -abs(n)).bit_length() - 1 - (d.bit_length() - 1)


def exact_sum(terms: list[Val]) -> Val:
    sp = [t for t in terms if isinstance(t, float)]
    return sum(sp) if sp else sum(terms, Fraction(0))


def seq(terms: list[Val]) -> Val:
    s: Val = Fraction(0)
    for t in terms:
        s = add(s, t)
    return s


def pairwise(terms: list[Val]) -> Val:
    if len(terms) == 1:
        return rn(terms[0])
    level = list(terms)
    while len(level) > 1:
        nxt = [add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = nxt + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def blocked(terms: list[Val], b: int) -> Val:
    total: Val = Fraction(0)
    for i in range(0, len(terms), b):
        total = add(total, seq(terms[i:i + b]))
    return total


def growth(D: int) -> Fraction:
    """(1 + 2^-24)^D - 1, exactly (recipes.md §2.3)."""
    return Fraction((2**P32 + 1) ** D - 2 ** (P32 * D), 2 ** (P32 * D))


def level_bound(abs_sum: Fraction, q: int, D: int, n_tiny: int) -> tuple[bool, Fraction, bool]:
    """(exact, bound, overflow) of one level: recipes.md §2.3 (B1), (B2), exactness and overflow rules."""
    exact = abs_sum == 0 or (abs_sum <= Fraction(2) ** (q + P32) and q >= QMIN32 and abs_sum <= MAX32)
    g = growth(D)
    under = (1 + g) * n_tiny * Fraction(2) ** (QMIN32 - 1) if (q < EMIN32 and abs_sum > 0) else Fraction(0)
    if exact:
        return True, Fraction(0), False
    return False, g * abs_sum + under, (1 + g) * abs_sum + under > MAX32


def row_lsb(vs: list[Val]) -> int:
    fin = [lsb(v) for v in vs if isinstance(v, Fraction) and v != 0]
    return min(fin) if fin else BIG


def check_result(c: Case, m: int, n: int, y_want: Val, S: Val, bound_want: Fraction | None, unspec: bool,
                 det_value: Val | None = None) -> None:
    """One result against the stored arrays (module docstring)."""
    e, where = c.expected, (c.id, m, n)
    un = c.unspecified.get("y")
    assert (bool(un[m, n]) if un is not None else False) == unspec, where
    if unspec:
        assert e["bound"][m, n] == np.inf and e["y"][m, n] == 0 and e["y_lo"][m, n] == 0, where
        return
    want = np.asarray([float(y_want)], F32)
    assert same_f32(e["y"][m:m + 1, n], want, zero_sign=False).all(), (where, e["y"][m, n], float(y_want))
    if bound_want is None:
        return
    if isinstance(S, float):  # NaN or +-Inf: the same special, bound 0
        assert e["bound"][m, n] == 0 and same_f32(e["exact"][m:m + 1, n].astype(F32), np.asarray([S], F32)).all()
        assert same_f32(e["y_lo"][m:m + 1, n], want).all() and same_f32(e["y_hi"][m:m + 1, n], want).all(), where
        return
    b = Fraction(float(e["bound"][m, n]))
    assert bound_want <= b <= bound_want * (1 + Fraction(1, 2**45)) + Fraction(2) ** -1070, (where, b, bound_want)
    assert float(e["exact"][m, n]) == float(S), where  # float(Fraction) is the correctly rounded float64
    assert bool(e["exact_rounded"][m, n]) == (Fraction(float(e["exact"][m, n])) != S), where
    if b == 0:
        lo = hi = det_value if det_value is not None else S
        assert Fraction(float(e["y"][m, n])) == lo, where
    else:
        lo, hi = S - b, S + b
    lo32 = e["y_lo"][m, n] if b == 0 else to_f32(lo, "ceil")
    hi32 = e["y_hi"][m, n] if b == 0 else to_f32(hi, "floor")
    assert float(e["y_lo"][m, n]) == float(lo32) and float(e["y_hi"][m, n]) == float(hi32), where
    if b == 0:
        assert e["y_lo"][m, n] == e["y"][m, n] == e["y_hi"][m, n], where


# ---------------------------------------------------------------------------------------------------------
# block_matmul (recipes.md §6)
# ---------------------------------------------------------------------------------------------------------
def block_operands(c: Case) -> tuple[list[list[Val]], list[list[Val]], int]:
    """(A rows, B columns) of exact operand values P * X (OCP MX §6.1), decoded with ml_dtypes; block size."""
    s = c.scheme
    B = c.params["block_size"]
    elem, sfmt = ML[s["element"]], ML[s["scale_format"]]

    def side(codes: np.ndarray, scales: np.ndarray, g: np.ndarray | None, axis: int
             ) -> tuple[np.ndarray, np.ndarray]:
        P = codes.astype(np.uint8).view(elem).astype(np.float64)
        X = scales.astype(np.uint8).view(sfmt).astype(F32)  # E8M0 -> 2^(b - 127) (255: NaN); E4M3 values
        if g is not None:  # nvidia two-level: fl32(fl32(s g) fl32(1 / 2688)) (block.md §5.4)
            with np.errstate(over="ignore", invalid="ignore"):
                X = (X * F32(g)) * (F32(1) / F32(2688))
        return P, np.repeat(X.astype(np.float64), B, axis=axis)  # one scale per block of B along K

    Pa, Xa = side(c.inputs["lhs_codes"], c.inputs["lhs_scales"], c.inputs.get("lhs_global_scale"), 1)
    Pb, Xb = side(c.inputs["rhs_codes"], c.inputs["rhs_scales"], c.inputs.get("rhs_global_scale"), 0)
    A = [[mul(p, x) for p, x in zip(vals(Pa[m]), vals(Xa[m]))] for m in range(Pa.shape[0])]
    Bc = [[mul(p, x) for p, x in zip(vals(Pb[:, n]), vals(Xb[:, n]))] for n in range(Pb.shape[1])]
    return A, Bc, B


def test_block_matmul_exact_fractions(cases):
    results = 0
    for c in by_op(cases, "block_matmul"):
        A, Bc, B = block_operands(c)
        acc = c.params["accumulation"]
        assert acc["dtype"] == "float32" and acc["products"] == "exact" and not acc["ftz"]
        K = len(A[0])
        for m, a in enumerate(A):
            qa = row_lsb(a)
            for n, b in enumerate(Bc):
                terms = [mul(x, y) for x, y in zip(a, b)]
                S = exact_sum(terms)
                if acc["order"] == "exact":
                    check_result(c, m, n, rn(S), S, None, False)
                elif acc["order"] == "blocked":
                    assert acc["block"] == B
                    check_result(c, m, n, blocked(terms, B), S, None, False)
                elif isinstance(S, float):
                    check_result(c, m, n, S, S, Fraction(0), False)
                else:
                    asum = sum((abs(t) for t in terms), Fraction(0))
                    _, bnd, over = level_bound(asum, qa + row_lsb(b), K, 2 * K + 2)
                    check_result(c, m, n, rn(S), S, bnd, over)
                results += 1
    assert results >= 99 * 64


def test_block_matmul_within_bound_of_jax_scaled_dot(cases):
    """jax.lax.scaled_dot on XLA:CPU (bfloat16 operands, flush-to-zero, implementation-defined order): every
    result whose operands XLA represents exactly (P * X normal in bfloat16 or 0, the scale not flushed) and whose
    partial sums cannot be subnormal (every product a multiple of 2^-126) lies within the stored bound."""
    jax = pytest.importorskip("jax", reason="jax.lax.scaled_dot is the backend compared")
    jnp = pytest.importorskip("jax.numpy", reason="jax.lax.scaled_dot is the backend compared")
    fn = jax.jit(lambda a, b, c, d: jax.lax.scaled_dot(a, b, lhs_scale=c, rhs_scale=d,
                                                       preferred_element_type=jnp.float32))
    bf16_max = Fraction(ml_dtypes.finfo(ml_dtypes.bfloat16).max.item())
    tiny = Fraction(2) ** EMIN32
    compared = bit_exact = 0
    for c in by_op(cases, "block_matmul"):
        if c.params["accumulation"]["order"] != "any" or "lhs_global_scale" in c.inputs:
            continue
        s = c.scheme
        elem, sfmt = ML[s["element"]], ML[s["scale_format"]]
        got = np.asarray(fn(c.inputs["lhs_codes"].view(elem), c.inputs["rhs_codes"].view(elem),
                            c.inputs["lhs_scales"].view(sfmt), c.inputs["rhs_scales"].view(sfmt))).astype(np.float64)
        A, Bc, _ = block_operands(c)
        X_ok_a = c.inputs["lhs_scales"].view(sfmt).astype(np.float64)
        X_ok_b = c.inputs["rhs_scales"].view(sfmt).astype(np.float64)

        def representable(vs: list[Val], xs: np.ndarray) -> bool:
            if ((xs != 0) & (np.abs(xs) < float(tiny))).any():
                return False  # a scale XLA flushes
            return all(isinstance(v, float) or v == 0 or tiny <= abs(v) <= bf16_max for v in vs)

        e = c.expected
        for m, a in enumerate(A):
            if not representable(a, X_ok_a[m]):
                continue
            for n, b in enumerate(Bc):
                if not representable(b, X_ok_b[:, n]) or row_lsb(a) + row_lsb(b) < EMIN32:
                    continue
                if c.unspecified.get("y") is not None and c.unspecified["y"][m, n]:
                    continue
                g = got[m, n]
                if np.isnan(e["y"][m, n]) or np.isinf(e["y"][m, n]):
                    assert (np.isnan(g) and np.isnan(e["y"][m, n])) or g == e["y"][m, n], (c.id, m, n, g)
                else:
                    assert math.isfinite(g), (c.id, m, n, g)
                    S = exact_sum([mul(x, y) for x, y in zip(a, b)])
                    assert abs(Fraction(g) - S) <= Fraction(float(e["bound"][m, n])), (c.id, m, n, g, float(S))
                    assert e["y_lo"][m, n] <= g <= e["y_hi"][m, n], (c.id, m, n)
                    if e["bound"][m, n] == 0:
                        assert g == e["y"][m, n]
                        bit_exact += 1
                compared += 1
    print(f"jax.lax.scaled_dot: {compared} results compared, {bit_exact} bit for bit (zero bound)")
    assert compared >= 600 and bit_exact >= 150, (compared, bit_exact)


# ---------------------------------------------------------------------------------------------------------
# qdq_matmul (recipes.md §5)
# ---------------------------------------------------------------------------------------------------------
def qdq_operands(c: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(a codes, b codes, a scale, b scale) by numpy float32 arithmetic and ml_dtypes casts (recipes.md §3.2
    amax_over_max, §3.3 scaled casts, per tensor unless given)."""
    p = c.params

    def scale(x: np.ndarray, fmt: str) -> np.ndarray:
        am = F32(np.nan) if np.isnan(x).any() else np.abs(x).max()
        with np.errstate(all="ignore"):
            return np.asarray(am / F32(FP8_MAX[fmt]) if (am > 0 and np.isfinite(am)) else F32(1), F32)

    sa = c.inputs["a_scale"] if "a_scale" in c.inputs else scale(c.inputs["a"], p["a_format"])
    sb = c.inputs["b_scale"] if "b_scale" in c.inputs else scale(c.inputs["b"], p["b_format"])
    qa, _ = numpy_scaled_qdq(c.inputs["a"], sa, p["a_format"], "divide", False)
    qb, _ = numpy_scaled_qdq(c.inputs["b"], sb, p["b_format"], "divide", False)
    return qa, qb, sa, sb


def test_qdq_matmul_exact_fractions(cases):
    results = 0
    for c in by_op(cases, "qdq_matmul"):
        p = c.params
        assert p["division"] == "divide" and p["formula"] == "amax_over_max" and not p["ftz"]
        qa, qb, sa, sb = qdq_operands(c)
        assert same_codes(qa, c.expected["a_codes"], p["a_format"]).all(), c.id
        assert same_codes(qb, c.expected["b_codes"], p["b_format"]).all(), c.id
        if "a_scale" in c.expected:
            assert bits(c.expected["a_scale"]) == bits(sa) and bits(c.expected["b_scale"]) == bits(sb), c.id
        va = qa.view(ML[p["a_format"]]).astype(np.float64)
        vb = qb.view(ML[p["b_format"]]).astype(np.float64)
        s_ab = np.broadcast_to((np.asarray(sa, F32) * np.asarray(sb, F32)).astype(F32), (va.shape[0], vb.shape[1]))
        acc = p["accumulation"]
        K = va.shape[1]
        A = [vals(r) for r in va]
        Bc = [vals(col) for col in vb.T]
        for m, a in enumerate(A):
            for n, b in enumerate(Bc):
                terms = [mul(x, y) for x, y in zip(a, b)]
                s = Fraction(float(s_ab[m, n]))
                S_u = exact_sum(terms)
                order = acc["order"]
                accv = {"exact": rn(S_u), "any": rn(S_u)}.get(order)
                if order == "sequential":
                    accv = seq(terms)
                elif order == "pairwise":
                    accv = pairwise(terms)
                y = rn(mul(accv, s))  # Flax out_dq: fl32(acc * fl32(s_a s_b))
                if order != "any":
                    check_result(c, m, n, y, S_u, None, False)
                elif isinstance(S_u, float):
                    check_result(c, m, n, y, S_u, Fraction(0), False)
                else:
                    asum = sum((abs(t) for t in terms), Fraction(0))
                    q = row_lsb(a) + row_lsb(b)
                    det, _, over0 = level_bound(asum, q, K, 2 * K + 2)
                    pow2 = s.numerator & (s.numerator - 1) == 0 and s.denominator & (s.denominator - 1) == 0
                    _, b1, over1 = level_bound(asum * s, q + lsb(s), K + (0 if pow2 else 1), 2 * K + 3)
                    bound = Fraction(0) if det else b1
                    unspec = (over0 or over1) and not det
                    check_result(c, m, n, y, S_u * s, bound, unspec, det_value=y)
                results += 1
    assert results >= 56 * 64


# ---------------------------------------------------------------------------------------------------------
# hadamard (transforms.md): the exact cases with a dyadic coefficient, in Fractions
# ---------------------------------------------------------------------------------------------------------
def test_hadamard_exact_cases_in_fractions(cases):
    """y = c H D x (inverse: c' D H y) with H[i, j] = (-1)^popcount(i & j) built here, c = 2^(-m/2) for even m
    (1 unnormalized, 1/n for the unnormalized inverse), summed in Fractions and rounded once (tests/test_uniform's
    rn: nearest even, overflow to +-Inf); a row holding NaN, or +Inf and -Inf that meet, gives NaN."""
    hc = by_op(cases, "hadamard")
    assert len(hc) == 16
    assert {c.params["arithmetic"] for c in hc} == {"exact", "fma_sequential_float32", "dot_pairs_bfloat16"}
    checked = 0
    for case in hc:
        p = case.params
        n = p["n"]
        m = n.bit_length() - 1
        if p["arithmetic"] != "exact" or (p["normalize"] and m % 2):
            continue
        x = case.inputs["x"]
        dt = "bfloat16" if x.dtype == np.dtype(ml_dtypes.bfloat16) else x.dtype.name
        signs = case.inputs.get("signs", np.ones(n, dtype=np.int8)).astype(int)
        c = Fraction(1, 2 ** (m // 2)) if p["normalize"] else Fraction(1, n) if p["inverse"] else Fraction(1)
        y = case.expected["y"].astype(np.float64)
        for r in range(x.shape[0]):
            row = x[r].astype(np.float64)
            for i in range(n):
                coef = [(-1) ** bin(i & j).count("1") * (signs[j] if not p["inverse"] else signs[i])
                        for j in range(n)]
                terms = [k * v for k, v in zip(coef, row)]
                if any(np.isnan(t) for t in terms) or ({math.inf, -math.inf} <= set(terms)):
                    assert np.isnan(y[r, i]), (case.id, r, i)
                    continue
                inf = [t for t in terms if math.isinf(t)]
                exact = Fraction(0) if inf else sum(Fraction(t) for t in terms) * c
                if inf or abs(exact) >= 2**1024:  # beyond every dtype (rn's copysign needs a float-sized value)
                    want = inf[0] if inf else (math.inf if exact > 0 else -math.inf)
                else:
                    want = round_nearest(exact, dt)
                got = y[r, i]
                assert (got == want and np.signbit(got) == np.signbit(float(want))) or (want == 0 and got == 0), (
                    case.id, r, i, got, want)
                checked += 1
    assert checked > 1500
