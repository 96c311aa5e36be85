"""Which model each request goes to, and how its name travels (header or path)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
# Aegaeon (SOSP'25), Alibaba's production trace: 94% of the models receive 1.35% of the requests
HOT_MODELS_SHARE = 0.06
HOT_REQUESTS_SHARE = 0.9865


@dataclass(frozen=True)
class Popularity:
    """Models with weights: uniform, or Zipf (the k-th ∝ 1 / k**s)."""

    models: tuple[str, ...]
    cum_weights: tuple[float, ...]

    @classmethod
    def uniform(cls, models: Sequence[str]) -> Popularity:
        return cls.weighted(models, [1.0] * len(models))

    @classmethod
    def zipf(cls, models: Sequence[str], s: float = 1.0) -> Popularity:
        return cls.weighted(models, [1.0 / k**s for k in range(1, len(models) + 1)])

    @classmethod
    def two_class(
        cls,
        models: Sequence[str],
        hot_models: float = HOT_MODELS_SHARE,
        hot_requests: float = HOT_REQUESTS_SHARE,
    ) -> Popularity:
        """The first `hot_models` of the models share `hot_requests` of the requests evenly, the
        rest share what is left; each class keeps one model while there are two."""
        count = len(models)
        hot = min(max(1, round(hot_models * count)), max(1, count - 1))
        cold = count - hot
        weights = [hot_requests / hot] * hot + [(1.0 - hot_requests) / cold] * cold if cold else []
        return cls.weighted(models, weights or [1.0] * count)

    @classmethod
    def weighted(cls, models: Sequence[str], weights: Sequence[float]) -> Popularity:
        return cls(tuple(models), tuple(itertools.accumulate(weights)))

    def share(self, index: int) -> float:
        previous = self.cum_weights[index - 1] if index else 0.0
        return (self.cum_weights[index] - previous) / self.cum_weights[-1]

    def pick(self, rng: random.Random) -> str:
        return self.models[self.pick_index(rng)]

    def pick_index(self, rng: random.Random) -> int:
        return rng.choices(range(len(self.models)), cum_weights=self.cum_weights)[0]


def read_models(spec: str) -> list[str]:
    """`@file` (one name a line) or a comma-separated list."""
    if spec.startswith("@"):
        try:
            names = Path(spec[1:]).read_text().split()
        except OSError as exc:
            message = f"--models {spec}: {exc.strerror}; @FILE is one model name a line"
            raise ValueError(message) from None
    else:
        names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise ValueError(f"no model names in {spec!r}")
    return names


PATHS = {"path": "/models/{model}/invoke", "predictions": "/predictions/{model}"}  # TorchServe's


@dataclass(frozen=True)
class Target:
    """Where requests go: the model in the target-model header, or in a path of `PATHS`."""

    url: str
    model_in: str = "header"
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (bench -H)

    def request_for(self, model: str | None) -> tuple[str, dict[str, str]]:
        base, headers = self.url.rstrip("/"), dict(self.headers)
        if model is None:
            return base, headers
        if self.model_in in PATHS:
            return base + PATHS[self.model_in].format(model=model), headers
        url = base if base.endswith("/invocations") else f"{base}/invocations"
        return url, {**headers, TARGET_MODEL_HEADER: model}


def read_headers(given: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """curl's -H: each 'Name: value'."""
    pairs = []
    for header in given:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"--header {header!r}: give 'Name: value', as curl -H takes it")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)
