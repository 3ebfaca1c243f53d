"""torch.ao.quantization observers and FakeQuantize modules (torch 2.13.0, CPU) against qref (uniform.md §5.4,
§4.4 F1 / F4): ``qref.analysis.calibrate.observe_range`` reproduces MinMaxObserver, MovingAverageMinMaxObserver,
PerChannelMinMaxObserver and MovingAveragePerChannelMinMaxObserver bit for bit (scale float32 bits, zero point as
an integer), and a FakeQuantize module's output is qref's quantize-dequantize under ``pytorch_fake_quantize`` with
those parameters. Edge expectations come from exact arithmetic (powers of two, Python's round-half-even) or are the
values torch returns, written out."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import qref
from qref.analysis.calibrate import observe_range
from qref.errors import QrefError

torch = pytest.importorskip("torch")
obs = pytest.importorskip("torch.ao.quantization.observer")
fq = pytest.importorskip("torch.ao.quantization.fake_quantize")

F32 = np.float32
EPS_BITS = 0x34000000  # float32's eps, 2^-23
RULE = {"MinMaxObserver": "pytorch_minmax_observer", "PerChannelMinMaxObserver": "pytorch_minmax_observer",
        "MovingAverageMinMaxObserver": "pytorch_moving_average_observer",
        "MovingAveragePerChannelMinMaxObserver": "pytorch_moving_average_observer"}


@pytest.fixture(autouse=True)
def quiet():
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def run_observer(cls_name: str, batches, **kw):
    """(scale float32, zero point int64, quant_min, quant_max) of a new observer fed ``batches``."""
    o = getattr(obs, cls_name)(**kw)
    for b in batches:
        o(b if isinstance(b, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(b)))
    s, z = o.calculate_qparams()
    return s.numpy().astype(F32).reshape(-1), z.numpy().astype(np.int64).reshape(-1), o.quant_min, o.quant_max


def qref_params(cls_name: str, batches: np.ndarray, lo: int, hi: int, symmetric: bool, axis=None, c: float = 0.01,
                midpoint: str = "ceil_midpoint", eps: float | None = None):
    r = observe_range(batches, lo, hi, symmetric=symmetric, rule=RULE[cls_name], axis=axis, averaging_constant=c,
                      midpoint=midpoint, eps=eps)
    return np.atleast_1d(r.scales), np.atleast_1d(r.zero_points), np.atleast_1d(r.unspecified)


def same_scales(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal float32 bits, or both NaN (a NaN scale's sign and payload are unspecified, uniform.md §5.4 C2)."""
    return bool(((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))).all())


def check(cls_name: str, batches: np.ndarray, kw: dict, axis=None, midpoint: str = "ceil_midpoint") -> int:
    s, z, lo, hi = run_observer(cls_name, batches, **kw)
    sym = "symmetric" in str(kw.get("qscheme", "affine"))
    es, ez, un = qref_params(cls_name, batches, lo, hi, sym, axis, kw.get("averaging_constant", 0.01), midpoint,
                             kw.get("eps"))
    assert same_scales(s, es), (cls_name, kw, s, es)
    assert (z[~un] == ez[~un]).all(), (cls_name, kw, z, ez)
    return int(s.size + (~un).sum())


CONFIGS = [(qs, dt, rr) for qs in ("affine", "symmetric") for dt in (torch.quint8, torch.qint8)
           for rr in (False, True) if not (qs == "symmetric" and rr and dt == torch.quint8)]


def test_per_channel_sweep_is_exhaustive_over_a_grid_of_ranges():
    """Every pair (a, b) of k / 8, |k| <= 24, as one channel's first batch, (b / 2, 3a / 2) as its second; both
    per-channel observers, every qscheme / dtype / reduce_range."""
    g = np.arange(-24, 25, dtype=np.float64) / 8
    a, b = (v.reshape(-1) for v in np.meshgrid(g, g, indexing="ij"))
    x = np.stack([np.stack([a, b], -1), np.stack([b / 2, 1.5 * a], -1)]).astype(F32)  # (2 batches, C, 2)
    n = 0
    for cls_name in ("PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver"):
        for qs, dt, rr in CONFIGS:
            kw = {"qscheme": getattr(torch, f"per_channel_{qs}"), "dtype": dt, "reduce_range": rr, "ch_axis": 0}
            if cls_name.startswith("Moving"):
                kw["averaging_constant"] = 0.25
            n += check(cls_name, x, kw, axis=0)
    assert n > 60_000


