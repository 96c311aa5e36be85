"""Handlers: the code that turns an artifact into a loaded model and a request into a reply."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class InferRequest:
    """One invocation as the worker receives it: the raw body, never decoded by the frontend."""

    body: bytes
    content_type: str = "application/json"
    accept: str = "application/json"
    params: Mapping[str, str] = field(default_factory=dict)  # e.g. {"method": "predict_proba"}


@dataclass(frozen=True)
class InferReply:
    body: bytes
    content_type: str


class Handler(ABC):
    """A loaded model, built once per (worker, model); `infer` may run on several threads."""

    @abstractmethod
    def infer(self, request: InferRequest) -> InferReply:
        """Answer one request. Raise `BadRequestBody` for input the model cannot take."""

    def close(self) -> None:  # noqa: B027  (optional: most handlers hold nothing to drop)
        """Drop references to the model so its memory can be returned on unload."""
