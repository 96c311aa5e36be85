"""tune's cold start against a real server: the first model's own payload, as bench sends it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.toolkit import MODELS

from modelhost import testing
from modelhost.cli.main import main

pytestmark = pytest.mark.e2e


def test_the_cold_start_sends_the_models_own_payload(store: Path, tmp_path: Path) -> None:
    """With payloads for several models (the example store's payloads.jsonl), the cold start
    sent the file's first line whatever its model: a 400 timed as the cold start."""
    payloads = tmp_path / "payloads.jsonl"
    lines = [
        {"TargetModel": MODELS[1], "Body": "not an iris row"},
        {"TargetModel": MODELS[0], "Body": testing.iris_rows(1)},
    ]
    payloads.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["tune", "--model-store", str(store), "--models", MODELS[0], "--payloads", str(payloads)]
    quick = ["--concurrency", "1", "--duration", "0.3", "--warmup", "0", "--p99-limit-ms", "10000"]
    result = CliRunner().invoke(main, [*args, *quick, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert summary["points"][0]["cold_start"]["status"] == 200


def test_tune_beside_a_torchserve_config_properties(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TorchServe user runs `modelhost tune` in the folder of their config.properties: each
    of tune's servers read it as `serve` does, so TorchServe's token authorization answered
    every request 401, and its management_address clashed with the deployment holding it.
    tune's servers read no config.properties unless --serve-arg names one, and want no key."""
    with socket.create_server(("127.0.0.1", 0)) as deployment:  # TorchServe's, on its port
        port = deployment.getsockname()[1]
        (tmp_path / "config.properties").write_text(
            f"management_address=http://127.0.0.1:{port}\nmodel_store={store}\n"
        )
        monkeypatch.chdir(tmp_path)
        args = ["tune", "--model-store", str(store), "--models", MODELS[0]]
        quick = ["--concurrency", "1", "--duration", "0.3", "--warmup", "0"]
        result = CliRunner().invoke(main, [*args, *quick, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert summary["points"][0]["cold_start"]["status"] == 200, summary["points"]
    assert [step["errors"] for step in summary["steps"]] == [0], summary["steps"]
