"""Calibration: scales and zero points from data (spec: docs/spec/uniform.md §5).

``qref.calibrate(x, storage, method="absmax" | "minmax" | "percentile", axis=..., block_size=...,
formula=...)`` reduces x over each quantization group (the whole tensor, every index of ``axis``, or each
sub-channel block) and returns a ``Calibration`` (unpack it as ``scales, zero_points``; ``.scheme(profile=...)``
builds the matching UniformScheme). The statistic and the scale formula are separate choices:

statistic (``method``): absmax = max |x|; minmax = (min(min x, 0), max(max x, 0)); percentile = the
    ``percentile``-th percentile of |x| (symmetric) or of x at (100 - p, p) (``symmetric=False``), taken with
    numpy's ``method=percentile_method`` (default "higher": an element of the data, no arithmetic).
formula: "qref" (default, exact: scale = RN_e(a / D) from the exact quotient, uniform.md §5.2), "qwix"
    (qwix 0.1.8: a / (qmax + 0.5) in the input dtype, which XLA evaluates as a * fl(1 / (qmax + 0.5)); scales
    < sqrt(tiny) become 1), "aqt" (aqtp 0.9.0: a == 0 -> 1, scale = a * fl(1 / (2^(b-1) - 0.5)) in the input
    dtype), "pytorch" (torch.ao MinMaxObserver in float32: scale = max(a / ((qmax - qmin) / 2), eps), zero
    point = qmin - round(min / scale)).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .core.exact import as_source_array
from .errors import QrefError, check_choice
from .formats import FloatFormat, Format, IntFormat, get_format
from .schemes.base import normalize_axis
from .schemes.uniform import DEFAULT_PROFILE, UniformScheme, build_uniform, cast, round_fraction, round_to_int

METHODS = ("absmax", "minmax", "percentile")
FORMULAS = ("qref", "qwix", "aqt", "pytorch")
NONFINITE = ("ignore", "error")


@dataclass(frozen=True)
class Calibration:
    """Result of qref.calibrate: scales (float64 values of the expressed type) and integer zero points, shaped
    for the granularity (() per tensor, (n,) per axis, the input's rank for blocks)."""

    scales: np.ndarray
    zero_points: np.ndarray
    storage: Format
    expressed: FloatFormat
    axis: int | None
    block_size: tuple[tuple[int, int], ...] | None
    method: str
    formula: str

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.scales
        yield self.zero_points

    def scheme(self, profile: str | None = DEFAULT_PROFILE, **options: Any) -> UniformScheme:
        """The UniformScheme with these scales and zero points (profile default "stablehlo")."""
        return build_uniform(self.storage, scale=self.scales, zero_point=self.zero_points, axis=self.axis,
                             block_size=None if self.block_size is None else dict(self.block_size),
                             profile=profile, expressed=self.expressed, **options)


def _groups(x: np.ndarray, axis: int | None, block_size: object) -> tuple[np.ndarray, tuple[int, ...],
                                                                         tuple[tuple[int, int], ...] | None]:
    """x reshaped to (*scale_shape, group_elements) with NaN padding for partial blocks."""
    nd = x.ndim
    if block_size is None:
        if axis is None:
            return x.reshape(-1), (), None
        a = normalize_axis(axis, nd)
        g = np.moveaxis(x, a, 0).reshape(x.shape[a], -1)
        return g, (x.shape[a],), None
    if isinstance(block_size, Mapping):
        blocks = {normalize_axis(int(k), nd): int(v) for k, v in block_size.items()}
    elif isinstance(block_size, (int, np.integer)):
        if axis is None:
            raise QrefError("block_size=<int> needs axis=<the blocked axis> (ONNX blocked quantization)")
        a = normalize_axis(axis, nd)
        blocks = {i: (int(block_size) if i == a else 1) for i in range(nd)}
    else:
        items = list(block_size)  # type: ignore[call-overload]
        if len(items) != nd:
            raise QrefError(f"block_size as a tuple needs one block per axis ({nd}), got {len(items)}")
        blocks = {i: int(b) for i, b in enumerate(items)}
    for a, b in blocks.items():
        if b < 1:
            raise QrefError(f"block size for axis {a} must be >= 1, got {b}")
    nb = [(-(-d // blocks[i])) if i in blocks else 1 for i, d in enumerate(x.shape)]
    bs = [blocks.get(i, d) for i, d in enumerate(x.shape)]
    pad = [(0, n * b - d) for n, b, d in zip(nb, bs, x.shape)]
    xf = x.astype(np.float64) if x.dtype != np.float64 else x
    if any(p[1] for p in pad):
        xf = np.pad(xf, pad, constant_values=np.nan)
    inter = []
    for n, b in zip(nb, bs):
        inter += [n, b]
    g = xf.reshape(inter)
    order = list(range(0, 2 * nd, 2)) + list(range(1, 2 * nd, 2))
    g = g.transpose(order).reshape(*nb, -1)
    return g, tuple(nb), tuple(sorted(blocks.items()))


def _stat_dtype(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float64 else x.astype(np.float64)  # exact for every float dtype


def calibrate(
    x: object,
    storage: str | Format = "int8",
    method: str = "absmax",
    *,
    axis: int | None = None,
    block_size: object = None,
    formula: str = "qref",
    expressed: str | Format | None = None,
    percentile: float = 99.99,
    percentile_method: str = "higher",
    symmetric: bool | None = None,
    nonfinite: str = "ignore",
) -> Calibration:
    """Scales and zero points for ``x`` in ``storage`` (uniform.md §5).

    method: "absmax" (symmetric, default), "minmax" (asymmetric) or "percentile". axis: per-axis
    calibration (one scale per index of this axis; default None = per tensor). block_size: an int (with axis,
    ONNX blocked), {axis: block} or a per-axis tuple (default None). formula: "qref" (default), "qwix", "aqt",
    "pytorch". expressed: the scale type (default: x's float dtype, float32 for integer input).
    percentile / percentile_method: for method="percentile" (defaults 99.99, "higher"). symmetric: for
    "percentile": True (default) takes |x|, False takes (100 - p, p) percentiles like minmax.
    nonfinite: "ignore" (default: NaN/Inf are left out of the statistics) or "error".
    An all-zero (or all-ignored) group gets scale 1 and the formula's zero point (uniform.md §5.3).
    """
    check_choice("calibration method", method, METHODS)
    check_choice("calibration formula", formula, FORMULAS)
    check_choice("nonfinite rule", nonfinite, NONFINITE)
    arr = as_source_array(x)
    fmt = get_format(storage)
    if not isinstance(fmt, IntFormat):
        raise QrefError(f"calibrate computes integer-storage parameters; {fmt.name} is not an integer format")
    if expressed is None:
        expressed = arr.dtype.name if (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16") else "float32"
    ex = get_format(expressed)
    if not isinstance(ex, FloatFormat):
        raise QrefError(f"expressed must be a float format, got {ex.name}")
    if arr.size == 0:
        raise QrefError("cannot calibrate an empty array")
    x64 = _stat_dtype(arr)
    finite = np.isfinite(x64)
    if nonfinite == "error" and not finite.all():
        raise QrefError(f"x has {int((~finite).sum())} NaN/Inf value(s); pass nonfinite='ignore' to leave them out")
    x64 = np.where(finite, x64, np.nan)
    g, sshape, blocks = _groups(x64, axis, block_size)
    asym = method == "minmax" or (method == "percentile" and symmetric is False)
    with np.errstate(invalid="ignore"), _quiet():
        if method == "absmax":
            a = np.nanmax(np.abs(g), axis=-1)
            mn = mx = None
        elif method == "minmax":
            mn, mx = np.nanmin(g, axis=-1), np.nanmax(g, axis=-1)
            a = None
        elif asym:
            mn = np.nanpercentile(g, 100 - percentile, axis=-1, method=percentile_method)
            mx = np.nanpercentile(g, percentile, axis=-1, method=percentile_method)
            a = None
        else:
            a = np.nanpercentile(np.abs(g), percentile, axis=-1, method=percentile_method)
            mn = mx = None
    empty = np.isnan(a) if a is not None else np.isnan(mn)  # type: ignore[arg-type]
    if a is not None:
        a = np.where(empty, 0.0, a)
    else:
        assert mn is not None and mx is not None
        mn = np.minimum(np.where(empty, 0.0, mn), 0.0)
        mx = np.maximum(np.where(empty, 0.0, mx), 0.0)
    src_dt = arr.dtype if (arr.dtype.kind == "f" or arr.dtype.name == "bfloat16") else np.dtype(np.float32)
    if formula == "qref":
        S, Z = _qref_formula(a, mn, mx, fmt, ex)
    elif formula == "qwix":
        S, Z = _qwix_formula(a, mn, mx, fmt, src_dt)
    elif formula == "aqt":
        if asym:
            raise QrefError("AQT's IntSymmetric calibration is symmetric (absmax); use method='absmax'")
        S, Z = _aqt_formula(a, fmt, src_dt)
    else:
        S, Z = _pytorch_formula(a, mn, mx, fmt, asym)
    ax_out = None if block_size is not None else axis
    return Calibration(S.reshape(sshape), Z.reshape(sshape).astype(np.int64), fmt, ex, ax_out, blocks, method,
                       formula)


class _quiet:
    """Silence numpy's 'All-NaN slice' RuntimeWarning (all-NaN groups are handled explicitly)."""

    def __enter__(self) -> None:
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)


def _symmetric_zero(fmt: IntFormat) -> tuple[int, int]:
    """(zero point, D) of symmetric calibration: z = 0 (signed) or the midpoint ceil((lo + hi) / 2)
    (unsigned); D = min(hi - z, z - lo)."""
    lo, hi = fmt.lo, fmt.hi
    z = 0 if fmt.signed and lo <= 0 <= hi else (lo + hi + 1) // 2
    return z, min(hi - z, z - lo)


def _qref_formula(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                  ex: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Exact formulas (uniform.md §5.2): scale = RN_e(a / D); minmax: scale = RN_e((max - min) / (hi - lo)),
    z = clamp(lo - round_half_even(min / scale), lo, hi). One loop over groups (exact rationals)."""
    lo, hi = fmt.lo, fmt.hi
    if a is not None:
        z0, D = _symmetric_zero(fmt)
        if D <= 0:
            raise QrefError(f"{fmt.name} has no room for a symmetric range around {z0}")
        flat = a.reshape(-1)
        S = np.array([_rn(Fraction(float(v)) / D, ex) if v > 0 else 1.0 for v in flat], dtype=np.float64)
        return S.reshape(a.shape), np.full(a.shape, z0, dtype=np.int64)
    assert mn is not None and mx is not None
    S = np.empty(mn.size, dtype=np.float64)
    Z = np.empty(mn.size, dtype=np.int64)
    for i, (u, v) in enumerate(zip(mn.reshape(-1), mx.reshape(-1))):
        if v - u == 0:
            S[i], Z[i] = 1.0, min(max(0, lo), hi)
            continue
        s = _rn((Fraction(float(v)) - Fraction(float(u))) / (hi - lo), ex)
        r = Fraction(float(u)) / Fraction(s)
        n = math.floor(r)
        frac = r - n
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and n % 2):
            n += 1
        S[i], Z[i] = s, min(max(lo - n, lo), hi)
    return S.reshape(mn.shape), Z.reshape(mn.shape)


def _rn(v: Fraction, ex: FloatFormat) -> float:
    s = round_fraction(v, ex)
    if s == 0 or math.isinf(s):
        raise QrefError(f"scale {float(v)!r} underflows or overflows the expressed type {ex.name}")
    return s


def _qwix_formula(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                  dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """qwix 0.1.8 compute_scale_zero_point, in the input dtype dt."""
    tiny_sqrt = np.sqrt(np.asarray(_finfo_tiny(dt), dtype=dt))
    if a is not None:
        if not fmt.signed:
            raise QrefError("qwix's symmetric calibration is for signed integer storage")
        # absmax / (qmax + 0.5): XLA turns the division by a constant into a multiplication by fl(1 / c)
        inv = np.asarray(np.ones((), dt) / cast(np.asarray(fmt.hi + 0.5), dt)).astype(dt)
        s = np.asarray(cast(a, dt) * inv).astype(dt)
        s = np.where(s < tiny_sqrt, np.ones((), dt), s)
        return s.astype(np.float64), np.zeros(s.shape, dtype=np.int64)
    assert mn is not None and mx is not None
    if (fmt.lo, fmt.hi) not in ((-128, 127), (-8, 7)):
        raise QrefError("qwix's asymmetric calibration supports int8 and int4 only")
    mnc, mxc = cast(mn, dt), cast(mx, dt)
    inv = np.asarray(np.ones((), dt) / cast(np.asarray(float(fmt.hi - fmt.lo)), dt)).astype(dt)
    s = np.asarray(np.asarray(mxc - mnc).astype(dt) * inv).astype(dt)
    s = np.where(s < tiny_sqrt, np.ones((), dt), s)
    zf = np.asarray(cast(np.asarray(float(fmt.lo)), dt) - np.asarray(mnc / s).astype(dt)).astype(dt)
    n, nan = round_to_int(zf, "nearest_even")
    return s.astype(np.float64), np.clip(np.where(nan, 0, n), fmt.lo, fmt.hi)


def _aqt_formula(a: np.ndarray | None, fmt: IntFormat, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """aqtp 0.9.0 AbsMaxCalibration with IntSymmetric(preserve_max_val=False): a == 0 -> 1, scale = a /
    (2^(b-1) - 0.5) in the input dtype."""
    assert a is not None
    if not fmt.signed:
        raise QrefError("AQT's IntSymmetric numerics are signed")
    ac = cast(a, dt)
    ac = np.where(ac == 0, np.ones((), dt), ac)
    inv = np.asarray(np.ones((), dt) / cast(np.asarray(2.0 ** (fmt.bits - 1) - 0.5), dt)).astype(dt)
    s = np.asarray(ac * inv).astype(dt)  # XLA: division by a constant -> multiplication by fl(1 / c)
    return s.astype(np.float64), np.zeros(s.shape, dtype=np.int64)


def _pytorch_formula(a: np.ndarray | None, mn: np.ndarray | None, mx: np.ndarray | None, fmt: IntFormat,
                     asym: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch.ao.quantization MinMaxObserver._calculate_qparams (torch 2.13), float32 arithmetic."""
    f32 = np.dtype(np.float32)
    eps = np.float32(np.finfo(np.float32).eps)
    lo, hi = fmt.lo, fmt.hi
    if not asym:
        assert a is not None
        half = np.float32(float(hi - lo) / 2)
        s = np.maximum(np.asarray(cast(a, f32) / half).astype(f32), eps)
        z = 0 if fmt.signed else (128 if (lo, hi) == (0, 255) else (lo + hi) // 2)
        return s.astype(np.float64), np.full(s.shape, z, dtype=np.int64)
    assert mn is not None and mx is not None
    span = np.float32(float(hi - lo))
    s = np.asarray((cast(mx, f32) - cast(mn, f32)) / span).astype(f32)
    s = np.maximum(s, eps)
    n, _ = round_to_int(np.asarray(cast(mn, f32) / s).astype(f32), "nearest_even")
    return s.astype(np.float64), np.clip(lo - n, lo, hi)


def _finfo_tiny(dt: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dt).tiny)


__all__ = ["FORMULAS", "METHODS", "Calibration", "calibrate"]
