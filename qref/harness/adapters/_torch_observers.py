"""PyTorch range observers of ``torch.ao.quantization.observer`` on ``uniform_calibrate`` cases (uniform.md §5.4).

Each run ``x[r]`` of a case feeds a new observer its batches in order (``observer(batch)``, a float32 /
float64 tensor of the batch's dtype), then ``calculate_qparams()`` gives the scale (float32) and the zero point
(int32 for affine schemes, int64 for symmetric ones: compared as integers). The case's params pick the observer
and its arguments: running ``extremes`` -> ``MinMaxObserver`` (per tensor) / ``PerChannelMinMaxObserver``
(``ch_axis`` = the case's axis), ``exponential_average`` -> ``MovingAverageMinMaxObserver(averaging_constant=c)``
/ ``MovingAveragePerChannelMinMaxObserver``; symmetric -> ``per_tensor_symmetric`` / ``per_channel_symmetric``,
else the affine qschemes; storage int8 / uint8 -> ``torch.qint8`` / ``torch.quint8``; the storage range: the
dtype's full range as it is, its reduced range ([-64, 63], [0, 127]) as ``reduce_range=True``, any other range
(and a ``floor_midpoint`` symmetric uint8 case) as ``quant_min`` / ``quant_max``; ``eps`` as given.

``torch.FakeQuantize.<observer>``: ``torch.ao.quantization.FakeQuantize(observer=<observer class>, **the same
arguments)`` (observer and fake quantization enabled) called on each batch of a run: its outputs are ``y`` of the
cases that hold one (``uniform/calibrate/fake_quantize/*``), then ``calculate_qparams()``.
``torch.observer.HistogramObserver``: ``HistogramObserver(bins=B, dtype, qscheme, ...)`` (the same arguments, per
tensor) fed each run's batches, then ``calculate_qparams()``, on the cases whose running statistic is ``histogram``
(uniform.md §5.5).
``torch.decomposed.choose_qparams_per_token_asymmetric``: ``quantized_decomposed.choose_qparams_per_token_asymmetric
(rows, torch.int8)`` on the cases of the divide_eps_balanced_zero_point formula.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...conformance.case import Case
from ..model import Outputs, Target
from ._common import array_literal, python_c, run_each

#: dtype name -> (full range, reduced range)
_RANGES = {"int8": ((-128, 127), (-64, 63)), "uint8": ((0, 255), (0, 127))}
#: (running, per channel) -> the observer class
CLASSES = {("extremes", False): "MinMaxObserver", ("extremes", True): "PerChannelMinMaxObserver",
           ("exponential_average", False): "MovingAverageMinMaxObserver",
           ("exponential_average", True): "MovingAveragePerChannelMinMaxObserver"}


def observer_kwargs(params: Any) -> dict[str, Any]:
    """The observer's keyword arguments (as Python source values: names of torch attributes are strings
    prefixed ``torch.``) for a uniform_calibrate case's params (module docstring)."""
    per_channel = params["axis"] is not None
    sym = bool(params["symmetric"])
    qscheme = f"torch.per_{'channel' if per_channel else 'tensor'}_{'symmetric' if sym else 'affine'}"
    st = str(params["storage"])
    kw: dict[str, Any] = {"dtype": f"torch.{'q' if st == 'int8' else 'qu'}int8", "qscheme": qscheme}
    rng = tuple(int(v) for v in params["storage_range"])
    full, reduced = _RANGES[st]
    floor_mid = sym and st == "uint8" and params["midpoint"] == "floor_midpoint"
    if rng == reduced and not floor_mid:
        kw["reduce_range"] = True
    elif rng != full or floor_mid:
        kw["quant_min"], kw["quant_max"] = rng
    if params["running"] == "exponential_average":
        kw["averaging_constant"] = float(params["averaging_constant"])
    if per_channel:
        kw["ch_axis"] = int(params["axis"])
    if params["running"] == "histogram":
        kw["bins"] = int(params["bins"])
    kw["eps"] = float(params["eps"])
    return kw


def _resolve(torch: Any, kw: dict[str, Any]) -> dict[str, Any]:
    return {k: (getattr(torch, v[6:]) if isinstance(v, str) and v.startswith("torch.") else v) for k, v in kw.items()}


def _calibrate_reason(case: Case, who: str, formula: str, computes: str) -> str | None:
    """Why ``case`` is not a uniform_calibrate case of ``formula`` for ``who`` (which ``computes`` it), or None."""
    if case.operation != "uniform_calibrate":
        return f"{who} computes a scale and a zero point"
    if case.params["formula"] != formula:
        return f"{computes}, not {case.params['formula']}"
    return None


