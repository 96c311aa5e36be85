"""A corrupt but complete artifact (an HTML error page saved as model.joblib) does not stay
cached failing forever: its failed load deletes it from the disk tier, so the next request
downloads it again."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
from collections import Counter
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from helpers.loopback import http_server, wait_for
from helpers.stores import StaticHttpServer

from modelhost import testing
from modelhost.records.events import events_in

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
PAGE = b"<html><body>502 Bad Gateway</body></html>"


def test_corrupt_artifact_is_fetched_again(
    tmp_path: Path,
) -> None:
    """A corrupt artifact is dropped after its load fails and fetched again."""
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "m.joblib").write_bytes(PAGE)
    cache = tmp_path / "cache"
    with StaticHttpServer(origin) as store:
        args = testing.serve_args(store.url, cache, workers=1)  # type: ignore[arg-type]
        with (
            testing.RunningServer(args, tmp_path) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            invoke = "/models/m.joblib/invoke"
            failed = client.post(invoke, content=ROW, headers={"content-type": "application/json"})
            assert failed.status_code == 500, failed.text
            # renamed aside at once, removed by a thread a moment after the answer
            wait_for(lambda: not pages_in(cache), "the corrupt artifact to leave the cache")
            testing.iris_logreg(origin / "m.joblib")  # the store is mended
            mended = client.post(invoke, content=ROW, headers={"content-type": "application/json"})
            assert mended.status_code == 200, mended.text
            assert mended.headers["x-modelhost-cache"] == "remote"


def pages_in(cache: Path) -> list[Path]:
    """Files holding the error page; os.walk passes over folders removed while it walks."""
    found = []
    for folder, _, files in os.walk(cache):
        for path in (Path(folder, file) for file in files):
            with contextlib.suppress(OSError):
                if path.read_bytes() == PAGE:
                    found.append(path)
    return found


class CountingOrigin(http.server.SimpleHTTPRequestHandler):
    """A static HTTP store that counts the GETs of each path."""

    gets: ClassVar[Counter[str]] = Counter()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.gets[self.path] += 1
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_failed_load_is_answered_from_memory(
    tmp_path: Path,
) -> None:
    """A load that failed is answered again without fetching or evicting.

    The same version fails the same way: its error is remembered, so a client retrying a
    corrupt model neither downloads it each time nor evicts healthy models for it."""
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "corrupt.joblib").write_bytes(PAGE + b" " * 2**20)
    testing.iris_logreg(origin / "healthy.joblib")
    handler = functools.partial(CountingOrigin, directory=str(origin))
    with http_server(handler) as url:
        args = testing.serve_args(url, tmp_path / "cache", workers=1)
        with (
            testing.RunningServer(args, tmp_path) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            json_body = {"content-type": "application/json"}
            assert client.post("/models/healthy.joblib/invoke", content=ROW, headers=json_body)
            answers = [
                client.post("/models/corrupt.joblib/invoke", content=ROW, headers=json_body)
                for _ in range(5)
            ]
            events = list(events_in(server.log_text().splitlines()))
            (origin / "corrupt.joblib").unlink()
            testing.iris_logreg(origin / "corrupt.joblib")  # a new version: tried at once
            mended = client.post("/models/corrupt.joblib/invoke", content=ROW, headers=json_body)
    assert [a.status_code for a in answers] == [500] * 5
    assert len({a.json()["message"].split(" (")[0] for a in answers}) == 1
    assert "same version" in answers[-1].json()["message"]
    assert CountingOrigin.gets["/corrupt.joblib"] == 2  # the corrupt version once, the new once
    tried = [e for e in events if e["kind"] == "failure" and e.get("reason") == "load"]
    assert len(tried) == 1  # loaded once, so it made room (evicted) once at most
    assert mended.status_code == 200, mended.text
