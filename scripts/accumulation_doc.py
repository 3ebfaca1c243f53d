"""Write docs/accumulation.md from the captured probe outputs in docs/accumulation/*.txt.

The captures come from scripts/capture_accumulation.sh (``qref probe-matmul`` on each real CPU target, 1 and 2
threads); this script only arranges them under the per-library summaries below and never edits them.
Usage: python scripts/accumulation_doc.py
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAP = ROOT / "docs" / "accumulation"

HEAD = """# What CPU GEMMs do, to the bit (probe evidence)

Machine of the captures: AMD EPYC (Zen 4): AVX-512 F/BW/DQ/VL, AVX512-VNNI, AVX512-BF16; no AVX512-FP16, no AMX.
Libraries: numpy 2.4.6 (scipy-openblas 0.3.31.188.0, DYNAMIC_ARCH, core SkylakeX), torch 2.13.0+cpu (oneMKL
2024.2, oneDNN 3.12, CPU capability AVX512), jax 0.10.2 (XLA:CPU), onnxruntime 1.32 (MLAS), mlx 0.32.4.

Each section: what the library's GEMM does (the fitted `qref.mma.KernelAccumulation` records of
docs/spec/mma.md §10, composed by kernel path as in §12), then the output of `qref probe-matmul` (§11) captured by
`scripts/capture_accumulation.sh` at 1 and 2 threads. A profile is a CPU variant: `qref/mma/cpu_profiles.py`
names the kernel that selects it, and tests/test_cpu_gemm_profiles.py holds it bit for bit only where that kernel
is detected. How to read the evidence: "order" rows put +big at k = 0 and -big at k = j with small products
elsewhere; the number of small products that survive tells which terms met big before -big (a sequential sum
loses the ones between 0 and j; lanes keep the ones in other lanes until the reduction). "blocks" rows do the
same with K = 2048: a run of constant counts is a K block whose partial sum is added after the cancellation.
"""

SECTIONS = [
    ("numpy: `A @ B`, float32 (OpenBLAS sgemm, core SkylakeX)", "numpy_f32", """\
Fitted (profiles `numpy-2.4.6-openblas-0.3.31-skylakex-sgemm-1-thread` and `-threaded`). Per output one sequential
FMA chain in float32 (no lanes along K: AVX-512 vectorizes over outputs), K in blocks of GEMM_Q = 448 added into
C in order. The thread count changes the split of a remainder r in (448, 896): one thread cuts it at floor(r / 2)
rounded up to 16, the threaded driver at ceil(r / 2) (K = 1000: 448 + 288 + 264 vs 448 + 276 + 276). Below
M N K = 10^6 a small-matrix kernel runs without K blocks; there, when N mod 16 != 0 and K >= 32, the last N mod 16
columns use 16 FMA lanes (k mod 16) reduced by adjacent pairs. Matrix-vector calls (gemv) and a few last rows of
the small kernel's tail columns are not modelled. Subnormals kept, NaN / Inf by IEEE."""),
    ("PyTorch: `torch.matmul`, float32 (oneMKL sgemm, AVX512)", "torch_f32", """\
Fitted for M, N >= 16 (profile `torch-2.13.0-mkl-2024.2-avx512-sgemm`): sequential FMA per output, K blocks of 192
added in order; a whole K in (192, 384) is halved (K = 300: 150 + 150). 1 and 2 threads give the same bits. Not
modelled: M or N < 16 (another kernel: at 8 x 8 it sums rounded products, no FMA) and odd K in (192, 384)."""),
    ("JAX: `lax.dot_general`, float32 (XLA:CPU)", "jax_f32", """\
Not fitted: the order depends on the shape (see the shape table): 64 x 64 x K <= 300 and 256 x 256 x 512 are one
sequential FMA chain per output, 16 x 16 x 64 and 200 x 300 x 64 are 4 FMA lanes (k mod 4) reduced by adjacent
pairs, 64 x 64 x 1000 matches none of the records tried. Subnormal operands are flushed (XLA:CPU's FTZ / DAZ:
the probe's subnormal rows give 0)."""),
    ("ONNX Runtime: `MatMul`, float32 (MLAS)", "ort_f32", """\
Fitted at one thread (profile `onnxruntime-1.32-mlas-sgemm-1-thread`): sequential FMA per output, K blocks of 128
added into C; when N < K the K stride doubles each time the N stride (128) halves while it stays >= N and > 16:
N <= 64 -> 256, N <= 32 -> 512, N <= 16 -> 1024 (the probe's K = 2048 operands have N = 16: blocks of 1024). At
2 threads MLAS splits N over the threads when M is small and each part takes its own K stride (64 x 100 x 1000
fits blocks of 256): not fitted."""),
    ("MLX: `mx.matmul`, float32 (CPU)", "mlx_f32", """\
Fitted (profile `mlx-0.32.4-cpu-sgemm`): per output a sequential sum of rounded products - multiply, round,
add, round: no FMA - and no K blocks, at every shape of the shape table."""),
    ("PyTorch: `torch.matmul`, bfloat16", "torch_bf16", """\
Not fitted (no record of the grid fits; see the evidence): about 8 significand bits survive in the bfloat16
output, the FMA rows give the fused value, and subnormal bfloat16 operands give 0 (flushed)."""),
    ("JAX: bfloat16 operands, float32 result", "jax_bf16_f32", """\
Not fitted (as float32, the order depends on the shape); 24 significand bits kept, subnormal operands flushed."""),
    ("JAX: float16 operands, float32 result", "jax_f16_f32", "See the evidence."),
    ("JAX: float8_e4m3fn operands, float32 result", "jax_e4m3_f32", """\
The probe reports a fit (sequential FMA in float32), but weakly determined: E4M3's range (2^-6 .. 2^8) cannot
make one product absorb another in float32, so the order and block rows carry no information (every small
product survives) and many records are equivalent on these operands. Not a profile."""),
    ("PyTorch: `torch._scaled_mm`, float8_e4m3fn, float32 result", "torch_scaled_mm_e4m3", """\
The probe fits the float32 matmul's record (sequential FMA, K blocks of 192, a short K halved) on the probes and
the validation set: consistent with the E4M3 operands widened to float32 and oneMKL's sgemm (scales 1). Weakly
determined for the same reason as JAX's E4M3; not a profile."""),
]


