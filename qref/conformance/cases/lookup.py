"""Lookup-table cases: NF4, AF4, bitsandbytes FP4 and the 8-bit dynamic map under the lookup profiles, double
quantization, dequantization and an MLIR quantile type (docs/vectors.md, docs/spec/lut.md).

Candidates are the (table, profile) pairs a real system has (lut.md §6): every table under ``spec`` and
``bitsandbytes`` (af4 under bitsandbytes' kernel semantics), NF4 under ``torchao``, ``openvino`` and ``qwix``;
plus ``bitsandbytes_dq`` (bitsandbytes with ``double_quant=True``, compress_statistics). torchao always double
quantizes and needs 256 blocks, so it takes part in the ``large`` category only. Candidates that give identical
outputs form one case (``profile`` = the first in ``CANDIDATES`` order, ``profiles`` = all of them). Block size:
64 for 4-bit tables, 256 for dynamic8 (``large``: 4096, bitsandbytes' default for quantize_blockwise).

Ids: ``lookup/<scheme>/b<block>/<src>/<category>/<candidate>``, ``lookup/<scheme>/b<block>/<src>/dequantize/
<set>/<dtype>/<candidate>``, ``lookup/quantile/<label>/...`` (static scales, lut.md §7),
``lookup/stochastic/<scheme>/b<block>/<src>/<mode>_n<N>/<profile>/<category>`` (stochastic rounding, lut.md §3.5:
inputs x and random_bits, N-bit integers; at the midpoints R = 2^(N-1) - 1 .. 2^(N-1) + 2, 2^N - 1 and 0 in turn).

Categories (1-D inputs of the source dtype):
  midpoints         every entry, exact midpoint (or its two float32 neighbours), float32 midpoint, each +-1 ulp,
                    both signs, 0, -0, +-1, laid in blocks whose first element is 1.0 (absmax exactly 1)
  midpoints_scaled  the same points times 3.7 (absmax 3.7: x / a and x * fl(1 / a) differ)
  zero              an all +0 block, an all -0 block and an all-zero partial last block
  partial           two blocks and a partial block of 7 random values
  special           blocks holding NaN, +Inf, -Inf, NaN and Inf, a subnormal absmax (1e-40), an absmax below
                    sqrt(float32 tiny) (1e-20), -0 among values
  random            seeded values over 4 binades, each block shifted by a random power of two
  axis2d            a (4, 96) matrix: row-major flattening (spec, bitsandbytes) vs blocks along the last axis
                    (openvino, qwix: a partial block per row)
  large             256 blocks (torchao's minimum): the finite categories above plus random blocks
  large_special     256 blocks with the special blocks (float32 source only)
Double-quantized outputs: ``scales`` (the first-level absmax), ``dq_codes`` (uint8 inner codes; torchao's int8
codes as two's complement bytes), ``dq_scales`` (float32), ``dq_offset`` (float32, shape (1,): the exact mean of
the block scales rounded once, lut.md §5.3). Codes marked unspecified are stored as 0 (whatever placeholder the
implementation writes).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

from ...core.arith import fractions_to_float32
from ...errors import QrefError
from ...schemes.base import QArray
from ...schemes.lookup import LookupScheme, lookup_scheme, lookup_scheme_from_table
from ...tables import get_table
from .. import random as qrandom
from ..case import Case

FAMILY = "lookup"
#: candidate label -> (profile, double_quant)
CANDIDATES = {"spec": ("spec", False), "bitsandbytes": ("bitsandbytes", False),
              "bitsandbytes_dq": ("bitsandbytes", True), "torchao": ("torchao", None), "openvino": ("openvino", False),
              "qwix": ("qwix", False)}
REAL = {"nf4": tuple(CANDIDATES), "af4": ("spec", "bitsandbytes", "bitsandbytes_dq"),
        "fp4_bnb": ("spec", "bitsandbytes", "bitsandbytes_dq"), "dynamic8": ("spec", "bitsandbytes")}
BLOCK = {"nf4": 64, "af4": 64, "fp4_bnb": 64, "dynamic8": 256}
SOURCES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_NPDT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
SPEC = {"tables": "lut.md §1.2", "params": "lut.md §3.1", "quantize": "lut.md §3.2", "rules": "lut.md §3.3",
        "special": "lut.md §3.4", "dequantize": "lut.md §4", "dq": "lut.md §5", "profiles": "lut.md §6",
        "quantile": "lut.md §7"}
CATEGORY = {
    "midpoints": (("tie", "boundary"), ("rules",), "every entry and midpoint +-1 ulp in blocks of absmax 1"),
    "midpoints_scaled": (("tie", "boundary"), ("quantize", "rules"), "the midpoint points times absmax 3.7"),
    "zero": (("edge",), ("special",), "all +0, all -0 and an all-zero partial block"),
    "partial": (("edge", "random"), ("quantize",), "a partial last block"),
    "special": (("edge", "special", "subnormal"), ("special",),
                "NaN, +-Inf, subnormal and tiny absmax blocks, -0"),
    "random": (("random",), ("quantize",), "seeded values, blocks shifted by random powers of two"),
    "axis2d": (("random",), ("params",), "a (4, 96) matrix: flattening vs blocks along the last axis"),
    "large": (("edge", "random", "tie"), ("quantize", "dq"),
              "256 finite blocks (midpoints, zero, partial, random), double quantized"),
    "large_special": (("edge", "special"), ("special", "dq"),
                      "256 blocks with NaN / Inf / subnormal absmax blocks, double quantized"),
}
#: categories that bitsandbytes_dq takes part in (elsewhere its first level equals bitsandbytes')
DQ_CATEGORIES = ("zero", "special", "large", "large_special")
N_RANDOM_BLOCKS = 8
N_RANDOM_BLOCKS_FULL = 1024


# ---------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------
def _cast(v: np.ndarray, src: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, dtype=np.float64).astype(np.float32).astype(_NPDT[src])


def _f32_neighbours(v: np.ndarray) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return np.concatenate([np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf))])


def tie_points(values: np.ndarray) -> np.ndarray:
    """float32 points: every entry, the exact midpoint of sorted neighbours (or its two float32 neighbours when
    it is not a float32), the float32 midpoint, each +-1 ulp, both signs, 0, -0, +-1; within [-1, 1]."""
    v = sorted({Fraction(float(t)) for t in np.asarray(values, np.float32)})
    pts: list[float] = [float(t) for t in v]
    for a, b in itertools.pairwise(v):
        m = (a + b) / 2
        r = float(fractions_to_float32([m])[0])  # the float32 midpoint (one rounding)
        pts.append(r)
        if Fraction(r) != m:
            other = np.nextafter(np.float32(r), np.float32(2 if Fraction(r) < m else -2))
            pts.append(float(other))
    base = np.array([*pts, 0.0, 1.0], dtype=np.float32)
    allp = np.concatenate([base, _f32_neighbours(base)])
    allp = np.concatenate([allp, -allp, [np.float32(-0.0)]]).astype(np.float32)
    allp = allp[np.abs(allp) <= 1]
    return np.unique(allp.view(np.uint32)).view(np.float32)


def _blocks_led_by(pts: np.ndarray, lead: float, block: int) -> np.ndarray:
    """pts in blocks whose first element is ``lead`` (the block absmax when |pts| <= lead)."""
    per = block - 1
    n = -(-pts.size // per)
    out = np.zeros((n, block), dtype=np.float64)
    out[:, 0] = lead
    body = np.resize(pts.astype(np.float64), n * per)
    out[:, 1:] = body.reshape(n, per)
    return out.reshape(-1)


def _random(label: str, n_blocks: int, block: int, spread: int = 20) -> np.ndarray:
    """Values over 4 binades, each block shifted by a random power of two in [2^-spread, 2^spread]."""
    r = qrandom.floats_in_binades(label, n_blocks * block, "float64", -3, 0).view(np.float64).reshape(n_blocks, block)
    shift = qrandom.below(label + "/shift", n_blocks, 2 * spread + 1) - spread
    return (r * np.exp2(shift.astype(np.float64))[:, None]).reshape(-1)


def _categories(values: np.ndarray, block: int, label: str, full: bool, spread: int = 20) -> dict[str, np.ndarray]:
    """Category -> float64 values (rounded to float32 exactly where the construction says so); ``spread``: the
    random blocks' binade shifts (narrower for float16 sources)."""
    pts = tie_points(values).astype(np.float64)
    out: dict[str, np.ndarray] = {}
    out["midpoints"] = _blocks_led_by(pts, 1.0, block)
    scaled = (pts * 3.7).astype(np.float32).astype(np.float64)
    out["midpoints_scaled"] = _blocks_led_by(scaled, float(np.float32(3.7)), block)
    out["zero"] = np.concatenate([np.zeros(block), np.full(block, -0.0), np.zeros(block // 2)])
    out["partial"] = _random(label + "/partial", 3, block)[: 2 * block + 7]
    sp = _random(label + "/special", 8, block).reshape(8, block)
    sp[0, 5] = np.nan
    sp[1, 6] = np.inf
    sp[2, 7] = -np.inf
    sp[3, 1], sp[3, 2] = np.nan, -np.inf
    sp[4] = sp[4] * 1e-40 / np.abs(sp[4]).max()  # subnormal absmax
    sp[5] = sp[5] * 1e-20 / np.abs(sp[5]).max()  # below sqrt(float32 tiny) = 1.08e-19
    sp[6, ::3] = -0.0
    sp[7, :] = np.inf * np.where(np.arange(block) % 2, 1.0, -1.0)
    out["special"] = sp.reshape(-1)
    out["random"] = _random(label + "/random", N_RANDOM_BLOCKS_FULL if full else N_RANDOM_BLOCKS, block, spread)
    out["axis2d"] = _random(label + "/axis2d", 6, 64)[:384].reshape(4, 96)
    return out


def _large(cats: dict[str, np.ndarray], block: int, label: str, n_blocks: int, spread: int,
           names: tuple[str, ...] = ("midpoints", "midpoints_scaled", "zero", "partial")) -> np.ndarray:
    """n_blocks blocks: the given 1-D categories padded to whole blocks, then random blocks."""
    parts = []
    for name in names:
        v = cats[name]
        parts.append(np.concatenate([v, np.zeros((-v.size) % block)]))
    body = np.concatenate(parts)
    n = n_blocks * block
    rest = _random(label + "/large", max(0, (n - body.size) // block), block, spread)
    return np.concatenate([body, rest])[:n]


# ---------------------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------------------
def _build(name: str, cand: str, block: int) -> LookupScheme | None:
    profile, dq = CANDIDATES[cand]
    try:
        s = lookup_scheme(name, profile=profile, block_size=block, double_quant=dq)
    except QrefError:
        return None
    return s


def _outputs(q: QArray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, str]]:
    exp = {"codes": np.asarray(q.codes)}
    formats = {}
    if q.scales is not None:
        exp["scales"] = np.asarray(q.scales, dtype=np.float32)
    if q.zero_points is not None:
        exp["zero_points"] = np.asarray(q.zero_points, dtype=np.float32)
    unspec = {"codes": np.asarray(q.unspecified, dtype=bool)}
    dq = q.meta.get("double_quant")
    if dq is not None:
        codes = np.asarray(dq.codes)
        if codes.dtype == np.int8:
            codes = codes.view(np.uint8)
            formats["dq_codes"] = "int8"
        exp["dq_codes"] = codes
        exp["dq_scales"] = np.asarray(dq.scales, dtype=np.float32)
        exp["dq_offset"] = np.asarray(dq.offset, dtype=np.float32).reshape(1)
        if dq.unspecified is not None:
            unspec["dq_codes"] = np.asarray(dq.unspecified, dtype=bool)
    unspec = {k: v for k, v in unspec.items() if v.any()}
    for k, m in unspec.items():  # unspecified codes hold 0, not the implementation's placeholder
        exp[k] = np.where(m, 0, exp[k]).astype(exp[k].dtype)
    return exp, unspec, formats


def _key(d: dict[str, np.ndarray]) -> bytes:
    return b"|".join(k.encode() + str(v.dtype).encode() + str(v.shape).encode() + np.ascontiguousarray(v).tobytes()
                     for k, v in sorted(d.items()))


def _quantize_cases(prefix: str, cat: str, x: np.ndarray, cands: list[tuple[str, LookupScheme]], text: str = ""
                    ) -> Iterator[Case]:
    tags, spec_keys, desc = CATEGORY[cat]
    groups: dict[bytes, list[Any]] = {}
    for label, sch in cands:
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                q = sch.quantize(x)
        except QrefError:
            continue  # the system does not take this input (dtype, size)
        exp, unspec, formats = _outputs(q)
        key = _key(exp) + b"#" + _key(unspec)
        if key in groups:
            groups[key][-1].append(label)
        else:
            groups[key] = [label, sch, exp, unspec, formats, [label]]
    for rep, sch, exp, unspec, formats, members in groups.values():
        spec = [SPEC[k] for k in spec_keys] + [SPEC["profiles"]]
        if "dq_codes" in exp:
            spec.append(SPEC["dq"])
        yield Case(
            id=f"{prefix}/{cat}/{rep}", family=FAMILY, operation="lookup_quantize", scheme=sch, profile=sch.profile,
            inputs={"x": x}, expected=exp, unspecified=unspec, array_formats=formats,
            tags=(*tags, "profile"), spec=tuple(dict.fromkeys(spec)),
            profiles=tuple(dict.fromkeys(CANDIDATES[m][0] for m in members)),
            description=f"lookup_quantize {x.dtype.name} -> {sch.table.name} "
                        f"({text or 'candidates ' + ', '.join(members)}): {desc}",
        )


SCALE_SET = (1.0, 0.0, 3.7, 0.37, 1e-38, 1e-40, 1e30, 65504.0, 70000.0, np.inf, np.nan)


def _dequantize_cases(prefix: str, cands: list[tuple[str, LookupScheme]], block: int, src: str) -> Iterator[Case]:
    """Every code under a set of block scales (0, 1, awkward, subnormal, huge, Inf, NaN), to float32 and to the
    source dtype; grouped by identical values."""
    n_codes = cands[0][1].table.size
    per = -(-n_codes // block)
    codes = np.resize(np.arange(n_codes), per * block)
    codes = np.tile(codes, len(SCALE_SET)).astype(np.uint8)
    scales = np.repeat(np.array(SCALE_SET, dtype=np.float32), per)
    if src != "float32":  # scales stored by a half-precision producer are values of its dtype
        scales = _cast(scales, src).astype(np.float32)
    inputs = {"codes": codes, "scales": scales}
    for dt in dict.fromkeys(["float32", src]):
        groups: dict[bytes, list[Any]] = {}
        for label, sch in cands:
            if sch.double_quant is not None:
                continue  # double-quantized scales are dequantized in the 'large' cases' own set below
            q = QArray(codes=codes, scheme=sch, scales=scales, meta={"input_dtype": src})
            with np.errstate(invalid="ignore", over="ignore"):
                y = sch.dequantize(q, dtype=_NPDT[dt])
            k = _key({"y": y})
            if k in groups:
                groups[k][-1].append(label)
            else:
                groups[k] = [label, sch, y, [label]]
        for rep, sch, y, members in groups.values():
            yield Case(
                id=f"{prefix}/dequantize/codes/{dt}/{rep}", family=FAMILY, operation="lookup_dequantize",
                scheme=sch, profile=sch.profile, params={"dtype": dt, "input_dtype": src}, inputs=inputs,
                expected={"y": y}, tags=("values", "edge", "profile"),
                spec=(SPEC["dequantize"], SPEC["profiles"]),
                profiles=tuple(dict.fromkeys(CANDIDATES[m][0] for m in members)),
                description=f"lookup_dequantize to {dt} of every {sch.table.name} code under block scales "
                            "0, 1, 3.7, 0.37, 1e-38, 1e-40, 1e30, 65504, 70000, Inf, NaN",
            )


def _dq_dequantize_cases(prefix: str, x: np.ndarray, cands: list[tuple[str, LookupScheme]], src: str
                         ) -> Iterator[Case]:
    """Double-quantized scales reconstructed and applied: inputs are the quantize outputs of each double-quantizing
    candidate on the 'large' input."""
    for label, sch in cands:
        if sch.double_quant is None:
            continue
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                q = sch.quantize(x)
        except QrefError:
            continue
        exp, unspec, formats = _outputs(q)
        assert not unspec, "the 'large' input is finite: every code is specified"
        inputs = {k: v for k, v in exp.items() if k != "scales"}
        for dt in dict.fromkeys(["float32", src]):
            with np.errstate(invalid="ignore", over="ignore"):
                y = sch.dequantize(q, dtype=_NPDT[dt])
            yield Case(
                id=f"{prefix}/dequantize/double_quant/{dt}/{label}", family=FAMILY, operation="lookup_dequantize",
                scheme=sch, profile=sch.profile, params={"dtype": dt, "input_dtype": src}, inputs=inputs,
                expected={"y": y}, array_formats=formats, tags=("values", "profile"),
                spec=(SPEC["dequantize"], SPEC["dq"], SPEC["profiles"]), profiles=(sch.profile,),
                description=f"lookup_dequantize to {dt} with double-quantized block scales (lut.md §5.1: the "
                            "scales are reconstructed from dq_codes, dq_scales and dq_offset first)",
            )


def _table_cases(name: str, src_key: str, full: bool) -> Iterator[Case]:
    src = SOURCES[src_key]
    block = BLOCK[name]
    prefix = f"{FAMILY}/{name}/b{block}/{src_key}"
    cands = [(c, s) for c in REAL[name] if (s := _build(name, c, block)) is not None]
    values = get_table(name).values
    spread = 6 if src == "float16" else 20
    cats = _categories(values, block, prefix, full, spread)
    if src_key != "f32":
        cats = {k: cats[k] for k in ("midpoints", "midpoints_scaled", "special", "random")}
    for cat, v in cats.items():
        use = [c for c in cands if CANDIDATES[c[0]][1] is not True or cat in DQ_CATEGORIES]
        yield from _quantize_cases(prefix, cat, _cast(v, src), use)
    large_block = 4096 if name == "dynamic8" else block
    big_cands = cands if large_block == block else [(c, s) for c in REAL[name]
                                                    if (s := _build(name, c, large_block)) is not None]
    big_prefix = f"{FAMILY}/{name}/b{large_block}/{src_key}"
    # 256 blocks (torchao's minimum); dynamic8: 4 blocks of 4096 holding the categories laid in blocks of 256.
    # 'large' has finite blocks only, so that double quantization is defined; 'large_special' adds the special
    # blocks (NaN / Inf absmax: the second level is unspecified)
    n_big = 4 if name == "dynamic8" else 256
    all_cats = _categories(values, block, prefix, full, spread)
    xl = _cast(_large(all_cats, large_block, big_prefix, n_big, spread), src)
    yield from _quantize_cases(big_prefix, "large", xl, big_cands)
    if src_key == "f32":
        xs = _cast(_large(all_cats, large_block, big_prefix + "/special", n_big, spread,
                          ("special", "zero", "midpoints")), src)
        yield from _quantize_cases(big_prefix, "large_special", xs, big_cands)
    yield from _dequantize_cases(prefix, cands, block, src)
    yield from _dq_dequantize_cases(big_prefix, xl, big_cands, src)


def _quantile_cases() -> Iterator[Case]:
    """An MLIR quantile type (lut.md §7): !quant.uniform<!quant.quantile<ui4:f16, {NF4}>:f32, 0.5:3>."""
    sch = lookup_scheme_from_table(get_table("nf4").values, "uint4", quantile_type="float16", scales=0.5,
                                   zero_points=3)
    prefix = f"{FAMILY}/quantile/nf4_ui4_f16_s0.5_z3/f32"
    t = sch.table.values.astype(np.float64)
    pts = tie_points(t).astype(np.float64)
    x = _cast(np.concatenate([(pts - 3) * 0.5, [np.nan, np.inf, -np.inf, 100.0, -100.0]]), "float32")
    with np.errstate(invalid="ignore"):
        q = sch.quantize(x)
    exp, unspec, formats = _outputs(q)
    yield Case(
        id=f"{prefix}/midpoints/spec", family=FAMILY, operation="lookup_quantize", scheme=sch, profile="spec",
        params={"mlir_type": "!quant.uniform<!quant.quantile<ui4:f16, {NF4}>:f32, 0.5:3>"}, inputs={"x": x},
        expected={"codes": exp["codes"]}, unspecified={k: v for k, v in unspec.items() if k == "codes"},
        array_formats=formats, tags=("tie", "boundary", "special"), spec=(SPEC["quantile"], SPEC["rules"]),
        profiles=("spec",), description="quantize through a static-scale quantile type: the nearest entry to "
                                        "x / 0.5 + 3 (ties to the even code); codes are table indices",
    )
    codes = np.arange(16, dtype=np.uint8)
    y = sch.dequantize(QArray(codes=codes, scheme=sch, scales=q.scales, zero_points=q.zero_points))
    yield Case(
        id=f"{prefix}/dequantize/spec", family=FAMILY, operation="lookup_dequantize", scheme=sch, profile="spec",
        params={"dtype": "float32"}, inputs={"codes": codes}, expected={"y": y}, tags=("values",),
        spec=(SPEC["quantile"], SPEC["dequantize"]), profiles=("spec",),
        description="dequantize every storage value of the quantile type: (entry - 3) * 0.5 in float32",
    )


#: (table, profile, rounding, N, sources): stochastic rounding between neighbouring entries (lut.md §3.5)
STOCHASTIC = (
    ("nf4", "spec", "stochastic_a", 8, ("f32", "bf16")),
    ("nf4", "spec", "stochastic_b", 4, ("f32",)),
    ("nf4", "spec", "stochastic_c", 8, ("f32",)),
    ("nf4", "bitsandbytes", "stochastic_a", 8, ("f32",)),
    ("fp4_bnb", "spec", "stochastic_a", 3, ("f32",)),
    ("af4", "spec", "stochastic_c", 4, ("f32",)),
    ("dynamic8", "spec", "stochastic_a", 8, ("f32",)),
)
#: R around the thresholds of an exact midpoint (eta = 1/2): 2^(N-1) + d, and None = 2^N - 1
_TIE_R = (-1, 0, 1, 2, None)


def _stochastic_cases() -> Iterator[Case]:
    """stochastic_quantize: the deterministic scheme's scales, codes by lut.md §3.5 with random_bits[i] rounding
    x[i]; categories midpoints (R at and around the midpoint thresholds), random, special, zero, partial."""
    for name, profile, mode, n, sources in STOCHASTIC:
        block = BLOCK[name]
        sch = lookup_scheme(name, profile=profile, block_size=block, rounding=mode, stochastic_bits=n)
        for src_key in sources:
            src = SOURCES[src_key]
            label = f"{FAMILY}/stochastic/{name}/b{block}/{src_key}/{mode}_n{n}/{profile}"
            cats = _categories(get_table(name).values, block, label, False)
            for cat in ("midpoints", "random", "special", "zero", "partial"):
                x = _cast(cats[cat], src)
                if cat == "midpoints":
                    half = 1 << (n - 1)
                    choice = [half + d if d is not None else (1 << n) - 1 for d in _TIE_R] + [0]
                    rb = np.resize(np.array(choice, dtype=np.uint32), x.size)
                else:
                    rb = qrandom.bits(f"{label}/{cat}/r", x.size, n).astype(np.uint32)
                with np.errstate(invalid="ignore", over="ignore"):
                    q = sch.quantize(x, random_bits=rb)
                exp, unspec, formats = _outputs(q)
                tags, spec_keys, desc = CATEGORY[cat]
                yield Case(
                    id=f"{label}/{cat}", family=FAMILY, operation="stochastic_quantize", scheme=sch,
                    profile=profile, inputs={"x": x, "random_bits": rb}, expected=exp, unspecified=unspec,
                    array_formats=formats, tags=(*tags, "stochastic", "profile"),
                    spec=tuple(dict.fromkeys(["lut.md §3.5", *(SPEC[k] for k in spec_keys), SPEC["profiles"]])),
                    profiles=(profile,),
                    description=f"stochastic_quantize {src} -> {name} ({profile}, {mode} with N = {n}; "
                                f"random_bits[i] rounds x[i]): {desc}",
                )


def build_cases(full: bool) -> Iterator[Case]:
    """Every lookup case (module docstring); ``full`` adds 1024 random blocks per table and source."""
    for name in ("nf4", "af4", "fp4_bnb", "dynamic8"):
        for src_key in ("f32", *(("f16", "bf16") if name == "nf4" else ())):
            yield from _table_cases(name, src_key, full)
    yield from _quantile_cases()
    yield from _stochastic_cases()


__all__ = ["BLOCK", "CANDIDATES", "CATEGORY", "DQ_CATEGORIES", "FAMILY", "N_RANDOM_BLOCKS", "N_RANDOM_BLOCKS_FULL",
           "REAL", "SCALE_SET", "SOURCES", "SPEC", "STOCHASTIC", "build_cases", "tie_points"]
