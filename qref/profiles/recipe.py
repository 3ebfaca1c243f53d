"""Recipe profiles as data (spec: recipes.md §4, §14-§15, profiles.md): the FP8 training recipes qref reproduces
and the abs-max int8 layer quantization (``AbsmaxMultiplierRules``).

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
    division: str = "divide"       # "divide": x / s; "reciprocal": x * (1 / s); "broadcast_reciprocal": the
    #                                latter where s is broadcast onto more than one element
    ftz: bool = True               # flush subnormals in the scale and cast arithmetic
    fuse_bias: bool = False        # the Dense epilogue as one fma(dot, s_x s_k, bias)
    cast_scale: str = "updated"    # "updated": cast with the scale just computed from the history; "stored":
    #                                cast with the stored scale, the computed one is stored for the next step
    dot_operands: str = "codes"    # "codes": dot of the fp8 codes, times fl(s_a s_b); "dequantized": dot of
    #                                the dequantized values fl(decode(q) s) in compute_dtype
    bias_rounding: str | None = None  # a float dtype the bias is rounded through before the add (None: none)


@dataclass(frozen=True)
class AbsmaxMultiplierRules:
    """Symmetric abs-max quantization with the scale stored as a multiplier (recipes.md §15).

    qmax: the code range is [-qmax, qmax] (default 127). epsilon: added to the amax before the division
    (default 1e-7, rounded to the scale dtype). dtype: the float dtype of every step (default "float32").
    kernel_axis: the axis the kernel's amax reduces (default 0: one scale per output column). input_axis: the
    axis the input's amax reduces (default -1: one scale per row / token)."""

    qmax: int = 127
    epsilon: float = 1e-7
    dtype: str = "float32"
    kernel_axis: int = 0
    input_axis: int = -1


_EVIDENCE = ("tests/test_recipes_flax.py against flax 0.12.8 (jax 0.10.2 CPU): 14 steps of delayed scaling "
             "(E4M3/E5M2, history 1/4/1024, zero/NaN/Inf/tiny amax) and 3 Dense training steps bit for bit",)

_KERAS_EVIDENCE = ("tests/test_keras_recipes.py against keras 3.15.1 (JAX backend, jax 0.10.2 CPU, eager): Dense "
                   "and EinsumDense quantize('float8') training steps with SGD: outputs, gradients, scales and "
                   "amax histories bit for bit; keras.quantizers.quantize_and_dequantize on 10^6 random and edge "
                   "values",
                   "qref run --backend keras (scaled_qdq and delayed_scaling cases)")

_KERAS_INT8_EVIDENCE = ("tests/test_keras_recipes.py against keras 3.15.1 (JAX backend, jax 0.10.2 CPU, eager): "
                        "Dense quantize('int8') kernel codes, kernel scales and outputs, and "
                        "keras.quantizers.abs_max_quantize on 10^6 random and edge values, bit for bit",)

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
    Profile("keras", "recipe", "keras 3.15.1 Dense / EinsumDense quantize('float8') on the JAX backend, XLA:CPU, "
            "eager (QuantizedFloat8DTypePolicy, delayed scaling)",
            "E4M3 inputs and kernel / E5M2 output gradients, history 1024, margin 0, the Flax scale formula; each "
            "step casts with the stored scale and stores the scale computed from the history before this step's "
            "amax (one step later than Flax); x / s runs as x * fl(1 / s) when s is broadcast over more than one "
            "element (keras.ops.divide is one XLA computation, rewritten even eagerly); the dot runs on the "
            "dequantized float32 values; the float32 bias (and its gradient) is rounded through bfloat16.",
            rules=HybridRules(division="broadcast_reciprocal", cast_scale="stored", dot_operands="dequantized",
                              bias_rounding="bfloat16"),
            sources=("keras/src/layers/core/dense.py (_float8_build, _float8_call)",
                     "keras/src/layers/core/einsum_dense.py (_float8_build, _float8_call)",
                     "keras/src/quantizers/quantizers.py (compute_float8_scale, compute_float8_amax_history, "
                     "quantize_and_dequantize)", "docs/spec/recipes.md §14"),
            package="keras", versions="==3.15.1", status="verified", evidence=_KERAS_EVIDENCE),
    Profile("keras_int8", "recipe", "keras 3.15.1 Dense quantize('int8') on the JAX backend, XLA:CPU, eager",
            "Kernel: s_k = fl(127 / fl(amax + 1e-7)) per output column (numpy), q = clip(round(fl(k s_k))); "
            "input: the same per row at call time; y = fl(fl(int32 dot) / fl(s_k s_x)) + bias.",
            rules=AbsmaxMultiplierRules(),
            sources=("keras/src/layers/core/dense.py (quantize, _int8_call)",
                     "keras/src/quantizers/quantizers.py (abs_max_quantize, AbsMaxQuantizer)",
                     "docs/spec/recipes.md §15"),
            package="keras", versions="==3.15.1", status="verified", evidence=_KERAS_INT8_EVIDENCE),
)

for _p in PROFILES:
    register_profile(_p)


__all__ = ["PROFILES", "HybridRules"]
