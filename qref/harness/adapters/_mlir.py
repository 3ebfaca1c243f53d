"""MLIR text shared by the MLIR-based adapters (iree, mlir, stablehlo): scalar bodies of element conversions with
every input and output passed as integer bit patterns (so bfloat16, f8 and NaN payloads cross the boundary
unchanged), and the types of qref formats. Every operation's text comes from the one writer,
``qref.interop.mlir.stablehlo``."""

from __future__ import annotations

import re
from typing import Any

from ...interop.mlir.stablehlo import MLIR_TYPES, WIDTH, Body, cast, dot_general, func, quant_uniform, tensor
from ..families.uniform import scheme_of, to_scheme_of
from ..model import Unsupported
from ._common import element_signature, unsupported_reason


def mlir_type(name: str, what: str = "format") -> str:
    t = MLIR_TYPES.get(name)
    if t is None:
        raise Unsupported(f"MLIR has no builtin type for {what} {name}")
    return t


def storage_width(t: str) -> int:
    """Width of the integer that carries a value of type t across the function boundary (>= 8)."""
    return max(8, WIDTH[t])


def element_body(sig: tuple[str, str, str, str], arg: str = "%a") -> tuple[list[str], str, str, str]:
    """(lines, result, input integer type, output integer type) of the scalar computation of an element case
    signature (operation, format, input dtype, output dtype) with arith ops: truncf (encode), extf (decode),
    both (quantize). Raises Unsupported when arith has no such op."""
    op, fmt, src, out = sig
    F = mlir_type(fmt)
    b = Body(indent="")
    if op == "decode":
        O = mlir_type(out, "dtype")
        w = WIDTH[F]
        cin = f"i{storage_width(F)}"
        v = arg
        if w < 8:
            v = b.let("%c", cast("arith.trunci", v, "i8", f"i{w}"))
        if WIDTH[O] <= WIDTH[F]:
            raise Unsupported(f"arith.extf needs a wider result type: {F} -> {O} has no arith op")
        b.let("%f", cast("arith.bitcast", v, f"i{w}", F))
        b.let("%e", cast("arith.extf", "%f", F, O))
        return b.lines, b.let("%r", cast("arith.bitcast", "%e", O, f"i{WIDTH[O]}")), cin, f"i{WIDTH[O]}"
    S = mlir_type(src, "dtype")
    if WIDTH[F] >= WIDTH[S]:
        raise Unsupported(f"arith.truncf needs a narrower result type: {S} -> {F} has no arith op")
    b.let("%f", cast("arith.bitcast", arg, f"i{WIDTH[S]}", S))
    b.let("%t", cast("arith.truncf", "%f", S, F))
    if op == "encode":
        w = WIDTH[F]
        res = b.let("%b", cast("arith.bitcast", "%t", F, f"i{w}"))
        if w < 8:
            res = b.let("%r", cast("arith.extui", "%b", f"i{w}", "i8"))
        return b.lines, res, f"i{WIDTH[S]}", f"i{storage_width(F)}"
    b.let("%e", cast("arith.extf", "%t", F, S))
    return b.lines, b.let("%r", cast("arith.bitcast", "%e", S, f"i{WIDTH[S]}")), f"i{WIDTH[S]}", f"i{WIDTH[S]}"


#: a target's ``supports`` for element cases as arith ops (None, or why ``element_body`` refuses the signature)
element_supports = unsupported_reason(lambda case: element_body(element_signature(case)))


def _linalg_elementwise(lead: str, kind: str, body: list[str], res: str, tin: str, tout: str, out: str) -> str:
    """``lead`` (``%y = linalg.generic`` or ``linalg.generic``) applying the scalar body to each element of %x
    into ``out`` (1-D ``kind``: tensor or memref of unknown size)."""
    inner = "\n".join(f"      {ln}" for ln in body)
    pad = " " * (len(lead) + 6)  # iterator_types under indexing_maps
    return (f"{lead} {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],\n"
            f"{pad}iterator_types = [\"parallel\"]}} ins(%x : {kind}<?x{tin}>) outs({out} : {kind}<?x{tout}>) {{\n"
            f"    ^bb0(%a: {tin}, %o: {tout}):\n{inner}\n      linalg.yield {res} : {tout}\n    }}")


