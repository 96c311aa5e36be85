"""Batching across senders: batches of one model and tenant waiting for an inference slot run
as one, in fair order across the tenants; the main process's wait on their senders' threads,
the fronts' as data, run by whichever thread frees a slot. A batch's time is shared by item
count, so the senders' sums count it once (docs/decisions.md, "Batching across senders")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from modelhost.fair import FairQueue, Ticket
from modelhost.workers.messages import Answered, Infer

Run = Callable[[Infer, bytes], tuple[Answered, bytes]]
Outcome = tuple[Answered, bytes] | BaseException
Done = Callable[[Outcome], None]
Start = Callable[[Callable[[], None]], object]  # runs a function on another thread


def spawn(run: Callable[[], None]) -> None:
    threading.Thread(target=run, name="gathered", daemon=True).start()


class Batch(NamedTuple):
    request: Infer
    payload: bytes
    done: Done | None = None  # None: its sender's thread waits for its outcome


class Group:
    """Batches of one model and tenant that will run as one; its first is the leader's."""

    def __init__(self, batch: Batch) -> None:
        self.model, self.tenant = batch.request.model, batch.request.tenant
        self.ticket: Ticket | None = None
        self.batches = [batch]
        self.items = len(batch.request.items)
        self.results: list[tuple[Answered, bytes]] = []
        self.error: BaseException | None = None
        self.cost_ms: float | None = None  # None: the time it held the slot
        self.slot = threading.Event()  # handed a slot: it runs now
        self.done = threading.Event()

    @property
    def led(self) -> bool:
        """Whether its leader's thread waits for the slot."""
        return self.batches[0].done is None


