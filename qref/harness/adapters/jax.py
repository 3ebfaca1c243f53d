"""JAX on XLA:CPU: ``x.astype(jnp.<format>)`` eagerly and under ``jax.jit`` (element profile ``jax``: the spec
except E8M0's exponent-field rounding and float64 underflow to NaN; elements.md §6), and JAX's own MX / NVFP4 quantizer
(``jax._src.cudnn.scaled_matmul_stablehlo.quantize``, what ``jax.nn.scaled_dot_general`` quantizes with) under
``jax.jit`` on the block cases (block profile ``jax``, block.md §8), and ``jax.lax.dot_general`` on int8 / uint8
operands with ``preferred_element_type=jnp.int32`` on the matmul_integer cases (matmul profile ``xla_cpu``,
matmul.md §6.4).

Every element type jnp has (float8 variants, E8M0, float4_e2m1fn, float16, bfloat16, int4/uint4/int8/uint8);
float6 types exist in jnp but XLA:CPU rejects them. float64 inputs run inside ``jax.enable_x64(True)`` (without
it JAX would silently round them to float32 first). Each batch of cases with the same signature is one call.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..families.uniform import scheme_of
from ..model import Outputs, RunFn, Target, Unsupported, first_line
from ..reproducer import sparse_input
from . import require
from ._common import (
    array_literal,
    codes_as,
    float_literal,
    hex_print,
    jit_once,
    per_case,
    python_c,
    raise_unsupported,
    run_each,
    run_elements,
    suite_input,
)

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
        g = jit_once(("jax.astype", op, fmt, out), lambda: f) if jit else f
        with jax.enable_x64(src == "float64" or out == "float64"):
            return np.asarray(g(jax.numpy.asarray(x)))
    return fn


def _run(jit: bool) -> RunFn:
    fn = _make(jit)
    return lambda cases: run_elements(cases, fn)


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

    raise_unsupported(_blk_supports(case))
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


# ---- uniform: quantization as JAX users write it -------------------------------------------------------------
#: integer storage -> the jnp type name
UQ_STORAGE = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int4", "uint4", "int2", "uint2")


def _uq_geometry(case: Case) -> tuple[object, np.ndarray, np.ndarray, tuple[tuple[int, int], ...]]:
    """(scheme, scales, zero points, blocks) as a JAX user holds them: per tensor 0-d, per axis a vector reshaped
    to broadcast along the axis, blocked one value per block ((axis, block) for every axis: ``_uq_blocked``)."""
    sch = scheme_of(case)
    (iname,) = case.inputs
    nd = case.inputs[iname].ndim
    sc = np.asarray(sch.scale_array, np.float64)
    zp = np.asarray(sch.zero_point_array, np.int64)
    blocks: tuple[tuple[int, int], ...] = ()
    if sch.granularity == "per_axis":
        shape = [1] * nd
        shape[sch.axis % nd] = -1
        sc, zp = sc.reshape(shape), zp.reshape(shape)
    elif sch.granularity == "blocked":
        b = dict((int(a) % nd, int(k)) for a, k in sch.block_size or ())
        blocks = tuple((a, b.get(a, 1)) for a in range(nd))
    return sch, sc, zp, blocks


def _uq_storage(sch) -> str:
    """The jnp type of an integer storage (a narrowed range, e.g. int8<-127:127>, is its type clipped to the
    range); a float storage by its name."""
    from ...formats import IntFormat

    st = sch.storage
    return f"{'' if st.signed else 'u'}int{st.bits}" if isinstance(st, IntFormat) else st.name


def _uq_supports(case: Case) -> str | None:
    sch = scheme_of(case)
    st = _uq_storage(sch)
    if st not in UQ_STORAGE:
        return (f"the user-written form jnp.clip(jnp.round(x / s) + z, lo, hi).astype(storage) is for integer "
                f"storage; {st} is a cast (the jax.astype targets)")
    x = case.inputs.get("x")
    if x is not None and x.dtype.name not in ("float32", "float16", "bfloat16", "float64"):
        return f"jnp has no {x.dtype.name} input"
    return None


def _uq_blocked(g, blocks, shape):
    """g(v, s, z) applied blockwise as JAX users write it: v padded to whole blocks and reshaped to (n0 / b0, b0,
    n1 / b1, b1, ...), s and z (one per block) reshaped to (n0 / b0, 1, n1 / b1, 1, ...) so that they broadcast;
    the result reshaped back and the padding sliced off. Per tensor and per axis (no blocks): g itself."""
    import jax.numpy as jnp

    if not blocks:
        return g

    def f(v, s_, z_):
        pad = [(0, (-shape[a]) % b) for a, b in blocks]
        vp = jnp.pad(v, pad)
        split = [d for a, b in blocks for d in ((shape[a] + pad[a][1]) // b, b)]
        one = [d for a, b in blocks for d in ((shape[a] + pad[a][1]) // b, 1)]
        y = g(vp.reshape(split), s_.reshape(one), z_.reshape(one)).reshape(vp.shape)
        return y[tuple(slice(0, n) for n in shape)]
    return f


def _uq_function(case: Case, jit: bool, closed: bool = False):
    """The function and its arguments: quantize ``jnp.clip(jnp.round(x / s) + z, lo, hi).astype(storage)`` with s
    and z in x's dtype; dequantize ``(q.astype(E) - z) * s`` in the expressed type E. closed: s and z are
    constants closed over by ``jax.jit`` (as users write it: XLA may fold them), x the only argument."""
    import jax
    import jax.numpy as jnp

    sch, sc, zp, blocks = _uq_geometry(case)
    st = getattr(jnp, _uq_storage(sch))
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    et = _jdt(sch.expressed.name)
    ed = _npdt(sch.expressed.name)
    s_e = sc.astype(np.float64).astype(ed)  # the scale is a value of the expressed type
    if case.operation == "uniform_quantize":
        x = case.inputs["x"]
        lo, hi = sch.storage_bounds
        # ... then of x's dtype (what jnp.asarray(s, x.dtype) holds); the zero point too
        s = s_e.astype(np.float64).astype(x.dtype)
        z = zp.astype(np.float64).astype(x.dtype)

        def g(v, s_, z_):
            return jnp.clip(jnp.round(v / s_) + z_, lo, hi).astype(st)
        args = (x, s, z)
    else:
        q = _uq_input_codes(case)
        s, z = s_e, zp.astype(np.float64).astype(ed)

        def g(v, s_, z_):
            return (v.astype(et) - z_) * s_
        args = (q, s, z)
    f = _uq_blocked(g, blocks, shape)
    if closed:
        s_c, z_c = args[1], args[2]
        return jax.jit(lambda v: f(v, jnp.asarray(s_c), jnp.asarray(z_c))), args[:1]
    if not jit:
        return f, args
    # f is the same program for every case of this key (g's constants, the blocks and the shape it pads)
    key = ("jax.uniform", *_um_key(case, sch), blocks, tuple(shape) if blocks else None)
    return jit_once(key, lambda: f), args


def _npdt(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _uq_input_codes(case: Case) -> np.ndarray:
    import jax.numpy as jnp

    from ._common import storage_values

    return np.asarray(storage_values(case)).astype(np.dtype(getattr(jnp, _uq_storage(scheme_of(case)))))


def _uq_one(jit: bool, closed: bool = False):
    def one(case: Case) -> Outputs:
        import jax

        raise_unsupported(_uq_supports(case))
        jax.config.update("jax_platforms", "cpu")
        f, args = _uq_function(case, jit, closed)
        _, full = _uq_function(case, jit)
        with jax.enable_x64(any(np.asarray(a).dtype == np.float64 for a in full)):
            y = np.asarray(f(*(jax.numpy.asarray(a) for a in args)))
        (oname,) = case.expected
        if y.dtype.itemsize == 1 and y.dtype.kind not in "iuf":  # int4 / int2: the byte ml_dtypes holds
            y = y.view(np.uint8)
        return {oname: codes_as(case, oname, y.view(f"u{y.dtype.itemsize}"))}
    return one


def _uq_run(jit: bool, closed: bool = False):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_each(cases, _uq_one(jit, closed))
    return run


def _uq_snippet(jit: bool, closed: bool = False):
    def snippet(case: Case, i: int) -> str:
        from ._common import single_element_case

        one = case if (case.scheme.get("axis") is None and not case.scheme.get("block_size")) else \
            single_element_case(case, i)
        j = i if one is case else 0
        sch = _uq_geometry(one)[0]
        _, (x, s, z) = _uq_function(one, jit)
        flat = np.asarray(x).reshape(-1)
        st = _uq_storage(sch)
        if one.operation == "uniform_quantize":
            lo, hi = sch.storage_bounds
            lit = float_literal(flat, j)
            body = (f"f = lambda v, s, z: jnp.clip(jnp.round(v / s) + z, {lo}, {hi}).astype(jnp.{st})")
            dt = "x.dtype"
            width = np.dtype(getattr(__import__("jax").numpy, st)).itemsize
            mask = f" & {hex((1 << sch.storage.bits) - 1)}" if sch.storage.bits < 8 else ""
        else:
            v = int(flat[j].astype(np.int64))
            full = flat.size > 1 and bool((flat.astype(np.int64) == v).all())
            mk = f"np.full({flat.size}, {v})" if full else f"np.array([{v}])"
            lit = f"{mk}.astype({'ml_dtypes.' if sch.storage.bits < 8 else 'np.'}{st})"
            et = sch.expressed.name
            body = f"f = lambda v, s, z: (v.astype(jnp.{et}) - z) * s"
            dt = f"jnp.{et}"
            width, mask = np.dtype(_np_view(et) if et in ("bfloat16", "float16") else et).itemsize, ""
        sv, zv = np.asarray(s).reshape(-1)[:1], np.asarray(z).reshape(-1)[:1]
        wrap = "jax.jit(f)" if jit else "f"
        call = "jax.jit(lambda v: f(v, s, z))(jnp.asarray(x))" if closed else f"{wrap}(jnp.asarray(x), s, z)"
        return python_c(
            "import numpy as np, ml_dtypes, jax, jax.numpy as jnp",
            f"jax.config.update('jax_enable_x64', {flat.dtype == np.float64 or sv.dtype == np.float64})",
            f"x = {lit}", f"s = jnp.asarray({float_literal(sv, 0)}[0], {dt})",
            f"z = jnp.asarray({float_literal(zv, 0)}[0], {dt})", body,
            f"print(hex(int(np.asarray({call}).reshape(-1).view(np.uint{8 * width})[{j}])"
            f"{mask}))")
    return snippet


# ---- uniform, programs as users write them: Python-number constants, 0-d (scalar) inputs -------------------------
#: user-program modes: (None: x whole, else the shape each element is called with: () 0-d, (1,) one element;
#: s and z closed over as Python numbers?)
USER_MODES = {"closed_python": (None, True), "scalar": ((), False), "one_element": ((1,), False),
              "closed_scalar": ((), True)}
#: the most elements of a case an element-wise target runs (one call per element; closed_scalar also compiles per
#: case)
SCALAR_MAX = {"scalar": 256, "one_element": 64, "closed_scalar": 64}


def _um_supports(mode: str):
    def supports(case: Case) -> str | None:
        reason = _uq_supports(case)
        if reason:
            return reason
        (iname,) = case.inputs
        if mode in SCALAR_MAX and case.inputs[iname].size > SCALAR_MAX[mode]:
            return (f"this target makes one jitted call per element (0-d or one-element inputs): it runs cases of "
                    f"up to "
                    f"{SCALAR_MAX[mode]} elements (the larger ones run whole in jax.uniform.jit)")
        if USER_MODES[mode][1] and scheme_of(case).granularity != "per_tensor":
            return ("this target closes over s and z as Python numbers (one per tensor); per-axis and blocked "
                    "scales are arrays: the jax.uniform.closed target closes over them")
        return None
    return supports


def _um_values(case: Case) -> tuple[object, np.ndarray, np.ndarray, np.ndarray]:
    """(scheme, input, s, z) with s and z expanded to the input's shape: s a value of the expressed type, then of
    the input's dtype for quantize (what ``v / s`` divides by); z as a float of that dtype (uniform.md §4)."""
    sch = scheme_of(case)
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    S, Z = sch.expand(shape)
    s_e = np.broadcast_to(np.asarray(S, np.float64), shape).astype(_npdt(sch.expressed.name))
    z = np.broadcast_to(np.asarray(Z, np.int64), shape)
    if case.operation == "uniform_quantize":
        x = case.inputs["x"]
        return sch, x, s_e.astype(np.float64).astype(x.dtype), z.astype(np.float64).astype(x.dtype)
    return sch, _uq_input_codes(case), s_e, z.astype(np.float64).astype(s_e.dtype)


