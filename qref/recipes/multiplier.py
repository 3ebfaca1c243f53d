"""Float8 training casts with a float32 multiplier or a float32 divisor per tile (spec: docs/spec/recipes.md §12).

The casts of today's FP8 training recipes (TransformerEngine Float8CurrentScaling / Float8BlockScaling and its
blockwise reference, torchao float8 tensorwise / rowwise) multiply by m = fp8_max / amax instead of dividing by
a scale. Per tile (a tensor, a row, a 1 x 128 or 128 x 128 block: any tile shape, ``None`` = the whole axis):

    a  = max |x| over the tile, in x's dtype (exact; NaN propagates)                    [zero-padded tiles]
    a  = max(a, eps) in the floor dtype (float32 or float64; NaN stays NaN)
    m  = RN32(fp8_max / a), the division in the quotient dtype (float32: one rounding; float64: RN64 then RN32)
    m  = finfo(x.dtype).max where m = +Inf          (infinite_multiplier = "input_dtype_max")
    m  = 2^(e - 1), (_, e) = frexp(m)               (pow2 = "frexp": NaN gives 0.5)
       | exp2(floor(RN32(log2 m)))                  (pow2 = "log2_float32": the floor of the rounded logarithm)
    m  = 0 where a = +Inf;  m = 1 where a = 0
    codes = fp8(clamp(RN32(x · m), -fp8_max, fp8_max))        (nearest even; NaN codes: unspecified sign)
    scale = RN32(1 / m) (stored = "reciprocal", TE's scale_inv) or m (stored = "multiplier", torchao's _scale)

dequantize: RN32(decode(code) · scale) for "reciprocal", RN32(decode(code) / scale) for "multiplier".

DeepSeek-V3's casts divide instead (``DivisionCast``, §12.2): a = max(amax, amax_floor), s = RN32(a / fp8_max)
(or 2^ceil(RN32(log2 s)), UE8M0), codes = fp8(RN32(x / s)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from ..core.decode import decode
from ..core.encode import encode
from ..errors import QrefError, check_choice
from ..formats import FloatFormat, get_format
from ..profiles.base import check_choices

POW2 = ("none", "frexp", "log2_float32")
INFINITE_MULTIPLIER = ("keep", "input_dtype_max", "float32_max")
STORED = ("reciprocal", "multiplier")
FLOAT_DTYPES = ("float32", "float64")
_INPUTS = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class MultiplierRules:
    """Every step of a multiplier cast (recipes.md §12); the defaults are TransformerEngine's.

    eps: the amax floor (default 0.0). floor_dtype: the dtype of max(a, eps) and of the quotient fp8_max / a
        (default "float32"; "float64": torchao's float64 EPS and division, then RN32). clamp: True (default:
        clip x * m to +-fp8_max before the cast) or False (the cast alone: overflow to +-Inf in a format with
        infinities, E5M2; saturating in one without, E4M3FN; TE's per-tensor current scaling). infinite_multiplier: keep
        | input_dtype_max (default; TE's blockwise reference) | float32_max (TE's per-tensor current scaling,
        which reads the amax as float32). pow2: none (default) | frexp | log2_float32. stored: reciprocal (default) |
        multiplier.
    """

    eps: float = 0.0
    floor_dtype: str = "float32"
    infinite_multiplier: str = "input_dtype_max"
    pow2: str = "none"
    clamp: bool = True
    stored: str = "reciprocal"

    def __post_init__(self) -> None:
        check_choices({"floor dtype": (self.floor_dtype, FLOAT_DTYPES),
                       "infinite multiplier rule": (self.infinite_multiplier, INFINITE_MULTIPLIER),
                       "power-of-two rule": (self.pow2, POW2), "stored scale": (self.stored, STORED)})
        if not np.isfinite(self.eps) or self.eps < 0:
            raise QrefError(f"eps must be a finite float >= 0, got {self.eps!r}")


@dataclass(frozen=True)
class TiledCast:
    """The tiling shared by the casts of this module: an element format with a finite maximum and a tile shape.

    element: float8_e4m3fn or float8_e5m2 (any float format with a finite maximum).
    tile: per axis of the input, the tile extent or None (the whole axis): () / (None, None) per tensor,
        (1, None) per row, (None, 1) per column, (1, 128), (128, 128). Partial tiles are padded with +0.
    """

    element: FloatFormat
    tile: tuple[int | None, ...]

    def __post_init__(self) -> None:
        fmt = get_format(self.element) if not isinstance(self.element, FloatFormat) else self.element
        if not isinstance(fmt, FloatFormat) or not np.isfinite(float(fmt.max_value)):
            raise QrefError(f"a tiled cast needs a float element format with a finite maximum, got {fmt!r}")
        object.__setattr__(self, "element", fmt)
        tile = tuple(self.tile)
        for t in tile:
            if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1):
                raise QrefError(f"tile entries are positive integers or None (the whole axis), got {self.tile!r}")
        object.__setattr__(self, "tile", tuple(None if t is None else int(t) for t in tile))

    def _extents(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        tile = self.tile if self.tile else (None,) * len(shape)
        if len(tile) != len(shape):
            raise QrefError(f"tile {self.tile} has {len(tile)} entries for an input of rank {len(shape)}")
        return tuple(max(n, 1) if t is None else t for n, t in zip(shape, tile))

    def _tiled(self, a: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        """(a zero-padded and split into (grid_0, t_0, grid_1, t_1, ...), the extents)."""
        ext = self._extents(a.shape)
        pad = [(0, (-n) % t) for n, t in zip(a.shape, ext)]
        if any(p for _, p in pad):
            a = np.pad(a, pad)
        split = []
        for n, t in zip(a.shape, ext):
            split += [n // t, t]
        return a.reshape(split), ext

    def tile_amax(self, x: np.ndarray) -> np.ndarray:
        """max |x| per tile in x's dtype (exact; NaN propagates), shape (ceil(n_i / t_i))."""
        tiles, _ = self._tiled(np.abs(x))
        return tiles.max(axis=tuple(range(1, tiles.ndim, 2))) if tiles.size else tiles.reshape(tiles.shape[::2])

    def expand(self, m: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Per-tile values m repeated over each tile and cropped to ``shape``."""
        ext = self._extents(shape)
        out = m
        for ax, t in enumerate(ext):
            out = np.repeat(out, t, axis=ax)
        return out[tuple(slice(0, n) for n in shape)]


@dataclass(frozen=True)
class MultiplierCast(TiledCast):
    """A float8 cast with one float32 multiplier per tile (recipes.md §12).

    element, tile: as ``TiledCast``. rules: MultiplierRules.
    """

    rules: MultiplierRules = field(default_factory=MultiplierRules)

    def multipliers(self, x: np.ndarray) -> np.ndarray:
        """m per tile (float32), shape (ceil(n_i / t_i))."""
        R = self.rules
        a = self.tile_amax(x)
        fmax = float(self.element.max_value)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if R.floor_dtype == "float64":
                a_f = np.maximum(a.astype(np.float64), np.float64(R.eps))
                m = (np.float64(fmax) / a_f).astype(np.float32)
            else:
                a_f = np.maximum(a.astype(np.float32), np.float32(R.eps))
                m = np.float32(fmax) / a_f
            if R.infinite_multiplier != "keep":
                big = np.float32(ml_dtypes.finfo(x.dtype if R.infinite_multiplier == "input_dtype_max"
                                                 else np.float32).max)
                m = np.where(np.isposinf(m), big, m).astype(np.float32)
            if R.pow2 == "frexp":
                _, e = np.frexp(m)
                m = np.ldexp(np.float32(1), e - 1).astype(np.float32)
            elif R.pow2 == "log2_float32":
                lg = np.log2(m.astype(np.float64)).astype(np.float32)
                m = np.exp2(np.floor(lg)).astype(np.float32)
            m = np.where(np.isposinf(a_f), np.float32(0), m)
            m = np.where(a_f == 0, np.float32(1), m)
        return m.astype(np.float32)

    def quantize(self, x: object) -> dict[str, np.ndarray]:
        """{"codes": FP8 codes (uint8, x's shape), "scales": float32 per tile (the stored scale),
        "multipliers": m per tile, "unspecified": NaN codes (their sign and payload are unspecified)}."""
        arr = np.asarray(x)
        if arr.dtype.name not in _INPUTS:
            raise QrefError(f"multiplier casts take float32, bfloat16 or float16 input, got {arr.dtype}")
        m = self.multipliers(arr)
        fmax = np.float32(self.element.max_value)
        with np.errstate(invalid="ignore", over="ignore"):
            y = arr.astype(np.float32) * self.expand(m, arr.shape)
            if self.rules.clamp:
                y = np.clip(y, -fmax, fmax)
        overflow = "inf" if not self.rules.clamp and self.element.has_inf else "saturate"
        codes = encode(y, self.element, rounding="nearest_even", overflow=overflow, nan="keep_sign")
        with np.errstate(divide="ignore", invalid="ignore"):
            scales = (np.float32(1) / m).astype(np.float32) if self.rules.stored == "reciprocal" else m
        return {"codes": codes.astype(np.uint8), "scales": scales, "multipliers": m, "unspecified": np.isnan(y)}

    def dequantize(self, codes: object, scales: object) -> np.ndarray:
        """float32 values: RN32(decode(code) · scale) (stored "reciprocal") or RN32(decode(code) / scale)."""
        c = np.asarray(codes)
        v = decode(c.astype(np.uint8), self.element, dtype=np.float32)
        s = self.expand(np.asarray(scales, dtype=np.float32), c.shape)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            out = v * s if self.rules.stored == "reciprocal" else v / s
        return out.astype(np.float32)

    def to_spec(self) -> dict[str, Any]:
        r = self.rules
        return {"element": self.element.name, "tile": list(self.tile), "eps": r.eps, "floor_dtype": r.floor_dtype,
                "infinite_multiplier": r.infinite_multiplier, "pow2": r.pow2, "stored": r.stored,
                "clamp": r.clamp}


#: TransformerEngine's blockwise FP8 quantizer reference (tests/pytorch/references, commit d0067d0); pow2 and
#: eps are its options (Float8BlockScaling: power-of-two scales by default)
TRANSFORMER_ENGINE_BLOCKWISE = MultiplierRules()
#: TransformerEngine's per-tensor current scaling (ref_per_tensor_cs.py): the amax in float32, so an infinite
#: multiplier becomes float32's maximum whatever x's dtype; torch's cast without a clamp
TRANSFORMER_ENGINE_CURRENT_SCALING = MultiplierRules(infinite_multiplier="float32_max", clamp=False)
#: torchao 0.18 float8 training casts (float8_utils.amax_to_scale): EPS 1e-12 and the division in float64
TORCHAO_FLOAT8 = MultiplierRules(eps=1e-12, floor_dtype="float64", infinite_multiplier="keep", stored="multiplier")


# ---------------------------------------------------------------------------------------------------------
# division casts (recipes.md §12.2): y = x / s with s = amax / fp8_max per tile
# ---------------------------------------------------------------------------------------------------------
SCALE_POW2 = ("none", "ceil_log2_float32")


def ceil_log2_pow2(s: np.ndarray) -> np.ndarray:
    """2^ceil(RN32(log2 s)) for float32 s > 0 (recipes.md §12.2): the logarithm rounded to float32, then the
    ceiling, as DeepSeek-V3's act_quant (``tl.math.ceil(tl.math.log2(s))``, then ``exp2``).

    log2 is taken in float64 and rounded to float32; the ceiling differs from ceil(log2 s) only for s a few ulps
    above a power of two, where the float64 route equals the correctly rounded float32 logarithm on every
    float32 s within 64 ulps of every power of two in 2^-126..2^127 (tests/test_recipes_deepseek.py)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lg = np.log2(np.asarray(s, np.float32).astype(np.float64)).astype(np.float32)
        n = np.ceil(lg)
        # 2^n exactly (numpy's float32 exp2 is off by an ulp at n = 127, outside act_quant's range s < 2^120)
        return np.where(np.isfinite(n), np.ldexp(np.float32(1), np.where(np.isfinite(n), n, 0).astype(np.int32)),
                        np.exp2(n)).astype(np.float32)


@dataclass(frozen=True)
class DivisionRules:
    """Every step of a division cast (recipes.md §12.2) that a recipe chooses.

    amax_floor: a = max(a, RN32(amax_floor)) before the scale (default 0.0: none; DeepSeek-V3's act_quant: 1e-4).
    pow2: "none" (default: s = RN32(a / fp8_max)) | "ceil_log2_float32" (s = 2^ceil(RN32(log2 s)), a UE8M0 scale:
        the logarithm rounded to float32 first, then the ceiling).
    """

    amax_floor: float = 0.0
    pow2: str = "none"

    def __post_init__(self) -> None:
        check_choice("division-cast power-of-two rule", self.pow2, SCALE_POW2)
        if not np.isfinite(self.amax_floor) or self.amax_floor < 0:
            raise QrefError(f"amax_floor must be a finite float >= 0, got {self.amax_floor!r}")


@dataclass(frozen=True)
class DivisionCast(TiledCast):
    """A float8 cast that divides by a float32 scale per tile (recipes.md §12.2):

        a = max(RN32(max |x| over the tile), RN32(amax_floor));   s = RN32(a / fp8_max)
        s = 2^ceil(RN32(log2 s))                                   (pow2 = "ceil_log2_float32")
        codes = fp8(RN32(RN32(x) / s))   nearest even, saturating;  scales = s;  dequantize: RN32(decode · s)

    Non-finite tiles (a NaN or an infinity) are unspecified (``unspecified`` marks every element of them).
    """

    rules: DivisionRules = field(default_factory=DivisionRules)

    def scales(self, x: np.ndarray) -> np.ndarray:
        """s per tile (float32), shape (ceil(n_i / t_i))."""
        R = self.rules
        a = self.tile_amax(np.asarray(x)).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            a = np.maximum(a, np.float32(R.amax_floor))
            s = (a / np.float32(self.element.max_value)).astype(np.float32)
            if R.pow2 == "ceil_log2_float32":
                s = ceil_log2_pow2(s)
        return s.astype(np.float32)

    def quantize(self, x: object) -> dict[str, np.ndarray]:
        """{"codes": FP8 codes (uint8, x's shape), "scales": s per tile (float32), "quotients": RN32(x / s)
        (float32, x's shape), "unspecified": elements of non-finite tiles}."""
        arr = np.asarray(x)
        if arr.dtype.name not in _INPUTS:
            raise QrefError(f"division casts take float32, bfloat16 or float16 input, got {arr.dtype}; cast it "
                            "first (the kernels load their input and convert it to float32 exactly)")
        s = self.scales(arr)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            y = (arr.astype(np.float32) / self.expand(s, arr.shape)).astype(np.float32)
        codes = encode(y, self.element, rounding="nearest_even", overflow="saturate", nan="keep_sign")
        bad = self.expand(~np.isfinite(self.tile_amax(arr).astype(np.float32)), arr.shape)
        return {"codes": codes.astype(np.uint8), "scales": s, "quotients": y, "unspecified": bad | np.isnan(y)}

    def dequantize(self, codes: object, scales: object) -> np.ndarray:
        """float32 values RN32(decode(code) · s) (DeepSeek-V3's weight_dequant: x.to(float32) * s)."""
        c = np.asarray(codes)
        v = decode(c.astype(np.uint8), self.element, dtype=np.float32)
        s = self.expand(np.asarray(scales, dtype=np.float32), c.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            return (v * s).astype(np.float32)

    def to_spec(self) -> dict[str, Any]:
        return {"element": self.element.name, "tile": list(self.tile), "amax_floor": self.rules.amax_floor,
                "pow2": self.rules.pow2}


#: DeepSeek-V3 inference/kernel.py act_quant (commit 9b4e978, scale_fmt=None): amax floored at 1e-4, s = amax / 448
DEEPSEEK_V3 = DivisionRules(amax_floor=1e-4)
#: the same with scale_fmt="ue8m0" (DeepSeek-V3.1): s = exp2(ceil(log2(s)))
DEEPSEEK_V3_1 = DivisionRules(amax_floor=1e-4, pow2="ceil_log2_float32")


__all__ = [
    "DEEPSEEK_V3",
    "DEEPSEEK_V3_1",
    "INFINITE_MULTIPLIER",
    "POW2",
    "SCALE_POW2",
    "STORED",
    "TORCHAO_FLOAT8",
    "TRANSFORMER_ENGINE_BLOCKWISE",
    "TRANSFORMER_ENGINE_CURRENT_SCALING",
    "DivisionCast",
    "DivisionRules",
    "MultiplierCast",
    "MultiplierRules",
    "TiledCast",
    "ceil_log2_pow2",
]
