"""Who may call the management methods over gRPC: the HTTP management API's rules.

A loopback caller must name this machine in :authority, as an HTTP one must in Host: a proxy on
this machine (nginx's grpc_pass, Envoy) makes every caller loopback. The fronts show a servicer
neither, so the port's guard names them in a header of each call (rpc/callers.py).
"""

from __future__ import annotations

import hmac
import urllib.parse
from collections.abc import Callable

from modelhost.errors import Forbidden, Unauthorized
from modelhost.names import echo
from modelhost.protocols.access import is_loopback, trusted_as_local
from modelhost.protocols.keys import MANAGEMENT, TokenKeys, refusal_message
from modelhost.rpc import callers
from modelhost.rpc.calls import Context, metadata_of

Caller = Callable[[Context], tuple[str, str]]  # a call → (address, foreign authority or "")


class Access:
    def __init__(
        self,
        management_token: Callable[[], str],
        caller: Caller | None = None,
        keys: TokenKeys | None = None,
    ) -> None:
        self.token = management_token
        self.caller = caller or by_peer
        self.keys = keys  # TorchServe's token authorization; None: off

    def authorize(self, context: Context) -> None:
        if self.keys:  # the management key decides, from anywhere
            given = metadata_of(context).get("authorization", "")
            if not self.keys.allows(MANAGEMENT, str(given)):
                raise Unauthorized(refusal_message(MANAGEMENT))
            return
        address, authority = self.caller(context)
        if trusted_as_local(address, authority):
            return
        token = self.token()
        if not token:
            raise Forbidden(refusal(address, authority))
        given = metadata_of(context).get("authorization", "")
        if not isinstance(given, str) or not hmac.compare_digest(
            given.encode(), f"Bearer {token}".encode()
        ):
            raise Unauthorized(
                "management calls from outside this machine need the metadata "
                "'authorization: Bearer <token>' with the configured token"
            )


def refusal(address: str, authority: str) -> str:
    if is_loopback(address):
        return (
            f"management calls from loopback must name this machine in :authority (localhost "
            f"or an IP address), not {echo(authority)}: a proxy's callers need the token "
            "(management_token)"
        )
    return (
        "management calls are allowed from loopback only; configure "
        "management_token to allow them from elsewhere with a bearer token"
    )


def by_peer(context: Context) -> tuple[str, str]:
    """The caller as grpc's peer string names it, for a server without a guard."""
    return peer_address(context.peer()), ""


def by_guard(context: Context) -> tuple[str, str]:
    """The caller as the port's guard names it."""
    return callers.caller(context.invocation_metadata())


def peer_address(peer: str) -> str:
    """The address in grpc's peer string, such as ipv6:[::1]:5000."""
    kind, _, rest = urllib.parse.unquote(peer).partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""  # a Unix socket: not known to be loopback
