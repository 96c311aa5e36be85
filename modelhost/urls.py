"""URLs as shown to people, without passwords or query-string signatures.

Whoever reads events or ``GET /models`` may not be whoever gave the URL.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MASK = "***"


def redact_url(url: str) -> str:
    """`url` with user information and query values masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rpartition("@")[2]
    query = "&".join(
        field.partition("=")[0] + ("=" + MASK if "=" in field else "")
        for field in parts.query.split("&")
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
