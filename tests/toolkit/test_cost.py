"""cost's figures, checked by hand on a worked example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelhost.cli.main import main
from modelhost.toolkit.cost import Instance, Serverless, break_even, savings_table

# $0.115 an hour at 100 req/s: 360,000 requests an hour, so $0.115 / 0.36 = $0.3194 a million.
# Serverless at $0.00002 per GB-s, 1 GB, 50 ms: $1e-6 a request; 2,000 bytes at $0.016 a GB:
# $3.2e-8; so $1.032 a million. One instance a month: 0.115 × 730 = $83.95, which buys
# 83.95 / 1.032e-6 = 81,346,899 serverless requests: the break-even.
INSTANCE = Instance(price_per_hour=0.115, throughput_rps=100)
SERVERLESS = Serverless(
    gb_second=0.00002, memory_gb=1, latency_ms=50, data_per_gb=0.016, bytes_per_request=2000
)


def test_per_million_and_break_even_by_hand() -> None:
    assert INSTANCE.per_million() == pytest.approx(0.31944, rel=1e-4)
    assert SERVERLESS.per_million() == pytest.approx(1.032, rel=1e-9)
    assert break_even(INSTANCE, SERVERLESS) == pytest.approx(83.95 / 1.032e-6, rel=1e-9)


def test_savings_table_by_hand() -> None:
    low, high, beyond = savings_table(INSTANCE, SERVERLESS, [1e6, 1e8, 3e8])
    assert (low["cheaper"], low["saving_monthly"]) == ("serverless", pytest.approx(83.95 - 1.032))
    assert (high["cheaper"], high["saving_monthly"]) == ("instance", pytest.approx(103.2 - 83.95))
    # one instance answers 100 × 3600 × 730 = 262.8 M a month: 300 M needs two
    assert beyond["instances"] == 2
    assert beyond["instance_monthly"] == pytest.approx(2 * 83.95)


def test_the_command_reads_a_summary_and_labels_example_prices(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"throughput_rps": 100, "latency_ms": {"p50": 50}}))
    result = CliRunner().invoke(
        main, ["cost", "--from", str(summary), "--memory-gb", "1", "--out", str(tmp_path / "cost")]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "cost" / "cost.json").read_text())
    assert figures["instance"]["per_million"] == pytest.approx(0.31944, rel=1e-4)
    assert figures["serverless"]["per_million"] == pytest.approx(1.0, rel=1e-9)
    assert "example" in figures["prices_source"] and "2024" in figures["prices_source"]


def test_help_needs_no_toolkit_extra() -> None:
    """`cost --help` says the options even where rich is not installed, as `bench --help` does."""
    probe = (
        "import sys; sys.modules['rich'] = None; from modelhost.cli.main import main; "
        "main(['cost', '--help'])"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert "--throughput" in found.stdout


def test_no_break_even_where_an_instance_costs_more_a_request(tmp_path: Path) -> None:
    """Serverless at $0.2 a million beats an instance at $0.32 a million at every volume: one
    instance cannot answer the 420 M a month its price buys, so no volume breaks even."""
    cheap = Serverless(gb_second=0.00002, memory_gb=1, latency_ms=10)
    assert break_even(INSTANCE, cheap) is None
    volumes = [1e6, 1e8, 4.2e8, 1e9, 1e10]
    assert {row["cheaper"] for row in savings_table(INSTANCE, cheap, volumes)} == {"serverless"}
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"throughput_rps": 100, "latency_ms": {"p50": 10}}))
    result = CliRunner().invoke(
        main, ["cost", "--from", str(summary), "--memory-gb", "1", "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "no break-even" in result.output
    assert (
        json.loads((tmp_path / "c" / "cost.json").read_text())["break_even_monthly_requests"]
        is None
    )


def test_cost_from_a_tune_json_takes_its_bytes_per_request(tmp_path: Path) -> None:
    """tune.json's recommendation carries bench's bytes per request, for cost --from."""
    from modelhost.toolkit.cost import measured
    from modelhost.toolkit.ramp import Point, step_of
    from modelhost.toolkit.tune import TuneOptions, tune_summary

    figures = {
        "requests": {"measured": 10, "ok": 10, "errors": {}},
        "throughput_rps": 100.0,
        "latency_ms": {"p50": 2.0, "p95": 4.0, "p99": 5.0},
        "bytes_per_request": 2000.0,
    }
    step = step_of({"workers": "1"}, 1, figures, 50)
    summary = tune_summary(TuneOptions(model_store="s"), [Point({"workers": "1"}, {}, [step])])
    (tmp_path / "tune.json").write_text(json.dumps(summary))
    assert measured(tmp_path / "tune.json")["bytes_per_request"] == 2000.0


def test_serverless_bills_the_mean_duration_not_the_median(tmp_path: Path) -> None:
    """A month's bill is the sum of every request's duration: N × the mean. The median leaves
    out the slow tail (cold starts, queueing) that a skewed run has: here 2 ms against 10."""
    summary = {"throughput_rps": 100.0, "latency_ms": {"p50": 2.0, "mean": 10.0, "p99": 300.0}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "cost"
    result = CliRunner().invoke(main, ["cost", "--from", str(tmp_path / "summary.json"),
                                       "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((out / "cost.json").read_text())["serverless"]["latency_ms"] == 10.0


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--utilization", "0"], "--utilization"),
        (["--utilization", "1.5"], "--utilization"),
        (["--throughput", "-5"], "--throughput"),
        (["--latency-ms", "-1"], "--latency-ms"),
        (["--memory-gb", "0"], "--memory-gb"),
        (["--volumes", "1e6,-5"], "--volumes"),
        (["--instance-price", "-0.1"], "--instance-price"),
        (["--gb-second-price", "-1"], "--gb-second-price"),
        (["--data-price", "-1"], "--data-price"),
        (["--request-price", "-1"], "--request-price"),
        (["--bytes-per-request", "-1"], "--bytes-per-request"),
    ],
)
def test_figures_out_of_range_are_refused_by_name(
    tmp_path: Path, given: list[str], named: str
) -> None:
    """--utilization 0 was a ZeroDivisionError traceback; a negative throughput a table of
    negative instance counts; --volumes -5 a serverless month of -$0.000001, and a negative
    price a saving."""
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--out", str(tmp_path), *given]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert named in result.output


def test_defaults_it_assumed_are_named_as_flags(tmp_path: Path) -> None:
    """The label said "instance_price, gb_second_price, data_price are examples", field names
    no flag has, and nothing of the 2 GB of serverless memory it also assumed."""
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "--instance-price, --gb-second-price, --data-price" in result.output
    assert "--memory-gb" in result.output
    given = CliRunner().invoke(main, [*args, "--memory-gb", "4", "--instance-price", "1"])
    assert "--memory-gb" not in given.output and "--instance-price" not in given.output


def test_a_summary_with_no_answer_is_refused_by_what_failed(tmp_path: Path) -> None:
    """bench against a server that was down writes null latencies; cost --from it ended in a
    TypeError traceback."""
    summary = {
        "throughput_rps": 0.0,
        "latency_ms": {"p50": None, "mean": None},
        "requests": {"ok": 0, "errors": {"ClientConnectorError": 1211}},
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    args = ["cost", "--from", str(tmp_path / "summary.json"), "--out", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "no request answered" in result.output and "ClientConnectorError" in result.output


def test_the_html_figures_say_their_units(tmp_path: Path) -> None:
    """cost.html's first table read "instance 0.319, serverless 2, break-even / month
    41,975,000.0": dollars and requests unsaid."""
    args = ["cost", "--throughput", "100", "--latency-ms", "50", "--out", str(tmp_path)]
    assert CliRunner().invoke(main, args).exit_code == 0
    page = (tmp_path / "cost.html").read_text()
    assert "instance $" in page and "serverless $" in page
    assert "break-even requests / month" in page


