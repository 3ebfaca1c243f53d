"""Integer matrix products on XLA / StableHLO / IREE / qwix (matmul.md §5.5, §6.3-§6.5), bit for bit against the
real backends: expected values from Python ints (sums modulo 2^32) and from an independent transcription of
StablehloLegalizeQuantToMath's dot_general lowering (Python ints and numpy float32 scalars, written from the pass
source, not from qref), and qref's ``stablehlo_lowering`` / ``xla_cpu`` profiles against the same values."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from qref.recipes import qmatmul as qm

ROOT = Path(__file__).resolve().parents[1]
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}
NP = {"int8": np.int8, "uint8": np.uint8}


def wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def python_accumulator(a: np.ndarray, b: np.ndarray, za: int, zb: np.ndarray | int) -> np.ndarray:
    """sum_k (a - za)(b - zb) with Python ints, modulo 2^32."""
    M, K = a.shape
    N = b.shape[1]
    zbv = np.broadcast_to(np.asarray(zb), (N,))
    out = np.zeros((M, N), np.int64)
    for m in range(M):
        for n in range(N):
            s = sum((int(a[m, k]) - za) * (int(b[k, n]) - int(zbv[n])) for k in range(K))
            out[m, n] = wrap32(s)
    return out


# ---- an independent transcription of the pass (matchAndRewriteDotLikeOp, calculateZeroPointOffset) ---------
def signless(v: int, bits: int = 8) -> int:
    """A storage value's bits read as a signed integer (the pass converts quant storage to signless i8)."""
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def lowering(a: np.ndarray, b: np.ndarray, sa: float, za: int, sb: float, sy: float, zy: int, out_bits: int,
             out_signed: bool) -> np.ndarray:
    """dot_general on per-tensor quantized operands (rhs zero point 0) as the pass lowers it (int64 numpy for the
    integer sums, numpy float32 for the f32 ops)."""
    sgn = np.vectorize(signless, otypes=[np.int64])
    A, B = sgn(a.astype(np.int64)), sgn(b.astype(np.int64))
    w32 = np.vectorize(wrap32, otypes=[np.int64])
    raw = w32(A @ B)
    off = w32(za * B.sum(axis=0, keepdims=True)) * np.ones_like(raw)  # zp_l * sum(rhs); zp_r = 0
    combined = float(sa) * float(sb) / float(sy)  # double
    if abs(combined - 1.0) > 0.001:
        c32 = np.float32(combined)
        raw = np.trunc(raw.astype(np.float32) * c32).astype(np.int64)  # float32 product, convert truncates
        off = np.trunc(off.astype(np.float32) * c32).astype(np.int64)
    y = w32(raw + w32(zy - off)) & ((1 << out_bits) - 1)
    return np.vectorize(lambda v: signless(int(v), out_bits), otypes=[np.int64])(y) if out_signed else y


def qref_lowering(a, b, sa, za, sb, sy, zy, storage, output):
    pipe = qm.QuantizedMatmul(qm.IntOperand(storage), qm.IntOperand(storage), output,
                              qm.matmul_rules("stablehlo_lowering"))
    return qm.quantized_matmul(a, b, a_scale=np.float32(sa), a_zero_point=za, b_scale=np.float32(sb),
                               b_zero_point=0, y_scale=np.float32(sy), y_zero_point=zy, pipeline=pipe).values


def _setups():
    """(storage, a, b, a_scale, a_zero_point, b_scale, y_scale, y_zero_point): scales of every regime (m = 2^-k
    ties truncated, m within 0.001 of 1 unscaled, m > 1, non-dyadic m), zero points at the ends, results beyond
    the storage range (wrapped)."""
    rng = np.random.default_rng(7)
    out = []
    scales = [(0.5, 1.0, 1.0), (0.25, 0.5, 1.0), (1.0005, 1.0, 1.0), (0.9991, 1.0, 1.0), (3.0, 5.0, 1.0),
              (0.0173, 0.011, 0.0931), (0.1, 0.1, 0.3), (1.0, 1.0, 1.0)]
    for storage in ("int8", "uint8"):
        lo, hi = RANGE[storage]
        for j, (sa, sb, sy) in enumerate(scales):
            a = rng.integers(lo, hi + 1, (48, 97)).astype(NP[storage])
            b = rng.integers(lo, hi + 1, (97, 40)).astype(NP[storage])
            if j % 2:
                a[0], b[:, 0] = hi, lo
            za = int(rng.integers(lo, hi + 1)) if j != 2 else lo
            zy = int(rng.integers(lo, hi + 1))
            out.append((storage, a, b, float(np.float32(sa)), za, float(np.float32(sb)), float(np.float32(sy)), zy))
    return out


