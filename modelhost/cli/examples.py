"""`modelhost examples`: build a store of small real models to serve and try."""

from __future__ import annotations

import time
from pathlib import Path

import click


@click.command("examples")
@click.argument("directory", default="./models", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--tenants",
    default=100,
    show_default=True,
    type=click.IntRange(min=0),
    help="Tenants to make; each gets churn, fraud and wine models.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the tenants' training samples.")
def examples(directory: Path, tenants: int, seed: int) -> None:
    """Build an example model store in DIRECTORY (default ./models); a rerun is instant."""
    from modelhost.examples import build_example_store, curl_line
    from modelhost.testing import iris_rows

    started = time.perf_counter()
    names = build_example_store(directory, tenants=tenants, seed=seed)
    elapsed_s = time.perf_counter() - started
    click.echo(
        f"{len(names)} models in {directory} ({elapsed_s:.1f} s); more curl lines in "
        f"{directory / 'examples' / 'README.txt'}"
    )
    click.echo(f"serve:  modelhost serve --model-store {directory}")
    click.echo(f"invoke: {curl_line(f'/models/{names[0]}/invoke', iris_rows(1)[0])}")
