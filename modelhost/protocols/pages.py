"""Page sizes, and the cursors that carry a listing from one page to the next."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from modelhost.errors import BadRequestBody
from modelhost.names import echo
from modelhost.protocols.params import is_whole_number

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
TOKEN_PREFIX = "n"  # then the last name listed, in URL-safe base64


def page_size(text: str | None, param: str = "limit") -> int:
    """The page size `param` asks for; its name is in the refusal, as the caller wrote it."""
    if not text:
        return DEFAULT_PAGE_SIZE
    if not is_whole_number(text) or int(text) < 1:
        raise BadRequestBody(
            f"invalid {param} {echo(text)}: give a page size from 1 to {MAX_PAGE_SIZE}"
        )
    return min(MAX_PAGE_SIZE, int(text))


def page_size_in(query: Mapping[str, str], *params: str) -> int:
    """The page size the first of `params` the query gives asks for."""
    given = next((p for p in params if query.get(p)), params[0])
    return page_size(query.get(given), given)


def encode_token(name: str) -> str:
    """The cursor after `name`: never a whole number, so TorchServe's offsets stay apart."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def decode_token(token: str) -> str:
    encoded = token.removeprefix(TOKEN_PREFIX)
    try:
        if encoded == token:
            raise ValueError("not a cursor")
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise BadRequestBody(
            f"invalid next_page_token {echo(token)}: pass the one the last page returned"
        ) from None