def _um_body(case: Case, sch):
    """g(v, s, z): quantize jnp.clip(jnp.round(v / s) + z, lo, hi).astype(storage); dequantize
    (v.astype(E) - z) * s."""
    import jax.numpy as jnp

    st = getattr(jnp, _uq_storage(sch))
    if case.operation == "uniform_quantize":
        lo, hi = sch.storage_bounds
        return lambda v, s_, z_: jnp.clip(jnp.round(v / s_) + z_, lo, hi).astype(st)
    et = _jdt(sch.expressed.name)
    return lambda v, s_, z_: (v.astype(et) - z_) * s_


def _um_key(case: Case, sch) -> tuple[object, ...]:
    """What ``_um_body`` (and ``_uq_function``'s g) close over: the operation, the storage type, its bounds
    (quantize) and the expressed type (dequantize)."""
    if case.operation == "uniform_quantize":
        return (case.operation, _uq_storage(sch), tuple(sch.storage_bounds))
    return (case.operation, _uq_storage(sch), sch.expressed.name)


def _um_one(mode: str):
    """One case run as a user writes it (``USER_MODES``): closed_python, x whole under jax.jit with s and z
    Python numbers in the function (XLA folds them: x / c becomes x * fl(1 / c)); scalar, each element a 0-d
    array under jax.jit with its s and z as 0-d arguments (no broadcast: XLA keeps the true division, profile
    jax_divide); one_element, the same with each element a one-element array (a broadcast of one element is
    dropped: x / s again); closed_scalar, each element 0-d with s and z Python numbers closed over (folded again)."""
    each, closed = USER_MODES[mode]

    def one(case: Case) -> Outputs:
        import jax
        import jax.numpy as jnp

        raise_unsupported(_um_supports(mode)(case))
        jax.config.update("jax_platforms", "cpu")
        sch, x, s, z = _um_values(case)
        g = _um_body(case, sch)
        with jax.enable_x64(x.dtype == np.float64 or s.dtype == np.float64):
            if closed:
                sv = float(s.reshape(-1)[0]) if s.size else 1.0
                zv = int(np.asarray(z).reshape(-1)[0]) if z.size else 0
                # the constants are part of the program: keyed by sv's bits (0.0 and -0.0 are two programs)
                f = jit_once(("jax.uniform.um_closed", *_um_key(case, sch), struct.pack("<d", sv), zv),
                             lambda: lambda v: g(v, sv, zv))
                if each is not None:  # numpy scalars: 0-d arguments
                    y = np.stack([np.asarray(f(np.reshape(v, each))) for v in x.reshape(-1)]).reshape(x.shape)
                else:
                    y = np.asarray(f(jnp.asarray(x)))
            else:
                f = jit_once(("jax.uniform.um", *_um_key(case, sch)), lambda: g)
                flat = [np.asarray(f(np.reshape(v, each), a, b))
                        for v, a, b in zip(x.reshape(-1), s.reshape(-1), z.reshape(-1))]
                y = np.stack(flat).reshape(x.shape) if flat else np.asarray(g(jnp.asarray(x), s, z))
        (oname,) = case.expected
        if y.dtype.itemsize == 1 and y.dtype.kind not in "iuf":  # int4 / int2: the byte ml_dtypes holds
            y = y.view(np.uint8)
        return {oname: codes_as(case, oname, y.view(f"u{y.dtype.itemsize}"))}
    return one


