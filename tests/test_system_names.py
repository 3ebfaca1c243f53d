"""No code outside qref/profiles/ and qref/harness/adapters/ branches on a system's name (issue 34).

Mechanisms are named for what they do; a profile (qref/profiles/) names the system and version and chooses the
mechanisms, and an adapter (qref/harness/adapters/) runs the system. The check reads every module of qref/ with
``ast`` and flags a string constant that is a system's name in an ``==``, ``!=``, ``in``, ``not in`` comparison
(also inside a tuple / list / set literal) or a ``match`` case.
"""

from __future__ import annotations

import ast
from pathlib import Path

from qref.harness.adapters import BACKENDS

ROOT = Path(__file__).resolve().parents[1] / "qref"
OWNERS = ("profiles/", "harness/adapters/")
SYSTEMS = frozenset({*BACKENDS, "pytorch", "torch", "tflite", "litert", "flax", "aqt", "qwix", "tensorflow", "mlx",
                     "onnx", "onnxruntime", "openvino", "bitsandbytes", "torchao", "keras", "xla", "jax", "iree"})
#: (module, system name): why the comparison is not a branch on a system's behaviour
ALLOWED = {
    ("analysis/sweep.py", "ml_dtypes"): "sweep --against <system> runs that system (it imports it)",
    ("analysis/sweep.py", "jax"): "sweep --against <system> runs that system (it imports it)",
    ("analysis/sweep.py", "mlx"): "sweep --against <system> runs that system (it imports it)",
    ("analysis/sweep.py", "torch"): "sweep --against <system> runs that system (it imports it)",
    ("harness/runner.py", "jax"): "whether the jax module is already imported (sys.modules), before pinning XLA",
    ("harness/families/recipes.py", "flax"): "the scale formula key stored in committed cases (recipes/scaling.py "
                                              "formula='flax'), read from the case, not a system chosen here",
    ("harness/families/recipes.py", "jax"): "the model variant named by the case's emulation key (its own name)",
    ("harness/families/lookup.py", "torchao"): "the torchao profile's 4-digit NF4 literals as a second table",
    ("interop/mlir/parser.py", "mlir"): "the MLIR quant dialect's own default profile of parse_type",
    ("interop/packing.py", "mlx"): "the public name of a packing layout (LAYOUTS), not a system's behaviour",
    ("recipes/scaling.py", "flax"): "a scale-formula key stored in committed conformance cases (suite bytes)",
}


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def system_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, name) of every comparison of a string constant that names a system in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        found: list[str] = []
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for o in node.ops):
            for side in (node.left, *node.comparators):
                found += _strings(side)
        elif isinstance(node, ast.MatchValue):
            found += _strings(node.value)
        out += [(node.lineno, s) for s in found if s.split("@")[0] in SYSTEMS]
    return out


def _offenders() -> dict[tuple[str, str], list[int]]:
    hits: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OWNERS):
            continue
        for line, name in system_comparisons(path.read_text()):
            hits.setdefault((rel, name.split("@")[0]), []).append(line)
    return hits


def test_no_comparison_against_a_system_name() -> None:
    bad = {k: v for k, v in _offenders().items() if k not in ALLOWED}
    assert not bad, "compare against a mechanism chosen by a profile, not a system's name: " + ", ".join(
        f"qref/{m}:{lines} ({name!r})" for (m, name), lines in sorted(bad.items()))


def test_allowed_exceptions_still_exist() -> None:
    stale = set(ALLOWED) - set(_offenders())
    assert not stale, f"remove these from ALLOWED: {sorted(stale)}"


def test_the_check_sees_each_form() -> None:
    src = ('if a == "qwix": pass\nif b in ("x", "aqt"): pass\nif "pytorch" != c: pass\n'
           'match d:\n    case "tflite@2": pass\nif e == "exact": pass\n')
    assert system_comparisons(src) == [(1, "qwix"), (2, "aqt"), (3, "pytorch"), (5, "tflite@2")]
