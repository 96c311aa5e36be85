"""`modelhost fleet hot-models`: keep the router's hot-model map in step with the traffic."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx

from modelhost.integrations import spread
from modelhost.toolkit.options import Number

POLL_TIMEOUT_S = 5.0


@click.group()
def fleet() -> None:
    """Commands for a fleet of modelhost instances behind a router."""


@fleet.command("hot-models")
@click.option(
    "--instance",
    "instances",
    multiple=True,
    required=True,
    metavar="URL",
    callback=lambda ctx, param, urls: tuple(map(base_url, urls)),
    help="an instance's base URL, once per instance",
)
@click.option(
    "--map",
    "map_path",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=lambda ctx, param, path: in_a_folder(path),
    required=True,
    help="the hot-model map nginx includes (deploy/nginx/modelhost-hot-models.map)",
)
@click.option(
    "--reload",
    "reload_command",
    default="nginx -s reload",
    show_default=True,
    help="run when the map changed; empty: none",
)
@click.option(
    "--interval",
    default=10.0,
    show_default=True,
    type=Number(float, 0),
    help="seconds between polls",
)
@click.option(
    "--min-rps",
    type=Number(float, 0),
    default=spread.MIN_RPS,
    show_default=True,
    help="a model under this many requests a second stays on one instance",
)
@click.option(
    "--rounds", type=Number(int, 0), default=0, help="stop after this many polls (0: never)"
)
def hot_models(
    instances: tuple[str, ...],
    map_path: Path,
    reload_command: str,
    interval: float,
    min_rps: float,
    rounds: int,
) -> None:
    """Spread hot models over more instances, and gather them back when they cool.

    A model gets one more instance for each half of an instance's fair share of the fleet's
    requests it carries (up to 4), its rate read from each instance's GET /sizing."""
    with httpx.Client(timeout=POLL_TIMEOUT_S) as client:
        before = poll(client, instances)
        done = 0
        while not rounds or done < rounds:
            time.sleep(interval)
            after = poll(client, instances)
            observed = spread.rates(before, after)
            current = spread.parse(map_path.read_text()) if map_path.exists() else {}
            wanted = spread.spread(observed, len(instances), current, min_rps)
            if wanted != current or not map_path.exists():
                rewrite(map_path, wanted, reload_command)
            # an instance that missed this poll is measured from its last answer
            before = [new or old for old, new in zip(before, after, strict=True)]
            done += 1


def base_url(url: str) -> str:
    """An instance's URL, refused at start unless it is HTTP's with a host."""
    parts = httpx.URL(url) if "://" in url else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.host:
        raise click.BadParameter(
            f"{url!r} is no base URL: give its scheme and host, e.g. http://{url.split('/')[-1]}",
            param_hint="--instance",
        )
    return url


def in_a_folder(path: Path) -> Path:
    """The map's path, refused at start unless its folder exists (it is written beside it)."""
    if not path.parent.is_dir():
        raise click.BadParameter(
            f"no folder {path.parent} to write the map in: create it, or give the path the "
            "router includes",
            param_hint="--map",
        )
    return path


def poll(client: httpx.Client, instances: tuple[str, ...]) -> list[spread.Poll | None]:
    """Every instance's sizing; None for one that does not answer."""
    polls: list[spread.Poll | None] = []
    for url in instances:
        try:
            sizing = client.get(f"{url.rstrip('/')}/sizing").raise_for_status().json()
        except (httpx.HTTPError, ValueError) as error:
            click.echo(f"warning: {url}: {error}; left out this round", err=True)
            polls.append(None)
            continue
        polls.append(spread.Poll.from_sizing(time.monotonic(), sizing))
    return polls


def rewrite(map_path: Path, wanted: dict[str, int], reload_command: str) -> None:
    """Replace the map in one rename, so nginx never reads half, then reload the router."""
    partial = map_path.with_name(map_path.name + ".partial")
    partial.write_text(spread.render(wanted))
    partial.replace(map_path)
    click.echo(f"hot models: {wanted or 'none'}", err=True)
    if not reload_command:
        return
    try:
        done = subprocess.run(shlex.split(reload_command), capture_output=True, text=True)
        failure = done.stderr.strip() if done.returncode else ""
    except OSError as error:  # not found, not executable
        failure = str(error)
    if failure:
        click.echo(f"error: {reload_command!r} failed: {failure}", err=True)
        sys.exit(1)
