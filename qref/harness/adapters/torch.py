"""PyTorch (CPU): quantized integer matrix products (matmul family, matmul.md §6.7).

``torch._int_mm`` (int8 x int8 -> int32, CPU: oneDNN's s8s8s32 matmul) on ``matmul_integer`` cases, with the zero
points corrected in int32 torch ops after the raw product (``y = _int_mm(A, B) - zb rowsum(A) - za colsum(B) +
K za zb``, every op in int32: wraps like the accumulator, matmul.md §3.1).

``torch.ops.quantized.linear`` (the static quantized Linear: quint8 per-tensor activations x qint8 weights per
tensor or per output channel, requantized to quint8 with the output scale and zero point) on ``qlinear_matmul``
cases, one target per engine of ``torch.backends.quantized.supported_engines`` (fbgemm, x86, onednn, qnnpack):
the weight is ``B.T`` (N, K) quantized with the case's b scales and zero points (axis 0 per channel), prepacked
with ``quantized.linear_prepack`` under the engine, the activation ``A`` quantized per tensor with a_scale and
a_zero_point, a float32 bias (matmul.md §4.1) given to ``linear_prepack``. Codes are read with ``int_repr()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import _torch_casts, _torch_observers, _torch_quant, require
from ._common import codes_as, python_c, run_each, suite_input
from .onnxruntime import matmul_element_inputs, matmul_literal

BACKEND = "torch"
DISTRIBUTIONS = ("torch",)
ENGINES = ("fbgemm", "x86", "onednn", "qnnpack")
#: engine -> the qref matmul profile that models it
ENGINE_PROFILES = {e: f"torch_{e}" for e in ENGINES}


def _scalar(v: Any) -> Any:
    """The one value of a per-tensor parameter (stored as () or (1,))."""
    return np.asarray(v).reshape(-1)[0].item()


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)  # the results do not depend on it; one thread as benchmarks/run.py
    return torch


# ---- torch._int_mm (matmul.md §6.7) ---------------------------------------------------------------------------
def _int_mm_supports(case: Case) -> str | None:
    if case.operation != "matmul_integer":
        return "torch._int_mm returns the int32 accumulator"
    p = case.params
    if (p["a_storage"], p["b_storage"]) != ("int8", "int8"):
        return f"torch._int_mm takes int8 x int8 operands, not {p['a_storage']} x {p['b_storage']}"
    if "bias" in case.inputs:
        return "torch._int_mm has no bias"
    return None


def int_mm(torch: Any, a: np.ndarray, b: np.ndarray, za: np.ndarray, zb: np.ndarray) -> np.ndarray:
    """_int_mm(A, B) with the zero points corrected in int32 torch ops (module docstring)."""
    A, B = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
    y = torch._int_mm(A, B)
    i32 = torch.int32
    za_t = torch.from_numpy(np.asarray(za, np.int32).reshape(-1, 1) if np.ndim(za) else np.asarray(za, np.int32))
    zb_t = torch.from_numpy(np.asarray(zb, np.int32))
    k = torch.tensor(A.shape[1], dtype=i32)
    y = y - zb_t * A.sum(dim=1, keepdim=True, dtype=i32) - za_t * B.sum(dim=0, dtype=i32) + k * za_t * zb_t
    return y.numpy()


def _int_mm_one(case: Case) -> Outputs:
    torch = _torch()
    ins = case.inputs
    y = int_mm(torch, ins["a"], ins["b"], ins["a_zero_point"], ins["b_zero_point"])
    return {"y": np.asarray(y).astype(np.int32)}


def _int_mm_snippet(case: Case, i: int) -> str:
    ins = matmul_element_inputs(case, i)
    return python_c(
        "import numpy as np, torch",
        f"a = torch.from_numpy({matmul_literal(ins['a'])})",
        f"b = torch.from_numpy({matmul_literal(ins['b'])})",
        f"za, zb, k = {int(np.asarray(ins['a_zero_point']).reshape(-1)[0])}, "
        f"{int(np.asarray(ins['b_zero_point']).reshape(-1)[0])}, {int(ins['a'].shape[1])}",
        "i32 = torch.int32",
        "y = torch._int_mm(a, b) - zb * a.sum(1, keepdim=True, dtype=i32) - za * b.sum(0, dtype=i32) "
        "+ torch.tensor(k * za * zb, dtype=torch.int64).to(i32)",
        "print(hex(int(y.numpy().reshape(-1).view(np.uint32)[0])))")


# ---- torch.ops.quantized.linear per engine (matmul.md §6.7) -----------------------------------------------------
def _qlinear_supports(engine: str):
    def supports(case: Case) -> str | None:
        if case.operation != "qlinear_matmul":
            return "quantized.linear requantizes its output"
        p = case.params
        if (p["a_storage"], p["b_storage"], p["output"]) != ("uint8", "int8", "uint8"):
            return ("quantized.linear takes quint8 activations x qint8 weights -> quint8, not "
                    f"{p['a_storage']} x {p['b_storage']} -> {p['output']}")
        if "bias" in case.inputs and case.inputs["bias"].dtype.kind != "f":
            return "quantized.linear's bias is float32 (matmul.md §4.1), not an int32 accumulator bias"
        if np.asarray(case.inputs["a_scale"]).size > 1:
            return "quantized activations are per tensor (a per-row a_scale has no quint8 tensor form)"
        if engine == "onednn" and np.any(np.asarray(case.inputs["b_zero_point"]) != 0):
            return "the onednn engine takes symmetric weights only (linear_prepack: weight zero point must be 0)"
        return None
    return supports


def _packed_weight(torch: Any, b: Any, b_scale: Any, b_zero_point: Any, bias: Any) -> Any:
    """linear_prepack of the (K, N) int8 weight codes, per tensor or per output channel, with an optional float32
    bias (the packed weight of quantized.linear and quantized.linear_dynamic)."""
    w = torch.from_numpy(np.ascontiguousarray(np.asarray(b).T))
    bs, zb = np.asarray(b_scale), np.asarray(b_zero_point)
    if bs.size == 1 and zb.size == 1:
        wq = torch._make_per_tensor_quantized_tensor(w, float(bs.reshape(-1)[0]), int(zb.reshape(-1)[0]))
    else:
        n = w.shape[0]
        wq = torch._make_per_channel_quantized_tensor(
            w, torch.from_numpy(np.broadcast_to(bs.astype(np.float64).reshape(-1), (n,)).copy()),
            torch.from_numpy(np.broadcast_to(zb.astype(np.int64).reshape(-1), (n,)).copy()), 0)
    return torch.ops.quantized.linear_prepack(
        wq, None if bias is None else torch.from_numpy(np.asarray(bias, np.float32).reshape(-1).copy()))


def qlinear(torch: Any, engine: str, ins: dict[str, np.ndarray], bias: np.ndarray | None = None) -> np.ndarray:
    """quantized.linear of the case's inputs under ``engine`` (module docstring): uint8 codes (M, N)."""
    torch.backends.quantized.engine = engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensor creation is deprecated (torch 2.13)
        xa = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(ins["a"])),
                                                     float(_scalar(ins["a_scale"])), int(_scalar(ins["a_zero_point"])))
        packed = _packed_weight(torch, ins["b"], ins["b_scale"], ins["b_zero_point"], bias)
        y = torch.ops.quantized.linear(xa, packed, float(_scalar(ins["y_scale"])), int(_scalar(ins["y_zero_point"])))
    return y.int_repr().numpy()


