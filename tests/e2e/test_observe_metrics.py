"""/metrics agrees with what the test did, promtool accepts it, and the per-model counters and
the access log say the same."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.logs import logged
from helpers.serving import Servers
from observe_tools import require_tool
from prometheus_client.parser import text_string_to_metric_families

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}
INVOKE_ROUTE = "/models/{model:path}/invoke"
MODEL_SERIES = 2
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def observed(
    store: Path, serve: Servers, tmp_path_factory: pytest.TempPathFactory
) -> tuple[testing.RunningServer, Path]:
    access_log = tmp_path_factory.mktemp("observed") / "access.log"
    server = serve(
        store,
        workers=2,
        memory_budget="4GiB",
        access_log=access_log,
        metrics_model_series=MODEL_SERIES,
    )
    return server, access_log


@pytest.fixture
def client(observed: tuple[testing.RunningServer, Path]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=observed[0].url, timeout=30) as http:
        yield http


def samples(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(
    scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def invoke(client: httpx.Client, name: str) -> httpx.Response:
    return client.post(f"/models/{name}/invoke", content=ROW, headers=JSON)


def test_hits_and_misses_agree_with_what_the_test_did(client: httpx.Client) -> None:
    misses, hits = ["tenants/t000.joblib", "tenants/t001.joblib", "iris.pkl"], 5
    before = samples(client)
    tiers = [invoke(client, name).headers["x-modelhost-cache"] for name in misses]
    tiers += [invoke(client, misses[i % 3]).headers["x-modelhost-cache"] for i in range(hits)]
    assert tiers == ["disk"] * 3 + ["hit"] * hits
    after = samples(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("modelhost_cache_lookups_total", tier="hit") == hits
    assert delta("modelhost_cache_lookups_total", tier="disk") == len(misses)
    assert delta("modelhost_model_load_seconds_count") == len(misses)
    assert delta("modelhost_model_load_wait_seconds_count") == len(misses)
    assert delta("modelhost_invocation_part_seconds_count", part="infer") == len(misses) + hits
    ok = {"method": "POST", "route": INVOKE_ROUTE, "status": "200", "protocol": "rest"}
    assert delta("modelhost_http_requests_total", **ok) == len(misses) + hits
    bytes_in = delta("modelhost_http_request_bytes_total", route=INVOKE_ROUTE, protocol="rest")
    assert bytes_in == len(ROW) * 8
    stats = client.get("/stats").json()
    loaded = value(after, "modelhost_models", state="loaded")
    assert loaded == stats["memory"]["loadedModels"] >= 3
    assert value(after, "modelhost_memory_budget_bytes") == stats["memory"]["budgetBytes"]
    assert value(after, "modelhost_workers") == 2
    footprints = [k for k in after if k[0] == "modelhost_model_memory_bytes"]
    assert len(footprints) == MODEL_SERIES  # capped, though more models are loaded


def test_rejections_and_failed_loads_are_counted_by_reason(client: httpx.Client) -> None:
    before = samples(client)
    assert invoke(client, "no/such.joblib").status_code == 404
    assert invoke(client, "broken/corrupt.joblib").status_code == 500
    after = samples(client)
    for reason in ("ModelNotFound", "ModelLoadError"):
        name = "modelhost_rejections_total"
        assert value(after, name, reason=reason) - value(before, name, reason=reason) == 1
    failures = "modelhost_failures_total"
    assert value(after, failures, reason="load") - value(before, failures, reason="load") == 1


def test_unknown_model_is_not_counted_as_a_store_failure(client: httpx.Client) -> None:
    """A typo'd name is the client's mistake: a rejection, and a failure of its own reason, so
    that failures_total{reason="fetch"} stays a sign of a failing store."""
    before = samples(client)
    assert invoke(client, "no/typo.joblib").status_code == 404
    after = samples(client)

    def delta(name: str, reason: str) -> float:
        return value(after, name, reason=reason) - value(before, name, reason=reason)

    assert delta("modelhost_rejections_total", "ModelNotFound") == 1
    assert delta("modelhost_failures_total", "fetch") == 0
    assert delta("modelhost_failures_total", "not_found") == 1


def test_a_missing_name_asked_again_and_again_is_reported_once(
    client: httpx.Client, observed: tuple[testing.RunningServer, Path]
) -> None:
    """A client retrying a wrong name is a rejection each time, but one failure event: the
    log and the event history keep room for what else happens."""
    before = samples(client)
    for _ in range(20):
        assert invoke(client, "no/retried.joblib").status_code == 404
    after = samples(client)
    rejected = value(after, "modelhost_rejections_total", reason="ModelNotFound")
    assert rejected - value(before, "modelhost_rejections_total", reason="ModelNotFound") == 20
    events = [e for e in observed[0].events("failure") if e["model"] == "no/retried.joblib"]
    assert len(events) == 1, events


def test_the_frontend_and_the_disk_index_are_measured(client: httpx.Client) -> None:
    """The frontend's PSS and allowance, and the disk tier's artifacts, as /stats gives them."""
    assert invoke(client, "tenants/t000.joblib").status_code == 200
    stats, scraped = client.get("/stats").json(), samples(client)
    allowance = value(scraped, "modelhost_frontend_memory_allowance_bytes")
    assert allowance == stats["memory"]["frontendAllowanceBytes"]
    assert allowance > value(scraped, "modelhost_frontend_memory_bytes") > 0
    assert value(scraped, "modelhost_memory_used_bytes") > value(
        scraped, "modelhost_frontend_memory_bytes"
    )
    assert value(scraped, "modelhost_disk_artifacts") == stats["disk"]["artifacts"] >= 1


def test_promtool_accepts_the_metrics(client: httpx.Client) -> None:
    promtool = require_tool("promtool", "prometheus")
    invoke(client, "tenants/t002.joblib")
    invoke(client, "no/such.joblib")
    text = client.get("/metrics").text
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("doc", ["docs/observability.md", "deploy/grafana-dashboard.json"])
def test_docs_and_dashboard_query_real_metrics(client: httpx.Client, doc: str) -> None:
    """The docs and the Grafana dashboard query only metrics that exist."""
    exposed = exposed_names(client.get("/metrics").text)
    queried = {n for n in re.findall(r"modelhost_\w+", (REPO / doc).read_text()) if n[-1] != "_"}
    queried = {n for n in queried if not n.startswith("modelhost_tenant_")}  # test_observe_tenants
    queried = {n for n in queried if not n.startswith("modelhost_device_")}  # test_devices
    assert len(queried) > 10
    assert queried - exposed == set()


def test_every_exposed_metric_is_in_the_docs_table(client: httpx.Client) -> None:
    """observability.md's table names each family /metrics exposes (`_created` is the client's)."""
    lines = (REPO / "docs/observability.md").read_text().splitlines()
    rows = [line for line in lines if line.startswith("| `modelhost_")]
    exposed = {n for n in exposed_names(client.get("/metrics").text) if is_family(n)}
    assert sorted(n for n in exposed if not any(names_in(row, n) for row in rows)) == []


def is_family(name: str) -> bool:
    parts = ("_created", "_bucket", "_count", "_sum")
    return not name.endswith(parts) and not name.startswith("modelhost_process_")


def names_in(row: str, name: str) -> bool:
    """Whether a table row names `name`: in full, or as a `_tail` of its first name's stem."""
    cell = row.split("|")[1]
    names = re.findall(r"`(\w+)`", cell)
    tails = [n for n in names if n.startswith("_") and name.endswith(n)]
    return name in names or any(names[0].startswith(name[: -len(t)]) for t in tails)


