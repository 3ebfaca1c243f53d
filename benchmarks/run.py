"""qref against ml_dtypes, MLX and bitsandbytes: one table of throughputs and ratios, measured in one run.

    python benchmarks/run.py                      # the table (docs/performance.md quotes it)
    python benchmarks/run.py --repeats 15 --rows 1024 --cols 4096
    python benchmarks/run.py --memory             # also the peak-RSS measurement (a subprocess)
    python benchmarks/run.py --only mx            # rows whose name contains "mx"
    python benchmarks/run.py --rows 256 --cols 1024 --threads 2 --compare --compare-n 1024   # small, quick

Every row times both sides on the same input array (seeded standard normal values, float32 unless the row
says otherwise), alternating qref and the other library, and keeps the best of ``--repeats`` runs of each
(wall clock: the machine is shared, the best run is the least disturbed). M/s = million input elements per
second; ratio = qref throughput / the other's, with qref on one thread ("ratio 1t") and on every core
("ratio Nt", ``--threads``, default the cores this process may use; the other side runs as configured here, on one
thread); eff = scaling efficiency, qref's all-cores throughput / (cores x its one-thread throughput); peak/in =
the peak bytes qref allocates in one call on all cores (tracemalloc) over the row's input bytes. Before timing,
each row checks that both sides give identical results (codes and scales as unsigned integers, decoded values
as bit patterns) and that qref on all cores gives the bytes of qref on one thread: the "same" column. A library
that is not installed drops its rows. Targets are issue 18's (ratios "x", or an absolute "M/s" for
calibration); "-" where the issue sets none. "of copy" = qref's throughput / numpy's ``copy()`` of the same
input array (the machine's copy bandwidth, measured in the same run; first line of the output).

What each side does:
- encode: ml_dtypes ``x.astype(fmt)`` vs ``qref.encode(x, fmt, profile="ml_dtypes")`` (codes as uint8).
- decode: ml_dtypes ``codes.view(fmt).astype(float32)`` vs ``qref.decode(codes, fmt)``.
- MLX: ``mx.quantize(x, mode=...)`` evaluated (packed uint32 words + scale bytes) vs
  ``qref.scheme(name, profile="mlx").quantize(x)`` (unpacked codes + scale bytes; the check packs them with
  ``qref.pack(q, "mlx")`` outside the timing). The MLX input array is created and evaluated before timing.
  dequantize: ``mx.dequantize(words, scales, mode=..., dtype=float32)`` vs ``scheme.dequantize(q)`` on the
  same codes and scales (float32 input quantized once).
- bitsandbytes (lookup): ``quantize_4bit`` / ``quantize_blockwise`` and their dequantize on a CPU tensor vs
  ``qref.scheme(name, block_size=B, profile=P)`` for nf4, fp4_bnb, af4, dynamic8 and every lookup profile
  (``bnb_rows``).
- recipes (matrix products, one row per pipeline, M x K x N = 32 x 256 x 32 from the input's first rows; M/s =
  million products M*K*N; "same" = every backend result within qref's rigorous bound and, for qdq, the codes
  equal): ``qref.recipes.jax_scaled_dot`` vs ``jax.jit(jax.lax.scaled_dot)`` (MXFP8 E4M3), ``qdq_matmul``
  (E4M3 x E4M3, current scaling) vs the same pipeline in JAX under jit (``jnp.clip(x / s).astype``,
  ``lax.dot_general(..., preferred_element_type=float32)``), ``mlx_quantized_matmul`` vs ``mx.quantized_matmul``
  (mxfp8) and ``mlx_qqmm`` vs ``mx.qqmm`` (mxfp8, one row, the CPU kernel's shape).
- calibration: ``qref.calibrate(x, ...)`` vs its own reference path (``_reference=True``, timed once: it is the
  readable float64 / Fraction definition) and, formula="pytorch", vs torch.ao's MinMaxObserver and
  PerChannelMinMaxObserver (``obs(t); obs.calculate_qparams()``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# one thread on every side: bitsandbytes' CPU kernels use OpenMP threads, which torch.set_num_threads does not
# control (unset, its quantize ran on one or two threads from run to run); set before any library loads OpenMP
os.environ.setdefault("OMP_NUM_THREADS", "1")

import ml_dtypes
import numpy as np

import qref
from qref.core.parallel import cores, thread_limit

BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclass
class Row:
    name: str
    source: str
    other: str
    target: float | None
    qref_fn: Callable[[], Any]
    other_fn: Callable[[], Any]
    check: Callable[[Any, Any], bool]
    n: int
    target_meps: float | None = None  # an absolute target (qref M/s) instead of a ratio
    other_repeats: int | None = None  # timed runs of the other side (a slow reference path: fewer)
    copy_fraction: bool = False  # also report qref's throughput as a fraction of numpy's copy of the input


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def ml_dtypes_rows(x32: np.ndarray) -> list[Row]:
    rows = []
    n = x32.size
    for fmt in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        mdt = np.dtype(getattr(ml_dtypes, fmt))
        rows.append(Row(f"encode {fmt}", "float32", "ml_dtypes", 3.0,
                        lambda f=fmt: qref.encode(x32, f, profile="ml_dtypes"),
                        lambda d=mdt: x32.astype(d),
                        lambda q, o: bool((q == _bits(o)).all()), n, copy_fraction=True))
    for fmt in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        mdt = np.dtype(getattr(ml_dtypes, fmt))
        codes = _bits(x32.astype(mdt)).copy()
        rows.append(Row(f"decode {fmt}", fmt, "ml_dtypes", 2.0,
                        lambda f=fmt, c=codes: qref.decode(c, f, dtype=np.float32),
                        lambda d=mdt, c=codes: c.view(d).astype(np.float32),
                        lambda q, o: bool((_bits(q) == _bits(o)).all()), n, copy_fraction=True))
    for src in (np.dtype(np.float16), BF16):
        xs = x32.astype(src)
        for fmt in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
            mdt = np.dtype(getattr(ml_dtypes, fmt))
            rows.append(Row(f"encode {fmt}", src.name, "ml_dtypes", 4.0,
                            lambda f=fmt, xs=xs: qref.encode(xs, f, profile="ml_dtypes"),
                            lambda d=mdt, xs=xs: xs.astype(d),
                            lambda q, o: bool((q == _bits(o)).all()), n, copy_fraction=True))
    return rows


def mlx_rows(x32: np.ndarray) -> list[Row]:
    try:
        import mlx.core as mx
    except ImportError:
        return []
    from qref.interop.packing import pack

    rows = []
    mx_dt = {np.dtype(np.float32): mx.float32, np.dtype(np.float16): mx.float16, BF16: mx.bfloat16}
    for src in (np.dtype(np.float32), np.dtype(np.float16), BF16):
        xs = x32.astype(src)
        xm = mx.array(x32).astype(mx_dt[src])
        mx.eval(xm)
        for name, mode, target in (("mxfp8_e4m3", "mxfp8", 1.0), ("mxfp4", "mxfp4", 5.0), ("nvfp4", "nvfp4", 5.0)):
            sch = qref.scheme(name, profile="mlx")

            def run_mlx(mode: str = mode, xm: Any = xm) -> tuple[np.ndarray, np.ndarray]:
                w, s = mx.quantize(xm, mode=mode)
                mx.eval(w, s)
                return w, s

            def check(q: Any, o: Any) -> bool:
                words, scales = np.array(o[0]), np.array(o[1])
                ok = (q.scales == scales).all() and not q.unspecified.any()
                return bool(ok and (pack(q, "mlx") == words).all())

            if mode == "mxfp8" and src == np.float32:
                target = 2.0  # issue 18: mxfp8 from float32 >= 2x MLX CPU
            rows.append(Row(f"quantize {mode} (mlx)", src.name, "MLX", target,
                            lambda sch=sch, xs=xs: sch.quantize(xs), run_mlx, check, xs.size))
    # dequantize to float32 from the same codes and scales (MLX's words are qref's codes packed)
    for name, mode in (("mxfp8_e4m3", "mxfp8"), ("mxfp4", "mxfp4"), ("nvfp4", "nvfp4")):
        sch = qref.scheme(name, profile="mlx")
        q = sch.quantize(x32)
        w, sc = mx.array(pack(q, "mlx")), mx.array(q.scales)
        mx.eval(w, sc)

        def run_mlx_dq(mode: str = mode, w: Any = w, sc: Any = sc) -> np.ndarray:
            v = mx.dequantize(w, sc, mode=mode, dtype=mx.float32)
            mx.eval(v)
            return v

        rows.append(Row(f"dequantize {mode} (mlx)", name, "MLX", None,
                        lambda sch=sch, q=q: sch.dequantize(q, dtype=np.float32), run_mlx_dq,
                        lambda a, o: bool((_bits(a) == _bits(np.array(o))).all()), x32.size))
    return rows


LOOKUP_PROFILES = ("bitsandbytes", "spec", "torchao", "openvino", "qwix")
LOOKUP_SCHEMES = (("nf4", "nf4", 64), ("fp4_bnb", "fp4", 64), ("af4", "nf4", 64), ("dynamic8", None, 4096))


def _bnb_codes(packed: Any, n: int) -> np.ndarray:
    b = packed.contiguous().numpy().view(np.uint8).reshape(-1)
    codes = np.empty(2 * b.size, dtype=np.uint8)
    codes[0::2], codes[1::2] = b >> 4, b & 0x0F
    return codes[:n]


def bnb_rows(x32: np.ndarray) -> list[Row]:
    """Lookup schemes (nf4, fp4_bnb, af4, dynamic8) under every lookup profile against bitsandbytes CPU:
    quantize vs ``quantize_4bit(t, blocksize=64, quant_type=...)`` (nf4 for nf4 and af4, fp4 for fp4_bnb) or
    ``quantize_blockwise(t, blocksize=4096)`` (dynamic8); dequantize (float32 out, qref's own codes and scales)
    vs ``dequantize_4bit`` / ``dequantize_blockwise`` of bitsandbytes' own result. qref's block sizes are the same
    (64; dynamic8 4096). "same": for the bitsandbytes profile on nf4, fp4_bnb and dynamic8, equal to the library
    (codes, absmax, dequantized values as bit patterns); for the other profiles and af4, equal to qref's own
    reference path (``_reference=True``, lut.md §3.6), computed once outside the timing."""
    try:
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import bitsandbytes.functional as F
    except ImportError:
        return []
    t = torch.from_numpy(x32.reshape(-1).copy())
    rows = []
    for name, qt, B in LOOKUP_SCHEMES:
        if qt is None:
            def run_q(B: int = B) -> Any:
                return F.quantize_blockwise(t, blocksize=B)

            packed, state = run_q()

            def run_dq(packed: Any = packed, state: Any = state) -> Any:
                return F.dequantize_blockwise(packed, state)
        else:
            def run_q(qt: str = qt, B: int = B) -> Any:
                return F.quantize_4bit(t, blocksize=B, quant_type=qt)

            packed, state = run_q()

            def run_dq(packed: Any = packed, state: Any = state) -> Any:
                return F.dequantize_4bit(packed, state)
        for prof in LOOKUP_PROFILES:
            sch = qref.scheme(name, block_size=B, profile=prof)
            if x32.size % sch.numel_multiple:  # torchao's NF4 takes multiples of 16384 elements (small --rows/--cols)
                continue
            against_bnb = prof == "bitsandbytes" and name != "af4"
            q0 = sch.quantize(x32)

            def same_q(q: Any, o: Any, sch: Any = sch, bnb: bool = against_bnb, qt: Any = qt) -> bool:
                if bnb:
                    packed, state = o
                    codes = packed.numpy().reshape(-1) if qt is None else _bnb_codes(packed, x32.size)
                    return bool((q.codes.reshape(-1) == codes).all()
                                and (_bits(q.scales) == _bits(state.absmax.numpy())).all())
                r = sch.quantize(x32, _reference=True)
                return bool((q.codes == r.codes).all() and (_bits(q.scales) == _bits(r.scales)).all()
                            and (q.unspecified == r.unspecified).all())

            def same_dq(v: Any, o: Any, sch: Any = sch, q0: Any = q0, bnb: bool = against_bnb) -> bool:
                ref = o.numpy().reshape(v.shape) if bnb else sch.dequantize(q0, _reference=True)
                return bool((_bits(v) == _bits(ref)).all())

            rows.append(Row(f"quantize {name} block {B} ({prof})", "float32", "bitsandbytes", 1.0,
                            lambda sch=sch: sch.quantize(x32), run_q, same_q, x32.size))
            rows.append(Row(f"dequantize {name} block {B} ({prof})", "float32", "bitsandbytes", 1.0,
                            lambda sch=sch, q0=q0: sch.dequantize(q0), run_dq, same_dq, x32.size))
    return rows


def _ort_session(op: str, x_type: int, y_type: int, shape: tuple[int, ...], axis: int) -> Any:
    """A one-node QuantizeLinear / DequantizeLinear session on one intra-op thread (opset 21)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    n = shape[axis]
    g = helper.make_graph(
        [helper.make_node(op, ["x", "s", "z"], ["y"], axis=axis)],
        "g", [helper.make_tensor_value_info("x", x_type, list(shape)),
              helper.make_tensor_value_info("s", TensorProto.FLOAT, [n]),
              helper.make_tensor_value_info("z", TensorProto.UINT8, [n])],
        [helper.make_tensor_value_info("y", y_type, list(shape))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def uniform_rows(x32: np.ndarray) -> list[Row]:
    """Uniform quantize per channel (axis 0), per tensor and per block (128 along axis 1), and dequantize per channel,
    on float32, every profile against issue 18's yardstick ``torch.quantize_per_channel`` (one thread); then, for
    information (target "-"), torch's own single-pass per-tensor quantize and per-channel dequantize kernels, and
    the onnxruntime profile against onnxruntime's QuantizeLinear / DequantizeLinear on one intra-op thread (target
    1x: issue 18 asks for it or for a measured reason). "same": equal to torch for the pytorch profiles and to
    onnxruntime for the onnxruntime rows; for the other profiles (whose arithmetic differs from torch's) equal to
    qref's own defining path (``quantize(x, _reference=True)`` / ``dequantize(q, _reference=True)``)."""
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*quantize_per.*deprecated")
    rows_n = x32.shape[0]
    scales = (np.abs(x32).max(axis=1) / 127).astype(np.float64)
    zps = np.zeros(rows_n, dtype=np.int64)
    block = 128
    bscales = (np.abs(x32).reshape(rows_n, -1, block).max(axis=2) / 127).astype(np.float64)
    t = torch.from_numpy(x32)
    ts, tz = torch.from_numpy(scales), torch.from_numpy(zps)

    def torch_pc() -> Any:
        return torch.quantize_per_channel(t, ts, tz, 0, torch.qint8)

    def torch_pt() -> Any:
        return torch.quantize_per_tensor(t, 0.05, 0, torch.qint8)

    def same_as_reference(sch: Any) -> Callable[[Any, Any], bool]:
        def same(q: Any, o: Any) -> bool:
            r = sch.quantize(x32, _reference=True)
            return bool((q.codes == r.codes).all() and (q.unspecified == r.unspecified).all())
        return same

    def torch_codes(q: Any, o: Any) -> bool:
        return bool((q.codes == o.int_repr().numpy()).all())

    out: list[Row] = []
    granularities = (
        ("per channel", {"scale": scales, "zero_point": zps, "axis": 0}),
        ("per tensor", {"scale": 0.05, "zero_point": 0}),
        (f"per block {block}", {"scale": bscales, "zero_point": np.zeros(bscales.shape, np.int64), "axis": 1,
                                "block_size": block}),
    )
    for label, kw in granularities:
        for prof in sorted(qref.profiles("uniform")):
            if qref.profiles("uniform")[prof].rules.input_dtypes == ():
                continue  # a dequantize-only profile (uniform.md §2.2)
            try:
                sch = qref.scheme("int8", profile=prof, **kw)
            except qref.QrefError:
                continue
            same = torch_codes if (prof, label) == ("pytorch_per_channel", "per channel") else same_as_reference(sch)
            out.append(Row(f"quantize int8 {label} ({prof})", "float32", "torch per-channel", 1.0,
                           lambda sch=sch: sch.quantize(x32), torch_pc, same, x32.size))
    for prof in sorted(qref.profiles("uniform")):
        if qref.profiles("uniform")[prof].rules.input_dtypes == ():
            continue  # a dequantize-only profile (uniform.md §2.2)
        try:
            sch = qref.scheme("int8", scale=scales, zero_point=zps, axis=0, profile=prof)
        except qref.QrefError:
            continue
        q = sch.quantize(x32)

        def dq_same(v: Any, o: Any, sch: Any = sch, q: Any = q) -> bool:
            return bool((_bits(v) == _bits(sch.dequantize(q, _reference=True))).all())
        out.append(Row(f"dequantize int8 per channel ({prof})", "int8", "torch per-channel", 1.0,
                       lambda sch=sch, q=q: sch.dequantize(q), torch_pc, dq_same, x32.size))
    pt = qref.scheme("int8", scale=0.05, zero_point=0, profile="pytorch")
    out.append(Row("quantize int8 per tensor (pytorch)", "float32", "torch", None, lambda: pt.quantize(x32), torch_pt,
                   torch_codes, x32.size))
    pc = qref.scheme("int8", scale=scales, zero_point=zps, axis=0, profile="pytorch_per_channel")
    qpc, tq = pc.quantize(x32), torch_pc()
    out.append(Row("dequantize int8 per channel (pytorch_per_channel)", "int8", "torch", None,
                   lambda: pc.dequantize(qpc), lambda: tq.dequantize(),
                   lambda v, o: bool((_bits(v) == _bits(o.numpy())).all()), x32.size))
    try:
        from onnx import TensorProto
    except ImportError:
        return out
    s32 = scales.astype(np.float32)
    z8 = np.full(rows_n, 128, np.uint8)
    ort_s = qref.scheme("uint8", scale=s32.astype(np.float64), zero_point=z8.astype(np.int64), axis=0,
                        profile="onnxruntime")
    qs = _ort_session("QuantizeLinear", TensorProto.FLOAT, TensorProto.UINT8, x32.shape, 0)
    ds = _ort_session("DequantizeLinear", TensorProto.UINT8, TensorProto.FLOAT, x32.shape, 0)
    feed = {"x": x32, "s": s32, "z": z8}
    out.append(Row("quantize uint8 per channel (onnxruntime)", "float32", "onnxruntime", 1.0,
                   lambda: ort_s.quantize(x32), lambda: qs.run(None, feed)[0],
                   lambda q, o: bool((q.codes == o).all()), x32.size))
    codes = ort_s.quantize(x32)
    dfeed = {"x": codes.codes.astype(np.uint8), "s": s32, "z": z8}
    out.append(Row("dequantize uint8 per channel (onnxruntime)", "uint8", "onnxruntime", 1.0,
                   lambda: ort_s.dequantize(codes), lambda: ds.run(None, dfeed)[0],
                   lambda v, o: bool((_bits(v) == _bits(o)).all()), x32.size))
    return out


def _calibration_same(a: Any, b: Any) -> bool:
    """Two Calibrations with the same scales (float64 bit patterns), zero points and layout."""
    return bool(a.scales.shape == b.scales.shape and (_bits(a.scales) == _bits(b.scales)).all()
                and (a.zero_points == b.zero_points).all() and a.axis == b.axis and a.block_size == b.block_size)


def calibration_rows(x32: np.ndarray) -> list[Row]:
    """qref.calibrate (fast path) against its readable reference path (``_reference=True``: float64 NaN-padded
    groups, nan-reductions, Fraction scales; timed once, it is slow) and, for the pytorch formula, against
    torch.ao's MinMaxObserver / PerChannelMinMaxObserver. Target: >= 100 M/s (issue 18)."""
    from qref.analysis.calibrate import calibrate

    n = x32.size
    rows = []
    cases = (("absmax int4 block 128", "int4", "absmax", {"block_size": 128, "axis": -1}),
             ("absmax int8 per channel", "int8", "absmax", {"axis": 0}),
             ("absmax int8 per tensor", "int8", "absmax", {}),
             ("minmax uint8 per channel", "uint8", "minmax", {"axis": 0}),
             ("minmax int4 block 128", "int4", "minmax", {"block_size": 128, "axis": -1}),
             ("percentile int8 per channel", "int8", "percentile", {"axis": 0}),
             ("percentile int4 block 128", "int4", "percentile", {"block_size": 128, "axis": -1}),
             ("percentile int8 per tensor p99", "int8", "percentile", {"percentile": 99.0}))
    for label, storage, method, kw in cases:
        rows.append(Row(f"calibrate {label}", "float32", "reference", None,
                        lambda st=storage, m=method, kw=kw: calibrate(x32, st, m, **kw),
                        lambda st=storage, m=method, kw=kw: calibrate(x32, st, m, _reference=True, **kw),
                        _calibration_same, n, target_meps=100.0, other_repeats=1))
    try:
        import torch
        from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver
    except ImportError:
        return rows
    t = torch.from_numpy(x32)

    def observe(obs_factory: Callable[[], Any]) -> Any:
        obs = obs_factory()
        obs(t)
        return obs.calculate_qparams()

    def torch_same(c: Any, o: Any) -> bool:
        s, z = o
        return bool((c.scales.astype(np.float32).reshape(-1) == s.numpy().reshape(-1)).all()
                    and (c.zero_points.reshape(-1) == z.numpy().reshape(-1)).all())

    for label, storage, method, kw, factory in (
            ("pytorch int8 per tensor symmetric", "int8", "absmax", {},
             lambda: MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)),
            ("pytorch uint8 per tensor affine", "uint8", "minmax", {},
             lambda: MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine)),
            ("pytorch int8 per channel affine", "int8", "minmax", {"axis": 0},
             lambda: PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_affine))):
        rows.append(Row(f"calibrate {label}", "float32", "torch.ao", 1.0,
                        lambda st=storage, m=method, kw=kw: calibrate(x32, st, m, formula="pytorch", **kw),
                        lambda f=factory: observe(f), torch_same, n, target_meps=100.0))
    return rows


