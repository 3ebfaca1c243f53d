"""Peer vectors from NVIDIA TransformerEngine's pure-PyTorch reference quantizers, run on CPU (block.md §11).

    python scripts/peers/transformer_engine.py --src /path/to/TransformerEngine --out tests/peers/transformer_engine

``--src`` is a clean git checkout of github.com/NVIDIA/TransformerEngine (its commit is recorded). Two references
are run unmodified with torch on CPU; TE's compiled extension is not needed and not imported:

- NVFP4: ``NVFP4QuantizerRef(dtype=Fp4Formats.E2M1, quant_tile_shape=(1, 16), with_rht=False).quantize(x)`` from
  ``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py`` (rowwise and columnwise: blocks along the
  last and the first axis; the global amax is its own max |x|). The module is loaded from the checkout with two
  stand-ins for what it imports but does not use here: ``transformer_engine.pytorch.quantized_tensor``
  (``Quantizer`` keeps the rowwise / columnwise flags, ``QuantizedTensorStorage`` is a plain base class) and
  ``tensor.utils.is_custom`` (read by the GEMM helpers only); ``reference_utils`` and ``gemm`` are TE's files.
- MXFP8: ``_mxfp8_2d_quantize_reference`` (one E8M0 scale per 32 x 32 tile, E4M3 elements) with its helpers
  ``_float_to_e8m0`` and ``_e8m0_to_scale_inv`` from ``tests/pytorch/test_mxfp8_2d_quantize.py``: the three
  functions and the two constants they read are taken from the file's syntax tree and executed as written (the
  file's module-level imports need TE's CUDA build).

Inputs (seeded numpy, float32 and bfloat16): normal, Student-t, log-uniform blocks, element ties and +-1 ulp of
the E2M1 / E4M3 grids at many scales, block maxima next to scale boundaries, tiny and huge blocks, zeros of both
signs; NaN and Inf inputs in separate tensors (the references propagate a NaN through the tensor amax). Outputs
are the references' own codes (unpacked E2M1 nibbles, E4M3 bytes) and scale bytes. Nothing of TE is copied:
only the outputs its code produced.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def _stub_modules(src: Path) -> Any:
    """Load reference_nvfp4.py from the checkout with stand-ins for the modules it imports but does not use."""
    import torch  # noqa: F401  (the reference imports it)

    def package(name: str, path: list[str]) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__path__ = path
        sys.modules[name] = m
        return m

    package("transformer_engine", [])
    package("transformer_engine.pytorch", [])
    recipes = package("transformer_engine.pytorch.custom_recipes", [])
    qt = types.ModuleType("transformer_engine.pytorch.quantized_tensor")

    class Quantizer:  # the flags the reference reads; TE's base class does more (memory management)
        def __init__(self, rowwise: bool = True, columnwise: bool = True) -> None:
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise

    class QuantizedTensorStorage:
        pass

    qt.Quantizer = Quantizer  # type: ignore[attr-defined]
    qt.QuantizedTensorStorage = QuantizedTensorStorage  # type: ignore[attr-defined]
    sys.modules[qt.__name__] = qt
    package("transformer_engine.pytorch.tensor", [])
    tu = types.ModuleType("transformer_engine.pytorch.tensor.utils")
    tu.is_custom = lambda *_a, **_k: True  # type: ignore[attr-defined]  # read by the GEMM helpers only
    sys.modules[tu.__name__] = tu
    base = src / "transformer_engine" / "pytorch" / "custom_recipes"
    for name in ("reference_utils", "gemm", "reference_nvfp4"):
        full = f"transformer_engine.pytorch.custom_recipes.{name}"
        spec = importlib.util.spec_from_file_location(full, base / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        spec.loader.exec_module(mod)
        setattr(recipes, name, mod)
    return sys.modules["transformer_engine.pytorch.custom_recipes.reference_nvfp4"]


def _mxfp8_reference(src: Path) -> dict[str, Any]:
    """The MXFP8 reference functions of tests/pytorch/test_mxfp8_2d_quantize.py, executed as written."""
    import torch

    path = src / "tests" / "pytorch" / "test_mxfp8_2d_quantize.py"
    tree = ast.parse(path.read_text())
    want_f = {"_float_to_e8m0", "_e8m0_to_scale_inv", "_mxfp8_2d_quantize_reference"}
    want_c = {"MXFP8_BLOCK_SIZE", "FP8_E4M3_MAX"}
    body = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in want_f)
            or (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in want_c for t in n.targets))]
    found = {n.name for n in body if isinstance(n, ast.FunctionDef)}
    if found != want_f:
        raise SystemExit(f"{path}: expected functions {sorted(want_f)}, found {sorted(found)}")
    ns: dict[str, Any] = {"torch": torch}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), ns)
    return ns


def design(rng: np.random.Generator, rows: int, cols: int, kind: str) -> np.ndarray:
    """(rows, cols) float64 inputs of one kind (blocks of 16 along the last axis, tiles of 32 x 32)."""
    shape = (rows, cols)
    if kind == "normal":
        return rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, size=(rows, 1))
    if kind == "student_t":
        return rng.standard_t(1.5, shape)
    if kind == "log_uniform":
        return rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-60, 60, shape)
    if kind == "e2m1_ties":
        mids = np.r_[E2M1, (E2M1[1:] + E2M1[:-1]) / 2]
        v = rng.choice(mids, shape) * rng.choice([-1.0, 1.0], shape)
        v[:, ::16] = 6.0 * rng.choice([-1.0, 1.0], (rows, cols // 16))
        return v * 2.0 ** rng.integers(-30, 30, size=(rows, 1))
    if kind == "e4m3_ties":
        import ml_dtypes

        g = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)))
        g = g[np.isfinite(g)]
        mids = np.r_[g, (g[1:] + g[:-1]) / 2]
        v = rng.choice(mids, shape) * rng.choice([-1.0, 1.0], shape)
        v[::32, ::32] = 448.0
        return v * 2.0 ** rng.integers(-100, 100, size=(1, 1))
    if kind == "boundaries":  # block maxima at 6 * 448 * 2^k and 448 * 2^k, +-1 ulp later
        v = rng.uniform(-1, 1, shape)
        k = rng.integers(-40, 40, size=(rows, cols // 16))
        v[:, ::16] = np.where(rng.random((rows, cols // 16)) < 0.5, 6.0, 448.0) * 2.0**k
        return v
    if kind == "tiny":
        return rng.uniform(-1, 1, shape) * 2.0 ** rng.integers(-149, -110, size=(rows, 1))
    if kind == "huge":
        return rng.uniform(-1, 1, shape) * 3.0e38
    if kind == "zeros":
        v = np.zeros(shape)
        v[rows // 2:] = -0.0
        v[:, 16:32] = rng.standard_normal((rows, 16)) * 1e-3
        v[1::4, 40] = -0.0
        return v
    raise ValueError(kind)


def to_bits(v: np.ndarray, dtype: str, rng: np.random.Generator, nudge: bool) -> np.ndarray:
    """float64 -> dtype bit patterns (RNE), optionally +-1 ulp at random."""
    import torch

    with np.errstate(over="ignore"):
        f32 = v.astype(np.float32)
    if dtype == "float32":
        b = f32.view(np.uint32).copy()
        top = np.uint32(0x7F7FFFFF)
        mask = np.uint32(0x7FFFFFFF)
    else:
        b = torch.from_numpy(f32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
        top = np.uint16(0x7F7F)
        mask = np.uint16(0x7FFF)
    if nudge:
        step = rng.integers(-1, 2, size=b.shape)
        mag = (b & mask).astype(np.int64) + step
        mag = np.clip(mag, 0, int(top))
        b = ((b & ~mask) | mag.astype(b.dtype)).astype(b.dtype)
    return b


def torch_of(bits: np.ndarray, dtype: str) -> Any:
    import torch

    if dtype == "float32":
        return torch.from_numpy(bits.view(np.float32).copy())
    return torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)


def unpack_fp4(packed: Any) -> np.ndarray:
    """The reference's packed bytes (element 2i in the low nibble) as one code per element."""
    p = packed.numpy().astype(np.uint8)
    out = np.empty((p.shape[0], p.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = p & 0xF
    out[:, 1::2] = p >> 4
    return out


KINDS = ("normal", "student_t", "log_uniform", "e2m1_ties", "e4m3_ties", "boundaries", "tiny", "huge", "zeros")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a clean git checkout of NVIDIA/TransformerEngine")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--rows", type=int, default=64, help="rows per tensor (a multiple of 32)")
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True, check=True).stdout.strip():
        raise SystemExit(f"{src} has local changes; run the recorded code unmodified")
    import torch

    ref4 = _stub_modules(src)
    ref8 = _mxfp8_reference(src)
    rng = np.random.default_rng(a.seed)
    arrays: dict[str, np.ndarray] = {}
    tensors = []
    for dtype in ("float32", "bfloat16"):
        for kind in KINDS:
            for nudge in (False, True):
                v = design(rng, a.rows, 128, kind)
                tensors.append((f"{dtype}__{kind}__{int(nudge)}", to_bits(v, dtype, rng, nudge), dtype))
        for special in ("nan", "inf"):
            v = rng.standard_normal((a.rows, 128))
            v[3, 5] = np.nan if special == "nan" else np.inf
            v[7, 100] = -np.inf if special == "inf" else 1.0
            tensors.append((f"{dtype}__{special}__0", to_bits(v, dtype, rng, False), dtype))
    for tag, bits, dtype in tensors:
        x = torch_of(bits, dtype)
        arrays[f"{tag}__x"] = bits
        q = ref4.NVFP4QuantizerRef(dtype=ref4.reference_utils.Fp4Formats.E2M1, rowwise=True, columnwise=True,
                                   quant_tile_shape=(1, 16), with_rht=False).quantize(x)
        arrays[f"{tag}__nvfp4_codes"] = unpack_fp4(q.data)
        arrays[f"{tag}__nvfp4_scales"] = q.scale.view(torch.uint8).numpy().copy()
        arrays[f"{tag}__nvfp4_codes_t"] = unpack_fp4(q.data_t)
        arrays[f"{tag}__nvfp4_scales_t"] = q.scale_t.view(torch.uint8).numpy().copy()
        arrays[f"{tag}__nvfp4_global_amax"] = q.global_amax_row.numpy().view(np.uint32).copy()
        data, rscale, _ = ref8["_mxfp8_2d_quantize_reference"](x)
        arrays[f"{tag}__mxfp8_codes"] = data.view(torch.uint8).numpy().copy()
        arrays[f"{tag}__mxfp8_scales"] = rscale[::32].numpy().copy()  # one row per 32-row band of tiles
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "vectors.npz", **arrays)
    digest = hashlib.sha256((out / "vectors.npz").read_bytes()).hexdigest()
    manifest = {
        "peer": "NVIDIA/TransformerEngine (pure-PyTorch references)",
        "repository": "https://github.com/NVIDIA/TransformerEngine", "commit": commit,
        "nvfp4_entry": "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py NVFP4QuantizerRef("
                       "dtype=Fp4Formats.E2M1, rowwise=True, columnwise=True, quant_tile_shape=(1, 16), "
                       "with_rht=False).quantize(x)",
        "mxfp8_entry": "tests/pytorch/test_mxfp8_2d_quantize.py _mxfp8_2d_quantize_reference(x) (32 x 32 tiles)",
        "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0], "device": "cpu",
        "seed": a.seed, "tensors": [t for t, _, _ in tensors], "shape": [a.rows, 128],
        "arrays": {"{tensor}__x": "input bits (float32: uint32, bfloat16: uint16)",
                   "{tensor}__nvfp4_codes[_t]": "E2M1 codes, one per element (rowwise; _t: of x.T, columnwise)",
                   "{tensor}__nvfp4_scales[_t]": "E4M3 scale bytes per 16-element block",
                   "{tensor}__nvfp4_global_amax": "the reference's global amax (float32 bits)",
                   "{tensor}__mxfp8_codes": "E4M3 codes of the 32 x 32 tile reference",
                   "{tensor}__mxfp8_scales": "E8M0 bytes, (rows / 32, cols / 32)"},
        "sha256": digest, "generator": "scripts/peers/transformer_engine.py",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(tensors)} tensors, {digest[:12]} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
