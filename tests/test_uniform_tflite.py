"""The TFLite uniform profiles against TFLite's own kernels (ai-edge-litert's Interpreter), bit for bit.

Each test writes a one-operator .tflite flatbuffer (QUANTIZE float32 -> int8/uint8/int16, or DEQUANTIZE back)
with the schema module that ships inside ai-edge-litert and runs it with one of the interpreter's three kernel
paths (uniform.md §4.3):

- ``BUILTIN_REF``: the reference kernels, profile ``tflite``;
- ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``: the optimized kernels, profile ``tflite_optimized`` (a vector loop of 8
  and the reference loop for the remainder);
- ``AUTO`` (the default): int8/uint8 per-tensor ops go to the XNNPACK delegate, profile ``tflite_xnnpack``;
  int16 and per-axis ops stay on the optimized / reference kernels.

Inputs: (k + 1/2) * s and +-1, +-2 ulp at 20 scales, zero points at the storage extremes, huge, NaN and
infinite values. Codes are compared as integers on the elements the profile specifies; the tests assert how
many were compared and that the three profiles tell the paths apart.
"""

from __future__ import annotations

import numpy as np
import pytest

import qref

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="TFLite (ai-edge-litert) cross-check")
schema = pytest.importorskip("ai_edge_litert.schema_py_generated", reason="TFLite flatbuffer schema")
flatbuffers = pytest.importorskip("flatbuffers", reason="flatbuffer builder")

F32 = np.float32
R = litert.OpResolverType
TYPES = {"int8": (schema.TensorType.INT8, np.int8), "uint8": (schema.TensorType.UINT8, np.uint8),
         "int16": (schema.TensorType.INT16, np.int16), "float32": (schema.TensorType.FLOAT32, np.float32)}
ZPS = {"int8": (0, -128, 127, 5, -3), "uint8": (0, 255, 128, 3), "int16": (0, 100, -32768, 32767)}
RNG = np.random.default_rng(14)
SCALES = tuple(float(s) for s in np.concatenate([
    [1.0, 0.1, 0.3, 1 / 3, 0.007, 3e-5, 7.1, 1234.5], 2.0 ** RNG.uniform(-20, 10, 12)]).astype(F32))


def _model(op: int, in_t: str, out_t: str, shape: tuple[int, ...], scale: object, zp: object,
           axis: int = 0) -> bytes:
    """A one-operator TFLite model; the integer side carries the quantization parameters."""
    S = schema
    m = S.ModelT()
    m.version = 3
    oc = S.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = op
    oc.version = 1
    m.operatorCodes = [oc]
    m.buffers = [S.BufferT(), S.BufferT(), S.BufferT()]

    def tensor(name: str, t: str, buf: int) -> object:
        tt = S.TensorT()
        tt.shape, tt.type, tt.buffer, tt.name = list(shape), TYPES[t][0], buf, name.encode()
        if t != "float32":
            qp = S.QuantizationParametersT()
            qp.scale = [float(v) for v in np.atleast_1d(scale)]
            qp.zeroPoint = [int(v) for v in np.atleast_1d(zp)]
            qp.quantizedDimension = axis
            tt.quantization = qp
        return tt

    sg = S.SubGraphT()
    sg.tensors = [tensor("x", in_t, 1), tensor("y", out_t, 2)]
    sg.inputs, sg.outputs = [0], [1]
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, [0], [1]
    sg.operators = [o]
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _run(buf: bytes, x: np.ndarray, resolver: object) -> np.ndarray:
    it = litert.Interpreter(model_content=buf, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def tflite_quantize(x: np.ndarray, storage: str, s: object, z: object, resolver: object,
                    axis: int | None = None) -> np.ndarray:
    return _run(_model(schema.BuiltinOperator.QUANTIZE, "float32", storage, x.shape, s, z, axis or 0), x, resolver)


def tflite_dequantize(codes: np.ndarray, storage: str, s: object, z: object, resolver: object,
                      axis: int | None = None) -> np.ndarray:
    return _run(_model(schema.BuiltinOperator.DEQUANTIZE, storage, "float32", codes.shape, s, z, axis or 0),
                codes, resolver)


def near_ties(s: float, n: int = 1500) -> np.ndarray:
    """(k + 1/2) * s rounded to float32 and its +-1, +-2 ulp neighbours, plus Gaussian values; an odd length
    (not a multiple of 8) so the optimized kernels' remainder loop runs too."""
    rng = np.random.default_rng(int(np.float32(s).view(np.uint32)))  # the same inputs in any test order
    k = rng.integers(-300, 300, n).astype(np.float64)
    base = ((k + 0.5) * s).astype(F32)
    out = [base]
    for d in (1, 2):
        up, dn = base, base
        for _ in range(d):
            up, dn = np.nextafter(up, F32(np.inf)), np.nextafter(dn, F32(-np.inf))
        out += [up, dn]
    out.append((rng.standard_normal(503) * 100 * s).astype(F32))
    return np.concatenate(out)


SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 3e38, -3e38, 2.1e9, -2.1e9, 2147483520.0, 2147483648.0,
                     -2147483648.0, -2147483904.0, 1e6, -1e6, 0.0, -0.0, 1e-45, -1e-45, 1e-39, -1e-39], F32)


