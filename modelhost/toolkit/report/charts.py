"""Charts as SVG text drawn with matplotlib (no pyplot, no GUI backend), inlined in reports."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

WIDTH_IN, HEIGHT_IN = 7.5, 3.4


def _figure() -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    return figure, figure.subplots()


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # no XML prolog inside HTML


def histogram(values_ms: Sequence[float], title: str) -> str:
    figure, axes = _figure()
    if values_ms:
        axes.hist(values_ms, bins=min(60, max(5, len(values_ms) // 20)), color="#4c78a8")
    axes.set(title=title, xlabel="latency (ms)", ylabel="requests")
    return _svg(figure)


def lines(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    logx: bool = False,
    markers: bool = False,
) -> str:
    """One line per series over the same x."""
    figure, axes = _figure()
    for label, y in series.items():
        axes.plot(x, y, label=label, marker="o" if markers else None, markersize=3)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logx:
        axes.set_xscale("log")
    if len(series) > 1:
        axes.legend()
    axes.grid(alpha=0.3)
    return _svg(figure)


def over_time(points: Sequence[Mapping[str, float]]) -> str:
    """Throughput and p50/p99 latency per second of the run."""
    figure, axes = _figure()
    t = [p["t_s"] for p in points]
    axes.plot(t, [p["rps"] for p in points], color="#4c78a8", label="answered/s")
    axes.set(title="Throughput and latency over time", xlabel="time (s)", ylabel="requests/s")
    right = axes.twinx()
    right.plot(t, [p["p50_ms"] for p in points], color="#54a24b", label="p50 ms")
    right.plot(t, [p["p99_ms"] for p in points], color="#e45756", label="p99 ms")
    right.set_ylabel("latency (ms)")
    figure.legend(loc="outside lower center", ncols=3)
    return _svg(figure)


def percentiles(records: Mapping[str, Mapping[str, float]], title: str) -> str:
    """Latency distributions, one line per percentile record."""
    figure, axes = _figure()
    for label, record in records.items():
        names = [name for name in record if name != "mean"]
        axes.plot(names, [record[n] for n in names], label=label, marker="o", markersize=3)
    axes.set(title=title, xlabel="percentile", ylabel="latency (ms)")
    if records:
        axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    return _svg(figure)


def twin(
    x: Sequence[float],
    left: Mapping[str, Sequence[float]],
    right: Mapping[str, Sequence[float]],
    title: str,
    labels: tuple[str, str, str],
) -> str:
    """Series on a left and a right axis over the same x."""
    figure, axes = _figure()
    other = axes.twinx()
    colors = iter(["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2"])
    for side, series in ((axes, left), (other, right)):
        for label, y in series.items():
            side.plot(x, y, label=label, marker="o", markersize=3, color=next(colors))
    axes.set(title=title, xlabel=labels[0], ylabel=labels[1])
    other.set_ylabel(labels[2])
    for side, series in ((axes, left), (other, right)):  # from zero, so small rises look small
        top = max((v for y in series.values() for v in y if v == v), default=0.0)
        side.set_ylim(bottom=0, top=top * 1.15 or 1.0)
    axes.grid(alpha=0.3)
    figure.legend(loc="outside lower center", ncols=min(5, len(left) + len(right)))
    return _svg(figure)


def frontier(
    points: Sequence[tuple[float, float, str]], best: Sequence[int], title: str, ylabel: str
) -> str:
    """(p99 ms, cost, label) points with the efficient frontier marked."""
    figure, axes = _figure()
    groups: dict[str, list[tuple[float, float]]] = {}
    for p99, cost, label in points:
        groups.setdefault(label, []).append((p99, cost))
    for label, xy in groups.items():
        axes.scatter([p[0] for p in xy], [p[1] for p in xy], label=label, s=18)
    edge = sorted((points[i][0], points[i][1]) for i in best)
    axes.plot(
        [p[0] for p in edge],
        [p[1] for p in edge],
        color="#e45756",
        drawstyle="steps-post",
        linewidth=2,
        label="efficient frontier",
    )
    axes.scatter(
        [p[0] for p in edge], [p[1] for p in edge], facecolors="none", edgecolors="#e45756", s=60
    )
    axes.set(title=title, xlabel="p99 latency (ms)", ylabel=ylabel)
    axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    return _svg(figure)
