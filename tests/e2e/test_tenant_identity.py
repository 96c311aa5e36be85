"""Who the tenant is, on real servers: every protocol, over HTTP and gRPC, carries the tenant its
rule names into the access log; a bad tenant id is 400, an unknown token 401; with tenants off
the answers and the access log are what they were."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
from helpers.logs import logged
from helpers.serving import Servers
from tritonclient.utils import InferenceServerException

from modelhost import testing
from modelhost.rpc.messages import TS_INFERENCE_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

MODEL = "tenants/t003.joblib"
ROWS = testing.iris_rows(1)
OIP_BODY = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 4], "data": ROWS[0]}]}
TENANT_HEADER = "x-modelhost-tenant"
TOKENS = {"tok-acme-5f1c": "acme", "tok-umbrella-09ab": "umbrella"}
PREDICTIONS_REQUEST = "org.pytorch.serve.grpc.inference.PredictionsRequest"


class Served:
    """A server with its gRPC port and access log."""

    def __init__(self, server: testing.RunningServer, grpc_port: int, log: Path) -> None:
        self.server, self.grpc_port, self.log = server, grpc_port, log
        self.http = httpx.Client(base_url=server.url, timeout=30)

    def lines(self, keep: Callable[[dict[str, Any]], bool], n: int) -> list[dict[str, Any]]:
        """The access log's lines `keep` holds for, once there are `n` (it trails the answers)."""
        return logged(self.log, n, keep)

    def infer_grpc(self, metadata: dict[str, str]) -> Any:
        client = triton.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        try:
            tensor = triton.InferInput("input-0", [1, 4], "FP64")
            tensor.set_data_from_numpy(np.asarray(ROWS, dtype=np.float64))
            return client.infer(MODEL, [tensor], headers=metadata)
        finally:
            client.close()

    def predict_grpc_trailers(self, metadata: dict[str, str]) -> dict[str, str]:
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            request = message(PREDICTIONS_REQUEST)(
                model_name=MODEL, input={"data": json.dumps(ROWS).encode()}
            )
            _, call = Stub(channel, TS_INFERENCE_SERVICE).Predictions.with_call(
                request, metadata=tuple(metadata.items())
            )
            return dict(call.trailing_metadata())

    def predict_grpc(self, metadata: dict[str, str]) -> Any:
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            request = message(PREDICTIONS_REQUEST)(
                model_name=MODEL, input={"data": json.dumps(ROWS).encode()}
            )
            return Stub(channel, TS_INFERENCE_SERVICE).Predictions(
                request, metadata=tuple(metadata.items())
            )


def start(serve: Servers, store: Path, folder: Path, **settings: object) -> Iterator[Served]:
    grpc_port = testing.free_port()
    log = folder / "access.log"
    server = serve(store, workers=1, grpc_port=grpc_port, access_log=log, **settings)
    served = Served(server, grpc_port, log)
    yield served
    served.http.close()


