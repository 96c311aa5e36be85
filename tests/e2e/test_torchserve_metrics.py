"""TorchServe's metric names on its metrics port, as its dashboards and alerts read them: a
server started with TorchServe's config.properties asking for `metrics_mode=prometheus` serves
`Requests2XX{Level="Host"}` and the `ts_*` series beside modelhost's own, over the same requests.
Each test is named after the metrics API call it mirrors (TorchServe's docs/metrics_api.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(1)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, metrics_port: int, serve: Servers
) -> testing.RunningServer:
    store = tmp_path_factory.mktemp("ts-metrics-store")
    testing.iris_logreg(store / "iris.pkl")
    properties = tmp_path_factory.mktemp("ts-config") / "config.properties"
    properties.write_text(
        f"metrics_address=http://127.0.0.1:{metrics_port}\nmetrics_mode=prometheus\n"
        "disable_token_authorization=true\n"
    )
    environ = {**os.environ, "TS_CONFIG_FILE": str(properties)}
    return serve(store, env=environ, workers=1, memory_budget="2GiB")


@pytest.fixture(scope="module")
def traffic(server: testing.RunningServer) -> None:
    """Two answered predictions and one for a model that does not exist."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for _ in range(2):
            assert http.post("/predictions/iris.pkl", json=ROWS).status_code == 200
        assert http.post("/predictions/no-such-model", json=ROWS).status_code == 404


@pytest.fixture
def metrics(metrics_port: int, traffic: None) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{metrics_port}", timeout=30) as http:
        yield http


def value(text: str, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = []
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            found.append(float(match.group(2)))
    assert len(found) == 1, f"{name} {labels}: {found} in\n{text}"
    return found[0]


def test_get_metrics(metrics: httpx.Client) -> None:
    """`curl http://127.0.0.1:8082/metrics`: TorchServe's series beside modelhost's."""
    text = metrics.get("/metrics").text
    assert "# TYPE Requests2XX counter" in text
    assert value(text, "Requests2XX", Level="Host") >= 2
    assert value(text, "Requests4XX", Level="Host") >= 1
    iris = {"model_name": "iris.pkl", "model_version": "default"}
    assert value(text, "ts_inference_requests_total", **iris) == 2
    assert value(text, "ts_inference_latency_microseconds", **iris) > 0
    assert value(text, "ts_queue_latency_microseconds", **iris) >= 0
    assert "modelhost_http_requests_total" in text


def test_get_metrics_by_name(metrics: httpx.Client) -> None:
    """`/metrics?name[]=ts_inference_latency_microseconds&name[]=ts_queue_latency_microseconds`."""
    names = ["ts_inference_latency_microseconds", "ts_queue_latency_microseconds"]
    text = metrics.get("/metrics", params={"name[]": names}).text
    assert value(text, names[0], model_name="iris.pkl") > 0
    assert "ts_inference_requests_total" not in text and "Requests2XX" not in text
    assert "modelhost_" not in text


def test_without_prometheus_mode_only_modelhost_names(tmp_path: Path, serve: Servers) -> None:
    """TorchServe's default metrics_mode (log) leaves the metrics port to modelhost's names."""
    testing.iris_logreg(tmp_path / "store" / "iris.pkl")
    port = testing.free_port()
    serve(tmp_path / "store", workers=1, memory_budget="2GiB", metrics_port=port)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    assert "modelhost_" in text and "Requests2XX" not in text
