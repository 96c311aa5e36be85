"""What a gRPC call costs the Python servers that could front modelhost, with no model behind.

Each front serves a bare echo method (the request's bytes back, no protobuf), pinned to one core
as `grpc_path.py` pins modelhost; h2load on the other core posts a 40-byte message from a
connection per user, and one call of a real grpc client checks each front's answer first. The
fronts (`--fronts` picks some, by their names or how they start):

- grpc.aio with one server and with eight sharing the port by SO_REUSEPORT (as modelhost's
  inference port does), the eight again with a handler that yields to the loop once before it
  answers (a real handler waits for its worker);
- grpcio 1.75's grpc.aio, the same eight, from `--python grpcio-1.75=VENV/bin/python`
  (grpc/grpc#43092: 1.75 to 1.85 lost some speed on asyncio unary calls);
- pygrpc-native 0.5's aio server (HTTP/2 and gRPC in Rust, calls handed to the loop in
  batches) with the method registered by name, and with it added only as a generic handler (as
  modelhost's `rpc/stubs.py` adds its methods), which the README says goes to a grpcio fallback
  server; from `--python pygrpc-native=VENV/bin/python`;
- uvicorn 0.54 speaking HTTP/2 (zttp, h2c by prior knowledge) to an ASGI app that frames gRPC
  itself: the 5-byte prefix, `content-type: application/grpc`, `grpc-status`/`grpc-message`
  as response trailers (the `http.response.trailers` extension); from
  `--python zttp=VENV/bin/python`, since zttp is not in modelhost's venv;
- grpclib (pure Python over h2) where it is installed (`.venv/bin/pip install grpclib`).

A front whose interpreter is not given, or lacks its package, is left out with a message. The
venvs, outside modelhost's (the fronts need nothing of modelhost):

    python3 -m venv /tmp/g175 && /tmp/g175/bin/pip install 'grpcio==1.75.*' uvloop
    python3 -m venv /tmp/pgn && /tmp/pgn/bin/pip install pygrpc-native==0.5.0 uvloop \\
        'grpcio==1.85.*'  # pygrpc-native imports grpc, which it does not require
    python3 -m venv /tmp/uvz && /tmp/uvz/bin/pip install uvicorn==0.54.0 zttp==0.0.35 uvloop

`--guard` puts each front behind modelhost's guard (rpc/guard.py: TLS and the HTTP/2 limits
grpc core lacks, a relay on loopback), as modelhost's gRPC ports are served: in a process of
its own pinned to the same core (`--guard` or `--guard process`; the CPU column then counts
both), or on the front's own loop as in modelhost (`--guard inline`: grpc.aio and
pygrpc-native only, from an interpreter that imports modelhost; for pygrpc-native, modelhost's
venv with the package on PYTHONPATH, e.g. a folder holding only a link to it, and
`--python pygrpc-native=.venv/bin/python`). Compare with REST's whole
path in grpc_path.py.

    python benchmarks/grpc_fronts.py                      # C in 1 16, 10 s runs, 3 s warm-up
    python benchmarks/grpc_fronts.py --concurrency 16 --duration 5 --warmup 2 \\
        --python pygrpc-native=/tmp/pgn/bin/python --fronts pygrpc-native "grpc.aio, 8"
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from _common import cpu_seconds, cpu_spent, markdown_table, process_tree, write_results
from grpc_path import HEADER, _runs, ensure_h2load, grpc_frame, h2load
from hot_path import _table_row

from modelhost import testing

METHOD = "/echo.Echo/Echo"
MESSAGE = b"x" * 40
GUARD_CODE = """
async def guard(port, backend_port):
    # modelhost's guard with its default limits, on this loop, relaying to backend_port
    import socket
    from modelhost.config import Config
    from modelhost.rpc.guard import Guard, Peers
    from modelhost.rpc.server import limits

    config = Config()
    listening = socket.create_server(("127.0.0.1", port))
    relay = Guard(listening, backend_port, limits=limits(config),
                  max_connections=config.grpc_max_connections, peers=Peers())
    await relay.start()
    return relay
"""
GUARD = f"""
import asyncio, sys, uvloop
{GUARD_CODE}
async def main(port, backend_port):
    relay = await guard(port, backend_port)  # held while the process serves
    await asyncio.Event().wait()

uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""
GRPC_AIO = f"""
import asyncio, importlib, sys, grpc, uvloop
{GUARD_CODE}
async def echo(request, context):
    if sys.argv[3] == "awaits":
        await asyncio.sleep(0)  # a handler that waits, as one waiting for a worker does
    return request

def add(server, methods, registered):
    if registered:
        server.add_registered_method_handlers("echo.Echo", methods)
    else:
        handler = grpc.method_handlers_generic_handler("echo.Echo", methods)
        server.add_generic_rpc_handlers([handler])

async def main(port, copies, module, registered):
    make_server = importlib.import_module(module).server
    methods = {{"Echo": grpc.unary_unary_rpc_method_handler(echo)}}
    servers = [make_server(options=[("grpc.so_reuseport", 1)]) for _ in range(copies)]
    for server in servers:
        add(server, methods, registered)
        server.add_insecure_port(f"127.0.0.1:{{port}}")
        await server.start()
    relay = await guard(int(sys.argv[6]), port) if len(sys.argv) > 6 else None
    await servers[0].wait_for_termination()

uvloop.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[4], sys.argv[5] == "registered"))
"""
ASGI_ECHO = """
import asyncio, struct, sys

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    status, reply = unframe(body)
    if status == b"0" and sys.argv[2] == "awaits":
        await asyncio.sleep(0)  # a handler that waits, as one waiting for a worker does
    headers = [(b"content-type", b"application/grpc")]
    await send({"type": "http.response.start", "status": 200, "headers": headers, "trailers": True})
    await send({"type": "http.response.body", "body": reply})
    trailers = [(b"grpc-status", status), (b"grpc-message", b"" if status == b"0" else reply)]
    await send({"type": "http.response.trailers", "headers": trailers})

def unframe(body):
    # one uncompressed message, whole: the echo's answer, framed, or INTERNAL and why
    if len(body) < 5 or body[0] != 0 or struct.unpack(">I", body[1:5])[0] != len(body) - 5:
        return b"13", b""
    return b"0", b"\\x00" + struct.pack(">I", len(body) - 5) + body[5:]
"""
UVICORN_GRPC = (
    ASGI_ECHO
    + """
import uvicorn

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http="zttp", http2=True,
            loop="uvloop", lifespan="off", access_log=False, log_level="warning")
"""
)
H2CORN_GRPC = (
    ASGI_ECHO
    + """
import socket, uvloop
from h2corn import Config, Server

async def main(port):
    # embedded on this loop, as modelhost's front would be, on a socket bound here
    listening = socket.create_server(("127.0.0.1", port))
    config = Config(bind=(f"fd://{listening.fileno()}",), grpc=True, http1=False,
                    lifespan="off", access_log=False)
    await Server(app, config).serve()

uvloop.run(main(int(sys.argv[1])))
"""
)
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


class Front(NamedTuple):
    script: str
    extra: list[str]
    package: str  # what its interpreter must import
    python: str = ""  # the `--python` key of its interpreter; "" for this one


def _aio(copies: str, handler: str = "returns", server: str = "grpc.aio", **kw: str) -> Front:
    """A GRPC_AIO front: `copies` servers of `server`'s module; `handler` returns or awaits;
    kw `methods` "generic" or "registered", and `python`, its interpreter's key."""
    methods, python = kw.get("methods", "generic"), kw.get("python", "")
    return Front(GRPC_AIO, [copies, handler, server, methods], server.split(".")[0], python)


NATIVE = {"server": "pygrpc_native.aio", "python": "pygrpc-native"}
FRONTS = {
    "grpc.aio, 1 server": _aio("1"),
    "grpc.aio, 8 servers": _aio("8"),
    "grpc.aio, 8 servers, the handler awaits once": _aio("8", "awaits"),
    "grpcio 1.75 grpc.aio, 8 servers": _aio("8", python="grpcio-1.75"),
    "pygrpc-native 0.5, registered": _aio("1", methods="registered", **NATIVE),
    "pygrpc-native 0.5, registered, the handler awaits once": _aio(
        "1", "awaits", methods="registered", **NATIVE
    ),
    "pygrpc-native 0.5, generic handler": _aio("1", **NATIVE),
    "uvicorn 0.54 HTTP/2, ASGI": Front(UVICORN_GRPC, ["returns"], "zttp", "zttp"),
    "uvicorn 0.54 HTTP/2, ASGI, the handler awaits once": Front(
        UVICORN_GRPC, ["awaits"], "zttp", "zttp"
    ),
    "h2corn 2.0 embedded, ASGI": Front(H2CORN_GRPC, ["returns"], "h2corn"),
    "h2corn 2.0 embedded, ASGI, the handler awaits once": Front(H2CORN_GRPC, ["awaits"], "h2corn"),
    "grpclib": Front(GRPCLIB, [], "grpclib"),
}


