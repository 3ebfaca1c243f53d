"""MLX (CPU): ``mx.to_fp8`` / ``mx.from_fp8`` (float8_e4m3fn, element profile ``mlx``) and ``astype`` to float16 /
bfloat16 (no qref profile: the spec default is the reference); block quantization (``mx.quantize``); and uniform
quantization as users write it, ``mx.clip(mx.round(x / s) + z, lo, hi).astype(storage)``, eagerly with s and z
passed in and under ``mx.compile`` with s and z captured as constants (uniform profile ``mlx``, uniform.md §4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import codes_as, float_literal, hex_print, python_c, raise_unsupported, run_elements

BACKEND = "mlx"
DISTRIBUTIONS = ("mlx",)


def _mx():
    import mlx.core as mx

    return mx


def _mxdt(name: str):
    return getattr(_mx(), name)


def _to_mx(flat: np.ndarray):
    mx = _mx()
    if flat.dtype.name == "bfloat16":
        return mx.array(flat.view(np.uint16)).view(mx.bfloat16)
    return mx.array(flat)


def _from_mx(a) -> np.ndarray:
    mx = _mx()
    if a.dtype == mx.bfloat16:
        return np.asarray(a.view(mx.uint16))
    return np.asarray(a)


# ---- to_fp8 / from_fp8 ------------------------------------------------------------------------------------
def _fp8_supports(case: Case) -> str | None:
    if case.format["name"] != "float8_e4m3fn":
        return f"mx.to_fp8/from_fp8 convert float8_e4m3fn only, not {case.format['name']}"
    if case.operation == "decode" and case.params["dtype"] == "float64":
        return "mx.from_fp8 does not produce float64"
    return None


def _fp8_fn(sig: tuple[str, str, str, str], flat: np.ndarray) -> np.ndarray:
    mx = _mx()
    op, _fmt, _src, out = sig
    if op == "decode":
        return _from_mx(mx.from_fp8(mx.array(flat.astype(np.uint8)), dtype=_mxdt(out)))
    codes = mx.to_fp8(_to_mx(flat))
    if op == "encode":
        return np.asarray(codes)
    return _from_mx(mx.from_fp8(codes, dtype=_to_mx(flat[:1]).dtype))


def _as_bits(expr: str, dtype: str) -> str:
    """A reproducer's MLX expression, a bfloat16 result read as uint16 (numpy has no bfloat16 to print)."""
    return expr + ".view(mx.uint16)" if dtype == "bfloat16" else expr


def _snippet_input(case: Case, i: int) -> tuple[np.ndarray, str, str]:
    """(the input x, the numpy literal of its element i, the MLX array of it: bfloat16 through its bits)."""
    x = case.inputs["x"]
    load = "mx.array(x.view(np.uint16)).view(mx.bfloat16)" if x.dtype.name == "bfloat16" else "mx.array(x)"
    return x, float_literal(x, i), load


def _fp8_snippet(case: Case, i: int) -> str:
    if case.operation == "decode":
        out = case.params["dtype"]
        c = int(case.inputs["codes"].reshape(-1)[i])
        expr = _as_bits(f"mx.from_fp8(mx.array(np.array([{hex(c)}], np.uint8)), dtype=mx.{out})", out)
        return python_c("import numpy as np, mlx.core as mx", hex_print(expr, 4 if out == "float32" else 2))
    x, lit, load = _snippet_input(case, i)
    imports = "import numpy as np, ml_dtypes, mlx.core as mx" if x.dtype.name == "bfloat16" else \
        "import numpy as np, mlx.core as mx"
    if case.operation == "encode":
        return python_c(imports, f"x = {lit}", hex_print(f"mx.to_fp8({load})", 1))
    back = _as_bits(f"mx.from_fp8(mx.to_fp8({load}), dtype={load}.dtype)", x.dtype.name)
    return python_c(imports, f"x = {lit}", hex_print(back, x.dtype.itemsize))


