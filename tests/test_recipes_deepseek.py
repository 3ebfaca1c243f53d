"""DeepSeek-V3 FP8 division casts (recipes.md §12.2) and recipes (§13): the activation cast held bit for bit to
the real act_quant Triton kernel (inference/kernel.py at 9b4e978, run by Triton's CPU interpreter:
tests/peers/deepseek_v3), the float32-rounded logarithm of UE8M0 scales proven next to every power of two, and
the 128 x 128 weight cast against an independent numpy implementation of the report's formula."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal, getcontext
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.recipes.linear import get_recipe, linear_step
from qref.recipes.multiplier import DEEPSEEK_V3, DEEPSEEK_V3_1, DivisionCast, DivisionRules, ceil_log2_pow2

PEER = Path(__file__).parent / "peers" / "deepseek_v3"
DT = {"float32": (np.float32, np.int32), "bfloat16": (ml_dtypes.bfloat16, np.int16)}
RECIPE = {"none": "deepseek_v3_fp8", "ue8m0": "deepseek_v3_1_fp8"}


def _load(name: str) -> np.ndarray:
    return np.load(PEER / f"{name}.npy", allow_pickle=False)


def _x(dtype: str) -> np.ndarray:
    return _load(f"{dtype}__x").view(DT[dtype][0])


def _e4m3_ties_and_subnormals(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(quotients exactly halfway between two E4M3 values, quotients in E4M3's subnormal range), from the grid."""
    a = np.abs(q.astype(np.float64))
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -6)
    step = np.exp2(e - 3)  # E4M3 spacing at a's binade (subnormals: 2^-9)
    r = a / step
    tie = (a <= 464) & (r - np.floor(r) == 0.5)
    return tie, (a > 0) & (a < 2.0**-6)


def test_act_quant_equals_the_triton_kernel() -> None:
    """The fprop activation operand of deepseek_v3_fp8 / deepseek_v3_1_fp8 (1 x 128 division cast) on the kernel's
    own vectors: scales and float32 quotients x / s bit for bit, codes equal to the round-to-nearest-even E4M3 cast
    of the kernel's quotient (the GPU's cvt.rn.satfinite)."""
    man = json.loads((PEER / "manifest.json").read_text())
    assert man["commit"].startswith("9b4e978") and man["tile"] == 128
    for fname, digest in man["files"].items():  # the committed vectors are the ones the script wrote
        assert hashlib.sha256((PEER / fname).read_bytes()).hexdigest() == digest, fname
    n = 0
    for dtype in ("float32", "bfloat16"):
        x = _x(dtype)
        for fmt, rname in RECIPE.items():
            rule = get_recipe(rname).fprop[0]
            assert rule.cast == "division" and rule.tile == (1, 128)
            _, o = rule.quantize(x)
            assert not o["unspecified"].any()
            key = f"{dtype}__{fmt}"
            assert np.array_equal(o["scales"].view(np.int32), _load(f"{key}__scale")), key
            assert np.array_equal(o["quotients"].view(np.int32), _load(f"{key}__quotient")), key
            assert np.array_equal(o["codes"], _load(f"{key}__codes_rne")), key
            n += o["codes"].size
    assert n == sum(man["elements"].values()) == 73_728


