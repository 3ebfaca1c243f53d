"""The ONNX reference evaluator (``onnx.reference.ReferenceEvaluator``, the numpy implementation that ships with
the ``onnx`` package and defines the operators' examples): the same one-node models as the onnxruntime targets,
run by the evaluator instead of a runtime.

Elements: ``Cast`` to and from the float8 types with ``saturate`` 1 and 0, float8 E8M0 (opset 24), float4, float16
and bfloat16 (``saturate=1`` is the element profile ``saturating``, ``saturate=0`` has no qref profile: the spec
default is its reference). Uniform: ``QuantizeLinear`` / ``DequantizeLinear`` per tensor, per axis and blocked
(opset 21; int2 25), float8 / float4 / int4 / uint4 / int2 / uint2 outputs, ``saturate`` on float outputs
(uniform profile ``onnx``: the operator schema; where the evaluator differs from the schema, the difference is a
finding of this backend).

The evaluator takes and returns numpy arrays, the types numpy lacks as ml_dtypes arrays (bfloat16, float8,
float4, int4, int2), so inputs are built and outputs read bit for bit with ``view``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import (
    codes_as,
    first_literal,
    float_literal,
    per_case,
    python_c,
    run_elements,
    single_element_case,
    uniform_input,
    unsupported_reason,
)
from .onnxruntime import (
    ONNX_TYPES,
    PACKED,
    _cast_sat,
    _cast_supports,
    cast_model,
    cast_snippet_parts,
    matmul_model,
    matmul_snippet,
    matmul_supports,
    qdq_model,
    qdq_snippet_parts,
)

BACKEND = "onnx_reference"
DISTRIBUTIONS = ("onnx", "ml_dtypes")

_HEAD = ("import numpy as np, ml_dtypes", "from onnx import helper, TensorProto as T",
         "from onnx.reference import ReferenceEvaluator")


def _np_dtype(name: str) -> np.dtype:
    """The numpy dtype the evaluator uses for a qref type name (ml_dtypes for the types numpy lacks)."""
    import ml_dtypes

    if name in ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32"):
        return np.dtype(name)
    return np.dtype(getattr(ml_dtypes, name))


def _dtype_src(name: str) -> str:
    if name in ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32"):
        return f"np.{name}"
    return f"ml_dtypes.{name}"


def evaluate(model: Any, x: np.ndarray) -> np.ndarray:
    """Run a one-input model with the reference evaluator (its numpy warnings, e.g. a NaN cast to an integer,
    are part of what is tested, not errors)."""
    from onnx.reference import ReferenceEvaluator

    try:
        ev = ReferenceEvaluator(model)
    except Exception as exc:
        raise Unsupported(f"onnx.reference: {str(exc).strip().splitlines()[0]}") from None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(ev.run(None, {"x": x})[0])


def _bits(y: np.ndarray) -> np.ndarray:
    """The evaluator's output as unsigned integers of its width (4- and 2-bit types: the byte ml_dtypes holds)."""
    y = np.ascontiguousarray(y)
    return y.view(f"u{y.dtype.itemsize}")


# ---- elements: Cast -----------------------------------------------------------------------------------------
def _cast_run(saturating: bool):
    def call(sig: tuple[str, str, str, str], x: np.ndarray) -> np.ndarray:
        op, fmt, src, o = sig
        if op == "decode":
            dt = _np_dtype(fmt)
            return _bits(evaluate(cast_model(fmt, o, None), x.astype(f"u{dt.itemsize}").view(dt)))
        xin = x.view(_np_dtype("bfloat16")) if x.dtype.name == "bfloat16" else x
        y = evaluate(cast_model(src, fmt, _cast_sat(saturating, fmt)), xin)
        if op == "quantize":
            y = evaluate(cast_model(fmt, src, None), y)
        return _bits(y)

    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_elements(cases, call)
    return run


def _model_src(node: str, it: str, ot: str, opset: int, shape: str = "[None]", inits: str = "") -> tuple[str, ...]:
    init = f", initializer=[{inits}]" if inits else ""
    return (f"g = helper.make_graph([{node}], 'g', [helper.make_tensor_value_info('x', T.{ONNX_TYPES[it]}, "
            f"{shape})], [helper.make_tensor_value_info('y', T.{ONNX_TYPES[ot]}, {shape})]{init})",
            f"m = helper.make_model(g, opset_imports=[helper.make_opsetid('', {opset})])")


def _printer(ot: str, mask: str = "") -> str:
    w = _np_dtype(ot).itemsize
    return f"print(hex(int(np.asarray(y).reshape(-1).view(np.uint{8 * w})[0]){mask}))"


def _cast_snippet(saturating: bool):
    def snippet(case: Case, i: int) -> str:
        op, fmt, a, b, attrs, opset, x = cast_snippet_parts(case, saturating)
        if op == "decode":
            w = _np_dtype(fmt).itemsize
            lit = f"np.array([{hex(int(x[i]))}], np.uint{8 * w}).view({_dtype_src(fmt)})"
        else:
            lit = float_literal(x, i)
        node = f"helper.make_node('Cast', ['x'], ['y'], to=T.{ONNX_TYPES[b]}{attrs})"
        stmts = [*_HEAD, *_model_src(node, a, b, opset), f"x = {lit}",
                 "y = ReferenceEvaluator(m).run(None, {'x': x})[0]"]
        if op == "quantize":
            back = f"helper.make_node('Cast', ['x'], ['y'], to=T.{ONNX_TYPES[a]})"
            stmts += [_model_src(back, b, a, opset)[0].replace("g = ", "g2 = "),
                      "y = ReferenceEvaluator(helper.make_model(g2, opset_imports=m.opset_import)).run(None, "
                      "{'x': y})[0]"]
        return python_c(*stmts, _printer(a if op == "quantize" else b))
    return snippet


