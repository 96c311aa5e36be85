"""The package's shape, held by a test: no import circles, the core reaches nothing above it, and
modules stay small. Read from the source with `ast`, so lazy imports inside functions count too;
each check also runs on a small made-up package, to show that it fails where it should."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import modelhost

PACKAGE = Path(modelhost.__file__).parent
# the core and what it reads (config, resources, urls); observe/, http/, toolkit/, cli/,
# launch.py and app.py sit above them
CORE = (
    *("host", "cache", "scheduler", "workers", "records", "errors", "manifest", "names", "units"),
    "fair",
    "fair_slots",
    "documents",
    *("config", "resources", "urls"),
)
ABOVE = ("observe", "http", "rpc", "fronts", "toolkit", "cli", "app", "launch")
MAX_LINES = 400  # of logic: data tables (module-level constants, class fields) aside


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, package: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports: `import modelhost.a.b`, `from modelhost.a import b`,
    `from modelhost import a` and `from ..a import b` alike. A name imported from a package
    counts as the package unless it is a module itself."""
    importer = module_name(path, package).split(".")
    if path.name != "__init__.py":
        importer = importer[:-1]  # a relative import starts from the module's package
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.removeprefix("modelhost.") for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = importer[: len(importer) - node.level + 1] + [node.module or ""]
            elif node.module and node.module.split(".")[0] == "modelhost":
                parts = node.module.split(".")[1:]
            else:
                continue
            base = ".".join(part for part in parts if part)
            named = {f"{base}.{a.name}".lstrip(".") for a in node.names}
            found |= {name if name in modules else base for name in named}
    return found & modules - {""}  # "": the package's own __init__ (its __version__)


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of `package` and the modules of `package` it imports."""
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, package, modules) - {name} for name, path in paths.items()}


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


def upward_paths(edges: dict[str, set[str]]) -> list[str]:
    """Each way a core module reaches a module above it, directly or through modules that are
    in neither layer: "host.x -> helpers -> observe"."""
    found = []
    for start in sorted(name for name in edges if in_layer(name, CORE)):
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop()
            for target in sorted(edges[path[-1]] - seen):
                seen.add(target)
                if in_layer(target, ABOVE):
                    found.append(" -> ".join([*path, target]))
                elif not in_layer(target, CORE):  # a core module is checked from its own start
                    paths.append([*path, target])
    return found


def logic_lines(source: str) -> int:
    """Lines of a module that are not data: module-level assignments (tables, constants) and
    the fields a class declares are left out."""
    tree = ast.parse(source)
    data = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        data += [node for node in cls.body if isinstance(node, ast.AnnAssign)]
    table_lines = {n for node in data for n in range(node.lineno, (node.end_lineno or 0) + 1)}
    return len(source.splitlines()) - len(table_lines)


def long_modules(package: Path = PACKAGE) -> dict[str, int]:
    lines = {module_name(p, package): logic_lines(p.read_text()) for p in package.rglob("*.py")}
    return {name: count for name, count in lines.items() if count > MAX_LINES}


def test_no_module_imports_itself_in_a_circle() -> None:
    assert circles(graph()) == []


def test_the_core_reaches_nothing_above_it() -> None:
    assert upward_paths(graph()) == []


def test_modules_stay_small() -> None:
    assert long_modules() == {}


APOLOGY = re.compile(r"\b(size limit|size test|line limit|near the limit)\b", re.IGNORECASE)


def apologies(package: Path = PACKAGE) -> list[str]:
    """Modules whose docstring excuses their size instead of being split along their jobs."""
    return [
        module_name(path, package)
        for path in sorted(package.rglob("*.py"))
        if APOLOGY.search(ast.get_docstring(ast.parse(path.read_text())) or "")
    ]


def test_no_module_apologises_for_its_size() -> None:
    assert apologies() == []


def test_an_apology_is_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "pool.py": '"""The pool. The module is near the size limit because it is one job."""\n',
            "bodies.py": '"""Request bodies within their size limits."""\n',
        },
    )
    assert apologies(package) == ["pool"]


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The house from the ground up: a module imports its own floor or those below, never above.
FLOORS = (
    CORE + ("deadlines", "run_dirs", "testing"),
    ("observe",),
    ("protocols", "toolkit", "examples"),
    ("http", "rpc", "fronts"),
    ("app",),
    ("launch", "integrations"),
    ("cli",),
    ("__main__",),
)
HOST_PARTS = ("residency", "disk", "registry")  # only `ModelHost`'s methods reach these


def floor_of(module: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if in_layer(module, floor))


def arrows_up(edges: dict[str, set[str]]) -> list[str]:
    """Each import of a module on a higher floor: "host.x -> http.y"."""
    return [
        f"{module} -> {target}"
        for module in sorted(edges)
        if module
        for target in sorted(edges[module])
        if target and floor_of(target) > floor_of(module)
    ]


def host_parts_reached(package: Path = PACKAGE) -> list[str]:
    """Each `host.residency…`, `self.host.disk…` or `host.registry…` outside host/, which only
    the host's own methods may reach (observe/ reads the statistics records, whose `disk` is a
    record)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        if in_layer(module, ("host", "observe")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in HOST_PARTS:
                owner = ast.unparse(node.value)
                if owner == "host" or owner.endswith(".host"):
                    found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def http_imports(edges: dict[str, set[str]]) -> list[str]:
    """Each import of `http/` from `rpc/` or `protocols/`: the transports share the protocols'
    floor, not each other's helpers."""
    return [
        f"{module} -> {target}"
        for module in sorted(edges)
        if in_layer(module, ("rpc", "protocols"))
        for target in sorted(edges[module])
        if in_layer(target, ("http",))
    ]


def test_neither_rpc_nor_the_protocols_import_http() -> None:
    assert http_imports(graph()) == []


def test_an_import_of_http_from_rpc_is_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "rpc/oip.py": "from modelhost.http.errors import status_of\n",
            "http/errors.py": "from modelhost.protocols import status\n",
            "protocols/status.py": "",
        },
    )
    assert http_imports(graph(package)) == ["rpc.oip -> http.errors"]


