"""ONNX Runtime (CPUExecutionProvider): ``Cast`` to and from the float8 types with ``saturate`` 1 and 0, float8
E8M0 (opset 24), float16 and bfloat16 (elements: ``saturate=1`` is the element profile ``onnxruntime``,
``saturate=0`` and the other Casts ``onnxruntime_no_saturate``; elements.md §6), and ``QuantizeLinear`` /
``DequantizeLinear`` (uniform profile ``onnx``).

Tensors of types numpy lacks (bfloat16, float8, int4) go in through ``OrtValue.ortvalue_from_numpy_with_onnx_type``
and come out as raw bytes (``io_binding`` and ``OrtValue.data_ptr``), so codes are read bit for bit.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..families.matmul import element_inputs
from ..families.uniform import scheme_of
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import (
    codes_as,
    element_signature,
    float_literal,
    python_c,
    run_element_groups,
    uniform_input,
    unsupported_reason,
)

BACKEND = "onnxruntime"
DISTRIBUTIONS = ("onnx", "onnxruntime")

#: qref type name -> (TensorProto name, bytes per element in memory or None for 4-bit packed)
ONNX_TYPES = {
    "float32": "FLOAT", "float64": "DOUBLE", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
    "float8_e4m3fn": "FLOAT8E4M3FN", "float8_e5m2": "FLOAT8E5M2", "float8_e4m3fnuz": "FLOAT8E4M3FNUZ",
    "float8_e5m2fnuz": "FLOAT8E5M2FNUZ", "float8_e8m0fnu": "FLOAT8E8M0", "float4_e2m1fn": "FLOAT4E2M1",
    "int8": "INT8", "uint8": "UINT8", "int16": "INT16", "uint16": "UINT16", "int32": "INT32", "uint32": "UINT32",
    "int4": "INT4", "uint4": "UINT4", "int2": "INT2", "uint2": "UINT2",
}
FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
#: opset per element type (E8M0 from 24, FLOAT4E2M1 from 23, int4 from 21)
OPSET = {"float8_e8m0fnu": 24, "float4_e2m1fn": 23}
PACKED = ("int4", "uint4", "float4_e2m1fn", "int2", "uint2")


def onnx_type(name: str) -> int:
    from onnx import TensorProto

    if name not in ONNX_TYPES:
        raise Unsupported(f"ONNX has no tensor type for {name}")
    return int(getattr(TensorProto, ONNX_TYPES[name]))


def pack(arr: np.ndarray, bits: int) -> np.ndarray:
    """Pack 4- or 2-bit codes little-endian first (element 0 in the low bits of byte 0), as ONNX stores them."""
    per = 8 // bits
    c = np.asarray(arr, dtype=np.uint8).reshape(-1) & ((1 << bits) - 1)
    c = np.concatenate([c, np.zeros((-c.size) % per, np.uint8)]).reshape(-1, per)
    return np.bitwise_or.reduce(c << (np.arange(per, dtype=np.uint8) * bits), axis=1).astype(np.uint8)


def unpack(raw: np.ndarray, bits: int, n: int) -> np.ndarray:
    per = 8 // bits
    r = np.asarray(raw, dtype=np.uint8).reshape(-1, 1)
    return ((r >> (np.arange(per, dtype=np.uint8) * bits)) & ((1 << bits) - 1)).reshape(-1)[:n].astype(np.uint8)


def session(model: Any) -> Any:
    import onnxruntime as ort

    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:
        msg = str(exc).strip().splitlines()[0]
        raise Unsupported(f"onnxruntime: {msg}") from None


def run_session(sess: Any, feeds: dict[str, tuple[np.ndarray, str]], out_type: str, n: int) -> np.ndarray:
    """Run with io_binding: feeds name -> (array of codes/values, qref type name); the single output is returned
    as unsigned codes (4-bit types unpacked) or raw values of its width."""
    import onnxruntime as ort

    b = sess.io_binding()
    keep = []
    for name, (arr, tname) in feeds.items():
        a = np.ascontiguousarray(arr)
        if tname in PACKED:  # allocate the tensor with its logical shape, then copy the packed bytes in
            packed = pack(a, 4 if "4" in tname else 2)
            v = ort.OrtValue.ortvalue_from_shape_and_type(list(a.shape), onnx_type(tname))
            ctypes.memmove(v.data_ptr(), packed.ctypes.data, packed.nbytes)
            keep.append(v)
            b.bind_ortvalue_input(name, v)
            continue
        keep.append(a)
        b.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a, onnx_type(tname)))
    out_name = sess.get_outputs()[0].name
    b.bind_output(out_name, "cpu")
    sess.run_with_iobinding(b)
    o = b.get_outputs()[0]
    size = int(o.tensor_size_in_bytes())
    raw = np.frombuffer(ctypes.string_at(o.data_ptr(), size), np.uint8).copy()
    if out_type in PACKED:
        return unpack(raw, 4 if "4" in out_type else 2, n)
    width = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2, "int32": 4,
             "uint32": 4}.get(out_type, 1)
    return raw.view(f"u{width}")


# ---- elements: Cast -----------------------------------------------------------------------------------------
def cast_model(src: str, dst: str, saturate: int | None) -> Any:
    from onnx import helper

    attrs = {} if saturate is None else {"saturate": saturate}
    node = helper.make_node("Cast", ["x"], ["y"], to=onnx_type(dst), **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx_type(src), [None])],
                          [helper.make_tensor_value_info("y", onnx_type(dst), [None])])
    opset = max(21, OPSET.get(src, 0), OPSET.get(dst, 0))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _cast_supports(saturating: bool):
    def supports(case: Case) -> str | None:
        op, fmt, _src, _out = element_signature(case)
        if fmt not in ONNX_TYPES or fmt.startswith(("int", "uint")):
            return f"ONNX Cast has no {fmt} type" if fmt not in ONNX_TYPES else \
                "float -> integer is QuantizeLinear (uniform family); Cast truncates"
        if saturating and (fmt not in FP8 or op == "decode"):
            return "saturate=1 applies to float8 results only (see onnxruntime.cast.nosaturate)"
        return None
    return supports


def _cast_sat(saturating: bool, fmt: str) -> int | None:
    if fmt in FP8:
        return 1 if saturating else 0
    return None


def _cast_run(saturating: bool):
    def prepare(sig: tuple[str, str, str, str]) -> tuple[Any, Any]:
        op, fmt, src, o = sig
        if op == "decode":
            return session(cast_model(fmt, o, None)), None
        first = session(cast_model(src, fmt, _cast_sat(saturating, fmt)))
        return first, session(cast_model(fmt, src, None)) if op == "quantize" else None

    def call(ready: tuple[Any, Any], sig: tuple[str, str, str, str], x: np.ndarray) -> np.ndarray:
        (first, back), (op, fmt, src, o) = ready, sig
        if op == "decode":
            return run_session(first, {"x": (x, fmt)}, o, x.size)
        y = run_session(first, {"x": (x, src)}, fmt, x.size)
        return y if back is None else run_session(back, {"x": (y, fmt)}, src, x.size)

    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_element_groups(cases, prepare, call)
    return run


_SNIPPET_HEAD = ("import ctypes, numpy as np, ml_dtypes, onnxruntime as ort",
                 "from onnx import helper, TensorProto as T")


def cast_snippet_parts(case: Case, saturating: bool) -> tuple[str, str, str, str, str, int, np.ndarray]:
    """For a Cast reproducer: (op, format, the Cast's input type, its output type, ", saturate=N" or "", opset,
    the flat input)."""
    op, fmt, src, out = element_signature(case)
    name = "codes" if op == "decode" else "x"
    a, b = (fmt, out) if op == "decode" else (src, fmt)
    sat = None if op == "decode" else _cast_sat(saturating, fmt)
    attrs = "" if sat is None else f", saturate={sat}"
    opset = max(21, OPSET.get(a, 0), OPSET.get(b, 0))
    return op, fmt, a, b, attrs, opset, case.inputs[name].reshape(-1)


def _cast_snippet(saturating: bool):
    def snippet(case: Case, i: int) -> str:
        op, _fmt, a, b, attrs, opset, x = cast_snippet_parts(case, saturating)
        if op == "decode" and x.dtype.itemsize == 1:
            lit = f"np.array([{int(x[i])}], np.uint8)"
        else:
            lit = float_literal(x, i) + (f".view(np.uint{8 * x.dtype.itemsize})" if x.dtype.name == "bfloat16" or
                                         op == "decode" else "")
        width = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}.get(b, 1)
        stmts = [
            *_SNIPPET_HEAD,
            f"g = helper.make_graph([helper.make_node('Cast', ['x'], ['y'], to=T.{ONNX_TYPES[b]}{attrs})], 'g', "
            f"[helper.make_tensor_value_info('x', T.{ONNX_TYPES[a]}, [None])], "
            f"[helper.make_tensor_value_info('y', T.{ONNX_TYPES[b]}, [None])])",
            "s = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid('', "
            f"{opset})]).SerializeToString(), providers=['CPUExecutionProvider'])",
            "bd = s.io_binding()", f"x = {lit}",
            f"bd.bind_ortvalue_input('x', ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x, T.{ONNX_TYPES[a]}))",
            "bd.bind_output('y', 'cpu'); s.run_with_iobinding(bd); o = bd.get_outputs()[0]",
            f"print(hex(int.from_bytes(ctypes.string_at(o.data_ptr(), {width}), 'little')))",
        ]
        if op == "quantize":
            return "# quantize = Cast to the format, then Cast back\n" + python_c(*stmts)
        return python_c(*stmts)
    return snippet


def targets() -> list[Target]:
    require("onnx", "onnxruntime", backend=BACKEND, hint="pip install onnx onnxruntime")
    ops = ("encode", "decode", "quantize")
    return [
        Target(BACKEND, "onnxruntime.cast.saturate", "elements", "Cast(to=float8*, saturate=1) (opset 21; E8M0 "
               "opset 24)", "onnxruntime", ("encode", "quantize"), _cast_supports(True), _cast_run(True),
               _cast_snippet(True)),
        Target(BACKEND, "onnxruntime.cast.nosaturate", "elements", "Cast(to=float8*, saturate=0); Cast to "
               "float16/bfloat16/float4; Cast from the float8 types", "onnxruntime_no_saturate", ops,
               _cast_supports(False), _cast_run(False), _cast_snippet(False)),
        _uniform_target(),
        *matmul_targets(),
        *ms_matmul_targets(),
        float_matmul_target(),
    ]


# ---- uniform: QuantizeLinear / DequantizeLinear ------------------------------------------------------------
def _initializer(name: str, arr: np.ndarray, tname: str) -> Any:
    from onnx import helper

    a = np.asarray(arr)
    if tname in ("float32", "float64"):
        return helper.make_tensor(name, onnx_type(tname), list(a.shape), a.astype(tname).reshape(-1).tolist())
    if tname in ("float16", "bfloat16") or tname in FP8 or tname == "float4_e2m1fn":
        import ml_dtypes

        dt = np.float16 if tname == "float16" else getattr(ml_dtypes, tname)
        raw = a.astype(np.float64).astype(np.float32).astype(dt)
        if tname in PACKED:
            raw = pack(raw.view(np.uint8), 4)
        return helper.make_tensor(name, onnx_type(tname), list(a.shape), raw.tobytes(), raw=True)
    vals = a.astype(np.int64)
    if tname in PACKED:
        bits_ = 4 if "4" in tname else 2
        return helper.make_tensor(name, onnx_type(tname), list(a.shape), pack(vals & ((1 << bits_) - 1), bits_)
                                  .tobytes(), raw=True)
    return helper.make_tensor(name, onnx_type(tname), list(a.shape), vals.reshape(-1).tolist())


def qdq_model(case: Case) -> tuple[Any, str, str]:
    """(model, input type, output type) of the QuantizeLinear / DequantizeLinear node for a uniform case."""
    from onnx import helper

    sch = scheme_of(case)
    st = sch.storage.name
    if st not in ONNX_TYPES:
        raise Unsupported(f"ONNX has no {st} tensor type (narrowed ranges and other widths are not ONNX types)")
    if sch.storage_range is not None:
        raise Unsupported("ONNX has no narrowed storage ranges")
    et = sch.expressed.name
    if et not in ("float32", "float16", "bfloat16"):
        raise Unsupported(f"ONNX scales are float32/float16/bfloat16, not {et}")
    attrs: dict[str, Any] = {}
    if sch.granularity == "per_axis":
        attrs["axis"] = sch.axis
    elif sch.granularity == "blocked":
        big = [(a, b) for a, b in sch.block_size or () if b > 1]
        if len(big) != 1:
            raise Unsupported("ONNX blocked quantization blocks exactly one axis")
        attrs["axis"], attrs["block_size"] = big[0]
    if st in FP8 or st == "float4_e2m1fn":
        attrs["saturate"] = int(sch.arithmetic.float_saturate) if case.operation == "uniform_quantize" else None
        attrs = {k: v for k, v in attrs.items() if v is not None}
    (iname,) = case.inputs
    shape = list(case.inputs[iname].shape)
    scale = _initializer("s", sch.scale_array, et)
    zp = _initializer("z", sch.zero_point_array, st)
    opset = max(21, OPSET.get(st, 0), 25 if st in ("int2", "uint2") else 0)
    if case.operation == "uniform_quantize":
        xt = case.inputs["x"].dtype.name
        if xt != et:
            raise Unsupported(f"QuantizeLinear takes x and y_scale of one type ({xt} input, {et} scale)")
        node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
        it, ot = xt, st
    else:
        (oname,) = case.expected
        ot = case.expected[oname].dtype.name
        if ot != et:
            raise Unsupported(f"DequantizeLinear returns the scale's type {et}, the case asks for {ot}")
        node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)
        it = st
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx_type(it), shape)],
                          [helper.make_tensor_value_info("y", onnx_type(ot), shape)], initializer=[scale, zp])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), it, ot


_uq_supports = unsupported_reason(qdq_model)


def _uq_one(case: Case) -> Outputs:
    model, it, ot = qdq_model(case)
    x = uniform_input(case)
    if it in PACKED:
        x = x.astype(np.int64) & 0xF
    y = run_session(session(model), {"x": (x.astype(np.uint8) if it in PACKED else x, it)}, ot, x.size)
    (oname,) = case.expected
    return {oname: codes_as(case, oname, y.reshape(case.expected[oname].shape))}


def _uq_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    return run_each(cases, _uq_one)


def qdq_snippet_parts(one: Case) -> tuple[Any, str, str, str, str, float, float]:
    """For a one-element case's reproducer: (model, input type, output type, op name, ", name=value" attributes,
    scale, zero point as a float)."""
    from onnx import numpy_helper

    model, it, ot = qdq_model(one)
    op = "QuantizeLinear" if one.operation == "uniform_quantize" else "DequantizeLinear"
    attrs = "".join(f", {a.name}={a.i}" for a in model.graph.node[0].attribute)
    s_init, z_init = model.graph.initializer
    sv = float(numpy_helper.to_array(s_init).astype(np.float64).reshape(-1)[0])
    zv = float(np.asarray(numpy_helper.to_array(z_init)).astype(np.float64).reshape(-1)[0])
    return model, it, ot, op, attrs, sv, zv


def _uq_snippet(case: Case, i: int) -> str:
    from ._common import single_element_case

    one = single_element_case(case, i)
    model, it, ot, op, attrs, sv, zf = qdq_snippet_parts(one)
    zv = int(zf)
    x = uniform_input(one)
    if it in PACKED:
        lit = f"np.array([{int(x.reshape(-1)[0]) & 0xF}], np.uint8)"
    elif x.dtype.kind == "f":
        lit = float_literal(x, 0)
    else:
        lit = f"np.array([{int(x.reshape(-1)[0])}], np.{x.dtype.name})"
    zmake = f"helper.make_tensor('z', T.{ONNX_TYPES[one.scheme['storage']]}, [], [{zv}])"
    return python_c(
        *_SNIPPET_HEAD,
        f"g = helper.make_graph([helper.make_node('{op}', ['x', 's', 'z'], ['y']{attrs})], "
        f"'g', [helper.make_tensor_value_info('x', T.{ONNX_TYPES[it]}, [1])], "
        f"[helper.make_tensor_value_info('y', T.{ONNX_TYPES[ot]}, [1])], initializer=["
        f"helper.make_tensor('s', T.{ONNX_TYPES[one.scheme['expressed']]}, [], [{sv!r}]), {zmake}])",
        "s = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid('', "
        f"{model.opset_import[0].version})]).SerializeToString(), providers=['CPUExecutionProvider'])",
        "bd = s.io_binding()", f"x = {lit}",
        f"bd.bind_ortvalue_input('x', ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x, T.{ONNX_TYPES[it]}))",
        "bd.bind_output('y', 'cpu'); s.run_with_iobinding(bd); o = bd.get_outputs()[0]",
        "print(hex(int.from_bytes(ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes()), 'little')"
        f"{' & 0xF' if ot in PACKED else ''}))")


def _uniform_target() -> Target:
    return Target(BACKEND, "onnxruntime.qdq", "uniform", "QuantizeLinear / DequantizeLinear (opset 21; int2 25), "
                  "per tensor, per axis, blocked; saturate for float8 outputs", "onnx",
                  ("uniform_quantize", "uniform_dequantize"), _uq_supports, _uq_run, _uq_snippet)


# ---- matmul: MatMulInteger / QLinearMatMul (matmul.md §6.1) ------------------------------------------------
MATMUL_INPUTS = {"matmul_integer": ("a", "b", "a_zero_point", "b_zero_point"),
                 "qlinear_matmul": ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
                                    "y_zero_point")}
MATMUL_OPS = {"matmul_integer": "MatMulInteger", "qlinear_matmul": "QLinearMatMul"}


def matmul_unsupported(case: Case) -> str | None:
    """Why ONNX's MatMulInteger / QLinearMatMul cannot express the case (None: it can)."""
    if "bias" in case.inputs:
        return "MatMulInteger and QLinearMatMul have no bias input"
    p = case.params
    if any(p.get(k) not in (None, "int8", "uint8") for k in ("a_storage", "b_storage", "output")):
        return "ONNX MatMulInteger / QLinearMatMul take 8-bit operands"
    return None


