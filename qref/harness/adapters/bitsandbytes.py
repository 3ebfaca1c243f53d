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
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...interop.packing import unpack
from ..families.lookup import dq_kind, effective_axis
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import codes_as, from_torch, per_case, python_c, raise_unsupported, row_snippet, suite_input, to_torch

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
    raise_unsupported(_supports(case))
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
                out["codes"] = unpack(b, "nibble_high_first", bits=4, count=x.size).reshape(x.shape)
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
    return [*matmul_targets(), Target(BACKEND, "bitsandbytes.functional", "lookup",
                   "bitsandbytes.functional quantize_4bit / dequantize_4bit (nf4, fp4; compress_statistics) and "
                   "quantize_blockwise / dequantize_blockwise (dynamic map), CPU", "bitsandbytes",
                   ("lookup_quantize", "lookup_dequantize"), _supports, per_case(_one), _snippet)]


# ---- matmul: LLM.int8 and 4-bit weight-only products (matmul.md §13, §14) -------------------------------------
def _vw_supports(case: Case) -> str | None:
    if case.operation != "int8_vectorwise_matmul":
        return None
    if case.inputs["a"].dtype != np.float16 or case.inputs["b"].dtype != np.float16:
        return "LLM.int8 quantizes float16 operands"
    return None


def _vw_functional(case: Case) -> Outputs:
    torch, F = _lib()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ca, sa, _ = F.int8_vectorwise_quant(torch.from_numpy(case.inputs["a"].copy()))
        cb, sb, _ = F.int8_vectorwise_quant(torch.from_numpy(case.inputs["b"].copy()))
        acc = F.int8_linear_matmul(ca, cb)
        y = F.int8_mm_dequant(acc, sa, sb)
    return {"a_codes": ca.numpy(), "a_stats": sa.numpy(), "b_codes": cb.numpy(), "b_stats": sb.numpy(),
            "acc": acc.numpy(), "y": y.numpy()}


def _vw_matmul(case: Case) -> Outputs:
    import bitsandbytes as bnb

    torch, _ = _lib()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = bnb.MatmulLtState()
        st.is_training = False  # MatMul8bitLt: the int8 pipeline (is_training=True takes MatMul8bitFp on CPU)
        y = bnb.matmul(torch.from_numpy(case.inputs["a"].copy()), torch.from_numpy(case.inputs["b"].copy()),
                       state=st, threshold=0.0)
    return {"y": y.numpy()}


_VW_CALLS = {
    "functional": ("ca, sa, _ = F.int8_vectorwise_quant(a); cb, sb, _ = F.int8_vectorwise_quant(b); "
                   "acc = F.int8_linear_matmul(ca, cb); y = F.int8_mm_dequant(acc, sa, sb)"),
    "matmul": ("import bitsandbytes as bnb; st = bnb.MatmulLtState(); st.is_training = False; "
               "y = bnb.matmul(a, b, state=st, threshold=0.0)"),
}


def _vw_snippet(kind: str):
    def snippet(case: Case, i: int) -> str:
        out = getattr(case, "_output", "y")
        a, b = case.inputs["a"], case.inputs["b"]
        K = a.shape[1]
        if out in ("y", "acc"):
            m, n = divmod(int(i), b.shape[0])
            ra, rb, j = a[m:m + 1], b[n:n + 1], 0
        elif out.startswith("a_"):
            m = int(i) // K if out == "a_codes" else int(i)
            ra, rb, j = a[m:m + 1], b[:1], (int(i) % K if out == "a_codes" else 0)
        else:
            n = int(i) // K if out == "b_codes" else int(i)
            ra, rb, j = a[:1], b[n:n + 1], (int(i) % K if out == "b_codes" else 0)
        pick = {"a_codes": "ca", "a_stats": "sa", "b_codes": "cb", "b_stats": "sb", "acc": "acc", "y": "y"}[out]
        from ._common import array_literal

        return python_c(_HEAD, f"a = torch.from_numpy({array_literal(ra)})",
                        f"b = torch.from_numpy({array_literal(rb)})", _VW_CALLS[kind],
                        f"r = {pick}.contiguous().numpy().reshape(-1)",
                        f"print(hex(int(r.view(f'u{{r.dtype.itemsize}}')[{j}])))")
    return snippet


def _wo_supports(case: Case) -> str | None:
    if case.operation != "weight_only_matmul":
        return None
    if case.params["table"] not in QUANT_TYPES:
        return f"bitsandbytes has no {case.params['table']} 4-bit type"
    if int(case.params["block_size"]) not in BLOCKS_4BIT:
        return f"bitsandbytes takes 4-bit block sizes {BLOCKS_4BIT}"
    return None


