"""Fronts' cost: CPU a request of the main process, a front and the worker, and their batches.

modelhost serves iris with `--fronts 2 --workers 1` by default (`--serve-arg` adds to it), pinned
to --server-core, and wrk loads it from --wrk-core. A `sitecustomize` put on the server's
PYTHONPATH counts, in the worker, the requests and batches it serves by sender (`direct`: the
front's socket; `pipe`: the main process's). Reading those counts and each process's CPU time at
two instants inside a wrk run divides each process's CPU by the requests it answered itself:
the front's by its hits, the main process's by the rest, the worker's by all.

`--alone` loads a front of its own instead, started beside the server on another port with a
table naming the worker's direct socket: every request is then a hit of that front, whatever
the kernel's spread of connections over the port's listeners.

`--miss-first` makes each wrk connection's first request a `GET /ping`, which a front relays
to the main process as it does a miss; the rest are hits. `--ping-every N` makes every Nth
request one. `--relayed` loads a front of its own
whose upstream is the server's, with `GET /ping` only: every request is relayed, and its cost
shows in "front µs/req". "main µs/req" and "front µs/req" divide by every request wrk made.

`--pythonpath LABEL=DIR` (repeatable) runs the server with DIR first on its PYTHONPATH, so two
checkouts are compared in alternated runs: `--pairs N` runs the labels in turn N times.

    python benchmarks/front_costs.py --pythonpath base=/tmp/base --pythonpath new=$PWD --pairs 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import BENCHMARKS, add_wrk_run_args, cpu_seconds, markdown_table, process_tree
from hot_path import MODEL, ensure_wrk, parse_wrk, wrk

from modelhost import testing
from modelhost.fronts.messages import Table, pack

HEADER = ["run", "req/s", "main µs/own", "front µs/hit", "worker µs/req", "hits %"]
HEADER += ["main µs/req", "front µs/req", "batch direct", "batch pipe", "errors"]
BATCH_SIZE = 32  # the server's default for built-in handlers

# imported by every process of the server (PYTHON* reaches the workers): the worker counts
# its batches by sender
SITECUSTOMIZE = """
import json, os, threading, time
from collections import Counter

def _count_batches():
    from modelhost.workers import worker
    counts, dumping = Counter(), [0]
    infer = worker.Worker.infer

    def counted(self, request, payload):
        sender = "direct" if threading.current_thread().name == "direct" else "pipe"
        counts[sender, len(request.items)] += 1
        if dumping[0] != os.getpid():  # a forked worker: the template's thread is not here
            dumping[0] = os.getpid()
            threading.Thread(target=dump, daemon=True).start()
        return infer(self, request, payload)

    worker.Worker.infer = counted

    def dump():
        path = os.path.join(OUT, "modelhost-batches-%d.json" % os.getpid())
        while True:
            time.sleep(0.02)
            if counts:
                rows = [[s, n, c] for (s, n), c in list(counts.items())]
                with open(path + ".new", "w") as f:
                    json.dump(rows, f)
                os.replace(path + ".new", path)

OUT = os.environ.get("PYTHON_FRONT_COSTS_OUT")
if OUT:
    try:
        _count_batches()
    except ImportError:
        pass
"""

# each connection's first request (wrk makes them first, one a connection) asks the main process
MISS_FIRST = """
dofile("%s")
local firsts, every = tonumber(os.getenv("WRK_FIRSTS")), tonumber(os.getenv("WRK_EVERY"))
local made = 0
local hit, miss
function request()
   if not hit then
      hit, miss = wrk.format(), wrk.format("GET", "/ping", nil, "")
   end
   made = made + 1
   return (made <= firsts or (every > 0 and made %% every == 0)) and miss or hit
end
""" % (BENCHMARKS / "post.lua")


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    labels = [entry.split("=", 1) for entry in args.pythonpath] or [["this", ""]]
    rows = []
    with tempfile.TemporaryDirectory(prefix="modelhost-fronts-") as scratch:
        root = Path(scratch)
        store = root / "store"
        testing.iris_logreg(store / MODEL)
        (root / "site").mkdir()
        (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        args.script = root / "miss_first.lua"
        args.script.write_text(MISS_FIRST)
        for turn in range(args.pairs):
            for label, folder in labels:
                result = _run(root, store, folder, f"{label}-{turn}", args)
                rows.append([label, *_cells(result)])
                print(markdown_table(HEADER, rows[-1:]).splitlines()[-1], flush=True)
    print(markdown_table(HEADER, rows))


def _run(root: Path, store: Path, folder: str, name: str, args: argparse.Namespace) -> Any:
    out = root / name
    out.mkdir()
    path = [p for p in (folder, str(root / "site"), os.environ.get("PYTHONPATH", "")) if p]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON_FRONT_COSTS_OUT": str(out)}
    env["PYTHONPATH"] = os.pathsep.join(path)
    serve = ["--model-store", str(store), "--workers", "1", "--cache-dir", str(out / "cache")]
    serve += ["--fronts", str(args.fronts), *args.serve_arg]
    pin = ["taskset", "-c", args.server_core]
    with contextlib.ExitStack() as stack:
        running = stack.enter_context(
            testing.RunningServer(serve, out, prefix=pin, env=env, cwd=out)
        )
        url = f"{running.url}/models/{MODEL}/invoke"
        wrk(url, args.concurrency, args.warmup, args.wrk_core)
        roles = _roles(running.pid)
        if args.alone or args.relayed:
            front, port = stack.enter_context(_front_alone(running.pid, pin, env, out, args))
            roles["front"] = front
            path = "/ping" if args.relayed else f"/models/{MODEL}/invoke"
            url = f"http://127.0.0.1:{port}{path}"
            _load(url, args, args.warmup)
        loaded: dict[str, Any] = {}
        load = threading.Thread(target=lambda: loaded.update(_load(url, args, args.duration)))
        load.start()
        time.sleep(1.0)
        first = _reading(roles, out)
        time.sleep(args.duration - 2.0)
        last = _reading(roles, out)
        load.join()
    return {"wrk": loaded, "first": first, "last": last}


def _load(url: str, args: argparse.Namespace, duration_s: int) -> dict[str, Any]:
    """One wrk run: post.lua's, GETs only (`--relayed`), or a relayed request first."""
    script, env = BENCHMARKS / "post.lua", dict(os.environ)
    if args.relayed:
        env["WRK_METHOD"] = "GET"
    elif args.miss_first or args.ping_every:
        script = args.script
        firsts = args.concurrency + 1 if args.miss_first else 0  # wrk makes one to check it
        env["WRK_FIRSTS"], env["WRK_EVERY"] = str(firsts), str(args.ping_every)
    command = ["taskset", "-c", args.wrk_core, "wrk", "-t1", f"-c{args.concurrency}"]
    command += [f"-d{duration_s}s", "--latency", "-s", str(script), url]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return {**parse_wrk(done.stdout), "wrk_output": done.stdout}


