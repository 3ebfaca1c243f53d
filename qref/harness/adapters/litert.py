"""LiteRT (ai-edge-litert, TFLite's runtime): quantized FULLY_CONNECTED and BATCH_MATMUL (matmul family,
matmul.md §6.6), each under the interpreter's three kernel choices:

- ``ref``: ``OpResolverType.BUILTIN_REF``, the reference kernels (profile ``litert_reference`` for
  FULLY_CONNECTED; BATCH_MATMUL: ``litert_batch_matmul``, gemmlowp's double rounding);
- ``optimized``: ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, the optimized kernels (FULLY_CONNECTED: ruy's 8-bit
  kernel, ``litert_optimized``; BATCH_MATMUL: ``litert_batch_matmul``);
- ``xnnpack``: ``AUTO`` (the default interpreter), which hands int8 operators to the XNNPACK delegate
  (``litert_xnnpack``); a case XNNPACK does not take (int16, a BATCH_MATMUL zero point) stays on the builtin
  kernels and is reported unsupported for this target.

Each case becomes a one-operator .tflite flatbuffer written with the schema module that ships inside
ai-edge-litert: FULLY_CONNECTED takes ``a`` (M, K) as its input and ``b`` transposed (N, K) as constant weights
(scales and zero points per tensor or per output channel, as the case holds them: TFLite's quantization spec
wants int8 weights symmetric, the kernels accept others) with the case's int32 bias (int64 for int16
activations, TFLite's int16x8 bias type); BATCH_MATMUL takes ``a`` and ``b`` as two inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..families.matmul import element_inputs
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import array_literal, codes_as, element_signature, per_case, python_c, raise_unsupported

BACKEND = "litert"
DISTRIBUTIONS = ("ai-edge-litert",)
KINDS = {"ref": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}
OPS = {"fully_connected": "FULLY_CONNECTED", "batch_matmul": "BATCH_MATMUL", "batch_matmul_int16": "BATCH_MATMUL",
       "quantize": "QUANTIZE", "dequantize": "DEQUANTIZE"}
#: the dynamic-range FULLY_CONNECTED (matmul.md §17): (kernel choice, asymmetric_quantize_inputs) -> profile
HYBRID_PROFILES = {("ref", False): "litert_hybrid_symmetric", ("ref", True): "litert_hybrid_asymmetric",
                   ("optimized", False): "litert_hybrid_symmetric", ("optimized", True): "litert_hybrid_asymmetric",
                   ("xnnpack", False): "litert_hybrid_xnnpack"}
PROFILES = {("fully_connected", "ref"): "litert_reference", ("fully_connected", "optimized"): "litert_optimized",
            ("fully_connected", "xnnpack"): "litert_xnnpack", ("batch_matmul", "ref"): "litert_batch_matmul",
            ("batch_matmul", "optimized"): "litert_batch_matmul", ("batch_matmul", "xnnpack"): "litert_xnnpack",
            ("batch_matmul_int16", "ref"): "litert_batch_matmul_int16",
            ("batch_matmul_int16", "optimized"): "litert_batch_matmul_int16"}
TYPES = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
         "float32": "FLOAT32", "int4": "INT4", "uint4": "UINT4", "float16": "FLOAT16"}


# ---- the flatbuffer (one operator) -------------------------------------------------------------------------
def tensor_specs(op: str, ins: dict[str, np.ndarray], storages: tuple[str, str, str]
                 ) -> tuple[list[tuple], list[int], list[int]]:
    """(tensors, subgraph inputs, operator inputs) of the one-operator model of matmul.md §6.6: each tensor is
    (name, type, shape, constant data or None, scales, zero points)."""
    a_st, b_st, y_st = storages
    a, b = np.asarray(ins["a"]), np.asarray(ins["b"])
    M, K = a.shape
    N = b.shape[1]
    a_s, b_s = np.asarray(ins["a_scale"], np.float32).reshape(-1), np.asarray(ins["b_scale"], np.float32).reshape(-1)
    za, zb = np.asarray(ins["a_zero_point"]).reshape(-1), np.asarray(ins["b_zero_point"]).reshape(-1)
    y = ("y", y_st, (M, N), None, np.asarray(ins["y_scale"], np.float32).reshape(-1),
         np.asarray(ins["y_zero_point"]).reshape(-1))
    ta = ("a", a_st, (M, K), None, a_s, za)
    if op == "fully_connected":
        n = max(b_s.size, zb.size)  # one (scale, zero point) per output channel, or one for the tensor
        tw = ("w", b_st, (N, K), np.ascontiguousarray(b.T), np.broadcast_to(b_s, (n,)), np.broadcast_to(zb, (n,)))
        tensors = [ta, tw]
        op_in = [0, 1, -1]
        if "bias" in ins:
            bias_t = "int64" if a_st == "int16" else "int32"
            bs = (a_s[0] * b_s).astype(np.float32)  # the bias scale TFLite checks: a_s * w_s in float32
            tensors.append(("bias", bias_t, (N,), np.asarray(ins["bias"]).astype(bias_t), bs,
                            np.zeros(bs.size, np.int64)))
            op_in[2] = 2
        tensors.append(y)
        return tensors, [0], op_in
    tensors = [ta, ("b", b_st, (K, N), None, b_s, zb), y]
    return tensors, [0, 1], [0, 1]


def model_bytes(op: str, tensors: list[tuple], inputs: list[int], op_inputs: list[int], *,
                asymmetric_quantize_inputs: bool = False, quantized_dimension: int = 0) -> bytes:
    """The .tflite flatbuffer of one FULLY_CONNECTED / BATCH_MATMUL / QUANTIZE / DEQUANTIZE operator (output: the
    last tensor). A tensor with no scales (a float tensor) has no quantization; ``asymmetric_quantize_inputs`` is
    FULLY_CONNECTED's option for a float32 input with int8 weights (the dynamic-range product, matmul.md §17);
    ``quantized_dimension`` the axis of per-axis scales."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S

    m = S.ModelT()
    m.version = 3
    oc = S.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = getattr(S.BuiltinOperator, OPS[op])
    oc.version = 1
    m.operatorCodes, m.buffers = [oc], [S.BufferT()]
    sg = S.SubGraphT()
    sg.tensors = []
    for name, t, shape, data, scale, zp in tensors:
        tt = S.TensorT()
        tt.shape, tt.type, tt.name = list(shape), getattr(S.TensorType, TYPES[t]), name.encode()
        buf = S.BufferT()
        if data is not None:
            buf.data = np.ascontiguousarray(data).tobytes()
        m.buffers.append(buf)
        tt.buffer = len(m.buffers) - 1
        if len(scale):
            qp = S.QuantizationParametersT()
            qp.scale, qp.zeroPoint = [float(v) for v in scale], [int(v) for v in zp]
            qp.quantizedDimension = quantized_dimension
            tt.quantization = qp
        sg.tensors.append(tt)
    sg.inputs, sg.outputs = inputs, [len(tensors) - 1]
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, op_inputs, [len(tensors) - 1]
    if op == "fully_connected":
        opts = S.FullyConnectedOptionsT()
        opts.asymmetricQuantizeInputs = asymmetric_quantize_inputs
        o.builtinOptionsType, o.builtinOptions = S.BuiltinOptions.FullyConnectedOptions, opts
    elif op in ("batch_matmul", "batch_matmul_int16"):
        o.builtinOptionsType, o.builtinOptions = S.BuiltinOptions.BatchMatMulOptions, S.BatchMatMulOptionsT()
    sg.operators, m.subgraphs = [o], [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def invoke(buf: bytes, feeds: Sequence[np.ndarray], kind: str) -> tuple[np.ndarray, list[str]]:
    """Run the model with kernel choice ``kind``: (output, the executed nodes' names; "DELEGATE" when XNNPACK
    took the operator)."""
    from ai_edge_litert import interpreter as L

    it = L.Interpreter(model_content=buf, experimental_op_resolver_type=getattr(L.OpResolverType, KINDS[kind]))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], np.ascontiguousarray(x))
    it.invoke()
    ops = [str(o["op_name"]) for o in it._get_ops_details()]
    return it.get_tensor(it.get_output_details()[0]["index"]).copy(), ops


