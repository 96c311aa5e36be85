"""A JSON body nested deeper than any parser recurses is a 400 that says so, on every route that
reads JSON, with no traceback logged; the server carries on."""

from __future__ import annotations

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

DEEP = "[" * 100_000 + "]" * 100_000
ROUTES = [
    "/models/iris.pkl/invoke",
    "/models",
    "/v2/models/iris.pkl/infer",
    "/v2/repository/models/iris.pkl/load",
]


@pytest.mark.parametrize("route", ROUTES)
def test_a_body_nested_without_end_is_400(
    route: str, client: httpx.Client, server: testing.RunningServer
) -> None:
    answer = client.post(route, content=DEEP, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert "nest" in answer.text
    assert "Traceback" not in server.log_text()
    assert client.get("/ping").status_code == 200
