"""Gauges read when /metrics is scraped: budgets and what holds them, models, workers, and (opt-in,
capped) each model's memory footprint. Nothing is sampled in between, so nothing goes stale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import psutil
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from modelhost.cache.memory import Resident, State

if TYPE_CHECKING:
    from modelhost.host import ModelHost


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


class HostCollector(Collector):
    """`model_series`: how many models (largest footprint first) get their own series; 0: none."""

    def __init__(self, host: ModelHost, model_series: int) -> None:
        self.host = host
        self.model_series = model_series

    def collect(self) -> Iterator[Metric]:
        yield from self._memory()
        yield from self._disk()
        yield from self._models()
        yield from self._workers()
        yield from self._batching()

    def _memory(self) -> Iterator[Metric]:
        m = self.host.memory
        yield _gauge("modelhost_memory_budget_bytes", "The memory budget", m.budget_bytes)
        yield _gauge(
            "modelhost_memory_used_bytes",
            "The whole server's memory as PSS: frontend, template and workers",
            self.host.pss_bytes(),
        )
        yield _gauge(
            "modelhost_memory_committed_bytes",
            "Idle baseline plus the footprints of loading and loaded models",
            m.committed_bytes,
        )
        yield _gauge(
            "modelhost_memory_baseline_bytes",
            "The idle server's PSS, drift included",
            m.baseline_bytes,
        )

    def _disk(self) -> Iterator[Metric]:
        d = self.host.disk
        yield _gauge("modelhost_disk_budget_bytes", "The disk tier's budget", d.budget_bytes)
        yield _gauge("modelhost_disk_used_bytes", "Bytes the disk tier holds", d.used_bytes)

    def _models(self) -> Iterator[Metric]:
        states = GaugeMetricFamily(
            "modelhost_models",
            "Models in memory by state; loaded is SageMaker's LoadedModelCount",
            labels=["state"],
        )
        residents = list(self.host.memory)
        for state in State:
            states.add_metric([state.value], sum(r.state is state for r in residents))
        yield states
        if self.model_series:
            yield self._footprints([r for r in residents if r.state is State.LOADED])

    def _footprints(self, loaded: list[Resident]) -> Metric:
        family = GaugeMetricFamily(
            "modelhost_model_memory_bytes",
            "Memory footprint of each loaded model (the largest ones, up to the configured cap)",
            labels=["model"],
        )
        largest = sorted(loaded, key=lambda r: -r.bytes)[: self.model_series]
        for resident in largest:
            family.add_metric([resident.name], resident.bytes)
        return family

    def _workers(self) -> Iterator[Metric]:
        workers = list(self.host.pool.workers.values())
        yield _gauge("modelhost_workers", "Worker processes alive", len(workers))
        in_flight = GaugeMetricFamily(
            "modelhost_worker_requests_in_flight",
            "Calls (infer, load, unload) sent to each worker and not yet answered",
            labels=["worker"],
        )
        cpu = CounterMetricFamily(
            "modelhost_worker_cpu_seconds",
            "CPU time of each worker process (resets when a worker is replaced)",
            labels=["worker"],
        )
        for worker in workers:
            in_flight.add_metric([str(worker.worker_id)], len(worker.pending))
            cpu.add_metric([str(worker.worker_id)], _cpu_seconds(worker.pid))
        yield in_flight
        yield cpu

    def _batching(self) -> Iterator[Metric]:
        stats = self.host.batching
        yield CounterMetricFamily(
            "modelhost_batches",
            "Batches sent to workers (requests per batch: the ratio of "
            "modelhost_batched_requests to this)",
            value=stats.batches,
        )
        yield CounterMetricFamily(
            "modelhost_batched_requests",
            "Requests sent to workers in batches",
            value=stats.requests,
        )
        yield _gauge("modelhost_batch_size_max", "The largest batch sent so far", stats.largest)


def _cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)
