"""Upstream MLIR through torch-mlir's bindings (LLVM 24): element conversions with ``arith.truncf`` /
``arith.extf`` expanded by ``arith-expand`` (bf16, f8E8M0FNU and f4E2M1FN emulation; other small types have no
upstream lowering) and ``quant.qcast`` / ``quant.dcast`` lowered by ``lower-quant-ops`` (uniform profile
``mlir``), then lowered to LLVM and run with ``torch_mlir.execution_engine.ExecutionEngine`` on CPU.

Each signature is one function on memrefs in its own module (a function the pipeline cannot lower is reported
"unsupported" with the first diagnostic); values cross the boundary as integer bit patterns.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...interop.mlir.stablehlo import Body, cast, func, module, one_line, tensor
from ..families.uniform import scheme_of, to_scheme_of
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import (
    _mask,
    codes_as,
    element_signature,
    first_literal,
    float_literal,
    literal_imports,
    per_case,
    python_c,
    run_element_groups,
    single_element_case,
    uniform_input,
    unsupported_reason,
)
from ._mlir import (
    CompileFailure,
    diagnostic,
    element_body,
    element_supports,
    generic_memref_func,
    is_float_storage,
    mlir_type,
    quant_type,
    scheme_quant_type,
    shape_text,
)

BACKEND = "mlir"
DISTRIBUTIONS = ("torch-mlir",)
EXPAND = "arith-expand{include-bf16=true include-f8e8m0=true include-f4e2m1=true}"
PIPELINE = (
    "builtin.module(func.func(lower-quant-ops), strip-func-quant-types, func.func(convert-elementwise-to-linalg), "
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, "
    f"func.func(convert-linalg-to-loops), lower-affine, convert-scf-to-cf, func.func({EXPAND}), "
    "convert-math-to-llvm, expand-strided-metadata, finalize-memref-to-llvm, convert-arith-to-llvm, "
    "convert-func-to-llvm, convert-cf-to-llvm, reconcile-unrealized-casts)")
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


class PipelineFailure(Unsupported):
    """The module parsed and verified, and the lowering pipeline (or the JIT) failed on it: for an element
    conversion arith has no lowering (unsupported); for a quant op on a type the dialect accepts, a crash."""


def llvm_target() -> tuple[str, str] | None:
    """(target-cpu, target-features) when the run pins the JIT to the baseline ISA (``qref run --cpu baseline``:
    the runner sets QREF_LLVM_TARGET = "CPU;FEATURES", profiles.md §6), else None: the host CPU's."""
    v = os.environ.get("QREF_LLVM_TARGET", "")
    if not v:
        return None
    cpu, _, features = v.partition(";")
    return cpu, features


def _pin_lines() -> tuple[str, ...]:
    """The reproducer's lines that write the pinned target on every llvm.func ("" when not pinned)."""
    t = llvm_target()
    if t is None:
        return ()
    return ("for o in [o for o in m.body.operations if o.operation.name == 'llvm.func']:",
            f"    o.attributes['target_cpu'] = ir.StringAttr.get({t[0]!r})",
            f"    o.attributes['target_features'] = ir.Attribute.parse('#llvm.target_features<[\"{t[1]}\"]>')")


def pin_llvm_target(module: Any) -> None:
    """Write the pinned target-cpu / target-features on every llvm.func of a lowered module (LLVM compiles each
    function for them instead of the host's); nothing when the run is not pinned."""
    t = llvm_target()
    if t is None:
        return
    from torch_mlir import ir

    for op in module.body.operations:
        if op.operation.name == "llvm.func":
            op.attributes["target_cpu"] = ir.StringAttr.get(t[0])
            op.attributes["target_features"] = ir.Attribute.parse(f'#llvm.target_features<["{t[1]}"]>')


