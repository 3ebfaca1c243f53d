"""Verify the range observer rules (uniform.md §5.4), the per-token formula (§5.2) and the histogram observer
rule (§5.5) live against torch.ao.quantization, bit for bit, on at least 10^6 input values per rule.

Each rule gets many runs of 1-3 seeded batches mixing bell-shaped, uniform, heavy-tailed and outlier batches at
scales 2^k (|k| <= 40), all-equal batches, tiny and subnormal values, zero-point ties (m = -(k + 1/2) / 16, range
255 / 16) and, for the range observers, +-Inf and NaN; over int8 / uint8, full and reduced ranges, affine and
symmetric schemes (and the floor midpoint). Compared: the scale's float32 bits (both NaN counts as equal: its sign
and payload are unspecified, §5.4 C2) and the zero point as an integer where qref does not mark it unspecified.
Rules: MinMaxObserver, MovingAverageMinMaxObserver (random averaging constants), PerChannelMinMaxObserver,
MovingAveragePerChannelMinMaxObserver (qref.analysis.calibrate.observe_range), the per-token
quantized_decomposed.choose_qparams_per_token_asymmetric on float32 / float64 rows (qref.calibrate, formula
divide_eps_balanced_zero_point, finite rows), HistogramObserver (observe_histogram, finite float32 batches with
+-Inf; its 2048 histogram bins are compared too). Prints per rule the input values, the outputs compared and the
mismatches; exit 1 on any mismatch.

    PYTHONPATH=$PWD python scripts/verify_torch_observers.py [--values N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # registers quantized_decomposed
from torch.ao.quantization import observer as obs

from qref.analysis.calibrate import calibrate, observe_histogram, observe_range
from qref.errors import QrefError

F32 = np.float32
#: (storage, torch dtype, full range, reduced range)
STORAGES = (("uint8", torch.quint8, (0, 255), (0, 127)), ("int8", torch.qint8, (-128, 127), (-64, 63)))


def batch(rng: np.random.Generator, n: int, specials: bool) -> np.ndarray:
    """One seeded float32 batch of n values (module docstring)."""
    kind = int(rng.integers(0, 9))
    scale = 2.0 ** int(rng.integers(-40, 41))
    if kind == 0:
        x = rng.standard_normal(n) * scale
    elif kind == 1:
        x = rng.uniform(-1, 3, n) * scale
    elif kind == 2:
        x = rng.standard_cauchy(n) * scale
    elif kind == 3:
        x = rng.standard_normal(n) * scale
        x[rng.integers(0, n, max(1, n // 500))] *= 1000.0
    elif kind == 4:
        x = np.full(n, rng.standard_normal() * scale)
    elif kind == 5:
        x = rng.standard_normal(n) * 2.0 ** int(rng.integers(-149, -120))  # tiny and subnormal
    elif kind == 6:  # zero-point ties: min -(k + 1/2) / 16, max - min = 255 / 16
        m = -(int(rng.integers(0, 128)) + 0.5) / 16
        x = np.concatenate([[m, m + 255 / 16], rng.uniform(m, m + 255 / 16, max(0, n - 2))])
    elif kind == 7:
        x = rng.integers(-3, 4, n).astype(np.float64) * scale  # few distinct values, zeros
    else:
        x = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))  # wide dynamic range
    x = x[:n].astype(F32)
    if specials and rng.random() < 0.1:
        x[rng.integers(0, n)] = rng.choice([np.inf, -np.inf, np.nan])
    elif not specials and rng.random() < 0.1:
        x[rng.integers(0, n)] = rng.choice([np.inf, -np.inf])  # HistogramObserver leaves +-Inf out
    return x


def same_scale(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, F32).reshape(-1), np.asarray(b, F32).reshape(-1)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def scheme_args(rng: np.random.Generator, per_channel: bool, floor_ok: bool = True
                ) -> tuple[dict, int, int, bool, str]:
    """torch observer kwargs and qref's (lo, hi, symmetric, midpoint)."""
    st, dt, full, red = STORAGES[int(rng.integers(0, 2))]
    sym = bool(rng.integers(0, 2))
    kind = "channel" if per_channel else "tensor"
    kw = {"dtype": dt, "qscheme": getattr(torch, f"per_{kind}_{'symmetric' if sym else 'affine'}")}
    lo, hi, mid = *full, "ceil_midpoint"
    r = rng.random()
    if r < 0.25 and not (sym and st == "uint8"):  # torch refuses a reduced symmetric quint8 range
        kw["reduce_range"] = True
        lo, hi = red
    elif r < 0.35 and floor_ok and st == "uint8":  # a customized range: the floor midpoint
        lo, hi = 0, int(rng.integers(15, 256))
        kw["quant_min"], kw["quant_max"] = lo, hi
        mid = "floor_midpoint"
    return kw, lo, hi, sym, mid


