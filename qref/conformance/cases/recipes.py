"""Recipe cases: delayed scaling, scaled casts, block-scaled matmul (OCP MX v1.0 §6) and ``qdq_matmul`` with
declared accumulations (docs/vectors.md, docs/spec/recipes.md).

Operations and ids (``<arith>`` is ``ftz`` (XLA:CPU flush-to-zero, what Flax runs on CPU) or ``ieee``):

  delayed_scaling  ``recipes/delayed_scaling/<fmt>/<amax_compute>/l<L>/<arith>/<category>`` (recipes.md §4).
                   Input ``amax`` (T,): the amax of step t's tensor, and the initial state ``scale0`` (1,) = 1,
                   ``history0`` (L,) = 0. Expected ``scales`` (T,): the scale step t uses (computed from the
                   history before amax_t is pushed), ``histories`` (T, L): the amax history after step t (index
                   0 the newest). float32 throughout; formula "flax"; E4M3FN and E5M2; L = 1, 4, 16.
  scaled_qdq       ``recipes/scaled_qdq/<fmt>/<division>/<arith>/s<scale>/<category>`` (recipes.md §3.3). Inputs
                   ``x`` (n,) float32 and ``scale`` (1,) float32; expected ``codes`` = cast(clip(x / s)) and ``y``
                   = fl32(decode(codes) * s). division "divide" (eager JAX) or "reciprocal" (x * fl(1 / s): XLA
                   under jit); clip to +-max, cast nearest-even. Scale edge cases read ``.../scale_edge/<label>``.
                   A NaN code matches any NaN code of the format (the sign of an arithmetic NaN is open).
  block_matmul     ``recipes/block_matmul/<scheme>/<profile>/<category>/<accumulation>`` (recipes.md §6). Inputs
                   ``lhs_codes`` (M, K), ``lhs_scales`` (M, K / B), ``rhs_codes`` (K, N), ``rhs_scales`` (K / B, N)
                   (the layout of jax.lax.scaled_dot) and for two-level NVFP4 ``lhs_global_scale`` /
                   ``rhs_global_scale`` (1,); element codes as unsigned integers (E2M1: one code per byte);
                   the exact result C[m, n] = sum_k (P_mk X_A)(Q_kn X_B) (OCP MX §6.2), X the effective block
                   scale (E8M0: 2^(byte - 127), byte 255 NaN; E4M3 value; nvidia two-level: fl32(fl32(s g)
                   fl32(1 / 2688))).
  qdq_matmul       ``recipes/qdq_matmul/<a_fmt>_x_<b_fmt>/<category>/<accumulation>`` (recipes.md §5). Inputs
                   ``a`` (M, K), ``b`` (K, N) float32 (and ``a_scale`` / ``b_scale`` where given: (1,) per
                   tensor, (M, 1) per row, (1, N) per column); expected ``a_codes``, ``b_codes``, ``a_scale`` /
                   ``b_scale`` (1,) when computed by current scaling ("amax_over_max" per tensor) and the result
                   y = fl32(fl32(acc) * fl32(a_scale * b_scale)); ``exact`` = S = a_scale b_scale sum_k ...

Accumulations (recipes.md §2.1; the case's ``params["accumulation"]`` holds every field): ``exact`` (the exact
sum rounded once), ``float32_sequential``, ``float32_pairwise``, ``float32_blocked_b<B>`` (sequential within
each scale block, then over the block sums) give bit-defined results: expected ``y``. ``float32_any`` (an
implementation-defined order and tree) is not bit-defined: the case stores ``y`` (the correctly rounded exact
result, what "exact" gives), ``exact`` (the exact result S as float64; ``exact_rounded`` marks where S needs more
than float64's 53 bits and ``exact`` holds S rounded to nearest), ``bound`` (float64, the rigorous bound of
recipes.md §2.3) and ``y_lo`` / ``y_hi`` (the least and greatest float32 v with |v - S| <= bound). A backend
conforms when lo <= result <= hi (equivalently |result - S| <= bound); bound 0 means lo = hi = y: every
conforming computation returns y bit for bit (y = S, except in qdq_matmul where an exact accumulator is then
rounded once by the post-scale: y = fl32(S_acc s)).
Everywhere: results whose exact value is NaN (a NaN operand or scale, 0 x Inf, infinities of both signs) or
+-Inf must be NaN or that infinity (NaN sign and payload open), and a zero result may be +0 or -0 (recipes.md
§2.1). Results the model cannot define (a float32 partial sum may overflow: bound +Inf) are marked unspecified
in ``y``, ``y_lo`` and ``y_hi`` and stored as 0.

Categories: see the DELAYED, CAST, BLOCK and QDQ tables below (tags, spec sections, descriptions).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from ...core.decode import decode
from ...core.encode import encode
from ...formats import FloatFormat, get_format
from ...formats.policy import CastPolicy
from ...recipes import Accumulation, DelayedScaling, MatmulResult, block_matmul, qdq_matmul
from ...recipes.exact import Dyadic, acc_format
from ...recipes.scaling import scaled_dequantize, scaled_quantize
from ...schemes.base import QArray, scheme
from ...transforms import hadamard, random_signs
from .. import random as qrandom
from ..case import Case

FAMILY = "recipes"
F32 = np.float32
SPEC = {"accum": "recipes.md §2.1", "exact": "recipes.md §2.2", "bounds": "recipes.md §2.3",
        "formulas": "recipes.md §3.2", "casts": "recipes.md §3.3", "delayed": "recipes.md §4",
        "qdq_matmul": "recipes.md §5", "block": "recipes.md §6"}
FP8 = ("float8_e4m3fn", "float8_e5m2")
ARITH = {"ftz": True, "ieee": False}
COMPARE = ("compare within the bound (recipes.md §2.3): lo <= result <= hi with y_lo / y_hi, i.e. |result - exact| "
           "<= bound; bound 0: bit for bit")


def _f32(v: Any) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, dtype=np.float64).astype(F32)


# ---------------------------------------------------------------------------------------------------------
# delayed scaling (recipes.md §4)
# ---------------------------------------------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
DELAYED: dict[str, tuple[tuple[str, ...], str]] = {
    "zero": (("edge",), "zero amaxes: the previous scale is kept through fl(1 / fl(1 / s))"),
    "nan": (("special",), "NaN amaxes: NaN stays in the ring for L steps and the scale is kept"),
    "inf": (("special", "overflow"), "+Inf amaxes: kept scale while Inf is in the ring"),
    "tiny": (("underflow", "edge"), "tiny normal amaxes: max / amax overflows (scale 0) or 1 / sf is subnormal"),
    "subnormal": (("subnormal", "underflow"), "float32-subnormal amaxes (IEEE only: unspecified under ftz, C3)"),
    "growing": (("boundary",), "amax growing by x7.3 per step across 448 and 57344"),
    "shrinking": (("boundary",), "amax shrinking by 10^-3.8 per step from 3e38"),
    "random": (("random",), "seeded amaxes over 2^-30 .. 2^30"),
    "mixed": (("edge", "special", "boundary"), "zero, NaN, Inf, tiny, growing and shrinking amaxes in one run"),
}
DELAYED_T = 20


def _delayed_sequences(full: bool) -> dict[str, np.ndarray]:
    t = np.arange(DELAYED_T, dtype=np.float64)
    seq = {
        "zero": [0, 0, 0, 3.0, 0, 0, 5.5, 0, 100, 0, 0, 0, 0.37, 0, 0, 0, 0, 0, 2.0, 0],
        "nan": [1, 2, 3, 2.5, NAN, 4, 3, 1e3, 0.5, 0.25, 7, NAN, 1, 1, 1, 1, 2, 2, 2, 2],
        "inf": [1, 2, 3, 2.5, INF, 4, 3, 1e3, 0.5, 0.25, 7, INF, 1, 1, 1, 1, 2, 2, 2, 2],
        "tiny": [0, 1.2e-38, 1e-37, 1.3e-36, 1.35e-36, 1.4e-36, 2e-36, 5e-36, 6e-36, 1e-35, 1.6e-34, 1.7e-34,
                 2e-34, 6.5e-34, 7e-34, 1e-33, 1e-30, 1e-20, 1e-36, 1.0],
        "subnormal": [1e-45, 1e-42, 0, 1e-40, 5e-39, 1.1e-38, 1.17e-38, 1.2e-38, 3e-39, 1e-41, 1.0, 1e-40, 1e-39,
                      2e-39, 4e-39, 8e-39, 1e-38, 1.1e-38, 1e-44, 0],
        "growing": list(1e-6 * 7.3**t),
        "shrinking": list(3e38 * 10.0 ** (-3.8 * t)),
        "mixed": [0, 1.0, 3.5, NAN, 2.0, 0, INF, 1e-36, 448, 448.00003, 57344, 1e10, 0.5, 0, 1e-30, 3e38, 2.0,
                  1.0, 0.37, NAN, 1e-34, 5.0, 0, 1.0],
    }
    out = {k: _f32(v) for k, v in seq.items()}
    n = 2000 if full else DELAYED_T
    r = qrandom.floats_in_binades("recipes/delayed_scaling/random", n, "float32", -30, 30)
    out["random"] = np.abs(r.view(F32))
    return out


def _delayed_cases(full: bool) -> Iterator[Case]:
    seqs = _delayed_sequences(full)
    variants = [("max", L) for L in (1, 4, 16)] + [("most_recent", 4)]
    for fmt in FP8:
        for amax_compute, L in variants:
            cats = list(seqs) if amax_compute == "max" else ["mixed"]
            for arith, ftz in ARITH.items():
                for cat in cats:
                    if cat == "subnormal" and ftz:
                        continue  # a float32-subnormal amax is unspecified under ftz (recipes.md §3.2 C3)
                    am = seqs[cat]
                    ds = DelayedScaling(fmt=fmt, history_length=L, amax_compute=amax_compute, ftz=ftz)
                    st = ds.init()
                    scale0, hist0 = st.scale.copy(), st.history.copy()
                    scales, hists = [], []
                    for a in am:
                        s, st = ds.update(st, np.asarray([a], dtype=F32))
                        scales.append(s[0])
                        hists.append(st.history.copy())
                    tags, desc = DELAYED[cat]
                    flax = amax_compute == "max" and ftz
                    yield Case(
                        id=f"{FAMILY}/delayed_scaling/{fmt}/{amax_compute}/l{L}/{arith}/{cat}", family=FAMILY,
                        operation="delayed_scaling", format=fmt,
                        params={"formula": "flax", "history_length": L, "amax_compute": amax_compute, "margin": 0,
                                "dtype": "float32", "ftz": ftz, "nan": "propagate", "steps": int(am.size),
                                "initial_scale": 1.0, "initial_history": "zeros"},
                        inputs={"amax": am, "scale0": scale0, "history0": hist0},
                        expected={"scales": np.asarray(scales, dtype=F32), "histories": np.stack(hists)},
                        tags=tags, spec=(SPEC["delayed"], SPEC["formulas"]),
                        description=f"delayed scaling ({fmt}, L = {L}, {amax_compute}, "
                                    f"{'XLA:CPU flush-to-zero' if ftz else 'IEEE gradual underflow'}"
                                    f"{': Flax 0.12.8 update_fp8_meta on CPU' if flax else ''}): {desc}; "
                                    "scales[t] is computed from the history before amax[t] is pushed",
                    )


# ---------------------------------------------------------------------------------------------------------
# scaled casts (recipes.md §3.3)
# ---------------------------------------------------------------------------------------------------------
CAST: dict[str, tuple[tuple[str, ...], str]] = {
    "values": (("values",), "every finite element value times the scale, rounded to float32, both signs"),
    "ties": (("tie", "boundary"), "every midpoint between element values times the scale, and +-1 ulp, both signs"),
    "special": (("special", "overflow", "subnormal"),
                "+-0, +-Inf, NaN, the clip boundary max * s (+-1 ulp), huge values, float32 subnormals"),
    "scale_edge": (("edge", "special", "underflow", "overflow"),
                   "a fixed probe set under a degenerate scale (0, tiny, subnormal, huge, Inf, NaN)"),
}
SCALES = {"0.37": 0.37, "1_3": 1 / 3, "0.1": 0.1, "7.1": 7.1, "1": 1.0}
SCALES_FULL = {"0.013": 0.013, "1000": 1000.0, "p2m7": 2.0**-7}
EDGE_SCALES = {"zero": 0.0, "tiny": 1e-38, "subnormal": 1e-40, "huge": 3e38, "inf": INF, "nan": NAN}


def _fmt_values(fmt: str) -> np.ndarray:
    """The finite non-negative values of a float element format, ascending (float64)."""
    f = get_format(fmt)
    assert isinstance(f, FloatFormat)
    v = decode(np.arange(1 << f.bits, dtype=np.uint64).astype(f.code_dtype), f, dtype=np.float64)
    return np.unique(v[np.isfinite(v) & (v >= 0)])


def _both_signs(x: np.ndarray) -> np.ndarray:
    x = _f32(x)
    return np.concatenate([x, -x]).astype(F32)


def _near(x: np.ndarray) -> np.ndarray:
    x = _f32(x)
    with np.errstate(over="ignore"):
        return np.concatenate([x, np.nextafter(x, F32(np.inf)), np.nextafter(x, F32(-np.inf))])


def _cast_inputs(fmt: str, s: float) -> dict[str, np.ndarray]:
    v = _fmt_values(fmt)
    M = float(v[-1])
    mids = (v[:-1] + v[1:]) / 2
    top = M + (M - v[-2]) / 2  # the midpoint above max (clipping decides before rounding)
    sf = float(F32(s))
    special = np.array([0.0, INF, NAN, M * sf, top * sf, 2 * M * sf, 1e30, float(np.finfo(F32).max), 1e-40,
                        float(np.finfo(F32).smallest_subnormal), float(np.finfo(F32).tiny), float(v[1]) * sf / 2,
                        float(v[1]) * sf * 0.75])
    return {
        "values": _both_signs(_f32(v[1:] * sf)),
        "ties": _both_signs(_near(np.append(mids, top) * sf)),
        "special": _both_signs(_near(special)),
    }


EDGE_PROBE = _both_signs(np.array([0.0, 1.0, 3.5, 1e-40, 2.5e-38, 1e-30, 448.0, 57344.0, 1e30,
                                   float(np.finfo(F32).max), INF, NAN]))


def _cast_case(fmt: str, division: str, arith: str, label: str, cat: str, x: np.ndarray, s: float) -> Case:
    ftz = ARITH[arith]
    scale = _f32([s])
    with np.errstate(invalid="ignore"):
        codes = scaled_quantize(x, scale, fmt, compute_dtype="float32", division=division, ftz=ftz)
        y = scaled_dequantize(codes, fmt, scale, dtype="float32", ftz=ftz)
    profile = None
    if ftz:
        profile = "flax" if division == "divide" else "flax_jit"
    tags, desc = CAST[cat]
    cid = (f"{FAMILY}/scaled_qdq/{fmt}/{division}/{arith}/scale_edge/{label}" if cat == "scale_edge" else
           f"{FAMILY}/scaled_qdq/{fmt}/{division}/{arith}/s{label}/{cat}")
    return Case(
        id=cid, family=FAMILY, operation="scaled_qdq", format=fmt, policy=CastPolicy(rounding="nearest_even"),
        profile=profile, profiles=(profile,) if profile else (),
        params={"compute_dtype": "float32", "division": division, "clip": True, "ftz": ftz,
                "dequantize_dtype": "float32", "nan_sign": "either"},
        inputs={"x": x, "scale": scale}, expected={"codes": codes, "y": y}, array_formats={"codes": fmt},
        tags=tags, spec=(SPEC["casts"],),
        description=f"scaled cast to {fmt}: codes = cast(clip({'x / s' if division == 'divide' else 'x * fl(1 / s)'}"
                    f", -max, max)), y = fl32(decode(codes) * s), float32 arithmetic "
                    f"({'flush-to-zero, as XLA:CPU' if ftz else 'IEEE'}); s = {float(scale[0])!r}: {desc}; "
                    "a NaN code or value matches any NaN (the sign of an arithmetic NaN is open, IEEE 754 §6.3)",
    )


def _cast_cases(full: bool) -> Iterator[Case]:
    scales = {**SCALES, **(SCALES_FULL if full else {})}
    for fmt in FP8:
        for division in ("divide", "reciprocal"):
            for arith in ARITH:
                for label, s in scales.items():
                    for cat, x in _cast_inputs(fmt, s).items():
                        yield _cast_case(fmt, division, arith, label, cat, x, s)
                for label, s in EDGE_SCALES.items():
                    yield _cast_case(fmt, division, arith, label, "scale_edge", EDGE_PROBE, s)


# ---------------------------------------------------------------------------------------------------------
# matmul results (recipes.md §2.3)
# ---------------------------------------------------------------------------------------------------------
ACCUMULATIONS = {
    "exact": Accumulation("exact", "float32"),
    "float32_sequential": Accumulation("sequential", "float32"),
    "float32_pairwise": Accumulation("pairwise", "float32"),
    "float32_any": Accumulation("any", "float32"),
}


def _acc_params(acc: Accumulation) -> dict[str, Any]:
    return {"order": acc.order, "dtype": acc.dtype, "block": acc.block, "products": acc.products, "ftz": acc.ftz}


def _result_arrays(r: MatmulResult, any_order: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(expected, unspecified) of a matmul result: y alone for a deterministic accumulation; for "any" also
    exact, exact_rounded, bound, y_lo, y_hi (module docstring)."""
    fmt = acc_format(r.out_dtype)
    y = np.asarray(r.value, dtype=F32)
    un = np.asarray(r.unspecified, dtype=bool)
    if not any_order:  # every result defined, overflow included (IEEE partial sums: +-Inf, Inf - Inf = NaN)
        return {"y": y}, {}
    sp = np.asarray(r.is_special, dtype=bool)
    fin = ~sp & ~un
    bound = np.where(un, np.inf, np.where(sp, 0.0, r.bound)).astype(np.float64)
    db = Dyadic.from_floats(np.where(fin, bound, 0.0))
    det = fin & (bound == 0)  # deterministic: every computation returns y (qdq_matmul: fl(S_acc * s), not S)
    lo = np.where(det, y, np.where(fin, (r.exact + (-db)).round(fmt, rounding="up"), r.special))
    hi = np.where(det, y, np.where(fin, (r.exact + db).round(fmt, rounding="down"), r.special))
    ex64 = r.exact.round(acc_format("float64"))
    rounded = np.asarray((Dyadic.from_floats(ex64) + (-r.exact)).num != 0, dtype=bool) & ~sp
    exact = np.where(sp, r.special, ex64)
    with np.errstate(invalid="ignore"):
        assert ((lo <= y) & (y <= hi))[fin].all() and (lo[fin] <= hi[fin]).all()
    zero = np.zeros_like(y)
    exp = {"y": np.where(un, zero, y), "exact": exact.astype(np.float64), "exact_rounded": rounded & ~un,
           "bound": bound, "y_lo": np.where(un, zero, _f32(lo)), "y_hi": np.where(un, zero, _f32(hi))}
    unspec = {k: un for k in ("y", "y_lo", "y_hi")} if un.any() else {}
    return exp, unspec


