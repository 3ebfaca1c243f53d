"""OpenVINO (the CPU plugin of openvino 2026.4): small graphs built with ``openvino.opset13`` and compiled with
``INFERENCE_PRECISION_HINT=f32`` (on a CPU with AVX512-BF16 the plugin's default hint is bf16, which lets it run
float32 arithmetic in bfloat16).

- elements: ``Convert`` between float32 / float16 / bfloat16 / float64 and f8e4m3, f8e5m2, f4e2m1, f8e8m0
  (encode, decode, quantize = there and back), element profile ``openvino`` (f8e4m3 / f8e5m2 through float16,
  elements.md §2.12);
- uniform: ``FakeQuantize(x, il, ih, lo, hi, hi - lo + 1)`` with il = fl32((lo - z) * s), ih = fl32((hi - z) * s)
  on uniform_quantize cases (its outputs are the codes; uniform.md §2.8): the plugin's Snippets decomposition
  (profile ``openvino_cpu``, range_form "scale_shift"), the core's folding for 15 / 16 / 255 / 256 levels (``openvino``,
  "normalize"; ranges along two or more axes are folded op by op instead: xfail entries); and on fake_quantize
  cases (a general float output range, ``FakeQuantize(x, input_low, input_high, output_low, output_high, levels)``
  as the case gives it, the float32 output y compared; uniform.md §2.8, FAKE_QUANTIZE_RULES);
- uniform: the weight decompression OpenVINO runs for compressed weights, (Convert(w, f32) - Convert(z, f32)) *
  scale (uniform_dequantize of u8 / i8 / u4 / i4 / u2 codes, per tensor or per axis), profile ``openvino``;
- lookup: NF4 decompression, Convert(nf4 -> f16) * f16 scale per group, then Convert to the output type
  (lookup_dequantize), profile ``openvino``.

Each exists twice: the codes (or the values) as a graph input (``.parameter``, computed by the CPU plugin's
kernels) and as a ``Constant`` (``.constant``: a graph without inputs, which OpenVINO's core folds at compile time
with its reference implementations), so that a difference between the two is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target, Unsupported
from . import require
from ._common import array_literal, codes_as, element_signature, per_case, python_c, raise_unsupported

BACKEND = "openvino"
DISTRIBUTIONS = ("openvino",)
#: qref format / numpy dtype name -> OpenVINO element type name
OV_TYPES = {"float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2", "float4_e2m1fn": "f4e2m1",
            "float8_e8m0fnu": "f8e8m0", "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
            "uint8": "u8", "int8": "i8", "uint4": "u4", "int4": "i4", "uint2": "u2", "nf4": "nf4"}
PACKED = {"f4e2m1": 4, "u4": 4, "i4": 4, "nf4": 4, "u2": 2}
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
MODES = ("parameter", "constant")
#: input kind -> the uniform / lookup profile of the decompression (the plugin's kernels, the core's folding)
PROFILES = {"parameter": "openvino_cpu", "constant": "openvino"}


# ---- graphs ------------------------------------------------------------------------------------------------
def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Sub-byte codes packed as OpenVINO stores them: element 0 in the lowest bits of byte 0."""
    c = np.asarray(codes, np.int64).reshape(-1) & ((1 << bits) - 1)
    per = 8 // bits
    c = np.concatenate([c, np.zeros(-c.size % per, np.int64)]).reshape(-1, per)
    return (c << (np.arange(per) * bits)).sum(axis=1).astype(np.uint8)


def unpack(raw: np.ndarray, bits: int, n: int) -> np.ndarray:
    per = 8 // bits
    r = np.asarray(raw, np.uint8).reshape(-1, 1).astype(np.int64)
    return ((r >> (np.arange(per) * bits)) & ((1 << bits) - 1)).reshape(-1)[:n].astype(np.uint8)


def ov_tensor(ov: Any, t: str, shape: Sequence[int], data: np.ndarray) -> Any:
    """An ov.Tensor of element type ``t`` holding ``data`` (codes or values of that type) bit for bit."""
    a = np.ascontiguousarray(data)
    raw = pack(a, PACKED[t]) if t in PACKED else a.view(np.uint8).reshape(-1)
    tt = ov.Tensor(getattr(ov.Type, t), ov.Shape([int(n) for n in shape]))
    np.asarray(tt.data).view(np.uint8).reshape(-1)[:] = raw.reshape(-1)
    return tt