def generic_tensor_func(name: str, body: list[str], res: str, tin: str, tout: str) -> str:
    """A func on dynamically shaped 1-D tensors applying the scalar body elementwise (linalg.generic)."""
    y = _linalg_elementwise("%y = linalg.generic", "tensor", body, res, tin, tout, "%e0")
    lines = ["%c0 = arith.constant 0 : index", f"%n = tensor.dim %x, %c0 : tensor<?x{tin}>",
             f"%e0 = tensor.empty(%n) : tensor<?x{tout}>", f"{y} -> tensor<?x{tout}>"]
    return func(name, (f"%x: tensor<?x{tin}>",), f"tensor<?x{tout}>", lines, "%y")


def generic_memref_func(name: str, body: list[str], res: str, tin: str, tout: str) -> str:
    """The same on memrefs (for the upstream pipeline and the ExecutionEngine): @name(%x, %y) writes y."""
    lines = [_linalg_elementwise("linalg.generic", "memref", body, res, tin, tout, "%y")]
    return func(name, (f"%x: memref<?x{tin}>", f"%y: memref<?x{tout}>"), None, lines, None,
                attributes="llvm.emit_c_interface")


def func_name(sig: tuple[str, ...]) -> str:
    return "f_" + "_".join(s.replace("<", "").replace(">", "").replace(":", "").replace("-", "m") for s in sig)


def diagnostic(exc: BaseException, limit: int = 240) -> str:
    """The first MLIR error of a compiler/pass failure, without locations and op dumps: e.g. "failed to legalize
    operation 'arith.truncf' that was explicitly marked illegal: (vector<4xf64>) -> vector<4xf8E4M3FN>"."""
    text = str(exc)
    # the parser's and the pass manager's summary lines name no cause: the next error line does
    # ('"-":2:7: 'quant.qcast' op ...')
    lines = [ln for ln in text.splitlines() if "error:" in ln and not any(
        g in ln for g in ("Unable to parse module assembly", "Failure while executing pass pipeline"))]
    if not lines:
        lines = [ln for ln in text.splitlines() if ln.strip()] or [type(exc).__name__]
        msg = lines[0].strip()
    else:
        msg = lines[0].split("error:", 1)[1].strip()
    m = re.search(r'%\S+ = "[\w.]+"\([^)]*\) (?:<[^>]*> )?(?:\{[^}]*\} )?: (\([^)]*\) -> [^ ]+)', msg)
    if m:
        msg = msg[: msg.index("%")].rstrip() + " " + m.group(1)
    msg = re.sub(r"\s*loc\(.*$", "", msg)
    msg = re.sub(r'^"-":\d+:\d+:\s*', "", msg)
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


# ---- uniform quantization (StableHLO ops and the quant dialect) ------------------------------------------------
def quant_type(case: object) -> tuple[str, str, int, bool]:
    """(the case scheme's !quant.uniform type, its storage integer type, storage bits, signed)."""
    return scheme_quant_type(scheme_of(case))  # type: ignore[arg-type]


def scheme_quant_type(sch: Any) -> tuple[str, str, int, bool]:
    """quant_type of a UniformScheme (the output type of a requantize case: ``to_scheme_of``). Float storage
    (``!quant.uniform<f8E4M3FN:f32, ...>``) gives its MLIR float type as the storage type and signed=False: its
    codes cross the boundary as unsigned integers of the format's width (widened to 8 bits)."""
    from ...formats import IntFormat
    from ...interop.mlir import format_type

    if sch.granularity == "blocked":
        raise Unsupported("sub-channel (blocked) quantized types are not supported")
    if not isinstance(sch.storage, IntFormat):
        return format_type(sch), mlir_type(sch.storage.name, "storage format"), sch.storage.bits, False
    b, signed = sch.storage.bits, sch.storage.signed
    return format_type(sch), (f"i{b}" if signed else f"ui{b}"), b, signed