class Compiled:
    """A module lowered to LLVM and JIT-compiled; ``call(name, x, out_dtype)`` runs @name(x, y) on 1-D arrays."""

    def __init__(self, text: str) -> None:
        from torch_mlir import ir, passmanager
        from torch_mlir.execution_engine import ExecutionEngine

        self.ctx = ir.Context()
        errors: list[str] = []

        def handler(d: Any) -> bool:
            errors.append(str(d.message))
            return True

        self.ctx.attach_diagnostic_handler(handler)
        with self.ctx:
            try:
                module = ir.Module.parse(text)
            except Exception as exc:
                msg = errors[0] if errors else str(exc)
                raise Unsupported(f"mlir: {diagnostic(RuntimeError('error: ' + msg))}") from None
            try:
                passmanager.PassManager.parse(PIPELINE).run(module.operation)
                pin_llvm_target(module)
                self.engine = ExecutionEngine(module, opt_level=2)
            except Exception as exc:
                msg = errors[0] if errors else str(exc)
                raise PipelineFailure(f"mlir: {diagnostic(RuntimeError('error: ' + msg))}") from None

    def call(self, name: str, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
        from torch_mlir.runtime import get_ranked_memref_descriptor

        x = np.array(x, copy=True, order="C")  # the lowered code may write into its argument buffers
        y = np.zeros(x.shape, dtype=out_dtype)
        args = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in (x, y)]
        try:
            self.invoke(name, *args)
        except LinkFailure as exc:  # an element conversion arith lowers to a builtin the JIT lacks: unsupported
            raise Unsupported(str(exc)) from None
        return y

    def invoke(self, name: str, *args: Any) -> None:
        """engine.invoke, with a link failure raised as LinkFailure naming the missing symbols."""
        with _stderr_captured() as err:
            try:
                self.engine.invoke(name, *args)
            except RuntimeError as exc:
                if "Unknown function" not in str(exc):
                    raise
                err.seek(0)
                missing = re.findall(r"Symbols not found: \[ ([^\]]+) \]", err.read())
                raise LinkFailure("ExecutionEngine: the JIT cannot link the lowered code (symbols not found: "
                                  f"{', '.join(sorted(set(m.strip() for m in missing))) or '?'}; compiler-rt "
                                  "builtins are not linked)") from None


class LinkFailure(RuntimeError):
    """The JIT could not resolve symbols of the lowered code (compiler-rt builtins LLVM calls for conversions the
    target CPU has no instruction for: which ones depends on the CPU, profiles.md §6)."""


