"""The gRPC server's port: a port another server holds is refused at start, saying which,
even where that server shares ports by SO_REUSEPORT, as modelhost's own gRPC servers do."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError
from modelhost.rpc.fronts import GRPC_AIO, NATIVE
from modelhost.rpc.server import RpcServer


@pytest.mark.parametrize("front", [GRPC_AIO, NATIVE])
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
