"""Every response names the instance that answered, whatever answered it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any, cast

import httpx

from modelhost.config import load_config
from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes


class NoHost:
    """No host behind the routes: no startup model, and nothing else."""

    def sole_startup_model(self) -> str:
        return ""


def call(instance_id: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    settings = HttpSettings(1024, "", instance_id)
    app = build_app(SageMakerRoutes(cast(Any, NoHost()), settings))

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://modelhost") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(send())


def test_a_refusal_names_the_configured_instance() -> None:
    response = call("pod-7", "GET", "/nowhere")
    assert response.status_code == 404
    assert response.headers["x-modelhost-instance"] == "pod-7"


def test_an_invocation_the_last_resort_answers_names_it_too() -> None:
    # no host behind the routes: the invocation breaks, and the 500 still names the instance
    response = call("pod-7", "POST", "/models/m/invoke", json=[[1, 2]])
    assert response.status_code == 500
    assert response.headers["x-modelhost-instance"] == "pod-7"


def test_an_invocation_refused_names_it_too() -> None:
    response = call("pod-7", "POST", "/invocations", json=[[1, 2]])  # no model named
    assert response.status_code == 400
    assert response.headers["x-modelhost-instance"] == "pod-7"


def test_the_default_is_the_hostname() -> None:
    response = call("", "GET", "/nowhere")
    assert response.headers["x-modelhost-instance"] == socket.gethostname()


def test_instance_id_is_a_setting(tmp_path: Path) -> None:
    """The instance id is a setting with an environment variable."""
    config = load_config(flags={}, environ={"MODELHOST_INSTANCE_ID": "blue-1"}, cwd=tmp_path)
    assert config.instance_id == "blue-1"
