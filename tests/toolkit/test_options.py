"""Each command's options are one dataclass: every field is a flag, and what click parses builds
the options object unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from modelhost.cli.bench import bench
from modelhost.cli.cost import cost
from modelhost.cli.examples import examples
from modelhost.cli.fleet import hot_models
from modelhost.cli.simulate import simulate
from modelhost.cli.tune import tune
from modelhost.toolkit.cost import CostOptions
from modelhost.toolkit.options import cli_fields, click_options, numbers, option
from modelhost.toolkit.run import BenchOptions
from modelhost.toolkit.tune import TuneOptions


@pytest.mark.parametrize(
    ("command", "options"), [(bench, BenchOptions), (tune, TuneOptions), (cost, CostOptions)]
)
def test_fields_and_flags_match(command: click.Command, options: type) -> None:
    """Every field is a flag and every flag a field."""
    names = {p.name for p in command.params if isinstance(p, click.Option)}
    assert names == {field.name for field, _ in cli_fields(options)}
    defaults = {p.name: p.default for p in command.params if isinstance(p, click.Option)}
    for field in dataclasses.fields(options):
        if field.name in defaults:
            assert defaults[field.name] == field.default


def test_parsed_values_build_the_options_object(tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Options:
        rate_rps: float = option(0.0, flag="--rate")
        users: int = option(1, short="-u")
        mode: str = option("a", choices=("a", "b"))
        grid: tuple[str, ...] = option(())
        out: Path | None = option(None)
        quiet: bool = option(False)

    seen: list[Options] = []

    @click.command()
    @click_options(Options)
    def command(**values: object) -> None:
        seen.append(Options(**values))  # type: ignore[arg-type]

    args = ["--rate", "2.5", "-u", "3", "--mode", "b", "--grid", "x=1", "--grid", "y=2"]
    result = CliRunner().invoke(command, [*args, "--out", str(tmp_path), "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [Options(rate_rps=2.5, users=3, mode="b", grid=("x=1", "y=2"),
                            out=tmp_path, quiet=True)]  # fmt: skip
    assert CliRunner().invoke(command, ["--mode", "c"]).exit_code == 2


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        BenchOptions("http://127.0.0.1", None)  # type: ignore[misc]


def test_numbers_name_a_bad_list() -> None:
    assert numbers("1, 2,4", int, "--users") == [1, 2, 4]
    for text in ("1,x", "1,0", "1,nan", "1,inf", f"1,{10**20}"):
        with pytest.raises(ValueError, match=f"--users '{text}': write comma-separated numbers"):
            numbers(text, float if "n" in text else int, "--users")


# each command's arguments besides the option, valid: only the number is wrong
ARGUMENTS = {"simulate": ["access.log"], "examples": ["store"], "hot-models": ["127.0.0.1:9"]}


def _number_options() -> list[tuple[click.Command, str]]:
    commands = [bench, tune, cost, simulate, hot_models, examples]
    return [
        (command, param.opts[0])
        for command in commands
        for param in command.params
        if isinstance(param, click.Option) and param.type.name.split()[0] in ("integer", "float")
    ]


@pytest.mark.parametrize(("command", "flag"), _number_options())
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", str(10**20), "-1"])
def test_a_number_past_any_use_is_refused_naming_its_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: click.Command, flag: str, value: str
) -> None:
    """`bench --duration inf` and `-c 10**20` ran forever, `--timeout nan` and a NaN price passed
    every check, `simulate --target -1` was an IndexError and `examples --seed -1` a ValueError."""
    monkeypatch.chdir(tmp_path)  # a command that ran would write its report here
    (tmp_path / "access.log").write_text("")
    arguments = ARGUMENTS.get(command.name or "", [])
    result = CliRunner().invoke(command, [*arguments, flag, value])
    assert result.exit_code == 2, result.output
    assert f"'{flag}'" in result.output and value in result.output, result.output
