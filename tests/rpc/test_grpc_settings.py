"""TorchServe's gRPC keys in config.properties set modelhost's gRPC settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError


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


def test_torchserve_grpc_addresses_set_the_grpc_hosts(tmp_path: Path) -> None:
    """TorchServe binds each gRPC API to its own grpc_*_address, apart from the HTTP ones."""
    text = (
        "inference_address=http://0.0.0.0:8080\n"
        "grpc_inference_address=127.0.0.2\ngrpc_inference_port=7070\n"
        "grpc_management_address=127.0.0.3\ngrpc_management_port=7071\n"
    )
    (tmp_path / "config.properties").write_text(text)
    config = load_config({}, {}, tmp_path)
    assert (config.grpc_host, config.grpc_port) == ("127.0.0.2", 7070)
    assert (config.grpc_management_host, config.grpc_management_port) == ("127.0.0.3", 7071)
    assert config.host == "0.0.0.0" and config.notices == ()


def test_torchserve_grpc_connection_ages_set_the_connection_age(tmp_path: Path) -> None:
    """grpc_inference_max_connection_age_ms, in milliseconds, is --grpc-connection-age-s; the
    management port's and the grace keys are reported with what modelhost does instead."""
    text = (
        "grpc_inference_max_connection_age_ms=90000\n"
        "grpc_management_max_connection_age_ms=60000\n"
        "grpc_inference_max_connection_age_grace_ms=5000\n"
        "grpc_management_max_connection_age_grace_ms=5000\n"
    )
    (tmp_path / "config.properties").write_text(text)
    config = load_config({}, {}, tmp_path)
    assert config.grpc_connection_age_s == 90.0
    management, *graces = config.notices
    assert "--grpc-connection-age-s" in management, management
    assert len(graces) == 2 and all("--drain-timeout-s" in grace for grace in graces), graces


def test_a_grpc_connection_age_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.properties").write_text("grpc_inference_max_connection_age_ms=soon\n")
    with pytest.raises(ConfigError, match="grpc_inference_max_connection_age_ms"):
        load_config({}, {}, tmp_path)


def test_config_check_maps_the_torchserve_grpc_keys(tmp_path: Path) -> None:
    """`modelhost config check config.properties` names the flag each gRPC key sets."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    text = (
        "grpc_inference_address=0.0.0.0\ngrpc_management_address=127.0.0.1\n"
        "grpc_inference_max_connection_age_ms=60000\n"
        "grpc_management_max_connection_age_grace_ms=100\n"
    )
    (tmp_path / "config.properties").write_text(text)
    checked = ["config", "check", str(tmp_path / "config.properties")]
    result = CliRunner().invoke(main, checked, env={"MODELHOST_CONFIG": ""})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    explained = {
        key.split()[-3]: (key.split()[0], why.strip())
        for key, why in zip(lines, lines[1:], strict=False)
        if key.startswith(("maps", "reported", "refused", "unknown"))
    }
    assert explained["grpc_inference_address"] == ("maps", "--grpc-host"), result.output
    assert explained["grpc_management_address"] == ("maps", "--grpc-management-host")
    age = explained["grpc_inference_max_connection_age_ms"]
    assert age == ("maps", "--grpc-connection-age-s"), result.output
    outcome, why = explained["grpc_management_max_connection_age_grace_ms"]
    assert outcome == "reported" and "--drain-timeout-s" in why, result.output