def matmul_model(case: Case, inputs: dict[str, np.ndarray] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
    """(one-node model, feeds): every operand and quantization parameter is a graph input (no constant folding
    or weight prepacking), shapes as the case holds them."""
    from onnx import helper

    ins = dict(case.inputs if inputs is None else inputs)
    names = MATMUL_INPUTS[case.operation]
    feeds = {n: np.ascontiguousarray(ins[n]) for n in names}
    vi = [helper.make_tensor_value_info(n, onnx_type(feeds[n].dtype.name), list(feeds[n].shape)) for n in names]
    M, N = feeds["a"].shape[0], feeds["b"].shape[1]
    ot = "int32" if case.operation == "matmul_integer" else feeds["y_zero_point"].dtype.name
    node = helper.make_node(MATMUL_OPS[case.operation], list(names), ["y"])
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", onnx_type(ot), [M, N])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), feeds


matmul_element_inputs = element_inputs  # (matmul.md §2) the name the other adapters import


def matmul_literal(v: np.ndarray) -> str:
    """Python source of a small integer / float32 array: runs of equal values as np.repeat."""
    from ._common import array_literal

    v = np.asarray(v)
    flat = v.reshape(-1)
    if v.dtype.kind == "f" or flat.size < 8:
        return array_literal(v)
    edges = np.flatnonzero(np.diff(flat.astype(np.int64))) + 1
    starts = np.concatenate([[0], edges])
    counts = np.diff(np.concatenate([starts, [flat.size]]))
    if starts.size * 2 >= flat.size:
        return array_literal(v)
    vals = ", ".join(str(int(x)) for x in flat[starts])
    cnts = ", ".join(str(int(c)) for c in counts)
    return f"np.repeat(np.array([{vals}], np.{v.dtype.name}), [{cnts}]).reshape({tuple(v.shape)})"


def matmul_snippet_lines(case: Case, i: int) -> tuple[list[str], list[str]]:
    """(statements defining the one-element inputs as numpy arrays, the graph construction statements)."""
    ins = matmul_element_inputs(case, i)
    names = MATMUL_INPUTS[case.operation]
    defs = [f"{n} = {matmul_literal(ins[n])}" for n in names]
    ot = "INT32" if case.operation == "matmul_integer" else ONNX_TYPES[ins["y_zero_point"].dtype.name]
    vis = ", ".join(f"helper.make_tensor_value_info('{n}', T.{ONNX_TYPES[ins[n].dtype.name]}, {list(ins[n].shape)})"
                    for n in names)
    graph = [f"g = helper.make_graph([helper.make_node('{MATMUL_OPS[case.operation]}', {list(names)}, ['y'])], "
             f"'g', [{vis}], [helper.make_tensor_value_info('y', T.{ot}, [1, 1])])",
             "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 21)])"]
    return defs, graph


def matmul_supports(op: str) -> Callable[[Case], str | None]:
    """A target's ``supports`` for the cases of operation ``op``: matmul_unsupported's reason, else None."""
    def supports(case: Case) -> str | None:
        return None if case.operation != op else matmul_unsupported(case)
    return supports


def _mm_one(case: Case) -> Outputs:
    import onnxruntime as ort

    model, feeds = matmul_model(case)
    # a model ONNX Runtime has no kernel for is a failure to run an operator it exposes: a crash, not Unsupported
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = sess.run(None, feeds)[0]
    return {"y": np.asarray(y).astype(case.expected["y"].dtype)}


def _mm_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    return run_each(cases, _mm_one)


def matmul_snippet(case: Case, i: int, imports: tuple[str, ...], run: Callable[[str], tuple[str, ...]]) -> str:
    """The standalone script of one matmul case: imports, the model m (matmul_snippet_lines), ``run(feeds)``
    (lines that set y from the feeds dict literal), and y's first element printed as hex bits."""
    defs, graph = matmul_snippet_lines(case, i)
    feeds = ", ".join(f"'{n}': {n}" for n in MATMUL_INPUTS[case.operation])
    return python_c(*imports, *defs, *graph, *run(feeds),
                    f"print(hex(int(y.reshape(-1).view(np.uint{8 * case.expected['y'].dtype.itemsize})[0])))")


def _mm_snippet(case: Case, i: int) -> str:
    return matmul_snippet(
        case, i, ("import numpy as np, onnxruntime as ort", "from onnx import helper, TensorProto as T"),
        lambda feeds: ("s = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])",
                       f"y = s.run(None, {{{feeds}}})[0]"))


def matmul_targets() -> list[Target]:
    return [
        Target(BACKEND, "onnxruntime.matmul_integer", "matmul", "MatMulInteger (opset 21; u8/s8 operands, int32 "
               "out; every input a graph input)", "onnxruntime", ("matmul_integer",), matmul_supports("matmul_integer"),
               _mm_run, _mm_snippet, notes="MLAS picks its u8 x s8 kernel by cpuid (AVX-512 VNNI here)"),
        Target(BACKEND, "onnxruntime.qlinear_matmul", "matmul", "QLinearMatMul (opset 21; u8 x u8/s8 -> u8, "
               "s8 x s8 -> s8; every input a graph input)", "onnxruntime", ("qlinear_matmul",),
               matmul_supports("qlinear_matmul"), _mm_run, _mm_snippet),
    ]


# ---- matmul: com.microsoft MatMulIntegerToFloat / DynamicQuantizeMatMul / MatMulNBits (matmul.md §8-§10) ------
MS_INPUTS = {"matmul_integer_to_float": ("a", "b", "a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias"),
             "dynamic_quantize_matmul": ("a", "b", "b_scale", "b_zero_point", "bias"),
             "qgemm": ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "c", "y_scale", "y_zero_point")}
