"""Floods against a real server: connections that never finish their headers are closed, event
streams are capped, and a name the store does not have is asked of the store once, not per
request."""

from __future__ import annotations

import http.server
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.loopback import http_server, wait_for
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

PATIENCE_S = 30.0
STREAMS = 2


class Origin(http.server.BaseHTTPRequestHandler):
    """An HTTP store that has nothing, and counts what it was asked."""

    asked: list[str] = []

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.asked.append(f"HEAD {self.path}")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    with http_server(Origin) as url:
        yield url


@pytest.fixture(scope="module")
def server(origin: str, serve: Servers) -> testing.RunningServer:
    return serve(origin, workers=1, header_timeout_s=1, max_event_streams=STREAMS)


def test_a_connection_that_never_finishes_its_headers_is_closed(
    server: testing.RunningServer,
) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        sock.settimeout(PATIENCE_S)
        try:
            sock.recv(1024)  # a close (or a 408 before it) both free the connection
        except TimeoutError:
            pytest.fail(f"the server still held the connection after {PATIENCE_S:g} s")
    assert httpx.get(f"{server.url}/ping").status_code == 200


def test_event_streams_past_cap_are_503(
    server: testing.RunningServer,
) -> None:
    """Event streams past the cap are 503 and a closed one frees its place."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with contextlib_streams(client, STREAMS) as opened:
            assert all(r.status_code == 200 for r in opened)
            # a stream registers as its body starts, a moment after its first frame: poll
            wait_for(lambda: stream_status(client) == 503, "a stream past the cap to be 503")
            refused = client.get("/events")
            assert refused.status_code == 503, refused.text
            assert "--max-event-streams" in refused.json()["message"]
            documented = client.get("/openapi.json").json()["paths"]["/events"]["get"]
            assert "503" in documented["responses"]  # and so in docs/api.md

        def another_opens() -> bool:
            with client.stream("GET", "/events") as response:
                return response.status_code == 200

        wait_for(another_opens, "a place to free once the streams closed")


def stream_status(client: httpx.Client) -> int:
    with client.stream("GET", "/events") as response:
        return response.status_code


class contextlib_streams:  # noqa: N801 - reads as a context manager
    """`count` open GET /events responses, closed on exit."""

    def __init__(self, client: httpx.Client, count: int) -> None:
        self.managers = [client.stream("GET", "/events") for _ in range(count)]

    def __enter__(self) -> list[httpx.Response]:
        responses = [manager.__enter__() for manager in self.managers]
        # kept: a line iterator dropped closes its response, and the server ends its stream
        self.lines = [response.iter_lines() for response in responses]
        for lines in self.lines:
            next(lines)  # the first frame
        return responses

    def __exit__(self, *exc: object) -> None:
        for manager in self.managers:
            manager.__exit__(None, None, None)


def test_missing_name_is_asked_of_store_once(server: testing.RunningServer, tmp_path: Path) -> None:
    """A missing name asked again costs no second store request."""
    Origin.asked.clear()
    for _ in range(5):
        response = httpx.post(f"{server.url}/models/nowhere/x.joblib/invoke", json=[1])
        assert response.status_code == 404, response.text
    assert len(Origin.asked) == 1, Origin.asked