# ---- uniform: QuantizeLinear / DequantizeLinear ------------------------------------------------------------
def _uq_input(case: Case, it: str) -> np.ndarray:
    v = uniform_input(case)
    if case.operation == "uniform_quantize":
        return v.view(_np_dtype("bfloat16")) if v.dtype.name == "bfloat16" else v.copy()
    dt = _np_dtype(it)
    if it.startswith("float"):  # float storage: the codes' bits
        return np.ascontiguousarray(v).astype(f"u{dt.itemsize}").view(dt)
    return v.astype(dt)  # integer storage: the values, converted to the storage type (int4 etc. exactly)


def _uq_model(case: Case) -> tuple[Any, str, str]:
    """onnxruntime's one-node model of the case, checked against the operator schema (the evaluator itself runs
    types the schema does not list, e.g. int32 outputs, and fails on them late)."""
    import onnx

    model, it, ot = qdq_model(case)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise Unsupported(f"the ONNX schema rejects the model: {str(exc).strip().splitlines()[0]}") from None
    return model, it, ot


_uq_supports = unsupported_reason(_uq_model)


def _uq_one(case: Case) -> Outputs:
    model, it, _ot = _uq_model(case)
    y = evaluate(model, _uq_input(case, it))
    (oname,) = case.expected
    return {oname: codes_as(case, oname, _bits(y).reshape(case.expected[oname].shape))}


def _uq_snippet(case: Case, i: int) -> str:
    one = single_element_case(case, i)
    model, it, ot, op, attrs, sv, zv = qdq_snippet_parts(one)
    zlit = repr(zv) if one.scheme["storage"].startswith("float") else str(int(zv))
    x = _uq_input(one, it).reshape(-1)
    if x.dtype.kind in "fiu" or x.dtype.name == "bfloat16":
        lit = first_literal(x)
    elif it.startswith("float"):  # float8 / float4 codes
        lit = f"np.array([{hex(int(x.view(np.uint8)[0]))}], np.uint8).view({_dtype_src(it)})"
    else:  # int4 / int2 storage values
        lit = f"np.array([{int(x.astype(np.int64)[0])}]).astype({_dtype_src(it)})"
    inits = (f"helper.make_tensor('s', T.{ONNX_TYPES[one.scheme['expressed']]}, [], [{sv!r}]), "
             f"helper.make_tensor('z', T.{ONNX_TYPES[one.scheme['storage']]}, [], [{zlit}])")
    nd = f"helper.make_node('{op}', ['x', 's', 'z'], ['y']{attrs})"
    mask = f" & {hex((1 << (4 if '4' in ot else 2)) - 1)}" if ot in PACKED and not ot.startswith("float") else ""
    return python_c(*_HEAD, *_model_src(nd, it, ot, model.opset_import[0].version, "[1]", inits), f"x = {lit}",
                    "y = ReferenceEvaluator(m).run(None, {'x': x})[0]", _printer(ot, mask))


def targets() -> list[Target]:
    require("onnx", "onnx.reference", "ml_dtypes", backend=BACKEND, hint="pip install onnx")
    return [
        Target(BACKEND, "onnx_reference.cast.saturate", "elements", "ReferenceEvaluator(Cast(to=float8*, "
               "saturate=1)) (opset 21; E8M0 opset 24)", "saturating", ("encode", "quantize"), _cast_supports(True),
               _cast_run(True), _cast_snippet(True)),
        Target(BACKEND, "onnx_reference.cast.nosaturate", "elements", "ReferenceEvaluator(Cast(to=float8*, "
               "saturate=0)); Cast to float16/bfloat16/float4; Cast from the float8 types", None,
               ("encode", "decode", "quantize"), _cast_supports(False), _cast_run(False), _cast_snippet(False)),
        Target(BACKEND, "onnx_reference.qdq", "uniform", "ReferenceEvaluator(QuantizeLinear / DequantizeLinear) "
               "(opset 21; int2 25), per tensor, per axis, blocked; saturate for float8 outputs", "onnx",
               ("uniform_quantize", "uniform_dequantize"), _uq_supports, per_case(_uq_one), _uq_snippet),
        Target(BACKEND, "onnx_reference.matmul_integer", "matmul", "ReferenceEvaluator(MatMulInteger) (opset 21)",
               "onnx_reference", ("matmul_integer",), matmul_supports("matmul_integer"), per_case(_mm_one),
               _mm_snippet),
        Target(BACKEND, "onnx_reference.qlinear_matmul", "matmul", "ReferenceEvaluator(QLinearMatMul) (opset 21)",
               "onnx_reference", ("qlinear_matmul",), matmul_supports("qlinear_matmul"), per_case(_mm_one),
               _mm_snippet),
    ]


# ---- matmul: MatMulInteger / QLinearMatMul (matmul.md §6.2) ------------------------------------------------
def _mm_one(case: Case) -> Outputs:
    from onnx.reference import ReferenceEvaluator

    model, feeds = matmul_model(case)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        y = ReferenceEvaluator(model).run(None, feeds)[0]
    return {"y": np.asarray(y).astype(case.expected["y"].dtype)}


def _mm_snippet(case: Case, i: int) -> str:
    return matmul_snippet(case, i, ("import numpy as np", "from onnx import helper, TensorProto as T",
                                    "from onnx.reference import ReferenceEvaluator"),
                          lambda feeds: (f"y = np.asarray(ReferenceEvaluator(m).run(None, {{{feeds}}})[0])",))


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
