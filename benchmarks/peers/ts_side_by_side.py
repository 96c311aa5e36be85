"""The same TorchServe `.mar` served by modelhost and by TorchServe itself: same answers, then
throughput and p99 at each concurrency, memory (PSS of the whole process tree with the model
loaded, and what each further copy of the model under another name adds), and cold start
(process start to the first answered request, over `--cold-starts` more starts on fresh folders).

    .venv/bin/python benchmarks/peers/install.py --peers torchserve   # once
    .venv/bin/python benchmarks/peers/ts_side_by_side.py [--duration 10] [--concurrency 1 16]

The archive is `modelhost.testing.torchserve.custom_handler_mar`: an eager model from model.py
and a state_dict, a BaseHandler subclass, index_to_name.json and a model-config.yaml. Both
servers run pinned to one core with one worker for the model, wrk on the other core (as
race.py does); modelhost with `--preload-runtimes torchserve`, as a server of TorchServe
archives is configured. Results go to benchmarks/results/ts-side-by-side-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import RESULTS, machine, markdown_table, write_results  # noqa: E402
from hot_path import ensure_wrk  # noqa: E402
from install import venvs_root  # noqa: E402
from race import _running, _wrk  # noqa: E402
from servers import POST_LUA, Launch, free_ports  # noqa: E402

from modelhost.testing import torchserve  # noqa: E402

MODEL = "rows"
ROWS = [[5.1, 3.5, 1.4, 0.2], [6.0, 2.9, 4.5, 1.5], [7.7, 3.0, 6.1, 2.3]]


LoadMore = Callable[[str], None]  # load one more model, by the name of its archive's stem


def modelhost_launch(work: Path, store: Path, preload: str) -> tuple[Launch, LoadMore]:
    (port,) = free_ports(1)
    argv = [sys.executable, "-m", "modelhost", "serve", "--model-store", str(store)]
    argv += ["--cache-dir", str(work / "cache"), "--workers", "1", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--memory-budget", "4GiB"]
    argv += ["--preload-runtimes", preload] if preload else []  # empty: modelhost's default
    url = f"http://127.0.0.1:{port}/predictions/{MODEL}.mar"

    def load_more(name: str) -> None:  # a model loads on its first request
        _answered(f"http://127.0.0.1:{port}/predictions/{name}.mar")

    return Launch(argv=argv, url=url, lua=POST_LUA, encode=_row_body, cwd=work), load_more


def torchserve_launch(work: Path, store: Path) -> tuple[Launch, LoadMore]:
    venv = venvs_root() / "torchserve"
    inference, management, metrics = free_ports(3)
    config = [
        f"inference_address=http://127.0.0.1:{inference}",
        f"management_address=http://127.0.0.1:{management}",
        f"metrics_address=http://127.0.0.1:{metrics}",
        "disable_token_authorization=true",
        "default_workers_per_model=1",
        "enable_model_api=true",  # lets the management API register the further models
    ]
    (work / "config.properties").write_text("\n".join(config) + "\n")
    argv = [str(venv / "bin" / "torchserve"), "--start", "--foreground", "--ncs"]
    argv += ["--model-store", str(store), "--ts-config", str(work / "config.properties")]
    argv += ["--models", f"{MODEL}={MODEL}.mar"]
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin"}  # its workers run `python3`
    url = f"http://127.0.0.1:{inference}/predictions/{MODEL}"

    def load_more(name: str) -> None:  # registered with one worker, as the first one is
        import httpx

        params = {"url": f"{name}.mar", "model_name": name, "initial_workers": 1}
        management_url = f"http://127.0.0.1:{management}/models"
        registered = httpx.post(
            management_url, params={**params, "synchronous": "true"}, timeout=120
        )
        registered.raise_for_status()
        _answered(f"http://127.0.0.1:{inference}/predictions/{name}")

    return Launch(argv=argv, url=url, lua=POST_LUA, encode=_row_body, cwd=work, env=env), load_more


def _answered(url: str) -> None:
    import httpx

    httpx.post(url, json=ROWS[0], timeout=120).raise_for_status()


def _row_body(row: list[float]) -> bytes:
    return json.dumps(row).encode()


def answers(url: str) -> list[Any]:
    import httpx

    headers = {"Content-Type": "application/json"}
    return [httpx.post(url, json=row, headers=headers, timeout=30).json() for row in ROWS]


def tree_pss_bytes(root_pid: int) -> int:
    """The PSS of every process in `root_pid`'s session (the server, its JVM, its workers)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) != root_pid:  # the session id: start_new_session made it the pid
                continue
            rollup = (stat.parent / "smaps_rollup").read_text()
        except (OSError, ValueError):
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


