"""gRPC with the HTTP servers' certificate (--ssl-certfile, --ssl-keyfile), as TorchServe's
enable_grpc_ssl serves it, and the standard health service Kubernetes' gRPC probes call
(grpc.health.v1.Health/Check, as `grpc_health_probe` does), and the drain at SIGTERM. TLS is
the guard's, so both fronts of the inference port serve it."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.serving import until_answering
from helpers.tls import self_signed

from modelhost import testing
from modelhost.rpc.fronts import FRONTS
from modelhost.rpc.messages import OIP_SERVICE, TS_MANAGEMENT_SERVICE, message
from modelhost.rpc.stubs import Stub

pytestmark = pytest.mark.e2e

MODEL = "iris.pkl"


class Secure:
    def __init__(self, certificate: Path, inference: int, management: int) -> None:
        self.certificate = certificate
        self.inference, self.management = inference, management

    def channel(self, port: int) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(self.certificate.read_bytes())
        return grpc.secure_channel(f"localhost:{port}", credentials)


@pytest.fixture(scope="module", params=FRONTS)
def secure(
    store: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Secure]:
    work = tmp_path_factory.mktemp("grpc-tls")
    cert, key = self_signed(work)
    ports = Secure(cert, testing.free_port(), testing.free_port())
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        memory_budget="4GiB",
        ssl_certfile=cert,
        ssl_keyfile=key,
        grpc_port=ports.inference,
        grpc_management_port=ports.management,
        grpc_front=request.param,
    )
    trusted = ssl.create_default_context(cafile=str(cert))
    with testing.RunningServer(args, work, tls=trusted):
        yield ports


def test_tritonclient_infers_over_tls(secure: Secure) -> None:
    client = triton.InferenceServerClient(
        f"localhost:{secure.inference}",
        ssl=True,
        root_certificates=str(secure.certificate),
    )
    assert client.is_server_live()
    rows = np.asarray(testing.iris_rows(2), dtype=np.float32)
    tensor = triton.InferInput("input-0", [2, 4], "FP32")
    tensor.set_data_from_numpy(rows)
    assert client.infer(MODEL, [tensor]).as_numpy("predict").tolist() == [0, 0]
    client.close()


def test_the_management_port_speaks_tls_too(secure: Secure) -> None:
    with secure.channel(secure.management) as channel:
        management: Any = Stub(channel, TS_MANAGEMENT_SERVICE)
        request = message("org.pytorch.serve.grpc.management.ListModelsRequest")()
        assert '"models"' in management.ListModels(request).msg


def test_a_plaintext_client_is_not_served(secure: Secure) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{secure.inference}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    "service", ["", OIP_SERVICE, "org.pytorch.serve.grpc.inference.InferenceAPIsService"]
)
def test_health_check_is_serving(secure: Secure, service: str) -> None:
    with secure.channel(secure.inference) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_every_connection_is_served_whichever_copy_accepts_it(secure: Secure) -> None:
    """The inference port's servers share it (SO_REUSEPORT), and the kernel spreads connections
    over them: 32 connections of their own each get health checks and predictions."""
    credentials = grpc.ssl_channel_credentials(secure.certificate.read_bytes())
    own = [("grpc.use_local_subchannel_pool", 1)]  # else channels share one connection
    request = message("inference.ModelInferRequest")(model_name=MODEL)
    request.inputs.add(name="input-0", datatype="FP64", shape=[1, 4])
    request.inputs[0].contents.fp64_contents.extend(testing.iris_rows(1)[0])
    for _ in range(32):
        with grpc.secure_channel(f"localhost:{secure.inference}", credentials, own) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            oip: Any = Stub(channel, OIP_SERVICE)
            assert oip.ModelInfer(request, timeout=30).outputs[0].name == "predict"


def test_health_check_of_an_unknown_service_is_not_found(secure: Secure) -> None:
    with secure.channel(secure.inference) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.Check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=10)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_sigterm_lets_a_call_under_way_finish(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The gRPC server drains with the HTTP ones: a prediction running at SIGTERM is answered,
    and the server exits 0."""
    work = tmp_path_factory.mktemp("grpc-drain")
    port = testing.free_port()
    args = testing.serve_args(store, work / "cache", workers=1, grpc_port=port)
    server = testing.RunningServer(args, work).start()
    request = message("org.pytorch.serve.grpc.inference.PredictionsRequest")
    answers: list[bytes] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        inference: Any = Stub(channel, "org.pytorch.serve.grpc.inference.InferenceAPIsService")
        inference.Predictions(request(model_name="slow", input={"data": b'{"sleep": 0}'}))

        def slow_call() -> None:
            slow = request(model_name="slow", input={"data": b'{"sleep": 2}'})
            answers.append(inference.Predictions(slow, timeout=30).prediction)

        caller = threading.Thread(target=slow_call)
        caller.start()
        until_answering(server, 1)
        assert server.stop() == 0
        caller.join()
    assert [json.loads(answer) for answer in answers] == [{"slept": 2.0}]
