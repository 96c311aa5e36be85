"""`modelhost config check [FILE]`: what modelhost makes of a migrating user's settings."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from modelhost.config import explain, load_config, properties_file
from modelhost.config.settings import flag_name, is_secret, setting_names
from modelhost.config.tenancy import TOKENS_TABLE, read_tenant_tokens, tenants_on
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
    """Explain what each key of FILE (a config.properties, a modelhost.toml, a tenants file or a
    tenant tokens file; default: the config.properties serve reads) and each known variable set
    here maps to.

    Exits 1 if the server would refuse to start with them."""
    if file is not None and not file.is_file():
        raise click.BadParameter(f"no such file {file}", param_hint="FILE")
    modelhost_toml = file is not None and file.suffix == ".toml"
    tables = _tables(file) if file is not None and modelhost_toml else set()
    if file is not None and tables == {TOKENS_TABLE}:
        _check_tokens_file(file)
    if file is not None and tables and tables <= {"default", "tenants"}:
        _check_tenants_file(file)
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


def _tables(file: Path) -> set[str]:
    try:
        return set(tomllib.loads(file.read_text(encoding="utf-8-sig")))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return set()


def _check_tokens_file(file: Path) -> NoReturn:
    """Check a tenant tokens file as serve reads it; show no token."""
    try:
        tokens = read_tenant_tokens(file)
    except ConfigError as error:
        click.echo(f"the server would not start: {error}")
        sys.exit(1)
    tenants = len({tenant for _, tenant in tokens})
    click.echo(f"the server would start with the tenant tokens file {file}")
    click.echo(f"tokens: {len(tokens)}, tenants: {tenants}")
    sys.exit(0)


def _check_tenants_file(file: Path) -> NoReturn:
    """Check a tenants file as `serve --tenants-file` would."""
    try:
        if not tenants_on(load_config({}, os.environ).tenant_from):
            click.echo(
                f"{file} is a tenants file, read under the --tenant-from it is served with: "
                f"give it, as in MODELHOST_TENANT_FROM=header modelhost config check {file}"
            )
            sys.exit(1)
        load_config({"tenants_file": str(file)}, os.environ)
    except ConfigError as error:
        click.echo(f"the server would not start: {error}")
        sys.exit(1)
    click.echo(f"the server would start with the tenants file {file}")
    sys.exit(0)


def _echo_settings(file: Path) -> None:
    """Each key of a modelhost.toml as its flag."""
    try:
        settings = tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return
    names = setting_names()
    for key, value in settings.items():
        if key in names:
            shown = "(secret, not shown)" if is_secret(key) else repr(value)
            click.echo(f"{'setting':<9} {file}: {key} = {shown}\n          {flag_name(key)}")
            continue
        meant = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean {meant[0]}?)" if meant else ""
        click.echo(f"{'unknown':<9} {file}: {key} = {value!r}\n          no such setting{hint}")


config.add_command(check)
