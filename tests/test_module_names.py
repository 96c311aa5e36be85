"""pytest imports a test module outside a package by its file name alone, so two such modules of
one name stop the whole suite at collection; conftest.py files are pytest's own affair. The
check also runs on a made-up tree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def import_name(module: Path) -> str:
    """The name pytest imports it by: its packages' names, then its own."""
    parts = [module.stem]
    folder = module.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def clashes(root: Path) -> set[str]:
    names = Counter(import_name(module) for module in root.rglob("test_*.py"))
    return {name for name, count in names.items() if count > 1}


def test_no_two_test_modules_share_an_import_name() -> None:
    assert clashes(TESTS) == set()


def test_a_clash_is_found_and_a_package_keeps_apart(tmp_path: Path) -> None:
    for path in (
        "e2e/test_a.py",
        "rpc/test_a.py",
        "host/__init__.py",
        "host/test_b.py",
        "test_b.py",
        "conftest.py",
        "e2e/conftest.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert clashes(tmp_path) == {"test_a"}
