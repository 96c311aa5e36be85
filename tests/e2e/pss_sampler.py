"""Samples a server's memory as the OS measures it, for tests that hold it to its budget."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import psutil

from modelhost.records.memory import pss_bytes

STOP_WAIT_S = 1.0  # a process not stopped by then is read as it runs


class PssSampler(threading.Thread):
    """Samples the PSS of a process and all its descendants until stopped, `every_s` apart;
    keeps the peak.

    Each sample stops the whole tree (SIGSTOP) while it reads every process's smaps_rollup, then
    resumes it: read one after another as they run, a model leaving one worker and the next one
    arriving in another are both counted when they fall between the two reads (samples summed so
    were seen 5 MB above the same tree read stopped a moment later). A sample takes milliseconds
    of kernel time per process, and the server stands still meanwhile."""

    def __init__(self, pid: int, every_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.every_s = every_s
        self.peak_bytes = 0
        self.peak_at = 0.0  # wall time, to set beside the server's events
        self.peak_by_pid: dict[int, int] = {}
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            with contextlib.suppress(psutil.NoSuchProcess):
                pids = [self.root.pid, *(child.pid for child in self.root.children(recursive=True))]
                with stopped(pids):
                    by_pid = {pid: pss_bytes(pid) for pid in pids}
                if sum(by_pid.values()) > self.peak_bytes:
                    self.peak_bytes, self.peak_by_pid = sum(by_pid.values()), by_pid
                    self.peak_at = time.time()
                self.samples += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@contextlib.contextmanager
def stopped(pids: list[int]) -> Iterator[None]:
    """The processes stopped (SIGSTOP) for the block, then continued, whatever happens."""
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + STOP_WAIT_S
        while not all(map(_stopped, pids)) and time.monotonic() < deadline:
            time.sleep(0.0001)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _stopped(pid: int) -> bool:
    """Stopped, or gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b") ")[2][:1] in (b"T", b"t", b"Z", b"X")
    except OSError:  # gone before the open (FileNotFoundError) or during the read (ESRCH)
        return True