MS_OPS = {"matmul_integer_to_float": "MatMulIntegerToFloat", "dynamic_quantize_matmul": "DynamicQuantizeMatMul",
          "qgemm": "QGemm"}
MS_OPSETS = "[helper.make_opsetid('', 21), helper.make_opsetid('com.microsoft', 1)]"
#: accuracy_level -> the operation whose cases it runs (matmul.md §10: 0 and 1 compute in float32, 4 in int8)
NBITS_LEVELS = {0: "matmul_nbits", 1: "matmul_nbits", 4: "matmul_nbits_int8"}


def _ms_opsets() -> list[Any]:
    from onnx import helper

    return [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]


def ms_matmul_model(case: Case, inputs: dict[str, np.ndarray] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
    """(one-node com.microsoft model, feeds) of a matmul_integer_to_float / dynamic_quantize_matmul case: every
    input a graph input (no weight prepacking)."""
    from onnx import helper

    ins = dict(case.inputs if inputs is None else inputs)
    names = [n for n in MS_INPUTS[case.operation] if n in ins]
    feeds = {n: np.ascontiguousarray(ins[n]) for n in names}
    vi = [helper.make_tensor_value_info(n, onnx_type(feeds[n].dtype.name), list(feeds[n].shape)) for n in names]
    M, N = feeds["a"].shape[0], feeds["b"].shape[1]
    node_in = [n if n in feeds else "" for n in MS_INPUTS[case.operation]]
    while node_in[-1] == "":
        node_in.pop()
    attrs = {"alpha": float(case.params["alpha"])} if case.operation == "qgemm" else {}
    node = helper.make_node(MS_OPS[case.operation], node_in, ["y"], domain="com.microsoft", **attrs)
    ot = "float32" if "y_zero_point" not in feeds else feeds["y_zero_point"].dtype.name
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", onnx_type(ot), [M, N])])
    return helper.make_model(g, opset_imports=_ms_opsets()), feeds


def _ms_supports(op: str):
    def supports(case: Case) -> str | None:
        if case.operation != op:
            return None
        p = case.params
        if op in ("matmul_integer_to_float", "qgemm") and (p["a_storage"], p["b_storage"]) == ("int8", "uint8"):
            return f"{MS_OPS[op]} has kernels for u8 x u8/s8 and s8 x s8 only"
        return None
    return supports


def _ms_one(case: Case) -> Outputs:
    import onnxruntime as ort

    model, feeds = ms_matmul_model(case)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = np.asarray(sess.run(None, feeds)[0])
    return {"y": y.astype(case.expected["y"].dtype) if y.dtype.kind in "iu" else
            y.astype(np.float32).view(np.uint32).view(case.expected["y"].dtype)}


def _ms_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    return run_each(cases, _ms_one)


def _ms_snippet(case: Case, i: int) -> str:
    m, n = divmod(int(i), int(case.params["n"]))
    ins = dict(case.inputs)
    one = dict(ins)
    if case.operation in ("matmul_integer_to_float", "qgemm"):
        one = matmul_element_inputs(case, i)
    else:  # the dynamic quantization reads the whole of A: keep A, take column n of b
        for name, v in ins.items():
            v = np.asarray(v)
            one[name] = v[:, n:n + 1] if name == "b" else (v[n:n + 1] if v.ndim == 1 and v.size > 1 else v)
    names = [k for k in MS_INPUTS[case.operation] if k in one]
    defs = [f"{k} = {matmul_literal(one[k])}" for k in names]
    vis = ", ".join(f"helper.make_tensor_value_info('{k}', T.{ONNX_TYPES[one[k].dtype.name]}, {list(one[k].shape)})"
                    for k in names)
    node_in = [k if k in one else "" for k in MS_INPUTS[case.operation]]
    while node_in[-1] == "":
        node_in.pop()
    rows = one["a"].shape[0]
    attrs = f", alpha={float(case.params['alpha'])!r}" if case.operation == "qgemm" else ""
    ot = "FLOAT" if "y_zero_point" not in one else ONNX_TYPES[one["y_zero_point"].dtype.name]
    width = 32 if ot == "FLOAT" else 8
    row = m if case.operation == "dynamic_quantize_matmul" else 0
    feeds = ", ".join(f"'{k}': {k}" for k in names)
    return python_c(
        "import numpy as np, onnxruntime as ort", "from onnx import helper, TensorProto as T", *defs,
        f"g = helper.make_graph([helper.make_node('{MS_OPS[case.operation]}', {node_in}, ['y'], "
        f"domain='com.microsoft'{attrs})], 'g', [{vis}], [helper.make_tensor_value_info('y', T.{ot}, [{rows}, 1])])",
        f"mdl = helper.make_model(g, opset_imports={MS_OPSETS})",
        "s = ort.InferenceSession(mdl.SerializeToString(), providers=['CPUExecutionProvider'])",
        f"y = s.run(None, {{{feeds}}})[0]",
        f"print(hex(int(y.reshape(-1).view(np.uint{width})[{row}])))")


def nbits_pack(codes: np.ndarray, zero_points: np.ndarray | None, block: int) -> tuple[np.ndarray, np.ndarray | None]:
    """MatMulNBits' layouts: B (N, K) uint4 codes -> (N, n_blocks, block / 2) bytes, element 2i in the low nibble
    (K padded with zeros to whole blocks); zero points (N, n_blocks) -> (N, ceil(n_blocks / 2)) bytes, block 2j in
    the low nibble."""
    N, K = codes.shape
    nb = -(-K // block)
    q = np.zeros((N, nb * block), np.uint8)
    q[:, :K] = codes
    q = q.reshape(N, nb, block)
    b = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    if zero_points is None:
        return b, None
    z = np.zeros((N, nb + nb % 2), np.uint8)
    z[:, :nb] = zero_points
    return b, (z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8)


def nbits_model(case: Case, level: int, inputs: dict[str, np.ndarray] | None = None) -> Any:
    """A one-node MatMulNBits model (bits 4, the case's block size, ``accuracy_level`` level): A a graph input;
    B, scales, zero points and bias initializers (ORT prepacks constant weights: accuracy_level 4 runs the int8
    kernels only then)."""
    from onnx import helper, numpy_helper

    ins = dict(case.inputs if inputs is None else inputs)
    block = int(case.params["block_size"])
    M, K = ins["a"].shape
    N = ins["b_codes"].shape[0]
    b, z = nbits_pack(ins["b_codes"], ins.get("zero_points"), block)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(ins["scales"].reshape(-1), "s")]
    names = ["a", "b", "s"]
    if z is not None:
        inits.append(numpy_helper.from_array(z.reshape(-1), "z"))
    names.append("z" if z is not None else "")
    if "bias" in ins:
        inits.append(numpy_helper.from_array(ins["bias"], "bias"))
        names += ["", "bias"]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulNBits", names, ["y"], domain="com.microsoft", K=K, N=N, bits=4,
                            block_size=block, accuracy_level=level)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", onnx_type("float32"), [M, K])],
                          [helper.make_tensor_value_info("y", onnx_type("float32"), [M, N])], initializer=inits)
    return helper.make_model(g, opset_imports=_ms_opsets())


