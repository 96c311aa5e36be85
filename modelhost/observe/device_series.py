"""Each device's series in /metrics, and its entry in /stats."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from modelhost.records.statistics import DeviceStatistics

GAUGES = (
    ("budget_bytes", "modelhost_device_budget_bytes", "Each device's budget for models"),
    ("used_bytes", "modelhost_device_used_bytes", "Charged to each device: models and contexts"),
    ("context_bytes", "modelhost_device_context_bytes", "The workers' contexts on each device"),
    ("models", "modelhost_device_models", "Models on each device now"),
)
COUNTERS = (
    ("wakes", "modelhost_device_wakes", "Models moved back to each device from host memory"),
    ("evictions", "modelhost_device_evictions", "Models sent from each device to host memory"),
)


def device_families(devices: tuple[DeviceStatistics, ...]) -> Iterator[Metric]:
    """One family a figure, labelled by device; none where no device holds models."""
    if not devices:
        return
    for field, name, help_text in GAUGES:
        gauge = GaugeMetricFamily(name, help_text, labels=["device"])
        for device in devices:
            gauge.add_metric([device.name], getattr(device, field))
        yield gauge
    for field, name, help_text in COUNTERS:
        counter = CounterMetricFamily(name, help_text, labels=["device"])
        for device in devices:
            counter.add_metric([device.name], getattr(device, field))
        yield counter
    yield GaugeMetricFamily(
        "modelhost_device_asleep_models",
        "Models asleep in host memory, off their device",
        value=devices[0].asleep,
    )


def describe_devices(devices: tuple[DeviceStatistics, ...]) -> list[dict[str, Any]]:
    """GET /stats's `devices`."""
    return [
        {
            "name": d.name,
            "budgetBytes": d.budget_bytes,
            "usedBytes": d.used_bytes,
            "contextBytes": d.context_bytes,
            "models": d.models,
            "asleep": d.asleep,
            "wakes": d.wakes,
            "evictions": d.evictions,
        }
        for d in devices
    ]
