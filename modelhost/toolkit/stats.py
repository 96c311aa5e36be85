"""The figures of a bench run, computed from its rows, without warm-up or errors in latency."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelhost.toolkit.loadgen import TIMING_PARTS, Diagnostics, Row

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9}
CPU_BUSY = 0.90  # of one core: the generator is the bottleneck
SEND_LAG_LIMIT_MS = 5.0  # open loop's p99
LOOP_LAG_LIMIT_MS = 50.0  # the worst oversleep of the tick


def measured(rows: Sequence[Row]) -> list[Row]:
    return [row for row in rows if not row.warmup]


def ok(row: Row) -> bool:
    return 0 < row.status < 400


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """min, mean, the PERCENTILES and max."""
    if not latencies_ms:
        return {name: float("nan") for name in ["min", "mean", *PERCENTILES, "max"]}
    values = np.asarray(latencies_ms, dtype=float)
    figures = {name: float(np.percentile(values, q)) for name, q in PERCENTILES.items()}
    return {
        "min": float(values.min()),
        "mean": float(values.mean()),
        **figures,
        "max": float(values.max()),
    }


def measured_window_s(rows: Sequence[Row], warmup_s: float) -> float:
    ends = [row.done_s for row in measured(rows)]
    return max(ends) - warmup_s if ends else float("nan")


def summarize(rows: Sequence[Row], duration_s: float) -> dict[str, Any]:
    window = measured(rows)
    good = [row for row in window if ok(row)]
    return {
        "requests": {
            "sent": len(rows),
            "warmup": len(rows) - len(window),
            "measured": len(window),
            "ok": len(good),
            "errors": dict(sorted(Counter(r.error for r in window if not ok(r)).items())),
            "error_examples": error_examples(window),
            "by_status": {str(k): n for k, n in sorted(Counter(r.status for r in window).items())},
        },
        "throughput_rps": len(good) / duration_s if duration_s else float("nan"),
        "latency_ms": latency_summary([row.latency_ms for row in good]),
        # what a serverless endpoint bills as data processed, in + out
        "bytes_per_request": float(np.mean([r.bytes_in + r.bytes_out for r in good] or [0])),
        "cache": dict(sorted(Counter(row.cache or "none" for row in good).items())),
        # the spread over instances behind a router
        "instances": dict(sorted(Counter(row.instance for row in good if row.instance).items())),
        "server_timing_ms": timing_summary(good),
        "models": len({row.model for row in window}),
    }


def error_examples(rows: Sequence[Row]) -> dict[str, dict[str, str]]:
    """Each kind of error's first answer: which model, and the server's reason."""
    examples: dict[str, dict[str, str]] = {}
    for row in rows:
        if not ok(row) and row.error not in examples:
            examples[row.error] = {"model": row.model, "message": row.message}
    return dict(sorted(examples.items()))


ERROR_COLUMNS = ["kind", "count", "first answer"]


def error_rows(requests: dict[str, Any]) -> list[list[Any]]:
    """The errors table: each kind, its count, and its first answer's model and reason."""
    examples = requests.get("error_examples", {})
    rows = []
    for kind, count in requests["errors"].items():
        example = examples.get(kind, {})
        answer = ": ".join(part for part in (example.get("model"), example.get("message")) if part)
        rows.append([kind, count, answer])
    return rows


def tenant_summary(rows: Sequence[Row], duration_s: float) -> dict[str, dict[str, Any]]:
    """Per tenant, busiest first: requests, throughput, p50 and p99 latency, refusals by status."""
    by_tenant: dict[str, list[Row]] = {}
    for row in measured(rows):
        by_tenant.setdefault(row.tenant, []).append(row)
    figures = {tenant: _tenant_figures(own, duration_s) for tenant, own in by_tenant.items()}
    return dict(sorted(figures.items(), key=lambda item: -item[1]["requests"]))


def _tenant_figures(rows: Sequence[Row], duration_s: float) -> dict[str, Any]:
    good = [row.latency_ms for row in rows if ok(row)]
    latency = latency_summary(good)
    refused = Counter(str(row.status) for row in rows if row.status >= 400)
    return {
        "requests": len(rows),
        "ok": len(good),
        "throughput_rps": len(good) / duration_s if duration_s else float("nan"),
        "latency_ms": {"p50": latency["p50"], "p99": latency["p99"]},
        "refused": dict(sorted(refused.items())),
        "unanswered": sum(row.status == 0 for row in rows),
    }


