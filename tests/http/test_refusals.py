"""Routes Starlette itself refuses answer in the error shape of the path's protocol."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes


def call(method: str, path: str) -> httpx.Response:
    app = build_app(SageMakerRoutes(cast(Any, None), HttpSettings(1024, "")))

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path)

    return asyncio.run(send())


def test_no_such_route_is_a_json_error() -> None:
    response = call("GET", "/nowhere")
    assert response.status_code == 404
    assert set(response.json()) == {"code", "type", "message"}


def test_oip_paths_answer_in_the_protocols_shape() -> None:
    response = call("POST", "/v2/models/a%0Ab/infer")
    assert response.status_code == 404
    assert set(response.json()) == {"error"}


def test_wrong_method_keeps_its_allow_header() -> None:
    response = call("PUT", "/ping")
    assert response.status_code == 405
    assert response.json()["code"] == 405
    assert "GET" in response.headers["allow"]


def test_no_such_route_names_mms_type_and_where_the_routes_are() -> None:
    """Not Starlette's class name: MMS's type, which rejections_total counts by."""
    body = call("GET", "/nowhere").json()
    assert body["type"] == "ResourceNotFoundException"
    assert "GET /openapi.json" in body["message"]


def test_wrong_method_names_mms_type_and_the_methods_the_path_takes() -> None:
    body = call("POST", "/ping").json()
    assert body["type"] == "MethodNotAllowedException"
    assert "this path takes" in body["message"] and "GET" in body["message"]


def test_a_torchserve_registration_on_the_main_port_says_where_it_is_served() -> None:
    """SageMaker's load reads a JSON body; TorchServe's query form is the management port's."""
    response = call("POST", "/models?url=a.mar&model_name=a")
    assert response.status_code == 400
    message = response.json()["message"]
    assert '{"model_name": "...", "url": "..."}' in message
    assert "POST /models?url= is TorchServe's registration" in message
    assert "--management-port" in message
