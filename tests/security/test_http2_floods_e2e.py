"""HTTP/2 floods on the gRPC port, sent as raw frames: streams that never finish, header blocks
that never end, and streams reset as fast as they open, also by attackers that reconnect at the
default limits. Each leaves the frontend's PSS within its allowance and /ping answering, on
each front of the port (pygrpc-native and grpc.aio behind the guard, h2corn without one).

The guard ends a connection where h2corn ends a stream or leaves a connection waiting to be
accepted; what each front holds, and how, is in docs/decisions.md, "gRPC's front"."""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import grpc
import hpack
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.serving import Servers
from hyperframe.frame import (
    ContinuationFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
)

from modelhost import testing
from modelhost.records.memory import pss_bytes
from modelhost.rpc.fronts import FRONTS, H2CORN

pytestmark = pytest.mark.e2e

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INFER = "/inference.GRPCInferenceService/ModelInfer"
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7
COMPRESSION_ERROR = 0x9
DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED = "4", "8"
ALLOWANCE_BYTES = 64 * 2**20
MAX_STREAMS = 16
MAX_CONNECTIONS = 8
FLOOD_S = 3.0
BATCH = 50
PING_TIMEOUT_S = 5.0  # generous: a ping slower than this is a stalled server, not a slow one
ATTACKERS = 12


class EventLike(Protocol):
    def is_set(self) -> bool: ...


class RawConnection:
    """An HTTP/2 client connection that writes frames as given and reads what comes back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.encoder = hpack.Encoder()
        self.unread = b""
        self.closed = False
        self.send(PREFACE + SettingsFrame(0).serialize())

    def headers(self, stream_id: int, end_headers: bool = True) -> bytes:
        """A ModelInfer call's HEADERS, never with END_STREAM: its message never follows."""
        fields = [(":method", "POST"), (":scheme", "http"), (":path", INFER)]
        fields += [(":authority", f"127.0.0.1:{self.port}"), ("content-type", "application/grpc")]
        fields += [("te", "trailers")]
        frame = HeadersFrame(stream_id, data=self.encoder.encode(fields))
        if end_headers:
            frame.flags.add("END_HEADERS")
        return frame.serialize()

    def send(self, data: bytes) -> bool:
        """False once the server has closed the connection."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True
        return not self.closed

    def receive(self) -> bytes:
        """Bytes received, b"" once the connection is closed or reset."""
        try:
            return self.sock.recv(65536)
        except ConnectionResetError:
            return b""

    def frames(self, wait_s: float = 0.0) -> list[Frame]:
        """The frames received so far, waiting up to `wait_s` for the first."""
        self.sock.settimeout(wait_s or 0.0001)
        found: list[Frame] = []
        with contextlib.suppress(TimeoutError, BlockingIOError):
            while not self.closed:
                data = self.receive()
                self.closed = not data
                self.unread += data
                self.sock.settimeout(0.0001)
        while len(self.unread) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self.unread[:9]))
            if len(self.unread) < 9 + length:
                break
            frame.parse_body(memoryview(self.unread[9 : 9 + length]))
            self.unread = self.unread[9 + length :]
            found.append(frame)
        return found


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


@contextlib.contextmanager
def watched(server: testing.RunningServer) -> Iterator[list[int]]:
    """/ping's statuses while the block runs (0: none within PING_TIMEOUT_S); the frontend's PSS,
    read between pings, must stay within its allowance, and its log free of tracebacks."""
    start_bytes = most_bytes = pss_bytes(server.pid)
    statuses: list[int] = []
    done = threading.Event()

    def ping() -> None:
        nonlocal most_bytes
        with httpx.Client(base_url=server.url, timeout=PING_TIMEOUT_S) as http:
            while not done.wait(0.05):
                statuses.append(status_of(http))
                most_bytes = max(most_bytes, pss_bytes(server.pid))

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        yield statuses
    finally:
        done.set()
        pinger.join()
    with httpx.Client(base_url=server.url, timeout=PING_TIMEOUT_S) as http:
        statuses.append(status_of(http))  # a flood cut short
    grown_bytes = max(most_bytes, pss_bytes(server.pid)) - start_bytes
    assert grown_bytes < ALLOWANCE_BYTES, f"the frontend grew by {grown_bytes / 2**20:.0f} MiB"
    assert set(statuses) == {200}, f"{statuses.count(0)} of {len(statuses)} pings timed out"
    assert "Traceback" not in server.log_text(), server.log_text()[-3000:]


def status_of(http: httpx.Client) -> int:
    try:
        return http.get("/ping").status_code
    except httpx.TimeoutException:
        return 0


def flood(batch: Callable[[int], bytes], connection: RawConnection) -> list[Frame]:
    """Send `batch(0)`, `batch(1)`... until FLOOD_S passes or the server closes; the frames
    that came back."""
    received: list[Frame] = []
    deadline, index = time.monotonic() + FLOOD_S, 0
    while time.monotonic() < deadline and connection.send(batch(index)):
        received += connection.frames()
        index += 1
    return received + connection.frames(wait_s=1.0)


def streams(connection: RawConnection, index: int, frames: Callable[[int], bytes]) -> bytes:
    """Batch `index` of BATCH new streams, each stream's frames by its id."""
    first = 2 * BATCH * index + 1
    return b"".join(frames(first + 2 * i) for i in range(BATCH))


