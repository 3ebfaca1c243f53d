"""Element formats as data: one frozen record per format, everything else derived (spec: elements.md §1).

A ``FloatFormat`` is a sign/exponent/mantissa encoding with an explicit special-value style; an ``IntFormat``
is a two's-complement or unsigned integer storage type, optionally with a narrowed range (MLIR ``i8<-127:127>``).
The registry uses ml_dtypes names (``float8_e4m3fn``) with MLIR names as aliases (``f8E4M3FN``); the IEEE P3109
family ``binary{K}p{P}{s|u}{e|f}`` and the generic names ``float{K}_e{E}m{M}[b{bias}][fn|fnuz|fnu]`` resolve on
demand.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Literal, Union

import numpy as np

from ..errors import QrefError, check_choice, unknown_name

NanEncoding = Literal["ieee", "all_ones", "negative_zero", "none"]
InfEncoding = Literal["ieee", "top", "none"]
Overflow = Literal["saturate", "saturate_propagate", "inf", "nan", "wrap"]

NAN_ENCODINGS = ("ieee", "all_ones", "negative_zero", "none")
# Systems that define a format under its own type name (elements.md §1): numpy dtypes, ml_dtypes types, MLIR
# builtin types, ONNX TensorProto data types. A record lists the ones that define it (``ecosystems``).
ECOSYSTEMS = ("numpy", "ml_dtypes", "mlir", "onnx")
INF_ENCODINGS = ("ieee", "top", "none")


def _code_dtype(bits: int) -> type[np.unsignedinteger]:
    if bits <= 8:
        return np.uint8
    if bits <= 16:
        return np.uint16
    if bits <= 32:
        return np.uint32
    return np.uint64


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point element format (spec: elements.md §1.1).

    value(code) = (-1)^s * 2^(e - bias) * (1 + f / 2^M)   for exponent field e >= 1 (or e >= 0 when
                                                          ``subnormals`` is False)
                = (-1)^s * 2^(1 - bias) * (f / 2^M)       for e == 0 when ``subnormals`` is True
    Special codes (``nan``, ``inf``) override this formula:
      nan="ieee": exponent field all ones and f != 0; "all_ones": magnitude bits all ones;
      "negative_zero": the code 1000...0 (the format then has a single, unsigned zero); "none": no NaN.
      inf="ieee": exponent field all ones and f == 0; "top": the largest magnitude that is not NaN; "none".
    ``zero=False`` (E8M0) means the all-zero magnitude is 2^-bias, not zero; it requires ``subnormals=False``.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    signed: bool = True
    subnormals: bool = True
    zero: bool = True
    nan: NanEncoding = "ieee"
    inf: InfEncoding = "ieee"
    aliases: tuple[str, ...] = ()
    source: str = field(default="", compare=False)
    ecosystems: tuple[str, ...] = field(default=(), compare=False, repr=False)
    kind: Literal["float"] = field(default="float", init=False)

    def __post_init__(self) -> None:
        E, M = self.exponent_bits, self.mantissa_bits
        where = f"format {self.name!r}"
        if not isinstance(E, int) or not isinstance(M, int) or E < 1 or M < 0:
            raise QrefError(f"{where}: need exponent_bits >= 1 and mantissa_bits >= 0, got E={E}, M={M}")
        if self.bits > 64 or (self.bits > 32 and self.name != "float64"):
            raise QrefError(f"{where}: at most 32 bits are supported (got {self.bits})")
        if self.nan not in NAN_ENCODINGS:
            raise unknown_name("NaN encoding", self.nan, NAN_ENCODINGS)
        if self.inf not in INF_ENCODINGS:
            raise unknown_name("Inf encoding", self.inf, INF_ENCODINGS)
        if (self.nan == "ieee") != (self.inf == "ieee"):
            raise QrefError(f"{where}: nan='ieee' and inf='ieee' go together (IEEE 754 reserves the top binade)")
        if self.nan == "ieee" and M < 1:
            raise QrefError(f"{where}: IEEE-style NaN needs at least one mantissa bit")
        if self.nan == "negative_zero" and not self.signed:
            raise QrefError(f"{where}: nan='negative_zero' needs a signed format")
        if not self.zero and self.subnormals:
            raise QrefError(f"{where}: a format without zero must set subnormals=False (like E8M0)")
        if self.zero and not self.subnormals:
            raise QrefError(
                f"{where}: a format with zero and without subnormals would have a gap at the bottom; "
                "keep subnormals=True and use the policy subnormals='flush' to flush results"
            )
        if self.max_finite_code <= 0:
            raise QrefError(f"{where}: no positive finite value is left after the special codes")

    # ---- layout -------------------------------------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Total width K = sign + exponent + mantissa bits."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def code_dtype(self) -> type[np.unsignedinteger]:
        """Narrowest unsigned numpy type holding a code (uint8 for <= 8 bits, then uint16/32/64)."""
        return _code_dtype(self.bits)

    @property
    def sign_mask(self) -> int:
        return (1 << (self.bits - 1)) if self.signed else 0

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.exponent_bits + self.mantissa_bits)) - 1

    @property
    def qmin(self) -> int:
        """Exponent of the smallest quantum: value = n * 2^q with q >= qmin (elements.md §2.2)."""
        return (1 - self.bias if self.subnormals else -self.bias) - self.mantissa_bits

    @property
    def code_offset(self) -> int:
        """magnitude code = (q - qmin) * 2^M + n - code_offset (0 with subnormals, 2^M without)."""
        return 0 if self.subnormals else 1 << self.mantissa_bits

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.zero and self.nan != "negative_zero"

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    @property
    def has_inf(self) -> bool:
        return self.inf != "none"

    @property
    def nan_has_sign(self) -> bool:
        """True when a NaN code exists for each sign (the NaN keeps the input's sign by default)."""
        return self.signed and self.nan in ("ieee", "all_ones")

    # ---- special codes ------------------------------------------------------------------------------------
    @property
    def _top_exponent_code(self) -> int:
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def nan_code(self) -> int | None:
        """Canonical positive NaN code (IEEE: quiet bit set), or None."""
        if self.nan == "ieee":
            return self._top_exponent_code | (1 << (self.mantissa_bits - 1))
        if self.nan == "all_ones":
            return self.magnitude_mask
        if self.nan == "negative_zero":
            return self.sign_mask
        return None

    @property
    def inf_code(self) -> int | None:
        """Code of +Inf, or None."""
        if self.inf == "ieee":
            return self._top_exponent_code
        if self.inf == "top":
            return self.magnitude_mask - (1 if self.nan == "all_ones" else 0)
        return None

    @property
    def neg_inf_code(self) -> int | None:
        """Code of -Inf, or None (unsigned formats have no -Inf)."""
        if self.inf_code is None or not self.signed:
            return None
        return self.sign_mask | self.inf_code

    @property
    def max_finite_code(self) -> int:
        """Largest magnitude code that encodes a finite value."""
        if self.nan == "ieee":
            return self._top_exponent_code - 1
        top = self.magnitude_mask
        if self.nan == "all_ones":
            top -= 1
        if self.inf == "top":
            top -= 1
        return top

    @property
    def default_overflow(self) -> Overflow:
        """Ecosystem default (= ml_dtypes): 'inf' with Inf, else 'nan' with NaN, else 'saturate'."""
        if self.has_inf:
            return "inf"
        if self.has_nan:
            return "nan"
        return "saturate"

    # ---- exact values -------------------------------------------------------------------------------------
    def magnitude_parts(self, mag: int) -> tuple[int, int]:
        """(sig, exp) with |value| = sig * 2^exp for a finite magnitude code."""
        M = self.mantissa_bits
        e, f = mag >> M, mag & ((1 << M) - 1)
        if self.subnormals and e == 0:
            return f, self.qmin
        return (1 << M) | f, e - self.bias - M

    def exact_value(self, code: int) -> Fraction | float:
        """Exact value of ``code`` as a Fraction; float('nan') / +-float('inf') for specials."""
        code = int(code)
        if not 0 <= code < (1 << self.bits):
            raise QrefError(f"code {code} is out of range for {self.name} ({self.bits} bits)")
        neg = bool(code & self.sign_mask)
        mag = code & self.magnitude_mask
        if self.is_nan_code(code):
            return float("nan")
        if self.inf_code is not None and mag == self.inf_code:
            return float("-inf") if neg else float("inf")
        sig, exp = self.magnitude_parts(mag)
        v = Fraction(sig) * (Fraction(2) ** exp)
        return -v if neg else v

    def is_nan_code(self, code: int) -> bool:
        mag = code & self.magnitude_mask
        if self.nan == "ieee":
            return (mag & self._top_exponent_code) == self._top_exponent_code and mag != self._top_exponent_code
        if self.nan == "all_ones":
            return mag == self.magnitude_mask
        if self.nan == "negative_zero":
            return code == self.sign_mask
        return False

    @cached_property
    def max_value(self) -> Fraction:
        sig, exp = self.magnitude_parts(self.max_finite_code)
        return Fraction(sig) * Fraction(2) ** exp

    @cached_property
    def min_value(self) -> Fraction:
        """Smallest positive value (min subnormal, or 2^-bias without subnormals)."""
        sig, exp = self.magnitude_parts(1 if self.zero else 0)
        return Fraction(sig) * Fraction(2) ** exp

    @cached_property
    def min_normal(self) -> Fraction:
        e = 1 if self.subnormals else 0
        return Fraction(2) ** (e - self.bias)

    @property
    def emax(self) -> int:
        """Unbiased exponent floor(log2(max finite value))."""
        sig, exp = self.magnitude_parts(self.max_finite_code)
        return exp + sig.bit_length() - 1

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        return (1 if self.subnormals else 0) - self.bias

    @property
    def precision(self) -> int:
        """P = mantissa bits + 1 (P3109's precision)."""
        return self.mantissa_bits + 1

    @cached_property
    def values(self) -> np.ndarray:
        """float64 value of every code (index = code), for formats of at most 16 bits; read-only.

        Values outside float64's range appear rounded to nearest even (inf / 0); use ``exact_value``.
        """
        if self.bits > 16:
            raise QrefError(f"{self.name}: value tables exist for formats of at most 16 bits")
        codes = np.arange(1 << self.bits, dtype=np.int64)
        mag = codes & self.magnitude_mask
        parts = np.array([self.magnitude_parts(m) for m in range(self.magnitude_mask + 1)], dtype=np.int64)
        with np.errstate(over="ignore", under="ignore"):  # beyond float64: inf / 0, rounded to nearest even
            v = np.ldexp(parts[mag, 0].astype(np.float64), parts[mag, 1])  # sig < 2^17 exact: one rounding
        if self.zero:
            v[mag == 0] = 0.0
        if self.inf_code is not None:
            v[mag == self.inf_code] = np.inf
        v[np.array([self.is_nan_code(int(c)) for c in codes])] = np.nan
        v = np.where((codes & self.sign_mask) != 0, -v, v)
        v.setflags(write=False)
        return v

    def classify(self, code: int) -> str:
        """One of 'nan', 'inf', 'zero', 'subnormal', 'normal'."""
        code = int(code)
        mag = code & self.magnitude_mask
        if self.is_nan_code(code):
            return "nan"
        if self.inf_code is not None and mag == self.inf_code:
            return "inf"
        if self.zero and mag == 0:
            return "zero"
        if self.subnormals and (mag >> self.mantissa_bits) == 0:
            return "subnormal"
        return "normal"

    def __repr__(self) -> str:
        return (
            f"FloatFormat({self.name!r}, E={self.exponent_bits}, M={self.mantissa_bits}, bias={self.bias}, "
            f"signed={self.signed}, nan={self.nan!r}, inf={self.inf!r}"
            + (", subnormals=False" if not self.subnormals else "")
            + (", zero=False" if not self.zero else "")
            + ")"
        )


@dataclass(frozen=True)
class IntFormat:
    """Integer storage: two's complement (``signed``) or unsigned ``bits``-bit integers (spec: elements.md §1.3).

    ``min_value``/``max_value`` narrow the range (MLIR ``i8<-127:127>``); None means the full range.
    Codes are the storage bit patterns as unsigned integers: code = value mod 2^bits.
    """

    name: str
    bits: int
    signed: bool
    min_value: int | None = None
    max_value: int | None = None
    aliases: tuple[str, ...] = ()
    source: str = field(default="", compare=False)
    ecosystems: tuple[str, ...] = field(default=(), compare=False, repr=False)
    kind: Literal["int"] = field(default="int", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.bits, int) or not 1 <= self.bits <= 32:
            raise QrefError(f"integer format {self.name!r}: bits must be in 1..32, got {self.bits!r}")
        lo, hi = self.full_range
        if not lo <= self.lo <= self.hi <= hi:
            raise QrefError(
                f"integer format {self.name!r}: narrowed range [{self.lo}, {self.hi}] is outside the storage "
                f"range [{lo}, {hi}] or empty"
            )

    @property
    def full_range(self) -> tuple[int, int]:
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    @property
    def lo(self) -> int:
        return self.full_range[0] if self.min_value is None else int(self.min_value)

    @property
    def hi(self) -> int:
        return self.full_range[1] if self.max_value is None else int(self.max_value)

    @property
    def narrowed(self) -> bool:
        return (self.lo, self.hi) != self.full_range

    @property
    def code_dtype(self) -> type[np.unsignedinteger]:
        return _code_dtype(self.bits)

    @property
    def storage_dtype(self) -> np.dtype:
        """Narrowest numpy integer type holding every value (int8 for int1..int8, uint8 for uint1..uint8...)."""
        for b in (8, 16, 32, 64):
            if self.bits <= b:
                return np.dtype(f"{'int' if self.signed else 'uint'}{b}")
        raise AssertionError

    @property
    def default_overflow(self) -> Overflow:
        return "saturate"

    def exact_value(self, code: int) -> Fraction:
        code = int(code)
        if not 0 <= code < (1 << self.bits):
            raise QrefError(f"code {code} is out of range for {self.name} ({self.bits} bits)")
        if self.signed and code >= (1 << (self.bits - 1)):
            code -= 1 << self.bits
        return Fraction(code)

    @cached_property
    def values(self) -> np.ndarray:
        if self.bits > 16:
            raise QrefError(f"{self.name}: value tables exist for formats of at most 16 bits")
        c = np.arange(1 << self.bits, dtype=np.int64)
        if self.signed:
            c = np.where(c >= (1 << (self.bits - 1)), c - (1 << self.bits), c)
        v = c.astype(np.float64)
        v.setflags(write=False)
        return v

    def classify(self, code: int) -> str:
        v = self.exact_value(code)
        if v == 0:
            return "zero"
        return "in_range" if self.lo <= v <= self.hi else "outside_narrowed_range"


Format = Union[FloatFormat, IntFormat]  # noqa: UP007 (a runtime alias, valid on Python 3.10)

# ---- registry ---------------------------------------------------------------------------------------------
_OCP_FP8 = "OCP 8-bit Floating Point Specification (OFP8) v1.0"
_OCP_MX = "OCP Microscaling Formats (MX) v1.0 §5"
_ML_DTYPES = "ml_dtypes 0.6.0 / LLVM APFloat"
_GAUDI = ("Intel Gaudi 2 FP8 (Habana SynapseAI / Intel Gaudi software documentation: E4M3 with exponent bias 3, 7, "
          "11 or 15, IEEE-style Inf and NaN in the top binade; max 240 at bias 7)")


# The float types each ecosystem defines (numpy dtypes, ml_dtypes 0.7 types, MLIR builtin float types, ONNX
# TensorProto data types); integers by width in _int_ecosystems. Records carry the result as ``ecosystems``.
_FLOAT_ECOSYSTEMS = {
    "numpy": ("float16", "float32", "float64"),
    "ml_dtypes": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                  "float8_e4m3", "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu",
                  "bfloat16", "float8_e5m3fnu"),
    "mlir": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
             "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "float16", "bfloat16",
             "tfloat32", "float32", "float64"),
    "onnx": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float6_e2m3fn", "float6_e3m2fn",
             "float4_e2m1fn", "float8_e8m0fnu", "float16", "bfloat16", "float32", "float64"),
}