def _result_text(any_order: bool) -> str:
    if any_order:
        return ("order implementation-defined: y is the correctly rounded exact result, not bit-defined; "
                + COMPARE)
    return "a deterministic accumulation: y bit for bit (+-0 equal, NaN as NaN)"


# ---------------------------------------------------------------------------------------------------------
# block_matmul (recipes.md §6)
# ---------------------------------------------------------------------------------------------------------
BLOCK: dict[str, tuple[tuple[str, ...], str]] = {
    "random": (("random",), "random finite element codes, block scales over a few binades"),
    "exact": (("values",), "small elements and nearby scales: every result exact in float32 (bound 0)"),
    "ties": (("tie",), "S = 2^j (2^24 + t): exact float32 midpoints (t = 1, 3, 5, 7) and just above / below"),
    "zero": (("edge",), "+0 and -0 blocks, zero elements under extreme scales, exact cancellation to 0"),
    "nan": (("special",), "NaN scales, NaN and +-Inf element codes, 0 x Inf, Inf - Inf"),
    "overflow": (("overflow", "boundary"),
                 "operand values above float32's max, S at the overflow midpoint 2^128 - 2^103 and +-1 step"),
    "tiny": (("underflow", "subnormal"), "products in and below float32's subnormal range, ties at 2^-150"),
    "wide": (("random",), "block scales 2^-45 .. 2^45 within one dot: S may need more than 53 bits"),
    "global_random": (("random",), "two-level NVFP4 with global scales 2.3250308 and 517.25"),
    "global_huge": (("overflow", "special"),
                    "global scale 2e37: the effective scales of blocks with s > 17 overflow to Inf"),
    "global_tiny": (("underflow",), "global scales 1e-30: effective block scales subnormal or 0"),
    "global_zero": (("edge",), "global scale 0: every effective block scale is 0"),
}
BLOCK_SCHEMES = (("mxfp8_e4m3", "ocp"), ("mxfp8_e5m2", "ocp"), ("mxfp4", "ocp"), ("nvfp4", "ocp"),
                 ("nvfp4", "nvidia"))
