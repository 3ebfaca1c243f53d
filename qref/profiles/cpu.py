"""The CPU as part of the truth: the host's ISA features, the pins that fix a backend's code generation to a
baseline ISA, and the CPU variants of backend behaviour (spec: profiles.md §6).

A backend compiled or JIT-compiled for the host CPU (XLA:CPU, upstream MLIR's ExecutionEngine) may produce other
bits on another CPU. Each such difference is a ``CpuVariant``: a named mechanism, the ISA feature that selects it,
the targets and cases it touches and the mismatch classes it explains. A ``CpuPin`` fixes a backend's code
generation to the ``x86-64-v3`` baseline (AVX2, FMA, F16C, BMI2: every x86-64 CPU the project supports), so a
pinned run gives the same bits on every such CPU; ``qref run --cpu baseline`` applies every pin.

Records only: nothing here runs a backend (the harness applies pins and evaluates variants).
"""

from __future__ import annotations

import fnmatch
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import QrefError, check_choice

#: the ISA features a result was seen to depend on or may depend on (Linux /proc/cpuinfo flag spelling)
FEATURES = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512dq", "avx512bw",
            "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8",
            "amx_bf16", "amx_fp16")
#: x86-64-v3 (the psABI level: AVX, AVX2, BMI2, F16C, FMA on top of SSE4.2): what a pinned run may use
BASELINE = "x86-64-v3"
BASELINE_FEATURES = frozenset({"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"})
#: numpy's spelling of the same features (used where /proc/cpuinfo is absent)
_NUMPY_NAMES = {"SSE41": "sse4_1", "SSE42": "sse4_2", "AVX": "avx", "AVX2": "avx2", "FMA3": "fma", "F16C": "f16c",
                "AVX512F": "avx512f", "AVX512DQ": "avx512dq", "AVX512BW": "avx512bw", "AVX512VL": "avx512vl",
                "AVX512VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AVX512FP16": "avx512_fp16"}
CPU_MODES = ("native", "baseline")


@dataclass(frozen=True)
class CpuInfo:
    """One CPU: architecture (platform.machine()), vendor id, model name and the ``FEATURES`` it has."""

    arch: str
    vendor: str
    model: str
    features: frozenset[str]

    def has(self, feature: str) -> bool:
        return feature in self.features

    def describe(self) -> str:
        """``x86_64 GenuineIntel Intel(R) Xeon(R) ... (avx2, fma, ...; not: amx_int8, ...)``."""
        have = [f for f in FEATURES if f in self.features]
        lack = [f for f in FEATURES if f not in self.features]
        return (f"{self.arch} {self.vendor} {self.model} ({', '.join(have) or 'none of the listed features'}"
                + (f"; not: {', '.join(lack)}" if lack else "") + ")")

    def to_json(self) -> dict[str, object]:
        return {"arch": self.arch, "vendor": self.vendor, "model": self.model,
                "features": [f for f in FEATURES if f in self.features]}


