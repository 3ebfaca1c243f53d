"""Quantized training of one linear layer: recipe records per tensor role and GEMM (spec: recipes.md §13).

A linear layer y = x wᵀ (x: M × K activations, w: N × K weights, dy: M × N output gradients) runs three GEMMs,
each reducing over another axis, and every recipe quantizes each operand for each GEMM on its own terms:

    fprop  y  = x  · wᵀ     reduces K     operands x (M × K),   w   (N × K)
    dgrad  dx = dy · w      reduces N     operands dy (M × N),  wᵀ  (K × N)
    wgrad  dw = dyᵀ · x     reduces M     operands dyᵀ (N × M), xᵀ  (K × M)

Every operand is laid out with the GEMM's reduction axis last (the row-wise / column-wise copies of the real
systems). An ``OperandRule`` says how: an optional random Hadamard transform along the reduction axis
(docs/spec/transforms.md; applied to both operands of a GEMM, whose product it leaves unchanged), then a cast —
a multiplier cast per tile (recipes.md §12.1), a division cast per tile (§12.2, DeepSeek-V3) or a block scheme
on tiles (block.md §12). ``linear_step`` dequantizes each operand exactly (decode · scale in float64; block
schemes by their own dequantize) and gives each GEMM as ``exact_matmul`` of the dequantized operands: the exact
result, its correct rounding, and the bound of the declared accumulation (§13.1); with ``mma=`` a GEMM is
computed by a matrix-unit model from the codes and scales instead, with the unit's declared bound (§13.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.decode import decode
from ..core.exact import as_source_array
from ..errors import QrefError, check_choice, unknown_name
from ..formats import get_format
from ..formats.policy import STOCHASTIC_MODES
from ..mma import Instruction, MMAAccumulation, as_mma_accumulation, matmul, matmul_bound, scaled_bound
from ..mma.bits import storage_dtype
from ..schemes import scheme
from ..transforms import ARITHMETICS, hadamard
from .multiplier import (
    DEEPSEEK_V3,
    DEEPSEEK_V3_1,
    TORCHAO_FLOAT8,
    TRANSFORMER_ENGINE_BLOCKWISE,
    TRANSFORMER_ENGINE_CURRENT_SCALING,
    DivisionCast,
    DivisionRules,
    MultiplierCast,
    MultiplierRules,
)
from .ops import Accumulation, MatmulResult, exact_matmul

GEMMS = ("fprop", "dgrad", "wgrad")
CASTS = ("multiplier", "division", "block", "none")
STATUSES = ("peer_vectors", "modelled")


@dataclass(frozen=True)
class OperandRule:
    """How one operand of one GEMM is quantized (its reduction axis last).

    cast: "multiplier" (recipes.md §12), "division" (§12.2), "block" (a block scheme on tiles, block.md §12) or
        "none" (kept as is).
    element: the element format (float8_e4m3fn, float8_e5m2, float4_e2m1fn...).
    tile: per axis (rows, reduction) the tile extent, None = the whole axis: (None, None) per tensor, (1, None)
        per row, (1, 128), (128, 128), (1, 32), (16, 16).
    multiplier: the MultiplierRules of a multiplier cast.
    division: the DivisionRules of a division cast.
    block_scheme / block_profile: the block scheme name and profile of a block cast ("mxfp8_e4m3", "nvidia").
    hadamard: size of the random Hadamard transform along the reduction axis, or None.
    hadamard_signs: its sign vector (+-1, length hadamard), or None for the plain Hadamard transform.
    hadamard_arithmetic: "exact" (default: one rounding, transforms.md), a kernel order of transforms.md §4, or
        "input_dtype_kernel" (fma_sequential_float32 for float32 input, dot_pairs_bfloat16 for bfloat16: the
        matmul TransformerEngine's reference runs on CPU).
    rounding: "nearest_even" (default) or a stochastic mode "stochastic_a" / "stochastic_b" / "stochastic_c"
        (block casts only: the block scheme's element rounding, block.md §13; linear_step's seed= gives the
        random bits, recipes.md §13.3).
    stochastic_bits: N, random bits per element of a stochastic rounding (None for nearest_even).
    """

    cast: str
    element: str = "float8_e4m3fn"
    tile: tuple[int | None, ...] = (None, None)
    multiplier: MultiplierRules | None = None
    division: DivisionRules | None = None
    block_scheme: str | None = None
    block_profile: str | None = None
    hadamard: int | None = None
    hadamard_signs: tuple[int, ...] | None = None
    hadamard_arithmetic: str = "exact"
    rounding: str = "nearest_even"
    stochastic_bits: int | None = None

    def __post_init__(self) -> None:
        check_choice("operand cast", self.cast, CASTS)
        check_choice("operand rounding", self.rounding, ("nearest_even", *STOCHASTIC_MODES))
        if (self.rounding in STOCHASTIC_MODES) != (self.stochastic_bits is not None):
            raise QrefError(f"rounding={self.rounding!r} and stochastic_bits={self.stochastic_bits!r}: a stochastic "
                            "rounding takes stochastic_bits=N (1..32), nearest_even takes none")
        if self.rounding in STOCHASTIC_MODES and self.cast != "block":
            raise QrefError(f"stochastic rounding is modelled for block casts (block.md §13), not a {self.cast} "
                            "cast")
        check_choice("Hadamard arithmetic", self.hadamard_arithmetic, (*ARITHMETICS, "input_dtype_kernel"))
        if len(self.tile) != 2:
            raise QrefError(f"an operand tile has two entries (rows, reduction), got {self.tile!r}")
        if self.cast == "multiplier" and self.multiplier is None:
            raise QrefError("a multiplier cast needs its MultiplierRules (multiplier=...)")
        if self.cast == "division" and self.division is None:
            raise QrefError("a division cast needs its DivisionRules (division=...)")
        if self.cast == "block" and (self.block_scheme is None or any(t is None for t in self.tile)):
            raise QrefError("a block cast needs block_scheme= and a tile of two integers")
        get_format(self.element)

    def quantize(self, a: np.ndarray, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """(exact values of the quantized operand as float64, the cast's raw outputs). seed: the PCG64 seed of a
        stochastic rounding's random bits (one per element of the transformed operand, C order)."""
        stochastic = self.rounding in STOCHASTIC_MODES
        if stochastic and seed is None:
            raise QrefError("this operand rounds stochastically (block.md §13): pass linear_step(..., seed=S), or "
                            "study the recipe without it: recipe.with_rounding('nearest_even')")
        if self.hadamard is not None:
            signs = None if self.hadamard_signs is None else np.asarray(self.hadamard_signs)
            arith = self.hadamard_arithmetic
            if arith == "input_dtype_kernel":
                kernels = {"float32": "fma_sequential_float32", "bfloat16": "dot_pairs_bfloat16"}
                if a.dtype.name not in kernels:
                    raise QrefError(f"hadamard_arithmetic='input_dtype_kernel' is defined for float32 and bfloat16 "
                                    f"input, got {a.dtype}")
                arith = kernels[a.dtype.name]
            a = hadamard(a, self.hadamard, axis=-1, signs=signs, dtype=a.dtype, arithmetic=arith)
        if self.cast == "none":
            return np.asarray(a, dtype=np.float64), {"values": a}
        if self.cast == "multiplier":
            assert self.multiplier is not None
            c = MultiplierCast(get_format(self.element), self.tile, self.multiplier)
            with np.errstate(all="ignore"):
                out = c.quantize(a)
                v = get_values(c, out)
            return v, out
        if self.cast == "division":
            assert self.division is not None
            d = DivisionCast(get_format(self.element), self.tile, self.division)
            with np.errstate(all="ignore"):
                out = d.quantize(a)
                v = decode(out["codes"], d.element, dtype=np.float64) * d.expand(out["scales"], a.shape)
            return v, out
        opts: dict[str, Any] = {"rounding": self.rounding, "stochastic_bits": self.stochastic_bits} if stochastic \
            else {}
        s = scheme(self.block_scheme, profile=self.block_profile, block_shape=self.tile, **opts)  # type: ignore[arg-type]
        with np.errstate(all="ignore"):
            q = s.quantize(a, seed=seed) if stochastic else s.quantize(a)
            v = s.dequantize(q, dtype=np.float64)
        return v, {"qarray": q}


def get_values(c: MultiplierCast, out: dict[str, np.ndarray]) -> np.ndarray:
    """Exact values decode(code) / m of a multiplier cast (float64: an FP8 significand times a float32 power
    range is exact; m = 0 gives the NaN / Inf of the division)."""
    v = decode(out["codes"], c.element, dtype=np.float64)
    m = c.expand(out["multipliers"], out["codes"].shape).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return v / m


@dataclass(frozen=True)
class TrainingRecipe:
    """One quantized-training recipe: an OperandRule per operand of each GEMM (recipes.md §13).

    fprop: (x, w); dgrad: (dy, wᵀ); wgrad: (dyᵀ, xᵀ). accumulation: the GEMMs' declared accumulation
    (default Accumulation(): float32, any order, exact products). source: what the record was read from.
    status: peer_vectors (every operand cast is held to the real code's vectors) or modelled.
    """

    name: str
    fprop: tuple[OperandRule, OperandRule]
    dgrad: tuple[OperandRule, OperandRule]
    wgrad: tuple[OperandRule, OperandRule]
    accumulation: Accumulation = field(default_factory=Accumulation)
    source: str = ""
    status: str = "modelled"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_choice("recipe status", self.status, STATUSES)

    def with_rounding(self, rounding: str, stochastic_bits: int | None = None) -> TrainingRecipe:
        """The same recipe with every operand's rounding replaced (e.g. to study it without stochastic
        rounding); a stochastic mode (with stochastic_bits=N) replaces the block casts' rounding only."""
        sto = rounding in STOCHASTIC_MODES

        def one(op: OperandRule) -> OperandRule:
            if sto and op.cast != "block":
                return op
            return replace(op, rounding=rounding, stochastic_bits=stochastic_bits if sto else None)

        def fix(pair: tuple[OperandRule, OperandRule]) -> tuple[OperandRule, OperandRule]:
            return (one(pair[0]), one(pair[1]))

        return replace(self, fprop=fix(self.fprop), dgrad=fix(self.dgrad), wgrad=fix(self.wgrad))


@dataclass
class LinearStep:
    """The result of ``linear_step``: per GEMM the quantized operands' raw outputs, their exact values, the
    GEMM (a MatmulResult: value, exact, bound; a float64 array under gemm="float64") and the unquantized
    reference product (float64)."""

    recipe: TrainingRecipe
    operands: dict[str, tuple[dict[str, Any], dict[str, Any]]]
    values: dict[str, tuple[np.ndarray, np.ndarray]]
    results: dict[str, MatmulResult | np.ndarray]
    reference: dict[str, np.ndarray]


def linear_step(x: object, w: object, grad_out: object, recipe: TrainingRecipe, *,
                accumulation: Accumulation | str | None = None, gemm: str = "exact",
                mma: MMAModel | Mapping[str, MMAModel] | None = None, seed: int | None = None) -> LinearStep:
    """fprop, dgrad and wgrad of y = x wᵀ under ``recipe`` (recipes.md §13). x: (M, K), w: (N, K), grad_out:
    (M, N), float32 / bfloat16 / float16. accumulation overrides the recipe's. gemm: "exact" (default:
    ``exact_matmul`` — exact result, correct rounding, the accumulation's bound; Python integers, slow beyond a
    few hundred per side) or "float64" (numpy's float64 matmul of the exact operand values, in ``reference``'s
    place of a MatmulResult: for error studies on large tensors; no bound).

    mma: a matrix-unit model for every GEMM (``qref.mma.get(...)``, "arch/instruction/qualifier" or
    ``qref.mma.MMAAccumulation``), or a dict {"fprop" | "dgrad" | "wgrad": model} (GEMMs left out stay exact).
    Each such GEMM is computed by ``qref.mma.matmul`` on the quantized operands' codes with their scales mapped
    as recipes.md §13.2 says (block scales to a block-scaled unit; per-tensor / per-row scales in the epilogue;
    K-tiled scales at the promotion into FP32); its MatmulResult holds the model's value, the exact result of
    the operands as the unit reads them, and the declared bound of mma.md §7.3 (0 where the unit is exact).

    seed: the random bits of the operands a recipe rounds stochastically (recipes.md §13.3): operand j (j = 2 *
    GEMM index + side, fprop / dgrad / wgrad, a / b) takes the PCG64 stream of seed 8 * seed + j, one N-bit
    integer per element of the (transformed) operand in C order; None when no operand rounds stochastically."""
    check_choice("gemm", gemm, ("exact", "float64"))
    if isinstance(recipe, str):
        recipe = get_recipe(recipe)  # a name: unknown names raise with close matches
    elif not isinstance(recipe, TrainingRecipe):
        raise QrefError(f"recipe must be a TrainingRecipe or a recipe name ({', '.join(sorted(RECIPES)[:4])}, ...), "
                        f"got {type(recipe).__name__} {recipe!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or not 0 <= seed < 1 << 60):
        raise QrefError(f"seed must be an integer in [0, 2^60) (recipes.md §13.3), got {seed!r}")
    models = _models(mma)
    if models and gemm != "exact":
        raise QrefError("mma= computes the GEMMs with a matrix-unit model; it takes gemm='exact' (the default)")
    xs, ws, gs = (as_source_array(v) for v in (x, w, grad_out))
    if xs.ndim != 2 or ws.ndim != 2 or gs.ndim != 2:
        raise QrefError(f"linear_step takes 2-D x (M, K), w (N, K) and grad_out (M, N); got {xs.shape}, "
                        f"{ws.shape}, {gs.shape}")
    (M, K), (N, K2), (M2, N2) = xs.shape, ws.shape, gs.shape
    if K != K2 or M != M2 or N != N2:
        raise QrefError(f"shapes do not chain: x {xs.shape}, w {ws.shape}, grad_out {gs.shape} (need x (M, K), "
                        "w (N, K), grad_out (M, N))")
    layouts = {"fprop": (xs, ws), "dgrad": (gs, np.ascontiguousarray(ws.T)),
               "wgrad": (np.ascontiguousarray(gs.T), np.ascontiguousarray(xs.T))}
    acc = accumulation if accumulation is not None else recipe.accumulation
    operands: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    results: dict[str, Any] = {}
    reference: dict[str, np.ndarray] = {}
    for gi, g in enumerate(GEMMS):
        a, b = layouts[g]
        ra, rb = getattr(recipe, g)
        sa, sb = (None, None) if seed is None else (8 * int(seed) + 2 * gi, 8 * int(seed) + 2 * gi + 1)
        va, oa = ra.quantize(a, sa)
        vb, ob = rb.quantize(b, sb)
        operands[g], values[g] = (oa, ob), (va, vb)
        if g in models:
            results[g] = mma_gemm(models[g], unit_operand(ra, a, oa), unit_operand(rb, b, ob), what=g)
        elif gemm == "exact":
            results[g] = exact_matmul(va, vb.T, accumulation=acc, out_dtype="float32")
        else:
            with np.errstate(all="ignore"):
                results[g] = va @ vb.T
        reference[g] = a.astype(np.float64) @ b.astype(np.float64).T
    return LinearStep(recipe, operands, values, results, reference)


# ---------------------------------------------------------------------------------------------------------
# GEMMs on a matrix-unit model (recipes.md §13.2; mma.md §7)
# ---------------------------------------------------------------------------------------------------------
MMAModel = Instruction | MMAAccumulation | str


def _models(mma: object) -> dict[str, MMAAccumulation]:
    if mma is None:
        return {}
    if isinstance(mma, Mapping):
        bad = sorted(set(mma) - set(GEMMS))
        if bad:
            raise QrefError(f"mma= maps GEMM names {GEMMS} to models; {bad} are not GEMMs")
        return {g: _model(m, g) for g, m in mma.items()}
    one = _model(mma, "every GEMM")
    return dict.fromkeys(GEMMS, one)


def _model(m: object, what: str) -> MMAAccumulation:
    acc = as_mma_accumulation(m)
    if acc is None:
        raise QrefError(f"mma= for {what}: give a qref.mma Instruction, 'arch/instruction/qualifier' (e.g. "
                        f"'Hopper/wgmma/m64n8k32.f32.e4m3.e4m3') or qref.mma.MMAAccumulation; got {m!r}")
    return acc


@dataclass(frozen=True)
class UnitOperand:
    """One GEMM operand (rows, K) as a matrix unit reads it (recipes.md §13.2).

    codes: the element codes in the storage dtype of ``fmt`` (the input values for cast "none").
    tile_k: the scale tile's extent along K (None: the whole axis), for tile-scaled casts.
    scale: float32 dequantization scale per (row, K tile) (tile-scaled casts: RN32(1/m) or s), or None.
    block / block_scales / block_format: the block size along K, the scale codes per (row, K / block) and the
        unit's scale format (block casts), or None.
    factor: float32 epilogue factor of the operand (NVFP4's global scale), or None.
    values: the exact values the unit multiplies (float64): decode(code) · scale (· factor).
    """

    codes: np.ndarray
    fmt: str
    values: np.ndarray
    tile_k: int | None = None
    scale: np.ndarray | None = None
    block: int | None = None
    block_scales: np.ndarray | None = None
    block_format: str | None = None
    factor: np.float32 | None = None


def unit_operand(rule: OperandRule, a: np.ndarray, out: dict[str, Any]) -> UnitOperand:
    """The unit form of an operand quantized by ``rule`` (recipes.md §13.2, C1-C4)."""
    fmt = get_format(rule.element).name
    if rule.cast == "none":
        v = np.ascontiguousarray(out["values"])  # after the Hadamard transform, if any
        return UnitOperand(v, v.dtype.name, v.astype(np.float64))
    if rule.cast in ("multiplier", "division"):
        if rule.cast == "multiplier":
            assert rule.multiplier is not None
            c: MultiplierCast | DivisionCast = MultiplierCast(get_format(rule.element), rule.tile, rule.multiplier)
            with np.errstate(divide="ignore"):
                per_tile = (np.float32(1) / out["multipliers"]).astype(np.float32)  # RN32(1/m) (C2)
        else:
            assert rule.division is not None
            c = DivisionCast(get_format(rule.element), rule.tile, rule.division)
            per_tile = out["scales"].astype(np.float32)
        rows, ktiles = a.shape[0], per_tile.shape[1]
        tk = rule.tile[1]
        scale = np.repeat(per_tile, 1 if rule.tile[0] is None else rule.tile[0], axis=0)
        scale = np.repeat(scale, a.shape[0], axis=0)[:rows] if rule.tile[0] is None else scale[:rows]
        codes = out["codes"].view(storage_dtype(fmt))
        vals = decode(out["codes"], fmt, dtype=np.float64) * c.expand(per_tile, a.shape).astype(np.float64)
        assert scale.shape == (rows, ktiles)
        return UnitOperand(codes, fmt, vals, tile_k=tk, scale=scale)
    q = out["qarray"]
    blk: Any = q.scheme.block
    tr, tk = rule.tile
    assert tr is not None and tk is not None
    if blk.kind not in ("mx", "float_scale") or blk.element_scale_exp != 0:
        raise QrefError(f"{blk.name}: a matrix unit takes MX or float-scaled (NVFP4) blocks, not {blk.kind} blocks "
                        "with element_scale_exp " + str(blk.element_scale_exp))
    sfmt = blk.scale_format.name
    ufmt = "float8_e8m0fnu" if sfmt == "float8_e8m0fnu" else "ue4m3" if sfmt == "float8_e4m3fn" else None
    if ufmt is None:
        raise QrefError(f"{blk.name}: block scales in {sfmt}; matrix units read ue8m0 or ue4m3 scales")
    sc = np.repeat(np.asarray(q.scales), tr, axis=0)[: a.shape[0]]
    factor = None
    gamma = np.float64(1.0)
    if q.global_scale is not None:
        if blk.global_scale_rule != "amax_encode_reciprocal":
            raise QrefError(f"{blk.name} ({blk.profile}): no epilogue factor is declared for global_scale_rule "
                            f"{blk.global_scale_rule!r} (recipes.md §13.2 C3 covers amax_encode_reciprocal)")
        inv = np.float32(1.0) / np.float32(float(blk.element_max) * float(blk.scale_format.max_value))
        factor = np.float32(np.float32(q.global_scale) * inv)
        gamma = np.float64(factor)
    el = decode(q.codes, blk.element, dtype=np.float64)
    sv = decode(sc, blk.scale_format, dtype=np.float64)
    if ufmt == "ue4m3":
        sv = np.abs(sv)
    vals = el * np.repeat(sv, tk, axis=1)[:, : a.shape[1]] * gamma
    return UnitOperand(np.asarray(q.codes).view(storage_dtype(blk.element.name)), blk.element.name, vals,
                       block=tk, block_scales=np.ascontiguousarray(sc).view(storage_dtype(ufmt)),
                       block_format=ufmt, factor=factor)


def mma_gemm(model: MMAAccumulation, ua: UnitOperand, ub: UnitOperand, what: str = "GEMM") -> MatmulResult:
    """A (rows_a, K) · B (rows_b, K)ᵀ on the matrix-unit model (recipes.md §13.2): value, exact, bound."""
    ins = model.instruction
    pre = f"{what} on {ins.name}"
    if (ins.a_format, ins.b_format) != (ua.fmt, ub.fmt):
        raise QrefError(f"{pre}: the unit multiplies {ins.a_format} x {ins.b_format}, the operands are {ua.fmt} x "
                        f"{ub.fmt} (C1); pick the instruction of those formats (per GEMM: mma={{'{what}': ...}})")
    if ins.d_format != "float32" or (ins.c_format != "float32" and ins.k < ua.codes.shape[1]):
        raise QrefError(f"{pre}: linear_step accumulates in FP32; take an instruction with f32 C and D (C1)")
    A = ua.codes
    B = np.ascontiguousarray(ub.codes.T)
    K = A.shape[1]
    blocked = (ua.block is not None, ub.block is not None)
    tiled = (ua.scale is not None, ub.scale is not None)
    meta: dict[str, Any] = {"instruction": ins.name, "accumulation": model}
    if any(blocked):
        if not all(blocked) or ua.block != ub.block:
            raise QrefError(f"{pre}: both operands need block scales of one block size along K (C3); got "
                            f"{ua.block} and {ub.block}")
        if not ins.scaled or ins.block_size != ua.block or ins.scale_format != ua.block_format or \
                ua.block_format != ub.block_format:
            raise QrefError(f"{pre}: the operands carry {ua.block_format} scales per {ua.block} elements; the unit "
                            f"takes {ins.scale_format or 'no'} scales per {ins.block_size} (C3): pick a "
                            "block_scale instruction of that scale format and block size")
        sa, sb = ua.block_scales, np.ascontiguousarray(ub.block_scales.T)  # type: ignore[union-attr]
        _check_k(pre, K, model)
        d = matmul(A, B, instruction=ins, scale_a=sa, scale_b=sb, promote_every=model.promote_every,
                   k_tile=model.k_tile)
        ub_ = matmul_bound(A, B, instruction=ins, scale_a=sa, scale_b=sb, promote_every=model.promote_every)
        fa = np.float64(1.0 if ua.factor is None else ua.factor)
        fb = np.float64(1.0 if ub.factor is None else ub.factor)
        f = fa * fb
        f32 = np.float64(np.float32(f))
        meta["mapping"] = "block_scaled"
        if ua.factor is not None or ub.factor is not None:
            with np.errstate(over="ignore", under="ignore"):
                value = (d.astype(np.float64) * f32).astype(np.float32)
            ub_ = scaled_bound(ub_, f, f32)
            meta["epilogue_factor"] = np.float32(f32)
        else:
            value = d
    elif ins.scaled:
        raise QrefError(f"{pre}: a block-scaled unit needs block-cast operands (cast='block'); these carry "
                        f"{'per-tile float32 scales' if any(tiled) else 'no scales'} (C3)")
    elif any(tiled):
        if not all(tiled):
            raise QrefError(f"{pre}: one operand is scaled per tile, the other is not (C2)")
        assert ua.scale is not None and ub.scale is not None
        if ua.tile_k is None and ub.tile_k is None:
            _check_k(pre, K, model)
            d = matmul(A, B, instruction=ins, promote_every=model.promote_every, k_tile=model.k_tile)
            f = ua.scale[:, :1].astype(np.float64) * ub.scale[:, :1].T.astype(np.float64)
            f32 = f.astype(np.float32)
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                value = (d * f32).astype(np.float32)
            ub_ = scaled_bound(matmul_bound(A, B, instruction=ins, promote_every=model.promote_every), f, f32)
            meta.update(mapping="epilogue", epilogue_factor=f32)
        elif ua.tile_k is not None and ua.tile_k == ub.tile_k:
            t = ua.tile_k
            if model.promote_every not in (None, t):
                raise QrefError(f"{pre}: the scales change every {t} elements of K, so the unit promotes every {t} "
                                f"(C2); drop promote_every={model.promote_every}")
            if K % t:
                raise QrefError(f"{pre}: K = {K} is not a multiple of the scale tile {t} (C2); pad K with zeros")
            _check_k(pre, K, model)
            psa, psb = ua.scale, np.ascontiguousarray(ub.scale.T)
            d = matmul(A, B, instruction=ins, promote_every=t, promote_scale_a=psa, promote_scale_b=psb,
                       k_tile=model.k_tile)
            ub_ = matmul_bound(A, B, instruction=ins, promote_every=t, promote_scale_a=psa, promote_scale_b=psb)
            value = d
            meta.update(mapping="promotion", promote_every=t)
        else:
            raise QrefError(f"{pre}: the operands' scale tiles along K are {ua.tile_k} and {ub.tile_k}; the unit "
                            "needs both whole-axis (epilogue scales) or both the same extent (promotion scales) "
                            "(C2)")
    else:
        _check_k(pre, K, model)
        value = matmul(A, B, instruction=ins, promote_every=model.promote_every, k_tile=model.k_tile)
        ub_ = matmul_bound(A, B, instruction=ins, promote_every=model.promote_every)
        meta["mapping"] = "unscaled"
    meta["mma_d"] = d if any(blocked) or any(tiled) else value
    ref = exact_matmul(ua.values, ub.values.T, accumulation="exact", out_dtype="float32")
    unspec = ~np.isfinite(ub_.bound) & ~ref.is_special
    bound = np.where(ref.is_special | unspec, 0.0, ub_.bound)
    return MatmulResult(np.asarray(value, np.float32), ref.exact, ref.special, ref.is_special, bound, unspec,
                        "float32", meta)


def _check_k(pre: str, K: int, model: MMAAccumulation) -> None:
    k = model.k_tile or model.instruction.k
    if K % k:
        raise QrefError(f"{pre}: K = {K} is not a multiple of the unit's K step {k}; pad K with zeros")


# ---------------------------------------------------------------------------------------------------------
# the recipe records (recipes.md §13)
# ---------------------------------------------------------------------------------------------------------
def _mult(element: str, tile: tuple[int | None, ...], rules: MultiplierRules) -> OperandRule:
    return OperandRule("multiplier", element, tile, multiplier=rules)


_TE_POW2 = replace(TRANSFORMER_ENGINE_BLOCKWISE, pow2="frexp")
_ROW = (1, 128)
_SQ = (128, 128)
#: TransformerEngine's 16-entry wgrad sign vector (reference_nvfp4.get_wgrad_sign_vector, commit d0067d0)
TE_WGRAD_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)

RECIPES: dict[str, TrainingRecipe] = {}


def register_recipe(r: TrainingRecipe) -> TrainingRecipe:
    RECIPES[r.name] = r
    return r


register_recipe(TrainingRecipe(
    "transformer_engine_float8_block_scaling",
    fprop=(_mult("float8_e4m3fn", _ROW, _TE_POW2), _mult("float8_e4m3fn", _SQ, _TE_POW2)),
    dgrad=(_mult("float8_e4m3fn", _ROW, _TE_POW2), _mult("float8_e4m3fn", _SQ, _TE_POW2)),
    wgrad=(_mult("float8_e4m3fn", _ROW, _TE_POW2), _mult("float8_e4m3fn", _ROW, _TE_POW2)),
    source="TransformerEngine Float8BlockScaling (x and dy 1 x 128, w 128 x 128, E4M3, power-of-two scales); "
           "casts: tests/pytorch/references/blockwise_quantizer_reference.py at d0067d0",
    status="peer_vectors",
    notes=("each cast equals the blockwise reference on tests/peers/transformer_engine_blockwise",),
))
register_recipe(TrainingRecipe(
    "transformer_engine_float8_current_scaling",
    fprop=(_mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING)),
    dgrad=(_mult("float8_e5m2", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING)),
    wgrad=(_mult("float8_e5m2", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_CURRENT_SCALING)),
    source="TransformerEngine Float8CurrentScaling (per tensor, HYBRID: E4M3 forward, E5M2 gradients, "
           "scale = fp8_max / amax in float32): TE's ref_per_tensor_cs_cast at commit d0067d0",
    status="peer_vectors",
    notes=("each cast equals ref_per_tensor_cs_cast on tests/peers/transformer_engine_current_scaling; the CUDA "
           "current-scaling kernel was not run",),
))
register_recipe(TrainingRecipe(
    "transformer_engine_mxfp8_block_scaling",
    fprop=(OperandRule("block", "float8_e4m3fn", (1, 32), block_scheme="mxfp8_e4m3", block_profile="nvidia"),) * 2,
    dgrad=(OperandRule("block", "float8_e4m3fn", (1, 32), block_scheme="mxfp8_e4m3", block_profile="nvidia"),) * 2,
    wgrad=(OperandRule("block", "float8_e4m3fn", (1, 32), block_scheme="mxfp8_e4m3", block_profile="nvidia"),) * 2,
    source="TransformerEngine MXFP8BlockScaling (E4M3, 1 x 32 blocks along each GEMM's reduction axis, E8M0 "
           "scales by the nvidia block profile)",
    status="modelled",
    notes=("the nvidia block profile is modelled (block.md §8); TE's 2-D MXFP8 reference agrees on 32 x 32 tiles",),
))
_NV = dict(block_scheme="nvfp4", block_profile="transformer_engine_reference")
register_recipe(TrainingRecipe(
    "transformer_engine_nvfp4_block_scaling",
    fprop=(OperandRule("block", "float4_e2m1fn", (1, 16), **_NV),  # type: ignore[arg-type]
           OperandRule("block", "float4_e2m1fn", (16, 16), **_NV)),  # type: ignore[arg-type]
    dgrad=(OperandRule("block", "float4_e2m1fn", (1, 16), rounding="stochastic_a", stochastic_bits=8,  # type: ignore[arg-type]
                       **_NV),
           OperandRule("block", "float4_e2m1fn", (16, 16), **_NV)),  # type: ignore[arg-type]
    wgrad=(OperandRule("block", "float4_e2m1fn", (1, 16), hadamard=16, hadamard_signs=TE_WGRAD_SIGNS,
                       hadamard_arithmetic="input_dtype_kernel", rounding="stochastic_a", stochastic_bits=8,
                       **_NV),  # type: ignore[arg-type]
           OperandRule("block", "float4_e2m1fn", (1, 16), hadamard=16, hadamard_signs=TE_WGRAD_SIGNS,
                       hadamard_arithmetic="input_dtype_kernel", **_NV)),  # type: ignore[arg-type]
    source="NVIDIA's NVFP4 pretraining recipe in TransformerEngine NVFP4BlockScaling: 1 x 16 blocks for x and dy, "
           "16 x 16 for w, E4M3 block scales under a float32 tensor scale, the 16 x 16 random Hadamard transform "
           "on the wgrad operands, stochastic rounding of gradients",
    status="modelled",
    notes=("stochastic rounding of the gradient casts: P3109 StochasticA with N = 8 (block.md §13; the bits per "
           "element of the GPU's cvt.rs conversion are not published: 32 random bits per 4 elements is assumed, "
           "not verified on a GPU); linear_step(..., seed=S), or with_rounding('nearest_even') without it",
           "the RHT with TE's sign vector and the 1 x 16 NVFP4 casts equal TE's reference (transforms.md, block.md)"),
))
_TAO_ROW = replace(TORCHAO_FLOAT8, pow2="log2_float32")
register_recipe(TrainingRecipe(
    "torchao_float8_tensorwise",
    fprop=(_mult("float8_e4m3fn", (None, None), TORCHAO_FLOAT8), _mult("float8_e4m3fn", (None, None), TORCHAO_FLOAT8)),
    dgrad=(_mult("float8_e5m2", (None, None), TORCHAO_FLOAT8), _mult("float8_e4m3fn", (None, None), TORCHAO_FLOAT8)),
    wgrad=(_mult("float8_e5m2", (None, None), TORCHAO_FLOAT8), _mult("float8_e4m3fn", (None, None), TORCHAO_FLOAT8)),
    source="torchao 0.18 Float8LinearConfig.from_recipe_name('tensorwise'): E4M3 input and weight, E5M2 "
           "grad_output, float32 scales",
    status="peer_vectors",
))
register_recipe(TrainingRecipe(
    "torchao_float8_rowwise",
    fprop=(_mult("float8_e4m3fn", (1, None), _TAO_ROW),) * 2,
    dgrad=(_mult("float8_e4m3fn", (1, None), _TAO_ROW),) * 2,
    wgrad=(_mult("float8_e4m3fn", (1, None), _TAO_ROW),) * 2,
    source="torchao 0.18 Float8LinearConfig.from_recipe_name('rowwise'): E4M3 everywhere, one scale per row "
           "along each GEMM's reduction axis, power-of-two scales",
    status="peer_vectors",
))

_DS_SRC = ("DeepSeek-V3 (github.com/deepseek-ai/DeepSeek-V3 at 9b4e978, inference/kernel.py act_quant: 1 x 128 "
           "tiles along K, amax floored at 1e-4, s = amax / 448, y = x / s cast to E4M3; fp8_gemm: float32 scales "
           "applied per 128 of K; model.py: 128 x 128 weight scales) and the technical report arXiv 2412.19437 "
           "§3.3 (E4M3 on every tensor, 1 x 128 activation / gradient tiles, 128 x 128 weight blocks, 128 x 1 "
           "tiles of the backward operands, promotion into FP32 every 128)")
_DS_NOTES = ("act_quant equals the real Triton kernel run by Triton 3.9's CPU interpreter on "
             "tests/peers/deepseek_v3 (scales bit for bit, codes as the RNE cast of the kernel's float32 quotient)",
             "the 128 x 128 weight cast and the backward operands are modelled from the report (the repository "
             "ships inference only; weights come pre-quantized)")


def _div(tile: tuple[int | None, ...], rules: DivisionRules) -> OperandRule:
    return OperandRule("division", "float8_e4m3fn", tile, division=rules)


for _name, _rules, _what in (("deepseek_v3_fp8", DEEPSEEK_V3, "float32 scales s = amax / 448"),
                             ("deepseek_v3_1_fp8", DEEPSEEK_V3_1, "UE8M0 scales s = 2^ceil(log2(amax / 448)) "
                              "(act_quant scale_fmt='ue8m0')")):
    register_recipe(TrainingRecipe(
        _name,
        fprop=(_div(_ROW, _rules), _div(_SQ, _rules)),
        dgrad=(_div(_ROW, _rules), _div(_SQ, _rules)),
        wgrad=(_div(_ROW, _rules), _div(_ROW, _rules)),
        source=f"{_DS_SRC}; {_what}",
        status="modelled",
        notes=_DS_NOTES,
    ))


def get_recipe(name: str) -> TrainingRecipe:
    """A registered recipe record by name."""
    if name not in RECIPES:
        raise unknown_name("training recipe", name, sorted(RECIPES))
    return RECIPES[name]


__all__ = ["GEMMS", "RECIPES", "TE_WGRAD_SIGNS", "LinearStep", "MMAModel", "OperandRule", "TrainingRecipe",
           "UnitOperand", "get_recipe", "linear_step", "mma_gemm", "register_recipe", "unit_operand"]
