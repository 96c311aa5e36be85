"""TorchServe's token authorization, end to end: a server started with TorchServe's
config.properties writes `key_file.json` in its working folder, and each API needs its own key
as `Authorization: Bearer`. Each test is named after the request of TorchServe's token docs
(docs/token_authorization_api.md) it mirrors."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.rpc.messages import (
    OIP_SERVICE,
    TS_INFERENCE_SERVICE,
    TS_MANAGEMENT_SERVICE,
    message,
)
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(1)
WRONG = {"Authorization": "Bearer abcd1234"}
TS = "org.pytorch.serve.grpc."


class Ports:
    """The ports a server's config.properties names: REST management, metrics and gRPC's."""

    def __init__(self) -> None:
        self.management = testing.free_port()
        self.metrics = testing.free_port()
        self.grpc_inference = testing.free_port()
        self.grpc_management = testing.free_port()


def ts_server(
    serve: Servers, work: Path, store: Path, ports: Ports, *lines: str, flags: Sequence[str] = ()
) -> testing.RunningServer:
    """A server started in `work` with TorchServe's config.properties there, plus `lines`."""
    properties = work / "config.properties"
    properties.write_text(
        "\n".join(
            [
                f"management_address=http://127.0.0.1:{ports.management}",
                f"metrics_address=http://127.0.0.1:{ports.metrics}",
                f"grpc_inference_port={ports.grpc_inference}",
                f"grpc_management_port={ports.grpc_management}",
                "enable_model_api=true",  # the tests register models, as TorchServe's do
                *lines,
            ]
        )
        + "\n"
    )
    args = testing.serve_args(store, work / "cache", workers=1, memory_budget="2GiB")
    environ = {**os.environ, "TS_CONFIG_FILE": str(properties)}
    server = testing.RunningServer([*args, *flags], work, env=environ, cwd=work)
    return serve.enter_context(server)


