"""DNS rebinding: a web page from evil.example whose name is made to resolve to 127.0.0.1 makes
the browser a loopback caller. Loopback is trusted with management only when the request's Host
names this machine; otherwise the management token is needed, as from anywhere else."""

from __future__ import annotations

import pytest
from asgi_calls import call, routes

from modelhost.http.app import build_app

BAD_NAME = {"model_name": "..", "url": "m.joblib"}  # 400 once past authorization


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.nip.io"])
def test_a_loopback_call_naming_another_host_may_not_manage(host: str) -> None:
    app = build_app(routes())
    response = call(app, "POST", "/models", json=BAD_NAME, headers={"host": host})
    assert response.status_code == 403, response.text
    assert "Host" in response.json()["message"]


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8080", "127.0.0.1:8080", "[::1]:8080", "api.localhost", "0.0.0.0:80"],
)
def test_a_loopback_call_naming_this_machine_may_manage(host: str) -> None:
    app = build_app(routes())
    response = call(app, "POST", "/models", json=BAD_NAME, headers={"host": host})
    assert response.status_code == 400, response.text
