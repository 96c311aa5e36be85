"""The live event stream behind `GET /events`, a bounded queue per client.

A client a whole queue behind is dropped rather than buffered for; its EventSource resumes
from the log's ring with `Last-Event-ID`. `close()` ends every stream so draining is not held.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from modelhost.records.events import Event, EventLog

QUEUE_EVENTS = 1000
HEARTBEAT_S = 15.0
TENANT_SHARE = 16


class _End:
    """Ends a client's stream."""


END = _End()
Item = Event | _End


class EventStream:
    def __init__(
        self,
        events: EventLog,
        queue_events: int = QUEUE_EVENTS,
        heartbeat_s: float = HEARTBEAT_S,
        max_clients: int = 64,
    ) -> None:
        self.events = events
        self.max_clients = max_clients
        self.queue_events = queue_events
        self.heartbeat_s = heartbeat_s
        self.closed = False
        self._clients: dict[asyncio.Queue[Item], str | None] = {}  # queue → model filter
        self._tenants: dict[asyncio.Queue[Item], str] = {}  # a tenant's queues
        self.tenant_most = max(1, max_clients // TENANT_SHARE)
        events.subscribe(self._publish)

    @property
    def clients(self) -> int:
        return len(self._clients)

    def refusal(self, tenant: str | None = None) -> str:
        """Why a stream for `tenant` (None: the operator) is refused, or ""."""
        if len(self._clients) >= self.max_clients:
            return (
                f"{len(self._clients)} event streams are open, the most this server allows "
                "(--max-event-streams); close one, or raise the limit"
            )
        held = list(self._tenants.values())
        if tenant is not None and held.count(tenant) >= self.tenant_most:
            return (
                f"tenant {tenant} holds {self.tenant_most} event streams, the most a tenant may "
                f"(a {TENANT_SHARE}th of --max-event-streams); close one"
            )
        if tenant is not None and len(held) >= self.max_clients - self.tenant_most:
            return "the tenants hold every event stream but the operator's; close one"
        return ""

    async def follow(
        self, after_id: int | None = None, model: str | None = None, tenant: str | None = None
    ) -> AsyncIterator[Event | None]:
        """Events after `after_id`, then live ones; None after each `heartbeat_s` of silence."""
        if self.closed or self.refusal(tenant):
            return
        queue: asyncio.Queue[Item] = asyncio.Queue(self.queue_events + 1)  # + 1: room for END
        self._clients[queue] = model  # with the replay in one step: nothing falls between
        if tenant is not None:
            self._tenants[queue] = tenant
        backlog = self.events.since(after_id) if after_id is not None else []
        try:
            for event in backlog:
                if model is None or event.model == model:
                    yield event
            async for item in self._live(queue):
                yield item
        finally:
            self._clients.pop(queue, None)
            self._tenants.pop(queue, None)

    async def _live(self, queue: asyncio.Queue[Item]) -> AsyncIterator[Event | None]:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), self.heartbeat_s)
            except asyncio.TimeoutError:
                yield None
                continue
            if isinstance(item, _End):
                return
            yield item

    def _publish(self, event: Event) -> None:
        for queue, model in list(self._clients.items()):
            if model is not None and event.model != model:
                continue
            if queue.qsize() < self.queue_events:
                queue.put_nowait(event)
            else:
                self._end(queue)

    def _end(self, queue: asyncio.Queue[Item]) -> None:
        self._clients.pop(queue, None)  # so END is put once, in the room kept for it
        self._tenants.pop(queue, None)
        queue.put_nowait(END)

    def close(self) -> None:
        self.closed = True
        for queue in list(self._clients):
            self._end(queue)
