"""Block formats as composed records (spec: block.md §1-§2): element format, block size and scale format.

``BlockFormat(name, element, block_size, scale, element_scale_exp)`` is one block format built from records
(gfloat's ``BlockFormatInfo(name, element, block, scale)`` has the same shape): ``block_size`` consecutive
elements of format ``element`` share one scale of format ``scale`` (None: affine groups, whose scale and bias
are floats of the input dtype). ``NAMED_SCHEMES`` holds the block schemes that ``qref.scheme`` knows by name as
``NamedBlockScheme`` records: the names of the element and scale formats, the default block size, the element
scale exponent and the scheme kind. This module holds data only (it imports the format records).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import QrefError
from .records import FloatFormat, IntFormat

__all__ = ["BLOCK_KINDS", "NAMED_SCHEMES", "BlockFormat", "NamedBlockScheme"]

BLOCK_KINDS = ("mx", "float_scale", "affine")  # E8M0 scales, other float scale formats, affine groups


@dataclass(frozen=True)
class BlockFormat:
    """One block format (block.md §1).

    name: the scheme's name ("mxfp4", "nvfp4", "mlx_affine", or the element format's name).
    element: the element format (FloatFormat, or IntFormat for MXINT8 and affine codes).
    block_size: elements per block (OCP k = 32; NVFP4 16; MLX affine group 32, 64 or 128), an integer >= 1.
    scale: the scale format (float8_e8m0fnu for MX; a float format with mantissa bits such as float8_e4m3fn for
        float-scaled blocks), or None (affine: float scales in the input dtype).
    element_scale_exp: element value = code value * 2^element_scale_exp (MXINT8: -6). Default 0.
    """

    name: str
    element: FloatFormat | IntFormat
    block_size: int
    scale: FloatFormat | None
    element_scale_exp: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.element, (FloatFormat, IntFormat)):
            raise QrefError(f"element must be a format record, got {self.element!r}")
        k = self.block_size
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise QrefError(f"block_size must be a positive integer, got {k!r}")
        if self.scale is not None and not isinstance(self.scale, FloatFormat):
            raise QrefError(f"scale_format must be a float format or None, got {self.scale!r}")
        if isinstance(self.element_scale_exp, bool) or not isinstance(self.element_scale_exp, int):
            raise QrefError(f"element_scale_exp must be an integer, got {self.element_scale_exp!r}")

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
        """Mantissa bits of a float element; bits - 2 for an integer element (MXINT8: 6)."""
        fmt = self.element
        return fmt.mantissa_bits if isinstance(fmt, FloatFormat) else fmt.bits - 2

    @property
    def bits(self) -> int:
        """Bits per element code."""
        return self.element.bits


@dataclass(frozen=True)
class NamedBlockScheme:
    """A block scheme known by name (block.md §2): what ``qref.scheme(name)`` composes.

    name: the scheme name. element, scale: format names (None for mlx_affine: its element is uint<bits>, its
    scales are floats of the input dtype). block_size: the default block size. kind: "mx" (E8M0 scales),
    "float_scale" or "affine". element_scale_exp: as BlockFormat's.
    """

    name: str
    element: str | None
    scale: str | None
    block_size: int
    kind: str
    element_scale_exp: int = 0

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise QrefError(f"NamedBlockScheme.kind={self.kind!r} is not allowed; allowed values: "
                            f"{', '.join(BLOCK_KINDS)}")


NAMED_SCHEMES: dict[str, NamedBlockScheme] = {r.name: r for r in (
    NamedBlockScheme("mxfp8_e4m3", "float8_e4m3fn", "float8_e8m0fnu", 32, "mx"),
    NamedBlockScheme("mxfp8_e5m2", "float8_e5m2", "float8_e8m0fnu", 32, "mx"),
    NamedBlockScheme("mxfp6_e3m2", "float6_e3m2fn", "float8_e8m0fnu", 32, "mx"),
    NamedBlockScheme("mxfp6_e2m3", "float6_e2m3fn", "float8_e8m0fnu", 32, "mx"),
    NamedBlockScheme("mxfp4", "float4_e2m1fn", "float8_e8m0fnu", 32, "mx"),
    NamedBlockScheme("mxint8", "int8<-127:127>", "float8_e8m0fnu", 32, "mx", element_scale_exp=-6),
    NamedBlockScheme("nvfp4", "float4_e2m1fn", "float8_e4m3fn", 16, "float_scale"),
    NamedBlockScheme("nvfp4_ue4m3", "float4_e2m1fn", "float7_e4m3fnu", 16, "float_scale"),
    NamedBlockScheme("nvfp4_ue5m3", "float4_e2m1fn", "float8_e5m3fnu", 16, "float_scale"),
    NamedBlockScheme("mlx_affine", None, None, 64, "affine"),
)}
