"""Uniform (affine) quantization: the scheme, its builder and its spec (spec: docs/spec/uniform.md).

A ``UniformScheme`` is one frozen record (validation.py: ``UniformRecord``): the storage format (an
``IntFormat``, possibly narrowed such as ``int8<-127:127>``, or a float format for ONNX fp8/fp4 outputs), the
expressed type, the scales and zero points with their granularity (per tensor, per axis on any axis, or
sub-channel blocks along one or more axes), and a ``UniformArithmetic`` record that pins every step a real
system takes (uniform.md §3). Named profiles (uniform.md §4) are records of those fields, kept with the record
itself in qref/profiles/uniform.py (``profile.rules``). quantize and dequantize run entry.py (fast path or
reference, chunks, vector loops); reference.py is the definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.encode import stochastic_random_bits
from ...core.exact import as_source_array, typed_numbers
from ...core.parallel import thread_limit
from ...errors import QrefError
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...formats.policy import STOCHASTIC_MODES
from ...profiles import get_profile, profiles
from ...profiles.uniform import DEFAULT_PROFILE, UniformArithmetic
from ...validators import check_number_array
from ..base import QArray, Scheme, register_family
from . import entry
from .validation import UniformRecord, arithmetic_for, parse_block_size

__all__ = ["UniformScheme", "build_uniform", "from_spec"]


@dataclass(frozen=True)
class UniformScheme(UniformRecord, Scheme):
    """Affine quantization q = clamp(round(x / s) + z) (uniform.md §1); a frozen record (fields: see
    ``UniformRecord``)."""

    family = "uniform"

    def quantize(self, x: object, *, random_bits: object = None, seed: object = None, _reference: bool = False,
                 threads: int | None = None, **kwargs: Any) -> QArray:
        """QArray with storage codes, scales, zero points and the unspecified mask (uniform.md §2.1).
        Stochastic rounding (§2.6) takes ``random_bits`` (N-bit integers broadcast to x, N = stochastic_bits)
        or ``seed``. ``_reference=True`` takes the defining integer steps instead of the fast ones (§2.5).
        threads: threads for a large x, in chunks of rows (default None: $QREF_NUM_THREADS, else every core;
        the result never depends on it, elements.md §2.11)."""
        if kwargs:
            raise QrefError(f"UniformScheme.quantize takes random_bits=, seed= and threads= only, got "
                            f"{sorted(kwargs)}")
        A = self.arithmetic
        arr = as_source_array(x)
        rbits = None
        if A.rounding in STOCHASTIC_MODES:
            assert A.stochastic_bits is not None
            rbits = stochastic_random_bits(arr.shape, A.stochastic_bits, random_bits, seed).reshape(arr.shape)
        elif random_bits is not None or seed is not None:
            raise QrefError(f"random_bits / seed are for stochastic rounding; this scheme rounds {A.rounding!r}")
        with thread_limit(threads):
            if A.simd_width:
                codes, unspecified = entry.quantize_simd(self, arr, _reference)
            else:
                codes, unspecified = entry.quantize_codes(self, arr, rbits, _reference)
        return QArray(codes=codes.astype(self.codes_dtype, copy=False), scheme=self, scales=self.scale_array,
                      zero_points=self.zero_point_array, unspecified=unspecified, axis=self.axis,
                      meta={"profile": self.profile})

    def dequantize(self, q: QArray, dtype: object = None, *, _reference: bool = False, threads: int | None = None
                   ) -> np.ndarray:
        """(code - z) * s (uniform.md §2.2) in the profile's dtypes, then cast to ``dtype`` (default: the
        expressed type). Values at q.unspecified positions are computed from placeholder codes. threads: as
        quantize's."""
        with thread_limit(threads):
            return entry.dequantize(self, entry.plain_codes(self, q), dtype, _reference)

    def dequantize_with_mask(self, q: QArray, dtype: object = None, *, _reference: bool = False,
                             threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(values, unspecified): the mask marks results the profile leaves undefined (StableHLO spec: the
        subtraction overflows the storage type) together with q.unspecified. ``_reference=True`` broadcasts
        the scales to the codes' shape (``expand``) also where blocks divide the axes (§2.5). threads: as
        quantize's."""
        with thread_limit(threads):
            return entry.dequantize_with_mask(self, entry.plain_codes(self, q), dtype, _reference)

    def to_spec(self) -> dict[str, Any]:
        return {
            "family": "uniform", "storage": self.storage.name, "expressed": self.expressed.name,
            "scales": list(self.scales), "zero_points": list(self.zero_points),
            "scale_shape": list(self.scale_shape), "axis": self.axis,
            "block_size": None if self.block_size is None else [list(p) for p in self.block_size],
            "profile": self.profile, "arithmetic": self.arithmetic.to_dict(),
            "storage_range": None if self.storage_range is None else list(self.storage_range),
            "type_spelling": self.type_spelling,
        }


def from_spec(spec: dict[str, Any]) -> UniformScheme:
    expressed = get_format(spec["expressed"])
    assert isinstance(expressed, FloatFormat)
    return UniformScheme(
        storage=get_format(spec["storage"]), expressed=expressed,
        scales=tuple(float(s) for s in spec["scales"]), zero_points=tuple(int(z) for z in spec["zero_points"]),
        scale_shape=tuple(spec["scale_shape"]), axis=spec.get("axis"),
        block_size=None if spec.get("block_size") is None else tuple(tuple(p) for p in spec["block_size"]),
        profile=spec.get("profile"), arithmetic=UniformArithmetic.from_dict(spec["arithmetic"]),
        storage_range=None if spec.get("storage_range") is None else tuple(spec["storage_range"]),
        type_spelling=spec.get("type_spelling"),
    )


def build_uniform(
    storage: str | Format,
    *,
    scale: object = None,
    zero_point: object = None,
    axis: int | None = None,
    block_size: object = None,
    profile: str | None = DEFAULT_PROFILE,
    expressed: str | Format = "float32",
    storage_range: tuple[int, int] | None = None,
    type_spelling: str | None = None,
    **arithmetic: Any,
) -> UniformScheme:
    """Build a UniformScheme (uniform.md §1).

    storage: integer storage name (``int8``, ``uint4``, ``int8<-127:127>``, MLIR ``i8``/``u8``) or a float
        format for ONNX fp8/fp4 outputs. scale: a number (per tensor), a 1-D array (per axis, with ``axis``) or
        an array of the input's rank (blocked, with ``block_size``). zero_point: None (0), a number, or an array
        of the scale's shape. axis: per-axis quantization axis (default None); with an int block_size it names
        the blocked axis (ONNX). block_size: None (default), an int (with axis), {axis: size} or a per-axis
        tuple. profile: a uniform profile (default "stablehlo"). expressed: the expressed/scale type (default
        float32). Other keywords override UniformArithmetic fields (e.g. rounding="nearest_away").
    """
    fmt = get_format(storage)
    ex = get_format(expressed)
    if not isinstance(ex, FloatFormat):
        raise QrefError(f"expressed must be a float type, got {ex.name}")
    if scale is None:
        raise QrefError(f"a uniform scheme for {fmt.name} needs scale=<number or array>")
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise QrefError(f"axis must be None or an integer (the quantized dimension, uniform.md §1), got "
                        f"{type(axis).__name__} {axis!r}")
    if profile is not None and not isinstance(profile, str):
        raise QrefError(f"profile must be a uniform profile name (str) or None, got {type(profile).__name__} "
                        f"{profile!r}; qref.profiles('uniform') lists them")
    # float16/bfloat16/float8/E8M0 scales as ONNX gives them become float64 first (uniform.md §1 C9)
    S = check_number_array(scale if isinstance(scale, (str, bytes)) else typed_numbers(np.asarray(scale)), "scale")
    if block_size is None and axis is None and S.size == 1:
        S = S.reshape(())
    if block_size is None and axis is not None and S.ndim != 1:
        raise QrefError(f"per-axis quantization (axis={axis}) takes a 1-D scale array, got shape {S.shape}")
    # uniform.md §1 (C9): zero points as ONNX types them (ml_dtypes int2/int4/uint2/uint4, float8/float4 values)
    Z = np.zeros(S.shape, dtype=np.int64) if zero_point is None else typed_numbers(np.asarray(zero_point))
    if Z.dtype.kind not in "iuf" and not (Z.dtype.kind == "O" and all(
            isinstance(v, int) and not isinstance(v, bool) for v in Z.reshape(-1))):
        raise QrefError(f"zero_point must be an integer or an integer array, got {zero_point!r}")
    if Z.dtype.kind == "f" and not np.all(np.isfinite(Z) & (np.round(Z) == Z)):
        raise QrefError(f"zero points must be finite integers, got {zero_point!r}")
    if Z.size and any(not -(2**63) <= int(v) < 2**63 for v in Z.reshape(-1)[:1 << 16]):
        raise QrefError(f"zero points must fit int64 (uniform.md §1 (C7)), got {zero_point!r}")
    if S.ndim == 0 and Z.size == 1:  # uniform.md §1 C7: a one-element zero point with a scalar scale (ONNX)
        Z = Z.reshape(())
    try:
        Z = np.broadcast_to(Z.astype(np.int64), S.shape)
    except ValueError:
        raise QrefError(f"zero_point of shape {np.shape(zero_point)} does not match the scale shape {S.shape}"
                        ) from None
    if storage_range is not None:  # uniform.md §1 (C8): a narrowed [min, max] of integers with min <= max
        if (not isinstance(storage_range, (tuple, list)) or len(storage_range) != 2
                or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in storage_range)
                or storage_range[0] > storage_range[1]):
            raise QrefError(f"storage_range must be (min, max) integers with min <= max, got {storage_range!r}")
        storage_range = (int(storage_range[0]), int(storage_range[1]))
    blocks = None
    ax = axis
    if block_size is not None:
        blocks = parse_block_size(block_size, axis, S.ndim)
        ax = None
    if profile is not None and profile not in profiles("uniform"):
        get_profile(profile, "uniform")  # raises with close matches
    arith = arithmetic_for(profile, **arithmetic)
    return UniformScheme(
        storage=fmt, expressed=ex, scales=tuple(float(v) for v in S.reshape(-1)),
        zero_points=tuple(int(v) for v in Z.reshape(-1)), scale_shape=tuple(S.shape), axis=ax,
        block_size=blocks, profile=profile, arithmetic=arith, storage_range=storage_range,
        type_spelling=type_spelling,
    )


def _build(name: str | Format, **kwargs: Any) -> UniformScheme:
    return build_uniform(name, **kwargs)


def _claims(fmt: Format, kwargs: Mapping[str, Any]) -> bool:
    if isinstance(fmt, IntFormat):
        return True
    return bool({"scale", "zero_point"} & set(kwargs))


register_family("uniform", builder=_build, from_spec=from_spec, claims=_claims, order=500)
