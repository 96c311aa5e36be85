"""One load-generator process, in closed loop (N users) or open loop (scheduled sends).

In open loop latency counts from the scheduled time, so a stalling server cannot hide its
stall by slowing the sender (coordinated omission). Each process measures its own lag too.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from modelhost.observe.exchange import parse_server_timing
from modelhost.toolkit.payloads import Payload, payloads_by_model
from modelhost.toolkit.traffic import Popularity, Target
from modelhost.toolkit.transport import Reply, Transport, open_transport

TIMING_PARTS = ("queue", "download", "load", "infer")
LOOP_TICK_S = 0.02


class Row(NamedTuple):
    """One request, times in seconds from the run's start."""

    process: int
    model: str
    intended_s: float  # when it was due; equals sent_s in closed loop
    sent_s: float
    done_s: float
    latency_ms: float  # done - intended
    status: int  # 0: no HTTP answer (connection error, timeout)
    error: str
    cache: str
    bytes_out: int
    queue_ms: float
    download_ms: float
    load_ms: float
    infer_ms: float
    warmup: bool
    instance: str = ""  # X-Modelhost-Instance
    tenant: str = ""  # empty: no tenants
    message: str = ""  # an error answer's reason
    bytes_in: int = 0  # the request's body


@dataclass(frozen=True)
class ProcessPlan:
    target: Target
    popularity: Popularity
    payloads: tuple[Payload, ...]
    duration_s: float
    warmup_s: float = 0.0
    concurrency: int = 0  # closed loop: users in this process
    rate_rps: float = 0.0  # open loop: this process's share of the rate
    poisson: bool = False
    offset_s: float = 0.0  # so processes' schedules interleave
    max_in_flight: int = 10_000
    timeout_s: float = 30.0
    client: str = "aiohttp"
    seed: int = 0
    index: int = 0
    requests: int = 0  # this process's share; 0: run duration_s
    sign_region: str = ""  # SigV4-sign for SageMaker in this region
    tenants: tuple[str, ...] = ()  # the tenant of each of popularity's models; empty: none
    tenant_header: str = ""  # the header that names it; empty: the model's name does

    @property
    def end_s(self) -> float:
        """When sending stops, unless `requests` counts it."""
        return math.inf if self.requests else self.warmup_s + self.duration_s


@dataclass
class Diagnostics:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    send_lag_ms: list[float] = field(default_factory=list)  # open loop: sent - intended
    loop_lag_ms: list[float] = field(default_factory=list)  # oversleep of a 20 ms tick
    in_flight_cap_hits: int = 0


