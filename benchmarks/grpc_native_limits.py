"""Which HTTP/2 limits each gRPC front holds on its public port: the security tests' raw frame
floods, sent to a server of each front (pygrpc-native behind the guard, h2corn with none) at the
security tests' settings.

Each probe reports what the connection got back (GOAWAY and its code, RST_STREAMs, closed or
not), the frontend's PSS growth and /ping's answers while it ran. (Before the guard reached its
front on a Unix socket, the native front's loopback port was probed too: decisions.md, "A guard
of ours relays the gRPC ports".)

    python benchmarks/grpc_native_limits.py
    python benchmarks/grpc_native_limits.py --fronts h2corn
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from _common import markdown_table, write_results
from hyperframe.frame import ContinuationFrame, Frame, GoAwayFrame, RstStreamFrame

from modelhost import testing
from modelhost.records.memory import pss_bytes

sys.path[:0] = [
    str(Path(__file__).parents[1] / "tests"),
    str(Path(__file__).parents[1] / "tests/security"),
]
from test_http2_floods_e2e import RawConnection, flood, streams  # noqa: E402

MAX_STREAMS = 16
MAX_CONNECTIONS = 8
HEADER_TIMEOUT_S = 1
HEADER = ["limit", "front", "GOAWAY", "RST_STREAMs", "closed", "PSS growth MiB", "pings ok"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fronts", nargs="+", default=["pygrpc-native", "h2corn"])
    fronts = parser.parse_args().fronts
    rows = [row for front in fronts for row in probed(front)]
    table = markdown_table(HEADER, rows)
    path = write_results("grpc_native_limits", {"rows": rows}, table)
    print(table)
    print(f"\nraw results: {path}")


def probed(front: str) -> list[list[str]]:
    """Every probe on the public port of a server of `front`."""
    with tempfile.TemporaryDirectory(prefix="modelhost-front-limits-") as scratch:
        scratch_path = Path(scratch)
        testing.iris_logreg(scratch_path / "store" / "iris.pkl")
        port = testing.free_port()
        settings = {
            "workers": 1,
            "grpc_port": port,
            "grpc_front": front,
            "grpc_max_streams": MAX_STREAMS,
            "grpc_max_connections": MAX_CONNECTIONS,
            "grpc_connections_per_s": 1000,
            "header_timeout_s": HEADER_TIMEOUT_S,
        }
        serve = testing.serve_args(scratch_path / "store", scratch_path / "cache", **settings)
        with testing.RunningServer(serve, scratch_path) as server:
            return [probe(server, limit, front, port, send) for limit, send in PROBES.items()]


def probe(
    server: testing.RunningServer,
    limit: str,
    where: str,
    port: int,
    send: Callable[[int], dict[str, Any]],
) -> list[str]:
    """One probe on one port, /ping and the frontend's PSS watched while it runs."""
    start = most = pss_bytes(server.pid)
    pings: list[int] = []
    done = threading.Event()

    def ping() -> None:
        nonlocal most
        with httpx.Client(base_url=server.url, timeout=5) as http:
            while True:  # once at least, however short the probe
                try:
                    pings.append(http.get("/ping").status_code)
                except httpx.TimeoutException:
                    pings.append(0)
                most = max(most, pss_bytes(server.pid))
                if done.wait(0.05):
                    return

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        seen = send(port)
    finally:
        done.set()
        pinger.join()
    time.sleep(1.5)  # the guard's lingering close, before the next probe's connections
    row = [limit, where, seen["goaway"], str(seen["resets"]), seen["closed"]]
    row += [f"{(most - start) / 2**20:.0f}", f"{pings.count(200)}/{len(pings)}"]
    print(markdown_table(HEADER, [row]).splitlines()[-1], flush=True)
    return row


def seen_on(frames: list[Frame], connections: list[RawConnection]) -> dict[str, Any]:
    goaways = [f for f in frames if isinstance(f, GoAwayFrame)]
    closed = sum(connection.closed for connection in connections)
    for connection in connections:
        connection.sock.close()
    return {
        "goaway": f"0x{goaways[0].error_code:x}" if goaways else "none",
        "resets": sum(isinstance(f, RstStreamFrame) for f in frames),
        "closed": f"{closed}/{len(connections)}",
    }


def streams_past_the_cap(port: int) -> dict[str, Any]:
    connection = RawConnection(port)
    return seen_on(
        flood(lambda n: streams(connection, n, connection.headers), connection), [connection]
    )


def no_first_message(port: int) -> dict[str, Any]:
    connection = RawConnection(port)
    connection.send(connection.headers(1))
    frames: list[Frame] = []
    deadline = time.monotonic() + 4 * HEADER_TIMEOUT_S + 2
    while not connection.closed and time.monotonic() < deadline:
        frames += connection.frames(wait_s=0.5)
    return seen_on(frames, [connection])


def endless_header_block(port: int) -> dict[str, Any]:
    connection = RawConnection(port)
    more = ContinuationFrame(1, data=b"a" * 8192).serialize() * 16
    first = connection.headers(1, end_headers=False)
    return seen_on(flood(lambda n: more if n else first, connection), [connection])


def rapid_resets(port: int) -> dict[str, Any]:
    connection = RawConnection(port)

    def open_and_reset(stream_id: int) -> bytes:
        return connection.headers(stream_id) + RstStreamFrame(stream_id, error_code=8).serialize()

    return seen_on(
        flood(lambda n: streams(connection, n, open_and_reset), connection), [connection]
    )


def connections_past_the_cap(port: int) -> dict[str, Any]:
    connections = [RawConnection(port) for _ in range(3 * MAX_CONNECTIONS)]
    frames: list[Frame] = []
    for connection in connections:
        frames += connection.frames(wait_s=0.2)
    return seen_on(frames, connections)


def held_streams_on_many_connections(port: int) -> dict[str, Any]:
    """Five times the connection cap, each with the cap's streams waiting for a message."""
    connections = [RawConnection(port) for _ in range(5 * MAX_CONNECTIONS)]
    for connection in connections:
        connection.send(b"".join(connection.headers(2 * i + 1) for i in range(MAX_STREAMS)))
    time.sleep(HEADER_TIMEOUT_S / 2)  # held, short of the first message's deadline
    frames = [frame for connection in connections for frame in connection.frames(wait_s=0.05)]
    return seen_on(frames, connections)


PROBES: dict[str, Callable[[int], dict[str, Any]]] = {
    f"streams past the cap ({MAX_STREAMS})": streams_past_the_cap,
    f"no first message ({HEADER_TIMEOUT_S} s)": no_first_message,
    "endless CONTINUATION": endless_header_block,
    "rapid reset": rapid_resets,
    f"connections past the cap ({MAX_CONNECTIONS})": connections_past_the_cap,
    f"{5 * MAX_CONNECTIONS} connections of {MAX_STREAMS} waiting streams": (
        held_streams_on_many_connections
    ),
}


if __name__ == "__main__":
    main()
