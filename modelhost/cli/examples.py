"""`modelhost examples`: build a store of small real models to serve and try."""

from __future__ import annotations

import time
from pathlib import Path

import click

from modelhost.config import Config
from modelhost.toolkit.options import Number


@click.command("examples")
@click.argument("directory", default="./models", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--tenants",
    default=100,
    show_default=True,
    type=Number(int, 0),
    help="Tenants to make; each gets churn, fraud and wine models.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=Number(int, 0),
    help="Seed of the tenants' training samples.",
)
@click.option(
    "--port",
    default=Config.port,
    show_default=True,
    type=click.IntRange(min=1, max=65535),
    help="The port the server will listen on: the printed commands and curl lines use it.",
)
def examples(directory: Path, tenants: int, seed: int, port: int) -> None:
    """Build an example model store in DIRECTORY (default ./models)."""
    from modelhost.examples import build_example_store, try_lines

    started = time.perf_counter()
    names = build_example_store(directory, tenants=tenants, seed=seed)
    elapsed_s = time.perf_counter() - started
    click.echo(f"{len(names)} models in {directory} ({elapsed_s:.1f} s)")
    for line in try_lines(directory, port):
        click.echo(line)