def parse_cpuinfo(text: str, arch: str = "x86_64") -> CpuInfo:
    """A CpuInfo from the text of Linux's /proc/cpuinfo (the first processor's vendor_id, model name, flags)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    if "flags" not in fields:
        raise QrefError("the CPU description has no 'flags' line (not a Linux /proc/cpuinfo text)")
    return CpuInfo(arch, fields.get("vendor_id", "unknown"), fields.get("model name", "unknown"),
                   frozenset(f for f in FEATURES if f in flags))


#: environment variable: comma-separated globs of FEATURES to treat as absent (emulating a CPU without them, together
#: with the backends' own ISA masks: profiles.md §6 C6)
MASK_ENV = "QREF_CPU_MASK"


def host_cpu() -> CpuInfo:
    """The CPU this process runs on (/proc/cpuinfo on Linux, else numpy's runtime feature detection), less the
    features ``QREF_CPU_MASK`` names."""
    cpu = _detected_cpu()
    globs = [g.strip() for g in os.environ.get(MASK_ENV, "").split(",") if g.strip()]
    if not globs:
        return cpu
    kept = frozenset(f for f in cpu.features if not any(fnmatch.fnmatchcase(f, g) for g in globs))
    return CpuInfo(cpu.arch, cpu.vendor, f"{cpu.model} [{MASK_ENV}={','.join(globs)}]", kept)


def _detected_cpu() -> CpuInfo:
    arch = platform.machine() or "unknown"
    p = Path("/proc/cpuinfo")
    if sys.platform.startswith("linux") and p.exists():
        try:
            return parse_cpuinfo(p.read_text(encoding="utf-8", errors="replace"), arch)
        except QrefError:
            pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as nf  # numpy 2
    except ImportError:  # pragma: no cover - numpy 1
        from numpy.core._multiarray_umath import __cpu_features__ as nf
    return CpuInfo(arch, "unknown", platform.processor() or "unknown",
                   frozenset(v for k, v in _NUMPY_NAMES.items() if nf.get(k)))


@dataclass(frozen=True)
class CpuPin:
    """How one backend's code generation is fixed to the baseline ISA (``qref run --cpu baseline``).

    backend: the harness backend. mechanism: what is set, in words. env: environment variables set before the
    backend is imported (in its own process). llvm_target: (target-cpu, target-features) written on every LLVM
    function before JIT compilation (LLVM then ignores the host's features). prelude: the Python line a
    reproducer of a pinned run starts with ("" when the pin needs none).
    """

    backend: str
    mechanism: str
    env: tuple[tuple[str, str], ...] = ()
    llvm_target: tuple[str, str] | None = None
    prelude: str = ""

    def features(self, cpu: CpuInfo) -> frozenset[str]:
        """The features the pinned backend may use on ``cpu``: the host's, cut to the baseline."""
        return cpu.features & BASELINE_FEATURES


XLA_PIN = "--xla_cpu_max_isa=AVX2"
PINS: dict[str, CpuPin] = {p.backend: p for p in (
    CpuPin("jax", f"XLA:CPU compiles for at most AVX2 (XLA_FLAGS={XLA_PIN})", (("XLA_FLAGS", XLA_PIN),),
           prelude=f"import os; os.environ['XLA_FLAGS'] = '{XLA_PIN}'"),
    CpuPin("qwix", f"XLA:CPU compiles for at most AVX2 (XLA_FLAGS={XLA_PIN})", (("XLA_FLAGS", XLA_PIN),),
           prelude=f"import os; os.environ['XLA_FLAGS'] = '{XLA_PIN}'"),
    CpuPin("aqt", f"XLA:CPU compiles for at most AVX2 (XLA_FLAGS={XLA_PIN})", (("XLA_FLAGS", XLA_PIN),),
           prelude=f"import os; os.environ['XLA_FLAGS'] = '{XLA_PIN}'"),
    CpuPin("keras", f"XLA:CPU (Keras's JAX backend) compiles for at most AVX2 (XLA_FLAGS={XLA_PIN})",
           (("XLA_FLAGS", XLA_PIN),), prelude=f"import os; os.environ['XLA_FLAGS'] = '{XLA_PIN}'"),
    CpuPin("openvino", "the CPU plugin's kernels (oneDNN, Snippets) use at most AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)",
           (("ONEDNN_MAX_CPU_ISA", "AVX2"),), prelude="import os; os.environ['ONEDNN_MAX_CPU_ISA'] = 'AVX2'"),
    CpuPin("mlir", f"every llvm.func gets target_cpu = \"{BASELINE}\" and target_features = [\"-avx512fp16\"] "
           "before the ExecutionEngine compiles it (LLVM then uses these instead of the host's)",
           llvm_target=(BASELINE, "-avx512fp16")),
)}
#: the CPUs on which a baseline run reproduced the committed docs/conformance.md byte for byte
VERIFIED_ON = ("Intel Xeon (Sapphire Rapids class: AVX-512 with AVX512-VNNI, AVX512-BF16, AVX512-FP16, AMX), "
               "natively (2026-12-07: the report committed with it)",
               "AMD EPYC (Zen 4: AVX-512 F/BW/DQ/VL, AVX512-VNNI, AVX512-BF16; no AVX512-FP16, no AMX), natively, and "
               "with AVX-512 masked where the code under test allows it (XLA_FLAGS=--xla_cpu_max_isa=AVX2, "
               "NPY_DISABLE_CPU_FEATURES=\"X86_V4 AVX512_ICL AVX512_SPR\", ATEN_CPU_CAPABILITY=avx2, "
               "QREF_CPU_MASK=avx512f,avx512dq,avx512bw,avx512vl): the report of the profiles before 2026-12-07 "
               "(the same status and classes on every task and the same findings of ml_dtypes, jax, qwix, "
               "bitsandbytes, torchao and torch; MLAS, MLX, ruy, XNNPACK, fbgemm and oneDNN pick their kernels by "
               "cpuid and cannot be masked); the CPU variants of §4 name what differs between the two CPUs")
#: backends whose generated code does not depend on the host CPU (stated, and held by tests/test_cpu.py)
FIXED_TARGET = {"iree": "compiled with --iree-llvmcpu-target-cpu=generic",
                "stablehlo": "an interpreter: no code is generated for the host"}


@dataclass(frozen=True)
class CpuVariant:
    """A backend behaviour selected by the CPU (profiles.md §6).

    name: the mechanism's stable name. feature: the ISA feature that selects it ("a|b": either of them).
    present: the variant applies when the feature is present (True) or absent (False). targets / cases: globs of
    the harness targets ("a|b": either glob) and case ids it touches. classes: the mismatch classes it explains
    there ("unsupported": the task cannot run).
    effect: what happens, in words. seen_on: the CPUs it was observed on (model names, or the pin).
    """

    name: str
    feature: str
    present: bool
    targets: str
    cases: str
    classes: tuple[str, ...]
    effect: str
    seen_on: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for f in self.feature.split("|"):
            check_choice("CPU feature", f, FEATURES)

    def applies(self, features: frozenset[str]) -> bool:
        return has_feature(features, self.feature) == self.present

    def of_target(self, target: str) -> bool:
        """``target`` matches one of the ``|``-separated globs of ``targets``."""
        return any(fnmatch.fnmatchcase(target, g) for g in self.targets.split("|"))

    def touches(self, target: str, case_id: str) -> bool:
        return self.of_target(target) and fnmatch.fnmatchcase(case_id, self.cases)

    @property
    def condition(self) -> str:
        return ("with " if self.present else "without ") + " or ".join(self.feature.split("|"))


_FP16 = "AVX512-FP16 (Intel Sapphire Rapids and later)"
CPU_VARIANTS: tuple[CpuVariant, ...] = (
    CpuVariant("xla_f64_to_f16_through_f32", "avx512_fp16", False, "jax.astype.*", "elements/float16/f64/*",
               ("double_rounding",),
               f"float64 -> float16 rounds through float32 (double rounding) in XLA:CPU's generated code; with "
               f"{_FP16} the conversion is one correctly rounded instruction (vcvtpd2ph) and these cases conform",
               ("AMD EPYC (Zen 4, AVX-512 without AVX512-FP16) native", f"the {BASELINE} pin",
                "conforming: the CPU of the report committed before profiles.md §6 (it has AVX512-FP16, inferred "
                "from its results)")),
    CpuVariant("xla_f16_loop_fma", "avx512_fp16", True, "qwix.int.jit",
               "uniform/*/f16/*", ("fma",),
               f"with {_FP16} XLA:CPU vectorizes the float16-input quantize loop (float16 -> float32 in the vector "
               "loop) and contracts x * fl(1/s) + z into a fused multiply-add there; without it those elements take "
               "the scalar path and round the product first, as the qwix profile says",
               ("the CPU of the report committed before profiles.md §6: 3 more tasks with fma, one of "
                "them uniform/int8/e16_s0.1_z1/f16/near_ties/stablehlo; the other two inferred to be float16 "
                "inputs as well",)),
    CpuVariant("llvm_f64_to_f16_libcall", "avx512_fp16", False, "mlir.arith", "elements/float16/f64/*",
               ("unsupported",),
               f"LLVM lowers fptrunc f64 -> f16 to the compiler-rt call __truncdfhf2, which the ExecutionEngine does "
               f"not link (the task cannot run); with {_FP16} it is one instruction (vcvtsd2sh) and these cases run "
               "and conform",
               ("AMD EPYC (Zen 4, AVX-512 without AVX512-FP16) native", f"the {BASELINE} pin",
                "running and conforming: the CPU of the report committed before profiles.md §6")),
    CpuVariant("openvino_f32_to_e5m2_without_fp16", "avx512_fp16", False, "openvino.convert.parameter",
               "elements/float8_e5m2/f32/*", ("tie_rule", "other"),
               f"the CPU plugin's Convert f32 -> f8e5m2 rounds through float16; without {_FP16} its conversion "
               "gives the 4096 float32 values just below 2^-17, 2^-16 and 2^-15 the code of twice the power (the "
               "xfail entry's rule); with it (ONEDNN_MAX_CPU_ISA unset) they round through float16 as the "
               "openvino profile says and these cases conform. The folded Constant gives the rule on every CPU",
               ("AMD EPYC (Zen 4, AVX-512 without AVX512-FP16) native: the rule",
                "Intel Xeon (Sapphire Rapids class, AVX512-FP16) native: conforming, 0 of 12,288; with "
                "ONEDNN_MAX_CPU_ISA=AVX2 or AVX512_CORE: the rule on all 12,288")),
    CpuVariant("mlas_u8s8_int16_pairs", "avx512_vnni|avx_vnni", False, "onnxruntime.*", "matmul/*/*xint8*",
               ("pair_saturation",),
               "MLAS picks its u8 x s8 GEMM kernel by cpuid: without VNNI (AVX2 / AVX-512BW) vpmaddubsw sums adjacent "
               "u8 x s8 products with int16 saturation before the int32 sum (the onnxruntime_avx2 matmul profile, "
               "matmul.md §3.2: modelled); with AVX512-VNNI or AVX-VNNI vpdpbusd accumulates every product exactly "
               "in int32 (the onnxruntime profile). Nearly every u8 x s8 case has a saturating pair; the cases "
               "with int8 B of every ORT operation are held to it (DynamicQuantizeMatMul quantizes A to uint8; "
               "whether MLAS's s8 x s8 kernels saturate without VNNI is not known here)",
               ("AMD EPYC (Zen 4, AVX512-VNNI) native: exact, 0 mismatches",)),
    CpuVariant("mlas_sgemm_without_avx512", "avx512f", False, "onnxruntime.matmul_float", "matmul/float_matmul/*",
               ("accumulation_order", "other"),
               "MLAS picks its float32 GEMM kernel by cpuid: the fitted record onnxruntime-1.32-mlas-sgemm-1-thread "
               "(sequential FMA per output, K blocks of 128, a K stride that grows as N shrinks: mma.md §12.1) is "
               "that of its AVX-512F kernel; without AVX-512F the AVX2 / FMA3 kernel runs, whose K blocking is not "
               "fitted: its results hold the bound of mma.md §10.4 and show as drift from the record",
               ("AMD EPYC (Zen 4, AVX-512F) native: the fitted record, 0 mismatches on 10^6 outputs "
                "(tests/test_cpu_gemm_profiles.py)",)),
    CpuVariant("mkl_sgemm_without_avx512", "avx512f", False, "torch.matmul_float", "matmul/float_matmul/*",
               ("accumulation_order", "other"),
               "MKL (torch's CPU BLAS) picks its float32 GEMM kernel by cpuid: the fitted record "
               "torch-2.13.0-mkl-2024.2-avx512-sgemm (mma.md §12.1) is that of its AVX-512 kernel; without AVX-512F "
               "another kernel runs, whose order is not fitted: its results hold the bound of mma.md §10.4 and show "
               "as drift from the record",
               ("AMD EPYC (Zen 4, AVX-512F) native: the fitted record, 0 mismatches on 10^6 outputs "
                "(tests/test_cpu_gemm_profiles.py)",)),
    CpuVariant("torch_int8_kernels_without_vnni", "avx512_vnni|avx_vnni", False,
               "torch.int_mm|torch.quantized_linear.fbgemm|torch.quantized_linear.x86|torch.quantized_linear.onednn",
               "matmul/*", ("pair_saturation", "multiplier_arithmetic"),
               "fbgemm and oneDNN pick their int8 kernels by cpuid: without VNNI they sum adjacent u8 x s8 products "
               "with int16 saturation (vpmaddubsw; torch._int_mm's oneDNN kernel first shifts int8 A into uint8), "
               "and oneDNN applies the source and weight scales as one product; the *.no_vnni targets run those "
               "kernels on every CPU (FBGEMM_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2) against the "
               "torch_*_avx2 profiles (matmul.md §6.7)",
               ("AMD EPYC (Zen 4, AVX512-VNNI) native: the VNNI profiles, 0 mismatches",
                "the same CPU with the ISA masked: the *_avx2 profiles, 0 mismatches")),
    CpuVariant("torch_scaled_mm_onednn_fp8", "avx512_fp16", True, "torch.scaled_mm", "recipes/qdq_matmul/*",
               ("accumulation_order", "scale_arithmetic", "outside_bound", "other"),
               f"with {_FP16} (and torch's AVX512 capability) torch._scaled_mm on CPU runs oneDNN's float8 matmul "
               "primitive, whose products and scales round otherwise (not modelled); without it oneDNN has no float8 "
               "matmul and torch dequantizes each operand to float32 first (fl32(q s)) before a float32 GEMM",
               ("Intel Xeon (Sapphire Rapids class) native: K = 1 results differ from the dequantizing path in 26% "
                "of 10^6 outputs; with ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 the primitive cannot be created; with "
                "ATEN_CPU_CAPABILITY=avx2: the dequantizing path, 0 mismatches",
                "AMD EPYC (Zen 4, no AVX512-FP16): the dequantizing path")),
    CpuVariant("onednn_int8_amx_kernels", "amx_int8", True,
               "torch.quantized_linear.onednn|torch.linear_dynamic.onednn*", "matmul/*",
               ("multiplier_arithmetic", "compute_precision", "other"),
               "with AMX-INT8 oneDNN runs its AMX int8 kernels (exact int32 sums, as VNNI) but applies the "
               "activation, weight and output scales in another order or type than its VNNI kernels: results "
               "move by one code or one float32 ulp (not modelled; ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI selects "
               "the VNNI kernels the torch_onednn* profiles reproduce)",
               ("Intel Xeon (Sapphire Rapids class, AMX) native: 42 tasks differ (multiplier arithmetic, compute "
                "precision); with ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI: the VNNI profiles, 0 unexpected",)),
    CpuVariant("torch_dynamic_linear_without_vnni", "avx512_vnni|avx_vnni", False,
               "torch.linear_dynamic.onednn*|torch.linear_dynamic.fbgemm.full_range|torch.linear_dynamic.x86.full_range",
               "matmul/*", ("pair_saturation", "multiplier_arithmetic"),
               "the dynamic quantized Linear (quantized.linear_dynamic) runs fbgemm's and oneDNN's int8 kernels, "
               "picked by cpuid: without VNNI, 8-bit activation codes (reduce_range=False) saturate u8 x s8 pair "
               "sums in int16, and oneDNN applies its two scales as one product (matmul.md §15); 7-bit codes cannot "
               "saturate, and the suite's weights stay within [-64, 64]",
               ("AMD EPYC (Zen 4, AVX512-VNNI) native: the VNNI profiles, 0 mismatches",
                "the same CPU with FBGEMM_ENABLE_INSTRUCTIONS=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2: the saturating and "
                "one-product forms (tests/test_matmul_torch_dynamic.py)")),
    CpuVariant("torchao_int8_dynamic_kernels", "avx512_vnni|avx_vnni", False, "torchao.int8_dynamic", "matmul/*",
               ("pair_saturation",),
               "torchao's int8 dynamic-activation path shifts the activations by +128 into a u8 x s8 torch._int_mm on "
               "VNNI CPUs without AMX (exact); without VNNI (or with AMX) it takes the s8 x s8 kernel, not run here",
               ("AMD EPYC (Zen 4, AVX512-VNNI) native: 0 mismatches",)),
    CpuVariant("bnb_int8_mm_int_mm_k1", "avx512f", True, "bitsandbytes.int8_vectorwise|bitsandbytes.matmul_lt",
               "matmul/int8_vectorwise_matmul/*/k1/*", ("other",),
               "bitsandbytes' CPU int8_linear_matmul is torch._int_mm where torch's CPU capability is AVX512: with "
               "K = 1 the transposed (N, 1) weight has strides (1, 1) and the kernel returns garbage int32 sums "
               "(they change from run to run); below AVX512 it is a float32 matmul, exact here",
               ("AMD EPYC (Zen 4) native: garbage",)),
    CpuVariant("bnb_int8_mm_float_fallback", "avx512f", False, "bitsandbytes.*",
               "matmul/int8_vectorwise_matmul/*/accumulator_wrap/*", ("accumulator_overflow", "other"),
               "below torch's AVX512 CPU capability bitsandbytes' int8_linear_matmul is matmul(A.float(), B.float()) "
               "converted to int32: exact up to 2^24, rounded beyond, -2^31 past int32 instead of wrapping",
               ("AMD EPYC (Zen 4) with ATEN_CPU_CAPABILITY=avx2 (tests/test_matmul_bnb.py)",)),
    CpuVariant("bnb_gemv_4bit_bf16_kernel", "avx512_bf16", True, "bitsandbytes.gemv_4bit.cpu_packed",
               "matmul/weight_only_matmul/*/random/*", ("other",),
               "with AVX512-BF16 bitsandbytes' CPU-packed gemv_4bit kernel rounds x and the absmax to bfloat16 and "
               "returns bfloat16 (outside the float32 bound); without it the weights are dequantized and F.linear "
               "runs in float32",
               ("AMD EPYC (Zen 4, AVX512-BF16) native: outside the bound",)),
    CpuVariant("torch_histogram_grid_without_fma", "fma", False, "torch.observer.HistogramObserver",
               "uniform/calibrate/histogram/*", ("other",),
               "HistogramObserver's search grid is torch.linspace, whose CPU kernel is picked by cpuid (ATen CPU "
               "capability): with AVX2 / AVX-512 (FMA) each point is one rounding fl32(fma(k, step, a)), below "
               "(ATEN_CPU_CAPABILITY=default) two, fl32(a + fl32(k step)): rule pytorch_histogram_observer_no_fma "
               "(uniform.md §5.5); a histogram can move by a bin, the scale and zero point moved in none of 180 "
               "sampled runs",
               ("AMD EPYC (Zen 4, FMA) native and ATEN_CPU_CAPABILITY=avx2: the FMA rule, 0 mismatches",
                "the same CPU with ATEN_CPU_CAPABILITY=default: the no-FMA rule in 60 of 60 runs")),
    CpuVariant("openvino_fake_quantize_sse41", "avx2", False, "openvino.fake_quantize.parameter", "uniform/*/fq_*",
               ("fma", "other", "crash"),
               "the CPU plugin's Snippets kernel fuses FakeQuantize's output step into an FMA on AVX2 / AVX-512; "
               "below AVX2 (ONEDNN_MAX_CPU_ISA=SSE41) it is a multiply then an add (FakeQuantizeRule output_step "
               "'multiply_add', uniform.md §2.8), ranges along an axis go to the plugin's own FakeQuantize node "
               "(not modelled), and ranges along axis >= 2 do not compile",
               ("AMD EPYC (Zen 4) native and ONEDNN_MAX_CPU_ISA=AVX2: the FMA form, 0 mismatches on 1.1 M values",
                "the same CPU with ONEDNN_MAX_CPU_ISA=SSE41: multiply-add per tensor, 0 mismatches; 2,650 values of "
                "40 per-axis configurations differ; 25 axis >= 2 graphs fail to compile "
                "(scripts/verify_openvino_fq.py --isa SSE41)")),
    CpuVariant("openvino_f8e5m2_nan_payload", "avx512f", True, "openvino.convert.parameter",
               "elements/float8_e5m2/*", ("nan_sign_or_code",),
               "the CPU plugin's f32 / bf16 -> f8e5m2 Convert keeps the top NaN payload bits and sets the quiet bit "
               "with AVX-512 kernels (nan_payload='keep_quiet'), and its f8e5m2 -> f32 / bf16 quiets them too; "
               "at most AVX2 (the pin) it truncates them (a payload in the dropped bits gives Inf: the openvino "
               "profile's nan_payload='truncate') and shifts them unquieted into f32 / bf16 (keep_raw), as the "
               "folded constant does (elements.md §2.7)",
               ("AMD EPYC (Zen 4) native: keep_quiet for every NaN of f32 / f64 / f16 / bf16 -> f8e5m2",
                "the same CPU with ONEDNN_MAX_CPU_ISA=AVX2: the openvino profile, 0 mismatches "
                "(tests/test_nan_payload.py)")),
    CpuVariant("llvm_f32_to_bf16_libcall", "avx512_bf16", False, "mlir.quant", "uniform/*/ebf16_*",
               ("crash",),
               "lower-quant-ops on a bfloat16 expressed type rounds float32 -> bfloat16 with fptrunc, which LLVM "
               "lowers to the compiler-rt call __truncsfbf2 where the CPU has no AVX512-BF16; the ExecutionEngine "
               "does not link it and the run fails (a crash: the quant dialect accepts the type); with AVX512-BF16 "
               "it is one instruction (vcvtneps2bf16) and these cases run and conform",
               (f"the {BASELINE} pin (crash)", "AMD EPYC (Zen 4, with AVX512-BF16) native: conforming")),
)


def has_feature(features: frozenset[str], feature: str) -> bool:
    """``feature`` ("a" or "a|b": either) is among ``features``."""
    return any(f in features for f in feature.split("|"))


def cpu_variants(target: str | None = None) -> tuple[CpuVariant, ...]:
    """The CPU variants (of one target, when given)."""
    return tuple(v for v in CPU_VARIANTS if target is None or v.of_target(target))


def effective_features(backend: str, cpu: CpuInfo, mode: str) -> frozenset[str]:
    """The ISA features ``backend``'s code may use on ``cpu`` in ``mode`` ("native" or "baseline")."""
    check_choice("CPU mode", mode, CPU_MODES)
    pin = PINS.get(backend)
    if mode == "baseline" and pin is not None:
        return pin.features(cpu)
    return cpu.features


__all__ = ["BASELINE", "BASELINE_FEATURES", "CPU_MODES", "CPU_VARIANTS", "FEATURES", "FIXED_TARGET", "MASK_ENV",
           "PINS", "VERIFIED_ON", "CpuInfo", "CpuPin", "CpuVariant", "cpu_variants", "effective_features",
           "has_feature", "host_cpu", "parse_cpuinfo"]