def _nbits_supports(level: int):
    def supports(case: Case) -> str | None:
        return None
    return supports


def _nbits_run(level: int):
    def one(case: Case) -> Outputs:
        import onnxruntime as ort

        sess = ort.InferenceSession(nbits_model(case, level).SerializeToString(), providers=["CPUExecutionProvider"])
        y = np.asarray(sess.run(None, {"a": case.inputs["a"]})[0], dtype=np.float32)
        return {"y": y}

    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        from ._common import run_each

        return run_each(cases, one)
    return run


def _nbits_snippet(level: int):
    def snippet(case: Case, i: int) -> str:
        m, n = divmod(int(i), int(case.params["n"]))
        ins = dict(case.inputs)
        block = int(case.params["block_size"])
        a = ins["a"][m:m + 1]
        b, z = nbits_pack(ins["b_codes"][n:n + 1], None if "zero_points" not in ins else ins["zero_points"][n:n + 1],
                          block)
        K = a.shape[1]
        init = [f"nh.from_array(np.array({b.reshape(-1).tolist()}, np.uint8).reshape({b.shape}), 'b')",
                f"nh.from_array({matmul_literal(ins['scales'][n])}, 's')"]
        names = ["a", "b", "s", "z" if z is not None else ""]
        if z is not None:
            init.append(f"nh.from_array(np.array({z.reshape(-1).tolist()}, np.uint8), 'z')")
        if "bias" in ins:
            init.append(f"nh.from_array({matmul_literal(ins['bias'][n:n + 1])}, 'bias')")
            names += ["", "bias"]
        while names[-1] == "":
            names.pop()
        return python_c(
            "import numpy as np, onnxruntime as ort", "from onnx import helper, numpy_helper as nh, TensorProto as T",
            f"a = {matmul_literal(a)}",
            f"g = helper.make_graph([helper.make_node('MatMulNBits', {names}, ['y'], domain='com.microsoft', K={K}, "
            f"N=1, bits=4, block_size={block}, accuracy_level={level})], 'g', "
            f"[helper.make_tensor_value_info('a', T.FLOAT, [1, {K}])], "
            f"[helper.make_tensor_value_info('y', T.FLOAT, [1, 1])], initializer=[{', '.join(init)}])",
            f"mdl = helper.make_model(g, opset_imports={MS_OPSETS})",
            "s = ort.InferenceSession(mdl.SerializeToString(), providers=['CPUExecutionProvider'])",
            "y = s.run(None, {'a': a})[0]", "print(hex(int(y.reshape(-1).view(np.uint32)[0])))")
    return snippet


