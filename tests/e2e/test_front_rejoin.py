"""`--fronts 2`: a front's connection relayed to the main process (a miss, a management call)
comes back to the front once every relayed request is answered, and its later hits are the
front's own; what cannot be followed stays relayed, and every answer is right and in order."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.fronts import accepted_by, front_pids
from helpers.serving import Servers

from modelhost import testing

ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 2.8, 4.3, 1.3]]
PREDICTED = b'{"predictions":[0,2,1]}'
HEALTHY = b'{"status":"Healthy"}'
PING = b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n"
TABLE_S = 0.5  # the front's table has a model loaded this long ago
WAIT_S = 60.0
OPENED: list[Client] = []


@pytest.fixture(autouse=True)
def closed_after() -> Iterator[None]:
    """Every connection a test opened is closed, even when it fails."""
    yield
    while OPENED:
        OPENED.pop().close()


@pytest.fixture(scope="module")
def fronted(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=2, fronts=2, memory_budget="4GiB")


@pytest.fixture(scope="module")
def alone(store: Path, serve: Servers) -> testing.RunningServer:
    """The main process alone on its port: the answers a front's must match."""
    return serve(store, workers=2, memory_budget="4GiB")


class Held(io.BufferedReader):
    """The socket's one reader, kept open across the answers http.client reads from it."""

    def close(self) -> None:
        pass


