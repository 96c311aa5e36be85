"""Samples a server's memory as the OS measures it, for tests that hold it to its budget."""

from __future__ import annotations

import threading

import psutil

from modelhost.records.memory import total_pss_bytes


class PssSampler(threading.Thread):
    """Samples the PSS of a process and all its descendants until stopped, `every_s` apart;
    keeps the peak. A sample reads each process's smaps_rollup (milliseconds of kernel time for a
    process with models loaded), so sampling often takes CPU from the server it measures."""

    def __init__(self, pid: int, every_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.every_s = every_s
        self.peak_bytes = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            pids = [self.root.pid, *(child.pid for child in self.root.children(recursive=True))]
            self.peak_bytes = max(self.peak_bytes, total_pss_bytes(pids))
            self.samples += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
