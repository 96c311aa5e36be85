"""Who may call the management methods over gRPC: the HTTP management API's rules.

No Host check against DNS rebinding: a web page cannot make a gRPC call.
"""

from __future__ import annotations

import hmac
import urllib.parse

from modelhost.errors import Forbidden, Unauthorized
from modelhost.loopback import is_loopback
from modelhost.rpc.calls import Context


class Access:
    def __init__(self, management_token: str) -> None:
        self.token = management_token

    def authorize(self, context: Context) -> None:
        if is_loopback(peer_address(context.peer())):
            return
        if not self.token:
            raise Forbidden(
                "management calls are allowed from loopback only; configure "
                "management_token to allow them from elsewhere with a bearer token"
            )
        given = dict(context.invocation_metadata() or ()).get("authorization", "")
        if not isinstance(given, str) or not hmac.compare_digest(
            given.encode(), f"Bearer {self.token}".encode()
        ):
            raise Unauthorized(
                "management calls from outside this machine need the metadata "
                "'authorization: Bearer <token>' with the configured token"
            )


def peer_address(peer: str) -> str:
    """The address in grpc's peer string, such as ipv6:[::1]:5000."""
    kind, _, rest = urllib.parse.unquote(peer).partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""  # a Unix socket: not known to be loopback
