"""`--tenant-models name:N` keeps a tenant's reads to what it may invoke: another tenant's model
is 403 whether or not it exists, and what spans every tenant's models (listings, statistics,
metrics, events) is the operator's, over REST and gRPC. A caller from elsewhere is one whose
Host (gRPC's :authority) names another machine, as through a proxy."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing

pytestmark = pytest.mark.e2e

OWN, OTHERS, SHARED = "tenants/t7/iris.pkl", "tenants/t12/iris.pkl", "shared/iris.pkl"
NOBODYS = "tenants/t12/absent.pkl"  # another tenant's name the store lacks
T7, T12, OPERATOR = "tok-t7-8c1e", "tok-t12-4b0d", "op-51f0"
ELSEWHERE = "models.example.com"
MODEL_READS = [
    "/models/{}",
    "/v2/models/{}",
    "/v2/models/{}/ready",
    "/v2/models/{}/config",
    "/v2/models/{}/stats",
    "/v1/models/{}",
]
READS_OF_ALL = [
    ("GET", "/models"),
    ("GET", "/stats"),
    ("GET", "/metrics"),
    ("GET", "/sizing"),
    ("GET", "/tenants"),
    ("GET", "/tenants/tenants/t12"),
    ("GET", "/events"),
    ("GET", "/v1/models"),
    ("GET", "/v2/models/stats"),
    ("POST", "/v2/repository/index"),
]


@dataclass(frozen=True)
class Ports:
    grpc: int
    management: int
    grpc_management: int


@pytest.fixture(scope="module")
def server(
    serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> tuple[testing.RunningServer, Ports]:
    folder = tmp_path_factory.mktemp("tenant-reads")
    store = folder / "store"
    for name in (OWN, OTHERS, SHARED):
        testing.iris_logreg(store / name)
    tokens = folder / "tokens.toml"
    tokens.write_text(f'[tokens]\n"{T7}" = "tenants/t7"\n"{T12}" = "tenants/t12"\n')
    ports = Ports(testing.free_port(), testing.free_port(), testing.free_port())
    running = serve(
        store,
        management_port=ports.management,
        grpc_management_port=ports.grpc_management,
        workers=1,
        tenant_from="token",
        tenant_tokens_file=tokens,
        tenant_models="name:2",
        management_token=OPERATOR,
        grpc_port=ports.grpc,
        load_models=f"{OWN},{OTHERS},{SHARED}",
    )
    for token, model in ((T7, OWN), (T12, OTHERS)):  # rows in the tenants' table
        counted = httpx.post(
            f"{running.url}/models/{model}/invoke",
            json=testing.iris_rows(1),
            headers={"authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert counted.status_code == 200, counted.text
    return running, ports


def read(
    server: testing.RunningServer, path: str, token: str = "", method: str = "GET"
) -> httpx.Response:
    """`path` read from elsewhere with `token`, if any."""
    headers = {"host": ELSEWHERE} | ({"authorization": f"Bearer {token}"} if token else {})
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30)


@pytest.mark.parametrize("path", MODEL_READS)
def test_a_tenant_reads_its_own_models_and_the_shared_ones(
    server: tuple[testing.RunningServer, Ports], path: str
) -> None:
    for model in (OWN, SHARED):
        answer = read(server[0], path.format(model), T7)
        assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("path", MODEL_READS)
def test_another_tenant_s_model_is_403_whether_or_not_it_exists(
    server: tuple[testing.RunningServer, Ports], path: str
) -> None:
    for model in (OTHERS, NOBODYS):
        answer = read(server[0], path.format(model), T7)
        assert answer.status_code == 403, answer.text
        assert "--tenant-models" in answer.text and "may not invoke" in answer.text


def test_a_model_read_without_a_tenant_token_is_401(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    answer = read(server[0], f"/v2/models/{OWN}")
    assert answer.status_code == 401, answer.text
    assert "Authorization: Bearer" in answer.json()["error"]


@pytest.mark.parametrize(("method", "path"), READS_OF_ALL)
def test_what_spans_every_tenant_is_403_to_a_tenant(
    server: tuple[testing.RunningServer, Ports], method: str, path: str
) -> None:
    answer = read(server[0], path, T7, method)
    assert answer.status_code == 403, answer.text
    assert "--tenant-models" in answer.text and "management token" in answer.text


@pytest.mark.parametrize(("method", "path"), [r for r in READS_OF_ALL if r[1] != "/events"])
def test_the_operator_reads_everything_with_the_token_or_from_this_machine(
    server: tuple[testing.RunningServer, Ports], method: str, path: str
) -> None:
    running = server[0]
    assert read(running, path, OPERATOR, method).status_code == 200
    assert httpx.request(method, f"{running.url}{path}", timeout=30).status_code == 200


def test_torchserve_s_management_reads_are_the_operator_s(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    management = f"http://127.0.0.1:{server[1].management}"
    for path in ("/models", f"/models/{OWN}"):
        headers = {"host": ELSEWHERE, "authorization": f"Bearer {T7}"}
        answer = httpx.get(f"{management}{path}", headers=headers, timeout=30)
        assert answer.status_code == 403, answer.text
        assert httpx.get(f"{management}{path}", timeout=30).status_code == 200
    port = server[1].grpc_management
    options = [("grpc.default_authority", f"{ELSEWHERE}:{port}")]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options) as channel:
        listed = channel.unary_unary(
            "/org.pytorch.serve.grpc.management.ManagementAPIsService/ListModels"
        )
        with pytest.raises(grpc.RpcError) as refused:
            listed(b"", metadata=(("authorization", f"Bearer {T7}"),), timeout=30)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_tenant_reads_its_own_figures_in_tenants(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    answer = read(server[0], "/tenants/tenants/t7", T7)
    assert answer.status_code == 200, answer.text
    assert answer.json()["tenant"] == "tenants/t7" and answer.json()["requests"] >= 1


def test_a_tenant_follows_its_own_model_s_events_only(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    running = server[0]
    headers = {"host": ELSEWHERE, "authorization": f"Bearer {T7}"}
    with httpx.stream(
        "GET", f"{running.url}/events", params={"model": OWN}, headers=headers, timeout=30
    ) as own:
        assert own.status_code == 200
    others = httpx.get(
        f"{running.url}/events", params={"model": OTHERS}, headers=headers, timeout=30
    )
    assert others.status_code == 403, others.text


def test_a_tenant_holds_its_share_of_the_event_streams_and_no_more(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    """Else one tenant's streams of its own model would take every stream the server allows
    (--max-event-streams, 64) from the operator and the other tenants: a tenant holds at most a
    sixteenth of them (4)."""
    running = server[0]

    def follow(token: str, model: str, host: str = ELSEWHERE) -> httpx.Response:
        headers = {"host": host} | ({"authorization": f"Bearer {token}"} if token else {})
        request = httpx.Request("GET", f"{running.url}/events", params={"model": model})
        request.headers.update(headers)
        return streams.enter_context(contextlib.closing(client.send(request, stream=True)))

    with httpx.Client(timeout=30) as client, contextlib.ExitStack() as streams:
        assert [follow(T7, OWN).status_code for _ in range(4)] == [200] * 4
        refused = follow(T7, OWN)
        assert refused.status_code == 503
        assert "tenants/t7 holds 4 event streams" in refused.read().decode()
        assert follow(T12, OTHERS).status_code == 200
        assert follow("", OWN, host=f"127.0.0.1:{running.port}").status_code == 200


def grpc_call(port: int, method: str, request: object, token: str) -> object:
    """An OIP method called from elsewhere with `token`."""
    options = [("grpc.default_authority", f"{ELSEWHERE}:{port}")]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        metadata = (("authorization", f"Bearer {token}"),)
        return getattr(stub, method)(request, metadata=metadata, timeout=30)


def test_over_grpc_a_tenant_reads_its_own_models_and_nothing_of_others(
    server: tuple[testing.RunningServer, Ports],
) -> None:
    port = server[1].grpc
    own = grpc_call(port, "ModelMetadata", service_pb2.ModelMetadataRequest(name=OWN), T7)
    assert own.name == OWN  # type: ignore[attr-defined]
    refused = [
        ("ModelMetadata", service_pb2.ModelMetadataRequest(name=NOBODYS)),
        ("ModelReady", service_pb2.ModelReadyRequest(name=OTHERS)),
        ("ModelConfig", service_pb2.ModelConfigRequest(name=OTHERS)),
        ("ModelStatistics", service_pb2.ModelStatisticsRequest(name=OTHERS)),
        ("ModelStatistics", service_pb2.ModelStatisticsRequest()),
        ("RepositoryIndex", service_pb2.RepositoryIndexRequest()),
    ]
    for method, request in refused:
        with pytest.raises(grpc.RpcError) as error:
            grpc_call(port, method, request, T7)
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED, method
    every = grpc_call(port, "RepositoryIndex", service_pb2.RepositoryIndexRequest(), OPERATOR)
    assert {model.name for model in every.models} >= {OWN, OTHERS}  # type: ignore[attr-defined]


def test_with_tenants_not_kept_to_their_models_any_caller_reads_everything(
    serve: Servers, tmp_path: Path
) -> None:
    testing.iris_logreg(tmp_path / "store" / OTHERS)
    running = serve(tmp_path / "store", workers=1, tenant_from="header")
    for path in ("/models", f"/v2/models/{OTHERS}", "/metrics"):
        assert read(running, path).status_code == 200, path