def run_graph(build: Any, t_in: str, shape: Sequence[int], data: np.ndarray, mode: str) -> np.ndarray:
    """Compile ``build(node)`` on the CPU plugin with ``node`` a Parameter (fed ``data``) or a Constant holding
    ``data``; the output's raw bytes (uint8)."""
    import openvino as ov
    from openvino import opset13 as ops

    tt = ov_tensor(ov, t_in, shape, data)
    if mode == "parameter":
        p = ops.parameter([int(n) for n in shape], getattr(ov.Type, t_in))
        model = ov.Model([build(p)], [p], "qref")
        feeds: list[Any] = [tt]
    else:
        model = ov.Model([build(ov.op.Constant(tt))], [], "qref")
        feeds = []
    req = ov.Core().compile_model(model, "CPU", CONFIG).create_infer_request()
    req.infer(feeds)
    return np.asarray(req.get_output_tensor(0).data).view(np.uint8).reshape(-1).copy()


_HEAD = ("import numpy as np, openvino as ov", "from openvino import opset13 as ops")


def _feed_lines(t_in: str, shape: Sequence[int], data: np.ndarray, mode: str) -> list[str]:
    """Source lines making ``node`` (a Parameter or a Constant of type t_in holding data) and ``feeds``."""
    a = np.ascontiguousarray(data)
    raw = pack(a, PACKED[t_in]) if t_in in PACKED else a.view(np.uint8).reshape(-1)
    shp = [int(n) for n in shape]
    lines = [f"raw = {array_literal(raw.reshape(-1))}",
             f"t = ov.Tensor(ov.Type.{t_in}, ov.Shape({shp})); np.asarray(t.data).view(np.uint8).reshape(-1)[:] = raw"]
    if mode == "parameter":
        lines.append(f"node = ops.parameter({shp}, ov.Type.{t_in}); params, feeds = [node], [t]")
    else:
        lines.append("node = ov.op.Constant(t); params, feeds = [], []")
    return lines


def _run_lines(out: str, index: int, width: int, bits: int | None = None) -> list[str]:
    get = "r = np.asarray(req.get_output_tensor(0).data).view(np.uint8).reshape(-1)"
    if bits:
        per, mask = 8 // bits, hex((1 << bits) - 1)
        pr = f"print(hex((int(r[{index} // {per}]) >> ({index} % {per} * {bits})) & {mask}))"
    else:
        pr = f"print(hex(int(r.view(np.uint{8 * width})[{index}])))"
    return [f"model = ov.Model([{out}], params, 'g')",
            "req = ov.Core().compile_model(model, 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'}).create_infer_request()",
            "req.infer(feeds)", get, pr]


# ---- elements: Convert -------------------------------------------------------------------------------------
ELEMENT_FORMATS = ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu")
SOURCES = ("float32", "float16", "bfloat16", "float64")


def _convert_supports(case: Case) -> str | None:
    op, fmt, src, out = element_signature(case)
    if fmt not in ELEMENT_FORMATS:
        return (f"OpenVINO has no {fmt} element type" if fmt not in OV_TYPES else
                f"{fmt} is not one of the low-precision types run here (f8e4m3, f8e5m2, f4e2m1, f8e8m0)")
    if op in ("encode", "quantize") and src not in SOURCES:
        return f"Convert from {src}: OpenVINO takes f32 / f16 / bf16 / f64 inputs here"
    if op == "decode" and out not in SOURCES:
        return f"Convert to {out}: not an OpenVINO float type"
    return None


def _plugin_lacks(case: Case) -> str | None:
    """What the CPU plugin reports as not implemented (the folded Constant path runs it)."""
    op, fmt, src, _ = element_signature(case)
    if op in ("encode", "quantize") and src == "float64" and fmt in ("float4_e2m1fn", "float8_e8m0fnu"):
        return (f"the CPU plugin has no f64 -> {OV_TYPES[fmt]} Convert (compile_model: 'Not Implemented: cpu_convert "
                f"can't convert from: f64 precision to: {OV_TYPES[fmt]}'); openvino.convert.constant folds it")
    return None


def _convert_plan(case: Case) -> tuple[str, np.ndarray, list[str]]:
    """(input OV type, input data, the OV types each Convert goes to)."""
    op, fmt, src, out = element_signature(case)
    t = OV_TYPES[fmt]
    if op == "decode":
        return t, case.inputs["codes"].reshape(-1), [OV_TYPES[out]]
    x = case.inputs["x"].reshape(-1)
    return OV_TYPES[src], x, [t] if op == "encode" else [t, OV_TYPES[src]]


