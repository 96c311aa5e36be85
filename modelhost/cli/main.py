"""The `modelhost` command: one subcommand per module in this folder, registered below."""

from __future__ import annotations

import click

from modelhost import __version__
from modelhost.cli.bench import bench
from modelhost.cli.examples import examples
from modelhost.cli.serve import serve


@click.group()
@click.version_option(__version__, prog_name="modelhost")
def main() -> None:
    """Many models behind one endpoint, under memory and disk budgets."""


main.add_command(serve)
main.add_command(examples)
main.add_command(bench)

if __name__ == "__main__":
    main()
