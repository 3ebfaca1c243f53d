"""MLIR ``quant`` dialect types: the records and the printer (spec: docs/spec/mlir-types.md); the parser is
``qref.interop.mlir.parser``.

``parse_type(text)`` reads ``!quant.uniform<...>`` (per layer, per axis, sub-channel, float storage, narrowed
ranges, quantile storage), ``!quant.quantile<...>`` (upstream LLVM form and the intel/npu-plugin-llvm forms with
scales in the type), ``!quant.any<...>`` and ``!quant.calibrated<...>``; ``format_type(obj)`` prints exactly what
upstream MLIR's printer prints, so ``format_type(parse_type(t))`` is MLIR's canonical form of ``t`` and
``parse_type(format_type(s)) == s``. Floats are printed like MLIR's printFloatValue (mlir-types.md §3): LLVM
APFloat::toString with 6 significant digits if that reads back bit-exactly, else the shortest-safe default form,
else the hexadecimal bit pattern.

Uniform types become ``qref.schemes.uniform.UniformScheme`` records with the ``mlir`` profile (what
``lower-quant-ops`` computes). Quantile types become ``QuantileType`` records defined here; they quantize by the
nearest table entry. QuantileType will be unified with the lookup-table family (qref/schemes/lookup.py) once that
family lands; the text forms and this module's printer/parser stay as they are.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Union

import numpy as np

from ...core.encode import encode
from ...core.exact import as_source_array
from ...errors import QrefError
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...schemes.base import QArray, Scheme
from ...schemes.uniform import UniformScheme, arithmetic_for, cast, round_fraction

__all__ = ["AnyType", "CalibratedType", "MlirParseError", "QuantileType", "format_float", "format_type"]

# MLIR float type spellings <-> qref format names
MLIR_FLOAT_NAMES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "tf32": "tfloat32",
    "f8E5M2": "float8_e5m2", "f8E4M3FN": "float8_e4m3fn", "f8E4M3": "float8_e4m3", "f8E3M4": "float8_e3m4",
    "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3FNUZ": "float8_e4m3fnuz", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
    "f6E2M3FN": "float6_e2m3fn", "f6E3M2FN": "float6_e3m2fn", "f4E2M1FN": "float4_e2m1fn",
    "f8E8M0FNU": "float8_e8m0fnu",
}
QREF_TO_MLIR = {v: k for k, v in MLIR_FLOAT_NAMES.items()}
UNSUPPORTED_FLOATS = ("f80", "f128")
# float types upstream accepts as !quant.uniform storage (QuantStorageTypeInterface)
UNIFORM_FLOAT_STORAGE = ("f8E5M2", "f8E4M3FN", "f4E2M1FN")
MAX_STORAGE_BITS = 32
MAX_NESTING = 32      # nested '{' of a sub-channel scale tensor (its rank)
MAX_TEXT = 1 << 24    # characters of one type
_INT_TYPE = re.compile(r"^(si|ui|i)([0-9]+)$")
_U_KEYWORD = re.compile(r"^u([0-9]+)$")
_DOUBLE = get_format("float64")
assert isinstance(_DOUBLE, FloatFormat)


class MlirParseError(QrefError):
    """A malformed quant type: names the position (1-based line:column, 0-based offset) and what was expected."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        self.text, self.pos, self.line, self.column = text, pos, line, col
        lines = text.split("\n")
        src = lines[line - 1] if line <= len(lines) else ""
        super().__init__(f"{line}:{col}: {message}\n  {src}\n  {' ' * (col - 1)}^")


