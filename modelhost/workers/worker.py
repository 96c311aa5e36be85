"""The worker process: hosts many loaded models and answers framed requests from the frontend.

The main thread only reads frames. Loads and unloads run on one loader thread and inference on
its own threads, so loading a model never stalls inference of the models already loaded.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelhost.errors import ModelNotLoaded
from modelhost.observe.memory import pss_bytes, return_memory_to_os
from modelhost.workers.handlers.base import Handler, InferReply, InferRequest
from modelhost.workers.wire import Frame, FrameReader, encode

if TYPE_CHECKING:
    from modelhost.workers.handlers.select import LoadSpec


class Worker:
    def __init__(self, sock: socket.socket, worker_id: int, threads: int) -> None:
        self.sock = sock
        self.worker_id = worker_id
        self.threads = threads
        self.models: dict[str, Handler] = {}
        self._send_lock = threading.Lock()
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="loader")
        # one inference thread: run on the reading thread and save a hand-off per request
        self._inference = ThreadPoolExecutor(threads, "infer") if threads > 1 else None

    def main_loop(self) -> None:
        self.send(
            {"op": "hello", "worker_id": self.worker_id, "pid": os.getpid(), "pss": pss_bytes()}
        )
        routes = {
            "infer": (self._inference, self.infer),
            "load": (self._loader, self.load),
            "unload": (self._loader, self.unload),
        }
        frames = FrameReader(self.sock)
        while True:
            try:
                frame = frames.read()
            except (EOFError, ConnectionError, OSError):
                return  # the frontend has gone: so do we
            executor, method = routes[frame.header["op"]]
            if executor is None:
                self._answer(method, frame)
            else:
                executor.submit(self._answer, method, frame)

    def _answer(self, method: Any, frame: Frame) -> None:
        request_id = frame.header["id"]
        try:
            header, payload = method(frame)
        except BaseException as error:  # every failure goes back as data, never as a pickle
            header, payload = (
                {"ok": False, "type": type(error).__name__, "message": str(error)},
                b"",
            )
        else:
            header["ok"] = True
        header["id"] = request_id
        self.send(header, payload)

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        data = encode(Frame(header, payload))
        with self._send_lock:
            self.sock.sendall(data)

    def load(self, frame: Frame) -> tuple[dict[str, Any], bytes]:
        """Load (then warm up) a model; the manifest's handler, model file and warm-up samples
        come in the frame, paths relative to its `root`."""
        from modelhost.workers.handlers import load_handler
        from modelhost.workers.warmup import warm_up

        header, name = frame.header, frame.header["model"]
        artifact = Path(header["path"])
        root = Path(header.get("root") or artifact)
        before, started = pss_bytes(), time.perf_counter()
        handler = load_handler(artifact, name, self._load_spec(header, root))
        warm_up(handler, name, root, header.get("warmup", ()))
        self.models[name] = handler
        load_ms = (time.perf_counter() - started) * 1000
        after = pss_bytes()
        footprint = max(0, after - before)
        return {
            "footprint": footprint,
            "load_ms": load_ms,
            "pss": after,
            "batches": handler.batches,
        }, b""

    def _load_spec(self, header: dict[str, Any], root: Path) -> LoadSpec:
        from modelhost.workers.handlers.select import LoadSpec

        return LoadSpec(header.get("handler"), header.get("model_file"), root, self.threads)

    def unload(self, frame: Frame) -> tuple[dict[str, Any], bytes]:
        name = frame.header["model"]
        before = pss_bytes()
        handler = self.models.pop(name, None)
        if handler is None:
            raise ModelNotLoaded(f"model {name} is not loaded in worker {self.worker_id}")
        handler.close()
        del handler
        return_memory_to_os()
        after = pss_bytes()
        return {"freed": max(0, before - after), "pss": after}, b""

    def infer(self, frame: Frame) -> tuple[dict[str, Any], bytes]:
        """Answer a batch: one request per item, their bodies back to back in the payload."""
        header = frame.header
        handler = self.models.get(header["model"])
        if handler is None:
            raise ModelNotLoaded(
                f"model {header['model']} is not loaded in worker {self.worker_id}"
            )
        requests = list(split_requests(header["items"], frame.payload))
        started = time.perf_counter()
        replies = handler.infer_batch(requests)
        infer_ms = (time.perf_counter() - started) * 1000
        items, bodies = answer_items(replies)
        return {"items": items, "infer_ms": infer_ms}, b"".join(bodies)


def split_requests(items: list[dict[str, Any]], payload: bytes) -> Iterator[InferRequest]:
    view, offset = memoryview(payload), 0
    for item in items:
        end = offset + item["size"]
        body = bytes(view[offset:end])
        offset = end
        yield InferRequest(body, item["content_type"], item["accept"], item["params"])


def answer_items(replies: list[InferReply | Exception]) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Per-request records (errors as data, never pickles) and the reply bodies in order."""
    items: list[dict[str, Any]] = []
    bodies: list[bytes] = []
    for reply in replies:
        if isinstance(reply, InferReply):
            items.append({"ok": True, "content_type": reply.content_type, "size": len(reply.body)})
            bodies.append(reply.body)
        else:
            items.append({"ok": False, "type": type(reply).__name__, "message": str(reply)})
    return items, bodies


def run(socket_path: str, worker_id: int, threads: int) -> None:
    """Entry point of a freshly forked worker."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    Worker(sock, worker_id, threads).main_loop()