# ---- targets ---------------------------------------------------------------------------------------------
def unsupported(case: Case, op: str) -> str | None:
    """Why TFLite's FULLY_CONNECTED / BATCH_MATMUL cannot express the case (None: it can)."""
    if case.operation != "qlinear_matmul":
        return "TFLite has no integer matmul with an int32 accumulator output"
    p, ins = case.params, case.inputs
    a_st, b_st, y_st = p["a_storage"], p["b_storage"], p["output"]
    if np.asarray(ins["a_scale"]).size > 1:
        return "TFLite quantizes activations per tensor (no per-row a scale)"
    if op == "fully_connected":
        if (a_st, b_st, y_st) not in (("int8", "int8", "int8"), ("int16", "int8", "int16"),
                                      ("uint8", "uint8", "uint8")):
            return "FULLY_CONNECTED takes int8 x int8 -> int8, int16 x int8 -> int16 and uint8 x uint8 -> uint8"
        if a_st == "uint8" and (np.asarray(ins["b_scale"]).size > 1 or np.asarray(ins["b_zero_point"]).size > 1):
            return "FULLY_CONNECTED takes per-channel weights with int8 / int16 activations only (uint8: per tensor)"
    else:
        if a_st != b_st or a_st != y_st or a_st not in ("int8", "int16"):
            return "BATCH_MATMUL takes two operands and an output of one type (int8 or int16)"
        if "bias" in ins:
            return "BATCH_MATMUL has no bias input"
        if np.asarray(ins["b_scale"]).size > 1 or np.asarray(ins["b_zero_point"]).size > 1:
            return "BATCH_MATMUL quantizes both operands per tensor"
        if (a_st == "int16") != (op == "batch_matmul_int16"):
            return ("int16 BATCH_MATMUL runs another kernel (int64 accumulator, Q15 multiplier): targets "
                    "litert.batch_matmul_int16.*" if a_st == "int16" else "int8 BATCH_MATMUL: targets "
                    "litert.batch_matmul.*")
    if a_st == "int16" and (np.any(np.asarray(ins["a_zero_point"]) != 0) or np.any(np.asarray(ins["y_zero_point"]) != 0)
                            or np.any(np.asarray(ins["b_zero_point"]) != 0)):
        return "TFLite's int16 tensors are symmetric (zero point 0)"
    return None