def is_float_storage(storage_type: str) -> bool:
    """Whether a storage type of scheme_quant_type is a float type (f8E4M3FN, f8E5M2, f4E2M1FN)."""
    return storage_type.startswith("f")


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) + "x" if shape else ""


def shlo_uniform_body(case: object, x: str) -> tuple[list[str], str, str]:
    """StableHLO lines computing the case from the SSA value ``x`` (the input tensor); (lines, result, result
    element type). Quantize returns the storage integers (4-bit widened to 8), dequantize the value bits."""

    c = case
    qt, it, b, signed = quant_type(c)
    (iname,) = c.inputs  # type: ignore[attr-defined]
    arr = c.inputs[iname]  # type: ignore[attr-defined]
    sh = shape_text(arr.shape)
    body = Body(indent="")
    if is_float_storage(it) and c.operation in ("uniform_quantize", "uniform_dequantize"):  # type: ignore[attr-defined]
        return _shlo_float_storage_body(c, body, x, qt, it, b, sh)
    if c.operation == "uniform_requantize":  # type: ignore[attr-defined]
        qt2, it2, b2, signed2 = scheme_quant_type(to_scheme_of(c))  # type: ignore[arg-type]
        _storage_in(body, x, sh, qt, it, b, signed)
        body.convert("uniform_quantize", "%q", sh, qt, qt2, name="%u")
        return _storage_out(body, "%u", sh, qt2, it2, b2, signed2)
    if c.operation == "uniform_quantize":  # type: ignore[attr-defined]
        body.convert("uniform_quantize", x, sh, mlir_type(arr.dtype.name, "dtype"), qt, name="%q")
        return _storage_out(body, "%q", sh, qt, it, b, signed)
    _storage_in(body, x, sh, qt, it, b, signed)
    return _shlo_dequantize_tail(c, body, qt, sh)


def _storage_in(body: Body, x: str, sh: str, qt: str, it: str, b: int, signed: bool) -> None:
    """Lines making %q (quantized type qt) of the storage integers x (type it; below 8 bits they arrive widened
    to i8 / ui8)."""
    v = x
    if b < 8:
        v = body.convert("convert", x, sh, "i8" if signed else "ui8", it, name="%n")
    body.convert("bitcast_convert", v, sh, it, qt, name="%q")


def _storage_out(body: Body, u: str, sh: str, qt: str, it: str, b: int, signed: bool) -> tuple[list[str], str, str]:
    """(lines, result, its element type): the storage integers (type it) of u (quantized type qt), widened to
    i8 / ui8 below 8 bits."""
    res = body.convert("bitcast_convert", u, sh, qt, it, name="%b")
    if b < 8:
        wide = "i8" if signed else "ui8"
        return body.lines, body.convert("convert", res, sh, it, wide, name="%r"), wide
    return body.lines, res, it


def _shlo_dequantize_tail(c: Any, body: Body, qt: str, sh: str) -> tuple[list[str], str, str]:
    """The end of a dequantize body: %q (of quantized type qt) dequantized to the expressed type, converted to the
    case's output dtype, read back as unsigned integers of its width."""
    et = mlir_type(scheme_of(c).expressed.name, "expressed type")
    (oname,) = c.expected
    ot = mlir_type(c.expected[oname].dtype.name, "dtype")
    res = body.convert("uniform_dequantize", "%q", sh, qt, et, name="%y")
    if ot != et:
        res = body.convert("convert", res, sh, et, ot, name="%o")
    w = WIDTH[ot]
    return body.lines, body.convert("bitcast_convert", res, sh, ot, f"ui{w}", name="%r"), f"ui{w}"


