"""bitsandbytes (CPU, on torch): ``quantize_4bit`` / ``dequantize_4bit`` (NF4, FP4; ``compress_statistics``
= double quantization) and ``quantize_blockwise`` / ``dequantize_blockwise`` (the 8-bit dynamic map); lookup
profile ``bitsandbytes`` (lut.md §6.2).

bitsandbytes blocks the flattened tensor (row-major); codes are read from its packed bytes (two 4-bit codes per
byte, the first in the high nibble: block.md §9 ``nibble_high_first``). With ``compress_statistics`` it keeps
the double-quantized scales only (``QuantState.absmax`` = inner codes, ``state2.absmax``, ``offset``), so the
first-level ``scales`` are not compared there. Dequantization takes the case's codes and scales (or its
double-quantized scales) in a ``QuantState`` whose 4-bit and dynamic maps are the library's own.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..families.lookup import dq_kind, effective_axis
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import codes_as, from_torch, python_c, run_each, suite_input, to_torch

BACKEND = "bitsandbytes"
DISTRIBUTIONS = ("bitsandbytes", "torch")
QUANT_TYPES = {"nf4": "nf4", "fp4_bnb": "fp4"}
BLOCKS_4BIT = (32, 64, 128, 256, 512, 1024, 2048, 4096)
DTYPES = ("float32", "float16", "bfloat16")


def _lib() -> tuple[Any, Any]:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import bitsandbytes.functional as F
    return torch, F


def _torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]




def _supports(case: Case) -> str | None:
    name = case.scheme["name"]
    if name == "af4":
        return "bitsandbytes' quantize_4bit takes quant_type nf4 or fp4, not af4"
    if name == "lut" or case.scheme.get("scale") == "static":
        return "static-scale quantile types are not a bitsandbytes API"
    if name not in (*QUANT_TYPES, "dynamic8"):
        return f"bitsandbytes has no {name} table"
    if effective_axis(case) is not None:
        return "bitsandbytes blocks the flattened tensor (row-major), not along an axis"
    B = int(case.scheme["block_size"])
    kind = dq_kind(case)
    if name in QUANT_TYPES and B not in BLOCKS_4BIT:
        return f"quantize_4bit takes block sizes {BLOCKS_4BIT}, not {B}"
    if kind not in (None, "lookup") or (kind is not None and name == "dynamic8"):
        return f"bitsandbytes has no {kind} double quantization of {name} scales"
    if case.operation == "lookup_quantize":
        dt = case.inputs["x"].dtype.name
        if dt not in DTYPES:
            return f"bitsandbytes quantizes float32/float16/bfloat16 tensors, not {dt}"
    elif case.expected["y"].dtype.name not in DTYPES:
        return f"bitsandbytes dequantizes to float32/float16/bfloat16, not {case.expected['y'].dtype.name}"
    return None


def _one(case: Case) -> Outputs:
    reason = _supports(case)
    if reason:
        raise Unsupported(reason)
    torch, F = _lib()
    name = case.scheme["name"]
    B = int(case.scheme["block_size"])
    out: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.operation == "lookup_quantize":
            x = case.inputs["x"]
            t = to_torch(x)
            if name == "dynamic8":
                qb, st = F.quantize_blockwise(t, blocksize=B)
                out["codes"] = qb.numpy().reshape(x.shape)
                out["scales"] = st.absmax.numpy()
            else:
                dq = dq_kind(case) is not None
                packed, st = F.quantize_4bit(t, blocksize=B, quant_type=QUANT_TYPES[name], compress_statistics=dq)
                b = packed.contiguous().view(torch.uint8).numpy().reshape(-1)
                out["codes"] = np.stack([b >> 4, b & 15], axis=-1).reshape(-1)[: x.size].reshape(x.shape)
                if dq:
                    out["dq_codes"] = st.absmax.numpy()
                    out["dq_scales"] = st.state2.absmax.numpy()
                    out["dq_offset"] = np.asarray(st.offset.numpy(), np.float32).reshape(1)
                else:
                    out["scales"] = st.absmax.numpy()
        else:
            codes = case.inputs["codes"].reshape(-1)
            odt = _torch_dtype(case.expected["y"].dtype.name)
            if "dq_codes" in case.inputs:
                inner = int(case.scheme["double_quant"]["block_size"])
                st2 = F.QuantState(absmax=torch.from_numpy(case.inputs["dq_scales"].copy()),
                                   code=F.create_dynamic_map(), blocksize=inner, dtype=torch.float32)
                extra = {"offset": torch.tensor(float(case.inputs["dq_offset"][0]), dtype=torch.float32),
                         "state2": st2}
                absmax = torch.from_numpy(case.inputs["dq_codes"].copy())
            else:
                extra = {}
                absmax = torch.from_numpy(case.inputs["scales"].astype(np.float32).copy())
            if name == "dynamic8":
                st = F.QuantState(absmax=absmax, code=F.create_dynamic_map(), blocksize=B, dtype=odt, **extra)
                y = F.dequantize_blockwise(torch.from_numpy(codes.astype(np.uint8).copy()), st)
            else:
                c = np.concatenate([codes, np.zeros(codes.size % 2, codes.dtype)]).astype(np.uint8)
                packed = torch.from_numpy(((c[0::2] << 4) | c[1::2]).astype(np.uint8)).reshape(-1, 1)
                st = F.QuantState(absmax=absmax, shape=torch.Size([codes.size]), blocksize=B,
                                  quant_type=QUANT_TYPES[name], dtype=odt,
                                  **extra)
                y = F.dequantize_4bit(packed, st)
            out["y"] = from_torch(y).reshape(-1)
    return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}


def _run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _one)


_HEAD = ("import warnings, numpy as np, torch; warnings.simplefilter('ignore'); "
         "import bitsandbytes.functional as F; import ml_dtypes")


def _load(case: Case, name: str) -> str:
    a = case.inputs[name]
    if a.dtype.name == "bfloat16":
        return f"torch.from_numpy({suite_input(case, name)}.reshape(-1).view(np.uint16).copy()).view(torch.bfloat16)"
    return f"torch.from_numpy({suite_input(case, name)}.reshape(-1).copy())"


def _bits(expr: str) -> str:
    return (f"t = ({expr}).contiguous(); t = t.view(torch.int16) if t.dtype == torch.bfloat16 else t; "
            "a = t.numpy(); print(hex(int(a.view(f'u{a.dtype.itemsize}').reshape(-1)[I])))")


def _snippet(case: Case, i: int) -> str:
    """The library call on the case's input (the reduced block, read from the committed suite) printing output
    ``case._output`` at index i as hex bits."""
    name = case.scheme["name"]
    B = int(case.scheme["block_size"])
    out = getattr(case, "_output", "codes")
    if case.operation == "lookup_quantize":
        if name == "dynamic8":
            call = f"q, st = F.quantize_blockwise({_load(case, 'x')}, blocksize={B})"
            pick = {"codes": "q", "scales": "st.absmax"}[out]
        else:
            dq = dq_kind(case) is not None
            call = (f"q, st = F.quantize_4bit({_load(case, 'x')}, blocksize={B}, "
                    f"quant_type={QUANT_TYPES[name]!r}, compress_statistics={dq})")
            if out == "codes":
                shift = "b >> 4" if i % 2 == 0 else "b & 15"
                return python_c(_HEAD, call, f"b = int(q.view(torch.uint8).reshape(-1)[{i // 2}])",
                                f"print(hex({shift}))")
            pick = {"scales": "st.absmax", "dq_codes": "st.absmax", "dq_scales": "st.state2.absmax",
                    "dq_offset": "st.offset.reshape(1)"}[out]
        return python_c(_HEAD, call, _bits(pick).replace("[I]", f"[{i}]"))
    qt = QUANT_TYPES.get(name)
    dt = case.expected["y"].dtype.name
    stmts = [_HEAD, f"c = {suite_input(case, 'codes')}.astype(np.uint8)"]
    if "dq_codes" in case.inputs:
        inner = int(case.scheme["double_quant"]["block_size"])
        stmts += [f"s2 = F.QuantState(absmax=torch.from_numpy({suite_input(case, 'dq_scales')}.copy()), "
                  f"code=F.create_dynamic_map(), blocksize={inner}, dtype=torch.float32)",
                  f"kw = dict(offset=torch.tensor(float({suite_input(case, 'dq_offset')}[0])), state2=s2)",
                  f"a = torch.from_numpy({suite_input(case, 'dq_codes')}.copy())"]
    else:
        stmts += ["kw = {}", f"a = torch.from_numpy({suite_input(case, 'scales')}.astype(np.float32).copy())"]
    if name == "dynamic8":
        stmts += [f"st = F.QuantState(absmax=a, code=F.create_dynamic_map(), blocksize={B}, dtype=torch.{dt}, **kw)",
                  "y = F.dequantize_blockwise(torch.from_numpy(c.copy()), st)"]
    else:
        stmts += ["n = c.size; c = np.concatenate([c, np.zeros(n % 2, np.uint8)])",
                  "p = torch.from_numpy((c[0::2] << 4) | c[1::2]).reshape(-1, 1)",
                  f"st = F.QuantState(absmax=a, shape=torch.Size([n]), blocksize={B}, "
                  f"quant_type={qt!r}, dtype=torch.{dt}, **kw)",
                  "y = F.dequantize_4bit(p, st)"]
    return python_c(*stmts, _bits("y").replace("[I]", f"[{i}]"))


def targets() -> list[Target]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        require("torch", "bitsandbytes.functional", backend=BACKEND, hint="pip install torch bitsandbytes")
    return [Target(BACKEND, "bitsandbytes.functional", "lookup",
                   "bitsandbytes.functional quantize_4bit / dequantize_4bit (nf4, fp4; compress_statistics) and "
                   "quantize_blockwise / dequantize_blockwise (dynamic map), CPU", "bitsandbytes",
                   ("lookup_quantize", "lookup_dequantize"), _supports, _run, _snippet)]
