"""The servers beside the main port's: TorchServe's management API and metrics, on ports apart."""

from __future__ import annotations

from modelhost.config import Config, listen_host
from modelhost.http.last_resort import Unhandled
from modelhost.http.observe import build_metrics_app
from modelhost.http.routes import SageMakerRoutes
from modelhost.http.server import SecondaryServer, uvicorn_config
from modelhost.http.torchserve import build_management_app
from modelhost.observe.observer import Observer


def management_servers(
    routes: SageMakerRoutes, config: Config, unhandled: Unhandled
) -> list[SecondaryServer]:
    """TorchServe's management API on its own port, when one is configured."""
    if not management_port_apart(config):
        return []  # the main port answers SageMaker's management calls already
    app = build_management_app(routes, unhandled, config.management_api)
    host = listen_host(config, "management_port")
    settings = uvicorn_config(app, config, config.management_port, host=host)
    return [SecondaryServer(settings, "--management-port")]


def metrics_servers(observer: Observer, config: Config) -> list[SecondaryServer]:
    """GET /metrics on its own port too, if TorchServe's metrics_address asks for one."""
    if not config.metrics_port:
        return []
    host = listen_host(config, "metrics_port")
    app = build_metrics_app(observer)
    settings = uvicorn_config(app, config, config.metrics_port, host=host)
    return [SecondaryServer(settings, "--metrics-port")]


def management_port_apart(config: Config) -> bool:
    """Whether TorchServe's management API has a port of its own."""
    return bool(config.management_port) and not management_on_main_port(config)


def management_on_main_port(config: Config) -> bool:
    """SageMaker's multi-model config gives management_address the inference address."""
    return config.management_port == config.port