def _convert_runner(mode: str):
    def one(case: Case) -> Outputs:
        import openvino as ov
        from openvino import opset13 as ops

        raise_unsupported(_convert_supports(case) or (_plugin_lacks(case) if mode == "parameter" else None))
        t_in, data, chain = _convert_plan(case)
        if data.size == 0:
            raise Unsupported("an empty tensor")

        def build(node: Any) -> Any:
            for t in chain:
                node = ops.convert(node, getattr(ov.Type, t))
            return node

        raw = run_graph(build, t_in, data.shape, data, mode)
        if chain[-1] in PACKED:
            raw = unpack(raw, PACKED[chain[-1]], data.size)
        (oname,) = case.expected
        width = case.expected[oname].dtype.itemsize
        return {oname: codes_as(case, oname, raw.view(f"u{width}")[: data.size])}

    return per_case(one)


def _convert_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        t_in, data, chain = _convert_plan(case)
        (oname,) = case.expected
        out = "node"
        for t in chain:
            out = f"ops.convert({out}, ov.Type.{t})"
        return python_c(*_HEAD, *_feed_lines(t_in, data.shape, data, mode),
                        *_run_lines(out, i, case.expected[oname].dtype.itemsize, PACKED.get(chain[-1])))

    return snippet


# ---- uniform: weight decompression ---------------------------------------------------------------------------
DECOMPRESS_STORAGE = ("uint8", "int8", "uint4", "int4", "uint2")


def _dq_supports(case: Case) -> str | None:
    from ..families.uniform import scheme_of

    if case.operation != "uniform_dequantize":
        return ("OpenVINO quantizes with FakeQuantize (float in, float out), not to integer codes; only the weight "
                "decompression (uniform_dequantize) runs here")
    sch = scheme_of(case)
    st = sch.storage.name
    if st not in DECOMPRESS_STORAGE:
        return f"compressed weights are u8 / i8 / u4 / i4 / u2 (not {st})"
    if sch.granularity == "blocked" and len(sch.scale_shape) != 2:
        return "group-wise decompression is run for 2-D weights only here"
    (oname,) = case.expected
    if case.expected[oname].dtype != np.float32:
        return f"decompression to {case.expected[oname].dtype.name}: run to float32 only"
    return None