MX_ONLY = ("overflow", "tiny", "wide")
BM, BN, NB = 8, 8, 4  # result shape and blocks along K


class _Ops:
    """Operand builder for one block scheme: codes (rows, NB, B) and scale codes (rows, NB) of the lhs rows
    or the rhs columns."""

    def __init__(self, sch: Any, rows: int) -> None:
        self.sch = sch
        self.elem = sch.element
        self.B = int(sch.block_size)
        self.mx = sch.kind == "mx"
        self.codes = np.zeros((rows, NB, self.B), dtype=np.uint8)
        self.scales = np.full((rows, NB), self.scale_code(1.0), dtype=np.uint8)

    def code(self, v: float) -> int:
        c = int(encode(np.asarray(v, dtype=np.float64), self.elem, rounding="nearest_even"))
        assert float(decode(np.asarray(c, dtype=self.elem.code_dtype), self.elem, dtype=np.float64)) == v, (v,)
        return c

    def scale_code(self, v: float) -> int:
        if self.mx:
            e = int(np.log2(v))
            assert 2.0**e == v and -127 <= e <= 127
            return e + 127
        c = int(encode(np.asarray(v, dtype=np.float64), "float8_e4m3fn"))
        assert float(decode(np.asarray(c, dtype=np.uint8), "float8_e4m3fn", dtype=np.float64)) == v, (v,)
        return c

    def finite_codes(self) -> np.ndarray:
        f = self.elem
        c = np.arange(1 << f.bits, dtype=np.uint64).astype(f.code_dtype)
        return c[np.isfinite(decode(c, f, dtype=np.float64))].astype(np.uint8)

    def random_codes(self, label: str, shape: tuple[int, ...]) -> np.ndarray:
        fc = self.finite_codes()
        return fc[qrandom.below(label, int(np.prod(shape)), fc.size)].reshape(shape)

    def random_scales(self, label: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        """MX: bytes 127 + [lo, hi]; NVFP4: E4M3 scale codes of 2^[lo, hi] times 1, 1.25, 1.5 or 1.75."""
        n = int(np.prod(shape))
        e = qrandom.below(label, n, hi - lo + 1) + lo
        if self.mx:
            return (e + 127).astype(np.uint8).reshape(shape)
        m = qrandom.below(label + "/m", n, 4)
        v = (1 + m / 4) * np.exp2(e.astype(np.float64))
        return encode(v, "float8_e4m3fn").astype(np.uint8).reshape(shape)


def _special_codes(elem: FloatFormat) -> dict[str, int | None]:
    """NaN / +Inf / -Inf element codes of a format (None where it has none)."""
    c = np.arange(1 << elem.bits, dtype=np.uint64).astype(elem.code_dtype)
    v = decode(c, elem, dtype=np.float64)

    def first(m: np.ndarray) -> int | None:
        idx = np.flatnonzero(m)
        return int(c[idx[0]]) if idx.size else None

    return {"nan": first(np.isnan(v)), "pinf": first(v == np.inf), "ninf": first(v == -np.inf)}


def _block_operands(name: str, profile: str, cat: str, label: str, full: bool
                    ) -> tuple[_Ops, _Ops, tuple[float, float] | None]:
    sch = scheme(name, profile=profile)
    m_rows, n_cols = (32, 32) if cat == "random" and full else (BM, BN)
    A, Bop = _Ops(sch, m_rows), _Ops(sch, n_cols)
    glob: tuple[float, float] | None = None
    if cat in ("random", "global_random", "global_huge", "global_tiny", "global_zero"):
        for side, op in (("lhs", A), ("rhs", Bop)):
            op.codes[:] = op.random_codes(f"{label}/{side}/codes", op.codes.shape)
            op.scales[:] = op.random_scales(f"{label}/{side}/scales", op.scales.shape, -6, 6)
        glob = {"global_random": (2.3250308, 517.25), "global_huge": (2e37, 1.0), "global_tiny": (1e-30, 1e-30),
                "global_zero": (0.0, 1.0)}.get(cat)
    elif cat == "exact":
        small = [v for v in _fmt_values(A.elem.name) if v <= 8 and (v * 4) == int(v * 4)]
        pick = np.array([A.code(v) for v in small] + [A.code(-v) for v in small if v > 0], dtype=np.uint8)
        for side, op in (("lhs", A), ("rhs", Bop)):
            op.codes[:] = pick[qrandom.below(f"{label}/{side}/codes", op.codes.size, pick.size)].reshape(op.codes.shape)
            e = qrandom.below(f"{label}/{side}/scales", op.scales.size, 4) - 1
            op.scales[:] = np.array([op.scale_code(2.0**int(k)) for k in e], dtype=np.uint8).reshape(op.scales.shape)
    elif cat == "ties":
        js = (0, -3, 40, -60) if A.mx else (0, -1, -2, -4)
        for m in range(BM):
            j, sg = js[m % 4], (1.0 if m < 4 else -1.0)
            A.codes[m, 0, :16] = A.code(4.0 * sg)
            A.scales[m, 0] = A.scale_code(2.0 ** (8 + j))
            A.codes[m, 1, :4] = [A.code(sg * v) for v in (1.0, 0.5, 1.0, 1.0)]
            A.scales[m, 1] = A.scale_code(2.0**j)
            A.codes[m, 2, 0] = A.code(sg)
            A.scales[m, 2] = A.scale_code(2.0 ** (j - 5))
            A.scales[m, 3] = A.scale_code(2.0**j)
        cols = [((1, 0, 0, 0), 0), ((3, 0, 0, 0), 0), ((1, 1, 0, 0), 0), ((0, 1, 0, 0), 0), ((0, 0, 4, 1), 0),
                ((0, 0, 6, 1), 0), ((1, 0, 0, 0), 1), ((1, 0, 0, 0), -1)]
        for n, (t, tiny) in enumerate(cols):
            Bop.codes[n, 0, :16] = Bop.code(4.0)
            Bop.scales[n, 0] = Bop.scale_code(2.0**8)
            Bop.codes[n, 1, :4] = [Bop.code(float(v)) for v in t]
            Bop.codes[n, 2, 0] = Bop.code(0.5 * tiny)
            Bop.scales[n, 2] = Bop.scale_code(2.0**-3)
    elif cat == "zero":
        for side, op in (("lhs", A), ("rhs", Bop)):
            op.codes[:] = op.random_codes(f"{label}/{side}/codes", op.codes.shape)
            op.scales[:] = op.random_scales(f"{label}/{side}/scales", op.scales.shape, -4, 4)
        neg0 = A.code(-0.0) if A.code(-0.0) != A.code(0.0) else 0
        A.codes[0] = 0
        A.codes[1] = neg0
        A.codes[2] = 0
        A.scales[2] = 254 if A.mx else A.scale_code(448.0)
        A.codes[3] = neg0
        A.scales[3] = 0  # MX: 2^-127; NVFP4: a +0 scale
        A.codes[4, 1] = A.codes[4, 0]  # exact cancellation: block 1 = -block 0 ...
        A.codes[4, 1] ^= np.uint8(1 << (A.elem.bits - 1))
        A.scales[4, 1] = A.scales[4, 0]
        for n in range(4):  # ... against columns whose blocks 0 and 1 are equal
            Bop.codes[n, 1] = Bop.codes[n, 0]
            Bop.scales[n, 1] = Bop.scales[n, 0]
        Bop.codes[4] = 0
        Bop.codes[5] = neg0
        if not A.mx:
            A.scales[5, :2] = 0  # nonzero elements under +0 block scales
            Bop.scales[6, 2:] = 0
    elif cat == "nan":
        sp = _special_codes(A.elem)
        for side, op in (("lhs", A), ("rhs", Bop)):
            op.codes[:] = op.random_codes(f"{label}/{side}/codes", op.codes.shape)
            op.scales[:] = op.random_scales(f"{label}/{side}/scales", op.scales.shape, -4, 4)
        nan_scale = 255 if A.mx else 0x7F
        A.scales[0, 1] = nan_scale
        Bop.scales[2, 2] = nan_scale
        if sp["nan"] is not None:
            A.codes[1, 2, 5] = sp["nan"]
            Bop.codes[5, 3, 7] = sp["nan"] | (1 << (A.elem.bits - 1))
        else:
            A.scales[1, 3] = 0xFF  # E4M3 -NaN scale (NVFP4 has no NaN element)
        if sp["pinf"] is not None:
            A.codes[2, 0, 3] = sp["pinf"]
            A.codes[3, 1, 3] = sp["ninf"]
            Bop.codes[1, 0, 3] = sp["pinf"]
            Bop.codes[4, 1, 9] = sp["ninf"]
        A.codes[4] = 0  # 0 x Inf against the Inf columns
        Bop.codes[3] = 0
    elif cat == "overflow":
        # rows 0 / 1: +-2^128 in block 0; columns choose the second term (block 1) and a tiny third (block 2)
        for m, sg in ((0, 1.0), (1, -1.0)):
            A.codes[m, 0, 0] = A.code(2.0 * sg)
            A.scales[m, 0] = 254
            A.codes[m, 1, 0] = A.code(sg)
            A.scales[m, 1] = 127 + 103
            A.codes[m, 2, 0] = A.code(sg)
            A.scales[m, 2] = 127 + 40
        cols = [(1.0, 0, -1.0, 0), (1.0, 0, -1.0, -1), (1.0, 0, -2.0, 0), (1.0, 0, -1.5, 0), (1.0, 0, -4.0, 0),
                (1.0, 0, 0.0, 0), (1.0, -1, -1.0, 0), (0.0, 0, -1.0, 0)]
        for n, (v0, e0, v1, tiny) in enumerate(cols):
            Bop.codes[n, 0, 0] = Bop.code(v0)
            Bop.scales[n, 0] = 127 + e0
            Bop.codes[n, 1, 0] = Bop.code(v1)
            Bop.codes[n, 2, 0] = Bop.code(0.5 * tiny)
        big = A.code(float(_fmt_values(A.elem.name)[-1]))
        A.codes[2, :2, 0] = big  # max 2^127 in blocks 0 and 1: against column 0 (1, -1), S = 0 exactly while any
        A.scales[2, :2] = 254  # partial sum of the two terms overflows
        A.codes[3, 3] = A.random_codes(f"{label}/lhs3", A.codes[3, 3].shape)  # operand values above float32's
        A.scales[3] = 254  # max, products with the columns' tiny block-3 scales finite and moderate
        A.codes[4:] = A.random_codes(f"{label}/lhs", A.codes[4:].shape)
        A.scales[4:] = A.random_scales(f"{label}/lhs/scales", A.scales[4:].shape, 113, 127)
        for n in range(BN):
            Bop.codes[n, 3] = Bop.random_codes(f"{label}/rhs/{n}", Bop.codes[n, 3].shape)
            Bop.scales[n, 3] = 127 - 127 + (n % 4)  # bytes 0..3: tiny, so that row 3's products stay finite
    elif cat == "tiny":
        for m, v in enumerate((1.0, -1.0, 1.5, 0.5)):
            A.codes[m, 0, 0] = A.code(v)
            A.scales[m, 0] = 127 - 75
            A.codes[m, 1, 0] = A.code(1.0)
            A.scales[m, 1] = 127 - 100
        cols = [(1.0, 0, 0.0), (1.5, 1, 0.0), (1.0, 0, 1.0), (1.0, 23, 0.0), (1.0, 0, -1.0)]
        for n, (v, e, t) in enumerate(cols):
            Bop.codes[n, 0, 0] = Bop.code(v)
            Bop.scales[n, 0] = 127 - 75 + e
            Bop.codes[n, 1, 0] = Bop.code(t)
            Bop.scales[n, 1] = 127 - 100
        A.codes[4:] = A.random_codes(f"{label}/lhs", A.codes[4:].shape)
        A.scales[4:] = A.random_scales(f"{label}/lhs/scales", A.scales[4:].shape, -127, -60)
        Bop.codes[5:] = Bop.random_codes(f"{label}/rhs", Bop.codes[5:].shape)
        Bop.scales[5:] = Bop.random_scales(f"{label}/rhs/scales", Bop.scales[5:].shape, -90, -60)
    elif cat == "wide":
        for side, op in (("lhs", A), ("rhs", Bop)):
            op.codes[:] = op.random_codes(f"{label}/{side}/codes", op.codes.shape)
            op.scales[:] = op.random_scales(f"{label}/{side}/scales", op.scales.shape, -45, 45)
    else:  # pragma: no cover
        raise AssertionError(cat)
    return A, Bop, glob


def _block_cases(full: bool) -> Iterator[Case]:
    for name, profile in BLOCK_SCHEMES:
        sch = scheme(name, profile=profile)
        mx = sch.kind == "mx"
        B = int(sch.block_size)
        if profile == "nvidia":
            cats = ["global_random", "global_huge", "global_tiny", "global_zero"]
        else:
            cats = ["random", "exact", "ties", "zero", "nan", *(MX_ONLY if mx else ())]
        accs = {"exact": Accumulation("exact", "float32"),
                f"float32_blocked_b{B}": Accumulation("blocked", "float32", block=B),
                "float32_any": Accumulation("any", "float32")}
        scale_fmt = "float8_e8m0fnu" if mx else "float8_e4m3fn"
        for cat in cats:
            label = f"{FAMILY}/block_matmul/{name}/{profile}/{cat}"
            A, Bop, glob = _block_operands(name, profile, cat, label, full)
            M, N, K = A.codes.shape[0], Bop.codes.shape[0], NB * B
            lhs_codes, lhs_scales = A.codes.reshape(M, K), A.scales.copy()
            rhs_codes, rhs_scales = Bop.codes.reshape(N, K).T.copy(), Bop.scales.T.copy()
            ga = gb = None
            if glob is not None:
                ga, gb = F32(glob[0]), F32(glob[1])
            qa = QArray(codes=lhs_codes, scheme=sch, scales=lhs_scales, global_scale=ga, axis=1)
            qb = QArray(codes=rhs_codes, scheme=sch, scales=rhs_scales, global_scale=gb, axis=0)
            inputs: dict[str, np.ndarray] = {"lhs_codes": lhs_codes, "lhs_scales": lhs_scales,
                                             "rhs_codes": rhs_codes, "rhs_scales": rhs_scales}
            if glob is not None:
                inputs["lhs_global_scale"] = np.asarray(ga, dtype=F32).reshape(1)
                inputs["rhs_global_scale"] = np.asarray(gb, dtype=F32).reshape(1)
            formats = {"lhs_codes": sch.element.name, "rhs_codes": sch.element.name, "lhs_scales": scale_fmt,
                       "rhs_scales": scale_fmt}
            tags, desc = BLOCK[cat]
            for acc_label, acc in accs.items():
                with np.errstate(invalid="ignore", over="ignore"):
                    r = block_matmul(qa, qb, accumulation=acc, out_dtype="float32")
                any_order = acc.order == "any"
                exp, unspec = _result_arrays(r, any_order)
                scale_text = ("X = 2^(byte - 127), byte 255 NaN" if mx else
                              "X = the E4M3 scale value" if glob is None else
                              "X = fl32(fl32(s * g) * fl32(1 / 2688)) with g the operand's global scale (block.md "
                              "§5.4, nvidia)")
                yield Case(
                    id=f"{label}/{acc_label}", family=FAMILY, operation="block_matmul", scheme=sch, profile=profile,
                    profiles=(profile,),
                    params={"block_size": B, "lhs_axis": 1, "rhs_axis": 0, "accumulation": _acc_params(acc),
                            "out_dtype": "float32", "zero_sign": "either", "nan_sign": "either",
                            "compare": "bound" if any_order else "bits"},
                    inputs=inputs, expected=exp, unspecified=unspec, array_formats=formats,
                    tags=(*tags, "profile"), spec=(SPEC["block"], SPEC["accum"], SPEC["bounds"]),
                    description=f"block_matmul {name} ({profile}): C[m, n] = sum_k (P_mk X_A) (Q_kn X_B) exactly, "
                                f"{scale_text}; accumulation {acc_label}: {_result_text(any_order)}; {desc}",
                )


# ---------------------------------------------------------------------------------------------------------
# qdq_matmul (recipes.md §5)
# ---------------------------------------------------------------------------------------------------------
QDQ: dict[str, tuple[tuple[str, ...], str, bool]] = {  # category -> (tags, description, scales given)
    "random": (("random",), "seeded values over 5 binades, rows and columns shifted by powers of two", False),
    "wide": (("random", "underflow"), "values over 2^-14 .. 2^14 in every row: small ones cast to subnormals or 0",
             False),
    "long": (("random",), "K = 512, values over 9 binades: sums not exact in float32, the orders differ", False),
    "zero": (("edge",), "a all zero (amax 0: scale 1 is kept), b random", False),
    "given_scales": (("random",), "per-row a_scale (M, 1) and per-column b_scale (1, N) given as inputs", True),
    "exact": (("values",), "power-of-two scales given, small-integer codes: every sum exact (bound 0)", True),
    "special": (("special", "edge"), "scales given; NaN, +-Inf (clipped to +-max), zero and subnormal entries",
                True),
}
QDQ_PAIRS = (("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"))
QM, QK, QN = 8, 40, 8


def _binades(label: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    n = int(np.prod(shape))
    return qrandom.floats_in_binades(label, n, "float32", lo, hi).view(F32).reshape(shape).copy()


def _qdq_inputs(cat: str, label: str, full: bool) -> dict[str, np.ndarray]:
    M, K, N = (32, 256, 32) if full and cat == "random" else (QM, QK, QN)
    out: dict[str, np.ndarray] = {}
    if cat in ("random", "given_scales", "special"):
        a = _binades(label + "/a", (M, K), -3, 1) * np.exp2(qrandom.below(label + "/ra", M, 9) - 4.0)[:, None]
        b = _binades(label + "/b", (K, N), -3, 1) * np.exp2(qrandom.below(label + "/rb", N, 9) - 4.0)[None, :]
        out["a"], out["b"] = _f32(a), _f32(b)
    elif cat == "long":
        out["a"], out["b"] = _binades(label + "/a", (M, 512), -6, 2), _binades(label + "/b", (512, N), -6, 2)
    elif cat == "wide":
        out["a"], out["b"] = _binades(label + "/a", (M, K), -14, 14), _binades(label + "/b", (K, N), -14, 14)
    elif cat == "zero":
        out["a"], out["b"] = np.zeros((M, K), F32), _binades(label + "/b", (K, N), -3, 3)
    elif cat == "exact":
        ia = qrandom.below(label + "/a", M * K, 17).reshape(M, K) - 8
        ib = qrandom.below(label + "/b", K * N, 17).reshape(K, N) - 8
        ea = qrandom.below(label + "/ea", M, 7) - 3
        eb = qrandom.below(label + "/eb", N, 7) - 3
        out["a"] = _f32(ia * np.exp2(ea.astype(np.float64))[:, None])
        out["b"] = _f32(ib * np.exp2(eb.astype(np.float64))[None, :])
        out["a_scale"] = _f32(np.exp2(ea.astype(np.float64) - 2)[:, None])
        out["b_scale"] = _f32(np.exp2(eb.astype(np.float64) - 1)[None, :])
    if cat == "given_scales":
        out["a_scale"] = _f32(np.abs(out["a"]).max(axis=1, keepdims=True) / 448.0 * 1.37)
        out["b_scale"] = _f32(np.abs(out["b"]).max(axis=0, keepdims=True) / 300.0)
    if cat == "special":
        a, b = out["a"], out["b"]
        a[1, 3], a[2, 5], a[3, 7] = NAN, INF, -INF
        a[4, :] = 0.0
        a[5, :5] = [1e-40, -1e-40, 1e-45, -0.0, 1e-38]
        b[2, 2], b[:, 5] = NAN, 0.0
        b[9, 6], b[11, 7] = INF, -INF
        out["a_scale"] = _f32([0.0123])  # per tensor: shape (1,)
        out["b_scale"] = _f32([0.0071])
    return out


def _qdq_cases(full: bool) -> Iterator[Case]:
    for fa, fb in QDQ_PAIRS:
        for cat, (tags, desc, given) in QDQ.items():
            label = f"{FAMILY}/qdq_matmul/{fa}_x_{fb}/{cat}"
            inp = _qdq_inputs(cat, label, full)
            for acc_label, acc in ACCUMULATIONS.items():
                with np.errstate(invalid="ignore", over="ignore"):
                    r = qdq_matmul(inp["a"], inp["b"], a_format=fa, b_format=fb, a_scale=inp.get("a_scale"),
                                   b_scale=inp.get("b_scale"), formula="amax_over_max", compute_dtype="float32",
                                   division="divide", accumulation=acc, out_dtype="float32", ftz=False)
                any_order = acc.order == "any"
                exp, unspec = _result_arrays(r, any_order)
                exp = {"a_codes": np.asarray(r.meta["a_codes"]), "b_codes": np.asarray(r.meta["b_codes"]), **exp}
                if not given:
                    exp["a_scale"] = np.asarray(r.meta["a_scale"], dtype=F32).reshape(1)
                    exp["b_scale"] = np.asarray(r.meta["b_scale"], dtype=F32).reshape(1)
                yield Case(
                    id=f"{label}/{acc_label}", family=FAMILY, operation="qdq_matmul",
                    params={"a_format": fa, "b_format": fb, "formula": "amax_over_max",
                            "scales": "given" if given else "current_per_tensor", "compute_dtype": "float32",
                            "division": "divide", "clip": True, "rounding": "nearest_even",
                            "accumulation": _acc_params(acc), "post_scale": "fl32(fl32(a_scale * b_scale))",
                            "out_dtype": "float32", "ftz": False, "zero_sign": "either", "nan_sign": "either",
                            "compare": "bound" if any_order else "bits"},
                    inputs=inp, expected=exp, unspecified=unspec,
                    array_formats={"a_codes": fa, "b_codes": fb},
                    tags=tags, spec=(SPEC["qdq_matmul"], SPEC["casts"], SPEC["accum"], SPEC["bounds"]),
                    description=f"qdq_matmul {fa} x {fb}: q = cast(clip(x / s)), acc = sum_k decode(q_a) decode(q_b) "
                                f"({acc_label}), y = fl32(fl32(acc) * fl32(s_a s_b)); {_result_text(any_order)}; "
                                f"{desc}",
                )


# ---------------------------------------------------------------------------------------------------------
# Hadamard transforms (transforms.md)
# ---------------------------------------------------------------------------------------------------------
#: (n, source dtype, arithmetic, normalize, inverse, random signs)
HADAMARD = (
    (16, "float32", "exact", True, False, True),      # the NVFP4 recipe's 16 x 16 RHT, rounded once
    (16, "bfloat16", "exact", True, False, True),
    (16, "float32", "fma_sequential_float32", True, False, True),   # TransformerEngine's CPU kernel orders (§4.2)
    (16, "bfloat16", "dot_pairs_bfloat16", True, False, True),      # (§4.3)
    (32, "float32", "exact", True, False, False),     # odd m: c = sqrt(2) / 8 is irrational
    (4, "float64", "exact", True, True, True),        # the inverse
    (128, "float32", "exact", False, False, False),   # unnormalized (c = 1)
    (8, "float16", "exact", True, False, True),
)
_HADAMARD_CATS = {
    "random": (("random",), "seeded values over 4 binades"),
    "edge": (("edge", "special", "overflow", "subnormal"),
             "NaN, +-Inf, +-0, subnormals and values near the dtype's maximum (overflow to +-Inf)"),
}


def _hadamard_cases() -> Iterator[Case]:
    npdt = {"float64": np.dtype(np.float64), "float32": np.dtype(F32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(ml_dtypes.bfloat16)}
    for n, src, arith, normalize, inverse, signed in HADAMARD:
        dt = npdt[src]
        label = (f"{FAMILY}/hadamard/n{n}/{src}/{arith}/" + ("inverse" if inverse else "forward")
                 + ("" if normalize else "_unnormalized") + ("/random_signs" if signed else "/plain"))
        rows = 6
        v = qrandom.floats_in_binades(f"{label}/x", rows * n, "float64", -2, 1).view(np.float64).reshape(rows, n)
        fi = ml_dtypes.finfo(dt)
        edge = v.copy()
        edge[0, :4] = [np.nan, 1.0, -2.0, 0.5]
        edge[1, :3] = [np.inf, 1.0, -np.inf]
        edge[2, :] = 0.0
        edge[2, 1::2] = -0.0
        edge[3, :] = float(fi.smallest_subnormal) * np.arange(1, n + 1)
        edge[4, :] = float(fi.max) * 0.75
        edge[5, :] = float(fi.max) * np.where(np.arange(n) % 2, -0.5, 0.5)
        params: dict[str, Any] = {"n": n, "axis": -1, "normalize": normalize, "inverse": inverse,
                                  "arithmetic": arith}
        for cat, xv in (("random", v), ("edge", edge)):
            with np.errstate(over="ignore", invalid="ignore"):
                x = xv.astype(dt)
            inputs: dict[str, np.ndarray] = {"x": x}
            kw: dict[str, Any] = {}
            if signed:
                inputs["signs"] = random_signs(n, 20261203 + n)
                kw["signs"] = inputs["signs"]
            with np.errstate(all="ignore"):
                y = hadamard(x, n, normalize=normalize, inverse=inverse, arithmetic=arith, **kw)
            tags, text = _HADAMARD_CATS[cat]
            sect = {"exact": "transforms.md §4.1", "fma_sequential_float32": "transforms.md §4.2",
                    "dot_pairs_bfloat16": "transforms.md §4.3"}[arith]
            yield Case(
                id=f"{label}/{cat}", family=FAMILY, operation="hadamard", params=params, inputs=inputs,
                expected={"y": y}, tags=tags, spec=("transforms.md §1", sect),
                description=f"hadamard n = {n} on {src} rows ({arith}, {'inverse' if inverse else 'forward'}, "
                            f"{'c = 1/sqrt(n)' if normalize else 'c = 1'}"
                            + (", signs = random_signs(n, seed) given as an input" if signed else "")
                            + f"): {text}",
            )


def build_cases(full: bool) -> Iterator[Case]:
    """Every recipe case (module docstring); ``full`` adds longer random runs, more scales and larger matrices."""
    yield from _delayed_cases(full)
    yield from _cast_cases(full)
    yield from _block_cases(full)
    yield from _qdq_cases(full)
    yield from _hadamard_cases()


__all__ = ["ACCUMULATIONS", "ARITH", "BLOCK", "BLOCK_SCHEMES", "CAST", "COMPARE", "DELAYED", "DELAYED_T", "EDGE_PROBE",
           "EDGE_SCALES", "F32", "FAMILY", "FP8", "HADAMARD", "MX_ONLY", "QDQ", "QDQ_PAIRS", "SCALES", "SCALES_FULL",
           "SPEC", "build_cases"]
