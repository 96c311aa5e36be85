"""Runs `python -m MODULE ARGS` counting the bytecodes each function runs, while CONTROL/on exists.

frontend_instructions.py's `--bytecodes` starts the server under it. Creating CONTROL/mark asks
for the counts since the last mark: they are written to CONTROL/counts-N.json (N = 1, 2, ...),
the counts start again, and the mark is removed. Every thread is traced: a call while counting is
off costs one test. A coroutine resumed counts as a call, as CPython reports it.

    python benchmarks/count_bytecodes.py CONTROL modelhost serve ...
"""

from __future__ import annotations

import collections
import json
import os
import runpy
import sys
import threading
import time
from types import CodeType, FrameType
from typing import Any

POLL_S = 0.1
PACKAGE = f"{os.sep}modelhost{os.sep}"


class Counts:
    def __init__(self, control: str) -> None:
        self.control = control
        self.on = False
        self.bytecodes: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.names: dict[CodeType, str] = {}

    def name(self, code: CodeType) -> str:
        name = self.names.get(code)
        if name is None:
            name = self.names[code] = _name(code)
        return name

    def called(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.on:
            return None
        self.calls[self.name(frame.f_code)] += 1
        frame.f_trace_opcodes = True
        return self.ran

    def ran(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.bytecodes[self.name(frame.f_code)] += 1
        return self.ran

    def watch(self) -> None:
        """Follow the control folder: count while `on` is there, write the counts at each mark."""
        marks = 0
        while True:
            time.sleep(POLL_S)
            self.on = os.path.exists(f"{self.control}/on")
            if os.path.exists(f"{self.control}/mark"):
                marks += 1
                counted = {"bytecodes": self.bytecodes, "calls": self.calls}
                self.bytecodes, self.calls = collections.Counter(), collections.Counter()
                with open(f"{self.control}/counts-{marks}.json", "w") as out:
                    json.dump(counted, out)
                os.remove(f"{self.control}/mark")


def _name(code: CodeType) -> str:
    """The function's file (from its folder on sys.path, or its package), first line and name."""
    path = code.co_filename
    roots = [root for root in sys.path if root and path.startswith(root + os.sep)]
    if roots:
        path = path[len(max(roots, key=len)) + 1 :]
    elif PACKAGE in path:  # an editable install's, found by an import hook
        path = path[path.rindex(PACKAGE) + 1 :]
    return f"{path}:{code.co_firstlineno}:{code.co_name}"


def main() -> None:
    control, module, *args = sys.argv[1:]
    counts = Counts(control)
    threading.Thread(target=counts.watch, daemon=True).start()
    sys.settrace(counts.called)
    threading.settrace(counts.called)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
