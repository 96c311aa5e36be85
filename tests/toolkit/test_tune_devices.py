"""tune on a server with devices: workers per device and the device's batch size are searched
beside the grid given, unless the grid names them; without devices the grid is as given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.devices import sized_torch

from modelhost.cli.main import main
from modelhost.toolkit.tune import DEVICE_KNOBS, TuneOptions, points


def searched(*serve_args: str, grid: tuple[str, ...] = ("workers=2",)) -> list[dict[str, str]]:
    return points(TuneOptions(model_store="s", serve_args=serve_args, grid=grid))


@pytest.mark.parametrize(
    "serve_args",
    [("--fake-devices=2x1GiB",), ("--fake-devices", "2x1GiB"), ("--devices=cuda:0,cuda:1",)],
)
def test_a_server_with_devices_searches_workers_per_device_and_device_batch_size(
    serve_args: tuple[str, ...],
) -> None:
    settings = searched(*serve_args)
    expected = {
        ("2", workers, size)
        for workers in DEVICE_KNOBS["workers-per-device"]
        for size in DEVICE_KNOBS["device-batch-size"]
    }
    got = {(s["workers"], s["workers-per-device"], s["device-batch-size"]) for s in settings}
    assert got == expected and len(settings) == len(expected)


def test_a_grid_naming_a_device_knob_keeps_its_values() -> None:
    settings = searched("--fake-devices=1x1GiB", grid=("workers-per-device=3",))
    assert {s["workers-per-device"] for s in settings} == {"3"}
    assert {s["device-batch-size"] for s in settings} == set(DEVICE_KNOBS["device-batch-size"])


def test_devices_in_the_grid_count_as_devices() -> None:
    settings = searched(grid=("fake-devices=1x1GiB",))
    assert all("workers-per-device" in s for s in settings)


@pytest.mark.parametrize("serve_args", [(), ("--devices=none",), ("--devices", "none")])
def test_without_devices_the_grid_is_as_given(serve_args: tuple[str, ...]) -> None:
    assert searched(*serve_args) == [{"workers": "2"}]


def test_memory_and_concurrency_modes_search_only_their_grid() -> None:
    options = TuneOptions(
        model_store="s",
        mode="memory",
        serve_args=("--fake-devices=1x1GiB",),
        grid=("memory-budget=1GiB",),
    )
    assert points(options) == [{"memory-budget": "1GiB"}]


@pytest.mark.e2e
def test_tune_serves_each_device_knob_and_reports_it(tmp_path: Path) -> None:
    sized_torch(tmp_path / "store" / "m.pt", 2**20)
    args = [
        "tune", "--model-store", str(tmp_path / "store"), "--models", "m.pt",
        "--duration", "0.5", "--warmup", "0.2", "--p99-limit-ms", "10000", "--concurrency", "4",
        "--serve-arg=--fake-devices=1x64MiB+2MiB", "--serve-arg=--preload-runtimes=torch",
        "--grid", "workers=2", "--grid", "device-batch-size=2", "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert summary["settings"] == ["workers-per-device", "device-batch-size", "workers"]
    assert [p["settings"]["workers-per-device"] for p in summary["points"]] == ["1", "2"]
    assert all(p["cold_start"]["status"] == 200 for p in summary["points"])
    assert all(s["throughput_rps"] > 0 and s["device-batch-size"] == "2" for s in summary["steps"])
