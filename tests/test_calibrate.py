"""calibrate (spec: uniform.md §5): exact formulas re-derived with Fraction, granularities, edge cases,
and torch.ao's MinMaxObserver cross-checked bit for bit."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import qref
from qref.analysis.calibrate import FORMULAS, calibrate
from qref.errors import QrefError

F32 = np.float32


def rn32(v: Fraction) -> float:
    """v rounded to nearest-even float32 (normal range), written independently of qref."""
    if v == 0:
        return 0.0
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    q = e - 23
    s = v / Fraction(2) ** q
    n = s.numerator // s.denominator
    r = s - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    return float(n * Fraction(2) ** q)


def rne(v: Fraction) -> int:
    f = math.floor(v)
    r = v - f
    return f + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2) else 0)


def test_absmax_exact_per_tensor_axis_blocks():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 10)) * 3).astype(F32)
    s, z = calibrate(x, "int8")
    assert s.shape == () and z.shape == ()
    assert float(s) == rn32(Fraction(float(np.abs(x).max())) / 127) and int(z) == 0
    c = calibrate(x, "int8", axis=1)
    assert c.scales.shape == (10,)
    for j in range(10):
        assert c.scales[j] == rn32(Fraction(float(np.abs(x[:, j]).max())) / 127)
    b = calibrate(x, "int4", axis=1, block_size=4)  # ONNX blocked: (4, 3) scales, last block of 2
    assert b.scales.shape == (4, 3)
    for i in range(4):
        for k in range(3):
            blk = x[i, 4 * k:4 * k + 4]
            assert b.scales[i, k] == rn32(Fraction(float(np.abs(blk).max())) / 7)
    m = calibrate(x, "int8", block_size={0: 2, 1: 5})  # MLIR-style blocks on two axes
    assert m.scales.shape == (2, 2)
    assert m.scales[1, 0] == rn32(Fraction(float(np.abs(x[2:4, 0:5]).max())) / 127)
    # the result builds the matching scheme
    q = m.scheme("onnx").quantize(x)
    assert q.codes.shape == x.shape and np.abs(q.codes).max() == 127


def test_minmax_exact_zero_point():
    x = np.array([-0.3, 0.1, 2.7, 1.9], dtype=F32)
    s, z = calibrate(x, "uint8", "minmax")
    lo, hi = Fraction(float(F32(-0.3))), Fraction(float(F32(2.7)))
    want_s = rn32((hi - lo) / 255)
    assert float(s) == want_s
    assert int(z) == max(0, min(255, 0 - rne(lo / Fraction(want_s))))
    # all-positive data: the range is extended to include 0, so the zero point is the storage minimum
    s2, z2 = calibrate(np.array([1.0, 3.0], F32), "int8", "minmax")
    assert float(s2) == rn32(Fraction(3) / 255) and int(z2) == -128


def test_unsigned_symmetric_uses_midpoint():
    s, z = calibrate(np.array([-2.0, 1.0], F32), "uint8")
    assert int(z) == 128 and float(s) == rn32(Fraction(2) / 127)


def test_zero_nan_inf_groups():
    x = np.array([[0.0, 0.0], [np.nan, np.inf], [1.0, np.nan]], dtype=F32)
    c = calibrate(x, "int8", axis=0)
    assert c.scales.tolist() == [1.0, 1.0, rn32(Fraction(1, 127))]  # all-zero and all-ignored rows -> 1
    with pytest.raises(QrefError, match="NaN/Inf"):
        calibrate(x, "int8", nonfinite="error")


def test_percentile_higher_is_an_element():
    x = np.arange(1, 101, dtype=F32)
    s, _ = calibrate(x, "int8", "percentile", percentile=90.0)
    assert float(s) == rn32(Fraction(int(np.percentile(np.arange(1, 101), 90, method="higher"))) / 127)
    s2, z2 = calibrate(x - 50, "int8", "percentile", percentile=90.0, symmetric=False)
    assert float(s2) > 0 and -128 <= int(z2) <= 127


def test_formulas_and_errors():
    x = np.array([-1.0, 0.5], F32)
    for f in ("qwix", "aqt", "pytorch"):
        s, _ = calibrate(x, "int8", formula=f)
        assert float(s) == float(F32(1.0) * (F32(1) / F32(127.5))) or f == "pytorch"
    with pytest.raises(QrefError, match="symmetric"):
        calibrate(x, "int8", "minmax", formula="aqt")
    with pytest.raises(qref.UnknownNameError):
        calibrate(x, "int8", "maxabs")
    with pytest.raises(QrefError, match="integer format"):
        calibrate(x, "float8_e4m3fn")
    with pytest.raises(QrefError, match="empty"):
        calibrate(np.array([], F32), "int8")


def test_pytorch_minmax_observer_bit_exact():
    torch = pytest.importorskip("torch", reason="torch.ao observer cross-check")
    from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

    rng = np.random.default_rng(1)
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for trial in range(20):
            x = (rng.standard_normal((6, 16)) * 10.0 ** rng.integers(-3, 3)).astype(F32)
            if trial % 5 == 0:
                x = np.abs(x)
            for qs, method in ((torch.per_tensor_affine, "minmax"), (torch.per_tensor_symmetric, "absmax")):
                for dt, storage in ((torch.quint8, "uint8"), (torch.qint8, "int8")):
                    obs = MinMaxObserver(dtype=dt, qscheme=qs)
                    obs(torch.from_numpy(x))
                    s_ref, z_ref = obs.calculate_qparams()
                    s, z = calibrate(x, storage, method, formula="pytorch")
                    assert np.float32(s) == s_ref.numpy()[0] and int(z) == int(z_ref[0])
                    n += 1
            pqs = torch.per_channel_affine
            obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=pqs)
            obs(torch.from_numpy(x))
            s_ref, z_ref = obs.calculate_qparams()
            c = calibrate(x, "int8", "minmax", axis=0, formula="pytorch")
            assert (c.scales.astype(F32) == s_ref.numpy()).all() and (c.zero_points == z_ref.numpy()).all()
            n += 1
    assert n == 100


# ---------------------------------------------------------------------------------------------------------
# the fast path (default) equals the readable reference path (_reference=True) bit for bit
# ---------------------------------------------------------------------------------------------------------
GRANULARITIES = ({}, {"axis": 0}, {"axis": 1}, {"axis": -1, "block_size": 32}, {"axis": 0, "block_size": 5},
                 {"block_size": {0: 3, 1: 7}}, {"block_size": (4, 16)})
METHODS_KW = (("absmax", {}), ("minmax", {}), ("percentile", {}), ("percentile", {"symmetric": False}),
              ("percentile", {"percentile": 90.0}), ("percentile", {"percentile": 99.0, "percentile_method": "lower"}),
              ("percentile", {"percentile": 75.0, "percentile_method": "nearest"}),
              ("percentile", {"percentile": 90.0, "percentile_method": "linear"}),
              ("percentile", {"percentile": 10.0, "percentile_method": "midpoint", "symmetric": False}))


def _outcome(x, *args, **kw):
    try:
        c = calibrate(x, *args, **kw)
    except QrefError as exc:
        return ("error", str(exc))
    return (c.scales.shape, c.scales.dtype, c.scales.view(np.uint64).tolist(), c.zero_points.tolist(), c.axis,
            c.block_size)


def _same_as_reference(x, *args, **kw):
    fast, ref = _outcome(x, *args, **kw), _outcome(x, *args, _reference=True, **kw)
    assert fast == ref, (args, kw)
    return fast


def _edge_tensor(dtype):
    """A (24, 40) tensor with zero, NaN, Inf, tiny, huge, all-equal and mixed rows (partial blocks of 32 on the
    last axis, of 5 on axis 0)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((24, 40)).astype(np.float64)
    x[1] = 0.0
    x[2] = -0.0
    x[3, 4] = np.nan
    x[4] = np.inf
    x[5, ::3] = -np.inf
    x[6] = 2.5
    x[7] = -3.0
    fi = np.finfo(np.float16) if dtype == np.float16 else None
    tiny = float(fi.smallest_subnormal) if fi is not None else 1e-40
    huge = float(fi.max) if fi is not None else 3e38
    x[8] = tiny * rng.integers(1, 5, 40)
    x[9] = huge * rng.choice([-1.0, 1.0], 40)
    x[10, 10:] = np.nan
    x[11] = np.nan
    x[12, :32] = 0.0
    x[13, 32:] = 7.0
    x[14] = rng.standard_normal(40) * 1e-30
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, "bfloat16"])
def test_fast_equals_reference_edges(dtype):
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x = _edge_tensor(dt)
    n = 0
    for method, kw in METHODS_KW:
        for gran in GRANULARITIES:
            for storage in ("int8", "uint4"):
                for formula in FORMULAS:
                    _same_as_reference(x, storage, method, formula=formula, **kw, **gran)
                    n += 1
    assert n == len(METHODS_KW) * len(GRANULARITIES) * 2 * len(FORMULAS)


