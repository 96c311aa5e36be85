"""`modelhost serve`: its flags are generated from the Config fields, never written here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from modelhost.config import CliOption, cli_options, load_config
from modelhost.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def _click_option(option: CliOption) -> Callable[[F], F]:
    """A click option for one setting; load_config parses and checks the value."""
    if option.is_bool:
        flags = f"{option.flag}/--no-{option.flag[2:]}"
        return click.option(flags, option.name, default=None, help=option.help)
    return click.option(option.flag, option.name, metavar=option.metavar, help=option.help)


def _config_options(func: F) -> F:
    for option in reversed(list(cli_options())):
        func = _click_option(option)(func)
    return func


@click.command(context_settings={"max_content_width": 100})
@_config_options
@click.pass_context
def serve(ctx: click.Context, /, **values: object) -> None:
    """Serve the models in the store over HTTP."""
    given = {
        name: value
        for name, value in values.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    try:
        config = load_config(given)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    from modelhost.launch import serve as run_server  # --help stays fast

    sys.exit(run_server(config))
