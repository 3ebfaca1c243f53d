"""qref.recipes.qmatmul against ONNX Runtime and the ONNX reference evaluator: one row per pipeline (matmul.md).

    python benchmarks/qmatmul.py                    # M = N = 256, K = 256
    python benchmarks/qmatmul.py --m 64 --k 256 --n 64 --repeats 7

Each row runs one pipeline on the same seeded u8 x s8 operands (per-column b scales and zero points): qref's
``quantized_matmul`` with the row's profile, and the backend that profile models (onnxruntime 1.32 CPU:
MatMulInteger / QLinearMatMul with every input a graph input; onnx 1.23 ReferenceEvaluator) or none where qref
is the only implementation (gemmlowp / TFLite fixed point, StableHLO dequantize-dot-quantize, the exact spec).
Before timing both results are compared as integers ("same"). Times are the best of ``--repeats`` alternating
runs (wall clock, one numpy thread; ORT's intra-op threads set to 1). MMAC/s = million multiply-accumulates per
second; ratio = qref / backend. The torch rows (torch 2.13 CPU, one thread: torch.set_num_threads(1) as
benchmarks/run.py) run ``torch._int_mm`` on the operands shifted to int8 x int8 (zero points corrected in int32
torch ops, as the harness target does) and ``torch.ops.quantized.linear`` per engine on prepacked weights (onednn:
symmetric weights, b zero points 0). No assertion is made on the timings.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from qref.recipes import qmatmul as qm

ROWS = (("matmul_integer (int32 wrap)", "onnxruntime", "MatMulInteger", "ort"),
        ("matmul_integer (int32 wrap)", "onnx_reference", "MatMulInteger", "ref"),
        ("qlinear float32 multiply", "onnxruntime", "QLinearMatMul", "ort"),
        ("qlinear float64 product, zy before rounding", "onnx_reference", "QLinearMatMul", "ref"),
        ("qlinear exact (spec)", "exact", "QLinearMatMul", None),
        ("qlinear fixed point, double rounding", "gemmlowp", "QLinearMatMul", None),
        ("qlinear fixed point, single rounding", "tflite_single_rounding", "QLinearMatMul", None),
        ("qlinear dequantize-dot-quantize", "dequantize_dot", "QLinearMatMul", None),
        ("matmul_integer, int16 pair sums", "onnxruntime_avx2", "MatMulInteger", None),
        ("matmul_integer int8 x int8 (int32 wrap)", "torch_int_mm", "MatMulInteger", "torch._int_mm"),
        ("qlinear fl32(a_s w_s) / y_s (fbgemm)", "torch_fbgemm", "QLinearMatMul", "torch:fbgemm"),
        ("qlinear fl32(a_s w_s) / y_s (x86)", "torch_x86", "QLinearMatMul", "torch:x86"),
        ("qlinear fl32(a_s w_s) fl32(1 / y_s) (qnnpack)", "torch_qnnpack", "QLinearMatMul", "torch:qnnpack"),
        ("qlinear sequential scales, zy before rounding (onednn)", "torch_onednn", "QLinearMatMul",
         "torch:onednn"),
        ("qlinear + float bias in accumulator units (fbgemm)", "torch_fbgemm", "QLinearMatMul", "torch:fbgemm+bias"),
        ("qlinear + float bias quantized to int32 (qnnpack)", "torch_qnnpack", "QLinearMatMul",
         "torch:qnnpack+bias"),
        ("qlinear + float bias after the operand scales (onednn)", "torch_onednn", "QLinearMatMul",
         "torch:onednn+bias"))


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _torch_run(backend: str, fd: dict[str, np.ndarray]) -> tuple[Callable[[], np.ndarray], str]:
    """(a call of the torch pipeline on prepared inputs, its name): _int_mm with int32 zero-point corrections, or
    quantized.linear under an engine with the weight prepacked once."""
    import warnings

    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*quantized tensor creation.*deprecated")
    warnings.filterwarnings("ignore", message=".*quantize_per.*deprecated")
    if backend == "torch._int_mm":
        A, B = torch.from_numpy(fd["a"]), torch.from_numpy(fd["b"])
        za, zb = int(fd["a_zero_point"]), torch.from_numpy(fd["b_zero_point"].astype(np.int32))
        k = torch.tensor(A.shape[1], dtype=torch.int32)
        i32 = torch.int32

        def run() -> np.ndarray:
            return (torch._int_mm(A, B) - zb * A.sum(1, keepdim=True, dtype=i32) - za * B.sum(0, dtype=i32)
                    + k * za * zb).numpy()
        return run, "torch._int_mm"
    engine = backend.split(":")[1].removesuffix("+bias")
    torch.backends.quantized.engine = engine
    xa = torch._make_per_tensor_quantized_tensor(torch.from_numpy(fd["a"]), float(fd["a_scale"]),
                                                 int(fd["a_zero_point"]))
    w = torch._make_per_channel_quantized_tensor(
        torch.from_numpy(np.ascontiguousarray(fd["b"].T)), torch.from_numpy(fd["b_scale"].astype(np.float64)),
        torch.from_numpy(fd["b_zero_point"].astype(np.int64)), 0)
    packed = torch.ops.quantized.linear_prepack(w, torch.from_numpy(fd["bias"]) if "bias" in fd else None)
    ys, zy = float(fd["y_scale"]), int(fd["y_zero_point"])

    def run_linear() -> np.ndarray:
        torch.backends.quantized.engine = engine
        return torch.ops.quantized.linear(xa, packed, ys, zy).int_repr().numpy()
    return run_linear, f"torch quantized.linear ({engine})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    M, K, N = args.m, args.k, args.n
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    feeds = {"a": a, "a_scale": np.array(0.0173, np.float32), "a_zero_point": np.array(131, np.uint8), "b": b,
             "b_scale": (rng.uniform(1, 2, N) * 2**-9).astype(np.float32),
             "b_zero_point": rng.integers(-3, 4, N).astype(np.int8), "y_scale": np.array(0.5, np.float32),
             "y_zero_point": np.array(128, np.uint8)}
    print(f"M = {M}, K = {K}, N = {N}; best of {args.repeats}")
    print("| pipeline | profile | backend | qref MMAC/s | backend MMAC/s | ratio | same |")
    print("|---|---|---|---|---|---|---|")
    for title, profile, op, backend in ROWS:
        integer = op == "MatMulInteger"
        fd = dict(feeds)
        a_st = "uint8"
        if backend == "torch._int_mm":  # the same operands shifted to int8 (_int_mm takes int8 x int8)
            a_st = "int8"
            fd.update(a=(a.astype(np.int16) - 128).astype(np.int8), a_zero_point=np.array(3, np.int8))
        if backend is not None and backend.startswith("torch:onednn"):  # symmetric weights only
            fd.update(b_zero_point=np.zeros(N, np.int8))
        if backend is not None and backend.endswith("+bias"):  # a float32 bias per output column
            fd["bias"] = (rng.uniform(-4, 4, N)).astype(np.float32)
        pipe = qm.QuantizedMatmul(qm.IntOperand(a_st), qm.IntOperand("int8"), None if integer else "uint8",
                                  qm.matmul_rules(profile, **({"method": "none"} if integer else {})))

        def q(pipe: qm.QuantizedMatmul = pipe, fd: dict = fd) -> np.ndarray:
            return qm.quantized_matmul(fd["a"], fd["b"], a_scale=fd["a_scale"], a_zero_point=fd["a_zero_point"],
                                       b_scale=fd["b_scale"], b_zero_point=fd["b_zero_point"],
                                       y_scale=fd["y_scale"], y_zero_point=fd["y_zero_point"],
                                       bias=fd.get("bias"), pipeline=pipe).values
        mmac = M * N * K / 1e6
        tq = _best(q, args.repeats)
        other, same, tb = "-", "-", None
        if backend is not None and backend.startswith("torch"):
            run, other = _torch_run(backend, fd)
            same = "yes" if np.array_equal(np.asarray(run()).astype(np.int64), q()) else "NO"
            tb = _best(run, args.repeats)
        elif backend is not None:
            from onnx import TensorProto as T
            from onnx import helper

            names = ["a", "b", "a_zero_point", "b_zero_point"] if integer else list(feeds)
            ty = {"uint8": T.UINT8, "int8": T.INT8, "float32": T.FLOAT}
            vi = [helper.make_tensor_value_info(n, ty[feeds[n].dtype.name], list(feeds[n].shape)) for n in names]
            g = helper.make_graph([helper.make_node(op, names, ["y"])], "g", vi, [helper.make_tensor_value_info(
                "y", T.INT32 if integer else T.UINT8, [M, N])])
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
            fd = {n: feeds[n] for n in names}
            if backend == "ort":
                import onnxruntime as ort

                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
                run = lambda s=s, fd=fd: s.run(None, fd)[0]  # noqa: E731
                other = "onnxruntime"
            else:
                from onnx.reference import ReferenceEvaluator

                ev = ReferenceEvaluator(model)
                run = lambda ev=ev, fd=fd: ev.run(None, fd)[0]  # noqa: E731
                other = "onnx.reference"
            same = "yes" if np.array_equal(np.asarray(run()).astype(np.int64), q()) else "NO"
            tb = _best(run, args.repeats)
        rb = f"{mmac / tb:.0f}" if tb else "-"
        ratio = f"{tb / tq:.3g}" if tb else "-"
        print(f"| {title} | {profile} | {other} | {mmac / tq:.1f} | {rb} | {ratio} | {same} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
