"""Per-model counters for `GET /models/{model}`, which outlive unloads.

A server may see a million names, so each model's counters are one packed `bytes` in a capped
LRU.
"""

from __future__ import annotations

import math
import struct
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Hashable
from collections.abc import Set as AbstractSet
from operator import attrgetter, methodcaller
from typing import Any

from modelhost.observe.exchange import Exchange
from modelhost.observe.hits import Hits, at, by_last_place, places_by
from modelhost.records.held import Held

MAX_MODELS = 32_768
ENTRY_BYTES = 320  # an entry, as tracemalloc measures it
# names that are no model
UNCOUNTED_ERRORS = frozenset({"ModelNotFound", "ModelVersionNotFound", "InvalidModelName"})
TIERS = ("disk", "remote")
COUNTS = ("requests", "hits", *TIERS, "errors")
PARTS = ("queue", "download", "load", "infer")
# ms summed: whole times of successes and failures, queue and infer of successes
TOTALS = ("succeeded", "failed", "queue", "infer")
PACKED = struct.Struct(f"<{len(COUNTS)}Q{len(PARTS) + len(TOTALS)}d")
EMPTY = PACKED.pack(*[0] * len(COUNTS), *[math.nan] * len(PARTS), *[0.0] * len(TOTALS))
INDEX = {name: index for index, name in enumerate(COUNTS)}  # looked up per request: no .index
LAST = slice(len(COUNTS), len(COUNTS) + len(PARTS))
TOTAL = {name: len(COUNTS) + len(PARTS) + index for index, name in enumerate(TOTALS)}
CACHE_FIELDS = [("hit", INDEX["hits"]), *((tier, INDEX[tier]) for tier in TIERS)]
MODEL, STATUS, CACHE = attrgetter("model"), attrgetter("status"), attrgetter("cache")
TIMINGS, DURATION = attrgetter("timings_ms"), attrgetter("duration_s")
QUEUE_MS, INFER_MS = methodcaller("get", "queue", 0.0), methodcaller("get", "infer", 0.0)


class ModelUsage:
    """`also`: given each batch of exchanges counted here."""

    def __init__(
        self,
        max_models: int = MAX_MODELS,
        also: Callable[[list[Exchange]], None] | None = None,
    ) -> None:
        self.max_models = max_models
        self.also = also
        self._packed: OrderedDict[str, bytes] = OrderedDict()
        # the most recently counted model's counters, unpacked until another model's come
        self._newest: str | None = None
        self._fields: list[Any] = []
        self._held: Held[Exchange] = Held(self._count_all)  # docs/decisions.md

    def record(self, exchange: Exchange) -> None:
        self._held.add(exchange)

    def fold(self) -> None:
        """Count the exchanges held; every read folds first."""
        self._held.fold()

    def takes(self, models: set[str]) -> bool:
        """Whether `record_hits` counts hits of `models` as `record` would."""
        self.fold()  # the held exchanges' models take their places first
        return self.also is None and self._fits(models)

    def _fits(self, models: AbstractSet[str]) -> bool:
        """Whether counting `models` a model at a time forgets none on the way."""
        return fits(models, self._packed, self.max_models)

    def record_hits(self, hits: Hits) -> None:
        """As `record` each hit, a model at a time; `takes` first."""
        self.fold()
        for model, places in by_last_place(places_by(hits.models)):
            if model != self._newest:
                self._make_newest(model)
            fields = self._fields
            fields[INDEX["requests"]] += len(places)
            fields[INDEX["hits"]] += len(places)
            fields[LAST] = [0.0, 0.0, 0.0, hits.infer_ms[places[-1]]]
            fields[TOTAL["succeeded"]] += sum(at(hits.durations_s, places)) * 1000
            fields[TOTAL["infer"]] += sum(at(hits.infer_ms, places))

    def _count_all(self, exchanges: list[Exchange]) -> None:
        """Count the model calls among `exchanges`, a model at a time where the cap forgets none:
        the counts and recency of each in turn."""
        counted = [
            each
            for each in exchanges
            if each.invocation and each.model is not None and each.error not in UNCOUNTED_ERRORS
        ]
        models: list[str] = list(map(MODEL, counted))
        by_model = places_by(models)
        if self._fits(by_model.keys()):
            for model, places in by_last_place(by_model):
                self._count(model, at(counted, places))
        else:  # the cap forgets models on the way: each in turn
            for model, each in zip(models, counted, strict=True):
                self._count(model, [each])
        if self.also is not None:
            self.also(exchanges)

    def _count(self, model: str, exchanges: list[Exchange]) -> None:
        """Count `model`'s calls: counts in C, the timings of the last that has them."""
        if model != self._newest:
            self._make_newest(model)
        fields = self._fields
        fields[INDEX["requests"]] += len(exchanges)
        statuses = Counter(map(STATUS, exchanges))
        errors = sum(n for status, n in statuses.items() if status >= 400)
        fields[INDEX["errors"]] += errors
        caches = Counter(map(CACHE, exchanges))
        for cache, field in CACHE_FIELDS:
            fields[field] += caches[cache]
        timings = next(filter(None, map(TIMINGS, reversed(exchanges))), None)
        if timings:
            fields[LAST] = [timings.get(part, math.nan) for part in PARTS]
        _add_totals(fields, exchanges, errors)

    def _make_newest(self, model: str) -> None:
        """Pack the newest model's counters and unpack `model`'s, now the newest."""
        if self._newest is not None:
            self._packed[self._newest] = PACKED.pack(*self._fields)
        self._fields = list(PACKED.unpack(self._packed.pop(model, EMPTY)))
        self._packed[model] = EMPTY  # its place in the order; its counters are in `_fields`
        self._newest = model
        if len(self._packed) > self.max_models and self._packed.popitem(last=False)[0] == model:
            self._newest = None  # a cap of none keeps none

    def for_model(self, model: str) -> dict[str, Any]:
        self.fold()
        packed = self._packed.get(model, EMPTY)
        fields = self._fields if model == self._newest else PACKED.unpack(packed)
        counts = dict(zip(COUNTS, fields[: len(COUNTS)], strict=True))
        timings = dict(zip(PARTS, fields[LAST], strict=True))
        return {
            "requests": counts["requests"],
            "hits": counts["hits"],
            "misses": {tier: counts[tier] for tier in TIERS if counts[tier]},
            "errors": counts["errors"],
            "lastTimingsMs": {part: ms for part, ms in timings.items() if not math.isnan(ms)},
            "totalMs": {name: fields[TOTAL[name]] for name in TOTALS},
        }


def _add_totals(fields: list[Any], exchanges: list[Exchange], errors: int) -> None:
    """Add the exchanges' times to the totals."""
    succeeded = [each for each in exchanges if each.status < 400] if errors else exchanges
    fields[TOTAL["succeeded"]] += sum(map(DURATION, succeeded)) * 1000
    if errors:
        fields[TOTAL["failed"]] += sum(e.duration_s for e in exchanges if e.status >= 400) * 1000
    timings = list(map(TIMINGS, succeeded))
    fields[TOTAL["queue"]] += sum(map(QUEUE_MS, timings))
    fields[TOTAL["infer"]] += sum(map(INFER_MS, timings))


def fits(keys: Collection[Hashable], held: Collection[Hashable], cap: int) -> bool:
    """Whether `held`, capped at `cap`, takes `keys` and forgets none (walking `keys` only)."""
    room = cap - len(held)
    return len(keys) <= room or sum(key not in held for key in keys) <= room
