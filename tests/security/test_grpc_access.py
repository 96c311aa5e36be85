"""The gRPC management rule with the caller the guard reports: loopback is trusted only while
the connection's authority names this machine."""

from __future__ import annotations

import pytest

from modelhost.errors import Forbidden, Unauthorized
from modelhost.rpc.access import Access


class Call:
    """A call's context as the rule reads it: a peer and the metadata sent."""

    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.metadata = metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata


def reporting(address: str, authority: str) -> Access:
    return Access(str, lambda peer: (address, authority))


def test_loopback_naming_this_machine_is_trusted() -> None:
    reporting("127.0.0.1", "").authorize(Call())


def test_loopback_naming_another_machine_is_refused_naming_it() -> None:
    with pytest.raises(Forbidden, match="models.example.com"):
        reporting("127.0.0.1", "models.example.com").authorize(Call())


def test_a_caller_the_guard_did_not_relay_needs_the_token() -> None:
    with pytest.raises(Forbidden, match="loopback only"):
        reporting("", "").authorize(Call())
    access = Access(lambda: "s3cret", lambda peer: ("", ""))
    access.authorize(Call((("authorization", "Bearer s3cret"),)))
    with pytest.raises(Unauthorized):
        access.authorize(Call())
