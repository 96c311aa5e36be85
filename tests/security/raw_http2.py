"""An HTTP/2 client that writes raw frames to the gRPC port, and the watch kept on the frontend
while it floods: the tools of the HTTP/2 flood tests."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import hpack
import httpx
import pytest
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame, SettingsFrame

from modelhost import testing
from modelhost.records.memory import pss_bytes
from modelhost.rpc.fronts import H2CORN

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INFER = "/inference.GRPCInferenceService/ModelInfer"
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7
COMPRESSION_ERROR = 0x9
DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED = "4", "8"
ALLOWANCE_BYTES = 64 * 2**20  # the frontend's default allowance
FLOOD_S = 3.0
BATCH = 50
CONNECT_TIMEOUT_S = 10.0
PING_TIMEOUT_S = 5.0  # generous: a ping slower than this is a stalled server, not a slow one


class RawConnection:
    """An HTTP/2 client connection that writes frames as given and reads what comes back."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.port = port
        # bounded: a flooded server's full backlog must not hold a client past its test
        self.sock = socket.create_connection(
            ("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S, source_address=(source, 0)
        )
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


@contextlib.contextmanager
def watched(server: testing.RunningServer) -> Iterator[list[int]]:
    """/ping's statuses while the block runs (0: none within PING_TIMEOUT_S); the frontend's PSS,
    read between pings, must stay within its allowance as the server reckons it (its size once
    serving, plus the allowance), and its log free of tracebacks and of that warning."""
    most_bytes = pss_bytes(server.pid)
    statuses: list[int] = []
    with httpx.Client(base_url=server.url, timeout=PING_TIMEOUT_S) as http:

        def ping() -> None:
            nonlocal most_bytes
            statuses.append(status_of(http))
            most_bytes = max(most_bytes, pss_bytes(server.pid))

        with repeated(ping, pause_s=0.05):
            yield statuses
        statuses.append(status_of(http))  # a flood cut short
    past_bytes = max(most_bytes, pss_bytes(server.pid)) - allowed_bytes(server)
    assert past_bytes < 0, f"the frontend went {past_bytes / 2**20:.1f} MiB past its allowance"
    assert set(statuses) == {200}, f"{statuses.count(0)} of {len(statuses)} pings timed out"
    log = server.log_text()
    assert "Traceback" not in log and "past its allowance" not in log, log[-3000:]


@contextlib.contextmanager
def repeated(action: Callable[[], None], pause_s: float = 0.0) -> Iterator[None]:
    """`action` again and again on a thread of its own, `pause_s` apart, while the block runs."""
    done = threading.Event()

    def loop() -> None:
        while not done.wait(pause_s):
            action()

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def allowed_bytes(server: testing.RunningServer) -> int:
    """The most the frontend may use: its size once serving, as the server read it, and its
    growth."""
    return int(server.events("budget")[0]["detail"]["frontend_allowance_bytes"])


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


def partial_message(connection: RawConnection, stream_id: int) -> bytes:
    """A ModelInfer call whose message announces 1 KiB and sends its first byte only."""
    prefix = b"\x00" + (1024).to_bytes(4, "big")
    return connection.headers(stream_id) + DataFrame(stream_id, data=prefix + b"\x08").serialize()


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
