"""qwix (on JAX, XLA:CPU, under ``jax.jit``): the quantized ``dot_general`` on ``matmul_integer_to_float`` cases
(int8 / uint8 QArrays, float32 out: eager, jitted, jitted with constant scales; matmul.md §16);
``qarray.quantize_with_scale_zero_point`` / ``qarray.dequantize`` on the uniform cases (profile ``qwix``,
uniform.md), ``qarray.quantize_api(x, "nf4", tiled_axes=...)`` on the lookup cases (profile ``qwix``, lut.md
§6.5) and ``quantize_api(x, "mxfp8" | "mxfp4" | "nvfp4", tiled_axes=...)`` / ``qarray.dequantize`` on the block
cases (profile ``qwix``, block.md §8; float64 inputs are rounded to float32 first, as JAX's default
``jax_enable_x64=False`` does on entry).

Layout only, no arithmetic, happens outside qwix: scales and zero points are given with the input's rank (qwix's
"generic broadcast": per tensor, per axis, sub-channel tiles); a lookup case blocked over the flattened tensor is
quantized as the flattened 1-D array; qwix's MX / NVFP4 scales are floats (2^k, or E4M3 values) and are stored
as the case's E8M0 / E4M3 bytes with ml_dtypes ``astype`` (exact for those values; a non-finite scale becomes
the E8M0 NaN byte 0xFF, resp. E4M3 0x7F / 0xFF); dequantization takes the case's bytes decoded the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...formats import IntFormat, get_format
from ..families.lookup import dq_kind, effective_axis
from ..families.uniform import element_params, scheme_of
from ..model import Outputs, Target
from . import require
from ._common import (
    codes_as,
    jax_dot_modes,
    jit_once,
    python_c,
    raise_unsupported,
    run_each,
    storage_values,
    suite_input,
)

BACKEND = "qwix"
DISTRIBUTIONS = ("qwix", "jax", "jaxlib")
DTYPES = ("float32", "float16", "bfloat16")
#: qref storage -> qwix qtype (a jnp dtype name, or qwix's synthetic "int2")
INT_QTYPES = {"int8": "int8", "uint8": "uint8", "int4": "int4", "uint4": "uint4", "int16": "int16",
              "uint16": "uint16", "int32": "int32", "int2": "int2"}
#: block scheme -> (qwix qtype, tile size qwix requires)
MX_QTYPES = {"mxfp8_e4m3": ("mxfp8", 32), "mxfp4": ("mxfp4", 32), "nvfp4": ("nvfp4", 16)}


def _mods() -> tuple[Any, Any, Any]:
    import jax
    import jax.numpy as jnp
    from qwix._src.core import qarray

    jax.config.update("jax_platforms", "cpu")
    return jax, jnp, qarray


def _qtype(name: str) -> Any:
    import jax.numpy as jnp

    return name if name == "int2" else getattr(jnp, name)


def _storage_jdt(name: str) -> Any:
    """The jnp dtype of qwix's qvalue for a qref storage (qwix keeps int2 values in int4)."""
    import jax.numpy as jnp

    return jnp.int4 if name == "int2" else getattr(jnp, name)


# ---- uniform: quantize_with_scale_zero_point / dequantize --------------------------------------------------
def _uq_shapes(case: Case) -> tuple[tuple[int, ...], str | None]:
    """(scale shape with the input's rank, or a reason qwix cannot express the granularity)."""
    sch = scheme_of(case)
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    nd = len(shape)
    if sch.granularity == "per_tensor":
        return (1,) * nd, None
    if sch.granularity == "per_axis":
        ax = int(sch.axis) % nd
        return tuple(shape[ax] if i == ax else 1 for i in range(nd)), None
    if len(sch.scale_shape) != nd:
        return (), "qwix needs scales of the input's rank"
    blocks = {int(a) % nd: int(b) for a, b in sch.block_size or ()}
    for i, d in enumerate(shape):
        if i in blocks and d % blocks[i]:
            return (), "qwix tiles need each axis length divisible by its tile size (no partial tiles)"
    return tuple(sch.scale_shape), None