SETUPS = _setups()


def _qt(storage: str, s: float, z: int) -> str:
    return f"!quant.uniform<{'i8' if storage == 'int8' else 'u8'}:f32, {s!r}:{z}>"


def _module(a, b, qa, qb, qy, st, yt, args: bool) -> str:
    M, K = a.shape
    N = b.shape[1]
    head = (f"func.func @main(%a: tensor<{M}x{K}x{st}>, %b: tensor<{K}x{N}x{st}>) -> tensor<{M}x{N}x{yt}>" if args
            else f"func.func @main() -> tensor<{M}x{N}x{yt}>")
    consts = "" if args else (
        f'%a = stablehlo.constant dense<"0x{a.tobytes().hex().upper()}"> : tensor<{M}x{K}x{st}>\n'
        f'%b = stablehlo.constant dense<"0x{b.tobytes().hex().upper()}"> : tensor<{K}x{N}x{st}>\n')
    return (f"module {{ {head} {{\n{consts}"
            f"%qa = stablehlo.bitcast_convert %a : (tensor<{M}x{K}x{st}>) -> tensor<{M}x{K}x{qa}>\n"
            f"%qb = stablehlo.bitcast_convert %b : (tensor<{K}x{N}x{st}>) -> tensor<{K}x{N}x{qb}>\n"
            f"%y = stablehlo.dot_general %qa, %qb, contracting_dims = [1] x [0] : (tensor<{M}x{K}x{qa}>, "
            f"tensor<{K}x{N}x{qb}>) -> tensor<{M}x{N}x{qy}>\n"
            f"%r = stablehlo.bitcast_convert %y : (tensor<{M}x{N}x{qy}>) -> tensor<{M}x{N}x{yt}>\n"
            f"return %r : tensor<{M}x{N}x{yt}> }} }}")


def interpreter(text: str) -> np.ndarray:
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    errors: list[str] = []
    ctx.attach_diagnostic_handler(lambda d: errors.append(str(d.message)) or True)
    with ctx:
        try:
            return np.array(_stablehlo.eval_module(ir.Module.parse(text), [])[0])
        except Exception as exc:
            raise RuntimeError("; ".join(errors) or str(exc)) from None


