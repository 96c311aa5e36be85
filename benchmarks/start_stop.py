"""A server's start and stop: seconds from `modelhost serve` to `/ping` answering 200 (one
worker, an iris store), and from SIGTERM to the process's exit. `--checkout` times another
commit's (a `git archive`).

    python benchmarks/start_stop.py [--rounds 5] [--checkout /tmp/base]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import add_checkout, markdown_table, median, use_checkout, write_results


def once(store: Path, cache: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds to the first 200 from /ping, and from SIGTERM to the exit."""
    from modelhost.testing import free_port

    port = free_port()
    argv = [sys.executable, "-m", "modelhost", "serve", "--model-store", str(store)]
    argv += ["--cache-dir", str(cache), "--workers", "1", "--host", "127.0.0.1"]
    started = time.perf_counter()
    server = subprocess.Popen(
        [*argv, "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while not _pings(f"http://127.0.0.1:{port}/ping"):
            if time.perf_counter() - started > 60:
                raise RuntimeError("the server did not answer /ping in 60 s")
            time.sleep(0.01)
        ready_s = time.perf_counter() - started
        stopping = time.perf_counter()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        return ready_s, time.perf_counter() - stopping
    finally:
        if server.poll() is None:
            server.kill()


def _pings(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    add_checkout(parser)
    args = parser.parse_args()
    checkout = use_checkout(args)
    from modelhost import testing

    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="modelhost-start-stop-") as folder:
        store = Path(folder) / "store"
        testing.iris_logreg(store / "iris.pkl")
        runs = [once(store, Path(folder) / f"cache-{n}", env) for n in range(args.rounds)]
    starts, stops = [run[0] for run in runs], [run[1] for run in runs]
    table = markdown_table(
        ["rounds", "start to /ping 200, s (median; range)", "SIGTERM to exit, s (median; range)"],
        [
            [
                args.rounds,
                f"{median(starts):.2f} ({min(starts):.2f}-{max(starts):.2f})",
                f"{median(stops):.2f} ({min(stops):.2f}-{max(stops):.2f})",
            ]
        ],
    )
    print(table)
    path = write_results("start_stop", {"commit": args.commit, "runs": runs}, table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
