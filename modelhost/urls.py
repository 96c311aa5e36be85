"""URLs as they are shown to people (events, descriptions, messages): without their secrets.

A URL may carry a password (``https://user:pass@host/…``) or a signature in its query string
(a presigned S3 URL's ``X-Amz-Signature``, an Azure SAS token). Whoever may read events or
``GET /models`` is not necessarily whoever gave the URL, so both are masked wherever one is shown.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MASK = "***"


def redact_url(url: str) -> str:
    """`url` with its user information and every query value replaced by ``***``."""
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
