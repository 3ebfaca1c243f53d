"""Schemes and QArrays: the contract every quantization family implements (spec: schemes.md).

A scheme is one frozen record with every parameter explicit (element format, scales, rounding, profile...);
``scheme.quantize(x)`` returns a ``QArray`` holding unpacked codes plus the side data (scales, zero points or
biases, global scale) and a boolean ``unspecified`` mask for elements whose result the reference leaves
undefined. ``scheme.to_spec()`` gives a JSON-able dict and ``scheme_from_spec`` rebuilds the scheme (used by
conformance manifests).

Families register builders with ``register_family``; ``qref.scheme(name, ...)`` dispatches by exact scheme name
first (``mxfp4``, ``nf4``, ``mlx_affine``...), then by the element format's kind and the keyword arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.exact import ml_float, ml_integer, plain_integers
from ..errors import QrefError, unknown_name
from ..formats import Format, formats, get_format
from ..validators import check_codes, check_spec


class Scheme:
    """Base class: subclasses are frozen dataclasses with ``name``, ``family`` and ``profile`` fields.

    Every subclass's ``dequantize`` / ``dequantize_with_mask`` is wrapped by ``checked_dequantize`` (schemes.md
    §1.1): the QArray must have been made by an equal scheme, ``dtype`` must be a floating dtype, and a QArray
    whose side data does not fit (tampered scales) gives a QrefError instead of a numpy exception or a result
    of the wrong shape."""

    family: str = "abstract"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("dequantize", "dequantize_with_mask"):
            fn = cls.__dict__.get(name)
            if fn is not None and not getattr(fn, "_qref_checked", False):
                setattr(cls, name, checked_dequantize(fn))

    def quantize(self, x: object, **kwargs: Any) -> QArray:  # pragma: no cover - interface
        raise NotImplementedError

    def dequantize(self, q: QArray, dtype: object = np.float32) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def to_spec(self) -> dict[str, Any]:  # pragma: no cover - interface
        """JSON-able parameters such that scheme_from_spec(s.to_spec()) == s."""
        raise NotImplementedError


@dataclass
class QArray:
    """Quantized data: one code per element (unpacked) and the scheme's side data.

    codes: element codes (integer storage values for uniform schemes, in the narrowest numpy integer dtype that
        holds them; unsigned element codes for float/lookup elements).
    scales: scale per tensor / axis / block (float values, or scale *codes* such as E8M0 bytes where the scheme
        says so); zero_points, biases, global_scale: as the scheme defines.
    unspecified: bool mask (same shape as codes) of elements whose result the spec leaves undefined, or None.
    axis: the axis the scheme's granularity runs along, if any.
    """

    codes: np.ndarray
    scheme: Scheme
    scales: np.ndarray | None = None
    zero_points: np.ndarray | None = None
    biases: np.ndarray | None = None
    global_scale: np.ndarray | None = None
    unspecified: np.ndarray | None = None
    axis: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.codes.shape)

    def dequantize(self, dtype: object = np.float32) -> np.ndarray:
        """Values represented by this QArray, as ``dtype``."""
        return self.scheme.dequantize(self, dtype=dtype)


def _same_scheme(a: object, b: object) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # fields holding arrays: compare the JSON-able specs
        try:
            return bool(a.to_spec() == b.to_spec())  # type: ignore[attr-defined]
        except Exception:  # pragma: no cover - a scheme without a comparable spec
            return False


def _describe(s: object) -> str:
    name = getattr(s, "name", None)
    return f"{type(s).__name__}({name})" if name is not None else type(s).__name__


def check_dequantize_dtype(dtype: object) -> np.dtype | None:
    """None (the scheme's default) or a floating numpy dtype (float64/32/16, bfloat16 or another ml_dtypes float
    type); a QrefError naming the ``dtype`` parameter otherwise (schemes.md §1.1)."""
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise QrefError(f"dequantize: dtype={dtype!r} is not a numpy dtype; use np.float32 (default), np.float64, "
                        "np.float16, ml_dtypes.bfloat16 or another ml_dtypes float type") from None
    is_float = dt.kind == "f"
    if dt.kind == "V":
        import ml_dtypes

        try:
            ml_dtypes.finfo(dt)
            is_float = True
        except (ValueError, TypeError, KeyError):
            is_float = False
    if not is_float:
        raise QrefError(f"dequantize: dtype={dtype!r} ({dt}) is not a floating dtype: dequantized values are "
                        "reals; use np.float32 (default), np.float64, np.float16 or an ml_dtypes float type "
                        "(the codes themselves are q.codes)")
    return dt


def checked_dequantize(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a Scheme's ``dequantize(q, dtype=...)`` with the checks of schemes.md §1.1."""

    @functools.wraps(fn)
    def dequantize(self: Scheme, q: object, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if not isinstance(q, QArray):
            raise QrefError(f"{type(self).__name__}.dequantize takes a QArray (from scheme.quantize(x)), got "
                            f"{type(q).__name__}")
        if q.scheme is not None and not _same_scheme(q.scheme, self):
            raise QrefError(f"{_describe(self)}.dequantize: this QArray was made by {_describe(q.scheme)} "
                            f"(family {getattr(q.scheme, 'family', '?')}); its codes mean nothing under another "
                            "scheme: use q.dequantize() or the scheme that made it")
        if args or "dtype" in kwargs:
            check_dequantize_dtype(args[0] if args else kwargs["dtype"])
        codes = np.asarray(q.codes)
        if ml_integer(codes.dtype):  # ONNX's typed int4 / uint4 / int2 / uint2 codes (uniform.md §1 C9)
            codes = plain_integers(codes)
        # C1: codes are integers of the storage range; a float code is not a code (never truncated); typed float8 /
        # float4 values are the codes of a float storage (uniform.md §1 C9), read by the scheme itself
        bounds = self.code_bounds() if hasattr(self, "code_bounds") else None
        if not ml_float(codes.dtype):
            check_codes(codes, *(bounds or (-(1 << 63), (1 << 64) - 1)), f"{_describe(self)}.dequantize")
        check_side = getattr(self, "check_side_data", None)
        if check_side is not None:
            check_side(q)
        try:
            out = fn(self, q, *args, **kwargs)
        except QrefError:
            raise
        except (IndexError, ValueError) as exc:  # numpy's AxisError is both
            raise QrefError(f"{_describe(self)}.dequantize: the QArray's side data does not fit its codes "
                            f"(codes {codes.shape}{_shapes(q)}): {type(exc).__name__}: {exc}") from None
        values = out[0] if isinstance(out, tuple) else out
        if np.shape(values) != codes.shape:
            raise QrefError(f"{_describe(self)}.dequantize: the QArray's side data does not fit its codes "
                            f"(codes {codes.shape}{_shapes(q)}; the result would have shape {np.shape(values)})")
        return out

    dequantize._qref_checked = True  # type: ignore[attr-defined]
    return dequantize


def _shapes(q: QArray) -> str:
    parts = [f", {k} {np.shape(v)}" for k in ("scales", "zero_points", "biases", "global_scale")
             if (v := getattr(q, k)) is not None]
    return "".join(parts)


Claims = Callable[[Format, Mapping[str, Any]], bool]
Builder = Callable[..., Scheme]


@dataclass(frozen=True)
class _Family:
    family: str
    names: tuple[str, ...]
    builder: Builder
    claims: Claims | None
    from_spec: Callable[[dict[str, Any]], Scheme]
    order: int
    keywords: tuple[str, ...] = ()


_FAMILIES: list[_Family] = []


def register_family(
    family: str,
    *,
    builder: Builder,
    from_spec: Callable[[dict[str, Any]], Scheme],
    names: tuple[str, ...] = (),
    claims: Claims | None = None,
    order: int = 100,
    keywords: tuple[str, ...] = (),
) -> None:
    """Register a scheme family: ``names`` it owns outright, ``claims(fmt, kwargs)`` for format names, and
    ``keywords`` whose presence sends any name to it first (``block_shape``: tiles of any block scheme).

    builder(name, **kwargs) -> Scheme. Lower ``order`` is asked first.
    """
    _FAMILIES[:] = [f for f in _FAMILIES if f.family != family]
    _FAMILIES.append(_Family(family, names, builder, claims, from_spec, order, keywords))
    _FAMILIES.sort(key=lambda f: f.order)


def scheme_names() -> list[str]:
    return sorted(n for f in _FAMILIES for n in f.names)


def scheme(name: str | Format, **kwargs: Any) -> Scheme:
    """Build a quantization scheme: ``qref.scheme("int8", scale=0.1, zero_point=3, profile="stablehlo")``,
    ``qref.scheme("mxfp4", block_size=32, profile="ocp")``, ``qref.scheme("nf4", block_size=64,
    profile="bitsandbytes")``, or ``qref.scheme("float8_e4m3fn")`` (a plain cast). See schemes.md."""
    for fam in _FAMILIES:
        if any(kwargs.get(k) is not None for k in fam.keywords):
            return fam.builder(name, **kwargs)
    if isinstance(name, str):
        for fam in _FAMILIES:
            if name in fam.names:
                return fam.builder(name, **kwargs)
        try:
            fmt = get_format(name)
        except QrefError:
            raise unknown_name("scheme or format", name, [*scheme_names(), *formats.all_names()]) from None
    else:
        fmt = get_format(name)
    for fam in _FAMILIES:
        if fam.claims is not None and fam.claims(fmt, kwargs):
            return fam.builder(fmt, **kwargs)
    raise QrefError(
        f"no scheme family accepts format {fmt.name} with options {sorted(kwargs)}; "
        f"known scheme names: {', '.join(scheme_names())}"
    )


def scheme_from_spec(spec: Mapping[str, Any]) -> Scheme:
    """Rebuild a scheme from ``Scheme.to_spec()`` output."""
    fam_name = check_spec(spec, "scheme", ("family",))["family"]
    for fam in _FAMILIES:
        if fam.family == fam_name:
            try:
                return fam.from_spec(dict(spec))  # type: ignore[arg-type]
            except QrefError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError, AssertionError) as exc:
                raise QrefError(f"scheme_from_spec: not a whole {fam_name} spec ({type(exc).__name__}: {exc}); pass "
                                "the mapping Scheme.to_spec() returns") from None
    raise unknown_name("scheme family", fam_name, [f.family for f in _FAMILIES])


def normalize_axis(axis: int, ndim: int) -> int:
    """``axis`` in [0, ndim): negative axes count from the end; a QrefError for anything else."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise QrefError(f"axis must be an integer in [-{ndim}, {ndim}), got {type(axis).__name__} {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise QrefError(f"axis {axis} is out of range for an array of {ndim} dimension(s)")
    return axis % ndim


__all__ = ["Builder", "Claims", "QArray", "Scheme", "check_dequantize_dtype", "checked_dequantize", "normalize_axis",
           "register_family", "scheme", "scheme_from_spec", "scheme_names"]
