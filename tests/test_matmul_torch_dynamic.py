"""PyTorch's dynamic quantized Linear (torch.ops.quantized.linear_dynamic, matmul.md §15) under every engine of
torch.backends.quantized.supported_engines, reduce_range True and False, against an independent transcription
written here (float64 Python scalars for the qparams, numpy float32 steps, exact fused multiply-adds) and against
qref's profile of the engine: float32 outputs compared as uint32, >= 10^6 outputs per engine and reduce_range.

Inputs are edge-heavy: every x / s a tie (s = 2^-4 and 2^-5 exactly, odd and even zero points), near ties at
non-dyadic scales, zero-point ties, all-negative / all-positive / all-zero / tiny-range tensors (the 0.1 scale, the
6.1e-5 floor), K = 1 and odd K (the quantization's vector tails), per-channel weights, weight zero points, float
biases. Weights stay within [-64, 64] where the codes are 8-bit, so u8 x s8 pair sums fit int16 and the results do
not depend on AVX-512 VNNI (matmul.md §3.2)."""

from __future__ import annotations

import os
import warnings
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from qref.recipes.qmatmul import dynamic_quantize, dynamic_quantize_matmul

torch = pytest.importorskip("torch")
from qref.harness.adapters.torch import DYNAMIC_PROFILES, linear_dynamic  # noqa: E402
from qref.profiles.cpu import host_cpu  # noqa: E402

torch.set_num_threads(1)
f32 = np.float32
ENGINES = [e for e in ("fbgemm", "x86", "onednn", "qnnpack") if e in torch.backends.quantized.supported_engines]


