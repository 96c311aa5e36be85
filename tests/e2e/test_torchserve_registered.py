"""TorchServe's registrations, end to end, on a server started with TorchServe's
config.properties: the name a registration takes, the URL and the timeouts describe shows, and
gRPC's RegisterModel without initial_workers. Each test is named after the call it mirrors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.messages import TS_MANAGEMENT_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

MANAGEMENT = "org.pytorch.serve.grpc.management."


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`noop_2.mar` and `grpc_renamed.mar` are archives renamed after torch-model-archiver
    wrote them: their manifests' modelName is `noop` and `grpc_named`."""
    root = tmp_path_factory.mktemp("ts-registration-store")
    built = tmp_path_factory.mktemp("ts-registration-built")
    source = testing.mms_handler_folder(built / "src")
    testing.mar_of(source, root / "noop.mar")
    testing.mar_of(source, root / "densenet161.mar")
    testing.mar_of(source, built / "noop.mar", version="2.0").rename(root / "noop_2.mar")
    testing.mar_of(source, built / "grpc_named.mar").rename(root / "grpc_renamed.mar")
    return root


class Started:
    """A server started with TorchServe's config.properties loading densenet161.mar."""

    def __init__(self, serve: Servers, work: Path, store: Path) -> None:
        self.management, self.grpc_management = testing.free_port(), testing.free_port()
        properties = work / "config.properties"
        properties.write_text(
            f"management_address=http://127.0.0.1:{self.management}\n"
            f"grpc_management_port={self.grpc_management}\n"
            "enable_model_api=true\n"
            f"model_store={store}\n"
            "load_models=densenet161.mar\n"
            "default_response_timeout=45\n"
            "disable_token_authorization=true\n"
        )
        args = ["--cache-dir", str(work / "cache"), "--workers", "2", "--memory-budget", "2GiB"]
        environ = {**os.environ, "TS_CONFIG_FILE": str(properties)}
        serve.enter_context(testing.RunningServer(args, work, env=environ))

    def register(self, **params: str) -> httpx.Response:
        return httpx.post(self.url("/models"), params=params, timeout=60)

    def describe(self, path: str) -> list[dict[str, Any]]:
        answer = httpx.get(self.url(f"/models/{path}"), timeout=60)
        assert answer.status_code == 200, answer.text
        described: list[dict[str, Any]] = answer.json()
        return described

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.management}{path}"

    def grpc_register(self, **fields: Any) -> str:
        request = message(MANAGEMENT + "RegisterModelRequest")(**fields)
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_management}") as channel:
            return str(Stub(channel, TS_MANAGEMENT_SERVICE).RegisterModel(request, timeout=60).msg)


@pytest.fixture(scope="module")
def server(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Started:
    return Started(serve, tmp_path_factory.mktemp("ts-registration"), store)


def test_register_noop_2_mar_without_model_name_adds_a_version_of_noop(server: Started) -> None:
    """`POST /models?url=noop.mar`, then `?url=noop_2.mar` of an archive whose modelName is
    noop, version 2.0: TorchServe names a registration without model_name after the archive's
    manifest, so the second is noop's version 2.0. It was registered as "noop_2"."""
    assert server.register(url="noop.mar").status_code == 200
    second = server.register(url="noop_2.mar")
    assert second.status_code == 200, second.text
    assert second.json()["status"].startswith('Model "noop" Version: 2.0 registered'), second.text
    versions = {d["modelVersion"] for d in server.describe("noop/all")}
    assert versions == {"1.0", "2.0"}
    assert httpx.get(server.url("/models/noop_2"), timeout=60).status_code == 404


def test_grpc_register_without_model_name_takes_the_archives_name(server: Started) -> None:
    """gRPC's RegisterModel of `grpc_renamed.mar` (modelName grpc_named) without model_name:
    the model is grpc_named, as TorchServe's gRPC API names it."""
    said = server.grpc_register(url="grpc_renamed.mar", synchronous=True)
    assert said.startswith('Model "grpc_named" Version: 1.0 registered'), said
    assert server.describe("grpc_named")[0]["modelName"] == "grpc_named"


def test_list_and_describe_answer_the_url_given(server: Started) -> None:
    """`POST /models?url=noop.mar&model_name=noop_url` and `?url=noop_2.mar` of the same name,
    then `GET /models` and `GET /models/noop_url/all`: TorchServe answers each version's modelUrl
    as given, and a startup model's as load_models gave it. The server's file:// path was
    answered instead."""
    for url in ("noop.mar", "noop_2.mar"):
        assert server.register(url=url, model_name="noop_url").status_code == 200
    listed = httpx.get(server.url("/models"), params={"limit": "100"}, timeout=60).json()
    urls = {m["modelName"]: m["modelUrl"] for m in listed["models"]}
    assert (urls["noop_url"], urls["densenet161"]) == ("noop.mar", "densenet161.mar"), listed
    described = {d["modelVersion"]: d["modelUrl"] for d in server.describe("noop_url/all")}
    assert described == {"1.0": "noop.mar", "2.0": "noop_2.mar"}
    assert server.describe("densenet161")[0]["modelUrl"] == "densenet161.mar"


def test_describe_shows_the_response_and_startup_timeouts(server: Started) -> None:
    """`POST /models?url=noop.mar&model_name=noop_timeouts&response_timeout=7&startup_timeout=9`,
    then `GET /models/noop_timeouts`: TorchServe describes both timeouts, in seconds; a model
    that sets none shows the server's (default_response_timeout=45, worker_load_timeout_s's
    default of 300). Describe had neither."""
    params = {"response_timeout": "7", "startup_timeout": "9"}
    assert server.register(url="noop.mar", model_name="noop_timeouts", **params).status_code == 200
    (own,) = server.describe("noop_timeouts")
    assert (own["responseTimeout"], own["startupTimeout"]) == (7, 9), own
    (default,) = server.describe("densenet161")
    assert (default["responseTimeout"], default["startupTimeout"]) == (45, 300), default


def test_grpc_register_without_initial_workers_starts_none(server: Started) -> None:
    """gRPC's RegisterModel without initial_workers: TorchServe starts default_workers_per_model
    workers (none unless set), as its REST registration does, and so does REST here. gRPC
    started one."""
    said = server.grpc_register(url="noop.mar", model_name="noop_grpc", synchronous=True)
    assert said == (
        'Model "noop_grpc" Version: 1.0 registered with 0 initial workers. '
        "It loads on its first request."
    )
    assert server.describe("noop_grpc")[0]["workers"] == []
