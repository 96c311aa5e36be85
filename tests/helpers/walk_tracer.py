"""`modelhost serve` under a profiler that notes a request's walk through the package.

Run as the server's command: `python walk_tracer.py serve ARGS`. Every call from one module of
modelhost into another is noted per asyncio task; once a task calls one of `$WALK_ENTRIES`
(`module/path.py:function`, comma-separated), its calls are written to `$WALK_OUT` as JSON
`[caller module, caller function, callee module, callee function]` rows, replaced at each new row.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import weakref
from types import FrameType
from typing import Any

Call = tuple[str, str, str, str]


def module_of(frame: FrameType) -> str | None:
    """The path of a frame's module inside the package, or None outside it."""
    path = frame.f_code.co_filename
    at = path.rfind("/modelhost/")
    return None if at < 0 else path[at + len("/modelhost/") :]


def caller_of(frame: FrameType) -> tuple[str, str] | None:
    """The nearest frame of the package below `frame`: its module and function."""
    back = frame.f_back
    while back is not None:
        module = module_of(back)
        if module is not None:
            return module, back.f_code.co_name
        back = back.f_back
    return None


class Tracer:
    """Calls between modules, per task; a task that entered an entry is written out."""

    def __init__(self, entries: set[str], out: str) -> None:
        self.entries = entries
        self.out = out
        self.calls: weakref.WeakKeyDictionary[asyncio.Task[Any], list[Call]] = (
            weakref.WeakKeyDictionary()
        )
        self.traced: asyncio.Task[Any] | None = None

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        module = module_of(frame) if event == "call" else None
        if module is None:
            return
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no loop running on this thread
            return
        if task is None:
            return
        if self.traced is None and f"{module}:{frame.f_code.co_name}" in self.entries:
            self.traced = task
        caller = caller_of(frame)
        if caller is None or caller[0] == module:
            return
        calls = self.calls.setdefault(task, [])
        call = (*caller, module, frame.f_code.co_name)
        if call not in calls:
            calls.append(call)
            if task is self.traced:
                self.write(calls)

    def write(self, calls: list[Call]) -> None:
        """Whole or not at all: the test may read while the request's last calls are noted."""
        partial = f"{self.out}.partial"
        with open(partial, "w") as out:
            json.dump(calls, out)
        os.replace(partial, self.out)


def main() -> None:
    entries = set(os.environ["WALK_ENTRIES"].split(","))
    sys.setprofile(Tracer(entries, os.environ["WALK_OUT"]))
    from modelhost.cli.main import main as modelhost

    sys.argv = ["modelhost", *sys.argv[1:]]
    modelhost()


if __name__ == "__main__":
    main()