def measure(
    name: str, launch: Launch, load_more: LoadMore, args: argparse.Namespace
) -> dict[str, Any]:
    log = launch.cwd / f"{name}.log"
    started = time.monotonic()
    with _running(launch, args.server_core, log) as life:
        cold_start_s = time.monotonic() - started  # _running returns once a POST answered 200
        got = answers(launch.url)
        pid = _server_pid(launch.cwd)
        runs = []
        for connections in args.concurrency:
            _wrk(launch, connections, args.warmup, args.wrk_core)
            result = _wrk(launch, connections, args.duration, args.wrk_core)
            runs.append({"concurrency": connections, **result})
            print(name, connections, round(result["requests_per_s"]), result["latency_ms"]["p99"])
        pss = tree_pss_bytes(pid) if pid else 0
        for copy in range(1, args.models):
            load_more(f"{MODEL}-{copy}")
        time.sleep(2)  # let the last load's garbage go
        pss_all = tree_pss_bytes(pid) if pid else 0
    per_model = (pss_all - pss) / (args.models - 1) if args.models > 1 else 0.0
    return {
        "server": name,
        "cold_start_s": cold_start_s,
        "answers": got,
        "pss_bytes": pss,
        "pss_bytes_with_all_models": pss_all,
        "pss_bytes_per_further_model": per_model,
        "runs": runs,
        **life,
    }


def cold_starts(
    name: str, make: Callable, store: Path, tmp: Path, args: argparse.Namespace
) -> list[float]:
    """`--cold-starts` more starts on a fresh folder each, to the first answered request."""
    seconds = []
    for attempt in range(args.cold_starts):
        work = tmp / f"{name}-cold-{attempt}"
        work.mkdir()
        launch, _ = make(work, store)
        started = time.monotonic()
        with _running(launch, args.server_core, work / "server.log"):
            seconds.append(time.monotonic() - started)
    return seconds


def _server_pid(work: Path) -> int:
    """The pid of the session leader started last under `work` (its cwd)."""
    found = 0
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if cwd.resolve() == work.resolve():
                stat = (cwd.parent / "stat").read_text().rsplit(")", 1)[1].split()
                found = int(stat[3])
        except (OSError, ValueError):
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--models", type=int, default=4, help="copies loaded for memory/model")
    parser.add_argument(
        "--cold-starts", type=int, default=4, help="starts beyond the first, for cold start"
    )
    parser.add_argument(
        "--preload-runtimes",
        default="torchserve",
        help="modelhost's, as docs/migrating-torchserve.md advises (its default: "
        "sklearn,xgboost,lightgbm,onnxruntime)",
    )
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0")
    args = parser.parse_args()
    ensure_wrk()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        archive = torchserve.custom_handler_mar(store / f"{MODEL}.mar", seed=11)
        for copy in range(1, args.models):
            shutil.copy(archive, store / f"{MODEL}-{copy}.mar")
        expected = torchserve.torchserve_answers(archive, ROWS)
        modelhost = functools.partial(modelhost_launch, preload=args.preload_runtimes)
        launches = {"modelhost": modelhost, "torchserve": torchserve_launch}
        for name, make in launches.items():
            work = Path(tmp) / name
            work.mkdir()
            results.append(measure(name, *make(work, store), args))
        for result in results:
            name = result["server"]
            more = cold_starts(name, launches[name], store, Path(tmp), args)
            result["cold_starts_s"] = [result["cold_start_s"], *more]
    for result in results:
        result["same_answers"] = result["answers"] == expected
    rows = [_row(result, run) for result in results for run in result["runs"]]
    header = ["server", "c", "req/s", "p50 ms", "p99 ms", "PSS MiB", "MiB/model"]
    header += ["cold s, range (median)", "same"]
    document = {"machine": machine(), "settings": vars(args), "results": results}
    write_results("ts-side-by-side", document, markdown_table(header, rows))
    print(markdown_table(header, rows))
    print(f"results in {RESULTS}")


def _row(result: dict[str, Any], run: dict[str, Any]) -> list[Any]:
    return [
        result["server"],
        run["concurrency"],
        round(run["requests_per_s"]),
        run["latency_ms"]["p50"],
        run["latency_ms"]["p99"],
        round(result["pss_bytes"] / 2**20),
        round(result["pss_bytes_per_further_model"] / 2**20, 1),
        _spread(result["cold_starts_s"]),
        result["same_answers"],
    ]


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} ({statistics.median(values):.2f})"


if __name__ == "__main__":
    main()
