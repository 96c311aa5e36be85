"""A worker's door for the fronts' `Infer` frames, on a Unix socket of its own (docs/decisions.md,
"Fronts"). A model opens to them once loaded and closes before its unload, which waits for them."""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from modelhost.errors import ModelNotLoaded
from modelhost.workers.gather import Done, Outcome
from modelhost.workers.messages import Failed, Failure, Infer, Reply, decode_request, encode
from modelhost.workers.wire import Frame, FrameReader
from modelhost.workers.wire import encode as encode_frame

BACKLOG = 64
Send = Callable[[Infer, bytes, Done, bool], None]
Answer = Callable[[Reply, bytes], None]


DIRECT_VARIABLE = "MODELHOST_WORKER_DIRECT"  # "1": the workers open their direct sockets


def direct_environment(fronts: int) -> dict[str, str]:
    """The variable that has the template's workers take the fronts' requests, if any."""
    return {DIRECT_VARIABLE: "1"} if fronts > 1 else {}


def direct_path(run_dir: Path, pid: int) -> str:
    """Where the worker of process `pid` takes the fronts' requests."""
    return str(run_dir / f"direct-{pid}.sock")


class Gate:
    """The models direct requests may reach, and those running on each."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._open: set[str] = set()
        self._running: collections.Counter[str] = collections.Counter()

    def open(self, model: str) -> None:
        with self._changed:
            self._open.add(model)

    def close(self, model: str) -> None:
        """Refuse new direct requests on `model`, and return once those running have ended."""
        with self._changed:
            self._open.discard(model)
            self._changed.wait_for(lambda: not self._running[model])
            del self._running[model]

    def enter(self, model: str) -> bool:
        """Count a direct request in: False where `model` is closed to them."""
        with self._changed:
            if model not in self._open:
                return False
            self._running[model] += 1
            return True

    def leave(self, model: str) -> None:
        with self._changed:
            self._running[model] -= 1
            if not self._running[model]:
                self._changed.notify_all()


class Door:
    """The listening socket, and a reader thread a front's connection, which hands each batch
    on and reads the next."""

    def __init__(self, path: str, gate: Gate, send: Send) -> None:
        self.gate, self.send = gate, send
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead worker's of the same pid
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(BACKLOG)

    def start(self) -> None:
        threading.Thread(target=self._accept, name="direct-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), name="direct", daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        frames, send_lock = FrameReader(conn), threading.Lock()

        def answer(request_id: int, reply: Reply, payload: bytes) -> None:
            data = encode_frame(Frame(request_id, encode(reply), payload))
            with send_lock, contextlib.suppress(OSError):  # gone: the front relays its requests
                conn.sendall(data)

        with conn:
            while True:
                try:
                    frame = frames.read()
                except (EOFError, OSError):
                    return
                # alone in what the socket held, it runs here where a slot is free: no hand-off
                self.take(frame, functools.partial(answer, frame.request_id), not frames.pending())

    def take(self, frame: Frame, answer: Answer, here: bool = False) -> None:
        """Send on an `Infer` of a model open to direct requests; else answer a failure."""
        try:
            request = decode_request(frame.header)
        except Exception as error:  # not ours: answered as a failure, never run
            return answer(Failed(Failure.of(error)), b"")
        if not isinstance(request, Infer):
            return answer(Failed(Failure("ValueError", "a front may send Infer only")), b"")
        if not self.gate.enter(request.model):
            refusal = ModelNotLoaded(f"model {request.model} is not open to direct requests")
            return answer(Failed(Failure.of(refusal)), b"")

        def done(outcome: Outcome) -> None:
            self.gate.leave(request.model)
            if isinstance(outcome, BaseException):
                answer(Failed(Failure.of(outcome)), b"")
            else:
                answer(*outcome)

        try:
            self.send(request, frame.payload, done, here)
        except BaseException as error:  # noqa: BLE001 - every failure goes back as data
            done(error)
