"""IREE (iree-base-compiler + iree-base-runtime, llvm-cpu, local-task): ``arith.truncf`` / ``arith.extf`` for
every MLIR small-float type (elements; no qref profile: the spec default is the reference) and
``stablehlo.uniform_quantize`` / ``uniform_dequantize`` (uniform profile ``stablehlo_lowering``) and
``stablehlo.dot_general`` on ``!quant.uniform`` operands (matmul profile ``stablehlo_lowering``, matmul.md §6.3).

All functions of one run are compiled into one module (``iree.compiler.compile_str``, dynamic shapes, so one
compile serves every case of a signature); functions IREE cannot compile are reported "unsupported" with their
diagnostic and the others are compiled again. Values cross the boundary as integer bit patterns and are bitcast inside.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...interop.mlir.stablehlo import func, module, one_line, tensor
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import (
    _mask,
    codes_as,
    element_signature,
    first_literal,
    float_literal,
    group_by,
    literal_imports,
    python_c,
    run_element_groups,
    single_element_case,
    uniform_input,
)
from ._mlir import (
    as_crash,
    diagnostic,
    dot_supports,
    element_body,
    element_supports,
    func_name,
    generic_tensor_func,
    matmul_element_case,
    shape_text,
    shlo_dot_body,
    shlo_uniform_body,
    uniform_input_type,
    uniform_supports,
)

BACKEND = "iree"
DISTRIBUTIONS = ("iree-base-compiler", "iree-base-runtime")
#: generic x86-64 code; f64 kept as f64 (IREE demotes f64 to f32 by default, which would turn every float64 case
#: into a float32 one)
FLAGS = ["--iree-llvmcpu-target-cpu=generic", "--iree-input-demote-f64-to-f32=false"]
SINT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def _module(funcs: dict[str, str]) -> tuple[str, list[tuple[int, str]]]:
    """Module text and the first line (1-based) of each function."""
    starts, line = [], 1
    for name, body in funcs.items():
        starts.append((line + 1 + body[: body.index("func.func")].count("\n"), name))
        line += body.count("\n")
    return module(*funcs.values()), starts


def _failing(exc: BaseException, starts: list[tuple[int, str]]) -> dict[str, str]:
    """Function -> first diagnostic, from the "<stdin>:LINE:COL: error: ..." lines of a compile failure."""
    out: dict[str, str] = {}
    lines = [int(m.group(1)) for m in re.finditer(r"^<stdin>:(\d+):\d+: error:", str(exc), re.M)]
    msgs = [ln for ln in str(exc).splitlines() if re.match(r"^<stdin>:\d+:\d+: error:", ln)]
    for ln, msg in zip(lines, msgs):
        owner = [n for first, n in starts if first <= ln]
        if owner and owner[-1] not in out:
            out[owner[-1]] = diagnostic(RuntimeError(msg))
    return out


class _Function:
    """An IREE function that keeps its context alive and returns host copies of its results."""

    def __init__(self, ctx: Any, fn: Any) -> None:
        self.ctx, self.fn = ctx, fn

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        # copies in (the suite's arrays must never alias a device buffer) and out (the context owns results)
        return np.array(self.fn(*(np.array(a, copy=True, order="C") for a in args)).to_host(), copy=True)


def compile_functions(funcs: dict[str, str]) -> dict[str, Callable[..., Any] | BaseException]:
    """Compile the functions into one module. IREE reports every function it cannot compile (one diagnostic per
    dispatch, located in the source; a later pass may find more once the first failures are gone): those become
    Unsupported with their diagnostic and the rest is compiled again as one module, as long as each try finds
    failing functions. If a try fails without naming one, each function left is compiled alone."""
    import iree.compiler as ic
    import iree.runtime as rt

    def load(names: list[str]) -> Any:
        text, _ = _module({n: funcs[n] for n in names})
        vmfb = ic.compile_str(text, target_backends=["llvm-cpu"], extra_args=FLAGS)
        ctx = rt.SystemContext(config=rt.Config("local-task"))
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
        return {n: _Function(ctx, ctx.modules.module[n]) for n in names}

    out: dict[str, Callable[..., Any] | BaseException] = {}
    names = list(funcs)
    while True:  # each failing try removes at least one function: at most len(funcs) + 1 tries
        if not names:
            return out
        try:
            mod = load(names)
            out.update({n: mod[n] for n in names})
            return out
        except Exception as exc:
            bad = _failing(exc, _module({n: funcs[n] for n in names})[1])
            if not bad:
                break
            out.update({n: Unsupported(f"iree-compile: {m}") for n, m in bad.items()})
            names = [n for n in names if n not in bad]
    for n in names:  # last resort: one module per function
        try:
            out[n] = load([n])[n]
        except Exception as exc:
            out[n] = Unsupported(f"iree-compile: {diagnostic(exc)}")
    return out


# ---- elements ---------------------------------------------------------------------------------------------
def _el_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    funcs, meta = {}, {}
    for sig in group_by(cases, element_signature):
        body, res, tin, tout = element_body(sig)
        name = func_name(sig)
        funcs[name] = generic_tensor_func(name, body, res, tin, tout)
        meta[sig] = (name, int(tin[1:]))
    fns = compile_functions(funcs)

    def prepare(sig: tuple[str, str, str, str]) -> tuple[Callable[..., Any], int]:
        name, win = meta[sig]
        fn = fns[name]
        if isinstance(fn, BaseException):
            raise fn
        return fn, win

    def call(ready: tuple[Callable[..., Any], int], sig: object, x: np.ndarray) -> np.ndarray:
        fn, win = ready
        return fn(x.view(f"u{max(1, win // 8)}").view(SINT[win]))

    return run_element_groups(cases, prepare, call)


def _el_snippet(case: Case, i: int) -> str:
    sig = element_signature(case)
    body, res, tin, tout = element_body(sig)
    text = one_line(module(generic_tensor_func("f", body, res, tin, tout)))
    win, wout = int(tin[1:]), int(tout[1:])
    src = "codes" if sig[0] == "decode" else "x"
    lit = float_literal(case.inputs[src], i)
    width = 1 if wout == 8 else wout // 8
    return python_c(
        "import numpy as np, ml_dtypes, iree.compiler as ic, iree.runtime as rt",
        f"x = {lit}.view(np.int{win})",
        f"m = rt.load_vm_flatbuffer(ic.compile_str({text!r}, target_backends=['llvm-cpu'], "
        f"extra_args={FLAGS!r}), driver='local-task')",
        f"print(hex(int(np.asarray(m.f(x)).reshape(-1).view(np.uint{8 * width})[0])))")


def targets() -> list[Target]:
    require("iree.compiler", "iree.runtime", backend=BACKEND, hint="pip install iree-base-compiler iree-base-runtime")
    return [
        Target(BACKEND, "iree.arith", "elements", "arith.truncf / arith.extf in a linalg.generic, iree-compile "
               "llvm-cpu (generic CPU), local-task", "iree", ("encode", "decode", "quantize"), element_supports,
               _el_run, _el_snippet),
        _uniform_target(),
        _matmul_target(),
    ]


# ---- uniform: stablehlo.uniform_quantize / uniform_dequantize ------------------------------------------------
def _uq_func(name: str, case: Case) -> str:
    (iname,) = case.inputs
    sh = shape_text(case.inputs[iname].shape)
    lines, res, rt = shlo_uniform_body(case, "%x")
    return func(name, (f"%x: {tensor(sh, uniform_input_type(case))}",), tensor(sh, rt), lines, res)


def _uq_supports(case: Case) -> str | None:
    """``uniform_supports``, and f4E2M1FN storage of a tensor whose size is not a multiple of 4: iree-compile 3.13
    fails to legalize its vector.maskedload in some compiles of the same program and not in others (seen on this
    case in two of three full runs), so its outcome would not be reproducible."""
    if case.id.split("/")[1] == "float4_e2m1fn" and int(np.asarray(uniform_input(case)).size) % 4:  # uniform/<storage>/
        return ("iree-compile 3.13: f4E2M1FN storage of a tensor whose size is not a multiple of 4 fails to legalize "
                "vector.maskedload in some compiles and not in others (nondeterministic), so it is not run")
    return uniform_supports(case)


def _run_per_case(cases: Sequence[Case], prefix: str, func: Callable[[str, Case], str],
                  outputs: Callable[[Case, Callable[..., Any]], Outputs]) -> list[Outputs | BaseException]:
    """One compiled function per case (``func(name, case)``), its outputs ``outputs(case, fn)``; a lowering
    failure of a claimed op/type is a crash."""
    fns = compile_functions({f"{prefix}{i}": func(f"{prefix}{i}", c) for i, c in enumerate(cases)})
    out: list[Any] = []
    for i, c in enumerate(cases):
        try:
            fn = fns[f"{prefix}{i}"]
            if isinstance(fn, BaseException):
                raise as_crash(fn)
            out.append(outputs(c, fn))
        except Exception as exc:
            out.append(exc)
    return out


def _uq_outputs(c: Case, fn: Callable[..., Any]) -> Outputs:
    y = fn(uniform_input(c))
    (oname,) = c.expected
    return {oname: codes_as(c, oname, y)}


def _uq_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return _run_per_case(cases, "u", _uq_func, _uq_outputs)


def _uq_snippet(case: Case, i: int) -> str:
    one = single_element_case(case, i)
    text = one_line(module(_uq_func("f", one), newline=False))
    lit = first_literal(uniform_input(one))
    return python_c(
        literal_imports("import numpy as np, iree.compiler as ic, iree.runtime as rt", lit), f"x = {lit}",
        f"m = rt.load_vm_flatbuffer(ic.compile_str({text!r}, target_backends=['llvm-cpu'], "
        f"extra_args={FLAGS!r}), driver='local-task')",
        "y = np.asarray(m.f(x)).reshape(-1)", f"print(hex(int(y.view(f'u{{y.dtype.itemsize}}')[0]){_mask(one)}))")


def _uniform_target() -> Target:
    return Target(BACKEND, "iree.stablehlo_uniform", "uniform", "stablehlo.uniform_quantize (float or quantized "
                  "operand) / uniform_dequantize (+ bitcast_convert), iree-compile llvm-cpu", "stablehlo_lowering",
                  ("uniform_quantize", "uniform_dequantize", "uniform_requantize"), _uq_supports, _uq_run, _uq_snippet)


# ---- matmul: stablehlo.dot_general on !quant.uniform operands (matmul.md §5.5, §6.3) --------------------------
def _mm_func(name: str, case: Case) -> str:
    params = [f"%{k}: {tensor(v.shape, 'ui8' if v.dtype == np.uint8 else 'i8')}"
              for k, v in (("a", case.inputs["a"]), ("b", case.inputs["b"]))]
    lines, res, rt = shlo_dot_body(case, "%a", "%b")
    return func(name, params, rt, lines, res)


def _mm_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return _run_per_case(cases, "m", _mm_func,
                         lambda c, fn: {"y": codes_as(c, "y", fn(c.inputs["a"], c.inputs["b"]))})


def _mm_snippet(case: Case, i: int) -> str:
    from .onnxruntime import matmul_literal

    one = matmul_element_case(case, i)
    text = one_line(module(_mm_func("f", one), newline=False))
    return python_c(
        "import numpy as np, iree.compiler as ic, iree.runtime as rt",
        f"a = {matmul_literal(one.inputs['a'])}", f"b = {matmul_literal(one.inputs['b'])}",
        f"m = rt.load_vm_flatbuffer(ic.compile_str({text!r}, target_backends=['llvm-cpu'], "
        f"extra_args={FLAGS!r}), driver='local-task')",
        "y = np.asarray(m.f(a, b)).reshape(-1)", "print(hex(int(y.view(f'u{y.dtype.itemsize}')[0])))")


def _matmul_target() -> Target:
    return Target(BACKEND, "iree.dot_general.matmul", "matmul", "stablehlo.dot_general on !quant.uniform operands "
                  "(bitcast_convert from the storage integers), iree-compile llvm-cpu: qlinear_matmul with the "
                  "case's scales and zero points and a requantized result type, matmul_integer with scales 1 and "
                  "an !quant.uniform<i32:f32, 1.0> result (the accumulator)", "stablehlo_lowering",
                  ("matmul_integer", "qlinear_matmul"), dot_supports, _mm_run, _mm_snippet)


__all__ = ["BACKEND", "DISTRIBUTIONS", "FLAGS", "targets"]