def _int_ecosystems(bits: int) -> tuple[str, ...]:
    """numpy: 8/16/32 bits; ml_dtypes: 1/2/4 bits; MLIR: any width (iN); ONNX: 2/4/8/16/32 bits."""
    return tuple(e for e, widths in (("numpy", (8, 16, 32)), ("ml_dtypes", (1, 2, 4)), ("mlir", (bits,)),
                                     ("onnx", (2, 4, 8, 16, 32))) if bits in widths)


def _with_ecosystems(fmt: Format) -> Format:
    if isinstance(fmt, IntFormat):
        return replace(fmt, ecosystems=_int_ecosystems(fmt.bits))
    return replace(fmt, ecosystems=tuple(e for e, names in _FLOAT_ECOSYSTEMS.items() if fmt.name in names))


_BUILTIN: tuple[Format, ...] = (
    FloatFormat("float8_e4m3fn", 4, 3, 7, nan="all_ones", inf="none", aliases=("f8E4M3FN", "e4m3fn"),
                source=_OCP_FP8 + " (E4M3)"),
    FloatFormat("float8_e5m2", 5, 2, 15, aliases=("f8E5M2", "e5m2"), source=_OCP_FP8 + " (E5M2)"),
    FloatFormat("float8_e4m3fnuz", 4, 3, 8, nan="negative_zero", inf="none", aliases=("f8E4M3FNUZ",),
                source=_ML_DTYPES + "; = P3109 binary8p4sf"),
    FloatFormat("float8_e5m2fnuz", 5, 2, 16, nan="negative_zero", inf="none", aliases=("f8E5M2FNUZ",),
                source=_ML_DTYPES + "; = P3109 binary8p3sf"),
    FloatFormat("float8_e4m3b11fnuz", 4, 3, 11, nan="negative_zero", inf="none", aliases=("f8E4M3B11FNUZ",),
                source=_ML_DTYPES),
    FloatFormat("float8_e4m3", 4, 3, 7, aliases=("f8E4M3",), source="IEEE 754-style E4M3; " + _ML_DTYPES),
    FloatFormat("float8_e3m4", 3, 4, 3, aliases=("f8E3M4",), source="IEEE 754-style E3M4; " + _ML_DTYPES),
    FloatFormat("float6_e2m3fn", 2, 3, 1, nan="none", inf="none", aliases=("f6E2M3FN", "fp6_e2m3", "e2m3"),
                source=_OCP_MX + " (FP6 E2M3)"),
    FloatFormat("float6_e3m2fn", 3, 2, 3, nan="none", inf="none", aliases=("f6E3M2FN", "fp6_e3m2", "e3m2"),
                source=_OCP_MX + " (FP6 E3M2)"),
    FloatFormat("float4_e2m1fn", 2, 1, 1, nan="none", inf="none", aliases=("f4E2M1FN", "fp4_e2m1", "e2m1"),
                source=_OCP_MX + " (FP4 E2M1)"),
    FloatFormat("float8_e8m0fnu", 8, 0, 127, signed=False, subnormals=False, zero=False, nan="all_ones",
                inf="none", aliases=("f8E8M0FNU", "e8m0"), source=_OCP_MX + ".4.1 (E8M0 scale)"),
    # unsigned scale formats: codes are the low 7 / 8 bits (UE4M3: the byte's bit 7, a sign bit, is zero)
    FloatFormat("float7_e4m3fnu", 4, 3, 7, signed=False, nan="all_ones", inf="none", aliases=("ue4m3",),
                source="NVIDIA PTX ISA 8.7+ §9.7.16 (block-scaled mma/tcgen05: .ue4m3 scale factors of NVFP4, the "
                       "E4M3 encoding with sign bit 0); OCP OFP8 v1.0 E4M3 value rules"),
    FloatFormat("float8_e5m3fnu", 5, 3, 15, signed=False, nan="all_ones", inf="none", aliases=("ue5m3",),
                source="NVIDIA CUDA 13.4 (preview) UE5M3 scale type: unsigned E5M3, bias 15, no Inf, NaN only 0xFF, "
                       "max 114688; ml_dtypes 0.7 float8_e5m3fnu"),
    # Intel Gaudi 2 FP8 E4M3 with a selectable exponent bias (bias 7 is float8_e4m3); IEEE-style specials
    *(FloatFormat(f"float8_e4m3b{b}", 4, 3, b, aliases=(f"f8E4M3B{b}", f"gaudi_e4m3_bias{b}"),
                  source=_GAUDI + f" (E4M3, exponent bias {b})") for b in (3, 11, 15)),
    FloatFormat("float16", 5, 10, 15, aliases=("f16", "half", "binary16"), source="IEEE 754 binary16"),
    FloatFormat("bfloat16", 8, 7, 127, aliases=("bf16",), source="bfloat16 (Google Brain)"),
    FloatFormat("tfloat32", 8, 10, 127, aliases=("tf32",), source="NVIDIA TensorFloat-32 (19 bits)"),
    FloatFormat("float32", 8, 23, 127, aliases=("f32", "single", "binary32"), source="IEEE 754 binary32"),
    FloatFormat("float64", 11, 52, 1023, aliases=("f64", "double", "binary64"), source="IEEE 754 binary64"),
    *(
        IntFormat(f"int{b}", b, True, aliases=(f"i{b}", f"si{b}", f"s{b}"), source="two's complement")
        for b in range(1, 33)
    ),
    *(IntFormat(f"uint{b}", b, False, aliases=(f"ui{b}", f"u{b}"), source="unsigned") for b in range(1, 33)),
)

