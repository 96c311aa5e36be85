"""Tenants: a quiet tenant's latency beside a noisy one, first come first served against fair.

One modelhost with `--workers 1` pinned to `--server-core`, the load generators (one process per
tenant, blocking httpx clients in threads; the noisy tenant's niced) to `--client-core`. Each
mode runs on a fresh server, the modes alternated in one run: `off` (no tenants: first come,
first served) and `on` (`--tenant-from header`: weighted fair queueing over the server's slots).
Per mode:

- alone: the quiet tenant sends a steady --quiet-rps to its loaded iris model (open loop, latency
  from each request's due time; also the sum of its Server-Timing parts, which leaves out the
  load generator's own delays), for --duration s, its process real-time (SCHED_FIFO) where
  allowed, so that the noisy load on the client core does not delay its sends; a p99 needs
  --duration 30 or more at 20 a second;
- beside hot: the same while the noisy tenant runs --noisy-clients closed-loop clients over its
  --forests loaded forests;
- beside hot + cold burst: the same, and a second in, --burst requests at once to a cold forest;
- fairness: three equally weighted tenants kept busy by --fair-clients closed-loop clients each
  (unequal numbers: first come, first served shares by clients), on copies of one forest (own
  models) and on one model they share, each request --fair-rows rows so that the server, not
  the load generator, is what they wait for, on a second server of `--batch-size 1` (else one
  batch serves all a tenant's waiting requests, and no tenant stays backlogged); the fewest
  clients are three, since a tenant's two batches running or in a worker's pipe and one
  waiting keep it backlogged, as the fair share assumes; Jain's index of their requests/s (1:
  equal shares);
- weights (on only): three other tenants, weighted 1:2:4 by a tenants file, --fair-clients
  each as equal as their sum allows, each on four forests of its own; their shares of the
  requests/s, and of the worker time the server counted (GET /tenants), which the fair queue
  shares by weight. Each fairness row gives the main process's share of the server's CPU: its
  own work is first come, first served, so where it is large shares drift toward the clients'.

Prints markdown tables and writes benchmarks/results/tenants-<date>.json (and .md).

    python benchmarks/tenants.py                          # 8 s per scenario, about 2 minutes
    python benchmarks/tenants.py --duration 4 --forests 10
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import queue
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from _common import (
    add_serve_arg,
    cores,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    process_tree,
    write_results,
)

from modelhost import testing
from modelhost.observe.exchange import parse_server_timing

MiB = 2**20
QUIET = "quiet/iris.joblib"
HEADER = "x-modelhost-tenant"
Outcome = tuple[int, float, float]  # status, ms from when it was due, ms by Server-Timing
# the noisy load yields the client core to the quiet one, whose timing it would otherwise skew
NOISY_NICE = 10
QUIET_PRIORITY = 10  # SCHED_FIFO: ahead of every ordinary process on the client core
LEAD_S = 2.0  # for the load's processes to fork and make their clients, then start together
FIGURES_S = 1.0  # for the server to count the last requests' figures
MODES = {"off": [], "on": ["--tenant-from", "header"]}
WEIGHTS = (1, 2, 4)
WEIGHTED = "weighted"  # the weights scenario's tenants, apart from the equally weighted ones
WEIGHTED_MODELS = 4  # a tenant's models: one model holds one batch a worker thread at a time
TABLE = [
    "mode",
    "scenario",
    "quiet p50 ms",
    "quiet p99 ms",
    "quiet p99 at server ms",
    "quiet refusals",
    "noisy requests/s",
]
FAIR_TABLE = [
    "mode",
    "models",
    "clients per tenant",
    "requests/s per tenant",
    "ratio to the first",
    "worker time's ratio",
    "Jain's index",
    "main process's CPU",
]


def main() -> None:
    args = _parse_args()
    make_bodies(args.fair_rows)  # before the load's processes fork
    with tempfile.TemporaryDirectory(prefix="modelhost-tenants-") as scratch:
        store = build_store(Path(scratch) / "store", args)
        os.sched_setaffinity(0, cores(args.client_core))  # the load's processes inherit it
        runs = [
            bench_mode(mode, round_, store, Path(scratch) / f"{mode}-{round_}", args)
            for round_ in range(args.rounds)
            for mode in MODES
        ]
    table = render(runs)
    path = write_results("tenants", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per scenario")
    parser.add_argument("--rounds", type=int, default=1, help="times each mode runs, alternated")
    parser.add_argument("--quiet-rps", type=float, default=20.0)
    parser.add_argument("--noisy-clients", type=int, default=12)
    parser.add_argument("--forests", type=int, default=30, help="the noisy tenant's hot models")
    parser.add_argument("--forest-mib", type=float, default=1.0)
    parser.add_argument("--burst", type=int, default=40, help="requests to one cold forest")
    parser.add_argument("--cold-mib", type=float, default=8.0)
    parser.add_argument("--fair-clients", type=int, nargs=3, default=[3, 6, 12])
    parser.add_argument("--fair-rows", type=int, default=64, help="rows a fairness request")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--client-core", default="0", help="a taskset list: 0, 12-15")
    parser.add_argument(
        "--quiet-core", default="", help="the quiet client's own cores, apart from the load's"
    )
    add_serve_arg(parser)
    return parser.parse_args()


# ------------------------------------------------------------------------------- the store


def build_store(store: Path, args: argparse.Namespace) -> Path:
    """Iris for the quiet tenant; copies of one forest for the noisy and fair ones; cold ones."""
    testing.iris_logreg(store / QUIET)
    forest = testing.random_forest(store / "forest.joblib", int(args.forest_mib * MiB))
    for name in [*noisy_names(args), *fair_names(), *weighted_names()]:
        testing.copy_artifact(forest, store / name)
    cold = testing.random_forest(store / "cold.joblib", int(args.cold_mib * MiB), seed=1)
    for mode in MODES:
        for round_ in range(args.rounds):
            testing.copy_artifact(cold, store / cold_name(mode, round_))
    return store


def noisy_names(args: argparse.Namespace) -> list[str]:
    return [f"noisy/forest-{i:02d}.joblib" for i in range(args.forests)]


def fair_names() -> list[str]:
    return [f"fair-{i}/forest.joblib" for i in range(3)]


def weighted_names() -> list[str]:
    """Each fair tenant's own few forests: a tenant's share comes from its models' batches."""
    return [f"fair-{i}/forest-{m}.joblib" for i in range(3) for m in range(WEIGHTED_MODELS)]