@pytest.mark.parametrize("seed", range(2))
def test_fast_equals_reference_random(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 24, 3))
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6)).astype(np.float32)
    x[rng.random(shape) < 0.01] = np.nan
    for method, kw in METHODS_KW:
        for gran in ({}, {"axis": 1}, {"axis": -1, "block_size": int(rng.integers(1, 20))},
                     {"block_size": tuple(int(b) for b in rng.integers(1, 9, 3))}):
            for storage, formula in (("int8", "qref"), ("uint8", "qref"), ("int4", "pytorch"), ("int8", "qwix"),
                                     ("int2", "qref")):
                _same_as_reference(x, storage, method, formula=formula, **kw, **gran)


def test_fast_equals_reference_expressed_and_integer_input():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 48)).astype(np.float32) * 100
    for expressed in ("float16", "bfloat16", "float64", "float32", "tfloat32"):
        for method in ("absmax", "minmax"):
            _same_as_reference(x, "int8", method, axis=0, expressed=expressed)
    xi = rng.integers(-1000, 1000, (16, 48))
    for method in ("absmax", "minmax", "percentile"):
        _same_as_reference(xi, "int8", method, axis=1)
    # a scale that underflows the expressed type raises the same error on both paths
    out = _same_as_reference(np.array([1e-30, -2e-30], np.float32), "int8", expressed="float16")
    assert out[0] == "error"


