"""Connection ages on the gRPC port, sent as raw frames: a connection with no call open is told
GOAWAY once it has been idle too long, and any connection once it is too old, its calls then
given the drain timeout before it is closed. The limits are set small here, on each front;
h2corn holds the first alone (docs/decisions.md, "gRPC's front")."""

from __future__ import annotations

import time

import pytest
from helpers.serving import Servers
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame
from raw_http2 import RawConnection, strictly_failing_on_h2corn

from modelhost import testing
from modelhost.rpc.fronts import FRONTS, H2CORN

pytestmark = pytest.mark.e2e

IDLE_S = 1.0
AGE_S = 2.5  # past IDLE_S, so that an idle connection is told the idle limit first
GRACE_S = 1.0  # --drain-timeout-s: an old connection's calls have this long to finish
WAIT_S = 8.0  # over twice AGE_S + GRACE_S: a connection open past this is one nothing closes
WATCH = "/grpc.health.v1.Health/Watch"  # a call the server keeps open, streaming answers


@pytest.fixture(scope="module", params=FRONTS)
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, serve: Servers
) -> tuple[testing.RunningServer, int]:
    """A server with small connection ages on one gRPC front, and its gRPC port."""
    store = tmp_path_factory.mktemp("store")
    testing.iris_logreg(store / "iris.pkl")
    port = testing.free_port()
    server = serve(
        store,
        workers=1,
        grpc_port=port,
        grpc_connection_idle_s=IDLE_S,
        grpc_connection_age_s=AGE_S,
        drain_timeout_s=GRACE_S,
        grpc_front=request.param,
    )
    return server, port


def until_closed(connection: RawConnection) -> list[Frame]:
    """The frames received until the server closes the connection, or WAIT_S passes."""
    deadline, frames = time.monotonic() + WAIT_S, []
    while not connection.closed and time.monotonic() < deadline:
        frames += connection.frames(wait_s=0.5)
    return frames


def goaways(frames: list[Frame]) -> list[GoAwayFrame]:
    return [frame for frame in frames if isinstance(frame, GoAwayFrame)]


def watch(connection: RawConnection, stream_id: int) -> bytes:
    """A Health.Watch call with its whole message sent: it stays open, so the connection is
    never idle."""
    fields = [(":method", "POST"), (":scheme", "http"), (":path", WATCH)]
    fields += [(":authority", f"127.0.0.1:{connection.port}"), ("te", "trailers")]
    fields += [("content-type", "application/grpc")]
    headers = HeadersFrame(stream_id, data=connection.encoder.encode(fields))
    headers.flags.add("END_HEADERS")
    request = DataFrame(stream_id, data=b"\0\0\0\0\0", flags=["END_STREAM"])  # an empty message
    return headers.serialize() + request.serialize()


def test_an_idle_connection_is_told_goaway_and_closed(
    front: tuple[testing.RunningServer, int], request: pytest.FixtureRequest
) -> None:
    """A connection that opens no call is told GOAWAY for being idle (h2corn's names no
    reason), then closed."""
    _, port = front
    connection = RawConnection(port)
    try:
        frames = until_closed(connection)
        assert connection.closed, "the idle connection was left open"
        told = goaways(frames)
        reason = b"" if request.node.callspec.params["front"] == H2CORN else b"idle"
        assert told and reason in told[0].additional_data, told
    finally:
        connection.sock.close()


def test_an_old_connection_is_told_goaway_then_closed(
    front: tuple[testing.RunningServer, int], request: pytest.FixtureRequest
) -> None:
    """A connection kept busy by a call that never ends is told GOAWAY at its maximum age, and
    closed once its call has had the drain timeout to finish."""
    name = request.node.callspec.params["front"]
    strictly_failing_on_h2corn(request, name, "h2corn has no maximum connection age")
    _, port = front
    connection = RawConnection(port)
    try:
        connection.send(watch(connection, 1))
        frames = until_closed(connection)
        assert any(isinstance(f, DataFrame) and f.stream_id == 1 for f in frames), "no answer"
        assert connection.closed, "the old connection was left open"
        told = goaways(frames)
        assert told and b"age" in told[0].additional_data, told
    finally:
        connection.sock.close()
