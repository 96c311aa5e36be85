"""The template process: imports the runtimes once, then forks a worker per id on stdin.

``python -m modelhost.workers.template SOCKET THREADS RUNTIMES [refuse-pickle]``. Forking after
the imports makes workers start fast and share the library pages. SIGTERM and SIGINT are
ignored so a signal to the process group cannot stop workers before the frontend drains.
With refuse-pickle, each worker sandboxes itself (workers/sandbox.py).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import signal
import sys
from pathlib import Path

from modelhost.config import THREAD_VARIABLES
from modelhost.records.memory import return_heap_promptly
from modelhost.resources import usable_cores
from modelhost.workers.sandbox import Untrusted, support
from modelhost.workers.settings import WorkerSettings
from modelhost.workers.views import VARIABLE as VIEWS_VARIABLE


def limit_threads(threads: int) -> None:
    """Set the runtimes' thread counts the user has not, within the cores; before imports."""
    for variable in THREAD_VARIABLES:
        if not os.environ.get(variable):
            os.environ[variable] = str(min(threads, usable_cores()))


def import_runtimes(preload: list[str]) -> None:
    from modelhost.workers.handlers.preload import CORE_MODULES, PRELOAD_MODULES

    for module in CORE_MODULES:
        importlib.import_module(module)
    for runtime in preload:
        # the handler that needs it names the missing extra at load time
        with contextlib.suppress(Exception):
            for module in PRELOAD_MODULES[runtime]:
                importlib.import_module(module)
    import modelhost.workers.worker  # noqa: F401  (shared by every worker)


def write_rehearsal_models(folder: Path) -> list[Path]:
    """Two tiny scikit-learn models each new worker serves before it says hello, if preloaded.

    Serving copies the template's pages and makes the malloc arenas while the idle baseline is
    measured, not while the first models load.
    """
    if "sklearn" not in sys.modules:  # a worker must not import it for the rehearsal
        return []
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
    socket_path: str,
    worker_id: int,
    threads: int,
    rehearsal: list[Path],
    untrusted: Untrusted | None,
    *,
    settings: WorkerSettings,
) -> None:
    if os.fork() != 0:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the frontend stops workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = 0
    try:
        sys.stdin.close()
        # the template's stdout is a pipe read once, for its "ready": a print would fill it
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(line_buffering=True)  # a print is seen when made
        from modelhost.workers.worker import run

        run(socket_path, worker_id, threads, rehearsal, untrusted, settings=settings)
    except BaseException:  # noqa: BLE001  (never return into the template's loop)
        code = 1
    finally:
        os._exit(code)


def main_loop(
    socket_path: str,
    threads: int,
    rehearsal: list[Path],
    untrusted: Untrusted | None,
    settings: WorkerSettings,
) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps exited workers
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for line in sys.stdin:
        if line.strip():  # "ID", or "ID untrusted" for a worker that hosts untrusted models
            worker_id, _, kind = line.strip().partition(" ")
            sandbox = untrusted if kind == "untrusted" else None
            fork_worker(socket_path, int(worker_id), threads, rehearsal, sandbox, settings=settings)


def main() -> None:
    socket_path, threads = sys.argv[1], int(sys.argv[2])
    preload = [name for name in (sys.argv[3] if len(sys.argv) > 3 else "").split(",") if name]
    views = os.environ.pop(VIEWS_VARIABLE, "")  # the models' code need not see it
    settings = WorkerSettings.popped()
    untrusted = None
    if sys.argv[4:5] == ["untrusted"]:
        untrusted = Untrusted(support(), views)
    limit_threads(threads)
    return_heap_promptly()  # the workers forked from here inherit it
    import_runtimes(preload)
    rehearsal = write_rehearsal_models(Path(socket_path).parent)
    gc.collect()
    gc.freeze()  # the collector would touch, and so copy, the template's pages
    print("ready", flush=True)
    main_loop(socket_path, threads, rehearsal, untrusted, settings)


if __name__ == "__main__":
    main()
