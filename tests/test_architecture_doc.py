"""docs/architecture.md's table of what each part may not import, held against the import graph:
a broken rule fails, and so does a part of the package the table does not name (or one it names
that is gone). Each check also runs on a made-up document and package, to show that it fails."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_architecture import PACKAGE, graph, made_up_package

DOC = Path(__file__).parents[1] / "docs" / "architecture.md"
NAMED = re.compile(r"`([\w.]+)/?`")
ABOVE = re.compile(r"\*above\* stands for[^:]*:(.*?)\.\s", re.DOTALL)


def part_of(module: str) -> str:
    return module.split(".")[0]


def part_named(cell: str) -> str:
    """`host/` and `units.py` alike, as the part's module name."""
    return cell.strip().strip("`").removesuffix("/").removesuffix(".py")


def rules(text: str) -> dict[str, set[str]]:
    """Each part the table names, with the parts its row says it may not import."""
    above_match = ABOVE.search(text)
    above = set(NAMED.findall(above_match.group(1))) if above_match else set()
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[part_named(cells[0])] = cells
    parts = set(rows)
    found = {}
    for part, (_, cell) in rows.items():
        if cell.startswith("any other part"):
            allowed = set(NAMED.findall(cell.partition(" but ")[2]))
            found[part] = parts - allowed - {part}
        else:
            named = set(NAMED.findall(cell))
            found[part] = named | (above if "*above*" in cell else set())
    return found


def part_edges(edges: dict[str, set[str]]) -> dict[str, set[tuple[str, str]]]:
    """Each part's imports of other parts, as (importing module, imported module)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for module, targets in edges.items():
        if not module:  # the package's own __init__
            continue
        found.setdefault(part_of(module), set()).update(
            (module, target) for target in targets if part_of(target) != part_of(module)
        )
    return found


def broken_rules(table: dict[str, set[str]], edges: dict[str, set[str]]) -> list[str]:
    """Each import that a row of the table forbids: "host.x -> http.y"."""
    return sorted(
        f"{module} -> {target}"
        for part, pairs in part_edges(edges).items()
        for module, target in pairs
        if part_of(target) in table.get(part, set())
    )


def unnamed_parts(table: dict[str, set[str]], edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Parts of the package without a row, and rows of parts the package no longer has."""
    parts = set(part_edges(edges))
    return {"no row": parts - set(table), "gone": set(table) - parts}


def test_the_doc_table_holds_for_the_imports() -> None:
    assert broken_rules(rules(DOC.read_text()), graph()) == []


def test_every_part_has_a_row_in_the_doc() -> None:
    assert unnamed_parts(rules(DOC.read_text()), graph(PACKAGE)) == {"no row": set(), "gone": set()}


def test_the_table_is_read_as_written() -> None:
    table = rules(DOC.read_text())
    assert {"http", "rpc", "cli"} <= table["host"]
    assert table["records"] == set(table) - {"records"}
    assert table["units"] == set(table) - {"units", "errors"}


MADE_UP_DOC = """\
*above* stands for the parts above the core: `http`. And so on.

| part | may not import |
|---|---|
| `host/` | *above*, `cache` |
| `cache/` | any other part but `units` |
| `units.py` | any other part |
| `http/` | `cli` |
| `gone.py` | any other part |
"""


def test_a_broken_rule_and_a_missing_row_are_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "__init__.py": "",
            "host/__init__.py": "",
            "host/a.py": "def f():\n    from modelhost.http import b\n",
            "host/c.py": "from ..cache import d\n",
            "cache/__init__.py": "",
            "cache/d.py": "from modelhost import units\n",
            "units.py": "",
            "http/__init__.py": "",
            "http/b.py": "from modelhost.host import a\n",
            "extra.py": "",
        },
    )
    table = rules(MADE_UP_DOC)
    edges = graph(package)
    assert broken_rules(table, edges) == ["host.a -> http.b", "host.c -> cache.d"]
    assert unnamed_parts(table, edges) == {"no row": {"extra"}, "gone": {"gone"}}


# The code names the prose mentions, held against the package: a renamed or moved name fails.
ROOT = Path(__file__).parents[1]
SPAN = re.compile(r"`([^`\n]+)`")
FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)  # the Layout's test reads those
PATH = re.compile(r"^\w[\w.-]*(/[\w.-]*)*$")
FILE = re.compile(r"\.(py|proto|md|toml|properties|json|html|sh|conf|map)$")
DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.\w+)+")
SNAKE = re.compile(r"^[a-z]+(?:_[a-z0-9]+)+$")
CAMEL = re.compile(r"^[A-Z][A-Za-z]+$")
PROTO_NAME = re.compile(r"^\s*(?:service|message)\s+(\w+)", re.MULTILINE)


def assigned(node: ast.AST) -> set[str]:
    """Names a subtree defines: functions, classes, parameters, assignment targets."""
    found: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(child.name)
        elif isinstance(child, ast.arg):
            found.add(child.arg)
        elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            found.add(child.id)
        elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
            found.add(child.attr)
    return found


def code_names(package: Path) -> tuple[set[str], dict[str, set[str]], set[str]]:
    """Every name the package defines, each class's members, and its modules' and folders' names."""
    names: set[str] = set()
    classes: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names |= assigned(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, set()).update(assigned(node))
    for proto in package.rglob("*.proto"):
        names.update(PROTO_NAME.findall(proto.read_text()))
    modules = {path.stem for path in package.rglob("*.py")} | {
        path.name for path in package.rglob("*") if path.is_dir()
    }
    return names, classes, modules


def path_exists(span: str, root: Path, package: Path) -> bool:
    """A path as the prose writes it: from the package, from the repository, or a file's name."""
    candidates = [base / span for base in (package, root)] + [package / f"{span}.py"]
    if any(candidate.exists() for candidate in candidates):
        return True
    return "/" not in span and any(package.rglob(span))


def unknown_names(text: str, root: Path, package: Path) -> list[str]:
    """Paths and code names in backticks that the package and repository do not have."""
    names, classes, modules = code_names(package)
    unknown = []
    for span in SPAN.findall(FENCED.sub("", text)):
        if PATH.match(span) and ("/" in span or FILE.search(span)):
            checked = "/" in span or span.endswith(".py")  # not the files users bring
            unknown += [span] if checked and not path_exists(span, root, package) else []
            continue
        if (SNAKE.match(span) or CAMEL.match(span)) and span not in names:
            unknown.append(span)
        for dotted in DOTTED.findall(span):
            first, *_, last = dotted.split(".")
            if first in classes:
                unknown += [] if last in classes[first] else [dotted]
            elif first in modules and last not in names:
                unknown.append(dotted)
    return sorted(set(unknown))


def test_the_code_names_in_the_doc_exist() -> None:
    assert unknown_names(DOC.read_text(), ROOT, PACKAGE) == []


def test_a_gone_code_name_is_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "__init__.py": "",
            "host/__init__.py": "",
            "host/copies.py": "class Copies:\n    def claim_loader(self, name): ...\n",
            "host/residency.py": "class Residency:\n    def unload(self, on_done): ...\n",
        },
    )
    text = (
        "`Copies.claim_loader` `Residency.claim_loader` `host/copies.py` `host/gone.py` "
        "`residency.unload(on_done)` `residency.vanish` `on_done` `on_gone` `Copies` `Gone` "
        "`GET /sizing` `modelhost.toml` `host.properties` `.mar`"
    )
    assert unknown_names(text, tmp_path, package) == [
        "Gone",
        "Residency.claim_loader",
        "host/gone.py",
        "on_gone",
        "residency.vanish",
    ]
