"""The package's import graph (docs/architecture.md): no cycles, no private names across packages.

Every ``import`` in ``qref/`` counts, function-local ones included; only ``if TYPE_CHECKING:`` blocks are left
out (they never run). An edge goes to the exact module named, so ``from ..formats import get_format`` is an edge
to ``qref.formats`` and ``from . import arith`` inside ``qref.core`` an edge to ``qref.core.arith``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "qref"


def _module_name(path: Path) -> str:
    parts = ["qref", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run (type_checking=False), or those under ``if TYPE_CHECKING:`` only (True)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, typed: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.body:
                    walk_one(other, True)
                for other in child.orelse:
                    walk_one(other, typed)
                continue
            walk_one(child, typed)

    def walk_one(child: ast.AST, typed: bool) -> None:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            if typed == type_checking:
                found.append(child)
            return
        walk(child, typed)

    walk(tree, False)
    return found


def _graph(type_checking: bool = False) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> imported qref modules, and the cross-package private imports (type_checking: the imports
    under ``if TYPE_CHECKING:`` instead)."""
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private: list[str] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path)), type_checking):
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [(source, a.name) for a in node.names]
            for source, attr in targets:
                if not source.startswith("qref"):
                    continue
                full = f"{source}.{attr}" if attr else source
                target = full if full in modules else source
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target != name:
                    edges[name].add(target)
                hidden = [p for p in full.split(".")[1:] if p.startswith("_") and not p.startswith("__")]
                if hidden and _top(full) != _top(name):
                    private.append(f"{name} imports {full}")
    return edges, private


def _top(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph()[0])
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_private_names_across_packages() -> None:
    private = _graph()[1]
    assert not private, "private names imported across packages:\n" + "\n".join(private)
