"""Migration settings observed on a real server with real workers: a model on
workers_per_model workers and on TorchServe's min_worker, a 413 for a response over
max_response_size, the user's thread variables in each worker, the management API on
management_host, TorchServe's versioned /predictions."""

from __future__ import annotations

import functools
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

ROW = testing.iris_rows(1)[0]
SAGEMAKER_MME_ENV = {  # what SageMaker and sagemaker-inference-toolkit set (the port: the test's)
    "SAGEMAKER_MULTI_MODEL": "true",
    "SAGEMAKER_SAFE_PORT_RANGE": "10000-10999",
    "SAGEMAKER_HANDLER": "sagemaker_inference.default_handler_service",
    "SAGEMAKER_MODEL_SERVER_WORKERS": "2",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "60",
}
MANAGEMENT_HOST = "127.0.0.2"  # the whole 127/8 is loopback on Linux

# answers with its worker's thread variables, padded to the size the body asks for
ENV_HANDLER = """
import json
import os
import sys

VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
RUNTIMES = ("sklearn", "xgboost", "lightgbm", "onnxruntime", "torch")


def handle(data, context):
    if data is None:
        return None
    replies = []
    for request in data:
        body = json.loads(request["body"])
        reply = {name: os.environ.get(name) for name in VARIABLES}
        reply["runtimes"] = [name for name in RUNTIMES if name in sys.modules]
        replies.append({**reply, "pad": "x" * int(body.get("pad", 0))})
    return replies
"""


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """Chosen as the server starts, not at import, where another test's server could take it."""
    return testing.free_port()


@pytest.fixture(scope="module")
def migrated(
    store: Path,
    management_port: int,
    metrics_port: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[testing.RunningServer]:
    work = tmp_path_factory.mktemp("migrated")
    own = shutil.copytree(store, work / "store")  # the session's store stays as other tests know it
    (own / "envreport").mkdir()
    (own / "envreport" / "handler.py").write_text(ENV_HANDLER)
    many = work / "many"  # more files than max_unpacked_files allows
    for index in range(5):
        testing.iris_logreg(many / f"model{index}.joblib")
    testing.tar_gz_of(many, own / "hostile" / "many.tar.gz")
    args = testing.serve_args(
        own,
        work / "cache",
        workers=3,
        workers_per_model=2,
        memory_budget="4GiB",
        max_response_size="64KiB",
        management_port=management_port,
        management_host=MANAGEMENT_HOST,
        metrics_port=metrics_port,
        max_unpacked_bytes="16MiB",
        max_unpacked_files=4,
        log_level="warning",
        metrics_model_series=1,
    )
    env = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "NUMEXPR_NUM_THREADS": "3"}
    env |= {"VECLIB_MAXIMUM_THREADS": "3"}
    with testing.RunningServer(args, work, env={**_environ(), **env}) as running:
        yield running


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",)}


@pytest.fixture
def http(migrated: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=migrated.url, timeout=60) as client:
        yield client


def test_workers_per_model_loads_that_many(http: httpx.Client) -> None:
    """`--workers-per-model` loads each model on that many workers."""
    assert http.post("/models/iris.pkl/invoke", json=[ROW]).status_code == 200
    deadline = time.monotonic() + 30  # the second copy loads beside the first request
    while len((described := http.get("/models/iris.pkl").json())["workers"]) < 2:
        assert time.monotonic() < deadline, described
        time.sleep(0.05)
    assert len(described["workers"]) == 2, described


def test_max_response_size_is_413(http: httpx.Client) -> None:
    """A response over `--max-response-size` is refused with 413."""
    small = http.post("/predictions/envreport", json={"pad": 10})
    assert small.status_code == 200, small.text
    large = http.post("/predictions/envreport", json={"pad": 100_000})
    assert large.status_code == 413, large.text
    error = large.json()
    assert error["type"] == "ResponseTooLarge"
    assert "max_response_size" in error["message"] and "--max-response-size" in error["message"]


def test_an_answer_just_under_max_response_size_is_answered(http: httpx.Client) -> None:
    """An answer a little under `--max-response-size` comes whole: its frame is within its cap."""
    base = len(http.post("/predictions/envreport", json={"pad": 0}).content)
    pad = 64 * 1024 - base - 256  # room for the two workers' runtimes to differ
    response = http.post("/predictions/envreport", json={"pad": pad})
    assert response.status_code == 200, response.text
    assert len(response.json()["pad"]) == pad