def test_an_open_loop_runs_throughput_is_not_taken_for_capacity(tmp_path: Path) -> None:
    """bench --rate 50 answers 50 requests a second whatever the server could: cost --from it
    priced instances as if each answered only that, 20 times the cost of one that answers
    1,000."""
    summary = {"throughput_rps": 50.0, "rate_rps": 50.0, "concurrency": None}
    summary["latency_ms"] = {"p50": 2.0, "mean": 3.0}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    args = ["cost", "--from", str(tmp_path / "summary.json"), "--out", str(tmp_path)]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 2, refused.output
    assert "open loop" in refused.output and "--throughput" in refused.output
    assert CliRunner().invoke(main, [*args, "--throughput", "1000"]).exit_code == 0


def sizing_answer(
    tmp_path: Path, needed: dict[str, float | None], name: str = "sizing.json"
) -> Path:
    """A saved `GET /sizing` answer, as `curl :8080/sizing > sizing.json` keeps it."""
    path = tmp_path / name
    path.write_text(json.dumps({"window": "hour", "instancesNeeded": needed, "requests": 9000}))
    return path


def test_cost_counts_the_instances_sizing_needs_for_memory(tmp_path: Path) -> None:
    """GET /sizing said 3.4 instances' memory for a 0.95 hit ratio; cost priced one instance
    at every volume one answers, and its break-even was that of one instance. With --sizing
    the fleet is never under 4: $83.95 × 4 a month, and serverless breaks even at 4 × the
    requests one instance's month buys."""
    needed = {"0.9": 2.1, "0.95": 3.4, "0.99": None}
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"throughput_rps": 100, "latency_ms": {"p50": 40, "mean": 50}}))
    out = tmp_path / "cost"
    args = ["cost", "--from", str(summary), "--memory-gb", "1", "--data-price", "0"]
    args += ["--sizing", str(sizing_answer(tmp_path, needed)), "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    figures = json.loads((out / "cost.json").read_text())
    assert figures["memory_instances"] == {"hit_ratio": 0.95, "needed": 3.4, "instances": 4}
    assert [row["instances"] for row in figures["savings"]] == [4, 4, 4, 4, 4]
    assert figures["savings"][0]["instance_monthly"] == pytest.approx(4 * 83.95)
    assert figures["break_even_monthly_requests"] == pytest.approx(4 * 83.95 / 1e-6)
    assert "3.4" in result.output and "0.95" in result.output, result.output


def test_cost_without_sizing_says_it_counts_throughput_alone(tmp_path: Path) -> None:
    """Without --sizing the instance counts answer the volume's throughput, and the output
    says that the memory the models need (GET /sizing) may need more."""
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "--sizing" in result.output and "/sizing" in result.output, result.output
    assert json.loads((tmp_path / "cost.json").read_text())["memory_instances"] is None


def test_a_hit_ratio_sizing_does_not_reach_is_refused(tmp_path: Path) -> None:
    """instancesNeeded is null where no budget reaches the ratio (or before any request)."""
    path = sizing_answer(tmp_path, {"0.9": 1.2, "0.95": 2.0, "0.99": None})
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--out", str(tmp_path)]
    refused = CliRunner().invoke(main, [*args, "--sizing", str(path), "--hit-ratio", "0.99"])
    assert refused.exit_code == 2, refused.output
    assert "0.99" in refused.output and "0.9, 0.95" in refused.output, refused.output


def test_cost_sums_the_sizing_of_each_instance_of_a_fleet(tmp_path: Path) -> None:
    """Behind a model-affinity hash each instance holds its own models: the fleet needs the
    sum of their instancesNeeded (docs/scale-out.md), 1.4 + 1.3 here, so 3 instances."""
    first = sizing_answer(tmp_path, {"0.95": 1.4}, "a.json")
    second = sizing_answer(tmp_path, {"0.95": 1.3}, "b.json")
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, [*args, "--sizing", str(first), "--sizing", str(second)])
    assert result.exit_code == 0, result.output
    memory = json.loads((tmp_path / "cost.json").read_text())["memory_instances"]
    assert memory == {"hit_ratio": 0.95, "needed": 2.7, "instances": 3}