def main() -> None:
    args = _parse_args()
    ensure_h2load()
    runs = []
    with tempfile.TemporaryDirectory(prefix="modelhost-grpc-fronts-") as scratch:
        request = Path(scratch) / "echo.bin"
        request.write_bytes(grpc_frame(MESSAGE))
        for name, front in _chosen(args).items():
            with _serving(front, args) as (url, pids):
                runs += _runs(args, name, _measured(url, request, pids, args))
    rows = [[*_table_row(run, "target"), run["server_cpu_ms_per_call"]] for run in runs]
    table = markdown_table([*HEADER, "server CPU ms a call"], rows)
    path = write_results("grpc_fronts", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


def _measured(url: str, request: Path, pids: list[int], args: argparse.Namespace) -> Any:
    """An h2load run that also reads the CPU the server (and guard) spent on it, a call."""

    def run(users: int, duration_s: int) -> dict[str, Any]:
        before = cpu_seconds([tree for pid in pids for tree in process_tree(pid)])
        result = h2load(url, request, users, duration_s, args)
        cpu_ms = 1000 * sum(cpu_spent(before).values())
        return {**result, "server_cpu_ms_per_call": cpu_ms / max(1, result["requests"])}

    return run


def _chosen(args: argparse.Namespace) -> dict[str, Front]:
    """The fronts `--fronts` names (in full, or by the start of their names) whose interpreter
    can import their package, in its order."""
    chosen = {}
    for start in args.fronts or [""]:
        names = [start] if start in FRONTS else [n for n in FRONTS if n.startswith(start)]
        for name in names:
            if name not in chosen and _runnable(name, FRONTS[name], args):
                chosen[name] = FRONTS[name]
    return chosen


def _runnable(name: str, front: Front, args: argparse.Namespace) -> bool:
    if args.guard == "inline" and front.script is not GRPC_AIO:
        print(f"{name}: no guard on its loop; its rows are left out", file=sys.stderr)
        return False
    python = _python(front, args)
    check = [python, "-c", f"import {front.package}"]
    if python and subprocess.run(check, stderr=subprocess.DEVNULL).returncode == 0:
        return True
    given = f"--python {front.python}=..." if front.python else "this venv"
    print(f"{name}: no {front.package} in {given}; its rows are left out", file=sys.stderr)
    return False


def _python(front: Front, args: argparse.Namespace) -> str:
    return args.python.get(front.python, "") if front.python else sys.executable


@contextlib.contextmanager
def _serving(front: Front, args: argparse.Namespace) -> Iterator[tuple[str, list[int]]]:
    """The echo server on a free port, behind the guard as `--guard` asks, pinned to the
    server's core and checked: its URL for h2load, and the pids whose CPU counts."""
    with contextlib.ExitStack() as stack:
        inline = [str(testing.free_port())] if args.guard == "inline" else []
        command = [_python(front, args), "-c", front.script]
        port, server = _start(stack, command, [*front.extra, *inline], args)
        pids = [server.pid]
        if inline:
            port = int(inline[0])
            testing.wait_listening(port, server)
        elif args.guard == "process":
            port, guard = _start(stack, [sys.executable, "-c", GUARD], [str(port)], args)
            pids.append(guard.pid)
        _check_echo(f"127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}{METHOD}", pids


def _start(
    stack: contextlib.ExitStack, command: list[str], extra: list[str], args: argparse.Namespace
) -> tuple[int, subprocess.Popen[bytes]]:
    """`command PORT *extra` on a free port, pinned, stopped as `stack` closes; once it
    listens, the port and the process."""
    port = testing.free_port()
    process = subprocess.Popen(["taskset", "-c", args.server_core, *command, str(port), *extra])
    stack.callback(_stop, process)
    testing.wait_listening(port, process)
    return port, process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=10)


def _check_echo(address: str) -> None:
    """One call from grpcio's client, answered with the message it sent and status OK."""
    import grpc

    with grpc.insecure_channel(address) as channel:
        reply = channel.unary_unary(METHOD)(MESSAGE, timeout=30)
    if reply != MESSAGE:
        raise RuntimeError(f"{address} echoed {reply!r}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of discarded warm-up")
    parser.add_argument("--fronts", nargs="+", help="the fronts whose names start so, in order")
    parser.add_argument(
        "--python",
        action="append",
        type=lambda pair: tuple(pair.split("=", 1)),
        default=[],
        help="KEY=PATH: the interpreter of grpcio-1.75, pygrpc-native or zttp's fronts",
    )
    parser.add_argument(
        "--guard",
        nargs="?",
        const="process",
        choices=["process", "inline"],
        help="each front behind rpc/guard.py, in a process of its own or on the front's loop",
    )
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0", help="h2load's core")
    args = parser.parse_args()
    args.python = dict(args.python)
    return args


if __name__ == "__main__":
    main()
