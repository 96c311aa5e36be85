"""The `modelhost` command: one subcommand per module in this folder, registered below."""

from __future__ import annotations

import click

from modelhost import __version__
from modelhost.cli.bench import bench
from modelhost.cli.cost import cost
from modelhost.cli.examples import examples
from modelhost.cli.serve import serve
from modelhost.cli.simulate import simulate
from modelhost.cli.tune import tune


@click.group()
@click.version_option(__version__, prog_name="modelhost")
def main() -> None:
    """Many models behind one endpoint, under memory and disk budgets."""


main.add_command(serve)
main.add_command(examples)
main.add_command(bench)
main.add_command(tune)
main.add_command(simulate)
main.add_command(cost)

if __name__ == "__main__":
    main()
