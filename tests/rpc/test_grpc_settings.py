"""TorchServe's gRPC keys in config.properties set modelhost's gRPC settings."""

from __future__ import annotations

from pathlib import Path

from modelhost.config import load_config


def test_torchserve_grpc_ports_set_the_grpc_ports(tmp_path: Path) -> None:
    text = "grpc_inference_port=7070\ngrpc_management_port=7071\n"
    (tmp_path / "config.properties").write_text(text)
    config = load_config({}, {}, tmp_path)
    assert (config.grpc_port, config.grpc_management_port) == (7070, 7071)
    assert config.notices == ()


def test_grpc_is_off_unless_a_port_is_given(tmp_path: Path) -> None:
    config = load_config({}, {}, tmp_path)
    assert (config.grpc_port, config.grpc_management_port) == (0, 0)


def test_enable_grpc_ssl_is_reported_as_following_the_certificate(tmp_path: Path) -> None:
    (tmp_path / "config.properties").write_text("enable_grpc_ssl=true\n")
    (notice,) = load_config({}, {}, tmp_path).notices
    assert "certificate_file" in notice
