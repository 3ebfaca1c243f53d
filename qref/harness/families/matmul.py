"""Quantized integer matrix products for the harness (spec: docs/spec/matmul.md).

Cases: ``matmul_integer`` (int32 accumulator out) and ``qlinear_matmul`` (requantized codes out); see
qref/conformance/cases/matmul.py. The spec default is the ``exact`` profile (matmul.md §5.2 in real arithmetic,
int32 overflow unspecified). qref's prediction of profile P is the case's operands run through
qref.recipes.qmatmul with P's rules (requantization method "none" for matmul_integer). Mismatch classes are named
by the rule change that reproduces the backend's outputs: the accumulator's overflow and pair sums (§3), the
requantization method, its multiplier arithmetic, tie rule and zero-point stage (§5), how unsigned storage is
extended (§3.3), how the result is narrowed (§5) and where a float bias enters (§4.1).

The com.microsoft operations: ``matmul_integer_to_float`` and ``dynamic_quantize_matmul`` (float32 out, §8, §9)
and ``qgemm`` (§11) are compared bit for bit like the others (float outputs as their bits); ``matmul_nbits`` /
``matmul_nbits_int8`` (§10) and ``matmul_bnb4`` (§12) are not bit-defined: ``accept`` takes a result within the
case's [y_lo, y_hi] (the rigorous bound of §10.3), and no alternative is tried.

``float_matmul`` (float32 A @ B, mma.md §12.2): the spec default conforms within the case's [y_lo, y_hi] (the bound
of mma.md §10.4 around the exact sum); a target whose profile names a fitted CPU GEMM profile
(qref.mma.cpu_profiles, e.g. ``onnxruntime-1.32-mlas-sgemm-1-thread``) is compared with that profile's records bit for
bit, and a result within the bound but not the record's bits is *drift* (``drift_note``): the library's kernel
order changed (another version, thread count or CPU kernel), not a failure. Mismatch class: accumulation_order
(another fitted record or a simple order reproduces it), else outside_bound / other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...conformance.case import Case
from ...errors import QrefError
from ...recipes.qmatmul import IntOperand, QuantizedMatmul, matmul_rules, quantized_matmul
from . import Expectation, describe_value, holds_for_spec_or, listed_for, task_hash

FAMILY = "matmul"
SPEC_PROFILE = "exact"
VW_OPS = ("int8_vectorwise_matmul",)  # matmul.md §13
WO_OPS = ("weight_only_matmul", "int8_weight_only_matmul")  # matmul.md §14
HYBRID_OPS = ("hybrid_matmul",)  # matmul.md §17
OPERATIONS = ("matmul_integer", "qlinear_matmul", "matmul_integer_to_float", "dynamic_quantize_matmul", "matmul_nbits",
              "matmul_nbits_int8", "qgemm", "matmul_bnb4", *VW_OPS, *WO_OPS, *HYBRID_OPS)
HYBRID_SPEC = "hybrid_spec"  # the spec default "exact" read for the hybrid operation (matmul.md §17.4)
FLOAT_OPS = ("matmul_integer_to_float", "dynamic_quantize_matmul")
NBITS_OPS = ("matmul_nbits", "matmul_nbits_int8", "matmul_bnb4")
FLOAT_MATMUL = "float_matmul"  # mma.md §12.2
OPERATIONS = (*OPERATIONS, FLOAT_MATMUL)

CLASS_SECTIONS = {
    "pair_saturation": "matmul.md §3.2", "accumulator_overflow": "matmul.md §3.1",
    "requantize_method": "matmul.md §5", "multiplier_arithmetic": "matmul.md §5.2",
    "tie_rule": "matmul.md §5.2", "zero_point_order": "matmul.md §5.2", "compute_precision": "matmul.md §5.2",
    "unsigned_extension": "matmul.md §3.3", "narrowing": "matmul.md §5",
    "bias_stage": "matmul.md §4.1", "product_rule": "matmul.md §3.4", "activation_quantization": "matmul.md §9",
    "accumulation_order": "mma.md §12.2", "outside_bound": "mma.md §10.4",
}

# rule changes tried in order: (class, overrides)
_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("pair_saturation", {"pair_sum": "saturating_int16"}), ("pair_saturation", {"pair_sum": None}),
    *(("accumulator_overflow", {"overflow": o}) for o in ("wrap", "saturate", "exact")),
    ("zero_point_order", {"zero_point": "before_rounding"}), ("zero_point_order", {"zero_point": "after_rounding"}),
    *(("tie_rule", {"rounding": r}) for r in ("nearest_away", "nearest_up", "nearest_even")),
    ("compute_precision", {"compute": "float32"}), ("compute_precision", {"compute": "float64"}),
    ("compute_precision", {"compute": "exact", "zero_point": "after_rounding"}),
    ("multiplier_arithmetic", {"multiplier_dtype": "float64"}),
    ("multiplier_arithmetic", {"multiplier_dtype": "float32"}),
    ("multiplier_arithmetic", {"association": "a_then_b_over_y"}),
    ("multiplier_arithmetic", {"association": "ab_times_reciprocal_y"}),
    ("multiplier_arithmetic", {"association": "ab_then_y", "scale_form": "as_given"}),
    ("multiplier_arithmetic", {"association": "sequential_reciprocal_y", "scale_form": "reciprocal_round_trip"}),
    ("requantize_method", {"method": "fixed_point", "multiplier_dtype": "float64"}),
    ("requantize_method", {"method": "fixed_point", "multiplier_dtype": "float64", "fixed_point": "single_rounding"}),
    *(("bias_stage", {"float_bias": b}) for b in ("float_accumulator", "int32_accumulator", "after_operand_scales")),
    ("requantize_method", {"method": "float_multiply"}),
    ("requantize_method", {"method": "dequantize_compute_quantize"}),
    ("unsigned_extension", {"unsigned_extension": "sign"}), ("unsigned_extension", {"unsigned_extension": "zero"}),
    ("narrowing", {"narrowing": "wrap"}), ("narrowing", {"narrowing": "clamp"}),
    ("tie_rule", {"rounding": "toward_zero"}),
)
# float outputs (matmul.md §8): the multiplier and product arithmetic, the int16 pairs
_FLOAT_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("pair_saturation", {"pair_sum": "saturating_int16"}), ("pair_saturation", {"pair_sum": None}),
    ("compute_precision", {"compute": "float64", "multiplier_dtype": "float32"}),
    ("compute_precision", {"compute": "float32", "multiplier_dtype": "float32"}),
    ("compute_precision", {"compute": "exact", "multiplier_dtype": "exact"}),
    ("multiplier_arithmetic", {"multiplier_dtype": "float64", "compute": "float64"}),
    ("multiplier_arithmetic", {"association": "sequential_reciprocal_y"}),
    ("multiplier_arithmetic", {"association": "ab_then_y", "scale_form": "as_given"}),
    ("bias_stage", {"float_bias": "fused_multiply_add"}), ("bias_stage", {"float_bias": "exact"}),
    # the dynamic quantization of A (matmul.md §9, §15): code range, zero-point stage, qparams arithmetic
    ("activation_quantization", {"code_max": 255}), ("activation_quantization", {"code_max": 127}),
    ("activation_quantization", {"zero_point_add": "after_rounding"}),
    ("activation_quantization", {"zero_point_add": "fused", "division": "reciprocal"}),
    ("activation_quantization", {"zero_point_add": "before_rounding"}),
    ("activation_quantization", {"division": "divide", "zero_point_add": "after_rounding"}),
    ("activation_quantization", {"kernel_scale": "scale"}),
    ("activation_quantization", {"scale_arithmetic": "float64", "zero_point_rule": "smaller_error",
                              "degenerate_scale": 0.1, "min_scale": float.fromhex("0x1.ffb48p-15")}),
    ("activation_quantization", {"scale_arithmetic": "float32", "zero_point_rule": "from_min", "degenerate_scale": 1.0,
                              "min_scale": 0.0, "kernel_scale": "scale"}),
)


def relevant(case: Case, profile: str | None) -> bool:
    return holds_for_spec_or(case, profile, FAMILY, OPERATIONS, SPEC_PROFILE, holds)


def holds(case: Case, profile: str) -> bool:
    return listed_for(case, profile)


def task_key(case: Case) -> str:
    p = case.params
    return task_hash(case, {k: p.get(k) for k in ("a_storage", "b_storage", "output")})


def _float_outputs(case: Case, profile: str, **overrides: Any) -> Expectation:
    """matmul.md §8, §9: the float output of ``profile``'s rules (method float_output) with ``overrides``."""
    from ...recipes.qmatmul import dynamic_quantize, matmul_integer_to_float

    p = case.params
    rules = matmul_rules(profile).replace(method="float_output", bias="output")
    if rules.accumulation.pair_sum and (p["a_storage"], p["b_storage"]) != ("uint8", "int8"):
        rules = rules.replace(pair_sum=None)
    if overrides:
        rules = rules.replace(**overrides)
    ins = case.inputs
    a, a_s, za, a_st = ins["a"], ins.get("a_scale"), ins.get("a_zero_point", 0), p["a_storage"]
    form = None
    if case.operation == "dynamic_quantize_matmul":  # the profile's dynamic quantization (matmul.md §9, §15)
        q = dynamic_quantize(a, rules.dynamic)
        a, a_s, za, a_st = q.codes, q.kernel_scale, q.zero_point, "uint8"
        form = "as_given" if rules.dynamic.kernel_scale != "scale" else None
    with np.errstate(all="ignore"):
        r = matmul_integer_to_float(a, ins["b"], a_scale=a_s, b_scale=ins["b_scale"], a_zero_point=za,
                                    b_zero_point=ins["b_zero_point"], bias=ins.get("bias"), a_storage=a_st,
                                    b_storage=p["b_storage"], rules=rules, a_scale_form=form)
    return Expectation({"y": r.values.astype(case.expected["y"].dtype)}, {"y": np.asarray(r.unspecified, bool)})


