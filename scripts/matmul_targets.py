"""Real CPU matmuls as fn(A, B) -> D on numpy arrays, for ``qref probe-matmul --callable matmul_targets:NAME``
(docs/accumulation.md). Each calls the library only; threads: the library's default unless the environment
sets them (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, torch.set_num_threads via QREF_TORCH_THREADS)."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np


def numpy_f32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return A @ B


def _torch():
    import torch

    n = os.environ.get("QREF_TORCH_THREADS")
    if n:
        torch.set_num_threads(int(n))
    return torch


def _t(x: np.ndarray):  # numpy (incl. ml_dtypes bfloat16 / float8) -> torch tensor with the same bits
    torch = _torch()
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    if x.dtype == ml_dtypes.float8_e4m3fn:
        return torch.from_numpy(x.view(np.uint8).copy()).view(torch.float8_e4m3fn)
    return torch.from_numpy(x.copy())


def _n(t) -> np.ndarray:  # torch -> numpy with the same bits
    torch = _torch()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def torch_f32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _n(_torch().matmul(_t(A), _t(B)))


def torch_bf16(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _n(_torch().matmul(_t(A), _t(B)))


def torch_f16(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _n(_torch().matmul(_t(A), _t(B)))


def torch_scaled_mm_e4m3(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    torch = _torch()
    one = torch.tensor(1.0)
    b = _t(np.ascontiguousarray(B.T)).t()  # column-major B, as _scaled_mm requires
    return _n(torch._scaled_mm(_t(A), b, scale_a=one, scale_b=one, out_dtype=torch.float32))


def _jax_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    out = jax.lax.dot_general(jnp.asarray(A), jnp.asarray(B), (((1,), (0,)), ((), ())),
                              preferred_element_type=jnp.float32)
    return np.asarray(out)


jax_f32 = jax_bf16_f32 = jax_f16_f32 = jax_e4m3_f32 = _jax_dot


def ort_f32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["D"])], "mm",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("B", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("D", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = ort.SessionOptions()
    n = os.environ.get("QREF_ORT_THREADS")
    if n:
        so.intra_op_num_threads = int(n)
    s = ort.InferenceSession(onnx._serialize(m) if hasattr(onnx, "_serialize") else m.SerializeToString(), so,
                             providers=["CPUExecutionProvider"])
    return s.run(None, {"A": A, "B": B})[0]


def mlx_f32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    return np.array(mx.matmul(mx.array(A), mx.array(B)))
