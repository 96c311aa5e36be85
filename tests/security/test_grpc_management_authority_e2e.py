"""gRPC management through a proxy on the same machine: every caller arrives from loopback, so
loopback is trusted only when `:authority` names this machine, as HTTP's Host must. On each front
of the inference port: the guard tells both who called."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import grpc
import pytest
from helpers.serving import Servers
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelhost import testing
from modelhost.rpc import callers
from modelhost.rpc.fronts import FRONTS

pytestmark = pytest.mark.e2e

TOKEN = "s3cret"
MODEL = "iris.pkl"


def pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def relay(port: int) -> Iterator[int]:
    """A TCP relay on loopback to `port`, as nginx's grpc_pass is; its own port."""
    listener = socket.create_server(("127.0.0.1", 0))
    opened: list[socket.socket] = [listener]

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", port))
                opened.extend((client, upstream))
                threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        for sock in opened:
            sock.close()


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    """Each front of the inference port, behind the same guard."""
    return str(request.param)


@pytest.fixture(scope="module")
def grpc_port(front: str) -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, serve: Servers, grpc_port: int, front: str
) -> testing.RunningServer:
    store = tmp_path_factory.mktemp("store")
    testing.iris_logreg(store / MODEL)
    return serve(store, workers=1, grpc_port=grpc_port, management_token=TOKEN, grpc_front=front)


def unload(port: int, authority: str, metadata: tuple[tuple[str, str], ...] = ()) -> None:
    """OIP's RepositoryModelUnload through the relay, naming `authority`."""
    options = [("grpc.default_authority", authority)]
    with relay(port) as relayed, grpc.insecure_channel(f"127.0.0.1:{relayed}", options) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.RepositoryModelUnloadRequest(model_name=MODEL)
        stub.RepositoryModelUnload(request, metadata=metadata, timeout=30)


def test_a_public_authority_from_loopback_needs_the_token(
    server: testing.RunningServer, grpc_port: int
) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        unload(grpc_port, "models.example.com")
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    unload(grpc_port, "models.example.com", (("authorization", f"Bearer {TOKEN}"),))


@pytest.mark.parametrize("authority", ["localhost", "127.0.0.1", "api.localhost"])
def test_this_machine_from_loopback_needs_no_token(
    server: testing.RunningServer, grpc_port: int, authority: str
) -> None:
    unload(grpc_port, f"{authority}:{grpc_port}")


@pytest.mark.parametrize("claim", ["127.0.0.1", "::1"])
def test_a_caller_naming_itself_in_the_guards_header_gains_nothing(
    server: testing.RunningServer, grpc_port: int, claim: str
) -> None:
    """A proxied caller that sends the header the guard names callers in, claiming loopback
    and no foreign authority, is not let in without the token."""
    with pytest.raises(grpc.RpcError) as refused:
        unload(grpc_port, "models.example.com", ((callers.HEADER, claim),))
    assert refused.value.code() != grpc.StatusCode.OK