class Client:
    """One keep-alive connection, written raw, its answers read in order from one buffer."""

    def __init__(self, server: testing.RunningServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
        self.file = Held(socket.SocketIO(self.sock, "rb"))
        OPENED.append(self)

    def makefile(self, mode: str) -> Held:
        return self.file  # as http.client.HTTPResponse asks a socket

    def send(self, *requests: bytes) -> None:
        self.sock.sendall(b"".join(requests))

    def raw(self) -> bytes:
        """The next answer as sent, head and body: one with a content-length."""
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = self.file.readline()
            assert line, head
            head += line
        [length] = [x for x in head.lower().split(b"\r\n") if x.startswith(b"content-length:")]
        return head + self.file.read(int(length.split(b":")[1]))

    def parsed(self, method: str = "GET") -> tuple[int, bytes]:
        """The next answer's status and body, however framed."""
        import http.client

        response = http.client.HTTPResponse(self, method=method)  # type: ignore[arg-type]
        response.begin()
        return response.status, response.read()

    def close(self) -> None:
        self.sock.close()


def on(server: testing.RunningServer) -> Client:
    """A fresh connection, accepted by a front, nothing sent yet."""
    client = Client(server)
    accepted_by(client.sock, front_pids(server))
    return client


def invoke(model: str, *headers: str) -> bytes:
    body = json.dumps(ROWS).encode()
    head = [f"POST /models/{model}/invoke HTTP/1.1", "host: x", f"content-length: {len(body)}"]
    head += ["content-type: application/json", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def body_of(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def masked(answer: bytes) -> list[bytes]:
    """The answer's lines, the date's, the timings' and the request id's values masked: they
    differ by request."""
    return [
        line.split(b":")[0]
        if line.startswith((b"date:", b"server-timing:", b"x-request-id:"))
        else line
        for line in answer.split(b"\r\n")
    ]


@contextmanager
def stopped(server: testing.RunningServer, client: Client) -> Iterator[None]:
    """The main process stopped: what answers `client` now is its front (or nothing, in time)."""
    time.sleep(TABLE_S)
    client.sock.settimeout(5)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)
        client.sock.settimeout(WAIT_S)


def front_hits(server: testing.RunningServer, client: Client, model: str) -> list[bytes]:
    """Three hits on `client` answered with the main process stopped."""
    with stopped(server, client):
        answers = []
        for _ in range(3):
            client.send(invoke(model))
            answers.append(client.raw())
    assert [body_of(a) for a in answers] == [PREDICTED] * 3
    return answers


def test_hits_after_a_miss_are_the_fronts_own(
    fronted: testing.RunningServer, alone: testing.RunningServer
) -> None:
    """A cold model's first invocation is relayed and loads it; the connection's next ones are
    answered by the front, byte for byte as a main process answers a hit."""
    model = "tenants/t000.joblib"
    client = on(fronted)
    client.send(invoke(model))
    assert body_of(client.raw()) == PREDICTED
    answers = front_hits(fronted, client, model)
    client.close()
    main = Client(alone)
    main.send(invoke(model), invoke(model))
    main.raw()  # the miss
    assert masked(answers[0]) == masked(main.raw())


def test_pipelined_requests_keep_their_order_across_the_switch(
    fronted: testing.RunningServer,
) -> None:
    """Requests written together with a miss, and others written while it loads (waiting to
    know where they go): every answer in the order asked, then the front's own hits."""
    model = "tenants/t001.joblib"
    client = on(fronted)
    client.send(invoke(model), PING, invoke(model))
    time.sleep(0.05)  # the miss is loading
    client.send(PING)
    client.send(invoke(model), PING, invoke(model))
    expected = [PREDICTED, HEALTHY, PREDICTED, HEALTHY, PREDICTED, HEALTHY, PREDICTED]
    assert [body_of(client.raw()) for _ in expected] == expected
    front_hits(fronted, client, model)
    client.send(PING, invoke(model), PING)
    assert [body_of(client.raw()) for _ in range(3)] == [HEALTHY, PREDICTED, HEALTHY]
    client.close()


def test_a_management_call_then_hits_are_the_fronts(fronted: testing.RunningServer) -> None:
    """Management calls relayed between hits: each answered, and the hits after each the front's."""
    model = "tenants/t002.joblib"
    client = on(fronted)
    client.send(invoke(model))
    assert body_of(client.raw()) == PREDICTED
    for _ in range(2):  # the second call on the relay's connection kept from the first
        client.send(b"GET /models HTTP/1.1\r\nhost: x\r\n\r\n")
        status, listing = client.parsed()
        assert status == 200 and model.encode() in listing
        front_hits(fronted, client, model)
    client.close()


def test_chunked_bodies_both_ways_then_hits_are_the_fronts(fronted: testing.RunningServer) -> None:
    """A miss whose body is chunked, then an index streamed back chunked: both followed to
    their ends, and the hits after them the front's."""
    model = "tenants/t003.joblib"
    body = json.dumps(ROWS).encode()
    head = f"POST /models/{model}/invoke HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n"
    chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, body[:10], len(body) - 10, body[10:])
    client = on(fronted)
    client.send(head.encode() + b"content-type: application/json\r\n\r\n", chunks)
    assert client.parsed("POST") == (200, PREDICTED)
    index = b"POST /v2/repository/index HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"
    client.send(index)
    status, listing = client.parsed("POST")
    assert status == 200 and model.encode() in listing
    front_hits(fronted, client, model)
    client.close()


def test_head_and_continue_stay_right_on_the_relay(fronted: testing.RunningServer) -> None:
    """A HEAD's bodiless answer and a 100-continue's interim one are not followed: the
    connection stays on the relay, and every answer after them is still right."""
    model = "tenants/t004.joblib"
    client = on(fronted)
    client.send(invoke(model))
    assert body_of(client.raw()) == PREDICTED
    client.send(b"HEAD /ping HTTP/1.1\r\nhost: x\r\n\r\n")
    assert client.parsed("HEAD") == (200, b"")
    client.send(invoke(model), PING)
    assert [body_of(client.raw()) for _ in range(2)] == [PREDICTED, HEALTHY]
    request = invoke(model, "expect: 100-continue")
    head, _, body = request.partition(b"\r\n\r\n")
    client.send(head + b"\r\n\r\n")
    assert client.file.readline().startswith(b"HTTP/1.1 100 ")
    assert client.file.readline() == b"\r\n"
    client.send(body)
    assert body_of(client.raw()) == PREDICTED
    client.send(invoke(model))
    assert body_of(client.raw()) == PREDICTED
    client.close()


def test_connection_close_is_answered_then_closed(fronted: testing.RunningServer) -> None:
    """`Connection: close` on a miss, and on a hit after the connection came back to the front:
    each answered right, then the connection closed."""
    model = "tenants/t005.joblib"
    client = on(fronted)
    client.send(invoke(model, "connection: close"))
    assert body_of(client.raw()) == PREDICTED and client.file.read() == b""
    client.close()
    client = on(fronted)
    client.send(invoke(model))
    assert body_of(client.raw()) == PREDICTED
    front_hits(fronted, client, model)
    client.send(invoke(model, "connection: close"))
    assert body_of(client.raw()) == PREDICTED and client.file.read() == b""
    client.close()