def iree(text: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import iree.compiler as ic
    import iree.runtime as rt

    vmfb = ic.compile_str(text, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=generic"])
    return np.asarray(rt.load_vm_flatbuffer(vmfb, driver="local-task").main(a, b))


def _backends():
    out = []
    try:
        import torch_mlir._mlir_libs._stablehlo  # noqa: F401

        out.append("interpreter")
    except ImportError:
        pass
    try:
        import iree.compiler
        import iree.runtime  # noqa: F401

        out.append("iree")
    except ImportError:
        pass
    return out


def _run(backend: str, a, b, qa, qb, qy, st, yt) -> np.ndarray:
    if backend == "interpreter":
        return interpreter(_module(a, b, qa, qb, qy, st, yt, args=False))
    return iree(_module(a, b, qa, qb, qy, st, yt, args=True), a, b)


def test_transcription_on_hand_values() -> None:
    """The transcription on values worked by hand (matmul.md §5.5): m = 1/2 truncates 3.5 to 3 and -3.5 to -3;
    a zero point's offset is scaled and truncated on its own; u8 200 reads as -56; 150 wraps to -106 in int8."""
    a = np.array([[7], [-7], [4]], np.int8)
    b = np.array([[1]], np.int8)
    np.testing.assert_array_equal(lowering(a, b, 0.5, 0, 1.0, 1.0, 0, 8, True), [[3], [-3], [2]])
    np.testing.assert_array_equal(lowering(a[2:], b, 0.5, 3, 1.0, 1.0, 5, 8, True), [[6]])  # 2 + 5 - 1
    u = np.array([[200]], np.uint8)
    np.testing.assert_array_equal(lowering(u, np.array([[1]], np.uint8), 1.0, 0, 1.0, 1.0, 0, 8, False), [[200]])
    np.testing.assert_array_equal(lowering(u, np.array([[2]], np.uint8), 1.0, 0, 1.0, 1.0, 0, 8, False), [[144]])
    np.testing.assert_array_equal(lowering(np.array([[100]], np.int8), np.array([[3]], np.int8), 0.5, 0, 1.0,
                                           1.0, 0, 8, True), [[-106]])


def test_profile_equals_the_transcription() -> None:
    for storage, a, b, sa, za, sb, sy, zy in SETUPS:
        want = lowering(a, b, sa, za, sb, sy, zy, 8, storage == "int8")
        got = qref_lowering(a, b, sa, za, sb, sy, zy, storage, storage)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["interpreter", "iree"])
def test_stablehlo_dot_general_requantized_bit_for_bit(backend: str) -> None:
    if backend not in _backends():
        pytest.skip(f"{backend} is not installed")
    compared = 0
    for storage, a, b, sa, za, sb, sy, zy in SETUPS:
        st = "i8" if storage == "int8" else "ui8"
        got = _run(backend, a, b, _qt(storage, sa, za), _qt(storage, sb, 0), _qt(storage, sy, zy), st, st)
        want = lowering(a, b, sa, za, sb, sy, zy, 8, storage == "int8")
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"{storage} {sa} {sb} {sy}")
        compared += want.size
    assert compared == len(SETUPS) * 48 * 40


@pytest.mark.parametrize("backend", ["interpreter", "iree"])
def test_stablehlo_dot_general_i32_accumulator(backend: str) -> None:
    """Scales 1 and an i32 result: the accumulator sum (a - za) b, u8 storage read as signed (§3.3), int32 wrap
    (K = 66,000 products of (127 + 128) x -128 leave int32)."""
    if backend not in _backends():
        pytest.skip(f"{backend} is not installed")
    K = 66000
    a = np.full((2, K), 127, np.int8)
    a[1] = np.resize(np.array([-128, 5, 127], np.int8), K)
    b = np.full((K, 2), -128, np.int8)
    b[:, 1] = np.resize(np.array([3, -128], np.int8), K)
    for storage, za in (("int8", -128), ("uint8", 200)):
        aa, bb = (a, b) if storage == "int8" else (a.view(np.uint8), b.view(np.uint8))
        st = "i8" if storage == "int8" else "ui8"
        got = _run(backend, aa, bb, _qt(storage, 1.0, za), _qt(storage, 1.0, 0),
                   "!quant.uniform<i32:f32, 1.0:0>", st, "i32")
        want = np.array([[wrap32(sum(signless(int(aa[m, k])) * signless(int(bb[k, n])) for k in range(K))
                                 - za * sum(signless(int(bb[k, n])) for k in range(K))) for n in range(2)]
                         for m in range(2)])
        np.testing.assert_array_equal(got, want)
        pipe = qm.QuantizedMatmul(qm.IntOperand(storage), qm.IntOperand(storage), None,
                                  qm.matmul_rules("stablehlo_lowering", method="none"))
        np.testing.assert_array_equal(qm.quantized_matmul(aa, bb, a_zero_point=za, pipeline=pipe).values, want)
        if storage == "int8":
            assert want[0, 0] != (127 - za) * -128 * K  # the sum left int32 and wrapped


