"""A batch's answers as the worker sends them: failures as data, and no answer over
max_response_size."""

from __future__ import annotations

import pytest

from modelhost.errors import ResponseTooLarge
from modelhost.workers.answers import answers_of, check_response_size
from modelhost.workers.handlers.base import InferReply


def test_an_answer_over_max_response_size_is_refused_as_the_frontend_refuses_it() -> None:
    """The worker sends the frontend's 413 for that request alone, not the body."""
    replies: list[InferReply | Exception] = [
        InferReply(b"x" * 11, "text/plain"),
        InferReply(b"y" * 10, "text/plain"),
    ]
    answers, bodies = answers_of(replies, max_answer_bytes=10)
    assert answers[0].failure is not None and bodies == [b"y" * 10]
    with pytest.raises(ResponseTooLarge) as frontends:
        check_response_size(11, 10)
    refusal = answers[0].failure.rebuild()
    assert (type(refusal), str(refusal)) == (ResponseTooLarge, str(frontends.value))
    assert (answers[1].size, answers[1].failure) == (10, None)


def test_no_max_response_size_refuses_no_answer() -> None:
    answers, bodies = answers_of([InferReply(b"x" * 11, "text/plain")], max_answer_bytes=0)
    assert answers[0].failure is None and bodies == [b"x" * 11]


def test_a_failure_sent_back_lets_go_of_its_frames() -> None:
    """A handler's error, and the error it came from, keep no traceback (and so no parsed body)
    once sent back as data."""

    def parse() -> None:
        rows = [0.0] * 1000  # noqa: F841  (held by the frame the traceback keeps)
        try:
            raise ValueError("wide row")
        except ValueError as error:
            raise RuntimeError("model expects 4 features") from error

    try:
        parse()
    except RuntimeError as error:
        failure = error
    answers, _ = answers_of([failure])
    assert answers[0].failure is not None
    assert failure.__traceback__ is None
    assert failure.__cause__ is not None and failure.__cause__.__traceback__ is None
