"""Peer vectors from deepseek-ai/DeepSeek-V3's act_quant Triton kernel, run on CPU (recipes.md §12.2).

    python -m venv /tmp/tritonenv && /tmp/tritonenv/bin/pip install triton numpy
    PYTHONPATH=/tmp/tritonenv/lib/python3.11/site-packages python scripts/peers/deepseek_v3.py \
        --src /path/to/DeepSeek-V3 --out tests/peers/deepseek_v3

``--src`` is a git checkout of github.com/deepseek-ai/DeepSeek-V3 (the script records its commit and refuses a
dirty tree); the Python running it needs torch (CPU) and triton. ``TRITON_INTERPRET=1`` makes Triton run the
kernel's own source on CPU through its numpy interpreter: ``inference/kernel.py::act_quant`` (1 x 128 tiles
along the last axis, amax floored at 1e-4, s = amax / 448, ``scale_fmt="ue8m0"``: s = exp2(ceil(log2(s))),
y = x / s cast to float8_e4m3fn) is called unchanged for both scale formats, and ``act_quant_kernel`` is called
a second time with a float32 output buffer, where its ``y.to(y_ptr.dtype.element_ty)`` keeps the float32
quotient x / s: the value the GPU's cvt.rn.satfinite.e4m3 rounds. Stored per input dtype (float32, bfloat16)
and scale format: the input bits, the scales' bits, the quotients' bits, the interpreter's E4M3 codes and torch's
round-to-nearest-even E4M3 cast of the quotients (the GPU conversion's rounding). Nothing of DeepSeek-V3 is
copied: only what its kernel produced.

Inputs (numpy, seeded), one tile of 128 per case: gaussian tiles at magnitudes 2^-40..2^40; tiles whose
quotients land on E4M3 midpoints (amax = 448 2^k, the other elements midpoints of the E4M3 grid times 2^k, and
+-1 ulp of them in the input dtype); amaxes 448 2^k +-1..3 ulp (the ceil(log2) step of UE8M0 scales); amaxes at
1e-4 +-2 ulp (the floor); all-zero tiles of both signs; tiny tiles (1e-6, float32 subnormals); huge tiles (up to
the input dtype's maximum); E4M3 subnormal quotients (tiny elements beside a large amax).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

os.environ["TRITON_INTERPRET"] = "1"
T = 128  # the tile
COLS = 512  # 4 tiles per row


def e4m3_grid() -> np.ndarray:
    """Non-negative finite E4M3FN values, ascending (float64)."""
    vals = [i * 2.0**-9 for i in range(8)]
    for e in range(-6, 9):
        vals += [(1 + i / 8) * 2.0**e for i in range(8)]
    v = np.array(sorted(set(vals)))
    return v[v <= 448]


def ulp_step(v: np.ndarray, k: int, dtype: str) -> np.ndarray:
    """v moved k ulps of ``dtype`` (float32 / bfloat16) away from zero (k < 0: toward zero), as float32."""
    f = np.asarray(v, np.float32)
    if dtype == "float32":
        b = f.view(np.uint32).astype(np.int64) + k
        return b.astype(np.uint32).view(np.float32)
    b = (f.view(np.uint32) >> 16).astype(np.int64) + k
    return (b.astype(np.uint32) << 16).view(np.float32)


def to_dtype(v: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to dtype (nearest even), returned as float32 carriers."""
    import torch

    t = torch.from_numpy(np.asarray(v, np.float64)).to(getattr(torch, dtype))
    return t.to(torch.float32).numpy()