def run_range(rule: str, cls_name: str, per_channel: bool, moving: bool, values: int,
              rng: np.random.Generator) -> tuple[int, int, int]:
    """(input values, outputs compared, mismatches) of one range observer class."""
    n_in = n_cmp = bad = 0
    cls = getattr(obs, cls_name)
    while n_in < values:
        kw, lo, hi, sym, mid = scheme_args(rng, per_channel)
        c = float(rng.choice([0.01, 0.9, 1 / 3, float(rng.random())])) if moving else 0.01
        if moving:
            kw["averaging_constant"] = c
        if per_channel:
            kw["ch_axis"] = 0
        ch = int(rng.integers(1, 9)) if per_channel else 1
        n = int(2.0 ** rng.uniform(0, 11))  # 1 .. 2048 values, log-uniform
        bs = np.stack([np.stack([batch(rng, n, True) for _ in range(ch)]) for _ in range(int(rng.integers(1, 4)))])
        if not per_channel:
            bs = bs[:, 0]
        o = cls(**kw)
        try:
            for b in bs:
                o(torch.from_numpy(np.ascontiguousarray(b)))
            s, z = o.calculate_qparams()
        except AssertionError:  # min > max after rounding: qref must raise too (uniform.md §5.4 C3)
            s = None
        try:
            r = observe_range(bs, lo, hi, symmetric=sym, rule=rule, axis=0 if per_channel else None,
                              averaging_constant=c, midpoint=mid)
        except QrefError:
            r = None
        if s is None or r is None:
            n_in += bs.size
            n_cmp += 1
            bad += (s is None) != (r is None)
            continue
        ok = same_scale(s.numpy(), r.scales)
        zok = (z.numpy().astype(np.int64).reshape(-1) == np.asarray(r.zero_points).reshape(-1)) | \
            np.asarray(r.unspecified).reshape(-1)
        n_in += bs.size
        n_cmp += 2 * ok.size
        bad += int((~ok).sum() + (~zok).sum())
    return n_in, n_cmp, bad


def run_per_token(values: int, rng: np.random.Generator) -> tuple[int, int, int]:
    op = torch.ops.quantized_decomposed.choose_qparams_per_token_asymmetric
    n_in = n_cmp = bad = 0
    while n_in < values:
        dt = np.float32 if rng.random() < 0.5 else np.float64
        rows, n = int(rng.integers(1, 64)), int(rng.integers(1, 512))
        x = np.stack([batch(rng, n, False) for _ in range(rows)]).astype(dt)
        x = x[np.isfinite(x).all(axis=1)]
        if x.shape[0] == 0:
            continue
        s, z = op(torch.from_numpy(x), torch.int8)
        c = calibrate(x, "int8", "minmax", axis=0, formula="divide_eps_balanced_zero_point")
        got = s.numpy().astype(np.float64).reshape(-1)  # float64 scales (a float32 row's are float32 values)
        ok = got.view(np.uint64) == np.asarray(c.scales, np.float64).reshape(-1).view(np.uint64)
        zok = z.numpy().astype(np.int64).reshape(-1) == c.zero_points.reshape(-1)
        n_in += x.size
        n_cmp += 2 * ok.size
        bad += int((~ok).sum() + (~zok).sum())
    return n_in, n_cmp, bad


def run_histogram(values: int, rng: np.random.Generator) -> tuple[int, int, int]:
    n_in = n_cmp = bad = 0
    while n_in < values:
        kw, lo, hi, sym, mid = scheme_args(rng, False, floor_ok=False)
        bs = [batch(rng, int(rng.integers(1, 4000)), False) for _ in range(int(rng.integers(1, 4)))]
        o = obs.HistogramObserver(**kw)
        for b in bs:
            o(torch.from_numpy(b))
        s, z = o.calculate_qparams()
        r = observe_histogram(bs, lo, hi, symmetric=sym, midpoint=mid)
        ok = same_scale(s.numpy(), r.scales)
        zok = int(z.reshape(-1)[0]) == int(r.zero_points)
        hok = o.histogram.numpy().view(np.uint32) == r.histogram.view(np.uint32)  # the running histogram too
        n_in += sum(b.size for b in bs)
        n_cmp += 2 + hok.size
        bad += int((~ok).sum()) + (not zok) + int((~hok).sum())
    return n_in, n_cmp, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", type=int, default=10**6, help="input values per rule (default 10^6)")
    ap.add_argument("--seed", type=int, default=31)
    a = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(a.seed)
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), {a.values} values per rule, "
          f"seed {a.seed}")
    jobs = [("MinMaxObserver", lambda: run_range("pytorch_minmax_observer", "MinMaxObserver", False, False,
                                                 a.values, rng)),
            ("MovingAverageMinMaxObserver", lambda: run_range("pytorch_moving_average_observer",
                                                              "MovingAverageMinMaxObserver", False, True, a.values,
                                                              rng)),
            ("PerChannelMinMaxObserver", lambda: run_range("pytorch_minmax_observer", "PerChannelMinMaxObserver",
                                                           True, False, a.values, rng)),
            ("MovingAveragePerChannelMinMaxObserver", lambda: run_range(
                "pytorch_moving_average_observer", "MovingAveragePerChannelMinMaxObserver", True, True, a.values,
                rng)),
            ("choose_qparams_per_token_asymmetric", lambda: run_per_token(a.values, rng)),
            ("HistogramObserver", lambda: run_histogram(a.values, rng))]
    total_bad = 0
    for name, job in jobs:
        t0 = time.time()
        n_in, n_cmp, bad = job()
        total_bad += bad
        print(f"{name}: {n_in} input values, {n_cmp} outputs compared, {bad} mismatches ({time.time() - t0:.0f} s)",
              flush=True)
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
