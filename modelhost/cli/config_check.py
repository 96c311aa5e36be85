"""`modelhost config check [FILE]`: what modelhost makes of a migrating user's settings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from modelhost.config import explain, load_config
from modelhost.errors import ConfigError


@click.group("config")
def config() -> None:
    """Check configuration brought from MMS, TorchServe or SageMaker."""


@click.command("check")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
def check(file: Path | None) -> None:
    """Explain what each key of FILE and each known variable set here maps to.

    Exits 1 if the server would refuse to start with them."""
    if file is not None and not file.is_file():
        raise click.BadParameter(f"no such file {file}", param_hint="FILE")
    try:
        rows = explain(file, os.environ)
    except ConfigError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)
    for row in rows:
        click.echo(f"{row.outcome:<9} {row.source} = {row.value}\n          {row.detail}")
    flags = {"mms_config": str(file)} if file is not None else {}
    try:
        load_config(flags, {**os.environ, "MMS_CONFIG_FILE": "", "TS_CONFIG_FILE": ""})
    except ConfigError as error:
        click.echo(f"\nthe server would not start: {error}")
        sys.exit(1)
    click.echo("\nthe server would start with these settings")


config.add_command(check)
