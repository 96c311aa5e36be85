"""`modelhost bench` through the shipped nginx config in front of three `serve --workers 1`
instances on loopback (60 iris models, Zipf popularity): bench works unchanged through the
router, and the figures are the fleet's, with its hit ratio and each instance's share of the
requests. With --spread, `modelhost fleet hot-models` keeps the hot-model map during the run.

    python benchmarks/fleet_bench.py [--users 4] [--duration 8] [--zipf-s 1.0] [--spread]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "fleet")]  # fleet_tools imports helpers/
from fleet_tools import RunningNginx  # noqa: E402

from modelhost import testing  # noqa: E402
from modelhost.integrations.spread import parse  # noqa: E402

MODELS = [f"tenants/t{i:03d}.joblib" for i in range(60)]
INSTANCES = 3
WARMUP_S = 2.0
HOT_MAP = "modelhost-hot-models.map"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--zipf-s", type=float, default=1.0)
    parser.add_argument("--spread", action="store_true", help="run `fleet hot-models` too")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as folder:
        work = Path(folder)
        trained = testing.iris_logreg(work / "store/.src/iris.joblib")
        for model in MODELS:
            testing.copy_artifact(trained, work / "store" / model)
        servers = [
            testing.RunningServer(
                testing.serve_args(
                    work / "store", work / f"cache{i}", workers=1, instance_id=f"fleet-{i}"
                ),
                work,
            )
            for i in range(INSTANCES)
        ]
        try:
            for server in servers:
                server.start()
            lines = [f"127.0.0.1:{s.port}" for s in servers]
            with RunningNginx(work / "nginx", lines) as router:
                urls = [s.url for s in servers]
                with spreader(router, urls, options) if options.spread else nullcontext():
                    bench(router.url, work / "bench", options)
                report(json.loads((work / "bench/summary.json").read_text()))
                print(f"hot-model map: {parse((router.work / HOT_MAP).read_text()) or 'empty'}")
        finally:
            for server in servers:
                server.stop()


def bench(url: str, out: Path, options: argparse.Namespace) -> None:
    command = [sys.executable, "-m", "modelhost", "bench", url, "--models", ",".join(MODELS)]
    command += ["--popularity", "zipf", "--zipf-s", str(options.zipf_s)]
    command += ["-c", str(options.users), "--duration", str(options.duration)]
    command += ["--warmup", str(WARMUP_S), "--quiet", "--out", str(out)]
    subprocess.run(command, check=True)


@contextmanager
def spreader(
    router: RunningNginx, instances: list[str], options: argparse.Namespace
) -> Iterator[None]:
    """`fleet hot-models` polling every second while the bench runs, stopped after it; prints
    each rewrite of the map."""
    reload = f"{router.binary} -p {router.work} -c {router.work / 'nginx.conf'} -s reload"
    rounds = math.ceil(WARMUP_S + options.duration) + 5
    command = [sys.executable, "-m", "modelhost", "fleet", "hot-models", "--interval", "1"]
    command += ["--map", str(router.work / HOT_MAP), "--reload", reload, "--rounds", str(rounds)]
    for url in instances:
        command += ["--instance", url]
    log = router.work / "hot-models.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stderr=stderr)
        try:
            yield
        finally:
            process.terminate()
            process.wait(timeout=10)
    rewrites = [line for line in log.read_text().splitlines() if line.startswith("hot models:")]
    print(f"map rewrites (nginx reloads): {len(rewrites)}; " + "; ".join(rewrites))


def report(summary: dict[str, Any]) -> None:
    """The fleet's throughput and hit ratio, and each instance's share of the requests."""
    cache, instances = summary["cache"], summary["instances"]
    answered = max(1, sum(instances.values()))
    print(
        f"fleet: {summary['throughput_rps']:.0f} req/s, p99 {summary['latency_ms']['p99']:.1f} ms, "
        f"hit ratio {cache.get('hit', 0) / max(1, sum(cache.values())):.3f} {cache}"
    )
    shares = {name: count / answered for name, count in instances.items()}
    print(
        "instances' shares: "
        + ", ".join(f"{name} {share:.2f}" for name, share in shares.items())
        + f" (busiest / mean {max(shares.values(), default=0.0) * len(shares):.2f})"
    )


if __name__ == "__main__":
    main()
