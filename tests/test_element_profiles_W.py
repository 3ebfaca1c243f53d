"""The element profiles onnxruntime, onnxruntime_no_saturate and jax (elements.md §6) against the installed
backends, and the policy values they need (unsigned_negative="min", absent_zero="nan_below_min"; elements.md
§2.4, §2.7) against the exact oracle of tests/oracle.py."""

from __future__ import annotations

import importlib.util
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from oracle import Grid, oracle_encode, spec_of

import qref

FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")


def _frac(v: float) -> Fraction | str | float:
    if not math.isfinite(v):
        return v
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else Fraction(0)
    return Fraction(v)


def _boundary_inputs(fmt: qref.FloatFormat, n_random: int = 2000) -> np.ndarray:
    """Every finite value of fmt, the midpoints, +-2^-40 (relative) around both, 2^-128 .. 2^-140, random
    float64 values across fmt's range, both signs, and the specials."""
    vals = qref.decode(np.arange(1 << fmt.bits, dtype=np.uint32).astype(fmt.code_dtype), fmt).astype(np.float64)
    vals = np.unique(np.abs(vals[np.isfinite(vals)]))
    mids = (vals[:-1] + vals[1:]) / 2
    pts = np.concatenate([vals, mids, 2.0 ** -np.arange(126, 141, dtype=np.float64)])
    pts = np.concatenate([pts, pts * (1 + 2.0**-40), pts * (1 - 2.0**-40)])
    rng = np.random.default_rng(20261207)
    lo, hi = math.log2(vals[vals > 0].min()) - 4, math.log2(vals.max()) + 2
    rnd = 2.0 ** rng.uniform(lo, hi, n_random)
    x = np.concatenate([pts, rnd])
    return np.concatenate([x, -x, [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan]])


@pytest.mark.parametrize("name", ["float8_e8m0fnu", "float8_e5m3fnu"])
def test_unsigned_negative_min_and_nan_below_min_against_oracle(name: str) -> None:
    """unsigned_negative="min" and absent_zero="nan_below_min" under nearest_even / up / nearest_away, both
    overflow rules of the format, against the Fraction oracle; float32 inputs also through the table path."""
    fmt = qref.get_format(name)
    g = Grid(spec_of(fmt))
    x = _boundary_inputs(fmt)
    options = [{"unsigned_negative": "min"}, {"unsigned_negative": "min", "overflow": "saturate"}]
    if not fmt.zero:
        options += [{"unsigned_negative": "min", "absent_zero": "min"}, {"absent_zero": "nan_below_min"},
                    {"absent_zero": "nan_below_min", "unsigned_negative": "magnitude"}]
    for opt in options:
        for mode in ("nearest_even", "up", "nearest_away"):
            pol = qref.CastPolicy(rounding=mode, **opt)
            rp = pol.resolve(fmt)
            want = np.array([oracle_encode(g, _frac(v), mode, rp.overflow, rp.nan,
                                           unsigned_negative=pol.unsigned_negative, absent_zero=pol.absent_zero)
                             for v in x], dtype=np.uint64)
            got = qref.encode(x, fmt, profile=pol).astype(np.uint64)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, opt, mode, [(x[i], int(want[i]), int(got[i])) for i in bad[:5]])
            with np.errstate(over="ignore"):
                ok32 = (x.astype(np.float32).astype(np.float64) == x) | np.isnan(x)
            got32 = qref.encode(np.resize(x[ok32].astype(np.float32), 1 << 17), fmt, profile=pol)
            assert np.array_equal(got32.astype(np.uint64), np.resize(want[ok32], 1 << 17)), (name, opt, mode)


def test_e8m0_examples_of_the_new_values() -> None:
    """The examples of elements.md §2.4 / §2.7, values from the format definition (code k = 2^(k - 127))."""
    x = np.array([-1.0, -math.inf, -math.nan, -0.0, 2.0**-128, 2.0**-127, 1.5 * 2.0**-127, -2.0**-128])
    sat1 = qref.CastPolicy(rounding="up", overflow="saturate", unsigned_negative="min", absent_zero="min")
    assert qref.encode(x, "float8_e8m0fnu", profile=sat1).tolist() == [0x00, 0x00, 0xFF, 0x00, 0x00, 0x00, 0x01,
                                                                        0x00]
    sat0 = qref.CastPolicy(rounding="up", absent_zero="nan_below_min")
    assert qref.encode(x, "float8_e8m0fnu", profile=sat0).tolist() == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01,
                                                                        0xFF]
    with pytest.raises(qref.QrefError, match="unsigned_negative='min' is for unsigned formats"):
        qref.encode(np.array([1.0]), "float8_e4m3fn", profile=qref.CastPolicy(unsigned_negative="min"))
    with pytest.raises(qref.QrefError, match="absent_zero='nan_below_min' is for unsigned formats without zero"):
        qref.encode(np.array([1.0]), "float8_e5m3fnu", profile=qref.CastPolicy(absent_zero="nan_below_min"))


