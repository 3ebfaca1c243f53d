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
  "scale_shift"); on a Constant with 15 / 16 / 255 / 256 levels the core's reference fl32(fl32(x - il) /
  fl32(ih - il)) * n (``openvino``, "normalize"), uniform.md §2.8; general float output ranges
  (reference.fake_quantize: the recomposed output range, the FMA output step, the 65536-level identity).

Expected values come from independent numpy float64 arithmetic (every product of a code of at most 8 bits and a
float32 scale is exact in float64) and ml_dtypes casts, not from the adapter.
"""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.formats import get_format
from qref.harness import adapters, runner
from qref.profiles.cpu import host_cpu
from qref.tables import NF4

ov = pytest.importorskip("openvino", reason="OpenVINO backend (pip install openvino)")
from openvino import opset13 as ops  # noqa: E402

from qref.harness.adapters import openvino as O  # noqa: E402

#: the CPU plugin may use AVX512-FP16 here (qref.profiles.cpu variant openvino_f32_to_e5m2_without_fp16)
_NATIVE_FP16 = host_cpu().has("avx512_fp16") and "ONEDNN_MAX_CPU_ISA" not in os.environ

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
                # CPU variant openvino_f32_to_e5m2_without_fp16: the CPU plugin with AVX512-FP16 rounds these too
                fp16 = mode == "parameter" and _NATIVE_FP16
                assert rule.sum() == 3 * 2 * 4 and np.array_equal(got[rule], (want if fp16 else twice)[rule]), (
                    src, mode)
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
                                             "elements/float8_e5m2/decode/float32", "uniform/*/fq_*/f32/ties/*",
                                             "uniform/fake_quantize/fq_out_256_example/*",
                                             "uniform/fake_quantize/fq_out_16_reversed/*",
                                             "uniform/fake_quantize/fq_out_1000/*",
                                             "uniform/fake_quantize/fq_out_255_blocks/*"],
                      isolate=False)


def test_the_suite_runs_with_only_expected_differences(result):
    assert not result.unexpected, [(r.target, r.task, r.reason) for r in result.unexpected]
    # FakeQuantize on a Parameter depends on the host's ISA (CPU variant openvino_fake_quantize_sse41; openvino is not
    # pinned): those tasks are "variant", with the status on this host in host_status
    st = {(r.target, r.host_status if r.status == "variant" else r.status) for r in result.results}
    for mode in O.MODES:
        assert (f"openvino.decompress.{mode}", "pass") in st
        assert (f"openvino.nf4.{mode}", "pass") in st
        assert (f"openvino.fake_quantize.{mode}", "pass") in st
        assert (f"openvino.convert.{mode}", "xfail") in st
        assert (f"openvino.convert.{mode}", "pass") in st  # f8e4m3 near ties: the openvino profile
    fq = [r for r in result.results if r.task.startswith("uniform/fake_quantize/")]
    assert len(fq) == 8 and {r.host_status if r.status == "variant" else r.status for r in fq} == {"pass"}, \
        [(r.target, r.task, r.status) for r in fq]
    assert sum(r.vs_profile.compared for r in fq) > 3000


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
    if hi - lo + 1 in O._fold_levels():
        got_c = _fq(x, float(il), float(ih), lo, hi, "constant")
        assert np.array_equal(got_c, want["normalize"])
        assert np.array_equal(sch["openvino"].quantize(x).codes.astype(np.int64), got_c.astype(np.int64))
        assert np.array_equal(sch["openvino"].quantize(x, _reference=True).codes, sch["openvino"].quantize(x).codes)


def test_fake_quantize_constant_folds_the_low_precision_levels():
    """A Constant FakeQuantize with 15 / 16 / 255 / 256 levels is folded by the core's reference (normalize); with
    4 or 257 levels the decomposed graph is folded op by op (scale_shift)."""
    il, ih = F32(-2.1), F32(4.3)
    for levels, form in ((256, "normalize"), (16, "normalize"), (257, "scale_shift"), (4, "scale_shift")):
        k = np.arange(levels - 1) + 0.5  # the ties il + (k + 1/2) (ih - il) / n and their neighbours
        t = (np.float64(il) + k * (np.float64(ih) - np.float64(il)) / (levels - 1)).astype(F32)
        x = np.concatenate([t, np.nextafter(t, F32(9)), np.nextafter(t, F32(-9))])
        if levels == 4:  # a few ties separate the forms: add the ties of the scale_shift form
            isc = F32(F32(3) / F32(ih - il))
            x = np.concatenate([x, ((k + np.float64(F32(il * isc))) / np.float64(isc)).astype(F32)])
        want = _fq_expected(x, il, ih, 0, levels - 1)
        assert not np.array_equal(want["normalize"], want["scale_shift"]), levels
        got = _fq(x, float(il), float(ih), 0, levels - 1, "constant")
        assert np.array_equal(got, want[form]), levels


def test_fake_quantize_constant_ranges_along_one_axis_fold_along_two_do_not():
    """256 levels, output range [0, 255]: ranges varying along one axis (8, 1) are folded by the reference
    (normalize); ranges of x's shape (8, 64), as blocks give, by the decomposed graph (scale_shift: an xfail entry
    of openvino.fake_quantize.constant)."""
    rng = np.random.default_rng(5)
    for shape, form in (((8, 1), "normalize"), ((1, 64), "normalize"), ((8, 64), "scale_shift")):
        il = rng.uniform(-3, -1, shape).astype(F32)
        ih = (il + rng.uniform(1, 4, shape)).astype(F32)
        k = rng.integers(0, 255, (8, 64)) + 0.5
        x = (il.astype(np.float64) + k * (ih.astype(np.float64) - il) / 255).astype(F32)
        want = _fq_expected(x, il, ih, 0, 255)
        assert not np.array_equal(want["normalize"], want["scale_shift"]), shape

        def build(n, a=il, b=ih):
            return ops.fake_quantize(n, ops.constant(a), ops.constant(b), ops.constant(F32([0])),
                                     ops.constant(F32([255])), 256)

        got = O.run_graph(build, "f32", x.shape, x, "constant").view(F32).reshape(x.shape)
        assert np.array_equal(got, want[form]), shape


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


# ---- FakeQuantize with general float output ranges (uniform.md §2.8, reference.fake_quantize) ------------------
def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl32(a * b + c) with one rounding: a * b is exact in float64 (24 + 24 bits); the float64 sum s = p + c and
    its exact error e (TwoSum) tell a float32 midpoint that s reached by rounding, which is moved off it by one
    float64 ulp toward the exact value before the final rounding."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = np.broadcast_to(c, p.shape).astype(np.float64)
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    lo32 = s.astype(F32).astype(np.float64)
    other = np.nextafter(lo32.astype(F32), np.where(s > lo32, F32(np.inf), F32(-np.inf))).astype(np.float64)
    mid = (lo32 + other) / 2 == s
    s = np.where(mid & (e != 0), np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def _fq_general_expected(x, il, ih, ol, oh, levels):
    """The plugin on a Parameter and the folded Constant, per tensor (independent float32 numpy arithmetic):
    Parameter: for 15 / 16 / 255 / 256 levels the output range is first rewritten through [0, m] (m = 15 for 16
    levels, else 255); y = fma(r, fl32(fl32(oh' - ol') / n), ol'); Constant: normalize for those levels, else
    fl32(fl32(r * osc) + ol)."""
    n = F32(levels - 1)
    isc = F32(n / F32(ih - il))
    r = np.rint((np.minimum(np.maximum(x, il), ih) * isc).astype(F32) - F32(il * isc)).astype(F32)
    ol2, oh2 = ol, oh
    if levels in (15, 16, 255, 256):
        m = F32(15 if levels == 16 else 255)
        scale, shift = F32(F32(oh - ol) / m), F32(F32(F32(0) - F32(m * ol)) / F32(oh - ol))
        ol2, oh2 = F32(F32(F32(0) - shift) * scale), F32(F32(m - shift) * scale)
    osc2, osc = F32(F32(oh2 - ol2) / n), F32(F32(oh - ol) / n)
    param = _fma32(r, np.full_like(r, osc2), np.full_like(r, ol2))
    if levels in (15, 16, 255, 256):
        t = (((x - il).astype(F32) / F32(ih - il)).astype(F32) * n).astype(F32)
        y = ((((np.rint(t) / n).astype(F32)) * F32(oh - ol)).astype(F32) + ol).astype(F32)
        const = np.where(x <= il, ol, np.where(x > ih, oh, y)).astype(F32)
    else:
        const = ((r * osc).astype(F32) + ol).astype(F32)
    return param, const


FQ_GENERAL = [(-0.3, 25.2, 0.1, 25.5, 256), (-2.1, 4.3, 5.5, -1.25, 16), (-1.0, 3.0, -1.0, 3.0, 15),
              (-2.1, 4.3, 0.7, 9.1, 1000), (0.5, 7.25, -3.3, 0.01, 255)]


@pytest.mark.parametrize("il,ih,ol,oh,levels", FQ_GENERAL)
def test_fake_quantize_general_output_ranges(il, ih, ol, oh, levels):
    """Ties of both input forms, their neighbours and the level points: the Parameter and the Constant agree with
    the independent arithmetic above and with qref.schemes.uniform.reference.fake_quantize (rules openvino_cpu /
    openvino), bit for bit; with 256 levels a plain fma(r, osc, ol) of the original range differs."""
    from qref.schemes.uniform.reference import fake_quantize

    il, ih, ol, oh = F32(il), F32(ih), F32(ol), F32(oh)
    n = levels - 1
    k = np.arange(n + 1, dtype=np.float64)
    isc = F32(F32(n) / F32(ih - il))
    t = np.concatenate([(np.float64(il) + (k + 0.5) * (np.float64(ih) - np.float64(il)) / n),
                        (k + 0.5 + np.float64(F32(il * isc))) / np.float64(isc),
                        np.float64(il) + k * (np.float64(ih) - np.float64(il)) / n]).astype(F32)
    x = np.concatenate([t, np.nextafter(t, F32(np.inf)), np.nextafter(t, F32(-np.inf)),
                        F32([il, ih, np.inf, -np.inf, 0.0, -0.0, il - 1, ih + 1])])
    param, const = _fq_general_expected(x, il, ih, ol, oh, levels)
    for mode, want, prof in (("parameter", param, "openvino_cpu"), ("constant", const, "openvino")):
        c = [ops.constant(np.array([v], F32)) for v in (il, ih, ol, oh)]
        got = O.run_graph(lambda nd, c=c: ops.fake_quantize(nd, *c, levels), "f32", x.shape, x, mode).view(F32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (mode, levels)
        q = fake_quantize(x, il, ih, ol, oh, levels, prof)
        assert np.array_equal(q.view(np.uint32), want.view(np.uint32)), (prof, levels)
    if levels == 256:  # the 0.1..25.5 example: the recomposed range, not (ol, oh), is what runs
        r = np.rint((np.minimum(np.maximum(x, il), ih) * isc).astype(F32) - F32(il * isc)).astype(F32)
        plain = _fma32(r, np.full_like(r, F32(F32(oh - ol) / F32(n))), np.full_like(r, ol))
        assert not np.array_equal(plain, param)


def test_fake_quantize_examples_of_the_spec():
    """uniform.md §2.8 examples (openvino 2026.4.1, this CPU): il = -0.3, ih = 25.2, ol = 0.1, oh = 25.5, 256
    levels. The recomposed range on a Parameter is [0.099999994, 25.5] (0x3dcccccc), so x <= il gives 0.099999994."""
    x = F32([-1.0, -0.2, 1.25, 12.65, 25.2, 100.0])
    want = {"parameter": [0x3DCCCCCC, 0x3E4C65FF, 0x3FD8CBFF, 0x4150C8C8, 0x41CC0000, 0x41CC0000],
            "constant": [0x3DCCCCCD, 0x3E4C6600, 0x3FCC0C0C, 0x4150C8CA, 0x41CC0000, 0x41CC0000]}
    c = [ops.constant(F32([v])) for v in (-0.3, 25.2, 0.1, 25.5)]
    from qref.schemes.uniform.reference import fake_quantize

    for mode, prof in (("parameter", "openvino_cpu"), ("constant", "openvino")):
        got = O.run_graph(lambda nd: ops.fake_quantize(nd, *c, 256), "f32", x.shape, x, mode).view(np.uint32)
        assert got.tolist() == want[mode], mode
        q = fake_quantize(x, F32(-0.3), F32(25.2), F32(0.1), F32(25.5), 256, prof).view(np.uint32)
        assert q.tolist() == want[mode], prof


def test_fake_quantize_65536_levels_with_output_range_equal_to_input_range_is_removed():
    """A 65536-level FakeQuantize with ol = il and oh = ih is removed (QDQ stripping): y = x; fed directly by the
    graph's Parameter compile_model fails ('FQ stripping failed'), with another op in between it compiles."""
    from qref.schemes.uniform.reference import fake_quantize

    x = np.linspace(-1, 5, 257).astype(F32)
    c = [ops.constant(F32([v])) for v in (0.0, 3.7, 0.0, 3.7)]
    for mode in O.MODES:
        got = O.run_graph(lambda nd: ops.fake_quantize(ops.relu(nd), *c, 65536), "f32", x.shape, x, mode).view(F32)
        assert np.array_equal(got, np.maximum(x, 0)), mode
    got = O.run_graph(lambda nd: ops.fake_quantize(nd, *c, 65536), "f32", x.shape, x, "constant").view(F32)
    assert np.array_equal(got, x)
    with pytest.raises(RuntimeError, match="FQ stripping failed"):
        O.run_graph(lambda nd: ops.fake_quantize(nd, *c, 65536), "f32", x.shape, x, "parameter")
    q = fake_quantize(x, F32(0), F32(3.7), F32(0), F32(3.7), 65536, "openvino_cpu")
    assert np.array_equal(q, x)
    assert not np.array_equal(fake_quantize(x, F32(0), F32(3.7), F32(0), F32(3.7), 65535, "openvino_cpu"), x)


def test_fake_quantize_model_rejects_bad_input():
    from qref.errors import QrefError
    from qref.schemes.uniform.reference import fake_quantize

    x = F32([0.5, 1.5])
    for args, msg in (((x, 1.0, 0.0, 0.0, 1.0, 256, "openvino"), "il < ih"),
                      ((x.astype(np.float64), 0.0, 1.0, 0.0, 1.0, 256, "openvino"), "float32"),
                      ((x, 0.0, 1.0, 0.0, 1.0, 2, "openvino"), "levels"),
                      ((x, 0.0, 1.0, 0.0, 1.0, 256, "tflite"), "no FakeQuantize rule"),
                      ((x, F32([0, 0, 0]), 1.0, 0.0, 1.0, 256, "openvino"), "broadcast"),
                      ((np.zeros((2, 3), F32), np.zeros((1, 3), F32), 1.0, 0.0, 1.0, 1000, "openvino"), "axis 1")):
        with pytest.raises(QrefError, match=msg):
            fake_quantize(*args)


# ---- the suite's fake_quantize cases (uniform.md §2.8, C10) ----------------------------------------------------
def _suite_fake_quantize():
    from qref.conformance import load_suite

    return list(load_suite().select(family="uniform", operation="fake_quantize"))


def test_suite_fake_quantize_cases_match_independent_arithmetic():
    """Every per-tensor fake_quantize case's y (under each profile it lists) equals _fq_general_expected, the
    independent float32 arithmetic of the plugin (Parameter: openvino_cpu) and the folded Constant (openvino),
    outside the NaN inputs; both profiles, the spec's example and reversed / negative output ranges are there."""
    cases = _suite_fake_quantize()
    per_tensor = [c for c in cases if c.inputs["input_low"].shape == (1,)]
    assert len(cases) >= 20 and len(per_tensor) >= 15
    seen = set()
    for c in per_tensor:
        x = c.inputs["x"]
        il, ih, ol, oh = (F32(c.inputs[k][0]) for k in ("input_low", "input_high", "output_low", "output_high"))
        levels = int(c.params["levels"])
        param, const = _fq_general_expected(x, il, ih, ol, oh, levels)
        ok = ~np.isnan(x)
        assert c.unspecified["y"].tolist() == (~ok).tolist()
        for prof in c.profiles:
            want = param if prof == "openvino_cpu" else const
            assert np.array_equal(c.expected["y"][ok].view(np.uint32), want[ok].view(np.uint32)), (c.id, prof)
            seen.add((levels, prof, bool(ol > oh)))
    assert {(256, "openvino_cpu", True), (256, "openvino", True), (16, "openvino_cpu", True),
            (255, "openvino", False), (1000, "openvino_cpu", False)} <= seen
    ex = next(c for c in per_tensor if c.id.endswith("fq_out_256_example/openvino_cpu"))
    assert ex.inputs["output_low"].view(np.uint32).tolist() == [0x3DCCCCCD]  # 0.1 (the recomposed range: C6)


def test_fake_quantize_case_snippet_is_standalone():
    """The reproducer of a fake_quantize case (numpy + openvino only) prints what the target returns."""
    case = next(c for c in _suite_fake_quantize() if c.id.endswith("fq_out_256_example/openvino_cpu"))
    tg = next(t for t in adapters.load_targets("openvino") if t.name == "openvino.fake_quantize.parameter")
    script = tg.snippet(case, 37)
    assert "qref" not in script and "fake_quantize" in script
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    (got,) = tg.run([case])
    assert int(out.strip().splitlines()[-1], 16) == int(got["y"].view(np.uint32).reshape(-1)[37])
