"""The worker process: hosts many models and answers the frontend's framed requests.

The main thread reads frames; loads and unloads run on threads of their own (one at a time
between them) and inference on its own, so a load never stalls the loaded models. The loader
runs nicer, so a busy core serves a hit before a load's unpickling.
"""

from __future__ import annotations

import functools
import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from modelhost.errors import ModelNotLoaded
from modelhost.records.memory import (
    HeapTrimmer,
    allocated_bytes,
    mallinfo2,
    pss_bytes,
    reset_peak_rss,
    return_memory_to_os,
    rss_and_peak_bytes,
    settled_memory,
    trim_heap,
)
from modelhost.resources import nicer_thread, usable_cores
from modelhost.workers.answers import answers_of, forget_frames
from modelhost.workers.direct import Door, Gate, direct_path
from modelhost.workers.gather import Gathering
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.handlers.ts_metrics import drain_samples
from modelhost.workers.kept_memory import KeptMemory, raise_oom_score
from modelhost.workers.messages import (
    UNASKED,
    Answered,
    Failed,
    Failure,
    Hello,
    Infer,
    Item,
    Load,
    Loaded,
    Reply,
    Request,
    ToDevice,
    ToHost,
    Unload,
    Unloaded,
    decode_request,
    encode,
)
from modelhost.workers.output import captured, relay
from modelhost.workers.running import LOAD, Running, dump_faults
from modelhost.workers.wire import Frame, FrameReader
from modelhost.workers.wire import encode as encode_frame

if TYPE_CHECKING:
    from modelhost.workers.device_moves import DeviceMoves
    from modelhost.workers.handlers.select import LoadSpec
    from modelhost.workers.sandbox import Untrusted
    from modelhost.workers.settings import WorkerSettings


LOADER_NICENESS = 10  # decisions.md, "A worker's loader thread runs 10 nicer"
TRIM_AFTER_BYTES = 1 << 20  # a body this large gives its heap pages back (security.md)


