"""Bodies sent too slowly, on each path that reads HTTP/1.1: one that stops arriving, or that
trickles below --min-body-rate once --header-timeout-s has passed, closes its connection, and a
slow body above the rate is answered."""

from __future__ import annotations

import socket
import time

import pytest
from helpers.fronts import (
    answer_bytes,
    front_pids,
    hit_with_the_main_process_stopped,
    raw_request,
)
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

PATIENCE_S = 30.0
RATE = 200  # bytes a second
ROW = b"[[5.1, 3.5, 1.4, 0.2]]"
INVOKE = "/models/iris.joblib/invoke"
JSON = "content-type: application/json"
# answered before uvicorn (or by a front) up to 64 KiB, then uvicorn's protocol reads it; a front
# holds one up to 1 MiB, and relays a larger one to the main process
SIZES = {"small body": 1_000, "body past 64 KiB": 70_000, "body past 1 MiB": 1_100_000}


@pytest.fixture(scope="module", params=[1, 2], ids=["main process", "two fronts"])
def server(
    request: pytest.FixtureRequest, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> testing.RunningServer:
    store = tmp_path_factory.mktemp("store")
    testing.iris_logreg(store / "iris.joblib")
    server = serve(store, workers=1, fronts=request.param, header_timeout_s=1, min_body_rate=RATE)
    hit = raw_request(INVOKE, ROW, JSON)
    for front in front_pids(server):  # each front routes the model: it reads the body itself
        assert hit_with_the_main_process_stopped(server, hit, front=front)
    return server


def head(size: int) -> bytes:
    return f"POST {INVOKE} HTTP/1.1\r\nhost: x\r\n{JSON}\r\ncontent-length: {size}\r\n\r\n".encode()


def sent_until_closed(server: testing.RunningServer, size: int, every_s: float, step: int) -> float:
    """Seconds until the server closed a connection sending `size` bytes of body, `step` bytes
    every `every_s` after the first row; fails if it outlasts PATIENCE_S."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head(size) + ROW)
        sock.settimeout(every_s or PATIENCE_S)
        started, sent = time.monotonic(), len(ROW)
        while time.monotonic() - started < PATIENCE_S:
            try:
                if sock.recv(1024) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                if step and sent < size - step:
                    sock.sendall(b" " * step)
                    sent += step
            except ConnectionResetError:
                return time.monotonic() - started
    pytest.fail(f"the server still held the connection after {PATIENCE_S:g} s")


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES)
def test_a_body_that_stops_arriving_closes_its_connection(
    server: testing.RunningServer, size: int
) -> None:
    sent_until_closed(server, size, every_s=0, step=0)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES)
def test_a_body_trickled_below_the_minimum_rate_closes_its_connection(
    server: testing.RunningServer, size: int
) -> None:
    """A byte every 0.3 s never pauses past the timeout, yet falls below the rate."""
    sent_until_closed(server, size, every_s=0.3, step=1)


def test_a_slow_body_above_the_minimum_rate_is_answered(server: testing.RunningServer) -> None:
    """1,000 bytes over about 2 s, at 2.5 times the rate: past the timeout, answered."""
    size, step = 1_000, 100
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head(size) + ROW)
        sent = len(ROW)
        while sent < size:
            time.sleep(step / (2.5 * RATE))
            chunk = min(step, size - sent)
            sock.sendall(b" " * chunk)
            sent += chunk
        sock.settimeout(PATIENCE_S)
        answer = b""
        while (whole := answer_bytes(answer)) is None or len(answer) < whole:
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert answer.endswith(b'{"predictions":[0]}'), answer