def compare(got: np.ndarray, q: qref.QArray) -> tuple[int, int]:
    """(compared, unspecified) after asserting every specified code equals TFLite's (as integers)."""
    assert q.unspecified is not None
    ok = ~q.unspecified
    a, b = np.asarray(got).astype(np.int64)[ok], q.codes.astype(np.int64)[ok]
    bad = np.flatnonzero(a != b)
    assert bad.size == 0, f"{bad.size} mismatches, first: TFLite {a[bad[:5]]} vs qref {b[bad[:5]]}"
    return int(ok.sum()), int(q.unspecified.sum())


def _sweep(profile: str, resolver: object, storages: tuple[str, ...]) -> tuple[int, int]:
    n = unspec = 0
    for st in storages:
        for z in ZPS[st]:
            for s in SCALES:
                x = np.concatenate([near_ties(s), SPECIALS])
                got = tflite_quantize(x, st, s, z, resolver)
                c, u = compare(got, qref.scheme(st, scale=s, zero_point=z, profile=profile).quantize(x))
                n, unspec = n + c, unspec + u
    return n, unspec


def test_reference_kernels_are_the_tflite_profile() -> None:
    """BUILTIN_REF: round half away from zero of fl32(x / s), + z in integers; int32 overflow and NaN unspecified."""
    n, unspec = _sweep("tflite", R.BUILTIN_REF, ("int8", "uint8", "int16"))
    assert n > 1_000_000 and 0 < unspec < n // 500


def test_optimized_kernels_are_the_tflite_optimized_profile() -> None:
    """BUILTIN_WITHOUT_DEFAULT_DELEGATES: x * fl32(1 / s) rounded half even in groups of 8, the rest as 'tflite'."""
    n, unspec = _sweep("tflite_optimized", R.BUILTIN_WITHOUT_DEFAULT_DELEGATES, ("int8", "uint8", "int16"))
    assert n > 1_000_000 and 0 < unspec < n // 500


def test_default_interpreter_int8_is_xnnpack_and_int16_is_optimized() -> None:
    """AUTO: int8/uint8 QUANTIZE runs in the XNNPACK delegate (saturating, FTZ/DAZ); int16 is not delegated."""
    n, _ = _sweep("tflite_xnnpack", R.AUTO, ("int8", "uint8"))
    assert n > 600_000
    n16, _ = _sweep("tflite_optimized", R.AUTO, ("int16",))
    assert n16 > 200_000


