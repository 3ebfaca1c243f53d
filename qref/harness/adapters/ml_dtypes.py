"""ml_dtypes: ``astype`` between numpy arrays and ml_dtypes' types (element profile ``ml_dtypes``,
elements.md §2.6).

encode: ``x.astype(ml_dtypes.<format>)`` read as codes; decode: ``codes.view(ml_dtypes.<format>).astype(dtype)``;
quantize: ``x.astype(<format>).astype(x.dtype)``. Formats: every ml_dtypes type in the suite (float8/6/4, E8M0,
bfloat16, int4, uint4); float16 and int8/uint8 are numpy's own types, P3109 formats have no ml_dtypes type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import codes_as, float_literal, hex_print, python_c, run_each

BACKEND = "ml_dtypes"
DISTRIBUTIONS = ("ml_dtypes",)
FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
           "float8_e3m4", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "bfloat16", "int4",
           "uint4")


def _supports(case: Case) -> str | None:
    name = case.format["name"]
    if name not in FORMATS:
        return f"ml_dtypes has no {name} type" + (" (numpy's own type)" if name in ("float16", "int8", "uint8")
                                                   else "")
    return None


def _dtype_src(name: str) -> str:
    return "ml_dtypes.bfloat16" if name == "bfloat16" else f"np.{name}"


def _one(case: Case) -> Outputs:
    import ml_dtypes

    name = case.format["name"]
    if name not in FORMATS:
        raise Unsupported(_supports(case) or name)
    dt = np.dtype(getattr(ml_dtypes, name))
    with np.errstate(all="ignore"):
        if case.operation == "decode":
            out = case.params["dtype"]
            odt = np.dtype(ml_dtypes.bfloat16) if out == "bfloat16" else np.dtype(out)
            y = case.inputs["codes"].astype(np.uint8 if dt.itemsize == 1 else np.uint16).view(dt).astype(odt)
            return {"y": y}
        x = case.inputs["x"]
        if case.operation == "encode":
            return {"codes": codes_as(case, "codes", x.astype(dt))}
        return {"y": x.astype(dt).astype(x.dtype)}


def _run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _one)


def _snippet(case: Case, i: int) -> str:
    fmt = case.format["name"]
    if case.operation == "decode":
        out = case.params["dtype"]
        c = int(case.inputs["codes"].reshape(-1)[i])
        width = 2 if out in ("float16", "bfloat16") else (4 if out == "float32" else 8)
        store = "np.uint16" if fmt == "bfloat16" else "np.uint8"
        return python_c("import numpy as np, ml_dtypes",
                        hex_print(f"np.array([{hex(c)}], {store}).view(ml_dtypes.{fmt}).astype("
                                  f"{_dtype_src(out)})",
                                  width))
    x = float_literal(case.inputs["x"], i)
    if case.operation == "encode":
        w = 2 if fmt == "bfloat16" else 1
        mask = " & 0xF" if fmt in ("int4", "uint4") else ""
        expr = f"x.astype(ml_dtypes.{fmt})"
        stmt = hex_print(expr, w)
        if mask:
            stmt = f"print(hex(int(np.asarray({expr}).view(np.uint8)[0]){mask}))"
        return python_c("import numpy as np, ml_dtypes", f"x = {x}", stmt)
    return python_c("import numpy as np, ml_dtypes", f"x = {x}",
                    hex_print(f"x.astype(ml_dtypes.{fmt}).astype(x.dtype)", case.inputs["x"].dtype.itemsize))


def targets() -> list[Target]:
    require("ml_dtypes", backend=BACKEND, hint="pip install ml_dtypes")
    return [Target(BACKEND, "ml_dtypes.astype", "elements", "x.astype(ml_dtypes.<format>) and back", "ml_dtypes",
                   ("encode", "decode", "quantize"), _supports, _run, _snippet)]


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
