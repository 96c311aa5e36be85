"""docs/architecture.md's Layout, held against the tree: every top-level module and folder of
`modelhost/` has a line, and every line names something that exists. The check also runs on a
made-up document and tree, to show that it fails."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "architecture.md"
LAYOUT = re.compile(r"^## Layout\n.*?^```\n(.*?)^```", re.DOTALL | re.MULTILINE)
ENTRY = re.compile(r"^( ?)( ?)(\S+)")
PACKAGE = "modelhost/"


def listed(text: str) -> tuple[set[str], set[str]]:
    """The Layout's entries: those under `modelhost/` (two spaces in) and the repository's."""
    match = LAYOUT.search(text)
    assert match, "docs/architecture.md has no '## Layout' section with a code block"
    package: set[str] = set()
    repository: set[str] = set()
    for line in match.group(1).splitlines():
        entry = ENTRY.match(line)
        if entry is None or entry.group(1) != entry.group(2):
            continue  # a description's continuation, indented further
        (package if entry.group(1) else repository).add(entry.group(3))
    return package, repository


def on_disk(folder: Path) -> set[str]:
    """A folder's entries as the Layout writes them: folders with a trailing slash."""
    return {
        path.name + ("/" if path.is_dir() else "")
        for path in folder.iterdir()
        if path.name != "__pycache__"  # bytecode Python writes, not part of the tree
    }


def mismatches(text: str, root: Path) -> dict[str, set[str]]:
    """Package entries the Layout lacks, and listed entries that do not exist."""
    package, repository = listed(text)
    actual = on_disk(root / PACKAGE)
    return {
        "not listed": actual - package,
        "gone": (package - actual) | {name for name in repository if not (root / name).exists()},
    }


def test_the_layout_matches_the_tree() -> None:
    assert mismatches(DOC.read_text(), ROOT) == {"not listed": set(), "gone": set()}


def test_the_layout_is_read_as_written() -> None:
    package, repository = listed(DOC.read_text())
    assert {"host/", "http/", "rpc/", "launch.py", "__main__.py"} <= package
    assert {PACKAGE, "tests/", "docs/", "Makefile"} <= repository


MADE_UP_DOC = """\
## Layout

```
modelhost/
  host/          the core
  gone.py        a module that was moved
                 away, two lines
tests/           the tests
nowhere/         a folder that is not there
```
"""


def test_a_missing_and_a_gone_entry_are_found(tmp_path: Path) -> None:
    for name in ("modelhost/host", "modelhost/http", "modelhost/__pycache__", "tests"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "modelhost" / "units.py").write_text("")
    assert mismatches(MADE_UP_DOC, tmp_path) == {
        "not listed": {"http/", "units.py"},
        "gone": {"gone.py", "nowhere/"},
    }
