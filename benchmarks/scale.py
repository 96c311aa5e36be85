"""Many models: what the server's costs do as the number of model names grows.

A store of N small models (hard links to a few iris models padded to a few hundred KiB: even
names plain `.joblib` files, odd names `.tar.gz` archives) and a warm disk cache seeded as a
restarted server finds it (most archives already unpacked, written in the disk tier's entry
format). A fixed memory budget with room for about `--room` models, measured on a probe server
with an empty cache. Then, each phase bounded in time:

- start-up on the warm cache: seconds from the process start to the first `/ping` 200;
- a listing page (`GET /models?limit=100`) and a `/metrics` scrape, at start and after the pass;
- the pass: `--clients` clients request fresh names in a random order (misses: a plain file read
  in place, an archive's warm entry, an archive not yet unpacked), latency at the client and at
  the server (its access log); the frontend's PSS before and after, per name seen;
- models loaded at the budget (`/stats`, and `GET /models?state=loaded` where the server has it);
- hits: the clients invoke a hot set that fits the budget;
- a walk of the listing through `next_page_token`, as deep as its time allows;
- registrations: 3 clients hit while no client, one client, or one client of a twin server
  (same store, a hard-linked copy of the cache) POSTs `/models` with archives, in rotating
  windows: the twin's windows cost the machine the same work without sharing the hit server,
  so the move they show is the cores' and not the server's;
- a second start on the same cache, once the server has had a run to index it.

    python benchmarks/scale.py                               # N = 1k, 10k, 100k in turn
    python benchmarks/scale.py --names 1000 --quick          # small phases, a minute or so
    python benchmarks/scale.py --names 100000 --million      # 1,000,000 as well (slow to seed)
    python benchmarks/scale.py --names 222222 --startup-only # 100,000 warm entries: start-ups
    python benchmarks/scale.py --checkout /tmp/at-abc1234 --commit abc1234   # another commit

where `git archive abc1234 modelhost | tar -x -C /tmp/at-abc1234` made the checkout: the package
of a named commit, untouched by edits in the working tree while the run lasts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import add_serve_arg, machine, markdown_table, write_results

KiB = 2**10
LINKS_PER_FILE = 50_000  # ext4 refuses a file's 65,000th hard link
PLAIN, WARM, UNPACK = "plain", "warm", "unpack"  # a name's kind: how its miss is served
STEADY = "steady"  # the misses of the later half of the pass, whatever their kind
CHECKOUT: list[Path | None] = [None]  # the folder whose `modelhost` the servers run, if given


# ------------------------------------------------------------------------------- the store


def name_of(i: int) -> str:
    """The i-th model name: plain files and archives alternate, a folder per thousand."""
    return f"t{i // 1000:04d}/m{i:07d}" + (".joblib" if i % 2 == 0 else ".tar.gz")


def kind_of(i: int) -> str:
    """One archive in ten is left out of the warm cache, for misses that unpack."""
    return PLAIN if i % 2 == 0 else UNPACK if i % 20 == 1 else WARM


def build_sources(root: Path, distinct: int, pad_bytes: int) -> list[Path]:
    """`distinct` padded iris models, each as a folder holding `model.joblib` and its .tar.gz."""
    from modelhost import testing

    folders = []
    for seed in range(distinct):
        folder = root / f"source-{seed}"
        testing.padded_logreg(folder / "model.joblib", pad_bytes, seed=seed)
        testing.tar_gz_of(folder, root / f"source-{seed}.tar.gz")
        folders.append(folder)
    return folders


def linkable(sources: list[Path], names: int) -> list[Path]:
    """Copies of the sources, enough that no file takes more hard links than ext4 allows."""
    groups = -(-names // LINKS_PER_FILE)
    copies = list(sources)
    for k in range(len(sources), len(sources) * groups):
        original = sources[k % len(sources)]
        copy = original.with_name(f"{original.name}-{k}")
        shutil.copytree(original, copy)
        shutil.copyfile(f"{original}.tar.gz", f"{copy}.tar.gz")
        copies.append(copy)
    return copies


def build_store(store: Path, sources: list[Path], names: int) -> dict[str, str]:
    """Hard links to the sources under N names; name → kind."""
    kinds = {}
    for i in range(names):
        name, source = name_of(i), sources[i % len(sources)]
        target = store / name
        if i % 1000 == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
        os.link(source / "model.joblib" if i % 2 == 0 else f"{source}.tar.gz", target)
        kinds[name] = kind_of(i)
    return kinds


def seed_cache(cache: Path, store: Path, sources: list[Path], kinds: dict[str, str]) -> int:
    """Entry folders for the warm archives, as modelhost/cache/disk.py's `_publish` writes
    them (its record, the unpacked folder as payload), the file a hard link; how many."""
    from modelhost.cache.disk import ENTRY_FILE, entry_folder_name
    from modelhost.cache.stores import Stores

    stores, entries = Stores(str(store)), cache / "models"
    entries.mkdir(parents=True, exist_ok=True)
    seeded = 0
    for i, (name, kind) in enumerate(kinds.items()):
        if kind == WARM:
            url = stores.default.url_of(name)
            folder = entries / entry_folder_name(name)
            _entry(folder / ENTRY_FILE, name, url, sources[i % len(sources)])
            seeded += 1
    return seeded


def _entry(record_path: Path, name: str, url: str, source: Path) -> None:
    payload = record_path.parent / "model"
    payload.mkdir(parents=True)
    os.link(source / "model.joblib", payload / "model.joblib")
    record = {"name": name, "source": url, "etag": None, "checked_at": 0.0, "payload": "model"}
    record_path.write_text(json.dumps(record))


# ------------------------------------------------------------------------------- the server


def serve_args(store: Path, cache: Path, work: Path, budget: str, extra: list[str]) -> list[str]:
    from modelhost import testing
    from modelhost.resources import disk_size_bytes

    # the tier counts each hard link's full size: the largest budget the server takes, the
    # volume's size, keeps the warm cache while it counts less (--million: 256 GiB)
    settings = {"workers": 1, "memory_budget": budget, "disk_budget": disk_size_bytes(cache)}
    flags = testing.serve_args(store, cache, **settings)
    return [*flags, "--access-log", str(work / "access.jsonl"), *extra]


@contextlib.contextmanager
def timed_start(args: list[str], work: Path, timeout_s: float) -> Iterator[tuple[Any, float]]:
    """A running server and the seconds from its process start to its first `/ping` 200;
    stopped (its process group) on the way out."""
    from modelhost import testing

    server = testing.RunningServer(args, work, startup_timeout_s=timeout_s, cwd=CHECKOUT[0])
    started = time.monotonic()
    with server:
        yield server, time.monotonic() - started


def pss_bytes(pid: int) -> int:
    """Proportional set size of one process (the frontend, without its workers)."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * KiB
    raise RuntimeError(f"no Pss: line in /proc/{pid}/smaps_rollup")


