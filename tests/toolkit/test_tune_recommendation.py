"""tune's recommendation is in the forms the server takes: a `modelhost serve` line and the
lines of a modelhost.toml, each pasted as printed."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from click.core import ParameterSource

from modelhost.cli.serve import serve
from modelhost.config import Config, load_config
from modelhost.toolkit.ramp import Point, step_of
from modelhost.toolkit.report.tune import verdict
from modelhost.toolkit.tune import TuneOptions, tune_summary

SETTINGS = {"workers": "2", "memory-budget": "1GiB"}


def recommended(store: Path) -> dict[str, Any]:
    options = TuneOptions(
        model_store=str(store),
        grid=("workers=1,2", "memory-budget=1GiB"),
        serve_args=("--eviction-policy=lru", "--batch-size", "4"),
    )
    figures = {
        "requests": {"measured": 10, "ok": 10, "errors": {}},
        "throughput_rps": 100.0,
        "latency_ms": {"p50": 2.0, "p95": 4.0, "p99": 5.0},
    }
    step = step_of(SETTINGS, 4, figures, 50)
    return tune_summary(options, [Point(SETTINGS, {}, [step])])


def serve_config(args: list[str], cwd: Path) -> Config:
    """What `modelhost serve ARGS` would start with."""
    ctx = serve.make_context("serve", args)
    given = {
        name: value
        for name, value in ctx.params.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    return load_config(given, environ={}, cwd=cwd)


def test_the_verdict_prints_a_serve_command_that_serve_takes(tmp_path: Path) -> None:
    """A user pastes the printed line: it has the store, the fixed --serve-arg flags and the
    recommended point's settings."""
    text = verdict(recommended(tmp_path))
    lines = [line.strip() for line in text.splitlines()]
    command = next(line for line in lines if line.startswith("modelhost serve "))
    config = serve_config(shlex.split(command)[2:], tmp_path)
    assert config.model_store == str(tmp_path)
    assert (config.workers, config.memory_budget) == (2, "1GiB")
    assert (config.eviction_policy, config.batch_size) == ("lru", 4)


def test_the_recommendation_is_a_modelhost_toml_too(tmp_path: Path) -> None:
    summary = recommended(tmp_path)
    assert summary["recommended_toml"] in verdict(summary)
    (tmp_path / "modelhost.toml").write_text(summary["recommended_toml"])
    config = load_config({}, environ={}, cwd=tmp_path)
    assert (config.workers, config.memory_budget) == (2, "1GiB")
    assert (config.eviction_policy, config.batch_size) == ("lru", 4)
    assert config.model_store == str(tmp_path)


def test_a_grid_the_server_refuses_is_a_usage_error(tmp_path: Path) -> None:
    """`--grid worker=1` (for workers) ended in a RuntimeError traceback; the server's own
    refusal, with its "did you mean", is what the user needs."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    args = ["tune", "--model-store", str(tmp_path), "--models", "a", "--grid", "worker=1"]
    result = CliRunner().invoke(main, [*args, "--duration", "0.1", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "worker=1" in result.output and "Did you mean '--workers'?" in result.output


def test_tune_without_models_is_refused_before_serving(tmp_path: Path) -> None:
    """Without --models every request went to the server's root: each step all errors, and
    "No point held p99 under 100 ms without errors" the only word on why."""
    with pytest.raises(ValueError, match="give --models"):
        TuneOptions(model_store=str(tmp_path)).target()


def test_no_recommendation_says_what_the_server_answered() -> None:
    """Every request of a model the store lacks was a 404; the verdict said only "No point held
    p99 under 100 ms without errors"."""
    figures = {
        "requests": {
            "measured": 9,
            "ok": 0,
            "errors": {"HTTP 404": 9},
            "error_examples": {"HTTP 404": {"model": "t/b.joblib", "message": "no model t/b"}},
            "by_status": {"404": 9},
        },
        "throughput_rps": 0.0,
        "latency_ms": {"p50": float("nan"), "p95": float("nan"), "p99": float("nan")},
    }
    step = step_of({"workers": "1"}, 1, figures, 50)
    summary = tune_summary(TuneOptions(model_store="s"), [Point({"workers": "1"}, {}, [step])])
    said = verdict(summary)
    assert "9 errors" in said and "HTTP 404" in said and "t/b.joblib" in said
    assert "no model t/b" in said


def test_memory_modes_cost_says_it_is_the_memory_alone() -> None:
    """Memory mode prices only the budget's GiB-hours; its verdict read like an instance's
    whole cost per million."""
    figures = {
        "requests": {"measured": 10, "ok": 10, "errors": {}},
        "throughput_rps": 100.0,
        "latency_ms": {"p50": 2.0, "p95": 4.0, "p99": 5.0},
    }
    settings = {"memory-budget": "1GiB"}
    step = step_of(settings, 1, figures, 50)
    options = TuneOptions(
        model_store="s", mode="memory", grid=("memory-budget=1GiB",), price_per_gb_hour=0.0125
    )
    said = verdict(tune_summary(options, [Point(settings, {}, [step])]))
    assert "memory alone" in said and "--price-per-gb-hour" in said


CONCURRENCY = {"mode": "concurrency", "grid": ("max-concurrency=4",)}
MEMORY = {"mode": "memory", "grid": ("memory-budget=1GiB",), "price_per_gb_hour": 0.1}


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"price_per_gb_hour": 0.0125}, "--price-per-gb-hour"),
        ({"multipliers": "1,2"}, "--multipliers"),
        ({"limit_flag": "workers"}, "--limit-flag"),
        ({**CONCURRENCY, "concurrency": "1,8"}, "--concurrency"),
        ({**MEMORY, "instance_price": 0.3}, "--instance-price"),
    ],
)
def test_a_flag_the_mode_does_not_use_is_refused(given: dict[str, Any], named: str) -> None:
    """tune --price-per-gb-hour 0.0125 without --mode memory ran grid mode and priced the
    instance at the example price: the flag changed nothing, silently."""
    options = TuneOptions(model_store="s", models="a", **given)
    with pytest.raises(ValueError, match=f"{named}.*--mode"):
        options.target()