# ---------------------------------------------------------------------------------------------------------
# float printing: MLIR printFloatValue = APFloat::toString (mlir-types.md §3)
# ---------------------------------------------------------------------------------------------------------
def _apfloat_to_string(value: float, precision: int, fmt_precision: int, max_padding: int,
                       truncate_zero: bool) -> str:
    """LLVM APFloat::toString(FormatPrecision, FormatMaxPadding, TruncateZero) for a finite value of a format
    with ``precision`` significand bits (mlir-types.md §3.1)."""
    neg = math.copysign(1.0, value) < 0
    out = "-" if neg else ""
    if value == 0:
        if max_padding:
            return out + "0"
        if truncate_zero:
            return out + "0.0E+0"
        return out + "0.0" + "0" * max(fmt_precision - 1, 0) + "e+00"
    fr = Fraction(abs(value))
    sig, den = fr.numerator, fr.denominator
    exp = -(den.bit_length() - 1)
    if not fmt_precision:
        fmt_precision = 2 + precision * 59 // 196
    tz = (sig & -sig).bit_length() - 1
    sig >>= tz
    exp += tz
    if exp >= 0:
        n, e10 = sig << exp, 0
    else:
        n, e10 = sig * 5 ** (-exp), exp
    # AdjustToPrecision on the integer: drop a conservative number of decimal digits by truncation
    bits = n.bit_length()
    required = (fmt_precision * 196 + 58) // 59
    if bits > required:
        tens = (bits - required) * 59 // 196
        if tens:
            e10 += tens
            n //= 10**tens
    digits = str(n)
    stripped = digits.rstrip("0")
    e10 += len(digits) - len(stripped)
    d = list(stripped)  # most significant first
    # AdjustToPrecision on the digit buffer: round half up at fmt_precision digits
    nd = len(d)
    if nd > fmt_precision:
        keep = d[:fmt_precision]
        if d[fmt_precision] < "5":
            dropped = nd - fmt_precision
            while keep and keep[-1] == "0":
                keep.pop()
                dropped += 1
            e10 += dropped
            d = keep
        else:
            i = fmt_precision - 1
            dropped = nd - fmt_precision
            while i >= 0 and keep[i] == "9":
                keep.pop()
                dropped += 1
                i -= 1
            if i < 0:
                e10 += nd
                d = ["1"]
            else:
                keep[i] = chr(ord(keep[i]) + 1)
                e10 += dropped
                d = keep
    nd = len(d)
    if not max_padding:
        scientific = True
    elif e10 >= 0:
        scientific = e10 > max_padding or nd + e10 > fmt_precision
    else:
        msd = e10 + nd - 1
        scientific = False if msd >= 0 else (-msd > max_padding)
    if scientific:
        e10 += nd - 1
        s = d[0] + "."
        s += "0" if (nd == 1 and truncate_zero) else "".join(d[1:])
        if not truncate_zero and fmt_precision > nd - 1:
            s += "0" * (fmt_precision - nd + 1)
        s += "E" if truncate_zero else "e"
        s += "+" if e10 >= 0 else "-"
        ed = str(abs(e10))
        if not truncate_zero and len(ed) < 2:
            ed = "0" + ed
        return out + s + ed
    if e10 >= 0:
        return out + "".join(d) + "0" * e10
    whole = e10 + nd
    if whole > 0:
        return out + "".join(d[:whole]) + "." + "".join(d[whole:])
    return out + "0." + "0" * (-whole) + "".join(d)


def _bits_of(value: float, fmt: FloatFormat) -> int:
    if fmt.name == "float64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    return int(encode(np.asarray(value, dtype=np.float64), fmt, rounding="nearest_even", overflow="inf"))


def _reads_back(s: str, value: float, fmt: FloatFormat) -> bool:
    if fmt.name == "float64":
        v = float(s)
    else:
        v = round_fraction(Fraction(s), fmt)
        if v == 0:
            v = math.copysign(0.0, -1.0 if s.startswith("-") else 1.0)
    return _bits_of(v, fmt) == _bits_of(value, fmt)


def format_float(value: float, fmt: str | FloatFormat = "float64") -> str:
    """MLIR's printFloatValue for ``value`` (a value of ``fmt``): 6-digit scientific if it reads back
    bit-exactly, else APFloat's default form if it has a '.', else the hexadecimal bit pattern."""
    f = get_format(fmt)
    assert isinstance(f, FloatFormat)
    if math.isfinite(value):
        p = f.mantissa_bits + 1
        s = _apfloat_to_string(value, p, 6, 0, False)
        if _reads_back(s, value, f):
            return s
        s = _apfloat_to_string(value, p, 0, 3, True)
        if "." in s:
            return s
    return f"0x{_bits_of(value, f):X}"


# ---------------------------------------------------------------------------------------------------------
# records for the non-uniform quant types
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnyType:
    """``!quant.any<storage[<min:max>][:expressed]>``: storage only, no parameters (nothing to quantize)."""

    storage: Format
    expressed: FloatFormat | None = None
    storage_range: tuple[int, int] | None = None
    type_spelling: str | None = None


@dataclass(frozen=True)
class CalibratedType:
    """``!quant.calibrated<expressed<min:max>>``: a calibrated range (doubles as parsed)."""

    expressed: FloatFormat
    min: float
    max: float


