"""Everything that watches one server: metrics, per-model counters, the event stream and the
access log, fed by the host's EventLog and by each HTTP exchange."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector

from modelhost.observe.access_log import AccessLog
from modelhost.observe.collector import HostCollector
from modelhost.observe.exchange import Exchange
from modelhost.observe.hits import Hits
from modelhost.observe.loop_watch import LoopWatch
from modelhost.observe.metrics import Metrics
from modelhost.observe.stream import EventStream
from modelhost.observe.tallies import Tallies
from modelhost.observe.tenant_series import NAMED_TENANTS, TenantSeries
from modelhost.observe.tenants import TenantTable
from modelhost.observe.torchserve_series import TorchServeSeries
from modelhost.observe.usage import ModelUsage
from modelhost.records.events import Event

if TYPE_CHECKING:
    from modelhost.host import ModelHost


class Observer:
    """`access_log`: a path, "-" for stdout, "" for none; `model_series`: see HostCollector.

    `tenants`: whether requests have tenants to count; off, /metrics has no tenant series.
    `torchserve_hostname`: the Hostname label of TorchServe's series ("": no such series).
    """

    def __init__(
        self,
        host: ModelHost,
        access_log: str = "",
        model_series: int = 0,
        max_streams: int = 64,
        tenants: bool = False,
        torchserve_hostname: str = "",
    ) -> None:
        self.host = host
        registry = CollectorRegistry()
        ProcessCollector(namespace="modelhost", registry=registry)  # the frontend process
        registry.register(HostCollector(host, model_series))
        self.metrics = Metrics(registry)
        # held once, for the tenants too (docs/decisions.md)
        self.usage = ModelUsage(also=self._count_tenants if tenants else None)
        hostname = torchserve_hostname
        self.torchserve = (
            TorchServeSeries(hostname, host.registry.version_named) if hostname else None
        )
        self.tenants = TenantTable() if tenants else None
        self.tenant_series = TenantSeries(NAMED_TENANTS, host.tenant_holdings)
        if tenants:
            Tallies(registry, self.tenant_series.tallies, before=self.fold_tenants)
        self.stream = EventStream(host.events, max_clients=max_streams)
        self.access_log = AccessLog(access_log) if access_log else None
        self._unsubscribe = host.events.subscribe(self.on_event)
        self._loop_watch: LoopWatch | None = None

    def on_event(self, event: Event) -> None:
        self.metrics.on_event(event)
        if self.tenants is None or event.kind not in ("evict", "load"):
            return
        self.fold_tenants()  # the table's order is the order things happened in
        tenant = event.detail.get("tenant", "")
        if event.kind == "evict":
            self.tenants.evicted(tenant, event.detail.get("for_tenant", ""))
            self.tenant_series.evicted(tenant, event.detail.get("for_tenant", ""))
        elif tenant:  # a load of a tenant's model
            seconds = (event.duration_ms or 0.0) / 1000
            self.tenants.loaded(tenant, seconds)
            self.tenant_series.loaded(tenant, seconds)

    def record(self, exchange: Exchange) -> None:
        self.metrics.on_exchange(exchange)
        self.usage.record(exchange)
        if self.torchserve is not None:
            self.torchserve.record(exchange)
        if self.access_log is not None:
            self.access_log.write(exchange)

    def record_hits(self, hits: Hits) -> bool:
        """As `record` each hit; False, counting none, where a series' cap makes order count."""
        models = set(hits.models)
        torchserve = self.torchserve
        if not self.usage.takes(models) or (torchserve and not torchserve.takes(models)):
            return False
        self.metrics.on_hits(hits)
        self.usage.record_hits(hits)
        if torchserve is not None:
            torchserve.record_hits(hits)
        return True

    def tenant_table(self) -> TenantTable | None:
        """The tenants' figures, every exchange counted; None while tenants are off."""
        self.fold_tenants()
        return self.tenants

    def fold_tenants(self) -> None:
        """Count the exchanges held into the tenants' table and series; every read folds first."""
        self.usage.fold()

    def _count_tenants(self, held: list[Exchange]) -> None:
        assert self.tenants is not None  # counted only with tenants on
        self.tenant_series.record_held(held, self.tenants)

    def metrics_port_text(self, names: Sequence[str] = ()) -> bytes:
        """What the metrics port serves: TorchServe's series too, when on; only `names`, if any
        (TorchServe's `?name[]=`)."""
        registry = self.metrics.registry
        text = generate_latest(registry.restricted_registry(names) if names else registry)
        return text + (self.torchserve.render(names) if self.torchserve is not None else b"")

    def start(self) -> None:
        """Begin writing the access log and watching the event loop (call it on the loop)."""
        if self.access_log is not None:
            self.access_log.start()
        self._loop_watch = LoopWatch(asyncio.get_running_loop(), self.metrics.loop_stalls.inc)
        self._loop_watch.start()

    def drain(self) -> None:
        """The server stops taking requests: end the event streams so they do not hold it open."""
        self.stream.close()

    def stop(self) -> None:
        self._unsubscribe()
        if self._loop_watch is not None:
            self._loop_watch.stop()
        if self.access_log is not None:
            self.access_log.stop()
