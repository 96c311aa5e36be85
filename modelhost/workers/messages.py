"""The messages between the frontend and its workers, defined once for both sides.

Headers are tagged MessagePack structs, so a field renamed on one side fails to decode rather
than reading as missing. Bodies travel beside the header, never inside it. A failure crosses
as data; only modelhost's own exceptions are rebuilt as themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec

from modelhost import errors
from modelhost.errors import HandlerError, ModelhostError
from modelhost.records.handler_metrics import HandlerSample
from modelhost.workers.signatures import Signature


class Message(msgspec.Struct, frozen=True, tag_field="op", tag=str.lower):
    """A frame's header."""


class DeviceInfo(msgspec.Struct, frozen=True, array_like=True):
    """A device a worker can use: its name, size, and a context's size until one is measured."""

    name: str
    total_bytes: int
    context_bytes: int


class Hello(Message, frozen=True):
    """A new worker's first reply, with its idle PSS, and whether it hosts untrusted models."""

    worker_id: int
    pid: int
    pss: int
    untrusted: bool = False
    devices: tuple[DeviceInfo, ...] = ()


class Load(Message, frozen=True, kw_only=True):
    """Load a model from `path`; the manifest's paths are relative to `root`."""

    model: str
    path: str
    root: str | None = None
    handler: str | None = None
    model_file: str | None = None
    warmup: tuple[str, ...] = ()
    max_rows: int = 0  # per request; 0: no limit
    max_batch_size: int = 0  # for a handler that batches, as its queue's; 0: unknown
    fast_copy: str = ""  # a plain pickle to read, or to write
    fast_copy_room: int = 0  # bytes the worker may write there; 0: read it
    threads: int = 0  # 0: the worker's
    untrusted: str = ""  # why the model is untrusted, for a sandboxed worker's refusals
    cpu: bool = False  # pinned to the CPU: it never moves to a device


class Unload(Message, frozen=True):
    model: str


class ToDevice(Message, frozen=True):
    """Move a loaded model's weights to `device` (placing it, or waking it)."""

    model: str
    device: str


class ToHost(Message, frozen=True):
    """Move a model's weights from its device to host memory: it sleeps there."""

    model: str


class Item(msgspec.Struct, frozen=True, array_like=True):
    """One request of a batch; its body is `size` bytes of the payload."""

    content_type: str
    accept: str
    params: dict[str, str]
    size: int
    headers: dict[str, str] | None = None  # a TorchServe prediction's
    request_id: str = ""  # a TorchServe prediction's, as its answer's x-request-id


class Asked(Protocol):
    """A request before it joins a batch."""

    @property
    def content_type(self) -> str: ...
    @property
    def accept(self) -> str: ...
    @property
    def params(self) -> dict[str, str]: ...
    @property
    def headers(self) -> dict[str, str] | None: ...
    @property
    def request_id(self) -> str: ...


def item_of(asked: Asked, size: int) -> Item:
    return Item(
        asked.content_type,
        asked.accept,
        asked.params,
        size,
        headers=asked.headers,
        request_id=asked.request_id,
    )


class Infer(Message, frozen=True, omit_defaults=True):
    """A batch for one model, bodies back to back in the payload, charged to a tenant."""

    model: str
    items: tuple[Item, ...]
    tenant: str = ""
    weight: float = 1.0


class Loaded(Message, frozen=True, kw_only=True):
    footprint: int  # bytes the load allocated
    load_ms: float
    batches: bool  # the handler takes a whole batch in one call
    reads_artifact: bool = True  # keep its files on disk
    peak: int = 0  # the resident set's most growth while loading
    pure: bool = False  # a request may run twice harmlessly
    fast_copy_written: int = 0
    fast_copy_read: bool = False
    device_capable: bool = False  # its runtime can run it on a device
    tensor_bytes: int = 0  # its weights: what a move to a device will take, about
    runtimes: tuple[str, ...] = ()  # the preloadable runtimes it needed (handlers/preload.py)
    signature: Signature | None = None  # None: unknown


class OnDevice(Message, frozen=True):
    device_bytes: int  # the allocator's growth
    context_bytes: int  # this worker's context on the device, made by this move; else 0
    move_ms: float
    process_bytes: int = 0  # NVML's figure for the worker on the device after it; 0: no NVML
    models_bytes: int = 0  # then its models' there, this one's too


