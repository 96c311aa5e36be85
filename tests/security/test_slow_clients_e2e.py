"""Clients too slow, on each path that reads HTTP/1.1. A body that stops arriving, or trickles
below --min-body-rate once --header-timeout-s has passed, closes its connection; a slow body above
the rate is answered. A client that pipelines requests (hits, or others) and reads none of the
answers holds no more than the kernel's buffers and its connection's own, and is cut off after
--send-timeout-s; one that reads slowly but steadily gets every answer."""

from __future__ import annotations

import socket
import time

import psutil
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
SEND_TIMEOUT_S = 1.0
MiB = 2**20
FLOOD_BYTES = 64 * MiB  # far past the kernel's buffers and a connection's own
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
    testing.slow_handler_folder(store / "slow")
    server = serve(
        store,
        workers=1,
        fronts=request.param,
        header_timeout_s=1,
        min_body_rate=RATE,
        send_timeout_s=SEND_TIMEOUT_S,
    )
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


def unread_client(server: testing.RunningServer) -> socket.socket:
    """A connection with a small receive window, not blocking: the client reads nothing."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.setblocking(False)
    return sock


def flood(sock: socket.socket, seconds: float, request: bytes = b"") -> int:
    """Bytes of a pipelined `request` (a hit by default) the server took in `seconds`, up to
    FLOOD_BYTES."""
    requests = (request or raw_request(INVOKE, ROW, JSON)) * 512
    sent, deadline = 0, time.monotonic() + seconds
    while sent < FLOOD_BYTES and time.monotonic() < deadline:
        try:
            sent += sock.send(requests)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:  # cut off
            break
    return sent


def test_a_client_that_reads_no_answers_holds_bounded_memory(
    server: testing.RunningServer,
) -> None:
    """The server stops reading once the answers wait: the flood stays in the kernel's buffers."""
    with unread_client(server) as sock:
        assert flood(sock, seconds=5) < FLOOD_BYTES


def test_other_requests_pipelined_unread_hold_bounded_memory(
    server: testing.RunningServer,
) -> None:
    """Requests past hits are parsed by uvicorn's protocol, each into an object of its own:
    once some wait their turn, no more are read."""
    before = server_bytes(server)
    with unread_client(server) as sock:
        flood(sock, seconds=3, request=b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n")
        assert server_bytes(server) - before < FLOOD_BYTES


def server_bytes(server: testing.RunningServer) -> int:
    """The resident memory of the server's processes."""
    main = psutil.Process(server.pid)
    return sum(process.memory_info().rss for process in [main, *main.children(recursive=True)])


def test_a_client_that_reads_no_answers_is_cut_off(server: testing.RunningServer) -> None:
    with unread_client(server) as sock:
        flood(sock, seconds=0.5)
        started = time.monotonic()
        while time.monotonic() - started < PATIENCE_S:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):  # reset: the answers dropped
                return
            time.sleep(0.1)
    pytest.fail(f"the server still held the connection after {PATIENCE_S:g} s")


def test_a_client_reading_slowly_but_steadily_gets_every_answer(
    server: testing.RunningServer,
) -> None:
    """3,000 pipelined hits, their answers read 32 KiB every 0.2 s: writes wait on the client,
    but never for the send timeout."""
    count = 3_000
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(raw_request(INVOKE, ROW, JSON) * count)
        sock.settimeout(PATIENCE_S)
        answers = b""
        while answers.count(b"HTTP/1.1 ") < count or not answers.endswith(b"}"):
            time.sleep(0.2)
            chunk = sock.recv(32 * 1024)
            assert chunk, f"closed after {answers.count(b'HTTP/1.1 ')} answers"
            answers += chunk
    assert answers.count(b"HTTP/1.1 200 OK") == count


def test_a_deep_pipeline_behind_slow_answers_is_not_taken_for_a_slow_client(
    server: testing.RunningServer,
) -> None:
    """Past three answers of 0.8 s each, 30,000 pings in one send: the server stops reading
    partway through a head, which must not count against the client's timeout."""
    slow = raw_request("/models/slow/invoke", b'{"sleep": 0.8}', JSON)
    ping = b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n"
    count = 3 + 30_000
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(ping + slow * 3 + ping * 30_000)  # the first ping: uvicorn's from then on
        sock.settimeout(PATIENCE_S)
        answers = b""
        while answers.count(b"HTTP/1.1 ") < count + 1:
            chunk = sock.recv(65536)
            assert chunk, f"closed after {answers.count(b'HTTP/1.1 ')} answers"
            answers += chunk
    assert answers.count(b"HTTP/1.1 200 OK") == count + 1
