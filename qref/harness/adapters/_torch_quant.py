"""PyTorch quantize / dequantize / fake-quantize ops (uniform family, uniform.md §4.4), shared by the ``torch``
(eager) and ``torch_compile`` targets.

Each op is one target per backend. Eager calls the op; compiled calls ``torch.compile(f, dynamic=True,
fullgraph=True)`` of a one-op function ``f`` (Inductor, CPU), one compiled function per op and storage dtype for the
whole run (a scale or zero point passed as a Python number is a constant of the graph: Dynamo guards on it and
compiles again for a new value, as a PT2E graph holds its quantization parameters as constants; the recompile limit
is raised so that no case falls back to eager code).

- ``quantize_per_tensor`` / ``quantize_per_channel`` (quantized tensors, codes read with ``int_repr()``) and
  ``Tensor.dequantize`` of ``_make_per_tensor/_make_per_channel_quantized_tensor``;
- ``fake_quantize_per_tensor_affine`` / ``fake_quantize_per_channel_affine`` on ``uniform_quantize`` cases: the
  float output is y = fl32((q - z) * s); the codes are read back as q = z + round(y / s) and checked (fl32((q - z)
  * s) must give y back bit for bit, else the case is a crash: the output is no fake-quantized value); on cases
  with a ``grad_mask`` output also the backward (x requires grad, y.backward(ones), grad_mask = x.grad != 0,
  uniform.md §4.4 F5);
- the PT2E decomposed ops ``quantized_decomposed.quantize_per_tensor / dequantize_per_tensor`` (``.default``: Python
  scale and zero point; ``.tensor``: 0-d tensors, one compiled kernel for every case), ``quantize_per_channel /
  dequantize_per_channel / quantize_per_token / dequantize_per_token`` (plain integer tensors; sub-byte and narrowed
  storages as their container dtype with quant_min / quant_max = the storage bounds, as PT2E writes int4).

Where Inductor's code computes differently the compiled target has its own profile (``COMPILED_PROFILES``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...core.arith import convert
from ...formats import IntFormat
from ..families.uniform import scheme_of
from ..model import Outputs, Target, Unsupported
from ._common import array_literal, codes_as, python_c, run_each, single_element_case, storage_values

#: storage format -> (the decomposed ops' integer container dtype name, the ATen quantized dtype name or None)
_CONTAINERS = {"int8": ("int8", "qint8"), "uint8": ("uint8", "quint8"), "int16": ("int16", None),
               "uint16": ("uint16", None), "int32": ("int32", "qint32"), "int4": ("int8", None),
               "uint4": ("uint8", None), "int2": ("int8", None), "uint2": ("uint8", None)}
_FLOAT_STORAGE = ("float8_e4m3fn", "float8_e5m2")
_INPUTS = ("float32", "float16", "bfloat16")


def _torch() -> Any:
    import torch
    import torch.ao.quantization.fx._decomposed

    torch.set_num_threads(1)
    return torch


_COMPILED: dict[str, Any] = {}


def _compiled(torch: Any, key: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """torch.compile(f) once per key (op and dtype) for the process; a scalar parameter is a graph constant."""
    if key not in _COMPILED:
        import torch._dynamo

        torch._dynamo.config.recompile_limit = 100000
        torch._dynamo.config.cache_size_limit = 100000
        torch._dynamo.config.accumulated_recompile_limit = 100000
        _COMPILED[key] = torch.compile(f, dynamic=True, fullgraph=True)
    return _COMPILED[key]


@dataclass(frozen=True)
class _Params:
    """One case's quantization parameters as the torch ops take them."""

    storage: str
    lo: int
    hi: int
    per_tensor: bool
    axis: int | None
    scales: np.ndarray  # float64, one per channel (per tensor: one), as the case gives them
    zero_points: np.ndarray  # int64
    expressed_scales: np.ndarray  # the scales rounded to the expressed type (as float64)

    @property
    def s(self) -> float:
        return float(self.scales[0])

    @property
    def se(self) -> float:
        """The per-tensor scale rounded to the expressed type."""
        return float(self.expressed_scales[0])

    @property
    def z(self) -> int:
        return int(self.zero_points[0])


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _params(case: Case) -> _Params:
    sch = scheme_of(case)
    if sch.granularity == "blocked":
        raise Unsupported("torch's quantize ops are per tensor or per channel (no sub-channel blocks)")
    lo, hi = sch.storage_bounds if isinstance(sch.storage, IntFormat) else (0, 0)
    per_tensor = sch.granularity == "per_tensor"
    scales = np.asarray(sch.scale_array, np.float64).reshape(-1)
    return _Params(sch.storage.name, int(lo), int(hi), per_tensor, None if per_tensor else int(sch.axis), scales,
                   np.asarray(sch.zero_point_array, np.int64).reshape(-1),
                   convert(scales, _np_dtype(sch.expressed.name)).astype(np.float64))


