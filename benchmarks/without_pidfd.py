"""Runs `python -m MODULE ARGS` where the kernel's pidfd calls may be missing: under valgrind.

Valgrind 3.19 does not know `pidfd_open` (syscall 434) and answers ENOSYS, which the pool takes
for a worker gone before its hello. Here a pidfd the kernel will not give is a `/proc/PID`
folder's descriptor, which `pidfd_send_signal` takes as well, and a signal it will not send
goes by pid. frontend_instructions.py starts the frontend under callgrind through this.

    python benchmarks/without_pidfd.py modelhost serve ...
"""

from __future__ import annotations

import errno
import os
import runpy
import signal
import sys
from typing import Any

_pids: dict[int, int] = {}  # of each /proc descriptor given in a pidfd's place


def pidfd_open(pid: int, flags: int = 0) -> int:
    try:
        return _pidfd_open(pid, flags)
    except OSError as error:
        if error.errno != errno.ENOSYS:
            raise
    try:
        fd = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise ProcessLookupError(errno.ESRCH, f"no process {pid}") from None
    _pids[fd] = pid
    return fd


def pidfd_send_signal(fd: int, sig: int, *args: Any) -> None:
    try:
        return _send_signal(fd, sig, *args)
    except OSError as error:
        if error.errno != errno.ENOSYS or fd not in _pids:
            raise
    os.kill(_pids[fd], sig)


_pidfd_open, _send_signal = os.pidfd_open, signal.pidfd_send_signal


def main() -> None:
    os.pidfd_open, signal.pidfd_send_signal = pidfd_open, pidfd_send_signal  # type: ignore[assignment]
    module, *args = sys.argv[1:]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
