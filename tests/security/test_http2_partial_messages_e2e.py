"""Streams whose first message is only partly sent, on the gRPC port: each holds a call in grpc
as a stream without any message does, so a flood of them must stay within the frontend's
allowance too, on each front (h2corn ends the streams where the guard ends the connection).
That one is timed as a missing message is test_http2_floods_e2e.py's."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.serving import Servers
from hyperframe.frame import Frame, GoAwayFrame
from raw_http2 import (
    ENHANCE_YOUR_CALM,
    PING_TIMEOUT_S,
    RESOURCE_EXHAUSTED,
    RawConnection,
    partial_message,
    repeated,
    statuses_of,
    watched,
)

from modelhost import testing
from modelhost.rpc.fronts import FRONTS, H2CORN

pytestmark = pytest.mark.e2e

MAX_STREAMS = 128  # nginx's default, and the server's
CONNECTIONS = 30  # each at MAX_STREAMS: past a 64 MiB allowance's worth of calls
HOLD_S = 3.0  # the flood held open while the frontend is watched
FLOODS = 2  # one after the other: grpc lets the first's calls go a while after their end


@pytest.fixture(scope="module", params=FRONTS)
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, serve: Servers
) -> tuple[testing.RunningServer, int]:
    """A server at the default stream and connection caps and allowance on one gRPC front, and
    its gRPC port."""
    store = tmp_path_factory.mktemp("store")
    testing.iris_logreg(store / "iris.pkl")
    port = testing.free_port()
    server = serve(
        store, workers=1, grpc_port=port, grpc_connections_per_s=1000, grpc_front=request.param
    )
    return server, port


@contextlib.contextmanager
def partial_streams(port: int) -> Iterator[list[list[Frame]]]:
    """CONNECTIONS connections, each holding MAX_STREAMS partly sent messages; the frames that
    each got."""
    connections = [RawConnection(port) for _ in range(CONNECTIONS)]
    received: list[list[Frame]] = [[] for _ in connections]
    try:
        for connection in connections:
            streams = range(1, 2 * MAX_STREAMS, 2)
            connection.send(b"".join(partial_message(connection, n) for n in streams))
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline:
            for index, connection in enumerate(connections):
                received[index] += connection.frames()
            time.sleep(0.1)
        yield received
    finally:
        for connection in connections:
            connection.sock.close()


@contextlib.contextmanager
def health_calls(port: int) -> Iterator[list[str]]:
    """gRPC health checks back to back on a connection made first; each failure's code."""
    failures: list[str] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        check(health_pb2.HealthCheckRequest(), timeout=PING_TIMEOUT_S)

        def call() -> None:
            try:
                check(health_pb2.HealthCheckRequest(), timeout=PING_TIMEOUT_S)
            except grpc.RpcError as error:
                failures.append(str(error.code()))

        with repeated(call):
            yield failures


def test_partly_sent_messages_stay_within_the_allowance(
    front: tuple[testing.RunningServer, int], request: pytest.FixtureRequest
) -> None:
    """Thousands of streams whose message never completes, twice: the connections holding the
    most of them are told GOAWAY (on h2corn, their streams end with RESOURCE_EXHAUSTED), the
    frontend stays within its allowance, /ping answers, and so does each call of a client that
    sends its messages. h2corn is flooded once: it holds each stream it takes before the app
    can shed it (docs/security.md)."""
    server, port = front
    h2corn = request.node.callspec.params["front"] == H2CORN
    received: list[list[Frame]] = []
    with watched(server), health_calls(port) as failed:
        for _ in range(1 if h2corn else FLOODS):
            with partial_streams(port) as frames:
                received += frames
    assert not failed, f"{len(failed)} health calls failed: {set(failed)}"
    if h2corn:
        statuses = {status for frames in received for status in statuses_of(frames).values()}
        assert RESOURCE_EXHAUSTED in statuses, "no stream was shed"
        return
    goaways = [f for frames in received for f in frames if isinstance(f, GoAwayFrame)]
    assert goaways, "no connection was told GOAWAY"
    assert {goaway.error_code for goaway in goaways} == {ENHANCE_YOUR_CALM}
