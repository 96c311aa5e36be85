"""The gRPC server's port: a port another server holds is refused at start, saying which,
even where that server shares ports by SO_REUSEPORT, as modelhost's own gRPC servers do."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from modelhost.config import Config, load_config
from modelhost.errors import ConfigError
from modelhost.rpc.fronts import GRPC_AIO, GUARDED, H2CORN, NATIVE
from modelhost.rpc.server import RpcServer


@pytest.mark.parametrize("front", [GRPC_AIO, NATIVE, H2CORN])
@pytest.mark.parametrize("reuse_port", [False, True])
def test_a_port_in_use_is_refused_naming_the_flag(
    tmp_path: Path, reuse_port: bool, front: str
) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, int(reuse_port))
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = load_config({"grpc_port": port}, {}, tmp_path)

        async def bind() -> None:
            RpcServer(config, "127.0.0.1", port, {}, front=front, copies=3)

        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}.*--grpc-port"):
            asyncio.run(bind())


@pytest.mark.parametrize("front", [GRPC_AIO, NATIVE])
def test_the_servers_listen_on_unix_sockets_in_the_run_folder(tmp_path: Path, front: str) -> None:
    """A socket each, for the guard's connections to take in turn; a loopback port where
    the folder's path is too long for one."""
    config = load_config({}, {}, tmp_path)
    deep = tmp_path / ("d" * 100)
    deep.mkdir()

    async def hops() -> list[tuple[tuple[str, ...], int]]:
        servers = [
            RpcServer(config, "127.0.0.1", 0, {}, front=front, copies=3, hop_folder=folder)
            for folder in (tmp_path, deep)
        ]
        for server in servers:
            server.guard.sock.close()
        return [(server.guard.hop.paths, server.guard.hop.port) for server in servers]

    (paths, port), (deep_paths, deep_port) = asyncio.run(hops())
    assert port == 0 and [Path(path).parent for path in paths] == [tmp_path] * len(paths)
    assert len(paths) == (3 if front == GRPC_AIO else 1)
    assert deep_paths == () and deep_port > 0


ANSWER = b"a" * 3 * 2**20  # long enough to be still on its way out as the connection ends
H2CORN_RESETS = pytest.mark.xfail(
    reason="h2corn may reset the connection as it stops, with an answer on its way out"
)


async def answered(
    config: Config, front: str, meanwhile: Callable[[RpcServer], Awaitable[object]]
) -> bytes:
    """The answer of a call held until `meanwhile(server)` is done; the server then stops."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(request: bytes, context: object) -> bytes:
        entered.set()
        await release.wait()
        return ANSWER

    handlers = {"Call": grpc.unary_unary_rpc_method_handler(held)}
    server = RpcServer(config, "127.0.0.1", 0, {"t.Held": handlers}, front=front)
    await server.start()
    size = [("grpc.max_receive_message_length", 2 * len(ANSWER))]
    async with grpc.aio.insecure_channel(server.address, options=size) as channel:
        call = channel.unary_unary("/t.Held/Call")(b"")
        await entered.wait()
        await meanwhile(server)
        release.set()
        answer: bytes = await call
    await server.stop()
    return answer


@pytest.mark.parametrize("front", [*GUARDED, pytest.param(H2CORN, marks=H2CORN_RESETS)])
def test_a_call_answered_while_the_server_drains_gets_its_whole_answer(
    tmp_path: Path, front: str
) -> None:
    """pygrpc-native's stop closed its connections once the handlers returned, and grpc core's
    close reset the guard's side: either way the answer on its way out was lost."""
    config = load_config({"max_request_size": "8MB"}, {}, tmp_path)

    async def draining(server: RpcServer) -> None:
        server.drain()
        await asyncio.sleep(0.2)

    for _ in range(3):  # the answer was lost about every other time
        assert asyncio.run(answered(config, front, draining)) == ANSWER


@pytest.mark.parametrize("front", GUARDED)
def test_a_call_under_way_at_the_connection_s_age_gets_its_whole_answer(
    tmp_path: Path, front: str
) -> None:
    """grpc core held the age too on grpc.aio, and its close reset the guard's side of the
    connection with the answer half relayed."""
    config = load_config({"max_request_size": "8MB", "grpc_connection_age_s": 0.5}, {}, tmp_path)

    async def aging(server: RpcServer) -> None:
        await asyncio.sleep(0.8)

    for _ in range(3):  # the answer was lost five times in six
        assert asyncio.run(answered(config, front, aging)) == ANSWER
