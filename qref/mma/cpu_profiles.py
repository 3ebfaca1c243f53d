"""Fitted accumulation records of real CPU GEMMs, one profile per library version and CPU kernel (mma.md §12).

Each profile was fitted by ``qref probe-matmul`` (mma.md §11) on the CPU kernel it names and is held bit for bit
by tests/test_cpu_gemm_profiles.py where that kernel is detected; on any other kernel the test checks only the
bound of mma.md §10.4 and says so. A profile is a CPU variant: ``selected_by`` names how the library picks the
kernel (a detected core / ISA), never the machine it was fitted on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .accumulate import KernelAccumulation
from .dispatch import GemmDispatch


@dataclass(frozen=True)
class CpuGemmProfile:
    """One library's GEMM on one CPU kernel (mma.md §12.1).

    name: the profile's key. library / version: the package and version it was fitted on. call: the API.
    kernel: the kernel the library selects. selected_by: how a test detects that kernel. a_format, b_format,
    d_format: operand and output formats. threads: the thread counts the fit was checked at (the result does not
    depend on them). dispatch: the records by kernel path. evidence: what the fit was checked on.
    """

    name: str
    library: str
    version: str
    call: str
    kernel: str
    selected_by: str
    a_format: str
    b_format: str
    d_format: str
    threads: tuple[int, ...]
    dispatch: GemmDispatch
    evidence: tuple[str, ...] = ()


#: every profile below multiplies float32 operands into a float32 result
_FLOAT32 = dict(a_format="float32", b_format="float32", d_format="float32")
_NUMPY_SMALL = dict(small=KernelAccumulation(), small_max_mnk=10**6,
                    small_tail=KernelAccumulation(lanes=16, reduction="pairwise", zero_padding=True), tail_width=16,
                    tail_min_k=32, tail_max=8,
                    small_edge=KernelAccumulation(lanes=16, reduction="halving", zero_padding=True), edge_rows=4,
                    edge_columns=4, single_product="rounded_plus_zero")


def _numpy(threads: int, blocked: KernelAccumulation, how: str) -> CpuGemmProfile:
    return CpuGemmProfile(
        name=f"numpy-2.4.6-openblas-0.3.31-skylakex-sgemm-{'1-thread' if threads == 1 else 'threaded'}",
        library="numpy (scipy-openblas64 0.3.31.188.0)",
        version="numpy 2.4.6",
        call="numpy.matmul(A, B), float32 (M, K) x (K, N), M, N >= 2",
        kernel=f"OpenBLAS sgemm, DYNAMIC_ARCH core SkylakeX (AVX-512 FMA), {how}",
        selected_by="scipy_openblas_get_corename64_() == 'SkylakeX' (OpenBLAS picks it for AVX-512 F/BW/DQ/VL "
                    "CPUs); OPENBLAS_NUM_THREADS " + ("= 1" if threads == 1 else ">= 2"),
        **_FLOAT32,  # type: ignore[arg-type]
        threads=(threads,),
        dispatch=GemmDispatch(blocked=blocked, **_NUMPY_SMALL),  # type: ignore[arg-type]
        evidence=(
            "qref probe-matmul --callable matmul_targets:numpy_f32 (docs/accumulation.md)",
            "tests/test_cpu_gemm_profiles.py: >= 10^6 outputs of random and adversarial operands",
            "tests/test_fuzz_matmul_V.py: the small kernel's edges (N mod 16 in 9..15: no tail; the last M mod 4 "
            "rows of the last (N mod 16) mod 4 columns: halving) vs numpy, 1.6 M outputs of M 2..22, N 2..57",
            "not modelled: M == 1 or N == 1 (gemv)",
        ),
    )


#: numpy 2.4.6 float32 matmul -> scipy-openblas 0.3.31.188.0 (DYNAMIC_ARCH) sgemm, core SkylakeX: a blocked
#: kernel (sequential FMA per output, K blocks of GEMM_Q = 448; a remainder r in (448, 896) is cut in two: on one
#: thread floor(r / 2) rounded up to 16, threaded ceil(r / 2)); a small-matrix kernel for M N K <= 10^6 without K
#: blocking whose last t = N mod 16 output columns, when 1 <= t <= 8 and K >= 32, use 16 FMA lanes (k mod 16)
#: reduced by adjacent pairs, except the last M mod 4 rows of the last t mod 4 columns: reduced by halving; the
#: tail's last group of 16 terms is padded with +0 products (a -0 sum becomes +0). K = 1: +0 + fl32(a b).
NUMPY_OPENBLAS_SKYLAKEX_1T = _numpy(1, KernelAccumulation(block=448, block_split="halve_remainder",
                                                          block_half="floor", block_unroll=16),
                                    "single-threaded driver")
NUMPY_OPENBLAS_SKYLAKEX_MT = _numpy(2, KernelAccumulation(block=448, block_split="halve_remainder"),
                                    "threaded driver (2 threads)")

#: torch 2.13.0+cpu float32 matmul -> oneMKL 2024.2 sgemm with CPU capability AVX512: sequential FMA per output,
#: K blocks of 192 (a whole K in (192, 384) halved, ceil first); the same at 1 and 2 threads; M or N < 16 takes
#: another kernel (rounded products at 8 x 8: not modelled). K = 1 stores fl32(a b) (a -0 product stays -0).
TORCH_MKL_AVX512 = CpuGemmProfile(
    name="torch-2.13.0-mkl-2024.2-avx512-sgemm",
    library="torch (oneMKL 2024.2)",
    version="torch 2.13.0+cpu",
    call="torch.matmul(A, B), float32 (M, K) x (K, N), M, N >= 16",
    kernel="oneMKL 2024.2 sgemm, CPU capability AVX512",
    selected_by="torch.backends.cpu.get_cpu_capability() == 'AVX512' and torch.__config__.show() naming oneMKL 2024.2, "
                "on an AMD CPU (vendor_id AuthenticAMD: fitted on EPYC Zen 4; MKL blocks K by the CPU it detects, "
                "see TORCH_MKL_AVX512_SPR)",
    **_FLOAT32,  # type: ignore[arg-type]
    threads=(1, 2),
    dispatch=GemmDispatch(blocked=KernelAccumulation(block=192, block_split="halve_short"), min_rows_cols=16,
                          single_product="rounded", unfitted_odd_k=(192, 384)),
    evidence=(
        "qref probe-matmul --callable matmul_targets:torch_f32 (docs/accumulation.md)",
        "tests/test_cpu_gemm_profiles.py: >= 10^6 outputs of random and adversarial operands, 1 and 2 threads",
        "tests/test_fuzz_matmul_V.py: K = 1 stores fl32(a b) (-0 kept); fuzzed K = 1 .. 4097 with Inf, NaN, -0, "
        "overflow: 0 mismatches outside the odd K in (192, 384) below",
        "not modelled: M or N < 16 (8 x 8 x 300 fits sequential rounded products, mul + add, no FMA); an odd K in "
        "(192, 384) (K = 301, 377, 383: about half of the outputs differ from every halving tried; K = 193, 195, "
        "201, 301, 383 fit no cut into two sequential FMA chains either): refused",
    ),
)

#: the same call on an Intel Xeon with AVX512-FP16 and AMX (Sapphire Rapids class), one thread: sequential FMA per
#: output, K blocks of 384 (a remainder in (384, 768) halved, ceil first), the first block's sum stored as it is
#: (a -0 sum stays -0, also at K = 2); two threads split K otherwise (no record fits: the bound only).
TORCH_MKL_AVX512_SPR = CpuGemmProfile(
    name="torch-2.13.0-mkl-2024.2-avx512-sgemm-spr-1-thread",
    library="torch (oneMKL 2024.2)",
    version="torch 2.13.0+cpu",
    call="torch.matmul(A, B), float32 (M, K) x (K, N), M, N >= 16, torch.set_num_threads(1)",
    kernel="oneMKL 2024.2 sgemm, CPU capability AVX512, on an Intel Xeon with AVX512-FP16 and AMX",
    selected_by="torch.backends.cpu.get_cpu_capability() == 'AVX512', oneMKL 2024.2, vendor_id GenuineIntel with "
                "avx512_fp16 and amx_tile in /proc/cpuinfo, one intra-op thread",
    **_FLOAT32,  # type: ignore[arg-type]
    threads=(1,),
    dispatch=GemmDispatch(blocked=KernelAccumulation(block=384, block_split="halve_remainder"), min_rows_cols=16,
                          single_product="rounded", store="first_block"),
    evidence=(
        "qref probe-matmul on torch.matmul with torch.set_num_threads(1) (Intel Xeon, 2 cores, 2026-12-07): "
        "the record, 2 equivalent",
        "tests/test_cpu_gemm_profiles.py: 3.1 x 10^6 outputs of random and adversarial operands (K = 24, 300, "
        "1000, 1001, 2001, ...), K = 1..79 and every block edge to 4097 with -0 operands, the zero-sign cases of "
        "tests/test_fuzz_matmul_V.py: 0 mismatches; 2 threads: 23,337 of 1,035,664 differ (another K split, "
        "not fitted)",
    ),
)

#: onnxruntime 1.32 MatMul (float32, CPUExecutionProvider) -> MLAS sgemm, intra_op_num_threads = 1: sequential
#: FMA per output, K blocks of 128 added into C in order; when N < K the K stride doubles each time the N stride
#: (128) halves while it stays >= N and > 16: N <= 64 -> 256, N <= 32 -> 512, N <= 16 -> 1024. The first K block's
#: sum is stored into D as it is (a -0 stays -0), the later ones added.
ORT_MLAS_1T = CpuGemmProfile(
    name="onnxruntime-1.32-mlas-sgemm-1-thread",
    library="onnxruntime (MLAS)",
    version="onnxruntime 1.32",
    call="MatMul (opset 17), float32 (M, K) x (K, N), CPUExecutionProvider, intra_op_num_threads = 1",
    kernel="MLAS sgemm (x86-64 AVX-512 FMA kernel)",
    selected_by="onnxruntime.__version__ == 1.32.x with the CPU execution provider on an x86-64 CPU with AVX-512F",
    **_FLOAT32,  # type: ignore[arg-type]
    threads=(1,),
    dispatch=GemmDispatch(blocked=KernelAccumulation(block=128),
                          column_blocks=((16, 1024), (32, 512), (64, 256)), store="first_block"),
    evidence=(
        "scripts/accumulation_shapes.py ort_f32 and qref probe-matmul (docs/accumulation.md)",
        "tests/test_cpu_gemm_profiles.py: >= 10^6 outputs of random and adversarial operands, 1 thread",
        "tests/test_fuzz_matmul_V.py: -0 results (the first K block stored as it is); 780,080 fuzzed outputs of "
        "K = 1 .. 4097, M, N = 2 .. 64, random bit patterns, Inf, NaN, -0, overflow, 0 mismatches",
        "not fitted: 2 threads, where MLAS partitions N over the threads when M is small and each part takes the "
        "K stride of its own N (64 x 100 x 1000 fits blocks of 256, 64 x 65 x 300 fits neither 256 nor 512)",
    ),
)

#: mlx 0.32.4 CPU float32 matmul: per output a sequential sum of rounded products (multiply, then add: no FMA),
#: no K blocks, at every shape measured (16 x 16 x 64 to 256 x 256 x 512).
MLX_CPU = CpuGemmProfile(
    name="mlx-0.32.4-cpu-sgemm",
    library="mlx",
    version="mlx 0.32.4",
    call="mlx.core.matmul(A, B) on mx.cpu, float32 (M, K) x (K, N)",
    kernel="MLX CPU matmul (Linux x86-64 build)",
    selected_by="mlx.core.__version__ == 0.32.4 on x86-64 Linux with the CPU device",
    **_FLOAT32,  # type: ignore[arg-type]
    threads=(1,),
    dispatch=GemmDispatch(blocked=KernelAccumulation(products="rounded")),
    evidence=(
        "scripts/accumulation_shapes.py mlx_f32 and qref probe-matmul (docs/accumulation.md)",
        "tests/test_cpu_gemm_profiles.py: >= 10^6 outputs of random and adversarial operands",
    ),
)

#: onnxruntime 1.32 MatMulNBits (bits 4, accuracy_level 0 or 1: float32 compute), CPUExecutionProvider: after the
#: 4-bit weights are dequantized (W = (q - z) s), D = A @ W is one sequential FMA chain per output with no K blocks
#: (unlike MatMul's sgemm), at 1 and 2 threads; M = 1 takes another kernel (not modelled).
ORT_MLAS_NBITS_F32 = replace(
    ORT_MLAS_1T,
    name="onnxruntime-1.32-mlas-nbits-f32",
    call="com.microsoft MatMulNBits (bits 4, accuracy_level 0 or 1), float32 A (M, K), M >= 2: the float stage "
         "A @ W of the dequantized weight W (K, N)",
    kernel="MLAS 4-bit GEMM, float32 compute (x86-64 AVX-512 FMA kernel)",
    threads=(1, 2),
    dispatch=GemmDispatch(blocked=KernelAccumulation()),
    evidence=(
        "scripts/accumulation_nbits.py (docs/accumulation/nbits_f32.txt): order rows and shape tables",
        "tests/test_cpu_gemm_nbits.py: >= 10^6 outputs of random and adversarial operands, 1 and 2 threads, "
        "accuracy_level 0 and 1, blocks 16 to 128",
        "not modelled: M = 1 (a matrix-vector kernel: 1 x 64 x 256 matches none of fma x1, mul+add, blocks of 128 "
        "or the quantization block, 4 / 8 / 16 lanes)",
    ),
)

#: mlx 0.32.4 CPU quantized_matmul (affine, 4-bit weights): after dequantizing W = s q + b, D = x @ W is a sequential
#: sum of rounded products (mul, then add: no FMA), no K blocks, M = 1 included: the record of MLX's float matmul.
MLX_CPU_QMM = replace(
    MLX_CPU,
    name="mlx-0.32.4-cpu-quantized-matmul-f32",
    call="mlx.core.quantized_matmul(x, w, scales, biases, transpose=True, group_size, bits=4) on mx.cpu, float32 x: "
         "the float stage x @ W of the dequantized weight W (K, N)",
    kernel="MLX CPU quantized matmul (Linux x86-64 build)",
    dispatch=GemmDispatch(blocked=KernelAccumulation(products="rounded"), vectors=True, min_rows_cols=1),
    evidence=(
        "scripts/accumulation_mlx_qmm.py (docs/accumulation/mlx_qmm_f32.txt): shape tables, groups 32 and 64",
        "tests/test_cpu_gemm_mlx_qmm.py: >= 10^6 outputs of random and adversarial operands",
    ),
)

PROFILES: tuple[CpuGemmProfile, ...] = (NUMPY_OPENBLAS_SKYLAKEX_1T, NUMPY_OPENBLAS_SKYLAKEX_MT, TORCH_MKL_AVX512,
                                        TORCH_MKL_AVX512_SPR,
                                        ORT_MLAS_1T, MLX_CPU, ORT_MLAS_NBITS_F32, MLX_CPU_QMM)


__all__ = ["MLX_CPU", "MLX_CPU_QMM", "NUMPY_OPENBLAS_SKYLAKEX_1T", "NUMPY_OPENBLAS_SKYLAKEX_MT", "ORT_MLAS_1T",
           "ORT_MLAS_NBITS_F32", "PROFILES", "TORCH_MKL_AVX512", "TORCH_MKL_AVX512_SPR",
           "CpuGemmProfile"]