def exposed_names(text: str) -> set[str]:
    """Every sample name the exposition declares, labelled series not yet seen included."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def test_describe_gives_the_models_counters(client: httpx.Client) -> None:
    name = "tenants/t003.joblib"
    for _ in range(3):
        invoke(client, name)
    counters = client.get(f"/models/{name}").json()["counters"]
    assert counters["requests"] == 3 and counters["hits"] == 2
    assert counters["misses"] == {"disk": 1} and counters["errors"] == 0
    assert {"queue", "load", "infer"} <= set(counters["lastTimingsMs"])  # "download" with stores
    totals = counters["totalMs"]
    assert totals["failed"] == 0 and 0 < totals["queue"] + totals["infer"] < totals["succeeded"]


def test_the_docs_counters_have_the_keys_describe_gives(client: httpx.Client) -> None:
    """observability.md's `counters` example, key for key, as GET /models/{model} gives them."""
    text = (REPO / "docs/observability.md").read_text()
    example = json.loads(text.split('```json\n"counters": ', 1)[1].split("\n```")[0])
    name = "tenants/t005.joblib"
    invoke(client, name)
    counters = client.get(f"/models/{name}").json()["counters"]
    assert set(example) == set(counters)
    assert set(example["lastTimingsMs"]) == set(counters["lastTimingsMs"])
    assert set(example["totalMs"]) == set(counters["totalMs"])


