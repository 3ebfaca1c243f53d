"""What the thread count changes: each fitted CPU GEMM profile against its library at 1 and 2 threads on the
suite's float_matmul cases and on the blocked shapes of the fits (docs/accumulation.md, "Thread counts").

Usage: PYTHONPATH=.:scripts python scripts/accumulation_threads.py > docs/accumulation/threads.txt
Prints, per library, thread count and shape, how many outputs differ from the profile's record (bits). numpy runs in
a subprocess per thread count (OPENBLAS_NUM_THREADS is read at import); torch.set_num_threads and ORT's
intra_op_num_threads are set in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

from qref.conformance.cases.matmul import build_float_matmul_cases
from qref.mma.cpu_profiles import (
    MLX_CPU,
    NUMPY_OPENBLAS_SKYLAKEX_1T,
    NUMPY_OPENBLAS_SKYLAKEX_MT,
    ORT_MLAS_1T,
    TORCH_MKL_AVX512,
)


def operands() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = [(c.id.split("/")[-2], c.inputs["a"], c.inputs["b"]) for c in build_float_matmul_cases()]
    for M, N, K in ((64, 100, 1000), (64, 65, 300), (160, 128, 1000), (96, 80, 1001), (256, 256, 512)):
        out.append((f"{M}x{N}x{K}", rng.standard_normal((M, K)).astype(np.float32),
                    rng.standard_normal((K, N)).astype(np.float32)))
    return out


def differ(prof, A, B, D) -> str:
    try:
        with np.errstate(all="ignore"):
            want = prof.dispatch.matmul(A, B)
    except Exception:
        return "-"
    w, d = want.view(np.uint32).copy(), np.asarray(D, np.float32).view(np.uint32).copy()
    w[np.isnan(want)] = d[np.isnan(D)] = 0x7FC00000
    return str(int((w != d).sum()))


def numpy_outputs(ops, threads: int) -> list[np.ndarray]:
    with tempfile.TemporaryDirectory() as t:
        np.savez(f"{t}/in.npz", *[x for _, a, b in ops for x in (a, b)])
        code = ("import sys, numpy as np; d = np.load(sys.argv[1]); n = len(d.files) // 2; "
                "np.savez(sys.argv[2], *[d[f'arr_{2 * i}'] @ d[f'arr_{2 * i + 1}'] for i in range(n)])")
        subprocess.run([sys.executable, "-c", code, f"{t}/in.npz", f"{t}/out.npz"], check=True,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS=str(threads)))
        d = np.load(f"{t}/out.npz")
        return [d[f"arr_{i}"] for i in range(len(ops))]


def main() -> None:
    import mlx.core as mx
    import onnxruntime as ort
    import torch
    from onnx import TensorProto, helper

    ops = operands()
    rows = {}
    for th in (1, 2):
        for prof in (NUMPY_OPENBLAS_SKYLAKEX_1T, NUMPY_OPENBLAS_SKYLAKEX_MT):
            rows[(prof.name, th)] = [differ(prof, a, b, d) for (_, a, b), d in zip(ops, numpy_outputs(ops, th))]
        torch.set_num_threads(th)
        rows[(TORCH_MKL_AVX512.name, th)] = [differ(TORCH_MKL_AVX512, a, b, torch.matmul(torch.from_numpy(a),
                                                                                        torch.from_numpy(b)).numpy())
                                             for _, a, b in ops]
        o = ort.SessionOptions()
        o.intra_op_num_threads = th
        g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        s = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(),
                                 o, providers=["CPUExecutionProvider"])
        rows[(ORT_MLAS_1T.name, th)] = [differ(ORT_MLAS_1T, a, b, s.run(None, {"a": a, "b": b})[0]) for _, a, b in ops]
    rows[(MLX_CPU.name, "default")] = [differ(MLX_CPU, a, b, np.array(mx.matmul(mx.array(a), mx.array(b),
                                                                               stream=mx.cpu))) for _, a, b in ops]
    print("outputs differing from the profile's record, by library thread count ('-': a shape the profile does not "
          "model)")
    print("profile | threads | " + " | ".join(n for n, _, _ in ops))
    for (name, th), r in rows.items():
        print(f"{name} | {th} | " + " | ".join(r))


if __name__ == "__main__":
    main()
