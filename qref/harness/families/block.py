"""Block-scaled quantization (MX, NVFP4, MLX affine) for the harness (spec: docs/spec/block.md).

Cases: ``block_quantize`` (input ``x`` [and ``global_scale``] -> ``codes``, ``scales`` [, ``biases``]) and
``block_dequantize`` (``codes``, ``scales`` [, ``biases``, ``global_scale``] -> ``y``), ``scheme`` =
``BlockScheme.to_spec()``. The spec default depends on the scheme: ``ocp`` for MX, ``nvidia`` for NVFP4,
``mlx`` for MLX affine groups (block.md §8, ``qref.schemes.block.DEFAULT_PROFILE``); "spec" below means that
profile. Expectations come from the suite case that holds under the profile (the builder emits one per group of
agreeing profiles for every input set), else from qref's scheme rebuilt under the profile.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...schemes.base import QArray, scheme
from ...schemes.block import DEFAULT_PROFILE, BlockScheme
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

FAMILY = "block"
SPEC_PROFILE = "spec"
OPERATIONS = ("block_quantize", "block_dequantize")

CLASS_SECTIONS = {
    "scale_rule": "block.md §4.2", "tie_rule": "block.md §5", "truncation": "block.md §5",
    "nan_sign_or_code": "block.md §10", "saturation_nan_inf": "block.md §4.4", "subnormal_flush": "block.md §5",
    "zero_block": "block.md §4.3", "scale_arithmetic": "block.md §6", "compute_precision": "block.md §6",
}

# BlockScheme field changes tried for classification: (class, overrides)
_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    *(("scale_rule", {"scale_rule": r}) for r in ("floor", "ceil", "even", "rceil", "floor_log2_float32",
                                                    "floor_log2_in_dtype", "rceil_log2_float32")),
    ("tie_rule", {"rounding": "nearest_away"}), ("tie_rule", {"rounding": "nearest_toward_zero"}),
    ("tie_rule", {"rounding": "nearest_even"}), ("truncation", {"rounding": "toward_zero"}),
    ("tie_rule", {"out_of_range": "lut_argmin"}), ("tie_rule", {"out_of_range": "encode"}),
    *(("zero_block", {"zero_block": z}) for z in ("min_scale", "unit_scale", "min_normal_amax")),
    *(("saturation_nan_inf", {"scale_range": r}) for r in ("clamp", "clamp_nan", "wrap")),
    *(("nan_sign_or_code", {"nonfinite_block": r}) for r in ("nan_scale", "nan255_inf_e128", "nan255_inf254",
                                                               "zero_divisor", "nan_wraps_inf_divisor",
                                                               "exponent_bits_wrap")),
    ("scale_arithmetic", {"scale_arith": "divide"}), ("scale_arithmetic", {"scale_arith": "reciprocal"}),
    ("scale_arithmetic", {"quotient_arith": "divide"}), ("scale_arithmetic", {"quotient_arith": "reciprocal"}),
    ("compute_precision", {"compute_dtype": "float32"}), ("compute_precision", {"compute_dtype": "exact"}),
    ("subnormal_flush", {"flush_subnormals": True}), ("subnormal_flush", {"flush_subnormal_blocks": True}),
    ("compute_precision", {"element_exponent": "floor_log2_in_dtype"}),
    ("compute_precision", {"round_arith": "in_dtype"}), ("compute_precision", {"divisor_out_of_range": "nan_block"}),
    ("nan_sign_or_code", {"amax_nan": "skip"}), ("nan_sign_or_code", {"amax_nan": "propagate"}),
)


def default_profile(case: Case) -> str:
    sch = case.scheme or {}
    if sch.get("name") == "nvfp4":
        return DEFAULT_PROFILE["nvfp4"]
    return DEFAULT_PROFILE.get(sch.get("kind", "mx"), "ocp")


def _resolve(case: Case, profile: str) -> str:
    return default_profile(case) if profile == SPEC_PROFILE else profile


def relevant(case: Case, profile: str | None) -> bool:
    return holds_for_spec_or(case, profile, FAMILY, OPERATIONS, SPEC_PROFILE, holds)


def holds(case: Case, profile: str) -> bool:
    return _resolve(case, profile) in case.profiles


def task_key(case: Case) -> str:
    sch = dict(case.scheme or {})
    geometry = {k: sch.get(k) for k in ("name", "element", "scale_format", "block_size", "kind")}
    return task_hash(case, geometry)


def scheme_under(case: Case, profile: str, **overrides: Any) -> BlockScheme:
    """The case's scheme rebuilt under ``profile`` (block size, bits kept), with field overrides."""
    spec = dict(case.scheme)
    kw: dict[str, Any] = {}
    if spec.get("kind") == "affine":
        kw = {"bits": int(str(spec["element"]).replace("uint", "")), "group_size": spec["block_size"]}
    else:
        kw = {"block_size": spec["block_size"]}
    s = scheme(spec["name"], profile=_resolve(case, profile), **kw, **overrides)
    assert isinstance(s, BlockScheme)
    return s


