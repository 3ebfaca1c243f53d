"""PyTorch element casts (elements family), shared by the ``torch`` (eager) and ``torch_compile`` targets.

encode: ``x.to(torch.<format>).view(torch.uint8)``; decode: ``codes.view(torch.<format>).to(<dtype>)``; quantize:
``x.to(torch.<format>).to(x.dtype)``, from / to float32, float16, bfloat16 and float64 (the CPU build).
Formats: float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu (element profile
``torch``, elements.md §6.5) and float4_e2m1fn. torch 2.13's ``float4_e2m1fn_x2`` is a storage-only dtype (two
E2M1 codes per byte; no CPU op packs or unpacks it, the nibble order is the producer's): eager ``.to()`` raises
NotImplementedError (``copy_kernel`` not implemented), so the eager cases are unsupported with that message;
under torch.compile Inductor accepts the cast and fails in its code generator (a crash).

torch.compile (Inductor, CPU): one compiled function per (operation, format, source dtype, output dtype), marked
dynamic so that every case of the signature runs through the same graph without recompiling; each case runs
alone (a case's result depends on the case only); a one-element input is run as two copies (dynamo specializes
sizes 0 and 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from ._common import codes_as, element_signature, float_literal, python_c, raise_unsupported

FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn")
#: qref format -> torch dtype name
TORCH_DTYPE = {f: f for f in FORMATS[:-1]} | {"float4_e2m1fn": "float4_e2m1fn_x2"}
DTYPES = ("float32", "float16", "bfloat16", "float64")
_INT = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
#: compiled functions by signature (compiled once per process); a signature whose compile failed keeps its error
_COMPILED: dict[tuple[str, str, str, str], Any] = {}


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)
    return torch


def _supports(case: Case) -> str | None:
    name = case.format["name"]
    if name not in FORMATS:
        return (f"the torch cast targets cover torch's float8 and float4_e2m1fn_x2 dtypes, not {name} (torch.{name} "
                "casts are not modelled here)" if name in ("float16", "bfloat16", "int8", "uint8", "int4", "uint4")
                else f"torch has no {name} dtype")
    op, _, src, out = element_signature(case)
    io = out if op == "decode" else src
    if io not in DTYPES:
        return f"the torch cast targets read and write float32/float16/bfloat16/float64, not {io}"
    return None


def _body(torch: Any, sig: tuple[str, str, str, str]) -> Callable[[Any], Any]:
    """The torch function of one signature (tensor -> tensor; codes as uint8)."""
    op, fmt, src, out = sig
    dt = getattr(torch, TORCH_DTYPE[fmt])
    if op == "decode":
        od = getattr(torch, out)
        return lambda c: c.view(dt).to(od)
    if op == "encode":
        return lambda x: x.to(dt).view(torch.uint8)
    sd = getattr(torch, src)
    return lambda x: x.to(dt).to(sd)


def _input(torch: Any, sig: tuple[str, str, str, str], flat: np.ndarray) -> Any:
    if sig[0] == "decode":
        return torch.from_numpy(np.ascontiguousarray(flat, dtype=np.uint8).copy())
    if flat.dtype.name == "bfloat16":
        return torch.from_numpy(flat.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(flat.copy())


def _bits(torch: Any, t: Any) -> np.ndarray:
    """A result tensor as unsigned bits of its width."""
    t = t.contiguous()
    n = t.element_size()
    return t.view(getattr(torch, _INT[n])).numpy().view(f"u{n}")


def _compiled(torch: Any, sig: tuple[str, str, str, str]) -> Any:
    if sig not in _COMPILED:
        _COMPILED[sig] = torch.compile(_body(torch, sig), dynamic=True, backend="inductor")
    return _COMPILED[sig]


def _run(compiled: bool):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        torch = _torch()
        failed: dict[tuple[str, str, str, str], BaseException] = {}
        out: list[Outputs | BaseException] = []
        # the same code object serves every signature: each is a recompile of it (dynamo's limit is 8)
        with torch._dynamo.config.patch(recompile_limit=1024, accumulated_recompile_limit=4096):
            for c in cases:
                try:
                    sig = element_signature(c)
                    raise_unsupported(_supports(c))
                    if sig in failed:  # a compile that failed once fails again: not retried per case
                        raise failed[sig]
                    flat = c.inputs["codes" if sig[0] == "decode" else "x"].reshape(-1)
                    n = flat.size
                    if compiled and n == 1:
                        flat = np.concatenate([flat, flat])
                    t = _input(torch, sig, flat)
                    try:
                        y = (_compiled(torch, sig) if compiled else _body(torch, sig))(t)
                    except NotImplementedError as exc:
                        if compiled:
                            raise
                        raise Unsupported(f"torch {torch.__version__}: {exc} (the dtype exists; no kernel converts "
                                          "to or from it)") from None
                    except Exception as exc:
                        if compiled:
                            failed[sig] = exc
                        raise
                    (name,) = c.expected
                    out.append({name: codes_as(c, name, _bits(torch, y)[:n])})
                except Exception as exc:
                    out.append(exc)
        return out
    return run


def _literal_torch(case: Case, i: int) -> str:
    """Source of a torch tensor holding input element i (floats through their bits; a compiled call gets two
    copies, as the target runs a one-element case)."""
    x = case.inputs["x"]
    lit = float_literal(x, i)
    if x.dtype.name == "bfloat16":
        b = int(np.asarray(x).reshape(-1)[i : i + 1].view(np.uint16)[0])
        return f"torch.tensor([{hex(b)}, {hex(b)}], dtype=torch.int16).view(torch.bfloat16)" if b < 0x8000 else \
            f"torch.tensor([{b - 0x10000}, {b - 0x10000}], dtype=torch.int16).view(torch.bfloat16)"
    return f"torch.from_numpy(np.concatenate([{lit}, {lit}]))"


def _snippet(compiled: bool):
    def snippet(case: Case, i: int) -> str:
        op, fmt, src, out = element_signature(case)
        dt = f"torch.{TORCH_DTYPE[fmt]}"
        head = ["import numpy as np, torch"]
        if op == "decode":
            c = int(case.inputs["codes"].reshape(-1)[i])
            head.append(f"x = torch.tensor([{hex(c)}, {hex(c)}], dtype=torch.uint8)")
            body, w = f"lambda v: v.view({dt}).to(torch.{out})", _SIZE[out]
        elif op == "encode":
            head.append(f"x = {_literal_torch(case, i)}")
            body, w = f"lambda v: v.to({dt}).view(torch.uint8)", 1
        else:
            head.append(f"x = {_literal_torch(case, i)}")
            body, w = f"lambda v: v.to({dt}).to(torch.{src})", _SIZE[src]
        call = f"torch.compile({body}, dynamic=True)" if compiled else f"({body})"
        iv = {1: "torch.uint8", 2: "torch.int16", 4: "torch.int32", 8: "torch.int64"}[w]
        mask = (1 << (8 * w)) - 1
        return python_c(*head, f"y = {call}(x)",
                        f"print(hex(int(y.view({iv})[0]) & {hex(mask)}))")
    return snippet


def targets(backend: str, compiled: bool) -> list[Target]:
    """The element-cast targets of ``backend`` (``compiled``: run under torch.compile, Inductor CPU)."""
    api = ("x.to(torch.<format>).view(torch.uint8); codes.view(torch.<format>).to(<dtype>); "
           "x.to(torch.<format>).to(x.dtype)")
    if compiled:
        return [Target(backend, f"{backend}.to.inductor", "elements",
                       f"torch.compile(f, dynamic=True) (Inductor, CPU) of {api}", "torch",
                       ("encode", "decode", "quantize"), _supports, _run(True), _snippet(True))]
    return [Target(backend, f"{backend}.to", "elements", api, "torch", ("encode", "decode", "quantize"),
                   _supports, _run(False), _snippet(False))]


__all__ = ["targets"]
