"""The gRPC servers a configuration asks for, with their servicers bound to the host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc

from modelhost.config import Config, listen_host
from modelhost.host import ModelHost
from modelhost.observe.observer import Observer
from modelhost.protocols.health import Health
from modelhost.protocols.keys import TokenKeys
from modelhost.protocols.tenants import TenantRule
from modelhost.rpc.access import Access, by_guard
from modelhost.rpc.calls import Calls
from modelhost.rpc.frames import StreamBudget
from modelhost.rpc.fronts import GRPC_AIO, front_of
from modelhost.rpc.keys import KeyInterceptor, inference_port_needs, management_port_needs
from modelhost.rpc.messages import OIP_SERVICE, TS_INFERENCE_SERVICE, TS_MANAGEMENT_SERVICE
from modelhost.rpc.oip import OipServicer
from modelhost.rpc.server import ACCEPTING_SERVERS, RpcServer, admission_of, stream_budget
from modelhost.rpc.stubs import method_handlers
from modelhost.rpc.torchserve import TorchServeInference, TorchServeManagementServicer


def rpc_servers(
    host: ModelHost,
    config: Config,
    observer: Observer | None,
    health: Health,
    keys: TokenKeys | None = None,
    tenants: TenantRule | None = None,
    run_folder: Path | None = None,
    management_token: Callable[[], str] = str,
) -> list[RpcServer]:
    """The inference and management ports' servers, each if its port is set, listening behind
    their guards in `run_folder`; `tenants`: the tenant rule (None: tenants off)."""
    budget = StreamBudget(stream_budget(config))  # one for both ports: one frontend's memory
    refused = refusal_counter(observer)
    calls = Calls(observer, config.instance_id)
    access = Access(management_token, by_guard, keys)
    servers = []
    if config.grpc_port:
        limit = config.max_response_bytes
        usage = observer.usage if observer else None
        oip = OipServicer(host, access, health, limit, tenants=tenants, usage=usage, calls=calls)
        inference = TorchServeInference(host, calls, health, limit, tenants=tenants)
        services = {
            OIP_SERVICE: method_handlers(OIP_SERVICE, oip, calls),
            TS_INFERENCE_SERVICE: method_handlers(TS_INFERENCE_SERVICE, inference, calls),
        }
        port = config.grpc_port
        servers.append(
            RpcServer(
                config,
                listen_host(config, "grpc_port"),
                port,
                services,
                front=front_of(config.grpc_front),
                health_names=tuple(services),
                copies=ACCEPTING_SERVERS,
                hop_folder=run_folder,
                admission=admission_of(config, budget, refused),
                interceptors=guarded(keys, inference_port_needs),
            )
        )
    if config.grpc_management_port:
        management = TorchServeManagementServicer(host, access, config.model_api, tenants)
        handlers = method_handlers(TS_MANAGEMENT_SERVICE, management, calls)
        port = config.grpc_management_port
        servers.append(
            RpcServer(
                config,
                listen_host(config, "grpc_management_port"),
                port,
                {TS_MANAGEMENT_SERVICE: handlers},
                front=GRPC_AIO,  # rare calls: not worth the native front's threads
                health_names=(TS_MANAGEMENT_SERVICE,),
                hop_folder=run_folder,
                admission=admission_of(config, budget, refused),
                interceptors=guarded(keys, management_port_needs),
            )
        )
    return servers


def guarded(
    keys: TokenKeys | None, needs: Callable[[str], str | None]
) -> list[grpc.aio.ServerInterceptor]:
    """The port's key check under TorchServe's token authorization; none when it is off."""
    return [KeyInterceptor(keys, needs)] if keys else []


def refusal_counter(observer: Observer | None) -> Callable[[str], None]:
    """Counts the guards' refusals in the metrics, by their kind."""
    if observer is None:
        return lambda reason: None
    counter = observer.metrics.grpc_refusals
    return lambda reason: counter.labels(reason).inc()