def _uq_supports(case: Case) -> str | None:
    sch = scheme_of(case)
    st = sch.storage
    if st.name not in INT_QTYPES:
        if not isinstance(st, IntFormat):
            return f"qwix quantizes to integers here (quantize_with_scale_zero_point); {st.name} is a float storage"
        return f"qwix has no {st.name} qtype (int2-int7 are signed; no narrowed ranges)"
    if sch.storage_range is not None:
        return "qwix has no narrowed storage ranges"
    if case.operation == "uniform_quantize":
        dt = case.inputs["x"].dtype.name
        if dt not in DTYPES:
            return f"the cases' qwix path takes float32/float16/bfloat16 inputs, not {dt}"
    else:
        if get_format(st.name).bits > 8:
            return f"qwix.dequantize accepts qvalues of at most 8 bits (validate_qarray rejects {st.name})"
        (oname,) = case.expected
        if case.expected[oname].dtype.name != sch.expressed.name:
            return "qwix dequantizes into the scale's dtype; the case asks for another output dtype"
    return _uq_shapes(case)[1]


def _uq_make(jit: bool):
    def one(case: Case) -> Outputs:
        raise_unsupported(_uq_supports(case))
        _, jnp, qarray = _mods()
        # jitted: one function per (operation, storage) for every case (what the lambdas close over)
        wrap = (lambda f: jit_once(("qwix.int", case.operation, st), lambda: f)) if jit else (lambda f: f)
        sch = scheme_of(case)
        st = sch.storage.name
        sshape, _ = _uq_shapes(case)
        et = getattr(jnp, sch.expressed.name)
        scale = jnp.asarray(np.asarray(sch.scale_array, np.float64).reshape(sshape)).astype(et)
        zp = jnp.asarray(np.asarray(sch.zero_point_array, np.int64).reshape(sshape)).astype(_storage_jdt(st))
        (oname,) = case.expected
        if case.operation == "uniform_quantize":
            x = np.ascontiguousarray(case.inputs["x"])
            f = wrap(lambda v, s, z: qarray.quantize_with_scale_zero_point(v, _qtype(st), s, z).qvalue)
            raw = np.asarray(f(jnp.asarray(x), scale, zp)).astype(np.int64)
            fmt = get_format(st)
            return {oname: codes_as(case, oname, (raw & ((1 << fmt.bits) - 1)).astype(case.expected[oname].dtype))}
        codes = storage_values(case)
        qv = jnp.asarray(codes.astype(np.int64)).astype(_storage_jdt(st))
        f = wrap(lambda v, s, z: qarray.dequantize(qarray.QArray(v, s, z, _qtype(st))))
        y = np.asarray(f(qv, scale, zp))
        if y.dtype.name == "bfloat16":
            y = y.view(np.uint16)
        return {oname: codes_as(case, oname, y)}
    return one


