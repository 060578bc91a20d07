"""The package layers: no import cycle between optfleet's packages, and the model layer beneath the domain.

Every module under optfleet/, models/ (optfleet.models) and solvers/
(optfleet.solvers) is parsed with ``ast``; the runtime imports are the ones
executed when the module is imported (module and class level, ``try``,
``with`` and ``if`` blocks), not those inside functions (imported when first
used) nor under ``if TYPE_CHECKING:`` (for type checkers only).  A package is
``optfleet.problems.<kind>`` for a kind's modules and the first two dotted
components otherwise (``optfleet.models``, ``optfleet.cli``, ``optfleet.registry``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import REPO

pytestmark = pytest.mark.unit

SOURCES = {"optfleet": REPO / "optfleet", "optfleet.models": REPO / "models", "optfleet.solvers": REPO / "solvers"}
MODEL_LAYER_MAY_IMPORT = ("optfleet.errors", "optfleet.queueing", "optfleet.hardware", "optfleet.models")
SOLVER_LAYER_MAY_IMPORT = ("optfleet.errors", "optfleet.numbers", "optfleet.solvers")


def modules(sources: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``sources`` (package -> folder)."""
    found = {}
    for prefix, folder in sources.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(imported module or name, line)`` for every import ``name`` executes when it is imported."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(body: list[ast.stmt]) -> Iterator[tuple[str, int]]:
        for node in body:
            if isinstance(node, ast.Import):
                yield from ((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                yield module, node.lineno
                yield from ((f"{module}.{alias.name}", node.lineno) for alias in node.names)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    yield from visit(node.body)
                yield from visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                    yield from visit(block)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                yield from visit(node.body)

    yield from visit(ast.parse(path.read_text()).body)


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["optfleet", "problems"] and len(parts) > 2 else parts[:2])


def import_graph(sources: dict[str, Path]) -> dict[str, dict[str, list[str]]]:
    """Module -> the optfleet modules it imports at runtime -> where (``file:line``)."""
    known = modules(sources)
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in known.items():
        targets = graph.setdefault(name, {})
        for target, line in runtime_imports(name, path):
            where = f"{path.parent.name}/{path.name}:{line}"
            if target in known and where not in targets.get(target, []):
                targets.setdefault(target, []).append(where)
    return graph


def package_cycles(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """One line per pair of packages that import each other, directly or through others, with the imports."""
    edges: dict[str, dict[str, list[str]]] = {}
    for module, targets in graph.items():
        for target, where in targets.items():
            if package_of(module) != package_of(target):
                edges.setdefault(package_of(module), {}).setdefault(package_of(target), []).extend(where)

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reach = {package: reachable(package) for package in edges}
    cycles = []
    for a in sorted(reach):
        for b in sorted(reach[a]):
            if a < b and a in reach.get(b, set()):
                towards_b = [t for t in edges[a] if t == b or b in reach.get(t, set())]
                cycles.append(f"{a} <-> {b}: {a} imports " + "; ".join(f"{t} ({', '.join(edges[a][t][:3])})" for t in towards_b))
    return cycles


def forbidden_imports(graph: dict[str, dict[str, list[str]]], layer: str, allowed: tuple[str, ...]) -> list[str]:
    """The runtime imports of ``layer``'s modules outside ``allowed`` (packages or modules), with where."""
    return sorted(
        f"{module} imports {target} ({', '.join(where)})"
        for module, targets in graph.items() if package_of(module) == layer
        for target, where in targets.items() if not any(target == ok or target.startswith(f"{ok}.") for ok in allowed)
    )


GRAPH = import_graph(SOURCES)


def test_no_package_imports_itself_through_others():
    assert package_cycles(GRAPH) == []


@pytest.mark.parametrize(("layer", "allowed"), [("optfleet.models", MODEL_LAYER_MAY_IMPORT), ("optfleet.solvers", SOLVER_LAYER_MAY_IMPORT)])
def test_the_model_and_solver_layers_import_only_what_lies_beneath(layer, allowed):
    assert forbidden_imports(GRAPH, layer, allowed) == []


def test_the_graph_sees_runtime_imports_only_and_finds_cycles(tmp_path):
    (tmp_path / "pkg" / "a").mkdir(parents=True)
    (tmp_path / "pkg" / "b").mkdir()
    (tmp_path / "pkg" / "a" / "__init__.py").write_text("from pkg.b import low\n")
    (tmp_path / "pkg" / "b" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "b" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n\ndef later():\n    from pkg import a\n")
    graph = import_graph({"pkg": tmp_path / "pkg"})
    assert set(graph["pkg.a"]) == {"pkg.b", "pkg.b.low"} and graph["pkg.b.low"] == {}
    assert package_cycles(graph) == []
    (tmp_path / "pkg" / "b" / "up.py").write_text("from ..a import *\n")
    assert [line.split(":")[0] for line in package_cycles(import_graph({"pkg": tmp_path / "pkg"}))] == ["pkg.a <-> pkg.b"]