def hybrid_tensors(ins: dict[str, np.ndarray]) -> tuple[list[tuple], list[int], list[int]]:
    """The dynamic-range FULLY_CONNECTED (matmul.md §17): float32 input a (M, K), int8 weights b transposed (N, K)
    with the case's scales (zero points 0), the float32 bias, a float32 output."""
    a, b = np.asarray(ins["a"]), np.asarray(ins["b"])
    M, K = a.shape
    N = b.shape[1]
    ws = np.asarray(ins["b_scale"], np.float32).reshape(-1)
    tensors = [("x", "float32", (M, K), None, [], []),
               ("w", "int8", (N, K), np.ascontiguousarray(b.T), ws, np.zeros(ws.size, np.int64))]
    op_in = [0, 1, -1]
    if "bias" in ins:
        tensors.append(("bias", "float32", (N,), np.asarray(ins["bias"], np.float32), [], []))
        op_in[2] = 2
    tensors.append(("y", "float32", (M, N), None, [], []))
    return tensors, [0], op_in


def problem(case: Case, op: str) -> tuple[bytes, list[np.ndarray]]:
    p = case.params
    tensors, inputs, op_in = tensor_specs(op, case.inputs, (p["a_storage"], p["b_storage"], p["output"]))
    feeds = [np.asarray(case.inputs["a"])] + ([np.asarray(case.inputs["b"])] if op != "fully_connected" else [])
    return model_bytes(op, tensors, inputs, op_in), feeds


def _hybrid_runner(kind: str, asymmetric: bool):
    def one(case: Case) -> Outputs:
        buf = model_bytes("fully_connected", *hybrid_tensors(case.inputs), asymmetric_quantize_inputs=asymmetric)
        y, ops = invoke(buf, [np.asarray(case.inputs["a"], np.float32)], kind)
        if kind == "xnnpack" and "DELEGATE" not in ops:
            raise Unsupported("XNNPACK does not take this dynamic-range FULLY_CONNECTED")
        return {"y": np.asarray(y, np.float32)}

    return per_case(one)


def _hybrid_supports(case: Case) -> str | None:
    if case.operation != "hybrid_matmul":
        return "the dynamic-range FULLY_CONNECTED computes hybrid_matmul (float32 x int8 weights -> float32) only"
    return None