def _qgemm_outputs(case: Case, profile: str, **overrides: Any) -> Expectation:
    """matmul.md §11: QGemm under ``profile``'s rules with ``overrides``."""
    from ...recipes.qmatmul import qgemm

    p = case.params
    rules = matmul_rules(profile)
    if rules.accumulation.pair_sum and (p["a_storage"], p["b_storage"]) != ("uint8", "int8"):
        rules = rules.replace(pair_sum=None)
    if p["output"] == "float32":
        rules = rules.replace(method="float_output")
    if overrides:
        rules = rules.replace(**overrides)
    ins = case.inputs
    with np.errstate(all="ignore"):
        r = qgemm(ins["a"], ins["b"], a_scale=ins["a_scale"], b_scale=ins["b_scale"], a_zero_point=ins["a_zero_point"],
                  b_zero_point=ins["b_zero_point"], c=ins.get("c"), y_scale=ins.get("y_scale"),
                  y_zero_point=ins.get("y_zero_point", 0), alpha=float(p["alpha"]), a_storage=p["a_storage"],
                  b_storage=p["b_storage"], output=p["output"], rules=rules)
    return Expectation({"y": np.asarray(r.values).astype(case.expected["y"].dtype)},
                       {"y": np.asarray(r.unspecified, dtype=bool)})


