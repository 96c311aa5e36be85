"""The SageMaker multi-model container contract: load, list, describe, unload."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from modelhost import testing
from modelhost.records.memory import pss_bytes

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
JSON = {"content-type": "application/json"}


def test_ping(client: httpx.Client) -> None:
    assert client.get("/ping").status_code == 200


def test_load_by_url_then_invoke(client: httpx.Client, store: Path) -> None:
    """Load by URL then 409 then invoke by its name."""
    spec = {"model_name": "acme-churn", "url": f"{store}/tenants/t000.joblib"}
    assert client.post("/models", json=spec).status_code == 200
    again = client.post("/models", json=spec)
    assert again.status_code == 409 and again.json()["type"] == "ModelAlreadyLoaded"
    response = client.post("/models/acme-churn/invoke", content=json.dumps(ROW), headers=JSON)
    assert response.status_code == 200 and response.headers["x-modelhost-cache"] == "hit"
    described = client.get("/models/acme-churn").json()
    assert described["modelUrl"] == (store / "tenants/t000.joblib").resolve().as_uri()
    assert described["state"] == "loaded"


def test_failed_load_by_url_leaves_the_name_as_it_was(client: httpx.Client, store: Path) -> None:
    """A POST /models that fails registers nothing: the store's model of that name still answers,
    and a new name is not listed, even where its artifact was fetched before the load failed."""
    testing.iris_logreg(store / "bad-manifest/model.joblib")
    (store / "bad-manifest/modelhost.toml").write_text("not = = toml\n")
    tries = [
        ("tenants/t004.joblib", "tenants/never.joblib", 404),
        ("never-loaded", "tenants/never.joblib", 404),
        ("bad-manifest-loaded", "bad-manifest", 500),
    ]
    for name, url, status in tries:
        failed = client.post("/models", json={"model_name": name, "url": url})
        assert failed.status_code == status, failed.text
    response = client.post("/models/tenants/t004.joblib/invoke", json=ROW)
    assert response.status_code == 200, response.text
    listed = client.get("/models", params={"limit": 1000}).json()["models"]
    assert {"never-loaded", "bad-manifest-loaded"}.isdisjoint(m["modelName"] for m in listed)


def test_load_from_outside_the_store_is_refused(client: httpx.Client, store: Path) -> None:
    response = client.post("/models", json={"model_name": "x", "url": "/etc/passwd"})
    assert response.status_code == 403
    message = response.json()["message"]
    assert f"{store.resolve().as_uri()}/*" in message and "--allowed-urls" in message


def test_load_body_must_name_the_model_and_url(client: httpx.Client) -> None:
    assert client.post("/models", json={"model_name": "x"}).status_code == 400
    assert client.post("/models", content=b"{oops", headers=JSON).status_code == 400


def test_describe_gives_state_sizes_workers_hits_and_events(client: httpx.Client) -> None:
    client.post("/models/tenants/t001.joblib/invoke", content=json.dumps(ROW), headers=JSON)
    described = client.get("/models/tenants/t001.joblib").json()
    assert described["state"] == "loaded"
    assert described["memoryBytes"] > 0 and described["diskBytes"] > 0
    assert described["hits"] >= 1 and described["lastUsed"] and described["loadTimeMs"] > 0
    assert described["loadReserveBytes"] >= described["memoryBytes"]  # what its next load holds
    assert len(described["workers"]) == 1 and described["workers"][0]["pid"] > 0
    assert any(event["kind"] == "load" for event in described["events"])


def test_describe_tells_a_name_the_store_lacks_from_one_not_loaded(client: httpx.Client) -> None:
    """Invoking loads a model the store holds; for one it lacks, that advice would be wrong."""
    missing = client.get("/models/tenants/never.joblib")
    assert missing.status_code == 404 and missing.json()["type"] == "ModelNotFound"
    assert "invoke it" not in missing.json()["message"]
    on_invoke = client.get("/models/tenants/t002.joblib/invoke").json()["message"]
    assert "POST /models/tenants/t002.joblib/invoke" in on_invoke
    unloaded = client.get("/models/tenants/t002.joblib")
    assert unloaded.status_code == 404 and unloaded.json()["type"] == "ModelNotLoaded"


def test_describe_and_delete_unloaded_are_404(client: httpx.Client) -> None:
    """Describe and delete of a model not loaded are 404."""
    assert client.get("/models/tenants/never.joblib").status_code == 404
    assert client.delete("/models/tenants/never.joblib").status_code == 404


def test_list_is_paginated_with_both_token_spellings(client: httpx.Client) -> None:
    for tenant in range(4):
        client.post(
            f"/models/tenants/t00{tenant}.joblib/invoke", content=json.dumps(ROW), headers=JSON
        )
    seen: list[str] = []
    page = client.get("/models", params={"limit": 2}).json()
    while True:
        seen += [model["modelName"] for model in page["models"]]
        assert len(page["models"]) <= 2
        if "nextPageToken" not in page:
            break
        assert page["nextPageToken"] == page["next_page_token"]
        page = client.get(
            "/models", params={"limit": 2, "next_page_token": page["nextPageToken"]}
        ).json()
    assert seen == sorted(set(seen))
    assert {f"tenants/t00{t}.joblib" for t in range(4)} <= set(seen)
    assert client.get("/models", params={"limit": "zero"}).status_code == 400


def test_list_filters_by_state(client: httpx.Client) -> None:
    """state=loaded lists the models in memory only; on_disk those whose artifact is here."""
    client.post("/models/tenants/t001.joblib/invoke", content=json.dumps(ROW), headers=JSON)
    loaded = client.get("/models", params={"state": "loaded", "limit": 1000}).json()["models"]
    assert "tenants/t001.joblib" in {model["modelName"] for model in loaded}
    assert {model["state"] for model in loaded} == {"loaded"}
    on_disk = client.get("/models", params={"state": "on_disk", "limit": 1000}).json()["models"]
    assert "tenants/t001.joblib" in {model["modelName"] for model in on_disk}
    refused = client.get("/models", params={"state": "warm"})
    assert refused.status_code == 400 and "loaded, on_disk, registered" in refused.json()["message"]


def test_delete_unloads_and_returns_the_memory(client: httpx.Client, store: Path) -> None:
    testing.random_forest(store / "big/forest.joblib", target_bytes=20 * 2**20)
    body = json.dumps(testing.digits_rows(1)[0])
    loaded = client.post("/models/big/forest.joblib/invoke", content=body, headers=JSON)
    assert loaded.status_code == 200, loaded.text
    worker_pid = client.get("/models/big/forest.joblib").json()["workers"][0]["pid"]
    before = pss_bytes(worker_pid)
    response = client.delete("/models/big/forest.joblib")
    assert response.status_code == 200
    after = pss_bytes(worker_pid)
    assert before - after > 10 * 2**20, (before, after)
    assert client.get("/models/big/forest.joblib").status_code == 404
    listed = {m["modelName"]: m["state"] for m in client.get("/models").json()["models"]}
    assert listed["big/forest.joblib"] == "on_disk"


def test_management_from_loopback_needs_no_token(client: httpx.Client) -> None:
    client.post("/models/tenants/t002.joblib/invoke", content=json.dumps(ROW), headers=JSON)
    assert client.delete("/models/tenants/t002.joblib").status_code == 200
    again = client.post("/models/tenants/t002.joblib/invoke", content=json.dumps(ROW), headers=JSON)
    assert again.headers["x-modelhost-cache"] == "disk"
