"""A corrupt but complete artifact (an HTML error page saved as model.joblib) does not stay
cached failing forever: its failed load deletes it from the disk tier, so the next request
downloads it again."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import httpx
import pytest
from helpers.loopback import wait_for
from helpers.stores import StaticHttpServer

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
PAGE = b"<html><body>502 Bad Gateway</body></html>"


def test_a_corrupt_artifact_is_dropped_after_its_load_fails_and_fetched_again(
    tmp_path: Path,
) -> None:
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
