"""The error bodies a TorchServe client parses, on a server started with TorchServe's
config.properties: each refusal's `type` is the Java exception TorchServe 0.12 answers that case
with (`{"code": N, "type": "ModelNotFoundException", "message": …}`), on the inference and the
management port alike."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from helpers.handlers import gated_handler_folder
from helpers.serving import Servers
from helpers.ts_config import noop_versions, started_from_properties

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = {"instances": testing.iris_rows(1)}
RAISING_HANDLER = """def handle(data, context):
    if data is None:
        return None
    raise ValueError("this handler always fails")
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ts-types-gate") / "open"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, gate: Path) -> Path:
    """noop.mar and noop_2.mar, two versions of one model; a raising, a gated, a slow model;
    an archive whose manifest is not JSON."""
    root = tmp_path_factory.mktemp("ts-types-store")
    noop_versions(tmp_path_factory, root)
    (root / "raising").mkdir()
    (root / "raising/handler.py").write_text(RAISING_HANDLER)
    gated_handler_folder(root / "gated", gate)
    testing.slow_handler_folder(root / "slow")
    broken = tmp_path_factory.mktemp("ts-types-broken")
    (broken / "MAR-INF").mkdir()
    (broken / "MAR-INF/MANIFEST.json").write_text("{not json")
    testing.zip_of(broken, root / "broken.mar")
    return root


class Started:
    """A server started with TorchServe's config.properties, loading noop's two archives."""

    def __init__(self, serve: Servers, work: Path, store: Path) -> None:
        management = testing.free_port()
        properties = (
            f"management_address=http://127.0.0.1:{management}\n"
            "enable_model_api=true\n"
            f"model_store={store}\n"
            "load_models=noop.mar,noop_2.mar\n"
            "job_queue_size=1\n"
            "disable_token_authorization=true\n"
        )
        server = started_from_properties(serve, work, properties, workers=2)
        self.inference = httpx.Client(base_url=server.url, timeout=60)
        self.management = httpx.Client(base_url=f"http://127.0.0.1:{management}", timeout=60)


@pytest.fixture(scope="module")
def ts(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    started = Started(serve, tmp_path_factory.mktemp("ts-types"), store)
    yield started
    started.inference.close()
    started.management.close()


def refused(answer: httpx.Response, code: int, type_name: str) -> str:
    """The message of an error body of `code` and TorchServe's `type_name`."""
    assert answer.status_code == code, answer.text
    body = answer.json()
    assert (body["code"], body["type"]) == (code, type_name), body
    return str(body["message"])


def test_predicting_an_unknown_model_is_model_not_found_exception(ts: Started) -> None:
    refused(ts.inference.post("/predictions/InvalidModel", json=ROW), 404, "ModelNotFoundException")


def test_predicting_an_unknown_version_is_model_version_not_found_exception(ts: Started) -> None:
    answer = ts.inference.post("/predictions/noop/1.3.1", json=ROW)
    assert "1.3.1" in refused(answer, 404, "ModelVersionNotFoundException")


def test_describing_an_unknown_model_is_model_not_found_exception(ts: Started) -> None:
    refused(ts.management.get("/models/InvalidModel"), 404, "ModelNotFoundException")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/models/noop/1.3.1"),
        ("PUT", "/models/noop/1.3.1"),
        ("DELETE", "/models/noop/1.3.1"),
        ("PUT", "/models/noop/3.3.3/set-default"),
    ],
    ids=["describe", "scale", "unregister", "set-default"],
)
def test_an_unknown_version_is_model_version_not_found_exception(
    ts: Started, method: str, path: str
) -> None:
    answer = ts.management.request(method, path)
    refused(answer, 404, "ModelVersionNotFoundException")


def test_registering_without_url_is_bad_request_exception(ts: Started) -> None:
    message = refused(ts.management.post("/models"), 400, "BadRequestException")
    assert message == "Parameter url is required."


def test_a_malformed_registration_body_is_bad_request_exception(ts: Started) -> None:
    answer = ts.management.post(
        "/models", content=b"{", headers={"content-type": "application/json"}
    )
    refused(answer, 400, "BadRequestException")


