"""Records a server writes to a JSON-lines log on a thread of its own, in batches."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelhost import testing

Record = dict[str, Any]


def logged(
    path: Path, n: int, keep: Callable[[Record], bool] = lambda record: True, timeout_s: float = 30
) -> list[Record]:
    """The log's records `keep` holds for, once there are `n` (they trail the answers, in the
    order of the requests)."""
    deadline = time.monotonic() + timeout_s
    while len(kept := [record for record in testing.json_lines(path) if keep(record)]) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} holds {len(kept)} such records, not {n}: {kept[-3:]}")
        time.sleep(0.05)
    return kept