def _uq_snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        st = case.scheme["storage"]
        et = case.scheme["expressed"]
        s, z = element_params(case, i)
        qt = repr(st) if st == "int2" else f"jnp.{st}"
        zdt = "jnp.int4" if st == "int2" else f"jnp.{st}"
        wrap = "jax.jit" if jit else ""
        head = "import numpy as np, ml_dtypes, jax, jax.numpy as jnp; from qwix._src.core import qarray"
        sz = f"s = jnp.full((1,), {s!r}, jnp.{et}); z = jnp.full((1,), {z}, {zdt})"
        if case.operation == "uniform_quantize":
            x = case.inputs["x"]
            b = int(x.reshape(-1)[i : i + 1].view(f"u{x.dtype.itemsize}")[0])
            view = "ml_dtypes.bfloat16" if x.dtype.name == "bfloat16" else f"np.{x.dtype.name}"
            bits_ = get_format(st).bits
            flat = x.reshape(-1).view(f"u{x.dtype.itemsize}")
            n = flat.size if flat.size > 1 and bool((flat == b).all()) else 1  # copies of one element
            return python_c(head, f"x = np.full({n}, {hex(b)}, np.uint{8 * x.dtype.itemsize}).view({view})", sz,
                            f"f = {wrap}(lambda v, s, z: qarray.quantize_with_scale_zero_point(v, {qt}, s, z).qvalue)",
                            f"print(hex(int(np.asarray(f(jnp.asarray(x), s, z)).astype(np.int64)[0]) & "
                            f"{hex((1 << bits_) - 1)}))")
        c = int(storage_values(case).reshape(-1)[i])
        w = np.dtype(case.expected[next(iter(case.expected))].dtype).itemsize
        return python_c(head, sz, f"v = jnp.asarray([{c}]).astype({zdt})",
                        f"f = {wrap}(lambda v, s, z: qarray.dequantize(qarray.QArray(v, s, z, {qt})))",
                        "y = np.asarray(f(v, s, z))", f"print(hex(int(y.view(np.uint{8 * w})[0])))")
    return snippet


# ---- lookup: quantize_api(x, "nf4") / dequantize -------------------------------------------------------------
def _nf4_supports(case: Case) -> str | None:
    name = case.scheme["name"]
    if name != "nf4":
        return f"qwix's only lookup qtype is nf4, not {name}"
    if dq_kind(case) is not None:
        return "qwix does not double quantize its scales"
    B = int(case.scheme["block_size"])
    arr = case.inputs["x"] if case.operation == "lookup_quantize" else case.inputs["codes"]
    ax = effective_axis(case)
    if ax is not None and (arr.ndim != 2 or ax != 1):
        return "qwix tiles one axis of a 2-D array here (the others channelwise)"
    n = arr.size if ax is None else arr.shape[1]
    if n % B:
        return f"qwix tiles need the axis length divisible by the tile size {B} (no partial tiles)"
    if case.operation == "lookup_quantize":
        if arr.dtype.name not in DTYPES:
            return f"the cases' qwix path takes float32/float16/bfloat16 inputs, not {arr.dtype.name}"
        return None
    src = str(case.params.get("input_dtype"))
    out = case.expected["y"].dtype.name
    if src not in DTYPES:
        return f"qwix's nf4 scales are in the input dtype; {src} is not one of {DTYPES}"
    if out not in (src, "float32"):
        return f"qwix dequantizes into the scale's dtype {src}; the case asks for {out}"
    return None


def _nf4_one(case: Case) -> Outputs:
    raise_unsupported(_nf4_supports(case))
    _, jnp, qarray = _mods()
    B = int(case.scheme["block_size"])
    ax = effective_axis(case)
    if case.operation == "lookup_quantize":
        x = case.inputs["x"]
        xin = x.reshape(-1) if ax is None else x
        kw = {"tiled_axes": {0: B}} if ax is None else {"channelwise_axes": (0,), "tiled_axes": {1: B}}
        f = jit_once(("qwix.nf4.quantize", ax is None, B), lambda: lambda v: qarray.quantize_api(v, "nf4", **kw))
        q = f(jnp.asarray(np.ascontiguousarray(xin)))
        codes = np.asarray(q.qvalue).astype(np.uint8).reshape(x.shape)
        scales = np.asarray(q.scale).astype(np.float32)
        out = {"codes": codes, "scales": scales.reshape(case.expected["scales"].shape)}
        return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}
    src = getattr(jnp, str(case.params["input_dtype"]))
    codes = case.inputs["codes"]
    scales = case.inputs["scales"].astype(np.float32)
    if ax is None:
        c2, s2 = codes.reshape(-1), scales.reshape(-1)
    else:
        c2, s2 = codes, scales.reshape(codes.shape[0], -1)
    f = jit_once(("qwix.nf4.dequantize",), lambda: lambda v, s: qarray.dequantize(qarray.QArray(v, s, None, "nf4")))
    y = np.asarray(f(jnp.asarray(c2).astype(jnp.uint4), jnp.asarray(s2).astype(src)))
    if case.expected["y"].dtype.name == "float32":
        y = y.astype(np.float32)  # qwix's result is in the input dtype: widening is exact
    elif y.dtype.name == "bfloat16":
        y = y.view(np.uint16)
    return {"y": codes_as(case, "y", y.reshape(-1))}


