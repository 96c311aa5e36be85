"""What a worker runs, in a file its pool reads once it has died (host/culprits.py)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import NamedTuple

from modelhost.names import MAX_NAME_BYTES

BATCH, LOAD = b"B", b"L"  # a slot's kind
HEAD_BYTES = 3  # kind and length, written after the name
SLOT_BYTES = HEAD_BYTES + MAX_NAME_BYTES


class Record(NamedTuple):
    batches: frozenset[str]  # their models
    loading: str = ""  # its model; "": none


def running_path(run_dir: Path, worker_id: int) -> Path:
    """The pool removes it when the worker is gone."""
    return run_dir / f"running-{worker_id}"


class Running:
    """A slot a running batch or load, in a shared mapping; no path: none."""

    def __init__(self, path: Path | None = None, slots: int = 0) -> None:
        self._free = list(range(slots)) if path else []  # pop, append: atomic
        if path is None:
            return
        size = slots * SLOT_BYTES
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def of(self, model: str, kind: bytes = BATCH) -> Slot:
        """`model` in a slot while the `with` block runs."""
        return Slot(self, self.begin(model, kind))

    def begin(self, model: str, kind: bytes = BATCH) -> int:
        """The slot `model` is written in; -1: none free."""
        if not self._free:
            return -1
        slot = self._free.pop()
        name, start = model.encode()[:MAX_NAME_BYTES], slot * SLOT_BYTES
        self._map[start + HEAD_BYTES : start + HEAD_BYTES + len(name)] = name
        self._map[start : start + HEAD_BYTES] = kind + len(name).to_bytes(2, "big")
        return slot

    def end(self, slot: int) -> None:
        if slot >= 0:
            start = slot * SLOT_BYTES
            self._map[start : start + HEAD_BYTES] = bytes(HEAD_BYTES)
            self._free.append(slot)


class Slot:
    __slots__ = ("running", "slot")

    def __init__(self, running: Running, slot: int) -> None:
        self.running, self.slot = running, slot

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *_: object) -> None:
        self.running.end(self.slot)


def read_running(path: Path) -> Record:
    """What a dead worker ran; nothing without a file."""
    try:
        data = path.read_bytes()
    except OSError:
        return Record(frozenset())
    batches, loading = set(), ""
    for start in range(0, len(data) - SLOT_BYTES + 1, SLOT_BYTES):
        kind, size = data[start : start + 1], int.from_bytes(data[start + 1 : start + 3], "big")
        if not 0 < size <= MAX_NAME_BYTES:
            continue
        name = data[start + HEAD_BYTES : start + HEAD_BYTES + size].decode(errors="replace")
        if kind == LOAD:
            loading = name
        elif kind == BATCH:
            batches.add(name)
    return Record(frozenset(batches), loading)
