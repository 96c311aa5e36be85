"""h2corn's settings from modelhost's: the gRPC port's limits, and TLS from the HTTP servers'
certificate, whose file may hold its key too (h2corn wants both named)."""

from __future__ import annotations

from pathlib import Path

from h2corn import Config as H2Config
from helpers.tls import self_signed

from modelhost.config import load_config
from modelhost.rpc.h2front import settings


def test_the_ports_limits_are_h2corn_s(tmp_path: Path) -> None:
    given = {"grpc_max_streams": 16, "grpc_max_connections": 8, "grpc_connection_idle_s": 30}
    config = load_config(given, {}, tmp_path)
    found = settings(config, header_bytes=4096)
    assert found["max_concurrent_streams"] == 16 and found["limit_connections"] == 8
    assert found["h2_max_header_block_size"] == found["h2_max_header_list_size"] == 4096
    assert found["timeout_keep_alive"] == 30
    assert found["grpc"] and not found["http1"]


def test_a_certificate_file_holding_its_key_serves_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    both = tmp_path / "both.pem"
    both.write_bytes(cert.read_bytes() + key.read_bytes())
    config = load_config({"ssl_certfile": str(both)}, {}, tmp_path)
    h2 = H2Config(bind=("127.0.0.1:0",), **settings(config, header_bytes=4096))
    assert h2.certfile == h2.keyfile == both