_P3109_RE = re.compile(r"^binary(\d+)p(\d+)([su])([ef])$", re.IGNORECASE)
_GENERIC_RE = re.compile(r"^float(\d+)_e(\d+)m(\d+)(?:b(\d+))?(fnuz|fnu|fn)?$")
_NARROW_RE = re.compile(r"^(.+?)<\s*(-?\d+)\s*:\s*(-?\d+)\s*>$")


def p3109_format(k: int, p: int, signed: bool = True, extended: bool = True) -> FloatFormat:
    """IEEE P3109 binary{K}p{P}{s|u}{e|f} (Interim Report v4.x §3): one zero, one NaN, bias 2^(K-P-1)
    signed / 2^(K-P) unsigned; extended adds +-Inf at the largest magnitudes."""
    if not 3 <= k <= 32:
        raise QrefError(f"P3109 width K must be in 3..32, got {k}")
    pmax = k - 1 if signed else k
    if not 1 <= p <= pmax:
        raise QrefError(f"P3109 precision P must be in 1..{pmax} for K={k} {'signed' if signed else 'unsigned'}")
    name = f"binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}"
    return FloatFormat(
        name,
        exponent_bits=k - p if signed else k - p + 1,
        mantissa_bits=p - 1,
        bias=(1 << (k - p - 1)) if signed else (1 << (k - p)),
        signed=signed,
        nan="negative_zero" if signed else "all_ones",
        inf="top" if extended else "none",
        source="IEEE P3109 Interim Report v4.x §3 (binary{K}p{P}{s|u}{e|f})",
    )