def _hybrid_outputs(case: Case, profile: str, **overrides: Any) -> Expectation:
    """matmul.md §17: the hybrid product under ``profile`` (``exact``: hybrid_spec) with overrides of its
    activation quantization's fields."""
    import dataclasses

    from ...profiles import resolve_profile
    from ...profiles.matmul import HybridMatmulRules
    from ...recipes.qmatmul import hybrid_matmul

    rules = resolve_profile(HYBRID_SPEC if profile == SPEC_PROFILE else profile, "matmul").profile.rules
    if not isinstance(rules, HybridMatmulRules):
        raise QrefError(f"profile {profile!r} has no hybrid product rules (matmul.md §17.4)")
    ov = dict(overrides)
    if "quantization_of" in ov:  # another profile's activation quantization whole
        rules = dataclasses.replace(rules, quantization=resolve_profile(ov.pop("quantization_of"),
                                                                        "matmul").profile.rules.quantization)
    if "output_of" in ov:  # another profile's output stage (requantization and bias) whole
        other = resolve_profile(ov.pop("output_of"), "matmul").profile.rules.rules
        rules = dataclasses.replace(rules, rules=dataclasses.replace(
            other, accumulation=rules.rules.accumulation))
    acc_f = {"product", "product_width"}
    if acc_f & set(ov):
        acc = dataclasses.replace(rules.rules.accumulation, **{k: ov.pop(k) for k in acc_f & set(ov)})
        rules = dataclasses.replace(rules, rules=dataclasses.replace(rules.rules, accumulation=acc))
    if ov:
        rules = dataclasses.replace(rules, quantization=dataclasses.replace(rules.quantization, **ov))
    ins = case.inputs
    r = hybrid_matmul(ins["a"], ins["b"], w_scale=ins["b_scale"], bias=ins.get("bias"), rules=rules)
    return Expectation({"y": r.values}, {"y": np.zeros(r.values.shape, dtype=bool)})


