"""Every QuantizeLinear, DequantizeLinear, Cast and CastLike node case of the locked onnx (1.23.2), under qref.

The cases are onnx's own: importing a module of ``onnx.backend.test.case.node`` runs its ``export_*`` generators
(onnx's exporter metaclass), which append each case (model + inputs + expected outputs) to a module-level list
in memory; nothing is written anywhere. Inputs and expected outputs are the typed arrays onnx builds (ml_dtypes
int2/int4/uint2/uint4, float8_*, float4_e2m1fn, float8_e8m0fnu), handed to qref as they are (uniform.md §1
(C9)). QuantizeLinear / DequantizeLinear run under the uniform profile ``onnx`` (``output_dtype``,
``precision``, ``saturate``, ``axis``, ``block_size`` mapped to the scheme), Cast / CastLike under the element
profiles ``onnx`` (saturate=1) and ``onnx_no_saturate`` (saturate=0). Outputs are compared as bits.

A case that differs is listed in DIFFERS with the spec clause that makes it differ, and the test checks that it
differs exactly at the elements that clause names (so a listed case cannot hide another difference).
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import qref

onnx = pytest.importorskip("onnx", reason="ONNX backend node cases")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MODULES = ("quantizelinear", "dequantizelinear", "cast", "castlike")
OPS = {"QuantizeLinear", "DequantizeLinear", "Cast", "CastLike"}

# case -> (spec clause, the inputs at which the outputs differ: a predicate on the case's first input)
DIFFERS = {
    "test_quantizelinear_float4e2m1": (
        "uniform.md §1 (C5): float storage has no zero point; ONNX's reference adds its float4 zero point 0 to "
        "x / s, so a quotient of -0 becomes +0 there", lambda x: (x == 0) & np.signbit(x)),
}


def _cases() -> list[object]:
    import importlib

    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own numpy casts warn
        for m in MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return [c for c in node_cases._NodeTestCases if c.model.graph.node[0].op_type in OPS
            or c.name.startswith("test_castlike")]


CASES = {c.name: c for c in _cases()}


def _array(v: object) -> np.ndarray:
    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)


def _bits(a: np.ndarray) -> np.ndarray:
    """Integer outputs as their values, float outputs as their bit patterns (int64)."""
    if a.dtype.kind in "iu" or (a.dtype.kind == "V" and a.dtype.name.startswith(("int", "uint"))):
        return a.astype(np.int64)
    return a.view(f"uint{8 * a.dtype.itemsize}").astype(np.int64)


def _granularity(att: dict[str, object], scale: np.ndarray) -> dict[str, object]:
    if att.get("block_size"):
        return {"block_size": int(att["block_size"]), "axis": int(att.get("axis", 1))}
    if scale.ndim == 1:
        return {"axis": int(att.get("axis", 1))}
    return {}


def _run(case: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(qref's output, onnx's expected output, the first input) of a node case; outputs as _bits."""
    node = case.model.graph.node[0]
    att = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs = [_array(v) for v in case.data_sets[0][0]]
    want = _array(case.data_sets[0][1][0])
    x = inputs[0]
    if node.op_type == "QuantizeLinear":
        scale, zp = inputs[1], (inputs[2] if len(inputs) > 2 else None)
        storage = want.dtype.name  # zero point's type, else output_dtype, else uint8: the output's
        if zp is None and att.get("output_dtype"):
            assert helper.tensor_dtype_to_np_dtype(att["output_dtype"]) == want.dtype
        kw = _granularity(att, scale)
        if att.get("precision"):
            kw["compute"] = helper.tensor_dtype_to_np_dtype(att["precision"]).name
        if att.get("saturate", 1) == 0:
            kw["float_saturate"] = False
        sch = qref.scheme(storage, scale=scale, zero_point=zp, profile="onnx", expressed=scale.dtype.name, **kw)
        codes = sch.quantize(x).codes
        return codes.astype(np.int64), _bits(want), x
    if node.op_type == "DequantizeLinear":
        scale, zp = inputs[1], (inputs[2] if len(inputs) > 2 else None)
        sch = qref.scheme(x.dtype.name, scale=scale, zero_point=zp, profile="onnx", expressed=scale.dtype.name,
                          **_granularity(att, scale))
        out = helper.tensor_dtype_to_np_dtype(att["output_dtype"]) if att.get("output_dtype") else scale.dtype
        return _bits(sch.dequantize(qref.QArray(codes=x, scheme=sch), out)), _bits(want), x
    # Cast (to=) and CastLike (the second input's type); the expanded CastLike is a Cast
    target = want.dtype.name
    profile = "onnx" if att.get("saturate", 1) else "onnx_no_saturate"
    fmt = qref.get_format(target)
    codes = np.asarray(qref.encode(x, fmt, profile=profile)).astype(np.int64)
    if isinstance(fmt, qref.IntFormat) and fmt.signed:  # encode gives the two's complement bit pattern
        codes = np.where(codes >= 1 << (fmt.bits - 1), codes - (1 << fmt.bits), codes)
    return codes, _bits(want), x


