"""Peer vectors from the real ml_dtypes: run under the ml_dtypes release to record, writes
tests/peers/ml_dtypes_<major.minor>/vectors.npz + manifest.json (profiles.md §5).

Usage (in a venv holding that release and numpy, no qref needed):
    python -m venv /tmp/mld06 && /tmp/mld06/bin/pip install ml_dtypes==0.6.0 numpy==2.4.6
    /tmp/mld06/bin/python scripts/peers/ml_dtypes_vectors.py tests/peers

Inputs are made here without a random generator (splitmix64 in uint64 arithmetic), so they are identical on
every numpy; the arrays hold inputs and ml_dtypes' output codes as unsigned integers.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

FLOATS = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
          "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", "float16"]
INTS = ["int2", "uint2", "int4", "uint4", "int8", "uint8", "int16", "uint16", "int32"]


def splitmix64(n: int, seed: int) -> np.ndarray:
    """n pseudo-random uint64 (splitmix64 of seed + i), bit-identical on every numpy."""
    with np.errstate(over="ignore"):
        z = (np.arange(n, dtype=np.uint64) + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def dtype_of(name: str) -> np.dtype:
    return np.dtype(np.float16) if name == "float16" else np.dtype(getattr(ml_dtypes, name, None) or name)


def codes(x: np.ndarray, name: str) -> np.ndarray:
    dt = dtype_of(name)
    with np.errstate(all="ignore"):
        y = x.astype(dt)
    return y.view(f"u{dt.itemsize}")


def ties(name: str, src: type) -> np.ndarray:
    """Midpoints between adjacent values of ``name`` and the values themselves (every one for 8-bit formats),
    +-0..3 ulp of ``src``."""
    dt = dtype_of(name)
    n = 1 << (8 * dt.itemsize if name not in ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn") else
              (6 if name.startswith("float6") else 4))
    with np.errstate(invalid="ignore"):
        vals = np.arange(n, dtype=f"u{dt.itemsize}").view(dt).astype(np.float64)
    vals = np.unique(vals[np.isfinite(vals)])
    mids = (vals[:-1] + vals[1:]) / 2
    if dt.itemsize == 2:  # 16-bit formats: every 16th value and midpoint, and the largest (keeps the vectors small)
        vals = np.concatenate([vals[::16], vals[-2:]])
        mids = np.concatenate([mids[::16], mids[-2:]])
    base = np.concatenate([vals, mids, [np.inf, -np.inf, np.nan]]).astype(src)
    out = [base]
    for _ in range(3):
        out.append(np.nextafter(out[-1], src(np.inf)))
    down = [base]
    for _ in range(3):
        down.append(np.nextafter(down[-1], src(-np.inf)))
    return np.concatenate(out + down[1:])


def main(out_dir: str) -> None:
    ver = importlib.metadata.version("ml_dtypes")
    tag = ".".join(ver.split(".")[:2])
    arrays: dict[str, np.ndarray] = {}
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    b16 = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    r32 = splitmix64(1 << 16, 1).astype(np.uint32).view(np.float32)
    r64 = splitmix64(1 << 16, 2).view(np.float64)
    scaled = ((splitmix64(1 << 16, 3) >> np.uint64(11)).astype(np.float64) / 2.0**53 - 0.5) * \
        np.exp2((splitmix64(1 << 16, 4) % np.uint64(80)).astype(np.float64) - 40)
    edges = np.array([2.0**31, -(2.0**31), 2.0**31 - 128, -(2.0**31) + 128, 3e9, -3e9, 1e10, np.inf, -np.inf,
                      np.nan, -0.0, 0.5, -0.5, 255.5, -129.9])
    near = np.array([2.0**31 - 1, 2.0**31, -(2.0**31), -(2.0**31) - 1]).view(np.uint64)
    edges = np.concatenate([edges, (near[:, None] + np.arange(-64, 65).astype(np.uint64)).view(np.float64).ravel()])
    ints64 = np.concatenate([scaled * 1e6, edges])
    arrays["in/random_float32"] = r32.view(np.uint32)
    arrays["in/random_float64"] = r64.view(np.uint64)
    arrays["in/int_float64"] = ints64.view(np.uint64)
    for name in FLOATS:
        for sname, x in (("float16", f16), ("bfloat16", b16)):
            if name != sname:
                arrays[f"{name}/all_{sname}"] = codes(x, name)
        arrays[f"{name}/random_float32"] = codes(r32, name)
        arrays[f"{name}/random_float64"] = codes(r64, name)
        for sname, src in (("float32", np.float32), ("float64", np.float64)):
            t = ties(name, src)
            arrays[f"in/{name}/ties_{sname}"] = t.view(f"u{t.dtype.itemsize}")
            arrays[f"{name}/ties_{sname}"] = codes(t, name)
    for name in INTS:
        for sname, x in (("float16", f16), ("bfloat16", b16)):
            arrays[f"{name}/all_{sname}"] = codes(x, name)
        arrays[f"{name}/int_float32"] = codes(ints64.astype(np.float32), name)
        arrays[f"{name}/int_float64"] = codes(ints64, name)
    d = Path(out_dir) / f"ml_dtypes_{tag}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "vectors.npz"
    np.savez_compressed(path, **arrays)
    manifest = {
        "system": "ml_dtypes", "version": ver, "numpy": np.__version__, "script": "scripts/peers/ml_dtypes_vectors.py",
        "profile": f"ml_dtypes@{tag}", "arrays": len(arrays),
        "elements": int(sum(a.size for k, a in arrays.items() if not k.startswith("in/"))),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    (d / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes, {manifest['elements']} codes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/peers")
