"""qref.strategies: every category is generated (checked by an independent classifier written from the format
definitions with fractions.Fraction), and failures shrink to the simplest example."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from functools import cache
from itertools import pairwise

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

import qref
import qref.testing.strategies as qs
from qref.errors import QrefError

FIND = settings(database=None, max_examples=3000, derandomize=True, suppress_health_check=list(HealthCheck))
DRAW = settings(database=None, max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
BF16 = np.dtype(ml_dtypes.bfloat16)


# ---- an independent value table: the format definitions (OCP OFP8 v1.0, OCP MX v1.0, IEEE 754) -------------
DEFS = {  # name: (E, M, bias, excluded magnitude rule)
    "float8_e4m3fn": (4, 3, 7, "all_ones"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float4_e2m1fn": (2, 1, 1, "none"),
    "float16": (5, 10, 15, "ieee"),
}


@cache
def finite_magnitudes(name: str) -> tuple[Fraction, ...]:
    """Sorted non-negative finite values of a sign-magnitude format, from E, M, bias and its special rule."""
    if name == "float8_e8m0fnu":  # OCP MX §5.4.1: 2^(e - 127), e = 0..254, 0xFF = NaN, no zero
        return tuple(Fraction(2) ** (e - 127) for e in range(255))
    E, M, bias, rule = DEFS[name]
    out = []
    for e in range(1 << E):
        for f in range(1 << M):
            if rule == "ieee" and e == (1 << E) - 1:
                continue
            if rule == "all_ones" and e == (1 << E) - 1 and f == (1 << M) - 1:
                continue
            if e == 0:
                out.append(Fraction(f) * Fraction(2) ** (1 - bias - M))
            else:
                out.append(Fraction((1 << M) + f) * Fraction(2) ** (e - bias - M))
    return tuple(sorted(out))


@cache
def ties_of(name: str) -> frozenset[Fraction]:
    mags = finite_magnitudes(name)
    return frozenset((a + b) / 2 for a, b in pairwise(mags))


def next_toward(x: np.ndarray, up: bool) -> np.ndarray:
    """The neighbour of a non-negative finite dtype value, by its bit pattern."""
    u = np.dtype(f"uint{8 * x.dtype.itemsize}")
    b = int(np.asarray(x).view(u)) + (1 if up else -1)
    return np.asarray(max(b, 0), dtype=u).view(x.dtype)


@cache
def set_of(name: str) -> frozenset[Fraction]:
    return frozenset(finite_magnitudes(name))


def independent_class_ok(cat: str, x: np.ndarray, name: str) -> bool:
    """Does x (a 0-d array) really lie in category ``cat`` of format ``name``? Written from the definitions."""
    with np.errstate(invalid="ignore"):  # a signalling NaN raises the invalid flag when widened
        xf = float(x.astype(np.float64))
    mags = finite_magnitudes(name)
    smallest = mags[1] if mags[0] == 0 else mags[0]
    if cat == "special":
        return not np.isfinite(xf)
    if not np.isfinite(xf):  # an overflow point beyond the dtype's range is drawn as Inf
        return cat == "overflow" and 2 * mags[-1] > float(np.finfo(np.float32).max if x.dtype == BF16
                                                          else np.finfo(x.dtype).max)
    a = Fraction(abs(xf))
    ties = ties_of(name)
    if cat == "zero":
        return a == 0
    if cat == "representable":
        return a in set_of(name)
    if cat == "tie":
        return a in ties
    if cat == "near_tie":
        ax = np.abs(x)
        return any(Fraction(float(next_toward(ax, up).astype(np.float64))) in ties for up in (True, False))
    if cat == "underflow":
        return 0 < a < smallest
    if cat == "overflow":
        return a >= mags[-1]
    if cat == "subnormal_boundary":  # [smallest subnormal, min normal + 1 ulp of the dtype]
        min_normal = smallest if name == "float8_e8m0fnu" else Fraction(2) ** (1 - DEFS[name][2])
        with np.errstate(all="ignore"):
            mn = np.asarray(float(min_normal)).astype(x.dtype)
        lo = min(smallest, Fraction(float(next_toward(mn, False).astype(np.float64))))
        return lo <= a <= Fraction(float(next_toward(mn, True).astype(np.float64)))
    if cat == "random":
        return a <= 2 * max(mags[-1], 1)
    raise AssertionError(cat)


# ---- values: every category, classified independently ------------------------------------------------------
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_values_hit_every_category(name: str, dtype: str) -> None:
    seen: Counter[str] = Counter()
    wrong: list[tuple[str, object]] = []
    fmt = qref.get_format(name)

    @DRAW
    @given(qs.values(fmt, dtype=dtype, labeled=True))
    def draw(cv: tuple[str, object]) -> None:
        cat, v = cv
        x = np.asarray(v)
        assert x.dtype.name == dtype
        seen[cat] += 1
        if not independent_class_ok(cat, x, name):
            wrong.append((cat, v))

    draw()
    expected = set(qs.CATEGORIES) - ({"zero"} if name == "float8_e8m0fnu" else set())
    assert set(seen) == expected, f"categories not hit: {expected - set(seen)}"
    # points that the dtype cannot hold are drawn as its nearest value; only float16 / bfloat16 sources of E8M0
    # (range 2^-127..2^127) and bfloat16 ties of formats with more precision can be off target
    if dtype in ("float32", "float64") or (dtype in ("float16", "bfloat16") and name != "float8_e8m0fnu"):
        assert not wrong, wrong[:5]


def test_values_for_a_wide_format_and_integers() -> None:
    seen: Counter[str] = Counter()

    @DRAW
    @given(qs.values("float16", dtype="float32", labeled=True))
    def draw16(cv: tuple[str, object]) -> None:
        seen[cv[0]] += 1
        assert independent_class_ok(cv[0], np.asarray(cv[1]), "float16")

    draw16()
    assert set(seen) == set(qs.CATEGORIES)
    ints: Counter[str] = Counter()

    @DRAW
    @given(qs.values("int8", dtype="float64", labeled=True))
    def draw8(cv: tuple[str, object]) -> None:
        cat, v = cv
        ints[cat] += 1
        x = float(v)
        if cat == "tie":
            assert x - np.floor(x) == 0.5 and -128 <= x <= 127
        if cat == "representable":
            assert x == int(x) and -128 <= x <= 127
        if cat == "overflow":
            assert abs(x) >= 127

    draw8()
    assert set(ints) == {"zero", "representable", "tie", "near_tie", "overflow", "special", "random"}


def test_values_options() -> None:
    @DRAW
    @given(qs.values("float8_e4m3fn", weights={"tie": 1, "zero": 0, "representable": 0, "near_tie": 0,
                                               "subnormal_boundary": 0, "underflow": 0, "overflow": 0,
                                               "special": 0, "random": 0}, sign="positive"))
    def only_ties(v: object) -> None:
        assert Fraction(float(v)) in ties_of("float8_e4m3fn")

    only_ties()

    @DRAW
    @given(qs.values("float8_e4m3fn", allow_nan=False, sign="negative"))
    def no_nan(v: object) -> None:
        assert not np.isnan(v) and np.signbit(v)

    no_nan()
    with pytest.raises(QrefError, match="did you mean 'tie'"):
        qs.values("float8_e4m3fn", weights={"ties": 1})
    with pytest.raises(QrefError, match="weight 0"):
        qs.values("float8_e4m3fn", weights=dict.fromkeys(qs.CATEGORIES, 0))
    with pytest.raises(QrefError, match="source dtype"):
        qs.values("float8_e4m3fn", dtype="int8")


# ---- shrinking --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_values_shrink_to_simple_points(name: str) -> None:
    _, M, bias, _ = DEFS[name]
    ties = ties_of(name)
    st32 = qs.values(name)
    x = find(st32, lambda v: True, settings=FIND)
    assert np.asarray(x).view(np.uint32) == 0  # +0.0
    assert find(st32, lambda v: v != 0 and np.isfinite(v), settings=FIND) == 1.0
    tie = find(st32, lambda v: np.isfinite(v) and Fraction(float(v)) in ties, settings=FIND)
    assert Fraction(float(tie)) == 1 + Fraction(1, 2 ** (M + 1))  # the tie just above 1
    # below the min normal: a boundary point, the largest subnormal or the min normal - 1 ulp of float32
    min_normal = Fraction(2) ** (1 - bias)
    largest_sub = ((1 << M) - 1) * Fraction(2) ** (1 - bias - M)
    sub = find(st32, lambda v: 0 < abs(float(v)) < min_normal, settings=FIND)
    assert Fraction(float(sub)) in (largest_sub, min_normal - min_normal / 2**24)


def test_overflow_shrinks_to_the_next_grid_value() -> None:
    # float8_e4m3fn: max 448; the spec (non-saturating, OCP OFP8 NaN) turns 464 < x into NaN; the simplest
    # overflow point is the next value of the grid above max: 448 + 32 = 480
    x = find(qs.values("float8_e4m3fn"),
             lambda v: int(qref.encode(np.asarray(v), "float8_e4m3fn")) == 0x7F, settings=FIND)
    assert float(x) == 480.0
    a = find(qs.arrays("float8_e4m3fn"), lambda arr: bool(np.isnan(arr).any()), settings=FIND)
    assert a.shape == (1,) and a.view(np.uint32)[0] == 0x7FC00000  # one positive quiet NaN


def test_arrays_shapes_dtypes_and_labels() -> None:
    def check(dtype: str) -> None:
        @settings(DRAW, max_examples=100)
        @given(qs.arrays("float8_e5m2", shape=st.tuples(st.integers(1, 3), st.integers(1, 4)), dtype=dtype,
                         labeled=True))
        def draw(ca: tuple[np.ndarray, np.ndarray]) -> None:
            cats, arr = ca
            assert arr.ndim == 2 and arr.dtype.name == dtype and cats.shape == arr.shape
            assert set(cats.reshape(-1)) <= set(qs.CATEGORIES)

        draw()

    for dtype in ("float64", "float32", "float16", "bfloat16"):
        check(dtype)
    assert find(qs.arrays("float8_e4m3fn", shape=(2, 3)), lambda a: True, settings=FIND).shape == (2, 3)
    assert find(qs.arrays("float8_e4m3fn", dtype="bfloat16"), lambda a: True, settings=FIND).dtype == BF16


# ---- formats and codes -----------------------------------------------------------------------------------
def test_formats_groups_and_validity() -> None:
    groups: Counter[str] = Counter()
    styles: Counter[str] = Counter()

    @DRAW
    @given(qs.formats())
    def draw(f: qref.FloatFormat) -> None:
        assert isinstance(f, qref.FloatFormat) and 1 <= f.bits <= 16
        if f.name.startswith("custom_"):
            groups["custom"] += 1
            styles[f.name.split("_", 2)[2]] += 1
        elif f.name.startswith("binary"):
            groups["p3109"] += 1
            assert qref.get_format(f.name) == f
        else:
            groups["named"] += 1
            assert qref.get_format(f.name) == f
        if f.bits > 10:
            return
        # every drawn format is usable: each finite, non-NaN code survives decode -> encode
        c = np.arange(1 << f.bits, dtype=np.uint64).astype(f.code_dtype)
        finite = np.isfinite(qref.decode(c, f, dtype=np.float64))
        back = qref.encode(qref.decode(c[finite], f, dtype=np.float64), f)
        inexact = np.array([f.exact_value(int(k)) != float(f.values[int(k)]) for k in c[finite]])
        assert np.array_equal(back[~inexact], c[finite][~inexact])

    draw()
    assert set(groups) == {"named", "p3109", "custom"}
    assert set(styles) == {"none", "ieee", "fn", "fnuz", "fnuz_inf", "unsigned", "unsigned_no_zero"}
    assert find(qs.formats(), lambda f: True, settings=FIND).name == "float8_e4m3fn"
    assert find(qs.formats(named=False), lambda f: True, settings=FIND).name == "custom_e1m0b0_none"
    assert find(qs.formats(max_bits=4), lambda f: True, settings=FIND).name == "float4_e2m1fn"
    ints = find(qs.formats(ints=True, named=False), lambda f: isinstance(f, qref.IntFormat), settings=FIND)
    assert isinstance(ints, qref.IntFormat)


def test_codes() -> None:
    assert find(qs.codes("float8_e4m3fn"), lambda c: True, settings=FIND) == 0
    assert find(qs.codes("float8_e4m3fn", classes=["nan"]), lambda c: True, settings=FIND) == 0x7F
    seen: set[int] = set()

    @DRAW
    @given(qs.codes("float8_e5m2", classes=["inf", "nan"]))
    def draw(c: int) -> None:
        seen.add(c)

    draw()
    assert seen == {0x7C, 0x7D, 0x7E, 0x7F, 0xFC, 0xFD, 0xFE, 0xFF}  # OCP E5M2: S.11111.xx
    arr = find(qs.code_arrays("float4_e2m1fn", (2, 2)), lambda a: a.max() == 15, settings=FIND)
    assert arr.dtype == np.uint8 and arr.tolist() == [[0, 0], [0, 15]]
    with pytest.raises(QrefError, match="code class"):
        qs.codes("float8_e4m3fn", classes=["nans"])


# ---- blocks ------------------------------------------------------------------------------------------------
def _block_ok(cat: str, b: np.ndarray) -> bool:
    """Independent check of a float32 block of float4_e2m1fn elements (max 6, element ties from the grid)."""
    a = np.abs(b.astype(np.float64))
    fin = a[np.isfinite(a)]
    amax = fin.max() if fin.size else 0.0
    if cat == "zero":
        return bool((a == 0).all())
    if cat == "nan":
        return bool(np.isnan(a).any())
    if cat == "inf":
        return bool(np.isinf(a).any() and not np.isnan(a).any())
    if not np.isfinite(a).all():
        return False
    if cat == "ties":
        scale = Fraction(amax) / 6
        ties = ties_of("float4_e2m1fn")
        ok_scale = scale.numerator == 1 or scale.denominator == 1  # a power of two
        return ok_scale and all(Fraction(v) / scale in ties for v in a if v != amax)
    if cat == "tiny":
        return 0 < amax <= 2.0**-124
    if cat == "huge":
        return amax >= 2.0**120
    if cat == "pow2_amax":
        m32 = np.float32(amax)
        for cand in (m32, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(0))):
            r = Fraction(float(cand))
            for c in (6, 1, 7, 8):  # max, 1, overflow tie (6 + 2/2), next grid value 8 (= 2^3)
                q = r / c
                if (q.numerator & (q.numerator - 1)) == 0 and (q.denominator & (q.denominator - 1)) == 0:
                    return True  # amax (+- 1 ulp) = c * 2^j
        return False
    if cat == "random":
        return True
    raise AssertionError(cat)


def test_blocks_hit_every_category() -> None:
    seen: Counter[str] = Counter()
    bad: list[tuple[str, np.ndarray]] = []

    @DRAW
    @given(qs.blocks(block_size=32, element_format="float4_e2m1fn", labeled=True))
    def draw(cb: tuple[tuple[str, ...], np.ndarray]) -> None:
        cats, arr = cb
        assert arr.dtype == np.float32 and arr.shape == (len(cats), 32)
        for c, row in zip(cats, arr):
            seen[c] += 1
            if not _block_ok(c, row):
                bad.append((c, row))

    draw()
    assert set(seen) == set(qs.BLOCK_CATEGORIES)
    assert not bad, bad[:2]


def test_blocks_shrink_and_params() -> None:
    b = find(qs.blocks(block_size=8, element_format="float4_e2m1fn"), lambda a: True, settings=FIND)
    assert b.shape == (1, 8) and not b.view(np.uint32).any()  # one all-(+0) block
    t = find(qs.blocks(block_size=8, element_format="float4_e2m1fn", labeled=True),
             lambda cb: cb[0][0] == "ties", settings=FIND)[1]
    # amax = 6 * 2^0 first, the other elements the element tie nearest 1: 1.25 (between 1 and 1.5)
    assert t.tolist() == [[6.0] + [1.25] * 7]
    nan = find(qs.blocks(block_size=4, element_format="float8_e4m3fn", n_blocks=1),
               lambda a: bool(np.isnan(a).any()), settings=FIND)
    assert nan.shape == (1, 4) and np.isnan(nan).sum() == 1

    class FakeBlockScheme:  # what the block family's records expose: block_size and an element format
        block_size = 16
        element_format = qref.get_format("float4_e2m1fn")

    @settings(DRAW, max_examples=20)
    @given(qs.blocks(FakeBlockScheme(), n_blocks=2, dtype="bfloat16"))
    def draw(a: np.ndarray) -> None:
        assert a.shape == (2, 16) and a.dtype == BF16

    draw()
    with pytest.raises(QrefError, match="block_size=N"):
        qs.blocks(element_format="float4_e2m1fn")
    with pytest.raises(QrefError, match="element_format="):
        qs.blocks(block_size=32)


# ---- uniform parameters ---------------------------------------------------------------------------------
def test_uniform_params_categories_and_shrinking() -> None:
    seen: dict[str, set[str]] = {"scale": set(), "zp": set(), "range": set()}

    @DRAW
    @given(qs.uniform_params())
    def draw(p: qs.UniformParams) -> None:
        sc, zc, rc = p.categories
        seen["scale"].add(sc)
        seen["zp"].add(zc)
        seen["range"].add(rc)
        s = float(p.scale)
        assert np.asarray(p.scale).dtype == np.float32 and s > 0 and np.isfinite(s)
        assert p.storage.lo <= p.zero_point <= p.storage.hi
        if sc == "one":
            assert s == 1.0
        if sc == "power_of_two":
            assert np.frexp(s)[0] == 0.5
        if sc == "subnormal":
            assert s < np.finfo(np.float32).smallest_normal
        if sc == "huge":
            assert s >= 2.0**63
        if sc == "awkward":
            assert s in {float(np.float32(v)) for v in (0.1, 1 / 3, 0.2, 0.7, 1 / 255, 1 / 127, 0.01, 3.0, 1 / 6,
                                                        0.3, 1e-3, 12.7)}
        if rc == "symmetric":
            assert p.storage.lo == -p.storage.hi and p.storage.narrowed
        if rc == "full":
            assert not p.storage.narrowed

    draw()
    assert seen["scale"] == set(qs.SCALE_CATEGORIES)
    assert seen["zp"] == set(qs.ZERO_POINT_CATEGORIES)
    assert seen["range"] == set(qs.RANGE_CATEGORIES)
    p = find(qs.uniform_params(), lambda p: True, settings=FIND)
    assert (p.storage.name, float(p.scale), p.zero_point, p.axis) == ("int8", 1.0, 0, None)
    narrow = find(qs.uniform_params("int8"), lambda p: p.storage.narrowed, settings=FIND)
    assert narrow.storage.name == "int8<-127:127>"
    odd = find(qs.uniform_params("int8"), lambda p: p.zero_point % 2 == 1, settings=FIND)
    assert odd.zero_point == 3
    pa = find(qs.uniform_params("uint4", per_axis=True, channels=3), lambda p: True, settings=FIND)
    assert pa.scale.shape == (3,) and pa.zero_point.tolist() == [0, 0, 0] and pa.kwargs()["axis"] == 0
    with pytest.raises(QrefError, match="integer format"):
        find(qs.uniform_params("float8_e4m3fn"), lambda p: True, settings=FIND)


def test_uniform_params_build_schemes() -> None:
    try:
        qref.scheme("int8", scale=1.0)
    except QrefError:
        pytest.skip("the uniform scheme family is not registered in this checkout")

    @DRAW
    @given(qs.uniform_params())
    def build(p: qs.UniformParams) -> None:
        s = qref.scheme(p.storage.name, **p.kwargs())
        assert s.storage.name == p.storage.name

    build()


# ---- tables ------------------------------------------------------------------------------------------------
def test_tables() -> None:
    styles: Counter[str] = Counter()

    @DRAW
    @given(qs.tables(labeled=True))
    def draw(stt: tuple[str, np.ndarray]) -> None:
        style, t = stt
        styles[style] += 1
        assert t.dtype == np.float32 and t.size in (2, 4, 8, 16)
        assert np.all(np.diff(t.astype(np.float64)) > 0) and np.all(np.abs(t) <= 1)
        if style == "adjacent":
            gaps = np.diff(t.view(np.int32).astype(np.int64))
            neg_side = t[:-1] < 0
            assert ((gaps == 1) & ~neg_side).any() or ((gaps == -1) & neg_side).any() or \
                (t == np.float32(1e-45)).any()

    draw()
    assert set(styles) == set(qs.TABLE_STYLES)
    assert find(qs.tables(), lambda t: True, settings=FIND).tolist() == [-1.0, 1.0]
    assert find(qs.tables(k=4), lambda t: True, settings=FIND).tolist() == \
        [float(np.float32(2 * i / 15 - 1)) for i in range(16)]
    unsorted = find(qs.tables(k=2, unsorted=True), lambda t: bool(np.any(np.diff(t) < 0)), settings=FIND)
    assert sorted(unsorted.tolist()) == [float(np.float32(v)) for v in (-1, -1 / 3, 1 / 3, 1)]
    dup = find(qs.tables(k=2, duplicates=True), lambda t: len(set(t.tolist())) < 4, settings=FIND)
    assert dup.tolist() == [-1.0, -1.0, float(np.float32(1 / 3)), 1.0]
    with pytest.raises(QrefError, match="table style"):
        qs.tables(styles=["nf4"])