def _dq_problem(case: Case) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(OV storage type, codes as storage values, zero points and scales broadcast to the codes' shape in
    float32)."""
    from ..families.uniform import scheme_of
    from ._common import storage_values

    sch = scheme_of(case)
    codes = storage_values(case)
    S, Z = sch.expand(codes.shape)
    s = np.broadcast_to(np.asarray(S, np.float64).astype(np.float32), codes.shape)
    z = np.broadcast_to(np.asarray(Z, np.float64).astype(np.float32), codes.shape)
    return OV_TYPES[sch.storage.name], codes, np.ascontiguousarray(z), np.ascontiguousarray(s)


def _dq_runner(mode: str):
    def one(case: Case) -> Outputs:
        import openvino as ov
        from openvino import opset13 as ops

        raise_unsupported(_dq_supports(case))
        t, codes, z, s = _dq_problem(case)
        if codes.size == 0:
            raise Unsupported("an empty tensor")

        def build(node: Any) -> Any:
            w = ops.convert(node, ov.Type.f32)
            return ops.multiply(ops.subtract(w, ops.constant(z)), ops.constant(s))

        raw = run_graph(build, t, codes.shape, codes, mode)
        (oname,) = case.expected
        return {oname: codes_as(case, oname, raw.view(np.uint32))}

    return per_case(one)


def _dq_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        t, codes, z, s = _dq_problem(case)
        return python_c(*_HEAD, *_feed_lines(t, codes.shape, codes, mode),
                        f"z = {array_literal(z)}", f"s = {array_literal(s)}",
                        *_run_lines("ops.multiply(ops.subtract(ops.convert(node, ov.Type.f32), ops.constant(z)), "
                                    "ops.constant(s))", i, 4))

    return snippet


# ---- uniform: FakeQuantize -----------------------------------------------------------------------------------
def _fold_levels() -> tuple[int, ...]:
    """The levels a Constant FakeQuantize is folded with by the core's reference (the normalized form): those the
    low-precision transformations handle (uniform.md §2.8, FAKE_QUANTIZE_RULES["openvino"].normalize_levels)."""
    from ...profiles.uniform import FAKE_QUANTIZE_RULES

    return FAKE_QUANTIZE_RULES["openvino"].normalize_levels


def _fq_supports(case: Case, mode: str) -> str | None:
    from ...formats import IntFormat
    from ..families.uniform import FQ_RANGES, scheme_of

    if case.operation == "fake_quantize":
        if any(case.inputs[k].dtype != np.float32 for k in ("x", *FQ_RANGES)):
            return "float32 x and ranges only (the openvino FakeQuantize rules compute in float32)"
        return None
    if case.operation != "uniform_quantize":
        return "FakeQuantize is OpenVINO's quantize (float to float): uniform_quantize only"
    sch = scheme_of(case)
    if not isinstance(sch.storage, IntFormat) or sch.storage.bits > 16:
        return (f"FakeQuantize rounds to at most 65536 integer levels (16-bit and narrower storage), not "
                f"{sch.storage.name}")
    if case.inputs["x"].dtype != np.float32 or sch.expressed.name != "float32":
        return "float32 input and scales only (the openvino profiles compute in float32)"
    lo, hi = sch.storage_bounds
    levels = hi - lo + 1
    if mode == "constant" and levels not in _fold_levels():
        return (f"a Constant FakeQuantize with {levels} levels is not folded by the core's reference (the profile "
                f"openvino's normalized form: only for {'/'.join(map(str, _fold_levels()))} levels, the ones the "
                "low-precision transformations handle): per tensor, along axis 0 or along several axes the "
                "decomposed graph is folded op by op (the scale_shift codes of openvino.fake_quantize.parameter), "
                "along axis 1 the CPU plugin's FakeQuantize node runs it, along axis >= 2 compile_model fails "
                "('doesn't support non per-tensor quantization for axis: 2'); uniform.md §2.8 C8")
    return None


def _fq_problem(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """(x, il, ih, lo, hi): input range il = fl32((lo - z) * s), ih = fl32((hi - z) * s) (uniform.md §2.8) per
    element (shape (1,) per tensor, else broadcastable against x: per axis, blocks), the output range [lo, hi],
    levels = hi - lo + 1."""
    from ..families.uniform import scheme_of

    sch = scheme_of(case)
    x = np.ascontiguousarray(case.inputs["x"], np.float32)
    S, Z = sch.expand(x.shape)
    s = np.asarray(S, np.float64).astype(np.float32).astype(np.float64)
    z = np.asarray(Z, np.int64).astype(np.float64)
    lo, hi = sch.storage_bounds
    il, ih = ((lo - z) * s).astype(np.float32), ((hi - z) * s).astype(np.float32)  # exact products, one rounding
    if il.size == 1:
        il, ih = il.reshape(1), ih.reshape(1)
    elif x.ndim == 0:
        il, ih = il.reshape(-1), ih.reshape(-1)
    return x, np.ascontiguousarray(il), np.ascontiguousarray(ih), lo, hi


def _fq_codes(case: Case, y: np.ndarray) -> Outputs:
    from ..families.uniform import scheme_of

    y = np.asarray(y, np.float32).reshape(case.inputs["x"].shape)
    ok = np.isnan(y) | (y == np.rint(y))
    if not ok.all():
        i = int(np.flatnonzero(~ok.reshape(-1))[0])
        raise ValueError(f"FakeQuantize output {float(y.reshape(-1)[i])!r} at element {i} is not an integer level")
    (name,) = case.expected
    exp = case.expected[name]
    bits_ = scheme_of(case).storage.bits
    q = np.where(np.isnan(y), 0, y).astype(np.int64)
    return {name: (q & ((1 << bits_) - 1)).astype(np.uint64).astype(exp.dtype)}


def _fq_ranges(case: Case) -> tuple[np.ndarray, list[np.ndarray], int]:
    """(x, [il, ih, ol, oh], levels) of a fake_quantize case: the inputs as FakeQuantize takes them (float32;
    a 0-d x as shape (1,))."""
    from ..families.uniform import FQ_RANGES

    x = np.ascontiguousarray(case.inputs["x"], np.float32)
    return (x.reshape(-1) if x.ndim == 0 else x, [np.ascontiguousarray(case.inputs[k], np.float32) for k in FQ_RANGES],
            int(case.params["levels"]))


def _fq_output_one(case: Case, mode: str) -> Outputs:
    """fake_quantize (uniform.md §2.8): FakeQuantize with the case's ranges as Constants, y read as float32."""
    from openvino import opset13 as ops

    x, rng, levels = _fq_ranges(case)
    if x.size == 0:
        raise Unsupported("an empty tensor")
    raw = run_graph(lambda node: ops.fake_quantize(node, *[ops.constant(v) for v in rng], levels), "f32", x.shape, x,
                    mode)
    return {"y": raw.view(np.float32).reshape(case.expected["y"].shape)}