#: alternatives of the hybrid product: the products (§3.4), the activation quantization and its rounding
#: (matmul.md §17.1), the output stage (§17.3)
_HYBRID_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tie_rule", {"vector_rounding": None, "vector_width": 0}),
    ("tie_rule", {"vector_rounding": "add_half_truncate", "vector_width": 8}),
    ("tie_rule", {"rounding": "nearest_even"}), ("tie_rule", {"rounding": "nearest_away"}),
    ("product_rule", {"product": "exact", "product_width": 0}),
    ("product_rule", {"product": "abs_sign_int8", "product_width": 16}),
    ("product_rule", {"product": "abs_sign_int8", "product_width": 16, "vector_rounding": "add_half_truncate",
                      "vector_width": 8}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_asymmetric"}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_asymmetric", "product": "abs_sign_int8",
                                 "product_width": 16}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_xnnpack"}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_xnnpack", "output_of": "litert_hybrid_xnnpack"}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_xnnpack", "output_of": "litert_hybrid_xnnpack",
                                 "product": "exact", "product_width": 0}),
    ("activation_quantization", {"quantization_of": "litert_hybrid_symmetric"}),
    ("activation_quantization", {"quantization_of": "hybrid_spec", "output_of": "hybrid_spec"}),
    ("multiplier_arithmetic", {"output_of": "litert_hybrid_xnnpack"}),
    ("multiplier_arithmetic", {"output_of": "litert_hybrid_symmetric"}),
)


#: CPU GEMM profiles registered in this process (a record a user fitted with ``qref probe-matmul``)
_REGISTERED: dict[str, Any] = {}


def register_cpu_gemm_profile(profile: Any) -> None:
    """Make ``profile`` (a qref.mma.cpu_profiles.CpuGemmProfile, e.g. one fitted with ``qref probe-matmul``) a
    reference a float_matmul target may name in this process (mma.md §12.2); a name of ``PROFILES`` is refused."""
    from ...mma.cpu_profiles import PROFILES, CpuGemmProfile

    if not isinstance(profile, CpuGemmProfile):
        raise QrefError(f"register_cpu_gemm_profile takes a CpuGemmProfile, got {type(profile).__name__}")
    if any(p.name == profile.name for p in PROFILES):
        raise QrefError(f"{profile.name!r} is a committed profile of qref.mma.cpu_profiles; give the new record "
                        "another name")
    _REGISTERED[profile.name] = profile


def cpu_gemm_profile(name: str) -> Any:
    """The fitted CPU GEMM profile called ``name`` (qref.mma.cpu_profiles.PROFILES, then the registered ones), else
    None."""
    from ...mma.cpu_profiles import PROFILES

    return next((p for p in PROFILES if p.name == name), None) or _REGISTERED.get(name)


def _float_matmul_outputs(case: Case, profile: str) -> Expectation:
    """mma.md §12.2: y of the fitted CPU GEMM profile ``profile`` (its record per kernel path, §12 C1); a shape the
    profile does not model (a matrix-vector call, M or N below its kernel's minimum) is unsupported."""
    from ..model import Unsupported

    prof = cpu_gemm_profile(profile)
    if prof is None:
        raise QrefError(f"float_matmul: {profile!r} is not a fitted CPU GEMM profile (qref.mma.cpu_profiles)")
    try:
        with np.errstate(all="ignore"):
            y = prof.dispatch.matmul(case.inputs["a"], case.inputs["b"], prof.a_format, prof.b_format, prof.d_format)
    except QrefError as exc:
        raise Unsupported(f"profile {prof.name} does not model this shape: {exc}") from None
    return Expectation({"y": np.asarray(y, np.float32)}, {})


def _float_matmul_alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """accumulation_order: the other fitted profiles, then simple orders (mma.md §10.1) and the correctly rounded
    sum."""
    from ... import mma as qm
    from ...mma.cpu_profiles import PROFILES

    a, b = case.inputs["a"], case.inputs["b"]
    yield "accumulation_order", {"y": np.asarray(case.expected["y"])}
    for p in PROFILES:
        if p.name != profile:
            try:
                with np.errstate(all="ignore"):
                    yield "accumulation_order", {"y": np.asarray(p.dispatch.matmul(a, b), np.float32)}
            except QrefError:
                continue
    for rec in (qm.KernelAccumulation(), qm.KernelAccumulation(products="rounded"),
                qm.KernelAccumulation(lanes=4, reduction="pairwise"),
                qm.KernelAccumulation(lanes=8, reduction="halving"),
                qm.KernelAccumulation(lanes=16, reduction="pairwise"),
                qm.KernelAccumulation(order="pairwise", products="rounded")):
        with np.errstate(all="ignore"):
            yield "accumulation_order", {"y": np.asarray(qm.matmul(a, b, instruction=qm.kernel(rec)), np.float32)}


