"""torchao (CPU, on torch): ``torchao.quantization.to_nf4`` (``NF4Tensor``) and its dequantization
``NF4Tensor.to(dtype)``, lookup profile ``torchao`` (lut.md §6.3); and ``torchao.prototype.mx_formats`` ``to_mx`` /
``to_dtype`` with ScaleCalculationMode FLOOR and RCEIL, block profiles ``torchao_floor`` / ``torchao_rceil``
(block.md §8; mxfp4 codes two a byte, the first in the low nibble; fp6 codes one a byte).

``to_nf4(x, block_size, scaler_block_size=256)`` flattens x row-major into blocks, always double quantizes the
block scales (int8 per 256 scales) and keeps only the double-quantized scales: the outputs compared are the codes
(read from ``quantized_data``, two per byte, the first in the high nibble) and, for cases that expect them,
``quantized_scalers`` (dq_codes, int8), ``quantization_factor`` (dq_scales) and ``scaler_mean`` (dq_offset).
Dequantization builds an ``NF4Tensor`` from the case's codes and double-quantized scales (with the NF4 table of a
``to_nf4`` call in the same dtype) and calls ``.to(dtype)``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...interop.packing import unpack
from ..families.lookup import dq_kind, effective_axis
from ..model import Outputs, Target, Unsupported
from ..reproducer import sparse_input
from . import require
from ._common import (
    array_literal,
    codes_as,
    from_torch,
    per_case,
    python_c,
    raise_unsupported,
    row_snippet,
    suite_input,
    to_torch,
)

BACKEND = "torchao"
DISTRIBUTIONS = ("torchao", "torch")
SCALER_BLOCK = 256
DTYPES = ("float32", "float16", "bfloat16")


def _tq() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchao.quantization as tq
    return tq


def _supports(case: Case) -> str | None:
    name = case.scheme["name"]
    if name != "nf4":
        return f"torchao's to_nf4 quantizes to NF4 only, not {name}"
    if effective_axis(case) is not None:
        return "to_nf4 blocks the flattened tensor (row-major), not along an axis"
    kind = dq_kind(case)
    if kind not in (None, "int8_absmax"):
        return f"to_nf4 double quantizes with int8 absmax per {SCALER_BLOCK} scales, not bitsandbytes' {kind} map"
    B = int(case.scheme["block_size"])
    if case.operation == "lookup_quantize":
        x = case.inputs["x"]
        if x.dtype.name not in DTYPES:
            return f"to_nf4 takes float32/float16/bfloat16 tensors, not {x.dtype.name}"
        if x.size % (B * SCALER_BLOCK):
            return (f"to_nf4 needs the element count to be a multiple of block_size * {SCALER_BLOCK} (its scales are "
                    "always double quantized in groups of 256)")
        if x.ndim > 2:
            return "to_nf4 takes tensors of at most two dimensions"
        return None
    if "dq_codes" not in case.inputs:
        return "an NF4Tensor holds double-quantized block scales only; float block scales cannot be given"
    src = str(case.params.get("input_dtype"))
    if src not in DTYPES:
        return f"NF4Tensor computes in the input dtype; {src} is not a torch dtype of to_nf4"
    return None


def _nf4_table(B: int, dtype: Any) -> Any:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _tq().to_nf4(torch.zeros(B * SCALER_BLOCK, dtype=dtype), block_size=B,
                            scaler_block_size=SCALER_BLOCK).nf4


def _one(case: Case) -> Outputs:
    raise_unsupported(_supports(case))
    import torch

    tq = _tq()
    B = int(case.scheme["block_size"])
    out: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.operation == "lookup_quantize":
            x = case.inputs["x"]
            nf = tq.to_nf4(to_torch(x).reshape(x.shape), block_size=B, scaler_block_size=SCALER_BLOCK)
            b = nf.quantized_data.numpy().reshape(-1)
            out["codes"] = unpack(b, "nibble_high_first", bits=4, count=x.size).reshape(x.shape)
            out["dq_codes"] = nf.quantized_scalers.numpy().view(np.uint8)
            out["dq_scales"] = nf.quantization_factor.float().numpy()
            out["dq_offset"] = nf.scaler_mean.float().numpy().astype(np.float32).reshape(1)
        else:
            from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import NF4Tensor, SubclassTensorArgs

            dt = {"float32": torch.float32, "float16": torch.float16,
                  "bfloat16": torch.bfloat16}[str(case.params["input_dtype"])]
            odt = {"float32": torch.float32, "float16": torch.float16,
                   "bfloat16": torch.bfloat16}[case.expected["y"].dtype.name]
            codes = case.inputs["codes"].reshape(-1).astype(np.uint8)
            n = codes.size
            packed = torch.from_numpy((codes[0::2] << 4) | codes[1::2])
            meta = SubclassTensorArgs(torch.Size([n]), (1,), 0, dt, torch.device("cpu"), False)
            scalers = torch.from_numpy(case.inputs["dq_codes"].view(np.int8).copy())
            factor = torch.from_numpy(case.inputs["dq_scales"].astype(np.float32).copy()).to(dt)
            mean = torch.tensor(float(case.inputs["dq_offset"][0]), dtype=torch.float32).to(dt)
            nf = NF4Tensor(meta, B, n // B, SCALER_BLOCK, scalers, factor, mean, packed, _nf4_table(B, dt))
            out["y"] = from_torch(nf.to(odt)).reshape(-1)
    return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}


_HEAD = ("import warnings, numpy as np, torch; warnings.simplefilter('ignore'); "
         "import torchao.quantization as tq; import ml_dtypes")


def _snippet(case: Case, i: int) -> str:
    B = int(case.scheme["block_size"])
    out = getattr(case, "_output", "codes")
    if case.operation == "lookup_quantize":
        x = case.inputs["x"]
        load = sparse_input("x", x, array_literal)  # a reduced input (script_case): mostly zeros
        t = ("torch.from_numpy(x.reshape(-1).view(np.uint16).copy()).view(torch.bfloat16)"
             if x.dtype.name == "bfloat16" else "torch.from_numpy(x.reshape(-1).copy())")
        call = f"nf = tq.to_nf4({t}, block_size={B}, scaler_block_size={SCALER_BLOCK})"
        if out == "codes":
            shift = "b >> 4" if i % 2 == 0 else "b & 15"
            return python_c(_HEAD, *load, call, f"b = int(nf.quantized_data.reshape(-1)[{i // 2}])",
                            f"print(hex({shift}))")
        pick = {"dq_codes": "nf.quantized_scalers.view(torch.uint8)", "dq_scales": "nf.quantization_factor.float()",
                "dq_offset": "nf.scaler_mean.float().reshape(1)"}[out]
        return python_c(_HEAD, *load, call,
                        f"a = {pick}.numpy(); print(hex(int(a.view(f'u{{a.dtype.itemsize}}')[{i}])))")
    dt = str(case.params["input_dtype"])
    odt = case.expected["y"].dtype.name
    return python_c(
        _HEAD, "from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import NF4Tensor, SubclassTensorArgs",
        *sparse_input("c", case.inputs["codes"], array_literal), "c = c.astype(np.uint8); n = c.size",
        f"m = SubclassTensorArgs(torch.Size([n]), (1,), 0, torch.{dt}, torch.device('cpu'), False)",
        f"s = torch.from_numpy({suite_input(case, 'dq_codes')}.view(np.int8).copy())",
        f"f = torch.from_numpy({suite_input(case, 'dq_scales')}.astype(np.float32).copy()).to(torch.{dt})",
        f"mu = torch.tensor(float({suite_input(case, 'dq_offset')}[0])).to(torch.{dt})",
        f"t = tq.to_nf4(torch.zeros({B * SCALER_BLOCK}, dtype=torch.{dt}), block_size={B}, "
        f"scaler_block_size={SCALER_BLOCK}).nf4",
        f"nf = NF4Tensor(m, {B}, n // {B}, {SCALER_BLOCK}, s, f, mu, torch.from_numpy((c[0::2] << 4) | c[1::2]), t)",
        f"y = nf.to(torch.{odt}); y = y.view(torch.int16) if y.dtype == torch.bfloat16 else y",
        f"a = y.numpy(); print(hex(int(a.view(f'u{{a.dtype.itemsize}}').reshape(-1)[{i}])))")


def script_case(target: str, case: Case, index: int, output: str) -> Case | None:
    """A smaller input for the reproducer of element ``index`` of ``output`` of a to_nf4 case too large to write
    out (to_nf4 takes at least block_size * 256 elements): quantize keeps the block holding the element and, of
    every other block, only its element of largest magnitude (a NaN where it has one) at the block's start, so
    that every block's absmax, hence the double-quantized scales (lut.md §3.2, §5), are those of the case; the
    dequantization keeps the codes of the element's block (the others 0) and every scale. None for the other
    targets."""
    import copy

    if target != "torchao.to_nf4":
        return None
    B = int(case.scheme["block_size"])
    if case.operation == "lookup_quantize":
        x = case.inputs["x"]
        blocks = np.ascontiguousarray(x).reshape(-1, B)
        with np.errstate(invalid="ignore"):
            mag = np.abs(blocks.astype(np.float64))
            pick = np.where(np.isnan(mag).any(1), np.argmax(np.isnan(mag), 1), np.argmax(np.nan_to_num(mag, nan=0), 1))
        red = np.zeros_like(blocks)
        red[:, 0] = blocks[np.arange(blocks.shape[0]), pick]
        name = "x"
        what = "blocks other than the element's reduced to their absmax element"
    else:
        blocks = np.ascontiguousarray(case.inputs["codes"]).reshape(-1, B)
        red = np.zeros_like(blocks)
        name = "codes"
        what = "the codes of the element's block, the other codes 0, every double-quantized scale"
    if output in ("codes", "y"):
        k = index // B
        red[k] = blocks[k]
        what += f"; block {k} as in the case"
    c = copy.copy(case)
    object.__setattr__(c, "inputs", {**case.inputs, name: red.reshape(case.inputs[name].shape)})
    object.__setattr__(c, "_what", what)
    return c


# ---- block: torchao.prototype.mx_formats to_mx / to_dtype ---------------------------------------------------
MX_ELEMENTS = {"mxfp8_e4m3": "float8_e4m3fn", "mxfp8_e5m2": "float8_e5m2", "mxfp6_e3m2": "DTYPE_FP6_E3M2",
               "mxfp6_e2m3": "DTYPE_FP6_E2M3", "mxfp4": "float4_e2m1fn_x2"}
MX_MODES = {"floor": "torchao_floor", "rceil": "torchao_rceil"}
_MXT = "torchao.prototype.mx_formats"


def _mx_mods() -> tuple[Any, Any, Any]:
    import importlib
    import logging

    logging.getLogger("torchao").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mxt = importlib.import_module(f"{_MXT}.mx_tensor")
        cfg = importlib.import_module(f"{_MXT}.config")
        const = importlib.import_module(f"{_MXT}.constants")
    return mxt, cfg, const


def _elem(name: str) -> Any:
    import torch

    e = MX_ELEMENTS[name]
    return getattr(_mx_mods()[2], e) if e.startswith("DTYPE_") else getattr(torch, e)


def _mx_axis(case: Case) -> tuple[np.ndarray, bool]:
    arr = case.inputs["x"] if case.operation == "block_quantize" else case.inputs["codes"]
    a = int(case.params.get("axis", -1)) % arr.ndim
    return arr, a != arr.ndim - 1


def _mx_supports(case: Case) -> str | None:
    name = case.scheme["name"]
    if name not in MX_ELEMENTS:
        what = "NVFP4 (NVFP4Tensor) is not wired into this target" if name == "nvfp4" else f"no {name} format"
        return f"torchao's to_mx / to_dtype cover the OCP MX formats; {what}"
    if int(case.scheme["block_size"]) != 32:
        return f"the harness calls to_mx with MX blocks of 32, the case has {case.scheme['block_size']}"
    arr, tr = _mx_axis(case)
    if tr and arr.ndim != 2:
        return "to_mx blocks the last axis (a 2-D input blocked along axis 0 is transposed first)"
    n = arr.shape[0] if tr else arr.shape[-1]
    if n % 32:
        return "to_mx needs the blocked axis to be a multiple of 32 (no partial blocks)"
    if case.operation == "block_quantize" and arr.dtype.name not in ("float32", "bfloat16"):
        return f"to_mx takes float32 or bfloat16 tensors ({arr.dtype.name}: 'is not supported yet')"
    if case.operation == "block_dequantize" and case.expected["y"].dtype.name not in DTYPES:
        return f"to_dtype returns torch float types, not {case.expected['y'].dtype.name}"
    return None


def _mx_make(mode: str):
    def one(case: Case) -> Outputs:
        raise_unsupported(_mx_supports(case))
        import torch

        mxt, cfg, _ = _mx_mods()
        name = case.scheme["name"]
        arr, tr = _mx_axis(case)
        lay = (lambda a: np.ascontiguousarray(a.T)) if tr else np.ascontiguousarray
        out: dict[str, np.ndarray] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case.operation == "block_quantize":
                x = lay(arr)
                t = (torch.from_numpy(x.view(np.uint16).copy()).view(torch.bfloat16) if x.dtype.name == "bfloat16"
                     else torch.from_numpy(x.copy()))
                s, d = mxt.to_mx(t, _elem(name), 32, getattr(cfg.ScaleCalculationMode, mode.upper()))
                raw = d.view(torch.uint8).numpy()
                codes = np.stack([raw & 15, raw >> 4], axis=-1) if name == "mxfp4" else raw  # low nibble first
                codes = codes.reshape(x.shape)
                scales = s.view(torch.uint8).numpy().reshape(*x.shape[:-1], -1)
                out = {"codes": codes.T if tr else codes, "scales": scales.T if tr else scales}
            else:
                c = lay(arr.astype(np.uint8))
                sc = lay(case.inputs["scales"].astype(np.uint8))
                if name == "mxfp4":
                    packed = (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)
                    lp = torch.from_numpy(packed.copy())  # to_dtype unpacks uint8 (unpack_uint4)
                elif name.startswith("mxfp6"):
                    lp = torch.from_numpy(c.copy())
                else:
                    lp = torch.from_numpy(c.copy()).view(_elem(name))
                odt = getattr(torch, case.expected["y"].dtype.name)
                y = mxt.to_dtype(lp, torch.from_numpy(sc.reshape(-1).copy()).view(torch.float8_e8m0fnu),
                                 _elem(name), 32, odt)
                y = from_torch(y).reshape(c.shape)
                out = {"y": y.T if tr else y}
        return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}
    return one


def _mx_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        name = case.scheme["name"]
        arr, tr = _mx_axis(case)
        out = getattr(case, "_output", "codes")
        back = ".T" if tr else ""
        head = (f"import warnings, numpy as np, torch; warnings.simplefilter('ignore'); "
                f"from {_MXT} import mx_tensor as m, config as cfg, constants as k; "
                "import ml_dtypes")
        e = MX_ELEMENTS[name]
        elem = f"k.{e}" if e.startswith("DTYPE_") else f"torch.{e}"
        if case.operation == "block_quantize":
            load = f"np.ascontiguousarray({suite_input(case, 'x')}{back})"
            t = ("torch.from_numpy(x.view(np.uint16).copy()).view(torch.bfloat16)" if arr.dtype.name == "bfloat16"
                 else "torch.from_numpy(x.copy())")
            stmts = [head, f"x = {load}", f"s, d = m.to_mx({t}, {elem}, 32, cfg.ScaleCalculationMode.{mode.upper()})"]
            if out == "scales":
                stmts.append(f"a = s.view(torch.uint8).numpy().reshape(*x.shape[:-1], -1){back}")
            elif name == "mxfp4":
                stmts.append("r = d.view(torch.uint8).numpy()")
                stmts.append(f"a = np.stack([r & 15, r >> 4], -1).reshape(x.shape){back}")
            else:
                stmts.append(f"a = d.view(torch.uint8).numpy().reshape(x.shape){back}")
            return python_c(*stmts, f"print(hex(int(a.reshape(-1)[{i}])))")
        ef = case.array_formats["codes"]
        odt = case.expected["y"].dtype.name
        c = f"np.ascontiguousarray({suite_input(case, 'codes')}{back}).astype(np.uint8)"
        if name == "mxfp4":
            lp = "torch.from_numpy((c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8))"
        elif name.startswith("mxfp6"):
            lp = "torch.from_numpy(c.copy())"
        else:
            lp = f"torch.from_numpy(c.copy()).view(torch.{ef})"
        return python_c(
            head, f"c = {c}", f"s = np.ascontiguousarray({suite_input(case, 'scales')}{back}).astype(np.uint8)",
            f"y = m.to_dtype({lp}, torch.from_numpy(s.reshape(-1).copy()).view(torch.float8_e8m0fnu), {elem}, 32, "
            f"torch.{odt}).reshape(c.shape){back}",
            "y = y.contiguous().view(torch.int16) if y.dtype == torch.bfloat16 else y.contiguous()",
            f"a = y.numpy(); print(hex(int(a.view(f'u{{a.dtype.itemsize}}').reshape(-1)[{i}])))")
    return snippet


def targets() -> list[Target]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        require("torch", "torchao.quantization", backend=BACKEND, hint="pip install torch torchao")
    return [*matmul_targets(), Target(BACKEND, "torchao.to_nf4", "lookup",
                   "torchao.quantization.to_nf4(x, block_size, scaler_block_size=256) (NF4Tensor) and "
                   "NF4Tensor.to(dtype), CPU", "torchao", ("lookup_quantize", "lookup_dequantize"),
                   _supports, per_case(_one), _snippet),
            *(Target(BACKEND, f"torchao.to_mx.{mode}", "block",
                     f"torchao.prototype.mx_formats.mx_tensor.to_mx(x, elem_dtype, 32, "
                     f"ScaleCalculationMode.{mode.upper()}), CPU", prof, ("block_quantize",), _mx_supports,
                     per_case(_mx_make(mode)), _mx_snippet(mode)) for mode, prof in MX_MODES.items()),
            Target(BACKEND, "torchao.to_dtype", "block",
                   "torchao.prototype.mx_formats.mx_tensor.to_dtype(data_lp, scale_e8m0, elem_dtype, 32, dtype), CPU "
                   "(the dequantization of both scale modes)", "torchao_floor", ("block_dequantize",), _mx_supports,
                   per_case(_mx_make("floor")), _mx_snippet("floor"))]


# ---- matmul: Int8Tensor linear, dynamic int8 activations and int8 weight-only (matmul.md §13, §14) -------------
def _dyn_supports(case: Case) -> str | None:
    if case.operation != "int8_vectorwise_matmul":
        return None
    if case.inputs["a"].dtype != np.float32:
        return ("the torchao_int8_dynamic profile models float32 activations (choose_qparams_affine divides in "
                "the input dtype)")
    return None


def _dyn_one(case: Case) -> Outputs:
    import torch

    tq = _tq()
    from torchao.quantization.quantize_.common.quantize_tensor_kwargs import _choose_quant_func_and_quantize_tensor

    a, b = case.inputs["a"], case.inputs["b"]
    lin = torch.nn.Linear(b.shape[1], b.shape[0], bias=False)
    lin.weight.data = torch.from_numpy(b.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.quantize_(lin, tq.Int8DynamicActivationInt8WeightConfig())
        w = lin.weight
        xa = _choose_quant_func_and_quantize_tensor(torch.from_numpy(a.copy()), w.act_quant_kwargs)
        with torch.no_grad():
            y = lin(torch.from_numpy(a.copy()))
    return {"a_codes": xa.qdata.numpy(), "a_stats": xa.scale.numpy().reshape(-1), "b_codes": w.qdata.numpy(),
            "b_stats": w.scale.numpy().reshape(-1), "y": y.numpy()}


def _wo8_supports(case: Case) -> str | None:
    return None


def _wo8_one(case: Case) -> Outputs:
    import torch
    from torchao.quantization import Int8Tensor

    codes, scale = case.inputs["codes"], case.inputs["scale"]
    N, K = codes.shape
    w = Int8Tensor(torch.from_numpy(codes.copy()), torch.from_numpy(scale.reshape(N, 1).copy()), [1, K],
                   torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = torch.nn.functional.linear(torch.from_numpy(case.inputs["x"].copy()), w)
    return {"y": y.numpy()}


def _int4_supports(case: Case) -> str | None:
    try:
        import mslk  # noqa: F401
    except ImportError:
        return ("Int4WeightOnlyConfig needs the mslk package (torchao 0.18 raises ImportError 'Requires mslk >= "
                "1.0.0' on CPU); its int4 is affine int4 per group, not a lookup table")
    return "torchao's int4 weight-only is affine int4 per group; the suite's weight-only cases are lookup tables"


def _mm_snippet(kind: str):
    def snippet(case: Case, i: int) -> str:
        from ._common import array_literal

        head = "import warnings, numpy as np, torch; warnings.simplefilter('ignore'); import torchao.quantization as tq"
        out = getattr(case, "_output", "y")
        if kind == "dynamic":
            n_out = case.inputs["b"].shape[0]
            m, n = divmod(int(i), n_out) if out == "y" else (0, 0)
            a = case.inputs["a"][m:m + 1] if out == "y" else case.inputs["a"]
            return python_c(head, f"a = torch.from_numpy({array_literal(a)})",
                            f"b = torch.from_numpy({array_literal(case.inputs['b'])})",
                            "lin = torch.nn.Linear(b.shape[1], b.shape[0], bias=False); lin.weight.data = b",
                            "tq.quantize_(lin, tq.Int8DynamicActivationInt8WeightConfig())",
                            "w = lin.weight; y = lin(a).detach()",
                            {"b_codes": f"r = w.qdata.numpy().reshape(-1)[{i}]",
                             "b_stats": f"r = w.scale.numpy().reshape(-1)[{i}]"}.get(
                                out, f"r = y.numpy().reshape(-1)[{n}]"),
                            "print(hex(int(np.asarray(r).view(f'u{np.asarray(r).dtype.itemsize}'))))")
        return row_snippet(head, case, i, f"c = torch.from_numpy({array_literal(case.inputs['codes'])})",
                                f"s = torch.from_numpy({array_literal(case.inputs['scale'])}).reshape(-1, 1)",
                                "w = tq.Int8Tensor(c, s, [1, c.shape[1]], torch.float32)",
                                "y = torch.nn.functional.linear(x, w)")
    return snippet


def matmul_targets() -> list[Target]:
    return [
        Target(BACKEND, "torchao.int8_dynamic", "matmul", "quantize_(Linear, Int8DynamicActivationInt8WeightConfig()) "
               "(PerRow, symmetric; Int8Tensor linear: int_scaled_matmul), CPU, float32", "torchao_int8_dynamic",
               ("int8_vectorwise_matmul",), _dyn_supports, per_case(_dyn_one), _mm_snippet("dynamic")),
        Target(BACKEND, "torchao.int8_weight_only", "matmul", "F.linear(x, Int8Tensor(qdata, scale, [1, K], float32)) "
               "(Int8WeightOnlyConfig's weight: float mm of x and the int8 codes, then * scale), CPU",
               "weight_only_any", ("int8_weight_only_matmul",), _wo8_supports, per_case(_wo8_one),
               _mm_snippet("weight_only")),
        Target(BACKEND, "torchao.int4_weight_only", "matmul", "quantize_(Linear, Int4WeightOnlyConfig()), CPU",
               "weight_only_any", ("weight_only_matmul",), _int4_supports,
               lambda cs: [Unsupported(_int4_supports(c) or "") for c in cs], _mm_snippet("weight_only")),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "script_case", "targets"]