def bnb4_pack(codes: np.ndarray) -> np.ndarray:
    """MatMulBnb4's layout (bitsandbytes): the (N, K) codes flattened, two per byte, the first in the high nibble."""
    flat = np.asarray(codes, np.uint8).reshape(-1)
    flat = np.concatenate([flat, np.zeros(flat.size % 2, np.uint8)])
    return ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8)


def bnb4_model(case: Case, inputs: dict[str, np.ndarray] | None = None) -> Any:
    """A one-node MatMulBnb4 model: A a graph input, the packed codes and absmax initializers."""
    from onnx import helper, numpy_helper

    ins = dict(case.inputs if inputs is None else inputs)
    M, K = ins["a"].shape
    N = ins["b_codes"].shape[0]
    node = helper.make_node("MatMulBnb4", ["a", "b", "absmax"], ["y"], domain="com.microsoft", K=K, N=N,
                            block_size=int(case.params["block_size"]),
                            quant_type=1 if case.params["quant_type"] == "nf4" else 0)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", onnx_type("float32"), [M, K])],
                          [helper.make_tensor_value_info("y", onnx_type("float32"), [M, N])],
                          initializer=[numpy_helper.from_array(bnb4_pack(ins["b_codes"]), "b"),
                                       numpy_helper.from_array(ins["absmax"], "absmax")])
    return helper.make_model(g, opset_imports=_ms_opsets())