def test_interpreter_cast_differs_only_at_ties_and_subnormals() -> None:
    """Triton's interpreter converts float32 to E4M3 by its own bit manipulation (triton/runtime/interpreter.py
    ``_convert_float``): it rounds exact ties away from zero, truncates E4M3 subnormals, and a round-up that
    carries into the next binade loses the carry. qref (and the GPU's RNE cast) differ from the interpreter's
    codes exactly there, and on every other element the interpreter's codes equal qref's."""
    fmt8 = qref.get_format("float8_e4m3fn")
    kinds = {"tie": 0, "subnormal": 0, "carry": 0}
    for dtype in ("float32", "bfloat16"):
        x = _x(dtype)
        for fmt, rname in RECIPE.items():
            _, o = get_recipe(rname).fprop[0].quantize(x)
            interp = _load(f"{dtype}__{fmt}__codes_interpreter")
            tie, sub = _e4m3_ties_and_subnormals(o["quotients"])
            diff = o["codes"] != interp
            v = np.abs(qref.decode(o["codes"], fmt8, dtype=np.float64))
            qa = np.abs(o["quotients"].astype(np.float64))
            binade_q = np.floor(np.log2(np.where(qa > 0, qa, 1)))
            carry = (v > qa) & (np.frexp(v)[0] == 0.5) & (binade_q < np.log2(np.where(v > 0, v, 1)))
            assert not (diff & ~tie & ~sub & ~carry).any(), (dtype, fmt)
            kinds["tie"] += int((diff & tie).sum())
            kinds["subnormal"] += int((diff & sub & ~tie).sum())
            kinds["carry"] += int((diff & carry & ~sub & ~tie).sum())
            # at ties qref rounds to even: the code's last significand bit is 0
            assert (o["codes"][tie & ~sub] & 1 == 0).all()
            assert (np.abs(v - np.abs(o["quotients"])) <= 2.0**-10 + 1e-300)[sub].all()
    assert min(kinds.values()) > 100, kinds


def _expected_ceil_exponent(s: np.float32) -> int:
    """ceil(RN32(log2 s)) with log2 from 50-digit decimal arithmetic (no tie can occur: log2 s is irrational
    unless s is a power of two, where it is an integer)."""
    getcontext().prec = 50
    lg = Decimal(float(s)).ln() / Decimal(2).ln()
    n = int(lg.to_integral_value(rounding="ROUND_CEILING"))
    if lg == n:
        return n
    lo = np.float32(n - 1)  # RN32(lg) = n - 1 when lg lies below the midpoint to the next float32 up
    gap = Decimal(float(np.nextafter(lo, np.float32(np.inf)))) - Decimal(float(lo))
    return n - 1 if lg - Decimal(n - 1) < gap / 2 else n


def test_ceil_log2_is_the_correctly_rounded_float32_logarithm_next_to_powers_of_two() -> None:
    """ceil(RN32(log2 s)) can differ from ceil(log2 s) only for s just above a power of two (RN32 collapses
    log2 s onto the integer). On every float32 s within 64 ulps above and 16 below every power of two
    2^-126..2^126 the model equals the correctly rounded logarithm's ceiling, and it departs from the exact
    ceiling there (the float32 rounding is observable)."""
    ks = np.arange(-126, 127)  # (above 2^127 the scale 2^128 is +Inf; act_quant's s stays below 2^120)
    base = np.ldexp(np.float32(1), ks).astype(np.float32).view(np.int32)
    offs = np.arange(-16, 65)
    s = (base[:, None] + offs[None, :]).astype(np.int32).view(np.float32).reshape(-1)
    s = s[np.isfinite(s)]
    r = ceil_log2_pow2(s).astype(np.float64)
    m, e = np.frexp(r)
    assert (m == 0.5).all()
    got = e.astype(np.int64) - 1
    want = np.array([_expected_ceil_exponent(v) for v in s])
    assert np.array_equal(got, want)
    exact = np.array([int(np.ceil(Decimal(float(v)).ln() / Decimal(2).ln())) for v in s])
    assert (got != exact).sum() > 500  # e.g. s = 2^10 (1 + 2^-23): RN32(log2 s) = 10, the scale stays 2^10


