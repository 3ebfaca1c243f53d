"""Quantized integer matrix product cases (docs/spec/matmul.md; docs/vectors.md).

Operations:
  matmul_integer  inputs ``a`` (M, K), ``b`` (K, N), ``a_zero_point`` (() or (M,)), ``b_zero_point`` (() or (N,))
                  and optionally ``bias`` ((N,) int32); expected ``y`` (M, N) int32: the accumulator
                  (matmul.md §3, §4; requantization method "none", §5.1).
  qlinear_matmul  inputs ``a``, ``a_scale`` (float32, () or (M,)), ``a_zero_point``, ``b``, ``b_scale`` (() or
                  (N,)), ``b_zero_point``, ``y_scale`` (()), ``y_zero_point`` (()); expected ``y`` (M, N) codes of
                  the output storage (matmul.md §5.2-§5.4).
Storages are held in int8 / uint8 arrays; ``params`` names them (``a_storage``, ``b_storage``, ``output``).

Each setup is computed under every matmul profile (``PROFILE_ORDER``); profiles that give identical outputs and
identical unspecified masks form one case whose ``profile`` is the first of them and whose ``profiles`` list them
all. Ids: ``matmul/<operation>/<a>x<b>[_<output>]/<category>/<profile>``.

Categories: pair_saturation (u8 255 x s8 -128 / 127 pairs: int16 pair sums saturate, matmul.md §3.2),
accumulator_wrap (K = 33,100 products of 65,025: the sum leaves int32, §3.1), bias_overflow (§4), zero_points
(storage ends, per column), shapes (K = 1, odd K, M = 1, N = 1), ties (power-of-two multipliers: every .5 tie,
odd and even output zero points, §5.2), near_ties (accumulators beyond 2^24, multipliers whose float32 rounding
moves a result), multiplier_small (m near 2^-31 and below, §5.3), multiplier_near_one (m at 1 - 2^-24 .. 1 +
2^-23 and the Q31 carry), per_column / per_row scales, random (seeded operands, 512 x 32 x 256).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import QrefError
from ...recipes.qmatmul import STORAGES, IntOperand, QuantizedMatmul, matmul_rules, quantized_matmul
from .. import random as qrandom
from ..case import Case

FAMILY = "matmul"
PROFILE_ORDER = ("exact", "onnxruntime", "onnx_reference", "onnxruntime_avx2", "gemmlowp", "tflite_single_rounding",
                 "dequantize_dot")
SPEC = {"operands": "matmul.md §2", "accumulation": "matmul.md §3", "pairs": "matmul.md §3.2",
        "bias": "matmul.md §4", "none": "matmul.md §5.1", "float": "matmul.md §5.2", "fixed": "matmul.md §5.3",
        "dcq": "matmul.md §5.4", "profiles": "matmul.md §6"}
NP = {"int8": np.int8, "uint8": np.uint8, "int4": np.int8, "uint4": np.uint8, "int16": np.int16}


@dataclass
class Setup:
    """One matmul problem: operands, quantization parameters, category, tags and a description."""

    op: str
    a_storage: str
    b_storage: str
    output: str | None
    category: str
    a: np.ndarray
    b: np.ndarray
    za: Any = 0
    zb: Any = 0
    a_scale: Any = None
    b_scale: Any = None
    y_scale: Any = None
    zy: int = 0
    bias: np.ndarray | None = None
    tags: tuple[str, ...] = ("edge",)
    description: str = ""


def _ints(label: str, shape: tuple[int, ...], storage: str) -> np.ndarray:
    lo, hi = STORAGES[storage]
    n = int(np.prod(shape))
    return (qrandom.below(label, n, hi - lo + 1).astype(np.int64) + lo).reshape(shape).astype(NP[storage])


def _f32(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


def _rules(profile: str, setup: Setup) -> Any:
    rules = matmul_rules(profile)
    if setup.op == "matmul_integer":
        rules = rules.replace(method="none")
    if rules.accumulation.pair_sum and (setup.a_storage, setup.b_storage) != ("uint8", "int8"):
        rules = rules.replace(pair_sum=None)  # the pair instruction is a u8 x s8 kernel's (matmul.md §3.2 C1)
    return rules


def _expected(setup: Setup, profile: str) -> tuple[np.ndarray, np.ndarray] | None:
    rules = _rules(profile, setup)
    if rules.requantization.method == "dequantize_compute_quantize" and setup.bias is not None:
        return None
    pipe = QuantizedMatmul(IntOperand(setup.a_storage), IntOperand(setup.b_storage), setup.output, rules)
    try:
        with np.errstate(all="ignore"):
            r = quantized_matmul(setup.a, setup.b, a_scale=setup.a_scale, a_zero_point=setup.za,
                                 b_scale=setup.b_scale, b_zero_point=setup.zb, y_scale=setup.y_scale,
                                 y_zero_point=setup.zy, bias=setup.bias, pipeline=pipe)
    except QrefError:
        return None
    if setup.op == "matmul_integer":
        y = np.where(r.unspecified, 0, r.values).astype(np.int32)  # unspecified elements hold 0
    else:
        y = r.values.astype(NP[setup.output or "int8"])
    return y, np.asarray(r.unspecified, dtype=bool)


def _inputs(s: Setup) -> dict[str, np.ndarray]:
    ins = {"a": np.ascontiguousarray(s.a), "a_zero_point": np.asarray(s.za).astype(NP[s.a_storage]),
           "b": np.ascontiguousarray(s.b), "b_zero_point": np.asarray(s.zb).astype(NP[s.b_storage])}
    if s.op == "qlinear_matmul":
        assert s.output is not None
        ins.update(a_scale=_f32(s.a_scale), b_scale=_f32(s.b_scale), y_scale=_f32(s.y_scale),
                   y_zero_point=np.asarray(s.zy).astype(NP[s.output]))
    if s.bias is not None:
        ins["bias"] = np.asarray(s.bias, dtype=np.float32 if np.asarray(s.bias).dtype.kind == "f" else np.int32)
    return ins


def _cases(s: Setup, order: tuple[str, ...] = PROFILE_ORDER) -> Iterator[Case]:
    results = [(p, e) for p in order if (e := _expected(s, p)) is not None]
    groups: list[tuple[str, np.ndarray, np.ndarray, list[str]]] = []
    for p, (y, u) in results:
        for g in groups:
            if np.array_equal(g[1], y) and np.array_equal(g[2], u):
                g[3].append(p)
                break
        else:
            groups.append((p, y, u, [p]))
    combo = f"{s.a_storage}x{s.b_storage}" + (f"_{s.output}" if s.output else "")
    M, K = s.a.shape
    N = s.b.shape[1]
    spec = (SPEC["operands"], SPEC["accumulation"]) + (
        (SPEC["none"],) if s.op == "matmul_integer" else (SPEC["float"], SPEC["fixed"], SPEC["dcq"]))
    if s.category == "pair_saturation":
        spec += (SPEC["pairs"],)
    if s.bias is not None:
        spec += (SPEC["bias"],)
    for rep, y, u, members in groups:
        yield Case(id=f"{FAMILY}/{s.op}/{combo}/{s.category}/{rep}", family=FAMILY, operation=s.op, profile=rep,
                   profiles=tuple(members), inputs=_inputs(s), expected={"y": y},
                   unspecified={"y": u} if u.any() else {},
                   params={"a_storage": s.a_storage, "b_storage": s.b_storage, "output": s.output,
                           "m": M, "k": K, "n": N, "rules": _rules(rep, s).to_dict()},
                   tags=(*s.tags, "profile"), spec=(*spec, SPEC["profiles"]),
                   description=f"{s.op} {combo} (M={M}, K={K}, N={N}): {s.description}")


# ---- setups -----------------------------------------------------------------------------------------------------
COMBOS_INT = (("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8"), ("int8", "uint8"))
COMBOS_Q = (("uint8", "int8", "uint8"), ("uint8", "uint8", "uint8"), ("int8", "int8", "int8"))


def _integer_setups() -> Iterator[Setup]:
    L = f"{FAMILY}/matmul_integer"
    # int16 pair saturation: u8 255 x s8 -128 / 127, the sums of pairs leave int16 (matmul.md §3.2)
    a = np.full((4, 8), 255, np.uint8)
    a[1, 1::2] = 0
    a[2] = _ints(L + "/pairs/a2", (8,), "uint8")
    a[3, :4] = 128
    b = np.full((8, 6), -128, np.int8)
    b[:, 1] = 127
    b[::2, 2] = 127
    b[:, 3] = _ints(L + "/pairs/b3", (8,), "int8")
    b[:, 4] = -64
    b[:, 5] = np.array([-128, 127] * 4, np.int8)
    yield Setup("matmul_integer", "uint8", "int8", None, "pair_saturation", a, b,
                description="u8 255 x s8 -128 / 127 pairs: pair sums beyond int16 (vpmaddubsw saturates)")
    yield Setup("matmul_integer", "uint8", "int8", None, "pair_saturation_zero_points", a, b, za=255, zb=-128,
                description="the same pairs with zero points at the storage ends (corrected in int32)")
    # int32 accumulator wrap: K products of 65,025 leave int32 (matmul.md §3.1)
    K = 33100
    for ca, cb in (("uint8", "int8"), ("int8", "int8")):
        lo_a, hi_a = STORAGES[ca]
        lo_b, hi_b = STORAGES[cb]
        a = np.full((2, K), lo_a, NP[ca])
        a[1] = _ints(f"{L}/wrap/{ca}{cb}/a", (K,), ca)
        b = np.full((K, 3), lo_b, NP[cb])
        b[:, 1] = hi_b
        b[:, 2] = _ints(f"{L}/wrap/{ca}{cb}/b", (K,), cb)
        yield Setup("matmul_integer", ca, cb, None, "accumulator_wrap", a, b, za=hi_a, zb=hi_b, tags=("overflow",),
                    description=f"K = {K}: (lo - hi)^2 = 65,025 per product, the sum beyond int32 wraps")
    # bias overflow (matmul.md §4)
    a = np.full((2, 4), 255, np.uint8)
    b = np.full((4, 3), 127, np.int8)
    bias = np.array([2**31 - 1, -(2**31), 2**31 - 129540], np.int64)
    yield Setup("matmul_integer", "uint8", "int8", None, "bias_overflow", a, b, bias=bias, tags=("overflow",),
                description="an int32 bias at the int32 ends added to 129,540: wraps or leaves int32")
    for ca, cb in COMBOS_INT:
        c = f"{ca}{cb}"
        lo_a, hi_a = STORAGES[ca]
        lo_b, hi_b = STORAGES[cb]
        a, b = _ints(f"{L}/zp/{c}/a", (8, 33), ca), _ints(f"{L}/zp/{c}/b", (33, 8), cb)
        yield Setup("matmul_integer", ca, cb, None, "zero_points_low", a, b, za=lo_a, zb=lo_b,
                    description="zero points at the low storage ends")
        yield Setup("matmul_integer", ca, cb, None, "zero_points_high", a, b, za=hi_a, zb=hi_b,
                    description="zero points at the high storage ends")
        zb = _ints(f"{L}/zp/{c}/zb", (8,), cb)
        zb[:2] = (lo_b, hi_b)
        yield Setup("matmul_integer", ca, cb, None, "zero_points_per_column", a, b, za=hi_a // 2, zb=zb,
                    description="one b zero point per output column, storage ends included")
        for cat, (M, K, N) in (("k1", (16, 1, 16)), ("k_odd", (9, 7, 5)), ("m1", (1, 65, 33)), ("n1", (33, 65, 1))):
            a, b = _ints(f"{L}/{cat}/{c}/a", (M, K), ca), _ints(f"{L}/{cat}/{c}/b", (K, N), cb)
            yield Setup("matmul_integer", ca, cb, None, cat, a, b, za=_ints(f"{L}/{cat}/{c}/za", (), ca),
                        zb=_ints(f"{L}/{cat}/{c}/zb", (), cb), description=f"shape edge {cat}")
        a, b = _ints(f"{L}/random/{c}/a", (256, 32), ca), _ints(f"{L}/random/{c}/b", (32, 256), cb)
        yield Setup("matmul_integer", ca, cb, None, "random", a, b, za=_ints(f"{L}/random/{c}/za", (), ca),
                    zb=_ints(f"{L}/random/{c}/zb", (256,), cb), tags=("random",),
                    description="seeded operands and zero points (per column for b)")


def _q(ca: str, cb: str, co: str, cat: str, a: np.ndarray, b: np.ndarray, **kw: Any) -> Setup:
    for k in ("a_scale", "b_scale", "y_scale"):
        kw[k] = _f32(kw[k])
        if not np.array_equal(kw[k].astype(np.float64), np.asarray(kw.pop(k + "_exact", kw[k]), np.float64)):
            raise AssertionError(f"{cat}: {k} is not a float32 value")
    return Setup("qlinear_matmul", ca, cb, co, cat, a, b, **kw)


def _carry_scales() -> tuple[float, float, float]:
    """float32 scales near 1 whose float64 multiplier fl(fl(a b) / y) lies in [1 - 2^-32, 1): the Q31 significand
    rounds up to 2^31 and carries into the shift (matmul.md §5.3 C1)."""
    steps = [1 + k * 2.0**-23 for k in range(0, 6)] + [1 - k * 2.0**-24 for k in range(1, 6)]
    for a in steps:
        for b in steps:
            for y in steps:
                m = a * b / y
                if 1 - 2.0**-32 <= m < 1:
                    return a, b, y
    raise AssertionError("no carry triple")


def _midpoint(storage: str) -> int:
    """The middle of the storage range as a zero point: (lo + hi + 1) // 2 (the upper of two middles)."""
    lo, hi = STORAGES[storage]
    return (lo + hi + 1) // 2