# ---- astype to float16 / bfloat16 ---------------------------------------------------------------------------
def _astype_supports(case: Case) -> str | None:
    name = case.format["name"]
    if name not in ("float16", "bfloat16"):
        return f"MLX has no {name} array type (mx.to_fp8 covers float8_e4m3fn)"
    src = case.inputs["codes" if case.operation == "decode" else "x"].dtype.name
    if src == name:
        return None
    return None


def _astype_fn(sig: tuple[str, str, str, str], flat: np.ndarray) -> np.ndarray:
    mx = _mx()
    op, fmt, _src, out = sig
    if op == "decode":
        a = mx.array(flat.view(np.uint16)).view(_mxdt(fmt))
        return _from_mx(a.astype(_mxdt(out)))
    a = _to_mx(flat)
    y = a.astype(_mxdt(fmt))
    if op == "encode":
        return _from_mx(y).view(np.uint16)
    return _from_mx(y.astype(a.dtype))


def _astype_snippet(case: Case, i: int) -> str:
    fmt = case.format["name"]
    if case.operation == "decode":
        out = case.params["dtype"]
        c = int(case.inputs["codes"].reshape(-1)[i])
        expr = _as_bits(f"mx.array(np.array([{hex(c)}], np.uint16)).view(mx.{fmt}).astype(mx.{out})", out)
        return python_c("import numpy as np, mlx.core as mx", hex_print(expr, {"float32": 4, "float64": 8}.get(out, 2)))
    x, lit, load = _snippet_input(case, i)
    imports = "import numpy as np, ml_dtypes, mlx.core as mx"
    if case.operation == "encode":
        return python_c(imports, f"x = {lit}", hex_print(f"{load}.astype(mx.{fmt}).view(mx.uint16)", 2))
    back = _as_bits(f"{load}.astype(mx.{fmt}).astype({load}.dtype)", x.dtype.name)
    return python_c(imports, f"x = {lit}", hex_print(back, x.dtype.itemsize))


def _runner(fn):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        return run_elements(cases, fn)
    return run


# ---- uniform: quantization as MLX users write it, eagerly and under mx.compile with captured constants ---------
UQ_STORAGE = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
UQ_INPUTS = ("float32", "float16", "bfloat16")


def _uq_supports(case: Case) -> str | None:
    from ...formats import IntFormat
    from ..families.uniform import scheme_of

    sch = scheme_of(case)
    st = sch.storage
    name = f"{'' if st.signed else 'u'}int{st.bits}" if isinstance(st, IntFormat) else st.name
    if name not in UQ_STORAGE:
        return f"MLX has no {name} array type (the user-written form casts to int8/16/32 or uint8/16/32)"
    if sch.granularity == "blocked":
        return "the target writes per-tensor and per-axis scales (broadcast), not blocks"
    if sch.expressed.name not in UQ_INPUTS:
        return f"the target computes in float32 / float16 / bfloat16, not {sch.expressed.name}"
    x = case.inputs.get("x")
    if x is not None and x.dtype.name not in UQ_INPUTS:
        return f"the target takes float32 / float16 / bfloat16 inputs, not {x.dtype.name}"
    return None


#: mx.compile on CPU writes the captured constants into C++ source that the system compiler builds (g++ -O3, about
#: a second a graph): the compiled target runs per-tensor int8 quantize cases of up to this many elements (14 distinct
#: graphs in conformance/v1)
COMPILED_MAX = 64


def _compiled_supports(case: Case) -> str | None:
    from ..families.uniform import scheme_of

    reason = _uq_supports(case)
    if reason:
        return reason
    sch = scheme_of(case)
    if case.operation != "uniform_quantize" or sch.granularity != "per_tensor" or sch.storage.bits != 8 \
            or not sch.storage.signed or case.inputs["x"].size > COMPILED_MAX:
        return ("mx.compile on CPU builds C++ with the captured constants written in (g++ -O3, once per distinct "
                f"scale): this target runs per-tensor int8 quantize cases of up to {COMPILED_MAX} elements; the "
                "rest run in mlx.uniform.eager")
    return None


