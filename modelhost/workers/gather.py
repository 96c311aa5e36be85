"""Batching across senders: batches of one model waiting for an inference slot run as one.

The batch's time is shared by item count, so the senders' sums count it once (docs/decisions.md,
"Batching across senders").
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import NamedTuple

from modelhost.workers.messages import Answered, Infer

Run = Callable[[Infer, bytes], tuple[Answered, bytes]]


class Batch(NamedTuple):
    request: Infer
    payload: bytes


class Group:
    """Batches of one model that will run as one; its first is the leader's."""

    def __init__(self, batch: Batch) -> None:
        self.model = batch.request.model
        self.batches = [batch]
        self.items = len(batch.request.items)
        self.results: list[tuple[Answered, bytes]] = []
        self.error: BaseException | None = None
        self.slot = threading.Event()  # handed a slot: it runs now
        self.done = threading.Event()


class Gathering:
    """The worker's inference slots, and the groups of batches waiting for one, first come first
    served; a group handed a slot takes no more batches."""

    def __init__(self, slots: int, limit: Callable[[str], int], run: Run) -> None:
        self.free = slots  # slots no batch holds
        self.limit = limit  # the most requests a batch of the model
        self.run = run
        self._lock = threading.Lock()
        self._queue: collections.deque[Group] = collections.deque()  # first come, first served
        self._open: dict[str, Group] = {}  # model → its group waiting that takes more batches

    @property
    def waiting(self) -> int:
        """Batches waiting for a slot."""
        with self._lock:
            return sum(len(group.batches) for group in self._queue)

    def infer(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        """`run` the batch in a slot, alone or in a group, whoever sent it."""
        with self._lock:
            if self.free and not self._queue:
                self.free -= 1
                group, index = None, 0
            else:
                group, index = self._join(Batch(request, payload))
        if group is None:
            try:
                return self.run(request, payload)
            finally:
                self._hand_on()
        return self._follow(group, index) if index else self._lead(group)

    def _join(self, batch: Batch) -> tuple[Group, int]:
        """The group `batch` joined, and its place there (0: it leads a new one); under the lock."""
        model, size, limit = batch.request.model, len(batch.request.items), self.limit
        group = self._open.get(model)
        if group is not None and group.items + size <= limit(model):
            group.batches.append(batch)
            group.items += size
            index = len(group.batches) - 1
        else:
            group, index = Group(batch), 0
            self._queue.append(group)
        self._open[model] = group
        if group.items >= limit(model):
            del self._open[model]
        return group, index

    def _hand_on(self) -> None:
        """Hand the slot ending to the first group waiting, else free it."""
        with self._lock:
            if not self._queue:
                self.free += 1
                return
            group = self._queue.popleft()
            if self._open.get(group.model) is group:
                del self._open[group.model]
        group.slot.set()

    def _lead(self, group: Group) -> tuple[Answered, bytes]:
        group.slot.wait()
        try:
            group.results = self._run_group(group.batches)
        except BaseException as error:  # each member fails as it would have alone
            group.error = error
            raise
        finally:
            group.done.set()
            self._hand_on()
        return group.results[0]

    def _run_group(self, batches: list[Batch]) -> list[tuple[Answered, bytes]]:
        if len(batches) == 1:
            return [self.run(*batches[0])]
        whole, payload = self.run(*merged(batches))
        return shared(whole, payload, [len(batch.request.items) for batch in batches])

    @staticmethod
    def _follow(group: Group, index: int) -> tuple[Answered, bytes]:
        group.done.wait()
        if group.error is not None:
            raise group.error
        return group.results[index]


def merged(batches: list[Batch]) -> Batch:
    """One batch of every item of `batches`, in order."""
    items = tuple(item for batch in batches for item in batch.request.items)
    payload = b"".join(batch.payload for batch in batches)
    return Batch(Infer(batches[0].request.model, items), payload)


def shared(whole: Answered, payload: bytes, sizes: list[int]) -> list[tuple[Answered, bytes]]:
    """Each batch's answers and bodies cut from the whole's, its time a share by item count;
    samples and device growth go with the first, to count once."""
    parts: list[tuple[Answered, bytes]] = []
    first, offset, given_ms, total = 0, 0, 0.0, sum(sizes)
    for index, size in enumerate(sizes):
        answers = whole.answers[first : first + size]
        end = offset + sum(answer.size for answer in answers)
        last = index == len(sizes) - 1
        infer_ms = whole.infer_ms - given_ms if last else whole.infer_ms * size / max(1, total)
        extras = (whole.samples, whole.device_grown) if index == 0 else ((), 0)
        parts.append((Answered(answers, infer_ms, *extras), payload[offset:end]))
        first, offset, given_ms = first + size, end, given_ms + infer_ms
    return parts
