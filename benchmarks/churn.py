"""Many models under concurrent churn: modelhost against the in-process floor, per core.

N model names (copies of a few digits forests, so answers differ) are requested by C clients at
once, each picking names by Zipf(s), for a fixed time. The budget leaves room for R models beside
the idle server; the floor (`churn_floor.py`: uvicorn + joblib + an LRU of R) runs the same
clients. By default each server has core 0 and the clients core 1; `--busy-loop` spins a process
on the servers' core meanwhile. Reported: throughput, hit ratio, latency of hits and misses,
errors; for modelhost also the hits' latency at the server, `modelhost simulate`'s prediction for
the same trace, each load's footprint against the forest's alone, and peak PSS against the budget.

    python benchmarks/churn.py                      # 100 names, Zipf 1.0, room 10, 16 clients
    python benchmarks/churn.py --busy-loop          # the same beside other work on the core
    python benchmarks/churn.py --workers 2 --server-cpus 0,1 --client-cpus 0,1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    RESULTS,
    add_serve_arg,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    process_tree,
    write_results,
)

if TYPE_CHECKING:
    from modelhost.toolkit.simulate.trace import Trace

MiB = 2**20


@dataclass(kw_only=True)
class Outcome:
    started: float
    model: str
    status: int
    hit: bool
    latency_ms: float
    right: bool
    timings: dict[str, float] = field(default_factory=dict)  # Server-Timing parts, ms


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    peak_pss_bytes: int = 0

    def summary(self) -> dict[str, Any]:
        ok = [o for o in self.outcomes if o.status == 200 and o.right]
        hits = [o.latency_ms for o in ok if o.hit]
        misses = [o.latency_ms for o in ok if not o.hit]
        return {
            "requests": len(self.outcomes),
            "throughput_rps": round(len(ok) / self.seconds, 2),
            "hit_ratio": round(len(hits) / max(1, len(ok)), 3),
            "errors": len(self.outcomes) - len(ok),
            "statuses": dict(Counter(o.status for o in self.outcomes)),
            "hit_p50_ms": _percentile(hits, 50),
            "hit_p99_ms": _percentile(hits, 99),
            "miss_p50_ms": _percentile(misses, 50),
            "miss_p99_ms": _percentile(misses, 99),
            "hit_queue_p50_ms": _percentile([o.timings.get("queue", 0) for o in ok if o.hit], 50),
            "hit_infer_p50_ms": _percentile([o.timings.get("infer", 0) for o in ok if o.hit], 50),
            "miss_load_p50_ms": _percentile(
                [o.timings.get("load", 0) for o in ok if not o.hit], 50
            ),
        }


def hits_at_the_server(access_log: Path) -> dict[str, float | None]:
    """The hits' latency from the server's access log: from the frontend's app being called to
    the answer sent, without the clients' share of the cores (they run on the same ones)."""
    lines = (json.loads(line) for line in access_log.read_text().splitlines() if line)
    hits = [e["latency_ms"] for e in lines if e.get("status") == 200 and e.get("cache") == "hit"]
    return {"hit_server_p50_ms": _percentile(hits, 50), "hit_server_p99_ms": _percentile(hits, 99)}


