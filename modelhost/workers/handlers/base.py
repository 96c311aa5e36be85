"""Handlers turn an artifact into a loaded model and a request into a reply."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from modelhost.workers.signatures import Signature

if TYPE_CHECKING:
    from modelhost.workers.messages import Custom


@dataclass(frozen=True)
class InferRequest:
    """One invocation as the worker receives it, its body undecoded."""

    body: bytes
    content_type: str = "application/json"
    accept: str = "application/json"
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] | None = None  # a TorchServe prediction's HTTP headers
    values: object = None  # ARRAY's: the rows, in process
    request_id: str = ""  # a TorchServe prediction's x-request-id


@dataclass(frozen=True)
class InferReply:
    body: bytes
    content_type: str
    values: object = None  # ARRAY's: the predictions, in process
    custom: Custom | None = None  # the status and headers its handler set


ARRAY = "application/x-modelhost-array"  # the OIP wrapper's, of models of rows


class Handler(ABC):
    """A loaded model, one per worker; `infer` may run on several threads."""

    batches: ClassVar[bool] = False  # one runtime call per batch: worth a batch delay
    reads_artifact: ClassVar[bool] = True  # its files stay on disk
    pure: ClassVar[bool] = False  # a request may run twice harmlessly
    answers_oip: ClassVar[bool] = False  # decodes OIP requests itself
    device_capable: ClassVar[bool] = False  # can move its weights to a device (torch)
    torch_allocator: ClassVar[bool] = True  # its device memory is torch's to count
    mapped_bytes = 0  # mapped files the C library's counts miss

    @abstractmethod
    def infer(self, request: InferRequest) -> InferReply:
        """Answer one request; `BadRequestBody` for input the model cannot take."""

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Answer a batch in order; a failure answers only its request."""
        replies: list[InferReply | Exception] = []
        for request in requests:
            try:
                replies.append(self.infer(request))
            except Exception as error:  # noqa: BLE001  (only its request's)
                replies.append(error)
        return replies

    def signature(self) -> Signature | None:
        """Its OIP inputs and outputs; None if unknown."""
        return None

    def limit_rows(self, max_rows: int) -> None:  # noqa: B027  (handlers of rows take it)
        """Refuse requests of more than `max_rows` rows (0: no limit)."""

    def close(self) -> None:  # noqa: B027  (most handlers hold nothing to drop)
        """Drop the model so unload can return its memory."""

    def to_device(self, device: str) -> None:
        """Move the weights to `device` (a torch device name), inputs following them."""
        raise NotImplementedError(f"{type(self).__name__} runs on the CPU only")

    def tensor_bytes(self) -> int:
        """Bytes of the weights a move carries; what the fake device's allocator counts."""
        return 0


class BatchHandler(Handler):
    """A handler whose runtime takes a batch; one request is a batch of one."""

    def infer(self, request: InferRequest) -> InferReply:
        reply = self.infer_batch([request])[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    @abstractmethod
    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Answer the batch in order; a failure answers only its request."""
