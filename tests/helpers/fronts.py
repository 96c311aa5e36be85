"""Which process of a server started with `--fronts` holds a connection."""

from __future__ import annotations

import socket
import time

import psutil

from modelhost import testing

ACCEPTED_S = 60.0


def front_pids(server: testing.RunningServer) -> list[int]:
    children = psutil.Process(server.pid).children()
    return [p.pid for p in children if "modelhost.fronts" in " ".join(p.cmdline())]


def accepted_by(sock: socket.socket, pids: list[int]) -> int:
    """The pid of the process that accepted `sock`'s connection, once one has."""
    mine = sock.getsockname()[1]
    deadline = time.monotonic() + ACCEPTED_S
    while time.monotonic() < deadline:
        for pid in pids:
            held = psutil.Process(pid).net_connections("tcp")
            if any(c.raddr and c.raddr.port == mine for c in held):
                return pid
        time.sleep(0.01)
    raise AssertionError("no process accepted the connection")