def _qlinear_run(engine: str):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        torch = _torch()

        def one(case: Case) -> Outputs:
            if engine not in torch.backends.quantized.supported_engines:
                raise Unsupported(f"torch {torch.__version__} was built without the {engine} engine")
            return {"y": qlinear(torch, engine, case.inputs, case.inputs.get("bias")).astype(np.uint8)}
        return run_each(cases, one)
    return run


def _prepacked(scale: float, zero_point: int, per_channel: bool, bias: str) -> list[str]:
    """The reproducer's lines that quantize its int8 weight ``w`` (per tensor, or the one output channel of a
    per-channel weight) and prepack it with ``bias`` for quantized.linear / linear_dynamic."""
    wq = (f"wq = torch._make_per_tensor_quantized_tensor(w, {scale!r}, {zero_point})" if not per_channel else
          f"wq = torch._make_per_channel_quantized_tensor(w, torch.tensor([{scale!r}], dtype=torch.float64), "
          f"torch.tensor([{zero_point}]), 0)")
    return [wq, f"bias = {bias}", "p = torch.ops.quantized.linear_prepack(wq, bias)"]


def _qlinear_snippet(engine: str):
    def snippet(case: Case, i: int) -> str:
        ins = matmul_element_inputs(case, i)
        bs, zb = np.asarray(ins["b_scale"]).reshape(-1), np.asarray(ins["b_zero_point"]).reshape(-1)
        # the case's weight quantization kind (fbgemm's float bias differs per tensor / per channel)
        per_channel = np.asarray(case.inputs["b_scale"]).size > 1 or np.asarray(case.inputs["b_zero_point"]).size > 1
        return python_c(
            "import numpy as np, torch",
            f"torch.backends.quantized.engine = '{engine}'",
            f"a = torch.from_numpy({matmul_literal(ins['a'])})",
            f"w = torch.from_numpy({matmul_literal(np.ascontiguousarray(np.asarray(ins['b']).T))})",
            f"xa = torch._make_per_tensor_quantized_tensor(a, {float(_scalar(ins['a_scale']))!r}, "
            f"{int(_scalar(ins['a_zero_point']))})",
            *_prepacked(float(bs[0]), int(zb[0]), per_channel,
                        f"torch.from_numpy({matmul_literal(np.asarray(ins['bias'], np.float32).reshape(-1))})"
                        if "bias" in ins else "None"),
            f"y = torch.ops.quantized.linear(xa, p, {float(_scalar(ins['y_scale']))!r}, "
            f"{int(_scalar(ins['y_zero_point']))})",
            "print(hex(int(y.int_repr().numpy().reshape(-1)[0])))")
    return snippet