def _hybrid_snippet(kind: str, asymmetric: bool):
    def snippet(case: Case, i: int) -> str:
        ins = element_inputs(case, i)
        tensors, _, op_in = hybrid_tensors(ins)
        tl = ", ".join(f"({n!r}, {t!r}, {tuple(int(x) for x in sh)}, {'None' if d is None else _literal(d)}, "
                       f"{[float(x) for x in s]})" for n, t, sh, d, s, _ in tensors)
        return python_c(
            "import numpy as np, flatbuffers",
            "from ai_edge_litert import schema_py_generated as S, interpreter as L",
            f"x = {_literal(ins['a'])}",
            f"tensors = [{tl}]",
            "m = S.ModelT(); m.version = 3; oc = S.OperatorCodeT()",
            "oc.builtinCode = oc.deprecatedBuiltinCode = S.BuiltinOperator.FULLY_CONNECTED; oc.version = 1",
            "m.operatorCodes, m.buffers = [oc], [S.BufferT()]; sg = S.SubGraphT(); sg.tensors = []",
            "for name, t, shape, data, scale in tensors:",
            "    tt = S.TensorT(); tt.shape, tt.type, tt.name = list(shape), getattr(S.TensorType, t.upper()), "
            "name.encode()",
            "    buf = S.BufferT(); buf.data = None if data is None else data.tobytes(); m.buffers.append(buf)",
            "    tt.buffer = len(m.buffers) - 1",
            "    if scale: qp = S.QuantizationParametersT(); qp.scale, qp.zeroPoint = scale, [0] * len(scale); "
            "tt.quantization = qp",
            "    sg.tensors.append(tt)",
            "sg.inputs, sg.outputs = [0], [len(tensors) - 1]",
            f"o = S.OperatorT(); o.opcodeIndex, o.inputs, o.outputs = 0, {op_in}, [len(tensors) - 1]",
            f"opt = S.FullyConnectedOptionsT(); opt.asymmetricQuantizeInputs = {asymmetric}",
            "o.builtinOptionsType, o.builtinOptions = S.BuiltinOptions.FullyConnectedOptions, opt",
            "sg.operators, m.subgraphs = [o], [sg]",
            "fb = flatbuffers.Builder(1024); fb.Finish(m.Pack(fb), file_identifier=b'TFL3')",
            f"it = L.Interpreter(model_content=bytes(fb.Output()), experimental_op_resolver_type="
            f"L.OpResolverType.{KINDS[kind]})",
            "it.allocate_tensors(); it.set_tensor(it.get_input_details()[0]['index'], x); it.invoke()",
            "print(hex(int(it.get_tensor(it.get_output_details()[0]['index']).reshape(-1).view(np.uint32)[0])))")

    return snippet


def _runner(op: str, kind: str):
    def one(case: Case) -> Outputs:
        buf, feeds = problem(case, op)
        y, ops = invoke(buf, feeds, kind)
        if kind == "xnnpack" and "DELEGATE" not in ops:
            raise Unsupported(f"XNNPACK does not take this {OPS[op]} (the default interpreter runs the builtin "
                              "kernel)")
        return {"y": np.asarray(y).astype(case.expected["y"].dtype)}

    return per_case(one)


def _supports(op: str):
    def supports(case: Case) -> str | None:
        return unsupported(case, op)

    return supports


def _literal(v: Any) -> str:
    v = np.asarray(v)
    return f"np.array({v.tolist()!r}, np.{v.dtype.name})"


