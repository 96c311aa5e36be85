"""Cross-site requests: a page in a browser on this machine must not change the server's state.

A page can send a "simple" request (POST with `text/plain`, a form's content type, or none) to
127.0.0.1 with no preflight; the browser names the page in `Origin` and `Sec-Fetch-Site`. Calls
that change state (register, load, unload) answer 403 when those say another origin, and 415 when
their body is not JSON. Invocations and reads from pages are served: see docs/security.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

EVIL = {"origin": "http://evil.example"}
TEXT = {"content-type": "text/plain;charset=UTF-8"}
JSON_TYPE = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
ROW = json.dumps(testing.iris_rows(1))
MODEL = "iris.pkl"


def loaded(client: httpx.Client) -> None:
    response = client.post(f"/models/{MODEL}/invoke", content=ROW, headers=JSON_TYPE)
    assert response.status_code == 200, response.text


def is_ready(client: httpx.Client) -> bool:
    return client.get(f"/v2/models/{MODEL}/ready").status_code == 200


def registered(client: httpx.Client, name: str) -> bool:
    return name in {model["modelName"] for model in client.get("/models").json()["models"]}


def test_cross_site_oip_unload_answers_403(client: httpx.Client) -> None:
    loaded(client)
    response = client.post(
        f"/v2/repository/models/{MODEL}/unload", content="{}", headers={**EVIL, **TEXT}
    )
    assert response.status_code == 403, response.text
    assert "evil.example" in response.json()["error"]
    assert is_ready(client)


def test_cross_site_register_answers_403(client: httpx.Client) -> None:
    spec = json.dumps({"model_name": "xsite", "url": "tenants/t000.joblib"})
    response = client.post("/models", content=spec, headers={**EVIL, **TEXT})
    assert response.status_code == 403, response.text
    assert "cross-site" in response.json()["message"]
    assert not registered(client, "xsite")


def test_cross_site_oip_load_answers_403(client: httpx.Client) -> None:
    response = client.post("/v2/repository/models/tenants/t000.joblib/load", headers=EVIL)
    assert response.status_code == 403, response.text
    assert not registered(client, "tenants/t000.joblib")


def test_sec_fetch_site_cross_site_unload_answers_403(client: httpx.Client) -> None:
    loaded(client)
    response = client.delete(f"/models/{MODEL}", headers={"sec-fetch-site": "cross-site"})
    assert response.status_code == 403, response.text
    assert "Sec-Fetch-Site" in response.json()["message"]
    assert is_ready(client)


def test_same_site_page_on_another_port_answers_403(client: httpx.Client) -> None:
    """localhost:3000 is the same site as the server in browser terms, but another origin."""
    loaded(client)
    headers = {"origin": "http://127.0.0.1:3000", "sec-fetch-site": "same-site"}
    response = client.delete(f"/models/{MODEL}", headers=headers)
    assert response.status_code == 403, response.text
    assert is_ready(client)


def test_null_origin_unload_answers_403(client: httpx.Client) -> None:
    """A sandboxed frame or a file:// page sends `Origin: null`."""
    loaded(client)
    response = client.post(f"/v2/repository/models/{MODEL}/unload", headers={"origin": "null"})
    assert response.status_code == 403, response.text
    assert is_ready(client)


def test_text_plain_register_answers_415(client: httpx.Client) -> None:
    spec = json.dumps({"model_name": "plain", "url": "tenants/t000.joblib"})
    response = client.post("/models", content=spec, headers=TEXT)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["message"]
    assert not registered(client, "plain")


def test_form_oip_unload_answers_415(client: httpx.Client) -> None:
    loaded(client)
    response = client.post(f"/v2/repository/models/{MODEL}/unload", content="{}", headers=FORM)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]
    assert is_ready(client)


def test_same_origin_json_register_is_served(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    headers = {"origin": server.url, "sec-fetch-site": "same-origin"}
    spec = {"model_name": "own", "url": "tenants/t000.joblib"}
    response = client.post("/models", json=spec, headers=headers)
    assert response.status_code == 200, response.text
    assert client.delete("/models/own").status_code == 200


def test_oip_load_without_content_type_is_served(client: httpx.Client) -> None:
    """Triton's client sends its JSON body with no content type."""
    response = client.post(f"/v2/repository/models/{MODEL}/load", content=b"{}")
    assert response.status_code == 200, response.text
    assert is_ready(client)


def test_cross_site_invocation_is_served(client: httpx.Client) -> None:
    response = client.post(f"/models/{MODEL}/invoke", content=ROW, headers={**EVIL, **JSON_TYPE})
    assert response.status_code == 200, response.text


def test_cross_site_oip_infer_is_served(client: httpx.Client) -> None:
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]}
    response = client.post(f"/v2/models/{MODEL}/infer", json=body, headers=EVIL)
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def management(store: Path, serve: Servers) -> Iterator[httpx.Client]:
    """TorchServe's management API on a port of its own."""
    port = testing.free_port()
    serve(store, workers=1, management_port=port)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        yield http


def test_cross_site_torchserve_register_and_scale_answer_403(management: httpx.Client) -> None:
    params = {"url": "tenants/t000.joblib", "model_name": "xsite-ts"}
    assert management.post("/models", params=params, headers=EVIL).status_code == 403
    assert management.get("/models/xsite-ts").status_code == 404
    assert management.post("/models", params=params).status_code == 200  # Postman, curl
    scaled = management.put("/models/xsite-ts", params={"min_worker": "1"}, headers=EVIL)
    assert scaled.status_code == 403, scaled.text
    assert management.delete("/models/xsite-ts", headers=EVIL).status_code == 403
    assert management.delete("/models/xsite-ts").status_code == 200
