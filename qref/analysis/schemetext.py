"""The compact scheme syntax ``NAME[:KEY=VALUE,...]`` of ``qref compare --schemes`` (analysis.md §5): a
``SchemeBuilder`` names a scheme or format plus options and builds it from the data (calibrating where
asked) through ``qref.scheme``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, IntFormat, get_format
from ..schemes.base import QArray, Scheme, normalize_axis
from .elementwise import _f64

# ---------------------------------------------------------------------------------------------------------
# §5 compact scheme syntax and recipes
# ---------------------------------------------------------------------------------------------------------
_SPEC_RE = re.compile(r"^\s*(?P<name>[^:<\s]+(?:<[^>]*>)?)\s*(?::(?P<opts>.*))?$")


def _value(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


@dataclass(frozen=True)
class SchemeBuilder:
    """A scheme to be built from the data (analysis.md §5): ``name`` plus ``options``; ``build(x)`` gives
    (scheme, quantize keyword arguments). ``label`` names the row in a comparison (default: the spec text)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()
    label: str = ""

    @property
    def opts(self) -> dict[str, Any]:
        return dict(self.options)

    def build(self, x: object) -> tuple[Scheme, dict[str, Any]]:
        """(scheme, quantize kwargs) for input ``x`` (calibrating scales where the recipe asks for it)."""
        from ..schemes.base import scheme as make
        from ..schemes.base import scheme_names

        opts = self.opts
        if self.name in scheme_names():
            axis = opts.pop("axis", None)
            s = make(self.name, **opts)
            if axis is None:
                return s, {}
            if getattr(s, "family", None) == "block":
                return s, {"axis": axis}
            return make(self.name, axis=axis, **opts), {}
        fmt = get_format(self.name)
        if isinstance(fmt, IntFormat):
            return _int_recipe(x, fmt, opts), {}
        if "block_size" in opts:
            axis = opts.pop("axis", None)
            return make(fmt, **opts), ({} if axis is None else {"axis": axis})
        if "scale" in opts or "axis" in opts:
            return _float_scaled_recipe(x, fmt, opts), {}
        return make(fmt, **opts), {}

    def quantize(self, x: object) -> QArray:
        s, kw = self.build(x)
        return s.quantize(x, **kw)


def _int_recipe(x: object, fmt: IntFormat, opts: dict[str, Any]) -> Scheme:
    """Integer storage: qref.calibrate(x, fmt, method, axis=, block_size=, formula=).scheme(profile, ...); with
    scale=<number> (and zero_point=, default 0): that fixed uniform scheme, no calibration."""
    from ..schemes.base import scheme as make
    from .calibrate import calibrate

    if "scale" in opts:
        sc = opts.pop("scale")
        if not isinstance(sc, (int, float)) or isinstance(sc, bool):
            raise QrefError(f"scale={sc!r}: an integer format takes a number, or no scale (calibrated from x)")
        return make(fmt, scale=float(sc), zero_point=opts.pop("zero_point", 0),
                    profile=opts.pop("profile", "stablehlo"), **opts)

    cal_keys = ("method", "axis", "block_size", "formula", "percentile", "percentile_method", "symmetric",
                "expressed")
    cal = {k: opts.pop(k) for k in cal_keys if k in opts}
    if "group_size" in opts:
        cal["block_size"] = opts.pop("group_size")
    if "block_size" in cal and "axis" not in cal and isinstance(cal["block_size"], int):
        cal["axis"] = -1
    profile = opts.pop("profile", "stablehlo")
    return calibrate(x, fmt, **cal).scheme(profile=profile, **opts)


def _absmax_fast(arr: np.ndarray, axis: int | None) -> np.ndarray | None:
    """max |x| (float64) per tensor or per index of axis as max(max x, -min x) on a float32/float64 array
    without temporaries; None (use the general formula) for other dtypes, empty groups or non-finite values."""
    if arr.dtype not in (np.float32, np.float64) or arr.size == 0 or (arr.ndim == 0 and axis is not None):
        return None
    red = None if axis is None else tuple(i for i in range(arr.ndim) if i != normalize_axis(axis, arr.ndim))
    with np.errstate(invalid="ignore"):
        lo, hi = np.min(arr, axis=red), np.max(arr, axis=red)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return None
    return np.maximum(np.asarray(hi, np.float64), -np.asarray(lo, np.float64))