def _shlo_float_storage_body(c: Any, body: Body, x: str, qt: str, ft: str, b: int, sh: str
                             ) -> tuple[list[str], str, str]:
    """shlo_uniform_body for float storage: the element codes cross as ui8 and are bitcast to and from the float
    type (4-bit types through ui4)."""

    ui = f"ui{b}"
    if c.operation == "uniform_quantize":
        body.convert("uniform_quantize", x, sh, mlir_type(c.inputs["x"].dtype.name, "dtype"), qt, name="%q")
        body.convert("bitcast_convert", "%q", sh, qt, ft, name="%f")
        res = body.convert("bitcast_convert", "%f", sh, ft, ui, name="%b")
        if b < 8:
            return body.lines, body.convert("convert", res, sh, ui, "ui8", name="%r"), "ui8"
        return body.lines, res, ui
    v = x
    if b < 8:
        v = body.convert("convert", x, sh, "ui8", ui, name="%n")
    body.convert("bitcast_convert", v, sh, ui, ft, name="%f")
    body.convert("bitcast_convert", "%f", sh, ft, qt, name="%q")
    return _shlo_dequantize_tail(c, body, qt, sh)


def uniform_input_type(case: object) -> str:
    """MLIR element type in which the case's input crosses the boundary (floats as floats, codes widened to 8
    bits)."""
    (iname,) = case.inputs  # type: ignore[attr-defined]
    arr = case.inputs[iname]  # type: ignore[attr-defined]
    if case.operation == "uniform_quantize":  # type: ignore[attr-defined]
        return mlir_type(arr.dtype.name, "dtype")
    _, it, b, signed = quant_type(case)
    if is_float_storage(it):
        return f"ui{max(8, b)}"
    return it if b >= 8 else ("i8" if signed else "ui8")


def uniform_types(case: Any) -> tuple[object, ...]:
    """The MLIR types a uniform case needs (its quantized type(s), its input type); Unsupported when one has
    none."""
    types: tuple[object, ...] = (quant_type(case), uniform_input_type(case))
    if case.operation == "uniform_requantize":
        types += (scheme_quant_type(to_scheme_of(case)),)
    return types


#: a target's ``supports`` for uniform cases as stablehlo.uniform_quantize / uniform_dequantize (None, or why
#: ``uniform_types`` refuses the case)
uniform_supports = unsupported_reason(uniform_types)


#: diagnostics of a lowering or runtime failure after the module parsed and verified: the backend accepts the
#: operation on these types (StableHLO's uniform_quantize takes any quantization_dimension and i2/i4 storage of
#: any length) and then fails to compile or run it
LOWERING_FAILURES = ("failed to legalize", "does not have integral number of total bytes", "non prefix-padded")


class CompileFailure(RuntimeError):
    """A claimed operation that failed to compile or run: reported as a crash (docs/conformance.md §0)."""


def as_crash(exc: BaseException) -> BaseException:
    """An Unsupported whose diagnostic is a lowering failure (LOWERING_FAILURES) as a CompileFailure (a crash);
    any other exception unchanged (a parse or verifier rejection stays "unsupported", with its diagnostic)."""
    if isinstance(exc, Unsupported) and any(p in str(exc) for p in LOWERING_FAILURES):
        return CompileFailure(str(exc))
    return exc


# ---- matmul: stablehlo.dot_general on !quant.uniform operands (matmul.md §5.5, §6.3) ---------------------------
#: qref storage -> (quant storage type, tensor element type)
DOT_STORAGE = {"int8": ("i8", "i8"), "uint8": ("u8", "ui8"), "int32": ("i32", "i32")}


def _scale_text(s: float) -> str:
    """A float32 scale as the decimal MLIR parses to the same double (repr of the float32 value, exact)."""
    return repr(float(s))