def test_an_answer_past_a_frames_room_is_413_and_keeps_its_worker(
    http: httpx.Client, migrated: testing.RunningServer
) -> None:
    """An answer of 2 MB where 64 KiB is the most: the worker refuses it for the frontend, with
    the same 413 and message, instead of sending a frame its call may not carry."""
    exits = len(migrated.events("worker_exit"))
    large = http.post("/predictions/envreport", json={"pad": 2_000_000})
    assert large.status_code == 413, large.text
    error = large.json()
    assert error["type"] == "ResponseTooLarge"
    assert error["message"].startswith("the model's response is 1.9 MiB but max_response_size is ")
    assert error["message"].endswith(
        "64.0 KiB; ask for fewer rows per request or raise --max-response-size"
    )
    assert len(migrated.events("worker_exit")) == exits


def test_the_users_thread_variables_win_and_are_reported(
    http: httpx.Client, migrated: testing.RunningServer
) -> None:
    reply = http.post("/predictions/envreport", json={}).json()
    assert (reply["OMP_NUM_THREADS"], reply["MKL_NUM_THREADS"]) == ("3", "3")
    assert (reply["NUMEXPR_NUM_THREADS"], reply["VECLIB_MAXIMUM_THREADS"]) == ("3", "3")
    assert reply["OPENBLAS_NUM_THREADS"] not in (None, "3")  # not the user's: the default
    assert "OMP_NUM_THREADS=3" in migrated.log_text()


def test_management_host_binds_the_management_api(management_port: int) -> None:
    with httpx.Client(base_url=f"http://{MANAGEMENT_HOST}:{management_port}") as management:
        assert management.get("/models").status_code == 200
    with pytest.raises(httpx.ConnectError), httpx.Client() as other:
        other.get(f"http://127.0.0.1:{management_port}/models")


def test_metrics_address_serves_metrics_on_its_own_port(
    http: httpx.Client, metrics_port: int
) -> None:
    scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics")
    assert scraped.status_code == 200 and "modelhost_" in scraped.text
    assert httpx.get(f"http://127.0.0.1:{metrics_port}/models").status_code == 404


@pytest.fixture
def management(management_port: int) -> Iterator[httpx.Client]:
    url = f"http://{MANAGEMENT_HOST}:{management_port}"
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client


def _copies(http: httpx.Client, name: str) -> int:
    return len(http.get(f"/models/{name}").json()["workers"])


def test_torchserve_put_min_worker_loads_that_many_copies(
    http: httpx.Client, management: httpx.Client
) -> None:
    name = "tenants/t005.joblib"
    put = management.put(f"/models/{name}", params={"min_worker": 3, "synchronous": "true"})
    assert put.status_code == 404  # not registered yet, as in TorchServe
    assert http.post(f"/models/{name}/invoke", json=[ROW]).status_code == 200
    put = management.put(f"/models/{name}", params={"min_worker": 3, "synchronous": "true"})
    assert put.status_code == 200, put.text
    assert put.json() == {"status": f"Workers scaled to 3 for model: {name}"}
    assert _copies(http, name) == 3  # above the server's workers_per_model of 2
    assert management.get(f"/models/{name}/1.0").json()[0]["minWorkers"] == 3
    bad = management.put(f"/models/{name}", params={"min_worker": "many"})
    assert bad.status_code == 400 and "min_worker" in bad.json()["message"]
    upside_down = management.put(f"/models/{name}", params={"min_worker": 3, "max_worker": 1})
    assert upside_down.status_code == 400 and "max_worker" in upside_down.json()["message"]


def test_torchserve_versioned_predictions(http: httpx.Client) -> None:
    versioned = http.post("/predictions/iris.pkl/1.0", content=str(ROW).encode())
    assert versioned.status_code == 200, versioned.text
    assert versioned.json() == {"predictions": [0]}
    other = http.post("/predictions/iris.pkl/2.0", content=str(ROW).encode())
    assert other.status_code == 404  # no model iris.pkl/2.0: a model here has one version