class Generator:
    """Runs one plan from `start`, a monotonic time shared by all processes."""

    def __init__(
        self,
        plan: ProcessPlan,
        transport: Transport,
        start: float,
        on_row: Callable[[Row], None] = lambda row: None,
    ) -> None:
        self.plan, self.transport, self.start, self.on_row = plan, transport, start, on_row
        self.rows: list[Row] = []
        self.diagnostics = Diagnostics()
        self._rng = random.Random(plan.seed * 1_000_003 + plan.index)
        self._arrivals = random.Random(plan.seed * 1_000_003 + plan.index + 500_000)
        self._measured_sent = 0
        self._payloads = payloads_by_model(plan.popularity.models or ("",), plan.payloads)

    async def run(self) -> list[Row]:
        cpu_before = time.process_time()
        ticker = asyncio.create_task(self._watch_loop())
        await asyncio.sleep(max(0.0, self.start - time.monotonic()))
        try:
            await (self._closed_loop() if self.plan.concurrency else self._open_loop())
        finally:
            ticker.cancel()
        self.diagnostics.cpu_s = time.process_time() - cpu_before
        self.diagnostics.wall_s = self._now()
        return self.rows

    async def _closed_loop(self) -> None:
        async def user() -> None:
            while self._more(now := self._now()):
                await self._send(now)

        await asyncio.gather(*(user() for _ in range(self.plan.concurrency)))

    async def _open_loop(self) -> None:
        slots = asyncio.Semaphore(self.plan.max_in_flight)
        tasks = set()
        for intended in self.schedule():
            while (early_s := intended - self._now()) > 0:  # a timer may fire early
                await asyncio.sleep(early_s)
            if slots.locked():
                self.diagnostics.in_flight_cap_hits += 1
            await slots.acquire()
            task = asyncio.create_task(self._send(intended, slots))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)

    def _more(self, intended: float) -> bool:
        """Whether a request due at `intended` is still sent, counting it."""
        if round(intended, 6) < self.plan.warmup_s:  # as the row's warm-up flag rounds it
            return True
        if self.plan.requests:
            self._measured_sent += 1
            return self._measured_sent <= self.plan.requests
        return intended < self.plan.end_s

    def schedule(self) -> Iterator[float]:
        """Due times: offset + k/rate, or exponential gaps (Poisson)."""
        rate = self.plan.rate_rps
        if not self.plan.poisson:
            due: Iterator[float] = (self.plan.offset_s + k / rate for k in itertools.count())
        else:
            due = itertools.accumulate(self._arrivals.expovariate(rate) for _ in itertools.count())
        yield from itertools.takewhile(self._more, due)

    async def _send(self, intended: float, slots: asyncio.Semaphore | None = None) -> None:
        popularity = self.plan.popularity
        index = popularity.pick_index(self._rng) if popularity.models else None
        model = popularity.models[index] if index is not None else None
        tenant = self.plan.tenants[index] if index is not None and self.plan.tenants else ""
        payload = self._rng.choice(self._payloads[model or ""])
        url, headers = self.plan.target.request_for(model)
        headers["Content-Type"] = payload.content_type
        if tenant and self.plan.tenant_header:
            headers[self.plan.tenant_header] = tenant
        sent = self._now()
        if slots is not None:
            self.diagnostics.send_lag_ms.append((sent - intended) * 1000)
        try:
            reply, error = await self.transport.post(url, payload.body, headers), ""
        except Exception as exc:  # a failure is a result, not a crash
            reply, error = Reply(0), type(exc).__name__
        finally:
            if slots is not None:
                slots.release()
        row = (model or "", intended, sent, reply)
        self._record(*row, error=error, tenant=tenant, bytes_in=len(payload.body))

    def _record(
        self,
        model: str,
        intended: float,
        sent: float,
        reply: Reply,
        *,
        error: str,
        tenant: str,
        bytes_in: int,
    ) -> None:
        done = self._now()
        parts = parse_server_timing(reply.server_timing)
        queue, download, load, infer = (round(parts.get(p, 0.0), 3) for p in TIMING_PARTS)
        row = Row(
            process=self.plan.index,
            model=model,
            intended_s=round(intended, 6),
            sent_s=round(sent, 6),
            done_s=round(done, 6),
            latency_ms=round((done - intended) * 1000, 3),
            status=reply.status,
            error=error or ("" if reply.status < 400 else f"HTTP {reply.status}"),
            cache=reply.cache or "",
            bytes_out=reply.bytes_out,
            queue_ms=queue,
            download_ms=download,
            load_ms=load,
            infer_ms=infer,
            warmup=round(intended, 6) < self.plan.warmup_s,
            instance=reply.instance,
            tenant=tenant,
            message=reply.message,
            bytes_in=bytes_in,
        )
        self.rows.append(row)
        self.on_row(row)

    async def _watch_loop(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(LOOP_TICK_S)
            self.diagnostics.loop_lag_ms.append((time.monotonic() - before - LOOP_TICK_S) * 1000)

    def _now(self) -> float:
        return time.monotonic() - self.start


async def run_plan(
    plan: ProcessPlan, start: float, on_row: Callable[[Row], None] = lambda row: None
) -> tuple[list[Row], Diagnostics]:
    transport = open_transport(plan.client, plan.timeout_s, plan.sign_region)
    try:
        generator = Generator(plan, transport, start, on_row)
        return await generator.run(), generator.diagnostics
    finally:
        await transport.close()