def _um_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        each, closed = USER_MODES[mode]
        sch, x, s, z = _um_values(case)
        st = _uq_storage(sch)
        flat = np.asarray(x).reshape(-1)
        if case.operation == "uniform_quantize":
            lo, hi = sch.storage_bounds
            lit = float_literal(flat, i)
            body = f"lambda v, s, z: jnp.clip(jnp.round(v / s) + z, {lo}, {hi}).astype(jnp.{st})"
            width = np.dtype(getattr(__import__("jax").numpy, st)).itemsize
            mask = f" & {hex((1 << sch.storage.bits) - 1)}" if sch.storage.bits < 8 else ""
            dt = "x.dtype"
        else:
            mod = "ml_dtypes." if sch.storage.bits < 8 else "np."
            lit = f"np.array([{int(flat[i].astype(np.int64))}]).astype({mod}{st})"
            et = sch.expressed.name
            body = f"lambda v, s, z: (v.astype(jnp.{et}) - z) * s"
            width, mask, dt = np.dtype(_np_view(et) if et in ("bfloat16", "float16") else et).itemsize, "", f"jnp.{et}"
        sv = np.asarray(s).reshape(-1)[i : i + 1]
        zv = np.asarray(z).reshape(-1)[i : i + 1]
        xs = "jnp.asarray(x[0])" if each == () else "jnp.asarray(x)"
        if closed:
            consts = [f"s = {float(sv[0])!r}  # the scale as a Python number", f"z = {int(zv[0])}"]
            call = f"jax.jit(lambda v: f(v, s, z))({xs})"
        else:
            consts = [f"s = jnp.asarray({float_literal(sv, 0)}[0], {dt})",
                      f"z = jnp.asarray({float_literal(zv, 0)}[0], {dt})"]
            call = f"jax.jit(f)({xs}, s, z)"
        return python_c(
            "import numpy as np, ml_dtypes, jax, jax.numpy as jnp",
            f"jax.config.update('jax_enable_x64', {flat.dtype == np.float64 or sv.dtype == np.float64})",
            f"x = {lit}", *consts, f"f = {body}",
            f"print(hex(int(np.asarray({call}).reshape(-1).view(np.uint{8 * width})[0]){mask}))")
    return snippet


