"""Uniform profiles against the real systems, bit for bit (codes compared as integers, values as bits).

Each test skips when its library is missing. Inputs are tie-heavy: (k + 1/2) * s and its +-1 ulp neighbours for
awkward scales, odd and even zero points. Where a system's result is undefined, qref marks it unspecified and
those elements are left out of the comparison (the tests assert how many were compared).
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.analysis.calibrate import calibrate

F32 = np.float32
SCALES = (0.1, 1 / 3, 0.013, 0.5)
ZPS = (0, 3, -3)


def ties(s: float, ks=range(-140, 141)) -> np.ndarray:
    b = ((np.asarray(ks, dtype=np.float64) + 0.5) * s).astype(F32)
    rng = np.random.default_rng(7)
    return np.concatenate([b, np.nextafter(b, F32(np.inf)), np.nextafter(b, F32(-np.inf)),
                           (rng.standard_normal(2000) * 40 * s).astype(F32)])


def specials() -> np.ndarray:
    return np.array([np.inf, -np.inf, 1e30, -1e30, 3.4e38, 1e-45, -0.0, 0.0], dtype=F32)


def compare(codes_ref: np.ndarray, q: qref.QArray) -> int:
    ok = ~q.unspecified
    got = q.codes.astype(np.int64)[ok]
    ref = np.asarray(codes_ref).astype(np.int64)[ok]
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, f"{bad.size} mismatches, first: qref {got[bad[:5]]} vs real {ref[bad[:5]]}"
    return int(ok.sum())


# ---------------------------------------------------------------------------------------------------------
# ONNX reference implementation and onnxruntime
# ---------------------------------------------------------------------------------------------------------
def _onnx_model(opset: int, out_type: int, attrs: dict, scale: np.ndarray, zp: np.ndarray | None,
                in_type: int | None = None, dequant: bool = False, x_shape=None):
    pytest.importorskip("onnx", reason="onnx reference cross-check")
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(scale, "s")]
    inputs = ["x", "s"]
    if zp is not None:
        inits.append(numpy_helper.from_array(zp, "z"))
        inputs.append("z")
    op = "DequantizeLinear" if dequant else "QuantizeLinear"
    node = helper.make_node(op, inputs, ["y"], **attrs)
    shape = list(x_shape) if x_shape is not None else None
    if dequant:
        x_info = helper.make_tensor_value_info("x", out_type, shape)
        y_info = helper.make_tensor_value_info("y", in_type or TensorProto.FLOAT, shape)
    else:
        x_info = helper.make_tensor_value_info("x", in_type or TensorProto.FLOAT, shape)
        y_info = helper.make_tensor_value_info("y", out_type, shape)
    graph = helper.make_graph([node], "g", [x_info], [y_info], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ref_run(model, x):
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the reference's own overflow in x / scale
        return ReferenceEvaluator(model).run(None, {"x": x})[0]


def _in_ref_range(x: np.ndarray, s: float) -> np.ndarray:
    # onnx's numpy reference casts rint(x / s) to int32 before saturating: undefined beyond int32 (its bug; the
    # operator spec saturates), and NaN; ORT saturates.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.isfinite(x) & (np.abs(x.astype(np.float64) / s) < 2.0**30)


@pytest.mark.parametrize("opset", [19, 21, 23, 25])
@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("z", ZPS)
def test_onnx_reference_int8_per_tensor(opset, s, z):
    from onnx import TensorProto

    x = ties(s)
    m = _onnx_model(opset, TensorProto.INT8, {}, np.array(s, dtype=F32), np.array(z, dtype=np.int8))
    ref = _ref_run(m, x)
    q = qref.scheme("int8", scale=s, zero_point=z, profile="onnx").quantize(x)
    keep = _in_ref_range(x, s)
    q.unspecified |= ~keep
    assert compare(ref, q) == keep.sum()


@pytest.mark.parametrize(("storage", "tp", "np_zp", "opset"), [
    ("uint8", "UINT8", np.uint8, 21), ("int16", "INT16", np.int16, 21), ("uint16", "UINT16", np.uint16, 21),
    ("int4", "INT4", "int4", 21), ("uint4", "UINT4", "uint4", 21), ("int2", "INT2", "int2", 25),
    ("uint2", "UINT2", "uint2", 25),
])
def test_onnx_reference_other_storage(storage, tp, np_zp, opset):
    import ml_dtypes
    from onnx import TensorProto

    zdt = getattr(ml_dtypes, np_zp) if isinstance(np_zp, str) else np_zp
    z = 1 if storage.startswith("u") else -1
    for s in (0.1, 1 / 3):
        x = ties(s, range(-20, 21)) if "2" in storage or "4" in storage else ties(s)
        m = _onnx_model(opset, getattr(TensorProto, tp), {}, np.array(s, dtype=F32), np.array(z, dtype=zdt))
        ref = np.asarray(_ref_run(m, x)).astype(np.int64)
        q = qref.scheme(storage, scale=s, zero_point=z, profile="onnx").quantize(x)
        keep = _in_ref_range(x, s)
        q.unspecified |= ~keep
        assert compare(ref, q) == keep.sum()


def test_onnx_reference_per_axis_and_blocked():
    from onnx import TensorProto

    rng = np.random.default_rng(3)
    x = (rng.integers(-600, 600, size=(3, 8, 5)) / 8).astype(F32)
    sc = np.array([0.1, 0.5, 1 / 3, 0.25, 2.0, 0.125, 0.3, 0.75], dtype=F32)
    zp = np.array([0, 1, -3, 4, -1, 2, 3, -2], dtype=np.int8)
    ref = _ref_run(_onnx_model(21, TensorProto.INT8, {"axis": 1}, sc, zp), x)
    q = qref.scheme("int8", scale=sc, zero_point=zp, axis=1, profile="onnx").quantize(x)
    assert compare(ref, q) == x.size
    # blocked along axis 2 with block 2 (5 -> 3 blocks, the last one partial)
    bs = (rng.integers(1, 9, size=(3, 8, 3)) / 8).astype(F32)
    bz = rng.integers(-4, 5, size=(3, 8, 3)).astype(np.int8)
    ref = _ref_run(_onnx_model(21, TensorProto.INT8, {"axis": 2, "block_size": 2}, bs, bz), x)
    q = qref.scheme("int8", scale=bs, zero_point=bz, axis=2, block_size=2, profile="onnx").quantize(x)
    assert compare(ref, q) == x.size


def test_onnx_reference_precision_attribute():
    from onnx import TensorProto

    x = ties(0.1)
    m = _onnx_model(23, TensorProto.INT8, {"precision": TensorProto.FLOAT16}, np.array(0.1, dtype=F32),
                    np.array(3, dtype=np.int8))
    ref = _ref_run(m, x)
    q = qref.scheme("int8", scale=0.1, zero_point=3, profile="onnx", compute="float16").quantize(x)
    with np.errstate(over="ignore"):
        keep = np.isfinite(x.astype(np.float16)) & _in_ref_range(x, 0.1)
    q.unspecified |= ~keep
    assert compare(ref, q) == keep.sum()


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_onnx_reference_float8_outputs(fmt, saturate):
    import ml_dtypes
    from onnx import TensorProto

    tp = {"float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e5m2": TensorProto.FLOAT8E5M2,
          "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ}[fmt]
    x = np.concatenate([ties(0.37, range(-400, 400, 3)) * F32(300), specials(), [np.float32(np.nan)]]).astype(F32)
    zp = np.array(0, dtype=getattr(ml_dtypes, fmt))
    ref = _ref_run(_onnx_model(19, tp, {"saturate": saturate}, np.array(0.37, dtype=F32), zp), x)
    q = qref.scheme(fmt, scale=0.37, profile="onnx", float_saturate=bool(saturate)).quantize(x)
    assert (q.codes == np.asarray(ref).view(np.uint8)).all()


def test_onnx_reference_dequantize():
    from onnx import TensorProto

    codes = np.arange(-128, 128, dtype=np.int8)
    for s, z in [(0.1, 3), (1 / 3, -3), (0.013, 0)]:
        for sdt in (F32, np.float16):
            ref = _ref_run(_onnx_model(21, TensorProto.INT8, {}, np.array(s, dtype=sdt), np.array(z, np.int8),
                                       in_type=TensorProto.FLOAT if sdt == F32 else TensorProto.FLOAT16,
                                       dequant=True), codes)
            sch = qref.scheme("int8", scale=s, zero_point=z, profile="onnx",
                              expressed="float32" if sdt == F32 else "float16")
            got = sch.dequantize(qref.QArray(codes=codes, scheme=sch))
            assert got.dtype == ref.dtype
            assert (got.view(np.uint16 if sdt != F32 else np.uint32) ==
                    ref.view(np.uint16 if sdt != F32 else np.uint32)).all()


def _ort_run(model, x):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime cross-check")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize(("storage", "tp", "zdt"), [("int8", "INT8", np.int8), ("uint8", "UINT8", np.uint8),
                                                     ("int16", "INT16", np.int16), ("uint16", "UINT16", np.uint16)])
def test_onnxruntime_quantize(storage, tp, zdt):
    from onnx import TensorProto

    n = 0
    for s in SCALES:
        for z in ZPS:
            if storage.startswith("u") and z < 0:
                continue
            x = np.concatenate([ties(s), specials()]).astype(F32)
            m = _onnx_model(21, getattr(TensorProto, tp), {}, np.array(s, dtype=F32), np.array(z, dtype=zdt),
                            x_shape=[x.size])
            q = qref.scheme(storage, scale=s, zero_point=z, profile="onnx").quantize(x)
            n += compare(_ort_run(m, x), q)
    assert n > 10000


def test_onnxruntime_per_axis_and_blocked():
    from onnx import TensorProto

    rng = np.random.default_rng(4)
    x = (rng.integers(-600, 600, size=(4, 6, 8)) / 8).astype(F32)
    sc = np.array([0.1, 0.5, 1 / 3, 0.25, 2.0, 0.125], dtype=F32)
    zp = np.array([0, 1, -3, 4, -1, 2], dtype=np.int8)
    got = _ort_run(_onnx_model(21, TensorProto.INT8, {"axis": 1}, sc, zp, x_shape=x.shape), x)
    assert compare(got, qref.scheme("int8", scale=sc, zero_point=zp, axis=1, profile="onnx").quantize(x)) == x.size
    bs = (rng.integers(1, 9, size=(4, 6, 2)) / 8).astype(F32)
    bz = rng.integers(-4, 5, size=(4, 6, 2)).astype(np.int8)
    got = _ort_run(_onnx_model(21, TensorProto.INT8, {"axis": 2, "block_size": 4}, bs, bz, x_shape=x.shape), x)
    q = qref.scheme("int8", scale=bs, zero_point=bz, axis=2, block_size=4, profile="onnx").quantize(x)
    assert compare(got, q) == x.size


# ---------------------------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def torch():
    t = pytest.importorskip("torch", reason="PyTorch cross-check")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantize_per_tensor is deprecated in torch 2.13
        yield t


def test_pytorch_quantize_per_tensor_and_channel(torch):
    n = 0
    for s in SCALES:
        for z in (0, 3, -3, 100):
            x = np.concatenate([ties(s), specials()]).astype(F32)
            for dt, storage in ((torch.qint8, "int8"), (torch.quint8, "uint8")):
                if storage == "uint8" and z < 0:
                    continue
                ref = torch.quantize_per_tensor(torch.from_numpy(x), s, z, dt).int_repr().numpy()
                n += compare(ref, qref.scheme(storage, scale=s, zero_point=z, profile="pytorch").quantize(x))
                refc = torch.quantize_per_channel(torch.from_numpy(x.reshape(-1, 1)),
                                                  torch.tensor([s], dtype=torch.float64), torch.tensor([z]), 1,
                                                  dt).int_repr().numpy().reshape(-1)
                qc = qref.scheme(storage, scale=[s], zero_point=[z], axis=1, profile="pytorch_per_channel"
                                 ).quantize(x.reshape(-1, 1))
                qc.codes, qc.unspecified = qc.codes.reshape(-1), qc.unspecified.reshape(-1)
                n += compare(refc, qc)
            ref32 = torch.quantize_per_tensor(torch.from_numpy(x), s, z, torch.qint32).int_repr().numpy()
            n += compare(ref32, qref.scheme("int32", scale=s, zero_point=z, profile="pytorch_per_channel"
                                            ).quantize(x))
    assert n > 100000


def test_pytorch_dequantize(torch):
    codes = np.arange(-128, 128, dtype=np.int8)
    for s in SCALES:
        for z in (0, 3, -3, 100):
            t = torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), s, z)
            sch = qref.scheme("int8", scale=s, zero_point=z, profile="pytorch")
            got = sch.dequantize(qref.QArray(codes=codes, scheme=sch))
            assert (got.view(np.uint32) == t.dequantize().numpy().view(np.uint32)).all()
            tc = torch._make_per_channel_quantized_tensor(torch.from_numpy(codes.reshape(-1, 1)),
                                                          torch.tensor([s], dtype=torch.float64),
                                                          torch.tensor([z]), 1)
            sc = qref.scheme("int8", scale=[s], zero_point=[z], axis=1, profile="pytorch_per_channel")
            gc = sc.dequantize(qref.QArray(codes=codes.reshape(-1, 1), scheme=sc))
            assert (gc.view(np.uint32) == tc.dequantize().numpy().view(np.uint32)).all()


# ---------------------------------------------------------------------------------------------------------
# JAX, qwix, AQT
# ---------------------------------------------------------------------------------------------------------
def test_jax_jit_reciprocal_rewrite_and_full_divisor():
    jax = pytest.importorskip("jax", reason="JAX cross-check")
    jnp = jax.numpy
    n = 0
    for s in SCALES:
        for z in ZPS:
            x = np.concatenate([ties(s), specials(), [np.float32(np.nan)]]).astype(F32)
            f = jax.jit(lambda x, s, z: jnp.clip(jnp.round(x / s) + z, -128, 127).astype(jnp.int8))
            ref = np.asarray(f(x, F32(s), F32(z)))
            n += compare(ref, qref.scheme("int8", scale=s, zero_point=z, profile="jax").quantize(x))
            ref_full = np.asarray(f(x, np.full(x.shape, s, dtype=F32), F32(z)))
            n += compare(ref_full, qref.scheme("int8", scale=s, zero_point=z, profile="jax_divide").quantize(x))
    assert n > 20000


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32], ids=["float16", "bfloat16", "float32"])
def test_jax_adds_the_zero_point_in_the_input_dtype(dt: type) -> None:
    """jnp.round(x / s) + z is a float addition in x's dtype: large zero points round (uniform.md §2.1,
    after_rounding_float), e.g. float16 round(100 / 0.5) + 2001 = 2200."""
    jax = pytest.importorskip("jax", reason="JAX cross-check")
    jnp = jax.numpy
    rng = np.random.default_rng(8)
    st, lo, hi = ("int32", -(2**31), 2**31 - 1) if dt == np.float32 else ("int16", -32768, 32767)
    f = jax.jit(lambda v, s_, z_: jnp.clip(jnp.round(v / s_) + z_, lo, hi).astype(getattr(jnp, st)))
    n = 0
    for s, z in ((0.5, 2001), (1.0, 101), (0.37, -12345), (3.0, 30001), (1.0, 1 if dt == np.float32 else 255)):
        big = 2.0**24 if dt == np.float32 else 2.0**10
        x = np.concatenate([rng.standard_normal(4000) * big, np.arange(-300, 300) * s + s / 2,
                            [np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(dt)
        with np.errstate(all="ignore"):
            ref = np.asarray(f(jnp.asarray(x), jnp.asarray(s, dtype=x.dtype), jnp.asarray(z, dtype=x.dtype)))
        n += compare(ref, qref.scheme(st, scale=s, zero_point=z, profile="jax").quantize(x))
    assert n > 20000


def test_qwix_quantize_with_scale_zero_point_and_calibration():
    pytest.importorskip("qwix", reason="qwix cross-check")
    import jax.numpy as jnp
    from qwix._src.core import qarray

    n = 0
    for s in SCALES:
        for z in ZPS:
            x = np.concatenate([ties(s), specials(), [np.float32(np.nan)]]).astype(F32).reshape(1, -1)
            qa = qarray.quantize_with_scale_zero_point(jnp.asarray(x), jnp.int8, jnp.full((1, 1), s, F32),
                                                       jnp.full((1, 1), z, jnp.int8))
            q = qref.scheme("int8", scale=s, zero_point=z, profile="qwix").quantize(x.reshape(-1))
            n += compare(np.asarray(qa.qvalue).reshape(-1), q)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((6, 32)) * 3).astype(F32)
    for method, qt in (("absmax", jnp.int8), ("minmax", jnp.int8), ("absmax", jnp.int4)):
        ref = qarray.quantize_api(jnp.asarray(w), qt, channelwise_axes=[0], calibration_method=method)
        storage = "int8" if qt == jnp.int8 else "int4"
        cal = calibrate(w, storage, method, axis=0, formula="qwix")
        assert (cal.scales.astype(F32) == np.asarray(ref.scale).reshape(-1)).all()
        if ref.zero_point is not None:
            assert (cal.zero_points == np.asarray(ref.zero_point).reshape(-1)).all()
        q = cal.scheme("qwix").quantize(w)
        n += compare(np.asarray(ref.qvalue).astype(np.int64), q)
    assert n > 20000


def test_aqt_int8_and_int4():
    pytest.importorskip("aqt.jax.v2.aqt_quantizer", reason="AQT (aqtp) cross-check")
    import jax.numpy as jnp
    from aqt.jax.v2 import aqt_quantizer

    rng = np.random.default_rng(6)
    n = 0
    for bits, storage in ((8, "int8"), (4, "int4")):
        w = (rng.standard_normal((5, 64)) * 2).astype(F32)
        w[1] = 0.0  # an all-zero row: AQT uses absmax 1
        w[2, :3] = [np.inf, -np.inf, np.nan] if bits == 8 else [1.0, 2.0, 3.0]
        quantizer = aqt_quantizer.quantizer_make(bits)
        if bits == 8:
            w = np.where(np.isfinite(w), w, 0.0).astype(F32)
        qt, _ = quantizer.quant(jnp.asarray(w), calibration_axes=[1])
        cal = calibrate(w, storage, "absmax", axis=0, formula="aqt")
        assert (cal.scales.astype(F32) == np.asarray(qt.scale[0]).reshape(-1)).all()
        q = cal.scheme("aqt").quantize(w)
        n += compare(np.asarray(qt.qvalue).astype(np.int64), q)
        # ties with an explicit scale: x * reciprocal(s), clip to +-(2^(b-1) - 1), round half even
        s = 0.1
        x = ties(s, range(-9, 9) if bits == 4 else range(-140, 141)).reshape(1, -1)
        qt2 = aqt_quantizer.quantizer_make(bits)
        t = qt2.calibrate(jnp.asarray(x), calibration_axes=[1])
        t.scale = [jnp.full((1, 1), s, F32)]
        qv, _ = qt2.calculate_qvalue(jnp.asarray(x), t)
        n += compare(np.asarray(qv.qvalue).reshape(-1).astype(np.int64),
                     qref.scheme(storage, scale=s, profile="aqt").quantize(x.reshape(-1)))
    assert n > 800


# ---------------------------------------------------------------------------------------------------------
# StableHLO lowering (IREE compiles stablehlo.uniform_quantize with StablehloLegalizeQuantToMath)
# ---------------------------------------------------------------------------------------------------------
def test_iree_stablehlo_uniform_quantize():
    compiler = pytest.importorskip("iree.compiler", reason="IREE cross-check")
    runtime = pytest.importorskip("iree.runtime", reason="IREE runtime")
    from qref.interop.mlir import format_type

    # unsigned storage spelled ui8: with MLIR's `u8` keyword the storage type is a signless i8, and the
    # lowering's final convert saturates to [-128, 127] (uniform.md §4.2 notes this quirk)
    cases = [("int8", 0.1, -3, None), ("int8", 1 / 3, 3, None), ("uint8", 0.013, 7, None),
             ("int8", [0.1, 0.5, 1 / 3], [-3, 0, 3], 1)]
    funcs, inputs, schemes = [], [], []
    for i, (st, s, z, axis) in enumerate(cases):
        sch = qref.scheme(st, scale=s, zero_point=z, axis=axis, profile="stablehlo_lowering",
                          type_spelling="ui8" if st == "uint8" else None)
        ty = format_type(sch)
        if axis is None:
            x = np.concatenate([ties(s), specials()]).astype(F32)
        else:
            x = np.stack([ties(v, range(-140, 141))[:800] for v in s], axis=1).astype(F32)
        shape = "x".join(str(d) for d in x.shape)
        ity = "i8" if st == "int8" else "ui8"
        funcs.append(f"""
  func.func @q{i}(%x: tensor<{shape}xf32>) -> tensor<{shape}x{ity}> {{
    %0 = stablehlo.uniform_quantize %x : (tensor<{shape}xf32>) -> tensor<{shape}x{ty}>
    %1 = stablehlo.bitcast_convert %0 : (tensor<{shape}x{ty}>) -> tensor<{shape}x{ity}>
    return %1 : tensor<{shape}x{ity}>
  }}""")
        inputs.append(x)
        schemes.append(sch)
    src = "module {" + "".join(funcs) + "\n}\n"
    vmfb = compiler.compile_str(src, input_type="stablehlo", target_backends=["llvm-cpu"],
                                extra_args=["--iree-llvmcpu-target-cpu=generic"])
    cfg = runtime.Config("local-task")
    ctx = runtime.SystemContext(config=cfg)
    ctx.add_vm_module(runtime.VmModule.copy_buffer(ctx.instance, vmfb))
    n = 0
    for i, (x, sch) in enumerate(zip(inputs, schemes)):
        out = np.asarray(ctx.modules.module[f"q{i}"](x).to_host())
        n += compare(out, sch.quantize(x))
    assert n > 5000



def test_jax_qwix_aqt_bfloat16_inputs() -> None:
    """bfloat16 inputs: XLA:CPU computes x * fl32(1/s) in float32 and rounds it to bfloat16 once (jax, qwix:
    bf16_upcast); AQT rounds its reciprocal to bfloat16 (lax.reciprocal in the input dtype)."""
    jax = pytest.importorskip("jax", reason="JAX cross-check")
    jnp = jax.numpy
    from qwix._src.core import qarray

    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng(8)
    n = 0
    for s, z in ((0.1, 3), (1 / 3, -5), (0.013, 0)):
        sb = float(np.asarray(s, bf))
        x = np.concatenate([(np.arange(-300, 300) + 0.5) * sb, rng.standard_normal(2000) * 30]).astype(bf)

        @jax.jit
        def f(v, s=sb, z=z):
            return jnp.clip(jnp.round(v / jnp.asarray(s, v.dtype)) + z, -128, 127).astype(jnp.int8)

        n += compare(np.asarray(f(jnp.asarray(x))), qref.scheme("int8", scale=sb, zero_point=z, profile="jax")
                     .quantize(x))
        qa = qarray.quantize_with_scale_zero_point(jnp.asarray(x.reshape(1, -1)), jnp.int8,
                                                   jnp.full((1, 1), sb, bf), jnp.full((1, 1), z, jnp.int8))
        n += compare(np.asarray(qa.qvalue).reshape(-1), qref.scheme("int8", scale=sb, zero_point=z,
                                                                     profile="qwix").quantize(x))
    from aqt.jax.v2 import aqt_quantizer

    x = ((np.arange(-140, 141) + 0.5) * 0.1).astype(bf).reshape(1, -1)
    qt = aqt_quantizer.quantizer_make(8)
    t = qt.calibrate(jnp.asarray(x), calibration_axes=[1])
    t.scale = [jnp.full((1, 1), 0.1, bf)]
    qv, _ = qt.calculate_qvalue(jnp.asarray(x), t)
    n += compare(np.asarray(qv.qvalue).reshape(-1).astype(np.int64),
                 qref.scheme("int8", scale=float(np.asarray(0.1, bf)), profile="aqt").quantize(x.reshape(-1)))
    assert n > 10000


EXTREME_SCALES = {"float32": (2.0**-127, 1e-38, 3e-41, 2.0**-126, 2.0**127, 3e38),
                  "bfloat16": (2.0**-127, 1e-38, 2.0**127), "float16": (2.0**-20, 2.980232238769531e-07, 6e4)}


@pytest.mark.parametrize("dt", list(EXTREME_SCALES))
def test_xla_profiles_flush_subnormals_and_aqt_replaces_an_infinite_reciprocal(dt: str) -> None:
    """XLA:CPU FTZ/DAZ (uniform.md §3 flush_subnormals): a subnormal scale scales by Inf, a scale above 2^126 by
    0, subnormal x read as 0; AQT turns an infinite reciprocal into 1 (reciprocal_inf); qwix's dequantize flushes
    a subnormal scale. Checked against jax, qwix and AQT on tiny, huge, subnormal and special inputs."""
    jax = pytest.importorskip("jax", reason="JAX cross-check")
    jnp = jax.numpy
    pytest.importorskip("qwix", reason="qwix cross-check")
    pytest.importorskip("aqt.jax.v2.aqt_quantizer", reason="AQT (aqtp) cross-check")
    from aqt.jax.v2 import aqt_quantizer
    from qwix._src.core import qarray

    npdt = {"float32": F32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dt]
    f = jax.jit(lambda v, s_, z_: jnp.clip(jnp.round(v / s_) + z_, -128, 127).astype(jnp.int8))
    n = 0
    for s in EXTREME_SCALES[dt]:
        s = float(np.asarray(s, npdt))
        with np.errstate(all="ignore"):
            base = np.array([0.0, -0.0, 1e-40, -1e-41, 2.0**-126, 1e-30, 1.0, -3.0, 1e30, 3e38, np.inf, -np.inf,
                             np.nan])
            x = np.concatenate([base, np.arange(-130, 131) * s, (np.arange(-130, 131) + 0.5) * s]).astype(npdt)
            ref = np.asarray(f(jnp.asarray(x), jnp.asarray(s, x.dtype), jnp.asarray(3, x.dtype)))
        n += compare(ref, qref.scheme("int8", scale=s, zero_point=3, profile="jax").quantize(x))
        qa = qarray.quantize_with_scale_zero_point(jnp.asarray(x), jnp.int8, jnp.asarray([s], x.dtype), None)
        n += compare(np.asarray(qa.qvalue), qref.scheme("int8", scale=s, profile="qwix").quantize(x))
        codes = np.arange(-128, 128, dtype=np.int8)
        dq = qarray.dequantize(qarray.QArray(jnp.asarray(codes), jnp.asarray([s], x.dtype), None, jnp.int8))
        sch = qref.scheme("int8", scale=s, profile="qwix", expressed=dt)
        ours = sch.dequantize(qref.QArray(codes=codes, scheme=sch))
        uint = np.uint32 if dt == "float32" else np.uint16
        assert (np.asarray(ours).view(uint) == np.asarray(dq).view(uint)).all(), (dt, s)
        qt = aqt_quantizer.quantizer_make(8)
        t = qt.calibrate(jnp.asarray(x.reshape(1, -1)), calibration_axes=[1])
        t.scale = [jnp.full((1, 1), s, x.dtype)]
        qv, _ = qt.calculate_qvalue(jnp.asarray(x.reshape(1, -1)), t)
        n += compare(np.asarray(qv.qvalue).reshape(-1).astype(np.int64),
                     qref.scheme("int8", scale=s, profile="aqt").quantize(x))
    assert n > 2000


@pytest.mark.parametrize(("storage", "tp", "zdt"), [("int8", "INT8", np.int8), ("uint8", "UINT8", np.uint8),
                                                     ("int16", "INT16", np.int16), ("uint16", "UINT16", np.uint16)])
def test_onnxruntime_profile_float16_divides_in_float32(storage, tp, zdt):
    """onnxruntime widens float16 x and scale to float32 for the division (profile 'onnxruntime'); the ONNX
    reference (profile 'onnx') divides in float16: x = 0.25, s = f16(0.1) gives 3 under onnxruntime, 2 under onnx."""
    from onnx import TensorProto

    n = 0
    for s in (0.0999755859375, 1 / 3, 0.013, 0.5, 7.0):
        s16 = np.float16(s)
        for z in (0, 1, 3):
            with np.errstate(over="ignore"):
                x = np.concatenate([ties(float(s16)), specials(), [0.25]]).astype(np.float16)
            m = _onnx_model(21, getattr(TensorProto, tp), {}, np.array(s16), np.array(z, dtype=zdt),
                            in_type=TensorProto.FLOAT16, x_shape=[x.size])
            ref = _ort_run(m, x)
            q = qref.scheme(storage, scale=float(s16), zero_point=z, profile="onnxruntime", expressed="float16")
            n += compare(ref, q.quantize(x))
    assert n > 2000
    q = qref.scheme("int8", scale=0.0999755859375, profile="onnx", expressed="float16")
    assert q.quantize(np.array([0.25], np.float16)).codes[0] == 2


def test_pytorch_qint32_per_tensor_dequantize_subtracts_in_int32():
    """torch's qint32 per-tensor dequantize: (q - z) wrapping in int32, to float32, times the float32 scale =
    profile 'pytorch' with dq_subtract='int32' (uniform.md §4.3)."""
    torch = pytest.importorskip("torch", reason="PyTorch cross-check")
    codes = np.array([12345678, 16777217, -(2**31) + 1, 2**31 - 1, 0, -5, 7], dtype=np.int32)
    for s, z in ((0.1, 0), (1 / 3, 5), (0.013, -(2**31)), (2.5, 2**31 - 1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensors are deprecated in torch 2.13
            ref = torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), s, z).dequantize().numpy()
        sch = qref.scheme("int32", scale=s, zero_point=z, profile="pytorch", dq_subtract="int32")
        ours = sch.dequantize(qref.QArray(codes=codes, scheme=sch))
        assert (ours.view(np.uint32) == ref.view(np.uint32)).all(), (s, z, ours, ref)
