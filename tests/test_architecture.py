"""The package's shape, held by a test: no import circles, the core imports nothing above it, and
modules stay small. Read from the source with `ast`, so lazy imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import modelhost

PACKAGE = Path(modelhost.__file__).parent
# the core and the records it emits; observe/, http/, toolkit/, cli/ and app.py sit above them
CORE = ("host", "cache", "scheduler", "workers", "records", "errors", "manifest", "names", "units")
ABOVE = ("observe", "http", "toolkit", "cli", "app")
MAX_LINES = 400
TABLES = {"config", "http.openapi"}  # a settings table and the OpenAPI document: data, not logic


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports (a name imported from a package counts as the
    package unless it is a module itself)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("modelhost."):
                base = node.module.removeprefix("modelhost.")
                found |= {
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                }
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("modelhost.") for a in node.names}
    return {name for name in found if name in modules}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def in_layer(name: str, layer: tuple[str, ...]) -> bool:
    return any(name == top or name.startswith(top + ".") for top in layer)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([node, *component]))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    assert circles(graph()) == []


def test_the_core_imports_nothing_above_it() -> None:
    upward = [
        f"{name} -> {target}"
        for name, targets in graph().items()
        if in_layer(name, CORE)
        for target in targets
        if in_layer(target, ABOVE)
    ]
    assert upward == []


def test_modules_stay_small() -> None:
    long = {
        name: lines
        for name, path in ((module_name(p), p) for p in PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert set(long) <= TABLES, long


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
