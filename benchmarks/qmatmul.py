"""qref.recipes.qmatmul against ONNX Runtime, the ONNX reference evaluator, LiteRT and PyTorch, and
qref.recipes.vectorwise against bitsandbytes and torchao (LLM.int8, weight-only): one row per pipeline
(matmul.md).

    python benchmarks/qmatmul.py                    # M = N = 256, K = 256
    python benchmarks/qmatmul.py --m 64 --k 256 --n 64 --repeats 7
    python benchmarks/qmatmul.py --new-only           # only the float-output rows below

Each row runs one pipeline on the same seeded u8 x s8 operands (per-column b scales and zero points): qref's
``quantized_matmul`` with the row's profile, and the backend that profile models (onnxruntime 1.32 CPU:
MatMulInteger / QLinearMatMul with every input a graph input; onnx 1.23 ReferenceEvaluator) or none where qref
is the only implementation (gemmlowp / TFLite fixed point, StableHLO dequantize-dot-quantize, the exact spec);
JAX 0.10 (XLA:CPU, jax.jit of jax.lax.dot_general(preferred_element_type=int32) plus the int32 zero-point terms);
IREE 3.13 and the StableHLO interpreter of torch-mlir (stablehlo.dot_general on !quant.uniform types, profile
stablehlo_lowering) on their own operands: s8 x s8, per-tensor scales, a zero point 3, b zero point 0 (StableHLO's
dot_general C15), since they cannot express u8 x s8 with per-column zero points; the interpreter only with
``--interpreter`` (it evaluates element by element: minutes at the default size).
Before timing both results are compared as integers ("same"). Times are the best of ``--repeats`` alternating
runs (wall clock, one numpy thread; ORT's intra-op threads set to 1). MMAC/s = million multiply-accumulates per
second; ratio = qref / backend. No assertion is made on the timings.

The LiteRT rows (matmul.md §6.6) run s8 x s8 operands (symmetric weights, per-channel scales for
FULLY_CONNECTED, per-tensor for BATCH_MATMUL, an int32 bias for FULLY_CONNECTED) through one-operator models
under each kernel choice (Interpreter(num_threads=1)) against qref with the kernel's profile.

The float-output rows (last table) run this round's pipelines on their own seeded operands, compared bit for bit
(float32 as uint32, int16 as integers: "same" / "DIFF") before timing: PyTorch's ``quantized.linear_dynamic`` per
engine (fbgemm, x86, onednn, qnnpack) and reduce_range against ``dynamic_quantize_matmul`` with the
torch_*_dynamic* profiles (matmul.md §15; weights in [-64, 64]); qwix's and AQT's int8 dot_general with a float32
output under jax.jit against ``matmul_integer_to_float`` (qwix_int8_dot, aqt_int8_dot, §16); LiteRT's
dynamic-range FULLY_CONNECTED per kernel choice and asymmetric_quantize_inputs against ``hybrid_matmul``
(litert_hybrid_*, §17) and int16 BATCH_MATMUL against ``quantized_matmul`` (litert_batch_matmul_int16, §6.6).
The float32 GEMM accumulation records are benchmarked by benchmarks/accumulation.py.
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
        ("matmul_integer (int32 wrap)", "xla_cpu", "MatMulInteger", "jax"),
        ("qlinear zero-point offset, s8 x s8", "stablehlo_lowering", "dot_general", "iree"),
        ("qlinear zero-point offset, s8 x s8", "stablehlo_lowering", "dot_general", "shlo"))

SHLO_SCALES = (0.0173, 0.011, 0.0931)  # a, b, y
SHLO_ZP = (3, 0, -5)  # a, b, y


def _shlo_text(M: int, K: int, N: int, args: bool, a: np.ndarray | None = None, b: np.ndarray | None = None) -> str:
    """@main: stablehlo.dot_general of M x K by K x N s8 storage as !quant.uniform types (SHLO_SCALES, SHLO_ZP):
    function arguments (IREE) or hex constants (the interpreter)."""
    sa, sb, sy = (repr(float(np.float32(v))) for v in SHLO_SCALES)
    za, zb, zy = SHLO_ZP
    qa, qb = f"!quant.uniform<i8:f32, {sa}:{za}>", f"!quant.uniform<i8:f32, {sb}:{zb}>"
    qy = f"!quant.uniform<i8:f32, {sy}:{zy}>"
    ta, tb, ty = f"tensor<{M}x{K}xi8>", f"tensor<{K}x{N}xi8>", f"tensor<{M}x{N}xi8>"
    if args:
        head, consts = f"func.func @main(%a: {ta}, %b: {tb}) -> {ty}", ""
    else:
        assert a is not None and b is not None
        head = f"func.func @main() -> {ty}"
        consts = (f'%a = stablehlo.constant dense<"0x{a.tobytes().hex().upper()}"> : {ta}\n'
                  f'%b = stablehlo.constant dense<"0x{b.tobytes().hex().upper()}"> : {tb}\n')
    return (f"module {{ {head} {{\n{consts}"
            f"%qa = stablehlo.bitcast_convert %a : ({ta}) -> tensor<{M}x{K}x{qa}>\n"
            f"%qb = stablehlo.bitcast_convert %b : ({tb}) -> tensor<{K}x{N}x{qb}>\n"
            f"%y = stablehlo.dot_general %qa, %qb, contracting_dims = [1] x [0] : (tensor<{M}x{K}x{qa}>, "
            f"tensor<{K}x{N}x{qb}>) -> tensor<{M}x{N}x{qy}>\n"
            f"%r = stablehlo.bitcast_convert %y : (tensor<{M}x{N}x{qy}>) -> {ty}\nreturn %r : {ty} }} }}")


def _backend_run(backend: str, a: np.ndarray, b: np.ndarray, feeds: dict[str, np.ndarray]) -> tuple[str, Callable]:
    """(backend name, a callable running it) for the jax / iree / shlo rows."""
    M, K = a.shape
    N = b.shape[1]
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        def f(a, b, za, zb):
            i32 = jnp.int32
            acc = jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=i32)
            za, zb = za.astype(i32).reshape(-1, 1), zb.astype(i32).reshape(1, -1)
            return (acc - zb * jnp.sum(a, axis=1, keepdims=True, dtype=i32)
                    - za * jnp.sum(b, axis=0, keepdims=True, dtype=i32) + i32(K) * za * zb)
        g = jax.jit(f)
        args = [jnp.asarray(x) for x in (a, b, feeds["a_zero_point"], feeds["b_zero_point"])]
        return "jax.jit (XLA:CPU)", lambda: np.asarray(g(*args))
    if backend == "iree":
        import iree.compiler as ic
        import iree.runtime as rt

        vmfb = ic.compile_str(_shlo_text(M, K, N, True), target_backends=["llvm-cpu"],
                              extra_args=["--iree-llvmcpu-target-cpu=host"])
        mod = rt.load_vm_flatbuffer(vmfb, driver="local-sync")
        return "iree llvm-cpu (local-sync)", lambda: np.asarray(mod.main(a, b))
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo

    text = _shlo_text(M, K, N, False, a, b)

    def interp() -> np.ndarray:
        ctx = ir.Context()
        _stablehlo.register_dialect(ctx)
        with ctx:
            return np.array(_stablehlo.eval_module(ir.Module.parse(text), [])[0])
    return "stablehlo interpreter", interp


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


TORCH_ROWS = (
    ("matmul_integer int8 x int8 (int32 wrap)", "torch_int_mm", "MatMulInteger", "torch._int_mm"),
    ("qlinear fl32(a_s w_s) / y_s (fbgemm)", "torch_fbgemm", "QLinearMatMul", "torch:fbgemm"),
    ("qlinear fl32(a_s w_s) / y_s (x86)", "torch_x86", "QLinearMatMul", "torch:x86"),
    ("qlinear fl32(a_s w_s) fl32(1 / y_s) (qnnpack)", "torch_qnnpack", "QLinearMatMul", "torch:qnnpack"),
    ("qlinear sequential scales, zy before rounding (onednn)", "torch_onednn", "QLinearMatMul", "torch:onednn"),
    ("qlinear + float bias in accumulator units (fbgemm)", "torch_fbgemm", "QLinearMatMul", "torch:fbgemm+bias"),
    ("qlinear + float bias quantized to int32 (qnnpack)", "torch_qnnpack", "QLinearMatMul", "torch:qnnpack+bias"),
    ("qlinear + float bias after the operand scales (onednn)", "torch_onednn", "QLinearMatMul", "torch:onednn+bias"))


def _torch_rows(M: int, K: int, N: int, feeds: dict[str, np.ndarray], repeats: int, rng: np.random.Generator
                ) -> None:
    """One row per PyTorch pipeline (torch 2.13 CPU, one thread): ``torch._int_mm`` on the operands shifted to
    int8 x int8 (zero points corrected in int32 torch ops, as the harness target does) and
    ``torch.ops.quantized.linear`` per engine on prepacked weights (onednn: symmetric weights)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("| torch | - | not installed | - | - | - | - |")
        return
    mmac = M * N * K / 1e6
    for title, profile, op, backend in TORCH_ROWS:
        integer = op == "MatMulInteger"
        fd = dict(feeds)
        a_st = "uint8"
        if backend == "torch._int_mm":  # the same operands shifted to int8 (_int_mm takes int8 x int8)
            a_st = "int8"
            fd.update(a=(feeds["a"].astype(np.int16) - 128).astype(np.int8), a_zero_point=np.array(3, np.int8))
        if backend.startswith("torch:onednn"):  # symmetric weights only
            fd.update(b_zero_point=np.zeros(N, np.int8))
        if backend.endswith("+bias"):  # a float32 bias per output column
            fd["bias"] = (rng.uniform(-4, 4, N)).astype(np.float32)
        pipe = qm.QuantizedMatmul(qm.IntOperand(a_st), qm.IntOperand("int8"), None if integer else "uint8",
                                  qm.matmul_rules(profile, **({"method": "none"} if integer else {})))

        def q(pipe: qm.QuantizedMatmul = pipe, fd: dict = fd) -> np.ndarray:
            return qm.quantized_matmul(fd["a"], fd["b"], a_scale=fd["a_scale"], a_zero_point=fd["a_zero_point"],
                                       b_scale=fd["b_scale"], b_zero_point=fd["b_zero_point"],
                                       y_scale=fd["y_scale"], y_zero_point=fd["y_zero_point"],
                                       bias=fd.get("bias"), pipeline=pipe).values
        tq = _best(q, repeats)
        run, other = _torch_run(backend, fd)
        same = "yes" if np.array_equal(np.asarray(run()).astype(np.int64), q()) else "NO"
        tb = _best(run, repeats)
        print(f"| {title} | `{profile}` | {other} | {mmac / tq:.1f} | {mmac / tb:.1f} | {tb / tq:.3f} | {same} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--interpreter", action="store_true", help="also time the StableHLO interpreter")
    ap.add_argument("--new-only", action="store_true",
                    help="only the float-output rows (torch dynamic, qwix / AQT, LiteRT hybrid and int16)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    M, K, N = args.m, args.k, args.n
    if args.new_only:
        _float_output_rows(M, K, N, args.repeats)
        return 0
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    feeds = {"a": a, "a_scale": np.array(0.0173, np.float32), "a_zero_point": np.array(131, np.uint8), "b": b,
             "b_scale": (rng.uniform(1, 2, N) * 2**-9).astype(np.float32),
             "b_zero_point": rng.integers(-3, 4, N).astype(np.int8), "y_scale": np.array(0.5, np.float32),
             "y_zero_point": np.array(128, np.uint8)}
    print(f"M = {M}, K = {K}, N = {N}; best of {args.repeats}")
    print("| pipeline | profile | backend | qref MMAC/s | backend MMAC/s | ratio | same |")
    print("|---|---|---|---|---|---|---|")
    a8 = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b8 = rng.integers(-128, 128, (K, N)).astype(np.int8)
    for title, profile, op, backend in ROWS:
        if backend == "shlo" and not args.interpreter:
            continue
        integer = op == "MatMulInteger"
        shlo = op == "dot_general"
        sa = "int8" if shlo else "uint8"
        pipe = qm.QuantizedMatmul(qm.IntOperand(sa), qm.IntOperand("int8"), None if integer else sa,
                                  qm.matmul_rules(profile, **({"method": "none"} if integer else {})))
        if shlo:
            f32 = [np.float32(v) for v in SHLO_SCALES]
            qa, qb = a8, b8
            qargs = dict(a_scale=f32[0], a_zero_point=SHLO_ZP[0], b_scale=f32[1], b_zero_point=SHLO_ZP[1],
                         y_scale=f32[2], y_zero_point=SHLO_ZP[2])
        else:
            qa, qb = a, b
            qargs = dict(a_scale=feeds["a_scale"], a_zero_point=feeds["a_zero_point"], b_scale=feeds["b_scale"],
                         b_zero_point=feeds["b_zero_point"], y_scale=feeds["y_scale"],
                         y_zero_point=feeds["y_zero_point"])

        def q(pipe: qm.QuantizedMatmul = pipe, qa: np.ndarray = qa, qb: np.ndarray = qb,
              qargs: dict = qargs) -> np.ndarray:
            return qm.quantized_matmul(qa, qb, pipeline=pipe, **qargs).values
        mmac = M * N * K / 1e6
        tq = _best(q, args.repeats)
        other, same, tb = "-", "-", None
        if backend in ("jax", "iree", "shlo"):
            other, run = _backend_run(backend, qa, qb, feeds)
            same = "yes" if np.array_equal(np.asarray(run()).astype(np.int64), q()) else "NO"
            tb = _best(run, 1 if backend == "shlo" else args.repeats)
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
    _litert_rows(M, K, N, args.repeats, rng)
    _torch_rows(M, K, N, feeds, args.repeats, rng)
    _ms_rows(M, K, N, args.repeats, rng)
    _float_rows(M, K, N, args.repeats)
    _float_output_rows(M, K, N, args.repeats)
    return 0


def _litert_rows(M: int, K: int, N: int, repeats: int, rng: np.random.Generator) -> None:
    """One row per LiteRT pipeline (FULLY_CONNECTED / BATCH_MATMUL x kernel choice), skipped without LiteRT."""
    try:
        from ai_edge_litert import interpreter as L

        from qref.harness.adapters import litert as LA
    except ImportError:
        print("| LiteRT | - | not installed | - | - | - | - |")
        return
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-127, 128, (K, N)).astype(np.int8)
    bias = rng.integers(-(1 << 15), 1 << 15, N).astype(np.int32)
    mmac = M * N * K / 1e6
    for op in ("fully_connected", "batch_matmul"):
        fc = op == "fully_connected"
        ins = {"a": a, "b": b, "a_scale": np.float32(0.0173), "a_zero_point": np.array(3),
               "b_scale": (rng.uniform(1, 2, N) * 2**-9).astype(np.float32) if fc else np.float32(0.0041),
               "b_zero_point": np.zeros(N if fc else 1, np.int64), "y_scale": np.float32(0.0931 if fc else 0.00731),
               "y_zero_point": np.array(-5)}
        if fc:
            ins["bias"] = bias
        tensors, inputs, op_in = LA.tensor_specs(op, ins, ("int8", "int8", "int8"))
        buf = LA.model_bytes(op, tensors, inputs, op_in)
        feeds = [a] if fc else [a, b]
        for kind, resolver in LA.KINDS.items():
            profile = LA.PROFILES[(op, kind)]
            pipe = qm.QuantizedMatmul(qm.IntOperand("int8"), qm.IntOperand("int8", "per_column" if fc else
                                                                           "per_tensor"), "int8",
                                      qm.matmul_rules(profile))

            def q(pipe: qm.QuantizedMatmul = pipe, ins: dict = ins) -> np.ndarray:
                return qm.quantized_matmul(a, b, a_scale=ins["a_scale"], a_zero_point=3, b_scale=ins["b_scale"],
                                           b_zero_point=0, y_scale=ins["y_scale"], y_zero_point=-5,
                                           bias=ins.get("bias"), pipeline=pipe).values
            it = L.Interpreter(model_content=buf, num_threads=1,
                               experimental_op_resolver_type=getattr(L.OpResolverType, resolver))
            it.allocate_tensors()
            details = it.get_input_details()
            out = it.get_output_details()[0]["index"]

            def run(it: L.Interpreter = it, details: list = details, out: int = out, feeds: list = feeds
                    ) -> np.ndarray:
                for d, x in zip(details, feeds):
                    it.set_tensor(d["index"], x)
                it.invoke()
                return it.get_tensor(out)
            same = "yes" if np.array_equal(np.asarray(run()).astype(np.int64), q()) else "NO"
            tq, tb = _best(q, repeats), _best(run, repeats)
            print(f"| litert {op} ({kind}) | {profile} | {LA.OPS[op]} {resolver} | {mmac / tq:.1f} | "
                  f"{mmac / tb:.0f} | {tb / tq:.3g} | {same} |")




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



