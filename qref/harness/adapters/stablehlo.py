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

import numpy as np

from ...conformance.case import Case
from ...conformance.export.mlir import hex_dense
from ...interop.mlir.stablehlo import WIDTH, Body, constant, func, module, one_line, tensor
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import (
    _mask,
    codes_as,
    element_signature,
    per_case,
    python_c,
    single_element_case,
    uniform_input,
    unsupported_reason,
)
from ._mlir import (
    as_crash,
    diagnostic,
    dot_supports,
    is_float_storage,
    matmul_element_case,
    mlir_type,
    quant_type,
    shape_text,
    shlo_dot_body,
    shlo_uniform_body,
    uniform_input_type,
    uniform_types,
)

BACKEND = "stablehlo"
DISTRIBUTIONS = ("torch-mlir",)


def element_module(sig: tuple[str, str, str, str], x: np.ndarray) -> tuple[str, str]:
    """(module text, how to read the result: "u<bits>" or "f6") for an element signature on input ``x`` (the
    source values, or the codes for decode)."""
    op, fmt, src, out = sig
    F = mlir_type(fmt)
    n = x.size
    b = Body(indent="")
    if op == "decode":
        O = mlir_type(out, "dtype")
        b.let("%x", constant(hex_dense(x.astype(np.uint8 if WIDTH[F] <= 8 else np.uint16)), tensor(n, F)))
        res_t, res = O, b.convert("convert", "%x", n, F, O, name="%y")
    else:
        S = mlir_type(src, "dtype")
        b.let("%x", constant(hex_dense(x), tensor(n, S)))
        res_t, res = F, b.convert("convert", "%x", n, S, F, name="%y")
        if op == "quantize":
            res_t, res = S, b.convert("convert", "%y", n, F, S, name="%z")
    w = WIDTH[res_t]
    if w == 6:
        b.convert("convert", res, n, res_t, "f32", name="%r")
        ret_t, how = "f32", "f6"
    elif w == 4:
        b.convert("bitcast_convert", res, n, res_t, "ui4", name="%b")
        b.convert("convert", "%b", n, "ui4", "ui8", name="%r")
        ret_t, how = "ui8", "u8"
    else:
        b.convert("bitcast_convert", res, n, res_t, f"ui{w}", name="%r")
        ret_t, how = f"ui{w}", f"u{w}"
    return module(func("main", (), tensor(n, ret_t), b.lines, "%r")), how


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


def _el_snippet(case: Case, i: int) -> str:
    sig = element_signature(case)
    src = "codes" if sig[0] == "decode" else "x"
    x = case.inputs[src].reshape(-1)[i : i + 1]
    text, how = element_module(sig, x)
    text = one_line(text)
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
    arr = uniform_input(case)
    sh = shape_text(arr.shape)
    lines, res, rt = shlo_uniform_body(case, "%x")
    x = "%x = " + constant(hex_dense(arr), tensor(sh, uniform_input_type(case)))
    return module(func("main", (), tensor(sh, rt), [x, *lines], res))


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


def _evaluate_claimed(text: str) -> np.ndarray:
    """The one result of a module of operations the target claims: a lowering failure is a crash."""
    try:
        (y,) = evaluate(text)
    except Unsupported as exc:
        raise as_crash(exc) from None
    return y


def _uq_one(case: Case) -> Outputs:
    (oname,) = case.expected
    return {oname: codes_as(case, oname, _evaluate_claimed(uniform_module(case)))}


def _module_snippet(text: str, mask: str) -> str:
    """The standalone script that evaluates a module in the StableHLO interpreter and prints its first result's
    first element as hex bits (``mask``: the `` & 0x..`` of a sub-byte storage, or "")."""
    return python_c(
        "import numpy as np", "from torch_mlir import ir", "from torch_mlir._mlir_libs import _stablehlo as s",
        "c = ir.Context(); s.register_dialect(c); c.__enter__()",
        f"r = s.eval_module(ir.Module.parse({one_line(text)!r}), [])",
        f"y = np.array(r[0]).reshape(-1); print(hex(int(y.view(f'u{{y.dtype.itemsize}}')[0]){mask}))")


def _uq_snippet(case: Case, i: int) -> str:
    one = single_element_case(case, i)
    return _module_snippet(uniform_module(one), _mask(one))


# ---- matmul: stablehlo.dot_general on !quant.uniform operands (matmul.md §5.5, §6.3) ------------------------
def matmul_module(case: Case) -> str:
    lines, res, rt = shlo_dot_body(case, "%a", "%b")
    consts = [f"%{k} = " + constant(hex_dense(v), tensor(v.shape, "ui8" if v.dtype == np.uint8 else "i8"))
              for k, v in (("a", case.inputs["a"]), ("b", case.inputs["b"]))]
    return module(func("main", (), rt, [*consts, *lines], res))


def _mm_one(case: Case) -> Outputs:
    return {"y": codes_as(case, "y", _evaluate_claimed(matmul_module(case)))}


def _mm_snippet(case: Case, i: int) -> str:
    return _module_snippet(matmul_module(matmul_element_case(case, i)), "")


def targets() -> list[Target]:
    require("torch_mlir.ir", "torch_mlir._mlir_libs._stablehlo", backend=BACKEND, hint="pip install torch-mlir")
    return [
        Target(BACKEND, "stablehlo.convert", "elements", "stablehlo.convert in the StableHLO reference interpreter "
               "(eval_module)", "stablehlo", ("encode", "decode", "quantize"), _el_supports, per_case(_el_one),
               _el_snippet),
        Target(BACKEND, "stablehlo.uniform", "uniform", "stablehlo.uniform_quantize (float or quantized operand) / "
               "uniform_dequantize in the StableHLO reference interpreter", "stablehlo_lowering",
               ("uniform_quantize", "uniform_dequantize", "uniform_requantize"),
               _uq_supports, per_case(_uq_one), _uq_snippet),
        Target(BACKEND, "stablehlo.dot_general.matmul", "matmul", "stablehlo.dot_general on !quant.uniform operands "
               "(bitcast_convert from the storage integers) in the StableHLO reference interpreter: qlinear_matmul "
               "with the case's scales and zero points and a requantized result type, matmul_integer with scales "
               "1 and an !quant.uniform<i32:f32, 1.0> result (the accumulator)", "stablehlo_lowering",
               ("matmul_integer", "qlinear_matmul"), dot_supports, per_case(_mm_one), _mm_snippet,
               notes="per-axis operands are written as per-axis types and left to the verifier"),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "evaluate", "targets", "uniform_module"]