def goaway_of(frames: list[Frame]) -> GoAwayFrame:
    found = [frame for frame in frames if isinstance(frame, GoAwayFrame)]
    assert found, f"no GOAWAY among {len(frames)} frames"
    return found[0]


def statuses_of(frames: list[Frame]) -> dict[int, str]:
    """Each stream's grpc-status among a connection's frames, all of them, in order."""
    decoder, found = hpack.Decoder(), {}
    for frame in frames:
        if isinstance(frame, HeadersFrame):
            fields = dict(decoder.decode(frame.data))
            if "grpc-status" in fields:
                found[frame.stream_id] = fields["grpc-status"]
    return found


def until_answered(connection: RawConnection, stream_id: int, wait_s: float) -> list[Frame]:
    """The frames until `stream_id` has its status, the connection closes, or `wait_s`."""
    deadline, frames = time.monotonic() + wait_s, []
    while not connection.closed and time.monotonic() < deadline:
        frames += connection.frames(wait_s=0.5)
        if stream_id in statuses_of(frames):
            break
    return frames


def strictly_failing_on_h2corn(request: pytest.FixtureRequest, front: str, why: str) -> None:
    """A limit h2corn does not hold: the test must fail there, until it does."""
    if front == H2CORN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=why))


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


def test_a_stream_that_never_sends_its_message_ends_its_connection(
    server: testing.RunningServer, grpc_port: int, front: str
) -> None:
    """One stream opened, its message never sent: GOAWAY once --header-timeout-s passes (on
    h2corn, the stream ends with DEADLINE_EXCEEDED)."""
    connection = RawConnection(grpc_port)
    try:
        connection.send(connection.headers(1))
        if front == H2CORN:
            assert statuses_of(until_answered(connection, 1, 10)) == {1: DEADLINE_EXCEEDED}
            return
        deadline, frames = time.monotonic() + 10, []
        while not connection.closed and time.monotonic() < deadline:
            frames += connection.frames(wait_s=0.5)
        assert goaway_of(frames).error_code == ENHANCE_YOUR_CALM
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


@pytest.fixture(scope="module")
def default_server(
    tmp_path_factory: pytest.TempPathFactory, serve: Servers, front: str
) -> tuple[testing.RunningServer, int]:
    """A server at every default limit, the frontend's allowance included, and its gRPC port."""
    store = tmp_path_factory.mktemp("store")
    testing.iris_logreg(store / "iris.pkl")
    port = testing.free_port()
    return serve(store, workers=1, grpc_port=port, grpc_front=front), port


def attack(port: int, stop: EventLike) -> None:
    """Open streams that never send their message, reconnecting whenever the server ends the
    connection, until `stop`."""
    while not stop.is_set():
        try:
            connection = RawConnection(port)
        except OSError:
            continue
        index = 0
        while not stop.is_set() and connection.send(streams(connection, index, connection.headers)):
            connection.frames()
            index += 1
        connection.sock.close()


def test_reconnecting_stream_floods_at_the_default_limits(
    default_server: tuple[testing.RunningServer, int],
) -> None:
    """A dozen attackers open streams without messages and reconnect after each GOAWAY, at the
    default caps: the frontend stays within its default allowance, every /ping answers, and a
    client already connected keeps having its calls answered."""
    server, port = default_server
    processes = multiprocessing.get_context("fork")  # the attackers apart from this test's GIL
    stop = processes.Event()
    attackers = [processes.Process(target=attack, args=(port, stop)) for _ in range(ATTACKERS)]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        check(health_pb2.HealthCheckRequest(), timeout=PING_TIMEOUT_S)  # connected first
        with watched(server):
            for attacker in attackers:
                attacker.start()
            try:
                deadline = time.monotonic() + 3 * FLOOD_S
                while time.monotonic() < deadline:  # raises if one is not answered
                    check(health_pb2.HealthCheckRequest(), timeout=PING_TIMEOUT_S)
            finally:
                stop.set()
                for attacker in attackers:
                    attacker.join()


def refused(server: testing.RunningServer, reason: str) -> float:
    """The guards' refusals of that kind so far, from /metrics."""
    series = f'modelhost_grpc_refusals_total{{reason="{reason}"}} '
    lines = httpx.get(f"{server.url}/metrics").text.splitlines()
    return sum(float(line.removeprefix(series)) for line in lines if line.startswith(series))


def test_an_address_opening_connections_too_fast_is_refused(
    default_server: tuple[testing.RunningServer, int], front: str, request: pytest.FixtureRequest
) -> None:
    """Connections opened one after another from one address, each closed before the next:
    past the burst and --grpc-connections-per-s, one is closed at once, and counted."""
    strictly_failing_on_h2corn(request, front, "h2corn accepts every connection it has room for")
    server, port = default_server
    before = refused(server, "rate")
    for _ in range(4 * 64):  # the burst is --grpc-max-connections, 64
        connection = RawConnection(port)
        frames = connection.frames(wait_s=1.0)
        connection.sock.close()
        if not any(isinstance(frame, SettingsFrame) for frame in frames):
            break
    assert connection.closed and not frames
    assert refused(server, "rate") > before
