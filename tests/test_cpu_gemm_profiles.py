"""Fitted CPU GEMM profiles (mma.md §12) held bit for bit to their libraries, where the profile's kernel is detected.

The expected record is selected by the kernel the library reports (OpenBLAS's core name) and the thread count;
on a CPU where no profile's kernel is detected the test checks only the bound of mma.md §10.4 against the exact
sum (math.fsum of float64 products, exact for float32 operands up to a final rounding) and says so in its
skip/xfail reason - nothing here holds on one machine only. The library runs in a subprocess per thread count
(OPENBLAS_NUM_THREADS is read at import). Outputs are compared as unsigned bits, NaN as a class.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qref.mma as qm
from qref.mma.cpu_profiles import PROFILES, TORCH_MKL_AVX512, TORCH_MKL_AVX512_SPR, CpuGemmProfile
from qref.profiles.cpu import host_cpu

_SCRIPT = """
import sys, numpy as np
d = np.load(sys.argv[1])
out = {f"D{i}": d[f"A{i}"] @ d[f"B{i}"] for i in range(int(d["n"]))}
np.savez(sys.argv[2], **out)
"""


def _openblas_core() -> str | None:
    import numpy

    libs = glob.glob(str(Path(numpy.__file__).parent.parent / "numpy.libs" / "libscipy_openblas*"))
    for so in libs:
        lib = ctypes.CDLL(so)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
            f = getattr(lib, name, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                return f().decode()
    return None


def _operands(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random and adversarial float32 operands: 1000 x 1000 outputs (K = 24) with a wide exponent spread,
    cancelling rows, zeros, -0, subnormals, Inf and NaN; the blocked kernel (K = 1000, 1001, 2001: every block
    split); the small kernel with tail columns (N mod 16 != 0, K >= 32 and < 32)."""
    rng = np.random.default_rng(seed)

    def spread(shape: tuple[int, int]) -> np.ndarray:
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
        x[rng.random(shape) < 0.02] = 0.0
        x[rng.random(shape) < 0.01] = -0.0
        return x.astype(np.float32)

    A, B = spread((1000, 24)), spread((24, 1000))
    A[1::7, 12:] = -A[1::7, :12]  # half of each of these rows cancels the other half (with B's rows 0..11)
    B[12:, :] = B[:12, :]
    A[5, 3], A[9, 4], A[13, 5] = np.inf, np.nan, -np.inf
    A[17, :] = np.float32(2.0**-140)  # subnormal operands
    out = [(A, B)]
    for M, N, K in ((160, 128, 1000), (96, 80, 1001), (64, 48, 2001), (64, 40, 300), (48, 17, 64), (32, 33, 31)):
        out.append((spread((M, K)), spread((K, N))))
    return out


def _library(threads: int, ops: list[tuple[np.ndarray, np.ndarray]], tmp: Path) -> list[np.ndarray]:
    src, dst = tmp / f"in{threads}.npz", tmp / f"out{threads}.npz"
    np.savez(src, n=len(ops), **{f"A{i}": a for i, (a, _) in enumerate(ops)},
             **{f"B{i}": b for i, (_, b) in enumerate(ops)})
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    subprocess.run([sys.executable, "-c", _SCRIPT, str(src), str(dst)], check=True, env=env)
    d = np.load(dst)
    return [d[f"D{i}"] for i in range(len(ops))]


def _bits(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).copy()
    u[np.isnan(x)] = 0x7FC00000
    return u


def _profile(threads: int) -> CpuGemmProfile | None:
    core = _openblas_core()
    for p in PROFILES:
        if p.library.startswith("numpy") and f"core {core} " in p.kernel + " " and threads in p.threads \
                and np.__version__ == p.version.split()[-1]:
            return p
    return None


@pytest.mark.parametrize("threads", [1, 2])
def test_numpy_matmul_equals_its_profile(threads: int, tmp_path: Path) -> None:
    ops = _operands(100 + threads)
    got = _library(threads, ops, tmp_path)
    prof = _profile(threads)
    if prof is None:
        # no fitted record for this kernel: the bound of mma.md §10.4 (any order of <= K + 2 float32 roundings)
        rec = qm.kernel(qm.KernelAccumulation())
        for (A, B), D in zip(ops[1:], got[1:]):
            bound = qm.matmul_bound(A[:16], B[:, :16], instruction=rec).bound
            for i in range(16):
                for j in range(16):
                    exact = math.fsum(float(x) * float(y) for x, y in zip(A[i], B[:, j]))
                    assert abs(float(D[i, j]) - exact) <= bound[i, j] * (1 + 2.0**-40)
        pytest.skip(f"OpenBLAS core {_openblas_core()!r} / numpy {np.__version__} at {threads} thread(s) has no "
                    "fitted profile: only the bound was checked")
    total = 0
    for (A, B), D in zip(ops, got):
        want = prof.dispatch.matmul(A, B)
        bad = np.argwhere(_bits(want) != _bits(D))
        assert bad.size == 0, (prof.name, A.shape, B.shape, bad[:5])
        total += D.size
    assert total >= 10**6