# ---- torch.ops.quantized.linear_dynamic per engine (matmul.md §15) -----------------------------------------------
#: (engine, reduce_range) -> the qref matmul profile that models it (x86's linear runs fbgemm's kernels; qnnpack
#: ignores reduce_range)
DYNAMIC_PROFILES = {(e, rr): f"torch_{'fbgemm' if e == 'x86' else e}_dynamic{'' if rr and e != 'qnnpack' else '_8bit'}"
                    for e in ENGINES for rr in (True, False)}
DYNAMIC_PROFILES.update({("qnnpack", rr): "torch_qnnpack_dynamic" for rr in (True, False)})


def linear_dynamic(torch: Any, engine: str, a: np.ndarray, b: np.ndarray, b_scale: Any, b_zero_point: Any,
                   bias: np.ndarray | None, reduce_range: bool) -> np.ndarray:
    """quantized.linear_dynamic(A, linear_prepack(qint8 B.T, bias), reduce_range) under ``engine``: float32 (M, N).
    B (K, N) int8 is quantized with the case's scales and zero points, per tensor or per output channel."""
    torch.backends.quantized.engine = engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated; qnnpack warns that it ignores reduce_range
        packed = _packed_weight(torch, b, b_scale, b_zero_point, bias)
        y = torch.ops.quantized.linear_dynamic(torch.from_numpy(np.ascontiguousarray(a)), packed, reduce_range)
    return y.numpy()


def _dynamic_supports(engine: str):
    def supports(case: Case) -> str | None:
        if case.operation != "dynamic_quantize_matmul":
            return "quantized.linear_dynamic quantizes a float32 A on the fly"
        if case.params["b_storage"] != "int8":
            return f"quantized.linear_dynamic takes qint8 weights, not {case.params['b_storage']}"
        if engine == "onednn" and np.any(np.asarray(case.inputs["b_zero_point"]) != 0):
            return "the onednn engine takes symmetric weights only (linear_prepack: weight zero point must be 0)"
        return None
    return supports


