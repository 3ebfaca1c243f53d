"""Recipes (block-scaled and scaled-FP8 matrix products, scaled casts) for the harness (spec: docs/spec/recipes.md).

Operations (qref/conformance/cases/recipes.py): ``block_matmul`` (``lhs_codes`` / ``lhs_scales`` / ``rhs_codes`` /
``rhs_scales`` [+ global scales] -> ``y``), ``qdq_matmul`` (``a``, ``b`` [+ scales] -> ``a_codes``, ``b_codes`` [,
``a_scale``, ``b_scale``], ``y``), ``scaled_qdq`` (``x``, ``scale`` -> ``codes``, ``y``) and ``delayed_scaling``
(``amax``, ``scale0``, ``history0`` -> ``scales``, ``histories``: every case holds for the spec under its own
params, recipes.md §4).

Comparison (recipes.md §2.1-2.3). Every case names its accumulation (``params["accumulation"]``); the cases of
one input set differ only there, so each accumulation is its own task. A bit-defined accumulation (exact,
sequential, pairwise, blocked) is compared bit for bit, except that +0 and -0 are equal and any NaN matches
any NaN (``zero_sign`` / ``nan_sign`` "either"). A ``float32_any`` case (``params["compare"] == "bound"``) is
not bit-defined: a result r conforms when y_lo <= r <= y_hi (the case's float32 interval of |r - S| <= bound);
a result whose exact value is NaN must be a NaN, one that is +-Inf that infinity (y_lo = y_hi = +-Inf), and a
zero interval accepts +0 and -0. Elements the case leaves unspecified are skipped. ``accept`` below is that
rule; ``qref.harness.classify.compare`` applies it where the bits differ.

Profiles. ``block_matmul`` cases hold for their scheme's block profile (``ocp`` for MX and single-level NVFP4,
``nvidia`` for two-level NVFP4): that is the spec default for the input set, so every block_matmul case holds under
"spec"; ``qdq_matmul`` cases hold under the spec; ``scaled_qdq`` cases hold under ``flax`` (eager: x / s, XLA:CPU
flush-to-zero), ``flax_jit`` (x * fl(1 / s), flush-to-zero; also ``keras``, whose cast is the same) or, with no
profile, the spec (IEEE, the case's division). A target with a recipe profile is compared with the cases of that
profile; an expectation under a profile a case does not hold for is recomputed with qref.recipes (scaled casts) or
is Unsupported.

Classes (a mismatching element; first that applies): a NaN / Inf rule broken (``nan_sign_or_code``,
``saturation_nan_inf``), a bit-defined case whose result lies within the any-order bound
(``accumulation_order``), qref's emulation of XLA's scaled_dot decomposition (operands rounded to bfloat16 through
float32: ``operand_rounding``; with XLA:CPU's flush-to-zero: ``subnormal_flush``), a qdq variant (x * fl(1 / s)
and amax * fl(1 / max), as XLA rewrites them under jit: ``scale_arithmetic``; flush-to-zero: ``subnormal_flush``),
else on a bound case ``outside_bound``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...core.decode import decode
from ...errors import QrefError
from ...recipes import Accumulation, MatmulResult, block_matmul, jax_scaled_dot, qdq_matmul
from ...recipes.scaling import DelayedScaling, scaled_dequantize, scaled_quantize
from ...schemes.base import QArray, scheme
from ..model import Unsupported
from . import Expectation, describe_plain_output, task_hash

FAMILY = "recipes"
SPEC_PROFILE = "spec"
OPERATIONS = ("block_matmul", "qdq_matmul", "scaled_qdq", "delayed_scaling")
MATMULS = ("block_matmul", "qdq_matmul")
#: recipe profiles of scaled casts -> (division, ftz)
CAST_PROFILES = {"flax": ("divide", True), "flax_jit": ("reciprocal", True), "keras": ("broadcast_reciprocal", True)}
#: recipe profiles whose scaled cast is another profile's (recipes.md §14.2): they hold that profile's cases
CAST_ALIASES = {"keras": "flax_jit"}

CLASS_SECTIONS = {
    "accumulation_order": "recipes.md §2.1", "outside_bound": "recipes.md §2.3",
    "operand_rounding": "recipes.md §7.1", "subnormal_flush": "recipes.md §3.2",
    "scale_arithmetic": "recipes.md §3.3", "nan_sign_or_code": "recipes.md §2.1",
    "saturation_nan_inf": "recipes.md §2.1",
}


# ---- profiles ---------------------------------------------------------------------------------------------
def holds(case: Case, profile: str) -> bool:
    if case.operation == "delayed_scaling":  # the spec's recurrence under the case's params; a recipe profile
        return profile == SPEC_PROFILE or profile in case.profiles or _delayed_rules_match(case, profile)
    if case.operation == "scaled_qdq":
        return (not case.profiles) if profile == SPEC_PROFILE else CAST_ALIASES.get(profile, profile) in case.profiles
    if case.operation == "block_matmul":  # the block profile of the case's scheme is the spec for its inputs
        return profile == SPEC_PROFILE or profile in case.profiles
    return profile == SPEC_PROFILE or profile in case.profiles


def _delayed_rules_match(case: Case, profile: str) -> bool:
    """A recipe profile (HybridRules) holds a delayed_scaling case whose params are its own scaling rules."""
    from ...profiles import profiles
    from ...profiles.recipe import HybridRules

    p = profiles("recipe").get(profile)
    r = getattr(p, "rules", None)
    if not isinstance(r, HybridRules):
        return False
    q = case.params
    return (case.format["name"] in (r.forward_format, r.grad_format) and q["amax_compute"] == r.amax_compute
            and int(q["margin"]) == r.margin and bool(q["ftz"]) == r.ftz and q["formula"] == "flax")


def relevant(case: Case, profile: str | None) -> bool:
    """block_matmul / qdq_matmul: every case (each accumulation one task); scaled_qdq: the cases of the target's
    profile (flax, flax_jit), else those of the spec (IEEE arithmetic)."""
    if case.family != FAMILY or case.operation not in OPERATIONS:
        return False
    if case.operation == "scaled_qdq":
        return holds(case, profile or SPEC_PROFILE)
    return holds(case, SPEC_PROFILE) or (profile is not None and holds(case, profile))


def task_key(case: Case) -> str:
    sch = case.scheme or {}
    return task_hash(case, {k: sch.get(k) for k in ("name", "element", "block_size", "profile")})


def _cast_mode(case: Case, profile: str) -> tuple[str, bool]:
    if profile == SPEC_PROFILE:
        return str(case.params["division"]), False
    if profile in CAST_PROFILES:
        return CAST_PROFILES[profile]
    raise Unsupported(f"recipe profile {profile!r} defines no scaled cast")


def _cast_outputs(case: Case, division: str, ftz: bool) -> dict[str, np.ndarray]:
    fmt = case.format["name"]
    with np.errstate(all="ignore"):
        codes = scaled_quantize(case.inputs["x"], case.inputs["scale"], fmt, compute_dtype="float32",
                                division=division, ftz=ftz)
        y = scaled_dequantize(codes, fmt, case.inputs["scale"], dtype="float32", ftz=ftz)
    return {"codes": np.asarray(codes).astype(case.expected["codes"].dtype), "y": np.asarray(y, np.float32)}


def expectation(case: Case, profile: str) -> Expectation:
    if holds(case, profile):
        return Expectation(dict(case.expected), dict(case.unspecified))
    if case.operation == "scaled_qdq":
        return Expectation(_cast_outputs(case, *_cast_mode(case, profile)))
    raise Unsupported(f"recipe profile {profile!r} defines no {case.operation} (its cases hold for the spec and "
                      f"the block profile of their scheme)")


# ---- models of a case (qref.recipes) ----------------------------------------------------------------------
def accumulation_of(case: Case, **over: Any) -> Accumulation:
    p = dict(case.params["accumulation"])
    p.update(over)
    return Accumulation(p["order"], p["dtype"], block=p.get("block"), products=p.get("products", "exact"),
                        ftz=bool(p.get("ftz", False)))


def operands(case: Case) -> tuple[QArray, QArray]:
    """The block_matmul case's operands as QArrays: lhs (M, K) along axis 1, rhs (K, N) along axis 0."""
    sch = scheme(case.scheme["name"], profile=case.profile)
    glob = [case.inputs.get(f"{s}_global_scale") for s in ("lhs", "rhs")]
    g = [None if v is None else np.float32(v.reshape(-1)[0]) for v in glob]
    qa = QArray(codes=case.inputs["lhs_codes"], scheme=sch, scales=case.inputs["lhs_scales"], global_scale=g[0],
                axis=1)
    qb = QArray(codes=case.inputs["rhs_codes"], scheme=sch, scales=case.inputs["rhs_scales"], global_scale=g[1],
                axis=0)
    return qa, qb


