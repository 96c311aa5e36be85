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
    assert numbers("1, 2,4", int) == [1, 2, 4]
    with pytest.raises(ValueError, match="'1,x'"):
        numbers("1,x", int)
