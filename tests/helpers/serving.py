"""Servers started for a test module on a store with settings by name, stopped together."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelhost import testing


class Servers(contextlib.ExitStack):
    """`servers(store, workers=2)` starts `modelhost serve` in a fresh folder holding its cache
    and log and returns it running; leaving the `with` stops every one still running. `env` and
    `command` are RunningServer's: the server's whole environment, another `modelhost serve`."""

    def __init__(self, folders: pytest.TempPathFactory) -> None:
        super().__init__()
        self.folders = folders
        self.started: list[testing.RunningServer] = []

    def __call__(
        self,
        store: Path | str,
        *,
        env: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
        **settings: object,
    ) -> testing.RunningServer:
        work = self.folders.mktemp("server")
        args = testing.serve_args(store, work / "cache", **settings)
        server = testing.RunningServer(args, work, env=env, command=command)
        self.started.append(server)
        return self.enter_context(server)


def invoke(http: httpx.Client, name: str, body: object, **params: str) -> httpx.Response:
    """`POST /models/{name}/invoke` of `body` as JSON, with query parameters."""
    headers = {"content-type": "application/json"}
    return http.post(
        f"/models/{name}/invoke", content=json.dumps(body), headers=headers, params=params
    )


def scraped(server: testing.RunningServer, name: str) -> float:
    """The sum of `name`'s samples in one /metrics scrape (counted in it, for a gauge of it)."""
    text = httpx.get(f"{server.url}/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def in_flight(server: testing.RunningServer) -> float:
    """The requests and calls the server is answering, this scrape among them."""
    return scraped(server, "modelhost_http_requests_in_flight")


def until_answering(server: testing.RunningServer, count: int, timeout_s: float = 30) -> None:
    """Until the server answers `count` requests besides the scrape: a signal sent after
    a fixed sleep may come before the request on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while in_flight(server) < count + 1 and time.monotonic() < deadline:
        time.sleep(0.02)