def _x(torch: Any, case: Case) -> Any:
    """The quantize input as a torch tensor of its dtype and shape."""
    from ._common import to_torch

    x = case.inputs["x"]
    return to_torch(x).reshape(x.shape)


def _result(case: Case, t: Any) -> Outputs:
    import torch

    from ._common import from_torch

    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t = t.view(torch.uint8)
    (name,) = case.expected
    return {name: codes_as(case, name, from_torch(t).reshape(-1))}


# ---- the ops -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Op:
    """One torch quantization op: ``check(case, p)`` -> None or why it cannot run the case; ``call(torch, case,
    p, compiled)`` -> outputs; ``source(case, p)`` -> the reproducer's statements computing ``y`` (one element)."""

    name: str
    operation: str
    profile: str
    api: str
    check: Callable[[Case, _Params], str | None]
    call: Callable[[Any, Case, _Params, bool], Outputs]
    source: Callable[[Case, _Params], list[str]]


def _qdtype(p: _Params) -> str:
    q = _CONTAINERS.get(p.storage, (None, None))[1]
    if q is None:
        raise Unsupported(f"torch has no quantized dtype for {p.storage} (qint8, quint8, qint32)")
    return q


def _full_range(p: _Params) -> bool:
    st = IntFormat_of(p.storage)
    return st is not None and (p.lo, p.hi) == tuple(st.full_range)


def IntFormat_of(name: str) -> IntFormat | None:
    from ...formats import get_format

    f = get_format(name)
    return f if isinstance(f, IntFormat) else None


def _check_aten_quantize(per_tensor: bool) -> Callable[[Case, _Params], str | None]:
    def check(case: Case, p: _Params) -> str | None:
        if p.per_tensor != per_tensor:
            return "per-tensor cases only" if per_tensor else "per-channel (per-axis) cases only"
        if p.storage not in ("int8", "uint8", "int32") or not _full_range(p):
            return f"torch quantized tensors are qint8 / quint8 / qint32 over their full range, not {p.storage}" + \
                ("" if _full_range(p) else f" [{p.lo}, {p.hi}]")
        if case.operation == "uniform_quantize" and case.inputs["x"].dtype.name != "float32":
            return f"quantize_per_{'tensor' if per_tensor else 'channel'} takes float32, not " \
                   f"{case.inputs['x'].dtype.name}"
        if case.operation == "uniform_dequantize":
            (name,) = case.expected
            if case.expected[name].dtype.name != "float32":
                return f"Tensor.dequantize returns float32, the case asks for {case.expected[name].dtype.name}"
        return None
    return check