def test_every_part_has_a_floor() -> None:
    assert [m for m in graph() if m and not any(in_layer(m, f) for f in FLOORS)] == []


def test_no_arrow_up_the_house() -> None:
    assert arrows_up(graph()) == []


def test_only_the_host_reaches_its_parts() -> None:
    assert host_parts_reached() == []


def test_an_arrow_up_and_a_reached_part_are_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "protocols/oip.py": "from modelhost.http import app\n",
            "http/app.py": "def f(self):\n    return self.host.residency.unload\n",
            "host/model_host.py": "def f(host):\n    return host.disk\n",
        },
    )
    assert arrows_up(graph(package)) == ["protocols.oip -> http.app"]
    assert host_parts_reached(package) == ["http.app:2 self.host.residency"]


def made_up_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "modelhost" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "modelhost"


def test_upward_import_is_found(tmp_path: Path) -> None:
    """Every form of import counts and an upward one is found."""
    package = made_up_package(
        tmp_path,
        {
            "__init__.py": "",
            "observe/__init__.py": "",
            "observe/metrics.py": "",
            "http/__init__.py": "",
            "http/app.py": "",
            "testing.py": "from modelhost.observe import metrics\n",
            "host/__init__.py": "from modelhost import observe\n",
            "host/lazy.py": "def f():\n    import modelhost.http.app\n",
            "host/relative.py": "from ..http import app\n",
            "cache.py": "from modelhost import testing\n",
        },
    )
    edges = graph(package)
    assert edges["host"] == {"observe"}
    assert edges["host.lazy"] == edges["host.relative"] == {"http.app"}
    assert upward_paths(edges) == [
        "cache -> testing -> observe.metrics",
        "host -> observe",
        "host.lazy -> http.app",
        "host.relative -> http.app",
    ]


def test_a_circle_through_a_package_is_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "host/__init__.py": "from modelhost.host.a import x\n",
            "host/a.py": "import modelhost.host\n",
        },
    )
    assert circles(graph(package)) == [["host", "host.a"]]


