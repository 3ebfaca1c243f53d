"""The layers of qref/ (docs/architecture.md): every import points down the stack, never up or sideways.

The graph is test_architecture's (every import, function-local ones included). A module's layer is the layer of
its top-level package (``qref.formats.records`` -> ``qref.formats``); imports inside one package are free (its
own cycles are test_architecture's business); an import of another package in the same layer or above fails.
"""

from __future__ import annotations

from test_architecture import _graph

LAYERS: tuple[tuple[str, ...], ...] = (
    ("qref.errors",),
    ("qref.validators",),                       # input checks of the public entry points
    ("qref.formats",),                          # data: format records, cast policy
    ("qref.profiles",),                         # data: system records (rules, versions, evidence)
    ("qref.core",),                             # encode / decode / rounding / exact arithmetic
    ("qref.tables",),                           # lookup tables (entries rounded by core arithmetic)
    ("qref.transforms",),                       # Hadamard transforms (exact or a declared kernel order)
    ("qref.schemes",),                          # cast, uniform, block, lookup schemes
    ("qref.mma",),                              # matrix units
    ("qref.recipes",),                          # training recipes (qdq GEMMs run on matrix units)
    ("qref.interop", "qref.analysis", "qref.testing"),  # MLIR types and packing; tools; the testing kit
    ("qref.conformance",),                      # the golden suite: cases, generation, schema
    ("qref.harness",),                          # backends under the suite
    ("qref.commands",),                         # the CLI's subcommands
    ("qref.cli",),
    ("qref.__main__",),
    ("qref",),                                  # the public API
)
# one-line modules at older paths, each in the layer of what it re-exports
COMPAT = {"qref.mlir": "qref.conformance", "qref.strategies": "qref.testing",
          "qref.pytest_plugin": "qref.testing"}
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

# Known upward edges, each with its reason; the list only shrinks.
ALLOWED = {
    ("qref.cli", "qref"): "reads qref.__version__",
    ("qref.testing.pytest_plugin", "qref"): "the report header reads qref.__version__",
}


def _layer_of(module: str) -> str:
    if module in COMPAT:
        return COMPAT[module]
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def test_every_module_has_a_layer() -> None:
    for module in _graph()[0]:
        _layer_of(module)


def test_imports_point_down() -> None:
    up = []
    for module, targets in _graph()[0].items():
        a = _layer_of(module)
        for t in sorted(targets):
            b = _layer_of(t)
            if a != b and RANK[b] >= RANK[a] and (module, t) not in ALLOWED:
                up.append(f"{module} ({a}) imports {t} ({b})")
    assert not up, "imports that do not point down:\n" + "\n".join(up)


def test_allowed_exceptions_still_exist() -> None:
    edges = _graph()[0]
    stale = [f"{a} -> {b}" for a, b in ALLOWED if b not in edges.get(a, set())]
    assert not stale, "remove these from ALLOWED:\n" + "\n".join(stale)


# Known type-only imports that point up (into a module that imports the importer); the list only shrinks.
TYPE_ONLY_ALLOWED: dict[tuple[str, str], str] = {}


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for t in edges.get(todo.pop(), ()):
            if t == goal:
                return True
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return False


def test_type_only_imports_point_down() -> None:
    """An import under ``if TYPE_CHECKING:`` (left out of the runtime graph) must be one the runtime graph could
    take: to a lower layer, or inside its package to a module that does not import the importer (directly or
    not). Otherwise it is a back-import that hides a cycle: pass the records instead (docs/architecture.md)."""
    runtime = _graph()[0]
    up = []
    for module, targets in _graph(type_checking=True)[0].items():
        a = _layer_of(module)
        for t in sorted(targets):
            if (module, t) in TYPE_ONLY_ALLOWED:
                continue
            b = _layer_of(t)
            if (a != b and RANK[b] >= RANK[a]) or _reaches(runtime, t, module):
                up.append(f"{module} ({a}) imports {t} ({b}) under TYPE_CHECKING")
    assert not up, "type-only imports that point up:\n" + "\n".join(up)


def test_type_only_allowed_still_exist() -> None:
    edges = _graph(type_checking=True)[0]
    stale = [f"{a} -> {b}" for a, b in TYPE_ONLY_ALLOWED if b not in edges.get(a, set())]
    assert not stale, "remove these from TYPE_ONLY_ALLOWED:\n" + "\n".join(stale)


def test_the_checker_sees_a_type_only_back_import() -> None:
    assert _reaches({"a": {"b"}, "b": {"c"}, "c": set()}, "a", "c")
    assert not _reaches({"a": {"b"}, "b": set(), "c": {"a"}}, "a", "c")


def test_the_checker_sees_an_upward_import() -> None:
    assert RANK[_layer_of("qref.core.encode")] < RANK[_layer_of("qref.schemes.block")]
    assert RANK[_layer_of("qref.formats.records")] < RANK[_layer_of("qref.core.decode")]
