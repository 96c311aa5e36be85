"""The main port's listening sockets: the main process's alone, or several processes' at once
(`SO_REUSEPORT`)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterable
from typing import Any

from modelhost.errors import ConfigError

BACKLOG = 2048  # uvicorn's


def refusal(host: str, port: int, flag: str, error: BaseException | None, why: str = "") -> str:
    """What stopped a bind of `host:port` (`why`: what it was for), and the setting to change."""
    number = getattr(error, "errno", None)
    reason = os.strerror(number).lower() if number else str(error)
    if number == errno.EADDRNOTAVAIL:
        advice = (
            f"{host} is not an address of this machine: set {flag.replace('port', 'host')} "
            "to one of its addresses, or 0.0.0.0 for all"
        )
    elif number in (errno.EACCES, errno.EPERM):
        advice = f"ports below 1024 need privileges: set {flag} to 1024 or more"
    else:
        advice = f"stop what holds the port or choose another {flag}"
    return f"cannot listen on {host}:{port}{why}: {reason}; {advice}"


def check_unshared(host: str, port: int) -> None:
    """Raise OSError if anything listens on `host:port`: a bind without `SO_REUSEPORT`, which
    another server's fronts would let a bind with it join."""
    for family, kind, proto, _, address in _addresses(host, port):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)


def refuse_taken_ports(ports: Iterable[tuple[str, int, str]]) -> None:
    """Refuse a taken port (host, port, flag) now: the bind comes after the workers start."""
    for host, port, flag in ports:
        try:
            check_unshared(host, port)
        except OSError as error:
            raise ConfigError(refusal(host, port, flag, error)) from None


def _addresses(host: str, port: int) -> list[tuple[Any, ...]]:
    """The addresses to bind ("" or "0.0.0.0": every address), as asyncio binds them."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return list(dict.fromkeys(infos))


def lone_socket(host: str, port: int) -> list[socket.socket]:
    """The main process's listening socket when it has the port alone, bound as uvicorn binds
    it (one address; `::` takes IPv4 too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return [sock]


def reuse_port_sockets(host: str, port: int, listen: bool = True) -> list[socket.socket]:
    """Bound, listening sockets for `host:port` ("" or "0.0.0.0": every address), as asyncio
    binds them, each with `SO_REUSEPORT` so that the kernel spreads connections over them."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in _addresses(host, port):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            if listen:
                sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def unix_listener(path: str) -> socket.socket:
    """A listening Unix socket at `path`, which the fronts connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.ExitStack() as closing:
        closing.callback(sock.close)
        sock.bind(path)
        sock.listen(BACKLOG)
        sock.setblocking(False)
        closing.pop_all()
    return sock


def bound_port(sockets: list[socket.socket]) -> int:
    """The port the sockets hold: the one asked for, or the kernel's pick for port 0."""
    return int(sockets[0].getsockname()[1])