def _float_rows(M: int, K: int, N: int, repeats: int) -> None:
    """LLM.int8 / weight-only rows (matmul.md §13, §14): bitsandbytes 0.50.2 and torchao 0.18 CPU against
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


# ---- float-output pipelines (matmul.md §15, §16, §17, §6.6): bit for bit as uint32 -----------------------------
Row = tuple[str, str, str, Callable[[], np.ndarray], Callable[[], np.ndarray]]


def _same(got: np.ndarray, want: np.ndarray) -> str:
    """"same" when the backend's and qref's outputs are equal bit for bit (float32 as uint32, integers as int64)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return "DIFF"
    if got.dtype == np.float32 or want.dtype == np.float32:
        ok = got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    else:
        ok = np.array_equal(got.astype(np.int64), want.astype(np.int64))
    return "same" if ok else "DIFF"


def _torch_dynamic_rows(M: int, K: int, N: int, rng: np.random.Generator) -> list[Row]:
    """torch.ops.quantized.linear_dynamic (torch 2.13 CPU, one thread) per engine and reduce_range on a weight
    prepacked once (int8 codes in [-64, 64]: u8 x s8 pair sums fit int16, no VNNI dependence, matmul.md §15)
    against ``dynamic_quantize_matmul`` with the engine's profile."""
    import warnings

    try:
        import torch

        from qref.harness.adapters.torch import DYNAMIC_PROFILES
    except ImportError:
        return []
    torch.set_num_threads(1)
    x = (rng.standard_normal((M, K)) * 2).astype(np.float32)
    w = rng.integers(-64, 65, (K, N)).astype(np.int8)
    ws = (np.abs(rng.standard_normal(N)) * 0.01 + 1e-3).astype(np.float32)
    wz = rng.integers(-16, 17, N).astype(np.int8)
    bias = (rng.standard_normal(N) * 4).astype(np.float32)
    tx = torch.from_numpy(x)
    rows: list[Row] = []
    for engine in ("fbgemm", "x86", "onednn", "qnnpack"):
        if engine not in torch.backends.quantized.supported_engines:
            continue
        zb = np.zeros(N, np.int8) if engine == "onednn" else wz  # onednn: symmetric weights only
        for rr in ((False,) if engine == "qnnpack" else (True, False)):  # qnnpack ignores reduce_range
            profile = DYNAMIC_PROFILES[(engine, rr)]
            torch.backends.quantized.engine = engine
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wq = torch._make_per_channel_quantized_tensor(
                    torch.from_numpy(np.ascontiguousarray(w.T)), torch.from_numpy(ws.astype(np.float64)),
                    torch.from_numpy(zb.astype(np.int64)), 0)
                packed = torch.ops.quantized.linear_prepack(wq, torch.from_numpy(bias))

            def run(engine: str = engine, packed: object = packed, rr: bool = rr) -> np.ndarray:
                torch.backends.quantized.engine = engine
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return torch.ops.quantized.linear_dynamic(tx, packed, rr).numpy()

            def q(profile: str = profile, zb: np.ndarray = zb) -> np.ndarray:
                return qm.dynamic_quantize_matmul(x, w, b_scale=ws, b_zero_point=zb, bias=bias,
                                                  profile=profile).values
            rows.append((f"linear_dynamic {engine}, reduce_range {rr}", profile,
                         f"torch quantized.linear_dynamic ({engine})", run, q))
    return rows


