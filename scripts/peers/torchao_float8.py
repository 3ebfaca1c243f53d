"""Peer vectors of torchao's float8 training casts (tensorwise and rowwise dynamic scaling), on CPU.

    python scripts/peers/torchao_float8.py --out tests/peers/torchao_float8

Runs the installed torchao (0.18.0, recorded with torch's version) unmodified:
``torchao.float8.float8_scaling_utils.hp_tensor_to_float8_dynamic(x, float8_dtype, LinearMMConfig(),
scaling_granularity=TENSORWISE | AXISWISE, axiswise_dim=..., round_scales_to_power_of_2=...)`` and stores the
result's ``_data`` (FP8 codes, uint8) and ``_scale`` (float32 bits, uint32). The configurations are the casts of
``Float8LinearConfig`` recipes ``tensorwise`` (E4M3 inputs / weights, E5M2 gradients, float32 scales) and
``rowwise`` (E4M3, power-of-two scales, along the last axis or the first).

Inputs (seeded numpy, float32 and bfloat16 bit patterns, 64 x 256): row-scaled normal, Student-t, log-uniform,
E4M3 / E5M2 ties under exact scales, row maxima next to 448 * 2^k, tiny (below torchao's EPS = 1e-12), huge, zero
rows of both signs, each also +-1 ulp where it matters; NaN and Inf in separate tensors; and 16 small 8 x 32
tensors whose amax sits next to a scale boundary (tensorwise). README.md next to the vectors states torchao's
semantics as read from its code. Nothing of torchao is copied: only the outputs its code produced.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

# (name, granularity, fp8, pow2, axiswise_dim)
CONFIGS = (
    ("tensorwise_e4m3", "tensorwise", "e4m3", False, None),
    ("tensorwise_e5m2", "tensorwise", "e5m2", False, None),
    ("tensorwise_e4m3_pow2", "tensorwise", "e4m3", True, None),
    ("rowwise_e4m3_pow2_dim-1", "axiswise", "e4m3", True, -1),
    ("rowwise_e4m3_pow2_dim0", "axiswise", "e4m3", True, 0),
    ("rowwise_e4m3_dim-1", "axiswise", "e4m3", False, -1),
    ("rowwise_e5m2_pow2_dim-1", "axiswise", "e5m2", True, -1),
)
KINDS = ("normal", "student_t", "log_uniform", "e4m3_ties", "e5m2_ties", "boundaries", "tiny", "huge", "zeros")
NUDGED = ("normal", "e4m3_ties", "e5m2_ties", "boundaries")


def _grid(name: str) -> np.ndarray:
    import ml_dtypes

    dt = ml_dtypes.float8_e4m3fn if name == "e4m3" else ml_dtypes.float8_e5m2
    g = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)))
    return g[np.isfinite(g)]


def design(rng: np.random.Generator, kind: str, shape: tuple[int, int] = (64, 256)) -> np.ndarray:
    r = shape[0]
    rows = 2.0 ** rng.integers(-20, 20, size=(r, 1))
    if kind == "normal":
        return rng.standard_normal(shape) * rows
    if kind == "student_t":
        return rng.standard_t(1.5, shape)
    if kind == "log_uniform":
        return rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-60, 60, shape)
    if kind in ("e4m3_ties", "e5m2_ties"):  # every row's max is the format's max: rowwise scales are exact
        g = _grid(kind[:4])
        mids = np.r_[g, (g[1:] + g[:-1]) / 2]
        v = rng.choice(mids, shape) * rng.choice([-1.0, 1.0], shape)
        v[:, 0] = g[-1] * rng.choice([-1.0, 1.0], r)
        return v * rows
    if kind == "boundaries":  # row maxima 448 * 2^k * (1 + d)
        v = rng.uniform(-1, 1, shape) * 448.0
        d = rng.choice([-(2.0**-23), 0.0, 2.0**-23, -(2.0**-8), 2.0**-7, -(2.0**-22)], (r, 1))
        v[:, 7:8] = 448.0 * (1 + d)
        return v * rows
    if kind == "tiny":
        return rng.uniform(-1, 1, shape) * 2.0 ** rng.integers(-149, -30, size=(r, 1))
    if kind == "huge":
        return rng.uniform(-1, 1, shape) * 3.0e38
    if kind == "zeros":
        v = rng.standard_normal(shape) * 1e-3
        v[: r // 2] = 0.0
        v[r // 4: r // 2] = -0.0
        v[1::8, :] = 0.0
        return v
    raise ValueError(kind)


def to_bits(v: np.ndarray, dtype: str, rng: np.random.Generator, nudge: bool) -> np.ndarray:
    import torch

    with np.errstate(over="ignore"):
        f32 = v.astype(np.float32)
    if dtype == "float32":
        b = f32.view(np.uint32).copy()
        top, mask = np.uint32(0x7F7FFFFF), np.uint32(0x7FFFFFFF)
    else:
        b = torch.from_numpy(f32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
        top, mask = np.uint16(0x7F7F), np.uint16(0x7FFF)
    if nudge:
        mag = np.clip((b & mask).astype(np.int64) + rng.integers(-1, 2, size=b.shape), 0, int(top))
        b = ((b & ~mask) | mag.astype(b.dtype)).astype(b.dtype)
    return b


def torch_of(bits: np.ndarray, dtype: str) -> Any:
    import torch

    if dtype == "float32":
        return torch.from_numpy(bits.view(np.float32).copy())
    return torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)


def semantics_model(x: np.ndarray, granularity: str, fp8: str, pow2: bool, dim: int | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """README.md's steps 1-5 in numpy (codes uint8, scale float32); torch.log2 only for step 4's logarithm."""
    import ml_dtypes
    import torch

    fdt, fmax = (ml_dtypes.float8_e4m3fn, 448.0) if fp8 == "e4m3" else (ml_dtypes.float8_e5m2, 57344.0)
    with np.errstate(all="ignore"):
        amax = np.asarray(np.abs(x).max() if granularity == "tensorwise" else np.abs(x).max(axis=dim, keepdims=True))
        res = (fmax / np.where(np.isnan(amax), amax, np.maximum(amax, 1e-12))).astype(np.float32)
        if pow2:
            lg = torch.log2(torch.from_numpy(np.atleast_1d(res).copy())).numpy().reshape(res.shape)
            res = np.exp2(np.floor(lg)).astype(np.float32)
        prod = np.clip((x * res.astype(np.float64)).astype(np.float32), -fmax, fmax)
        return prod.astype(fdt).view(np.uint8), res


def check(out: Path) -> int:
    """Hold the vectors to semantics_model (README.md): codes compared (NaN codes as NaN), mismatching arrays."""
    import ml_dtypes

    man = json.loads((out / "manifest.json").read_text())
    with np.load(out / "vectors.npz") as f:
        z = {k: f[k] for k in f.files}
    compared, bad = 0, []
    for t in man["tensors"]:
        dtype = t.split("__")[0]
        xb = z[f"{t}__x"]
        x = (xb.view(np.float32) if dtype == "float32" else xb.view(ml_dtypes.bfloat16)).astype(np.float64)
        for name, g, fp8, pow2, dim in CONFIGS:
            key = f"{t}__{name}"
            if f"{key}__codes" not in z:
                continue
            codes, scale = semantics_model(x, g, fp8, pow2, dim)
            want, ws = z[f"{key}__codes"], z[f"{key}__scale"].view(np.float32)
            top = 0x7F if fp8 == "e4m3" else 0x7D
            nan = ((codes & 0x7F) >= top) & ((want & 0x7F) >= top)
            scale = scale.reshape(ws.shape)
            ok_s = (scale.view(np.uint32) == ws.view(np.uint32)) | (np.isnan(scale) & np.isnan(ws))
            compared += codes.size
            if not (((codes == want) | nan).all() and ok_s.all()):
                bad.append(key)
    print(f"semantics model: {compared} codes compared, {len(bad)} arrays differ {bad[:5]}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--check-only", action="store_true", help="only hold --out's vectors to the README's model")
    a = ap.parse_args(argv)
    if a.check_only:
        return check(Path(a.out))
    import torch
    import torchao
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import LinearMMConfig

    gran = {"tensorwise": ScalingGranularity.TENSORWISE, "axiswise": ScalingGranularity.AXISWISE}
    fp8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    rng = np.random.default_rng(a.seed)
    tensors = []
    for dtype in ("float32", "bfloat16"):
        for kind in KINDS:
            for nudge in (False, True) if kind in NUDGED else (False,):
                tensors.append((f"{dtype}__{kind}__{int(nudge)}", to_bits(design(rng, kind), dtype, rng, nudge),
                                dtype))
        for special in ("nan", "inf"):
            v = design(rng, "normal")
            v[3, 5] = np.nan if special == "nan" else np.inf
            v[40, 200] = -np.inf if special == "inf" else 1.0
            tensors.append((f"{dtype}__{special}__0", to_bits(v, dtype, rng, False), dtype))
        for i in range(16):  # tensor maxima next to a scale boundary (E4M3 and E5M2 maxima times 2^k), or tiny
            if i < 12:
                top = (448.0, 57344.0)[i % 2] * 2.0 ** rng.integers(-30, 30)
                d = (-(2.0**-23), 0.0, 2.0**-23, -(2.0**-8), 2.0**-7, -(2.0**-22))[i // 2]
                v = rng.uniform(-1, 1, (8, 32)) * top / 2
                v[2, 3] = top * (1 + d)
            else:  # amax below torchao's EPS = 1e-12 (about 2^-39.9)
                v = rng.uniform(-1, 1, (8, 32)) * 2.0 ** (-41 - i)
                v[2, 3] = 2.0 ** (-40 - i)
            tensors.append((f"{dtype}__amax_{i}__0", to_bits(v, dtype, rng, False), dtype))
    arrays: dict[str, np.ndarray] = {}
    for tag, xbits, dtype in tensors:
        x = torch_of(xbits, dtype)
        arrays[f"{tag}__x"] = xbits
        for name, g, f, pow2, dim in CONFIGS:
            if tag.split("__")[1].startswith("amax_") and g != "tensorwise":
                continue
            q = hp_tensor_to_float8_dynamic(x, fp8[f], LinearMMConfig(), scaling_granularity=gran[g],
                                            axiswise_dim=dim, round_scales_to_power_of_2=pow2)
            arrays[f"{tag}__{name}__codes"] = q._data.view(torch.uint8).numpy().copy()
            arrays[f"{tag}__{name}__scale"] = q._scale.contiguous().view(torch.int32).numpy().view(np.uint32).copy()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "pytorch/ao (torchao) float8 training casts",
        "repository": "https://github.com/pytorch/ao", "version": torchao.__version__,
        "entry": "torchao/float8/float8_scaling_utils.py hp_tensor_to_float8_dynamic(x, float8_dtype, "
                 "LinearMMConfig(), scaling_granularity, axiswise_dim, round_scales_to_power_of_2): _data, _scale",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "device": "cpu",
        "seed": a.seed, "tensors": [t for t, _, _ in tensors],
        "shapes": {"amax_*": [8, 32], "others": [64, 256]},
        "configs": [{"name": n, "scaling_granularity": g.upper(), "float8_dtype": "float8_e4m3fn" if f == "e4m3"
                     else "float8_e5m2", "round_scales_to_power_of_2": p, "axiswise_dim": d,
                     "tensors": "tensorwise only for amax_*" if g == "tensorwise" else "all but amax_*"}
                    for n, g, f, p, d in CONFIGS],
        "arrays": {"{tensor}__x": "input bits (float32: uint32, bfloat16: uint16)",
                   "{tensor}__{config}__codes": "FP8 codes (uint8), the input's shape",
                   "{tensor}__{config}__scale": "float32 bits of the scale (x * scale is cast; dequantize divides): "
                                                "tensorwise (), rowwise dim -1 (M, 1), dim 0 (1, K)"},
        "semantics": "README.md",
        "sha256": digest, "generator": "scripts/peers/torchao_float8.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tensors)} tensors, {len(arrays)} arrays, {digest[:12]} -> {out}")
    return check(out)


if __name__ == "__main__":
    raise SystemExit(main())