def probe_budget(work: Path, sources: list[Path], room: int, extra: list[str]) -> dict[str, Any]:
    """Baseline and largest footprint on a server with an empty cache; the budget for `room`."""
    import httpx

    from modelhost import testing

    store = work / "probe-store"
    for i, source in enumerate(sources):
        testing.copy_artifact(source / "model.joblib", store / f"p{i}.joblib")
    args = serve_args(store, work / "probe-cache", work, "8GiB", extra)
    with timed_start(args, work, 120) as (server, _), httpx.Client(timeout=60) as client:
        baseline = client.get(f"{server.url}/stats").json()["memory"]["baselineBytes"]
        footprints = [_footprint(client, server.url, f"p{i}.joblib") for i in range(len(sources))]
    footprint = max(footprints)
    return {"baseline": baseline, "footprint": footprint, "budget": baseline + room * footprint}


def _footprint(client: Any, url: str, name: str) -> int:
    from modelhost import testing

    client.post(f"{url}/models/{name}/invoke", json=testing.iris_rows(1)).raise_for_status()
    return int(client.get(f"{url}/models/{name}").json()["memoryBytes"])


# ------------------------------------------------------------------------------- the clients


@dataclass(kw_only=True)
class Outcome:
    name: str
    status: int
    cache: str
    wall_ms: float
    started: float
    timings: dict[str, float] = field(default_factory=dict)


ROWS = b"[[5.1, 3.5, 1.4, 0.2]]"