def _user_targets() -> list[Target]:
    ops = ("uniform_quantize", "uniform_dequantize")
    return [
        Target(BACKEND, "jax.uniform.closed_python", "uniform", "jax.jit(lambda v: jnp.clip(jnp.round(v / s) + z, "
               "lo, hi).astype(storage))(x) with s and z Python numbers in the function (per tensor; XLA folds them: "
               "x * fl(1 / s))", "jax", ops, _um_supports("closed_python"), per_case(_um_one("closed_python")),
               _um_snippet("closed_python")),
        Target(BACKEND, "jax.uniform.scalar", "uniform", "the jax.uniform.jit function called on each element as a "
               "0-d array with its s and z as 0-d arguments (no broadcast: XLA keeps x / s)", "jax_divide", ops,
               _um_supports("scalar"), per_case(_um_one("scalar")), _um_snippet("scalar")),
        Target(BACKEND, "jax.uniform.one_element", "uniform", "the jax.uniform.jit function called on each element "
               "as a one-element array with its s and z as 0-d arguments (the broadcast of one element is dropped: "
               "XLA keeps x / s)", "jax_divide", ops, _um_supports("one_element"),
               per_case(_um_one("one_element")), _um_snippet("one_element")),
        Target(BACKEND, "jax.uniform.closed_scalar", "uniform", "each element as a 0-d array under jax.jit with s "
               "and z Python numbers in the function (per tensor; XLA folds x / s into x * fl(1 / s))", "jax", ops,
               _um_supports("closed_scalar"), per_case(_um_one("closed_scalar")), _um_snippet("closed_scalar")),
    ]


# ---- recipes: jax.lax.scaled_dot, float8 dot_general, scaled casts ----------------------------------------------
def _ml(name: str):
    import ml_dtypes

    return getattr(ml_dtypes, name)


def _sd_supports(case: Case, api: str = "jax.lax.scaled_dot") -> str | None:
    if "lhs_global_scale" in case.inputs:
        return f"{api} has no global scale (two-level NVFP4 takes one per operand)"
    return None


