"""Compare backend outputs with an expectation and name each mismatch (docs/conformance.md §3).

Outputs are compared as unsigned integers of their width (floats as bit patterns: NaN payloads, the sign of NaN
and of zero all count), skipping elements the expectation leaves unspecified. A mismatching element gets the
first class that explains it: a structural class read from the codes (NaN sign or code, sign of zero), else a
qref variant of the reference profile (its family module's ``alternatives``) that reproduces the backend's code
exactly at that element, chosen by the evidence of the task (``_greedy``: a variant that changes no element the
backend got right, explaining the most mismatches, first; single changes before combinations) (e.g.
rounding="nearest_away" -> tie rule, overflow="saturate" -> saturation vs NaN vs Inf, zero point added after
rounding -> zero point order), else "other". No tolerance anywhere: a class
names a bit-exact alternative.

A family may define ``accept(case, exp, name, got) -> bool mask | None``: elements whose bits differ but that
conform all the same (the recipes family: a result of an implementation-defined accumulation within its
interval [y_lo, y_hi], +-0 and NaNs of either sign where the case allows them); they are not mismatches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType

import numpy as np

from ..conformance.case import Case
from .families import Expectation
from .model import Comparison, bits

#: class -> (title, what it means). The report lists classes in this order.
CLASSES: dict[str, tuple[str, str]] = {
    "tie_rule": ("tie rule", "exact ties resolved differently (away from zero, toward zero, up) than round half to "
                             "even"),
    "decision_rule": ("decision rule", "the table entry is chosen by another rule (the first argmin of rounded "
                                       "distances, a 65536-point grid) than the nearest entry by exact distance"),
    "truncation": ("truncation", "the value is truncated toward zero instead of rounded to nearest"),
    "directed_rounding": ("directed rounding", "rounded up, down or away from zero instead of to nearest"),
    "fma": ("FMA contraction", "a multiply and an add are fused into one rounding (x * fl(1/s) + z as a fused "
                               "multiply-add) where the reference rounds the product first"),
    "zero_point_order": ("zero point order", "the zero point is added before rounding where the reference adds it "
                                             "after (or the reverse)"),
    "scale_arithmetic": ("scale arithmetic", "x * fl(1/s) instead of x / s (or the reverse), or the scale rounded "
                                             "to another type first"),
    "compute_precision": ("compute precision", "the arithmetic runs in another float type"),
    "reduction": ("reduction order", "a mean or sum over many elements is accumulated in another order or "
                                     "precision than its exact value rounded once"),
    "saturation_nan_inf": ("saturation vs NaN vs Inf", "overflow (or an infinite input) gives +-max, NaN or +-Inf "
                                                       "where the reference gives another of the three"),
    "saturation": ("saturation bounds", "results clamp to other bounds than the storage range"),
    "signedness": ("signedness", "unsigned storage handled as the signed (signless) integer of its width: results "
                                 "clamp to the signed range, codes >= 2^(b-1) read as negative"),
    "nan_sign_or_code": ("NaN sign or code", "a NaN input or output: another NaN code, NaN sign or payload, or a "
                                             "number where the reference has its NaN rule"),
    "sign_of_zero": ("sign of zero", "+0 where the reference gives -0 or the reverse"),
    "sign_dropped": ("sign dropped", "the magnitude is right but a negative nonzero result comes out positive"),
    "negative_input": ("negative input", "a negative input to an unsigned format is encoded as its magnitude "
                                         "where the reference gives NaN"),
    "zero_input": ("zero input", "a zero input to a format without zero (E8M0): NaN in the reference, another "
                                 "code in the backend"),
    "subnormal_flush": ("subnormal flush", "subnormal results or inputs flushed to zero"),
    "min_normal_flush": ("flush below the smallest normal", "an input below the smallest normal that rounds up to "
                                                            "it comes out as zero: the input is flushed before "
                                                            "rounding (the result is normal, not subnormal)"),
    "double_rounding": ("double rounding", "the input is rounded to float32 first, then to the format"),
    "scale_rule": ("scale rule", "the block scale is chosen by another rule (floor / ceil / even / rceil)"),
    "zero_block": ("zero block", "an all-zero block gets another scale or other codes than the reference's "
                                 "zero-block rule gives"),
    "wrap_around": ("wrap-around", "out-of-range results wrap modulo 2^bits instead of saturating"),
    "int32_conversion": ("conversion through int32", "the rounded quotient is converted to int32 before the zero "
                                                     "point is added and the result clamped: |x / s| >= 2^31, +-Inf "
                                                     "and NaN take the undefined conversion's value (INT_MIN on "
                                                     "x86-64, 0 through ml_dtypes' bfloat16) instead of "
                                                     "saturating"),
    "requantize_form": ("requantize form", "requantized with the merged scale s1 / s2 and merged zero point in one "
                                           "multiply-add where the reference dequantizes then quantizes (or the "
                                           "reverse; uniform.md §2.7)"),
    "dequantize_arithmetic": ("dequantize arithmetic", "(q - z) * s computed in other types"),
    "integer_lowering": ("float storage lowered as integer", "a float storage type runs the integer lowering: x / s "
                                                             "+ z rounded to an integer before the conversion to the "
                                                             "float format, the float code truncated to an integer "
                                                             "before (q - z) * s"),
    "decode_value": ("decoded value", "a code decodes to another value"),
    "pair_saturation": ("int16 pair saturation", "adjacent u8 x s8 products summed with int16 saturation before the "
                                                 "int32 sum (x86 vpmaddubsw), or the reverse"),
    "accumulator_overflow": ("accumulator overflow", "an integer sum beyond int32 wraps, saturates or is kept exact "
                                                     "otherwise than the reference"),
    "unsigned_extension": ("unsigned storage extension", "unsigned storage codes enter the integer arithmetic "
                                                         "sign-extended (uint8 200 as -56) or zero-extended, "
                                                         "otherwise than the reference (matmul.md §3.3)"),
    "narrowing": ("narrowing", "the int32 result becomes the output storage by keeping its low bits (wrap) or by "
                               "saturating, otherwise than the reference (matmul.md §5)"),
    "bias_stage": ("float bias stage", "a float bias enters the requantization at another stage (in accumulator "
                                       "units before the multiplier, quantized to int32, after the operand scales; "
                                       "matmul.md §4.1)"),
    "product_rule": ("product rule", "int8 products formed otherwise than exactly, or the reverse: |a| times b with "
                                     "a's sign moved onto it in int8, so -(-128) wraps (x86 pabsb / psignb; "
                                     "matmul.md §3.4)"),
    "activation_quantization": ("activation quantization", "the float activation is quantized on the fly by "
                                                           "another scheme (symmetric absmax, asymmetric min / max "
                                                           "with the scale or zero point in float64 or float32, "
                                                           "7-bit codes, the zero point added before rounding; "
                                                           "matmul.md §9, §15, §17.1)"),
    "requantize_method": ("requantization method", "the accumulator is requantized by another method (fixed-point "
                                                   "Q31 multiplier, float multiply, dequantize-dot-quantize)"),
    "multiplier_arithmetic": ("multiplier arithmetic", "the output multiplier a_s b_s / y_s or acc * m computed in "
                                                       "another type or association"),
    "accumulation_order": ("accumulation order", "a bit-defined accumulation (exact, sequential, pairwise, blocked) "
                                                 "differs, but the result lies within the bound of every float32 "
                                                 "accumulation order (the backend sums in another order; "
                                                 "recipes.md §2.1)"),
    "operand_rounding": ("operand rounding", "each operand element times its block scale is rounded to a narrower "
                                             "type before the dot (bfloat16 through float32: XLA's decomposition "
                                             "of scaled_dot; products overflow to Inf, tiny ones round; "
                                             "recipes.md §7.1)"),
    "outside_bound": ("outside the rigorous bound", "a result of an implementation-defined accumulation lies "
                                                    "outside [y_lo, y_hi], the bound covering every float32 order "
                                                    "(recipes.md §2.3), and no modelled variant explains it"),
    "other": ("other", "no single documented variant reproduces the backend's result"),
    "crash": ("crash", "the backend raised an error or failed to compile a case it should support"),
}


def class_title(cls: str) -> str:
    """Title of a class or of a combination "a+b"."""
    return " + ".join(CLASSES.get(c, (c, ""))[0] for c in cls.split("+"))


def class_order(cls: str) -> tuple[int, str]:
    names = list(CLASSES)
    first = cls.split("+")[0]
    return (names.index(first) if first in names else len(names), cls)


def _greedy(alts: Iterable[tuple[str, Mapping[str, np.ndarray]]], pending: dict[str, np.ndarray],
            flat: dict[str, tuple[np.ndarray, np.ndarray]], labels: dict[str, np.ndarray],
            todo: dict[str, np.ndarray], agree: Mapping[str, np.ndarray] | None = None,
            prefer: tuple[str, ...] = ()) -> None:
    """Label mismatches by the evidence: single changes (classes without '+') before combinations; within a tier
    every variant is scored on the task's elements and the best labels what it explains, then the next best, and
    so on. A variant's evidence: the mismatches it reproduces (hits) and the elements where the backend agrees
    with the reference but the variant does not (contradictions: a mechanism the backend has would change them
    too). Best first: the most hits net of contradictions (a variant qref models only approximately may miss a few
    elements the backend got right), then the most hits, then the fewest contradictions, then a class in
    ``prefer`` (the target's known mechanism), then the fewest elements changed from the reference (the smallest
    change explaining the same evidence), then the family's order (only where nothing in the task tells the
    variants apart)."""
    agree = agree or {}

    def remaining() -> int:
        return sum(int(t.size) for t in todo.values())

    def assign(cls: str, h: dict[str, np.ndarray]) -> None:
        for n, m in h.items():
            sel = m[todo[n]]
            labels[n][todo[n][sel]] = cls
            todo[n] = todo[n][~sel]

    def settle(cands: list[tuple[int, str, dict[str, np.ndarray], int, int]]) -> None:
        while cands and remaining():
            def key(c: tuple[int, str, dict[str, np.ndarray], int, int]) -> tuple[int, int, int, bool, int, int]:
                hits = sum(int(c[2][n][todo[n]].sum()) for n in c[2])
                return (hits - c[3], hits, -c[3], c[1].split("+")[0] in prefer, -c[4], -c[0])

            live = [c for c in cands if key(c)[1]]  # variants that reproduce a remaining mismatch
            if not live:
                return
            best = max(live, key=key)
            assign(best[1], best[2])
            cands.remove(best)

    tier: list[tuple[int, str, dict[str, np.ndarray], int, int]] = []
    pairs = False
    for i, (cls, outs) in enumerate(alts):
        if ("+" in cls) != pairs:
            settle(tier)
            tier, pairs = [], True
            if not remaining():
                return
        h = {}
        contra = changed = 0
        for name in pending:
            if name in outs:
                ab = bits(np.asarray(outs[name])).reshape(-1)
                eb, gb = flat[name]
                if ab.shape != eb.shape:
                    continue
                h[name] = ab[pending[name]] == gb[pending[name]]
                ok = agree.get(name)
                if ok is not None:
                    contra += int((ab[ok] != gb[ok]).sum())
                changed += int((ab != eb).sum())
        tier.append((i, cls, h, contra, changed))
    settle(tier)


def compare(case: Case, fam: ModuleType, exp: Expectation, got: Mapping[str, np.ndarray], profile: str,
            classify: bool = True, max_examples: int = 3, prefer: tuple[str, ...] = ()) -> Comparison:
    """Compare ``got`` with ``exp`` as unsigned bits; classify each mismatch (see module docstring). ``prefer``:
    classes tried first (the runner passes "truncation" for a target that truncates elsewhere on the format, so
    exact ties, where truncation and a tie rule give the same code, get the mechanism the target has)."""
    comp = Comparison()
    accept = getattr(fam, "accept", None)
    pending: dict[str, np.ndarray] = {}
    flat: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    agree: dict[str, np.ndarray] = {}  # elements where the backend gives the reference's bits (the evidence)
    for name, e in exp.outputs.items():
        if name not in got:  # not produced by the backend (e.g. a global scale it does not compute)
            continue
        eb = bits(e).reshape(-1)
        gb = bits(np.asarray(got[name])).reshape(-1)
        mask = exp.unspecified.get(name)
        keep = np.ones(eb.shape, dtype=bool) if mask is None else ~np.asarray(mask).reshape(-1)
        bad = (eb != gb) & keep
        if accept is not None and bad.any():  # conforming although the bits differ (an interval, +-0, NaN)
            ok = accept(case, exp, name, np.asarray(got[name]))
            if ok is not None:
                bad &= ~np.asarray(ok, dtype=bool).reshape(-1)
        diff = np.flatnonzero(bad)
        agree[name] = np.flatnonzero(keep & ~bad & (eb == gb))
        comp.compared += int(keep.sum())
        comp.mismatches += int(diff.size)
        if diff.size:
            pending[name] = diff
            flat[name] = (eb, gb)
    if not pending or not classify:
        return comp
    labels: dict[str, np.ndarray] = {}
    for name, idx in pending.items():
        eb, gb = flat[name]
        lab = fam.structural_class(case, name, idx, eb[idx], gb[idx])
        labels[name] = np.asarray(lab, dtype=object)
    todo = {n: np.flatnonzero(labels[n] == "") for n in pending}
    if any(t.size for t in todo.values()):
        alts = fam.alternatives(case, profile)
        _greedy(alts, pending, flat, labels, todo, agree, prefer)
    for name, idx in pending.items():
        lab = labels[name]
        lab[lab == ""] = "other"
        for cls in sorted(set(lab.tolist()), key=class_order):
            sel = idx[lab == cls]
            comp.classes[cls] = comp.classes.get(cls, 0) + int(sel.size)
            ex = comp.examples.setdefault(cls, [])
            ex.extend((name, int(i)) for i in sel[: max(0, max_examples - len(ex))])
    return comp


__all__ = ["CLASSES", "class_order", "class_title", "compare"]