@contextlib.contextmanager
def _stderr_captured() -> Iterator[Any]:
    """Redirect the process's fd 2 (where LLVM's JIT prints link errors) to a temporary file."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield tmp
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)


# ---- elements ---------------------------------------------------------------------------------------------
def _el_compile(sig: tuple[str, str, str, str]) -> tuple[Compiled, int, int]:
    body, res, tin, tout = element_body(sig)
    return Compiled(module(generic_memref_func("f", body, res, tin, tout))), int(tin[1:]), int(tout[1:])


def _el_call(ready: tuple[Compiled, int, int], sig: object, x: np.ndarray) -> np.ndarray:
    mod, win, wout = ready
    return mod.call("f", x.view(UINT[win]), np.dtype(UINT[wout]))


def _el_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_element_groups(cases, _el_compile, _el_call)


def _el_snippet(case: Case, i: int) -> str:
    sig = element_signature(case)
    body, res, tin, tout = element_body(sig)
    text = one_line(module(generic_memref_func("f", body, res, tin, tout), newline=False))
    win, wout = int(tin[1:]), int(tout[1:])
    src = "codes" if sig[0] == "decode" else "x"
    lit = float_literal(case.inputs[src], i)
    return python_c(
        "import ctypes, numpy as np, ml_dtypes",
        "from torch_mlir import ir, passmanager, execution_engine as ee",
        "from torch_mlir.runtime import get_ranked_memref_descriptor as d",
        "c = ir.Context(); c.__enter__()",
        f"m = ir.Module.parse({text!r})",
        f"passmanager.PassManager.parse({PIPELINE!r}).run(m.operation)",
        *_pin_lines(),
        f"x = {lit}.view(np.uint{win}); y = np.zeros(x.size, np.uint{wout})",
        "ee.ExecutionEngine(m, opt_level=2).invoke('f', *[ctypes.pointer(ctypes.pointer(d(a))) for a in (x, y)])",
        "print(hex(int(y[0])))")


def targets() -> list[Target]:
    require("torch_mlir.ir", "torch_mlir.execution_engine", backend=BACKEND, hint="pip install torch-mlir")
    return [
        Target(BACKEND, "mlir.arith", "elements", f"arith.truncf / arith.extf, {EXPAND}, lowered to LLVM, "
               "ExecutionEngine", "mlir", ("encode", "decode", "quantize"), element_supports, _el_run, _el_snippet),
        _uniform_target(),
    ]


# ---- uniform: quant.qcast / quant.dcast with lower-quant-ops ---------------------------------------------------
def _narrow_in(body: Body, sh: str, b: int) -> str:
    """The argument %x as storage integers i{b}: below 8 bits it arrives as i8 and is truncated (%n)."""
    if b < 8:
        return body.let("%n", cast("arith.trunci", "%x", tensor(sh, "i8"), tensor(sh, f"i{b}")))
    return "%x"


def _widen_out(body: Body, sh: str, b: int, signed: bool) -> tuple[str, str]:
    """(result, its element type) of the storage integers %s (i{b}): below 8 bits extended to i8 (%w)."""
    if b < 8:
        ext = "arith.extsi" if signed else "arith.extui"
        return body.let("%w", cast(ext, "%s", tensor(sh, f"i{b}"), tensor(sh, "i8"))), "i8"
    return "%s", f"i{b}"


def _uq_func(name: str, case: Case) -> tuple[str, np.dtype]:
    """A function on static tensors (@name(x) -> result) and the numpy dtype of its result."""
    qt, _it, b, signed = quant_type(case)
    st = f"i{b}"
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    sh = shape_text(shape)
    body = Body(indent="")
    if case.operation == "uniform_requantize":  # quant.qcast of a quantized operand (the verifier decides)
        qt2, _it2, b2, signed2 = scheme_quant_type(to_scheme_of(case))
        st2 = f"i{b2}"
        arg = tensor(sh, st if b >= 8 else "i8")
        v = _narrow_in(body, sh, b)
        body.let("%q", cast("quant.scast", v, tensor(sh, st), tensor(sh, qt)))
        body.let("%u", cast("quant.qcast", "%q", tensor(sh, qt), tensor(sh, qt2)))
        body.let("%s", cast("quant.scast", "%u", tensor(sh, qt2), tensor(sh, st2)))
        res, rt = _widen_out(body, sh, b2, signed2)
        out_dt = np.dtype(f"int{max(8, b2)}")
    elif is_float_storage(_it):  # f8E4M3FN / f8E5M2 / f4E2M1FN storage: quant.scast takes integers only, so the
        # function takes or returns the quantized tensor itself (strip-func-quant-types makes it the float type)
        if case.operation == "uniform_quantize":
            arg = tensor(sh, mlir_type(case.inputs["x"].dtype.name, "dtype"))
            res, rt = body.let("%q", cast("quant.qcast", "%x", arg, tensor(sh, qt))), qt
            out_dt = np.dtype(np.uint8)
        else:
            et = mlir_type(scheme_of(case).expressed.name, "expressed type")
            arg = tensor(sh, qt)
            res, rt = body.let("%y", cast("quant.dcast", "%x", arg, tensor(sh, et))), et
            (oname,) = case.expected
            if et != mlir_type(case.expected[oname].dtype.name):
                raise Unsupported(f"dequantize to {case.expected[oname].dtype} from expressed type {et}")
            out_dt = np.dtype(case.expected[oname].dtype)
    elif case.operation == "uniform_quantize":
        arg = tensor(sh, mlir_type(case.inputs["x"].dtype.name, "dtype"))
        body.let("%q", cast("quant.qcast", "%x", arg, tensor(sh, qt)))
        body.let("%s", cast("quant.scast", "%q", tensor(sh, qt), tensor(sh, st)))
        res, rt = _widen_out(body, sh, b, signed)
        out_dt = np.dtype(f"int{max(8, b)}")
    else:
        et = mlir_type(scheme_of(case).expressed.name, "expressed type")
        arg = tensor(sh, st if b >= 8 else "i8")
        v = _narrow_in(body, sh, b)
        body.let("%q", cast("quant.scast", v, tensor(sh, st), tensor(sh, qt)))
        res, rt = body.let("%y", cast("quant.dcast", "%q", tensor(sh, qt), tensor(sh, et))), et
        (oname,) = case.expected
        out_dt = np.dtype(case.expected[oname].dtype) if et == mlir_type(case.expected[oname].dtype.name) else None
        if out_dt is None:
            raise Unsupported(f"dequantize to {case.expected[oname].dtype} from expressed type {et}")
    text = func(name, (f"%x: {arg}",), tensor(sh, rt), body.lines, res, attributes="llvm.emit_c_interface")
    return text, out_dt


def _uq_input(case: Case) -> np.ndarray:
    v = uniform_input(case)
    if case.operation == "uniform_quantize":
        return v
    return v.astype(np.int8) if v.dtype.itemsize == 1 else v  # dequantize and requantize: the input codes


def _call_returning(mod: Compiled, name: str, x: np.ndarray, out_dt: np.dtype) -> np.ndarray:
    from torch_mlir.runtime import get_ranked_memref_descriptor, make_nd_memref_descriptor, ranked_memref_to_numpy

    # 16-bit floats travel as uint16 (ctypes has no half type); the bits are the same
    carrier = np.dtype(np.uint16) if out_dt.itemsize == 2 and out_dt.kind != "i" and out_dt.kind != "u" else out_dt
    res = make_nd_memref_descriptor(x.ndim, np.ctypeslib.as_ctypes_type(carrier))()
    x = np.array(x, copy=True, order="C")  # one-shot-bufferize may reuse the argument buffer in place
    arg = get_ranked_memref_descriptor(x)
    mod.invoke(name, ctypes.pointer(ctypes.pointer(res)), ctypes.pointer(ctypes.pointer(arg)))
    return np.array(ranked_memref_to_numpy([res]), copy=True).reshape(x.shape)


_uq_supports = unsupported_reason(lambda case: _uq_func("f", case))


def _uq_one(case: Case) -> Outputs:
    text, out_dt = _uq_func("f", case)
    try:
        mod = Compiled(module(text))
    except PipelineFailure as exc:  # lower-quant-ops failed on an op and type the quant dialect accepts: a crash
        raise CompileFailure(str(exc)) from None
    y = _call_returning(mod, "f", _uq_input(case), out_dt)
    (oname,) = case.expected
    return {oname: codes_as(case, oname, y)}


def _uq_snippet(case: Case, i: int) -> str:
    one = single_element_case(case, i)
    text, out_dt = _uq_func("f", one)
    text = one_line(module(text, newline=False))
    lit = first_literal(_uq_input(one))
    return python_c(
        literal_imports("import ctypes, numpy as np", lit),
        "from torch_mlir import ir, passmanager, execution_engine as ee",
        "from torch_mlir.runtime import get_ranked_memref_descriptor as d, make_nd_memref_descriptor as mk, "
        "ranked_memref_to_numpy as tonp",
        "c = ir.Context(); c.__enter__()", f"m = ir.Module.parse({text!r})",
        f"passmanager.PassManager.parse({PIPELINE!r}).run(m.operation)",
        *_pin_lines(),
        f"x = {lit}; r = mk(1, np.ctypeslib.as_ctypes_type(np.{'uint16' if out_dt.itemsize == 2 else out_dt.name}))()",
        "ee.ExecutionEngine(m, opt_level=2).invoke('f', ctypes.pointer(ctypes.pointer(r)), "
        "ctypes.pointer(ctypes.pointer(d(x))))",
        f"y = tonp([r]).reshape(-1); print(hex(int(y.view(f'u{{y.dtype.itemsize}}')[0]){_mask(one)}))")


def _uniform_target() -> Target:
    return Target(BACKEND, "mlir.quant", "uniform", "quant.qcast / quant.dcast (+ quant.scast), lower-quant-ops, "
                  "lowered to LLVM, ExecutionEngine", "mlir",
                  ("uniform_quantize", "uniform_dequantize", "uniform_requantize"), _uq_supports, per_case(_uq_one),
                  _uq_snippet)


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