def _dynamic_run(engine: str, reduce_range: bool):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        torch = _torch()

        def one(case: Case) -> Outputs:
            if engine not in torch.backends.quantized.supported_engines:
                raise Unsupported(f"torch {torch.__version__} was built without the {engine} engine")
            ins = case.inputs
            return {"y": linear_dynamic(torch, engine, ins["a"], ins["b"], ins["b_scale"], ins["b_zero_point"],
                                        ins.get("bias"), reduce_range).astype(np.float32)}
        return run_each(cases, one)
    return run


def _dynamic_snippet(engine: str, reduce_range: bool):
    def snippet(case: Case, i: int) -> str:
        n = int(i) % int(case.params["n"])
        ins = case.inputs
        bs, zb = np.asarray(ins["b_scale"]).reshape(-1), np.asarray(ins["b_zero_point"]).reshape(-1)
        per_channel = bs.size > 1 or zb.size > 1
        b = np.ascontiguousarray(np.asarray(ins["b"])[:, n:n + 1].T)
        return python_c(
            "import numpy as np, torch, warnings",
            "warnings.simplefilter('ignore')",
            f"torch.backends.quantized.engine = '{engine}'",
            f"a = torch.from_numpy({matmul_literal(np.asarray(ins['a']))})",
            f"w = torch.from_numpy({matmul_literal(b)})",
            *_prepacked(float(bs[n % bs.size]), int(zb[n % zb.size]), per_channel,
                        f"torch.tensor([{float(np.asarray(ins['bias']).reshape(-1)[n])!r}], dtype=torch.float32)"
                        if "bias" in ins else "None"),
            f"y = torch.ops.quantized.linear_dynamic(a, p, {reduce_range})",
            f"print(hex(int(y.numpy()[{int(i) // int(case.params['n'])}, 0:1].view(np.uint32)[0])))")
    return snippet


# ---- torch._scaled_mm on float8 operands (recipes family, qdq_matmul; recipes.md §2) ----------------------------
def qdq_scaled_mm(torch: Any, a: np.ndarray, b: np.ndarray, a_format: str, b_format: str,
                  a_scale: np.ndarray | None = None, b_scale: np.ndarray | None = None) -> tuple[Any, ...]:
    """The scaled-FP8 matmul in torch ops: s = amax / max per tensor (1 where amax is 0 or not finite) unless
    given (per tensor, or rowwise (M, 1) / (1, N)), q = (x / s).clamp(-max, max).to(float8),
    y = torch._scaled_mm(q_a, q_b, s_a, s_b, out_dtype=float32). Returns (q_a, q_b, s_a, s_b, y) as tensors."""
    def scale(x: Any, fmt: Any) -> Any:
        m = torch.tensor(torch.finfo(fmt).max, dtype=torch.float32)
        am = x.abs().max()
        return torch.where(torch.isfinite(am) & (am > 0), am / m, torch.ones((), dtype=torch.float32)).reshape(())

    def q(x: Any, s: Any, fmt: Any) -> Any:
        m = float(torch.finfo(fmt).max)
        return (x / s).clamp(-m, m).to(fmt)

    fa, fb = getattr(torch, a_format), getattr(torch, b_format)
    ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
    sa = scale(ta, fa) if a_scale is None else _given(torch, a_scale)
    sb = scale(tb, fb) if b_scale is None else _given(torch, b_scale)
    qa, qb = q(ta, sa, fa), q(tb, sb, fb)
    y = torch._scaled_mm(qa, qb.t().contiguous().t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    return qa, qb, sa, sb, y


def _given(torch: Any, s: np.ndarray) -> Any:
    """A given scale: per tensor as a 0-d tensor, per row (M, 1) / per column (1, N) as it is (rowwise)."""
    v = np.asarray(s, np.float32)
    return torch.from_numpy((v.reshape(()) if v.size == 1 else v).copy())


def _scaled_mm_supports(case: Case) -> str | None:
    p = case.params
    fmts = ("float8_e4m3fn", "float8_e5m2")
    if p.get("a_format") not in fmts or p.get("b_format") not in fmts:
        return "torch._scaled_mm takes float8_e4m3fn / float8_e5m2 operands"
    if p.get("compute_dtype") != "float32" or p.get("division") != "divide" or p.get("formula") != "amax_over_max":
        return "the torch scaled-FP8 matmul divides by amax / max in float32"
    return None


def _scaled_mm_one(case: Case) -> Outputs:
    torch = _torch()
    p = case.params
    qa, qb, sa, sb, y = qdq_scaled_mm(torch, case.inputs["a"], case.inputs["b"], p["a_format"], p["b_format"],
                                      case.inputs.get("a_scale"), case.inputs.get("b_scale"))
    out = {"a_codes": qa.view(torch.uint8).numpy(), "b_codes": qb.view(torch.uint8).numpy(),
           "a_scale": sa.numpy().reshape(-1), "b_scale": sb.numpy().reshape(-1), "y": y.numpy()}
    return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}


