"""`modelhost serve`: flags generated from the config tree, and errors before any server starts."""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelhost.cli.main import main
from modelhost.config import Config


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No config files or variables from the machine running the tests."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("MODELHOST_", "SAGEMAKER_", "MMS_", "TS_")):
            monkeypatch.delenv(name)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Config]:
    """Stand in for modelhost.launch: record the config each run would serve with."""
    configs: list[Config] = []

    def run_server(config: Config) -> int:
        configs.append(config)
        return 3

    fake_app = types.ModuleType("modelhost.launch")
    fake_app.serve = run_server  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "modelhost.launch", fake_app)
    return configs


def test_serve_help_lists_every_setting() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for f in dataclasses.fields(Config):
        if f.init and f.name not in ("notices", "preload_runtimes_given"):
            assert "--" + f.name.replace("_", "-") in result.output
    assert "--config" in result.output and "--mms-config" in result.output
    assert "--no-multi-model" in result.output


def test_bad_size_exits_2_before_serving(served: list[Config]) -> None:
    result = CliRunner().invoke(main, ["serve", "--memory-budget", "12 parsecs"])
    assert result.exit_code == 2
    assert "error: --memory-budget: expected a size" in result.output
    assert served == []


def test_unknown_variable_exits_2(served: list[Config]) -> None:
    result = CliRunner().invoke(main, ["serve"], env={"MODELHOST_PROT": "1"})
    assert result.exit_code == 2
    assert "MODELHOST_PROT" in result.output and served == []


def test_only_given_flags_override_the_environment(served: list[Config]) -> None:
    env = {"MODELHOST_PORT": "7000", "MODELHOST_WORKERS": "4", "MODELHOST_MULTI_MODEL": "false"}
    env |= {"MODELHOST_SINGLE_MODEL": "m"}
    args = ["serve", "--port", "9000", "--load-models", "a,b"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 3  # the server's exit code
    (config,) = served
    assert (config.port, config.workers, config.multi_model) == (9000, 4, False)
    assert config.load_models == ("a", "b")


def test_bool_flag_and_config_file(tmp_path: Path, served: list[Config]) -> None:
    (tmp_path / "other.toml").write_text("multi_model = false\nport = 1234\n")
    args = ["serve", "--config", "other.toml", "--multi-model"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    assert (served[0].multi_model, served[0].port) == (True, 1234)