def _wo_state(case: Case) -> tuple[Any, Any]:
    torch, F = _lib()
    codes = case.inputs["codes"]
    c = codes.reshape(-1).astype(np.uint8)
    packed = torch.from_numpy(((c[0::2] << 4) | c[1::2]).astype(np.uint8)).reshape(-1, 1)
    st = F.QuantState(absmax=torch.from_numpy(case.inputs["absmax"].copy()), shape=torch.Size(codes.shape),
                      blocksize=int(case.params["block_size"]), quant_type=QUANT_TYPES[case.params["table"]],
                      dtype=torch.float32, code=F.get_4bit_type(QUANT_TYPES[case.params["table"]], device="cpu"))
    return packed, st


def _wo_matmul4(case: Case) -> Outputs:
    import bitsandbytes as bnb

    torch, _ = _lib()
    packed, st = _wo_state(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = bnb.matmul_4bit(torch.from_numpy(case.inputs["x"].copy()), packed.t(), st)
    return {"y": y.numpy()}


def _wo_gemv_cpu(case: Case) -> Outputs:
    torch, F = _lib()
    if not F.has_avx512bf16():
        raise Unsupported("the CPU-packed gemv_4bit kernel needs AVX512-BF16")
    packed, st = _wo_state(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw, st = F._convert_weight_packed_for_cpu(packed, st)
        y = F.gemv_4bit(torch.from_numpy(case.inputs["x"].copy()), pw, state=st)
    return {"y": y.float().numpy()}


def _wo_snippet(kind: str):
    def snippet(case: Case, i: int) -> str:
        from ._common import array_literal

        n_out = case.inputs["codes"].shape[0]
        qt = QUANT_TYPES[case.params["table"]]
        B = int(case.params["block_size"])
        K = case.inputs["x"].shape[1]
        call = ("import bitsandbytes as bnb; y = bnb.matmul_4bit(x, p.t(), st)" if kind == "matmul_4bit" else
                "pw, st = F._convert_weight_packed_for_cpu(p, st); y = F.gemv_4bit(x, pw, state=st).float()")
        return row_snippet(_HEAD, case, i,
                                f"c = {array_literal(case.inputs['codes'])}.reshape(-1).astype(np.uint8)",
                                f"am = torch.from_numpy({array_literal(case.inputs['absmax'])})",
                                "p = torch.from_numpy((c[0::2] << 4) | c[1::2]).reshape(-1, 1)",
                                f"st = F.QuantState(absmax=am, shape=torch.Size([{n_out}, {K}]), blocksize={B}, "
                                f"quant_type={qt!r}, dtype=torch.float32, code=F.get_4bit_type({qt!r}, "
                                "device='cpu'))", call)
    return snippet


def matmul_targets() -> list[Target]:
    return [
        Target(BACKEND, "bitsandbytes.int8_vectorwise", "matmul", "F.int8_vectorwise_quant (a, b), "
               "F.int8_linear_matmul, F.int8_mm_dequant (LLM.int8 stages, threshold 0), CPU", "bitsandbytes_int8",
               ("int8_vectorwise_matmul",), _vw_supports, per_case(_vw_functional),
               _vw_snippet("functional")),
        Target(BACKEND, "bitsandbytes.matmul_lt", "matmul", "bnb.matmul(a, b, state=MatmulLtState(is_training="
               "False), threshold=0) (MatMul8bitLt: the whole LLM.int8 pipeline), CPU", "bitsandbytes_int8",
               ("int8_vectorwise_matmul",), _vw_supports, per_case(_vw_matmul),
               _vw_snippet("matmul")),
        Target(BACKEND, "bitsandbytes.matmul_4bit", "matmul", "bnb.matmul_4bit(x, packed.t(), QuantState) "
               "(dequantize_4bit to float32, then linear), CPU", "weight_only_any", ("weight_only_matmul",),
               _wo_supports, per_case(_wo_matmul4), _wo_snippet("matmul_4bit")),
        Target(BACKEND, "bitsandbytes.gemv_4bit.cpu_packed", "matmul", "F._convert_weight_packed_for_cpu, then "
               "F.gemv_4bit (the AVX512-BF16 fused kernel Linear4bit uses at inference), CPU", "weight_only_any",
               ("weight_only_matmul",), _wo_supports, per_case(_wo_gemv_cpu), _wo_snippet("gemv")),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
