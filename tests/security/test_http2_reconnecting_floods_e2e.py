"""Attackers that reconnect whenever the server ends their connection, on the gRPC port at the
default limits: a dozen flooding streams that never send their message leave the frontend's PSS
within its default allowance and its calls answered, and one address opening connections too
fast is refused, on each front of the port (h2corn has no per-address limit)."""

from __future__ import annotations

import multiprocessing
import time
from typing import Protocol

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.serving import Servers
from hyperframe.frame import SettingsFrame
from raw_http2 import (
    FLOOD_S,
    PING_TIMEOUT_S,
    RawConnection,
    streams,
    strictly_failing_on_h2corn,
    watched,
)

from modelhost import testing
from modelhost.rpc.fronts import FRONTS

pytestmark = pytest.mark.e2e

ATTACKERS = 12


class EventLike(Protocol):
    def is_set(self) -> bool: ...


@pytest.fixture(scope="module", params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    """Each front of the inference port."""
    return str(request.param)


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
