"""The configuration files MMS's, TorchServe's and sagemaker-inference-toolkit's own repositories
ship, read as they are: each key maps, is reported with its reason, or is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import load_config, properties_keys
from modelhost.errors import ConfigError

FILES = Path(__file__).parent / "files"  # each file's first line says where it comes from
TORCHSERVE_DOCKER = (FILES / "torchserve-docker.properties").read_text(encoding="utf-8")
MMS_DOCKER = (FILES / "mms-docker.properties").read_text(encoding="utf-8")
SAGEMAKER_MME = (FILES / "sagemaker-mme.properties").read_text(encoding="utf-8")
# the variables SageMaker and the toolkit set in a multi-model container
SAGEMAKER_MME_ENV = {
    "SAGEMAKER_MULTI_MODEL": "true",
    "SAGEMAKER_BIND_TO_PORT": "8080",
    "SAGEMAKER_SAFE_PORT_RANGE": "10000-10999",
    "SAGEMAKER_HANDLER": "sagemaker_inference.default_handler_service",
    "SAGEMAKER_MODEL_SERVER_WORKERS": "2",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "60",
}


def read(tmp_path: Path, text: str, environ: dict[str, str] | None = None):  # noqa: ANN201
    (tmp_path / "config.properties").write_text(text, encoding="utf-8")
    return load_config({}, environ or {}, tmp_path)


def test_torchserve_docker_config(tmp_path: Path) -> None:
    config = read(tmp_path, TORCHSERVE_DOCKER)
    assert (config.host, config.port, config.management_port, config.metrics_port) == (
        "0.0.0.0",
        8080,
        8081,
        8082,
    )
    assert (config.job_queue_size, config.model_store) == (1000, "/home/model-server/model-store")
    (netty,) = config.notices
    assert "'number_of_netty_threads'" in netty and "Java" in netty


def test_mms_docker_config_with_every_documented_key(tmp_path: Path) -> None:
    config = read(tmp_path, MMS_DOCKER)
    assert config.workers_per_model == 0  # MMS's 0: as many as there are workers
    assert (config.default_response_timeout_s, config.load_models) == (120.0, ("ALL",))
    keys = [notice.split("'")[1] for notice in config.notices]
    expected = {"vmargs", "preload_model", "number_of_netty_threads", "netty_client_threads"}
    expected |= {"async_logging", "number_of_gpu", "blacklist_env_vars", "decode_input_request"}
    assert set(keys) == expected | {"enable_envvars_config"}
    assert all("has no meaning in modelhost" not in notice for notice in config.notices)


def test_sagemaker_multi_model_container(tmp_path: Path) -> None:
    config = read(tmp_path, SAGEMAKER_MME, SAGEMAKER_MME_ENV)
    assert (config.port, config.management_port, config.multi_model) == (8080, 8080, True)
    assert (config.workers_per_model, config.default_response_timeout_s) == (2, 60.0)
    handler = [n for n in config.notices if "'default_service_handler'" in n]
    assert handler and "inference.py" in handler[0]
    reported = {notice.split("=")[0] for notice in config.notices}
    assert {"SAGEMAKER_SAFE_PORT_RANGE", "SAGEMAKER_HANDLER"} <= reported


def test_an_unset_variable_in_a_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"SAGEMAKER_BIND_TO_PORT.*not set"):
        read(tmp_path, "inference_address=http://0.0.0.0:$$SAGEMAKER_BIND_TO_PORT$$\n")


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("allowed_urls", "--allowed-urls"),
        ("models", "manifest"),
        ("install_py_dep_per_model", "image"),
        ("cors_allowed_origin", "proxy"),
    ],
)
def test_documented_keys_that_change_behaviour_are_refused(
    tmp_path: Path, key: str, instead: str
) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'.*{instead}"):
        read(tmp_path, f"{key}=x\n")
    assert properties_keys()[key] == "refused"


def test_install_py_dep_per_model_false_is_reported(tmp_path: Path) -> None:
    """TorchServe's documented default, `install_py_dep_per_model=false`, asks for what
    modelhost does: the server starts and says so; `true` is still refused."""
    config = read(tmp_path, "install_py_dep_per_model=false\n")
    (notice,) = [n for n in config.notices if "'install_py_dep_per_model" in n]
    assert "requirements" in notice, notice
    with pytest.raises(ConfigError, match="'install_py_dep_per_model'.*image"):
        read(tmp_path, "install_py_dep_per_model=true\n")


def test_default_startup_timeout_sets_the_load_timeout(tmp_path: Path) -> None:
    """TorchServe's `default_startup_timeout` (seconds a worker may take to load its model) is
    modelhost's --worker-load-timeout-s, not a key ignored at start."""
    config = read(tmp_path, "default_startup_timeout=45\n")
    assert config.worker_load_timeout_s == 45.0
    assert not [n for n in config.notices if "default_startup_timeout" in n]