def _bnb4_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    import onnxruntime as ort

    from ._common import run_each

    def one(case: Case) -> Outputs:
        sess = ort.InferenceSession(bnb4_model(case).SerializeToString(), providers=["CPUExecutionProvider"])
        return {"y": np.asarray(sess.run(None, {"a": case.inputs["a"]})[0], dtype=np.float32)}

    return run_each(cases, one)


def _bnb4_snippet(case: Case, i: int) -> str:
    """The whole weight (its blocks run over the flattened (N, K) codes), row m of A, output element (m, n)."""
    m, n = divmod(int(i), int(case.params["n"]))
    ins = case.inputs
    a = ins["a"][m:m + 1]
    N, K = ins["b_codes"].shape
    qt = 1 if case.params["quant_type"] == "nf4" else 0
    return python_c(
        "import numpy as np, onnxruntime as ort", "from onnx import helper, numpy_helper as nh, TensorProto as T",
        f"a = {matmul_literal(a)}", f"b = np.array({bnb4_pack(ins['b_codes']).tolist()}, np.uint8)",
        f"absmax = {matmul_literal(ins['absmax'])}",
        f"g = helper.make_graph([helper.make_node('MatMulBnb4', ['a', 'b', 'absmax'], ['y'], domain='com.microsoft', "
        f"K={K}, N={N}, block_size={int(case.params['block_size'])}, quant_type={qt})], 'g', "
        f"[helper.make_tensor_value_info('a', T.FLOAT, [1, {K}])], [helper.make_tensor_value_info('y', T.FLOAT, "
        f"[1, {N}])], initializer=[nh.from_array(b, 'b'), nh.from_array(absmax, 'absmax')])",
        f"mdl = helper.make_model(g, opset_imports={MS_OPSETS})",
        "s = ort.InferenceSession(mdl.SerializeToString(), providers=['CPUExecutionProvider'])",
        "y = s.run(None, {'a': a})[0]", f"print(hex(int(y.reshape(-1).view(np.uint32)[{n}])))")


