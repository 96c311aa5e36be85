"""Which process of a server started with `--fronts` holds a connection, and hits sent on a
front's connection while the main process is stopped, which only a front can answer."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time

import psutil

from modelhost import testing

ACCEPTED_S = 60.0
PUBLISHED_S = 1.0  # the main process's time to publish the table a front lacked
JSON_HEADERS = {"content-type": "application/json"}


def front_pids(server: testing.RunningServer) -> list[int]:
    children = psutil.Process(server.pid).children()
    return [p.pid for p in children if "modelhost.fronts" in " ".join(p.cmdline())]


def accepted_by(sock: socket.socket, pids: list[int]) -> int:
    """The pid of the process that accepted `sock`'s connection, once one has."""
    mine = sock.getsockname()[1]
    deadline = time.monotonic() + ACCEPTED_S
    while time.monotonic() < deadline:
        for pid in pids:
            held = psutil.Process(pid).net_connections("tcp")
            if any(c.raddr and c.raddr.port == mine for c in held):
                return pid
        time.sleep(0.01)
    raise AssertionError("no process accepted the connection")


class Connection(http.client.HTTPConnection):
    """A keep-alive connection that can tell which process accepted it."""

    def holder(self, fronts: list[int]) -> int | None:
        """The front's pid holding this connection, or None for the main process."""
        assert self.sock is not None
        mine = self.sock.getsockname()[1]
        for pid in fronts:
            held = psutil.Process(pid).net_connections("tcp")
            if any(c.raddr and c.raddr.port == mine for c in held):
                return pid
        return None

    def call(
        self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        content = None if body is None else json.dumps(body)
        sent = {**(JSON_HEADERS if body is not None else {}), **(headers or {})}
        self.request(method, path, body=content, headers=sent)
        response = self.getresponse()
        return response.status, response.read()


def connect(server: testing.RunningServer) -> Connection:
    connection = Connection("127.0.0.1", server.port, timeout=60)
    connection.connect()
    return connection


def direct_on_front(server: testing.RunningServer, front: int | None = None) -> Connection:
    """A fresh connection a front (`front`, if given) accepted, no request sent on it yet: it
    starts direct."""
    fronts = front_pids(server)
    while True:
        connection = connect(server)
        assert connection.sock is not None
        if front is None or accepted_by(connection.sock, fronts) == front:
            return connection
        connection.close()


def raw_request(path: str, body: bytes, *headers: str) -> bytes:
    """A whole POST's bytes, head and body."""
    head = [f"POST {path} HTTP/1.1", "host: x", f"content-length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def raw_invoke(connection: Connection, request: bytes) -> bytes:
    """The whole answer, head and body, to `request`."""
    assert connection.sock is not None
    connection.sock.sendall(request)
    answer = b""
    while (size := answer_bytes(answer)) is None or len(answer) < size:
        chunk = connection.sock.recv(65536)
        assert chunk, answer
        answer += chunk
    return answer


def answer_bytes(answer: bytes) -> int | None:
    """The answer's whole size, once its head is in."""
    head, end, _ = answer.partition(b"\r\n\r\n")
    lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    return len(head) + len(end) + int(lengths[0].split(b":")[1]) if end and lengths else None


def hit_with_the_main_process_stopped(
    server: testing.RunningServer, request: bytes, tries: int = 5, front: int | None = None
) -> bytes:
    """A hit on a fresh connection of a front (`front`, if given) while the main process is
    stopped: the front's own answer, or b"" where each try waited 5 s (relayed to the stopped
    main process). Between tries the main process runs, to publish its table."""
    for _ in range(tries):  # the first may come before the front's table has the model
        connection = direct_on_front(server, front)
        assert connection.sock is not None
        connection.sock.settimeout(5)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            return raw_invoke(connection, request)
        except TimeoutError:
            pass
        finally:
            os.kill(server.pid, signal.SIGCONT)
            connection.close()
        time.sleep(PUBLISHED_S)  # else a busy machine may not run it before the next stop
    return b""