def recipes_rows(x32: np.ndarray) -> list[Row]:
    """qref's emulations of block-scaled / FP8 matrix products against the libraries they emulate."""
    from qref.recipes import jax_scaled_dot, mlx_qqmm, mlx_quantized_matmul, qdq_matmul

    M, K, N = 32, 256, 32  # operands of their own (seeded), whatever --rows / --cols give the other rows
    g = np.random.default_rng(7)
    a = g.standard_normal((M, K)).astype(np.float32)
    b = g.standard_normal((K, N)).astype(np.float32)
    rows: list[Row] = []
    ocp = qref.scheme("mxfp8_e4m3", profile="ocp")
    qa, qb = ocp.quantize(a, axis=1), ocp.quantize(b, axis=0)
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        ops = [jnp.asarray(np.asarray(qa.codes, np.uint8).view(ml_dtypes.float8_e4m3fn)),
               jnp.asarray(np.asarray(qb.codes, np.uint8).view(ml_dtypes.float8_e4m3fn)),
               jnp.asarray(np.asarray(qa.scales, np.uint8).view(ml_dtypes.float8_e8m0fnu)),
               jnp.asarray(np.asarray(qb.scales, np.uint8).view(ml_dtypes.float8_e8m0fnu))]
        sd = jax.jit(lambda p, q, s, t: jax.lax.scaled_dot(p, q, lhs_scale=s, rhs_scale=t,
                                                           preferred_element_type=jnp.float32))

        def run_sd() -> np.ndarray:
            return np.asarray(sd(*ops).block_until_ready())

        rows.append(Row("block_matmul mxfp8_e4m3 (jax.lax.scaled_dot)", "float32", "JAX", None,
                        lambda: jax_scaled_dot(qa, qb), run_sd, lambda r, o: bool(r.within(o).all()), M * K * N))
        m = jnp.float32(448.0)

        def pipeline(x, y):
            sx = jnp.where(jnp.max(jnp.abs(x)) > 0, jnp.max(jnp.abs(x)) / m, 1.0)
            sy = jnp.where(jnp.max(jnp.abs(y)) > 0, jnp.max(jnp.abs(y)) / m, 1.0)
            px = jnp.clip(x / sx, -m, m).astype(jnp.float8_e4m3fn)
            py = jnp.clip(y / sy, -m, m).astype(jnp.float8_e4m3fn)
            acc = jax.lax.dot_general(px, py, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
            return px, py, acc * (sx * sy)

        qp = jax.jit(pipeline)
        aj, bj = jnp.asarray(a), jnp.asarray(b)

        def run_qdq() -> Any:
            return [np.asarray(v) for v in jax.block_until_ready(qp(aj, bj))]

        def qdq_same(r: Any, o: Any) -> bool:  # codes bit for bit, y within the bound
            return bool((np.asarray(r.meta["a_codes"]) == o[0].view(np.uint8)).all()
                        and (np.asarray(r.meta["b_codes"]) == o[1].view(np.uint8)).all() and r.within(o[2]).all())

        rows.append(Row("qdq_matmul e4m3 x e4m3 (jax fp8 dot_general)", "float32", "JAX", None,
                        lambda: qdq_matmul(a, b), run_qdq, qdq_same, M * K * N))
    except ImportError:
        pass
    try:
        import mlx.core as mx
    except ImportError:
        return rows
    from qref.interop.packing import pack

    mlx = qref.scheme("mxfp8_e4m3", profile="mlx")
    w = np.ascontiguousarray(b.T)  # (N, K): MLX's weight layout
    qw = mlx.quantize(w, axis=1)
    wm, sm, xm = mx.array(pack(qw, "mlx")), mx.array(np.asarray(qw.scales, np.uint8)), mx.array(a)
    mx.eval(wm, sm, xm)

    def run_qmm() -> np.ndarray:
        y = mx.quantized_matmul(xm, wm, sm, transpose=True, group_size=32, bits=8, mode="mxfp8")
        mx.eval(y)
        return np.asarray(y)

    rows.append(Row("quantized_matmul mxfp8 (mx.quantized_matmul)", "float32", "MLX", None,
                    lambda: mlx_quantized_matmul(a, qw), run_qmm, lambda r, o: bool(r.within(o).all()), M * K * N))
    x1 = a[:1]
    x1m = mx.array(x1)
    mx.eval(x1m)

    def run_qq() -> np.ndarray:
        y = mx.qqmm(x1m, wm, sm, group_size=32, bits=8, mode="mxfp8")
        mx.eval(y)
        return np.asarray(y)

    rows.append(Row("qqmm mxfp8, one row (mx.qqmm)", "float32", "MLX", None,
                    lambda: mlx_qqmm(x1, qw), run_qq, lambda r, o: bool(r.within(o).all()), K * N))
    return rows


def best_times(row: Row, repeats: int, threads: int) -> tuple[float, float, float, bool]:
    """Alternate qref on one thread, qref on ``threads`` threads and the other side, ``repeats`` times each (the
    other side ``row.other_repeats`` times when set); best wall time of each, and the identity check (qref on
    ``threads`` threads against the other side; and against qref on one thread, bytes of every array)."""
    with thread_limit(threads):
        q = row.qref_fn()  # warm-up (tables, lazy imports) and the results checked
    with thread_limit(1):
        q1 = row.qref_fn()
    o = row.other_fn()
    same = row.check(q, o) and _same_bytes(q, q1)
    tq1 = tqa = to = float("inf")
    for k in range(repeats):
        for n in (1, threads):
            with thread_limit(n):
                t0 = time.perf_counter()
                row.qref_fn()
                t = time.perf_counter() - t0
            if n == 1:
                tq1 = min(tq1, t)
            else:
                tqa = min(tqa, t)
        if row.other_repeats is None or k < row.other_repeats:
            t1 = time.perf_counter()
            row.other_fn()
            to = min(to, time.perf_counter() - t1)
    return tq1, (tq1 if threads == 1 else tqa), to, same


def _same_bytes(a: Any, b: Any) -> bool:
    """The arrays of two qref results (arrays, QArrays, tuples, dataclasses) equal byte for byte."""
    import dataclasses

    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_bytes(u, v) for u, v in zip(a, b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(_same_bytes(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
                   if isinstance(getattr(a, f.name), (np.ndarray, tuple, list)))
    return True


_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1}


def peak_over_input(row: Row, threads: int) -> float:
    """Peak bytes qref allocates in one call (tracemalloc: numpy reports its buffers to it) on ``threads``
    threads, over the row's input bytes (n elements of its source dtype; element-format codes: 1 byte)."""
    import tracemalloc

    with thread_limit(threads):
        tracemalloc.start()
        try:
            row.qref_fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak / (row.n * _ITEMSIZE.get(row.source, 1))


def copy_meps(x: np.ndarray, repeats: int) -> float:
    """numpy's copy of the input array (M elements/s, best of ``repeats``): the machine's copy bandwidth."""
    t = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.copy()
        t = min(t, time.perf_counter() - t0)
    return x.size / t / 1e6


MEMORY_SCRIPT = r"""
import resource, sys, numpy as np
import qref
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) * 1024
n = 1 << int(sys.argv[1])
qref.encode(np.zeros(16, np.float32), "float8_e4m3fn", profile="ml_dtypes")  # import-time tables
base = rss()
x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
codes = qref.encode(x, "float8_e4m3fn", profile="ml_dtypes")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(base, peak, x.nbytes, codes.nbytes)
"""


def measure_memory(log2n: int = 26) -> dict[str, float]:
    """Peak RSS of a fresh process that encodes 2^log2n float32 values to float8_e4m3fn, against input + output
    bytes. The peak includes the interpreter and imports (``baseline``, measured before the input exists)."""
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(log2n)], check=True, capture_output=True,
                         text=True).stdout.split()
    base, peak, nin, nout = (int(v) for v in out)
    io = nin + nout
    return {"elements": 1 << log2n, "input_bytes": nin, "output_bytes": nout, "baseline_rss": base,
            "peak_rss": peak, "peak_over_io": peak / io, "peak_minus_baseline_over_io": (peak - base) / io}


