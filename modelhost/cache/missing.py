"""Names a remote store said it does not have, remembered briefly.

Otherwise a scan of made-up names sends the store a request per request.
"""

from __future__ import annotations

from modelhost.cache.recent import RecentFailures
from modelhost.errors import ModelNotFound


class MissingUrls(RecentFailures):
    """What the store said no to; stale after the TTL alone, since an upload is rare that soon."""

    TTL_S = 5.0

    def check(self, url: str) -> None:
        """Raise the store's `ModelNotFound` again if it is recent."""
        failed = self.recall(url)
        if failed is not None:
            raise ModelNotFound(f"{failed.message} (the store said so under {self.ttl_s:g} s ago)")

    def remember(self, url: str, error: ModelNotFound) -> None:
        self.keep(url, str(error))
