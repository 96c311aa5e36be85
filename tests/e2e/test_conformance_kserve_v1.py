"""KServe's v1 data plane, as its protocol page documents each call and its model server answers
it (python/kserve's `v1_endpoints.py`, `dataplane.py` and `errors.py`): one test per call,
named after it, against a real modelhost on loopback with real workers. Errors are KServe's
`{"error": message}`, with its statuses."""

from __future__ import annotations

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(2)
IRIS_ANSWER = [0, 0]  # the iris store's models on its first two rows
PREDICT_ROUTE = "/v1/models/{model:path}:predict"


def predict(client: httpx.Client, name: str, body: object) -> httpx.Response:
    return client.post(f"/v1/models/{name}:predict", json=body)


def error_of(response: httpx.Response) -> str:
    """KServe's error body: one field, `error`."""
    body = response.json()
    assert list(body) == ["error"], response.text
    message: str = body["error"]
    return message


def test_server_live(client: httpx.Client) -> None:
    """`GET /`: KServe's liveness, `{"status": "alive"}`, which its REST client reads for a
    v1 server; a browser, asking for HTML, gets the dashboard there."""
    live = client.get("/")
    assert live.status_code == 200, live.text
    assert live.json() == {"status": "alive"}
    assert "accept" in live.headers["vary"].lower()
    page = client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()


def test_list_models(client: httpx.Client) -> None:
    """`GET /v1/models`: `{"models": [<model_name>]}`, the names of the models the server
    knows, a name holding `/` as it is."""
    assert predict(client, "tenants/t000.joblib", {"instances": ROWS}).status_code == 200
    listed = client.get("/v1/models")
    assert listed.status_code == 200, listed.text
    assert list(listed.json()) == ["models"]
    assert "tenants/t000.joblib" in listed.json()["models"]
    assert all(isinstance(name, str) for name in listed.json()["models"])


def test_list_models_names_the_stores_models_never_used(client: httpx.Client) -> None:
    """KServe lists the models its repository holds, as the OIP index does here."""
    assert "archives/m.zip" in client.get("/v1/models").json()["models"]


def test_model_ready(client: httpx.Client) -> None:
    """`GET /v1/models/<model_name>` of a loaded model: `{"name": <model_name>, "ready": true}`."""
    assert predict(client, "tenants/t001.joblib", {"instances": ROWS}).status_code == 200
    ready = client.get("/v1/models/tenants/t001.joblib")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"name": "tenants/t001.joblib", "ready": True}


def test_model_ready_of_a_model_not_loaded_answers_503(client: httpx.Client) -> None:
    """KServe answers a model it knows but has not loaded 503 ("Model with name m is not
    ready."), which its client reads as not ready; the message says the first predict loads
    it."""
    answer = client.get("/v1/models/tenants/t005.joblib")
    assert answer.status_code == 503, answer.text
    message = error_of(answer)
    assert "Model with name tenants/t005.joblib is not ready" in message, message
    assert "POST /v1/models/tenants/t005.joblib:predict" in message, message


def test_model_ready_of_an_unknown_model_answers_404(client: httpx.Client) -> None:
    answer = client.get("/v1/models/absent.joblib")
    assert answer.status_code == 404, answer.text
    message = error_of(answer)
    assert "Model with name absent.joblib does not exist" in message, message
    assert "path relative to the store" in message, message


def test_predict(client: httpx.Client) -> None:
    """`POST /v1/models/<model_name>:predict` with `{"instances": []}`: `{"predictions": []}`.
    The model loads on its first call, through the host's invocation path: its answer carries
    the tier, the cache and the load in `Server-Timing`."""
    answer = predict(client, "tenants/t002.joblib", {"instances": ROWS})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": IRIS_ANSWER}
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.headers["x-modelhost-cache"] in ("disk", "remote")
    assert answer.headers["x-modelhost-tier"]
    assert "load;dur=" in answer.headers["server-timing"]
    again = predict(client, "tenants/t002.joblib", {"instances": ROWS})
    assert again.headers["x-modelhost-cache"] == "hit"


def test_predict_with_inputs(client: httpx.Client) -> None:
    """KServe's page allows `{"inputs": []}` in place of `{"instances": []}`."""
    answer = predict(client, "iris.pkl", {"inputs": ROWS})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"predictions": IRIS_ANSWER}


def test_predict_takes_the_method_parameter(client: httpx.Client) -> None:
    """`?method=predict_proba`, as on the other invocation routes: KServe's sklearnserver
    answers probabilities when started with PREDICT_PROBA=true."""
    answer = client.post(
        "/v1/models/iris.pkl:predict", json={"instances": ROWS}, params={"method": "predict_proba"}
    )
    assert answer.status_code == 200, answer.text
    (first, _) = answer.json()["predictions"]
    assert len(first) == 3 and abs(sum(first) - 1) < 1e-6, answer.text