def _jax_dot_rows(M: int, K: int, N: int, rng: np.random.Generator) -> list[Row]:
    """qwix's quantized dot_general and AQT's int8 QTensor dot (jax.jit, scales as arguments, XLA:CPU) against
    ``matmul_integer_to_float`` with qwix_int8_dot / aqt_int8_dot (matmul.md §16); the jitted function is
    compiled before timing, a call includes the device-to-numpy copy."""
    rows: list[Row] = []
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return rows
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    b_s = (np.abs(rng.standard_normal(N)) * 0.01 + 1e-3).astype(np.float32)
    a_s = np.float32(0.0173)
    sa = jnp.asarray(np.full((M, 1), a_s, np.float32))
    sb = jnp.asarray(b_s.reshape(1, N))
    B = jnp.asarray(b)
    dims = (((1,), (0,)), ((), ()))
    try:
        from qwix._src.core import dot_general as qdg
        from qwix._src.core import qarray

        for st, za in (("int8", 0), ("uint8", 128)):
            a = (rng.integers(-128, 128, (M, K)) if st == "int8" else rng.integers(0, 256, (M, K))).astype(st)
            zav = None if za == 0 else jnp.asarray(np.full((M, 1), za, np.uint8))

            def dot(qa: object, qb: object, s_a: object, s_b: object, zav: object = zav) -> object:
                return qdg.dot_general(qarray.QArray(qa, s_a, zav, qa.dtype), qarray.QArray(qb, s_b, None, qb.dtype),
                                       dims)
            f, A = jax.jit(dot), jnp.asarray(a)

            def q(a: np.ndarray = a, za: int = za, st: str = st) -> np.ndarray:
                return qm.matmul_integer_to_float(a, b, a_scale=a_s, b_scale=b_s, a_zero_point=np.asarray(za, st),
                                                  a_storage=st, b_storage="int8", profile="qwix_int8_dot").values
            rows.append((f"qwix dot_general {st} x int8, za {za}", "qwix_int8_dot", "qwix + jax.jit (XLA:CPU)",
                         lambda f=f, A=A: np.asarray(f(A, B, sa, sb)), q))
    except ImportError:
        pass
    try:
        from aqt.jax.v2 import aqt_dot_general, aqt_tensor
        from aqt.jax.v2 import config as aqt_config

        fwd = aqt_config.fully_quantized(fwd_bits=8, bwd_bits=8).fwd
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)

        def adot(qa: object, qb: object, s_a: object, s_b: object) -> object:
            lq = aqt_tensor.QTensor(qvalue=qa, scale=[s_a], scale_t=None, bias=[], dequant_dtype=jnp.float32)
            rq = aqt_tensor.QTensor(qvalue=qb, scale=[s_b], scale_t=None, bias=[], dequant_dtype=jnp.float32)
            return aqt_dot_general._qtensor_dot_general(lq, rq, dims, fwd, jnp.float32).dequant()
        g, A8 = jax.jit(adot), jnp.asarray(a)
        rows.append(("AQT int8 QTensor dot, dequantized", "aqt_int8_dot", "aqtp + jax.jit (XLA:CPU)",
                     lambda: np.asarray(g(A8, B, sa, sb)),
                     lambda: qm.matmul_integer_to_float(a, b, a_scale=a_s, b_scale=b_s, a_zero_point=np.int8(0),
                                                        a_storage="int8", b_storage="int8",
                                                        profile="aqt_int8_dot").values))
    except ImportError:
        pass
    return rows


