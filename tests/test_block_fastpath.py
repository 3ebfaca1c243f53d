"""The block fast paths (qref/schemes/block_fast.py, docs/spec/block.md §4.10, §5.5) equal the readable reference.

The reference (block_mx.quantize_mx_reference, block_nvfp4.quantize_float_scaled_reference, the dequantize
references) is the oracle here: every test compares the two as unsigned integers (codes, scale bytes, value
bit patterns, masks). Where the domain allows it the comparison is exhaustive: every float16 / bfloat16 value as
an element under every divisor exponent of the plan, every 16-bit value as a block amax, every scale-exponent
input, every float32 in the range where MLX's FP4 argmin is claimed to saturate. Random float32 bit patterns
(NaN, Inf, subnormals, blocks at the exponent limits) cover the mixed fast / reference blocks.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_block_cases import DTYPES, distributions

import qref
from qref.core import arith as ar
from qref.schemes.block import fast as bf
from qref.schemes.block import mx as bm
from qref.schemes.block import nvfp4 as bn

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
MX_NAMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8")
PROFILES = ("ocp", "microxcaling", "torchao_floor", "torchao_rceil", "mlx", "jax", "nvidia", "qwix")


@contextmanager
def reference_only() -> Iterator[None]:
    old = bf.FAST_PATH
    bf.FAST_PATH = False
    try:
        yield
    finally:
        bf.FAST_PATH = old


def u(a: object) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fV" else a


def assert_same_qarray(fast: qref.QArray, ref: qref.QArray) -> None:
    for name in ("codes", "scales", "biases", "unspecified", "global_scale"):
        a, b = getattr(fast, name), getattr(ref, name)
        if a is None or b is None:
            assert a is None and b is None, name
            continue
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        bad = u(a) != u(b)
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} differ"
    assert (fast.meta["scales_unspecified"] == ref.meta["scales_unspecified"]).all()
    assert fast.axis == ref.axis and fast.meta["input_dtype"] == ref.meta["input_dtype"]


def both(s: object, x: np.ndarray, **kw: object) -> qref.QArray:
    with np.errstate(all="ignore"):
        fast = s.quantize(x, **kw)  # type: ignore[attr-defined]
        with reference_only():
            ref = s.quantize(x, **kw)  # type: ignore[attr-defined]
    assert_same_qarray(fast, ref)
    return fast


def schemes() -> list[tuple[str, str]]:
    out = []
    for prof in PROFILES:
        for name in (*MX_NAMES, "nvfp4"):
            try:
                qref.scheme(name, profile=prof)
            except qref.QrefError:
                continue
            out.append((prof, name))
    return out


def count_reference_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many rows each call of the two references gets (the blocks the fast path hands back)."""
    seen: list[int] = []
    for mod, name in ((bm, "quantize_mx_reference"), (bn, "quantize_float_scaled_reference")):
        orig = getattr(mod, name)

        def wrapped(rules: object, f: object, xb: np.ndarray, *a: object, _orig: object = orig) -> object:
            seen.append(xb.shape[0])
            return _orig(rules, f, xb, *a)  # type: ignore[operator]

        monkeypatch.setattr(mod, name, wrapped)
    return seen


# ---------------------------------------------------------------------------------------------------------
# whole quantizers, public API
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("prof,name", schemes(), ids=lambda v: v)
def test_profile_equals_reference_on_all_distributions(prof: str, name: str, dtype: np.dtype) -> None:
    s = qref.scheme(name, profile=prof)
    x = np.concatenate(list(distributions(dtype, 8, 256, seed=31).values()))
    gs = [None]
    if s.kind == "float_scale" and s.global_scale_rule not in ("exact", "input_dtype_clip"):
        gs = [None, np.float32(0.37), np.float32(3000.0)] if prof != "nvidia" else [np.float32(0.37), None]
    for g in gs:
        both(s, x, global_scale=g)


