"""Calls to workers: a future per request, keyed by its id, under the deadline of its kind."""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable

from modelhost.deadlines import DeadlineGroups
from modelhost.workers.handle import CallKey, Waiter, WorkerHandle
from modelhost.workers.messages import (
    ANSWERED_BY,
    Failed,
    Infer,
    Load,
    Reply,
    Request,
    ToDevice,
    ToHost,
    Unload,
    decode_reply,
    encode,
)
from modelhost.workers.replies import ReplyT, checked, gone, missed
from modelhost.workers.wire import MAX_HEADER_BYTES, Frame, reply_cap
from modelhost.workers.wire import encode as encode_frame

# a batch past its response deadlines by this much is stuck, not slow: its worker is killed
STUCK_AFTER_DEADLINES = 2


def stuck_after_s(response_timeout_s: float) -> float:
    """How long a batch of a model with this response timeout may run before it is stuck."""
    return STUCK_AFTER_DEADLINES * response_timeout_s


class Calls:
    """Sends requests and gives each reply to its call; a call past its deadline is failed."""

    def __init__(
        self,
        load_timeout_s: float,
        infer_timeout_s: float,
        on_missed: Callable[[WorkerHandle, str], None],
        max_answer_bytes: int = 0,
    ) -> None:
        self.on_missed = on_missed
        self.max_answer_bytes = max_answer_bytes  # max_response_size; 0: none
        self._loop: asyncio.AbstractEventLoop | None = None
        self._request_ids = itertools.count(1)
        # one timer per kind of call and timeout
        self._deadlines: dict[type[Request], DeadlineGroups[CallKey]] = {
            kind: DeadlineGroups(timeout_s, functools.partial(self._missed, kind))
            for kind, timeout_s in (
                (Infer, infer_timeout_s),
                (Load, load_timeout_s),
                (Unload, load_timeout_s),
                (ToDevice, load_timeout_s),  # a move copies weights as a load reads them
                (ToHost, load_timeout_s),
            )
        }

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make futures on the pool's loop, for callers without a task."""
        self._loop = loop

    def send(
        self,
        worker: WorkerHandle,
        request: Request,
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> Waiter:
        """Send one request; the future gets its reply and payload.

        `timeout_s` is the model's own deadline for the call; None: its kind's.
        """
        if not worker.alive or worker.transport.is_closing():
            raise gone(worker)
        request_id = next(self._request_ids)
        frame = encode_frame(Frame(request_id, encode(request), payload))
        future: Waiter = (self._loop or asyncio.get_running_loop()).create_future()
        # its own deadline: a caller that gives up leaves no hung worker
        deadlines = self._deadlines[type(request)].add((worker, request_id), timeout_s)
        answers = len(request.items) if isinstance(request, Infer) else 0
        cap = reply_cap(answers, self.max_answer_bytes)
        worker.pending[request_id] = (future, model, deadlines, ANSWERED_BY[type(request)], cap)
        try:
            worker.transport.write(frame)
        except (RuntimeError, ConnectionError) as error:  # closed before its reader saw the end
            worker.pending.pop(request_id, None)
            deadlines.discard((worker, request_id))
            raise gone(worker) from error
        return future

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> tuple[ReplyT, bytes]:
        """Send one request and await its reply of type `expect`, or its failure raised."""
        reply, body = await self.send(worker, request, payload, model=model, timeout_s=timeout_s)
        return checked(reply, expect), body

    def cap(self, worker: WorkerHandle, request_id: int) -> int:
        """A reply's most bytes past the prefix; a stray reply's, a header's."""
        entry = worker.pending.get(request_id)
        return MAX_HEADER_BYTES if entry is None else entry[4]

    def answer(self, worker: WorkerHandle, frame: Frame) -> Reply | None:
        """Give a reply to its call's future; None if the call is over.

        ConnectionError for a reply of another kind than the call's: the worker is not ours.
        """
        entry = worker.pending.get(frame.request_id)
        if entry is None:
            return None
        reply = decode_reply(frame.header)  # a bad one leaves the call pending
        future, _, deadlines, expect, _ = entry
        if not isinstance(reply, (expect, Failed)):
            raise ConnectionError(f"{type(reply).__name__} answered a call for {expect.__name__}")
        del worker.pending[frame.request_id]
        deadlines.discard((worker, frame.request_id))
        if frame.request_id > worker.answered_up_to:
            worker.answered_up_to = frame.request_id
        if not future.done():  # done: its caller was cancelled
            future.set_result((reply, frame.payload))
        return reply

    def _missed(self, kind: type[Request], key: CallKey) -> None:
        """Fail a call past its deadline; its worker may hang for ever."""
        worker, request_id = key
        entry = worker.pending.pop(request_id, None)
        if entry is None:
            return
        future, model, deadlines, *_ = entry
        own = deadlines.timeout_s != self._deadlines[kind].default_s
        if not future.done():
            future.set_exception(missed(worker, kind, model, deadlines.timeout_s, own))
        stuck = kind is Infer and worker.answered_up_to > request_id  # and the GIL free
        self.on_missed(worker, model if stuck else "")

    def close(self) -> None:
        for deadlines in self._deadlines.values():
            deadlines.close()