def test_every_case_is_collected() -> None:
    """Every case of the four operators onnx 1.23.2 generates: 13 QuantizeLinear, 14 DequantizeLinear, 60 Cast,
    112 CastLike (56, each also in its expanded Cast form)."""
    ops: dict[str, int] = {}
    for c in CASES.values():
        op = "CastLike" if c.name.startswith("test_castlike") else c.model.graph.node[0].op_type
        ops[op] = ops.get(op, 0) + 1
    assert ops == {"QuantizeLinear": 13, "DequantizeLinear": 14, "Cast": 60, "CastLike": 112}, ops
    assert set(DIFFERS) <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_node_case(name: str) -> None:
    got, want, x = _run(CASES[name])
    assert got.shape == want.shape, (got.shape, want.shape)
    diff = got != want
    if name in DIFFERS:
        clause, where = DIFFERS[name]
        assert np.array_equal(diff, where(x)), (clause, got, want)
        assert diff.any(), f"{name} is listed as differing ({clause}) but now passes: take it off the list"
        return
    assert not diff.any(), (got[diff], want[diff], x[diff] if x.shape == diff.shape else x)


# ---- features the generated cases leave out: the onnx reference evaluator on models built here -----------------
def _reference(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object], opset: int = 25) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    names = list(inputs)
    graph_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
                for n, a in inputs.items()]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", graph_in, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED,
                                                                                     None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return np.asarray(ReferenceEvaluator(model).run(None, inputs)[0])


def _ties(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(-40, 40, n) / 2 + rng.choice([0.0, 1e-3, -1e-3], n)).astype(np.float32)


@pytest.mark.parametrize("precision", [TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.BFLOAT16])
def test_quantizelinear_precision(precision: int) -> None:
    """``precision`` (opset 25): x and the scale are cast to it and divided there (qref: compute=...)."""
    x = _ties(512, 1) * np.float32(0.37)
    scale = np.float32(0.37)
    zp = np.array(3, dtype=ml_dtypes.int4)
    want = _reference("QuantizeLinear", {"x": x, "s": scale.reshape(()), "z": zp}, {"precision": precision})
    dt = helper.tensor_dtype_to_np_dtype(precision).name
    got = qref.scheme("int4", scale=scale, zero_point=zp, profile="onnx", compute=dt).quantize(x).codes
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))


@pytest.mark.parametrize("storage", ["int2", "uint2", "int4", "uint4"])
def test_quantizelinear_sub_byte_output_dtype_blocked_negative_axis(storage: str) -> None:
    """output_dtype without a zero point, blocks of 3 along axis -1 with a partial last block."""
    x = _ties(4 * 7, 2).reshape(4, 7)
    scale = np.array(np.random.default_rng(3).uniform(0.5, 4, (4, 3)), dtype=np.float32)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(getattr(ml_dtypes, storage)))
    want = _reference("QuantizeLinear", {"x": x, "s": scale},
                      {"axis": -1, "block_size": 3, "output_dtype": to})
    got = qref.scheme(storage, scale=scale, axis=-1, block_size=3, profile="onnx").quantize(x).codes
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    zp = np.array(np.random.default_rng(4).integers(0, 2, (4, 3)), dtype=getattr(ml_dtypes, storage))
    back = _reference("DequantizeLinear", {"q": want, "s": scale, "z": zp}, {"axis": -1, "block_size": 3})
    sch = qref.scheme(storage, scale=scale, zero_point=zp, axis=-1, block_size=3, profile="onnx")
    mine = sch.dequantize(qref.QArray(codes=want, scheme=sch), np.float32)
    assert np.array_equal(mine.view(np.uint32), back.view(np.uint32))


