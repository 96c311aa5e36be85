"""The race: modelhost, TorchServe, MMS and MLServer (and the in-process floor) on one iris model.

Each server in turn is started pinned to core 1 (`taskset -c 1`: its whole process tree, Java
included), waited for, checked against the model's own predictions, then loaded with
`taskset -c 0 wrk -t1 -cC -dDs --latency` at each concurrency (a discarded warm-up run, then one
measured run, three at 16), and stopped. Writes benchmarks/results/race-<date>.json and .md.

    .venv/bin/python benchmarks/peers/install.py     # once: the peers' venvs and wrk
    .venv/bin/python benchmarks/peers/race.py        # the race (~12 min; ~20 with --servers
                                                     # adding torchserve-batch mms-batch ...)
    .venv/bin/python benchmarks/peers/race.py --servers mms --concurrency 1 16 --duration 2 \
        --warmup 1 --runs-at-16 1                   # a smoke run
    .venv/bin/python benchmarks/peers/race.py --protocol grpc --servers modelhost torchserve \
        mlserver                                    # their gRPC ports, loaded by h2load
    .venv/bin/python benchmarks/peers/race.py --protocol grpc --servers modelhost-h2corn \
        modelhost                                   # modelhost on h2corn and on its default

Over gRPC each server is checked by one call of a real client (h2load counts a gRPC error as
a success: its HTTP status is 200), then loaded with the same unary call by h2load, a
connection per user, as benchmarks/grpc_path.py loads modelhost.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common

from _common import RESULTS, add_serve_arg, machine, markdown_table, median, write_results  # noqa: E402
from grpc_path import ensure_h2load, grpc_frame, h2load  # noqa: E402
from hot_path import ensure_wrk, parse_wrk  # noqa: E402
from servers import ROW, SERVERS, Launch, Options, Server  # noqa: E402

from modelhost import testing  # noqa: E402

DEFAULT_SERVERS = ["modelhost", "floor", "torchserve", "mms", "mlserver"]
HEADER = ["server", "concurrency", "runs", "requests/s", "p50 ms", "p90 ms", "p99 ms", "errors"]
STARTUP_TIMEOUT_S = 180.0
Check = tuple[list[float], Any]  # a row and the model's prediction for it


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    if args.protocol == "grpc":
        ensure_h2load()
    options = Options(args.serve_arg, args.batch_size, args.batch_delay_ms)
    logs = RESULTS / time.strftime("race-%Y%m%d-%H%M%S-logs")
    logs.mkdir(parents=True)
    print(f"server logs: {logs}")
    with tempfile.TemporaryDirectory(prefix="modelhost-race-") as scratch:
        model = testing.iris_logreg(Path(scratch) / "iris.joblib")
        checks = _checks(model)
        results = [
            _race_or_report(
                SERVERS[name],
                work=Path(scratch) / name,
                model=model,
                checks=checks,
                options=options,
                args=args,
                logs=logs,
            )
            for name in args.servers
        ]
    table = _markdown(results)
    settings = {**vars(args), "logs": str(logs)}
    name = "race" if args.protocol == "rest" else "race-grpc"
    path = write_results(name, {"settings": settings, "servers": results}, table)
    print("\n" + table)
    print(f"\nraw results: {path}")
    failed = [result["server"] for result in results if "error" in result]
    if failed:
        sys.exit(f"failed: {', '.join(failed)} (see {logs})")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", nargs="+", default=DEFAULT_SERVERS, choices=list(SERVERS))
    parser.add_argument(
        "--protocol", choices=["rest", "grpc"], default="rest", help="grpc: the gRPC ports"
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--duration", type=int, default=15, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of discarded warm-up")
    parser.add_argument("--runs-at-16", type=int, default=3, help="measured runs at 16")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0")
    parser.add_argument("--batch-size", type=int, default=16, help="for the *-batch servers")
    parser.add_argument("--batch-delay-ms", type=int, default=5, help="for the *-batch servers")
    add_serve_arg(parser)
    return parser.parse_args()


def _checks(model: Path) -> list[Check]:
    """Every third iris row (all three classes) with the model's prediction in-process."""
    import joblib

    rows = [ROW, *testing.iris_rows(150)[::3]]
    return list(zip(rows, joblib.load(model).predict(rows).tolist(), strict=True))


# ---------------------------------------------------------------------------- one server


def _race_or_report(server: Server, **race: Any) -> dict[str, Any]:
    """The server's results, or its failure recorded so the others still run."""
    try:
        return _race_server(server, **race)
    except Exception as error:  # a peer that fails to start must not lose the others' runs
        print(f"{server.name}: FAILED: {error}", file=sys.stderr, flush=True)
        return {
            "server": server.name,
            "error": str(error),
            "versions": {},
            "medians": {},
            "runs": [],
        }


