"""Handlers: the code that turns an artifact into a loaded model and a request into a reply."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class InferRequest:
    """One invocation as the worker receives it: the raw body, never decoded by the frontend."""

    body: bytes
    content_type: str = "application/json"
    accept: str = "application/json"
    params: Mapping[str, str] = field(default_factory=dict)  # e.g. {"method": "predict_proba"}


@dataclass(frozen=True)
class InferReply:
    """One request's answer from a handler: its body and content type."""

    body: bytes
    content_type: str


class Handler(ABC):
    """A loaded model, built once per (worker, model); `infer` may run on several threads."""

    # whether `infer_batch` answers a batch in one call of the runtime (worth a batch delay)
    batches: ClassVar[bool] = False
    # whether the loaded model may still read its artifact's files (then they stay on disk)
    reads_artifact: ClassVar[bool] = True
    # whether answering a request twice is harmless (then a worker's death costs a retry)
    pure: ClassVar[bool] = False
    # whether it decodes Open Inference Protocol requests itself (then they reach it unchanged)
    answers_oip: ClassVar[bool] = False
    # bytes of its artifact's files the model maps and reads: in its footprint, though the C
    # library's counts miss them
    mapped_bytes = 0

    @abstractmethod
    def infer(self, request: InferRequest) -> InferReply:
        """Answer one request. Raise `BadRequestBody` for input the model cannot take."""

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Answer requests the scheduler batched, in order; a failure answers only its request.

        The default answers them one by one; handlers whose runtime predicts a matrix at once
        override it (stack the rows, predict once, split the answers).
        """
        replies: list[InferReply | Exception] = []
        for request in requests:
            try:
                replies.append(self.infer(request))
            except Exception as error:  # noqa: BLE001  (isolated to the request that caused it)
                replies.append(error)
        return replies

    def limit_rows(self, max_rows: int) -> None:  # noqa: B027  (handlers of rows take it)
        """Refuse requests of more than `max_rows` rows (0: no limit)."""

    def close(self) -> None:  # noqa: B027  (optional: most handlers hold nothing to drop)
        """Drop references to the model so its memory can be returned on unload."""


class BatchHandler(Handler):
    """A handler whose runtime takes the batch as its unit: one request is a batch of one."""

    def infer(self, request: InferRequest) -> InferReply:
        reply = self.infer_batch([request])[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    @abstractmethod
    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        """Answer the batch in order; a failure answers only its request."""