# ---- the real backends ---------------------------------------------------------------------------------------
def _sources() -> dict[str, np.ndarray]:
    """Every float16 and bfloat16 pattern, float32: every bfloat16 value widened with +-1..2 ulp and 2^17 random
    patterns; float64: the float32 ones plus values +-2^-40 (relative) off them and 2^16 random patterns."""
    rng = np.random.default_rng(7)
    b16 = np.arange(1 << 16, dtype=np.uint32)
    w = (b16 << 16).astype(np.int64)
    f32b = np.concatenate([w + d for d in (-2, -1, 0, 1, 2)] + [rng.integers(0, 1 << 32, 1 << 17)])
    f32 = (f32b % (1 << 32)).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        f64 = f32.astype(np.float64)
    f64 = np.concatenate([f64, f64 * (1 + 2.0**-40), f64 * (1 - 2.0**-40),
                          rng.integers(0, 1 << 63, 1 << 16, dtype=np.uint64).view(np.float64)])
    return {"float16": b16.astype(np.uint16).view(np.float16),
            "bfloat16": b16.astype(np.uint16).view(ml_dtypes.bfloat16), "float32": f32, "float64": f64}


ORT = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


def _ort_cast(x: np.ndarray, dst: str, saturate: int) -> np.ndarray:
    """ONNX Runtime's Cast of x to dst (an ONNX float8 type) with the given saturate, as the codes (uint8)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    src = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT", "float64": "DOUBLE"}[x.dtype.name]
    to = {"float8_e4m3fn": "FLOAT8E4M3FN", "float8_e5m2": "FLOAT8E5M2", "float8_e4m3fnuz": "FLOAT8E4M3FNUZ",
          "float8_e5m2fnuz": "FLOAT8E5M2FNUZ", "float8_e8m0fnu": "FLOAT8E8M0"}[dst]
    node = helper.make_node("Cast", ["x"], ["y"], to=getattr(TensorProto, to), saturate=saturate)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", getattr(TensorProto, src), [None])],
                          [helper.make_tensor_value_info("y", getattr(TensorProto, to), [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    b = s.io_binding()
    b.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}"), getattr(TensorProto, src)))
    b.bind_output("y", "cpu")
    s.run_with_iobinding(b)
    o = b.get_outputs()[0]
    import ctypes

    return np.frombuffer(ctypes.string_at(o.data_ptr(), int(o.tensor_size_in_bytes())), np.uint8).copy()


def _not_modelled(dst: str, x: np.ndarray) -> np.ndarray:
    """The ranges onnxruntime_no_saturate leaves to xfail entries: E4M3FN [480, 496) -> 448, E5M2 [61440, 65536)
    -> NaN (after the float32 rounding of float64 inputs)."""
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.abs(x.astype(np.float32).astype(np.float64))
    if dst == "float8_e4m3fn":
        return (a >= 480) & (a < 496)
    if dst == "float8_e5m2":
        return (a >= 61440) & (a < 65536)
    return np.zeros(x.shape, dtype=bool)


@pytest.mark.skipif(not ORT, reason="onnxruntime / onnx not installed")
@pytest.mark.parametrize("saturate,profile", [(1, "onnxruntime"), (0, "onnxruntime_no_saturate")])
def test_onnxruntime_cast_profiles(saturate: int, profile: str) -> None:
    """Cast(saturate) from float16 / bfloat16 / float32 / float64 to the five float8 types equals the profile's
    codes, except (saturate=0) on the two ranges the profile lists as not modelled, where ORT does differ."""
    srcs = _sources()
    for dst in FP8:
        fmt = qref.get_format(dst)
        for name, x in srcs.items():
            got = _ort_cast(x, dst, saturate)
            want = qref.encode(x, fmt, profile=profile)
            skip = _not_modelled(dst, x) if saturate == 0 else np.zeros(x.shape, dtype=bool)
            bad = np.flatnonzero((got != want) & ~skip)
            assert bad.size == 0, (profile, name, dst, [(x[i], int(want[i]), int(got[i])) for i in bad[:5]])
            if skip.any():  # the rule stays an xfail entry only while ORT still differs there
                assert (got[skip] != want[skip]).all(), (profile, name, dst)


JAX = importlib.util.find_spec("jax") is not None


@pytest.mark.skipif(not JAX, reason="jax not installed")
def test_jax_astype_e8m0_profile() -> None:
    """x.astype(jnp.float8_e8m0fnu) eagerly and under jax.jit equals the jax profile from every source."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    fmt = qref.get_format("float8_e8m0fnu")
    f = jax.jit(lambda v: v.astype(jnp.float8_e8m0fnu))
    for name, x in _sources().items():
        with jax.enable_x64(name == "float64"):
            eager = np.asarray(jnp.asarray(x).astype(jnp.float8_e8m0fnu)).view(np.uint8)
            jit = np.asarray(f(jnp.asarray(x))).view(np.uint8)
        want = qref.encode(x, fmt, profile="jax")
        for got in (eager, jit):
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, [(x[i], int(want[i]), int(got[i])) for i in bad[:5]])