def _small(label: str, shape: tuple[int, ...], storage: str, center: int, r: int) -> np.ndarray:
    """Values center + [-r, r] (clipped to the storage range)."""
    lo, hi = STORAGES[storage]
    n = int(np.prod(shape))
    v = qrandom.below(label, n, 2 * r + 1).astype(np.int64) - r + center
    return np.clip(v, lo, hi).reshape(shape).astype(NP[storage])


def _qlinear_setups() -> Iterator[Setup]:
    L = f"{FAMILY}/qlinear_matmul"
    for ca, cb, co in COMBOS_Q:
        c = f"{ca}{cb}{co}"
        lo_a, hi_a = STORAGES[ca]
        lo_b, hi_b = STORAGES[cb]
        lo_y, hi_y = STORAGES[co]
        mid_y = _midpoint(co)
        za_t, zb_t = _midpoint(ca), _midpoint(cb)
        a, b = _small(f"{L}/ties/{c}/a", (16, 9), ca, za_t, 5), _small(f"{L}/ties/{c}/b", (9, 24), cb, zb_t, 5)
        for zy, tag in ((mid_y, "even"), (mid_y + 1, "odd")):
            for e in (-1, -2, -3):
                yield _q(ca, cb, co, f"ties_m2e{e}_zy_{tag}", a, b, za=za_t, zb=zb_t, a_scale=2.0**e, b_scale=1.0,
                         y_scale=1.0,
                         zy=zy, tags=("tie",),
                         description=f"m = 2^{e}: every accumulator with low bits 10..0 is a tie; zero point "
                                     f"{zy} ({tag}): added before or after the rounding")
        # near ties: large accumulators (float32 conversion rounds beyond 2^24) and non-dyadic multipliers
        K = 600
        a = np.full((6, K), hi_a, NP[ca])
        a[3:] = _ints(f"{L}/near/{c}/a", (3, K), ca)
        b = np.full((K, 8), lo_b, NP[cb])
        b[:, 4:] = _ints(f"{L}/near/{c}/b", (K, 4), cb)
        for j, (sa, sb, sy) in enumerate(((0.1, 0.1, 0.3), (1e-3, 3e-3, 0.7), (2.0**-24 * 3, 1.0, 2.0**-10),
                                          (0.0123, 0.0456, 61.0))):
            yield _q(ca, cb, co, f"near_ties_{j}", a, b, za=lo_a, zb=hi_b, a_scale=sa, b_scale=sb, y_scale=sy,
                     zy=mid_y, tags=("tie", "boundary"),
                     description=f"accumulators near +-(K 2^16) (float32 rounds them), a_s {sa}, b_s {sb}, "
                                 f"y_s {sy}")
        a, b = _ints(f"{L}/mult/{c}/a", (8, 64), ca), _ints(f"{L}/mult/{c}/b", (64, 8), cb)
        a[0] = hi_a
        b[:, 0] = lo_b
        for name, (sa, sb, sy) in (("small_2e-31", (2.0**-16, 2.0**-15, 1.0)),
                                   ("small_2e-32", (2.0**-16, 2.0**-16, 1.0)),
                                   ("small_3x2e-33", (3 * 2.0**-17, 2.0**-16, 1.0)),
                                   ("small_below_2e-32", (2.0**-20, 2.0**-20, 2.0**-3)),
                                   ("near_one_below", (1 - 2.0**-24, 1.0, 1.0)),
                                   ("near_one", (1.0, 1.0, 1.0)), ("near_one_above", (1 + 2.0**-23, 1.0, 1.0)),
                                   ("q31_carry", _carry_scales()),
                                   ("rounding_shift", (2.0**-12 * 3, 2.0**-3, 1.0)),
                                   ("above_one", (3.0, 5.0, 1.0))):
            sa32 = float(np.float32(sa))
            near = not name.startswith("small")  # m >= 1/2: operands near their zero points keep y in range
            aa = _small(f"{L}/mult/{c}/sa", (8, 64), ca, _midpoint(ca), 3) if near else a
            bb = _small(f"{L}/mult/{c}/sb", (64, 8), cb, _midpoint(cb), 3) if near else b
            yield _q(ca, cb, co, f"multiplier_{name}", aa, bb, za=_midpoint(ca) if near else lo_a,
                     zb=_midpoint(cb) if near else hi_b,
                     a_scale=sa32, b_scale=sb, y_scale=sy, zy=mid_y, tags=("boundary",),
                     description=f"m = a_s b_s / y_s = {sa32 * sb / sy!r}: Q31 quantization and shift edges")
        a, b = _ints(f"{L}/zp/{c}/a", (8, 33), ca), _ints(f"{L}/zp/{c}/b", (33, 8), cb)
        for cat, za, zb, zy in (("zero_points_low", lo_a, lo_b, lo_y), ("zero_points_high", hi_a, hi_b, hi_y)):
            yield _q(ca, cb, co, cat, a, b, za=za, zb=zb, a_scale=0.02, b_scale=0.03, y_scale=0.4, zy=zy,
                     description="zero points at the storage ends")
        zb = _ints(f"{L}/pc/{c}/zb", (8,), cb)
        bs = (2.0 ** -np.arange(2, 10)).astype(np.float32) * np.float32(1.5)
        yield _q(ca, cb, co, "per_column", a, b, za=_ints(f"{L}/pc/{c}/za", (), ca), zb=zb, a_scale=0.05,
                 b_scale=bs, y_scale=0.25, zy=mid_y, description="per-column b scales and zero points")
        yield _q(ca, cb, co, "per_row_a", a, b, za=_ints(f"{L}/pr/{c}/za", (), ca), zb=0,
                 a_scale=(0.01 * (1 + np.arange(8))).astype(np.float32), b_scale=0.05, y_scale=0.5, zy=mid_y,
                 description="per-row a scales (the ONNX operator allows them)")
        for cat, (M, K, N) in (("k1", (16, 1, 16)), ("k_odd", (9, 7, 5)), ("m1", (1, 65, 33)), ("n1", (33, 65, 1))):
            a, b = _ints(f"{L}/{cat}/{c}/a", (M, K), ca), _ints(f"{L}/{cat}/{c}/b", (K, N), cb)
            yield _q(ca, cb, co, cat, a, b, za=_ints(f"{L}/{cat}/{c}/za", (), ca),
                     zb=_ints(f"{L}/{cat}/{c}/zb", (), cb), a_scale=0.5, b_scale=0.25, y_scale=1.0 + 2**-4,
                     zy=_ints(f"{L}/{cat}/{c}/zy", (), co), description=f"shape edge {cat}")
        # accumulator wrap, then requantization
        K = 33100
        a = np.full((2, K), lo_a, NP[ca])
        b = np.full((K, 2), lo_b, NP[cb])
        b[:, 1] = hi_b
        yield _q(ca, cb, co, "accumulator_wrap", a, b, za=hi_a, zb=hi_b, a_scale=2.0**-20, b_scale=2.0**-10,
                 y_scale=1.0, zy=mid_y, tags=("overflow",),
                 description="the int32 accumulator wraps (K = 33,100 products of 65,025), then requantizes")
        for gran in ("per_tensor", "per_column"):
            a = _ints(f"{L}/random/{c}/{gran}/a", (512, 32), ca)
            b = _ints(f"{L}/random/{c}/{gran}/b", (32, 256), cb)
            n = 256 if gran == "per_column" else 1
            fr = qrandom.below(f"{L}/random/{c}/{gran}/bs", n, 1 << 10).astype(np.float64)
            bs = ((1 + fr / 1024) * 2.0**-9).astype(np.float32).reshape(() if n == 1 else (n,))
            zb = _ints(f"{L}/random/{c}/{gran}/zb", (n,) if n > 1 else (), cb)
            yield _q(ca, cb, co, f"random_{gran}", a, b, za=_ints(f"{L}/random/{c}/{gran}/za", (), ca), zb=zb,
                     a_scale=0.0173, b_scale=bs, y_scale=0.0931, zy=_ints(f"{L}/random/{c}/{gran}/zy", (), co),
                     tags=("random",), description=f"seeded operands, {gran} b scales and zero points")


def build_cases(full: bool) -> Iterator[Case]:
    """Every matmul case (module docstring); ``full`` adds nothing yet."""
    for s in _integer_setups():
        yield from _cases(s)
    for s in _qlinear_setups():
        yield from _cases(s)
    for s in _litert_setups():
        yield from _cases(s, LITERT_PROFILE_ORDER)
    yield from build_float_cases()
    yield from build_qgemm_cases()
    yield from build_bnb4_cases()
    for s in _float_bias_setups():
        yield from _cases(s, FLOAT_BIAS_PROFILES)
    yield from _vectorwise_cases()
    yield from _weight_only_cases()
    yield from _torchao_int8_cases()
    yield from _torch_dynamic_cases()
    yield from _jax_dot_cases()
    yield from build_hybrid_cases()
    yield from build_float_matmul_cases()


# ---- TFLite-shaped quantized matmuls (LiteRT FULLY_CONNECTED / BATCH_MATMUL, matmul.md §6.6) ----------------------
#: the suite's profiles and the three LiteRT kernel choices (cases of these setups list them too)
LITERT_PROFILE_ORDER = (*PROFILE_ORDER, "litert_reference", "litert_optimized", "litert_xnnpack", "litert_batch_matmul")


def _tfl(ca: str, cat: str, a: np.ndarray, b: np.ndarray, **kw: Any) -> Setup:
    """A TFLite-shaped setup: weights symmetric (b zero point 0), one activation scale, output = a's storage."""
    kw.setdefault("zb", 0)
    return _q(ca, "int8", ca, f"tflite_{cat}", a, b, **kw)


def _near_tie_bias(label: str, m: np.ndarray, zy: int, lo: int, hi: int) -> np.ndarray:
    """int32 biases b[n] with b[n] m[n] + zy at k + 1/2 (k seeded, kept in [lo + 4, hi - 4]): with rows of
    a - za = -128..127 and one unit weight, the accumulators b[n] + i sweep every tie and near tie around it."""
    k = qrandom.below(label, m.size, max(1, hi - lo - 8)).astype(np.int64) + lo + 4 - zy
    return np.round((k + 0.5) / m.astype(np.float64)).astype(np.int64)


