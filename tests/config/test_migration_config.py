"""Migration settings read as MMS, TorchServe and SageMaker users wrote them."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_mms_config_file_variable_wins(tmp_path: Path) -> None:
    """MMS_CONFIG_FILE wins over the flag, as in MMS.

    MMS: MMS_CONFIG_FILE first, then --mms-config, then ./config.properties."""
    by_env = write(tmp_path / "env.properties", "model_store=/from-env\n")
    write(tmp_path / "flag.properties", "model_store=/from-flag\n")
    write(tmp_path / "config.properties", "model_store=/from-cwd\n")
    environ = {"MMS_CONFIG_FILE": str(by_env)}
    assert load_config({"mms_config": "flag.properties"}, environ, tmp_path).model_store == (
        "/from-env"
    )
    assert load_config({"mms_config": "flag.properties"}, {}, tmp_path).model_store == "/from-flag"
    assert load_config({}, {}, tmp_path).model_store == "/from-cwd"


def test_sagemaker_model_server_workers_means_workers_per_model(tmp_path: Path) -> None:
    """sagemaker-inference-toolkit passes it to MMS as default_workers_per_model."""
    config = load_config({}, {"SAGEMAKER_MODEL_SERVER_WORKERS": "2"}, tmp_path)
    assert (config.workers_per_model, config.workers) == (2, 0)


def test_sagemaker_variables_with_no_use_here_are_reported(tmp_path: Path) -> None:
    environ = {"SAGEMAKER_BASE_DIR": "/opt/ml", "SAGEMAKER_CONTAINER_LOG_LEVEL": "20"}
    environ |= {"SAGEMAKER_PROGRAM": "serve.py"}
    base, level, program = load_config({}, environ, tmp_path).notices
    assert base.startswith("SAGEMAKER_BASE_DIR=/opt/ml has no use here")
    assert "MODELHOST_LOG_LEVEL" in level and program.startswith("SAGEMAKER_PROGRAM=serve.py is")


def test_preload_model_notice_says_model_memory_is_not_shared(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "preload_model=true\n")
    (notice,) = load_config({}, {}, tmp_path).notices
    assert "not shared" in notice and "libraries" in notice
    assert "always on" not in notice


@pytest.mark.parametrize(
    "environ",
    [{"SAGEMAKER_MULTI_MODEL": "false"}, {"MODELHOST_MULTI_MODEL": "false"}],
)
def test_single_model_mode_needs_a_model(tmp_path: Path, environ: dict[str, str]) -> None:
    """Single-model mode without a model is refused naming what to use."""
    with pytest.raises(ConfigError, match="--single-model"):
        load_config({}, environ, tmp_path)
    assert load_config({}, {"SAGEMAKER_MULTI_MODEL": "true"}, tmp_path).multi_model
    one = load_config({}, {**environ, "MODELHOST_SINGLE_MODEL": "model"}, tmp_path)
    assert (one.multi_model, one.single_model) == (False, "model")


@pytest.mark.parametrize(
    ("variable", "value"), [("MODELHOST_ADMISSION", "tinylfu"), ("MODELHOST_MIN_RESIDENCY_S", "5")]
)
def test_eviction_settings_are_refused_under_the_sagemaker_contract(
    variable: str, value: str, tmp_path: Path
) -> None:
    """Under the contract no load evicts, so what chooses or delays a victim would do nothing."""
    contract = {"MODELHOST_SAGEMAKER_CONTRACT": "true", variable: value}
    with pytest.raises(ConfigError, match="sagemaker_contract"):
        load_config({}, contract, tmp_path)
    assert load_config({}, {variable: value}, tmp_path)


def test_torchserve_tls_keys_map_to_the_ssl_settings(tmp_path: Path) -> None:
    text = "certificate_file=/tls/cert.pem\nprivate_key_file=/tls/key.pem\n"
    write(tmp_path / "config.properties", text)
    config = load_config({}, {}, tmp_path)
    assert (config.ssl_certfile, config.ssl_keyfile) == ("/tls/cert.pem", "/tls/key.pem")
    assert config.notices == ()


def test_metrics_address_opens_a_metrics_port(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "metrics_address=http://0.0.0.0:8082\n")
    config = load_config({}, {}, tmp_path)
    assert (config.metrics_host, config.metrics_port) == ("0.0.0.0", 8082)


def test_management_address_binds_the_management_api(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "management_address=http://127.0.0.2:8091\n")
    config = load_config({}, {}, tmp_path)
    assert (config.management_host, config.management_port) == ("127.0.0.2", 8091)
    assert config.notices == ()


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("keystore", "certificate_file"),
        ("keystore_pass", "private_key_file"),
    ],
)
def test_properties_keys_that_would_change_behaviour_are_refused(
    tmp_path: Path, key: str, instead: str
) -> None:
    write(tmp_path / "config.properties", f"{key}=x\n")
    with pytest.raises(ConfigError, match=f"'{key}'.*{instead}"):
        load_config({}, {}, tmp_path)


def test_started_as_mms_answers_describe_as_mms(tmp_path: Path) -> None:
    """MMS_CONFIG_FILE is MMS's (and the SageMaker toolkit's) variable: its management API."""
    properties = write(tmp_path / "mms.properties", "default_workers_per_model=1\n")
    as_mms = load_config({}, {"MMS_CONFIG_FILE": str(properties)}, tmp_path)
    as_torchserve = load_config({}, {"TS_CONFIG_FILE": str(properties)}, tmp_path)
    chosen = load_config(
        {"management_api": "torchserve"}, {"MMS_CONFIG_FILE": str(properties)}, tmp_path
    )
    assert (as_mms.management_api, as_torchserve.management_api) == ("mms", "torchserve")
    assert chosen.management_api == "torchserve"


@pytest.mark.parametrize(
    ("mode", "named"), [("prometheus", True), ("log", False), ("legacy", False)]
)
def test_metrics_mode_prometheus_asks_for_torchserve_names(
    tmp_path: Path, mode: str, named: bool
) -> None:
    """TorchServe serves its Prometheus series only in prometheus mode; so does modelhost."""
    write(tmp_path / "config.properties", f"metrics_mode={mode}\n")
    config = load_config({}, {}, tmp_path)
    assert config.torchserve_metrics is named
    assert not [notice for notice in config.notices if "metrics_mode" in notice]


@pytest.mark.parametrize(
    ("properties", "environ", "on"),
    [
        ("", {}, True),  # TorchServe 0.11's default
        ("disable_token_authorization=true\n", {}, False),
        ("disable_token_authorization=false\n", {}, True),
        ("enable_token_authorization=false\n", {}, False),  # TorchServe 0.10's switch
        ("", {"MODELHOST_TOKEN_AUTH": "false"}, False),
        ("enable_envvars_config=true\n", {"TS_DISABLE_TOKEN_AUTHORIZATION": "true"}, False),
    ],
)
def test_token_authorization_is_on_as_torchserve_turns_it_on(
    tmp_path: Path, properties: str, environ: dict[str, str], on: bool
) -> None:
    """A TorchServe config.properties turns token authorization on unless it says otherwise."""
    path = write(tmp_path / "ts.properties", "model_store=/s\n" + properties)
    config = load_config({}, {"TS_CONFIG_FILE": str(path), **environ}, tmp_path)
    assert config.token_auth is on
    assert not [notice for notice in config.notices if "_token_authorization'" in notice]


def test_token_authorization_stays_off_without_torchserve(tmp_path: Path) -> None:
    """modelhost's own default, and MMS's (which had no tokens), keep it off."""
    assert load_config({}, {}, tmp_path).token_auth is False
    path = write(tmp_path / "mms.properties", "model_store=/s\n")
    assert load_config({}, {"MMS_CONFIG_FILE": str(path)}, tmp_path).token_auth is False
    assert load_config({"token_auth": True}, {}, tmp_path).token_auth is True


def test_token_expiration_min_maps(tmp_path: Path) -> None:
    """TorchServe's `token_expiration_min` sets how long a management or inference key lasts."""
    path = write(tmp_path / "ts.properties", "token_expiration_min=30\n")
    assert load_config({}, {"TS_CONFIG_FILE": str(path)}, tmp_path).token_expiration_min == 30


@pytest.mark.parametrize(
    "other",
    [
        {"management_token": "t"},
        {"tenant_from": "token", "tenant_tokens_file": "tokens.toml"},
        {"tenant_from": "Token", "tenant_tokens_file": "tokens.toml"},
    ],
)
def test_token_auth_refuses_other_bearer_tokens(tmp_path: Path, other: dict[str, str]) -> None:
    """A bearer token cannot be both a TorchServe key and the management or a tenant's token."""
    write(tmp_path / "tokens.toml", '[tokens]\n"s3cret" = "t1"\n')
    with pytest.raises(ConfigError, match="--no-token-auth"):
        load_config({"token_auth": True, **other}, {}, tmp_path)


def test_a_model_snapshot_turns_restore_registered_on(tmp_path: Path) -> None:
    """A snapshot .cfg given as the config restores its models, and what is registered later."""
    path = write(tmp_path / "snap.cfg", 'model_snapshot={"models": {}}\n')
    config = load_config({}, {"TS_CONFIG_FILE": str(path)}, tmp_path)
    assert (config.restore_registered, config.model_snapshot) == (True, '{"models": {}}')
    assert load_config({}, {}, tmp_path).restore_registered is False
