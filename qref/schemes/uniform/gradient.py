"""The gradient mask of fake quantization (straight-through estimator; spec: docs/spec/uniform.md §4.4 F5).

For each element with its scale s and zero point z (integer storage [lo, hi]):
    p    = float_steps(x)              the scaled value of quantize (uniform.md §2.1 steps 1-4, without the float
                                       clamp of a clamp="float" profile)
    n    = round(p)                    the profile's rounding mode, an integer-valued float (NaN, +-Inf stay)
    n    = n + z                       zero_point="after_rounding" only (before_rounding / fused: in p already)
    mask = lo <= n <= hi               exact comparisons: NaN and +-Inf give False
The backward of fake quantize passes the incoming gradient where mask is True and gives 0 elsewhere.
"""

from __future__ import annotations

import numpy as np

from ...core.exact import as_source_array
from ...errors import QrefError
from ...formats import IntFormat
from .fast import round_integral
from .reference import float_steps
from .scheme import UniformScheme, from_spec

__all__ = ["fake_quantize_mask"]


def fake_quantize_mask(x: object, scheme: UniformScheme) -> np.ndarray:
    """bool mask, True where lo <= z + round(fl(x * (1 / s))) <= hi under ``scheme`` (uniform.md §4.4 F5)."""
    A = scheme.arithmetic
    if not isinstance(scheme.storage, IntFormat):
        raise QrefError(f"fake_quantize_mask needs integer storage (the mask tests the unclamped integer code), "
                        f"got {scheme.storage.name}; build the scheme with an int storage such as 'int8'")
    if A.rounding not in ("nearest_even", "nearest_away", "toward_zero", "up", "down"):
        raise QrefError(f"fake_quantize_mask needs a deterministic rounding mode, got rounding={A.rounding!r} "
                        f"(profile {scheme.profile!r}); use profile='pytorch_fake_quantize'")
    if A.clamp != "integer":  # the unclamped value: the profile's steps without its float clamp
        spec = scheme.to_spec()
        scheme = from_spec(dict(spec, arithmetic=dict(spec["arithmetic"], clamp="integer")))
    arr = as_source_array(x)
    S, Z = scheme.expand(arr.shape)
    p, Zb, _ = float_steps(scheme, arr, S, Z)
    n = round_integral(np.asarray(p), A.rounding).astype(np.float64)  # exact: integer-valued floats
    if A.zero_point == "after_rounding" or A.zero_point == "after_rounding_float":
        n = n + Zb  # exact below 2^53; beyond it far outside [lo, hi] either way
    lo, hi = scheme.storage_bounds
    with np.errstate(invalid="ignore"):
        return np.asarray((n >= lo) & (n <= hi), dtype=bool).reshape(arr.shape)