class Worker:
    """The models one worker holds and the threads that serve them."""

    def __init__(
        self,
        sock: socket.socket,
        worker_id: int,
        threads: int,
        programs_refused: str = "",
        confined: bool = False,
        devices: DeviceMoves | None = None,
        max_answer_bytes: int = 0,
        running: Running | None = None,
        kept_memory: KeptMemory | None = None,
    ) -> None:
        from modelhost.workers.device_moves import DeviceMoves

        self.devices = devices or DeviceMoves({})
        self.sock = sock
        self.programs_refused = programs_refused  # why, where no sandbox confines them
        self.confined = confined  # sandboxed (sandbox.py)
        self.worker_id = worker_id
        self.threads = threads
        self.max_answer_bytes = max_answer_bytes  # max_response_size; 0: none
        self.running = running or Running()  # read by the pool if it dies
        self.kept_memory = kept_memory or KeptMemory(0)
        self.kept_memory.say = lambda grown: self.send(UNASKED, grown)  # then it is replaced
        self.models: dict[str, Handler] = {}
        self.footprints: dict[str, int] = {}  # bytes each model's load allocated
        self.batch_sizes: dict[str, int] = {}  # the most requests a batch, as its senders' queues
        self.idle_bytes = 0  # bytes allocated once rehearsed, before any model
        self._send_lock = threading.Lock()
        self._trimmer = HeapTrimmer()
        nicer = functools.partial(nicer_thread, LOADER_NICENESS)
        self._loader = ThreadPoolExecutor(1, "loader", initializer=nicer)
        # an eviction is on a miss's path: unloads keep the worker's priority
        self._unloader = ThreadPoolExecutor(1, "unloader")
        self._measuring = threading.Lock()  # one load or unload reads the allocations at a time
        # one inference thread: run on the reading thread, saving a hand-off
        self._inference = ThreadPoolExecutor(threads, "infer") if threads > 1 else None
        self.gate = Gate()  # the models the fronts' direct requests may reach (direct.py)
        # the fronts' and the frontend's batches share the slots; the fronts' run on threads
        # of their own, which the frontend's never wait behind
        fronts = ThreadPoolExecutor(threads, "fronts").submit
        self.gathering = Gathering(threads, self._batch_size, self.infer, fronts)

    def rehearse(self, models: list[Path]) -> None:
        """Load, answer and unload each model on the serving threads, then give the memory back."""
        body = b"[[0, 0, 0, 0]]"
        item = Item("application/json", "application/json", {}, len(body))
        infer = Infer("rehearsal", (item,))
        for path in models:
            self._loader.submit(self.load, Load(model="rehearsal", path=str(path))).result()
            if self._inference is None:
                self.infer(infer, body)
            else:
                self._inference.submit(self.infer, infer, body).result()
            self._loader.submit(self.unload, Unload("rehearsal")).result()
        return_memory_to_os()

    def main_loop(self, run_dir: Path | None = None, output: int | None = None) -> None:
        """Serve the frontend's calls; `output`: the pipe of a sandboxed worker's stdout."""
        self.idle_bytes = allocated_bytes() or 0
        self.kept_memory.start()
        untrusted = self.confined or bool(self.programs_refused)
        if run_dir is not None and not untrusted:
            Door(direct_path(run_dir, os.getpid()), self.gate, self.gathering.send).start()
        hello = Hello(self.worker_id, os.getpid(), pss_bytes(), untrusted, self.devices.infos())
        self.send(UNASKED, hello)
        if output is not None:  # after the hello, which must come first
            relay(output, lambda said: self.send(UNASKED, said))
        frames = FrameReader(self.sock)
        while True:
            try:
                frame = frames.read()
            except (EOFError, ConnectionError, OSError):
                return  # the frontend has gone: so do we
            request = decode_request(frame.header)
            executor = self._executor_of(request)
            if executor is None:
                self._answer(frame, request)
            else:
                executor.submit(self._answer, frame, request)

    def _executor_of(self, request: Request) -> ThreadPoolExecutor | None:
        if isinstance(request, Infer):
            return self._inference
        # moves are on a request's path, as unloads are on a miss's
        moves = isinstance(request, (Unload, ToDevice, ToHost))
        return self._unloader if moves else self._loader

    def _answer(self, frame: Frame, request: Request) -> None:
        try:
            reply, payload = self._serve(request, frame.payload)
        except BaseException as error:  # every failure goes back as data, never as a pickle
            reply, payload = Failed(Failure.of(error)), b""
            forget_frames(error)
        self.send(frame.request_id, reply, payload)
        if len(frame.payload) + len(payload) >= TRIM_AFTER_BYTES:
            self._trimmer.due()  # a large body's freed pages would count in the PSS

    def _serve(self, request: Request, payload: bytes) -> tuple[Reply, bytes]:
        if isinstance(request, Infer):
            return self.infer_in_slot(request, payload)
        if isinstance(request, Load):
            return self.load(request), b""
        if isinstance(request, ToDevice):
            handler = self._model(request.model)
            return self.devices.to_device(request.model, handler, request.device), b""
        if isinstance(request, ToHost):
            return self.devices.to_host(request.model, self._model(request.model)), b""
        return self.unload(request), b""

    def _model(self, model: str) -> Handler:
        handler = self.models.get(model)
        if handler is None:
            raise ModelNotLoaded(f"model {model} is not loaded in worker {self.worker_id}")
        return handler

    def send(self, request_id: int, reply: Reply, payload: bytes = b"") -> None:
        data = encode_frame(Frame(request_id, encode(reply), payload))
        with self._send_lock:
            self.sock.sendall(data)

    def load(self, request: Load) -> Loaded:
        """Load and warm up a model as its request (the manifest's choices) says."""
        with self._measuring, self.running.of(request.model, LOAD):
            return self._load(request)

    def _load(self, request: Load) -> Loaded:
        from modelhost.workers import fast_copy
        from modelhost.workers.handlers import prepared_handler
        from modelhost.workers.handlers.preload import runtimes_of
        from modelhost.workers.warmup import warm_up

        artifact = Path(request.path)
        root = Path(request.root or artifact)
        started = time.perf_counter()
        spec = self._load_spec(request, root)
        why = request.untrusted or "--refuse-pickle"
        if self.programs_refused:
            from modelhost.workers.programs import refuse_program

            refuse_program(artifact, request.model, spec, self.programs_refused, why)
        prepared = prepared_handler(artifact, request.model, spec)
        build: Callable[[], Handler] = prepared
        if self.confined:
            from modelhost.workers import no_pickle
            from modelhost.workers.programs import said_as_refusal

            no_pickle.refused_because(why)  # one tenant's worker: its models share the reason
            build = said_as_refusal(prepared, request.model, why)
        before = settled_memory()  # the runtime's import is the worker's, not the model's
        reset_peak_rss()
        rss_before, _ = rss_and_peak_bytes()
        copy = fast_copy.read(request)
        handler = copy or build()
        handler.limit_rows(request.max_rows)
        warm_up(handler, request.model, root, request.warmup)
        capable = handler.device_capable and bool(self.devices.devices) and not request.cpu
        # a device's batch may be smaller, and only the main process sends to a device
        gathers = handler.batches and not capable
        self.batch_sizes[request.model] = request.max_batch_size if gathers else 1
        self.models[request.model] = handler
        if not capable:  # a hit on a device-capable model may wait for its device
            self.gate.open(request.model)
        load_ms = (time.perf_counter() - started) * 1000
        peak = max(0, rss_and_peak_bytes()[1] - rss_before)  # unpickling's buffers, at their most
        grown = self.footprints[request.model] = max(0, settled_memory() - before)
        footprint = grown + handler.mapped_bytes  # mapped files: outside the C library's counts
        written = fast_copy.write(handler, request, footprint) if copy is None else 0
        signature = handler.signature()
        trim_heap()  # else unpickling's buffers stay in the PSS
        self.kept_memory.settled(sum(self.footprints.values()))
        return Loaded(
            footprint=footprint,
            load_ms=load_ms,
            batches=handler.batches,
            reads_artifact=handler.reads_artifact,
            peak=peak,
            pure=handler.pure,
            fast_copy_written=written,
            fast_copy_read=copy is not None,
            device_capable=capable,
            tensor_bytes=handler.tensor_bytes() if capable else 0,
            runtimes=runtimes_of(prepared.modules),
            signature=signature,
        )

    def _load_spec(self, request: Load, root: Path) -> LoadSpec:
        from modelhost.workers.handlers.select import LoadSpec

        # more would start that many threads beside every model
        threads = min(request.threads or self.threads, usable_cores())
        return LoadSpec(request.handler, request.model_file, root, threads)

    def unload(self, request: Unload) -> Unloaded:
        with self._measuring:
            return self._unload(request)

    def _unload(self, request: Unload) -> Unloaded:
        started = time.perf_counter()
        self.gate.close(request.model)  # first: no direct request reaches what goes
        before = settled_memory()
        handler = self.models.pop(request.model, None)
        if handler is None:
            raise ModelNotLoaded(f"model {request.model} is not loaded in worker {self.worker_id}")
        footprint = self.footprints.pop(request.model, 0)
        self.batch_sizes.pop(request.model, None)
        self.devices.forget(request.model, handler)
        handler.close()
        del handler
        after = settled_memory()
        # a cycle among old objects holds the model; or none is left, and `kept` must be exact
        if before - after < footprint // 2 or not self.models:
            gc.collect()  # cheap with no model left to walk
            after = settled_memory()
        trim_heap()
        # with models left, memory kept may be theirs
        kept = 0 if self.models else self.kept_bytes(after)
        self.kept_memory.settled(sum(self.footprints.values()), request.model)
        unload_ms = (time.perf_counter() - started) * 1000
        return Unloaded(max(0, before - after), kept, round(unload_ms, 3))

    def kept_bytes(self, settled_bytes: int) -> int:
        """Memory held past the idle worker and its models, which only a fresh worker gives back."""
        if mallinfo2() is None:  # not glibc: the settled figure is a PSS, not comparable
            return 0
        return max(0, settled_bytes - self.idle_bytes - sum(self.footprints.values()))

    def infer_in_slot(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        """`infer` in an inference thread's slot, with the batches of the model waiting for one
        (gather.py)."""
        return self.gathering.infer(request, payload)

    def _batch_size(self, model: str) -> int:
        return self.batch_sizes.get(model, 1)

    def infer(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        """Answer a batch: one request per item, their bodies back to back in the payload."""
        handler = self.models.get(request.model)
        if handler is None:
            raise ModelNotLoaded(f"model {request.model} is not loaded in worker {self.worker_id}")
        requests = list(split_requests(request.items, payload))
        started = time.perf_counter()
        with self.running.of(request.model), self.devices.call(request.model) as grown:
            replies = handler.infer_batch(requests)
        infer_ms = (time.perf_counter() - started) * 1000
        self.kept_memory.after_batch(request.model)
        answers, bodies = answers_of(replies, self.max_answer_bytes)
        answered = Answered(
            answers,
            infer_ms,
            drain_samples(),
            device_grown=grown.bytes,
            device_process=grown.process_bytes,
            device_models=grown.models_bytes,
        )
        return answered, b"".join(bodies)


def split_requests(items: tuple[Item, ...], payload: bytes) -> Iterator[InferRequest]:
    if len(items) == 1:  # a request alone: its body is the whole payload, no copy
        item = items[0]
        yield request_of(item, payload)
        return
    view, offset = memoryview(payload), 0
    for item in items:
        end = offset + item.size
        body = bytes(view[offset:end])
        offset = end
        yield request_of(item, body)


def request_of(item: Item, body: bytes) -> InferRequest:
    return InferRequest(
        body, item.content_type, item.accept, item.params, item.headers, request_id=item.request_id
    )


def run(
    socket_path: str,
    worker_id: int,
    threads: int,
    rehearsal: list[Path],
    untrusted: Untrusted | None,
    *,
    settings: WorkerSettings,
) -> None:
    """Entry point of a freshly forked worker; untrusted, it confines itself before any thread."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    run_dir = Path(socket_path).parent
    # before confinement; a slot a thread, one for the loader
    running = Running(run_dir, worker_id, threads + 1)
    kept_memory = KeptMemory(settings.max_kept_bytes)
    raise_oom_score()
    dump_faults(run_dir, worker_id)
    output = captured() if untrusted is not None else None
    programs_refused = untrusted.confine(run_dir, rehearsal) if untrusted is not None else ""
    confined = untrusted is not None and not programs_refused
    from modelhost.workers.device_moves import worker_devices

    moves = worker_devices(settings.devices if untrusted is None else "")
    worker = Worker(
        sock,
        worker_id,
        threads,
        programs_refused,
        confined,
        devices=moves,
        max_answer_bytes=settings.max_answer_bytes,
        running=running,
        kept_memory=kept_memory,
    )
    worker.rehearse(rehearsal)  # the template's own pickles, before any model's
    if untrusted is not None:
        from modelhost.workers.no_pickle import refuse_unpickling

        refuse_unpickling()
    worker.main_loop(run_dir if settings.direct else None, output)
