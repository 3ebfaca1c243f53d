"""Peer vectors from microsoft/microxcaling: its own MX quantizer run on CPU, outputs committed (block.md §11).

    python scripts/peers/microxcaling.py --src /path/to/microxcaling --out tests/peers/microxcaling
    python scripts/peers/microxcaling.py --src ... --out /tmp/mxx_sweep --full     # the larger local sweep

``--src`` is a git checkout of github.com/microsoft/microxcaling (the script records its commit and refuses a
dirty tree). The script imports ``mx.mx_ops.quantize_mx_op`` (the public entry: ``mx_specs`` carries
``mx_flush_fp32_subnorms``) with torch on CPU, ``custom_cuda=False`` (microxcaling's PyTorch path), and runs
every MX element format x round (nearest, floor, even) x flush (off, on) x input dtype (float32, bfloat16,
float16) on blocks of 32 along the last axis, plus the first axis and a padded length on a smaller input. Inputs
and outputs are stored as unsigned bit patterns (uint32 / uint16) in one compressed .npz; ``manifest.json``
records the commit, torch version, options, shapes and the npz's sha256. Nothing of microxcaling is copied: only
the outputs its code produced.

Inputs (per block of 32; numpy, seeded): gaussian and Student-t blocks at block exponents -150..127, element
ties and +-1 ulp (in the input dtype) of every element format's grid at block scales over the whole E8M0 range,
block maxima next to powers of two (the float log2 steps), tiny (subnormal) and huge blocks, zero blocks of
both signs, NaN and +-Inf blocks, and small values that round to zero (the sign of zero).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

FORMATS = ("fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "int8")
ROUNDS = ("nearest", "floor", "even")
DTYPES = ("float32", "bfloat16", "float16")
MANTISSA_BITS = {"float32": 23, "bfloat16": 7, "float16": 10}
K = 32
# (max element value, emax = floor(log2 max), mantissa bits, smallest normal exponent) of each element format
GRID = {"fp8_e4m3": (448.0, 8, 3, -6), "fp8_e5m2": (57344.0, 15, 2, -14), "fp6_e3m2": (28.0, 4, 2, -2),
        "fp6_e2m3": (7.5, 2, 3, 0), "fp4_e2m1": (6.0, 2, 1, 0), "int8": (127 / 64, 0, 6, 0)}


def grid_values(fmt: str) -> np.ndarray:
    """Every non-negative element value of ``fmt`` (float64, ascending)."""
    top, emax, m, emin = GRID[fmt]
    if fmt == "int8":
        return np.arange(128) / 64.0
    vals = [i * 2.0 ** (emin - m) for i in range(1 << m)]  # subnormals and 0
    for e in range(emin, emax + 1):
        vals += [(1 + i / (1 << m)) * 2.0**e for i in range(1 << m)]
    v = np.array(sorted(set(vals)))
    return v[v <= top]


def to_dtype_bits(v64: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded (nearest even) to dtype, as unsigned bit patterns (uint32 / uint16)."""
    import torch

    with np.errstate(over="ignore"):
        f32 = v64.astype(np.float32)  # exact for every value built below (<= 24 bits) or the intended rounding
    if dtype == "float32":
        return f32.view(np.uint32)
    t = torch.from_numpy(np.ascontiguousarray(f32)).to(TORCH_DTYPES[dtype])
    return t.view(torch.int16).numpy().view(np.uint16)


def nudge(bits: np.ndarray, step: np.ndarray, mbits: int) -> np.ndarray:
    """bits +- step ulps of the same sign (step in {-1, 0, 1}; magnitude direction), staying finite."""
    mag_mask = np.array(0x7FFFFFFF if bits.dtype == np.uint32 else 0x7FFF, dtype=bits.dtype)
    mag = (bits & mag_mask).astype(np.int64) + step
    mag = np.clip(mag, 0, int(mag_mask) - (1 << mbits) - 1)
    return ((bits & ~mag_mask) | mag.astype(bits.dtype)).astype(bits.dtype)