def _uq_parts(case: Case):
    """(g, x, s, z, storage name): g(v, s, z) is mx.clip(mx.round(v / s) + z, lo, hi).astype(storage) for
    quantize (s, z of x's dtype), (v.astype(E) - z) * s for dequantize (s, z of the expressed type E); per axis s
    and z are shaped to broadcast along the axis."""
    from ...formats import IntFormat
    from ..families.uniform import scheme_of
    from ._common import storage_values

    mx = _mx()
    sch = scheme_of(case)
    (iname,) = case.inputs
    shape = case.inputs[iname].shape
    S, Z = sch.expand(shape)
    st = sch.storage
    sname = f"{'' if st.signed else 'u'}int{st.bits}" if isinstance(st, IntFormat) else st.name
    e = sch.expressed.name
    import ml_dtypes

    edt = np.dtype(ml_dtypes.bfloat16) if e == "bfloat16" else np.dtype(e)
    s_e = np.asarray(S, np.float64).astype(edt)
    if case.operation == "uniform_quantize":
        x = case.inputs["x"]
        lo, hi = sch.storage_bounds
        s = s_e.astype(np.float64).astype(x.dtype)
        z = np.asarray(Z, np.int64).astype(np.float64).astype(x.dtype)

        def g(v, s_, z_):
            return mx.clip(mx.round(v / s_) + z_, lo, hi).astype(getattr(mx, sname))
        return g, x, s, z, sname
    q = np.asarray(storage_values(case)).astype(np.dtype(sname))
    z = np.asarray(Z, np.int64).astype(np.float64).astype(edt)

    def g(v, s_, z_):
        return (v.astype(getattr(mx, e)) - z_) * s_
    return g, q, s_e, z, sname


def _uq_one(compiled: bool):
    """eager: g(x, s, z) with s and z arrays passed in; compiled: mx.compile(lambda v: g(v, s, z)) with s and z
    captured as Python numbers: constants written into the C++ kernel that mx.compile builds on CPU."""
    def one(case: Case) -> Outputs:
        raise_unsupported((_compiled_supports if compiled else _uq_supports)(case))
        mx = _mx()
        g, x, s, z, _ = _uq_parts(case)
        xs = _to_mx(np.ascontiguousarray(x).reshape(-1)).reshape(x.shape)
        if s.size == 1:
            sv, zv = float(s.reshape(-1)[0]), int(np.asarray(z, np.float64).reshape(-1)[0])
            sa, za = (sv, zv) if compiled else (_to_mx(s.reshape(-1)).reshape(()), _to_mx(z.reshape(-1)).reshape(()))
        else:
            sa, za = (_to_mx(s.reshape(-1)).reshape(s.shape), _to_mx(z.reshape(-1)).reshape(z.shape))
        y = mx.compile(lambda v: g(v, sa, za))(xs) if compiled else g(xs, sa, za)
        y = _from_mx(y)
        (oname,) = case.expected
        return {oname: codes_as(case, oname, y.view(f"u{y.dtype.itemsize}"))}
    return one


def _uq_run(compiled: bool):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        from ._common import run_each

        return run_each(cases, _uq_one(compiled))
    return run


