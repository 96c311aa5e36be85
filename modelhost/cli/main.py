"""The `modelhost` command: one subcommand per module in this folder, imported when it runs.

A command whose extra is missing exits 2 with one line saying what to install, never a traceback.
`modelhost serve` imports none of the toolkit's modules: they cost a server's start 120 ms.
"""

from __future__ import annotations

from typing import Any

import click

from modelhost import __version__
from modelhost.cli.extras import (
    COMMAND_EXTRAS,
    MissingExtra,
    checked_callback,
    command_or_stand_in,
    extra_of,
)

MODULES = {  # subcommand → its module
    "serve": "modelhost.cli.serve",
    "examples": "modelhost.cli.examples",
    "config": "modelhost.cli.config_check",
    "fleet": "modelhost.cli.fleet",
    **{name: f"modelhost.cli.{name}" for name in COMMAND_EXTRAS},
}


class Commands(click.Group):
    """The subcommands, each imported when asked for and checked for its extra."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in MODULES:
            self.add_command(command_or_stand_in(cmd_name, MODULES[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name or ""
        extra = COMMAND_EXTRAS.get(name)
        if extra is not None and cmd.callback is not None:
            cmd.callback = checked_callback(name, extra, cmd.callback)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            extra = extra_of(exc.name)
            if extra is None:
                raise
            command = ctx.invoked_subcommand or "command"
            raise MissingExtra(command, [(exc.name or "").partition(".")[0]], extra) from None


@click.group(cls=Commands)
@click.version_option(__version__, prog_name="modelhost")
def main() -> None:
    """Many models behind one endpoint, under memory and disk budgets."""


if __name__ == "__main__":
    main()