def drift_note(case: Case, profile: str) -> str:
    """For a float_matmul task within the bound of mma.md §10.4 but not the bits of its fitted profile: the drift
    note naming the record, the version it was fitted on and the installed one (mma.md §12.2 C2); "" elsewhere."""
    from importlib import metadata

    prof = cpu_gemm_profile(profile) if case.operation == FLOAT_MATMUL else None
    if prof is None:
        return ""
    dist = prof.version.split()[0]
    try:
        installed = metadata.version(dist)
    except metadata.PackageNotFoundError:
        installed = "not installed"
    return (f"within the bound of mma.md §10.4 but not the bits of the fitted record {prof.name} ({prof.version}, "
            f"{prof.kernel}; threads {', '.join(map(str, prof.threads))}); installed {dist} {installed}: the "
            "library's kernel order differs (another version, thread count or CPU kernel)")


def _outputs(case: Case, profile: str, **overrides: Any) -> Expectation:
    if case.operation == FLOAT_MATMUL:
        return _float_matmul_outputs(case, profile)
    if case.operation in HYBRID_OPS:
        return _hybrid_outputs(case, profile, **overrides)
    if case.operation == "qgemm":
        return _qgemm_outputs(case, profile, **overrides)
    if case.operation in FLOAT_OPS:
        return _float_outputs(case, profile, **overrides)
    if case.operation in NBITS_OPS:
        raise QrefError("matmul_nbits cases hold for every matmul profile that models them (matmul.md §10)")
    p = case.params
    if case.operation in VW_OPS:
        return _vw_outputs(case, profile, **overrides)
    if case.operation in WO_OPS:
        raise QrefError("a weight-only case is compared within its bound under its own profile (matmul.md §14)")
    rules = matmul_rules(profile)
    if case.operation == "matmul_integer":
        rules = rules.replace(method="none")
    pairs_apply = (p["a_storage"], p["b_storage"]) == ("uint8", "int8") or (
        rules.accumulation.pair_sum == "saturating_int16_shifted_a" and (p["a_storage"], p["b_storage"])
        == ("int8", "int8"))
    if rules.accumulation.pair_sum and not pairs_apply:
        rules = rules.replace(pair_sum=None)
    if overrides:
        rules = rules.replace(**overrides)
    if case.operation == "matmul_integer" and rules.requantization.method != "none":
        raise QrefError("matmul_integer has no requantization")
    out = p["output"] if case.operation == "qlinear_matmul" else None
    pipe = QuantizedMatmul(IntOperand(p["a_storage"]), IntOperand(p["b_storage"]), out, rules)
    ins = case.inputs
    with np.errstate(all="ignore"):
        r = quantized_matmul(ins["a"], ins["b"], a_scale=ins.get("a_scale"), a_zero_point=ins["a_zero_point"],
                             b_scale=ins.get("b_scale"), b_zero_point=ins["b_zero_point"],
                             y_scale=ins.get("y_scale"), y_zero_point=ins.get("y_zero_point", 0),
                             bias=ins.get("bias"), pipeline=pipe)
    exp = case.expected["y"]
    vals = np.where(r.unspecified, 0, r.values) if case.operation == "matmul_integer" else r.values
    return Expectation({"y": vals.astype(exp.dtype)}, {"y": np.asarray(r.unspecified, dtype=bool)})


def expectation(case: Case, profile: str) -> Expectation:
    if profile == "spec":  # a target that names no profile (model.Target.reference): the spec default
        profile = SPEC_PROFILE
    if holds(case, profile) or (case.operation in WO_OPS and profile == SPEC_PROFILE):
        return Expectation(dict(case.expected), dict(case.unspecified))
    return _outputs(case, profile)


