"""torch.ao.quantization.HistogramObserver (torch 2.13.0, CPU) against qref's ``observe_histogram``
(uniform.md §5.5): the scale (float32 bits), the zero point and the running histogram bit for bit on seeded
batches of several shapes and sequences of 1-3 batches, and each mechanism of the rule against the torch primitive
it names (histc, linspace, sum). Hand-derived expectations come from exact arithmetic."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from qref.analysis.calibrate import _bin_counts, _cascade_sum, _grid, observe_histogram
from qref.errors import QrefError
from qref.profiles.uniform import HISTOGRAM_OBSERVER_RULES, HistogramObserverRule

torch = pytest.importorskip("torch")
obs = pytest.importorskip("torch.ao.quantization.observer")

F32 = np.float32
#: (torch dtype, qscheme, lo, hi, symmetric)
SCHEMES = [("quint8", "per_tensor_affine", 0, 255, False), ("qint8", "per_tensor_symmetric", -128, 127, True),
           ("qint8", "per_tensor_affine", -128, 127, False), ("quint8", "per_tensor_symmetric", 0, 255, True)]


@pytest.fixture(autouse=True)
def quiet():
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def batch(rng: np.random.Generator, kind: int) -> np.ndarray:
    n = int(rng.integers(1, 1500))
    if kind == 0:
        x = rng.standard_normal(n) * 10.0 ** int(rng.integers(-3, 3))
    elif kind == 1:
        x = rng.uniform(-1, 3, n)
    elif kind == 2:
        x = rng.standard_cauchy(n)  # heavy tails
    elif kind == 3:
        x = rng.standard_normal(n)
        x[rng.integers(0, n, 3)] *= 1000  # outliers
    elif kind == 4:
        x = np.full(n, rng.standard_normal())  # all equal
    elif kind == 5:
        x = rng.standard_normal(int(rng.integers(1, 5))) * 1e-30  # tiny
    else:
        x = rng.standard_normal(n)
        x[rng.integers(0, n, 2)] = np.inf * np.sign(rng.standard_normal(2))  # +-Inf left out
    return x.astype(F32)


def torch_observer(batches, scheme):
    dt, qs, *_ = scheme
    o = obs.HistogramObserver(dtype=getattr(torch, dt), qscheme=getattr(torch, qs))
    for b in batches:
        o(torch.from_numpy(b))
    s, z = o.calculate_qparams()
    return s.numpy().astype(F32).reshape(-1)[0], int(z.reshape(-1)[0]), o.histogram.numpy()


def test_observer_on_seeded_runs():
    rng = np.random.default_rng(31)
    for it in range(16):
        scheme = SCHEMES[it % 4]
        batches = [batch(rng, int(rng.integers(0, 7))) for _ in range(1 + it % 3)]
        s, z, h = torch_observer(batches, scheme)
        r = observe_histogram(batches, scheme[2], scheme[3], symmetric=scheme[4])
        assert r.histogram.view(np.uint32).tolist() == h.view(np.uint32).tolist(), it
        assert (int(r.scales.view(np.uint32)), int(r.zero_points)) == (int(s.view(np.uint32)), z), it


def test_binning_and_grid_and_sum_equal_the_torch_primitives():
    rng = np.random.default_rng(5)
    for _ in range(20):
        x = (rng.standard_normal(500) * 10.0 ** int(rng.integers(-4, 4))).astype(F32)
        lo, hi = float(x.min()), float(x.max())
        assert (_bin_counts(x, 2048, lo, hi) == torch.histc(torch.from_numpy(x), 2048, lo, hi).numpy()).all()
        a, b = np.sort(x[:2])
        g = torch.linspace(torch.tensor(a), torch.tensor(b), 2049).numpy()
        assert (_grid(a, b, 2049).view(np.uint32) == g.view(np.uint32)).all()
        v = (x * x).astype(F32)[: int(rng.integers(1, 500))]
        assert _cascade_sum(v, 8).view(np.uint32) == torch.from_numpy(v).sum().numpy().view(np.uint32)


def test_hand_derived_cases():
    # one element: the histogram range widens to [x - 1, x + 1]; the search keeps every bin, so the range is
    # [x, x] and the scale is max(x, 0) / 255 rounded to float32 (x = 3: fl32(3 / 255))
    r = observe_histogram([np.array([3.0], F32)], 0, 255, symmetric=False)
    assert r.histogram.sum() == 1 and r.histogram[1024] == 1  # (3 - 2) * 2048 / 2 = 1024
    assert r.scales == F32(3 / 255) and r.zero_points == 0
    # two batches of counts: the histogram holds every element once (sums of integers are exact)
    r = observe_histogram([np.arange(8, dtype=F32), np.arange(-8, 16, dtype=F32)], 0, 255, symmetric=False)
    assert r.histogram.sum() == 32 and (r.min_val, r.max_val) == (-8, 15)
    # no batch, or only +-Inf: torch's default (1.0, 0)
    for bs in ([], [np.array([np.inf, -np.inf], F32)]):
        r = observe_histogram(bs, 0, 255, symmetric=False)
        assert (float(r.scales), int(r.zero_points)) == (1.0, 0)


def test_rule_without_fma_rounds_the_grid_twice():
    a, b = F32(-1.3), F32(2.7)
    step = F32((b - a) / F32(32))
    k = np.arange(16, dtype=F32)
    two = (a + (step * k).astype(F32)).astype(F32)
    exact = [float(a) + float(step) * i for i in range(16)]  # float64 is exact here (24 + 5 bits)
    assert (_grid(a, b, 33, "unfused_linspace")[:16] == two).all()
    assert (_grid(a, b, 33)[:16] == np.array(exact).astype(F32)).all()
    assert HISTOGRAM_OBSERVER_RULES["pytorch_histogram_observer_no_fma"].grid == "unfused_linspace"


def test_bad_input_is_rejected():
    with pytest.raises(QrefError, match="float32"):
        observe_histogram([np.ones(3)], 0, 255, symmetric=False)
    with pytest.raises(QrefError, match="NaN"):
        observe_histogram([np.array([1, np.nan], F32)], 0, 255, symmetric=False)
    with pytest.raises(QrefError, match="range"):
        observe_histogram([np.ones(3, F32)], 1, 255, symmetric=False)
    with pytest.raises(QrefError, match="histogram observer rule"):
        observe_histogram([np.ones(3, F32)], 0, 255, symmetric=False, rule="minmax")
    with pytest.raises(QrefError, match="bins"):
        HistogramObserverRule(bins=0)


def test_equal_values_widen_to_the_float32_neighbours():
    # v = 2^30: v - 1 and v + 1 round back to v; the range becomes [v - 64, v + 128] (the neighbours), so v
    # falls at 64 / 192 of it: bin trunc(2048 / 3) = 682 (hand-derived; -v: 128 / 192 -> 1365)
    for v, k in ((2.0**30, 682), (-(2.0**30), 1365), (3.0, 1024), (2.0**24 + 2, 1024)):
        x = np.full(5, v, F32)
        h = _bin_counts(x, 2048, v, v)
        assert h[k] == 5 and h.sum() == 5
        assert torch.histc(torch.from_numpy(x), 2048, v, v)[k] == 5
