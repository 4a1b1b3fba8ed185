"""The package layout is the architecture: feeds -> pipeline -> store -> queries/fit -> web/api.

These tests read the source (no imports run), so a forbidden dependency fails here even when it
sits inside a function or behind TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"

# What each lower layer may import of the app (itself always).
ALLOWED: dict[str, tuple[str, ...]] = {
    "app.core": ("app.core",),
    "app.store": ("app.store", "app.core"),
}
FORBIDDEN_FOR_PIPELINE = ("app.web", "app.api", "app.queries", "app.main", "app.cli")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """Absolute names of the app modules `path` imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = list(_outside_functions(tree)) if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from app.store import data_cache` imports the submodule app.store.data_cache.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "app" or name.startswith("app.")}


def _outside_functions(node: ast.AST) -> list[ast.AST]:
    """Every node not inside a function body (TYPE_CHECKING blocks included)."""
    found: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        found.append(child)
        found.extend(_outside_functions(child))
    return found


def _modules(package: Path) -> list[Path]:
    return sorted(package.rglob("*.py"))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_nothing_above_them(layer: str) -> None:
    package = ROOT.joinpath(*layer.split("."))
    bad = {
        f"{_module_name(path)} imports {name}"
        for path in _modules(package)
        for name in _imports(path)
        if not _within(name, ALLOWED[layer]) and _module_exists(name)
    }
    assert not bad, sorted(bad)


def test_pipeline_does_not_import_the_web_layers() -> None:
    bad = {
        f"{_module_name(path)} imports {name}"
        for path in _modules(APP / "pipeline")
        for name in _imports(path)
        if _within(name, FORBIDDEN_FOR_PIPELINE)
    }
    assert not bad, sorted(bad)


def test_app_root_holds_at_most_eight_modules() -> None:
    modules = sorted(p.name for p in APP.glob("*.py"))
    assert len(modules) <= 8, modules


def test_no_import_cycles_between_app_modules() -> None:
    """Imports outside functions (TYPE_CHECKING ones too) form no cycle between modules."""
    graph: dict[str, set[str]] = {}
    for path in _modules(APP):
        name = _module_name(path)
        graph[name] = {dep for dep in _imports(path, top_level_only=True) if dep != name}
    names = set(graph)
    graph = {name: {dep for dep in deps if dep in names} for name, deps in graph.items()}
    # A package's __init__ re-exporting its own modules is not a cycle worth failing on.
    graph = {
        name: {dep for dep in deps if not dep.startswith(name + ".")}
        for name, deps in graph.items()
    }
    cycles = _find_cycles(graph)
    assert not cycles, cycles


def _find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of size > 1."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _module_exists(name: str) -> bool:
    """`from app.store import Base` names an attribute, not a module: only modules count."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """Guard against a checker that cannot fail: a planted upward import is reported."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from app.queries.rows import x\n"
        "def f():\n    import app.web.pages\n"
    )
    names = _imports(planted)
    assert {"app.queries.rows", "app.web.pages"} <= names
    assert "app.queries.rows" in _imports(planted, top_level_only=True)
    assert "app.web.pages" not in _imports(planted, top_level_only=True)
    assert _find_cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
