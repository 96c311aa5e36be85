"""A ramp: one point of settings served under rising concurrency until its knee, and the choice
among the steps measured.

The knee: p99 past the limit, or throughput growing less than `min_gain`, since more users then
only queue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelhost.toolkit.bench import BenchRun, bench_summary, run_bench
from modelhost.toolkit.coldstart import cold_start
from modelhost.toolkit.loadgen import ProcessPlan
from modelhost.toolkit.payloads import payloads_by_model
from modelhost.toolkit.resources import probe_for

if TYPE_CHECKING:
    from modelhost.testing import RunningServer

Settings = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One rung of a ramp: the figures at one concurrency and what the server used."""

    settings: Settings
    concurrency: int
    throughput_rps: float
    latency_ms: dict[str, float]
    errors: int
    errors_by_status: dict[str, int]  # "429": throttled, "0": no HTTP answer
    within_limit: bool
    server_cpu_s: float = math.nan
    server_peak_pss_bytes: float = math.nan
    bytes_per_request: float = math.nan  # in + out
    first_error: str = ""  # the first error's kind, model and the server's reason
    stop: str = ""  # why the ramp ended here, if it did

    @property
    def p50_ms(self) -> float:
        return self.latency_ms["p50"]

    @property
    def p99_ms(self) -> float:
        return self.latency_ms["p99"]

    @property
    def throttled(self) -> int:
        return self.errors_by_status.get("429", 0)

    def row(self) -> dict[str, Any]:
        """Flat, for the table and CSV."""
        return {
            **self.settings,
            "concurrency": self.concurrency,
            "throughput_rps": self.throughput_rps,
            **{f"{name}_ms": value for name, value in self.latency_ms.items()},
            "errors": self.errors,
            "throttled": self.throttled,
            "errors_by_status": self.errors_by_status,
            "server_cpu_s": self.server_cpu_s,
            "server_peak_pss_mib": self.server_peak_pss_bytes / 2**20,
            "bytes_per_request": self.bytes_per_request,
            "first_error": self.first_error,
            "within_limit": self.within_limit,
            "stop": self.stop,
        }


@dataclass(frozen=True)
class Point:
    settings: Settings
    cold_start: dict[str, Any]
    steps: list[Step]


def serve_flags(settings: Settings) -> list[str]:
    return [arg for name, value in settings.items() for arg in (f"--{name}", value)]


def step_of(
    settings: Settings, concurrency: int, summary: dict[str, Any], p99_limit_ms: float
) -> Step:
    """A Step from a bench summary."""
    requests = summary["requests"]
    p99 = summary["latency_ms"]["p99"]
    errors = requests["measured"] - requests["ok"]
    by_status = {
        code: n for code, n in requests.get("by_status", {}).items() if not 0 < int(code) < 400
    }
    server = summary.get("server", {})
    examples = requests.get("error_examples", {})
    return Step(
        settings=settings,
        concurrency=concurrency,
        throughput_rps=summary["throughput_rps"],
        latency_ms=dict(summary["latency_ms"]),
        errors=errors,
        errors_by_status=by_status,
        within_limit=errors == 0 and not math.isnan(p99) and p99 <= p99_limit_ms,
        server_cpu_s=server.get("cpu_s", math.nan),
        server_peak_pss_bytes=server.get("peak_pss_bytes", math.nan),
        bytes_per_request=summary.get("bytes_per_request", math.nan),
        first_error=next(
            (f"{kind} ({e['model']}): {e['message']}" for kind, e in examples.items()), ""
        ),
    )


