"""OpenVINO (CPU plugin, openvino 2026.4.1) as harness targets (qref/harness/adapters/openvino.py), bit for bit.

- weight decompression Multiply(Subtract(Convert(w, f32), z), s): runtime codes (a Parameter) run the plugin's
  fused multiply-add, fl32(q * s + fl32(-z * s)) (profile ``openvino_cpu``, uniform.md §2.2 dq_form "fma");
  constant codes are folded by the core, fl32(fl32(q - z) * s) (profile ``openvino``);
- NF4 decompression Convert(Multiply(Convert(w_nf4, f16), s_f16), f32): a Parameter takes the float32 table
  (``openvino_cpu``, lut.md §4), a folded Constant the float16 entry (``openvino``);
- Convert f32 / f64 / bf16 -> f8e4m3 / f8e5m2 rounds through float16 (element profile ``openvino``, source
  "via_float16", elements.md §2.12; E5M2's rules beyond it are xfail entries);
- FakeQuantize with input range fl32((lo / hi - z) * s) and output range [lo, hi]: on a Parameter the plugin's
  Snippets decomposition fl32(fl32(x * isc) - fl32(il * isc)), round half even (``openvino_cpu``, range_form
  "scale_shift"); on a Constant with levels <= 256 the core's reference fl32(fl32(x - il) / fl32(ih - il)) * n
  (``openvino``, "normalize"), uniform.md §2.8.

Expected values come from independent numpy float64 arithmetic (every product of a code of at most 8 bits and a
float32 scale is exact in float64) and ml_dtypes casts, not from the adapter.
"""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.formats import get_format
from qref.harness import adapters, runner
from qref.tables import NF4

ov = pytest.importorskip("openvino", reason="OpenVINO backend (pip install openvino)")
from openvino import opset13 as ops  # noqa: E402

from qref.harness.adapters import openvino as O  # noqa: E402

F32 = np.float32
SCALES = F32([0.1, 1 / 3, 7.1e-5, 1234.5, 2.0**-20 * 3, 0.007])


def _decompress(codes: np.ndarray, t: str, z: float, s: float, mode: str) -> np.ndarray:
    zz, ss = np.full(codes.shape, z, F32), np.full(codes.shape, s, F32)

    def build(n):
        return ops.multiply(ops.subtract(ops.convert(n, ov.Type.f32), ops.constant(zz)), ops.constant(ss))

    return O.run_graph(build, t, codes.shape, codes, mode).view(F32)


@pytest.mark.parametrize("storage,t,zps", [("uint8", "u8", (0, 3, 127, 200, 255)), ("int8", "i8", (0, -128, 5, 127)),
                                           ("uint4", "u4", (0, 8, 15)), ("int4", "i4", (-8, -1, 7))])
def test_decompression_parameter_is_one_fma_and_constant_is_subtract_then_multiply(storage, t, zps):
    fmt = get_format(storage)
    codes = np.arange(fmt.lo, fmt.hi + 1).astype(np.int8 if fmt.signed else np.uint8)
    n = 0
    for z in zps:
        for s in SCALES:
            q = codes.astype(np.float64)
            c = F32(-z * np.float64(s))  # -z * s is exact in float64, rounded once
            fma = (q * np.float64(s) + np.float64(c)).astype(F32)  # exact in float64, then one rounding
            sub = ((q - z).astype(F32) * s).astype(F32)
            got_p = _decompress(codes, t, z, float(s), "parameter")
            got_c = _decompress(codes, t, z, float(s), "constant")
            assert np.array_equal(got_p.view(np.uint32), fma.view(np.uint32)), (z, s)
            assert np.array_equal(got_c.view(np.uint32), sub.view(np.uint32)), (z, s)
            for prof, want in (("openvino_cpu", fma), ("openvino", sub)):
                sch = qref.scheme(storage, scale=float(s), zero_point=z, profile=prof)
                v = sch.dequantize(qref.QArray(codes=codes, scheme=sch), np.float32)
                assert np.array_equal(v.view(np.uint32), want.view(np.uint32)), (prof, z, s)
            n += codes.size
    assert n >= 3 * 16 * len(SCALES)
    if storage == "uint8":  # q = z gives the FMA's residue: -7.45e-9 for z = 3, s = fl32(0.1), not 0
        r = _decompress(np.array([3], np.uint8), t, 3, float(F32(0.1)), "parameter")
        assert r.view(np.uint32)[0] == 0xB2000000


