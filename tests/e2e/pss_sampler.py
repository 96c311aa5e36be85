"""Samples a server's memory as the OS measures it, for tests that hold it to its budget."""

from __future__ import annotations

import threading

import psutil

from modelhost.records.memory import total_pss_bytes


class PssSampler(threading.Thread):
    """Samples the PSS of a process and all its descendants until stopped; keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak_bytes = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.01):
            pids = [self.root.pid, *(child.pid for child in self.root.children(recursive=True))]
            self.peak_bytes = max(self.peak_bytes, total_pss_bytes(pids))
            self.samples += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
