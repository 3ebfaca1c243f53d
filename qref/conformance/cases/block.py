"""Block-scaled cases: MX (mxfp8/6/4, mxint8), NVFP4 and MLX affine groups under every block profile, their
dequantization, and the storage layouts of qref.pack / qref.unpack (docs/vectors.md, docs/spec/block.md).

For each scheme, source dtype and input category the builder quantizes under every profile that offers the
scheme (block.md §8: a combination the system lacks is an error, so it is left out); profiles that give the
same codes, scales, global scale and unspecified masks form one case (``profile`` = the first in
``PROFILE_ORDER``, ``profiles`` = all of them). Every input is 2-D with one block per row (blocks along the
last axis) unless the category says otherwise.

Ids: ``block/<scheme>/<src>/<category>/<profile>`` (quantize), ``block/nvfp4/<src>/global_<g>/<category>/
<profile>`` (two-level NVFP4 with a global scale input), ``block/mlx_affine/b<bits>_g<group>/<src>/<category>/
mlx``, ``block/<scheme>/<src>/dequantize/<dtype>/<profile>``, ``block/pack/<layout>/b<bits>`` and
``block/unpack/<layout>/b<bits>``.

Categories (amax = the largest |x| of a block, M = the element maximum, emax = floor(log2 M)):
  zero       all +0, all -0, alternating +-0 blocks
  tiny       scale exponents at and below -127: amax M 2^-127 (x1, x1.5), 2^-130, subnormal blocks, 2^-126
  huge       amax near the source dtype's maximum (float64 source: scale exponents above 127)
  nonfinite  a NaN, -NaN, +Inf, -Inf, NaN and Inf, all Inf inside otherwise finite blocks (block.md §10 rows)
  pow2       amax = 2^j and M 2^j, each -1, 0, +1 ulp of the source dtype (the floor / ceil rule boundaries)
  clamp      amax / 2^floor(log2 amax) in (M / 2^emax, 2): the scaled maximum lies above M and clamps (E4M3
             amax in (448, 512) 2^j, E2M1 amax above 1.5 2^j)
  ties       amax = M 2^j (an exact scale under every rule) and every midpoint between element values times 2^j,
             +-1 ulp, random signs
  random     seeded values over 4 binades, each block shifted by a random power of two in [2^-30, 2^30]
  random_bits  seeded bit patterns of the source dtype (every class)
  axis0      blocks along axis 0 (params {"axis": 0})
  pad        rows of 40 elements: a short last block (profiles that pad with zeros; the others reject it)
Affine groups (mlx_affine) use zero, nonfinite, huge, random, random_bits, constant (equal elements, one
group per value class). Quantize cases store 0 for codes marked unspecified (whatever placeholder the
implementation writes); scale bytes keep qref's documented choices (block.md §4.9: 255 for NaN / Inf blocks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from ...core.decode import decode
from ...errors import QrefError
from ...formats import FloatFormat, IntFormat
from ...interop.packing import pack, unpack
from ...schemes.base import QArray, scheme
from ...schemes.block import BlockScheme
from .. import random as qrandom
from ..case import Case

FAMILY = "block"
PROFILE_ORDER = ("ocp", "microxcaling", "torchao_floor", "torchao_rceil", "mlx", "jax", "nvidia",
                 "transformer_engine_reference")
MX_NAMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8")
#: schemes whose profiles compute in the input dtype (MLX, JAX): float16 / bfloat16 sources matter there
HALF_SOURCES = ("mxfp8_e4m3", "mxfp4", "nvfp4")
SOURCES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}
_NPDT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
         "bfloat16": np.dtype(ml_dtypes.bfloat16), "float64": np.dtype(np.float64)}
_UINT = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16, "float64": np.uint64}
SPEC = {
    "mx": "block.md §4.1", "rules": "block.md §4.2", "zero": "block.md §4.3", "range": "block.md §4.4",
    "nonfinite": "block.md §4.5", "scaling": "block.md §4.6", "elements": "block.md §4.7",
    "mx_dequant": "block.md §4.8", "open": "block.md §4.9", "nv": "block.md §5.2", "nv_dequant": "block.md §5.4",
    "affine": "block.md §6", "axes": "block.md §7", "profiles": "block.md §8", "pack": "block.md §9",
}
CATEGORY = {  # name -> (tags, spec keys, description)
    "zero": (("edge",), ("zero", "open"), "all +0, all -0 and alternating +-0 blocks"),
    "tiny": (("edge", "subnormal", "underflow"), ("rules", "range", "open"),
             "scale exponents at and below -127, subnormal blocks"),
    "huge": (("edge", "overflow"), ("rules", "range", "open"), "amax near the source dtype's largest value"),
    "nonfinite": (("edge", "special"), ("nonfinite", "open"), "NaN, -NaN, +Inf, -Inf inside finite blocks"),
    "pow2": (("edge", "boundary"), ("rules",), "amax = 2^j and M 2^j, -1, 0, +1 ulp"),
    "clamp": (("edge", "overflow", "boundary"), ("rules", "elements"),
              "scaled block maximum above the element maximum: clamps to +-M"),
    "ties": (("tie",), ("elements",), "amax = M 2^j, every element midpoint times 2^j, +-1 ulp"),
    "random": (("random",), ("mx",), "seeded values over 4 binades, blocks shifted by random powers of two"),
    "random_bits": (("random", "special"), ("mx", "nonfinite"), "seeded bit patterns of every class"),
    "axis0": (("random",), ("axes",), "blocks along axis 0"),
    "pad": (("edge",), ("axes",), "rows of 40 elements: a short last block padded with +0"),
    "constant": (("edge",), ("affine",), "groups of equal elements (w_max = w_min)"),
}
N_RANDOM_ROWS = 32
N_RANDOM_ROWS_FULL = 4096


# ---------------------------------------------------------------------------------------------------------
# input construction (float64 values, then rounded to the source dtype)
# ---------------------------------------------------------------------------------------------------------
def _cast(v: np.ndarray, src: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, dtype=np.float64).astype(_NPDT[src])


def _ulp_steps(v: np.ndarray, src: str, steps: tuple[int, ...]) -> np.ndarray:
    """Each value (of dtype src) moved by k ulp in magnitude, for each k (same sign; no zero crossing)."""
    a = _cast(v, src)
    width = _NPDT[src].itemsize * 8
    b = a.view(_UINT[src]).astype(np.uint64)
    sign = b & np.uint64(1 << (width - 1))
    mag = (b & np.uint64((1 << (width - 1)) - 1)).astype(np.int64)
    out = []
    for k in steps:
        m = mag + k
        ok = m >= 0
        out.append(((m[ok].astype(np.uint64) | sign[ok]).astype(_UINT[src])).view(_NPDT[src]))
    return np.concatenate(out)


def _fractions(label: str, n: int) -> np.ndarray:
    """n values in (-1, 1) with 20 random bits each (exact in every source dtype's float64 arithmetic)."""
    w = qrandom.bits(label, n, 21).astype(np.int64)
    sign = np.where(w & 1, -1.0, 1.0)
    return sign * ((w >> 1) + 1) / float(1 << 20)


def _rows_with_amax(amax: np.ndarray, k: int, label: str) -> np.ndarray:
    """One row per amax: element 0 is +-amax, the others amax * random fractions in (-1, 1)."""
    n = amax.size
    f = _fractions(label, n * k).reshape(n, k)
    f[:, 0] = np.where(f[:, 0] < 0, -1.0, 1.0)
    return amax[:, None] * f


def _element_values(s: BlockScheme) -> np.ndarray:
    """Positive finite element values (element_scale_exp applied), ascending, float64."""
    fmt = s.element
    if isinstance(fmt, IntFormat):
        v = np.arange(1, fmt.hi + 1, dtype=np.float64)
    else:
        assert isinstance(fmt, FloatFormat)
        codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
        v = decode(codes, fmt, dtype=np.float64)
        v = np.unique(v[np.isfinite(v) & (v > 0)])
    return v * 2.0**s.element_scale_exp


def _src_max_exp(src: str) -> int:
    return int(np.frexp(float(ml_dtypes.finfo(_NPDT[src]).max))[1]) - 1


def _mx_categories(s: BlockScheme, src: str, label: str, full: bool) -> dict[str, np.ndarray]:
    """Category name -> (rows, k) float64 inputs (before rounding to src)."""
    k = s.block_size
    M = float(s.element_max)
    emax = s.element_emax
    fi = ml_dtypes.finfo(_NPDT[src])
    tiny_n, tiny_s = float(fi.smallest_normal), float(fi.smallest_subnormal)
    out: dict[str, np.ndarray] = {}
    z = np.zeros((3, k))
    z[1] = -0.0
    z[2, 1::2] = -0.0
    out["zero"] = z
    t = [M * 2.0**-127, 1.5 * M * 2.0**-127, 2.0**-130, 2.0**-127, 2.0**-126, tiny_n, tiny_n * 0.75, tiny_s * 7,
         tiny_s, M * 2.0**-126]
    rows = _rows_with_amax(np.array(t), k, f"{label}/tiny")
    sub = np.full((2, k), tiny_s)
    sub[0, ::3] = -tiny_s * 3
    sub[1, :4] = [1e-40, 3e-39, -2e-40, 0.0]
    out["tiny"] = np.concatenate([rows, sub])
    ex = _src_max_exp(src)
    h = [float(fi.max), float(fi.max) / 2, 2.0**ex, M * 2.0 ** (ex - emax), 1.5 * 2.0**ex, 2.0 ** (ex - 1) * 1.75]
    if src == "float64":
        h = [2.0**200, 2.0 ** (128 + emax), 2.0 ** (127 + emax), M * 2.0**127, 1.9 * 2.0 ** (127 + emax)]
    out["huge"] = _rows_with_amax(np.array(h), k, f"{label}/huge")
    nf = _rows_with_amax(np.full(8, 3.0), k, f"{label}/nonfinite")
    nf[0, 3] = np.nan
    nf[1, 4] = -np.nan
    nf[2, 5] = np.inf
    nf[3, 6] = -np.inf
    nf[4, 1], nf[4, 2] = np.nan, np.inf
    nf[5, :] = np.inf
    nf[6, :3] = [np.nan, 1.0, 0.0]
    nf[6, 3:] = 0.0
    nf[7, :3] = [np.inf, 1.0, 0.0]
    nf[7, 3:] = 0.0
    out["nonfinite"] = nf
    js = (-10, -1, 0, 3, 20) if src != "float16" else (-10, -1, 0, 3, 8)
    base = np.array([2.0**j for j in js] + [M * 2.0**j for j in js])
    base = _cast(base, src)
    amax = np.concatenate([base, _ulp_steps(base, src, (-1, 1))]).astype(np.float64)
    amax = amax[np.isfinite(amax) & (amax > 0)]
    out["pow2"] = _rows_with_amax(amax, k, f"{label}/pow2")
    lo = M / 2.0**emax
    fr = [lo * (1 + 2.0**-20), (lo + 2) / 2, 1.9, 2 * (1 - 2.0**-20)]
    jj = (-20, 0, 7) if src != "float16" else (-8, 0, 4)
    cl = np.array([f * 2.0 ** (emax + j) for j in jj for f in fr])
    out["clamp"] = _rows_with_amax(cl, k, f"{label}/clamp")
    vals = _element_values(s)
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids, [vals[0] / 2]])
    tie_rows = []
    for j in ((0, -3, 5) if src != "float16" else (0, -3, 2)):
        p = _cast(pts * 2.0**j, src)
        p = np.concatenate([p, _ulp_steps(_cast(mids * 2.0**j, src), src, (-1, 1))]).astype(np.float64)
        n_rows = -(-p.size // (k - 1))
        body = np.resize(p, n_rows * (k - 1)).reshape(n_rows, k - 1)
        sign = np.where(qrandom.bits(f"{label}/ties/{j}", body.size, 1).reshape(body.shape) == 1, -1.0, 1.0)
        top = np.full((n_rows, 1), M * 2.0**j)
        tie_rows.append(np.concatenate([top, body * sign], axis=1))
    out["ties"] = np.concatenate(tie_rows)
    n = N_RANDOM_ROWS_FULL if full else N_RANDOM_ROWS
    r = qrandom.floats_in_binades(f"{label}/random", n * k, "float64", -2, 1).view(np.float64).reshape(n, k)
    shift = qrandom.below(f"{label}/random/shift", n, 61) - 30
    if src == "float16":
        shift = shift // 4
    out["random"] = r * np.exp2(shift.astype(np.float64))[:, None]
    return out


def _random_bits(src: str, label: str, rows: int, k: int) -> np.ndarray:
    if src == "float64":
        return qrandom.float_bits(label, rows * k, "float64").view(np.float64).reshape(rows, k)
    return qrandom.float_bits(label, rows * k, src).view(_NPDT[src]).reshape(rows, k)


# ---------------------------------------------------------------------------------------------------------
# quantize cases
# ---------------------------------------------------------------------------------------------------------
def _candidates(name: str, **kw: Any) -> list[tuple[str, BlockScheme]]:
    out = []
    for p in PROFILE_ORDER:
        try:
            sch = scheme(name, profile=p, **kw)
        except QrefError:
            continue
        assert isinstance(sch, BlockScheme)
        out.append((p, sch))
    return out


def _outputs(q: QArray) -> dict[str, np.ndarray]:
    out = {"codes": np.asarray(q.codes), "scales": np.asarray(q.scales)}
    if q.biases is not None:
        out["biases"] = np.asarray(q.biases)
    if q.global_scale is not None:
        g = np.asarray(q.global_scale, dtype=np.float32)
        out["global_scale"] = g.reshape(1) if g.size == 1 else g  # per block: an outer scale per group (§5.2.1)
    return out


def _key(arrs: dict[str, np.ndarray]) -> bytes:
    return b"|".join(k.encode() + str(v.dtype).encode() + str(v.shape).encode() + np.ascontiguousarray(v).tobytes()
                     for k, v in sorted(arrs.items()))


def _quantize_group(cands: list[tuple[str, BlockScheme]], x: np.ndarray, axis: int = -1,
                    global_scale: np.ndarray | None = None
                    ) -> list[tuple[str, BlockScheme, QArray, dict[str, np.ndarray], dict[str, np.ndarray], list[str]]]:
    """Quantize under every candidate; group by identical outputs and masks."""
    groups: dict[bytes, list[Any]] = {}
    for p, sch in cands:
        try:
            with np.errstate(invalid="ignore", over="ignore"):  # signalling NaN inputs (random_bits)
                q = sch.quantize(x, axis=axis, global_scale=global_scale)
        except QrefError:
            continue  # the system rejects this input (padding, dimensions, a global scale)
        exp = _outputs(q)
        unspec = {"codes": np.asarray(q.unspecified, dtype=bool),
                  "scales": np.asarray(q.meta["scales_unspecified"], dtype=bool)}
        unspec = {k: v for k, v in unspec.items() if v.any()}
        if "codes" in unspec:  # unspecified codes hold 0, not the implementation's placeholder
            exp["codes"] = np.where(unspec["codes"], 0, exp["codes"]).astype(exp["codes"].dtype)
        key = _key(exp) + b"#" + _key(unspec)
        if key in groups:
            groups[key][5].append(p)
        else:
            groups[key] = [p, sch, q, exp, unspec, [p]]
    return [tuple(g) for g in groups.values()]  # type: ignore[misc]


def _formats(sch: BlockScheme) -> dict[str, str]:
    f = {"codes": sch.element.name}
    if sch.scale_format is not None:
        f["scales"] = sch.scale_format.name
    return f


def _quantize_cases(prefix: str, cat: str, x: np.ndarray, cands: list[tuple[str, BlockScheme]], *,
                    axis: int = -1, global_scale: np.ndarray | None = None, what: str = "") -> Iterator[Case]:
    tags, spec_keys, text = CATEGORY[cat]
    for rep, sch, _q, exp, unspec, members in _quantize_group(cands, x, axis, global_scale):
        inputs = {"x": x}
        if global_scale is not None:
            inputs["global_scale"] = np.asarray(global_scale, dtype=np.float32).reshape(1)
            g_out = exp.pop("global_scale", None)  # a given global scale is passed through unchanged
            assert g_out is None or g_out.tobytes() == inputs["global_scale"].tobytes()
        spec = [SPEC[k] for k in spec_keys]
        spec += [SPEC["nv"]] if sch.kind == "float_scale" else [SPEC["affine"]] if sch.kind == "affine" else []
        spec.append(SPEC["profiles"])
        yield Case(
            id=f"{prefix}/{cat}/{rep}", family=FAMILY, operation="block_quantize", scheme=sch, profile=rep,
            params={"axis": axis} if axis != -1 else {}, inputs=inputs, expected=exp, unspecified=unspec,
            array_formats=_formats(sch), tags=(*tags, "profile"), spec=tuple(dict.fromkeys(spec)),
            profiles=tuple(members),
            description=f"block_quantize {x.dtype.name} {what or sch.name}: {text}",
        )


E8M0_BYTES = (0, 1, 2, 3, 100, 117, 126, 127, 128, 137, 200, 252, 253, 254, 255)


def _code_grid(sch: BlockScheme) -> tuple[np.ndarray, np.ndarray]:
    """Every element code under a set of scale codes: (codes (rows, k), scales (rows, 1)); MX: the E8M0 bytes
    above (0, 1, around 127, 254, the NaN 255), float scales: every scale code."""
    k = sch.block_size
    n_codes = 1 << sch.element.bits
    byts = np.arange(256) if sch.kind == "float_scale" else np.array(E8M0_BYTES)
    per = -(-n_codes // k)  # rows that hold every code once
    codes = np.resize(np.arange(n_codes), per * k).reshape(per, k)
    codes = np.tile(codes, (byts.size, 1)).astype(np.uint8)
    scales = np.repeat(byts, per).astype(np.uint8)[:, None]
    return codes, scales


def _dequantize_cases(prefix: str, cands: list[tuple[str, BlockScheme]], x: np.ndarray, src: str,
                      global_scale: np.ndarray | None = None) -> Iterator[Case]:
    """Dequantize, under every candidate profile, (a) every element code under a set of scale codes (MX, NVFP4)
    and (b) the codes and scales every candidate's quantize gives for ``x`` (all categories, rows stacked);
    to float32 and, for half-precision sources, to the source dtype; grouped by identical values."""
    out_dtypes = ["float32"] + ([src] if src in ("float16", "bfloat16") else [])
    ref = cands[0][1]
    sets: list[tuple[str, dict[str, np.ndarray], str]] = []
    if ref.kind != "affine":
        c, s = _code_grid(ref)
        sets.append(("codes", {"codes": c, "scales": s}, "every element code under scale codes " +
                     ("0..255" if ref.kind == "float_scale" else "0, 1, 2, 3, 100, ..., 254, 255")))
    parts: dict[bytes, dict[str, np.ndarray]] = {}
    for _, s0 in cands:
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                q0 = s0.quantize(x, global_scale=global_scale)
        except QrefError:
            continue
        part = {"codes": np.asarray(q0.codes), "scales": np.asarray(q0.scales)}
        if q0.biases is not None:
            part["biases"] = np.asarray(q0.biases)
        parts.setdefault(_key(part), part)
    stacked = {k: np.concatenate([p[k] for p in parts.values()]) for k in next(iter(parts.values()))}
    rows = np.concatenate([np.ascontiguousarray(v).view(np.uint8).reshape(v.shape[0], -1)
                           for v in stacked.values()], axis=1)
    _, first = np.unique(rows, axis=0, return_index=True)  # each distinct block once, in first-seen order
    keep = np.sort(first)
    stacked = {k: v[keep] for k, v in stacked.items()}
    sets.append(("quantized", stacked, "the codes and scales of every profile's quantize of every category"))
    for set_name, inputs, text in sets:
        if global_scale is not None:
            inputs = {**inputs, "global_scale": np.asarray(global_scale, dtype=np.float32).reshape(1)}
        for dt in out_dtypes:
            groups: dict[bytes, list[Any]] = {}
            for p, sch in cands:
                if sch.kind == "float_scale" and sch.global_scale_rule == "amax_encode_reciprocal" and \
                        global_scale is None:
                    continue  # TransformerEngine always dequantizes with the global amax
                q = QArray(codes=inputs["codes"], scheme=sch, scales=inputs["scales"], biases=inputs.get("biases"),
                           global_scale=global_scale, axis=1)
                with np.errstate(invalid="ignore", over="ignore"):
                    y = sch.dequantize(q, dtype=_NPDT[dt])
                k = _key({"y": y})
                if k in groups:
                    groups[k][3].append(p)
                else:
                    groups[k] = [p, sch, y, [p]]
            for rep, sch, y, members in groups.values():
                spec = (SPEC["mx_dequant"] if sch.kind == "mx" else SPEC["nv_dequant"] if sch.kind == "float_scale"
                        else SPEC["affine"], SPEC["profiles"])
                yield Case(
                    id=f"{prefix}/dequantize/{set_name}/{dt}/{rep}", family=FAMILY, operation="block_dequantize",
                    scheme=sch, profile=rep, params={"dtype": dt, "axis": 1}, inputs=inputs, expected={"y": y},
                    array_formats=_formats(sch), tags=("values", "edge", "profile"), spec=spec,
                    profiles=tuple(members), description=f"block_dequantize to {dt}: {text}",
                )


def _mx_cases(name: str, src_key: str, full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    cands = _candidates(name)
    if src_key == "f64":
        cands = [c for c in cands if c[0] == "ocp"]  # float64 is exact only where the arithmetic is exact
    ref = cands[0][1]
    k = ref.block_size
    prefix = f"{FAMILY}/{name}/{src_key}"
    cats = _mx_categories(ref, src, prefix, full)
    if src_key == "f64":
        cats = {c: cats[c] for c in ("tiny", "huge", "pow2", "ties")}
    xs = {c: _cast(v, src) for c, v in cats.items()}
    if src_key != "f64":
        xs["random_bits"] = _random_bits(src, f"{prefix}/random_bits", 16, k)
    for cat, x in xs.items():
        yield from _quantize_cases(prefix, cat, x, cands)
    if src_key == "f32":
        r = _cast(cats["random"][:k].T[:, :4], src)  # (k, 4): blocks along axis 0
        yield from _quantize_cases(prefix, "axis0", np.ascontiguousarray(r), cands, axis=0)
        rows40 = _cast(cats["random"].reshape(-1)[:120].reshape(3, 40), src)  # 40 = k + 8 or 2k + 8
        yield from _quantize_cases(prefix, "pad", rows40, cands)
    if src_key != "f64":
        allx = np.concatenate([xs[c] for c in xs])
        yield from _dequantize_cases(prefix, cands, allx, src)


def _nvfp4_cases(src_key: str, full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    cands = _candidates("nvfp4")
    ref = next(s for p, s in cands if p == "nvidia")
    prefix = f"{FAMILY}/nvfp4/{src_key}"
    cats = _mx_categories(ref, src, prefix, full)
    xs = {c: _cast(v, src) for c, v in cats.items()}
    xs["random_bits"] = _random_bits(src, f"{prefix}/random_bits", 16, ref.block_size)
    for cat, x in xs.items():
        yield from _quantize_cases(prefix, cat, x, cands)
    two_level = [c for c in cands if c[1].global_scale_rule != "exact"]
    for g_label, cats_g in (("0.37", ("random", "ties", "nonfinite", "tiny", "zero")), ("amax", ("random", "ties",
                                                                                                 "huge"))):
        for cat in cats_g:
            x = xs[cat]
            if g_label == "amax":
                a = np.abs(x.astype(np.float64))
                g = np.float32(np.max(a[np.isfinite(a)]))
            else:
                g = np.float32(0.37)
            yield from _quantize_cases(f"{prefix}/global_{g_label}", cat, x, two_level, global_scale=np.float32(g),
                                       what="nvfp4 two-level")
    allx = np.concatenate([xs[c] for c in xs])
    yield from _dequantize_cases(prefix, cands, allx, src)
    yield from _dequantize_cases(f"{prefix}/global_0.37", two_level, allx, src, global_scale=np.float32(0.37))


def _affine_categories(k: int, src: str, label: str, full: bool) -> dict[str, np.ndarray]:
    fi = ml_dtypes.finfo(_NPDT[src])
    out: dict[str, np.ndarray] = {}
    z = np.zeros((3, k))
    z[1] = -0.0
    z[2, 1::2] = -0.0
    out["zero"] = z
    c = np.array([[v] * k for v in (1.0, -2.5, 1e-30, 7.0, -0.0, float(fi.smallest_subnormal))])
    out["constant"] = c
    big = float(fi.max)
    h = _rows_with_amax(np.array([big, big / 2, 1e30 if src != "float16" else 6e4, 3e38 if src != "float16"
                                  else 3e4]), k, f"{label}/huge")
    h[0, 1] = -big
    out["huge"] = h
    nf = _rows_with_amax(np.full(5, 3.0), k, f"{label}/nonfinite")
    nf[0, 3] = np.nan
    nf[1, 4] = np.inf
    nf[2, 5] = -np.inf
    nf[3, :] = np.inf
    nf[4, 1], nf[4, 2] = np.nan, np.inf
    out["nonfinite"] = nf
    n = N_RANDOM_ROWS_FULL if full else N_RANDOM_ROWS
    r = qrandom.floats_in_binades(f"{label}/random", n * k, "float64", -3, 1).view(np.float64).reshape(n, k)
    shift = qrandom.below(f"{label}/random/shift", n, 21) - 10
    off = _fractions(f"{label}/random/offset", n)
    out["random"] = (r + 2 * off[:, None]) * np.exp2(shift.astype(np.float64))[:, None]
    return out


def _affine_cases(bits: int, group: int, src_key: str, full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    cands = _candidates("mlx_affine", bits=bits, group_size=group)
    prefix = f"{FAMILY}/mlx_affine/b{bits}_g{group}/{src_key}"
    cats = _affine_categories(group, src, prefix, full)
    xs = {c: _cast(v, src) for c, v in cats.items()}
    xs["random_bits"] = _random_bits(src, f"{prefix}/random_bits", 8, group)
    for cat, x in xs.items():
        yield from _quantize_cases(prefix, cat, x, cands, what=f"mlx_affine bits={bits} group={group}")
    allx = np.concatenate([xs[c] for c in xs if c != "random_bits"])
    yield from _dequantize_cases(prefix, cands, allx, src)


# ---------------------------------------------------------------------------------------------------------
# packing layouts (block.md §9)
# ---------------------------------------------------------------------------------------------------------
PACK_BITS = {"lsb_first": (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32), "msb_first": (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32),
             "mlx": (1, 2, 3, 4, 5, 6, 8), "nibble_low_first": (4,), "nibble_high_first": (4,)}


def _pack_cases() -> Iterator[Case]:
    for layout, widths in PACK_BITS.items():
        for b in widths:
            label = f"{FAMILY}/pack/{layout}/b{b}"
            rows, n = 3, 37  # 37 codes a row: the last container is partly padding
            codes = qrandom.bits(label, rows * n, b).reshape(rows, n)
            codes[0, :4] = [0, (1 << b) - 1, 1, 1 << (b - 1)]
            dt = np.uint8 if b <= 8 else np.uint16 if b <= 16 else np.uint32
            codes = codes.astype(dt)
            packed = pack(codes, layout, bits=b)
            yield Case(
                id=label, family=FAMILY, operation="pack", params={"layout": layout, "bits": b, "axis": -1},
                inputs={"codes": codes}, expected={"packed": packed}, tags=("values",), spec=(SPEC["pack"],),
                description=f"pack {b}-bit codes, rows of {n}, in the {layout} layout (the tail of each row padded "
                            "with zero bits)",
            )
            back = unpack(packed, layout, bits=b, count=n)
            assert isinstance(back, np.ndarray)
            yield Case(
                id=f"{FAMILY}/unpack/{layout}/b{b}", family=FAMILY, operation="unpack",
                params={"layout": layout, "bits": b, "axis": -1, "count": n}, inputs={"packed": packed},
                expected={"codes": back}, tags=("values",), spec=(SPEC["pack"],),
                description=f"unpack {n} {b}-bit codes a row from the {layout} layout",
            )
    for name in ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4"):
        sch = scheme(name, profile="ocp")
        label = f"{FAMILY}/pack/ocp_mx_block/{name}"
        x = qrandom.floats_in_binades(label, 2 * 64, "float32", -6, 6).view(np.float32).reshape(2, 64)
        q = sch.quantize(x)
        b = sch.element.bits
        packed = pack(q, "ocp_mx_block")
        yield Case(
            id=label, family=FAMILY, operation="pack", scheme=sch, profile="ocp",
            params={"layout": "ocp_mx_block", "bits": b, "axis": -1},
            inputs={"codes": np.asarray(q.codes), "scales": np.asarray(q.scales)}, expected={"packed": packed},
            array_formats={"codes": sch.element.name, "scales": "float8_e8m0fnu"}, tags=("values",),
            spec=(SPEC["pack"],), description=f"pack {name} blocks as X | P_1 ... P_32 (msb_first, block.md §9)",
        )
        codes, scales = unpack(packed, "ocp_mx_block", bits=b, block_size=sch.block_size)  # type: ignore[misc]
        yield Case(
            id=f"{FAMILY}/unpack/ocp_mx_block/{name}", family=FAMILY, operation="unpack", scheme=sch,
            profile="ocp", params={"layout": "ocp_mx_block", "bits": b, "axis": -1, "block_size": sch.block_size},
            inputs={"packed": packed}, expected={"codes": codes, "scales": scales},
            array_formats={"codes": sch.element.name, "scales": "float8_e8m0fnu"}, tags=("values",),
            spec=(SPEC["pack"],), description=f"unpack {name} blocks from the ocp_mx_block layout",
        )


# ---------------------------------------------------------------------------------------------------------
# N-D tiles (block.md §12) and stochastic element rounding (block.md §13)
# ---------------------------------------------------------------------------------------------------------
#: (scheme name, profile, block_shape, source, input shape, tiled axes or None, options)
TILES: tuple[tuple[str, str, tuple[int, ...], str, tuple[int, ...], tuple[int, ...] | None, dict[str, Any]], ...] = (
    ("mxfp8_e4m3", "nvidia", (32, 32), "f32", (64, 96), None, {}),
    ("mxfp8_e4m3", "ocp", (8, 4), "f32", (20, 30), None, {}),  # partial tiles along both axes (padded with +0)
    ("mxfp8_e4m3", "ocp", (8, 4), "bf16", (16, 16), (1, 0), {}),  # the tile's first extent along axis 1
    ("mxfp4", "ocp", (4, 8), "f32", (16, 32), None, {}),
    ("mxfp4", "torchao_floor", (2, 4, 4), "f32", (4, 8, 12), None, {}),  # rank-3 tiles
    ("mxint8", "ocp", (4, 8), "f32", (8, 16), None, {}),
    ("nvfp4", "nvidia", (16, 16), "f32", (32, 48), None, {}),  # the NVFP4 recipe's weight tiles
    ("nvfp4", "nvidia", (1, 16), "bf16", (8, 48), None, {}),
    ("mlx_affine", "mlx", (2, 32), "f32", (8, 64), None, {"bits": 4}),
)
#: (scheme name, profile, rounding, N, sources, options): stochastic element rounding (block.md §13)
STOCHASTIC_BLOCKS: tuple[tuple[str, str, str, int, tuple[str, ...], dict[str, Any]], ...] = (
    ("mxfp8_e4m3", "ocp", "stochastic_a", 8, ("f32",), {}),
    ("mxfp8_e4m3", "ocp", "stochastic_b", 4, ("f32",), {}),
    ("mxfp4", "ocp", "stochastic_a", 8, ("f32", "bf16"), {}),
    ("mxfp4", "ocp", "stochastic_c", 8, ("f32",), {}),
    ("mxint8", "ocp", "stochastic_a", 6, ("f32",), {}),
    ("mxfp4", "torchao_floor", "stochastic_a", 8, ("f32",), {}),
    ("nvfp4", "nvidia", "stochastic_a", 8, ("f32", "bf16"), {}),
    ("nvfp4", "ocp", "stochastic_a", 8, ("f32",), {}),
    # microxcaling's round="dither": torch.rand_like's 24 / 8 random bits (block.md §13.3)
    ("mxfp8_e4m3", "microxcaling", "stochastic_a", 24, ("f32",), {}),
    ("mxfp4", "microxcaling", "stochastic_a", 24, ("f32",), {}),
    ("mxfp4", "microxcaling", "stochastic_a", 8, ("bf16",), {}),
    ("mlx_affine", "mlx", "stochastic_a", 8, ("f32",), {"bits": 4, "group_size": 64}),
)
#: random bits at and around the threshold of a midpoint (eta = 1/2 +- 1 ulp): R* = 2^(N-1) or 2^(N-1) + 1
_TIE_R = (-1, 0, 1, 2, None)


def _block_outputs(q: QArray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(expected arrays with unspecified codes stored as 0, unspecified masks that mark something)."""
    exp = _outputs(q)
    unspec = {"codes": np.asarray(q.unspecified, dtype=bool),
              "scales": np.asarray(q.meta["scales_unspecified"], dtype=bool)}
    unspec = {k: v for k, v in unspec.items() if v.any()}
    if "codes" in unspec:
        exp["codes"] = np.where(unspec["codes"], 0, exp["codes"]).astype(exp["codes"].dtype)
    return exp, unspec


def _tile_cases() -> Iterator[Case]:
    for name, profile, shape, src_key, in_shape, axes, opts in TILES:
        src = SOURCES[src_key]
        sch = scheme(name, profile=profile, block_shape=shape, **({"pad": "zero"} if profile == "ocp" else {}),
                     **opts)
        size = int(np.prod(in_shape))
        label = f"{FAMILY}/tiles/{name}/{'x'.join(map(str, shape))}/{src_key}/{profile}"
        r = qrandom.floats_in_binades(f"{label}/random", size, "float64", -2, 1).view(np.float64)
        shift = qrandom.below(f"{label}/random/shift", size // 16 + 1, 17) - 8  # neighbouring tiles differ
        x = _cast(r * np.exp2(np.repeat(shift, 16)[:size].astype(np.float64)), src).reshape(in_shape)
        edge = x.copy()
        flat = edge.reshape(-1)
        specials = np.array([np.nan, np.inf, -0.0, 0.0, -np.inf, 1e-30, 3.0])
        flat[np.linspace(0, size - 1, specials.size).astype(np.int64)] = _cast(specials, src)
        tiled = axes if axes is not None else tuple(range(len(in_shape) - len(shape), len(in_shape)))
        first = [slice(0, 1)] * len(in_shape)  # the first tile (and the first index of the untiled axes)
        for a_, t in zip(tiled, shape):
            first[a_] = slice(0, t)
        edge[tuple(first)] = 0.0  # an all-zero tile
        params: dict[str, Any] = {"block_shape": list(shape)}
        if axes is not None:
            params["axes"] = list(axes)
        tshape = " x ".join(map(str, shape))
        for cat, xv, tags in (("random", x, ("random",)), ("edge", edge, ("edge", "special"))):
            with np.errstate(all="ignore"):
                q = sch.quantize(xv, axes=axes)
            exp, unspec = _block_outputs(q)
            yield Case(
                id=f"{label}/{cat}", family=FAMILY, operation="tile_quantize", scheme=sch, profile=profile,
                params=params, inputs={"x": xv}, expected=exp, unspecified=unspec, array_formats=_formats(sch.block),
                tags=(*tags, "profile"), spec=("block.md §12", SPEC["profiles"]), profiles=(profile,),
                description=f"tile_quantize {src} {name} in {tshape} tiles over axes "
                            f"{list(axes) if axes is not None else 'the last ' + str(len(shape))} ({profile}): "
                            + ("seeded values, tiles shifted by random powers of two" if cat == "random" else
                               "NaN, +-Inf, +-0, tiny values and an all-zero tile"),
            )


def _stochastic_block_cases() -> Iterator[Case]:
    for name, profile, mode, n, sources, opts in STOCHASTIC_BLOCKS:
        for src_key in sources:
            src = SOURCES[src_key]
            sch = scheme(name, profile=profile, rounding=mode, stochastic_bits=n, **opts)
            assert isinstance(sch, BlockScheme)
            label = f"{FAMILY}/stochastic/{name}/{src_key}/{mode}_n{n}/{profile}"
            k = sch.block_size
            if sch.kind == "affine":
                cats = _affine_categories(k, src, label, False)
                cats = {c: cats[c] for c in ("random", "nonfinite", "zero", "constant")}
            else:
                cats = _mx_categories(sch, src, label, False)
                cats = {c: cats[c] for c in ("random", "ties", "tiny", "nonfinite", "zero")}
            for cat, v in cats.items():
                x = _cast(v, src)
                if cat == "ties":  # R at and around the thresholds of midpoints (+-1 ulp): 2^(N-1) - 1 .. + 2
                    half = 1 << (n - 1)
                    choice = [half + d if d is not None else (1 << n) - 1 for d in _TIE_R] + [0]
                    rb = np.resize(np.array(choice, dtype=np.uint64), x.size).reshape(x.shape)
                else:
                    rb = qrandom.bits(f"{label}/{cat}/r", x.size, n).reshape(x.shape)
                rb = rb.astype(np.uint32)
                with np.errstate(all="ignore"):
                    q = sch.quantize(x, random_bits=rb)
                exp, unspec = _block_outputs(q)
                tags, spec_keys, text = CATEGORY[cat]
                spec = ["block.md §13", *(SPEC[s] for s in spec_keys), SPEC["profiles"]]
                yield Case(
                    id=f"{label}/{cat}", family=FAMILY, operation="stochastic_quantize", scheme=sch,
                    profile=profile, inputs={"x": x, "random_bits": rb}, expected=exp, unspecified=unspec,
                    array_formats=_formats(sch), tags=(*tags, "stochastic", "profile"),
                    spec=tuple(dict.fromkeys(spec)), profiles=(profile,),
                    description=f"stochastic_quantize {src} {name} ({profile}, {mode} with N = {n}; random_bits[i] "
                                f"rounds x[i]): {text}",
                )


AFFINE = [(b, 64) for b in (1, 2, 3, 4, 5, 6, 8)] + [(4, 32), (4, 128), (8, 32), (2, 128)]

# the scale rules and scale formats of 2025-26 (block.md §4.2, §5.2.1, §8), appended after the v1 cases
CASES_2026 = (  # (scheme name, block size, id segment, profiles)
    ("mxfp8_e4m3", 32, "mxfp8_e4m3", ("trainium3", "gfx950")),
    ("mxfp4", 32, "mxfp4", ("trainium3", "gfx950")),
    ("mxfp8_e4m3", 128, "mxfp8_e4m3_k128", ("deepseek_ue8m0",)),
    ("nvfp4_ue5m3", 16, "nvfp4_ue5m3", ("ocp", "nvidia")),
    ("nvfp4_ue4m3", 16, "nvfp4_ue4m3", ("nvidia",)),
    ("nvfp4", 16, "nvfp4_outer", ("transformer_engine_nvfp4_per_token", "transformer_engine_nvfp4_1x64")),
)


def _rows_of(x: np.ndarray, n: int) -> np.ndarray:
    """The rows of x flattened and cut into rows of n (the tail that does not fill a row dropped)."""
    flat = x.reshape(-1)
    return np.ascontiguousarray(flat[: flat.size // n * n].reshape(-1, n))


def _scale_rule_cases_2026(full: bool) -> Iterator[Case]:
    """float32 cases of the 2025-26 rules: each profile alone (its own candidate list), the MX categories of
    §4 (rows of 128 for the per-row and 1 x 64 outer scales), and the dequantize sets."""
    for name, k, seg, profs in CASES_2026:
        cands = [(p, sch) for p in profs if isinstance(sch := scheme(name, profile=p, block_size=k), BlockScheme)]
        ref = cands[0][1]
        prefix = f"{FAMILY}/{seg}/f32"
        cats = _mx_categories(ref, "float32", prefix, full)
        xs = {c: _cast(v, "float32") for c, v in cats.items()}
        if ref.global_scale_granularity != "tensor":
            xs = {c: _rows_of(v, 128) for c, v in xs.items() if v.size >= 128}
        for cat, x in xs.items():
            yield from _quantize_cases(prefix, cat, x, cands)
        allx = np.concatenate([v.reshape(-1, 128 if ref.global_scale_granularity != "tensor" else k)
                               for v in xs.values()])
        if ref.global_scale_granularity == "tensor":
            yield from _dequantize_cases(prefix, cands, allx, "float32")


def build_cases(full: bool) -> Iterator[Case]:
    """Every block case (module docstring); ``full`` adds 4096 random blocks per category."""
    for name in MX_NAMES:
        for src_key in ("f32", *(("f16", "bf16") if name in HALF_SOURCES else ()), "f64"):
            yield from _mx_cases(name, src_key, full)
    for src_key in ("f32", "f16", "bf16"):
        yield from _nvfp4_cases(src_key, full)
    for bits, group in AFFINE:
        yield from _affine_cases(bits, group, "f32", full)
    for bits, group in ((4, 64), (8, 64)):
        for src_key in ("f16", "bf16"):
            yield from _affine_cases(bits, group, src_key, full)
    yield from _pack_cases()
    yield from _tile_cases()
    yield from _stochastic_block_cases()
    yield from _scale_rule_cases_2026(full)


__all__ = ["build_cases"]
