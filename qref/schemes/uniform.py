"""Uniform (affine) quantization: storage integers, scales, zero points (spec: docs/spec/uniform.md).

A ``UniformScheme`` is one frozen record: the storage format (an ``IntFormat``, possibly narrowed such as
``int8<-127:127>``, or a float format for ONNX fp8/fp4 outputs), the expressed type, the scales and zero points
with their granularity (per tensor, per axis on any axis, or sub-channel blocks along one or more axes), and a
``UniformArithmetic`` record that pins every step a real system takes (uniform.md §3): the dtype of the
arithmetic, division versus multiplication by a rounded reciprocal, where the zero point is added, where the
clamp happens, the rounding mode, and which results the system leaves undefined. Named profiles (uniform.md
§4: ``stablehlo``, ``stablehlo_lowering``, ``onnx``, ``onnxruntime``, ``mlir``, ``tflite``, ``tflite_optimized``,
``tflite_xnnpack``, ``pytorch``, ``pytorch_per_channel``, ``jax``, ``jax_divide``, ``qwix``, ``aqt``) are records
of those fields, kept with the record itself in qref/profiles/uniform.py (``profile.rules``).

quantize (uniform.md §2.1), for each element with its scale s and zero point z:
    xc = cast(x, C)                         C = the compute dtype
    q  = xc / cast(s, C)                    or  xc * cast(1 / cast(s, C), C)        (scale_op)
    q  = q + cast(z, C)                     zero_point="before_rounding" (fused: one rounding with the multiply)
    q  = clamp(q, cast(lo, C), cast(hi, C)) clamp="float"
    n  = round(q)                           exact integer rounding of the float value (rounding mode)
    n  = n + z                              zero_point="after_rounding"; "after_rounding_float": fl_C(n + cast(z, C))
    n  = clamp(n, lo, hi)                   integer saturation / narrowed-range clamp
Float storage (ONNX fp8/fp4): q = xc / cast(s, C) is encoded with the core (saturating or not).
dequantize (uniform.md §2.2): (code - z) * s with the subtraction and the multiplication in the profile's dtypes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import ml_dtypes
import numpy as np

from ..core.arith import convert, flush, fma_float32, round_fractions
from ..core.decode import decode
from ..core.encode import encode, stochastic_random_bits
from ..core.exact import as_source_array, ml_integer, typed_numbers
from ..core.parallel import chunk_bounds, run_chunks, thread_limit
from ..core.rounding import round_to_integer
from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, Format, IntFormat, get_format
from ..formats.policy import STOCHASTIC_MODES
from ..profiles import Profile, get_profile, profiles
from ..profiles.uniform import ARITHMETIC_FIELDS, DEFAULT_PROFILE, UniformArithmetic, rules_of
from ..validators import check_number_array
from .base import QArray, Scheme, normalize_axis, register_family
from .uniform_fast import dequantize_float, integer_tail_applies, integer_tail_fast, quantize_float32


def arithmetic_for(profile: str | Profile | None, **overrides: Any) -> UniformArithmetic:
    """The UniformArithmetic of a uniform profile with explicit field overrides (None values ignored)."""
    base = UniformArithmetic() if profile is None else rules_of(get_profile(profile, "uniform"))
    for k in overrides:
        if k not in ARITHMETIC_FIELDS:
            raise unknown_name("uniform arithmetic option", k, ARITHMETIC_FIELDS)
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(base, **given) if given else base


# ---------------------------------------------------------------------------------------------------------
# exact helpers
# ---------------------------------------------------------------------------------------------------------
_FLOAT_DTYPES = {
    "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
}
#: elements per slice of quantize's fast path (UniformScheme._quantize_chunks)
CHUNK = 1 << 18


def _np_dtype(fmt: FloatFormat) -> np.dtype:
    if fmt.name in _FLOAT_DTYPES:
        return _FLOAT_DTYPES[fmt.name]
    try:
        return np.dtype(getattr(ml_dtypes, fmt.name))
    except (AttributeError, TypeError):
        raise QrefError(f"expressed type {fmt.name} has no numpy/ml_dtypes dtype to compute in") from None


cast = convert  # one rounding from any source dtype (qref.core.arith.convert)


@lru_cache(maxsize=256)
def _cast_scalar(v: float | int, dt: np.dtype) -> np.ndarray:
    src = np.asarray(v, dtype=np.float64 if isinstance(v, float) else np.int64)
    out = cast(src, dt)
    out.setflags(write=False)  # cached: shared by every call
    return out


round_to_int = round_to_integer  # q rounded to an integer exactly, stochastic modes included (qref.core.rounding)


def round_fraction(v: Fraction, fmt: FloatFormat) -> float:
    """The exact rational v rounded to nearest-even in ``fmt`` (overflow to +-inf), as a Python float. Used for
    exact scale formulas and for decimal literals (mlir.py)."""
    return float(round_fractions([v], fmt)[0])


fma32 = fma_float32  # float32 fused multiply-add with one rounding (qref.core.arith.fma_float32)
_F32 = np.dtype(np.float32)
_FTZ_DTYPES = (_F32, np.dtype(ml_dtypes.bfloat16))
_ftz = flush  # XLA:CPU's FTZ/DAZ: float32/bfloat16 values below 2^-126 become zeros of their sign


def _keep(a: np.ndarray) -> np.ndarray:
    return a


_SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _int_to_float(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """cast(v, dt): numpy's conversion where every value is exact in dt (|v| <= 2^p, p the significand bits: by
    the integer dtype's range, or else by the values' range), else the core's correctly rounded ``cast``. A float
    v is cast as it is."""
    p = _SIGNIFICAND_BITS.get(dt.name)
    if v.dtype.kind in "iu" and p is not None:
        info = np.iinfo(v.dtype)
        if max(-int(info.min), int(info.max)) <= 1 << p:
            return v.astype(dt)
        if v.size and max(-int(v.min()), int(v.max())) <= 1 << p:
            return v.astype(dt)
    return cast(v, dt)


def _value_range(v: np.ndarray) -> tuple[int, int]:
    """(min, max) of an integer array: its dtype's range for 8-bit dtypes (no pass over it), else its values'."""
    if v.dtype.itemsize == 1 or v.size == 0:
        info = np.iinfo(v.dtype)
        return int(info.min), int(info.max)
    return int(v.min()), int(v.max())


def _difference_dtype(codes: np.ndarray, z: np.ndarray) -> np.dtype | None:
    """int16 or int32 when every code - z (codes of their integer dtype's range, z the zero points) fits it
    exactly; None otherwise (the int64 path)."""
    if codes.dtype.kind not in "iu" or codes.dtype.itemsize > 2 or z.size == 0:
        return None
    info = np.iinfo(codes.dtype)
    lo, hi = int(info.min) - int(z.max()), int(info.max) - int(z.min())
    for dt in (np.int16, np.int32):
        if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
            return np.dtype(dt)
    return None


# ---------------------------------------------------------------------------------------------------------
# the scheme record
# ---------------------------------------------------------------------------------------------------------
def _rows_view(arr: np.ndarray, S: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arr, S, Z) to split along axis 0: a contiguous array under one scale and zero point as its flat elements
    (any number of chunks), else as it is (elements.md §2.11)."""
    if arr.ndim > 1 and np.size(S) == 1 and np.size(Z) == 1 and arr.flags.c_contiguous:
        return arr.reshape(-1), np.reshape(S, ()), np.reshape(Z, ())
    return arr, S, Z


def _rows(a: np.ndarray, lo: int, hi: int, ndim: int) -> np.ndarray:
    """Rows lo:hi of scales / zero points that vary along axis 0 of an ndim-array, else a as it is."""
    return a[lo:hi] if np.ndim(a) == ndim and np.shape(a)[0] > 1 else a


@dataclass(frozen=True)
class UniformScheme(Scheme):
    """Affine quantization q = clamp(round(x / s) + z) (uniform.md §1); a frozen record.

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
    family = "uniform"

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
        out: dict[int, int] = {}
        for ax, b in self.block_size or ():
            a = normalize_axis(ax, ndim)
            if a in out:
                raise QrefError(f"block_size lists axis {a} twice")
            out[a] = b
        return out

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

    # ---- quantize ---------------------------------------------------------------------------------------
    def _compute_dtype(self, arr: np.ndarray) -> np.dtype:
        c = self.arithmetic.compute
        if c == "expressed":
            return _np_dtype(self.expressed)
        if c == "input":
            if not (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16"):
                raise QrefError(f"profile {self.profile!r} computes in the input's dtype and needs a float "
                                f"input (float16/bfloat16/float32/float64), got {arr.dtype}")
            return arr.dtype
        return _FLOAT_DTYPES[c]

    def _scale_in(self, S: np.ndarray, dt: np.dtype) -> np.ndarray:
        """Scales as dt values: via the expressed type (scale_source='expressed') or straight from float64."""
        if self.arithmetic.scale_source == "expressed":
            e = cast(S, _np_dtype(self.expressed))
            if (e.astype(np.float64) == 0).any() or np.isinf(e.astype(np.float64)).any():
                raise QrefError(f"a scale rounds to 0 or Inf in the expressed type {self.expressed.name}")
            return cast(e, dt)
        return cast(S, dt)

    def _wrapped_zero_points(self, Z: np.ndarray) -> np.ndarray:
        if self.arithmetic.zero_point_range != "wrap" or not isinstance(self.storage, IntFormat):
            return Z
        bits = self.storage.bits
        w = np.asarray(Z, dtype=np.int64) & ((1 << bits) - 1)
        if self.storage.signed:
            w = np.where(w >= (1 << (bits - 1)), w - (1 << bits), w)
        return w

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
        with thread_limit(threads):
            return self._quantize(x, random_bits, seed, _reference)

    def _quantize(self, x: object, random_bits: object, seed: object, _reference: bool) -> QArray:
        A = self.arithmetic
        arr = as_source_array(x)
        rbits = None
        if A.rounding in STOCHASTIC_MODES:
            assert A.stochastic_bits is not None
            rbits = stochastic_random_bits(arr.shape, A.stochastic_bits, random_bits, seed).reshape(arr.shape)
        elif random_bits is not None or seed is not None:
            raise QrefError(f"random_bits / seed are for stochastic rounding; this scheme rounds {A.rounding!r}")
        if A.simd_width:
            return self._quantize_simd(arr, _reference)
        codes, unspecified = self._quantize_codes(arr, rbits, _reference)
        return QArray(codes=codes, scheme=self, scales=self.scale_array, zero_points=self.zero_point_array,
                      unspecified=unspecified, axis=self.axis, meta={"profile": self.profile})

    def _quantize_codes(self, arr: np.ndarray, rbits: np.ndarray | None, _reference: bool
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(codes, unspecified) of ``quantize`` for a scheme without a vector loop."""
        A = self.arithmetic
        if A.input_dtypes is not None and arr.dtype.name not in A.input_dtypes:
            raise QrefError(f"profile {self.profile!r} accepts {', '.join(A.input_dtypes)} input only, got "
                            f"{arr.dtype} (convert it first, as the system would require)")
        split = None if _reference else self.split_blocks(arr.shape)
        if split is None:
            S, Z = self.expand(arr.shape)
            codes, unspecified = self._quantize_chunks(arr, S, Z, rbits, _reference)
        else:  # blocks as axes of their own: scales and zero points stay one per block (uniform.md §2.5)
            shp, S, Z = split
            codes, unspecified = self._quantize_chunks(arr.reshape(shp), S, Z,
                                                       None if rbits is None else rbits.reshape(shp), _reference)
            codes, unspecified = codes.reshape(arr.shape), unspecified.reshape(arr.shape)
        return codes, unspecified

    def _quantize_chunks(self, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                         _reference: bool) -> tuple[np.ndarray, np.ndarray]:
        """_quantize_rows on chunks of rows (axis 0; the flat elements under one scale) on the thread pool:
        every step is elementwise, scales and zero points sliced alike (elements.md §2.11)."""
        if _reference or arr.ndim == 0:
            return self._quantize_rows(arr, S, Z, rbits, _reference)
        a, S1, Z1 = _rows_view(arr, S, Z)
        rb = None if rbits is None else rbits.reshape(a.shape)
        per_row = a.size // max(1, a.shape[0])
        if len(chunk_bounds(a.shape[0], per_row)) == 1:
            return self._quantize_rows(arr, S, Z, rbits, _reference)
        codes = np.empty(a.shape, dtype=self.codes_dtype)
        unspecified = np.empty(a.shape, dtype=bool)

        def work(lo: int, hi: int) -> None:
            c, u = self._quantize_rows(a[lo:hi], _rows(S1, lo, hi, a.ndim), _rows(Z1, lo, hi, a.ndim),
                                       None if rb is None else rb[lo:hi], False)
            codes[lo:hi] = c
            unspecified[lo:hi] = u

        run_chunks(work, a.shape[0], per_row)
        return codes.reshape(arr.shape), unspecified.reshape(arr.shape)

    def _quantize_rows(self, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                       _reference: bool) -> tuple[np.ndarray, np.ndarray]:
        """_quantize_arrays over slices of about CHUNK elements along the first axis (scales and zero points
        sliced alike where they vary along it): every step is elementwise, so each slice's codes are those of
        the whole; the slices' temporaries stay in cache. The defining path (``_reference``) takes the whole."""
        if not _reference and rbits is None and arr.dtype == _F32 and self._compute_dtype(arr) == _F32:
            done = quantize_float32(self, arr, S, Z)  # float32 in one kernel (uniform_fast.py), else None
            if done is not None:
                return done
        rows = arr.shape[0] if arr.ndim else 1
        step = max(1, CHUNK // max(1, arr.size // max(rows, 1)))
        if _reference or arr.ndim == 0 or step >= rows:
            return self._quantize_arrays(arr, S, Z, rbits, _reference)
        codes = np.empty(arr.shape, dtype=self.codes_dtype)
        unspecified = np.empty(arr.shape, dtype=bool)
        along = np.ndim(S) == arr.ndim and np.shape(S)[0] > 1
        for r0 in range(0, rows, step):
            sl = slice(r0, r0 + step)
            c, u = self._quantize_arrays(arr[sl], S[sl] if along else S, Z[sl] if along else Z,
                                         None if rbits is None else rbits[sl], False)
            codes[sl] = c
            unspecified[sl] = u
        return codes, unspecified

    def _quantize_arrays(self, arr: np.ndarray, S: np.ndarray, Z: np.ndarray, rbits: np.ndarray | None,
                         _reference: bool) -> tuple[np.ndarray, np.ndarray]:
        """(codes, unspecified) of ``arr`` with scales S and zero points Z broadcastable against it."""
        A = self.arithmetic
        C = self._compute_dtype(arr)
        Z = self._wrapped_zero_points(Z)
        xc = arr if arr.dtype == C else cast(arr, C)  # read only below
        sc = self._scale_in(S, C)  # broadcastable against x: every step below is elementwise
        ftz = _ftz if A.flush_subnormals and C in _FTZ_DTYPES else _keep
        xc, sc = ftz(xc), ftz(sc)
        inv = None
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            if A.scale_op == "divide":
                q = np.asarray(xc / sc).astype(C, copy=False)
            elif A.bf16_upcast and np.dtype(ml_dtypes.bfloat16) == C:
                inv = self._reciprocal(ftz(np.asarray(np.float32(1) / sc.astype(np.float32)).astype(np.float32)))
                q = cast(np.asarray(xc.astype(np.float32) * inv).astype(np.float32, copy=False), C)
            else:
                inv = self._reciprocal(ftz(np.asarray(np.ones((), C) / sc).astype(C)))
                q = np.asarray(xc * inv).astype(C, copy=False)
        unspecified = np.zeros(arr.shape, dtype=bool)
        if isinstance(self.storage, FloatFormat):
            return self._quantize_float(q, unspecified, rbits), unspecified
        lo, hi = self.storage_bounds
        Zb = np.asarray(Z, dtype=np.int64)  # broadcastable against x; every step below is elementwise
        if A.zero_point in ("before_rounding", "fused"):
            zc = cast(Zb, C) if _reference else _int_to_float(Zb, C)  # equal: exact where numpy's is used
            if A.constants == "unspecified":
                inexact = zc.astype(np.float64) != Zb
                if _reference or inexact.any():
                    unspecified |= np.broadcast_to(inexact, arr.shape)
            with np.errstate(over="ignore", invalid="ignore"):
                if A.zero_point == "fused":
                    assert inv is not None
                    if not _reference and not np.any(zc) and C.name == "float32":
                        # fma(x, 1/s, 0) = fl32(x * (1/s)), the q above (one rounding of the exact product);
                        # only the sign of a zero can differ, which no integer code sees (uniform.md §2.5)
                        pass
                    else:
                        q = fma32(xc, np.broadcast_to(inv, arr.shape), np.broadcast_to(zc, arr.shape))
                elif _reference or np.any(zc):
                    q = np.asarray(q + zc).astype(C, copy=False)
                # else q + 0 = q but for the sign of a zero, which no integer code sees
        if A.clamp == "float":
            lo_c, hi_c = _cast_scalar(lo, C), _cast_scalar(hi, C)
            if A.constants == "unspecified":
                if float(lo_c) != lo:
                    unspecified |= q.astype(np.float64) <= float(lo_c)
                if float(hi_c) != hi:
                    unspecified |= q.astype(np.float64) >= float(hi_c)
            q = np.clip(q, lo_c, hi_c)
        if _reference or rbits is not None or not integer_tail_applies(self, q):
            n = self._integer_tail(q, Zb, unspecified, rbits)
        else:
            n = integer_tail_fast(self, q, Zb, unspecified)
        return n, unspecified

    def _integer_tail(self, q: np.ndarray, Z: np.ndarray, unspecified: np.ndarray,
                      random_bits: np.ndarray | None = None) -> np.ndarray:
        """Codes from the clamped float values q (uniform.md §2.1 steps 5-7): round, add the zero point after
        rounding, saturate, NaN and the unspecified placeholder; ``unspecified`` is updated in place. The
        definition; ``uniform_fast.integer_tail_fast`` computes the same (§2.5)."""
        A = self.arithmetic
        C = q.dtype
        lo, hi = self.storage_bounds
        zb = np.broadcast_to(Z, q.shape)
        n, nan = round_to_int(q, A.rounding, random_bits, A.stochastic_bits)
        full_lo, full_hi = self.storage.full_range
        if A.conversion == "int32":
            unspecified |= (n < -(2**31)) | (n > 2**31 - 1)
        if A.zero_point == "after_rounding":
            n = n + zb
        elif A.zero_point == "after_rounding_float":  # round(q) + z in C: an integer-valued float, rounded once
            zc = cast(np.asarray(zb, dtype=np.int64), C)
            if A.constants == "unspecified":
                unspecified |= zc.astype(np.float64) != zb
            q64 = np.asarray(q).astype(np.float64)
            r = np.where(np.isinf(q64), q64, n.astype(np.float64))  # +-Inf stays Inf: -Inf + Inf is NaN
            with np.errstate(invalid="ignore"):
                n, nan_sum = round_to_int(cast(r + zc.astype(np.float64), C), "nearest_even")
            nan = nan | nan_sum
        if A.zero_point.startswith("after_rounding") and A.conversion == "int32":
            unspecified |= (n < -(2**31)) | (n > 2**31 - 1)
        if A.conversion == "storage":
            unspecified |= (n < full_lo) | (n > full_hi)
        n = np.clip(n, lo, hi)
        if A.nan == "zero":
            n = np.where(nan, np.clip(0, lo, hi), n)
        else:
            unspecified |= nan
        placeholder = int(np.clip(0, lo, hi))
        return np.where(unspecified, placeholder, n).astype(self.codes_dtype)

    def _loops(self) -> tuple[UniformScheme, UniformScheme]:
        """(vector loop, scalar remainder loop) schemes of a profile with simd_width > 0 (uniform.md §2.4); the
        remainder of a per-tensor scheme is its tail loop (remainder_compute), else the loop over every
        element."""
        return self._loop_schemes

    @cached_property
    def _loop_schemes(self) -> tuple[UniformScheme, UniformScheme]:
        # built once per scheme: each replace validates every scale again (milliseconds for many scales)
        A = self.arithmetic
        return (dataclasses.replace(self, arithmetic=dataclasses.replace(A, simd_width=0)),
                dataclasses.replace(self, arithmetic=A.remainder(tail=self.granularity == "per_tensor")))

    def _tail(self, shape: tuple[int, ...]) -> np.ndarray:
        """True where the scalar loop computes the element: flat positions >= floor(n / W) * W per tensor,
        everything for per-axis and blocked schemes (uniform.md §2.4)."""
        n = math.prod(shape)
        if self.granularity != "per_tensor":
            return np.ones(shape, dtype=bool)
        w = self.arithmetic.simd_width
        return (np.arange(n) >= n // w * w).reshape(shape)

    def _quantize_simd(self, arr: np.ndarray, _reference: bool = False) -> QArray:
        body, rem = self._loops()
        n = arr.size
        # the vector loop's elements are the flat prefix of a per-tensor scheme (one scale: each loop quantizes
        # its own part alone); everything else is the scalar loop's (uniform.md §2.4)
        k = n // self.arithmetic.simd_width * self.arithmetic.simd_width if self.granularity == "per_tensor" else 0
        if k == 0:  # the scalar loop only: the array as it is (per-axis and blocked scales need its shape)
            codes, unspecified = rem._quantize_codes(arr, None, _reference)
            return QArray(codes=codes.astype(self.codes_dtype, copy=False), scheme=self,
                          scales=self.scale_array, zero_points=self.zero_point_array,
                          unspecified=unspecified, axis=self.axis, meta={"profile": self.profile})
        flat = arr.reshape(-1)
        parts = [loop.quantize(part, _reference=_reference) for loop, part in ((body, flat[:k]), (rem, flat[k:]))
                 if part.size]
        codes = np.concatenate([p.codes.reshape(-1) for p in parts]).reshape(arr.shape)
        unspecified = np.concatenate([np.asarray(p.unspecified).reshape(-1) for p in parts]).reshape(arr.shape)
        return QArray(codes=codes.astype(self.codes_dtype), scheme=self,
                      scales=self.scale_array, zero_points=self.zero_point_array,
                      unspecified=unspecified, axis=self.axis, meta={"profile": self.profile})

    def _reciprocal(self, inv: np.ndarray) -> np.ndarray:
        """fl(1 / s) under reciprocal_inf (uniform.md §2.1): an infinite reciprocal becomes 1 with "one"."""
        if self.arithmetic.reciprocal_inf == "one":
            return np.where(np.isinf(inv), np.ones((), inv.dtype), inv).astype(inv.dtype)
        return inv

    def _quantize_float(self, q: np.ndarray, unspecified: np.ndarray, random_bits: np.ndarray | None = None
                        ) -> np.ndarray:
        A = self.arithmetic
        fmt = self.storage
        assert isinstance(fmt, FloatFormat)
        if any(z != 0 for z in self.zero_points):
            raise QrefError(f"float storage {fmt.name} takes zero points of 0 only (ONNX: the zero point of "
                            "float8/float4 outputs must be 0; MLIR's lowering has no float storage)")
        if self.storage_range is not None:
            raise QrefError(f"a narrowed float storage range {self.storage_range} has no defined quantize "
                            "(no system implements it); use the full range")
        overflow = "saturate" if A.float_saturate else None
        # ml_dtypes' conversion, the record the lock verifies (a fixed record: results never depend on what is
        # installed; uniform.md §2.1)
        stochastic: dict[str, Any] = {} if random_bits is None else {
            "random_bits": random_bits, "stochastic_bits": A.stochastic_bits}
        codes = encode(q, fmt, rounding=A.rounding, overflow=overflow, profile="ml_dtypes@0.7" if
                       not A.float_saturate else None, **stochastic)
        return codes.astype(self.codes_dtype)

    # ---- dequantize -------------------------------------------------------------------------------------
    def _plain_codes(self, q: QArray) -> QArray:
        """q with codes given as ONNX types them made plain (uniform.md §1 (C9)): ml_dtypes int2/int4/uint2/uint4
        values in the storage dtype, an array of the float storage's own ml_dtypes type viewed as its codes."""
        c = np.asarray(q.codes)
        if ml_integer(c.dtype):
            return dataclasses.replace(q, codes=c.astype(self.codes_dtype))
        if c.dtype.kind in "fV" and isinstance(self.storage, FloatFormat) and c.dtype.name == self.storage.name:
            return dataclasses.replace(q, codes=c.view(self.codes_dtype))
        return q

    def dequantize(self, q: QArray, dtype: object = None, *, _reference: bool = False, threads: int | None = None
                   ) -> np.ndarray:
        """(code - z) * s (uniform.md §2.2) in the profile's dtypes, then cast to ``dtype`` (default: the
        expressed type). Values at q.unspecified positions are computed from placeholder codes. threads: as
        quantize's."""
        with thread_limit(threads):
            return self._dequantize(self._plain_codes(q), dtype, _reference)

    def _dequantize(self, q: QArray, dtype: object, _reference: bool) -> np.ndarray:
        if not _reference:
            if self.arithmetic.simd_width and self.granularity != "per_tensor":  # the scalar loop's, everywhere
                rem = self._loops()[1]
                return rem.dequantize(dataclasses.replace(q, scheme=rem), dtype)
            vals = self._dequantize_kernel(q, dtype)
            if vals is not None:
                return vals
        return self.dequantize_with_mask(q, dtype, _reference=_reference)[0]

    def _dq_multiply_dtype(self) -> np.dtype:
        """The dtype of dequantize's multiplication by the scale (dq_multiply)."""
        E = _np_dtype(self.expressed)
        mul = self.arithmetic.dq_multiply
        if mul == "expressed":
            return E
        if mul == "at_least_float32":
            return np.promote_types(np.float32, E) if E.name != "bfloat16" else np.dtype(np.float32)
        return _FLOAT_DTYPES[mul]

    def _dequantize_kernel(self, q: QArray, dtype: object) -> np.ndarray | None:
        """dequantize's values by ``uniform_fast.dequantize_float`` (blocks as axes of their own where they divide
        the axes), or None where it does not apply; where it applies the unspecified mask gains nothing."""
        codes = np.asarray(q.codes)
        if self.arithmetic.simd_width or not isinstance(self.storage, IntFormat) or codes.dtype.kind not in "iu":
            return None
        split = self.split_blocks(codes.shape)
        if split is None:
            c = codes
            S, Z = self.expand(codes.shape)
        else:
            shp, S, Z = split
            c = codes.reshape(shp)
        md = self._dq_multiply_dtype()
        out_dt = _np_dtype(self.expressed) if dtype is None else np.dtype(dtype)  # type: ignore[call-overload]
        E = _np_dtype(self.expressed)
        c1, S1, Z1 = _rows_view(c, S, Z)
        per_row = c1.size // max(1, c1.shape[0]) if c1.ndim else 1
        if c1.ndim == 0 or len(chunk_bounds(c1.shape[0], per_row)) == 1:
            vals = dequantize_float(self, c, S, Z, out_dt, md, self._scale_in(S, md), E)
            return None if vals is None else vals.reshape(codes.shape)
        if dequantize_float(self, c1, S1, Z1, out_dt, md, self._scale_in(S1, md), E, check_only=True) is None:
            return None  # the kernel's conditions (codes' range, finite scales) hold on the whole, so on each chunk
        out = np.empty(c1.shape, dtype=out_dt)

        def work(lo: int, hi: int) -> None:  # rows (elements.md §2.11)
            Sr = _rows(S1, lo, hi, c1.ndim)
            v = dequantize_float(self, c1[lo:hi], Sr, _rows(Z1, lo, hi, c1.ndim), out_dt, md, self._scale_in(Sr, md),
                                 E, out=out[lo:hi])
            assert v is not None

        run_chunks(work, c1.shape[0], per_row)
        return out.reshape(codes.shape)

    def dequantize_with_mask(self, q: QArray, dtype: object = None, *, _reference: bool = False,
                             threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(values, unspecified): the mask marks results the profile leaves undefined (StableHLO spec: the
        subtraction overflows the storage type) together with q.unspecified. ``_reference=True`` broadcasts
        the scales to the codes' shape (``expand``) also where blocks divide the axes (§2.5). threads: as
        quantize's."""
        with thread_limit(threads):
            return self._dequantize_with_mask(self._plain_codes(q), dtype, _reference)

    def _dequantize_with_mask(self, q: QArray, dtype: object, _reference: bool) -> tuple[np.ndarray, np.ndarray]:
        A = self.arithmetic
        codes = np.asarray(q.codes)
        if A.simd_width:
            body, rem = self._loops()
            if not _reference and self.granularity != "per_tensor":  # the scalar loop's, everywhere (_tail)
                return rem.dequantize_with_mask(dataclasses.replace(q, scheme=rem), dtype)
            tail = self._tail(codes.shape)
            vb, bb = body.dequantize_with_mask(dataclasses.replace(q, scheme=body), dtype, _reference=_reference)
            vr, br = rem.dequantize_with_mask(dataclasses.replace(q, scheme=rem), dtype, _reference=_reference)
            return np.where(tail, vr, vb), np.where(tail, br, bb)
        bad = np.zeros(codes.shape, dtype=bool) if q.unspecified is None else np.asarray(q.unspecified).copy()
        if not _reference:
            vals = self._dequantize_kernel(q, dtype)
            if vals is not None:
                return vals, bad
        split = None if _reference else self.split_blocks(codes.shape)
        if split is None:
            S, Z = self.expand(codes.shape)
            if _reference:
                return self._dequantize_arrays(codes, S, Z, bad, dtype, _reference)
            return self._dequantize_chunks(codes, S, Z, bad, dtype)
        shp, S, Z = split  # blocks as axes of their own (see quantize)
        vals, bad = self._dequantize_chunks(codes.reshape(shp), S, Z, bad.reshape(shp), dtype)
        return vals.reshape(codes.shape), bad.reshape(codes.shape)

    def _dequantize_chunks(self, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray, dtype: object
                           ) -> tuple[np.ndarray, np.ndarray]:
        """_dequantize_rows on chunks of rows on the thread pool, as _quantize_chunks (elements.md §2.11);
        ``bad`` (contiguous) is updated in place."""
        if codes.ndim == 0:
            return self._dequantize_rows(codes, S, Z, bad, dtype)
        c1, S1, Z1 = _rows_view(codes, S, Z)
        per_row = c1.size // max(1, c1.shape[0])
        if len(chunk_bounds(c1.shape[0], per_row)) == 1 or not bad.flags.c_contiguous:
            return self._dequantize_rows(codes, S, Z, bad, dtype)
        b1 = bad.reshape(c1.shape)
        vals = np.empty(c1.shape, dtype=_np_dtype(self.expressed) if dtype is None else np.dtype(dtype))  # type: ignore[call-overload]

        def work(lo: int, hi: int) -> None:
            self._dequantize_rows(c1[lo:hi], _rows(S1, lo, hi, c1.ndim), _rows(Z1, lo, hi, c1.ndim), b1[lo:hi],
                                  dtype, vals[lo:hi])

        run_chunks(work, c1.shape[0], per_row)
        return vals.reshape(codes.shape), bad

    def _dequantize_rows(self, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray, dtype: object,
                         out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """_dequantize_arrays over slices of about CHUNK elements along the first axis, as _quantize_chunks
        (into ``out`` where given)."""
        rows = codes.shape[0] if codes.ndim else 1
        step = max(1, CHUNK // max(1, codes.size // max(rows, 1)))
        if codes.ndim == 0 or step >= rows:
            v, b = self._dequantize_arrays(codes, S, Z, bad, dtype)
            if out is not None:
                out[...] = v
            return v, b
        along = np.ndim(S) == codes.ndim and np.shape(S)[0] > 1
        vals: np.ndarray | None = out
        for r0 in range(0, rows, step):
            sl = slice(r0, r0 + step)
            v, _ = self._dequantize_arrays(codes[sl], S[sl] if along else S, Z[sl] if along else Z, bad[sl], dtype)
            if vals is None:
                vals = np.empty(codes.shape, dtype=v.dtype)
            vals[sl] = v
        assert vals is not None
        return vals, bad

    def _dequantize_arrays(self, codes: np.ndarray, S: np.ndarray, Z: np.ndarray, bad: np.ndarray, dtype: object,
                           _reference: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(values, unspecified) of ``codes`` with scales S and zero points Z broadcastable against them;
        ``bad`` (q.unspecified, a copy) is updated in place. Outside ``_reference`` an integer code - z is taken
        in the narrowest integer dtype that holds every difference the dtypes allow (the same integers as
        int64, so int32's wrap is the identity; §2.5)."""
        A = self.arithmetic
        out_dt = _np_dtype(self.expressed) if dtype is None else np.dtype(dtype)
        E = _np_dtype(self.expressed)
        Zs = Z
        Z = np.broadcast_to(self._wrapped_zero_points(Z), codes.shape)
        if isinstance(self.storage, FloatFormat):
            d = decode(codes.astype(self.storage.code_dtype), self.storage, dtype=np.float32)
        else:
            sub = A.dq_subtract
            idt = None if _reference or sub not in ("int64", "int32", "storage") else _difference_dtype(
                codes, self._wrapped_zero_points(Zs))
            if idt is not None:  # every code - z exact in idt: the int64 difference, which int32 then keeps
                diff = np.subtract(codes, self._wrapped_zero_points(Zs).astype(idt), dtype=idt)
                if sub == "storage":
                    lo, hi = self.storage.full_range
                    dlo, dhi = _value_range(diff)
                    if dlo < lo or dhi > hi:
                        bad |= (diff < lo) | (diff > hi)
                d = diff
            elif sub in ("int64", "int32", "storage"):
                diff = codes.astype(np.int64) - Z
                if sub == "int32":
                    diff = ((diff + 2**31) % 2**32) - 2**31
                elif sub == "storage":
                    lo, hi = self.storage.full_range
                    bad |= (diff < lo) | (diff > hi)
                d = diff
            else:
                sd = E if sub == "expressed" else _FLOAT_DTYPES[sub]
                with np.errstate(over="ignore", invalid="ignore"):
                    zs = cast(np.asarray(self._wrapped_zero_points(Zs), np.int64), sd)  # the unbroadcast zero points
                    d = np.asarray(_int_to_float(codes, sd) - zs).astype(sd)
        md = self._dq_multiply_dtype()
        if A.dq_subtract == "storage" and A.constants == "unspecified" and (
                _reference or isinstance(self.storage, FloatFormat)
                or max(map(abs, _value_range(d))) > 1 << _SIGNIFICAND_BITS.get(md.name, 0)):
            with np.errstate(invalid="ignore"):  # float storage (NaN codes) takes the reference's int64 reading
                dm = _int_to_float(np.asarray(d, dtype=np.int64), md)  # (every |d| <= 2^p is exact in md)
            bad |= dm.astype(np.float64) != np.asarray(d, dtype=np.float64)
        sm = self._scale_in(S, md)
        with np.errstate(over="ignore", invalid="ignore"):
            if A.dq_form == "multiply_add":  # fl32(fl32(q * s) + fl32(-z * double(s))) (uniform.md §2.2)
                s32 = np.asarray(self._scale_in(S, np.dtype(np.float32)))
                c = (-np.asarray(Z, np.float64) * s32.astype(np.float64)).astype(np.float32)
                p = np.asarray(codes.astype(np.float32) * s32).astype(np.float32)
                vals = cast(np.asarray(p + c).astype(np.float32), md)
            elif A.dq_form == "fma":  # fl32(q * s + fl32(-z * s)), one rounding (uniform.md §2.2)
                s32 = np.asarray(self._scale_in(S, np.dtype(np.float32)))
                c = (-np.asarray(Z, np.float64) * s32.astype(np.float64)).astype(np.float32)
                vals = cast(fma_float32(np.asarray(codes).astype(np.float32), s32, c), md)
            elif A.flush_subnormals and md in _FTZ_DTYPES:  # DAZ of the scale, FTZ of the float32 product
                p = np.asarray(_int_to_float(np.asarray(d), np.dtype(np.float32))
                               * _ftz(np.asarray(sm).astype(np.float32)))
                vals = cast(_ftz(p.astype(np.float32)), md)
            else:
                vals = np.asarray(_int_to_float(np.asarray(d), md) * sm).astype(md)
        return cast(vals, out_dt), bad

    # ---- serialization ----------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------------------
# builder: qref.scheme("int8", scale=..., zero_point=..., axis=..., block_size=..., profile=...)
# ---------------------------------------------------------------------------------------------------------
def _normalize_blocks(block_size: object, axis: int | None, scale_shape: tuple[int, ...]
                      ) -> tuple[tuple[int, int], ...]:
    r = len(scale_shape)
    if isinstance(block_size, Mapping):
        pairs = tuple((int(a), int(b)) for a, b in block_size.items())
    elif isinstance(block_size, (int, np.integer)) and not isinstance(block_size, bool):
        if axis is None:
            raise QrefError("block_size=<int> needs axis=<the blocked axis> (ONNX blocked quantization); or "
                            "pass block_size={axis: size, ...}")
        if r == 0:
            raise QrefError("blocked quantization needs a scale array with the input's rank")
        a = normalize_axis(axis, r)
        # ONNX: the scale has the input's shape except ceil(D/B) along the axis: block 1 on every other axis
        pairs = tuple((i, int(block_size) if i == a else 1) for i in range(r))
    elif isinstance(block_size, Sequence):
        items = list(block_size)
        if items and all(isinstance(p, Sequence) and len(p) == 2 for p in items):
            pairs = tuple((int(p[0]), int(p[1])) for p in items)
        else:
            if len(items) != r:
                raise QrefError(f"block_size as a tuple gives one block per axis ({r} for scales of rank {r}), "
                                f"got {len(items)}")
            pairs = tuple((i, int(b)) for i, b in enumerate(items))
    else:
        raise QrefError(f"block_size must be an int (with axis), a {{axis: size}} mapping or a per-axis tuple, "
                        f"got {block_size!r}")
    return pairs


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
    if Z.dtype.kind == "f" and not np.all(np.round(Z) == Z):
        raise QrefError("zero points must be integers")
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
        blocks = _normalize_blocks(block_size, axis, tuple(S.shape))
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

__all__ = ["DEFAULT_PROFILE", "UniformArithmetic", "UniformScheme", "arithmetic_for", "build_uniform", "cast",
           "fma32", "from_spec", "round_fraction", "round_to_int"]
