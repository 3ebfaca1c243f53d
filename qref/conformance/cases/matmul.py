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
    for s in _float_bias_setups():
        yield from _cases(s, FLOAT_BIAS_PROFILES)


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
