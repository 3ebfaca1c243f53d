"""qref.recipes.qmatmul against ONNX Runtime and the ONNX reference evaluator: one row per pipeline (matmul.md).

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
    _ms_rows(M, K, N, args.repeats, rng)
    return 0


def _ms_session(node: object, inputs: list[object], inits: list[object] = (),  # type: ignore[assignment]
                out_type: int = 1) -> object:
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper

    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", out_type or T.FLOAT, None)],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _ms_rows(M: int, K: int, N: int, repeats: int, rng: np.random.Generator) -> None:
    """com.microsoft rows (matmul.md §8-§10): MatMulIntegerToFloat and DynamicQuantizeMatMul compared bit for
    bit; MatMulNBits (block 32, B an initializer) compared within the bound of §10.3, on M_nbits = min(M, 16) rows
    (qref computes the exact result S with Python integers)."""
    from onnx import TensorProto as T
    from onnx import helper
    from onnx import numpy_helper as nh

    from qref.profiles.matmul import NBitsCompute

    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    x = rng.standard_normal((M, K)).astype(np.float32)
    sa, sb = np.array(0.0173, np.float32), (rng.uniform(1, 2, N) * 2**-9).astype(np.float32)
    za, zb = np.array(131, np.uint8), rng.integers(-3, 4, N).astype(np.int8)
    bias = rng.standard_normal(N).astype(np.float32)
    vi = helper.make_tensor_value_info
    rows = []
    s = _ms_session(helper.make_node("MatMulIntegerToFloat", ["a", "b", "sa", "sb", "za", "zb", "bias"], ["y"],
                                     domain="com.microsoft"),
                    [vi("a", T.UINT8, None), vi("b", T.INT8, None), vi("sa", T.FLOAT, None), vi("sb", T.FLOAT, None),
                     vi("za", T.UINT8, None), vi("zb", T.INT8, None), vi("bias", T.FLOAT, None)])
    fd = {"a": a, "b": b, "sa": sa, "sb": sb, "za": za, "zb": zb, "bias": bias}
    rows.append(("matmul_integer_to_float (float32 output)", "MatMulIntegerToFloat", M, lambda: s.run(None, fd)[0],
                 lambda: qm.matmul_integer_to_float(a, b, a_scale=sa, b_scale=sb, a_zero_point=za, b_zero_point=zb,
                                                    bias=bias, profile="onnxruntime").values, None))
    s2 = _ms_session(helper.make_node("DynamicQuantizeMatMul", ["x", "b", "sbs", "zbs", "bias"], ["y"],
                                      domain="com.microsoft"),
                     [vi("x", T.FLOAT, None), vi("b", T.INT8, None), vi("sbs", T.FLOAT, None),
                      vi("zbs", T.INT8, None), vi("bias", T.FLOAT, None)])
    fd2 = {"x": x, "b": b, "sbs": sb[:1].reshape(()), "zbs": zb[:1].reshape(()), "bias": bias}
    rows.append(("dynamic_quantize_matmul (uint8 per tensor)", "DynamicQuantizeMatMul", M,
                 lambda: s2.run(None, fd2)[0],
                 lambda: qm.dynamic_quantize_matmul(x, b, b_scale=fd2["sbs"], b_zero_point=fd2["zbs"], bias=bias,
                                                    profile="onnxruntime").values, None))
    s4 = _ms_session(helper.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb", "", "sy", "zy"], ["y"],
                                      domain="com.microsoft", alpha=0.5),
                     [vi("a", T.UINT8, None), vi("sa", T.FLOAT, None), vi("za", T.UINT8, None), vi("b", T.INT8, None),
                      vi("sb", T.FLOAT, None), vi("zb", T.INT8, None), vi("sy", T.FLOAT, None),
                      vi("zy", T.UINT8, None)], out_type=T.UINT8)
    fd4 = {"a": a, "sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sy": np.array(0.5, np.float32),
           "zy": np.array(128, np.uint8)}
    rows.append(("qgemm (alpha 0.5, uint8 output)", "QGemm", M, lambda: s4.run(None, fd4)[0].astype(np.int64),
                 lambda: qm.qgemm(a, b, a_scale=sa, b_scale=sb, a_zero_point=za, b_zero_point=zb, y_scale=fd4["sy"],
                                  y_zero_point=128, alpha=0.5, output="uint8", profile="onnxruntime").values, "int"))
    mn, block = min(M, 16), 32
    nb = -(-K // block)
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    qs = (rng.uniform(0.5, 2, (N, nb)) * 2.0**-5).astype(np.float32)
    qp = np.zeros((N, nb * block), np.uint8)
    qp[:, :K] = q
    qp = qp.reshape(N, nb, block)
    packed = (qp[..., 0::2] | (qp[..., 1::2] << 4)).astype(np.uint8)
    xn = x[:mn]
    for level, compute in ((0, "float32_dequantize"), (4, "int8_blocks")):
        node = helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft", K=K, N=N, bits=4,
                                block_size=block, accuracy_level=level)
        s3 = _ms_session(node, [vi("x", T.FLOAT, None)], [nh.from_array(packed, "w"), nh.from_array(qs.reshape(-1),
                                                                                                     "s")])
        rows.append((f"matmul_nbits accuracy_level {level} ({compute}, block 32)", "MatMulNBits", mn,
                     lambda s3=s3: s3.run(None, {"x": xn})[0],
                     lambda compute=compute: qm.matmul_nbits(xn, q, qs, None, block_size=block,
                                                             nbits=NBitsCompute(compute)), "bound"))
    print(f"\ncom.microsoft (M = {M}, K = {K}, N = {N}; MatMulNBits on {mn} rows; best of {repeats})")
    print("| pipeline | operator | qref MMAC/s | onnxruntime MMAC/s | ratio | same |")
    print("|---|---|---|---|---|---|")
    for title, op, m, run, ref, compare in rows:
        got, want = np.asarray(run()), ref()
        if compare == "bound":
            same = "within bound" if np.all((want.lo <= got) & (got <= want.hi)) else "NO"
        elif compare == "int":
            same = "yes" if np.array_equal(got, want) else "NO"
        else:
            same = "yes" if np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32)) else "NO"
        tq, tb = _best(ref, repeats if compare != "bound" else 1), _best(run, repeats)
        mmac = m * K * N / 1e6
        print(f"| {title} | {op} | {mmac / tq:.1f} | {mmac / tb:.0f} | {tb / tq:.3g} | {same} |")


if __name__ == "__main__":
    raise SystemExit(main())