def _snippet(op: str, kind: str):
    def snippet(case: Case, i: int) -> str:
        p = case.params
        ins = element_inputs(case, i)
        tensors, inputs, op_in = tensor_specs(op, ins, (p["a_storage"], p["b_storage"], p["output"]))
        width = case.expected["y"].dtype.itemsize
        tl = ", ".join(f"({n!r}, {t!r}, {tuple(int(x) for x in sh)}, {'None' if d is None else _literal(d)}, "
                       f"{[float(x) for x in s]}, {[int(x) for x in z]})" for n, t, sh, d, s, z in tensors)
        feeds = "[a]" if op == "fully_connected" else "[a, b]"
        opts = "FullyConnectedOptions" if op == "fully_connected" else "BatchMatMulOptions"
        return python_c(
            "import numpy as np, flatbuffers",
            "from ai_edge_litert import schema_py_generated as S, interpreter as L",
            f"a = {_literal(ins['a'])}",
            f"b = {_literal(ins['b'])}",
            f"tensors = [{tl}]",
            "m = S.ModelT(); m.version = 3; oc = S.OperatorCodeT()",
            f"oc.builtinCode = oc.deprecatedBuiltinCode = S.BuiltinOperator.{OPS[op]}; oc.version = 1",
            "m.operatorCodes, m.buffers = [oc], [S.BufferT()]; sg = S.SubGraphT(); sg.tensors = []",
            "for name, t, shape, data, scale, zp in tensors:",
            "    tt = S.TensorT(); tt.shape, tt.type, tt.name = list(shape), getattr(S.TensorType, t.upper()), "
            "name.encode()",
            "    buf = S.BufferT(); buf.data = None if data is None else data.tobytes(); m.buffers.append(buf)",
            "    tt.buffer = len(m.buffers) - 1; qp = S.QuantizationParametersT()",
            "    qp.scale, qp.zeroPoint, qp.quantizedDimension = scale, zp, 0; tt.quantization = qp",
            "    sg.tensors.append(tt)",
            f"sg.inputs, sg.outputs = {inputs}, [len(tensors) - 1]",
            f"o = S.OperatorT(); o.opcodeIndex, o.inputs, o.outputs = 0, {op_in}, [len(tensors) - 1]",
            f"o.builtinOptionsType, o.builtinOptions = S.BuiltinOptions.{opts}, S.{opts}T()",
            "sg.operators, m.subgraphs = [o], [sg]",
            "fb = flatbuffers.Builder(1024); fb.Finish(m.Pack(fb), file_identifier=b'TFL3')",
            f"it = L.Interpreter(model_content=bytes(fb.Output()), experimental_op_resolver_type="
            f"L.OpResolverType.{KINDS[kind]})",
            "it.allocate_tensors()",
            f"for d, x in zip(it.get_input_details(), {feeds}): it.set_tensor(d['index'], x)",
            "it.invoke()",
            f"print(hex(int(it.get_tensor(it.get_output_details()[0]['index']).reshape(-1).view(np.uint{8 * width})"
            "[0])))")

    return snippet


# ---- uniform: QUANTIZE / DEQUANTIZE (uniform.md §4.3) ----------------------------------------------------------
#: kernel choice -> the uniform profile of its QUANTIZE / DEQUANTIZE
UNIFORM_PROFILES = {"ref": "tflite", "optimized": "tflite_optimized", "xnnpack": "tflite_xnnpack"}
#: the integer types QUANTIZE writes and DEQUANTIZE reads (quantize.cc, dequantize.cc type checks)
QDQ_STORAGE = ("int8", "uint8", "int16", "int4", "uint4")


def qdq_unsupported(case: Case) -> str | None:
    """Why TFLite's QUANTIZE / DEQUANTIZE cannot express the uniform case (None: it can)."""
    from ..families.uniform import scheme_of

    if case.operation not in ("uniform_quantize", "uniform_dequantize"):
        return "TFLite's QUANTIZE / DEQUANTIZE take float32 <-> integer (requantize is not run here)"
    sch = scheme_of(case)
    st = sch.storage.name
    if st not in QDQ_STORAGE:
        why = "a narrowed storage range" if "<" in st else f"no {st} type"
        return (f"TFLite's QUANTIZE writes and DEQUANTIZE reads int8/uint8/int16/int4/uint4 tensors ({why}; float "
                "storage is not affine in TFLite)")
    if sch.granularity == "blocked":
        return "TFLite's QUANTIZE / DEQUANTIZE quantize per tensor or per axis (no sub-channel blocks)"
    if sch.expressed.name != "float32":
        return ("TFLite's QUANTIZE / DEQUANTIZE scales and real values are float32 (the case expresses "
                f"{sch.expressed.name})")
    if case.operation == "uniform_quantize" and case.inputs["x"].dtype != np.float32:
        return f"QUANTIZE quantizes float32 inputs (the case gives {case.inputs['x'].dtype.name})"
    if case.operation == "uniform_quantize" and st in ("int4", "uint4") and sch.granularity == "per_axis":
        return ("QUANTIZE has no per-axis 4-bit kernel (prepare accepts the model, Invoke reports 'Input type "
                "FLOAT32 with Output type INT4 is not currently supported')")
    if case.operation == "uniform_dequantize" and st == "int16" and np.any(sch.zero_point_array != 0):
        return "DEQUANTIZE requires an int16 zero point of 0 (dequantize.cc)"
    if 0 in case.inputs[next(iter(case.inputs))].shape:
        return "an empty tensor"
    return None


