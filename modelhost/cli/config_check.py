"""`modelhost config check [FILE]`: what modelhost makes of a migrating user's settings."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

import click

from modelhost.config import explain, load_config, properties_file
from modelhost.config.settings import flag_name, setting_names
from modelhost.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@click.group("config")
def config() -> None:
    """Check configuration brought from MMS, TorchServe or SageMaker."""


@click.command("check")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
def check(file: Path | None) -> None:
    """Explain what each key of FILE (a config.properties, or a modelhost.toml: any .toml;
    default: the config.properties serve reads) and each known variable set here maps to.

    Exits 1 if the server would refuse to start with them."""
    if file is not None and not file.is_file():
        raise click.BadParameter(f"no such file {file}", param_hint="FILE")
    modelhost_toml = file is not None and file.suffix == ".toml"
    try:
        read = file if file is not None else properties_file(os.environ)
        rows = explain(None if modelhost_toml else read, os.environ)
    except ConfigError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)
    if file is not None and modelhost_toml:
        _echo_settings(file)
    for row in rows:
        click.echo(f"{row.outcome:<9} {row.source} = {row.value}\n          {row.detail}")
    flags = {("config" if modelhost_toml else "mms_config"): str(file)} if file else {}
    files = {"MMS_CONFIG_FILE": "", "TS_CONFIG_FILE": ""} if file else {}
    try:
        load_config(flags, {**os.environ, **files})
    except ConfigError as error:
        click.echo(f"\nthe server would not start: {error}")
        sys.exit(1)
    click.echo("\nthe server would start with these settings")


def _echo_settings(file: Path) -> None:
    """Each key of a modelhost.toml as its flag; a file that does not parse is left to
    load_config."""
    try:
        settings = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return
    names = setting_names()
    for key, value in settings.items():
        if key in names:
            click.echo(f"{'setting':<9} {file}: {key} = {value!r}\n          {flag_name(key)}")
            continue
        meant = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean {meant[0]}?)" if meant else ""
        click.echo(f"{'unknown':<9} {file}: {key} = {value!r}\n          no such setting{hint}")


config.add_command(check)
