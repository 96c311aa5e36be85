"""The messages between the frontend and its workers, defined once for both sides.

Each frame's header is one of these structs, encoded as MessagePack with its `op` as the tag, so
a field renamed on one side fails to decode on the other instead of reading as missing. Request
and reply bodies travel beside the header as the frame's payload, never inside it.

A failure crosses the boundary as data: the exception's full type path and its message. Only
modelhost's own exceptions are rebuilt as themselves; anything else (a user's exception, even one
named `QueueFull`) comes back as `HandlerError`.
"""

from __future__ import annotations

import msgspec

from modelhost import errors
from modelhost.errors import HandlerError, ModelhostError
from modelhost.records.handler_metrics import HandlerSample


class Message(msgspec.Struct, frozen=True, tag_field="op", tag=str.lower):
    """A frame's header; the frame carries the request's id beside it (`wire.Frame`)."""


# worker → frontend, once: the worker is ready -------------------------------------------------


class Hello(Message, frozen=True):
    """A new worker's first reply: who it is and its idle PSS, measured after its rehearsal."""

    worker_id: int
    pid: int
    pss: int


# frontend → worker ----------------------------------------------------------------------------


class Load(Message, frozen=True):
    """Load a model from `path`; the manifest's handler, model file and warm-up samples are
    relative to `root` (the artifact itself when it has no manifest)."""

    model: str
    path: str
    root: str | None = None
    handler: str | None = None
    model_file: str | None = None
    warmup: tuple[str, ...] = ()
    max_rows: int = 0  # the most rows a request may carry (built-in handlers); 0: no limit
    fast_copy: str = ""  # a plain pickle to read first, or to write (cache.fast_copies)
    fast_copy_room: int = 0  # bytes the worker may write there; 0: read it
    threads: int = 0  # the runtime's threads for this model (its manifest); 0: the worker's


class Unload(Message, frozen=True):
    """Drop a loaded model and give its memory back."""

    model: str


class Item(msgspec.Struct, frozen=True, array_like=True):
    """One request of a batch; `size` bytes of the payload are its body."""

    content_type: str
    accept: str
    params: dict[str, str]
    size: int


class Infer(Message, frozen=True):
    """A batch of requests for one model, their bodies back to back in the payload."""

    model: str
    items: tuple[Item, ...]


# worker → frontend: replies -------------------------------------------------------------------


class Loaded(Message, frozen=True):
    """A load done: what it cost and what the host needs to know of the handler."""

    footprint: int  # bytes the load allocated (where the C library cannot say, its PSS growth)
    load_ms: float
    batches: bool  # the handler takes a whole batch in one call
    reads_artifact: bool = True  # the loaded model may still read its files: keep them on disk
    peak: int = 0  # bytes the worker's resident set grew by at most while loading
    pure: bool = False  # the handler answers a request twice harmlessly (built-in runtimes)
    fast_copy_written: int = 0  # bytes of the fast copy this load wrote
    fast_copy_read: bool = False  # the model came from its fast copy


class Unloaded(Message, frozen=True):
    """An unload done."""

    freed: int  # bytes the unload gave up (measured as a load's footprint is)
    kept: int = 0  # bytes the worker, left with no model, holds past its idle self


class Failure(msgspec.Struct, frozen=True, array_like=True):
    """An exception as data: its type's full path (module.QualName) and its message."""

    type: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> Failure:
        kind = type(error)
        return cls(f"{kind.__module__}.{kind.__qualname__}", str(error))

    def rebuild(self) -> ModelhostError:
        """modelhost's own exceptions as themselves; any other as a `HandlerError`."""
        module, _, name = self.type.rpartition(".")
        cls = getattr(errors, name, None) if module == errors.__name__ else None
        if isinstance(cls, type) and issubclass(cls, ModelhostError):
            return cls(self.message)
        return HandlerError(f"{name}: {self.message}")


class Answer(msgspec.Struct, frozen=True, array_like=True):
    """One request's outcome: `size` bytes of the payload in `content_type`, or a failure."""

    content_type: str = ""
    size: int = 0
    failure: Failure | None = None


class Answered(Message, frozen=True):
    """A batch's answers in the order of its items; `infer_ms` is the whole batch's."""

    answers: tuple[Answer, ...]
    infer_ms: float
    samples: tuple[HandlerSample, ...] = ()  # what handlers recorded through context.metrics


class Failed(Message, frozen=True):
    """The whole request failed (a load that raised, a model not loaded there)."""

    failure: Failure


Request = Load | Unload | Infer
Reply = Hello | Loaded | Unloaded | Answered | Failed

_encoder = msgspec.msgpack.Encoder()
_requests: msgspec.msgpack.Decoder[Request] = msgspec.msgpack.Decoder(Request)
_replies: msgspec.msgpack.Decoder[Reply] = msgspec.msgpack.Decoder(Reply)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode_request(header: bytes) -> Request:
    return _requests.decode(header)


def decode_reply(header: bytes) -> Reply:
    return _replies.decode(header)
