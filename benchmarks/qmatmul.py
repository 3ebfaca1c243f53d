"""qref.recipes.qmatmul against ONNX Runtime and the ONNX reference evaluator, and qref.recipes.vectorwise against
bitsandbytes and torchao (LLM.int8, weight-only): one row per pipeline (matmul.md).

    python benchmarks/qmatmul.py                    # M = N = 256, K = 256
    python benchmarks/qmatmul.py --m 64 --k 256 --n 64 --repeats 7

Each row runs one pipeline on the same seeded u8 x s8 operands (per-column b scales and zero points): qref's
``quantized_matmul`` with the row's profile, and the backend that profile models (onnxruntime 1.32 CPU:
MatMulInteger / QLinearMatMul with every input a graph input; onnx 1.23 ReferenceEvaluator) or none where qref
is the only implementation (gemmlowp / TFLite fixed point, StableHLO dequantize-dot-quantize, the exact spec).
Before timing both results are compared as integers ("same"). Times are the best of ``--repeats`` alternating
runs (wall clock, one numpy thread; ORT's intra-op threads set to 1). MMAC/s = million multiply-accumulates per
second; ratio = qref / backend. No assertion is made on the timings.
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
        ("matmul_integer, int16 pair sums", "onnxruntime_avx2", "MatMulInteger", None))


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


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
        pipe = qm.QuantizedMatmul(qm.IntOperand("uint8"), qm.IntOperand("int8"), None if integer else "uint8",
                                  qm.matmul_rules(profile, **({"method": "none"} if integer else {})))

        def q(pipe: qm.QuantizedMatmul = pipe) -> np.ndarray:
            return qm.quantized_matmul(a, b, a_scale=feeds["a_scale"], a_zero_point=feeds["a_zero_point"],
                                       b_scale=feeds["b_scale"], b_zero_point=feeds["b_zero_point"],
                                       y_scale=feeds["y_scale"], y_zero_point=feeds["y_zero_point"],
                                       pipeline=pipe).values
        mmac = M * N * K / 1e6
        tq = _best(q, args.repeats)
        other, same, tb = "-", "-", None
        if backend is not None:
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
    _float_rows(M, K, N, args.repeats)
    return 0


def _float_rows(M: int, K: int, N: int, repeats: int) -> None:
    """LLM.int8 / weight-only rows (matmul.md §8, §9): bitsandbytes 0.50.2 and torchao 0.18 CPU against
    qref.recipes.vectorwise on float operands (a (M, K), weight (N, K)); "same" = bit for bit for the int8
    pipelines, within the float32 any-order bound for the weight-only ones. Rows whose library is missing are
    skipped."""
    import warnings

    from qref.recipes.ops import exact_matmul
    from qref.recipes.vectorwise import vectorwise_int8_matmul, weight_only_matmul

    warnings.simplefilter("ignore")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        return
    rng = np.random.default_rng(1)
    a16 = (rng.standard_normal((M, K))).astype(np.float16)
    w16 = (rng.standard_normal((N, K)) * 0.05).astype(np.float16)
    a32, w32 = a16.astype(np.float32), w16.astype(np.float32)
    codes = rng.integers(0, 16, (N, K)).astype(np.uint8)
    absmax = rng.uniform(0.1, 2, N * K // 64).astype(np.float32)
    c8 = rng.integers(-128, 128, (N, K)).astype(np.int8)
    s8 = rng.uniform(1e-3, 1e-2, N).astype(np.float32)
    rows: list[tuple[str, str, str, Callable[[], np.ndarray], Callable[[], np.ndarray], Callable[..., bool]]] = []
    bits = lambda x, y: bool(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)))  # noqa: E731
    try:
        import bitsandbytes as bnb
        import bitsandbytes.functional as F

        st = bnb.MatmulLtState()
        st.is_training = False
        ta, tw = torch.from_numpy(a16), torch.from_numpy(w16)
        rows.append(("LLM.int8 (threshold 0)", "bitsandbytes_int8", "bnb.matmul (MatMul8bitLt)",
                     lambda: vectorwise_int8_matmul(a16, w16, "bitsandbytes_int8").y,
                     lambda: bnb.matmul(ta, tw, state=st).numpy(), bits))
        c = codes.reshape(-1)
        packed = torch.from_numpy((c[0::2] << 4) | c[1::2]).reshape(-1, 1)
        qs = F.QuantState(absmax=torch.from_numpy(absmax), shape=torch.Size([N, K]), blocksize=64, quant_type="nf4",
                          dtype=torch.float32, code=F.get_4bit_type("nf4", device="cpu"))
        tx = torch.from_numpy(a32)
        rows.append(("4-bit NF4 weight-only (float32 any order)", "weight_only_any", "bnb.matmul_4bit",
                     lambda: weight_only_matmul(a32, codes, absmax, table="nf4", block_size=64),
                     lambda: bnb.matmul_4bit(tx, packed.t(), qs).numpy(),
                     lambda r, y: bool(r.within(y).all())))
    except ImportError:
        pass
    try:
        import torchao.quantization as tq

        lin = torch.nn.Linear(K, N, bias=False)
        lin.weight.data = torch.from_numpy(w32.copy())
        tq.quantize_(lin, tq.Int8DynamicActivationInt8WeightConfig())
        tx = torch.from_numpy(a32)
        rows.append(("int8 dynamic activation, int8 weight", "torchao_int8_dynamic", "torchao Int8Tensor linear",
                     lambda: vectorwise_int8_matmul(a32, w32, "torchao_int8_dynamic").y,
                     lambda: lin(tx).detach().numpy(), bits))
        w8 = tq.Int8Tensor(torch.from_numpy(c8), torch.from_numpy(s8.reshape(N, 1)), [1, K], torch.float32)
        rows.append(("int8 weight-only (float32 any order)", "weight_only_any", "torchao Int8Tensor linear",
                     lambda: exact_matmul(a32, c8.astype(np.float32).T, accumulation="float32_any",
                                          post_scale=s8.reshape(1, -1)),
                     lambda: torch.nn.functional.linear(tx, w8).numpy(),
                     lambda r, y: bool(r.within(y).all())))
    except ImportError:
        pass
    mmac = M * N * K / 1e6
    for title, profile, other, q, run, same in rows:
        ok = "yes" if same(q(), run()) else "NO"
        tq_, tb = _best(q, repeats), _best(run, repeats)
        print(f"| {title} | {profile} | {other} | {mmac / tq_:.1f} | {mmac / tb:.0f} | {tb / tq_:.3g} | {ok} |")


if __name__ == "__main__":
    raise SystemExit(main())
