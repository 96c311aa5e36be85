"""bench against a real server: its count is the server's, its percentiles are numpy's on its own
CSV, open loop holds the asked rate, and its report opens in Chromium without errors."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner
from helpers.serving import Servers
from helpers.toolkit import MODELS, open_in_chromium

from modelhost import testing
from modelhost.cli.main import main
from modelhost.examples import PAYLOADS, build_example_store

pytestmark = pytest.mark.e2e


def invocations_counted(url: str) -> float:
    """The server's own count of POST /invocations, from /metrics."""
    pattern = re.compile(r"^modelhost_http_requests_total\{(.*)\} (\S+)$")
    total = 0.0
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        found = pattern.match(line)
        if found and 'route="/invocations"' in found[1] and 'method="POST"' in found[1]:
            total += float(found[2])
    return total


def run_bench(
    url: str,
    out: Path,
    *args: str,
    models: list[str] = MODELS,
    duration: str = "0.5",
    warmup: str = "0.2",
) -> dict:
    """bench's summary; half a second measured after a short warm-up (whose requests are still
    sent, and left out) unless the test counts a rate over longer ones."""
    chosen = ["--models", ",".join(models)] if models else []
    result = CliRunner().invoke(
        main,
        [
            "bench",
            url,
            *chosen,
            "--duration",
            duration,
            "--warmup",
            warmup,
            "--processes",
            "2",
            "--out",
            str(out),
            "--quiet",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text())


def read_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "requests.csv") as rows:
        return list(csv.DictReader(rows))