def _nf4_snippet(case: Case, i: int) -> str:
    B = int(case.scheme["block_size"])
    ax = effective_axis(case)
    out = getattr(case, "_output", "codes")
    head = "import numpy as np, ml_dtypes, jax, jax.numpy as jnp; from qwix._src.core import qarray"
    if case.operation == "lookup_quantize":
        load = suite_input(case, "x") + (".reshape(-1)" if ax is None else "")
        kw = f"tiled_axes={{0: {B}}}" if ax is None else f"channelwise_axes=(0,), tiled_axes={{1: {B}}}"
        pick = "np.asarray(q.qvalue).astype(np.uint8)" if out == "codes" else \
            "np.asarray(q.scale).astype(np.float32).view(np.uint32)"
        return python_c(head, f"x = {load}",
                        f"q = jax.jit(lambda v: qarray.quantize_api(v, 'nf4', {kw}))(jnp.asarray(x))",
                        f"print(hex(int({pick}.reshape(-1)[{i}])))")
    src = str(case.params["input_dtype"])
    w = np.dtype(case.expected["y"].dtype).itemsize
    conv = ".astype(np.float32)" if case.expected["y"].dtype.name == "float32" else ""
    shape = "-1" if ax is None else f"{case.inputs['codes'].shape[0]}, -1"
    return python_c(head, f"c = {suite_input(case, 'codes')}.reshape({shape}); "
                          f"s = {suite_input(case, 'scales')}.astype(np.float32).reshape({shape})",
                    "f = jax.jit(lambda v, s: qarray.dequantize(qarray.QArray(v, s, None, 'nf4')))",
                    f"y = np.asarray(f(jnp.asarray(c).astype(jnp.uint4), jnp.asarray(s).astype(jnp.{src}))){conv}",
                    f"print(hex(int(y.reshape(-1).view(np.uint{8 * w})[{i}])))")


# ---- block: quantize_api(x, "mxfp8" | "mxfp4" | "nvfp4") / dequantize -----------------------------------------
def _mx_supports(case: Case) -> str | None:
    name = case.scheme["name"]
    if name not in MX_QTYPES:
        return f"qwix's block qtypes are mxfp8 (E4M3), mxfp4 and nvfp4, not {name}"
    qt, tile = MX_QTYPES[name]
    if int(case.scheme["block_size"]) != tile:
        return f"qwix's {qt} requires tiles of {tile}, not {case.scheme['block_size']}"
    if "global_scale" in case.inputs:
        return "qwix's nvfp4 has no global (per-tensor) scale"
    arr = case.inputs["x"] if case.operation == "block_quantize" else case.inputs["codes"]
    ax = int(case.params.get("axis", -1)) % arr.ndim
    if arr.shape[ax] % tile:
        return f"qwix tiles need the axis length divisible by {tile} (no partial tiles)"
    if case.operation == "block_quantize":
        if arr.dtype.name not in (*DTYPES, "float64"):
            return f"qwix quantizes float inputs, not {arr.dtype.name}"
        return None
    if "biases" in case.inputs:
        return "qwix's block formats have no biases"
    return None


def _scale_bytes(s: np.ndarray, scale_format: str) -> np.ndarray:
    import ml_dtypes

    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite scale: the format's NaN byte
        return np.asarray(s).astype(np.float32).astype(getattr(ml_dtypes, scale_format)).view(np.uint8)


