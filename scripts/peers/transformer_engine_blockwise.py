"""Peer vectors of TransformerEngine's blockwise FP8 quantizer reference (1 x 128 and 128 x 128 tiles), on CPU.

    python scripts/peers/transformer_engine_blockwise.py --src /path/to/TransformerEngine \\
        --out tests/peers/transformer_engine_blockwise

``--src`` is a clean git checkout of github.com/NVIDIA/TransformerEngine (its commit is recorded).
``tests/pytorch/references/blockwise_quantizer_reference.py`` (``BlockwiseQuantizerReference``) and the
``references/quantize_scale_calc.py`` it imports (``scale_from_amax_tensor``) are imported unmodified from the
checkout's ``tests/pytorch`` directory; they need torch only. Each tensor is quantized with
``BlockwiseQuantizerReference().quantize(x, quant_dtype, return_transpose, eps, pow_2_scales, quant_tile_shape,
munge_scale_shapes=False)`` (scales in their plain (row blocks, column blocks) layout, not cuBLAS's).

Inputs (seeded numpy, float32 and bfloat16 bit patterns): tensors of 256 x 256 whose four 128 x 128 tiles are of
different kinds (normal, log-uniform, E4M3 ties under an exact scale, block maxima next to 448 * 2^k; tiny, huge,
zeros of both signs, all-subnormal; E5M2 ties, one-hot rows, Student-t, an outlier), the first set also +-1 ulp;
a 136 x 200 tensor (partial tiles: zero padding); NaN and Inf in separate 128 x 256 tensors.
Outputs: FP8 codes (uint8) and the float32 scale_inv bits (uint32). The README.md next to the vectors states the
reference's semantics as read from its code. Nothing of TE is copied: only the outputs its code produced.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

TILE_KINDS = {"tiles_a": ("normal", "log_uniform", "e4m3_ties", "boundaries"),
              "tiles_b": ("tiny", "huge", "zeros", "subnormal"),
              "tiles_c": ("e5m2_ties", "one_hot", "student_t", "outlier")}
# (name, tile shape, fp8 dtype, pow_2_scales, eps, return_transpose, tensors it runs on: all, or a tag part)
CONFIGS = (
    ("t1x128_e4m3", (1, 128), "e4m3", False, 0.0, False, ""),
    ("t1x128_e4m3_pow2", (1, 128), "e4m3", True, 0.0, False, ""),
    ("t128x128_e4m3", (128, 128), "e4m3", False, 0.0, False, ""),
    ("t128x128_e4m3_pow2", (128, 128), "e4m3", True, 0.0, False, ""),
    ("t1x128_e5m2_pow2", (1, 128), "e5m2", True, 0.0, False, ""),
    ("t1x128_e4m3_transpose", (1, 128), "e4m3", False, 0.0, True, "padded"),
    ("t128x128_e4m3_pow2_eps", (128, 128), "e4m3", True, 2.0**-100, False, "tiles_b"),
    ("t1x128_e4m3_eps", (1, 128), "e4m3", False, 2.0**-100, False, "tiles_b"),
)


def _grid(name: str) -> np.ndarray:
    import ml_dtypes

    dt = ml_dtypes.float8_e4m3fn if name == "e4m3" else ml_dtypes.float8_e5m2
    g = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)))
    return g[np.isfinite(g)]


def tile(rng: np.random.Generator, kind: str, shape: tuple[int, int] = (128, 128)) -> np.ndarray:
    """One 128 x 128 tile of a kind, float64."""
    r, c = shape
    if kind == "normal":
        return rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20)
    if kind == "student_t":
        return rng.standard_t(1.5, shape)
    if kind == "log_uniform":
        return rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-60, 60, shape)
    if kind in ("e4m3_ties", "e5m2_ties"):  # grid points and midpoints; every row's max is the format's max
        g = _grid(kind[:4])
        mids = np.r_[g, (g[1:] + g[:-1]) / 2]
        v = rng.choice(mids, shape) * rng.choice([-1.0, 1.0], shape)
        v[:, 0] = g[-1] * rng.choice([-1.0, 1.0], r)
        return v * 2.0 ** rng.integers(-60, 60)
    if kind == "boundaries":  # block maxima 448 * 2^k * (1 + d), d in {-2^-23, 0, 2^-23, -2^-8, 2^-7}
        v = rng.uniform(-1, 1, shape)
        d = rng.choice([-(2.0**-23), 0.0, 2.0**-23, -(2.0**-8), 2.0**-7], r)
        v[:, 5] = 448.0 * 2.0 ** rng.integers(-40, 40, r) * (1 + d)
        return v * (1 + 0 * d[:, None])
    if kind == "tiny":
        return rng.uniform(-1, 1, shape) * 2.0 ** rng.integers(-149, -110, size=(r, 1))
    if kind == "huge":
        return rng.uniform(-1, 1, shape) * 3.0e38
    if kind == "zeros":
        v = np.zeros(shape)
        v[r // 2:] = -0.0
        v[:8] = rng.standard_normal((8, c)) * 1e-3
        return v
    if kind == "one_hot":
        v = np.zeros(shape)
        v[np.arange(r), rng.integers(0, c, r)] = rng.standard_normal(r) * 2.0 ** rng.integers(-30, 30, r)
        return v
    if kind == "subnormal":  # every |x| < 2^-126: 448 / amax overflows float32
        return rng.uniform(-1, 1, shape) * 2.0**-127
    if kind == "outlier":
        v = rng.standard_normal(shape)
        v[rng.integers(0, r), rng.integers(0, c)] = 1e4
        return v
    raise ValueError(kind)


def tensor(rng: np.random.Generator, kinds: tuple[str, ...]) -> np.ndarray:
    """256 x 256: the four kinds' tiles, row-major."""
    tiles = [tile(rng, k) for k in kinds]
    return np.block([tiles[:2], tiles[2:]])


