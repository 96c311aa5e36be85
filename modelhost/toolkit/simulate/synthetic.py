"""A synthetic access log for `modelhost simulate`: Zipf traffic, optionally with a scan.

python -m modelhost.toolkit.simulate.synthetic zipf.jsonl --models 100 --requests 50000
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from modelhost.toolkit.traffic import Popularity

MiB = 2**20


@dataclass(frozen=True, kw_only=True)
class Synthetic:
    models: int = 100
    requests: int = 50_000
    zipf_s: float = 1.0
    scan_every: int = 0  # every n-th request to a new model (0: no scan)
    shift_every: int = 0  # every n requests the popularity ranks move (0: never)
    size_mib: tuple[float, float] = (1.0, 1.0)  # log-uniform
    load_ms_per_mib: float = 100.0  # times a log-normal factor
    interval_s: float = 0.1
    seed: int = 1


def records(spec: Synthetic) -> Iterator[dict[str, object]]:
    """One access-log record per request; a model's first request is a miss, the rest hits."""
    rng = random.Random(spec.seed)
    popularity = Popularity.zipf([str(k) for k in range(spec.models)], spec.zipf_s)
    shapes: dict[str, tuple[int, float]] = {}
    for position in range(spec.requests):
        scan = spec.scan_every and position % spec.scan_every == spec.scan_every - 1
        model = f"scan-{position}" if scan else _model(spec, int(popularity.pick(rng)), position)
        first = model not in shapes
        if first:
            shapes[model] = _shape(spec, rng)
        size_bytes, load_ms = shapes[model]
        yield {
            "time": round(position * spec.interval_s, 3),
            "model": model,
            "cache": "miss" if first else "hit",
            "model_bytes": size_bytes,
            "load_ms": load_ms,
        }


def _model(spec: Synthetic, rank: int, position: int) -> str:
    """The model at a popularity rank; a shift moves every rank by a third of the models."""
    shifts = position // spec.shift_every if spec.shift_every else 0
    return f"model-{(rank + shifts * max(1, spec.models // 3)) % spec.models}"


def _shape(spec: Synthetic, rng: random.Random) -> tuple[int, float]:
    low, high = (math.log(v) for v in spec.size_mib)
    size_mib = math.exp(rng.uniform(low, high))
    return int(size_mib * MiB), round(size_mib * spec.load_ms_per_mib * rng.lognormvariate(0, 1), 1)


def write(path: Path, spec: Synthetic) -> Path:
    with Path(path).open("w") as out:
        for record in records(spec):
            out.write(json.dumps(record) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--zipf-s", type=float, default=1.0)
    parser.add_argument("--scan-every", type=int, default=0)
    parser.add_argument("--shift-every", type=int, default=0)
    parser.add_argument("--size-mib", type=float, nargs=2, default=(1.0, 1.0))
    parser.add_argument("--interval-s", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    spec = Synthetic(
        models=args.models,
        requests=args.requests,
        zipf_s=args.zipf_s,
        scan_every=args.scan_every,
        shift_every=args.shift_every,
        size_mib=tuple(args.size_mib),
        interval_s=args.interval_s,
        seed=args.seed,
    )
    write(args.out, spec)


if __name__ == "__main__":
    main()
