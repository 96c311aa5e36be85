"""Real store servers for tests and benchmarks, all on loopback and stopped by their owner:
moto's S3 server, a static HTTP server, and a TCP proxy that can cut, stall or refuse traffic
(a store that dies mid-download, hangs, or is down)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from modelhost.testing import free_port, wait_listening

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
READY_TIMEOUT_S = 30.0


class _Subprocess:
    """A server process on a free loopback port, stopped (and reaped) on exit."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [arg.replace("{port}", str(self.port)) for arg in argv]
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Any:
        self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, **(self.env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        try:
            wait_listening(self.port, self.process, READY_TIMEOUT_S)
        except TimeoutError:
            self.process.kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class MotoServer(_Subprocess):
    """moto in server mode: an S3-protocol server. With `enforce_auth`, every request must be
    signed by a user moto knows, and it knows none: any credentials are refused."""

    def __init__(self, enforce_auth: bool = False) -> None:
        env = {"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if enforce_auth else {}
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "{port}"]
        super().__init__(argv, env)

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, **_boto_credentials())

    def client_env(self, endpoint_url: str | None = None) -> dict[str, str]:
        """What a modelhost server needs in its environment to use this S3 server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint_url or self.url}


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


class StaticHttpServer(_Subprocess):
    """`python -m http.server` serving a folder: an HTTP model store."""

    def __init__(self, root: Path) -> None:
        argv = [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
        argv += ["--directory", str(root)]
        super().__init__(argv)


class TcpProxy:
    """Forwards loopback connections to `target_port`, unless told to misbehave:

    - `cut_after(n)`: close each connection once n bytes went back to the client;
    - `stall()`: accept, then forward nothing;
    - `refuse()`: close every new connection at once (the store is down);
    - `heal()`: forward normally again.

    `accepted` counts the connections it took, refused ones included.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode, self.cut_bytes, self.accepted = "forward", 0, 0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        self._close_all()

    def cut_after(self, count: int) -> None:
        self.mode, self.cut_bytes = "cut", count

    def stall(self) -> None:
        self.mode = "stall"

    def refuse(self) -> None:
        self.mode = "refuse"
        self._close_all()

    def heal(self) -> None:
        self.mode = "forward"
        self._close_all()

    def _close_all(self) -> None:
        with self._lock:
            for sock in self._open:
                _hang_up(sock)
            self._open.clear()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                self.accepted += 1
                if self.mode == "refuse":
                    client.close()
                    continue
                threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            client.close()
            return
        with self._lock:
            self._open |= {client, upstream}
        budget = [self.cut_bytes if self.mode == "cut" else -1]
        threading.Thread(target=self._pump, args=(client, upstream, None), daemon=True).start()
        self._pump(upstream, client, budget)

    def _pump(self, source: socket.socket, sink: socket.socket, budget: list[int] | None) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                while self.mode == "stall":
                    time.sleep(0.05)
                if budget is not None and budget[0] >= 0:
                    chunk = chunk[: budget[0]]
                    budget[0] -= len(chunk)
                sink.sendall(chunk)
                if budget is not None and budget[0] == 0:
                    break
        for sock in (source, sink):
            _hang_up(sock)


def _hang_up(sock: socket.socket) -> None:
    """Close now, waking a thread blocked reading it (close alone would not send the FIN)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
