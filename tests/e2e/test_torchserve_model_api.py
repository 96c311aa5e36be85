"""TorchServe's model API control, end to end: a server started with TorchServe's
config.properties refuses to register or unregister models through its management API, REST or
gRPC, unless `enable_model_api=true` says otherwise; the models it loads at start still load.
Each test is named after the request of TorchServe's model control tests it mirrors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.messages import TS_MANAGEMENT_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

REGISTER = {"model_name": "resnet-18", "url": "iris.pkl", "initial_workers": "1"}
REFUSED = {"code": 405, "type": "MethodNotAllowedException"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-model-api-store")
    testing.iris_logreg(root / "iris.pkl")
    return root


class Started:
    """A server started with TorchServe's config.properties, and its management ports."""

    def __init__(self, serve: Servers, work: Path, store: Path, *lines: str) -> None:
        self.management, self.grpc_management = testing.free_port(), testing.free_port()
        properties = work / "config.properties"
        properties.write_text(
            f"management_address=http://127.0.0.1:{self.management}\n"
            f"grpc_management_port={self.grpc_management}\n"
            "disable_token_authorization=true\n"
            "load_models=mnist=iris.pkl\n" + "".join(f"{line}\n" for line in lines)
        )
        args = testing.serve_args(store, work / "cache", workers=1, memory_budget="2GiB")
        environ = {**os.environ, "TS_CONFIG_FILE": str(properties)}
        serve.enter_context(testing.RunningServer(args, work, env=environ, cwd=work))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.management}", timeout=60)


@pytest.fixture(scope="module")
def default_mode(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Started:
    return Started(serve, tmp_path_factory.mktemp("ts-model-api-off"), store)


@pytest.fixture(scope="module")
def explicit_mode(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Started:
    work = tmp_path_factory.mktemp("ts-model-api-on")
    return Started(serve, work, store, "enable_model_api=true")


@pytest.fixture
def refusing(default_mode: Started) -> Iterator[httpx.Client]:
    with default_mode.client() as http:
        yield http


@pytest.fixture
def allowing(explicit_mode: Started) -> Iterator[httpx.Client]:
    with explicit_mode.client() as http:
        yield http


def test_register_model_failing(refusing: httpx.Client) -> None:
    """`POST /models?...&synchronous=true` is 405 as TorchServe answers it; nothing registers."""
    assert refusing.get("/models/mnist").status_code == 200
    refused = refusing.post("/models", params={**REGISTER, "synchronous": "true"})
    assert refused.status_code == 405, refused.text
    assert REFUSED.items() <= refused.json().items()
    assert "enable_model_api=true" in refused.json()["message"]
    assert refusing.get("/models/resnet-18").status_code == 404


def test_delete_model_failing(refusing: httpx.Client) -> None:
    """`DELETE /models/mnist` is 405, and the model loaded at start stays."""
    refused = refusing.delete("/models/mnist")
    assert refused.status_code == 405, refused.text
    assert REFUSED.items() <= refused.json().items()
    assert refusing.get("/models/mnist").status_code == 200


def test_grpc_register_model_failing(default_mode: Started) -> None:
    """TorchServe's gRPC answer: PERMISSION_DENIED, "Model API disabled"."""
    register = message("org.pytorch.serve.grpc.management.RegisterModelRequest")(
        url="iris.pkl", model_name="resnet-18", initial_workers=1, synchronous=True
    )
    with grpc.insecure_channel(f"127.0.0.1:{default_mode.grpc_management}") as channel:
        management = Stub(channel, TS_MANAGEMENT_SERVICE)
        with pytest.raises(grpc.RpcError, match="Model API disabled") as refused:
            management.RegisterModel(register, timeout=60)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_describe_model_says_loaded_at_startup(allowing: httpx.Client) -> None:
    """`loadedAtStartup` is true for the model `load_models` named until it is unregistered,
    false for one registered through the API, as TorchServe's describe-model answers."""
    assert allowing.get("/models/mnist").json()[0]["loadedAtStartup"] is True
    assert allowing.delete("/models/mnist").status_code == 200
    for name in ("mnist", "registered-later"):
        params = {**REGISTER, "model_name": name, "synchronous": "true"}
        registered = allowing.post("/models", params=params)
        assert registered.status_code == 200, registered.text
        assert allowing.get(f"/models/{name}").json()[0]["loadedAtStartup"] is False


def test_register_model(allowing: httpx.Client) -> None:
    """With `enable_model_api=true` the same registration succeeds."""
    registered = allowing.post("/models", params={**REGISTER, "synchronous": "true"})
    assert registered.status_code == 200, registered.text
    assert allowing.get("/models/resnet-18").status_code == 200


def test_delete_model(allowing: httpx.Client) -> None:
    assert allowing.get("/models/mnist").status_code == 200
    assert allowing.delete("/models/mnist").status_code == 200