def _race_server(
    server: Server,
    *,
    work: Path,
    model: Path,
    checks: list[Check],
    options: Options,
    args: argparse.Namespace,
    logs: Path,
) -> dict[str, Any]:
    work.mkdir()
    launch = server.launch(work, model, options)
    versions = server.versions()
    print(f"\n{server.name}: {versions}", flush=True)
    log = logs / f"{server.name}.log"
    with _running(launch, args.server_core, log) as life:
        _check_predictions(server, launch, checks)
        print(f"{server.name}: ready in {life['startup_s']:.1f} s; {len(checks) + 1} answers right")
        if args.protocol == "grpc":
            _check_grpc(launch)
        runs = _load(server.name, launch, args)
    return {
        "server": server.name,
        "versions": versions,
        "command": launch.argv,
        "url": launch.url,
        "lua": str(launch.lua),
        "log": str(log),
        **life,
        "medians": _medians(runs),
        "runs": runs,
    }


def _load(name: str, launch: Launch, args: argparse.Namespace) -> list[dict[str, Any]]:
    load = _h2load if args.protocol == "grpc" else _wrk
    runs = []
    for connections in args.concurrency:
        load(launch, connections, args.warmup, args.wrk_core)
        repeats = args.runs_at_16 if connections == 16 else 1
        for repeat in range(repeats):
            result = load(launch, connections, args.duration, args.wrk_core)
            runs.append({"server": name, "concurrency": connections, "run": repeat, **result})
            print(_row_text(runs[-1]), flush=True)
    return runs


def _wrk(launch: Launch, connections: int, duration_s: int, core: str) -> dict[str, Any]:
    command = ["taskset", "-c", core, "wrk", "-t1", f"-c{connections}", f"-d{duration_s}s"]
    command += ["--latency", "-s", str(launch.lua), launch.url]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {**parse_wrk(done.stdout), "wrk_command": command, "wrk_output": done.stdout}


def _h2load(launch: Launch, connections: int, duration_s: int, core: str) -> dict[str, Any]:
    """h2load's run of the server's gRPC call, in wrk's terms (requests/s and latencies)."""
    assert launch.grpc is not None
    request = launch.cwd / "grpc_request.bin"
    request.write_bytes(grpc_frame(launch.grpc.message))
    url = f"http://127.0.0.1:{launch.grpc.port}{launch.grpc.path}"
    return h2load(url, request, connections, duration_s, argparse.Namespace(wrk_core=core))


def _check_grpc(launch: Launch) -> None:
    """One call of the server's gRPC method by a real client: it must answer OK."""
    import grpc

    if launch.grpc is None:
        raise RuntimeError("this server has no gRPC port in the race")
    with grpc.insecure_channel(f"127.0.0.1:{launch.grpc.port}") as channel:
        call = channel.unary_unary(launch.grpc.path)
        answer = call(launch.grpc.message, timeout=60, wait_for_ready=True)
    if not answer:
        raise RuntimeError(f"{launch.grpc.path} answered an empty message")


def _check_predictions(server: Server, launch: Launch, checks: list[Check]) -> None:
    """Refuse to load a server that does not answer the model's own predictions: one request,
    then all of `checks` from 16 threads at once (so a batching server splits real batches)."""
    import httpx

    with httpx.Client(timeout=30) as client:

        def check(row_and_expected: Check) -> str | None:
            row, expected = row_and_expected
            headers = {"Content-Type": "application/json"}
            answer = client.post(launch.url, content=launch.encode(row), headers=headers)
            got = server.predictions(answer.json()) if answer.status_code == 200 else None
            if got == [expected]:
                return None
            return f"{row} answered {answer.status_code} {answer.text[:200]!r}, not [{expected}]"

        wrong = [check(checks[0])]
        with ThreadPoolExecutor(16) as pool:
            wrong += pool.map(check, checks)
    mistakes = [mistake for mistake in wrong if mistake]
    if mistakes:
        shown = "\n".join(mistakes[:5])
        raise RuntimeError(f"{server.name}: {len(mistakes)} wrong answers, e.g.\n{shown}")


# ---------------------------------------------------------------------------- processes


@contextlib.contextmanager
def _running(launch: Launch, core: str, log_path: Path) -> Iterator[dict[str, Any]]:
    """The server pinned to `core` in its own process group. Yields a dict holding its
    `startup_s`, and after the block how it was `stopped`."""
    # TMPDIR of its own: TorchServe and MMS both keep a pid file at $TMPDIR/.model_server.pid
    # and refuse to start while the pid it names exists (a zombie of the previous server does)
    tmp = launch.cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp), **launch.env}
    started = time.monotonic()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            ["taskset", "-c", core, *launch.argv],
            cwd=launch.cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    life: dict[str, Any] = {}
    try:
        _wait_ready(launch, process, log_path)
        life["startup_s"] = time.monotonic() - started
        yield life
    finally:
        life["stopped"] = _stop(process)
        print(f"stopped: {life['stopped']}", flush=True)