async def invoke(session: Any, url: str, name: str) -> Outcome:
    """One invocation, timed at the client, with the server's cache header and timings."""
    from modelhost.observe.exchange import parse_server_timing

    started = time.monotonic()
    headers = {"content-type": "application/json"}
    async with session.post(f"{url}/models/{name}/invoke", data=ROWS, headers=headers) as answer:
        await answer.read()
    wall_ms = (time.monotonic() - started) * 1000
    timings = parse_server_timing(answer.headers.get("server-timing", ""))
    cache = answer.headers.get("x-modelhost-cache", "")
    return Outcome(
        name=name,
        status=answer.status,
        cache=cache,
        wall_ms=wall_ms,
        started=started,
        timings=timings,
    )


async def register(session: Any, url: str, name: str, archive: str) -> Outcome:
    """One `POST /models` of an archive under a new name, timed at the client."""
    started = time.monotonic()
    async with session.post(f"{url}/models", json={"model_name": name, "url": archive}) as answer:
        await answer.read()
    return Outcome(
        name=name,
        status=answer.status,
        cache="",
        wall_ms=(time.monotonic() - started) * 1000,
        started=started,
    )


Call = Callable[[Any, random.Random], Any]  # (session, rng) → an awaitable Outcome, or None


async def clients(calls: list[Call], seconds: float) -> list[Outcome]:
    """Each call function in a client loop of its own until `seconds` pass or it returns None;
    the outcomes, in the order they ended."""
    import aiohttp

    deadline = time.monotonic() + seconds
    outcomes: list[Outcome] = []

    async def loop(call: Call, seed: int, session: Any) -> None:
        rng = random.Random(seed)
        while time.monotonic() < deadline and (pending := call(session, rng)) is not None:
            outcomes.append(await pending)

    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=len(calls))
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(loop(c, seed, session) for seed, c in enumerate(calls)))
    return outcomes


def fresh_names(url: str, order: list[str]) -> Call:
    """Calls that walk `order` once, shared between the clients: every request a new name."""
    position = iter(order)
    return lambda session, rng: _next_invoke(session, url, position)


def _next_invoke(session: Any, url: str, position: Iterable[str]) -> Any:
    name = next(iter(position), None)
    return None if name is None else invoke(session, url, name)


def hot_names(url: str, hot: list[str]) -> Call:
    return lambda session, rng: invoke(session, url, rng.choice(hot))


def paced(call: Call, per_s: float) -> Call:
    """`call`, started at most `per_s` times a second (0: as soon as the last one answers)."""
    if not per_s:
        return call
    due = [time.monotonic()]

    async def on_time(session: Any, rng: random.Random) -> Outcome:
        await asyncio.sleep(max(0.0, due[0] - time.monotonic()))
        due[0] = max(due[0] + 1 / per_s, time.monotonic())
        return await call(session, rng)  # type: ignore[no-any-return]

    return on_time


def registrations(url: str, archives: list[str]) -> Call:
    """Calls that register the archives in turn under new names."""
    count = iter(range(10**9))
    return lambda session, rng: _next_register(session, url, archives, next(count))


def _next_register(session: Any, url: str, archives: list[str], k: int) -> Any:
    return register(session, url, f"reg/r{k:07d}.tar.gz", archives[k % len(archives)])


# ------------------------------------------------------------------------------- figures


