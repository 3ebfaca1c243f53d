"""Requantization: quantized codes of one uniform scheme to codes of another (spec: docs/spec/uniform.md §2.7).

StableHLO's ``uniform_quantize`` on a quantized operand ([SHLO] §uniform_quantize: ``quantize(dequantize(x),
type(result))``). Two arithmetics, chosen by the data field ``RequantizeArithmetic.form``:

``compose`` (the spec text)
    v = from.dequantize(q) in the expressed type E (uniform.md §2.2 with ``from``'s arithmetic), then
    to.quantize(v) (§2.1 with ``to``'s arithmetic); an element is unspecified where either step leaves it so.

``merged`` (StablehloLegalizeQuantToMath's ``requantize``, which the StableHLO interpreter and IREE run)
    identical types: the codes unchanged (a plain convert)
    m = RN_C(RN64(s1 / s2)),  c = RN_C(RN64(z2 - RN64(z1 * RN64(s1 / s2))))   from the types' float64 scales
    t = fl_C(fl_C(RN_C(q) * m) + c)                                           one multiply, one add in C
    t = clamp(t, RN_C(lo2), RN_C(hi2))    only when the output storage is narrower than 32 bits
    n = round_half_even(t); NaN, and n outside [lo2, hi2] (32-bit storage), are unspecified
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.arith import convert
from ...errors import QrefError
from ...formats import IntFormat
from ..base import QArray, _same_scheme
from .scheme import UniformScheme

FORMS = ("compose", "merged")
SPEC = "uniform.md §2.7"


@dataclass(frozen=True)
class RequantizeArithmetic:
    """How a system requantizes (uniform.md §2.7).

    form: ``compose`` (dequantize then quantize, each step with its scheme's own arithmetic) or ``merged`` (one
        multiply by the merged scale s1 / s2 and one add of the merged zero point z2 - z1 s1 / s2).
    compute: the float type of the merged form's constants and arithmetic.
    same_type_copy: merged form: identical input and output types return the codes unchanged.
    """

    form: str = "compose"
    compute: str = "float32"
    same_type_copy: bool = True

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise QrefError(f"requantize form must be one of {', '.join(FORMS)}, got {self.form!r}")
        if self.compute not in ("float32", "float64"):
            raise QrefError(f"requantize compute must be float32 or float64, got {self.compute!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequantizeArithmetic:
        return cls(**d)


#: the requantize arithmetic of each uniform profile (the output scheme's profile decides); profiles not listed
#: compose their own dequantize and quantize (the spec text)
RULES: dict[str, RequantizeArithmetic] = {
    "stablehlo_lowering": RequantizeArithmetic(form="merged", compute="float32", same_type_copy=True),
}


def requantize_arithmetic(profile: str | None, **overrides: Any) -> RequantizeArithmetic:
    """The RequantizeArithmetic of a uniform profile, with field overrides."""
    base = RULES.get(profile or "", RequantizeArithmetic())
    return dataclasses.replace(base, **overrides) if overrides else base


def _type_key(s: UniformScheme) -> tuple[Any, ...]:
    """What the MLIR quantized type holds: storage (and its range), expressed type, scales, zero points, axis."""
    return (s.storage.name, s.storage_bounds, s.expressed.name, s.scales, s.zero_points, s.scale_shape, s.axis,
            s.block_size)


def check(frm: UniformScheme, to: UniformScheme, shape: tuple[int, ...], ar: RequantizeArithmetic) -> None:
    """The constraints of uniform.md §2.7 (C1-C4); a QrefError names the first one broken."""
    if not isinstance(frm.storage, IntFormat) or not isinstance(to.storage, IntFormat):
        raise QrefError("requantize takes integer storage on both sides (uniform.md §2.7 C1)")
    if frm.expressed.name != to.expressed.name:
        raise QrefError(f"requantize keeps the expressed type: {frm.expressed.name} -> {to.expressed.name} "
                        "(uniform.md §2.7 C2, StableHLO uniform_quantize C2)")
    frm.expand(shape)
    to.expand(shape)  # C3: both schemes fit the shape (per-axis sizes, blocks)
    if ar.form == "merged":
        if frm.granularity == "blocked" or to.granularity == "blocked":
            raise QrefError("the merged requantize takes per-tensor and per-axis types only (uniform.md §2.7 C4)")
        if frm.axis is not None and to.axis is not None and \
                frm.axis % max(1, len(shape)) != to.axis % max(1, len(shape)):
            raise QrefError("the merged requantize cannot change the quantization axis (uniform.md §2.7 C4: "
                            "'Cannot requantize while changing quantization_axis')")


def requantize(q: QArray | np.ndarray, frm: UniformScheme, to: UniformScheme,
               arithmetic: RequantizeArithmetic | None = None) -> QArray:
    """Codes of ``frm`` (a QArray or an integer array of storage values) as codes of ``to`` (uniform.md §2.7).
    The arithmetic defaults to that of ``to``'s profile (``RULES``). Returns a QArray of ``to`` whose
    ``unspecified`` marks the results the arithmetic leaves undefined (placeholder code clamp(0, lo, hi))."""
    for what, sch in (("frm", frm), ("to", to)):
        if not isinstance(sch, UniformScheme):
            raise QrefError(f"requantize: {what} must be a uniform scheme (qref.scheme('int8', scale=...)), got "
                            f"{type(sch).__name__}; requantize maps codes between uniform types only (uniform.md "
                            "§2.7 C1): dequantize and quantize for other schemes")
    if isinstance(q, QArray):
        if q.scheme is not None and not _same_scheme(q.scheme, frm):
            raise QrefError(f"requantize: q was made by {getattr(q.scheme, 'name', type(q.scheme).__name__)}, not by "
                            "frm; its codes mean nothing under another scheme (schemes.md §1.1 C1, C3): pass "
                            "frm=q.scheme")
        codes = np.asarray(q.codes)
        given = None if q.unspecified is None else np.asarray(q.unspecified, dtype=bool)
    else:
        codes, given = np.asarray(q), None
    if codes.dtype.kind not in "iu":
        raise QrefError(f"requantize takes integer codes, got {codes.dtype}")
    ar = arithmetic if arithmetic is not None else requantize_arithmetic(to.profile)
    check(frm, to, codes.shape, ar)
    flo, fhi = frm.storage.full_range  # type: ignore[union-attr]
    c64 = codes.astype(np.int64)
    if ((c64 < flo) | (c64 > fhi)).any():
        raise QrefError(f"codes outside the {frm.storage.name} range [{flo}, {fhi}]")
    if ar.form == "compose":
        v, bad = frm.dequantize_with_mask(QArray(codes=c64.astype(frm.codes_dtype), scheme=frm))
        with np.errstate(all="ignore"):
            out = to.quantize(v)
        unspec = np.asarray(out.unspecified, dtype=bool) | np.asarray(bad, dtype=bool)
        res = np.asarray(out.codes).astype(np.int64)
    else:
        res, unspec = _merged(c64, frm, to, ar)
    if given is not None:
        unspec = unspec | given
    lo, hi = to.storage_bounds
    res = np.where(unspec, min(max(0, lo), hi), res)
    return QArray(codes=res.astype(to.codes_dtype), scheme=to, unspecified=unspec)


def merged_constants(frm: UniformScheme, to: UniformScheme, shape: tuple[int, ...],
                     compute: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """(m, c) per element: RN_C(RN64(s1 / s2)) and RN_C(RN64(z2 - RN64(z1 * RN64(s1 / s2)))) (uniform.md §2.7)."""
    S1, Z1 = frm.expand(shape)
    S2, Z2 = to.expand(shape)
    S1 = np.broadcast_to(np.asarray(S1, np.float64), shape)
    S2 = np.broadcast_to(np.asarray(S2, np.float64), shape)
    Z1 = np.broadcast_to(np.asarray(Z1, np.int64), shape).astype(np.float64)
    Z2 = np.broadcast_to(np.asarray(Z2, np.int64), shape).astype(np.float64)
    dt = np.dtype(compute)
    with np.errstate(all="ignore"):
        m64 = S1 / S2  # IEEE double division: one rounding
        c64 = Z2 - Z1 * m64
        return m64.astype(dt), c64.astype(dt)


def _merged(c64: np.ndarray, frm: UniformScheme, to: UniformScheme, ar: RequantizeArithmetic
            ) -> tuple[np.ndarray, np.ndarray]:
    shape = c64.shape
    assert isinstance(to.storage, IntFormat)
    if ar.same_type_copy and _type_key(frm) == _type_key(to):
        return c64.copy(), np.zeros(shape, dtype=bool)
    dt = np.dtype(ar.compute)
    m, c = merged_constants(frm, to, shape, ar.compute)
    lo, hi = to.storage_bounds
    with np.errstate(all="ignore"):
        f = np.asarray(convert(c64, dt))  # RN_C(q): exact below 2^24 (float32)
        t = (f * m).astype(dt)
        t = (t + c).astype(dt)
        if to.storage.bits < 32:
            t = np.clip(t, dt.type(lo), dt.type(hi))  # NaN stays NaN
        nan = np.isnan(t)
        n = np.rint(np.where(nan, 0, t)).astype(np.float64)
    unspec = nan | (n < lo) | (n > hi)
    res = np.where(unspec, 0, n).astype(np.int64)
    return res, unspec


__all__ = ["FORMS", "RULES", "RequantizeArithmetic", "check", "merged_constants", "requantize",
           "requantize_arithmetic"]
