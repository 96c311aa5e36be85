"""Numbers an artifact's own manifest sets, against a real server with one worker: a NaN or an
infinity, or a count past any runtime's, is refused at the load with the key to fix; threads past
the cores are the cores. Before, a NaN batch delay hung every request to the model, a NaN load
timeout killed the worker and every model on it, a huge thread count was an unexpected error,
and a million threads crashed the worker."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}
GOOD = "/models/iris.joblib/invoke"
# each model's modelhost.toml, and the key its refusal must name
MANIFESTS = {
    "delay-nan": ("batch_size = 4\nmax_batch_delay_ms = nan\n", "max_batch_delay_ms"),
    "delay-inf": ("batch_size = 4\nmax_batch_delay_ms = inf\n", "max_batch_delay_ms"),
    "load-timeout-nan": ("load_timeout_s = nan\n", "load_timeout_s"),
    "threads-huge": (f"threads = {10**20}\n", "threads"),
}
MAR_MANIFEST = {"model": {"handler": "handler.py", "configFile": "model-config.yaml"}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "iris.joblib")
    for name, (text, _) in MANIFESTS.items():
        testing.iris_logreg(root / name / "model.joblib")
        (root / name / "modelhost.toml").write_text(text)
    mar = testing.mms_handler_folder(root / "mar-batch-nan")  # an unpacked .mar
    (mar / "MAR-INF").mkdir()
    (mar / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(MAR_MANIFEST))
    (mar / "model-config.yaml").write_text("batchSize: .nan\n")
    testing.lightgbm_iris(root / "threads-million" / "model.txt")
    (root / "threads-million" / "modelhost.toml").write_text("threads = 1000000\n")
    return root


@pytest.fixture(scope="module")
def server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    args = testing.serve_args(store, tmp_path_factory.mktemp("cache"), workers=1)
    with testing.RunningServer(args, tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.mark.parametrize(
    ("model", "key"),
    [*((name, key) for name, (_, key) in MANIFESTS.items()), ("mar-batch-nan", "batchSize")],
)
def test_a_manifests_unusable_number_is_refused_and_the_worker_kept(
    server: testing.RunningServer, model: str, key: str
) -> None:
    with beside_the_good_model(server) as client:
        refused = client.post(f"/models/{model}/invoke", content=ROW, headers=JSON)
        assert refused.status_code == 500, refused.text
        assert refused.json()["type"] == "ModelLoadError"
        assert key in refused.json()["message"]
    assert "unhandled error" not in server.log_text()


def test_a_model_asking_for_a_million_threads_gets_the_cores(
    server: testing.RunningServer,
) -> None:
    with beside_the_good_model(server) as client:
        answer = client.post("/models/threads-million/invoke", content=ROW, headers=JSON)
        assert answer.status_code == 200, answer.text


@contextlib.contextmanager
def beside_the_good_model(server: testing.RunningServer) -> Iterator[httpx.Client]:
    """A client; the good model answers before and after, from memory, and no worker was
    killed meanwhile."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post(GOOD, content=ROW, headers=JSON).status_code == 200
        started = len(server.events("worker_start"))
        yield client
        again = client.post(GOOD, content=ROW, headers=JSON)
        assert again.status_code == 200 and again.headers["x-modelhost-cache"] == "hit"
    assert len(server.events("worker_start")) == started