def _scaled_mm_snippet(case: Case, i: int) -> str:
    p = case.params
    out = getattr(case, "_output", "y")
    given = "a_scale" in case.inputs
    lits = [f"{n} = torch.from_numpy({suite_input(case, n)}.copy())" for n in ("a", "b", "a_scale", "b_scale")
            if n in case.inputs]
    k = {"a_codes": 0, "b_codes": 1, "a_scale": 2, "b_scale": 3, "y": 4}[out]
    view = ".view(torch.uint8)" if out.endswith("codes") else ".view(torch.int32)"
    width = "np.uint8" if out.endswith("codes") else "np.uint32"
    return python_c(
        "import numpy as np, torch",
        *lits,
        f"fa, fb = torch.{p['a_format']}, torch.{p['b_format']}",
        "def sc(x, t):",
        "    am = x.abs().max()",
        "    return torch.where(torch.isfinite(am) & (am > 0), am / torch.tensor(torch.finfo(t).max), "
        "torch.ones(()))",
        "q = lambda x, s, t: (x / s).clamp(-torch.finfo(t).max, torch.finfo(t).max).to(t)",
        ("sa, sb = [s.reshape(()) if s.numel() == 1 else s for s in (a_scale, b_scale)]" if given
         else "sa, sb = sc(a, fa), sc(b, fb)"),
        "qa, qb = q(a, sa, fa), q(b, sb, fb)",
        "y = torch._scaled_mm(qa, qb.t().contiguous().t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)",
        "r = (qa, qb, sa, sb, y)",
        f"print(hex(int(r[{k}].reshape(-1){view}.numpy().view({width})[{i}])))")