#: sections after the probe captures: the quantized products' float stages, JAX, thread counts, the harness; the
#: evidence files are read in (order rows of the MatMulNBits capture shortened)
TAIL = """
## ONNX Runtime: `MatMulNBits`' float stage (4-bit weights, float32 compute)

Fitted (profile `onnxruntime-1.32-mlas-nbits-f32`): with accuracy_level 0 or 1 (float32 compute) MLAS
dequantizes the 4-bit weights (W = (q - z) s) and computes A @ W as one sequential FMA chain per output **without
K blocks** - unlike MatMul's sgemm (blocks of 128, widened when N < K): at 64 x 64 x 1024 the MatMul profile
differs on 3859 of 4096 outputs and `fma x1` on none. The quantization block does not cut the sum (`fma x1 blocks
= quant block` differs). 1 and 2 threads give the same bits. M = 1 takes a matrix-vector kernel that no record of
the table fits (not modelled; the profile refuses M = 1). The probe's method with weights ORT can hold: powers of
two as scales (W exact in float32), and for the order rows A = +big at k = 0, -big at k = j with W all ones (q = 9,
s = 1): the count of surviving small products falls by one per j, a single sequential chain over K = 256 for every
block size. Held by tests/test_cpu_gemm_nbits.py on 2 x 10^6 outputs (levels 0 and 1, 1 and 2 threads, blocks 16
to 128, spread and cancelling operands). accuracy_level 4 (int8 compute) is not a float path: matmul.md §10.2.

Evidence (`docs/accumulation/nbits_f32-1t.txt`, scripts/accumulation_nbits.py; `-2t` at 2 threads is identical):

```
{nbits}
```

## MLX: `quantized_matmul`'s float stage (affine 4-bit weights, CPU)

Fitted (profile `mlx-0.32.4-cpu-quantized-matmul-f32`): the record of MLX's float matmul (sequential rounded
products: multiply, round, add, round; no FMA, no K blocks), M = 1 included - MLX dequantizes W = s q + b and
does not use the affine shortcut s (x . q) + b sum(x) (which would differ from every record of the table). Held by
tests/test_cpu_gemm_mlx_qmm.py on >= 10^6 outputs (groups 32 to 128, spread and cancelling operands).

Evidence (`docs/accumulation/mlx_qmm_f32.txt`, scripts/accumulation_mlx_qmm.py):

```
{qmm}
```

## JAX `dot_general` (XLA:CPU): documented as not fitting

No record fits XLA:CPU's float32 dot, for two reasons the evidence above shows: (1) the order depends on the shape
(shape table of the float32 section: one sequential FMA chain at 64 x 64 x K <= 300 and 256 x 256 x 512, 4 FMA lanes
reduced by adjacent pairs at 16 x 16 x 64 and 200 x 300 x 64, none of the records at 64 x 64 x 1000): XLA's dot
emitter / Eigen contraction picks its tiling from M, N and K, so one `GemmDispatch` would need a path per tiling
rule that was not identified; (2) with bfloat16 / float16 operands the order rows are not monotone (pairs of
swapped counts: 62 60 61 58 59 ..., and for float16 a period of 4: 32 0 0 62 ...), i.e. operand pairs are
converted and combined before the float32 chain, and subnormal operands are flushed. JAX gets no CPU GEMM profile;
a harness target for it names no profile, so the §10.4 bound is its reference (pass / fail, never drift:
tests/test_harness_float_matmul.py runs `jax.lax.dot_general` on the suite's 7 float_matmul cases: 7 pass).

## Thread counts

What changes between one thread and two (`docs/accumulation/threads.txt`, scripts/accumulation_threads.py: outputs
differing from each profile's record on the suite's float_matmul cases and the blocked shapes of the fits; the
probes' 1 / 2-thread captures above agree):

- numpy (OpenBLAS SkylakeX): the split of a K remainder r in (448, 896): one thread cuts at floor(r / 2) rounded up
  to 16, the threaded driver at ceil(r / 2); every shape with such a remainder (K = 1000, 1001) changes bits.
  Hence two profiles (`-1-thread`, `-threaded`); shapes without a remainder are the same.
- PyTorch (oneMKL sgemm, AVX512): nothing changes (`torch.set_num_threads(1)` and `(2)`: 0 outputs differ).
- ONNX Runtime MatMul (MLAS sgemm): at 2 threads MLAS partitions N between the threads when M is small and each
  part takes the K stride of its own N (64 x 100 x 1000: 5710 outputs differ from the one-thread record, 64 x 65 x
  300: 3508); the profile is fitted at intra_op_num_threads = 1 and the harness target runs at 1.
- ONNX Runtime MatMulNBits (float stage): nothing changes (2 x 10^6 outputs at 1 and 2 threads).
- MLX (CPU): no thread setting for the CPU matmul; the records hold at the default.
- JAX: the probe's 1 / 2-thread captures are identical; not fitted either way.

```
{threads}
```

## Harness: float matmul targets, held to their records (mma.md §12.2)

The matrix family's operation `float_matmul` (7 cases in conformance/v1: random at 16 x 16 x 64, 48 x 17 x 64,
64 x 64 x 300, 64 x 40 x 1000; cancelling; a 2^-48 .. 2^48 spread; Inf / NaN / -0 / overflow) compares a target
with its fitted profile bit for bit and with the exact sum's §10.4 bound. `onnxruntime.matmul_float` (profile
`onnxruntime-1.32-mlas-sgemm-1-thread`, intra_op_num_threads = 1) and `mlx.matmul_float` (`mlx-0.32.4-cpu-sgemm`):
7 pass each, 0 mismatches. A result within the bound but not the record's bits is *drift*, naming the record, the
version it was fitted on and the installed one: with the record perturbed (4 lanes, rounded products, 8 lanes,
FMA) the same library outputs are drift, not failures; float16 operands widened back leave the bound and fail
(tests/test_harness_float_matmul.py). The ONNX Runtime record is a CPU variant: `mlas_sgemm_without_avx512`
(qref/profiles/cpu.py): MLAS selects its AVX-512F sgemm kernel by cpuid; without AVX-512F its AVX2 kernel's
order is not fitted and shows as drift.

"""