def test_nf4_decompression_parameter_takes_the_float32_table_constant_the_float16_entry():
    codes = np.tile(np.arange(16, dtype=np.uint8), 12).reshape(3, 64)
    s = np.array([[0.37], [1e-5], [3.0e4]], np.float16)

    def build(n):
        return ops.convert(ops.multiply(ops.convert(n, ov.Type.f16), ops.constant(s)), ov.Type.f32)

    e32 = NF4.values.astype(F32)[codes]
    want_p = (e32.astype(np.float64) * s.astype(np.float64)).astype(F32)
    want_c = (e32.astype(np.float16).astype(np.float64) * s.astype(np.float64)).astype(F32)
    got_p = O.run_graph(build, "nf4", codes.shape, codes, "parameter").view(F32).reshape(codes.shape)
    got_c = O.run_graph(build, "nf4", codes.shape, codes, "constant").view(F32).reshape(codes.shape)
    assert np.array_equal(got_p.view(np.uint32), want_p.view(np.uint32))
    assert np.array_equal(got_c.view(np.uint32), want_c.view(np.uint32))
    assert not np.array_equal(want_p, want_c)  # the two paths differ (two profiles)
    for prof, want in (("openvino_cpu", want_p), ("openvino", want_c)):
        sch = qref.scheme("nf4", profile=prof, block_size=64)
        q = qref.QArray(codes=codes, scheme=sch, scales=s.astype(F32))
        assert np.array_equal(sch.dequantize(q, np.float32).view(np.uint32), want.view(np.uint32)), prof


def _near_ties(fmt: str) -> np.ndarray:
    v = np.asarray(qref.decode(np.arange(256, dtype=np.uint8), fmt, dtype=np.float64))
    v = np.unique(np.abs(v[np.isfinite(v)]))
    mids = ((v[:-1] + v[1:]) / 2).astype(F32)
    x = (mids.view(np.int32)[:, None] + np.arange(-20, 21, dtype=np.int32)).view(F32).ravel()
    return np.concatenate([x, -x])


def test_convert_to_f8e4m3_rounds_through_float16():
    """fl_e4m3(fl16(x)) (ml_dtypes casts) on every float32 within 20 ulp of each midpoint: the Parameter and the
    folded Constant agree with it, and differ from one rounding on some of them; so does the openvino profile."""
    x = _near_ties("float8_e4m3fn")
    via16 = x.astype(np.float16).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    once = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    for mode in O.MODES:
        got = O.run_graph(lambda n: ops.convert(n, ov.Type.f8e4m3), "f32", x.shape, x, mode)
        assert np.array_equal(got, via16), mode
        assert np.sum(got != once) > 100
    assert np.array_equal(qref.encode(x, "float8_e4m3fn", profile="openvino"), via16)
    assert x.size > 10_000


def _f16_witnesses() -> dict[str, np.ndarray]:
    """Inputs around every float16 midpoint: float32 (exact, +-1 ulp), float64 (+-2^-40 relative: one rounding to
    float16 leaves the tie, the float32 step lands on it), every bfloat16 value."""
    h = np.arange(65536, dtype=np.uint16).view(np.float16)
    v = np.unique(h[np.isfinite(h)].astype(np.float64))
    mid = (v[:-1] + v[1:]) / 2
    m32 = mid.astype(F32)
    powers = np.array([2.0**-17, 2.0**-16, 2.0**-15, 2.0**-14])[:, None]
    below = (powers * (1 - np.array([1, 2, 4095, 4096, 4097, 8192]) * 2.0**-24)).astype(F32).ravel()
    x32 = np.concatenate([m32, np.nextafter(m32, F32(np.inf)), np.nextafter(m32, F32(-np.inf)), below, -below])
    x64 = np.concatenate([mid * (1 + 2.0**-40), mid * (1 - 2.0**-40)])
    bf = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(bf.astype(np.float32))
    return {"f32": x32, "f64": x64, "bf16": bf[finite]}


