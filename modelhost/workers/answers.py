"""A batch's answers as a worker sends them, none over max_response_size (wire.py's cap)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelhost.errors import ResponseTooLarge
from modelhost.units import format_bytes
from modelhost.workers.messages import Answer, Failure

if TYPE_CHECKING:  # unimported: the fronts import this module
    from modelhost.workers.handlers.base import InferReply

ANSWER_VARIABLE = "MODELHOST_WORKER_MAX_ANSWER_BYTES"  # max_response_size, to the template


def answer_environment(max_answer_bytes: int) -> dict[str, str]:
    return {ANSWER_VARIABLE: str(max_answer_bytes)} if max_answer_bytes else {}


def too_large(size: int, limit: int) -> ResponseTooLarge | None:
    """The refusal of an answer over max_response_size, as MMS and TorchServe refuse it."""
    if not limit or size <= limit:
        return None
    return ResponseTooLarge(
        f"the model's response is {format_bytes(size)} but max_response_size is "
        f"{format_bytes(limit)}; ask for fewer rows per request or raise --max-response-size"
    )


def check_response_size(size: int, limit: int) -> None:
    refusal = too_large(size, limit)
    if refusal is not None:
        raise refusal


def answers_of(
    replies: list[InferReply | Exception], max_answer_bytes: int = 0
) -> tuple[tuple[Answer, ...], list[bytes]]:
    """Per-request answers (errors as data) and the reply bodies in order."""
    answers: list[Answer] = []
    bodies: list[bytes] = []
    for reply in replies:
        if not isinstance(reply, Exception):
            reply = too_large(len(reply.body), max_answer_bytes) or reply
        if isinstance(reply, Exception):
            answers.append(Answer(failure=Failure.of(reply)))
            forget_frames(reply)
        else:
            answers.append(Answer(reply.content_type, len(reply.body), None, reply.custom))
            bodies.append(reply.body)
    return tuple(answers), bodies


def forget_frames(error: BaseException) -> None:
    """Drop an error's tracebacks and its causes': their frames hold the request's body."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        cause.__traceback__ = None
        cause = cause.__cause__ or cause.__context__
