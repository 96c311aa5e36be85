"""On PYTHONPATH with GC_PROBE=DIR: each process writes DIR/gc-PID.json twice a second, the
collections of each generation so far and the seconds they took (many_names_hot.py --gc)."""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from typing import Any

FOLDER = os.environ.get("GC_PROBE", "")
WRITE_S = 0.5


def _probe(folder: str) -> None:
    totals = {generation: [0, 0.0] for generation in range(3)}
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        total = totals[info["generation"]]
        total[0] += 1
        total[1] += time.perf_counter() - started[0]

    def write() -> None:
        path = f"{folder}/gc-{os.getpid()}.json"
        while True:
            time.sleep(WRITE_S)
            with open(f"{path}.tmp", "w") as out:
                json.dump(totals, out)
            os.replace(f"{path}.tmp", path)

    gc.callbacks.append(timed)
    threading.Thread(target=write, daemon=True).start()


if FOLDER:
    _probe(FOLDER)
