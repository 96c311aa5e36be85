"""A fleet's hit ratio on real instances: a Zipf trace (90 models of 4 MiB, 900 requests) through
three instances behind the shipped nginx config, each with 48 MiB of room beside its idle PSS,
against one instance with 144 MiB of room. Prints both hit ratios, each instance's share of the
fleet's requests and each server's room left at the end (the idle baseline drifts up with loads,
which takes room away).

    python benchmarks/fleet_hit_ratio.py [--runs 1]

A measurement, not a test: the ratio depends on the random loopback ports (the ring hashes
them) and on the drift; `modelhost simulate --instances` gives the hash's part alone.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx

TESTS = Path(__file__).parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "fleet")]  # fleet_tools imports helpers/
from fleet_tools import IRIS_ROW, RunningNginx  # noqa: E402

from modelhost import testing  # noqa: E402
from modelhost.toolkit.traffic import Popularity  # noqa: E402

MiB = 2**20
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(90)]
MODEL_BYTES = 4 * MiB
ROOM_BYTES = 48 * MiB  # per instance, beside its idle baseline: about twelve models


def make_store(root: Path) -> Path:
    padded = testing.padded_logreg(root / ".src/padded.joblib", MODEL_BYTES)
    for model in MODELS:
        testing.copy_artifact(padded, root / model)
    return root


def trace(requests: int = 900) -> list[str]:
    popularity = Popularity.zipf(MODELS, 1.0)
    pick = random.Random(11)
    return [popularity.pick(pick) for _ in range(requests)]


def args(store: Path, work: Path, budget: int | str, index: int = 0) -> list[str]:
    return testing.serve_args(
        store, work / f"cache{index}", workers=1, memory_budget=budget, instance_id=f"i{index}"
    )


def hit_ratio(url: str, models: Sequence[str]) -> tuple[float, Counter[str]]:
    """The share of hits, and the requests each instance answered."""
    hits, answered = 0, Counter[str]()
    with httpx.Client(base_url=url, timeout=60) as client:
        for model in models:
            response = client.post(f"/models/{model}/invoke", json=IRIS_ROW)
            assert response.status_code == 200, response.text
            hits += response.headers["x-modelhost-cache"] == "hit"
            answered[response.headers["x-modelhost-instance"]] += 1
    return hits / len(models), answered


def run(store: Path, tmp_path: Path) -> None:
    rooms = [ROOM_BYTES] * 3 + [3 * ROOM_BYTES]  # three instances, and one with all their room
    servers = [testing.RunningServer(args(store, tmp_path, "4GiB", i), tmp_path) for i in range(4)]
    try:
        for server in servers:
            server.start()
        # a budget is the idle server's PSS plus room, and PSS splits the library pages that
        # processes share, so a server's idle PSS depends on how many others run: measure it
        # with all four up, then restart each (the others still up) with its own baseline + room
        for i, room in enumerate(rooms):
            baseline = memory(servers[i])["baselineBytes"]
            servers[i].stop()
            servers[i] = testing.RunningServer(args(store, tmp_path, baseline + room, i), tmp_path)
            servers[i].start()
        requests = trace()
        lines = [f"127.0.0.1:{s.port}" for s in servers[:3]]
        with RunningNginx(tmp_path / "nginx", lines) as router:
            fleet_ratio, answered = hit_ratio(router.url, requests)
        pooled_ratio, _ = hit_ratio(servers[3].url, requests)
        room_mib = [(m["budgetBytes"] - m["baselineBytes"]) / MiB for m in map(memory, servers)]
    finally:
        for server in servers:
            server.stop()
    print(
        f"hit ratio: fleet of 3 {fleet_ratio:.3f}, one with 3x the room {pooled_ratio:.3f} "
        f"({fleet_ratio / pooled_ratio:.1%}); room at the end (MiB): "
        + ", ".join(f"{r:.0f}" for r in room_mib)
    )
    shares = ", ".join(f"{name} {n / len(requests):.2f}" for name, n in sorted(answered.items()))
    print(f"instances' shares of the fleet's requests: {shares}")


def memory(server: testing.RunningServer) -> dict[str, int]:
    stats: dict[str, int] = httpx.get(f"{server.url}/stats").json()["memory"]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description="a fleet's hit ratio against one pooled instance")
    parser.add_argument("--runs", type=int, default=1)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="fleet-hit-") as work:
        store = make_store(Path(work) / "store")
        for index in range(runs):
            run(store, Path(work) / f"run{index}")


if __name__ == "__main__":
    main()
