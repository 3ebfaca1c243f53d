"""qref's fitted float32 GEMM accumulation records (qref/mma/cpu_profiles.py, mma.md §12, docs/accumulation.md)
against the libraries they model: one row per library, on one thread.

    python benchmarks/accumulation.py                   # M = N = K = 256
    python benchmarks/accumulation.py --m 64 --k 512 --n 64 --repeats 7

Each row multiplies the same seeded float32 operands (standard normal times 2^e, e in [-8, 8]) with the library -
numpy.matmul (scipy-openblas sgemm, OPENBLAS_NUM_THREADS = 1), torch.matmul (oneMKL, torch.set_num_threads(1)),
onnxruntime MatMul (MLAS, intra_op_num_threads = 1), mlx.core.matmul on mx.cpu - and with qref's
``profile.dispatch.matmul(A, B)`` of the profile fitted to the kernel the library selects. A row runs only where
that kernel is detected as tests/test_cpu_gemm_profiles.py detects it (OpenBLAS core name and numpy version; torch
version, CPU capability and oneMKL version; onnxruntime version on x86-64; mlx version on x86-64) and the shape is
one the profile models; otherwise it prints "not fitted here" with the reason. Before timing the two results are
compared as uint32 bits ("same" / "DIFF"). Times are the best of ``--repeats`` runs (wall clock); MMAC/s =
million multiply-accumulates per second; ratio = qref MMAC/s / library MMAC/s. No assertion is made on timings.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from qref.errors import QrefError
from qref.mma.cpu_profiles import PROFILES, CpuGemmProfile

X86 = platform.machine() in ("x86_64", "AMD64")


def _best(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _openblas() -> tuple[str | None, int | None]:
    """(OpenBLAS core name, thread count) of numpy's scipy-openblas, or (None, None) where it is not found."""
    import numpy

    for so in glob.glob(str(Path(numpy.__file__).parent.parent / "numpy.libs" / "libscipy_openblas*")):
        lib = ctypes.CDLL(so)
        core = threads = None
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
            f = getattr(lib, name, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                core = f().decode()
                break
        for name in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads"):
            f = getattr(lib, name, None)
            if f is not None:
                f.restype = ctypes.c_int
                threads = int(f())
                break
        if core is not None:
            return core, threads
    return None, None


Row = tuple[str, str, Callable[[], np.ndarray] | None, CpuGemmProfile | None, str]


def _numpy_row(A: np.ndarray, B: np.ndarray) -> Row:
    core, threads = _openblas()
    prof = next((p for p in PROFILES if p.library.startswith("numpy") and f"core {core} " in p.kernel + " "
                 and threads in p.threads and np.__version__ == p.version.split()[-1]), None)
    why = "" if prof else (f"OpenBLAS core {core!r}, {threads} thread(s), numpy {np.__version__}: no fitted "
                           "profile")
    if prof and 1 in (A.shape[0], B.shape[1]):
        prof, why = None, "M == 1 or N == 1 (gemv) is not modelled"
    return "numpy.matmul", f"numpy {np.__version__} (OpenBLAS {core})", lambda: A @ B, prof, why


def _torch_row(A: np.ndarray, B: np.ndarray) -> Row | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    cap = torch.backends.cpu.get_cpu_capability()
    mkl = "oneMKL 2024.2" in torch.__config__.show().replace("Math Kernel Library Version", "oneMKL").replace(
        "oneAPI ", "")
    prof = next((p for p in PROFILES if p.library.startswith("torch") and p.version == f"torch {torch.__version__}"
                 and f"capability {cap}" in p.kernel and mkl), None)
    why = "" if prof else f"torch {torch.__version__}, CPU capability {cap}: no fitted profile"
    M, K = A.shape
    if prof and min(M, B.shape[1]) < 16:
        prof, why = None, "M or N < 16 takes another kernel (not modelled)"
    if prof and 192 < K < 384 and K % 2:
        prof, why = None, "an odd K in (192, 384) is not modelled"
    ta, tb = torch.from_numpy(A), torch.from_numpy(B)
    return "torch.matmul", f"torch {torch.__version__} ({cap}, 1 thread)", lambda: torch.matmul(ta, tb).numpy(), \
        prof, why


def _ort_row(A: np.ndarray, B: np.ndarray) -> Row | None:
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["D"])], "mm",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("B", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("D", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    prof = next((p for p in PROFILES if p.library.startswith("onnxruntime")
                 and ort.__version__.startswith(p.version.split()[-1])), None)
    why = "" if prof and X86 else f"onnxruntime {ort.__version__} on {platform.machine()}: no fitted profile"
    return "onnxruntime MatMul", f"onnxruntime {ort.__version__} (MLAS, 1 thread)", \
        lambda: s.run(None, {"A": A, "B": B})[0], prof if X86 else None, why


def _mlx_row(A: np.ndarray, B: np.ndarray) -> Row | None:
    try:
        import mlx.core as mx
    except ImportError:
        return None
    mx.set_default_device(mx.cpu)
    prof = next((p for p in PROFILES if p.library == "mlx" and p.version == f"mlx {mx.__version__}"), None)
    ok = prof is not None and platform.machine() == "x86_64"
    why = "" if ok else f"mlx {mx.__version__} on {platform.machine()}: no fitted profile"
    ma, mb = mx.array(A), mx.array(B)
    return "mlx.core.matmul", f"mlx {mx.__version__} (mx.cpu)", lambda: np.array(mx.matmul(ma, mb)), \
        prof if ok else None, why


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    M, K, N = args.m, args.k, args.n
    rng = np.random.default_rng(12)
    A = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-8, 9, (M, K)))).astype(np.float32)
    B = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-8, 9, (K, N)))).astype(np.float32)
    mmac = M * N * K / 1e6
    print(f"M = {M}, K = {K}, N = {N}; best of {args.repeats}; one thread")
    print("| GEMM | library | profile | qref MMAC/s | library MMAC/s | ratio | same |")
    print("|---|---|---|---|---|---|---|")
    for make in (_numpy_row, _torch_row, _ort_row, _mlx_row):
        row = make(A, B)
        if row is None:
            continue
        title, lib, run, prof, why = row
        if prof is None or run is None:
            print(f"| {title} | {lib} | - | - | - | - | not fitted here: {why} |")
            continue

        def q(prof: CpuGemmProfile = prof) -> np.ndarray:
            return prof.dispatch.matmul(A, B)
        try:
            want = q()
        except QrefError as e:  # a shape the record's dispatch does not model (e.g. a matrix-vector product)
            print(f"| {title} | {lib} | `{prof.name}` | - | - | - | not fitted here: {e} |")
            continue
        got = np.asarray(run())
        same = "same" if got.dtype == want.dtype == np.float32 and np.array_equal(got.view(np.uint32),
                                                                                   want.view(np.uint32)) else "DIFF"
        tq, tb = _best(q, args.repeats), _best(run, args.repeats)
        print(f"| {title} | {lib} | `{prof.name}` | {mmac / tq:.1f} | {mmac / tb:.0f} | {tb / tq:.3g} | {same} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