def ms_matmul_targets() -> list[Target]:
    out = [
        Target(BACKEND, "onnxruntime.matmul_integer_to_float", "matmul", "com.microsoft MatMulIntegerToFloat (u8 x "
               "u8/s8, s8 x s8 -> float32; per-tensor a scale, per-tensor or per-column b scale and zero point; "
               "float bias; every input a graph input)", "onnxruntime", ("matmul_integer_to_float",),
               _ms_supports("matmul_integer_to_float"), _ms_run, _ms_snippet,
               notes="MLAS picks its u8 x s8 kernel by cpuid (AVX-512 VNNI here)"),
        Target(BACKEND, "onnxruntime.dynamic_quantize_matmul", "matmul", "com.microsoft DynamicQuantizeMatMul "
               "(float32 A quantized to uint8 per tensor, u8/s8 B, float bias; every input a graph input)",
               "onnxruntime", ("dynamic_quantize_matmul",), _ms_supports("dynamic_quantize_matmul"), _ms_run,
               _ms_snippet),
        Target(BACKEND, "onnxruntime.qgemm", "matmul", "com.microsoft QGemm (alpha, int32 C, float32 or u8/s8 "
               "output; transA = transB = 0; every input a graph input)", "onnxruntime", ("qgemm",),
               _ms_supports("qgemm"), _ms_run, _ms_snippet,
               notes="MLAS picks its u8 x s8 kernel by cpuid (AVX-512 VNNI here)"),
    ]
    for level in (0, 1, 4):
        op = NBITS_LEVELS[level]
        out.append(Target(BACKEND, f"onnxruntime.matmul_nbits.l{level}", "matmul", f"com.microsoft MatMulNBits "
                          f"(bits 4, accuracy_level {level}; B, scales, zero points, bias initializers)",
                          "onnxruntime", (op,), _nbits_supports(level), _nbits_run(level), _nbits_snippet(level),
                          notes="compared within the bound of matmul.md §10.3 (the float32 order is not pinned)"))
    out.append(Target(BACKEND, "onnxruntime.matmul_bnb4", "matmul", "com.microsoft MatMulBnb4 (NF4 / FP4, blocks over "
                      "the flattened (N, K) weight; codes and absmax initializers)", "onnxruntime", ("matmul_bnb4",),
                      lambda case: None, _bnb4_run, _bnb4_snippet,
                      notes="compared within the bound of matmul.md §10.3 (the float32 order is not pinned)"))
    return out


