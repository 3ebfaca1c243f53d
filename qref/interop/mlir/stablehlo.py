"""StableHLO text: the one writer of the MLIR text qref emits (the MLIR export, the harness adapters of IREE,
upstream MLIR and the StableHLO interpreter): StableHLO operations, the ``func.func`` / ``module`` around them,
the casts of the builtin dialects (``arith``, ``quant``) and the types they name.

Generic and pretty forms ([SHLO]: the StableHLO specification's syntax; [MLIR]: the builtin dialects' syntax):

    tensor((2, 3), "f32")                          tensor<2x3xf32>
    constant('0x3F80', "tensor<f16>")              stablehlo.constant dense<"0x3F80"> : tensor<f16>
    unary("convert", "%x", T1, T2)                 stablehlo.convert %x : (T1) -> T2
    elementwise("and", ("%a", "%b"), T)            stablehlo.and %a, %b : T
    generic("slice", ("%x",), "{...}", (T1,), T2)  "stablehlo.slice"(%x) {...} : (T1) -> T2
    dot_general("%a", "%b", T1, T2, T3)            stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
                                                       : (T1, T2) -> T3
    cast("arith.extf", "%f", "f8E4M3FN", "f32")    arith.extf %f : f8E4M3FN to f32
    func("f", ("%x: T1",), T2, lines, "%r")        func.func @f(%x: T1) -> T2 { lines; return %r : T2 }
    module(f1, f2)                                 module { f1 f2 }
    checking_module(lines, [(a, e, T)])            module @qref_case { func.func public @main() { lines;
                                                       check.expect_eq a, e : T; func.return } }
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MLIR_TYPES", "WIDTH", "Body", "cast", "checking_module", "constant", "dot_general", "elementwise", "func",
           "generic", "hex_literal", "module", "one_line", "quant_uniform", "tensor", "unary"]

#: qref format name -> MLIR builtin type
MLIR_TYPES = {
    "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2", "float8_e4m3fnuz": "f8E4M3FNUZ",
    "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e4m3b11fnuz": "f8E4M3B11FNUZ", "float8_e4m3": "f8E4M3",
    "float8_e3m4": "f8E3M4", "float6_e2m3fn": "f6E2M3FN", "float6_e3m2fn": "f6E3M2FN", "float4_e2m1fn": "f4E2M1FN",
    "float8_e8m0fnu": "f8E8M0FNU", "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
}
#: bit width of each MLIR float type of MLIR_TYPES
WIDTH = {"f8E4M3FN": 8, "f8E5M2": 8, "f8E4M3FNUZ": 8, "f8E5M2FNUZ": 8, "f8E4M3B11FNUZ": 8, "f8E4M3": 8, "f8E3M4": 8,
         "f6E2M3FN": 6, "f6E3M2FN": 6, "f4E2M1FN": 4, "f8E8M0FNU": 8, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def tensor(shape: int | Sequence[int] | str, element: str) -> str:
    """``tensor<4xf32>`` / ``tensor<2x3xf32>`` / ``tensor<f32>`` of a size, a shape or a dims prefix ("2x3x")."""
    if isinstance(shape, str):
        return f"tensor<{shape}{element}>"
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    return "tensor<" + "".join(f"{d}x" for d in dims) + element + ">"


def hex_literal(data: bytes) -> str:
    """The hex literal of a dense constant, ``0x`` and the raw bytes (the elements' little-endian storage)."""
    return "0x" + data.hex().upper()


def constant(literal: str, type_: str) -> str:
    """A dense constant of ``type_`` from its literal (``0x...`` raw little-endian bytes, or a value list)."""
    return f'stablehlo.constant dense<"{literal}"> : {type_}'


def unary(name: str, operand: str, in_type: str, out_type: str) -> str:
    """``stablehlo.NAME %x : (IN) -> OUT``: convert, bitcast_convert, uniform_quantize, uniform_dequantize."""
    return f"stablehlo.{name} {operand} : ({in_type}) -> {out_type}"


def elementwise(name: str, operands: Sequence[str], type_: str) -> str:
    """``stablehlo.NAME %a, %b : T``: an elementwise operation whose operands and result share one type."""
    return f"stablehlo.{name} {', '.join(operands)} : {type_}"


def generic(name: str, operands: Sequence[str], attributes: str, in_types: Sequence[str], out_type: str) -> str:
    """``"stablehlo.NAME"(%a, ...) {attributes} : (IN, ...) -> OUT``, the generic form."""
    return f'"stablehlo.{name}"({", ".join(operands)}) {attributes} : ({", ".join(in_types)}) -> {out_type}'


def dot_general(lhs: str, rhs: str, lhs_type: str, rhs_type: str, out_type: str) -> str:
    """``stablehlo.dot_general`` of a matrix product: lhs dimension 1 contracted with rhs dimension 0."""
    return (f"stablehlo.dot_general {lhs}, {rhs}, contracting_dims = [1] x [0] : ({lhs_type}, {rhs_type}) -> "
            f"{out_type}")


def cast(name: str, operand: str, in_type: str, out_type: str) -> str:
    """``NAME %x : IN to OUT``: a cast of the builtin dialects (``arith.bitcast``, ``arith.truncf``, ``arith.extf``,
    ``arith.trunci``, ``arith.extui``, ``quant.qcast``, ``quant.dcast``, ``quant.scast``)."""
    return f"{name} {operand} : {in_type} to {out_type}"


def quant_uniform(storage: str, expressed: str, params: Sequence[tuple[str, int]], axis: int | None) -> str:
    """``!quant.uniform<S:E, s:z>`` (``axis`` None, one pair) or ``!quant.uniform<S:E:axis, {s:z, ...}>`` from
    the scales' text and the zero points."""
    pairs = ", ".join(f"{s}:{z}" for s, z in params)
    if axis is None:
        return f"!quant.uniform<{storage}:{expressed}, {pairs}>"
    return f"!quant.uniform<{storage}:{expressed}:{axis}, {{{pairs}}}>"


def func(name: str, params: Sequence[str], result_type: str | None, lines: Sequence[str], result: str | None,
         attributes: str = "") -> str:
    """``func.func @name(params) -> T [attributes {...}] { lines; return result : T }`` (no result: ``result_type``
    None and a bare ``return``), on lines of its own, indented for a module (a leading newline, no trailing one)."""
    head = f"func.func @{name}({', '.join(params)})" + (f" -> {result_type}" if result_type is not None else "")
    attrs = f" attributes {{{attributes}}}" if attributes else ""
    ret = f"return {result} : {result_type}" if result_type is not None else "return"
    body = "\n    ".join(lines)
    return f"\n  {head}{attrs} {{\n    {body}\n    {ret}\n  }}"


def module(*funcs: str, newline: bool = True) -> str:
    """``module { ... }`` of functions written by ``func`` (or any text of that shape); ``newline`` False closes
    the brace right after the last function (the form the reproducers print on one line)."""
    return "module {" + "".join(funcs) + ("\n}\n" if newline else "}")


def checking_module(lines: Sequence[str], checks: Sequence[tuple[str, str, str]], name: str = "qref_case"
                    ) -> list[str]:
    """The lines of ``module @name`` whose public ``@main`` runs ``lines`` (a ``Body``'s) and checks each
    ``(actual, expected, type)`` with ``check.expect_eq`` (the StableHLO interpreter's check dialect), then a
    final empty line."""
    return [f"module @{name} {{", "  func.func public @main() {", *lines,
            *(f"    check.expect_eq {a}, {e} : {t}" for a, e, t in checks), "    func.return", "  }", "}", ""]


def one_line(text: str) -> str:
    """The text on one line: every line stripped, joined by spaces (what a reproducer script parses)."""
    return " ".join(ln.strip() for ln in text.splitlines())


class Body:
    """The operations of a function body, each bound to a fresh SSA name ``%<prefix><n>`` or to a given one."""

    def __init__(self, indent: str = "    ") -> None:
        self.lines: list[str] = []
        self.n = 0
        self.indent = indent

    def op(self, text: str, prefix: str = "v") -> str:
        """Append ``%<prefix><n> = text`` and return the new name."""
        self.n += 1
        return self.let(f"%{prefix}{self.n}", text)

    def let(self, name: str, text: str) -> str:
        """Append ``name = text`` and return ``name``."""
        self.lines.append(f"{self.indent}{name} = {text}")
        return name

    def convert(self, op: str, operand: str, shape: int | Sequence[int] | str, in_element: str, out_element: str,
                prefix: str = "v", name: str | None = None) -> str:
        """``stablehlo.OP`` (convert, bitcast_convert, uniform_quantize, uniform_dequantize) of ``operand``, a
        tensor of ``in_element`` to one of ``out_element`` of the same shape; bound to ``name``, else fresh."""
        text = unary(op, operand, tensor(shape, in_element), tensor(shape, out_element))
        return self.let(name, text) if name is not None else self.op(text, prefix)
