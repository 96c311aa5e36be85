"""The `modelhost` command: one subcommand per module in this folder.

A command whose extra is missing exits 2 with one line saying what to install, never a traceback.
"""

from __future__ import annotations

from typing import Any

import click

from modelhost import __version__
from modelhost.cli.config_check import config
from modelhost.cli.examples import examples
from modelhost.cli.extras import (
    COMMAND_EXTRAS,
    MissingExtra,
    checked_callback,
    command_or_stand_in,
    extra_of,
)
from modelhost.cli.fleet import fleet
from modelhost.cli.serve import serve


class Commands(click.Group):
    """The subcommands, each checked for its extra."""

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


main.add_command(serve)
main.add_command(examples)
main.add_command(config)
main.add_command(fleet)
for _name in COMMAND_EXTRAS:
    main.add_command(command_or_stand_in(_name))

if __name__ == "__main__":
    main()
