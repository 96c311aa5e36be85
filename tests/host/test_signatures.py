"""The host keeps a model's signature after it leaves memory, bounded, until its artifact
changes."""

from __future__ import annotations

from modelhost.host.signatures import Signatures
from modelhost.workers.signatures import Signature, TensorSpec


def said(name: str) -> Signature:
    return Signature((TensorSpec(name, "FP64", (-1, 4)),))


def test_an_unloaded_model_keeps_its_signature() -> None:
    signatures = Signatures()
    signatures.loaded_now("a", said("x"))
    signatures.left("a")
    assert signatures.of("a") == said("x")
    signatures.loaded_now("a", said("y"))
    assert signatures.of("a") == said("y")


def test_the_least_recently_seen_go_past_the_bound() -> None:
    """A read counts as seen: the name read last stays, the one not read goes."""
    signatures = Signatures(max_kept=2)
    for name in "abc":
        signatures.loaded_now(name, said(name))
    signatures.left("a")
    signatures.left("b")
    assert signatures.of("a") == said("a")
    signatures.left("c")
    assert (signatures.of("a"), signatures.of("b"), signatures.of("c")) == (
        said("a"),
        None,
        said("c"),
    )
    assert len(signatures.kept) == 2


def test_a_changed_artifact_is_forgotten() -> None:
    signatures = Signatures()
    signatures.loaded_now("a", said("x"))
    signatures.left("a")
    signatures.forget("a")
    assert signatures.of("a") is None


def test_a_load_that_tells_nothing_drops_the_old_signature() -> None:
    """A new load is the truth, even when its handler says nothing."""
    signatures = Signatures()
    signatures.loaded_now("a", said("x"))
    signatures.left("a")
    signatures.loaded_now("a", None)
    assert signatures.of("a") is None