def test_closed_loop_counts_and_percentiles(server: testing.RunningServer, tmp_path: Path) -> None:
    """Closed-loop count matches the server and percentiles match NumPy."""
    before = invocations_counted(server.url)
    summary = run_bench(server.url, tmp_path, "--concurrency", "4", "--popularity", "zipf")
    after = invocations_counted(server.url)

    assert summary["requests"]["sent"] == after - before
    rows = read_rows(tmp_path)
    assert len(rows) == summary["requests"]["sent"]
    measured = [float(r["latency_ms"]) for r in rows if r["warmup"] == "0" and r["status"] == "200"]
    assert len(measured) == summary["requests"]["ok"] > 0
    for name, q in {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p99.9": 99.9}.items():
        assert summary["latency_ms"][name] == float(np.percentile(measured, q))
    assert summary["latency_ms"]["max"] == max(measured)
    assert summary["latency_ms"]["min"] == min(measured)
    assert summary["requests"]["by_status"] == {"200": len(measured)}
    assert sum(summary["cache"].values()) == summary["requests"]["ok"]
    assert set(summary["cache"]) <= {"hit", "disk", "remote"}
    assert "infer" in summary["server_timing_ms"]
    assert {r["process"] for r in rows} == {"0", "1"}


def test_open_loop_holds_the_asked_rate(server: testing.RunningServer, tmp_path: Path) -> None:
    before = invocations_counted(server.url)
    summary = run_bench(
        server.url,
        tmp_path,
        *("--rate", "40", "--arrivals", "constant", "--model-in", "path"),
        duration="1.5",
        warmup="0.5",
    )
    rows = read_rows(tmp_path)
    due = sorted(float(r["intended_s"]) for r in rows)
    # a constant schedule: 40/s over warm-up plus duration (2 s), from both processes together
    assert len(rows) == 80
    assert np.allclose(np.diff(due), 1 / 40, atol=1e-6)
    assert all(float(r["sent_s"]) >= float(r["intended_s"]) for r in rows)
    assert summary["requests"]["measured"] == 60
    assert invocations_counted(server.url) == before  # the model went in the path
    assert summary["rate_rps"] == 40


def test_poisson_arrivals_are_seeded_and_near_the_rate(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    load = ("--rate", "50", "--seed", "3")
    first = run_bench(server.url, tmp_path / "a", *load, duration="1.5", warmup="0.5")
    second = run_bench(server.url, tmp_path / "b", *load, duration="1.5", warmup="0.5")
    due_a = [r["intended_s"] for r in read_rows(tmp_path / "a")]
    due_b = [r["intended_s"] for r in read_rows(tmp_path / "b")]
    assert sorted(due_a) == sorted(due_b)
    assert 50 <= len(due_a) <= 150  # 100 expected; Poisson spread, not timing
    assert first["requests"]["sent"] == second["requests"]["sent"]


def test_the_bench_report_opens_without_errors(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    run_bench(server.url, tmp_path, "--concurrency", "2")
    text = open_in_chromium(tmp_path / "report.html", "bench-report.png")
    assert "Latency distribution" in text and "Server-Timing" in text
    assert "[svg charts: 3]" in text


@pytest.mark.parametrize("load", [["--concurrency", "3"], ["--rate", "60"]])
def test_requests_n_measures_exactly_n(
    server: testing.RunningServer, tmp_path: Path, load: list[str]
) -> None:
    before = invocations_counted(server.url)
    summary = run_bench(server.url, tmp_path, *load, "--requests", "45")
    assert summary["requests"]["measured"] == 45 == summary["requests_asked"]
    assert summary["requests"]["sent"] == invocations_counted(server.url) - before
    rows = read_rows(tmp_path)
    assert sum(r["warmup"] == "0" for r in rows) == 45
    assert summary["throughput_rps"] == pytest.approx(
        summary["requests"]["ok"] / summary["duration_s"]
    )


def test_binary_payloads_keep_their_content_type(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    """A folder of binary payloads goes with each file's content type."""
    folder = tmp_path / "payloads"
    folder.mkdir()
    rows = testing.iris_rows(2)
    np.save(folder / "two.npy", np.asarray(rows))
    (folder / "one.csv").write_text("5.1,3.5,1.4,0.2\n")
    (folder / "one.json").write_text(json.dumps(rows[0]))
    summary = run_bench(
        server.url, tmp_path / "out", "--concurrency", "2", "--payloads", str(folder)
    )
    measured = summary["requests"]["measured"]
    assert measured > 0 and summary["requests"]["by_status"] == {"200": measured}
    # the same .npy sent as JSON is a body the server cannot decode: the type travelled
    (folder / "two.json").write_bytes((folder / "two.npy").read_bytes())
    (folder / "two.npy").unlink()
    wrong = run_bench(
        server.url, tmp_path / "wrong", "--concurrency", "2", "--payloads", str(folder)
    )
    assert wrong["requests"]["by_status"].get("400", 0) > 0


def test_an_error_is_shown_with_the_servers_message(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    """A refusal's reason reaches the table, the summary and the CSV, not only its status."""
    payloads = tmp_path / "five.jsonl"
    payloads.write_text("[[1, 2, 3, 4, 5]]\n")
    summary = run_bench(
        server.url, tmp_path / "out", "--concurrency", "1", "--payloads", str(payloads)
    )
    example = summary["requests"]["error_examples"]["HTTP 400"]
    assert example["message"] == "model expects 4 features per row, got 5"
    assert example["model"] in MODELS
    rows = read_rows(tmp_path / "out")
    assert {row["message"] for row in rows} == {example["message"]}


def test_json_lines_naming_models_are_the_models_benched(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    """Without --models, the payloads' TargetModels are the models, each sent its own body."""
    good, bad = MODELS[0], MODELS[1]
    payloads = tmp_path / "by-model.jsonl"
    lines = [
        {"Body": testing.iris_rows(1), "TargetModel": good},
        {"Body": [[1.0, 2.0]], "TargetModel": bad},
    ]
    payloads.write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = run_bench(
        server.url,
        tmp_path / "out",
        "--concurrency",
        "2",
        "--payloads",
        str(payloads),
        models=[],
    )
    statuses: dict[str, set[str]] = {}
    for row in read_rows(tmp_path / "out"):
        statuses.setdefault(row["model"], set()).add(row["status"])
    assert statuses == {good: {"200"}, bad: {"400"}}
    assert summary["models"] == 2


def test_the_example_store_benches_without_an_error(serve: Servers, tmp_path: Path) -> None:
    """The README's load test: every example model answers its payload."""
    root = tmp_path / "models"
    names = build_example_store(root, tenants=2)
    examples = serve(root, workers=1, memory_budget="2GiB")
    summary = run_bench(
        examples.url,
        tmp_path / "out",
        "--concurrency",
        "4",
        "--payloads",
        str(root / PAYLOADS),
        "--requests",
        "90",
        models=[],
    )
    assert summary["requests"]["by_status"] == {"200": 90}
    assert {row["model"] for row in read_rows(tmp_path / "out")} == set(names)


def test_bench_a_torchserve_model_with_its_inference_key(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """Under TorchServe's token authorization (on with a TorchServe config.properties, or
    --token-auth) a request without the inference key is 401, and bench had no way to send
    it: every request was an error. -H "Authorization: Bearer KEY" sends it, as curl -H."""
    work = tmp_path / "work"
    work.mkdir()
    args = [*testing.serve_args(store, work / "cache", workers=1), "--token-auth"]
    server = serve.enter_context(testing.RunningServer(args, work, cwd=work))
    key = json.loads((work / "key_file.json").read_text())["inference"]["key"]
    url = f"{server.url}/predictions/{MODELS[0]}"
    refused = run_bench(url, tmp_path / "without", "--concurrency", "1", models=[])
    assert refused["requests"]["ok"] == 0 and "401" in refused["requests"]["by_status"]
    bearer = f"Authorization: Bearer {key}"
    summary = run_bench(url, tmp_path / "with", "--concurrency", "1", "-H", bearer, models=[])
    assert summary["requests"]["ok"] > 0, summary["requests"]
    assert summary["requests"]["by_status"] == {"200": summary["requests"]["ok"]}
    args = ["cost", "--throughput", "100", "--latency-ms", "5", "--sizing", server.url]
    sized = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "cost")])
    assert sized.exit_code == 2 and "curl -H 'Authorization: Bearer" in sized.output, sized.output


def test_a_header_without_a_colon_is_refused_by_its_flag(tmp_path: Path) -> None:
    args = ["bench", "http://127.0.0.1:9", "-c", "1", "-H", "Bearer x", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "--header 'Bearer x'" in result.output and "Name: value" in result.output


def test_model_in_predictions_benches_torchserve_models_by_name(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    """TorchServe's clients call /predictions/{model}, the route TorchServe's metrics
    (--torchserve-metrics) count; bench URL --models a,b could send only /invocations or
    /models/{m}/invoke, another route than the migrated clients'. --model-in predictions
    sends each model's requests there."""
    route = 'route="/predictions/{model:path}"'

    def predictions() -> float:
        lines = httpx.get(f"{server.url}/metrics").text.splitlines()
        found = [line for line in lines if line.startswith("modelhost_http_requests_total")]
        return sum(float(line.split()[-1]) for line in found if route in line)

    before = predictions()
    summary = run_bench(server.url, tmp_path, "--concurrency", "1", "--model-in", "predictions")
    assert summary["requests"]["by_status"] == {"200": summary["requests"]["ok"]}
    assert predictions() - before == summary["requests"]["sent"]