def _generic_float(name: str) -> FloatFormat | None:
    """float{K}_e{E}m{M}[b{bias}][suffix]: no suffix = IEEE specials for K >= 8, none below; 'fn' = no Inf
    (NaN = all ones for K >= 8, no NaN below, as ml_dtypes); 'fnuz' = NaN at -0, bias 2^(E-1); 'fnu' =
    unsigned, NaN = all ones (M = 0: no zero, like E8M0)."""
    m = _GENERIC_RE.match(name)
    if not m:
        return None
    k, e, mm = int(m[1]), int(m[2]), int(m[3])
    suffix = m[5] or ""
    signed = suffix != "fnu"
    if k != int(signed) + e + mm:
        raise QrefError(f"{name!r}: K={k} but sign + E + M = {int(signed) + e + mm}")
    bias = int(m[4]) if m[4] else ((1 << (e - 1)) if suffix == "fnuz" else (1 << (e - 1)) - 1)
    if suffix == "":
        nan, inf = ("ieee", "ieee") if k >= 8 else ("none", "none")
        return FloatFormat(name, e, mm, bias, nan=nan, inf=inf, source="generic name (elements.md §1.2)")
    if suffix == "fn":
        return FloatFormat(name, e, mm, bias, nan="all_ones" if k >= 8 else "none", inf="none",
                           source="generic name (elements.md §1.2)")
    if suffix == "fnuz":
        return FloatFormat(name, e, mm, bias, nan="negative_zero", inf="none", source="generic name")
    return FloatFormat(name, e, mm, bias, signed=False, subnormals=mm > 0, zero=mm > 0, nan="all_ones",
                       inf="none", source="generic name (elements.md §1.2)")


