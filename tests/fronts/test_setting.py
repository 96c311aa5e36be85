"""`fronts`: 1 unless a flag, the environment or the config file says otherwise; never below 1;
refused with TLS."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError
from modelhost.fronts.listeners import bound_port, reuse_port_sockets
from modelhost.fronts.processes import fronts_for


def test_fronts_come_from_every_layer(tmp_path: Path) -> None:
    assert load_config({}, {}, tmp_path).fronts == 1
    assert load_config({}, {"MODELHOST_FRONTS": "3"}, tmp_path).fronts == 3
    (tmp_path / "modelhost.toml").write_text("fronts = 4\n")
    assert load_config({}, {}, tmp_path).fronts == 4
    assert load_config({"fronts": "2"}, {"MODELHOST_FRONTS": "3"}, tmp_path).fronts == 2


def test_no_fronts_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fronts"):
        load_config({"fronts": "0"}, {}, tmp_path)


def test_one_front_is_the_main_process_alone(tmp_path: Path) -> None:
    assert fronts_for(1, "127.0.0.1", 8080, tmp_path, tls=False) is None
    assert fronts_for(2, "127.0.0.1", 8080, tmp_path, tls=False) is not None


def test_fronts_refuse_tls(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="HTTPS"):
        fronts_for(2, "127.0.0.1", 8080, tmp_path, tls=True)


def test_a_taken_port_is_refused_with_its_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fronts = fronts_for(2, "127.0.0.1", port, tmp_path, tls=False)
        assert fronts is not None
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}"):
            asyncio.run(fronts.start())


def test_a_port_another_servers_fronts_share_is_refused(tmp_path: Path) -> None:
    """SO_REUSEPORT lets any socket of the same user that sets it join a port: a second server
    with fronts must not take half of the first one's connections."""
    taken = reuse_port_sockets("127.0.0.1", 0)
    try:
        port = bound_port(taken)
        fronts = fronts_for(2, "127.0.0.1", port, tmp_path, tls=False)
        assert fronts is not None
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}.*in use"):
            asyncio.run(fronts.start())
    finally:
        for sock in taken:
            sock.close()


def test_fronts_with_tls_are_refused_with_the_settings(tmp_path: Path) -> None:
    """At load, so `modelhost config check` says what the start would, before any worker."""
    with pytest.raises(ConfigError, match="HTTPS"):
        load_config({"fronts": "2", "ssl_certfile": "cert.pem"}, {}, tmp_path)
