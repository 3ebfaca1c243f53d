"""JAX on XLA:CPU: ``x.astype(jnp.<format>)`` eagerly and under ``jax.jit`` (no qref element profile models it,
so the spec default is its reference; elements.md), and JAX's own MX / NVFP4 quantizer
(``jax._src.cudnn.scaled_matmul_stablehlo.quantize``, what ``jax.nn.scaled_dot_general`` quantizes with) under
``jax.jit`` on the block cases (block profile ``jax``, block.md §8).

Every element type jnp has (float8 variants, E8M0, float4_e2m1fn, float16, bfloat16, int4/uint4/int8/uint8);
float6 types exist in jnp but XLA:CPU rejects them. float64 inputs run inside ``jax.enable_x64(True)`` (without
it JAX would silently round them to float32 first). Each batch of cases with the same signature is one call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import codes_as, float_literal, hex_print, python_c, run_each, run_elements, suite_input

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


# ---- block: JAX's own MX / NVFP4 quantizer ------------------------------------------------------------------
#: block scheme -> (mode of jax.nn.get_scaled_dot_general_config, its block size)
BLOCK_MODES = {"mxfp8_e4m3": ("mxfp8", 32), "nvfp4": ("nvfp4", 16)}
_SMQ = "jax._src.cudnn.scaled_matmul_stablehlo"


def _blk_axis(case: Case) -> tuple[int, bool]:
    """(blocked axis, transpose?): quantize blocks the last axis; a 2-D input blocked along axis 0 is transposed
    first (and its outputs back)."""
    x = case.inputs["x"]
    a = int(case.params.get("axis", -1)) % x.ndim
    return a, a != x.ndim - 1


def _blk_supports(case: Case) -> str | None:
    if case.operation != "block_quantize":
        return ("JAX's block quantizer (scaled_matmul_stablehlo.quantize) has no dequantize: jax.nn.scaled_matmul "
                "consumes its codes and scales")
    name = case.scheme["name"]
    if name not in BLOCK_MODES:
        return f"JAX's block quantizer has modes mxfp8 (E4M3, blocks of 32) and nvfp4 (blocks of 16), not {name}"
    mode, bs = BLOCK_MODES[name]
    if int(case.scheme["block_size"]) != bs:
        return f"JAX's {mode} mode has blocks of {bs}, not {case.scheme['block_size']}"
    x = case.inputs["x"]
    a, tr = _blk_axis(case)
    if tr and x.ndim != 2:
        return "JAX's block quantizer blocks the last axis (a 2-D input blocked along axis 0 is transposed first)"
    if x.shape[a] % bs:
        return f"JAX's block quantizer needs the blocked axis to be a multiple of {bs} (no partial blocks)"
    return None


def _blk_one(case: Case) -> Outputs:
    import importlib

    import jax
    import jax.numpy as jnp

    reason = _blk_supports(case)
    if reason:
        raise Unsupported(reason)
    jax.config.update("jax_platforms", "cpu")
    smq = importlib.import_module(_SMQ)
    mode, _ = BLOCK_MODES[case.scheme["name"]]
    _, tr = _blk_axis(case)
    x = case.inputs["x"]
    xin = np.ascontiguousarray(x.T if tr else x)
    g = case.inputs.get("global_scale")
    with jax.enable_x64(x.dtype == np.float64):
        conf = jax.nn.get_scaled_dot_general_config(
            mode, None if g is None else jnp.array(np.asarray(g, np.float32).reshape(-1)[:1]))
        q, s = jax.jit(lambda v: smq.quantize(v, conf))(jnp.asarray(xin))
        codes, scales = np.asarray(q).view(np.uint8), np.asarray(s).view(np.uint8)
    if tr:
        codes, scales = codes.T, scales.T
    out = {"codes": codes, "scales": scales}
    return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}


def _blk_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    return run_each(cases, _blk_one)


def _blk_snippet(case: Case, i: int) -> str:
    mode, _ = BLOCK_MODES[case.scheme["name"]]
    _, tr = _blk_axis(case)
    out = getattr(case, "_output", "codes")
    g = case.inputs.get("global_scale")
    gs = "" if g is None else f", jnp.array([{float(np.asarray(g, np.float32).reshape(-1)[0])!r}], jnp.float32)"
    x = case.inputs["x"]
    back = ".T" if tr else ""
    return python_c(
        f"import numpy as np, jax, jax.numpy as jnp; from {_SMQ} import quantize; "
        "import ml_dtypes",
        f"jax.config.update('jax_enable_x64', {x.dtype == np.float64})",
        f"x = {suite_input(case, 'x')}{back}",
        f"c = jax.nn.get_scaled_dot_general_config({mode!r}{gs})",
        "q, s = jax.jit(lambda v: quantize(v, c))(jnp.asarray(x))",
        f"print(hex(int(np.asarray({'q' if out == 'codes' else 's'}).view(np.uint8){back}.reshape(-1)[{i}])))")


def targets() -> list[Target]:
    require("jax", "jaxlib", "ml_dtypes", backend=BACKEND, hint="pip install jax")
    ops = ("encode", "decode", "quantize")
    return [
        Target(BACKEND, "jax.astype.eager", "elements", "jnp.asarray(x).astype(jnp.<format>) (eager, XLA:CPU)",
               None, ops, _supports, _run(False), _snippet(False)),
        Target(BACKEND, "jax.astype.jit", "elements", "jax.jit(lambda v: v.astype(jnp.<format>))(x) (XLA:CPU)",
               None, ops, _supports, _run(True), _snippet(True)),
        Target(BACKEND, "jax.block_quantize.jit", "block",
               "jax.jit(lambda v: scaled_matmul_stablehlo.quantize(v, jax.nn.get_scaled_dot_general_config(mode[, "
               "global_scale])))(x), modes mxfp8 and nvfp4 (XLA:CPU; codes and scales read as bytes)", "jax",
               ("block_quantize", "block_dequantize"), _blk_supports, _blk_run, _blk_snippet),
    ]
