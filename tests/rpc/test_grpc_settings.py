"""TorchServe's gRPC keys in config.properties set modelhost's gRPC settings."""

from __future__ import annotations

from pathlib import Path

from modelhost.config import load_config


def test_torchserve_grpc_inference_port_sets_the_grpc_port(tmp_path: Path) -> None:
    (tmp_path / "config.properties").write_text("grpc_inference_port=7070\n")
    config = load_config({}, {}, tmp_path)
    assert config.grpc_port == 7070
    assert config.notices == ()


def test_grpc_is_off_unless_a_port_is_given(tmp_path: Path) -> None:
    assert load_config({}, {}, tmp_path).grpc_port == 0


def test_enable_grpc_ssl_is_reported_as_following_the_certificate(tmp_path: Path) -> None:
    (tmp_path / "config.properties").write_text("enable_grpc_ssl=true\n")
    (notice,) = load_config({}, {}, tmp_path).notices
    assert "certificate_file" in notice