@pytest.mark.parametrize("fmt,t", [("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2")])
def test_convert_to_f8_rounds_through_float16(fmt, t):
    """Expected: ml_dtypes casts x -> float32 -> float16 -> fmt (each one rounding, nearest even), independent of
    qref. E5M2 from float32: the xfail rule (the 4096 float32 values P (1 - k 2^-24), k = 1..4096, just below P =
    2^-17, 2^-16, 2^-15 give the code of 2P) is checked as such and left out of the comparison."""
    dt = getattr(ml_dtypes, fmt)
    n = 0
    for src, x in _f16_witnesses().items():
        with np.errstate(over="ignore"):
            h = np.asarray(x).astype(np.float32).astype(np.float16)
        want = h.astype(dt).view(np.uint8)
        once = np.asarray(x).astype(dt).view(np.uint8)
        rule = np.zeros(x.shape, bool)
        if fmt == "float8_e5m2" and src == "f32":
            a = np.abs(x.astype(np.float64))
            p = np.array([2.0**-17, 2.0**-16, 2.0**-15])[:, None]
            hit = (a >= p * (1 - 4096 * 2.0**-24)) & (a < p)
            rule = hit.any(axis=0)
            twice = (np.sign(x.astype(np.float64)) * 2 * (p * hit).sum(axis=0)).astype(dt).view(np.uint8)
        for mode in O.MODES:
            got = O.run_graph(lambda nd: ops.convert(nd, getattr(ov.Type, t)), src, x.shape, np.ascontiguousarray(x),
                              mode)
            assert np.array_equal(got[~rule], want[~rule]), (src, mode)
            if fmt == "float8_e5m2" and src == "f32":
                assert rule.sum() == 3 * 2 * 4 and np.array_equal(got[rule], twice[rule]), (src, mode)
        assert np.array_equal(qref.encode(x, fmt, profile="openvino")[~rule], want[~rule]), src
        if src != "bf16":
            assert np.sum(want != once) > 50, src  # the witnesses separate double from single rounding
        n += x.size
    assert n > 300_000


def test_convert_edges_f4e2m1_nan_and_f8e8m0_negatives():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e9, 2.5, 0.0, -0.0], F32)
    for mode in O.MODES:
        f4 = O.unpack(O.run_graph(lambda n: ops.convert(n, ov.Type.f4e2m1), "f32", x.shape, x, mode), 4, x.size)
        assert f4.tolist() == [0x7, 0xF, 0x7, 0xF, 0x7, 0x4, 0x0, 0x8]  # NaN -> +-6; 2.5 a tie -> 2 (0x4, even)
        e = O.run_graph(lambda n: ops.convert(n, ov.Type.f8e8m0), "f32", x.shape, x, mode)
        assert e.tolist() == [0xFF, 0x00, 0xFE, 0x00, 0x9D, 0x80, 0x00, 0x00]  # 1e9 -> 2^30, 2.5 -> 2^1 (nearest)


def test_default_precision_hint_is_bf16_and_leaves_these_graphs_alone():
    """AVX512-BF16: the CPU plugin's default INFERENCE_PRECISION_HINT is bf16; the adapter sets f32. On these
    element-wise graphs the default gives the same bits (the plugin lowers MatMul / Convolution, not these)."""
    core = ov.Core()
    if "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU has no bf16 capability")
    assert str(core.get_property("CPU", "INFERENCE_PRECISION_HINT")) == "<Type: 'bfloat16'>"
    q = np.arange(256, dtype=np.uint8)
    p = ops.parameter([256], ov.Type.u8)
    m = ov.Model([ops.multiply(ops.subtract(ops.convert(p, ov.Type.f32), ops.constant(np.full(256, 127, F32))),
                               ops.constant(np.full(256, 1 / 3, F32)))], [p], "m")
    outs = []
    for cfg in ({}, O.CONFIG):
        req = core.compile_model(m, "CPU", cfg).create_infer_request()
        req.infer([O.ov_tensor(ov, "u8", (256,), q)])
        outs.append(np.asarray(req.get_output_tensor(0).data).view(np.uint32).copy())
    assert np.array_equal(outs[0], outs[1])


@pytest.fixture(scope="module")
def result():
    return runner.run(["openvino"], include=["uniform/*/pt_*/dequantize/*", "lookup/nf4/b64/f*/dequantize/codes/*",
                                             "elements/float8_e4m3fn/f32/nearest_even/saturate/near_ties",
                                             "elements/float8_e5m2/f32/nearest_even/saturate/subnormal",
                                             "elements/float8_e5m2/decode/float32", "uniform/*/fq_*/f32/ties/*"],
                      isolate=False)


