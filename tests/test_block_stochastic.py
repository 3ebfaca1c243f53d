"""Stochastic element rounding inside block schemes (block.md §13), held to the P3109 formulas in Fractions.

The oracle here is written from the spec: y = x / X exactly (X the decoded block scale, which stochastic
rounding does not change), then P3109's RoundToPrecision of |y| with the mode's rule on eta and R (elements.md
§2.5; tests/oracle.py, exact Fractions) and the OCP clamp. Nothing is taken from the code under test but the
scale bytes, which are compared with the deterministic scheme's first.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from oracle import round_magnitude, spec_of

import qref
from qref.core.encode import random_bits_from_seed
from qref.errors import QrefError


def p3109(y: Fraction, r: int, n: int, mode: str, fmt_name: str) -> Fraction:
    """The stochastically rounded value of y in the element format, saturating at its maximum (elements.md §2.5,
    §2.4; the P3109 oracle of tests/oracle.py)."""
    fmt = qref.get_format(fmt_name)
    a = abs(y)
    v = min(round_magnitude(spec_of(fmt), a, y < 0, mode, r, n), fmt.max_value) if a else Fraction(0)
    return -v if y < 0 else v


def values_of(codes: np.ndarray, fmt_name: str) -> list[Fraction]:
    v = qref.decode(codes.astype(np.uint8), fmt_name, dtype=np.float64)
    return [Fraction(float(t)) for t in v.reshape(-1)]


def design(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    x = rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-8, 9, size=(rows, 1))
    x[0, :4] = [0.0, -0.0, 1e-30, -1e-30]
    return x.astype(np.float32)


@pytest.mark.parametrize("mode", ["stochastic_a", "stochastic_b", "stochastic_c"])
@pytest.mark.parametrize("name,fmt_name", [("mxfp4", "float4_e2m1fn"), ("mxfp8_e4m3", "float8_e4m3fn"),
                                           ("mxfp6_e2m3", "float6_e2m3fn")])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_mx_ocp_equals_p3109_on_the_exact_quotient(mode: str, name: str, fmt_name: str, n: int) -> None:
    rng = np.random.default_rng(n * 7 + len(name))
    x = design(rng, 24, 32)
    r = rng.integers(0, 1 << n, size=x.shape)
    s = qref.scheme(name, profile="ocp", rounding=mode, stochastic_bits=n)
    q = s.quantize(x, random_bits=r)
    det = qref.scheme(name, profile="ocp").quantize(x)
    assert np.array_equal(q.scales, det.scales)  # the scale steps do not see the rounding mode
    assert np.array_equal(q.unspecified, det.unspecified)
    got = values_of(q.codes, fmt_name)
    want = []
    for (i, j), xv in np.ndenumerate(x):
        X = Fraction(2) ** (int(q.scales[i, j // 32]) - 127)
        want.append(p3109(Fraction(float(xv)) / X, int(r[i, j]), n, mode, fmt_name))
    assert got == want
    # the sign of a zero result is the sign of x (zero_sign keep)
    assert np.array_equal(np.signbit(qref.decode(q.codes, fmt_name)), np.signbit(x))


@pytest.mark.parametrize("mode", ["stochastic_a", "stochastic_c"])
def test_nvfp4_exact_rule_equals_p3109(mode: str) -> None:
    rng = np.random.default_rng(11)
    x = design(rng, 16, 16)
    r = rng.integers(0, 1 << 6, size=x.shape)
    s = qref.scheme("nvfp4", profile="ocp", rounding=mode, stochastic_bits=6)
    q = s.quantize(x, random_bits=r)
    det = qref.scheme("nvfp4", profile="ocp").quantize(x)
    assert np.array_equal(q.scales, det.scales)
    scale = qref.decode(q.scales, "float8_e4m3fn", dtype=np.float64)
    got = values_of(q.codes, "float4_e2m1fn")
    want = []
    for (i, j), xv in np.ndenumerate(x):
        d = Fraction(float(scale[i, j // 16]))
        want.append(p3109(Fraction(float(xv)) / d, int(r[i, j]), 6, mode, "float4_e2m1fn") if d else Fraction(0))
    ok = ~q.unspecified.reshape(-1)
    assert [w for w, o in zip(want, ok) if o] == [v for v, o in zip(got, ok) if o]


def test_nvidia_nvfp4_rounds_the_float32_product() -> None:
    """amax_encode_reciprocal: y = fl32(x * coef) as in the deterministic rule, then P3109 on that float32 y."""
    rng = np.random.default_rng(5)
    x = design(rng, 8, 16)
    r = rng.integers(0, 256, size=x.shape)
    s = qref.scheme("nvfp4", profile="nvidia", rounding="stochastic_a", stochastic_bits=8)
    q = s.quantize(x, random_bits=r)
    det = qref.scheme("nvfp4", profile="nvidia").quantize(x)
    assert np.array_equal(q.scales, det.scales) and q.global_scale == det.global_scale
    # the stochastic value is one of y's two neighbours (the truncation and the rounding away of the same float32
    # y); with R = 0 (A) it is always the truncation, with R = 2^N - 1 it is rounded away exactly when eta >= 2^-N
    lo = s.quantize(x, random_bits=np.zeros_like(r)).codes
    hi = s.quantize(x, random_bits=np.full_like(r, 255)).codes
    tz = qref.scheme("nvfp4", profile="nvidia", rounding="toward_zero").quantize(x).codes
    aw = qref.scheme("nvfp4", profile="nvidia", rounding="toward_max_magnitude").quantize(x).codes
    assert np.array_equal(lo, tz)
    assert np.all((hi == aw) | (hi == tz)) and (hi != tz).sum() > 0.8 * (aw != tz).sum()
    assert np.all((q.codes == tz) | (q.codes == aw))
    assert not np.array_equal(q.codes, tz) and not np.array_equal(q.codes, aw)


@pytest.mark.parametrize("mode,n", [("stochastic_a", 4), ("stochastic_b", 3), ("stochastic_c", 4)])
def test_expectation_over_every_r_is_exact(mode: str, n: int) -> None:
    """Over all 2^N values of R the mean rounded value is lo + (hi - lo) * P(up), P(up) counted from the rule:
    A: floor(eta 2^N) / 2^N; B: (floor(eta 2^(N+1)) + 1) // 2 / 2^N; C: RNE(eta 2^N) / 2^N. For eta a
    multiple of 2^-N (A, C) the mean is y itself: unbiased."""
    rng = np.random.default_rng(3)
    e4m3 = qref.decode(np.arange(0x7F, dtype=np.uint8), "float8_e4m3fn", dtype=np.float64)  # 0 .. 448
    g = [Fraction(float(v)) for v in e4m3]
    # one block: amax 448 (scale byte 127 under ocp, X = 1) and values at eta = j / 2^(N+2) between grid points
    idx = rng.integers(1, len(g) - 2, size=31)
    j = rng.integers(0, 1 << (n + 2), size=31)
    vals = [g[i] + (g[i + 1] - g[i]) * Fraction(int(t), 1 << (n + 2)) for i, t in zip(idx, j)]
    x = np.array([448.0] + [float(v) for v in vals], dtype=np.float32)
    assert [Fraction(float(v)) for v in x[1:]] == vals  # exact in float32
    xs = np.broadcast_to(x, (1 << n, 32))
    r = np.arange(1 << n)[:, None]
    q = qref.scheme("mxfp8_e4m3", profile="ocp", rounding=mode, stochastic_bits=n).quantize(xs, random_bits=r)
    assert (q.scales == 127).all()
    v = qref.decode(q.codes, "float8_e4m3fn", dtype=np.float64)
    for c in range(1, 32):
        i, eta = int(idx[c - 1]), Fraction(int(j[c - 1]), 1 << (n + 2))
        lo, hi = g[i], g[i + 1]
        ups = sum(p3109(Fraction(float(x[c])), int(rr), n, mode, "float8_e4m3fn") == hi for rr in range(1 << n))
        if mode == "stochastic_a":
            assert ups == (eta * 2**n).__floor__()
        elif mode == "stochastic_b":
            assert ups == ((eta * 2 ** (n + 1)).__floor__() + 1) // 2
        else:
            assert ups == round(eta * 2**n)
        mean = sum(Fraction(float(t)) for t in v[:, c]) / (1 << n)
        assert mean == lo + (hi - lo) * Fraction(ups, 1 << n)
        if mode != "stochastic_b" and (eta * 2**n).denominator == 1:
            assert mean == vals[c - 1]


def test_affine_groups_round_the_float32_quotient() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    r = rng.integers(0, 1 << 5, size=x.shape)
    s = qref.scheme("mlx_affine", bits=4, group_size=32, rounding="stochastic_a", stochastic_bits=5)
    q = s.quantize(x, random_bits=r)
    det = qref.scheme("mlx_affine", bits=4, group_size=32).quantize(x)
    assert np.array_equal(q.scales, det.scales) and np.array_equal(q.biases, det.biases)
    sc = np.repeat(q.scales, 32, axis=1)
    b = np.repeat(q.biases, 32, axis=1)
    quot = ((x - b) / sc).astype(np.float32)  # MLX's float32 quotient (block.md §6)
    for (i, j), t in np.ndenumerate(quot):
        f = Fraction(float(t))
        lo = f.__floor__()
        eta = f - lo
        up = (eta * 32).__floor__() + int(r[i, j]) >= 32
        assert int(q.codes[i, j]) == min(max(lo + up, 0), 15)


def test_random_bits_follow_the_input_layout() -> None:
    """R[i] rounds x[i] whatever the block axis, the tiling, the padding; the seed stream is x's C order."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 64)).astype(np.float32)
    r = rng.integers(0, 256, size=x.shape)
    kw = {"profile": "ocp", "rounding": "stochastic_a", "stochastic_bits": 8}
    s = qref.scheme("mxfp4", **kw)
    a0 = s.quantize(x, axis=0, random_bits=r)
    t0 = s.quantize(np.ascontiguousarray(x.T), axis=-1, random_bits=np.ascontiguousarray(r.T))
    assert np.array_equal(a0.codes, t0.codes.T) and np.array_equal(a0.scales, t0.scales.T)
    seeded = s.quantize(x, seed=42)
    explicit = s.quantize(x, random_bits=random_bits_from_seed(x.size, 8, 42).reshape(x.shape))
    assert np.array_equal(seeded.codes, explicit.codes)
    assert np.array_equal(s.quantize(x, seed=42).codes, seeded.codes)
    assert not np.array_equal(s.quantize(x, seed=43).codes, seeded.codes)
    # tiles: (1, 32) equals block_size 32; a (8, 8) tile equals its elements quantized as one block with their R
    tiled = qref.scheme("mxfp4", block_shape=(1, 32), **kw).quantize(x, random_bits=r)
    assert np.array_equal(tiled.codes, s.quantize(x, random_bits=r).codes)
    assert np.array_equal(qref.scheme("mxfp4", block_shape=(1, 32), **kw).quantize(x, seed=7).codes,
                          s.quantize(x, seed=7).codes)
    t8 = qref.scheme("mxfp4", block_shape=(8, 8), block_size=64, **kw)
    q8 = t8.quantize(x, random_bits=r)
    one = qref.scheme("mxfp4", block_size=64, **kw)
    for i0 in range(0, 40, 8):
        for j0 in range(0, 64, 8):
            tile = x[i0:i0 + 8, j0:j0 + 8].reshape(1, 64)
            qt = one.quantize(tile, random_bits=r[i0:i0 + 8, j0:j0 + 8].reshape(1, 64))
            assert np.array_equal(qt.codes.reshape(8, 8), q8.codes[i0:i0 + 8, j0:j0 + 8])
            assert qt.scales[0, 0] == q8.scales[i0 // 8, j0 // 8]
    # a padded last block: its pad takes R = 0 and changes nothing
    xp = x[:, :40]
    qp = s.quantize(xp, random_bits=r[:, :40])
    full = s.quantize(np.concatenate([xp, np.zeros((40, 24), np.float32)], axis=1),
                      random_bits=np.concatenate([r[:, :40], np.zeros((40, 24), r.dtype)], axis=1))
    assert np.array_equal(qp.codes, full.codes[:, :40]) and np.array_equal(qp.scales, full.scales)


def test_special_blocks_keep_their_deterministic_scales_and_masks() -> None:
    x = np.zeros((6, 32), dtype=np.float32)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    x[2] = -0.0
    x[3] = np.float32(2.0**-140)
    x[4] = np.float32(3e38)
    x[5] = np.linspace(-6, 6, 32)
    for profile in ("ocp", "torchao_floor", "microxcaling"):
        n = 8
        det = qref.scheme("mxfp8_e4m3", profile=profile)
        sto = qref.scheme("mxfp8_e4m3", profile=profile, rounding="stochastic_a", stochastic_bits=n)
        with np.errstate(all="ignore"):
            a, b = det.quantize(x), sto.quantize(x, seed=0)
        assert np.array_equal(a.scales, b.scales), profile
        assert np.array_equal(a.unspecified, b.unspecified), profile
        nan_blocks = b.scales[:, 0] == 255
        assert (b.codes[nan_blocks] == 0).all()


def test_errors_say_what_to_fix() -> None:
    x = np.ones((2, 32), dtype=np.float32)
    det = qref.scheme("mxfp4")
    with pytest.raises(QrefError, match="random_bits / seed are for stochastic rounding"):
        det.quantize(x, seed=1)
    sto = qref.scheme("mxfp4", rounding="stochastic_a", stochastic_bits=4)
    with pytest.raises(QrefError, match="needs random_bits"):
        sto.quantize(x)
    with pytest.raises(QrefError, match=r"\[0, 2\^4\)"):
        sto.quantize(x, random_bits=np.full(x.shape, 16))
    with pytest.raises(QrefError, match="does not broadcast"):
        sto.quantize(x, random_bits=np.zeros(5, dtype=np.int64))
    with pytest.raises(QrefError, match="stochastic_bits=N"):
        qref.scheme("mxfp4", rounding="stochastic_a")
    with pytest.raises(QrefError, match="takes none"):
        qref.scheme("mxfp4", stochastic_bits=4)
    with pytest.raises(QrefError, match="lut_argmin"):
        qref.scheme("mxfp4", profile="mlx", rounding="stochastic_a", stochastic_bits=4)
    with pytest.raises(QrefError, match="rint"):
        qref.scheme("mlx_affine", rounding="toward_zero")
    with pytest.raises(QrefError, match="cannot hold"):
        qref.scheme("mxfp4", profile="microxcaling", rounding="stochastic_a", stochastic_bits=9).quantize(
            x.astype(ml_dtypes.bfloat16), seed=0)
    with pytest.raises(QrefError, match="random_bits= and seed="):
        sto.quantize(x, seed=1, rbits=3)
    spec = sto.to_spec()
    assert spec["stochastic_bits"] == 4 and qref.scheme_from_spec(spec) == sto


@pytest.mark.parametrize("name,profile", [("mxfp8_e4m3", "ocp"), ("mxfp4", "ocp"), ("mxint8", "ocp"),
                                          ("mxfp8_e5m2", "torchao_floor"), ("mxfp4", "torchao_rceil"),
                                          ("mxfp8_e4m3", "nvidia"), ("mxfp8_e4m3", "jax"), ("nvfp4", "nvidia"),
                                          ("nvfp4", "torchao_floor"), ("nvfp4", "ocp"), ("nvfp4", "jax")])
def test_every_code_is_a_neighbour_of_the_same_scaled_value(name: str, profile: str) -> None:
    """On random bit patterns of every class (NaN, Inf, subnormals, huge) and every profile's arithmetic, the
    stochastic code is the toward-zero or the away-from-zero code of the same scaled value (the scale steps are
    the deterministic scheme's), both occur, and the masks are the deterministic scheme's."""
    rng = np.random.default_rng(len(name) + len(profile))
    bits = rng.integers(0, 1 << 32, size=(64, 64), dtype=np.uint64).astype(np.uint32)
    normal = rng.standard_normal((64, 64)).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, (64, 1))
    x = np.where(rng.random((64, 64)) < 0.2, bits.view(np.float32), normal.astype(np.float32))
    kw = {"profile": profile}
    sto = qref.scheme(name, rounding="stochastic_a", stochastic_bits=8, **kw)
    tz = qref.scheme(name, rounding="toward_zero", **kw)
    aw = qref.scheme(name, rounding="toward_max_magnitude", **kw)
    with np.errstate(all="ignore"):
        q, qz, qa = sto.quantize(x, seed=3), tz.quantize(x), aw.quantize(x)
    assert np.array_equal(q.scales, qz.scales) and np.array_equal(q.unspecified, qz.unspecified)
    ok = ~q.unspecified
    assert np.all(((q.codes == qz.codes) | (q.codes == qa.codes))[ok])
    moved = ok & (qz.codes != qa.codes)
    assert (q.codes[moved] == qz.codes[moved]).any() and (q.codes[moved] == qa.codes[moved]).any()
