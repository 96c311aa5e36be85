"""A request head is capped before it is taken in: a flood of headers, an endless URL and an
endless header value on one connection are refused (431 / 414) and the connection closed, while
other clients are served; heads within the caps, and bodies of any shape, are untouched."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from modelhost import testing
from modelhost.http.head_limits import MAX_HEAD_BYTES, MAX_HEADER_LINES, MAX_REQUEST_LINE_BYTES

pytestmark = pytest.mark.e2e

PATIENCE_S = 20.0
CHUNK = b"x" * 4096


def answer_to(server: testing.RunningServer, head: bytes, endless: bytes = b"") -> bytes:
    """What the server answers to `head`, then `endless` sent until it answers or closes."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(PATIENCE_S)
        sock.sendall(head)
        sent = len(head)
        while endless and sent < 64 * MAX_HEAD_BYTES:
            try:
                sock.sendall(endless)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(endless)
        return read_until_closed(sock)


def read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_flood_of_small_headers_is_431_and_closed(server: testing.RunningServer) -> None:
    answer = answer_to(server, b"GET /ping HTTP/1.1\r\nHost: x\r\n", b"X-A: b\r\n" * 512)
    assert status_of(answer) == 431
    assert b"header" in answer.split(b"\r\n\r\n", 1)[1].lower()


def test_an_endless_url_is_414_and_closed(server: testing.RunningServer) -> None:
    answer = answer_to(server, b"GET /", CHUNK)
    assert status_of(answer) == 414


def test_a_refused_head_reads_as_each_protocols_error(server: testing.RunningServer) -> None:
    """The refusal comes before any route: its body reads as TorchServe's and SageMaker's error
    (`message`) and as the Open Inference Protocol's (`error`), which Triton's clients print."""
    head = b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nX-Big: "
    refusal = json.loads(answer_to(server, head, CHUNK).split(b"\r\n\r\n", 1)[1])
    assert refusal["code"] == 431 and refusal["error"] == refusal["message"]
    assert "send fewer or shorter headers" in refusal["error"]


def test_an_endless_header_value_is_431_and_closed(server: testing.RunningServer) -> None:
    answer = answer_to(server, b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ", CHUNK)
    assert status_of(answer) == 431


def test_heads_at_the_caps_are_served(server: testing.RunningServer) -> None:
    url = "/ping?" + "a" * (MAX_REQUEST_LINE_BYTES - 64)
    headers = {f"x-h{i}": "v" for i in range(MAX_HEADER_LINES - 8)}
    response = httpx.get(f"{server.url}{url}", headers=headers, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text


def test_body_lines_are_not_headers(
    server: testing.RunningServer,
) -> None:
    """A body of many lines sent with its head is not counted as headers.

    A CSV or pretty-printed JSON body arrives in the head's packet: its lines are no headers."""
    body = json.dumps([testing.iris_rows(1)[0]] * 2000, indent=1).encode()
    assert body.count(b"\n") > 10 * MAX_HEADER_LINES
    head = (
        b"POST /models/iris.pkl/invoke HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    assert status_of(answer_to(server, head + body)) == 200


def test_other_clients_are_served_while_a_head_floods(server: testing.RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as flooding:
        flooding.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 64)
        assert httpx.get(f"{server.url}/ping", timeout=PATIENCE_S).status_code == 200


def test_head_split_over_packets_is_not_body(
    server: testing.RunningServer,
) -> None:
    """A head whose end straddles two packets is not counted into its body."""
    body = json.dumps([testing.iris_rows(1)[0]] * 4000, indent=1).encode()
    head = (
        b"POST /models/iris.pkl/invoke HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r" % len(body)
    )
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(PATIENCE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head)
        time.sleep(0.2)  # two packets: the server reads the head's last byte with the body
        sock.sendall(b"\n" + body)
        assert status_of(read_until_closed(sock)) == 200
