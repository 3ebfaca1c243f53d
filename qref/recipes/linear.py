"""Quantized training of one linear layer: recipe records per tensor role and GEMM (spec: recipes.md §13).

A linear layer y = x wᵀ (x: M × K activations, w: N × K weights, dy: M × N output gradients) runs three GEMMs,
each reducing over another axis, and every recipe quantizes each operand for each GEMM on its own terms:

    fprop  y  = x  · wᵀ     reduces K     operands x (M × K),   w   (N × K)
    dgrad  dx = dy · w      reduces N     operands dy (M × N),  wᵀ  (K × N)
    wgrad  dw = dyᵀ · x     reduces M     operands dyᵀ (N × M), xᵀ  (K × M)

Every operand is laid out with the GEMM's reduction axis last (the row-wise / column-wise copies of the real
systems). An ``OperandRule`` says how: an optional random Hadamard transform along the reduction axis
(docs/spec/transforms.md; applied to both operands of a GEMM, whose product it leaves unchanged), then a cast —
a multiplier cast per tile (recipes.md §12) or a block scheme on tiles (block.md §12). ``linear_step``
dequantizes each operand exactly (decode · scale in float64; block schemes by their own dequantize) and gives
each GEMM as ``exact_matmul`` of the dequantized operands: the exact result, its correct rounding, and the
bound of the declared accumulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.decode import decode
from ..core.exact import as_source_array
from ..errors import QrefError, check_choice, unknown_name
from ..formats import get_format
from ..schemes import scheme
from ..transforms import ARITHMETICS, hadamard
from .multiplier import TORCHAO_FLOAT8, TRANSFORMER_ENGINE_BLOCKWISE, MultiplierCast, MultiplierRules
from .ops import Accumulation, MatmulResult, exact_matmul

GEMMS = ("fprop", "dgrad", "wgrad")
CASTS = ("multiplier", "block", "none")
STATUSES = ("peer_vectors", "modelled")


@dataclass(frozen=True)
class OperandRule:
    """How one operand of one GEMM is quantized (its reduction axis last).

    cast: "multiplier" (recipes.md §12), "block" (a block scheme on tiles, block.md §12) or "none" (kept as is).
    element: the element format (float8_e4m3fn, float8_e5m2, float4_e2m1fn...).
    tile: per axis (rows, reduction) the tile extent, None = the whole axis: (None, None) per tensor, (1, None)
        per row, (1, 128), (128, 128), (1, 32), (16, 16).
    multiplier: the MultiplierRules of a multiplier cast.
    block_scheme / block_profile: the block scheme name and profile of a block cast ("mxfp8_e4m3", "nvidia").
    hadamard: size of the random Hadamard transform along the reduction axis, or None.
    hadamard_signs: its sign vector (+-1, length hadamard), or None for the plain Hadamard transform.
    hadamard_arithmetic: "exact" (default: one rounding, transforms.md), a kernel order of transforms.md §4, or
        "input_dtype_kernel" (fma_sequential_float32 for float32 input, dot_pairs_bfloat16 for bfloat16: the
        matmul TransformerEngine's reference runs on CPU).
    rounding: "nearest_even" (every cast here) or "stochastic" (declared by a recipe; not yet emulated: a
        QrefError names it).
    """

    cast: str
    element: str = "float8_e4m3fn"
    tile: tuple[int | None, ...] = (None, None)
    multiplier: MultiplierRules | None = None
    block_scheme: str | None = None
    block_profile: str | None = None
    hadamard: int | None = None
    hadamard_signs: tuple[int, ...] | None = None
    hadamard_arithmetic: str = "exact"
    rounding: str = "nearest_even"

    def __post_init__(self) -> None:
        check_choice("operand cast", self.cast, CASTS)
        check_choice("operand rounding", self.rounding, ("nearest_even", "stochastic"))
        check_choice("Hadamard arithmetic", self.hadamard_arithmetic, (*ARITHMETICS, "input_dtype_kernel"))
        if len(self.tile) != 2:
            raise QrefError(f"an operand tile has two entries (rows, reduction), got {self.tile!r}")
        if self.cast == "multiplier" and self.multiplier is None:
            raise QrefError("a multiplier cast needs its MultiplierRules (multiplier=...)")
        if self.cast == "block" and (self.block_scheme is None or any(t is None for t in self.tile)):
            raise QrefError("a block cast needs block_scheme= and a tile of two integers")
        get_format(self.element)

    def quantize(self, a: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """(exact values of the quantized operand as float64, the cast's raw outputs)."""
        if self.rounding == "stochastic":
            raise QrefError("this operand is declared with stochastic rounding, which qref does not emulate for "
                            "block and multiplier casts yet; use recipe.with_rounding('nearest_even') to study "
                            "the rest of the recipe")
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
        s = scheme(self.block_scheme, profile=self.block_profile, block_shape=self.tile)  # type: ignore[arg-type]
        with np.errstate(all="ignore"):
            q = s.quantize(a)
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

    def with_rounding(self, rounding: str) -> TrainingRecipe:
        """The same recipe with every operand's rounding replaced (e.g. to study it without stochastic
        rounding)."""
        def fix(pair: tuple[OperandRule, OperandRule]) -> tuple[OperandRule, OperandRule]:
            return (replace(pair[0], rounding=rounding), replace(pair[1], rounding=rounding))

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
                accumulation: Accumulation | str | None = None, gemm: str = "exact") -> LinearStep:
    """fprop, dgrad and wgrad of y = x wᵀ under ``recipe`` (recipes.md §13). x: (M, K), w: (N, K), grad_out:
    (M, N), float32 / bfloat16 / float16. accumulation overrides the recipe's. gemm: "exact" (default:
    ``exact_matmul`` — exact result, correct rounding, the accumulation's bound; Python integers, slow beyond a
    few hundred per side) or "float64" (numpy's float64 matmul of the exact operand values, in ``reference``'s
    place of a MatmulResult: for error studies on large tensors; no bound)."""
    check_choice("gemm", gemm, ("exact", "float64"))
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
    for g in GEMMS:
        a, b = layouts[g]
        ra, rb = getattr(recipe, g)
        va, oa = ra.quantize(a)
        vb, ob = rb.quantize(b)
        operands[g], values[g] = (oa, ob), (va, vb)
        if gemm == "exact":
            results[g] = exact_matmul(va, vb.T, accumulation=acc, out_dtype="float32")
        else:
            with np.errstate(all="ignore"):
                results[g] = va @ vb.T
        reference[g] = a.astype(np.float64) @ b.astype(np.float64).T
    return LinearStep(recipe, operands, values, results, reference)


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
    fprop=(_mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_BLOCKWISE),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_BLOCKWISE)),
    dgrad=(_mult("float8_e5m2", (None, None), TRANSFORMER_ENGINE_BLOCKWISE),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_BLOCKWISE)),
    wgrad=(_mult("float8_e5m2", (None, None), TRANSFORMER_ENGINE_BLOCKWISE),
           _mult("float8_e4m3fn", (None, None), TRANSFORMER_ENGINE_BLOCKWISE)),
    source="TransformerEngine Float8CurrentScaling (per tensor, HYBRID: E4M3 forward, E5M2 gradients, "
           "scale = fp8_max / amax): the per-tensor case of the blockwise reference's rule",
    status="modelled",
    notes=("the CUDA current-scaling kernel was not run; its scale rule is read from TE's sources",),
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
    dgrad=(OperandRule("block", "float4_e2m1fn", (1, 16), rounding="stochastic", **_NV),  # type: ignore[arg-type]
           OperandRule("block", "float4_e2m1fn", (16, 16), **_NV)),  # type: ignore[arg-type]
    wgrad=(OperandRule("block", "float4_e2m1fn", (1, 16), hadamard=16, hadamard_signs=TE_WGRAD_SIGNS,
                       hadamard_arithmetic="input_dtype_kernel", rounding="stochastic", **_NV),  # type: ignore[arg-type]
           OperandRule("block", "float4_e2m1fn", (1, 16), hadamard=16, hadamard_signs=TE_WGRAD_SIGNS,
                       hadamard_arithmetic="input_dtype_kernel", **_NV)),  # type: ignore[arg-type]
    source="NVIDIA's NVFP4 pretraining recipe in TransformerEngine NVFP4BlockScaling: 1 x 16 blocks for x and dy, "
           "16 x 16 for w, E4M3 block scales under a float32 tensor scale, the 16 x 16 random Hadamard transform "
           "on the wgrad operands, stochastic rounding of gradients",
    status="modelled",
    notes=("stochastic rounding of the gradient casts is declared, not emulated: with_rounding('nearest_even')",
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


def get_recipe(name: str) -> TrainingRecipe:
    """A registered recipe record by name."""
    if name not in RECIPES:
        raise unknown_name("training recipe", name, sorted(RECIPES))
    return RECIPES[name]


__all__ = ["GEMMS", "RECIPES", "TE_WGRAD_SIGNS", "LinearStep", "OperandRule", "TrainingRecipe", "get_recipe",
           "linear_step", "register_recipe"]