def alternatives(case: Case, profile: str) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(class, outputs): ``profile``'s rules with one change each (module docstring), then the other profiles'
    rules whole (class ``requantize_method`` for a different method, else ``multiplier_arithmetic``)."""
    if case.operation in NBITS_OPS + WO_OPS:
        return
    if case.operation == FLOAT_MATMUL:
        yield from _float_matmul_alternatives(case, profile)
        return
    floats = case.operation in FLOAT_OPS or (case.operation == "qgemm" and case.params["output"] == "float32")
    alts = (_VW_ALTS if case.operation in VW_OPS else _HYBRID_ALTS if case.operation in HYBRID_OPS
            else _FLOAT_ALTS if floats else _ALTS)
    for cls, ov in alts:
        try:
            yield cls, _outputs(case, profile, **ov).outputs
        except (QrefError, ValueError):
            continue


def accept(case: Case, exp: Expectation, name: str, got: np.ndarray) -> np.ndarray | None:
    """matmul_nbits[_int8] (matmul.md §10.3) and the weight-only products (§14): a result conforms when
    y_lo <= r <= y_hi. None elsewhere (bits)."""
    if case.operation in WO_OPS:
        return _accept_weight_only(case, exp, name, got)
    if case.operation == FLOAT_MATMUL:
        return _accept_float_matmul(exp, name, got)
    if case.operation not in NBITS_OPS or name != "y" or "y_lo" not in exp.outputs:
        return None
    g = np.asarray(got).reshape(-1).view(np.float32).astype(np.float64)
    lo = np.asarray(exp.outputs["y_lo"]).reshape(-1).astype(np.float64)
    hi = np.asarray(exp.outputs["y_hi"]).reshape(-1).astype(np.float64)
    return (lo <= g) & (g <= hi)


def _accept_float_matmul(exp: Expectation, name: str, got: np.ndarray) -> np.ndarray | None:
    """mma.md §12.2: y conforms when y_lo <= y <= y_hi (the §10.4 bound); NaN where y_lo is NaN (a NaN operand or
    Inf - Inf), the same infinity where the operands are not finite. None for a fitted profile's expectation
    (no interval: bits)."""
    if name != "y" or "y_lo" not in exp.outputs:
        return None
    g = np.asarray(got).reshape(-1).view(np.float32).astype(np.float64)
    lo = np.asarray(exp.outputs["y_lo"]).reshape(-1).astype(np.float64)
    hi = np.asarray(exp.outputs["y_hi"]).reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (np.isnan(lo) & np.isnan(g)) | ((lo <= g) & (g <= hi))


def structural_class(case: Case, name: str, idx: np.ndarray, exp: np.ndarray, got: np.ndarray) -> np.ndarray:
    """float_matmul: a result outside the case's [y_lo, y_hi] (mma.md §10.4) is outside_bound, whichever
    expectation it is compared with; the rest go to the alternatives."""
    out = np.full(idx.shape, "", dtype=object)
    if case.operation == FLOAT_MATMUL and name == "y":
        g = np.asarray(got).astype(np.uint32).view(np.float32).astype(np.float64)
        lo = np.asarray(case.expected["y_lo"]).reshape(-1)[idx]
        hi = np.asarray(case.expected["y_hi"]).reshape(-1)[idx]
        with np.errstate(invalid="ignore"):
            ok = (np.isnan(lo) & np.isnan(g)) | ((lo <= g) & (g <= hi))
        out[~ok] = "outside_bound"
    return out


def spec_sections(case: Case) -> tuple[str, ...]:
    return tuple(case.spec)


def describe_input(case: Case, index: int) -> str:
    """Row m and column n of output element ``index``, with the quantization parameters."""
    p = case.params
    m, n = divmod(int(index), int(p["n"]))
    ins = case.inputs
    if case.operation in VW_OPS + WO_OPS:
        a, b = ("a", "b") if case.operation in VW_OPS else ("x", "codes")
        text = f"row {m} of {a} times row {n} of {b} (K = {p['k']})"
        if case.operation == "weight_only_matmul":
            text += f"; {p['table']} codes, absmax per {p['block_size']} weights"
        return text

    def at(name: str, i: int) -> str:
        v = np.asarray(ins[name]).reshape(-1)
        return repr(v[i if v.size > 1 else 0].item())

    if case.operation == FLOAT_MATMUL:
        return (f"row {m} of a times column {n} of b (float32, M = {p['m']}, K = {p['k']}, N = {p['n']}); bound "
                f"[{float(np.asarray(case.expected['y_lo']).reshape(-1)[int(index)])!r}, "
                f"{float(np.asarray(case.expected['y_hi']).reshape(-1)[int(index)])!r}]")
    if case.operation in NBITS_OPS:
        how = f"compute {p['compute']}" if "compute" in p else f"{p['quant_type']} table"
        return (f"row {m} of a (float32, K = {p['k']}) times row {n} of the 4-bit weights (block {p['block_size']}, "
                f"{how}); bound {float(np.asarray(case.expected['bound']).reshape(-1)[int(index)])!r}")
    if case.operation in HYBRID_OPS:
        return (f"row {m} of a (float32, K = {p['k']}, quantized per row on the fly) times column {n} of b (int8, "
                f"scale {at('b_scale', n)})" + (f"; bias {at('bias', n)}" if "bias" in ins else ""))
    if case.operation == "dynamic_quantize_matmul":
        return (f"row {m} of a (float32, K = {p['k']}, quantized per tensor: scale "
                f"{float(np.asarray(case.expected['a_scale']).reshape(-1)[0])!r}, zero point "
                f"{int(np.asarray(case.expected['a_zero_point']).reshape(-1)[0])}) times column "
                f"{n} of b ({p['b_storage']}, zero point {at('b_zero_point', n)}, scale {at('b_scale', n)})")
    text = (f"row {m} of a ({p['a_storage']}, K = {p['k']}, zero point {at('a_zero_point', m)}) times column {n} "
            f"of b ({p['b_storage']}, zero point {at('b_zero_point', n)})")
    if case.operation == "matmul_integer_to_float":
        text += f"; a_scale {at('a_scale', 0)}, b_scale {at('b_scale', n)}"
    if case.operation == "qgemm":
        text += f"; alpha {p['alpha']}, a_scale {at('a_scale', 0)}, b_scale {at('b_scale', n)}"
        if "y_scale" in ins:
            text += f", y_scale {at('y_scale', 0)}, y_zero_point {at('y_zero_point', 0)} ({p['output']})"
    if case.operation == "qlinear_matmul":
        text += (f"; a_scale {at('a_scale', m)}, b_scale {at('b_scale', n)}, y_scale {at('y_scale', 0)}, "
                 f"y_zero_point {at('y_zero_point', 0)} ({p['output']})")
    if "bias" in ins:
        text += f"; bias {at('bias', n)}"
    if "c" in ins:
        text += f"; c {at('c', n)}"
    return text


def element_inputs(case: Case, i: int) -> dict[str, np.ndarray]:
    """The inputs of output element i alone: row m of a and column n of b as a 1 x K by K x 1 problem, with the
    row's and column's scales, zero points and bias (matmul.md §2)."""
    m, n = divmod(int(i), int(case.params["n"]))
    out = {}
    for name, v in case.inputs.items():
        v = np.asarray(v)
        if name == "a":
            out[name] = v[m : m + 1]
        elif name == "b":
            out[name] = v[:, n : n + 1]
        elif v.ndim == 1 and v.size > 1:  # one per row of a / column of b
            out[name] = v[m : m + 1] if name.startswith("a_") else v[n : n + 1]
        else:
            out[name] = v
    return out


#: the adapters' snippets write the problem of one output element (element_inputs): a case that reproduces only
#: whole (the backend's result depends on the other rows or columns) has no standalone reproducer
WHOLE_SNIPPETS = False
#: operations whose output element (m, n) depends on row m of a, column n of b and their scales only
REDUCIBLE = ("matmul_integer", "qlinear_matmul", "matmul_integer_to_float", *HYBRID_OPS)


def reduce(case: Case, index: int, name: str = "y") -> Case:
    """The case reduced to output element ``index``: row m of a times column n of b (1 x K by K x 1) with that
    row's and column's scales and zero points (the runner's minimal reproducer; matmul.md §2)."""
    import copy
    import dataclasses

    if case.operation in VW_OPS + WO_OPS:
        return _reduce_vectorwise(case, index, name)
    if case.operation not in REDUCIBLE or name != "y":  # A's dynamic scale, 4-bit blocks: the whole case
        whole = copy.copy(case)
        object.__setattr__(whole, "_index", int(index))
        object.__setattr__(whole, "_slice", None)
        return whole
    m, n = divmod(int(index), int(case.params["n"]))
    ins = element_inputs(case, index)
    exp = {k: np.asarray(v)[m : m + 1, n : n + 1] for k, v in case.expected.items()}
    uns = {k: np.asarray(v)[m : m + 1, n : n + 1] for k, v in case.unspecified.items()}
    return dataclasses.replace(case, inputs=ins, expected=exp, unspecified=uns,
                               params=dict(case.params, m=1, n=1))


def describe_output(case: Case, name: str, value: np.ndarray) -> str:
    v = np.asarray(value).reshape(-1)
    floats = case.operation in (*FLOAT_OPS, *NBITS_OPS, *HYBRID_OPS, FLOAT_MATMUL)
    if (floats or case.params.get("output") == "float32") and name == "y":
        return describe_value(name, v.view(np.uint32).view(np.float32) if v.dtype != np.float32 else v)
    if v.size and v.dtype.kind == "f":
        return repr(float(v[0]))
    return f"{int(v[0])}" if v.size else ""


# ---- vectorwise int8 and weight-only products (matmul.md §13, §14) ----------------------------------------------
_VW_ALTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("multiplier_arithmetic", {"dequant_constant": float(np.float32(1 / 16129))}),
    ("multiplier_arithmetic", {"dequant_constant": float(np.float32(6.200124e-05))}),
    ("multiplier_arithmetic", {"quant_multiplier": "reciprocal_times_127"}),
    ("multiplier_arithmetic", {"quant_multiplier": "reciprocal_times_127",
                               "dequant_constant": float(np.float32(6.200124e-05))}),
    ("multiplier_arithmetic", {"dequant_association": "left_to_right"}),
    ("multiplier_arithmetic", {"quant_multiplier": "reciprocal_multiply"}),
    ("multiplier_arithmetic", {"quant_multiplier": "divide"}),
    ("tie_rule", {"rounding": "nearest_away"}),
    ("accumulator_overflow", {"overflow": "saturate"}), ("accumulator_overflow", {"overflow": "exact"}),
)