class Gathering:
    """The worker's inference slots, and the groups of batches waiting for one, handed a
    freed slot in fair order (fair.py); a group handed a slot takes no more."""

    def __init__(
        self, slots: int, limit: Callable[[str], int], run: Run, start: Start = spawn
    ) -> None:
        self.free = slots  # slots no batch holds
        self.limit = limit  # the most requests a batch of the model
        self.run, self.start = run, start
        self._lock = threading.Lock()
        self.weights: dict[str, float] = {}  # as each tenant's last batch said
        self._queue: FairQueue[Group] = FairQueue(weight=self._weight)
        self._open: dict[tuple[str, str], Group] = {}  # groups taking more batches
        self._waiting = 0  # batches in the groups queued

    def _weight(self, tenant: str) -> float:
        return self.weights.get(tenant, 1.0)

    @property
    def waiting(self) -> int:
        """Batches waiting for a slot."""
        with self._lock:
            return self._waiting

    def infer(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        """`run` the batch in a slot, alone or in a group, on this thread or its leader's."""
        with self._lock:
            if self.free and not self._queue.waiting:  # none to be fair to: not charged
                self.free -= 1
                group = None
            else:
                group, index = self._join(Batch(request, payload))
        if group is None:
            try:
                return self.run(request, payload)
            finally:
                if (handed := self._hand_on(None, None)) is not None:
                    self._start(handed)
        return self._follow(group, index) if index else self._lead(group)

    def send(self, request: Infer, payload: bytes, done: Done, here: bool = False) -> None:
        """`run` the batch in a slot, on a thread of `start`'s, or on this one if `here` and a
        slot is free at once; `done` gets its outcome."""
        batch = Batch(request, payload, done)
        with self._lock:
            if not self.free or self._queue.waiting:
                self._join(batch)
                return
            self.free -= 1
        if not here:
            return self._start(Group(batch))
        try:
            outcome: Outcome = self.run(request, payload)
        except BaseException as error:  # noqa: BLE001 - handed to `done`, as a group's
            outcome = error
        done(outcome)
        if (handed := self._hand_on(None, None)) is not None:
            self._start(handed)

    def _join(self, batch: Batch) -> tuple[Group, int]:
        """The group `batch` joined, and its place there (0: it leads a new one); under the lock."""
        request = batch.request
        key, size, limit = (request.model, request.tenant), len(request.items), self.limit
        self.weights[request.tenant] = request.weight
        self._waiting += 1
        group = self._open.get(key)
        if group is not None and group.items + size <= limit(request.model):
            group.batches.append(batch)
            group.items += size
            index = len(group.batches) - 1
        else:
            group, index = Group(batch), 0
            self._queue.push(group.tenant, group)
        self._open[key] = group
        if group.items >= limit(request.model):
            del self._open[key]
        return group, index

    def _hand_on(self, ticket: Ticket | None, cost_ms: float | None) -> Group | None:
        """Charge the batch ending, and hand its slot to the next group, else free it; that
        group, where no thread waits for it."""
        with self._lock:
            queue = self._queue
            if ticket is not None:
                queue.complete(ticket, cost_ms)
            if not queue.waiting:
                self.free += 1
                return None
            picked = queue.take()
            assert picked is not None  # no tenant has a cap here
            tenant, group = picked
            self._waiting -= len(group.batches)
            group.ticket = self._queue.dispatch(tenant)
            key = (group.model, tenant)
            if self._open.get(key) is group:
                del self._open[key]
        if not group.led:
            return group
        group.slot.set()
        return None

    def _start(self, group: Group) -> None:
        self.start(lambda: self._serve(group))

    def _serve(self, group: Group | None) -> None:
        """Run `group`, then each group handed its slot that no thread waits for."""
        while group is not None:
            self._run(group)
            group = self._hand_on(group.ticket, group.cost_ms)

    def _lead(self, group: Group) -> tuple[Answered, bytes]:
        group.slot.wait()
        self._run(group)
        if (handed := self._hand_on(group.ticket, group.cost_ms)) is not None:
            self._start(handed)
        if group.error is not None:
            raise group.error
        return group.results[0]

    def _run(self, group: Group) -> None:
        try:
            group.results = self._run_group(group.batches)
            group.cost_ms = sum(answered.infer_ms for answered, _ in group.results)
        except BaseException as error:  # each member fails as it would have alone
            group.error = error
        group.done.set()
        for index, batch in enumerate(group.batches):
            if batch.done is not None:
                batch.done(group.error or group.results[index])

    def _run_group(self, batches: list[Batch]) -> list[tuple[Answered, bytes]]:
        if len(batches) == 1:
            return [self.run(batches[0].request, batches[0].payload)]
        whole, payload = self.run(*merged(batches))
        return shared(whole, payload, [len(batch.request.items) for batch in batches])

    @staticmethod
    def _follow(group: Group, index: int) -> tuple[Answered, bytes]:
        group.done.wait()
        if group.error is not None:
            raise group.error
        return group.results[index]


def merged(batches: list[Batch]) -> tuple[Infer, bytes]:
    """One batch of every item of `batches`, in order."""
    items = tuple(item for batch in batches for item in batch.request.items)
    payload = b"".join(batch.payload for batch in batches)
    first = batches[0].request
    return Infer(first.model, items, tenant=first.tenant, weight=first.weight), payload


def shared(whole: Answered, payload: bytes, sizes: list[int]) -> list[tuple[Answered, bytes]]:
    """Each batch's answers and bodies cut from the whole's, its time a share by item count;
    samples and the device's figures go with the first, to count once."""
    parts: list[tuple[Answered, bytes]] = []
    first, offset, given_ms, total = 0, 0, 0.0, sum(sizes)
    for index, size in enumerate(sizes):
        answers = whole.answers[first : first + size]
        end = offset + sum(answer.size for answer in answers)
        last = index == len(sizes) - 1
        infer_ms = whole.infer_ms - given_ms if last else whole.infer_ms * size / max(1, total)
        part = (
            msgspec.structs.replace(whole, answers=answers, infer_ms=infer_ms)
            if index == 0
            else Answered(answers, infer_ms)
        )
        parts.append((part, payload[offset:end]))
        first, offset, given_ms = first + size, end, given_ms + infer_ms
    return parts
