"""Lookup (quantile) schemes: NF4, AF4, bitsandbytes FP4, the 8-bit dynamic map, any table (spec: lut.md §3-7).

quantize(x): split x into blocks (row-major flattening, or along ``axis``), scale each block by its absmax
(or by static scales), decide the nearest table entry per element under the scheme's rule, and keep one code
per element (unpacked) with the per-block absmax in ``QArray.scales`` (float32). Optional double
quantization stores the block scales themselves quantized in ``QArray.meta["double_quant"]`` (a
``DoubleQuantized``). dequantize: entry[code] * scale (lut.md §4). The steps are reference.py's (and fast.py's,
the same results): functions of the rules, the table and the geometry; the methods here are entry points.

Everything a real system does differently is a field of the scheme's ``LookupSchemeRules`` (``rules``), set from
a ``Profile`` of family "lookup": ``spec`` (the default), ``bitsandbytes``, ``torchao``, ``openvino``, ``qwix``
(lut.md §6). The profiles are typed ``LookupRules`` records in qref/profiles/lookup.py (``profile.rules``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ...core import arith as fp
from ...core.encode import encode, stochastic_random_bits
from ...core.parallel import thread_limit
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
from . import fast, reference
from .decision import table_encode

__all__ = [
    "DoubleQuant",
    "DoubleQuantized",
    "LookupScheme",
    "from_spec",
    "lookup_scheme",
    "lookup_scheme_from_table",
]



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

    # ---- entry points: the reference (reference.py) and its fast path (fast.py) take the rules, the table and
    # the block geometry --------------------------------------------------------------------------------------
    @property
    def storage_format(self) -> Any:
        """The format of the stored codes (the table's storage: uint4 for NF4, uint8 for dynamic8)."""
        return self.table.storage_format

    @property
    def pad_code(self) -> int:
        """The code of +0.0 under this scheme's rule (bitsandbytes pads an odd tail with it)."""
        r = self.rules
        return int(table_encode(np.zeros(1, np.float32), self.table, rule=r.rule, midpoints=r.midpoints, tie=r.tie,
                                entries=reference.entries(r, self.table, "float32"))[0])

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
        if scale_offset is not None and (isinstance(scale_offset, (bool, np.bool_))
                                         or not isinstance(scale_offset, (int, float, np.integer, np.floating))):
            raise QrefError(f"scale_offset must be one real number (the mean of the block scales, lut.md §5.3), "
                            f"got {type(scale_offset).__name__} {scale_offset!r:.60}")
        r = self.rules
        arr, x32, cd = reference.check_input(r, x, self.name, self.profile)
        rbits = None
        if r.rounding != "deterministic":
            assert r.stochastic_bits is not None
            rbits = stochastic_random_bits(arr.shape, r.stochastic_bits, random_bits, seed).reshape(arr.shape)
        elif random_bits is not None or seed is not None:
            raise QrefError("random_bits= / seed= are for stochastic rounding; this scheme rounds "
                            "deterministically (build it with rounding='stochastic_a'|'stochastic_b'|"
                            "'stochastic_c' and stochastic_bits=N)")
        with np.errstate(all="ignore"):
            if self.scale == "static":
                assert self.static_scales is not None
                codes, unspec = reference.quantize_static(r, self.table, self.static_scales, self.static_zero_points,
                                                          self.axis, x32, cd, rbits)
                zp = None if self.static_zero_points is None else np.asarray(self.static_zero_points, np.float32)
                return QArray(codes=codes.astype(self.table.storage_format.code_dtype), scheme=self,
                              scales=np.asarray(self.static_scales, np.float32), zero_points=zp,
                              unspecified=unspec, axis=self.axis, meta={"input_dtype": arr.dtype.name})
            B = self.block_size
            assert B is not None
            fast_path = (not _reference and rbits is None and reference.layout_is_reshape(B, self.axis, arr.shape)
                         and self.table.size <= 0xFFFF)
            if fast_path:
                codes, unspec, stored, sshape = fast.quantize_absmax_fast(r, self.table, B, self.axis, x32, cd)
            else:
                codes, unspec, stored, sshape = reference.quantize_absmax(r, self.table, B, self.axis, x32, cd, rbits)
            stored = reference.store_scales(r, stored)
            meta: dict[str, Any] = {"input_dtype": arr.dtype.name}
            if self.double_quant is not None:
                meta["double_quant"] = _double_quantize(self.double_quant, stored, scale_offset, cd, not fast_path)
            scales = stored.reshape(sshape)
            if self.axis is not None:
                scales = np.moveaxis(scales, -1, normalize_axis(self.axis, arr.ndim))
            return QArray(codes=codes, scheme=self, scales=scales, unspecified=unspec, axis=self.axis, meta=meta)

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
        r = self.rules
        cd = r.compute_dtype
        if cd == "input":
            cd = q.meta.get("input_dtype", "float32")
            cd = "float32" if cd == "float64" else cd
        raw = np.asarray(q.codes)
        if self.scale == "static":
            assert self.static_scales is not None
            v = reference.dequantize_static(r, self.table, self.static_scales, self.static_zero_points, self.axis,
                                            raw, cd)
            return reference.dequantize_output(r, v, raw.shape, out_dt, self.block_size)
        B = self.block_size
        assert B is not None
        if (not _reference and raw.dtype in (np.dtype(np.uint8), np.dtype(np.uint16))
                and reference.layout_is_reshape(B, self.axis, raw.shape)):
            v = fast.dequantize_fast(r, self.table, B, np.ascontiguousarray(raw), self._per_block_scales(q, raw.ndim),
                                     cd)
            if out_dt == np.dtype(np.float32):
                return v
        else:
            v = reference.dequantize_blocks(r, self.table, B, self.axis, raw, self._per_block_scales(q, raw.ndim), cd)
        return reference.dequantize_output(r, v, raw.shape, out_dt, self.block_size)

    def _per_block_scales(self, q: QArray, ndim: int) -> np.ndarray:
        """The float32 block scales in block order: the double-quantized ones reconstructed (lut.md §5)."""
        dq = q.meta.get("double_quant")
        if dq is not None:
            return dq.dequantize()
        if self.axis is None:
            return np.asarray(q.scales, np.float32).reshape(-1)
        return np.moveaxis(np.asarray(q.scales, np.float32), normalize_axis(self.axis, ndim), -1).reshape(-1)

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
    if block_size is not None:  # a numpy integer is the integer it holds; LookupScheme checks the rest
        geometry["block_size"] = int(block_size) if isinstance(block_size, np.integer) else block_size
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
        b = geometry["block_size"]  # a bad one is LookupScheme's QrefError below
        if (rules.numel_multiple_blocks is not None and "numel_multiple" not in options
                and isinstance(b, int) and not isinstance(b, bool)):
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
