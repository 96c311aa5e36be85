"""The preamble a front sends first on each relayed connection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.fronts.preamble import Address, Preamble, decode, encode

hosts = st.sampled_from(["127.0.0.1", "::1", "10.0.0.7", "fe80::1%eth0", ""])
ports = st.integers(0, 65535)


@given(st.integers(0, 1024), hosts, ports, hosts, ports)
def test_a_preamble_reads_back_as_written(
    front: int, client: str, client_port: int, server: str, server_port: int
) -> None:
    preamble = Preamble(front, Address(client, client_port), Address(server, server_port))
    line = encode(preamble)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line[:-1]) == preamble


@pytest.mark.parametrize(
    "line", [b"POST /invocations HTTP/1.1", b"MHFRONT 1 a 1 b", b"XXFRONT 1 a 1 b 2"]
)
def test_anything_else_is_refused(line: bytes) -> None:
    with pytest.raises(ValueError):
        decode(line)
