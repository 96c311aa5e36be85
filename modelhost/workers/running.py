"""What a worker runs, for its pool to read once it has died (host/culprits.py)."""

from __future__ import annotations

import faulthandler
import mmap
import os
import posix
import re
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, NamedTuple, NoReturn

from modelhost.names import MAX_NAME_BYTES

BATCH, LOAD = b"B", b"L"  # a slot's kind
HEAD_BYTES = 11  # kind, thread, length: written after the name
SLOT_BYTES = HEAD_BYTES + MAX_NAME_BYTES
DUMP_BYTES = 4096
CRASHED = re.compile(rb"^Current thread 0x([0-9a-f]+)", re.MULTILINE)


class Record(NamedTuple):
    batches: frozenset[str]  # their models
    loading: str = ""  # its model; "": none
    crashed: tuple[bytes, str] | None = None  # the slot a signal, exit or hang names
    dump: str = ""  # faulthandler's
    aboard: bool = False  # every model it held is a suspect: it died of them all


def paths(run_dir: Path, worker_id: int) -> tuple[Path, Path]:
    """Its slots and its dump; the pool removes them when the worker is gone."""
    return run_dir / f"running-{worker_id}", run_dir / f"fault-{worker_id}"


class Running:
    """A slot a running batch or load, in a shared mapping; no folder: none."""

    def __init__(self, run_dir: Path | None = None, worker_id: int = 0, slots: int = 0) -> None:
        self._free = list(range(slots)) if run_dir else []  # pop, append: atomic
        if run_dir is None:
            return
        size = slots * SLOT_BYTES
        fd = os.open(paths(run_dir, worker_id)[0], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
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
        thread = threading.get_ident().to_bytes(8, "big")
        self._map[start + HEAD_BYTES : start + HEAD_BYTES + len(name)] = name
        self._map[start : start + HEAD_BYTES] = kind + thread + len(name).to_bytes(2, "big")
        return slot

    def end(self, slot: int) -> None:
        if slot >= 0:
            start = slot * SLOT_BYTES
            self._map[start : start + HEAD_BYTES] = bytes(HEAD_BYTES)
            self._free.append(slot)


def dump_faults(run_dir: Path, worker_id: int) -> None:
    """faulthandler's dump on a fatal signal, and os._exit's: the thread hit first."""
    global _dump  # written till the end
    _dump = open(paths(run_dir, worker_id)[1], "w")  # noqa: SIM115
    faulthandler.enable(_dump, all_threads=True)
    os._exit = posix._exit = _exit_naming_its_thread


def _exit_naming_its_thread(status: int) -> NoReturn:
    """os._exit, first naming the calling thread as faulthandler does, with its stack."""
    if _dump is not None:
        _dump.write(f"Current thread 0x{threading.get_ident():016x} called os._exit({status}):\n")
        traceback.print_stack(sys._getframe(1), file=_dump)
        _dump.flush()
    _exit(status)


_dump: IO[str] | None = None
_exit = os._exit


class Slot:
    __slots__ = ("running", "slot")

    def __init__(self, running: Running, slot: int) -> None:
        self.running, self.slot = running, slot

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *_: object) -> None:
        self.running.end(self.slot)


def read_running(run_dir: Path, worker_id: int) -> Record:
    """What a dead worker ran; nothing without its files."""
    running, fault = paths(run_dir, worker_id)
    try:
        data = running.read_bytes()
    except OSError:
        return Record(frozenset())
    dump = fault.read_bytes()[:DUMP_BYTES] if fault.exists() else b""
    hit = CRASHED.search(dump)
    crashed_thread = int(hit.group(1), 16) if hit else None
    batches, loading, crashed = set(), "", None
    for start in range(0, len(data) - SLOT_BYTES + 1, SLOT_BYTES):
        kind, size = data[start : start + 1], int.from_bytes(data[start + 9 : start + 11], "big")
        if not 0 < size <= MAX_NAME_BYTES:
            continue
        name = data[start + HEAD_BYTES : start + HEAD_BYTES + size].decode(errors="replace")
        if kind == LOAD:
            loading = name
        elif kind == BATCH:
            batches.add(name)
        if int.from_bytes(data[start + 1 : start + 9], "big") == crashed_thread:
            crashed = kind, name
    return Record(frozenset(batches), loading, crashed, dump.decode(errors="replace"))


def forget(run_dir: Path, worker_id: int) -> None:
    for path in paths(run_dir, worker_id):
        path.unlink(missing_ok=True)