@pytest.mark.parametrize("backend", ["interpreter", "iree"])
def test_stablehlo_per_axis_rhs(backend: str) -> None:
    """Per-axis rhs (not in the suite, matmul.md §6.3): with a per-axis result every column is scaled by
    scale_r[0] / scale_res[0] and gets zero point 0; with a per-tensor result the op is decomposed into
    dequantize, dot, quantize (clamped)."""
    if backend not in _backends():
        pytest.skip(f"{backend} is not installed")
    a = np.array([[7, -7, 3, 1], [100, 100, 100, -5]], np.int8)
    b = np.array([[1, -1], [0, 0], [0, 0], [0, 0]], np.int8)
    qa = "!quant.uniform<i8:f32, 1.0:0>"
    qb = "!quant.uniform<i8:f32:1, {1.0:0, 2.0:0}>"
    got = _run(backend, a, b, qa, qb, "!quant.uniform<i8:f32:1, {1.0:5, 2.0:5}>", "i8", "i8")
    np.testing.assert_array_equal(got, [[7, -7], [100, -100]])  # column 1 not scaled by 2, zero points dropped
    got = _run(backend, a, b, qa, qb, "!quant.uniform<i8:f32, 1.0:0>", "i8", "i8")
    np.testing.assert_array_equal(got, [[7, -14], [100, -128]])  # spec: 2 * -100 clamps


def test_stablehlo_verifier_refuses_rhs_zero_points() -> None:
    if "interpreter" not in _backends():
        pytest.skip("torch-mlir is not installed")
    a = np.zeros((1, 2), np.int8)
    with pytest.raises(RuntimeError, match="Zero point of rhs should be 0"):
        _run("interpreter", a, a.T.copy(), _qt("int8", 1.0, 0), _qt("int8", 1.0, 3), _qt("int8", 1.0, 0), "i8", "i8")


# ---- XLA:CPU -----------------------------------------------------------------------------------------------
_JAX_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, jax
    jax.config.update("jax_platforms", "cpu")
    from qref.harness.adapters.jax import mm_function
    d = np.load(sys.argv[1])
    f = mm_function()
    out = {}
    args = [d["a"], d["b"], d["za"], d["zb"]]
    out["eager"] = np.asarray(f(*args))
    out["jit"] = np.asarray(jax.jit(f)(*args))
    np.savez(sys.argv[2], **out)