def _tfl_weights(label: str, shape: tuple[int, int], per_channel: bool, e: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded int8 weights (K, N) in the symmetric range [-127, 127] (-128 drawn becomes -127) and their scales
    (1 + f / 1024) 2^e, f seeded in [0, 1024): one per output channel, or one for the tensor."""
    b = _ints(f"{label}/b", shape, "int8")
    b[b == -128] = -127
    n = shape[1] if per_channel else 1
    fr = qrandom.below(f"{label}/bs", n, 1 << 10).astype(np.float64)
    return b, ((1 + fr / 1024) * 2.0**e).astype(np.float32).reshape(() if n == 1 else (n,))


def _litert_setups() -> Iterator[Setup]:
    """TFLite's constraints: int8 weights with zero point 0 (per tensor or per output channel), int32 bias,
    output storage = activation storage, int16 activations and outputs with zero point 0 (matmul.md §6.6).
    ``sweep``: K = 1, a = -128..127 (za 0), unit weights: acc = bias[n] + a[m] (every accumulator near a tie)."""
    L = f"{FAMILY}/tflite"
    sweep_a = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1).astype(np.int8)
    # ties: dyadic multipliers (m 2^-1, 2^-4, 0.75 2^-4 (the Q31 product itself ties), 1.5 (a left shift))
    for name, sa in (("m2e-1", 0.5), ("m2e-4", 2.0**-4), ("m3x2e-6", 0.75 * 2.0**-4), ("m1.5", 1.5)):
        for zy in (0, 1, -3):
            N = 64
            bias = (np.arange(N, dtype=np.int64) - N // 2) * 3
            yield _tfl("int8", f"ties_{name}_zy{zy}", sweep_a, np.ones((1, N), np.int8), a_scale=sa, b_scale=1.0,
                       y_scale=1.0, zy=zy, bias=bias, tags=("tie",),
                       description=f"acc = bias + a sweeps every tie of m = {sa!r} (zero point {zy}): the tie rule "
                                   "and the stage of the zero point")
    # near ties: non-dyadic multipliers, per tensor and per channel
    for gran in ("per_tensor", "per_channel"):
        for j in range(3):
            N = 96
            n = N if gran == "per_channel" else 1
            e = qrandom.below(f"{L}/near/{gran}/{j}/e", n, 1 << 12).astype(np.float64) / 4096
            bs = (2.0 ** (-4 - 6 * e)).astype(np.float32)
            sa = float(np.float32([0.0173, 0.0041, 0.11][j]))
            sy = float(np.float32([0.731, 0.977, 3.3][j]))
            m = np.broadcast_to(np.float64(sa) * bs.astype(np.float64) / sy, (N,))
            zy = [0, -7, 5][j]
            bias = _near_tie_bias(f"{L}/near/{gran}/{j}/k", m, zy, -128, 127)
            yield _tfl("int8", f"near_ties_{gran}_{j}", sweep_a, np.ones((1, N), np.int8), a_scale=sa,
                       b_scale=bs if n > 1 else bs.reshape(()), y_scale=sy, zy=zy, bias=bias,
                       tags=("tie", "boundary"),
                       description=f"{gran} weight scales; accumulators within +-128 of a tie of every column")
    # multiplier edges: near 2^-31 and below (Q31 underflow), near one, the Q31 carry, above one
    for name, (sa, sb, sy) in (("small_2e-31", (2.0**-16, 2.0**-15, 1.0)),
                               ("small_3x2e-33", (3 * 2.0**-17, 2.0**-16, 1.0)),
                               ("small_below_2e-32", (2.0**-20, 2.0**-20, 2.0**-3)),
                               ("near_one_below", (1 - 2.0**-24, 1.0, 1.0)), ("near_one", (1.0, 1.0, 1.0)),
                               ("near_one_above", (1 + 2.0**-23, 1.0, 1.0)), ("q31_carry", _carry_scales()),
                               ("above_one", (3.0, 5.0, 1.0)), ("non_dyadic_above_one", (1.37, 2.71, 0.93))):
        m = float(np.float32(sa)) * sb / sy
        N = 32
        if m < 1e-6:  # huge accumulators: rows sweep -128..127 around biases up to +-2^31
            bias = np.linspace(-(2.0**31) + 256, 2.0**31 - 256, N).astype(np.int64)
        else:
            bias = _near_tie_bias(f"{L}/mult/{name}/k", np.full(N, m), 0, -128, 127)
        yield _tfl("int8", f"multiplier_{name}", sweep_a, np.ones((1, N), np.int8), a_scale=float(np.float32(sa)),
                   b_scale=sb, y_scale=sy, zy=0, bias=bias, tags=("boundary",),
                   description=f"m = a_s b_s / y_s = {m!r}: Q31 quantization and shift edges")
    # zero points at the storage ends, random operands, bias
    for za, zy in ((-128, -128), (127, 127), (-128, 127)):
        a, b = _ints(f"{L}/zp/{za}{zy}/a", (16, 40), "int8"), _ints(f"{L}/zp/{za}{zy}/b", (40, 24), "int8")
        b[b == -128] = -127
        bias = _ints(f"{L}/zp/{za}{zy}/bias", (24,), "int8").astype(np.int64) * 37
        yield _tfl("int8", f"zero_points_{za}_{zy}", a, b, za=za, a_scale=0.02, b_scale=0.03, y_scale=0.4, zy=zy,
                   bias=bias, description="activation and output zero points at the storage ends")
    # random, per tensor / per channel, with and without bias (the latter also a BATCH_MATMUL problem)
    for gran in ("per_tensor", "per_channel"):
        for with_bias in (True, False):
            a = _ints(f"{L}/random/{gran}/{with_bias}/a", (256, 64), "int8")
            b, bs = _tfl_weights(f"{L}/random/{gran}/{with_bias}", (64, 128), gran == "per_channel", -9)
            bias = (qrandom.below(f"{L}/random/{gran}/bias", 128, 1 << 16).astype(np.int64) - (1 << 15)
                    if with_bias else None)
            yield _tfl("int8", f"random_{gran}{'_bias' if with_bias else ''}", a, b,
                       za=_ints(f"{L}/random/{gran}/{with_bias}/za", (), "int8"), a_scale=0.0173, b_scale=bs,
                       y_scale=0.0931, zy=_ints(f"{L}/random/{gran}/{with_bias}/zy", (), "int8"), bias=bias,
                       tags=("random",), description=f"seeded operands, {gran} weight scales")
    # no bias, per tensor (BATCH_MATMUL): K = 2, acc = (a0 - za) + (a1 - za) b1[n] sweeps the ties
    a2 = np.stack(np.meshgrid(np.arange(-128, 128, 5), np.arange(-128, 128, 9)), -1).reshape(-1, 2).astype(np.int8)
    b2 = np.stack([np.ones(40, np.int64), np.arange(40) - 20]).astype(np.int8)
    for name, sa in (("m2e-4", 2.0**-4), ("m3x2e-6", 0.75 * 2.0**-4), ("m0.0173", 0.0173)):
        for zb in (0, 3):
            yield _tfl("int8", f"nobias_ties_{name}_zb{zb}", a2, b2, za=1, zb=zb, a_scale=float(np.float32(sa)),
                       b_scale=1.0, y_scale=1.0, zy=-1, tags=("tie",),
                       description=f"no bias; accumulators (a0 - 1) + (a1 - 1)(b1 - {zb}) across ties of m = {sa!r}")
    # int16 activations and outputs (zero point 0), int8 weights: K small enough that acc stays in int32
    sweep16 = (np.arange(-128, 128, dtype=np.int64) * 255).reshape(-1, 1).astype(np.int16)
    for name, (sa, sb, sy) in (("ties_m2e-1", (0.5, 1.0, 1.0)), ("ties_m3x2e-6", (0.75 * 2.0**-4, 1.0, 1.0)),
                               ("near_ties", (0.0173, 0.0091, 0.000731))):
        N = 48
        m = np.full(N, float(np.float32(sa)) * sb / float(np.float32(sy)))
        bias = (_near_tie_bias(f"{L}/int16/{name}/k", m, 0, -32768 + 40000 * 0, 32767) if name == "near_ties"
                else (np.arange(N, dtype=np.int64) - N // 2) * 1001)
        bias = np.clip(bias, -(2**31), 2**31 - 1)
        yield _tfl("int16", f"int16_{name}", sweep16, np.ones((1, N), np.int8), za=0, a_scale=float(np.float32(sa)),
                   b_scale=sb, y_scale=float(np.float32(sy)), zy=0, bias=bias, tags=("tie",),
                   description="int16 activations (zero point 0) x int8 weights, accumulators across ties")
    for gran in ("per_tensor", "per_channel"):
        a = _ints(f"{L}/int16/{gran}/a", (128, 48), "int16")
        b, bs = _tfl_weights(f"{L}/int16/{gran}", (48, 64), gran == "per_channel", -7)
        yield _tfl("int16", f"int16_random_{gran}", a, b, za=0, a_scale=0.0173, b_scale=bs, y_scale=3.71, zy=0,
                   bias=qrandom.below(f"{L}/int16/{gran}/bias", 64, 1 << 20).astype(np.int64) - (1 << 19),
                   tags=("random",), description=f"int16 x int8, {gran} weight scales")


# ---- float outputs: MatMulIntegerToFloat, DynamicQuantizeMatMul (matmul.md §8, §9) -------------------------------
# Operations:
#   matmul_integer_to_float  inputs ``a``, ``b``, ``a_scale`` (()), ``b_scale`` (() or (N,)), ``a_zero_point``,
#                            ``b_zero_point`` (() or (N,)), optionally ``bias`` ((N,) float32); expected ``y``
#                            (M, N) float32 (matmul.md §8).
#   dynamic_quantize_matmul  inputs ``a`` (M, K) float32, ``b``, ``b_scale``, ``b_zero_point``, optionally
#                            ``bias``; expected ``y`` float32 and A's dynamic quantization ``a_codes`` (uint8),
#                            ``a_scale`` (float32 ()), ``a_zero_point`` (uint8 ()) (matmul.md §9).
#   matmul_nbits[_int8]      inputs ``a`` (M, K) float32, ``b_codes`` (N, K) uint4 values in uint8, ``scales``
#                            (N, n_blocks) float32, optionally ``zero_points`` (N, n_blocks) uint4 values in uint8
#                            and ``bias``; params ``block_size``, ``compute``; expected ``y`` (S rounded to
#                            float32), ``exact`` (float64), ``bound`` (float64), ``y_lo``, ``y_hi`` (float32): a
#                            result conforms when y_lo <= r <= y_hi (matmul.md §10.3).
FLOAT_PROFILES = ("exact", "onnxruntime", "onnxruntime_avx2")
FLOAT_SPEC = {"float": "matmul.md §8", "dynamic": "matmul.md §9", "torch_dynamic": "matmul.md §15",
              "nbits": "matmul.md §10",
              "nbits_int8": "matmul.md §10.2", "nbits_bound": "matmul.md §10.3"}
COMBOS_F = (("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8"))
NBITS_OPS = {"float32_dequantize": "matmul_nbits", "int8_blocks": "matmul_nbits_int8"}


@dataclass
class FloatSetup:
    """One float-output problem (matmul_integer_to_float or dynamic_quantize_matmul)."""

    op: str
    a_storage: str
    b_storage: str
    category: str
    a: np.ndarray
    b: np.ndarray
    b_scale: Any
    za: Any = 0
    zb: Any = 0
    a_scale: Any = None
    bias: np.ndarray | None = None
    tags: tuple[str, ...] = ("edge",)
    description: str = ""


def _float_rules(profile: str, s: FloatSetup) -> Any:
    rules = matmul_rules(profile).replace(method="float_output", bias="output")
    if rules.accumulation.pair_sum and (s.a_storage, s.b_storage) != ("uint8", "int8"):
        rules = rules.replace(pair_sum=None)  # the pair instruction is a u8 x s8 kernel's (matmul.md §3.2 C1)
    return rules


def _float_expected(s: FloatSetup, profile: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    from ...recipes.qmatmul import dynamic_quantize_matmul, matmul_integer_to_float

    rules = _float_rules(profile, s)
    with np.errstate(all="ignore"):
        if s.op == "dynamic_quantize_matmul":
            from ...recipes.qmatmul import dynamic_quantize

            q = dynamic_quantize(s.a, rules.dynamic)  # the profile's dynamic quantization (matmul.md §9, §15)
            codes, sa, za = q.codes, q.scale, q.zero_point
            r = matmul_integer_to_float(codes, s.b, a_scale=q.kernel_scale, b_scale=_f32(s.b_scale), a_zero_point=za,
                                        b_zero_point=s.zb, bias=s.bias, a_storage="uint8", b_storage=s.b_storage,
                                        rules=rules,
                                        a_scale_form="as_given" if rules.dynamic.kernel_scale != "scale" else None)
            if profile != "onnxruntime_avx2":  # the operation's own entry point gives the same result
                check = dynamic_quantize_matmul(s.a, s.b, b_scale=_f32(s.b_scale), b_zero_point=s.zb, bias=s.bias,
                                                b_storage=s.b_storage, profile=profile)
                assert check.values.tobytes() == r.values.tobytes()
            out = {"y": r.values, "a_codes": codes, "a_scale": np.asarray(sa, np.float32),
                   "a_zero_point": np.asarray(za, np.uint8)}
        else:
            r = matmul_integer_to_float(s.a, s.b, a_scale=_f32(s.a_scale), b_scale=_f32(s.b_scale), a_zero_point=s.za,
                                        b_zero_point=s.zb, bias=s.bias, a_storage=s.a_storage,
                                        b_storage=s.b_storage, rules=rules)
            out = {"y": r.values}
    return out, np.asarray(r.unspecified, dtype=bool)


def _float_inputs(s: FloatSetup) -> dict[str, np.ndarray]:
    ins: dict[str, np.ndarray] = {"a": np.ascontiguousarray(s.a), "b": np.ascontiguousarray(s.b)}
    if s.op == "matmul_integer_to_float":
        ins.update(a_scale=_f32(s.a_scale), a_zero_point=np.asarray(s.za).astype(NP[s.a_storage]))
    ins.update(b_scale=_f32(s.b_scale), b_zero_point=np.asarray(s.zb).astype(NP[s.b_storage]))
    if s.bias is not None:
        ins["bias"] = np.asarray(s.bias, dtype=np.float32)
    return ins


def _float_cases(s: FloatSetup, order: tuple[str, ...] = FLOAT_PROFILES) -> Iterator[Case]:
    groups: list[tuple[str, dict[str, np.ndarray], np.ndarray, list[str]]] = []
    for p in order:
        out, u = _float_expected(s, p)
        for g in groups:
            if all(g[1][k].tobytes() == out[k].tobytes() for k in out) and \
                    np.array_equal(g[2], u):
                g[3].append(p)
                break
        else:
            groups.append((p, out, u, [p]))
    combo = f"{s.a_storage}x{s.b_storage}" if s.op == "matmul_integer_to_float" else f"float32x{s.b_storage}"
    M, K = s.a.shape
    N = s.b.shape[1]
    spec = (SPEC["operands"], SPEC["accumulation"], FLOAT_SPEC["float"])
    if s.op == "dynamic_quantize_matmul":
        spec += (FLOAT_SPEC["dynamic"],)
        if order != FLOAT_PROFILES:
            spec += (FLOAT_SPEC["torch_dynamic"],)
    for rep, out, u, members in groups:
        yield Case(id=f"{FAMILY}/{s.op}/{combo}/{s.category}/{rep}", family=FAMILY, operation=s.op, profile=rep,
                   profiles=tuple(members), inputs=_float_inputs(s), expected=out,
                   unspecified={"y": u} if u.any() else {},
                   params={"a_storage": s.a_storage, "b_storage": s.b_storage, "output": "float32", "m": M, "k": K,
                           "n": N, "rules": _float_rules(rep, s).to_dict()},
                   tags=(*s.tags, "profile"), spec=(*spec, SPEC["profiles"]),
                   description=f"{s.op} {combo} (M={M}, K={K}, N={N}): {s.description}")


def _pow2_floats(label: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Seeded float32 values (1 + f / 2^10) 2^e, e in [lo, hi], random sign."""
    n = int(np.prod(shape))
    e = qrandom.below(label + "/e", n, hi - lo + 1).astype(np.int64) + lo
    f = qrandom.below(label + "/f", n, 1 << 10).astype(np.float64)
    sg = np.where(qrandom.below(label + "/s", n, 2) == 1, -1.0, 1.0)
    return (sg * (1 + f / 1024) * np.exp2(e.astype(np.float64))).astype(np.float32).reshape(shape)


def _integer_to_float_setups() -> Iterator[FloatSetup]:
    L = f"{FAMILY}/matmul_integer_to_float"
    op = "matmul_integer_to_float"
    for ca, cb in COMBOS_F:
        c = f"{ca}{cb}"
        lo_a, hi_a = STORAGES[ca]
        lo_b, hi_b = STORAGES[cb]
        mid_a, mid_b = _midpoint(ca), _midpoint(cb)
        # large accumulators: |acc| beyond 2^24, the float32 conversion rounds (ties of the conversion included)
        K = 1100
        a = _ints(f"{L}/large/{c}/a", (6, K), ca)
        a[0] = hi_a
        a[1] = lo_a
        b = _ints(f"{L}/large/{c}/b", (K, 8), cb)
        b[:, 0] = lo_b
        b[:, 1] = hi_b
        yield FloatSetup(op, ca, cb, "large_accumulators", a, b, b_scale=np.float32(2.0**-20), a_scale=1.0, za=mid_a,
                         zb=mid_b, tags=("boundary",),
                         description="|acc| up to K 2^14 (beyond 2^24): fl32(acc) rounds before the scaling")
        # ties of the int32 -> float32 conversion: acc = n 65,025 + t in [2^24, 2^26] (odd: a tie in [2^24, 2^25])
        big = (258, 258, 259, 259, 259, 260, 516, 516, 517, 1031, 1032, 1032)
        tail = (0, 1, 0, 1, 2, 3, 2, 3, 1, 7, 0, 2)
        K = 1032 + 8
        a = np.full((len(big), K), hi_a, NP[ca])
        for r, (nr, tr) in enumerate(zip(big, tail)):
            a[r, :nr] = lo_a  # a - za = -255
            a[r, 1032:1032 + tr] = hi_a - 1  # a - za = -1
        b = np.full((K, 4), lo_b, NP[cb])  # b - zb = -255
        b[1032:, :] = hi_b - 1  # b - zb = -1: each tail element adds 1
        b[1032:, 1] = hi_b  # column 1: no tail
        b[1::2, 2] = hi_b  # column 2: half the big products
        b[:, 3] = NP[cb](hi_b - 1)  # column 3: acc = -255 n - t... times -1: 255 n + t
        for cat, sa in (("conversion_ties", 1.0), ("conversion_ties_scaled", 0.1)):
            yield FloatSetup(op, ca, cb, cat, a, b, b_scale=np.float32(1.0), a_scale=sa, za=hi_a, zb=hi_b,
                             tags=("tie",),
                             description=f"acc = n 65,025 + t in [2^24, 2^26]: odd accumulators are ties of the "
                                         f"float32 conversion (nearest even); multiplier {sa}")
        # per-column scales: the multiplier fl32(a_s b_s) per column, with and without the float bias
        a, b = _ints(f"{L}/pc/{c}/a", (16, 40), ca), _ints(f"{L}/pc/{c}/b", (40, 24), cb)
        bs = _pow2_floats(f"{L}/pc/{c}/bs", (24,), -12, -4)
        bs = np.abs(bs)
        zb = _ints(f"{L}/pc/{c}/zb", (24,), cb)
        zb[:2] = (lo_b, hi_b)
        bias = _pow2_floats(f"{L}/pc/{c}/bias", (24,), -3, 6)
        yield FloatSetup(op, ca, cb, "per_column", a, b, b_scale=bs, a_scale=0.0173, za=lo_a, zb=zb,
                         description="per-column b scales (fl32(a_s b_s) per column) and zero points")
        yield FloatSetup(op, ca, cb, "per_column_bias", a, b, b_scale=bs, a_scale=0.0173, za=hi_a, zb=zb, bias=bias,
                         description="per-column scales, the float32 bias added after the scaling (one more rounding)")
        # the bias rounding: acc * m tiny against the bias (absorbed) and cancelling it
        a, b = _ints(f"{L}/bias/{c}/a", (8, 16), ca), _ints(f"{L}/bias/{c}/b", (16, 8), cb)
        bias = np.array([1.0, -1.0, 2.0**20, -(2.0**20), 3.0, 0.0, -0.0, 2.0**-30], np.float32)
        yield FloatSetup(op, ca, cb, "bias_rounding", a, b, b_scale=np.float32(2.0**-30 * 3), a_scale=1.0 / 3,
                         za=mid_a, zb=mid_b, bias=bias, tags=("boundary",),
                         description="products near 2^-21 added to biases 1, 2^20, 0, -0 (absorbed or rounded)")
        # zero points at the storage ends, per tensor
        a, b = _ints(f"{L}/zp/{c}/a", (8, 33), ca), _ints(f"{L}/zp/{c}/b", (33, 8), cb)
        for cat, za, zb in (("zero_points_low", lo_a, lo_b), ("zero_points_high", hi_a, hi_b)):
            yield FloatSetup(op, ca, cb, cat, a, b, b_scale=np.float32(0.0371), a_scale=0.1, za=za, zb=zb,
                             description="zero points at the storage ends")
        for cat, (M, K, N) in (("k1", (16, 1, 16)), ("m1", (1, 65, 33)), ("n1", (33, 65, 1))):
            a, b = _ints(f"{L}/{cat}/{c}/a", (M, K), ca), _ints(f"{L}/{cat}/{c}/b", (K, N), cb)
            yield FloatSetup(op, ca, cb, cat, a, b, b_scale=np.float32(0.3), a_scale=0.7,
                             za=_ints(f"{L}/{cat}/{c}/za", (), ca), zb=_ints(f"{L}/{cat}/{c}/zb", (), cb),
                             description=f"shape edge {cat}")
        a, b = _ints(f"{L}/random/{c}/a", (256, 64), ca), _ints(f"{L}/random/{c}/b", (64, 128), cb)
        bs = np.abs(_pow2_floats(f"{L}/random/{c}/bs", (128,), -10, -5))
        yield FloatSetup(op, ca, cb, "random", a, b, b_scale=bs, a_scale=0.0173, za=_ints(f"{L}/random/{c}/za", (), ca),
                         zb=_ints(f"{L}/random/{c}/zb", (128,), cb),
                         bias=_pow2_floats(f"{L}/random/{c}/bias", (128,), -4, 4), tags=("random",),
                         description="seeded operands, per-column scales and zero points, float bias")


def _dynamic_setups() -> Iterator[FloatSetup]:
    L = f"{FAMILY}/dynamic_quantize_matmul"
    op = "dynamic_quantize_matmul"
    for cb in ("int8", "uint8"):
        lo_b = STORAGES[cb][0]
        b = _ints(f"{L}/b/{cb}", (48, 16), cb)
        zb = _midpoint(cb)
        # ties of x / s: max - min = 255 2^-4 (s = 2^-4 exactly), x = (k + 1/2) 2^-4
        k = qrandom.below(f"{L}/ties/k", 8 * 48, 254).astype(np.float64)
        x = ((k - 127 + 0.5) * 2.0**-4).reshape(8, 48)
        x[0, 0], x[0, 1] = -127 * 2.0**-4, 128 * 2.0**-4
        yield FloatSetup(op, "float32", cb, "ties", x.astype(np.float32), b, b_scale=np.float32(0.02), zb=zb,
                         tags=("tie",), description="s = 2^-4 exactly, every x / s a tie (nearest even)")
        x = ((k + 0.5) * 2.0**-4).reshape(8, 48)
        x[0, 0] = 0.0
        x[0, 1] = 255 * 2.0**-4
        yield FloatSetup(op, "float32", cb, "ties_nonnegative", x.astype(np.float32), b, b_scale=np.float32(0.02),
                         zb=zb, tags=("tie",), description="min = 0: zero point 0, ties of x / s")
        x = -((k + 0.5) * 2.0**-4).reshape(8, 48)
        x[0, 1] = -255 * 2.0**-4
        yield FloatSetup(op, "float32", cb, "ties_nonpositive", x.astype(np.float32), b, b_scale=np.float32(0.02),
                         zb=zb, tags=("tie",), description="max = 0: zero point 255, ties of x / s")
        # zero point ties: -min / s = k + 1/2
        x = _pow2_floats(f"{L}/zpt/{cb}", (8, 48), -2, 1)
        x[0, 0] = -100.5 * 2.0**-3
        x[0, 1] = (255 - 100.5) * 2.0**-3
        x = np.clip(x, -100.5 * 2.0**-3, (255 - 100.5) * 2.0**-3).astype(np.float32)
        yield FloatSetup(op, "float32", cb, "zero_point_tie", x, b, b_scale=np.float32(0.02), zb=zb, tags=("tie",),
                         description="-min / s = 100.5: the zero point rounds half to even (100)")
        yield FloatSetup(op, "float32", cb, "all_zero", np.zeros((4, 48), np.float32), b, b_scale=np.float32(0.5),
                         zb=zb, bias=np.arange(16, dtype=np.float32) - 8, tags=("boundary",),
                         description="max == min == 0: scale 1, zero point 0, the output is the bias")
        x = np.full((4, 48), 3.25, np.float32)
        yield FloatSetup(op, "float32", cb, "constant_positive", x, b, b_scale=np.float32(0.5), zb=zb,
                         tags=("boundary",), description="a constant positive tensor: min is 0, x / s = 255")
        x = _pow2_floats(f"{L}/wide/{cb}", (8, 48), -20, 20)
        yield FloatSetup(op, "float32", cb, "wide_range", x, b, b_scale=np.float32(0.02), zb=lo_b, tags=("boundary",),
                         description="magnitudes 2^-20 .. 2^21: small values quantize to the zero point")
        x = _pow2_floats(f"{L}/random/{cb}", (128, 48), -3, 2)
        yield FloatSetup(op, "float32", cb, "random", x, b, b_scale=np.float32(0.0131),
                         zb=_ints(f"{L}/random/{cb}/zb", (), cb), bias=_pow2_floats(f"{L}/rbias/{cb}", (16,), -2, 2),
                         tags=("random",), description="seeded float A, float bias")


# ---- 4-bit blockwise weights: MatMulNBits (matmul.md §10) -------------------------------------------------------
def _nbits_case(cat: str, compute: str, a: np.ndarray, q: np.ndarray, s: np.ndarray, z: np.ndarray | None,
                block: int, bias: np.ndarray | None, tags: tuple[str, ...], description: str) -> Case:
    from ...profiles.matmul import NBitsCompute
    from ...recipes.qmatmul import matmul_nbits

    r = matmul_nbits(a, q, s, z, bias, block_size=block, nbits=NBitsCompute(compute))
    op = NBITS_OPS[compute]
    ins = {"a": a, "b_codes": q.astype(np.uint8), "scales": s}
    if z is not None:
        ins["zero_points"] = z.astype(np.uint8)
    if bias is not None:
        ins["bias"] = bias
    M, K = a.shape
    N = q.shape[0]
    zt = "zp" if z is not None else "nozp"
    exp = {"y": r.value, "exact": np.asarray(r.exact.round(acc_format_f64()), np.float64), "bound": r.bound,
           "y_lo": r.lo, "y_hi": r.hi}
    spec = (FLOAT_SPEC["nbits"], FLOAT_SPEC["nbits_bound"]) + ((FLOAT_SPEC["nbits_int8"],)
                                                              if compute == "int8_blocks" else ())
    return Case(id=f"{FAMILY}/{op}/float32xuint4_b{block}_{zt}/{cat}/exact", family=FAMILY, operation=op,
                profile="exact", profiles=("exact", "onnxruntime"), inputs=ins, expected=exp,
                params={"a_storage": "float32", "b_storage": "uint4", "output": "float32", "m": M, "k": K, "n": N,
                        "block_size": block, "compute": compute, "compare": "bound"},
                tags=(*tags, "profile"), spec=(*spec, SPEC["profiles"]),
                description=f"{op} (M={M}, K={K}, N={N}, block {block}, {zt}): {description}; compare within the "
                            "bound (matmul.md §10.3): y_lo <= result <= y_hi")


def acc_format_f64() -> Any:
    from ...recipes.exact import acc_format

    return acc_format("float64")


def _nbits_cases() -> Iterator[Case]:
    L = f"{FAMILY}/matmul_nbits"
    for compute in ("float32_dequantize", "int8_blocks"):
        for block in (16, 32, 64, 128):
            for zp in (True, False):
                tag = f"{block}/{'zp' if zp else 'nozp'}"
                K = 2 * block + block // 2 + 3  # not a multiple of the block: the last block is partial
                M, N = 8, 24
                a = _pow2_floats(f"{L}/{tag}/a", (M, K), -4, 3)
                nb = -(-K // block)
                q = _ints(f"{L}/{tag}/q", (N, K), "uint4").astype(np.int64)
                s = np.abs(_pow2_floats(f"{L}/{tag}/s", (N, nb), -6, -2))
                z = _ints(f"{L}/{tag}/z", (N, nb), "uint4").astype(np.int64) if zp else None
                if z is not None:
                    z[0], q[0] = 0, 15  # storage ends: q - z = 15 and -15
                    z[1], q[1] = 15, 0
                bias = _pow2_floats(f"{L}/{tag}/bias", (N,), -2, 2) if block == 32 else None
                yield _nbits_case("random", compute, a, q, s, z, block, bias, ("random",),
                                  "seeded A, codes, scales" + (", zero points" if zp else " (zero point 8)")
                                  + (", float bias" if bias is not None else ""))
        block = 32
        K = 75
        q = _ints(f"{L}/edge/q", (16, K), "uint4").astype(np.int64)
        s = np.full((16, 3), 2.0**-3, np.float32)
        a = _pow2_floats(f"{L}/edge/a", (6, K), -2, 2)
        a[0] = 0.0  # an all-zero row: every block of A is zero
        a[1, :32] = 0.0
        a[2] = 2.0**-20
        a[3, ::2] = 1.0
        a[3, 1::2] = -1.0
        yield _nbits_case("zero_blocks", compute, a, q, s, None, block, None, ("boundary",),
                          "all-zero A rows and blocks (the int8 scale of a zero block is 0), tiny and +-1 rows")
        a = _pow2_floats(f"{L}/m1/a", (1, 300), -3, 3)
        q = _ints(f"{L}/m1/q", (40, 300), "uint4").astype(np.int64)
        s = np.abs(_pow2_floats(f"{L}/m1/s", (40, 5), -6, -3))
        z = _ints(f"{L}/m1/z", (40, 5), "uint4").astype(np.int64)
        yield _nbits_case("m1", compute, a, q, s, z, 64, None, ("edge",), "M = 1 (a GEMV kernel)")


def build_float_cases() -> Iterator[Case]:
    """The float-output operations (matmul_integer_to_float, dynamic_quantize_matmul, matmul_nbits[_int8])."""
    for s in _integer_to_float_setups():
        yield from _float_cases(s)
    for s in _dynamic_setups():
        yield from _float_cases(s)
    yield from _nbits_cases()


# ---- QGemm (matmul.md §11) ----------------------------------------------------------------------------------------
# Operation ``qgemm``: inputs ``a``, ``a_scale``, ``a_zero_point``, ``b``, ``b_scale`` (() or (N,)), ``b_zero_point``,
# optionally ``c`` ((N,) int32, added in the accumulator) and, for a quantized output, ``y_scale`` and
# ``y_zero_point``; params ``alpha`` and ``output`` ("float32" or the output storage); expected ``y``.
COMBOS_QGEMM = (("uint8", "int8", "float32"), ("uint8", "uint8", "float32"), ("int8", "int8", "float32"),
                ("uint8", "int8", "uint8"), ("uint8", "uint8", "uint8"), ("int8", "int8", "int8"))


@dataclass
class QGemmSetup:
    """One QGemm problem."""

    a_storage: str
    b_storage: str
    output: str
    category: str
    a: np.ndarray
    b: np.ndarray
    a_scale: Any
    b_scale: Any
    alpha: float = 1.0
    za: Any = 0
    zb: Any = 0
    c: np.ndarray | None = None
    y_scale: Any = None
    zy: int = 0
    tags: tuple[str, ...] = ("edge",)
    description: str = ""


def _qgemm_expected(s: QGemmSetup, profile: str) -> tuple[np.ndarray, np.ndarray]:
    from ...recipes.qmatmul import qgemm

    prof = profile
    with np.errstate(all="ignore"):
        rules = matmul_rules(prof)
        if rules.accumulation.pair_sum and (s.a_storage, s.b_storage) != ("uint8", "int8"):
            prof = "onnxruntime"  # no pair instruction outside u8 x s8: the VNNI record's rules (matmul.md §3.2 C1)
        r = qgemm(s.a, s.b, a_scale=_f32(s.a_scale), b_scale=_f32(s.b_scale), a_zero_point=s.za, b_zero_point=s.zb,
                  c=s.c, y_scale=None if s.y_scale is None else _f32(s.y_scale), y_zero_point=s.zy, alpha=s.alpha,
                  a_storage=s.a_storage, b_storage=s.b_storage, output=s.output, profile=prof)
    y = r.values if s.output == "float32" else r.values.astype(NP[s.output])
    return y, np.asarray(r.unspecified, dtype=bool)


def _qgemm_cases(s: QGemmSetup) -> Iterator[Case]:
    groups: list[tuple[str, np.ndarray, np.ndarray, list[str]]] = []
    for p in FLOAT_PROFILES:
        y, u = _qgemm_expected(s, p)
        for g in groups:
            if g[1].tobytes() == y.tobytes() and np.array_equal(g[2], u):
                g[3].append(p)
                break
        else:
            groups.append((p, y, u, [p]))
    combo = f"{s.a_storage}x{s.b_storage}_{s.output}"
    M, K = s.a.shape
    N = s.b.shape[1]
    ins = {"a": np.ascontiguousarray(s.a), "a_scale": _f32(s.a_scale),
           "a_zero_point": np.asarray(s.za).astype(NP[s.a_storage]), "b": np.ascontiguousarray(s.b),
           "b_scale": _f32(s.b_scale), "b_zero_point": np.asarray(s.zb).astype(NP[s.b_storage])}
    if s.c is not None:
        ins["c"] = np.asarray(s.c, dtype=np.int32)
    if s.output != "float32":
        ins.update(y_scale=_f32(s.y_scale), y_zero_point=np.asarray(s.zy).astype(NP[s.output]))
    spec = (SPEC["operands"], SPEC["accumulation"], SPEC["bias"],
            FLOAT_SPEC["float"] if s.output == "float32" else SPEC["float"], "matmul.md §11")
    for rep, y, u, members in groups:
        yield Case(id=f"{FAMILY}/qgemm/{combo}/{s.category}/{rep}", family=FAMILY, operation="qgemm", profile=rep,
                   profiles=tuple(members), inputs=ins, expected={"y": y}, unspecified={"y": u} if u.any() else {},
                   params={"a_storage": s.a_storage, "b_storage": s.b_storage, "output": s.output, "m": M, "k": K,
                           "n": N, "alpha": s.alpha},
                   tags=(*s.tags, "profile"), spec=(*spec, SPEC["profiles"]),
                   description=f"qgemm {combo} (M={M}, K={K}, N={N}, alpha {s.alpha}): {s.description}")


def _qgemm_setups() -> Iterator[QGemmSetup]:
    L = f"{FAMILY}/qgemm"
    for ca, cb, co in COMBOS_QGEMM:
        c = f"{ca}{cb}{co}"
        lo_a, hi_b = STORAGES[ca][0], STORAGES[cb][1]
        quant = co != "float32"
        mid_y = 0 if not quant else _midpoint(co)
        ys = {"y_scale": 1.0, "zy": mid_y + 1} if quant else {}
        za, zb = _midpoint(ca), _midpoint(cb)
        a, b = _small(f"{L}/alpha/{c}/a", (16, 9), ca, za, 5), _small(f"{L}/alpha/{c}/b", (9, 24), cb, zb, 5)
        for alpha in (0.5, 0.25, 2.0):
            yield QGemmSetup(ca, cb, co, f"alpha_{alpha}", a, b, a_scale=0.5, b_scale=1.0, alpha=alpha, za=za, zb=zb,
                             tags=("tie",), description=f"alpha {alpha} folded into a_s (exact): the multiplier "
                                                        f"{alpha * 0.5}; ties of the requantization", **ys)
        a, b = _ints(f"{L}/c/{c}/a", (8, 33), ca), _ints(f"{L}/c/{c}/b", (33, 8), cb)
        cc = (qrandom.below(f"{L}/c/{c}/c", 8, 1 << 20).astype(np.int64) - (1 << 19))
        cc[:3] = (2**31 - 1, -(2**31), 2**31 - 200_000)
        yield QGemmSetup(ca, cb, co, "c_int32", a, b, a_scale=0.0625, b_scale=0.125, alpha=1.0, za=lo_a, zb=hi_b, c=cc,
                         tags=("overflow",), description="an int32 C in the accumulator, at the int32 ends: wraps",
                         **({"y_scale": 2.0**20, "zy": mid_y} if quant else {}))
        bs = np.abs(_pow2_floats(f"{L}/pc/{c}/bs", (8,), -9, -4))
        zbv = _ints(f"{L}/pc/{c}/zb", (8,), cb)
        yield QGemmSetup(ca, cb, co, "per_column", a, b, a_scale=0.0173, b_scale=bs, alpha=1.0, za=za, zb=zbv,
                         c=np.concatenate([cc[3:], cc[3:6]]),
                         description="per-column b scales and zero points, an int32 C",
                         **({"y_scale": 0.0931, "zy": mid_y} if quant else {}))
        a, b = _ints(f"{L}/random/{c}/a", (128, 48), ca), _ints(f"{L}/random/{c}/b", (48, 96), cb)
        yield QGemmSetup(ca, cb, co, "random", a, b, a_scale=0.0173, b_scale=np.abs(_pow2_floats(
            f"{L}/random/{c}/bs", (96,), -10, -5)), alpha=0.5, za=_ints(f"{L}/random/{c}/za", (), ca),
            zb=_ints(f"{L}/random/{c}/zb", (96,), cb), tags=("random",),
            description="seeded operands, per-column scales and zero points, alpha 0.5",
            **({"y_scale": 0.0931, "zy": mid_y} if quant else {}))


def build_qgemm_cases() -> Iterator[Case]:
    """QGemm cases (matmul.md §11)."""
    for s in _qgemm_setups():
        yield from _qgemm_cases(s)


# ---- MatMulBnb4 (matmul.md §12) -------------------------------------------------------------------------------------
# Operation ``matmul_bnb4``: inputs ``a`` (M, K) float32, ``b_codes`` (N, K) 4-bit codes in uint8, ``absmax``
# (ceil(N K / block),) float32; params ``block_size``, ``quant_type`` ("nf4" / "fp4"); expected as matmul_nbits.
def build_bnb4_cases() -> Iterator[Case]:
    """MatMulBnb4 cases: NF4 and FP4, blocks of 16, 64 and 256 over the flattened (N, K) weight (K not a multiple
    of the block: blocks straddle rows), seeded A, M = 1 and M = 8."""
    from ...recipes.qmatmul import matmul_bnb4

    L = f"{FAMILY}/matmul_bnb4"
    for qt in ("nf4", "fp4"):
        for block in (16, 64, 256):
            for M in (1, 8):
                K, N = 3 * block // 2 + 5, 20
                tag = f"{qt}/{block}/{M}"
                a = _pow2_floats(f"{L}/{tag}/a", (M, K), -4, 3)
                q = _ints(f"{L}/{tag}/q", (N, K), "uint4")
                nblk = -(-(N * K) // block)
                am = np.abs(_pow2_floats(f"{L}/{tag}/absmax", (nblk,), -3, 2))
                r = matmul_bnb4(a, q, am, block_size=block, quant_type=qt)
                exp = {"y": r.value, "exact": np.asarray(r.exact.round(acc_format_f64()), np.float64),
                       "bound": r.bound, "y_lo": r.lo, "y_hi": r.hi}
                yield Case(id=f"{FAMILY}/matmul_bnb4/float32x{qt}_b{block}/m{M}/exact", family=FAMILY,
                           operation="matmul_bnb4", profile="exact", profiles=("exact", "onnxruntime"),
                           inputs={"a": a, "b_codes": q.astype(np.uint8), "absmax": am}, expected=exp,
                           params={"a_storage": "float32", "b_storage": qt, "output": "float32", "m": M, "k": K,
                                   "n": N, "block_size": block, "quant_type": qt, "compare": "bound"},
                           tags=("random", "profile"), spec=("matmul.md §12", FLOAT_SPEC["nbits_bound"],
                                                             SPEC["profiles"]),
                           description=f"matmul_bnb4 {qt} (M={M}, K={K}, N={N}, block {block} over the flattened "
                                       "weight): compare within the bound (matmul.md §10.3): y_lo <= result <= y_hi")


# ---- float32 bias (matmul.md §4.1): PyTorch's quantized.linear -------------------------------------------------
#: the profiles the float-bias cases are computed under (the matmul profiles that define a float bias)
FLOAT_BIAS_PROFILES = ("exact", "torch_fbgemm", "torch_x86", "torch_qnnpack", "torch_onednn")


def _near_half(label: str, n: int, ab: np.ndarray, k: int) -> np.ndarray:
    """float32 biases near (j + 1/2) fl32(a_s b_s), j in [-k, k): ties and near-ties of the bias in accumulator
    units."""
    j = qrandom.below(label + "/j", n, 2 * k).astype(np.float64) - k
    d = (qrandom.below(label + "/d", n, 2001).astype(np.float64) - 1000) * 1e-6
    d[: n // 4] = 0  # exact half multiples (their float32 value is then rounded)
    return ((j + 0.5 + d) * np.asarray(ab, np.float64)).astype(np.float32)


def _float_bias_setups() -> Iterator[Setup]:
    """qlinear_matmul u8 x s8 -> u8 with a float32 bias per output column (one ``_q`` setup each)."""
    L = f"{FAMILY}/qlinear_matmul/float_bias"
    ca, cb, co = "uint8", "int8", "uint8"
    # dyadic scales, m = 2^-1: the bias enters exactly; ties with an odd output zero point
    a, b = _small(f"{L}/ties/a", (16, 9), ca, 128, 3), _small(f"{L}/ties/b", (9, 24), cb, 0, 3)
    ab = np.float32(2.0**-12)
    yield _q(ca, cb, co, "float_bias_ties", a, b, za=128, zb=0, a_scale=2.0**-8, b_scale=2.0**-4,
             y_scale=2.0**-11, zy=129, bias=_near_half(f"{L}/ties/bias", 24, ab, 64), tags=("tie",),
             description="dyadic scales (m = 2^-1), biases at and near half multiples of a_s b_s, odd zero point")
    # non-dyadic scales: the bias in accumulator units rounds (bias / fl(a_s b_s), bias * fl(1 / fl(a_s b_s)))
    a, b = _small(f"{L}/near/a", (32, 33), ca, 100, 1), _small(f"{L}/near/b", (33, 64), cb, 0, 1)
    sa, sb = 0.0371, 0.0123
    ab = np.float32(np.float32(sa) * np.float32(sb))
    yield _q(ca, cb, co, "float_bias_near_ties", a, b, za=100, zb=0, a_scale=sa, b_scale=sb, y_scale=float(ab),
             zy=101, bias=_near_half(f"{L}/near/bias", 64, ab, 64), tags=("tie", "boundary"),
             description="m = 1 (y_s = fl32(a_s b_s)): the output is the bias in accumulator units rounded")
    # per-column scales, symmetric and asymmetric weights
    bs = (1 + qrandom.below(f"{L}/pc/bs", 64, 1 << 10).astype(np.float64) / 1024) * 2.0**-7
    bs32 = bs.astype(np.float32)
    abc = (np.float32(0.02) * bs32).astype(np.float32)
    a, b = _ints(f"{L}/pc/a", (32, 33), ca), _ints(f"{L}/pc/b", (33, 64), cb)
    for cat, zb in (("float_bias_per_column", np.zeros(64, np.int64)),
                    ("float_bias_per_column_zero_points", _ints(f"{L}/pc/zb", (64,), cb).astype(np.int64))):
        yield _q(ca, cb, co, cat, a, b, za=_ints(f"{L}/pc/za", (), ca), zb=zb, a_scale=0.02, b_scale=bs32,
                 y_scale=1.0, zy=128, bias=_near_half(f"{L}/pc/bias/{cat}", 64, abc, 2000),
                 description="per-column b scales, biases near half multiples of a_s b_s[n]")
    # a bias beyond 2^24 accumulator units: float32 loses its low bits, an int32 bias keeps them
    a, b = _small(f"{L}/big/a", (8, 16), ca, 128, 2), _small(f"{L}/big/b", (16, 16), cb, 0, 2)
    ab = np.float32(2.0**-10)
    j = (3 * 2**24 + 1 + qrandom.below(f"{L}/big/j", 16, 64).astype(np.int64)) * np.where(np.arange(16) % 2, 1, -1)
    big = (j.astype(np.float64) * float(ab)).astype(np.float32)
    yield _q(ca, cb, co, "float_bias_beyond_2e24", a, b, za=128, zb=0, a_scale=2.0**-5, b_scale=2.0**-5,
             y_scale=2.0**15, zy=128, bias=big, tags=("boundary",),
             description="biases of about 3 * 2^24 accumulator units: fl32(acc + bias) rounds away acc's low bits")
    a, b = _ints(f"{L}/random/a", (128, 32), ca), _ints(f"{L}/random/b", (32, 128), cb)
    yield _q(ca, cb, co, "float_bias_random", a, b, za=_ints(f"{L}/random/za", (), ca), zb=0, a_scale=0.0173,
             b_scale=0.00291, y_scale=0.0931, zy=_ints(f"{L}/random/zy", (), co),
             bias=_near_half(f"{L}/random/bias", 128, np.float32(np.float32(0.0173) * np.float32(0.00291)), 3000),
             tags=("random",), description="seeded operands, per-tensor scales, float32 biases")


# ---- vectorwise int8 (LLM.int8) and weight-only products (matmul.md §13, §14) ------------------------------------
# int8_vectorwise_matmul: inputs ``a`` (M, K) float16, ``b`` (N, K) float16 (one row per output column); expected
#   ``a_codes`` / ``b_codes`` (int8), ``a_stats`` / ``b_stats`` (float32 row absmax), ``acc`` (int32 a_codes @
#   b_codes^T) and ``y`` (float16), under the vectorwise profile ``bitsandbytes_int8`` (matmul.md §13).
# weight_only_matmul: inputs ``x`` (M, K) float32, ``codes`` (N, K) 4-bit lookup codes (uint8), ``absmax`` (one
#   float32 per block of the flattened codes); params ``table``, ``block_size``; expected ``y`` (the exact product
#   rounded to float32), ``exact``, ``bound``, ``y_lo`` / ``y_hi`` (matmul.md §14; compared within the bound).
VW_PROFILE = "bitsandbytes_int8"
WO_PROFILE = "weight_only_any"


def _f16(label: str, shape: tuple[int, ...], emin: int = -4, emax: int = 2) -> np.ndarray:
    n = int(np.prod(shape))
    return qrandom.floats_in_binades(label, n, "float16", emin, emax).view(np.float16).reshape(shape)


def _vw_case(cat: str, a: np.ndarray, b: np.ndarray, tags: tuple[str, ...], description: str,
             profile: str = VW_PROFILE) -> Case:
    from ...recipes.vectorwise import vectorwise_int8_matmul, vectorwise_rules

    rules = vectorwise_rules(profile)
    r = vectorwise_int8_matmul(a, b, rules)
    M, K = a.shape
    N = b.shape[0]
    exp = {"a_codes": r.a_codes, "a_stats": r.a_stats, "b_codes": r.b_codes, "b_stats": r.b_stats,
           "acc": r.acc, "y": r.y}
    spec = ("matmul.md §13.1", "matmul.md §13.2", "matmul.md §13.3", "matmul.md §13.4")
    return Case(id=f"{FAMILY}/int8_vectorwise_matmul/{a.dtype.name}/{cat}/{profile}", family=FAMILY,
                operation="int8_vectorwise_matmul", profile=profile, profiles=(profile,),
                inputs={"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b)}, expected=exp,
                unspecified={"y": r.unspecified} if r.unspecified.any() else {},
                params={"m": M, "k": K, "n": N, "rules": rules.to_dict()}, tags=(*tags, "profile"), spec=spec,
                description=f"int8_vectorwise_matmul {a.dtype.name} (M={M}, K={K}, N={N}): {description}")


def _vectorwise_cases() -> Iterator[Case]:
    L = f"{FAMILY}/int8_vectorwise_matmul"
    a, b = _f16(L + "/random/a", (128, 512)), _f16(L + "/random/b", (256, 512))
    yield _vw_case("random", a, b, ("random",), "seeded float16 operands, |x| in [2^-4, 2^3)")
    # exact ties of x * fl32(127 / s): absmax 127 (multiplier 1) and 254 (multiplier 1/2), halves of both signs
    t = (np.arange(-126, 127) + 0.5).astype(np.float16)
    a = np.zeros((4, 256), np.float16)
    a[0, :253], a[0, 253] = t, 127
    a[1, :253], a[1, 253] = t * 2, 254
    a[2, :253], a[2, 253] = -t, -127
    a[3] = _f16(L + "/ties/a3", (256,), -2, 6)
    b = _f16(L + "/ties/b", (16, 256), -3, 3)
    yield _vw_case("ties", a, b, ("tie",), "x * 127 / absmax at exact halves (absmax 127 and 254): rint, ties "
                   "to even")
    # multipliers 127 / s that float32 rounds; float16 range ends (65504, subnormals)
    a = _f16(L + "/mult/a", (8, 64), -6, 4)
    a[:, 0] = np.array([3, 7, 0.1, 65504, 2.0**-24, 6.1e-05, 1 / 3, 11], np.float16)
    a[4] = (_f16(L + "/mult/sub", (64,), -24, -15))
    a[4, 0] = 2.0**-14
    b = _f16(L + "/mult/b", (8, 64), -6, 4)
    b[:, 0] = np.array([5, 13, 0.3, 0.7, 100, 1000, 2.0**-20, 65504], np.float16)
    yield _vw_case("multipliers", a, b, ("boundary",), "absmax 3, 7, 0.1, 65504, 2^-24, subnormal rows: "
                   "fl32(127 / s) inexact")
    # the epilogue: the constant c (matmul.md §13.3) moves float16 results; products beyond float16's range
    K = 64
    a = np.ones((4, K), np.float16)
    a[1] = 65504
    a[2, ::2] = -1
    a[3] = _f16(L + "/epi/a3", (K,), 8, 15)
    b = np.ones((5, K), np.float16)
    b[1] = 65504
    b[2] = 2.0**-8
    b[3, ::3] = -1
    b[4] = _f16(L + "/epi/b4", (K,), 8, 15)
    yield _vw_case("epilogue", a, b, ("boundary", "overflow"), "acc = K 127^2 with unit stats (c = 6.200124e-05 "
                   "vs 1 / 127^2), stats 65504 (results beyond float16: Inf)")
    # the int32 accumulator leaves its range: K = 133,200 products of 127^2 (matmul.md §13.2, §3.1)
    K = 133200
    a = np.ones((2, K), np.float16)
    a[1, 1::2] = -1
    b = np.ones((2, K), np.float16)
    b[1] = -1
    yield _vw_case("accumulator_wrap", a, b, ("overflow",), "K = 133,200: 127^2 K = 2,148,382,800 leaves int32")
    for cat, (M, K, N) in (("k1", (16, 1, 16)), ("k_odd", (9, 7, 5)), ("m1", (1, 65, 33)), ("n1", (33, 65, 1))):
        yield _vw_case(cat, _f16(f"{L}/{cat}/a", (M, K)), _f16(f"{L}/{cat}/b", (N, K)), ("edge",),
                       f"shape edge {cat}")


def _wo_case(cat: str, table: str, B: int, x: np.ndarray, codes: np.ndarray, absmax: np.ndarray,
             description: str) -> Case:
    from ...recipes.vectorwise import weight_only_matmul

    r = weight_only_matmul(x, codes, absmax, table=table, block_size=B)
    return _weight_only_record("weight_only_matmul", (f"{table}_b{B}", f"{table} block {B}"), cat, x, codes, r,
                               {"absmax": absmax}, {"table": table, "block_size": B},
                               ("matmul.md §14", "recipes.md §2.3"), description)


def _weight_only_record(operation: str, variant: tuple[str, str], cat: str, x: np.ndarray, codes: np.ndarray,
                        r: Any, inputs: dict[str, np.ndarray], params: dict[str, Any], spec: tuple[str, ...],
                        description: str) -> Case:
    """A weight-only matmul case of x (M, K) and the codes (N, K) with the expected result r (float32, in any
    summation order: compared within the bound); variant: (its id part, its words)."""
    from .recipes import _result_arrays

    exp, uns = _result_arrays(r, any_order=True)
    M, K = x.shape
    N = codes.shape[0]
    return Case(id=f"{FAMILY}/{operation}/{variant[0]}/{cat}/{WO_PROFILE}", family=FAMILY, operation=operation,
                profile=WO_PROFILE, profiles=(WO_PROFILE,), inputs={"x": x, "codes": codes, **inputs}, expected=exp,
                unspecified=uns, params={"m": M, "k": K, "n": N, **params, "compare": "bound",
                                         "accumulation": "float32_any"}, tags=(cat, "profile"), spec=spec,
                description=f"{operation} {variant[1]} (M={M}, K={K}, N={N}): {description}")


def _weight_only_cases() -> Iterator[Case]:
    L = f"{FAMILY}/weight_only_matmul"
    for table in ("nf4", "fp4_bnb"):
        for B, (M, K, N) in ((64, (8, 256, 64)), (128, (1, 512, 96))):
            n = N * K
            x = qrandom.floats_in_binades(f"{L}/{table}/{B}/x", M * K, "float32", -6, 2).view(np.float32)
            codes = qrandom.below(f"{L}/{table}/{B}/codes", n, 16).astype(np.uint8).reshape(N, K)
            am = qrandom.floats_in_binades(f"{L}/{table}/{B}/absmax", n // B, "float32", -4, 4).view(np.float32)
            yield _wo_case("random", table, B, x.reshape(M, K), codes, np.abs(am), "seeded activations, codes "
                           "and block absmax; float32 accumulation in any order")
        # cancellation: x w pairs summing to 0 exactly (the bound then rests on the absolute sum)
        K, N, B = 128, 32, 64
        codes = qrandom.below(f"{L}/{table}/cancel/codes", N * K, 16).astype(np.uint8).reshape(N, K)
        codes[:, K // 2:] = codes[:, : K // 2]
        x = np.concatenate([np.ones((2, K // 2), np.float32), -np.ones((2, K // 2), np.float32)], axis=1)
        am = np.full(N * K // B, 3.0, np.float32)
        yield _wo_case("cancellation", table, B, x, codes, am, "the exact sum is 0 (halves cancel): a nonzero "
                       "result must lie within the bound")


# int8_weight_only_matmul: inputs ``x`` (M, K) float32, ``codes`` (N, K) int8, ``scale`` (N,) float32; expected
#   ``y`` = fl32(sum_k x q * s) with its bound (float32 accumulation in any order, then one rounding of the
#   product by s: recipes.md §3.3 post_scale), ``exact``, ``bound``, ``y_lo`` / ``y_hi`` (matmul.md §14).
TAO_PROFILE = "torchao_int8_dynamic"


def _f32s(label: str, shape: tuple[int, ...], emin: int, emax: int) -> np.ndarray:
    n = int(np.prod(shape))
    return qrandom.floats_in_binades(label, n, "float32", emin, emax).view(np.float32).reshape(shape)


def _wo8_case(cat: str, x: np.ndarray, codes: np.ndarray, scale: np.ndarray, description: str) -> Case:
    from ...recipes.ops import exact_matmul

    r = exact_matmul(x, codes.astype(np.float32).T, accumulation="float32_any", out_dtype="float32",
                     post_scale=scale.reshape(1, -1))
    return _weight_only_record("int8_weight_only_matmul", ("float32", "float32"), cat, x, codes, r,
                               {"scale": scale}, {}, ("matmul.md §14", "recipes.md §2.3", "recipes.md §3.3"),
                               description)


def _torchao_int8_cases() -> Iterator[Case]:
    L = f"{FAMILY}/int8_vectorwise_matmul/torchao"
    a, b = _f32s(L + "/random/a", (128, 512), -6, 3), _f32s(L + "/random/b", (256, 512), -8, 0)
    yield _vw_case("random", a, b, ("random",), "seeded float32 operands", TAO_PROFILE)
    # amax 127.5: s = 1, m = 1; x at exact halves (rint to even), +-127.5 -> 128 clamped to 127 / -128; a zero row
    t = (np.arange(-127, 127) + 0.5).astype(np.float32)
    a = np.zeros((4, 256), np.float32)
    a[0, :254] = t
    a[1, :254] = -t[::-1]
    a[1, 254] = 127.5
    a[2, :254] = t * 2
    a[2, 254] = 255
    b = _f32s(L + "/ties/b", (16, 256), -3, 3)
    yield _vw_case("ties", a, b, ("tie", "boundary"), "amax 127.5 and 255 (s = 1, 2): halves round to even, "
                   "+-127.5 / s = +-127.5 -> 128 clamped to 127 and -128; an all-zero row (s = eps)", TAO_PROFILE)
    for cat, (M, K, N) in (("k1", (16, 1, 16)), ("k_odd", (9, 7, 5)), ("m1", (1, 65, 33)), ("n1", (33, 65, 1))):
        yield _vw_case(cat, _f32s(f"{L}/{cat}/a", (M, K), -4, 2), _f32s(f"{L}/{cat}/b", (N, K), -4, 2), ("edge",),
                       f"shape edge {cat}", TAO_PROFILE)
    L = f"{FAMILY}/int8_weight_only_matmul"
    for cat, (M, K, N) in (("random", (16, 512, 256)), ("m1", (1, 1024, 64))):
        x = _f32s(f"{L}/{cat}/x", (M, K), -6, 3)
        codes = (qrandom.below(f"{L}/{cat}/codes", N * K, 256) - 128).astype(np.int8).reshape(N, K)
        scale = np.abs(_f32s(f"{L}/{cat}/scale", (N,), -10, -4))
        yield _wo8_case(cat, x, codes, scale, "seeded activations, int8 weight codes, per-row scales")
    K, N = 256, 32
    codes = (qrandom.below(f"{L}/cancel/codes", N * K // 2, 256) - 128).astype(np.int8).reshape(N, K // 2)
    codes = np.concatenate([codes, codes], axis=1)
    x = np.concatenate([np.full((2, K // 2), 0.75, np.float32), np.full((2, K // 2), -0.75, np.float32)], axis=1)
    yield _wo8_case("cancellation", x, codes, np.full(N, 0.01, np.float32), "the exact sum is 0 (halves cancel)")


# ---- PyTorch's dynamic quantized Linear (matmul.md §15) -----------------------------------------------------------
# dynamic_quantize_matmul cases (inputs and outputs as above) under PyTorch's per-engine profiles: 7-bit
# (reduce_range) and 8-bit codes, the float64 qparams with their 0.1 and 6.1e-5 edges, the zero point added before
# the rounding (fused or not), the fused or separate bias. The weights stay within [-64, 64] so that u8 x s8 pair
# sums fit int16 (results independent of AVX-512 VNNI, matmul.md §3.2); most weight zero points are 0 (onednn).
TORCH_DYNAMIC_PROFILES = ("exact", "torch_fbgemm_dynamic", "torch_fbgemm_dynamic_8bit", "torch_qnnpack_dynamic",
                          "torch_onednn_dynamic", "torch_onednn_dynamic_8bit")


def _w64(label: str, shape: tuple[int, ...]) -> np.ndarray:
    w = (qrandom.below(label, int(np.prod(shape)), 129).astype(np.int64) - 64).astype(np.int8).reshape(shape)
    w.reshape(-1)[:2] = (-64, 64)
    return w


def _torch_dynamic_setups() -> Iterator[FloatSetup]:
    L = f"{FAMILY}/dynamic_quantize_matmul/torch"
    op = "dynamic_quantize_matmul"
    b = _w64(f"{L}/b", (48, 24))
    bias = _pow2_floats(f"{L}/bias", (24,), -3, 4)
    bias[:2] = (0.0, -0.0)
    ws = np.float32(0.0371)

    def fs(cat: str, x: np.ndarray, desc: str, tags: tuple[str, ...] = ("edge",), **kw: Any) -> FloatSetup:
        kw.setdefault("b", b)
        kw.setdefault("b_scale", ws)
        return FloatSetup(op, "float32", "int8", cat, np.asarray(x, np.float32), kw.pop("b"), zb=kw.pop("zb", 0),
                          tags=tags, description=desc, **kw)

    for bits, qmax in (("8bit", 255), ("7bit", 127)):
        for zname, z in (("z_odd", 101 if qmax == 255 else 51), ("z_even", 100 if qmax == 255 else 50)):
            k = qrandom.below(f"{L}/ties/{bits}/{zname}", 16 * 48, qmax).astype(np.float64) - z
            x = ((k + 0.5) * 2.0**-4).reshape(16, 48)
            x[0, 0], x[0, 1] = -z * 2.0**-4, (qmax - z) * 2.0**-4
            yield fs(f"x_ties_{bits}_{zname}", x, f"hi - lo = {qmax} 2^-4: s = 2^-4 exactly for {bits} codes, every "
                     f"x / s a tie, zero point {z} (added before the rounding: ties go to the even code)",
                     ("tie",), bias=bias)
    # near ties at a non-dyadic scale: x = fl32((k + 1/2) s) moved by -2..2 ulps, for both code ranges
    for bits, qmax in (("8bit", 255), ("7bit", 127)):
        lo, hi = -3.1, 7.3
        sd = (float(np.float32(hi)) - float(np.float32(lo))) / qmax
        k = qrandom.below(f"{L}/near/{bits}/k", 32 * 48, qmax).astype(np.float64) - 38
        v = ((k + 0.5) * sd).astype(np.float32)
        off = (qrandom.below(f"{L}/near/{bits}/o", v.size, 5).astype(np.int64) - 2).astype(np.int32)
        v = (v.view(np.int32) + off).view(np.float32).reshape(32, 48)
        v = np.clip(v, np.float32(lo), np.float32(hi))
        v[0, 0], v[0, 1] = lo, hi
        yield fs(f"x_near_ties_{bits}", v, "x within 2 ulps of (k + 1/2) s at s = (hi - lo) / qmax (non-dyadic): "
                 "x fl32(1 / s) + z rounded once or twice, and x / s, give different codes", ("tie",))
    x = _pow2_floats(f"{L}/zpt", (8, 48), -2, 1)
    x[0, 0], x[0, 1] = -100.5 * 2.0**-4, (255 - 100.5) * 2.0**-4
    x = np.clip(x, -100.5 * 2.0**-4, (255 - 100.5) * 2.0**-4)
    yield fs("zero_point_half", x, "-lo / s = 100.5 at 8-bit codes (s = 2^-4): the zero point rounds to even (100) "
             "(at 7-bit codes s is not dyadic)", ("tie",))
    yield fs("zero_range", np.zeros((4, 48)), "an all-zero A: scale 0.1 (PyTorch) or 1 (ONNX Runtime), zero point 0; "
             "the output is the bias", ("boundary",), bias=bias)
    x = _pow2_floats(f"{L}/tiny", (8, 48), -18, -14)
    yield fs("tiny_range", x, "hi - lo below qmax 6.1e-5: the scale is floored at fl32(6.1e-5) and lo, hi are scaled "
             "by fl32(6.1e-5 / s) (zero point from the widened range)", ("boundary",))
    yield fs("tiny_range_positive", np.abs(x), "an all-positive tiny range: the floored scale, hi = 6.1e-5 qmax",
             ("boundary",))
    x = -np.abs(_pow2_floats(f"{L}/neg", (16, 48), -3, 2))
    yield fs("all_negative", x, "max 0: the zero point is the top code (255 or 127)", ("boundary",), bias=bias)
    yield fs("all_positive", -x, "min 0: zero point 0", ("boundary",))
    for cat, (M, K) in (("k1", (16, 1)), ("k_odd", (9, 7)), ("k_tail", (5, 21))):
        x = _pow2_floats(f"{L}/{cat}", (M, K), -3, 2)
        yield fs(cat, x, f"K = {K}, M K = {M * K} elements: the quantization's vector tails",
                 b=_w64(f"{L}/{cat}/b", (K, 8)))
    bs = np.abs(_pow2_floats(f"{L}/pc/bs", (24,), -9, -4))
    x = _pow2_floats(f"{L}/pc/x", (32, 48), -3, 2)
    yield fs("per_channel", x, "per-channel weight scales (fl32(s w_s[n]); oneDNN: w_s round-tripped through its "
             "reciprocal)", b_scale=bs)
    yield fs("per_channel_bias", x, "per-channel scales and the float bias (one rounding with the product under "
             "fbgemm's FMA, two under qnnpack / oneDNN)", b_scale=bs, bias=bias)
    zb = (qrandom.below(f"{L}/zb", 24, 33).astype(np.int64) - 16).astype(np.int8)
    yield fs("weight_zero_points", x, "per-channel weight zero points (fbgemm, qnnpack; onednn takes symmetric "
             "weights)", b_scale=bs, zb=zb, bias=bias)
    yield fs("weight_zero_point_tensor", x, "a per-tensor weight zero point", zb=np.int8(-7), bias=bias)
    x = _pow2_floats(f"{L}/wide", (16, 48), -20, 20)
    yield fs("wide_range_dynamic", x, "magnitudes 2^-20 .. 2^21 (float64 scale, small values at the zero point)",
             ("boundary",), bias=bias)
    x = _pow2_floats(f"{L}/random/x", (64, 48), -3, 2)
    yield fs("random_dynamic", x, "seeded A, per-channel scales, float bias", ("random",), b_scale=bs, bias=bias)


def _torch_dynamic_cases() -> Iterator[Case]:
    for s in _torch_dynamic_setups():
        yield from _float_cases(s, TORCH_DYNAMIC_PROFILES)



# ---- qwix / AQT int8 dot with a dequantized float32 output (matmul.md §16) ----------------------------------------
# matmul_integer_to_float cases with symmetric operands (or one asymmetric operand, qwix): the two scale products
# in order (qwix, AQT: fl32(fl32(fl32(acc) a_s) b_s)) against one multiplier fl32(a_s b_s) (ONNX Runtime, and XLA
# when it folds constant scales).
JAX_DOT_PROFILES = ("exact", "onnxruntime", "qwix_int8_dot", "aqt_int8_dot", "xla_folded_scales")


def _jax_dot_setups() -> Iterator[FloatSetup]:
    L = f"{FAMILY}/matmul_integer_to_float/sym"
    op = "matmul_integer_to_float"

    def fs(cat: str, a: np.ndarray, b: np.ndarray, a_s: float, b_s: Any, desc: str, tags: tuple[str, ...] = ("edge",),
           ca: str = "int8", za: int = 0) -> FloatSetup:
        return FloatSetup(op, ca, "int8", cat, a, b, b_scale=np.asarray(b_s, np.float32), a_scale=a_s, za=za, zb=0,
                          tags=tags, description=desc)

    a, b = _ints(f"{L}/order/a", (64, 64), "int8"), _ints(f"{L}/order/b", (64, 64), "int8")
    bs = np.abs(_pow2_floats(f"{L}/order/bs", (64,), -12, -4))
    yield fs("sym_scale_order", a, b, 0.0173, bs, "non-dyadic scales: fl32(fl32(fl32(acc) a_s) b_s) and "
             "fl32(fl32(acc) fl32(a_s b_s)) differ in about a third of the outputs")
    yield fs("sym_scale_order_per_tensor", a, b, 0.0173, np.float32(0.0371), "one b scale: the same two orders")
    K = 1100
    a = _ints(f"{L}/large/a", (6, K), "int8")
    a[0], a[1] = 127, -128
    b = _ints(f"{L}/large/b", (K, 8), "int8")
    b[:, 0], b[:, 1] = -128, 127
    yield fs("sym_large_accumulators", a, b, 0.0173, np.float32(2.0**-20 * 3), "|acc| up to K 2^14 (beyond 2^24): "
             "fl32(acc) rounds before the scaling", ("boundary",))
    for cat, (M, K, N) in (("sym_k1", (16, 1, 16)), ("sym_m1", (1, 65, 33)), ("sym_n1", (33, 65, 1))):
        yield fs(cat, _ints(f"{L}/{cat}/a", (M, K), "int8"), _ints(f"{L}/{cat}/b", (K, N), "int8"), 0.7,
                 np.abs(_pow2_floats(f"{L}/{cat}/bs", (N,), -8, -2)), f"shape edge {cat[4:]}")
    a, b = _ints(f"{L}/sub/a", (16, 32), "int8"), _ints(f"{L}/sub/b", (32, 16), "int8")
    yield fs("sym_small_scales", a, b, 2.0**-60 * 1.3, np.abs(_pow2_floats(f"{L}/sub/bs", (16,), -62, -58)),
             "a_s b_s near 2^-120 (float32 normal): both orders stay normal, the products' roundings differ",
             ("boundary",))
    a, b = _ints(f"{L}/asym/a", (32, 48), "int8"), _ints(f"{L}/asym/b", (48, 32), "int8")
    yield fs("asym_a_zero_point", a, b, 0.0173, bs[:32], "an asymmetric int8 A (za = -7; qwix subtracts the int32 "
             "dot of za with B), symmetric B", za=-7)
    a = _ints(f"{L}/u8/a", (32, 48), "uint8")
    yield fs("asym_uint8_a", a, b, 0.0173, bs[:32], "a uint8 A with zero point 128, symmetric int8 B", ca="uint8",
             za=128)
    a, b = _ints(f"{L}/random/a", (128, 96), "int8"), _ints(f"{L}/random/b", (96, 128), "int8")
    bs = np.abs(_pow2_floats(f"{L}/random/bs", (128,), -10, -5))
    yield fs("sym_random", a, b, 0.0131, bs, "seeded symmetric operands, per-column scales", ("random",))


def _jax_dot_cases() -> Iterator[Case]:
    for s in _jax_dot_setups():
        yield from _float_cases(s, JAX_DOT_PROFILES)
# ---- LiteRT dynamic-range (hybrid) FULLY_CONNECTED and int16 BATCH_MATMUL (matmul.md §17, §6.6) ------------------
#: the hybrid operation's profiles: "exact" is the spec default read as hybrid_spec (matmul.md §17.4)
HYBRID_PROFILE_ORDER = ("exact", "litert_hybrid_symmetric", "litert_hybrid_asymmetric", "litert_hybrid_xnnpack")


def _hybrid_x(label: str, M: int, K: int) -> np.ndarray:
    """Rows of float32 activations with their maximum R (2^-20 .. 2^20) first (sign seeded), values at R (j + 1/2)
    / 127 and one float32 step either side, zeros."""
    e = qrandom.below(f"{label}/e", M, 41).astype(np.int64) - 20
    R = (np.ldexp(1.0 + qrandom.below(f"{label}/r", M, 1 << 23) / 2.0**23, e)).astype(np.float32).reshape(-1, 1)
    j = qrandom.below(f"{label}/j", M * K, 254).reshape(M, K) - 127
    x = (R.astype(np.float64) * (j + 0.5) / 127).astype(np.float32)
    step = qrandom.below(f"{label}/step", M * K, 4).reshape(M, K)  # 0: tie, 1: below, 2: above, 3: zero
    x = np.where(step == 1, np.nextafter(x, np.float32(-np.inf)), x)
    x = np.where(step == 2, np.nextafter(x, np.float32(np.inf)), x)
    x = np.where(step == 3, np.float32(0), x).astype(np.float32)
    sign = np.where(qrandom.below(f"{label}/sign", M, 2) == 1, np.float32(-1), np.float32(1))
    x[:, 0] = R[:, 0] * sign
    return x


def _hybrid_case(cat: str, x: np.ndarray, w: np.ndarray, ws: np.ndarray, bias: np.ndarray | None,
                 tags: tuple[str, ...], description: str) -> Iterator[Case]:
    from ...recipes.qmatmul import hybrid_matmul

    ins = {"a": np.ascontiguousarray(x, np.float32), "b": np.ascontiguousarray(w, np.int8),
           "b_scale": np.asarray(ws, np.float32)}
    if bias is not None:
        ins["bias"] = np.asarray(bias, np.float32)
    groups: list[tuple[str, np.ndarray, list[str]]] = []
    for p in HYBRID_PROFILE_ORDER:
        y = hybrid_matmul(x, w, w_scale=ins["b_scale"], bias=bias, profile="hybrid_spec" if p == "exact" else p).values
        for g in groups:
            if np.array_equal(g[1].view(np.uint32), y.view(np.uint32)):
                g[2].append(p)
                break
        else:
            groups.append((p, y, [p]))
    M, K = x.shape
    N = w.shape[1]
    gran = "per_channel" if ins["b_scale"].size > 1 else "per_tensor"
    for rep, y, members in groups:
        from ...profiles import resolve_profile

        rules = resolve_profile("hybrid_spec" if rep == "exact" else rep, "matmul").profile.rules
        yield Case(id=f"{FAMILY}/hybrid_matmul/float32xint8_float32/{cat}_{gran}/{rep}", family=FAMILY,
                   operation="hybrid_matmul", profile=rep, profiles=tuple(members), inputs=ins, expected={"y": y},
                   unspecified={}, params={"a_storage": "float32", "b_storage": "int8", "output": "float32",
                                           "m": M, "k": K, "n": N, "rules": rules.to_dict()},
                   tags=(*tags, "profile"), spec=("matmul.md §17.1", "matmul.md §17.2", "matmul.md §17.3",
                                                  "matmul.md §17.4"),
                   description=f"hybrid_matmul float32 x int8 {gran} (M={M}, K={K}, N={N}): {description}")


def _hybrid_cases() -> Iterator[Case]:
    """Dynamic-range FULLY_CONNECTED cases: ties of x / s at every row position (K = 21: the 8-wide loop and a tail
    of 5), 0.49999997 rows, one-signed and all-zero rows (zero points at the storage ends), per tensor and per
    channel weights, with and without bias, M = 1 / K = 1 / N = 1."""
    L = f"{FAMILY}/hybrid_matmul"
    for gran, nw in (("per_tensor", 1), ("per_channel", 48)):
        x = _hybrid_x(f"{L}/ties/x", 256, 21)
        w = _ints(f"{L}/ties/w", (21, 48), "int8")
        ws = (2.0 ** -(6 + qrandom.below(f"{L}/ties/{gran}/ws", nw, 4)) * (1 + qrandom.below(
            f"{L}/ties/{gran}/wm", nw, 256) / 256)).astype(np.float32)
        bias = ((qrandom.below(f"{L}/ties/bias", 48, 2001) - 1000) / 64).astype(np.float32)
        yield from _hybrid_case("ties", x, w, ws, None, ("tie",), "x at R (j + 1/2) / 127 and its float32 "
                                "neighbours at every position of rows of 21 (the vector loop and its tail)")
        yield from _hybrid_case("ties_bias", x, w, ws, bias, ("tie",), "the ties with a float32 bias")
    x = np.full((8, 19), np.float32(0.49999997), np.float32)
    x[1::2] *= -1
    x[:, 0] = 127
    x[4:, 1] = -128  # hi - lo = 255: the asymmetric scale 1
    yield from _hybrid_case("half_minus_ulp", x, np.eye(19, dtype=np.int8), np.ones(1, np.float32), None,
                            ("tie", "boundary"), "0.49999997 after a row maximum of 127 (scale 1): 1 in the vector "
                            "loop's positions, 0 in the tail")
    rows = _hybrid_x(f"{L}/one_signed/x", 64, 12)
    rows[:16] = np.abs(rows[:16])
    rows[16:32] = -np.abs(rows[16:32])
    rows[32:36] = 0
    rows[36:40, 1:] = 0
    w = _ints(f"{L}/one_signed/w", (12, 10), "int8")
    yield from _hybrid_case("one_signed", rows, w, np.float32(0.0123), None, ("boundary",),
                            "rows of one sign (asymmetric zero point -128 / 127), all-zero rows (scale 1, codes 0), "
                            "rows with one nonzero element")
    for M, K, N in ((1, 33, 7), (5, 1, 3), (3, 9, 1)):
        x = _hybrid_x(f"{L}/shape_{M}x{K}x{N}/x", M, K)
        w = _ints(f"{L}/shape_{M}x{K}x{N}/w", (K, N), "int8")
        yield from _hybrid_case(f"shape_{M}x{K}x{N}", x, w, np.full(N, 0.02, np.float32),
                                np.linspace(-1, 1, N).astype(np.float32), ("edge",), f"M = {M}, K = {K}, N = {N}")


def _litert_int16_bmm_setups() -> Iterator[Setup]:
    """int16 x int16 -> int16 (zero points 0, per tensor, no bias): LiteRT's int16 BATCH_MATMUL (an int64
    accumulator and a Q15 multiplier, matmul.md §6.6): sweeps of K = 2 accumulators, sums beyond int32."""
    L = f"{FAMILY}/qlinear_matmul/int16xint16_int16"
    a = np.stack(np.meshgrid(np.arange(-32768, 32768, 257), np.arange(-32768, 32768, 8191)), -1)
    a = a.reshape(-1, 2).astype(np.int16)
    b = np.stack([np.ones(32, np.int64), _ints(f"{L}/sweep/b", (32,), "int16").astype(np.int64)]).astype(np.int16)
    for j, (sa, sb, sy) in enumerate(((0.0173, 0.011, 0.0931), (2.0**-5, 0.75, 1.0), (0.25, 0.25, 2.0**-3 * 3))):
        yield Setup("qlinear_matmul", "int16", "int16", "int16", f"litert_int16_sweep_{j}", a, b, a_scale=sa,
                    b_scale=sb, y_scale=sy, tags=("tie",), description="a0 + a1 b1 over the int16 range")
    big = np.full((2, 4), -32768, np.int16)
    big[1, 1::2] = 32767
    yield Setup("qlinear_matmul", "int16", "int16", "int16", "litert_int16_beyond_int32", big, big.T.copy(),
                a_scale=2.0**-10, b_scale=2.0**-10, y_scale=1.0, tags=("overflow",),
                description="K = 4 products of 2^30: sums beyond int32")


#: int16 BATCH_MATMUL: the suite's profiles and LiteRT's
LITERT_INT16_PROFILE_ORDER = (*PROFILE_ORDER, "litert_batch_matmul_int16")


def build_hybrid_cases() -> Iterator[Case]:
    """The cases added with the hybrid and int16 BATCH_MATMUL profiles (appended: earlier cases unchanged)."""
    yield from _hybrid_cases()
    for s in _litert_int16_bmm_setups():
        yield from _cases(s, LITERT_INT16_PROFILE_ORDER)


# ---- float32 matrix products of CPU libraries (mma.md §10.4, §12.2) -----------------------------------------------
# Operation ``float_matmul``: inputs ``a`` (M, K) and ``b`` (K, N) float32; expected ``y`` = RN_float32 of the exact
# sum (the spec default "exact"), ``y_lo`` / ``y_hi`` (float64): the bound of mma.md §10.4 for any order of at most
# K + 2 float32 roundings around the exact sum. A library conforms within [y_lo, y_hi]; a target with a fitted CPU GEMM
# profile (qref.mma.cpu_profiles) is compared with it bit for bit (mma.md §12.2).
FLOAT_MATMUL_SPEC = ("mma.md §10.4", "mma.md §12.2")


def float_matmul_expected(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """y = RN_float32(sum_k a_k b_k) from the exact dyadic sum; [y_lo, y_hi] = exact -+ the §10.4 bound of a
    sequential float32 sum (the most roundings on one product's path: K + 2), widened outward by one float64 ulp
    and to -+Inf where it reaches float32's overflow threshold.
    Where a row of a or a column of b is not finite: y = the IEEE float64 product rounded to float32 (NaN, +-Inf),
    y_lo = y_hi = y."""
    from ... import mma as qm
    from ...recipes.exact import Dyadic

    A, B = np.asarray(a, np.float32), np.asarray(b, np.float32)
    S = Dyadic.from_floats(A).matmul(Dyadic.from_floats(B))
    fin = np.isfinite(A).all(axis=1)[:, None] & np.isfinite(B).all(axis=0)[None, :]
    with np.errstate(all="ignore"):
        ieee = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        bound = qm.matmul_bound(A, B, instruction=qm.kernel(qm.KernelAccumulation())).bound
        lo = np.nextafter(S.round("float64", "down") - bound, -np.inf)
        hi = np.nextafter(S.round("float64", "up") + bound, np.inf)
        big = float.fromhex("0x1.ffffffp+127")  # the float32 overflow threshold: beyond it RN_float32 gives Inf
        lo = np.where(lo <= -big, -np.inf, lo)
        hi = np.where(hi >= big, np.inf, hi)
    y = np.where(fin, S.round("float32").astype(np.float32), ieee)
    return {"y": y, "y_lo": np.where(fin, lo, ieee).astype(np.float64),
            "y_hi": np.where(fin, hi, ieee).astype(np.float64)}


def _fm_case(cat: str, a: np.ndarray, b: np.ndarray, tags: tuple[str, ...], description: str) -> Case:
    M, K = a.shape
    N = b.shape[1]
    return Case(id=f"{FAMILY}/float_matmul/float32xfloat32_float32/{cat}/exact", family=FAMILY,
                operation="float_matmul", profile="exact", profiles=("exact",), inputs={"a": a, "b": b},
                expected=float_matmul_expected(a, b),
                params={"a_storage": "float32", "b_storage": "float32", "output": "float32", "m": M, "k": K, "n": N,
                        "compare": "bound"},
                tags=tags, spec=FLOAT_MATMUL_SPEC,
                description=f"float32 A (M={M}, K={K}) @ B (N={N}): {description}; conforms within the bound of "
                            "mma.md §10.4 (y_lo <= result <= y_hi); a target with a fitted CPU GEMM profile is "
                            "compared with it bit for bit (mma.md §12.2)")


def _spread(label: str, shape: tuple[int, int], emin: int, emax: int) -> np.ndarray:
    """Seeded float32 values: random sign and mantissa, exponent uniform in [emin, emax] (qref.conformance.random)."""
    n = int(np.prod(shape))
    return qrandom.floats_in_binades(label, n, "float32", emin, emax).view(np.float32).reshape(shape)


def _float_matmul_cases() -> Iterator[Case]:
    L = f"{FAMILY}/float_matmul"
    shapes = (("random_16x16x64", 16, 16, 64, "a small-matrix kernel, no K blocks"),
              ("random_48x17x64", 48, 17, 64, "N mod 16 = 1: a micro-kernel's tail column"),
              ("random_64x64x300", 64, 64, 300, "M N K > 10^6: the blocked kernel, one or two K blocks"),
              ("random_64x40x1000", 64, 40, 1000, "K = 1000: several K blocks and a remainder"))
    for cat, M, N, K, what in shapes:
        yield _fm_case(cat, _spread(f"{L}/{cat}/a", (M, K), -4, 4), _spread(f"{L}/{cat}/b", (K, N), -4, 4),
                       ("random",), f"seeded operands ({what})")
    a, b = _spread(f"{L}/cancel/a", (32, 200), -3, 3), _spread(f"{L}/cancel/b", (200, 32), -3, 3)
    a[:, 100:] = -a[:, :100]
    b[100:] = b[:100]
    a[::3, 150] *= 1 + 2.0**-10  # a small remainder on every third row
    yield _fm_case("cancellation", a, b, ("edge",), "the second half of K cancels the first (a[:, 100 + k] = "
                   "-a[:, k], b[100 + k] = b[k]); every third row keeps a small remainder")
    yield _fm_case("spread", _spread(f"{L}/spread/a", (32, 96), -24, 24), _spread(f"{L}/spread/b", (96, 32), -24, 24),
                   ("edge",), "products over 2^-48 .. 2^48: the order decides which small products are absorbed")
    a, b = _spread(f"{L}/special/a", (16, 32), -2, 2), _spread(f"{L}/special/b", (32, 16), -2, 2)
    a[1, 3], a[2, 5], a[3, 7] = np.inf, -np.inf, np.nan
    b[4, 2] = np.inf
    a[4] = -0.0
    b[:, 5] = -0.0
    a[5, 0] = np.float32(2.0**127)  # one product beyond float32 where |b[0, j]| >= 2 (no other large term)
    yield _fm_case("special", a, b, ("special", "overflow"), "Inf and NaN operands, -0 rows and columns, one "
                   "product of 2^127 b[0, j] (beyond float32 where |b[0, j]| >= 2)")


def build_float_matmul_cases() -> Iterator[Case]:
    """The float32 matrix products (appended: earlier cases unchanged)."""
    yield from _float_matmul_cases()


__all__ = ["COMBOS_F", "COMBOS_INT", "COMBOS_Q", "COMBOS_QGEMM", "FAMILY", "FLOAT_BIAS_PROFILES", "FLOAT_MATMUL_SPEC",
           "FLOAT_PROFILES", "FLOAT_SPEC", "HYBRID_PROFILE_ORDER", "JAX_DOT_PROFILES", "LITERT_INT16_PROFILE_ORDER",
           "LITERT_PROFILE_ORDER", "NBITS_OPS", "NP", "PROFILE_ORDER", "SPEC", "TAO_PROFILE", "TORCH_DYNAMIC_PROFILES",
           "VW_PROFILE", "WO_PROFILE", "FloatSetup", "QGemmSetup", "Setup", "acc_format_f64", "build_bnb4_cases",
           "build_cases", "build_float_cases", "build_float_matmul_cases", "build_hybrid_cases", "build_qgemm_cases"]
