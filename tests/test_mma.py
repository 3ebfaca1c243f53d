"""qref.mma against mmasim 2.1.1, bit for bit (outputs as unsigned integers, NaN bits included) (mma.md §8).

- every one of the 4,999 instructions mmasim models: the record's shape, formats and arithmetic parameters equal
  the mmasim object's (``test_every_instruction_record_equals_mmasim``), and 18 outputs of each (9 patterns x 2)
  equal its own mmasim object's (``test_every_instruction_outputs_equal_mmasim``);
- outputs: one tile per (arch, instruction, m, k, operand types) - every instruction shares its arithmetic with
  one of these 369 tiles, the other n only widen the tile - and 9 seeded random and adversarial patterns of
  inner products per distinct arithmetic signature (293), NaN/Inf, subnormals, cancellation, exponent spread,
  zero products, C dominating and block scales at their extremes included.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_mma_oracle as O

import qref.mma as qm
from qref.errors import QrefError

torch = O.torch

ALL = qm.instructions()


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> object:
    """mmasim's many small calls run faster on one PyTorch thread (and leave the other core to the suite)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _signature(ins: qm.Instruction) -> tuple[object, ...]:
    return (ins.arch, ins.instruction, ins.a_format, ins.b_format, ins.c_format, ins.d_format, ins.k,
            ins.arithmetic, ins.scale_format, ins.block_size)


def _tile_key(ins: qm.Instruction) -> tuple[object, ...]:
    return (ins.arch, ins.instruction, ins.m, ins.k, ins.a_format, ins.b_format, ins.c_format, ins.d_format,
            ins.scale_format, ins.block_size)


SIGNATURES = list({_signature(i): i for i in reversed(ALL)}.values())
TILES = list({_tile_key(i): i for i in reversed(ALL)}.values())


def test_coverage_counts() -> None:
    assert len(ALL) == 4999
    assert len(SIGNATURES) == 293 and len(TILES) == 369
    kinds = {(i.arch, i.instruction) for i in ALL}
    assert len(kinds) == 14
    assert {i.arch for i in ALL} == set(qm.ARCHS)
    assert {i.instruction for i in ALL} == set(qm.KINDS)
    assert {type(i.arithmetic).__name__ for i in ALL} == {a.__name__ for a in qm.ALGORITHMS}


_TORCH_FORMAT = {"tf32": "float32", "ue4m3": "float8_e4m3fn", "float6_e3m2fn": "uint8", "float6_e2m3fn": "uint8",
                 "float4_e2m1fn": "uint8"}
_RHO = {("toward_zero", 23): "RZ-FP32", ("toward_zero", 13): "RZ-E8M13", ("nearest_even", 10): "RNE-FP16"}


def _mmasim_params(op: object) -> tuple[object, ...]:
    a = op.arithmetic_op  # type: ignore[attr-defined]
    name = type(a).__name__
    if name in ("MMA_T_FDPA", "MMA_ST_FDPA"):
        return name, a.F, a.rho, a.L_max, a.e_zero
    if name == "MMA_GST_FDPA":
        return name, a.G, a.F, a.rho, a.L_max, a.e_zero
    if name in ("MMA_TR_FDPA", "MMA_GTR_FDPA"):
        return name, a.F, a.F2, a.rho, a.L_max
    if name == "MMA_E_FDPA":
        return name, a.L_max
    if name == "MMA_FTZ_MUL_ADD":
        return name, a.P
    return (name,)


def _qref_params(ins: qm.Instruction) -> tuple[object, ...]:
    a = ins.arithmetic
    if isinstance(a, qm.TruncatedFusedDot):
        out = "RNE-FP16" if ins.d_format == "float16" else _RHO[(a.output_rounding, a.output_frac_bits)]
        name = "MMA_ST_FDPA" if isinstance(a, qm.ScaledTruncatedFusedDot) else "MMA_T_FDPA"
        return name, a.frac_bits, out, a.chunk, a.zero_exponent
    if isinstance(a, qm.GroupScaledFusedDot):
        return "MMA_GST_FDPA", a.group_size, a.frac_bits, "RZ-FP32", a.chunk, a.zero_exponent
    if isinstance(a, qm.TwoStageFusedDot):
        name = "MMA_GTR_FDPA" if a.interleave == 2 else "MMA_TR_FDPA"
        return name, a.frac_bits, a.sum_frac_bits, "RNE-FP32", a.chunk
    if isinstance(a, qm.ExactFusedDot):
        return "MMA_E_FDPA", a.chunk
    if isinstance(a, qm.FlushedMulAdd):
        return "MMA_FTZ_MUL_ADD", a.adder_width
    return ("MMA_FMA",)


