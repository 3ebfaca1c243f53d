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
NP = {"int8": np.int8, "uint8": np.uint8, "int4": np.int8, "uint4": np.uint8}


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
        ins["bias"] = np.asarray(s.bias, dtype=np.int32)
    return ins


def _cases(s: Setup) -> Iterator[Case]:
    results = [(p, e) for p in PROFILE_ORDER if (e := _expected(s, p)) is not None]
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
        mid_y = (lo_y + hi_y + 1) // 2
        za_t, zb_t = (lo_a + hi_a + 1) // 2, (lo_b + hi_b + 1) // 2
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
            aa = _small(f"{L}/mult/{c}/sa", (8, 64), ca, (lo_a + hi_a + 1) // 2, 3) if near else a
            bb = _small(f"{L}/mult/{c}/sb", (64, 8), cb, (lo_b + hi_b + 1) // 2, 3) if near else b
            yield _q(ca, cb, co, f"multiplier_{name}", aa, bb, za=(lo_a + hi_a + 1) // 2 if near else lo_a,
                     zb=(lo_b + hi_b + 1) // 2 if near else hi_b,
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
    yield from _vectorwise_cases()
    yield from _weight_only_cases()
    yield from _torchao_int8_cases()


# ---- vectorwise int8 (LLM.int8) and weight-only products (matmul.md §8, §9) ------------------------------------
# int8_vectorwise_matmul: inputs ``a`` (M, K) float16, ``b`` (N, K) float16 (one row per output column); expected
#   ``a_codes`` / ``b_codes`` (int8), ``a_stats`` / ``b_stats`` (float32 row absmax), ``acc`` (int32 a_codes @
#   b_codes^T) and ``y`` (float16), under the vectorwise profile ``bitsandbytes_int8`` (matmul.md §8).
# weight_only_matmul: inputs ``x`` (M, K) float32, ``codes`` (N, K) 4-bit lookup codes (uint8), ``absmax`` (one
#   float32 per block of the flattened codes); params ``table``, ``block_size``; expected ``y`` (the exact product
#   rounded to float32), ``exact``, ``bound``, ``y_lo`` / ``y_hi`` (matmul.md §9; compared within the bound).
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
    spec = ("matmul.md §8.1", "matmul.md §8.2", "matmul.md §8.3", "matmul.md §8.4")
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
    # the epilogue: the constant c (matmul.md §8.3) moves float16 results; products beyond float16's range
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
    # the int32 accumulator leaves its range: K = 133,200 products of 127^2 (matmul.md §8.2, §3.1)
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
    from .recipes import _result_arrays

    r = weight_only_matmul(x, codes, absmax, table=table, block_size=B)
    exp, uns = _result_arrays(r, any_order=True)
    M, K = x.shape
    N = codes.shape[0]
    return Case(id=f"{FAMILY}/weight_only_matmul/{table}_b{B}/{cat}/{WO_PROFILE}", family=FAMILY,
                operation="weight_only_matmul", profile=WO_PROFILE, profiles=(WO_PROFILE,),
                inputs={"x": x, "codes": codes, "absmax": absmax}, expected=exp, unspecified=uns,
                params={"m": M, "k": K, "n": N, "table": table, "block_size": B, "compare": "bound",
                        "accumulation": "float32_any"}, tags=(cat, "profile"),
                spec=("matmul.md §9", "recipes.md §2.3"),
                description=f"weight_only_matmul {table} block {B} (M={M}, K={K}, N={N}): {description}")


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
#   product by s: recipes.md §3.3 post_scale), ``exact``, ``bound``, ``y_lo`` / ``y_hi`` (matmul.md §9).
TAO_PROFILE = "torchao_int8_dynamic"


def _f32s(label: str, shape: tuple[int, ...], emin: int, emax: int) -> np.ndarray:
    n = int(np.prod(shape))
    return qrandom.floats_in_binades(label, n, "float32", emin, emax).view(np.float32).reshape(shape)


def _wo8_case(cat: str, x: np.ndarray, codes: np.ndarray, scale: np.ndarray, description: str) -> Case:
    from ...recipes.ops import exact_matmul
    from .recipes import _result_arrays

    r = exact_matmul(x, codes.astype(np.float32).T, accumulation="float32_any", out_dtype="float32",
                     post_scale=scale.reshape(1, -1))
    exp, uns = _result_arrays(r, any_order=True)
    M, K = x.shape
    N = codes.shape[0]
    return Case(id=f"{FAMILY}/int8_weight_only_matmul/float32/{cat}/{WO_PROFILE}", family=FAMILY,
                operation="int8_weight_only_matmul", profile=WO_PROFILE, profiles=(WO_PROFILE,),
                inputs={"x": x, "codes": codes, "scale": scale}, expected=exp, unspecified=uns,
                params={"m": M, "k": K, "n": N, "compare": "bound", "accumulation": "float32_any"},
                tags=(cat, "profile"), spec=("matmul.md §9", "recipes.md §2.3", "recipes.md §3.3"),
                description=f"int8_weight_only_matmul float32 (M={M}, K={K}, N={N}): {description}")


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