def _vw_outputs(case: Case, profile: str, **overrides: Any) -> Expectation:
    """The vectorwise pipeline (matmul.md §13) of ``profile`` with rule overrides on the case's operands."""
    from ...recipes.vectorwise import vectorwise_int8_matmul, vectorwise_rules

    rules = vectorwise_rules(profile, **overrides)
    r = vectorwise_int8_matmul(case.inputs["a"], case.inputs["b"], rules)
    out = {"a_codes": r.a_codes, "a_stats": r.a_stats, "b_codes": r.b_codes, "b_stats": r.b_stats, "acc": r.acc,
           "y": r.y}
    return Expectation(out, {"y": r.unspecified, "acc": r.unspecified})


def _accept_weight_only(case: Case, exp: Expectation, name: str, got: np.ndarray) -> np.ndarray | None:
    """A weight-only result conforms within [y_lo, y_hi] (matmul.md §14; the recipes family's rule): NaN where
    the exact result is NaN, else y_lo <= r <= y_hi (+0 and -0 equal). Other outputs: bits decide."""
    if case.operation not in WO_OPS or name != "y" or "y_lo" not in exp.outputs:
        return None
    g = np.asarray(got).reshape(-1).astype(np.float64)
    e = np.asarray(exp.outputs["y"]).reshape(-1).astype(np.float64)
    lo = np.asarray(exp.outputs["y_lo"]).reshape(-1).astype(np.float64)
    hi = np.asarray(exp.outputs["y_hi"]).reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (np.isnan(e) & np.isnan(g)) | (~np.isnan(e) & (lo <= g) & (g <= hi))