def test_fast_equals_reference_hard_roundings():
    """Quotients exactly on (and one float64 ulp around) float32 midpoints, an inexact max - min, min / s on a
    half-integer: the cases float64 cannot decide, computed by the Fraction reference."""
    rng = np.random.default_rng(5)
    m = rng.integers(1 << 23, 1 << 24, 64).astype(np.float64)
    mid = (2 * m + 1) * 2.0 ** rng.integers(-40, 40, 64)  # 25-bit values: float32 midpoints
    a = np.concatenate([mid * 127, np.nextafter(mid * 127, 0), np.nextafter(mid * 127, np.inf)])
    x = np.stack([a, -a / 2])  # per column: absmax a
    c = _same_as_reference(x, "int8", axis=1, expressed="float32")
    assert c[0] == (a.size,)
    x2 = np.array([[1e30, -1e-30, 0.5], [3.0, -1e-300, 1.0]])
    _same_as_reference(x2, "uint8", "minmax", axis=0, expressed="float32")
    s = 2.0 ** -4
    k = np.arange(-100, 100)
    mn = -(k + 0.5) * s
    mn = mn[mn < 0]
    rows = np.stack([mn, mn + 255 * s], axis=1)  # scale exactly s, min / s = -(k + 0.5)
    _same_as_reference(rows, "uint8", "minmax", axis=0)
    _same_as_reference(rows, "int8", "minmax", axis=0)


def test_fast_percentile_large_group_threshold():
    """One large group at a rank below the top: the sampled-threshold selection equals the reference."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(200_000).astype(np.float32)
    for p, sym in ((99.0, None), (50.0, None), (0.5, False), (99.9, False)):
        _same_as_reference(x, "int8", "percentile", percentile=p, symmetric=sym)
    x[::2] = 1.0  # many equal values around the threshold
    _same_as_reference(x, "int8", "percentile", percentile=30.0)


@pytest.mark.parametrize("kw", [{"block_size": 1.5, "axis": 0}, {"block_size": True, "axis": 0},
                                {"block_size": {0: 2.0}}, {"method": "percentile", "percentile": None},
                                {"method": "percentile", "percentile": 101.0},
                                {"method": "percentile", "percentile_method": (5, 1)},
                                {"method": "percentile", "percentile_method": "bogus"}])
def test_bad_parameters_are_clear_errors(kw):
    kw = dict(kw)
    method = kw.pop("method", "absmax")
    x = np.ones((4, 4), F32)
    with pytest.raises(QrefError, match=r"block_size|percentile"):
        calibrate(x, "int8", method, **kw)
    with pytest.raises(QrefError, match=r"block_size|percentile"):
        calibrate(x, "int8", method, _reference=True, **kw)