def test_plans_cover_the_profiles() -> None:
    """Which configurations run fast: every profile but jax and qwix (FTZ arithmetic) on the three input dtypes, except
    microxcaling on float32 (its scaled-integer element step in float32 reads more than the rounding bits, §4.7.1;
    on 16-bit inputs it is a table over the 65536 values)."""
    for prof, name in schemes():
        s = qref.scheme(name, profile=prof)
        for dt in DTYPES:
            plan = bf.mx_plan(s.rules, s.format, dt) if s.kind == "mx" else None
            if s.kind == "mx":
                assert (plan is None) == (prof in ("jax", "qwix") or (prof == "microxcaling" and dt == F32)), \
                    (prof, name, dt)
            if plan is not None and prof == "mlx" and dt != F32:
                assert plan.mode == "t16"
        assert bf.mx_plan(s.rules, s.format, np.dtype(np.float64)) is None
    micro = qref.scheme("mxfp6_e2m3", profile="microxcaling")
    assert bf.element_key_table(micro.rules, micro.format) is None


@pytest.mark.parametrize("prof,name", [("mlx", "mxfp8_e4m3"), ("mlx", "mxfp4"), ("mlx", "nvfp4"),
                                       ("ocp", "mxfp8_e4m3"), ("nvidia", "mxfp4"), ("nvidia", "nvfp4"),
                                       ("torchao_floor", "nvfp4")])
