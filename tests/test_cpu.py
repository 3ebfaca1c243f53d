"""The CPU as part of the truth (profiles.md §6): CPU descriptions, pins, CPU variants, xfail entries keyed by a
CPU feature, and (slow, C5) the pinned backends run natively and pinned: every difference is a variant predicted for
this CPU, and every variant predicted to differ here shows."""

from __future__ import annotations

import importlib

import pytest

from qref.errors import QrefError
from qref.harness.model import Comparison, TaskResult
from qref.harness.runner import apply_pin, host_dependent, mark_variants
from qref.harness.xfail import Xfails, parse_xfails
from qref.profiles import cpu

# /proc/cpuinfo heads as Linux prints them (flags cut to a representative subset of each CPU's real list)
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx f16c bmi1 avx2 bmi2 avx512f avx512dq avx512cd \
avx512bw avx512vl avx_vnni avx512_bf16 avx512_vnni avx512_bitalg avx512_fp16 amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
flags\t\t: fpu
"""
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 avx512f avx512dq avx512bw avx512vl \
avx512_bf16 avx512vbmi avx512_vnni
"""
HASWELL = """vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2680 v3
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""


def test_cpuinfo_is_read_from_the_first_processor() -> None:
    spr = cpu.parse_cpuinfo(SAPPHIRE_RAPIDS)
    assert (spr.vendor, spr.model) == ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+")
    assert {"avx512_fp16", "amx_int8", "avx_vnni", "avx512_vnni"} <= spr.features
    assert "avx512bw" in spr.features and "sse" not in spr.features  # only the listed features are kept
    zen4 = cpu.parse_cpuinfo(ZEN4)
    assert zen4.has("avx512_bf16") and not zen4.has("avx512_fp16") and not zen4.has("amx_tile")
    assert cpu.parse_cpuinfo(HASWELL).features == cpu.BASELINE_FEATURES
    d = zen4.describe()
    assert d.startswith("x86_64 AuthenticAMD AMD EPYC (") and "not: avx512_fp16" in d
    assert zen4.to_json()["features"] == [f for f in cpu.FEATURES if f in zen4.features]
    with pytest.raises(QrefError, match="flags"):
        cpu.parse_cpuinfo("vendor_id : x\nmodel name : y\n")


def test_host_cpu_is_described() -> None:
    h = cpu.host_cpu()
    assert h.arch and h.features <= set(cpu.FEATURES)


def test_features_can_be_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu.MASK_ENV, "avx512*, amx_*")
    h = cpu.host_cpu()
    assert not any(f.startswith(("avx512", "amx")) for f in h.features) and cpu.MASK_ENV in h.model
    monkeypatch.setenv(cpu.MASK_ENV, "")
    assert cpu.MASK_ENV not in cpu.host_cpu().model


def test_pins_cut_the_features_to_the_baseline() -> None:
    spr = cpu.parse_cpuinfo(SAPPHIRE_RAPIDS)
    for b in ("jax", "qwix", "mlir"):
        assert cpu.effective_features(b, spr, "baseline") == cpu.BASELINE_FEATURES
        assert cpu.effective_features(b, spr, "native") == spr.features
        assert not host_dependent(b, "baseline") and host_dependent(b, "native")
    assert cpu.effective_features("onnxruntime", spr, "baseline") == spr.features  # no pin: the host's kernels
    assert host_dependent("onnxruntime", "baseline")
    with pytest.raises(QrefError):
        cpu.effective_features("jax", spr, "fastest")
    assert set(cpu.FIXED_TARGET) & set(cpu.PINS) == set()


def test_variants_are_selected_by_their_feature() -> None:
    spr, zen4, hsw = (cpu.parse_cpuinfo(t).features for t in (SAPPHIRE_RAPIDS, ZEN4, HASWELL))
    by = {v.name: v for v in cpu.CPU_VARIANTS}
    f16 = by["xla_f64_to_f16_through_f32"]
    assert not f16.applies(spr) and f16.applies(zen4) and f16.applies(hsw)
    assert by["xla_f16_loop_fma"].applies(spr) and not by["xla_f16_loop_fma"].applies(zen4)
    pairs = by["mlas_u8s8_int16_pairs"]  # either VNNI flavour selects the exact kernel
    assert not pairs.applies(spr) and not pairs.applies(zen4) and pairs.applies(hsw)
    assert not pairs.applies(frozenset({"avx2", "avx_vnni"}))
    assert f16.touches("jax.astype.jit", "elements/float16/f64/nearest_even/inf/overflow")
    assert not f16.touches("jax.astype.jit", "elements/float16/f32/nearest_even/inf/overflow")
    assert not f16.touches("qwix.int.jit", "elements/float16/f64/x")
    with pytest.raises(QrefError):
        cpu.CpuVariant("x", "avx512_fp17", True, "*", "*", (), "")
    assert len({v.name for v in cpu.CPU_VARIANTS}) == len(cpu.CPU_VARIANTS)
    from qref.harness.classify import CLASSES

    for v in cpu.CPU_VARIANTS:  # classes are mismatch classes, or the outcomes "unsupported" / "crash"
        assert set(v.classes) <= set(CLASSES) | {"unsupported", "crash"}, v.name


def test_xfail_entries_keyed_by_a_cpu_feature() -> None:
    text = ("t.*  c/*  double_rounding  cpu:!avx512_fp16  through float32 without FP16\n"
            "t.*  c/*  fma  cpu:avx512_fp16|amx_fp16  fused with FP16\n"
            "t.*  c/*  nan_sign_or_code  NaN payloads\n")
    es = parse_xfails(text)
    assert [e.cpu for e in es] == [("avx512_fp16", False), ("avx512_fp16|amx_fp16", True), None]
    assert [e.condition for e in es] == ["cpu:!avx512_fp16", "cpu:avx512_fp16|amx_fp16", ""]
    assert es[0].reason == "through float32 without FP16"
    spr, zen4 = (cpu.parse_cpuinfo(t).features for t in (SAPPHIRE_RAPIDS, ZEN4))
    xf = Xfails(es)
    assert xf.check("t.x", ("c/1",), {"double_rounding", "nan_sign_or_code"}, zen4)[0]
    assert not xf.check("t.x", ("c/1",), {"double_rounding"}, spr)[0]  # inactive on a CPU with the feature
    assert xf.check("t.x", ("c/1",), {"fma"}, spr)[0]
    assert xf.check("t.x", ("c/1",), {"double_rounding"}, None)[0]  # CPU unknown: every entry applies
    # an inactive entry matches nothing, so it is never stale on that CPU
    xf2 = Xfails(parse_xfails(text))
    xf2.check("t.x", ("c/1",), set(), zen4)
    assert [e.matched for e in xf2.entries] == [1, 0, 1]
    for bad in ("t c x cpu:avx512_fp17 why", "t c x cpu:!avx512_fp16", "t c x cpu:avx2|sse9 why"):
        with pytest.raises(QrefError, match="CPU condition"):
            parse_xfails(bad)


def test_mark_variants_only_for_unpinned_backends() -> None:
    def tr(task: str, status: str) -> TaskResult:
        return TaskResult("onnxruntime.matmul_integer", "matmul", task, (task,), status)

    rs = [tr("matmul/matmul_integer/uint8xint8/random/exact", "pass"),
          tr("matmul/matmul_integer/uint8xint8/k_odd/exact", "xfail"),
          tr("matmul/matmul_integer/uint8xint8/m1/exact", "fail"),  # unexpected: stays visible
          tr("matmul/matmul_integer/uint8xuint8/random/exact", "pass"),  # not touched
          tr("matmul/qlinear_matmul/uint8xint8_uint8/per_row_a/exact", "xfail")]  # another class: stays visible
    rs[1].vs_profile = Comparison(8, 2, {"pair_saturation": 2})
    rs[4].vs_profile = Comparison(8, 8, {"other": 8})
    mark_variants(rs, "onnxruntime", "baseline")
    assert [r.status for r in rs] == ["variant", "variant", "fail", "pass", "xfail"]
    assert [r.host_status for r in rs] == ["pass", "xfail", "", "", ""]
    assert "mlas_u8s8_int16_pairs" in rs[0].reason
    js = [TaskResult("jax.astype.jit", "elements", "elements/float16/f64/a/b", ("elements/float16/f64/a/b",),
                     "xfail")]
    mark_variants(js, "jax", "baseline")  # pinned: decided by the pin, reported normally
    assert js[0].status == "xfail"
    mark_variants(js, "jax", "native")
    assert js[0].status == "variant"


def test_a_pin_refuses_a_process_where_jax_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jax", sys)  # any module object: jax counts as imported
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    with pytest.raises(QrefError, match="already imported"):
        apply_pin("jax")
    monkeypatch.setenv("QREF_LLVM_TARGET", "")  # restored after the test
    apply_pin("mlir")
    import os

    assert os.environ["QREF_LLVM_TARGET"] == "x86-64-v3;-avx512fp16"
    apply_pin("onnxruntime")  # no pin: nothing set


# ---- C5: natively and pinned ------------------------------------------------------------------------------
#: the cases of the pinned backends' CPU-dependent targets (and neighbours that must not change)
PINNED_CASES = ("elements/float16/*", "elements/bfloat16/*", "elements/float8_e4m3fn/f64/*", "uniform/*/f16/*",
                "uniform/*/ebf16_*", "uniform/int8/pt_*/f32/*")


def _outcome(r: TaskResult) -> tuple[str, tuple[str, ...]]:
    status = r.host_status or r.status
    classes = tuple(sorted(r.vs_profile.classes)) if r.vs_profile is not None else ()
    if status == "unsupported" or status == "crash":
        return status, ()
    return ("pass" if status == "pass" else "differs"), classes


@pytest.mark.slow
def test_results_depend_on_the_cpu_only_through_variants() -> None:
    for m in ("jax", "qwix", "torch_mlir"):
        try:
            importlib.import_module(m)
        except ImportError:
            pytest.skip(f"{m} is not installed; CI installs every backend")
    from qref.harness import runner

    backends = ["jax", "qwix", "mlir"]
    native = runner.run(backends, include=PINNED_CASES, xfail_files=[], cpu="native")
    pinned = runner.run(backends, include=PINNED_CASES, xfail_files=[], cpu="baseline")
    assert not native.errors and not pinned.errors and native.results
    host = cpu.host_cpu()
    a = {(r.target, r.task): _outcome(r) for r in native.results}
    b = {(r.target, r.task): _outcome(r) for r in pinned.results}
    assert a.keys() == b.keys()
    moved = {v.name: v for v in cpu.CPU_VARIANTS if v.applies(host.features) != v.applies(cpu.BASELINE_FEATURES)}
    unexplained, shown = [], set()
    for key in sorted(a):
        if a[key] == b[key]:
            continue
        target, task = key
        why = [v for v in moved.values() if v.touches(target, task)]
        if not why:
            unexplained.append(f"{target} {task}: native {a[key]}, pinned {b[key]}")
        shown.update(v.name for v in why)
    assert not unexplained, ("results that depend on the CPU with no variant of profiles.md §6 explaining them "
                             f"(CPU: {host.describe()}):\n" + "\n".join(unexplained[:30]))
    ran = {r.target for r in native.results}
    expected = {n for n, v in moved.items() if any(v.of_target(t) for t in ran)}
    assert shown == expected, f"variants predicted to differ on this CPU that did not show: {expected - shown}"