def _numpy_division_cast(x: np.ndarray, tile: tuple[int, int], ue8m0: bool) -> tuple[np.ndarray, np.ndarray]:
    """The report's / act_quant's formula per 2-D tile, written with numpy float32 and ml_dtypes: (codes, s)."""
    r, c = tile
    xf = x.astype(np.float32)
    R, C = xf.shape
    s = np.empty((-(-R // r), -(-C // c)), np.float32)
    y = np.empty_like(xf)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            blk = xf[i * r:(i + 1) * r, j * c:(j + 1) * c]
            amax = np.maximum(np.abs(blk).max(), np.float32(1e-4))
            sc = np.float32(amax / np.float32(448.0))
            if ue8m0:
                sc = np.float32(2.0 ** np.ceil(np.float32(np.log2(np.float64(sc)))))
            s[i, j] = sc
            y[i * r:(i + 1) * r, j * c:(j + 1) * c] = blk / sc
    return y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8), s


@pytest.mark.parametrize("fmt", ["none", "ue8m0"])
def test_weight_blocks_and_the_recipe_layouts(fmt: str) -> None:
    """The 128 x 128 weight cast (modelled from the report: act_quant's formula per block) equals an independent
    numpy implementation; dgrad's wᵀ blocks are fprop's w blocks transposed (a block's amax does not depend on
    the layout); wgrad's operands are 1 x 128 tiles along M (128 x 1 tiles of dy and x)."""
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((256, 384)) * np.exp2(rng.integers(-20, 20, (256, 1)))).astype(np.float32)
    w[:128, 128:256] = 0.0  # an all-zero block: the 1e-4 floor sets its scale
    w[128:, :128] *= np.float32(1e-7)  # a block under the floor
    r = get_recipe(RECIPE[fmt])
    _, o = r.fprop[1].quantize(w)
    want_codes, want_s = _numpy_division_cast(w, (128, 128), fmt == "ue8m0")
    assert np.array_equal(o["scales"].view(np.int32), want_s.view(np.int32))
    assert np.array_equal(o["codes"], want_codes)
    _, ot = r.dgrad[1].quantize(np.ascontiguousarray(w.T))
    assert np.array_equal(ot["codes"], o["codes"].T) and np.array_equal(ot["scales"], o["scales"].T)
    x = rng.standard_normal((256, 128)).astype(np.float32)
    _, ox = r.wgrad[1].quantize(np.ascontiguousarray(x.T))
    want_codes, want_s = _numpy_division_cast(x, (128, 1), fmt == "ue8m0")
    assert np.array_equal(ox["codes"], want_codes.T) and np.array_equal(ox["scales"], want_s.T)


def test_division_cast_rules_and_errors() -> None:
    """The floor is compared in float32; tiles with NaN / Inf are unspecified; bad rules and inputs are refused
    with the fix."""
    c = DivisionCast(qref.get_format("float8_e4m3fn"), (1, 4), DEEPSEEK_V3)
    o = c.quantize(np.array([[0.0, 0.0, 0.0, 0.0], [1.0, np.nan, 2.0, 3.0]], np.float32))
    assert o["scales"][0, 0] == np.float32(np.float32(1e-4) / np.float32(448))
    assert o["unspecified"][1].all() and not o["unspecified"][0].any()
    assert np.array_equal(c.dequantize(o["codes"][:1], o["scales"][:1]), np.zeros((1, 4), np.float32))
    with pytest.raises(qref.QrefError, match="power-of-two rule"):
        DivisionRules(pow2="floor")
    with pytest.raises(qref.QrefError, match="amax_floor"):
        DivisionRules(amax_floor=-1.0)
    with pytest.raises(qref.QrefError, match="float32, bfloat16 or float16"):
        DivisionCast(qref.get_format("float8_e4m3fn"), (1, 4), DEEPSEEK_V3_1).quantize(np.ones((1, 4)))


def test_deepseek_recipes_run_and_are_quantized() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((128, 256)).astype(np.float32)
    w = (rng.standard_normal((128, 256)) * 0.05).astype(np.float32)
    g = (rng.standard_normal((128, 128)) * 1e-3).astype(np.float32)
    for name in RECIPE.values():
        st = linear_step(x, w, g, get_recipe(name), gemm="float64")
        for k, ref in st.reference.items():
            rel = np.linalg.norm(st.results[k] - ref) / np.linalg.norm(ref)
            assert 1e-4 < rel < 0.1, (name, k, rel)