def test_the_access_log_has_a_line_per_request(
    client: httpx.Client, observed: tuple[testing.RunningServer, Path]
) -> None:
    name = "tenants/t004.joblib"
    invoke(client, name)
    invoke(client, name)
    lines = logged(observed[1], 2, lambda r: r.get("model") == name)
    first, second = lines
    assert (first["cache"], second["cache"]) == ("disk", "hit")
    assert (first["tier"], second["tier"]) == ("disk", "host")  # as X-Modelhost-Tier says
    assert first["route"] == INVOKE_ROUTE and first["status"] == 200
    assert first["bytes_in"] == len(ROW) and first["bytes_out"] > 0
    assert first["load_ms"] > 0 and {"queue_ms", "infer_ms", "latency_ms"} <= set(first)


def test_the_docs_queries_answer_on_scraped_series(client: httpx.Client, tmp_path: Path) -> None:
    """Each PromQL query of observability.md's tables returns a series on what this server
    exposes, labelled as Prometheus scrapes it (`job`, `instance`), where every metric it reads
    is exposed: a query that joins mismatched label sets answers nothing."""
    promtool = require_tool("promtool", "prometheus")
    invoke(client, "iris.pkl")
    invoke(client, "iris.pkl")
    invoke(client, "no/such.joblib")
    scraped = {name for name, _ in samples(client)}
    queries = [q for q in documented_queries() if set(re.findall(r"modelhost_\w+", q)) <= scraped]
    assert len(queries) > 10
    series = [as_series(name, dict(labels)) for name, labels in samples(client)]
    spec = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": "1+1x10"} for s in series],
                "promql_expr_test": [
                    {
                        "expr": f"count({q}) > bool 0",
                        "eval_time": "10m",
                        "exp_samples": [{"value": 1}],
                    }
                    for q in queries
                ],
            }
        ]
    }
    (tmp_path / "queries.yml").write_text(json.dumps(spec))  # YAML reads JSON
    tested = subprocess.run(
        [promtool, "test", "rules", str(tmp_path / "queries.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def documented_queries() -> list[str]:
    """The queries in the last cell of the rows of observability.md's two query tables."""
    text = (REPO / "docs/observability.md").read_text()
    tables = text.split("## From SageMaker", 1)[1].split("## The metrics", 1)[0]
    rows = [line.replace("\\|", "|") for line in tables.splitlines() if line.startswith("| ")]
    cells = [row.rsplit(" | ", 1)[-1] for row in rows]
    return [q for cell in cells for q in re.findall(r"`([^`]*modelhost_[^`]*)`", cell)]


def as_series(name: str, labels: dict[str, str]) -> str:
    """A sample in promtool's series notation, with the labels a Prometheus scrape adds."""
    labels |= {"job": "modelhost", "instance": "127.0.0.1:8080"}
    return name + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


def test_the_docs_access_log_line_has_the_keys_of_a_real_one(
    client: httpx.Client, observed: tuple[testing.RunningServer, Path]
) -> None:
    """observability.md's access log example, key for key, as a line of a miss from disk."""
    text = (REPO / "docs/observability.md").read_text().split("## Access log", 1)[1]
    example = json.loads(text.split("```json\n", 1)[1].split("\n```")[0])
    name = "custom/sagemaker"  # loaded by no other test of this module
    assert invoke(client, name).headers["x-modelhost-cache"] == "disk"
    [line] = logged(observed[1], 1, lambda r: r.get("model") == name)
    assert sorted(example) == sorted(line)
