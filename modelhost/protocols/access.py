"""Which callers may manage models without a token: loopback, naming this machine."""

from __future__ import annotations

import ipaddress


def trusted_as_local(address: str, authority: str) -> bool:
    """A loopback caller that names this machine (localhost, *.localhost, an address, or none).

    A loopback caller naming another machine came through a proxy or a rebound DNS name, so it
    counts as from elsewhere.
    """
    return is_loopback(address) and names_this_machine(authority)


def names_this_machine(host_header: str) -> bool:
    """Whether a Host or :authority cannot be a rebound name: localhost, an IP address, or none."""
    host = host_header.lower()
    if host.startswith("["):  # [::1]:8080
        host = host[1 : host.find("]")]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return not host or host == "localhost" or host.endswith(".localhost") or is_address(host)


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