def _mx_one(case: Case) -> Outputs:
    raise_unsupported(_mx_supports(case))
    import ml_dtypes

    _, jnp, qarray = _mods()
    name = case.scheme["name"]
    qt, tile = MX_QTYPES[name]
    sf = case.array_formats.get("scales", "float8_e8m0fnu")
    if case.operation == "block_quantize":
        x = case.inputs["x"]
        ax = int(case.params.get("axis", -1)) % x.ndim
        kw = {"tiled_axes": {ax: tile}, "channelwise_axes": tuple(i for i in range(x.ndim) if i != ax)}
        if x.dtype == np.float64:  # JAX's default (jax_enable_x64 off) rounds float64 to float32 on entry
            with np.errstate(over="ignore"):
                x = x.astype(np.float32)
        f = jit_once(("qwix.mx.quantize", qt, ax, tile, x.ndim), lambda: lambda v: qarray.quantize_api(v, qt, **kw))
        q = f(jnp.asarray(np.ascontiguousarray(x)))
        codes = np.asarray(q.qvalue).view(np.uint8)
        scales = _scale_bytes(np.asarray(q.scale), sf)
        out = {"codes": codes, "scales": scales.reshape(case.expected["scales"].shape)}
        return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}
    codes = case.inputs["codes"]
    ef = case.array_formats["codes"]
    (oname,) = case.expected
    odt = case.expected[oname].dtype
    with np.errstate(over="ignore"):  # qwix keeps the scale in the output dtype: 2^k beyond its range is inf
        sc = case.inputs["scales"].view(getattr(ml_dtypes, sf)).astype(np.float32).astype(odt)
    f = jit_once(("qwix.mx.dequantize", qt), lambda: lambda v, s: qarray.dequantize(qarray.QArray(v, s, None, qt)))
    y = np.asarray(f(jnp.asarray(codes.astype(np.uint8).view(getattr(ml_dtypes, ef))), jnp.asarray(sc)))
    if y.dtype.name == "bfloat16":
        y = y.view(np.uint16)
    return {oname: codes_as(case, oname, y)}


def _mx_snippet(case: Case, i: int) -> str:
    qt, tile = MX_QTYPES[case.scheme["name"]]
    out = getattr(case, "_output", "codes")
    sf = case.array_formats.get("scales", "float8_e8m0fnu")
    head = "import numpy as np, ml_dtypes, jax, jax.numpy as jnp; from qwix._src.core import qarray"
    if case.operation == "block_quantize":
        x = case.inputs["x"]
        ax = int(case.params.get("axis", -1)) % x.ndim
        ch = tuple(k for k in range(x.ndim) if k != ax)
        pick = "np.asarray(q.qvalue).view(np.uint8)" if out == "codes" else \
            f"np.asarray(q.scale).astype(np.float32).astype(ml_dtypes.{sf}).view(np.uint8)"
        f32 = ".astype(np.float32)" if x.dtype == np.float64 else ""
        return python_c(head, f"x = {suite_input(case, 'x')}{f32}",
                        f"q = jax.jit(lambda v: qarray.quantize_api(v, {qt!r}, tiled_axes={{{ax}: {tile}}}, "
                        f"channelwise_axes={ch!r}))(jnp.asarray(x))",
                        f"print(hex(int({pick}.reshape(-1)[{i}])))")
    ef = case.array_formats["codes"]
    (oname,) = case.expected
    odt = np.dtype(case.expected[oname].dtype)
    dt = "ml_dtypes.bfloat16" if odt.name == "bfloat16" else f"np.{odt.name}"
    return python_c(head, f"c = {suite_input(case, 'codes')}.view(ml_dtypes.{ef})",
                    f"s = {suite_input(case, 'scales')}.view(ml_dtypes.{sf}).astype(np.float32).astype({dt})",
                    f"y = np.asarray(jax.jit(lambda v, s: qarray.dequantize(qarray.QArray(v, s, None, {qt!r})))"
                    "(jnp.asarray(c), jnp.asarray(s)))",
                    f"print(hex(int(y.view(np.uint{8 * odt.itemsize}).reshape(-1)[{i}])))")