def test_ordinary_data_never_leaves_the_fast_path(prof: str, name: str, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    seen = count_reference_rows(monkeypatch)
    s = qref.scheme(name, profile=prof)
    x = np.random.default_rng(3).standard_normal((64, 1024)).astype(np.float32)
    for dt in DTYPES:
        s.quantize(x.astype(dt))
    assert sum(seen) == 0


def test_fast_path_switch_and_mixed_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN / Inf blocks go to the reference row by row; FAST_PATH = False runs the reference only."""
    seen = count_reference_rows(monkeypatch)
    s = qref.scheme("mxfp8_e4m3", profile="mlx")
    x = np.random.default_rng(4).standard_normal((4, 256)).astype(np.float32)
    x[1, 40] = np.nan
    x[2, 100] = -np.inf
    both(s, x)
    assert seen[0] == 2  # the two non-finite blocks
    seen.clear()
    with reference_only():
        s.quantize(x)
    assert seen == [32]


@pytest.mark.parametrize("rounding", ["up", "down", "toward_zero", "odd", "nearest_away", "toward_max_magnitude"])
def test_exact_scaling_with_every_rounding_mode(rounding: str) -> None:
    """compute_dtype 'exact' with a float32 product stands for x * 2^-e only when tiny results encode to a
    signed zero either way (nearest modes); blocks mixing 2^10 with values down to 2^-149 check both sides."""
    rng = np.random.default_rng(7)
    big = np.exp2(rng.integers(0, 120, size=(512, 1))).astype(np.float32)  # scaled tiny values underflow float32
    tiny = (rng.integers(1, 1 << 23, size=(512, 31)).astype(np.uint32)).view(np.float32)  # float32 subnormals
    tiny *= np.where(rng.random((512, 31)) < 0.5, -1, 1).astype(np.float32)
    mid = rng.standard_normal((512, 31)).astype(np.float32) * np.float32(2.0**-120)
    x = np.concatenate([np.hstack([big, tiny]), np.hstack([-big, mid])])
    for name in ("mxfp8_e4m3", "mxfp4", "mxint8"):
        s = qref.scheme(name, profile="ocp", rounding=rounding)
        assert (bf.mx_plan(s.rules, s.format, F32) is None) == (not rounding.startswith("nearest"))
        both(s, x)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_axes_padding_and_odd_block_sizes(axis: int) -> None:
    x = np.random.default_rng(5).standard_normal((6, 37, 10)).astype(np.float32)
    for s in (qref.scheme("mxfp4"), qref.scheme("mxint8"), qref.scheme("float8_e4m3fn", block_size=7),
              qref.scheme("mxfp8_e5m2", block_size=1), qref.scheme("nvfp4", profile="ocp")):
        both(s, x, axis=axis)


def structured_float32(n_blocks: int, k: int, seed: int) -> np.ndarray:
    """Blocks of random float32 bit patterns around a random exponent per block (all of -149..128 reached:
    subnormal, tiny, huge, Inf/NaN exponents), with sprinkled zeros, -0, NaN and Inf."""
    rng = np.random.default_rng(seed)
    center = rng.integers(-10, 265, size=(n_blocks, 1))
    field = np.clip(center + rng.integers(-12, 3, size=(n_blocks, k)), 0, 255)
    bits = (rng.integers(0, 2, size=(n_blocks, k)) << 31) | (field << 23) | rng.integers(0, 1 << 23, (n_blocks, k))
    x = bits.astype(np.uint32).view(np.float32)
    spots = rng.random((n_blocks, k))
    x[spots < 0.01] = 0.0
    x[(spots >= 0.01) & (spots < 0.02)] = -0.0
    return x


@pytest.mark.parametrize("prof,name", [("mlx", "mxfp8_e4m3"), ("mlx", "mxfp4"), ("mlx", "nvfp4"),
                                       ("ocp", "mxfp8_e4m3"), ("ocp", "mxfp4"), ("ocp", "mxint8"),
                                       ("nvidia", "mxfp8_e5m2"), ("torchao_floor", "mxfp6_e3m2"),
                                       ("torchao_rceil", "mxfp6_e2m3"), ("microxcaling", "mxfp4"),
                                       ("nvidia", "nvfp4"), ("torchao_rceil", "nvfp4")])
def test_random_float32_bit_patterns(prof: str, name: str) -> None:
    """About a million float32 values per scheme: structured exponents plus uniformly random bit patterns."""
    s = qref.scheme(name, profile=prof)
    k = s.block_size
    x = structured_float32(24_000, 32, seed=hash((prof, name)) % 1000).reshape(-1, k)
    raw = np.random.default_rng(9).integers(0, 1 << 32, size=(8_000 * 32 // k, k), dtype=np.uint64)
    x = np.concatenate([x, raw.astype(np.uint32).view(np.float32)])
    both(s, x, global_scale=np.float32(3.5) if (prof, name) == ("nvidia", "nvfp4") else None)
    if s.kind == "float_scale":
        both(s, x, global_scale=np.float32(1e-3))


@pytest.mark.parametrize("prof,name", [("mlx", "mxfp8_e4m3"), ("mlx", "mxfp4"), ("mlx", "nvfp4"),
                                       ("ocp", "mxfp8_e4m3"), ("nvidia", "mxfp4"), ("nvidia", "nvfp4"),
                                       ("torchao_floor", "nvfp4")])
@pytest.mark.parametrize("dtype", [F16, BF16], ids=["float16", "bfloat16"])
def test_every_16bit_value_as_block_amax(prof: str, name: str, dtype: np.dtype) -> None:
    """One block per finite 16-bit value v: v leads, the others are v scaled by fixed factors (rounded to the
    dtype), zeros and the smallest subnormal, so each v is the block's amax."""
    s = qref.scheme(name, profile=prof)
    k = s.block_size
    v = finite16(dtype).astype(np.float64)
    factors = np.array([1.0, -0.75, 0.5, -0.3, 0.1234, 2.0**-4, -(2.0**-9), 0.0, -0.0, 2.0**-20, 0.999, -0.01,
                        0.49, 0.26, -0.126, 1e-30][: k] + [0.5] * max(0, k - 16))
    blocks = v[:, None] * factors[None, :k]
    with np.errstate(over="ignore", under="ignore"):
        x = blocks.astype(np.float32).astype(dtype)
    both(s, x)


# ---------------------------------------------------------------------------------------------------------
# the pieces, exhaustively
# ---------------------------------------------------------------------------------------------------------
def finite16(dtype: np.dtype) -> np.ndarray:
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    with np.errstate(invalid="ignore"):
        return x[np.isfinite(x.astype(np.float32))]


PLAN_CASES = [("mlx", "mxfp8_e4m3", F16), ("mlx", "mxfp8_e4m3", BF16), ("mlx", "mxfp4", F16), ("mlx", "mxfp4", BF16),
              ("ocp", "mxfp8_e4m3", BF16), ("ocp", "mxfp4", F16), ("ocp", "mxint8", F16),
              ("nvidia", "mxfp6_e2m3", F16), ("microxcaling", "mxfp4", BF16), ("torchao_rceil", "mxfp8_e5m2", BF16)]


@pytest.mark.parametrize("prof,name,dtype", PLAN_CASES, ids=lambda v: getattr(v, "name", v))
def test_every_16bit_value_under_every_divisor_exponent(prof: str, name: str, dtype: np.dtype) -> None:
    """The 16-bit row tables (mx_rows16) against the reference element step (block_mx.mx_element_codes) for
    every finite x of the dtype and every divisor exponent of the plan (bfloat16: 253 of them, 16.5 million
    elements)."""
    s = qref.scheme(name, profile=prof)
    plan = bf.mx_plan(s.rules, s.format, dtype)
    assert plan is not None
    for chunk in np.array_split(np.arange(plan.e_lo, plan.e_hi + 1), 8):
        check_rows16(s, plan, dtype, chunk)


def check_rows16(s: object, plan: bf.MXPlan, dtype: np.dtype, es: np.ndarray) -> None:
    x = finite16(dtype)
    C = plan.C
    xc = np.tile(x, (es.size, 1)) if C is None or dtype == C else np.tile(x.astype(C), (es.size, 1))
    nb = es.size
    sc = bm.MXScales(byte=np.zeros(nb, np.int64), e_div=es.astype(np.int64), flushed=np.zeros(nb, bool),
                     special=np.full(nb, np.nan),
                     scale_nan=np.zeros(nb, bool), folded=np.zeros(nb, bool), zero=np.zeros(nb, bool),
                     open_case=np.zeros(nb, bool), nan_blk=np.zeros(nb, bool), inf_blk=np.zeros(nb, bool),
                     nonfinite=np.zeros(nb, bool))
    with np.errstate(all="ignore"):
        ref, unspec = bm.mx_element_codes(s.rules, s.format, xc, ar.f64(xc), sc, C, False)  # type: ignore[arg-type]
    assert not unspec.any()
    rows = bf.mx_rows16(plan)
    rows.ensure(es - plan.e_lo)
    bits = x.view(np.uint16).astype(np.int64)
    fast = rows.rows[((es - plan.e_lo)[:, None] << 16) + bits[None, :]]
    assert (fast == ref).all(), int((fast != ref).sum())


def scale_inputs(dtype: np.dtype) -> np.ndarray:
    """Every non-negative finite 16-bit value, or for float32 every top-16 pattern with low halves 0, 1,
    0x7FFF, 0x8000, 0x8001 and 0xFFFF (plus all 65536 subnormal low patterns of exponent 0)."""
    if dtype != F32:
        x = finite16(dtype)
        return x[~np.signbit(x.astype(np.float32))]
    hi = np.arange(0x7F80, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    bits = np.concatenate([(hi[:, None] | lows[None, :]).reshape(-1), np.arange(1 << 16, dtype=np.uint32)])
    return bits.view(np.float32)


SCALE_RULE_CASES = [
    ("ocp", {}), ("ocp", {"scale_rule": "ceil"}), ("torchao_floor", {}), ("nvidia", {}), ("mlx", {}),
    ("mlx", {"quotient_arith": "reciprocal"}), ("nvidia", {"compute_dtype": "input"}),
    ("microxcaling", {}), ("torchao_rceil", {}), ("ocp", {"scale_rule": "even"}),
    ("mlx", {"tiny_quotient": "one_below_sqrt_min_normal"}),
    ("mlx", {"tiny_quotient": "one_below_sqrt_min_normal", "quotient_arith": "reciprocal"}), ("qwix", {}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("prof,over", SCALE_RULE_CASES, ids=lambda v: str(v))
def test_scale_exponent_and_block_scales_exhaustive(prof: str, over: dict[str, str], dtype: np.dtype) -> None:
    """fast_scale_exponent == _scale_exponent and finite_block_scales == mx_block_scales + mx_row_flags on
    every amax input (scale_inputs), for E4M3, E5M2, E2M1, E3M2 and MXINT8 elements."""
    for name in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "mxfp6_e3m2", "mxint8"):
        try:
            s = qref.scheme(name, profile=prof, **over)
        except qref.QrefError:
            continue
        C = ar.resolve_compute_dtype(s.compute_dtype, dtype)
        amax = scale_inputs(dtype)
        if C is not None and dtype != C:
            amax = amax.astype(C)
        with np.errstate(all="ignore"):
            e_ref, z_ref = bm._scale_exponent(s.rules, s.format, amax, C, False)
            e_fast, z_fast = bf.fast_scale_exponent(s.rules, s.format, amax, C, False)
        assert (z_ref == z_fast).all() and (e_ref[~z_ref] == e_fast[~z_ref]).all(), name
        if s.byte0_divisor == "folded_stand_in":
            continue
        no = np.zeros(amax.size, dtype=bool)
        with np.errstate(all="ignore"):
            sc = bm.mx_block_scales(s.rules, s.format, amax, no, no, C, False)
            rows, sun = bm.mx_row_flags(s.rules, s.format, sc)
            byte, e_div, scale_nan, rows_f, sun_f = bf.finite_block_scales(s.rules, s.format, amax, C)
        assert (sc.byte == byte).all() and (sc.e_div == e_div).all() and (sc.scale_nan == scale_nan).all()
        assert (rows == rows_f).all() and (sun == sun_f).all()


@pytest.mark.parametrize("prof,name", [("mlx", "mxfp8_e4m3"), ("mlx", "mxfp4"), ("ocp", "mxfp8_e5m2"),
                                       ("ocp", "mxint8"), ("ocp", "mxfp6_e3m2"), ("torchao_floor", "mxfp6_e2m3"),
                                       ("nvidia", "mxfp8_e4m3"), ("mlx", "nvfp4"), ("nvidia", "nvfp4")])
def test_sticky_key_tables(prof: str, name: str) -> None:
    """table[key(y)] equals the reference element step for every key class: all (33 - low)-bit heads, each
    with the low bits 0, 1, 2^(low-1) - 1, 2^(low-1), 2^(low-1) + 1, 2^low - 1 and three random patterns,
    within the table's domain (finite, |y| <= lut_table_limit)."""
    s = qref.scheme(name, profile=prof)
    plan = bf.mx_plan(s.rules, s.format, F32) if s.kind == "mx" else None
    if plan is not None:
        low, table = plan.low, plan.table
    else:
        keyed = bf.element_key_table(s.rules, s.format)
        assert keyed is not None
        low, table = keyed
    rng = np.random.default_rng(low)
    heads = np.arange(1 << (32 - low), dtype=np.uint64)
    lows = np.concatenate([[0, 1, (1 << (low - 1)) - 1, 1 << (low - 1), (1 << (low - 1)) + 1, (1 << low) - 1],
                           rng.integers(0, 1 << low, 3)]).astype(np.uint64)
    bits = ((heads[:, None] << np.uint64(low)) | lows[None, :]).reshape(-1)
    bits = np.concatenate([bits, bits | np.uint64(1 << 31)]).astype(np.uint32)
    y = bits.view(np.float32)
    with np.errstate(all="ignore"):
        keep = np.isfinite(y) & (np.abs(y) <= np.float32(min(bf.lut_table_limit(s.rules, s.format), 3.4e38)))
    y = y[keep]
    with np.errstate(all="ignore"):
        if plan is not None and plan.C is None:  # the exact path: encode(y * 2^-ses), then zero_sign
            ref = bm.apply_zero_sign(s.rules, s.format, bm.encode_exact_shifted(
                y, np.full(y.size, -s.element_scale_exp, dtype=np.int64), s.element, bm.element_policy(s.rules,
                                                                                                       s.format)
            ).astype(s.element.code_dtype))
        else:
            ref, _ = bm.encode_elements(s.rules, s.format, y)
    key = bf.sticky_key(y.view(np.uint32), low, np.empty(y.size, dtype=np.uint32))
    assert (table[key] == ref).all()


def test_e2m1_argmin_saturates_on_every_float32_up_to_twice_the_maximum() -> None:
    """lut_table_limit's claim, on every float32 y with 6 < |y| <= 12: MLX's first-index argmin over the code-
    ordered E2M1 table, with distances rounded to float32 (numpy's IEEE subtraction here, independent of
    qref), picks 6 (code 7) or -6 (code 15); the library's lut_argmin agrees on a sample."""
    fmt = qref.get_format("float4_e2m1fn")
    table = qref.decode(np.arange(16, dtype=np.uint8), fmt, dtype=np.float32)
    lo = np.float32(6).view(np.uint32) + 1
    hi = np.float32(12).view(np.uint32)
    for start in range(int(lo), int(hi) + 1, 1 << 20):
        y = np.arange(start, min(start + (1 << 20), int(hi) + 1), dtype=np.uint32).view(np.float32)
        for sign, code in ((1, 7), (-1, 15)):
            d = np.abs((sign * y)[:, None] - table[None, :])
            assert (np.argmin(d, axis=1) == code).all()
    rng = np.random.default_rng(2)
    sample = rng.integers(int(lo), int(hi) + 1, 50_000).astype(np.uint32).view(np.float32)
    sample = np.concatenate([sample, -sample])
    assert (bm.lut_argmin(sample, fmt) == np.where(sample > 0, 7, 15)).all()


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["float16", "bfloat16"])
def test_divide_in_equals_the_reference_division(dtype: np.dtype) -> None:
    """fl_T(x / d) by one float32 division and one more rounding (divide_in) equals the reference's ar.div for
    every finite 16-bit x and eight E4M3 scale values d (all of them for x = the 448 amax range in
    test_every_16bit_value_as_block_amax), and for x = every E4M3 value over 6 (the r = amax / M step)."""
    x = finite16(dtype)
    e4m3 = qref.decode(np.arange(1, 0x7F, dtype=np.uint8), "float8_e4m3fn", dtype=np.float32)
    for d in e4m3[[0, 1, 7, 8, 40, 63, 100, 125]]:
        fast = bf.divide_in(bf.to_float32(x), d, dtype, np.empty(x.size, dtype=np.float32))
        with np.errstate(all="ignore"):
            ref = ar.div(x, np.float32(d), dtype)
        assert (u(fast.astype(dtype)) == u(ref)).all()
    # every 16-bit x under every power-of-two factor the MX plans use (round_float32_to after an exact product)
    for e in range(-30, 31, 3):
        with np.errstate(all="ignore"):
            y = bf.to_float32(x) * np.float32(2.0**-e)
            ref = ar.div(x, np.float32(2.0**e), dtype)
        assert (bf.round_float32_to(y, dtype) == u(ref)).all()


@pytest.mark.parametrize("dtype", [*DTYPES, np.dtype(np.float64), np.dtype(np.int32)], ids=lambda d: d.name)
def test_tensor_amax(dtype: np.dtype) -> None:
    """The bit-pattern tensor amax (NVIDIA's and MLX's global amax) equals max |x| over the non-NaN elements,
    rounded to float32, 0 when there are none."""
    def ref(x: np.ndarray) -> np.float32:
        with np.errstate(all="ignore"):
            a = np.abs(np.asarray(x, dtype=np.float64))
        a = a[~np.isnan(a)]
        return np.float32(a.max() if a.size else 0.0)

    for x in distributions(F32, 8, 256, seed=12).values():
        with np.errstate(all="ignore"):  # random bit patterns hold signaling NaNs
            x = x.astype(dtype) if dtype.kind != "i" else np.nan_to_num(x).clip(-1e9, 1e9).astype(dtype)
        cases = [x, x[:1, :3], x.T]
        if dtype.kind == "f" or dtype == BF16:
            cases += [np.full(5, np.nan, dtype=dtype), np.array([-0.0, np.nan, -np.inf], dtype=dtype)]
        for c in cases:
            with np.errstate(invalid="ignore"):
                assert u(bn.tensor_amax(c)) == u(ref(c))


# ---------------------------------------------------------------------------------------------------------
# dequantize
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("out", [F32, F16, BF16, np.dtype(np.float64)], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("prof,name", schemes(), ids=lambda v: v)
def test_dequantize_every_code_and_scale(prof: str, name: str, out: np.dtype) -> None:
    """All (scale code, element code) pairs, shuffled into blocks, through the fast and the reference path."""
    s = qref.scheme(name, profile=prof)
    bits, k = s.element.bits, s.block_size
    rng = np.random.default_rng(bits)
    codes = np.tile(np.arange(1 << bits, dtype=np.uint8), 256 * k)
    codes = rng.permutation(codes).reshape(-1, k)
    scales = np.repeat(np.arange(256, dtype=np.uint8), codes.shape[0] // 256 + 1)[: codes.shape[0]]
    scales = rng.permutation(scales)
    gs_list = [None] if s.kind == "mx" or s.global_scale_rule in ("exact", "input_dtype_clip") else \
        [None, np.float32(0.37)]
    for gs in gs_list:
        with np.errstate(all="ignore"):
            if s.kind == "mx":
                fast = bm.dequantize_mx(s.rules, s.format, codes, scales, out)
                ref = bm.dequantize_mx_reference(s.rules, s.format, codes, scales, out)
            else:
                fast = bn.dequantize_float_scaled(s.rules, s.format, codes, scales, gs, out)
                ref = bn.dequantize_float_scaled_reference(s.rules, s.format, codes, scales, gs, out)
        assert fast.dtype == ref.dtype and (u(fast) == u(ref)).all()


def test_dequantize_public_api_and_out_of_range_codes() -> None:
    s = qref.scheme("mxfp4", profile="mlx")
    x = np.random.default_rng(6).standard_normal((8, 64)).astype(np.float32)
    q = s.quantize(x)
    with reference_only():
        ref = s.dequantize(q, dtype=np.float16)
    assert (u(s.dequantize(q, dtype=np.float16)) == u(ref)).all()
    # codes outside the element's range leave the table path (the reference decides what happens)
    bad = q.codes.reshape(-1, 32).astype(np.uint16)
    bad[0, 0] = 300
    assert bf.dequantize_fast(s.rules, s.format, bad, q.scales.reshape(-1), None, np.float32,
                              bm.dequantize_mx_reference) is None


# ---------------------------------------------------------------------------------------------------------
# the benchmark command (no timing asserted)
# ---------------------------------------------------------------------------------------------------------
def test_benchmark_command_reports_identical_results(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"
    spec = importlib.util.spec_from_file_location("qref_benchmark_run", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "qref_benchmark_run", mod)
    spec.loader.exec_module(mod)
    with _no_warning_check():  # bitsandbytes may warn on import
        rows = mod.main(["--rows", "4", "--cols", "256", "--repeats", "1"])
    assert rows and all(r["same"] for r in rows), [r["name"] for r in rows if not r["same"]]
    assert "| operation" in capsys.readouterr().out


@contextmanager
def _no_warning_check() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
