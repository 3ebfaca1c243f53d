"""Cast scheme: an element format and a conversion policy, no scale (spec: schemes.md §2)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.decode import decode
from ..core.encode import build_policy, encode
from ..core.exact import as_source_array
from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, Format, get_format
from ..formats.policy import CastPolicy
from .base import QArray, Scheme, register_family


@dataclass(frozen=True)
class CastScheme(Scheme):
    """quantize(x) = encode(x, format, policy); dequantize = decode."""

    format: FloatFormat
    policy: CastPolicy = field(default_factory=CastPolicy)
    profile: str | None = None
    family = "cast"

    @property
    def name(self) -> str:
        return self.format.name

    def quantize(self, x: object, *, threads: int | None = None, **kwargs: Any) -> QArray:
        """encode(x) under the scheme's policy; threads: encode's (elements.md §2.11)."""
        if kwargs:
            raise QrefError(f"CastScheme.quantize takes threads= only, got {sorted(kwargs)}; the policy is the "
                            f"scheme's: qref.scheme({self.format.name!r}, rounding=..., overflow=...)")
        arr = as_source_array(x)
        return QArray(codes=encode(arr, self.format, profile=self.policy, threads=threads), scheme=self)

    def dequantize(self, q: QArray, dtype: object = np.float32, *, threads: int | None = None) -> np.ndarray:
        """decode(codes); threads: decode's (elements.md §2.11)."""
        return decode(q.codes, self.format, dtype=dtype, threads=threads)

    def to_spec(self) -> dict[str, Any]:
        p = self.policy
        return {"family": "cast", "format": self.format.name, "profile": self.profile,
                "rounding": p.rounding, "overflow": p.overflow, "nan": p.nan, "subnormals": p.subnormals,
                "input_subnormals": p.input_subnormals, "source": p.source, "stochastic_bits": p.stochastic_bits}


def _build(name: str | Format, *, profile: str | None = None, **options: Any) -> CastScheme:
    fmt = get_format(name)
    assert isinstance(fmt, FloatFormat)
    known = [f.name for f in dataclasses.fields(CastPolicy)]
    for k in options:
        if k not in known:
            raise unknown_name(f"option of the cast scheme {fmt.name}", k, known,
                               hint="scale=, axis= or block_size= choose a scaled scheme")
    return CastScheme(fmt, build_policy(profile, fmt, **options), profile)


def from_spec(spec: dict[str, Any]) -> CastScheme:
    spec = dict(spec)
    spec.pop("family")
    fmt = spec.pop("format")
    profile = spec.pop("profile", None)
    fields = {k: v for k, v in spec.items() if v is not None}
    return CastScheme(get_format(fmt), CastPolicy(**fields), profile)  # type: ignore[arg-type]


register_family(
    "cast", builder=_build, from_spec=from_spec,
    claims=lambda fmt, kw: isinstance(fmt, FloatFormat) and not ({"scale", "block_size", "zero_point"} & set(kw)),
    order=900,
)


__all__ = ["CastScheme", "from_spec"]
