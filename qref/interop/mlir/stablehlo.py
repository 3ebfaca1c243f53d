"""StableHLO text: the one writer of StableHLO operations in qref (the MLIR export, the harness adapters).

Generic and pretty forms of the operations qref emits ([SHLO]: the StableHLO specification's syntax):

    tensor((2, 3), "f32")                          tensor<2x3xf32>
    constant('0x3F80', "tensor<f16>")              stablehlo.constant dense<"0x3F80"> : tensor<f16>
    unary("convert", "%x", T1, T2)                 stablehlo.convert %x : (T1) -> T2
    elementwise("and", ("%a", "%b"), T)            stablehlo.and %a, %b : T
    generic("slice", ("%x",), "{...}", (T1,), T2)  "stablehlo.slice"(%x) {...} : (T1) -> T2
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Body", "constant", "elementwise", "generic", "tensor", "unary"]


def tensor(shape: int | Sequence[int] | str, element: str) -> str:
    """``tensor<4xf32>`` / ``tensor<2x3xf32>`` / ``tensor<f32>`` of a size, a shape or a dims prefix ("2x3x")."""
    if isinstance(shape, str):
        return f"tensor<{shape}{element}>"
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    return "tensor<" + "".join(f"{d}x" for d in dims) + element + ">"


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


class Body:
    """The operations of a function body, each bound to a fresh SSA name ``%<prefix><n>``."""

    def __init__(self, indent: str = "    ") -> None:
        self.lines: list[str] = []
        self.n = 0
        self.indent = indent

    def op(self, text: str, prefix: str = "v") -> str:
        """Append ``%<prefix><n> = text`` and return the new name."""
        self.n += 1
        name = f"%{prefix}{self.n}"
        self.lines.append(f"{self.indent}{name} = {text}")
        return name