def test_every_instruction_record_equals_mmasim() -> None:
    """All 4,999 instructions: shape, operand types and arithmetic parameters equal mmasim's objects."""
    bad = []
    for ins in ALL:
        op = O.oracle(ins)
        mine = _qref_params(ins)
        theirs = _mmasim_params(op)
        ok = mine == theirs and (op.m, op.n, op.k) == (ins.m, ins.n, ins.k)
        if ins.arithmetic.family in ("T-FDPA", "ST-FDPA"):
            ok &= min(ins.k, ins.arithmetic.chunk) == min(ins.k, op.arithmetic_op.L_max)
        for ours, attr in ((ins.a_format, "a_type"), (ins.b_format, "b_type"), (ins.c_format, "c_type"),
                           (ins.d_format, "d_type")):
            ok &= str(getattr(op, attr)).removeprefix("torch.") == _TORCH_FORMAT.get(ours, ours)
        if ins.scaled:
            ok &= str(op.s_type).removeprefix("torch.") == _TORCH_FORMAT.get(ins.scale_format, ins.scale_format)
            ok &= op.block_size == ins.block_size
        if not ok:
            bad.append((ins.name, mine, theirs))
    assert not bad, bad[:5]


@pytest.mark.parametrize("ins", SIGNATURES, ids=[i.name for i in SIGNATURES])
def test_inner_products_equal_mmasim(ins: qm.Instruction) -> None:
    """9 random and adversarial patterns x 48 inner products per arithmetic signature, one mmasim call."""
    rng = np.random.default_rng(SIGNATURES.index(ins))
    parts = list(O.cases(ins, rng, 48))
    # two calls: the patterns with NaN / Inf operands, and the finite ones (the code has a path for each)
    for group in ([p for p in parts if "NaN" in p[0]], [p for p in parts if "NaN" not in p[0]]):
        names = [p for p, _ in group for _ in range(48)]
        cat = [np.concatenate([c[j] for _, c in group]) if group[0][1][j] is not None else None for j in range(5)]
        got = O.bits(ins.dot(*cat))
        exp = O.run_oracle_dot(ins, *cat)
        assert got.dtype == exp.dtype and got.shape == exp.shape == (len(names),)
        bad = np.nonzero(got != exp)[0]
        assert bad.size == 0, [(names[i], hex(got[i]), hex(exp[i])) for i in bad[:5]]


@pytest.mark.parametrize("ins", TILES, ids=[i.name for i in TILES])
def test_tile_equals_mmasim(ins: qm.Instruction) -> None:
    """model(A, B, C[, scale_a, scale_b]) == mmasim's instruction on one seeded tile (1% NaN/Inf)."""
    rng = np.random.default_rng(TILES.index(ins) + 1000)
    A = O.random_codes(rng, ins.a_format, (ins.m, ins.k), 0.01)
    B = O.random_codes(rng, ins.b_format, (ins.k, ins.n), 0.01)
    C = O.random_codes(rng, ins.c_format, (ins.m, ins.n), 0.01)
    sa = sb = None
    if ins.scaled:
        assert ins.block_size is not None and ins.scale_format is not None
        nb = ins.k // ins.block_size
        sa = O.random_codes(rng, ins.scale_format, (ins.m, nb))
        sb = O.random_codes(rng, ins.scale_format, (nb, ins.n))
    got = O.bits(ins(A, B, C, sa, sb))
    exp = O.run_oracle_tile(ins, A, B, C, sa, sb)
    assert got.shape == exp.shape == (ins.m, ins.n)
    assert (got == exp).all(), int((got != exp).sum())