def model(case: Case, variant: str = "case") -> MatmulResult | None:
    """qref's result for the case's inputs: "case" (its own accumulation), "any" (any order: the bound of every
    float32 accumulation), "jax" / "jax_ftz" (jax.lax.scaled_dot on XLA:CPU, recipes.md §7.1, without / with
    its flush-to-zero), "reciprocal" / "ftz" (qdq_matmul with x * fl(1 / s), with flush-to-zero); None where the
    variant does not apply."""
    cache = case.__dict__.setdefault("_models", {}) if hasattr(case, "__dict__") else {}
    if variant in cache:
        return cache[variant]
    out: MatmulResult | None = None
    try:
        with np.errstate(all="ignore"):
            out = _model(case, variant)
    except QrefError:
        out = None
    cache[variant] = out
    return out


def _model(case: Case, variant: str) -> MatmulResult | None:
    any_acc = Accumulation("any", "float32")
    if case.operation == "block_matmul":
        qa, qb = operands(case)
        if variant in ("jax", "jax_ftz"):
            if qa.global_scale is not None:
                return None
            return jax_scaled_dot(qa, qb, ftz=variant == "jax_ftz")
        if variant in ("case", "any"):
            acc = accumulation_of(case) if variant == "case" else any_acc
            return block_matmul(qa, qb, accumulation=acc, out_dtype="float32")
        return None
    if case.operation != "qdq_matmul":
        return None
    p = case.params
    kw: dict[str, Any] = {"a_format": p["a_format"], "b_format": p["b_format"], "a_scale": case.inputs.get("a_scale"),
                          "b_scale": case.inputs.get("b_scale"), "formula": p["formula"],
                          "compute_dtype": p["compute_dtype"], "division": p["division"], "out_dtype": "float32",
                          "ftz": bool(p["ftz"])}
    if variant == "case":
        kw["accumulation"] = accumulation_of(case)
    elif variant in ("any", "reciprocal", "ftz"):
        kw["accumulation"] = any_acc
        if variant == "reciprocal":  # x * fl(1 / s) in the casts, and amax * fl(1 / max) in computed scales
            kw["division"] = "reciprocal"
            for side in ("a", "b"):
                if kw[f"{side}_scale"] is None:
                    kw[f"{side}_scale"] = _reciprocal_scale(case.inputs[side], p[f"{side}_format"])
        if variant == "ftz":
            kw["ftz"] = True
    else:
        return None
    return qdq_matmul(case.inputs["a"], case.inputs["b"], **kw)