def test_number_of_gpu_is_reported_with_the_devices_setting(tmp_path: Path) -> None:
    """modelhost does use GPUs: number_of_gpu's notice says how to choose them, not "CPU"."""
    config = read(tmp_path, "number_of_gpu=0\n")
    (notice,) = [n for n in config.notices if "'number_of_gpu'" in n]
    assert "--devices none" in notice and "CPU" in notice, notice


def test_config_check_explains_each_key(
    tmp_path: Path,
) -> None:
    """Config check explains each key and says whether the server would start."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    (tmp_path / "ok.properties").write_text(MMS_DOCKER, encoding="utf-8")
    environ = {"SAGEMAKER_MODEL_SERVER_WORKERS": "2", "MODELHOST_CONFIG": ""}
    result = CliRunner().invoke(
        main, ["config", "check", str(tmp_path / "ok.properties")], env=environ
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(
        line.startswith("maps") and "default_workers_per_model = 0" in line for line in lines
    )
    assert any(line.startswith("reported") and "vmargs" in line for line in lines)
    assert any(
        line.startswith("maps") and "SAGEMAKER_MODEL_SERVER_WORKERS = 2" in line for line in lines
    )
    assert lines[-1] == "the server would start with these settings"
    (tmp_path / "bad.properties").write_text("keystore=ks.p12\nmodel_store=/m\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "check", str(tmp_path / "bad.properties")])
    assert result.exit_code == 1
    assert any(
        line.startswith("refused") and "keystore" in line for line in result.output.splitlines()
    )
    assert "the server would not start" in result.output and "certificate_file" in result.output


def test_config_check_reads_a_modelhost_toml_as_modelhost_settings(tmp_path: Path) -> None:
    """A modelhost.toml's keys are settings, not a config.properties' unknown keys, and its
    tenants file is read as the server would."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    (tmp_path / "tenants.toml").write_text("[default]\nweight = 2\n", encoding="utf-8")
    settings = tmp_path / "settings.toml"
    settings.write_text(
        f'tenant_from = "name:1"\ntenants_file = "{tmp_path / "tenants.toml"}"\n', encoding="utf-8"
    )
    result = CliRunner().invoke(main, ["config", "check", str(settings)], env={})
    assert result.exit_code == 0, result.output
    assert "unknown" not in result.output
    assert any(
        line.startswith("setting") and "tenant_from" in line for line in result.output.splitlines()
    )
    assert result.output.splitlines()[-1] == "the server would start with these settings"
    (tmp_path / "tenants.toml").write_text("[default]\nweight = -1\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "check", str(settings)], env={})
    assert result.exit_code == 1 and "line 2: weight = -1" in result.output


def test_config_check_names_no_flag_for_a_toml_key_that_is_no_setting(tmp_path: Path) -> None:
    """A misspelt key is said to be unknown, with the setting meant, not shown as a flag."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    settings = tmp_path / "modelhost.toml"
    settings.write_text('memory_budgt = "1GiB"\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "check", str(settings)], env={})
    assert result.exit_code == 1, result.output
    assert "--memory-budgt" not in result.output
    assert any(
        line.startswith("unknown") and "memory_budgt" in line for line in result.output.splitlines()
    )
    assert "did you mean memory_budget?" in result.output


def test_config_check_without_a_file_checks_the_one_serve_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without FILE, the check reads what `serve` would: TS_CONFIG_FILE (or MMS_CONFIG_FILE),
    else ./config.properties; its verdict is the server's."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.properties").write_text("max_request_size=abc\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "check"], env={"TS_CONFIG_FILE": "bad.properties"})
    assert result.exit_code == 1, result.output
    assert "max_request_size = abc" in result.output and "would not start" in result.output
    result = CliRunner().invoke(
        main, ["config", "check"], env={"MMS_CONFIG_FILE": "gone.properties"}
    )
    assert result.exit_code == 1 and "no such file" in result.output, result.output
    (tmp_path / "config.properties").write_text(MMS_DOCKER, encoding="utf-8")
    result = CliRunner().invoke(main, ["config", "check"], env={"MODELHOST_CONFIG": ""})
    assert result.exit_code == 0, result.output
    assert any(
        line.startswith("reported") and "vmargs" in line for line in result.output.splitlines()
    )


def test_config_check_shows_no_secret_setting(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from modelhost.cli.main import main

    path = tmp_path / "modelhost.toml"
    path.write_text('management_token = "s3cret-mgmt"\nworkers = 2\n')
    result = CliRunner().invoke(main, ["config", "check", str(path)], env={})
    assert "s3cret" not in result.output and "workers = 2" in result.output, result.output
