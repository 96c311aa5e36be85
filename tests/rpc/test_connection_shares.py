"""At the gRPC port's connection cap, which connection the guard ends for a newcomer: the least
busy of the address holding the most, where it holds two more than the newcomer's address."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from modelhost.rpc.admission import ConnectionRate
from modelhost.rpc.frames import Limits, StreamBudget
from modelhost.rpc.guard import Admission, Guard, Hop, Relay

LIMITS = Limits(16, 16 * 2**10, 0.4, 32, idle_s=300, age_s=3600, age_grace_s=1.0)


@pytest.fixture
def sock() -> Iterator[socket.socket]:
    with socket.socket() as unused:  # the guard never starts: no connection is accepted
        yield unused


def holding(sock: socket.socket, *addresses: str) -> tuple[Guard, list[Relay]]:
    """A guard at its cap, a connection from each of `addresses`."""
    admission = Admission(len(addresses), ConnectionRate(1000, 8), StreamBudget(64))
    guard = Guard(sock, Hop(), limits=LIMITS, admission=admission)
    relays = []
    for address in addresses:
        relay = Relay(guard)
        relay.address = address
        guard.relays.add(relay)
        relays.append(relay)
    return guard, relays


def test_the_address_holding_most_gives_up_its_least_busy(sock: socket.socket) -> None:
    guard, relays = holding(sock, "a", "a", "a", "b")
    relays[0].frames.open.add(1)
    relays[2].frames.open.update({1, 3})
    assert guard.room_for("c") is relays[1]
    assert guard.room_for("b") is relays[1]


def test_the_holder_cannot_take_back_what_it_gave_up(sock: socket.socket) -> None:
    guard, _ = holding(sock, "a", "a", "a", "b")
    assert guard.room_for("a") is None


def test_addresses_within_one_of_each_other_keep_theirs(sock: socket.socket) -> None:
    """Else two clients at the cap would trade one connection back and forth."""
    guard, relays = holding(sock, "a", "a", "b")
    assert guard.room_for("b") is None
    assert guard.room_for("c") in relays[:2]


def test_a_connection_told_to_go_counts_for_no_one(sock: socket.socket) -> None:
    guard, relays = holding(sock, "a", "a", "b")
    relays[0].told_to_go = "connections shared by address"
    assert guard.room_for("c") is None
