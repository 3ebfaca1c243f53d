"""Block-scaled schemes: MX (OCP MX v1.0), NVFP4 and MLX affine groups (spec: docs/spec/block.md).

``qref.scheme("mxfp4", block_size=32, profile="ocp")``, ``qref.scheme("nvfp4", profile="mlx")``,
``qref.scheme("mlx_affine", bits=4, group_size=64)`` or any element format with a block size
(``qref.scheme("float8_e4m3fn", block_size=32, scale_format="float8_e8m0fnu")``) build one frozen
``BlockScheme``. Every behaviour the real systems disagree on is a separate field (block.md §2); a profile
(``ocp``, ``microxcaling``, ``torchao_floor``, ``torchao_rceil``, ``mlx``, ``jax``, ``nvidia``) is a record of
field values and the fields can be overridden one by one: ``qref.scheme("mxfp8_e4m3", profile="jax",
scale_arith="divide")``.

``scheme.quantize(x, axis=-1)`` returns a QArray: ``codes`` (one unsigned element code per element, unpacked),
``scales`` (E8M0 bytes for MX, E4M3 bytes for NVFP4, floats in the input dtype for affine), ``biases``
(affine), ``global_scale`` (NVFP4 two-level), ``unspecified`` (elements whose code the spec or the system
leaves undefined) and ``meta["scales_unspecified"]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

import numpy as np

from ...core import arith as fp
from ...core.encode import stochastic_random_bits
from ...core.exact import as_source_array
from ...core.parallel import pieces, run_chunks, thread_limit
from ...errors import QrefError, check_choice, unknown_name
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...formats.policy import STOCHASTIC_MODES, CastPolicy
from ...profiles import Profile, get_profile, profiles
from ...profiles.block import rules_of
from ...validators import check_alloc
from ..base import QArray, Scheme, normalize_axis, register_family
from . import affine, mx, nvfp4

# name -> (element format, scale format, default block size, element_scale_exp, kind)
NAMED_SCHEMES: dict[str, tuple[str | None, str | None, int, int, str]] = {
    "mxfp8_e4m3": ("float8_e4m3fn", "float8_e8m0fnu", 32, 0, "mx"),
    "mxfp8_e5m2": ("float8_e5m2", "float8_e8m0fnu", 32, 0, "mx"),
    "mxfp6_e3m2": ("float6_e3m2fn", "float8_e8m0fnu", 32, 0, "mx"),
    "mxfp6_e2m3": ("float6_e2m3fn", "float8_e8m0fnu", 32, 0, "mx"),
    "mxfp4": ("float4_e2m1fn", "float8_e8m0fnu", 32, 0, "mx"),
    "mxint8": ("int8<-127:127>", "float8_e8m0fnu", 32, -6, "mx"),
    "nvfp4": ("float4_e2m1fn", "float8_e4m3fn", 16, 0, "float_scale"),
    "nvfp4_ue4m3": ("float4_e2m1fn", "float7_e4m3fnu", 16, 0, "float_scale"),
    "nvfp4_ue5m3": ("float4_e2m1fn", "float8_e5m3fnu", 16, 0, "float_scale"),
    "mlx_affine": (None, None, 64, 0, "affine"),
}
KINDS = ("mx", "float_scale", "affine")
DEFAULT_PROFILE = {"mx": "ocp", "float_scale": "ocp", "affine": "mlx", "nvfp4": "nvidia"}

# every field's allowed values (block.md §2)
CHOICES: dict[str, tuple[str, ...]] = {
    "scale_rule": ("floor", "ceil", "even", "rceil", "floor_log2_float32", "floor_log2_in_dtype",
                   "rceil_log2_float32", "floor_plus_one", "float32_exponent_field"),
    "zero_block": ("min_scale", "unit_scale", "min_normal_amax"),
    "scale_range": ("clamp", "clamp_nan", "wrap"),
    "nonfinite_block": ("nan_scale", "nan255_inf_e128", "nan255_inf254", "zero_divisor", "nan_wraps_inf_divisor",
                        "exponent_bits_wrap"),
    "byte0_divisor": ("exact", "float32_min_normal", "one", "folded_stand_in"),
    "global_scale_rule": ("exact", "amax_encode_reciprocal", "tensor_scale_clamped", "input_dtype_encode",
                          "prescaled_divide"),
    "zero_sign": ("keep", "positive", "scaled_zero_positive"),
    "out_of_range": ("encode", "lut_argmin"),
    "element_exponent": ("exact", "floor_log2_in_dtype"),
    "divisor_out_of_range": ("divide", "nan_block"),
    "amax_nan": ("propagate", "skip"),
    "round_arith": ("exact", "in_dtype"),
    "compute_dtype": fp.COMPUTE_DTYPES,
    "scale_arith": ("divide", "reciprocal"),
    "quotient_arith": ("divide", "reciprocal"),
    "dequant": ("exact", "in_dtype"),
    "dequant_nan_scale": ("nan", "power"),
    "pad": ("zero", "error"),
    "global_scale_granularity": ("tensor", "row", "tile_64"),
}


@dataclass(frozen=True)
class BlockScheme(Scheme):
    """One block-scaled quantization scheme; every field is explicit (block.md §2 documents each value).

    name: scheme name ("mxfp4", "nvfp4", "mlx_affine", or the element format's name).
    element: element format (FloatFormat, or IntFormat for MXINT8 and affine codes).
    scale_format: float8_e8m0fnu (kind "mx"), a float format such as float8_e4m3fn ("float_scale"), None
        ("affine": float scales in the input dtype).
    block_size: elements per block (OCP k = 32; NVFP4 16; MLX affine group 32, 64 or 128).
    kind: "mx", "float_scale" or "affine".
    profile: the profile the fields came from (None when built by hand).
    element_scale_exp: element value = code value * 2^element_scale_exp (MXINT8: -6). Default 0.
    scale_rule (mx): floor | ceil | even | rceil | floor_log2_float32 | floor_log2_in_dtype | rceil_log2_float32 |
        floor_plus_one (floor + 1: a scale twice OCP's) | float32_exponent_field (the exponent field of
        fl32(amax / M): a float32 scale of which only the exponent is read). Default "floor".
    amax_floor (mx, compute dtype): amax = max(amax, fl_C(amax_floor)) before the rule (0: none). Default 0.
    zero_block (mx): min_scale (byte 0) | unit_scale (byte 127) | min_normal_amax (rule on 2^-126).
        Default "min_scale".
    scale_range (mx): clamp | clamp_nan (above 127: NaN scale) | wrap (byte = e + 127 mod 256). Default
        "clamp_nan".
    nonfinite_block (mx): nan_scale | nan255_inf_e128 | nan255_inf254 | mlx | jax. Default "nan_scale".
    byte0_divisor (mx): exact (2^-127) | float32_min_normal (2^-126) | one (1) | jax (2^-15 in float16, else
        2^-127). Default "exact".
    global_scale_rule (float_scale): exact | amax_encode_reciprocal | tensor_scale_clamped | input_dtype_encode |
        prescaled_divide (block.md §5.2). Default "exact".
    amax_nan (float_scale, amax_encode_reciprocal): propagate (a NaN input makes the block and tensor amax NaN:
        torch.amax) | skip (NaN skipped: PTX max). Default "propagate".
    rounding, overflow, nan: the element CastPolicy (core rounding modes; overflow "saturate" = the OCP clamp;
        nan None = the format's default). Defaults "nearest_even", "saturate", None. The stochastic modes
        (stochastic_a / b / c, P3109) round each scaled value with N random bits (block.md §13).
    stochastic_bits: N, random bits per element of a stochastic rounding (1..32); None for the deterministic
        modes. Default None.
    zero_sign: keep | positive (every -0 result becomes +0, MLX FP4) | scaled_zero_positive (a scaled value
        that is exactly -0 gives +0, a negative value that rounds to zero keeps -0: microxcaling's
        sign(x) * floor(|x| + 1/2)). Default "keep".
    out_of_range: encode | lut_argmin (scaled values beyond the element max or non-finite take MLX's table
        argmin: the first code at the smallest distance, computed in the scaled values' dtype). Default "encode".
    compute_dtype: exact | input | float32 | float16 | bfloat16 (the dtype of quotients and scaled values).
        Default "exact".
    scale_arith: divide (x / X) | reciprocal (x * fl(1/X)). Default "divide".
    quotient_arith (rceil rules): divide (fl(amax / max_elem)) | reciprocal (fl(amax * fl(1/max_elem))).
        Default "divide".
    flush_subnormals: XLA:CPU FTZ/DAZ in the compute steps. Default False.
    flush_subnormal_blocks (mx): blocks whose floor(log2 amax) is below -126 become zeros of their elements' signs
        before scaling (microxcaling's mx_flush_fp32_subnorms). Default False.
    divisor_out_of_range: divide (x / 0 and x / Inf as IEEE) | nan_block (a divisor 2^e_div that is 0 or Inf in
        the compute dtype makes the block NaN: byte 255). Default "divide".
    element_exponent: exact | floor_log2_in_dtype (the scaled-integer element step's exponent is
        floor(fl_T(log2 |y|)), block.md §4.7.1). Default "exact".
    round_arith: exact | in_dtype (the step's |m| + 1/2 and |m| - 1/2 are rounded in the compute dtype,
        block.md §4.7.1). Default "exact".
    dequant: exact (rounded once) | in_dtype (scale rounded to the output dtype, then the product). Default
        "exact".
    dequant_nan_scale: nan | power (byte 255 dequantizes as 2^128, MLX). Default "nan".
    pad: zero (a short last block is padded with +0) | error. Default "zero".
    min_ndim: the fewest input dimensions accepted (MLX: 2). Default 1.
    unspecified_open_cases: mark the cases OCP leaves open (zero, tiny, huge and non-finite blocks) as
        unspecified. Default True.
    """

    name: str
    element: Format
    scale_format: FloatFormat | None
    block_size: int
    kind: str
    profile: str | None = None
    element_scale_exp: int = 0
    scale_rule: str = "floor"
    zero_block: str = "min_scale"
    scale_range: str = "clamp_nan"
    nonfinite_block: str = "nan_scale"
    byte0_divisor: str = "exact"
    global_scale_rule: str = "exact"
    amax_nan: str = "propagate"
    rounding: str = "nearest_even"
    overflow: str = "saturate"
    nan: str | None = None
    stochastic_bits: int | None = None
    zero_sign: str = "keep"
    out_of_range: str = "encode"
    compute_dtype: str = "exact"
    scale_arith: str = "divide"
    quotient_arith: str = "divide"
    flush_subnormals: bool = False
    flush_subnormal_blocks: bool = False
    divisor_out_of_range: str = "divide"
    element_exponent: str = "exact"
    round_arith: str = "exact"
    dequant: str = "exact"
    dequant_nan_scale: str = "nan"
    pad: str = "zero"
    min_ndim: int = 1
    unspecified_open_cases: bool = True
    amax_floor: float = 0.0
    global_scale_granularity: str = "tensor"
    family = "block"

    def __post_init__(self) -> None:
        check_choice("block scheme kind", self.kind, KINDS)
        for f, choices in CHOICES.items():
            check_choice(f.replace("_", " "), getattr(self, f), choices)
        if not isinstance(self.block_size, int) or isinstance(self.block_size, bool) or self.block_size < 1:
            raise QrefError(f"block_size must be a positive integer, got {self.block_size!r}")
        if not isinstance(self.element, (FloatFormat, IntFormat)):
            raise QrefError(f"element must be a format record, got {self.element!r}")
        CastPolicy(rounding=self.rounding, overflow=self.overflow, nan=self.nan,
                   stochastic_bits=self.stochastic_bits).resolve(self.element)
        if self.stochastic_bits is not None and not self.stochastic:
            raise QrefError(f"stochastic_bits={self.stochastic_bits!r} is for the stochastic rounding modes "
                            f"(stochastic_a/b/c, block.md §13); rounding={self.rounding!r} takes none: drop it")
        if self.stochastic and self.out_of_range == "lut_argmin":
            raise QrefError("out_of_range='lut_argmin' (MLX's FP4 table argmin) is a nearest rule; stochastic "
                            "rounding takes out_of_range='encode' (block.md §13, C3)")
        exact = self.compute_dtype == "exact"
        if self.kind == "mx":
            if self.scale_format is None or self.scale_format.name != "float8_e8m0fnu":
                raise QrefError("MX blocks take scale_format='float8_e8m0fnu' (OCP MX v1.0 §5.4); for other "
                                "float scale formats pass a format with mantissa bits (float_scale kind)")
            float_nonfinite = ("zero_divisor", "nan_wraps_inf_divisor", "exponent_bits_wrap")
            if exact and (self.nonfinite_block in float_nonfinite or self.flush_subnormals):
                raise QrefError(f"nonfinite_block={self.nonfinite_block!r} and flush_subnormals describe "
                                "floating-point arithmetic; they need compute_dtype 'input', 'float32', ...")
            if exact and (self.scale_rule.endswith("float32") or self.scale_rule.endswith("in_dtype")
                          or self.scale_rule == "float32_exponent_field"):
                raise QrefError(f"scale_rule={self.scale_rule!r} takes a floating-point logarithm: set "
                                "compute_dtype='float32' or 'input'")
        elif self.kind == "float_scale":
            if not isinstance(self.scale_format, FloatFormat) or self.scale_format.mantissa_bits == 0:
                raise QrefError("float-scaled blocks need a scale format with mantissa bits (e.g. "
                                "float8_e4m3fn); E8M0 scales are the MX kind")
            if not isinstance(self.element, FloatFormat):
                raise QrefError("float-scaled blocks take float elements")
        else:
            if not (isinstance(self.element, IntFormat) and not self.element.signed and 1 <= self.element.bits <= 8):
                raise QrefError("affine groups take unsigned 1..8-bit codes (bits=1..8)")
            if self.scale_format is not None:
                raise QrefError("affine groups store float scales in the input dtype: scale_format must be None")
            if self.rounding != "nearest_even" and not self.stochastic:
                raise QrefError(f"affine groups round the float32 quotient with rint (nearest_even, block.md §6) or "
                                f"a stochastic mode (§13), not {self.rounding!r}")
        if not (isinstance(self.amax_floor, (int, float)) and not isinstance(self.amax_floor, bool)
                and math.isfinite(self.amax_floor) and self.amax_floor >= 0):
            raise QrefError(f"amax_floor must be a finite number >= 0, got {self.amax_floor!r}")
        if self.amax_floor and (self.kind != "mx" or exact):
            raise QrefError("amax_floor (block.md §4.2: amax = max(amax, fl_C(amax_floor))) is an MX rule in a "
                            "compute dtype: kind 'mx' with compute_dtype 'float32' or 'input'")
        if self.global_scale_granularity != "tensor" and not (
                self.kind == "float_scale" and self.global_scale_rule == "amax_encode_reciprocal"):
            raise QrefError(f"global_scale_granularity={self.global_scale_granularity!r} (block.md §5.2.1) takes the "
                            "outer amax per row or per 1 x 64 tile: float_scale kind with global_scale_rule "
                            "'amax_encode_reciprocal'")
        if self.global_scale_granularity == "tile_64" and 64 % self.block_size:
            raise QrefError(f"global_scale_granularity='tile_64' groups whole blocks: block_size must divide 64, "
                            f"got {self.block_size}")
        if self.amax_nan == "skip" and not (self.kind == "float_scale"
                                            and self.global_scale_rule == "amax_encode_reciprocal"):
            raise QrefError("amax_nan='skip' is modelled for global_scale_rule='amax_encode_reciprocal' only "
                            "(block.md §5.2); the other rules take the NaN-propagating maximum")
        if self.flush_subnormal_blocks and (self.kind != "mx" or self.scale_rule not in (
                "floor", "floor_log2_float32", "floor_log2_in_dtype")):
            raise QrefError("flush_subnormal_blocks is an MX rule that reads the block's floor(log2 amax): it takes "
                            "scale_rule 'floor', 'floor_log2_float32' or 'floor_log2_in_dtype' (block.md §4.6)")
        if exact and (self.element_exponent != "exact" or self.round_arith != "exact"
                      or self.divisor_out_of_range != "divide"):
            raise QrefError("element_exponent, round_arith and divisor_out_of_range describe floating-point "
                            "arithmetic: set compute_dtype='input', 'float32', ... (block.md §4.6, §4.7.1)")
        if (self.element_exponent != "exact" or self.round_arith != "exact") and self.rounding not in (
                "nearest_away", "toward_zero", "nearest_even", "stochastic_a", "stochastic_b"):
            raise QrefError(f"the scaled-integer element step (element_exponent / round_arith, block.md §4.7.1) "
                            f"rounds nearest_away, toward_zero, nearest_even, stochastic_a or stochastic_b, not "
                            f"{self.rounding!r}")

    @property
    def stochastic(self) -> bool:
        """True for the stochastic rounding modes (block.md §13)."""
        return self.rounding in STOCHASTIC_MODES

    # ---- derived element constants ------------------------------------------------------------------------
    @property
    def element_max(self) -> Fraction:
        """Largest element magnitude (as a real value, element_scale_exp included)."""
        fmt = self.element
        top = fmt.max_value if isinstance(fmt, FloatFormat) else Fraction(fmt.hi)
        return top * Fraction(2) ** self.element_scale_exp

    @property
    def element_emax(self) -> int:
        """floor(log2(element_max)): OCP's 'largest power of two representable in the element data type'."""
        m = self.element_max
        e = m.numerator.bit_length() - m.denominator.bit_length()
        return e if Fraction(2) ** e <= m else e - 1

    @property
    def element_mantissa_bits(self) -> int:
        fmt = self.element
        return fmt.mantissa_bits if isinstance(fmt, FloatFormat) else fmt.bits - 2

    @property
    def bits(self) -> int:
        return self.element.bits

    # ---- quantize / dequantize ----------------------------------------------------------------------------
    def _blocks(self, arr: np.ndarray, axis: int) -> tuple[np.ndarray, int, int, tuple[int, ...]]:
        if arr.ndim < max(self.min_ndim, 1):
            raise QrefError(f"{self.name} ({self.profile}) needs an input with at least {max(self.min_ndim, 1)} "
                            f"dimension(s), got shape {arr.shape}"
                            + (" (MLX quantizes matrices: reshape to (1, n))" if self.min_ndim > 1 else ""))
        ax = normalize_axis(axis, arr.ndim)
        moved = np.moveaxis(arr, ax, -1)
        L = moved.shape[-1]
        k = self.block_size
        pad = (-L) % k
        if pad and self.pad == "error":
            raise QrefError(
                f"the length {L} along axis {axis} is not a multiple of block_size {k}, and profile "
                f"{self.profile!r} does not pad (the real system rejects it); pad the input to a multiple of {k} "
                "or pass pad='zero' (short blocks padded with +0, block.md §7)"
            )
        check_alloc(math.prod(moved.shape[:-1]) * (L + pad), 8, f"{self.name} with block_size {k} on shape "
                    f"{arr.shape} (padded to whole blocks)")
        if pad:
            moved = np.concatenate([moved, np.zeros((*moved.shape[:-1], pad), dtype=moved.dtype)], axis=-1)
        return np.ascontiguousarray(moved).reshape(-1, k), ax, L, moved.shape

    def quantize(self, x: object, axis: int = -1, global_scale: object = None, *, random_bits: object = None,
                 seed: object = None, threads: int | None = None, **kwargs: Any) -> QArray:
        """Quantize blocks of ``block_size`` consecutive elements along ``axis`` (default -1).

        global_scale: NVFP4 two-level scale in the rule's own terms (amax_encode_reciprocal and
        input_dtype_encode: the tensor amax g; tensor_scale_clamped: pts = amax / 2688; prescaled_divide: the
        divisor gs). None: amax_encode_reciprocal computes g = max|x| over the tensor, prescaled_divide uses
        gs = 1, the other two quantize single-level.
        random_bits, seed: the N-bit random integers of a stochastic rounding (block.md §13): ``random_bits``
        broadcast to x's shape (R[i] rounds x[i]), or ``seed`` (the PCG64 stream of elements.md §2.5, one
        integer per element of x in C order). Only for the stochastic modes; padding elements take R = 0.
        threads: threads for a large x, whole blocks per chunk (default None: $QREF_NUM_THREADS, else every
        core; the result never depends on it, elements.md §2.11)."""
        if kwargs:
            raise QrefError(f"{type(self).__name__}.quantize takes axis=, global_scale=, threads=, random_bits= and "
                            f"seed=, got {sorted(kwargs)}")
        arr = as_source_array(x)
        if arr.dtype.kind == "b":  # pragma: no cover - as_source_array rejects booleans
            raise QrefError("boolean input")
        xb, ax, L, moved_shape = self._blocks(arr, axis)
        rb = None
        if self.stochastic:
            assert self.stochastic_bits is not None
            r = stochastic_random_bits(arr.shape, self.stochastic_bits, random_bits, seed).reshape(arr.shape)
            rb = self._blocks(r, axis)[0]  # the same moves as x; padding takes R = 0 (its values are exact zeros)
        elif random_bits is not None or seed is not None:
            raise QrefError(f"random_bits / seed are for stochastic rounding; {self.name} rounds {self.rounding!r} "
                            "(pass rounding='stochastic_a', stochastic_bits=N)")
        gs = None
        if global_scale is not None:
            if self.kind != "float_scale" or self.global_scale_rule == "exact":
                raise QrefError(f"{self.name} with global_scale_rule={self.global_scale_rule!r} takes no "
                                "global scale; NVFP4 two-level scaling needs a global_scale_rule other than "
                                "'exact' (e.g. profile='nvidia', 'torchao_floor', 'mlx' or 'jax')")
            try:
                g = np.asarray(global_scale, dtype=np.float64)
            except (TypeError, ValueError):
                raise QrefError(f"global_scale must be a single float value, got {global_scale!r}") from None
            if g.size != 1:
                raise QrefError("global_scale must be a single float32 value")
            gs = np.float32(g.reshape(-1)[0])
            if np.isnan(gs) or gs < 0:  # block.md §5.2 (C1): a given amax or scale is >= 0, not NaN
                raise QrefError(f"global_scale must be >= 0 and not NaN (a tensor amax or scale in the rule's "
                                f"terms; +Inf is allowed), got {float(gs)!r}")
        g_blocks = None
        if self.kind == "float_scale":
            if self.global_scale_granularity != "tensor":
                if gs is not None:
                    raise QrefError(f"global_scale_granularity={self.global_scale_granularity!r} computes one outer "
                                    "amax per row or 1 x 64 tile from x itself; pass no global_scale")
                g_blocks = nvfp4.group_amax(xb, moved_shape[-1] // self.block_size, self.global_scale_granularity,
                                            skip_nan=self.amax_nan == "skip")
            elif gs is None and self.global_scale_rule == "amax_encode_reciprocal":
                gs = nvfp4.tensor_amax(arr, skip_nan=self.amax_nan == "skip")
        parts: dict[int, dict[str, np.ndarray]] = {}

        def work(lo: int, hi: int) -> None:  # whole blocks: each block's result is its own (elements.md §2.11)
            for a, b in pieces(lo, hi, self.block_size):  # bounded temporaries
                xr, rr = xb[a:b], None if rb is None else rb[a:b]
                if self.kind == "mx":
                    parts[a] = mx.quantize_mx_blocks(self, xr, rr)
                elif self.kind == "float_scale":  # an outer amax per block (§5.2.1) is sliced with its blocks
                    parts[a] = nvfp4.quantize_float_scaled_blocks(self, xr, gs if g_blocks is None else g_blocks[a:b],
                                                                  rr)
                else:
                    parts[a] = affine.quantize_affine_blocks(self, xr, rr)

        with thread_limit(threads):
            run_chunks(work, xb.shape[0], self.block_size)
        out = _join_parts(parts)
        lead = moved_shape[:-1]
        nb_row = moved_shape[-1] // self.block_size

        def back(a: np.ndarray, per_block: bool) -> np.ndarray:
            a = a.reshape((*lead, nb_row)) if per_block else a.reshape(moved_shape)[..., :L]
            return np.moveaxis(a, -1, ax)

        g = out.get("global_scale")
        if g is not None and np.ndim(g):  # an outer amax per block (global_scale_granularity, §5.2.1)
            g = back(np.asarray(g, dtype=np.float32), True)
        return QArray(
            codes=back(out["codes"], False),
            scheme=self,
            scales=back(out["scales"], True),
            biases=back(out["biases"], True) if "biases" in out else None,
            global_scale=None if g is None else np.asarray(g, dtype=np.float32),
            unspecified=back(out["unspecified"], False),
            axis=ax,
            meta={"input_dtype": xb.dtype.name, "length": L,
                  "scales_unspecified": back(out["scales_unspecified"], True)},
        )

    def dequantize(self, q: QArray, dtype: object = np.float32, *, threads: int | None = None) -> np.ndarray:
        """Values of a QArray of this scheme as ``dtype`` (block.md §4.8, §5.4, §6); threads: as quantize's."""
        dt = np.dtype(dtype)
        raw = np.asarray(q.codes)
        nbits = self.element.bits
        if raw.dtype.kind not in "iu" or (raw.size and (int(raw.min()) < 0 or int(raw.max()) >= 1 << nbits)):
            raise QrefError(f"codes of {self.name} are {nbits}-bit element codes in [0, 2^{nbits}); got "
                            + (f"dtype {raw.dtype}" if raw.dtype.kind not in "iu" else
                               f"values in [{int(raw.min())}, {int(raw.max())}]"))
        ax = q.axis if q.axis is not None else q.codes.ndim - 1
        codes, _, L, moved_shape = self._blocks(raw, ax)
        k = self.block_size
        scales = np.moveaxis(np.asarray(q.scales), ax, -1).reshape(-1)
        if scales.size * k != codes.size:
            raise QrefError(f"{scales.size} scales do not match {codes.size} codes in blocks of {k}")
        biases = None if self.kind in ("mx", "float_scale") else np.moveaxis(np.asarray(q.biases), ax, -1).reshape(-1)
        g = q.global_scale
        per_block_g = g is not None and np.ndim(g) and np.size(g) > 1
        if per_block_g:  # an outer scale per block, shaped as the scales (§5.2.1)
            g = np.moveaxis(np.asarray(g, dtype=np.float32), ax, -1).reshape(-1)
        v = np.empty(codes.shape, dtype=dt)

        def work(lo: int, hi: int) -> None:  # whole blocks (elements.md §2.11), bounded temporaries
            for a, b in pieces(lo, hi, k):
                c, sc = codes[a:b], scales[a:b]
                if self.kind == "mx":
                    v[a:b] = mx.dequantize_mx(self, c, sc, dt)
                elif self.kind == "float_scale":
                    v[a:b] = nvfp4.dequantize_float_scaled(self, c, sc, g[a:b] if per_block_g else g, dt)
                else:
                    assert biases is not None
                    v[a:b] = affine.dequantize_affine(self, c, sc, biases[a:b], dt)

        with thread_limit(threads):
            run_chunks(work, codes.shape[0], k)
        return np.moveaxis(v.reshape(moved_shape)[..., :L], -1, ax)

    # ---- spec ---------------------------------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"family": "block"}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "stochastic_bits" and v is None:
                continue  # deterministic schemes: the spec (and every committed case) as before §13
            if (f.name, v) in (("amax_floor", 0.0), ("global_scale_granularity", "tensor")):
                continue  # likewise: the committed cases' specs as before
            if isinstance(v, (FloatFormat, IntFormat)):
                v = v.name
            spec[f.name] = v
        return spec


def _join_parts(parts: dict[int, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The per-block outputs of chunks of blocks, joined in block order (a scalar global scale: the first's)."""
    order = [parts[lo] for lo in sorted(parts)]
    if len(order) == 1:
        return order[0]
    out: dict[str, np.ndarray] = {}
    for name, first in order[0].items():
        out[name] = first if name == "global_scale" else np.concatenate([p[name] for p in order], axis=0)
    return out


FIELD_NAMES = tuple(f.name for f in fields(BlockScheme))
_OVERRIDABLE = tuple(n for n in FIELD_NAMES if n not in ("name", "kind", "profile", "block_size"))


def from_spec(spec: dict[str, Any]) -> BlockScheme:
    spec = dict(spec)
    spec.pop("family", None)
    unknown = set(spec) - set(FIELD_NAMES)
    if unknown:
        raise unknown_name("block scheme field", sorted(unknown)[0], FIELD_NAMES)
    spec["element"] = get_format(spec["element"])
    if spec.get("scale_format") is not None:
        spec["scale_format"] = get_format(spec["scale_format"])
    return BlockScheme(**spec)


def _profile_section(prof: Profile, kind: str, name: str) -> dict[str, Any]:
    """The BlockScheme field values of profile ``prof`` for scheme kind ``kind`` (its typed rules, block.md §8)."""
    sect = rules_of(prof).kind(kind)
    if sect is None:
        have = sorted(n for n, p in profiles("block").items() if rules_of(p).kind(kind) is not None)
        raise QrefError(f"block profile {prof.name!r} ({prof.system}) defines no {kind} rules for {name!r}; "
                        f"profiles with {kind} rules: {', '.join(have)}")
    return sect.values()


def _build(name: str | Format, *, profile: str | None = None, block_size: int | None = None,
           group_size: int | None = None, bits: int | None = None, scale_format: str | Format | None = None,
           **overrides: Any) -> BlockScheme:
    """Builder for qref.scheme: named schemes and element formats with block_size (block.md §2)."""
    if isinstance(name, str) and name in NAMED_SCHEMES:
        elem_name, scale_name, k_default, ses, kind = NAMED_SCHEMES[name]
        sname = name
        if scale_format is not None and get_format(scale_format).name != scale_name:
            raise QrefError(f"{name} has scale format {scale_name}; for another scale format use the element "
                            f"format with block_size= and scale_format=")
        if kind == "affine":
            if block_size is not None and group_size is not None and block_size != group_size:
                raise QrefError("give group_size or block_size, not two different values")
            k = group_size if group_size is not None else (block_size if block_size is not None else k_default)
            b = 4 if bits is None else bits
            if not isinstance(b, int) or not 1 <= b <= 8:
                raise QrefError(f"mlx_affine bits must be an integer in 1..8, got {bits!r}")
            element: Format = get_format(f"uint{b}")
            scale_fmt = None
        else:
            if bits is not None or group_size is not None:
                raise QrefError(f"bits= and group_size= are mlx_affine parameters; {name} takes block_size=")
            element = get_format(elem_name)  # type: ignore[arg-type]
            scale_fmt = get_format(scale_name)  # type: ignore[arg-type]
            k = k_default if block_size is None else block_size
    else:
        element = get_format(name)
        sname = element.name
        if bits is not None or group_size is not None:
            raise QrefError("bits= and group_size= are mlx_affine parameters")
        if block_size is None:
            raise QrefError(f"{sname} as a block scheme needs block_size=")
        scale_fmt = get_format(scale_format if scale_format is not None else "float8_e8m0fnu")
        if not isinstance(scale_fmt, FloatFormat):
            raise QrefError(f"scale_format must be a float format, got {scale_fmt.name}")
        kind = "mx" if scale_fmt.mantissa_bits == 0 else "float_scale"
        ses = 0
        k = block_size
    assert isinstance(scale_fmt, FloatFormat) or scale_fmt is None
    pname = profile or (DEFAULT_PROFILE["nvfp4"] if sname.startswith("nvfp4") else DEFAULT_PROFILE[kind])
    prof = get_profile(pname, "block")
    params = _profile_section(prof, kind, sname)
    rules = rules_of(prof)
    support = rules.support(kind)
    elems = support.elements
    override_elem = rules.for_element(element.name)
    if elems is not None and element.name not in elems:
        raise QrefError(f"profile {pname!r} ({prof.system}) has no {sname} ({element.name} elements); it supports "
                        f"{', '.join(elems)}")
    sizes = support.block_sizes
    if sizes is not None and k not in sizes:
        raise QrefError(f"profile {pname!r} ({prof.system}) takes block sizes {sizes} for {kind} schemes, got {k}")
    bits_ok = support.bits
    if bits_ok is not None and element.bits not in bits_ok:
        raise QrefError(f"profile {pname!r} ({prof.system}) takes bits {bits_ok}, got {element.bits}")
    params.update(override_elem)
    for key in overrides:
        if key not in _OVERRIDABLE:
            raise unknown_name("block scheme option", key, (*_OVERRIDABLE, "profile", "block_size", "group_size",
                                                             "bits", "scale_format"))
    params.update({k_: v for k_, v in overrides.items() if v is not None or k_ == "nan"})
    if "element" in params and not isinstance(params["element"], (FloatFormat, IntFormat)):
        params["element"] = get_format(params["element"])
    params.setdefault("element", element)
    params.setdefault("element_scale_exp", ses)
    return BlockScheme(name=sname, scale_format=scale_fmt, block_size=k, kind=kind, profile=pname, **params)


def _claims(fmt: Format, kw: dict[str, Any]) -> bool:
    return isinstance(fmt, (FloatFormat, IntFormat)) and "block_size" in kw and not ({"scale", "zero_point"} & set(kw))


register_family("block", builder=_build, from_spec=from_spec, names=tuple(NAMED_SCHEMES), claims=_claims,
                order=200)

__all__ = ["CHOICES", "NAMED_SCHEMES", "BlockScheme"]