def to_bits(v: np.ndarray, dtype: str, rng: np.random.Generator, nudge: bool) -> np.ndarray:
    """float64 -> dtype bit patterns (RNE), optionally +-1 ulp at random."""
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


def design_tensors(rng: np.random.Generator, whole: tuple[str, ...] = ()) -> list[tuple[str, np.ndarray, str]]:
    """(tag, input bits, dtype) of every input tensor, float32 then bfloat16: the mixed-tile tensors (tiles_a
    twice, the second +-1 ulp), one 256 x 256 tensor of each kind in ``whole`` (tag tiles_b_<kind>), a padded
    136 x 200 tensor, and NaN / Inf tensors."""
    tensors = []
    for dtype in ("float32", "bfloat16"):
        tensors.append((f"{dtype}__tiles_a__0", to_bits(tensor(rng, TILE_KINDS["tiles_a"]), dtype, rng, False), dtype))
        tensors.append((f"{dtype}__tiles_a__1", to_bits(tensor(rng, TILE_KINDS["tiles_a"]), dtype, rng, True), dtype))
        tensors.append((f"{dtype}__tiles_b__0", to_bits(tensor(rng, TILE_KINDS["tiles_b"]), dtype, rng, False), dtype))
        tensors.append((f"{dtype}__tiles_c__0", to_bits(tensor(rng, TILE_KINDS["tiles_c"]), dtype, rng, False), dtype))
        for kind in whole:
            tensors.append((f"{dtype}__tiles_b_{kind}__0", to_bits(tile(rng, kind), dtype, rng, False), dtype))
        v = rng.standard_normal((136, 200)) * 2.0 ** rng.integers(-10, 10, size=(136, 1))
        tensors.append((f"{dtype}__padded__0", to_bits(v, dtype, rng, False), dtype))
        for special in ("nan", "inf"):
            v = np.hstack([tile(rng, "normal"), tile(rng, "normal")])
            v[3, 5] = np.nan if special == "nan" else np.inf
            v[100, 200] = -np.inf if special == "inf" else 1.0
            tensors.append((f"{dtype}__{special}__0", to_bits(v, dtype, rng, False), dtype))
    return tensors


def torch_of(bits: np.ndarray, dtype: str) -> Any:
    import torch

    if dtype == "float32":
        return torch.from_numpy(bits.view(np.float32).copy())
    return torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)