def cold_name(mode: str, round_: int) -> str:
    return f"noisy/cold-{mode}-{round_}.joblib"  # a fresh one per server: cold for each


# ------------------------------------------------------------------------------- one mode


def bench_mode(
    mode: str, round_: int, store: Path, scratch: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """The three scenarios on a fresh server in `mode`, then fairness on another."""
    scratch.mkdir(parents=True)
    with serving(mode, store, scratch / "latency", args) as server:
        url = server.url
        warm(url, [QUIET, *noisy_names(args)])
        scenarios = {
            "alone": scenario(url, args),
            "beside hot": scenario(url, args, noisy=True),
            "beside hot + cold burst": scenario(
                url, args, noisy=True, cold=cold_name(mode, round_)
            ),
        }
    # a request a batch: a tenant's waiting requests are not all served by one batch of its
    # model, so more clients keep it backlogged, as the fair share assumes
    with serving(mode, store, scratch / "fairness", args, "--batch-size", "1") as server:
        warm(server.url, [*fair_names(), *weighted_names()])
        fair = {"own models": fairness(server, args, fair_names(), args.fair_clients)}
        shared = [fair_names()[0]] * 3
        fair["one shared model"] = fairness(server, args, shared, args.fair_clients)
        if mode == "on":
            equal = [sum(args.fair_clients) // 3] * 3
            own = [[n for n in weighted_names() if n.startswith(f"fair-{i}/")] for i in range(3)]
            fair["weights 1:2:4"] = fairness(server, args, own, equal, WEIGHTED)
    run = {"mode": mode, "round": round_, "scenarios": scenarios, "fairness": fair}
    print(render([run]), flush=True)
    return run


@contextlib.contextmanager
def serving(
    mode: str, store: Path, scratch: Path, args: argparse.Namespace, *extra: str
) -> Iterator[testing.RunningServer]:
    """A fresh server in `mode`, pinned to --server-core."""
    scratch.mkdir(parents=True)
    serve = [*testing.serve_args(store, scratch / "cache", workers=1), *MODES[mode], *extra]
    if mode == "on":
        serve += ["--tenants-file", str(weights_file(scratch))]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    pin = ["taskset", "-c", args.server_core]
    with testing.RunningServer(
        [*serve, *args.serve_arg], scratch, env=env, prefix=pin, cwd=scratch
    ) as server:
        yield server


def warm(url: str, names: list[str]) -> None:
    """Load every model the scenarios call hot, one request each."""
    with httpx.Client(base_url=url, timeout=120) as client:
        for name in names:
            response = invoke(client, name, "warm")
            if response.status_code != 200:
                raise RuntimeError(f"warming {name}: {response.status_code} {response.text}")


def scenario(
    url: str, args: argparse.Namespace, noisy: bool = False, cold: str | None = None
) -> dict[str, Any]:
    """The quiet tenant's steady load for --duration s, beside the noisy tenant's if `noisy`,
    and its burst on the `cold` model if given."""
    start_at = time.time() + LEAD_S
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(3, mp_context=context) as pool:
        quiet = pool.submit(open_loop, url, args, start_at)
        hot = burst = None
        if noisy:
            names = noisy_names(args)
            clients = args.noisy_clients
            hot = pool.submit(closed_loop, url, "noisy", names, clients, args, start_at, NOISY_NICE)
        if cold:
            burst = pool.submit(send_burst, url, cold, args.burst, start_at + 1.0)
        return {
            "quiet": quiet.result(),
            "noisy": hot.result() if hot else None,
            "burst": burst.result() if burst else None,
        }


def weights_file(scratch: Path) -> Path:
    """The weights scenario's tenants weighted 1:2:4; the fairness tenants keep equal weights."""
    path = scratch / "tenants.toml"
    tables = [f'[tenants."{WEIGHTED}-{i}"]\nweight = {w}\n' for i, w in enumerate(WEIGHTS)]
    path.write_text("\n".join(tables))
    return path


def fairness(
    server: testing.RunningServer,
    args: argparse.Namespace,
    names: list[Any],
    clients: list[int],
    tenant: str = "fair",
) -> dict[str, Any]:
    """Three tenants backlogged on `names` (a model or a list of models each, the same cost);
    their requests/s, worker-seconds and Jain's index, and the main process's share of the
    server's CPU (its own work is first come, first served)."""
    url = server.url
    start_at = time.time() + LEAD_S
    context = multiprocessing.get_context("fork")
    tenant_names = [f"{tenant}-{i}" for i in range(len(names))]
    before = worker_seconds(url, tenant_names)
    cpu = cpu_seconds(process_tree(server.pid))
    with concurrent.futures.ProcessPoolExecutor(3, mp_context=context) as pool:
        futures = [
            pool.submit(closed_loop, url, named, _listed(name), count, args, start_at, 0, "rows")
            for named, name, count in zip(tenant_names, names, clients, strict=True)
        ]
        tenants = [future.result() for future in futures]
    spent = cpu_spent(cpu)
    time.sleep(FIGURES_S)
    after = worker_seconds(url, tenant_names)
    for figures, was, now in zip(tenants, before, after, strict=True):
        figures["worker_s"] = round(now - was, 3)
    rates = [tenant["requests_per_s"] for tenant in tenants]
    main_share = spent.get(server.pid, 0.0) / (sum(spent.values()) or float("nan"))
    return {
        "clients": clients,
        "tenants": tenants,
        "jain_index": jain_index(rates),
        "main_process_cpu_share": round(main_share, 3),
    }


def worker_seconds(url: str, tenants: list[str]) -> list[float]:
    """Each tenant's worker-seconds so far by GET /tenants (nan with tenants off)."""
    response = httpx.get(f"{url}/tenants", params={"limit": 1000}, timeout=10)
    if response.status_code == 404:
        return [float("nan")] * len(tenants)
    counted = {t["tenant"]: t["workerSeconds"] for t in response.json()["tenants"]}
    return [counted.get(tenant, 0.0) for tenant in tenants]


def _listed(names: str | list[str]) -> list[str]:
    return [names] if isinstance(names, str) else names


def jain_index(rates: list[float]) -> float:
    """(Σx)² / (n·Σx²): 1 when every share is equal."""
    squares = sum(rate * rate for rate in rates)
    return sum(rates) ** 2 / (len(rates) * squares) if squares else float("nan")


# ------------------------------------------------------------------------------- the load
# each runs in a process of its own, so one tenant's client work does not delay another's


BODIES: dict[str, bytes] = {}


def make_bodies(fair_rows: int) -> None:
    """One row of iris, one of digits and `fair_rows` of digits, as JSON; made before the
    load's processes fork, since each call of `testing.*_rows` reads its data set again."""
    BODIES["iris"] = json.dumps(testing.iris_rows(1)).encode()
    BODIES["digits"] = json.dumps(testing.digits_rows(1)).encode()
    BODIES["rows"] = json.dumps(testing.digits_rows(fair_rows)).encode()


def invoke(client: Any, name: str, tenant: str, body_key: str = "") -> Any:
    body = BODIES[body_key or ("iris" if name == QUIET else "digits")]
    headers = {HEADER: tenant, "content-type": "application/json"}
    return client.post(f"/models/{name}/invoke", content=body, headers=headers)


def open_loop(url: str, args: argparse.Namespace, start_at: float) -> dict[str, Any]:
    """The quiet tenant's --quiet-rps, each timed from when it was due, whatever the server's
    pace; on --quiet-core where given, where the load's clients cannot delay it."""
    if args.quiet_core:
        os.sched_setaffinity(0, cores(args.quiet_core))
    realtime, rps = _realtime(), args.quiet_rps
    outcomes: list[Outcome] = []
    with _clients(url, 32) as made, concurrent.futures.ThreadPoolExecutor(32) as pool:
        for i in range(int(rps * args.duration)):
            due = start_at + i / rps
            time.sleep(max(0.0, due - time.time()))
            pool.submit(_timed, made, QUIET, "quiet", due, outcomes)
    return {**summary(outcomes, args.duration), "realtime": realtime}


def _realtime() -> bool:
    """Make this process (and the threads it starts) real-time, if allowed; whether it is."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(QUIET_PRIORITY))
    except (AttributeError, OSError):  # not Linux, or no CAP_SYS_NICE
        return False
    return True


def closed_loop(
    url: str,
    tenant: str,
    names: list[str],
    clients: int,
    args: argparse.Namespace,
    start_at: float,
    nice: int = 0,
    body_key: str = "",
) -> dict[str, Any]:
    """`clients` clients each sending its next request as the last is answered, at `nice`."""
    os.nice(nice)
    outcomes: list[Outcome] = []
    deadline = start_at + args.duration

    def client_loop(first: int, made: _clients) -> None:
        time.sleep(max(0.0, start_at - time.time()))
        i = first
        while time.time() < deadline:
            _timed(made, names[i % len(names)], tenant, time.time(), outcomes, body_key)
            i += 1

    with _clients(url, clients) as made, concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client_loop, c * 7, made) for c in range(clients)]:
            future.result()
    return summary(outcomes, args.duration)


def send_burst(url: str, name: str, count: int, start_at: float) -> dict[str, Any]:
    """`count` requests at once to one model; their statuses and the slowest answer."""
    os.nice(NOISY_NICE)
    outcomes: list[Outcome] = []
    with _clients(url, count) as made, concurrent.futures.ThreadPoolExecutor(count) as pool:
        time.sleep(max(0.0, start_at - time.time()))
        for _ in range(count):
            pool.submit(_timed, made, name, "noisy", time.time(), outcomes)
    latencies = [outcome[1] for outcome in outcomes]
    return {"statuses": _statuses(outcomes), "slowest_ms": round(max(latencies), 1)}


class _clients:
    """Blocking httpx clients, made before the load starts (each loads TLS certificates)."""

    def __init__(self, url: str, count: int) -> None:
        self.made = [httpx.Client(base_url=url, timeout=120) for _ in range(count)]
        self.idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for client in self.made:
            self.idle.put(client)

    def __enter__(self) -> _clients:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self.made:
            client.close()


def _timed(
    clients: _clients,
    name: str,
    tenant: str,
    due: float,
    outcomes: list[Outcome],
    body_key: str = "",
) -> None:
    client = clients.idle.get()
    status, server_ms = 0, float("nan")  # a refused or broken connection: a refusal
    try:
        response = invoke(client, name, tenant, body_key)
        status = response.status_code
        server_ms = sum(parse_server_timing(response.headers.get("server-timing", "")).values())
    except httpx.HTTPError:
        pass
    finally:
        clients.idle.put(client)
    outcomes.append((status, (time.time() - due) * 1000, server_ms))


def summary(outcomes: list[Outcome], duration_s: float) -> dict[str, Any]:
    ok = sorted(ms for status, ms, _ in outcomes if status == 200)
    at_server = sorted(ms for status, _, ms in outcomes if status == 200)
    return {
        "requests": len(outcomes),
        "requests_per_s": round(len(ok) / duration_s, 2),
        "refusals": len(outcomes) - len(ok),
        "statuses": _statuses(outcomes),
        "p50_ms": _percentile(ok, 50),
        "p99_ms": _percentile(ok, 99),
        "server_p99_ms": _percentile(at_server, 99),  # the sum of its Server-Timing parts
    }


def _statuses(outcomes: list[Outcome]) -> dict[str, int]:
    return {
        str(status): n for status, n in sorted(Counter(outcome[0] for outcome in outcomes).items())
    }


def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 2) if values else float("nan")
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


# ------------------------------------------------------------------------------- the tables


def render(runs: list[dict[str, Any]]) -> str:
    rows, ratios, fair_rows = [], [], []
    for run in runs:
        scenarios = run["scenarios"]
        for scenario_name, part in scenarios.items():
            quiet, noisy = part["quiet"], part["noisy"]
            row = [run["mode"], scenario_name, quiet["p50_ms"], quiet["p99_ms"]]
            row += [quiet["server_p99_ms"], quiet["refusals"]]
            rows.append([*row, noisy["requests_per_s"] if noisy else "-"])
            if scenario_name != "alone":
                ratios.append(_ratio_line(run["mode"], scenario_name, part, scenarios["alone"]))
        for variant, fair in run["fairness"].items():
            shares = " / ".join(f"{t['requests_per_s']:.1f}" for t in fair["tenants"])
            clients = " / ".join(str(n) for n in fair["clients"])
            ratios_ = " : ".join(f"{r:.2f}" for r in _ratios(fair["tenants"]))
            worked = " : ".join(f"{r:.2f}" for r in _ratios(fair["tenants"], "worker_s"))
            row = [run["mode"], variant, clients, shares, ratios_, worked]
            row += [round(fair["jain_index"], 3), f"{fair['main_process_cpu_share']:.0%}"]
            fair_rows.append(row)
    tables = [markdown_table(TABLE, rows), "", *ratios, "", markdown_table(FAIR_TABLE, fair_rows)]
    return "\n".join(tables)


def _ratios(tenants: list[dict[str, Any]], key: str = "requests_per_s") -> list[float]:
    first = tenants[0][key] or float("nan")
    return [tenant[key] / first for tenant in tenants]


def _ratio_line(mode: str, name: str, part: dict[str, Any], alone: dict[str, Any]) -> str:
    ratio = part["quiet"]["p99_ms"] / alone["quiet"]["p99_ms"]
    line = f"- {mode}, {name}: quiet p99 beside / alone = {ratio:.2f}x"
    if not part["quiet"].get("realtime"):
        line += " (the quiet client was not real-time)"
    burst = part["burst"]
    if burst:
        line += f" (cold burst: statuses {burst['statuses']}, slowest {burst['slowest_ms']} ms)"
    return line


if __name__ == "__main__":
    main()
