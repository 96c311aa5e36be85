"""The model repository index as Triton answers it, through tritonclient's REST and gRPC clients
against a real server with real workers: every model of the store, loaded or not, each with
the version, state and reason Triton would give (core's ModelRepositoryManager::RepositoryIndex
and TRITONSERVER_ServerModelIndex), and `ready` keeping the READY ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from modelhost import testing

LOADED = "tenants/loaded.joblib"
UNLOADED = "tenants/unloaded.joblib"
UNTOUCHED = "untouched/never.joblib"  # no call ever names it
BROKEN = "broken/corrupt.joblib"
FOLDER = "custom/mms"  # a folder with its own handler is a model too
NOT_A_MODEL = "notes/readme.txt"


@pytest.fixture(scope="module")
def index_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("index-store")
    for name in (LOADED, UNLOADED, UNTOUCHED, "a-b.joblib", "a/c.joblib"):
        testing.iris_logreg(root / name)
    testing.corrupt_artifact(root / BROKEN)
    testing.mms_handler_folder(root / FOLDER)
    (root / NOT_A_MODEL).parent.mkdir()
    (root / NOT_A_MODEL).write_text("not a model")
    return root


@pytest.fixture(scope="module")
def server(index_store: Path, serve: Servers, grpc_port: int) -> testing.RunningServer:
    return serve(index_store, workers=2, memory_budget="4GiB", grpc_port=grpc_port)


@pytest.fixture(scope="module")
def prepared(server: testing.RunningServer) -> None:
    """One model loaded, one loaded and unloaded, one whose load failed; the rest untouched."""
    client = triton_http.InferenceServerClient(server.url.removeprefix("http://"))
    client.load_model(LOADED)
    client.load_model(UNLOADED)
    client.unload_model(UNLOADED)
    with pytest.raises(InferenceServerException):
        client.load_model(BROKEN)
    client.close()


@pytest.fixture
def index(oip: Any, prepared: None) -> list[dict[str, str]]:
    """The whole index as tritonclient's REST, then its gRPC, get_model_repository_index gives."""
    if isinstance(oip, triton_http.InferenceServerClient):
        entries: list[dict[str, str]] = oip.get_model_repository_index()
        return entries
    return list(oip.get_model_repository_index(as_json=True)["models"])


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def stub(grpc_port: int) -> Iterator[Any]:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def entry_of(index: list[dict[str, str]], name: str) -> dict[str, str]:
    (entry,) = [entry for entry in index if entry["name"] == name]
    return entry


def test_a_model_never_touched_is_listed_by_name_alone(index: list[dict[str, str]]) -> None:
    """Triton lists every model of its repository; one never loaded has no version or state."""
    assert entry_of(index, UNTOUCHED) == {"name": UNTOUCHED}
    assert entry_of(index, FOLDER) == {"name": FOLDER}


def test_the_index_is_every_model_of_the_store_once_in_name_order(
    index: list[dict[str, str]],
) -> None:
    names = [entry["name"] for entry in index]
    wanted = [LOADED, UNLOADED, UNTOUCHED, BROKEN, FOLDER, "a-b.joblib", "a/c.joblib"]
    assert names == sorted(wanted)
    assert NOT_A_MODEL not in names


def test_a_loaded_model_is_ready_with_its_version(index: list[dict[str, str]]) -> None:
    """Triton leaves out a reason it does not have."""
    assert entry_of(index, LOADED) == {"name": LOADED, "version": "1", "state": "READY"}


def test_an_unloaded_model_is_unavailable_because_unloaded(index: list[dict[str, str]]) -> None:
    assert entry_of(index, UNLOADED) == {
        "name": UNLOADED,
        "version": "1",
        "state": "UNAVAILABLE",
        "reason": "unloaded",
    }


def test_a_failed_load_is_unavailable_with_the_failure(index: list[dict[str, str]]) -> None:
    entry = entry_of(index, BROKEN)
    assert (entry["version"], entry["state"]) == ("1", "UNAVAILABLE")
    assert BROKEN in entry["reason"]
    assert "not loaded" not in entry["reason"]


def test_ready_lists_only_the_ready_models(http: httpx.Client, stub: Any, prepared: None) -> None:
    ready = [{"name": LOADED, "version": "1", "state": "READY"}]
    assert http.post("/v2/repository/index", json={"ready": True}).json() == ready
    answer = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True))
    assert [(m.name, m.version, m.state, m.reason) for m in answer.models] == [
        (LOADED, "1", "READY", "")
    ]


def test_ready_that_is_not_a_boolean_is_400(http: httpx.Client) -> None:
    """Triton refuses it rather than listing everything."""
    response = http.post("/v2/repository/index", json={"ready": "yes"})
    assert response.status_code == 400
    assert "expected a boolean" in response.json()["error"]


def test_a_repository_name_is_refused_over_grpc(stub: Any) -> None:
    """Triton serves one repository, unnamed, and says so rather than ignoring the name."""
    with pytest.raises(grpc.RpcError) as raised:
        stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(repository_name="other"))
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "repository_name" in str(raised.value.details())


def test_the_grpc_client_reads_the_same_index(grpc_port: int, prepared: None) -> None:
    """tritonclient.grpc's message, unconverted: empty fields are left unset as Triton leaves
    them."""
    client = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    try:
        models = {m.name: m for m in client.get_model_repository_index().models}
    finally:
        client.close()
    assert (models[UNTOUCHED].version, models[UNTOUCHED].state) == ("", "")
    assert models[UNLOADED].reason == "unloaded"
