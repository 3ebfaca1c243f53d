#!/bin/sh
# Captures `qref probe-matmul` on the real CPU targets into docs/accumulation/*.txt (docs/accumulation.md).
# Usage: scripts/capture_accumulation.sh [TARGET...]   (run from the repository root)
set -u
PY=${PYTHON:-python}
out=docs/accumulation
mkdir -p "$out"
targets=${*:-"numpy_f32 torch_f32 jax_f32 ort_f32 mlx_f32 torch_bf16:bfloat16:bfloat16 jax_bf16_f32:bfloat16:float32 jax_f16_f32:float16:float32 jax_e4m3_f32:float8_e4m3fn:float32 torch_scaled_mm_e4m3:float8_e4m3fn:float32"}
for t in $targets; do
  name=${t%%:*}; rest=${t#"$name"}; fa=float32; fd=float32
  if [ -n "$rest" ]; then fa=$(echo "$rest" | cut -d: -f2); fd=$(echo "$rest" | cut -d: -f3); fi
  for th in 1 2; do
    f="$out/$name-${th}t.txt"
    { echo "\$ OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th QREF_TORCH_THREADS=$th QREF_ORT_THREADS=$th qref probe-matmul --callable matmul_targets:$name --a-format $fa --d-format $fd"
      OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th QREF_TORCH_THREADS=$th QREF_ORT_THREADS=$th \
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=$([ $th = 1 ] && echo false || echo true) intra_op_parallelism_threads=$th" \
        PYTHONPATH="$PWD:$PWD/scripts" timeout 900 "$PY" -W ignore -m qref probe-matmul --callable "matmul_targets:$name" \
        --a-format "$fa" --d-format "$fd" 2>&1 | grep -v "^  warnings.warn\|Warning"
      } > "$f"
  done
done
