"""Uniform (affine) quantization cases: quantize and dequantize under every uniform profile (docs/vectors.md,
docs/spec/uniform.md).

A *setup* is one scheme shape: storage (int8, uint8, int8<-127:127>, int4, uint4, int2, int16, uint16, int32,
ONNX float storage), scales and zero points (per tensor, per axis on a non-last axis, sub-channel blocks, ONNX
blocked with a partial block) and the expressed type. For each setup and input category the builder quantizes
under every uniform profile that accepts the setup (profiles restricted to float32 inputs are left out for
float16 / bfloat16 inputs; ``aqt`` has no zero point and signed storage only; float storage is ONNX's alone);
profiles that give identical codes and identical unspecified masks form one case, whose ``scheme`` and
``profile`` are the first of them in ``PROFILE_ORDER`` and whose ``profiles`` list them all.

Ids: ``uniform/<storage>/<setup>/<source dtype>/<category>/<profile>`` for quantize,
``uniform/<storage>/<setup>/dequantize/<profile>`` for dequantize. Setup labels read ``pt_s0.5_z-3`` (per
tensor, scale 0.5, zero point -3; ``s1_3`` is 1/3), ``axis1``, ``blocks``, ``onnx_blocked``, ``e16`` /
``ebf16`` (float16 / bfloat16 expressed type).

Categories (inputs of the source dtype, unique bit patterns, sorted):
  ties        (k + 1/2) * s rounded to the source dtype for every k the storage range needs: exact ties where s
              is a power of two, near ties otherwise (x / s rounds onto the tie in the compute dtype or not)
  near_ties   each of those +-1 ulp of the source dtype
  grid        k * s (the representable points) and +-1 ulp
  range       the clamp boundaries (lo - z) s, (hi - z) s, half a step beyond (+-1..2 ulp), far beyond, the
              int32 and full-storage-width boundaries (TFLite's and MLIR's undefined conversions)
  special     +-0, +-Inf, NaNs, the largest finite values, 1e30, subnormals, +-s/2 (a tie at zero)
  random      seeded values of random sign and binade around the storage range
Codes are the storage format's element codes (two's complement bit patterns of ``bits`` bits in the format's
unsigned code dtype: int4 -8 is 0x8), ``array_formats`` names the storage format.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from ...core.decode import decode
from ...errors import QrefError
from ...formats import FloatFormat, IntFormat, get_format
from ...schemes.base import QArray
from ...schemes.uniform import UniformScheme, arithmetic_for, build_uniform
from .. import random as qrandom
from ..case import Case

FAMILY = "uniform"
PROFILE_ORDER = ("stablehlo", "stablehlo_lowering", "onnx", "mlir", "tflite", "pytorch", "pytorch_per_channel",
                 "jax", "jax_divide", "qwix", "aqt")
SPEC = {
    "scheme": "uniform.md §1",
    "quantize": "uniform.md §2.1",
    "dequantize": "uniform.md §2.2",
    "requantize": "uniform.md §2.7",
    "arith": "uniform.md §3",
    "profiles": "uniform.md §4.1",
    "examples": "uniform.md §4.2",
}
SOURCES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_NPDT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
         "float64": np.dtype(np.float64)}
_UINT = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16, "float64": np.uint64}
N_RANDOM = 512
N_RANDOM_FULL = 1 << 16


@dataclass(frozen=True)
class Setup:
    """One scheme shape (every profile is tried on it)."""

    label: str
    storage: str
    scale: Any
    zero_point: Any = None
    axis: int | None = None
    block_size: Any = None
    expressed: str = "float32"
    sources: tuple[str, ...] = ("f32",)
    shape: tuple[int, ...] | None = None  # per-axis / blocked input shape
    overrides: dict[str, Any] = field(default_factory=dict)
    profiles: tuple[str, ...] | None = None  # None: every profile that accepts the setup
    description: str = ""


def _s(v: float) -> str:
    return {1 / 3: "1_3"}.get(v, repr(float(v)).rstrip("0").rstrip(".") if v != int(v) else str(int(v)))


def _pt(storage: str, s: float, z: int, **kw: Any) -> Setup:
    return Setup(f"pt_s{_s(s)}_z{z}", storage, s, z, **kw)


SETUPS: tuple[Setup, ...] = (
    _pt("int8", 0.5, -3, sources=("f32", "f16", "bf16"),
        description="exact ties (s = 2^-1), odd zero point: zero point before vs after rounding differ"),
    _pt("int8", 0.5, 4, description="exact ties, even zero point"),
    _pt("int8", 0.1, 3, sources=("f32", "f16", "bf16"),
        description="s = 0.1 (not a float): division vs reciprocal multiply, fused vs unfused zero point"),
    _pt("int8", 1 / 3, -1, description="s = 1/3"),
    _pt("int8", 0.013, 0, description="s = 0.013, no zero point (aqt included)"),
    _pt("uint8", 0.1, 127, description="unsigned storage, odd zero point"),
    _pt("uint8", 1.0, 0, description="unsigned storage, s = 1: negative inputs, MLIR fptoui"),
    _pt("int8<-127:127>", 1 / 3, 0, description="narrowed range [-127, 127]"),
    _pt("int4", 0.1, -1, description="4-bit signed storage"),
    _pt("uint4", 1 / 3, 8, description="4-bit unsigned storage, mid-range zero point"),
    _pt("int2", 0.5, 0, description="2-bit signed storage"),
    _pt("uint2", 0.25, 1, description="2-bit unsigned storage"),
    _pt("int16", 0.1, -3, description="16-bit signed storage"),
    _pt("uint16", 1 / 3, 7, description="16-bit unsigned storage"),
    _pt("int32", 1.0, 0, description="32-bit storage: 2^31 - 1 is not a float32 (float vs integer clamp)"),
    Setup("e16_s0.1_z1", "int8", 0.1, 1, expressed="float16", sources=("f16",),
          description="float16 expressed type: the arithmetic rounds to float16"),
    Setup("ebf16_s1_3_z0", "int8", 1 / 3, 0, expressed="bfloat16", sources=("bf16",),
          description="bfloat16 expressed type: s = 1/3 rounds to 0.333984375"),
    Setup("axis1", "int8", (0.1, 0.5, 1 / 3, 2.0), (0, 1, -3, 4), axis=1, shape=(2, 4, 96),
          description="per axis on axis 1 of a rank-3 input (a non-last axis)"),
    Setup("blocks", "int8", ((0.25, 0.5, 1 / 3, 0.1), (2.0, 0.125, 0.1, 1.0)),
          ((0, 1, -3, 2), (5, -1, 0, 3)), block_size={0: 4, 1: 16}, shape=(8, 64),
          description="sub-channel blocks of 4 x 16 (MLIR sub-channel / StableHLO blocked)"),
    Setup("onnx_blocked", "uint8", ((0.1, 0.5, 1 / 3, 0.25),) * 6, ((128, 120, 3, 250),) * 6, axis=1, block_size=32,
          shape=(6, 100), description="ONNX blocked quantization along axis 1, block 32 (the last block holds 4)"),
    # per axis along every dimension of a (3, 5, 7) tensor (105 elements: odd lengths of packed sub-byte storage)
    *(Setup(f"axis{ax}_odd", st, tuple(0.25 * (k + 1) for k in range((3, 5, 7)[ax])),
            tuple(z0 + k % 2 for k in range((3, 5, 7)[ax])), axis=ax, shape=(3, 5, 7),
            description=f"per axis on axis {ax} of a (3, 5, 7) input ({st}: 105 elements, an odd length)")
      for st, z0, axes in (("int8", -3, (0, 2)), ("int4", -1, (0, 1, 2)), ("uint4", 2, (2,)), ("int2", 0, (1,)),
                           ("uint2", 1, (2,))) for ax in axes),
    Setup("onnx_blocked_int4", "int4", ((0.25, 0.5, 1 / 3),) * 3, ((0, -1, 2),) * 3, axis=1, block_size=16,
          shape=(3, 37), description="ONNX blocked int4 along axis 1, block 16 (the last block holds 5)"),
)

FLOAT_SETUPS: tuple[Setup, ...] = (
    Setup("onnx_s0.5", "float8_e4m3fn", 0.5, profiles=("onnx",),
          description="ONNX QuantizeLinear to float8_e4m3fn (saturate=1)"),
    Setup("onnx_s0.5_saturate0", "float8_e4m3fn", 0.5, profiles=("onnx",), overrides={"float_saturate": False},
          description="ONNX QuantizeLinear to float8_e4m3fn with saturate=0"),
    Setup("onnx_s2", "float8_e5m2", 2.0, profiles=("onnx",), description="ONNX QuantizeLinear to float8_e5m2"),
    Setup("onnx_s2_saturate0", "float8_e5m2", 2.0, profiles=("onnx",), overrides={"float_saturate": False},
          description="ONNX QuantizeLinear to float8_e5m2 with saturate=0"),
    Setup("onnx_s0.25", "float4_e2m1fn", 0.25, profiles=("onnx",),
          description="ONNX QuantizeLinear to float4_e2m1fn (opset 23)"),
)

#: MLIR float storage (``!quant.uniform<f8E4M3FN:f32, 0.5>``, mlir-types.md §2.1) for the MLIR backends: uniform.md
#: §2.1's float storage (x / s encoded with the core, saturating) under the StableHLO profiles. Not claimed for
#: ``mlir``: upstream lower-quant-ops has no float-storage lowering (it emits arith.sitofp / fptosi on the float
#: storage type), so the quant dialect's rounding of such a type is not known
MLIR_FLOAT_SETUPS: tuple[Setup, ...] = tuple(
    Setup(f"mlir_s{_s(s)}", st, s, profiles=("stablehlo", "stablehlo_lowering"),
          description=f"MLIR float storage !quant.uniform<{t}:f32, {_s(s)}>")
    for st, t, s in (("float8_e4m3fn", "f8E4M3FN", 0.5), ("float8_e5m2", "f8E5M2", 2.0),
                     ("float4_e2m1fn", "f4E2M1FN", 0.25)))


# ---------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------
def _to_src(values: np.ndarray, src: str) -> np.ndarray:
    """float64 values rounded to the source dtype (nearest even, overflow to +-inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(_NPDT[src])


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(_UINT[a.dtype.name if a.dtype.name in _UINT else "bfloat16"])


def _ulps(a: np.ndarray, ks: tuple[int, ...] = (1,)) -> np.ndarray:
    """Finite patterns +-k ulp away in magnitude (no zero crossing, no step onto Inf/NaN)."""
    b = _bits(a).astype(np.int64)
    width = a.dtype.itemsize * 8
    sign = b & (1 << (width - 1))
    mag = b & ((1 << (width - 1)) - 1)
    ebits = {2: 5 if a.dtype == np.float16 else 8, 4: 8}[a.dtype.itemsize]
    mbits = width - 1 - ebits
    inf = ((1 << ebits) - 1) << mbits
    out = []
    for k in ks:
        for m in (mag + k, mag - k):
            ok = (m >= 0) & (m < inf) & (mag < inf)
            out.append((m | sign)[ok])
    u = np.concatenate(out).astype(_UINT[a.dtype.name])
    return u.view(a.dtype)


def _unique(a: np.ndarray) -> np.ndarray:
    """Unique bit patterns, sorted by pattern (deterministic order)."""
    return np.unique(_bits(a)).view(a.dtype)


def _specials(src: str, s: float) -> np.ndarray:
    dt = _NPDT[src]
    fi = ml_dtypes.finfo(dt)
    width = dt.itemsize * 8
    ebits = 5 if dt == np.float16 else 8
    mbits = width - 1 - ebits
    inf = ((1 << ebits) - 1) << mbits
    pats = [inf | (1 << (mbits - 1)), inf | 1, inf | (1 << (mbits - 1)) | 3]  # quiet, signalling, payload NaNs
    nan = np.array([p | sg for p in pats for sg in (0, 1 << (width - 1))], dtype=_UINT[src]).view(dt)
    vals = [0.0, math.inf, float(fi.max), float(fi.max) / 2, 1e30, float(fi.smallest_normal),
            float(fi.smallest_subnormal), 3 * float(fi.smallest_subnormal), s / 2, s * 1e-3, s * 1e-20]
    v = _to_src(np.array(vals + [-x for x in vals]), src)
    v = v[~np.isnan(v.astype(np.float64))]
    return np.concatenate([v, nan])


def _storage_range(storage: str) -> tuple[int, int, int, int]:
    """(lo, hi, full_lo, full_hi) of integer storage."""
    f = get_format(storage)
    assert isinstance(f, IntFormat)
    flo, fhi = f.full_range
    return f.lo, f.hi, flo, fhi


def _ks(lo: int, hi: int, z: int) -> np.ndarray:
    """Integers k (q - z = k) covering the storage range [lo - z - 3, hi - z + 3]; sampled for wide storage."""
    a, b = lo - z - 3, hi - z + 3
    if b - a <= 600:
        return np.arange(a, b + 1)
    parts = [np.arange(a, a + 40), np.arange(b - 39, b + 1), np.arange(-40, 41), np.linspace(a, b, 201).round()]
    return np.unique(np.concatenate(parts).astype(np.int64))


def _point_sets(src: str, s: float, z: int, storage: str, label: str, full: bool) -> dict[str, np.ndarray]:
    """The categories' inputs for one (scale, zero point) pair (module docstring)."""
    lo, hi, flo, fhi = _storage_range(storage)
    ks = _ks(lo, hi, z).astype(np.float64)
    ties = _to_src((ks + 0.5) * s, src)
    ties = ties[np.isfinite(ties.astype(np.float64))]
    grid = _to_src(ks * s, src)
    grid = grid[np.isfinite(grid.astype(np.float64))]
    edges_k = np.array([lo - z, hi - z, lo - z - 0.5, hi - z + 0.5, lo - z - 1, hi - z + 1, flo - z - 0.5,
                        fhi - z + 0.5, flo - z - 1, fhi - z + 1, 2.0**31, -(2.0**31), 2.0**31 - 1, 2.0**32,
                        -(2.0**31) - 1, 2.0**31 - z, 2.0**31 - z - 0.5])
    edges = _to_src(edges_k * s, src)
    edges = edges[np.isfinite(edges.astype(np.float64))]
    far = _to_src(np.array([2 * (hi - lo), 1e3 * (hi - lo), -2 * (hi - lo), -1e3 * (hi - lo)]) * s, src)
    rng = np.concatenate([edges, _ulps(edges, (1, 2)), far[np.isfinite(far.astype(np.float64))]])
    emin = math.floor(math.log2(s)) - 3
    emax = math.ceil(math.log2(max(hi - lo, 1) * s)) + 1
    n = N_RANDOM_FULL if full else N_RANDOM
    rnd = qrandom.floats_in_binades(f"{label}/random", n, src, emin, emax).view(_NPDT[src])
    return {
        "ties": _unique(ties),
        "near_ties": _unique(_ulps(ties)),
        "grid": _unique(np.concatenate([grid, _ulps(grid)])),
        "range": _unique(rng),
        "special": _unique(_specials(src, s)),
        "random": rnd,
    }


CATEGORY_TAGS = {
    "ties": ("tie",), "near_ties": ("tie", "boundary"), "grid": ("values", "boundary"),
    "range": ("overflow", "boundary"), "special": ("special", "overflow", "underflow"), "random": ("random",),
    "mixed": ("tie", "boundary", "overflow", "special"), "values_ties": ("values", "tie", "overflow"),
}
CATEGORY_TEXT = {
    "ties": "(k + 1/2) s for every k of the storage range", "near_ties": "(k + 1/2) s +-1 ulp",
    "grid": "k s and +-1 ulp", "range": "clamp and conversion boundaries, far out of range",
    "special": "+-0, +-Inf, NaNs, huge and subnormal values, +-s/2", "random": "seeded random values",
    "mixed": "ties, near ties, range edges and specials of each scale's own (s, z)",
    "values_ties": "every value and midpoint of the format times s, +-1 ulp, overflow edges",
}


def _build(setup: Setup, profile: str) -> UniformScheme | None:
    try:
        return build_uniform(setup.storage, scale=setup.scale, zero_point=setup.zero_point, axis=setup.axis,
                             block_size=setup.block_size, profile=profile, expressed=setup.expressed,
                             **setup.overrides)
    except QrefError:
        return None


def _candidates(setup: Setup) -> list[tuple[str, UniformScheme]]:
    names = setup.profiles or PROFILE_ORDER
    out = []
    zps = np.atleast_1d(np.asarray(0 if setup.zero_point is None else setup.zero_point))
    fmt = get_format(setup.storage)
    for p in names:
        if arithmetic_for(p).narrow_symmetric and (zps.any() or not (isinstance(fmt, IntFormat) and fmt.signed)):
            continue  # a narrow symmetric range (AQT): symmetric signed integers, no zero point
        sch = _build(setup, p)
        if sch is not None:
            out.append((p, sch))
    return out


def code_patterns(codes: np.ndarray, storage: str) -> np.ndarray:
    """Storage values -> element codes: ``bits``-bit two's complement patterns in the format's code dtype."""
    fmt = get_format(storage)
    if isinstance(fmt, FloatFormat):
        return np.asarray(codes).astype(fmt.code_dtype)
    assert isinstance(fmt, IntFormat)
    mask = (1 << fmt.bits) - 1
    return (np.asarray(codes).astype(np.int64) & mask).astype(np.uint64).astype(fmt.code_dtype)


def storage_values(patterns: np.ndarray, storage: str) -> np.ndarray:
    """Element codes -> storage values (sign-extended for signed storage), as int64."""
    fmt = get_format(storage)
    assert isinstance(fmt, IntFormat)
    v = np.asarray(patterns).astype(np.int64)
    if fmt.signed:
        v = np.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
    return v


def _group(outs: list[tuple[str, UniformScheme, tuple[np.ndarray, ...]]]
           ) -> list[tuple[str, UniformScheme, tuple[np.ndarray, ...], list[str]]]:
    groups: dict[bytes, list[int]] = {}
    for i, (_, _, arrs) in enumerate(outs):
        key = b"|".join(np.ascontiguousarray(a).tobytes() + str(a.dtype).encode() for a in arrs)
        groups.setdefault(key, []).append(i)
    return [(outs[m[0]][0], outs[m[0]][1], outs[m[0]][2], [outs[i][0] for i in m]) for m in groups.values()]


def _quantize_cases(setup: Setup, src_key: str, cat: str, x: np.ndarray,
                    cands: list[tuple[str, UniformScheme]], extra_spec: tuple[str, ...] = ()) -> Iterator[Case]:
    outs = []
    for p, sch in cands:
        try:
            q = sch.quantize(x)
        except QrefError:
            continue  # the profile rejects this input dtype (uniform.md §1 C6)
        outs.append((p, sch, (code_patterns(q.codes, setup.storage), np.asarray(q.unspecified, dtype=bool))))
    for rep, sch, (codes, unspec), members in _group(outs):
        spec = [SPEC["quantize"], SPEC["profiles"], *extra_spec]
        if cat in ("ties", "near_ties"):
            spec.append(SPEC["examples"])
        yield Case(
            id=f"{FAMILY}/{setup.storage}/{setup.label}/{src_key}/{cat}/{rep}", family=FAMILY,
            operation="uniform_quantize", scheme=sch, profile=rep, inputs={"x": x},
            expected={"codes": codes}, unspecified={"codes": unspec} if unspec.any() else {},
            array_formats={"codes": sch.storage.name},
            tags=(*CATEGORY_TAGS[cat], "profile"), spec=tuple(dict.fromkeys(spec)), profiles=tuple(members),
            description=f"uniform_quantize {x.dtype.name} -> {setup.storage} ({setup.description}): "
                        f"{CATEGORY_TEXT[cat]}",
        )


def _dequantize_cases(setup: Setup, codes: np.ndarray, cands: list[tuple[str, UniformScheme]],
                      float_storage: bool = False) -> Iterator[Case]:
    """Every given storage code dequantized to the expressed type under every candidate profile (float storage:
    the codes are the float format's bit patterns)."""
    values = codes if float_storage else storage_values(codes, setup.storage)
    outs = []
    for p, sch in cands:
        q = QArray(codes=values if float_storage else values.astype(sch.codes_dtype), scheme=sch)
        y, bad = sch.dequantize_with_mask(q)
        outs.append((p, sch, (y, np.asarray(bad, dtype=bool))))
    for rep, sch, (y, bad), members in _group(outs):
        yield Case(
            id=f"{FAMILY}/{setup.storage}/{setup.label}/dequantize/{rep}", family=FAMILY,
            operation="uniform_dequantize", scheme=sch, profile=rep, params={"dtype": sch.expressed.name},
            inputs={"codes": codes}, expected={"y": y}, unspecified={"y": bad} if bad.any() else {},
            array_formats={"codes": sch.storage.name},
            tags=("values", "special" if float_storage else "boundary", "profile"),
            spec=(SPEC["dequantize"], SPEC["profiles"]), profiles=tuple(members),
            description=(f"uniform_dequantize every {setup.storage} code -> {sch.expressed.name} "
                         f"({setup.description})" if float_storage else
                         f"uniform_dequantize {setup.storage} -> {sch.expressed.name} ({setup.description}): "
                         "(code - z) * s in the profile's dtypes"),
        )


def _all_codes(storage: str) -> np.ndarray:
    """Every code for storage up to 8 bits; windows (bottom, around 0, top) for wider storage."""
    fmt = get_format(storage)
    assert isinstance(fmt, IntFormat)
    lo, hi = fmt.lo, fmt.hi
    if hi - lo < 256:
        vals = np.arange(lo, hi + 1)
    else:
        vals = np.unique(np.concatenate([np.arange(lo, lo + 64), np.arange(-64, 65), np.arange(hi - 63, hi + 1)]))
    return code_patterns(vals, storage)


# ---------------------------------------------------------------------------------------------------------
# per-tensor, per-axis, blocked
# ---------------------------------------------------------------------------------------------------------
def _per_tensor(setup: Setup, full: bool) -> Iterator[Case]:
    cands = _candidates(setup)
    s, z = float(setup.scale), int(setup.zero_point or 0)
    for src_key in setup.sources:
        src = SOURCES[src_key]
        label = f"{FAMILY}/{setup.storage}/{setup.label}/{src_key}"
        sets = _point_sets(src, s, z, setup.storage, label, full)
        for cat, x in sets.items():
            yield from _quantize_cases(setup, src_key, cat, x, cands)
    yield from _dequantize_cases(setup, _all_codes(setup.storage), cands)


def _channel_points(src: str, s: float, z: int, storage: str, label: str, n: int) -> np.ndarray:
    """n points of one channel / block: its ties, near ties, range edges and specials, cycled."""
    sets = _point_sets(src, s, z, storage, label, False)
    pts = np.concatenate([sets["ties"], sets["near_ties"], sets["range"], sets["special"]])
    idx = np.arange(n) * max(1, pts.size // n) % pts.size if pts.size > n else np.arange(n) % pts.size
    return pts[np.sort(idx) if pts.size > n else idx]


def _structured(setup: Setup, full: bool) -> Iterator[Case]:
    """Per-axis and blocked setups: every element takes a point of its own (scale, zero point)."""
    cands = _candidates(setup)
    assert setup.shape is not None
    ref = cands[0][1]
    S, Z = ref.expand(setup.shape)
    S = np.broadcast_to(S, setup.shape)
    Z = np.broadcast_to(Z, setup.shape)
    for src_key in setup.sources:
        src = SOURCES[src_key]
        x = np.zeros(setup.shape, dtype=_NPDT[src])
        pairs = sorted({(float(a), int(b)) for a, b in zip(S.reshape(-1), Z.reshape(-1))})
        for j, (s, z) in enumerate(pairs):
            where = np.equal(S, s) & np.equal(Z, z)
            pts = _channel_points(src, s, z, setup.storage, f"{FAMILY}/{setup.storage}/{setup.label}/{src_key}/{j}",
                                  int(where.sum()))
            x[where] = pts
        yield from _quantize_cases(setup, src_key, "mixed", x, cands, (SPEC["scheme"],))
        label = f"{FAMILY}/{setup.storage}/{setup.label}/{src_key}/random"
        k = max(abs(int(Z.min())), abs(int(Z.max()))) + 300
        raw = qrandom.floats_in_binades(label, math.prod(setup.shape), src, -6, math.ceil(math.log2(k))).view(
            _NPDT[src]).reshape(setup.shape)
        yield from _quantize_cases(setup, src_key, "random", raw, cands, (SPEC["scheme"],))
    codes = _all_codes(setup.storage)
    n = math.prod(setup.shape)
    yield from _dequantize_cases(setup, np.resize(codes, n).reshape(setup.shape), cands)


def _float_storage(setup: Setup, full: bool) -> Iterator[Case]:
    """ONNX float storage: every element value and midpoint (times s), overflow edges and specials."""
    cands = _candidates(setup)
    fmt = get_format(setup.storage)
    assert isinstance(fmt, FloatFormat)
    s = float(setup.scale)
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    v = decode(codes, fmt, dtype=np.float64)
    v = np.unique(v[np.isfinite(v) & (v > 0)])
    mids = (v[1:] + v[:-1]) / 2
    top = float(fmt.max_value)
    over = np.array([top, top * 1.03125, top * 1.0625, top * 1.125, 2 * top, 1e6, 3e38])
    src = "float32"
    vals = _to_src(np.concatenate([v, mids, over]) * s, src)
    vals = np.concatenate([vals, -vals, _ulps(_to_src(mids * s, src))])
    cats = {"values_ties": _unique(vals), "special": _unique(_specials(src, s))}
    for cat, x in cats.items():
        yield from _quantize_cases(setup, "f32", cat, x, cands)
    yield from _dequantize_cases(setup, codes, cands, float_storage=True)


def build_cases(full: bool) -> Iterator[Case]:
    """Every uniform case (module docstring); ``full`` adds 65536 random inputs per per-tensor setup."""
    builders: list[tuple[Setup, Callable[[Setup, bool], Iterator[Case]]]] = []
    for st in SETUPS:
        builders.append((st, _structured if st.shape is not None else _per_tensor))
    for st in FLOAT_SETUPS:
        builders.append((st, _float_storage))
    for st, fn in builders:
        yield from fn(st, full)
    for rs in REQUANTIZE_SETUPS:
        yield from _requantize_cases(rs)
    for st in MLIR_FLOAT_SETUPS:
        yield from _float_storage(st, full)
    yield from _calibrate_cases(full)
    yield from _per_token_calibrate_cases(full)
    yield from _fake_quantize_calibrate_cases(full)
    yield from _openvino_fake_quantize_cases(full)
    yield from _fake_quantize_grad_cases()
    yield from _histogram_calibrate_cases(full)
    yield from _openvino_fake_quantize_structured_cases(full)
    yield from _openvino_fake_quantize_output_cases(full)


# ---------------------------------------------------------------------------------------------------------
# requantize (uniform.md §2.7): uniform_quantize of a quantized operand
# ---------------------------------------------------------------------------------------------------------
REQUANTIZE_PROFILES = ("stablehlo", "stablehlo_lowering")


@dataclass(frozen=True)
class RequantizeSetup:
    """Codes of ``frm`` requantized to ``to`` (each a Setup-like dict: storage, scale, zero_point, axis)."""

    label: str
    frm: dict[str, Any]
    to: dict[str, Any]
    shape: tuple[int, ...] | None = None  # per axis: every channel takes every code (windows for wide storage)
    codes: tuple[int, ...] | None = None  # explicit input values (the spec's example)
    description: str = ""


def _rq(storage: str, s: Any, z: Any = 0, axis: int | None = None) -> dict[str, Any]:
    return {"storage": storage, "scale": s, "zero_point": z, "axis": axis}


REQUANTIZE_SETUPS: tuple[RequantizeSetup, ...] = (
    RequantizeSetup("s1_z0-s2_z0", _rq("int8", 1.0), _rq("int8", 2.0),
                    description="ratio 1/2: every odd code is an exact tie of the second rounding (half even)"),
    RequantizeSetup("s0.1_z-1-s0.4_z0", _rq("int8", 0.1, -1), _rq("int8", 0.4),
                    description="ratio 1/4 = f32(0.1 / 0.4): the merged scale keeps the ties, the spec's "
                                "fl32((q - z) s1) / s2 moves some off them"),
    RequantizeSetup("s0.1_z3-s0.3_z-1", _rq("int8", 0.1, 3), _rq("int8", 0.3, -1),
                    description="ratio 1/3 (inexact), both zero points nonzero"),
    RequantizeSetup("s0.5_z-3-s0.2_z5", _rq("int8", 0.5, -3), _rq("int8", 0.2, 5),
                    description="ratio 2.5: ties, saturation at both ends"),
    RequantizeSetup("s0.7_z-128-s0.35_z127", _rq("int8", 0.7, -128), _rq("int8", 0.35, 127),
                    description="zero points at the storage ends: q - z1 leaves i8 (spec: unspecified), "
                                "results saturate"),
    RequantizeSetup("s1_3_z-1-s0.1_z3", _rq("int8", 1 / 3, -1), _rq("int8", 0.1, 3),
                    description="ratio 10/3, most codes saturate"),
    RequantizeSetup("s0.1_z3-s0.1_z4", _rq("int8", 0.1, 3), _rq("int8", 0.1, 4),
                    description="same scale, zero point shifted by one"),
    RequantizeSetup("s0.1_z3-same", _rq("int8", 0.1, 3), _rq("int8", 0.1, 3),
                    description="identical input and output types"),
    RequantizeSetup("s0.013_z0-narrow_s0.1_z0", _rq("int8", 0.013), _rq("int8<-127:127>", 0.1),
                    description="narrowed output range [-127, 127]"),
    RequantizeSetup("s0.25_z0-u_s1_z128", _rq("int8", 0.25), _rq("uint8", 1.0, 128),
                    description="int8 to uint8, ratio 1/4"),
    RequantizeSetup("u_s0.1_z127-s0.05_z-3", _rq("uint8", 0.1, 127), _rq("int8", 0.05, -3),
                    description="uint8 to int8, ratio 2, saturation"),
    RequantizeSetup("s0.5_z0-i4_s2_z-1", _rq("int8", 0.5), _rq("int4", 2.0, -1),
                    description="int8 to int4, ratio 1/4"),
    RequantizeSetup("i4_s0.1_z-1-s0.03_z2", _rq("int4", 0.1, -1), _rq("int8", 0.03, 2),
                    description="int4 to int8, ratio 10/3"),
    RequantizeSetup("i16_s0.1_z-3-s1_3_z1", _rq("int16", 0.1, -3), _rq("int8", 1 / 3, 1),
                    description="int16 to int8 (windows of int16 codes)"),
    RequantizeSetup("s0.5_z0-i32_s2e-20_z0", _rq("int8", 0.5), _rq("int32", 2.0**-20),
                    description="int8 to int32: no clamp below 32 bits in the merged form"),
    RequantizeSetup("i32_s0.001_z0-s0.5_z0", _rq("int32", 0.001), _rq("int8", 0.5),
                    description="int32 to int8: codes beyond 2^24 round when converted to f32"),
    RequantizeSetup("axis1-axis1", _rq("int8", (0.1, 0.5, 1 / 3), (-30, -20, 0), 1),
                    _rq("int8", (0.1, 0.2, 0.25), (-20, -30, 5), 1), shape=(256, 3),
                    description="per axis on the last axis to per axis on the same axis"),
    RequantizeSetup("pt-axis1", _rq("int8", 0.1, 3), _rq("int8", (0.3, 0.05, 0.1), (-1, 0, 4), 1), shape=(256, 3),
                    description="per tensor to per axis on the last axis"),
    RequantizeSetup("axis1-pt", _rq("int8", (0.3, 0.05, 0.1), (-1, 0, 4), 1), _rq("int8", 0.1, 3), shape=(256, 3),
                    description="per axis on the last axis to per tensor"),
    RequantizeSetup("axis0-axis0", _rq("int8", (0.1, 0.5, 1 / 3), (-30, -20, 0), 0),
                    _rq("int8", (0.1, 0.2, 0.25), (-20, -30, 5), 0), shape=(3, 256),
                    description="per axis on axis 0 (not the last) of a (3, 256) input"),
    RequantizeSetup("spec_example", _rq("int8", (0.1, 0.5), (-30, -20), 0), _rq("int8", (0.1, 0.2), (-20, -30), 0),
                    codes=(10, 10), description="the StableHLO spec's uniform_quantize example: [10, 10] -> [20, 45]"),
)


def _rq_scheme(d: dict[str, Any], profile: str) -> UniformScheme | None:
    try:
        return build_uniform(d["storage"], scale=d["scale"], zero_point=d["zero_point"], axis=d["axis"],
                             profile=profile)
    except QrefError:
        return None


def _requantize_cases(rs: RequantizeSetup) -> Iterator[Case]:
    from ...schemes.uniform.requantize import requantize

    st_in, st_out = rs.frm["storage"], rs.to["storage"]
    if rs.codes is not None:
        vals = np.array(rs.codes, dtype=np.int64)
        codes = code_patterns(vals, st_in)
    elif rs.shape is None:
        codes = _all_codes(st_in)
    else:
        ax = rs.frm["axis"] if rs.frm["axis"] is not None else rs.to["axis"]
        base = _all_codes(st_in)
        codes = np.moveaxis(np.broadcast_to(base[:, None], (base.size, rs.shape[ax])), 1, ax)
        codes = np.ascontiguousarray(codes).reshape(rs.shape)
    outs = []
    for p in REQUANTIZE_PROFILES:
        frm, to = _rq_scheme(rs.frm, p), _rq_scheme(rs.to, p)
        if frm is None or to is None:
            continue
        q = requantize(storage_values(codes, st_in).astype(frm.codes_dtype), frm, to)
        outs.append((p, frm, (code_patterns(q.codes, st_out), np.asarray(q.unspecified, dtype=bool)), to))
    tos = {p: to for p, _, _, to in outs}
    for rep, frm, (res, unspec), members in _group([(p, f, a) for p, f, a, _ in outs]):
        yield Case(
            id=f"{FAMILY}/requantize/{st_in}-{st_out}/{rs.label}/{rep}", family=FAMILY,
            operation="uniform_requantize", scheme=frm, profile=rep, params={"to": tos[rep].to_spec()},
            inputs={"codes": codes}, expected={"result": res},
            unspecified={"result": unspec} if unspec.any() else {},
            array_formats={"codes": st_in, "result": st_out},
            tags=("values", "tie", "overflow", "profile"), spec=(SPEC["requantize"], SPEC["profiles"]),
            profiles=tuple(members),
            description=f"uniform_quantize of a quantized {st_in} operand to {st_out} ({rs.description})",
        )


# ---------------------------------------------------------------------------------------------------------
# range observers (uniform.md §5.4): the scale and zero point of a running min / max over batches
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrateSetup:
    """One observer configuration: running update, symmetric or affine, storage and its range, the midpoint
    rule of symmetric unsigned storage, the channel axis of a batch (None: per tensor), the averaging constant."""

    label: str
    running: str
    symmetric: bool
    storage: str
    lo: int
    hi: int
    midpoint: str = "ceil_midpoint"
    axis: int | None = None
    averaging_constant: float = 0.01


CALIBRATE_SETUPS = (
    CalibrateSetup("extremes/affine_uint8", "extremes", False, "uint8", 0, 255),
    CalibrateSetup("extremes/affine_int8", "extremes", False, "int8", -128, 127),
    CalibrateSetup("extremes/affine_uint8_0_127", "extremes", False, "uint8", 0, 127),
    CalibrateSetup("extremes/affine_int8_-64_63", "extremes", False, "int8", -64, 63),
    CalibrateSetup("extremes/symmetric_uint8", "extremes", True, "uint8", 0, 255),
    CalibrateSetup("extremes/symmetric_int8", "extremes", True, "int8", -128, 127),
    CalibrateSetup("extremes/symmetric_uint8_0_100_floor", "extremes", True, "uint8", 0, 100, "floor_midpoint"),
    CalibrateSetup("exponential_average/affine_uint8_c0.01", "exponential_average", False, "uint8", 0, 255),
    CalibrateSetup("exponential_average/affine_int8_c1_3", "exponential_average", False, "int8", -128, 127,
                   averaging_constant=1 / 3),
    CalibrateSetup("exponential_average/symmetric_int8_c0.01", "exponential_average", True, "int8", -128, 127),
    CalibrateSetup("exponential_average/symmetric_uint8_c0.9", "exponential_average", True, "uint8", 0, 255,
                   averaging_constant=0.9),
    CalibrateSetup("extremes/axis0/affine_uint8", "extremes", False, "uint8", 0, 255, axis=0),
    CalibrateSetup("extremes/axis0/affine_int8_-64_63", "extremes", False, "int8", -64, 63, axis=0),
    CalibrateSetup("extremes/axis0/symmetric_int8", "extremes", True, "int8", -128, 127, axis=0),
    CalibrateSetup("exponential_average/axis0/affine_uint8_c0.01", "exponential_average", False, "uint8", 0, 255,
                   axis=0),
)
CALIBRATE_CATEGORIES = {
    "sweep": (("exhaustive", "values"), "every pair (a, b) of k / 16, |k| <= 16, as the first batch; the second "
              "batch (b / 2, 3a / 2)"),
    "random": (("random",), "three batches of 16 seeded values of random sign over 2^-20 .. 2^20, each run "
               "shifted by a seeded offset"),
    "edge": (("edge", "special", "tie", "underflow", "overflow"), "all zeros, one value, min == max, negative "
             "only, eps floors, subnormals, ranges whose max - min overflows, zero-point ties, +-Inf and NaN"),
    "random_f64": (("random",), "float64 batches (the observer converts each batch to float32 first)"),
}


def _calibrate_edge() -> np.ndarray:
    """(runs, 2 batches, 2 elements) float32 edge runs (CALIBRATE_CATEGORIES)."""
    nan, inf = float("nan"), float("inf")
    runs = [[[0, 0], [0, 0]], [[3, 3], [3, 3]], [[-0.0, -0.0], [0, 0]], [[2.5, 2.5], [2.5, 2.5]],
            [[-3, -1], [-2, -0.5]], [[1, 7], [2, 3]], [[1e-10, -1e-12], [0, 1e-11]], [[1e-45, 0], [-1e-45, 1e-45]],
            [[1e-38, -1e-38], [2e-38, 0]], [[1e-5, 0], [0, 2e-5]], [[3e38, -3e38], [1, 2]],
            [[3.4e38, 3.4e38], [-3.4e38, 0]], [[1, inf], [0, 1]], [[-inf, 1], [0, 1]], [[-inf, inf], [0, 0]],
            [[1, nan], [0, 1]], [[nan, 1], [0, 1]], [[0, 1], [nan, 2]], [[0, 1], [2, inf]], [[1e30, -1e30], [0, 0]]]
    # zero-point ties: (M - m) / 255 = 2^-4 exactly and m / s = -(k + 1/2) (uint8) or lo - m / s ties (int8)
    for k in (0, 1, 2, 3, 4, 5, 126, 127):
        m = -(k + 0.5) / 16
        runs.append([[m, m + 255 / 16], [m, m]])
        runs.append([[m, m + 255 / 16 + 2**-12], [m, m]])  # s just above 2^-4: m / s just inside the tie
    return np.asarray(runs, dtype=np.float32)


def _calibrate_inputs(cs: CalibrateSetup, cat: str, full: bool) -> np.ndarray:
    """The case's batches: (runs, batches, *batch shape); per axis the batch is (channels, elements)."""
    if cat == "sweep":
        g = np.arange(-16, 17, dtype=np.float64) / 16
        a, b = np.meshgrid(g, g, indexing="ij")
        a, b = a.reshape(-1), b.reshape(-1)
        x = np.stack([np.stack([a, b], -1), np.stack([b / 2, 1.5 * a], -1)], 1).astype(np.float32)  # (R, 2, 2)
    elif cat == "edge":
        x = _calibrate_edge()
    else:
        runs = 4096 if full else 256
        dt = "float64" if cat == "random_f64" else "float32"
        v = qrandom.floats_in_binades(f"uniform/calibrate/{cs.label}/{cat}", runs * 48, dt, -20, 20)
        off = qrandom.floats_in_binades(f"uniform/calibrate/{cs.label}/{cat}/offset", runs, dt, -20, 20)
        vals = v.view(np.dtype(dt)).reshape(runs, 3, 16) + off.view(np.dtype(dt)).reshape(runs, 1, 1)
        x = vals.astype(np.dtype(dt))
    if cs.axis is None:
        return x
    # per axis: groups of 4 runs become the 4 channels of one run (batch shape (4, elements))
    r = x.shape[0] - x.shape[0] % 4
    x = x[:r].reshape(r // 4, 4, x.shape[1], x.shape[2])
    return np.ascontiguousarray(np.moveaxis(x, 1, 2))  # (runs, batches, channels, elements)


def _calibrate_cases(full: bool) -> Iterator[Case]:
    """uniform_calibrate cases (uniform.md §5.4): each run of x[r] (batches in order) gives scale[r] and
    zero_point[r] (per axis: one per channel); the expected values are qref's observe_range under the case's
    params."""
    from ...analysis.calibrate import observe_range
    from ...profiles.uniform import OBSERVER_RULES

    eps = float(np.finfo(np.float32).eps)
    for cs in CALIBRATE_SETUPS:
        rule = next(k for k, r in OBSERVER_RULES.items() if r.running == cs.running)
        for cat, (tags, desc) in CALIBRATE_CATEGORIES.items():
            if cat == "random_f64" and cs.label not in ("extremes/affine_uint8", "extremes/axis0/affine_uint8"):
                continue
            x = _calibrate_inputs(cs, cat, full)
            outs = [observe_range(run, cs.lo, cs.hi, symmetric=cs.symmetric, rule=rule, axis=cs.axis,
                                  averaging_constant=cs.averaging_constant, eps=eps, midpoint=cs.midpoint)
                    for run in x]
            scale = np.stack([o.scales for o in outs]).astype(np.float32)
            zp = np.stack([o.zero_points for o in outs]).astype(np.int64)
            unspec_z = np.stack([o.unspecified for o in outs])
            unspec_s = np.isnan(scale)  # a NaN scale: sign and payload unspecified
            unspecified = {k: v for k, v in (("scale", unspec_s), ("zero_point", unspec_z)) if v.any()}
            yield Case(
                id=f"{FAMILY}/calibrate/{cs.label}/{cat}", family=FAMILY, operation="uniform_calibrate",
                params={"running": cs.running, "averaging_constant": cs.averaging_constant,
                        "statistic_dtype": "float32", "formula": "float32_divide_eps", "eps": eps,
                        "symmetric": cs.symmetric, "storage": cs.storage, "storage_range": [cs.lo, cs.hi],
                        "midpoint": cs.midpoint, "axis": cs.axis, "batches": int(x.shape[1])},
                inputs={"x": x}, expected={"scale": scale, "zero_point": zp}, unspecified=unspecified,
                tags=tags, spec=("uniform.md §5.4",),
                description=f"range observer ({cs.running}, {'symmetric' if cs.symmetric else 'affine'} "
                            f"{cs.storage} [{cs.lo}, {cs.hi}]{'' if cs.axis is None else ', per channel'}): "
                            f"scale and zero point of each run of x[r] ({desc})",
            )


def _per_token_calibrate_cases(full: bool) -> Iterator[Case]:
    """uniform_calibrate cases of the divide_eps_balanced_zero_point formula (uniform.md §5.2, §5.4): one batch
    per run, each row (token) of it a group, int8 [-128, 127], arithmetic in the input dtype (float32 / float64),
    scales as float64 (every float32 value is one); finite inputs only (NaN / Inf: unspecified)."""
    from ...analysis.calibrate import calibrate

    eps = float(np.finfo(np.float32).eps)
    edge = _calibrate_edge().reshape(-1, 4)
    edge = edge[np.isfinite(edge).all(axis=1)]
    for dt in ("float32", "float64"):
        for cat in ("sweep", "random", "edge"):
            if cat == "sweep":
                g = np.arange(-24, 25, dtype=np.float64) / 16
                a, b = (v.reshape(-1) for v in np.meshgrid(g, g, indexing="ij"))
                rows = np.stack([a, b, (a + b) / 3], -1)
            elif cat == "random":
                n = 4096 if full else 512
                v = qrandom.floats_in_binades(f"uniform/calibrate/per_token/{dt}/{cat}", n * 8, dt, -24, 24)
                off = qrandom.floats_in_binades(f"uniform/calibrate/per_token/{dt}/{cat}/offset", n, dt, -24, 24)
                rows = v.view(np.dtype(dt)).reshape(n, 8) + off.view(np.dtype(dt)).reshape(n, 1)
            else:
                rows = edge.astype(np.float64)
            rows = rows.astype(dt)
            r = rows.shape[0] - rows.shape[0] % 8
            x = np.ascontiguousarray(rows[:r].reshape(r // 8, 1, 8, rows.shape[1]))  # (runs, 1 batch, 8 tokens, n)
            c = calibrate(x.reshape(r, -1), "int8", "minmax", axis=0, formula="divide_eps_balanced_zero_point")
            yield Case(
                id=f"{FAMILY}/calibrate/divide_eps_balanced_zero_point/per_token_int8/{dt}/{cat}", family=FAMILY,
                operation="uniform_calibrate",
                params={"running": "extremes", "averaging_constant": 0.01, "statistic_dtype": dt,
                        "formula": "divide_eps_balanced_zero_point", "eps": eps, "symmetric": False,
                        "storage": "int8", "storage_range": [-128, 127], "midpoint": "ceil_midpoint", "axis": 0,
                        "batches": 1},
                inputs={"x": x}, expected={"scale": c.scales.reshape(r // 8, 8).astype(np.float64),
                                           "zero_point": c.zero_points.reshape(r // 8, 8).astype(np.int64)},
                tags=("exhaustive", "values") if cat == "sweep" else CALIBRATE_CATEGORIES[cat][0],
                spec=("uniform.md §5.2", "uniform.md §5.4"),
                description=f"per-token asymmetric int8 parameters of {dt} rows (divide_eps_balanced_zero_point: "
                            f"the zero point from the bound with the smaller error): {cat}",
            )


FAKE_QUANTIZE_SETUPS = ("extremes/affine_uint8", "extremes/affine_int8_-64_63", "extremes/symmetric_int8",
                        "exponential_average/affine_uint8_c0.01", "exponential_average/symmetric_uint8_c0.9",
                        "extremes/axis0/affine_uint8", "extremes/axis0/symmetric_int8",
                        "exponential_average/axis0/affine_uint8_c0.01")


def _fake_quantize_calibrate_cases(full: bool) -> Iterator[Case]:
    """uniform_calibrate cases with a third output ``y`` (uniform.md §5.4): y[r, t] is batch t of run r
    quantized and dequantized (profile ``pytorch_fake_quantize``, float32) with the observer's scale and zero point
    after batches 0..t (a fake-quantize module with its observer and fake quantization on); scale / zero_point are
    those after the last batch. y is unspecified in a run whose parameters are not finite or unspecified."""
    from ...analysis.calibrate import observe_range
    from ...profiles.uniform import OBSERVER_RULES

    eps = float(np.finfo(np.float32).eps)
    setups = {cs.label: cs for cs in CALIBRATE_SETUPS}
    for label in FAKE_QUANTIZE_SETUPS:
        cs = setups[label]
        rule = next(k for k, r in OBSERVER_RULES.items() if r.running == cs.running)
        for cat in ("random", "edge"):
            x = _calibrate_inputs(cs, cat, full)
            if cat == "random":
                x = x[: max(16, x.shape[0] // 4)]
            B = x.shape[1]
            y = np.zeros(x.shape, np.float32)
            uy = np.zeros(x.shape, bool)
            for t in range(B):
                obs = [observe_range(run[: t + 1], cs.lo, cs.hi, symmetric=cs.symmetric, rule=rule, axis=cs.axis,
                                     averaging_constant=cs.averaging_constant, eps=eps, midpoint=cs.midpoint)
                       for run in x]
                S = np.stack([o.scales for o in obs]).reshape(-1).astype(np.float64)  # (runs [* channels])
                Z = np.stack([o.zero_points for o in obs]).reshape(-1)
                bad = np.stack([o.unspecified for o in obs]).reshape(-1) | ~np.isfinite(S)
                S, Z = np.where(bad, 1.0, S), np.where(bad, cs.lo, Z)  # placeholders: y is unspecified there
                rows = x[:, t].reshape(S.size, -1)  # one row per run (per channel: per run and channel)
                name = cs.storage if (cs.lo, cs.hi) == tuple(get_format(cs.storage).full_range) \
                    else f"{cs.storage}<{cs.lo}:{cs.hi}>"
                sch = build_uniform(name, scale=S.tolist(), zero_point=Z.tolist(), axis=0,
                                    profile="pytorch_fake_quantize")
                with np.errstate(all="ignore"):
                    q = sch.quantize(rows)
                    v = np.asarray(sch.dequantize(q), np.float32)
                y[:, t] = v.reshape(y[:, t].shape)
                uy[:, t] = (np.asarray(q.unspecified, bool) | bad[:, None]).reshape(uy[:, t].shape)
            last = [observe_range(run, cs.lo, cs.hi, symmetric=cs.symmetric, rule=rule, axis=cs.axis,
                                  averaging_constant=cs.averaging_constant, eps=eps, midpoint=cs.midpoint)
                    for run in x]
            scale = np.stack([o.scales for o in last]).astype(np.float32)
            zp = np.stack([o.zero_points for o in last]).astype(np.int64)
            unspecified = {k: v for k, v in (("scale", np.isnan(scale)),
                                             ("zero_point", np.stack([o.unspecified for o in last])),
                                             ("y", uy)) if v.any()}
            yield Case(
                id=f"{FAMILY}/calibrate/fake_quantize/{cs.label}/{cat}", family=FAMILY, operation="uniform_calibrate",
                params={"running": cs.running, "averaging_constant": cs.averaging_constant,
                        "statistic_dtype": "float32", "formula": "float32_divide_eps", "eps": eps,
                        "symmetric": cs.symmetric, "storage": cs.storage, "storage_range": [cs.lo, cs.hi],
                        "midpoint": cs.midpoint, "axis": cs.axis, "batches": int(B),
                        "fake_quantize": "pytorch_fake_quantize"},
                inputs={"x": x}, expected={"scale": scale, "zero_point": zp, "y": y}, unspecified=unspecified,
                tags=CALIBRATE_CATEGORIES[cat][0], spec=("uniform.md §5.4", "uniform.md §4.4"),
                description=f"fake quantization with a range observer ({cs.running}, "
                            f"{'symmetric' if cs.symmetric else 'affine'} {cs.storage} [{cs.lo}, {cs.hi}]"
                            f"{'' if cs.axis is None else ', per channel'}): each batch fake-quantized with the "
                            f"parameters observed up to it ({CALIBRATE_CATEGORIES[cat][1]})",
            )


# ---------------------------------------------------------------------------------------------------------
# OpenVINO FakeQuantize (uniform.md §2.8): the input range formed from (s, z), two forms of the arithmetic
# ---------------------------------------------------------------------------------------------------------
FQ_PROFILES = ("openvino_cpu", "openvino")
FQ_SETUPS: tuple[Setup, ...] = (
    Setup("fq_s0.1_z3", "uint8", 0.1, 3, profiles=FQ_PROFILES,
          description="FakeQuantize, s = 0.1: the range's scale fl32(255 / fl32(ih - il)) is not 1 / s"),
    Setup("fq_s0.007_z-5", "int8", 0.007, -5, profiles=FQ_PROFILES,
          description="FakeQuantize, signed storage, negative zero point"),
    Setup("fq_s7.1e-05_z100", "uint8", 7.1e-5, 100, profiles=FQ_PROFILES,
          description="FakeQuantize, small scale"),
    Setup("fq_s1_3_z0", "int8<-127:127>", 1 / 3, 0, profiles=FQ_PROFILES,
          description="FakeQuantize, narrowed range: 255 levels"),
    Setup("fq_s0.37_z-2", "int4", 0.37, -2, profiles=FQ_PROFILES, description="FakeQuantize, 16 levels"),
    Setup("fq_s0.0013_z17", "int16", 0.0013, 17, profiles=FQ_PROFILES,
          description="FakeQuantize, 65536 levels"),
)


def _openvino_fake_quantize_cases(full: bool) -> Iterator[Case]:
    """uniform_quantize under the FakeQuantize profiles (``openvino_cpu``: precomputed input scale and shift;
    ``openvino``: the normalized form), float32 inputs: ties, near ties, grid, range edges, specials, random."""
    for st in FQ_SETUPS:
        yield from _per_tensor(st, full)


#: (label, storage, scales, zero points): the fake-quantize gradient-mask cases (uniform.md §4.4 F5); one scale:
#: per tensor, several: per channel along axis 0
FAKE_GRAD_SETUPS: tuple[tuple[str, str, tuple[float, ...], tuple[int, ...]], ...] = (
    ("pt_int8_s0.1_z3", "int8", (0.1,), (3,)),
    ("pt_uint8_s0.02_z128", "uint8", (0.02,), (128,)),
    ("pt_int8_4bit_s0.25_z-2", "int8<-8:7>", (0.25,), (-2,)),
    ("pt_int8_s1e-45_z0", "int8", (float(np.float32(1e-45)),), (0,)),
    ("pc_int8_3ch", "int8", (0.1, 0.5, 1 / 3), (3, -3, 0)),
    ("pc_uint8_2ch", "uint8", (0.02, 0.75), (128, 0)),
)


def _fake_grad_points(s: float, z: int, lo: int, hi: int, specials: bool) -> np.ndarray:
    """float32 inputs at every integer k and tie k + 1/2 of x * fl32(1 / s) from lo - z - 3 to hi - z + 3 (the
    clamp bounds and beyond), each with its neighbours one ulp away; with ``specials`` NaN, +-Inf, +-0 and
    values far beyond the range."""
    with np.errstate(over="ignore"):  # a subnormal scale: inv = +Inf
        inv = np.float32(1) / np.float32(s)
    ks = np.arange(lo - z - 3, hi - z + 4, dtype=np.float64)
    with np.errstate(all="ignore"):
        base = (np.concatenate([ks, ks + 0.5]) / np.float64(inv)).astype(np.float32)
    pts = [base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))]
    if specials:
        pts.append(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e10, -1e10], np.float32))
    return np.concatenate(pts)


def _fake_quantize_grad_cases() -> Iterator[Case]:
    """uniform_quantize cases of profile ``pytorch_fake_quantize`` with a second output ``grad_mask`` (bool): the
    gradient mask of fake quantize (uniform.md §4.4 F5), True where lo <= z + round(fl32(x * fl32(1 / s))) <= hi.
    Per channel (axis 0) the inputs are finite (beyond int64 the per-channel codes differ: §4.4 F3)."""
    from ...schemes.uniform.gradient import fake_quantize_mask

    for label, storage, scales, zps in FAKE_GRAD_SETUPS:
        per_channel = len(scales) > 1
        base = storage.split("<")[0]
        lo, hi = get_format(base).full_range
        if "<" in storage:
            lo, hi = (int(v) for v in storage[storage.index("<") + 1:-1].split(":"))
        rows = [_fake_grad_points(s, z, lo, hi, not per_channel) for s, z in zip(scales, zps, strict=True)]
        n = max(r.size for r in rows)
        x = np.stack([np.resize(r, n) for r in rows]) if per_channel else rows[0]
        sch = build_uniform(storage, scale=list(scales) if per_channel else scales[0],
                            zero_point=list(zps) if per_channel else zps[0], axis=0 if per_channel else None,
                            profile="pytorch_fake_quantize")
        with np.errstate(all="ignore"):
            q = sch.quantize(x)
        mask = fake_quantize_mask(x, sch)
        unspec = np.asarray(q.unspecified, dtype=bool)
        yield Case(
            id=f"{FAMILY}/fake_quantize_grad/{label}", family=FAMILY, operation="uniform_quantize", scheme=sch,
            profile="pytorch_fake_quantize", inputs={"x": x},
            expected={"codes": code_patterns(q.codes, base), "grad_mask": mask},
            unspecified={"codes": unspec} if unspec.any() else {}, array_formats={"codes": sch.storage.name},
            tags=("tie", "boundary", "special"), spec=("uniform.md §4.4",),
            description=f"fake quantize float32 -> {storage} ({'per channel' if per_channel else 'per tensor'}): "
                        f"codes and the gradient mask at ties x / s = k + 1/2, integers and their one-ulp "
                        f"neighbours across the clamp bounds{'' if per_channel else ', NaN, +-Inf'}",
        )


# ---------------------------------------------------------------------------------------------------------
# histogram observer (uniform.md §5.5): running histogram, L2 range search
# ---------------------------------------------------------------------------------------------------------
#: (label, storage, lo, hi, symmetric)
HISTOGRAM_SETUPS = (("affine_uint8", "uint8", 0, 255, False), ("affine_int8", "int8", -128, 127, False),
                    ("symmetric_int8", "int8", -128, 127, True), ("symmetric_uint8", "uint8", 0, 255, True))
#: the setups with edge runs (the binning does not depend on the scheme; the search is slow in torch)
HISTOGRAM_EDGE_SETUPS = ("affine_uint8", "symmetric_int8")
HISTOGRAM_CATEGORIES = {
    "random": (("random",), "three batches of 64 values per run: sums of four uniforms (bell-shaped), uniform, "
               "ratios of centred uniforms (heavy tails) and uniform with outliers, scaled by 2^k, |k| <= 12"),
    "edge": (("edge", "special", "underflow"), "all zeros, all equal (then widened; also where x +- 1 rounds to x), "
             "tiny and subnormal values, "
             "+-Inf (left out; a batch of only +-Inf is skipped), widening and nested ranges, negative only, "
             "an outlier"),
}


def _histogram_random(label: str, runs: int) -> np.ndarray:
    """(runs, 3, 64) float32 batches from raw PCG words and IEEE arithmetic only (machine-independent)."""
    u = qrandom.bits(label, runs * 3 * 64 * 4, 24).astype(np.float64).reshape(runs, 3, 64, 4) / 2.0**24
    kind = np.arange(runs).reshape(runs, 1, 1) % 4
    bell = u.sum(axis=-1) - 2.0
    flat = 4.0 * u[..., 0] - 1.0
    heavy = (u[..., 0] - 0.5) / (u[..., 1] - 0.5 + 2.0**-25)
    outl = np.where(u[..., 2] < 1 / 32, 1000.0, 1.0) * (u[..., 1] - 0.25)
    v = np.choose(kind, [bell, flat, heavy, outl])
    k = qrandom.below(label + "/scale", runs, 25).astype(np.float64) - 12.0
    return np.ldexp(v, k.astype(np.int64).reshape(runs, 1, 1)).astype(np.float32)


def _histogram_edge() -> np.ndarray:
    """(runs, 2 batches, 4 elements) float32 edge runs (HISTOGRAM_CATEGORIES)."""
    inf = float("inf")
    runs = [[[0, 0, 0, 0], [0, 0, 0, 0]], [[3, 3, 3, 3], [3, 3, 3, 3]], [[3, 3, 3, 3], [1, 2, 5, 5]],
            [[-2.5, -2.5, -2.5, -2.5], [0, 0, 0, 0]], [[1e-30, -2e-30, 3e-30, 0], [1e-38, 1e-45, -1e-45, 0]],
            [[inf, 1, 2, -inf], [0, 1, 2, 3]], [[inf, inf, -inf, inf], [1, 2, 3, 4]], [[0, 1, 2, 3], [-4, 0, 8, 16]],
            [[0, 10, 20, 30], [1, 2, 3, 4]], [[-3, -1, -2, -2.5], [-1, -1, -1, -1]], [[0, 1, 2, 1000], [0.5, 1, 1, 2]],
            [[1e-5, 0, 0, 2e-5], [0, 0, 0, 1e-5]], [[0.1, 0.2, 0.3, 0.4], [-0.1, 0.25, 0.45, 0.05]],
            [[2**30] * 4, [2**30] * 4], [[-3e9] * 4, [1e9, 1e9, 1e9, 1e9]]]  # x +- 1 rounds back to x
    return np.asarray(runs, dtype=np.float32)


def _histogram_calibrate_cases(full: bool) -> Iterator[Case]:
    """uniform_calibrate cases of the histogram observer (uniform.md §5.5): each run of x[r] (batches in order)
    gives scale[r] and zero_point[r], qref's observe_histogram under rule pytorch_histogram_observer."""
    from ...analysis.calibrate import observe_histogram
    from ...profiles.uniform import HISTOGRAM_OBSERVER_RULES

    rule = HISTOGRAM_OBSERVER_RULES["pytorch_histogram_observer"]
    eps = float(np.finfo(np.float32).eps)
    for label, storage, lo, hi, sym in HISTOGRAM_SETUPS:
        for cat, (tags, desc) in HISTOGRAM_CATEGORIES.items():
            if cat == "edge" and label not in HISTOGRAM_EDGE_SETUPS:  # torch searches a few values slowly
                continue
            x = (_histogram_random(f"uniform/calibrate/histogram/{label}/{cat}", 32 if full else 12)
                 if cat == "random" else _histogram_edge())
            outs = [observe_histogram(list(run), lo, hi, symmetric=sym, eps=eps) for run in x]
            yield Case(
                id=f"{FAMILY}/calibrate/histogram/{label}/{cat}", family=FAMILY, operation="uniform_calibrate",
                params={"running": "histogram", "bins": rule.bins, "upsample_rate": rule.upsample_rate,
                        "statistic_dtype": "float32", "formula": "float32_divide_eps", "eps": eps,
                        "symmetric": sym, "storage": storage, "storage_range": [lo, hi],
                        "midpoint": "ceil_midpoint", "axis": None, "batches": int(x.shape[1])},
                inputs={"x": x}, expected={"scale": np.stack([o.scales for o in outs]).astype(np.float32),
                                           "zero_point": np.stack([o.zero_points for o in outs]).astype(np.int64)},
                tags=tags, spec=("uniform.md §5.5",),
                description=f"histogram observer ({rule.bins} bins, L2 range search, "
                            f"{'symmetric' if sym else 'affine'} {storage} [{lo}, {hi}]): scale and zero point of "
                            f"each run of x[r] ({desc})",
            )


# ---------------------------------------------------------------------------------------------------------
# OpenVINO FakeQuantize along axes, in blocks and with 15 levels (uniform.md §2.8 C6, C8): the input range of
# each channel / block from its (s, z); a Constant folds ranges along one axis with the reference (normalize),
# ranges along two axes (blocks) op by op (scale_shift)
# ---------------------------------------------------------------------------------------------------------
FQ_STRUCTURED_SETUPS: tuple[Setup, ...] = (
    Setup("fq_axis1", "int8", (0.1, 0.007, 1 / 3, 0.37), (3, -5, 0, -2), axis=1, shape=(2, 4, 96),
          profiles=FQ_PROFILES, description="FakeQuantize with ranges per channel along axis 1 of a rank-3 input"),
    Setup("fq_axis2_odd", "uint8", tuple(0.1 * (k + 1) for k in range(7)), (3, 100, 0, 255, 17, 128, 64), axis=2,
          shape=(3, 5, 7), profiles=FQ_PROFILES,
          description="FakeQuantize with ranges along the last axis (2) of a (3, 5, 7) input"),
    Setup("fq_blocks", "int8", ((0.1, 0.5, 1 / 3, 0.007), (2.0, 0.37, 0.1, 1.0)), ((3, 1, -3, -5), (5, -1, 0, 3)),
          block_size={0: 4, 1: 16}, shape=(8, 64), profiles=FQ_PROFILES,
          description="FakeQuantize with ranges per block of 4 x 16 (ranges along two axes)"),
)
FQ_LEVEL_SETUPS: tuple[Setup, ...] = (
    Setup("fq_s0.37_z0", "int4<-7:7>", 0.37, 0, profiles=FQ_PROFILES,
          description="FakeQuantize, 15 levels (the narrowed 4-bit range)"),
)


def _openvino_fake_quantize_structured_cases(full: bool) -> Iterator[Case]:
    """uniform_quantize under the FakeQuantize profiles with ranges per axis and per block, and with 15 levels
    (uniform.md §2.8): each channel's / block's ties, near ties, range edges and specials, and random values."""
    for st in FQ_STRUCTURED_SETUPS:
        yield from _structured(st, full)
    for st in FQ_LEVEL_SETUPS:
        yield from _per_tensor(st, full)


# ---------------------------------------------------------------------------------------------------------
# OpenVINO FakeQuantize with general float output ranges (uniform.md §2.8, operation fake_quantize): the float32
# output y of FakeQuantize(x, il, ih, ol, oh, levels) under the rules of FAKE_QUANTIZE_RULES
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FakeQuantizeSetup:
    """One FakeQuantize: levels, input range (il, ih) and output range (ol, oh), each a float (per tensor) or a
    nested list broadcast against x of ``shape`` (per axis, blocks)."""

    label: str
    levels: int
    il: Any
    ih: Any
    ol: Any
    oh: Any
    shape: tuple[int, ...] | None = None  # None: per tensor (x 1-D, ranges of shape (1,))
    description: str = ""


FQ_OUTPUT_SETUPS: tuple[FakeQuantizeSetup, ...] = (
    FakeQuantizeSetup("fq_out_256_example", 256, -0.3, 25.2, 0.1, 25.5,
                      description="the spec's example (0.1..25.5): recomposed on a runtime input"),
    FakeQuantizeSetup("fq_out_255_neg", 255, -1.5, 2.25, -4.0, -0.5,
                      description="255 levels, a negative output range (recomposed through [0, 255])"),
    FakeQuantizeSetup("fq_out_256_reversed", 256, -2.0, 3.0, 1.75, -6.5,
                      description="256 levels, a reversed output range (ol > oh)"),
    FakeQuantizeSetup("fq_out_16_reversed", 16, 0.25, 7.0, 3.0, -3.0,
                      description="16 levels, a reversed output range crossing zero (recomposed through [0, 15])"),
    FakeQuantizeSetup("fq_out_15_same", 15, -0.37, 0.37, -0.37, 0.37,
                      description="15 levels with the output range equal to the input range (a quantize-dequantize)"),
    FakeQuantizeSetup("fq_out_3", 3, -1.0, 1.0, -0.1, 0.7, description="3 levels"),
    FakeQuantizeSetup("fq_out_7_reversed", 7, 0.5, 1.5, -2.0, -9.0,
                      description="7 levels, a negative reversed output range"),
    FakeQuantizeSetup("fq_out_17", 17, -3.0, -0.125, 0.0, 1.0, description="17 levels, a negative input range"),
    FakeQuantizeSetup("fq_out_257", 257, -0.1, 0.1, 10.0, 30.0, description="257 levels"),
    FakeQuantizeSetup("fq_out_1000", 1000, -12.0, 12.65, -1.0, 25.4, description="1000 levels"),
    FakeQuantizeSetup("fq_out_65536", 65536, -5.0, 5.0, -65.0, 1.0e3, description="65536 levels"),
    FakeQuantizeSetup("fq_out_256_axis0", 256, [[-0.3], [-1.5], [0.25], [-2.0]], [[25.2], [2.25], [7.0], [3.0]],
                      [[0.1], [-4.0], [3.0], [1.75]], [[25.5], [-0.5], [-3.0], [-6.5]], shape=(4, 96),
                      description="256 levels, ranges per row (axis 0 of a (4, 96) input)"),
    FakeQuantizeSetup("fq_out_1000_axis0", 1000, [[-1.0], [0.5], [-3.0]], [[1.0], [1.5], [-0.125]],
                      [[-0.1], [-2.0], [0.0]], [[0.7], [-9.0], [1.0]], shape=(3, 64),
                      description="1000 levels, ranges per row (axis 0 of a (3, 64) input)"),
    FakeQuantizeSetup("fq_out_255_blocks", 255, [[-1.0, 0.5], [-3.0, -0.3]], [[1.0, 1.5], [-0.125, 25.2]],
                      [[-0.1, -2.0], [0.0, 0.1]], [[0.7, -9.0], [1.0, 25.5]], shape=(2, 2, 48),
                      description="255 levels, ranges along two axes (a (2, 2, 1) grid of a (2, 2, 48) input)"),
    FakeQuantizeSetup("fq_out_256_axis2", 256, [[[[-0.3], [-1.5], [0.25], [-2.0]]]],
                      [[[[25.2], [2.25], [7.0], [3.0]]]], [[[[0.1], [-4.0], [3.0], [1.75]]]],
                      [[[[25.5], [-0.5], [-3.0], [-6.5]]]], shape=(2, 3, 4, 16),
                      description="256 levels, ranges along axis 2 of a (2, 3, 4, 16) input: on a runtime input "
                                  "the dequantize stays separate (C6)"),
)
FQ_OUTPUT_PROFILES = ("openvino_cpu", "openvino")


def _fq_output_points(il: np.float32, ih: np.float32, levels: int, label: str, n: int) -> np.ndarray:
    """n float32 inputs of one range: ties of both forms (il + (k + 1/2)(ih - il) / (levels - 1) and the t = k + 1/2
    of the precomputed scale and shift), level points, each +-1 ulp, and random values over [il - 1, ih + 1]; the
    first of them in order (at most 96 k's, the ends included), the rest random."""
    f32 = np.float32
    ks = np.arange(levels - 1, dtype=np.float64)
    if ks.size > 96:
        pick = np.unique(np.concatenate([ks[:8], ks[-8:], qrandom.below(label + "/k", 80, levels - 1)]))
        ks = pick.astype(np.float64)
    d = (np.float64(ih) - np.float64(il)) / (levels - 1)
    isc = f32(f32(levels - 1) / f32(ih - il))
    c = f32(il * isc)
    t = np.concatenate([(np.float64(il) + (ks + 0.5) * d).astype(f32), (np.float64(il) + ks * d).astype(f32),
                        ((ks + 0.5 + np.float64(c)) / np.float64(isc)).astype(f32)])
    pts = np.concatenate([t, np.nextafter(t, f32(np.inf)), np.nextafter(t, f32(-np.inf))])
    u = qrandom.bits(label + "/u", max(n - pts.size, 16), 24).astype(np.float64) / 2.0**24
    rnd = (np.float64(il) - 1 + u * (np.float64(ih) - np.float64(il) + 2)).astype(f32)
    return np.concatenate([pts, rnd])[: max(n, pts.size + 16)]


def _fq_output_inputs(st: FakeQuantizeSetup) -> dict[str, np.ndarray]:
    """x and the four ranges (float32) of a setup: per tensor x holds every point of _fq_output_points and the
    specials (il, ih, +-0, +-Inf, NaN); per axis / blocks each range cell gets its own points (cut to its size)."""
    f32 = np.float32
    lab = f"{FAMILY}/fake_quantize/{st.label}"
    rng = {k: np.asarray(getattr(st, k), np.float64).astype(f32) for k in ("il", "ih", "ol", "oh")}
    if st.shape is None:
        rng = {k: v.reshape(1) for k, v in rng.items()}
        il, ih = rng["il"][0], rng["ih"][0]
        x = np.concatenate([_fq_output_points(il, ih, st.levels, lab, 256),
                            np.array([il, ih, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], f32)])
        return {"x": x.astype(f32), **rng}
    shape = st.shape
    rng = {k: v.reshape(v.shape + (1,) * (len(shape) - v.ndim)) for k, v in rng.items()}
    rs = rng["il"].shape
    cell = tuple(s // r for s, r in zip(shape, rs, strict=True))
    x = np.empty(shape, f32)
    for idx in np.ndindex(*rs):
        sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, cell, strict=True))
        n = int(np.prod(cell))
        pts = _fq_output_points(rng["il"][idx], rng["ih"][idx], st.levels, f"{lab}/{idx}", n)
        pts = np.concatenate([pts, [np.inf, -np.inf, 0.0]]).astype(f32)
        k = qrandom.below(f"{lab}/{idx}/pick", n, pts.size)  # a random subset of the cell's points
        x[sl] = pts[k].reshape(cell)
    return {"x": x, **rng}


def _openvino_fake_quantize_output_cases(full: bool) -> Iterator[Case]:
    """fake_quantize cases (uniform.md §2.8): the float32 output y of FakeQuantize(x, input_low, input_high,
    output_low, output_high, levels) under FAKE_QUANTIZE_RULES (``openvino_cpu``: a runtime input; ``openvino``:
    a Constant), ``reference.fake_quantize``. Profiles giving the same y (bits) share a case; a profile whose
    rule refuses the layout (§2.8 C8) has none. NaN inputs: y unspecified."""
    from ...schemes.uniform.reference import fake_quantize

    del full  # the points do not grow with --full
    for st in FQ_OUTPUT_SETUPS:
        ins = _fq_output_inputs(st)
        x = ins["x"]
        outs: list[tuple[str, np.ndarray]] = []
        for prof in FQ_OUTPUT_PROFILES:
            try:
                y = fake_quantize(x, ins["il"], ins["ih"], ins["ol"], ins["oh"], st.levels, prof)
            except QrefError:
                continue
            outs.append((prof, y))
        unspec = np.isnan(x)
        groups: list[tuple[list[str], np.ndarray]] = []
        for prof, y in outs:
            yb = np.where(unspec, np.float32(0), y).view(np.uint32)
            for g in groups:
                if np.array_equal(np.where(unspec, np.float32(0), g[1]).view(np.uint32), yb):
                    g[0].append(prof)
                    break
            else:
                groups.append(([prof], y))
        for profs, y in groups:
            where = "per tensor" if st.shape is None else f"x {st.shape}"
            yield Case(
                id=f"{FAMILY}/fake_quantize/{st.label}/{profs[0]}", family=FAMILY, operation="fake_quantize",
                profile=profs[0], profiles=tuple(profs), params={"levels": st.levels},
                inputs={"x": x, "input_low": ins["il"], "input_high": ins["ih"], "output_low": ins["ol"],
                        "output_high": ins["oh"]},
                expected={"y": np.where(unspec, np.float32(0), y).astype(np.float32)},
                unspecified={"y": unspec} if unspec.any() else {},
                tags=("tie", "boundary", "special") if st.shape is None else ("tie", "boundary"),
                spec=("uniform.md §2.8",),
                description=f"FakeQuantize float32 -> float32, {where}: {st.description}; "
                            "input-step ties of both forms, level points, +-1 ulp, random values",
            )


__all__ = ["CALIBRATE_CATEGORIES", "CALIBRATE_SETUPS", "CATEGORY_TAGS", "CATEGORY_TEXT", "FAKE_GRAD_SETUPS",
           "FAKE_QUANTIZE_SETUPS", "FAMILY", "FLOAT_SETUPS", "FQ_LEVEL_SETUPS", "FQ_OUTPUT_PROFILES",
           "FQ_OUTPUT_SETUPS", "FQ_PROFILES", "FQ_SETUPS",
           "FQ_STRUCTURED_SETUPS", "HISTOGRAM_CATEGORIES", "HISTOGRAM_EDGE_SETUPS", "HISTOGRAM_SETUPS",
           "MLIR_FLOAT_SETUPS", "N_RANDOM", "N_RANDOM_FULL", "PROFILE_ORDER", "REQUANTIZE_PROFILES",
           "REQUANTIZE_SETUPS", "SETUPS", "SOURCES", "SPEC", "CalibrateSetup", "FakeQuantizeSetup", "RequantizeSetup",
           "Setup",
           "build_cases", "code_patterns", "storage_values"]
