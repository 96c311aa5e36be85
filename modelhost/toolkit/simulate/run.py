"""The hit-ratio curves of LRU, the server's policies and the optimum, and the budgets needed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.policy import policy_named
from modelhost.toolkit.report import charts, files, html
from modelhost.toolkit.simulate import lru
from modelhost.toolkit.simulate.loading import LoadSample, read_load_events, replay_loading
from modelhost.toolkit.simulate.replay import optimum, replay
from modelhost.toolkit.simulate.trace import Trace
from modelhost.units import format_bytes


class Replayed(NamedTuple):
    """One replayed curve's server settings."""

    policy: str = "cost-aware"
    admission: str = "none"
    min_residency_s: float = 0.0

    @property
    def label(self) -> str:
        plain = self.admission == "none" and self.min_residency_s == 0
        name = "lru-replay" if self.policy == "lru" and plain else self.policy
        name += "" if self.admission == "none" else f"+{self.admission}"
        return name + (f"+min{self.min_residency_s:g}s" if self.min_residency_s else "")

    def hits(self, trace: Trace, budget_bytes: int) -> int:
        sketch = FrequencySketch() if self.admission == "tinylfu" else None
        policy = policy_named(self.policy)
        return replay(trace, budget_bytes, policy, sketch, self.min_residency_s)


class InLine(NamedTuple):
    """Replays with the server's loader line (`loading.py`)."""

    loaders: int
    recorded: dict[str, list[LoadSample]]

    def hit_ratio(self, spec: Replayed, trace: Trace, budget_bytes: int) -> float:
        """As the server's header counts: the requests that found their model loaded."""
        sketch = FrequencySketch() if spec.admission == "tinylfu" else None
        policy = policy_named(spec.policy)
        return replay_loading(
            trace,
            budget_bytes,
            policy,
            self.loaders,
            admission=sketch,
            min_residency_s=spec.min_residency_s,
            recorded=self.recorded,
        ).hit_ratio


def in_line(loaders: int | None, load_events: Path | None) -> InLine | None:
    """The loader line `--loaders` asks for, if any."""
    if loaders is None:
        if load_events is not None:
            raise ValueError("--load-events is read with --loaders N (the server's --workers)")
        return None
    if load_events is None:
        raise ValueError(
            "--loaders needs --load-events LOG: the server's log (or a saved GET /events "
            "stream), whose load events say how long each load held its worker's loader"
        )
    recorded = read_load_events(load_events)
    if not recorded:
        raise ValueError(
            f"{load_events} has no load events with loader_ms and reserved_bytes "
            "(a modelhost server's log, or its GET /events stream, since 2026-11-25)"
        )
    return InLine(loaders, recorded)


def replayed_curves(
    policies: Sequence[str], admissions: Sequence[str], min_residency_s: float = 0.0
) -> list[Replayed]:
    """Every policy × admission but plain LRU, whose one-pass curve ("lru") is exact."""
    specs = [Replayed(p, a, min_residency_s) for p in policies for a in admissions]
    return [s for s in specs if s.label != "lru-replay"]


def default_budgets(trace: Trace, points: int = 16) -> list[int]:
    """From the largest model to every model at once."""
    low, high = max(trace.sizes.values()), max(trace.distinct_bytes, max(trace.sizes.values()))
    grid = np.geomspace(low, high, points) if high > low else np.array([low])
    return sorted({int(round(b)) for b in grid})


def check_budgets(trace: Trace, budgets: Sequence[int]) -> None:
    largest = max(trace.sizes.values())
    if min(budgets) < largest:
        raise ValueError(
            f"budget {format_bytes(min(budgets))} is below the largest model "
            f"({format_bytes(largest)}), which a server with it refuses (507): "
            "simulate budgets from the largest model up"
        )


def curves(
    trace: Trace,
    budgets: Sequence[int],
    with_optimum: bool = True,
    replay_lru: bool = False,
    replayed: Sequence[Replayed] = (Replayed(),),
    in_line: InLine | None = None,
) -> dict[str, list[float]]:
    """Hit ratio per budget for each policy, and with `in_line` as the server's header counts."""
    check_budgets(trace, budgets)
    n = len(trace.models)
    result = {"lru": lru.hit_ratios(lru.stack_distances(trace), budgets)}
    if replay_lru:
        replayed = [Replayed("lru"), *replayed]
    for spec in replayed:
        result[spec.label] = [spec.hits(trace, b) / n for b in budgets]
    if in_line is not None:  # LRU's once, even if also replayed above
        lines = {
            f"{s.label.removesuffix('-replay')} in line": s for s in (Replayed("lru"), *replayed)
        }
        for label, spec in lines.items():
            result[label] = [in_line.hit_ratio(spec, trace, b) for b in budgets]
    if with_optimum:
        result["optimum"] = [optimum(trace, b) / n for b in budgets]
    return result


