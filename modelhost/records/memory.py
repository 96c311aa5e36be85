"""Memory as the operating system measures it: proportional set size (PSS), over processes."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
from collections.abc import Callable, Iterable


def pss_bytes(pid: int | str = "self") -> int:
    """PSS of one process from /proc/PID/smaps_rollup; 0 if the process has gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0
    return 0


def total_pss_bytes(pids: Iterable[int]) -> int:
    return sum(pss_bytes(pid) for pid in pids)


def server_pss_bytes(child_pids: Iterable[int]) -> int:
    """The whole server's PSS: this (frontend) process and the given children."""
    return total_pss_bytes([os.getpid(), *child_pids])


def return_memory_to_os() -> None:
    """Collect garbage, then ask glibc to give freed heap pages back (a no-op elsewhere)."""
    gc.collect()
    trim = malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim from the symbols already in this process. Not ctypes.util's
    find_library: it forks the whole worker to run ldconfig, on every unload."""
    return getattr(ctypes.CDLL(None), "malloc_trim", None)
