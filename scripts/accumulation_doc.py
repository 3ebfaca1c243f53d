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
    (ROOT / "docs" / "accumulation.md").write_text("".join(out))


if __name__ == "__main__":
    main()