def _fq_runner(mode: str):
    def one(case: Case) -> Outputs:
        import openvino as ov  # noqa: F401
        from openvino import opset13 as ops

        raise_unsupported(_fq_supports(case, mode))
        if case.operation == "fake_quantize":
            return _fq_output_one(case, mode)
        x, il, ih, lo, hi = _fq_problem(case)
        if x.size == 0:
            raise Unsupported("an empty tensor")

        def build(node: Any) -> Any:
            return ops.fake_quantize(node, ops.constant(il), ops.constant(ih), ops.constant(np.float32([lo])),
                                     ops.constant(np.float32([hi])), hi - lo + 1)

        flat = x.reshape(-1) if x.ndim == 0 else x
        raw = run_graph(build, "f32", flat.shape, flat, mode)
        return _fq_codes(case, raw.view(np.float32))

    return per_case(one)


def _fq_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        if case.operation == "fake_quantize":
            x, rng, levels = _fq_ranges(case)
            return python_c(*_HEAD, *_feed_lines("f32", x.shape, x, mode),
                            *(f"{k} = {array_literal(v)}" for k, v in zip(("il", "ih", "ol", "oh"), rng, strict=True)),
                            *_run_lines("ops.fake_quantize(node, ops.constant(il), ops.constant(ih), "
                                        f"ops.constant(ol), ops.constant(oh), {levels})", i, 4))
        x, il, ih, lo, hi = _fq_problem(case)
        flat = x.reshape(-1) if x.ndim == 0 else x
        return python_c(*_HEAD, *_feed_lines("f32", flat.shape, flat, mode),
                        f"il, ih = {array_literal(il)}, {array_literal(ih)}",
                        *_run_lines(f"ops.fake_quantize(node, ops.constant(il), ops.constant(ih), "
                                    f"ops.constant(np.float32([{lo}])), ops.constant(np.float32([{hi}])), "
                                    f"{hi - lo + 1})", i, 4))

    return snippet


# ---- lookup: NF4 decompression -------------------------------------------------------------------------------
def _nf4_supports(case: Case) -> str | None:
    if case.operation != "lookup_dequantize":
        return ("OpenVINO's runtime has no NF4 quantize with block scales (NNCF computes them; nf4 Constants "
                "and Convert(f32 -> nf4) take already scaled values): lookup_dequantize only")
    sch = case.scheme
    if sch.get("name") != "nf4":
        return f"OpenVINO's lookup type is nf4 (not {sch.get('name')})"
    if sch.get("double_quant") or "codes" not in case.inputs or "scales" not in case.inputs:
        return "NF4 decompression with float16 scales per group (no double quantization)"
    if sch.get("axis") != -1 and case.inputs["codes"].ndim > 1:
        return "NNCF groups weights along the last axis (group_size); the case blocks the flattened tensor"
    (oname,) = case.expected
    if case.expected[oname].dtype.name not in ("float32", "float16", "bfloat16"):
        return f"decompression to {case.expected[oname].dtype.name}"
    sc = np.asarray(case.inputs["scales"], np.float32)
    with np.errstate(over="ignore"):
        if not np.array_equal(sc.astype(np.float16).astype(np.float32), sc, equal_nan=True):
            return "OpenVINO's NF4 weights carry float16 scales; the case's scales are not float16 values"
    return None