def test_the_suite_runs_with_only_expected_differences(result):
    assert not result.unexpected, [(r.target, r.task, r.reason) for r in result.unexpected]
    st = {(r.target, r.status) for r in result.results}
    for mode in O.MODES:
        assert (f"openvino.decompress.{mode}", "pass") in st
        assert (f"openvino.nf4.{mode}", "pass") in st
        assert (f"openvino.fake_quantize.{mode}", "pass") in st
        assert (f"openvino.convert.{mode}", "xfail") in st
        assert (f"openvino.convert.{mode}", "pass") in st  # f8e4m3 near ties: the openvino profile


def test_snippet_is_standalone():
    from qref.conformance import load_suite

    case = load_suite()["uniform/int8/pt_s0.1_z3/dequantize/stablehlo"]
    tg = next(t for t in adapters.load_targets("openvino") if t.name == "openvino.decompress.parameter")
    script = tg.snippet(case, 131)
    assert "qref" not in script
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    (got,) = tg.run([case])
    assert int(out.strip().splitlines()[-1], 16) == int(got["y"].view(np.uint32).reshape(-1)[131])


def test_constant_graph_is_folded_and_parameter_graph_is_a_fused_subgraph():
    """The two inputs are two computations: with a Parameter the plugin fuses Convert/Subtract/Multiply into one
    Snippets subgraph (the FMA); with a Constant the core folds the whole graph to one constant."""
    q = np.arange(16, dtype=np.uint8)
    layers = {}
    for mode in O.MODES:
        tt = O.ov_tensor(ov, "u8", (16,), q)
        n = ops.parameter([16], ov.Type.u8) if mode == "parameter" else ov.op.Constant(tt)
        out = ops.multiply(ops.subtract(ops.convert(n, ov.Type.f32), ops.constant(np.full(16, 3, F32))),
                           ops.constant(np.full(16, 0.1, F32)))
        cm = ov.Core().compile_model(ov.Model([out], [n] if mode == "parameter" else [], "g"), "CPU", O.CONFIG)
        layers[mode] = [op.get_rt_info()["layerType"].astype(str) for op in cm.get_runtime_model().get_ordered_ops()]
    assert layers["constant"] == ["Const", "Output"]
    assert "Subgraph" in layers["parameter"] and "Subtract" not in layers["parameter"]


# ---- FakeQuantize (uniform.md §2.8) ---------------------------------------------------------------------------
def _fq(x: np.ndarray, il: float, ih: float, lo: int, hi: int, mode: str) -> np.ndarray:
    c = [ops.constant(np.array([v], F32)) for v in (il, ih, lo, hi)]
    return O.run_graph(lambda n: ops.fake_quantize(n, *c, hi - lo + 1), "f32", x.shape, x, mode).view(F32)


def _fq_expected(x: np.ndarray, il: np.float32, ih: np.float32, lo: int, hi: int) -> dict[str, np.ndarray]:
    """Independent float32 numpy arithmetic of the two forms and two refuted variants (uniform.md §2.8)."""
    n = F32(hi - lo)
    with np.errstate(all="ignore"):
        isc = F32(n / F32(ih - il))
        c = F32(il * isc)
        xc = np.minimum(np.maximum(x, il), ih)
        t_ss = (xc * isc).astype(F32) - c
        t_fma = (xc.astype(np.float64) * np.float64(isc) - np.float64(c)).astype(F32)  # the node's FMA kernel
        t_n = (((x - il).astype(F32) / F32(ih - il)).astype(F32) * n).astype(F32)
        t_n = np.where(x <= il, F32(0), np.where(x > ih, n, t_n))
    return {"scale_shift": lo + np.rint(t_ss), "normalize": lo + np.rint(t_n), "fma_input": lo + np.rint(t_fma),
            "half_away": lo + np.trunc(t_ss + np.copysign(F32(0.5), t_ss))}


FQ_SETUPS = [("uint8", 0.1, 3, False), ("uint8", 1 / 3, 128, False), ("int8", 0.007, -5, False),
             ("int8", 0.007, -5, True), ("uint4", 1234.5, 0, False), ("int4", 0.37, -2, True),
             ("uint8", 7.1e-5, 100, False), ("int16", 0.0013, 17, False)]


