"""FakeQuantize(x, il, ih, ol, oh, levels) with general float output ranges on the OpenVINO CPU plugin against
``qref.schemes.uniform.reference.fake_quantize`` (uniform.md §2.8), bit for bit, on a runtime input (profile rule
``openvino_cpu``) and on a Constant (``openvino``).

Inputs per configuration: the ties il + (k + 1/2)(ih - il) / n of both forms and their float32 neighbours, the level
points, uniform random values over [il - 1, ih + 1], il, ih, +-0, +-Inf (NaN is unspecified and left out).
Configurations: levels 3, 7, 15, 16, 17, 255, 256, 257, 1000, 65536 with output ranges of every sign pattern
(ol < oh, ol > oh, ol = il and oh = ih), random and the 0.1..25.5 example, per tensor; and ranges per element
varying along one axis or several (SHAPES), half ties, for levels 15, 16, 255, 256, 1000, 65536.

    PYTHONPATH=. python scripts/verify_openvino_fq.py [--seed 0] [--configs 6] [--isa SSE41]

``--isa`` sets ONEDNN_MAX_CPU_ISA before OpenVINO loads (the CPU plugin's Snippets kernels follow it): with SSE41
the runtime-input output step is a multiply then an add; the script then checks the ``openvino_cpu`` rule with
output_step "multiply_add". Prints the counts; exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

LEVELS = (3, 7, 15, 16, 17, 255, 256, 257, 1000, 65536)
#: (x shape, range shape): ranges along one axis (each axis of 2-D to 4-D x) and along several axes (blocks)
SHAPES = (((8, 64), (8, 64)), ((8, 64), (8, 1)), ((8, 64), (1, 64)), ((8, 4, 16), (8, 4, 1)),
          ((8, 4, 16), (1, 4, 16)), ((8, 4, 16), (8, 1, 16)), ((3, 5, 7), (1, 1, 7)), ((3, 5, 7), (1, 5, 1)),
          ((3, 5, 7), (3, 1, 1)), ((3, 5, 7), (3, 5, 7)), ((2, 3, 5, 7), (1, 3, 1, 1)), ((2, 3, 5, 7), (1, 1, 5, 1)),
          ((2, 3, 5, 7), (1, 1, 1, 7)), ((2, 3, 5, 7), (2, 1, 1, 1)), ((2, 3, 5, 7), (1, 3, 5, 1)))


def inputs(il: np.float32, ih: np.float32, levels: int, rng: np.random.Generator) -> np.ndarray:
    f32 = np.float32
    k = np.arange(levels, dtype=np.float64)
    if k.size > 4000:
        k = np.unique(np.concatenate([rng.choice(k, 4000, replace=False), k[:16], k[-16:]]))
    d = (np.float64(ih) - np.float64(il)) / (levels - 1)
    isc = f32(f32(levels - 1) / f32(ih - il))
    c = f32(il * isc)
    pts = [(np.float64(il) + (k + 0.5) * d).astype(f32), (np.float64(il) + k * d).astype(f32),
           ((k + 0.5 + np.float64(c)) / np.float64(isc)).astype(f32)]
    t = np.concatenate(pts)
    return np.concatenate([t, np.nextafter(t, f32(np.inf)), np.nextafter(t, f32(-np.inf)),
                           rng.uniform(float(il) - 1, float(ih) + 1, 4000).astype(f32),
                           np.array([il, ih, 0.0, -0.0, np.inf, -np.inf], f32)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--configs", type=int, default=6, help="output ranges per level count")
    ap.add_argument("--isa", default=None, help="ONEDNN_MAX_CPU_ISA for the plugin (e.g. SSE41, AVX2)")
    ap.add_argument("--output-step", choices=("fma", "multiply_add"), default=None,
                    help="the openvino_cpu rule's output step (default: fma, multiply_add under --isa SSE41)")
    a = ap.parse_args()
    if a.isa:
        os.environ["ONEDNN_MAX_CPU_ISA"] = a.isa
    import openvino as ov
    from openvino import opset13 as ops

    from qref.errors import QrefError
    from qref.harness.adapters.openvino import run_graph
    from qref.profiles.uniform import FAKE_QUANTIZE_RULES
    from qref.schemes.uniform.reference import fake_quantize

    rules = dict(FAKE_QUANTIZE_RULES)
    step = a.output_step or ("multiply_add" if a.isa and a.isa.upper().startswith("SSE") else "fma")
    rules["openvino_cpu"] = dataclasses.replace(rules["openvino_cpu"], output_step=step)
    f32 = np.float32
    rng = np.random.default_rng(a.seed)
    counts = {m: [0, 0, 0] for m in ("parameter", "constant")}  # configurations, values, mismatches
    crashes: list[str] = []
    outside: list[str] = []

    def check(x: np.ndarray, rng_: tuple[np.ndarray, ...], levels: int, what: str) -> None:
        for mode, prof in (("parameter", "openvino_cpu"), ("constant", "openvino")):
            try:
                want = fake_quantize(x, *rng_, levels, rules[prof])
            except QrefError:
                want = None
            try:
                got = run_graph(lambda nd, c=rng_, lv=levels: ops.fake_quantize(
                    nd, *[ops.constant(np.ascontiguousarray(v)) for v in c], lv), "f32", x.shape, x, mode)
            except RuntimeError as e:
                (crashes if want is not None else outside).append(
                    f"{mode} {what}: {str(e).strip().splitlines()[-1][:110]}")
                continue
            if want is None:
                outside.append(f"{mode} {what}: runs, outside the rule")
                continue
            got = got.view(f32).reshape(x.shape)
            bad = got.view(np.uint32) != want.view(np.uint32)
            c = counts[mode]
            c[0] += 1
            c[1] += x.size
            c[2] += int(bad.sum())
            if bad.any():
                i = int(np.flatnonzero(bad.reshape(-1))[0])
                print(f"MISMATCH {mode} {what} x={x.reshape(-1)[i]!r}: openvino {got.reshape(-1)[i]!r}, qref "
                      f"{want.reshape(-1)[i]!r} ({int(bad.sum())} values)")

    for levels in LEVELS:  # per tensor
        for j in range(a.configs):
            lo_hi = np.sort(rng.normal(0, 5, 2)).astype(f32)
            il, ih = lo_hi[0], lo_hi[1]
            ol, oh = rng.normal(0, 5, 2).astype(f32)
            if j == 0:
                il, ih, ol, oh = f32(-0.3), f32(25.2), f32(0.1), f32(25.5)
            elif j == 1:
                ol, oh = il, ih
            elif j == 2:
                ol, oh = max(ol, oh), min(ol, oh)
            check(inputs(il, ih, levels, rng), tuple(np.array([v], f32) for v in (il, ih, ol, oh)), levels,
                  f"levels={levels} il={il!r} ih={ih!r} ol={ol!r} oh={oh!r}")
    for xs, rs in SHAPES * 2:  # ranges per axis and along several axes
        for levels in (15, 16, 255, 256, 1000, 65536):
            il = rng.uniform(-3, -1, rs).astype(f32)
            ih = (il + rng.uniform(0.5, 5, rs)).astype(f32)
            scalar_out = bool(rng.random() < 0.5)  # output ranges per tensor, input ranges along the axes
            ors = (1,) if scalar_out else rs
            ol, oh = rng.normal(0, 3, ors).astype(f32), rng.normal(0, 3, ors).astype(f32)
            k = rng.integers(0, levels - 1, xs) + 0.5
            tie = (il.astype(np.float64) + k * (ih.astype(np.float64) - il) / (levels - 1)).astype(f32)
            x = np.where(rng.random(xs) < 0.5, tie, rng.uniform(-4, 5, xs).astype(f32)).astype(f32)
            check(x, (il, ih, ol, oh), levels, f"levels={levels} x {xs} ranges {rs}, output ranges {ors}")
    print(f"openvino {ov.__version__}, ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(not set)')}, "
          f"openvino_cpu output step {step}")
    for mode, (nc, nv, nb) in counts.items():
        print(f"{mode}: {nc} configurations, {nv} values, {nb} mismatches")
    for line in crashes:
        print(f"CRASH {line}")
    for line in outside:
        print(f"OUTSIDE {line}")
    print(f"graphs that fail to compile: {len(crashes)}; outside the rules (QrefError): {len(outside)}")
    total = sum(c[1] for c in counts.values())
    print(f"total: {total} values, {sum(c[2] for c in counts.values())} mismatches")
    return 1 if any(c[2] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