# ---- float32 MatMul (MLAS sgemm): the fitted CPU GEMM profile (mma.md §12.2) ------------------------------------
#: the fitted record of MatMul with intra_op_num_threads = 1 (qref.mma.cpu_profiles.ORT_MLAS_1T)
FLOAT_MATMUL_PROFILE = "onnxruntime-1.32-mlas-sgemm-1-thread"


def _float_matmul_model(M: int, K: int, N: int) -> Any:
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [K, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _float_matmul_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    import onnxruntime as ort

    from ._common import run_each

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # the fitted record's thread count (the threaded partition is not fitted)
    opts.inter_op_num_threads = 1

    def one(case: Case) -> Outputs:
        a, b = np.array(case.inputs["a"], np.float32), np.array(case.inputs["b"], np.float32)
        sess = ort.InferenceSession(_float_matmul_model(*a.shape, b.shape[1]).SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        return {"y": np.asarray(sess.run(None, {"a": a, "b": b})[0], np.float32)}

    return run_each(cases, one)


def _float_matmul_snippet(case: Case, i: int) -> str:
    """The whole product (the kernel's order depends on M, N, K), output element i."""
    a, b = case.inputs["a"], case.inputs["b"]
    M, K = a.shape
    N = b.shape[1]
    return python_c(
        "import numpy as np, onnxruntime as ort", "from onnx import helper, TensorProto as T",
        f"a = {matmul_literal(a)}.reshape({M}, {K})", f"b = {matmul_literal(b)}.reshape({K}, {N})",
        "g = helper.make_graph([helper.make_node('MatMul', ['a', 'b'], ['y'])], 'g', "
        f"[helper.make_tensor_value_info('a', T.FLOAT, [{M}, {K}]), helper.make_tensor_value_info('b', T.FLOAT, "
        f"[{K}, {N}])], [helper.make_tensor_value_info('y', T.FLOAT, [{M}, {N}])])",
        "o = ort.SessionOptions(); o.intra_op_num_threads = 1",
        "s = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])"
        ".SerializeToString(), o, providers=['CPUExecutionProvider'])",
        "y = s.run(None, {'a': a, 'b': b})[0]", f"print(hex(int(y.reshape(-1).view(np.uint32)[{int(i)}])))")


def float_matmul_target() -> Target:
    return Target(BACKEND, "onnxruntime.matmul_float", "matmul", "MatMul (opset 17), float32 (M, K) x (K, N), "
                  "CPUExecutionProvider, intra_op_num_threads = 1", FLOAT_MATMUL_PROFILE, ("float_matmul",),
                  lambda case: None, _float_matmul_run, _float_matmul_snippet,
                  notes="held bit for bit to its fitted CPU GEMM profile (MLAS's AVX-512F sgemm kernel; mma.md "
                        "§12.2); within the bound of mma.md §10.4 but other bits is drift")


__all__ = ["BACKEND", "DISTRIBUTIONS", "ONNX_TYPES", "PACKED", "cast_model", "cast_snippet_parts",
           "float_matmul_target", "matmul_element_inputs", "matmul_literal", "matmul_model", "matmul_snippet",
           "matmul_supports", "ms_matmul_targets", "qdq_model", "qdq_snippet_parts", "targets"]
