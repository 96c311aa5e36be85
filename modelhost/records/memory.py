"""Memory as the operating system measures it: proportional set size (PSS), over processes."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
import sys
import threading
from collections.abc import Callable, Iterable

SMALL_OBJECT_BYTES = 64  # a typical block of Python's small-object allocator (all are <= 512)
YOUNG = 1  # a load's own garbage (decisions.md, "A load collects only young garbage")


def pss_bytes(pid: int | str = "self") -> int:
    """PSS of one process; 0 if the process has gone."""
    return _rollup_bytes(pid, (b"Pss:",))


def private_bytes(pid: int | str = "self") -> int:
    """What one process holds alone (USS); 0 if it has gone."""
    return _rollup_bytes(pid, (b"Private_Clean:", b"Private_Dirty:"))


def _rollup_bytes(pid: int | str, fields: tuple[bytes, ...]) -> int:
    """These fields of /proc/PID/smaps_rollup, summed."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            return sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith(fields))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0


def total_pss_bytes(pids: Iterable[int]) -> int:
    return sum(pss_bytes(pid) for pid in pids)


def server_pss_bytes(child_pids: Iterable[int]) -> int:
    """The whole server's PSS: this (frontend) process and the given children."""
    return total_pss_bytes([os.getpid(), *child_pids])


def return_memory_to_os() -> None:
    """Collect garbage, then give freed heap pages back."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Ask glibc to give freed heap pages back (a no-op elsewhere)."""
    trim = malloc_trim()
    if trim is not None:
        trim(0)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters, from glibc's malloc.h
TRIM_THRESHOLD_BYTES = 1 << 20
MMAP_THRESHOLD_BYTES = 32 << 20  # the ceiling of glibc's own sliding threshold


def return_heap_promptly() -> None:
    """Fix glibc's thresholds, so a freed large body's heap goes back at once or at a trim.

    Else glibc raises its trim threshold to twice the largest block freed from mmap, which each
    thread's arena top then keeps for good (docs/decisions.md, "Freed heap goes back").
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


class HeapTrimmer:
    """Trims the heap once the process has been quiet `quiet_s` after a large body.

    Trimming at once would miss the body itself, which its caller still holds, and those other
    threads free a moment later.
    """

    def __init__(self, quiet_s: float = 0.05) -> None:
        self.quiet_s = quiet_s
        self._due = threading.Event()
        threading.Thread(target=self._run, name="heap-trim", daemon=True).start()

    def due(self) -> None:
        self._due.set()

    def _run(self) -> None:
        while self._due.wait():
            self._due.clear()
            while self._due.wait(self.quiet_s):  # more large bodies: wait until they end
                self._due.clear()
            trim_heap()


def reset_peak_rss() -> None:
    """Start a new high-water mark of this process's resident set (Linux: VmHWM)."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def rss_and_peak_bytes() -> tuple[int, int]:
    """This process's resident set and its peak since `reset_peak_rss` (zeros without /proc)."""
    found = {}
    with contextlib.suppress(OSError), open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith((b"VmRSS:", b"VmHWM:")):
                found[line[:5]] = int(line.split()[1]) * 1024
    return found.get(b"VmRSS", 0), found.get(b"VmHWM", 0)


def settled_memory() -> int:
    """Bytes in live allocations after a young collection (a full one walks every model's
    objects), else the PSS once freed memory is returned; allocations ignore which holes a load
    fills."""
    gc.collect(YOUNG)
    allocated = allocated_bytes()
    if allocated is not None:
        return allocated
    trim_heap()
    return pss_bytes()


def allocated_bytes() -> int | None:
    """Bytes in live allocations (glibc's malloc and Python's small objects); None off glibc."""
    info = mallinfo2()
    if info is None:
        return None
    reading = info()
    malloced = int(reading.uordblks) + int(reading.hblkhd)
    return malloced + SMALL_OBJECT_BYTES * sys.getallocatedblocks()


class MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2, as mallinfo2() returns it."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def mallinfo2() -> Callable[[], MallInfo2] | None:
    """glibc's mallinfo2 (2.33 and later), or None."""
    function = getattr(ctypes.CDLL(None), "mallinfo2", None)
    if function is None:
        return None
    function.restype = MallInfo2
    function.argtypes = []
    return function  # type: ignore[no-any-return]


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim from this process's symbols (find_library would fork to run ldconfig)."""
    return getattr(ctypes.CDLL(None), "malloc_trim", None)