def _wait_ready(launch: Launch, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Until the ready URL answers 200, then the after-start step, then one 200 to the POST."""
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    if launch.ready_url:
        _poll(lambda: httpx.get(launch.ready_url, timeout=2), process, deadline, log_path)
    if launch.after_start:
        launch.after_start()
    headers = {"Content-Type": "application/json"}

    def post() -> httpx.Response:
        return httpx.post(launch.url, content=launch.body, headers=headers, timeout=5)

    _poll(post, process, deadline, log_path)


def _poll(request: Any, process: subprocess.Popen[bytes], deadline: float, log: Path) -> None:
    import httpx

    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}; see {_tail(log)}")
        with contextlib.suppress(httpx.TransportError):
            if request().status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server not ready in {STARTUP_TIMEOUT_S} s; see {_tail(log)}")


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()[-30:]
    return f"{log}:\n" + "\n".join(lines)


# How a server is stopped: each step is taken only if some process of its group is left after
# the previous one. TorchServe's and MMS's launchers exit on SIGTERM without stopping their JVM;
# MLServer's uvicorn, after load, waits for background tasks until a SIGINT forces it.
STOP_STEPS = [
    ("SIGTERM to the server", signal.SIGTERM, False, 10.0),
    ("SIGTERM to its group", signal.SIGTERM, True, 10.0),
    ("SIGINT to its group", signal.SIGINT, True, 10.0),
    ("SIGKILL to its group", signal.SIGKILL, True, 5.0),
]


def _stop(process: subprocess.Popen[bytes]) -> str:
    """Stop the server and everything it started (STOP_STEPS); how it ended, for the log."""
    started = time.monotonic()
    taken = []
    for what, sig, whole_group, wait_s in STOP_STEPS:
        if not _group_alive(process.pid):
            break
        taken.append(what)
        if whole_group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            _wait_group(process.pid, wait_s)
        else:  # its group may outlive it: the next step sees to that
            process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(wait_s)
    code = process.wait()
    return f"{', '.join(taken)}: gone in {time.monotonic() - started:.1f} s (exit code {code})"


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (the leader reaped, others not zombies)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _wait_group(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


# ---------------------------------------------------------------------------- results


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from one or more runs: the median of each figure, the errors of all of them."""
    return {
        "runs": len(runs),
        "requests_per_s": median([run["requests_per_s"] for run in runs]),
        **{
            f"{p}_ms": median([run["latency_ms"][p] for run in runs]) for p in ("p50", "p90", "p99")
        },
        "errors": sum(run["error_count"] for run in runs),
    }


def _medians(runs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per concurrency, the medians of its runs."""
    by_concurrency: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        by_concurrency.setdefault(run["concurrency"], []).append(run)
    return {c: _summary(runs_at_c) for c, runs_at_c in by_concurrency.items()}


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    return [
        [result["server"], connections, *summary.values()]
        for connections, summary in result["medians"].items()
    ]


def _row_text(run: dict[str, Any]) -> str:
    latency = run["latency_ms"]
    figures = [run["requests_per_s"], latency["p50"], latency["p90"], latency["p99"]]
    row = [run["server"], run["concurrency"], run["run"] + 1, *figures, run["error_count"]]
    return markdown_table(HEADER, [row]).splitlines()[-1]


def _markdown(results: list[dict[str, Any]]) -> str:
    about = machine()
    lines = [
        f"Machine: {about['cpu']}, {about['usable_cores']} cores, Python {about['python']}, "
        f"{about['platform']}, commit {about['commit']}{' (dirty)' if about['dirty'] else ''}.",
        "",
        markdown_table(["server", "versions", "startup s", "stopped by"], _about_rows(results)),
        "",
        "Medians over the runs at each concurrency (`runs`); errors: non-2xx answers plus "
        "socket errors, summed over those runs.",
        "",
        markdown_table(HEADER, [row for result in results for row in _rows(result)]),
    ]
    lines += [
        f"\n{result['server']} FAILED: {result['error'].splitlines()[0]}"
        for result in results
        if "error" in result
    ]
    return "\n".join(lines)


def _about_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            result["server"],
            ", ".join(f"{name} {version}" for name, version in result["versions"].items()),
            result.get("startup_s", "-"),
            result.get("stopped", "-"),
        ]
        for result in results
    ]


if __name__ == "__main__":
    main()