def build_inputs(dtype: str, seed: int) -> np.ndarray:
    """(rows, COLS) float32 carriers of values representable in dtype, one case per tile."""
    rng = np.random.default_rng(seed)
    grid = e4m3_grid()
    mids = (grid[1:] + grid[:-1]) / 2
    tiles: list[np.ndarray] = []
    for e in range(-40, 41):  # gaussian tiles over 80 binades
        tiles.append(to_dtype(rng.standard_normal(T) * 2.0**e, dtype))
    for k in (-20, -7, 0, 3, 11):  # E4M3 midpoints of x / s (s = 2^k exactly), and +-1 ulp of them
        for step in (0, 1, -1):
            m = rng.choice(mids, T - 1) * 2.0**k * rng.choice([-1.0, 1.0], T - 1)
            m = to_dtype(m, dtype)
            if step:
                m = ulp_step(np.abs(m), step, dtype) * np.sign(m)
            tiles.append(np.concatenate([[np.float32(448 * 2.0**k)], m]).astype(np.float32))
    for k in (-12, -5, 0, 2, 9, 30):  # amax next to 448 2^k: the ceil(log2) step
        for step in (-3, -2, -1, 1, 2, 3):
            amax = ulp_step(np.float32(448 * 2.0**k), step, dtype)
            body = to_dtype(rng.uniform(-1, 1, T - 1) * float(amax), dtype)
            tiles.append(np.concatenate([[amax], body]).astype(np.float32))
    floor = np.float32(1e-4)
    for step in (-2, -1, 0, 1, 2):  # the 1e-4 floor
        amax = ulp_step(to_dtype(np.float64(floor), dtype), step, dtype)
        tiles.append(np.concatenate([[-amax], to_dtype(rng.uniform(-1, 1, T - 1) * float(amax), dtype)]))
    tiles.append(np.zeros(T, np.float32))
    tiles.append(np.full(T, -0.0, np.float32))
    tiles.append(to_dtype(rng.standard_normal(T) * 1e-6, dtype))  # tiny: the floor decides the scale
    if dtype == "float32":
        tiles.append(rng.integers(-2**20, 2**20, T).astype(np.float32) * np.float32(2.0**-149))  # subnormals
    big = 3.0e38
    tiles.append(to_dtype(rng.uniform(-1, 1, T) * big, dtype))  # huge
    tiles.append(np.concatenate([[to_dtype(np.float64(big), dtype)[()]],
                                 to_dtype(rng.standard_normal(T - 1) * 1e30, dtype)]).astype(np.float32))
    # E4M3 subnormal quotients: elements 2^-7..2^-16 of the amax
    sub = rng.choice([-1.0, 1.0], T - 1) * 448 * 2.0 ** rng.uniform(-16, -7, T - 1)
    tiles.append(np.concatenate([[448.0], to_dtype(sub, dtype)]).astype(np.float32))
    x = np.concatenate([np.asarray(t, np.float32).reshape(T) for t in tiles])
    pad = (-x.size) % COLS
    if pad:
        x = np.concatenate([x, to_dtype(rng.standard_normal(pad), dtype)])
    return x.reshape(-1, COLS)


def git_commit(src: Path) -> str:
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain"], capture_output=True, text=True,
                           check=True).stdout.strip()
    if dirty:
        raise SystemExit(f"{src} has local changes; check out a clean commit")
    return subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, required=True, help="a git checkout of deepseek-ai/DeepSeek-V3")
    ap.add_argument("--out", type=Path, default=Path("tests/peers/deepseek_v3"))
    args = ap.parse_args()
    commit = git_commit(args.src)
    sys.path.insert(0, str(args.src / "inference"))
    import torch
    import triton
    from kernel import act_quant, act_quant_kernel  # the repository's own module

    args.out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    counts: dict[str, int] = {}

    def save(name: str, arr: np.ndarray) -> None:
        np.save(args.out / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
        files[f"{name}.npy"] = hashlib.sha256((args.out / f"{name}.npy").read_bytes()).hexdigest()

    for i, dtype in enumerate(("float32", "bfloat16")):
        x32 = build_inputs(dtype, seed=20 + i)
        xt = torch.from_numpy(x32).to(getattr(torch, dtype)).contiguous()
        assert np.array_equal(xt.to(torch.float32).numpy().view(np.uint32), x32.view(np.uint32))
        save(f"{dtype}__x", xt.view(torch.int32 if dtype == "float32" else torch.int16).numpy())
        for fmt in ("none", "ue8m0"):
            sf = None if fmt == "none" else fmt
            y, s = act_quant(xt, T, sf)  # the kernel unchanged: E4M3 output
            q = torch.empty_like(xt, dtype=torch.float32)  # the same kernel, float32 output: the quotient
            s2 = xt.new_empty(*xt.size()[:-1], xt.size(-1) // T, dtype=torch.float32)
            act_quant_kernel[(triton.cdiv(xt.numel(), T),)](xt, q, s2, BLOCK_SIZE=T, scale_fmt=sf)
            assert torch.equal(s.view(torch.int32), s2.view(torch.int32))
            rne = q.to(torch.float8_e4m3fn)  # round to nearest even (no quotient reaches 464)
            save(f"{dtype}__{fmt}__scale", s.view(torch.int32).numpy())
            save(f"{dtype}__{fmt}__quotient", q.view(torch.int32).numpy())
            save(f"{dtype}__{fmt}__codes_interpreter", y.view(torch.uint8).numpy())
            save(f"{dtype}__{fmt}__codes_rne", rne.view(torch.uint8).numpy())
            counts[f"{dtype}__{fmt}"] = int(xt.numel())
    manifest = {
        "source": "github.com/deepseek-ai/DeepSeek-V3 inference/kernel.py (act_quant, act_quant_kernel)",
        "commit": commit, "triton": triton.__version__, "torch": torch.__version__, "numpy": np.__version__,
        "interpreter": "TRITON_INTERPRET=1 (Triton's numpy interpreter, CPU)", "tile": T, "elements": counts,
        "files": files,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