def test_long_k_chains_chunks_like_mmasim() -> None:
    """dot with K = 4 chunks: chunk results feed the next chunk as c (mma.md §3.1), as mmasim's dpa."""
    for q in (("Ampere", "mma", "m16n8k16.f32.bf16.bf16.f32"), ("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3"),
              ("CDNA3", "mfma", "f32_16x16x32_fp8_fp8"), ("CDNA1", "mfma", "f32_32x32x8f16"),
              ("CDNA2", "mfma", "f32_32x32x8bf16_1k")):
        ins = qm.get(*q)
        rng = np.random.default_rng(7)
        K = 4 * max(ins.k, 16)
        a = O.random_codes(rng, ins.a_format, (64, K), 0.01)
        b = O.random_codes(rng, ins.b_format, (64, K), 0.01)
        c = O.random_codes(rng, ins.c_format, (64,), 0.01)
        assert (O.bits(ins.dot(a, b, c)) == O.run_oracle_dot(ins, a, b, c)).all(), q


def test_known_values() -> None:
    """Hand-checked semantics (mma.md §3.2 examples): Hopper FP8 wgmma keeps F = 13 fractional bits."""
    import ml_dtypes

    ins = qm.get("Hopper", "wgmma", "m64n8k32.f32.e5m2.e5m2")
    a = np.zeros(32, ml_dtypes.float8_e5m2)
    b = np.zeros(32, ml_dtypes.float8_e5m2)
    a[:2] = [1.0, 2.0**-14]
    b[:2] = [1.0, 1.0]
    zero = np.float32(0.0)
    assert ins.dot(a, b, zero) == np.float32(1.0)  # 2^-14 lies beyond F = 13 bits below e_max = 0
    a[1] = 2.0**-13
    assert ins.dot(a, b, zero) == np.float32(1.0 + 2.0**-13)
    assert ins.dot(a, b, np.float32(2.0**-14)) == np.float32(1.0 + 2.0**-13)  # c is aligned and truncated too
    a[:3] = [1.5, 1.5, 2.0**-13]
    b[:3] = [1.0, 1.0, 1.0]
    assert ins.dot(a, b, zero) == np.float32(3.0)  # 3 + 2^-13: the E8M13 output keeps 13 bits below 2^1
    assert qm.get("Hopper", "wgmma", "m64n8k16.f32.f16.f16").dot(
        a.astype(np.float16)[:16], b.astype(np.float16)[:16], zero) == np.float32(3.0 + 2.0**-13)  # F = 25
    a[0] = np.nan
    assert O.bits(np.asarray(ins.dot(a, b, zero))).item() == 0x7FFFFFFF  # canonical NaN
    z = ins.dot(-np.zeros(32, ml_dtypes.float8_e5m2), b, np.float32(-0.0))
    assert O.bits(np.asarray(z)).item() == 0  # zero results are +0


def test_errors() -> None:
    with pytest.raises(QrefError, match=r"known|did you mean"):
        qm.get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m2")
    with pytest.raises(QrefError):
        qm.get("Pascal", "mma", "m8n8k4.f32.f16.f16.f32")
    with pytest.raises(QrefError, match="has no"):
        qm.get("Volta", "wgmma", "m64n8k16.f32.f16.f16")
    ins = qm.get("Hopper", "wgmma", "m64n8k16.f32.f16.f16")
    with pytest.raises(QrefError, match="dtype"):
        ins(np.zeros((64, 16)), np.zeros((16, 8), np.float16), np.zeros((64, 8), np.float32))
    with pytest.raises(QrefError, match="shape"):
        ins(np.zeros((64, 8), np.float16), np.zeros((8, 8), np.float16), np.zeros((64, 8), np.float32))
    bs = qm.get("RTX Blackwell", "mma.block_scale", "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0")
    with pytest.raises(QrefError, match="scale"):
        bs.dot(np.zeros((1, 64), O._dtype("float4_e2m1fn")), np.zeros((1, 64), O._dtype("float4_e2m1fn")),
               np.zeros(1, np.float32))