# ---- the independent transcription ------------------------------------------------------------------------------
def qparams(x: np.ndarray, qmax: int) -> tuple[float, int]:
    """ChooseQuantizationParams(min, max, 0, qmax): (float64 scale s_d, zero point)."""
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    sd = (hi - lo) / qmax
    if f32(sd) == 0 or np.isinf(np.float64(f32(1) / f32(sd))):
        sd = 0.1
    floor = float(f32(6.1e-5))
    if sd < floor:
        org = f32(sd)
        sd = floor
        if lo == 0:
            hi = float(f32(f32(floor) * f32(qmax)))
        elif hi == 0:
            lo = -float(f32(f32(floor) * f32(qmax)))
        else:
            amp = f32(f32(floor) / org)
            lo, hi = float(f32(f32(lo) * amp)), float(f32(f32(hi) * amp))
    zmin, zmax = -lo / sd, qmax - hi / sd
    z0 = zmin if -abs(lo / sd) < qmax - abs(hi / sd) else zmax
    return sd, int(np.rint(min(max(z0, 0.0), qmax)))


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 a * b + c rounded once: a * b is exact in float64; where the float64 sum is a float32 midpoint
    (a possible double rounding) the element is recomputed with Fractions."""
    a, b, c = np.broadcast_arrays(np.asarray(a, f32), np.asarray(b, f32), np.asarray(c, f32))
    s = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    r = s.astype(f32)
    lo = np.nextafter(r, f32(-np.inf)).astype(np.float64)
    hi = np.nextafter(r, f32(np.inf)).astype(np.float64)
    mid = (s == (r.astype(np.float64) + lo) / 2) | (s == (r.astype(np.float64) + hi) / 2)
    for i in zip(*np.nonzero(mid)):
        e = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        cands = [np.float32(float(e)), np.nextafter(np.float32(float(e)), f32(np.inf)),
                 np.nextafter(np.float32(float(e)), f32(-np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - e), int(np.asarray(v).view(np.uint32)) & 1))
        r[i] = best
    return r


def expected(engine: str, reduce_range: bool, x, w, ws, wz, bias) -> tuple[np.ndarray, np.ndarray]:
    """(codes, y) of the engine as read from PyTorch / fbgemm / oneDNN / QNNPACK (matmul.md §15)."""
    qmax = 127 if reduce_range and engine != "qnnpack" else 255
    sd, z = qparams(x, qmax)
    if engine == "onednn":
        k = f32(f32(1) / f32(1.0 / sd))
        t = ((x * f32(f32(1) / k)).astype(f32) + f32(z)).astype(f32)
    else:
        k = f32(sd)
        r = f32(f32(1) / k)
        t = (x.astype(np.float64) * float(r) + z).astype(f32)  # exact before the one rounding
    q = np.clip(np.rint(t), 0, qmax).astype(np.int64)
    wz = np.asarray(wz, np.int64).reshape(-1, 1) if np.ndim(wz) else np.int64(wz)
    acc = (q - z) @ (w.astype(np.int64) - wz).T
    fa = acc.astype(f32)
    ws = np.asarray(ws, f32)
    if engine == "onednn":
        wk = (f32(1) / (1.0 / ws.astype(np.float64)).astype(f32)).astype(f32)
        y = ((fa * k).astype(f32) * wk).astype(f32)
        y = (y + bias).astype(f32)
    else:
        m = (f32(sd) * ws).astype(f32)
        if engine == "qnnpack":
            y = ((fa * m).astype(f32) + bias).astype(f32)
        else:
            y = fma32(fa, np.broadcast_to(m, fa.shape), np.broadcast_to(bias, fa.shape))
    return q.astype(np.uint8), y


# ---- inputs -------------------------------------------------------------------------------------------------------
def ties(rng, M, K, qmax, z, e):
    """Every x / s a tie: s = 2^-e exactly (hi - lo = qmax 2^-e), zero point z."""
    k = rng.integers(-z, qmax - z, (M, K))
    x = ((k + 0.5) * 2.0**-e).astype(f32)
    x[0, 0], x[0, 1] = -z * 2.0**-e, (qmax - z) * 2.0**-e
    return x


def near_ties(rng, M, K, lo, hi, qmax):
    x = rng.uniform(lo, hi, (M, K)).astype(f32)
    x[0, 0], x[0, 1] = lo, hi
    sd, z = qparams(x, qmax)
    k = rng.integers(-z, qmax - z, (M, K))
    v = ((k + 0.5) * sd).astype(f32)
    v = (v.view(np.int32) + rng.integers(-2, 3, (M, K)).astype(np.int32)).view(f32)
    v[0, 0], v[0, 1] = lo, hi
    return np.clip(v, f32(lo), f32(hi))


def operands(rng, name, M, K, N, qmax, engine, per_channel):
    wmax = 127 if qmax == 127 else 64
    w = rng.integers(-wmax, wmax + 1, (N, K)).astype(np.int8)
    w[:, :1] = wmax
    if per_channel:
        ws = (np.abs(rng.standard_normal(N)) * 0.01 + 1e-3).astype(f32)
        ws[:2] = (2.0**-7, 0.0123)
        wz = np.zeros(N, np.int64) if engine == "onednn" else rng.integers(-16, 17, N)
    else:
        ws, wz = f32(0.0371), (0 if engine == "onednn" else 5)
    bias = (rng.standard_normal(N) * 4).astype(f32)
    bias[:3] = (0.0, -0.0, 2.0**-20)
    return w, ws, wz, bias


def problems(engine, reduce_range):
    qmax = 127 if reduce_range and engine != "qnnpack" else 255
    rng = np.random.default_rng(zlib.crc32(f"{engine}/{reduce_range}".encode()))
    xs = [("ties_z_odd", ties(rng, 512, 64, qmax, 101 if qmax == 255 else 51, 4)),
          ("ties_z_even", ties(rng, 256, 64, qmax, 100 if qmax == 255 else 50, 5)),
          ("near_ties", near_ties(rng, 512, 64, -3.1, 7.3, qmax)),
          ("near_ties_small", near_ties(rng, 256, 64, -0.77, 0.05, qmax)),
          ("all_negative", -np.abs(rng.standard_normal((128, 64)).astype(f32))),
          ("all_positive", np.abs(rng.standard_normal((128, 64)).astype(f32)) * 3),
          ("all_zero", np.zeros((8, 64), f32)),
          ("tiny_range", (rng.standard_normal((64, 64)) * 1e-4).astype(f32)),
          ("tiny_positive", (np.abs(rng.standard_normal((64, 64))) * 1e-5).astype(f32)),
          ("zero_point_tie", np.clip(rng.uniform(-3, 8, (64, 64)), -100.5 / 16, (qmax - 100.5) / 16).astype(f32)),
          ("k1", rng.standard_normal((37, 1)).astype(f32)),
          ("k_odd", (rng.standard_normal((33, 7)) * 2).astype(f32)),
          ("wide", (rng.standard_normal((128, 65)) * 2.0 ** rng.integers(-20, 20, (128, 65))).astype(f32))]
    xs[9][1][0, :2] = (-100.5 / 16, (qmax - 100.5) / 16)
    for name, x in xs:
        for pc in (False, True):
            N = 512 if name.startswith(("ties", "near")) else 96
            yield name, x, pc, *operands(rng, name, x.shape[0], x.shape[1], N, qmax, engine, pc)


@pytest.mark.parametrize("reduce_range", [True, False])
@pytest.mark.parametrize("engine", ENGINES)
def test_linear_dynamic_bit_exact(engine, reduce_range):
    if engine == "onednn" and host_cpu().has("amx_int8") and "ONEDNN_MAX_CPU_ISA" not in os.environ:
        pytest.skip("CPU variant onednn_int8_amx_kernels: oneDNN's AMX int8 kernels apply the scales otherwise (not "
                    "modelled); ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI checks the VNNI kernels of the profile")
    profile = DYNAMIC_PROFILES[(engine, reduce_range)]
    total = 0
    for name, x, pc, w, ws, wz, bias in problems(engine, reduce_range):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = linear_dynamic(torch, engine, x, w.T, ws, wz, bias, reduce_range)
        codes, want = expected(engine, reduce_range, x, w, ws, wz, bias)
        r = dynamic_quantize_matmul(x, np.ascontiguousarray(w.T), b_scale=ws,
                                    b_zero_point=np.asarray(wz).astype(np.int8), bias=bias, profile=profile)
        assert r.a_codes.tobytes() == codes.tobytes(), (name, pc)
        bad = got.view(np.uint32) != want.view(np.uint32)
        assert not bad.any(), (name, pc, int(bad.sum()), got[bad][:3], want[bad][:3])
        assert r.values.view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), (name, pc)
        total += got.size
    assert total >= 10**6


def test_qparams_edges():
    """The scale and zero point rules by hand, each checked against fbgemm through an identity weight (y = (q - z)
    fl32(s) exactly): a zero range takes scale 0.1 and zero point 0; a range below 127 fl32(6.1e-5) is floored;
    -lo / s = 100.5 gives the zero point 100 (nearest even)."""
    x = np.array([[0.0, 1e-3, 5e-4]], f32)
    cases = [(np.zeros((1, 3), f32), True, f32(0.1), 0),
             (x, True, f32(6.1e-5), 0),
             (np.array([[-100.5 / 16, (255 - 100.5) / 16, 1 / 32]], f32), False, f32(1 / 16), 100)]
    for v, rr, scale, zp in cases:
        r = dynamic_quantize(v, dynamic_rules("fbgemm", rr))
        assert (r.scale, r.zero_point) == (scale, zp)
        y = linear_dynamic(torch, "fbgemm", v, np.eye(3, dtype=np.int8), f32(1), 0, None, rr)
        assert y.tobytes() == ((r.codes.astype(np.int64) - zp) * np.float64(scale)).astype(f32).tobytes()
    assert int(dynamic_quantize(x, dynamic_rules("fbgemm", True)).codes[0, 1]) == round(1e-3 / float(f32(6.1e-5)))
    assert qparams(cases[2][0], 255) == (1 / 16, 100)


def dynamic_rules(engine: str, reduce_range: bool):
    from qref.profiles import resolve_profile

    return resolve_profile(DYNAMIC_PROFILES[(engine, reduce_range)], "matmul").profile.rules.dynamic


def test_linear_dynamic_without_vnni(tmp_path):
    """CPU dependence (matmul.md §15 C3): in a process whose fbgemm / oneDNN dispatch is masked to AVX2 (no AVX-512
    VNNI), 8-bit codes times int8 weights are summed in int16 pairs with saturation (vpmaddubsw, matmul.md §3.2):
    the outputs follow the profile with pair_sum saturating_int16; 7-bit codes (reduce_range) cannot saturate
    (127 x 128 x 2 < 2^15). oneDNN's AVX2 kernels also apply its two scales as one product fl32(k w_s')."""
    import os
    import subprocess
    import sys

    from qref.profiles import resolve_profile

    rng = np.random.default_rng(8)
    x = rng.uniform(-0.05, 4.0, (64, 64)).astype(f32)
    x[:, ::2] = 4.0  # codes at the top of the range
    w = rng.integers(-128, 128, (64, 48)).astype(np.int8)
    w[::2, :8] = -128
    np.savez(tmp_path / "in.npz", x=x, w=w)
    script = ("import sys, numpy as np, torch; sys.path.insert(0, sys.argv[1]); "
              "from qref.harness.adapters.torch import linear_dynamic; d = np.load(sys.argv[2]); "
              "torch.set_num_threads(1); "
              "np.savez(sys.argv[3], **{f'{e}_{rr}': linear_dynamic(torch, e, d['x'], d['w'], np.float32(0.01), 0, "
              "None, rr) for e in ('fbgemm', 'onednn') for rr in (True, False)})")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    subprocess.run([sys.executable, "-c", script, root, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                   env=env, check=True, capture_output=True)
    got = np.load(tmp_path / "out.npz")
    saturated = 0
    for e in ("fbgemm", "onednn"):
        for rr in (True, False):
            rules = resolve_profile(DYNAMIC_PROFILES[(e, rr)], "matmul").profile.rules
            plain = dynamic_quantize_matmul(x, w, b_scale=f32(0.01), rules=rules).values
            if not rr:
                rules = rules.replace(pair_sum="saturating_int16")
            if e == "onednn":  # oneDNN's AVX2 kernels apply the two scales as one product fl32(k w_s')
                rules = rules.replace(association="sequential_ab_reciprocal_y")
            want = dynamic_quantize_matmul(x, w, b_scale=f32(0.01), rules=rules).values
            assert got[f"{e}_{rr}"].tobytes() == want.tobytes(), (e, rr)
            saturated += int(np.sum(want.view(np.uint32) != plain.view(np.uint32)))
    assert saturated > 0  # the 8-bit products do saturate on these operands