@pytest.mark.parametrize("url", ["InvalidUrl", ""], ids=["names-nothing", "empty"])
def test_registering_a_url_naming_nothing_is_model_not_found_exception(
    ts: Started, url: str
) -> None:
    """TorchServe's `Model not found at: InvalidUrl` and `empty url`: 404, not 400."""
    answer = ts.management.post("/models", params={"url": url})
    refused(answer, 404, "ModelNotFoundException")


def test_registering_a_url_that_downloads_nothing_is_download_archive_exception(
    ts: Started, store: Path
) -> None:
    """TorchServe's `Failed to download archive from: …`, 400, for a URL (not a name)."""
    answer = ts.management.post("/models", params={"url": f"file://{store}/absent.mar"})
    refused(answer, 400, "DownloadArchiveException")


def test_registering_an_unreadable_manifest_is_invalid_model_exception(ts: Started) -> None:
    answer = ts.management.post("/models", params={"url": "broken.mar"})
    assert "MANIFEST.json" in refused(answer, 400, "InvalidModelException")


def test_registering_a_registered_version_is_conflict_status_exception(ts: Started) -> None:
    answer = ts.management.post("/models", params={"url": "noop.mar"})
    assert "already registered" in refused(answer, 409, "ConflictStatusException")


def test_unregistering_the_default_version_is_invalid_model_version_exception(
    ts: Started,
) -> None:
    """noop has two versions, from its two archives: the default one cannot go first."""
    answer = ts.management.delete("/models/noop")
    assert "default version" in refused(answer, 403, "InvalidModelVersionException")


def test_scaling_below_min_is_bad_request_exception(ts: Started) -> None:
    answer = ts.management.put("/models/noop", params={"min_worker": 3, "max_worker": 1})
    refused(answer, 400, "BadRequestException")


def test_a_method_the_management_path_lacks_is_method_not_allowed_exception(ts: Started) -> None:
    refused(ts.management.put("/models"), 405, "MethodNotAllowedException")


def test_a_failing_handler_is_internal_server_exception(ts: Started) -> None:
    """TorchServe answers a worker's failure as an InternalServerException, whatever its code."""
    registered = ts.management.post("/models", params={"url": "raising", "model_name": "raising"})
    assert registered.status_code == 200, registered.text
    refused(ts.inference.post("/predictions/raising", json=ROW), 500, "InternalServerException")


def test_a_full_queue_is_service_unavailable_exception(ts: Started, gate: Path) -> None:
    """job_queue_size=1: one request runs at the gate, one waits, the third is refused with
    TorchServe's type (the status stays modelhost's 429, with Retry-After)."""
    registered = ts.management.post("/models", params={"url": "gated", "model_name": "gated"})
    assert registered.status_code == 200, registered.text
    one_copy = {"min_worker": 1, "max_worker": 1, "synchronous": "true"}  # no scale-out
    assert ts.management.put("/models/gated", params=one_copy).status_code == 200
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        held = [pool.submit(ts.inference.post, "/predictions/gated", json=ROW)]
        wait_until(queued(ts, 0, 1))
        held.append(pool.submit(ts.inference.post, "/predictions/gated", json=ROW))
        wait_until(queued(ts, 1, 1))
        answer = ts.inference.post("/predictions/gated", json=ROW)
        gate.touch()
        refused(answer, 429, "ServiceUnavailableException")
        assert [f.result().status_code for f in held] == [200, 200]


def test_a_request_past_its_timeout_is_internal_server_exception(ts: Started) -> None:
    """TorchServe fails a request past its response timeout as its worker's failure."""
    params = {"url": "slow", "model_name": "slow", "response_timeout": 1}
    assert ts.management.post("/models", params=params).status_code == 200
    answer = ts.inference.post("/predictions/slow", content=json.dumps({"sleep": 4}))
    refused(answer, 504, "InternalServerException")


def queued(ts: Started, waiting: int, running: int) -> Callable[[], bool]:
    """The gated model is loaded, with `waiting` requests in its queue and `running` in its
    workers."""

    def check() -> bool:
        answer = ts.inference.get("/models/gated")
        if answer.status_code != 200:
            return False
        model = answer.json()
        counts = (model["queued"], model["inFlight"] - model["queued"])
        return model["state"] == "loaded" and counts == (waiting, running)

    return check


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the server never reached the state the test waits for"
        time.sleep(0.02)