@contextlib.contextmanager
def _front_alone(
    pid: int, pin: list[str], env: dict[str, str], out: Path, args: argparse.Namespace
) -> Iterator[tuple[int, int]]:
    """A front of the benchmark's own on a port of its own, its table naming the server's worker
    (and its upstream the server's, with `--relayed`): its pid and port."""
    door = next(Path(tempfile.gettempdir()).glob(f"modelhost-{pid}-*/direct-*.sock"))
    upstream = door.parent / "fronts.sock" if args.relayed else out / "no-upstream.sock"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*pin, sys.executable, "-m", "modelhost.fronts", "9", "127.0.0.1", str(port)]
    command.append(str(upstream))  # none: every request is a hit
    front = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=out
    )
    assert front.stdin is not None and front.stdout is not None
    table = Table({MODEL: [str(door)]}, {MODEL: BATCH_SIZE}, max_request_bytes=1 << 20)
    front.stdin.write(pack(table))
    front.stdin.flush()
    front.stdout.readline()  # listening
    try:
        yield front.pid, port
    finally:
        front.terminate()
        front.wait(10)


def _roles(pid: int) -> dict[str, int]:
    """main, front (the first), worker (the one that counts batches) by pid."""
    roles = {"main": pid}
    for child in process_tree(pid)[1:]:
        command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        if b"modelhost.fronts" in command:
            roles.setdefault("front", child)
    roles["worker"] = 0  # found by its counts file
    return roles


def _reading(roles: dict[str, int], out: Path) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for path in out.glob("modelhost-batches-*.json"):  # the template's rehearsal counts too
        rows = json.loads(path.read_text())
        if sum(row[2] for row in rows) > sum(row[2] for row in counts.get("rows", [])):
            counts = {"pid": int(path.stem.rsplit("-", 1)[1]), "rows": rows}
    pids = [pid for pid in roles.values() if pid] + ([counts["pid"]] if counts else [])
    return {"cpu": cpu_seconds(pids), "roles": roles, "counts": counts, "at": time.monotonic()}


def _tally(reading: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Sender → (requests, batches) the worker served."""
    tally: dict[str, tuple[int, int]] = {"direct": (0, 0), "pipe": (0, 0)}
    for sender, size, batches in reading["counts"].get("rows", []):
        requests, count = tally[sender]
        tally[sender] = (requests + size * batches, count + batches)
    return tally


def _cells(result: dict[str, Any]) -> list[str]:
    first, last = result["first"], result["last"]
    before, after = _tally(first), _tally(last)
    done = {s: tuple(a - b for a, b in zip(after[s], before[s], strict=True)) for s in after}
    hits, own = done["direct"][0], done["pipe"][0]
    roles = dict(first["roles"], worker=last["counts"]["pid"])
    spent = {r: last["cpu"].get(p, 0) - first["cpu"].get(p, 0) for r, p in roles.items() if p}

    def per(cpu: float, requests: int) -> str:
        return f"{cpu / requests * 1e6:.0f}" if requests else "-"

    def batch(sender: str) -> str:
        requests, batches = done[sender]
        return f"{requests / batches:.2f}" if batches else "-"

    rate = result["wrk"]["requests_per_s"]
    made = round(rate * (last["at"] - first["at"]))
    return [
        f"{rate:,.0f}",
        per(spent["main"], own),
        per(spent.get("front", 0.0), hits),
        per(spent["worker"], hits + own),
        f"{100 * hits / max(1, hits + own):.0f}",
        per(spent["main"], made),
        per(spent.get("front", 0.0), made),
        batch("direct"),
        batch("pipe"),
        str(result["wrk"]["error_count"]),
    ]


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pythonpath", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--pairs", type=int, default=1, help="turns of the labels, alternated")
    parser.add_argument("--fronts", type=int, default=2)
    parser.add_argument("--alone", action="store_true", help="load a front of its own")
    parser.add_argument("--relayed", action="store_true", help="GET /ping through a front's relay")
    parser.add_argument("--miss-first", action="store_true", help="a relayed request first")
    parser.add_argument("--ping-every", type=int, default=0, help="every Nth request relayed")
    parser.add_argument("--concurrency", type=int, default=16)
    add_wrk_run_args(parser, duration_s=8, warmup_s=2)
    return parser.parse_args()


if __name__ == "__main__":
    main()
