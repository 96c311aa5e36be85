"""Worker messages decode to what was encoded, and failures come back as the right exception."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost import errors
from modelhost.errors import HandlerError, ModelNotLoaded
from modelhost.workers.messages import (
    MAX_MESSAGE_CHARS,
    Answer,
    Answered,
    Failed,
    Failure,
    Infer,
    Item,
    Load,
    Loaded,
    Unload,
    decode_reply,
    decode_request,
    encode,
)
from modelhost.workers.signatures import Signature, TensorSpec

texts = st.text(max_size=30)
items = st.builds(
    Item, texts, texts, st.dictionaries(texts, texts, max_size=3), st.integers(0, 2**63)
)
requests = st.one_of(
    st.builds(
        Load,
        model=texts,
        path=texts,
        root=st.none() | texts,
        handler=st.none() | texts,
        model_file=st.none() | texts,
    ),
    st.builds(Unload, texts),
    st.builds(Infer, texts, st.lists(items, max_size=4).map(tuple)),
)


@given(requests)
def test_a_request_decodes_to_what_was_sent(request: Load | Unload | Infer) -> None:
    assert decode_request(encode(request)) == request


def test_a_reply_decodes_to_its_own_type() -> None:
    loaded = Loaded(footprint=10, load_ms=2.0, batches=True)
    answered = Answered((Answer("application/json", 3), Answer(failure=Failure("x.E", "m"))), 1.5)
    assert decode_reply(encode(answered)) == answered
    assert decode_reply(encode(loaded)) == loaded


def test_a_reply_where_a_request_belongs_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_request(encode(Loaded(footprint=1, load_ms=1.0, batches=False)))


def test_modelhost_errors_come_back_as_themselves() -> None:
    failure = decode_reply(encode(Failed(Failure.of(ModelNotLoaded("m is not loaded")))))
    assert isinstance(failure, Failed)
    error = failure.failure.rebuild()
    assert type(error) is ModelNotLoaded and str(error) == "m is not loaded"


def test_users_lookalike_exception_is_handler_error() -> None:
    """A user's exception named like ours is a handler error.

    Rebuilt by its full path: a handler's own `QueueFull` must not turn into a 429."""

    class QueueFull(Exception):  # noqa: N818 - named like modelhost's on purpose
        pass

    error = Failure.of(QueueFull("my queue")).rebuild()
    assert type(error) is HandlerError and str(error) == "QueueFull: my queue"
    assert type(Failure.of(errors.QueueFull("full")).rebuild()) is errors.QueueFull


@pytest.mark.parametrize("message", [Load, Loaded])
def test_a_message_of_many_fields_takes_keywords_only(message: type[Load | Loaded]) -> None:
    """Ten values in a row (a path for a model file, a byte count for a row limit) swap unseen."""
    with pytest.raises(TypeError, match="positional"):
        message("m", "p")


def test_a_failures_long_message_is_cut_to_fit_its_frame() -> None:
    failure = Failure.of(ValueError("z" * 2_000_000))
    assert failure.message.startswith("z" * MAX_MESSAGE_CHARS + "... (")
    assert "1,983,616 more characters cut" in failure.message
    assert Failure.of(ValueError("short")).message == "short"


def test_a_loaded_reply_carries_the_models_signature() -> None:
    signature = Signature((TensorSpec("x", "FP32", (-1, 4)),), (TensorSpec("y", "INT64", (-1,)),))
    loaded = Loaded(footprint=10, load_ms=2.0, batches=True, signature=signature)
    assert decode_reply(encode(loaded)) == loaded


def test_a_loaded_reply_without_a_signature_still_decodes() -> None:
    """A reply encoded before the field existed decodes, with no signature."""
    older = msgspec.msgpack.encode(
        {"op": "loaded", "footprint": 1, "load_ms": 1.0, "batches": False}
    )
    reply = decode_reply(older)
    assert isinstance(reply, Loaded) and reply.signature is None
