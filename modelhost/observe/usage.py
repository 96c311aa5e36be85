"""Per-model counters for `GET /models/{model}`: requests, hits, misses by tier, errors, and the
latency parts of the last invocation. They outlive unloads (the memory tier's `hits` does not)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from modelhost.observe.exchange import Exchange

MAX_MODELS = 100_000  # beyond this the least recently counted model is forgotten
UNCOUNTED_ERRORS = frozenset({"ModelNotFound", "InvalidModelName"})  # names that are no model


@dataclass
class ModelCounters:
    requests: int = 0
    hits: int = 0
    misses: dict[str, int] = field(default_factory=dict)  # by tier: disk, remote
    errors: int = 0
    last_timings_ms: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "hits": self.hits,
            "misses": dict(self.misses),
            "errors": self.errors,
            "lastTimingsMs": dict(self.last_timings_ms),
        }


class ModelUsage:
    def __init__(self, max_models: int = MAX_MODELS) -> None:
        self.max_models = max_models
        self._counters: OrderedDict[str, ModelCounters] = OrderedDict()

    def record(self, exchange: Exchange) -> None:
        """Count an invocation, answered or failed, against its model."""
        if not exchange.invocation or exchange.model is None:
            return
        if exchange.error in UNCOUNTED_ERRORS:
            return
        counters = self._counters_of(exchange.model)
        counters.requests += 1
        if exchange.status >= 400:
            counters.errors += 1
        if exchange.cache == "hit":
            counters.hits += 1
        elif exchange.cache:
            counters.misses[exchange.cache] = counters.misses.get(exchange.cache, 0) + 1
        if exchange.timings_ms:
            counters.last_timings_ms = dict(exchange.timings_ms)

    def _counters_of(self, model: str) -> ModelCounters:
        counters = self._counters.pop(model, None) or ModelCounters()
        self._counters[model] = counters
        if len(self._counters) > self.max_models:
            self._counters.popitem(last=False)
        return counters

    def for_model(self, model: str) -> dict[str, Any]:
        return (self._counters.get(model) or ModelCounters()).to_json()