def test_xnnpack_flushes_subnormals_and_saturates() -> None:
    """Subnormal inputs read as 0 (DAZ); a scale above 2^126 has a subnormal reciprocal, flushed to 0 (FTZ), so
    every finite x gives z; +-Inf and huge values saturate. (A subnormal scale crashes XNNPACK: not run.)"""
    x = np.array([1e-38, -1e-38, 1e-40, 2.0**-126, 1.0, 100.0, 3e38, -3e38, np.inf, -np.inf], F32)
    n = 0
    for s in (2.0**-126, 2.0**-120, 3e38, 1.5 * 2.0**126, 2.0**126):
        for st, z in (("int8", 0), ("int8", -7), ("uint8", 9)):
            got = tflite_quantize(x, st, s, z, R.AUTO)
            q = qref.scheme(st, scale=s, zero_point=z, profile="tflite_xnnpack").quantize(x)
            n += compare(got, q)[0]
    assert n == 138  # +-Inf * fl(1 / s) = Inf * 0 (flushed reciprocal) is NaN: 12 unspecified
    assert tflite_quantize(np.array([1e-38], F32), "int8", 2.0**-126, 0, R.AUTO)[0] == 0  # 0.85 without DAZ: 1


@pytest.mark.parametrize("resolver", ["BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "AUTO"])
def test_per_axis_quantize_and_dequantize_use_the_reference_kernels(resolver: str) -> None:
    """Per-axis QUANTIZE and DEQUANTIZE take the reference loop under every resolver: profile 'tflite'."""
    r = getattr(R, resolver)
    n = 0
    for st in ("int8", "uint8", "int16"):
        sc = np.array([0.1, 1 / 3, 0.007, 7.1], F32)
        zp = np.array([ZPS[st][0], ZPS[st][1], ZPS[st][2], ZPS[st][3]])
        if st == "int16":
            zp = np.zeros(4, dtype=np.int64)  # TFLite requires int16 zero points of 0
        x = np.stack([near_ties(float(s), 300)[:2000] for s in sc], axis=1)  # (2000, 4): axis 1
        x[:4] = SPECIALS[:16].reshape(4, 4)
        sch = qref.scheme(st, scale=sc.astype(np.float64), zero_point=zp, axis=1, profile="tflite")
        got = tflite_quantize(x, st, sc, zp, r, axis=1)
        n += compare(got, sch.quantize(x))[0]
        lo, hi = sch.storage_bounds
        codes = np.resize(np.arange(lo, hi + 1), (max(2000, (hi - lo + 4) // 4), 4)).astype(TYPES[st][1])
        if st in ("int8", "uint8"):
            d = tflite_dequantize(codes, st, sc, zp, r, axis=1)
            want = sch.dequantize(qref.QArray(codes=codes, scheme=sch), np.float32)
            assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
            n += d.size
    assert n > 20_000


def _dequantize_all(profile: str, resolver: object, storages: tuple[str, ...]) -> int:
    n = 0
    rng = np.random.default_rng(25)
    scales = np.concatenate([[1.0, 0.1, 2.0**-120, 1e-10, 2.0**100, 2.0**126], 2.0 ** rng.uniform(-120, 100, 19)])
    for st in storages:
        for z in (ZPS[st] if st != "int16" else (0,)):  # int16 DEQUANTIZE requires zero point 0
            for s in scales.astype(F32):
                sch = qref.scheme(st, scale=float(s), zero_point=z, profile=profile)
                lo, hi = sch.storage_bounds
                codes = np.concatenate([np.arange(lo, hi + 1), np.arange(lo, lo + 5)]).astype(TYPES[st][1])
                got = tflite_dequantize(codes, st, float(s), z, resolver)
                vals, bad = sch.dequantize_with_mask(qref.QArray(codes=codes, scheme=sch), np.float32)
                assert not bad.any()
                m = np.flatnonzero(got.view(np.uint32) != vals.view(np.uint32))
                assert m.size == 0, (profile, st, z, float(s), codes[m[:4]], got[m[:4]], vals[m[:4]])
                n += codes.size
    return n


def test_dequantize_every_code() -> None:
    """Every code at 25 scales and the zero points above: reference double(s) * (q - z); optimized
    fl32(fl32(q * s) + fl32(-z * s)) in groups of 8 with the reference remainder; XNNPACK fl32((q - z) * s)."""
    n = _dequantize_all("tflite", R.BUILTIN_REF, ("int8", "uint8", "int16"))
    n += _dequantize_all("tflite_optimized", R.BUILTIN_WITHOUT_DEFAULT_DELEGATES, ("int8", "uint8", "int16"))
    n += _dequantize_all("tflite_xnnpack", R.AUTO, ("int8", "uint8"))
    assert n > 1_800_000


def test_the_three_paths_differ_where_the_profiles_say() -> None:
    """The profiles are not interchangeable: on ties the reference path rounds away from zero and the vector
    paths to even; the optimized dequantize's multiply-add differs from double(s) * (q - z) with z != 0."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5] * 4, F32)[:19]
    ref = tflite_quantize(x, "int8", 1.0, 0, R.BUILTIN_REF)
    opt = tflite_quantize(x, "int8", 1.0, 0, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    xnn = tflite_quantize(x, "int8", 1.0, 0, R.AUTO)
    assert ref.tolist() == [1, 2, 3, -1, -3] * 3 + [1, 2, 3, -1]
    assert opt.tolist() == [0, 2, 2, 0, -2] * 3 + [0, 2, 3, -1]  # positions 16..18: the remainder loop
    assert xnn.tolist() == [0, 2, 2, 0, -2] * 3 + [0, 2, 2, 0]
    for prof, got in (("tflite", ref), ("tflite_optimized", opt), ("tflite_xnnpack", xnn)):
        assert qref.scheme("int8", scale=1.0, profile=prof).quantize(x).codes.tolist() == got.tolist()
    codes = np.arange(-128, 128, dtype=np.int8)
    s = 0.1
    d_ref = tflite_dequantize(codes, "int8", s, 5, R.BUILTIN_REF)
    d_opt = tflite_dequantize(codes, "int8", s, 5, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert np.sum(d_ref.view(np.uint32) != d_opt.view(np.uint32)) > 10


def test_optimized_tail_divides_in_double() -> None:
    """The optimized kernel's scalar tail (the last n mod 8 elements of a per-tensor QUANTIZE) rounds half away
    from zero fl64(x) / fl64(s), not the reference's fl32(x / s): 7-element tensors (all tail) of ties and
    +-1 ulp at 20 scales, against an independent float64 computation and the profile."""
    n = 0
    for st, (lo, hi) in (("int8", (-128, 127)), ("uint8", (0, 255)), ("int16", (-32768, 32767))):
        for s in SCALES:
            x = near_ties(s, 700)[:7 * 500].reshape(-1, 7)
            z = ZPS[st][-1]
            q64 = np.asarray(x, np.float64) / np.float64(np.float32(s))
            want = np.clip(np.sign(q64) * np.floor(np.abs(q64) + 0.5) + z, lo, hi).astype(np.int64)
            got = np.stack([tflite_quantize(r, st, s, z, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES) for r in x[:60]])
            assert np.array_equal(got.astype(np.int64), want[:60])
            sch = qref.scheme(st, scale=s, zero_point=z, profile="tflite_optimized")
            prof = np.stack([sch.quantize(r).codes for r in x])
            assert np.array_equal(prof.astype(np.int64), want)
            n += got.size
    # the tail differs from the reference kernel's float32 division: s = fl32(0.013), x = fl32(-1.6315)
    x = np.array([-1.6315, -1.6445, 0.0065], F32)
    assert tflite_quantize(x, "int8", 0.013, 0, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES).tolist() == [-125, -126, 1]
    assert tflite_quantize(x, "int8", 0.013, 0, R.BUILTIN_REF).tolist() == [-126, -127, 1]
    assert n > 20_000
