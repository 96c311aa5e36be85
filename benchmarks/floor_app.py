"""The in-process floor: the least a Python server can do per prediction.

A raw ASGI app (no framework) that holds one joblib model and answers any POST with
`{"predictions": [...]}` for a JSON row, list of rows, `{"instances": ...}` or `{"inputs": ...}`
(the shapes modelhost's default codec takes), and `GET /ping` with 200. uvicorn with uvloop and
httptools, one process, no access log. modelhost's hot path is measured against this.

    python benchmarks/floor_app.py MODEL.joblib --host 127.0.0.1 --port 8081
    python benchmarks/floor_app.py MODEL.joblib --port 8081 --reuse-port   # one of several
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from typing import Any

JSON_HEADERS = [(b"content-type", b"application/json")]


def make_app(model: Any) -> Any:
    """The ASGI callable answering with `model`'s predictions."""
    import numpy as np

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        if scope["method"] != "POST":
            return await _reply(send, 200 if scope["path"] == "/ping" else 404, b"{}")
        body = await _read_body(receive)
        try:
            rows = _rows(json.loads(body), np)
        except (ValueError, TypeError) as error:
            message = {"code": 400, "type": "BadRequestBody", "message": str(error)}
            return await _reply(send, 400, json.dumps(message).encode())
        predictions = model.predict(rows).tolist()
        await _reply(send, 200, json.dumps({"predictions": predictions}).encode())

    return app


def _rows(document: Any, np: Any) -> Any:
    if isinstance(document, dict):
        document = document.get("instances", document.get("inputs"))
    rows = np.asarray(document, dtype=np.float64)
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    if rows.ndim != 2:
        raise ValueError(f"expected a row or a list of rows, got {rows.ndim} dimensions")
    return rows


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _reply(send: Any, status: int, body: bytes) -> None:
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def main() -> None:
    args = parse_args(__doc__)
    import joblib

    serve(make_app(joblib.load(args.model)), args)


def parse_args(doc: str | None) -> argparse.Namespace:
    """The model and the address, for this floor and the boundary floor."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("model", help="a joblib file with a predict() method")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument(
        "--reuse-port", action="store_true", help="bind with SO_REUSEPORT: one process a core"
    )
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as modelhost's workers: one thread per core
    return parser.parse_args()


def serve(app: Any, args: argparse.Namespace) -> None:
    """uvicorn with uvloop and httptools, one process, no access log."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        workers=1,
        access_log=False,
        log_level="warning",
        lifespan="on",
    )
    sockets = [_reuse_port_socket(args.host, args.port)] if args.reuse_port else None
    uvicorn.Server(config).run(sockets=sockets)


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    """A socket that other processes bind too: the kernel spreads connections among them."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


if __name__ == "__main__":
    main()