def design(dtype: str, seed: int, full: bool) -> tuple[np.ndarray, list[str]]:
    """(n_blocks, 32) input bit patterns of ``dtype`` and one kind name per block."""
    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    kinds: list[str] = []

    def add(v64: np.ndarray, kind: str, step: np.ndarray | None = None) -> None:
        b = to_dtype_bits(np.asarray(v64, dtype=np.float64).reshape(-1, K), dtype)
        if step is not None:
            b = nudge(b, step.reshape(b.shape), MANTISSA_BITS[dtype])
        blocks.append(b)
        kinds.extend([kind] * b.shape[0])

    n_rand = 96 if full else 40
    with np.errstate(over="ignore"):
        k = rng.integers(-150, 128, size=(n_rand, 1))
        add(rng.standard_normal((n_rand, K)) * 2.0**k, "gaussian")
        k = rng.integers(-40, 40, size=(n_rand, 1))
        add(rng.standard_t(1.5, (n_rand, K)) * 2.0**k, "student_t")
        add(rng.standard_cauchy((n_rand, K)) * 0.01, "cauchy")
    # element ties +-1 ulp at block scales over the E8M0 range, one format's grid per block
    scales = np.arange(-127, 128) if full else np.r_[-127:-122, -100, -64, -20:21:5, 64, 100, 110:128]
    for fmt in FORMATS:
        top, emax, _, _ = GRID[fmt]
        g = grid_values(fmt)
        mids = (g[1:] + g[:-1]) / 2
        cand = np.r_[mids, g[1:]]
        for s in scales:
            if s + emax + 1 > 128:
                continue
            for anchor in (top, 2.0 ** (emax + 1) * (1 - 2.0**-30)):  # the max, or just below a power of two
                vals = rng.choice(cand, size=(1, K)) * rng.choice([-1.0, 1.0], size=(1, K))
                vals[0, 0] = anchor * (1 if rng.random() < 0.5 else -1)
                step = rng.integers(-1, 2, size=(1, K))
                step[0, 0] = 0
                with np.errstate(over="ignore"):
                    add(vals * 2.0**s, f"ties_{fmt}", step)
    # block maxima next to powers of two: the float log2 of the scale step
    n_p2 = 64 if full else 24
    e = rng.integers(-149, 128, size=(n_p2, 1))
    body = rng.uniform(-1, 1, size=(n_p2, K)) * 2.0 ** (e - 1)
    body[:, 0] = 2.0 ** e[:, 0]
    step = np.zeros((n_p2, K), dtype=np.int64)
    step[:, 0] = rng.choice([-3, -2, -1, 0, 1], size=n_p2)
    with np.errstate(over="ignore"):
        add(np.where(np.isfinite(body), body, 2.0**127), "amax_pow2", step)
    # tiny blocks (float32 subnormals, bfloat16 subnormals) and huge ones
    add(rng.uniform(-1, 1, size=(8, K)) * 2.0 ** rng.integers(-149, -125, size=(8, 1)), "tiny")
    huge = rng.uniform(0.5, 1, size=(8, K)) * np.float64(np.finfo(np.float32).max)
    huge *= rng.choice([-1.0, 1.0], size=(8, K))
    add(huge, "huge")
    add(np.full((1, K), 2.0**127 * 1.9), "huge_near_max")
    # zero blocks and near-zero values (the sign of zero)
    z = np.zeros((4, K))
    z[1] = -0.0
    z[2, ::2] = -0.0
    z[3, 5] = 1.0
    add(z, "zero")
    small = rng.uniform(-0.02, 0.02, size=(8, K))
    small[:, 0] = rng.choice([1.0, -4.0, 100.0, -0.5], size=8)
    add(small, "near_zero")
    # non-finite blocks
    nf = rng.standard_normal((6, K))
    nf[0, 3] = np.nan
    nf[1, 7] = np.inf
    nf[2, 0] = -np.inf
    nf[3, 1], nf[3, 2] = np.inf, np.nan
    nf[4, :] = np.inf
    nf[5, 9] = -np.nan
    add(nf, "nonfinite")
    out = np.concatenate(blocks, axis=0)
    if out.shape[0] % 2:  # rows of 64: an even number of blocks
        out = np.concatenate([out, to_dtype_bits(rng.standard_normal((1, K)), dtype)], axis=0)
        kinds.append("gaussian")
    return out, kinds


def _torch_dtypes() -> dict[str, object]:
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16}


class _Lazy(dict):
    def __missing__(self, key: str) -> object:
        self.update(_torch_dtypes())
        return dict.__getitem__(self, key)


TORCH_DTYPES = _Lazy()