def _uq_snippet(compiled: bool):
    def snippet(case: Case, i: int) -> str:
        from ._common import single_element_case

        one = single_element_case(case, i) if np.asarray(case.inputs[next(iter(case.inputs))]).size > 1 else case
        _, x, s, z, sname = _uq_parts(one)
        flat = np.asarray(x).reshape(-1)
        if one.operation == "uniform_quantize":
            from ..families.uniform import scheme_of

            lo, hi = scheme_of(one).storage_bounds
            body = f"g = lambda v, s, z: mx.clip(mx.round(v / s) + z, {lo}, {hi}).astype(mx.{sname})"
            lit = float_literal(flat, 0)
            xs = "mx.array(x.view(np.uint16)).view(mx.bfloat16)" if flat.dtype.name == "bfloat16" else "mx.array(x)"
            w = np.dtype(sname).itemsize
        else:
            e = str(_expressed(one))
            body = f"g = lambda v, s, z: (v.astype(mx.{e}) - z) * s"
            lit = f"np.array([{int(flat[0])}], np.{sname})"
            xs = "mx.array(x)"
            w = 2 if e in ("float16", "bfloat16") else 4
        sv, zv = np.asarray(s).reshape(-1)[:1], np.asarray(z).reshape(-1)[:1]
        if compiled:
            consts = [f"s = {float(sv[0])!r}  # captured by mx.compile as a constant", f"z = {int(zv[0])}"]
            call = "mx.compile(lambda v: g(v, s, z))(xv)"
        else:
            mk = ("mx.array({}.view(np.uint16)).view(mx.bfloat16)" if sv.dtype.name == "bfloat16" else "mx.array({})")
            consts = [f"s = {mk.format(float_literal(sv, 0))}[0]", f"z = {mk.format(float_literal(zv, 0))}[0]"]
            call = "g(xv, s, z)"
        out = f"{call}.view(mx.uint16)" if w == 2 else call
        return python_c("import numpy as np, ml_dtypes, mlx.core as mx", f"x = {lit}", f"xv = {xs}", *consts, body,
                        f"print(hex(int(np.asarray({out}).reshape(-1).view(np.uint{8 * w})[0])))")
    return snippet


def _expressed(case: Case) -> str:
    """The expressed type's name of a uniform case."""
    from ..families.uniform import scheme_of

    return scheme_of(case).expressed.name


def _uq_targets() -> list[Target]:
    ops = ("uniform_quantize", "uniform_dequantize")
    return [
        Target(BACKEND, "mlx.uniform.eager", "uniform", "mx.clip(mx.round(x / s) + z, lo, hi).astype(storage) with s, "
               "z arrays of x's dtype passed in; (q.astype(E) - z) * s (eager, CPU; per axis by broadcasting)", "mlx",
               ops, _uq_supports, _uq_run(False), _uq_snippet(False)),
        Target(BACKEND, "mlx.uniform.compiled", "uniform", "the same function under mx.compile with s and z captured "
               "(Python numbers): constants written into the C++ kernel mx.compile builds (CPU)", "mlx", ops,
               _compiled_supports, _uq_run(True), _uq_snippet(True)),
    ]


def targets() -> list[Target]:
    require("mlx.core", backend=BACKEND, hint="pip install 'mlx[cpu]'")
    ops = ("encode", "decode", "quantize")
    return [
        Target(BACKEND, "mlx.fp8", "elements", "mx.to_fp8(x) / mx.from_fp8(codes, dtype) (float8_e4m3fn)", "mlx",
               ops, _fp8_supports, _runner(_fp8_fn), _fp8_snippet),
        Target(BACKEND, "mlx.astype", "elements", "mx.array(x).astype(mx.float16 | mx.bfloat16)", None, ops,
               _astype_supports, _runner(_astype_fn), _astype_snippet),
        _block_target(),
        _block_f64_target(),
        *_uq_targets(),
        *_recipe_targets(),
        _float_matmul_target(),
    ]


# ---- block: mx.quantize / mx.dequantize --------------------------------------------------------------------
MODES = {"mxfp4": ("mxfp4", 4), "mxfp8_e4m3": ("mxfp8", 8), "nvfp4": ("nvfp4", 4)}


def _mode(case: Case) -> tuple[str, int, int]:
    """(mode, group size, bits) of mx.quantize for the case's scheme, or Unsupported."""
    sch = case.scheme or {}
    name = sch.get("name")
    if name == "mlx_affine":
        return "affine", int(sch["block_size"]), int(str(sch["element"]).replace("uint", ""))
    if name not in MODES:
        raise Unsupported(f"mx.quantize has no {name} mode (modes: affine, mxfp4, mxfp8 (E4M3), nvfp4)")
    mode, b = MODES[name]
    return mode, int(sch["block_size"]), b


def unpack_words(words: np.ndarray, bits: int, n: int) -> np.ndarray:
    """Codes from MLX's packing: each row a little-endian bit stream of uint32 words, element i at bits
    [i*bits, i*bits + bits)."""
    w = np.ascontiguousarray(words).astype("<u4")
    rows = w.reshape(w.shape[0], -1).view(np.uint8)
    stream = np.unpackbits(rows, axis=1, bitorder="little")[:, : n * bits].reshape(rows.shape[0], n, bits)
    return (stream.astype(np.uint16) << np.arange(bits, dtype=np.uint16)).sum(axis=2).astype(np.uint8)


