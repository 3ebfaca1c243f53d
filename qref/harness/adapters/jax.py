"""JAX on XLA:CPU: ``x.astype(jnp.<format>)`` eagerly and under ``jax.jit`` (no qref element profile models it,
so the spec default is its reference; elements.md).

Every element type jnp has (float8 variants, E8M0, float4_e2m1fn, float16, bfloat16, int4/uint4/int8/uint8);
float6 types exist in jnp but XLA:CPU rejects them. float64 inputs run inside ``jax.enable_x64(True)`` (without
it JAX would silently round them to float32 first). Each batch of cases with the same signature is one call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target
from . import require
from ._common import float_literal, hex_print, python_c, run_elements

BACKEND = "jax"
DISTRIBUTIONS = ("jax", "jaxlib")
FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
           "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn", "float16", "bfloat16", "int4", "uint4", "int8", "uint8")
NO_XLA = ("float6_e2m3fn", "float6_e3m2fn")


def _supports(case: Case) -> str | None:
    name = case.format["name"]
    if name in NO_XLA:
        return f"jnp.{name} exists but XLA:CPU rejects it (INVALID_ARGUMENT: Invalid XLA PrimitiveType)"
    if name not in FORMATS:
        return f"JAX has no {name} type"
    return None


def _jdt(name: str):
    import jax.numpy as jnp

    return getattr(jnp, name)


def _np_view(fmt: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(fmt) if fmt in ("float16", "int8", "uint8") else np.dtype(getattr(ml_dtypes, fmt))


def _make(jit: bool):
    def fn(sig: tuple[str, str, str, str], flat: np.ndarray) -> np.ndarray:
        import jax

        op, fmt, src, out = sig
        jax.config.update("jax_platforms", "cpu")
        dt = _jdt(fmt)
        if op == "decode":
            x = flat.astype(np.uint16 if fmt in ("float16", "bfloat16") else np.uint8).view(_np_view(fmt))
            f = (lambda v: v.astype(_jdt(out)))  # noqa: E731
        elif op == "encode":
            x = flat
            f = (lambda v: v.astype(dt))  # noqa: E731
        else:
            x = flat
            f = (lambda v: v.astype(dt).astype(v.dtype))  # noqa: E731
        g = jax.jit(f) if jit else f
        with jax.enable_x64(src == "float64" or out == "float64"):
            return np.asarray(g(jax.numpy.asarray(x)))
    return fn


def _run(jit: bool):
    fn = _make(jit)

    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_elements(cases, fn)
    return run


def _snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        fmt = case.format["name"]
        wrap = "jax.jit(f)" if jit else "f"
        if case.operation == "decode":
            out = case.params["dtype"]
            c = int(case.inputs["codes"].reshape(-1)[i])
            store = "np.uint16" if fmt in ("float16", "bfloat16") else "np.uint8"
            view = f"np.{fmt}" if fmt in ("float16", "int8", "uint8") else f"ml_dtypes.{fmt}"
            w = np.dtype(np.float16 if out == "bfloat16" else out).itemsize
            return python_c("import numpy as np, ml_dtypes, jax, jax.numpy as jnp",
                            f"x = np.array([{hex(c)}], {store}).view({view})",
                            f"f = lambda v: v.astype(jnp.{out})",
                            f"jax.config.update('jax_enable_x64', {out == 'float64'})",
                            hex_print(f"{wrap}(jnp.asarray(x))", w))
        x = case.inputs["x"]
        lit = float_literal(x, i)
        if case.operation == "encode":
            w = 2 if fmt in ("float16", "bfloat16") else 1
            body = f"f = lambda v: v.astype(jnp.{fmt})"
            printer = hex_print(f"{wrap}(jnp.asarray(x))", w)
            if fmt in ("int4", "uint4"):
                printer = f"print(hex(int(np.asarray({wrap}(jnp.asarray(x))).view(np.uint8)[0]) & 0xF))"
        else:
            body = f"f = lambda v: v.astype(jnp.{fmt}).astype(v.dtype)"
            printer = hex_print(f"{wrap}(jnp.asarray(x))", x.dtype.itemsize)
        return python_c("import numpy as np, ml_dtypes, jax, jax.numpy as jnp", f"x = {lit}", body,
                        f"jax.config.update('jax_enable_x64', {x.dtype.name == 'float64'})", printer)
    return snippet


def targets() -> list[Target]:
    require("jax", "jaxlib", "ml_dtypes", backend=BACKEND, hint="pip install jax")
    ops = ("encode", "decode", "quantize")
    return [
        Target(BACKEND, "jax.astype.eager", "elements", "jnp.asarray(x).astype(jnp.<format>) (eager, XLA:CPU)",
               None, ops, _supports, _run(False), _snippet(False)),
        Target(BACKEND, "jax.astype.jit", "elements", "jax.jit(lambda v: v.astype(jnp.<format>))(x) (XLA:CPU)",
               None, ops, _supports, _run(True), _snippet(True)),
    ]
