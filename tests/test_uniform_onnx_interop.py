"""ONNX interop: a one-element zero point with a scalar scale (uniform.md §1 C7).

Eight ONNX backend node tests (onnx's own ``onnx/backend/test/case/node`` generators, the source of the
``test_data_set`` files) pass a zero point of shape (1,) with a scalar scale. ONNX Runtime accepts them; qref
broadcasts the one element to the scale's shape. Each case is run through qref's ``onnx`` profile and compared
with the case's expected output (the ONNX reference) and with onnxruntime on the same model (values as bits).
"""

from __future__ import annotations

import numpy as np
import pytest

import qref

onnx = pytest.importorskip("onnx", reason="ONNX backend test cases")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

CASES = {  # case name -> (storage format, quantize?)
    "test_quantizelinear_e4m3fn": ("float8_e4m3fn", True),
    "test_quantizelinear_e5m2": ("float8_e5m2", True),
    "test_dequantizelinear_e4m3fn_zero_point": ("float8_e4m3fn", False),
    "test_dequantizelinear_uint4": ("uint4", False),
    "test_dequantizelinear_int4": ("int4", False),
    "test_dequantizelinear_uint2": ("uint2", False),
    "test_dequantizelinear_int2": ("int2", False),
    "test_dequantizelinear_float4e2m1": ("float4_e2m1fn", False),
}
ORT_MISSING = {"test_dequantizelinear_float4e2m1"}  # onnxruntime 1.32 CPU has no float4e2m1 DequantizeLinear


def _node_cases() -> dict[str, object]:
    """The cases as onnx generates them: importing a case module runs its export_* generators (onnx's
    _Exporter metaclass), which append to the module-level list of node test cases."""
    import onnx.backend.test.case.node as node_cases
    import onnx.backend.test.case.node.dequantizelinear
    import onnx.backend.test.case.node.quantizelinear  # noqa: F401

    return {c.name: c for c in node_cases._NodeTestCases if c.name in CASES}


@pytest.fixture(scope="module")
def cases() -> dict[str, object]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy casts warn
        got = _node_cases()
    assert set(got) == set(CASES)
    return got


def _array(v: object) -> np.ndarray:
    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)


def _numbers(a: np.ndarray) -> np.ndarray:
    """ml_dtypes / numpy values as float64 (exact for every format here)."""
    return a.astype(np.float32).astype(np.float64)


def _ort(model_case: object, quantize: bool) -> np.ndarray:
    """The case's node on onnxruntime: every input an initializer except a float32 x, float outputs cast to
    float32 (python can only read standard types)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime cross-check")
    node = model_case.model.graph.node[0]
    inputs = model_case.data_sets[0][0]
    inits, graph_in, feed = [], [], {}
    for name, v in zip(node.input, inputs):
        if quantize and name == node.input[0]:
            graph_in.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(np.shape(v))))
            feed[name] = np.asarray(v)
        else:
            t = v if isinstance(v, TensorProto) else numpy_helper.from_array(np.asarray(v), name)
            t.name = name
            inits.append(t)
    nodes = [node]
    out = node.output[0]
    if quantize:
        nodes.append(helper.make_node("Cast", [out], ["f"], to=TensorProto.FLOAT))
        out = "f"
    graph = helper.make_graph(nodes, "g", graph_in, [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              initializer=inits)
    opset = 25 if "2" in CASES[model_case.name][0][-1] else 23
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feed)[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_backend_scalar_scale_one_element_zero_point(cases: dict[str, object], name: str) -> None:
    case = cases[name]
    storage, quantize = CASES[name]
    node = case.model.graph.node[0]
    inputs = [_array(v) for v in case.data_sets[0][0]]
    expected = _array(case.data_sets[0][1][0])
    x, scale, zp = inputs[0], inputs[1], inputs[2]
    assert scale.shape == () and zp.shape == (1,)
    assert node.op_type == ("QuantizeLinear" if quantize else "DequantizeLinear")
    sch = qref.scheme(storage, scale=float(scale), zero_point=_numbers(zp), profile="onnx")
    assert sch.zero_points == (0,) if storage.startswith("float") else len(sch.zero_points) == 1
    fmt = qref.get_format(storage)
    if quantize:
        got = qref.decode(sch.quantize(x).codes, fmt, dtype=np.float32)
        want = expected.astype(np.float32)
    else:
        raw = x.view(np.uint8) if storage.startswith("float") else x.astype(np.int64)
        codes = raw if storage.startswith("float") else raw.astype(sch.codes_dtype)
        if not storage.startswith("float"):
            assert sch.zero_points == (int(_numbers(zp)[0]),)
        got = sch.dequantize(qref.QArray(codes=codes, scheme=sch), np.float32)
        want = expected.astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (got, want)
    if name in ORT_MISSING:
        return
    ref = _ort(case, quantize).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), (got, ref)


def test_one_element_zero_point_broadcasts_only_to_a_scalar_scale() -> None:
    """(1,) zero point + scalar scale is per tensor; a two-element zero point with a scalar scale still raises."""
    a = qref.scheme("int8", scale=0.5, zero_point=np.array([3]), profile="onnx")
    b = qref.scheme("int8", scale=0.5, zero_point=3, profile="onnx")
    assert a == b and a.scale_shape == ()
    with pytest.raises(qref.QrefError, match="does not match the scale shape"):
        qref.scheme("int8", scale=0.5, zero_point=np.array([3, 4]), profile="onnx")