def run_mx(bits: np.ndarray, dtype: str, fmt: str, rnd: str, flush: bool, axis: int) -> np.ndarray:
    """microxcaling's quantize_mx_op on the bit patterns ``bits`` (viewed as ``dtype``) along ``axis``."""
    import torch
    from mx.mx_ops import quantize_mx_op
    from mx.specs import MxSpecs

    specs = MxSpecs()
    specs["mx_flush_fp32_subnorms"] = flush
    specs["custom_cuda"] = False
    specs["block_size"] = K
    if dtype == "float32":
        t = torch.from_numpy(np.ascontiguousarray(bits).view(np.float32))
    else:
        t = torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(TORCH_DTYPES[dtype])
    y = quantize_mx_op(t.clone(), specs, elem_format=fmt, block_size=K, axes=[axis], round=rnd)
    if dtype == "float32":
        return y.numpy().view(np.uint32)
    return y.view(torch.int16).numpy().view(np.uint16)


def clean_commit(src: Path) -> str:
    """The commit of the microxcaling checkout ``src``; a SystemExit when its tracked files were changed."""
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if dirty:
        raise SystemExit(f"{src} has local changes; run the recorded code unmodified")
    return commit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of microsoft/microxcaling")
    ap.add_argument("--out", required=True, help="output directory (vectors.npz + manifest.json)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--full", action="store_true", help="the larger sweep (every block scale; not committed)")
    ap.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=("float32", "bfloat16", "float16"))
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    commit = clean_commit(src)
    sys.path.insert(0, str(src))
    import torch

    arrays: dict[str, np.ndarray] = {}
    configs = []
    for i, dtype in enumerate(a.dtypes):
        x, kinds = design(dtype, a.seed + i, a.full)
        x1 = x.reshape(-1, 2 * K)  # blocks along the last axis
        rng = np.random.default_rng(a.seed + 7)
        sub = x[rng.permutation(x.shape[0])[: 2 * K]]  # a smaller input: blocks along axis 0, a padded length
        x0 = np.ascontiguousarray(sub.reshape(-1, 2 * K).T)  # (64, n): the blocks of sub run down the columns
        xp = np.ascontiguousarray(sub.reshape(-1, 2 * K)[:, : 2 * K - 24])  # length 40 = 32 + 8 (padded)
        arrays[f"{dtype}__x"], arrays[f"{dtype}__x_axis0"], arrays[f"{dtype}__x_pad"] = x1, x0, xp
        arrays[f"{dtype}__kinds"] = np.array([hash_kind(k) for k in kinds], dtype=np.uint8)
        for fmt in FORMATS:
            for rnd in ROUNDS:
                for flush in (False, True):
                    tag = f"{fmt}__{rnd}__{int(flush)}"
                    arrays[f"{dtype}__{tag}__y"] = run_mx(x1, dtype, fmt, rnd, flush, -1)
                    arrays[f"{dtype}__{tag}__y_axis0"] = run_mx(x0, dtype, fmt, rnd, flush, 0)
                    arrays[f"{dtype}__{tag}__y_pad"] = run_mx(xp, dtype, fmt, rnd, flush, -1)
                    configs.append({"dtype": dtype, "elem_format": fmt, "round": rnd,
                                    "mx_flush_fp32_subnorms": flush})
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "microsoft/microxcaling", "repository": "https://github.com/microsoft/microxcaling",
        "commit": commit, "entry": "mx.mx_ops.quantize_mx_op(A, MxSpecs(), elem_format, block_size=32, "
                                   "axes=[axis], round) with custom_cuda=False (PyTorch on CPU)",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0],
        "seed": a.seed, "full": a.full, "block_size": K, "formats": list(FORMATS), "rounds": list(ROUNDS),
        "dtypes": list(a.dtypes), "kinds": KIND_NAMES,
        "arrays": {"{dtype}__x": "input bits (rows of 64: two blocks per row, blocks along axis -1)",
                   "{dtype}__x_axis0": "input bits (64, n): blocks along axis 0",
                   "{dtype}__x_pad": "input bits (n, 40): blocks along axis -1, the last one padded",
                   "{dtype}__kinds": "the kind of each block of {dtype}__x (index into kinds)",
                   "{dtype}__{fmt}__{round}__{flush}__y[_axis0|_pad]": "output bits of quantize_mx_op"},
        "configs": len(configs), "sha256": digest,
        "generator": "scripts/peers/microxcaling.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    n = sum(v.size for k, v in arrays.items() if "__y" in k)
    print(f"{len(configs)} configurations, {n} output elements, {digest[:12]} -> {out}")
    return 0


KIND_NAMES = ["gaussian", "student_t", "cauchy", *(f"ties_{f}" for f in FORMATS), "amax_pow2", "tiny", "huge",
              "huge_near_max", "zero", "near_zero", "nonfinite"]


def hash_kind(kind: str) -> int:
    return KIND_NAMES.index(kind)


if __name__ == "__main__":
    raise SystemExit(main())