@pytest.mark.parametrize("storage", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantizelinear_float8_saturate(storage: str, saturate: int) -> None:
    """saturate=0/1 with a float8 zero point array (ONNX's typed zero), overflow, +-Inf and NaN inputs."""
    x = np.concatenate([_ties(64, 5) * np.float32(2000), np.array([np.inf, -np.inf, np.nan, 1e30, -1e30],
                                                                  np.float32)])
    scale = np.float32(0.75)
    zp = np.zeros((), dtype=getattr(ml_dtypes, storage))
    want = _reference("QuantizeLinear", {"x": x, "s": scale.reshape(()), "z": zp}, {"saturate": saturate})
    sch = qref.scheme(storage, scale=scale, zero_point=zp, profile="onnx", float_saturate=bool(saturate))
    got = sch.quantize(x).codes
    assert np.array_equal(got.astype(np.int64), want.view(np.uint8).astype(np.int64))


@pytest.mark.parametrize("scale_type", ["float8_e8m0fnu", "float16", "bfloat16"])
def test_dequantizelinear_typed_scales(scale_type: str) -> None:
    """Scales as typed arrays (E8M0 of MX, float16, bfloat16) with float4e2m1 / int4 codes and typed zero points;
    the output in the scale's type unless output_dtype says float32."""
    rng = np.random.default_rng(6)
    sdt = np.dtype(getattr(ml_dtypes, scale_type, None) or scale_type)
    scale = np.array(2.0 ** rng.integers(-6, 7, 8), dtype=np.float32).astype(sdt)
    f4 = qref.decode(np.arange(16, dtype=np.uint8), "float4_e2m1fn").astype(ml_dtypes.float4_e2m1fn)
    codes = np.tile(f4, (8, 1))
    out = TensorProto.FLOAT
    want = _reference("DequantizeLinear", {"q": codes, "s": scale}, {"axis": 0, "output_dtype": out})
    sch = qref.scheme("float4_e2m1fn", scale=scale, axis=0, profile="onnx", expressed="float32")
    got = sch.dequantize(qref.QArray(codes=codes, scheme=sch), np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    i4 = np.tile(np.arange(-8, 8), (8, 1)).astype(ml_dtypes.int4)
    zp = rng.integers(-8, 8, 8).astype(ml_dtypes.int4)
    if scale_type == "float8_e8m0fnu":
        return  # DequantizeLinear-25 takes E8M0 scales with float4/float8 codes (MX) only
    want = _reference("DequantizeLinear", {"q": i4, "s": scale, "z": zp}, {"axis": 0})
    sch = qref.scheme("int4", scale=scale, zero_point=zp, axis=0, profile="onnx", expressed=scale_type)
    got = sch.dequantize(qref.QArray(codes=i4, scheme=sch))
    assert got.dtype == want.dtype and np.array_equal(_bits(got), _bits(want))


def test_typed_zero_points_equal_plain_ones() -> None:
    """A typed zero point array builds the same scheme as its integer values; a non-zero float zero point of a
    float storage is refused when quantizing (uniform.md §1 (C5), (C9))."""
    for storage, dt, vals in (("int4", ml_dtypes.int4, [-8, 7, 0]), ("uint2", ml_dtypes.uint2, [0, 3, 1]),
                              ("int2", ml_dtypes.int2, [-2, 1, 0]), ("uint4", ml_dtypes.uint4, [15, 0, 9])):
        a = qref.scheme(storage, scale=np.ones(3, np.float32), zero_point=np.array(vals, dtype=dt), axis=0,
                        profile="onnx")
        b = qref.scheme(storage, scale=np.ones(3, np.float32), zero_point=np.array(vals), axis=0, profile="onnx")
        assert a == b and a.zero_points == tuple(vals)
    sch = qref.scheme("float8_e4m3fn", scale=1.0, zero_point=np.array(2, ml_dtypes.float8_e4m3fn), profile="onnx")
    with pytest.raises(qref.QrefError, match="zero points of 0 only"):
        sch.quantize(np.zeros(3, np.float32))
    with pytest.raises(qref.QrefError, match="zero points must be finite integers"):
        qref.scheme("int8", scale=1.0, zero_point=np.array(0.5, ml_dtypes.float8_e4m3fn))


def test_testing_kit_reads_typed_codes() -> None:
    """qref.testing compares ONNX-typed int4 codes and zero points with qref's (uniform.md §1 (C9))."""
    from qref.testing import assert_codes_equal

    codes = np.array([-8, -1, 0, 7], dtype=ml_dtypes.int4)
    assert_codes_equal(codes, np.array([-8, -1, 0, 7], np.int8), "int4")
    with pytest.raises(AssertionError):
        assert_codes_equal(codes, np.array([-8, -1, 1, 7], np.int8), "int4")


def test_quantized_matmul_takes_typed_int4_operands_and_zero_points() -> None:
    """MatMulInteger-style accumulation with ONNX-typed int4 / uint4 matrices and zero points (uniform.md §1
    (C9)): the same accumulator as the plain integers, which an int64 product gives independently."""
    from qref.recipes.qmatmul import int_accumulate

    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 16, (3, 5)), rng.integers(-8, 8, (5, 4))
    za, zb = rng.integers(0, 16, 3), rng.integers(-8, 8, 4)
    acc, _ = int_accumulate(a.astype(ml_dtypes.uint4), b.astype(ml_dtypes.int4), za.astype(ml_dtypes.uint4),
                            zb.astype(ml_dtypes.int4), a_storage="uint4", b_storage="int4")
    assert np.array_equal(acc, (a - za[:, None]) @ (b - zb[None, :]))
