"""URLs models are loaded from: `allowed_urls` decides on the URL that is really fetched, and
secrets in a URL are never shown."""

from __future__ import annotations

import asyncio
import http.server
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.loopback import http_server

from modelhost.cache.download import DownloadPolicy, download
from modelhost.cache.stores import Stores
from modelhost.errors import Forbidden, InvalidModelName, StoreError
from modelhost.urls import redact_url

BODY = b"model bytes"


class Recorder(http.server.BaseHTTPRequestHandler):
    """Serves /models/a.joblib, redirects /models/moved.joblib to /secret/, answers a
    presigned-style URL only with its query intact; records every path asked for."""

    asked: list[str] = []

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        self.asked.append(self.path)
        if self.path.startswith("/models/moved.joblib"):
            self.send_response(302)
            self.send_header("Location", "/secret/creds.joblib")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        ok = self.path in (
            "/models/a.joblib",
            "/secret/creds.joblib",
            "/models/p.joblib?sig=a%2Fb",
            "/models/q.joblib?sig=hunter2",
        )
        self.send_response(200 if ok else 404)
        self.send_header("Content-Length", str(len(BODY) if ok else 0))
        self.end_headers()
        if body and ok:
            self.wfile.write(BODY)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[str]:
    Recorder.asked = []
    with http_server(Recorder) as url:
        yield url


def fetch(stores: Stores, url: str, dest: Path) -> bytes:
    async def run() -> bytes:
        try:
            store, key = stores.locate(stores.admit(url))
            await download(store, key, dest, DownloadPolicy(attempts=1, timeout_s=10))
            return dest.read_bytes()
        finally:
            await stores.close()

    return asyncio.run(run())


def test_redirect_out_is_not_followed(origin: str, tmp_path: Path) -> None:
    """A redirect out of the allowed URLs is not followed."""
    stores = Stores(str(tmp_path), allowed_urls=(f"{origin}/models/*",))
    assert fetch(stores, f"{origin}/models/a.joblib", tmp_path / "a") == BODY
    with pytest.raises(StoreError, match="redirect"):
        fetch(
            Stores(str(tmp_path), (f"{origin}/models/*",)),
            f"{origin}/models/moved.joblib",
            tmp_path / "b",
        )
    assert "/secret/creds.joblib" not in Recorder.asked


def test_a_presigned_url_keeps_its_query_string(origin: str, tmp_path: Path) -> None:
    stores = Stores(str(tmp_path), allowed_urls=(f"{origin}/models/*",))
    assert fetch(stores, f"{origin}/models/p.joblib?sig=a%2Fb", tmp_path / "p") == BODY
    assert "/models/p.joblib?sig=a%2Fb" in Recorder.asked


@pytest.mark.parametrize(
    "tail",
    [
        "%2e%2e/secret/creds.joblib",
        "%2E%2E/secret/creds.joblib",
        ".%2e/secret/creds.joblib",
        "a/%2e%2e/%2e%2e/secret/creds.joblib",
        "%2e/a.joblib",
        "a%2fb/..%2f..%2fsecret.joblib",
    ],
)
def test_encoded_dots_stay_in_prefix(tail: str, tmp_path: Path) -> None:
    """Percent-encoded dots do not climb out of an allowed prefix."""
    stores = Stores(str(tmp_path), allowed_urls=("http://origin/models/*", "s3://b/models/*"))
    for root in ("http://origin/models/", "s3://b/models/"):
        with pytest.raises((InvalidModelName, Forbidden)):
            stores.admit(root + tail)


def test_folder_link_does_not_lead_out(tmp_path: Path) -> None:
    """A folder link inside the store does not lead out."""
    (tmp_path / "store").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret/creds.joblib").write_bytes(b"x")
    (tmp_path / "store/door").symlink_to(tmp_path / "secret", target_is_directory=True)
    stores = Stores(str(tmp_path / "store"))
    with pytest.raises(Forbidden):
        stores.admit("door/creds.joblib")  # relative: a path in the store, until resolved
    with pytest.raises(Forbidden):
        stores.admit((tmp_path / "store/door/creds.joblib").as_uri())
    with pytest.raises(InvalidModelName, match="outside the model store"):
        stores.url_of("door/creds.joblib")  # invoked by name


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:hunter2@host/m.joblib", "https://***@host/m.joblib"),
        (
            "https://host/m.joblib?X-Amz-Signature=abc&X-Amz-Expires=60",
            "https://host/m.joblib?X-Amz-Signature=***&X-Amz-Expires=***",
        ),
        ("s3://bucket/m.joblib", "s3://bucket/m.joblib"),
        ("file:///srv/models/m.joblib", "file:///srv/models/m.joblib"),
    ],
)
def test_credentials_in_a_url_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_the_download_event_shows_no_password_and_no_signature(origin: str, tmp_path: Path) -> None:
    from modelhost.cache.disk import DiskTier, UnpackLimits
    from modelhost.records.events import EventLog

    secret_url = origin.replace("http://", "http://user:pa55word@") + "/models/q.joblib?sig=hunter2"
    events = EventLog()
    stores = Stores(str(tmp_path / "store"), allowed_urls=("*",))
    disk = DiskTier(
        tmp_path / "cache",
        1 << 30,
        stores=stores,
        events=events,
        limits=UnpackLimits(1 << 30, 10),
        policy=DownloadPolicy(),
    )

    async def load() -> None:
        try:
            await disk.materialize("q", stores.admit(secret_url))
        finally:
            await stores.close()

    asyncio.run(load())
    shown = " ".join(event.to_json() for event in events.recent)
    assert '"download"' in shown
    assert "pa55word" not in shown and "hunter2" not in shown, shown