def semantics_model(x: np.ndarray, dtype: str, tile_shape: tuple[int, int], fp8: str, pow2: bool, eps: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """README.md's steps 1-9 in numpy (codes uint8, scale_inv float32) for one tensor (float64 values of x)."""
    import ml_dtypes

    fdt, fmax = (ml_dtypes.float8_e4m3fn, 448.0) if fp8 == "e4m3" else (ml_dtypes.float8_e5m2, 57344.0)
    xmax = float(np.finfo(np.float32).max) if dtype == "float32" else float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    m, k = x.shape
    tm, tk = tile_shape
    mp, kp = -(-m // tm) * tm, -(-k // tk) * tk
    xp = np.zeros((mp, kp))
    xp[:m, :k] = x
    with np.errstate(all="ignore"):
        amax = np.abs(xp).reshape(mp // tm, tm, kp // tk, tk).max(axis=(1, 3)).astype(np.float32)
        amax = np.where(np.isnan(amax), amax, np.maximum(amax, np.float32(eps)))
        scale = (np.float64(fmax) / amax.astype(np.float64)).astype(np.float32)
        scale = np.where(scale == np.inf, np.float32(xmax), scale)
        if pow2:
            e = np.where(np.isnan(scale), 0, np.frexp(scale)[1])
            scale = np.where(amax == np.inf, np.float32(0), np.ldexp(np.float32(1), e - 1)).astype(np.float32)
        scale = np.where(amax == 0, np.float32(1), scale).astype(np.float32)
        full = np.repeat(np.repeat(scale, tm, 0), tk, 1)[:m, :k].astype(np.float64)
        prod = np.clip((x * full).astype(np.float32), -fmax, fmax)
        return prod.astype(fdt).view(np.uint8), (np.float32(1) / scale).astype(np.float32)


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
        for c in man["configs"]:
            key = f"{t}__{c['name']}"
            if f"{key}__codes" not in z:
                continue
            fp8 = "e4m3" if c["quant_dtype"] == "float8_e4m3fn" else "e5m2"
            args = (dtype, tuple(c["quant_tile_shape"]), fp8, c["pow_2_scales"], c["eps"])
            for suffix, xx in (("", x), ("_t", x.T)) if c["return_transpose"] else (("", x),):
                codes, sinv = semantics_model(xx, *args)
                want, wsinv = z[f"{key}__codes{suffix}"], z[f"{key}__scale_inv{suffix}"].view(np.float32)
                nan = ((codes & 0x7F) >= (0x7F if fp8 == "e4m3" else 0x7D)) & ((want & 0x7F) >= (0x7F if fp8 ==
                                                                                    "e4m3" else 0x7D))
                ok_s = (sinv.view(np.uint32) == wsinv.view(np.uint32)) | (np.isnan(sinv) & np.isnan(wsinv))
                compared += codes.size
                if not (((codes == want) | nan).all() and ok_s.all()):
                    bad.append(f"{key}{suffix}")
    print(f"semantics model: {compared} codes compared, {len(bad)} arrays differ {bad[:5]}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of NVIDIA/TransformerEngine")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--check-only", action="store_true", help="only hold --out's vectors to the README's model")
    a = ap.parse_args(argv)
    if a.check_only:
        return check(Path(a.out))
    src = Path(a.src).resolve()
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True, check=True).stdout.strip():
        raise SystemExit(f"{src} has local changes; run the recorded code unmodified")
    import torch

    sys.path.insert(0, str(src / "tests" / "pytorch"))
    ref = importlib.import_module("references.blockwise_quantizer_reference")
    quantizer = ref.BlockwiseQuantizerReference()
    qdt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    tensors = design_tensors(np.random.default_rng(a.seed))
    arrays: dict[str, np.ndarray] = {}
    for tag, xbits, dtype in tensors:
        x = torch_of(xbits, dtype)
        arrays[f"{tag}__x"] = xbits
        for name, shape, fp8, pow2, eps, transpose, only in CONFIGS:
            if only not in tag:
                continue
            r = quantizer.quantize(x, qdt[fp8], return_transpose=transpose, eps=eps, pow_2_scales=pow2,
                                   quant_tile_shape=shape, munge_scale_shapes=False)
            arrays[f"{tag}__{name}__codes"] = r.data.view(torch.uint8).numpy().copy()
            arrays[f"{tag}__{name}__scale_inv"] = r.scale.contiguous().view(torch.int32).numpy().view(
                np.uint32).copy()
            if transpose:
                arrays[f"{tag}__{name}__codes_t"] = r.data_t.view(torch.uint8).numpy().copy()
                arrays[f"{tag}__{name}__scale_inv_t"] = r.scale_t.contiguous().view(torch.int32).numpy().view(
                    np.uint32).copy()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "NVIDIA/TransformerEngine (pure-PyTorch blockwise FP8 quantizer reference)",
        "repository": "https://github.com/NVIDIA/TransformerEngine", "commit": commit,
        "entry": "tests/pytorch/references/blockwise_quantizer_reference.py BlockwiseQuantizerReference().quantize("
                 "x, quant_dtype, return_transpose, eps, pow_2_scales, quant_tile_shape, munge_scale_shapes=False)",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "device": "cpu",
        "seed": a.seed, "tensors": [t for t, _, _ in tensors],
        "shapes": {t: list(b.shape) for t, b, _ in tensors},
        "tile_kinds": {**{k: [list(v[:2]), list(v[2:])] for k, v in TILE_KINDS.items()},
                       "nan / inf": "two normal tiles (128 x 256); nan: x[3, 5] = NaN; inf: x[3, 5] = +Inf, "
                                    "x[100, 200] = -Inf",
                       "padded": "136 x 200 normal rows at row scales 2^-10..2^9 (partial tiles in both axes)",
                       "__1": "each element +-1 ulp (or kept) at random"},
        "configs": [{"name": n, "quant_tile_shape": list(s), "quant_dtype": f"float8_{f}fn" if f == "e4m3"
                     else "float8_e5m2", "pow_2_scales": p, "eps": e, "return_transpose": t,
                     "tensors": f"those with {o!r} in the name" if o else "all"}
                    for n, s, f, p, e, t, o in CONFIGS],
        "arrays": {"{tensor}__x": "input bits (float32: uint32, bfloat16: uint16)",
                   "{tensor}__{config}__codes": "FP8 codes (uint8), the input's shape",
                   "{tensor}__{config}__scale_inv": "float32 bits of scale_inv = 1 / scale, (ceil(M / tile_m), "
                                                    "ceil(K / tile_k))",
                   "{tensor}__{config}__codes_t / scale_inv_t": "1 x 128 of x.T (blocks along the first axis of x)"},
        "semantics": "README.md",
        "sha256": digest, "generator": "scripts/peers/transformer_engine_blockwise.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tensors)} tensors, {len(arrays)} arrays, {digest[:12]} -> {out}")
    return check(out)


if __name__ == "__main__":
    raise SystemExit(main())
