"""A quiet tenant's cold start beside another tenant's burst of cold models.

One modelhost (`--workers`, tenants by the names' first two segments), on a local store or, with
`--http-store`, a static HTTP server of the same folder with `--max-concurrent-downloads`; with
`--archives`, the noisy tenant's models are `.tar.gz` archives, unpacked on arrival. Per round:
the quiet tenant's first request to a cold model of its own, alone; then the noisy tenant sends
one request to each of --burst distinct cold models at once, and once --after of them have
loaded (by then all have reached the server) the quiet tenant's request to another cold model
of its own. Each time is the quiet request's, sent to answered, and how many noisy models
loaded, downloaded or unpacked meanwhile (the queue it waited behind). `--checkout` runs another
commit's package (a `git archive`), to set today's order against this one's in one run:

    git archive HEAD~3 | (mkdir -p /tmp/base && tar -x -C /tmp/base)
    python benchmarks/cold_bursts.py --rounds 3 --checkout /tmp/base --commit HEAD~3
    python benchmarks/cold_bursts.py --rounds 3 [--http-store]

Prints a markdown table and writes benchmarks/results/cold_bursts-<date>.json (and .md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from _common import (
    add_checkout,
    machine,
    markdown_table,
    post_invoke,
    use_checkout,
    write_results,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

MiB = 2**20
ROWS = [[0.0] * 64]  # a digits row


def main() -> None:
    args = _parse_args()
    checkout = use_checkout(args)
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="cold-bursts-") as scratch:
        store = build_store(Path(scratch) / "store", args, testing)
        outcomes = run_rounds(store, Path(scratch), args, checkout, testing)
    rows = [
        [o["scenario"], round(o["quiet_ms"]), o["noisy_loaded_meanwhile"], round(o["burst_s"], 2)]
        for o in outcomes
    ]
    table = markdown_table(
        ["scenario", "quiet cold start ms", "noisy models done meanwhile", "burst s"], rows
    )
    medians = summary(outcomes)
    headers = ["scenario", "median ms", "median meanwhile", "median burst s"]
    table += "\n\n" + markdown_table(headers, medians)
    print(table)
    results = {"machine": machine(), "args": vars(args) | {"checkout": str(checkout)}}
    results["outcomes"] = outcomes
    print(write_results("cold_bursts", results, table))


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burst", type=int, default=40, help="the noisy tenant's cold models")
    parser.add_argument("--model-mib", type=float, default=8.0)
    parser.add_argument("--after", type=int, default=4, help="noisy loads before the quiet one")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--http-store", action="store_true", help="download from an HTTP store")
    parser.add_argument("--max-concurrent-downloads", type=int, default=1)
    parser.add_argument("--archives", action="store_true", help="the noisy models as .tar.gz")
    add_checkout(parser)
    return parser.parse_args()


def build_store(root: Path, args: argparse.Namespace, testing: Any) -> Path:
    """Copies of one forest: each its own model, cold until asked."""
    forest = testing.random_forest(root / ".src/forest.joblib", int(args.model_mib * MiB))
    noisy = archived(forest, root / ".src", testing) if args.archives else forest
    for name in noisy_names(args):
        testing.copy_artifact(noisy, root / name)
    for name in quiet_names(args):
        testing.copy_artifact(forest, root / name)
    return root


def archived(forest: Path, scratch: Path, testing: Any) -> Path:
    """The forest in a folder, packed as a .tar.gz."""
    folder = testing.copy_artifact(forest, scratch / "folder/model.joblib").parent
    return Path(testing.tar_gz_of(folder, scratch / "forest.tar.gz"))


def noisy_names(args: argparse.Namespace) -> list[str]:
    suffix = ".tar.gz" if args.archives else ".joblib"
    return [f"t/noisy/r{r}m{i}{suffix}" for r in range(args.rounds) for i in range(args.burst)]


def quiet_names(args: argparse.Namespace) -> list[str]:
    return [f"t/quiet/{kind}{r}.joblib" for r in range(args.rounds) for kind in ("alone", "beside")]


def run_rounds(
    store: Path, scratch: Path, args: argparse.Namespace, checkout: Path | None, testing: Any
) -> list[dict[str, Any]]:
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(serving(store, scratch, args, env, checkout, testing, stack))
        quiet = stack.enter_context(httpx.Client(base_url=server.url, timeout=600))
        outcomes = []
        for round_ in range(args.rounds):
            outcomes.append(alone(server, round_, quiet))
            outcomes.append(beside(server, round_, args, quiet))
        return outcomes


def serving(
    store: Path,
    scratch: Path,
    args: argparse.Namespace,
    env: dict[str, str],
    checkout: Path | None,
    testing: Any,
    stack: contextlib.ExitStack,
) -> Any:
    settings: dict[str, object] = {
        "workers": args.workers,
        "memory_budget": "8GiB",
        "tenant_from": "name:2",
        "max_concurrent_downloads": args.max_concurrent_downloads,
    }
    source: Any = store
    if args.http_store:
        from helpers.stores import StaticHttpServer

        source = stack.enter_context(StaticHttpServer(store)).url + "/"
    argv = testing.serve_args(source, scratch / "cache", **settings)
    # `python -m` reads the package from its working folder first
    cwd = checkout or Path(__file__).resolve().parents[1]
    return testing.RunningServer(argv, scratch / "server", env=env, cwd=cwd, startup_timeout_s=120)


def alone(server: Any, round_: int, quiet: httpx.Client) -> dict[str, Any]:
    quiet_ms = timed_invoke(quiet, f"t/quiet/alone{round_}.joblib")
    return {
        "scenario": "alone",
        "round": round_,
        "quiet_ms": quiet_ms,
        "noisy_loaded_meanwhile": 0,
        "burst_s": 0.0,
    }


def beside(
    server: Any, round_: int, args: argparse.Namespace, quiet: httpx.Client
) -> dict[str, Any]:
    burst = [name for name in noisy_names(args) if name.startswith(f"t/noisy/r{round_}m")]
    kind = "unpack" if args.archives else "download" if args.http_store else "load"
    done_before = noisy_done(server, kind)
    started = time.perf_counter()
    with ThreadPoolExecutor(len(burst)) as clients:
        answered = [clients.submit(noisy_invoke, server.url, name) for name in burst]
        while noisy_done(server, kind) < done_before + args.after:
            time.sleep(0.005)
        sent = noisy_done(server, kind)
        quiet_ms = timed_invoke(quiet, f"t/quiet/beside{round_}.joblib")
        meanwhile = noisy_done(server, kind) - sent
        for future in answered:
            future.result()
    burst_s = time.perf_counter() - started
    scenario = f"beside {args.burst} cold{' archives' if args.archives else ''}"
    return {
        "scenario": scenario,
        "round": round_,
        "quiet_ms": quiet_ms,
        "noisy_loaded_meanwhile": meanwhile,
        "burst_s": burst_s,
    }


def noisy_done(server: Any, kind: str) -> int:
    return sum(event["model"].startswith("t/noisy/") for event in server.events(kind))


def noisy_invoke(url: str, name: str) -> None:
    with httpx.Client(timeout=600) as client:
        post_invoke(client, url, name, ROWS)


def timed_invoke(client: httpx.Client, name: str) -> float:
    """Milliseconds to an answer, on a client made beforehand: making one (its TLS context)
    while the burst's threads run took the load generator half a second."""
    wall_ms: float = post_invoke(client, "", name, ROWS)["wall_ms"]
    return wall_ms


def summary(outcomes: list[dict[str, Any]]) -> list[list[Any]]:
    """Each scenario's medians: the quiet cold start, the noisy models done meanwhile, the burst."""
    fields = ("quiet_ms", "noisy_loaded_meanwhile", "burst_s")
    rows = []
    for scenario in dict.fromkeys(o["scenario"] for o in outcomes):
        mine = [o for o in outcomes if o["scenario"] == scenario]
        rows.append([scenario, *(round(statistics.median(o[f] for o in mine), 2) for f in fields)])
    return rows


if __name__ == "__main__":
    main()