def _supports(running: str, per_channel: bool, fake: bool = False):
    def supports(case: Case) -> str | None:
        p = case.params
        why = _calibrate_reason(case, "an observer", "float32_divide_eps",
                                "the observers compute float32_divide_eps parameters")
        if why is not None:
            return why
        if ("y" in case.expected) != fake:
            return ("a FakeQuantize module's cases hold its outputs y" if fake else
                    "an observer gives no fake-quantized values (the FakeQuantize targets run these cases)")
        if (p["running"], p["axis"] is not None) != (running, per_channel):
            return (f"this observer's running range is {running} {'per channel' if per_channel else 'per tensor'}, "
                    f"the case's {p['running']} {'per tensor' if p['axis'] is None else 'per channel'}")
        if p["storage"] not in _RANGES:
            return f"the observer targets take qint8 / quint8, not {p['storage']}"
        if running == "histogram" and int(p["upsample_rate"]) != 16:
            return f"HistogramObserver re-bins with 16 parts per bin, the case with {p['upsample_rate']}"
        return None
    return supports


def _run(cls_name: str, fake: bool = False):
    """The observer ``cls_name`` over each run's batches, then calculate_qparams(); fake: inside a FakeQuantize
    module (fake quantization enabled), whose outputs y per batch are returned too."""
    def run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
        import torch
        import torch.ao.quantization.observer as obs
        from torch.ao.quantization.fake_quantize import FakeQuantize

        torch.set_num_threads(1)
        cls = getattr(obs, cls_name)

        def one(case: Case) -> Outputs:
            kw = _resolve(torch, observer_kwargs(case.params))
            scales, zps, ys = [], [], []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for run in case.inputs["x"]:
                    m = FakeQuantize(observer=cls, **kw) if fake else cls(**kw)
                    y = [m(torch.from_numpy(np.ascontiguousarray(b))) for b in run]
                    if fake:
                        ys.append(np.stack([t.detach().numpy() for t in y]))
                    s, z = m.calculate_qparams()
                    scales.append(s.numpy().astype(np.float32).reshape(-1))
                    zps.append(z.numpy().astype(np.int64).reshape(-1))
            shape = case.expected["scale"].shape
            out = {"scale": np.stack(scales).reshape(shape), "zero_point": np.stack(zps).reshape(shape)}
            if fake:
                out["y"] = np.stack(ys).astype(np.float32).reshape(case.expected["y"].shape)
            return out
        return run_each(cases, one)
    return run


def _fake_snippet(cls_name: str):
    def snippet(case: Case, i: int) -> str:
        out = getattr(case, "_output", "y")
        if out != "y":
            return _snippet(cls_name)(case, i)
        pos = np.unravel_index(int(i), case.expected["y"].shape)
        kw = observer_kwargs(case.params)
        args = ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in kw.items())
        rest = np.ravel_multi_index(pos[2:], case.expected["y"].shape[2:])
        return python_c(
            "import numpy as np, torch, warnings", "from torch.ao.quantization.fake_quantize import FakeQuantize",
            "from torch.ao.quantization.observer import " + cls_name, "warnings.simplefilter('ignore')",
            f"x = {array_literal(case.inputs['x'][pos[0]])}",
            f"m = FakeQuantize(observer={cls_name}, {args})",
            "ys = [m(torch.from_numpy(b.copy())).detach() for b in x]",
            f"print(hex(int(ys[{int(pos[1])}].reshape(-1).view(torch.int32).numpy().view(np.uint32)[{int(rest)}])))")
    return snippet


def _snippet(cls_name: str):
    def snippet(case: Case, i: int) -> str:
        out = getattr(case, "_output", "scale")
        shape = case.expected["scale"].shape
        pos = np.unravel_index(int(i), shape)
        kw = observer_kwargs(case.params)
        args = ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in kw.items())
        k = 0 if len(pos) == 1 else int(pos[1])
        show = ("s.numpy().view(np.uint32)" if out == "scale" else "z.numpy().astype(np.int64).view(np.uint64)")
        return python_c(
            "import numpy as np, torch, warnings", "from torch.ao.quantization.observer import " + cls_name,
            "warnings.simplefilter('ignore')",
            f"x = {array_literal(case.inputs['x'][pos[0]])}",
            f"o = {cls_name}({args})",
            "for b in x:", "    o(torch.from_numpy(b.copy()))",
            "s, z = o.calculate_qparams()",
            f"print(hex(int({show}.reshape(-1)[{k}])))")
    return snippet