def needed_budgets(
    trace: Trace, budgets: Sequence[int], ratios: dict[str, list[float]], target: float
) -> dict[str, float]:
    """Per policy, the least budget reaching `target`: exact for LRU, else from the grid."""
    needed = {"lru": lru.budget_for(lru.stack_distances(trace), target)}
    for name, values in ratios.items():
        if name != "lru":
            needed[name] = next(
                (b for b, r in zip(budgets, values, strict=True) if r >= target), math.inf
            )
    return needed


def simulate_summary(
    trace: Trace,
    budgets: Sequence[int],
    target: float,
    *,
    with_optimum: bool = True,
    replayed: Sequence[Replayed] = (Replayed(),),
    in_line: InLine | None = None,
) -> dict[str, Any]:
    ratios = curves(trace, budgets, with_optimum, replayed=replayed, in_line=in_line)
    return {
        "requests": len(trace.models),
        "models": len(trace.sizes),
        "distinct_bytes": trace.distinct_bytes,
        "budgets_bytes": list(budgets),
        "hit_ratio": ratios,
        "target_hit_ratio": target,
        "budget_needed_bytes": needed_budgets(trace, budgets, ratios, target),
    }


def rows_of(summary: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    names = list(summary["hit_ratio"])
    rows = [
        [format_bytes(budget), *(summary["hit_ratio"][n][i] for n in names)]
        for i, budget in enumerate(summary["budgets_bytes"])
    ]
    return ["budget", *names], rows


ROOM = (
    "Budgets here are room for models: for --memory-budget, add the server's fixed bytes "
    "(GET /sizing: fixedBytes)"
)


def needed_text(summary: dict[str, Any]) -> list[str]:
    """Per policy, the budget `target` needs: LRU's exact, the others' a replayed budget."""
    return [_needed(summary, name, b) for name, b in summary["budget_needed_bytes"].items()]


def _needed(summary: dict[str, Any], name: str, budget: float) -> str:
    target = f"a {summary['target_hit_ratio']:.0%} hit ratio"
    if math.isfinite(budget):
        shown = format_bytes(int(budget))
        return f"{name}: {shown if name == 'lru' else 'at most ' + shown} for {target}"
    ceiling = 1 - summary["models"] / summary["requests"]  # each model's first request misses
    if summary["target_hit_ratio"] > ceiling:
        return (
            f"{name}: no budget reaches {target}: with every model in memory "
            f"({format_bytes(summary['distinct_bytes'])}) it is {ceiling:.3g}, the rest being "
            f"first requests (ask --target {ceiling:.3g} or less)"
        )
    largest, best = max(summary["budgets_bytes"]), max(summary["hit_ratio"][name])
    return f"{name}: {target} not reached up to {format_bytes(largest)} ({best:.3g}): " + (
        "replay larger --budgets"
    )


def write_simulate(out_dir: Path, summary: dict[str, Any]) -> dict[str, Path]:
    header, rows = rows_of(summary)
    names = list(summary["hit_ratio"])
    csv_rows = [
        [b, *(summary["hit_ratio"][n][i] for n in names)]
        for i, b in enumerate(summary["budgets_bytes"])
    ]
    chart = charts.lines(
        [b / 2**20 for b in summary["budgets_bytes"]],
        summary["hit_ratio"],
        "Hit ratio against memory budget",
        "memory budget (MiB)",
        "hit ratio",
        logx=True,
        markers=True,
    )
    page = html.page(
        "modelhost simulate",
        [
            (
                "Trace",
                html.paragraph(
                    f"{summary['requests']} requests to {summary['models']} models, "
                    f"{format_bytes(summary['distinct_bytes'])} in all"
                ),
            ),
            ("Hit-ratio curve", chart),
            ("Budget needed", "".join(map(html.paragraph, [*needed_text(summary), ROOM]))),
            ("Hit ratio by budget", html.table(header, rows)),
        ],
    )
    paths = {
        "summary": files.write_json(out_dir / "simulate.json", summary),
        "csv": files.write_csv(out_dir / "simulate.csv", ["budget_bytes", *names], csv_rows),
        "html": out_dir / "simulate.html",
    }
    paths["html"].write_text(page)
    return paths