# ---- matmul: the quantized dot_general with a dequantized float32 output (matmul.md §16) ---------------------
DOT_MODES = ("eager", "jit", "jit_constant_scales")
#: mode -> the qref matmul profile (XLA folds the two scale products when the scales are jit constants)
DOT_PROFILES = {"eager": "qwix_int8_dot", "jit": "qwix_int8_dot", "jit_constant_scales": "xla_folded_scales"}


def _dot_supports(case: Case) -> str | None:
    if case.operation != "matmul_integer_to_float":
        return "qwix's dot_general takes quantized arrays with their scales"
    p, ins = case.params, case.inputs
    if p["a_storage"] not in ("int8", "uint8") or p["b_storage"] not in ("int8", "uint8"):
        return "8-bit qvalues only"
    if "bias" in ins:
        return "qwix's dot_general has no bias"
    if np.any(np.asarray(ins["a_zero_point"]) != 0) and np.any(np.asarray(ins["b_zero_point"]) != 0):
        return "qwix: only one operand can be asymmetric (ValueError in _fast_dot_general)"
    return None


def qwix_int8_dot(a: np.ndarray, b: np.ndarray, a_scale: Any, b_scale: Any, a_zero_point: Any, b_zero_point: Any,
                  mode: str) -> np.ndarray:
    """qwix.dot_general(QArray(a, a_s, za), QArray(b, b_s, zb)) of A (M, K) and B (K, N), float32 (M, N): eager,
    jitted with the scales as arguments, or jitted with the scales as constants (closed over)."""
    jax, jnp, qarray = _mods()
    from qwix._src.core import dot_general as qdg

    M, N = a.shape[0], b.shape[1]
    sa = jnp.asarray(np.broadcast_to(np.asarray(a_scale, np.float32).reshape(-1)[:1], (M, 1)))
    sb = jnp.asarray(np.broadcast_to(np.asarray(b_scale, np.float32).reshape(1, -1), (1, N)))
    za, zb = np.asarray(a_zero_point), np.asarray(b_zero_point)
    zav = None if not za.any() else jnp.asarray(np.broadcast_to(za.reshape(-1)[:1], (M, 1)).astype(a.dtype))
    zbv = None if not zb.any() else jnp.asarray(np.broadcast_to(zb.reshape(1, -1), (1, N)).astype(b.dtype))
    dims = (((1,), (0,)), ((), ()))

    def dot(qa: Any, qb: Any, s_a: Any, s_b: Any) -> Any:
        return qdg.dot_general(qarray.QArray(qa, s_a, zav, qa.dtype), qarray.QArray(qb, s_b, zbv, qb.dtype), dims)

    return jax_dot_modes(jax, dot, jnp.asarray(a), jnp.asarray(b), sa, sb, mode)


def _dot_run(mode: str):
    def one(case: Case) -> Outputs:
        ins = case.inputs
        y = qwix_int8_dot(ins["a"], ins["b"], ins["a_scale"], ins["b_scale"], ins["a_zero_point"],
                          ins["b_zero_point"], mode)
        return {"y": y.astype(np.float32)}
    return _runner(one)


