"""gRPC through the shipped nginx config (modelhost-grpc.conf): three real instances, each model to
the one instance its ring names, by the metadata KServe ModelMesh's clients send, or the header
tritonclient.grpc sends when told to (`headers=`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
import tritonclient.grpc.aio as triton_aio
from fleet_tools import (
    IRIS_ROW,
    RunningNginx,
    brute_force_server,
    instance,
    iris_store,
    require_nginx,
    running,
)

from modelhost import testing
from modelhost.rpc.messages import message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

INFERENCE = "org.pytorch.serve.grpc.inference."
# One fleet serves the module: each test asks for models of its own, so what one test loads
# on an instance is never what another counts there.
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(12)]
HEADERS_MODELS = [f"headers/t{i:03d}.joblib" for i in range(12)]
AIO_MODELS = [f"aio/t{i:03d}.joblib" for i in range(12)]
UNNAMED = "unnamed/t000.joblib"
EVERYWHERE = "everywhere/t000.joblib"
ROWS = json.dumps(testing.iris_rows(2)).encode()


class GrpcNginx(RunningNginx):
    """The HTTP router of RunningNginx, with modelhost-grpc.conf beside it on a port of its own."""

    def __init__(self, work: Path, servers: list[str], grpc_servers: list[str]) -> None:
        super().__init__(work, servers)
        self.grpc_port = testing.free_port()
        self.place(
            "modelhost-grpc.conf",
            "listen 8001 http2;",
            self.grpc_port,
            grpc_servers,
            "modelhost-grpc-servers.conf",
        )
        main = (work / "nginx.conf").read_text()
        (work / "nginx.conf").write_text(
            main.replace(
                "include modelhost.conf;",
                "include modelhost.conf;\n    include modelhost-grpc.conf;",
            )
        )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = [*MODELS, *HEADERS_MODELS, *AIO_MODELS, UNNAMED, EVERYWHERE]
    return iris_store(tmp_path_factory.mktemp("grpc-fleet-store"), models)


@pytest.fixture(scope="module")
def fleet(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[str], GrpcNginx]]:
    require_nginx()
    work = tmp_path_factory.mktemp("grpc-fleet")
    ports = [testing.free_port() for _ in range(3)]
    servers = [instance(store, work, i, grpc_port=port) for i, port in enumerate(ports)]
    with running(servers):
        grpc_lines = [f"127.0.0.1:{port}" for port in ports]
        http_lines = [f"127.0.0.1:{s.port}" for s in servers]
        with GrpcNginx(work / "nginx", http_lines, grpc_lines) as router:
            yield grpc_lines, router


def predict(inference: Any, model: str, metadata: tuple[tuple[str, str], ...]) -> str:
    """A TorchServe Predictions call through the router; the instance that answered it."""
    request = message(INFERENCE + "PredictionsRequest")(model_name=model, input={"data": ROWS})
    response, call = inference.Predictions.with_call(request, metadata=metadata, timeout=30)
    assert json.loads(response.prediction) == {"predictions": [0, 0]}
    return str(dict(call.trailing_metadata())["x-modelhost-instance"])


@pytest.mark.parametrize("header", ["mm-vmodel-id", "mm-model-id", "x-model-name"])
def test_each_model_goes_to_the_instance_its_ring_names(
    fleet: tuple[list[str], GrpcNginx], header: str
) -> None:
    """Whichever metadata names the model, its calls reach the one instance that the
    consistent hash of modelhost-grpc.conf places it on."""
    lines, router = fleet
    with grpc.insecure_channel(f"127.0.0.1:{router.grpc_port}") as channel:
        inference: Any = Stub(channel, INFERENCE + "InferenceAPIsService")
        served = {
            model: {predict(inference, model, ((header, model),)) for _ in range(3)}
            for model in MODELS
        }
    assert served == ring_instances(lines)
    assert len(set().union(*served.values())) >= 2  # the models are spread out


def test_a_call_naming_no_model_is_still_served(fleet: tuple[list[str], GrpcNginx]) -> None:
    _, router = fleet
    with grpc.insecure_channel(f"127.0.0.1:{router.grpc_port}") as channel:
        inference: Any = Stub(channel, INFERENCE + "InferenceAPIsService")
        assert predict(inference, UNNAMED, ()).startswith("fleet-")


def ring_instances(lines: list[str], models: list[str] = MODELS) -> dict[str, set[str]]:
    """Each model's instance, as the ring of modelhost-grpc.conf names it."""
    return {m: {f"fleet-{lines.index(brute_force_server(lines, m))}"} for m in models}


def holders(lines: list[str], model: str) -> set[str]:
    """The instances that have `model` loaded, each asked directly."""
    held = set()
    for index, line in enumerate(lines):
        with triton.InferenceServerClient(line) as client:
            if client.is_model_ready(model):
                held.add(f"fleet-{index}")
    return held


def iris_inputs() -> list[triton.InferInput]:
    tensor = triton.InferInput("input-0", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.asarray(IRIS_ROW, dtype=np.float32))
    return [tensor]


def test_tritonclient_names_the_model_in_headers(fleet: tuple[list[str], GrpcNginx]) -> None:
    """OIP's ModelInfer names its model only inside the message: tritonclient.grpc's
    `headers={"x-model-name": model}` gives nginx the name, and each model one instance."""
    lines, router = fleet
    with triton.InferenceServerClient(f"127.0.0.1:{router.grpc_port}") as client:
        for model in HEADERS_MODELS:
            for _ in range(3):
                result = client.infer(model, iris_inputs(), headers={"x-model-name": model})
                assert result.as_numpy("predict").tolist() == [0]
    held = {model: holders(lines, model) for model in HEADERS_MODELS}
    assert held == ring_instances(lines, HEADERS_MODELS)


def test_tritonclient_aio_names_the_model_in_headers(fleet: tuple[list[str], GrpcNginx]) -> None:
    lines, router = fleet

    async def infer_each() -> None:
        client = triton_aio.InferenceServerClient(f"127.0.0.1:{router.grpc_port}")
        try:
            for model in AIO_MODELS:
                await client.infer(model, iris_inputs(), headers={"x-model-name": model})
        finally:
            await client.close()

    asyncio.run(infer_each())
    held = {model: holders(lines, model) for model in AIO_MODELS}
    assert held == ring_instances(lines, AIO_MODELS)


def test_tritonclient_without_headers_loads_the_model_everywhere(
    fleet: tuple[list[str], GrpcNginx],
) -> None:
    """tritonclient's default sends no name nginx can read: its calls go round-robin, each
    answered, and the model is loaded on every instance they reach."""
    lines, router = fleet
    with triton.InferenceServerClient(f"127.0.0.1:{router.grpc_port}") as client:
        for _ in lines:
            assert client.infer(EVERYWHERE, iris_inputs()).as_numpy("predict").tolist() == [0]
    assert holders(lines, EVERYWHERE) == {f"fleet-{index}" for index in range(len(lines))}