""")


def _jax_inputs():
    rng = np.random.default_rng(3)
    K = 33100
    cases = []
    for ca, cb in (("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8"), ("int8", "uint8")):
        (la, ha), (lb, hb) = RANGE[ca], RANGE[cb]
        a = rng.integers(la, ha + 1, (3, K)).astype(NP[ca])
        a[0] = la
        b = rng.integers(lb, hb + 1, (K, 4)).astype(NP[cb])
        b[:, 0] = hb
        zb = rng.integers(lb, hb + 1, 4).astype(NP[cb])
        zb[0] = lb
        cases.append((a, b, np.array(ha, NP[ca]), zb))
    return cases


@pytest.mark.parametrize("isa", ["native", "AVX2"])
def test_jax_dot_general_int32_wraps(isa: str, tmp_path: Path) -> None:
    """jax.lax.dot_general(int8 / uint8, preferred_element_type=int32) + int32 zero-point corrections, eager and
    jitted, in a fresh process (native ISA, or XLA_FLAGS=--xla_cpu_max_isa=AVX2): the exact sum modulo 2^32 on
    K = 33,100 products of up to 65,025 (every row leaves int32)."""
    pytest.importorskip("jax", reason="jax is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    if isa == "AVX2":
        env["XLA_FLAGS"] = "--xla_cpu_max_isa=AVX2"
    for i, (a, b, za, zb) in enumerate(_jax_inputs()):
        src, dst = tmp_path / f"in{i}.npz", tmp_path / f"out{i}.npz"
        np.savez(src, a=a, b=b, za=za, zb=zb)
        subprocess.run([sys.executable, "-c", _JAX_SCRIPT, str(src), str(dst)], env=env, check=True, timeout=300)
        got = np.load(dst)
        want = python_accumulator(a, b, int(za), zb.astype(np.int64))
        exact = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
        assert np.any(exact != want)  # the sums leave int32
        for mode in ("eager", "jit"):
            assert got[mode].dtype == np.int32
            np.testing.assert_array_equal(got[mode], want, err_msg=f"{mode} {a.dtype} x {b.dtype}")
        pipe = qm.QuantizedMatmul(qm.IntOperand(a.dtype.name), qm.IntOperand(b.dtype.name), None,
                                  qm.matmul_rules("xla_cpu"))
        np.testing.assert_array_equal(qm.quantized_matmul(a, b, a_zero_point=za, b_zero_point=zb,
                                                          pipeline=pipe).values, want)


# ---- qwix: dequantized float32 out (matmul.md §6.5) ---------------------------------------------------------
def test_qwix_int8_dot_general_formula() -> None:
    pytest.importorskip("qwix", reason="qwix is not installed")
    import jax
    import jax.numpy as jnp
    from qwix._src.core import dot_general as qdg
    from qwix._src.core import qarray

    jax.config.update("jax_platforms", "cpu")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (8, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 5)).astype(np.int8)
    sa = (rng.uniform(1, 2, (8, 1)) * 2.0**-7).astype(np.float32)
    sb = (rng.uniform(1, 2, (1, 5)) * 2.0**-9).astype(np.float32)
    za = rng.integers(-128, 128, (8, 1)).astype(np.int8)
    A = qarray.QArray(qvalue=jnp.asarray(a), scale=jnp.asarray(sa), zero_point=jnp.asarray(za), qtype=jnp.int8)
    B = qarray.QArray(qvalue=jnp.asarray(b), scale=jnp.asarray(sb), zero_point=None, qtype=jnp.int8)
    y = np.asarray(jax.jit(lambda p, q: qdg.dot_general(p, q, (((1,), (0,)), ((), ()))))(A, B))
    acc = (a.astype(np.int64) - za) @ b.astype(np.int64)  # |acc| < 2^24 * 2: exact in int32
    want = (acc.astype(np.float32) * sa).astype(np.float32) * sb
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.view(np.uint32), want.astype(np.float32).view(np.uint32))


# ---- the harness targets on the suite's cases ---------------------------------------------------------------
@pytest.mark.parametrize("backend", ["stablehlo", "iree", "jax"])
def test_harness_targets_pass_their_profile(backend: str) -> None:
    from qref.conformance.cases.matmul import build_cases
    from qref.harness.adapters import load_targets
    from qref.harness.families import matmul as fam
    from qref.harness.model import BackendMissing, Unsupported, bits

    try:
        targets = [t for t in load_targets(backend) if t.family == "matmul"]
    except BackendMissing as exc:
        pytest.skip(str(exc))
    wanted = {"matmul/matmul_integer/uint8xint8/pair_saturation/exact",
              "matmul/matmul_integer/uint8xuint8/zero_points_low/exact",
              "matmul/qlinear_matmul/int8xint8_int8/ties_m2e-1_zy_odd/exact",
              "matmul/qlinear_matmul/uint8xint8_uint8/multiplier_above_one/exact",
              "matmul/qlinear_matmul/int8xint8_int8/multiplier_near_one_above/exact",
              "matmul/matmul_integer/int8xint8/k_odd/exact"}
    cases = [c for c in build_cases(False) if c.id in wanted]
    assert len(cases) == len(wanted)
    ran = 0
    for t in targets:
        mine = [c for c in cases if c.operation in t.operations and t.supports(c) is None]
        for c, got in zip(mine, t.run(mine)):
            if isinstance(got, Unsupported) and "Zero point of rhs should be 0" in str(got):
                continue  # dot_general C15 (matmul.md §6.3)
            assert not isinstance(got, BaseException), f"{t.name} {c.id}: {got}"
            want = fam.expectation(c, t.profile).outputs["y"]
            np.testing.assert_array_equal(bits(got["y"]), bits(want), err_msg=f"{t.name} {c.id}")
            ran += 1
    assert ran >= 5