def qdq_problem(case: Case) -> tuple[bytes, np.ndarray]:
    """(flatbuffer, input) of the one-operator QUANTIZE / DEQUANTIZE model of a uniform case: the integer tensor
    carries the case's scales (rounded to float32 by the flatbuffer) and zero points, per axis on
    quantizedDimension."""
    from ..families.uniform import scheme_of
    from ._common import storage_values

    sch = scheme_of(case)
    st = sch.storage.name
    (iname,) = case.inputs
    shape = tuple(int(n) for n in case.inputs[iname].shape) or (1,)
    s, z = sch.scale_array.reshape(-1), sch.zero_point_array.reshape(-1)
    axis = 0 if sch.axis is None else sch.axis % len(shape)
    if case.operation == "uniform_quantize":
        tensors = [("x", "float32", shape, None, [], []), ("y", st, shape, None, s, z)]
        x = np.ascontiguousarray(case.inputs["x"], np.float32).reshape(shape)
        buf = model_bytes("quantize", tensors, [0], [0], quantized_dimension=axis)
    else:
        tensors = [("x", st, shape, None, s, z), ("y", "float32", shape, None, [], [])]
        x = np.ascontiguousarray(storage_values(case)).reshape(shape)
        buf = model_bytes("dequantize", tensors, [0], [0], quantized_dimension=axis)
    return buf, x


def _xnnpack_aborts(case: Case) -> bool:
    """XNNPACK aborts the process on a scale that is a float32 subnormal or 0 (tflite_xnnpack's notes)."""
    from ..families.uniform import scheme_of

    s = scheme_of(case).scale_array.astype(np.float32)
    return bool(np.any(s < np.float32(2.0**-126)))


def _qdq_runner(kind: str):
    def one(case: Case) -> Outputs:
        raise_unsupported(qdq_unsupported(case))
        if kind == "xnnpack" and _xnnpack_aborts(case):
            raise RuntimeError("not run: the XNNPACK delegate aborts the process on a scale below 2^-126 in "
                               "float32 (tests/test_uniform_tflite.py)")
        buf, x = qdq_problem(case)
        y, ops = invoke(buf, [x], kind)
        if kind == "xnnpack" and "DELEGATE" not in ops:
            raise Unsupported("XNNPACK does not take this QUANTIZE / DEQUANTIZE (per-axis, int16 or 4-bit: the "
                              "default interpreter runs the builtin kernel, targets litert.qdq.optimized / .ref)")
        (oname,) = case.expected
        return {oname: codes_as(case, oname, np.asarray(y).reshape(-1))}

    return per_case(one)


def _model_lines(op: str) -> list[str]:
    """Source lines building the one-operator flatbuffer ``buf`` from ``tensors`` (name, type, shape, scales,
    zero points) and ``axis``; the first tensor is the input, the last the output."""
    return [
        "m = S.ModelT(); m.version = 3; oc = S.OperatorCodeT()",
        f"oc.builtinCode = oc.deprecatedBuiltinCode = S.BuiltinOperator.{op}; oc.version = 1",
        "m.operatorCodes, m.buffers = [oc], [S.BufferT()]; sg = S.SubGraphT(); sg.tensors = []",
        "for name, t, shape, scale, zp in tensors:",
        "    tt = S.TensorT(); tt.shape, tt.type, tt.name = list(shape), getattr(S.TensorType, t), name.encode()",
        "    m.buffers.append(S.BufferT()); tt.buffer = len(m.buffers) - 1",
        "    if scale: qp = S.QuantizationParametersT(); qp.scale, qp.zeroPoint, qp.quantizedDimension = scale, zp, "
        "axis; tt.quantization = qp",
        "    sg.tensors.append(tt)",
        "sg.inputs, sg.outputs = [0], [len(tensors) - 1]",
        "o = S.OperatorT(); o.opcodeIndex, o.inputs, o.outputs = 0, [0], [len(tensors) - 1]",
        "sg.operators, m.subgraphs = [o], [sg]",
        "fb = flatbuffers.Builder(1024); fb.Finish(m.Pack(fb), file_identifier=b'TFL3'); buf = bytes(fb.Output())",
    ]