@pytest.fixture(scope="module")
def by_header(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from start(serve, store, tmp_path_factory.mktemp("by-header"), tenant_from="header")


@pytest.fixture(scope="module")
def by_token(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("by-token")
    lines = [f'"{token}" = "{tenant}"' for token, tenant in TOKENS.items()]
    (folder / "tokens.toml").write_text("[tokens]\n" + "\n".join(lines) + "\n")
    tokens_file = folder / "tokens.toml"
    yield from start(serve, store, folder, tenant_from="token", tenant_tokens_file=tokens_file)


@pytest.fixture(scope="module")
def off(store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from start(serve, store, tmp_path_factory.mktemp("off"))


@pytest.fixture(scope="module")
def by_name(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from start(serve, store, tmp_path_factory.mktemp("by-name"), tenant_from="name:1")


def rest_calls(http: httpx.Client) -> dict[str, Callable[[dict[str, str]], httpx.Response]]:
    """One invocation per REST route, each sent with the given headers."""
    target = {"x-amzn-sagemaker-target-model": MODEL}
    return {
        "/invocations": lambda h: http.post("/invocations", json=ROWS, headers={**target, **h}),
        "/models/{model:path}/invoke": lambda h: http.post(
            f"/models/{MODEL}/invoke", json=ROWS, headers=h
        ),
        "/predictions/{model:path}": lambda h: http.post(
            f"/predictions/{MODEL}", json=ROWS, headers=h
        ),
        "/v2/models/{model:path}/infer": lambda h: http.post(
            f"/v2/models/{MODEL}/infer", json=OIP_BODY, headers=h
        ),
        "/v1/models/{model:path}:predict": lambda h: http.post(
            f"/v1/models/{MODEL}:predict", json={"instances": ROWS}, headers=h
        ),
    }


GRPC_ROUTES = {
    "infer": "/inference.GRPCInferenceService/ModelInfer",
    "predict": "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions",
}
CALLS = 5 + len(GRPC_ROUTES)  # rest_calls' and the gRPC routes'


def test_every_protocol_carries_the_tenant(by_header: Served) -> None:
    """Each route, sent a tenant of its own, logs that tenant beside its 200."""
    sent = {}
    for route, call in rest_calls(by_header.http).items():
        tenant = "t-" + route.strip("/").split("/")[0]
        response = call({TENANT_HEADER: tenant})
        assert response.status_code == 200, response.text
        assert response.headers[TENANT_HEADER] == tenant  # as the server counted it
        sent[route] = tenant
    by_header.infer_grpc({TENANT_HEADER: "grpc-oip"})
    assert by_header.predict_grpc_trailers({TENANT_HEADER: "grpc-torchserve"})[TENANT_HEADER] == (
        "grpc-torchserve"
    )
    sent |= {GRPC_ROUTES["infer"]: "grpc-oip", GRPC_ROUTES["predict"]: "grpc-torchserve"}
    lines = by_header.lines(lambda r: r.get("model") == MODEL and r["status"] == 200, len(sent))
    assert {line["route"]: line["tenant"] for line in lines} == sent


def test_a_header_sent_twice_names_one_tenant_on_every_protocol(by_header: Served) -> None:
    """A caller's header and a gateway's after it: every route counts the last, as gRPC does."""
    twice = [(TENANT_HEADER, "from-caller"), (TENANT_HEADER, "from-gateway")]
    http, target = by_header.http, [("x-amzn-sagemaker-target-model", MODEL)]
    answers = [
        http.post("/invocations", json=ROWS, headers=[*target, *twice]),
        http.post(f"/models/{MODEL}/invoke", json=ROWS, headers=twice),
        http.post(f"/predictions/{MODEL}", json=ROWS, headers=twice),
        http.post(f"/v2/models/{MODEL}/infer", json=OIP_BODY, headers=twice),
        http.post(f"/v1/models/{MODEL}:predict", json={"instances": ROWS}, headers=twice),
    ]
    assert [answer.headers[TENANT_HEADER] for answer in answers] == ["from-gateway"] * 5
    with grpc.insecure_channel(f"127.0.0.1:{by_header.grpc_port}") as channel:
        request = message(PREDICTIONS_REQUEST)(
            model_name=MODEL, input={"data": json.dumps(ROWS).encode()}
        )
        _, call = Stub(channel, TS_INFERENCE_SERVICE).Predictions.with_call(request, metadata=twice)
    assert dict(call.trailing_metadata())[TENANT_HEADER] == "from-gateway"


def test_a_request_without_the_header_is_the_default_tenant(by_header: Served) -> None:
    response = by_header.http.post(f"/models/{MODEL}/invoke", json=ROWS)
    assert response.status_code == 200
    assert response.headers[TENANT_HEADER] == "default"
    missing = by_header.http.post("/models/absent.joblib/invoke", json=ROWS)
    assert missing.status_code == 404
    assert missing.headers[TENANT_HEADER] == "default"
    lines = by_header.lines(lambda r: r.get("tenant") == "default", 1)
    assert lines[0]["model"] == MODEL


def test_a_bad_tenant_id_is_400_on_every_protocol(by_header: Served) -> None:
    for route, call in rest_calls(by_header.http).items():
        response = call({TENANT_HEADER: "no spaces please"})
        assert response.status_code == 400, route
        assert "a tenant id is 1 to 128 characters" in response.text
    with pytest.raises(InferenceServerException) as infer:
        by_header.infer_grpc({TENANT_HEADER: "no spaces please"})
    assert infer.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(grpc.RpcError) as predict:
        by_header.predict_grpc({TENANT_HEADER: "x" * 129})
    assert predict.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_names_leading_segments_are_the_tenant(by_name: Served) -> None:
    """Under name:1 tenants/t003.joblib belongs to tenants, and iris.pkl, with no folder, to the
    default tenant, whatever header is sent."""
    for model in (MODEL, "iris.pkl"):
        response = by_name.http.post(
            f"/models/{model}/invoke", json=ROWS, headers={TENANT_HEADER: "acme"}
        )
        assert response.status_code == 200, response.text
    lines = by_name.lines(lambda r: r.get("model") and r["status"] == 200, 2)
    assert {line["model"]: line["tenant"] for line in lines} == {
        MODEL: "tenants",
        "iris.pkl": "default",
    }


def test_a_known_token_names_its_tenant(by_token: Served) -> None:
    acme = {"authorization": "Bearer tok-acme-5f1c"}
    for call in rest_calls(by_token.http).values():
        assert call(acme).status_code == 200
    by_token.infer_grpc({"authorization": "Bearer tok-umbrella-09ab"})
    by_token.predict_grpc({"authorization": "Bearer tok-umbrella-09ab"})
    lines = by_token.lines(lambda r: r.get("model") == MODEL and r["status"] == 200, CALLS)
    assert {line["route"]: line["tenant"] for line in lines} == {
        **{route: "acme" for route in rest_calls(by_token.http)},
        **{route: "umbrella" for route in GRPC_ROUTES.values()},
    }


def test_an_unknown_or_missing_token_is_401(by_token: Served) -> None:
    for headers in ({}, {"authorization": "Bearer tok-nobody"}):
        for route, call in rest_calls(by_token.http).items():
            response = call(headers)
            assert response.status_code == 401, route
            assert "Authorization: Bearer <token>" in response.text
            assert response.headers.get("www-authenticate") == "Bearer", route  # RFC 9110
        with pytest.raises(InferenceServerException) as infer:
            by_token.infer_grpc(headers)
        assert infer.value.status() == "StatusCode.UNAUTHENTICATED"
        assert "Bearer <token>" in infer.value.message()
        with pytest.raises(grpc.RpcError) as predict:
            by_token.predict_grpc(headers)
        assert predict.value.code() == grpc.StatusCode.UNAUTHENTICATED
    refused = by_token.lines(lambda r: r["status"] == 401, 2 * CALLS)
    assert len(refused) == 2 * CALLS and all("tenant" not in line for line in refused)


def test_with_tenants_off_answers_and_log_lines_are_unchanged(
    off: Served, by_header: Served
) -> None:
    """The same requests answer the same body and header names as under a rule, less the
    tenant's, and the access log has no tenant field."""
    for route, call in rest_calls(off.http).items():
        answer = call({TENANT_HEADER: "acme"})
        under_rule = rest_calls(by_header.http)[route]({TENANT_HEADER: "acme"})
        assert answer.status_code == 200, answer.text
        assert answer.content == under_rule.content
        assert set(answer.headers) == set(under_rule.headers) - {TENANT_HEADER}
    off.infer_grpc({TENANT_HEADER: "acme"})
    off.predict_grpc({TENANT_HEADER: "acme"})
    lines = off.lines(lambda r: r.get("model") == MODEL, CALLS)
    assert len(lines) == CALLS and all("tenant" not in line for line in lines)