def key(work: Path, kind: str) -> dict[str, str]:
    """The header TorchServe's docs send: the key of `kind` (management, inference, API)."""
    keys = json.loads((work / "key_file.json").read_text())
    return {"Authorization": f"Bearer {keys[kind]['key']}"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-tokens-store")
    testing.iris_logreg(root / "iris.pkl")
    return root


@pytest.fixture(scope="module")
def ports() -> Ports:
    return Ports()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ts-tokens-work")


@pytest.fixture(scope="module")
def server(serve: Servers, work: Path, store: Path, ports: Ports) -> testing.RunningServer:
    return ts_server(serve, work, store, ports)


@pytest.fixture
def inference(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


@pytest.fixture
def management(server: testing.RunningServer, ports: Ports) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{ports.management}", timeout=60) as http:
        yield http


def test_key_file_holds_three_keys_for_the_owner_only(
    server: testing.RunningServer, work: Path
) -> None:
    """key_file.json in the working folder: management, inference and API keys, mode 0600."""
    keys = json.loads((work / "key_file.json").read_text())
    assert set(keys) == {"management", "inference", "API"}
    assert keys["management"]["expiration time"].endswith("Z")
    assert len({keys[kind]["key"] for kind in keys}) == 3
    assert stat.S_IMODE((work / "key_file.json").stat().st_mode) == 0o600


def test_management_api_with_token(management: httpx.Client, work: Path) -> None:
    """`curl localhost:8081/models/iris -H "Authorization: Bearer <management key>"`."""
    registered = management.post(
        "/models",
        params={"url": "iris.pkl", "model_name": "iris", "initial_workers": "1"},
        headers=key(work, "management"),
    )
    assert registered.status_code == 200, registered.text
    described = management.get("/models/iris", headers=key(work, "management"))
    assert described.status_code == 200, described.text


def test_management_api_with_incorrect_token(management: httpx.Client, work: Path) -> None:
    """A wrong key, none, or the inference key: refused with TorchServe's words."""
    for headers in (WRONG, {}, key(work, "inference")):
        refused = management.get("/models", headers=headers)
        assert refused.status_code == 401, refused.text
        assert "Token Authorization failed" in refused.json()["message"]


def test_inference_api_with_token(inference: httpx.Client, work: Path) -> None:
    """`curl 127.0.0.1:8080/predictions/iris.pkl -H "Authorization: Bearer <inference key>"`."""
    answered = inference.post("/predictions/iris.pkl", json=ROWS, headers=key(work, "inference"))
    assert answered.status_code == 200, answered.text


def test_inference_api_with_incorrect_token(inference: httpx.Client, work: Path) -> None:
    """A wrong key, none, or the management key: refused, on every inference route."""
    for headers in (WRONG, {}, key(work, "management")):
        for path in ("/predictions/iris.pkl", "/invocations", "/models/iris.pkl/invoke"):
            refused = inference.post(path, json=ROWS, headers=headers)
            assert refused.status_code == 401, f"{path}: {refused.text}"


def test_management_calls_on_the_inference_port_need_the_management_key(
    inference: httpx.Client, work: Path
) -> None:
    """SageMaker's POST /models on the main port is a management call, from loopback too."""
    body = {"model_name": "again", "url": "iris.pkl"}
    assert inference.post("/models", json=body, headers=key(work, "inference")).status_code == 401
    loaded = inference.post("/models", json=body, headers=key(work, "management"))
    assert loaded.status_code == 200, loaded.text


def test_token_inference_api(inference: httpx.Client, management: httpx.Client, work: Path) -> None:
    """`curl localhost:8081/token?type=inference -H "Authorization: Bearer <API key>"`."""
    old = key(work, "inference")
    assert inference.post("/predictions/iris.pkl", json=ROWS, headers=old).status_code == 200
    renewed = management.get("/token", params={"type": "inference"}, headers=key(work, "API"))
    assert renewed.status_code == 200, renewed.text
    assert key(work, "inference") != old
    assert inference.post("/predictions/iris.pkl", json=ROWS, headers=old).status_code == 401
    new = key(work, "inference")
    assert inference.post("/predictions/iris.pkl", json=ROWS, headers=new).status_code == 200


def test_token_management_api(management: httpx.Client, work: Path) -> None:
    """`curl localhost:8081/token?type=management -H "Authorization: Bearer <API key>"`."""
    old = key(work, "management")
    renewed = management.get("/token", params={"type": "management"}, headers=key(work, "API"))
    assert renewed.status_code == 200, renewed.text
    assert key(work, "management") != old
    assert management.get("/models", headers=old).status_code == 401
    assert management.get("/models", headers=key(work, "management")).status_code == 200


def test_token_api_refuses_other_keys_and_types(management: httpx.Client, work: Path) -> None:
    """Only the API key renews keys, and only the management and inference ones."""
    params = {"type": "management"}
    assert (
        management.get("/token", params=params, headers=key(work, "management")).status_code == 401
    )
    wrong_type = management.get("/token", params={"type": "API"}, headers=key(work, "API"))
    assert wrong_type.status_code == 400, wrong_type.text


def test_refusals_are_counted_as_any_request(
    inference: httpx.Client, ports: Ports, server: testing.RunningServer
) -> None:
    """A 401 from the guard shows in the metrics, as every other answer does."""
    assert inference.post("/predictions/iris.pkl", json=ROWS, headers=WRONG).status_code == 401
    text = httpx.get(f"http://127.0.0.1:{ports.metrics}/metrics", timeout=30).text
    assert 'modelhost_rejections_total{reason="Unauthorized"}' in text, text


def test_ping_and_metrics_port_need_no_key(
    inference: httpx.Client, ports: Ports, server: testing.RunningServer
) -> None:
    """Health probes and the metrics port, which TorchServe leaves open, answer without one."""
    assert inference.get("/ping").status_code == 200
    assert httpx.get(f"http://127.0.0.1:{ports.metrics}/metrics", timeout=30).status_code == 200


def grpc_key(work: Path, kind: str) -> tuple[tuple[str, str], ...]:
    """TorchServe's gRPC test's metadata: its protocol, and the key as authorization."""
    return (("protocol", "gRPC"), ("authorization", key(work, kind)["Authorization"]))


def test_grpc_api_with_token_auth(server: testing.RunningServer, ports: Ports, work: Path) -> None:
    """TorchServe's gRPC test: register, infer and unregister, first with a wrong key."""
    wrong = (("protocol", "gRPC"), ("authorization", WRONG["Authorization"]))
    register = message(TS + "management.RegisterModelRequest")(
        url="iris.pkl", model_name="grpc-iris", initial_workers=1, synchronous=True
    )
    predict = message(TS + "inference.PredictionsRequest")(
        model_name="grpc-iris", input={"data": json.dumps(ROWS).encode()}
    )
    unregister = message(TS + "management.UnregisterModelRequest")(model_name="grpc-iris")
    with (
        grpc.insecure_channel(f"127.0.0.1:{ports.grpc_inference}") as inference_channel,
        grpc.insecure_channel(f"127.0.0.1:{ports.grpc_management}") as management_channel,
    ):
        inference = Stub(inference_channel, TS_INFERENCE_SERVICE)
        management = Stub(management_channel, TS_MANAGEMENT_SERVICE)
        for call, request, kind in (
            (management.RegisterModel, register, "management"),
            (inference.Predictions, predict, "inference"),
            (management.UnregisterModel, unregister, "management"),
        ):
            with pytest.raises(grpc.RpcError, match="Token Authorization failed") as refused:
                call(request, metadata=wrong, timeout=60)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            call(request, metadata=grpc_key(work, kind), timeout=60)


def test_grpc_repository_load_needs_the_management_key(
    server: testing.RunningServer, ports: Ports, work: Path
) -> None:
    """OIP's repository load on the gRPC inference port changes what is served, as over REST."""
    load = message("inference.RepositoryModelLoadRequest")(model_name="iris.pkl")
    with grpc.insecure_channel(f"127.0.0.1:{ports.grpc_inference}") as channel:
        oip = Stub(channel, OIP_SERVICE)
        with pytest.raises(grpc.RpcError) as refused:
            oip.RepositoryModelLoad(load, metadata=grpc_key(work, "inference"), timeout=60)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        oip.RepositoryModelLoad(load, metadata=grpc_key(work, "management"), timeout=60)


def test_grpc_ping_needs_no_key(server: testing.RunningServer, ports: Ports) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{ports.grpc_inference}") as channel:
        pong = Stub(channel, TS_INFERENCE_SERVICE).Ping(message("google.protobuf.Empty")())
    assert json.loads(pong.health) == {"status": "Healthy"}


def test_key_file_removed_at_shutdown(serve: Servers, store: Path, tmp_path: Path) -> None:
    """The keys live as long as the server: stopping it deletes key_file.json."""
    server = ts_server(serve, tmp_path, store, Ports())
    assert (tmp_path / "key_file.json").exists()
    assert server.stop() == 0
    assert not (tmp_path / "key_file.json").exists()


def test_disable_token_authorization(serve: Servers, store: Path, tmp_path: Path) -> None:
    """`disable_token_authorization=true` in config.properties: no key file, no keys needed."""
    ports = Ports()
    server = ts_server(serve, tmp_path, store, ports, "disable_token_authorization=true")
    assert not (tmp_path / "key_file.json").exists()
    assert httpx.get(f"http://127.0.0.1:{ports.management}/models", timeout=30).status_code == 200
    answered = httpx.post(f"{server.url}/predictions/iris.pkl", json=ROWS, timeout=60)
    assert answered.status_code == 200, answered.text


def test_priority(serve: Servers, store: Path, tmp_path: Path) -> None:
    """The file says false, the command line turns it off: the command line wins."""
    ports = Ports()
    ts_server(
        serve,
        tmp_path,
        store,
        ports,
        "disable_token_authorization=false",
        flags=["--no-token-auth"],
    )
    assert httpx.get(f"http://127.0.0.1:{ports.management}/models", timeout=30).status_code == 200


def test_priority_env(
    serve: Servers, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TS_DISABLE_TOKEN_AUTHORIZATION=true under enable_envvars_config wins over the file."""
    monkeypatch.setenv("TS_DISABLE_TOKEN_AUTHORIZATION", "true")
    ports = Ports()
    lines = ("enable_envvars_config=true", "disable_token_authorization=false")
    ts_server(serve, tmp_path, store, ports, *lines)
    assert httpx.get(f"http://127.0.0.1:{ports.management}/models", timeout=30).status_code == 200


def test_without_config_properties_no_keys(serve: Servers, store: Path, tmp_path: Path) -> None:
    """modelhost's own default is unchanged: no TorchServe config, no key file, no keys."""
    server = serve(store, workers=1, memory_budget="2GiB")
    answered = httpx.post(f"{server.url}/predictions/iris.pkl", json=ROWS, timeout=60)
    assert answered.status_code == 200, answered.text