def _run_lines(kind: str, index: int, width: int, mask: str = "") -> list[str]:
    return [
        f"it = L.Interpreter(model_content=buf, experimental_op_resolver_type=L.OpResolverType.{KINDS[kind]})",
        "it.allocate_tensors(); it.set_tensor(it.get_input_details()[0]['index'], x); it.invoke()",
        f"print(hex(int(it.get_tensor(it.get_output_details()[0]['index']).reshape(-1).view(np.uint{8 * width})"
        f"[{index}]){mask}))"]


def _qdq_snippet(kind: str):
    def snippet(case: Case, i: int) -> str:
        from ..families.uniform import scheme_of

        sch = scheme_of(case)
        _, x = qdq_problem(case)
        shape = tuple(int(n) for n in x.shape)
        s = [float(v) for v in sch.scale_array.astype(np.float32).reshape(-1)]
        z = [int(v) for v in sch.zero_point_array.reshape(-1)]
        st = TYPES[sch.storage.name]
        if case.operation == "uniform_quantize":
            tensors, op = f"[('x', 'FLOAT32', {shape}, [], []), ('y', '{st}', {shape}, {s}, {z})]", "QUANTIZE"
            width, mask = (2 if st == "INT16" else 1), f" & {hex((1 << sch.storage.bits) - 1)}"
        else:
            tensors, op = f"[('x', '{st}', {shape}, {s}, {z}), ('y', 'FLOAT32', {shape}, [], [])]", "DEQUANTIZE"
            width, mask = 4, ""
        return python_c(
            "import numpy as np, flatbuffers",
            "from ai_edge_litert import schema_py_generated as S, interpreter as L",
            f"x = {array_literal(x)}",
            f"tensors = {tensors}",
            f"axis = {0 if sch.axis is None else sch.axis % len(shape)}",
            *_model_lines(op), *_run_lines(kind, i, width, mask))

    return snippet


def _qdq_targets() -> list[Target]:
    out = []
    for kind, profile in UNIFORM_PROFILES.items():
        notes = {"ref": "",
                 "optimized": "per tensor: a vector loop over groups of 8 elements (NEON_2_SSE on x86-64), the "
                              "remainder and per-axis scales in the reference loop; int4/uint4 in the reference "
                              "loop",
                 "xnnpack": "XNNPACK takes int8/uint8 per tensor (picks its x86 microkernels by cpuid: AVX-512 "
                            "here); the rest stays on the builtin kernels (unsupported here)"}[kind]
        out.append(Target(BACKEND, f"litert.qdq.{kind}", "uniform",
                          "one-operator QUANTIZE (float32 -> int8/uint8/int16/int4/uint4) / DEQUANTIZE (back to "
                          "float32), per tensor or per axis (quantizedDimension), "
                          f"Interpreter(experimental_op_resolver_type=OpResolverType.{KINDS[kind]})",
                          profile, ("uniform_quantize", "uniform_dequantize"), qdq_unsupported, _qdq_runner(kind),
                          _qdq_snippet(kind), notes=notes, copies=True))
    return out


# ---- elements: DEQUANTIZE float16 -> float32, QUANTIZE float32 -> float16 (XNNPACK) ---------------------------
def _half_supports(kind: str):
    def supports(case: Case) -> str | None:
        op, fmt, src, dst = element_signature(case)
        if fmt != "float16" or (op, src, dst) not in (("decode", "uint16", "float32"),
                                                       ("encode", "float32", "uint16")):
            return ("TFLite converts float types with DEQUANTIZE float16 -> float32 (and, in XNNPACK only, "
                    "QUANTIZE float32 -> float16); no other element format")
        if op == "encode" and kind != "xnnpack":
            return ("the builtin QUANTIZE requires an affine-quantized output (quantize.cc): float32 -> float16 "
                    "runs in the XNNPACK delegate only (target litert.half.xnnpack)")
        return None

    return supports


def _half_model(op: str, n: int) -> bytes:
    types = ("float16", "float32") if op == "decode" else ("float32", "float16")
    tensors = [("x", types[0], (n,), None, [], []), ("y", types[1], (n,), None, [], [])]
    return model_bytes("dequantize" if op == "decode" else "quantize", tensors, [0], [0])