def _sd_args(case: Case) -> list[np.ndarray]:
    """lhs, rhs, lhs_scale, rhs_scale as ml_dtypes arrays (codes viewed as their element / scale types)."""
    af = case.array_formats
    return [np.ascontiguousarray(case.inputs[n]).view(_ml(af[n]))
            for n in ("lhs_codes", "rhs_codes", "lhs_scales", "rhs_scales")]


def _sd_fn(jit: bool):
    import jax
    import jax.numpy as jnp

    def f(a, b, sa, sb):
        return jax.lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=sb, preferred_element_type=jnp.float32)
    return jit_once(("jax.scaled_dot",), lambda: f) if jit else f


def _sd_run(jit: bool):
    def one(case: Case) -> Outputs:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        y = _sd_fn(jit)(*(jnp.asarray(a) for a in _sd_args(case)))
        return {"y": codes_as(case, "y", np.asarray(y))}

    return per_case(one)


def _sd_snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        af = case.array_formats
        lits = [f"{n} = {suite_input(case, n)}.view(ml_dtypes.{af[n]})"
                for n in ("lhs_codes", "rhs_codes", "lhs_scales", "rhs_scales")]
        call = ("jax.lax.scaled_dot(jnp.asarray(lhs_codes), jnp.asarray(rhs_codes), lhs_scale=jnp.asarray(lhs_scales), "
                "rhs_scale=jnp.asarray(rhs_scales), preferred_element_type=jnp.float32)")
        if jit:
            call = ("jax.jit(lambda a, b, c, d: jax.lax.scaled_dot(a, b, lhs_scale=c, rhs_scale=d, "
                    "preferred_element_type=jnp.float32))(lhs_codes, rhs_codes, lhs_scales, rhs_scales)")
        return python_c("import numpy as np, ml_dtypes, jax, jax.numpy as jnp", *lits, f"y = {call}",
                        f"print(hex(int(np.asarray(y).reshape(-1).view(np.uint32)[{i}])))")
    return snippet


def _nn_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    """jax.nn.scaled_matmul(lhs (1, M, K), rhs (1, N, K), lhs_scales (1, M, K / B), rhs_scales (1, N, K / B)). JAX
    0.10.2 lowers it for cuDNN only: on CPU the call raises NotImplementedError ("MLIR translation rule for
    primitive 'scaled_matmul' not found for platform cpu"), which is the library saying it has no CPU
    implementation (unsupported); any other error is a crash."""
    def one(case: Case) -> Outputs:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        a, b, sa, sb = _sd_args(case)
        try:
            y = jax.nn.scaled_matmul(jnp.asarray(a)[None], jnp.asarray(b.T)[None], jnp.asarray(sa)[None],
                                     jnp.asarray(sb.T)[None], preferred_element_type=jnp.float32)
        except NotImplementedError as exc:
            if "not found for platform cpu" not in str(exc):
                raise
            raise Unsupported(f"jax.nn.scaled_matmul has no CPU lowering ({first_line(exc)})") from None
        return {"y": codes_as(case, "y", np.asarray(y)[0])}
    return run_each(cases, one)


def _nn_snippet(case: Case, i: int) -> str:
    af = case.array_formats
    lits = [f"{n} = {suite_input(case, n)}.view(ml_dtypes.{af[n]})"
            for n in ("lhs_codes", "rhs_codes", "lhs_scales", "rhs_scales")]
    return python_c("import numpy as np, ml_dtypes, jax, jax.numpy as jnp", *lits,
                    "y = jax.nn.scaled_matmul(jnp.asarray(lhs_codes)[None], jnp.asarray(rhs_codes.T)[None], "
                    "jnp.asarray(lhs_scales)[None], jnp.asarray(rhs_scales.T)[None], "
                    "preferred_element_type=jnp.float32)",
                    f"print(hex(int(np.asarray(y).reshape(-1).view(np.uint32)[{i}])))")


def _qdq_fn(case: Case, jit: bool):
    """The scaled-FP8 matmul as JAX users write it (Flax fp8_ops): s = amax / max per tensor (1 where amax is 0
    or not finite) unless given, q = clip(x / s, -max, max).astype(f8), y = dot_general(q_a, q_b,
    preferred_element_type=float32) * (s_a * s_b)."""
    import jax
    import jax.numpy as jnp

    p = case.params
    fa, fb = _jdt(p["a_format"]), _jdt(p["b_format"])

    def scale(x, fmt):
        m = jnp.float32(float(jnp.finfo(fmt).max))
        am = jnp.max(jnp.abs(x))
        return jnp.where(jnp.isfinite(am) & (am > 0), am / m, jnp.float32(1)).reshape(1)

    def q(x, s, fmt):
        m = jnp.float32(float(jnp.finfo(fmt).max))
        return jnp.clip(x / s, -m, m).astype(fmt)

    def f(a, b, sa=None, sb=None):
        sa = scale(a, fa) if sa is None else sa
        sb = scale(b, fb) if sb is None else sb
        qa, qb = q(a, sa, fa), q(b, sb, fb)
        acc = jax.lax.dot_general(qa, qb, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
        return qa, qb, sa, sb, acc * (sa * sb)
    return jit_once(("jax.fp8_dot", p["a_format"], p["b_format"]), lambda: f) if jit else f


def _qdq_run(jit: bool):
    def one(case: Case) -> Outputs:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        args = [jnp.asarray(case.inputs[n]) for n in ("a", "b", "a_scale", "b_scale") if n in case.inputs]
        qa, qb, sa, sb, y = _qdq_fn(case, jit)(*args)
        out = {"a_codes": np.asarray(qa).view(np.uint8), "b_codes": np.asarray(qb).view(np.uint8),
               "a_scale": np.asarray(sa, np.float32).reshape(-1), "b_scale": np.asarray(sb, np.float32).reshape(-1),
               "y": np.asarray(y)}
        return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}

    return per_case(one)


