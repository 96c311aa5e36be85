"""Servers started for a test module on a store with settings by name, stopped together."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import pytest

from modelhost import testing


class Servers(contextlib.ExitStack):
    """`servers(store, workers=2)` starts `modelhost serve` in a fresh folder holding its cache
    and log and returns it running; leaving the `with` stops every one still running. `env` and
    `command` are RunningServer's: the server's whole environment, another `modelhost serve`."""

    def __init__(self, folders: pytest.TempPathFactory) -> None:
        super().__init__()
        self.folders = folders

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
        return self.enter_context(testing.RunningServer(args, work, env=env, command=command))


def invoke(http: httpx.Client, name: str, body: object, **params: str) -> httpx.Response:
    """`POST /models/{name}/invoke` of `body` as JSON, with query parameters."""
    headers = {"content-type": "application/json"}
    return http.post(
        f"/models/{name}/invoke", content=json.dumps(body), headers=headers, params=params
    )
