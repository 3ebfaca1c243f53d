"""qref.interop.mlir.stablehlo, the one writer of the MLIR text qref emits: each form against the syntax written out
by hand ([SHLO] / MLIR's builtin dialects), a module it writes run by the StableHLO reference interpreter, and no
other module of qref/ writing StableHLO operations or functions itself."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qref.interop.mlir import stablehlo as shlo

ROOT = Path(__file__).resolve().parents[1] / "qref"


def test_operation_forms() -> None:
    assert shlo.tensor((2, 3), "f32") == "tensor<2x3xf32>"
    assert shlo.tensor(4, "bf16") == "tensor<4xbf16>"
    assert shlo.tensor((), "i8") == "tensor<i8>"
    assert shlo.tensor("5x", "ui4") == "tensor<5xui4>"
    assert shlo.hex_literal(bytes([0x80, 0x3F, 0x0A])) == "0x803F0A"
    assert shlo.constant("0x3F80", "tensor<bf16>") == 'stablehlo.constant dense<"0x3F80"> : tensor<bf16>'
    assert (shlo.unary("bitcast_convert", "%x", "tensor<2xf16>", "tensor<2xui16>")
            == "stablehlo.bitcast_convert %x : (tensor<2xf16>) -> tensor<2xui16>")
    assert shlo.elementwise("and", ("%a", "%m"), "tensor<3xui8>") == "stablehlo.and %a, %m : tensor<3xui8>"
    assert (shlo.dot_general("%a", "%b", "tensor<2x3xi8>", "tensor<3x4xi8>", "tensor<2x4xi32>")
            == "stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xi8>, tensor<3x4xi8>) -> "
            "tensor<2x4xi32>")
    assert shlo.cast("arith.truncf", "%f", "f32", "f8E4M3FN") == "arith.truncf %f : f32 to f8E4M3FN"
    assert shlo.quant_uniform("i8", "f32", (("0.5", 3),), None) == "!quant.uniform<i8:f32, 0.5:3>"
    assert (shlo.quant_uniform("u8", "f32", (("0.5", 0), ("0.25", 1)), 1)
            == "!quant.uniform<u8:f32:1, {0.5:0, 0.25:1}>")


def test_body_names() -> None:
    b = shlo.Body(indent="")
    assert b.op("stablehlo.constant dense<1> : tensor<i8>", "c") == "%c1"
    assert b.let("%y", "stablehlo.negate %c1 : tensor<i8>") == "%y"
    assert b.convert("convert", "%y", 2, "i8", "f32") == "%v2"
    assert b.convert("convert", "%v2", 2, "f32", "f16", name="%h") == "%h"
    assert b.lines == ["%c1 = stablehlo.constant dense<1> : tensor<i8>", "%y = stablehlo.negate %c1 : tensor<i8>",
                       "%v2 = stablehlo.convert %y : (tensor<2xi8>) -> tensor<2xf32>",
                       "%h = stablehlo.convert %v2 : (tensor<2xf32>) -> tensor<2xf16>"]


def test_function_and_module_text() -> None:
    f = shlo.func("f", ("%x: tensor<2xf32>",), "tensor<2xf32>", ["%y = A", "%z = B"], "%z")
    assert f == ("\n  func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n    %y = A\n    %z = B\n"
                 "    return %z : tensor<2xf32>\n  }")
    g = shlo.func("g", ("%x: memref<?xi8>", "%y: memref<?xi8>"), None, ["C"], None,
                  attributes="llvm.emit_c_interface")
    assert g == ("\n  func.func @g(%x: memref<?xi8>, %y: memref<?xi8>) attributes {llvm.emit_c_interface} {\n"
                 "    C\n    return\n  }")
    assert shlo.module(f, g) == "module {" + f + g + "\n}\n"
    assert shlo.module(f, newline=False) == "module {" + f + "}"
    assert shlo.one_line(shlo.module(f, newline=False)) == ("module { func.func @f(%x: tensor<2xf32>) -> "
                                                              "tensor<2xf32> { %y = A %z = B return %z : "
                                                              "tensor<2xf32> }}")
    assert shlo.checking_module(["    %a = X"], [("%a", "%e", "tensor<1xui8>")]) == [
        "module @qref_case {", "  func.func public @main() {", "    %a = X",
        "    check.expect_eq %a, %e : tensor<1xui8>", "    func.return", "  }", "}", ""]


def test_a_written_module_runs_in_the_interpreter() -> None:
    """float32 -> bfloat16 of 1 + 2^-8 (a tie: to even, 1.0) and 1 + 3 * 2^-9 (above the tie: 1 + 2^-7), read as
    bits; the expected bits are ml_dtypes' round to nearest even."""
    pytest.importorskip("torch_mlir")
    from qref.harness.adapters.stablehlo import evaluate

    x = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-9, -0.0], np.float32)
    b = shlo.Body(indent="")
    b.let("%x", shlo.constant(shlo.hex_literal(x.tobytes()), shlo.tensor(3, "f32")))
    b.convert("convert", "%x", 3, "f32", "bf16", name="%y")
    b.convert("bitcast_convert", "%y", 3, "bf16", "ui16", name="%r")
    (got,) = evaluate(shlo.module(shlo.func("main", (), shlo.tensor(3, "ui16"), b.lines, "%r")))
    assert got.view(np.uint16).tolist() == x.astype(ml_dtypes.bfloat16).view(np.uint16).tolist()
    assert got.view(np.uint16).tolist() == [0x3F80, 0x3F81, 0x8000]


_OWN_TEXT = re.compile(r'= stablehlo\.\w+|"stablehlo\.\w+"\(|stablehlo\.\w+ [%{]|stablehlo\.constant dense'
                       r'|func\.func @')


def test_no_other_module_writes_stablehlo_operations() -> None:
    """StableHLO operations and ``func.func`` headers are written by the writer only (docs/architecture.md §1)."""
    writer = ROOT / "interop" / "mlir" / "stablehlo.py"
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in sorted(ROOT.rglob("*.py")) if p != writer
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if _OWN_TEXT.search(line)]
    assert not found, "StableHLO text written outside qref/interop/mlir/stablehlo.py:\n" + "\n".join(found)
    # the forms the adapters wrote before the writer existed are caught
    for old in ('lines.append(f"%q = stablehlo.uniform_quantize {x} : (tensor<{sh}{ft}>) -> tensor<{sh}{qt}>")',
                "lines.append(f'%x = stablehlo.constant dense<\"{_hex(codes)}\"> : tensor<{n}x{F}>')",
                'return f"\\n  func.func @{name}(%a: {ta}, %b: {tb}) -> {rt} {{"',
                "parts.append(f'\"stablehlo.slice\"({x}) {attrs}')"):
        assert _OWN_TEXT.search(old), old