def _nf4_problem(case: Case) -> tuple[np.ndarray, np.ndarray, int]:
    """(codes as (groups, block) with the last group padded by code 7 (0.0), float16 scales (groups, 1), n)."""
    codes = np.asarray(case.inputs["codes"]).reshape(-1)
    block = int(case.scheme["block_size"])
    rows = int(np.prod(case.inputs["codes"].shape[:-1], dtype=np.int64)) if case.inputs["codes"].ndim > 1 else 1
    last = case.inputs["codes"].shape[-1]
    per_row = -(-last // block)
    c = codes.reshape(rows, last)
    c = np.concatenate([c, np.full((rows, per_row * block - last), 7, c.dtype)], axis=1).reshape(-1, block)
    s = np.asarray(case.inputs["scales"], np.float32).reshape(-1, 1).astype(np.float16)
    return c, s, codes.size


def _nf4_out(case: Case) -> str:
    (oname,) = case.expected
    return OV_TYPES[case.expected[oname].dtype.name]


def _nf4_runner(mode: str):
    def one(case: Case) -> Outputs:
        import openvino as ov
        from openvino import opset13 as ops

        raise_unsupported(_nf4_supports(case))
        c, s, _ = _nf4_problem(case)
        out_t = _nf4_out(case)

        def build(node: Any) -> Any:
            y = ops.multiply(ops.convert(node, ov.Type.f16), ops.constant(s))
            return ops.convert(y, getattr(ov.Type, out_t))

        raw = run_graph(build, "nf4", c.shape, c, mode)
        (oname,) = case.expected
        exp = case.expected[oname]
        rows = int(np.prod(exp.shape[:-1], dtype=np.int64)) if exp.ndim > 1 else 1
        y = raw.view(f"u{exp.dtype.itemsize}").reshape(rows, -1)[:, : exp.shape[-1]]
        return {oname: codes_as(case, oname, y.reshape(-1))}

    return per_case(one)


def _nf4_snippet(mode: str):
    def snippet(case: Case, i: int) -> str:
        c, s, _ = _nf4_problem(case)
        exp = case.expected[next(iter(case.expected))]
        last = exp.shape[-1]
        block = c.shape[1]
        j = (i // last) * (-(-last // block) * block) + i % last  # the element in the padded layout
        return python_c(*_HEAD, *_feed_lines("nf4", c.shape, c, mode), f"s = {array_literal(s)}",
                        *_run_lines(f"ops.convert(ops.multiply(ops.convert(node, ov.Type.f16), ops.constant(s)), "
                                    f"ov.Type.{_nf4_out(case)})", j, exp.dtype.itemsize))

    return snippet


def targets() -> list[Target]:
    require("openvino", backend=BACKEND, hint="pip install openvino")
    out = []
    for mode in MODES:
        how = ("the input a Parameter (the CPU plugin's kernels)" if mode == "parameter" else
               "the input a Constant (the graph has no input: folded at compile time by OpenVINO's core)")
        out += [
            Target(BACKEND, f"openvino.convert.{mode}", "elements",
                   f"Convert(f32/f16/bf16/f64 <-> f8e4m3/f8e5m2/f4e2m1/f8e8m0), CPU, {how}", "openvino",
                   ("encode", "decode", "quantize"), _convert_supports, _convert_runner(mode),
                   _convert_snippet(mode)),
            Target(BACKEND, f"openvino.decompress.{mode}", "uniform",
                   "weight decompression Multiply(Subtract(Convert(w, f32), z), s), w u8/i8/u4/i4/u2, z and s "
                   f"float32 Constants per tensor / per axis / per group, CPU, {how}", PROFILES[mode],
                   ("uniform_dequantize",), _dq_supports, _dq_runner(mode), _dq_snippet(mode), copies=True),
            Target(BACKEND, f"openvino.fake_quantize.{mode}", "uniform",
                   "FakeQuantize(x, il, ih, lo, hi, levels = hi - lo + 1) with il / ih = (lo / hi - z) * s in "
                   "float32 and the storage range as output range (its outputs are the codes), and "
                   "FakeQuantize(x, il, ih, ol, oh, levels) with a general float output range (the float32 output "
                   f"y), float32, per tensor / per axis / blocks (the ranges broadcast against x), CPU, {how}",
                   PROFILES[mode], ("uniform_quantize", "fake_quantize"), lambda c, m=mode: _fq_supports(c, m),
                   _fq_runner(mode), _fq_snippet(mode)),
            Target(BACKEND, f"openvino.nf4.{mode}", "lookup",
                   "NF4 decompression Convert(Multiply(Convert(w_nf4, f16), s_f16), out), groups along the last "
                   f"axis, CPU, {how}", PROFILES[mode], ("lookup_dequantize",), _nf4_supports, _nf4_runner(mode),
                   _nf4_snippet(mode)),
        ]
    return out


__all__ = ["BACKEND", "CONFIG", "DISTRIBUTIONS", "MODES", "ov_tensor", "run_graph", "targets", "unpack"]
