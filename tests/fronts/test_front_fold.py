"""A front's report folded into the main process leaves what folding its samples one at a time,
as the main process counts a request it answered itself, leaves: the metrics text, TorchServe's
series, each model's usage, the access log, the models' recency and frequency, and the sizing
curve. Two servers alike take the same steps, one folding the reports and one each sample."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from host.fakes import FOOTPRINT_BYTES, INVOCATION, AnsweringPool, host_with
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier, State
from modelhost.cache.policy import CostAwarePolicy, EvictionPolicy, LRUPolicy
from modelhost.config import Config
from modelhost.fronts.messages import Report, Sample
from modelhost.host import ModelHost
from modelhost.http.front_routes import Routing, exchange_of
from modelhost.observe.exchange import Exchange
from modelhost.observe.observer import Observer

LOADED = ("a", "b", "c", "d")
MODELS = (*LOADED, "gone")  # "gone": answered by a front, unloaded since
ROUTES = ("/models/{model:path}/invoke", "/predictions/{model}")
BUDGET_BYTES = 2**30
# models in usage and TorchServe's series: past it, the least recent goes
CAPS = [(2, 1000), (1000, 2), (1000, 1000)]


class Clock:
    """Moves when told, or by `tick` at each reading."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


@dataclass
class Server:
    host: ModelHost
    observer: Observer
    routing: Routing
    clock: Clock
    log: Path


def footprint(name: str) -> int:
    return FOOTPRINT_BYTES * (1 + "abcd".find(name[0]) % 3)


def server(
    folder: Path, policy: EvictionPolicy, clock: Clock, caps: tuple[int, int] = CAPS[0]
) -> Server:
    """A host holding LOADED, "d" never requested yet, with its observer (access log and
    TorchServe's series on)."""
    folder.mkdir()
    sketch = FrequencySketch(width=16, depth=2, sample_size=24)  # halved within a report
    memory = MemoryTier(MemoryBudget(BUDGET_BYTES, 0), policy, clock, admission=sketch)
    host = host_with(AnsweringPool(2, footprint), folder, {}, memory=memory, clock=clock)

    async def load() -> None:
        for name in LOADED[:-1]:
            await host.invoke(name, INVOCATION)
        await host.load(LOADED[-1])

    asyncio.run(load())
    log = folder / "access.log"
    observer = Observer(host, access_log=str(log), torchserve_hostname="h")
    observer.usage.max_models = caps[0]
    assert observer.torchserve is not None and observer.access_log is not None
    observer.torchserve.max_models = caps[1]
    observer.access_log.start()
    routing = Routing(host, observer, Config(model_store=str(folder)), folder)
    return Server(host, observer, routing, clock, log)


def hit_each(routing: Routing, report: Report, front: int) -> None:
    """The fold a sample at a time, as the main process counts a request it answered."""
    routing.fold(Report([], report.busy_s, report.pressed, report.in_flight), front)
    host = routing.host
    for sample in report.samples:
        resident = host.memory.get(sample.model)
        if sample.status == 200 and resident is not None and resident.state is State.LOADED:
            host.memory.begin_request(resident)
            host.memory.end_request(resident)
            host.invoke_path.on_hit(sample.model)
            host.invoke_path.on_use(sample.model, resident.footprint, True)
        assert routing.observer is not None
        routing.observer.record(exchange_of(sample))


def own_hit(model: str, status: int) -> Exchange:
    """One the main process answered itself."""
    hit = status == 200
    return Exchange(
        time=1.0,
        method="POST",
        route=ROUTES[0],
        status=status,
        duration_s=0.002,
        bytes_in=3,
        bytes_out=5,
        invocation=True,
        model=model,
        cache="hit" if hit else "disk",
        timings_ms={"queue": 0.1, "download": 0.0, "load": 2.0, "infer": 0.3},
    )


def take(step: tuple[Any, ...], one: Server, fold: Any) -> None:
    kind, value = step
    if kind == "report":
        fold(one.routing, Report(value, {}, [], len(value) % 3), 1)
    elif kind == "own":
        one.observer.record(own_hit(*value))
    elif kind == "tick":
        one.clock.now += value
    else:
        one.observer.metrics_port_text()  # a scrape folds what is held


def seen(one: Server) -> dict[str, Any]:
    """What each consumer of the fold shows, read after the steps."""
    host, observer = one.host, one.observer
    text = observer.metrics_port_text()
    memory, victims = host.memory, host.memory.victims
    walk = victims.by_policy.walk()
    order = [r.name for r in walk]
    walk.close()
    assert observer.access_log is not None and victims.admission is not None
    observer.access_log.stop()
    over = BUDGET_BYTES - memory.committed_bytes
    curve = host.sizing.curve
    assert curve is not None
    return {
        "metrics": [line for line in text.splitlines() if b"process_" not in line],
        "usage": {name: observer.usage.for_model(name) for name in MODELS},
        "log": one.log.read_bytes().splitlines(),
        "residents": {r.name: (r.hits, r.last_used, r.in_flight) for r in memory},
        "values": getattr(victims.policy, "values", None),
        "sketch": (victims.admission.rows, victims.admission.recorded),
        "order": order,
        "victims": [
            [r.name for r in memory.load_victims("new", over + k * FOOTPRINT_BYTES) or []]
            for k in (1, 3, 5)
        ],
        "sizing": host.sizing.statistics(),
        "curve": (curve.windows.histograms, curve.frequent.served, host.sizing.observed.histograms),
    }


