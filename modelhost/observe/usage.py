"""Per-model counters for `GET /models/{model}`, which outlive unloads.

A server may see a million names, so each model's counters are one packed `bytes` in a capped
LRU.
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from typing import Any

from modelhost.observe.exchange import Exchange

MAX_MODELS = 32_768
ENTRY_BYTES = 320  # an entry, as tracemalloc measures it
UNCOUNTED_ERRORS = frozenset({"ModelNotFound", "InvalidModelName"})  # names that are no model
TIERS = ("disk", "remote")
COUNTS = ("requests", "hits", *TIERS, "errors")
PARTS = ("queue", "download", "load", "infer")
PACKED = struct.Struct(f"<{len(COUNTS)}Q{len(PARTS)}d")
EMPTY = PACKED.pack(*[0] * len(COUNTS), *[math.nan] * len(PARTS))
INDEX = {name: index for index, name in enumerate(COUNTS)}  # looked up per request: no .index


class ModelUsage:
    def __init__(self, max_models: int = MAX_MODELS) -> None:
        self.max_models = max_models
        self._packed: OrderedDict[str, bytes] = OrderedDict()

    def record(self, exchange: Exchange) -> None:
        if not exchange.invocation or exchange.model is None:
            return
        if exchange.error in UNCOUNTED_ERRORS:
            return
        fields = list(PACKED.unpack(self._take(exchange.model)))
        fields[INDEX["requests"]] += 1
        if exchange.status >= 400:
            fields[INDEX["errors"]] += 1
        if exchange.cache == "hit" or exchange.cache in TIERS:
            fields[INDEX["hits" if exchange.cache == "hit" else exchange.cache]] += 1
        timings = exchange.timings_ms
        if timings:
            fields[len(COUNTS) :] = [timings.get(part, math.nan) for part in PARTS]
        self._packed[exchange.model] = PACKED.pack(*fields)
        if len(self._packed) > self.max_models:
            self._packed.popitem(last=False)

    def _take(self, model: str) -> bytes:
        """Pop the model's counters, so putting them back makes it the newest."""
        return self._packed.pop(model, EMPTY)

    def for_model(self, model: str) -> dict[str, Any]:
        fields = PACKED.unpack(self._packed.get(model, EMPTY))
        counts = dict(zip(COUNTS, fields[: len(COUNTS)], strict=True))
        timings = dict(zip(PARTS, fields[len(COUNTS) :], strict=True))
        return {
            "requests": counts["requests"],
            "hits": counts["hits"],
            "misses": {tier: counts[tier] for tier in TIERS if counts[tier]},
            "errors": counts["errors"],
            "lastTimingsMs": {part: ms for part, ms in timings.items() if not math.isnan(ms)},
        }