def _float_scaled_recipe(x: object, fmt: FloatFormat, opts: dict[str, Any]) -> Scheme:
    """Float element with a scale: s = fl32(amax / max(fmt)) per tensor or per index of ``axis`` (scale=absmax,
    the default when axis is given), or a fixed scale=<number>; built as the uniform float-storage scheme
    (ONNX QuantizeLinear to fp8/fp4 with saturate=1: profile "onnx" unless given)."""
    from ..schemes.base import scheme as make

    mode = opts.pop("scale", "absmax")
    axis = opts.pop("axis", None)
    profile = opts.pop("profile", "onnx")
    if isinstance(mode, (int, float)) and not isinstance(mode, bool):
        scale: Any = np.float32(mode)
    elif mode == "absmax":
        amax = _absmax_fast(np.asarray(x), axis)
        if amax is None:
            arr = _f64(x)
            finite = np.where(np.isfinite(arr), np.abs(arr), 0.0)
            if axis is None:
                amax = np.asarray(finite.max() if finite.size else 0.0)
            else:
                ax = normalize_axis(axis, arr.ndim)
                amax = np.moveaxis(finite, ax, 0).reshape(arr.shape[ax], -1).max(axis=1)
        s = amax / float(fmt.max_value)
        s = np.where(s > 0, s, 1.0)  # an all-zero group gets scale 1 (as qref.calibrate)
        scale = np.maximum(s.astype(np.float32), np.finfo(np.float32).smallest_subnormal)
    else:
        raise QrefError(f"scale={mode!r}: use scale=absmax (per tensor, or per index of axis=) or a number")
    return make(fmt, scale=scale, axis=axis, profile=profile, **opts)


def parse_scheme(text: str) -> SchemeBuilder:
    """Parse the compact scheme syntax ``NAME[:KEY=VALUE[,KEY=VALUE...]]`` (analysis.md §5).

    NAME: a scheme name (mxfp4, mxfp8_e4m3, mxfp6_e2m3, nvfp4, mlx_affine, nf4, af4, fp4_bnb...) or a format
    (float8_e4m3fn, float8_e5m2, int8, int4, int8<-127:127>...). VALUE: an int, float, true/false, none, or a
    bare word. ``label=TEXT`` names the table row. Examples: "float8_e4m3fn" (plain cast), "float8_e4m3fn:axis=0"
    (per-channel absmax-scaled FP8), "int8:axis=0", "int4:block_size=128", "mxfp4:scale_rule=rceil",
    "nf4:block_size=64,profile=bitsandbytes".
    """
    if not isinstance(text, str):
        raise QrefError(f"a scheme spec is a string such as 'int8:axis=0', got {type(text).__name__}")
    m = _SPEC_RE.match(text)
    if not m or not m["name"]:
        raise QrefError(f"cannot parse scheme spec {text!r}; expected NAME[:KEY=VALUE,...] e.g. 'int8:axis=0'")
    name = m["name"]
    opts: list[tuple[str, Any]] = []
    label = text.strip()
    if m["opts"] is not None and m["opts"].strip():
        for part in m["opts"].split(","):
            if "=" not in part:
                raise QrefError(f"scheme spec {text!r}: option {part.strip()!r} is not KEY=VALUE")
            k, v = part.split("=", 1)
            k = k.strip()
            if not k.isidentifier():
                raise QrefError(f"scheme spec {text!r}: bad option name {k!r}")
            if k == "label":
                label = v.strip()
            else:
                opts.append((k, _value(v)))
    _check_name(name)
    return SchemeBuilder(name, tuple(opts), label)


def _check_name(name: str) -> None:
    from ..schemes.base import scheme_names

    if name in scheme_names():
        return
    try:
        get_format(name)
    except QrefError:
        from ..formats import formats

        raise unknown_name("scheme or format", name, [*scheme_names(), *formats.all_names()]) from None


__all__ = ["SchemeBuilder", "parse_scheme"]
