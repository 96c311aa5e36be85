"""A noisy tenant's flood of large bodies at its slow model, beside a quiet tenant's loaded models.

One modelhost (`--workers`, `--memory-budget`, tenants by the names' first segment, the quiet
tenant guaranteed `memory_min`): the quiet tenant's forests are loaded, then --requests bodies of
--body-mib are sent at once to the noisy tenant's model, which sleeps --sleep-s a request. Midway
the quiet tenant calls each of its models. Reports the main process's peak RSS, the server's PSS
then, the quiet calls' cache headers, the noisy answers by status, and the quiet models evicted.
`--checkout` runs another commit's package (a `git archive`), to set it against this one:

    git archive HEAD~3 | (mkdir -p /tmp/base && tar -x -C /tmp/base)
    python benchmarks/tenant_bodies.py --checkout /tmp/base --commit HEAD~3
    python benchmarks/tenant_bodies.py

Prints a markdown table and writes benchmarks/results/tenant_bodies-<date>.json (and .md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from _common import add_checkout, markdown_table, use_checkout, write_results

QUIET = [f"quiet/f{i}.joblib" for i in range(4)]
JSON = {"content-type": "application/json"}


def main() -> None:
    args = _parse_args()
    checkout = use_checkout(args)
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="tenant-bodies-") as scratch:
        outcome = run(Path(scratch), args, checkout, testing)
    table = markdown_table(
        ["figure", "value"],
        [
            ["main process, peak RSS (MiB)", round(outcome["peak_rss_mib"])],
            ["server PSS midway (MiB), budget", f"{outcome['pss_mib']:.0f}, {args.memory_budget}"],
            ["quiet calls midway, by cache", dict(outcome["quiet"])],
            ["noisy answers, by status", dict(outcome["noisy"])],
            ["quiet models evicted", outcome["evicted"]],
        ],
    )
    print(table)
    results = {"args": vars(args) | {"checkout": str(checkout)}, **outcome}
    write_results("tenant_bodies", results, table)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--body-mib", type=float, default=6.0)
    parser.add_argument("--sleep-s", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-budget", default="700MiB")
    parser.add_argument("--memory-min", default="200MiB", help="the quiet tenant's")
    add_checkout(parser)
    return parser.parse_args()


def run(
    scratch: Path, args: argparse.Namespace, checkout: Path | None, testing: Any
) -> dict[str, Any]:
    from modelhost.testing.handlers import slow_handler_folder

    store = scratch / "store"
    slow_handler_folder(store / "noisy/slow", sleep_s_param=False, fixed_sleep_s=args.sleep_s)
    for seed, name in enumerate(QUIET):
        testing.random_forest(store / name, target_bytes=20 << 20, seed=seed)
    tenants = scratch / "tenants.toml"
    tenants.write_text(f'[tenants."quiet"]\nmemory_min = "{args.memory_min}"\n')
    serve = testing.serve_args(
        store,
        scratch / "cache",
        workers=args.workers,
        memory_budget=args.memory_budget,
        tenant_from="name:1",
        tenants_file=str(tenants),
    )
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    with testing.RunningServer(serve, scratch, env=env, cwd=checkout) as server:
        return flooded(server, args, json.dumps(testing.digits_rows(1)))


def flooded(server: Any, args: argparse.Namespace, rows: str) -> dict[str, Any]:
    """The quiet models loaded, the flood sent, and what it did."""
    for name in QUIET:
        httpx.post(f"{server.url}/models/{name}/invoke", content=rows, headers=JSON, timeout=120)
    body = b'{"x": "' + b"a" * int(args.body_mib * 2**20 - 16) + b'"}'
    noisy: Counter[int] = Counter()

    def send() -> None:
        url = f"{server.url}/models/noisy/slow/invoke"
        noisy[httpx.post(url, content=body, headers=JSON, timeout=300).status_code] += 1

    threads = [threading.Thread(target=send) for _ in range(args.requests)]
    for thread in threads:
        thread.start()
    peak, quiet, pss = 0, Counter[str](), 0.0
    started = time.monotonic()
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, psutil.Process(server.pid).memory_info().rss)
        if not quiet and time.monotonic() - started > args.sleep_s * 2:
            quiet = quiet_calls(server.url, rows)
            pss = httpx.get(f"{server.url}/stats").json()["memory"]["pssBytes"] / 2**20
        time.sleep(0.1)
    evicted = [e["model"] for e in server.events("evict") if e["model"] in QUIET]
    return {
        "peak_rss_mib": peak / 2**20,
        "pss_mib": pss,
        "quiet": quiet,
        "noisy": noisy,
        "evicted": evicted,
    }


def quiet_calls(url: str, rows: str) -> Counter[str]:
    """The quiet tenant's call of each of its models: its cache header, or its status."""
    answers = [
        httpx.post(f"{url}/models/{name}/invoke", content=rows, headers=JSON, timeout=120)
        for name in QUIET
    ]
    return Counter(a.headers.get("x-modelhost-cache") or str(a.status_code) for a in answers)


if __name__ == "__main__":
    sys.exit(main())
