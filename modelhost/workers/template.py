"""The template process: imports the runtimes once, then forks a worker per request.

Started by the frontend as
``python -m modelhost.workers.template SOCKET THREADS RUNTIMES [refuse-pickle]`` (RUNTIMES: the
optional runtimes to import too, comma-separated; `refuse-pickle`: workers/no_pickle.py). It
reads one worker id per line on stdin and forks a worker that connects back to SOCKET. Forking a
process that has already imported numpy and scikit-learn makes a worker ready in milliseconds,
and the library pages stay shared between workers (counted once in PSS). It exits when stdin
closes.

The template and its workers ignore SIGTERM and SIGINT: a signal sent to the whole process group
(systemd, ``docker stop`` through an init) must not stop them before the frontend has drained
its requests; the frontend stops them after the drain by closing their connections.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from pathlib import Path

from modelhost.config import THREAD_VARIABLES


def limit_threads(threads: int) -> None:
    """Set the runtimes' thread counts the user has not set; must run before they are imported."""
    for variable in THREAD_VARIABLES:
        if not os.environ.get(variable):
            os.environ[variable] = str(threads)


def import_runtimes(optional: list[str]) -> None:
    from modelhost.workers.handlers import RUNTIME_MODULES

    for module in RUNTIME_MODULES:
        importlib.import_module(module)
    for module in optional:
        # absent or broken: the handler that needs it says so, naming the extra, at load time
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    import modelhost.workers.worker  # noqa: F401  (shared by every worker)


def write_rehearsal_models(folder: Path) -> list[Path]:
    """Two tiny scikit-learn models, written once by the template: each new worker loads,
    answers and unloads them through its serving path before it says hello, so the template's
    pages that serving writes to (reference counts, caches) are copied then, and the threads'
    malloc arenas made, while the idle baseline is still being measured (else they move into it
    while the first models load, and the budget's room shrinks under them)."""
    import joblib
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    x, y = np.arange(40.0).reshape(10, 4), np.arange(10) % 2
    models = [RandomForestClassifier(n_estimators=2, random_state=0), LogisticRegression()]
    paths = [folder / f"rehearsal-{i}.joblib" for i in range(len(models))]
    for model, path in zip(models, paths, strict=True):
        joblib.dump(model.fit(x, y), path)
    return paths


def fork_worker(
    socket_path: str, worker_id: int, threads: int, rehearsal: list[Path], refuse_pickle: bool
) -> None:
    if os.fork() != 0:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the frontend decides when workers stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = 0
    try:
        sys.stdin.close()
        from modelhost.workers.worker import run

        run(socket_path, worker_id, threads, rehearsal, refuse_pickle)
    except BaseException:  # noqa: BLE001  (a worker must never return into the template's loop)
        code = 1
    finally:
        os._exit(code)


def main_loop(socket_path: str, threads: int, rehearsal: list[Path], refuse_pickle: bool) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps exited workers
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for line in sys.stdin:
        if line.strip():
            fork_worker(socket_path, int(line), threads, rehearsal, refuse_pickle)


def main() -> None:
    socket_path, threads = sys.argv[1], int(sys.argv[2])
    optional = [name for name in (sys.argv[3] if len(sys.argv) > 3 else "").split(",") if name]
    refuse_pickle = sys.argv[4:5] == ["refuse-pickle"]
    limit_threads(threads)
    import_runtimes(optional)
    rehearsal = write_rehearsal_models(Path(socket_path).parent)
    gc.collect()
    gc.freeze()  # keep the collector from touching, and so copying, the template's objects
    print("ready", flush=True)
    main_loop(socket_path, threads, rehearsal, refuse_pickle)


if __name__ == "__main__":
    main()