def _outputs(case: Case, sch: BlockScheme) -> Expectation:
    axis = int(case.params.get("axis", -1))
    g = case.inputs.get("global_scale")
    if case.operation == "block_quantize":
        with np.errstate(all="ignore"):
            q = sch.quantize(case.inputs["x"], axis=axis, global_scale=None if g is None else g.reshape(()))
        out: dict[str, np.ndarray] = {}
        for name in case.expected:
            v = getattr(q, name, None)
            if v is None:
                continue
            arr = np.asarray(v)
            exp = case.expected[name]
            out[name] = arr.view(exp.dtype) if arr.dtype.itemsize == exp.dtype.itemsize and arr.dtype != exp.dtype \
                and arr.dtype.kind in "iu" else arr.astype(exp.dtype) if arr.dtype != exp.dtype else arr
        unspec = {}
        if "codes" in case.expected:
            unspec["codes"] = np.asarray(q.unspecified, dtype=bool)
        if "scales" in case.expected and q.meta.get("scales_unspecified") is not None:
            unspec["scales"] = np.asarray(q.meta["scales_unspecified"], dtype=bool)
        return Expectation(out, unspec)
    qa = QArray(codes=case.inputs["codes"], scheme=sch, scales=case.inputs["scales"],
                biases=case.inputs.get("biases"), global_scale=g, axis=axis)
    (name,) = case.expected
    with np.errstate(all="ignore"):
        y = sch.dequantize(qa, dtype=case.expected[name].dtype)
    return Expectation({name: np.asarray(y)})


def expectation(case: Case, profile: str) -> Expectation:
    return held_or_computed(case, profile, holds, lambda: _outputs(case, scheme_under(case, profile)),
                            lambda: _resolve(case, profile))


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    yield from distinct_alternatives(_ALTS, lambda ov: _outputs(case, scheme_under(case, profile, **ov)).outputs)


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    out = value_classes(case, name, exp, got)  # values (dequantize, affine scales): NaN bits or NaN vs number
    if case.operation == "block_dequantize":  # FTZ of results, DAZ of a float32-subnormal scale 2^-127
        sub = None
        sc = case.inputs.get("scales")
        if sc is not None and case.array_formats.get("scales") == "float8_e8m0fnu":
            per = np.moveaxis(sc == 0, int(case.params.get("axis", -1)), -1)
            k = int(case.scheme["block_size"])
            n = case.inputs["codes"].shape[int(case.params.get("axis", -1))]
            sub = np.moveaxis(np.repeat(per, k, axis=-1)[..., :n], -1, int(case.params.get("axis", -1)))
            sub = sub.reshape(-1) if sub.size == case.expected[name].size else None
        out[flushed(case, name, idx, exp, got, sub) & (out == "")] = "subnormal_flush"
    if "x" in case.inputs and case.operation == "block_quantize":
        x = case.inputs["x"]
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(x.astype(np.float64))
        axis = int(case.params.get("axis", -1)) % x.ndim
        k = int(case.scheme["block_size"])
        xm = np.moveaxis(bad, axis, -1)
        n = xm.shape[-1]
        pad = (-n) % k
        xm = np.concatenate([xm, np.zeros((*xm.shape[:-1], pad), bool)], axis=-1) if pad else xm
        blk = xm.reshape((*xm.shape[:-1], -1, k)).any(axis=-1)
        if name == "scales":
            flags = np.moveaxis(blk, -1, axis).reshape(-1) if blk.shape == case.expected[name].shape else \
                blk.reshape(-1)
        else:
            flags = np.moveaxis(np.repeat(blk, k, axis=-1)[..., :n], -1, axis).reshape(-1)
        if flags.size == case.expected[name].size:
            out[flags[idx] & (out == "")] = "nan_sign_or_code"  # a NaN or Inf in the block: its non-finite rule
    return out


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


