"""The gRPC server's port: a port another server holds is refused at start, saying which,
even where that server shares ports by SO_REUSEPORT, as modelhost's own gRPC servers do."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError
from modelhost.rpc.fronts import GRPC_AIO, H2CORN, NATIVE
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
