"""The gRPC servers a configuration asks for, with their servicers bound to the host."""

from __future__ import annotations

from collections.abc import Callable

from modelhost.config import Config
from modelhost.host import ModelHost
from modelhost.observe.observer import Observer
from modelhost.rpc.access import Access
from modelhost.rpc.calls import Calls
from modelhost.rpc.messages import OIP_SERVICE
from modelhost.rpc.oip import OipServicer
from modelhost.rpc.server import RpcServer
from modelhost.rpc.stubs import generic_handler


def rpc_servers(
    host: ModelHost, config: Config, observer: Observer | None, ready: Callable[[], bool]
) -> list[RpcServer]:
    """The inference port's server (--grpc-port) and the management port's
    (--grpc-management-port), each when its port is set."""
    calls, access = Calls(observer), Access(config.management_token)
    servers = []
    if config.grpc_port:
        oip = OipServicer(host, calls, access, ready, config.max_response_bytes)
        handlers = [generic_handler(OIP_SERVICE, oip)]
        services = (OIP_SERVICE,)
        servers.append(RpcServer(config, config.host, config.grpc_port, handlers, services))
    return servers
