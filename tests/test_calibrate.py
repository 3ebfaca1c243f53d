"""calibrate (spec: uniform.md §5): exact formulas re-derived with Fraction, granularities, edge cases,
and torch.ao's MinMaxObserver cross-checked bit for bit."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import qref
from qref.calibrate import calibrate
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
