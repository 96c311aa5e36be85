"""The management methods' rule: loopback callers may, others only with the bearer token."""

from __future__ import annotations

import pytest

from modelhost.errors import Forbidden, Unauthorized
from modelhost.rpc.access import Access


class Caller:
    """What the rule reads of a call's context: the peer and the metadata sent."""

    def __init__(self, peer: str, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._peer, self._metadata = peer, metadata

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


ELSEWHERE = "ipv4:10.1.2.3:40000"


@pytest.mark.parametrize("peer", ["ipv4:127.0.0.1:5000", "ipv6:%5B::1%5D:5000"])
def test_loopback_callers_may_manage(peer: str) -> None:
    Access(str).authorize(Caller(peer))


def test_callers_elsewhere_are_refused_without_a_token_configured() -> None:
    with pytest.raises(Forbidden, match="loopback only"):
        Access(str).authorize(Caller(ELSEWHERE))


def test_callers_elsewhere_need_the_token() -> None:
    access = Access(lambda: "s3cret")
    access.authorize(Caller(ELSEWHERE, (("authorization", "Bearer s3cret"),)))
    for metadata in [(), (("authorization", "Bearer wrong"),)]:
        with pytest.raises(Unauthorized, match="authorization: Bearer"):
            access.authorize(Caller(ELSEWHERE, metadata))