def test_profiles_name_versions_and_kernels() -> None:
    for p in PROFILES:
        assert p.version and p.kernel and p.selected_by and p.threads
        assert isinstance(p.dispatch, qm.GemmDispatch)


def _torch_profile(threads: int) -> CpuGemmProfile | None:
    """The fitted record of torch's sgemm on this CPU: MKL blocks K by the CPU it detects (the profiles'
    selected_by): the AMD record, or the Intel AVX512-FP16 / AMX one at one thread; elsewhere None."""
    torch = pytest.importorskip("torch")
    cap = torch.backends.cpu.get_cpu_capability()
    if cap != "AVX512" or "oneMKL 2024.2" not in torch.__config__.show().replace(
            "Math Kernel Library Version", "oneMKL").replace("oneAPI ", ""):
        return None
    cpu = host_cpu()
    if cpu.vendor == "AuthenticAMD":
        p = TORCH_MKL_AVX512
    elif cpu.vendor == "GenuineIntel" and cpu.has("avx512_fp16") and cpu.has("amx_tile"):
        p = TORCH_MKL_AVX512_SPR
    else:
        return None
    return p if p.version == f"torch {torch.__version__}" and threads in p.threads else None


@pytest.mark.parametrize("threads", [1, 2])
def test_torch_matmul_equals_its_profile(threads: int) -> None:
    torch = pytest.importorskip("torch")
    ops = [op for op in _operands(200 + threads) if min(op[0].shape[0], op[1].shape[1]) >= 16]
    ops = [op for op in ops if not (192 < op[0].shape[1] < 384 and op[0].shape[1] % 2)]
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = [torch.matmul(torch.from_numpy(A), torch.from_numpy(B)).numpy() for A, B in ops]
    finally:
        torch.set_num_threads(old)
    prof = _torch_profile(threads)
    if prof is None:
        rec = qm.kernel(qm.KernelAccumulation())
        for (A, B), D in zip(ops[1:], got[1:]):
            bound = qm.matmul_bound(A[:16], B[:, :16], instruction=rec).bound
            for i in range(16):
                for j in range(16):
                    exact = math.fsum(float(x) * float(y) for x, y in zip(A[i], B[:, j]))
                    assert abs(float(D[i, j]) - exact) <= bound[i, j] * (1 + 2.0**-40)
        pytest.skip(f"torch {torch.__version__} on CPU capability {torch.backends.cpu.get_cpu_capability()} "
                    f"({host_cpu().vendor} {host_cpu().model}) at {threads} thread(s) has no fitted profile: only "
                    "the bound was checked")
    total = 0
    for (A, B), D in zip(ops, got):
        bad = np.argwhere(_bits(prof.dispatch.matmul(A, B)) != _bits(D))
        assert bad.size == 0, (prof.name, A.shape, B.shape, bad[:5])
        total += D.size
    assert total >= 10**6


def test_onnxruntime_matmul_equals_its_profile() -> None:
    ort = pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import matmul_targets as T

    os.environ["QREF_ORT_THREADS"] = "1"
    try:
        rng = np.random.default_rng(1)
        ops = _operands(300) + [(rng.standard_normal((64, k)).astype(np.float32),
                                 rng.standard_normal((k, n)).astype(np.float32))
                                for k, n in ((1000, 20), (2000, 16), (700, 100), (300, 40))]
        got = [T.ort_f32(A, B) for A, B in ops]
    finally:
        del os.environ["QREF_ORT_THREADS"]
    prof = next((p for p in PROFILES if p.library.startswith("onnxruntime")
                 and ort.__version__.startswith(p.version.split()[-1])), None)
    import platform

    from qref.profiles.cpu import host_cpu

    if prof is None or platform.machine() not in ("x86_64", "AMD64") or not host_cpu().has("avx512f"):
        pytest.skip(f"onnxruntime {ort.__version__} on {platform.machine()} without AVX-512F: no fitted profile "
                    "(the record is MLAS's AVX-512 kernel; bound not rechecked here: see the numpy test)")
    total = 0
    for (A, B), D in zip(ops, got):
        bad = np.argwhere(_bits(prof.dispatch.matmul(A, B)) != _bits(D))
        assert bad.size == 0, (prof.name, A.shape, B.shape, bad[:5])
        total += D.size
    assert total >= 10**6


def test_mlx_matmul_equals_its_profile() -> None:
    mx = pytest.importorskip("mlx.core")
    import platform

    mx.set_default_device(mx.cpu)
    ops = _operands(400)
    got = [np.array(mx.matmul(mx.array(A), mx.array(B))) for A, B in ops]
    prof = next((p for p in PROFILES if p.library == "mlx" and p.version == f"mlx {mx.__version__}"), None)
    if prof is None or platform.machine() != "x86_64":
        pytest.skip(f"mlx {mx.__version__} on {platform.machine()}: no fitted profile")
    total = 0
    for (A, B), D in zip(ops, got):
        bad = np.argwhere(_bits(prof.dispatch.matmul(A, B)) != _bits(D))
        assert bad.size == 0, (prof.name, A.shape, B.shape, bad[:5])
        total += D.size
    assert total >= 10**6