def _percentile(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return round(values[0], 2) if values else None
    return round(statistics.quantiles(values, n=100)[q - 1], 2)


# ------------------------------------------------------------------------------- the store


def build_store(root: Path, names: int, distinct: int, artifact_mib: float) -> dict[str, int]:
    """`names` tenants' forests, copies of `distinct` trained ones; name → which forest."""
    from modelhost import testing

    forests = [root / f"forest-{seed}.joblib" for seed in range(distinct)]
    for seed, path in enumerate(forests):
        if not path.exists():
            testing.random_forest(path, int(artifact_mib * MiB), seed=seed)
    which = {}
    for i in range(names):
        name = f"tenant-{i:03d}/m.joblib"
        if not (root / name).exists():
            testing.copy_artifact(forests[i % distinct], root / name)
        which[name] = i % distinct
    return which


def truths(root: Path, distinct: int, rows: list[list[float]]) -> list[Any]:
    import joblib
    import numpy as np

    features = np.asarray(rows)
    return [
        joblib.load(root / f"forest-{s}.joblib").predict_proba(features).tolist()
        for s in range(distinct)
    ]


# ------------------------------------------------------------------------------- the clients


async def drive(
    url: str, which: dict[str, int], truth: list[Any], args: argparse.Namespace, floor: bool
) -> Run:
    import aiohttp

    from modelhost.observe.exchange import parse_server_timing

    names = sorted(which)
    random.Random(7).shuffle(names)  # popularity independent of which forest a name copies
    weights = [1 / rank**args.zipf for rank in range(1, len(names) + 1)]
    rows = json.dumps(ROWS).encode()
    run = Run()
    deadline = time.monotonic() + args.duration

    async def client(seed: int, session: aiohttp.ClientSession) -> None:
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            name = rng.choices(names, weights)[0]
            run.outcomes.append(await call(session, name, which[name]))

    async def arrivals(session: aiohttp.ClientSession) -> None:
        """Open loop: Poisson arrivals at `args.rate`, whatever the server's pace."""
        rng, sent = random.Random(0), []

        async def one(name: str) -> None:
            run.outcomes.append(await call(session, name, which[name]))

        while time.monotonic() < deadline:
            await asyncio.sleep(rng.expovariate(args.rate))
            sent.append(asyncio.ensure_future(one(rng.choices(names, weights)[0])))
        await asyncio.gather(*sent)

    async def call(session: aiohttp.ClientSession, name: str, forest: int) -> Outcome:
        started = time.monotonic()
        path = f"{url}/models/{name}/invoke"
        query = "" if floor else "?method=predict_proba"
        headers = {"content-type": "application/json"}
        async with session.post(path + query, data=rows, headers=headers) as response:
            body = await response.read()
        latency_ms = (time.monotonic() - started) * 1000
        cache = response.headers.get("x-floor-cache" if floor else "x-modelhost-cache", "")
        right = response.status == 200 and json.loads(body)["predictions"] == truth[forest]
        timings = parse_server_timing(response.headers.get("server-timing", ""))
        return Outcome(
            started=started,
            model=name,
            status=response.status,
            hit=cache == "hit",
            latency_ms=latency_ms,
            right=right,
            timings=timings,
        )

    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=OPEN_LOOP_CONNECTIONS if args.rate else args.clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        began = time.monotonic()
        if args.rate:
            await arrivals(session)
        else:
            await asyncio.gather(*(client(seed, session) for seed in range(args.clients)))
        run.seconds = time.monotonic() - began
    return run


ROWS: list[list[float]] = []
OPEN_LOOP_CONNECTIONS = 256


class StatsPoller:
    """GET /stats every half second while the clients run: models loaded, baseline, committed."""

    def __init__(self, url: str) -> None:
        import threading

        self.url, self.samples = url, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        while not self._stop.wait(0.5):
            try:
                self.samples.append(httpx.get(f"{self.url}/stats", timeout=5).json()["memory"])
            except (httpx.HTTPError, ValueError):
                continue

    def __enter__(self) -> StatsPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def medians(self) -> dict[str, float]:
        keys = ("loadedModels", "baselineBytes", "headroomBytes", "committedBytes", "pssBytes")
        return {k: statistics.median(s[k] for s in self.samples) for k in keys if self.samples}


def sampled(server: Any, coroutine: Any, every_ms: float) -> Run:
    """Run the clients while sampling the server's PSS every `every_ms`."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
    from pss_sampler import PssSampler

    sampler = PssSampler(server.pid, every_ms / 1000)
    sampler.start()
    try:
        run: Run = asyncio.run(coroutine)
    finally:
        sampler.stop()
    run.peak_pss_bytes = sampler.peak_bytes
    return run


# ------------------------------------------------------------------------------- modelhost


def alone_footprints(store: Path, which: dict[str, int], work: Path, args: Any) -> dict[str, Any]:
    """Each forest loaded alone in a fresh server (one at a time): its footprint and what its
    load reserves while unpickling; the idle baseline before, and once every forest has been
    loaded and unloaded (the server's first uses grow it by a few MB, for good)."""
    import httpx

    from modelhost import testing

    first = {forest: name for name, forest in sorted(which.items(), reverse=True)}
    serve = testing.serve_args(store, work / "alone-cache", workers=args.workers)
    with testing.RunningServer([*serve, "--memory-budget", "8GiB"], work) as server:
        baseline = httpx.get(f"{server.url}/stats").json()["memory"]["baselineBytes"]
        footprints, reserves = {}, {}
        for forest, name in sorted(first.items()):
            httpx.post(f"{server.url}/models/{name}/invoke", json=ROWS, timeout=120)
            described = httpx.get(f"{server.url}/models/{name}").json()
            footprints[forest] = int(described["memoryBytes"])
            reserves[forest] = int(described["loadReserveBytes"])
        for name in first.values():
            httpx.delete(f"{server.url}/models/{name}", timeout=120)
        time.sleep(2.5)  # the memory watch's next readings, once nothing is loaded
        warm = httpx.get(f"{server.url}/stats").json()["memory"]["baselineBytes"]
    return {
        "baseline": int(baseline),
        "baseline_warm": int(warm),
        "footprints": footprints,
        "reserves": reserves,
    }


def budget_of(alone: dict[str, Any], args: Any) -> int:
    """Room for `args.room` of the largest forest; with load headroom, beside the served
    server's baseline and what each worker's load in flight needs above a footprint (the floor's
    LRU holds its room and loads one more beyond it, unbudgeted)."""
    footprint = max(alone["footprints"].values())
    if not args.load_headroom:
        return alone["baseline"] + args.room * footprint
    transient = max(alone["reserves"].values()) - footprint
    return alone["baseline_warm"] + args.room * footprint + args.workers * transient


def run_modelhost(store: Path, which: dict[str, int], truth: list[Any], args: Any) -> dict:
    """The churn against modelhost, in a folder removed after (its cache holds 800 MB)."""
    with tempfile.TemporaryDirectory(prefix="churn-") as work:
        return _run_modelhost(store, which, truth, args, Path(work))


def _run_modelhost(
    store: Path, which: dict[str, int], truth: list[Any], args: Any, work: Path
) -> dict:
    import httpx

    from modelhost import testing
    from modelhost.toolkit.simulate.loading import load_samples

    alone = alone_footprints(store, which, work, args)
    footprint = max(alone["footprints"].values())
    budget = budget_of(alone, args)
    access_log = work / "access.jsonl"  # the server's own latency of each request
    serve = testing.serve_args(
        store, work / "cache", workers=args.workers, memory_budget=budget
    ) + ["--access-log", str(access_log), *args.serve_arg]
    prefix = ("taskset", "-c", args.server_cpus) if args.server_cpus else ()
    with testing.RunningServer(serve, work, prefix=prefix) as server:
        processes = process_tree(server.pid)
        before = cpu_seconds(processes)
        with StatsPoller(server.url) as stats:
            run = sampled(
                server, drive(server.url, which, truth, args, floor=False), args.pss_every_ms
            )
        cpu = cpu_per_request(processes[0], cpu_spent(before), len(run.outcomes))
        per_batch = requests_per_batch(httpx.get(f"{server.url}/metrics", timeout=30).text)
        sizing = httpx.get(f"{server.url}/sizing", timeout=30).json()  # the live curve
        log = server.log_text()
        loads, evictions = server.events("load"), server.events("evict")
    errors = footprint_errors(load_footprints(loads, which), alone["footprints"])
    model_bytes = model_sizes(loads, which, alone["footprints"])
    room = room_for_models(budget, stats.medians())
    samples = load_samples(loads)
    sizes = sorted(abs(e) for e in errors)
    return {
        **run.summary(),
        "budget_bytes": budget,
        "peak_pss_bytes": run.peak_pss_bytes,
        "alone_footprint_bytes": alone["footprints"],
        "footprint_error_max": round(sizes[-1], 3) if errors else None,
        "footprint_error_median": round(statistics.median(sizes), 3) if errors else None,
        "footprint_error_p90": round(sizes[int(0.9 * (len(sizes) - 1))], 3) if errors else None,
        "footprint_errors_signed": [round(e, 3) for e in errors],
        "loads": len(errors),
        "no_load_ratio": round(1 - len(errors) / max(1, len(run.outcomes)), 3),
        **hits_at_the_server(access_log),
        "tracebacks": log.count("Traceback"),
        "evict_ms_p50": _percentile(durations_ms(evictions), 50),
        "evict_ms_p99": _percentile(durations_ms(evictions), 99),
        "evict_worker_ms_p50": _percentile(
            [e["detail"].get("worker_ms", 0) for e in evictions], 50
        ),
        "stats_medians": stats.medians(),
        "cpu_ms_per_request": cpu,
        "requests_per_batch": per_batch,
        "baseline_alone_bytes": alone["baseline"],
        "baseline_served_bytes": alone["baseline_warm"],
        "load_reserve_bytes": max(alone["reserves"].values()),
        "footprint_bytes": footprint,
        "simulated": simulated(run, model_bytes, room),
        "simulated_in_line": simulated_in_line(run, model_bytes, room, args.workers, samples),
        "simulated_room_bytes": room,
        "sizing": sizing,
    }


def requests_per_batch(metrics: str) -> float:
    """Requests a batch sent to the workers, from a scrape of /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(metrics)
    totals = {sample.name: sample.value for family in families for sample in family.samples}
    batches = max(1.0, totals.get("modelhost_batches_total", 0.0))
    return round(totals.get("modelhost_batched_requests_total", 0.0) / batches, 2)


def cpu_per_request(frontend_pid: int, spent: dict[int, float], requests: int) -> dict:
    """CPU ms a request of the frontend and of the other processes together."""
    frontend = spent.pop(frontend_pid, 0.0)
    per = 1000 / max(1, requests)
    return {"frontend": round(frontend * per, 2), "workers": round(sum(spent.values()) * per, 2)}


def load_footprints(loads: list[dict[str, Any]], which: dict[str, int]) -> list[tuple[int, int]]:
    """(forest, bytes) of each load event."""
    found = ((which.get(event.get("model", "")), event.get("bytes")) for event in loads)
    return [(forest, int(size)) for forest, size in found if forest is not None and size]


def model_sizes(
    loads: list[dict[str, Any]], which: dict[str, int], alone: dict[int, int]
) -> dict[str, int]:
    """Each model's median footprint in the run's load events (its forest's alone if none)."""
    measured: dict[str, list[int]] = {}
    for event in loads:
        measured.setdefault(event["model"], []).append(int(event["bytes"]))
    return {
        name: int(statistics.median(measured[name])) if name in measured else alone[forest]
        for name, forest in which.items()
    }


def room_for_models(budget: int, medians: dict[str, float]) -> int:
    """What the server's budget left its models during the run: less the baseline and the
    headroom it kept (medians of GET /stats), as the replays' budget."""
    return int(budget - medians["baselineBytes"] - medians["headroomBytes"])


def durations_ms(events: list[dict[str, Any]]) -> list[float]:
    """How long each event's step took (an eviction: its unload in the worker, and any wait)."""
    return [event.get("duration_ms", 0.0) for event in events]


def footprint_errors(loads: list[tuple[int, int]], alone: dict[int, int]) -> list[float]:
    """Each load's footprint against its forest's footprint measured alone, signed."""
    return [(measured - alone[forest]) / alone[forest] for forest, measured in loads]


def run_trace(run: Run, sizes: dict[str, int]) -> Trace:
    """The run's requests in the order they started, each model its size."""
    from modelhost.toolkit.simulate.trace import make_trace

    ordered = sorted(run.outcomes, key=lambda o: o.started)
    models = [o.model for o in ordered]
    return make_trace(models, sizes, None, [o.started for o in ordered])


def simulated(run: Run, sizes: dict[str, int], room: int) -> dict[str, float]:
    """The hit ratio `modelhost simulate`'s replay (loads in no time) predicts on this run's
    trace, at the room the server's models had, for each policy."""
    from modelhost.cache.admission import FrequencySketch
    from modelhost.cache.policy import policy_named
    from modelhost.toolkit.simulate.replay import replay

    trace = run_trace(run, sizes)
    results = {}
    for policy in ("lru", "cost-aware"):
        for admission in (None, "tinylfu"):
            sketch = FrequencySketch() if admission else None
            hits = replay(trace, room, policy_named(policy), sketch)
            label = policy + (f"+{admission}" if admission else "")
            results[label] = round(hits / len(trace.models), 3)
    return results


def simulated_in_line(
    run: Run, sizes: dict[str, int], room: int, loaders: int, samples: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """The header's hit ratio and the share of requests that started no load, as `modelhost
    simulate --loaders` predicts them on this run's trace (one loader a worker, each load as
    the run's load events of its model say it ran), for LRU and the best policy."""
    from modelhost.cache.admission import FrequencySketch
    from modelhost.cache.policy import policy_named
    from modelhost.toolkit.simulate.loading import replay_loading

    trace = run_trace(run, sizes)
    results = {}
    for label, policy, sketch in (
        ("lru", "lru", None),
        ("cost-aware+tinylfu", "cost-aware", FrequencySketch()),
    ):
        outcomes = replay_loading(
            trace, room, policy_named(policy), loaders, admission=sketch, recorded=samples
        )
        results[label] = {
            "hit": round(outcomes.hit_ratio, 3),
            "no_load": round(outcomes.no_load_ratio, 3),
        }
    return results


# ------------------------------------------------------------------------------- the floor


def run_floor(store: Path, which: dict[str, int], truth: list[Any], args: Any) -> dict:
    import sys

    from modelhost import testing

    command = [sys.executable, str(Path(__file__).with_name("churn_floor.py")), str(store)]
    prefix = ("taskset", "-c", args.server_cpus) if args.server_cpus else ()
    args_ = ["--room", str(args.room)]
    with (
        tempfile.TemporaryDirectory(prefix="churn-floor-") as work,
        testing.RunningServer(args_, Path(work), command=command, prefix=prefix) as server,
    ):
        run = sampled(server, drive(server.url, which, truth, args, floor=True), args.pss_every_ms)
    return {**run.summary(), "peak_pss_bytes": run.peak_pss_bytes}


# ------------------------------------------------------------------------------- main


@contextlib.contextmanager
def busy_loop(cpus: str) -> Iterator[None]:
    """A process spinning on `cpus` meanwhile: other work on the servers' core ('' for none)."""
    import subprocess
    import sys

    if not cpus:
        yield
        return
    spin = ["taskset", "-c", cpus, sys.executable, "-c", "while True: pass"]
    spinner = subprocess.Popen(spin)
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100, help="model names")
    parser.add_argument("--distinct", type=int, default=10, help="forests trained")
    parser.add_argument("--artifact-mib", type=float, default=8.0, help="each forest's file")
    parser.add_argument("--zipf", type=float, default=1.0, help="popularity exponent s")
    parser.add_argument("--room", type=int, default=10, help="models the budget has room for")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open loop: requests a second, Poisson arrivals, instead of --clients in a loop",
    )
    parser.add_argument("--duration", type=float, default=40.0, help="seconds per server")
    parser.add_argument("--workers", type=int, default=1, help="modelhost --workers")
    parser.add_argument("--server-cpus", default="0", help="taskset list for servers ('' none)")
    parser.add_argument("--client-cpus", default="1", help="CPUs for the clients ('' none)")
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument(
        "--busy-loop", action="store_true", help="a process spinning on --server-cpus meanwhile"
    )
    parser.add_argument(
        "--pss-every-ms",
        type=float,
        default=250.0,
        help="how often the PSS of every server process is sampled for its peak; each sample "
        "stops the server's processes while it reads them (milliseconds per process: modelhost "
        "has four, the floor one), so sampling often costs modelhost more throughput than the "
        "floor (every 100 ms: about a tenth of modelhost's)",
    )
    parser.add_argument(
        "--load-headroom",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="budget the room beside the served baseline plus each worker's load in flight "
        "(--no-load-headroom: beside the fresh server's baseline alone, as before)",
    )
    add_serve_arg(parser)
    args = parser.parse_args()

    from modelhost import testing

    ROWS.extend(testing.digits_rows(3))
    store = RESULTS / f".churn-store-{args.distinct}x{args.artifact_mib:g}MiB"
    store.mkdir(parents=True, exist_ok=True)
    which = build_store(store, args.models, args.distinct, args.artifact_mib)
    truth = truths(store, args.distinct, ROWS)
    if args.client_cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.client_cpus.split(",")})
    with busy_loop(args.server_cpus if args.busy_loop else ""):
        results = {"args": vars(args), "modelhost": run_modelhost(store, which, truth, args)}
        if not args.skip_floor:
            results["floor"] = run_floor(store, which, truth, args)
    path = write_results("churn", results, report(results))
    print(report(results))
    print(f"\nraw results: {path}")


