"""A port the server cannot bind stops the start with advice that fits the error."""

from __future__ import annotations

import errno

import pytest
import uvicorn

from modelhost.http.server import ListeningServer


def refusal(error_number: int, flag: str = "--port") -> str:
    server = ListeningServer(uvicorn.Config(app=None, host="10.9.8.7", port=80), flag)
    return server.refusal(OSError(error_number, "error while attempting to bind"))


def test_a_taken_port_asks_for_another() -> None:
    message = refusal(errno.EADDRINUSE, "--management-port")
    assert message.startswith("cannot listen on 10.9.8.7:80: address already in use")
    assert "choose another --management-port" in message


def test_an_address_not_of_this_machine_asks_for_another_host() -> None:
    message = refusal(errno.EADDRNOTAVAIL, "--metrics-port")
    assert "10.9.8.7 is not an address of this machine" in message
    assert "--metrics-host" in message and "choose another --metrics-port" not in message


@pytest.mark.parametrize("error_number", [errno.EACCES, errno.EPERM])
def test_a_privileged_port_says_so(error_number: int) -> None:
    message = refusal(error_number)
    assert "below 1024" in message and "--port" in message
