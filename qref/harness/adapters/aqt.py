"""AQT (aqtp, on JAX, XLA:CPU): the int8 x int8 ``dot_general`` with a dequantized float32 output (matmul.md §16)
on ``matmul_integer_to_float`` cases.

AQT's public ``dot_general`` takes float operands and quantizes them with its own calibration; the integer
product and its dequantization, which this target tests, are ``aqt_dot_general._qtensor_dot_general`` on
``QTensor``s built from the case's codes and scales (per-tensor A scale broadcast to (M, 1), B scales (1, N)),
with the forward configuration of ``config.fully_quantized(fwd_bits=8)`` (DequantMode.OUTPUT on both sides,
int32 accumulator), then ``QTensor.dequant()`` (float32). Three modes: eager, jitted with the scales as
arguments, jitted with the scales closed over (compile-time constants).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target
from . import require
from ._common import jax_dot_modes, python_c, run_each

BACKEND = "aqt"
DISTRIBUTIONS = ("aqtp", "jax", "jaxlib")
MODES = ("eager", "jit", "jit_constant_scales")
#: mode -> the qref matmul profile (XLA folds the two scale products when the scales are jit constants)
PROFILES = {"eager": "aqt_int8_dot", "jit": "aqt_int8_dot", "jit_constant_scales": "xla_folded_scales"}
_HOW = {"eager": "eager (op by op)", "jit": "under jax.jit with the scales as arguments",
        "jit_constant_scales": "under jax.jit with the scales closed over (compile-time constants)"}


def _supports(case: Case) -> str | None:
    if case.operation != "matmul_integer_to_float":
        return "AQT's dot_general dequantizes the output of quantized operands"
    p, ins = case.params, case.inputs
    if (p["a_storage"], p["b_storage"]) != ("int8", "int8"):
        return "AQT's int32 accumulator takes int8 x int8 operands"
    if np.any(np.asarray(ins["a_zero_point"]) != 0) or np.any(np.asarray(ins["b_zero_point"]) != 0):
        return "AQT's int8 dot is symmetric (a QTensor has scales and an output bias, no zero point)"
    if "bias" in ins:
        return "AQT's dot_general has no bias input"
    return None


def aqt_int8_dot(a: np.ndarray, b: np.ndarray, a_scale: Any, b_scale: Any, mode: str) -> np.ndarray:
    """AQT's int8 x int8 dot of A (M, K) and B (K, N) dequantized to float32 (module docstring)."""
    import jax
    import jax.numpy as jnp
    from aqt.jax.v2 import aqt_dot_general, aqt_tensor
    from aqt.jax.v2 import config as aqt_config

    jax.config.update("jax_platforms", "cpu")
    fwd = aqt_config.fully_quantized(fwd_bits=8, bwd_bits=8).fwd
    M, N = a.shape[0], b.shape[1]
    sa = jnp.asarray(np.broadcast_to(np.asarray(a_scale, np.float32).reshape(-1)[:1], (M, 1)))
    sb = jnp.asarray(np.broadcast_to(np.asarray(b_scale, np.float32).reshape(1, -1), (1, N)))
    dims = (((1,), (0,)), ((), ()))

    def dot(qa: Any, qb: Any, s_a: Any, s_b: Any) -> Any:
        lq = aqt_tensor.QTensor(qvalue=qa, scale=[s_a], scale_t=None, bias=[], dequant_dtype=jnp.float32)
        rq = aqt_tensor.QTensor(qvalue=qb, scale=[s_b], scale_t=None, bias=[], dequant_dtype=jnp.float32)
        return aqt_dot_general._qtensor_dot_general(lq, rq, dims, fwd, jnp.float32).dequant()

    return jax_dot_modes(jax, dot, jnp.asarray(a), jnp.asarray(b), sa, sb, mode)


def _run(mode: str):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        def one(case: Case) -> Outputs:
            ins = case.inputs
            return {"y": aqt_int8_dot(ins["a"], ins["b"], ins["a_scale"], ins["b_scale"], mode).astype(np.float32)}
        return run_each(cases, one)
    return run


def _snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        from .onnxruntime import matmul_element_inputs, matmul_literal

        ins = matmul_element_inputs(case, i)
        call = {"eager": "dot(a, b, sa, sb)", "jit": "jax.jit(dot)(a, b, sa, sb)",
                "jit_constant_scales": "jax.jit(lambda x, w: dot(x, w, sa, sb))(a, b)"}[mode]
        return python_c(
            "import numpy as np, jax, jax.numpy as jnp",
            "from aqt.jax.v2 import aqt_dot_general, aqt_tensor, config",
            "fwd = config.fully_quantized(fwd_bits=8, bwd_bits=8).fwd",
            f"a = jnp.asarray({matmul_literal(ins['a'])})",
            f"b = jnp.asarray({matmul_literal(ins['b'])})",
            f"sa = jnp.full((1, 1), {float(np.asarray(ins['a_scale']).reshape(-1)[0])!r}, jnp.float32)",
            f"sb = jnp.full((1, 1), {float(np.asarray(ins['b_scale']).reshape(-1)[0])!r}, jnp.float32)",
            "qt = lambda q, s: aqt_tensor.QTensor(qvalue=q, scale=[s], scale_t=None, bias=[], "
            "dequant_dtype=jnp.float32)",
            "dot = lambda x, w, s, t: aqt_dot_general._qtensor_dot_general(qt(x, s), qt(w, t), (((1,), (0,)), ((), "
            "())), fwd, jnp.float32).dequant()",
            f"y = np.asarray({call})",
            "print(hex(int(y.reshape(-1).view(np.uint32)[0])))")
    return snippet


def targets() -> list[Target]:
    require("jax", "aqt.jax.v2.aqt_dot_general", backend=BACKEND, hint="pip install aqtp")
    return [Target(BACKEND, f"aqt.int8_dot.{m}", "matmul", "AQT _qtensor_dot_general(QTensor(A, [a_s]), "
                   "QTensor(B, [b_s])) with fully_quantized(fwd_bits=8).fwd (int32 accumulator, DequantMode.OUTPUT), "
                   f"then QTensor.dequant() (float32), XLA:CPU, {_HOW[m]}", PROFILES[m], ("matmul_integer_to_float",),
                   _supports, _run(m), _snippet(m)) for m in MODES]


__all__ = ["BACKEND", "DISTRIBUTIONS", "PROFILES", "aqt_int8_dot", "targets"]