def _quantize_per_tensor(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    qd = getattr(torch, _qdtype(p))

    def f(x: Any, s: float, z: int) -> Any:
        return torch.quantize_per_tensor(x, s, z, qd).int_repr()
    fn = _compiled(torch, f"quantize_per_tensor.{p.storage}", f) if compiled else f
    return _result(case, fn(_x(torch, case), p.s, p.z))


def _quantize_per_channel(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    qd = getattr(torch, _qdtype(p))

    def f(x: Any, s: Any, z: Any, axis: int) -> Any:
        return torch.quantize_per_channel(x, s, z, axis, qd).int_repr()
    fn = _compiled(torch, f"quantize_per_channel.{p.storage}", f) if compiled else f
    return _result(case, fn(_x(torch, case), torch.from_numpy(p.scales.copy()),
                            torch.from_numpy(p.zero_points.copy()), p.axis))


def _codes(torch: Any, case: Case, p: _Params) -> Any:
    (cname,) = case.inputs
    v = storage_values(case)
    shape = case.inputs[cname].shape
    if p.storage in _FLOAT_STORAGE:  # the codes' bits as a float8 tensor
        return torch.from_numpy(np.ascontiguousarray(v.astype(np.uint8))).view(getattr(torch, p.storage)).reshape(shape)
    dt = _CONTAINERS[p.storage][0] if p.storage in _CONTAINERS else v.dtype.name
    return torch.from_numpy(np.ascontiguousarray(v.astype(dt))).reshape(shape)


def _dequantize_per_tensor(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    def f(c: Any, s: float, z: int) -> Any:
        return torch._make_per_tensor_quantized_tensor(c, s, z).dequantize()
    fn = _compiled(torch, f"dequantize.per_tensor.{p.storage}", f) if compiled else f
    return _result(case, fn(_codes(torch, case, p), p.s, p.z))


def _dequantize_per_channel(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    def f(c: Any, s: Any, z: Any, axis: int) -> Any:
        return torch._make_per_channel_quantized_tensor(c, s, z, axis).dequantize()
    fn = _compiled(torch, f"dequantize.per_channel.{p.storage}", f) if compiled else f
    return _result(case, fn(_codes(torch, case, p), torch.from_numpy(p.scales.copy()),
                            torch.from_numpy(p.zero_points.copy()), p.axis))


# fake quantize --------------------------------------------------------------------------------------------------
def _check_fake(per_tensor: bool) -> Callable[[Case, _Params], str | None]:
    def check(case: Case, p: _Params) -> str | None:
        if p.per_tensor != per_tensor:
            return "per-tensor cases only" if per_tensor else "per-channel (per-axis) cases only"
        if IntFormat_of(p.storage) is None:
            return f"fake quantization rounds to integers in [quant_min, quant_max], not to {p.storage} values"
        if p.hi - p.lo >= 2**16 or p.lo < -(2**15) or p.hi > 2**16 - 1:
            return (f"fake_quantize takes quant_min <= quant_max within 16 bits (int16 / uint16 ranges), not "
                    f"[{p.lo}, {p.hi}] ({p.storage})")
        if case.inputs["x"].dtype.name != "float32":
            return (f"this target runs float32 inputs only ({case.inputs['x'].dtype.name}: fake_quantize takes it, "
                    f"but the pytorch_fake_quantize profile covers float32)")
        return None
    return check


def _read_back(case: Case, p: _Params, y: np.ndarray) -> Outputs:
    """Codes from the fake-quantized float32 output (module docstring): q = z + round(y / s), checked."""
    x = case.inputs["x"]
    shape = x.shape
    sch = scheme_of(case)
    S, Z = sch.expand(shape)
    s32 = np.broadcast_to(np.asarray(S, np.float64).astype(np.float32), shape)
    z = np.broadcast_to(np.asarray(Z, np.int64), shape)
    y = np.asarray(y, np.float32).reshape(shape)
    with np.errstate(all="ignore"):
        d = np.rint(y.astype(np.float64) / s32.astype(np.float64))
        back = (d * s32.astype(np.float64)).astype(np.float32)
    ok = (back.view(np.uint32) == y.view(np.uint32)) | ((back == 0) & (y == 0))
    if not ok.all():
        i = int(np.flatnonzero(~ok.reshape(-1))[0])
        raise ValueError(f"fake-quantized output {float(y.reshape(-1)[i])!r} at element {i} is no (q - z) * s "
                         f"with s = {float(s32.reshape(-1)[i])!r}")
    q = (d.astype(np.int64) + z).astype(np.int64)
    name = "codes" if "codes" in case.expected else next(iter(case.expected))
    exp = case.expected[name]
    bits_ = IntFormat_of(p.storage).bits  # type: ignore[union-attr]
    return {name: (q & ((1 << bits_) - 1)).astype(np.uint64).astype(exp.dtype)}


def _fake_outputs(torch: Any, case: Case, p: _Params, call: Callable[[Any], Any]) -> Outputs:
    """y = call(x) read back as codes; a case with a ``grad_mask`` output also runs the backward: x requires grad,
    y.backward(ones), grad_mask = (x.grad != 0) (uniform.md §4.4 F5)."""
    x = _x(torch, case)
    if "grad_mask" not in case.expected:
        return _read_back(case, p, call(x).numpy())
    x.requires_grad_(True)
    y = call(x)
    y.backward(torch.ones_like(y))
    out = _read_back(case, p, y.detach().numpy())
    out["grad_mask"] = (x.grad != 0).numpy().reshape(case.expected["grad_mask"].shape)
    return out


def _fake_per_tensor(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    def f(x: Any, s: float, z: int, lo: int, hi: int) -> Any:
        return torch.fake_quantize_per_tensor_affine(x, s, z, lo, hi)
    fn = _compiled(torch, "fake_quantize_per_tensor_affine", f) if compiled else f
    return _fake_outputs(torch, case, p, lambda x: fn(x, p.se, p.z, p.lo, p.hi))


def _fake_per_channel(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    def f(x: Any, s: Any, z: Any, axis: int, lo: int, hi: int) -> Any:
        return torch.fake_quantize_per_channel_affine(x, s, z, axis, lo, hi)
    fn = _compiled(torch, "fake_quantize_per_channel_affine", f) if compiled else f
    s = torch.from_numpy(p.expressed_scales.astype(np.float32))
    z = torch.from_numpy(p.zero_points.astype(np.int32))
    return _fake_outputs(torch, case, p, lambda x: fn(x, s, z, p.axis, p.lo, p.hi))


# the PT2E decomposed ops ------------------------------------------------------------------------------------------
def _container(p: _Params) -> str:
    if p.storage in _FLOAT_STORAGE:
        return p.storage
    c = _CONTAINERS.get(p.storage)
    if c is None:
        raise Unsupported(f"the decomposed ops take int8/uint8/int16/uint16/int32 containers (and float8_e4m3fn / "
                          f"float8_e5m2), not {p.storage}")
    return c[0]


def _bounds(torch: Any, p: _Params) -> tuple[int, int]:
    if p.storage in _FLOAT_STORAGE:
        m = int(torch.finfo(getattr(torch, p.storage)).max)
        return -m, m
    return p.lo, p.hi


def _check_decomposed(kind: str) -> Callable[[Case, _Params], str | None]:
    def check(case: Case, p: _Params) -> str | None:
        if kind == "per_tensor" and not p.per_tensor:
            return "per-tensor cases only (quantize_per_channel / quantize_per_token take per-axis scales)"
        if kind == "per_channel" and p.per_tensor:
            return "per-channel (per-axis) cases only"
        if p.storage not in _CONTAINERS and p.storage not in _FLOAT_STORAGE:
            return (f"the decomposed ops take int8/uint8/int16/uint16/int32 containers (and float8_e4m3fn / "
                    f"float8_e5m2), not {p.storage}")
        if case.operation == "uniform_quantize" and case.inputs["x"].dtype.name not in _INPUTS:
            return f"the decomposed quantize ops take float32 (bfloat16 / float16 converted), not " \
                   f"{case.inputs['x'].dtype.name}"
        if case.operation == "uniform_dequantize":
            (name,) = case.expected
            if case.expected[name].dtype.name not in _INPUTS:
                return f"out_dtype float32/float16/bfloat16, not {case.expected[name].dtype.name}"
        return None
    return check


def _qd(torch: Any) -> Any:
    return torch.ops.quantized_decomposed


def _dec_quantize_per_tensor(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    lo, hi = _bounds(torch, p)

    def f(x: Any, s: float, z: int, lo: int, hi: int) -> Any:
        return _qd(torch).quantize_per_tensor(x, s, z, lo, hi, dt)
    fn = _compiled(torch, f"decomposed.quantize_per_tensor.{dt}", f) if compiled else f
    return _result(case, fn(_x(torch, case), p.se, p.z, lo, hi))


def _out_dtype(torch: Any, case: Case) -> Any:
    (name,) = case.expected
    return getattr(torch, case.expected[name].dtype.name)


def _dec_dequantize_per_tensor(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    od = _out_dtype(torch, case)
    lo, hi = _bounds(torch, p)

    def f(c: Any, s: float, z: int, lo: int, hi: int) -> Any:
        return _qd(torch).dequantize_per_tensor(c, s, z, lo, hi, dt, out_dtype=od)
    fn = _compiled(torch, f"decomposed.dequantize_per_tensor.{dt}.{od}", f) if compiled else f
    return _result(case, fn(_codes(torch, case, p), p.se, p.z, lo, hi))


def _qparams(torch: Any, p: _Params) -> tuple[Any, Any]:
    """The per-tensor scale (float64) and zero point (int64) as 0-d tensors (the ``.tensor`` overloads)."""
    return torch.tensor(p.se, dtype=torch.float64), torch.tensor(p.z, dtype=torch.int64)


def _dec_quantize_per_tensor_t(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    lo, hi = _bounds(torch, p)

    def f(x: Any, s: Any, z: Any, lo: int, hi: int) -> Any:
        return _qd(torch).quantize_per_tensor.tensor(x, s, z, lo, hi, dt)
    fn = _compiled(torch, f"decomposed.quantize_per_tensor.tensor.{dt}", f) if compiled else f
    return _result(case, fn(_x(torch, case), *_qparams(torch, p), lo, hi))


def _dec_dequantize_per_tensor_t(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    od = _out_dtype(torch, case)
    lo, hi = _bounds(torch, p)

    def f(c: Any, s: Any, z: Any, lo: int, hi: int) -> Any:
        return _qd(torch).dequantize_per_tensor.tensor(c, s, z, lo, hi, dt, out_dtype=od)
    fn = _compiled(torch, f"decomposed.dequantize_per_tensor.tensor.{dt}.{od}", f) if compiled else f
    return _result(case, fn(_codes(torch, case, p), *_qparams(torch, p), lo, hi))


def _dec_quantize_per_channel(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))

    def f(x: Any, s: Any, z: Any, axis: int, lo: int, hi: int) -> Any:
        return _qd(torch).quantize_per_channel(x, s, z, axis, lo, hi, dt)
    fn = _compiled(torch, f"decomposed.quantize_per_channel.{dt}", f) if compiled else f
    return _result(case, fn(_x(torch, case), torch.from_numpy(p.expressed_scales.astype(np.float32)),
                            torch.from_numpy(p.zero_points.copy()), p.axis, p.lo, p.hi))


def _dec_dequantize_per_channel(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    od = _out_dtype(torch, case)

    def f(c: Any, s: Any, z: Any, axis: int, lo: int, hi: int) -> Any:
        return _qd(torch).dequantize_per_channel(c, s, z, axis, lo, hi, dt, out_dtype=od)
    fn = _compiled(torch, f"decomposed.dequantize_per_channel.{dt}.{od}", f) if compiled else f
    return _result(case, fn(_codes(torch, case, p), torch.from_numpy(p.expressed_scales.astype(np.float32)),
                            torch.from_numpy(p.zero_points.copy()), p.axis, p.lo, p.hi))


def _tokens(a: Any, p: _Params) -> tuple[Any, tuple[int, ...]]:
    """The tensor as (tokens, elements): the channel axis first (per tensor: one token), and how to undo it."""
    if p.per_tensor:
        return a.reshape(1, -1), tuple(a.shape)
    moved = a.movedim(p.axis, 0)
    return moved.reshape(moved.shape[0], -1), tuple(moved.shape)


def _untokens(t: Any, p: _Params, moved_shape: tuple[int, ...]) -> Any:
    t = t.reshape(moved_shape)
    return t if p.per_tensor else t.movedim(0, p.axis)


def _dec_quantize_per_token(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))

    def f(x: Any, s: Any, z: Any, lo: int, hi: int) -> Any:
        return _qd(torch).quantize_per_token(x, s, z, lo, hi, dt)
    fn = _compiled(torch, f"decomposed.quantize_per_token.{dt}", f) if compiled else f
    x = _x(torch, case)
    xt, shape = _tokens(x, p)
    s = torch.from_numpy(p.expressed_scales.astype(np.float32).reshape(-1, 1))
    z = torch.from_numpy(p.zero_points.astype(np.int32).reshape(-1, 1))
    return _result(case, _untokens(fn(xt.contiguous(), s, z, p.lo, p.hi), p, shape))


def _dec_dequantize_per_token(torch: Any, case: Case, p: _Params, compiled: bool) -> Outputs:
    dt = getattr(torch, _container(p))
    od = _out_dtype(torch, case)

    def f(c: Any, s: Any, z: Any, lo: int, hi: int) -> Any:
        return _qd(torch).dequantize_per_token(c, s, z, lo, hi, dt, od)
    fn = _compiled(torch, f"decomposed.dequantize_per_token.{dt}.{od}", f) if compiled else f
    ct, shape = _tokens(_codes(torch, case, p), p)
    s = torch.from_numpy(p.expressed_scales.astype(np.float32).reshape(-1, 1))
    z = torch.from_numpy(p.zero_points.astype(np.int64).reshape(-1, 1))
    return _result(case, _untokens(fn(ct.contiguous(), s, z, p.lo, p.hi), p, shape))


# ---- reproducer sources (one element, per tensor: single_element_case) --------------------------------------------
def _src_x(one: Case) -> str:
    x = one.inputs["x"]
    if x.dtype.name == "bfloat16":
        return f"x = torch.from_numpy({array_literal(x.view(np.uint16))}.copy()).view(torch.bfloat16)"
    return f"x = torch.from_numpy({array_literal(x)}.copy())"


def _src_codes(one: Case, p: _Params) -> str:
    v = storage_values(one).reshape(-1)
    dt = _CONTAINERS.get(p.storage, (v.dtype.name,))[0]
    return f"c = torch.tensor([{int(v[0])}], dtype=torch.{dt})"


def _src_print(one: Case) -> str:
    (name,) = one.expected
    w = one.expected[name].dtype.itemsize
    return f"print(hex(int(y.reshape(-1).view(torch.int{8 * w}).numpy().view(np.uint{8 * w})[0])))"


def _src_common(compiled: bool, fn: str, body: str) -> list[str]:
    head = ["import numpy as np, torch, warnings", "import torch.ao.quantization.fx._decomposed",
            "warnings.simplefilter('ignore')", f"def {fn}:", f"    return {body}"]
    if compiled:
        head.append("f = torch.compile(f, dynamic=True, fullgraph=True)")
    return head


def _make_source(kind: str) -> Callable[[Case, _Params, bool], list[str]]:
    def source(one: Case, p: _Params, compiled: bool) -> list[str]:
        s, z = p.s, p.z
        if kind in ("quantize_per_tensor", "quantize_per_channel"):
            q = _qdtype(p)
            body = (f"torch.quantize_per_tensor(x, s, z, torch.{q}).int_repr()" if kind == "quantize_per_tensor"
                    else f"torch.quantize_per_channel(x, s, z, 0, torch.{q}).int_repr()")
            args = ("x, s, z",)
            call = (f"y = f(x, {s!r}, {z})" if kind == "quantize_per_tensor" else
                    f"y = f(x, torch.tensor([{s!r}], dtype=torch.float64), torch.tensor([{z}]))")
            return [*_src_common(compiled, f"f({args[0]})", body), _src_x(one), call, _src_print(one)]
        if kind in ("dequantize_per_tensor", "dequantize_per_channel"):
            body = ("torch._make_per_tensor_quantized_tensor(c, s, z).dequantize()" if kind == "dequantize_per_tensor"
                    else "torch._make_per_channel_quantized_tensor(c, s, z, 0).dequantize()")
            call = (f"y = f(c, {s!r}, {z})" if kind == "dequantize_per_tensor" else
                    f"y = f(c, torch.tensor([{s!r}], dtype=torch.float64), torch.tensor([{z}]))")
            return [*_src_common(compiled, "f(c, s, z)", body), _src_codes(one, p), call, _src_print(one)]
        if kind.startswith("fake"):
            body = ("torch.fake_quantize_per_tensor_affine(x, s, z, lo, hi)" if kind == "fake_per_tensor" else
                    "torch.fake_quantize_per_channel_affine(x, s, z, 0, lo, hi)")
            call = (f"y = f(x, {s!r}, {z}, {p.lo}, {p.hi})" if kind == "fake_per_tensor" else
                    f"y = f(x, torch.tensor([{s!r}], dtype=torch.float32), torch.tensor([{z}], dtype=torch.int32), "
                    f"{p.lo}, {p.hi})")
            (name,) = one.expected
            mask = (1 << IntFormat_of(p.storage).bits) - 1  # type: ignore[union-attr]
            return [*_src_common(compiled, "f(x, s, z, lo, hi)", body), _src_x(one), call,
                    f"print(hex((int(round(float(y[0]) / float(np.float32({s!r})))) + {z}) & {hex(mask)}))"]
        dt = _container(p)
        lo, hi = p.lo, p.hi
        if p.storage in _FLOAT_STORAGE:
            m = {"float8_e4m3fn": 448, "float8_e5m2": 57344}[p.storage]
            lo, hi = -m, m
        # the decomposed ops: kind -> (op, axis argument, the call's scale and zero point, the input's reshape)
        tensor, value = f"torch.tensor({s!r}, dtype=torch.float64), torch.tensor({z})", f"{s!r}, {z}"
        channel = f"torch.tensor([{s!r}], dtype=torch.float32), torch.tensor([{z}])"
        token = f"torch.tensor([[{s!r}]], dtype=torch.float32), torch.tensor([[{z}]]"
        op, axis, sz, shape = {
            "dec_quantize_per_tensor_t": ("quantize_per_tensor.tensor", "", tensor, ""),
            "dec_quantize_per_tensor": ("quantize_per_tensor", "", value, ""),
            "dec_dequantize_per_tensor_t": ("dequantize_per_tensor.tensor", "", tensor, ""),
            "dec_dequantize_per_tensor": ("dequantize_per_tensor", "", value, ""),
            "dec_quantize_per_channel": ("quantize_per_channel", "0, ", channel, ""),
            "dec_dequantize_per_channel": ("dequantize_per_channel", "0, ", channel, ""),
            "dec_quantize_per_token": ("quantize_per_token", "", f"{token}, dtype=torch.int32)", ".reshape(1, 1)"),
            "dec_dequantize_per_token": ("dequantize_per_token", "", f"{token})", ".reshape(1, 1)"),
        }[kind]
        (name,) = one.expected
        od = f"torch.{one.expected[name].dtype.name}"
        # dequantize ops take the codes and an output dtype (the per-token op by position)
        v, out = (("x", "") if op.startswith("quantize") else
                  ("c", f", {od}" if op == "dequantize_per_token" else f", out_dtype={od}"))
        body = f"torch.ops.quantized_decomposed.{op}({v}, s, z, {axis}lo, hi, torch.{dt}{out})"
        call = f"y = f({v}{shape}, {sz}, {lo}, {hi})"
        src = _src_x(one) if v == "x" else _src_codes(one, p)
        return [*_src_common(compiled, f"f({v}, s, z, lo, hi)", body), src, call, _src_print(one)]
    return source


# ---- the table of ops ------------------------------------------------------------------------------------------
_OPS: tuple[tuple[str, str, str, str, Callable[[Case, _Params], str | None],
                  Callable[[Any, Case, _Params, bool], Outputs], str], ...] = (
    ("quantize_per_tensor", "uniform_quantize", "pytorch",
     "torch.quantize_per_tensor(x, scale, zero_point, torch.qint8 / quint8).int_repr() (float32 x)",
     _check_aten_quantize(True), _quantize_per_tensor, "quantize_per_tensor"),
    ("quantize_per_channel", "uniform_quantize", "pytorch_per_channel",
     "torch.quantize_per_channel(x, float64 scales, int64 zero_points, axis, torch.qint8 / quint8 / qint32)"
     ".int_repr()", _check_aten_quantize(False), _quantize_per_channel, "quantize_per_channel"),
    ("dequantize.per_tensor", "uniform_dequantize", "pytorch",
     "torch._make_per_tensor_quantized_tensor(codes, scale, zero_point).dequantize() (qint8 / quint8)",
     _check_aten_quantize(True), _dequantize_per_tensor, "dequantize_per_tensor"),
    ("dequantize.per_channel", "uniform_dequantize", "pytorch_per_channel",
     "torch._make_per_channel_quantized_tensor(codes, float64 scales, int64 zero_points, axis).dequantize()",
     _check_aten_quantize(False), _dequantize_per_channel, "dequantize_per_channel"),
    ("fake_quantize_per_tensor_affine", "uniform_quantize", "pytorch_fake_quantize",
     "torch.fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min, quant_max); codes read back as "
     "z + round(y / s)", _check_fake(True), _fake_per_tensor, "fake_per_tensor"),
    ("fake_quantize_per_channel_affine", "uniform_quantize", "pytorch_fake_quantize",
     "torch.fake_quantize_per_channel_affine(x, float32 scales, int32 zero_points, axis, quant_min, quant_max); "
     "codes read back as z + round(y / s)", _check_fake(False), _fake_per_channel, "fake_per_channel"),
    ("decomposed.quantize_per_tensor", "uniform_quantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.quantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)",
     _check_decomposed("per_tensor"), _dec_quantize_per_tensor, "dec_quantize_per_tensor"),
    ("decomposed.dequantize_per_tensor", "uniform_dequantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.dequantize_per_tensor(codes, scale, zero_point, quant_min, quant_max, dtype, "
     "out_dtype=...)", _check_decomposed("per_tensor"), _dec_dequantize_per_tensor, "dec_dequantize_per_tensor"),
    ("decomposed.quantize_per_tensor.tensor", "uniform_quantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.quantize_per_tensor.tensor(x, float64 scale, int64 zero_point (0-d tensors), "
     "quant_min, quant_max, dtype)", _check_decomposed("per_tensor"), _dec_quantize_per_tensor_t,
     "dec_quantize_per_tensor_t"),
    ("decomposed.dequantize_per_tensor.tensor", "uniform_dequantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.dequantize_per_tensor.tensor(codes, float64 scale, int64 zero_point (0-d "
     "tensors), quant_min, quant_max, dtype, out_dtype=...)", _check_decomposed("per_tensor"),
     _dec_dequantize_per_tensor_t, "dec_dequantize_per_tensor_t"),
    ("decomposed.quantize_per_channel", "uniform_quantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.quantize_per_channel(x, float32 scales, int64 zero_points, axis, quant_min, "
     "quant_max, dtype)", _check_decomposed("per_channel"), _dec_quantize_per_channel,
     "dec_quantize_per_channel"),
    ("decomposed.dequantize_per_channel", "uniform_dequantize", "pytorch_decomposed",
     "torch.ops.quantized_decomposed.dequantize_per_channel(codes, float32 scales, int64 zero_points, axis, "
     "quant_min, quant_max, dtype, out_dtype=...)", _check_decomposed("per_channel"),
     _dec_dequantize_per_channel, "dec_dequantize_per_channel"),
    ("decomposed.quantize_per_token", "uniform_quantize", "pytorch_decomposed_per_token",
     "torch.ops.quantized_decomposed.quantize_per_token(x as (tokens, n), float32 scales (tokens, 1), int32 zero "
     "points, quant_min, quant_max, dtype): the channel axis moved first, per tensor as one token",
     _check_decomposed("any"), _dec_quantize_per_token, "dec_quantize_per_token"),
    ("decomposed.dequantize_per_token", "uniform_dequantize", "pytorch_decomposed_per_token",
     "torch.ops.quantized_decomposed.dequantize_per_token(codes as (tokens, n), float32 scales, int64 zero "
     "points, quant_min, quant_max, dtype, output_dtype)", _check_decomposed("any"), _dec_dequantize_per_token,
     "dec_dequantize_per_token"),
)


def _supports(operation: str, check: Callable[[Case, _Params], str | None]) -> Callable[[Case], str | None]:
    def supports(case: Case) -> str | None:
        if case.operation != operation:
            return f"this op is {operation}"
        try:
            return check(case, _params(case))
        except Unsupported as exc:
            return str(exc)
    return supports


def _runner(call: Callable[[Any, Case, _Params, bool], Outputs], compiled: bool
            ) -> Callable[[Sequence[Case]], list[Outputs | BaseException]]:
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        torch = _torch()

        def one(case: Case) -> Outputs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # quantized tensors are deprecated in torch 2.13
                return call(torch, case, _params(case), compiled)
        return run_each(cases, one)
    return run


def _snippet(kind: str, compiled: bool) -> Callable[[Case, int], str]:
    src = _make_source(kind)

    def snippet(case: Case, i: int) -> str:
        one = single_element_case(case, i)
        lines = src(one, _params(one), compiled)
        if getattr(case, "_output", None) == "grad_mask":  # uniform.md §4.4 F5: the backward's mask instead
            *head, xline, call, _ = lines
            lines = [*head, xline, "x.requires_grad_(True)", call, "y.backward(torch.ones_like(y))",
                     "print(bool(x.grad.reshape(-1)[0] != 0))"]
        return python_c(*lines)
    return snippet


#: target name -> the profile of its torch.compile target where Inductor computes differently (uniform.md §4.4 D6)
COMPILED_PROFILES = {"decomposed.quantize_per_tensor.tensor": "pytorch_decomposed_inductor"}


def targets(backend: str, compiled: bool) -> list[Target]:
    """The quantization-op targets of ``backend`` (``compiled``: run under torch.compile, Inductor CPU)."""
    out = []
    for name, operation, profile, api, check, call, kind in _OPS:
        if compiled:
            profile = COMPILED_PROFILES.get(name, profile)
        how = "torch.compile(f, dynamic=True, fullgraph=True) (Inductor, CPU) of f = " if compiled else ""
        out.append(Target(backend, f"{backend}.{name}", "uniform", how + api, profile, (operation,),
                          _supports(operation, check), _runner(call, compiled), _snippet(kind, compiled)))
    return out


__all__ = ["targets"]