COMPARE_SCHEMES = ("float8_e4m3fn:axis=0", "mxfp4", "nvfp4", "nf4:block_size=64", "int4:block_size=128")


def measure_compare(n: int = 4096) -> dict[str, Any]:
    """``qref compare`` of an n x n standard normal float32 matrix over issue 18's five schemes in a fresh
    process: wall seconds (target < 15 for n = 4096) and the process's user and system CPU seconds (on a shared
    machine the wall time also holds the time other jobs took the cores), and its peak RSS (VmHWM) over the
    input's bytes, with and without the RSS of a process that only imports qref (``baseline``)."""
    import tempfile

    hwm = "import sys, runpy\nsys.argv = sys.argv[1:]\ntry:\n    {}\nfinally:\n    print(open('/proc/self/status')" \
          ".read().split('VmHWM:')[1].split()[0], file=sys.stderr)"
    base = subprocess.run([sys.executable, "-c", hwm.format("import qref.cli")], check=True, capture_output=True,
                          text=True).stderr.split()[-1]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.npy")
        np.save(path, np.random.default_rng(0).standard_normal((n, n), dtype=np.float32))
        t0 = time.perf_counter()
        t_cpu = os.times()
        run = subprocess.run([sys.executable, "-c", hwm.format("runpy.run_module('qref', run_name='__main__')"),
                              "qref", "compare", path, "-q", "--schemes", *COMPARE_SCHEMES],
                             capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode:
            raise RuntimeError(f"qref compare failed: {run.stderr[-2000:]}")
        t_after = os.times()
    peak = int(run.stderr.split()[-1]) * 1024
    nbytes = n * n * 4
    return {"name": "compare", "n": n, "schemes": list(COMPARE_SCHEMES), "wall_s": wall,
            "user_s": t_after.children_user - t_cpu.children_user,
            "sys_s": t_after.children_system - t_cpu.children_system, "peak_rss": peak,
            "baseline_rss": int(base) * 1024, "input_bytes": nbytes, "peak_over_input": peak / nbytes,
            "peak_minus_baseline_over_input": (peak - int(base) * 1024) / nbytes}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=9, help="timed runs per side (best kept); default 9")
    ap.add_argument("--only", default=None,
                    help="keep rows whose name contains this text (several: comma-separated)")
    ap.add_argument("--memory", action="store_true", help="also measure peak RSS for 2^26 elements")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    ap.add_argument("--compare", action="store_true",
                    help="also time `qref compare` of a 4096 x 4096 matrix over five schemes (target < 15 s)")
    ap.add_argument("--threads", type=int, default=cores(),
                    help=f"qref's all-cores thread count (default: the cores this process may use, {cores()})")
    ap.add_argument("--compare-n", type=int, default=4096, help="matrix size of --compare (default 4096)")
    args = ap.parse_args(argv)
    # the memory child runs first: once MLX is imported here, a child's peak RSS grows by about 140 MiB (state
    # the child inherits from this process, not qref's allocations)
    mem = measure_memory() if args.memory else None
    x32 = np.random.default_rng(0).standard_normal((args.rows, args.cols), dtype=np.float32)
    rows = ml_dtypes_rows(x32) + mlx_rows(x32) + bnb_rows(x32) + uniform_rows(x32) + calibration_rows(x32) + \
        recipes_rows(x32)
    if args.only:
        rows = [r for r in rows if any(o in r.name for o in args.only.split(","))]
    print(f"qref {qref.__version__ if hasattr(qref, '__version__') else ''} numpy {np.__version__} "
          f"ml_dtypes {ml_dtypes.__version__}; input {args.rows} x {args.cols}; best of {args.repeats}; "
          f"{os.cpu_count()} CPUs")
    copies = {"float32": copy_meps(x32, args.repeats)}
    for dt in (np.dtype(np.float16), BF16):
        copies[dt.name] = copy_meps(x32.astype(dt), args.repeats)
    for fmt in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        copies[fmt] = copy_meps(_bits(x32.astype(getattr(ml_dtypes, fmt))).copy(), args.repeats)
    print("numpy copy of the input (M/s): " + ", ".join(f"{k} {v:.0f}" for k, v in copies.items()))
    T = args.threads
    print(f"qref threads: 1 and {T} (all cores; the other side as configured here: OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}, ml_dtypes and numpy single-threaded)")
    head = f"| {'operation':44s} | {'input':13s} | {'vs':12s} | {'qref 1t M/s':>11s} | {f'qref {T}t M/s':>11s} | " \
           f"{'other M/s':>9s} | {'ratio 1t':>8s} | {f'ratio {T}t':>8s} | {'eff':>5s} | {'peak/in':>7s} | " \
           f"{'target':>10s} | {'of copy':>7s} | {'same':4s} |"
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    results = []
    for r in rows:
        tq1, tqa, to, same = best_times(r, args.repeats, T)
        mq1, mqa, mo = r.n / tq1 / 1e6, r.n / tqa / 1e6, r.n / to / 1e6
        ratio, ratio_all = mq1 / mo, mqa / mo
        eff = mqa / (T * mq1)  # scaling efficiency: all-cores throughput / (cores x one-thread throughput)
        peak = peak_over_input(r, T)
        if r.target_meps is not None:
            tgt, ok = f">= {r.target_meps:g} M/s", " " if mq1 >= r.target_meps else "!"
        else:
            tgt = "-" if r.target is None else f">= {r.target:g}x"
            ok = " " if r.target is None or ratio >= r.target else "!"
        frac = f"{mq1 / copies[r.source]:7.2f}" if r.copy_fraction and r.source in copies else f"{'-':>7s}"
        print(f"| {r.name:44s} | {r.source:13s} | {r.other:12s} | {mq1:11.1f} | {mqa:11.1f} | {mo:9.1f} | "
              f"{ratio:8.2f} | {ratio_all:8.2f} | {eff:5.2f} | {peak:7.2f} | {tgt:>10s}{ok}| {frac} | "
              f"{'yes' if same else 'NO':4s} |", flush=True)
        results.append({"name": r.name, "source": r.source, "other": r.other, "qref_meps": mq1,
                        "qref_meps_all": mqa, "threads": T, "other_meps": mo, "ratio": ratio,
                        "ratio_all": ratio_all, "efficiency": eff, "peak_over_input": peak,
                        "target": r.target, "target_meps": r.target_meps, "same": same,
                        "copy_meps": copies.get(r.source), "copy_fraction": mq1 / copies[r.source]
                        if r.copy_fraction and r.source in copies else None})
    if mem is not None:
        m = mem
        print(f"memory: encode 2^26 float32 -> float8_e4m3fn: peak RSS {m['peak_rss'] / 2**20:.0f} MiB, "
              f"input + output {(m['input_bytes'] + m['output_bytes']) / 2**20:.0f} MiB, ratio "
              f"{m['peak_over_io']:.2f} (baseline {m['baseline_rss'] / 2**20:.0f} MiB before the input; "
              f"without it {m['peak_minus_baseline_over_io']:.2f}); target <= 1.5")
        results.append({"name": "memory", **m})
    if args.compare:
        c = measure_compare(args.compare_n)
        print(f"compare: qref compare {c['n']} x {c['n']} float32, {len(c['schemes'])} schemes "
              f"({' '.join(c['schemes'])}): {c['wall_s']:.1f} s wall, {c['user_s']:.1f} s user + {c['sys_s']:.1f} s "
              f"system CPU; target < 15 s{'' if c['wall_s'] < 15 else '!'}; peak RSS {c['peak_rss'] / 2**20:.0f} "
              f"MiB = {c['peak_over_input']:.2f}x the input ({c['peak_minus_baseline_over_input']:.2f}x without the "
              f"{c['baseline_rss'] / 2**20:.0f} MiB of a process that only imports qref); target < 8x")
        results.append(c)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
