"""Recipe profiles as data (spec: recipes.md §4, profiles.md): the FP8 training recipes qref reproduces.

``HybridRules`` holds every field of qref.recipes.HybridRecipe that a profile sets (the accumulation model is
derived from ``compute_dtype`` and ``ftz``); qref.recipes.PRESETS is built from these records.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Profile, register_profile


@dataclass(frozen=True)
class HybridRules:
    """E4M3 forward / E5M2 gradient delayed scaling (recipes.md §8): the fields of HybridRecipe."""

    forward_format: str = "float8_e4m3fn"
    grad_format: str = "float8_e5m2"
    history_length: int = 1024
    amax_compute: str = "max"
    margin: int = 0
    compute_dtype: str = "float32"
    division: str = "divide"       # "divide": x / s; "reciprocal": x * (1 / s)
    ftz: bool = True               # flush subnormals in the scale and cast arithmetic
    fuse_bias: bool = False        # the Dense epilogue as one fma(dot, s_x s_k, bias)


_EVIDENCE = ("tests/test_recipes_flax.py against flax 0.12.8 (jax 0.10.2 CPU): 14 steps of delayed scaling "
             "(E4M3/E5M2, history 1/4/1024, zero/NaN/Inf/tiny amax) and 3 Dense training steps bit for bit",)

PROFILES = (
    Profile("flax", "recipe", "flax 0.12.8 linen fp8_ops on XLA:CPU, eager (Fp8DirectDotGeneralOp, delayed scaling)",
            "E4M3 forward / E5M2 gradients with separate delayed scales; q = clip(x / s, -max, max) cast RNE; the "
            "Dense epilogue (dot * s) + bias rounds twice.",
            rules=HybridRules(), sources=("flax/linen/fp8_ops.py", "docs/spec/recipes.md §4"),
            package="flax", versions=">=0.12,<0.13", status="verified", evidence=_EVIDENCE),
    Profile("flax_jit", "recipe", "flax 0.12.8 linen fp8_ops under jax.jit on XLA:CPU",
            "As flax, but XLA rewrites x / s into x * (1 / s) and fuses dot * s + bias into one fma.",
            rules=HybridRules(division="reciprocal", fuse_bias=True),
            sources=("flax/linen/fp8_ops.py", "docs/spec/recipes.md §4"),
            package="flax", versions=">=0.12,<0.13", status="verified", evidence=_EVIDENCE),
)

for _p in PROFILES:
    register_profile(_p)


__all__ = ["PROFILES", "HybridRules"]
