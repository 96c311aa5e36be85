"""Hostile inputs against a real server: refused at the HTTP layer, and the server, its worker
and its caches are as they were."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}


def files_in(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def test_registering_dotdot_is_refused(client: httpx.Client, store: Path, cache_dir: Path) -> None:
    """Registering the name '..' is refused and the cache keeps its artifacts."""
    archive = "/models/archives/m.tar.gz/invoke"  # an archive: unpacked into the disk tier
    assert client.post(archive, content=f"[{ROW}]", headers=JSON).status_code == 200
    cached = files_in(cache_dir)
    assert cached
    for name in ("..", ".", "../..", "/"):
        spec = {"model_name": name, "url": f"{store}/archives/m.tar.gz"}
        response = client.post("/models", json=spec)
        assert response.status_code == 400, response.text
        assert "a valid name is a relative path" in response.json()["message"]
        assert client.delete(f"/models/{name}").status_code in (400, 404, 405)
    assert files_in(cache_dir) == cached
    again = client.post(archive, content=f"[{ROW}]", headers=JSON)
    assert again.status_code == 200 and again.headers["x-modelhost-cache"] == "hit"


HUGE = "x" * 5000  # over the 4096-byte cap on a header passed to the worker


@pytest.mark.parametrize(
    ("headers", "params", "status", "limit"),
    [
        ({"content-type": f"application/json; x={HUGE}"}, {}, 431, "4096"),
        ({"accept": HUGE}, {}, 431, "4096"),
        ({"x-amzn-sagemaker-custom-attributes": f"k={HUGE}"}, {}, 431, "4096"),
        ({}, {"method": "x" * 60_000}, 414, "16384"),  # the request line's cap (head_limits)
        ({}, {"method": "x" * 5000}, 400, "4096"),
    ],
    ids=["content-type", "accept", "custom-attributes", "query-string", "query-param"],
)
def test_oversized_strings_are_refused(
    client: httpx.Client, headers: dict[str, str], params: dict[str, str], status: int, limit: str
) -> None:
    """Oversized strings are refused before the worker, which keeps its models."""
    other = "/models/tenants/t000.joblib/invoke"
    assert client.post(other, content=ROW, headers=JSON).status_code == 200
    hostile = client.post(
        "/models/iris.pkl/invoke", content=ROW, headers={**JSON, **headers}, params=params
    )
    assert hostile.status_code == status, hostile.text[:500]
    assert f"at most {limit}" in hostile.json()["message"]
    assert len(hostile.text) < 1000  # the value is not echoed back
    after = client.post(other, content=ROW, headers=JSON)
    assert after.status_code == 200 and after.headers["x-modelhost-cache"] == "hit"


def test_an_oversized_target_model_header_is_431(client: httpx.Client) -> None:
    target = {"X-Amzn-SageMaker-Target-Model": HUGE}
    response = client.post("/invocations", content=ROW, headers={**JSON, **target})
    assert response.status_code == 431
    assert "x-amzn-sagemaker-target-model header" in response.json()["message"]


@pytest.mark.parametrize(
    ("path", "documented"),
    [
        ("/models/iris.pkl/invoke", "/models/{model}/invoke"),
        ("/predictions/iris.pkl", "/predictions/{model}"),
        ("/invocations", "/invocations"),
    ],
)
def test_the_431_of_an_invocation_is_documented(
    client: httpx.Client, path: str, documented: str
) -> None:
    """An invocation route that answers 431 lists it in the OpenAPI document (and docs/api.md)."""
    target = {"X-Amzn-SageMaker-Target-Model": "iris.pkl", "accept": HUGE}
    assert client.post(path, content=ROW, headers={**JSON, **target}).status_code == 431
    responses = client.get("/openapi.json").json()["paths"][documented]["post"]["responses"]
    assert "431" in responses
