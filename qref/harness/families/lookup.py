"""Lookup-table (quantile) quantization for the harness (spec: docs/spec/lut.md).

Cases: ``lookup_quantize`` (input ``x`` -> ``codes``, ``scales`` [, ``dq_codes``, ``dq_scales``, ``dq_offset``])
and ``lookup_dequantize`` (``codes`` and ``scales``, or the double-quantized ``dq_*`` arrays -> ``y``), with
``scheme`` = ``LookupScheme.to_spec()``. The spec default is the ``spec`` profile (lut.md §6.1).

A case's *geometry* is what a caller chooses: the table name, block size, blocking (flattened row-major, or along
an axis), static scales, and whether (and how) the block scales are double quantized; a profile supplies the
arithmetic (lut.md §3.1). qref's prediction of profile P on a case is ``qref.scheme(name, profile=P)`` with the
case's geometry (``scheme_under``); a profile without double quantization keeps the case's (lut.md §5: the
double quantization is part of the call, not of the profile's arithmetic). Mismatch classes are named by the
``LookupScheme`` field change that reproduces the backend's bits.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...errors import QrefError
from ...schemes.base import QArray
from ...schemes.lookup import DoubleQuant, DoubleQuantized, LookupScheme, lookup_scheme
from ...schemes.lookup import from_spec as _from_spec
from ...tables import get_table
from ..model import Unsupported
from . import (
    Expectation,
    describe_plain_output,
    distinct_alternatives,
    flushed,
    held_or_computed,
    holds_for_spec_or,
    task_hash,
    value_classes,
)

FAMILY = "lookup"
SPEC_PROFILE = "spec"
OPERATIONS = ("lookup_quantize", "lookup_dequantize")

CLASS_SECTIONS = {
    "tie_rule": "lut.md §3.3", "scale_arithmetic": "lut.md §3.2", "compute_precision": "lut.md §3.2",
    "scale_rule": "lut.md §3.2", "saturation": "lut.md §3.2", "nan_sign_or_code": "lut.md §3.4",
    "zero_block": "lut.md §3.4", "subnormal_flush": "lut.md §4", "sign_of_zero": "lut.md §4",
    "dequantize_arithmetic": "lut.md §4", "decode_value": "lut.md §1.2", "reduction": "lut.md §5.3",
    "decision_rule": "lut.md §3.3",
}

_TINY_SQRT = float(np.sqrt(np.finfo(np.float32).tiny))
# LookupScheme field changes tried for classification: (class, overrides), single changes first
_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("scale_arithmetic", {"scaling": "reciprocal"}), ("scale_arithmetic", {"scaling": "divide"}),
    ("scale_arithmetic", {"partial_scaling": "divide"}), ("scale_arithmetic", {"partial_scaling": "same"}),
    *(("tie_rule", {"tie": t}) for t in ("lower_value", "upper_value", "lower_code", "even_code")),
    *(("tie_rule", {"midpoints": m}) for m in ("float32", "exact", "decimal_literal")),
    *(("decision_rule", {"rule": r}) for r in ("argmin", "nearest", "grid65536")),
    *(("compute_precision", {k: v}) for k in ("compute_dtype", "distance_dtype", "dequant_table_dtype")
      for v in ("float32", "input")),
    ("compute_precision", {"dequant_table_dtype": "float16"}),
    ("scale_rule", {"scale_dtype": "float16"}), ("scale_rule", {"scale_dtype": "float32"}),
    ("scale_rule", {"scale_min": 2.0**-23, "scale_min_rule": "clamp"}),
    ("scale_rule", {"scale_min": None}), ("scale_rule", {"scale_min": 1e-38, "scale_min_rule": "clamp"}),
    ("scale_rule", {"scale_min": _TINY_SQRT, "scale_min_rule": "one"}),
    ("scale_rule", {"scale_min": 2.0**-7, "scale_min_rule": "one"}),
    ("scale_rule", {"scale_min": "sqrt_tiny", "scale_min_rule": "one"}),  # qwix: sqrt(tiny) of the input dtype
    *(("scale_rule", {"store_guarded": g}) for g in ("all", "partial", "none")),
    ("saturation", {"clamp": True}), ("saturation", {"clamp": False}),
    *(("nan_sign_or_code", {"nan": r}) for r in ("max_value", "min_value", "first_index")),
    *(("zero_block", {"zero_block": z}) for z in ("compute", "zero_code", "code0")),
    ("subnormal_flush", {"dequant_flush": ("bfloat16",)}), ("subnormal_flush", {"dequant_flush": ()}),
    ("subnormal_flush", {"ftz": True}), ("subnormal_flush", {"ftz": False}),
    ("compute_precision", {"bf16_upcast": True}), ("compute_precision", {"bf16_upcast": False}),
)


def relevant(case: Case, profile: str | None) -> bool:
    return holds_for_spec_or(case, profile, FAMILY, OPERATIONS, SPEC_PROFILE, holds)


def holds(case: Case, profile: str) -> bool:
    return profile in case.profiles


def effective_axis(case: Case) -> int | None:
    """The blocking axis (None: flattened row-major; 1-D inputs are the same either way)."""
    ax = case.scheme.get("axis")
    arr = case.inputs["x"] if "x" in case.inputs else case.inputs["codes"]
    if ax is None or arr.ndim <= 1:
        return None
    return int(ax) % arr.ndim


def dq_kind(case: Case) -> str | None:
    dq = case.scheme.get("double_quant")
    return None if dq is None else str(dq["kind"])


def task_key(case: Case) -> str:
    sch = dict(case.scheme)
    geometry = {"name": sch["name"], "block_size": sch.get("block_size"), "axis": effective_axis(case),
                "scale": sch.get("scale"), "static_scales": sch.get("static_scales"),
                "static_zero_points": sch.get("static_zero_points"), "double_quant": dq_kind(case),
                "table": sch["table"]["bits"] if sch["name"] == "lut" else None}
    return task_hash(case, geometry)


def scheme_under(case: Case, profile: str, **overrides: Any) -> LookupScheme:
    """The case's geometry (table name, block size, blocking, double quantization) under ``profile``'s arithmetic,
    with LookupScheme field overrides."""
    sch = dict(case.scheme)
    if sch["name"] == "lut" or sch.get("scale") == "static":  # static quantile types: the case's own scheme
        if profile != sch.get("profile"):
            raise QrefError(f"the static-scale case {case.id} has no {profile!r} variant")
        base = _from_spec(sch)
        return base.replace(**overrides) if overrides else base
    kind = dq_kind(case)
    own = _from_spec(sch).double_quant
    opts = dict(overrides)
    opts.setdefault("axis", sch.get("axis"))
    try:
        s = lookup_scheme(sch["name"], profile=profile, block_size=sch["block_size"],
                          double_quant=kind is not None, **opts)
    except QrefError:
        if kind is None:
            raise
        s = lookup_scheme(sch["name"], profile=profile, block_size=sch["block_size"], double_quant=False, **opts)
    if kind is None:
        return s.replace(double_quant=None, numel_multiple=1) if s.double_quant is not None else s
    if s.double_quant is None or s.double_quant.kind != kind:  # the profile has no such double quantization
        s = s.replace(double_quant=own)
    return s


def _outputs(case: Case, sch: LookupScheme) -> Expectation:
    if case.operation == "lookup_quantize":
        with np.errstate(all="ignore"):
            q = sch.quantize(case.inputs["x"])
        got: dict[str, np.ndarray] = {"codes": np.asarray(q.codes)}
        unspec: dict[str, np.ndarray] = {"codes": np.asarray(q.unspecified, dtype=bool)}
        if q.scales is not None:
            got["scales"] = np.asarray(q.scales, dtype=np.float32)
        dq = q.meta.get("double_quant")
        if dq is not None:
            c = np.asarray(dq.codes)
            got["dq_codes"] = c.view(np.uint8) if c.dtype == np.int8 else c
            got["dq_scales"] = np.asarray(dq.scales, dtype=np.float32)
            got["dq_offset"] = np.asarray(dq.offset, dtype=np.float32).reshape(1)
            if dq.unspecified is not None:
                unspec["dq_codes"] = np.asarray(dq.unspecified, dtype=bool)
        out, um = {}, {}
        for name, exp in case.expected.items():
            if name not in got:
                continue
            a = got[name]
            if a.shape != exp.shape:
                if a.size != exp.size:
                    raise Unsupported(f"profile {sch.profile!r} gives {name} of shape {a.shape}, the case "
                                      f"{exp.shape}")
                a = a.reshape(exp.shape)
            out[name] = a.astype(exp.dtype) if a.dtype != exp.dtype else a
            if name in unspec:
                um[name] = unspec[name].reshape(exp.shape)
        return Expectation(out, um)
    (name,) = case.expected
    src = str(case.params.get("input_dtype", "float32"))
    meta: dict[str, Any] = {"input_dtype": src}
    if "dq_codes" in case.inputs:
        cfg: DoubleQuant = sch.double_quant or _from_spec(case.scheme).double_quant  # type: ignore[assignment]
        c = case.inputs["dq_codes"]
        dt = src if cfg.compute == "input" else "float32"
        meta["double_quant"] = DoubleQuantized(c.view(np.int8) if cfg.kind == "int8_absmax" else c,
                                               case.inputs["dq_scales"], np.float32(case.inputs["dq_offset"][0]),
                                               cfg, dt)
        q = QArray(codes=case.inputs["codes"], scheme=sch, scales=None, meta=meta)
    else:
        q = QArray(codes=case.inputs["codes"], scheme=sch, scales=case.inputs.get("scales"), meta=meta)
    with np.errstate(all="ignore"):
        y = sch.dequantize(q, dtype=case.expected[name].dtype)
    return Expectation({name: np.asarray(y).reshape(case.expected[name].shape)})


def expectation(case: Case, profile: str) -> Expectation:
    return held_or_computed(case, profile, holds, lambda: _outputs(case, scheme_under(case, profile)),
                            lambda: profile)


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    try:
        base = scheme_under(case, profile)
    except QrefError:
        return
    yield from distinct_alternatives(
        _ALTS, lambda ov: _outputs(case, base.replace(**ov)).outputs,
        lambda ov: all(getattr(base, k) == (tuple(v) if isinstance(v, list) else v) for k, v in ov.items()))
    other = {"nf4": "nf4_torchao", "nf4_torchao": "nf4"}.get(base.table.name)
    torchao = "nf4_torchao" in (base.table.name, case.scheme["table"]["name"]) or "torchao" in case.profiles
    if other is not None and torchao:  # the QLoRA NF4 values vs torchao's 4-digit literals (lut.md §1.2)
        try:
            alt = _outputs(case, base.replace(table=get_table(other))).outputs
        except Exception:
            return
        yield "decode_value", alt


def _block_flags(case: Case, name: str) -> np.ndarray | None:
    """Per element of output ``name`` (flat): does its block hold a NaN or an infinity?"""
    x = case.inputs.get("x")
    if x is None or case.scheme.get("scale") == "static" or not case.scheme.get("block_size"):
        return None
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(x.astype(np.float64))
    B = int(case.scheme["block_size"])
    ax = effective_axis(case)
    rows = bad.reshape(1, -1) if ax is None else np.moveaxis(bad, ax, -1).reshape(-1, bad.shape[ax])
    n = rows.shape[1]
    pad = (-n) % B
    blk = np.concatenate([rows, np.zeros((rows.shape[0], pad), bool)], axis=1).reshape(rows.shape[0], -1, B).any(-1)
    if name == "codes":
        per = np.repeat(blk, B, axis=1)[:, :n]
        if ax is None:
            return per.reshape(-1)
        shape = list(np.moveaxis(bad, ax, -1).shape)
        return np.moveaxis(per.reshape(shape), -1, ax).reshape(-1)
    if name == "scales":
        if ax is None:
            return blk.reshape(-1)
        shape = list(np.moveaxis(bad, ax, -1).shape)
        shape[-1] = blk.shape[1]
        return np.moveaxis(blk.reshape(shape), -1, ax).reshape(-1)
    return None


def _scale_subnormal(case: Case) -> np.ndarray | None:
    """Per dequantized element (flat): is its block scale a float32 subnormal?"""
    sc = case.inputs.get("scales")
    B = case.scheme.get("block_size")
    if sc is None or not B:
        return None
    s = np.abs(sc.astype(np.float32))
    sub = (s != 0) & (s < np.finfo(np.float32).tiny)
    if case.expected["y"].dtype.name == "bfloat16":  # a scale the output dtype holds exactly
        sub &= (s.view(np.uint32) & 0xFFFF) == 0
    codes = case.inputs["codes"]
    ax = effective_axis(case)
    if ax is None:
        return np.repeat(sub.reshape(-1), int(B))[: codes.size]
    rows = np.repeat(sub.reshape(codes.shape[0], -1), int(B), axis=1)[:, : codes.shape[1]]
    return rows.reshape(-1)


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    out = value_classes(case, name, exp, got)
    if name == "dq_offset":  # the mean of the block scales (lut.md §5.3)
        out[out == ""] = "reduction"
    if case.operation == "lookup_dequantize":
        out[flushed(case, name, idx, exp, got, _scale_subnormal(case)) & (out == "")] = "subnormal_flush"
    flags = _block_flags(case, name)
    if flags is not None and flags.size == case.expected[name].size:
        out[flags[idx] & (out == "")] = "nan_sign_or_code"  # a NaN or Inf in the block: its non-finite rule
    return out


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


def describe_input(case: Case, index: int, output: str = "codes") -> str:
    """The input behind element ``index`` of ``output``: an element, a block (scales), or the whole input
    (double-quantized outputs, dequantized values from double-quantized scales)."""
    from ...conformance.text import float_text, hex_words

    if case.operation == "lookup_quantize":
        x = case.inputs["x"]
        B = case.scheme.get("block_size")
        if output.startswith("dq_"):
            return f"{x.dtype.name} input of {x.size} elements in {-(-x.size // int(B))} blocks of {B}"
        if output == "scales":
            ax = effective_axis(case)
            if ax is None:
                return f"block {index} of the flattened {x.dtype.name} input (blocks of {B})"
            nb = case.expected["scales"].shape[-1]
            return f"block {index % nb} of row {index // nb} of the {x.dtype.name} input (blocks of {B})"
        v = x.reshape(-1)[index : index + 1]
        with np.errstate(invalid="ignore"):
            val = float_text(float(v.astype(np.float64)[0]))
        where = "" if not B else f" in a block of {B}"
        return f"{x.dtype.name} {hex_words(v)[0]} ({val}){where}"
    c = case.inputs["codes"].reshape(-1)[index : index + 1]
    if "dq_codes" in case.inputs:
        return f"code {hex_words(c)[0]} of {case.scheme['table']['name']} with double-quantized block scales"
    B = case.scheme.get("block_size")
    if B and "scales" in case.inputs:
        s = case.inputs["scales"].reshape(-1)[index // int(B) : index // int(B) + 1]
        with np.errstate(invalid="ignore"):
            return (f"code {hex_words(c)[0]} of {case.scheme['table']['name']} with block scale {hex_words(s)[0]} "
                    f"({float_text(float(s.astype(np.float64)[0]))})")
    return f"code {hex_words(c)[0]} of {case.scheme['table']['name']}"


describe_output = describe_plain_output


def reduce(case: Case, index: int, output: str) -> Case:
    """The minimal reproducer of a mismatch at ``index`` of ``output``: for codes and scales of an absmax
    quantize case, the block that holds it (blocks along an axis: its row); otherwise the whole case. The
    element's index in the reduced case is ``case._index``; ``case._slice`` = (start, stop) of the reduced input
    in the original's flattened input (blocking along an axis: rows), or None for the whole case."""
    B = case.scheme.get("block_size")
    if case.operation != "lookup_quantize" or output not in ("codes", "scales") or not B:
        c = copy.copy(case)
        object.__setattr__(c, "_index", index)
        object.__setattr__(c, "_slice", None)
        return c
    x = case.inputs["x"]
    ax = effective_axis(case)
    if ax is None:
        blk = index if output == "scales" else index // B
        start, stop = blk * B, min(x.size, (blk + 1) * B)
        inputs = {"x": x.reshape(-1)[start:stop]}
        j = 0 if output == "scales" else index - start
        cut = {"codes": (start, stop), "scales": (blk, blk + 1)}
    else:
        if ax != x.ndim - 1 or x.ndim != 2:
            c = copy.copy(case)
            object.__setattr__(c, "_index", index)
            object.__setattr__(c, "_slice", None)
            return c
        shape = case.expected[output].shape
        row = index // shape[-1]
        start, stop = row, row + 1
        inputs = {"x": x[row : row + 1]}
        j = index - row * shape[-1]
        cut = {"codes": (row, row + 1), "scales": (row, row + 1)}
    expected, unspec = {}, {}
    for name in ("codes", "scales"):
        if name not in case.expected:
            continue
        a, b = cut[name]
        e = case.expected[name]
        expected[name] = e.reshape(-1)[a:b] if ax is None else e[a:b]
        if name in case.unspecified:
            m = case.unspecified[name]
            unspec[name] = m.reshape(-1)[a:b] if ax is None else m[a:b]
    sch = dict(case.scheme, double_quant=None)
    c = Case(id=case.id, family=case.family, operation=case.operation, inputs=inputs, expected=expected,
             scheme=sch, profile=case.profile, params=case.params, unspecified=unspec,
             array_formats={k: v for k, v in case.array_formats.items() if k in expected}, profiles=case.profiles)
    object.__setattr__(c, "_index", j)
    object.__setattr__(c, "_slice", (start, stop))
    return c


__all__ = ["CLASS_SECTIONS", "FAMILY", "OPERATIONS", "SPEC_PROFILE", "alternatives", "describe_input",
           "describe_output", "dq_kind", "effective_axis", "expectation", "holds", "reduce", "relevant",
           "scheme_under", "spec_sections", "structural_class", "task_key"]