def test_sagemaker_multi_model_container_config_starts_and_serves(
    store: Path, tmp_path: Path
) -> None:
    """The toolkit's mme-mms.properties and variables: management on the inference port, two
    workers per model."""
    properties = Path(__file__).parents[1] / "config" / "files" / "sagemaker-mme.properties"
    args = testing.serve_args(store, tmp_path / "cache", workers=2, memory_budget="4GiB")
    server = testing.RunningServer(args, tmp_path, env={**_environ(), **SAGEMAKER_MME_ENV})
    server.env |= {"SAGEMAKER_BIND_TO_PORT": str(server.port), "MMS_CONFIG_FILE": str(properties)}
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        spec = {"model_name": "churn", "url": str(store / "iris.pkl")}
        assert http.post("/models", json=spec).status_code == 200
        headers = {"X-Amzn-SageMaker-Target-Model": "churn"}
        invoked = http.post("/invocations", json=[ROW], headers=headers)
        assert invoked.status_code == 200, invoked.text
        deadline = time.monotonic() + 30
        while _copies(http, "churn") < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "'default_service_handler'" in server.log_text()
        assert server.stop() == 0


class _SignedFiles(SimpleHTTPRequestHandler):
    """Serves a file only to a URL carrying the right signature, as a presigned URL does."""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        if urllib.parse.urlsplit(self.path).query != SIGNATURE:
            self.send_error(403, "signature missing or wrong")
            return
        super().do_GET()

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_error(403, "a presigned GET URL does not allow HEAD")

    def log_message(self, *args: object) -> None:
        pass


SIGNATURE = "X-Amz-Signature=abc123&X-Amz-Expires=300"


def test_a_presigned_url_with_its_query_string_loads(store: Path, tmp_path: Path) -> None:
    handler = functools.partial(_SignedFiles, directory=str(store))
    signed = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=signed.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{signed.server_address[1]}"
    args = testing.serve_args(
        store, tmp_path / "cache", workers=1, memory_budget="4GiB", allowed_urls=f"{base}/*"
    )
    try:
        with (
            testing.RunningServer(args, tmp_path) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            spec = {"model_name": "signed", "url": f"{base}/iris.pkl?{SIGNATURE}"}
            loaded = client.post("/models", json=spec)
            assert loaded.status_code == 200, loaded.text
            invoked = client.post("/models/signed/invoke", json=[ROW])
            assert invoked.json() == {"predictions": [0]}
            unsigned = {"model_name": "unsigned", "url": f"{base}/iris.pkl"}
            assert client.post("/models", json=unsigned).status_code == 502
    finally:
        signed.shutdown()
        signed.server_close()


def test_preload_runtimes_is_what_the_workers_have_imported(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """onnxruntime alone, not even scikit-learn (the default's): the one worker imports it for
    its first scikit-learn model, which is not charged the import (about 90 MB)."""
    own = shutil.copytree(store, tmp_path / "store")
    (own / "envreport").mkdir()
    (own / "envreport" / "handler.py").write_text(ENV_HANDLER)
    server = serve(own, workers=1, preload_runtimes="onnxruntime", memory_budget="4GiB")
    with httpx.Client(base_url=server.url, timeout=60) as http:

        def runtimes() -> list[str]:
            return list(http.post("/predictions/envreport", json={}).json()["runtimes"])

        assert runtimes() == ["onnxruntime"]
        assert http.post("/models/iris.pkl/invoke", json=[ROW]).status_code == 200
        assert runtimes() == ["sklearn", "onnxruntime"]
    (load,) = [load for load in server.events("load") if load["model"] == "iris.pkl"]
    assert load["bytes"] < 32 * 2**20, load


@pytest.mark.parametrize(
    ("archive", "limit"),
    [("hostile/bomb.tar.gz", "16777216 bytes"), ("hostile/many.tar.gz", "4 members")],
)
def test_the_unpack_limits_refuse_an_archive_past_them(
    http: httpx.Client, archive: str, limit: str
) -> None:
    refused = http.post(f"/models/{archive}/invoke", json=[ROW])
    assert refused.status_code == 500 and refused.json()["type"] == "UnsafeArtifact"
    assert limit in refused.json()["message"]


def test_log_level_warning_leaves_out_info_lines(migrated: testing.RunningServer) -> None:
    log = migrated.log_text()
    assert "WARNING" in log and " INFO " not in log and "INFO:" not in log


def test_largest_model_gets_its_own_series(http: httpx.Client) -> None:
    """`--metrics-model-series` gives the largest model its own series."""
    assert http.post("/models/iris.pkl/invoke", json=[ROW]).status_code == 200
    series = [
        line
        for line in http.get("/metrics").text.splitlines()
        if line.startswith("modelhost_model_memory_bytes{")
    ]
    assert len(series) == 1, series