def _litert_interpreter(buf: bytes, resolver: str) -> tuple[Callable[[list[np.ndarray]], np.ndarray], list[str]]:
    from ai_edge_litert import interpreter as L

    it = L.Interpreter(model_content=buf, num_threads=1, experimental_op_resolver_type=getattr(L.OpResolverType,
                                                                                                resolver))
    it.allocate_tensors()
    details, out = it.get_input_details(), it.get_output_details()[0]["index"]

    def run(feeds: list[np.ndarray]) -> np.ndarray:
        for d, v in zip(details, feeds):
            it.set_tensor(d["index"], v)
        it.invoke()
        return it.get_tensor(out)
    return run, [str(o["op_name"]) for o in it._get_ops_details()]


def _litert_float_rows(M: int, K: int, N: int, rng: np.random.Generator) -> list[Row]:
    """LiteRT 2.3 (Interpreter(num_threads=1)): the dynamic-range FULLY_CONNECTED (float32 x per-channel int8
    weights in [-127, 127] + float32 bias -> float32, matmul.md §17) per kernel choice and
    asymmetric_quantize_inputs against ``hybrid_matmul``; int16 BATCH_MATMUL (per-tensor scales, zero points 0,
    §6.6) against ``quantized_matmul`` with litert_batch_matmul_int16 (XNNPACK does not take it)."""
    try:
        from qref.harness.adapters import litert as LA
    except ImportError:
        return []
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.integers(-127, 128, (K, N)).astype(np.int8)
    ws = rng.uniform(0.001, 0.02, N).astype(np.float32)
    bias = (rng.standard_normal(N) * 3).astype(np.float32)
    ins = {"a": x, "b": w, "b_scale": ws, "bias": bias}
    rows: list[Row] = []
    for (kind, asym), profile in LA.HYBRID_PROFILES.items():
        buf = LA.model_bytes("fully_connected", *LA.hybrid_tensors(ins), asymmetric_quantize_inputs=asym)
        run, ops = _litert_interpreter(buf, LA.KINDS[kind])
        if (kind == "xnnpack") != ("DELEGATE" in ops):
            print(f"| litert hybrid ({kind}) | {profile} | - | - | - | - | not run: executed nodes {ops} |")
            continue
        rows.append((f"litert hybrid FULLY_CONNECTED ({kind}, asymmetric {asym})", profile,
                     f"FULLY_CONNECTED {LA.KINDS[kind]}", lambda run=run: run([x]),
                     lambda profile=profile: qm.hybrid_matmul(x, w, w_scale=ws, bias=bias, profile=profile).values))
    a16 = rng.integers(-32768, 32768, (M, K)).astype(np.int16)
    b16 = rng.integers(-32768, 32768, (K, N)).astype(np.int16)
    s = (np.float32(2.0**-9 * 1.37), np.float32(2.0**-10 * 1.61), np.float32(2.0**-2 * 1.23))
    z = np.array(0)
    ins16 = {"a": a16, "b": b16, "a_scale": s[0], "a_zero_point": z, "b_scale": s[1], "b_zero_point": z,
             "y_scale": s[2], "y_zero_point": z}
    buf = LA.model_bytes("batch_matmul", *LA.tensor_specs("batch_matmul", ins16, ("int16", "int16", "int16")))
    pipe = qm.QuantizedMatmul(qm.IntOperand("int16"), qm.IntOperand("int16"), "int16",
                              qm.matmul_rules("litert_batch_matmul_int16"))
    for kind in ("ref", "optimized"):
        run, _ = _litert_interpreter(buf, LA.KINDS[kind])
        rows.append((f"litert int16 BATCH_MATMUL ({kind})", "litert_batch_matmul_int16",
                     f"BATCH_MATMUL {LA.KINDS[kind]}", lambda run=run: run([a16, b16]),
                     lambda: qm.quantized_matmul(a16, b16, a_scale=s[0], b_scale=s[1], y_scale=s[2],
                                                 pipeline=pipe).values))
    return rows


def _float_output_rows(M: int, K: int, N: int, repeats: int) -> None:
    """This round's pipelines (issues 28, 35), each on its own seeded operands: the backend and qref's emulation
    are compared bit for bit ("same" / "DIFF") before both are timed; ratio = qref MMAC/s / backend MMAC/s."""
    rng = np.random.default_rng(28)
    print(f"\nfloat-output pipelines (M = {M}, K = {K}, N = {N}; best of {repeats}; one thread)")
    print("| pipeline | profile | backend | qref MMAC/s | backend MMAC/s | ratio | same |")
    print("|---|---|---|---|---|---|---|")
    mmac = M * N * K / 1e6
    for rows in (_torch_dynamic_rows, _jax_dot_rows, _litert_float_rows):
        for title, profile, other, run, q in rows(M, K, N, rng):
            same = _same(run(), q())
            tq, tb = _best(q, repeats), _best(run, repeats)
            print(f"| {title} | `{profile}` | {other} | {mmac / tq:.1f} | {mmac / tb:.0f} | {tb / tq:.3g} | "
                  f"{same} |")


if __name__ == "__main__":
    raise SystemExit(main())
