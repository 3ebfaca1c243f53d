"""The StableHLO reference interpreter (``torch_mlir._mlir_libs._stablehlo.eval_module``, torch-mlir's bindings):
``stablehlo.convert`` between f32/f64/f16/bf16 and every MLIR small-float type (elements; no qref profile: the
spec default is the reference) and ``stablehlo.uniform_quantize`` / ``uniform_dequantize`` (uniform profile
``stablehlo_lowering``: the interpreter lowers quantized ops with StablehloLegalizeQuantToMath), and
``stablehlo.dot_general`` on ``!quant.uniform`` operands on the matmul cases (matmul profile ``stablehlo_lowering``,
matmul.md §6.3).

One module per signature: the inputs of all its cases concatenated into a hex dense constant (raw little-endian
bytes, so NaN payloads and -0 survive), results read with ``stablehlo.bitcast_convert`` to unsigned integers
(4-bit types via ui4; 6-bit types, which have no integer type of their width, through an exact convert to f32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case, to_storage
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import _mask, codes_as, element_signature, python_c, run_each, single_element_case, storage_values
from ._mlir import (
    WIDTH,
    as_crash,
    diagnostic,
    dot_types,
    is_float_storage,
    matmul_element_case,
    mlir_type,
    quant_type,
    shape_text,
    shlo_dot_body,
    shlo_uniform_body,
    uniform_input_type,
    uniform_types,
    unsupported_reason,
)

BACKEND = "stablehlo"
DISTRIBUTIONS = ("torch-mlir",)


def _hex(arr: np.ndarray) -> str:
    return "0x" + to_storage(np.ascontiguousarray(arr)).tobytes().hex().upper()


def element_module(sig: tuple[str, str, str, str], x: np.ndarray) -> tuple[str, str]:
    """(module text, how to read the result: "u<bits>" or "f6") for an element signature on input ``x`` (the
    source values, or the codes for decode)."""
    op, fmt, src, out = sig
    F = mlir_type(fmt)
    n = x.size
    lines = []
    if op == "decode":
        O = mlir_type(out, "dtype")
        codes = x.astype(np.uint8 if WIDTH[F] <= 8 else np.uint16)
        lines.append(f'%x = stablehlo.constant dense<"{_hex(codes)}"> : tensor<{n}x{F}>')
        lines.append(f"%y = stablehlo.convert %x : (tensor<{n}x{F}>) -> tensor<{n}x{O}>")
        res_t, res = O, "%y"
    else:
        S = mlir_type(src, "dtype")
        lines.append(f'%x = stablehlo.constant dense<"{_hex(x)}"> : tensor<{n}x{S}>')
        lines.append(f"%y = stablehlo.convert %x : (tensor<{n}x{S}>) -> tensor<{n}x{F}>")
        res_t, res = F, "%y"
        if op == "quantize":
            lines.append(f"%z = stablehlo.convert %y : (tensor<{n}x{F}>) -> tensor<{n}x{S}>")
            res_t, res = S, "%z"
    w = WIDTH[res_t]
    if w == 6:
        lines.append(f"%r = stablehlo.convert {res} : (tensor<{n}x{res_t}>) -> tensor<{n}xf32>")
        ret_t, how = "f32", "f6"
    elif w == 4:
        lines.append(f"%b = stablehlo.bitcast_convert {res} : (tensor<{n}x{res_t}>) -> tensor<{n}xui4>")
        lines.append(f"%r = stablehlo.convert %b : (tensor<{n}xui4>) -> tensor<{n}xui8>")
        ret_t, how = "ui8", "u8"
    else:
        lines.append(f"%r = stablehlo.bitcast_convert {res} : (tensor<{n}x{res_t}>) -> tensor<{n}xui{w}>")
        ret_t, how = f"ui{w}", f"u{w}"
    body = "\n    ".join(lines)
    text = (f"module {{\n  func.func @main() -> tensor<{n}x{ret_t}> {{\n    {body}\n"
            f"    return %r : tensor<{n}x{ret_t}>\n  }}\n}}\n")
    return text, how


def evaluate(text: str) -> list[np.ndarray]:
    """Run @main of a module in the reference interpreter; the results as numpy arrays."""
    from torch_mlir import ir
    from torch_mlir._mlir_libs import _stablehlo

    ctx = ir.Context()
    _stablehlo.register_dialect(ctx)
    errors: list[str] = []
    ctx.attach_diagnostic_handler(lambda d: errors.append(str(d.message)) or True)
    with ctx:
        try:
            module = ir.Module.parse(text)
            res = _stablehlo.eval_module(module, [])
        except Exception as exc:
            msg = errors[0] if errors else str(exc)
            raise Unsupported(f"stablehlo interpreter: {diagnostic(RuntimeError('error: ' + msg))}") from None
        return [np.array(r) for r in res]


def _read(how: str, y: np.ndarray, fmt: str) -> np.ndarray:
    if how == "f6":
        import ml_dtypes

        return y.astype(np.float32).astype(getattr(ml_dtypes, fmt)).view(np.uint8)
    return y.view(f"uint{how[1:]}") if y.dtype.kind in "iu" else y


def _el_supports(case: Case) -> str | None:
    op, fmt, src, _out = element_signature(case)
    try:
        mlir_type(fmt)
        if op != "decode":
            mlir_type(src, "dtype")
    except Unsupported as exc:
        return str(exc)
    return None


def _el_one(case: Case) -> Outputs:
    sig = element_signature(case)
    src = "codes" if sig[0] == "decode" else "x"
    text, how = element_module(sig, case.inputs[src].reshape(-1))
    (y,) = evaluate(text)
    y = _read(how, y.reshape(-1), sig[1] if sig[0] == "encode" else sig[2])
    (oname,) = case.expected
    return {oname: codes_as(case, oname, y)}


def _el_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _el_one)


def _el_snippet(case: Case, i: int) -> str:
    sig = element_signature(case)
    src = "codes" if sig[0] == "decode" else "x"
    x = case.inputs[src].reshape(-1)[i : i + 1]
    text, how = element_module(sig, x)
    text = " ".join(ln.strip() for ln in text.splitlines())
    read = "np.array(r[0]).reshape(-1)"
    if how == "f6":
        read = f"np.array(r[0]).astype(np.float32).astype(ml_dtypes.{sig[1] if sig[0] == 'encode' else sig[2]})" \
               ".view(np.uint8)"
    return python_c(
        "import numpy as np, ml_dtypes",
        "from torch_mlir import ir", "from torch_mlir._mlir_libs import _stablehlo as s",
        "c = ir.Context(); s.register_dialect(c); c.__enter__()",
        f"r = s.eval_module(ir.Module.parse({text!r}), [])",
        f"print(hex(int({read}[0]) & 0x{(1 << int(how[1:])) - 1 if how != 'f6' else 0xFF:X}))")


# ---- uniform -----------------------------------------------------------------------------------------------
def uniform_module(case: Case) -> str:
    (iname,) = case.inputs
    arr = case.inputs[iname] if case.operation == "uniform_quantize" else storage_values(case)
    it = uniform_input_type(case)
    sh = shape_text(arr.shape)
    lines, res, rt = shlo_uniform_body(case, "%x")
    body = "\n    ".join([f'%x = stablehlo.constant dense<"{_hex(arr)}"> : tensor<{sh}{it}>', *lines])
    return (f"module {{\n  func.func @main() -> tensor<{sh}{rt}> {{\n    {body}\n    return {res} : "
            f"tensor<{sh}{rt}>\n  }}\n}}\n")


#: the interpreter's verifier on float-storage quantized types (torch-mlir 20261001): in most processes it
#: rejects them with this diagnostic, in others (about half of fresh processes, same module text) it lets them
#: through and runs the integer lowering (x / s rounded to an integer, then converted: 0.6 / 0.5 -> 0x38, as IREE).
#: The harness reports the rejection every time, so that a run does not depend on the process (uniform.md §4.3).
FLOAT_STORAGE = ("stablehlo interpreter: 'stablehlo.uniform_quantize' op result #0 must be ranked tensor of "
                 "per-tensor integer quantized or per-axis integer quantized values (float storage "
                 "{t}; the verifier lets it through in some processes: nondeterministic, not run)")


def _uq_check(case: Case) -> tuple[object, ...]:
    types = uniform_types(case)
    _qt, it, _b, _signed = quant_type(case)
    if is_float_storage(it):
        raise Unsupported(FLOAT_STORAGE.format(t=it))
    return types


_uq_supports = unsupported_reason(_uq_check)


def _uq_one(case: Case) -> Outputs:
    try:
        (y,) = evaluate(uniform_module(case))
    except Unsupported as exc:  # a lowering failure of a claimed op/type is a crash
        raise as_crash(exc) from None
    (oname,) = case.expected
    return {oname: codes_as(case, oname, y)}


def _uq_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _uq_one)


def _module_snippet(module: str, mask: str) -> str:
    """The standalone script that evaluates a module in the StableHLO interpreter and prints its first result's
    first element as hex bits (``mask``: the `` & 0x..`` of a sub-byte storage, or "")."""
    text = " ".join(ln.strip() for ln in module.splitlines())
    return python_c(
        "import numpy as np", "from torch_mlir import ir", "from torch_mlir._mlir_libs import _stablehlo as s",
        "c = ir.Context(); s.register_dialect(c); c.__enter__()",
        f"r = s.eval_module(ir.Module.parse({text!r}), [])",
        f"y = np.array(r[0]).reshape(-1); print(hex(int(y.view(f'u{{y.dtype.itemsize}}')[0]){mask}))")


def _uq_snippet(case: Case, i: int) -> str:
    one = single_element_case(case, i)
    return _module_snippet(uniform_module(one), _mask(one))


# ---- matmul: stablehlo.dot_general on !quant.uniform operands (matmul.md §5.5, §6.3) ------------------------
def matmul_module(case: Case) -> str:
    a, b = np.ascontiguousarray(case.inputs["a"]), np.ascontiguousarray(case.inputs["b"])
    lines, res, rt = shlo_dot_body(case, "%a", "%b")
    ta, tb = (f"tensor<{shape_text(x.shape)}{'ui8' if x.dtype == np.uint8 else 'i8'}>" for x in (a, b))
    body = "\n    ".join([f'%a = stablehlo.constant dense<"{_hex(a)}"> : {ta}',
                          f'%b = stablehlo.constant dense<"{_hex(b)}"> : {tb}', *lines])
    return f"module {{\n  func.func @main() -> {rt} {{\n    {body}\n    return {res} : {rt}\n  }}\n}}\n"


_mm_supports = unsupported_reason(dot_types)


def _mm_one(case: Case) -> Outputs:
    try:
        (y,) = evaluate(matmul_module(case))
    except Unsupported as exc:  # a lowering failure of a claimed op/type is a crash
        raise as_crash(exc) from None
    return {"y": codes_as(case, "y", y)}


def _mm_snippet(case: Case, i: int) -> str:
    return _module_snippet(matmul_module(matmul_element_case(case, i)), "")


def targets() -> list[Target]:
    require("torch_mlir.ir", "torch_mlir._mlir_libs._stablehlo", backend=BACKEND, hint="pip install torch-mlir")
    return [
        Target(BACKEND, "stablehlo.convert", "elements", "stablehlo.convert in the StableHLO reference interpreter "
               "(eval_module)", None, ("encode", "decode", "quantize"), _el_supports, _el_run, _el_snippet),
        Target(BACKEND, "stablehlo.uniform", "uniform", "stablehlo.uniform_quantize (float or quantized operand) / "
               "uniform_dequantize in the StableHLO reference interpreter", "stablehlo_lowering",
               ("uniform_quantize", "uniform_dequantize", "uniform_requantize"),
               _uq_supports, _uq_run, _uq_snippet),
        Target(BACKEND, "stablehlo.dot_general.matmul", "matmul", "stablehlo.dot_general on !quant.uniform operands "
               "(bitcast_convert from the storage integers) in the StableHLO reference interpreter: qlinear_matmul "
               "with the case's scales and zero points and a requantized result type, matmul_integer with scales "
               "1 and an !quant.uniform<i32:f32, 1.0> result (the accumulator)", "stablehlo_lowering",
               ("matmul_integer", "qlinear_matmul"), _mm_supports, lambda cs: run_each(cs, _mm_one), _mm_snippet,
               notes="per-axis operands are written as per-axis types and left to the verifier"),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "evaluate", "targets", "uniform_module"]
