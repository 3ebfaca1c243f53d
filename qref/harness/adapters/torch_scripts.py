"""Reproducers of the torch adapter for cases too large to write out (issue 29): the smaller input that holds
the element (``script_case``, read by qref.harness.findings) and its script with the mostly-zero operands written
sparsely (``script_snippet``). Kept apart from torch.py so that the harness's script writer can be changed
without touching the adapter's targets."""

from __future__ import annotations

import numpy as np

from ...conformance.case import Case
from ..reproducer import sparse_input
from ._common import array_literal
from .jax import script_case as _qdq_script_case


def script_case(target: str, case: Case, index: int, output: str) -> Case | None:
    """torch.scaled_mm on a qdq_matmul case: a and b zero except what element ``index`` of ``output`` reads and
    each operand's element of largest magnitude, which sets its per-tensor scale (recipes.md §3.3; the same
    reduction as the JAX fp8_dot targets). None for the other targets."""
    if target != "torch.scaled_mm":
        return None
    return _qdq_script_case("jax.fp8_dot.", case, index, output)


def script_snippet(target: str, case: Case, i: int) -> str | None:
    """torch.py's scaled_mm snippet with the operands a and b written as zeros plus their non-zero elements
    (``reproducer.sparse_input``) instead of one literal of every byte."""
    from .torch import _scaled_mm_snippet

    if target != "torch.scaled_mm":
        return None
    out = []
    for ln in _scaled_mm_snippet(case, i).splitlines():
        name = ln.split(" = torch.from_numpy(", 1)[0]
        if name in ("a", "b") and ln.startswith(f"{name} = torch.from_numpy("):
            out += [*sparse_input(name, np.asarray(case.inputs[name]), array_literal),
                    f"{name} = torch.from_numpy({name}.copy())"]
        else:
            out.append(ln)
    return "\n".join(out)