def percentile(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return round(values[0], 2) if values else None
    return round(statistics.quantiles(values, n=100)[q - 1], 2)


def spread(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}


def access_lines(work: Path, since: float) -> list[dict[str, Any]]:
    """The access log's lines from `since` (wall-clock seconds) on."""
    path = work / "access.jsonl"
    lines = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [line for line in lines if line.get("time", 0) >= since]


def misses(outcomes: list[Outcome], log: list[dict[str, Any]], kinds: dict[str, str]) -> dict:
    """Latency of the pass's misses by kind, at the client and at the server."""
    ok = [o for o in outcomes if o.status == 200 and o.cache != "hit"]
    served = [e for e in log if e.get("status") == 200 and e.get("cache") not in (None, "hit")]
    found = {}
    for kind in (PLAIN, WARM, UNPACK):
        client = [o.wall_ms for o in ok if kinds.get(o.name) == kind]
        lines = [e for e in served if kinds.get(e.get("model", "")) == kind]
        server = [e["latency_ms"] for e in lines]
        load = [e["load_ms"] for e in lines if "load_ms" in e]
        found[kind] = {"client": spread(client), "server": spread(server), "load": spread(load)}
    found[STEADY] = {"server": spread([e["latency_ms"] for e in steady(served)])}
    return found


def steady(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The later half of the misses: the budget is full by then at every N, so each evicts."""
    ordered = sorted(lines, key=lambda e: e.get("time", 0))
    return ordered[len(ordered) // 2 :]


def hits(outcomes: list[Outcome], log: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency of the hits, at the client and at the server; the share of requests they were."""
    client = [o.wall_ms for o in outcomes if o.status == 200 and o.cache == "hit"]
    server = [e["latency_ms"] for e in log if e.get("status") == 200 and e.get("cache") == "hit"]
    share = round(len(client) / max(1, len(outcomes)), 3)
    return {"client": spread(client), "server": spread(server), "hit_ratio": share}


def rates(outcomes: list[Outcome]) -> dict[str, Any]:
    """Requests a second over the phase, its first and its last tenth; statuses."""
    ordered = sorted(o.started for o in outcomes)
    tenth = max(2, len(ordered) // 10)
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[str(o.status)] = statuses.get(str(o.status), 0) + 1
    first, last = _rate(ordered[:tenth]), _rate(ordered[-tenth:])
    return {
        "requests": len(outcomes),
        "per_s": round(_rate(ordered) or 0.0, 1),
        "first_tenth_per_s": round(first, 1) if first else None,
        "last_tenth_per_s": round(last, 1) if last else None,
        "statuses": statuses,
        "not_ok": len(outcomes) - statuses.get("200", 0),
    }


def _rate(starts: list[float]) -> float | None:
    """Requests a second over a run of start times."""
    return len(starts) / max(starts[-1] - starts[0], 1e-3) if len(starts) > 1 else None


# ------------------------------------------------------------------------------- probes


def timed_get(client: Any, url: str, repeats: int) -> dict[str, Any]:
    """Median and max of `repeats` GETs at the client, and the last body's size."""
    walls, size = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        answer = client.get(url)
        walls.append((time.perf_counter() - started) * 1000)
        size = len(answer.content)
    return {
        "status": answer.status_code,
        "median_ms": round(statistics.median(walls), 2),
        "max_ms": round(max(walls), 2),
        "bytes": size,
    }


def listing_and_scrape(client: Any, url: str, repeats: int) -> dict[str, Any]:
    return {
        "listing_page": timed_get(client, f"{url}/models?limit=100", repeats),
        "scrape": timed_get(client, f"{url}/metrics", repeats),
    }


def walk_listing(client: Any, url: str, seconds: float) -> dict[str, Any]:
    """Follow next_page_token from the first page until the end or `seconds` pass."""
    deadline, token, pages, last_ms, names = time.monotonic() + seconds, None, 0, 0.0, 0
    while True:
        params = {"limit": 100, **({"next_page_token": token} if token else {})}
        started = time.perf_counter()
        body = client.get(f"{url}/models", params=params).json()
        last_ms, pages = (time.perf_counter() - started) * 1000, pages + 1
        names += len(body.get("models", []))
        token = body.get("next_page_token") or body.get("nextPageToken")
        if not token or time.monotonic() > deadline:
            break
    return {
        "pages": pages,
        "names": names,
        "reached_end": not token,
        "deepest_page_ms": round(last_ms, 2),
    }


def loaded_models(client: Any, url: str) -> dict[str, Any]:
    """Loaded models by /stats, and by `GET /models?state=loaded` if the filter is honoured."""
    stats = client.get(f"{url}/stats").json()["memory"]
    answer = client.get(f"{url}/models?state=loaded&limit=1000")
    listed = answer.json().get("models", []) if answer.status_code == 200 else []
    honoured = answer.status_code == 200 and all(m.get("state") == "loaded" for m in listed)
    return {
        "stats_loaded": stats.get("loadedModels"),
        "baseline_bytes": stats.get("baselineBytes"),
        "budget_bytes": stats.get("budgetBytes"),
        "state_filter": honoured,
        "listed_loaded": len(listed) if honoured else None,
    }


# ------------------------------------------------------------------------------- one N


@dataclass
class Plan:
    """The phases' lengths in seconds."""

    pass_s: float
    hit_s: float
    register_s: float
    walk_s: float
    repeats: int


def run_one(n: int, args: argparse.Namespace, plan: Plan, budget: dict[str, Any]) -> dict:
    """Store, warm cache and every phase for N names; the figures."""
    work = Path(tempfile.mkdtemp(prefix=f"scale-{n}-", dir=args.work))
    try:
        return _run_one(work, n, args, plan, budget)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run_one(work: Path, n: int, args: argparse.Namespace, plan: Plan, budget: dict) -> dict:
    began = time.monotonic()
    sources = build_sources(work / "sources", args.distinct, args.pad_kib * KiB)
    sources = linkable(sources, n)
    kinds = build_store(work / "store", sources, n)
    seeded = seed_cache(work / "cache", work / "store", sources, kinds)
    result: dict[str, Any] = {
        "names": n,
        "warm_entries": seeded,
        "seed_s": round(time.monotonic() - began, 1),
    }
    print(f"N={n}: store and {seeded} warm entries in {result['seed_s']} s", flush=True)
    serve = serve_args(work / "store", work / "cache", work, str(budget["budget"]), args.serve_arg)
    first = start_only if args.startup_only else phases
    result["first"] = first(serve, work, kinds, args, plan)
    result["second_start_entries"] = cache_entries(work / "cache")
    result["second_start_fast_copies"] = len(list((work / "cache").glob("fast-copies/*")))
    with timed_start(serve, work, args.startup_timeout_s) as (server, second_s):
        result["second_start_s"] = round(second_s, 2)
        result["second_start_frontend_pss_bytes"] = pss_bytes(server.pid)
    return result


def cache_entries(cache: Path) -> int:
    """Entry folders a starting server finds (half-built ones aside)."""
    return sum(1 for e in os.scandir(cache / "models") if not e.name.startswith(".tmp-"))


def start_only(serve: list[str], work: Path, kinds: dict, args: Any, plan: Plan) -> dict:
    """Only a start on the warm cache, kept up until the disk tier's total settles (a server
    that indexes its cache in the background has then done so), for the second start."""
    import httpx

    with (
        timed_start(serve, work, args.startup_timeout_s) as (server, startup_s),
        httpx.Client(timeout=60) as client,
    ):
        print(f"  start-up to /ping: {startup_s:.1f} s", flush=True)
        found = {"startup_s": round(startup_s, 2), "entries": cache_entries(work / "cache")}
        found["frontend_pss_start_bytes"] = pss_bytes(server.pid)
        found["settled_s"] = settle(client, server.url, args.index_wait_s)
        found["frontend_pss_settled_bytes"] = pss_bytes(server.pid)
    return found


def settle(client: Any, url: str, most_s: float) -> float:
    """Seconds until `/stats`' disk total held still for 3 s, at most `most_s`."""
    began = time.monotonic()
    last, still_since = None, began
    while time.monotonic() - began < most_s:
        used = client.get(f"{url}/stats").json()["disk"]["usedBytes"]
        if used != last:
            last, still_since = used, time.monotonic()
        elif time.monotonic() - still_since >= 3:
            break
        time.sleep(0.5)
    return round(time.monotonic() - began, 1)


def phases(serve: list[str], work: Path, kinds: dict[str, str], args: Any, plan: Plan) -> dict:
    import httpx

    with (
        timed_start(serve, work, args.startup_timeout_s) as (server, startup_s),
        httpx.Client(timeout=120) as client,
    ):
        print(f"  start-up to /ping: {startup_s:.1f} s", flush=True)
        found: dict[str, Any] = {"startup_s": round(startup_s, 2)}
        found["entries"] = cache_entries(work / "cache")
        found["frontend_pss_start_bytes"] = pss_bytes(server.pid)
        found["at_start"] = listing_and_scrape(client, server.url, plan.repeats)
        found["pass"] = the_pass(server, work, kinds, args, plan)
        found["loaded_after_pass"] = loaded_models(client, server.url)
        found["hits"] = hit_phase(server.url, work, kinds, args, plan)
        found["loaded_after_hits"] = loaded_models(client, server.url)
        found["after_pass"] = listing_and_scrape(client, server.url, plan.repeats)
        found["walk"] = walk_listing(client, server.url, plan.walk_s)
        with twin_of(serve, work, args) as twin:
            found["registration"] = registration_phase(
                server.url, twin.url, work=work, kinds=kinds, args=args, plan=plan
            )
    return found


@contextlib.contextmanager
def twin_of(serve: list[str], work: Path, args: Any) -> Iterator[Any]:
    """A second server on the same store, its cache a hard-linked copy of the first's (less the
    index, which the twin rebuilds: a link would share the first's database)."""
    twin = work / "twin"
    twin.mkdir()
    subprocess.run(["cp", "-al", str(work / "cache"), str(twin / "cache")], check=True)
    for index in (twin / "cache").glob("disk-index.sqlite3*"):
        index.unlink()
    swapped = {str(work / "cache"): str(twin / "cache"), str(work / "access.jsonl"): os.devnull}
    with timed_start([swapped.get(a, a) for a in serve], twin, args.startup_timeout_s) as started:
        yield started[0]


def the_pass(server: Any, work: Path, kinds: dict[str, str], args: Any, plan: Plan) -> dict:
    """Fresh names in a random order until all are seen or the time is up; frontend PSS."""
    order = sorted(kinds)
    random.Random(7).shuffle(order)
    before, since = pss_bytes(server.pid), time.time()
    calls = [fresh_names(server.url, order)] * args.clients  # one walk, shared
    outcomes = asyncio.run(clients(calls, plan.pass_s))
    time.sleep(0.5)  # the access log's writer flushes on its own thread
    after, seen = pss_bytes(server.pid), len({o.name for o in outcomes})
    print(f"  pass: {seen} names seen", flush=True)
    return {
        **rates(outcomes),
        "names_seen": seen,
        "misses": misses(outcomes, access_lines(work, since), kinds),
        "frontend_pss_before_bytes": before,
        "frontend_pss_after_bytes": after,
        "frontend_bytes_per_name_seen": round((after - before) / max(1, seen)),
    }


def hot_set(kinds: dict[str, str], size: int) -> list[str]:
    """`size` names of plain files and warm archives, half each, fixed by a seed."""
    plain = [n for n, k in kinds.items() if k == PLAIN]
    warm = [n for n, k in kinds.items() if k == WARM]
    rng = random.Random(11)
    return rng.sample(plain, size // 2) + rng.sample(warm, size - size // 2)


def hit_phase(url: str, work: Path, kinds: dict[str, str], args: Any, plan: Plan) -> dict:
    """The hot set loaded once, then invoked by every client for `hit_s`."""
    hot = hot_set(kinds, args.hot)
    asyncio.run(clients([fresh_names(url, hot)], plan.hit_s))
    since = time.time()
    outcomes = asyncio.run(clients([hot_names(url, hot)] * args.clients, plan.hit_s))
    time.sleep(0.5)
    return {**rates(outcomes), **hits(outcomes, access_lines(work, since))}


def registration_phase(
    url: str, twin_url: str, *, work: Path, kinds: dict, args: Any, plan: Plan
) -> dict:
    """Hit p99 of 3 clients alone, beside one client registering archives, and beside one
    registering them with the twin, in rotating windows (`--registration-rounds` of each), so
    that drift over the run falls on all three."""
    hot = hot_set(kinds, args.hot)
    asyncio.run(clients([fresh_names(url, hot)], plan.hit_s))  # the hot set loaded again
    archives = [n for n, k in kinds.items() if k != PLAIN][:200]
    registering = {
        "quiet": [],
        "registering": [paced(registrations(url, archives), args.registration_rate)],
        "twin_registering": [paced(registrations(twin_url, archives), args.registration_rate)],
    }
    since, rate = time.time(), args.registration_hit_rate
    windows: dict[str, list[tuple[float, float]]] = {kind: [] for kind in registering}
    outcomes: dict[str, list[Outcome]] = {kind: [] for kind in registering}
    for _ in range(args.registration_rounds):
        for kind, extra in registering.items():
            calls = [paced(hot_names(url, hot), rate) for _ in range(3)] + extra
            began = time.time()
            outcomes[kind] += asyncio.run(clients(calls, plan.register_s))
            windows[kind].append((began, time.time()))
    time.sleep(0.5)
    log = access_lines(work, since)
    found = {kind: hits(outcomes[kind], within(log, windows[kind])) for kind in windows}
    for kind in ("registering", "twin_registering"):
        posts = [o for o in outcomes[kind] if o.name.startswith("reg/")]
        registered = [o.wall_ms for o in posts if o.status == 200]
        found[kind]["registrations"] = {**rates(posts), **spread(registered)}
    return found


def within(log: list[dict[str, Any]], windows: list[tuple[float, float]]) -> list[dict]:
    return [e for e in log if any(start <= e["time"] < end for start, end in windows)]


# ------------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--million", action="store_true", help="add N = 1,000,000 (slow seed)")
    parser.add_argument("--quick", action="store_true", help="short phases, for a try-out")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--room", type=int, default=300, help="models the budget has room for")
    parser.add_argument(
        "--memory-budget",
        default="",
        help="the servers' budget as a size (e.g. 290MB), to compare commits at one budget; "
        "default: measured, an empty-cache server's idle baseline plus --room footprints",
    )
    parser.add_argument("--hot", type=int, default=100, help="names in the hit phases' hot set")
    parser.add_argument("--distinct", type=int, default=4, help="padded models hard-linked")
    parser.add_argument("--pad-kib", type=int, default=256, help="each model's padding")
    parser.add_argument("--pass-s", type=float, default=120.0, help="the pass over fresh names")
    parser.add_argument("--hit-s", type=float, default=20.0)
    parser.add_argument("--register-s", type=float, default=15.0, help="each registration window")
    parser.add_argument(
        "--registration-rounds",
        type=int,
        default=3,
        help="windows alone, beside registrations and beside the twin's, rotating, of "
        "--register-s each",
    )
    parser.add_argument(
        "--registration-rate",
        type=float,
        default=0.0,
        help="registrations/s in the registration window (0: back to back)",
    )
    parser.add_argument(
        "--registration-hit-rate",
        type=float,
        default=0.0,
        help="requests/s of each of the 3 hit clients in the registration windows (0: each as "
        "fast as answers come, which saturates two cores before any registration)",
    )
    parser.add_argument("--walk-s", type=float, default=30.0, help="the listing walk")
    parser.add_argument("--startup-timeout-s", type=float, default=600.0)
    parser.add_argument(
        "--startup-only", action="store_true", help="seed, then only the two start-ups"
    )
    parser.add_argument(
        "--index-wait-s", type=float, default=120.0, help="--startup-only: most wait between"
    )
    parser.add_argument("--deadline-s", type=int, default=3600, help="the whole run, then stop")
    parser.add_argument("--work", default=None, help="folder for stores and caches (a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores and caches")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=None,
        help="a folder holding the `modelhost` package to benchmark (say a `git archive` of a "
        "commit), for the servers and for the entry format; default: this checkout's",
    )
    parser.add_argument(
        "--commit", default="", help="the commit --checkout holds, recorded with the figures"
    )
    add_serve_arg(parser)
    return parser.parse_args()


def plan_of(args: argparse.Namespace) -> Plan:
    if args.quick:
        return Plan(pass_s=20, hit_s=5, register_s=5, walk_s=5, repeats=3)
    return Plan(args.pass_s, args.hit_s, args.register_s, args.walk_s, repeats=10)


def _deadline(signum: int, frame: Any) -> None:
    raise TimeoutError("scale.py ran past --deadline-s; the servers are being stopped")


def main() -> None:
    args = parse_args()
    if args.checkout:  # before any import of modelhost
        CHECKOUT[0] = args.checkout.resolve()
        sys.path.insert(0, str(CHECKOUT[0]))
    signal.signal(signal.SIGALRM, _deadline)
    signal.alarm(args.deadline_s)  # every server is stopped by its `with` on the way out
    plan, sizes = plan_of(args), sorted(set(args.names + ([10**6] if args.million else [])))
    with tempfile.TemporaryDirectory(prefix="scale-probe-", dir=args.work) as probe:
        sources = build_sources(Path(probe) / "sources", args.distinct, args.pad_kib * KiB)
        budget = probe_budget(Path(probe), sources, args.room, args.serve_arg)
    if args.memory_budget:
        budget["budget"] = args.memory_budget
    print(f"budget {budget}", flush=True)
    runs = [run_one(n, args, plan, budget) for n in sizes]
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    measured = args.commit or ("?" if args.checkout else machine()["commit"])
    results = {"server_commit": measured, "settings": settings, "plan": vars(plan)}
    results |= {"budget": budget, "runs": runs}
    table = report(runs)
    path = write_results("scale", results, table)
    print(f"{table}\n\nservers ran commit {measured}; raw results: {path}")


def report(runs: list[dict[str, Any]]) -> str:
    rows = [[label, *(_get(run, keys) for run in runs)] for label, keys in ROWS_SHOWN]
    rows = [row for row in rows if any(cell != "-" for cell in row[1:])]  # --startup-only
    return markdown_table(["figure", *(f"N = {run['names']:,}" for run in runs)], rows)


def _get(run: dict[str, Any], keys: str) -> Any:
    value: Any = run
    for key in keys.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return "-" if value is None else value


TWIN = "first.registration.twin_registering."
ROWS_SHOWN = [
    ("warm cache entries", "warm_entries"),
    ("start-up to /ping, warm cache (s)", "first.startup_s"),
    ("cache entries at the second start", "second_start_entries"),
    ("fast copies at the second start", "second_start_fast_copies"),
    ("second start-up to /ping (s)", "second_start_s"),
    ("miss, plain file: server p50 (ms)", "first.pass.misses.plain.server.p50_ms"),
    ("miss, plain file: server p99 (ms)", "first.pass.misses.plain.server.p99_ms"),
    ("miss, warm archive: server p50 (ms)", "first.pass.misses.warm.server.p50_ms"),
    ("miss, unpack: server p50 (ms)", "first.pass.misses.unpack.server.p50_ms"),
    ("miss, later half of the pass: server p50 (ms)", "first.pass.misses.steady.server.p50_ms"),
    ("miss, later half of the pass: server p99 (ms)", "first.pass.misses.steady.server.p99_ms"),
    ("miss, unpack: server p99 (ms)", "first.pass.misses.unpack.server.p99_ms"),
    ("miss, plain file: client p50 (ms)", "first.pass.misses.plain.client.p50_ms"),
    ("misses/s, first tenth of the pass", "first.pass.first_tenth_per_s"),
    ("misses/s, last tenth of the pass", "first.pass.last_tenth_per_s"),
    ("names seen in the pass", "first.pass.names_seen"),
    ("answers other than 200 in the pass", "first.pass.not_ok"),
    ("answers other than 200 in the hit phase", "first.hits.not_ok"),
    ("hit ratio of the hot set (fits the budget at 1k)", "first.hits.hit_ratio"),
    ("hit: server p50 (ms)", "first.hits.server.p50_ms"),
    ("hit: server p99 (ms)", "first.hits.server.p99_ms"),
    ("hit: client p50 (ms)", "first.hits.client.p50_ms"),
    ("hit: client p99 (ms)", "first.hits.client.p99_ms"),
    ("listing page, limit=100, at start (ms)", "first.at_start.listing_page.median_ms"),
    ("listing page, limit=100, after the pass (ms)", "first.after_pass.listing_page.median_ms"),
    ("deepest page reached (pages)", "first.walk.pages"),
    ("deepest page (ms)", "first.walk.deepest_page_ms"),
    ("/metrics scrape, after the pass (ms)", "first.after_pass.scrape.median_ms"),
    ("frontend PSS at start (bytes)", "first.frontend_pss_start_bytes"),
    ("frontend bytes per name seen", "first.pass.frontend_bytes_per_name_seen"),
    ("models loaded after the pass (/stats)", "first.loaded_after_pass.stats_loaded"),
    ("models loaded after the hits (/stats)", "first.loaded_after_hits.stats_loaded"),
    ("hits in the window, 3 clients alone", "first.registration.quiet.client.n"),
    ("hits in the window, beside registrations", "first.registration.registering.client.n"),
    ("hit p99, 3 clients alone: server (ms)", "first.registration.quiet.server.p99_ms"),
    ("hit p99, beside registrations: server (ms)", "first.registration.registering.server.p99_ms"),
    ("hit p99, 3 clients alone: client (ms)", "first.registration.quiet.client.p99_ms"),
    ("hit p99, beside registrations: client (ms)", "first.registration.registering.client.p99_ms"),
    ("hit p99, beside the twin's registrations: server (ms)", TWIN + "server.p99_ms"),
    ("hit p99, beside the twin's registrations: client (ms)", TWIN + "client.p99_ms"),
    ("registration p50 (ms)", "first.registration.registering.registrations.p50_ms"),
    ("registrations not ok", "first.registration.registering.registrations.not_ok"),
    ("registrations with the twin not ok", TWIN + "registrations.not_ok"),
]


if __name__ == "__main__":
    main()
