"""Lookup (quantile) schemes: NF4, AF4, bitsandbytes FP4, the 8-bit dynamic map, any table (spec: lut.md §3-7).

quantize(x): split x into blocks (row-major flattening, or along ``axis``), scale each block by its absmax
(or by static scales), decide the nearest table entry per element under the scheme's rule, and keep one code
per element (unpacked) with the per-block absmax in ``QArray.scales`` (float32). Optional double
quantization stores the block scales themselves quantized in ``QArray.meta["double_quant"]`` (a
``DoubleQuantized``). dequantize: entry[code] * scale (lut.md §4).

Everything a real system does differently is a field of ``LookupScheme`` set from a ``Profile`` of family
"lookup": ``spec`` (the default), ``bitsandbytes``, ``torchao``, ``openvino``, ``qwix`` (lut.md §6). The
profiles are typed ``LookupRules`` records in qref/profiles/lookup.py (``profile.rules``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ...core import arith as fp
from ...core.encode import encode, stochastic_random_bits
from ...core.exact import as_source_array
from ...core.parallel import run_chunks, thread_limit
from ...errors import QrefError, check_choice, unknown_name
from ...formats import IntFormat, get_format
from ...profiles import get_profile
from ...profiles.lookup import (
    DQ_KINDS,
    SCALE_MODES,
    SCHEME_FIELDS,
    SCHEME_NAMES,
    LookupRules,
    LookupSchemeRules,
    replace_split,
    rules_of,
)
from ...tables import Table, get_table, tables
from ..base import QArray, Scheme, normalize_axis, register_family
from . import fast
from .decision import nan_code, stochastic_table_encode, table_encode

__all__ = [
    "DoubleQuant",
    "DoubleQuantized",
    "LookupScheme",
    "from_spec",
    "lookup_scheme",
    "lookup_scheme_from_table",
]



def _sqrt_tiny(dtype: str) -> np.float32:
    """sqrt(smallest normal of dtype) as qwix computes it in that dtype: 2^-63 (float32, bfloat16), 2^-7 (float16)."""
    return np.float32(2.0 ** -7 if dtype == "float16" else 2.0 ** -63)


def _out_dtype(dtype: object) -> np.dtype:
    if isinstance(dtype, str) and dtype in fp.FLOAT_DTYPES:
        return fp.FLOAT_DTYPES[dtype]
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise QrefError(f"unsupported output dtype {dtype!r}; use float32, float64, float16 or bfloat16") from None
    if dt != np.float64:
        fp.dtype_name(dt)
    return dt


def _exact_mean(v: np.ndarray, dtype: str) -> np.float32:
    """The exact mean of float32 values rounded once to dtype (as a float32); NaN if any is not finite."""
    if v.size == 0 or not np.isfinite(v).all():
        return np.float32(np.nan)
    m, e = np.frexp(v.astype(np.float64))  # a float32 is m 2^e with m 2^24 an integer
    ints = (m * (1 << 24)).astype(np.int64)
    exps = e.astype(np.int64) - 24
    lo = int(exps.min())
    total = sum(int(ints[exps == k].sum()) << int(k - lo) for k in np.unique(exps))
    r = fp.round_fractions([Fraction(total, v.size) * Fraction(2) ** lo], np.float32)
    return np.float32(r[0] if dtype == "float32" else fp.convert(r, fp.float_dtype(dtype)).astype(np.float32)[0])


# ---------------------------------------------------------------------------------------------------------
# double quantization of the block scales (lut.md §5)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DoubleQuant:
    """How block scales are themselves quantized (lut.md §5).

    kind "lookup" (bitsandbytes compress_statistics): u = float32(absmax - offset) is quantized by ``inner``
    (bitsandbytes: the dynamic8 scheme in blocks of 256); scale = float32(float32(entry[c] * absmax2) + offset).
    kind "int8_absmax" (torchao NF4): u = absmax - offset; per ``block_size`` scales factor = 256 / (2 max|u|);
    c = clamp(round_half_even(u * factor), -128, 127) as int8; scale = c / factor + offset, each operation
    rounded to ``compute`` ("input": the data's dtype). offset: the mean of the block scales (lut.md §5.3).
    """

    kind: str
    block_size: int = 256
    inner: LookupScheme | None = None
    compute: str = "float32"

    def __post_init__(self) -> None:
        check_choice("double quantization kind", self.kind, DQ_KINDS)
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise QrefError(f"double quantization block_size must be a positive integer, got {self.block_size!r}")
        if self.kind == "lookup" and self.inner is None:
            raise QrefError("double quantization kind 'lookup' needs an inner LookupScheme")
        check_choice("double quantization compute dtype", self.compute, ("float32", "input"))

    def to_spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "block_size": self.block_size, "compute": self.compute,
                "inner": None if self.inner is None else self.inner.to_spec()}

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> DoubleQuant:
        inner = spec.get("inner")
        return cls(spec["kind"], spec["block_size"], None if inner is None else from_spec(inner),
                   spec.get("compute", "float32"))


@dataclass
class DoubleQuantized:
    """Quantized block scales, kept in ``QArray.meta["double_quant"]`` (lut.md §5.2).

    codes: one per first-level block, uint8 (kind "lookup": codes of the inner table) or int8 (kind
    "int8_absmax"). scales: float32 per group of ``config.block_size`` codes (the inner absmax for "lookup",
    torchao's quantization factor for "int8_absmax"). offset: the mean subtracted before quantizing. dtype: the
    dtype the arithmetic rounds to. unspecified: bool per code (non-finite inputs), or None.
    """

    codes: np.ndarray
    scales: np.ndarray
    offset: np.float32
    config: DoubleQuant
    dtype: str = "float32"
    unspecified: np.ndarray | None = None

    def dequantize(self) -> np.ndarray:
        """The reconstructed block scales, float32 array in block order (values of ``dtype``)."""
        cfg = self.config
        if cfg.kind == "lookup":
            assert cfg.inner is not None
            q = QArray(codes=self.codes, scheme=cfg.inner, scales=self.scales)
            d = cfg.inner.dequantize(q, dtype=np.float32)
            return fp.op_in_float32(d, self.offset, np.add, "float32")
        c = self.codes.astype(np.float32).reshape(-1)
        fac = np.repeat(self.scales.astype(np.float32), cfg.block_size)[: c.size]
        return fp.op_in_float32(fp.op_in_float32(c, fac, np.divide, self.dtype), self.offset, np.add, self.dtype)


def _double_quantize(cfg: DoubleQuant, scales: np.ndarray, offset: float | None, dtype: str,
                     reference: bool = True) -> DoubleQuantized:
    dt = dtype if cfg.compute == "input" else "float32"
    s = scales.astype(np.float32).reshape(-1)
    if offset is None:
        off = _exact_mean(s, dt)
    else:
        off = np.float32(fp.convert(np.array([offset], np.float64), fp.float_dtype(dt)).astype(np.float32)[0])
    u = fp.op_in_float32(s, off, np.subtract, dt)
    if cfg.kind == "lookup":
        assert cfg.inner is not None
        q = cfg.inner.quantize(u, _reference=reference)
        unspec = q.unspecified if np.isfinite(off) else np.ones(u.shape, bool)
        return DoubleQuantized(q.codes, q.scales, off, cfg, dt, unspec)
    b = cfg.block_size
    if u.size % b:
        raise QrefError(f"int8_absmax double quantization needs a multiple of {b} block scales, got {u.size} "
                        f"(torchao's to_nf4 needs numel divisible by block_size * {b})")
    blocks = u.reshape(-1, b)
    am2 = np.max(np.abs(blocks), axis=1)
    fac = fp.op_in_float32(256, fp.op_in_float32(2, am2, np.multiply, dt), np.divide, dt)
    prod = fp.op_in_float32(blocks, fac[:, None], np.multiply, dt).reshape(-1)
    codes = np.asarray(encode(prod, "int8", rounding="nearest_even", overflow="saturate"))
    unspec = ~np.isfinite(prod) | (not np.isfinite(off))
    return DoubleQuantized(codes.astype(np.uint8).view(np.int8), fac, off, cfg, dt, unspec)


# ---------------------------------------------------------------------------------------------------------
# the scheme
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LookupScheme(Scheme):
    """Block-scaled lookup quantization (lut.md §3.1 lists every field with its meaning and default).

    name: "nf4", "af4", "fp4_bnb", "dynamic8" or "lut". table: the Table (code i -> table.values[i]).
    block_size: elements per block (absmax scaling); None with scale="static". axis: None = flatten row-major
    into blocks; k = blocks of contiguous elements along axis k; a short last block is a partial block.
    profile: the profile the rules came from. scale: "absmax" or "static" (static_scales / static_zero_points
    per tensor or per index along axis: finite scales > 0, one zero point per scale). double_quant: DoubleQuant
    (absmax scales only) or None. rules: the LookupSchemeRules of qref.profiles.lookup (scaling, compute
    dtypes, the small-absmax guard, the decision, NaN and zero blocks, accepted inputs, FTZ, stochastic
    rounding: lut.md §3.1; the record checks their values); ``scheme.X`` reads ``scheme.rules.X``.
    ``scheme.replace(**changes)`` changes scheme fields and rules alike. With a stochastic rounding quantize
    takes random_bits= or seed= (lut.md §3.5).
    """

    name: str
    table: Table
    block_size: int | None = 64
    axis: int | None = None
    profile: str = "spec"
    scale: str = "absmax"
    static_scales: tuple[float, ...] | None = None
    static_zero_points: tuple[float, ...] | None = None
    double_quant: DoubleQuant | None = None
    rules: LookupSchemeRules = field(default_factory=LookupSchemeRules)
    family = "lookup"

    def __post_init__(self) -> None:
        if not isinstance(self.table, Table):
            raise QrefError(f"LookupScheme.table must be a Table, got {type(self.table).__name__}")
        if not isinstance(self.rules, LookupSchemeRules):
            raise QrefError(f"LookupScheme.rules must be a LookupSchemeRules, got {type(self.rules).__name__}")
        check_choice("scale mode", self.scale, SCALE_MODES)
        if self.scale == "absmax":
            b = self.block_size
            if not isinstance(b, int) or isinstance(b, bool) or b < 1:
                raise QrefError(f"block_size must be a positive integer for absmax scaling, got {b!r}")
        else:
            self._check_static()
        if self.rules.rule == "grid65536" and not self.table.is_sorted:
            raise QrefError(f"rule 'grid65536' needs a table sorted ascending; {self.table.name!r} is not")
        if self.table.thresholds is not None and self.rules.rule != "nearest":
            raise QrefError(f"table {self.table.name!r} has explicit thresholds; they need rule='nearest'")

    def __getattr__(self, name: str) -> Any:
        """Read access to the rules: ``scheme.tie`` is ``scheme.rules.tie``."""
        if name.startswith("_") or name == "rules":
            raise AttributeError(name)
        rules = self.__dict__.get("rules")
        if rules is not None and name in SCHEME_FIELDS:
            return getattr(rules, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def replace(self, **changes: Any) -> LookupScheme:
        """A copy with scheme fields and rules (LookupSchemeRules fields) changed: the rules by
        ``dataclasses.replace(self.rules, **rule_changes)``."""
        return replace_split(self, "rules", SCHEME_FIELDS, changes)

    def _check_static(self) -> None:
        if self.block_size is not None:
            raise QrefError("scale='static' takes no block_size (static scales are per tensor or per axis)")
        if not self.static_scales:
            raise QrefError("scale='static' needs static_scales (one scale, or one per index along axis)")
        sc = np.asarray(self.static_scales, np.float64)
        if not (np.isfinite(sc).all() and (sc > 0).all()):
            raise QrefError(f"static scales must be finite and > 0, got {self.static_scales}")
        if self.static_zero_points is not None and len(self.static_zero_points) != len(self.static_scales):
            raise QrefError("static_zero_points needs one value per static scale")
        if len(self.static_scales) > 1 and self.axis is None:
            raise QrefError("several static scales need axis= (the axis they run along)")
        if self.double_quant is not None:
            raise QrefError("double quantization applies to absmax block scales, not static scales")

    # ---- helpers -------------------------------------------------------------------------------------------
    def _entries(self, cd: str, which: str = "table_dtype") -> np.ndarray:
        """Table entries as the decision (which="table_dtype") or the dequantization (which=
        "dequant_table_dtype") sees them: float32, rounded to the compute dtype cd ("input") or to float16."""
        v = self.table.values.astype(np.float32)
        rule = getattr(self.rules, which)
        target = cd if rule == "input" else rule
        return v if target == "float32" else fp.convert(v, fp.float_dtype(target)).astype(np.float32)

    @property
    def storage_format(self) -> Any:
        """The format of the stored codes (the table's storage: uint4 for NF4, uint8 for dynamic8)."""
        return self.table.storage_format

    @property
    def pad_code(self) -> int:
        """The code of +0.0 under this scheme's rule (bitsandbytes pads an odd tail with it)."""
        return int(table_encode(np.zeros(1, np.float32), self.table, rule=self.rules.rule,
                                midpoints=self.rules.midpoints,
                                tie=self.rules.tie, entries=self._entries("float32"))[0])

    def _decide(self, s: np.ndarray, cd: str, rbits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(codes int64, unspecified bool) of scaled values s (float32 array holding cd values); rbits: the
        random integers of a stochastic rounding, one per element of s (lut.md §3.5)."""
        nan = np.isnan(s)
        sv = np.where(nan, np.float32(0), s).astype(np.float32)
        if self.rules.rounding != "deterministic":
            assert rbits is not None and self.rules.stochastic_bits is not None
            codes = stochastic_table_encode(sv, self._entries(cd), self.rules.rounding, self.rules.stochastic_bits,
                                            rbits)
        else:
            if cd != "float32":
                sv = sv.astype(fp.FLOAT_DTYPES[cd])  # exact: s already holds values of the compute dtype
            dist = cd if self.rules.distance_dtype == "input" else "float32"
            codes = table_encode(sv, self.table, rule=self.rules.rule, midpoints=self.rules.midpoints,
                                 tie=self.rules.tie,
                                 distance_dtype=dist, entries=self._entries(cd))
        unspec = np.zeros(s.shape, bool)
        if nan.any():
            if self.rules.nan == "error":
                raise QrefError("NaN scaled value (a NaN in the block, inf/inf or 0/0) with nan='error'")
            codes = np.where(nan, nan_code(self.table, self.rules.nan), codes)
            if self.rules.nan == "unspecified" or self.rules.rule == "grid65536":
                unspec |= nan  # grid65536: bitsandbytes converts NaN to uint16 (undefined behaviour)
        return codes, unspec

    def _blocks(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """(blocks (nb, B) padded with 0, valid count per block, block-scale shape with axis last)."""
        B = self.block_size
        assert B is not None
        if self.axis is None:
            flat = x.reshape(-1)
            n = flat.size
            B = min(B, max(n, 1))  # one partial block holds every element: padding beyond it changes nothing
            nb = -(-n // B)
            pad = np.zeros(nb * B, dtype=flat.dtype)
            pad[:n] = flat
            valid = np.full(nb, B, dtype=np.int64)
            if nb and n % B:
                valid[-1] = n % B
            return pad.reshape(nb, B), valid, (nb,)
        ax = normalize_axis(self.axis, x.ndim)
        moved = np.moveaxis(x, ax, -1)
        L = moved.shape[-1]
        B = min(B, max(L, 1))  # memory bounded by the input, not by block_size (lut.md §3.2)
        rows = moved.reshape(math.prod(moved.shape[:-1]), L)
        per = -(-L // B)
        pad = np.zeros((rows.shape[0], per * B), dtype=x.dtype)
        pad[:, :L] = rows
        valid = np.full(per, B, dtype=np.int64)
        if per and L % B:
            valid[-1] = L % B
        return pad.reshape(-1, B), np.tile(valid, rows.shape[0]), (*moved.shape[:-1], per)

    def _unblock(self, arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Per-element block array back to the input's shape (drops the padding)."""
        if self.axis is None:
            return arr.reshape(-1)[: math.prod(shape)].reshape(shape)
        ax = normalize_axis(self.axis, len(shape))
        mshape = tuple(np.moveaxis(np.empty(shape, dtype=np.uint8), ax, -1).shape)
        rows = arr.reshape(math.prod(mshape[:-1]), arr.size // max(1, math.prod(mshape[:-1])))[:, : mshape[-1]]
        return np.moveaxis(rows.reshape(mshape), -1, ax)

    def _check_input(self, x: object) -> tuple[np.ndarray, np.ndarray, str]:
        """(input array, its values rounded to the compute dtype held in float32, compute dtype name)."""
        arr = as_source_array(x)
        if arr.dtype.kind in "iub":
            raise QrefError(f"{self.name}: lookup quantization takes float input, got {arr.dtype}")
        name = "float64" if arr.dtype == np.float64 else fp.dtype_name(arr.dtype)
        if name not in self.rules.input_dtypes:
            raise QrefError(f"profile {self.profile!r} takes {', '.join(self.rules.input_dtypes)} input, got {name}"
                            + ("; convert it to float32 first" if name == "float64" else ""))
        if arr.size % self.rules.numel_multiple:
            raise QrefError(f"profile {self.profile!r} needs the element count to be a multiple of "
                            f"{self.rules.numel_multiple}, got {arr.size}")
        if self.rules.compute_dtype == "input" and name == "float64":
            raise QrefError(f"profile {self.profile!r} computes in the input dtype; float64 is not supported")
        cd = name if self.rules.compute_dtype == "input" else self.rules.compute_dtype
        if arr.dtype == np.float32 and cd == "float32":
            return arr, arr, cd  # the conversion would be a copy
        return arr, np.asarray(fp.convert(arr, fp.float_dtype(cd)), dtype=np.float32), cd

    # ---- quantize / dequantize -----------------------------------------------------------------------------
    def quantize(self, x: object, *, scale_offset: float | None = None, random_bits: object = None,
                 seed: object = None, _reference: bool = False, threads: int | None = None, **kwargs: Any) -> QArray:
        """One code per element and the per-block absmax (float32) of x (lut.md §3.2).

        scale_offset: with double quantization, the offset (the mean of the block scales) to use instead of
        their exact mean; pass the producer's value to reproduce a library bit for bit (lut.md §5.3).
        random_bits / seed: the random integers of a stochastic rounding (lut.md §3.5): random_bits = integers
        in [0, 2^stochastic_bits) broadcast to x's shape (element i of x, in C order, takes the i-th); or
        seed = a non-negative int: the top stochastic_bits bits of PCG64(seed).random_raw(), in x's C order.
        Default None for both: a stochastic rounding needs one of them; a deterministic one takes neither.
        _reference=True: the readable definition everywhere instead of the fast path (lut.md §3.6; same results).
        threads: threads for a large x, whole blocks per chunk (default None: $QREF_NUM_THREADS, else every
        core; the result never depends on it, elements.md §2.11).
        """
        if kwargs:
            raise QrefError(f"LookupScheme.quantize takes scale_offset=, random_bits=, seed= and threads= only, "
                            f"got {sorted(kwargs)}")
        with thread_limit(threads):
            return self._quantize(x, scale_offset, random_bits, seed, _reference)

    def _quantize(self, x: object, scale_offset: float | None, random_bits: object, seed: object,
                  _reference: bool) -> QArray:
        if scale_offset is not None and self.double_quant is None:
            raise QrefError("scale_offset= is the offset of double quantization; this scheme has none "
                            "(build it with double_quant=True)")
        arr, x32, cd = self._check_input(x)
        rbits = None
        if self.rules.rounding != "deterministic":
            assert self.rules.stochastic_bits is not None
            rbits = stochastic_random_bits(arr.shape, self.rules.stochastic_bits, random_bits, seed).reshape(arr.shape)
        elif random_bits is not None or seed is not None:
            raise QrefError("random_bits= / seed= are for stochastic rounding; this scheme rounds "
                            "deterministically (build it with rounding='stochastic_a'|'stochastic_b'|"
                            "'stochastic_c' and stochastic_bits=N)")
        with np.errstate(all="ignore"):
            if self.scale == "static":
                codes, unspec = self._quantize_static(x32, cd, rbits)
                zp = None if self.static_zero_points is None else np.asarray(self.static_zero_points, np.float32)
                return QArray(codes=codes.astype(self.table.storage_format.code_dtype), scheme=self,
                              scales=np.asarray(self.static_scales, np.float32), zero_points=zp,
                              unspecified=unspec, axis=self.axis, meta={"input_dtype": arr.dtype.name})
            if (not _reference and rbits is None and self._layout_is_reshape(arr.shape)
                    and self.table.size <= 0xFFFF):
                return self._quantize_absmax_fast(arr, x32, cd, scale_offset)
            return self._quantize_absmax(arr, x32, cd, scale_offset, rbits)

    def _layout_is_reshape(self, shape: tuple[int, ...]) -> bool:
        """True when the blocks are a plain (n / B, B) reshape of the C-order data: no padding, no transpose."""
        B = self.block_size
        if B is None or not shape or math.prod(shape) == 0:
            return False
        if self.axis is None:
            return math.prod(shape) % B == 0
        return normalize_axis(self.axis, len(shape)) == len(shape) - 1 and shape[-1] % B == 0

    def _scale_blocks(self, blocks: np.ndarray, partial: np.ndarray, cd: str
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(s, stored, zero) of blocks (nb, B) (lut.md §3.2): the scaled values before the decision."""
        absmax = np.max(np.abs(blocks), axis=1) if blocks.size else np.zeros(0, np.float32)
        div = absmax
        if self.rules.scale_min is not None:
            smin = _sqrt_tiny(cd) if self.rules.scale_min == "sqrt_tiny" else np.float32(self.rules.scale_min)
            repl = np.float32(smin if self.rules.scale_min_rule == "clamp" else 1.0)
            div = np.where(absmax < smin, fp.convert(np.array([repl]), fp.float_dtype(cd))[0], absmax)
            div = div.astype(np.float32)
        stored = {"all": div, "none": absmax, "partial": np.where(partial, div, absmax)}[self.rules.store_guarded]
        dcol = div[:, None]
        if self.rules.scaling == "reciprocal":
            r = fp.op_in_float32(1, dcol, np.divide, "float32" if self.rules.bf16_upcast and cd == "bfloat16" else cd)
            if self.rules.ftz and cd != "float16":  # FTZ: 1/a of an absmax above 2^126 is a float32 subnormal -> 0
                r = fp.flush(r)
            s = fp.op_in_float32(blocks, r, np.multiply, cd)
            if self.rules.partial_scaling == "divide" and partial.any():
                s = np.where(partial[:, None], fp.op_in_float32(blocks, dcol, np.divide, cd), s)
        else:
            s = fp.op_in_float32(blocks, dcol, np.divide, cd)
        zero = absmax == 0
        if self.rules.zero_block == "zero_code" and zero.any():
            s = np.where(zero[:, None], np.float32(0), s)
        if self.rules.clamp:
            s = np.clip(s, np.float32(-1), np.float32(1))
        return s, stored, zero

    def _finish_absmax(self, arr: np.ndarray, codes: np.ndarray, unspec: np.ndarray, stored: np.ndarray,
                       sshape: tuple[int, ...], cd: str, scale_offset: float | None, reference: bool) -> QArray:
        if self.rules.scale_dtype != "float32":  # lut.md §3.2: the stored scale, rounded once (overflow to +-Inf)
            stored = fp.convert(stored, fp.float_dtype(self.rules.scale_dtype)).astype(np.float32)
        meta: dict[str, Any] = {"input_dtype": arr.dtype.name}
        if self.double_quant is not None:
            meta["double_quant"] = _double_quantize(self.double_quant, stored, scale_offset, cd, reference)
        scales = stored.astype(np.float32).reshape(sshape)
        if self.axis is not None:
            scales = np.moveaxis(scales, -1, normalize_axis(self.axis, arr.ndim))
        return QArray(codes=codes, scheme=self, scales=scales, unspecified=unspec, axis=self.axis, meta=meta)

    def _quantize_absmax(self, arr: np.ndarray, x32: np.ndarray, cd: str, scale_offset: float | None,
                         rbits: np.ndarray | None = None) -> QArray:
        blocks, valid, sshape = self._blocks(x32)
        rball = None if rbits is None else self._blocks(rbits)[0]  # each element keeps its own R
        parts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

        def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
            b = blocks[lo:hi]
            s, st, zero = self._scale_blocks(b, valid[lo:hi] < blocks.shape[1], cd)
            c, u = self._decide(s.reshape(-1), cd, None if rball is None else rball[lo:hi].reshape(-1))
            c, u = c.reshape(b.shape), u.reshape(b.shape)
            if self.rules.zero_block == "code0":
                c = np.where(zero[:, None], 0, c)
                u = np.where(zero[:, None], False, u)
            parts[lo] = (c, u, st)

        run_chunks(work, blocks.shape[0], blocks.shape[1])
        order = [parts[lo] for lo in sorted(parts)]
        codes, unspec, stored = (order[0][i] if len(order) == 1 else np.concatenate([p[i] for p in order])
                                 for i in range(3))
        return self._finish_absmax(arr, self._unblock(codes, arr.shape).astype(self.table.storage_format.code_dtype),
                                   self._unblock(unspec, arr.shape), stored, sshape, cd, scale_offset, True)

    def _decision_key(self) -> tuple[Any, ...]:
        return (self.table, self.rules.rule, self.rules.midpoints, self.rules.tie, self.rules.distance_dtype,
                self.rules.table_dtype, self.rules.nan)

    def _decision_luts(self, cd: str) -> tuple[np.ndarray, np.ndarray, int]:
        return fast.decision_lut(self._decision_key(), self.table.size, cd, self._decide,
                                 self._entries(cd) if self.rules.rule == "argmin" else None)

    def _decide_fast(self, s: np.ndarray, cd: str) -> tuple[np.ndarray, np.ndarray]:
        """_decide (deterministic) through the decision tables (lut.md §3.6): (codes, unspecified) of flat s."""
        luts = self._decision_luts(cd)
        codes = np.empty(s.size, self.table.storage_format.code_dtype)
        unspec = np.zeros(s.size, bool)
        idx = np.empty(min(fast.CHUNK, s.size), np.intp)
        for i in range(0, s.size, fast.CHUNK):  # chunks, not elements
            c = s[i:i + fast.CHUNK]
            amb = fast.lookup_chunk(c, cd, luts, self.table.size, codes[i:i + c.size], idx[: c.size])
            if amb.size:
                rc, ru = self._decide(c[amb], cd)
                codes[i + amb], unspec[i + amb] = rc, ru
        return codes, unspec

    def _quantize_absmax_fast(self, arr: np.ndarray, x32: np.ndarray, cd: str, scale_offset: float | None
                              ) -> QArray:
        """_quantize_absmax for a reshape layout, chunked, with the table decision (lut.md §3.6)."""
        B = self.block_size
        assert B is not None
        x2 = x32.reshape(-1, B)
        nb = x2.shape[0]
        code_dt = self.table.storage_format.code_dtype
        codes = np.empty(x2.shape, dtype=code_dt)
        unspec = np.zeros(x2.shape, dtype=bool)
        stored = np.empty(nb, np.float32)
        lut = self._decision_luts(cd)
        rows = max(1, fast.CHUNK // B)
        no_partial = np.zeros(rows, dtype=bool)
        flat_codes = codes.reshape(-1)
        found: dict[int, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}

        def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
            idx = np.empty(min(rows, hi - lo) * B, dtype=np.intp)
            mine: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
            for r0 in range(lo, hi, rows):  # chunks of blocks, not elements
                r1 = min(hi, r0 + rows)
                s, st, zero = self._scale_blocks(x2[r0:r1], no_partial[: r1 - r0], cd)
                stored[r0:r1] = st
                sf = s.reshape(-1)
                amb = fast.lookup_chunk(sf, cd, lut, self.table.size, flat_codes[r0 * B:r1 * B], idx[: sf.size])
                if amb.size:
                    mine[0].append(amb + r0 * B)
                    mine[1].append(sf[amb])
                if self.rules.zero_block == "code0" and zero.any():
                    mine[2].append(np.flatnonzero(zero) + r0)
            found[lo] = mine

        run_chunks(work, nb, B)
        amb_pos = [a for lo in sorted(found) for a in found[lo][0]]
        amb_val = [a for lo in sorted(found) for a in found[lo][1]]
        zero_rows = [a for lo in sorted(found) for a in found[lo][2]]
        if amb_pos:  # the elements the table leaves to the reference decision
            pos = np.concatenate(amb_pos)
            c, u = self._decide(np.concatenate(amb_val), cd)
            flat_codes[pos] = c
            unspec.reshape(-1)[pos] = u
        if zero_rows:
            zr = np.concatenate(zero_rows)
            codes[zr] = 0
            unspec[zr] = False
        sshape = (nb,) if self.axis is None else (*arr.shape[:-1], arr.shape[-1] // B)
        return self._finish_absmax(arr, codes.reshape(arr.shape), unspec.reshape(arr.shape), stored, sshape, cd,
                                   scale_offset, False)

    def _static_params(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        assert self.static_scales is not None
        sc = np.asarray(self.static_scales, np.float32)
        zp = np.zeros_like(sc) if self.static_zero_points is None else np.asarray(self.static_zero_points,
                                                                                  np.float32)
        if self.axis is None:
            return sc.reshape(()), zp.reshape(())
        ax = normalize_axis(self.axis, len(shape))
        if shape[ax] != sc.size:
            raise QrefError(f"{sc.size} static scales for axis {ax} of length {shape[ax]}")
        bshape = [1] * len(shape)
        bshape[ax] = sc.size
        return sc.reshape(bshape), zp.reshape(bshape)

    def _quantize_static(self, x32: np.ndarray, cd: str, rbits: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        sc, zp = self._static_params(x32.shape)
        s = fp.op_in_float32(x32, fp.convert(sc, fp.float_dtype(cd)), np.divide, cd)
        if self.static_zero_points is not None:
            s = fp.op_in_float32(s, fp.convert(zp, fp.float_dtype(cd)), np.add, cd)
        if self.rules.clamp:
            s = np.clip(s, np.float32(-1), np.float32(1))
        codes, unspec = self._decide(s.reshape(-1), cd, None if rbits is None else rbits.reshape(-1))
        return codes.reshape(x32.shape), unspec.reshape(x32.shape)

    def dequantize(self, q: QArray, dtype: object = np.float32, *, _reference: bool = False,
                   threads: int | None = None) -> np.ndarray:
        """entry[code] * scale (lut.md §4) computed in the compute dtype (float32: one float32 multiply), then
        rounded to ``dtype`` by nearest_even. Double-quantized scales are reconstructed first (lut.md §5).
        _reference=True: the readable definition instead of the chunked fast path (lut.md §3.6; same results).
        threads: as quantize's."""
        with thread_limit(threads):
            return self._dequantize(q, dtype, _reference)

    def _dequantize(self, q: QArray, dtype: object, _reference: bool) -> np.ndarray:
        out_dt = _out_dtype(dtype)
        cd = self.rules.compute_dtype
        if cd == "input":
            cd = q.meta.get("input_dtype", "float32")
            cd = "float32" if cd == "float64" else cd
        raw = np.asarray(q.codes)
        if (not _reference and self.scale == "absmax" and raw.dtype in (np.dtype(np.uint8), np.dtype(np.uint16))
                and self._layout_is_reshape(raw.shape)):
            v = self._dequantize_fast(q, np.ascontiguousarray(raw), cd)
            if out_dt == np.dtype(np.float32):
                return v
        else:
            v = self._dequantize_values(q, raw, cd)
        return self._dequantize_output(v, raw.shape, out_dt)

    def _per_block_scales(self, q: QArray, ndim: int) -> np.ndarray:
        dq = q.meta.get("double_quant")
        if dq is not None:
            return dq.dequantize()
        if self.axis is None:
            return np.asarray(q.scales, np.float32).reshape(-1)
        return np.moveaxis(np.asarray(q.scales, np.float32), normalize_axis(self.axis, ndim), -1).reshape(-1)

    def _scale_product(self, t: np.ndarray, a: np.ndarray, cd: str) -> np.ndarray:
        """fl_cd(t * a) with the profile's FTZ/DAZ (lut.md §4); t: (blocks, B) entries, a: (blocks, 1) scales."""
        if self.rules.ftz and cd in ("float32", "bfloat16"):  # DAZ of t and a, FTZ of the float32 product (§4)
            return fp.mul(t, a, fp.resolve_compute_dtype(cd, fp.F32), ftz=True).astype(np.float32)
        return fp.op_in_float32(t, a, np.multiply, cd)

    def _dequantize_values(self, q: QArray, raw: np.ndarray, cd: str) -> np.ndarray:
        """The reference dequantization before the output rounding: float32 values of cd (lut.md §4)."""
        codes = raw.astype(np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= self.table.size):
            raise QrefError(f"codes out of range for table {self.table.name!r} ({self.table.size} entries)")
        t = self._entries(cd, "dequant_table_dtype")[codes]
        if self.scale == "static":
            sc, zp = self._static_params(codes.shape)
            if self.static_zero_points is not None:
                t = fp.op_in_float32(t, fp.convert(zp, fp.float_dtype(cd)), np.subtract, cd)
            return fp.op_in_float32(t, fp.convert(sc, fp.float_dtype(cd)), np.multiply, cd)
        per_block = self._per_block_scales(q, codes.ndim)
        tb = self._blocks(t)[0]
        if per_block.size != tb.shape[0]:
            raise QrefError(f"{per_block.size} block scales for {tb.shape[0]} blocks")
        return self._unblock(self._scale_product(tb, per_block[:, None], cd), codes.shape)

    def _dequantize_fast(self, q: QArray, raw: np.ndarray, cd: str) -> np.ndarray:
        """_dequantize_values for uint8/uint16 codes in a reshape layout (lut.md §3.6): chunks of whole blocks;
        8-bit codes gathered two at a time through a table of value pairs (an intp index, mode="clip" after the
        range check), then one float32 multiply by the block scale in place. FTZ (lut.md §4): the flushed
        entries and scales are the operands; the flush of the product runs only on the blocks where it can act."""
        B = self.block_size
        assert B is not None
        n = raw.size
        nb = n // B
        size = self.table.size
        per_block = self._per_block_scales(q, raw.ndim)
        if per_block.size != nb:
            raise QrefError(f"{per_block.size} block scales for {nb} blocks")
        entries = self._entries(cd, "dequant_table_dtype")
        flat = raw.reshape(-1)
        out = np.empty(n, np.float32)
        plain = cd == "float32"  # one float32 multiply per element (with ftz: of flushed operands, flushed)
        tiny = None
        if plain and self.rules.ftz:  # lut.md §4: DAZ of t and a, FTZ of the float32 product
            entries, per_block = fp.flush(entries), fp.flush(per_block)
            tiny = fast.ftz_blocks(entries, per_block)
        pairs = fast.pair_table((self.table, entries.tobytes()), entries) if raw.dtype == np.uint8 else None
        if B % 2:
            pairs = None  # chunks of odd length: one code at a time
        check = raw.dtype != np.uint8 or size < 256  # a uint8 code always indexes a 256-entry table
        rows = max(1, fast.DQ_CHUNK // B)

        def work(lo: int, hi: int) -> None:  # whole blocks on the thread pool (elements.md §2.11)
            idx = np.empty(min(rows, hi - lo) * B // (1 if pairs is None else 2), np.intp)
            for r0 in range(lo, hi, rows):  # chunks of blocks, not elements
                r1 = min(hi, r0 + rows)
                c = flat[r0 * B:r1 * B]
                if check and int(c.max()) >= size:
                    raise QrefError(f"codes out of range for table {self.table.name!r} ({size} entries)")
                o = out[r0 * B:r1 * B]
                if pairs is not None:
                    ix = idx[: c.size // 2]
                    np.copyto(ix, c.view(np.uint16), casting="unsafe")
                    np.take(pairs, ix, out=o.view(np.uint64), mode="clip")
                else:
                    ix = idx[: c.size]
                    np.copyto(ix, c, casting="unsafe")
                    np.take(entries, ix, out=o, mode="clip")
                o2 = o.reshape(r1 - r0, B)
                a = per_block[r0:r1, None]
                if not plain:
                    o2[...] = self._scale_product(o2, a, cd)
                    continue
                np.multiply(o2, a, out=o2)  # one float32 multiply: fl32(t * a)
                if tiny is not None:
                    t = np.flatnonzero(tiny[r0:r1])
                    if t.size:  # FTZ of the product on the blocks where it can be below 2^-126
                        sub = o2[t]
                        np.copysign(np.float32(0), sub, out=sub, where=np.abs(sub) < np.float32(2.0**-126))
                        o2[t] = sub

        with np.errstate(over="ignore", invalid="ignore"):
            run_chunks(work, nb, B)
        return out.reshape(raw.shape)

    def _dequantize_output(self, v: np.ndarray, shape: tuple[int, ...], out_dt: np.dtype) -> np.ndarray:
        """The values of cd rounded to the output dtype (lut.md §4)."""
        if out_dt in (np.dtype(np.float32), np.dtype(np.float64)):
            return v.astype(out_dt)
        out = fp.convert(v, fp.float_dtype(fp.dtype_name(out_dt)))
        if (fp.dtype_name(out_dt) in self.rules.dequant_flush and len(shape) and shape[-1] % 2 == 0
                and (self.block_size or 0) < 2048):  # lut.md §4: DAZ of the output conversion's float32 input
            out = np.where(np.abs(v) < np.float32(2.0**-126), np.where(np.signbit(v), -0.0, 0.0), out).astype(out_dt)
        return out

    def to_spec(self) -> dict[str, Any]:
        """The spec of the committed suite: SPEC_KEYS in order (tuples as lists); scale_dtype, rounding and
        stochastic_bits are left out at their defaults (specs written before those fields existed read the same)."""
        rules = self.rules.values()
        spec: dict[str, Any] = {"family": "lookup"}
        for k in SPEC_KEYS:
            val = rules[k] if k in rules else getattr(self, k)
            if k == "table":
                spec["table"] = val.to_spec()
            elif k == "double_quant":
                spec["double_quant"] = None if val is None else val.to_spec()
            elif isinstance(val, tuple):
                spec[k] = list(val)
            elif (k, val) in (("scale_dtype", "float32"), ("rounding", "deterministic"), ("stochastic_bits", None)):
                continue
            else:
                spec[k] = val
        return spec


# the keys of a lookup scheme's spec, in order (the committed suite's)
SPEC_KEYS = ("name", "table", "block_size", "axis", "profile", "scale", "static_scales", "static_zero_points",
             "scaling", "partial_scaling", "compute_dtype", "table_dtype", "dequant_table_dtype", "scale_dtype",
             "scale_min", "scale_min_rule", "store_guarded", "clamp", "rule", "midpoints", "tie", "distance_dtype",
             "nan", "zero_block", "double_quant", "input_dtypes", "numel_multiple", "dequant_flush", "bf16_upcast",
             "ftz", "rounding", "stochastic_bits")


def from_spec(spec: dict[str, Any]) -> LookupScheme:
    """The LookupScheme of a spec written by ``to_spec``."""
    spec = dict(spec)
    spec.pop("family", None)
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise unknown_name("lookup scheme field", unknown[0], SPEC_KEYS)
    spec["table"] = Table.from_spec(spec["table"])
    dq = spec.get("double_quant")
    spec["double_quant"] = None if dq is None else DoubleQuant.from_spec(dq)
    for k in ("static_scales", "static_zero_points", "input_dtypes", "dequant_flush"):
        if spec.get(k) is not None:
            spec[k] = tuple(spec[k])
    rules = LookupSchemeRules(**{k: spec.pop(k) for k in SCHEME_FIELDS if k in spec})
    return LookupScheme(**spec, rules=rules)


# ---------------------------------------------------------------------------------------------------------
# profiles (data) and builders (lut.md §6)
# ---------------------------------------------------------------------------------------------------------
_FIELDS = set(SPEC_KEYS) - {"name", "table", "profile", "double_quant"}
_DEFAULT_TABLES = {"nf4": "nf4", "af4": "af4", "fp4_bnb": "fp4_bnb", "dynamic8": "dynamic8"}

_DIGIT_TABLES = {("nf4", 4): "nf4_torchao"}  # NF4 entries as 4-digit literals (LookupRules.entry_digits)


def _resolve_table(name: str, table: object, rules: LookupRules) -> Table:
    if name == "lut":
        if table is None:
            raise QrefError("scheme 'lut' needs table=: a Table, a registered table name "
                            f"({', '.join(tables())}) or a sequence of float32 values")
        if isinstance(table, (Table, str)):
            return get_table(table)
        return Table.from_values("user", np.asarray(table))
    if table is not None:
        raise QrefError(f"scheme {name!r} has its own table; use qref.scheme('lut', table=...) for another one")
    if rules.entry_digits is not None and name == "nf4":
        return get_table(_DIGIT_TABLES[(name, rules.entry_digits)])
    return get_table(_DEFAULT_TABLES[name])


def lookup_scheme(
    name: str,
    *,
    profile: str | None = None,
    table: object = None,
    block_size: int | None = None,
    double_quant: bool | None = None,
    **options: Any,
) -> LookupScheme:
    """Build a lookup scheme (lut.md §6): ``qref.scheme("nf4", block_size=64, profile="bitsandbytes")``.

    name: "nf4", "af4", "fp4_bnb", "dynamic8", or "lut" with table= (a Table, a registered table name or
    float32 values). profile: None = "spec"; "bitsandbytes", "torchao", "openvino", "qwix". block_size: None
    = the profile's (64; bitsandbytes dynamic8: 4096). double_quant: None = the profile's default (torchao
    on, others off); True = the profile's double quantization. options: LookupScheme fields overriding the
    profile (scaling, tie, rule, nan, axis, ...). The profile's rules are ``LookupRules`` (qref.profiles.lookup).
    """
    if name not in SCHEME_NAMES:
        raise unknown_name("lookup scheme", name, SCHEME_NAMES)
    prof = get_profile(profile or "spec", "lookup")
    rules = rules_of(prof).for_scheme(name)
    tbl = _resolve_table(name, table, rules)
    bad = sorted(set(options) - _FIELDS)
    if bad:
        raise unknown_name("lookup scheme option", bad[0], sorted(_FIELDS),
                           hint="options are LookupScheme fields; see lut.md §3.1")
    geometry = {"block_size": rules.block_size, "axis": rules.axis, "scale": rules.scale}
    geometry.update({k: v for k, v in options.items() if k not in SCHEME_FIELDS})
    if block_size is not None:
        geometry["block_size"] = block_size
    if geometry.get("scale") == "static":
        geometry["block_size"] = None
    params = {k: v for k, v in options.items() if k in SCHEME_FIELDS}
    use_dq = rules.double_quant_default if double_quant is None else bool(double_quant)
    dq = None
    if use_dq:
        spec = rules.double_quant
        if spec is None:
            raise QrefError(f"profile {prof.name!r} has no double quantization; bitsandbytes and torchao have")
        inner = None
        if spec.kind == "lookup":
            assert spec.inner is not None
            inner = lookup_scheme(spec.inner, profile=prof.name, block_size=spec.block_size)
        dq = DoubleQuant(spec.kind, spec.block_size, inner, spec.compute)
        if rules.numel_multiple_blocks is not None and "numel_multiple" not in options:
            params["numel_multiple"] = int(geometry["block_size"]) * int(rules.numel_multiple_blocks)
    for key in ("static_scales", "static_zero_points"):
        if geometry.get(key) is not None:
            geometry[key] = tuple(geometry[key])
    return LookupScheme(name=name, table=tbl, profile=prof.name, double_quant=dq, **geometry,
                        rules=dataclasses.replace(rules.scheme, **params))


def lookup_scheme_from_table(
    values: object,
    storage: str,
    *,
    quantile_type: str = "float32",
    expressed_type: str = "float32",
    scales: float | tuple[float, ...] = 1.0,
    zero_points: float | tuple[float, ...] | None = None,
    axis: int | None = None,
    name: str = "quantile",
    profile: str = "spec",
) -> LookupScheme:
    """A static-scale lookup scheme for an MLIR quantile type (lut.md §7).

    ``!quant.uniform<!quant.quantile<ST:QT, {values}[, <min:max>]>:ET, scale[:zp]>`` (upstream) and Intel's
    ``!quant.quantile<ST:QT:ET[:axis], {values}:scale[:zp]>`` both mean: storage value v selects entry
    v - storage_min (storage: a qref format name; a narrowed integer range as "int8<-2:2>"); entries are the
    values rounded to QT (quantile_type: float32, float16 or bfloat16); dequantize = (entry - zp) * scale in
    ET (expressed_type); quantize = the nearest entry to x / scale + zp (computed in ET) under the profile's
    rule (spec: exact distance, ties to the even code). scales / zero_points: one per tensor, or one per index
    along axis.
    """
    vals = np.asarray(values, dtype=np.float64).ravel()
    check_choice("quantile type", quantile_type, tuple(fp.FLOAT_DTYPES))
    check_choice("expressed type", expressed_type, tuple(fp.FLOAT_DTYPES))
    fmt = get_format(storage)
    if isinstance(fmt, IntFormat) and fmt.bits > 16:
        raise QrefError("lookup codes are at most 16 bits wide")
    tbl = Table.from_values(name, fp.convert(vals, fp.float_dtype(quantile_type)).astype(np.float32), storage=fmt.name,
                            source="MLIR quantile type", derivation=f"values rounded to {quantile_type}")
    sc = tuple(float(s) for s in np.atleast_1d(np.asarray(scales, dtype=np.float64)))
    zp = None if zero_points is None else tuple(float(z) for z in np.atleast_1d(np.asarray(zero_points)))
    return lookup_scheme("lut", profile=profile, table=tbl, scale="static", static_scales=sc,
                         static_zero_points=zp, axis=axis, compute_dtype=expressed_type,
                         input_dtypes=("float64", "float32", "float16", "bfloat16"))


register_family("lookup", builder=lookup_scheme, from_spec=from_spec, names=SCHEME_NAMES, order=300)