def _half_runner(kind: str):
    def one(case: Case) -> Outputs:
        raise_unsupported(_half_supports(kind)(case))
        op = element_signature(case)[0]
        x = case.inputs["codes"].reshape(-1).view(np.float16) if op == "decode" else \
            np.ascontiguousarray(case.inputs["x"].reshape(-1), np.float32)
        if x.size == 0:
            raise Unsupported("an empty tensor")
        y, ops = invoke(_half_model(op, x.size), [x], kind)
        if kind == "xnnpack" and "DELEGATE" not in ops:
            raise Unsupported("XNNPACK does not take this conversion")
        (oname,) = case.expected
        return {oname: codes_as(case, oname, np.asarray(y).reshape(-1))}

    return per_case(one)


def _half_snippet(kind: str):
    def snippet(case: Case, i: int) -> str:
        op = element_signature(case)[0]
        if op == "decode":
            x, a, b, width, name = case.inputs["codes"].reshape(-1).view(np.float16), "FLOAT16", "FLOAT32", 4, \
                "DEQUANTIZE"
        else:
            x, a, b, width, name = case.inputs["x"].reshape(-1), "FLOAT32", "FLOAT16", 2, "QUANTIZE"
        return python_c(
            "import numpy as np, flatbuffers",
            "from ai_edge_litert import schema_py_generated as S, interpreter as L",
            f"x = {array_literal(x)}",
            f"tensors = [('x', '{a}', ({x.size},), [], []), ('y', '{b}', ({x.size},), [], [])]", "axis = 0",
            *_model_lines(name), *_run_lines(kind, i, width))

    return snippet


def _half_targets() -> list[Target]:
    return [Target(BACKEND, f"litert.half.{kind}", "elements",
                   "one-operator DEQUANTIZE float16 -> float32 (and QUANTIZE float32 -> float16, which only the "
                   f"XNNPACK delegate runs), Interpreter(experimental_op_resolver_type=OpResolverType.{KINDS[kind]})",
                   None, ("encode", "decode"), _half_supports(kind), _half_runner(kind), _half_snippet(kind))
            for kind in KINDS]


def targets() -> list[Target]:
    require("ai_edge_litert.interpreter", "ai_edge_litert.schema_py_generated", "flatbuffers", backend=BACKEND,
            hint="pip install ai-edge-litert")
    out = []
    for op, what in (("fully_connected", "FULLY_CONNECTED (int8 x int8 weights per tensor / per channel -> int8, "
                                         "int16 x int8 -> int16, uint8 x uint8 -> uint8; constant weights and "
                                         "bias)"),
                     ("batch_matmul", "BATCH_MATMUL (int8 operands per tensor, both inputs)"),
                     ("batch_matmul_int16", "BATCH_MATMUL (int16 operands, zero points 0, both inputs; int64 "
                                            "accumulator)")):
        for kind in KINDS:
            if (op, kind) not in PROFILES:
                continue  # XNNPACK does not take int16 BATCH_MATMUL
            out.append(Target(BACKEND, f"litert.{op}.{kind}", "matmul",
                              f"{what}, Interpreter(experimental_op_resolver_type=OpResolverType.{KINDS[kind]})",
                              PROFILES[(op, kind)], ("qlinear_matmul",), _supports(op), _runner(op, kind),
                              _snippet(op, kind),
                              notes="ruy and XNNPACK pick their x86 kernels by cpuid (AVX-512 VNNI here)"
                              if kind != "ref" else ""))
    for (kind, asym), profile in HYBRID_PROFILES.items():
        name = f"litert.fully_connected_hybrid.{kind}" + ("" if kind == "xnnpack" else
                                                          ".asymmetric" if asym else ".symmetric")
        out.append(Target(BACKEND, name, "matmul",
                          "dynamic-range FULLY_CONNECTED (float32 input quantized per row on the fly, int8 weights "
                          f"per tensor / per channel, float32 bias and output), asymmetric_quantize_inputs={asym}, "
                          f"Interpreter(experimental_op_resolver_type=OpResolverType.{KINDS[kind]})",
                          profile, ("hybrid_matmul",), _hybrid_supports, _hybrid_runner(kind, asym),
                          _hybrid_snippet(kind, asym),
                          notes="XNNPACK quantizes asymmetrically whatever the flag says" if kind == "xnnpack"
                          else "the 8-wide vector loop of the quantization is compiled in (AVX), not picked by "
                          "cpuid"))
    return out + _qdq_targets() + _half_targets()


__all__ = ["BACKEND", "DISTRIBUTIONS", "HYBRID_PROFILES", "KINDS", "OPS", "PROFILES", "hybrid_tensors", "invoke",
           "model_bytes", "targets", "tensor_specs"]
