"""Keras 3 on the JAX backend (``KERAS_BACKEND=jax``, XLA:CPU, eager): the scaled cast of its float8 training
recipe, ``keras.quantizers.quantize_and_dequantize`` (recipe profile ``keras``, recipes.md §14), on the suite's
scaled_qdq cases, and its scale / amax-history update (``compute_float8_scale``, ``compute_float8_amax_history``)
on the delayed_scaling cases (the scale a step computes; Keras casts with it from the next step on).

The function returns only the dequantized values y = fl(decode(cast(clip(x / s, -max, max))) * s); the codes are
read from the same Keras ops it runs first (``keras.ops.divide``, ``clip``, ``cast``). Keras's float8 training
steps (Dense.quantize("float8")) and its int8 Dense are held to qref by tests/test_keras_recipes.py; the suite has
no case of a whole training step or of a layer that quantizes its float inputs itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target
from . import require
from ._common import codes_as, python_c, run_each, suite_input

BACKEND = "keras"
DISTRIBUTIONS = ("keras",)
#: the float8 dtypes Keras 3.15 accepts (keras.src.backend.common.dtypes.ALLOWED_DTYPES)
FORMATS = ("float8_e4m3fn", "float8_e5m2")


def _keras():
    os.environ["KERAS_BACKEND"] = "jax"  # before the first import of keras; a different backend is refused below
    import keras

    if keras.config.backend() != "jax":
        raise RuntimeError(f"keras was imported with backend {keras.config.backend()!r}; set KERAS_BACKEND=jax")
    return keras


def _supports(case: Case) -> str | None:
    if case.format["name"] not in FORMATS:
        return f"Keras 3.15 has no dtype {case.format['name']} (its float8 dtypes: {', '.join(FORMATS)})"
    return None


def _cast_one(case: Case) -> Outputs:
    import ml_dtypes

    keras = _keras()
    ops = keras.ops
    fmt = case.format["name"]
    x = ops.convert_to_tensor(case.inputs["x"])
    s = ops.convert_to_tensor(case.inputs["scale"])
    m = ops.cast(float(ml_dtypes.finfo(getattr(ml_dtypes, fmt)).max), "float32")
    c = ops.cast(ops.clip(ops.divide(x, ops.cast(s, "float32")), -m, m), fmt)
    y = keras.quantizers.quantize_and_dequantize(x, s, fmt, "float32")
    return {"codes": codes_as(case, "codes", np.asarray(c).view(np.uint8)),
            "y": codes_as(case, "y", np.asarray(y, dtype=np.float32))}


def _cast_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _cast_one)


def _cast_snippet(case: Case, i: int) -> str:
    fmt = case.format["name"]
    out = getattr(case, "_output", "codes")
    s = np.asarray(case.inputs["scale"], np.float32).reshape(-1)[0]
    if out == "codes":
        expr = (f"keras.ops.cast(keras.ops.clip(keras.ops.divide(x, s), -m, m), '{fmt}')", "np.uint8")
    else:
        expr = (f"keras.quantizers.quantize_and_dequantize(x, s, '{fmt}', 'float32')", "np.uint32")
    return python_c("import os; os.environ['KERAS_BACKEND'] = 'jax'",
                    "import numpy as np, ml_dtypes, keras",
                    f"x = keras.ops.convert_to_tensor({suite_input(case, 'x')})",
                    f"s = keras.ops.convert_to_tensor(np.array([{s.view(np.uint32):#x}], np.uint32)"
                    ".view(np.float32))",
                    f"m = keras.ops.cast(float(ml_dtypes.finfo(ml_dtypes.{fmt}).max), 'float32')",
                    f"print(hex(int(np.asarray({expr[0]}).reshape(-1).view({expr[1]})[{i}])))")


# ---- delayed scaling: keras.quantizers.compute_float8_scale / compute_float8_amax_history (recipes.md §4, §14) ----
def _ds_supports(case: Case) -> str | None:
    p = case.params
    if case.format["name"] not in FORMATS:
        return f"Keras 3.15 has no dtype {case.format['name']}"
    if p["amax_compute"] != "max":
        return "Keras 3.15 takes the maximum of the amax history (ops.max); it has no amax_compute 'most_recent'"
    if not p["ftz"]:
        return ("the case asks for IEEE gradual underflow; Keras on XLA:CPU flushes float32 subnormals (the "
                "flush-to-zero case of the same amax sequence runs)")
    if p["margin"] != 0:
        return "Dense calls compute_float8_scale with margin 0"
    return None


def _ds_one(case: Case) -> Outputs:
    import ml_dtypes

    keras = _keras()
    ops, kq = keras.ops, keras.quantizers
    m = ops.cast(float(ml_dtypes.finfo(getattr(ml_dtypes, case.format["name"])).max), "float32")
    scale = ops.convert_to_tensor(np.asarray(case.inputs["scale0"], np.float32).reshape(()))
    hist = ops.convert_to_tensor(np.asarray(case.inputs["history0"], np.float32))
    scales, hists = [], []
    for a in np.asarray(case.inputs["amax"], np.float32).reshape(-1, 1):
        scale = kq.compute_float8_scale(ops.max(hist, axis=0), scale, m)
        hist = kq.compute_float8_amax_history(ops.convert_to_tensor(a), hist)
        scales.append(np.asarray(scale, np.float32).reshape(()))
        hists.append(np.asarray(hist, np.float32))
    return {"scales": codes_as(case, "scales", np.stack(scales)), "histories": codes_as(case, "histories",
                                                                                      np.stack(hists))}


def _ds_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _ds_one)


def _ds_snippet(case: Case, i: int) -> str:
    out = getattr(case, "_output", "scales")
    fmt = case.format["name"]
    am = np.asarray(case.inputs["amax"], np.float32).reshape(-1).view(np.uint32)
    s0 = np.asarray(case.inputs["scale0"], np.float32).reshape(-1)[0].view(np.uint32)
    L = int(case.params["history_length"])
    return python_c("import os; os.environ['KERAS_BACKEND'] = 'jax'",
                    "import numpy as np, ml_dtypes, keras",
                    "ops, kq = keras.ops, keras.quantizers",
                    f"amax = np.array([{', '.join(hex(int(v)) for v in am)}], np.uint32).view(np.float32)",
                    f"scale = ops.convert_to_tensor(np.array({int(s0):#x}, np.uint32).view(np.float32))",
                    f"hist = ops.zeros(({L},), 'float32')" if not np.any(case.inputs["history0"]) else
                    f"hist = ops.convert_to_tensor({suite_input(case, 'history0')})",
                    f"m = ops.cast(float(ml_dtypes.finfo(ml_dtypes.{fmt}).max), 'float32')",
                    "out = []",
                    "for a in amax.reshape(-1, 1):",
                    "    scale = kq.compute_float8_scale(ops.max(hist, axis=0), scale, m)",
                    "    hist = kq.compute_float8_amax_history(ops.convert_to_tensor(a), hist)",
                    f"    out.append(np.asarray({'scale' if out == 'scales' else 'hist'}, np.float32).reshape(-1))",
                    f"print(hex(int(np.concatenate(out).view(np.uint32)[{i}])))")


def targets() -> list[Target]:
    os.environ["KERAS_BACKEND"] = "jax"  # read by keras at its first import (require imports it)
    require("keras", backend=BACKEND, hint="pip install keras")
    return [
        Target(BACKEND, "keras.quantize_and_dequantize", "recipes",
               "y = keras.quantizers.quantize_and_dequantize(x, s, fmt, 'float32'), codes = keras.ops.cast("
               "keras.ops.clip(keras.ops.divide(x, s), -max, max), fmt) (KERAS_BACKEND=jax, eager XLA:CPU: the "
               "scaled cast of Dense.quantize('float8'))", "keras", ("scaled_qdq",), _supports, _cast_run,
               _cast_snippet),
        Target(BACKEND, "keras.float8_delayed_scaling", "recipes",
               "per step: scale = keras.quantizers.compute_float8_scale(keras.ops.max(history, axis=0), scale, "
               "max), history = keras.quantizers.compute_float8_amax_history(amax_t, history) (KERAS_BACKEND=jax, "
               "eager XLA:CPU; the variable updates of Dense.quantize('float8'))", "keras", ("delayed_scaling",),
               _ds_supports, _ds_run, _ds_snippet),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
