"""The uniform record: its fields, their checks and the block geometry (spec: docs/spec/uniform.md §1).

``UniformRecord`` holds what a uniform scheme is (storage, expressed type, scales, zero points, granularity,
the ``UniformArithmetic`` rules) and checks it on construction (uniform.md §1, constraints C1..C9); it holds
no arithmetic. ``parse_block_size`` is the one reader of a ``block_size=`` argument in qref (the scheme
builder and ``qref.calibrate``): an int with ``axis`` (ONNX blocked), ``{axis: size}``, ``((axis, size), ...)``
or one size per axis.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ...errors import QrefError, unknown_name
from ...formats import FloatFormat, Format, IntFormat
from ...profiles import Profile, get_profile
from ...profiles.uniform import ARITHMETIC_FIELDS, DEFAULT_PROFILE, UniformArithmetic, rules_of
from ..base import QArray, normalize_axis

__all__ = ["UniformRecord", "arithmetic_for", "block_map", "parse_block_size"]


def arithmetic_for(profile: str | Profile | None, **overrides: Any) -> UniformArithmetic:
    """The UniformArithmetic of a uniform profile with explicit field overrides (None values ignored)."""
    base = UniformArithmetic() if profile is None else rules_of(get_profile(profile, "uniform"))
    for k in overrides:
        if k not in ARITHMETIC_FIELDS:
            raise unknown_name("uniform arithmetic option", k, ARITHMETIC_FIELDS)
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(base, **given) if given else base


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def parse_block_size(block_size: object, axis: int | None, rank: int) -> tuple[tuple[int, int], ...]:
    """``block_size`` as ((axis, block), ...) pairs for an input (and scales) of ``rank`` (uniform.md §1, §5.1).

    An int needs ``axis`` (ONNX blocked quantization: block 1 on every other axis); a mapping {axis: block};
    a sequence of (axis, block) pairs; or a sequence of one block per axis. Axes stay as given (negative ones
    count from the back, see ``block_map``); every block is an integer >= 1."""
    if _is_int(block_size):
        if axis is None:
            raise QrefError("block_size=<int> needs axis=<the blocked axis> (ONNX blocked quantization); or "
                            "pass block_size={axis: size, ...}")
        if rank == 0:
            raise QrefError("blocked quantization needs a scale array with the input's rank")
        a = normalize_axis(axis, rank)
        raw: list[tuple[object, object]] = [(i, block_size if i == a else 1) for i in range(rank)]
    elif isinstance(block_size, Mapping):
        raw = list(block_size.items())
    elif isinstance(block_size, (Sequence, np.ndarray)) and not isinstance(block_size, (str, bytes)):
        items = block_size.tolist() if isinstance(block_size, np.ndarray) else list(block_size)
        if items and all(isinstance(p, Sequence) and len(p) == 2 for p in items):
            raw = [(p[0], p[1]) for p in items]
        else:
            if len(items) != rank:
                raise QrefError(f"block_size as a tuple gives one block per axis ({rank} for an input of rank "
                                f"{rank}), got {len(items)}")
            raw = list(enumerate(items))
    else:
        raise QrefError(f"block_size must be an int (with axis), a {{axis: size}} mapping or a per-axis tuple, "
                        f"got {block_size!r}")
    for a, b in raw:
        if not (_is_int(a) and _is_int(b)):
            raise QrefError(f"block_size takes integer axes and sizes, got {block_size!r}")
        if b < 1:  # type: ignore[operator]
            raise QrefError(f"block sizes must be integers >= 1, got {b!r} for axis {a}")
    return tuple((int(a), int(b)) for a, b in raw)  # type: ignore[call-overload]


def block_map(pairs: Sequence[tuple[int, int]], ndim: int) -> dict[int, int]:
    """{axis: block} of ((axis, block), ...) pairs for an ndim-input, axes normalized, each listed once."""
    out: dict[int, int] = {}
    for ax, b in pairs:
        a = normalize_axis(ax, ndim)
        if a in out:
            raise QrefError(f"block_size lists axis {a} twice")
        out[a] = b
    return out


@dataclass(frozen=True)
class UniformRecord:
    """The fields of an affine quantization q = clamp(round(x / s) + z) (uniform.md §1), checked; a frozen
    record (``UniformScheme`` adds quantize / dequantize).

    storage: IntFormat (int1..int32, uint1..uint32, narrowed ranges) or a FloatFormat (ONNX fp8/fp4 outputs).
    expressed: the float type of the real values and of the scales (default float32).
    scales / zero_points: flattened C-order values, float64 scales exactly as given, integer zero points.
    scale_shape: () per tensor; (n,) per axis; the tensor's rank for sub-channel blocks.
    axis: the quantized axis of per-axis quantization (any axis, negative counts from the back).
    block_size: ((axis, block), ...) for sub-channel blocks: scale index along axis = i // block; axes not
        listed must have scale size 1 (one scale along them).
    storage_range: narrowed [min, max] of a float storage type (MLIR ``f8E4M3FN<-10:10>``), else None.
    type_spelling: how MLIR spells the storage type (i8, si8, u8, ui8, f8E4M3FN), kept for exact printing.
    """

    storage: Format
    expressed: FloatFormat
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    scale_shape: tuple[int, ...] = ()
    axis: int | None = None
    block_size: tuple[tuple[int, int], ...] | None = None
    profile: str | None = DEFAULT_PROFILE
    arithmetic: UniformArithmetic = field(default_factory=UniformArithmetic)
    storage_range: tuple[int, int] | None = None
    type_spelling: str | None = None
    def __post_init__(self) -> None:
        if not isinstance(self.storage, (IntFormat, FloatFormat)):
            raise QrefError(f"storage must be a format record, got {self.storage!r}")
        if not isinstance(self.expressed, FloatFormat):
            raise QrefError(f"expressed type must be a float format, got {self.expressed!r}")
        n = math.prod(self.scale_shape)
        if len(self.scales) != n or len(self.zero_points) != n:
            raise QrefError(f"{len(self.scales)} scale(s) and {len(self.zero_points)} zero point(s) for a "
                            f"scale shape {self.scale_shape} ({n} values)")
        if n == 0:
            raise QrefError("a uniform scheme needs at least one scale")
        for s in self.scales:
            if not (isinstance(s, float) and math.isfinite(s) and s > 0):
                raise QrefError(f"scales must be finite and > 0 (StableHLO C5, C6), got {s!r}")
        if self.axis is not None and self.block_size is not None:
            raise QrefError("give either axis (per-axis) or block_size (sub-channel blocks), not both")
        if self.axis is not None and len(self.scale_shape) != 1:
            raise QrefError(f"per-axis quantization takes a 1-D list of scales, got shape {self.scale_shape}")
        if self.axis is None and self.block_size is None and self.scale_shape != ():
            raise QrefError(f"scales of shape {self.scale_shape} need axis=... (per axis) or block_size=...")
        if self.block_size is not None:
            for ax, b in self.block_size:
                if not (isinstance(b, int) and b >= 1):
                    raise QrefError(f"block sizes must be integers >= 1, got {b!r} for axis {ax}")
                if not 0 <= ax < len(self.scale_shape) and not -len(self.scale_shape) <= ax < 0:
                    raise QrefError(f"block axis {ax} is out of range for scales of rank {len(self.scale_shape)}")
        if isinstance(self.storage, IntFormat) and self.arithmetic.zero_point_range == "check":
            lo, hi = self.storage.full_range
            bad = [z for z in self.zero_points if not lo <= z <= hi]
            if bad:
                raise QrefError(f"zero point(s) {bad[:4]} outside the storage range [{lo}, {hi}] of "
                                f"{self.storage.name} (StableHLO C7); profile {self.profile!r} checks them")

    # ---- properties -------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def granularity(self) -> str:
        """'per_tensor', 'per_axis' or 'blocked'."""
        if self.block_size is not None:
            return "blocked"
        return "per_axis" if self.axis is not None else "per_tensor"

    @property
    def scale_array(self) -> np.ndarray:
        return self._scale_values.copy()

    @property
    def zero_point_array(self) -> np.ndarray:
        return self._zero_point_values.copy()

    @cached_property
    def _scale_values(self) -> np.ndarray:
        """The scales as a read-only float64 array of scale_shape, built once (a tuple of many scales takes
        about 15 ns each to convert); ``scale_array`` hands out copies."""
        a = np.array(self.scales, dtype=np.float64).reshape(self.scale_shape)
        a.flags.writeable = False
        return a

    @cached_property
    def _zero_point_values(self) -> np.ndarray:
        """The zero points as a read-only int64 array of scale_shape, built once (see ``_scale_values``)."""
        a = np.array(self.zero_points, dtype=np.int64).reshape(self.scale_shape)
        a.flags.writeable = False
        return a

    @property
    def storage_bounds(self) -> tuple[int, int]:
        """[lo, hi] the codes are clamped to (narrowed range; AQT's symmetric clip)."""
        if isinstance(self.storage, FloatFormat):
            if self.storage_range is not None:
                return self.storage_range
            m = int(self.storage.max_value)
            return (-m if self.storage.signed else 0), m
        lo, hi = self.storage.lo, self.storage.hi
        if self.arithmetic.narrow_symmetric and self.storage.signed:
            lo = max(lo, -hi)
        return lo, hi

    def code_bounds(self) -> tuple[int, int] | None:
        """[lo, hi] of the codes dequantize accepts (schemes.md §1.1 C1): the integer storage type's range (its
        narrowed range when it has one); None for float storage (codes are bit patterns)."""
        if isinstance(self.storage, IntFormat):
            return self.storage.lo, self.storage.hi
        return None

    def check_side_data(self, q: QArray) -> None:
        """q.scales / q.zero_points, when given, have the scheme's scale shape (schemes.md §1.1 C3)."""
        for name in ("scales", "zero_points"):
            v = getattr(q, name)
            if v is not None and np.shape(v) != tuple(self.scale_shape):
                raise QrefError(f"{self.name}.dequantize: q.{name} has shape {np.shape(v)}, the scheme's scale "
                                f"shape is {tuple(self.scale_shape)}; use the QArray quantize returned")

    @property
    def codes_dtype(self) -> np.dtype:
        if isinstance(self.storage, IntFormat):
            return self.storage.storage_dtype
        return np.dtype(self.storage.code_dtype)

    # ---- granularity ------------------------------------------------------------------------------------
    def _blocks(self, ndim: int) -> dict[int, int]:
        return block_map(self.block_size or (), ndim)

    def expand(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Scales (float64, as stored) and zero points (int64) broadcast against an input of ``shape``."""
        S, Z = self._scale_values, self._zero_point_values
        ndim = len(shape)
        if self.granularity == "per_tensor":
            return S, Z
        if self.granularity == "per_axis":
            assert self.axis is not None
            a = normalize_axis(self.axis, ndim)
            if shape[a] != len(self.scales):
                raise QrefError(f"per-axis scales: axis {a} of the input has size {shape[a]} but there are "
                                f"{len(self.scales)} scales")
            bshape = [1] * ndim
            bshape[a] = shape[a]
            return S.reshape(bshape), Z.reshape(bshape)
        if len(self.scale_shape) != ndim:
            raise QrefError(f"blocked scales have rank {len(self.scale_shape)} but the input has rank {ndim}")
        blocks = self._blocks(ndim)
        index = []
        for i, d in enumerate(shape):
            if i in blocks:
                b = blocks[i]
                want = -(-d // b)
                if self.scale_shape[i] != want:
                    raise QrefError(f"axis {i}: size {d} with block {b} needs {want} scale(s) along it, the "
                                    f"scales have {self.scale_shape[i]}")
                index.append(np.arange(d) // b)
            else:
                if self.scale_shape[i] != 1:
                    raise QrefError(f"axis {i} has no block size, so its scales must have size 1 (one scale "
                                    f"along it), got {self.scale_shape[i]}; list it in block_size")
                index.append(np.zeros(d, dtype=np.intp))
        ix = np.ix_(*index) if ndim else ()
        return S[ix], Z[ix]

    def split_blocks(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], np.ndarray, np.ndarray] | None:
        """(split shape, scales, zero points) of a blocked scheme whose blocks divide every axis: axis i of size
        n_i * b_i becomes the two axes (n_i, b_i) and the scales (float64) and zero points (int64) get shape
        (n_0, 1, n_1, 1, ...), so that they broadcast against ``x.reshape(split shape)`` exactly as ``expand``'s
        full-size arrays do against x (the same value at every element, in the same C order); None where that
        does not hold (per tensor, per axis, a partial block, an empty axis): use ``expand``."""
        if self.granularity != "blocked" or len(self.scale_shape) != len(shape) or 0 in shape:
            return None
        blocks = self._blocks(len(shape))
        split: list[int] = []
        sshape: list[int] = []
        for i, d in enumerate(shape):
            b = blocks.get(i, d)
            if d % b or self.scale_shape[i] != d // b:
                return None  # a partial block, or scales that do not match (expand raises the error)
            split += [d // b, b]
            sshape += [d // b, 1]
        return tuple(split), self._scale_values.reshape(sshape), self._zero_point_values.reshape(sshape)

    @cached_property
    def loop_schemes(self) -> tuple[Any, Any]:
        """(vector loop, scalar remainder loop) records of a profile with simd_width > 0 (uniform.md §2.4),
        of this record's own class; the remainder of a per-tensor scheme is its tail loop (remainder_compute),
        else the loop over every element. Built once per record: each replace validates every scale again
        (milliseconds for many scales)."""
        A = self.arithmetic
        return (dataclasses.replace(self, arithmetic=dataclasses.replace(A, simd_width=0)),
                dataclasses.replace(self, arithmetic=A.remainder(tail=self.granularity == "per_tensor")))

    def tail(self, shape: tuple[int, ...]) -> np.ndarray:
        """True where the scalar loop computes the element: flat positions >= floor(n / W) * W per tensor,
        everything for per-axis and blocked schemes (uniform.md §2.4)."""
        n = math.prod(shape)
        if self.granularity != "per_tensor":
            return np.ones(shape, dtype=bool)
        w = self.arithmetic.simd_width
        return (np.arange(n) >= n // w * w).reshape(shape)