def _qdq_snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        p = case.params
        out = getattr(case, "_output", "y")
        given = "a_scale" in case.inputs
        lits = [st for n in ("a", "b", "a_scale", "b_scale") if n in case.inputs
                for st in (*sparse_input(n, case.inputs[n], array_literal), f"{n} = jnp.asarray({n})")]
        fa, fb = p["a_format"], p["b_format"]
        body = [f"fa, fb = jnp.{fa}, jnp.{fb}",
                "sc = lambda x, t: jnp.where(jnp.isfinite(jnp.max(jnp.abs(x))) & (jnp.max(jnp.abs(x)) > 0), "
                "jnp.max(jnp.abs(x)) / jnp.float32(float(jnp.finfo(t).max)), jnp.float32(1)).reshape(1)",
                "q = lambda x, s, t: jnp.clip(x / s, -jnp.float32(float(jnp.finfo(t).max)), "
                "jnp.float32(float(jnp.finfo(t).max))).astype(t)",
                "def f(a, b" + (", sa, sb" if given else "") + "):",
                *([] if given else ["    sa, sb = sc(a, fa), sc(b, fb)"]),
                "    qa, qb = q(a, sa, fa), q(b, sb, fb)",
                "    return qa, qb, sa, sb, jax.lax.dot_general(qa, qb, (((1,), (0,)), ((), ())), "
                "preferred_element_type=jnp.float32) * (sa * sb)",
                f"r = {'jax.jit(f)' if jit else 'f'}(a, b" + (", a_scale, b_scale" if given else "") + ")"]
        k = {"a_codes": 0, "b_codes": 1, "a_scale": 2, "b_scale": 3, "y": 4}[out]
        w = "np.uint8" if out.endswith("codes") else "np.uint32"
        return python_c("import numpy as np, jax, jax.numpy as jnp", *lits, *body,
                        f"print(hex(int(np.asarray(r[{k}]).reshape(-1).view({w})[{i}])))")
    return snippet


def _decisive(x: np.ndarray) -> int:
    """The flat index of the element that sets max(abs(x)): the first NaN, else the first of largest magnitude."""
    with np.errstate(invalid="ignore"):
        mag = np.abs(x.astype(np.float64)).reshape(-1)
    nan = np.isnan(mag)
    return int(np.argmax(nan)) if nan.any() else int(np.argmax(mag))


def script_case(target: str, case: Case, index: int, output: str) -> Case | None:
    """A smaller input for the reproducer of element ``index`` of ``output`` of a qdq_matmul case too large to write
    out (jax.fp8_dot.*): a and b zero except the element of largest magnitude of each (which sets the per-tensor
    scale, recipes.md §3.3) and what the output element reads: row m of a and column n of b for y[m, n], the
    element itself for codes. The output element and the scales are those of the case. None for other targets."""
    import copy

    if not target.startswith("jax.fp8_dot.") or case.operation != "qdq_matmul":
        return None
    a, b = case.inputs["a"], case.inputs["b"]
    ra, rb = np.zeros_like(a), np.zeros_like(b)
    for src, dst in ((a, ra), (b, rb)):
        k = _decisive(src)
        dst.reshape(-1)[k] = src.reshape(-1)[k]
    if output == "y":
        m, n = divmod(index, case.expected["y"].shape[1])
        ra[m], rb[:, n] = a[m], b[:, n]
        what = f"a and b zero except row {m} of a, column {n} of b and each one's element of largest magnitude"
    elif output in ("a_codes", "b_codes"):
        src, dst = (a, ra) if output == "a_codes" else (b, rb)
        dst.reshape(-1)[index] = src.reshape(-1)[index]
        what = f"a and b zero except element {index} of {output[0]} and each one's element of largest magnitude"
    else:
        what = "a and b zero except each one's element of largest magnitude (it sets the per-tensor scale)"
    c = copy.copy(case)
    object.__setattr__(c, "inputs", {**case.inputs, "a": ra, "b": rb})
    object.__setattr__(c, "_what", what)
    return c