def dot_quant_type(storage: str, scale: object, zero_point: object, axis: int) -> str:
    """``!quant.uniform<...>`` of a dot_general operand or result: per tensor when scale and zero point are one
    value, else per axis ``axis`` (one scale:zero point per index)."""
    if storage not in DOT_STORAGE:
        raise Unsupported(f"StableHLO quantized dot_general: no {storage} storage here")
    st = DOT_STORAGE[storage][0]
    import numpy as np

    s = np.asarray(scale, dtype=np.float32).reshape(-1)
    z = np.asarray(zero_point).astype(np.int64).reshape(-1)
    if s.size == 1 and z.size == 1:
        return quant_uniform(st, "f32", ((_scale_text(s[0]), int(z[0])),), None)
    n = max(s.size, z.size)
    s, z = np.broadcast_to(s, (n,)), np.broadcast_to(z, (n,))
    return quant_uniform(st, "f32", [(_scale_text(a), int(b)) for a, b in zip(s, z)], axis)


def dot_types(case: Any) -> tuple[str, str, str, str, str, str]:
    """(lhs quant type, rhs quant type, result quant type, lhs / rhs tensor element type, result element type) of
    a matmul case as stablehlo.dot_general: matmul_integer with scales 1 and an i32 result of scale 1 (the
    accumulator, the multiplier being 1), qlinear_matmul with the case's scales and zero points."""
    p, ins = case.params, case.inputs
    if "bias" in ins:
        raise Unsupported("stablehlo.dot_general has no bias operand")
    if case.operation == "matmul_integer":
        a_s = b_s = y_s = 1.0
        out, zy = "int32", 0
    else:
        a_s, b_s, y_s = ins["a_scale"], ins["b_scale"], ins["y_scale"]
        out, zy = p["output"], ins["y_zero_point"]
    qa = dot_quant_type(p["a_storage"], a_s, ins["a_zero_point"], 0)
    qb = dot_quant_type(p["b_storage"], b_s, ins["b_zero_point"], 1)
    qy = dot_quant_type(out, y_s, zy, 1)
    return qa, qb, qy, DOT_STORAGE[p["a_storage"]][1], DOT_STORAGE[p["b_storage"]][1], DOT_STORAGE[out][1]


#: a target's ``supports`` for matmul cases as stablehlo.dot_general (None, or why ``dot_types`` refuses the case)
dot_supports = unsupported_reason(dot_types)


def shlo_dot_body(case: Any, a: str, b: str) -> tuple[list[str], str, str]:
    """StableHLO lines computing a matmul case from the SSA values ``a`` (M x K storage integers) and ``b``
    (K x N): bitcast to the quantized types, dot_general, bitcast of the result to its storage integers;
    (lines, result, result tensor type)."""
    qa, qb, qy, ta, tb, ty = dot_types(case)
    M, K = case.inputs["a"].shape
    N = case.inputs["b"].shape[1]
    body = Body(indent="")
    body.convert("bitcast_convert", a, (M, K), ta, qa, name="%qa")
    body.convert("bitcast_convert", b, (K, N), tb, qb, name="%qb")
    body.let("%qy", dot_general("%qa", "%qb", tensor((M, K), qa), tensor((K, N), qb), tensor((M, N), qy)))
    return body.lines, body.convert("bitcast_convert", "%qy", (M, N), qy, ty, name="%y"), tensor((M, N), ty)


def matmul_element_case(case: Any, i: int) -> Any:
    """A copy of a matmul case reduced to output element ``i`` (the family's ``reduce``: row m of a times column n
    of b with that row's and column's quantization parameters, the minimal reproducer)."""
    from ..families.matmul import reduce

    return reduce(case, i)


__all__ = ["LOWERING_FAILURES", "WIDTH", "CompileFailure", "as_crash", "diagnostic", "dot_supports", "dot_types",
           "element_body", "element_supports", "func_name", "generic_memref_func", "generic_tensor_func",
           "is_float_storage", "matmul_element_case", "mlir_type", "quant_type", "scheme_quant_type", "shape_text",
           "shlo_dot_body", "shlo_uniform_body", "uniform_input_type", "uniform_supports", "uniform_types"]