def test_long_module_is_found(tmp_path: Path) -> None:
    """A long module is found but its tables do not count."""
    logic = "".join(f"def f{i}():\n    return {i}\n" for i in range(MAX_LINES // 2 + 1))
    table = "TABLE = {\n" + "".join(f"    {i}: {i},\n" for i in range(1000)) + "}\n"
    fields = "class Row:\n" + "".join(f"    f{i}: int\n" for i in range(1000))
    package = made_up_package(
        tmp_path,
        {"long.py": logic, "table.py": table + fields, "short.py": "def f():\n    return 1\n"},
    )
    assert long_modules(package) == {"long": MAX_LINES + 2}


# The records: the dataclasses of the memory tier (`Resident` and friends), and the state each
# part of host/ keeps on itself. Each is written only by the module that defines it.
RECORD_MODULES = ("cache/memory/ledger.py",)
PARTS = "host"
MUTATORS = {"add", "append", "clear", "discard", "extend", "insert", "pop", "popitem"}
MUTATORS |= {"remove", "setdefault", "update"}


def declared(tree: ast.AST, fields: bool = True, state: bool = True) -> set[str]:
    """Attribute names a module declares: its dataclasses' fields, what its methods set on self."""
    names = set()
    for node in ast.walk(tree):
        if fields and isinstance(node, ast.ClassDef):
            names |= {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
        if (
            state
            and isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and ast.unparse(node.value) == "self"
        ):
            names.add(node.attr)
    return names


def record_owners(package: Path = PACKAGE) -> dict[str, str]:
    """Each attribute of a record or a part, and the one module that owns it (names that
    two modules declare tell nothing, and are left out)."""
    owners: dict[str, set[str]] = {}
    sources = [(package / path, True, False) for path in RECORD_MODULES]
    sources += [(path, False, True) for path in sorted((package / PARTS).glob("*.py"))]
    for path, fields, state in sources:
        for name in declared(ast.parse(path.read_text()), fields, state):
            owners.setdefault(name, set()).add(module_name(path, package))
    return {name: next(iter(modules)) for name, modules in owners.items() if len(modules) == 1}


def writes(tree: ast.AST) -> list[tuple[int, ast.Attribute]]:
    """Each attribute of something other than `self` the module assigns, deletes or changes in
    place: `r.workers = ...`, `r.bytes += 1`, `r.sources[k] = v`, `r.leaving.add(x)`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value] if node.func.attr in MUTATORS else []
        else:
            continue
        for target in targets:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                while isinstance(item, ast.Subscript):
                    item = item.value
                if isinstance(item, ast.Attribute) and ast.unparse(item.value) != "self":
                    found.append((node.lineno, item))
    return found


def foreign_writes(package: Path = PACKAGE) -> list[str]:
    """Writes to a record's or a part's attributes outside the module that owns them, in every
    module that imports an owner (one that does not holds none of their records)."""
    owners = record_owners(package)
    edges = graph(package)
    found = []
    for path in sorted(package.rglob("*.py")):
        module, tree = module_name(path, package), ast.parse(path.read_text())
        if not edges[module] & set(owners.values()):
            continue
        own = declared(tree)  # a record of its own may share a name with ours
        for line, target in writes(tree):
            owner = owners.get(target.attr)
            if owner and owner != module and target.attr not in own:
                found.append(f"{module}:{line} writes {ast.unparse(target)} ({owner}'s)")
    return found


def test_no_module_writes_another_parts_records() -> None:
    assert foreign_writes() == []


def test_a_write_to_another_parts_record_is_found(tmp_path: Path) -> None:
    memory = "import dataclasses\n@dataclasses.dataclass\nclass Resident:\n    workers: list\n"
    copies = "class Copies:\n    def __init__(self):\n        self.leaving = set()\n"
    scaling = (
        "from modelhost.cache.memory.ledger import Resident\n"
        "from modelhost.host.copies import Copies\n"
        "class Scaling:\n"
        "    def __init__(self):\n"
        "        self.ranges = {}\n"
        "    def drop(self, resident, copies):\n"
        "        self.ranges['a'] = 1\n"
        "        resident.workers = []\n"
        "        resident.workers.append(2)\n"
        "        copies.leaving.add(('a', 2))\n"
    )
    package = made_up_package(
        tmp_path,
        {
            "cache/memory/ledger.py": memory,
            "host/copies.py": copies,
            "host/scaling.py": scaling,
            "cache/disk.py": "def touch(artifact):\n    artifact.workers = []\n",  # no import
        },
    )
    assert foreign_writes(package) == [
        "host.scaling:8 writes resident.workers (cache.memory.ledger's)",
        "host.scaling:9 writes resident.workers (cache.memory.ledger's)",
        "host.scaling:10 writes copies.leaving (host.copies's)",
    ]


# Calls that pass six or more values by position, where two of them can swap unseen, and the
# ones left in modules being moved by others: the number only goes down.
MAX_POSITIONAL = 5
POSITIONAL_ALLOWED = {
    "workers.pool.supervisor calls asyncio.create_subprocess_exec": 1,  # a command line
}


def positional_calls(package: Path = PACKAGE) -> dict[str, int]:
    """Each module's calls that pass more than `MAX_POSITIONAL` arguments by position."""
    found: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and len(node.args) > MAX_POSITIONAL:
                call = f"{module_name(path, package)} calls {ast.unparse(node.func)}"
                found[call] = found.get(call, 0) + 1
    return found


def test_no_call_passes_more_than_five_values_by_position() -> None:
    over = {
        call: count
        for call, count in positional_calls().items()
        if count > POSITIONAL_ALLOWED.get(call, 0)
    }
    assert over == {}


def test_a_call_with_six_positional_values_is_found(tmp_path: Path) -> None:
    package = made_up_package(
        tmp_path,
        {
            "rows.py": "Row(1, 2, 3, 4, 5, 6)\nRow(1, 2, 3, 4, 5, f=6)\nRow(*values)\n",
            "log.py": "logger.info('%s', 1, 2, 3, 4, 5)\n",
        },
    )
    assert positional_calls(package) == {"rows calls Row": 1, "log calls logger.info": 1}