def test_user_defined_unit() -> None:
    """A user record (mma.md §6): an 8-wide FP8 dot unit with F = 40 and RNE FP32 output, against an exact
    oracle: F = 40 keeps every bit of E4M3 products (35 binades), so the result is the exact sum rounded once."""
    from fractions import Fraction

    import ml_dtypes

    unit = qm.custom("npu_dot8", 1, 1, 8, "float8_e4m3fn", "float8_e4m3fn", "float32", "float32",
                     qm.TruncatedFusedDot(frac_bits=40, chunk=8, zero_exponent=-200, output_rounding="nearest_even"))
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((500, 8)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((500, 8)) * 4).astype(ml_dtypes.float8_e4m3fn)
    c = np.zeros(500, np.float32)
    got = unit.dot(a, b, c)
    exact = [sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(ra, rb)) for ra, rb in zip(a, b)]
    want = np.array([float(e) for e in exact], np.float64).astype(np.float32)  # one rounding: |sum| < 2^53
    assert (O.bits(got) == O.bits(want)).all()


def _rne_fraction(x: object, mant: int, emin: int, emax: int) -> float:
    """Round a Fraction to nearest even with `mant` fraction bits, subnormals below 2^emin, Inf above emax."""
    from fractions import Fraction

    x = Fraction(x)
    if x == 0:
        return 0.0
    s = -1.0 if x < 0 else 1.0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    q = a / Fraction(2) ** (e - mant)
    n, r = divmod(q.numerator, q.denominator)
    if 2 * r > q.denominator or (2 * r == q.denominator and n % 2):
        n += 1
    if n >= 2 ** (mant + 1):
        n //= 2
        e += 1
    if e > emax:
        return s * float("inf")
    return s * float(Fraction(n) * Fraction(2) ** (e - mant))