def _cast_run(jit: bool):
    def one(case: Case) -> Outputs:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        dt = _jdt(case.format["name"])
        m = jnp.float32(float(jnp.finfo(dt).max))

        def f(x, s):
            c = jnp.clip(x / s, -m, m).astype(dt)
            return c, c.astype(jnp.float32) * s
        g = jit_once(("jax.scaled_cast", case.format["name"]), lambda: f) if jit else f
        c, y = g(jnp.asarray(case.inputs["x"]), jnp.asarray(case.inputs["scale"]))
        return {"codes": codes_as(case, "codes", np.asarray(c).view(np.uint8)), "y": codes_as(case, "y", np.asarray(y))}

    return per_case(one)


def _cast_snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        fmt = case.format["name"]
        out = getattr(case, "_output", "codes")
        s = float(case.inputs["scale"].reshape(-1)[0])
        k, w = (0, "np.uint8") if out == "codes" else (1, "np.uint32")
        return python_c("import numpy as np, jax, jax.numpy as jnp",
                        f"x = jnp.asarray({suite_input(case, 'x')})",
                        f"s = jnp.asarray(np.array([{np.float32(s).view(np.uint32):#x}], np.uint32).view(np.float32))",
                        f"m = jnp.float32(float(jnp.finfo(jnp.{fmt}).max))",
                        f"f = lambda x, s: (lambda c: (c, c.astype(jnp.float32) * s))(jnp.clip(x / s, -m, m)"
                        f".astype(jnp.{fmt}))",
                        f"print(hex(int(np.asarray({'jax.jit(f)' if jit else 'f'}(x, s)[{k}]).reshape(-1)"
                        f".view({w})[{i}])))")
    return snippet


def _recipe_targets() -> list[Target]:
    mm = ("block_matmul",)
    return [
        Target(BACKEND, "jax.scaled_dot.eager", "recipes", "jax.lax.scaled_dot(lhs, rhs, lhs_scale=, rhs_scale=, "
               "preferred_element_type=jnp.float32) on ml_dtypes element / scale arrays (eager, XLA:CPU)", None, mm,
               _sd_supports, _sd_run(False), _sd_snippet(False)),
        Target(BACKEND, "jax.scaled_dot.jit", "recipes", "the same call under jax.jit (XLA:CPU)", None, mm,
               _sd_supports, _sd_run(True), _sd_snippet(True)),
        Target(BACKEND, "jax.nn.scaled_matmul", "recipes", "jax.nn.scaled_matmul(lhs[None], rhs.T[None], "
               "lhs_scales[None], rhs_scales.T[None], preferred_element_type=jnp.float32) (XLA:CPU)", None, mm,
               lambda c: _sd_supports(c, "jax.nn.scaled_matmul"), _nn_run, _nn_snippet),
        Target(BACKEND, "jax.fp8_dot.eager", "recipes", "s = amax / max (1 for a zero amax) unless given, q = "
               "jnp.clip(x / s, -max, max).astype(jnp.float8_*), y = jax.lax.dot_general(q_a, q_b, "
               "preferred_element_type=jnp.float32) * (s_a * s_b) (eager, XLA:CPU)", None, ("qdq_matmul",),
               lambda c: None, _qdq_run(False), _qdq_snippet(False)),
        Target(BACKEND, "jax.fp8_dot.jit", "recipes", "the same function under jax.jit (XLA:CPU)", None,
               ("qdq_matmul",), lambda c: None, _qdq_run(True), _qdq_snippet(True)),
        Target(BACKEND, "jax.scaled_cast.eager", "recipes", "c = jnp.clip(x / s, -max, max).astype(jnp.float8_*), "
               "y = c.astype(jnp.float32) * s (eager, XLA:CPU: Flax fp8_ops quantize / dequantize)", "flax",
               ("scaled_qdq",), lambda c: None, _cast_run(False), _cast_snippet(False)),
        Target(BACKEND, "jax.scaled_cast.jit", "recipes", "the same function under jax.jit (XLA:CPU rewrites x / s "
               "into x * (1 / s))", "flax_jit", ("scaled_qdq",), lambda c: None, _cast_run(True),
               _cast_snippet(True)),
    ]


# ---- matmul: jax.lax.dot_general on 8-bit integers with an int32 result (matmul.md §6.4) -----------------------
MM_DTYPES = ("int8", "uint8")


def _mm_supports(case: Case) -> str | None:
    p = case.params
    if p["a_storage"] not in MM_DTYPES or p["b_storage"] not in MM_DTYPES:
        return "the target takes int8 / uint8 operands"
    return None


def mm_function():
    """f(a, b, za, zb[, bias]): jax.lax.dot_general on the raw int8 / uint8 operands with
    preferred_element_type=jnp.int32, then the zero points in int32 jnp ops (which wrap):
    acc - zb * sum_k a - za * sum_k b + K za zb (+ bias)."""
    import jax
    import jax.numpy as jnp

    def f(a, b, za, zb, *bias):
        i32 = jnp.int32
        acc = jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=i32)
        za = za.astype(i32).reshape(-1, 1)
        zb = zb.astype(i32).reshape(1, -1)
        y = (acc - zb * jnp.sum(a, axis=1, keepdims=True, dtype=i32) - za * jnp.sum(b, axis=0, keepdims=True,
             dtype=i32) + i32(a.shape[1]) * za * zb)
        return y + bias[0].astype(i32) if bias else y
    return f


