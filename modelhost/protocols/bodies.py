"""Request bodies read within their limit (answers are held to theirs in workers/answers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from modelhost.errors import BadRequestBody, PayloadTooLarge
from modelhost.units import format_bytes


async def read_within(chunks: AsyncIterator[bytes], declared: int, limit: int) -> bytes:
    """A request body, refused with 413 once it passes `limit`."""
    check_body_size(declared, limit)
    parts: list[bytes] = []
    received = 0
    async for chunk in chunks:
        received += len(chunk)
        check_body_size(received, limit)
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def check_body_size(size: int, limit: int) -> None:
    if size > limit:
        raise PayloadTooLarge(
            f"the request body is {format_bytes(size)} but max_request_size is "
            f"{format_bytes(limit)}; send less or raise --max-request-size"
        )


def body_cut_short() -> BadRequestBody:
    return BadRequestBody(
        "the client closed the connection before its request body came whole; the request was "
        "not run"
    )