def timing_summary(rows: Sequence[Row]) -> dict[str, dict[str, float]]:
    parts = {}
    for part in TIMING_PARTS:
        values = np.asarray([getattr(row, f"{part}_ms") for row in rows], dtype=float)
        if values.size and values.any():
            parts[part] = {
                "mean": float(values.mean()),
                "p50": float(np.percentile(values, 50)),
                "p99": float(np.percentile(values, 99)),
            }
    return parts


def generator_health(diagnostics: Sequence[Diagnostics], open_loop: bool) -> dict[str, Any]:
    """How hard the generator worked, and warnings where it limited the result."""
    cpu = [d.cpu_s / d.wall_s if d.wall_s else 0.0 for d in diagnostics]
    send_lag = [lag for d in diagnostics for lag in d.send_lag_ms]
    loop_lag = [lag for d in diagnostics for lag in d.loop_lag_ms]
    health = {
        "processes": len(diagnostics),
        "cpu_share_of_core": [round(share, 3) for share in cpu],
        "send_lag_p99_ms": float(np.percentile(send_lag, 99)) if send_lag else 0.0,
        "loop_lag_max_ms": max(loop_lag, default=0.0),
        "in_flight_cap_hits": sum(d.in_flight_cap_hits for d in diagnostics),
    }
    return {**health, "warnings": _warnings(health, open_loop)}


def _warnings(health: dict[str, Any], open_loop: bool) -> list[str]:
    warnings = []
    busiest = max(health["cpu_share_of_core"], default=0.0)
    if busiest > CPU_BUSY:
        warnings.append(
            f"the load generator is the bottleneck: a process used {busiest:.0%} of a core "
            "(add --processes, or run bench on another machine)"
        )
    if open_loop and health["send_lag_p99_ms"] > SEND_LAG_LIMIT_MS:
        warnings.append(
            f"the load generator fell behind its schedule: p99 {health['send_lag_p99_ms']:.1f} ms "
            f"late (limit {SEND_LAG_LIMIT_MS} ms); latencies still count from the due time"
        )
    if health["loop_lag_max_ms"] > LOOP_LAG_LIMIT_MS:
        warnings.append(
            f"a load generator's event loop stalled for {health['loop_lag_max_ms']:.0f} ms "
            "(CPU starved: fewer users per process, or another machine)"
        )
    if health["in_flight_cap_hits"]:
        warnings.append(
            f"{health['in_flight_cap_hits']} sends waited for the in-flight cap "
            "(--max-in-flight); their latency counts from the due time"
        )
    return warnings


def timeline(rows: Sequence[Row], bucket_s: float = 1.0) -> list[dict[str, float]]:
    """Per time bucket of completion: requests per second, p50 and p99 latency."""
    buckets: dict[int, list[float]] = {}
    for row in rows:
        if ok(row):
            buckets.setdefault(int(row.done_s // bucket_s), []).append(row.latency_ms)
    return [
        {
            "t_s": index * bucket_s,
            "rps": len(values) / bucket_s,
            "p50_ms": float(np.percentile(values, 50)),
            "p99_ms": float(np.percentile(values, 99)),
        }
        for index, values in sorted(buckets.items())
    ]


def concurrency_at_send(rows: Sequence[Row]) -> list[int]:
    """For each row, the requests of all processes in flight when it was sent."""
    sent = np.sort(np.asarray([row.sent_s for row in rows]))
    done = np.sort(np.asarray([row.done_s for row in rows]))
    return [
        int(np.searchsorted(sent, row.sent_s, "right") - np.searchsorted(done, row.sent_s, "right"))
        for row in rows
    ]


def latency_by_concurrency(rows: Sequence[Row]) -> list[dict[str, float]]:
    """p50 and p99 latency grouped by concurrency at send."""
    groups: dict[int, list[float]] = {}
    for row, level in zip(rows, concurrency_at_send(rows), strict=True):
        if ok(row) and not row.warmup:
            groups.setdefault(level, []).append(row.latency_ms)
    return [
        {
            "concurrency": level,
            "count": len(values),
            "p50_ms": float(np.percentile(values, 50)),
            "p99_ms": float(np.percentile(values, 99)),
        }
        for level, values in sorted(groups.items())
    ]
