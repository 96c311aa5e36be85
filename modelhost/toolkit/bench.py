"""`bench`: several load-generator processes started together, their rows gathered.

The parent only watches, so its own work cannot slow the load.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelhost.toolkit.loadgen import Diagnostics, ProcessPlan, Row, run_plan

PROGRESS_EVERY_S = 0.2
START_DELAY_S = 0.2  # from "all processes ready" to the first send
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Progress:
    elapsed_s: float
    total_s: float
    done: int
    errors: int


@dataclass(frozen=True)
class BenchRun:
    rows: list[Row]
    diagnostics: list[Diagnostics]
    processes: int


def split_plan(plan: ProcessPlan, processes: int) -> list[ProcessPlan]:
    """The plan shared out: users dealt round, rate divided, schedules interleaved."""
    if plan.concurrency:
        processes = max(1, min(processes, plan.concurrency))
        requests = _dealt(plan.requests, processes)
        return [
            dataclasses.replace(plan, concurrency=n, requests=r, index=i)
            for i, (n, r) in enumerate(
                zip(_dealt(plan.concurrency, processes), requests, strict=True)
            )
        ]
    if plan.rate_rps <= 0:
        raise ValueError("give --concurrency N (closed loop) or --rate R (open loop)")
    if plan.requests:
        processes = max(1, min(processes, plan.requests))
    share = plan.rate_rps / processes
    return [
        dataclasses.replace(plan, rate_rps=share, offset_s=i / plan.rate_rps, requests=r, index=i)
        for i, r in enumerate(_dealt(plan.requests, processes))
    ]


def _dealt(total: int, processes: int) -> list[int]:
    return [total // processes + (i < total % processes) for i in range(processes)]


def run_bench(
    plan: ProcessPlan, processes: int, on_progress: Callable[[Progress], None] = lambda p: None
) -> BenchRun:
    plans = split_plan(plan, processes)
    context = multiprocessing.get_context("spawn")  # no fork of a parent with threads
    messages: Any = context.Queue()
    start = context.Value("d", 0.0)
    go = context.Event()
    children = [
        context.Process(target=_child, args=(p, messages, start, go), daemon=True) for p in plans
    ]
    for child in children:
        child.start()
    try:
        return _collect(
            plans, children, messages=messages, start=start, go=go, on_progress=on_progress
        )
    finally:
        for child in children:
            child.join(timeout=5)
            if child.is_alive():
                child.kill()


def _collect(
    plans: list[ProcessPlan],
    children: list[Any],
    *,
    messages: Any,
    start: Any,
    go: Any,
    on_progress: Callable[[Progress], None],
) -> BenchRun:
    _wait_ready(len(plans), messages, children)
    start.value = time.monotonic() + START_DELAY_S
    go.set()
    counts: dict[int, tuple[int, int]] = {}
    results: dict[int, tuple[list[Row], Diagnostics]] = {}
    total_s = plans[0].warmup_s + plans[0].duration_s  # an estimate with --requests
    while len(results) < len(plans):
        try:
            kind, index, *body = messages.get(timeout=PROGRESS_EVERY_S)
        except queue.Empty:
            _check_alive(children, results)
            continue
        if kind == "progress":
            counts[index] = (body[0], body[1])
        elif kind == "done":
            results[index] = (body[0], body[1])
        done, errors = (sum(c[i] for c in counts.values()) for i in (0, 1))
        on_progress(Progress(time.monotonic() - start.value, total_s, done, errors))
    rows = sorted((row for r, _ in results.values() for row in r), key=lambda r: r.intended_s)
    return BenchRun(rows, [results[i][1] for i in sorted(results)], len(plans))


def _wait_ready(count: int, messages: Any, children: list[Any]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = 0
    while ready < count:
        try:
            kind, *_ = messages.get(timeout=PROGRESS_EVERY_S)
        except queue.Empty:
            _check_alive(children, {})
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"only {ready} of {count} load-generator processes started "
                    f"in {READY_TIMEOUT_S:.0f} s"
                ) from None
            continue
        ready += kind == "ready"


def _check_alive(children: list[Any], results: dict[int, Any]) -> None:
    for index, child in enumerate(children):
        if index not in results and not child.is_alive():
            raise RuntimeError(
                f"load-generator process {index} exited with code {child.exitcode} "
                "before sending its results"
            )


def _child(plan: ProcessPlan, messages: Any, start: Any, go: Any) -> None:
    importlib.import_module(plan.client)  # before "ready", not in the run's time
    messages.put(("ready", plan.index))
    go.wait()
    counts = [0, 0]
    last = [0.0]

    def on_row(row: Row) -> None:
        counts[0] += 1
        counts[1] += bool(row.error)
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            messages.put(("progress", plan.index, counts[0], counts[1]))

    rows, diagnostics = _run(plan, start.value, on_row)
    messages.put(("progress", plan.index, counts[0], counts[1]))
    messages.put(("done", plan.index, rows, diagnostics))


def _run(
    plan: ProcessPlan, start: float, on_row: Callable[[Row], None]
) -> tuple[list[Row], Diagnostics]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(run_plan(plan, start, on_row))
    return uvloop.run(run_plan(plan, start, on_row))


def describe_load(plan: ProcessPlan) -> str:
    if plan.concurrency:
        return f"closed loop, {plan.concurrency} users"
    arrivals = "Poisson" if plan.poisson else "constant"
    return f"open loop, {plan.rate_rps:g} req/s {arrivals}"


def bench_summary(plan: ProcessPlan, run: BenchRun) -> dict[str, Any]:
    """summary.json: the plan, the figures, the timeline and the generator's health."""
    from modelhost.toolkit import stats

    window_s = (
        stats.measured_window_s(run.rows, plan.warmup_s) if plan.requests else plan.duration_s
    )
    tenants = {"tenants": stats.tenant_summary(run.rows, window_s)} if plan.tenants else {}
    return {
        "target": plan.target.url,
        "load": describe_load(plan),
        "concurrency": plan.concurrency or None,
        "rate_rps": plan.rate_rps or None,
        "duration_s": window_s,
        "requests_asked": plan.requests or None,
        "warmup_s": plan.warmup_s,
        "client": plan.client,
        **stats.summarize(run.rows, window_s),
        **tenants,
        "timeline": stats.timeline(stats.measured(run.rows)),
        "latency_by_concurrency": stats.latency_by_concurrency(run.rows),
        "generator": stats.generator_health(run.diagnostics, open_loop=not plan.concurrency),
    }
