"""Streams whose first message is only partly sent, on the gRPC port: each holds a call in grpc
as a stream without any message does, so a flood of them must stay within the frontend's
allowance too, on each front (h2corn ends the streams where the guard ends the connection)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from helpers.serving import Servers
from hyperframe.frame import DataFrame, Frame, GoAwayFrame
from test_http2_floods_e2e import (
    DEADLINE_EXCEEDED,
    ENHANCE_YOUR_CALM,
    RESOURCE_EXHAUSTED,
    RawConnection,
    statuses_of,
    until_answered,
    watched,
)

from modelhost import testing
from modelhost.rpc.fronts import FRONTS, H2CORN

pytestmark = pytest.mark.e2e

MAX_STREAMS = 128  # nginx's default, and the server's
CONNECTIONS = 30  # each at MAX_STREAMS: past a 64 MiB allowance's worth of calls
HOLD_S = 3.0  # the flood held open while the frontend is watched
HEADER_TIMEOUT_S = 10  # the default, also the deadline for a stream's first message


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


def partial_message(connection: RawConnection, stream_id: int) -> bytes:
    """A ModelInfer call whose message announces 1 KiB and sends its first byte only."""
    prefix = b"\x00" + (1024).to_bytes(4, "big")
    return connection.headers(stream_id) + DataFrame(stream_id, data=prefix + b"\x08").serialize()


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


def test_partly_sent_messages_stay_within_the_allowance(
    front: tuple[testing.RunningServer, int], request: pytest.FixtureRequest
) -> None:
    """Thousands of streams whose message never completes: the connections holding the most of
    them are told GOAWAY (on h2corn, their streams end with RESOURCE_EXHAUSTED), the frontend
    stays within its allowance and /ping answers."""
    server, port = front
    with watched(server), partial_streams(port) as received:
        pass
    if request.node.callspec.params["front"] == H2CORN:
        statuses = {status for frames in received for status in statuses_of(frames).values()}
        assert RESOURCE_EXHAUSTED in statuses, "no stream was shed"
        return
    goaways = [f for frames in received for f in frames if isinstance(f, GoAwayFrame)]
    assert goaways, "no connection was told GOAWAY"
    assert {goaway.error_code for goaway in goaways} == {ENHANCE_YOUR_CALM}


def test_a_partly_sent_message_is_timed_as_a_missing_one(
    front: tuple[testing.RunningServer, int], request: pytest.FixtureRequest
) -> None:
    """One stream whose message never completes: GOAWAY once --header-timeout-s passes (on
    h2corn, the stream ends with DEADLINE_EXCEEDED)."""
    _, port = front
    connection = RawConnection(port)
    try:
        connection.send(partial_message(connection, 1))
        if request.node.callspec.params["front"] == H2CORN:
            frames = until_answered(connection, 1, 3 * HEADER_TIMEOUT_S)
            assert statuses_of(frames) == {1: DEADLINE_EXCEEDED}
            return
        deadline, frames = time.monotonic() + 3 * HEADER_TIMEOUT_S, []
        while not connection.closed and time.monotonic() < deadline:
            frames += connection.frames(wait_s=0.5)
        told = [frame for frame in frames if isinstance(frame, GoAwayFrame)]
        assert told and told[0].error_code == ENHANCE_YOUR_CALM, "the stream was never timed"
        assert b"no message" in told[0].additional_data
    finally:
        connection.sock.close()