def _dot_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        from .onnxruntime import matmul_element_inputs, matmul_literal

        ins = matmul_element_inputs(case, i)
        za, zb = np.asarray(ins["a_zero_point"]).reshape(-1)[0], np.asarray(ins["b_zero_point"]).reshape(-1)[0]
        call = {"eager": "dot(a, b, sa, sb)", "jit": "jax.jit(dot)(a, b, sa, sb)",
                "jit_constant_scales": "jax.jit(lambda x, w: dot(x, w, sa, sb))(a, b)"}[mode]
        return python_c(
            "import numpy as np, jax, jax.numpy as jnp",
            "from qwix._src.core import qarray, dot_general as qdg",
            f"a = jnp.asarray({matmul_literal(ins['a'])})",
            f"b = jnp.asarray({matmul_literal(ins['b'])})",
            f"sa = jnp.full((1, 1), {float(np.asarray(ins['a_scale']).reshape(-1)[0])!r}, jnp.float32)",
            f"sb = jnp.full((1, 1), {float(np.asarray(ins['b_scale']).reshape(-1)[0])!r}, jnp.float32)",
            f"za = {'None' if za == 0 else f'jnp.full((1, 1), {int(za)}, a.dtype)'}",
            f"zb = {'None' if zb == 0 else f'jnp.full((1, 1), {int(zb)}, b.dtype)'}",
            "dot = lambda x, w, s, t: qdg.dot_general(qarray.QArray(x, s, za, x.dtype), qarray.QArray(w, t, zb, "
            "w.dtype), (((1,), (0,)), ((), ())))",
            f"y = np.asarray({call})",
            "print(hex(int(y.reshape(-1).view(np.uint32)[0])))")
    return snippet


def _runner(fn):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_each(cases, fn)
    return run


def targets() -> list[Target]:
    require("jax", "qwix", backend=BACKEND, hint="pip install qwix")
    return [
        *(Target(BACKEND, f"qwix.int.{mode}", "uniform",
                 f"qarray.quantize_with_scale_zero_point(x, qtype, scale, zero_point) and qarray.dequantize(QArray(q, "
                 f"scale, zero_point, qtype)), {'under jax.jit' if mode == 'jit' else 'eager (op by op)'}, XLA:CPU; "
                 "qtypes int8, uint8, int4, uint4, int16, uint16, int32 and 'int2'", "qwix",
                 ("uniform_quantize", "uniform_dequantize"), _uq_supports, _runner(_uq_make(mode == "jit")),
                 _uq_snippet(mode == "jit"), copies=True) for mode in ("eager", "jit")),
        Target(BACKEND, "qwix.nf4.jit", "lookup",
               "jax.jit(qarray.quantize_api(x, 'nf4', tiled_axes={axis: block})) and qarray.dequantize, XLA:CPU",
               "qwix", ("lookup_quantize", "lookup_dequantize"), _nf4_supports, _runner(_nf4_one), _nf4_snippet),
        Target(BACKEND, "qwix.mx.jit", "block",
               "jax.jit(qarray.quantize_api(x, 'mxfp8' | 'mxfp4' | 'nvfp4', tiled_axes={axis: 32 | 16})) and "
               "qarray.dequantize, XLA:CPU; float scales stored as E8M0 / E4M3 bytes; float64 inputs rounded to "
               "float32 (JAX's default)", "qwix",
               ("block_quantize", "block_dequantize"), _mx_supports, _runner(_mx_one), _mx_snippet),
        *(Target(BACKEND, f"qwix.int8_dot.{mode}", "matmul",
                 "qwix dot_general(QArray(A, a_s, za), QArray(B, b_s, zb)) (int8 / uint8 qvalues, int32 dots, "
                 f"float32 out), XLA:CPU, {_DOT_HOW[mode]}", DOT_PROFILES[mode], ("matmul_integer_to_float",),
                 _dot_supports, _dot_run(mode), _dot_snippet(mode)) for mode in DOT_MODES),
    ]


_DOT_HOW = {"eager": "eager (op by op)", "jit": "under jax.jit with the scales as arguments",
            "jit_constant_scales": "under jax.jit with the scales closed over (compile-time constants)"}


__all__ = ["BACKEND", "DISTRIBUTIONS", "DOT_PROFILES", "qwix_int8_dot", "targets"]