@dataclass(frozen=True)
class QuantileType(Scheme):
    """A quantile (lookup-table) quant type (mlir-types.md §2.3); a frozen record.

    storage: integer or float storage; lut: one float64 value per storage value lo..hi, exactly as parsed
    (``lut[code - lo]``); quantile_type: the type of the LUT values (None in the intel legacy form);
    storage_range: (lo, hi) when written (upstream prints it iff written; intel iff not default);
    expressed / scales / zero_points / scale_shape / axis / block_size: the scaling of the intel forms and of
    ``!quant.uniform<!quant.quantile<...>:f32, ...>`` (None/empty for a bare upstream quantile type).
    form: "upstream", "upstream_uniform" (wrapped in !quant.uniform), "intel" (storage:quantile:expressed)
    or "intel_legacy" (storage:expressed).

    quantize (qref's reading; neither LLVM nor the fork lowers these types): value(code) = (lut[code - lo] - z)
    * s; x goes to the code whose value is nearest, ties to the lower code; NaN is unspecified.
    It will be unified with the lookup-table schemes when that lands.
    """

    storage: Format
    lut: tuple[float, ...]
    quantile_type: Format | None = None
    storage_range: tuple[int, int] | None = None
    expressed: FloatFormat | None = None
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    scale_shape: tuple[int, ...] = ()
    axis: int | None = None
    block_size: tuple[tuple[int, int], ...] | None = None
    form: str = "upstream"
    type_spelling: str | None = None
    profile: str | None = None
    family = "lookup"

    @property
    def name(self) -> str:
        return f"quantile<{self.storage.name}>"

    @property
    def bounds(self) -> tuple[int, int]:
        return self.storage_range if self.storage_range is not None else _default_range(self.storage)

    def _params(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point of every element (1 and 0 for a bare quantile type)."""
        if not self.scales:
            return np.ones(shape), np.zeros(shape, dtype=np.int64)
        helper = UniformScheme(storage=get_format("int32"), expressed=self.expressed or get_format("float32"),
                               scales=self.scales, zero_points=self.zero_points, scale_shape=self.scale_shape,
                               axis=self.axis, block_size=self.block_size, profile=None,
                               arithmetic=arithmetic_for(None, zero_point_range="wrap"))
        S, Z = helper.expand(shape)
        return np.broadcast_to(S, shape).astype(np.float64), np.broadcast_to(Z, shape).astype(np.int64)

    def table(self) -> np.ndarray:
        """The LUT as float64 (index = code - lo)."""
        return np.array(self.lut, dtype=np.float64)

    def quantize(self, x: object, **kwargs: Any) -> QArray:
        if kwargs:
            raise TypeError(f"QuantileType.quantize takes no options, got {sorted(kwargs)}")
        if not isinstance(self.storage, IntFormat):
            raise QrefError("quantize is defined for integer quantile storage only")
        arr = as_source_array(x).astype(np.float64)
        S, Z = self._params(arr.shape)
        lo, _ = self.bounds
        flat = arr.reshape(-1)
        vals = (self.table()[None, :] - Z.reshape(-1, 1)) * S.reshape(-1, 1)
        dist = np.abs(flat[:, None] - vals)
        nan = np.isnan(flat)
        idx = np.argmin(np.where(np.isnan(dist), np.inf, dist), axis=1)
        codes = np.where(nan, 0, idx) + lo
        return QArray(codes=codes.reshape(arr.shape).astype(self.storage.storage_dtype), scheme=self,
                      scales=np.array(self.scales).reshape(self.scale_shape) if self.scales else None,
                      zero_points=np.array(self.zero_points).reshape(self.scale_shape) if self.scales else None,
                      unspecified=nan.reshape(arr.shape), axis=self.axis)

    def dequantize(self, q: QArray, dtype: object = np.float64) -> np.ndarray:
        lo, _ = self.bounds
        codes = np.asarray(q.codes).astype(np.int64)
        S, Z = self._params(codes.shape)
        v = (self.table()[codes - lo] - Z) * S
        return cast(v, np.dtype(dtype))

    def to_spec(self) -> dict[str, Any]:
        return {"family": "mlir_quantile", "type": format_type(self)}


def _default_range(fmt: Format) -> tuple[int, int]:
    if isinstance(fmt, IntFormat):
        return fmt.full_range
    m = int(fmt.max_value)
    return (-m if fmt.signed else 0), m


# ---------------------------------------------------------------------------------------------------------
# printer
# ---------------------------------------------------------------------------------------------------------
def _float_type_name(fmt: Format) -> str:
    if isinstance(fmt, IntFormat):
        if fmt.narrowed:
            raise QrefError(f"{fmt.name} is not an MLIR type")
        return f"{'i' if fmt.signed else 'ui'}{fmt.bits}"
    if fmt.name not in QREF_TO_MLIR:
        raise QrefError(f"{fmt.name} has no MLIR float type")
    return QREF_TO_MLIR[fmt.name]


def _storage_text(fmt: Format, spelling: str | None, frange: tuple[int, int] | None, *, print_default: bool
                  ) -> str:
    if isinstance(fmt, IntFormat):
        if fmt.bits > MAX_STORAGE_BITS:
            raise QrefError(f"MLIR quant storage has at most 32 bits, got {fmt.name}")
        name = spelling or f"{'i' if fmt.signed else 'u'}{fmt.bits}"
        lo, hi = fmt.lo, fmt.hi
        if frange is not None:
            lo, hi = frange
        rng = (lo, hi) if (print_default or (lo, hi) != fmt.full_range) else None
    else:
        name = spelling or _float_type_name(fmt)
        dflt = _default_range(fmt)
        r = frange if frange is not None else dflt
        rng = r if (print_default or r != dflt) else None
    return name + (f"<{rng[0]}:{rng[1]}>" if rng else "")


def _params_text(scales: tuple[float, ...], zps: tuple[int, ...], shape: tuple[int, ...], axis: int | None,
                 blocks: tuple[tuple[int, int], ...] | None, expressed: FloatFormat) -> tuple[str, str]:
    """(dimension suffix, parameters) as MLIR prints them."""
    def one(s: float, z: int, fmt: FloatFormat) -> str:
        return format_float(s, fmt) + (f":{z}" if z != 0 else "")

    if blocks is None and axis is None:
        return "", one(scales[0], zps[0], _DOUBLE)
    if axis is not None:
        return f":{axis}", "{" + ",".join(one(s, z, _DOUBLE) for s, z in zip(scales, zps)) + "}"
    suffix = ":{" + ", ".join(f"{a}:{b}" for a, b in blocks or ()) + "}"
    items = [one(round_fraction(Fraction(s), expressed), z, expressed) for s, z in zip(scales, zps)]

    def nest(level: int, start: int) -> tuple[str, int]:
        n = shape[level]
        if level == len(shape) - 1:
            return "{" + ", ".join(items[start:start + n]) + "}", start + n
        parts = []
        for _ in range(n):
            s, start = nest(level + 1, start)
            parts.append(s)
        return "{" + ", ".join(parts) + "}", start

    return suffix, nest(0, 0)[0]


def format_type(obj: UniformScheme | QuantileType | AnyType | CalibratedType) -> str:
    """MLIR's printed form of a quant type (mlir-types.md §3)."""
    if isinstance(obj, UniformScheme):
        if obj.granularity == "blocked" and not obj.scale_shape:
            raise QrefError("sub-channel scales need a rank")
        st = _storage_text(obj.storage, obj.type_spelling, obj.storage_range, print_default=False)
        suffix, params = _params_text(obj.scales, obj.zero_points, obj.scale_shape, obj.axis, obj.block_size,
                                      obj.expressed)
        return f"!quant.uniform<{st}:{_float_type_name(obj.expressed)}{suffix}, {params}>"
    if isinstance(obj, QuantileType):
        lut = ",".join(format_float(v, _DOUBLE) for v in obj.lut)
        if obj.form in ("upstream", "upstream_uniform"):
            st = obj.type_spelling or _float_type_name(obj.storage)
            assert obj.quantile_type is not None
            rng = f", <{obj.storage_range[0]}:{obj.storage_range[1]}>" if obj.storage_range else ""
            inner = f"!quant.quantile<{st}:{_float_type_name(obj.quantile_type)}, {{{lut}}}{rng}>"
            if obj.form == "upstream":
                return inner
            assert obj.expressed is not None
            suffix, params = _params_text(obj.scales, obj.zero_points, obj.scale_shape, obj.axis,
                                          obj.block_size, obj.expressed)
            return f"!quant.uniform<{inner}:{_float_type_name(obj.expressed)}{suffix}, {params}>"
        assert obj.expressed is not None
        st = _storage_text(obj.storage, obj.type_spelling, obj.storage_range, print_default=False)
        qt = "" if obj.form == "intel_legacy" else ":" + _float_type_name(obj.quantile_type)  # type: ignore[arg-type]
        ax = "" if obj.axis is None else f":{obj.axis}"
        if obj.axis is None:
            params = format_float(obj.scales[0]) + (f":{obj.zero_points[0]}" if obj.zero_points[0] else "")
        else:
            params = "{" + ",".join(format_float(s) + (f":{z}" if z else "")
                                    for s, z in zip(obj.scales, obj.zero_points)) + "}"
        return f"!quant.quantile<{st}{qt}:{_float_type_name(obj.expressed)}{ax}, {{{lut}}}:{params}>"
    if isinstance(obj, AnyType):
        st = _storage_text(obj.storage, obj.type_spelling, obj.storage_range, print_default=False)
        ex = "" if obj.expressed is None else ":" + _float_type_name(obj.expressed)
        return f"!quant.any<{st}{ex}>"
    if isinstance(obj, CalibratedType):
        return (f"!quant.calibrated<{_float_type_name(obj.expressed)}<{format_float(obj.min)}:"
                f"{format_float(obj.max)}>>")
    raise QrefError(f"format_type prints quant types (UniformScheme, QuantileType, AnyType, CalibratedType), got "
                    f"{type(obj).__name__}")


QuantType = Union[UniformScheme, QuantileType, AnyType, CalibratedType]  # noqa: UP007 (a runtime alias)
