"""The extras table against pyproject.toml, and the one-line error of a command whose extra is
missing, in this process (a module set to None in sys.modules is how Python sees it absent)."""

from __future__ import annotations

import re
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from fresh_env import ROOT
from packaging.requirements import Requirement

from modelhost.cli.extras import COMMAND_EXTRAS, EXTRA_MODULES, MissingExtra, extra_of
from modelhost.cli.main import Commands, main

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# distributions whose import name is not their own
IMPORT_NAMES = {
    "scikit-learn": "sklearn",
    "torchserve": "ts",
    "pyyaml": "yaml",
    "tensorflow-cpu": "tensorflow",
    "pygrpc-native": "pygrpc_native",
}
TOOLKIT = "pip install 'modelhost[toolkit]'"


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(project["optional-dependencies"])


def test_every_user_extra_is_in_the_table() -> None:
    """Every user extra is in the table with its modules."""
    declared = {name: reqs for name, reqs in extras().items() if name not in ("all", "dev")}
    modules = {
        name: {IMPORT_NAMES.get(Requirement(r).name, Requirement(r).name) for r in reqs}
        for name, reqs in declared.items()
    }
    assert modules == {name: set(mods) for name, mods in EXTRA_MODULES.items()}


def test_all_is_every_user_extra() -> None:
    [requirement] = extras()["all"]
    assert Requirement(requirement).extras == set(EXTRA_MODULES)


def test_toolkit_commands_are_checked_and_the_rest_are_not() -> None:
    listed = main.list_commands(click.Context(main))
    assert set(listed) == {"serve", "examples", "config", "fleet", *COMMAND_EXTRAS}
    assert set(COMMAND_EXTRAS.values()) <= set(EXTRA_MODULES)


def test_serve_imports_no_other_command() -> None:
    """The toolkit's modules cost a server's start 120 ms: `serve` leaves them unimported."""
    probe = (
        "import sys, click; from modelhost.cli.main import main; "
        "assert main.get_command(click.Context(main), 'serve') is not None; "
        "print(sorted(m for m in sys.modules if m.startswith(('modelhost.toolkit', "
        "'modelhost.cli.bench', 'modelhost.cli.fleet', 'aiohttp', 'rich', 'matplotlib'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["bench", "tune", "simulate", "cost"])
def test_a_missing_toolkit_is_one_line_and_exit_2(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    args = {
        "bench": ["http://127.0.0.1:9"],
        "tune": ["--model-store", "models"],
        "simulate": [str(ROOT / "pyproject.toml")],
        "cost": ["--throughput", "10"],
    }[command]
    result = CliRunner().invoke(main, [command, *args])
    assert result.exit_code == 2
    assert (
        result.output
        == f"Error: modelhost {command} needs rich, which is not installed: {TOOLKIT}\n"
    )


def test_help_works_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0
    assert "Load-test URL" in result.output


def test_an_import_missed_by_the_check_is_mapped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    group = Commands()

    @group.command()
    def late() -> None:
        import matplotlib.figure  # noqa: F401

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(group, ["late"])
    assert result.exit_code == 2
    assert (
        result.output
        == f"Error: modelhost late needs matplotlib, which is not installed: {TOOLKIT}\n"
    )


def test_an_unknown_missing_module_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    group = Commands()

    @group.command()
    def broken() -> None:
        import modelhost_no_such_module  # type: ignore[import-not-found]  # noqa: F401

    result = CliRunner().invoke(group, ["broken"])
    assert isinstance(result.exception, ModuleNotFoundError)


def test_extra_of_takes_the_top_level_name() -> None:
    assert extra_of("rich.console") == "toolkit"
    assert extra_of("onnxruntime") == "onnx"
    assert extra_of("numpy") is None
    assert extra_of(None) is None


def test_the_message_lists_every_missing_module() -> None:
    error = MissingExtra("cost", ["aiohttp", "rich", "matplotlib"], "toolkit")
    assert isinstance(error, click.ClickException)
    assert error.message == (
        f"modelhost cost needs aiohttp, rich and matplotlib, which are not installed: {TOOLKIT}"
    )


def test_the_extras_table_of_the_docs_is_pyprojects() -> None:
    """configuration.md's extras table has a row for each extra, naming what it installs."""
    doc = (ROOT / "docs" / "configuration.md").read_text().split("## Using it", 1)[0]
    rows = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+) \|", doc, re.MULTILINE))
    declared = {name: reqs for name, reqs in extras().items() if name not in ("all", "dev")}
    assert set(rows) == {*declared, "all", "dev"}
    unnamed = {
        name: [Requirement(r).name for r in reqs if Requirement(r).name not in rows[name]]
        for name, reqs in declared.items()
    }
    assert {name: names for name, names in unnamed.items() if names} == {}