# ---- quantized_decomposed.choose_qparams_per_token_asymmetric (uniform.md §5.2) --------------------------------
def _per_token_supports(case: Case) -> str | None:
    p = case.params
    return _calibrate_reason(case, "choose_qparams_per_token_asymmetric", "divide_eps_balanced_zero_point",
                             "choose_qparams_per_token_asymmetric computes divide_eps_balanced_zero_point") or (
        "one batch of tokens (rows), int8 [-128, 127]"
        if int(p["batches"]) != 1 or p["axis"] is None or tuple(p["storage_range"]) != (-128, 127) else None)


def _per_token_run(cases: Sequence[Case]) -> list[Outputs | BaseException]:
    import torch
    import torch.ao.quantization.fx._decomposed  # registers quantized_decomposed

    torch.set_num_threads(1)
    op = torch.ops.quantized_decomposed.choose_qparams_per_token_asymmetric

    def one(case: Case) -> Outputs:
        scales, zps = [], []
        for run in case.inputs["x"]:
            rows = np.moveaxis(run[0], int(case.params["axis"]), 0)
            s, z = op(torch.from_numpy(np.ascontiguousarray(rows)), torch.int8)
            scales.append(s.numpy().reshape(-1))
            zps.append(z.numpy().astype(np.int64).reshape(-1))
        shape = case.expected["scale"].shape
        return {"scale": np.stack(scales).astype(case.expected["scale"].dtype).reshape(shape),
                "zero_point": np.stack(zps).reshape(shape)}
    return run_each(cases, one)


def _per_token_snippet(case: Case, i: int) -> str:
    out = getattr(case, "_output", "scale")
    r, k = np.unravel_index(int(i), case.expected["scale"].shape)
    row = np.moveaxis(case.inputs["x"][r, 0], int(case.params["axis"]), 0)[k : k + 1]
    show = "s.numpy().view(np.uint64)" if out == "scale" else "z.numpy().view(np.uint64)"
    return python_c(
        "import numpy as np, torch", "import torch.ao.quantization.fx._decomposed",
        f"x = torch.from_numpy({array_literal(np.ascontiguousarray(row))}.copy())",
        "s, z = torch.ops.quantized_decomposed.choose_qparams_per_token_asymmetric(x, torch.int8)",
        f"print(hex(int({show}.reshape(-1)[0])))")


def targets(backend: str) -> list[Target]:
    """One target per observer class of torch.ao.quantization.observer (module docstring), and
    quantized_decomposed.choose_qparams_per_token_asymmetric."""
    out = [Target(backend, f"{backend}.decomposed.choose_qparams_per_token_asymmetric", "uniform",
                  "torch.ops.quantized_decomposed.choose_qparams_per_token_asymmetric(rows, torch.int8) of each "
                  "run's one batch (float32 or float64 rows; float64 scales, int64 zero points)", None,
                  ("uniform_calibrate",), _per_token_supports, _per_token_run, _per_token_snippet)]
    for (running, per_channel), cls_name in CLASSES.items():
        out.append(Target(backend, f"{backend}.observer.{cls_name}", "uniform",
                          f"torch.ao.quantization.observer.{cls_name}(...) fed each run's batches, then "
                          "calculate_qparams() (scale float32 bits, zero point as an integer)", None,
                          ("uniform_calibrate",), _supports(running, per_channel), _run(cls_name),
                          _snippet(cls_name)))
    out.append(Target(backend, f"{backend}.observer.HistogramObserver", "uniform",
                      "torch.ao.quantization.observer.HistogramObserver(bins=B, ...) fed each run's float32 batches, "
                      "then calculate_qparams() (scale float32 bits, zero point as an integer)", None,
                      ("uniform_calibrate",), _supports("histogram", False), _run("HistogramObserver"),
                      _snippet("HistogramObserver")))
    for (running, per_channel), cls_name in CLASSES.items():
        out.append(Target(backend, f"{backend}.FakeQuantize.{cls_name}", "uniform",
                          f"torch.ao.quantization.FakeQuantize(observer={cls_name}, ...) (observer and fake quant "
                          "enabled) called on each batch of a run (y), then calculate_qparams()", None,
                          ("uniform_calibrate",), _supports(running, per_channel, fake=True), _run(cls_name, fake=True),
                          _fake_snippet(cls_name)))
    return out


__all__ = ["CLASSES", "observer_kwargs", "targets"]