# ---- the non-VNNI kernels, selected by masking the ISA in a subprocess (matmul.md §3.2, §6.3) -------------------
#: op -> the environment that makes fbgemm / oneDNN dispatch to their AVX2 kernels (read when the library loads)
MASKS = {"int_mm": {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "fbgemm": {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"},
         "onednn": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
_WORKER = "import sys; from qref.harness.adapters.torch import masked_worker; masked_worker(sys.argv[1], sys.argv[2:])"


def masked_worker(op: str, paths: Sequence[str]) -> None:
    """Run ``op`` (int_mm or an engine) on each saved input set; write PATH.out.npy or PATH.err."""
    torch = _torch()
    for p in paths:
        try:
            d = dict(np.load(p))
            if op == "int_mm":
                y = int_mm(torch, d["a"], d["b"], d["a_zero_point"], d["b_zero_point"])
            else:
                y = qlinear(torch, op, d, d.get("bias"))
            np.save(p + ".out.npy", y)
        except Exception as exc:  # reported per case as a crash
            with open(p + ".err", "w") as f:
                f.write(f"{type(exc).__name__}: {exc}")


def _masked_run(op: str):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        import os
        import subprocess
        import sys
        import tempfile
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, **MASKS[op],
               "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        out: list[Outputs | BaseException] = []
        with tempfile.TemporaryDirectory() as td:
            paths = []
            for n, c in enumerate(cases):
                p = os.path.join(td, f"{n}.npz")
                np.savez(p, **{k: np.asarray(v) for k, v in c.inputs.items()})
                paths.append(p)
            r = subprocess.run([sys.executable, "-c", _WORKER, op, *paths], env=env, capture_output=True, text=True)
            for c, p in zip(cases, paths):
                if os.path.exists(p + ".out.npy"):
                    out.append({"y": np.load(p + ".out.npy").astype(c.expected["y"].dtype)})
                elif os.path.exists(p + ".err"):
                    out.append(RuntimeError(Path(p + ".err").read_text()))
                else:
                    out.append(RuntimeError(f"the masked worker failed: {r.stderr[-500:]}"))
        return out
    return run


def _masked_snippet(op: str, snippet: Any):
    def wrapped(case: Case, i: int) -> str:
        sets = [f"os.environ[{k!r}] = {v!r}" for k, v in MASKS[op].items()]
        return python_c("import os", *sets, snippet(case, i))
    return wrapped


#: the fitted CPU GEMM profile of torch.matmul in float32 (qref.mma.cpu_profiles; mma.md §12.1)
FLOAT_MATMUL_PROFILE = "torch-2.13.0-mkl-2024.2-avx512-sgemm"


def _float_matmul_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    """``torch.matmul`` of float32 (M, K) x (K, N) with one intra-op thread (the fitted record's thread count)."""
    torch = _torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_each(cases, lambda case: {"y": torch.matmul(
            torch.from_numpy(np.array(case.inputs["a"], np.float32)),
            torch.from_numpy(np.array(case.inputs["b"], np.float32))).numpy()})
    finally:
        torch.set_num_threads(threads)


def _float_matmul_snippet(case: Case, i: int) -> str:
    """The whole product (the kernel's order depends on M, N, K), output element i."""
    a, b = case.inputs["a"], case.inputs["b"]
    M, K = a.shape
    N = b.shape[1]
    return python_c("import numpy as np, torch", "torch.set_num_threads(1)",
                    f"a = torch.from_numpy({matmul_literal(a)}.reshape({M}, {K}).astype(np.float32))",
                    f"b = torch.from_numpy({matmul_literal(b)}.reshape({K}, {N}).astype(np.float32))",
                    f"print(hex(int(torch.matmul(a, b).numpy().reshape(-1).view(np.uint32)[{int(i)}])))")


def targets() -> list[Target]:
    require("torch", backend=BACKEND, hint="pip install torch")
    out = [Target(BACKEND, "torch.int_mm", "matmul", "torch._int_mm(A, B) (int8 x int8 -> int32, CPU); zero "
                  "points corrected in int32 torch ops after it: - zb A.sum(1) - za B.sum(0) + K za zb",
                  "torch_int_mm", ("matmul_integer",), _int_mm_supports,
                  lambda cases: run_each(cases, _int_mm_one), _int_mm_snippet)]
    for e in ENGINES:
        out.append(Target(BACKEND, f"torch.quantized_linear.{e}", "matmul",
                          f"torch.ops.quantized.linear(quint8 A, linear_prepack(qint8 B.T), y_scale, y_zero_point) "
                          f"with torch.backends.quantized.engine = '{e}' (per-tensor or per-channel weights)",
                          ENGINE_PROFILES[e], ("qlinear_matmul",), _qlinear_supports(e), _qlinear_run(e),
                          _qlinear_snippet(e)))
    out += [
        Target(BACKEND, "torch.int_mm.no_vnni", "matmul", "torch.int_mm's call in a process started with "
               "ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's kernels for CPUs without AVX-512 VNNI)", "torch_int_mm_avx2",
               ("matmul_integer",), _int_mm_supports, _masked_run("int_mm"),
               _masked_snippet("int_mm", _int_mm_snippet)),
        Target(BACKEND, "torch.quantized_linear.fbgemm.no_vnni", "matmul", "torch.quantized_linear.fbgemm's call "
               "in a process started with FBGEMM_ENABLE_INSTRUCTIONS=AVX2 (fbgemm's AVX2 u8 x s8 kernels)",
               "torch_fbgemm_avx2", ("qlinear_matmul",), _qlinear_supports("fbgemm"), _masked_run("fbgemm"),
               _masked_snippet("fbgemm", _qlinear_snippet("fbgemm"))),
        Target(BACKEND, "torch.quantized_linear.onednn.no_vnni", "matmul", "torch.quantized_linear.onednn's call "
               "in a process started with ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's AVX2 int8 kernels)",
               "torch_onednn_avx2", ("qlinear_matmul",), _qlinear_supports("onednn"), _masked_run("onednn"),
               _masked_snippet("onednn", _qlinear_snippet("onednn"))),
    ]
    for e in ENGINES:
        for rr in (True, False):
            name = f"torch.linear_dynamic.{e}" + ("" if rr else ".full_range")
            out.append(Target(BACKEND, name, "matmul", f"torch.ops.quantized.linear_dynamic(float32 A, "
                              f"linear_prepack(qint8 B.T, bias), reduce_range={rr}) with torch.backends.quantized."
                              f"engine = '{e}' (as torch.ao.nn.quantized.dynamic.Linear"
                              f"{'' if rr else ' with reduce_range=False'})", DYNAMIC_PROFILES[(e, rr)],
                              ("dynamic_quantize_matmul",), _dynamic_supports(e), _dynamic_run(e, rr),
                              _dynamic_snippet(e, rr)))
    out.append(Target(BACKEND, "torch.scaled_mm", "recipes", "s = amax / max (1 for a zero amax) unless given, q = "
                      "(x / s).clamp(-max, max).to(torch.float8_*), y = torch._scaled_mm(q_a, q_b, scale_a=s_a, "
                      "scale_b=s_b, out_dtype=torch.float32) (CPU)", None, ("qdq_matmul",), _scaled_mm_supports,
                      lambda cases: run_each(cases, _scaled_mm_one), _scaled_mm_snippet))
    out.append(Target(BACKEND, "torch.matmul_float", "matmul", "torch.matmul(float32 (M, K), float32 (K, N)) on "
                      "CPU with torch.set_num_threads(1) (MKL sgemm)", FLOAT_MATMUL_PROFILE, ("float_matmul",),
                      lambda case: None, _float_matmul_run, _float_matmul_snippet,
                      notes="held bit for bit to its fitted CPU GEMM profile (MKL's AVX-512 sgemm kernel; mma.md "
                            "§12.2); within the bound of mma.md §10.4 but other bits is drift"))
    return (out + _torch_casts.targets(BACKEND, compiled=False) + _torch_quant.targets(BACKEND, compiled=False)
            + _torch_observers.targets(BACKEND))


# ---- reproducers on a smaller input (qref.harness.findings reads script_case / script_snippet) -----------------
def script_case(target: str, case: Case, index: int, output: str) -> Case | None:
    """torch.scaled_mm on a qdq_matmul case: a and b zero except what element ``index`` of ``output`` reads and
    each operand's element of largest magnitude, which sets its per-tensor scale (recipes.md §3.3; the same
    reduction as the JAX fp8_dot targets). None for the other targets."""
    from .jax import script_case as qdq_script_case

    if target != "torch.scaled_mm":
        return None
    return qdq_script_case("jax.fp8_dot.", case, index, output)


def script_snippet(target: str, case: Case, i: int) -> str | None:
    """The scaled_mm snippet with the operands a and b written as zeros plus their non-zero elements
    (``reproducer.sparse_input``) instead of one literal of every byte."""
    from ..reproducer import sparse_input
    from ._common import array_literal

    if target != "torch.scaled_mm":
        return None
    out = []
    for ln in _scaled_mm_snippet(case, i).splitlines():
        name = ln.split(" = torch.from_numpy(", 1)[0]
        if name in ("a", "b") and ln.startswith(f"{name} = torch.from_numpy("):
            out += [*sparse_input(name, np.asarray(case.inputs[name]), array_literal),
                    f"{name} = torch.from_numpy({name}.copy())"]
        else:
            out.append(ln)
    return "\n".join(out)


__all__ = ["BACKEND", "DISTRIBUTIONS", "DYNAMIC_PROFILES", "ENGINES", "int_mm", "linear_dynamic", "qdq_scaled_mm",
           "qlinear", "script_case", "script_snippet", "targets"]