class OnHost(Message, frozen=True):
    move_ms: float
    process_bytes: int = 0  # NVML's figure for the worker there after it; 0: none
    models_bytes: int = 0  # then its models' still there


class Unloaded(Message, frozen=True):
    freed: int
    kept: int = 0  # bytes an empty worker holds past its idle self
    unload_ms: float = 0.0  # on the worker's loader: without the wait for a load in flight


UNASKED = 0  # the request id of what no call asked for: a hello, output, growth


class Grown(Message, frozen=True):
    """Kept past the idle worker and its models, over `limit`; `model`'s batches kept most."""

    bytes: int
    limit: int
    model: str
    kept: int


class Output(Message, frozen=True):
    """What a sandboxed worker's code wrote on stdout or stderr."""

    text: str


MAX_MESSAGE_CHARS = 16_384  # of a failure's message: a few lines of any traceback's


class Failure(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    """An exception as data."""

    type: str
    message: str
    status: int = 0  # the error code a handler's exception names (TorchServe's); 0: none

    @classmethod
    def of(cls, error: BaseException) -> Failure:
        kind, (status, message) = type(error), _told(error)
        if len(message) > MAX_MESSAGE_CHARS:  # else its reply's header may pass the frame's cap
            cut = len(message) - MAX_MESSAGE_CHARS
            message = f"{message[:MAX_MESSAGE_CHARS]}... ({cut:,} more characters cut)"
        return cls(f"{kind.__module__}.{kind.__qualname__}", message, status)

    def rebuild(self) -> ModelhostError:
        """modelhost's own exceptions as themselves; any other as `HandlerError`."""
        module, _, name = self.type.rpartition(".")
        cls = getattr(errors, name, None) if module == errors.__name__ else None
        if isinstance(cls, type) and issubclass(cls, ModelhostError):
            return cls(self.message)
        return HandlerError(f"{name}: {self.message}", self.status)


def _told(error: BaseException) -> tuple[int, str]:
    """The error status and message of TorchServe's PredictionException(message, error_code);
    else 0 and the error's text."""
    code, message = getattr(error, "error_code", None), getattr(error, "message", None)
    if isinstance(code, int) and 400 <= code <= 599 and isinstance(message, str):
        return code, message
    return 0, str(error)


class Custom(msgspec.Struct, frozen=True, array_like=True):
    """The status and headers a handler set for its answer (TorchServe's `context`)."""

    status: int
    headers: tuple[tuple[str, str], ...]


class Answer(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    content_type: str = ""
    size: int = 0
    failure: Failure | None = None
    custom: Custom | None = None  # None: 200 and the server's headers alone


class Answered(Message, frozen=True, omit_defaults=True):
    """A batch's answers in the order of its items; the device's figures only when measured."""

    answers: tuple[Answer, ...]
    infer_ms: float  # the whole batch's
    samples: tuple[HandlerSample, ...] = ()  # from context.metrics
    device_grown: int = 0  # the model's first call on its device: its activations' peak
    device_process: int = 0  # then NVML's figure for the worker
    device_models: int = 0  # and its models' there, this growth too

    def bodies(self, payload: bytes) -> Iterator[tuple[Answer, bytes]]:
        """Each answer with its body, cut from the reply's payload."""
        offset = 0
        for answer in self.answers:
            yield answer, payload[offset : offset + answer.size]
            offset += answer.size


class Failed(Message, frozen=True):
    """The whole request failed."""

    failure: Failure


Request = Load | Unload | Infer | ToDevice | ToHost
Reply = Hello | Loaded | Unloaded | Answered | Failed | OnDevice | OnHost | Output | Grown
# the reply each request is answered with, unless it is Failed
ANSWERED_BY: dict[type[Request], type[Reply]] = {
    Load: Loaded,
    Unload: Unloaded,
    Infer: Answered,
    ToDevice: OnDevice,
    ToHost: OnHost,
}

_encoder = msgspec.msgpack.Encoder()
_requests: msgspec.msgpack.Decoder[Request] = msgspec.msgpack.Decoder(Request)
_replies: msgspec.msgpack.Decoder[Reply] = msgspec.msgpack.Decoder(Reply)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode_request(header: bytes) -> Request:
    return _requests.decode(header)


def decode_reply(header: bytes) -> Reply:
    return _replies.decode(header)