@pytest.mark.parametrize("storage,s,z,narrow", FQ_SETUPS)
def test_fake_quantize_forms(storage, s, z, narrow):
    """Every tie (k + 1/2) s32 and its float32 neighbours, the grid k s32, +-Inf and far values: the Parameter
    gives the scale_shift form (not the node's FMA kernel, not half away), the Constant the normalize form (levels
    <= 256), and the profiles openvino_cpu / openvino give the same codes."""
    kw = {"narrow_symmetric": True} if narrow else {}
    sch = {p: qref.scheme(storage, scale=s, zero_point=z, profile=p, **kw) for p in ("openvino_cpu", "openvino")}
    lo, hi = sch["openvino"].storage_bounds
    s32 = F32(s)
    il, ih = F32((lo - z) * np.float64(s32)), F32((hi - z) * np.float64(s32))
    k = np.arange(lo - z - 2, hi - z + 2, dtype=np.float64)
    if k.size > 4096:  # 16-bit: every 16th k, the ends kept
        k = np.unique(np.concatenate([k[::16], k[:64], k[-64:]]))
    t = ((k + 0.5) * np.float64(s32)).astype(F32)
    x = np.concatenate([t, np.nextafter(t, F32(np.inf)), np.nextafter(t, F32(-np.inf)),
                        (k * np.float64(s32)).astype(F32), F32([np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, il, ih])])
    want = _fq_expected(x, il, ih, lo, hi)
    got_p = _fq(x, float(il), float(ih), lo, hi, "parameter")
    assert np.array_equal(got_p, want["scale_shift"])
    assert not np.array_equal(got_p, want["half_away"])
    if storage != "uint4":  # s = 1234.5: isc * x is exact enough that the FMA agrees
        assert not np.array_equal(got_p, want["fma_input"])
    assert np.array_equal(sch["openvino_cpu"].quantize(x).codes.astype(np.int64), got_p.astype(np.int64))
    assert np.array_equal(sch["openvino_cpu"].quantize(x.reshape(-1, 1), _reference=True).codes.reshape(-1),
                          sch["openvino_cpu"].quantize(x).codes)
    if hi - lo + 1 <= O.FOLD_LEVELS:
        got_c = _fq(x, float(il), float(ih), lo, hi, "constant")
        assert np.array_equal(got_c, want["normalize"])
        assert np.array_equal(sch["openvino"].quantize(x).codes.astype(np.int64), got_c.astype(np.int64))
        assert np.array_equal(sch["openvino"].quantize(x, _reference=True).codes, sch["openvino"].quantize(x).codes)


def test_fake_quantize_constant_folds_up_to_256_levels():
    """A Constant FakeQuantize with levels <= 256 is folded by the core's reference (normalize); with 257 the
    plugin runs it (scale_shift)."""
    il, ih = F32(-2.1), F32(4.3)
    for levels, form in ((256, "normalize"), (257, "scale_shift")):
        k = np.arange(levels - 1) + 0.5  # the ties il + (k + 1/2) (ih - il) / n and their neighbours
        t = (np.float64(il) + k * (np.float64(ih) - np.float64(il)) / (levels - 1)).astype(F32)
        x = np.concatenate([t, np.nextafter(t, F32(9)), np.nextafter(t, F32(-9))])
        want = _fq_expected(x, il, ih, 0, levels - 1)
        assert not np.array_equal(want["normalize"], want["scale_shift"])
        got = _fq(x, float(il), float(ih), 0, levels - 1, "constant")
        assert np.array_equal(got, want[form]), levels


def test_level_round_trip_is_exact():
    """uniform.md §2.8 (C3): fl32(fl32(r / n) * n) = r for every 0 <= r <= n, n = 2^b - 1 and 2^b - 2, b <= 16."""
    for b in range(1, 17):
        for n in {2**b - 1, max(2**b - 2, 1)}:
            r = np.arange(n + 1, dtype=F32)
            assert np.array_equal(((r / F32(n)).astype(F32) * F32(n)).astype(F32), r), n


def test_fake_quantize_snippet_is_standalone():
    from qref.conformance import load_suite

    case = load_suite()["uniform/uint8/fq_s0.1_z3/f32/ties/openvino_cpu"]
    tg = next(t for t in adapters.load_targets("openvino") if t.name == "openvino.fake_quantize.parameter")
    script = tg.snippet(case, 40)
    assert "qref" not in script and "fake_quantize" in script
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    (got,) = tg.run([case])
    bits = int(out.strip().splitlines()[-1], 16)
    assert np.uint32(bits).view(F32) == got["codes"].reshape(-1)[40]