def ramp(
    settings: Settings,
    concurrencies: Sequence[int],
    measure: Callable[[int], dict[str, Any]],
    p99_limit_ms: float,
    min_gain: float | None = 0.05,
) -> Iterator[Step]:
    """Steps of rising concurrency until the knee, if `min_gain` is given."""
    best = 0.0
    for index, concurrency in enumerate(concurrencies):
        step = step_of(settings, concurrency, measure(concurrency), p99_limit_ms)
        last = index == len(concurrencies) - 1
        if min_gain is not None and not last:
            if not step.within_limit:
                step = dataclasses.replace(step, stop=f"p99 over {p99_limit_ms:g} ms or errors")
            elif best and step.throughput_rps < best * (1 + min_gain):
                step = dataclasses.replace(step, stop=f"throughput grew < {min_gain:.0%}")
        yield step
        if step.stop:
            return
        best = max(best, step.throughput_rps)


def recommend(steps: Sequence[Step], key: Callable[[Step], float] | None = None) -> int | None:
    """The step with the most throughput, or the least `key`, inside the limit."""
    inside = [i for i, step in enumerate(steps) if step.within_limit]
    if not inside:
        return None
    if key is None:
        return max(inside, key=lambda i: steps[i].throughput_rps)
    return min(inside, key=lambda i: key(steps[i]))


@dataclass(frozen=True)
class TuneTarget:
    """How each point is served and loaded."""

    serve_args: list[str]
    plan: ProcessPlan
    processes: int = 1
    log_dir: Path | None = None


def measure_point(
    target: TuneTarget,
    settings: Settings,
    run_steps: Callable[[Callable[[int], dict[str, Any]]], list[Step]],
) -> Point:
    """Serve with `settings`, time a cold start, and run the steps against it."""
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="modelhost-tune-") as folder:
        work = Path(folder)
        args = [*target.serve_args, "--cache-dir", str(work / "cache"), *serve_flags(settings)]
        server = testing.RunningServer(args, target.log_dir or work, env=serving_env(os.environ))
        with serving(server, settings) as server:
            aimed = dataclasses.replace(
                target.plan, target=dataclasses.replace(target.plan.target, url=server.url)
            )
            first = aimed.popularity.models[0] if aimed.popularity.models else None
            body = payloads_by_model([first or ""], aimed.payloads)[first or ""][0]
            cold = cold_start(aimed.target, first, body, aimed.timeout_s)

            def measure(concurrency: int) -> dict[str, Any]:
                plan = dataclasses.replace(aimed, concurrency=concurrency, rate_rps=0.0)
                with probe_for(server.url, server.pid) as probe:
                    run: BenchRun = run_bench(plan, target.processes)
                usage = probe.usage
                return {**bench_summary(plan, run), "server": usage._asdict()}

            return Point(settings, cold, run_steps(measure))


def serving_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A point's server reads no config.properties but --serve-arg's, and wants no key.

    A TorchServe user's ./config.properties would turn on token authorization, which bench
    cannot pass, and take the ports of the deployment it configures.
    """
    kept = {k: v for k, v in environ.items() if k not in ("MMS_CONFIG_FILE", "TS_CONFIG_FILE")}
    return {**kept, "MODELHOST_MMS_CONFIG": "", "MODELHOST_TOKEN_AUTH": "false"}


@contextlib.contextmanager
def serving(server: RunningServer, settings: Settings) -> Iterator[RunningServer]:
    """The server started; one that refuses its settings is the user's error, not a crash."""
    try:
        server.start()
    except RuntimeError:
        said = (server.log_text().strip().splitlines() or ["nothing"])[-1]
        point = " ".join(f"{n}={v}" for n, v in settings.items()) or "the --serve-arg flags"
        raise ValueError(
            f"`modelhost serve` with {point} did not start: {said} (log: {server.log_path})"
        ) from None
    try:
        yield server
    finally:
        server.stop()


def efficient_frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the (latency, cost) points no other beats on both."""
    finite = [i for i, (x, y) in enumerate(points) if math.isfinite(x) and math.isfinite(y)]
    kept, cheapest = [], math.inf
    for i in sorted(finite, key=lambda i: (points[i][0], points[i][1])):
        if points[i][1] < cheapest:
            kept.append(i)
            cheapest = points[i][1]
    return kept