def _short(text: str) -> str:
    return "\n".join(ln[:120] + " ... 2 1 0" if ln.startswith("  ") and len(ln) > 200 else ln
                     for ln in text.splitlines())


def main() -> None:
    out = [HEAD]
    for title, key, text in SECTIONS:
        out.append(f"\n## {title}\n\n{text}\n")
        shapes = CAP / f"shapes-{key}.txt"
        if shapes.exists():
            out.append(f"\nShape table (`docs/accumulation/{shapes.name}`, scripts/accumulation_shapes.py):\n\n```\n"
                       f"{shapes.read_text().rstrip()}\n```\n")
        for th in (1, 2):
            f = CAP / f"{key}-{th}t.txt"
            body = f.read_text().rstrip() if f.exists() else "(not captured)"
            out.append(f"\n{th} thread{'s' if th > 1 else ''} (`docs/accumulation/{f.name}`):\n\n```\n{body}\n```\n")
    out.append(TAIL.format(nbits=_short((CAP / "nbits_f32-1t.txt").read_text()),
                           qmm=(CAP / "mlx_qmm_f32.txt").read_text().rstrip(),
                           threads=(CAP / "threads.txt").read_text().rstrip()))
    (ROOT / "docs" / "accumulation.md").write_text("".join(out))


if __name__ == "__main__":
    main()
