"""Gauges read when /metrics is scraped: budgets and what holds them, models, workers, and (opt-in,
capped) each model's memory footprint. Nothing is sampled in between, so nothing goes stale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import psutil
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from modelhost.observe.device_series import device_families
from modelhost.observe.handler_series import handler_families
from modelhost.observe.sizing_series import sizing_families
from modelhost.records.statistics import (
    BatchingStatistics,
    DiskStatistics,
    MemoryStatistics,
    WorkerStatistics,
)

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
        stats = self.host.statistics()  # one reading for the whole scrape
        yield from self._memory(stats.memory)
        yield from self._disk(stats.disk)
        yield from device_families(stats.devices)
        yield from self._models(stats.memory)
        yield from self._workers(stats.workers)
        yield from self._batching(stats.batching)
        if stats.sizing is not None:
            yield from sizing_families(stats.sizing)
        yield from handler_families(self.host.queues.handler_metrics)

    def _memory(self, m: MemoryStatistics) -> Iterator[Metric]:
        yield _gauge("modelhost_memory_budget_bytes", "The memory budget", m.budget_bytes)
        yield _gauge(
            "modelhost_memory_used_bytes",
            "The whole server's memory as PSS: frontend, template and workers",
            m.pss_bytes,
        )
        yield _gauge(
            "modelhost_memory_committed_bytes",
            "Idle baseline plus the footprints of loading and loaded models",
            m.committed_bytes,
        )
        yield _gauge(
            "modelhost_frontend_memory_bytes",
            "The frontend process's PSS, at the last reading",
            m.frontend_bytes,
        )
        yield _gauge(
            "modelhost_frontend_memory_allowance_bytes",
            "What the frontend may use before its growth takes room from models",
            m.frontend_allowance_bytes,
        )
        yield _gauge(
            "modelhost_memory_baseline_bytes",
            "The idle server's PSS, drift included",
            m.baseline_bytes,
        )
        yield _gauge(
            "modelhost_memory_headroom_bytes",
            "Budget kept free for growth seen only at the next reading",
            m.headroom_bytes,
        )

    def _disk(self, d: DiskStatistics) -> Iterator[Metric]:
        yield _gauge("modelhost_disk_budget_bytes", "The disk tier's budget", d.budget_bytes)
        yield _gauge("modelhost_disk_used_bytes", "Bytes the disk tier holds", d.used_bytes)
        yield _gauge(
            "modelhost_disk_artifacts", "Artifacts the disk tier's index knows", d.artifacts
        )

    def _models(self, m: MemoryStatistics) -> Iterator[Metric]:
        states = GaugeMetricFamily(
            "modelhost_models",
            "Models in memory by state; loaded is SageMaker's LoadedModelCount",
            labels=["state"],
        )
        for state, count in m.models.items():
            states.add_metric([state], count)
        yield states
        if self.model_series:
            yield self._footprints(m.footprints)

    def _footprints(self, footprints: dict[str, int]) -> Metric:
        family = GaugeMetricFamily(
            "modelhost_model_memory_bytes",
            "Memory footprint of each loaded model (the largest ones, up to the configured cap)",
            labels=["model"],
        )
        largest = sorted(footprints.items(), key=lambda item: -item[1])[: self.model_series]
        for name, footprint in largest:
            family.add_metric([name], footprint)
        return family

    def _workers(self, workers: tuple[WorkerStatistics, ...]) -> Iterator[Metric]:
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
            in_flight.add_metric([str(worker.worker_id)], worker.in_flight)
            cpu.add_metric([str(worker.worker_id)], _cpu_seconds(worker.pid))
        yield in_flight
        yield cpu

    def _batching(self, stats: BatchingStatistics) -> Iterator[Metric]:
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
        yield CounterMetricFamily(
            "modelhost_request_retries",
            "Requests tried once more, alone, because a worker died while it held them",
            value=stats.retried,
        )


def _cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)