def _mm_run(jit: bool):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        import jax

        jax.config.update("jax_platforms", "cpu")
        f = mm_function()
        g = jax.jit(f) if jit else f

        def one(case: Case) -> Outputs:
            ins = case.inputs
            args = [ins["a"], ins["b"], ins["a_zero_point"], ins["b_zero_point"]]
            if "bias" in ins:
                args.append(ins["bias"])
            return {"y": np.asarray(g(*(jax.numpy.asarray(x) for x in args))).astype(np.int32)}
        return run_each(cases, one)
    return run


def _mm_snippet(jit: bool):
    def snippet(case: Case, i: int) -> str:
        from .onnxruntime import matmul_element_inputs, matmul_literal

        ins = matmul_element_inputs(case, i)
        names = ["a", "b", "a_zero_point", "b_zero_point"] + (["bias"] if "bias" in ins else [])
        return python_c(
            "import numpy as np, jax, jax.numpy as jnp", *(f"{n} = {matmul_literal(ins[n])}" for n in names),
            "def f(a, b, za, zb, *bias):",
            "    acc = jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)",
            "    za, zb = za.astype(jnp.int32).reshape(-1, 1), zb.astype(jnp.int32).reshape(1, -1)",
            "    y = acc - zb * jnp.sum(a, axis=1, keepdims=True, dtype=jnp.int32) - za * jnp.sum(b, axis=0, "
            "keepdims=True, dtype=jnp.int32) + jnp.int32(a.shape[1]) * za * zb",
            "    return y + bias[0].astype(jnp.int32) if bias else y",
            f"y = np.asarray({'jax.jit(f)' if jit else 'f'}({', '.join(names)}))",
            "print(hex(int(y.reshape(-1).view(np.uint32)[0])))")
    return snippet


def _matmul_targets() -> list[Target]:
    api = ("jax.lax.dot_general(a, b, preferred_element_type=jnp.int32) on the raw int8 / uint8 operands, zero "
           "points in int32 jnp ops afterwards: acc - zb * sum_k a - za * sum_k b + K za zb (+ bias)")
    return [
        Target(BACKEND, "jax.matmul_integer.eager", "matmul", api + " (eager, XLA:CPU)", "xla_cpu",
               ("matmul_integer",), _mm_supports, _mm_run(False), _mm_snippet(False)),
        Target(BACKEND, "jax.matmul_integer.jit", "matmul", "the same function under jax.jit (XLA:CPU)",
               "xla_cpu", ("matmul_integer",), _mm_supports, _mm_run(True), _mm_snippet(True),
               notes="XLA converts both operands to s32 and runs an s32 x s32 dot"),
    ]


def targets() -> list[Target]:
    require("jax", "jaxlib", "ml_dtypes", backend=BACKEND, hint="pip install jax")
    ops = ("encode", "decode", "quantize")
    return [
        Target(BACKEND, "jax.astype.eager", "elements", "jnp.asarray(x).astype(jnp.<format>) (eager, XLA:CPU)",
               "jax", ops, _supports, _run(False), _snippet(False)),
        Target(BACKEND, "jax.astype.jit", "elements", "jax.jit(lambda v: v.astype(jnp.<format>))(x) (XLA:CPU)",
               "jax", ops, _supports, _run(True), _snippet(True)),
        Target(BACKEND, "jax.block_quantize.jit", "block",
               "jax.jit(lambda v: scaled_matmul_stablehlo.quantize(v, jax.nn.get_scaled_dot_general_config(mode[, "
               "global_scale])))(x), modes mxfp8 and nvfp4 (XLA:CPU; codes and scales read as bytes)", "jax",
               ("block_quantize", "block_dequantize"), _blk_supports, _blk_run, _blk_snippet),
        Target(BACKEND, "jax.uniform.eager", "uniform", "jnp.clip(jnp.round(x / s) + z, lo, hi).astype(storage) "
               "with s, z in x's dtype; (q.astype(E) - z) * s (eager, XLA:CPU; per axis by broadcasting, blocked "
               "by padding and reshaping x into blocks)", "jax", ("uniform_quantize", "uniform_dequantize"),
               _uq_supports, _uq_run(False), _uq_snippet(False), copies=True),
        Target(BACKEND, "jax.uniform.jit", "uniform", "the same function under jax.jit (XLA:CPU rewrites x / s "
               "into x * (1 / s))", "jax", ("uniform_quantize", "uniform_dequantize"), _uq_supports, _uq_run(True),
               _uq_snippet(True), copies=True),
        Target(BACKEND, "jax.uniform.closed", "uniform", "the same function under jax.jit with s and z closed over "
               "as constants, x the only argument (as users write it: XLA may fold the constants)", "jax",
               ("uniform_quantize", "uniform_dequantize"), _uq_supports, _uq_run(True, True), _uq_snippet(True, True),
               copies=True),
        *_user_targets(),
        *_recipe_targets(),
        *_matmul_targets(),
    ]


__all__ = ["BACKEND", "DISTRIBUTIONS", "script_case", "targets"]