def _reciprocal_scale(x: np.ndarray, fmt: str) -> np.ndarray:
    """amax_over_max per tensor with the division by the constant max rewritten as fl32(amax * fl32(1 / max))
    (XLA's rewrite under jit); 1 where amax is 0 or not finite."""
    from ...formats import get_format

    am = float(np.max(np.abs(x.astype(np.float64)))) if x.size else 0.0
    f = get_format(fmt)
    inv = np.float32(1.0) / np.float32(f.max_value)
    ok = np.isfinite(am) and am > 0
    return np.asarray([np.float32(np.float32(am) * inv) if ok else np.float32(1.0)], dtype=np.float32)


def _within(r: MatmulResult | None, idx: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Is each got value (float32 at flat positions idx) within the model's contract?"""
    if r is None:
        return np.zeros(idx.shape, dtype=bool)
    full = np.asarray(r.value, dtype=np.float32).copy().reshape(-1)
    full[idx] = got
    return np.asarray(r.within(full.reshape(r.value.shape)), dtype=bool).reshape(-1)[idx]


# ---- comparison ---------------------------------------------------------------------------------------------
def _floats(case: Case, name: str, a: np.ndarray) -> np.ndarray:
    dt = case.expected[name].dtype
    with np.errstate(invalid="ignore"):
        return np.asarray(a).reshape(-1).view(dt).astype(np.float64)


def _nan_codes(case: Case, name: str, a: np.ndarray) -> np.ndarray:
    fmt = case.array_formats.get(name)
    if fmt is None:
        return np.zeros(np.asarray(a).size, dtype=bool)
    return np.isnan(decode(np.asarray(a).reshape(-1), fmt, dtype=np.float64))


def accept(case: Case, exp: Expectation, name: str, got: np.ndarray) -> np.ndarray | None:
    """Elements of output ``name`` that conform although their bits differ from ``exp`` (module docstring):
    the interval of a float32_any result; +-0 and NaN of either sign for the others. None: bits decide."""
    if case.operation in MATMULS and name == "y":
        g = _floats(case, name, got)
        e = _floats(case, name, exp.outputs[name])
        with np.errstate(invalid="ignore"):
            if "y_lo" in exp.outputs and "y_hi" in exp.outputs:
                lo, hi = _floats(case, name, exp.outputs["y_lo"]), _floats(case, name, exp.outputs["y_hi"])
                return (np.isnan(e) & np.isnan(g)) | (~np.isnan(e) & (lo <= g) & (g <= hi))
            return (np.isnan(e) & np.isnan(g)) | ((e == 0) & (g == 0))
    if name.endswith("codes") and case.params.get("nan_sign") == "either":
        return _nan_codes(case, name, exp.outputs[name]) & _nan_codes(case, name, got)
    if case.operation == "scaled_qdq" and name == "y":
        return np.isnan(_floats(case, name, exp.outputs[name])) & np.isnan(_floats(case, name, got))
    return None


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    out = np.full(idx.shape, "", dtype=object)
    if case.operation not in MATMULS or name != "y":
        return out
    dt = case.expected[name].dtype
    with np.errstate(invalid="ignore"):
        ev, gv = exp.view(dt).astype(np.float64), got.view(dt).astype(np.float64)
    g32 = got.view(dt)
    bound = case.params.get("compare") == "bound"
    special = np.isnan(ev) | np.isinf(ev)
    out[np.isnan(ev) & ~np.isnan(gv)] = "nan_sign_or_code"  # a NaN result (NaN operand or scale, 0 x Inf)
    out[np.isinf(ev) & (gv != ev) & (out == "")] = "saturation_nan_inf"
    todo = (out == "") & ~special
    if todo.any() and not bound:  # a bit-defined case: within the bound of any float32 order?
        hit = _within(model(case, "any"), idx, g32) & todo
        out[hit] = "accumulation_order"
        todo &= ~hit
    if case.operation == "block_matmul":
        for variant, cls in (("jax", "operand_rounding"), ("jax_ftz", "subnormal_flush")):
            if todo.any():
                hit = _within(model(case, variant), idx, g32) & todo
                out[hit] = cls
                todo &= ~hit
    else:
        for variant, cls in (("reciprocal", "scale_arithmetic"), ("ftz", "subnormal_flush")):
            if todo.any():
                hit = _within(model(case, variant), idx, g32) & todo
                out[hit] = cls
                todo &= ~hit
    if bound:
        out[todo] = "outside_bound"
    return out


def _delayed_outputs(case: Case, ftz: bool) -> dict[str, np.ndarray]:
    p = case.params
    ds = DelayedScaling(fmt=case.format["name"], history_length=int(p["history_length"]),
                        amax_compute=str(p["amax_compute"]), margin=int(p["margin"]), ftz=ftz)
    st = ds.state(case.inputs["scale0"], case.inputs["history0"])
    scales, hists = [], []
    with np.errstate(all="ignore"):
        for a in case.inputs["amax"].reshape(-1):
            s, st = ds.update(st, np.asarray([a], dtype=np.float32))
            scales.append(s[0])
            hists.append(st.history.copy())
    return {"scales": np.asarray(scales, np.float32), "histories": np.stack(hists).astype(np.float32)}


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Scaled casts and the codes of qdq_matmul: the other division and flush-to-zero, bit for bit; delayed
    scaling: the other flush-to-zero setting."""
    if case.operation == "delayed_scaling":
        yield "subnormal_flush", _delayed_outputs(case, not bool(case.params["ftz"]))
    elif case.operation == "scaled_qdq":
        try:
            division, ftz = _cast_mode(case, profile)
        except Unsupported:
            return
        other = "reciprocal" if division == "divide" else "divide"
        yield "scale_arithmetic", _cast_outputs(case, other, ftz)
        yield "subnormal_flush", _cast_outputs(case, division, not ftz)
        yield "scale_arithmetic+subnormal_flush", _cast_outputs(case, other, not ftz)
    elif case.operation == "qdq_matmul":
        for variant, cls in (("reciprocal", "scale_arithmetic"), ("ftz", "subnormal_flush")):
            r = model(case, variant)
            if r is not None:
                yield cls, {k: np.asarray(r.meta[k]).astype(case.expected[k].dtype).reshape(case.expected[k].shape)
                            for k in ("a_codes", "b_codes", "a_scale", "b_scale") if k in case.expected}


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


# ---- reports ------------------------------------------------------------------------------------------------
def describe_input(case: Case, index: int, output: str = "y") -> str:
    from ...conformance.text import float_text, hex_words

    if case.operation == "delayed_scaling":
        am = case.inputs["amax"].reshape(-1)
        L = int(case.params["history_length"])
        t = index if output == "scales" else index // L
        return (f"step {t} of {am.size} (amax {float_text(float(am[t]))}; history length {L}, "
                f"{case.params['amax_compute']}, {'flush-to-zero' if case.params['ftz'] else 'IEEE'})")
    if case.operation == "scaled_qdq":
        x = case.inputs["x"].reshape(-1)[index : index + 1]
        with np.errstate(invalid="ignore"):
            return (f"float32 {hex_words(x)[0]} ({float_text(float(x.astype(np.float64)[0]))}), scale "
                    f"{float_text(float(case.inputs['scale'].reshape(-1)[0]))}")
    shape = case.expected[output].shape
    pos = np.unravel_index(index, shape)
    if output != "y":
        return f"element {tuple(int(p) for p in pos)} of {output[0]}"
    m, n = (int(p) for p in pos)
    if case.operation == "block_matmul":
        K = case.inputs["lhs_codes"].shape[1]
        return (f"row {m} of lhs and column {n} of rhs ({case.scheme['name']}, K = {K}, blocks of "
                f"{case.scheme['block_size']}; accumulation {case.params['accumulation']['order']})")
    return f"row {m} of a and column {n} of b (K = {case.inputs['a'].shape[1]})"


describe_output = describe_plain_output


def reduce(case: Case, index: int, output: str) -> Case:
    """The minimal reproducer of a mismatch: block_matmul y[m, n] -> lhs row m and rhs column n; scaled_qdq ->
    the one element; qdq_matmul (scales computed over the whole tensor) -> the whole case."""
    import copy

    c = copy.copy(case)
    object.__setattr__(c, "_index", index)
    object.__setattr__(c, "_slice", None)
    c.__dict__.pop("_models", None)
    if case.operation == "block_matmul" and output == "y":
        m, n = divmod(index, case.expected["y"].shape[1])
        ins = {k: (v[m : m + 1] if k.startswith("lhs") and v.ndim == 2 else
                   v[:, n : n + 1] if k.startswith("rhs") and v.ndim == 2 else v) for k, v in case.inputs.items()}
        c = Case(id=case.id, family=case.family, operation=case.operation, inputs=ins,
                 expected={k: v[m : m + 1, n : n + 1] for k, v in case.expected.items()},
                 unspecified={k: v[m : m + 1, n : n + 1] for k, v in case.unspecified.items()},
                 scheme=case.scheme, profile=case.profile, params=case.params,
                 array_formats=dict(case.array_formats), profiles=case.profiles, spec=case.spec)
        object.__setattr__(c, "_index", 0)
        object.__setattr__(c, "_slice", (m, n))
    elif case.operation == "scaled_qdq":
        c = Case(id=case.id, family=case.family, operation=case.operation,
                 inputs={"x": case.inputs["x"].reshape(-1)[index : index + 1], "scale": case.inputs["scale"]},
                 expected={k: v.reshape(-1)[index : index + 1] for k, v in case.expected.items()},
                 format=case.format, policy=case.policy, profile=case.profile, params=case.params,
                 array_formats=dict(case.array_formats), profiles=case.profiles, spec=case.spec)
        object.__setattr__(c, "_index", 0)
        object.__setattr__(c, "_slice", (index, index + 1))
    return c


__all__ = ["CAST_PROFILES", "CLASS_SECTIONS", "FAMILY", "MATMULS", "OPERATIONS", "SPEC_PROFILE", "accept",
           "accumulation_of", "alternatives", "describe_input", "describe_output", "expectation", "holds", "model",
           "operands", "reduce", "relevant", "spec_sections", "structural_class", "task_key"]