def test_per_tensor_observers_on_random_batches():
    """Random batch counts and sizes over 2^-30 .. 2^30 with offsets, averaging constants 0.01, 1/3, 0.5, 0.9;
    float32, float64 (rounded to float32 by the observer), float16 and bfloat16 batches."""
    rng = np.random.default_rng(7)
    n = 0
    for it in range(240):
        cls_name = ("MinMaxObserver", "MovingAverageMinMaxObserver")[it % 2]
        qs, dt, rr = CONFIGS[it % len(CONFIGS)]
        kw = {"qscheme": getattr(torch, f"per_tensor_{qs}"), "dtype": dt, "reduce_range": rr}
        if cls_name.startswith("Moving"):
            kw["averaging_constant"] = float(rng.choice([0.01, 1 / 3, 0.5, 0.9]))
        B, m = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        x = rng.standard_normal((B, m)) * 2.0 ** rng.integers(-30, 31, (B, 1)) + rng.uniform(-2, 2, (B, 1))
        src = ("float32", "float64", "float16", "bfloat16")[(it // 2) % 4]
        if src in ("float32", "float64"):
            batches = x.astype(src)
            n += check(cls_name, batches, kw)
        else:  # 16-bit batches as torch tensors; qref takes their exact float32 values
            t = torch.from_numpy(x.astype(F32)).to(getattr(torch, src))
            s, z, lo, hi = run_observer(cls_name, list(t), **kw)
            es, ez, un = qref_params(cls_name, t.float().numpy(), lo, hi, qs == "symmetric",
                                     c=kw.get("averaging_constant", 0.01))
            assert same_scales(s, es) and (z[~un] == ez[~un]).all(), (src, kw)
            n += 2
    assert n > 400


def test_quant_ranges_eps_and_midpoints():
    """Custom quant_min / quant_max (halved by reduce_range), a custom eps floor, and the symmetric uint8 zero
    point: 128 for the default range, the floor midpoint for a given range (0..255 given explicitly: 127)."""
    x = np.array([[-0.75, 2.5], [0.125, 1.0]], F32)
    for lo, hi in ((0, 255), (0, 100), (0, 15), (-8, 7), (-128, 127), (-100, 27)):
        dt = torch.quint8 if lo == 0 else torch.qint8
        for qs in ("affine", "symmetric"):
            kw = {"qscheme": getattr(torch, f"per_tensor_{qs}"), "dtype": dt, "quant_min": lo, "quant_max": hi}
            s, z, qlo, qhi = run_observer("MinMaxObserver", x, **kw)
            assert (qlo, qhi) == (lo, hi)
            check("MinMaxObserver", x, kw, midpoint="floor_midpoint")
            if qs == "symmetric" and lo == 0:
                assert z[0] == (lo + hi) // 2
    s, z, _, _ = run_observer("MinMaxObserver", x, qscheme=torch.per_tensor_symmetric, dtype=torch.quint8)
    assert z[0] == 128 and s.view(np.uint32)[0] == F32(2.5 / 127.5).view(np.uint32)  # 2.5 / 127.5 = 1/51
    s, z, _, _ = run_observer("MinMaxObserver", np.zeros((1, 3), F32), eps=1e-3)
    assert s[0] == F32(1e-3) and z[0] == 0
    check("MinMaxObserver", np.array([[1e-6, -2e-6]], F32), {"eps": 2.0**-10})
    with pytest.raises(NotImplementedError):  # torch refuses it; qref's observe_range has no such rule either
        obs.MinMaxObserver(qscheme=torch.per_tensor_symmetric, dtype=torch.quint8, reduce_range=True)


@pytest.mark.parametrize("cls_name", ["MinMaxObserver", "MovingAverageMinMaxObserver"])
def test_edge_cases(cls_name):
    """What torch returns on the edge cases of uniform.md §5.4 (its Examples table), and qref's agreement."""
    inf, nan = float("inf"), float("nan")
    aff_u = {"qscheme": torch.per_tensor_affine, "dtype": torch.quint8}
    aff_i = {"qscheme": torch.per_tensor_affine, "dtype": torch.qint8}
    sym_u = {"qscheme": torch.per_tensor_symmetric, "dtype": torch.quint8}
    sym_i = {"qscheme": torch.per_tensor_symmetric, "dtype": torch.qint8}
    # no batch: (1.0, 0)
    s, z, _, _ = run_observer(cls_name, [], **aff_u)
    assert s.tolist() == [1.0] and z.tolist() == [0]
    r = observe_range(np.zeros((0, 2), F32), 0, 255, symmetric=False, rule=RULE[cls_name])
    assert float(r.scales) == 1.0 and int(r.zero_points) == 0
    one = np.array([[3.0]], F32)
    table = [  # (batches, kw, scale bits, zero point or None (qref: unspecified))
        (np.zeros((2, 3), F32), aff_u, EPS_BITS, 0), (np.zeros((2, 3), F32), aff_i, EPS_BITS, -128),
        (np.zeros((2, 3), F32), sym_u, EPS_BITS, 128), (np.zeros((2, 3), F32), sym_i, EPS_BITS, 0),
        (np.array([[1e-10, -1e-12]], F32), aff_u, EPS_BITS, 0),  # the eps floor
        (np.array([[1e-45, -1e-45]], F32), sym_i, EPS_BITS, 0),  # subnormals
        (one, aff_u, 0x3C40C0C1, 0), (np.array([[2.0, 2.0]], F32), aff_i, int(F32(2 / 255).view(np.uint32)), -128),
        (np.array([[-3.0, -1.0]], F32), aff_u, 0x3C40C0C1, 255),
        (np.array([[-3.0, -1.0]], F32), aff_i, 0x3C40C0C1, 127),
        (np.array([[1.0, inf]], F32), aff_u, 0x7F800000, 0), (np.array([[1.0, inf]], F32), sym_i, 0x7F800000, 0),
        (np.array([[3e38, -3e38]], F32), aff_u, 0x7F800000, 0),  # max - min overflows; m0 / Inf = -0
        (np.array([[-inf, 1.0]], F32), aff_u, 0x7F800000, None),
        (np.array([[-inf, inf]], F32), aff_i, 0x7F800000, None),
        (np.array([[1.0, nan]], F32), aff_u, None, None), (np.array([[nan, 1.0]], F32), sym_u, None, 128),
    ]
    # zero-point ties: (M - m) / 255 = 2^-4 exactly, m / s = -(k + 1/2): z = round_half_even(k + 1/2)
    for k in range(6):
        m = -(k + 0.5) / 16
        table.append((np.array([[m, m + 255 / 16]], F32), aff_u, 0x3D800000, round(k + 0.5)))
    torch_z_unspecified = []
    for x, kw, sbits, zv in table:
        s, z, lo, hi = run_observer(cls_name, x, **kw)
        es, ez, un = qref_params(cls_name, x, lo, hi, "symmetric" in str(kw["qscheme"]))
        if sbits is None:
            assert np.isnan(s[0]) and np.isnan(es[0])
        else:
            assert s.view(np.uint32)[0] == sbits == es.view(np.uint32)[0], (x, kw, hex(int(s.view(np.uint32)[0])))
        if zv is None:
            assert un[0]
            torch_z_unspecified.append((kw["dtype"], int(z[0])))
        else:
            assert not un[0] and z[0] == zv == ez[0], (x, kw, z, ez)
    # x86-64: int32(NaN) = INT_MIN, and lo - INT_MIN wraps in int32 before the clamp (uniform.md §5.4 C2)
    assert torch_z_unspecified == [(torch.quint8, 0), (torch.qint8, 127), (torch.quint8, 0)]


def test_moving_average_rounds_the_constant_to_float32():
    """m + c (b - m) with c = fl32(0.01): each step in float32 (a float64 c gives other bits on random runs)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((300, 3, 4)) * 10.0 ** rng.uniform(-3, 3, (300, 3, 1))).astype(F32)
    differ = 0
    for run in x[:120]:
        o = obs.MovingAverageMinMaxObserver()
        for b in run:
            o(torch.from_numpy(b))
        m, M = run[0].min(), run[0].max()
        m64, M64 = m, M
        for b in run[1:]:  # independent float32 steps, and the float64-constant variant
            m = F32(m + F32(F32(0.01) * F32(b.min() - m)))
            M = F32(M + F32(F32(0.01) * F32(b.max() - M)))
            m64 = F32(m64 + F32(0.01 * np.float64(F32(b.min() - m64))))
            M64 = F32(M64 + F32(0.01 * np.float64(F32(b.max() - M64))))
        assert o.min_val.numpy().view(np.uint32) == m.view(np.uint32)
        assert o.max_val.numpy().view(np.uint32) == M.view(np.uint32)
        differ += int(m64 != m or M64 != M)
        check("MovingAverageMinMaxObserver", run, {})
    assert differ > 10


@pytest.mark.parametrize("observer", ["MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver"])
def test_fake_quantize_module(observer):
    """FakeQuantize (observer and fake quant enabled): each forward's output equals qref's quantize-dequantize
    under pytorch_fake_quantize with observe_range's parameters of the batches seen so far (float32 bits)."""
    rng = np.random.default_rng(13)
    per_channel = observer.startswith("PerChannel")
    n = 0
    for qs, dt, rr in CONFIGS:
        qscheme = getattr(torch, f"per_{'channel' if per_channel else 'tensor'}_{qs}")
        m = fq.FakeQuantize(observer=getattr(obs, observer), dtype=dt, qscheme=qscheme, reduce_range=rr,
                            **({"ch_axis": 0} if per_channel else {}))
        lo, hi = m.activation_post_process.quant_min, m.activation_post_process.quant_max
        x = (rng.standard_normal((4, 3, 400)) * 10.0 ** rng.uniform(-2, 2, (4, 3, 1))).astype(F32)
        x[1, 0, :8] = [0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1e30, -1e30]  # (+-Inf: zero point unspecified)
        for t in range(x.shape[0]):
            y = m(torch.from_numpy(x[t])).detach().numpy()
            s, z, un = qref_params(observer, x[: t + 1], lo, hi, qs == "symmetric", 0 if per_channel else None)
            assert not un.any()
            storage = "uint8" if dt == torch.quint8 else "int8"
            name = storage if (lo, hi) in ((0, 255), (-128, 127)) else f"{storage}<{lo}:{hi}>"
            sch = qref.scheme(name, scale=s.astype(np.float64).tolist() if per_channel else float(s[0]),
                              zero_point=z.tolist() if per_channel else int(z[0]), axis=0 if per_channel else None,
                              profile="pytorch_fake_quantize")
            q = sch.quantize(x[t])
            e = np.asarray(sch.dequantize(q), F32)
            spec = ~np.asarray(q.unspecified, bool)
            bad = np.flatnonzero((y.view(np.uint32) != e.view(np.uint32)) & spec)
            assert bad.size == 0, (observer, qs, dt, rr, t, y.reshape(-1)[bad[0]], e.reshape(-1)[bad[0]])
            n += int(spec.sum())
    assert n > 30_000


def test_fake_quantize_input_dtypes():
    """fake_quantize_per_tensor_affine / _per_channel_affine take float16 / bfloat16 / float64 and return that
    dtype. 16-bit: x widened to float32, the pytorch_fake_quantize steps, then (q - z) s rounded to float32 and
    again to the 16-bit type (two roundings; qref's dequantize to that dtype: equal). float64: x * fl32(1 / s)
    in float64, and (q - z) s rounded to float32 (a float64 tensor of float32 values): outside the profile
    (qref raises for float64 input, uniform.md §4.4 F4)."""
    import ml_dtypes

    rng = np.random.default_rng(17)
    n = 0
    for src in ("float16", "bfloat16"):
        npdt = np.dtype(ml_dtypes.bfloat16) if src == "bfloat16" else np.dtype(np.float16)
        for _ in range(40):
            s = float(F32(10 ** rng.uniform(-3, 0)))
            z = int(rng.integers(0, 20))
            x = ((rng.integers(-30, 300, 512) + rng.choice([0.5, 0.49, 0.51, 0.0], 512)) * s).astype(npdt)
            t = torch.from_numpy(x.view(np.int16)).view(getattr(torch, src))
            y = torch.fake_quantize_per_tensor_affine(t, s, z, 0, 255)
            assert y.dtype == t.dtype
            sch = qref.scheme("uint8", scale=s, zero_point=z, profile="pytorch_fake_quantize")
            e = sch.dequantize(sch.quantize(x), dtype=npdt)
            assert (y.view(torch.int16).numpy() == e.view(np.int16)).all(), (src, s, z)
            n += x.size
    assert n > 40_000
    s, z = 0.1, 3
    x = np.array([0.35, 1 / 3, -2.3, 7.77], np.float64)
    y = torch.fake_quantize_per_tensor_affine(torch.from_numpy(x), s, z, 0, 255).numpy()
    inv = np.float64(F32(1) / F32(s))
    q = np.clip(z + np.rint(x * inv), 0, 255)
    assert (y == ((q - z) * np.float64(F32(s))).astype(F32).astype(np.float64)).all()  # float32 values
    assert y[1] != (q[1] - z) * np.float64(F32(s))  # the float64 product differs: the output was rounded
    with pytest.raises(QrefError):
        qref.scheme("uint8", scale=s, zero_point=z, profile="pytorch_fake_quantize").quantize(x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_choose_qparams_per_token_asymmetric(dtype):
    """quantized_decomposed.choose_qparams_per_token_asymmetric(x, torch.int8) = qref.calibrate(x, "int8",
    "minmax", axis=0, formula="divide_eps_balanced_zero_point") bit for bit (float64 scales, int64 zero points):
    an exhaustive grid of (a, b, (a + b) / 3) rows, random rows over 2^-30 .. 2^30, and edge rows. The zero point
    of an all-zero row is 127 (the max-side candidate: (-128 + 0) + (127 + 0) <= 0), where MinMaxObserver gives
    -128; NaN / Inf rows give INT64_MIN (x86-64's conversion of NaN), qref leaves them out (unspecified)."""
    import torch.ao.quantization.fx._decomposed  # registers quantized_decomposed

    op = torch.ops.quantized_decomposed.choose_qparams_per_token_asymmetric
    rng = np.random.default_rng(19)
    g = np.arange(-32, 33, dtype=np.float64) / 16
    a, b = (v.reshape(-1) for v in np.meshgrid(g, g, indexing="ij"))
    grid = np.stack([a, b, (a + b) / 3], -1)
    rand = rng.standard_normal((3000, 3)) * 2.0 ** rng.integers(-30, 31, (3000, 1)) + rng.uniform(-2, 2, (3000, 1))
    edge = np.array([[0, 0, 0], [3, 3, 3], [-3, -1, -2], [1e-10, -1e-12, 0], [2.5, 2.5, 2.5], [1e-45, 0, -1e-45],
                     [3e38, -3e38, 0], [-(2 + 0.5) / 16, 255 / 16 - 2.5 / 16, 0]])
    x = np.concatenate([grid, rand, edge]).astype(dtype)
    s, z = op(torch.from_numpy(x), torch.int8)
    c = qref.calibrate(x, "int8", "minmax", axis=0, formula="pytorch_decomposed_per_token")
    assert c.formula == "divide_eps_balanced_zero_point"
    assert (s.numpy().reshape(-1).view(np.uint64) == c.scales.view(np.uint64)).all()
    assert (z.numpy().reshape(-1) == c.zero_points).all()
    zero = np.flatnonzero((x == 0).all(axis=1))[0]
    assert int(z[zero, 0]) == 127 and s.numpy()[zero, 0] == float(np.finfo(np.float32).eps)
    s2, z2 = op(torch.tensor([[1.0, float("nan")], [1.0, float("inf")]], dtype=getattr(torch, dtype)), torch.int8)
    assert np.isnan(s2[0, 0].item()) and s2[1, 0].item() == float("inf")
    assert z2.reshape(-1).tolist() == [-(2**63), -(2**63)]
    with pytest.raises(QrefError):
        qref.calibrate(x, "int8", "absmax", formula="divide_eps_balanced_zero_point")


def test_observe_range_rejects_bad_input():
    """QrefError naming the problem: a range without 0 or with lo >= hi, integer batches, an empty batch, an
    unknown rule or midpoint."""
    x = np.ones((2, 3), F32)
    for kw, words in (({"lo": 1, "hi": 255}, "must hold 0"), ({"lo": 0, "hi": 0}, "lo < hi")):
        with pytest.raises(QrefError, match=words):
            observe_range(x, kw["lo"], kw["hi"], symmetric=False)
    with pytest.raises(QrefError, match="float batches"):
        observe_range(np.ones((2, 3), np.int32), 0, 255, symmetric=False)
    with pytest.raises(QrefError, match="non-empty batches"):
        observe_range(np.ones((2, 0), F32), 0, 255, symmetric=False)
    with pytest.raises(QrefError, match="range observer rule"):
        observe_range(x, 0, 255, symmetric=False, rule="minmax")
    with pytest.raises(QrefError, match="symmetric zero point"):
        observe_range(x, 0, 255, symmetric=True, midpoint="middle")
