"""Floods of gRPC streams whose first message is only partly sent: the frontend's PSS at the
most, against its allowance as the server reckons it (the `budget` event at start).

A real server at the default limits (one worker, iris) on each front. A flood is 30 connections,
each from an address of its own (127.0.0.2 on: the per-address bucket would stop one address
after its first GOAWAY), opened first; then each opens 128 `ModelInfer` calls whose message
announces 1 KiB and sends one byte; held 3 s, then closed. `--floods` of them, 1.5 s apart, on
one server. For each flood: the frontend's PSS at the most (read every 20 ms) above its size at
start, and how far it is from the allowance's end (negative: within it).

    python benchmarks/partial_flood.py [--floods 3] [--fronts grpc.aio,h2corn]
    python benchmarks/partial_flood.py --checkout /tmp/at-abc1234 --commit abc1234
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import hpack
from _common import add_checkout, markdown_table, use_checkout, write_results
from grpc_flood import INFER, PREFACE, pss_bytes
from hyperframe.frame import DataFrame, HeadersFrame, SettingsFrame

CONNECTIONS, STREAMS, HOLD_S, PAUSE_S = 30, 128, 3.0, 1.5
FRONTS = ("pygrpc-native", "grpc.aio", "h2corn")


def preface() -> bytes:
    return PREFACE + SettingsFrame(0).serialize()


def partial_calls(port: int) -> bytes:
    """STREAMS calls, each with one byte of a 1 KiB message."""
    encoder, frames = hpack.Encoder(), []
    fields = [(":method", "POST"), (":scheme", "http"), (":path", INFER)]
    fields += [(":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc")]
    fields += [("te", "trailers")]  # else grpc refuses the call at once
    for stream_id in range(1, 2 * STREAMS, 2):
        head = HeadersFrame(stream_id, data=encoder.encode(fields))
        head.flags.add("END_HEADERS")
        frames.append(head.serialize())
        body = b"\x00" + (1024).to_bytes(4, "big") + b"\x08"
        frames.append(DataFrame(stream_id, data=body).serialize())
    return b"".join(frames)


def flood(port: int) -> None:
    """CONNECTIONS connections opened, then each sends its partly sent calls at once; read
    from and held HOLD_S, then closed."""
    sockets = []
    for index in range(CONNECTIONS):
        source = (f"127.0.0.{index + 2}", 0)
        sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=source)
        sock.sendall(preface())
        sockets.append(sock)
    for sock in sockets:
        with contextlib.suppress(OSError):  # ended by the server
            sock.sendall(partial_calls(port))
        sock.setblocking(False)
    deadline = time.monotonic() + HOLD_S
    while time.monotonic() < deadline:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.recv(65536)
        time.sleep(0.1)
    for sock in sockets:
        sock.close()


def peak_during(pid: int, work: threading.Thread) -> int:
    """The PSS of `pid` at the most while `work` runs and PAUSE_S after."""
    most = pss_bytes(pid)
    work.start()
    while work.is_alive():
        most = max(most, pss_bytes(pid))
        time.sleep(0.02)
    deadline = time.monotonic() + PAUSE_S
    while time.monotonic() < deadline:
        most = max(most, pss_bytes(pid))
        time.sleep(0.02)
    return most


def front_run(front: str, floods: int, root: Path, cwd: Path | None) -> list[dict[str, Any]]:
    from modelhost import testing

    port = testing.free_port()
    flags = testing.serve_args(
        root / "store", root / front, workers=1, grpc_port=port, grpc_front=front
    )
    with testing.RunningServer(flags, root / f"{front}-run", cwd=cwd) as server:
        detail = server.events("budget")[0]["detail"]
        start, allowed = detail["frontend_bytes"], detail["frontend_allowance_bytes"]
        rows = []
        for index in range(1, floods + 1):
            most = peak_during(server.pid, threading.Thread(target=flood, args=(port,)))
            rows.append(
                {
                    "front": front,
                    "flood": index,
                    "growth_mib": round((most - start) / 2**20, 1),
                    "past_allowance_mib": round((most - allowed) / 2**20, 1),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floods", type=int, default=3)
    parser.add_argument("--fronts", default=",".join(FRONTS))
    add_checkout(parser)
    args = parser.parse_args()
    cwd = use_checkout(args)
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="partial-flood-") as work:
        root = Path(work)
        testing.iris_logreg(root / "store/iris.joblib")
        rows = [
            row
            for front in args.fronts.split(",")
            for row in front_run(front, args.floods, root, cwd)
        ]
    keys = ["front", "flood", "growth_mib", "past_allowance_mib"]
    header = ["front", "flood", "frontend PSS growth (MiB)", "past its allowance (MiB)"]
    table = markdown_table(header, [[row[k] for k in keys] for row in rows])
    path = write_results("partial_flood", {"commit": args.commit, "floods": rows}, table)
    print(f"{table}\n\nraw results: {path}")


if __name__ == "__main__":
    main()
