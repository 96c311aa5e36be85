"""The process-boundary floor: the least a Python server with its model in another process can do.

floor_app.py's raw ASGI app on uvicorn, except that the model lives in a forked child process:
the frontend writes each body, length-prefixed, to a socketpair and answers with what comes
back; the child reads with a blocking `recv`, decodes, predicts and encodes as floor_app.py
does, and writes the answer back. No batching, no queue, no deadlines, no accounting: what is
left is the price of the boundary itself (a frame each way, two processes taking turns), which
no design with model code out of the frontend avoids. modelhost's overhead is measured above it.

    python benchmarks/boundary_floor_app.py MODEL.joblib --host 127.0.0.1 --port 8081
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import socket
from typing import Any

from floor_app import _lifespan, _read_body, _reply, _rows, parse_args, serve

LENGTH = 4  # bytes of the big-endian length before each frame


def make_app(child: socket.socket) -> Any:
    """The ASGI callable forwarding each POST body to the model's process over `child`."""
    model = ModelProcess(child)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await model.connect()
            return await _lifespan(receive, send)
        if scope["method"] != "POST":
            return await _reply(send, 200 if scope["path"] == "/ping" else 404, b"{}")
        answer = await model.call(await _read_body(receive))
        await _reply(send, 200 if answer[:1] == b"2" else 400, answer[1:])

    return app


class ModelProcess(asyncio.Protocol):
    """The frontend's end of the socketpair: frames out, answers back in the same order."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.waiting: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self.buffer = b""

    async def connect(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport, _ = await self.loop.create_connection(lambda: self, sock=self.sock)

    def call(self, body: bytes) -> asyncio.Future[bytes]:
        future = self.loop.create_future()
        self.waiting.append(future)
        self.transport.write(len(body).to_bytes(LENGTH, "big") + body)
        return future

    def data_received(self, data: bytes) -> None:
        frames, self.buffer = cut_frames(self.buffer + data)
        for frame in frames:
            self.waiting.popleft().set_result(frame)


def cut_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The whole length-prefixed frames at the start of `buffer`, and the bytes after them."""
    frames = []
    while len(buffer) >= LENGTH:
        size = int.from_bytes(buffer[:LENGTH], "big")
        if len(buffer) < LENGTH + size:
            break
        frames.append(buffer[LENGTH : LENGTH + size])
        buffer = buffer[LENGTH + size :]
    return frames, buffer


def serve_model(sock: socket.socket, model: Any) -> None:
    """The child: answer each frame with b"2" + predictions, or b"4" + a JSON error."""
    import numpy as np

    buffer = b""
    while data := sock.recv(65536):
        bodies, buffer = cut_frames(buffer + data)
        for body in bodies:
            answer = _answer(model, body, np)
            sock.sendall(len(answer).to_bytes(LENGTH, "big") + answer)


def _answer(model: Any, body: bytes, np: Any) -> bytes:
    try:
        rows = _rows(json.loads(body), np)
    except (ValueError, TypeError) as error:
        message = {"code": 400, "type": "BadRequestBody", "message": str(error)}
        return b"4" + json.dumps(message).encode()
    return b"2" + json.dumps({"predictions": model.predict(rows).tolist()}).encode()


def main() -> None:
    args = parse_args(__doc__)
    import joblib

    frontend, child = socket.socketpair()
    if os.fork() == 0:  # the model's process: it dies with the socket's other end
        frontend.close()
        serve_model(child, joblib.load(args.model))
        os._exit(0)
    child.close()
    serve(make_app(frontend), args)


if __name__ == "__main__":
    main()
