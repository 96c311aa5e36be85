"""The routing table and the fronts' reports, as the workers' frames over a front's pipes."""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from modelhost.http.client_pace import ClientPace
from modelhost.workers.wire import Frame, FrameBuffer, encode


class Tenancy(msgspec.Struct, frozen=True):
    """Who a hit's tenant is and what a front may do for it (fronts/tenants.py)."""

    tenant_from: str  # header[:NAME], name:N or token
    held: list[str] = []  # with a rate or a cap: relayed
    hold_others: bool = False  # the tenants file's default has one
    weights: dict[str, float] = {}  # the named tenants'
    default_weight: float = 1.0
    model_segments: int = 0  # --tenant-models name:N's N: another tenant's model is relayed
    tokens: dict[bytes, str] = {}  # under token: each token's digest → its tenant


class Table(msgspec.Struct, frozen=True, tag=True):
    """Model → its serving workers' places in `sockets`, and what a front needs to answer as
    the main process does."""

    routes: dict[str, list[int]]
    batch_sizes: dict[str, int] = {}  # the most requests a batch, where above 1
    instance: str = ""  # the x-modelhost-instance header
    max_request_bytes: int = 0
    max_response_bytes: int = 0
    response_timeout_s: float = 60.0  # the server's default_response_timeout_s
    pace: ClientPace = ClientPace(10.0, 0)
    inference_key: str = ""  # token authorization's, which a hit must hold
    inference_key_until: float = 0.0  # epoch seconds: the key's expiry
    tenants: Tenancy | None = None  # None: tenants are off
    slots: int = 1  # a worker's inference threads
    default_accept: str = "application/json"  # of an invocation that sends no Accept
    sockets: list[str] = []  # each worker's, named once


class RouteChanges(msgspec.Struct, frozen=True, tag=True):
    """A table's changes where only routes changed."""

    routes: dict[str, list[int]]  # models routed anew
    gone: list[str]  # models no longer routed
    sockets: list[str]  # the newest table's


def changes(old: Table, new: Table, names: Collection[str] | None = None) -> Table | RouteChanges:
    """What a front holding `old` needs to hold `new`; routes differ in `names` (None: any)."""
    if new.sockets[: len(old.sockets)] != old.sockets or _settings(old) != _settings(new):
        return new
    before, after = old.routes, new.routes
    looked = before.keys() | after.keys() if names is None else names
    routes = {
        name: after[name] for name in looked if name in after and before.get(name) != after[name]
    }
    gone = [name for name in looked if name in before and name not in after]
    return RouteChanges(routes, gone, new.sockets)


def applied(table: Table, change: RouteChanges) -> Table:
    """`table` with `change` made, its routes in place."""
    routes = table.routes
    routes.update(change.routes)
    for name in change.gone:
        routes.pop(name, None)
    return msgspec.structs.replace(table, sockets=change.sockets)


def _settings(table: Table) -> Table:
    return msgspec.structs.replace(table, routes={}, sockets=[])


class Sample(msgspec.Struct, frozen=True, array_like=True):
    """One request a front answered itself."""

    time: float  # epoch seconds it arrived
    route: str
    model: str
    status: int
    duration_s: float
    bytes_in: int
    bytes_out: int
    infer_ms: float
    error: str | None = None
    tenant: str | None = None  # None: tenants are off


class Report(msgspec.Struct, frozen=True, tag=True):
    """What a front answered itself since its last report."""

    samples: list[Sample]
    busy_s: dict[str, float] = {}  # model → worker seconds of its direct batches
    pressed: list[str] = []  # models whose requests waited behind a batch
    in_flight: int = 0  # requests the front is answering now


Message = Table | RouteChanges | Report
_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


def pack(message: Message) -> bytes:
    """In a frame's payload: a table grows past a header's cap."""
    return encode(Frame(0, b"", _encoder.encode(message)))


class Unpacker:
    """Messages cut out of a byte stream however it arrives."""

    def __init__(self) -> None:
        self.frames = FrameBuffer()

    def feed(self, data: bytes) -> list[Message]:
        return [_decoder.decode(frame.payload) for frame in self.frames.feed(data)]
