"""Invoking models by name with no registration: bodies, formats, cache headers, errors."""

from __future__ import annotations

import concurrent.futures
import json

import httpx
import pytest

from modelhost import testing
from modelhost.observe.exchange import parse_server_timing

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
JSON = {"content-type": "application/json"}


def invoke(client: httpx.Client, name: str, body: object = ROW, **headers: str) -> httpx.Response:
    return client.post(
        f"/models/{name}/invoke", content=json.dumps(body), headers={**JSON, **headers}
    )


def timings(response: httpx.Response) -> dict[str, float]:
    return parse_server_timing(response.headers["server-timing"])


def test_sagemaker_target_model_header_invokes_by_store_path(client: httpx.Client) -> None:
    response = client.post(
        "/invocations",
        content=json.dumps(ROW),
        headers={**JSON, "X-Amzn-SageMaker-Target-Model": "tenants/t000.joblib"},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0]}


def test_first_call_loads_next_hits(client: httpx.Client) -> None:
    """First call loads from disk and the next is a hit."""
    first = invoke(client, "tenants/t001.joblib")
    second = invoke(client, "tenants/t001.joblib")
    assert first.headers["x-modelhost-cache"] == "disk"
    assert second.headers["x-modelhost-cache"] == "hit"
    assert timings(first)["load"] > 0 and timings(second)["load"] == 0
    assert set(timings(second)) >= {"queue", "load", "infer"}


@pytest.mark.parametrize(
    "body", [ROW, [ROW, ROW], {"instances": [ROW, ROW]}, {"inputs": [ROW, ROW]}, {"instances": ROW}]
)
def test_every_json_body_form(client: httpx.Client, body: object) -> None:
    response = invoke(client, "tenants/t002.joblib", body)
    assert response.status_code == 200, response.text
    rows = 1 if body in (ROW, {"instances": ROW}) else 2
    assert response.json()["predictions"] == [0] * rows


