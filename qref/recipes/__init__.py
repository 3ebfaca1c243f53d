"""FP8 training recipes and reference ops with explicit numerics (spec: docs/spec/recipes.md).

- ``scaling``: amax, current scaling formulas (Flax, amax / max, powers of two; per tensor, axis or block),
  scaled casts, and ``DelayedScaling`` (the amax-history recipe of flax.linen.fp8_ops).
- ``ops``: ``qdq_matmul`` with a declared accumulation, ``block_dot`` / ``block_matmul`` for MX and NVFP4
  QArrays (OCP MX v1.0 §6), each returning the exact (correctly rounded) result and a rigorous error bound for
  implementation-defined orders; ``xla_cpu`` and ``mlx_cpu``: the emulations of ``jax.lax.scaled_dot`` and of
  MLX ``quantized_matmul`` / ``qqmm`` built on them.
- ``linear``: training-recipe records per tensor role and GEMM (``TrainingRecipe``, ``OperandRule``,
  ``get_recipe``) and ``linear_step`` (fprop, dgrad, wgrad of one linear layer; exact, or on a matrix unit).
- ``absmax``: abs-max int8 quantization with multiplier scales and the int8 Dense forward built on it.
- ``training``: the hybrid E4M3 / E5M2 recipe, a numpy reference of a Dense layer under Flax's
  ``Fp8DirectDotGeneralOp`` (forward and backward), and 8-bit blockwise optimizer-state quantization.
"""

from ..profiles.recipe import AbsmaxMultiplierRules
from .absmax import absmax_dense, absmax_quantize
from .linear import RECIPES, LinearStep, OperandRule, TrainingRecipe, get_recipe, linear_step
from .mlx_cpu import mlx_qqmm, mlx_quantized_matmul
from .ops import Accumulation, MatmulResult, block_dot, block_matmul, exact_matmul, qdq_matmul
from .qmatmul import (
    IntAccumulation,
    IntMatmulRules,
    IntOperand,
    QuantizedMatmul,
    Requantization,
    int_accumulate,
    matmul_rules,
    quantized_matmul,
)
from .scaling import (
    DelayedScaling,
    ScalingState,
    amax,
    compute_scale,
    current_scale,
    expand_scale,
    qdq,
    scaled_dequantize,
    scaled_quantize,
)
from .training import (
    PRESETS,
    AdamState8bit,
    DenseStep,
    Fp8DotState,
    HybridRecipe,
    adam8bit_step,
    dense_fp8_step,
    dequantize_blockwise,
    quantize_blockwise,
    sgd,
)
from .xla_cpu import jax_scaled_dot

__all__ = [
    "PRESETS",
    "RECIPES",
    "AbsmaxMultiplierRules",
    "Accumulation",
    "AdamState8bit",
    "DelayedScaling",
    "DenseStep",
    "Fp8DotState",
    "HybridRecipe",
    "IntAccumulation",
    "IntMatmulRules",
    "IntOperand",
    "LinearStep",
    "MatmulResult",
    "OperandRule",
    "QuantizedMatmul",
    "Requantization",
    "ScalingState",
    "TrainingRecipe",
    "absmax_dense",
    "absmax_quantize",
    "adam8bit_step",
    "amax",
    "block_dot",
    "block_matmul",
    "compute_scale",
    "current_scale",
    "dense_fp8_step",
    "dequantize_blockwise",
    "exact_matmul",
    "expand_scale",
    "get_recipe",
    "int_accumulate",
    "jax_scaled_dot",
    "linear_step",
    "matmul_rules",
    "mlx_qqmm",
    "mlx_quantized_matmul",
    "qdq",
    "qdq_matmul",
    "quantize_blockwise",
    "quantized_matmul",
    "scaled_dequantize",
    "scaled_quantize",
    "sgd",
]