def test_predict_with_a_content_type_over_the_cap_answers_431(client: httpx.Client) -> None:
    """The Content-Type goes on to the worker, so it is capped as on the other routes."""
    headers = {"content-type": "application/json; x=" + "a" * 5000}
    answer = client.post("/v1/models/iris.pkl:predict", content=b"[[1, 2, 3, 4]]", headers=headers)
    assert answer.status_code == 431, answer.text
    assert "Content-Type" in error_of(answer) or "content-type" in error_of(answer)


def test_predict_is_counted_as_an_invocation(client: httpx.Client) -> None:
    """A v1 predict counts in the model's counters and the metrics as any invocation."""
    for _ in range(2):
        assert predict(client, "tenants/t003.joblib", {"instances": ROWS}).status_code == 200
    described = client.get("/models/tenants/t003.joblib").json()
    assert described["counters"]["requests"] == 2, described
    metrics = client.get("/metrics").text
    assert f'route="{PREDICT_ROUTE}"' in metrics


def test_explain_answers_501_naming_predict(client: httpx.Client) -> None:
    """`POST /v1/models/<model_name>:explain`: KServe answers 501 for a model without an
    explainer; modelhost has none, and says to call `:predict`."""
    answer = client.post("/v1/models/iris.pkl:explain", json={"instances": ROWS})
    assert answer.status_code == 501, answer.text
    assert "POST /v1/models/iris.pkl:predict" in error_of(answer)
    unknown = client.post("/v1/models/absent.joblib:explain", json={"instances": ROWS})
    assert unknown.status_code == 404, unknown.text


def test_predict_of_malformed_json_answers_400(client: httpx.Client) -> None:
    """KServe: 400 `Unrecognized request format: ...` for a JSON body that does not parse."""
    headers = {"content-type": "application/json"}
    answer = client.post(
        "/v1/models/iris.pkl:predict", content=b'{"instances": [[1,', headers=headers
    )
    assert answer.status_code == 400, answer.text
    message = error_of(answer)
    assert "Unrecognized request format" in message and '{"instances"' in message, message


def test_predict_of_instances_not_a_list_answers_400(client: httpx.Client) -> None:
    """KServe: 400 `Expected "instances" to be a list`."""
    answer = predict(client, "iris.pkl", {"instances": "5.1,3.5,1.4,0.2"})
    assert answer.status_code == 400, answer.text
    assert 'Expected "instances" to be a list' in error_of(answer)


def test_predict_without_instances_answers_400(client: httpx.Client) -> None:
    """A built-in model without `instances` (KServe's sklearnserver fails the lookup): 400,
    naming the shapes it takes."""
    answer = predict(client, "iris.pkl", {"rows": ROWS})
    assert answer.status_code == 400, answer.text
    assert '{"instances": ...}' in error_of(answer)


def test_predict_of_an_unknown_model_answers_404(client: httpx.Client) -> None:
    answer = predict(client, "tenants/absent.joblib", {"instances": ROWS})
    assert answer.status_code == 404, answer.text
    assert "Model with name tenants/absent.joblib does not exist" in error_of(answer)


def test_predict_of_a_model_that_fails_to_load_answers_500(client: httpx.Client) -> None:
    """KServe answers a model whose load raises 500 with the reason."""
    answer = predict(client, "broken/corrupt.joblib", {"instances": ROWS})
    assert answer.status_code == 500, answer.text
    assert "broken/corrupt.joblib" in error_of(answer)
    ready = client.get("/v1/models/broken/corrupt.joblib")
    assert ready.status_code == 503, ready.text
    assert "last load failed" in error_of(ready)


def test_bad_calls_leave_the_model_serving(client: httpx.Client) -> None:
    """After each refusal the model answers the next good predict."""
    bad = [{"instances": "x"}, {"rows": ROWS}, {"instances": [["a", "b"]]}]
    assert all(predict(client, "tenants/t004.joblib", body).status_code == 400 for body in bad)
    good = predict(client, "tenants/t004.joblib", {"instances": ROWS})
    assert good.status_code == 200, good.text
    assert good.json() == {"predictions": IRIS_ANSWER}


def test_a_method_no_v1_route_takes_answers_in_kserve_shape(client: httpx.Client) -> None:
    answer = client.delete("/v1/models/iris.pkl")
    assert answer.status_code == 405, answer.text
    assert "GET" in error_of(answer)
