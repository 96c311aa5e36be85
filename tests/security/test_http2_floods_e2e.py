"""HTTP/2 floods on the gRPC port, sent as raw frames at tight caps: streams that never finish
or whose message is only partly sent, header blocks that never end, and streams reset as fast as
they open. Each leaves the frontend's PSS within its allowance and /ping answering, on each front
of the port (pygrpc-native and grpc.aio behind the guard, h2corn without one); attackers that
reconnect at the default limits are test_http2_reconnecting_floods_e2e.py's.

The guard ends a connection where h2corn ends a stream or leaves a connection waiting to be
accepted; what each front holds, and how, is in docs/decisions.md, "gRPC's front"."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from helpers.serving import Servers
from hyperframe.frame import (
    ContinuationFrame,
    Frame,
    RstStreamFrame,
    SettingsFrame,
)
from raw_http2 import (
    ALLOWANCE_BYTES,
    COMPRESSION_ERROR,
    DEADLINE_EXCEEDED,
    ENHANCE_YOUR_CALM,
    REFUSED_STREAM,
    RawConnection,
    flood,
    goaway_of,
    partial_message,
    statuses_of,
    streams,
    until_answered,
    watched,
)

from modelhost import testing
from modelhost.rpc.fronts import FRONTS, H2CORN

pytestmark = pytest.mark.e2e

MAX_STREAMS = 16
MAX_CONNECTIONS = 8


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
    testing.iris_logreg(store / "iris.pkl")
    return serve(
        store,
        workers=1,
        grpc_port=grpc_port,
        grpc_max_streams=MAX_STREAMS,
        grpc_max_connections=MAX_CONNECTIONS,
        grpc_connections_per_s=1000,  # each test reconnects at once after the last's GOAWAY
        frontend_memory_allowance=ALLOWANCE_BYTES,
        header_timeout_s=1,  # also the deadline for a stream's first message
        grpc_front=front,
    )


def test_streams_past_the_cap_end_their_connection(
    server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    """A dozen connections open streams that never send their message, far past the advertised
    MAX_CONCURRENT_STREAMS: each is told GOAWAY (on h2corn, each stream past the cap is
    refused), and the frontend holds."""
    connections = [RawConnection(grpc_port) for _ in range(12)]
    found: list[list[Frame]] = [[] for _ in connections]

    def open_streams(index: int) -> None:
        connection = connections[index]
        found[index] = flood(lambda n: streams(connection, n, connection.headers), connection)

    with watched(server):
        threads = [threading.Thread(target=open_streams, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for connection in connections:
        connection.sock.close()
    served = [frames for frames in found if frames]  # past the connection cap: closed, none
    kinds = [[type(frame).__name__ for frame in frames] for frames in found]
    assert 0 < len(served) <= MAX_CONNECTIONS, kinds
    for frames in served:
        # a busy machine may relay the guard's GOAWAY before the server's SETTINGS
        settings = [f.settings for f in frames if isinstance(f, SettingsFrame) and f.settings]
        assert (
            settings == [] or settings[0].get(SettingsFrame.MAX_CONCURRENT_STREAMS) == MAX_STREAMS
        )
        if front == H2CORN:
            resets = [f.error_code for f in frames if isinstance(f, RstStreamFrame)]
            assert REFUSED_STREAM in resets  # beside NO_ERROR: streams answered, then reset
        else:
            assert goaway_of(frames).error_code == ENHANCE_YOUR_CALM


@pytest.mark.parametrize("sent", ["headers", "part of the message"])
def test_a_stream_whose_message_never_arrives_ends_its_connection(
    server: testing.RunningServer, grpc_port: int, front: str, sent: str
) -> None:
    """One stream opened, its message never sent or only partly sent: GOAWAY once
    --header-timeout-s passes (on h2corn, the stream ends with DEADLINE_EXCEEDED)."""
    connection = RawConnection(grpc_port)
    try:
        opening = connection.headers(1) if sent == "headers" else partial_message(connection, 1)
        connection.send(opening)
        if front == H2CORN:
            assert statuses_of(until_answered(connection, 1, 10)) == {1: DEADLINE_EXCEEDED}
            return
        deadline, frames = time.monotonic() + 10, []
        while not connection.closed and time.monotonic() < deadline:
            frames += connection.frames(wait_s=0.5)
        told = goaway_of(frames)
        assert told.error_code == ENHANCE_YOUR_CALM and b"no message" in told.additional_data
        assert connection.closed
    finally:
        connection.sock.close()


def test_an_endless_header_block_ends_its_connection(
    server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    """HEADERS without END_HEADERS, then 8 KiB CONTINUATION frames without end: GOAWAY and
    the connection closed once the block passes the 16 KiB header list (h2corn's code is
    COMPRESSION_ERROR: the connection's HPACK state is lost with the block)."""
    connection = RawConnection(grpc_port)
    more = ContinuationFrame(1, data=b"a" * 8192).serialize() * 16
    try:
        with watched(server):
            first = connection.headers(1, end_headers=False)
            frames = flood(lambda n: more if n else first, connection)
        code = COMPRESSION_ERROR if front == H2CORN else ENHANCE_YOUR_CALM
        assert goaway_of(frames).error_code == code
        assert connection.closed
    finally:
        connection.sock.close()


def test_rapid_resets_end_their_connection(server: testing.RunningServer, grpc_port: int) -> None:
    """Streams opened and reset at once, as fast as they can be sent (CVE-2023-44487): GOAWAY
    and the connection closed."""
    connection = RawConnection(grpc_port)

    def open_and_reset(stream_id: int) -> bytes:
        return connection.headers(stream_id) + RstStreamFrame(stream_id, error_code=8).serialize()

    try:
        with watched(server):
            frames = flood(lambda n: streams(connection, n, open_and_reset), connection)
        assert goaway_of(frames).error_code == ENHANCE_YOUR_CALM
        assert connection.closed
    finally:
        connection.sock.close()


def test_connections_past_the_cap_are_closed(
    server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    """Three times --grpc-max-connections connections at once: no more than the cap are kept
    (on h2corn, served: the rest wait unaccepted, in the listening socket's backlog)."""
    connections = [RawConnection(grpc_port) for _ in range(3 * MAX_CONNECTIONS)]
    try:
        got = [connection.frames(wait_s=0.2) for connection in connections]
        kept = [connection for connection in connections if not connection.closed]
        if front == H2CORN:
            kept = [c for c, frames in zip(connections, got, strict=True) if frames]
        assert 0 < len(kept) <= MAX_CONNECTIONS
        assert httpx.get(f"{server.url}/ping").status_code == 200
    finally:
        for connection in connections:
            connection.sock.close()


def test_an_address_holding_every_connection_gives_one_up_to_another(
    server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    """One client holding all --grpc-max-connections connections (a customer's pool, or an
    attacker) does not lock every other client out: a connection from another address takes the
    place of one of the first's, which is told GOAWAY (NO_ERROR) and closed."""
    if front == H2CORN:
        pytest.xfail("h2corn has no guard: it leaves connections past its cap unaccepted")
    hog = [RawConnection(grpc_port) for _ in range(MAX_CONNECTIONS)]
    other: RawConnection | None = None
    try:
        assert all(connection.frames(wait_s=2) for connection in hog)  # each relayed
        other = RawConnection(grpc_port, source="127.0.0.2")
        assert other.frames(wait_s=2) and not other.closed
        told = [frames for c in hog if (frames := c.frames(wait_s=0.5)) and c.closed]
        assert len(told) == 1, told
        assert goaway_of(told[0]).error_code == 0
        assert [c.closed for c in hog].count(False) == MAX_CONNECTIONS - 1
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'modelhost_grpc_refusals_total{reason="shared"} 1.0' in metrics
    finally:
        for connection in [*hog, *([other] if other else [])]:
            connection.sock.close()