def _tie_triples(rng: np.random.Generator, n: int, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b random; c = -fl(a b) + a multiple of half an ulp (ties, cancellations), also in the subnormal range."""
    fi = np.finfo(dtype)
    e = rng.integers(fi.minexp // 2 - 30, fi.maxexp // 2, size=n)
    a = (rng.choice([-1, 1], n) * (1 + rng.random(n)) * np.exp2(e.astype(np.float64))).astype(dtype)
    b = ((1 + rng.integers(0, 2**8, n) / 2**8) * np.exp2(rng.integers(-40, 2, n).astype(np.float64))).astype(dtype)
    with np.errstate(all="ignore"):
        p = (a.astype(np.float64) * b.astype(np.float64)).astype(dtype)
        ulp = np.spacing(np.abs(p)).astype(dtype)
        c = (-p + rng.integers(-3, 4, n).astype(dtype) * ulp / dtype(2)).astype(dtype)
    c = np.where(np.isfinite(c), c, dtype(1.0))
    # exact ties: c + odd * ulp(c) / 2 with the product a b = odd * ulp(c) / 2 exactly (b a power of two)
    m = n // 2
    C = (rng.choice([-1, 1], m) * (1 + rng.random(m)) * np.exp2(rng.integers(fi.minexp, fi.maxexp - 2, m)
                                                               .astype(np.float64))).astype(dtype)
    odd = (2 * rng.integers(0, 2**10, m) + 1).astype(np.float64) * rng.choice([-1, 1], m)
    bt = np.exp2(rng.integers(-4, 5, m).astype(np.float64))
    at = (odd * np.spacing(np.abs(C)).astype(np.float64) / 2 / bt).astype(dtype)
    ok = np.isfinite(at) & (at != 0)
    return (np.concatenate([a, at[ok]]), np.concatenate([b, bt[ok].astype(dtype)]),
            np.concatenate([c, C[ok]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_against_exact_fractions(dtype: type) -> None:
    """The FMA chain's fused multiply-add (mma.md §3.7) against exact arithmetic on ties, cancellations and
    subnormal results (independent of mmasim)."""
    from fractions import Fraction

    from qref.core.arith import fma64
    from qref.mma.bits import fma32

    rng = np.random.default_rng(11)
    a, b, c = _tie_triples(rng, 3000, dtype)
    got = (fma64 if dtype is np.float64 else fma32)(a, b, c)
    fi = np.finfo(dtype)
    mant, emin, emax = fi.nmant, fi.minexp, fi.maxexp - 1
    want = np.array([_rne_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), mant, emin, emax)
                     for x, y, z in zip(a, b, c)]).astype(dtype)
    assert (O.bits(got) == O.bits(want)).all(), int((O.bits(got) != O.bits(want)).sum())
    assert (np.abs(got) < fi.smallest_normal).sum() > 10 and (got == 0).sum() > 10  # subnormal and zero results


def test_exact_fused_dot_against_fractions() -> None:
    """E-FDPA (mma.md §3.6 C1): the exact sum of bf16 products and c, rounded once to float32, at float32 ties."""
    from fractions import Fraction

    import ml_dtypes

    ins = qm.get("CDNA1", "mfma", "f32_4x4x2bf16")
    rng = np.random.default_rng(12)
    n = 2000
    a = (rng.standard_normal((n, 2)) * np.exp2(rng.integers(-20, 20, (n, 2)))).astype(ml_dtypes.bfloat16)
    b = (rng.standard_normal((n, 2)) * np.exp2(rng.integers(-20, 20, (n, 2)))).astype(ml_dtypes.bfloat16)
    p = a.astype(np.float64) * b.astype(np.float64)
    c32 = (p[:, 0] + p[:, 1]).astype(np.float32)
    # c placed so the exact sum is a float32 tie plus or minus a tiny product
    half = (np.spacing(np.abs(c32)) / 2).astype(np.float32)
    c = (-(p[:, 0]).astype(np.float32) + half * rng.choice([-1, 1], n).astype(np.float32)).astype(np.float32)
    got = ins.dot(a, b, c)
    want = np.array([_rne_fraction(Fraction(float(x0)) * Fraction(float(y0)) + Fraction(float(x1)) * Fraction(
        float(y1)) + Fraction(float(z)), 23, -126, 127) for (x0, x1), (y0, y1), z in
        zip(a.astype(np.float64), b.astype(np.float64), c)]).astype(np.float32)
    assert (O.bits(got) == O.bits(want)).all(), int((O.bits(got) != O.bits(want)).sum())


def test_records_refuse_int64_overflow() -> None:
    import ml_dtypes

    with pytest.raises(QrefError, match="frac_bits"):
        qm.TruncatedFusedDot(frac_bits=60, chunk=8, zero_exponent=-133)
    unit = qm.custom("wide", 1, 1, 64, "float8_e4m3fn", "float8_e4m3fn", "float32", "float32",
                     qm.GroupScaledFusedDot(16, 36, 64, -139), scale_format="ue4m3", block_size=16)
    x = np.full((1, 64), 448.0, ml_dtypes.float8_e4m3fn)
    s = np.full((1, 4), 448.0, ml_dtypes.float8_e4m3fn)
    with pytest.raises(QrefError, match="2\\^62"):  # 4 group sums of 16 x 448^4 at 36 fractional bits
        unit.dot(x, x, np.zeros(1, np.float32), s, s)
    assert unit.dot(x[:, :16], x[:, :16], np.zeros(1, np.float32), s[:, :1], s[:, :1]) == np.float32(16 * 448.0**4)


def test_every_instruction_outputs_equal_mmasim() -> None:
    """All 4,999 instructions, each against its own mmasim object: the 9 patterns x 2 inner products, finite and
    NaN / Inf patterns in separate calls."""
    total, bad = 0, []
    for idx, ins in enumerate(ALL):
        rng = np.random.default_rng(20_000 + idx)
        parts = list(O.cases(ins, rng, 2))
        op = O.oracle(ins)
        for group in ([c for p, c in parts if "NaN" in p], [c for p, c in parts if "NaN" not in p]):
            cat = [np.concatenate([c[j] for c in group]) if group[0][j] is not None else None for j in range(5)]
            got, exp = O.bits(ins.dot(*cat)), O.run_oracle_dot(ins, *cat, op=op)
            total += got.size
            if (got != exp).any():
                bad.append(ins.name)
    assert total == 4999 * 18 and not bad, bad[:5]