def both(
    tmp_path: Path,
    steps: list[tuple[Any, ...]],
    policy: type[EvictionPolicy],
    caps: tuple[int, int],
) -> None:
    grouped = server(tmp_path / "grouped", policy(), Clock(), caps)
    each = server(tmp_path / "each", policy(), Clock(), caps)
    for step in steps:
        take(step, grouped, Routing.fold)
        take(step, each, hit_each)
    grouped_seen, each_seen = seen(grouped), seen(each)
    assert summed(grouped_seen) == pytest.approx(summed(each_seen))
    assert grouped_seen == each_seen


def summed(seen: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The usage's sums of times, taken out: added in other groups, they agree to rounding."""
    usage = seen["usage"].items()
    return {(name, part): ms for name, each in usage for part, ms in each.pop("totalMs").items()}


ERRORS = {400: "BadInput", 500: "WorkerDied", 504: "Timeout"}  # as a front sends them


def sample(time: float, route: str, model: str, status: int, *figures: Any) -> Sample:
    return Sample(time, route, model, status, *figures, ERRORS.get(status))


samples = st.builds(
    sample,
    st.floats(1e9, 2e9),
    st.sampled_from(ROUTES),
    st.sampled_from(MODELS),
    st.sampled_from([200] * 6 + [400, 500, 504]),
    st.floats(0.0, 200.0),  # seconds
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.floats(0.0, 5000.0),  # ms
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("report"), st.lists(samples, max_size=6)),
        st.tuples(st.just("report"), st.lists(samples, min_size=30, max_size=120)),
        st.tuples(st.just("own"), st.tuples(st.sampled_from(MODELS), st.sampled_from([200, 507]))),
        st.tuples(st.just("tick"), st.floats(0.0, 4000.0)),
        st.tuples(st.just("scrape"), st.none()),
    ),
    max_size=8,
)


@pytest.fixture(autouse=True)
def series_created_at_a_fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A series is stamped with the time it is made, unless a hit's answer made it."""
    monkeypatch.setattr(time, "time", lambda: 1e9)


def hits(*models: str) -> list[Sample]:
    return [Sample(1e9, ROUTES[0], model, 200, 0.25, 10, 20, 3.0) for model in models]


# an error is held, not counted, when the hits after it are checked against the series' cap
AN_ERROR_BETWEEN_HITS = [
    *hits("a"),
    sample(1e9, ROUTES[0], "c", 400, 0.0, 0, 0, 0.0),
    *hits("a", "b", "a"),
]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=steps,
    policy=st.sampled_from([CostAwarePolicy, LRUPolicy]),
    caps=st.sampled_from(CAPS),
)
@example(steps=[("own", ("a", 200)), ("report", hits("a"))], policy=LRUPolicy, caps=CAPS[2])
@example(steps=[("report", hits("a", "b", "c", "a"))], policy=LRUPolicy, caps=CAPS[0])
@example(steps=[("report", AN_ERROR_BETWEEN_HITS)], policy=LRUPolicy, caps=CAPS[0])
@example(steps=[("report", hits("a", "b", "c", "a"))], policy=LRUPolicy, caps=CAPS[1])
def test_a_folded_report_counts_as_its_samples_one_by_one(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[Any, ...]],
    policy: Any,
    caps: tuple[int, int],
) -> None:
    """The examples: a hit the main process answered is counted before the front's; a model
    that leaves the capped series between two hits starts again; an error's model takes its
    place in the series before the hits after it."""
    both(tmp_path_factory.mktemp("fold"), steps, policy, caps)


def test_models_hit_in_a_report_keep_the_order_of_their_last_hits(tmp_path: Path) -> None:
    """With a clock that moves at each reading, the least recent model is the one whose last hit
    came first, as when each sample is folded in turn."""
    order = []
    for name, fold in (("grouped", Routing.fold), ("each", hit_each)):
        one = server(tmp_path / name, LRUPolicy(), Clock(tick=0.001))
        names = ["a", "b", "a", "c", "b", "a"]
        report = Report([Sample(1e9, ROUTES[0], n, 200, 0.01, 1, 1, 0.1) for n in names])
        fold(one.routing, report, 0)
        walk = one.host.memory.victims.by_policy.walk()
        order.append([r.name for r in walk])
        walk.close()
        one.observer.stop()
    assert order[0] == order[1] == ["d", "c", "b", "a"]
