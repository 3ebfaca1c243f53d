"""The public surface: qref.__all__ equals the API docs/architecture.md §6 lists, and every public module of
qref/ states its surface in ``__all__`` with names it defines or deliberately re-exports (issue 34)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import types
from pathlib import Path

import pytest

import qref

ROOT = Path(__file__).resolve().parents[1]
#: modules whose __all__ re-exports what other modules define, and why
REEXPORTS = {
    "qref.mlir": "compatibility path of qref.interop.mlir",
    "qref.strategies": "compatibility path of qref.testing.strategies",
    "qref.pytest_plugin": "the pytest11 entry point; the plugin is qref.testing.pytest_plugin",
    "qref.schemes.uniform_fast": "compatibility path of qref.schemes.uniform.fast",
    "qref.schemes.uniform_requantize": "compatibility path of qref.schemes.uniform.requantize",
    "qref.schemes.block.mx": "the MX entry point re-exports the steps of its reference (mx_reference.py) that the "
                             "fast path and the tests call through it",
    "qref.schemes.block.nvfp4": "the NVFP4 entry point re-exports the steps of its reference (nvfp4_reference.py) "
                                "that the fast path and the tests call through it",
    "qref.recipes.qmatmul": "the matmul rules records (qref.profiles.matmul) next to the functions that take them",
}


def _documented() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## 6. Public API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`qref\.(\w+)`", section)


def _public_modules() -> list[Path]:
    out = []
    for p in sorted((ROOT / "qref").rglob("*.py")):
        if p.name.startswith("_") and p.name != "__init__.py":
            continue
        out.append(p)
    return out


def _module_name(p: Path) -> str:
    rel = p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    return rel.removesuffix(".__init__")


def test_documented_api_is_qref_all() -> None:
    doc = _documented()
    assert len(doc) == len(set(doc)), "docs/architecture.md §6 lists a name twice"
    assert set(doc) == set(qref.__all__), (sorted(set(doc) - set(qref.__all__)), sorted(set(qref.__all__) - set(doc)))


def _states_all(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == "__all__"
    return isinstance(node, ast.ImportFrom) and any(a.name == "__all__" for a in node.names)  # a compatibility path


def test_every_public_module_has_all() -> None:
    missing = [p.relative_to(ROOT).as_posix() for p in _public_modules()
               if not any(_states_all(n) for n in ast.parse(p.read_text()).body)]
    assert not missing, f"modules without __all__: {missing}"


def test_all_names_exist_and_are_no_foreign_helpers() -> None:
    """Every name in __all__ exists; none is a third-party module (np, math, ml_dtypes) or a function / class that
    another qref module defines and this one merely imports, unless it is a package or a compatibility path."""
    bad = []
    for p in _public_modules():
        name = _module_name(p)
        mod = importlib.import_module(name)
        reexports = p.name == "__init__.py" or name in REEXPORTS
        for n in mod.__all__:
            if not hasattr(mod, n):
                bad.append(f"{name}.{n}: missing")
                continue
            v = getattr(mod, n)
            if isinstance(v, types.ModuleType) and not v.__name__.startswith("qref"):
                bad.append(f"{name}.{n}: the module {v.__name__}")
            elif (not reexports and isinstance(v, (types.FunctionType, type)) and getattr(v, "__module__", name) != name
                  and n not in _assigned(p)):
                bad.append(f"{name}.{n}: imported from {v.__module__}")
    assert not bad, bad
    assert {m for m in REEXPORTS if importlib.util.find_spec(m) is None} == set()


def _assigned(p: Path) -> set[str]:
    """Names the module binds itself (defs, classes, assignments such as ``cast = convert``)."""
    out: set[str] = set()
    for n in ast.parse(p.read_text()).body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Assign):
            out |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return out


def test_transforms_exports_no_helpers() -> None:
    import qref.transforms as T

    assert not {"np", "math", "ml_dtypes", "decompose", "encode_exact"} & set(T.__all__)


def test_profiles_is_the_package_and_callable() -> None:
    """``qref.profiles`` is the package qref/profiles/ (its modules import by their dotted names) and calling it is
    the registry function ``qref.profiles.base.profiles`` (the documented ``qref.profiles(family)``)."""
    import qref.profiles.uniform as u
    from qref.profiles import base, uniform

    assert isinstance(qref.profiles, types.ModuleType) and qref.profiles.__name__ == "qref.profiles"
    assert u is uniform is qref.profiles.uniform
    assert hasattr(u, "UniformArithmetic")
    for family in ("block", "uniform", None):
        got = qref.profiles(family)
        assert got == base.profiles(family) and got, family
    assert set(qref.profiles(family="block")) >= {"ocp", "torchao_floor", "mlx"}
    with pytest.raises(qref.QrefError, match="uniform"):  # a typo names the close match
        qref.profiles("unifrom")