def pack_words(codes: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of unpack_words (rows padded to whole uint32 words)."""
    c = np.asarray(codes, dtype=np.uint8).reshape(codes.shape[0], -1)
    stream = ((c[:, :, None] >> np.arange(bits, dtype=np.uint8)) & 1).reshape(c.shape[0], -1)
    stream = np.concatenate([stream, np.zeros((c.shape[0], (-stream.shape[1]) % 32), np.uint8)], axis=1)
    return np.packbits(stream, axis=1, bitorder="little").view("<u4").astype(np.uint32)


def _blk_supports(case: Case) -> str | None:
    try:
        _mode(case)
    except Unsupported as exc:
        return str(exc)
    arr = case.inputs["x"] if case.operation == "block_quantize" else case.inputs["codes"]
    if case.operation == "block_quantize":
        if arr.ndim < 2:
            return "mx.quantize takes arrays of two or more dimensions"
        if int(case.params.get("axis", -1)) % arr.ndim != arr.ndim - 1:
            return "mx.quantize groups along the last axis only"
        if arr.dtype.name not in ("float32", "float16", "bfloat16", "float64"):
            return f"mx.quantize takes float32/float16/bfloat16/float64, not {arr.dtype.name}"
    if arr.shape[-1] % int(case.scheme["block_size"]):
        return "mx.quantize needs the last dimension divisible by the group size (no partial groups)"
    if case.scheme.get("name") == "nvfp4" and arr.size % 32:
        return "MLX's CPU nvfp4 kernels need the element count to be a multiple of 32"
    return None


def _f64_supports(case: Case) -> str | None:
    """mlx.quantize.float64: float64 quantize cases only, as mx.float64 arrays."""
    if case.operation != "block_quantize" or case.inputs["x"].dtype != np.float64:
        return "mlx.quantize.float64 runs the float64 quantize cases (mlx.quantize runs the others)"
    return _blk_supports(case)


def _blk_one(case: Case, f64: bool = False) -> Outputs:
    """mx.quantize / mx.dequantize of one case; a float64 input is handed over as mx.array(x) (MLX makes it
    float32, as for every numpy float64 array) or, with ``f64``, as mx.array(x, dtype=mx.float64)."""
    mx = _mx()
    mode, g, b = _mode(case)
    gs = case.inputs.get("global_scale")
    kw = {} if gs is None else {"global_scale": mx.array(gs.astype(np.float32).reshape(()))}
    if case.operation == "block_quantize":
        x = case.inputs["x"]
        xm = mx.array(np.ascontiguousarray(x), dtype=mx.float64) if f64 else _to_mx(np.ascontiguousarray(x))
        res = mx.quantize(xm, group_size=g, bits=b, mode=mode, **kw)
        wq, scales = res[0], res[1]
        out: dict[str, np.ndarray] = {}
        codes = unpack_words(np.asarray(wq).reshape(-1, np.asarray(wq).shape[-1]), b, x.shape[-1])
        out["codes"] = codes.reshape(x.shape)
        out["scales"] = _from_mx(scales)
        if len(res) > 2 and res[2] is not None and "biases" in case.expected:
            out["biases"] = _from_mx(res[2])
        return {k: codes_as(case, k, v) for k, v in out.items() if k in case.expected}
    codes = case.inputs["codes"]
    wq = mx.array(pack_words(codes.reshape(-1, codes.shape[-1]), b).reshape(*codes.shape[:-1], -1))
    sc = case.inputs["scales"]
    scales = mx.array(sc) if sc.dtype == np.uint8 else _to_mx(np.ascontiguousarray(sc))
    bi = case.inputs.get("biases")
    biases = None if bi is None else _to_mx(np.ascontiguousarray(bi))
    (name,) = case.expected
    odt = case.expected[name].dtype.name
    y = mx.dequantize(wq, scales, biases, group_size=g, bits=b, mode=mode, dtype=_mxdt(odt), **kw)
    if y.dtype != _mxdt(odt):
        raise Unsupported(f"mx.dequantize(..., dtype={odt}) returns {y.dtype} here (the dtype argument is not "
                          "honoured), so the case cannot be compared")
    return {name: codes_as(case, name, _from_mx(y))}


def _blk_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    return run_each(cases, _blk_one)


def _f64_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    return run_each(cases, lambda c: _blk_one(c, f64=True))


def _f64_snippet(case: Case, i: int) -> str:
    return _blk_snippet(case, i, f64=True)


def _blk_snippet(case: Case, i: int, f64: bool = False) -> str:
    """Quantize the case's input (one row of blocks in a reproducer) and print output ``_output`` at index i."""
    mode, g, b = _mode(case)
    out = getattr(case, "_output", "codes")
    gs = case.inputs.get("global_scale")
    kw = "" if gs is None else f", global_scale=mx.array(np.float32({float(gs.reshape(-1)[0])!r}))"
    imports = "import numpy as np, ml_dtypes, mlx.core as mx"
    if case.operation != "block_quantize":
        return ("(no one-line reproducer for mx.dequantize: run `qref run --backend mlx --target mlx.quantize "
                f"--include '{case.id}' --no-xfail`)")
    x = case.inputs["x"]
    bits_ = x.view(f"u{x.dtype.itemsize}").reshape(x.shape[0], -1)
    view = "ml_dtypes.bfloat16" if x.dtype.name == "bfloat16" else "np." + x.dtype.name
    lit = f"np.array({[[int(v) for v in row] for row in bits_]}, np.uint{8 * x.dtype.itemsize}).view({view})"
    load = "mx.array(x.view(np.uint16)).view(mx.bfloat16)" if x.dtype.name == "bfloat16" else (
        "mx.array(x, dtype=mx.float64)" if f64 else "mx.array(x)")
    stmts = [imports, f"x = {lit}", f"r = mx.quantize({load}, group_size={g}, bits={b}, mode={mode!r}{kw})"]
    if out == "codes":  # the packed words are a little-endian bit stream, element i at bits [i*b, i*b + b)
        stmts += ["w = np.unpackbits(np.asarray(r[0]).astype('<u4').view(np.uint8), bitorder='little')",
                  f"print(hex(int((w[{i * b}:{i * b + b}] << np.arange({b})).sum())))"]
    else:
        k = 1 if out == "scales" else 2
        stmts += [f"s = np.asarray(r[{k}].view(mx.uint16) if r[{k}].dtype == mx.bfloat16 else r[{k}]).reshape(-1)",
                  f"print(hex(int(s.view(f'u{{s.dtype.itemsize}}')[{i}])))"]
    return python_c(*stmts)


def _block_target() -> Target:
    return Target(BACKEND, "mlx.quantize", "block", "mx.quantize / mx.dequantize (modes affine, mxfp4, mxfp8, "
                  "nvfp4); codes read from the packed uint32 words; a float64 input as mx.array(x) (float32)",
                  "mlx", ("block_quantize", "block_dequantize"), _blk_supports, _blk_run, _blk_snippet)


def _block_f64_target() -> Target:
    return Target(BACKEND, "mlx.quantize.float64", "block", "mx.quantize(mx.array(x, dtype=mx.float64), ...) "
                  "(modes affine, mxfp4, mxfp8, nvfp4) on the float64 quantize cases", "mlx", ("block_quantize",),
                  _f64_supports, _f64_run, _f64_snippet)


# ---- recipes: mx.quantized_matmul / mx.qqmm on block_matmul cases ------------------------------------------------
def _mm_mode(case: Case) -> tuple[str, int, int]:
    name = (case.scheme or {}).get("name")
    if name not in MODES:
        raise Unsupported(f"MLX has no quantized_matmul mode for {name} (modes: affine, mxfp4, mxfp8 (E4M3), nvfp4)")
    if "lhs_global_scale" in case.inputs:
        raise Unsupported("mx.quantized_matmul and mx.qqmm take no global scale on CPU (two-level NVFP4)")
    mode, b = MODES[name]
    return mode, int(case.scheme["block_size"]), b


def _lhs_values(case: Case) -> tuple[np.ndarray, bool]:
    """The lhs as float32 values P * X and whether they are exact (MLX's x is a float array)."""
    from ...core.decode import decode

    af = case.array_formats
    g = int(case.scheme["block_size"])
    p = decode(case.inputs["lhs_codes"], af["lhs_codes"], dtype=np.float64)
    sc = decode(case.inputs["lhs_scales"], af["lhs_scales"], dtype=np.float64)
    with np.errstate(all="ignore"):
        v = p * np.repeat(sc, g, axis=1)
        x = v.astype(np.float32)
    return x, bool(np.array_equal(x.astype(np.float64), v, equal_nan=True))


def _weight(case: Case, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """MLX's weight (N, K) packed words and its scales (N, K / B) from the case's rhs (K, N)."""
    return pack_words(np.ascontiguousarray(case.inputs["rhs_codes"].T), bits), \
        np.ascontiguousarray(case.inputs["rhs_scales"].T)


def _qmm_supports(case: Case) -> str | None:
    try:
        _mm_mode(case)
    except Unsupported as exc:
        return str(exc)
    if not _lhs_values(case)[1]:
        return ("mx.quantized_matmul takes x as a float array: the case's lhs values P X are not all float32 "
                "values (above float32's range or below its subnormals)")
    return None


def _mm_parts(case: Case) -> tuple[str, int, int, np.ndarray, np.ndarray, np.ndarray]:
    """(mode, group size, bits, lhs values, packed rhs words, rhs scales) of a block_matmul case."""
    mode, g, b = _mm_mode(case)
    x, _ = _lhs_values(case)
    w, sc = _weight(case, b)
    return mode, g, b, x, w, sc


def _qmm_one(case: Case) -> Outputs:
    mx = _mx()
    mode, g, b, x, w, sc = _mm_parts(case)
    y = mx.quantized_matmul(mx.array(x), mx.array(w), mx.array(sc), transpose=True, group_size=g, bits=b, mode=mode)
    return {"y": codes_as(case, "y", np.asarray(y))}


def _qqmm_model_xhat(case: Case) -> np.ndarray | None:
    """qref's emulation of qqmm's input quantizer (recipes.md §7.3) on the case's lhs rows, or None."""
    from ...recipes import mlx_qqmm
    from ...schemes.base import QArray, scheme

    x, _ = _lhs_values(case)
    sch = scheme(case.scheme["name"], profile="mlx")
    w = QArray(codes=np.ascontiguousarray(case.inputs["rhs_codes"].T), scheme=sch,
               scales=np.ascontiguousarray(case.inputs["rhs_scales"].T), axis=1)
    try:
        with np.errstate(all="ignore"):
            return np.concatenate([np.asarray(mlx_qqmm(x[m : m + 1], w).meta["xhat"]) for m in range(x.shape[0])])
    except Exception:
        return None


def _qqmm_supports(case: Case) -> str | None:
    reason = _qmm_supports(case)
    if reason:
        return reason.replace("mx.quantized_matmul takes x", "mx.qqmm takes x")
    x, _ = _lhs_values(case)
    xh = _qqmm_model_xhat(case)
    if xh is None or not np.array_equal(xh.astype(np.float32), x, equal_nan=True):
        return ("mx.qqmm quantizes x itself (scale from the group's amax): its quantization of the case's lhs "
                "values does not reproduce the case's lhs codes and scales (qref's emulation, recipes.md §7.3), so "
                "the case's product is not what qqmm computes")
    return None


def _qqmm_one(case: Case) -> Outputs:
    mx = _mx()
    mode, g, b, x, w, sc = _mm_parts(case)
    wm, scm = mx.array(w), mx.array(sc)
    rows = [np.asarray(mx.qqmm(mx.array(x[m : m + 1]), wm, scm, group_size=g, bits=b, mode=mode))
            for m in range(x.shape[0])]  # the CPU kernel takes one row at a time
    return {"y": codes_as(case, "y", np.concatenate(rows))}


def _mm_run(one):
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        from ._common import run_each

        return run_each(cases, one)
    return run


def _mm_snippet(qq: bool):
    def snippet(case: Case, i: int) -> str:
        from ._common import array_literal

        mode, g, b, x, w, sc = _mm_parts(case)
        N = case.expected["y"].shape[1]
        m, n = divmod(i, N)
        if qq:
            call = (f"y = mx.qqmm(mx.array(x[{m}:{m + 1}]), mx.array(w), mx.array(s), group_size={g}, bits={b}, "
                    f"mode={mode!r})")
            j = n
        else:
            call = (f"y = mx.quantized_matmul(mx.array(x), mx.array(w), mx.array(s), transpose=True, group_size={g}, "
                    f"bits={b}, mode={mode!r})")
            j = i
        return python_c("import numpy as np, mlx.core as mx", f"x = {array_literal(x)}", f"w = {array_literal(w)}",
                        f"s = {array_literal(sc)}", call,
                        f"print(hex(int(np.asarray(y).reshape(-1).view(np.uint32)[{j}])))")
    return snippet


def _recipe_targets() -> list[Target]:
    return [
        Target(BACKEND, "mlx.quantized_matmul", "recipes", "mx.quantized_matmul(x, w, scales, transpose=True, "
               "group_size, bits, mode) (modes mxfp4, mxfp8, nvfp4; CPU) with x = the lhs values P X as float32 and "
               "w the rhs codes (N, K) packed into uint32 words", None, ("block_matmul",), _qmm_supports,
               _mm_run(_qmm_one), _mm_snippet(False)),
        Target(BACKEND, "mlx.qqmm", "recipes", "mx.qqmm(x_row, w, scales, group_size, bits, mode) per row of the lhs "
               "(CPU: one row at a time; x quantized by MLX itself), on the cases where that quantization gives "
               "back the case's lhs", None, ("block_matmul",), _qqmm_supports, _mm_run(_qqmm_one),
               _mm_snippet(True)),
    ]


# ---- matmul: mx.matmul float32 on the CPU, held to its fitted CPU GEMM profile (mma.md §12.2) -------------------
FLOAT_MATMUL_PROFILE = "mlx-0.32.4-cpu-sgemm"  # qref.mma.cpu_profiles.MLX_CPU


def _float_matmul_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    from ._common import run_each

    mx = _mx()

    def one(case: Case) -> Outputs:
        y = mx.matmul(mx.array(np.array(case.inputs["a"], np.float32)), mx.array(np.array(case.inputs["b"],
                                                                                           np.float32)),
                      stream=mx.cpu)
        return {"y": np.array(y, np.float32)}

    return run_each(cases, one)


def _float_matmul_snippet(case: Case, i: int) -> str:
    """The whole product, output element i."""
    from ._common import array_literal

    a, b = case.inputs["a"], case.inputs["b"]
    return python_c("import numpy as np, mlx.core as mx", f"a = {array_literal(a)}.reshape({a.shape[0]}, {a.shape[1]})",
                    f"b = {array_literal(b)}.reshape({b.shape[0]}, {b.shape[1]})",
                    "y = np.array(mx.matmul(mx.array(a), mx.array(b), stream=mx.cpu), np.float32)",
                    f"print(hex(int(y.reshape(-1).view(np.uint32)[{int(i)}])))")


def _float_matmul_target() -> Target:
    return Target(BACKEND, "mlx.matmul_float", "matmul", "mx.matmul(a, b, stream=mx.cpu), float32 (M, K) x (K, N)",
                  FLOAT_MATMUL_PROFILE, ("float_matmul",), lambda case: None, _float_matmul_run,
                  _float_matmul_snippet,
                  notes="held bit for bit to its fitted CPU GEMM profile (mma.md §12.2); within the bound of "
                        "mma.md §10.4 but other bits is drift")


__all__ = ["BACKEND", "DISTRIBUTIONS", "targets"]