def test_csv_in_and_csv_out(client: httpx.Client) -> None:
    rows = testing.iris_rows(150)[::50]
    body = "\n".join(",".join(str(v) for v in row) for row in rows)
    response = client.post(
        "/models/iris.pkl/invoke",
        content=body,
        headers={"content-type": "text/csv", "accept": "text/csv"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert response.text.split() == ["0", "1", "2"]


def test_predict_proba_on_request(client: httpx.Client) -> None:
    by_query = client.post(
        "/models/iris.pkl/invoke?method=predict_proba", content=json.dumps(ROW), headers=JSON
    )
    by_attributes = invoke(
        client, "iris.pkl", **{"X-Amzn-SageMaker-Custom-Attributes": "method=predict_proba"}
    )
    for response in (by_query, by_attributes):
        assert response.status_code == 200, response.text
        (probabilities,) = response.json()["predictions"]
        assert len(probabilities) == 3 and sum(probabilities) == pytest.approx(1.0)


def test_torchserve_predictions_route(client: httpx.Client) -> None:
    response = client.post(
        "/predictions/tenants/t003.joblib", content=json.dumps(ROW), headers=JSON
    )
    assert response.status_code == 200 and response.json() == {"predictions": [0]}


@pytest.mark.parametrize(
    "name", ["custom/mms", "custom/sagemaker", "archives/m.tar.gz", "archives/m.zip"]
)
def test_user_handlers_and_archives(client: httpx.Client, name: str) -> None:
    response = invoke(client, name, [ROW])
    assert response.status_code == 200, response.text
    assert "0" in response.text


def test_unknown_model_is_404_with_a_way_out(client: httpx.Client) -> None:
    response = invoke(client, "tenants/nobody.joblib")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == 404 and body["type"] == "ModelNotFound"
    assert "relative to the store" in body["message"]


@pytest.mark.parametrize(
    "body, expected",
    [(b"not json", "JSON"), (b"[1, 2]", "features"), (b'{"rows": []}', "instances")],
)
def test_bad_body_is_400_and_says_what_was_expected(
    client: httpx.Client, body: bytes, expected: str
) -> None:
    response = client.post("/models/tenants/t004.joblib/invoke", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert expected in response.json()["message"]


def test_unsupported_content_type_is_415(client: httpx.Client) -> None:
    """HTTP's statuses for a body of a type no codec reads, and an answer of none it writes."""
    response = client.post(
        "/models/tenants/t004.joblib/invoke", content=b"x", headers={"content-type": "image/png"}
    )
    assert response.status_code == 415 and "text/csv" in response.json()["message"]
    assert response.json()["type"] == "UnsupportedMediaType"
    refused = invoke(client, "tenants/t004.joblib", accept="application/xml")
    assert refused.status_code == 406 and "text/csv" in refused.json()["message"]
    assert refused.json()["type"] == "NotAcceptable"


def test_curl_default_type_on_rows_says_how_to_type_them(client: httpx.Client) -> None:
    """`curl -d '[[5.1, ...]]'` types the rows as a form; a real form (`-d data=...`) goes to
    the handler as TorchServe's and MMS's do, so the rows are refused, saying how to type them."""
    form_typed = {"content-type": "application/x-www-form-urlencoded"}
    headers = {"x-amzn-sagemaker-target-model": "tenants/t004.joblib", **form_typed}
    response = client.post("/invocations", content=json.dumps([ROW]), headers=headers)
    assert response.status_code == 415, response.text
    message = response.json()["message"]
    assert "curl -d" in message and "-H 'Content-Type: application/json'" in message
    assert "application/json, text/csv, application/x-npy" in message
    form = {"data": json.dumps([ROW])}
    assert client.post("/invocations", data=form, headers=headers).status_code == 200


def test_body_over_the_limit_is_413(client: httpx.Client) -> None:
    response = client.post(
        "/models/tenants/t004.joblib/invoke", content=b"[" + b"1," * 600_000 + b"1]", headers=JSON
    )
    assert response.status_code == 413 and "max_request_size" in response.json()["message"]


@pytest.mark.parametrize("name", ["../etc/passwd", "tenants/../../secret.joblib", "a/./b"])
def test_path_traversal_in_names_is_refused(client: httpx.Client, name: str) -> None:
    response = client.post(
        "/invocations",
        content=json.dumps(ROW),
        headers={**JSON, "X-Amzn-SageMaker-Target-Model": name},
    )
    assert response.status_code == 400
    assert response.json()["type"] == "InvalidModelName"


def test_corrupt_artifact_fails_clearly_and_others_carry_on(client: httpx.Client) -> None:
    response = invoke(client, "broken/corrupt.joblib")
    assert response.status_code == 500
    assert response.json()["type"] == "ModelLoadError"
    assert "broken/corrupt.joblib" in response.json()["message"]
    assert invoke(client, "tenants/t005.joblib").status_code == 200


@pytest.mark.parametrize(
    "name", ["hostile/traversal.tar.gz", "hostile/symlink.tar.gz", "hostile/bomb.tar.gz"]
)
def test_hostile_archives_are_refused(client: httpx.Client, name: str, store: object) -> None:
    response = invoke(client, name)
    assert response.status_code == 500
    assert response.json()["type"] == "UnsafeArtifact", response.text
    assert invoke(client, "tenants/t005.joblib").status_code == 200


def test_fifty_concurrent_first_requests_cause_one_load(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    name = "custom/sagemaker"
    client.delete(f"/models/{name}")  # may not be loaded yet: 404 is fine
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        responses = list(pool.map(lambda _: invoke(client, name, [ROW]), range(50)))
    assert [r.status_code for r in responses] == [200] * 50
    events = client.get(f"/models/{name}").json()["events"]
    if any(e["kind"] == "unload" and e["reason"] == "requested" for e in events):
        events = events[max(i for i, e in enumerate(events) if e["kind"] == "unload") :]
    first_loads = [e for e in events if e["kind"] == "load" and e["reason"] == "invoked"]
    assert len(first_loads) == 1  # more workers may take copies (scale-out), not more first loads