def _reduce_vectorwise(case: Case, index: int, name: str) -> Case:
    """The case cut to what output ``name``'s element ``index`` depends on, for a reproducer: a vectorwise or
    weight-only product's element (m, n) needs row m of the activation and row n of the weight (with its block
    scales); a vectorwise code or statistic its own row. ``_index`` is the element's index in the cut case. Other
    operations keep the whole case."""
    import copy

    if case.operation not in VW_OPS + WO_OPS:
        c = copy.copy(case)
        object.__setattr__(c, "_index", int(index))
        object.__setattr__(c, "_slice", None)
        return c
    ins = case.inputs
    j = 0
    if case.operation in VW_OPS:
        K = ins["a"].shape[1]
        if name in ("y", "acc"):
            m, n = divmod(int(index), ins["b"].shape[0])
        elif name.startswith("a_"):
            m, n = (int(index) // K, 0) if name == "a_codes" else (int(index), 0)
            j = int(index) % K if name == "a_codes" else 0
        else:
            m, n = (0, int(index) // K) if name == "b_codes" else (0, int(index))
            j = int(index) % K if name == "b_codes" else 0
        new = {"a": ins["a"][m:m + 1], "b": ins["b"][n:n + 1]}
    else:
        w = "codes"
        m, n = divmod(int(index), ins[w].shape[0])
        K = ins[w].shape[1]
        new = {"x": ins["x"][m:m + 1], "codes": ins[w][n:n + 1]}
        if "absmax" in ins:
            B = int(case.params["block_size"])
            if K % B:
                c = copy.copy(case)
                object.__setattr__(c, "_index", int(index))
                object.__setattr__(c, "_slice", None)
                return c
            new["absmax"] = ins["absmax"][n * K // B:(n + 1) * K // B]
        else:
            new["scale"] = ins["scale"][n:n + 1]
    params = dict(case.params, m=1, n=1)
    exp = {name: np.asarray(case.expected[name]).reshape(-1)[int(index):int(index) + 1]}  # the element alone
    c = Case(id=case.id, family=case.family, operation=case.operation, inputs=new, expected=exp,
             profile=case.profile, params=params, profiles=case.profiles)
    object.__setattr__(c, "_index", j)
    object.__setattr__(c, "_slice", None)
    return c


__all__ = ["CLASS_SECTIONS", "FAMILY", "FLOAT_OPS", "HYBRID_OPS", "HYBRID_SPEC", "NBITS_OPS", "OPERATIONS",
           "REDUCIBLE", "SPEC_PROFILE", "VW_OPS", "WHOLE_SNIPPETS", "WO_OPS", "accept", "alternatives",
           "describe_input", "describe_output", "element_inputs", "expectation", "holds", "reduce", "relevant",
           "spec_sections", "structural_class", "task_key"]