def describe_input(case: Case, index: int, output: str = "codes") -> str:
    from ...conformance.text import float_text, hex_words

    if case.operation == "block_quantize" and output in ("scales", "biases"):
        x = case.inputs["x"]
        pos = [int(p) for p in np.unravel_index(index, case.expected[output].shape)]
        axis = int(case.params.get("axis", -1)) % x.ndim
        k = case.scheme["block_size"]
        if x.ndim == 2:
            where = f"block {pos[1]} of row {pos[0]}" if axis == 1 else f"block {pos[0]} of column {pos[1]}"
        else:
            where = f"block {pos[axis]} at {tuple(p for d, p in enumerate(pos) if d != axis)}"
        return f"{where} of the {x.dtype.name} input (blocks of {k} along axis {axis})"
    if case.operation == "block_quantize":
        x = case.inputs["x"]
        v = x.reshape(-1)[index : index + 1]
        with np.errstate(invalid="ignore"):
            val = float_text(float(v.astype(np.float64)[0]))
        return f"{x.dtype.name} {hex_words(v)[0]} ({val}) in a block of {case.scheme['block_size']}"
    c = case.inputs["codes"].reshape(-1)[index : index + 1]
    return f"code {hex_words(c)[0]} of {case.scheme['element']}"


describe_output = describe_plain_output


def reduce(case: Case, index: int, output: str) -> Case:
    """The minimal reproducer of a mismatch at ``index`` of ``output``: the case restricted to the row (the
    blocks along the last axis) that holds it; the element's index in the reduced case is ``case._index``."""
    shape = case.expected[output].shape
    row = int(np.unravel_index(index, shape)[0]) if len(shape) > 1 else 0
    n_rows = 1
    x = case.inputs.get("x", case.inputs.get("codes"))
    if x is not None and x.ndim > 1:  # whole rows up to a multiple of 32 elements (MLX's CPU NVFP4 kernels)
        per = int(np.prod(x.shape[1:]))
        while (n_rows * per) % 32 and row + n_rows < x.shape[0]:
            n_rows += 1

    def cut(a: np.ndarray) -> np.ndarray:
        return a[row : row + n_rows] if a.ndim > 1 and a.shape[0] == shape[0] else a

    inputs = {n: cut(a) for n, a in case.inputs.items()}
    expected = {n: cut(a) for n, a in case.expected.items()}
    unspec = {n: cut(a) for n, a in case.unspecified.items()}
    c = Case(id=case.id, family=case.family, operation=case.operation, inputs=inputs, expected=expected,
             scheme=case.scheme, profile=case.profile, params=case.params, unspecified=unspec,
             array_formats=dict(case.array_formats), profiles=case.profiles)
    object.__setattr__(c, "_index", index - row * int(np.prod(shape[1:])) if len(shape) > 1 else index)
    object.__setattr__(c, "_slice", (row, row + n_rows) if x is not None and x.ndim > 1 else None)
    return c


__all__ = ["CLASS_SECTIONS", "FAMILY", "OPERATIONS", "SPEC_PROFILE", "alternatives", "default_profile",
           "describe_input", "describe_output", "expectation", "holds", "reduce", "relevant", "scheme_under",
           "spec_sections", "structural_class", "task_key"]
