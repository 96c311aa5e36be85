"""What a gRPC call costs the Python servers that could front modelhost, with no model behind.

Each front serves a bare echo method (the request's bytes back, no protobuf), pinned to one core
as `grpc_path.py` pins modelhost; h2load on the other core posts a 40-byte message from a
connection per user. The fronts: grpc.aio with one server and with eight sharing the port by
SO_REUSEPORT (as modelhost's inference port does), the eight again with a handler that yields to
the loop once before it answers (a real handler waits for its worker), and grpclib (pure Python
over h2) where it is installed (`.venv/bin/pip install grpclib`). Compare with REST's whole path
in grpc_path.py.

    python benchmarks/grpc_fronts.py                      # C in 1 16, 10 s runs, 3 s warm-up
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from _common import markdown_table, write_results
from grpc_path import HEADER, _runs, ensure_h2load, grpc_frame, h2load
from hot_path import _table_row

from modelhost import testing

METHOD = "/echo.Echo/Echo"
GRPC_AIO = """
import asyncio, sys, grpc, uvloop

async def echo(request, context):
    if sys.argv[3] == "awaits":
        await asyncio.sleep(0)  # a handler that waits, as one waiting for a worker does
    return request

async def main(port, copies):
    methods = {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    handler = grpc.method_handlers_generic_handler("echo.Echo", methods)
    servers = [grpc.aio.server() for _ in range(copies)]
    for server in servers:
        server.add_generic_rpc_handlers([handler])
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
    await servers[0].wait_for_termination()

uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""
GRPCLIB = """
import sys, uvloop
from grpclib.const import Cardinality, Handler
from grpclib.encoding.base import CodecBase
from grpclib.server import Server

class Raw(CodecBase):
    __content_subtype__ = "proto"
    def encode(self, message, message_type): return message
    def decode(self, data, message_type): return data

class Echo:
    async def echo(self, stream):
        await stream.send_message(await stream.recv_message())
    def __mapping__(self):
        return {"/echo.Echo/Echo": Handler(self.echo, Cardinality.UNARY_UNARY, None, None)}

async def main(port):
    server = Server([Echo()], codec=Raw())
    await server.start("127.0.0.1", port)
    await server.wait_closed()

uvloop.run(main(int(sys.argv[1])))
"""
FRONTS = {
    "grpc.aio, 1 server": (GRPC_AIO, ["1", "returns"]),
    "grpc.aio, 8 servers": (GRPC_AIO, ["8", "returns"]),
    "grpc.aio, 8 servers, the handler awaits once": (GRPC_AIO, ["8", "awaits"]),
    "grpclib": (GRPCLIB, []),
}


def main() -> None:
    args = _parse_args()
    ensure_h2load()
    runs = []
    with tempfile.TemporaryDirectory(prefix="modelhost-grpc-fronts-") as scratch:
        request = Path(scratch) / "echo.bin"
        request.write_bytes(grpc_frame(b"x" * 40))
        for front, (script, extra) in FRONTS.items():
            if front == "grpclib" and importlib.util.find_spec("grpclib") is None:
                print("grpclib is not installed: its row is left out", file=sys.stderr)
                continue
            with _serving(script, extra, args.server_core) as url:
                runs += _runs(args, front, lambda c, d: h2load(url, request, c, d, args))
    table = markdown_table(HEADER, [_table_row(run, "target") for run in runs])
    path = write_results("grpc_fronts", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


@contextlib.contextmanager
def _serving(script: str, extra: list[str], core: str) -> Iterator[str]:
    """The echo server on a free port, pinned to `core`; its URL for h2load."""
    port = testing.free_port()
    command = ["taskset", "-c", core, sys.executable, "-c", script, str(port), *extra]
    server = subprocess.Popen(command)
    try:
        testing.wait_listening(port, server)
        yield f"http://127.0.0.1:{port}{METHOD}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of discarded warm-up")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0", help="h2load's core")
    return parser.parse_args()


if __name__ == "__main__":
    main()