def report(results: dict[str, Any]) -> str:
    columns = ["throughput_rps", "hit_ratio", "hit_p50_ms", "hit_p99_ms", "miss_p50_ms"]
    columns += ["miss_p99_ms", "errors", "peak_pss_bytes"]
    rows = [
        [name, *(results[name].get(c) for c in columns)]
        for name in ("modelhost", "floor")
        if name in results
    ]
    mh = results["modelhost"]
    lines = [markdown_table(["server", *columns], rows), ""]
    if "floor" in results:
        cores = results["args"]["server_cpus"] or "all cores"
        busy = ", beside a busy loop" if results["args"]["busy_loop"] else ""
        ratio = mh["throughput_rps"] / results["floor"]["throughput_rps"]
        lines.append(f"modelhost serves {ratio:.2f}x the floor's throughput on {cores}{busy}")
    lines += [
        f"modelhost budget {mh['budget_bytes']} bytes; peak PSS {mh['peak_pss_bytes']}; "
        f"loads {mh['loads']}; footprint error median {mh['footprint_error_median']}, "
        f"p90 {mh['footprint_error_p90']}, max {mh['footprint_error_max']}; "
        f"tracebacks {mh['tracebacks']}; evictions p50 {mh['evict_ms_p50']} ms, "
        f"p99 {mh['evict_ms_p99']} ms (on the worker, p50 {mh.get('evict_worker_ms_p50')} ms); "
        f"statuses {mh['statuses']}",
        f"hits' Server-Timing p50: queue {mh.get('hit_queue_p50_ms')} ms, "
        f"infer {mh.get('hit_infer_p50_ms')} ms; hits at the server (access log) p50 "
        f"{mh.get('hit_server_p50_ms')} ms, p99 {mh.get('hit_server_p99_ms')} ms; "
        f"misses' load p50 {mh.get('miss_load_p50_ms')} ms; CPU ms a request "
        f"{mh.get('cpu_ms_per_request')}; requests a batch {mh.get('requests_per_batch')}",
        f"simulate's hit ratio on modelhost's trace, at the {mh['simulated_room_bytes']} bytes "
        f"the server's models had: {mh['simulated']}; requests that started no load (a "
        f"request that joined another's load is a miss by its header, and a hit to a "
        f"simulation, which loads in no time): {mh['no_load_ratio']}; `simulate --loaders` "
        f"(one loader a worker, each load as the run's events say; hit by the header, no "
        f"load): {mh['simulated_in_line']}",
        f"idle baseline alone {mh['baseline_alone_bytes']}, once served "
        f"{mh['baseline_served_bytes']}; footprint {mh['footprint_bytes']}, a load reserves "
        f"{mh['load_reserve_bytes']}; medians during the run "
        f"(GET /stats): {mh['stats_medians']}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