class _Registry(Mapping[str, Format]):
    """Canonical name -> format. Lookup also accepts aliases, P3109 and generic names (see get_format)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Format] = {}
        self._alias: dict[str, str] = {}

    def add(self, fmt: Format, *, replace: bool = False) -> Format:
        names = (fmt.name, *fmt.aliases)
        for n in names:
            owner = self._alias.get(n)
            if owner is not None and owner != fmt.name and not replace:
                raise QrefError(f"format name {n!r} is already registered for {owner!r}")
        self._by_name[fmt.name] = fmt
        for n in names:
            self._alias[n] = fmt.name
        return fmt

    def __getitem__(self, name: str) -> Format:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def resolve(self, name: str) -> Format | None:
        if name in self._alias:
            return self._by_name[self._alias[name]]
        low = {a.lower(): c for a, c in self._alias.items()}
        return self._by_name[low[name.lower()]] if name.lower() in low else None

    def all_names(self) -> list[str]:
        return list(self._alias)

    def defined_by(self, ecosystem: str, kind: str | None = None) -> tuple[str, ...]:
        """Names of the registered formats that ``ecosystem`` (one of ECOSYSTEMS) defines, in registry order;
        ``kind`` ("float" or "int") keeps one kind."""
        check_choice("ecosystem", ecosystem, ECOSYSTEMS)
        return tuple(n for n, f in self._by_name.items() if ecosystem in f.ecosystems and kind in (None, f.kind))


formats = _Registry()
for _f in _BUILTIN:
    formats.add(_with_ecosystems(_f))
for _k in range(3, 17):
    for _signed in (True, False):
        for _p in range(1, (_k - 1 if _signed else _k) + 1):
            for _ext in (True, False):
                formats.add(p3109_format(_k, _p, _signed, _ext))


def register_format(fmt: Format, *, replace: bool = False) -> Format:
    """Add a user-defined format to the registry so ``get_format(fmt.name)`` finds it."""
    if not isinstance(fmt, (FloatFormat, IntFormat)):
        raise QrefError(f"register_format expects a FloatFormat or IntFormat, got {type(fmt).__name__}")
    return formats.add(fmt, replace=replace)


def float_format(
    name: str,
    exponent_bits: int,
    mantissa_bits: int,
    *,
    bias: int | None = None,
    signed: bool = True,
    subnormals: bool = True,
    zero: bool = True,
    nan: NanEncoding = "none",
    inf: InfEncoding = "none",
    register: bool = False,
) -> FloatFormat:
    """Build a user-defined float format; ``bias`` defaults to 2^(E-1) - 1; specials default to none."""
    fmt = FloatFormat(
        name, exponent_bits, mantissa_bits, (1 << (exponent_bits - 1)) - 1 if bias is None else bias,
        signed=signed, subnormals=subnormals, zero=zero, nan=nan, inf=inf, source="user-defined",
    )
    return register_format(fmt) if register else fmt


def get_format(name: str | Format) -> Format:
    """Look up a format by ml_dtypes name, MLIR alias, P3109 name, generic ``float{K}_e{E}m{M}...`` name or
    narrowed integer ``int8<-127:127>``; a format record is returned as is."""
    if isinstance(name, (FloatFormat, IntFormat)):
        return name
    if isinstance(name, np.dtype) or (isinstance(name, type) and issubclass(name, np.generic)):
        name = np.dtype(name).name
    if not isinstance(name, str):
        raise QrefError(f"a format is a name or a format record, got {type(name).__name__}: {name!r}")
    key = name.strip()
    found = formats.resolve(key)
    if found is not None:
        return found
    m = _NARROW_RE.match(key)
    if m:
        base = get_format(m[1])
        if not isinstance(base, IntFormat):
            raise QrefError(f"{name!r}: a <min:max> range narrows integer storage only, not {base.name}")
        lo, hi = int(m[2]), int(m[3])
        return IntFormat(f"{base.name}<{lo}:{hi}>", base.bits, base.signed, lo, hi, source="narrowed range")
    m = _P3109_RE.match(key)
    if m:
        return p3109_format(int(m[1]), int(m[2]), m[3].lower() == "s", m[4].lower() == "e")
    generic = _generic_float(key)
    if generic is not None:
        return generic
    raise unknown_name(
        "format", name, formats.all_names(),
        hint="P3109 names are binary{K}p{P}{s|u}{e|f}; custom floats float{K}_e{E}m{M}[b{bias}][fn|fnuz|fnu] "
        "or qref.float_format(...)",
    )


__all__ = ["ECOSYSTEMS", "INF_ENCODINGS", "NAN_ENCODINGS", "FloatFormat", "Format", "InfEncoding", "IntFormat",
           "NanEncoding", "Overflow", "float_format", "formats", "get_format", "p3109_format", "register_format"]
